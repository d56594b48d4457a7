"""HannWindow, HammingWindow, BlackmanWindow on the EP vs ORT CPU. Both compute ORT's cosine sum
on the host in double with ORT's constants (its truncated pi included); ORT 1.30's wheel rounds
some values to the neighbouring float32 (its compiled cos differs from the C library's in the last
bits of a double): 1e-7 absolute (under one float32 ulp of 1) plus 1e-6 relative."""

import numpy as np
import pytest

from onnx import TensorProto, helper

from opcheck import NP_TO_ONNX, check_on_ep, refusal
from ort_raises import check_raises_like_cpu
from ortmlx.testing import make_model

WINDOWS = ["HannWindow", "HammingWindow", "BlackmanWindow"]


def tol(op):
    return dict(rtol=1e-6, atol=1e-7)


def window_model(op, size, attrs=None):
    """The size is a graph input: with a constant size ORT folds the node away before any EP
    sees it. The output length is then unknown to ONNX, so the output is typed only."""
    node = helper.make_node(op, ["size"], ["out0"], name="node", **(attrs or {}))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("size", NP_TO_ONNX[size.dtype], [])],
        [helper.make_tensor_value_info("out0", (attrs or {}).get("output_datatype", TensorProto.FLOAT),
                                       None)])
    return make_model(graph, opset=17, check=False)


@pytest.mark.parametrize("op", WINDOWS)
@pytest.mark.parametrize("size", [0, 1, 2, 7, 10, 64, 1001])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_window(op, size, periodic, dtype):
    s = np.array(size, dtype)
    check_on_ep(window_model(op, s, {"periodic": periodic}), {"size": s}, **tol(op))


@pytest.mark.parametrize("op", WINDOWS)
def test_window_size_changes_between_runs(op):
    # The size is read on the host each run (it decides the output shape).
    model = window_model(op, np.array(0, np.int64))
    for size in (9, 4, 9):
        s = np.array(size, np.int64)
        check_on_ep(model, {"size": s}, **tol(op))


@pytest.mark.parametrize("op", WINDOWS)
def test_window_refusals(op):
    s = np.array(8, np.int64)
    m = window_model(op, s, {"output_datatype": 7})
    assert "float32 only" in refusal(m, op)
    m = window_model(op, s, {"output_datatype": 11})
    assert "float32 only" in refusal(m, op)


@pytest.mark.parametrize("op", WINDOWS)
def test_window_negative_size_raises_like_cpu(op):
    s = np.array(-3, np.int64)
    check_raises_like_cpu(window_model(op, s), {"size": s},
                          {"size": np.array(5, np.int64)}, match="negative", **tol(op))
