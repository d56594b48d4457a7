"""Gather, GatherElements, GatherND, ScatterND, ScatterElements, OneHot, Trilu: random data,
negative indices, empty and size-1 dims, every claimed dtype; compared with ORT CPU."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from opcheck import NP_TO_ONNX, check_on_ep, refusal, single_node_model
from ort_raises import check_raises_like_cpu, dynamic_dims
from ortmlx.testing import make_model, random_array

I64 = np.int64
DTYPES = [np.float32, np.float16, np.int32, np.int64, np.bool_, np.int8, np.uint8]


def indices(rng, shape, dim, dtype=I64):
    """Random in-range indices for an axis of size `dim`, half of them negative."""
    i = rng.integers(0, dim, size=shape)
    neg = rng.random(size=shape) < 0.5
    return np.where(neg, i - dim, i).astype(dtype)


def unique_rows(rng, count, dims):
    """`count` distinct index tuples over `dims` (scatters without duplicates are deterministic)."""
    flat = rng.choice(int(np.prod(dims)), size=count, replace=False)
    return np.stack(np.unravel_index(flat, dims), axis=-1).astype(I64)


# ---------------------------------------------------------------- Gather

@pytest.mark.parametrize("case", [((5, 4), 0, (3,)), ((5, 4), 1, (2, 2)), ((5, 4), -1, ()),
                                  ((3, 4, 5), 1, (6,)), ((3, 4, 5), 2, (2, 1, 3)), ((7,), 0, (4,)),
                                  ((5, 4), 0, (0,)), ((1, 3), 0, (2,))], ids=str)
@pytest.mark.parametrize("ind_dtype", [np.int64, np.int32])
def test_gather(case, ind_dtype, rng):
    shape, axis, ishape = case
    x = random_array(rng, shape)
    idx = indices(rng, ishape, shape[axis], ind_dtype)
    check_on_ep(single_node_model("Gather", {"x": x, "i": idx}, attrs={"axis": axis}),
                {"x": x, "i": idx})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opset", [1, 11, 13])
def test_gather_types(dtype, opset, rng):
    x = random_array(rng, (4, 3), dtype)
    idx = np.array([3, 0, 0, 2], I64) if opset < 11 else indices(rng, (4,), 4)
    check_on_ep(single_node_model("Gather", {"x": x, "i": idx}, opset=opset), {"x": x, "i": idx})


def test_gather_constant_indices(rng):
    # Embedding lookup shape: constant table, runtime ids; and runtime table, constant ids.
    x = random_array(rng, (10, 4))
    idx = indices(rng, (2, 3), 10)
    check_on_ep(single_node_model("Gather", {"x": x, "i": idx}, initializers={"i": idx}),
                {"x": x})


# ---------------------------------------------------------------- GatherElements

@pytest.mark.parametrize("case", [((3, 4), 0, (2, 4)), ((3, 4), 1, (3, 6)), ((3, 4), -1, (2, 2)),
                                  ((2, 3, 4), 1, (2, 5, 4)), ((5,), 0, (7,)), ((3, 4), 0, (0, 4))],
                         ids=str)
@pytest.mark.parametrize("ind_dtype", [np.int64, np.int32])
def test_gather_elements(case, ind_dtype, rng):
    shape, axis, ishape = case
    x = random_array(rng, shape)
    idx = indices(rng, ishape, shape[axis], ind_dtype)
    check_on_ep(single_node_model("GatherElements", {"x": x, "i": idx}, attrs={"axis": axis}),
                {"x": x, "i": idx})


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_elements_types(dtype, rng):
    x = random_array(rng, (3, 3), dtype)
    idx = indices(rng, (3, 3), 3)
    check_on_ep(single_node_model("GatherElements", {"x": x, "i": idx}, attrs={"axis": 1}),
                {"x": x, "i": idx})


# ---------------------------------------------------------------- GatherND

@pytest.mark.parametrize("case", [((4, 5), (3, 2), 0), ((4, 5), (3, 1), 0), ((4, 5, 6), (2, 2, 2), 0),
                                  ((2, 4, 5), (2, 3, 1), 1), ((2, 3, 4, 5), (2, 3, 2), 2),
                                  ((2, 3, 4), (2, 1), 1), ((4, 5), (0, 2), 0)], ids=str)
def test_gather_nd(case, rng):
    shape, ishape, b = case
    x = random_array(rng, shape)
    k = ishape[-1]
    dims = shape[b:b + k]
    idx = np.stack([indices(rng, ishape[:-1], d) for d in dims], axis=-1).astype(I64)
    check_on_ep(single_node_model("GatherND", {"x": x, "i": idx}, attrs={"batch_dims": b}),
                {"x": x, "i": idx})


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_nd_types(dtype, rng):
    x = random_array(rng, (3, 4, 2), dtype)
    idx = np.stack([indices(rng, (5,), 3), indices(rng, (5,), 4)], axis=-1)
    check_on_ep(single_node_model("GatherND", {"x": x, "i": idx}, opset=12), {"x": x, "i": idx})


@pytest.mark.parametrize("case", [((1, 2, 4, 0), [[[2**63 - 1, 0]], [[-1, -2]]]),
                                  ((2, 0), [[5]]), ((2, 3, 0), [[1, 7]]), ((2, 3, 0), [[-9]])],
                         ids=str)
def test_gather_nd_empty_slices_ignore_indices_like_cpu(case):
    # Slices of no elements: ORT CPU returns the empty result without checking the indices; the
    # EP raised "invalid index" (fuzz seed 3). Indices into a dim with non-empty slices are
    # still checked (test_out_of_range_indices_raise_like_ort).
    shape, idx = case
    x = np.zeros(shape, np.int32)
    idx = np.array(idx, I64)
    check_on_ep(single_node_model("GatherND", {"x": x, "i": idx}), {"x": x, "i": idx})


# ---------------------------------------------------------------- ScatterND

@pytest.mark.parametrize("case", [((6, 3), 4, 1), ((4, 5, 2), 3, 2), ((4, 5), 2, 2), ((8,), 5, 1),
                                  ((4, 5, 2), 0, 1)], ids=str)
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(case, reduction, rng):
    shape, m, k = case
    x = random_array(rng, shape)
    idx = unique_rows(rng, m, shape[:k])
    idx = np.where(rng.random(idx.shape) < 0.5, idx - np.array(shape[:k]), idx).astype(I64)
    upd = random_array(rng, (m, *shape[k:]))
    attrs = {} if reduction == "none" else {"reduction": reduction}
    model = single_node_model("ScatterND", {"x": x, "i": idx, "u": upd}, attrs=attrs, opset=18)
    check_on_ep(model, {"x": x, "i": idx, "u": upd})


def test_scatter_nd_add_duplicates(rng):
    x = random_array(rng, (5, 3))
    idx = np.array([[1], [3], [1], [1]], I64)
    upd = random_array(rng, (4, 3))
    model = single_node_model("ScatterND", {"x": x, "i": idx, "u": upd},
                              attrs={"reduction": "add"}, opset=16)
    check_on_ep(model, {"x": x, "i": idx, "u": upd}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_nd_types(dtype, rng):
    x = random_array(rng, (4, 3), dtype)
    idx = unique_rows(rng, 2, (4,))
    upd = random_array(rng, (2, 3), dtype)
    check_on_ep(single_node_model("ScatterND", {"x": x, "i": idx, "u": upd}, opset=13),
                {"x": x, "i": idx, "u": upd})


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
@pytest.mark.parametrize("op", ["ScatterND", "ScatterElements"])
def test_scatter_64bit_values_are_exact(op, dtype, rng):
    """Plain 64-bit scatters move word pairs (MLX's GPU scatter has no 64-bit types): values
    beyond 32 bits, negative ones included, come through bit-exact on every backend."""
    x = (rng.integers(-2**62, 2**62, size=(4, 3)) | (1 << 40)).astype(dtype)
    upd = (rng.integers(-2**62, 2**62, size=(2, 3)) | (1 << 33)).astype(dtype)
    idx = (np.array([[3], [0]], I64) if op == "ScatterND"
           else np.array([[2, 0, 1], [0, 3, 3]], I64))
    feeds = {"x": x, "i": idx, "u": upd}
    check_on_ep(single_node_model(op, feeds, opset=13), feeds)


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_int64_reductions(reduction, rng):
    """Reducing int64 scatters run on MLX's CPU backend; GPU backends refuse them with the reason
    (MLX's GPU scatter has no 64-bit types), so ORT runs them."""
    from ortmlx.testing import mlx_backend

    x = rng.integers(-1000, 1000, size=(5, 3)).astype(I64)
    idx = np.array([[1], [3], [1]], I64)
    upd = rng.integers(-1000, 1000, size=(3, 3)).astype(I64)
    feeds = {"x": x, "i": idx, "u": upd}
    model = single_node_model("ScatterND", feeds, attrs={"reduction": reduction}, opset=18)
    if mlx_backend() == "gpu":
        assert "64-bit" in refusal(model, "ScatterND")
    else:
        check_on_ep(model, feeds)


def test_scatter_nd_reduction_bool_is_refused(rng):
    x = random_array(rng, (4,), np.bool_)
    idx = np.array([[1]], I64)
    upd = random_array(rng, (1,), np.bool_)
    model = single_node_model("ScatterND", {"x": x, "i": idx, "u": upd},
                              attrs={"reduction": "add"}, opset=16, )
    assert "reduction add" in refusal(model, "ScatterND")


@pytest.mark.parametrize("op", ["ScatterND", "ScatterElements"])
@pytest.mark.parametrize("reduction", ["add", "mul"])
def test_scatter_float16_add_mul_is_refused(op, reduction, rng):
    # ORT CPU raises "MLFloat16 data type is not supported" for any float16 reduction; max/min
    # are exact and stay claimed (docs/RELIABILITY.md), but a float16 sum or product of repeated
    # targets has no defined rounding order: refused, the fallback raises as ORT (fuzz: the EP
    # returned values).
    x = random_array(rng, (4,), np.float16)
    idx = np.array([[1], [1]], I64) if op == "ScatterND" else np.array([1, 1], I64)
    upd = random_array(rng, (2,), np.float16)
    model = single_node_model(op, {"x": x, "i": idx, "u": upd},
                              attrs={"reduction": reduction}, opset=16)
    assert "float16 is not implemented" in refusal(model, op)


# ---------------------------------------------------------------- ScatterElements

@pytest.mark.parametrize("case", [((4, 5), 0, (2, 5)), ((4, 5), 1, (4, 2)), ((4, 5), -1, (3, 3)),
                                  ((3, 4, 5), 1, (2, 2, 3)), ((6,), 0, (3,)), ((4, 5), 0, (0, 5))],
                         ids=str)
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements(case, reduction, rng):
    shape, axis, ishape = case
    x = random_array(rng, shape)
    # Distinct targets along the axis for each position (a permutation prefix per line).
    a = axis % len(shape)
    perm = np.argsort(rng.random((*ishape[:a], shape[a], *ishape[a + 1:])), axis=a)
    idx = np.take(perm, np.arange(ishape[a]), axis=a)
    idx = np.where(rng.random(idx.shape) < 0.5, idx - shape[a], idx).astype(I64)
    upd = random_array(rng, ishape)
    attrs = {"axis": axis} if reduction == "none" else {"axis": axis, "reduction": reduction}
    model = single_node_model("ScatterElements", {"x": x, "i": idx, "u": upd}, attrs=attrs, opset=18)
    check_on_ep(model, {"x": x, "i": idx, "u": upd})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ind_dtype", [np.int64, np.int32])
def test_scatter_elements_types(dtype, ind_dtype, rng):
    x = random_array(rng, (3, 4), dtype)
    idx = np.array([[2, 0, 1, 1], [0, 2, 0, 2]], ind_dtype)
    upd = random_array(rng, (2, 4), dtype)
    check_on_ep(single_node_model("ScatterElements", {"x": x, "i": idx, "u": upd}, opset=13),
                {"x": x, "i": idx, "u": upd})


# ---------------------------------------------------------------- OneHot

@pytest.mark.parametrize("case", [((4,), -1), ((2, 3), 0), ((2, 3), 1), ((2, 3), -2), ((1,), 0),
                                  ((0, 2), -1)], ids=str)
@pytest.mark.parametrize("types", [(I64, I64, np.float32), (np.int32, np.float32, np.float32),
                                   (np.float32, np.float32, np.float32), (I64, I64, I64),
                                   (I64, np.int32, np.float32)], ids=str)
def test_one_hot(case, types, rng):
    shape, axis = case
    it, dt, vt = types
    depth = 5
    idx = rng.integers(-depth - 1, depth + 2, size=shape).astype(it)  # some out of range
    feeds = {"i": idx, "d": np.array(depth, dt), "v": np.array([2, -3], vt)}
    check_on_ep(single_node_model("OneHot", feeds, attrs={"axis": axis}), feeds)


# ---------------------------------------------------------------- Trilu

@pytest.mark.parametrize("shape", [(4, 5), (5, 3), (2, 3, 3), (1, 1), (0, 3), (3, 0)], ids=str)
@pytest.mark.parametrize("k", [None, 0, 1, -1, 2, -4, 10, -10])
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu(shape, k, upper, rng):
    x = random_array(rng, shape)
    feeds = {"x": x} if k is None else {"x": x, "k": np.array(k, I64)}
    check_on_ep(single_node_model("Trilu", feeds, attrs={"upper": upper}), feeds)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64, np.bool_])
def test_trilu_types_constant_k(dtype, rng):
    x = random_array(rng, (4, 4), dtype)
    k = np.array(1, I64)
    check_on_ep(single_node_model("Trilu", {"x": x, "k": k}, initializers={"k": k},
                                  attrs={"upper": 0}), {"x": x})


# ---------------------------------------------------------------- out-of-range indices

BIG = 1 << 40


def out_of_range_cases(rng):
    """(model, bad feeds, good feeds, message regex) per op: ORT CPU rejects each bad input."""
    x = random_array(rng, (5, 4))
    cases = []
    for bad in ([0, 5], [-6, 1], [BIG, 0], [-BIG, 2]):
        i = np.array(bad, I64)
        cases.append(("Gather", single_node_model("Gather", {"x": x, "i": i}, attrs={"axis": 0}),
                      {"x": x, "i": i}, {"x": x, "i": indices(rng, (2,), 5)},
                      r"inclusive range \[-5,4\] of data axis 0"))
    i = np.array([[0, 4], [1, -5]], I64)
    cases.append(("GatherElements",
                  single_node_model("GatherElements", {"x": x, "i": i}, attrs={"axis": 1}),
                  {"x": x, "i": i}, {"x": x, "i": indices(rng, (2, 2), 4)}, r"\[-4,3\]"))
    i = np.array([[1, 4], [BIG, 0]], I64)
    cases.append(("GatherND", single_node_model("GatherND", {"x": x, "i": i}), {"x": x, "i": i},
                  {"x": x, "i": unique_rows(rng, 2, (5, 4))}, r"\[-5,4\], \[-4,3\]"))
    u = random_array(rng, (2, 4))
    i = np.array([[-BIG], [1]], I64)
    cases.append(("ScatterND", single_node_model("ScatterND", {"x": x, "i": i, "u": u}),
                  {"x": x, "i": i, "u": u}, {"x": x, "i": unique_rows(rng, 2, (5,)), "u": u},
                  r"\[-5,4\]"))
    u = random_array(rng, (1, 2))
    i = np.array([[0, 4]], I64)
    good = np.array([[3, -1]], I64)
    cases.append(("ScatterElements",
                  single_node_model("ScatterElements", {"x": x, "i": i, "u": u},
                                    attrs={"axis": 1, "reduction": "add"}, opset=18),
                  {"x": x, "i": i, "u": u}, {"x": x, "i": good, "u": u}, r"\[-4,3\]"))
    return cases


@pytest.mark.parametrize("no_compile", [0, 1], ids=["compiled", "eager"])
def test_out_of_range_indices_raise_like_ort(no_compile, rng):
    """ORT CPU rejects an index outside [-dim, dim): so does the EP, naming the node, through a
    runtime check read after the evaluation; the kernels themselves only ever see clamped indices
    (MLX's gather/scatter do not bounds-check). The session then runs a good input. Replaces the
    clamp of issue 8, which returned edge elements instead of raising."""
    for op, model, bad, good, match in out_of_range_cases(rng):
        check_raises_like_cpu(model, bad, good, match=match,
                              provider_options={"no_compile": no_compile})


@pytest.mark.parametrize("op", ["Gather", "GatherElements", "GatherND", "ScatterElements",
                                "ScatterND"])
def test_indices_into_an_empty_axis_raise(op, rng):
    """An empty axis has no valid index: clamping would read an empty buffer (it returned heap
    contents); ORT raises, so does the EP. The session then runs a good input."""
    x = np.zeros((0, 3), np.float32)
    if op in ("Gather", "GatherND"):
        shape = (2,) if op == "Gather" else (2, 1)
        attrs = {"axis": 0} if op == "Gather" else {}
        model = single_node_model(op, {"x": x, "i": np.zeros(shape, I64)}, attrs=attrs)
        bad = {"x": x, "i": np.zeros(shape, I64)}
        good = {"x": x, "i": np.ones(shape, I64)}
    elif op == "GatherElements":
        model = single_node_model(op, {"x": x, "i": np.zeros((1, 3), I64)}, attrs={"axis": 0})
        bad = {"x": x, "i": np.zeros((1, 3), I64)}
        good = {"x": x, "i": np.ones((1, 3), I64)}
    elif op == "ScatterElements":
        u = random_array(rng, (1, 3))
        model = single_node_model(op, {"x": x, "i": np.zeros((1, 3), I64), "u": u},
                                  attrs={"axis": 0})
        bad = {"x": x, "i": np.zeros((1, 3), I64), "u": u}
        good = {"x": x, "i": np.array([[1, 0, 3]], I64), "u": u}
    else:
        u = random_array(rng, (2, 3))
        model = single_node_model(op, {"x": x, "i": np.zeros((2, 1), I64), "u": u})
        bad = {"x": x, "i": np.zeros((2, 1), I64), "u": u}
        good = {"x": x, "i": np.array([[1], [-1]], I64), "u": u}
    good["x"] = random_array(rng, (4, 3))
    check_raises_like_cpu(dynamic_dims(model), bad, good)


# ---------------------------------------------------------------- Scatter (opsets 9-10)

@pytest.mark.parametrize("opset", [9, 10])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_deprecated_alias(opset, dtype, axis, rng):
    x = random_array(rng, (3, 4), dtype)
    a = axis % 2
    perm = np.argsort(rng.random((3, 4)), axis=a)
    idx = np.take(perm, np.arange(2), axis=a).astype(I64)
    if axis != 0:
        idx = idx - np.where(rng.random(idx.shape) < 0.5, 4, 0)
    upd = random_array(rng, idx.shape, dtype)
    model = single_node_model("Scatter", {"x": x, "i": idx, "u": upd}, attrs={"axis": axis},
                              opset=opset)
    check_on_ep(model, {"x": x, "i": idx, "u": upd})


def test_scatter_out_of_range_raises_like_ort(rng):
    x, u = random_array(rng, (2, 4)), random_array(rng, (1, 2))
    model = single_node_model("Scatter", {"x": x, "i": np.array([[0, 1]], I64), "u": u},
                              attrs={"axis": 1}, opset=10)
    check_raises_like_cpu(model, {"x": x, "i": np.array([[0, 4]], I64), "u": u},
                          {"x": x, "i": np.array([[3, -4]], I64), "u": u}, match=r"\[-4,3\]")
