"""Prints the ONNX backend gate's totals at the end of the run (pytest -q hides test output)."""

import json
import os

from .test_onnx_backend import COUNTS, REGISTERED, RESULTS


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if len(COUNTS) <= 1:
        return  # the gate did not run in this process (deselected, or xdist workers)
    path = os.environ.get("ORTMLX_GATE_RESULTS")  # per-case outcomes for gen_op_coverage.py
    if path:
        with open(path, "w") as f:
            json.dump(RESULTS, f)
    c = COUNTS
    terminalreporter.write_line(
        f"onnx backend gate: {c['total']} cases of {len(REGISTERED)} registered op types; "
        f"{c.get('claimed', 0)} claimed by the EP, {c.get('passed', 0)} passed; "
        f"{c.get('refused', 0)} refused by the EP (run on ORT CPU), "
        f"{c.get('ort_cannot_load', 0) + c.get('ort_cannot_run', 0)} ORT itself cannot load or run, "
        f"{c.get('excluded', 0)} excluded with a reason (test_onnx_backend.EXCLUDED)")
