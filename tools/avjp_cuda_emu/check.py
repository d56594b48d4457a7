"""Checks the fused CUDA AttentionVJP kernels (src/ortmlx/ops/attention_vjp/cuda/kernels.cu)
without a GPU: builds them for a host emulation of CUDA (emu.h, harness.cpp) and compares every
variant with the float64 reference of ortmlx.contracts, NaN/Inf positions included.

    python tools/avjp_cuda_emu/check.py [--quick] [--mma exact|trunc[:guard[:terms]]]
    python tools/avjp_cuda_emu/check.py --drift [--mma ...] [--lengths 512,1024,2048]

Every case runs in both precisions of the tensor-core passes: 3xTF32 (the default; errors at
the level of fp32 products) and 1xTF32 (the tf32 mode; errors at the level of TF32), and with
dQ from the separate dq pass and from the one-pass dkvq kernel (head sizes up to 128).

--mma picks emu.h's model of how mma.sync accumulates: trunc (the default, the tensor cores'
measured behaviour: addends aligned to the largest exponent and truncated, the sum rounded toward
zero; guard bits 1, 4 products per fused addition unless given) or exact (exact sum, one rounding
to nearest). --drift runs long reductions (S = 512..2048, one head, D = 16) and prints each
gradient's error for both models, next to fp32 sums of the same reductions taken in sequence
(what the SIMT kernels did); minutes per length at S = 2048.

Slow (one std::thread per CUDA thread), so the shapes are small, but they cross tile edges.
"""
from __future__ import annotations

import ctypes
import os
import sys

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from ortmlx.contracts import attention_vjp_reference  # noqa: E402

import emu_build  # noqa: E402  (beside this file)


def build(out_dir=None):
    lib = emu_build.build("avjp_emu", "harness.cpp", [
        os.path.join(emu_build.SRC, "attention_vjp", "cuda", f)
        for f in ("kernels.cu", "warp_rows.cuh", "wgmma.cuh", "wg_dkv.cuh", "wg_stats.cuh",
                  "tiles.h")], out_dir)
    lib.avjp_emu.restype = ctypes.c_int
    lib.avjp_emu_mma_model.restype = ctypes.c_int
    lib.avjp_emu_wgmma.restype = None
    return lib


def set_model(lib, spec):
    """spec: exact, or trunc[:guard[:terms]] (emu.h)."""
    parts = spec.split(":")
    kind = {"exact": 0, "trunc": 1}[parts[0]]
    guard = int(parts[1]) if len(parts) > 1 else 1
    terms = int(parts[2]) if len(parts) > 2 else 4
    assert lib.avjp_emu_mma_model(kind, guard, terms) == 0, spec


def ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def run_kernels(lib, q, k, v, y, dy, mask, *, hq, hk, d, rank, causal, kind, scale, tf32,
                one_pass=False, mode=None, wgmma=False, stats=False):
    """mode: the kernels' precision mode (kernels.cu, enum Mode); default 1 for tf32, else 0.
    wgmma: the dK/dV pass and the plain form's stats pass on warpgroup MMAs where the host takes
    them (tf32, head sizes 33-128). stats: also return the stats pass's lse and delta."""
    lib.avjp_emu_wgmma(int(wgmma))
    b = q.shape[0]
    sq = q.shape[2] if rank == 4 else q.shape[1]
    sk = k.shape[2] if rank == 4 else k.shape[1]
    dmax = 32 if d <= 32 else 64 if d <= 64 else 128 if d <= 128 else 256
    m4 = np.zeros((1, 1, 1, 1), np.bool_) if kind == 0 else mask.reshape(
        (1,) * (4 - mask.ndim) + mask.shape)
    m4 = np.ascontiguousarray(m4.astype(np.uint8) if kind == 1 else m4.astype(np.float32))
    tensors = [q, k, v, dy] + ([] if y is None else [y])
    finite = np.array([int(all(np.isfinite(t).all() for t in tensors))], np.int32)
    f32 = [np.ascontiguousarray(t, np.float32) for t in (q, k, v, dy if y is None else y, dy)]
    lse = np.full(b * hq * sq, np.float32(7), np.float32)
    delta = np.full_like(lse, 7)
    dq = np.full(q.shape, np.float32(7), np.float32)
    dk = np.full(k.shape, np.float32(7), np.float32)
    dv = np.full(v.shape, np.float32(7), np.float32)
    rc = lib.avjp_emu(int(y is None), int(one_pass), dmax, *(ptr(t) for t in f32), ptr(m4), ptr(finite),
                      ptr(lse), ptr(delta), ptr(dq), ptr(dk), ptr(dv), b, hq, hk, sq, sk, d,
                      rank, causal, kind, *m4.shape, int(tf32) if mode is None else mode,
                      ctypes.c_float(scale))
    assert rc == 0
    return (dq, dk, dv, lse, delta) if stats else (dq, dk, dv)


# Tolerances relative to the gradients' magnitude: 3xTF32 (the default) must be as accurate as
# plain fp32 products, 1xTF32 (the tf32 mode) as TF32 (10 mantissa bits).
TOL = {False: 2e-5, True: 5e-3}
WORST = {False: 0.0, True: 0.0}


def same(got, want, what, mag, tf32):
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaN")
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf], err_msg=f"{what}: Inf")
    fin = np.isfinite(want)
    assert np.isfinite(got[fin]).all(), f"{what}: non-finite where the reference is finite"
    tol = TOL[tf32]
    np.testing.assert_allclose(got[fin], want[fin], rtol=tol, atol=tol * max(mag, 1e-3),
                               err_msg=what)
    if fin.any():
        err = float(np.abs(got[fin] - want[fin]).max()) / max(mag, 1e-3)
        WORST[tf32] = max(WORST[tf32], err)
        return err
    return 0.0


def case(lib, rng, *, b, sq, sk, hq, hk, d, rank, causal, kind, mshape, recompute,
         full_rows=False, poison=None, tf32=False, one_pass=False, half=None, wgmma=False):
    """half (float16 or bfloat16): inputs of that type, run in the 3xTF32 mode for inputs that
    are TF32 values (mode 2), and, without the one-pass kernel's atomics, checked bit for bit
    against the plain 3xTF32 mode (mode 0) on the same inputs."""
    def shape(s, h):
        return (b, s, h * d) if rank == 3 else (b, h, s, d)
    q, dy = rng.standard_normal(shape(sq, hq)), rng.standard_normal(shape(sq, hq))
    k, v = rng.standard_normal(shape(sk, hk)), rng.standard_normal(shape(sk, hk))
    y = None if recompute else rng.standard_normal(shape(sq, hq))
    mask = np.ones(1, np.bool_)
    if kind == 1:
        mask = rng.random(mshape) < 0.7
        if full_rows and len(mshape) >= 2 and mshape[-2] > 1:
            mask[..., 0, :] = False
    elif kind == 2:
        mask = rng.uniform(-1, 1, mshape)
        mask[rng.random(mshape) > 0.7] = -np.inf
        if full_rows and len(mshape) >= 2 and mshape[-2] > 1:
            mask[..., 0, :] = -np.inf
    if poison:
        which, value = poison[:2]
        arr = {"Q": q, "K": k, "V": v, "Y": y, "dY": dy, "Mask": mask}[which]
        idx = tuple(s - 1 for s in arr.shape) if which in ("K", "V", "Mask") else (0,) * arr.ndim
        if len(poison) > 2:
            idx = poison[2]
        arr[idx] = value
    io = half or np.float32
    q, k, v, dy = (t.astype(io).astype(np.float64) for t in (q, k, v, dy))
    if y is not None:
        y = y.astype(io).astype(np.float64)
    if kind == 2:
        mask = mask.astype(io).astype(np.float64)
    scale = float(np.float32(1 / np.sqrt(d)))
    kw = dict(hq=hq, hk=hk, causal=causal, mask_kind=kind, scale=scale, rank=rank)
    with np.errstate(all="ignore"):
        want = attention_vjp_reference(q, k, v, dy, mask, y=y, **kw)
    run = dict(hq=hq, hk=hk, d=d, rank=rank, causal=causal, kind=kind, scale=scale, tf32=tf32,
               one_pass=one_pass, wgmma=wgmma)
    got = run_kernels(lib, q, k, v, y, dy, mask, **run, mode=2 if half and not tf32 else None)
    if half and not tf32 and not one_pass:
        plain = run_kernels(lib, q, k, v, y, dy, mask, **run, mode=0)
        for name, g, p in zip("QKV", got, plain):
            np.testing.assert_array_equal(g, p, err_msg=f"d{name}: mode 2 differs from mode 0")
    fin = [w[np.isfinite(w)] for w in want]
    mag = max([float(np.abs(f).max()) for f in fin if f.size] or [0.0])
    label = (f"b{b} s{sq}x{sk} h{hq}/{hk} d{d} r{rank} c{causal} m{kind}{mshape} "
             f"{'rec' if recompute else 'plain'} {'tf32' if tf32 else '3xtf32'}"
             f"{' ' + np.dtype(half).name + ' inputs' if half else ''}"
             f"{' one-pass' if one_pass else ''}{' wgmma' if wgmma else ''} {poison or ''}")
    err = max(same(g, w, f"{label} d{name}", mag, tf32) for name, g, w in zip("QKV", got, want))
    print(f"ok {label} (max error {err:.1e} of the magnitude)", flush=True)


def sequential_fp32(q, k, v, dy, scale):
    """dQ, dK, dV of one head (rank 4, no mask) with P and dS from float64 rounded to fp32 and
    each long reduction (over keys for dQ, over query rows for dK and dV) summed in fp32 one term
    after another: the rounding the SIMT kernels' FMA loops had."""
    q64, k64, v64, g64 = (t[0, 0] for t in (q, k, v, dy))
    s = scale * q64 @ k64.T
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = p @ v64
    ds = p * (g64 @ v64.T - (g64 * y).sum(axis=1, keepdims=True))
    p32, ds32 = p.astype(np.float32), ds.astype(np.float32)
    k32, q32, g32 = (t.astype(np.float32) for t in (k64, q64, g64))
    dq = np.zeros(q64.shape, np.float32)
    for j in range(k32.shape[0]):
        dq += ds32[:, j:j + 1] * k32[j]
    dk = np.zeros(k64.shape, np.float32)
    dv = np.zeros(v64.shape, np.float32)
    for i in range(q32.shape[0]):
        dk += ds32[i][:, None] * q32[i]
        dv += p32[i][:, None] * g32[i]
    return [(np.float32(scale) * dq)[None, None], (np.float32(scale) * dk)[None, None],
            dv[None, None]]


def drift(lib, models, lengths=(512, 1024, 2048), d=16, precisions=(False, True)):
    """Error of each gradient against float64 as the reductions grow, for each mma model and
    both precisions: max |error| of the gradients' magnitude / relative L2 (|error| / |grad|)."""
    rng = np.random.default_rng(20261204)
    heads = ["fp32-seq"] + [f"{m} {'TF32' if p else '3xTF32'}" for m in models
                            for p in precisions]
    print("errors as max-abs of the magnitude / relative L2")
    print("S     grad " + "".join(f"{h:>20}" for h in heads))
    for s in lengths:
        q, k, v, dy = (rng.standard_normal((1, 1, s, d)).astype(np.float32).astype(np.float64)
                       for _ in range(4))
        scale = float(np.float32(1 / np.sqrt(d)))
        kw = dict(hq=1, hk=1, causal=0, mask_kind=0, scale=scale, rank=4)
        want = attention_vjp_reference(q, k, v, dy, np.ones(1, np.bool_), **kw)
        mag = max(float(np.abs(w).max()) for w in want)
        cols = [sequential_fp32(q, k, v, dy, scale)]
        for m in models:
            set_model(lib, m)
            for tf32 in precisions:
                cols.append(run_kernels(lib, q, k, v, None, dy, None, hq=1, hk=1, d=d, rank=4,
                                        causal=0, kind=0, scale=scale, tf32=tf32))
        for g, name in enumerate("QKV"):
            cells = []
            for c in cols:
                err = c[g] - want[g]
                rel = float(np.linalg.norm(err) / np.linalg.norm(want[g]))
                cells.append(f"{float(np.abs(err).max()) / mag:.1e}/{rel:.1e}")
            print(f"{s:<5} d{name}  " + "".join(f"{c:>20}" for c in cells), flush=True)


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main():
    quick = "--quick" in sys.argv
    lib = build()
    if "--drift" in sys.argv:
        first = option("--mma", "trunc")
        models = [first] + (["exact"] if first != "exact" else [])
        lengths = tuple(int(x) for x in option("--lengths", "512,1024,2048").split(","))
        drift(lib, models, lengths)
        return
    model = option("--mma", "trunc")
    set_model(lib, model)
    print(f"mma model: {model}")
    rng = np.random.default_rng(20261203)
    cases = [
        dict(b=1, sq=70, sk=70, hq=2, hk=2, d=16, rank=4, causal=0, kind=0, mshape=None,
             recompute=False),
        dict(b=1, sq=70, sk=45, hq=2, hk=1, d=40, rank=3, causal=1, kind=0, mshape=None,
             recompute=True),
        dict(b=2, sq=33, sk=80, hq=4, hk=2, d=64, rank=4, causal=1, kind=1,
             mshape=(2, 1, 33, 80), recompute=False, full_rows=True),
        dict(b=1, sq=40, sk=37, hq=3, hk=1, d=96, rank=3, causal=1, kind=2, mshape=(40, 30),
             recompute=False, full_rows=True),
        dict(b=1, sq=35, sk=50, hq=2, hk=2, d=128, rank=4, causal=0, kind=2, mshape=(1, 2, 1, 60),
             recompute=True),
        dict(b=1, sq=20, sk=40, hq=2, hk=1, d=200, rank=4, causal=1, kind=1, mshape=(20, 1),
             recompute=True),
        dict(b=1, sq=12, sk=70, hq=2, hk=2, d=8, rank=3, causal=0, kind=1, mshape=(70,),
             recompute=False),
    ]
    if quick:
        cases = cases[:3]
    for tf32 in (False, True):
        for c in cases:
            case(lib, rng, **c, tf32=tf32)
            if c["d"] <= 128:  # the one-pass kernel (warp-row buckets)
                case(lib, rng, **c, tf32=tf32, one_pass=True)
    # The tf32 mode's dK/dV pass on warpgroup MMAs (head sizes 33-128).
    for c in cases:
        if 32 < c["d"] <= 128:
            for one_pass in (False, True):
                case(lib, rng, **c, tf32=True, one_pass=one_pass, wgmma=True)
    # float16/bfloat16 contracts: the mode whose products skip the inputs' zero lo terms.
    for i, c in enumerate(cases):
        half = (np.float16, ml_dtypes.bfloat16)[i % 2]
        case(lib, rng, **c, half=half)
        if c["d"] <= 128:
            case(lib, rng, **c, half=half, one_pass=True)
    # Non-finite inputs: causal and a narrow mask, so hidden tiles exist and must not be skipped.
    base = dict(b=1, sq=40, sk=70, hq=2, hk=1, d=32, rank=4, causal=1, kind=2, mshape=(40, 66))
    values = [np.nan, np.inf] if quick else [np.nan, np.inf, -np.inf]
    for recompute in (False, True):
        for which in ("Q", "K", "V", "Y", "dY", "Mask"):
            if which == "Y" and recompute:
                continue
            for value in values:
                for tf32 in (False, True):
                    case(lib, rng, **base, recompute=recompute, poison=(which, value), tf32=tf32)
                case(lib, rng, **base, recompute=recompute, poison=(which, value), one_pass=True)
                case(lib, rng, **dict(base, d=64), recompute=recompute, poison=(which, value),
                     tf32=True, one_pass=True, wgmma=True)
    # An Inf in a key every row sees: rows whose score it makes -Inf stay alive, so their
    # gradients are finite only if the products keep Inf an Inf (3xTF32's cross terms would not).
    vis = dict(b=1, sq=40, sk=70, hq=2, hk=1, d=32, rank=4, causal=1, kind=0, mshape=None)
    for which in ("K", "V"):
        for value in (np.inf, -np.inf):
            for tf32 in (False, True):
                case(lib, rng, **vis, recompute=which == "V", poison=(which, value, (0, 0, 0, 5)),
                     tf32=tf32)
            case(lib, rng, **vis, recompute=which == "V", poison=(which, value, (0, 0, 0, 5)),
                 one_pass=True)
    print(f"all ok; worst error (of the magnitude): 3xTF32 {WORST[False]:.1e}, "
          f"TF32 {WORST[True]:.1e}")


if __name__ == "__main__":
    main()
