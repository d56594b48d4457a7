"""QuantizeLinear / DequantizeLinear (issue 9): every claimed case runs on the EP and matches ORT
CPU exactly (integer outputs bit-equal, float outputs to float32 rounding)."""

import numpy as np
import pytest

from opcheck import check_on_ep, refusal, single_node_model

SHAPES = [(2, 3, 4), (5,), (1, 3, 1), (0, 3)]


def _scale(rng, shape):
    return (rng.random(shape) * 0.5 + 0.01).astype(np.float32)


@pytest.mark.parametrize("qtype", [np.int8, np.uint8])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("opset", [13, 19, 21])
def test_quantize_per_tensor(qtype, shape, opset, rng):
    x = (rng.standard_normal(shape) * 40).astype(np.float32)  # saturates at both ends
    scale = _scale(rng, ())
    zp = np.array(rng.integers(-5, 6) if qtype == np.int8 else rng.integers(100, 150), qtype)
    model = single_node_model("QuantizeLinear", {"x": x}, initializers={"s": scale, "zp": zp},
                              opset=opset)
    check_on_ep(model, {"x": x})


def test_quantize_ties_round_half_even():
    # x / scale lands exactly on .5: half-to-even, then the zero point, then saturation.
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 1e9, -1e9, 0.0, -0.0], np.float32)
    for qtype, zp in [(np.int8, 3), (np.uint8, 128), (np.int8, -128)]:
        model = single_node_model("QuantizeLinear", {"x": x},
                                  initializers={"s": np.array(0.5, np.float32),
                                                "zp": np.array(zp, qtype)})
        check_on_ep(model, {"x": x})
        model = single_node_model("QuantizeLinear", {"x": x},
                                  initializers={"s": np.array(1.0, np.float32),
                                                "zp": np.array(zp, qtype)})
        check_on_ep(model, {"x": x})


@pytest.mark.parametrize("qtype,zp", [(np.int8, -6), (np.int8, 0), (np.uint8, 3)])
@pytest.mark.parametrize("shape", [(3, 5, 4), (7,), (2, 33)], ids=str)
@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize_nan_is_the_type_minimum(qtype, zp, shape, per_axis, rng):
    # ORT's kernel clamps with vector max/min, which turn NaN into the lower bound: -128 for
    # int8, 0 for uint8, wherever the NaN sits. The EP cast NaN as it was (undefined: 0 or -128
    # by shape; fuzz seed 14, o55_47: int8 with a zero point of -6 gave 0 where ORT gives -128).
    x = (rng.standard_normal(shape) * 20).astype(np.float32)
    x.flat[rng.choice(x.size, max(1, x.size // 3), replace=False)] = np.nan
    c = shape[0]
    scale = _scale(rng, (c,) if per_axis else ())
    zps = np.full(scale.shape, zp, qtype)
    model = single_node_model("QuantizeLinear", {"x": x}, initializers={"s": scale, "zp": zps},
                              attrs={"axis": 0} if per_axis else None)
    got = check_on_ep(model, {"x": x})
    assert (got[0][np.isnan(x)] == np.iinfo(qtype).min).all()


def test_quantize_no_zero_point_is_uint8(rng):
    x = (rng.standard_normal((3, 7)) * 50).astype(np.float32)
    model = single_node_model("QuantizeLinear", {"x": x},
                              initializers={"s": np.array(0.3, np.float32)})
    got = check_on_ep(model, {"x": x})
    assert got[0].dtype == np.uint8


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("qtype", [np.int8, np.uint8])
def test_quantize_per_axis(axis, qtype, rng):
    x = (rng.standard_normal((3, 4, 5)) * 20).astype(np.float32)
    c = x.shape[axis]
    scale = _scale(rng, (c,))
    zp = rng.integers(-10, 10, c).astype(qtype) if qtype == np.int8 else \
        rng.integers(0, 255, c).astype(qtype)
    model = single_node_model("QuantizeLinear", {"x": x, "s": scale, "zp": zp},
                              attrs={"axis": axis})
    check_on_ep(model, {"x": x, "s": scale, "zp": zp})


@pytest.mark.parametrize("qtype", [np.int8, np.uint8, np.int32])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_dequantize_per_tensor(qtype, shape, rng):
    info = np.iinfo(qtype)
    lo, hi = (info.min, info.max) if qtype != np.int32 else (-(1 << 30), 1 << 30)
    x = rng.integers(lo, hi, shape, endpoint=True).astype(qtype)
    zp = np.array(0 if qtype == np.int32 else rng.integers(lo, hi), qtype)
    model = single_node_model("DequantizeLinear", {"x": x},
                              initializers={"s": _scale(rng, ()), "zp": zp})
    check_on_ep(model, {"x": x}, rtol=0, atol=0)


def test_dequantize_no_zero_point(rng):
    x = rng.integers(0, 255, (4, 6)).astype(np.uint8)
    model = single_node_model("DequantizeLinear", {"x": x},
                              initializers={"s": np.array(0.7, np.float32)})
    check_on_ep(model, {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("qtype", [np.int8, np.uint8])
def test_dequantize_per_axis(axis, qtype, rng):
    info = np.iinfo(qtype)
    x = rng.integers(info.min, info.max, (3, 4, 5), endpoint=True).astype(qtype)
    c = x.shape[axis]
    zp = rng.integers(info.min, info.max, c, endpoint=True).astype(qtype)
    scale = _scale(rng, (c,))
    model = single_node_model("DequantizeLinear", {"x": x, "s": scale, "zp": zp},
                              attrs={"axis": axis})
    check_on_ep(model, {"x": x, "s": scale, "zp": zp}, rtol=0, atol=0)


def test_refusals(rng):
    x = rng.integers(0, 255, (4, 6)).astype(np.uint8)
    model = single_node_model("DequantizeLinear", {"x": x},
                              initializers={"s": _scale(rng, (4, 2)),
                                            "zp": np.zeros((4, 2), np.uint8)},
                              attrs={"axis": 1, "block_size": 3})
    assert "block" in (refusal(model, "DequantizeLinear") or "")
    xf = rng.standard_normal((4, 6)).astype(np.float16)
    model = single_node_model("QuantizeLinear", {"x": xf},
                              initializers={"s": np.array(0.5, np.float16)})
    assert refusal(model, "QuantizeLinear")


@pytest.mark.parametrize("scale", [0.3, 0.1, 0.7, 1.0 / 3.0, 0.0123])
def test_quantize_near_ties_division(scale):
    # x = (k + 0.5) * scale rounded to float32: x / scale lands within an ulp of the tie, so only
    # the exact float32 division ORT performs (not a reciprocal multiply) gives equal codes.
    k = np.arange(-130, 130, dtype=np.float64)
    x = ((k + 0.5) * scale).astype(np.float32)
    x = np.concatenate([x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf))])
    model = single_node_model("QuantizeLinear", {"x": x},
                              initializers={"s": np.array(scale, np.float32),
                                            "zp": np.array(0, np.int8)})
    check_on_ep(model, {"x": x})


@pytest.mark.parametrize("op", ["DequantizeLinear", "QuantizeLinear"])
@pytest.mark.parametrize("x_shape, n_scale, n_zp", [
    ((2, 1, 3), 4, 4),      # a length-4 scale broadcast over a length-1 axis; ORT raises
    ((2, 1, 3), 4, None),
    ((2, 4, 3), 2, 2),
    ((2, 4, 3), 4, 2),      # zero point shorter than the scale
    ((2, 4, 3), 4, 4),
    ((2, 4, 3), 1, 1),      # one-element vectors act per tensor
])
def test_per_axis_scale_length_like_cpu(op, x_shape, n_scale, n_zp, rng):
    from isolated import check_hostile, loose_model
    from ortmlx.testing import random_array

    xt = np.uint8 if op == "DequantizeLinear" else np.float32
    inputs = [("x", xt, list(x_shape)), ("sc", np.float32, [n_scale])]
    if n_zp:
        inputs.append(("zp", np.uint8, [n_zp]))
    model = loose_model(op, inputs, {"axis": 1})
    x = (rng.integers(0, 255, x_shape).astype(np.uint8) if xt == np.uint8
         else random_array(rng, x_shape))
    feeds = {"x": x, "sc": rng.uniform(0.1, 1.0, n_scale).astype(np.float32)}
    if n_zp:
        feeds["zp"] = rng.integers(0, 255, n_zp).astype(np.uint8)
    mismatch = n_scale != 1 and (n_scale != x_shape[1] or (n_zp and n_zp != n_scale))
    error = None
    if mismatch:
        error = "zero point shape" if n_zp and n_zp != n_scale else "per-axis"
    r = check_hostile(model, feeds, op_type=op, error=error)
    assert mismatch or "node" in r["executed"]


def test_zero_point_shape_must_match_scale_like_cpu(rng):
    from isolated import check_hostile, loose_model

    # A one-element scale with a per-axis zero point: ORT raises (the shapes differ).
    model = loose_model("DequantizeLinear", [("x", np.int8, [3, 2, "n", 2]),
                                             ("sc", np.float32, [1]), ("zp", np.int8, [2])],
                        {"axis": -3})
    feeds = {"x": np.ones((3, 2, 0, 2), np.int8), "sc": np.array([0.5], np.float32),
             "zp": np.array([1, -2], np.int8)}
    check_hostile(model, feeds, op_type="DequantizeLinear", error="zero point shape")


# ---- opsets 10-12: per tensor only (no axis attribute)

@pytest.mark.parametrize("opset", [10, 11, 12])
@pytest.mark.parametrize("qtype", [np.int8, np.uint8])
@pytest.mark.parametrize("scale_shape", [(), (1,)], ids=str)
def test_quantize_opset_10_12(opset, qtype, scale_shape, rng):
    x = (rng.standard_normal((3, 5)) * 40).astype(np.float32)
    x[0, :3] = [0.25, 0.75, -1.25]  # ties at scale 0.5
    scale = np.full(scale_shape, 0.5, np.float32)
    zp = np.full(scale_shape, 3 if qtype == np.int8 else 120, qtype)
    model = single_node_model("QuantizeLinear", {"x": x}, initializers={"s": scale, "zp": zp},
                              opset=opset)
    check_on_ep(model, {"x": x})
    model = single_node_model("QuantizeLinear", {"x": x, "s": scale}, opset=opset)
    got = check_on_ep(model, {"x": x, "s": scale})
    assert got[0].dtype == np.uint8


@pytest.mark.parametrize("opset", [10, 11, 12])
@pytest.mark.parametrize("qtype", [np.int8, np.uint8, np.int32])
def test_dequantize_opset_10_12(opset, qtype, rng):
    info = np.iinfo(qtype)
    lo, hi = (info.min, info.max) if qtype != np.int32 else (-(1 << 30), 1 << 30)
    x = rng.integers(lo, hi, (4, 3, 2), endpoint=True).astype(qtype)
    zp = np.array(0 if qtype == np.int32 else rng.integers(lo, hi), qtype)
    s = np.asarray(_scale(rng, ()), np.float32)
    model = single_node_model("DequantizeLinear", {"x": x, "s": s, "zp": zp}, opset=opset)
    check_on_ep(model, {"x": x, "s": s, "zp": zp}, rtol=0, atol=0)
    model = single_node_model("DequantizeLinear", {"x": x}, initializers={"s": s}, opset=opset)
    check_on_ep(model, {"x": x}, rtol=0, atol=0)


def test_opset_10_refuses_per_axis_scales(rng):
    x = rng.integers(0, 255, (4, 3)).astype(np.uint8)
    model = single_node_model("DequantizeLinear", {"x": x},
                              initializers={"s": _scale(rng, (3,))}, opset=10, check=False)
    assert "before opset 13" in (refusal(model, "DequantizeLinear") or "")
