"""Prints the fuzz counts at the end of the run (pytest -q hides prints from tests)."""

from .fuzzlib import STATS


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not STATS.counts:
        return
    terminalreporter.write_line(STATS.line())
    for line in STATS.details():
        terminalreporter.write_line(line)
