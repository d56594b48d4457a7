"""Hostile-input cases run in a child interpreter, so that a crash of the EP (SIGFPE, SIGSEGV,
abort) fails the test instead of killing pytest.

`run_isolated` builds an EP session for the model in the child, runs the hostile feeds, then (when
given) good feeds, and reports what happened as a dict:

    {"refused": {op_type: reason}, "executed": [node names], "error": str | None,
     "outputs": [np.ndarray] | None, "good_ok": bool | None, "good_error": str | None}

The good run is compared with ORT's CPU EP in the child (`good_ok`): the session must still work
after the hostile run failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

_CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import onnx
    import ortmlx
    from ortmlx.testing import EpRun, run_cpu

    model_path, feeds_path, good_path, out_path, opts = sys.argv[1:6]
    ortmlx.register_execution_provider_library()
    model = onnx.load(model_path)
    feeds = dict(np.load(feeds_path)) if feeds_path != "-" else None
    result = {"error": None, "outputs": None, "good_ok": None, "good_error": None}
    try:
        run = EpRun(model, provider_options=json.loads(opts))
    except Exception as e:  # ORT itself rejected the model (as its CPU EP does)
        result.update(error=str(e), refused={}, executed=[])
        with open(out_path, "w") as f:
            json.dump(result, f)
        sys.exit(0)
    try:
        try:
            if feeds is not None:
                got = run.run(feeds)
                np.savez(out_path + ".npz", *got)
                result["outputs"] = len(got)
        except Exception as e:  # the error ORT reports for the failed run
            result["error"] = str(e)
        if good_path != "-":
            good = dict(np.load(good_path))
            try:
                got = run.run(good)
                want = run_cpu(model, good)
                result["good_ok"] = all(
                    g.shape == w.shape and g.dtype == w.dtype
                    and np.allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True)
                    for g, w in zip(got, want))
            except Exception as e:
                result["good_error"] = str(e)
        report = run.report()
        result["refused"] = {k: v.get("reason") for k, v in report.refused().items()}
        result["executed"] = sorted(report.executed_nodes())
    finally:
        run.close()
    with open(out_path, "w") as f:
        json.dump(result, f)
    """
)


def run_isolated(model, feeds: dict | None, good_feeds: dict | None = None,
                 provider_options=None, timeout: float = 300.0) -> dict:
    """Runs `model` on the EP in a child interpreter (see the module docstring). Fails the
    calling test when the child dies (a crash) instead of returning."""
    with tempfile.TemporaryDirectory(prefix="ortmlx-isolated-") as d:
        model_path = os.path.join(d, "model.onnx")
        with open(model_path, "wb") as f:
            f.write(model.SerializeToString())
        feeds_path = "-"  # no hostile run: the session is built (claims) and nothing else
        if feeds is not None:
            feeds_path = os.path.join(d, "feeds.npz")
            np.savez(feeds_path, **feeds)
        good_path = "-"
        if good_feeds is not None:
            good_path = os.path.join(d, "good.npz")
            np.savez(good_path, **good_feeds)
        out_path = os.path.join(d, "result.json")
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, model_path, feeds_path, good_path, out_path,
             json.dumps(provider_options or {})],
            capture_output=True, text=True, timeout=timeout,
            env={**os.environ, "ONNXRUNTIME_EP_MLX_CPU_CLAIM": "all"})
        assert proc.returncode == 0, (
            f"child interpreter died (exit {proc.returncode}): {proc.stderr[-2000:]}")
        with open(out_path) as f:
            result = json.load(f)
        if result["outputs"] is not None:
            with np.load(out_path + ".npz") as z:
                result["outputs"] = [z[f"arr_{i}"] for i in range(result["outputs"])]
        return result


def cpu_outcome(model, feeds: dict):
    """ORT CPU's answer: ("ok", outputs) or ("error", message)."""
    from ortmlx.testing import run_cpu

    try:
        return "ok", run_cpu(model, feeds)
    except Exception as e:
        return "error", str(e)


def check_hostile(model, feeds: dict, good_feeds: dict | None = None, *, op_type: str,
                  refused: str | None = None, error: str | None = None, cpu: bool = True,
                  node: str = "node") -> dict:
    """The hostile-input contract, checked in a child interpreter:
    - `refused`: the EP refuses the node at claim time with a reason containing it;
    - `error`: the node is claimed and the run fails with an error naming the node and
      containing it;
    - with `cpu`, ORT's CPU EP is the reference: where it raises, the session raises too; where
      it returns values, the session returns the same;
    - `good_feeds` then still run (and match ORT CPU) in the same session.
    A refused node runs on ORT's CPU EP, so with `refused` the hostile feeds are not run at all:
    that would compare ORT CPU with itself, and some hostile attributes make ORT CPU allocate
    beyond a test machine's memory (the kernel then kills the child)."""
    if refused is not None:
        feeds, cpu = None, False
    r = run_isolated(model, feeds, good_feeds)
    if refused is not None:
        reason = r["refused"].get(op_type) or ""
        assert reason and refused in reason, (refused, r["refused"], r["error"])
    if error is not None:
        assert node in r["executed"] or r["error"], r
        assert r["error"] and f"node '{node}' ({op_type})" in r["error"], r["error"]
        assert error in r["error"], r["error"]
    if cpu:
        status, want = cpu_outcome(model, feeds)
        if status == "error":
            assert r["error"], f"ORT CPU raises ({want[:300]}) but the EP returned values"
        else:
            assert r["error"] is None, r["error"]
            assert node in r["executed"], f"node '{node}' did not run on the EP: {r['refused']}"
            for g, w in zip(r["outputs"], want):
                assert g.dtype == w.dtype and g.shape == w.shape, (g.shape, w.shape)
                if np.issubdtype(w.dtype, np.floating):
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True)
                else:
                    np.testing.assert_array_equal(g, w)
    if good_feeds is not None:
        assert r["good_ok"], r["good_error"]
    return r


def loose_model(op_type, inputs, attrs=None, initializers=None, n_outputs=1, opset=21,
                domain=""):
    """A one-node model (node 'node') WITHOUT shape inference or checks, which would reject some
    hostile attributes before ORT's kernels see them. inputs: [(name, np dtype, shape)] graph
    inputs; initializers: {name: np.ndarray}, appended to the node's inputs in order."""
    import onnx
    from onnx import helper

    from opcheck import NP_TO_ONNX
    from ortmlx.testing import make_model

    initializers = initializers or {}
    vis = [helper.make_tensor_value_info(n, NP_TO_ONNX[np.dtype(t)], s) for n, t, s in inputs]
    names = [n for n, _, _ in inputs] + list(initializers)
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, name="node", domain=domain, **(attrs or {}))
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in initializers.items()]
    graph = helper.make_graph([node], "g", vis, [onnx.ValueInfoProto(name=o) for o in outs],
                              inits)
    extra = {domain: 1} if domain else None
    return make_model(graph, opset=opset, extra_opsets=extra, check=False)
