"""Comparison / logical family (issue 9): every case runs on the EP and matches ORT CPU."""

import numpy as np
import pytest

from opcheck import check_on_ep, refusal, single_node_model
from ortmlx.testing import random_array

NUMERIC = [np.float32, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
           np.uint32, np.uint64]
SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5,), ()),
          ((0, 3), (3,)), ((1,), (1,))]
COMPARE = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]


def _pair(rng, shapes, dtype):
    # Small value range so equal elements occur.
    if np.issubdtype(dtype, np.floating):
        a = rng.integers(-3, 4, size=shapes[0]).astype(dtype)
        b = rng.integers(-3, 4, size=shapes[1]).astype(dtype)
    else:
        a = random_array(rng, shapes[0], dtype) % 4
        b = random_array(rng, shapes[1], dtype) % 4
    return a, b


@pytest.mark.parametrize("op", COMPARE)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_compare_broadcast(op, shapes, rng):
    a, b = _pair(rng, shapes, np.float32)
    check_on_ep(single_node_model(op, {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("op", COMPARE)
@pytest.mark.parametrize("dtype", NUMERIC)
def test_compare_types(op, dtype, rng):
    a, b = _pair(rng, ((3, 4), (4,)), dtype)
    check_on_ep(single_node_model(op, {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("op", COMPARE)
def test_compare_nan_inf_and_zero_signs(op):
    a = np.array([np.nan, 1.0, np.inf, -np.inf, 0.0, np.nan, np.inf], dtype=np.float32)
    b = np.array([1.0, np.nan, np.inf, 3.0, -0.0, np.nan, -np.inf], dtype=np.float32)
    check_on_ep(single_node_model(op, {"a": a, "b": b}), {"a": a, "b": b})


def test_equal_bool(rng):
    a, b = rng.random((3, 4)) < 0.5, rng.random((4,)) < 0.5
    check_on_ep(single_node_model("Equal", {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_logical_binary(op, shapes, rng):
    a, b = np.asarray(rng.random(shapes[0]) < 0.5), np.asarray(rng.random(shapes[1]) < 0.5)
    check_on_ep(single_node_model(op, {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("shape", [(2, 3, 5), (), (0, 4), (1,)], ids=str)
def test_not(shape, rng):
    x = np.asarray(rng.random(shape) < 0.5)
    check_on_ep(single_node_model("Not", {"x": x}), {"x": x})


# ORT's CPU EP runs Where for these value types only; the EP claims the same set.
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64, np.uint8])
def test_where_types(dtype, rng):
    c = rng.random((3, 1, 5)) < 0.5
    x = random_array(rng, (4, 5), dtype)
    y = random_array(rng, (3, 4, 1), dtype)
    check_on_ep(single_node_model("Where", {"c": c, "x": x, "y": y}), {"c": c, "x": x, "y": y})


def test_where_shapes_and_nan(rng):
    c = np.array(True)
    x = np.array([np.nan, 1.0, -np.inf], np.float32)
    y = random_array(rng, (2, 3))
    check_on_ep(single_node_model("Where", {"c": c, "x": x, "y": y}), {"c": c, "x": x, "y": y})
    c = np.zeros((0, 3), bool)
    check_on_ep(single_node_model("Where", {"c": c, "x": x, "y": y[:1]}), {"c": c, "x": x, "y": y[:1]})


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -3.5, 65504.0, -np.nan], np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_isnan(dtype, rng):
    x = np.concatenate([SPECIAL.astype(dtype), random_array(rng, (7,), dtype)]).reshape(4, 4)
    check_on_ep(single_node_model("IsNaN", {"x": x}), {"x": x})


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("neg,pos", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_isinf(dtype, neg, pos):
    x = SPECIAL.astype(dtype)
    model = single_node_model("IsInf", {"x": x}, attrs={"detect_negative": neg, "detect_positive": pos})
    check_on_ep(model, {"x": x})


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift(dtype, direction, rng):
    bits = np.dtype(dtype).itemsize * 8
    x = rng.integers(0, np.iinfo(dtype).max, size=(3, 4), dtype=dtype, endpoint=True)
    y = rng.integers(0, bits + 3, size=(4,)).astype(dtype)  # includes shifts >= the bit width
    y[0], y[1] = bits, bits - 1
    try:
        check_on_ep(single_node_model("BitShift", {"x": x, "y": y}, attrs={"direction": direction}),
                    {"x": x, "y": y})
    except Exception as e:  # ORT's CPU EP has no kernel for every unsigned type
        if "Could not find an implementation" in str(e):
            pytest.skip("ORT CPU has no BitShift kernel for " + np.dtype(dtype).name)
        raise


def test_refusals(rng):
    a = rng.uniform(size=(3,))  # float64: not run by the EP
    assert "float64" in refusal(single_node_model("Less", {"a": a, "b": a}), "Less")
    c = np.array([True, False, True])
    assert "float64" in refusal(single_node_model("Where", {"c": c, "a": a, "b": a}), "Where")


@pytest.mark.parametrize("op,opset,dtype", [("Equal", 7, np.int32), ("Equal", 7, np.bool_),
                                            ("Equal", 11, np.float32), ("Less", 7, np.float32),
                                            ("Less", 9, np.int64), ("Greater", 7, np.float32),
                                            ("Greater", 9, np.int32)], ids=str)
def test_compare_old_opsets(op, opset, dtype, rng):
    if dtype == np.bool_:
        a, b = rng.random((3, 4)) < 0.5, rng.random((4,)) < 0.5
    else:
        a = rng.integers(-3, 3, (3, 4)).astype(dtype)
        b = rng.integers(-3, 3, (4,)).astype(dtype)
    check_on_ep(single_node_model(op, {"a": a, "b": b}, opset=opset), {"a": a, "b": b})


def test_isnan_opset_9(rng):
    x = random_array(rng, (3, 4))
    x[1, 2] = np.nan
    check_on_ep(single_node_model("IsNaN", {"x": x}, opset=9), {"x": x})
