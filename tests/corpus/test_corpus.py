"""Real-architecture corpus: every model runs on MLXExecutionProvider, matches ORT CPU, and (the
must-show) at least 99% of its nodes run on the EP.

Models: tests/corpus/models/*.onnx (packed by scripts/corpus/export.py; see README.md).
Node share: nodes inside the EP's fused nodes that ran (EpReport.executed_count, which counts
unnamed nodes too) over the nodes of ORT's final graph (graph_nodes below: after ORT's level-1
optimisations and function inlining). The model's own node count is printed alongside; the two
differ where ORT folded constants (e.g. shape arithmetic) or inlined a function op (HardSwish).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from ortmlx.testing import EpRun, run_cpu

from .corpus import MODELS_DIR, graph_nodes, load_model, make_inputs, model_names, model_node_count

THRESHOLD = 0.99
RTOL = 1e-4

# Models below the threshold today: {model: the op types the EP refuses in it}. A listed model
# xfails (strict): once it crosses the threshold the test fails until its entry is removed. A
# refusal of an op type not listed here fails too (a regression).
KNOWN_GAPS: dict[str, str] = {}  # every corpus model runs whole on the EP (2026-12-03)

# name -> summary line (printed by conftest.pytest_terminal_summary)
RESULTS: dict[str, str] = {}


class CoverageGap(AssertionError):
    """Fewer than THRESHOLD of the model's nodes ran on the EP."""


def _gap_ops(reason: str) -> set[str]:
    return {op.strip() for op in reason.split(":", 1)[-1].split(",") if op.strip()}


def _params():
    out = []
    for name in model_names():
        marks = []
        if name in KNOWN_GAPS:
            marks.append(pytest.mark.xfail(reason=KNOWN_GAPS[name], strict=True,
                                           raises=CoverageGap))
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.mark.parametrize("name", _params())
def test_corpus_model(name):
    model = load_model(name)
    feeds = make_inputs(model, np.random.default_rng(zlib.crc32(name.encode())))
    want = run_cpu(model, feeds)
    run = EpRun(model)
    try:
        got = run.run(feeds)
        report = run.report()
    finally:
        run.close()

    on_ep, total = report.executed_count(), graph_nodes(report)
    # Older libraries listed the EP's own fused nodes of an earlier GetCapability pass as
    # refusals (op type "MLXExecutionProvider.<fused name>"): not model nodes.
    refused = {op: r for op, r in report.refused().items()
               if not op.startswith("MLXExecutionProvider.")}
    worst = 0.0
    for g, w, out in zip(got, want, model.graph.output):
        assert g.shape == w.shape and g.dtype == w.dtype, (out.name, g.shape, w.shape)
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        if np.issubdtype(w.dtype, np.floating) and scale > 0:
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))) / scale)
    RESULTS[name] = (
        f"corpus: {name} {on_ep}/{total} nodes on the EP ({model_node_count(model)} in the "
        f"model), max rel err {worst:.1e}"
        + ("; refused: " + ", ".join(f"{op} x{r['count']}" for op, r in sorted(refused.items()))
           if refused else ""))

    for g, w, out in zip(got, want, model.graph.output):
        # Regenerated weights must give a meaningful reference: finite, not constant.
        assert np.all(np.isfinite(w)) and np.std(w) > 0, (name, out.name)
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=RTOL * scale, err_msg=out.name)
    assert total > 0 and on_ep <= total, (on_ep, total)
    if name in KNOWN_GAPS:
        unlisted = set(refused) - _gap_ops(KNOWN_GAPS[name])
        assert not unlisted, (
            f"{name}: refused op types not in KNOWN_GAPS: "
            + "; ".join(f"{op} x{refused[op]['count']}: {refused[op]['reason']}"
                        for op in sorted(unlisted)))
    if on_ep < THRESHOLD * total:
        raise CoverageGap(
            f"{name}: {on_ep}/{total} nodes on the EP (< {THRESHOLD:.0%}); refused: "
            + "; ".join(f"{op} x{r['count']}: {r['reason']}" for op, r in sorted(refused.items())))


def test_known_gaps_name_corpus_models():
    assert set(KNOWN_GAPS) <= set(model_names()), set(KNOWN_GAPS) - set(model_names())


def test_corpus_stays_small():
    # Packed models keep only structure and small tensors (README.md): a few MB at most.
    size = sum(p.stat().st_size for p in MODELS_DIR.glob("*.onnx"))
    assert size < 4 << 20, f"tests/corpus/models is {size / 2**20:.1f} MiB"
