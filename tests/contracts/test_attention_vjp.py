"""The pkg.onnax AttentionVJP contract (docs/ATTENTION_VJP.md): claimed and run on
MLXExecutionProvider through each path (dense GEMM, tiled, blocked MLX ops, native), checked
against a float64 reference and against ORT CPU running the contract's ONNX body unclaimed.

Cases are a representative subset of the cartesian product (rank, GQA, causal, mask kind and
shape, output subset, form, path), chosen so every value of every dimension appears.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest

from ortmlx.contracts import (
    DOMAIN,
    NODE_NAME,
    attention_forward_reference,
    attention_vjp_feeds,
    attention_vjp_model,
    attention_vjp_name,
    attention_vjp_reference,
    attention_vjp_reference_for,
    default_fingerprint,
    parse_attention_vjp_name,
    scale_hex,
)
from ortmlx.testing import EpRun, assert_ran_on_ep, cuda_sm90, mlx_backend, run_cpu

LIMIT_ENV = "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_DENSE_LIMIT_BYTES"
NATIVE_ENV = "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_NATIVE"
TILED_ENV = "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_TILED"
MLX_OPS_ENV = "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_MLX_OPS"
HUGE_LIMIT = str(1 << 40)  # forces dense for any test shape
DENSE_LABEL = "onnax GEMM attention VJP"
TILED_LABEL = "onnax tiled attention VJP"
BLOCKED_LABEL = "onnax blocked attention VJP"
NATIVE_LABEL = "onnax native SDPA attention VJP"
CUDA_FUSED_LABEL = "onnax CUDA fused attention VJP"
# Path -> (limit env value or None for unset, trace label the fused path must report on MLX's
# CPU backend); expected_label() gives the label on the backend the EP runs on.
PATHS = {
    "dense": (HUGE_LIMIT, DENSE_LABEL),
    # Beyond the limit: the fused CPU kernel on MLX's CPU backend; on a GPU backend the fused CUDA
    # kernels on sm_90 (test_attention_vjp_cuda.py), else blocked MLX ops.
    "tiled": ("0", TILED_LABEL),
    # Beyond the limit with attention_vjp_tiled=blocked: MLX ops by query blocks on any backend.
    "blocked": ("0", BLOCKED_LABEL),
    # No variable, small shapes: under 64 MiB. For the Recompute form the seed's rule says
    # native, but on MLX's CPU backend the EP's default (attention_vjp_native=auto) runs the
    # fused CPU kernel instead, labelled by the default budget; GPU backends follow the seed.
    "auto": (None, DENSE_LABEL),
    # Recompute form without the limit variable and native forced on: vjp of MLX's fused SDPA.
    "native": (None, NATIVE_LABEL),
}
FUSED_LABELS = {label for _, label in PATHS.values()} | {CUDA_FUSED_LABEL}


def expected_label(path, recompute):
    """The trace label of `path` on the backend this process's EP runs MLX on."""
    if mlx_backend() == "gpu":
        if path == "tiled":  # the CUDA backend's fused kernels on sm_90, else blocked MLX ops
            return CUDA_FUSED_LABEL if cuda_sm90() else BLOCKED_LABEL
        if path == "auto" and recompute:
            return NATIVE_LABEL
    return PATHS[path][1]


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------

def assert_close(got, want, what="", magnitude=None):
    """fp32 results vs the float64 reference: 1e-4 relative, plus 1e-4 of `magnitude` (default:
    the tensor's largest entry) as absolute slack. Sums run over S <= 64 and D <= 64 terms, and
    dS = P * (dP - delta) cancels: where a row keeps a single key, dQ and dK are exactly 0 in
    exact arithmetic but fp32 rounding noise of the size of dP's terms, so callers pass the
    magnitude of all three gradients (dV = P^T dY carries those terms' size)."""
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.dtype == np.float32, (what, got.dtype)
    assert np.isfinite(got).all(), f"{what}: non-finite values"
    if magnitude is None:
        magnitude = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(magnitude, 1e-3),
                               err_msg=what)


def gradient_magnitude(model, feeds, params=None) -> float:
    """Largest |entry| over dQ, dK and dV of the float64 reference (the absolute error scale)."""
    grads = attention_vjp_reference_for(model, feeds, params, outputs=(0, 1, 2))
    return max([float(np.abs(g).max()) for g in grads if g.size] or [0.0])


def contract_op(model) -> str:
    return next(n.op_type for n in model.graph.node if n.domain == DOMAIN)


def refusal_of(report, op_type):
    """The EP's refusal entry for the contract node (keyed bare or domain-qualified)."""
    refused = report.refused()
    return refused.get(op_type) or refused.get(f"{DOMAIN}.{op_type}")


@pytest.fixture(scope="session")
def handler_missing():
    """The refusal reason when no AttentionVJP handler is registered at all (the C++ side has
    not landed), else None. A refusal of a valid contract for any other reason is not hidden
    here: the EP tests then fail on it."""
    model = attention_vjp_model(1, 4, 4, 2, 2, 32)
    run = EpRun(model)
    try:
        entry = refusal_of(run.report(), contract_op(model))
    finally:
        run.close()
    if entry and "no MLX implementation" in entry.get("reason", ""):
        return entry["reason"]
    return None


@pytest.fixture
def claim_landed(handler_missing):
    """Skips the EP tests only while the C++ side registers no AttentionVJP handler at all."""
    if handler_missing:
        pytest.skip("C++ AttentionVJP claim not landed yet: " + handler_missing)
    return True


def set_path(monkeypatch, path, limit=None):
    limit = limit if limit is not None else PATHS[path][0]
    if path == "native":
        monkeypatch.setenv(NATIVE_ENV, "1")
    else:
        monkeypatch.delenv(NATIVE_ENV, raising=False)
    if path == "blocked":
        monkeypatch.setenv(TILED_ENV, "blocked")
    else:
        monkeypatch.delenv(TILED_ENV, raising=False)
    if limit is None:
        monkeypatch.delenv(LIMIT_ENV, raising=False)
    else:
        monkeypatch.setenv(LIMIT_ENV, limit)


def run_on_ep(model, feeds):
    """Outputs and report of one run on the EP; asserts the contract node ran there."""
    run = EpRun(model)
    try:
        got = run.run(feeds)
        report = assert_ran_on_ep(run, [NODE_NAME])
        assert contract_op(model) in report.executed_op_types() or any(
            contract_op(model) in op for op in report.executed_op_types()), report.fused
        return got, report
    finally:
        run.close()


# ------------------------------------------------------------------------------------------
# the case list
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    rank: int
    b: int
    sq: int
    sk: int
    hq: int
    hk: int
    d: int
    causal: int = 0
    mask: int = 0
    mask_shape: tuple | None = None
    outputs: tuple = (0, 1, 2)
    recompute: bool = False
    path: str = "dense"
    full_rows: bool = False  # some query rows have every key masked
    consistent_y: bool = True  # plain form: Y is the true forward output (else random)
    block_rows: int = 0  # blocked path: rows per block through the limit (0: limit 0, 1 row)

    @property
    def id(self):
        ms = "x".join(map(str, self.mask_shape)) if self.mask_shape else "def"
        form = "recompute" if self.recompute else "plain"
        extra = ("_fullrows" if self.full_rows else "") + ("" if self.consistent_y else "_randY")
        extra += f"_rows{self.block_rows}" if self.block_rows else ""
        return (f"r{self.rank}_b{self.b}_s{self.sq}x{self.sk}_h{self.hq}-{self.hk}_d{self.d}"
                f"_c{self.causal}_m{self.mask}[{ms}]_o{''.join(map(str, self.outputs))}"
                f"_{form}_{self.path}{extra}")

    def limit(self):
        """The dense-limit variable for this case (None: unset). The blocked path sizes its
        blocks by the limit, so `block_rows` rows' worth of scores gives blocks of that many rows
        (evened out), while the whole problem stays beyond the limit."""
        if self.path == "blocked" and self.block_rows:
            rows = min(self.block_rows, self.sq - 1)  # fewer rows than Sq: beyond the limit
            return str(4 * self.b * self.hq * self.sk * max(rows, 0))
        return PATHS[self.path][0]

    def model(self, **kw):
        return attention_vjp_model(self.b, self.sq, self.sk, self.hq, self.hk, self.d,
                                   rank=self.rank, causal=self.causal, mask_kind=self.mask,
                                   mask_shape=self.mask_shape, outputs=self.outputs,
                                   recompute=self.recompute, **kw)


C = Case
CASES = [
    # MHA, no mask, both ranks, both fused paths, the default (auto) path.
    C(4, 2, 16, 16, 4, 4, 16, path="dense"),
    C(3, 2, 16, 16, 4, 4, 16, path="tiled"),
    C(3, 2, 24, 24, 2, 2, 32, causal=1, path="auto"),
    # GQA 4/2, causal, Sq < Sk, boolean mask with every axis, fully masked rows.
    C(4, 2, 12, 20, 4, 2, 32, causal=1, mask=1, mask_shape=(2, 1, 12, 20), full_rows=True),
    C(4, 2, 12, 20, 4, 2, 32, causal=1, mask=1, mask_shape=(2, 1, 12, 20), full_rows=True,
      path="tiled"),
    # MQA 4/1, causal, Sq > Sk, additive mask of rank 2 with -inf entries.
    C(3, 1, 20, 12, 4, 1, 8, causal=1, mask=2, mask_shape=(20, 12), full_rows=True),
    C(3, 1, 20, 12, 4, 1, 8, causal=1, mask=2, mask_shape=(20, 12), full_rows=True,
      path="tiled"),
    # Output subsets, mask ranks 1..4, size-1 dims, narrow and wide last axes.
    C(3, 2, 16, 16, 2, 2, 64, mask=1, mask_shape=(16,), outputs=(0,)),
    C(4, 2, 16, 24, 4, 2, 24, mask=1, mask_shape=(1, 1, 1, 30), outputs=(1,), path="tiled"),
    C(4, 2, 16, 24, 4, 2, 24, causal=1, mask=2, mask_shape=(2, 4, 16, 10), outputs=(2,)),
    C(3, 2, 9, 33, 4, 2, 40, mask=2, mask_shape=(4, 1, 7), outputs=(0, 1), path="tiled"),
    C(4, 3, 17, 17, 6, 3, 16, causal=1, outputs=(1, 2), path="tiled"),
    C(3, 1, 32, 32, 8, 2, 8, causal=1, mask=1, mask_shape=(1, 32, 1), outputs=(0, 2)),
    C(4, 2, 8, 40, 2, 1, 16, mask=1, mask_shape=(8, 1), outputs=(0, 2), path="tiled"),
    C(3, 2, 64, 48, 4, 2, 32, causal=1, mask=1, mask_shape=(2, 1, 1, 48), path="dense"),
    C(4, 1, 48, 64, 2, 2, 64, causal=1, mask=2, mask_shape=(1, 48, 64), path="tiled"),
    # Plain form takes Y as given (here: not the forward output).
    C(4, 2, 16, 16, 4, 2, 16, mask=1, mask_shape=(16, 16), consistent_y=False),
    C(3, 2, 16, 16, 4, 2, 16, mask=1, mask_shape=(16, 16), consistent_y=False, path="tiled"),
    # Recompute form: native (forced on), auto (CPU: fused kernel), dense and tiled (limit set).
    C(4, 2, 16, 16, 4, 2, 32, causal=1, mask=1, full_rows=True, recompute=True, path="native"),
    C(4, 2, 16, 16, 4, 2, 32, causal=1, mask=1, full_rows=True, recompute=True, path="auto"),
    C(3, 2, 12, 20, 4, 1, 32, mask=2, mask_shape=(12, 20), recompute=True, path="native"),
    C(3, 2, 12, 20, 4, 1, 32, mask=2, mask_shape=(12, 20), recompute=True, path="auto"),
    C(3, 1, 20, 12, 2, 2, 64, causal=1, outputs=(0, 2), recompute=True, path="native"),
    C(4, 2, 24, 16, 4, 4, 48, causal=1, mask=2, mask_shape=(1, 1, 24, 16), outputs=(1,),
      recompute=True, path="native"),
    C(3, 2, 12, 20, 4, 2, 32, causal=1, mask=1, mask_shape=(12, 20), recompute=True,
      path="dense"),
    C(4, 2, 20, 12, 4, 2, 32, causal=1, mask=1, mask_shape=(2, 1, 20, 12), full_rows=True,
      recompute=True, path="tiled"),
    C(3, 1, 16, 24, 4, 1, 64, mask=2, mask_shape=(16, 8), outputs=(1, 2), recompute=True,
      path="tiled"),
    C(4, 2, 16, 16, 2, 1, 32, mask=1, mask_shape=(1,), outputs=(0,), recompute=True,
      path="dense"),
]
# The blocked path (attention_vjp_tiled=blocked beyond the limit) on every variant: 1-row blocks
# (limit 0) and blocks of a few rows that do not divide Sq.
BLOCKED = [
    C(4, 2, 16, 16, 4, 4, 16, path="blocked"),
    C(3, 2, 24, 24, 2, 2, 32, causal=1, path="blocked", block_rows=5),
    C(4, 2, 12, 20, 4, 2, 32, causal=1, mask=1, mask_shape=(2, 1, 12, 20), full_rows=True,
      path="blocked"),
    C(3, 1, 20, 12, 4, 1, 8, causal=1, mask=2, mask_shape=(20, 12), full_rows=True,
      path="blocked", block_rows=3),
    C(3, 2, 16, 16, 2, 2, 64, mask=1, mask_shape=(16,), outputs=(0,), path="blocked"),
    C(4, 2, 16, 24, 4, 2, 24, mask=1, mask_shape=(1, 1, 1, 30), outputs=(1,), path="blocked",
      block_rows=6),
    C(4, 2, 16, 24, 4, 2, 24, causal=1, mask=2, mask_shape=(2, 4, 16, 10), outputs=(2,),
      path="blocked", block_rows=7),
    C(3, 2, 9, 33, 4, 2, 40, mask=2, mask_shape=(4, 1, 7), outputs=(0, 1), path="blocked"),
    C(4, 3, 17, 17, 6, 3, 16, causal=1, outputs=(1, 2), path="blocked", block_rows=4),
    C(3, 1, 32, 32, 8, 2, 8, causal=1, mask=1, mask_shape=(1, 32, 1), outputs=(0, 2),
      path="blocked", block_rows=5),
    C(4, 2, 8, 40, 2, 1, 16, mask=1, mask_shape=(8, 1), outputs=(0, 2), path="blocked"),
    C(4, 1, 48, 64, 2, 2, 64, causal=1, mask=2, mask_shape=(1, 48, 64), path="blocked",
      block_rows=10),
    C(3, 2, 16, 16, 4, 2, 16, mask=1, mask_shape=(16, 16), consistent_y=False, path="blocked"),
    C(4, 2, 16, 16, 4, 2, 32, causal=1, mask=1, full_rows=True, recompute=True, path="blocked"),
    C(3, 2, 12, 20, 4, 1, 32, mask=2, mask_shape=(12, 20), recompute=True, path="blocked",
      block_rows=5),
    C(4, 2, 24, 16, 4, 4, 48, causal=1, mask=2, mask_shape=(1, 1, 24, 16), outputs=(1,),
      recompute=True, path="blocked", block_rows=7),
    C(4, 2, 20, 12, 4, 2, 32, causal=1, mask=1, mask_shape=(2, 1, 20, 12), full_rows=True,
      recompute=True, path="blocked"),
    C(3, 1, 16, 24, 4, 1, 64, mask=2, mask_shape=(16, 8), outputs=(1, 2), recompute=True,
      path="blocked", block_rows=3),
    C(4, 2, 16, 16, 2, 1, 32, mask=1, mask_shape=(1,), outputs=(0,), recompute=True,
      path="blocked"),
]
CASES += BLOCKED
EMPTY = [
    C(3, 0, 8, 8, 4, 2, 16, causal=1, mask=1, mask_shape=(8, 8), path="dense"),
    C(4, 0, 8, 8, 4, 2, 16, path="tiled"),
    C(3, 2, 0, 8, 4, 2, 16, mask=2, mask_shape=(1, 8), path="tiled"),
    C(4, 2, 0, 8, 4, 4, 16, causal=1, outputs=(1, 2), path="dense"),
    C(3, 2, 8, 0, 4, 1, 16, mask=1, mask_shape=(8, 1), outputs=(0, 2), path="dense"),
    C(4, 2, 8, 0, 4, 2, 16, causal=1, path="tiled"),
    C(4, 2, 8, 0, 4, 2, 32, recompute=True, path="native"),
    C(3, 0, 8, 8, 4, 2, 32, causal=1, recompute=True, path="tiled"),
    C(4, 0, 8, 8, 4, 2, 16, mask=1, mask_shape=(8, 8), path="blocked"),
    C(3, 2, 0, 8, 4, 2, 16, causal=1, outputs=(0, 2), path="blocked"),
    C(4, 2, 8, 0, 4, 1, 32, mask=2, mask_shape=(1, 8), recompute=True, path="blocked"),
]


def _sampled_cases(n, seed=20261202, paths=None):
    """A fixed pseudo-random sample of the full product, on top of the hand-picked cases.
    `paths`: draw the path from these (default: every path of each form but blocked)."""
    r = np.random.default_rng(seed)
    heads = [(4, 4), (4, 2), (4, 1), (6, 3), (2, 1), (8, 2)]
    subsets = [(0,), (1,), (2,), (0, 1), (1, 2), (0, 2), (0, 1, 2)]
    out = []
    while len(out) < n:
        recompute = bool(r.integers(2))
        path = str(r.choice(paths or (["native", "auto", "dense", "tiled"] if recompute else
                                      ["auto", "dense", "tiled"])))
        hq, hk = heads[r.integers(len(heads))]
        d = int(r.choice([32, 40, 64] if recompute else [8, 16, 24, 32, 64]))
        b, sq, sk = int(r.integers(1, 4)), int(r.integers(1, 49)), int(r.integers(1, 49))
        mask = int(r.integers(3))
        mask_shape = None
        if mask:
            rank = int(r.integers(1, 5))
            width = int(r.choice([1, sk, max(1, sk - 3), sk + 5]))
            full = (b, hq, sq, width)[4 - rank:]
            mask_shape = tuple(x if i == rank - 1 or r.random() < 0.5 else 1
                               for i, x in enumerate(full))
        out.append(Case(int(r.choice([3, 4])), b, sq, sk, hq, hk, d, causal=int(r.integers(2)),
                        mask=mask, mask_shape=mask_shape,
                        outputs=subsets[r.integers(len(subsets))], recompute=recompute,
                        path=path, full_rows=bool(mask and r.random() < 0.3)))
    return out


CASES += _sampled_cases(40)
SAMPLED_BLOCKED = [dataclasses.replace(c, block_rows=int(i % 4 and 1 + i % 9))
                   for i, c in enumerate(_sampled_cases(24, seed=20261203, paths=["blocked"]))]
CASES += SAMPLED_BLOCKED


def _feeds(case, model, rng):
    return attention_vjp_feeds(model, rng, fully_masked_rows=case.full_rows,
                               consistent_y=case.consistent_y)


def _assert_every_variant(cases):
    assert {c.rank for c in cases} == {3, 4}
    assert any(c.hq == c.hk for c in cases) and any(c.hk == 1 < c.hq for c in cases)
    assert any(1 < c.hk < c.hq for c in cases)
    assert {c.causal for c in cases} == {0, 1}
    assert any(c.causal and c.sq != c.sk and c.sq < c.sk for c in cases)
    assert any(c.causal and c.sq > c.sk for c in cases)
    assert {c.mask for c in cases} == {0, 1, 2}
    assert {len(c.mask_shape) for c in cases if c.mask_shape} == {1, 2, 3, 4}
    assert any(c.mask and c.mask_shape and c.mask_shape[-1] not in (1, c.sk) and
               c.mask_shape[-1] < c.sk for c in cases)  # narrow
    assert any(c.mask and c.mask_shape and c.mask_shape[-1] > c.sk for c in cases)  # wide
    assert {c.outputs for c in cases} >= {(0,), (1,), (2,), (0, 1), (1, 2), (0, 2), (0, 1, 2)}
    assert {c.recompute for c in cases} == {False, True}
    assert {(c.b == 0, c.sq == 0, c.sk == 0) for c in cases} >= {
        (True, False, False), (False, True, False), (False, False, True)}
    assert any(c.full_rows for c in cases) and any(not c.consistent_y for c in cases)


def test_cases_cover_every_variant():
    _assert_every_variant(CASES + EMPTY)
    for form in (False, True):
        assert {c.path for c in CASES + EMPTY if c.recompute == form} >= (
            {"native", "auto", "dense", "tiled", "blocked"} if form else
            {"dense", "tiled", "auto", "blocked"})
    # The blocked path on its own covers every variant too, with 1-row and multi-row blocks
    # (some of which do not divide Sq).
    blocked = [c for c in CASES + EMPTY if c.path == "blocked"]
    _assert_every_variant(blocked)
    assert any(c.block_rows == 0 for c in blocked)
    assert any(c.block_rows > 1 and c.sq % c.block_rows for c in blocked)


# ------------------------------------------------------------------------------------------
# the builder and reference on their own (no C++ needed)
# ------------------------------------------------------------------------------------------

def test_name_grammar():
    fp = "0123456789abcdef"
    name = attention_vjp_name(3, 16, 8, 128, 1 / np.sqrt(128), 1, (0, 1, 2), 1, fingerprint=fp)
    # The reference handler's own example name.
    assert name == "AttentionVJP_r3_q16_k8_d128_s3db504f3_c1_o012_m1_0123456789abcdef"
    rec = attention_vjp_name(3, 4, 2, 40, 0.15811388, 0, (0, 1, 2), 0, recompute=True,
                             fingerprint=fp)
    assert rec == "AttentionVJPRecompute_r3_q4_k2_d40_s3e21e89b_c0_o012_m0_0123456789abcdef"
    assert scale_hex(1.0) == "3f800000" and scale_hex(0.125) == "3e000000"
    fp1 = default_fingerprint(4, 4, 2, 32, 0.25, 0, (0, 2), 2)
    assert fp1 == default_fingerprint(4, 4, 2, 32, 0.25, 0, (0, 2), 2)
    assert len(fp1) == 16 and int(fp1, 16) >= 0
    assert fp1 != default_fingerprint(4, 4, 2, 32, 0.25, 0, (0, 2), 1)
    cfg = parse_attention_vjp_name(attention_vjp_name(4, 4, 2, 32, 0.25, 1, (0, 2), 2))
    assert (cfg.rank, cfg.hq, cfg.hk, cfg.d, cfg.scale, cfg.causal, cfg.outputs,
            cfg.mask_kind, cfg.recompute) == (4, 4, 2, 32, 0.25, 1, (0, 2), 2, False)


VALID = "AttentionVJP_r3_q4_k2_d16_s3e800000_c1_o012_m1_0123456789abcdef"
MALFORMED = {
    "extra_field": VALID + "_extra",
    "extra_leading_field": VALID.replace("AttentionVJP_", "AttentionVJP_v1_"),
    "missing_field": VALID.replace("_m1", ""),
    "wrong_letter": VALID.replace("q4_", "h4_"),
    "uneven_groups": VALID.replace("q4_k2_", "q15_k4_"),
    "zero_heads": VALID.replace("k2_", "k0_"),
    "heads_times_d_overflow": VALID.replace("q4_k2_", "q2147483640_k2_"),
    "d41": VALID.replace("d16_", "d41_"),
    "d0": VALID.replace("d16_", "d0_"),
    "d264": VALID.replace("d16_", "d264_"),
    "recompute_d16": VALID.replace("AttentionVJP_", "AttentionVJPRecompute_"),
    "scale_inf": VALID.replace("s3e800000_", "s7f800000_"),
    "scale_nan": VALID.replace("s3e800000_", "s7fc00000_"),
    "scale_zero": VALID.replace("s3e800000_", "s00000000_"),
    "scale_negative": VALID.replace("s3e800000_", "sbe800000_"),
    "c2": VALID.replace("c1_", "c2_"),
    "o210": VALID.replace("o012_", "o210_"),
    "o3": VALID.replace("o012_", "o3_"),
    "empty_outputs": VALID.replace("o012_", "o_"),
    "m3": VALID.replace("m1_", "m3_"),
    "fingerprint_15_digits": VALID[:-1],
    "fingerprint_not_hex": VALID[:-1] + "g",
    # The documented grammar, strictly (issue 8: the EP claimed these, parsing fields the way the
    # seed's Rust from_str / from_str_radix do).
    "sign_in_heads": VALID.replace("q4_", "q+4_"),
    "sign_in_causal": VALID.replace("c1_", "c+1_"),
    "negative_zero_mask_kind": VALID.replace("m1_", "m-0_"),
    "scale_short_hex": VALID.replace("s3e800000_", "s+3e8_"),  # was run with scale 1.4e-42
    "scale_3_digits": VALID.replace("s3e800000_", "s3e8_"),
    "scale_7_digits": VALID.replace("s3e800000_", "s3e80000_"),
    "scale_9_digits": VALID.replace("s3e800000_", "s03e800000_"),
    "non_ascii_digit": VALID.replace("r3_", "r\u0663_"),
    "space_in_field": VALID.replace("d16_", "d 16_"),
}


def test_parser_agrees_with_the_grammar():
    assert parse_attention_vjp_name(VALID) is not None
    for why, name in MALFORMED.items():
        assert parse_attention_vjp_name(name) is None, why


def _finite_difference_grads(fn, args, eps=1e-6):
    grads = []
    for idx, x in enumerate(args):
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            hi, lo = [a.copy() for a in args], [a.copy() for a in args]
            hi[idx][i] += eps
            lo[idx][i] -= eps
            g[i] = (fn(*hi) - fn(*lo)) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("rank,hq,hk,causal,kind,mshape", [
    (4, 4, 2, 1, 1, (3, 1, 5, 4)), (3, 4, 1, 1, 2, (5, 6)), (3, 2, 2, 0, 2, (1,)),
    (4, 2, 1, 1, 0, (1,)), (3, 2, 1, 0, 1, (2, 5, 3)),
])
def test_reference_is_the_gradient_of_the_forward(rank, hq, hk, causal, kind, mshape, rng):
    """The float64 reference (Recompute form) equals finite differences of <forward, dY>."""
    b, sq, sk, d = 3, 5, 4, 8

    def shape(s, h):
        return (b, s, h * d) if rank == 3 else (b, h, s, d)

    q, dy = rng.standard_normal(shape(sq, hq)), rng.standard_normal(shape(sq, hq))
    k, v = rng.standard_normal(shape(sk, hk)), rng.standard_normal(shape(sk, hk))
    if kind == 2:
        mask = rng.uniform(-1, 1, mshape)
        mask[rng.random(mshape) > 0.7] = -np.inf
    else:
        mask = rng.random(mshape) < 0.7
    kw = dict(hq=hq, hk=hk, causal=causal, mask_kind=kind, scale=0.3, rank=rank)
    want = _finite_difference_grads(
        lambda q, k, v: float((attention_forward_reference(q, k, v, mask, **kw) * dy).sum()),
        [q, k, v])
    got = attention_vjp_reference(q, k, v, dy, mask, **kw)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


def test_reference_zeroes_fully_masked_rows(rng):
    q, k, v, dy = (rng.standard_normal((1, 2, 3, 8)) for _ in range(4))
    mask = np.ones((3, 3), dtype=bool)
    mask[1] = False
    dq, dk, dv = attention_vjp_reference(q, k, v, dy, mask, hq=2, hk=2, causal=0, mask_kind=1,
                                         scale=0.5, rank=4)
    assert np.all(dq[:, :, 1] == 0) and np.isfinite(dk).all() and np.isfinite(dv).all()
    y = attention_forward_reference(q, k, v, mask, hq=2, hk=2, causal=0, mask_kind=1, scale=0.5,
                                    rank=4)
    assert np.all(y[:, :, 1] == 0)


@pytest.mark.parametrize("case", CASES + EMPTY, ids=lambda c: c.id)
def test_body_on_ort_cpu_matches_reference(case, rng):
    """The contract's ONNX body, run by ORT CPU (no EP), implements the documented semantics."""
    model = case.model()
    feeds = _feeds(case, model, rng)
    got = run_cpu(model, feeds)
    want = attention_vjp_reference_for(model, feeds)
    mag = gradient_magnitude(model, feeds)
    assert len(got) == len(case.outputs)
    for o, g, w in zip(case.outputs, got, want):
        assert_close(g, w, f"d{'QKV'[o]} (ORT CPU body)", mag)


# ------------------------------------------------------------------------------------------
# on the EP
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_on_ep_matches_reference_and_cpu(case, rng, monkeypatch, claim_landed):
    set_path(monkeypatch, case.path, case.limit())
    model = case.model()
    feeds = _feeds(case, model, rng)
    got, report = run_on_ep(model, feeds)
    label = expected_label(case.path, case.recompute)
    paths = report.paths()
    assert label in paths, f"expected path {label!r}, report has {sorted(paths)}"
    assert not (FUSED_LABELS - {label}) & set(paths), sorted(paths)
    want = attention_vjp_reference_for(model, feeds)
    mag = gradient_magnitude(model, feeds)
    body = run_cpu(model, feeds)
    assert len(got) == len(case.outputs)
    for o, g, w, c in zip(case.outputs, got, want, body):
        assert_close(g, w, f"d{'QKV'[o]} vs float64", mag)
        assert_close(g, c.astype(np.float64), f"d{'QKV'[o]} vs ORT CPU body", mag)


@pytest.mark.parametrize("case", EMPTY, ids=lambda c: c.id)
def test_empty_dims_give_zeros(case, rng, monkeypatch, claim_landed):
    set_path(monkeypatch, case.path, case.limit())
    model = case.model()
    feeds = _feeds(case, model, rng)
    got, _ = run_on_ep(model, feeds)
    shapes = {0: feeds["Q"].shape, 1: feeds["K"].shape, 2: feeds["V"].shape}
    for o, g in zip(case.outputs, got):
        assert g.shape == shapes[o] and g.dtype == np.float32
        assert not np.any(g), f"d{'QKV'[o]} not zero"


def test_fingerprint_is_opaque(rng, monkeypatch, claim_landed):
    set_path(monkeypatch, "dense")
    for fp in ("0000000000000000", "DEADBEEFdeadbeef"):
        model = attention_vjp_model(1, 8, 8, 2, 2, 16, rank=3, causal=1, fingerprint=fp)
        assert contract_op(model).endswith(fp)
        feeds = attention_vjp_feeds(model, rng)
        got, _ = run_on_ep(model, feeds)
        for g, w in zip(got, attention_vjp_reference_for(model, feeds)):
            assert_close(g, w, magnitude=gradient_magnitude(model, feeds))


# ------------------------------------------------------------------------------------------
# refusals: malformed names and interfaces run the body on ORT, correctly
# ------------------------------------------------------------------------------------------

# The body behind every malformed name: r3, HQ 4 / HK 2, D 16, scale 0.25, causal, keep-mask.
_BODY = dict(batch=2, sq=8, sk=12, hq=4, hk=2, d=16, rank=3, causal=1, mask_kind=1,
             mask_shape=(8, 12), scale=0.25)


def _check_refused_and_correct(model, params, rng, handler_missing):
    op = contract_op(model)
    feeds = attention_vjp_feeds(model, rng, params=params)
    run = EpRun(model)
    try:
        got = run.run(feeds)
        report = run.report()
    finally:
        run.close()
    assert NODE_NAME not in report.executed_nodes()
    assert not FUSED_LABELS & set(report.paths())
    want = attention_vjp_reference_for(model, feeds, params=params)
    mag = gradient_magnitude(model, feeds, params)
    for g, c, w in zip(got, run_cpu(model, feeds), want):
        assert_close(g, w, "EP session with the body inlined", mag)
        assert_close(c, w, "ORT CPU", mag)
    entry = refusal_of(report, op)
    assert entry and entry.get("reason"), (
        f"{op} not in report().refused(); it has {sorted(report.refused())}")
    if not handler_missing:
        # The contract's own predicate refused it, not a failed registry lookup.
        assert "no MLX implementation" not in entry["reason"], entry["reason"]
    return entry["reason"]


@pytest.mark.parametrize("why", sorted(MALFORMED))
def test_malformed_name_is_refused_and_runs_on_cpu(why, rng, handler_missing):
    params = parse_attention_vjp_name(VALID)
    model = attention_vjp_model(**_BODY, name_override=MALFORMED[why])
    _check_refused_and_correct(model, params, rng, handler_missing)


INTERFACES = {
    # A valid name whose static interface does not match it.
    "static_width": (dict(_BODY, d=8, scale=0.25), VALID),
    "rank4_tensors_rank3_name": (dict(_BODY, rank=4), VALID),
    "mask_dtype": (dict(_BODY, mask_kind=2), VALID),  # float mask, name says boolean
    "recompute_inputs_plain_name": (dict(_BODY, d=32),
                                    VALID.replace("AttentionVJP_", "AttentionVJPRecompute_")
                                    .replace("d16_", "d32_")),
}


@pytest.mark.parametrize("why", sorted(INTERFACES))
def test_interface_mismatch_is_refused(why, rng, handler_missing):
    body, name = INTERFACES[why]
    model = attention_vjp_model(**body, name_override=name)
    cfg = parse_attention_vjp_name(attention_vjp_model(**body).graph.node[0].op_type)
    _check_refused_and_correct(model, cfg, rng, handler_missing)


# ------------------------------------------------------------------------------------------
# wrong live shapes: a clear error naming the node, and the session keeps working
# ------------------------------------------------------------------------------------------

def _expect_node_error(run, feeds):
    with pytest.raises(Exception) as err:  # ORT raises Fail / RuntimeException
        run.run(feeds)
    assert NODE_NAME in str(err.value), str(err.value)


def _bad_feeds(feeds, rng, name, shape):
    bad = dict(feeds)
    bad[name] = rng.standard_normal(shape).astype(np.float32)
    return bad


def _errors_then_correct(model, feeds, bad_feeds_list):
    """Each bad feed is an error naming the node; then the same session runs `feeds` on the EP
    and matches the float64 reference."""
    run = EpRun(model)
    try:
        for bad in bad_feeds_list:
            _expect_node_error(run, bad)
        got = run.run(feeds)
        assert_ran_on_ep(run, [NODE_NAME])
    finally:
        run.close()
    mag = gradient_magnitude(model, feeds)
    for g, w in zip(got, attention_vjp_reference_for(model, feeds)):
        assert_close(g, w, magnitude=mag)


@pytest.mark.parametrize("path", ["dense", "tiled", "blocked"])
def test_wrong_live_batch_is_an_error_then_the_session_still_works(path, rng, monkeypatch,
                                                                   claim_landed):
    set_path(monkeypatch, path)
    model = attention_vjp_model(2, 8, 8, 4, 2, 16, rank=3, causal=1, mask_kind=1,
                                mask_shape=(8, 8), dynamic_batch=True)
    feeds = attention_vjp_feeds(model, rng, {"B": 2})
    _errors_then_correct(model, feeds, [_bad_feeds(feeds, rng, "dY", (3, 8, 64)),
                                        _bad_feeds(feeds, rng, "K", (3, 8, 32))])


def test_wrong_live_sequence_is_an_error_then_the_session_still_works(rng, monkeypatch,
                                                                      claim_landed):
    set_path(monkeypatch, "dense")
    model = attention_vjp_model(2, 8, 12, 4, 4, 16, rank=4, mask_kind=2, mask_shape=(1,),
                                dynamic_seq=True)
    feeds = attention_vjp_feeds(model, rng, {"Sq": 8, "Sk": 12})
    _errors_then_correct(model, feeds, [_bad_feeds(feeds, rng, "Y", (2, 4, 9, 16)),    # Y unlike Q
                                        _bad_feeds(feeds, rng, "V", (2, 4, 11, 16))])  # V unlike K


@pytest.mark.parametrize("path", ["tiled", "blocked"])
def test_unbroadcastable_mask_is_an_error(path, rng, monkeypatch, claim_landed):
    set_path(monkeypatch, path)
    model = attention_vjp_model(2, 8, 8, 4, 2, 16, rank=3, mask_kind=1,
                                mask_shape=("Mb", 1, "Mq", 8))
    feeds = attention_vjp_feeds(model, rng, {"Mb": 2, "Mq": 8})
    run = EpRun(model)
    try:
        bad = dict(feeds, Mask=np.ones((2, 1, 5, 8), dtype=bool))  # 5 is neither 1 nor Sq
        _expect_node_error(run, bad)
        got = run.run(feeds)
    finally:
        run.close()
    mag = gradient_magnitude(model, feeds)
    for g, w in zip(got, attention_vjp_reference_for(model, feeds)):
        assert_close(g, w, magnitude=mag)


@pytest.mark.parametrize("empty", ["B", "Sq", "Sk"])
def test_unbroadcastable_mask_is_an_error_when_a_dim_is_empty(empty, rng, monkeypatch,
                                                              claim_landed):
    """An empty batch or sequence does not excuse a mask whose head axis fits neither 1 nor HQ:
    the body's mask Add raises on ORT CPU, so the EP raises too (it returned zeros; fuzz seed 50
    with ORTMLX_FUZZ_FUSE=1, c30_50)."""
    set_path(monkeypatch, "dense")
    model = attention_vjp_model(2, 2, 4, 3, 1, 32, rank=3, mask_kind=1,
                                mask_shape=(1, "Mh", 1, 1), dynamic_batch=True,
                                dynamic_seq=True)
    dims = {"B": 2, "Sq": 2, "Sk": 4, "Mh": 3}
    feeds = attention_vjp_feeds(model, rng, dict(dims))
    bad = attention_vjp_feeds(model, rng, dict(dims, **{empty: 0, "Mh": 6}), consistent_y=False)
    assert bad["Mask"].shape == (1, 6, 1, 1)
    with pytest.raises(Exception):  # the reference: the contract body on ORT CPU
        run_cpu(model, bad)
    _errors_then_correct(model, feeds, [bad])


@pytest.mark.parametrize("path,recompute", [("dense", False), ("tiled", False),
                                            ("blocked", False), ("native", True)])
def test_mask_kind_0_ignores_the_mask_shape(path, recompute, rng, monkeypatch, claim_landed):
    """Mask kind 0 reads no mask (the body ignores it): a mask that would not broadcast against
    (B, HQ, Sq, Sk) runs on the EP like the body (it raised "incompatible mask broadcast"; fuzz
    seed 12, c3_92)."""
    set_path(monkeypatch, path)
    model = attention_vjp_model(2, 5, 5, 2, 1, 32, rank=3, causal=1, mask_kind=0,
                                mask_shape=("Mb", "Mh", "Mq", "Mk"), recompute=recompute)
    feeds = attention_vjp_feeds(model, rng, {"Mb": 1, "Mh": 4, "Mq": 5, "Mk": 7})
    assert feeds["Mask"].shape == (1, 4, 5, 7)  # 4 is neither 1 nor HQ
    got, _ = run_on_ep(model, feeds)
    mag = gradient_magnitude(model, feeds)
    body = run_cpu(model, feeds)
    for g, w, c in zip(got, attention_vjp_reference_for(model, feeds), body):
        assert_close(g, w, "vs float64", magnitude=mag)
        assert_close(g, c.astype(np.float64), "vs ORT CPU body", magnitude=mag)


# ------------------------------------------------------------------------------------------
# a real producer
# ------------------------------------------------------------------------------------------

def test_onnax_grad_of_attention_emits_claimed_contracts():
    """onnax (the grad/vjp tool over ONNX that emits these contracts) as a real producer.

    Checked (Dec 2026): `pip index versions onnax` and `pip download --no-deps onnax` find no
    distribution on PyPI, and the registry's package list has no such name, so no real producer
    can be installed here; the builder in ortmlx.contracts follows the documented grammar and
    the reference handler's parser instead.
    """
    try:
        import onnax  # noqa: F401
    except ImportError:
        pytest.skip("onnax is not installable from PyPI (no distribution found): "
                    "contracts come from ortmlx.contracts instead")
    pytest.skip("onnax importable but its API is unknown here: add the producer test")


# ------------------------------------------------------------------------------------------
# non-finite inputs (issue 8)
# ------------------------------------------------------------------------------------------

# (path, rank, recompute, causal, mask kind, mask shape): causal and narrow masks, where the
# fast kernel skips keys a row cannot see.
NONFINITE_VARIANTS = [
    ("dense", 4, False, 1, 2, (1, 3)),
    ("tiled", 3, False, 1, 1, (4, 6)),
    ("auto", 4, True, 1, 0, None),
    ("native", 3, True, 0, 2, (4, 4)),
    ("tiled", 4, True, 1, 2, (2, 1, 4, 3)),
    ("blocked", 4, False, 1, 1, (4, 6)),
    ("blocked", 3, True, 1, 2, (1, 3)),
]


def _same_non_finite(got, want, what, mag):
    """Same NaN and Inf positions; finite values close (absolute slack: 1e-4 of `mag`, the
    gradients' largest finite entry, as in assert_close)."""
    assert got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN")
    np.testing.assert_array_equal(np.where(np.isnan(got), 0, got)[np.isinf(want)],
                                  want[np.isinf(want)], err_msg=f"{what}: Inf")
    fin = np.isfinite(want)
    assert np.isfinite(got[fin]).all(), f"{what}: Inf where the reference is finite"
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-4, atol=1e-4 * max(mag, 1e-3),
                               err_msg=what)


@pytest.mark.parametrize("mlx_ops", [False, True], ids=["default", "mlx_ops"])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("which", ["Q", "K", "V", "Y", "dY", "Mask"])
@pytest.mark.parametrize("variant", NONFINITE_VARIANTS, ids=lambda v: f"{v[0]}_r{v[1]}_"
                         f"{'rec' if v[2] else 'plain'}_c{v[3]}_m{v[4]}")
def test_non_finite_inputs_follow_the_reference(variant, which, value, mlx_ops, rng,
                                                monkeypatch, claim_landed):
    """Regression (issue 8): NaN/Inf in Q, V, Y or dY gave finite gradients on the CPU paths
    where the float64 reference (and ORT CPU running the body) give NaN: the fused kernel skipped
    keys a row cannot see (causal, beyond a narrow mask) and zeroed them, while the reference's
    products run over every pair (0 * NaN = NaN); a row with a NaN or +Inf score is dead in the
    reference. The kernel now runs over all keys when an input is non-finite, and the native
    path takes the kernel's answer for such inputs. The value sits at the last key (hidden by
    causal/narrow masks from some rows) or the first query row.

    The MLX-op paths (dense, blocked and native on GPU backends; blocked on any) follow the same
    positions exactly (on an H200 they did not: NaN for dead rows and for whole tensors where
    the reference has zeros). mlx_ops: the attention_vjp_mlx_ops option makes MLX's CPU backend
    run them, so every path label here is also covered as a GPU backend runs it."""
    path, rank, recompute, causal, kind, mshape = variant
    if (which == "Y" and recompute) or (which == "Mask" and kind != 2):
        pytest.skip("no such input")
    if mlx_ops and mlx_backend() == "gpu":
        pytest.skip("GPU backends run the MLX-op paths already")
    set_path(monkeypatch, path)
    if mlx_ops:
        monkeypatch.setenv(MLX_OPS_ENV, "1")
    else:
        monkeypatch.delenv(MLX_OPS_ENV, raising=False)
    model = attention_vjp_model(2, 4, 6, 4, 2, 32 if recompute else 16, rank=rank,
                                causal=causal, mask_kind=kind, mask_shape=mshape,
                                recompute=recompute)
    feeds = attention_vjp_feeds(model, rng)
    x = feeds[which]
    if which in ("K", "V"):
        idx = (1, 5, 3) if rank == 3 else (1, 1, 5, 3)
    elif which == "Mask":
        idx = (0,) * (x.ndim - 1) + (x.shape[-1] - 1,)
    else:
        idx = (0, 0, 5) if rank == 3 else (0, 2, 0, 5)
    x[idx] = value
    got, _ = run_on_ep(model, feeds)
    with np.errstate(all="ignore"):
        want = attention_vjp_reference_for(model, feeds)
        grads = attention_vjp_reference_for(model, feeds, outputs=(0, 1, 2))
    mag = max([float(np.abs(g[np.isfinite(g)]).max()) for g in grads if np.isfinite(g).any()]
              or [0.0])
    # Every path follows the reference's NaN/Inf positions (docs/ATTENTION_VJP.md).
    for o, g, w in zip(parse_attention_vjp_name(contract_op(model)).outputs, got, want):
        _same_non_finite(g, w, f"d{'QKV'[o]}", mag)


def test_reference_masks_keys_beyond_a_narrow_additive_mask(rng):
    """The float64 reference masked keys beyond a narrow additive mask only by adding -inf, so a
    NaN score there (NaN + -inf = NaN) made the whole row dead; the contract masks such keys
    outright, as the ONNX body and the EP do. Found by tests/fuzz."""
    b, sq, sk, h, d = 1, 3, 4, 2, 8
    q, k, v, dy = (rng.standard_normal((b, h, s, d)) for s in (sq, sk, sk, sq))
    mask = rng.uniform(-1, 1, (1, 2))  # keys 2 and 3 are beyond its width
    kw = dict(hq=h, hk=h, causal=0, mask_kind=2, scale=0.3, rank=4)
    clean = attention_vjp_reference(q, k, v, dy, mask, **kw)
    k_nan = k.copy()
    k_nan[0, 1, 3, 0] = np.nan
    with np.errstate(invalid="ignore"):
        dq, dk, dv = attention_vjp_reference(q, k_nan, v, dy, mask, **kw)
    np.testing.assert_allclose(dv, clean[2])  # the rows stay alive
    np.testing.assert_allclose(dk, clean[1])
    # 0 * NaN reaches dQ of head 1 in column 0 (the NaN's column), for every row.
    assert np.isnan(dq[0, 1, :, 0]).all() and not np.isnan(dq[0, 1, :, 1:]).any()
    assert not np.isnan(dq[0, 0]).any()
