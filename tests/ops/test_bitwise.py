"""Bitwise family (opset 18): every case runs on the EP and matches ORT CPU exactly."""

import numpy as np
import pytest

from opcheck import check_on_ep, single_node_model

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5,), ()),
          ((0, 3), (3,)), ((1,), (1,))]
BINARY = ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]


def _ints(rng, shape, dtype):
    # Full-range values: sign bits and high bits take part.
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("dtype", INTS)
def test_binary_types(op, dtype, rng):
    a, b = _ints(rng, (3, 4), dtype), _ints(rng, (4,), dtype)
    check_on_ep(single_node_model(op, {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_binary_broadcast(op, shapes, rng):
    a, b = _ints(rng, shapes[0], np.int32), _ints(rng, shapes[1], np.int32)
    check_on_ep(single_node_model(op, {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("shape", [(2, 3, 5), (), (0, 4), (1,)], ids=str)
def test_not(dtype, shape, rng):
    x = _ints(rng, shape, dtype)
    check_on_ep(single_node_model("BitwiseNot", {"x": x}), {"x": x})
