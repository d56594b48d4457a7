"""The NCHW -> NHWC kernels of convolution inputs (src/ortmlx/ops/conv/cuda/kernels.cu) without
a GPU: compiled for the host emulation of tools/avjp_cuda_emu (emu.h) and compared with numpy's
transpose, bit for bit. Both kernels (a thread per pixel up to 8 channels, 32 x 32 tiles above),
partial tiles, several batches, and a per-pixel grid smaller than the pixel count (the
grid-stride loop). Needs g++ (C++20); runs on any flavour."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from cuda_emu import build_or_skip


@pytest.fixture(scope="module")
def emu():
    return build_or_skip("nhwc_emu", "channels_last_harness.cpp", "conv/cuda/kernels.cu", "nhwc_emu")


@pytest.mark.parametrize("shape, threads", [
    ((2, 3, 5, 7), 256), ((1, 1, 4, 4), 256), ((3, 8, 9, 5), 256), ((2, 3, 20, 30), 256),
    ((1, 9, 3, 5), None), ((2, 33, 7, 9), None), ((1, 64, 5, 13), None)], ids=str)
def test_nchw_to_nhwc_kernels(shape, threads, emu, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    b, c, h, w = shape
    y = np.full((b, h, w, c), np.nan, np.float32)
    few = c <= 8  # as channels_last.cpp chooses
    emu.nhwc_emu(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), b, c,
                 h * w, int(few), threads or 0)
    np.testing.assert_array_equal(y, x.transpose(0, 2, 3, 1))
