"""Op generators (mixin of gen_ops.OpCases): Shrink, Hardmax, the deprecated Scatter, Det, the
losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, with out-of-range and ignored
targets), CenterCropPad (with hostile target sizes), MaxUnpool (out-of-range indices),
Col2Im, AffineGrid, GridSample, RoiAlign and MaxRoiPool (out-of-range batch indices)."""

from __future__ import annotations

import numpy as np

from .fuzzlib import TensorProto
from .gen_data import data, floats, rand_dim, rand_shape, rand_shape_axis
from .hostile import hpick, out_of_range

F32, F16, F64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE
I8, I32, I64, U8 = TensorProto.INT8, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8
BOOL = TensorProto.BOOL
LOOSE = 30.0


class VisionGen:
    def gen_Shrink(self, cid):
        t = self.types_for("Shrink", lambda t: ([t], [t]), (F32, F32, F16, I32, I8))
        if t is None:
            return None
        r = self.rng
        attrs = {}
        if r.random() < 0.6:
            attrs["bias"] = float(r.choice([0.0, 0.5, -1.5, 3.0, 1e30]))
        if r.random() < 0.6:
            attrs["lambd"] = float(r.choice([0.0, 0.5, 2.0, -1.0, np.inf]))
        return self.emit(cid, "Shrink", [data(r, rand_shape(r), t, self.data_kind())], attrs)

    def gen_Hardmax(self, cid):
        t = self.types_for("Hardmax", lambda t: ([t], [t]), (F32, F32, F16))
        if t is None:
            return None
        r = self.rng
        shape, axis = rand_shape_axis(r)
        if self.opset < 11:
            axis %= len(shape)
        attrs = {"axis": axis} if r.random() < 0.8 else {}
        if r.random() < 0.03:
            attrs["axis"] = hpick(r, [len(shape), -len(shape) - 1, 1 << 40])
        x = floats(r, shape, t, -3, 3, special_p=0.05 if r.random() < 0.2 else 0.0,
                   specials=(np.inf, -np.inf, 0.0, -0.0, 1e30))
        if r.random() < 0.3 and x.size:
            x = np.round(x).astype(x.dtype)  # ties
        return self.emit(cid, "Hardmax", [x], attrs)

    def gen_Scatter(self, cid):
        t = self._any("Scatter", [I64, None])
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r, lo=1, hi=3, zero_p=0.03)
        axis = int(r.integers(-len(shape), len(shape)))
        a = axis % len(shape)
        if shape[a] == 0:
            return None
        ishape = tuple(int(r.integers(0, d + 1)) if i != a else int(r.integers(0, d + 1))
                       for i, d in enumerate(shape))
        # Distinct targets along the axis per line (Scatter has no reduction).
        perm = np.argsort(r.random(ishape[:a] + (shape[a],) + ishape[a + 1:]), axis=a)
        idx = np.take(perm, np.arange(ishape[a]), axis=a).astype(np.int64)
        idx = np.where(r.random(idx.shape) < 0.3, idx - shape[a], idx).astype(np.int64)
        if idx.size and r.random() < 0.08:
            idx.flat[int(r.integers(idx.size))] = out_of_range(r, shape[a])
        return self.emit(cid, "Scatter", [data(r, shape, t), idx, data(r, ishape, t)],
                         {"axis": axis}, const_p=0.3, label=f"idx={idx.ravel()[:6].tolist()}")

    def gen_Det(self, cid):
        t = self.types_for("Det", lambda t: ([t], [t]), (F32, F32, F16))
        if t is None:
            return None
        r = self.rng
        n = int(r.choice([0, 1, 2, 3, 4, 5, 8]))
        batch = rand_shape(r, hi=2)
        x = floats(r, batch + (n, n), t, -2, 2,
                   special_p=0.03 if r.random() < 0.1 else 0.0)
        if r.random() < 0.2 and n > 1:
            x[..., 0, :] = x[..., 1, :]  # singular
        return self.emit(cid, "Det", [x], tol_scale=LOOSE, mag=[max(1.0, 2.0 ** n)])

    def _loss(self, cid, op):
        t = self.types_for(op, lambda t: ([t, I64], [t]), (F32, F32, F16))
        if t is None:
            return None
        r = self.rng
        c = rand_dim(r, zero_p=0.02)
        shape = (rand_dim(r, zero_p=0.05), c) + rand_shape(r, hi=2, zero_p=0.03)
        x = floats(r, shape, t, -4, 2, special_p=0.03 if r.random() < 0.15 else 0.0)
        tgt_shape = (shape[0],) + shape[2:]
        tgt = self._idx(c, tgt_shape, hostile_p=0.08,
                        dt=np.int32 if r.random() < 0.3 else np.int64)
        attrs = {}
        if r.random() < 0.7:
            attrs["reduction"] = str(r.choice(["none", "sum", "mean"]))
        if r.random() < 0.5:
            ig = int(r.integers(-c - 1, c + 1)) if r.random() < 0.8 else \
                hpick(r, [-100, 1 << 40, -(1 << 63)])
            attrs["ignore_index"] = ig
            if tgt.size and -(1 << 31) <= ig < (1 << 31):
                tgt.flat[r.random(tgt.size) < 0.3] = ig
        arrays = [x, tgt]
        if r.random() < 0.5:
            arrays.append(floats(r, (c,), t, 0.0, 2.0))
        n_out = 2 if op == "SoftmaxCrossEntropyLoss" and r.random() < 0.5 else 1
        kw = {}
        xf = np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
        if attrs.get("reduction", "mean") != "none" and np.max(np.abs(xf), initial=0.0) > 1e4:
            # Terms of +-1e30 cancel in the sum, and the float32 summation order decides what is
            # left of the others (seed 24, o1_179: ORT CPU 0.0, the EP 9.81, from terms of
            # +-1.9e30): an absolute error scale of the summed magnitudes.
            wmax = max(1.0, float(np.max(arrays[2], initial=0.0))) if len(arrays) > 2 else 1.0
            kw["mag"] = [min(float(np.sum(np.abs(xf))) * wmax, 1e30), 0.0][:n_out]
        return self.emit(cid, op, arrays, attrs, n_out=n_out, const_p=0.2, tol_scale=LOOSE,
                         label=f"t={tgt.ravel()[:6].tolist()}", **kw)

    def gen_NegativeLogLikelihoodLoss(self, cid):
        return self._loss(cid, "NegativeLogLikelihoodLoss")

    def gen_SoftmaxCrossEntropyLoss(self, cid):
        return self._loss(cid, "SoftmaxCrossEntropyLoss")

    def gen_CenterCropPad(self, cid):
        t = self._any("CenterCropPad", [I64])
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r, lo=1, hi=3)
        rank = len(shape)
        attrs = {}
        axes = list(range(rank))
        if r.random() < 0.4:
            k = int(r.integers(1, rank + 1))
            axes = [int(a) for a in r.permutation(rank)[:k]]
            axes = [a - rank if r.random() < 0.3 else a for a in axes]
            attrs["axes"] = axes
        target = [int(r.integers(0, 7)) for _ in axes]
        if r.random() < 0.05:
            target[0] = hpick(r, [-1, 1 << 31, 1 << 40])
        sh = np.asarray(target, np.int64 if r.random() < 0.7 else np.int32) \
            if abs(target[0]) < (1 << 31) else np.asarray(target, np.int64)
        return self.emit(cid, "CenterCropPad", [data(r, shape, t), sh], attrs, const_p=0.6,
                         label=f"shape={target}")

    def gen_MaxUnpool(self, cid):
        t = self.types_for("MaxUnpool", lambda t: ([t, I64], [t]), (F32, F32, F16))
        if t is None:
            return None
        r = self.rng
        nd = int(r.integers(1, 4))
        ks = [int(r.integers(1, 4)) for _ in range(nd)]
        st = [int(r.integers(1, 3)) for _ in range(nd)]
        pads = [int(r.integers(0, k)) for k in ks] + [0] * nd
        shape = (rand_dim(r, zero_p=0.05), int(r.integers(1, 3))) + \
            tuple(int(r.integers(1, 4)) for _ in range(nd))
        out = shape[:2] + tuple((shape[2 + i] - 1) * st[i] - pads[i] - pads[i + nd] + ks[i]
                                for i in range(nd))
        total = int(np.prod(out))
        x = floats(r, shape, t, -3, 3)
        arrays = [x]
        if total <= 0 or total < x.size:
            return None
        idx = r.permutation(total)[:x.size].reshape(shape).astype(np.int64)
        if idx.size and r.random() < 0.08:
            idx.flat[int(r.integers(idx.size))] = hpick(r, [total, -1, 1 << 40, -(1 << 63)])
        arrays.append(idx)
        if r.random() < 0.3:
            extra = [int(r.integers(0, 3)) for _ in range(nd)]
            arrays.append(np.asarray(list(out[:2]) + [d + e for d, e in zip(out[2:], extra)],
                                     np.int64))
        attrs = {"kernel_shape": ks}
        if r.random() < 0.7 or any(s != 1 for s in st):
            attrs["strides"] = st
        if any(pads):
            attrs["pads"] = pads
        return self.emit(cid, "MaxUnpool", arrays, attrs, const_p=0.3,
                         label=f"idx={idx.ravel()[:6].tolist()}")

    def gen_Col2Im(self, cid):
        t = self.types_for("Col2Im", lambda t: ([t, I64, I64], [t]), (F32, F32, F16))
        if t is None:
            return None
        r = self.rng
        nd = int(r.choice([1, 2, 2, 3]))
        img = [int(r.integers(1, 6)) for _ in range(nd)]
        blk = [int(r.integers(1, 4)) for _ in range(nd)]
        st = [int(r.integers(1, 3)) for _ in range(nd)]
        dil = [int(r.integers(1, 3)) if nd == 2 else 1 for _ in range(nd)]
        pads = [int(r.integers(0, 2)) for _ in range(2 * nd)]
        slides = [(img[i] + pads[i] + pads[i + nd] - (dil[i] * (blk[i] - 1) + 1)) // st[i] + 1
                  for i in range(nd)]
        if any(s <= 0 for s in slides):
            return None
        c = int(r.integers(1, 3))
        x = floats(r, (rand_dim(r, zero_p=0.05), c * int(np.prod(blk)), int(np.prod(slides))),
                   t, -3, 3)
        if r.random() < 0.05 and x.shape[2] > 0:
            x = x[:, :, :-1]  # a block count that does not match
        attrs = {}
        if r.random() < 0.7:
            attrs["strides"] = st
        elif any(s != 1 for s in st):
            return None
        if any(pads):
            attrs["pads"] = pads
        if any(d != 1 for d in dil):
            attrs["dilations"] = dil
        return self.emit(cid, "Col2Im", [x, np.asarray(img, np.int64), np.asarray(blk, np.int64)],
                         attrs, const_idx=(1, 2) if r.random() < 0.8 else (), tol_scale=LOOSE,
                         label=f"img={img} blk={blk}")

    def gen_AffineGrid(self, cid):
        t = self.types_for("AffineGrid", lambda t: ([t, I64], [t]), (F32, F32, F64))
        if t is None:
            return None
        r = self.rng
        sd = int(r.choice([2, 3]))
        n = rand_dim(r, zero_p=0.05)
        size = [n, int(r.integers(1, 4))] + [int(r.integers(1, 5)) for _ in range(sd)]
        if r.random() < 0.05:
            size[int(r.integers(2, 2 + sd))] = hpick(r, [0, -1])
        theta = floats(r, (n, sd, sd + 1), t, -2, 2,
                       special_p=0.05 if r.random() < 0.1 else 0.0)
        attrs = {"align_corners": int(r.integers(2))} if r.random() < 0.7 else {}
        # Absolute error scale: each value sums sd + 1 products of theta with coordinates in
        # [-1, 1], so a value near 0 has cancelled terms of theta's size (fuzz seed 5).
        return self.emit(cid, "AffineGrid", [theta, np.asarray(size, np.int64)], attrs,
                         const_p=0.5, tol_scale=4.0, label=f"size={size}",
                         mag=[self._mag(np.where(np.isfinite(theta), theta, 0))])

    def gen_GridSample(self, cid):
        """GridSample (16-19, 20+): every mode and padding mode, align_corners, 4-D and (20+)
        5-D, grids reaching outside the image (far outside, up to 1e3 image sizes), empty
        batches, grids and images, NaN and infinite pixels, a grid batch unlike the image's.
        Finite grids only: ORT 1.30 answers a NaN or infinite coordinate as if it were -1
        (docs/RELIABILITY.md), the EP with NaN."""
        if self.opset < 16:
            return None
        r = self.rng
        t = F32 if r.random() < 0.9 else F64
        nd = 3 if self.opset >= 20 and r.random() < 0.3 else 2
        modes = ["linear", "nearest"] + (["cubic"] if nd == 2 else [])
        if self.opset < 20:
            modes = ["bilinear", "nearest", "bicubic"]
        mode = str(r.choice(modes))
        pad = str(r.choice(["zeros", "border", "reflection"]))
        n = rand_dim(r, zero_p=0.05)
        x_shape = (n, int(r.integers(1, 4))) + tuple(
            int(r.integers(1, 6)) if r.random() > 0.03 else hpick(r, [0]) for _ in range(nd))
        g_shape = (n,) + tuple(int(r.integers(0 if r.random() < 0.05 else 1, 5))
                               for _ in range(nd)) + (nd,)
        spread = float(r.choice([1.0, 1.2, 3.0, 1e3]))
        if r.random() < 0.03 and n > 0:
            g_shape = (hpick(r, [n + 1, n - 1]),) + g_shape[1:]  # ORT raises
        grid = floats(r, g_shape, t, -spread, spread)
        x = floats(r, x_shape, t, -2, 2, special_p=0.05 if r.random() < 0.15 else 0.0,
                   specials=(np.nan, np.inf, -np.inf))
        attrs = {"mode": mode, "padding_mode": pad}
        if r.random() < 0.6:
            attrs["align_corners"] = int(r.integers(2))
        if r.random() < 0.15:
            attrs.pop("mode" if r.random() < 0.5 else "padding_mode")
        return self.emit(cid, "GridSample", [x, grid], attrs, const_p=0.2, tol_scale=4.0,
                         mag=[self._mag(np.where(np.isfinite(x), x, 0)) * 4])

    def gen_RoiAlign(self, cid):
        """RoiAlign (10-15, 16+): avg/max, fixed or adaptive grids, both coordinate modes,
        regions inside, past, reversed or empty, batch indices sometimes out of range, empty
        region lists and channels; hostile: regions holding NaN or Inf (ORT raises), a
        spatial_scale that is infinite, NaN, 1e38, 0 or negative (fixed grids: NaN sample
        points), NaN and infinite pixels (avg only: ORT's max keeps a NaN only as the first of
        a bin's samples, the EP propagates it; docs/RELIABILITY.md)."""
        if self.opset < 10:
            return None
        r = self.rng
        t = F32 if r.random() < 0.9 else F64
        n = int(r.integers(1, 3))
        shape = (n, rand_dim(r, zero_p=0.05), int(r.integers(1, 9)), int(r.integers(1, 9)))
        nr = int(r.integers(0, 5))
        scale = float(r.choice([1.0, 0.5, 0.25, 2.0]))
        h, w = shape[2] / scale, shape[3] / scale
        x1, y1 = r.uniform(-2, w, nr), r.uniform(-2, h, nr)
        rois = np.stack([x1, y1, x1 + r.uniform(-1, w, nr), y1 + r.uniform(-1, h, nr)], 1)
        batch = r.integers(0, n, nr).astype(np.int64)
        if nr and r.random() < 0.05:
            batch[0] = hpick(r, [n, -1])
        attrs = {"output_height": int(r.integers(1, 4)), "output_width": int(r.integers(1, 4))}
        if r.random() < 0.7:
            attrs["sampling_ratio"] = int(r.integers(0, 4))
        if r.random() < 0.5:
            attrs["mode"] = str(r.choice(["avg", "max"]))
        if scale != 1.0 or r.random() < 0.3:
            attrs["spatial_scale"] = scale
        if self.opset >= 16 and r.random() < 0.5:
            attrs["coordinate_transformation_mode"] = str(
                r.choice(["half_pixel", "output_half_pixel"]))
        adaptive = attrs.get("sampling_ratio", 0) == 0
        half = self.opset >= 16 and attrs.get("coordinate_transformation_mode",
                                              "half_pixel") == "half_pixel"
        if adaptive and half:
            # ORT 1.30 aborts (a pre-calculation index past its vector) when the adaptive grid
            # is negative along one axis only: regions reversed along one axis are not drawn.
            rois[:, 2:] = np.maximum(rois[:, 2:], rois[:, :2])
        if nr and r.random() < 0.03:
            rois[int(r.integers(nr)), int(r.integers(4))] = hpick(r, [np.nan, np.inf, -np.inf])
        if not adaptive and r.random() < 0.04:
            attrs["spatial_scale"] = float(hpick(r, [np.inf, np.nan, 1e38, 0.0, -1.0]))
        avg = attrs.get("mode", "avg") == "avg"
        x = floats(r, shape, t, -2, 2, special_p=0.05 if avg and r.random() < 0.15 else 0.0,
                   specials=(np.nan, np.inf, -np.inf))
        return self.emit(cid, "RoiAlign", [x, rois.astype(x.dtype), batch], attrs,
                         const_p=0.3, tol_scale=4.0,
                         mag=[self._mag(np.where(np.isfinite(x), x, 0))])

    def gen_MaxRoiPool(self, cid):
        t = self.types_for("MaxRoiPool", lambda t: ([t, t], [t]), (F32, F32, F16))
        if t is None:
            return None
        r = self.rng
        shape = (rand_dim(r, zero_p=0.03), int(r.integers(1, 3)), rand_dim(r, zero_p=0.05),
                 rand_dim(r, zero_p=0.05))
        nr = int(r.integers(0, 4))
        scale = float(r.choice([1.0, 0.5, 2.0, 0.25]))
        h, w = max(shape[2], 1), max(shape[3], 1)
        b = r.integers(0, max(shape[0], 1), size=(nr, 1)).astype(np.float64)
        if nr and r.random() < 0.08:
            b[0, 0] = hpick(r, [shape[0], -1, 1e10])
        x1, y1 = r.uniform(-2, w / scale, (nr, 1)), r.uniform(-2, h / scale, (nr, 1))
        rois = np.concatenate([b, x1, y1, x1 + r.uniform(-1, w / scale, (nr, 1)),
                               y1 + r.uniform(-1, h / scale, (nr, 1))], axis=1)
        pooled = [int(r.integers(1, 4)), int(r.integers(1, 4))]
        # NaN is left out: ORT's running max keeps one only as the last element of its bin.
        x = floats(r, shape, t, -3, 3, special_p=0.03 if r.random() < 0.2 else 0.0,
                   specials=(np.inf, -np.inf, 0.0, -0.0, 1e30))
        return self.emit(cid, "MaxRoiPool", [x, rois.astype(x.dtype)],
                         {"pooled_shape": pooled, "spatial_scale": scale}, const_p=0.3,
                         label=f"rois={rois.round(2).tolist()[:2]}")
