"""ai.onnx.ml numeric ops: every case runs on the EP and matches ORT CPU (ORT's quirks included:
output shapes, score dtypes, post transforms, duplicate keys); string forms and what ORT CPU
cannot run are refused with a reason; bad inputs raise naming the node."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from opcheck import NP_TO_ONNX, check_error_on_ep, check_on_ep, refusal
from ort_raises import check_raises_like_cpu
from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, mlx_backend, random_array

ML = "ai.onnx.ml"
F32, I32, I64 = np.float32, np.int32, np.int64


def tol(post: str) -> dict:
    """Tolerances against ORT CPU. ORT's PROBIT is Winitzki's erfinv approximation, which cancels
    catastrophically near probability 0.5 (-a + sqrt(a^2 - b) with a ~ 4.3): on CUDA, where
    MLX's fused kernels may contract a^2 - b into one FMA, last-bit differences grow
    there (up to a few 1e-4). The approximation itself is ~2e-3 from the exact probit, so 1e-3
    still pins the formula."""
    if post == "PROBIT" and mlx_backend() == "gpu":
        return {"rtol": 1e-5, "atol": 1e-3}
    return {"rtol": 1e-5, "atol": 1e-5}


def ml_model(op, feeds: dict, out_types, attrs=None, ml_opset=1, inits=None):
    """One ai.onnx.ml node named 'node' over graph inputs `feeds` (and initializers `inits`),
    outputs typed `out_types` (ONNX element types) with unknown shapes."""
    inits = inits or {}
    names = list(feeds) + list(inits)
    outs = [f"out{i}" for i in range(len(out_types))]
    node = h.make_node(op, names, outs, name="node", domain=ML, **(attrs or {}))
    graph = h.make_graph(
        [node], "g",
        [h.make_tensor_value_info(k, NP_TO_ONNX[v.dtype], list(v.shape)) for k, v in feeds.items()],
        [h.make_tensor_value_info(o, t, None) for o, t in zip(outs, out_types)],
        [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    return make_model(graph, opset=21, extra_opsets={ML: ml_opset}, check=False)


def ml_refusal(model, op):
    """The EP's refusal reason for the ai.onnx.ml op (None when claimed). Only models ORT CPU can
    load: a refused node runs there."""
    return refusal(model, f"{ML}.{op}")


# ---------------------------------------------------------------- Binarizer

@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 5), (7,), (), (0, 4), (1, 1)], ids=str)
@pytest.mark.parametrize("threshold", [None, 0.25, -1.5])
def test_binarizer(shape, threshold, rng):
    x = random_array(rng, shape)
    attrs = {} if threshold is None else {"threshold": threshold}
    if x.size:
        x.flat[0] = threshold if threshold is not None else 1.0  # equal is not greater
    check_on_ep(ml_model("Binarizer", {"x": x}, [T.FLOAT], attrs), {"x": x})


def test_binarizer_nan_raises(rng):
    m = ml_model("Binarizer", {"x": np.zeros((2, 3), F32)}, [T.FLOAT])
    bad = random_array(rng, (2, 3))
    bad[1, 2] = np.nan
    check_raises_like_cpu(m, {"x": bad}, {"x": random_array(rng, (2, 3))}, match="NaN")


# ---------------------------------------------------------------- Scaler

@pytest.mark.parametrize("dtype", [F32, I32, I64])
@pytest.mark.parametrize("shape", [(4, 3), (1, 3), (0, 3), (3,), (5, 1)], ids=str)
@pytest.mark.parametrize("per_feature", [True, False])
def test_scaler(dtype, shape, per_feature, rng):
    x = random_array(rng, shape, dtype)
    c = shape[-1] if per_feature else 1
    attrs = {"scale": list(rng.uniform(-2, 2, c)), "offset": list(rng.uniform(-2, 2, c))}
    check_on_ep(ml_model("Scaler", {"x": x}, [T.FLOAT], attrs), {"x": x})


def test_scaler_refusals(rng):
    x = random_array(rng, (4, 3))
    bad_len = ml_model("Scaler", {"x": x}, [T.FLOAT], {"scale": [1.0, 2.0], "offset": [0.0, 1.0]})
    assert "feature count 3" in ml_refusal(bad_len, "Scaler")
    x3 = random_array(rng, (2, 3, 4))
    rank3 = ml_model("Scaler", {"x": x3}, [T.FLOAT], {"scale": [2.0], "offset": [1.0]})
    assert "rank 3" in ml_refusal(rank3, "Scaler")
    x64 = random_array(rng, (2, 3)).astype(np.float64)
    m = ml_model("Scaler", {"x": x64}, [T.FLOAT], {"scale": [2.0], "offset": [1.0]})
    assert "float, int32 or int64" in ml_refusal(m, "Scaler")


# ---------------------------------------------------------------- Normalizer

@pytest.mark.parametrize("norm", ["MAX", "L1", "L2", None])
@pytest.mark.parametrize("dtype", [F32, I32, I64])
@pytest.mark.parametrize("shape", [(4, 5), (1, 3), (6,), (0, 3), (3, 0)], ids=str)
def test_normalizer(norm, dtype, shape, rng):
    x = random_array(rng, shape, dtype)
    if len(shape) == 2 and shape[0] > 1 and shape[1]:
        x[1] = 0  # a zero row is copied unchanged
    if dtype == F32 and x.size > 4 and norm == "MAX":
        x.flat[3] = np.nan  # the row maximum skips NaN
    attrs = {} if norm is None else {"norm": norm}
    check_on_ep(ml_model("Normalizer", {"x": x}, [T.FLOAT], attrs), {"x": x})


def test_normalizer_max_all_negative(rng):
    x = -np.abs(random_array(rng, (3, 4))) - 0.1
    check_on_ep(ml_model("Normalizer", {"x": x}, [T.FLOAT], {"norm": "MAX"}), {"x": x})


def test_normalizer_refusals(rng):
    x3 = random_array(rng, (2, 3, 4))
    assert "rank 3" in ml_refusal(ml_model("Normalizer", {"x": x3}, [T.FLOAT]), "Normalizer")


# ---------------------------------------------------------------- Imputer

@pytest.mark.parametrize("shape", [(5, 3), (1, 3), (0, 3), (4,)], ids=str)
@pytest.mark.parametrize("replaced", [float("nan"), 0.5])
@pytest.mark.parametrize("count", ["feature", "one", "other"])
def test_imputer_float(shape, replaced, count, rng):
    x = random_array(rng, shape)
    mask = rng.random(shape) < 0.4
    x[mask] = replaced
    n = {"feature": shape[-1], "one": 1, "other": shape[-1] + 2}[count]
    attrs = {"imputed_value_floats": list(rng.uniform(-5, 5, n)), "replaced_value_float": replaced}
    check_on_ep(ml_model("Imputer", {"x": x}, [T.FLOAT], attrs), {"x": x})


@pytest.mark.parametrize("shape", [(5, 3), (2,), (0, 2)], ids=str)
@pytest.mark.parametrize("count", ["feature", "one"])
def test_imputer_int64(shape, count, rng):
    x = random_array(rng, shape, I64)
    x[rng.random(shape) < 0.4] = -7
    n = shape[-1] if count == "feature" else 1
    attrs = {"imputed_value_int64s": list(range(100, 100 + n)), "replaced_value_int64": -7}
    check_on_ep(ml_model("Imputer", {"x": x}, [T.INT64], attrs), {"x": x})


def test_imputer_refusals(rng):
    x = random_array(rng, (3, 2))
    wrong = {"imputed_value_int64s": [1], "replaced_value_int64": 0}
    assert "imputed_value_floats" in ml_refusal(ml_model("Imputer", {"x": x}, [T.FLOAT], wrong),
                                             "Imputer")
    x3 = random_array(rng, (2, 2, 2))
    attrs = {"imputed_value_floats": [1.0], "replaced_value_float": 0.0}
    assert "rank 3" in ml_refusal(ml_model("Imputer", {"x": x3}, [T.FLOAT], attrs), "Imputer")


# ---------------------------------------------------------------- ArrayFeatureExtractor

@pytest.mark.parametrize("dtype", [F32, I32, I64])
@pytest.mark.parametrize("xshape,yshape", [((3, 5), (2,)), ((6,), (3,)), ((2, 3, 4), (1, 2)),
                                           ((0, 4), (3,)), ((2, 4), ()), ((1, 1), (4,))], ids=str)
def test_array_feature_extractor(dtype, xshape, yshape, rng):
    x = random_array(rng, xshape, dtype)
    y = rng.integers(0, xshape[-1], size=yshape).astype(I64)
    m = ml_model("ArrayFeatureExtractor", {"x": x, "y": y}, [NP_TO_ONNX[np.dtype(dtype)]])
    check_on_ep(m, {"x": x, "y": y})


def test_array_feature_extractor_constant_indices(rng):
    x = random_array(rng, (4, 6))
    y = np.array([5, 0, 0, 3], I64)
    m = ml_model("ArrayFeatureExtractor", {"x": x}, [T.FLOAT], inits={"y": y})
    check_on_ep(m, {"x": x})


def test_array_feature_extractor_out_of_range(rng):
    x = random_array(rng, (3, 4))
    m = ml_model("ArrayFeatureExtractor", {"x": x, "y": np.zeros(2, I64)}, [T.FLOAT])
    m.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "k"
    check_raises_like_cpu(m, {"x": x, "y": np.array([1, 4], I64)},
                          {"x": x, "y": np.array([3, 0], I64)}, match="out of range")
    # A negative index makes ORT CPU read before the row: the EP raises instead.
    check_error_on_ep(m, {"x": x, "y": np.array([-1], I64)}, "out of range")
    check_error_on_ep(m, {"x": x, "y": np.zeros(0, I64)}, "num_indices = 0")


# ---------------------------------------------------------------- FeatureVectorizer

@pytest.mark.parametrize("dtype", [F32, I32, I64])
@pytest.mark.parametrize("batch", [1, 3, 0])
def test_feature_vectorizer(dtype, batch, rng):
    """Batch 0: ORT CPU aborts (its output span is empty); the EP returns [0, total]."""
    a = random_array(rng, (batch, 2), dtype)
    b = random_array(rng, (batch, 5), dtype)   # truncated to 3
    c = random_array(rng, (batch, 1), dtype)   # padded to 4
    d = random_array(rng, (batch, 2, 2), dtype)  # flattened from dim 1
    feeds = {"a": a, "b": b, "c": c, "d": d}
    m = ml_model("FeatureVectorizer", feeds, [T.FLOAT], {"inputdimensions": [2, 3, 4, 4]})
    if batch == 0:
        run = EpRun(m, strict=True)
        try:
            (got,) = run.run(feeds)
            assert_ran_on_ep(run, ["node"])
        finally:
            run.close()
        assert got.shape == (0, 13) and got.dtype == np.float32
        return
    check_on_ep(m, feeds)


def test_feature_vectorizer_rank1(rng):
    feeds = {"a": random_array(rng, (3,)), "b": random_array(rng, (4,))}
    m = ml_model("FeatureVectorizer", feeds, [T.FLOAT], {"inputdimensions": [3, 2]})
    check_on_ep(m, feeds)


def test_feature_vectorizer_refusals(rng):
    feeds = {"a": random_array(rng, (2, 3)), "b": random_array(rng, (2, 2))}
    m = ml_model("FeatureVectorizer", feeds, [T.FLOAT], {"inputdimensions": [3]})
    assert "inputdimensions has 1 values for 2 inputs" in ml_refusal(m, "FeatureVectorizer")


# ---------------------------------------------------------------- OneHotEncoder

@pytest.mark.parametrize("dtype", [I64, F32])
@pytest.mark.parametrize("shape", [(4, 3), (5,), (), (0, 2), (1, 1)], ids=str)
def test_one_hot_encoder(dtype, shape, rng):
    x = rng.integers(-3, 8, size=shape).astype(dtype)
    if dtype == F32:
        x = np.asarray(x + rng.uniform(-0.9, 0.9, size=shape), F32)  # truncated toward zero
    attrs = {"cats_int64s": [4, 0, 7, -2, 3, 1]}
    check_on_ep(ml_model("OneHotEncoder", {"x": x}, [T.FLOAT], attrs), {"x": x})


def test_one_hot_encoder_duplicates(rng):
    x = rng.integers(0, 4, size=(6, 2)).astype(I64)
    attrs = {"cats_int64s": [1, 2, 1, 3, 2]}
    check_on_ep(ml_model("OneHotEncoder", {"x": x}, [T.FLOAT], attrs), {"x": x})


def test_one_hot_encoder_zeros0(rng):
    m = ml_model("OneHotEncoder", {"x": np.zeros((2, 2), I64)}, [T.FLOAT],
                 {"cats_int64s": [1, 2, 3], "zeros": 0})
    check_raises_like_cpu(m, {"x": np.array([[1, 2], [3, 9]], I64)},
                          {"x": np.array([[1, 2], [3, 3]], I64)}, match="Unknown Category")


def test_one_hot_encoder_refusals(rng):
    x = rng.integers(0, 4, size=(3,)).astype(I64)
    m = ml_model("OneHotEncoder", {"x": x}, [T.FLOAT], {"cats_strings": ["a", "b"]})
    assert "string categories" in ml_refusal(m, "OneHotEncoder")
    x3 = rng.integers(0, 4, size=(2, 2, 2)).astype(I64)
    m = ml_model("OneHotEncoder", {"x": x3}, [T.FLOAT], {"cats_int64s": [1, 2]})
    assert "rank above 2" in ml_refusal(m, "OneHotEncoder")


# ---------------------------------------------------------------- LabelEncoder

def _table(kind, rng, n):
    if kind == "int64":
        return [int(v) for v in rng.choice(np.arange(-20, 20), size=n, replace=False)]
    return [float(v) for v in np.round(rng.uniform(-5, 5, n), 2).astype(F32)]


@pytest.mark.parametrize("ktype", ["int64", "float"])
@pytest.mark.parametrize("vtype", ["int64", "float"])
@pytest.mark.parametrize("opset", [2, 3, 4])
@pytest.mark.parametrize("shape", [(3, 4), (6,), (), (0,)], ids=str)
def test_label_encoder(ktype, vtype, opset, shape, rng):
    keys, values = _table(ktype, rng, 6), _table(vtype, rng, 6)
    kd = I64 if ktype == "int64" else F32
    pool = np.array(keys + [99, -99] if ktype == "int64" else keys + [99.5, -0.125], kd)
    x = rng.choice(pool, size=shape).astype(kd)
    attrs = {f"keys_{ktype}s": keys, f"values_{vtype}s": values}
    out = T.INT64 if vtype == "int64" else T.FLOAT
    check_on_ep(ml_model("LabelEncoder", {"x": x}, [out], attrs, ml_opset=opset), {"x": x})


@pytest.mark.parametrize("opset", [2, 4])
def test_label_encoder_defaults_duplicates_nan(opset, rng):
    keys = [1.5, np.nan, 2.5, 1.5, 0.0]
    x = np.array([1.5, np.nan, 2.5, -0.0, 7.0, 0.0], F32)
    attrs = {"keys_floats": keys, "values_int64s": [10, 20, 30, 40, 50], "default_int64": 77}
    check_on_ep(ml_model("LabelEncoder", {"x": x}, [T.INT64], attrs, ml_opset=opset), {"x": x})
    attrs = {"keys_int64s": [3, 4, 3], "values_floats": [0.5, 1.5, 2.5], "default_float": 9.0}
    xi = np.array([3, 4, 5], I64)
    check_on_ep(ml_model("LabelEncoder", {"x": xi}, [T.FLOAT], attrs, ml_opset=opset), {"x": xi})


def test_label_encoder_tensor_attributes(rng):
    keys = onnx.numpy_helper.from_array(np.array([5, 6, 7], I64), "keys_tensor")
    values = onnx.numpy_helper.from_array(np.array([0.5, -1.5, 2.0], F32), "values_tensor")
    deflt = onnx.numpy_helper.from_array(np.array([42.0], F32), "default_tensor")
    x = np.array([[5, 7], [8, 6]], I64)
    attrs = {"keys_tensor": keys, "values_tensor": values, "default_tensor": deflt}
    check_on_ep(ml_model("LabelEncoder", {"x": x}, [T.FLOAT], attrs, ml_opset=4), {"x": x})


def test_label_encoder_refusals(rng):
    x = np.array([1, 2], I64)
    m = ml_model("LabelEncoder", {"x": x}, [T.STRING],
                 {"keys_int64s": [1, 2], "values_strings": ["a", "b"]}, ml_opset=2)
    assert "string tables" in ml_refusal(m, "LabelEncoder")


# ---------------------------------------------------------------- LinearRegressor

@pytest.mark.parametrize("targets", [1, 3])
@pytest.mark.parametrize("shape", [(5, 4), (1, 4), (0, 4), (4,)], ids=str)
@pytest.mark.parametrize("post", ["NONE", "PROBIT", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("intercepts", ["per_target", "none", "wrong_length"])
def test_linear_regressor(targets, shape, post, intercepts, rng):
    f = shape[-1]
    x = random_array(rng, shape, low=-0.5, high=0.5)
    attrs = {"coefficients": list(rng.uniform(-0.5, 0.5, targets * f)), "targets": targets,
             "post_transform": post}
    if intercepts == "per_target":
        attrs["intercepts"] = list(rng.uniform(0.1, 0.4, targets))
    elif intercepts == "wrong_length":
        attrs["intercepts"] = list(rng.uniform(0.1, 0.4, targets + 1))
    if post == "SOFTMAX_ZERO" and x.ndim == 2 and x.shape[0] > 1:
        x[0] = 0  # with no intercepts, zero scores meet the zero-skipping rule
    check_on_ep(ml_model("LinearRegressor", {"x": x}, [T.FLOAT], attrs), {"x": x}, **tol(post))


def test_linear_regressor_refusals(rng):
    x = random_array(rng, (3, 4))
    m = ml_model("LinearRegressor", {"x": x}, [T.FLOAT],
                 {"coefficients": [1.0] * 7, "targets": 2})
    assert "fewer than 2 x 4" in ml_refusal(m, "LinearRegressor")


# ---------------------------------------------------------------- LinearClassifier

@pytest.mark.parametrize("dtype", [F32, I32, I64])
@pytest.mark.parametrize("classes", [3, 1])
@pytest.mark.parametrize("labels", ["given", "absent"])
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
def test_linear_classifier(dtype, classes, labels, post, rng):
    if classes > 1 and labels == "absent":
        pytest.skip("ORT CPU refuses the model (labels are required with several classes)")
    if classes == 1 and labels == "given" and post == "PROBIT":
        pytest.skip("ORT leaves the second column unwritten: refused (test_..._refusals)")
    f = 4
    x = random_array(rng, (6, f), dtype)
    if dtype != F32:
        x = (x % 5).astype(dtype)
    scale = 0.1 if post == "PROBIT" else 0.5
    attrs = {"coefficients": list(rng.uniform(-scale, scale, classes * f)),
             "intercepts": list(rng.uniform(-0.1, 0.1, classes)), "post_transform": post}
    if labels == "given":
        attrs["classlabels_ints"] = [int(v) for v in rng.choice(50, size=max(classes, 2),
                                                                replace=False)]
        if classes > 1:
            attrs["classlabels_ints"] = attrs["classlabels_ints"][:classes]
    if post == "PROBIT":
        x = (np.abs(x) % 2).astype(dtype)
        attrs["intercepts"] = list(rng.uniform(0.4, 0.6, classes))
    m = ml_model("LinearClassifier", {"x": x}, [T.INT64, T.FLOAT], attrs)
    check_on_ep(m, {"x": x}, **tol(post))


@pytest.mark.parametrize("shape", [(4,), (1, 4), (0, 4)], ids=str)
def test_linear_classifier_shapes(shape, rng):
    x = random_array(rng, shape)
    attrs = {"coefficients": list(rng.uniform(-1, 1, 8)), "intercepts": [0.1, -0.2],
             "classlabels_ints": [7, 3]}
    check_on_ep(ml_model("LinearClassifier", {"x": x}, [T.INT64, T.FLOAT], attrs), {"x": x})


def test_linear_classifier_refusals(rng):
    x = random_array(rng, (2, 2))
    base = {"coefficients": [1.0, 2.0, 3.0, 4.0], "intercepts": [0.0, 1.0]}
    m = ml_model("LinearClassifier", {"x": x}, [T.STRING, T.FLOAT],
                 {**base, "classlabels_strings": ["a", "b"]})
    assert "string class labels" in ml_refusal(m, "LinearClassifier")
    m = ml_model("LinearClassifier", {"x": x}, [T.INT64, T.FLOAT],
                 {"coefficients": [1.0, 2.0], "intercepts": [0.5], "classlabels_ints": [0, 1],
                  "post_transform": "PROBIT"})
    assert "unwritten" in ml_refusal(m, "LinearClassifier")


# ---------------------------------------------------------------- SVMRegressor / SVMClassifier

KERNELS = ["LINEAR", "POLY", "RBF", "SIGMOID"]


def _kernel_attrs(rng, kernel, vectors, f, degree=2.0):
    return {"kernel_type": kernel,
            "kernel_params": [float(rng.uniform(0.1, 0.4)), float(rng.uniform(-0.3, 0.3)), degree],
            "support_vectors": list(rng.uniform(-1, 1, vectors * f))}


@pytest.mark.parametrize("kernel,degree", [("LINEAR", 2.0), ("POLY", 2.0), ("POLY", 3.0),
                                           ("POLY", 4.0), ("RBF", 2.0), ("SIGMOID", 2.0)])
@pytest.mark.parametrize("shape", [(6, 3), (1, 3), (0, 3), (3,)], ids=str)
@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor(kernel, degree, shape, one_class, rng):
    x = random_array(rng, shape, low=-1, high=1)
    v = 4
    attrs = {**_kernel_attrs(rng, kernel, v, shape[-1], degree), "n_supports": v,
             "coefficients": list(rng.uniform(-1, 1, v)), "rho": [float(rng.uniform(-0.2, 0.2))],
             "one_class": one_class, "post_transform": "NONE"}
    check_on_ep(ml_model("SVMRegressor", {"x": x}, [T.FLOAT], attrs), {"x": x},
                rtol=1e-5, atol=1e-5)


def test_svm_regressor_linear_form(rng):
    x = random_array(rng, (5, 4))
    attrs = {"n_supports": 0, "coefficients": list(rng.uniform(-1, 1, 4)), "rho": [0.25],
             "kernel_params": [0.5, 0.1, 3.0], "kernel_type": "RBF"}  # the kernel is ignored
    check_on_ep(ml_model("SVMRegressor", {"x": x}, [T.FLOAT], attrs), {"x": x}, atol=1e-5)


def test_svm_regressor_wrong_features(rng):
    attrs = {"n_supports": 2, "coefficients": [0.5, -0.5], "rho": [0.1],
             "kernel_params": [0.5, 0.1, 3.0], "support_vectors": [0.1] * 6}
    m = ml_model("SVMRegressor", {"x": np.zeros((2, 3), F32)}, [T.FLOAT], attrs)
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "f"
    check_raises_like_cpu(m, {"x": random_array(rng, (2, 4))}, {"x": random_array(rng, (2, 3))},
                          match="features")


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("classes", [2, 3, 4])
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("dtype", [F32, I64])
def test_svm_classifier(kernel, classes, post, dtype, rng):
    if classes == 2 and post == "PROBIT":
        pytest.skip("ORT leaves the second column unwritten: refused")
    f = 3
    x = random_array(rng, (7, f), dtype, low=-1, high=1)
    if dtype != F32:
        x = (x % 3 - 1).astype(dtype)
    per = [int(v) for v in rng.integers(1, 4, classes)]
    v = sum(per)
    attrs = {**_kernel_attrs(rng, kernel, v, f), "vectors_per_class": per,
             "classlabels_ints": [int(c) for c in rng.choice(90, classes, replace=False)],
             "coefficients": list(rng.uniform(-1, 1, (classes - 1) * v)),
             "rho": list(rng.uniform(-0.3, 0.3, classes * (classes - 1) // 2)),
             "post_transform": post}
    if post == "PROBIT":
        attrs["coefficients"] = list(rng.uniform(0.0, 0.1, (classes - 1) * v))
        attrs["rho"] = list(rng.uniform(0.3, 0.4, classes * (classes - 1) // 2))
    m = ml_model("SVMClassifier", {"x": x}, [T.INT64, T.FLOAT], attrs)
    check_on_ep(m, {"x": x}, **tol(post))


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("positive", [True, False])
@pytest.mark.parametrize("shape", [(6, 3), (3,), (0, 3)], ids=str)
def test_svm_classifier_linear_form(classes, positive, shape, rng):
    x = random_array(rng, shape, low=-1, high=1)
    lo = 0.0 if positive else -1.0
    attrs = {"classlabels_ints": list(range(10, 10 + classes)), "kernel_params": [0.1, 0.0, 2.0],
             "coefficients": list(rng.uniform(lo, 1, classes * shape[-1])),
             "rho": [float(rng.uniform(-0.5, 0.5))]}
    m = ml_model("SVMClassifier", {"x": x}, [T.INT64, T.FLOAT], attrs)
    check_on_ep(m, {"x": x}, rtol=1e-5, atol=1e-5)


def test_svm_refusals(rng):
    x = random_array(rng, (2, 2))
    base = {"classlabels_ints": [0, 1], "vectors_per_class": [1, 1], "coefficients": [0.5, -0.5],
            "rho": [0.1], "kernel_params": [0.5, 0.1, 2.0], "support_vectors": [0.1] * 4}
    m = ml_model("SVMClassifier", {"x": x}, [T.INT64, T.FLOAT],
                 {**base, "prob_a": [1.0], "prob_b": [0.5]})
    assert "prob_a/prob_b" in ml_refusal(m, "SVMClassifier")
    strings = {k: v for k, v in base.items() if k != "classlabels_ints"}
    m = ml_model("SVMClassifier", {"x": x}, [T.STRING, T.FLOAT],
                 {**strings, "classlabels_strings": ["a", "b"]})
    assert "string class labels" in ml_refusal(m, "SVMClassifier")
