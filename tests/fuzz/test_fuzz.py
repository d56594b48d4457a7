"""Fuzzing the EP (issue 8, "Reliability"): generated cases, each either refused with a reason
(the EP's JSON report) or run on the EP and matching ORT CPU (or the float64/exact reference:
always for the pkg.onnax AttentionVJP contract, and where ORT CPU itself is known to be off).

Three generators (tests/fuzz/gen_*.py): (a) AttentionVJP contract names and interfaces, mutated;
(b) one node per case for every claimed op type, with random dtypes, attributes, opsets and
data; (c) small random graphs of claimed ops with 0/1 dims and broadcasting. Cases are batched
(hundreds of independent cases in one model: one session pair, one run).

Seeded: ORTMLX_FUZZ_SEED (default 20261202) picks the cases, ORTMLX_FUZZ_CASES (default 10000)
how many in all; ORTMLX_FUZZ_FUSE=1 also runs some batches with MLX's fused-kernel JIT (slow on a
cold cache: every new fused kernel is compiled by the system compiler). Counts are printed at the
end of the run (conftest.py). A failure lists the cases; rerun with the same seed to reproduce.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from .fuzzlib import FAILURES, STATS, run_cases, seed, total_cases
from .gen_contracts import PATH_OPTIONS, ContractCases
from .gen_graphs import GraphCases
from .gen_ops import OPSETS, OpCases

# Share of the cases per generator, and cases per model (session pair).
SHARES = {"contract": 0.35, "op": 0.40, "graph": 0.25}
BATCH = {"contract": 100, "op": 250, "graph": 100}
FAMILY_SEED = {"contract": 1, "op": 2, "graph": 3}


def _engine_options(rng):
    """How the EP runs a batch: compiled (shape-keyed mlx::compile, no fused-kernel JIT), eager,
    or compiled without the general path; the JIT only on request (see the module doc)."""
    choices = [{"compile_fuse": "off"}, {"compile_fuse": "off"}, {"no_compile": "1"},
               {"compile_fuse": "off", "no_general_compile": "1"}]
    if os.environ.get("ORTMLX_FUZZ_FUSE") == "1":
        choices.append({})
    return dict(choices[int(rng.integers(len(choices)))])


def _batch(family, rng, n, size):
    """One batch: (cases, opset, options)."""
    opts = _engine_options(rng)
    if family == "contract":
        path = list(PATH_OPTIONS)[n % len(PATH_OPTIONS)]
        gen, opset = ContractCases(rng, path), 21
        opts.update(PATH_OPTIONS[path])
    elif family == "op":
        opset = int(rng.choice(OPSETS))
        gen = OpCases(rng, opset)
    else:
        opset = int(rng.choice((11, 13, 17, 18, 20, 21)))
        gen = GraphCases(rng, opset)
    cases = []
    while len(cases) < size:
        c = gen.make(f"{family[0]}{n}_{len(cases)}")
        if c is not None:
            cases.append(c)
    return cases, opset, opts


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy on NaN/Inf/huge test data
@pytest.mark.parametrize("family", list(SHARES))
def test_fuzz(family):
    STATS.seed = seed()
    rng = np.random.default_rng([seed(), FAMILY_SEED[family]])
    target = max(1, round(total_cases() * SHARES[family]))
    failures = []
    counted = n = 0
    # Cases ORT CPU rejects (no reference) are not counted: batches continue until `target`
    # counted cases have run.
    while counted < target:
        cases, opset, opts = _batch(family, rng, n, min(BATCH[family], target - counted))
        n += 1
        only = os.environ.get("ORTMLX_FUZZ_ONLY")  # debugging: run just these case ids
        if only:
            cases = [c for c in cases if c.cid in only.split(",")]
            if not cases:
                counted += min(BATCH[family], target - counted)
                continue
        for case, v in zip(cases, run_cases(cases, opset, opts)):
            counted += v.status != "invalid"
            if v.status in FAILURES:
                failures.append(f"[{v.status}] {case.label}: {v.detail}")
        assert n < 10 * target, "the generator makes almost only invalid cases"
    assert not failures, (
        f"{len(failures)} fuzz failures ({family}; ORTMLX_FUZZ_SEED={seed()}):\n"
        + "\n".join(f[:1500] for f in failures[:15]))
