"""Generator mixin for the ai.onnx.ml numeric ops (gen_ml_<Op>): random batches (0 and 1
included), attribute tables of random lengths (matching, short, duplicated), the post transforms,
kernels, and hostile values (NaN inputs, out-of-range feature indices, unknown categories)."""

from __future__ import annotations

import numpy as np

from .fuzzlib import TensorProto
from .gen_data import floats, ints, rand_dim, rand_shape
from .hostile import hpick, out_of_range

F32, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
ML = "ai.onnx.ml"
POSTS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")
# Absolute error scale of the scores: sums of products in another order (1 - s cancels).
MAG = 8.0


def _fl(rng, n, lo=-1.0, hi=1.0):
    return [float(v) for v in rng.uniform(lo, hi, n).astype(np.float32)]


class MlGen:
    def _ml_input(self, types=(F32, I32, I64), rank=None, features=None):
        r = self.rng
        t = int(r.choice(types))
        n, f = rand_dim(r, 0.1), features if features is not None else int(r.integers(1, 6))
        rank = rank if rank is not None else int(r.choice([1, 2, 2, 2]))
        shape = (f,) if rank == 1 else (n, f)
        x = floats(r, shape, t, -2, 2) if t == F32 else ints(r, shape, t, low=-9, high=9)
        return t, x

    def gen_ml_Binarizer(self, cid):
        x = floats(self.rng, rand_shape(self.rng), F32)
        attrs = {"threshold": float(self.rng.uniform(-1, 1))} if self.rng.random() < 0.7 else {}
        if x.size and self.rng.random() < 0.05:
            x.flat[0] = np.nan  # ORT raises; so must the EP
        return self.emit(cid, "Binarizer", [x], attrs, domain=ML)

    def gen_ml_Scaler(self, cid):
        _, x = self._ml_input()
        c = x.shape[-1] if self.rng.random() < 0.6 else 1
        attrs = {"scale": _fl(self.rng, c, -3, 3), "offset": _fl(self.rng, c, -3, 3)}
        return self.emit(cid, "Scaler", [x], attrs, domain=ML)

    def gen_ml_Normalizer(self, cid):
        _, x = self._ml_input()
        if x.ndim == 2 and x.shape[0] > 1:
            x[0] = 0
        attrs = {"norm": str(self.rng.choice(["MAX", "L1", "L2"]))}
        return self.emit(cid, "Normalizer", [x], attrs, domain=ML)

    def gen_ml_Imputer(self, cid):
        r = self.rng
        t, x = self._ml_input((F32, I64))
        c = int(r.choice([x.shape[-1], 1, x.shape[-1] + 1]))
        if t == F32:
            rep = float(r.choice([np.nan, 0.5]))
            if x.size:
                x[r.random(x.shape) < 0.3] = rep
            attrs = {"imputed_value_floats": _fl(r, c, -5, 5), "replaced_value_float": rep}
        else:
            if x.size:
                x[r.random(x.shape) < 0.3] = 3
            attrs = {"imputed_value_int64s": [int(v) for v in r.integers(-50, 50, c)],
                     "replaced_value_int64": 3}
        return self.emit(cid, "Imputer", [x], attrs, domain=ML)

    def gen_ml_ArrayFeatureExtractor(self, cid):
        r = self.rng
        _, x = self._ml_input()
        f = x.shape[-1]
        idx = r.integers(0, f, size=int(r.integers(1, 5))).astype(np.int64)
        if r.random() < 0.06:
            bad = out_of_range(r, f)
            idx[0] = bad
            if bad < 0:  # ORT CPU reads before the row: only the EP runs it, and must raise
                return self.emit(cid, "ArrayFeatureExtractor", [x, idx], domain=ML,
                                 expect_raise=True, needs_cpu=False, solo=True)
        return self.emit(cid, "ArrayFeatureExtractor", [x, idx], domain=ML, const_p=0.3)

    def gen_ml_FeatureVectorizer(self, cid):
        r = self.rng
        t = int(r.choice([F32, I32, I64]))
        n = int(r.integers(1, 5))  # batch 0 aborts ORT CPU (an empty output span)
        arrays, dims = [], []
        for _ in range(int(r.integers(1, 4))):
            w = int(r.integers(1, 5))
            arrays.append(floats(r, (n, w), t) if t == F32 else ints(r, (n, w), t))
            dims.append(int(np.clip(w + r.integers(-2, 3), 0, 8)))
        return self.emit(cid, "FeatureVectorizer", arrays, {"inputdimensions": dims}, domain=ML)

    def gen_ml_OneHotEncoder(self, cid):
        r = self.rng
        t = int(r.choice([F32, I64]))
        shape = (rand_dim(r, 0.1), int(r.integers(1, 4)))
        x = (floats(r, shape, t, -2, 6) if t == F32 else ints(r, shape, t, low=-2, high=6))
        cats = [int(v) for v in r.integers(-2, 6, int(r.integers(1, 7)))]
        attrs = {"cats_int64s": cats}
        if r.random() < 0.2:
            attrs["zeros"] = hpick(r, [0, 1])
        return self.emit(cid, "OneHotEncoder", [x], attrs, domain=ML)

    def gen_ml_LabelEncoder(self, cid):
        r = self.rng
        kt, vt = int(r.choice([F32, I64])), int(r.choice([F32, I64]))
        k = int(r.integers(1, 8))  # an empty list attribute has no type to write
        keys = ([int(v) for v in r.integers(-5, 5, k)] if kt == I64 else
                [float(v) for v in np.round(r.uniform(-3, 3, k), 1)])
        values = ([int(v) for v in r.integers(-99, 99, k)] if vt == I64 else _fl(r, k, -9, 9))
        shape = (rand_dim(r, 0.1), int(r.integers(1, 4)))
        pool = np.asarray(keys + ([7] if kt == I64 else [7.5]))
        x = r.choice(pool, size=shape).astype(np.int64 if kt == I64 else np.float32)
        kn, vn = ("keys_int64s" if kt == I64 else "keys_floats",
                  "values_int64s" if vt == I64 else "values_floats")
        return self.emit(cid, "LabelEncoder", [x], {kn: keys, vn: values}, domain=ML)

    def _linear_attrs(self, rows, f):
        r = self.rng
        return {"coefficients": _fl(r, rows * f, -0.5, 0.5),
                "post_transform": str(r.choice(POSTS))}

    def gen_ml_LinearRegressor(self, cid):
        r = self.rng
        _, x = self._ml_input((F32,))
        targets = int(r.integers(1, 4))
        attrs = {**self._linear_attrs(targets, x.shape[-1]), "targets": targets}
        if r.random() < 0.7:
            attrs["intercepts"] = _fl(r, targets)
        return self.emit(cid, "LinearRegressor", [x], attrs, domain=ML, mag=[MAG])

    def gen_ml_LinearClassifier(self, cid):
        r = self.rng
        _, x = self._ml_input()
        classes = int(r.integers(1, 5))
        attrs = {**self._linear_attrs(classes, x.shape[-1]), "intercepts": _fl(r, classes)}
        labels = max(classes, 2) if classes == 1 and r.random() < 0.5 else classes
        attrs["classlabels_ints"] = [int(v) for v in r.choice(100, labels, replace=False)]
        return self.emit(cid, "LinearClassifier", [x], attrs, n_out=2, domain=ML, mag=[0.0, MAG])

    def _svm_attrs(self, f, vectors):
        r = self.rng
        kernel = str(r.choice(KERNELS))
        return {"kernel_type": kernel,
                "kernel_params": [float(r.uniform(0.05, 0.5)), float(r.uniform(-0.5, 0.5)),
                                  float(r.choice([1.0, 2.0, 3.0]))],
                "support_vectors": _fl(r, vectors * f)}

    def gen_ml_SVMRegressor(self, cid):
        r = self.rng
        _, x = self._ml_input((F32,))
        f = x.shape[-1]
        v = int(r.choice([0, 1, 3, 5]))
        attrs = {"n_supports": v, "rho": _fl(r, 1), "one_class": int(r.random() < 0.2),
                 "coefficients": _fl(r, v if v else f)}
        attrs.update(self._svm_attrs(f, v) if v else {"kernel_params": [0.1, 0.0, 2.0]})
        if not v:
            attrs.pop("support_vectors", None)
        return self.emit(cid, "SVMRegressor", [x], attrs, domain=ML, mag=[MAG])

    def gen_ml_SVMClassifier(self, cid):
        r = self.rng
        _, x = self._ml_input()
        f = x.shape[-1]
        classes = int(r.integers(2, 5))
        labels = [int(v) for v in r.choice(100, classes, replace=False)]
        attrs = {"classlabels_ints": labels, "post_transform": str(r.choice(POSTS[:4]))}
        if r.random() < 0.3:  # liblinear form
            attrs.update({"coefficients": _fl(r, classes * f), "rho": _fl(r, 1),
                          "kernel_params": [0.1, 0.0, 2.0]})
        else:
            per = [int(v) for v in r.integers(1, 4, classes)]
            v = sum(per)
            attrs.update(self._svm_attrs(f, v))
            attrs.update({"vectors_per_class": per, "coefficients": _fl(r, (classes - 1) * v),
                          "rho": _fl(r, classes * (classes - 1) // 2)})
        return self.emit(cid, "SVMClassifier", [x], attrs, n_out=2, domain=ML, mag=[0.0, MAG])
