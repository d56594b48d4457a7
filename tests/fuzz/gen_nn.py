"""Op generators (mixin of gen_ops.OpCases): convolution and pooling, normalisations, Resize,
Q/DQ, attention (ai.onnx Attention and the com.microsoft attention family with out-of-range
positions and sequence lengths), and the other com.microsoft ops (gen_ms_<Op>)."""

from __future__ import annotations

import zlib

import numpy as np
from onnx import helper

from .fuzzlib import NP_OF, TensorProto
from .gen_data import data, floats, ints, rand_dim, rand_shape, rand_shape_axis
from .hostile import hpick, huge_shape, out_of_range

F32, F16, F64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE
I8, U8, I32, I64 = TensorProto.INT8, TensorProto.UINT8, TensorProto.INT32, TensorProto.INT64
FL = (F32, F32, F16, F64)
MS = "com.microsoft"
LOOSE = 30.0  # tolerance scale for accumulating ops (summation order differs)


def _lrn_ref(x, attrs):
    """LRN with each window summed directly. ORT CPU keeps a running sum over the channels
    (adding the square that enters, subtracting the one that leaves), so one Inf square makes
    every later channel of that pixel NaN (Inf - Inf); the ONNX definition sums each window.
    The squares are taken in X's type, as both kernels do (a float32 1e30 squares to Inf)."""
    size = attrs["size"]
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    with np.errstate(over="ignore", invalid="ignore"):
        sq = np.square(x).astype(np.float64)
        lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
        c = x.shape[1]
        win = np.zeros(x.shape)
        for ch in range(c):
            win[:, ch] = sq[:, max(0, ch - lo):min(c, ch + hi + 1)].sum(axis=1)
        return x.astype(np.float64) / (bias + alpha / size * win) ** beta


def _node_attrs(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _group_norm_ref(x, scale, bias, attrs):
    """GroupNormalization in float64: each (n, group) normalised over its channels and spatial
    dims, then scaled per group (scale of num_groups values, opset 18) or per channel (21)."""
    groups, eps = attrs.get("num_groups", 0), attrs.get("epsilon", 1e-5)
    n, c = x.shape[:2]
    if not 0 < groups <= c or c % groups or not scale.size or c % scale.shape[0]:
        return None
    xg = x.astype(np.float64).reshape(n, groups, (c // groups) * int(np.prod(x.shape[2:])))
    with np.errstate(invalid="ignore", over="ignore"):
        d = xg - xg.mean(axis=-1, keepdims=True)
        y = (d / np.sqrt(np.square(d).mean(axis=-1, keepdims=True) + eps)).reshape(x.shape)
    rep = c // scale.shape[0]
    per = (1, c) + (1,) * (x.ndim - 2)
    sc = np.repeat(scale.astype(np.float64), rep).reshape(per)
    b = np.repeat(bias.astype(np.float64), rep).reshape(per)
    return [y * sc + b]


def _mvn_ref(x, axes):
    """The ONNX function body of MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9).
    ORT CPU divides by sqrt(var) alone, so a constant slice (a single element, say) gives NaN
    there and 0 by the definition."""
    ax = tuple(sorted({a % x.ndim for a in axes}))
    with np.errstate(invalid="ignore", over="ignore"):
        xf = x.astype(np.float64)
        d = xf - xf.mean(axis=ax, keepdims=True)
        return d / (np.sqrt(np.square(d).mean(axis=ax, keepdims=True)) + 1e-9)


def _instance_norm_ref(x, scale, bias, eps):
    """InstanceNormalization in float64: per (n, c), (x - mean) / sqrt(var + eps) * scale + bias.
    ORT CPU folds it into x * a + b with a = scale / std, which loses the low bits where |x| is
    far above std (a slice of one 65504: the answer is bias, ORT's is bias + 0.87)."""
    ax = tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    with np.errstate(invalid="ignore", over="ignore"):
        xf = x.astype(np.float64)
        d = xf - xf.mean(axis=ax, keepdims=True)
        y = d / np.sqrt(np.square(d).mean(axis=ax, keepdims=True) + eps)
        return y * scale.astype(np.float64).reshape(shape) + bias.astype(np.float64).reshape(shape)


def _gqa_ref(q, k, v, pk, pv, hq, scale):
    """GroupQueryAttention in float64 with every sequence at its full length (seqlens_k =
    total - 1): the new keys and values appended to the past, causal over the last positions
    (consulted where the EP and ORT CPU differ)."""
    b, s, _ = q.shape
    hkv, d = pk.shape[1], pk.shape[3]
    heads = lambda a, h: a.astype(np.float64).reshape(b, s, h, d).transpose(0, 2, 1, 3)
    kk = np.concatenate([pk.astype(np.float64), heads(k, hkv)], axis=2)
    vv = np.concatenate([pv.astype(np.float64), heads(v, hkv)], axis=2)
    total = kk.shape[2]
    kr, vr = np.repeat(kk, hq // hkv, axis=1), np.repeat(vv, hq // hkv, axis=1)
    att = heads(q, hq) @ kr.transpose(0, 1, 3, 2) * scale
    future = np.arange(total)[None, :] > np.arange(s)[:, None] + (total - s)
    att = np.where(future, -np.inf, att)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att /= att.sum(axis=-1, keepdims=True)
    out = (att @ vr).transpose(0, 2, 1, 3).reshape(b, s, hq * d)
    return [out, kk, vv]



def _rms_ref(x, scale, node):
    """RMS normalisation over the axes from `axis` on, in float64 (the node's attributes, which a
    hostile value may have replaced; None where they make no sense)."""
    from onnx import helper

    a = {at.name: helper.get_attribute_value(at) for at in node.attribute}
    axis = int(a.get("axis", -1))
    if not -x.ndim <= axis < x.ndim:
        return None
    eps = float(np.float32(a.get("epsilon", 1e-5)))
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"):
        ms = np.mean(xd * xd, axis=tuple(range(axis % x.ndim, x.ndim)), keepdims=True)
        return [xd / np.sqrt(ms + eps) * scale.astype(np.float64)]

class NNGen:
    def _fl(self, op, nin=1, among=FL):
        return self.types_for(op, lambda t: ([t] * nin, [t]), among)

    def _mag(self, *arrays):
        m = 1.0
        for a in arrays:
            if a is not None and a.size:
                m *= float(np.max(np.abs(np.nan_to_num(a.astype(np.float64))), initial=1.0))
        return m

    # ---- convolution and pooling -----------------------------------------------------------------
    def _spatial(self, nsp, lo=1):
        return tuple(int(self.rng.integers(lo, 6)) for _ in range(nsp))

    def _window_attrs(self, k, nsp, pads=True, dil=True):
        r = self.rng
        attrs = {}
        if r.random() < 0.5:
            attrs["strides"] = [int(r.integers(1, 3)) for _ in range(nsp)]
        if dil and r.random() < 0.3:
            attrs["dilations"] = [int(r.integers(1, 3)) for _ in range(nsp)]
        if pads and r.random() < 0.5:
            if r.random() < 0.3:
                attrs["auto_pad"] = str(r.choice(["SAME_UPPER", "SAME_LOWER", "VALID"]))
            else:
                attrs["pads"] = [int(r.integers(0, min(kk, 2) + 1)) for kk in k] * 2
        return attrs

    def gen_Conv(self, cid):
        t = self._fl("Conv", 2)
        if t is None:
            return None
        r = self.rng
        nsp = int(r.choice([1, 2, 2, 3]))
        group = int(r.choice([1, 1, 2]))
        cin, cout = group * int(r.integers(1, 3)), group * int(r.integers(1, 3))
        k = self._spatial(nsp)
        x = floats(r, (rand_dim(r, 0.05), cin) + tuple(kk + int(r.integers(0, 4)) for kk in k),
                   t, -2, 2)
        w = floats(r, (cout, cin // group) + k, t, -1, 1)
        b = floats(r, (cout,), t, -1, 1) if r.random() < 0.5 else None
        attrs = self._window_attrs(k, nsp)
        if group > 1 or r.random() < 0.2:
            attrs["group"] = group
        return self.emit(cid, "Conv", [x, w, b], attrs, const_p=0.3, tol_scale=LOOSE,
                         mag=[self._mag(x, w) * int(np.prod(w.shape[1:]))])

    def gen_ConvTranspose(self, cid):
        t = self._fl("ConvTranspose", 2)
        if t is None:
            return None
        r = self.rng
        nsp = int(r.choice([1, 2, 2]))
        group = int(r.choice([1, 1, 2]))
        cin, cout = group * int(r.integers(1, 3)), group * int(r.integers(1, 3))
        k = self._spatial(nsp)
        x = floats(r, (rand_dim(r, 0.05), cin) + self._spatial(nsp), t, -2, 2)
        w = floats(r, (cin, cout // group) + k, t, -1, 1)
        b = floats(r, (cout,), t, -1, 1) if r.random() < 0.5 else None
        attrs = self._window_attrs(k, nsp, pads=r.random() < 0.5)
        if r.random() < 0.2:
            attrs["output_padding"] = [0] * nsp
        if group > 1:
            attrs["group"] = group
        return self.emit(cid, "ConvTranspose", [x, w, b], attrs, const_p=0.3, tol_scale=LOOSE,
                         mag=[self._mag(x, w) * int(np.prod(w.shape))])

    def _pool(self, cid, op):
        t = self._fl(op, 1, FL + ((U8, I8) if op == "MaxPool" else ()))
        if t is None:
            return None
        r = self.rng
        nsp = int(r.choice([1, 2, 2, 3]))
        k = self._spatial(nsp)
        x = data(r, (rand_dim(r, 0.05), int(r.integers(1, 4))) +
                 tuple(kk + int(r.integers(0, 4)) for kk in k), t)
        attrs = dict(self._window_attrs(k, nsp, dil=op != "AveragePool" or self.opset >= 19),
                     kernel_shape=list(k))
        if op != "LpPool" and self.opset >= 10 and r.random() < 0.3:
            attrs["ceil_mode"] = int(r.integers(2))
        if op == "AveragePool" and r.random() < 0.4:
            attrs["count_include_pad"] = int(r.integers(2))
        if op == "LpPool" and r.random() < 0.6:
            attrs["p"] = int(r.choice([1, 2, 3]))
        n_out = 2 if op == "MaxPool" and r.random() < 0.2 else 1
        if n_out == 2 and r.random() < 0.5:
            attrs["storage_order"] = int(r.integers(2))
        return self.emit(cid, op, [x], attrs, n_out=n_out, tol_scale=LOOSE,
                         mag=[self._mag(x) * int(np.prod(k))] * n_out)

    def gen_MaxPool(self, cid):
        return self._pool(cid, "MaxPool")

    def gen_AveragePool(self, cid):
        return self._pool(cid, "AveragePool")

    def gen_LpPool(self, cid):
        return self._pool(cid, "LpPool")

    def _global(self, cid, op):
        t = self._fl(op)
        if t is None:
            return None
        r = self.rng
        x = floats(r, (rand_dim(r), rand_dim(r)) + rand_shape(r, lo=1, hi=3), t, -3, 3)
        attrs = {"p": int(r.choice([1, 2, 3]))} if op == "GlobalLpPool" and r.random() < 0.5 \
            else {}
        return self.emit(cid, op, [x], attrs, tol_scale=LOOSE, mag=[self._mag(x) * 4])

    def gen_GlobalAveragePool(self, cid):
        return self._global(cid, "GlobalAveragePool")

    def gen_GlobalMaxPool(self, cid):
        return self._global(cid, "GlobalMaxPool")

    def gen_GlobalLpPool(self, cid):
        return self._global(cid, "GlobalLpPool")

    # ---- normalisations ------------------------------------------------------------------------
    def _nchw(self, t, lo=1):
        r = self.rng
        return floats(r, (rand_dim(r, 0.05), int(r.integers(1, 5))) + rand_shape(r, lo=lo, hi=2),
                      t, -3, 3, special_p=0.03 if r.random() < 0.2 else 0.0)

    def gen_LRN(self, cid):
        t = self._fl("LRN")
        if t is None:
            return None
        r = self.rng
        attrs = {"size": int(r.choice([1, 2, 3, 5]))}
        for k, v in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)):
            if r.random() < 0.4:
                attrs[k] = float(v * r.uniform(0.5, 2))
        x = self._nchw(t)
        return self.emit(cid, "LRN", [x], attrs, tol_scale=LOOSE,
                         reference=lambda: [_lrn_ref(x, attrs)])

    def gen_MeanVarianceNormalization(self, cid):
        t = self._fl("MeanVarianceNormalization")
        if t is None:
            return None
        r = self.rng
        x = self._nchw(t)
        attrs = {"axes": [0, 2, 3][:x.ndim - 1]} if r.random() < 0.3 else {}
        if x.ndim < 4 and not attrs:
            attrs = {"axes": [0, 2][:x.ndim - 1]}
        c = self.emit(cid, "MeanVarianceNormalization", [x], attrs, tol_scale=LOOSE, mag=[4.0])
        # The node's axes when the reference runs: a hostile value may have replaced them (seed
        # 22, o3_43: axes [-1] over a dim of 1, where the reference used the default axes).
        c.reference = lambda: [_mvn_ref(x, _node_attrs(c.nodes[0]).get("axes", [0, 2, 3]))]
        return c

    def gen_BatchNormalization(self, cid):
        t = self._fl("BatchNormalization", 5)
        if t is None:
            return None
        r = self.rng
        x = self._nchw(t)
        c = x.shape[1]
        arrays = [x, floats(r, (c,), t, -2, 2), floats(r, (c,), t, -2, 2),
                  floats(r, (c,), t, -2, 2), floats(r, (c,), t, 0.1, 3)]
        attrs = {}
        if r.random() < 0.4:
            attrs["epsilon"] = float(r.choice([1e-5, 1e-3, 0.0]))
        if r.random() < 0.2:
            attrs["momentum"] = 0.9
        if self.opset >= 14 and r.random() < 0.1:
            attrs["training_mode"] = 0
        return self.emit(cid, "BatchNormalization", arrays, attrs, const_p=0.5, tol_scale=LOOSE,
                         mag=[self._mag(*arrays[:2]) * 10])

    def gen_InstanceNormalization(self, cid):
        t = self._fl("InstanceNormalization", 3)
        if t is None:
            return None
        r = self.rng
        x = self._nchw(t)
        c = x.shape[1]
        attrs = {"epsilon": float(r.choice([1e-5, 1e-2]))} if r.random() < 0.4 else {}
        scale, bias = floats(r, (c,), t, -2, 2), floats(r, (c,), t, -2, 2)
        eps = attrs.get("epsilon", 1e-5)
        return self.emit(cid, "InstanceNormalization", [x, scale, bias], attrs,
                         const_p=0.5, tol_scale=LOOSE, mag=[8.0],
                         reference=lambda: [_instance_norm_ref(x, scale, bias, eps)])

    def gen_GroupNormalization(self, cid):
        t = self._fl("GroupNormalization", 3)
        if t is None:
            return None
        r = self.rng
        g = int(r.integers(1, 4))
        x = floats(r, (rand_dim(r, 0.05), g * int(r.integers(1, 3))) + rand_shape(r, lo=1, hi=2),
                   t, -3, 3)
        c = x.shape[1]
        nsc = c if self.opset >= 21 else g
        attrs = {"num_groups": g}
        if r.random() < 0.06:
            attrs["num_groups"] = hpick(r, [0, -1, 1 << 31, 1 << 32, (1 << 63) - 1])
        if r.random() < 0.3:
            attrs["epsilon"] = float(r.choice([1e-5, 1e-2]))
        arrays = [x, floats(r, (nsc,), t, -2, 2), floats(r, (nsc,), t, -2, 2)]
        case = self.emit(cid, "GroupNormalization", arrays, attrs, const_p=0.5,
                         tol_scale=LOOSE, mag=[8.0])
        # The float64 tie-breaker (seed 22, o34_52: a group of -2.5244 and -2.5270, whose
        # variance ORT CPU's float32 arithmetic loses: -1.6940 where the answer is -1.6765).
        case.reference = lambda: _group_norm_ref(*arrays, _node_attrs(case.nodes[0]))
        return case

    def gen_LpNormalization(self, cid):
        t = self._fl("LpNormalization")
        if t is None:
            return None
        r = self.rng
        x = floats(r, rand_shape(r, lo=1), t, -3, 3)
        attrs = {}
        if r.random() < 0.6:
            attrs["axis"] = int(r.integers(-x.ndim, x.ndim))
        if r.random() < 0.6:
            attrs["p"] = int(r.choice([1, 2]))
        return self.emit(cid, "LpNormalization", [x], attrs, tol_scale=LOOSE, mag=[1.0])

    def gen_LogSoftmax(self, cid):
        t = self._fl("LogSoftmax")
        if t is None:
            return None
        r = self.rng
        x = floats(r, rand_shape(r, lo=1), t, -5, 5,
                   special_p=0.05 if r.random() < 0.2 else 0.0)
        attrs = {"axis": int(r.integers(-x.ndim, x.ndim))} if r.random() < 0.8 else {}
        return self.emit(cid, "LogSoftmax", [x], attrs, tol_scale=LOOSE, mag=[10.0])

    def _rms(self, cid, op, domain=""):
        if op == "RMSNormalization":
            t = self._fl(op, 2, FL)
        else:  # ORT's own op: no ONNX schema to check types against
            t = int(self.rng.choice([F32, F32, F16, F64]))
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r, lo=1)
        x = floats(r, shape, t, -3, 3, special_p=0.03 if r.random() < 0.2 else 0.0)
        axis = int(r.integers(-len(shape), len(shape)))
        attrs = {"axis": axis} if r.random() < 0.7 else {}
        if r.random() < 0.4:
            attrs["epsilon"] = float(r.choice([1e-5, 1e-6, 1e-2]))
        nshape = shape[axis if "axis" in attrs else -1:]
        scale = floats(r, nshape, t, -2, 2)
        c = self.emit(cid, op, [x, scale], attrs, domain=domain, const_p=0.4, tol_scale=LOOSE,
                      mag=[4.0])
        # float64 reference: rows holding a value beyond ~1.8e19 overflow ORT's float32 mean
        # square (its outputs become 0); the EP scales such rows first (o57_189).
        c.reference = lambda: _rms_ref(x, scale, c.nodes[0])
        return c

    def gen_RMSNormalization(self, cid):
        return self._rms(cid, "RMSNormalization")

    def gen_SimplifiedLayerNormalization(self, cid):
        return self._rms(cid, "SimplifiedLayerNormalization")

    def _skip_norm(self, cid, op):
        r = self.rng
        t = int(r.choice([F32, F32, F16]))
        b, s, h = rand_dim(r, 0.05), int(r.integers(1, 4)), int(r.choice([2, 4, 8]))
        x, skip = floats(r, (b, s, h), t, -2, 2), floats(r, (b, s, h), t, -2, 2)
        arrays = [x, skip, floats(r, (h,), t, -2, 2)]
        if op == "SkipLayerNormalization":
            arrays.append(floats(r, (h,), t, -1, 1) if r.random() < 0.6 else None)
        else:
            arrays.append(None)
        arrays.append(floats(r, (h,), t, -1, 1) if r.random() < 0.4 else None)
        attrs = {"epsilon": float(r.choice([1e-5, 1e-12]))} if r.random() < 0.5 else {}
        return self.emit(cid, op, arrays, attrs, domain=MS, const_p=0.4, tol_scale=LOOSE,
                         n_out=1 if r.random() < 0.7 else 4, mag=[4.0, 4.0, 4.0, 4.0])

    def gen_ms_SkipLayerNormalization(self, cid):
        return self._skip_norm(cid, "SkipLayerNormalization")

    def gen_ms_SkipSimplifiedLayerNormalization(self, cid):
        return self._skip_norm(cid, "SkipSimplifiedLayerNormalization")

    # ---- Resize --------------------------------------------------------------------------------
    def gen_DFT(self, cid):
        """DFT (opsets 17, 20): real or complex signal, forward/inverse/onesided, dft_length
        padding or truncating (sometimes 0, negative or huge), axis attribute or input
        (sometimes the batch axis, the last one or out of range), empty batches and other empty
        non-signal dims. Finite data only: where a NaN or Inf reaches a bin differs between
        FFT algorithms (ORT sums non-power-of-2 lengths directly)."""
        if self.opset < 17:
            return None
        r = self.rng
        cplx = r.random() < 0.5
        shape = [rand_dim(r, 0.05) if r.random() < 0.5 else int(r.integers(1, 3)),
                 int(r.integers(1, 9)), int(r.integers(1, 5)), 2 if cplx else 1]
        axis = int(r.choice([1, 2]))
        if r.random() < 0.05:
            shape[3 - axis] = 0  # an empty dim beside the signal axis: an empty result
        shape = tuple(shape)
        x = floats(r, shape, F32, -2, 2)
        attrs = {}
        if r.random() < 0.4:
            attrs["inverse"] = 1
        if not cplx and r.random() < 0.3:
            attrs["onesided"] = 1
        length = None
        if r.random() < 0.4:
            length = int(r.integers(1, 12))
            if r.random() < 0.1:
                length = hpick(r, [0, -1, 1 << 31, 1 << 40])
        arrays = [x, None if length is None else np.asarray(length, np.int64)]
        if self.opset >= 20:
            ax = axis - 4 if r.random() < 0.5 else axis
            if r.random() < 0.05:
                ax = hpick(r, [0, -4, 3, -1, 4, -5, 1 << 40])  # 0, -4: the batch axis
            arrays.append(np.asarray(ax, np.int64))
        else:
            attrs["axis"] = axis
        while arrays and arrays[-1] is None:
            arrays.pop()
        return self.emit(cid, "DFT", arrays, attrs, const_p=0.3, tol_scale=LOOSE,
                         mag=[self._mag(x) * shape[axis] * 4])

    def gen_STFT(self, cid):
        """STFT (opset 17): real ([batch, length] or [.., 1]) or complex signal, a window (1-D,
        or 2-D: ORT takes its first dim as the size) and/or frame_length (sometimes disagreeing,
        zero, negative or past the signal), frame_step (sometimes 0, negative, or beyond int32
        with one frame), onesided 0/1, empty batches. Finite signals only (as DFT)."""
        if self.opset < 17:
            return None
        r = self.rng
        cplx = r.random() < 0.3
        length = int(r.integers(1, 24))
        shape = (rand_dim(r, 0.05), length) + (() if r.random() < 0.15 and not cplx else
                                                (2 if cplx else 1,))
        x = floats(r, shape, F32, -2, 2)
        flen = int(r.integers(1, length + 1))
        it = I64 if r.random() < 0.7 else I32
        step = int(r.integers(1, 6))
        if r.random() < 0.08:
            step = hpick(r, [0, -1] + ([1 << 31, 1 << 40, (1 << 63) - 1] if it == I64 else
                                       [(1 << 31) - 1]))
        window = None
        if not cplx and r.random() < 0.6:
            window = floats(r, (flen,) if r.random() < 0.95 else (flen, int(r.integers(1, 3))),
                            F32, -1, 1)
        flen_in = None
        if window is None or r.random() < 0.3:
            flen_in = flen if r.random() > 0.1 else hpick(r, [-1, length + 1, flen + 1])
        arrays = [x, np.asarray(step, NP_OF[it]), window,
                  None if flen_in is None else np.asarray(flen_in, NP_OF[it])]
        while arrays[-1] is None:
            arrays.pop()
        attrs = {"onesided": int(r.integers(0, 2))} if r.random() < 0.7 else {}
        return self.emit(cid, "STFT", arrays, attrs, const_p=0.3, tol_scale=LOOSE,
                         mag=[self._mag(x) * flen * 4])

    def gen_MelWeightMatrix(self, cid):
        """MelWeightMatrix (opset 17): random sizes and edges within the spectrum, sometimes
        reversed, equal, past it, negative, NaN or infinite; num_mel_bins sometimes 0 or -1,
        dft_length 0 or -1, sample_rate 0, 1, negative or 2^31 - 1; output_datatype float32 or a
        refused type."""
        if self.opset < 17:
            return None
        r = self.rng
        it = I64 if r.random() < 0.7 else I32
        rate = int(r.integers(100, 48001))
        dft = int(r.integers(1, 1025))
        num = int(r.integers(0, 50))
        lo, hi = sorted(float(v) for v in r.uniform(0, rate / 2 * dft / (dft + 1), size=2))
        if r.random() < 0.1:
            lo, hi = hi, lo
        if r.random() < 0.1:
            num, dft, rate = hpick(r, [(-1, dft, rate), (num, 0, rate), (num, -1, rate),
                                       (num, dft, 0), (num, dft, rate)])
        if r.random() < 0.08:
            lo, hi = hpick(r, [(-1.0, hi), (lo, float(rate)), (float("nan"), hi), (lo, lo),
                               (lo, float("inf")), (float("-inf"), hi), (0.0, 0.0),
                               (-0.0, hi)])
        if r.random() < 0.03:
            rate = hpick(r, [-rate, 1, (1 << 31) - 1])
        arrays = [np.asarray(num, NP_OF[it]), np.asarray(dft, NP_OF[it]),
                  np.asarray(rate, NP_OF[it]), np.asarray(lo, np.float32),
                  np.asarray(hi, np.float32)]
        attrs = {}
        if r.random() < 0.2:
            attrs["output_datatype"] = int(r.choice([F32, F64, I64, I32, U8]))
        return self.emit(cid, "MelWeightMatrix", arrays, attrs, const_p=0.1, mag=[1.0])

    def _legacy_resize(self, cid, op):
        """Upsample 7-9 and Resize 10: nearest/linear with scales (attribute before opset 9,
        else input 1), sometimes hostile (below 1, zero, negative, NaN, huge) or too short."""
        r = self.rng
        t = int(r.choice([F32, F32, U8, I8, I32]))
        rank = int(r.integers(1, 6))
        shape = tuple(rand_dim(r, 0.05) if i == 0 else int(r.integers(1, 5)) for i in range(rank))
        x = data(r, shape, t)
        mode = str(r.choice(["nearest", "linear"]))
        lo = 0.3 if op == "Resize" else 1.0
        scales = [1.0 if (mode == "linear" and i < rank - 3 + (rank % 2 == 0)) or r.random() < 0.3
                  else float(r.choice([lo, 1.5, 2.0, 2.5, 3.0])) for i in range(rank)]
        if r.random() < 0.06:
            scales[int(r.integers(rank))] = hpick(r, [0.0, -1.0, 0.5, float("nan"), 1e12])
        if r.random() < 0.03:
            scales = scales[:-1]
        s = np.asarray(scales, np.float32)
        if op == "Upsample" and self.opset < 9:
            return self.emit(cid, op, [x], {"mode": mode, "scales": s.tolist()}, tol_scale=LOOSE,
                             mag=[self._mag(x) * 2])
        return self.emit(cid, op, [x, s], {"mode": mode}, const_p=0.7, tol_scale=LOOSE,
                         mag=[self._mag(x) * 2])

    def gen_Upsample(self, cid):
        if self.opset > 9:
            return None
        return self._legacy_resize(cid, "Upsample")

    def gen_Resize(self, cid):
        if self.opset == 10:
            return self._legacy_resize(cid, "Resize")
        t = self.types_for("Resize", lambda t: ([t, F32, F32, I64], [t]), (F32, F32, U8, I8))
        if t is None or self.opset < 11:
            return None
        r = self.rng
        shape = (rand_dim(r, 0.05), int(r.integers(1, 3))) + rand_shape(r, lo=1, hi=2)
        x = data(r, shape, t)
        mode = str(r.choice(["nearest", "linear", "cubic"]))
        attrs = {"mode": mode}
        if r.random() < 0.5:
            attrs["coordinate_transformation_mode"] = str(r.choice(
                ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]))
        if mode == "nearest" and r.random() < 0.5:
            attrs["nearest_mode"] = str(r.choice(["round_prefer_floor", "floor", "ceil"]))
        antialias = self.opset >= 18 and mode != "nearest" and r.random() < 0.35
        if antialias:
            # Filter widened by 1 / scale when shrinking; exclude_outside applies to linear too.
            attrs["antialias"] = 1
            if r.random() < 0.5:
                attrs["exclude_outside"] = int(r.integers(0, 2))
            if mode == "cubic" and r.random() < 0.5:
                attrs["cubic_coeff_a"] = float(r.choice([-0.5, -0.75, -1.0]))
        roi = None if self.opset >= 13 else np.zeros((0,), np.float32)
        if r.random() < 0.5:
            choices = [0.3, 0.5, 0.75, 1.0, 1.5, 2.0] if antialias else [0.5, 1.0, 1.5, 2.0, 3.0]
            scales = np.asarray([1, 1] + [float(r.choice(choices))
                                          for _ in shape[2:]], np.float32)
            arrays = [x, roi, scales]
        else:
            sizes = [shape[0], shape[1]] + [int(r.integers(1, 7)) for _ in shape[2:]]
            if r.random() < 0.1:
                sizes = [shape[0], shape[1]] + huge_shape(r, len(shape) - 2)
            arrays = [x, roi if roi is not None else None, np.zeros((0,), np.float32)
                      if self.opset < 13 else None, np.asarray(sizes, np.int64)]
        i = 2 if arrays[2] is not None and arrays[2].size else 3
        if self.opset >= 18 and r.random() < 0.3:
            # The axes attribute: scales/sizes for the listed (spatial, maybe negative) axes only.
            rank = len(shape)
            axes = [a - rank if r.random() < 0.5 else a for a in range(2, rank)]
            attrs["axes"] = axes
            arrays[i] = np.asarray(arrays[i][2:], arrays[i].dtype)
        # Scales or sizes fed at run time (read on the host each run), sometimes with values ORT's
        # kernel rejects (zero, negative, NaN, huge) or one value short.
        runtime = r.random() < 0.4
        const = {1, 2, 3} - ({i} if runtime else set())
        if runtime and r.random() < 0.15:
            v = arrays[i].copy()
            if v.size and r.random() < 0.8:
                k = int(r.integers(v.size))
                v[k] = hpick(r, [0.0, -1.0, float("nan"), 1e12] if i == 2 else [0, -2, 1 << 31])
            elif v.size:
                v = v[:-1]
            arrays[i] = v
        return self.emit(cid, "Resize", arrays, attrs, const_idx=const, const_p=0.0,
                         tol_scale=LOOSE, mag=[self._mag(x) * 2])

    # ---- quantisation --------------------------------------------------------------------------
    def _qparams(self, x_shape, qt, axis, per_axis, st=F32):
        r = self.rng
        n = x_shape[axis] if per_axis else 1
        shape = (n,) if per_axis else ()
        scale = floats(r, shape, st, 0.01, 0.5)
        zp = ints(r, shape, qt, low=-10, high=10) if r.random() < 0.7 else None
        return scale, zp

    def gen_QuantizeLinear(self, cid):
        r = self.rng
        qt = int(r.choice([U8, I8]))
        xt = F32 if r.random() < 0.8 or self.opset < 19 else F16
        shape, axis = rand_shape_axis(r)
        per_axis = r.random() < 0.4
        x = floats(r, shape, xt, -20, 20, special_p=0.05 if r.random() < 0.2 else 0.0)
        scale, zp = self._qparams(shape, qt, axis, per_axis, xt)
        if zp is None:
            zp = np.zeros(scale.shape, NP_OF[qt]) if r.random() < 0.5 else None
        if per_axis and r.random() < 0.05 and scale.size > 1:
            scale = scale[:-1]
        attrs = {"axis": axis} if per_axis or r.random() < 0.2 else {}
        return self.emit(cid, "QuantizeLinear", [x, scale, zp], attrs, const_idx={1, 2})

    def gen_DequantizeLinear(self, cid):
        r = self.rng
        qt = int(r.choice([U8, I8, I32]))
        shape, axis = rand_shape_axis(r)
        per_axis = r.random() < 0.4
        x = ints(r, shape, qt, big_p=0.2)
        scale, zp = self._qparams(shape, qt, axis, per_axis)
        if per_axis and r.random() < 0.05 and scale.size > 1:
            scale = scale[:-1]
        attrs = {"axis": axis} if per_axis or r.random() < 0.2 else {}
        return self.emit(cid, "DequantizeLinear", [x, scale, zp], attrs, const_idx={1, 2})

    # ---- integer arithmetic (ops/quant_integer.cpp) ----------------------------------------
    def gen_DynamicQuantizeLinear(self, cid):
        if self.opset < 11:
            return None
        r = self.rng
        shape = rand_shape(r)
        kind = r.random()
        lo, hi = (0.1, 5) if kind < 0.2 else ((-5, -0.1) if kind < 0.4 else (-8, 8))
        x = floats(r, shape, F32, lo, hi, special_p=0.03 if r.random() < 0.1 else 0.0)
        if x.size and r.random() < 0.05:
            x = x * np.float32(hpick(r, [0.0, 1e30, 1e-30]))
        nan = " NaN in X" if np.isnan(x).any() else ""  # see known.py
        return self.emit(cid, "DynamicQuantizeLinear", [x], n_out=3, label=nan.strip())

    def _q8(self, shape, qt):
        """8-bit data, full range (the exactness bound of the integer sums)."""
        return ints(self.rng, shape, qt, big_p=0.7)

    def gen_MatMulInteger(self, cid):
        if self.opset < 10:
            return None
        r = self.rng
        ta, tb = int(r.choice([U8, I8])), int(r.choice([U8, I8]))
        m, n = rand_dim(r, 0.05), int(r.integers(1, 5))
        k = int(r.choice([1, 3, 17, 258, 259, 700]))
        batch = (int(r.integers(1, 3)),) if r.random() < 0.3 else ()
        a, b = self._q8(batch + (m, k), ta), self._q8((k, n), tb)
        za = self._q8((), ta) if r.random() < 0.7 else None
        zb = None
        if r.random() < 0.7:
            zb = self._q8((n,) if r.random() < 0.3 else (), tb)
            if r.random() < 0.04:
                zb = self._q8((n + 1,), tb)  # hostile: not one per column
        arrays = [a, b, za, zb]
        while arrays[-1] is None:
            arrays.pop()
        return self.emit(cid, "MatMulInteger", arrays, const_p=0.3)

    def _qlinear_params(self, ta, tw, n_w):
        r = self.rng
        sw = floats(r, (n_w,) if n_w else (), F32, 0.002, 0.05)
        zw = np.zeros(sw.shape, NP_OF[tw]) if tw == I8 and r.random() < 0.6 else \
            self._q8(sw.shape, tw)
        sy = floats(r, (), F32, 0.01, 2.0)
        if r.random() < 0.04:
            sy = np.asarray(hpick(r, [0.0, -1.0, 1e-30, float("inf")]), np.float32)
        return [floats(r, (), F32, 0.002, 0.05), self._q8((), ta), sw, zw, sy,
                self._q8((), ta)]

    def gen_QLinearMatMul(self, cid):
        if self.opset < 10:
            return None
        r = self.rng
        ta = int(r.choice([U8, I8]))
        tb = I8 if ta == I8 else int(r.choice([U8, I8]))
        m, n = rand_dim(r, 0.05), int(r.integers(1, 5))
        k = int(r.choice([1, 4, 33, 300]))
        a, b = self._q8((m, k), ta), self._q8((k, n), tb)
        sa, za, sb, zb, sy, zy = self._qlinear_params(ta, tb, n if r.random() < 0.3 else 0)
        return self.emit(cid, "QLinearMatMul", [a, sa, za, b, sb, zb, sy, zy], const_p=0.3)

    def _int_conv_shapes(self):
        r = self.rng
        nsp = int(r.choice([1, 2, 2, 3]))
        group = int(r.choice([1, 1, 2]))
        cin = group * int(r.choice([1, 2, 20, 40]))
        cout = group * int(r.integers(1, 3))
        k = self._spatial(nsp)
        xs = (rand_dim(r, 0.05), cin) + tuple(kk + int(r.integers(0, 4)) for kk in k)
        attrs = self._window_attrs(k, nsp)
        if group > 1 or r.random() < 0.2:
            attrs["group"] = group
        return xs, (cout, cin // group) + k, attrs

    def gen_ConvInteger(self, cid):
        if self.opset < 10:
            return None
        r = self.rng
        tx, tw = int(r.choice([U8, I8])), int(r.choice([U8, I8]))
        xs, ws, attrs = self._int_conv_shapes()
        x, w = self._q8(xs, tx), self._q8(ws, tw)
        zx = self._q8((), tx) if r.random() < 0.7 else None
        zw = self._q8((), tw) if r.random() < 0.7 else None
        arrays = [x, w, zx, zw]
        while arrays[-1] is None:
            arrays.pop()
        return self.emit(cid, "ConvInteger", arrays, attrs, const_p=0.3)

    def gen_QLinearConv(self, cid):
        if self.opset < 10:
            return None
        r = self.rng
        tx = int(r.choice([U8, I8]))
        tw = I8 if tx == I8 else int(r.choice([U8, I8]))
        xs, ws, attrs = self._int_conv_shapes()
        x, w = self._q8(xs, tx), self._q8(ws, tw)
        sx, zx, sw, zw, sy, zy = self._qlinear_params(tx, tw, ws[0] if r.random() < 0.4 else 0)
        b = r.integers(-20000, 20000, ws[0]).astype(np.int32) if r.random() < 0.5 else None
        return self.emit(cid, "QLinearConv", [x, sx, zx, w, sw, zw, sy, zy, b], attrs,
                         const_p=0.3)

    def gen_ms_MatMulNBits(self, cid):
        r = self.rng
        t = int(r.choice([F32, F32, F16]))
        bits = 4
        block = int(r.choice([16, 32, 64]))
        if r.random() < 0.06:
            block = hpick(r, [0, -1, 8, 1 << 31, 1 << 32, (1 << 63) - 1])
        bsz = block if block in (16, 32, 64) else 16
        n, k = int(r.integers(1, 6)), bsz * int(r.integers(1, 3))
        nb = (k + bsz - 1) // bsz
        a = floats(r, (rand_dim(r, 0.05), k), t, -1, 1)
        wq = r.integers(0, 256, size=(n, nb, bsz * bits // 8)).astype(np.uint8)
        scales = floats(r, (n * nb,), t, 0.01, 0.2)
        zp = r.integers(0, 256, size=(n * ((nb + 1) // 2),)).astype(np.uint8) \
            if r.random() < 0.4 else None
        attrs = {"K": k, "N": n, "bits": bits, "block_size": block}
        return self.emit(cid, "MatMulNBits", [a, wq, scales, zp], attrs, domain=MS,
                         const_idx={1, 2, 3}, tol_scale=LOOSE, mag=[k * 2.0])

    # ---- com.microsoft elementwise and matmul ----------------------------------------------------
    def _ms_unary(self, cid, op, attrs=None, bias=False):
        r = self.rng
        t = F32
        shape = rand_shape(r, lo=1)
        x = floats(r, shape, t, -5, 5, special_p=0.05 if r.random() < 0.2 else 0.0)
        arrays = [x]
        if bias:
            arrays.append(floats(r, shape[-1:], t, -1, 1) if op != "FastGelu" or
                          r.random() < 0.5 else None)
        return self.emit(cid, op, arrays, attrs or {}, domain=MS, tol_scale=LOOSE, mag=[5.0])

    def gen_ms_Gelu(self, cid):
        return self._ms_unary(cid, "Gelu")

    def gen_ms_QuickGelu(self, cid):
        attrs = {"alpha": float(self.rng.choice([1.702, 1.0, -0.5]))} \
            if self.rng.random() < 0.5 else {}
        return self._ms_unary(cid, "QuickGelu", attrs)

    def gen_ms_BiasGelu(self, cid):
        return self._ms_unary(cid, "BiasGelu", bias=True)

    def gen_ms_FastGelu(self, cid):
        return self._ms_unary(cid, "FastGelu", bias=True)

    def gen_ms_BiasAdd(self, cid):
        r = self.rng
        t = int(r.choice([F32, F16]))
        b, s, c = rand_dim(r, 0.05), int(r.integers(1, 4)), int(r.choice([1, 4, 8]))
        x, bias, skip = (floats(r, (b, s, c), t), floats(r, (c,), t), floats(r, (b, s, c), t))
        c_ = self.emit(cid, "BiasAdd", [x, bias, skip], domain=MS, reference_primary=True,
                       needs_cpu=False, reference=lambda: [x.astype(np.float64) + bias + skip],
                       tol_scale=4.0, mag=[4.0])
        return c_

    def gen_ms_FusedMatMul(self, cid):
        r = self.rng
        t = int(r.choice([F32, F32, F64]))
        m, k, n = rand_dim(r, 0.05), int(r.integers(1, 5)), int(r.integers(1, 5))
        ta, tb = int(r.integers(2)), int(r.integers(2))
        batch = rand_shape(r, hi=2)
        a = floats(r, batch + ((k, m) if ta else (m, k)), t, -2, 2)
        b = floats(r, batch + ((n, k) if tb else (k, n)), t, -2, 2)
        attrs = {"transA": ta, "transB": tb}
        if r.random() < 0.5:
            attrs["alpha"] = float(r.choice([0.5, 1.0, -2.0]))
        return self.emit(cid, "FusedMatMul", [a, b], attrs, domain=MS, tol_scale=LOOSE,
                         mag=[4.0 * k])

    # ---- attention -------------------------------------------------------------------------------
    def gen_Attention(self, cid):
        t = self._fl("Attention", 3, (F32, F32, F16))
        if t is None:
            return None
        r = self.rng
        b, sq, skv = rand_dim(r, 0.05), int(r.integers(1, 5)), int(r.integers(1, 5))
        hq = int(r.choice([1, 2, 4]))
        hkv = int(r.choice([h for h in (1, 2, 4) if hq % h == 0]))
        d = int(r.choice([4, 8]))
        q = floats(r, (b, hq, sq, d), t, -2, 2)
        k = floats(r, (b, hkv, skv, d), t, -2, 2)
        v = floats(r, (b, hkv, skv, d), t, -2, 2)
        arrays = [q, k, v]
        if r.random() < 0.3:
            arrays.append((r.random((sq, skv)) < 0.8) if r.random() < 0.5
                          else floats(r, (sq, skv), t, -2, 0))
        attrs = {}
        if r.random() < 0.4:
            attrs["is_causal"] = int(r.integers(2))
        if r.random() < 0.3:
            attrs["scale"] = float(r.uniform(0.1, 1))
        if r.random() < 0.2:
            attrs["softcap"] = float(r.choice([0.0, 5.0]))
        return self.emit(cid, "Attention", arrays, attrs, const_p=0.1, tol_scale=LOOSE,
                         mag=[2.0])

    def gen_ms_MultiHeadAttention(self, cid):
        r = self.rng
        b, sq, skv = rand_dim(r, 0.05), int(r.integers(1, 5)), int(r.integers(1, 5))
        h, d = int(r.choice([1, 2, 4])), int(r.choice([4, 8]))
        q = floats(r, (b, sq, h * d), F32, -2, 2)
        k = floats(r, (b, skv, h * d), F32, -2, 2)
        v = floats(r, (b, skv, h * d), F32, -2, 2)
        attrs = {"num_heads": h}
        if r.random() < 0.3:
            attrs["scale"] = float(r.uniform(0.1, 1))
        if r.random() < 0.05:
            attrs["num_heads"] = hpick(r, [0, -1, 3, 1 << 31])
        return self.emit(cid, "MultiHeadAttention", [q, k, v], attrs, domain=MS,
                         tol_scale=LOOSE, mag=[2.0])

    def gen_ms_GroupQueryAttention(self, cid):
        r = self.rng
        t = int(r.choice([F32, F32, F16]))
        b, s = int(r.integers(1, 3)), int(r.integers(1, 4))
        hkv = int(r.choice([1, 2]))
        hq = hkv * int(r.choice([1, 2]))
        d = int(r.choice([8, 16]))
        past = int(r.integers(0, 4))
        q = floats(r, (b, s, hq * d), t, -2, 2)
        k = floats(r, (b, s, hkv * d), t, -2, 2)
        v = floats(r, (b, s, hkv * d), t, -2, 2)
        pk = floats(r, (b, hkv, past, d), t, -2, 2)
        pv = floats(r, (b, hkv, past, d), t, -2, 2)
        total = past + s
        seqlens = np.full((b,), total - 1, np.int32)
        bad = ""
        if r.random() < 0.08:
            seqlens[int(r.integers(b))] = hpick(r, [total + 5, -3, 1 << 30, -(1 << 31)])
            bad = " (seqlens out of range)"
        tsl = np.asarray([total], np.int32)
        attrs = {"num_heads": hq, "kv_num_heads": hkv}
        if r.random() < 0.3:
            attrs["scale"] = float(r.uniform(0.1, 1))
        scale = attrs.get("scale", 1.0 / np.sqrt(d))
        n_out = int(r.integers(1, 4))
        # With a past, ORT's kernel appends the new keys and values in the present_key/value
        # outputs and attends over those buffers: without both outputs it reads memory it never
        # wrote (values off by order 1, or NaN). Those cases always ask for all three outputs.
        if past > 0:
            n_out = 3
        # ORT's kernel runs three regimes (group_query_attention_helper.h): a first prompt
        # (sequence length = total length), token generation (sequence length 1) and, for batch
        # 1 only, a later prompt over a past. Several sequences of a later prompt at once are
        # an error there: most such cases keep their first sequence only, one in ten stays
        # batched (the EP must raise as well). Decided by the case id, not by a draw, so that
        # the generator's stream (and every later case) is unchanged.
        mixed = b > 1 and s > 1 and past > 0
        if mixed and zlib.crc32(cid.encode()) % 10:
            q, k, v, pk, pv, seqlens = q[:1], k[:1], v[:1], pk[:1], pv[:1], seqlens[:1]
            mixed = False
            bad = " (seqlens out of range)" if (seqlens != total - 1).any() else ""
        ok = not mixed and bool((seqlens == total - 1).all())
        return self.emit(cid, "GroupQueryAttention", [q, k, v, pk, pv, seqlens, tsl], attrs,
                         domain=MS, n_out=n_out, const_p=0.1, tol_scale=LOOSE,
                         mag=[2.0, 2.0, 2.0],
                         label=f"seqlens={seqlens.tolist()}{bad}{' mixed-prompt' * mixed}",
                         reference=(lambda: _gqa_ref(q, k, v, pk, pv, hq, scale)[:n_out])
                         if ok else None)

    def gen_RotaryEmbedding(self, cid):
        """ONNX RotaryEmbedding (23): 3-D or 4-D input, 2-D caches with position_ids or 3-D
        caches without, sometimes a partial rotary_embedding_dim or bad num_heads."""
        if self.opset < 23:
            return None
        r = self.rng
        t = int(r.choice([F32, F32, F16]))
        b, s, h, d = rand_dim(r, 0.05), int(r.integers(1, 4)), int(r.choice([1, 2])), \
            int(r.choice([4, 8]))
        rot = int(r.choice([0, 0, 2, d]))
        half = (rot or d) // 2
        four_d = r.random() < 0.5
        x = floats(r, (b, h, s, d) if four_d else (b, s, h * d), t, -2, 2)
        attrs = {"interleaved": int(r.integers(2))} if r.random() < 0.6 else {}
        if rot:
            attrs["rotary_embedding_dim"] = rot
        if not four_d or r.random() < 0.3:
            attrs["num_heads"] = h if r.random() > 0.05 else hpick(r, [0, 3, h + 1])
        if r.random() < 0.5:
            rows = int(r.integers(s, s + 4))
            cos, sin = floats(r, (rows, half), t, -1, 1), floats(r, (rows, half), t, -1, 1)
            pos = r.integers(0, rows, size=(b, s)).astype(np.int64)
            arrays = [x, cos, sin, pos]
        else:
            arrays = [x, floats(r, (b, s, half), t, -1, 1), floats(r, (b, s, half), t, -1, 1)]
        return self.emit(cid, "RotaryEmbedding", arrays, attrs, const_p=0.3, tol_scale=LOOSE,
                         mag=[4.0])

    def gen_ms_RotaryEmbedding(self, cid):
        r = self.rng
        t = int(r.choice([F32, F32, F16]))
        b, s, h, d = rand_dim(r, 0.05), int(r.integers(1, 4)), int(r.choice([1, 2])), \
            int(r.choice([4, 8]))
        maxpos = int(r.integers(s, s + 4))
        x = floats(r, (b, s, h * d), t, -2, 2)
        pos = r.integers(0, maxpos, size=(b, s)).astype(np.int64)
        if pos.size and r.random() < 0.1:
            pos.flat[int(r.integers(pos.size))] = out_of_range(r, maxpos)
        elif r.random() < 0.3:
            pos = np.asarray([int(r.integers(0, maxpos - s + 1))], np.int64)
        cos = floats(r, (maxpos, d // 2), t, -1, 1)
        sin = floats(r, (maxpos, d // 2), t, -1, 1)
        attrs = {"interleaved": int(r.integers(2))} if r.random() < 0.5 else {}
        if r.random() < 0.5:
            attrs["num_heads"] = h
        return self.emit(cid, "RotaryEmbedding", [x, pos, cos, sin], attrs, domain=MS,
                         const_p=0.3, tol_scale=LOOSE, mag=[4.0],
                         label=f"pos={pos.ravel()[:4].tolist()}")


_ = (I32, I64, rand_shape)
