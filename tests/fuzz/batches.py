"""Batches of generated cases, each rebuilt from (seed, family, batch number) alone, so a worker
process (or a person reproducing a case) makes exactly the cases the parent asked for.

A case id is <family letter><batch>_<index>: c = AttentionVJP contract, o = one op node,
g = small graph; e.g. o12_34 is case 34 of op batch 12. Case i depends only on the batch's
seed and the i cases before it, so rebuilding a batch of i + 1 cases rebuilds case i.
"""

from __future__ import annotations

import os
import re

import numpy as np

from .fuzzlib import seed

# Share of the cases per generator, cases per model (session pair) and seed salt.
SHARES = {"contract": 0.2, "op": 0.65, "graph": 0.15}
BATCH = {"contract": 100, "op": 200, "graph": 100}
FAMILY_SEED = {"contract": 1, "op": 2, "graph": 3}
LETTER = {"contract": "c", "op": "o", "graph": "g"}
FAMILY_OF = {v: k for k, v in LETTER.items()}


def engine_options(rng):
    """How the EP runs a batch: compiled (shape-keyed mlx::compile, no fused-kernel JIT), eager,
    or compiled without the general path; the JIT only on request (ORTMLX_FUZZ_FUSE=1: slow on a
    cold cache, every new fused kernel is compiled by the system compiler)."""
    choices = [{"compile_fuse": "off"}, {"compile_fuse": "off"}, {"no_compile": "1"},
               {"compile_fuse": "off", "no_general_compile": "1"}]
    if os.environ.get("ORTMLX_FUZZ_FUSE") == "1":
        choices.append({})
    return dict(choices[int(rng.integers(len(choices)))])


def make_batch(family: str, n: int, size: int):
    """Batch n of `family`: (cases, opset, engine options)."""
    from .gen_contracts import PATH_OPTIONS, ContractCases
    from .gen_graphs import GraphCases
    from .gen_ops import OpCases, pick_opset

    rng = np.random.default_rng([seed(), FAMILY_SEED[family], n])
    opts = engine_options(rng)
    if family == "contract":
        path = list(PATH_OPTIONS)[n % len(PATH_OPTIONS)]
        gen, opset = ContractCases(rng, path), 21
        opts.update(PATH_OPTIONS[path])
    elif family == "op":
        opset = pick_opset(rng)
        gen = OpCases(rng, opset)
    else:
        opset = int(rng.choice((11, 13, 17, 18, 20, 21)))
        gen = GraphCases(rng, opset)
    cases = []
    while len(cases) < size:
        c = gen.make(f"{LETTER[family]}{n}_{len(cases)}")
        if c is not None:
            cases.append(c)
    return cases, opset, opts


_CID = re.compile(r"^([cog])(\d+)_(\d+)$")


def parse_cid(cid: str):
    """(family, batch, index) of a case id."""
    m = _CID.match(cid.strip())
    if not m:
        raise ValueError(f"not a fuzz case id: {cid!r} (expected e.g. o12_34)")
    return FAMILY_OF[m.group(1)], int(m.group(2)), int(m.group(3))
