"""ONNXRUNTIME_EP_MLX_TRACE / provider option `trace`: Chrome/Perfetto JSON written at EP teardown."""

import gc
import os

import numpy as np
import pytest

from ortmlx.testing import EpRun
from tests.engine.util import dynamic_chain_model, load_trace, run_python


def _by_name(events, name):
    return [e for e in events if e.get("name") == name]


def test_trace_holds_the_spans_and_categories(tmp_path, rng):
    path = str(tmp_path / "trace.json")
    run = EpRun(dynamic_chain_model(), provider_options={"trace": path}, strict=True)
    for rows in (2, 2, 3):
        run.run({"x": rng.uniform(-1, 1, (rows, 8)).astype(np.float32)})
    run.close()
    del run
    gc.collect()  # EP teardown writes the file
    events = load_trace(path)

    for e in events:
        assert {"name", "ph", "pid"} <= e.keys()
        if e["ph"] == "X":
            assert e["dur"] >= 0 and "ts" in e and "tid" in e
    meta = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert meta and meta[0]["args"]["name"] == "onnxruntime-mlx-ep"

    subgraphs = _by_name(events, "mlx.subgraph")
    assert len(subgraphs) == 3 and all(e["cat"] == "ep" and e["ph"] == "X" for e in subgraphs)
    assert [e["args"]["cache"] for e in subgraphs] == ["MISS", "HIT", "MISS"]
    assert [e["args"]["shape_key"] for e in subgraphs] == ["float32[2,8]", "float32[2,8]",
                                                          "float32[3,8]"]
    assert all(e["args"]["nodes"] == 5 and e["args"]["path"] == "general" for e in subgraphs)

    phases = {e["name"] for e in events if e.get("cat") == "ep.phase"}
    assert {"mlx.translate", "mlx.compile", "mlx.eval", "mlx.copy"} <= phases
    assert len(_by_name(events, "mlx.compile")) == 2  # one per new shape
    assert len(_by_name(events, "mlx.eval")) == 3
    copies = _by_name(events, "mlx.copy")
    assert sorted(e["args"]["direction"] for e in copies) == ["in"] * 3 + ["out"] * 3

    ops = [e for e in events if e.get("cat") == "op"]
    # Per-node build spans exist for each trace (two compiles x five nodes).
    assert len(ops) == 10
    mul = [e for e in ops if e["args"]["node"] == "mul"][0]
    assert mul["name"] == "Mul"
    assert mul["args"]["inputs"] == "float32[2,8], float32[8]"
    assert mul["args"]["outputs"] == "float32[2,8]"
    assert mul["args"]["elements"] == 16 and mul["args"]["bytes"] == 64

    (cap,) = _by_name(events, "mlx.getcapability")
    assert cap["cat"] == "ep.claim" and cap["ph"] == "i"
    assert cap["args"]["claimed"] == 5 and cap["args"]["total"] == 5
    assert cap["args"]["unclaimed"] == 0

    (summary,) = _by_name(events, "mlx.session_summary")
    assert "MLX EP session summary" in summary["args"]["summary"]


def test_trace_records_refusals_in_the_getcapability_instant(tmp_path, rng):
    from tests.plugin.test_plugin import _chain_model

    path = str(tmp_path / "t.json")
    run = EpRun(_chain_model(["Exp", "RandomUniformLike", "Tanh"]), provider_options={"trace": path})
    run.run({"x": rng.standard_normal((2, 3)).astype(np.float32)})
    run.close()
    del run
    gc.collect()
    (cap,) = _by_name(load_trace(path), "mlx.getcapability")
    assert cap["args"]["claimed"] == 2 and cap["args"]["total"] == 3
    fallback = cap["args"]["fallback_RandomUniformLike"]
    assert fallback.startswith("count=1; reason=no MLX implementation of RandomUniformLike")
    assert "nodes=randomuniformlike1" in fallback


def test_eager_runs_are_marked(tmp_path, rng):
    path = str(tmp_path / "t.json")
    run = EpRun(dynamic_chain_model(), provider_options={"trace": path, "no_compile": 1})
    run.run({"x": rng.standard_normal((2, 8)).astype(np.float32)})
    run.close()
    del run
    gc.collect()
    events = load_trace(path)
    (sub,) = _by_name(events, "mlx.subgraph")
    assert sub["args"]["cache"] == "EAGER" and sub["args"]["path"] == "eager"
    assert not _by_name(events, "mlx.compile")
    assert len([e for e in events if e.get("cat") == "op"]) == 5  # eager: built every run


def test_env_trace_is_cumulative_across_sessions(tmp_path):
    path = str(tmp_path / "env_trace.json")
    out = run_python("""
        import gc, numpy as np, ortmlx
        from ortmlx.testing import EpRun
        from tests.engine.util import dynamic_chain_model
        ortmlx.register_execution_provider_library()
        a = EpRun(dynamic_chain_model())
        b = EpRun(dynamic_chain_model(weight_seed=1))
        a.run({"x": np.full((2, 8), 0.3, np.float32)})
        b.run({"x": np.full((4, 8), 0.7, np.float32)})
        a.close(); del a; gc.collect()
        b.close(); del b; gc.collect()
        print("done")
    """, {"ONNXRUNTIME_EP_MLX_TRACE": path})
    assert "done" in out.stdout
    assert "MLX EP session summary" in out.stderr  # the trace implies the summary (reference)
    events = load_trace(path)
    sessions = {e["args"]["session"] for e in _by_name(events, "mlx.subgraph")}
    assert len(sessions) == 2
    assert len(_by_name(events, "mlx.getcapability")) == 2
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]


def test_no_trace_file_when_off(tmp_path, rng):
    run = EpRun(dynamic_chain_model())
    run.run({"x": rng.standard_normal((2, 8)).astype(np.float32)})
    run.close()
    assert os.listdir(tmp_path) == []


def test_fast_path_markers(tmp_path, rng):
    """op.fast instants carry the kernel label (needs a claimed op that records a fast path)."""
    from ortmlx import contracts

    model = contracts.attention_vjp_model(batch=1, sq=4, sk=4, hq=2, hk=2, d=32)
    path = str(tmp_path / "t.json")
    run = EpRun(model, provider_options={"trace": path})
    feeds = contracts.attention_vjp_feeds(model, rng)
    run.run(feeds)
    run.run(feeds)
    executed = run.report().executed_nodes()
    run.close()
    del run
    gc.collect()
    if "attention_vjp" not in executed:
        pytest.skip("AttentionVJP is not claimed by this build (no op records fast paths yet)")
    fast = [e for e in load_trace(path) if e.get("cat") == "op.fast"]
    assert len(fast) == 2  # replayed on the cache hit too
    assert all(e["args"]["kernel"] and e["args"]["node"] == "attention_vjp" for e in fast)


def test_unwritable_trace_path_warns(tmp_path):
    """A trace that cannot be written is said on stderr, at session creation and at session end
    (a report path that cannot be written warns too); the session itself runs normally."""
    path = str(tmp_path / "no_such_folder" / "trace.json")
    out = run_python("""
        import gc, numpy as np, ortmlx
        from ortmlx.testing import EpRun
        from tests.engine.util import dynamic_chain_model
        ortmlx.register_execution_provider_library()
        run = EpRun(dynamic_chain_model(), provider_options={"trace": %r}, strict=True)
        run.run({"x": np.full((2, 8), 0.3, np.float32)})
        run.close(); del run; gc.collect()
        print("done")
    """ % path)
    assert "done" in out.stdout
    assert f"the trace path '{path}' is not writable" in out.stderr, out.stderr
    assert f"cannot write trace to {path}" in out.stderr, out.stderr
    assert not os.path.exists(path)
