"""ArgMax, ArgMin, CumSum, TopK on the EP against ORT CPU (ties, negative axes, empty/size-1 dims)."""
import numpy as np
import onnx
import pytest
from onnx import helper

from opcheck import check_on_ep, refusal, single_node_model
from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, random_array

ARG_DTYPES = [np.float32, np.float16, np.int8, np.uint8, np.int32, np.int64]


def tied(rng, shape, dtype):
    """Few distinct values, so ties are everywhere."""
    return rng.integers(0, 3, size=shape).astype(dtype)


# ---------------------------------------------------------------- ArgMax / ArgMin


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", ARG_DTYPES)
@pytest.mark.parametrize("shape,axis", [((3, 4, 5), 1), ((3, 4, 5), -1), ((3, 4, 5), 0), ((7,), 0),
                                        ((1, 5), 0), ((4, 1), 1), ((0, 3), 1)], ids=str)
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_arg(op, dtype, shape, axis, keepdims, last, rng):
    for x in (random_array(rng, shape, dtype), tied(rng, shape, dtype)):
        model = single_node_model(op, {"x": x}, attrs={"axis": axis, "keepdims": keepdims,
                                                       "select_last_index": last}, opset=13)
        check_on_ep(model, {"x": x})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("opset", [1, 11, 12])
def test_arg_older_opsets(op, opset, rng):
    x = tied(rng, (4, 6), np.float32)
    attrs = {"axis": 1} if opset < 12 else {"axis": -1, "select_last_index": 1}
    check_on_ep(single_node_model(op, {"x": x}, attrs=attrs, opset=opset), {"x": x})
    check_on_ep(single_node_model(op, {"x": x}, opset=opset), {"x": x})  # default axis 0


def test_arg_empty_axis_is_refused():
    x = np.zeros((2, 0), np.float32)
    reason = refusal(single_node_model("ArgMax", {"x": x}, attrs={"axis": 1}, opset=13), "ArgMax")
    assert reason and "empty" in reason


@pytest.mark.parametrize("dtype", [np.float64])
def test_arg_unclaimed_types_are_refused(dtype):
    x = np.arange(6).reshape(2, 3).astype(dtype)
    node = helper.make_node("ArgMax", ["x"], ["out0"], name="node", axis=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.helper.np_dtype_to_tensor_dtype(x.dtype), [2, 3])],
                              [helper.make_tensor_value_info("out0", onnx.TensorProto.INT64, [2, 1])])
    reason = refusal(make_model(graph, opset=13, check=False), "ArgMax")
    assert reason and np.dtype(dtype).name in reason


# ---------------------------------------------------------------- CumSum


def cumsum_model(x, axis, axis_dtype=np.int64, opset=14, scalar=True, **attrs):
    a = np.array(axis if scalar else [axis], axis_dtype)
    return single_node_model("CumSum", {"x": x, "axis": a}, initializers={"axis": a}, attrs=attrs, opset=opset)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.float16])
@pytest.mark.parametrize("shape,axis", [((3, 4, 5), 1), ((3, 4, 5), -1), ((3, 4, 5), 0), ((9,), 0),
                                        ((1, 5), 0), ((2, 0, 3), 2), ((2, 0, 3), 1)], ids=str)
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum(dtype, shape, axis, exclusive, reverse, rng):
    x = random_array(rng, shape, dtype)
    tol = 2e-2 if dtype == np.float16 else 1e-5
    check_on_ep(cumsum_model(x, axis, exclusive=exclusive, reverse=reverse), {"x": x}, rtol=tol, atol=tol)


@pytest.mark.parametrize("axis_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("scalar", [True, False], ids=["scalar", "1d"])
@pytest.mark.parametrize("opset", [11, 14])
def test_cumsum_axis_forms(axis_dtype, scalar, opset, rng):
    x = random_array(rng, (4, 6))
    check_on_ep(cumsum_model(x, -1, axis_dtype, opset=opset, scalar=scalar), {"x": x})


def test_cumsum_int32_wraps_like_cpu():
    x = np.array([[2**31 - 1, 5, 1], [-(2**31), -1, 0]], np.int32)
    got = check_on_ep(cumsum_model(x, 1), {"x": x})
    assert got[0][0, 1] == -(2**31) + 4


def test_cumsum_runtime_axis_out_of_range_is_an_error(rng):
    """A runtime axis is claimed (read on the host each run); one out of range fails naming the
    node."""
    from opcheck import check_error_on_ep

    node = helper.make_node("CumSum", ["x", "axis"], ["out0"], name="node")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3]),
                                            helper.make_tensor_value_info("axis", onnx.TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("out0", onnx.TensorProto.FLOAT, [2, 3])])
    model = make_model(graph, opset=14)
    x = random_array(rng, (2, 3))
    check_on_ep(model, {"x": x, "axis": np.array(1, np.int64)})
    check_error_on_ep(model, {"x": x, "axis": np.array(2, np.int64)}, "out of range")


@pytest.mark.parametrize("axis", [2, -9, 2**32])
@pytest.mark.parametrize("shape", [(2, 1, 0, 0), (0,)], ids=str)
def test_cumsum_empty_input_ignores_a_runtime_axis_like_cpu(shape, axis, rng):
    """ORT returns an empty input as it is before reading the axis; the EP raised "axis out of
    range" for a runtime axis (fuzz seed 16, o42_36: (2, 1, 0, 0) over axis 2^32)."""
    x = np.zeros(shape, np.int64)
    a = np.array(axis, np.int64)
    model = single_node_model("CumSum", {"x": x, "axis": a}, attrs={"reverse": 1}, opset=14,
                              check=False)
    got = check_on_ep(model, {"x": x, "axis": a})
    assert got[0].shape == shape


# ---------------------------------------------------------------- TopK


def topk_model(x, k, opset=11, const_k=True, **attrs):
    kk = np.array([k], np.int64)
    if const_k:
        return single_node_model("TopK", {"x": x, "k": kk}, initializers={"k": kk}, attrs=attrs,
                                 n_outputs=2, opset=opset)
    return single_node_model("TopK", {"x": x, "k": kk}, attrs=attrs, n_outputs=2, opset=opset)


TOPK_DTYPES = [np.float32, np.float16, np.int8, np.uint8, np.int16, np.int32, np.int64]


@pytest.mark.parametrize("dtype", TOPK_DTYPES)
@pytest.mark.parametrize("shape,axis,k", [((3, 4, 5), -1, 3), ((3, 4, 5), 1, 4), ((3, 4, 5), 0, 1),
                                          ((40,), 0, 17), ((1, 5), 1, 5), ((3, 6), 1, 0)],
                         ids=str)
@pytest.mark.parametrize("largest", [0, 1])
def test_topk(dtype, shape, axis, k, largest, rng):
    for x in (random_array(rng, shape, dtype), tied(rng, shape, dtype)):
        check_on_ep(topk_model(x, k, axis=axis, largest=largest), {"x": x})


def test_topk_empty_rows_on_ep_only():
    # ORT 1.30's CPU TopK dies with SIGFPE on zero rows, so this is checked against the shapes.
    x = np.zeros((0, 6), np.float32)
    run = EpRun(topk_model(x, 2, axis=1), strict=True)
    try:
        v, i = run.run({"x": x})
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    assert v.shape == (0, 2) and i.shape == (0, 2) and i.dtype == np.int64


@pytest.mark.parametrize("largest", [0, 1])
def test_topk_extremes_and_ties(largest):
    # Integer extremes (~x has no overflow where -x would), signed zeros tie, infinities.
    xi = np.array([[np.iinfo(np.int32).min, 0, np.iinfo(np.int32).max, 0, np.iinfo(np.int32).min]], np.int32)
    check_on_ep(topk_model(xi, 5, largest=largest), {"x": xi})
    xf = np.array([[0.0, -0.0, np.inf, -np.inf, 0.0, -0.0, 1.0, np.inf]], np.float32)
    check_on_ep(topk_model(xf, 8, largest=largest), {"x": xf})


@pytest.mark.parametrize("largest", [0, 1])
def test_topk_runtime_k(largest, rng):
    x = tied(rng, (3, 7), np.float32)
    for k in (0, 3, 7):
        check_on_ep(topk_model(x, k, const_k=False, largest=largest), {"x": x, "k": np.array([k], np.int64)})


@pytest.mark.parametrize("k", [2**32, 2**32 + 1, 2**62], ids=str)
def test_topk_runtime_k_beyond_32_bits_raises(k, rng):
    # ORT 1.30 keeps only the low 32 bits of a runtime k (2^32 and 2^62 give an empty result,
    # 2^32 + 1 one value: docs/RELIABILITY.md); ONNX makes any k above the axis length invalid,
    # and the EP raises naming the node. The fuzz suite no longer draws such k.
    from opcheck import check_error_on_ep

    x = tied(rng, (3, 1, 4), np.int32)
    check_error_on_ep(topk_model(x, 1, const_k=False, axis=-2), {"x": x, "k": np.array([k], np.int64)},
                      "out of range")


def test_topk_opset10(rng):
    x = tied(rng, (3, 7), np.float32)
    check_on_ep(topk_model(x, 4, opset=10, axis=1), {"x": x})
    check_on_ep(topk_model(x, 4, opset=24), {"x": x})


def test_topk_unsorted_is_refused(rng):
    x = random_array(rng, (3, 7))
    reason = refusal(topk_model(x, 2, sorted=0), "TopK")
    assert reason and "sorted=0" in reason


def test_topk_chain_with_argmax_fused(rng):
    """TopK values feed ArgMin; both nodes on the EP in one run."""
    x = random_array(rng, (4, 9))
    kk = np.array([5], np.int64)
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk"),
             helper.make_node("ArgMin", ["v"], ["out0"], name="argmin", axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 9])],
                              [helper.make_tensor_value_info("out0", onnx.TensorProto.INT64, [4, 1]),
                               helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [4, 5])],
                              [onnx.numpy_helper.from_array(kk, "k")])
    check_on_ep(make_model(graph, opset=13), {"x": x}, node_names=("topk", "argmin"))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("shape, axis, keepdims", [
    ((19,), 0, 0), ((23,), 0, 1), ((1, 17), 1, 0), ((13, 1), 0, 1), ((3, 11, 2), 1, 0),
])
def test_arg_nan_rule_matches_cpu(op, last, shape, axis, keepdims, rng):
    # ORT's NaN rule (measured): rank 1 without select_last_index -> the first NaN; otherwise
    # NaN never wins a comparison and only a NaN first element stays. Few distinct values, so
    # ties, NaN first, NaN last and all-NaN lines all occur.
    x = rng.integers(-3, 4, shape).astype(np.float32)
    x[rng.random(shape) < 0.3] = np.nan
    x[(0,) * len(shape)] = np.nan
    for special in ([1, np.nan, 3], [1, 3, np.nan], [np.nan, 1, 3]):
        if len(shape) == 1:
            check_on_ep(single_node_model(op, {"x": np.array(special, np.float32)},
                                          {"axis": 0, "keepdims": keepdims,
                                           "select_last_index": last}),
                        {"x": np.array(special, np.float32)})
    model = single_node_model(op, {"x": x}, {"axis": axis, "keepdims": keepdims,
                                             "select_last_index": last})
    check_on_ep(model, {"x": x})
    x[(0,) * len(shape)] = 2.0
    check_on_ep(model, {"x": x})


@pytest.mark.parametrize("axis,k", [(-1, 3), (0, 2), (1, 1), (1, 5)], ids=str)
def test_topk_opset_1_k_attribute(axis, k, rng):
    x = random_array(rng, (4, 5))
    model = single_node_model("TopK", {"x": x}, attrs={"axis": axis, "k": k}, n_outputs=2,
                              opset=1)
    check_on_ep(model, {"x": x})


def test_cumsum_axis_computed_at_run_time(rng):
    """A runtime axis is read on the host each run (the plan runs eagerly)."""
    from opcheck import check_runs_on_ep

    x = random_array(rng, (3, 4, 5))
    model = single_node_model("CumSum", {"x": x, "axis": np.array(1, np.int64)},
                              attrs={"reverse": 1})
    check_runs_on_ep(model, [{"x": x, "axis": np.array(a, np.int64)} for a in (1, -1, 0)])
