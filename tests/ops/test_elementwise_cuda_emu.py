"""The one-pass GELU kernel (src/ortmlx/ops/elementwise/cuda/kernels.cu) without a GPU: compiled
for the host emulation of tools/avjp_cuda_emu (emu.h) and compared with float64, with the
projection's bias folded in (x = m + bias[i % cols], the graph's float32 sum) and without, both
forms, vector and scalar paths (unaligned pointers, a tail of 1-3 elements), a grid smaller than
the tensor (the grid-stride loop). Needs g++ (C++20); runs on any flavour."""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest

from cuda_emu import build_or_skip

SQRT1_2 = 1 / math.sqrt(2)
K = math.sqrt(2 / math.pi)


@pytest.fixture(scope="module")
def emu():
    lib = build_or_skip("gelu_emu", "gelu_harness.cpp", "elementwise/cuda/kernels.cu", "gelu_emu")
    lib.gelu_emu.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 5 + [ctypes.c_float] * 4 + \
        [ctypes.c_int]
    return lib


def gelu64(x, tanh_form):
    x = x.astype(np.float64)
    if tanh_form:
        return 0.5 * x * (1 + np.tanh(K * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + np.vectorize(math.erf)(x * SQRT1_2))


def run(emu, m, bias, tanh_form, threads=0, offset=0):
    """offset: elements into over-allocated buffers, so the pointers are not 16-byte aligned."""
    n = m.size
    mb = np.zeros(n + offset, np.float32)
    mb[offset:] = m.ravel()
    yb = np.full(n + offset, np.nan, np.float32)
    b = bias if bias is not None else mb
    emu.gelu_emu(mb[offset:].ctypes.data, b.ctypes.data, yb[offset:].ctypes.data, n,
                 bias.size if bias is not None else 0, int(tanh_form), 0, 1, SQRT1_2, 0.044715,
                 K, 0.5, threads)
    return yb[offset:].reshape(m.shape)


@pytest.mark.parametrize("tanh_form", [False, True])
@pytest.mark.parametrize("shape", [(4, 48), (3, 5, 7), (1, 1), (2, 1027)], ids=str)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("offset", [0, 1])
def test_gelu_kernel(tanh_form, shape, with_bias, offset, emu, rng):
    m = (2 * rng.standard_normal(shape)).astype(np.float32)
    bias = rng.standard_normal(shape[-1]).astype(np.float32) if with_bias else None
    y = run(emu, m, bias, tanh_form, offset=offset)
    x = (m + bias).astype(np.float32) if with_bias else m
    np.testing.assert_allclose(y, gelu64(x, tanh_form), rtol=2e-6, atol=2e-7)


def test_grid_stride_with_bias(emu, rng):
    """A grid of 256 threads over 5,000 elements: every element and its bias column once."""
    m = rng.standard_normal((40, 125)).astype(np.float32)
    bias = rng.standard_normal(125).astype(np.float32)
    y = run(emu, m, bias, False, threads=256)
    np.testing.assert_allclose(y, gelu64((m + bias).astype(np.float32), False), rtol=2e-6,
                               atol=2e-7)
