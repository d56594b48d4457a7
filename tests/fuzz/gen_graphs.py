"""Generator (c): small random graphs of claimed ops (2..8 nodes) over tiny shapes with 0 and 1
dims, broadcasting operands, constant and runtime inputs, and intermediate values as extra graph
outputs. A float64 interpreter of the same ops gives every value's shape while the graph grows
(so each node is valid), steers away from ill-conditioned steps (LayerNorm of near-constant
rows, Exp of large values, float16 overflow) and is the tie-breaker when the EP and ORT CPU
disagree on a float32 graph."""

from __future__ import annotations

import math

import numpy as np
import onnx

from .fuzzlib import NP_OF, ONNX_OF, Case, TensorProto, cpu_kernels
from .gen_data import rand_dim, rand_shape
from .gen_ops import _erf, _gelu_tanh, _sigmoid, make_node

F32, F16, I32, I64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT32, TensorProto.INT64

FLOAT_UNARY = {"Neg": np.negative, "Abs": np.abs, "Relu": lambda x: np.maximum(x, 0.0),
               "Sigmoid": _sigmoid, "Tanh": np.tanh, "Erf": _erf,
               "Gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), "Exp": np.exp,
               "Identity": lambda x: x}
INT_UNARY = {"Neg": np.negative, "Abs": np.abs, "Relu": lambda x: np.maximum(x, 0),
             "Identity": lambda x: x}


class Val:
    def __init__(self, name, t, value):
        self.name, self.t, self.value = name, t, value  # value: float64 / int64 numpy

    @property
    def shape(self):
        return self.value.shape


class Builder:
    def __init__(self, rng, cid, opset):
        self.rng, self.cid, self.opset = rng, cid, opset
        self.nodes, self.feeds, self.inits, self.vals = [], {}, [], []
        self.n = 0
        self.has_f16 = False

    def fresh(self, kind):
        self.n += 1
        return f"{self.cid}_{kind}{self.n}"

    def operand(self, t, shape, low=-2.0, high=2.0, const_p=0.2):
        """A new graph input or initializer of ONNX type t."""
        r = self.rng
        if t in (F32, F16):
            v = r.uniform(low, high, size=shape)
            arr = v.astype(NP_OF[t])
        else:
            arr = r.integers(-5, 6, size=shape).astype(NP_OF[t])
        name = self.fresh("w" if r.random() < const_p else "i")
        if name.startswith(f"{self.cid}_w"):
            self.inits.append(onnx.numpy_helper.from_array(arr, name))
        else:
            self.feeds[name] = arr
        val = Val(name, t, arr.astype(np.float64 if t in (F32, F16) else np.int64))
        return val

    def node(self, op, inputs, value, t, **attrs):
        if not cpu_kernels().supports(op, self.opset, [v.t for v in inputs], [t]):
            return None  # ORT CPU has no kernel for these types: no reference
        out = self.fresh("v")
        self.nodes.append(make_node(op, [v.name for v in inputs], [out], self.fresh("n"),
                                    **attrs))
        val = Val(out, t, value)
        self.vals.append(val)
        return val


def _bshape(rng, shape):
    """A shape broadcastable against `shape` (numpy rules, right aligned, 1s allowed)."""
    k = int(rng.integers(0, len(shape) + 1))
    dims = shape[len(shape) - k:]
    return tuple(1 if (d != 1 and rng.random() < 0.35) else d for d in dims)


class GraphCases:
    def __init__(self, rng, opset):
        self.rng = rng
        self.opset = opset

    def make(self, cid):
        r = self.rng
        b = Builder(r, cid, self.opset)
        kind = r.random()
        t = F32 if kind < 0.72 else (F16 if kind < 0.86 else (I32 if kind < 0.93 else I64))
        if t == F16:
            b.has_f16 = True
        x = b.operand(t, rand_shape(r, lo=1, zero_p=0.05))
        live = [x]
        for _ in range(int(r.integers(2, 9))):
            for _attempt in range(6):
                v = self.step(b, live)
                if v is not None:
                    live.append(v)
                    break
        if not b.nodes:
            return None
        outs = [b.vals[-1]]
        if len(b.vals) > 1 and r.random() < 0.4:
            extra = b.vals[int(r.integers(len(b.vals) - 1))]
            outs.insert(0, extra)
        values = [o.value for o in outs]
        mag = max([float(np.max(np.abs(v.value), initial=0.0)) for v in b.vals + [x]] + [1.0])
        out_types = [o.t for o in outs]
        f32_only = not b.has_f16 and all(o.t == F32 for o in b.vals)

        def ref():
            return [np.asarray(v) if ot in (F32, F16) else np.asarray(v).astype(NP_OF[ot])
                    for v, ot in zip(values, out_types)]
        ops = " ".join(n.op_type for n in b.nodes)
        return Case(cid, "graph", f"[{ops}] from {np.dtype(NP_OF[t])}{x.shape}", b.nodes,
                    b.feeds, [o.name for o in outs], initializers=b.inits,
                    reference=ref if f32_only else None, mag=[mag] * len(outs), tol_scale=3.0,
                    tol=4e-3 if b.has_f16 else 2e-5)

    # ---- one node ----------------------------------------------------------------------------
    def step(self, b, live):
        r = self.rng
        x = live[-1] if r.random() < 0.7 else live[int(r.integers(len(live)))]
        is_float = x.t in (F32, F16)
        ops = ["unary", "binary", "Transpose", "Reshape", "Unsqueeze", "Squeeze", "Flatten",
               "Concat", "ReduceSum", "Cast", "detour"]
        if is_float:
            ops += ["binary", "MatMul", "MatMul", "Gemm", "ReduceMean", "Softmax", "Div", "Pow"]
            if self.opset >= 17:
                ops.append("LayerNormalization")
        op = str(r.choice(ops))
        return getattr(self, "op_" + op)(b, x, live)

    def op_unary(self, b, x, live):
        table = FLOAT_UNARY if x.t in (F32, F16) else INT_UNARY
        names = [n for n in table if n != "Gelu" or self.opset >= 20]
        op = str(self.rng.choice(names))
        attrs = {}
        fn = table[op]
        if op == "Exp" and np.max(np.abs(x.value), initial=0.0) > 8:
            return None
        if op == "Gelu" and self.rng.random() < 0.4:
            attrs["approximate"] = "tanh"
            fn = _gelu_tanh
        return b.node(op, [x], fn(x.value), x.t, **attrs)

    def op_binary(self, b, x, live):
        r = self.rng
        op = str(r.choice(["Add", "Sub", "Mul"]))
        others = [v for v in live if v is not x and v.t == x.t and
                  _broadcasts(v.shape, x.shape)]
        y = others[int(r.integers(len(others)))] if others and r.random() < 0.4 else \
            b.operand(x.t, _bshape(r, x.shape))
        a, c = (x, y) if r.random() < 0.5 else (y, x)
        fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[op]
        return b.node(op, [a, c], fn(a.value, c.value), x.t)

    def op_detour(self, b, x, live):
        """Nodes the EP refuses in the middle of the graph (so the graph is split between the
        EP and ORT CPU): float through float64 and back; integer division."""
        r = self.rng
        if x.t in (F32, F16):
            F64 = TensorProto.DOUBLE
            d = b.node("Cast", [x], x.value, F64, to=int(F64))
            if d is None:
                return None
            op = str(r.choice(["Abs", "Neg", "Sigmoid", "Tanh"]))
            y = b.node(op, [d], FLOAT_UNARY[op](d.value), F64)
            if y is None:
                return None
            return b.node("Cast", [y], y.value, x.t, to=int(x.t))
        den = b.operand(x.t, _bshape(r, x.shape), const_p=0.3)
        den.value = np.where(den.value == 0, 3, np.abs(den.value))
        arr = den.value.astype(NP_OF[x.t])
        if den.name in b.feeds:
            b.feeds[den.name] = arr
        else:
            b.inits[-1] = onnx.numpy_helper.from_array(arr, den.name)
        return b.node("Div", [x, den], np.trunc(x.value / den.value).astype(np.int64), x.t)

    def op_Div(self, b, x, live):
        # Denominators bounded away from 0 (positive, in [0.5, 2]).
        y = b.operand(x.t, _bshape(self.rng, x.shape), 0.5, 2.0)
        return b.node("Div", [x, y], x.value / y.value, x.t)

    def op_Pow(self, b, x, live):
        e = self.rng.choice([2, 3])
        if np.max(np.abs(x.value), initial=0.0) > 20:
            return None
        arr = np.asarray(e, dtype=np.float32 if x.t == F32 or self.rng.random() < 0.5
                         else np.int64)
        if x.t == F16 and arr.dtype == np.float32:
            arr = arr.astype(np.float16)
        name = b.fresh("w")
        b.inits.append(onnx.numpy_helper.from_array(arr, name))
        exp = Val(name, ONNX_OF[arr.dtype], arr.astype(np.float64))
        return b.node("Pow", [x, exp], x.value ** float(e), x.t)

    def op_MatMul(self, b, x, live):
        r = self.rng
        if x.value.ndim == 0:
            return None
        k = x.shape[-1]
        if x.value.size == 0:
            # ORT CPU leaves a K = 0 product uninitialised and refuses to broadcast some empty
            # batch dims: no reference (generator (b) covers these against numpy).
            return None
        if r.random() < 0.3:
            wshape = (k,)
        else:
            batch = _bshape(r, x.shape[:-2]) if x.value.ndim > 2 and r.random() < 0.3 else ()
            wshape = batch + (k, rand_dim(r, 0.05))
        w = b.operand(x.t, wshape, -1.0, 1.0, const_p=0.4)
        a, c = x, w
        if x.value.ndim >= 2 and r.random() < 0.25 and len(wshape) == 2:
            # W^T as the first operand: (n, k) @ x^T is not formed; instead w2 @ x with w2 (m, rows)
            rows = x.shape[-2]
            w = b.operand(x.t, (rand_dim(r, 0.05), rows), -1.0, 1.0, const_p=0.4)
            a, c = w, x
        return b.node("MatMul", [a, c], np.matmul(a.value, c.value), x.t)

    def op_Gemm(self, b, x, live):
        r = self.rng
        if x.value.ndim != 2 or x.shape[1] == 0:
            return None
        m, k = x.shape
        n = rand_dim(r, 0.05)
        tb = int(r.random() < 0.5)
        w = b.operand(x.t, (n, k) if tb else (k, n), -1.0, 1.0, const_p=0.5)
        attrs = {"transB": tb}
        alpha, beta = float(r.choice([1.0, 0.5, -2.0])), float(r.choice([1.0, 0.0, 0.25]))
        attrs.update(alpha=alpha, beta=beta)
        inputs = [x, w]
        y = alpha * (x.value @ (w.value.T if tb else w.value))
        if r.random() < 0.6:
            c = b.operand(x.t, [(n,), (1, n), (m, n), ()][int(r.integers(4))])
            inputs.append(c)
            y = y + beta * c.value
        return b.node("Gemm", inputs, y, x.t, **attrs)

    def op_Transpose(self, b, x, live):
        perm = [int(p) for p in self.rng.permutation(x.value.ndim)]
        return b.node("Transpose", [x], np.transpose(x.value, perm), x.t, perm=perm)

    def op_Reshape(self, b, x, live):
        r = self.rng
        total = x.value.size
        if total == 0:
            return None
        dims, rem = [], total
        for _ in range(int(r.integers(0, 3))):
            divs = [d for d in (1, 2, 3, 4, 5) if rem % d == 0]
            d = int(r.choice(divs))
            dims.append(d)
            rem //= d
        dims.append(rem)
        r.shuffle(dims)
        spec = list(dims)
        if r.random() < 0.4:
            spec[int(r.integers(len(spec)))] = -1
        shape = np.asarray(spec, dtype=np.int64)
        name = b.fresh("w")
        b.inits.append(onnx.numpy_helper.from_array(shape, name))
        return b.node("Reshape", [x, Val(name, I64, shape)], x.value.reshape(dims), x.t)

    def _axes(self, b, op, x, axes, attrs):
        """Axes as an attribute (old opsets) or a constant input."""
        input_form = self.opset >= {"Squeeze": 13, "Unsqueeze": 13, "ReduceSum": 13,
                                    "ReduceMean": 18}[op]
        if not input_form:
            return [x], dict(attrs, axes=list(axes))
        name = b.fresh("w")
        arr = np.asarray(axes, dtype=np.int64)
        b.inits.append(onnx.numpy_helper.from_array(arr, name))
        return [x, Val(name, I64, arr)], attrs

    def op_Unsqueeze(self, b, x, live):
        r = self.rng
        if x.value.ndim >= 5:
            return None
        out_rank = x.value.ndim + 1
        ax = int(r.integers(-out_rank, out_rank))
        inputs, attrs = self._axes(b, "Unsqueeze", x, [ax], {})
        return b.node("Unsqueeze", inputs, np.expand_dims(x.value, ax), x.t, **attrs)

    def op_Squeeze(self, b, x, live):
        ones = [i for i, d in enumerate(x.shape) if d == 1]
        if not ones:
            return None
        ax = int(self.rng.choice(ones))
        inputs, attrs = self._axes(b, "Squeeze", x, [ax - x.value.ndim], {})
        return b.node("Squeeze", inputs, np.squeeze(x.value, ax), x.t, **attrs)

    def op_Flatten(self, b, x, live):
        rank = x.value.ndim
        axis = int(self.rng.integers(-rank, rank + 1)) if rank else 0
        a = axis % rank if rank and axis < 0 else axis
        rows = int(np.prod(x.shape[:a])) if a else 1
        cols = int(np.prod(x.shape[a:])) if a < rank else 1
        return b.node("Flatten", [x], x.value.reshape(rows, cols), x.t, axis=axis)

    def op_Concat(self, b, x, live):
        r = self.rng
        rank = x.value.ndim
        if rank == 0:
            return None
        axis = int(r.integers(-rank, rank))
        shape = list(x.shape)
        shape[axis] = rand_dim(r, 0.1)
        y = b.operand(x.t, tuple(shape)) if r.random() < 0.8 else x
        parts = [x, y] if r.random() < 0.5 else [y, x]
        return b.node("Concat", parts, np.concatenate([p.value for p in parts], axis=axis), x.t,
                      axis=axis)

    def _reduce(self, b, x, op):
        r = self.rng
        rank = x.value.ndim
        if rank == 0 or x.value.size == 0:
            return None  # ORT CPU returns some empty inputs unreduced
        axes = sorted(int(a) for a in r.choice(rank, size=int(r.integers(1, rank + 1)),
                                               replace=False))
        keep = int(r.random() < 0.5)
        inputs, attrs = self._axes(b, op, x, [a - rank if r.random() < 0.3 else a for a in axes],
                                   {"keepdims": keep})
        fn = np.sum if op == "ReduceSum" else np.mean
        return b.node(op, inputs, fn(x.value, axis=tuple(axes), keepdims=bool(keep)), x.t,
                      **attrs)

    def op_ReduceSum(self, b, x, live):
        return self._reduce(b, x, "ReduceSum")

    def op_ReduceMean(self, b, x, live):
        return self._reduce(b, x, "ReduceMean")

    def op_Softmax(self, b, x, live):
        rank = x.value.ndim
        if rank == 0:
            return None
        axis = int(self.rng.integers(-rank, rank))
        xv = x.value
        if self.opset < 13:
            a = axis % rank
            x2 = xv.reshape(int(np.prod(xv.shape[:a])), int(np.prod(xv.shape[a:])))
            ax = 1
        else:
            x2, ax = xv, axis
        if x2.size:
            e = np.exp(x2 - np.max(x2, axis=ax, keepdims=True))
            y = (e / np.sum(e, axis=ax, keepdims=True)).reshape(xv.shape)
        else:
            y = xv.copy()
        return b.node("Softmax", [x], y, x.t, axis=axis)

    def op_LayerNormalization(self, b, x, live):
        r = self.rng
        rank = x.value.ndim
        if rank == 0:
            return None
        axis = int(r.integers(-rank, rank))
        nshape = x.shape[axis:]
        if int(np.prod(nshape)) <= 1 or x.value.size == 0:
            return None
        red = tuple(range(axis % rank, rank))
        mean = x.value.mean(axis=red, keepdims=True)
        var = ((x.value - mean) ** 2).mean(axis=red, keepdims=True)
        spread = np.sqrt(var)
        scale_of = np.max(np.abs(x.value), axis=red, keepdims=True)
        if np.any(spread < 0.05 * np.maximum(scale_of, 1e-3)):
            return None  # near-constant rows: rounding noise would be amplified
        eps = float(r.choice([1e-5, 1e-3]))
        scale = b.operand(x.t, nshape, 0.5, 1.5, const_p=0.7)
        inputs = [x, scale]
        y = (x.value - mean) / np.sqrt(var + eps) * scale.value
        if r.random() < 0.5:
            bias = b.operand(x.t, nshape, -1.0, 1.0, const_p=0.7)
            inputs.append(bias)
            y = y + bias.value
        return b.node("LayerNormalization", inputs, y, x.t, axis=axis, epsilon=eps)

    def op_Cast(self, b, x, live):
        r = self.rng
        if x.t in (F32, F16):
            if np.max(np.abs(x.value), initial=0.0) > 1e4:
                return None
            to = F16 if x.t == F32 else F32
            if to == F16:
                b.has_f16 = True
            return b.node("Cast", [x], x.value, to, to=int(to))
        to = int(r.choice([F32, I64 if x.t == I32 else I32]))
        if np.max(np.abs(x.value), initial=0) > 1000:
            return None
        v = x.value.astype(np.float64) if to == F32 else x.value
        return b.node("Cast", [x], v, to, to=to)


def _broadcasts(a, b):
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and x != 1 and y != 1:
            return False
    # Only operands that do not grow x's shape (outputs keep x's shape).
    return len(a) <= len(b) and all(x == y or x == 1 for x, y in zip(reversed(a), reversed(b)))
