"""Prints the ONNX backend gate's totals at the end of the run (pytest -q hides test output)."""

from .test_onnx_backend import COUNTS, REGISTERED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if len(COUNTS) <= 1:
        return  # the gate did not run in this process (deselected, or xdist workers)
    c = COUNTS
    terminalreporter.write_line(
        f"onnx backend gate: {c['total']} cases of {len(REGISTERED)} registered op types; "
        f"{c.get('claimed', 0)} claimed by the EP, {c.get('passed', 0)} passed; "
        f"{c.get('refused', 0)} refused by the EP (run on ORT CPU), "
        f"{c.get('ort_cannot_load', 0) + c.get('ort_cannot_run', 0)} ORT itself cannot load or run")
