"""Integer-arithmetic quantized ops (ops/quant_integer.cpp): DynamicQuantizeLinear, MatMulInteger,
QLinearMatMul, ConvInteger, QLinearConv on the EP vs ORT CPU, integer outputs bit-equal."""

import numpy as np
import pytest

from opcheck import check_on_ep, refusal, single_node_model
from ortmlx.testing import mlx_backend

U8, I8 = np.uint8, np.int8


def q(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def zp(rng, dtype, shape=()):
    return np.asarray(q(rng, shape, dtype))


# ---- DynamicQuantizeLinear

@pytest.mark.parametrize("case", ["mixed", "positive", "negative", "zeros", "ties", "empty",
                                  "one", "wide"])
def test_dynamic_quantize(case, rng):
    x = {"mixed": rng.standard_normal((3, 7)) * 5,
         "positive": rng.uniform(0.5, 9, (4, 5)),
         "negative": -rng.uniform(0.5, 9, (11,)),
         "zeros": np.zeros((2, 3)),
         "ties": np.array([0.0, 2.55, -2.55, 1.275, 0.01, 255.0, -0.005]),
         "empty": np.zeros((0, 4)),
         "one": np.array([[3.5]]),
         "wide": rng.standard_normal((5, 6)) * 1e6}[case].astype(np.float32)
    model = single_node_model("DynamicQuantizeLinear", {"x": x}, n_outputs=3, opset=11)
    check_on_ep(model, {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("case", ["minus_inf", "plus_inf", "both_inf", "nan_inside",
                                  "nan_and_inf"])
def test_dynamic_quantize_non_finite(case, rng):
    """ORT's arithmetic on non-finite input: an infinite range makes the scale inf and the zero
    point -inf / inf = NaN, which ORT's std::min/std::max clamp turns into 255 (or 0); NaN
    quotients quantize to 0; a NaN inside the tensor does not set the range."""
    x = rng.uniform(-3, 3, (3, 5)).astype(np.float32)
    if case in ("minus_inf", "both_inf", "nan_and_inf"):
        x[1, 2] = -np.inf
    if case in ("plus_inf", "both_inf"):
        x[2, 0] = np.inf
    if case in ("nan_inside", "nan_and_inf"):
        x[1, 3] = np.nan
    model = single_node_model("DynamicQuantizeLinear", {"x": x}, n_outputs=3, opset=11)
    check_on_ep(model, {"x": x}, rtol=0, atol=0)


# ---- MatMulInteger

TYPES = [(U8, U8), (U8, I8), (I8, U8), (I8, I8)]


@pytest.mark.parametrize("ta,tb", TYPES, ids=str)
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 7), (7, 2)), ((1, 1), (1, 1)),
                                    ((2, 1, 3, 300), (3, 300, 4)), ((4, 600), (600, 3)),
                                    ((0, 5), (5, 2))], ids=str)
def test_matmul_integer(ta, tb, shapes, rng):
    a, b = q(rng, shapes[0], ta), q(rng, shapes[1], tb)
    za, zb = zp(rng, ta), zp(rng, tb)
    model = single_node_model("MatMulInteger", {"a": a, "b": b, "za": za, "zb": zb}, opset=10)
    check_on_ep(model, {"a": a, "b": b, "za": za, "zb": zb})
    # Without zero points; with a constant per-column B zero point.
    model = single_node_model("MatMulInteger", {"a": a, "b": b}, opset=21)
    check_on_ep(model, {"a": a, "b": b})


@pytest.mark.parametrize("ta,tb", TYPES, ids=str)
def test_matmul_integer_per_column_zero_point(ta, tb, rng):
    a, b = q(rng, (5, 300), ta), q(rng, (300, 4), tb)
    zb = q(rng, (4,), tb)
    model = single_node_model("MatMulInteger", {"a": a, "b": b, "za": None, "zb": zb},
                              initializers={"zb": zb}, opset=13)
    check_on_ep(model, {"a": a, "b": b})


def test_matmul_integer_extremes(rng):
    # |(a - za)(b - zb)| = 255^2 everywhere: the longest sums, split into exact chunks.
    for k in (258, 259, 1000):
        a = np.full((2, k), 255, U8)
        b = np.zeros((k, 3), U8)
        za, zb = np.array(0, U8), np.array(255, U8)
        model = single_node_model("MatMulInteger", {"a": a, "b": b, "za": za, "zb": zb})
        got = check_on_ep(model, {"a": a, "b": b, "za": za, "zb": zb})
        assert got[0][0, 0] == -255 * 255 * k


def test_matmul_integer_refusals_and_errors(rng):
    a, b = q(rng, (4,), U8), q(rng, (4, 3), U8)
    model = single_node_model("MatMulInteger", {"a": a, "b": b})
    assert "1-D" in (refusal(model, "MatMulInteger") or "")
    a = q(rng, (2, 4), U8)
    za = q(rng, (2,), U8)
    model = single_node_model("MatMulInteger", {"a": a, "b": b, "za": za})
    assert "one element" in (refusal(model, "MatMulInteger") or "")


# ---- QLinearMatMul

def qlinear_matmul_model(a, b, params, opset, consts=()):
    names = ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"]
    values = dict(zip(names, [a, params["sa"], params["za"], b, params["sb"], params["zb"],
                              params["sy"], params["zy"]]))
    inits = {k: values[k] for k in consts}
    return single_node_model("QLinearMatMul", values, initializers=inits, opset=opset), \
        {k: v for k, v in values.items() if k not in inits}


def qparams(rng, ta, tb, n=None):
    sb = np.asarray(rng.uniform(0.01, 0.05, n if n else ()), np.float32)
    return {"sa": np.asarray(rng.uniform(0.01, 0.05), np.float32), "za": zp(rng, ta),
            "sb": sb, "zb": zp(rng, tb, sb.shape),
            "sy": np.asarray(rng.uniform(0.05, 0.5), np.float32), "zy": zp(rng, ta)}


QL_TYPES = [(U8, U8), (U8, I8), (I8, I8)]


@pytest.mark.parametrize("ta,tb", QL_TYPES, ids=str)
@pytest.mark.parametrize("opset", [10, 21])
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 20), (2, 20, 6)),
                                    ((5, 700), (700, 3)), ((1, 1), (1, 1))], ids=str)
def test_qlinear_matmul(ta, tb, opset, shapes, rng):
    a, b = q(rng, shapes[0], ta), q(rng, shapes[1], tb)
    model, feeds = qlinear_matmul_model(a, b, qparams(rng, ta, tb), opset)
    check_on_ep(model, feeds)


@pytest.mark.parametrize("ta,tb", QL_TYPES, ids=str)
def test_qlinear_matmul_per_column(ta, tb, rng):
    a, b = q(rng, (6, 40), ta), q(rng, (40, 5), tb)
    model, feeds = qlinear_matmul_model(a, b, qparams(rng, ta, tb, 5), 13,
                                        consts=("sb", "zb"))
    check_on_ep(model, feeds)


def test_qlinear_matmul_saturates_and_ties(rng):
    # A large multiplier drives outputs past both ends; y_scale 1 / 0.5 gives exact halves.
    a, b = q(rng, (4, 9), U8), q(rng, (9, 6), U8)
    for sy in (1e-3, 1.0, 2.0, 1e4):
        p = {"sa": np.array(0.5, np.float32), "za": np.array(128, U8),
             "sb": np.array(1.0, np.float32), "zb": np.array(100, U8),
             "sy": np.array(sy, np.float32), "zy": np.array(120, U8)}
        model, feeds = qlinear_matmul_model(a, b, p, 21)
        check_on_ep(model, feeds)


def test_qlinear_matmul_refusals(rng):
    a, b = q(rng, (3, 4), U8), q(rng, (4, 2), U8)
    p = qparams(rng, U8, U8)
    p["sa"] = np.full(3, 0.02, np.float32)  # per row: not a form ORT takes
    model, _ = qlinear_matmul_model(a, b, p, 13)
    assert "a_scale" in (refusal(model, "QLinearMatMul") or "")
    p = qparams(rng, U8, U8)
    p["sb"] = np.full((4, 1), 0.02, np.float32)  # per row of B
    model, _ = qlinear_matmul_model(a, b, p, 13)
    assert "b_scale" in (refusal(model, "QLinearMatMul") or "")


# ---- ConvInteger, QLinearConv (claimed on MLX's CPU backend only: GPU convolution algorithms
# may round the float32 products that carry the integer sums)

CPU_BACKEND_ONLY = pytest.mark.skipif(mlx_backend() != "cpu",
                                      reason="integer convolution is claimed on the CPU backend only")

CONV_CASES = [
    ((1, 3, 5, 6), (4, 3, 3, 3), {}),
    ((2, 4, 7, 7), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 1]}),
    ((1, 2, 9), (3, 2, 3), {"dilations": [2], "pads": [2, 1]}),
    ((1, 40, 6, 6), (5, 40, 3, 3), {"auto_pad": "SAME_UPPER"}),  # 360 terms: chunked
    ((1, 64, 4, 4), (8, 32, 3, 3), {"group": 2}),  # 288 terms per group: chunked per group
    ((2, 3, 3, 4, 4), (2, 3, 2, 2, 2), {}),
    ((0, 3, 5, 5), (2, 3, 3, 3), {}),
]


@CPU_BACKEND_ONLY
@pytest.mark.parametrize("tx,tw", TYPES, ids=str)
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv_integer(tx, tw, case, rng):
    xs, ws, attrs = case
    x, w = q(rng, xs, tx), q(rng, ws, tw)
    zx, zw = zp(rng, tx), zp(rng, tw)
    model = single_node_model("ConvInteger", {"x": x, "w": w, "zx": zx, "zw": zw}, attrs=attrs,
                              initializers={"w": w, "zw": zw}, opset=10)
    check_on_ep(model, {"x": x, "zx": zx})
    model = single_node_model("ConvInteger", {"x": x, "w": w}, attrs=attrs, opset=21)
    check_on_ep(model, {"x": x, "w": w})


QC_TYPES = [(U8, U8), (U8, I8), (I8, I8)]


@CPU_BACKEND_ONLY
@pytest.mark.parametrize("tx,tw", QC_TYPES, ids=str)
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_qlinear_conv(tx, tw, case, per_channel, bias, rng):
    xs, ws, attrs = case
    m = ws[0]
    x, w = q(rng, xs, tx), q(rng, ws, tw)
    sw = np.asarray(rng.uniform(0.005, 0.03, m if per_channel else ()), np.float32)
    zw = np.zeros(sw.shape, tw) if tw == I8 else np.full(sw.shape, 7, tw)
    values = {"x": x, "sx": np.array(0.02, np.float32), "zx": zp(rng, tx), "w": w, "sw": sw,
              "zw": zw, "sy": np.array(0.3, np.float32), "zy": zp(rng, tx)}
    if bias:
        values["b"] = rng.integers(-5000, 5000, m).astype(np.int32)
    consts = {k: values[k] for k in ("w", "sw", "zw") + (("b",) if bias else ())}
    model = single_node_model("QLinearConv", values, attrs=attrs, initializers=consts, opset=10)
    check_on_ep(model, {k: v for k, v in values.items() if k not in consts})


@CPU_BACKEND_ONLY
@pytest.mark.parametrize("tx,tw", QC_TYPES, ids=str)
def test_qlinear_conv_per_channel_zero_points(tx, tw, rng):
    x, w = q(rng, (1, 2, 4, 4), tx), q(rng, (3, 2, 2, 2), tw)
    values = {"x": x, "sx": np.array(0.02, np.float32), "zx": zp(rng, tx), "w": w,
              "sw": np.full(3, 0.01, np.float32), "zw": q(rng, (3,), tw),
              "sy": np.array(0.3, np.float32), "zy": zp(rng, tx)}
    model = single_node_model("QLinearConv", values, opset=10)
    check_on_ep(model, values)


@CPU_BACKEND_ONLY
@pytest.mark.parametrize("tx,tw", QC_TYPES, ids=str)
def test_qlinear_conv_zero_y_scale_like_cpu(tx, tw, rng):
    # y_scale 0 makes the multiplier infinite: 0 * inf is NaN where the accumulator is 0 (here at
    # every padded corner), which ORT CPU's requantization saturates to the type's lowest value;
    # the EP's cast gave 0 (fuzz seed 94, o55_40: int8, 3-D, pads 2).
    x, w = q(rng, (1, 2, 3, 3), tx), q(rng, (2, 2, 2, 2), tw)
    values = {"x": x, "sx": np.array(0.02, np.float32), "zx": np.zeros((), tx), "w": w,
              "sw": np.array(0.01, np.float32), "zw": np.zeros((), tw),
              "sy": np.array(0.0, np.float32), "zy": zp(rng, tx)}
    model = single_node_model("QLinearConv", values, attrs={"pads": [2, 2, 2, 2]}, opset=10)
    got = check_on_ep(model, values)
    assert (got[0] == np.iinfo(tx).min).any()


def test_qlinear_matmul_zero_y_scale_like_cpu(rng):
    a, b = q(rng, (3, 4), U8), q(rng, (4, 5), U8)
    a[0] = 0  # a zero row: zero accumulators, NaN before saturation
    p = {"sa": np.array(0.5, np.float32), "za": np.array(0, U8), "sb": np.array(1.0, np.float32),
         "zb": np.array(0, U8), "sy": np.array(0.0, np.float32), "zy": np.array(120, U8)}
    model, feeds = qlinear_matmul_model(a, b, p, 21)
    check_on_ep(model, feeds)


@CPU_BACKEND_ONLY
def test_conv_integer_refuses_huge_kernels(rng):
    x, w = q(rng, (1, 1, 20, 20), U8), q(rng, (1, 1, 17, 17), U8)
    model = single_node_model("ConvInteger", {"x": x, "w": w}, initializers={"w": w})
    assert "taps" in (refusal(model, "ConvInteger") or "")


@pytest.mark.skipif(mlx_backend() == "cpu", reason="GPU backends only")
@pytest.mark.parametrize("op", ["ConvInteger", "QLinearConv"])
def test_integer_convolution_refused_on_gpu_backends(op, rng):
    x, w = q(rng, (1, 3, 5, 6), U8), q(rng, (4, 3, 3, 3), U8)
    if op == "ConvInteger":
        model = single_node_model(op, {"x": x, "w": w}, initializers={"w": w}, opset=10)
    else:
        values = {"x": x, "sx": np.array(0.02, np.float32), "zx": zp(rng, U8), "w": w,
                  "sw": np.array(0.01, np.float32), "zw": zp(rng, U8),
                  "sy": np.array(0.3, np.float32), "zy": zp(rng, U8)}
        model = single_node_model(op, values, initializers={"w": w}, opset=10)
    assert "CPU backend only" in (refusal(model, op) or "")
