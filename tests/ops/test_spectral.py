"""HannWindow, HammingWindow, BlackmanWindow on the EP vs ORT CPU. Both compute ORT's cosine sum
on the host in double with ORT's constants (its truncated pi included); ORT 1.30's wheel rounds
some values to the neighbouring float32 (its compiled cos differs from the C library's in the last
bits of a double): 1e-7 absolute (under one float32 ulp of 1) plus 1e-6 relative."""

import numpy as np
import pytest

from onnx import TensorProto, helper

from opcheck import NP_TO_ONNX, check_on_ep, refusal
from ort_raises import check_raises_like_cpu
from ortmlx.testing import make_model, random_array

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


# ---------------------------------------------------------------- DFT

def dft_model(x, attrs, opset, dft_length=None, axis=None):
    """DFT with dft_length and (opset 20) axis as graph inputs when given; outputs typed only
    (their length follows the inputs' values)."""
    names, g_in = ["x"], [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))]
    feeds = {"x": x}
    for name, value in (("dft_length", dft_length), ("axis", axis)):
        if value is None:
            names.append("")
            continue
        names.append(name)
        g_in.append(helper.make_tensor_value_info(name, NP_TO_ONNX[value.dtype], []))
        feeds[name] = value
    while names[-1] == "":
        names.pop()
    node = helper.make_node("DFT", names, ["out0"], name="node", **attrs)
    graph = helper.make_graph([node], "g", g_in,
                              [helper.make_tensor_value_info("out0", TensorProto.FLOAT, None)])
    return make_model(graph, opset=opset, check=False), feeds


# MLX's FFT and ORT's own FFT round differently: 1e-4 relative, and an absolute term of 1e-5 of
# the sum of magnitudes along the axis (the scale a bin's rounding error grows with).
def dft_check(model, feeds, x):
    scale = float(np.abs(x).sum(axis=tuple(range(1, x.ndim - 1))).max())
    check_on_ep(model, feeds, rtol=1e-4, atol=1e-5 * max(scale, 1.0))


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("complex_in", [False, True])
@pytest.mark.parametrize("inverse", [0, 1])
@pytest.mark.parametrize("axis", [1, 2])
@pytest.mark.parametrize("n", [8, 10, 7])
def test_dft(opset, complex_in, inverse, axis, n, rng):
    x = random_array(rng, (2, n, 6, 2 if complex_in else 1))
    if axis == 2:
        x = random_array(rng, (2, 5, n, 2 if complex_in else 1))
    attrs = {"inverse": inverse}
    if opset == 17:
        attrs["axis"] = axis
        model, feeds = dft_model(x, attrs, 17)
    else:
        model, feeds = dft_model(x, attrs, 20, axis=np.array(axis - x.ndim if axis == 2 else axis,
                                                              np.int64))
    dft_check(model, feeds, x)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("n,length", [(8, 8), (10, 16), (9, 5), (6, 7)], ids=str)
def test_dft_onesided_and_length(opset, n, length, rng):
    x = random_array(rng, (3, n, 1))
    for onesided in (0, 1):
        attrs = {"onesided": onesided}
        model, feeds = dft_model(x, attrs, opset, dft_length=np.array(length, np.int64))
        dft_check(model, feeds, x)


def test_dft_refusals(rng):
    from opcheck import refusal as why

    x = random_array(rng, (1, 6, 2))
    model, _ = dft_model(x, {"onesided": 1, "inverse": 1}, 20)
    assert "onesided" in why(model, "DFT")
    node = helper.make_node("DFT", ["x"], ["out0"], name="node")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16,
                                                                          [1, 6, 1])],
                              [helper.make_tensor_value_info("out0", TensorProto.FLOAT16, None)])
    assert "float32 only" in why(make_model(graph, opset=20, check=False), "DFT")
