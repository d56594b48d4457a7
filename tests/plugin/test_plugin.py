"""The plugin boundary: loading, device, partitioning with CPU fallback, errors, teardown."""

import gc
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ortmlx
from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, random_array, run_cpu


def test_library_exports_only_the_plugin_entry_points():
    out = subprocess.run(["nm", "-D", "--defined-only", ortmlx.library_path()],
                         capture_output=True, text=True, check=True).stdout
    symbols = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert symbols == {"CreateEpFactories", "ReleaseEpFactory"}


def test_library_does_not_link_onnxruntime():
    out = subprocess.run(["ldd", ortmlx.library_path()], capture_output=True, text=True).stdout
    assert "onnxruntime" not in out


def test_ep_device_identity():
    devices = ortmlx.ep_devices()
    assert len(devices) == 1
    assert devices[0].ep_name == "MLXExecutionProvider"
    assert devices[0].ep_vendor == "ortmlx"
    assert devices[0].ep_metadata.get("ortmlx.version") == ortmlx.version()


def _chain_model(ops, shape=(2, 3)):
    x = h.make_tensor_value_info("x", T.FLOAT, list(shape))
    y = h.make_tensor_value_info("y", T.FLOAT, list(shape))
    nodes, prev = [], "x"
    for i, op in enumerate(ops):
        out = "y" if i == len(ops) - 1 else f"t{i}"
        # The random ops (no MLX implementation: nothing to match ORT's generator) get a seed,
        # so ORT CPU's output is the same in every session.
        attrs = {"seed": 1.0} if op.startswith("Random") else {}
        nodes.append(h.make_node(op, [prev], [out], name=f"{op.lower()}{i}", **attrs))
        prev = out
    return make_model(h.make_graph(nodes, "chain", [x], [y]))


def test_unsupported_op_runs_on_cpu_and_the_rest_on_the_ep(rng):
    # RandomUniformLike is not implemented: it stays on ORT CPU, its neighbours run on the EP.
    model = _chain_model(["Exp", "RandomUniformLike", "Tanh", "Abs"])
    x = rng.standard_normal((2, 3)).astype(np.float32)
    run = EpRun(model)
    got = run.run({"x": x})[0]
    report = assert_ran_on_ep(run, ["exp0", "tanh2", "abs3"])
    assert "randomuniformlike1" not in report.assigned_nodes()
    assert (report.refused()["RandomUniformLike"]["reason"] ==
            "no MLX implementation of RandomUniformLike")
    assert len(report.fused) == 2  # {exp0} and {tanh2, abs3}: the random op splits the chain
    np.testing.assert_allclose(got, run_cpu(model, {"x": x})[0], rtol=1e-6, atol=1e-6)


def test_strict_session_when_everything_is_claimed(rng):
    model = _chain_model(["Exp", "Tanh", "Abs"])
    x = rng.standard_normal((2, 3)).astype(np.float32)
    run = EpRun(model, strict=True)
    np.testing.assert_allclose(run.run({"x": x})[0], run_cpu(model, {"x": x})[0], rtol=1e-6)
    with pytest.raises(Exception):
        EpRun(_chain_model(["Exp", "RandomUniformLike"]), strict=True)


def test_claim_debug_prints_reasons():
    code = textwrap.dedent("""
        import numpy as np, ortmlx
        from tests.plugin.test_plugin import _chain_model
        from ortmlx.testing import EpRun
        ortmlx.register_execution_provider_library()
        EpRun(_chain_model(["Exp", "RandomUniformLike", "RandomNormalLike"])).run({"x": np.ones((2, 3), np.float32)})
    """)
    env = dict(os.environ, ONNXRUNTIME_EP_MLX_CLAIM_DEBUG="1")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=root, check=True)
    assert ("refused RandomUniformLike x1: no MLX implementation of RandomUniformLike "
            "[randomuniformlike1]") in out.stderr
    assert "refused RandomNormalLike x1" in out.stderr
    assert "1/3 nodes claimed" in out.stderr


def _dynamic_add_model():
    a = h.make_tensor_value_info("a", T.FLOAT, ["n"])
    b = h.make_tensor_value_info("b", T.FLOAT, ["m"])
    y = h.make_tensor_value_info("y", T.FLOAT, ["n"])
    nodes = [h.make_node("Add", ["a", "b"], ["s"], name="bad_add"),
             h.make_node("Exp", ["s"], ["y"], name="exp")]
    return make_model(h.make_graph(nodes, "dyn", [a, b], [y]))


def test_runtime_error_names_the_node_and_the_session_survives(rng):
    run = EpRun(_dynamic_add_model(), strict=True)
    a = rng.standard_normal(3).astype(np.float32)
    with pytest.raises(Exception) as err:
        run.run({"a": a, "b": rng.standard_normal(4).astype(np.float32)})
    msg = str(err.value)
    assert "MLXExecutionProvider" in msg and "bad_add" in msg and "Add" in msg
    # The same session still works on valid input.
    b = rng.standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(run.run({"a": a, "b": b})[0], np.exp(a + b), rtol=1e-6)
    assert_ran_on_ep(run, ["bad_add", "exp"])


def test_graph_output_that_is_also_consumed_inside_the_cluster(rng):
    x = h.make_tensor_value_info("x", T.FLOAT, [4])
    y1 = h.make_tensor_value_info("y1", T.FLOAT, [4])
    y2 = h.make_tensor_value_info("y2", T.FLOAT, [4])
    nodes = [h.make_node("Exp", ["x"], ["y1"], name="e"),
             h.make_node("Neg", ["y1"], ["y2"], name="n")]
    model = make_model(h.make_graph(nodes, "g", [x], [y1, y2]))
    xv = rng.standard_normal(4).astype(np.float32)
    run = EpRun(model, strict=True)
    got = run.run({"x": xv})
    np.testing.assert_allclose(got[0], np.exp(xv), rtol=1e-6)
    np.testing.assert_allclose(got[1], -np.exp(xv), rtol=1e-6)


def test_many_sessions_keep_memory_flat(rng):
    import resource

    model = _chain_model(["Exp", "Tanh", "Abs"], shape=(64, 64))
    x = rng.standard_normal((64, 64)).astype(np.float32)

    def cycle(n):
        for _ in range(n):
            run = EpRun(model)
            run.run({"x": x})
            run.close()
            del run
        gc.collect()

    cycle(20)  # warm-up: allocator pools, ORT's one-time state
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cycle(100)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert after - before < 50 * 1024, f"peak RSS grew by {(after - before) / 1024:.1f} MiB"


def test_unregister_while_a_session_is_alive_does_not_crash():
    """Regression (issue 8): unregistering the library while a session still holds its EP, then
    running and releasing that session, killed the process with SIGSEGV (ORT freed the factory
    and unloaded the library under the live EP). ORT forbids the order; the EP now keeps the
    factory until its last EP is gone and its code mapped (-z nodelete). Runs in a child."""
    code = textwrap.dedent("""
        import gc
        import numpy as np, onnxruntime as ort, ortmlx
        from onnx import TensorProto as T, helper as h
        from ortmlx.testing import make_model
        x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
        y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
        m = make_model(h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
        ortmlx.register_execution_provider_library()
        so = ort.SessionOptions()
        ortmlx.append_to_session_options(so, {})
        s = ort.InferenceSession(m.SerializeToString(), so)
        feed = {"x": np.array([[-1, 2, -3], [4, -5, 6]], np.float32)}
        print("before", s.run(None, feed)[0].sum(), flush=True)
        ort.unregister_execution_provider_library("MLXExecutionProvider")
        print("after", s.run(None, feed)[0].sum(), flush=True)
        del s
        gc.collect()
        print("released", flush=True)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ), cwd=os.path.dirname(os.path.dirname(
                           os.path.dirname(os.path.abspath(__file__)))), timeout=120)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-3000:])
    assert r.stdout.split() == ["before", "12.0", "after", "12.0", "released"], r.stdout


def test_later_getcapability_passes_keep_the_earlier_fused_nodes(rng, capfd):
    """Regression (issue 9): ORT asks again after inlining a function op the EP refused (Swish
    in float16, which the EP claims in float32 only; opset 24: no kernel in ORT 1.30, inlined to
    Mul/Sigmoid/Mul and a CastLike); those passes show the EP's fused nodes of the earlier passes.
    They were listed as refused ops, the earlier pass was marked superseded although its fused
    nodes stay, and unnamed nodes collapsed into one name when counting."""
    x = h.make_tensor_value_info("x", T.FLOAT16, [2, 3, 4])
    y = h.make_tensor_value_info("y", T.FLOAT16, [2, 3, 4])
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("Swish", ["r"], ["s"], name="swish"),
             h.make_node("Exp", ["s"], ["y"])]  # unnamed
    model = make_model(h.make_graph(nodes, "g", [x], [y]), opset=24)
    feeds = {"x": random_array(rng, (2, 3, 4), np.float16)}
    run = EpRun(model, provider_options={"claim_debug": "1"})
    try:
        got = run.run(feeds)[0]
        report = run.report()
    finally:
        run.close()
    err = capfd.readouterr().err
    r = np.maximum(feeds["x"].astype(np.float32), 0)
    np.testing.assert_allclose(got.astype(np.float32), np.exp(r / (1 + np.exp(-r))), rtol=5e-3)
    if "Swish" in report.executed_op_types():
        pytest.skip("the EP claims float16 Swish now: no second pass (pick another function op)")
    claims = report.raw["claims"]
    latest = [c for c in claims.values() if c["latest"]]
    assert len(latest) == 1 and latest[0]["kept_fused"], claims
    # The EP's own fused nodes are never refused.
    assert not any(op.startswith("MLXExecutionProvider") for op in report.refused()), err
    assert "refused MLXExecutionProvider" not in err, err
    assert "fused node(s) of an earlier pass kept" in err, err
    # Earlier passes are kept, not superseded; the final graph (Relu, the inlined body, Exp) is
    # whole on the EP, its unnamed nodes counted.
    earlier = [c for c in claims.values() if not c["latest"]]
    assert earlier and not any(c["superseded"] for c in earlier), claims
    assert report.total_nodes() == report.assigned_count() == report.executed_count(), (
        claims, report.fused)
    assert report.total_nodes() >= 5, claims
