"""Graph replay (on by default in the CUDA flavour, engine/device/graph_replay.h): a compiled run
captured once as a CUDA graph and launched again for the later runs of its shape key. Checks,
with device-resident I/O, that the captured and the replayed runs give ORT CPU's values with new
data each run (a replay that read stale inputs or wrote stale outputs fails), that the report
counts the capture and the replays, and the cases with other paths: shapes that change (one
captured run per key, the oldest dropped past four), an input whose values are read on the host,
an output that passes an input through, and runtime checks (their errors in replayed runs). Skipped where MLX has no
GPU backend (the CPU flavour)."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from ortmlx.testing import make_model, mlx_backend, run_cpu

from tests.engine.test_device_io import DeviceSession, check_model_run
from tests.engine.test_device_io import _model as _reshape_model

pytestmark = pytest.mark.skipif(mlx_backend() != "gpu", reason="needs MLX's GPU backend")


@pytest.fixture(autouse=True)
def _replay_on(monkeypatch):
    # Read when each fused node's executor is made: set before the sessions below are created.
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_GRAPH_REPLAY", "1")


def _block_model(e=32, f=64):
    # A transformer block in miniature: projection with bias, softmax attention over the rows,
    # residual, LayerNorm, GELU MLP. Weights are initializers (constants of the compiled function).
    rng = np.random.default_rng(11)
    w = {n: nh.from_array((rng.standard_normal(s) * 0.2).astype(np.float32), n)
         for n, s in [("wq", (e, e)), ("wk", (e, e)), ("wv", (e, e)), ("bq", (e,)),
                      ("w1", (e, f)), ("w2", (f, e)), ("g", (e,)), ("b", (e,))]}
    nodes = [
        h.make_node("MatMul", ["x", "wq"], ["q0"], name="q"),
        h.make_node("Add", ["q0", "bq"], ["q"], name="qb"),
        h.make_node("MatMul", ["x", "wk"], ["k"], name="k"),
        h.make_node("MatMul", ["x", "wv"], ["v"], name="v"),
        h.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 2, 1]),
        h.make_node("MatMul", ["q", "kt"], ["s"], name="scores"),
        h.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
        h.make_node("MatMul", ["p", "v"], ["a"], name="attend"),
        h.make_node("Add", ["a", "x"], ["r"], name="residual"),
        h.make_node("LayerNormalization", ["r", "g", "b"], ["n"], name="norm", axis=-1),
        h.make_node("MatMul", ["n", "w1"], ["m1"], name="up"),
        h.make_node("Gelu", ["m1"], ["m2"], name="gelu"),
        h.make_node("MatMul", ["m2", "w2"], ["y"], name="down"),
    ]
    graph = h.make_graph(nodes, "block", [h.make_tensor_value_info("x", T.FLOAT, ["b", "s", e])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["b", "s", e])],
                         initializer=list(w.values()))
    return make_model(graph, opset=20)


def _block_runs(shapes, seed: int) -> tuple[dict, set]:
    """Runs the block model on `shapes` in order with new data each run, each compared with ORT
    CPU; returns the report's counters and the nodes that ran on the EP."""
    model = _block_model()
    s = DeviceSession(model)
    rng = np.random.default_rng(seed)
    try:
        for shape in shapes:
            feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
            want = run_cpu(model, feeds)[0]
            got = s.run(feeds, {"y": (shape, np.float32)})["y"]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        rep = s.report()
        return rep.counters(), rep.executed_nodes()
    finally:
        s.close()


def test_replay_gives_cpu_values_run_after_run():
    # A miss, two hits (the second captured), then four replays.
    c, ran = _block_runs([(2, 16, 32)] * 7, seed=5)
    assert ran >= {"q", "scores", "softmax", "norm", "gelu", "down"}, ran
    assert c.get("graph_replay.capture", 0) == 1, c
    assert c.get("graph_replay.replay", 0) == 4, c


@pytest.mark.parametrize("setting, replays", [(None, 2), ("0", 0)])
def test_replay_is_on_by_default_and_zero_turns_it_off(monkeypatch, setting, replays):
    # The CUDA flavour replays without being asked; ONNXRUNTIME_EP_MLX_GRAPH_REPLAY=0 evaluates
    # every run the usual way (same values either way).
    if setting is None:
        monkeypatch.delenv("ONNXRUNTIME_EP_MLX_GRAPH_REPLAY")
    else:
        monkeypatch.setenv("ONNXRUNTIME_EP_MLX_GRAPH_REPLAY", setting)
    c, ran = _block_runs([(1, 24, 32)] * 5, seed=9)
    assert ran >= {"q", "scores", "softmax", "norm", "gelu", "down"}, ran
    assert c.get("graph_replay.capture", 0) == (1 if replays else 0), c
    assert c.get("graph_replay.replay", 0) == replays, c


def test_replay_one_captured_run_per_shape_oldest_dropped():
    # Six shape keys, more than the four captured runs a fused node keeps, in turns: each key is
    # captured on its second hit; a dropped key is captured again when it comes back (in turns,
    # every key has been dropped by then); the last one captured is still kept and replays.
    shapes = [(1, 8, 32), (2, 8, 32), (1, 12, 32), (3, 5, 32), (1, 7, 32), (2, 9, 32)]
    c, _ = _block_runs(shapes * 4 + [shapes[-1]] * 2, seed=6)
    assert c.get("graph_replay.capture", 0) >= 2 * len(shapes), c
    assert c.get("graph_replay.replay", 0) == 2, c


def test_replay_on_with_host_read_input_and_passed_through_output():
    # The device I/O model: Reshape's shape input is read on the host, one output is an input
    # passed through. With replay on, its runs stay right however they run (a plan that reads
    # values on the host runs eagerly and is never captured; its uploads are waited for).
    model = _reshape_model()
    s = DeviceSession(model)
    rng = np.random.default_rng(7)
    try:
        for a, b in [(4, 6)] * 5 + [(8, 3)] * 5:
            check_model_run(s, model, a, b, rng)
        ran = s.report().executed_nodes()
        assert ran >= {"add", "reshape", "pass", "mul"}, ran
    finally:
        s.close()


def test_runtime_checks_of_replayed_runs_still_raise():
    # Integer division checks its divisor at run time (an error naming the node). A captured or
    # replayed run brings the checks' flags back with its outputs: a zero divisor fails cleanly
    # in a replayed run too, and the next run is right.
    graph = h.make_graph(
        [h.make_node("Div", ["a", "b"], ["q"], name="div"),
         h.make_node("Add", ["q", "a"], ["y"], name="add")],
        "checks",
        [h.make_tensor_value_info("a", T.INT32, [3, 4]), h.make_tensor_value_info("b", T.INT32, [3, 4])],
        [h.make_tensor_value_info("y", T.INT32, [3, 4])])
    model = make_model(graph, opset=17)
    s = DeviceSession(model)
    rng = np.random.default_rng(8)
    try:
        for _ in range(5):
            feeds = {"a": rng.integers(-50, 50, (3, 4)).astype(np.int32),
                     "b": rng.integers(1, 9, (3, 4)).astype(np.int32)}
            got = s.run(feeds, {"y": ((3, 4), np.int32)})["y"]
            np.testing.assert_array_equal(got, run_cpu(model, feeds)[0])
        rep = s.report()
        assert rep.executed_nodes() >= {"div", "add"}, rep.executed_nodes()
        assert rep.counters().get("graph_replay.replay", 0) == 2, rep.counters()
        feeds["b"][1, 2] = 0
        with pytest.raises(Exception, match="div"):
            s.run(feeds, {"y": ((3, 4), np.int32)})
        feeds["b"][1, 2] = 3
        np.testing.assert_array_equal(s.run(feeds, {"y": ((3, 4), np.int32)})["y"],
                                      run_cpu(model, feeds)[0])
    finally:
        s.close()


def _broadcast_sum_model(rows: int, n: int):
    # y = ReduceSum over `rows` copies of 2x: the doubled copies are one (rows, n) float32 array
    # of the compiled function, the model's inputs and outputs n floats each.
    graph = h.make_graph(
        [h.make_node("Expand", ["x", "shape"], ["e"], name="expand"),
         h.make_node("Mul", ["e", "two"], ["m"], name="double"),
         h.make_node("ReduceSum", ["m", "axes"], ["y"], name="sum", keepdims=1)],
        "broadcast_sum",
        [h.make_tensor_value_info("x", T.FLOAT, [1, n])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, n])],
        initializer=[nh.from_array(np.array([rows, n], np.int64), "shape"),
                     nh.from_array(np.array(2.0, np.float32), "two"),
                     nh.from_array(np.array([0], np.int64), "axes")])
    return make_model(graph, opset=18)


@pytest.mark.parametrize("rows, captured", [(8, True), (5120, False)])
def test_runs_holding_an_eighth_of_device_memory_are_not_captured(rows, captured):
    # A captured run keeps all its arrays for as long as it can be launched: a run whose arrays
    # take more than an eighth of the memory MLX can get (20 GiB here, above an eighth of an H200)
    # is evaluated the usual way every time, counted as refused; the same model small is captured
    # on its third run and replayed on its fourth.
    n = 1 << 20
    model = _broadcast_sum_model(rows, n)
    s = DeviceSession(model)
    rng = np.random.default_rng(12)
    try:
        for _ in range(4):
            x = rng.standard_normal((1, n)).astype(np.float32)
            got = s.run({"x": x}, {"y": ((1, n), np.float32)})["y"]
            np.testing.assert_allclose(got, 2.0 * rows * x, rtol=1e-5, atol=1e-5)
        rep = s.report()
        assert rep.executed_nodes() >= {"expand", "double", "sum"}, rep.executed_nodes()
        c = rep.counters()
        assert c.get("graph_replay.capture", 0) == (1 if captured else 0), c
        assert c.get("graph_replay.replay", 0) == (1 if captured else 0), c
        assert (c.get("graph_replay.refused", 0) > 0) == (not captured), c
    finally:
        s.close()


def test_replayed_runs_count_the_graph_gpu_time_as_evaluation():
    # A replay only launches the graph; the host then waits for it inside the output copy. The
    # report counts the graph's GPU time (CUDA events around the launch) as the evaluation, so a
    # run of eight 1024^2 products with a 4-byte output shows its time under eval, not copy.
    rng = np.random.default_rng(3)
    n = 1024
    w = nh.from_array((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32), "w")
    nodes, x = [], "x"
    for i in range(8):
        nodes.append(h.make_node("MatMul", [x, "w"], [f"m{i}"], name=f"mm{i}"))
        x = f"m{i}"
    nodes.append(h.make_node("ReduceSum", [x], ["y"], name="sum", keepdims=0))
    graph = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", T.FLOAT, [n, n])],
                         [h.make_tensor_value_info("y", T.FLOAT, [])], initializer=[w])
    model = make_model(graph, opset=20)
    s = DeviceSession(model)
    try:
        feeds = {"x": rng.standard_normal((n, n)).astype(np.float32)}
        want = run_cpu(model, feeds)[0]
        for _ in range(3):  # a miss, a hit, the capture
            s.run(feeds, {"y": ((), np.float32)})
        t0 = s.report().raw["times"]
        runs = 5
        for _ in range(runs):
            got = s.run(feeds, {"y": ((), np.float32)})["y"]
        rep = s.report()
        t1 = rep.raw["times"]
        np.testing.assert_allclose(got, want, rtol=1e-3)
        assert rep.counters().get("graph_replay.replay", 0) == runs, rep.counters()
        ev = (t1["eval"] - t0["eval"]) / runs
        cp = (t1["copy"] - t0["copy"]) / runs
        # Eight fp32 1024^3 products: tens of microseconds at least on any GPU MLX runs on.
        assert ev > 2e-5 and ev > cp, (ev, cp)
    finally:
        s.close()


@pytest.mark.parametrize("alloc", ["pool", "graph"])
def test_replay_of_cudnn_convolutions_with_either_capture_allocation(monkeypatch, alloc):
    # Convolutions large enough for the EP's cuDNN primitive (>= 2^28 FLOPs each): their outputs
    # are the EP's own blocks, which a capture takes outside the graph by default ("pool") or as
    # the graph's memory nodes ("graph"). Either way every replay gives ORT CPU's values.
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_GRAPH_REPLAY_ALLOC", alloc)
    rng = np.random.default_rng(8)
    c = 64
    w1 = nh.from_array((rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32), "w1")
    w2 = nh.from_array((rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32), "w2")
    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"], name="relu"),
             h.make_node("Conv", ["r1", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1])]
    shape = (2, c, 56, 56)
    graph = h.make_graph(nodes, "convs", [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                         [h.make_tensor_value_info("y", T.FLOAT, list(shape))], initializer=[w1, w2])
    model = make_model(graph, opset=17)
    s = DeviceSession(model)
    try:
        for _ in range(6):
            feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
            got = s.run(feeds, {"y": (shape, np.float32)})["y"]
            np.testing.assert_allclose(got, run_cpu(model, feeds)[0], rtol=1e-4, atol=1e-4)
        c_ = s.report().counters()
        assert c_.get("graph_replay.capture", 0) == 1 and c_.get("graph_replay.replay", 0) == 3, c_
    finally:
        s.close()
