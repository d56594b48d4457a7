"""The LSTM/GRU recurrence kernel (src/ortmlx/ops/recurrent/cuda/kernels.cu) without a GPU:
compiled for the host emulation of tools/avjp_cuda_emu (emu.h: a std::thread per CUDA thread,
__syncthreads as a barrier) and compared with a float64 recurrence written from the MLX-op path
of ops/recurrent.cpp (its gate order, clamp and cell arithmetic). Both directions, GRU with and
without linear_before_reset and its recurrent bias, clamping, NaN gate inputs, and fewer threads
than gate columns (the strided loops). Needs g++ (C++20); runs on any flavour."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from cuda_emu import build_or_skip

FLT_MAX = float(np.finfo(np.float32).max)


@pytest.fixture(scope="module")
def emu():
    return build_or_skip("rnn_emu", "recurrence_harness.cpp", "recurrent/cuda/kernels.cu", "rnn_emu")


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def reference(xw, rt, h0, c0, rbh, gru, reverse, lbr, bound, nan_to_bound):
    T, B, _ = xw.shape
    H = rt.shape[0]
    xw, rt = xw.astype(np.float64), rt.astype(np.float64)
    h, c = h0.astype(np.float64), c0.astype(np.float64)
    y = np.zeros((T, B, H))

    def clamp(v):
        out = np.clip(v, -bound, bound)
        return np.where(np.isnan(v), bound if nan_to_bound else np.nan, out)

    for k in range(T):
        t = T - 1 - k if reverse else k
        g = xw[t]
        if not gru:
            gates = clamp(g + h @ rt)
            i, o, f, cc = (gates[:, q * H:(q + 1) * H] for q in range(4))
            c = c * sigmoid(f) + sigmoid(i) * np.tanh(cc)
            h = np.tanh(c) * sigmoid(o)
        else:
            zr = clamp(g[:, :2 * H] + h @ rt[:, :2 * H])
            z, r = sigmoid(zr[:, :H]), sigmoid(zr[:, H:])
            if lbr:
                lin = (rbh if rbh is not None else 0.0) + h @ rt[:, 2 * H:]
                pre = g[:, 2 * H:] + r * lin
            else:
                pre = g[:, 2 * H:] + (r * h) @ rt[:, 2 * H:]
            h = (1 - z) * np.tanh(clamp(pre)) + z * h
        y[t] = h
    return y, h, c


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def run(emu, xw, rt, h0, c0, rbh, gru, reverse, lbr, bound, nan_to_bound, threads):
    T, B, _ = xw.shape
    H = rt.shape[0]
    y = np.zeros((T, B, H), np.float32)
    hl, cl = np.zeros((B, H), np.float32), np.zeros((B, H), np.float32)
    rb = rbh if rbh is not None else np.zeros(1, np.float32)
    emu.rnn_emu(ptr(xw), ptr(rt), ptr(h0), ptr(c0), ptr(rb), ptr(y), ptr(hl), ptr(cl), T, B, H,
                int(gru), int(reverse), int(lbr), int(rbh is not None), ctypes.c_float(bound),
                int(nan_to_bound), threads)
    return y, hl, cl


CASES = [
    # (cell, hidden, reverse, lbr, with rbh, bound, threads: None = as recurrence.cpp launches)
    ("lstm", 5, False, False, False, FLT_MAX, None),
    ("lstm", 5, True, False, False, 0.7, None),
    ("lstm", 40, False, False, False, FLT_MAX, None),
    ("lstm", 9, False, False, False, 1.5, 8),
    ("gru", 6, False, True, True, FLT_MAX, None),
    ("gru", 6, True, True, False, 0.9, None),
    ("gru", 7, False, False, False, FLT_MAX, None),
    ("gru", 33, True, False, False, 1.2, 32),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_recurrence_kernel_matches_the_mlx_op_path(case, emu, rng):
    cell, H, reverse, lbr, with_rbh, bound, threads = case
    gru = cell == "gru"
    G = 3 if gru else 4
    T, B = 6, 3
    xw = rng.standard_normal((T, B, G * H)).astype(np.float32)
    rt = (rng.standard_normal((H, G * H)) / np.sqrt(H)).astype(np.float32)
    h0 = rng.standard_normal((B, H)).astype(np.float32)
    c0 = rng.standard_normal((B, H)).astype(np.float32)
    rbh = rng.standard_normal(H).astype(np.float32) if with_rbh else None
    if threads is None:
        threads = min(1024, (G * H + 31) // 32 * 32)
    got = run(emu, xw, rt, h0, c0, rbh, gru, reverse, lbr, bound, True, threads)
    y, h, c = reference(xw, rt, h0, c0, rbh, gru, reverse, lbr, bound, True)
    np.testing.assert_allclose(got[0], y, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(got[1], h, rtol=2e-5, atol=2e-6)
    if not gru:
        np.testing.assert_allclose(got[2], c, rtol=2e-5, atol=2e-6)
    else:  # GRU leaves c as it came
        np.testing.assert_array_equal(got[2], c0)


@pytest.mark.parametrize("nan_to_bound", [True, False])
def test_recurrence_kernel_nan_gate_inputs(nan_to_bound, emu, rng):
    """A NaN gate input becomes +bound with a bias input (ORT's clamp), else stays NaN."""
    T, B, H = 3, 2, 4
    xw = rng.standard_normal((T, B, 4 * H)).astype(np.float32)
    xw[1, 0, 2] = np.nan
    rt = (rng.standard_normal((H, 4 * H)) / 2).astype(np.float32)
    h0 = np.zeros((B, H), np.float32)
    c0 = np.zeros((B, H), np.float32)
    got = run(emu, xw, rt, h0, c0, None, False, False, False, 3.0, nan_to_bound, 32)
    y, h, _ = reference(xw, rt, h0, c0, None, False, False, False, 3.0, nan_to_bound)
    np.testing.assert_allclose(got[0], y, rtol=2e-5, atol=2e-6, equal_nan=True)
    assert np.isnan(got[0][1, 0]).any() != nan_to_bound
