"""Fuzzing the EP (issue 8, "Reliability"): generated cases, each either refused with a reason
(the EP's JSON report) or run on the EP and matching ORT CPU (or the float64/exact reference:
always for the pkg.onnax AttentionVJP contract, and where ORT CPU itself is known to be off).

Three generators (tests/fuzz/gen_*.py): (a) AttentionVJP contract names and interfaces, mutated;
(b) one node per case for every registry entry (gen_ops.py and the op family modules it
dispatches to), with random dtypes, attribute and input forms, opsets, data, and hostile values
(hostile.py: int attributes 0, negative, 2^31, 2^32, 2^32+1, INT64_MIN/MAX; empty and huge dims;
out-of-range indices; integer division by zero; NaN/Inf); (c) small random graphs of claimed ops
with 0/1 dims and broadcasting. Cases are batched (hundreds of independent cases in one model:
one session pair, one run).

The oracle is ORT CPU: where ORT CPU raises when running a case, the EP must refuse the node or
raise ("raised"); returning values is "lenient" (a failure). Cases ORT CPU cannot load, or
crashes on, are not counted.

Crash isolation (pool.py): batches run in worker processes (one per core, ORTMLX_FUZZ_WORKERS);
a worker that dies or hangs (ORTMLX_FUZZ_TIMEOUT, seconds per batch) is replaced and its batch
bisected in fresh tasks until the crashing cases are named ("crash", with the case id).

Seeded: ORTMLX_FUZZ_SEED (default 20261202) picks the cases, ORTMLX_FUZZ_CASES (default 20000)
how many counted cases in all; ORTMLX_FUZZ_FUSE=1 also runs some batches with MLX's fused-kernel
JIT. Counts (per status, per generator, registry entries covered) are printed at the end of the
run (conftest.py). Failures of a class listed in known.py are counted as excluded.

Reproducing one case: every failure names its case id (e.g. o12_34: op batch 12, case 34).
    ORTMLX_FUZZ_CASE=o12_34 pytest tests/fuzz/test_fuzz.py   (several: comma-separated; with the
        same ORTMLX_FUZZ_SEED; runs just those cases, in a worker, and prints their records)
    python -m tests.fuzz.worker --case o12_34                 (in this process: for a debugger)
"""

from __future__ import annotations

import os
import time

import pytest

from .batches import BATCH, SHARES, parse_cid
from .fuzzlib import FAILURES, NOT_COUNTED, STATS, seed, total_cases
from .known import known_class
from .pool import pool


@pytest.fixture(scope="module", autouse=True)
def _registry():
    if not STATS.registry:
        from ortmlx.testing import registry_entries

        STATS.registry = registry_entries()


def _selected(family):
    cids = [c for c in os.environ.get("ORTMLX_FUZZ_CASE", "").split(",") if c.strip()]
    return [parse_cid(c) for c in cids if parse_cid(c)[0] == family] if cids else None


@pytest.mark.parametrize("family", list(SHARES))
def test_fuzz(family):
    STATS.seed = seed()
    target = max(1, round(total_cases() * SHARES[family]))
    failures, printed = [], []
    state = {"counted": 0, "n": 0}
    selected = _selected(family)
    if selected is not None:
        tasks = [{"family": f, "n": n, "size": i + 1, "only": [i]} for f, n, i in selected]
        if not tasks and os.environ.get("ORTMLX_FUZZ_CASE"):
            pytest.skip("no selected case of this family")

    def next_task(in_flight):
        if selected is not None:
            return tasks.pop() if tasks else None
        if state["counted"] + in_flight >= target:
            return None
        assert state["n"] < 10 * target, "the generator makes almost only invalid cases"
        size = min(BATCH[family], target - state["counted"] - in_flight)
        state["n"] += 1
        return {"family": family, "n": state["n"] - 1, "size": size}

    def on_records(task, recs, sessions):
        STATS.sessions += sessions
        for rec in recs:
            if selected is not None:
                printed.append(f"{rec['cid']} [{rec['status']}] {rec['label']}: {rec['detail']}")
            known = known_class(rec) if rec["status"] in FAILURES else None
            STATS.add_record(rec, known)
            state["counted"] += rec["status"] not in NOT_COUNTED
            if rec["status"] in FAILURES and known is None:
                failures.append(f"[{rec['status']}] {rec['cid']} {rec['label']}: {rec['detail']}")

    t0 = time.monotonic()
    p = pool()
    p.run(next_task, on_records)
    STATS.wall += time.monotonic() - t0
    STATS.processes = p.spawned
    for line in printed:
        print(line)
    assert not failures, (
        f"{len(failures)} fuzz failures ({family}; ORTMLX_FUZZ_SEED={seed()}; reproduce one "
        "with ORTMLX_FUZZ_CASE=<id>):\n" + "\n".join(f[:1500] for f in failures[:25]))
