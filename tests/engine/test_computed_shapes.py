"""Computed shapes run compiled: a Reshape/Expand/Slice/Range/ConstantOfShape whose shape input is
computed inside the fused subgraph from `Shape` of its tensors is fixed by the compile-cache key
(input shapes), so the chain is folded while the plan is traced and the fused node runs through
mlx::compile, never eagerly. Only a shape that is a real runtime value (a fused input) makes the
node eager, and the report says so.

ORT folds or fuses some shape chains itself (ReshapeFusion), so the EP sessions here run with its
graph optimizations off: the chains reach the EP as exported."""

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h

from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, run_cpu

OFF = ort.GraphOptimizationLevel.ORT_DISABLE_ALL


def ints(name, v):
    return onnx.numpy_helper.from_array(np.asarray(v, dtype=np.int64), name)


def computed_shape_model():
    """x[b, s, 8] -> Relu -> Reshape to [b, s, 2, 4] (shape from Shape/Gather/Unsqueeze/Concat),
    Expand to [b, s, 2, 4] from a Slice of the shape, Range(0, s), ConstantOfShape(Shape(x)),
    Slice with ends from Shape; everything reduced into one scalar output."""
    n = h.make_node
    nodes = [
        n("Relu", ["x"], ["r"], name="relu"),
        n("Shape", ["r"], ["sh"], name="shape"),
        n("Gather", ["sh", "i0"], ["b"], axis=0, name="gather_b"),
        n("Gather", ["sh", "i1"], ["s"], axis=0, name="gather_s"),
        n("Mul", ["s", "two"], ["s2"], name="mul_s"),
        n("Unsqueeze", ["b", "ax0"], ["bu"], name="unsq_b"),
        n("Unsqueeze", ["s", "ax0"], ["su"], name="unsq_s"),
        n("Concat", ["bu", "su", "c2", "c4"], ["newshape"], axis=0, name="concat"),
        n("Reshape", ["r", "newshape"], ["rr"], name="reshape"),
        n("Slice", ["sh", "st", "en"], ["lead"], name="slice_shape"),
        n("Concat", ["lead", "c1", "c1"], ["eshape"], axis=0, name="concat_expand"),
        n("Expand", ["rr", "eshape"], ["ee"], name="expand"),
        n("ConstantOfShape", ["sh"], ["ones"], name="const_of_shape",
          value=h.make_tensor("v", T.FLOAT, [1], [1.0])),
        n("Range", ["zero", "s2", "one"], ["rg"], name="range"),
        n("Cast", ["rg"], ["rgf"], to=T.FLOAT, name="cast"),
        n("Unsqueeze", ["s", "ax0"], ["s_end"], name="unsq_end"),
        n("Slice", ["x", "zero1", "s_end", "ax1"], ["xs"], name="slice_x"),
        n("ReduceSum", ["ee"], ["t0"], keepdims=0, name="sum_e"),
        n("ReduceSum", ["ones"], ["t1"], keepdims=0, name="sum_o"),
        n("ReduceSum", ["rgf"], ["t2"], keepdims=0, name="sum_r"),
        n("ReduceSum", ["xs"], ["t3"], keepdims=0, name="sum_x"),
        n("Sum", ["t0", "t1", "t2", "t3"], ["y"], name="total"),
    ]
    inits = [ints("i0", 0), ints("i1", 1), ints("two", 2), ints("ax0", [0]), ints("c2", [2]),
             ints("c4", [4]), ints("st", [0]), ints("en", [-1]), ints("c1", [1]), ints("zero", 0),
             ints("one", 1), ints("zero1", [0]), ints("ax1", [1])]
    x = h.make_tensor_value_info("x", T.FLOAT, ["b", "s", 8])
    y = h.make_tensor_value_info("y", T.FLOAT, [])
    return make_model(h.make_graph(nodes, "computed", [x], [y], inits))


def test_shape_chains_run_compiled(rng):
    model = computed_shape_model()
    run = EpRun(model, strict=True, optimization_level=OFF)
    try:
        for shape in [(2, 3, 8), (2, 3, 8), (1, 5, 8)]:
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            got = run.run({"x": x})[0]
            np.testing.assert_allclose(got, run_cpu(model, {"x": x})[0], rtol=1e-5)
        report = assert_ran_on_ep(run, [nd.name for nd in model.graph.node])
        (fused,) = report.fused.values()
        assert fused["runs"] == 3 and fused["compiled_runs"] == 3 and not fused["eager_only"]
        c = report.counters()
        assert c.get("compute.eager", 0) == 0 and c.get("compile.fallback", 0) == 0
        # One compiled function per shape key: the second run replayed the first one.
        assert (c.get("cache.miss"), c.get("cache.hit")) == (2, 1)
    finally:
        run.close()


def test_shape_from_a_fused_input_runs_eagerly_and_says_so(rng):
    """The control: a shape tensor fed by the caller is a runtime value, read on the host."""
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 12])
    shp = h.make_tensor_value_info("shp", T.INT64, [3])
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("Reshape", ["r", "shp"], ["y"], name="reshape")]
    model = make_model(h.make_graph(nodes, "fed", [x, shp], [y]), check=False)
    run = EpRun(model, strict=True, optimization_level=OFF)
    try:
        xv = rng.uniform(-1, 1, (2, 12)).astype(np.float32)
        for s in ([2, 3, 4], [4, 3, 2]):
            feeds = {"x": xv, "shp": np.array(s, np.int64)}
            np.testing.assert_array_equal(run.run(feeds)[0], run_cpu(model, feeds)[0])
        (fused,) = run.report().fused.values()
        assert fused["eager_only"] and fused["compiled_runs"] == 0
    finally:
        run.close()
