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
