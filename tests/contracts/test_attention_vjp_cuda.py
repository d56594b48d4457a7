"""The cuda_fused AttentionVJP path (docs/ATTENTION_VJP.md): the fused CUDA kernels the CUDA
backend runs beyond the dense budget when asked (attention_vjp_tiled=kernel; opt-in, the default
stays the blocked MLX-op path), against the float64 reference and ORT CPU running the
contract's body, on every variant (ranks, GQA/MQA, causal with Sq < Sk and Sq > Sk, every mask
kind with broadcast, narrow and wide masks, fully masked rows, output subsets, both forms,
non-finite inputs, every head-size bucket of the kernels, shapes crossing tile edges).
The kernels' dQ and dK/dV products run on tensor cores: 3xTF32 by default, at fp32 level
(tolerance 3e-5, tighter than the 1e-4 of the other paths: each k-step's mma products reach the
fp32 accumulators through ordinary adds, so no error grows with the sequence length; one case
sums over 2048 keys and query rows); with ONNXRUNTIME_EP_MLX_TF32=1 in the environment they are
plain TF32 and the tolerances are TF32's (5e-3).

The CPU flavour has no CUDA kernels: these tests skip there (the kernels' logic is checked
without a GPU by tools/avjp_cuda_emu/check.py and, in part, test_attention_vjp_cuda_emu.py).
Every test id holds "cuda_fused", so
`pytest tests/contracts -k cuda_fused` selects them.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from ortmlx.contracts import (
    attention_vjp_feeds,
    attention_vjp_model,
    attention_vjp_reference_for,
    float32_boundary,
    parse_attention_vjp_name,
)
from ortmlx.testing import cuda_sm90, mlx_backend, run_cpu
from tests.contracts.test_attention_vjp import (
    BLOCKED_LABEL,
    CUDA_FUSED_LABEL,
    FUSED_LABELS,
    LIMIT_ENV,
    NATIVE_ENV,
    NATIVE_LABEL,
    TILED_ENV,
    Case,
    _assert_every_variant,
    _feeds,
    _same_non_finite,
    assert_close,
    claim_landed,  # noqa: F401  (fixture)
    contract_op,
    gradient_magnitude,
    handler_missing,  # noqa: F401  (fixture)
    run_on_ep,
)
from tests.contracts.test_attention_vjp_half import TYPES as HALF_TYPES
from tests.contracts.test_attention_vjp_half import rounded_feeds


@pytest.fixture
def cuda_backend(claim_landed):  # noqa: F811
    if mlx_backend() != "gpu":
        pytest.skip("cuda_fused needs the CUDA flavour on an NVIDIA GPU (this EP runs MLX on "
                    f"its {mlx_backend()} backend; the CPU flavour has no CUDA kernels)")
    return True


def tf32_mode() -> bool:
    """The process runs the EP in its tf32 mode (ONNXRUNTIME_EP_MLX_TF32, read once when the
    library loads): the kernels' tensor-core products then round their operands to TF32 (10
    mantissa bits) instead of splitting them (3xTF32, fp32 accuracy, the default)."""
    return os.environ.get("ONNXRUNTIME_EP_MLX_TF32", "").strip().lower() in (
        "1", "true", "yes", "on")


TF32_TOL = 5e-3  # relative, and of the gradients' magnitude: TF32-level products
FUSED_FP32_TOL = 3e-5  # the same for the fused kernels' 3xTF32 products (fp32 level)


def close(got, want, what, mag, fused=True):
    """The fused kernels' result (fused) against float64 or ORT CPU: FUSED_FP32_TOL, or TF32_TOL
    in the tf32 mode; other paths (the blocked MLX-op fallback) keep assert_close's 1e-4."""
    if not tf32_mode() and not fused:
        assert_close(got, want, what, mag)
        return
    tol = TF32_TOL if tf32_mode() else FUSED_FP32_TOL
    assert got.shape == want.shape and np.isfinite(got).all(), what
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(mag, 1e-3), err_msg=what)


def close_non_finite(got, want, what, mag):
    if not tf32_mode():
        _same_non_finite(got, want, what, mag)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN")
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want), err_msg=f"{what}: Inf")
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)], err_msg=what)
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=TF32_TOL,
                               atol=TF32_TOL * max(mag, 1e-3), err_msg=what)


def use_cuda_fused(monkeypatch, limit="0", tiled="kernel"):
    """Beyond the dense limit with the backend's fused kernel (the CUDA kernels on CUDA); tiled
    None leaves attention_vjp_tiled at its default (auto)."""
    monkeypatch.delenv(NATIVE_ENV, raising=False)
    if tiled is None:
        monkeypatch.delenv(TILED_ENV, raising=False)
    else:
        monkeypatch.setenv(TILED_ENV, tiled)
    monkeypatch.setenv(LIMIT_ENV, limit)


C = Case
# (rank, b, sq, sk, hq, hk, d, ...): sizes cross the kernels' tiles (32 or 64 rows) and cover
# every head-size bucket (d <= 32, 64, 128, 256).
CUDA_CASES = [
    C(4, 2, 16, 16, 4, 4, 16),
    C(3, 2, 70, 70, 2, 2, 32, causal=1),
    C(4, 2, 12, 20, 4, 2, 32, causal=1, mask=1, mask_shape=(2, 1, 12, 20), full_rows=True),
    C(3, 1, 20, 12, 4, 1, 8, causal=1, mask=2, mask_shape=(20, 12), full_rows=True),
    C(3, 2, 16, 16, 2, 2, 64, mask=1, mask_shape=(16,), outputs=(0,)),
    C(4, 2, 16, 24, 4, 2, 24, mask=1, mask_shape=(1, 1, 1, 30), outputs=(1,)),
    C(4, 2, 16, 24, 4, 2, 24, causal=1, mask=2, mask_shape=(2, 4, 16, 10), outputs=(2,)),
    C(3, 2, 9, 33, 4, 2, 40, mask=2, mask_shape=(4, 1, 7), outputs=(0, 1)),
    C(4, 3, 17, 17, 6, 3, 16, causal=1, outputs=(1, 2)),
    C(3, 1, 32, 32, 8, 2, 8, causal=1, mask=1, mask_shape=(1, 32, 1), outputs=(0, 2)),
    C(4, 2, 8, 40, 2, 1, 16, mask=1, mask_shape=(8, 1), outputs=(0, 2)),
    C(4, 1, 130, 97, 2, 2, 64, causal=1, mask=2, mask_shape=(1, 130, 97)),
    C(3, 2, 16, 16, 4, 2, 16, mask=1, mask_shape=(16, 16), consistent_y=False),
    C(4, 1, 100, 150, 4, 2, 96, causal=1, mask=1, mask_shape=(100, 140), full_rows=True),
    C(3, 1, 65, 66, 2, 1, 128, causal=1),
    C(4, 1, 40, 70, 2, 2, 200, mask=2, mask_shape=(2, 40, 1)),
    C(3, 1, 33, 65, 4, 4, 256, causal=1, mask=1, mask_shape=(1, 1, 33, 65)),
    # Long reductions: dQ sums over 2048 keys, dK/dV over 2048 query rows of 2 heads.
    C(4, 1, 2048, 2048, 2, 1, 64),
    # Recompute form (d >= 32).
    C(4, 2, 16, 16, 4, 2, 32, causal=1, mask=1, full_rows=True, recompute=True),
    C(3, 2, 12, 20, 4, 1, 32, mask=2, mask_shape=(12, 20), recompute=True),
    C(3, 1, 20, 12, 2, 2, 64, causal=1, outputs=(0, 2), recompute=True),
    C(4, 2, 24, 16, 4, 4, 48, causal=1, mask=2, mask_shape=(1, 1, 24, 16), outputs=(1,),
      recompute=True),
    C(3, 1, 16, 24, 4, 1, 64, mask=2, mask_shape=(16, 8), outputs=(1, 2), recompute=True),
    C(4, 2, 16, 16, 2, 1, 32, mask=1, mask_shape=(1,), outputs=(0,), recompute=True),
    C(4, 1, 90, 140, 4, 2, 128, causal=1, mask=1, mask_shape=(1, 4, 90, 140), full_rows=True,
      recompute=True),
    C(3, 1, 70, 50, 2, 1, 256, causal=1, mask=2, mask_shape=(70, 60), recompute=True),
]
CUDA_CASES = [dataclasses.replace(c, path="tiled") for c in CUDA_CASES]


def test_cuda_fused_cases_cover_every_variant():
    _assert_every_variant(CUDA_CASES + [C(4, 0, 8, 8, 4, 2, 16), C(3, 2, 0, 8, 4, 2, 16),
                                        C(4, 2, 8, 0, 4, 2, 16)])
    assert {32 if c.d <= 32 else 64 if c.d <= 64 else 128 if c.d <= 128 else 256
            for c in CUDA_CASES} == {32, 64, 128, 256}


def _check(case, rng, monkeypatch, label=CUDA_FUSED_LABEL):
    model = case.model()
    feeds = _feeds(case, model, rng)
    got, report = run_on_ep(model, feeds)
    paths = report.paths()
    assert label in paths, f"expected path {label!r}, report has {sorted(paths)}"
    assert not (FUSED_LABELS - {label}) & set(paths), sorted(paths)
    want = attention_vjp_reference_for(model, feeds)
    mag = gradient_magnitude(model, feeds)
    body = run_cpu(model, feeds)
    assert len(got) == len(case.outputs)
    for o, g, w, c in zip(case.outputs, got, want, body):
        fused = label == CUDA_FUSED_LABEL
        close(g, w, f"d{'QKV'[o]} vs float64", mag, fused)
        close(g, c.astype(np.float64), f"d{'QKV'[o]} vs ORT CPU body", mag, fused)


@pytest.mark.parametrize("case", CUDA_CASES, ids=lambda c: "cuda_fused_" + c.id)
def test_cuda_fused_matches_reference_and_cpu(case, rng, monkeypatch, cuda_backend):
    use_cuda_fused(monkeypatch)
    _check(case, rng, monkeypatch)


# dQ with dK or dV, head sizes up to 128: the one-pass dkvq kernel by default (dQ by atomics).
ONE_PASS_CASES = [c for c in CUDA_CASES if 0 in c.outputs and len(c.outputs) > 1 and c.d <= 128]


@pytest.mark.parametrize("case", ONE_PASS_CASES, ids=lambda c: "cuda_fused_dq_pass_" + c.id)
def test_cuda_fused_separate_dq_pass_is_selectable(case, rng, monkeypatch, cuda_backend):
    """ONNXRUNTIME_EP_MLX_ATTENTION_VJP_ONE_PASS=0: dQ from its own pass (sums in a fixed order)
    instead of the dK/dV kernel's atomics; same results at the same tolerance."""
    use_cuda_fused(monkeypatch)
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_ATTENTION_VJP_ONE_PASS", "0")
    _check(case, rng, monkeypatch)


# The tf32 mode's dK/dV pass at head sizes 33 to 128: on warpgroup MMAs by default
# (ONNXRUNTIME_EP_MLX_ATTENTION_VJP_WGMMA=0: the mma.sync warp-row kernels), with dQ in the pass
# (one pass) or from its own (separate).
WGMMA_CASES = [c for c in CUDA_CASES if 32 < c.d <= 128 and (1 in c.outputs or 2 in c.outputs)]


@pytest.mark.parametrize("one_pass", ["1", "0"], ids=["one_pass", "dq_pass"])
@pytest.mark.parametrize("wgmma", ["1", "0"], ids=["wgmma", "mma_sync"])
@pytest.mark.parametrize("case", WGMMA_CASES, ids=lambda c: "cuda_fused_tf32_dkv_" + c.id)
def test_cuda_fused_tf32_dkv_kernels_match_reference(case, wgmma, one_pass, rng, monkeypatch,
                                                     cuda_backend):
    if not tf32_mode():
        pytest.skip("the wgmma pass runs the tf32 mode's products (ONNXRUNTIME_EP_MLX_TF32=1)")
    use_cuda_fused(monkeypatch)
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_ATTENTION_VJP_WGMMA", wgmma)
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_ATTENTION_VJP_ONE_PASS", one_pass)
    _check(case, rng, monkeypatch)


@pytest.mark.parametrize("tiled", [None, "auto"], ids=["unset", "auto"])
@pytest.mark.parametrize("case", CUDA_CASES[:4] + CUDA_CASES[-3:],
                         ids=lambda c: "cuda_fused_default_" + c.id)
def test_cuda_fused_is_the_default_beyond_the_limit(case, tiled, rng, monkeypatch, cuda_backend):
    """attention_vjp_tiled=auto (the default) runs the fused kernels beyond the dense limit on
    the CUDA backend with an sm_90 GPU: faster than the blocked MLX-op path on an H100
    (bench/results/gpu_attention_vjp.md); other GPUs keep blocked."""
    use_cuda_fused(monkeypatch, tiled=tiled)
    _check(case, rng, monkeypatch, label=CUDA_FUSED_LABEL if cuda_sm90() else BLOCKED_LABEL)


@pytest.mark.parametrize("case", CUDA_CASES[:3] + CUDA_CASES[-2:],
                         ids=lambda c: "cuda_fused_fallback_blocked_" + c.id)
def test_cuda_fused_fallback_blocked_is_selectable(case, rng, monkeypatch, cuda_backend):
    """The MLX-op fallback stays selectable on the CUDA backend (attention_vjp_tiled=blocked)."""
    use_cuda_fused(monkeypatch, tiled="blocked")
    _check(case, rng, monkeypatch, label=BLOCKED_LABEL)


@pytest.mark.parametrize("shape", [(0, 8, 8), (2, 0, 8), (2, 8, 0)],
                         ids=lambda s: "cuda_fused_empty_b%d_s%dx%d" % s)
def test_cuda_fused_empty_dims_give_zeros(shape, rng, monkeypatch, cuda_backend):
    use_cuda_fused(monkeypatch)
    b, sq, sk = shape
    model = attention_vjp_model(b, sq, sk, 4, 2, 32, rank=3, causal=1, mask_kind=1,
                                mask_shape=(1, 1), recompute=True)
    feeds = attention_vjp_feeds(model, rng)
    got, _ = run_on_ep(model, feeds)
    for g, name in zip(got, "QKV"):
        assert g.shape == feeds[name].shape and not np.any(g)


@pytest.mark.parametrize("native,tiled,label", [
    (None, None, NATIVE_LABEL),
    (None, "kernel", NATIVE_LABEL),
    ("0", None, CUDA_FUSED_LABEL),
    ("0", "kernel", CUDA_FUSED_LABEL),
    ("0", "blocked", BLOCKED_LABEL),
], ids=["cuda_fused_recompute_default_native", "cuda_fused_recompute_kernel_native_auto",
        "cuda_fused_recompute_native_off_auto", "cuda_fused_recompute_native_off_kernel",
        "cuda_fused_recompute_native_off_blocked"])
def test_cuda_fused_recompute_without_limit_beyond_the_default_budget(native, tiled, label, rng,
                                                                      monkeypatch, cuda_backend):
    """The Recompute form without a limit beyond the default 64 MiB budget: attention_vjp_native
    auto keeps native (dense MLX ops on GPU backends) on the CUDA backend; native off follows the
    plain form's choice by the default budget: the fused kernels (O(S) memory) by default and
    with attention_vjp_tiled=kernel, blocked MLX ops with attention_vjp_tiled=blocked."""
    for env, value in ((NATIVE_ENV, native), (TILED_ENV, tiled)):
        if value is None:
            monkeypatch.delenv(env, raising=False)
        else:
            monkeypatch.setenv(env, value)
    monkeypatch.delenv(LIMIT_ENV, raising=False)
    # 4 * B * HQ * Sq * Sk = 4 * 1 * 8 * 1600 * 1600 = 82 MB > 64 MiB.
    case = C(4, 1, 1600, 1600, 8, 2, 32, causal=1, recompute=True, path="auto")
    _check(case, rng, monkeypatch, label=label)


# Non-finite inputs: causal and narrow masks, so the kernels have tiles no row can see; the value
# sits at the last key (hidden from early rows) or the first query row.
NONFINITE = [
    (4, False, 1, 2, (1, 66)),
    (3, False, 1, 1, (70, 80)),
    (4, True, 1, 0, None),
    (3, True, 1, 2, (2, 1, 70, 60)),
]


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("which", ["Q", "K", "V", "Y", "dY", "Mask"])
@pytest.mark.parametrize("variant", NONFINITE, ids=lambda v: f"cuda_fused_r{v[0]}_"
                         f"{'rec' if v[1] else 'plain'}_c{v[2]}_m{v[3]}")
def test_cuda_fused_non_finite_inputs_follow_the_reference(variant, which, value, rng,
                                                           monkeypatch, cuda_backend):
    rank, recompute, causal, kind, mshape = variant
    if (which == "Y" and recompute) or (which == "Mask" and kind != 2):
        pytest.skip("no such input")
    use_cuda_fused(monkeypatch)
    model = attention_vjp_model(2, 70, 80, 4, 2, 32, rank=rank, causal=causal, mask_kind=kind,
                                mask_shape=mshape, recompute=recompute)
    feeds = attention_vjp_feeds(model, rng)
    x = feeds[which]
    if which in ("K", "V"):
        idx = (1, 79, 3) if rank == 3 else (1, 1, 79, 3)
    elif which == "Mask":
        idx = (0,) * (x.ndim - 1) + (x.shape[-1] - 1,)
    else:
        idx = (0, 0, 5) if rank == 3 else (0, 2, 0, 5)
    x[idx] = value
    got, report = run_on_ep(model, feeds)
    assert CUDA_FUSED_LABEL in report.paths(), sorted(report.paths())
    with np.errstate(all="ignore"):
        want = attention_vjp_reference_for(model, feeds)
        grads = attention_vjp_reference_for(model, feeds, outputs=(0, 1, 2))
    mag = max([float(np.abs(g[np.isfinite(g)]).max()) for g in grads if np.isfinite(g).any()]
              or [0.0])
    for o, g, w in zip(parse_attention_vjp_name(contract_op(model)).outputs, got, want):
        close_non_finite(g, w, f"d{'QKV'[o]}", mag)


# float16/bfloat16 contracts: the kernels' mode for inputs that are TF32 values skips the
# products of their (zero) lo parts. Same sums as the plain 3xTF32 mode, so the same bits; dQ
# from its own pass (the one-pass kernel's atomics add in no fixed order). Every head-size
# bucket, both forms, GQA, masks, causal.
HALF_MODE_CASES = [
    C(4, 2, 70, 70, 2, 2, 32, causal=1, outputs=(0, 1, 2)),
    C(3, 2, 33, 80, 4, 2, 64, causal=1, mask=1, mask_shape=(2, 1, 33, 80), full_rows=True),
    C(4, 1, 100, 150, 4, 2, 128, causal=1, mask=2, mask_shape=(100, 140), full_rows=True),
    C(4, 1, 90, 140, 4, 2, 128, causal=1, mask=1, mask_shape=(1, 4, 90, 140), recompute=True),
    C(3, 1, 40, 70, 2, 2, 200, mask=2, mask_shape=(2, 40, 1)),
]


@pytest.mark.parametrize("type_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", HALF_MODE_CASES, ids=lambda c: "cuda_fused_half_mode_" + c.id)
def test_cuda_fused_half_inputs_mode_gives_the_exact_modes_bits(case, type_name, rng,
                                                                monkeypatch, cuda_backend):
    if tf32_mode():
        pytest.skip("the tf32 mode has no lo terms to skip")
    np_type, onnx_type, unit = HALF_TYPES[type_name]
    use_cuda_fused(monkeypatch)
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_ATTENTION_VJP_ONE_PASS", "0")
    model = case.model(dtype=np_type)
    feeds, boundary = rounded_feeds(_feeds(case, model, rng), np_type)
    wrapped = float32_boundary(model, onnx_type)
    runs = {}
    for flag in ("1", "0"):  # the knob is read when a session translates the node
        monkeypatch.setenv("ONNXRUNTIME_EP_MLX_ATTENTION_VJP_TF32_INPUTS", flag)
        got, report = run_on_ep(wrapped, boundary)
        assert CUDA_FUSED_LABEL in report.paths(), sorted(report.paths())
        runs[flag] = got
    for o, fast, plain in zip(case.outputs, runs["1"], runs["0"]):
        np.testing.assert_array_equal(fast, plain, err_msg=f"d{'QKV'[o]} {type_name}")
    want = attention_vjp_reference_for(model, feeds)
    mag = gradient_magnitude(model, feeds)
    for o, g, w in zip(case.outputs, runs["1"], want):
        np.testing.assert_allclose(g, w, rtol=2 * unit, atol=1e-4 * max(mag, 1e-3),
                                   err_msg=f"d{'QKV'[o]} {type_name} vs float64")
