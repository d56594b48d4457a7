"""Op generators (mixin of gen_ops.OpCases): elementwise math, activations, comparisons and
logic, bitwise ops, variadic ops, reductions and arg reductions, CumSum, TopK."""

from __future__ import annotations

import math

import numpy as np
from onnx import helper

from .fuzzlib import FLOATS, INTS, NP_OF, TensorProto
from .gen_data import broadcast_pair, data, floats, ints, rand_shape, rand_shape_axis
from .hostile import hpick, INT64_MIN, out_of_range

F32, F16, F64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE
I8, I16, I32, I64 = TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64
U8, U16, U32, U64 = TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64
BOOL = TensorProto.BOOL
NUM = (F32, F32, F16, F64, I8, I16, I32, I64, U8, U16, U32, U64)
FL = (F32, F32, F16, F64)
BITS = (I8, I16, I32, I64, U8, U16, U32, U64)

UNARY_FLOAT = ("Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh", "Floor",
               "Round", "Sin", "Sinh", "Tan", "Softplus", "Softsign", "Mish", "HardSwish")
# Float attributes per activation: name -> values to draw from.
ACT_ATTRS = {"Elu": {"alpha": (1.0, 0.5, 2.0, 0.0, -1.0)},
             "Celu": {"alpha": (1.0, 0.5, 2.0)},
             "Selu": {"alpha": (1.67, 1.0, 0.5), "gamma": (1.05, 2.0, 0.0)},
             "LeakyRelu": {"alpha": (0.01, 0.2, -0.5, 0.0, 1.5)},
             "HardSigmoid": {"alpha": (0.2, 0.5, -1.0), "beta": (0.5, 0.0, 1.0)},
             "ThresholdedRelu": {"alpha": (1.0, 0.0, -1.0, 2.5)},
             "Swish": {"alpha": (1.0, 0.5, 1.702, -1.0)}}
COMPARE = ("Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual")
LOGIC = ("And", "Or", "Xor")
BITWISE = ("BitwiseAnd", "BitwiseOr", "BitwiseXor")
REDUCE = ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMin",
          "ReduceProd", "ReduceSumSquare")


def _unary(op):
    return lambda self, cid: self.gen_float_unary(cid, op)


def _act(op):
    return lambda self, cid: self.gen_activation(cid, op)


def _cmp(op):
    return lambda self, cid: self.gen_compare(cid, op)


def _red(op):
    return lambda self, cid: self.gen_reduce_other(cid, op)



def _elu(x, a):
    return np.where(x >= 0, x, a.get("alpha", 1.0) * np.expm1(np.minimum(x, 0)))


def _selu(x, a):
    alpha = a.get("alpha", 1.67326319217681884765625)  # ONNX's defaults (float32 values)
    gamma = a.get("gamma", 1.05070102214813232421875)
    return gamma * np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _celu(x, a):
    alpha = a.get("alpha", 1.0)
    with np.errstate(all="ignore"):
        return np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(x / alpha))


# float64 references of the activations built on exp(x) - 1.
_EXPM1_F64 = {"Elu": _elu, "Selu": _selu, "Celu": _celu}


def _swish(x, a):
    with np.errstate(over="ignore"):
        return x / (1.0 + np.exp(-a.get("alpha", 1.0) * x))


# Float64 references consulted where the EP and ORT CPU differ: the expm1 family above, and
# Swish, where ORT's sigmoid is off by up to ~3.5e-8 absolute (x = -5.6, alpha 1.702: 2e-4
# relative; docs/RELIABILITY.md's Sigmoid row).
_F64_REF = dict(_EXPM1_F64, Swish=_swish)


class ElemGen:
    def _x(self, shape, t, lo=-4.0, hi=4.0):
        r = self.rng
        if t in FLOATS:
            sp = 0.15 if r.random() < 0.3 else 0.0
            return floats(r, shape, t, lo, hi, special_p=sp)
        return data(r, shape, t, "special" if r.random() < 0.3 else "normal")

    def gen_float_unary(self, cid, op):
        t = self.types_for(op, lambda t: ([t], [t]), FL)
        if t is None:
            return None
        lo, hi = {"Acos": (-1.1, 1.1), "Asin": (-1.1, 1.1), "Atanh": (-1.1, 1.1),
                  "Acosh": (0.5, 6), "Cosh": (-10, 10), "Sinh": (-10, 10)}.get(op, (-6, 6))
        return self.emit(cid, op, [self._x(rand_shape(self.rng), t, lo, hi)])

    def gen_activation(self, cid, op):
        t = self.types_for(op, lambda t: ([t], [t]), FL)
        if t is None:
            return None
        attrs = {k: float(self.rng.choice(v)) for k, v in ACT_ATTRS[op].items()
                 if self.rng.random() < 0.6}
        x = self._x(rand_shape(self.rng), t, -6, 6)
        ref = None
        if op in _F64_REF and t in FLOATS:
            # ORT CPU computes exp(x) - 1, which cancels near 0 (an absolute error of a float32
            # unit of 1); the EP's expm1 does not: consulted when the two differ.
            a = {k: float(np.float32(v)) for k, v in attrs.items()}
            ref = lambda: [_F64_REF[op](x.astype(np.float64), a)]  # noqa: E731
        return self.emit(cid, op, [x], attrs, reference=ref)

    def gen_Sign(self, cid):
        t = self.types_for("Sign", lambda t: ([t], [t]), NUM)
        return None if t is None else self.emit(cid, "Sign", [self._x(rand_shape(self.rng), t)])

    def gen_IsNaN(self, cid):
        t = self.types_for("IsNaN", lambda t: ([t], [BOOL]), FL)
        if t is None:
            return None
        return self.emit(cid, "IsNaN", [floats(self.rng, rand_shape(self.rng), t, special_p=0.4)])

    def gen_IsInf(self, cid):
        t = self.types_for("IsInf", lambda t: ([t], [BOOL]), FL)
        if t is None:
            return None
        attrs = {k: int(self.rng.integers(2)) for k in ("detect_negative", "detect_positive")
                 if self.rng.random() < 0.5}
        return self.emit(cid, "IsInf", [floats(self.rng, rand_shape(self.rng), t, special_p=0.4)],
                         attrs)

    def gen_Not(self, cid):
        return self.emit(cid, "Not", [self.rng.random(rand_shape(self.rng)) < 0.5])

    def gen_BitwiseNot(self, cid):
        t = self.types_for("BitwiseNot", lambda t: ([t], [t]), BITS)
        if t is None:
            return None
        return self.emit(cid, "BitwiseNot", [ints(self.rng, rand_shape(self.rng), t, big_p=0.3)])

    def _pair(self, op, among, out=None):
        t = self.types_for(op, lambda t: ([t, t], [out or t]), among)
        if t is None:
            return None, None, None
        sa, sb = broadcast_pair(self.rng)
        return t, self._x(sa, t), self._x(sb, t)

    def gen_compare(self, cid, op):
        t, a, b = self._pair(op, NUM + (BOOL,), BOOL)
        if t is None:
            return None
        if self.rng.random() < 0.3 and a.size and b.size:  # ties
            b = np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)).copy() \
                if a.shape == np.broadcast_shapes(a.shape, b.shape) else b
        return self.emit(cid, op, [a, b])

    def gen_logic(self, cid, op):
        sa, sb = broadcast_pair(self.rng)
        return self.emit(cid, op, [self.rng.random(sa) < 0.5, self.rng.random(sb) < 0.5])

    def gen_And(self, cid):
        return self.gen_logic(cid, "And")

    def gen_Or(self, cid):
        return self.gen_logic(cid, "Or")

    def gen_Xor(self, cid):
        return self.gen_logic(cid, "Xor")

    def gen_bitwise(self, cid, op):
        t = self.types_for(op, lambda t: ([t, t], [t]), BITS)
        if t is None:
            return None
        sa, sb = broadcast_pair(self.rng)
        return self.emit(cid, op, [ints(self.rng, sa, t, big_p=0.3),
                                   ints(self.rng, sb, t, big_p=0.3)])

    def gen_BitwiseAnd(self, cid):
        return self.gen_bitwise(cid, "BitwiseAnd")

    def gen_BitwiseOr(self, cid):
        return self.gen_bitwise(cid, "BitwiseOr")

    def gen_BitwiseXor(self, cid):
        return self.gen_bitwise(cid, "BitwiseXor")

    def gen_BitShift(self, cid):
        t = self.types_for("BitShift", lambda t: ([t, t], [t]), (U8, U16, U32, U64, I32, I64))
        if t is None:
            return None
        sa, sb = broadcast_pair(self.rng)
        bits = np.dtype(NP_OF[t]).itemsize * 8
        # Shifts by the width or more are undefined in ORT's C++ kernel: in range only.
        amount = self.rng.integers(0, bits, size=sb).astype(NP_OF[t])
        attrs = {"direction": str(self.rng.choice(["LEFT", "RIGHT"]))}
        return self.emit(cid, "BitShift", [ints(self.rng, sa, t, big_p=0.3), amount], attrs)

    def gen_Mod(self, cid):
        r = self.rng
        fmod = int(r.random() < 0.4)
        among = FL if fmod else NUM
        t = self.types_for("Mod", lambda t: ([t, t], [t]), among)
        if t is None:
            return None
        if t in INTS and not fmod and r.random() < 0.5:
            fmod = 0
        sa, sb = broadcast_pair(self.rng)
        a, b = self._x(sa, t), self._x(sb, t)
        if t in INTS:
            if r.random() < 0.04:
                return self.int_div_hostile(cid, "Mod", t, {"fmod": fmod} if fmod else {})
            b = np.where(b == 0, 3, b).astype(b.dtype)
            if np.dtype(NP_OF[t]).kind == "i":
                b = np.where(b == -1, 2, b).astype(b.dtype)
        attrs = {"fmod": fmod} if fmod or r.random() < 0.3 else {}
        return self.emit(cid, "Mod", [a, b], attrs)

    def int_div_hostile(self, cid, op, t, attrs):
        """Integer division by zero and INT_MIN / -1: undefined behaviour in ORT CPU's kernel (it
        traps), so ORT is not run; the EP must refuse the node or raise."""
        r = self.rng
        info = np.iinfo(NP_OF[t])
        n = int(r.integers(1, 5))
        a = ints(r, (n,), t)
        b = ints(r, (n,), t, low=1)
        i = int(r.integers(n))
        if info.min < 0 and r.random() < 0.5:
            a[i], b[i] = info.min, -1
            what = "INT_MIN / -1"
        else:
            b[i] = 0
            what = "by zero"
        c = self.emit(cid, op, [a, b], attrs, label=f"[hostile: {what}]")
        c.expect_raise = True
        c.needs_cpu = False
        return c

    def gen_PRelu(self, cid):
        t = self.types_for("PRelu", lambda t: ([t, t], [t]), FL + (I32, I64))
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r, lo=1)
        k = int(r.integers(0, len(shape) + 1))
        slope_shape = tuple(1 if r.random() < 0.3 else d for d in shape[len(shape) - k:])
        return self.emit(cid, "PRelu", [self._x(shape, t), self._x(slope_shape, t, -1, 1)])

    def gen_variadic(self, cid, op):
        among = FL if op == "Mean" else (FL if op == "Sum" else NUM)
        t = self.types_for(op, lambda t: ([t], [t]), among)
        if t is None:
            return None
        r = self.rng
        out = rand_shape(r)
        arrays = []
        for _ in range(int(r.integers(1, 5))):
            k = int(r.integers(0, len(out) + 1))
            s = tuple(1 if r.random() < 0.3 else d for d in out[len(out) - k:])
            arrays.append(self._x(s, t))
        return self.emit(cid, op, arrays)

    def gen_Max(self, cid):
        return self.gen_variadic(cid, "Max")

    def gen_Min(self, cid):
        return self.gen_variadic(cid, "Min")

    def gen_Sum(self, cid):
        return self.gen_variadic(cid, "Sum")

    def gen_Mean(self, cid):
        return self.gen_variadic(cid, "Mean")

    def gen_Where(self, cid):
        t = self.types_for("Where", lambda t: ([BOOL, t, t], [t]), NUM + (BOOL,))
        if t is None:
            return None
        r = self.rng
        sa, sb = broadcast_pair(r)
        sc = sa if r.random() < 0.5 else sb
        return self.emit(cid, "Where", [r.random(sc) < 0.5, self._x(sa, t), self._x(sb, t)])

    def gen_Clip(self, cid):
        t = self.types_for("Clip", lambda t: ([t, t, t], [t]), NUM)
        if t is None:
            return None
        r = self.rng
        x = self._x(rand_shape(r), t)
        lo = self._x((), t) if r.random() < 0.6 else None
        hi = self._x((), t) if r.random() < 0.6 else None
        if lo is not None and hi is not None and r.random() < 0.7 and lo > hi:
            lo, hi = hi, lo
        # Named in the label (known.py lists the EP's outputs there): ORT ignores a NaN bound,
        # and an absent bound is the type's lowest/highest finite value, which clips an Inf.
        nan = any(b is not None and t in FLOATS and np.isnan(b) for b in (lo, hi))
        inf = (lo is None or hi is None) and t in FLOATS and bool(np.isinf(x).any())
        label = " ".join(w for w, on in (("NaN bound", nan), ("Inf, absent bound", inf)) if on)
        if self.opset < 11:  # Clip 6-10: the bounds are float attributes
            attrs = {k: float(v) for k, v in (("min", lo), ("max", hi)) if v is not None}
            return self.emit(cid, "Clip", [x], attrs, label=label)
        return self.emit(cid, "Clip", [x, lo, hi], const_p=0.6, label=label)

    def gen_Dropout(self, cid):
        t = self.types_for("Dropout", lambda t: ([t], [t]), FL)
        if t is None:
            return None
        r = self.rng
        x = self._x(rand_shape(r), t)
        ratio = np.asarray(r.choice([0.0, 0.5, 0.9]), dtype=NP_OF[t]) if r.random() < 0.4 \
            else None
        training = np.asarray(False) if r.random() < 0.2 else None
        arrays = [x, ratio, training]
        attrs = {"seed": int(r.integers(100))} if r.random() < 0.2 else {}
        if self.opset < 12:  # Dropout 7-11: ratio an attribute, inference only
            attrs = {"ratio": float(ratio)} if ratio is not None else {}
            return self.emit(cid, "Dropout", [x], attrs, n_out=int(r.integers(1, 3)))
        return self.emit(cid, "Dropout", arrays, attrs, n_out=int(r.integers(1, 3)),
                         const_idx={1, 2})

    def gen_CastLike(self, cid):
        r = self.rng
        src = int(r.choice(np.asarray(NUM + (BOOL,))))
        dst = int(r.choice(np.asarray(NUM + (BOOL,))))
        if not self.k.supports("CastLike", self.opset, [src, dst], [dst]):
            return None
        x = self._x(rand_shape(r), src)
        if src in FLOATS and dst in INTS:
            x = floats(r, x.shape, src, 0, 100)  # out-of-range float -> int is undefined
        return self.emit(cid, "CastLike", [x, data(r, (1,), dst)])

    def gen_Einsum(self, cid):
        t = self.types_for("Einsum", lambda t: ([t, t], [t]), (F32, F32, F64, I32, I64))
        if t is None:
            return None
        r = self.rng
        eqs = [("ij,jk->ik", "ij", "jk"), ("bij,bjk->bik", "bij", "bjk"), ("ij->ji", "ij", None),
               ("ii->i", "ii", None), ("ij,ij->", "ij", "ij"), ("i,j->ij", "i", "j"),
               ("bhqd,bhkd->bhqk", "bhqd", "bhkd"), ("...ij,...jk->...ik", "ij", "jk"),
               ("ij->", "ij", None), ("ijk->kji", "ijk", None), ("ij,jk", "ij", "jk")]
        eq, sa, sb = eqs[int(r.integers(len(eqs)))]
        size = {c: int(r.integers(0 if r.random() < 0.05 else 1, 4)) for c in "bhijkqd"}
        size["i"] = size["i"] if eq != "ii->i" else size["i"]
        arrays = [self._x(tuple(size[c] for c in sa), t)]
        if sb is not None:
            arrays.append(self._x(tuple(size[c] for c in sb), t))
        kw = {}
        if t in FLOATS:
            # Sums of products cancel (seed 17, o35_197: ij,jk->ik giving -0.0085 from terms of
            # 0.34 and 2.27, where ORT CPU's rounding is 2.3e-7 off the float64 value and the EP's
            # matches it): an absolute error scale of the summed magnitudes, as for MatMul, and
            # the float64 einsum as the tie-breaker.
            ab = [np.abs(np.nan_to_num(a.astype(np.float64), posinf=0, neginf=0))
                  for a in arrays]
            mag = float(np.max(np.einsum(eq, *ab), initial=0.0))
            kw = dict(mag=[min(mag, 1e30)],
                      reference=lambda: [np.einsum(eq, *[a.astype(np.float64) for a in arrays])])
        return self.emit(cid, "Einsum", arrays, {"equation": eq}, label=eq, **kw)

    # ---- reductions ----------------------------------------------------------------------------
    def gen_reduce_other(self, cid, op):
        t = self.types_for(op, lambda t: ([t], [t]), (F32, F32, F16, F64, I32, I64, U8, I8))
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r)
        x = self._x(shape, t, 0.1 if op in ("ReduceLogSum",) else -3, 3)
        if op == "ReduceLogSum" and t in FLOATS:
            # The log of a sum in which +-1e30 cancel is the log of whatever the summation order
            # leaves (seed 29, o65_129: ORT CPU log(4.2), the EP log(0) = -inf): huge values
            # are positive here (the sum holds them; small negatives and NaN still reach it).
            x = np.where(np.abs(x) > 1e4, np.abs(x), x).astype(x.dtype)
        rank = len(shape)
        axes = None
        if r.random() < 0.8 and rank:
            axes = [int(a) - (rank if r.random() < 0.3 else 0)
                    for a in r.choice(rank, size=int(r.integers(0, rank + 1)), replace=False)]
            if r.random() < 0.03:
                axes.append(out_of_range(r, rank))
        attrs = {}
        if r.random() < 0.6:
            attrs["keepdims"] = int(r.random() < 0.5)
        if self.opset >= 18 and r.random() < 0.3:
            attrs["noop_with_empty_axes"] = int(r.random() < 0.5)
        arrays = [x]
        if axes is not None:
            if self.opset >= 18:
                arrays.append(np.asarray(axes, dtype=np.int64))
            else:
                attrs["axes"] = axes
        nan = " NaN in X" if t in FLOATS and bool(np.isnan(x).any()) else ""  # see known.py
        c = self.emit(cid, op, arrays, attrs, const_idx={1} if r.random() < 0.9 else (),
                      const_p=0.05, label=f"axes={axes}{nan}{empty_marker(x)}")
        # The node's attributes when the reference runs (a hostile value may replace one).
        c.reference = lambda: (_empty_reduce_ref(op, x, axes, _attrs(c.nodes[0])) or
                               _lse_ref(op, x, axes, _attrs(c.nodes[0])) or
                               _prod_ref(op, x, axes, _attrs(c.nodes[0])))
        return c

    def _arg(self, cid, op):
        t = self.types_for(op, lambda t: ([t], [I64]), (F32, F32, F16, F64, I32, I64, U8, I8))
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r, lo=1)
        x = self._x(shape, t)
        if t in FLOATS and r.random() < 0.2:
            x = floats(r, shape, t, -2, 2, special_p=0.3,
                       specials=(np.nan, np.inf, -np.inf))
        if r.random() < 0.3:
            x = np.round(x).astype(x.dtype) if t in FLOATS else (x % 3).astype(x.dtype)  # ties
        attrs = {}
        if r.random() < 0.8:
            attrs["axis"] = int(r.integers(-len(shape), len(shape)))
        if r.random() < 0.5:
            attrs["keepdims"] = int(r.random() < 0.5)
        if self.opset >= 12 and r.random() < 0.4:
            attrs["select_last_index"] = int(r.random() < 0.5)
        c = self.emit(cid, op, [x], attrs)
        c.reference = lambda: _empty_arg_ref(x, _attrs(c.nodes[0]))
        return c

    def gen_ArgMax(self, cid):
        return self._arg(cid, "ArgMax")

    def gen_ArgMin(self, cid):
        return self._arg(cid, "ArgMin")

    def gen_CumSum(self, cid):
        t = self.types_for("CumSum", lambda t: ([t, I64], [t]), (F32, F32, F64, I32, I64, U32))
        if t is None:
            return None
        r = self.rng
        shape, axis = rand_shape_axis(r)
        if r.random() < 0.04:
            axis = out_of_range(r, len(shape))
        ax = np.asarray(axis, dtype=np.int64 if r.random() < 0.8 or abs(axis) > 1 << 30 else np.int32)
        attrs = {k: int(r.integers(2)) for k in ("exclusive", "reverse") if r.random() < 0.5}
        return self.emit(cid, "CumSum", [self._x(shape, t), ax], attrs,
                         const_idx={1} if r.random() < 0.9 else (), const_p=0.0,
                         label=f"axis={axis}")

    def gen_TopK(self, cid):
        t = self.types_for("TopK", lambda t: ([t, I64] if self.opset >= 10 else [t], [t, I64]),
                           (F32, F32, F64, I32, I64))
        if t is None:
            return None
        r = self.rng
        shape, axis = rand_shape_axis(r)
        n = shape[axis]
        k = int(r.integers(0, n + 1))
        if r.random() < 0.05:
            # Not 2^32 or 2^62: ORT 1.30 keeps only k's low 32 bits there (2^62 -> 0, an empty
            # result), where the EP raises "K out of range" (docs/RELIABILITY.md).
            k = hpick(r, [n + 1, -1, 1 << 31, (1 << 63) - 1])
        x = self._x(shape, t)
        if np.issubdtype(x.dtype, np.floating):
            # No NaN: where ORT CPU places one depends on its selection algorithm (k, n and the
            # NaN's position; docs/RELIABILITY.md), so there is no answer to match. Infinities
            # stay.
            x = np.where(np.isnan(x), np.asarray(0.5, x.dtype), x)
        if r.random() < 0.5:  # distinct values: tie order is implementation-defined pre-11
            x = (r.permutation(x.size).reshape(shape)).astype(x.dtype) if x.size < 120 else x
        attrs = {"axis": axis}
        if self.opset >= 11:
            if r.random() < 0.4:
                attrs["largest"] = int(r.integers(2))
            if r.random() < 0.2:
                attrs["sorted"] = 1
        if self.opset < 10:  # TopK 1-9: k an attribute
            if x.size == 0:  # ORT's TopK-1 kernel divides by zero on an empty input (SIGFPE)
                return None
            k = max(k, 1)  # k=0 fails ONNX's shape inference before opset 10
            return self.emit(cid, "TopK", [x], dict(attrs, k=k), n_out=2)
        return self.emit(cid, "TopK", [x, np.asarray([k], dtype=np.int64)], attrs, n_out=2,
                         const_idx={1} if r.random() < 0.9 else (), const_p=0.0,
                         label=f"k={k}")


# ORT CPU's reductions of an empty input take a separate path that drops negative axes (ReduceMin
# of shape (0,) over axes [-1] gives shape (0,), over [0] shape (1,); ArgMin of (0, 1, 5) over
# axis -2 with keepdims 0 keeps all dims), against ONNX shape inference and its own non-empty
# path. For empty inputs the references below give the ONNX result (the reduced shape, filled
# with the reduction's value over no elements); consulted only where the EP and ORT CPU differ.
EMPTY_VALUE = {"ReduceL1": 0.0, "ReduceL2": 0.0, "ReduceSumSquare": 0.0, "ReduceProd": 1.0,
               "ReduceLogSum": -np.inf, "ReduceLogSumExp": -np.inf}


def empty_marker(x) -> str:
    """Marks a reduction of an empty input in its label: ORT CPU's empty path also drops axes
    outside [-rank, rank) (ReduceMin of (5, 0, 2) over [1, 9] reduces axis 1), where the EP
    raises "axis out of range" as ONNX makes such an axis invalid (known.py)."""
    return " empty X" if x.size == 0 else ""


def _attrs(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _reduced_shape(shape, axes, keep):
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes)


def _empty_reduce_ref(op, x, axes, attrs):
    rank = x.ndim
    axes = attrs.get("axes", axes)
    if x.size or any(not -rank <= a < rank for a in axes or []):
        return None
    if not axes and attrs.get("noop_with_empty_axes", 0) != 0:
        return [x]
    ax = {a % rank for a in axes} if axes else set(range(rank))
    shape = _reduced_shape(x.shape, ax, attrs.get("keepdims", 1) != 0)
    if op in ("ReduceMin", "ReduceMax"):
        lo_hi = (-np.inf, np.inf) if x.dtype.kind == "f" else \
            (np.iinfo(x.dtype).min, np.iinfo(x.dtype).max)
        value = lo_hi[op == "ReduceMin"]
    else:
        value = EMPTY_VALUE[op]
    return [np.full(shape, value, dtype=np.float64 if x.dtype.kind == "f" else x.dtype)]


def _float_reduce_axes(x, axes, attrs):
    """The axes a float64 reference reduces a non-empty float input over (sorted, non-negative),
    or None where it gives none: other dtypes, an empty input (_empty_reduce_ref), an axis out of
    range (the EP raises), or no axes with noop_with_empty_axes."""
    rank = x.ndim
    axes = attrs.get("axes", axes)
    if x.dtype.kind != "f" or not x.size or any(not -rank <= a < rank for a in axes or []):
        return None
    if not axes and attrs.get("noop_with_empty_axes", 0) != 0:
        return None
    return tuple(sorted({a % rank for a in axes})) if axes else tuple(range(rank))


def _lse_ref(op, x, axes, attrs):
    """ReduceLogSumExp in float64 over a float input. Over one holding NaN: NaN for every slice
    with one, where ORT CPU gives some such slices +inf (its max skips the NaN). Near 0 the result
    is the log of a sum near 1, whose last bit the two orders of summation may differ in (seed
    122, o60_5: 0.00401659 in float64, the EP 4.7e-8 off, ORT CPU 7.3e-8)."""
    ax = _float_reduce_axes(x, axes, attrs) if op == "ReduceLogSumExp" else None
    if ax is None:
        return None
    xf = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(xf, axis=ax, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        y = np.log(np.sum(np.exp(xf - m), axis=ax, keepdims=True)) + m
    return [y if attrs.get("keepdims", 1) != 0 else np.squeeze(y, axis=ax)]


def _prod_ref(op, x, axes, attrs):
    """ReduceProd of a float input in float64. Where an intermediate product passes float32's
    range in ORT CPU's order but the whole product does not, ORT gives +-inf and the EP's order
    the finite product (seed 110, o16_157: 1e30 * 1e30 * 1e-30 among 18 factors)."""
    ax = _float_reduce_axes(x, axes, attrs) if op == "ReduceProd" else None
    if ax is None:
        return None
    with np.errstate(all="ignore"):
        y = np.prod(x.astype(np.float64), axis=ax, keepdims=attrs.get("keepdims", 1) != 0)
    return [y]


def _empty_arg_ref(x, attrs):
    """ArgMin/ArgMax of an input empty elsewhere than along the axis: an empty int64 result."""
    rank = x.ndim
    axis = attrs.get("axis", 0)
    if x.size or not -rank <= axis < rank or x.shape[axis] == 0:
        return None
    return [np.zeros(_reduced_shape(x.shape, {axis % rank}, attrs.get("keepdims", 1) != 0),
                     np.int64)]


for _op in UNARY_FLOAT:
    setattr(ElemGen, "gen_" + _op, _unary(_op))
for _op in ACT_ATTRS:
    setattr(ElemGen, "gen_" + _op, _act(_op))
for _op in COMPARE:
    setattr(ElemGen, "gen_" + _op, _cmp(_op))
for _op in REDUCE:
    setattr(ElemGen, "gen_" + _op, _red(_op))
_ = (math, INT64_MIN)
