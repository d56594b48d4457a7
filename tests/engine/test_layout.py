"""Channels-last propagation (engine/layout.h): convolution outputs are NCHW views of NHWC data;
BatchNormalization, elementwise ops (per-channel scales, residual adds, activations) and
GlobalAveragePool on such views run on the NHWC data, so a CNN keeps it channels-last from one
convolution to the next. The report counts those nodes (`paths`); results equal ORT's CPU EP, and
equal the run with the propagation off (fast_patterns=0). Where float32 convolutions run on cuDNN
in ONNX's own layout (on the GPU, from ONNXRUNTIME_EP_MLX_CUDNN_CONV_MIN_FLOPS up,
ops/conv/cuda/cudnn_conv.h) there is no NHWC data to keep: the report then shows the cuDNN path
and none of these, with the same results."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from ortmlx.testing import EpRun, assert_ran_on_ep, cudnn_conv, make_model, run_cpu

OFF = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
ELEM = "channels-last elementwise (no NCHW copy)"
BN = "BatchNormalization channels-last (no NCHW copy)"
GAP = "GlobalAveragePool channels-last (no NCHW copy)"
CONCAT = "Concat channels-last (no NCHW copy)"
CUDNN = cudnn_conv(2 * 2 * 8 * 12 * 12 * 8 * 9)  # the largest convolution of these models
CUDNN_PATH = "Conv NCHW on cuDNN (algorithm timed per shape)"


def expect_channels_last(paths, key, count):
    """`count` nodes of the layout pass's `key`; none where the convolutions ran on cuDNN."""
    if CUDNN:
        assert key not in paths, paths
    else:
        assert paths[key]["count"] == count, paths


def residual_cnn(c=8, classes=5, seed=0):
    """Conv-BN-Relu, Conv-BN, residual Add, Relu, Mul by a per-channel constant, MaxPool, Conv
    with bias, HardSwish, GlobalAveragePool, Flatten, Gemm: a ResNet/MobileNet-like stack."""
    rng = np.random.default_rng(seed)

    def w(name, shape, scale=0.3):
        return onnx.numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name)

    def bn(prefix):
        return [w(f"{prefix}_s", [c], 0.2), w(f"{prefix}_b", [c], 0.1), w(f"{prefix}_m", [c], 0.1),
                onnx.numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32),
                                             f"{prefix}_v")]

    n = h.make_node
    inits = [w("w0", [c, 3, 3, 3]), w("w1", [c, c, 3, 3]), w("w2", [c, c, 1, 1]), w("b2", [c]),
             w("chs", [c, 1, 1]), w("fc", [c, classes]), w("fcb", [classes])]
    inits += bn("bn0") + bn("bn1")
    nodes = [
        n("Conv", ["x", "w0"], ["c0"], name="conv0", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c0", "bn0_s", "bn0_b", "bn0_m", "bn0_v"], ["n0"], name="bn0"),
        n("Relu", ["n0"], ["r0"], name="relu0"),
        n("Conv", ["r0", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", "bn1_s", "bn1_b", "bn1_m", "bn1_v"], ["n1"], name="bn1"),
        n("Add", ["n1", "r0"], ["a1"], name="residual"),
        n("Relu", ["a1"], ["r1"], name="relu1"),
        n("Mul", ["r1", "chs"], ["m1"], name="channel_scale"),
        n("MaxPool", ["m1"], ["p1"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2"),
        n("HardSwish", ["c2"], ["hs"], name="hswish"),
        n("GlobalAveragePool", ["hs"], ["g"], name="gap"),
        n("Flatten", ["g"], ["f"], name="flatten"),
        n("Gemm", ["f", "fc", "fcb"], ["y"], name="fc"),
    ]
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3, 12, 12])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, classes])
    return make_model(h.make_graph(nodes, "cnn", [x], [y], inits))


def run(model, x, options):
    r = EpRun(model, provider_options=options, strict=True, optimization_level=OFF)
    try:
        got = [r.run({"x": x})[0] for _ in range(2)]  # MISS, then HIT
        report = assert_ran_on_ep(r, [nd.name for nd in model.graph.node])
    finally:
        r.close()
    np.testing.assert_array_equal(got[0], got[1])
    return got[0], report


@pytest.mark.parametrize("compiled", [True, False])
def test_cnn_stays_channels_last_and_matches(compiled, rng):
    model = residual_cnn()
    x = rng.normal(0, 1, (2, 3, 12, 12)).astype(np.float32)
    opts = {} if compiled else {"no_compile": "1"}
    got, report = run(model, x, opts)
    np.testing.assert_allclose(got, run_cpu(model, {"x": x})[0], rtol=1e-5, atol=1e-5)
    paths = report.paths()
    # Per run: both BatchNormalizations; Relu x2, the residual Add, the channel Mul, HardSwish.
    expect_channels_last(paths, BN, 2 * 2)
    expect_channels_last(paths, ELEM, 5 * 2)
    # The GlobalAveragePool of the HardSwish output averages the NHWC data (no NCHW copy).
    expect_channels_last(paths, GAP, 1 * 2)
    if CUDNN:
        assert paths[CUDNN_PATH]["count"] == 3 * 2, paths
    off, report_off = run(model, x, dict(opts, fast_patterns="0"))
    assert BN not in report_off.paths() and ELEM not in report_off.paths()
    assert GAP not in report_off.paths()
    np.testing.assert_allclose(got, off, rtol=1e-6, atol=1e-6)


def test_elementwise_without_convolutions_is_untouched(rng):
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4, 5])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3, 4, 5])
    model = make_model(h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y]))
    _, report = run(model, rng.normal(0, 1, (2, 3, 4, 5)).astype(np.float32), {})
    assert ELEM not in report.paths()


def test_global_average_pool_of_plain_nchw_is_untouched(rng):
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4, 5])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3, 1, 1])
    model = make_model(h.make_graph([h.make_node("GlobalAveragePool", ["x"], ["y"], name="gap")],
                                    "g", [x], [y]))
    xv = rng.normal(0, 1, (2, 3, 4, 5)).astype(np.float32)
    got, report = run(model, xv, {})
    assert GAP not in report.paths()
    np.testing.assert_allclose(got, run_cpu(model, {"x": xv})[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("spatial", [(1, 1), (7, 9)], ids=str)
def test_global_average_pool_after_conv(spatial, rng):
    """Conv then GlobalAveragePool: the pool reads the convolution's NHWC output directly."""
    c = 6
    w = onnx.numpy_helper.from_array(rng.normal(0, 0.3, (c, 3, 1, 1)).astype(np.float32), "w")
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3, *spatial])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, c, 1, 1])
    model = make_model(h.make_graph(
        [h.make_node("Conv", ["x", "w"], ["c"], name="conv"),
         h.make_node("GlobalAveragePool", ["c"], ["y"], name="gap")], "g", [x], [y], [w]))
    xv = rng.normal(0, 1, (2, 3, *spatial)).astype(np.float32)
    got, report = run(model, xv, {})
    expect_channels_last(report.paths(), GAP, 2)
    np.testing.assert_allclose(got, run_cpu(model, {"x": xv})[0], rtol=1e-5, atol=1e-6)


def inception_block(axis=1, mixed=False, seed=1):
    """Two convolution branches concatenated (an Inception/DenseNet block), then a convolution;
    `mixed`: the second operand of the Concat is the graph input itself (plain NCHW)."""
    rng = np.random.default_rng(seed)
    c = 4

    def w(name, shape):
        return onnx.numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name)

    n = h.make_node
    inits = [w("wa", [c, 3, 1, 1]), w("wb", [c, 3, 3, 3])]
    nodes = [n("Conv", ["x", "wa"], ["a"], name="conv_a"),
             n("Relu", ["a"], ["ra"], name="relu_a")]
    if mixed:
        other, other_c = "x", 3
    else:
        nodes.append(n("Conv", ["x", "wb"], ["b"], name="conv_b", pads=[1, 1, 1, 1]))
        other, other_c = "b", c
    nodes.append(n("Concat", ["ra", other], ["cat"], name="concat", axis=axis))
    axis_n = axis % 4
    cat_shape = [2, c, 6, 5]
    cat_shape[axis_n] += [2, other_c, 6, 5][axis_n]
    if axis_n == 1:
        inits.append(w("wc", [2, cat_shape[1], 1, 1]))
        nodes.append(n("Conv", ["cat", "wc"], ["y"], name="conv_c"))
        out_shape = [2, 2] + cat_shape[2:]
    else:
        nodes.append(n("Relu", ["cat"], ["y"], name="relu_out"))
        out_shape = cat_shape
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3, 6, 5])
    y = h.make_tensor_value_info("y", T.FLOAT, out_shape)
    return make_model(h.make_graph(nodes, "block", [x], [y], inits))


@pytest.mark.parametrize("axis,mixed", [(1, False), (-3, False), (2, False), (-1, False),
                                        (1, True)], ids=str)
@pytest.mark.parametrize("compiled", [True, False])
def test_concat_stays_channels_last(axis, mixed, compiled, rng):
    if mixed and axis != 1:
        pytest.skip("only the channel axis mixes a 3-channel input")
    model = inception_block(axis, mixed)
    x = rng.normal(0, 1, (2, 3, 6, 5)).astype(np.float32)
    opts = {} if compiled else {"no_compile": "1"}
    got, report = run(model, x, opts)
    np.testing.assert_allclose(got, run_cpu(model, {"x": x})[0], rtol=1e-5, atol=1e-5)
    expect_channels_last(report.paths(), CONCAT, 2)
    off, report_off = run(model, x, dict(opts, fast_patterns="0"))
    assert CONCAT not in report_off.paths()
    np.testing.assert_array_equal(got, off)  # a concatenation copies values: exact


def test_concat_without_convolutions_is_untouched(rng):
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4, 5])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 6, 4, 5])
    model = make_model(h.make_graph([h.make_node("Concat", ["x", "x"], ["y"], name="concat",
                                                 axis=1)], "g", [x], [y]))
    xv = rng.normal(0, 1, (2, 3, 4, 5)).astype(np.float32)
    got, report = run(model, xv, {})
    assert CONCAT not in report.paths()
    np.testing.assert_array_equal(got, np.concatenate([xv, xv], axis=1))
