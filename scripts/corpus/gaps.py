"""Prints KNOWN_GAPS for tests/corpus/test_corpus.py as the current library sees it.

    ORTMLX_LIBRARY=build/libortmlx.so .venv/bin/python scripts/corpus/gaps.py

Runs in the main .venv (no torch). For each corpus model below the node-share threshold: the op
types the EP refuses (cpu_claim=all, as the test suite runs). Paste the dict over KNOWN_GAPS when
ops land and models cross the threshold (the test fails until the entry is removed).
"""

from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "tests" / "corpus"))
os.environ["ONNXRUNTIME_EP_MLX_CPU_CLAIM"] = "all"

import corpus  # noqa: E402
import ortmlx  # noqa: E402
from ortmlx.testing import EpRun  # noqa: E402

THRESHOLD = 0.99


def main() -> int:
    ortmlx.register_execution_provider_library()
    lines = []
    for name in corpus.model_names():
        model = corpus.load_model(name)
        feeds = corpus.make_inputs(model, np.random.default_rng(zlib.crc32(name.encode())))
        run = EpRun(model)
        try:
            run.run(feeds)
            report = run.report()
        finally:
            run.close()
        on_ep, total = report.executed_count(), corpus.graph_nodes(report)
        refused = sorted(op for op in report.refused() if not op.startswith("MLXExecutionProvider."))
        print(f"# {name}: {on_ep}/{total} on the EP", file=sys.stderr)
        if on_ep < THRESHOLD * total:
            lines.append(f'    "{name}": "refused: {", ".join(refused)}",')
    print("KNOWN_GAPS: dict[str, str] = {\n" + "\n".join(lines) + "\n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
