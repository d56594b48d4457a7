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
    ("crash", ":DepthToSpace", "", "the EP process dies (e.g. o4_66)", "h-ints"),
    ("ep_error", ":ConstantOfShape", "", "the EP raises where ORT CPU runs (e.g. o35_199)", "h-ints"),
    ("ep_error", ":Pad", "", "the EP raises where ORT CPU runs (e.g. o19_59)", "h-ints"),
    ("ep_error", ":Resize", "", "the EP raises where ORT CPU runs (e.g. o28_31)", "h-ints"),
    # ORT's CPU Attention (opset 23-24) requires batch, q and kv lengths > 0; ops/attention.cpp
    # should raise on an empty one (a shape check in the translator).
    ("lenient", ":Attention", r"^Attention \w+ \[\(0, ", "batch 0: the EP returns an empty output "
     "where ORT CPU requires batch, q and kv lengths > 0 (e.g. o29_81)", "h-harden (attention.cpp)"),
    ("lenient", ":DequantizeLinear", "", "the EP returns values where ORT CPU raises (e.g. o42_113)", "h-ints"),
    ("lenient", ":GroupNormalization", "", "the EP returns values where ORT CPU raises (e.g. o24_41)", "h-ints"),
    ("lenient", ":Range", "", "the EP returns values where ORT CPU raises (e.g. o4_171)", "h-ints"),
    ("lenient", ":Resize", "", "the EP returns values where ORT CPU raises (e.g. o2_165)", "h-ints"),
    ("lenient", ":Split", "", "the EP returns values where ORT CPU raises (e.g. o35_149)", "h-ints"),
    ("mismatch", ":ArgMax", "", "values or shapes differ from ORT CPU (e.g. o50_28)", "h-ints"),
    ("mismatch", ":ArgMin", "", "values or shapes differ from ORT CPU (e.g. o1_142)", "h-ints"),
    # ORT ignores a NaN min or max (comparisons with NaN are false) and takes an absent one as
    # the type's lowest/highest finite value (so -Inf clips to -65504 in float16); the EP's
    # maximum/minimum propagate NaN and leave Inf. ops/elementwise.cpp: where(x < lo, lo, x),
    # then where(y > hi, hi, y), an absent bound being numeric_limits lowest()/max().
    ("mismatch", ":Clip", r"NaN bound|Inf, absent bound", "a NaN bound gives NaN on the EP, "
     "an absent one leaves Inf (e.g. o0_77)", "h-harden (elementwise.cpp)"),
    # ORT's Eigen min/max reductions keep a NaN only where it comes first in the slice (its
    # accumulator starts there and NaN never wins a comparison), so the result depends on the
    # NaN's position; the EP propagates every NaN. One NaN rule for ReduceMin/Max and
    # ArgMin/ArgMax is pending (ops/reduce.cpp, ops/arg_reduce.cpp).
    ("mismatch", ":Reduce(Max|Min)", r"NaN in X", "a NaN not first in its slice: ORT CPU "
     "ignores it, the EP propagates it (e.g. o52_89)", "NaN rule (with ArgMin/ArgMax)"),
    ("mismatch", ":Pad", "", "values or shapes differ from ORT CPU (e.g. o35_163)", "h-ints"),
]

_COMPILED = [(s, re.compile(o), re.compile(d), why, fix) for s, o, d, why, fix in KNOWN]


def known_class(rec: dict) -> str | None:
    """The reason a failure record is of a known class, or None."""
    text = f"{rec['label']} {rec['detail']}"
    for status, op, pattern, why, fix in _COMPILED:
        if rec["status"] == status and op.fullmatch(rec["op"]) and pattern.search(text):
            return f"known: {why}; fix expected from {fix}"
    return None
