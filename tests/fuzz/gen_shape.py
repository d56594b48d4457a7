"""Op generators (mixin of gen_ops.OpCases): shape and data movement (Shape, Size, Slice, Split,
Tile, Expand, ConstantOfShape, EyeLike, Range, Hann/Hamming/BlackmanWindow, Pad, DepthToSpace,
SpaceToDepth, ReverseSequence, Trilu, OneHot) and indexing (Gather*, Scatter*), with huge targets and out-of-range indices."""

from __future__ import annotations

import numpy as np
from onnx import helper

from .fuzzlib import NP_OF, TensorProto
from .gen_data import data, rand_dim, rand_shape, rand_shape_axis
from .hostile import hpick, mark, huge_dim, huge_shape, out_of_range

F32, F16, F64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE
I8, I32, I64, U8 = TensorProto.INT8, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8
BOOL = TensorProto.BOOL
ANY = (F32, F32, F16, F64, I8, I32, I64, U8, BOOL)


class ShapeGen:
    def _any(self, op, extra=()):
        return self.types_for(op, lambda t: ([t] + list(extra), [t]), ANY)

    def _idx(self, n, shape, hostile_p=0.06, neg_p=0.3, dt=np.int64):
        """Indices into an axis of size n (negative ones too; sometimes one out of range)."""
        r = self.rng
        if n == 0:
            a = np.zeros(shape, dtype=dt)
        else:
            a = r.integers(0, n, size=shape)
            a = np.where(r.random(shape) < neg_p, a - n, a).astype(dt)
        if a.size and r.random() < hostile_p:
            bad = out_of_range(r, n)
            if np.iinfo(dt).min <= bad <= np.iinfo(dt).max:
                a.flat[int(r.integers(a.size))] = bad
        return a

    def gen_Shape(self, cid):
        t = self._any("Shape")
        r = self.rng
        shape = rand_shape(r)
        attrs = {}
        if self.opset >= 15:
            for k in ("start", "end"):
                if r.random() < 0.4:
                    attrs[k] = int(r.integers(-len(shape) - 2, len(shape) + 3))
        return self.emit(cid, "Shape", [data(r, shape, t or F32)], attrs)

    def gen_Size(self, cid):
        return self.emit(cid, "Size", [data(self.rng, rand_shape(self.rng), self._any("Size")
                                            or F32)])

    def gen_Slice(self, cid):
        t = self._any("Slice", [I64, I64] if self.opset >= 10 else [])
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r, lo=1)
        rank = len(shape)
        axes = list(r.choice(rank, size=int(r.integers(1, rank + 1)), replace=False))
        starts, ends, steps = [], [], []
        for a in axes:
            n = shape[a]
            big = [0, n, -n - 1, 1 << 31, -(1 << 31), (1 << 63) - 1, -(1 << 63)]
            starts.append(int(r.integers(-n - 1, n + 2)) if r.random() < 0.85 else
                                  hpick(r, big))
            ends.append(int(r.integers(-n - 1, n + 2)) if r.random() < 0.85 else
                                hpick(r, big))
            steps.append(int(r.choice([1, 1, 2, -1, -2, 3])) if r.random() < 0.95 else
                         hpick(r, [0, 1 << 31, -(1 << 63)]))
        axes = [int(a) - (rank if r.random() < 0.3 else 0) for a in axes]
        arrays = [data(r, shape, t), np.asarray(starts, np.int64), np.asarray(ends, np.int64)]
        if r.random() < 0.8:
            arrays.append(np.asarray(axes, np.int64))
            if r.random() < 0.8:
                arrays.append(np.asarray(steps, np.int64))
        elif r.random() < 0.5:
            arrays[1:] = [np.asarray(starts[:1], np.int64), np.asarray(ends[:1], np.int64)]
        if self.opset < 10:  # Slice 1-9: starts/ends/axes attributes, no steps
            attrs = {"starts": arrays[1].tolist(), "ends": arrays[2].tolist()}
            if len(arrays) > 3:
                attrs["axes"] = arrays[3].tolist()
            return self.emit(cid, "Slice", arrays[:1], attrs, label=f"{attrs}")
        return self.emit(cid, "Slice", arrays, const_idx={1, 2, 3, 4} if r.random() < 0.85
                         else (), const_p=0.0, label=f"s={starts} e={ends} a={axes} st={steps}")

    def gen_Split(self, cid):
        t = self._any("Split")
        if t is None:
            return None
        r = self.rng
        shape, axis = rand_shape_axis(r)
        n = shape[axis]
        k = int(r.integers(1, 4))
        sizes = None
        if r.random() < 0.6:
            cuts = sorted(r.integers(0, n + 1, size=k - 1)) if k > 1 else []
            sizes = list(np.diff([0] + [int(c) for c in cuts] + [n]).astype(int))
            if r.random() < 0.06:
                sizes[int(r.integers(len(sizes)))] += int(r.choice([1, -1, 1 << 32, -(1 << 33)]))
        attrs = {"axis": axis}
        arrays = [data(r, shape, t)]
        if sizes is not None:
            if self.opset >= 13:
                arrays.append(np.asarray(sizes, np.int64))
            else:
                attrs["split"] = [int(s) for s in sizes]
            k = len(sizes)
        elif self.opset >= 18:
            attrs["num_outputs"] = k
        return self.emit(cid, "Split", arrays, attrs, n_out=k, const_idx={1}, label=f"{sizes}")

    def gen_Tile(self, cid):
        t = self._any("Tile", [I64])
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r, lo=1, hi=3)
        reps = [int(r.integers(0, 4)) for _ in shape]
        hostile = r.random() < 0.08
        if hostile:
            reps = huge_shape(r, len(shape)) if r.random() < 0.7 else \
                [hpick(r, [-1, -(1 << 31)]) for _ in shape]
        return self.emit(cid, "Tile", [data(r, shape, t), np.asarray(reps, np.int64)],
                         const_idx={1} if r.random() < 0.8 else (), const_p=0.0,
                         label=f"reps={reps}")

    def gen_Expand(self, cid):
        t = self._any("Expand", [I64])
        if t is None:
            return None
        r = self.rng
        shape = tuple(1 if r.random() < 0.5 else d for d in rand_shape(r, hi=3))
        extra = rand_shape(r, rank=int(r.integers(0, 3)))
        target = list(extra) + [d if d != 1 else int(r.choice([1, 1, 2, 3, 0])) for d in shape]
        if r.random() < 0.3:
            target = target[int(r.integers(0, len(target) + 1)):]
        if r.random() < 0.08:
            target = huge_shape(r, max(len(target), 1))
        return self.emit(cid, "Expand", [data(r, shape, t), np.asarray(target, np.int64)],
                         const_idx={1} if r.random() < 0.8 else (), const_p=0.0,
                         label=f"to {target}")

    def gen_ConstantOfShape(self, cid):
        r = self.rng
        target = list(rand_shape(r))
        if r.random() < 0.1:
            target = huge_shape(r, max(len(target), 1))
        elif r.random() < 0.03:
            target = [int(r.integers(1, 3)), -1]
        attrs = {}
        if r.random() < 0.8:
            dt = int(r.choice(np.asarray(ANY)))
            attrs["value"] = helper.make_tensor("value", dt, [1],
                                                data(r, (1,), dt).astype(NP_OF[dt]).tolist())
        return self.emit(cid, "ConstantOfShape", [np.asarray(target, np.int64)], attrs,
                         const_idx={0} if r.random() < 0.7 else (), const_p=0.0,
                         label=f"to {target}")

    def gen_EyeLike(self, cid):
        t = self._any("EyeLike")
        if t is None:
            return None
        r = self.rng
        attrs = {}
        if r.random() < 0.6:
            attrs["k"] = int(r.integers(-4, 5))
        if r.random() < 0.3:
            attrs["dtype"] = int(r.choice([F32, I32, I64, F64, BOOL]))
        return self.emit(cid, "EyeLike", [data(r, rand_shape(r, rank=2), t)], attrs)

    def gen_Range(self, cid):
        t = self.types_for("Range", lambda t: ([t, t, t], [t]), (F32, F64, I32, I64, F16))
        if t is None:
            return None
        r = self.rng
        if t in (F32, F64, F16):
            start, limit = float(r.uniform(-5, 5)), float(r.uniform(-5, 5))
            delta = float(r.choice([0.5, -0.5, 1.0, -1.0, 0.3, 2.5]))
        else:
            start, limit = int(r.integers(-10, 10)), int(r.integers(-10, 10))
            delta = int(r.choice([1, -1, 2, -3, 4]))
            if r.random() < 0.08:
                mark()
                info = np.iinfo(NP_OF[t])
                start, limit, delta = [int(x) for x in r.choice(
                    [(info.min, info.max, 1), (0, 10, 0), (info.max - 2, info.max, 1),
                     (info.min, info.max, info.max), (0, 1, -1)])]
        npt = NP_OF[t]
        arrays = [np.asarray(start, npt), np.asarray(limit, npt), np.asarray(delta, npt)]
        return self.emit(cid, "Range", arrays, const_p=0.6,
                         label=f"{start}:{limit}:{delta}")

    def _window(self, cid, op):
        """Hann/Hamming/BlackmanWindow (opset 17): a scalar size (sometimes negative or 0..1),
        periodic or symmetric, sometimes a non-float32 output_datatype (refused)."""
        if self.opset < 17:
            return None
        r = self.rng
        t = int(r.choice([I64, I64, I32]))
        size = int(r.integers(0, 40))
        if r.random() < 0.08:
            mark()
            size = int(r.choice([-1, -5, 1]))
        attrs = {}
        if r.random() < 0.6:
            attrs["periodic"] = int(r.integers(2))
        if r.random() < 0.1:
            attrs["output_datatype"] = int(r.choice([F64, I32, U8]))
        return self.emit(cid, op, [np.asarray(size, NP_OF[t])], attrs, const_p=0.5,
                         label=f"size={size}")

    def gen_HannWindow(self, cid):
        return self._window(cid, "HannWindow")

    def gen_HammingWindow(self, cid):
        return self._window(cid, "HammingWindow")

    def gen_BlackmanWindow(self, cid):
        return self._window(cid, "BlackmanWindow")

    def gen_Pad(self, cid):
        t = self._any("Pad", [I64] if self.opset >= 11 else [])
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r, lo=1)
        rank = len(shape)
        mode = str(r.choice(["constant", "constant", "reflect", "edge"] +
                            (["wrap"] if self.opset >= 19 else [])))
        pads = [int(r.integers(-2, 3)) for _ in range(2 * rank)]
        if r.random() < 0.05:
            pads[int(r.integers(2 * rank))] = hpick(r, [1 << 31, 1 << 40, -(1 << 40)])
        arrays = [data(r, shape, t), np.asarray(pads, np.int64)]
        if mode == "constant" and r.random() < 0.5:
            arrays.append(data(r, (), t))
        if self.opset >= 18 and r.random() < 0.3:
            axes = list(range(rank))[:int(r.integers(1, rank + 1))]
            arrays[1] = np.asarray(pads[:len(axes)] + pads[rank:rank + len(axes)], np.int64)
            while len(arrays) < 3:
                arrays.append(None)
            arrays.append(np.asarray(axes, np.int64))
        if self.opset < 11:  # Pad 2-10: pads and a float value as attributes
            attrs = {"mode": mode, "pads": pads}
            if len(arrays) > 2 and arrays[2] is not None:
                attrs["value"] = float(arrays[2])
            return self.emit(cid, "Pad", arrays[:1], attrs, label=f"pads={pads}")
        return self.emit(cid, "Pad", arrays, {"mode": mode}, const_idx={1, 2, 3}, const_p=0.0,
                         label=f"pads={arrays[1].tolist()}")

    def _block(self, op):
        t = self.types_for(op, lambda t: ([t], [t]), (F32, F32, F16, F64, U8, I32))
        if t is None:
            return None, None
        r = self.rng
        b = int(r.choice([1, 2, 3]))
        if r.random() < 0.06:
            b = hpick(r, [0, -1, 1 << 31, 1 << 32, (1 << 63) - 1])
        return t, b

    def gen_DepthToSpace(self, cid):
        t, b = self._block("DepthToSpace")
        if t is None:
            return None
        r = self.rng
        bb = b if 0 < b < 4 else 2
        shape = (rand_dim(r), bb * bb * int(r.integers(0, 3)), rand_dim(r), rand_dim(r))
        attrs = {"blocksize": b}
        if r.random() < 0.5:
            attrs["mode"] = str(r.choice(["DCR", "CRD"]))
        return self.emit(cid, "DepthToSpace", [data(r, shape, t)], attrs)

    def gen_SpaceToDepth(self, cid):
        t, b = self._block("SpaceToDepth")
        if t is None:
            return None
        r = self.rng
        bb = b if 0 < b < 4 else 2
        shape = (rand_dim(r), rand_dim(r), bb * int(r.integers(0, 3)), bb * int(r.integers(0, 3)))
        return self.emit(cid, "SpaceToDepth", [data(r, shape, t)], {"blocksize": b})

    def gen_ReverseSequence(self, cid):
        t = self._any("ReverseSequence", [I64])
        if t is None:
            return None
        r = self.rng
        bt = int(r.integers(2))
        shape = rand_shape(r, lo=2, zero_p=0.03)
        batch, time = shape[bt], shape[1 - bt]
        lens = r.integers(0, time + 1, size=(batch,)).astype(np.int64)
        bad = ""
        if lens.size and r.random() < 0.06:
            lens[0] = hpick(r, [time + 1, -1, 1 << 40])
            bad = " (a length out of range)"
        return self.emit(cid, "ReverseSequence", [data(r, shape, t), lens],
                         {"batch_axis": bt, "time_axis": 1 - bt},
                         label=f"lens={lens.tolist()}{bad}")

    def gen_Trilu(self, cid):
        t = self._any("Trilu", [I64])
        if t is None:
            return None
        r = self.rng
        arrays = [data(r, rand_shape(r, lo=2), t)]
        if r.random() < 0.7:
            k = int(r.integers(-4, 5)) if r.random() < 0.9 else \
                hpick(r, [1 << 31, -(1 << 63), (1 << 63) - 1])
            arrays.append(np.asarray(k, np.int64))
        attrs = {"upper": int(r.integers(2))} if r.random() < 0.7 else {}
        return self.emit(cid, "Trilu", arrays, attrs, const_p=0.7)

    def gen_OneHot(self, cid):
        t = self.types_for("OneHot", lambda t: ([I64, I64, t], [t]), (F32, I64, I32, F64))
        if t is None:
            return None
        r = self.rng
        depth = int(r.integers(1, 6))
        shape = rand_shape(r, hi=3)
        idx = self._idx(depth, shape, hostile_p=0.1)
        if r.random() < 0.05:
            depth = hpick(r, [0, -1, 1 << 40])
        vals = data(r, (2,), t)
        attrs = {"axis": int(r.integers(-len(shape) - 1, len(shape) + 1))} \
            if r.random() < 0.6 else {}
        return self.emit(cid, "OneHot", [idx, np.asarray([depth], np.int64), vals], attrs,
                         const_p=0.5, label=f"depth={depth}")

    # ---- indexing -----------------------------------------------------------------------------
    def gen_Gather(self, cid):
        t = self._any("Gather", [I64])
        if t is None:
            return None
        r = self.rng
        shape, axis = rand_shape_axis(r)
        idx = self._idx(shape[axis], rand_shape(r, hi=3),
                        dt=np.int64 if r.random() < 0.8 else np.int32)
        return self.emit(cid, "Gather", [data(r, shape, t), idx], {"axis": axis},
                         const_p=0.3, label=f"idx={idx.ravel()[:6].tolist()}")

    def gen_GatherElements(self, cid):
        t = self._any("GatherElements", [I64])
        if t is None:
            return None
        r = self.rng
        shape, axis = rand_shape_axis(r)
        ishape = tuple(int(r.integers(0, d + 1)) if i != axis % len(shape) else rand_dim(r)
                       for i, d in enumerate(shape))
        idx = self._idx(shape[axis], ishape)
        return self.emit(cid, "GatherElements", [data(r, shape, t), idx], {"axis": axis},
                         const_p=0.3, label=f"idx={idx.ravel()[:6].tolist()}")

    def gen_GatherND(self, cid):
        t = self._any("GatherND", [I64])
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r, lo=1, zero_p=0.03)
        b = int(r.integers(0, min(2, len(shape) - 1) + 1)) if len(shape) > 1 else 0
        k = int(r.integers(1, len(shape) - b + 1))
        lead = tuple(shape[:b]) + rand_shape(r, hi=2)
        idx = np.stack([self._idx(shape[b + j], lead, hostile_p=0.03) for j in range(k)], -1) \
            if k else np.zeros(lead + (0,), np.int64)
        attrs = {"batch_dims": b} if b or r.random() < 0.2 else {}
        return self.emit(cid, "GatherND", [data(r, shape, t), idx.astype(np.int64)], attrs,
                         const_p=0.3, label=f"idx={idx.ravel()[:6].tolist()}")

    def gen_ScatterElements(self, cid):
        t = self._any("ScatterElements", [I64, None])
        if t is None:
            return None
        r = self.rng
        shape, axis = rand_shape_axis(r)
        ishape = tuple(int(r.integers(0, d + 1)) for d in shape)
        idx = self._idx(shape[axis], ishape)
        attrs = {"axis": axis}
        if self.opset >= 16 and r.random() < 0.4:
            attrs["reduction"] = str(r.choice(["add", "mul", "none"] +
                                              (["min", "max"] if self.opset >= 18 else [])))
        if attrs.get("reduction", "none") == "none" and idx.size:
            # Duplicate targets without a reduction are unordered: unique positions only.
            flat = idx.reshape(-1)
            ax = axis % len(shape)
            if len(set(zip(*[np.indices(ishape)[i].ravel() for i in range(len(shape))
                             if i != ax], flat % max(shape[axis], 1)))) != flat.size:
                return None
        return self.emit(cid, "ScatterElements", [data(r, shape, t), idx,
                                                  data(r, ishape, t)], attrs, const_p=0.3,
                         label=f"idx={idx.ravel()[:6].tolist()}")

    def gen_ScatterND(self, cid):
        t = self._any("ScatterND", [I64, None])
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r, lo=1, zero_p=0.03)
        k = int(r.integers(1, len(shape) + 1))
        n = int(r.integers(0, 4))
        attrs = {}
        if self.opset >= 16 and r.random() < 0.4:
            attrs["reduction"] = str(r.choice(["add", "mul", "none"] +
                                              (["min", "max"] if self.opset >= 18 else [])))
        rows = []
        for _ in range(n):
            if any(shape[j] == 0 for j in range(k)):
                break
            rows.append([int(r.integers(-shape[j], shape[j])) for j in range(k)])
        norm = {tuple(v % shape[j] for j, v in enumerate(row)) for row in rows}
        if attrs.get("reduction", "none") == "none" and len(norm) != len(rows):
            return None
        idx = np.asarray(rows, np.int64).reshape(len(rows), k)
        if idx.size and r.random() < 0.08:
            idx[0, int(r.integers(k))] = out_of_range(r, shape[0])
        upd = data(r, (len(rows),) + tuple(shape[k:]), t)
        return self.emit(cid, "ScatterND", [data(r, shape, t), idx, upd], attrs, const_p=0.3,
                         label=f"idx={idx.tolist()[:4]}")


_ = huge_dim
