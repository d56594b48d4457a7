"""Random shapes and data for the fuzz generators: tiny tensors (0 and 1 dims included), values
of every flavour a dtype has (moderate, special: NaN, +-Inf, +-0, huge, tiny; integer extremes)."""

from __future__ import annotations

import numpy as np

from .fuzzlib import NP_OF, TensorProto

DIMS = (1, 1, 2, 2, 3, 3, 4, 5)


def rand_dim(rng, zero_p=0.08):
    return 0 if rng.random() < zero_p else int(rng.choice(DIMS))


def rand_shape(rng, rank=None, lo=0, hi=4, zero_p=0.08):
    if rank is None:
        rank = int(rng.integers(lo, hi + 1))
    return tuple(rand_dim(rng, zero_p) for _ in range(rank))


def rand_shape_axis(rng):
    """A shape of rank >= 1 and a random axis of it, negative half the time (same draws as
    rand_shape(rng, lo=1) then one axis)."""
    shape = rand_shape(rng, lo=1)
    return shape, int(rng.integers(-len(shape), len(shape)))


def broadcast_pair(rng, zero_p=0.08):
    """Two shapes that broadcast (numpy rules), of ranks 0..4, with 1s on either side."""
    out = rand_shape(rng, zero_p=zero_p)
    def side():
        k = int(rng.integers(0, len(out) + 1))
        dims = out[len(out) - k:]
        return tuple(1 if (d != 1 and rng.random() < 0.3) else d for d in dims)
    return side(), side()


FLOAT_SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-30, 65504.0, -1.0, 1.0)


def floats(rng, shape, dt, low=-3.0, high=3.0, special_p=0.0, specials=FLOAT_SPECIALS):
    a = rng.uniform(low, high, size=shape)
    if special_p and a.size:
        pick = rng.random(shape) < special_p
        a = np.where(pick, rng.choice(np.asarray(specials, dtype=np.float64), size=shape), a)
    return a.astype(NP_OF[dt])


def ints(rng, shape, dt, big_p=0.0, low=None, high=None):
    npt = np.dtype(NP_OF[dt])
    info = np.iinfo(npt)
    lo = max(info.min, -60) if low is None else max(info.min, low)
    hi = min(info.max, 60) if high is None else min(info.max, high)
    a = rng.integers(lo, hi + 1, size=shape).astype(npt)
    if big_p and a.size:
        pick = rng.random(shape) < big_p
        if npt.kind == "i":
            big = rng.integers(info.min, info.max, size=shape, dtype=npt, endpoint=True)
        else:
            big = rng.integers(0, info.max, size=shape, dtype=npt, endpoint=True)
        a = np.where(pick, big, a).astype(npt)
    return a


def data(rng, shape, dt, kind="normal"):
    """Random data of ONNX type `dt`. kind: normal | special | positive | small."""
    if dt == TensorProto.BOOL:
        return rng.random(shape) < 0.5
    if dt in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE):
        if kind == "special":
            return floats(rng, shape, dt, special_p=0.25)
        if kind == "positive":
            return floats(rng, shape, dt, 0.05, 4.0)
        if kind == "small":
            return floats(rng, shape, dt, -1.0, 1.0)
        return floats(rng, shape, dt)
    if kind == "special":
        return ints(rng, shape, dt, big_p=0.3)
    if kind == "positive":
        return ints(rng, shape, dt, low=1)
    if kind == "small":
        return ints(rng, shape, dt, low=-5, high=5)
    return ints(rng, shape, dt)
