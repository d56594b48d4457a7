"""Prints the fuzz counts at the end of the run (pytest -q hides prints from tests) and stops
the worker processes. ORTMLX_FUZZ_REPORT=<path> also writes every case where the EP matched the
exact/float64 reference and ORT CPU did not (docs/RELIABILITY.md quotes them), then the failures
and the excluded (known) ones."""

import os

from .fuzzlib import STATS
from .pool import close_pool


def pytest_sessionfinish(session, exitstatus):
    close_pool()


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
            f.write("\n".join(["# failures"] + STATS.failures + ["# excluded"] + STATS.excluded
                               + ["# not counted"] + STATS.invalid)
                    + "\n")
