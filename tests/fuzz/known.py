"""Failure classes known and owned elsewhere: a failure matching one is counted as "excluded"
(printed, not failing the test). One entry per class: (status, op key regex, regex over the
case's label and detail, why, the change expected to fix it). Remove an entry when its fix lands.
"""

from __future__ import annotations

import re

# Found on main by the generators of every registry entry (seed 20261202); the example case
# reproduces with ORTMLX_FUZZ_CASE=<id>. Broad (whole op and status) until triaged; a triaged
# entry names its sub-case (a regex over the label, which the generator marks) and the fix.
KNOWN: list[tuple[str, str, str, str, str]] = [
    # Documented leniency (docs/RELIABILITY.md), not a bug: ONNX defines the case, ORT CPU has no
    # kernel for it, and the EP's answer is exact.
    ("lenient", ":ScatterND|:ScatterElements", r"float16 .*'reduction': '(max|min)'",
     "ORT CPU has no float16 max/min scatter reduction; the EP computes it exactly",
     "none (documented leniency)"),
    # Documented leniency (docs/RELIABILITY.md): ORT CPU 1.30 raises "left operand cannot
    # broadcast" for a valid MatMul of a left operand with an empty leading dim by a 1-D right
    # operand ((0, 2) @ (2,)); the EP returns the empty product ONNX defines.
    ("lenient", ":MatMul", r"\((\d+, )*0, (\d+, )*\d+\) @ \(\d+,\) .*cannot broadcast",
     "ORT CPU raises for an empty leading dim with a 1-D right operand (e.g. o29_165); the EP "
     "returns the empty result", "none (documented leniency)"),
    # Documented leniency (docs/RELIABILITY.md): a batch dim of 1 against one of 0 broadcasts to
    # 0 under ONNX's (numpy's) rule; ORT CPU 1.30 raises "cannot broadcast" for it.
    ("lenient", ":MatMul", r"\b0\b.*cannot broadcast on dim",
     "ORT CPU raises when a batch dim of 1 meets one of 0 (e.g. o20_75, o60_6); the EP returns "
     "the empty product numpy's broadcasting gives", "none (documented leniency)"),
    # Documented (docs/RELIABILITY.md): INT_MIN Mod -1 is 0 on the EP (ORT CPU's fmod=0 kernel
    # dies of SIGFPE, so the fuzz suite does not run ORT there; ORT agrees for fmod=1).
    ("lenient", ":Mod", r"hostile: INT_MIN / -1",
     "INT_MIN Mod -1 returns 0 (e.g. o29_142), where ORT CPU's kernel traps",
     "none (documented leniency)"),
    # Documented (docs/RELIABILITY.md): INT_MIN Div -1 is the wrapped INT_MIN on the EP, where
    # ORT CPU's kernel traps (the fuzz suite does not run ORT there).
    ("lenient", ":Div", r"hostile: INT_MIN / -1",
     "INT_MIN Div -1 returns INT_MIN, where ORT CPU's kernel traps", "none (documented leniency)"),
    # Documented limit (docs/RELIABILITY.md): MLX's dims are int32, so an output with a dim of
    # 2^31 or more cannot be made; the EP raises a clean error naming the node where ORT CPU,
    # given the memory (the GPU suite's workers have no address-space cap), returns the tensor.
    ("ep_error", ".*", r"exceeds MLX's", "an output dim beyond MLX's int32 dims (e.g. o4_171, "
     "Range over 2^32 values)", "none (documented limit)"),
    # ORT's Eigen min/max reductions keep a NaN only where it comes first in the slice (its
    # accumulator starts there and NaN never wins a comparison), so the result depends on the
    # NaN's position; the EP propagates every NaN. One NaN rule for ReduceMin/Max and
    # ArgMin/ArgMax is pending (ops/reduce.cpp, ops/arg_reduce.cpp).
    ("mismatch", ":Reduce(Max|Min)", r"NaN in X", "a NaN not first in its slice: ORT CPU "
     "ignores it, the EP propagates it (e.g. o52_89)", "NaN rule (with ArgMin/ArgMax)"),
]

_COMPILED = [(s, re.compile(o), re.compile(d), why, fix) for s, o, d, why, fix in KNOWN]


def known_class(rec: dict) -> str | None:
    """The reason a failure record is of a known class, or None."""
    text = f"{rec['label']} {rec['detail']}"
    for status, op, pattern, why, fix in _COMPILED:
        if rec["status"] == status and op.fullmatch(rec["op"]) and pattern.search(text):
            return f"known: {why}; fix expected from {fix}"
    return None
