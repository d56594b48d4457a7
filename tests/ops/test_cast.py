import numpy as np
import onnx
import pytest
from onnx import helper

from opcheck import NP_TO_ONNX, check_on_ep, refusal, single_node_model
from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, random_array

TYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
         np.uint64, np.float16, np.float32]


def source_data(rng, src, dst, shape=(3, 5)):
    """Random data whose conversion is defined in C++ (so ORT CPU and MLX must agree exactly):
    floats going to an integer type stay inside its range (non-negative for unsigned targets);
    exact zeros are mixed in so `!= 0` (to bool) is exercised both ways."""
    src, dst = np.dtype(src), np.dtype(dst)
    if np.issubdtype(src, np.floating):
        lo = 0.0 if np.issubdtype(dst, np.unsignedinteger) else -100.0
        x = rng.uniform(lo, 100.0, size=shape).astype(src)
    else:
        x = random_array(rng, shape, src)
    flat = x.reshape(-1)
    if flat.size:
        flat[::4] = 0
    return x


@pytest.mark.parametrize("src", TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("dst", TYPES, ids=lambda t: np.dtype(t).name)
def test_cast_matrix(src, dst, rng):
    x = source_data(rng, src, dst)
    model = single_node_model("Cast", {"x": x}, attrs={"to": NP_TO_ONNX[np.dtype(dst)]})
    check_on_ep(model, {"x": x})


def test_cast_float_to_int_truncates_toward_zero():
    x = np.array([-2.7, -2.5, -0.9, -0.0, 0.4, 1.5, 2.999, 99.99], dtype=np.float32)
    got = check_on_ep(single_node_model("Cast", {"x": x}, attrs={"to": onnx.TensorProto.INT32}), {"x": x})
    np.testing.assert_array_equal(got[0], [-2, -2, 0, 0, 0, 1, 2, 99])


def test_cast_to_bool_is_nonzero():
    x = np.array([0.0, -0.0, 1e-30, -3.0, np.inf, 0.5], dtype=np.float32)
    got = check_on_ep(single_node_model("Cast", {"x": x}, attrs={"to": onnx.TensorProto.BOOL}), {"x": x})
    np.testing.assert_array_equal(got[0], [False, False, True, True, True, True])


def test_integer_narrowing_wraps_like_cpu(rng):
    # Integer -> narrower integer is modular in C++20: same answer on both sides.
    x = np.array([300, -129, 65535, -1, 127, 128], dtype=np.int32)
    for to in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16):
        check_on_ep(single_node_model("Cast", {"x": x}, attrs={"to": to}), {"x": x})


def test_float_specials_to_float_types():
    x = np.array([np.nan, np.inf, -np.inf, 7e4, -7e4, 1e-8, 65504.0], dtype=np.float32)
    check_on_ep(single_node_model("Cast", {"x": x}, attrs={"to": onnx.TensorProto.FLOAT16}), {"x": x})


@pytest.mark.parametrize("shape", [(0, 3), (), (1,)], ids=str)
def test_cast_shapes(shape, rng):
    x = random_array(rng, shape, np.float32)
    check_on_ep(single_node_model("Cast", {"x": x}, attrs={"to": onnx.TensorProto.INT64}), {"x": x})


@pytest.mark.parametrize("opset", [6, 9, 13, 19, 21])
def test_cast_opsets(opset, rng):
    x = random_array(rng, (2, 3), np.int32)
    check_on_ep(single_node_model("Cast", {"x": x}, attrs={"to": onnx.TensorProto.FLOAT}, opset=opset),
                {"x": x})


def test_cast_saturate_attribute_is_accepted(rng):
    # saturate only matters for float8 targets; for others it is a no-op. ORT's CPU kernel refuses
    # to build with it set on a non-float8 Cast, so the reference is numpy.
    x = random_array(rng, (4,), np.float32)
    model = single_node_model("Cast", {"x": x}, attrs={"to": onnx.TensorProto.FLOAT16, "saturate": 0},
                              opset=19)
    run = EpRun(model, strict=True)
    try:
        got = run.run({"x": x})
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    np.testing.assert_array_equal(got[0], x.astype(np.float16))


# float16 -> float16 is left out: ORT removes a Cast to the same type inside a graph.
@pytest.mark.parametrize("src,mid", [(np.float32, onnx.TensorProto.BFLOAT16), (np.float16, onnx.TensorProto.BFLOAT16),
                                     (np.int32, onnx.TensorProto.BFLOAT16), (np.float32, onnx.TensorProto.FLOAT16),
                                     (np.int32, onnx.TensorProto.FLOAT16)])
def test_cast_round_trip_through_half_types(src, mid, rng):
    """src -> bfloat16/float16 -> float32 in one fused node (numpy has no bfloat16 to feed)."""
    x = random_array(rng, (4, 6), src, low=-300, high=300)
    nodes = [helper.make_node("Cast", ["x"], ["h"], name="to_half", to=mid),
             helper.make_node("Cast", ["h"], ["out0"], name="to_float", to=onnx.TensorProto.FLOAT)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", NP_TO_ONNX[np.dtype(src)], list(x.shape))],
        [helper.make_tensor_value_info("out0", onnx.TensorProto.FLOAT, list(x.shape))])
    check_on_ep(make_model(graph), {"x": x}, node_names=("to_half", "to_float"), rtol=0, atol=0)


def test_cast_to_float64_is_refused(rng):
    x = random_array(rng, (3,))
    reason = refusal(single_node_model("Cast", {"x": x}, attrs={"to": onnx.TensorProto.DOUBLE}), "Cast")
    assert reason and "float64" in reason


def test_cast_from_float64_is_refused(rng):
    x = rng.uniform(size=(3,))
    reason = refusal(single_node_model("Cast", {"x": x}, attrs={"to": onnx.TensorProto.FLOAT}), "Cast")
    assert reason and "float64" in reason


def test_cast_to_string_is_refused(rng):
    x = random_array(rng, (3,))
    reason = refusal(single_node_model("Cast", {"x": x}, attrs={"to": onnx.TensorProto.STRING}), "Cast")
    assert reason and "string" in reason


@pytest.mark.parametrize("src", TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("dst", TYPES, ids=lambda t: np.dtype(t).name)
def test_castlike_matrix(src, dst, rng):
    x = source_data(rng, src, dst)
    like = random_array(rng, (2,), dst)
    check_on_ep(single_node_model("CastLike", {"x": x, "like": like}), {"x": x, "like": like})


def test_castlike_empty_and_scalar(rng):
    for shape in [(0, 3), ()]:
        x = source_data(rng, np.float32, np.int32, shape)
        like = np.zeros((0,), np.int32)
        check_on_ep(single_node_model("CastLike", {"x": x, "like": like}), {"x": x, "like": like})
