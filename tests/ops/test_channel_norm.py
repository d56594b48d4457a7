"""BatchNormalization (inference), InstanceNormalization, GroupNormalization (opsets 18 and 21),
LpNormalization on the EP vs ORT CPU (GroupNormalization-18 also vs numpy: ORT may expand it)."""

import numpy as np
import pytest

from opcheck import check_error_on_ep, check_on_ep, drop_input_ranks, refusal, single_node_model
from ortmlx.testing import random_array


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 7), (1, 4, 5, 6), (2, 2, 3, 4, 3)], ids=str)
@pytest.mark.parametrize("opset", [13, 15, 21])
def test_batch_norm(shape, opset, rng):
    c = shape[1]
    x = random_array(rng, shape)
    params = {"scale": random_array(rng, (c,)), "b": random_array(rng, (c,)),
              "mean": random_array(rng, (c,)), "var": random_array(rng, (c,), low=0.1, high=2.0)}
    model = single_node_model("BatchNormalization", {"x": x, **params}, attrs={"epsilon": 1e-3},
                              initializers=params, opset=opset)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_batch_norm_params_as_inputs(rng):
    x = random_array(rng, (2, 3, 4, 4))
    inputs = {"x": x, "scale": random_array(rng, (3,)), "b": random_array(rng, (3,)),
              "mean": random_array(rng, (3,)), "var": random_array(rng, (3,), low=0.1, high=2.0)}
    check_on_ep(single_node_model("BatchNormalization", inputs), inputs, rtol=1e-5, atol=1e-5)


def test_batch_norm_training_is_refused(rng):
    x = random_array(rng, (2, 3, 4))
    p = {k: random_array(rng, (3,), low=0.1, high=1) for k in ["s", "b", "m", "v"]}
    model = single_node_model("BatchNormalization", {"x": x, **p}, attrs={"training_mode": 1},
                              initializers=p, n_outputs=3)
    assert "training" in refusal(model, "BatchNormalization") or \
        "inference" in refusal(model, "BatchNormalization")


@pytest.mark.parametrize("shape", [(2, 3, 7), (1, 4, 5, 6), (2, 2, 3, 4, 3)], ids=str)
def test_instance_norm(shape, rng):
    c = shape[1]
    x = random_array(rng, shape) + 3.0
    inputs = {"x": x, "s": random_array(rng, (c,)), "b": random_array(rng, (c,))}
    check_on_ep(single_node_model("InstanceNormalization", inputs, attrs={"epsilon": 1e-4}),
                inputs, rtol=1e-4, atol=1e-5)


def _group_norm_ref(x, scale, bias, groups, eps, per_group):
    n, c = x.shape[:2]
    xg = x.astype(np.float64).reshape(n, groups, -1)
    mean = xg.mean(-1, keepdims=True)
    var = ((xg - mean) ** 2).mean(-1, keepdims=True)
    y = ((xg - mean) / np.sqrt(var + eps)).reshape(x.shape)
    if per_group:
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    bshape = (1, c) + (1,) * (x.ndim - 2)
    return (y * scale.reshape(bshape) + bias.reshape(bshape)).astype(np.float32)


@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((1, 8, 4, 5), 2), ((2, 4, 3, 3), 4),
                                          ((1, 6, 3, 2, 2), 1)], ids=str)
def test_group_norm(opset, shape, groups, rng):
    from ortmlx.testing import EpRun, assert_ran_on_ep

    c = shape[1]
    per_group = opset < 21
    x = random_array(rng, shape) + 1.0
    n_par = groups if per_group else c
    inputs = {"x": x, "s": random_array(rng, (n_par,)), "b": random_array(rng, (n_par,))}
    import onnx
    from onnx import helper

    from ortmlx.testing import make_model

    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["out0"], name="node",
                            num_groups=groups, epsilon=1e-5)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, v.shape)
                      for k, v in inputs.items()],
        [helper.make_tensor_value_info("out0", onnx.TensorProto.FLOAT, x.shape)])
    model = make_model(graph, opset=opset, check=False)
    run = EpRun(model)
    try:
        got = run.run(inputs)[0]
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    want = _group_norm_ref(x, inputs["s"], inputs["b"], groups, 1e-5, per_group)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    if not per_group:  # ORT 1.30 runs opset 21 natively: compare with it too
        check_on_ep(model, inputs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_lp_norm(p, axis, rng):
    x = random_array(rng, (3, 4, 5))
    x[1, :, 2] = 0.0
    x[:, 2, 3] = 0.0
    x[2, 3, :] = 0.0
    check_on_ep(single_node_model("LpNormalization", {"x": x}, attrs={"p": p, "axis": axis}),
                {"x": x}, rtol=1e-5, atol=1e-6)


def test_lp_norm_refusals(rng):
    x = rng.uniform(size=(3, 4))  # float64: ORT CPU runs it
    assert "float32" in refusal(single_node_model("LpNormalization", {"x": x}), "LpNormalization")


@pytest.mark.parametrize("num_groups", [2**32, 2**32 + 2, 2**31])
def test_group_norm_refuses_num_groups_beyond_int32(num_groups, rng):
    from isolated import check_hostile, loose_model

    # 2^32 wrapped to 0 in int: a division by zero; 2^32 + 2 to 2, a different model.
    model = loose_model("GroupNormalization", [("x", np.float32, [2, 4, 3])],
                        {"num_groups": num_groups, "epsilon": 1e-5},
                        {"scale": random_array(rng, (4,)), "bias": random_array(rng, (4,))})
    check_hostile(model, {"x": random_array(rng, (2, 4, 3))}, op_type="GroupNormalization",
                  refused="outside [")


def test_group_norm_empty_input_raises_like_cpu(rng):
    from isolated import check_hostile, loose_model

    model = loose_model("GroupNormalization", [("x", np.float32, [3, 1, "h", 2])],
                        {"num_groups": 1}, {"scale": random_array(rng, (1,)),
                                            "bias": random_array(rng, (1,))})
    check_hostile(model, {"x": np.zeros((3, 1, 0, 2), np.float32)},
                  {"x": random_array(rng, (3, 1, 4, 2))}, op_type="GroupNormalization",
                  error="empty")


def _bn_params(rng, c):
    return {"scale": random_array(rng, (c,)), "b": random_array(rng, (c,)),
            "mean": random_array(rng, (c,)), "var": random_array(rng, (c,), low=0.1, high=2.0)}


@pytest.mark.parametrize("opset", [7, 8])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (1, 4, 3, 5)], ids=str)
def test_batch_norm_opset_7_spatial(shape, opset, rng):
    x = random_array(rng, shape)
    params = _bn_params(rng, shape[1])
    model = single_node_model("BatchNormalization", {"x": x, **params},
                              attrs={"epsilon": 1e-3, "spatial": 1, "momentum": 0.8},
                              initializers=params, opset=opset)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_batch_norm_opset_7_non_spatial_is_refused(rng):
    x = random_array(rng, (2, 3))
    params = _bn_params(rng, 3)
    model = single_node_model("BatchNormalization", {"x": x, **params}, attrs={"spatial": 0},
                              initializers=params, opset=7)
    assert "spatial=0" in refusal(model, "BatchNormalization")


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (1, 3, 3, 5), (1, 3, 2, 2, 3)], ids=str)
def test_channel_norms_unknown_rank(shape, rng):
    """X's rank is known only at run time: every rank the op defines runs."""
    x = random_array(rng, shape)
    params = _bn_params(rng, 3)
    bn = drop_input_ranks(single_node_model("BatchNormalization", {"x": x, **params},
                                            initializers=params))
    check_on_ep(bn, {"x": x}, rtol=1e-5, atol=1e-5)
    lp = drop_input_ranks(single_node_model("LpNormalization", {"x": x}, attrs={"axis": 1}))
    check_on_ep(lp, {"x": x}, rtol=1e-5, atol=1e-5)
    sb = {"s": random_array(rng, (3,)), "b": random_array(rng, (3,))}
    gn = single_node_model("GroupNormalization", {"x": x, **sb}, attrs={"num_groups": 3},
                           initializers=sb, check=False)
    check_on_ep(drop_input_ranks(gn), {"x": x}, rtol=1e-4, atol=1e-5)
    if len(shape) >= 3:
        inorm = drop_input_ranks(single_node_model("InstanceNormalization", {"x": x, **sb},
                                                   initializers=sb))
        check_on_ep(inorm, {"x": x}, rtol=1e-4, atol=1e-5)


def test_channel_norms_unknown_rank_too_low_is_an_error(rng):
    x = random_array(rng, (2, 3, 4))
    sb = {"s": random_array(rng, (3,)), "b": random_array(rng, (3,))}
    inorm = drop_input_ranks(single_node_model("InstanceNormalization", {"x": x, **sb},
                                               initializers=sb))
    check_error_on_ep(inorm, {"x": random_array(rng, (2, 3))}, "rank 2 is below 3")
    params = _bn_params(rng, 3)
    bn = drop_input_ranks(single_node_model("BatchNormalization", {"x": x, **params},
                                            initializers=params))
    check_error_on_ep(bn, {"x": random_array(rng, (3,))}, "rank 1 is below 2")
    lp = drop_input_ranks(single_node_model("LpNormalization", {"x": x}, attrs={"axis": 2}))
    check_error_on_ep(lp, {"x": random_array(rng, (2, 3))}, "out of range")
