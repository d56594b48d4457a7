"""ONNX RotaryEmbedding (opset 23, ops/rotary.cpp) on the EP vs ORT CPU. The com.microsoft
RotaryEmbedding tests are in test_attention.py."""

import numpy as np
import pytest

from opcheck import check_error_on_ep, check_on_ep, single_node_model
from ortmlx.testing import random_array


def rotary_model(x, cos, sin, pos, attrs):
    ins = {"x": x, "cos": cos, "sin": sin}
    if pos is not None:
        ins["pos"] = pos
    return single_node_model("RotaryEmbedding", ins, attrs=attrs, opset=23), ins


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("rank", [3, 4])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rot", [0, 4])
@pytest.mark.parametrize("with_pos", [True, False])
def test_onnx_rotary(dtype, rank, interleaved, rot, with_pos, rng):
    b, s, h, d = 2, 3, 2, 8
    x = random_array(rng, (b, s, h * d) if rank == 3 else (b, h, s, d), dtype)
    half = (rot or d) // 2
    if with_pos:
        cos = random_array(rng, (7, half), dtype)
        sin = random_array(rng, (7, half), dtype)
        pos = rng.integers(0, 7, (b, s)).astype(np.int64)
    else:
        cos = random_array(rng, (b, s, half), dtype)
        sin = random_array(rng, (b, s, half), dtype)
        pos = None
    attrs = {"interleaved": interleaved}
    if rot:
        attrs["rotary_embedding_dim"] = rot
    if rank == 3:
        attrs["num_heads"] = h
    model, feeds = rotary_model(x, cos, sin, pos, attrs)
    tol = 1e-5 if dtype == np.float32 else 2e-3
    check_on_ep(model, feeds, rtol=tol, atol=tol)


def test_onnx_rotary_empty_and_errors(rng):
    x = random_array(rng, (0, 2, 3, 4))
    cos, sin = random_array(rng, (5, 2)), random_array(rng, (5, 2))
    model, feeds = rotary_model(x, cos, sin, np.zeros((0, 3), np.int64), {})
    check_on_ep(model, feeds)
    x = random_array(rng, (1, 2, 3, 4))
    model, feeds = rotary_model(x, cos, sin, np.array([[0, 1, 9]], np.int64), {})
    check_error_on_ep(model, feeds, "out of range")
