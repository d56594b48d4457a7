"""The pattern pass (src/ortmlx/ops/patterns): LayerNorm, RMSNorm and GELU chains as exporters
write them run as one op (the report's counters `pattern.*` and `paths` say which), equal to ORT's
CPU EP; chains that differ in any way (another axis, another eps placement, an interior value used
elsewhere) are left to the op-by-op path, as is everything with fast_patterns=0.

ORT's own graph optimizations fuse some of these chains before the EP sees them (LayerNorm into
LayerNormalization), so the EP sessions here run with them off; the CPU reference keeps them."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from ortmlx.testing import EpRun, layer_norm_kernel, make_model, mlx_backend, random_array
from pattern_check import OFF, run_pattern

LN_PATH = "LayerNorm chain -> mlx::fast::layer_norm"
LN_OP_PATH = "LayerNormalization -> mlx::fast::layer_norm"
LN_KERNEL = layer_norm_kernel()


def ln_path(mlx_path, residual=False):
    """The report's path of a fast LayerNorm: one CUDA kernel of ours on the GPU (with the
    residual Add that feeds it folded in, when there is one), else `mlx_path`."""
    if not LN_KERNEL:
        return mlx_path
    return ("LayerNorm (residual Add folded in) -> one CUDA kernel" if residual
            else "LayerNorm -> one CUDA kernel")

RMS_PATH = "RMSNorm chain -> mlx::fast::rms_norm"
# On the GPU (the CUDA flavour on an sm_90 device, where the GPU suite runs) a GELU chain is one
# hand-written kernel; elsewhere MLX ops.
_GELU_TARGET = "one CUDA kernel" if mlx_backend() == "gpu" else "one fused elementwise op"
GELU_ERF_PATH = f"GELU (erf) chain -> {_GELU_TARGET}"
GELU_TANH_PATH = f"GELU (tanh) chain -> {_GELU_TARGET}"


def const(name, value, dtype=np.float32):
    return onnx.numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def reduce_mean(inp, out, name, opset, axis=-1):
    if opset >= 18:
        return [h.make_node("ReduceMean", [inp, f"{name}_axes"], [out], name=name, keepdims=1)], \
            [const(f"{name}_axes", [axis], np.int64)]
    return [h.make_node("ReduceMean", [inp], [out], name=name, axes=[axis], keepdims=1)], []


def model_of(nodes, inits, shape, opset=17, out_shape=None, extra_outputs=()):
    x = h.make_tensor_value_info("x", T.FLOAT, list(shape))
    outs = [h.make_tensor_value_info("y", T.FLOAT, list(out_shape or shape))]
    stat_shape = list(shape[:-1]) + [1]  # row statistics, keepdims
    outs += [h.make_tensor_value_info(o, T.FLOAT, stat_shape) for o in extra_outputs]
    return make_model(h.make_graph(nodes, "g", [x], outs, inits), opset=opset)


def layer_norm_chain(shape, opset=17, square="pow", affine=True, axis=-1, eps_inside=True,
                     mean_out=False):
    """The torch export of nn.LayerNorm over `axis` (the last one unless told)."""
    n = h.make_node
    nodes, inits = [], [const("two", 2.0), const("eps", 1e-5)]
    more, ini = reduce_mean("x", "m", "rm1", opset, axis)
    nodes += more
    inits += ini
    nodes.append(n("Sub", ["x", "m"], ["d"], name="sub"))
    nodes.append(n("Pow", ["d", "two"], ["p"], name="pow") if square == "pow"
                 else n("Mul", ["d", "d"], ["p"], name="sq"))
    more, ini = reduce_mean("p", "v", "rm2", opset, axis)
    nodes += more
    inits += ini
    if eps_inside:
        nodes += [n("Add", ["v", "eps"], ["ve"], name="add_eps"),
                  n("Sqrt", ["ve"], ["s"], name="sqrt")]
    else:  # eps added to the standard deviation: another normalisation
        nodes += [n("Sqrt", ["v"], ["sv"], name="sqrt"),
                  n("Add", ["sv", "eps"], ["s"], name="add_eps")]
    last = "y" if not affine else "nrm"
    nodes.append(n("Div", ["d", "s"], [last], name="div"))
    if affine:
        c = shape[axis]
        rng = np.random.default_rng(3)
        inits += [const("gamma", rng.uniform(0.5, 1.5, c)), const("beta", rng.uniform(-1, 1, c))]
        nodes += [n("Mul", ["nrm", "gamma"], ["sc"], name="scale"),
                  n("Add", ["beta", "sc"], ["y"], name="shift")]
    return model_of(nodes, inits, shape, opset, extra_outputs=("m",) if mean_out else ())


def rms_chain(shape, form="div", weight=True, cast=False, opset=17):
    """RMSNorm as torch exports it: x * rsqrt(mean(x^2) + eps) [* w]."""
    n = h.make_node
    nodes, inits = [], [const("two", 2.0), const("eps", 1e-6), const("one", 1.0)]
    nodes.append(n("Pow", ["x", "two"], ["p"], name="pow"))
    more, ini = reduce_mean("p", "v", "rm", opset)
    nodes += more
    inits += ini
    nodes += [n("Add", ["v", "eps"], ["ve"], name="add_eps"), n("Sqrt", ["ve"], ["s"], name="sqrt")]
    out = "nrm" if (weight or cast) else "y"
    if form == "div":
        nodes.append(n("Div", ["x", "s"], [out], name="div"))
    elif form == "reciprocal":
        nodes += [n("Reciprocal", ["s"], ["r"], name="recip"), n("Mul", ["x", "r"], [out], name="mul")]
    else:  # Div(1, s) then Mul
        nodes += [n("Div", ["one", "s"], ["r"], name="inv"), n("Mul", ["r", "x"], [out], name="mul")]
    if cast:
        nxt = "nc" if weight else "y"
        nodes.append(n("Cast", [out], [nxt], name="cast", to=T.FLOAT))
        out = nxt
    if weight:
        inits.append(const("w", np.random.default_rng(4).uniform(0.5, 1.5, shape[-1])))
        nodes.append(n("Mul", ["w", out], ["y"], name="weight"))
    return model_of(nodes, inits, shape, opset)


def gelu_erf_chain(shape, scale="div", tail=0):
    n = h.make_node
    inits = [const("sqrt2", np.sqrt(2.0)), const("rsqrt2", np.sqrt(0.5)), const("one", 1.0),
             const("half", 0.5)]
    nodes = [n("Div", ["x", "sqrt2"], ["u"], name="scale") if scale == "div"
             else n("Mul", ["rsqrt2", "x"], ["u"], name="scale"),
             n("Erf", ["u"], ["e"], name="erf"), n("Add", ["e", "one"], ["a"], name="add_one")]
    if tail == 0:
        nodes += [n("Mul", ["x", "a"], ["t"], name="mul_x"), n("Mul", ["t", "half"], ["y"], name="mul_half")]
    else:
        nodes += [n("Mul", ["x", "half"], ["hx"], name="mul_half"), n("Mul", ["hx", "a"], ["y"], name="mul_x")]
    return model_of(nodes, inits, shape)


def gelu_tanh_chain(shape):
    """GPT-2's NewGELUActivation as TorchScript exports it."""
    n = h.make_node
    inits = [const("half", 0.5), const("three", 3.0), const("a", 0.044715),
             const("k", np.sqrt(2.0 / np.pi)), const("one", 1.0)]
    nodes = [n("Mul", ["x", "half"], ["hx"], name="mul_half"),
             n("Pow", ["x", "three"], ["c"], name="pow"),
             n("Mul", ["c", "a"], ["ca"], name="mul_a"),
             n("Add", ["x", "ca"], ["i"], name="add_x"),
             n("Mul", ["i", "k"], ["ik"], name="mul_k"),
             n("Tanh", ["ik"], ["t"], name="tanh"),
             n("Add", ["t", "one"], ["t1"], name="add_one"),
             n("Mul", ["hx", "t1"], ["y"], name="mul_out")]
    return model_of(nodes, inits, shape)


def taken(report, pattern):
    return report.counters().get(f"pattern.{pattern}", 0)


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("square", ["pow", "mul"])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_chain(opset, square, affine, rng):
    x = random_array(rng, (2, 5, 16), low=-3, high=3) + 4.0  # a row mean away from 0
    report = run_pattern(layer_norm_chain((2, 5, 16), opset, square, affine), {"x": x})
    assert taken(report, "layer_norm") == 1
    assert ln_path(LN_PATH) in report.paths()


def test_rows_of_one_and_many_shapes(rng):
    model = layer_norm_chain((3, 1))
    report = run_pattern(model, {"x": random_array(rng, (3, 1))})
    assert taken(report, "layer_norm") == 1


@pytest.mark.parametrize("form", ["div", "reciprocal", "one_over"])
@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("cast", [False, True])
def test_rms_norm_chain(form, weight, cast, rng):
    x = random_array(rng, (2, 7, 24))
    report = run_pattern(rms_chain((2, 7, 24), form, weight, cast), {"x": x})
    assert taken(report, "rms_norm") == 1
    assert RMS_PATH in report.paths()


def test_rms_norm_chain_opset18(rng):
    x = random_array(rng, (4, 32))
    assert taken(run_pattern(rms_chain((4, 32), opset=18), {"x": x}), "rms_norm") == 1


@pytest.mark.parametrize("scale", ["div", "mul"])
@pytest.mark.parametrize("tail", [0, 1])
def test_gelu_erf_chain(scale, tail, rng):
    x = random_array(rng, (3, 40), low=-4, high=4)
    report = run_pattern(gelu_erf_chain((3, 40), scale, tail), {"x": x}, rtol=1e-5, atol=1e-6)
    assert taken(report, "gelu_erf") == 1
    assert GELU_ERF_PATH in report.paths()


def test_gelu_tanh_chain(rng):
    x = random_array(rng, (3, 40), low=-4, high=4)
    report = run_pattern(gelu_tanh_chain((3, 40)), {"x": x}, rtol=1e-5, atol=1e-6)
    assert taken(report, "gelu_tanh") == 1
    assert GELU_TANH_PATH in report.paths()


# ------------------------------------------------------------------ chains that do not match


def test_layer_norm_over_another_axis_is_not_taken(rng):
    x = random_array(rng, (2, 6, 5))
    report = run_pattern(layer_norm_chain((2, 6, 5), affine=False, axis=1), {"x": x})
    assert taken(report, "layer_norm") == 0 and ln_path(LN_PATH) not in report.paths()
    assert taken(report, "rms_norm") == 0


def test_eps_added_after_sqrt_is_not_taken(rng):
    x = random_array(rng, (2, 6, 8))
    report = run_pattern(layer_norm_chain((2, 6, 8), eps_inside=False), {"x": x})
    assert taken(report, "layer_norm") == 0 and not report.paths()


def test_interior_value_used_outside_is_not_taken(rng):
    x = random_array(rng, (2, 6, 8))
    report = run_pattern(layer_norm_chain((2, 6, 8), mean_out=True), {"x": x})
    assert taken(report, "layer_norm") == 0


def test_gelu_with_another_constant_is_not_taken(rng):
    model = gelu_erf_chain((3, 8))
    model.graph.initializer[0].CopyFrom(const("sqrt2", 1.5))
    x = random_array(rng, (3, 8))
    assert taken(run_pattern(model, {"x": x}), "gelu_erf") == 0


def test_rms_norm_of_another_value_is_not_taken(rng):
    # x / sqrt(mean(z^2) + eps) with z != x: not a normalisation of x.
    model = rms_chain((4, 8), weight=False)
    for nd in model.graph.node:
        if nd.name == "div":
            nd.input[0] = "x2"
    model.graph.node.insert(0, h.make_node("Neg", ["x"], ["x2"], name="neg"))
    x = random_array(rng, (4, 8))
    assert taken(run_pattern(model, {"x": x}), "rms_norm") == 0


def test_option_off_leaves_every_chain(rng):
    x = random_array(rng, (2, 5, 16))
    report = run_pattern(layer_norm_chain((2, 5, 16)), {"x": x}, {"fast_patterns": "0"})
    assert taken(report, "layer_norm") == 0 and not report.paths()
    report = run_pattern(gelu_erf_chain((2, 16)), {"x": x[0, :2]}, {"fast_patterns": "0"})
    assert taken(report, "gelu_erf") == 0


def test_scalar_scale_takes_the_composed_path(rng):
    model = layer_norm_chain((2, 4, 8))
    for i, t in enumerate(model.graph.initializer):
        if t.name == "gamma":
            model.graph.initializer[i].CopyFrom(const("gamma", [1.7]))
    x = random_array(rng, (2, 4, 8))
    report = run_pattern(model, {"x": x})
    assert taken(report, "layer_norm") == 1
    composed = "LayerNorm chain: scale/shift not a vector of the last axis"
    assert composed in report.paths() and ln_path(LN_PATH) not in report.paths()


def test_several_chains_in_one_graph(rng):
    """An encoder-like block: LayerNorm chain, GELU chain, RMSNorm chain in sequence."""
    ln = layer_norm_chain((4, 16))
    gelu = gelu_erf_chain((4, 16))
    rms = rms_chain((4, 16))
    nodes, inits = [], []
    for i, m in enumerate([ln, gelu, rms]):
        ren = {"x": "x" if i == 0 else f"y{i - 1}", "y": "y" if i == 2 else f"y{i}"}
        for nd in m.graph.node:
            nd2 = onnx.NodeProto()
            nd2.CopyFrom(nd)
            nd2.name = f"{nd.name}_{i}"
            for k, v in enumerate(nd2.input):
                nd2.input[k] = ren.get(v, f"{v}_{i}")
            for k, v in enumerate(nd2.output):
                nd2.output[k] = ren.get(v, f"{v}_{i}")
            nodes.append(nd2)
        for t in m.graph.initializer:
            t2 = onnx.TensorProto()
            t2.CopyFrom(t)
            t2.name = f"{t.name}_{i}"
            inits.append(t2)
    model = model_of(nodes, inits, (4, 16))
    report = run_pattern(model, {"x": random_array(rng, (4, 16))})
    assert (taken(report, "layer_norm"), taken(report, "gelu_erf"), taken(report, "rms_norm")) == \
        (1, 1, 1)


# ---------------------------------------------------------- the LayerNormalization op itself


def layer_norm_op(shape, axis=-1, stats=False):
    rng = np.random.default_rng(5)
    c = shape[axis:]
    inits = [const("scale", rng.uniform(0.5, 1.5, c)), const("bias", rng.uniform(-1, 1, c))]
    outs = ["y", "mean", "istd"] if stats else ["y"]
    node = h.make_node("LayerNormalization", ["x", "scale", "bias"], outs, name="node", axis=axis,
                       epsilon=1e-5)
    return model_of([node], inits, shape, extra_outputs=outs[1:])


def test_layer_norm_op_fast_kernel_when_asked(rng):
    x = random_array(rng, (3, 7, 32), low=-2, high=2) + 10.0
    report = run_pattern(layer_norm_op((3, 7, 32)), {"x": x}, {"fast_patterns": "1"})
    assert ln_path(LN_OP_PATH) in report.paths()


def test_layer_norm_op_default_path_on_cpu(rng):
    if mlx_backend() != "cpu":
        pytest.skip("the default takes the fused kernel on GPU backends")
    x = random_array(rng, (3, 32))
    report = run_pattern(layer_norm_op((3, 32)), {"x": x})
    assert not report.paths()


@pytest.mark.parametrize("axis,stats", [(-2, False), (-1, True)])
def test_layer_norm_op_other_forms_keep_their_path(axis, stats, rng):
    x = random_array(rng, (3, 4, 8))
    report = run_pattern(layer_norm_op((3, 4, 8), axis, stats), {"x": x}, {"fast_patterns": "1"})
    assert not report.paths()


@pytest.mark.parametrize("chain", [False, True])
def test_fast_layer_norm_keeps_large_mean_rows_accurate(chain, rng):
    """Rows near 1000 with a spread of 0.1: the fused kernel's plain float32 mean lost ~1e-2
    absolute there (ORT's CPU kernel ~2e-3); the rows are shifted by their first element first, so
    both fast paths match float64 to 1e-5. Reference: float64 numpy."""
    x = (1000.0 + random_array(rng, (3, 64), low=-0.05, high=0.05)).astype(np.float32)
    model = layer_norm_chain((3, 64)) if chain else layer_norm_op((3, 64))
    run = EpRun(model, provider_options={"fast_patterns": "1"}, strict=True, optimization_level=OFF)
    try:
        got = run.run({"x": x})[0]
        paths = run.report().paths()
    finally:
        run.close()
    assert ln_path(LN_PATH if chain else LN_OP_PATH) in paths
    inits = {t.name: onnx.numpy_helper.to_array(t).astype(np.float64)
             for t in model.graph.initializer}
    x64 = x.astype(np.float64)
    mu = x64.mean(-1, keepdims=True)
    var = ((x64 - mu) ** 2).mean(-1, keepdims=True)
    eps = 1e-5
    want = (x64 - mu) / np.sqrt(var + eps) * inits["gamma" if chain else "scale"] + \
        inits["beta" if chain else "bias"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------- attention

ATT_FAST = "attention chain -> mlx::fast::scaled_dot_product_attention"
ATT_COMPOSED = "attention chain: no fused MLX kernel for these shapes on this backend (its own ops)"
ATT_SCALE_ON_Q = ("attention chain: its own ops, the power-of-two scale on q (exact; no pass over "
                  "the scores)")


def attention_chain(q_shape, s_len, scale_op="mul", transpose_k=True, axis=-1, mask=False,
                    probs_out=False, key="k", q_reader=False):
    """softmax(q k^T * c) v with q, k, v as graph inputs (a decoder step when q has one row).
    key="q" takes the keys from q itself (self-similarity); q_reader adds a reader of q outside
    the chain (an output q + 1)."""
    n = h.make_node
    b, hh, L, d = q_shape
    inputs = [h.make_tensor_value_info("q", T.FLOAT, [b, hh, L, d]),
              h.make_tensor_value_info("v", T.FLOAT, [b, hh, s_len, d])]
    if key == "k":
        inputs.append(h.make_tensor_value_info("k", T.FLOAT, [b, hh, s_len, d] if transpose_k
                                               else [b, hh, d, s_len]))
    c = 1.0 / np.sqrt(d)
    inits = [const("c", c if scale_op == "mul" else 1.0 / c)]
    nodes = []
    kt = key
    if transpose_k:
        nodes.append(n("Transpose", [key], ["kt"], name="kt", perm=[0, 1, 3, 2]))
        kt = "kt"
    nodes.append(n("MatMul", ["q", kt], ["sc"], name="qk"))
    nodes.append(n("Mul" if scale_op == "mul" else "Div", ["sc", "c"], ["scs"], name="scale"))
    logits = "scs"
    if mask:
        inputs.append(h.make_tensor_value_info("m", T.FLOAT, [1, 1, L, s_len]))
        nodes.append(n("Add", ["scs", "m"], ["msk"], name="mask"))
        logits = "msk"
    nodes.append(n("Softmax", [logits], ["p"], name="softmax", axis=axis))
    nodes.append(n("MatMul", ["p", "v"], ["y"], name="pv"))
    outs = [h.make_tensor_value_info("y", T.FLOAT, [b, hh, L, d])]
    if probs_out:
        outs.append(h.make_tensor_value_info("p", T.FLOAT, [b, hh, L, s_len]))
    if q_reader:
        inits.append(const("one", 1.0))
        nodes.append(n("Add", ["q", "one"], ["q1"], name="q_reader"))
        outs.append(h.make_tensor_value_info("q1", T.FLOAT, [b, hh, L, d]))
    return make_model(h.make_graph(nodes, "att", inputs, outs, inits))


def attention_feeds(rng, model):
    feeds = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = random_array(rng, shape)
    return feeds


@pytest.mark.parametrize("q_shape,s_len", [((1, 12, 1, 64), 40), ((2, 4, 3, 128), 17),
                                           ((2, 4, 16, 16), 16)], ids=str)
@pytest.mark.parametrize("scale_op", ["mul", "div"])
def test_attention_chain_fast_when_asked(q_shape, s_len, scale_op, rng):
    model = attention_chain(q_shape, s_len, scale_op)
    report = run_pattern(model, attention_feeds(rng, model), {"fast_patterns": "1"})
    assert taken(report, "attention") == 1 and ATT_FAST in report.paths()


@pytest.mark.parametrize("transpose_k", [True, False])
def test_attention_chain_default(transpose_k, rng):
    """Default on MLX's CPU backend: matched, the chain's own ops (no fused kernel there), with
    the scale 1/8 on q."""
    model = attention_chain((1, 4, 1, 64), 9, transpose_k=transpose_k)
    report = run_pattern(model, attention_feeds(rng, model))
    assert taken(report, "attention") == 1
    want = ATT_SCALE_ON_Q if mlx_backend() == "cpu" else ATT_FAST
    assert want in report.paths()


def bitwise_against_chain(model, feeds):
    """The EP's default session and one with the pattern pass off give identical bits; returns
    the default session's report."""
    report = run_pattern(model, feeds)
    off = EpRun(model, provider_options={"fast_patterns": "0"}, strict=True,
                optimization_level=OFF)
    try:
        want = off.run(feeds)
    finally:
        off.close()
    run = EpRun(model, strict=True, optimization_level=OFF)
    try:
        got = run.run(feeds)
    finally:
        run.close()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    return report


@pytest.mark.parametrize("q_shape,s_len", [((2, 4, 8, 64), 24), ((1, 2, 5, 16), 7),
                                           ((1, 3, 6, 256), 10)], ids=str)
@pytest.mark.parametrize("scale_op", ["mul", "div"])
@pytest.mark.parametrize("transpose_k", [True, False])
def test_attention_power_of_two_scale_moves_to_q(q_shape, s_len, scale_op, transpose_k, rng):
    """1/sqrt(d) for d = 16, 64, 256 is a power of two: (q c) k^T is bitwise (q k^T) c, so the
    scores get no elementwise pass; the outputs equal the unfused chain's bit for bit."""
    model = attention_chain(q_shape, s_len, scale_op, transpose_k=transpose_k)
    report = bitwise_against_chain(model, attention_feeds(rng, model))
    assert taken(report, "attention") == 1 and ATT_SCALE_ON_Q in report.paths()


def test_attention_other_scale_keeps_the_chain(rng):
    model = attention_chain((2, 2, 6, 32), 5)  # 1/sqrt(32): not a power of two
    report = run_pattern(model, attention_feeds(rng, model))
    assert taken(report, "attention") == 1
    assert ATT_COMPOSED in report.paths() and ATT_SCALE_ON_Q not in report.paths()


@pytest.mark.parametrize("variant", ["keys_from_q", "q_read_outside"])
def test_attention_scale_on_q_leaves_other_readers_of_q(variant, rng):
    """The scaled q feeds the qk product only: keys taken from q itself (Transpose(q)) and a
    reader of q after the chain see q unscaled."""
    kw = {"keys_from_q": {"key": "q"}, "q_read_outside": {"q_reader": True}}[variant]
    model = attention_chain((1, 2, 6, 64), 6, **kw)
    report = bitwise_against_chain(model, attention_feeds(rng, model))
    assert ATT_SCALE_ON_Q in report.paths()


def test_attention_q_times_q_keeps_the_chain(rng):
    """MatMul(q, q) (square heads, no transpose): scaling its one input would scale both
    operands, so the chain keeps its own ops."""
    model = attention_chain((1, 2, 16, 16), 16, transpose_k=False, key="q")
    report = run_pattern(model, attention_feeds(rng, model))
    assert taken(report, "attention") == 1
    assert ATT_COMPOSED in report.paths() and ATT_SCALE_ON_Q not in report.paths()


@pytest.mark.parametrize("variant", ["axis2", "mask", "probs_out"])
def test_attention_variants_not_taken(variant, rng):
    kw = {"axis2": {"axis": 2}, "mask": {"mask": True}, "probs_out": {"probs_out": True}}[variant]
    model = attention_chain((1, 2, 4, 8), 4, **kw)
    report = run_pattern(model, attention_feeds(rng, model), {"fast_patterns": "1"})
    assert taken(report, "attention") == 0


def test_verbose_summary_lists_the_patterns(rng, capfd):
    import gc

    model = gelu_erf_chain((2, 8))
    run = EpRun(model, provider_options={"verbose": "1"}, strict=True, optimization_level=OFF)
    run.run({"x": random_array(rng, (2, 8))})
    run.close()
    gc.collect()
    err = capfd.readouterr().err
    assert "patterns: gelu_erf=1" in err and f"path:    fast {GELU_ERF_PATH} x1" in err, err


# ------------------------------------------------------------------------ MatMul + bias Add

MM_ADD_PATH = "MatMul + bias Add -> one addmm"
# The pattern is taken on MLX's CPU backend only: on CUDA one addmm was slower than cuBLAS's
# matmul plus a fused add (bench/results/gpu_peer_matmul_add.md).
cpu_backend_only = pytest.mark.skipif(
    mlx_backend() != "cpu", reason="the MatMul + bias Add pattern runs on MLX's CPU backend only")


def matmul_add(a_shape, b_shape, bias_shape, bias_first=False, product_out=False,
               bias_input=False):
    """y = MatMul(a, w) + bias (a Linear as torch exports it), w and bias constants unless told."""
    n = h.make_node
    rng = np.random.default_rng(7)
    inits = [const("w", rng.uniform(-1, 1, b_shape))]
    inputs = [h.make_tensor_value_info("a", T.FLOAT, list(a_shape))]
    if bias_input:
        inputs.append(h.make_tensor_value_info("bias", T.FLOAT, list(bias_shape)))
    else:
        inits.append(const("bias", rng.uniform(-1, 1, bias_shape)))
    nodes = [n("MatMul", ["a", "w"], ["p"], name="mm"),
             n("Add", ["bias", "p"] if bias_first else ["p", "bias"], ["y"], name="add")]
    product_shape = list(np.matmul(np.zeros(a_shape), np.zeros(b_shape)).shape)
    out_shape = product_shape
    out_shape = list(np.broadcast_shapes(tuple(out_shape), tuple(bias_shape)))
    outs = [h.make_tensor_value_info("y", T.FLOAT, out_shape)]
    if product_out:
        outs.append(h.make_tensor_value_info("p", T.FLOAT, product_shape))
    return make_model(h.make_graph(nodes, "linear", inputs, outs, inits))


@cpu_backend_only
@pytest.mark.parametrize("a_shape,b_shape", [((5, 12), (12, 7)), ((2, 5, 12), (12, 7)),
                                             ((2, 3, 5, 12), (12, 7)), ((2, 5, 12), (2, 12, 7)),
                                             ((1, 300), (300, 9)), ((4, 1), (1, 3))], ids=str)
@pytest.mark.parametrize("bias_first", [False, True])
def test_matmul_add_is_one_addmm(a_shape, b_shape, bias_first, rng):
    model = matmul_add(a_shape, b_shape, (b_shape[-1],), bias_first)
    report = run_pattern(model, {"a": random_array(rng, a_shape)})
    assert taken(report, "matmul_add") == 1
    assert MM_ADD_PATH in report.paths()


@cpu_backend_only
def test_matmul_add_bias_as_graph_input(rng):
    model = matmul_add((3, 4, 16), (16, 8), (8,), bias_input=True)
    feeds = {"a": random_array(rng, (3, 4, 16)), "bias": random_array(rng, (8,))}
    report = run_pattern(model, feeds)
    assert taken(report, "matmul_add") == 1 and MM_ADD_PATH in report.paths()


@cpu_backend_only
def test_matmul_add_in_an_mlp(rng):
    """Two Linear layers with a Relu between: two matches, one fused node."""
    n = h.make_node
    w_rng = np.random.default_rng(9)
    inits = [const("w1", w_rng.uniform(-1, 1, (16, 32))), const("b1", w_rng.uniform(-1, 1, 32)),
             const("w2", w_rng.uniform(-1, 1, (32, 4))), const("b2", w_rng.uniform(-1, 1, 4))]
    nodes = [n("MatMul", ["x", "w1"], ["p1"], name="mm1"), n("Add", ["p1", "b1"], ["h1"], name="add1"),
             n("Relu", ["h1"], ["r"], name="relu"),
             n("MatMul", ["r", "w2"], ["p2"], name="mm2"), n("Add", ["b2", "p2"], ["y"], name="add2")]
    model = model_of(nodes, inits, (2, 6, 16), out_shape=(2, 6, 4))
    report = run_pattern(model, {"x": random_array(rng, (2, 6, 16))})
    assert taken(report, "matmul_add") == 2
    assert report.paths()[MM_ADD_PATH]["fast"]


@pytest.mark.skipif(mlx_backend() == "cpu", reason="GPU backends only")
def test_matmul_add_not_taken_on_gpu_backends(rng):
    model = matmul_add((5, 12), (12, 7), (7,))
    report = run_pattern(model, {"a": random_array(rng, (5, 12))})
    assert taken(report, "matmul_add") == 0 and MM_ADD_PATH not in report.paths()


@pytest.mark.parametrize("variant", ["bias_2d", "bias_matrix", "product_out", "two_uses",
                                     "vector_a", "option_off"])
def test_matmul_add_not_taken(variant, rng):
    if variant == "bias_2d":
        model = matmul_add((5, 12), (12, 7), (1, 7))
    elif variant == "bias_matrix":
        model = matmul_add((5, 12), (12, 7), (5, 7))
    elif variant == "product_out":
        model = matmul_add((5, 12), (12, 7), (7,), product_out=True)
    elif variant == "two_uses":  # the product read by the Add and by a Relu
        model = matmul_add((5, 12), (12, 7), (7,))
        model.graph.node.append(h.make_node("Relu", ["p"], ["r"], name="relu"))
        model.graph.output.append(h.make_tensor_value_info("r", T.FLOAT, [5, 7]))
    elif variant == "vector_a":
        model = matmul_add((12,), (12, 7), (7,))
    else:
        model = matmul_add((5, 12), (12, 7), (7,))
    a_shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    opts = {"fast_patterns": "0"} if variant == "option_off" else None
    report = run_pattern(model, {"a": random_array(rng, a_shape)}, opts)
    assert taken(report, "matmul_add") == 0 and MM_ADD_PATH not in report.paths()


@cpu_backend_only
def test_matmul_add_bias_of_one_broadcast_keeps_the_two_ops(rng):
    """A bias of length 1 broadcast over N > 1 columns: matched, but not a vector of the last
    axis, so the pattern node runs MatMul and Add as before."""
    model = matmul_add((5, 12), (12, 7), (1,))
    report = run_pattern(model, {"a": random_array(rng, (5, 12))})
    assert taken(report, "matmul_add") == 1
    assert "MatMul + Add: the bias is not a vector of the last axis" in report.paths()
    assert MM_ADD_PATH not in report.paths()


@cpu_backend_only
@pytest.mark.parametrize("a_shape,b_shape", [((5, 12), (12, 7)), ((2, 3, 5, 12), (12, 7)),
                                             ((2, 5, 12), (2, 12, 7))], ids=str)
def test_matmul_add_mlx_addmm(a_shape, b_shape, rng, monkeypatch):
    """The GPU backends' form, mx::addmm, run on MLX's CPU backend (the internal A/B switch that
    turns OpenBLAS off): batched operands broadcast, equal to ORT CPU."""
    monkeypatch.setenv("ORTMLX_INTERNAL_CPU_MATMUL", "mlx")
    model = matmul_add(a_shape, b_shape, (b_shape[-1],))
    report = run_pattern(model, {"a": random_array(rng, a_shape)})
    assert taken(report, "matmul_add") == 1 and MM_ADD_PATH in report.paths()


@pytest.mark.parametrize("chain", [False, True])
def test_fast_layer_norm_after_a_residual_add(chain, rng):
    """x = a + r (a residual connection, as in every transformer block) feeding a LayerNorm, with x
    also an output: the fast path's row shift keeps rows near 1000 accurate, and x itself is a + r
    exactly. Reference: float64 numpy on x."""
    shape = (3, 5, 64)
    inner = layer_norm_chain(shape) if chain else layer_norm_op(shape)
    g = inner.graph
    add = h.make_node("Add", ["a", "r"], ["x"], name="residual")
    ins = [h.make_tensor_value_info(n, T.FLOAT, list(shape)) for n in ("a", "r")]
    outs = list(g.output) + [h.make_tensor_value_info("x", T.FLOAT, list(shape))]
    model = make_model(h.make_graph([add, *g.node], "g", ins, outs, list(g.initializer)), opset=17)
    a = (1000.0 + random_array(rng, shape, low=-0.05, high=0.05)).astype(np.float32)
    r = random_array(rng, shape, low=-0.05, high=0.05)
    run = EpRun(model, provider_options={"fast_patterns": "1"}, strict=True, optimization_level=OFF)
    try:
        got_y, got_x = run.run({"a": a, "r": r})
        paths = run.report().paths()
    finally:
        run.close()
    assert ln_path(LN_PATH if chain else LN_OP_PATH, residual=True) in paths
    np.testing.assert_array_equal(got_x, a + r)
    inits = {t.name: onnx.numpy_helper.to_array(t).astype(np.float64) for t in g.initializer}
    x64 = (a + r).astype(np.float64)
    mu = x64.mean(-1, keepdims=True)
    var = ((x64 - mu) ** 2).mean(-1, keepdims=True)
    want = (x64 - mu) / np.sqrt(var + 1e-5) * inits["gamma" if chain else "scale"] + \
        inits["beta" if chain else "bias"]
    np.testing.assert_allclose(got_y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias_first", [True, False])
def test_layer_norm_of_a_transformer_residual(bias_first, rng):
    """y = LayerNorm((h @ W + b) + r), the residual sum also read by the next residual Add and
    returned: what a transformer block writes. Where the one-kernel LayerNorm runs (the GPU), it
    computes the sum as the graph does (its Add order, bias first) and the sum's other
    readers take it from the kernel; values match ORT CPU on every path."""
    shape, e = (2, 6, 48), 48
    wts = (rng.standard_normal((e, e)) / np.sqrt(e)).astype(np.float32)
    inits = [onnx.numpy_helper.from_array(wts, "w"), const("b", rng.standard_normal(e)),
             const("scale", rng.uniform(0.5, 1.5, e)), const("shift", rng.standard_normal(e))]
    mm_add = ["mm", "b"] if bias_first else ["b", "mm"]
    nodes = [h.make_node("MatMul", ["h", "w"], ["mm"], name="proj"),
             h.make_node("Add", mm_add, ["mmb"], name="bias"),
             h.make_node("Add", ["mmb", "r"], ["x"], name="residual"),
             h.make_node("LayerNormalization", ["x", "scale", "shift"], ["y"], name="norm",
                         axis=-1, epsilon=1e-5),
             h.make_node("Add", ["x", "y"], ["next"], name="next_residual")]
    ins = [h.make_tensor_value_info(n, T.FLOAT, list(shape)) for n in ("h", "r")]
    outs = [h.make_tensor_value_info(n, T.FLOAT, list(shape)) for n in ("y", "next", "x")]
    model = make_model(h.make_graph(nodes, "block", ins, outs, inits), opset=17)
    feeds = {"h": random_array(rng, shape), "r": random_array(rng, shape)}
    report = run_pattern(model, feeds, {"fast_patterns": "1"})
    assert ln_path(LN_OP_PATH, residual=True) in report.paths()
