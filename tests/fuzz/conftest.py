"""Prints the fuzz counts at the end of the run (pytest -q hides prints from tests).
ORTMLX_FUZZ_REPORT=<path> also writes every case where the EP matched the exact/float64
reference and ORT CPU did not (docs/RELIABILITY.md quotes them)."""

import os

from .fuzzlib import STATS


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not STATS.counts:
        return
    terminalreporter.write_line(STATS.line())
    for line in STATS.details():
        terminalreporter.write_line(line)
    path = os.environ.get("ORTMLX_FUZZ_REPORT")
    if path:
        with open(path, "w") as f:
            f.write("\n".join(STATS.reference_wins) + "\n")
