"""Activation family (issue 9) and the com.microsoft Gelu family: every case runs on the EP and
matches ORT CPU."""

import numpy as np
import onnx
import pytest
from onnx import helper

from opcheck import NP_TO_ONNX, check_on_ep, refusal, single_node_model
from ortmlx.testing import make_model, random_array

ACT = {
    "LeakyRelu": [{}, {"alpha": 0.3}], "Elu": [{}, {"alpha": 0.7}],
    "Selu": [{}, {"alpha": 1.5, "gamma": 0.8}], "Celu": [{}, {"alpha": 2.0}],
    "HardSigmoid": [{}, {"alpha": 0.3, "beta": 0.4}], "HardSwish": [{}], "Softplus": [{}],
    "Softsign": [{}], "Mish": [{}], "ThresholdedRelu": [{}, {"alpha": 0.5}],
}
CASES = [(op, a) for op, attrs in ACT.items() for a in attrs]


@pytest.mark.parametrize("op,attrs", CASES, ids=[f"{o}-{a}" for o, a in CASES])
@pytest.mark.parametrize("shape", [(2, 3, 5), (), (0, 4), (1,)], ids=str)
def test_activation(op, attrs, shape, rng):
    x = random_array(rng, shape, low=-6, high=6)
    check_on_ep(single_node_model(op, {"x": x}, attrs=attrs), {"x": x}, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("op", sorted(ACT))
def test_activation_special_values(op):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 30.0, -30.0, 100.0, -100.0, 1e-6, 3.0, -3.0],
                 np.float32)
    check_on_ep(single_node_model(op, {"x": x}), {"x": x}, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("op", sorted(set(ACT) - {"Celu"}))
def test_activation_float16(op, rng):
    x = random_array(rng, (4, 6), np.float16, low=-6, high=6)
    check_on_ep(single_node_model(op, {"x": x}), {"x": x}, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("slope_shape", [(5,), (1,), (), (4, 1), (3, 4, 5), (1, 1, 5)], ids=str)
def test_prelu(dtype, slope_shape, rng):
    x = random_array(rng, (3, 4, 5), dtype, low=-3, high=3)
    slope = random_array(rng, slope_shape, dtype, low=-1, high=1)
    check_on_ep(single_node_model("PRelu", {"x": x, "slope": slope}), {"x": x, "slope": slope},
                rtol=1e-3 if dtype == np.float16 else 1e-6)


def test_prelu_empty_and_special(rng):
    x = np.array([np.nan, -np.inf, np.inf, -0.0, -2.0], np.float32)
    s = np.array([0.5], np.float32)
    check_on_ep(single_node_model("PRelu", {"x": x, "s": s}), {"x": x, "s": s})
    e = np.zeros((0, 3), np.float32)
    s3 = random_array(rng, (3,))
    check_on_ep(single_node_model("PRelu", {"x": e, "s": s3}), {"x": e, "s": s3})


def test_refusals(rng):
    # PRelu needs static ranks to check the slope's unidirectional broadcast.
    x, slope = random_array(rng, (3, 4)), random_array(rng, (4,))
    model = single_node_model("PRelu", {"x": x, "slope": slope})
    model.graph.input[0].type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    model.graph.output[0].type.tensor_type.ClearField("shape")
    assert "ranks" in refusal(model, "PRelu")


def contrib(op_type, inputs: dict, attrs=None):
    """One com.microsoft node named 'node' (ONNX shape inference does not know these ops)."""
    names = [k for k, v in inputs.items() if v is not None]
    node = helper.make_node(op_type, [k if v is not None else "" for k, v in inputs.items()],
                            ["out0"], name="node", domain="com.microsoft", **(attrs or {}))
    g = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, NP_TO_ONNX[inputs[k].dtype], list(inputs[k].shape))
         for k in names],
        [onnx.ValueInfoProto(name="out0")])
    return make_model(g, extra_opsets={"com.microsoft": 1}, check=False)


@pytest.mark.parametrize("shape", [(2, 3, 8), (8,), (0, 8), (1, 1)], ids=str)
def test_contrib_gelu_family(shape, rng):
    x = random_array(rng, shape, low=-5, high=5)
    b = random_array(rng, shape[-1:])
    check_on_ep(contrib("Gelu", {"x": x}), {"x": x}, rtol=1e-5, atol=1e-6)
    check_on_ep(contrib("BiasGelu", {"x": x, "b": b}), {"x": x, "b": b}, rtol=1e-5, atol=1e-6)
    check_on_ep(contrib("FastGelu", {"x": x}), {"x": x}, rtol=1e-5, atol=1e-6)
    check_on_ep(contrib("FastGelu", {"x": x, "b": b}), {"x": x, "b": b}, rtol=1e-5, atol=1e-6)
    check_on_ep(contrib("QuickGelu", {"x": x}), {"x": x}, rtol=1e-5, atol=1e-6)
    check_on_ep(contrib("QuickGelu", {"x": x}, {"alpha": 1.2}), {"x": x}, rtol=1e-5, atol=1e-6)


def test_contrib_gelu_special_values():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 30.0, -30.0, 1e-6], np.float32)
    for op in ["Gelu", "FastGelu", "QuickGelu"]:
        check_on_ep(contrib(op, {"x": x}), {"x": x}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.6}], ids=str)
@pytest.mark.parametrize("shape", [(2, 3, 5), (), (0, 4)], ids=str)
def test_swish(attrs, shape, rng):
    """Swish (opset 24): ORT 1.30 has no kernel and runs the function body; the EP claims the
    node (float32) and matches that body."""
    x = random_array(rng, shape, low=-6, high=6)
    check_on_ep(single_node_model("Swish", {"x": x}, attrs=attrs, opset=24), {"x": x},
                rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("slope_shape", [(1,), (4, 1, 1), (5,)], ids=str)
def test_prelu_opset_7(slope_shape, rng):
    x = random_array(rng, (2, 4, 3, 5), low=-2, high=2)
    slope = random_array(rng, slope_shape)
    check_on_ep(single_node_model("PRelu", {"x": x, "slope": slope}, opset=7),
                {"x": x, "slope": slope})


@pytest.mark.parametrize("op, attrs", [("Elu", {}), ("Elu", {"alpha": 2.0}), ("Selu", {}),
                                       ("Celu", {"alpha": 0.5})])
def test_expm1_activations_near_zero_match_float64(op, attrs):
    """alpha * (exp(x) - 1) cancels near 0: ORT CPU's float32 exp(x) - 1 is off by up to a float32
    unit of 1 (Elu(-7.9459e-4): 3.4e-8 off); the EP's expm1 keeps the relative error at float32
    rounding. Checked against float64."""
    from ortmlx.testing import EpRun, assert_ran_on_ep

    x = np.array([-7.9487e-4, -1e-5, -3e-7, -1e-3, -0.25, -4.0, 0.0, 2.5], np.float32)
    run = EpRun(single_node_model(op, {"x": x}, attrs=attrs), strict=True)
    try:
        (got,) = run.run({"x": x})
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    xd = x.astype(np.float64)
    alpha = float(np.float32(attrs.get("alpha", {"Selu": 1.67326319217681884765625}.get(op, 1.0))))
    if op == "Celu":
        want = np.maximum(xd, 0) + np.minimum(0, alpha * np.expm1(xd / alpha))
    else:
        want = np.where(xd >= 0, xd, alpha * np.expm1(np.minimum(xd, 0)))
        if op == "Selu":
            want = want * float(np.float32(1.05070102214813232421875))
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=0)


SHRINK_ATTRS = [{}, {"lambd": 1.5}, {"bias": 0.7, "lambd": 0.2}, {"bias": -2.0, "lambd": 0.0}]


@pytest.mark.parametrize("attrs", SHRINK_ATTRS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(2, 3, 5), (), (0, 4)], ids=str)
def test_shrink(attrs, dtype, shape, rng):
    x = random_array(rng, shape, dtype, low=-3, high=3)
    tol = 1e-3 if dtype == np.float16 else 1e-6
    check_on_ep(single_node_model("Shrink", {"x": x}, attrs=attrs), {"x": x}, rtol=tol, atol=tol)


def test_shrink_special_values():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 0.50001, -0.50001, 1e30],
                 np.float32)
    check_on_ep(single_node_model("Shrink", {"x": x}, attrs={"bias": 0.25}), {"x": x})


def test_shrink_integer_is_refused(rng):
    x = np.arange(-4, 5, dtype=np.int32)
    assert "float32/float16 only" in refusal(single_node_model("Shrink", {"x": x}), "Shrink")
