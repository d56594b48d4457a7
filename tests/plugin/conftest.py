"""Prints the stress tests' memory figures after the run (pytest -q shows no test output)."""

STRESS_FIGURES: list[str] = []


def pytest_terminal_summary(terminalreporter):
    for line in STRESS_FIGURES:
        terminalreporter.write_line(f"stress: {line}")
