"""float16 and bfloat16 across the float op families, on the EP.

float16: compared with ORT's CPU EP. On x86 it runs most float16 nodes through float32 (it inserts
casts around the float32 kernel where it has no float16 one), so the reference is a float32 result
rounded once to float16; the EP computes the same way (half inputs widened, one rounding).

bfloat16: ORT's CPU EP has no bfloat16 kernel for these ops (and numpy no bfloat16 to feed), so
the EP model is Cast(float32 -> bfloat16) -> op -> Cast(bfloat16 -> float32), every node on the
EP, and the reference is ORT CPU's float32 run of the op on the same bfloat16-rounded inputs,
rounded to bfloat16.

Tolerances (stated per family below):
- float16 elementwise: 1e-3 relative (one float16 ulp, 2^-10 at the bottom of a binade: the
  float32 results of the two implementations can round to neighbouring float16 values).
- float16 reductions, matmul, conv, norms, pools, resize: the same 1e-3 relative plus 1e-3 absolute:
  the float32 sums run in a different order, which decides the last float16 bit of results that
  cancel towards 0.
- bfloat16: 1e-2 relative (one bfloat16 ulp, 2^-7 at the bottom of a binade) plus 1e-2 absolute
  for the summing families (for the same reason as above, at bfloat16's coarser ulp).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from opcheck import NP_TO_ONNX, check_on_ep, single_node_model
from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, run_cpu

BF16 = ml_dtypes.bfloat16
ELEMENTWISE = dict(rtol=1e-3, atol=1e-4)
SUMMING = dict(rtol=1e-3, atol=1e-3)
BF_ELEMENTWISE = dict(rtol=1e-2, atol=1e-3)
BF_SUMMING = dict(rtol=1e-2, atol=1e-2)


def u(rng, shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


X = (2, 3, 4)


class Case:
    """op(data inputs..., consts...): data are float tensors (made half), consts stay as given
    (initializers: axes, scales, ...). `inputs` is a list of names in node order; a name absent
    from both dicts is an absent optional input."""

    def __init__(self, op, data, consts=None, attrs=None, order=None, opset=21, summing=False,
                 n_outputs=1, domain=""):
        self.op, self.data, self.consts = op, data, consts or {}
        self.attrs, self.opset, self.summing, self.n_outputs = attrs or {}, opset, summing, n_outputs
        self.order = order or (list(data) + list(self.consts))
        self.domain = domain

    def __repr__(self):
        return f"{self.op}{self.attrs or ''}"


def unary(op, lo=-2.0, hi=2.0, **kw):
    return lambda rng: Case(op, {"x": u(rng, X, lo, hi)}, **kw)


def binary(op, lo=-2.0, hi=2.0, **kw):
    return lambda rng: Case(op, {"a": u(rng, X, lo, hi), "b": u(rng, (3, 4), lo, hi)}, **kw)


I64 = np.int64
CASES = {
    # elementwise and activations
    **{op: unary(op) for op in ["Abs", "Neg", "Exp", "Reciprocal", "Relu", "Sigmoid", "Tanh", "Erf",
                               "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Tan", "Atan", "Sinh",
                               "Cosh", "Asinh", "Softplus", "Softsign", "Mish", "HardSwish"]},
    "Log": unary("Log", 0.1, 4.0),
    "Sqrt": unary("Sqrt", 0.1, 4.0),
    "Asin": unary("Asin", -0.95, 0.95),
    "Acos": unary("Acos", -0.95, 0.95),
    "Atanh": unary("Atanh", -0.95, 0.95),
    "Acosh": unary("Acosh", 1.05, 4.0),
    "Gelu": unary("Gelu", opset=20),
    "Gelu-tanh": unary("Gelu", opset=20, attrs={"approximate": "tanh"}),
    "LeakyRelu": unary("LeakyRelu", attrs={"alpha": 0.3}),
    "Elu": unary("Elu", attrs={"alpha": 0.7}),
    "Selu": unary("Selu"),
    "HardSigmoid": unary("HardSigmoid", attrs={"alpha": 0.3, "beta": 0.4}),
    "ThresholdedRelu": unary("ThresholdedRelu", attrs={"alpha": 0.5}),
    "PRelu": lambda rng: Case("PRelu", {"x": u(rng, X), "slope": u(rng, (4,))}),
    **{op: binary(op) for op in ["Add", "Sub", "Mul", "Max", "Min"]},
    "Div": lambda rng: Case("Div", {"a": u(rng, X), "b": u(rng, (3, 4), 0.5, 2.0)}),
    "Pow": lambda rng: Case("Pow", {"a": u(rng, X, 0.1, 2.0), "b": u(rng, (3, 4))}),
    "Mod": lambda rng: Case("Mod", {"a": u(rng, X, -8, 8), "b": u(rng, (3, 4), 0.5, 2.0)},
                            attrs={"fmod": 1}),
    "Sum": lambda rng: Case("Sum", {"a": u(rng, X), "b": u(rng, (3, 4)), "c": u(rng, X)},
                            summing=True),
    "Mean": lambda rng: Case("Mean", {"a": u(rng, X), "b": u(rng, (3, 4)), "c": u(rng, X)},
                             summing=True),
    "Clip": lambda rng: Case("Clip", {"x": u(rng, X), "lo": np.array(-0.5, np.float32),
                                      "hi": np.array(0.75, np.float32)}),
    # matmul
    "MatMul": lambda rng: Case("MatMul", {"a": u(rng, (2, 5, 16)), "b": u(rng, (16, 6))},
                               summing=True),
    "Gemm": lambda rng: Case("Gemm", {"a": u(rng, (5, 16)), "b": u(rng, (6, 16)), "c": u(rng, (6,))},
                             attrs={"transB": 1, "alpha": 0.5, "beta": 2.0}, summing=True),
    "Einsum": lambda rng: Case("Einsum", {"a": u(rng, (2, 5, 16)), "b": u(rng, (2, 16, 3))},
                               attrs={"equation": "bij,bjk->bik"}, summing=True),
    # normalisation and softmax
    "Softmax": lambda rng: Case("Softmax", {"x": u(rng, (3, 17), -4, 4)}, summing=True),
    "LogSoftmax": lambda rng: Case("LogSoftmax", {"x": u(rng, (3, 17), -4, 4)}, summing=True),
    "LayerNormalization": lambda rng: Case(
        "LayerNormalization", {"x": u(rng, (3, 16)), "s": u(rng, (16,)), "b": u(rng, (16,))},
        summing=True),
    "RMSNormalization": lambda rng: Case("RMSNormalization", {"x": u(rng, (3, 16)), "s": u(rng, (16,))},
                                         opset=23, summing=True),
    "BatchNormalization": lambda rng: Case(
        "BatchNormalization", {"x": u(rng, (2, 3, 4, 5)), "s": u(rng, (3,)), "b": u(rng, (3,)),
                               "m": u(rng, (3,)), "v": u(rng, (3,), 0.5, 2.0)}, summing=True),
    "InstanceNormalization": lambda rng: Case(
        "InstanceNormalization", {"x": u(rng, (2, 3, 4, 5)), "s": u(rng, (3,)), "b": u(rng, (3,))},
        summing=True),
    "GroupNormalization": lambda rng: Case(
        "GroupNormalization", {"x": u(rng, (2, 4, 3, 5)), "s": u(rng, (4,)), "b": u(rng, (4,))},
        attrs={"num_groups": 2}, summing=True),
    "LpNormalization": lambda rng: Case("LpNormalization", {"x": u(rng, (3, 4, 5))},
                                        attrs={"axis": 1, "p": 2}, summing=True),
    "LRN": lambda rng: Case("LRN", {"x": u(rng, (2, 5, 3, 4))}, attrs={"size": 3}, summing=True),
    "MeanVarianceNormalization": lambda rng: Case("MeanVarianceNormalization",
                                                  {"x": u(rng, (2, 3, 4, 5))}, summing=True),
    # reductions (axes input from opset 18)
    **{op: (lambda op: lambda rng: Case(op, {"x": u(rng, (3, 4, 5), 0.1, 2.0)},
                                        {"axes": np.array([1, -1], I64)}, summing=True,
                                        attrs={"keepdims": 0}))(op)
       for op in ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                  "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]},
    # convolution and pooling
    "Conv": lambda rng: Case("Conv", {"x": u(rng, (1, 4, 7, 6)), "w": u(rng, (6, 2, 3, 3)),
                                      "b": u(rng, (6,))},
                             attrs={"group": 2, "pads": [1, 0, 1, 2], "strides": [2, 1]},
                             summing=True),
    "ConvTranspose": lambda rng: Case("ConvTranspose", {"x": u(rng, (1, 4, 5, 4)),
                                                        "w": u(rng, (4, 3, 3, 2)), "b": u(rng, (3,))},
                                      attrs={"strides": [2, 1], "pads": [1, 0, 0, 1]}, summing=True),
    "MaxPool": lambda rng: Case("MaxPool", {"x": u(rng, (1, 3, 7, 6))},
                                attrs={"kernel_shape": [3, 2], "pads": [1, 1, 1, 0]}),
    "MaxPool-indices": lambda rng: Case("MaxPool", {"x": u(rng, (1, 3, 7, 6))}, n_outputs=2,
                                        attrs={"kernel_shape": [3, 2], "strides": [2, 2]}),
    "AveragePool": lambda rng: Case("AveragePool", {"x": u(rng, (1, 3, 7, 6))},
                                    attrs={"kernel_shape": [3, 2], "pads": [1, 1, 1, 0]},
                                    summing=True),
    "LpPool": lambda rng: Case("LpPool", {"x": u(rng, (1, 3, 7, 6))},
                               attrs={"kernel_shape": [3, 2], "p": 2}, summing=True),
    "GlobalAveragePool": lambda rng: Case("GlobalAveragePool", {"x": u(rng, (2, 3, 5, 4))},
                                          summing=True),
    "GlobalMaxPool": lambda rng: Case("GlobalMaxPool", {"x": u(rng, (2, 3, 5, 4))}),
    "GlobalLpPool": lambda rng: Case("GlobalLpPool", {"x": u(rng, (2, 3, 5, 4))}, summing=True),
    # resize
    **{f"Resize-{mode}": (lambda mode: lambda rng: Case(
        "Resize", {"x": u(rng, (1, 2, 4, 5))}, {"scales": np.array([1, 1, 1.5, 2], np.float32)},
        order=["x", "roi", "scales"], attrs={"mode": mode}, opset=19, summing=True))(mode)
       for mode in ["nearest", "linear", "cubic"]},
}


def _model(case, dtype):
    data = {k: v.astype(dtype) for k, v in case.data.items()}
    inputs = {}
    for name in case.order:
        inputs[name] = data.get(name, case.consts.get(name))
    try:
        return single_node_model(case.op, inputs, attrs=case.attrs, initializers=case.consts,
                                 opset=case.opset, n_outputs=case.n_outputs), data
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError):
        pass
    # ONNX's shape inference fails on some function-bodied ops in float16 (GroupNormalization,
    # MeanVarianceNormalization): outputs typed only.
    elem = NP_TO_ONNX[np.dtype(dtype)]
    node = helper.make_node(case.op, [n if n in inputs and inputs[n] is not None else ""
                                      for n in case.order],
                            [f"out{i}" for i in range(case.n_outputs)], name="node", **case.attrs)
    g_in = [helper.make_tensor_value_info(k, elem, list(v.shape)) for k, v in data.items()]
    outs = [helper.make_tensor_value_info("out0", elem, None)]
    if case.n_outputs == 2:
        outs.append(helper.make_tensor_value_info("out1", TensorProto.INT64, None))
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in case.consts.items()]
    graph = helper.make_graph([node], "g", g_in, outs, inits)
    return make_model(graph, opset=case.opset, check=False), data


@pytest.mark.parametrize("name", sorted(CASES))
def test_float16(name, rng):
    case = CASES[name](rng)
    model, feeds = _model(case, np.float16)
    check_on_ep(model, feeds, **(SUMMING if case.summing else ELEMENTWISE))


def _bf16_model(case):
    """Cast(float32 -> bfloat16) -> op -> Cast back, over float32 graph inputs."""
    bf = TensorProto.BFLOAT16
    nodes, in_names, g_inputs = [], [], []
    for name in case.order:
        if name in case.data:
            nodes.append(helper.make_node("Cast", [name], [name + "_bf"], name="cast_" + name, to=bf))
            in_names.append(name + "_bf")
            g_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                          list(case.data[name].shape)))
        elif name in case.consts:
            in_names.append(name)
        else:
            in_names.append("")
    outs = [f"y{i}" for i in range(case.n_outputs)]
    nodes.append(helper.make_node(case.op, in_names, outs, name="node", **case.attrs))
    g_outputs = [helper.make_tensor_value_info("out0", TensorProto.FLOAT, None)]
    nodes.append(helper.make_node("Cast", ["y0"], ["out0"], name="cast_out", to=TensorProto.FLOAT))
    if case.n_outputs == 2:  # MaxPool's Indices: int64, returned as is
        nodes.append(helper.make_node("Identity", ["y1"], ["out1"], name="id_out"))
        g_outputs.append(helper.make_tensor_value_info("out1", TensorProto.INT64, None))
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in case.consts.items()]
    graph = helper.make_graph(nodes, "g", g_inputs, g_outputs, inits)
    return make_model(graph, opset=max(case.opset, 22), check=False)


# ONNX's Einsum schema has no bfloat16 (ORT rejects the model before any EP sees it).
NO_BF16_SCHEMA = {"Einsum"}


@pytest.mark.parametrize("name", sorted(set(CASES) - NO_BF16_SCHEMA))
def test_bfloat16(name, rng):
    case = CASES[name](rng)
    rounded = {k: v.astype(BF16).astype(np.float32) for k, v in case.data.items()}
    model = _bf16_model(case)
    run = EpRun(model, strict=True)
    try:
        got = run.run(rounded)
        assert_ran_on_ep(run, ["node", "cast_out"])
    finally:
        run.close()
    ref_model, _ = _model(case, np.float32)
    want = run_cpu(ref_model, rounded)
    tol = BF_SUMMING if case.summing else BF_ELEMENTWISE
    np.testing.assert_allclose(got[0], want[0].astype(BF16).astype(np.float32), **tol)
    if case.n_outputs == 2:
        np.testing.assert_array_equal(got[1], want[1])
