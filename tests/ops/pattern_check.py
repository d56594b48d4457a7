"""Running a pattern-pass model (tests/ops/test_patterns*.py): on the EP with ORT's own graph
optimizations off (so ORT does not rewrite the chains first), asserting every node ran on the EP,
compared with ORT CPU; returns the EP's report."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from ortmlx.testing import EpRun, assert_ran_on_ep, run_cpu

OFF = ort.GraphOptimizationLevel.ORT_DISABLE_ALL


def run_pattern(model, feeds, options=None, rtol=1e-5, atol=1e-5):
    """Runs on the EP with ORT's optimizations off; compares with ORT CPU; returns the report."""
    run = EpRun(model, provider_options=dict(options or {}), strict=True, optimization_level=OFF)
    try:
        got = run.run(feeds)
        report = assert_ran_on_ep(run, [nd.name for nd in model.graph.node])
    finally:
        run.close()
    want = run_cpu(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return report
