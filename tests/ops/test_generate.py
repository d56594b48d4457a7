"""Shape, Size, ConstantOfShape, Range; and how shape-deciding values computed in the graph or fed
at run time are handled (compiled when fixed by the input shapes, eager per run otherwise)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from opcheck import NP_TO_ONNX, check_on_ep, refusal, single_node_model
from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, random_array, run_cpu

I64 = np.int64


def _model(nodes, inputs, outputs, inits=(), opset=21):
    m = make_model(h.make_graph(nodes, "g", inputs, outputs, list(inits)), opset=opset, check=False)
    return onnx.shape_inference.infer_shapes(m)


def _run_twice(model, feeds_list, node_names):
    """Runs every feed on the EP, compares with ORT CPU; returns the EP's counters."""
    run = EpRun(model, strict=True)
    try:
        for feeds in feeds_list:
            got = run.run(feeds)
            want = run_cpu(model, feeds)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape, (g.shape, w.shape)
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
        assert_ran_on_ep(run, node_names)
        return run.report().counters()
    finally:
        run.close()


# ---------------------------------------------------------------- Shape / Size

def _symbolic(op, x, attrs=None, opset=21):
    """op(x) with every dim of x symbolic: ORT would constant-fold Shape/Size of a static shape
    before the EP sees the node."""
    dims = [f"d{i}" for i in range(x.ndim)]
    node = h.make_node(op, ["x"], ["out0"], name="node", **(attrs or {}))
    return _model([node], [h.make_tensor_value_info("x", NP_TO_ONNX[x.dtype], dims)],
                  [h.make_tensor_value_info("out0", T.INT64, None)], opset=opset)

@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"end": -1}, {"start": -2, "end": 10},
                                   {"start": 2, "end": 1}, {"start": -10}, {"end": 0}], ids=str)
@pytest.mark.parametrize("shape", [(2, 3, 4), (5,), (2, 0, 3)], ids=str)
def test_shape(shape, attrs, rng):
    x = random_array(rng, shape)
    check_on_ep(_symbolic("Shape", x, attrs), {"x": x})


@pytest.mark.parametrize("opset", [13, 15, 19, 21])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64, np.bool_])
def test_shape_size_types_and_opsets(opset, dtype, rng):
    x = random_array(rng, (3, 1, 2), dtype)
    check_on_ep(_symbolic("Shape", x, opset=opset), {"x": x})
    check_on_ep(_symbolic("Size", x, opset=opset), {"x": x})


@pytest.mark.parametrize("shape", [(2, 3, 4), (0, 5), (1,)], ids=str)
def test_size(shape, rng):
    x = random_array(rng, shape)
    check_on_ep(_symbolic("Size", x), {"x": x})


# ---------------------------------------------------------------- ConstantOfShape

@pytest.mark.parametrize("value", [None, np.array([1.5], np.float32), np.array([3], np.int64),
                                   np.array([-7], np.int32), np.array([True]),
                                   np.array([0.25], np.float16), np.array([5], np.uint8)],
                         ids=lambda v: "default" if v is None else str(v.dtype))
@pytest.mark.parametrize("dims", [[2, 3], [], [0, 4], [1, 1, 5]], ids=str)
def test_constant_of_shape(dims, value):
    # The shape is a graph input (ORT folds a ConstantOfShape of a constant before the EP sees it).
    shape = np.array(dims, I64)
    attrs = {} if value is None else {"value": onnx.numpy_helper.from_array(value)}
    check_on_ep(single_node_model("ConstantOfShape", {"shape": shape}, attrs=attrs),
                {"shape": shape})


def test_constant_of_shape_runtime_shape():
    # The shape is a graph input: read on the host each run (eager), so each run's shape is right.
    out = h.make_tensor_value_info("y", T.FLOAT, None)
    node = h.make_node("ConstantOfShape", ["s"], ["y"], name="node",
                       value=onnx.numpy_helper.from_array(np.array([2.5], np.float32)))
    model = _model([node], [h.make_tensor_value_info("s", T.INT64, [2])], [out])
    c = _run_twice(model, [{"s": np.array([2, 3], I64)}, {"s": np.array([4, 1], I64)}], ["node"])
    assert c.get("compute.error", 0) == 0


# ---------------------------------------------------------------- Range

RANGES = [(0, 10, 1), (3, 9, 3), (10, 4, -2), (5, 5, 1), (5, 1, 1), (-3, 4, 2), (7, -8, -5)]


@pytest.mark.parametrize("case", RANGES, ids=str)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32])
def test_range(case, dtype):
    feeds = {k: np.array(v, dtype) for k, v in zip(("start", "limit", "delta"), case)}
    check_on_ep(single_node_model("Range", feeds), feeds)


@pytest.mark.parametrize("case", [(0.0, 1.0, 0.1), (1.0, -2.0, -0.3), (0.5, 1000.0, 0.7),
                                  (-1.0, 1.0, 0.001)], ids=str)
def test_range_float_matches_cpu_exactly(case):
    # ORT builds float ranges by repeated addition; so does the EP (bit-identical).
    feeds = {k: np.array(v, np.float32) for k, v in zip(("start", "limit", "delta"), case)}
    model = single_node_model("Range", feeds)
    got = check_on_ep(model, feeds, rtol=0, atol=0)
    assert got[0].size > 0


def test_range_runtime_inputs_change_between_runs():
    feeds = [{"start": np.array(s, I64), "limit": np.array(l, I64), "delta": np.array(d, I64)}
             for s, l, d in [(0, 5, 1), (2, 20, 3), (9, 0, -1)]]
    model = single_node_model("Range", feeds[0])
    _run_twice(model, feeds, ["node"])


def test_range_float64_is_refused():
    feeds = {k: np.array(1.0) for k in ("start", "limit", "delta")}
    assert "float64" in refusal(single_node_model("Range", feeds), "Range")


# ---------------------------------------------------------------- data-dependent shapes

def _shape_chain_model():
    """Shape(x)[0] concatenated with 4 feeds ConstantOfShape and Expand: every value is fixed by
    the input shape (ORT cannot fold it: x's dims are symbolic)."""
    nodes = [
        h.make_node("Shape", ["x"], ["s"], name="shape"),
        h.make_node("Gather", ["s", "i0"], ["d0"], name="g0", axis=0),
        h.make_node("Unsqueeze", ["d0", "ax"], ["u0"], name="u0"),
        h.make_node("Concat", ["u0", "tail"], ["target"], name="cat", axis=0),
        h.make_node("ConstantOfShape", ["target"], ["c"], name="cos",
                    value=onnx.numpy_helper.from_array(np.array([1.5], np.float32))),
        h.make_node("Expand", ["w", "target"], ["e"], name="expand"),
        h.make_node("Reshape", ["e", "flat"], ["y"], name="reshape"),
    ]
    inits = [onnx.numpy_helper.from_array(np.array(0, I64), "i0"),
             onnx.numpy_helper.from_array(np.array([0], I64), "ax"),
             onnx.numpy_helper.from_array(np.array([4], I64), "tail"),
             onnx.numpy_helper.from_array(np.array([-1], I64), "flat")]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["B", "S"]),
                          h.make_tensor_value_info("w", T.FLOAT, [1, 4])],
                  [h.make_tensor_value_info("c", T.FLOAT, None),
                   h.make_tensor_value_info("y", T.FLOAT, None)], inits)


def test_shape_derived_values_stay_compiled(rng):
    model = _shape_chain_model()
    w = random_array(rng, (1, 4))
    feeds = [{"x": random_array(rng, s), "w": w} for s in [(2, 3), (5, 1), (2, 7)]]
    c = _run_twice(model, feeds, ["shape", "g0", "u0", "cat", "cos", "expand", "reshape"])
    assert c.get("compile.fallback", 0) == 0, c
    assert c.get("compute.compiled", 0) == 3, c


def test_runtime_shape_input_runs_eagerly_and_correctly(rng):
    # Expand's shape is a graph input: a compiled function keyed on shapes must not bake it in.
    node = h.make_node("Expand", ["x", "s"], ["y"], name="node")
    model = _model([node], [h.make_tensor_value_info("x", T.FLOAT, [3, 1]),
                            h.make_tensor_value_info("s", T.INT64, [2])],
                   [h.make_tensor_value_info("y", T.FLOAT, None)])
    x = random_array(rng, (3, 1))
    feeds = [{"x": x, "s": np.array(v, I64)} for v in ([3, 4], [1, 2], [3, 1], [3, 4])]
    c = _run_twice(model, feeds, ["node"])
    assert c.get("compute.compiled", 0) == 0, c


@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (1, 1), (5, 5), (0, 3)], ids=str)
@pytest.mark.parametrize("k", [0, 1, -2, 7, -9, 2**62, -2**62, 2**63 - 1, -2**63])
def test_eyelike_shapes_and_k(shape, k, rng):
    x = random_array(rng, shape, np.float32)
    check_on_ep(single_node_model("EyeLike", {"x": x}, attrs={"k": k}), {"x": x})


@pytest.mark.parametrize("src", [np.float32, np.int32, np.int64, np.uint64])
@pytest.mark.parametrize("dtype", [None, onnx.TensorProto.FLOAT, onnx.TensorProto.INT32,
                                   onnx.TensorProto.INT64, onnx.TensorProto.UINT64])
def test_eyelike_types(src, dtype, rng):
    x = random_array(rng, (3, 5), src)
    attrs = {"k": -1} if dtype is None else {"k": -1, "dtype": dtype}
    check_on_ep(single_node_model("EyeLike", {"x": x}, attrs=attrs), {"x": x})


# ---------------------------------------------------------------- hostile int64 values

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


@pytest.mark.parametrize("dtype, start, limit, delta", [
    # limit - start overflowed the type: the EP produced nothing where ORT gives 4 values.
    (np.int64, I64_MIN, I64_MAX, 2**62),
    (np.int64, I64_MAX, I64_MIN, -(2**62)),
    (np.int64, I64_MIN, I64_MAX, I64_MAX),
    (np.int64, -5, I64_MAX, 2**61),
    (np.int64, 0, 5, I64_MIN),
    # ORT converts limit and start to double before subtracting: this range is empty there.
    (np.int64, I64_MAX - 1, I64_MAX, 2**62),
    (np.int32, I32_MIN, I32_MAX, 2**30),
    (np.int32, I32_MAX, I32_MIN, -(2**30)),
    (np.int32, I32_MIN, I32_MAX, I32_MAX),
    (np.float32, -1.0, 2.0**24, 2.0**24),  # float limit - start would round the count down
])
def test_range_extreme_bounds_match_cpu(dtype, start, limit, delta):
    from isolated import check_hostile, loose_model

    model = loose_model("Range", [(n, dtype, []) for n in ("s", "l", "d")])
    feeds = {"s": np.array(start, dtype), "l": np.array(limit, dtype), "d": np.array(delta, dtype)}
    good = {"s": np.array(1, dtype), "l": np.array(9, dtype), "d": np.array(3, dtype)}
    r = check_hostile(model, feeds, good, op_type="Range")
    assert "node" in r["executed"]


@pytest.mark.parametrize("dims", [[2**30, 2**30, 4], [2**31, 1, 1], [2**32 + 1, 1, 1],
                                  [2**30, 2**30, 2**30], [0, 2**31, 2**31]])
def test_constant_of_shape_huge_dims_clean_error(dims):
    from isolated import check_hostile, loose_model

    # The element count overflows (or a dim exceeds MLX's int32 dims): an error naming the node,
    # not a crash, and the session then runs a good shape.
    model = loose_model("ConstantOfShape", [("shape", np.int64, [3])])
    good = {"shape": np.array([2, 3, 1], np.int64)}
    check_hostile(model, {"shape": np.array(dims, np.int64)}, good, op_type="ConstantOfShape",
                  error="", cpu=False)
