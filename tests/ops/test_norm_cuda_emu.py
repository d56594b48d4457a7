"""The one-kernel LayerNorm (src/ortmlx/ops/norm/cuda/kernels.cu) without a GPU: compiled for the
host emulation of tools/avjp_cuda_emu (emu.h) and compared with float64. The residual sum it
writes is the graph's float32 arithmetic, (m + bias) + r, bit for bit; y is LayerNorm of that sum
within float32 roundoff, rows far from zero included (the pivot shift), widths below, at and
beyond one warp and one block, NaN and Inf rows as the fast path gives them. Needs g++ (C++20);
runs on any flavour."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from cuda_emu import build_or_skip

RESIDUAL, BIAS, GAMMA, BETA, WRITE_SUM = 1, 2, 4, 8, 16


@pytest.fixture(scope="module")
def emu():
    return build_or_skip("layer_norm_emu", "layer_norm_harness.cpp", "norm/cuda/kernels.cu",
                         "layer_norm_emu")


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def run(emu, m, r=None, bias=None, gamma=None, beta=None, eps=1e-5):
    rows, cols = m.shape
    flags = ((RESIDUAL | WRITE_SUM) if r is not None else 0) | (BIAS if bias is not None else 0) \
        | (GAMMA if gamma is not None else 0) | (BETA if beta is not None else 0)
    y = np.full_like(m, np.nan)
    s = np.full_like(m, np.nan)
    stand_in = m  # absent operands: never read (the flags say so), as layer_norm.cpp passes them
    emu.layer_norm_emu(ptr(m), ptr(r if r is not None else stand_in),
                       ptr(bias if bias is not None else stand_in),
                       ptr(gamma if gamma is not None else stand_in),
                       ptr(beta if beta is not None else stand_in), ptr(y), ptr(s), rows, cols,
                       flags, ctypes.c_float(eps))
    return y, s


def graph_sum(m, r, bias):
    x = m if bias is None else (m + bias).astype(np.float32)
    return x if r is None else (x + r).astype(np.float32)


def reference(x, gamma, beta, eps):
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(-1, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y


@pytest.mark.parametrize("cols", [1, 5, 32, 33, 100, 256, 300, 768])
@pytest.mark.parametrize("parts", ["plain", "residual", "residual+bias"])
def test_layer_norm_kernel(cols, parts, emu, rng):
    rows = 3
    m = rng.standard_normal((rows, cols)).astype(np.float32)
    r = rng.standard_normal((rows, cols)).astype(np.float32) if parts != "plain" else None
    bias = rng.standard_normal(cols).astype(np.float32) if parts == "residual+bias" else None
    gamma = rng.uniform(0.5, 1.5, cols).astype(np.float32)
    beta = rng.standard_normal(cols).astype(np.float32)
    y, s = run(emu, m, r, bias, gamma, beta)
    x = graph_sum(m, r, bias)
    if r is not None:
        np.testing.assert_array_equal(s, x)  # the graph's float32 sum, exactly
    else:
        assert np.isnan(s).all()  # nothing written without a residual
    np.testing.assert_allclose(y, reference(x, gamma, beta, 1e-5), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("affine", ["none", "gamma", "beta"])
def test_optional_scale_and_shift(affine, emu, rng):
    m = rng.standard_normal((2, 70)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, 70).astype(np.float32) if affine == "gamma" else None
    beta = rng.standard_normal(70).astype(np.float32) if affine == "beta" else None
    y, _ = run(emu, m, gamma=gamma, beta=beta, eps=1e-3)
    np.testing.assert_allclose(y, reference(m, gamma, beta, 1e-3), rtol=2e-5, atol=2e-5)


def test_rows_far_from_zero_keep_their_spread(emu, rng):
    """Rows near 1000 with spread 0.1: the pivot shift keeps the float32 statistics exact enough
    (unshifted, float32 sums lose about 1e-2 of the normalised values)."""
    m = (1000 + 0.1 * rng.standard_normal((4, 768))).astype(np.float32)
    r = (0.01 * rng.standard_normal((4, 768))).astype(np.float32)
    y, s = run(emu, m, r)
    np.testing.assert_allclose(y, reference(graph_sum(m, r, None), None, None, 1e-5), atol=1e-4)


def test_non_finite_rows(emu, rng):
    """A NaN anywhere or an Inf pivot makes the row NaN (as the shifted fast path and ORT give
    it); the other rows are untouched."""
    m = rng.standard_normal((3, 40)).astype(np.float32)
    m[0, 7] = np.nan
    m[1, 0] = np.inf
    y, _ = run(emu, m)
    assert np.isnan(y[0]).all() and np.isnan(y[1]).all()
    np.testing.assert_allclose(y[2], reference(m[2:], None, None, 1e-5)[0], rtol=2e-5, atol=2e-5)


# ---------------------------------------------------------------- the one-kernel Softmax

SCALE, DIVIDES, MASK = 1, 2, 4


@pytest.fixture(scope="module")
def softmax_emu():
    return build_or_skip("softmax_emu", "softmax_harness.cpp", "norm/cuda/kernels.cu",
                         "softmax_emu")


def mask_index(mask_shape, shape):
    """The kernel's mask indexing as softmax.cpp derives it: T's leading dims merged into at most
    three (size, stride) groups, and the stride along the row."""
    nd, pad = len(shape), len(shape) - len(mask_shape)
    stride, run_ = [0] * nd, 1
    for d in range(nd - 1, pad - 1, -1):
        if mask_shape[d - pad] != 1:
            stride[d] = run_
        run_ *= mask_shape[d - pad]
    groups = []
    for d in range(nd - 1):
        if shape[d] == 1:
            continue
        if groups and groups[-1][1] == stride[d] * shape[d]:
            groups[-1] = (groups[-1][0] * shape[d], stride[d])
        else:
            groups.append((shape[d], stride[d]))
    assert len(groups) <= 3
    groups = [(1, 0)] * (3 - len(groups)) + groups
    return groups[1][0], groups[2][0], groups[0][1], groups[1][1], groups[2][1], stride[-1]


def per_lane(cols):
    """The kernel softmax.cpp launches for rows of `cols`: the warp kernel holding 4, 8, 16 or 32
    columns a lane, or 0, the block-per-row kernel (rows over 1024)."""
    return next((n for n in (4, 8, 16, 32) if cols <= 32 * n), 0)


def run_softmax(emu, x, scale=None, divides=False, mask=None, kernel=None):
    cols = x.shape[-1]
    rows = x.size // cols
    flags = (SCALE if scale is not None else 0) | (DIVIDES if divides else 0) \
        | (MASK if mask is not None else 0)
    idx = mask_index(mask.shape, x.shape) if mask is not None else (1, 1, 0, 0, 0, 0)
    m = np.ascontiguousarray(mask) if mask is not None else x
    y = np.full_like(x, np.nan)
    emu.softmax_emu(ptr(x), ptr(m), ptr(y), rows, cols, flags, *idx,
                    ctypes.c_float(scale if scale is not None else 1.0),
                    per_lane(cols) if kernel is None else kernel)
    return y


def graph_scores(x, scale, divides, mask):
    """The graph's float32 arithmetic before the Softmax."""
    t = x
    if scale is not None:
        c = np.float32(scale)
        t = (t / c if divides else t * c).astype(np.float32)
    if mask is not None:
        t = (t + mask).astype(np.float32)
    return t


def softmax64(t):
    t64 = t.astype(np.float64)
    e = np.exp(t64 - t64.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("cols", [1, 5, 32, 33, 100, 128, 129, 256, 300, 512, 1000, 1024, 1025,
                                  1500])
@pytest.mark.parametrize("form", ["plain", "scale", "divide", "scale+mask"])
def test_softmax_kernel(cols, form, softmax_emu, rng):
    """Each width takes the kernel softmax.cpp picks (the warp kernels up to 1024 columns, a block
    a row beyond); 2 x 3 rows: a partial block of warp rows."""
    x = (3 * rng.standard_normal((2, 3, cols))).astype(np.float32)
    scale = {"plain": None, "scale": 0.125, "divide": 8.0, "scale+mask": 0.35}[form]
    mask = (rng.standard_normal((2, 1, cols)).astype(np.float32) if form == "scale+mask"
            else None)
    y = run_softmax(softmax_emu, x, scale, form == "divide", mask)
    want = softmax64(graph_scores(x, scale, form == "divide", mask))
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("mask_shape", [(2, 1, 1, 48), (1, 1, 5, 48), (5, 48), (48,),
                                        (2, 3, 5, 48), (2, 3, 1, 48), (1, 3, 5, 1)], ids=str)
def test_softmax_mask_broadcasts(mask_shape, softmax_emu, rng):
    """Attention masks over (batch, heads, queries, keys): padding, causal, per head, full, and a
    column broadcast along the row."""
    x = rng.standard_normal((2, 3, 5, 48)).astype(np.float32)
    mask = rng.standard_normal(mask_shape).astype(np.float32)
    y = run_softmax(softmax_emu, x, 0.125, False, mask)
    want = softmax64(graph_scores(x, 0.125, False, np.broadcast_to(mask, x.shape)))
    np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-7)


def test_softmax_masked_and_non_finite_rows(softmax_emu, rng):
    """-inf mask entries give exact zeros; a fully masked row, a NaN or a +inf score make the row
    NaN (as ORT's kernel: exp(-inf - -inf), NaN in the sum); other rows are untouched."""
    x = rng.standard_normal((4, 40)).astype(np.float32)
    mask = np.zeros((4, 40), np.float32)
    mask[0, 10:] = -np.inf
    mask[1, :] = -np.inf
    x[2, 3] = np.nan
    x[3, 5] = np.inf
    y = run_softmax(softmax_emu, x, None, False, mask)
    np.testing.assert_array_equal(y[0, 10:], 0)
    np.testing.assert_allclose(y[0, :10], softmax64(x[:1, :10])[0], rtol=2e-6, atol=1e-7)
    assert np.isnan(y[1]).all() and np.isnan(y[2]).all() and np.isnan(y[3]).all()


@pytest.mark.parametrize("kernel", [0, 4, 8, 16, 32])
def test_softmax_kernels_agree_across_row_counts(kernel, softmax_emu, rng):
    """Every kernel on the same rows (each wide enough for it), row counts around a block of 8;
    scores near 200, where exp overflows unless the row maximum is taken out first."""
    for rows in (1, 7, 8, 9, 17):
        x = (200 + rng.standard_normal((rows, 100))).astype(np.float32)
        mask = rng.standard_normal((1, 100)).astype(np.float32)
        y = run_softmax(softmax_emu, x, 0.5, False, mask, kernel=kernel)
        np.testing.assert_allclose(y, softmax64(graph_scores(x, 0.5, False, mask)), rtol=2e-6,
                                   atol=1e-7)
