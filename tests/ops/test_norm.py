import numpy as np
import onnx
import pytest
from onnx import helper

from opcheck import check_on_ep, refusal, single_node_model
from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, random_array, softmax_kernel
from pattern_check import run_pattern


def run_on_ep(model, feeds, node_names=("node",)):
    """Outputs of the model run on the EP (asserting the nodes ran there)."""
    run = EpRun(model, strict=True)
    try:
        out = run.run(feeds)
        assert_ran_on_ep(run, node_names)
        return out
    finally:
        run.close()


def layer_norm_ref(x, scale, bias, axis, eps):
    """The ONNX function body in float64 (two-pass variance)."""
    x = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    d = x - mean
    inv = 1.0 / np.sqrt((d * d).mean(axis=axes, keepdims=True) + eps)
    y = d * inv * scale.astype(np.float64)
    if bias is not None:
        y = y + bias.astype(np.float64)
    return y, mean, inv


# ---------------------------------------------------------------- LayerNormalization

LN_CASES = [
    # X shape, axis, Scale shape, B shape (None = absent)
    ((2, 3, 8), -1, (8,), (8,)),
    ((2, 3, 8), -1, (8,), None),
    ((2, 3, 8), 1, (3, 8), (3, 8)),
    ((2, 3, 8), -2, (1, 8), (3, 1)),  # Scale/B broadcast over the normalized shape
    ((2, 3, 8), 0, (2, 3, 8), (8,)),
    ((4, 16), 1, (16,), (16,)),
    ((1, 1), -1, (1,), (1,)),
    ((0, 5), -1, (5,), (5,)),  # no rows
    ((3, 1, 4), 1, (1, 4), None),
]


@pytest.mark.parametrize("case", LN_CASES, ids=str)
def test_layer_norm(case, rng):
    shape, axis, s_shape, b_shape = case
    feeds = {"x": random_array(rng, shape), "scale": random_array(rng, s_shape)}
    if b_shape is not None:
        feeds["bias"] = random_array(rng, b_shape)
    model = single_node_model("LayerNormalization", feeds, attrs={"axis": axis}, opset=17)
    check_on_ep(model, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_norm_mean_and_inv_std_outputs(axis, rng):
    feeds = {"x": random_array(rng, (2, 3, 6)), "scale": random_array(rng, (6,)),
             "bias": random_array(rng, (6,))}
    model = single_node_model("LayerNormalization", feeds, attrs={"axis": axis, "epsilon": 1e-3},
                              n_outputs=3, opset=17)
    got = check_on_ep(model, feeds, rtol=1e-5, atol=1e-5)
    assert got[1].dtype == np.float32 and got[1].shape == ((2, 1, 1) if axis == 1 else (2, 3, 1))


def test_layer_norm_only_inv_std_requested(rng):
    # Optional outputs may be skipped by name: Y and InvStdDev without Mean.
    x = random_array(rng, (3, 5))
    scale = random_array(rng, (5,))
    node = helper.make_node("LayerNormalization", ["x", "scale"], ["out0", "", "out2"], name="node")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 5]),
                      helper.make_tensor_value_info("scale", onnx.TensorProto.FLOAT, [5])],
        [helper.make_tensor_value_info("out0", onnx.TensorProto.FLOAT, [3, 5]),
         helper.make_tensor_value_info("out2", onnx.TensorProto.FLOAT, [3, 1])])
    check_on_ep(make_model(graph, opset=17), {"x": x, "scale": scale}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_layer_norm_float16(n_outputs, rng):
    feeds = {"x": random_array(rng, (4, 32), np.float16), "scale": random_array(rng, (32,), np.float16),
             "bias": random_array(rng, (32,), np.float16)}
    model = single_node_model("LayerNormalization", feeds, n_outputs=n_outputs, opset=17)
    check_on_ep(model, feeds, rtol=1e-3, atol=2e-3)


def test_layer_norm_constant_weights(rng):
    x = random_array(rng, (2, 7, 16))
    scale = random_array(rng, (16,))
    bias = random_array(rng, (16,))
    model = single_node_model("LayerNormalization", {"x": x, "scale": scale, "bias": bias},
                              attrs={"epsilon": 1e-6}, initializers={"scale": scale, "bias": bias}, opset=17)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_layer_norm_large_mean_is_stable(rng):
    # Rows far from zero with a small spread: E[x^2] - E[x]^2 in float32 is garbage here (x^2 ~ 1e6
    # has an ulp of 0.06, the variance is ~1e-3) and even a plain float32 two-pass mean loses ~1e-4
    # of a 0.03 spread. The EP shifts rows by a pivot first; ORT's CPU kernel is also accurate.
    # Reference: float64 numpy.
    x = (1000.0 + random_array(rng, (3, 64), low=-0.05, high=0.05)).astype(np.float32)
    scale = random_array(rng, (64,))
    bias = random_array(rng, (64,))
    feeds = {"x": x, "scale": scale, "bias": bias}
    got = run_on_ep(single_node_model("LayerNormalization", feeds, n_outputs=3, opset=17), feeds)
    y, mean, inv = layer_norm_ref(x, scale, bias, -1, 1e-5)
    np.testing.assert_allclose(got[0], y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], mean, rtol=1e-7)
    np.testing.assert_allclose(got[2], inv, rtol=1e-4)


def test_layer_norm_stash_type_0_half_is_refused(rng):
    feeds = {"x": random_array(rng, (2, 4), np.float16), "scale": random_array(rng, (4,), np.float16)}
    model = single_node_model("LayerNormalization", feeds, attrs={"stash_type": 0}, opset=17)
    reason = refusal(model, "LayerNormalization")
    assert reason and "stash_type" in reason


def test_layer_norm_float64_is_refused(rng):
    feeds = {"x": rng.uniform(size=(2, 4)), "scale": rng.uniform(size=(4,))}
    reason = refusal(single_node_model("LayerNormalization", feeds, opset=17), "LayerNormalization")
    assert reason and "float64" in reason


# ---------------------------------------------------------------- Softmax

SOFTMAX_CASES = [((2, 3, 5), -1), ((2, 3, 5), 0), ((2, 3, 5), 1), ((2, 3, 5), -2), ((7,), 0),
                 ((1, 1), 1), ((3, 0), 0), ((0, 4), -1), ((2, 1, 4), 2)]


@pytest.mark.parametrize("case", SOFTMAX_CASES, ids=str)
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax(case, opset, rng):
    # Opset 11 coerces the input to 2-D at `axis` (flattens [0, axis) and [axis, rank)) and
    # normalises over the second dim; opset 13 normalises along `axis` only.
    shape, axis = case
    x = random_array(rng, shape, low=-5, high=5)
    check_on_ep(single_node_model("Softmax", {"x": x}, attrs={"axis": axis}, opset=opset), {"x": x},
                rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [1, 11, 13])
def test_softmax_default_axis(opset, rng):
    # The default axis is 1 before opset 13 and -1 from 13 on.
    x = random_array(rng, (2, 3, 4))
    check_on_ep(single_node_model("Softmax", {"x": x}, opset=opset), {"x": x}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_float16(opset, rng):
    x = random_array(rng, (3, 4, 16), np.float16, low=-6, high=6)
    check_on_ep(single_node_model("Softmax", {"x": x}, attrs={"axis": 1}, opset=opset), {"x": x},
                rtol=1e-3, atol=1e-3)


def test_softmax_is_numerically_stable():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.5, -1e4], [88.0, 89.0, 90.0]], np.float32)
    got = check_on_ep(single_node_model("Softmax", {"x": x}, opset=13), {"x": x}, rtol=1e-5, atol=1e-7)
    assert np.isfinite(got[0]).all()


SOFTMAX_KERNEL_PATH = "Softmax rows in one CUDA kernel (the scores' scale and mask folded in)"


def scores_softmax_model(x_shape, scale_op, mask_shape, scale=0.125):
    """Softmax(x [Mul|Div] c [+ mask]) over the last axis, as attention layers write their
    scores; c a constant scalar, the mask a graph input (masked entries -inf)."""
    nodes, ins, inits = [], [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x_shape))], []
    t = "x"
    if scale_op:
        inits.append(helper.make_tensor("c", onnx.TensorProto.FLOAT, [], [scale]))
        nodes.append(helper.make_node(scale_op, [t, "c"], ["t1"], name="scale"))
        t = "t1"
    if mask_shape is not None:
        ins.append(helper.make_tensor_value_info("mask", onnx.TensorProto.FLOAT, list(mask_shape)))
        nodes.append(helper.make_node("Add", [t, "mask"], ["t2"], name="mask_add"))
        t = "t2"
    nodes.append(helper.make_node("Softmax", [t], ["y"], name="node", axis=-1))
    graph = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info(
        "y", onnx.TensorProto.FLOAT, list(x_shape))], inits)
    return make_model(graph, opset=13)


@pytest.mark.parametrize("case", [
    # (scores shape, scale op, mask shape)
    ((2, 3, 5, 48), None, None),
    ((2, 3, 5, 48), "Mul", None),
    ((2, 3, 5, 48), "Div", None),
    ((2, 3, 5, 48), "Mul", (2, 1, 1, 48)),  # padding mask
    ((2, 3, 5, 48), "Div", (1, 1, 5, 48)),  # causal mask
    ((2, 3, 5, 48), None, (2, 3, 5, 48)),
    ((4, 300), "Mul", (300,)),  # wider than a block's threads
    ((3, 1), "Mul", None),
], ids=str)
def test_softmax_kernel_path(case, rng):
    """Which softmax ran, per the report: on the GPU one CUDA kernel of ours with the scale and
    the mask folded in, MLX's softmax elsewhere; the values match ORT CPU either way, masked
    entries exactly 0."""
    shape, scale_op, mask_shape = case
    feeds = {"x": random_array(rng, shape, low=-5, high=5)}
    if mask_shape is not None:
        mask = random_array(rng, mask_shape)
        mask[..., ::3] = -np.inf
        feeds["mask"] = mask
    report = run_pattern(scores_softmax_model(shape, scale_op, mask_shape), feeds, rtol=1e-5,
                         atol=1e-7)
    assert (SOFTMAX_KERNEL_PATH in report.paths()) == softmax_kernel(), report.paths()


def test_softmax_float64_is_refused(rng):
    x = rng.uniform(size=(2, 3))
    reason = refusal(single_node_model("Softmax", {"x": x}, opset=13), "Softmax")
    assert reason and "float64" in reason


# ---------------------------------------------------------------- bfloat16 (via casts)

def test_bfloat16_layer_norm_softmax_matmul_chain(rng):
    """Cast to bfloat16 -> LayerNormalization -> MatMul -> Softmax -> Cast to float32, all on the
    EP. numpy has no bfloat16 and ORT CPU lacks some bf16 kernels, so the reference is float64
    numpy at bfloat16 tolerance."""
    x = random_array(rng, (4, 8))
    scale = random_array(rng, (8,))
    w = random_array(rng, (8, 5))
    bf = onnx.TensorProto.BFLOAT16
    nodes = [
        helper.make_node("Cast", ["x"], ["xb"], name="cx", to=bf),
        helper.make_node("Cast", ["scale"], ["sb"], name="cs", to=bf),
        helper.make_node("Cast", ["w"], ["wb"], name="cw", to=bf),
        helper.make_node("LayerNormalization", ["xb", "sb"], ["ln"], name="ln"),
        helper.make_node("MatMul", ["ln", "wb"], ["mm"], name="mm"),
        helper.make_node("Softmax", ["mm"], ["sm"], name="sm"),
        helper.make_node("Cast", ["sm"], ["out0"], name="co", to=onnx.TensorProto.FLOAT),
    ]
    inputs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, list(v.shape))
              for n, v in (("x", x), ("scale", scale), ("w", w))]
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("out0", onnx.TensorProto.FLOAT, [4, 5])])
    got = run_on_ep(make_model(graph, opset=17), {"x": x, "scale": scale, "w": w},
                    node_names=("cx", "cs", "cw", "ln", "mm", "sm", "co"))
    y, _, _ = layer_norm_ref(x, scale, None, -1, 1e-5)
    logits = y @ w.astype(np.float64)
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(got[0], e / e.sum(axis=-1, keepdims=True), rtol=0.05, atol=0.02)


# ---------------------------------------------------------------- huge and non-finite rows (issue 8)

def test_layer_norm_huge_rows_match_float64():
    """Regression (issue 8): rows near 1e37 overflow float32 when their deviations are squared;
    the EP gave NaN there (its shifted row sum overflowed too). It now scales such rows by their
    largest magnitude and matches float64. ORT 1.30's CPU kernel returns Y = 0 and InvStdDev = 0
    for them (float64: Y = [-0.169, 0.507, -1.521, 1.183] for the first row), so the reference
    here is float64, not ORT."""
    rng = np.random.default_rng(8)
    x = np.concatenate([
        np.array([[1e37, 2e37, -1e37, 3e37], [3e38, -3e38, 1.0, 2.0],
                  [1e19, 2e19, 3e19, 0.0], [2e19, 2e19, 2e19, 2e19]]),
        rng.uniform(1e37, 3e37, (2, 4)), rng.uniform(-3, 3, (1, 4))]).astype(np.float32)
    scale = np.array([1.0, -2.0, 0.5, 1.5], np.float32)
    bias = np.array([0.25, 0.0, -1.0, 2.0], np.float32)
    model = single_node_model("LayerNormalization", {"x": x, "scale": scale, "bias": bias},
                              attrs={"axis": -1}, n_outputs=3, opset=17)
    y, mean, inv = run_on_ep(model, {"x": x, "scale": scale, "bias": bias})
    ry, rmean, rinv = layer_norm_ref(x, scale, bias, -1, 1e-5)
    assert np.isfinite(y).all() and np.isfinite(mean).all() and np.isfinite(inv).all()
    np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-5)
    # The mean is exact to float32 rounding of the row's largest magnitude (3e38 - 3e38 + 1 + 2
    # loses the 3 in float32 in any order of summation).
    row_mag = np.abs(x.astype(np.float64)).max(axis=-1, keepdims=True)
    assert np.all(np.abs(mean - rmean) <= 1e-6 * np.abs(rmean) + 1e-7 * row_mag)
    # InvStdDev of the huge rows is subnormal or near it in float32 (1e-37 .. 3e-39).
    np.testing.assert_allclose(inv, rinv, rtol=1e-5, atol=1e-44)


def test_layer_norm_rows_with_inf_or_nan():
    """A row holding +Inf has mean +Inf in float64 (NaN outputs otherwise); the EP's pivot shift
    (subtracting the row's first element) turned that mean into NaN when the first element was
    the Inf. NaN rows stay NaN."""
    inf, nan = np.inf, np.nan
    x = np.array([[inf, 1, 2, 3], [1, inf, 2, 3], [-inf, 1, inf, 2], [nan, 1, 2, 3],
                  [inf, inf, inf, inf], [1, 2, 3, 4]], np.float32)
    scale = np.ones(4, np.float32)
    model = single_node_model("LayerNormalization", {"x": x, "scale": scale}, attrs={"axis": -1},
                              n_outputs=3, opset=17)
    y, mean, inv = run_on_ep(model, {"x": x, "scale": scale})
    with np.errstate(invalid="ignore"):
        ry, rmean, rinv = layer_norm_ref(x, scale, None, -1, 1e-5)
    np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(mean, rmean, rtol=1e-6, equal_nan=True)
    np.testing.assert_allclose(inv, rinv, rtol=1e-5, equal_nan=True)


def test_layer_norm_empty_normalized_shape_is_an_error(rng):
    """X.shape[axis:] with no elements: ORT's CPU kernel rejects it; so does the EP, naming the
    op (it used to fail inside MLX's max reduction)."""
    x = np.zeros((2, 0), np.float32)
    scale = np.zeros((0,), np.float32)
    model = single_node_model("LayerNormalization", {"x": x, "scale": scale}, attrs={"axis": 1},
                              opset=17)
    _expect_empty_normalized_shape_error(model, {"x": x, "scale": scale})


def _expect_empty_normalized_shape_error(model, feeds):
    run = EpRun(model, strict=True)
    try:
        with pytest.raises(Exception, match="X.shape\\[axis:\\] has no elements"):
            run.run(feeds)
    finally:
        run.close()


# ---------------------------------------------------------------- LogSoftmax

LOGSOFTMAX_CASES = [((2, 3, 5), -1), ((2, 3, 5), 0), ((2, 3, 5), 1), ((7,), 0), ((1, 1), 1),
                    ((0, 4), -1), ((3, 1, 9), 2), ((4, 33), -1)]


@pytest.mark.parametrize("case", LOGSOFTMAX_CASES, ids=str)
@pytest.mark.parametrize("opset", [11, 13])
def test_log_softmax(case, opset, rng):
    shape, axis = case
    x = random_array(rng, shape, low=-8, high=8)
    check_on_ep(single_node_model("LogSoftmax", {"x": x}, attrs={"axis": axis}, opset=opset),
                {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [1, 13])
def test_log_softmax_default_axis(opset, rng):
    x = random_array(rng, (2, 3, 4))
    check_on_ep(single_node_model("LogSoftmax", {"x": x}, opset=opset), {"x": x}, rtol=1e-5,
                atol=1e-5)


def test_log_softmax_large_values_are_stable():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.5, -1e4], [88.0, 89.0, 90.0]], np.float32)
    got = check_on_ep(single_node_model("LogSoftmax", {"x": x}, opset=13), {"x": x}, rtol=1e-5,
                      atol=1e-5)
    assert np.isfinite(got[0]).all()


@pytest.mark.parametrize("opset", [11, 13])
def test_log_softmax_infinite_rows_are_nan_like_ort(opset):
    """A row holding +Inf (or only -Inf) is NaN throughout in ORT's kernel (the max is
    subtracted, Inf - Inf); the EP used to return -Inf beside the NaN."""
    inf = np.inf
    x = np.array([[inf, 1, 2], [-inf, -inf, -inf], [-inf, 1, 2], [1e30, 1, 2], [inf, -inf, 1],
                  [0.5, 1, 2]], np.float32)
    got = check_on_ep(single_node_model("LogSoftmax", {"x": x}, attrs={"axis": 1}, opset=opset),
                      {"x": x})
    assert np.isnan(got[0][[0, 1, 4]]).all() and np.isfinite(got[0][[3, 5]]).all()


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4)], ids=str)
@pytest.mark.parametrize("opset", [11, 13])
def test_log_softmax_empty(shape, opset):
    """An empty input is an empty output (MLX cannot reduce over an empty axis)."""
    x = np.zeros(shape, np.float32)
    check_on_ep(single_node_model("LogSoftmax", {"x": x}, attrs={"axis": 0}, opset=opset),
                {"x": x})


def test_log_softmax_float16(rng):
    x = random_array(rng, (3, 4, 16), np.float16, low=-6, high=6)
    check_on_ep(single_node_model("LogSoftmax", {"x": x}, opset=13), {"x": x}, rtol=1e-3, atol=2e-3)


def test_log_softmax_float64_is_refused(rng):
    x = rng.uniform(size=(2, 3))
    reason = refusal(single_node_model("LogSoftmax", {"x": x}, opset=13), "LogSoftmax")
    assert reason and "float64" in reason


# ---------------------------------------------------------------- RMSNormalization (opset 23)

def rms_norm_ref(x, scale, axis, eps):
    x = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    return x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps) * scale.astype(np.float64)


RMS_CASES = [((2, 3, 8), -1, (8,)), ((2, 3, 8), 1, (3, 8)), ((2, 3, 8), -2, (1, 8)),
             ((2, 3, 8), 0, (2, 3, 8)), ((5, 17), -1, (17,)), ((1, 1), -1, (1,)),
             ((0, 5), -1, (5,)), ((3, 4, 6), -1, (1,))]


@pytest.mark.parametrize("case", RMS_CASES, ids=str)
def test_rms_norm(case, rng):
    shape, axis, s_shape = case
    feeds = {"x": random_array(rng, shape), "scale": random_array(rng, s_shape)}
    model = single_node_model("RMSNormalization", feeds, attrs={"axis": axis, "epsilon": 1e-4},
                              opset=23)
    got = check_on_ep(model, feeds, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0], rms_norm_ref(feeds["x"], feeds["scale"], axis, 1e-4),
                               rtol=1e-5, atol=1e-5)


def test_rms_norm_float16(rng):
    feeds = {"x": random_array(rng, (4, 32), np.float16), "scale": random_array(rng, (32,), np.float16)}
    check_on_ep(single_node_model("RMSNormalization", feeds, opset=23), feeds, rtol=1e-3, atol=2e-3)


def test_rms_norm_huge_rows_match_float64():
    # x^2 overflows float32 beyond ~1.8e19; the EP scales such rows first (float64 reference).
    x = np.array([[1e37, 2e37, -1e37, 3e37], [1e20, -2e20, 5.0, 1.0], [0.5, -1.5, 2.0, 1.0]],
                 np.float32)
    scale = np.array([1.0, -2.0, 0.5, 1.5], np.float32)
    y = run_on_ep(single_node_model("RMSNormalization", {"x": x, "scale": scale}, opset=23),
                  {"x": x, "scale": scale})[0]
    np.testing.assert_allclose(y, rms_norm_ref(x, scale, -1, 1e-5), rtol=1e-5, atol=1e-6)


def test_rms_norm_stash_type_0_half_is_refused(rng):
    feeds = {"x": random_array(rng, (2, 4), np.float16), "scale": random_array(rng, (4,), np.float16)}
    model = single_node_model("RMSNormalization", feeds, attrs={"stash_type": 0}, opset=23)
    reason = refusal(model, "RMSNormalization")
    assert reason and "stash_type" in reason


@pytest.mark.parametrize("shape,axis", [((2, 2, 0, 0), -2), ((2, 0), 1), ((3, 0, 4), 1)], ids=str)
def test_rms_norm_empty_normalized_shape_is_an_error(shape, axis):
    """X.shape[axis:] with no elements: ORT's CPU kernel raises, so does the EP."""
    x = np.zeros(shape, np.float32)
    scale = np.ones(shape[axis:], np.float32)
    model = single_node_model("RMSNormalization", {"x": x, "scale": scale}, attrs={"axis": axis},
                              opset=23)
    _expect_empty_normalized_shape_error(model, {"x": x, "scale": scale})


def test_rms_norm_empty_leading_dims(rng):
    """Empty leading dims with a non-empty normalized shape: an empty output, as in ORT."""
    x = np.zeros((0, 3, 4), np.float32)
    scale = random_array(rng, (4,))
    check_on_ep(single_node_model("RMSNormalization", {"x": x, "scale": scale}, opset=23),
                {"x": x, "scale": scale})


# ---------------------------------------------------------------- Hardmax

@pytest.mark.parametrize("opset", [10, 12, 13, 21])
@pytest.mark.parametrize("shape,axis", [((3, 4, 5), 0), ((3, 4, 5), 1), ((3, 4, 5), 2),
                                        ((6,), 0), ((2, 1, 3), -1), ((2, 3), None)], ids=str)
def test_hardmax(opset, shape, axis, rng):
    if axis is not None and axis < 0 and opset < 11:
        pytest.skip("negative axes start at opset 11")
    x = random_array(rng, shape, low=-2, high=2)
    attrs = {} if axis is None else {"axis": axis}
    check_on_ep(single_node_model("Hardmax", {"x": x}, attrs=attrs, opset=opset), {"x": x})


@pytest.mark.parametrize("opset", [11, 13])
def test_hardmax_ties_pick_the_first(opset):
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [-np.inf, -np.inf, 5, np.inf],
                  [0.0, -0.0, -1, -2]], np.float32)
    check_on_ep(single_node_model("Hardmax", {"x": x}, opset=opset), {"x": x})


@pytest.mark.parametrize("opset", [12, 13])
def test_hardmax_empty(opset):
    x = np.zeros((0, 3), np.float32)
    check_on_ep(single_node_model("Hardmax", {"x": x}, opset=opset), {"x": x})


def test_hardmax_float16_is_refused(rng):
    x = random_array(rng, (2, 3), np.float16)
    assert "float32 only" in refusal(single_node_model("Hardmax", {"x": x}), "Hardmax")
