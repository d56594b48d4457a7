"""Prints one line per corpus model at the end of the run (pytest -q hides prints from tests)."""

from .test_corpus import RESULTS


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not RESULTS:
        return
    for name in sorted(RESULTS):
        terminalreporter.write_line(RESULTS[name])
