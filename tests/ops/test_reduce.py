import numpy as np
import onnx
import pytest
from onnx import helper

from opcheck import check_on_ep, refusal, single_node_model
from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, mlx_backend, random_array

# Opset where the axes move from an attribute to an input.
NEW_OPS = ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
           "ReduceLogSumExp", "ReduceSumSquare"]
INPUT_AXES_OPSET = {"ReduceSum": 13, "ReduceMean": 18, **{op: 18 for op in NEW_OPS}}
OPSETS = {"ReduceSum": [11, 13], "ReduceMean": [13, 18], **{op: [13, 18] for op in NEW_OPS}}


def reduce_model(op, x, axes, keepdims=None, noop=None, opset=21):
    """op over x with axes as attribute or constant input, per opset. axes=None: not given."""
    attrs = {}
    if keepdims is not None:
        attrs["keepdims"] = keepdims
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    if opset < INPUT_AXES_OPSET[op]:
        if axes is not None:
            attrs["axes"] = axes
        return single_node_model(op, {"x": x}, attrs=attrs, opset=opset)
    if axes is None:
        return single_node_model(op, {"x": x}, attrs=attrs, opset=opset)
    a = np.asarray(axes, dtype=np.int64)
    return single_node_model(op, {"x": x, "axes": a}, attrs=attrs, initializers={"axes": a}, opset=opset)


CASES = [
    ((2, 3, 4), [1], 1),
    ((2, 3, 4), [1], 0),
    ((2, 3, 4), [-1], 1),
    ((2, 3, 4), [0, 2], 0),
    ((2, 3, 4), [-3, -1], 1),
    ((2, 3, 4), None, 1),  # all axes
    ((2, 3, 4), None, 0),
    ((5,), [0], 0),
    ((1, 1), [0], 1),
    ((), None, 0),
    ((2, 0, 3), [1], 0),  # reduce over an empty axis
    ((2, 0, 3), [2], 1),  # empty input, non-empty axis
]


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize("opset_idx", [0, 1], ids=["axes-attr", "axes-input"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_reduce(op, opset_idx, case, rng):
    shape, axes, keepdims = case
    x = random_array(rng, shape)
    model = reduce_model(op, x, axes, keepdims=keepdims, opset=OPSETS[op][opset_idx])
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
def test_reduce_default_keepdims_and_opset1(op, rng):
    x = random_array(rng, (3, 4))
    check_on_ep(reduce_model(op, x, [0], opset=1), {"x": x})
    check_on_ep(reduce_model(op, x, None, opset=11), {"x": x})


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize("axes", [None, []], ids=["absent", "empty"])
@pytest.mark.parametrize("noop", [0, 1])
def test_reduce_empty_axes(op, axes, noop, rng):
    # No (or empty) axes: reduce everything, or the identity with noop_with_empty_axes=1.
    x = random_array(rng, (2, 3))
    model = reduce_model(op, x, axes, noop=noop, opset=INPUT_AXES_OPSET[op])
    got = check_on_ep(model, {"x": x})
    assert got[0].shape == ((2, 3) if noop else (1, 1))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize("opset", [13, 18])
def test_reduce_float16(op, opset, rng):
    x = random_array(rng, (3, 4, 5), np.float16)
    check_on_ep(reduce_model(op, x, [-1], opset=opset), {"x": x}, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("opset", [11, 13])
def test_reduce_sum_integers(dtype, opset, rng):
    x = random_array(rng, (3, 4, 5), dtype)
    for axes, keepdims in [([1], 0), ([0, 2], 1), (None, 0)]:
        check_on_ep(reduce_model("ReduceSum", x, axes, keepdims=keepdims, opset=opset), {"x": x})


def test_reduce_chain_fused(rng):
    """ReduceMean over the last axis feeding a ReduceSum: one fused node, both on the EP."""
    x = random_array(rng, (4, 6))
    axes = np.array([1], dtype=np.int64)
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"], name="mean", keepdims=0),
             helper.make_node("ReduceSum", ["m"], ["out0"], name="sum", keepdims=0)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor_value_info("out0", onnx.TensorProto.FLOAT, [])],
        [onnx.numpy_helper.from_array(axes, "axes")])
    check_on_ep(make_model(graph, opset=18), {"x": x}, node_names=("mean", "sum"))


def test_reduce_non_constant_axes_are_claimed(rng):
    """Axes fed at run time are claimed (read on the host each run)."""
    node = helper.make_node("ReduceSum", ["x", "axes"], ["out0"], name="node")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3]),
                      helper.make_tensor_value_info("axes", onnx.TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("out0", onnx.TensorProto.FLOAT, ["a", "b"])])
    x = random_array(rng, (2, 3))
    check_on_ep(make_model(graph, opset=13), {"x": x, "axes": np.array([1], np.int64)})


def test_reduce_mean_integer_is_refused(rng):
    x = random_array(rng, (2, 3), np.int32)
    reason = refusal(reduce_model("ReduceMean", x, [1], opset=18), "ReduceMean")
    assert reason and "int32" in reason


def test_reduce_sum_float64_is_refused(rng):
    x = rng.uniform(size=(2, 3))
    reason = refusal(reduce_model("ReduceSum", x, [1], opset=13), "ReduceSum")
    assert reason and "float64" in reason


# ---------------------------------------------------------------- integer overflow (issue 8)

INT_OVERFLOW = [
    # (dtype, rows, axes): sums past the type's range in both directions, and a row whose total
    # fits although a running sum does not (ORT saturates the total, not each step).
    (np.int32, [[2**30] * 4, [-(2**30)] * 3 + [-5], [2**31 - 1, 1, -1, 0], [7, 8, 9, 10]], [1]),
    (np.int32, [[2**30, 2**30], [2**30, 2**30], [-(2**30), 3]], [0]),
    (np.int32, [[2**30, 2**30, 2**30, -(2**30)]], None),
    (np.int64, [[2**62, 2**62, 1], [-(2**62), -(2**62), -(2**62)], [5, -6, 7]], [1]),
]


@pytest.mark.parametrize("dtype,rows,axes", INT_OVERFLOW, ids=lambda v: str(v)[:24])
@pytest.mark.parametrize("opset", [11, 13])
def test_reduce_sum_int_overflow_saturates_like_cpu(dtype, rows, axes, opset):
    """Regression (issue 8): the EP wrapped int32/int64 sums past the type's range; ORT's CPU
    kernel (measured, ORT 1.30) sums in double and saturates the total. The EP now sums exactly
    and saturates: equal to ORT CPU wherever ORT's double sum is exact."""
    x = np.array(rows, dtype=dtype)
    got = check_on_ep(reduce_model("ReduceSum", x, axes, keepdims=0, opset=opset), {"x": x})
    info = np.iinfo(dtype)
    exact = np.sum(x.astype(object), axis=None if axes is None else tuple(axes))
    want = np.array(np.clip(exact, int(info.min), int(info.max)), dtype=object).astype(dtype)
    np.testing.assert_array_equal(got[0], want)


def test_reduce_sum_int64_is_exact_beyond_2_53():
    """Regression (issue 8): above 2^53 ORT's CPU kernel rounds int64 sums (it accumulates in
    double: [2^53 + 1, 1] gives 2^53 there); the EP's sum is exact, so it is checked against
    Python integers, not ORT."""
    x = np.array([[2**53 + 1, 1], [2**62 + 3, -5], [2**63 - 1, -1]], dtype=np.int64)
    model = reduce_model("ReduceSum", x, [1], keepdims=0, opset=13)
    run = EpRun(model, strict=True)
    try:
        got = run.run({"x": x})[0]
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    assert got.tolist() == [2**53 + 2, 2**62 - 2, 2**63 - 2]


# ---------------------------------------------------------------- the other eight reductions


def _data_for(op, rng, shape, dtype=np.float32):
    # LogSum needs a positive sum; Prod stays in a moderate range.
    if op == "ReduceLogSum":
        return random_array(rng, shape, dtype, low=0.1, high=2.0)
    if op == "ReduceProd":
        return random_array(rng, shape, dtype, low=-1.5, high=1.5)
    return random_array(rng, shape, dtype)


@pytest.mark.parametrize("op", NEW_OPS)
@pytest.mark.parametrize("opset_idx", [0, 1], ids=["axes-attr", "axes-input"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_reduce_new_ops(op, opset_idx, case, rng):
    shape, axes, keepdims = case
    x = _data_for(op, rng, shape)
    model = reduce_model(op, x, axes, keepdims=keepdims, opset=OPSETS[op][opset_idx])
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", NEW_OPS)
@pytest.mark.parametrize("axes", [None, []], ids=["absent", "empty"])
@pytest.mark.parametrize("noop", [0, 1])
def test_reduce_new_ops_empty_axes(op, axes, noop, rng):
    # With noop=1 ORT still applies the per-element part (|x|, x^2, log x): negative data too.
    x = random_array(rng, (2, 3)) if noop else _data_for(op, rng, (2, 3))
    got = check_on_ep(reduce_model(op, x, axes, noop=noop, opset=18), {"x": x}, rtol=1e-5)
    assert got[0].shape == ((2, 3) if noop else (1, 1))
    if op in ("ReduceL1", "ReduceSumSquare"):
        xi = np.array([[-(2**31), 5, -3], [46341, 2**31 - 1, 0]], np.int32)
        check_on_ep(reduce_model(op, xi, axes, noop=noop, opset=18), {"x": xi})


@pytest.mark.parametrize("op", NEW_OPS)
@pytest.mark.parametrize("opset", [1, 11, 20])
def test_reduce_new_ops_other_opsets(op, opset, rng):
    x = _data_for(op, rng, (3, 4, 2))
    axes = [0, 2] if opset >= 11 else [1]
    check_on_ep(reduce_model(op, x, axes, opset=opset), {"x": x}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", NEW_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint8, np.int32])
@pytest.mark.parametrize("axes", [[1], [0, 2], [2]], ids=str)
def test_reduce_over_empty_axis_like_cpu(op, dtype, axes):
    """Zero-element reductions: ORT's identities (-inf/lowest for Max, 1 for Prod, -inf for the
    logs, 0 for the sums), on the EP where the dtype is claimed, refused otherwise."""
    x = np.zeros((2, 0, 3), dtype)
    if np.issubdtype(dtype, np.integer) and not _int_claimed(op, dtype):
        return
    check_on_ep(reduce_model(op, x, axes, keepdims=1, opset=18), {"x": x})
    check_on_ep(reduce_model(op, x, axes, keepdims=0, opset=18), {"x": x})


@pytest.mark.parametrize("op", NEW_OPS + ["ReduceSum"])
def test_reduce_empty_input_negative_axis_has_spec_shape(op):
    """ORT 1.30's CPU kernel returns the input shape (2, 0, 3) for axes=[-1], keepdims=1 on this
    empty input (its own shape inference says (2, 0, 1)); the EP gives the ONNX shape. No values
    differ (the tensor is empty either way)."""
    x = np.zeros((2, 0, 3), np.float32)
    run = EpRun(reduce_model(op, x, [-1], keepdims=1, opset=18), strict=True)
    try:
        got = run.run({"x": x})[0]
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    assert got.shape == (2, 0, 1)


def _int_claimed(op, dtype):
    if op in ("ReduceMax", "ReduceMin"):
        return dtype in (np.int8, np.uint8, np.int32, np.int64)
    return op in ("ReduceL1", "ReduceSumSquare") and dtype == np.int32


@pytest.mark.parametrize("op", NEW_OPS)
@pytest.mark.parametrize("opset", [13, 18])
def test_reduce_new_ops_float16(op, opset, rng):
    x = _data_for(op, rng, (3, 4, 5), np.float16)
    check_on_ep(reduce_model(op, x, [-1], opset=opset), {"x": x}, rtol=2e-3, atol=2e-3)


def test_reduce_l2_float16_accumulates_in_float32():
    # ORT: ReduceL2 of 100 x 300 in float16 is 3000 (the sum of squares overflows float16).
    x = np.full((2, 100), 300, np.float16)
    got = check_on_ep(reduce_model("ReduceL2", x, [1], opset=18), {"x": x})
    assert got[0].ravel().tolist() == [3000.0, 3000.0]
    check_on_ep(reduce_model("ReduceSumSquare", x, [1], opset=18), {"x": x})


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
@pytest.mark.parametrize("opset", [13, 18, 20])
def test_reduce_max_min_integers(op, dtype, opset, rng):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=(3, 4, 5), dtype=dtype, endpoint=True)
    x[0, 0, 0], x[1, 1, 1] = info.min, info.max
    for axes, keepdims in [([1], 0), ([0, 2], 1), (None, 0), ([-1], 1)]:
        check_on_ep(reduce_model(op, x, axes, keepdims=keepdims, opset=opset), {"x": x})


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("shape,axes", [((3, 4), [1]), ((3, 4), None), ((2, 0, 3), [2]), ((1, 5), [0])], ids=str)
def test_reduce_max_min_bool_opset20(op, shape, axes, rng):
    x = rng.random(shape) < 0.5
    if x.size:
        x[0] = True  # a row of ones, for all()
    for keepdims in (0, 1):
        check_on_ep(reduce_model(op, x, axes, keepdims=keepdims, opset=20), {"x": x})


INT32_ROWS = [[2**20, 2**12, 3, 0], [-7, 5, 2, 1], [2**31 - 1, 1, 1, 0], [-(2**31), -1, 1, 5],
              [46341, 0, 0, 0], [-46341, 46340, 0, 0]]


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceSumSquare"])
@pytest.mark.parametrize("opset", [13, 18])
def test_reduce_l1_sumsquare_int32_saturate_like_cpu(op, opset, rng):
    x = np.array(INT32_ROWS, np.int32)
    check_on_ep(reduce_model(op, x, [1], keepdims=0, opset=opset), {"x": x})
    y = random_array(rng, (3, 4, 5), np.int32)
    for axes, keepdims in [([1], 0), ([0, 2], 1), (None, 0)]:
        check_on_ep(reduce_model(op, y, axes, keepdims=keepdims, opset=opset), {"x": y})


@pytest.mark.parametrize("op,dtype", [("ReduceProd", np.int32), ("ReduceL2", np.int32), ("ReduceLogSum", np.int32),
                                      ("ReduceLogSumExp", np.int64), ("ReduceL1", np.int64),
                                      ("ReduceSumSquare", np.int64), ("ReduceMax", np.float64)])
def test_reduce_unclaimed_types_are_refused(op, dtype, rng):
    x = random_array(rng, (2, 3), dtype) if dtype != np.float64 else rng.uniform(size=(2, 3))
    reason = refusal(reduce_model(op, x, [1], opset=18), op)
    assert reason and np.dtype(dtype).name in reason


def test_reduce_log_sum_exp_extremes():
    # Large values (the max is taken out), all -inf (-inf, not NaN), +inf, mixed.
    x = np.array([[100.0, 100.5, -3.0], [88.0, 89.0, 1.0], [-np.inf, -np.inf, -np.inf],
                  [np.inf, 1.0, 2.0], [-np.inf, 0.0, 1.0]], np.float32)
    check_on_ep(reduce_model("ReduceLogSumExp", x, [1], opset=18), {"x": x})
    check_on_ep(reduce_model("ReduceLogSumExp", x.astype(np.float16), [1], opset=18),
                {"x": x.astype(np.float16)}, rtol=1e-3)


@pytest.mark.parametrize("op", ["ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                                "ReduceLogSumExp", "ReduceSumSquare"])
def test_reduce_nan_propagates_like_cpu(op):
    x = np.array([[1, np.nan, 3], [np.nan, 1, 2], [1, 2, np.nan], [np.inf, np.nan, -np.inf],
                  [-np.inf, -np.inf, -np.inf], [1, 2, 3]], np.float32)
    if op == "ReduceLogSum":
        x = np.abs(x)
    check_on_ep(reduce_model(op, x, [1], opset=18), {"x": x})


def test_reduce_max_nan_differs_from_cpu_documented():
    """ORT CPU keeps a NaN only when it leads the run ([1, NaN, 3] -> 3); MLX propagates it.
    Pinned so a change on either side is noticed (the difference is documented in reduce.cpp)."""
    x = np.array([[1, np.nan, 3], [np.nan, 1, 2], [1, 2, 3]], np.float32)
    run = EpRun(reduce_model("ReduceMax", x, [1], keepdims=0, opset=18), strict=True)
    try:
        got = run.run({"x": x})[0]
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    assert np.isnan(got[0]) and np.isnan(got[1]) and got[2] == 3  # ORT CPU: [3, NaN, 3]


@pytest.mark.parametrize("op,opset", [("ReduceSum", 13), ("ReduceMean", 18), ("ReduceMax", 18),
                                      ("ReduceL2", 18), ("ReduceLogSumExp", 18)])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_axes_computed_at_run_time(op, opset, keepdims, rng):
    """Axes fed at run time are read on the host each run (the plan runs eagerly): each run
    reduces over that run's axes, none baked in from an earlier one."""
    from opcheck import check_runs_on_ep, drop_input_ranks

    x = random_array(rng, (3, 4, 5))
    model = single_node_model(op, {"x": x, "axes": np.array([1], np.int64)},
                              attrs={"keepdims": keepdims}, opset=opset, check=False)
    model = drop_input_ranks(model, {"axes"})
    feeds = [{"x": x, "axes": np.array(a, np.int64)} for a in ([1], [0, 2], [-1], [2, 0])]
    check_runs_on_ep(model, feeds, rtol=1e-5, atol=1e-5)


def test_reduce_runtime_axes_out_of_range_is_an_error(rng):
    from opcheck import check_error_on_ep, drop_input_ranks

    x = random_array(rng, (3, 4))
    model = single_node_model("ReduceSum", {"x": x, "axes": np.array([1], np.int64)}, opset=13,
                              check=False)
    model = drop_input_ranks(model, {"axes"})
    check_error_on_ep(model, {"x": x, "axes": np.array([2], np.int64)}, "out of range")


@pytest.mark.parametrize("op,opset", [("ReduceSum", 13), ("ReduceMean", 18), ("ReduceMax", 18),
                                      ("ReduceL1", 18), ("ReduceLogSum", 18),
                                      ("ReduceSumSquare", 18), ("ReduceProd", 18)])
@pytest.mark.parametrize("axes", [[2], [0], [-1], [1, 5]], ids=str)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_scalar_with_runtime_axes_like_cpu(op, opset, axes, keepdims):
    # ORT CPU reduces a rank-0 input as itself whatever runtime axes it gets (constant ones fail
    # ONNX's shape inference); the EP raised "axis 2 is out of range for rank 0" (fuzz seed 3).
    x = np.array(-3.25 if op != "ReduceLogSum" else 3.25, np.float32)
    a = np.array(axes, np.int64)
    model = single_node_model(op, {"x": x, "axes": a}, attrs={"keepdims": keepdims},
                              opset=opset, check=False)
    check_on_ep(model, {"x": x, "axes": a})




# Fuzz seed 155, case o42_115 (opset 20, all axes, keepdims): two factors of 1e-30 and one of
# 1e30 among moderate ones; the product is -6.58e-30.
PROD_ORDER_CASE = [1.5279569625854492, -0.3077634572982788, -2.881635904312134, 1.572033405303955,
                   -2.0574190616607666, -1.6371251344680786, 1e-30, 0.12039507925510406,
                   -1.5000954866409302, -1.0321530103683472, 2.3703970909118652,
                   2.6431610584259033, 1e-30, 0.2919761836528778, 1e30, -2.690673589706421]


@pytest.mark.parametrize("shape", [(4, 2, 2), (16,), (2, 8)], ids=str)
def test_reduce_prod_rounds_the_float64_product_on_cpu(shape):
    """A float32 order that multiplies the two 1e-30 factors before the 1e30 one underflows to
    0 (MLX's did on this case; ORT CPU's Eigen order did not). On MLX's CPU backend the EP takes
    the product in float64 and rounds once."""
    x = np.array(PROD_ORDER_CASE, np.float32).reshape(shape)
    run = EpRun(reduce_model("ReduceProd", x, None, keepdims=1, opset=20), strict=True)
    try:
        got = run.run({"x": x})[0]
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    want = np.prod(x.astype(np.float64), keepdims=True).astype(np.float32)
    if mlx_backend() == "cpu":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0.0)
    else:  # GPU backends: float32 in MLX's order, the product or its underflow
        v = got.reshape(-1)[0]
        assert v == 0.0 or np.isclose(v, want.reshape(-1)[0], rtol=1e-5, atol=0.0), v
