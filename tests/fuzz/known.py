"""Failure classes known and owned elsewhere: a failure matching one is counted as "excluded"
(printed, not failing the test). One entry per class: (status, op key regex, regex over the
case's label and detail, why, the change expected to fix it). Remove an entry when its fix lands.
"""

from __future__ import annotations

import re

# Found on main by the generators of every registry entry (seed 20261202); the example case
# reproduces with ORTMLX_FUZZ_CASE=<id>. Broad (whole op and status) until triaged.
KNOWN: list[tuple[str, str, str, str, str]] = [
    # Documented leniency (docs/RELIABILITY.md), not a bug: ONNX defines the case, ORT CPU has no
    # kernel for it, and the EP's answer is exact.
    ("lenient", ":ScatterND|:ScatterElements", r"float16 .*'reduction': '(max|min)'",
     "ORT CPU has no float16 max/min scatter reduction; the EP computes it exactly",
     "none (documented leniency)"),
    ("crash", ":DepthToSpace", "", "the EP process dies (e.g. o4_66)", "h-ints"),
    ("ep_error", ":AveragePool", "", "the EP raises where ORT CPU runs (e.g. o27_131)", "untriaged"),
    ("ep_error", ":ConstantOfShape", "", "the EP raises where ORT CPU runs (e.g. o35_199)", "h-ints"),
    ("ep_error", ":LogSoftmax", "", "the EP raises where ORT CPU runs (e.g. o11_111)", "untriaged"),
    ("ep_error", ":LpPool", "", "the EP raises where ORT CPU runs (e.g. o27_161)", "untriaged"),
    ("ep_error", ":MaxPool", "", "the EP raises where ORT CPU runs (e.g. o22_144)", "untriaged"),
    ("ep_error", ":Pad", "", "the EP raises where ORT CPU runs (e.g. o19_59)", "h-ints"),
    ("ep_error", ":Resize", "", "the EP raises where ORT CPU runs (e.g. o28_31)", "h-ints"),
    ("lenient", ":Attention", "", "the EP returns values where ORT CPU raises (e.g. o29_81)", "untriaged"),
    ("lenient", ":DequantizeLinear", "", "the EP returns values where ORT CPU raises (e.g. o42_113)", "h-ints"),
    ("lenient", ":GlobalAveragePool", "", "the EP returns values where ORT CPU raises (e.g. o3_157)", "untriaged"),
    ("lenient", ":GlobalLpPool", "", "the EP returns values where ORT CPU raises (e.g. o1_163)", "untriaged"),
    ("lenient", ":GlobalMaxPool", "", "the EP returns values where ORT CPU raises (e.g. o8_22)", "untriaged"),
    ("lenient", ":GroupNormalization", "", "the EP returns values where ORT CPU raises (e.g. o24_41)", "h-ints"),
    ("lenient", ":RMSNormalization", "", "the EP returns values where ORT CPU raises (e.g. o41_87)", "untriaged"),
    ("lenient", ":Range", "", "the EP returns values where ORT CPU raises (e.g. o4_171)", "h-ints"),
    ("lenient", ":Resize", "", "the EP returns values where ORT CPU raises (e.g. o2_165)", "h-ints"),
    ("lenient", ":ReverseSequence", "", "the EP returns values where ORT CPU raises (e.g. o3_93)", "untriaged"),
    ("lenient", ":Split", "", "the EP returns values where ORT CPU raises (e.g. o35_149)", "h-ints"),
    ("lenient", "com.microsoft:GroupQueryAttention", "", "the EP returns values where ORT CPU raises (e.g. o0_53)", "h-harden (seqlens) / triage: generator past-KV form"),
    ("mismatch", ":ArgMax", "", "values or shapes differ from ORT CPU (e.g. o50_28)", "h-ints"),
    ("mismatch", ":ArgMin", "", "values or shapes differ from ORT CPU (e.g. o1_142)", "h-ints"),
    ("mismatch", ":AveragePool", "", "values or shapes differ from ORT CPU (e.g. o56_48)", "untriaged"),
    ("mismatch", ":Clip", "", "values or shapes differ from ORT CPU (e.g. o0_77)", "untriaged"),
    ("mismatch", ":ConvTranspose", "", "values or shapes differ from ORT CPU (e.g. o23_18)", "untriaged"),
    ("mismatch", ":LRN", "", "values or shapes differ from ORT CPU (e.g. o11_30)", "untriaged"),
    ("mismatch", ":LogSoftmax", "", "values or shapes differ from ORT CPU (e.g. o6_179)", "untriaged"),
    ("mismatch", ":MeanVarianceNormalization", "", "values or shapes differ from ORT CPU (e.g. o25_91)", "untriaged"),
    ("mismatch", ":Pad", "", "values or shapes differ from ORT CPU (e.g. o35_163)", "h-ints"),
    ("mismatch", ":ReduceL1", "", "values or shapes differ from ORT CPU (e.g. o48_145)", "untriaged"),
    ("mismatch", ":ReduceL2", "", "values or shapes differ from ORT CPU (e.g. o14_72)", "untriaged"),
    ("mismatch", ":ReduceMax", "", "values or shapes differ from ORT CPU (e.g. o0_70)", "untriaged"),
    ("mismatch", ":ReduceMin", "", "values or shapes differ from ORT CPU (e.g. o2_13)", "untriaged"),
    ("mismatch", ":ReduceSumSquare", "", "values or shapes differ from ORT CPU (e.g. o13_87)", "untriaged"),
    ("mismatch", ":Slice", "", "values or shapes differ from ORT CPU (e.g. o10_59)", "untriaged"),
    ("mismatch", "com.microsoft:GroupQueryAttention", "", "values or shapes differ from ORT CPU (e.g. o1_124)", "h-harden (seqlens) / triage: generator past-KV form"),
]

_COMPILED = [(s, re.compile(o), re.compile(d), why, fix) for s, o, d, why, fix in KNOWN]


def known_class(rec: dict) -> str | None:
    """The reason a failure record is of a known class, or None."""
    text = f"{rec['label']} {rec['detail']}"
    for status, op, pattern, why, fix in _COMPILED:
        if rec["status"] == status and op.fullmatch(rec["op"]) and pattern.search(text):
            return f"known: {why}; fix expected from {fix}"
    return None
