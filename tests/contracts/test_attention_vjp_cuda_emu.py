"""The fused CUDA AttentionVJP kernels (src/ortmlx/ops/attention_vjp/cuda/kernels.cu) without a
GPU: compiled for the host emulation of tools/avjp_cuda_emu (emu.h: a std::thread per CUDA
thread, warp shuffles, cvt.rna.tf32 and mma.sync with the tensor cores' truncating accumulation)
and compared with the float64 reference. A subset of `check.py --quick` (the full check runs
every variant, for minutes), and a long reduction whose error must stay at the level of fp32
sums: the accumulation each mma.sync rounds toward zero must not drift with the sequence length.
Needs g++ (C++20); runs on any flavour.
"""

from __future__ import annotations

import os
import shutil
import sys

import ml_dtypes
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "avjp_cuda_emu"))
import check  # noqa: E402  (tools/avjp_cuda_emu/check.py)


@pytest.fixture(scope="module")
def emu():
    if shutil.which("g++") is None:
        pytest.skip("the CUDA kernel emulation needs g++")
    lib = check.build()
    check.set_model(lib, "trunc")
    return lib


# check.py's quick cases: head-size buckets 32 and 64, both ranks, GQA, causal, a boolean mask
# with fully masked rows, both forms.
QUICK = [
    dict(b=1, sq=70, sk=70, hq=2, hk=2, d=16, rank=4, causal=0, kind=0, mshape=None,
         recompute=False),
    dict(b=1, sq=70, sk=45, hq=2, hk=1, d=40, rank=3, causal=1, kind=0, mshape=None,
         recompute=True),
    dict(b=2, sq=33, sk=80, hq=4, hk=2, d=64, rank=4, causal=1, kind=1, mshape=(2, 1, 33, 80),
         recompute=False, full_rows=True),
]


@pytest.mark.parametrize("one_pass", [False, True], ids=["dq_pass", "one_pass"])
@pytest.mark.parametrize("tf32", [False, True], ids=["3xtf32", "tf32"])
@pytest.mark.parametrize("case", QUICK, ids=["d16_r4", "d40_r3_causal_gqa_rec", "d64_mask"])
def test_cuda_emu_matches_reference(emu, case, tf32, one_pass):
    """one_pass: dQ added by the dK/dV kernel (dkvq, atomics) instead of its own pass."""
    check.case(emu, np.random.default_rng(20261204), **case, tf32=tf32, one_pass=one_pass)


@pytest.mark.parametrize("recompute", [False, True], ids=["plain", "recompute"])
@pytest.mark.parametrize("one_pass", [False, True], ids=["dq_pass", "one_pass"])
@pytest.mark.parametrize("tf32", [False, True], ids=["3xtf32", "tf32"])
def test_cuda_emu_head_size_128_bucket(emu, tf32, one_pass, recompute):
    """The bucket of head sizes 65-128 (warp rows), whose dK/dV steps take 16 query rows in
    3xTF32 and 32 in the TF32 mode (no lo planes): several steps and a partial last one, causal,
    GQA and an additive mask."""
    check.case(emu, np.random.default_rng(20261207), b=1, sq=70, sk=50, hq=4, hk=2, d=128, rank=4,
               causal=1, kind=2, mshape=(1, 4, 1, 60), recompute=recompute, tf32=tf32,
               one_pass=one_pass)


@pytest.mark.parametrize("half", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("case", [QUICK[2], dict(b=1, sq=70, sk=50, hq=4, hk=2, d=128, rank=4,
                                                 causal=1, kind=2, mshape=(1, 4, 1, 60),
                                                 recompute=True)], ids=["d64_mask", "d128_rec"])
def test_cuda_emu_half_inputs_mode_gives_the_exact_modes_bits(emu, case, half):
    """float16/bfloat16 contracts (inputs that are TF32 values): the mode that skips the products
    of their zero lo parts, and at D 128 takes dkv's TF32 layout, returns bit for bit what the
    3xTF32 mode returns on the same inputs (check.case compares them; dQ from its own pass)."""
    check.case(emu, np.random.default_rng(20261208), **case, half=half)


@pytest.mark.parametrize("d", [6, 130], ids=["d6", "d130"])
def test_cuda_emu_head_size_not_a_multiple_of_4(emu, d):
    """The kernels on their own, below the contract (whose d is a multiple of 8): rank 3 with a row
    stride (heads x d) that is a multiple of 4 floats and d that is not. The 128-bit tile loads
    must not read past a row into the next head's columns (they did at d = 130: wrong dQ)."""
    check.case(emu, np.random.default_rng(20261206), b=1, sq=37, sk=41, hq=2, hk=2, d=d, rank=3,
               causal=0, kind=0, mshape=None, recompute=False, tf32=False)


@pytest.mark.parametrize("one_pass", [False, True], ids=["dq_pass", "one_pass"])
@pytest.mark.parametrize("poison", [("K", np.nan), ("V", np.inf), ("Mask", -np.inf)],
                         ids=["K_nan", "V_inf", "Mask_-inf"])
def test_cuda_emu_non_finite_inputs(emu, poison, one_pass):
    base = dict(b=1, sq=40, sk=70, hq=2, hk=1, d=32, rank=4, causal=1, kind=2, mshape=(40, 66))
    check.case(emu, np.random.default_rng(20261205), **base, recompute=False, poison=poison,
               one_pass=one_pass)


@pytest.mark.parametrize("one_pass", [False, True], ids=["dq_pass", "one_pass"])
def test_cuda_emu_long_reduction_stays_at_fp32_level(emu, one_pass):
    """S = 256 keys and query rows, one head: under the truncating model, accumulating the whole
    reduction inside the tensor cores (the kernels before they added each k-step's products to
    the accumulator with an ordinary fp32 add) is about 10x off fp32 sums taken in sequence
    (4e-6 of the gradients' magnitude); the kernels must stay within 3x of them and 2e-6. The
    one-pass kernel's dQ sums each block's keys in the tensor cores and the blocks by atomics."""
    rng = np.random.default_rng(20261206)
    s, d = 256, 16
    q, k, v, dy = (rng.standard_normal((1, 1, s, d)).astype(np.float32).astype(np.float64)
                   for _ in range(4))
    scale = float(np.float32(1 / np.sqrt(d)))
    want = check.attention_vjp_reference(q, k, v, dy, np.ones(1, np.bool_), hq=1, hk=1,
                                         causal=0, mask_kind=0, scale=scale, rank=4)
    mag = max(float(np.abs(w).max()) for w in want)
    got = check.run_kernels(emu, q, k, v, None, dy, None, hq=1, hk=1, d=d, rank=4, causal=0,
                            kind=0, scale=scale, tf32=False, one_pass=one_pass)
    seq = check.sequential_fp32(q, k, v, dy, scale)
    for name, g, w, f in zip("QKV", got, want, seq):
        err = float(np.abs(g - w).max()) / mag
        fp32 = float(np.abs(f - w).max()) / mag
        assert err <= max(3 * fp32, 1e-7) and err <= 2e-6, (name, err, fp32)


# The tf32 mode's dK/dV pass on warpgroup MMAs (cuda/wg_dkv.cuh, head sizes 33-128; emu.h models
# wgmma from its fragments and shared-memory descriptors): both head-size buckets, both ranks, GQA,
# causal, boolean and additive masks with fully masked rows, both forms, dQ from the pass itself
# (atomics) or from the separate dq pass.
WGMMA = [QUICK[1], QUICK[2],
         dict(b=1, sq=70, sk=150, hq=4, hk=2, d=128, rank=4, causal=1, kind=2,
              mshape=(1, 4, 1, 160), recompute=False, full_rows=True)]


@pytest.mark.parametrize("one_pass", [False, True], ids=["dq_pass", "one_pass"])
@pytest.mark.parametrize("case", WGMMA, ids=["d40_r3_causal_gqa_rec", "d64_mask", "d128_add"])
def test_cuda_emu_wgmma_pass_matches_reference(emu, case, one_pass):
    check.case(emu, np.random.default_rng(20261209), **case, tf32=True, one_pass=one_pass,
               wgmma=True)


@pytest.mark.parametrize("poison", [("K", np.nan), ("V", np.inf), ("dY", -np.inf),
                                    ("Mask", -np.inf)], ids=["K_nan", "V_inf", "dY_-inf",
                                                             "Mask_-inf"])
def test_cuda_emu_wgmma_pass_non_finite_inputs(emu, poison):
    """Non-finite inputs reach the gradients through hidden pairs as in the reference (no tile
    is skipped; padding rows and keys give exact zeros)."""
    base = dict(b=1, sq=40, sk=70, hq=2, hk=1, d=64, rank=4, causal=1, kind=2, mshape=(40, 66))
    check.case(emu, np.random.default_rng(20261210), **base, recompute=False, poison=poison,
               tf32=True, one_pass=True, wgmma=True)


@pytest.mark.parametrize("one_pass", [False, True], ids=["dq_pass", "one_pass"])
def test_cuda_emu_wgmma_pass_head_size_not_a_multiple_of_4(emu, one_pass):
    """Below the contract (d a multiple of 8): d = 70 at rank 3 takes the pass's scalar tile
    loads and, for dQ, its scalar atomics."""
    check.case(emu, np.random.default_rng(20261211), b=1, sq=37, sk=140, hq=2, hk=1, d=70,
               rank=3, causal=0, kind=0, mshape=None, recompute=False, tf32=True,
               one_pass=one_pass, wgmma=True)


def _stats_reference(q, k, mask, *, hq, hk, rank, causal, kind, scale):
    """float64 log-sum-exp of each query row's visible scores, (b, hq, sq) flattened; NaN for a
    dead row (no visible finite score, or a visible NaN or +Inf one)."""
    def heads(x, h):
        return x.reshape(x.shape[0], x.shape[1], h, -1).transpose(0, 2, 1, 3) if rank == 3 else x
    q4, k4 = heads(q, hq), heads(k, hk)
    k4 = np.repeat(k4, hq // hk, axis=1)
    with np.errstate(all="ignore"):
        s = scale * np.einsum("bhid,bhjd->bhij", q4, k4)
    visible = np.ones(s.shape, bool)
    if causal:
        visible &= np.tril(np.ones(s.shape[-2:], bool))
    if kind == 1:
        visible &= np.broadcast_to(mask.reshape((1,) * (4 - mask.ndim) + mask.shape), s.shape)
    elif kind == 2:
        s = s + mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
    v = np.where(visible, s, -np.inf)
    bad = (visible & (np.isnan(s) | (s == np.inf))).any(-1)
    m = v.max(-1, keepdims=True)
    with np.errstate(all="ignore"):
        lse = (m + np.log(np.exp(v - m).sum(-1, keepdims=True)))[..., 0]
    lse[bad | ~np.isfinite(m[..., 0])] = np.nan
    return lse.reshape(-1)


# The tf32 mode's stats pass on warpgroup MMAs (cuda/wg_stats.cuh, plain form): its log-sum-exp
# and delta against the warp-row stats pass (mma.sync) on the same inputs and against float64:
# partial query and key tiles, key tiles no row of a thread is hidden from (no selects) and
# edge ones, both buckets, both ranks, GQA, causal with more queries than keys, boolean and
# additive masks with fully masked rows, non-finite inputs.
WG_STATS = {
    "d64_bool_causal_gqa": dict(b=2, sq=150, sk=200, hq=4, hk=2, d=64, rank=4, causal=1, kind=1,
                                mshape=(2, 1, 150, 200)),
    "d128_add_r3": dict(b=1, sq=70, sk=150, hq=2, hk=1, d=128, rank=3, causal=0, kind=2,
                        mshape=(1, 2, 70, 150)),
    "d40_causal": dict(b=1, sq=300, sk=280, hq=2, hk=2, d=40, rank=4, causal=1, kind=0,
                       mshape=None),
    "d40_causal_short_keys": dict(b=1, sq=130, sk=100, hq=2, hk=2, d=40, rank=4, causal=1,
                                  kind=0, mshape=None),
    "d96_nonfinite": dict(b=1, sq=60, sk=290, hq=4, hk=2, d=96, rank=4, causal=0, kind=0,
                          mshape=None, poison=True),
}


@pytest.mark.parametrize("tf32", [True, False], ids=["tf32", "3xtf32"])
@pytest.mark.parametrize("name", list(WG_STATS))
def test_cuda_emu_wgmma_stats_pass(emu, name, tf32):
    c = dict(WG_STATS[name])
    poison = c.pop("poison", False)
    rng = np.random.default_rng(20261212)
    b, sq, sk, hq, hk, d, rank = (c[x] for x in ("b", "sq", "sk", "hq", "hk", "d", "rank"))

    def shape(s, h):
        return (b, s, h * d) if rank == 3 else (b, h, s, d)
    q, y, dy = (rng.standard_normal(shape(sq, hq)) for _ in range(3))
    k, v = rng.standard_normal(shape(sk, hk)), rng.standard_normal(shape(sk, hk))
    mask = np.ones(1, np.bool_)
    if c["kind"] == 1:
        mask = rng.random(c["mshape"]) < 0.7
        mask[..., 0, :] = False  # a fully masked row
    elif c["kind"] == 2:
        mask = rng.uniform(-1, 1, c["mshape"])
        mask[rng.random(c["mshape"]) > 0.7] = -np.inf
        mask[..., 0, :] = -np.inf
    if poison:
        k[0, 0, sk - 1, 3] = np.nan  # every row of its group (query heads 0, 1) sees it: dead
        q[0, 2, 5, 0] = np.inf  # one dead row in head 2
    q, k, v, y, dy = (t.astype(np.float32).astype(np.float64) for t in (q, k, v, y, dy))
    scale = float(np.float32(1 / np.sqrt(d)))
    run = dict(hq=hq, hk=hk, d=d, rank=rank, causal=c["causal"], kind=c["kind"], scale=scale,
               tf32=tf32, one_pass=True, stats=True)
    *_, lse_wg, delta_wg = check.run_kernels(emu, q, k, v, y, dy, mask, **run, wgmma=True)
    *_, lse_wr, delta_wr = check.run_kernels(emu, q, k, v, y, dy, mask, **run, wgmma=False)
    want = _stats_reference(q, k, mask, hq=hq, hk=hk, rank=rank, causal=c["causal"],
                            kind=c["kind"], scale=scale)
    np.testing.assert_array_equal(np.isnan(lse_wg), np.isnan(want), err_msg="dead rows")
    np.testing.assert_array_equal(np.isnan(lse_wr), np.isnan(want), err_msg="dead rows (mma.sync)")
    assert np.isnan(want).any() or not (poison or c["kind"])
    assert not np.isnan(want).all()
    fin = ~np.isnan(want)
    # Same TF32 operands, sums in another order: the two passes agree far below TF32's error;
    # 3xTF32 (the fp32-accurate modes) at fp32's level.
    agree, ref = (1e-5, 5e-3) if tf32 else (2e-6, 2e-6)
    np.testing.assert_allclose(lse_wg[fin], lse_wr[fin], rtol=agree, atol=agree)
    np.testing.assert_allclose(lse_wg[fin], want[fin], rtol=ref, atol=ref)
    np.testing.assert_array_equal(delta_wg, delta_wr)  # the same sums in the same order


@pytest.mark.parametrize("one_pass", [False, True], ids=["dq_pass", "one_pass"])
@pytest.mark.parametrize("case", WGMMA, ids=["d40_r3_causal_gqa_rec", "d64_mask", "d128_add"])
def test_cuda_emu_wgmma_stats_fp32_accurate_mode(emu, case, one_pass):
    """The fp32-accurate mode with the stats pass on warpgroup MMAs (3xTF32: hi x hi and the
    cross terms in two chains) and the mma.sync dK/dV passes: gradients at fp32's level."""
    check.case(emu, np.random.default_rng(20261213), **case, tf32=False, one_pass=one_pass,
               wgmma=True)


@pytest.mark.parametrize("half", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_cuda_emu_wgmma_stats_tf32_inputs_mode_bits(emu, half):
    """Half inputs (TF32 values): the mode that skips their zero lo products gives the plain
    3xTF32 mode's bits with the stats pass on warpgroup MMAs too."""
    check.case(emu, np.random.default_rng(20261214), **WGMMA[2], tf32=False, one_pass=False,
               half=half, wgmma=True)


@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "unaligned"])
def test_cuda_emu_finite_flag_kernel(emu, offset):
    """The kernel behind every pass's `finite` flag: a NaN or an infinity anywhere in any input
    (the 16-byte loads, the scalar tail, a tensor that is not 16-byte aligned, the grid-stride
    loop's later rounds) clears it; finite inputs keep it; Y with n_y 0 is not read."""
    import ctypes
    n_q, n_k = 4 * 256 * 3 + 7, 1001  # more chunks than the 2 blocks' threads; odd tails
    rng = np.random.default_rng(7)
    base = [rng.standard_normal(n + 2).astype(np.float32) for n in (n_q, n_k, n_k, n_q, n_q)]

    def flag(arrays, n_y=n_q):
        out = np.zeros(1, np.float32)
        views = [a[offset:] for a in arrays]
        emu.avjp_emu_finite(2, *(check.ptr(a) for a in views), check.ptr(out), n_q, n_k, n_y)
        return float(out[0])
    emu.avjp_emu_finite.restype = None
    emu.avjp_emu_finite.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 6 + [ctypes.c_int] * 3
    assert flag(base) == 1.0
    for which, n in enumerate((n_q, n_k, n_k, n_q, n_q)):
        for pos, value in ((0, np.nan), (n // 2, np.inf), (n - 1, -np.inf), (4 * 256 * 2, np.nan)):
            if pos >= n:
                continue
            arrays = [a.copy() for a in base]
            arrays[which][offset + pos] = value
            assert flag(arrays) == 0.0, (which, pos, value)
    arrays = [a.copy() for a in base]
    arrays[3][offset] = np.nan
    assert flag(arrays, n_y=0) == 1.0  # the Recompute form's stand-in for Y is not read
    arrays[0][offset + n_q] = np.nan  # beyond the count: not read either
    assert flag(arrays, n_y=0) == 1.0
