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
    # Documented leniency (docs/RELIABILITY.md): ORT CPU's LRN allocates a buffer padded by the
    # window size, so a size near 2^31 fails to allocate there (bfc_arena); the EP sums the
    # channels the window reaches (tests/ops/test_local_norm.py checks it against float64).
    ("lenient", ":LRN", r"hostile size=\d+\].*bfc_arena",
     "ORT CPU fails to allocate its window buffer for a huge size (e.g. seed 13 o47_187, "
     "size 2^31 - 1); the EP returns the windowed sum", "none (documented leniency)"),
    # The harness, not the EP: the EP refused the node and ORT's own kernel (named by the node,
    # not a fused MLX node) failed to allocate in the EP session, under the workers'
    # address-space cap while ORT CPU's output of the same size is still held for comparison
    # (seed 23, o46_47: Pad wrap of bool (2, 3) by a runtime pad of 2^31 to 4 GiB).
    ("ep_error", ".*", r"while running \w+ node\. Name:'[cog]\d+_\d+_n' Status Message: \S*"
     r"bfc_arena\.cc:\d+ .*Failed to allocate memory",
     "ORT's own kernel of a refused node fails to allocate under the workers' cap in the EP "
     "session (e.g. seed 23 o46_47, Pad to 4 GiB)", "none (harness memory cap)"),
    # Documented (docs/RELIABILITY.md): ORT CPU 1.30's int64 Max (and Min) compares the low 32
    # bits as signed where the high ones are equal: max(1, 2^31) = 1. CenterCropPad's function
    # body takes Max(x's shape, the target), so ORT CPU returns (1, 3) for a target [2^31, 3]
    # (wrong); in the EP session the EP runs that Max (2^31) and ORT's Pad kernel then fails to
    # allocate the 48 GiB the ONNX answer needs.
    ("ep_error", ":CenterCropPad", r"shape=\[[^\]]*\b2147483\d\d\d\b.*Failed to allocate memory",
     "ORT CPU's int64 Max gives max(1, 2^31) = 1 in the function body (e.g. seed 28 o18_90); "
     "the EP computes the true shape, whose Pad fails to allocate", "none (ORT bug)"),
    # The harness, not the EP: the memory guard's clean error (naming the node, the tensor and
    # the bound) under the workers' address-space cap while ORT CPU's output of the same size is
    # still held for comparison (seed 114, o32_25: Pad of an empty float32 (0,) by [2^31, -1]
    # to float32[2^31 - 1], 8 GiB, with 3.2 GiB left under the cap).
    ("ep_error", ".*", r"needs [\d.]+ GiB for one \w+\[[\d, ]+\] tensor; [\d.]+ GiB available "
     r"to MLX's \w+ backend, under the process's address-space limit",
     "the memory guard refuses a multi-GiB output under the workers' address-space cap while "
     "ORT CPU's copy is held (e.g. seed 114 o32_25)", "none (harness memory cap)"),
    # Documented limit (docs/RELIABILITY.md): MLX's dims are int32, so an output with a dim of
    # 2^31 or more cannot be made; the EP raises a clean error naming the node where ORT CPU,
    # given the memory (the GPU suite's workers have no address-space cap), returns the tensor.
    ("ep_error", ".*", r"exceeds MLX's", "an output dim beyond MLX's int32 dims (e.g. o4_171, "
     "Range over 2^32 values)", "none (documented limit)"),
    # Documented (docs/RELIABILITY.md): ORT CPU 1.30's Concat skips empty inputs when it checks
    # that the non-axis dims match, but still adds their axis size to the output and leaves that
    # share unwritten ((2, 3, 1, 1) with (2, 0, 1, 1) on axis 2 gives (2, 3, 2, 1)); ONNX makes
    # the inputs invalid, and the EP raises naming the node and the dim.
    ("ep_error", ":Concat", r"Concat input \d+ has dim \d+ on axis \d+ where input 0 has",
     "ORT CPU accepts an empty input whose non-axis dims differ and returns a tensor partly "
     "unwritten (e.g. seed 82 o58_18); the EP raises", "none (ORT's leniency)"),
    # Documented (docs/RELIABILITY.md): ORT CPU's reductions of an empty input take a separate
    # path that drops the axes outside [0, rank) instead of checking them (ReduceMin of (5, 0, 2)
    # over [1, 9] reduces axis 1 and returns values); ONNX makes such an axis invalid, and the EP
    # raises "axis out of range" naming the node, as ORT does for a non-empty input.
    ("ep_error", ":Reduce[A-Za-z0-9]+", r"empty X.*axis -?\d+ is out of range for rank",
     "ORT CPU ignores an out-of-range axis of a reduction over an empty input (e.g. seed 9 "
     "o9_115, ReduceMin over axes [-2, -3, 3, -2^31]); the EP raises", "none (ORT's leniency)"),
    # Documented (docs/RELIABILITY.md, "Matched by measurement"): ORT's MLAS range scan keeps a
    # running max/min per vector lane, and a NaN resets its lane (vector max/min return the
    # second operand for NaN), so the values before it in that lane are forgotten, or the NaN is
    # kept when it sits in the last block: the range depends on the NaN's position and ORT's
    # vector width. The EP's range skips NaN (ORT's answer wherever the NaN loses nothing).
    ("mismatch", ":DynamicQuantizeLinear", r"NaN in X",
     "a NaN resets a vector lane of ORT's range scan (e.g. seed 33 o46_74: the max 6.70 before "
     "it is lost, ORT's scale 0.05507, the EP's 0.05595)", "none (ORT's position-dependent scan)"),
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
