"""The fuzz harness: generated cases batched into few ONNX models, run on MLXExecutionProvider
and on ORT's CPU EP, each case judged from the EP's JSON report and the outputs.

A case is a set of nodes with their own graph inputs, initializers and outputs (names carry the
case's prefix), so hundreds of independent cases share one model, one session pair and one run.
Verdicts per case:

  refused     no node of the case ran on the EP, and each of its nodes is in the report's
              refusals with a non-empty reason (the report keeps one reason per op type, the
              first; with many nodes of a type in one model the others are counted, not quoted)
  matched     some node ran on the EP, the others were refused with a reason, and every output
              matches ORT CPU (or the case's float64/exact reference: always for the AttentionVJP
              contract, and as a tie-breaker where ORT CPU is known to differ from the math)
  failures    mismatch, claimed_not_run (in the report's claims but never executed),
              no_reason (a refusal without a reason), claim_oracle (the contract grammar and
              interface say claim/refuse and the EP did the opposite), ep_error (the EP session
              failed where ORT CPU did not)
  invalid     ORT CPU rejects the case (load or run): no reference, so it is not counted

A batch whose model ORT cannot load or run is split in halves until the culprits are single
cases, so one bad case costs a few extra sessions, not the batch.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper

import ortmlx
from ortmlx.testing import IR_VERSION

DEFAULT_SEED = 20261202
DEFAULT_CASES = 20000

# "lenient": ORT CPU raises on the case, the EP returned values. "crash": the worker process died
# (signal) or hung while the EP ran the case (named by bisecting its batch in fresh processes).
FAILURES = ("mismatch", "lenient", "claimed_not_run", "no_reason", "claim_oracle", "ep_error",
            "crash")
# Not counted: ORT CPU rejects the case (load or run), or crashes on it ("ort_crash").
NOT_COUNTED = ("invalid", "ort_crash")

# Called with "cpu" / "ep" before each session run (the worker tells the parent which engine was
# running when a process dies).
PHASE_HOOK: list = [None]


def _phase(what: str, cases=()):
    if PHASE_HOOK[0] is not None:
        PHASE_HOOK[0](what, [c.cid for c in cases])


def seed() -> int:
    return int(os.environ.get("ORTMLX_FUZZ_SEED", DEFAULT_SEED))


def total_cases() -> int:
    return int(os.environ.get("ORTMLX_FUZZ_CASES", DEFAULT_CASES))


# --------------------------------------------------------------------------------------------
# dtypes
# --------------------------------------------------------------------------------------------

NP_OF = {
    TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16, TensorProto.DOUBLE: np.float64,
    TensorProto.INT8: np.int8, TensorProto.INT16: np.int16, TensorProto.INT32: np.int32,
    TensorProto.INT64: np.int64, TensorProto.UINT8: np.uint8, TensorProto.UINT16: np.uint16,
    TensorProto.UINT32: np.uint32, TensorProto.UINT64: np.uint64, TensorProto.BOOL: np.bool_,
}
ONNX_OF = {np.dtype(v): k for k, v in NP_OF.items()}
ORT_TYPE = {
    TensorProto.FLOAT: "tensor(float)", TensorProto.FLOAT16: "tensor(float16)",
    TensorProto.DOUBLE: "tensor(double)", TensorProto.INT8: "tensor(int8)",
    TensorProto.INT16: "tensor(int16)", TensorProto.INT32: "tensor(int32)",
    TensorProto.INT64: "tensor(int64)", TensorProto.UINT8: "tensor(uint8)",
    TensorProto.UINT16: "tensor(uint16)", TensorProto.UINT32: "tensor(uint32)",
    TensorProto.UINT64: "tensor(uint64)", TensorProto.BOOL: "tensor(bool)",
}
FLOATS = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE)
INTS = (TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
        TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64)
ALL_TYPES = FLOATS + INTS + (TensorProto.BOOL,)

# Relative tolerance unit by output dtype (a few units of rounding of the type).
TOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float16): 4e-3, np.dtype(np.float64): 1e-9}
# Below the smallest normal number, flushing to zero is not a mismatch.
TINY = {np.dtype(np.float32): 2e-38, np.dtype(np.float16): 1.2e-4, np.dtype(np.float64): 1e-300}


class CpuKernels:
    """ORT CPU's kernel table (type constraints per op and opset range), so generators only emit
    cases ORT CPU can run (a case nothing can run has no reference)."""

    def __init__(self):
        import onnxruntime.capi._pybind_state as C

        self._defs: dict = {}
        for k in C.get_all_opkernel_def():
            if k.provider == "CPUExecutionProvider" and k.domain in ("", "ai.onnx"):
                self._defs.setdefault(k.op_name, []).append(
                    (k.version_range, {n: set(t) for n, t in k.type_constraints.items()}))
        self._schemas: dict = {}

    def schema(self, op: str, opset: int):
        key = (op, opset)
        if key not in self._schemas:
            self._schemas[key] = onnx.defs.get_schema(op, opset, "")
        return self._schemas[key]

    def supports(self, op: str, opset: int, in_types, out_types=()) -> bool:
        """Whether ORT CPU has a kernel for `op` at model opset `opset` with these element types
        (None entries are absent optional inputs)."""
        schema = self.schema(op, opset)
        version = schema.since_version
        binding: dict = {}
        for formals, types in ((schema.inputs, in_types), (schema.outputs, out_types)):
            for i, t in enumerate(types):
                if t is None:
                    continue
                formal = formals[min(i, len(formals) - 1)]  # variadic: the last formal repeats
                name = formal.type_str
                if name.startswith("tensor("):
                    if ORT_TYPE[t] != name:
                        return False
                    continue
                if binding.setdefault(name, ORT_TYPE[t]) != ORT_TYPE[t]:
                    return False
        if op not in self._defs:
            # A function op (ORT CPU inlines its body): the schema's type constraints decide.
            allowed = {c.type_param_str: set(c.allowed_type_strs)
                       for c in schema.type_constraints}
            return all(t in allowed.get(name, {t}) for name, t in binding.items())
        for (lo, hi), constraints in self._defs.get(op, []):
            if not lo <= version <= hi:
                continue
            if all(name not in constraints or t in constraints[name]
                   for name, t in binding.items()):
                return True
        return False


_KERNELS: CpuKernels | None = None


def cpu_kernels() -> CpuKernels:
    global _KERNELS
    if _KERNELS is None:
        _KERNELS = CpuKernels()
    return _KERNELS


# --------------------------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------------------------

@dataclass
class Case:
    cid: str                 # unique name prefix of everything the case adds to a model
    family: str              # "contract" | "op" | "graph"
    label: str               # what it is, for failure messages
    nodes: list
    feeds: dict              # graph input name -> array
    outputs: list            # output names, in order
    input_infos: list = field(default_factory=list)  # ValueInfoProto; default: from the feeds
    initializers: list = field(default_factory=list)
    functions: list = field(default_factory=list)
    # Expected outputs (float64 / exact): the oracle when `reference_primary`, else consulted only
    # when the EP and ORT CPU disagree (the EP then must match it and ORT CPU must not).
    reference: Callable[[], list] | None = None
    reference_primary: bool = False
    expect_claim: bool | None = None  # contract cases: what the grammar and interface say
    # Absolute error scale per output (sums, products); None: relative only.
    mag: list | None = None
    tol_scale: float = 1.0   # multiplies the dtype's tolerance (chains of ops)
    tol: float | None = None  # overrides the dtype's tolerance (graphs with float16 inside)
    accounted: list | None = None  # node names whose claim is judged (default: all)
    # What the outputs must be when the EP refuses the case (else: ORT CPU's outputs); with
    # needs_cpu False as well, the batch runs no ORT CPU session at all.
    refused_reference: Callable[[], list] | None = None
    needs_cpu: bool = True
    # ORT CPU cannot be run on the case (undefined behaviour in its kernel, e.g. integer division
    # by zero): the EP must refuse the node or raise; it runs alone, ORT CPU never runs it.
    expect_raise: bool = False
    solo: bool = False       # a hostile value: ORT CPU likely raises, the EP may crash; run alone
    op: str = ""             # registry key "domain:op_type" of the node under test

    def op_key(self) -> str:
        if self.op:
            return self.op
        if self.family != "op":
            return {"contract": "pkg.onnax:AttentionVJP*"}.get(self.family, self.family)
        n = self.nodes[0]
        return f"{n.domain if n.domain != 'ai.onnx' else ''}:{n.op_type}"

    def node_names(self):
        return self.accounted if self.accounted is not None else [n.name for n in self.nodes]


@dataclass
class Verdict:
    status: str
    detail: str = ""
    detail_full: str = field(default="", repr=False, compare=False)  # the whole error message


def record(case: Case, v: Verdict, opset: int) -> dict:
    """What a worker reports per case (plain data: it crosses a process boundary)."""
    return {"cid": case.cid, "family": case.family, "op": case.op_key(), "opset": opset,
            "label": case.label[:300], "status": v.status, "detail": v.detail[:1500]}


@dataclass
class Stats:
    """Counts over the whole session (printed by conftest.py's terminal summary)."""

    counts: Counter = field(default_factory=Counter)
    by_family: dict = field(default_factory=dict)
    by_op: dict = field(default_factory=dict)   # op key -> Counter of statuses
    op_opsets: dict = field(default_factory=dict)  # op key -> opsets with a counted case
    failures: list = field(default_factory=list)
    excluded: list = field(default_factory=list)  # failures of a known class (known.py)
    reference_wins: list = field(default_factory=list)  # ORT CPU differs, EP matches the math
    invalid: list = field(default_factory=list)
    seconds: float = 0.0
    wall: float = 0.0
    sessions: int = 0
    processes: int = 0
    seed: int = 0
    registry: list = field(default_factory=list)  # registry entries (dicts), for coverage

    def add(self, case: Case, v: Verdict, opset: int = 0):
        self.add_record(record(case, v, opset))

    def add_record(self, rec: dict, known: str | None = None):
        status = rec["status"]
        if known is not None:
            self.excluded.append(f"[{status}] {rec['cid']} {rec['label']} ({known})")
            status = "excluded"
        self.counts[status] += 1
        self.by_family.setdefault(rec["family"], Counter())[status] += 1
        self.by_op.setdefault(rec["op"], Counter())[status] += 1
        if status not in NOT_COUNTED:
            self.op_opsets.setdefault(rec["op"], set()).add(rec["opset"])
        line = f"{rec['cid']} {rec['label']}: {rec['detail']}"
        if status in FAILURES:
            self.failures.append(f"[{status}] {line}")
        elif status in NOT_COUNTED:
            self.invalid.append(line)
        if status == "matched" and rec["detail"]:
            self.reference_wins.append(line)

    def covered(self) -> tuple[int, int, list]:
        """Registry entries with a counted case at an opset in their range (the AttentionVJP
        contract: any counted contract case): (covered, total, the others)."""
        missing = []
        for e in self.registry:
            key = f"{e['domain']}:{e['op_type']}"
            if e.get("by_prefix"):
                key = f"{e['domain']}:{e['op_type']}*"
            ok = any(e["min_opset"] <= o <= e["max_opset"] or e["domain"] != ""
                         for o in self.op_opsets.get(key, ()))
            if not ok:
                hi = "" if e["max_opset"] >= 1 << 30 else e["max_opset"]
                missing.append(key + (f" ({e['min_opset']}-{hi})" if e["domain"] == "" else ""))
        return len(self.registry) - len(missing), len(self.registry), missing

    def line(self) -> str:
        c = self.counts
        total = sum(n for s, n in c.items() if s not in NOT_COUNTED)
        bad = sum(c[s] for s in FAILURES) - c["crash"]
        return (f"fuzz: {total} cases, {c['refused']} refused with a reason, {c['matched']} ran on "
                f"the EP and matched, {c['raised']} raised where ORT CPU raises, {bad} mismatches, "
                f"{c['crash']} crashes, {c['excluded']} failures of known classes (excluded), "
                f"{c['invalid'] + c['ort_crash']} ORT-rejected (not counted)")

    def details(self) -> list[str]:
        c = self.counts
        out = [f"fuzz: seed {self.seed}, {self.sessions} session pairs in {self.processes} "
               f"worker processes, {self.wall:.0f} s wall; {c['mismatch']} mismatches, "
               f"{c['lenient']} lenient (values where ORT CPU raises), {c['claimed_not_run']} "
               f"claimed but not run, {c['no_reason']} refused without a reason, "
               f"{c['claim_oracle']} contract claims against the grammar, {c['ep_error']} EP "
               f"errors; not counted: {c['invalid']} cases ORT CPU rejects, {c['ort_crash']} "
               f"where ORT CPU itself crashes"]
        for fam, fc in sorted(self.by_family.items()):
            tot = sum(n for s, n in fc.items() if s not in NOT_COUNTED)
            out.append(f"fuzz:   {fam}: {tot} cases, {fc['refused']} refused, {fc['matched']} "
                       f"matched, {fc['raised']} raised, {sum(fc[s] for s in FAILURES)} failed, "
                       f"{fc['excluded']} excluded")
        if self.by_op:
            parts = []
            for op, oc in sorted(self.by_op.items()):
                tot = sum(n for s, n in oc.items() if s not in NOT_COUNTED)
                bad = sum(oc[s] for s in FAILURES)
                parts.append(f"{op.lstrip(':')} {tot}" + (f" ({bad} failed)" if bad else ""))
            for i in range(0, len(parts), 10):
                out.append("fuzz:   per generator: " + ", ".join(parts[i:i + 10]))
        if self.registry:
            n, tot, missing = self.covered()
            out.append(f"fuzz: registry entries covered: {n} / {tot}"
                       + (f"; without a counted case: {', '.join(missing)}" if missing else ""))
        if self.reference_wins:
            out.append(f"fuzz:   {len(self.reference_wins)} matched the exact/float64 reference "
                       f"where ORT CPU differs, e.g. {self.reference_wins[0][:300]}")
        return out


STATS = Stats()


# --------------------------------------------------------------------------------------------
# models and sessions
# --------------------------------------------------------------------------------------------

def value_info(name: str, arr: np.ndarray):
    return helper.make_tensor_value_info(name, ONNX_OF[arr.dtype], list(arr.shape))


def build_model(cases: list[Case], opset: int, infer: bool = True) -> onnx.ModelProto:
    nodes, inputs, inits, outputs, functions = [], [], [], [], []
    seen_fn = set()
    for c in cases:
        nodes += c.nodes
        inputs += c.input_infos or [value_info(n, a) for n, a in c.feeds.items()]
        inits += c.initializers
        outputs += [onnx.ValueInfoProto(name=o) for o in c.outputs]
        for f in c.functions:
            if (f.domain, f.name) not in seen_fn:
                seen_fn.add((f.domain, f.name))
                functions.append(f)
    graph = helper.make_graph(nodes, "fuzz", inputs, outputs, inits)
    imports = [helper.make_opsetid("", opset)]
    if functions or any(n.domain == "pkg.onnax" for n in nodes):
        imports.append(helper.make_opsetid("pkg.onnax", 1))
    if any(n.domain == "com.microsoft" for n in nodes):
        imports.append(helper.make_opsetid("com.microsoft", 1))
    if any(n.domain == "ai.onnx.ml" for n in nodes):
        imports.append(helper.make_opsetid("ai.onnx.ml", 3))
    model = helper.make_model(graph, opset_imports=imports, functions=functions)
    model.ir_version = IR_VERSION
    if infer:
        # Fills the graph outputs' types (the EP compares output types at claim time).
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    return model


def _session_options(intra_threads=1):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 4
    # The EP sees the graph as generated (no constant folding or fusions hiding cases).
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = intra_threads
    so.inter_op_num_threads = 1
    return so


def cpu_session(model_bytes: bytes):
    import onnxruntime as ort

    return ort.InferenceSession(model_bytes, _session_options(),
                                providers=["CPUExecutionProvider"])


def run_session(sess, feeds: dict):
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def run_cpu(model_bytes: bytes, feeds: dict):
    return run_session(cpu_session(model_bytes), feeds)


def run_ep(model_bytes: bytes, feeds: dict, options: dict):
    """Outputs by name and the parsed report."""
    import onnxruntime as ort

    fd, report = tempfile.mkstemp(prefix="ortmlx-fuzz-", suffix=".json")
    os.close(fd)
    os.unlink(report)
    try:
        so = _session_options()
        opts = dict(options)
        opts["report"] = report
        ortmlx.append_to_session_options(so, opts)
        sess = ort.InferenceSession(model_bytes, so)
        names = [o.name for o in sess.get_outputs()]
        out = dict(zip(names, sess.run(None, feeds)))
        del sess
        with open(report) as f:
            raw = json.load(f, object_pairs_hook=_Pairs)
        return out, Report(raw)
    finally:
        try:
            os.unlink(report)
        except FileNotFoundError:
            pass


def ep_report(model_bytes: bytes, options: dict):
    """The EP's report for a session that is created and never run."""
    import onnxruntime as ort

    fd, report = tempfile.mkstemp(prefix="ortmlx-fuzz-", suffix=".json")
    os.close(fd)
    os.unlink(report)
    try:
        so = _session_options()
        ortmlx.append_to_session_options(so, dict(options, report=report))
        sess = ort.InferenceSession(model_bytes, so)
        del sess
        with open(report) as f:
            return Report(json.load(f, object_pairs_hook=_Pairs))
    finally:
        try:
            os.unlink(report)
        except FileNotFoundError:
            pass


class _Pairs(dict):
    """A JSON object that also keeps every (key, value) pair: the report's "claims" object can
    name one graph twice (the current pass and a superseded one)."""

    def __init__(self, pairs):
        super().__init__(pairs)
        self.pairs = pairs


class Report:
    def __init__(self, raw):
        self.claimed: set[str] = set()
        self.refused: dict[str, list] = {}  # op -> [(reason, count, nodes)]
        for _, claim in raw.get("claims", _Pairs([])).pairs:
            self.claimed.update(claim.get("claimed", []))
            for op, r in claim.get("refused", {}).items():
                self.refused.setdefault(op, []).append(
                    (r.get("reason", ""), r.get("count", 0), r.get("nodes", [])))
        self.executed: set[str] = set()
        for f in raw.get("fused", {}).values():
            if f.get("runs", 0) > 0:
                self.executed.update(f.get("nodes", []))

    def reason(self, op_key: str, node: str) -> str | None:
        """The refusal reason recorded for a node of op type `op_key` (the reason quoted for its
        op type: the report keeps the first per type)."""
        entries = self.refused.get(op_key)
        if not entries:
            return None
        for reason, _, nodes in entries:
            if node in nodes:
                return reason
        return entries[0][0]


def op_key(node) -> str:
    return f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type


# --------------------------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------------------------

def compare(got, want, tol: float, mag: float = 0.0, exact_dtype=True) -> str | None:
    """None when `got` matches `want`: same dtype (unless a float64 reference), shape, NaN and
    Inf positions; finite values within tol * (mag + |want|) (plus flush-to-zero slack)."""
    got, want = np.asarray(got), np.asarray(want)
    if exact_dtype and got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if got.size == 0:
        return None
    if not np.issubdtype(want.dtype, np.floating):
        if np.array_equal(got, want):
            return None
        bad = np.argwhere(got != want)[0]
        return f"at {tuple(bad)}: {got[tuple(bad)]!r}, expected {want[tuple(bad)]!r}"
    if not exact_dtype and np.issubdtype(got.dtype, np.floating):
        # A float64 reference beyond the output type's range is that type's Inf.
        with np.errstate(over="ignore"):
            want = want.astype(got.dtype)
    g, w = got.astype(np.float64), want.astype(np.float64)
    gn, wn = np.isnan(g), np.isnan(w)
    if (gn != wn).any():
        i = tuple(np.argwhere(gn != wn)[0])
        return f"NaN at {i}: {g[i]!r}, expected {w[i]!r} ({int(gn.sum())} vs {int(wn.sum())} NaN)"
    gi, wi = np.where(gn, 0, g), np.where(wn, 0, w)
    inf_bad = (np.isinf(gi) | np.isinf(wi)) & (gi != wi)
    if inf_bad.any():
        i = tuple(np.argwhere(inf_bad)[0])
        return f"Inf at {i}: {g[i]!r}, expected {w[i]!r}"
    fin = np.isfinite(gi) & np.isfinite(wi)
    tiny = TINY.get(got.dtype, 0.0)
    err = np.abs(gi - wi)
    lim = tol * (mag + np.abs(wi)) + tiny
    bad = fin & (err > lim)
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        return (f"at {i}: {g[i]!r}, expected {w[i]!r} (|err| {err[i]:.3g} > {lim[i]:.3g}; "
                f"{int(bad.sum())} of {bad.size} off)")
    return None


def _tolerance(case: Case, arr) -> float:
    dt = np.asarray(arr).dtype
    if not np.issubdtype(dt, np.floating):
        return 0.0
    return (case.tol if case.tol is not None else TOL.get(dt, 0.0)) * case.tol_scale


def judge_outputs(case: Case, ep: dict, cpu: dict) -> Verdict | None:
    """None when every output matches; else the mismatch verdict, or a match against the
    reference where ORT CPU is the one that differs (or both lie within the tolerance of it)."""
    refs = None
    if case.reference_primary:
        refs = case.reference()
        if refs is None:  # outside float32's range: nothing to compare (the case says why)
            return None
        for i, name in enumerate(case.outputs):
            mag = case.mag[i] if case.mag else 0.0
            msg = compare(ep[name], refs[i], _tolerance(case, ep[name]), mag, exact_dtype=False)
            if msg:
                return Verdict("mismatch", f"{name} vs float64 reference: {msg}")
        return None
    diffs = []
    for i, name in enumerate(case.outputs):
        mag = case.mag[i] if case.mag else 0.0
        msg = compare(ep[name], cpu[name], _tolerance(case, cpu[name]), mag)
        if msg:
            diffs.append((i, name, msg))
    if not diffs:
        return None
    refs = case.reference() if case.reference is not None else None
    if refs is None:
        i, name, msg = diffs[0]
        return Verdict("mismatch", f"{name} vs ORT CPU: {msg}")
    notes = []
    for i, name, msg in diffs:
        mag = case.mag[i] if case.mag else 0.0
        ref = np.asarray(refs[i])  # float64 for float outputs, the output's dtype otherwise
        tol = _tolerance(case, cpu[name])
        ep_ref = compare(ep[name], ref, tol, mag, exact_dtype=False)
        cpu_ref = compare(cpu[name], ref, tol, mag, exact_dtype=False)
        if ep_ref is not None:
            return Verdict("mismatch", f"{name} vs ORT CPU: {msg}; vs reference: "
                                       f"{ep_ref} (ORT CPU vs reference: "
                                       f"{cpu_ref or 'matches'})")
        # Both within the tolerance of the exact result, on either side of it (e.g. seed 122,
        # o60_5: a log-sum-exp near 0, the EP and ORT CPU one ulp of the sum apart).
        notes.append(f"{name}: ORT CPU {cpu_ref or 'as close to the reference, other side'}")
    return Verdict("matched", "; ".join(notes))


# --------------------------------------------------------------------------------------------
# running batches
# --------------------------------------------------------------------------------------------

def _short(e: BaseException) -> str:
    # Head and tail: ORT's fused-node prefixes fill the head, the reason sits at the end.
    s = str(e).replace("\n", " ")
    return s if len(s) <= 400 else s[:150] + " ... " + s[-245:]


def run_cases(cases: list[Case], opset: int, options: dict | None = None,
              stats: Stats = STATS) -> list[Verdict]:
    """Runs `cases` in as few sessions as possible and records a verdict per case."""
    options = options or {}
    verdicts: dict[str, Verdict] = {}
    t0 = time.monotonic()
    _run(cases, opset, options, verdicts, stats)
    stats.seconds += time.monotonic() - t0
    out = []
    for c in cases:
        v = verdicts[c.cid]
        stats.add(c, v, opset)
        out.append(v)
    return out


def _why(status, e) -> Verdict:
    return Verdict(status, _short(e), str(e))


def _culprit(cases, msg: str):
    """The case whose node or value an ORT error message names, if exactly one does."""
    named = [c for c in cases if f"{c.cid}_" in msg]
    return named[0] if len(named) == 1 else None


def _split(cases, opset, options, verdicts, stats, why):
    """Runs again without the case the error names (that one alone), else in halves."""
    if len(cases) == 1:
        verdicts[cases[0].cid] = why
        return
    bad = _culprit(cases, why.detail_full)
    if bad is not None:
        _run([bad], opset, options, verdicts, stats)
        _run([c for c in cases if c is not bad], opset, options, verdicts, stats)
        return
    half = len(cases) // 2
    _run(cases[:half], opset, options, verdicts, stats)
    _run(cases[half:], opset, options, verdicts, stats)


def _run(cases, opset, options, verdicts, stats):
    if len(cases) > 1 and any(c.expect_raise or c.solo for c in cases):
        for c in cases:
            if c.expect_raise or c.solo:
                _run([c], opset, options, verdicts, stats)
        cases = [c for c in cases if not (c.expect_raise or c.solo)]
        if not cases:
            return
    if len(cases) == 1 and cases[0].expect_raise:
        return _run_expect_raise(cases[0], opset, options, verdicts, stats)
    _phase("build", cases)  # ONNX's shape inference can crash too (not the EP: not counted)
    try:
        model = build_model(cases, opset)
    except Exception as e:  # ONNX shape inference rejects a case
        return _split(cases, opset, options, verdicts, stats, _why("invalid", e))
    data = model.SerializeToString()
    feeds = {k: v for c in cases for k, v in c.feeds.items()}
    stats.sessions += 1
    cpu = {}
    if any(c.needs_cpu for c in cases):
        _phase("cpu", cases)
        try:
            sess = cpu_session(data)
        except Exception as e:  # ORT cannot load it: no reference, not counted
            return _split(cases, opset, options, verdicts, stats, _why("invalid", e))
        try:
            cpu = run_session(sess, feeds)
        except Exception as e:
            del sess
            if len(cases) == 1:
                return _expect_raise(cases[0], data, feeds, options, verdicts, _short(e))
            return _split(cases, opset, options, verdicts, stats, _why("invalid", e))
        del sess
    _phase("ep", cases)
    try:
        ep, report = run_ep(data, feeds, options)
    except Exception as e:
        if len(cases) == 1 and not cases[0].needs_cpu:
            _phase("cpu", cases)
            try:  # ORT CPU failing as well means the case is invalid, not an EP error
                run_cpu(data, feeds)
            except Exception as e2:
                verdicts[cases[0].cid] = Verdict("invalid", _short(e2))
                return
        return _split(cases, opset, options, verdicts, stats, _why("ep_error", e))
    by_name = {n.name: n for c in cases for n in c.nodes}
    for c in cases:
        verdicts[c.cid] = judge(c, by_name, ep, cpu, report)


def _run_expect_raise(case, opset, options, verdicts, stats):
    """A case ORT CPU must not run: first an EP session that is never run tells whether the
    node is claimed (refused: fine, ORT CPU's kernel would run it); claimed, it must raise."""
    _phase("build", [case])
    try:
        data = build_model([case], opset).SerializeToString()
    except Exception as e:
        verdicts[case.cid] = _why("invalid", e)
        return
    stats.sessions += 1
    _phase("ep", [case])
    try:
        report = ep_report(data, options)
    except Exception as e:
        verdicts[case.cid] = Verdict("raised", f"EP session: {_short(e)[:200]}")
        return
    if not any(n.name in report.claimed for n in case.nodes):
        names = [n.name for n in case.nodes]
        verdicts[case.cid] = (Verdict("refused") if all(
            report.reason(op_key(n), n.name) for n in case.nodes)
            else Verdict("no_reason", f"nodes {names} refused without a reason"))
        return
    _expect_raise(case, data, case.feeds, options, verdicts, "undefined in ORT CPU's kernel")


def _expect_raise(case, data, feeds, options, verdicts, cpu_error):
    """ORT CPU loads the case and raises when running it: the EP must refuse the node (its ORT
    CPU fallback then raises as well) or raise itself; returning values is "lenient"."""
    _phase("ep", [case])
    try:
        ep, _ = run_ep(data, feeds, options)
    except Exception as e:
        verdicts[case.cid] = Verdict("raised", f"ORT CPU: {cpu_error[:150]} | EP: {_short(e)[:150]}")
        return
    got = "; ".join(f"{k}: {np.asarray(v).dtype}{list(np.shape(v))} "
                    f"{np.asarray(v).ravel()[:4].tolist()}" for k, v in ep.items())
    verdicts[case.cid] = Verdict("lenient", f"ORT CPU raises ({cpu_error[:200]}); the EP "
                                            f"returned {got[:300]}")


def judge(case: Case, by_name: dict, ep: dict, cpu: dict, report: Report) -> Verdict:
    ran, not_run = [], []
    for name in case.node_names():
        (ran if name in report.executed else not_run).append(name)
    for name in not_run:
        if name in report.claimed:
            return Verdict("claimed_not_run", f"node {name} is claimed but never executed")
        node = by_name[name]
        reason = report.reason(op_key(node), name)
        if not reason:
            return Verdict("no_reason", f"node {name} ({op_key(node)}) refused without a reason")
    if case.expect_claim is not None and bool(ran) != case.expect_claim:
        if ran:
            return Verdict("claim_oracle", "claimed and run, but the documented grammar/interface "
                                           "says refuse")
        node = by_name[case.node_names()[0]]
        return Verdict("claim_oracle", "refused a valid contract: "
                                       f"{report.reason(op_key(node), node.name)}")
    if not ran:
        # Refused: the EP session ran the case on ORT CPU; it must agree with ORT CPU alone.
        want = case.refused_reference() if case.refused_reference else None
        for i, name in enumerate(case.outputs):
            mag = case.mag[i] if case.mag else 0.0
            ref = cpu[name] if want is None else want[i]
            msg = compare(ep[name], ref, _tolerance(case, ep[name]), mag,
                          exact_dtype=want is None)
            if msg and want is None and case.reference is not None:
                # Both sessions ran ORT CPU's kernel here; they differ only where its output is
                # not defined (e.g. MatMul over K = 0 leaves it uninitialised): then at least
                # one of them disagrees with the reference too.
                refs = case.reference()
                tol = _tolerance(case, ep[name])
                if refs is not None and (
                        compare(cpu[name], refs[i], tol, mag, exact_dtype=False) or
                        compare(ep[name], refs[i], tol, mag, exact_dtype=False)):
                    msg = None
            if msg and want is None:
                # Both sessions ran ORT CPU's own kernel on the same data and disagree: its output
                # is not defined here (seen: Pad mode=wrap with negative pads reads uninitialised
                # memory). Not the EP's answer, so not counted.
                return Verdict("invalid", f"ORT CPU is not deterministic here (the EP refused the "
                                          f"node; two ORT CPU runs differ): {name}: {msg}")
            if msg:
                return Verdict("mismatch", f"refused, yet {name} differs from the body: {msg}")
        return Verdict("refused")
    bad = judge_outputs(case, ep, cpu)
    return bad or Verdict("matched")
