"""Conv and ConvTranspose on the EP vs ORT CPU (float32; 1-D to 3-D, groups, dilations, strides,
asymmetric pads, auto_pad, bias; weights as graph inputs and as initializers)."""

import numpy as np
import pytest

from opcheck import check_error_on_ep, check_on_ep, drop_input_ranks, refusal, single_node_model
from ortmlx.testing import cudnn_conv, kernel_enabled, mlx_backend, random_array
from pattern_check import run_pattern

TOL = dict(rtol=1e-5, atol=1e-5)  # fp32 sums in a different order (as MatMul)

CONV_CASES = [
    # (x shape, w shape, attrs)
    ((2, 3, 11), (5, 3, 3), {}),
    ((1, 4, 17), (6, 2, 4), {"group": 2, "strides": [2], "pads": [1, 2], "dilations": [2]}),
    ((2, 3, 9, 10), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 3, 13, 8), (5, 3, 3, 2), {"strides": [2, 1], "pads": [0, 1, 2, 0]}),
    ((2, 4, 12, 11), (6, 2, 3, 3), {"group": 2, "dilations": [2, 1], "pads": [2, 1, 1, 0]}),
    ((1, 8, 15, 15), (8, 1, 3, 3), {"group": 8, "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # dw
    ((1, 6, 9, 9), (12, 1, 5, 5), {"group": 6, "pads": [2, 2, 2, 2]}),  # depthwise multiplier 2
    ((2, 5, 7, 6), (3, 5, 1, 1), {}),
    ((1, 3, 10, 9), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 10, 9), (4, 3, 4, 2), {"auto_pad": "SAME_LOWER", "strides": [3, 2]}),
    ((1, 3, 10, 9), (4, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 3]}),
    ((1, 2, 6, 7, 5), (4, 2, 3, 3, 2), {"pads": [1, 0, 1, 1, 1, 0]}),
    ((2, 4, 5, 6, 7), (4, 2, 2, 3, 3), {"group": 2, "strides": [1, 2, 2], "dilations": [2, 1, 1]}),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
@pytest.mark.parametrize("bias", [False, True])
def test_conv(case, bias, rng):
    xs, ws, attrs = case
    x = random_array(rng, xs)
    w = random_array(rng, ws)
    inputs = {"x": x, "w": w}
    if bias:
        inputs["b"] = random_array(rng, (ws[0],))
    check_on_ep(single_node_model("Conv", inputs, attrs=attrs), inputs, **TOL)


# On the GPU float32 Conv runs on cuDNN in NCHW (ops/conv/cuda/cudnn_conv.h) from
# ONNXRUNTIME_EP_MLX_CUDNN_CONV_MIN_FLOPS FLOPs up (0 here: every case) unless
# ONNXRUNTIME_EP_MLX_CUDNN_CONV=0; MLX's convolutions take the rest.
CUDNN_PATH = "Conv NCHW on cuDNN (algorithm timed per shape)"


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv_path(case, rng, monkeypatch):
    """Which convolution ran, per the report: with no FLOP floor, cuDNN on NCHW tensors on the
    GPU (1-D as 2-D, unequal pads added to X first, groups, dilations, 3-D), MLX's channels-last
    convolution elsewhere; the values match ORT CPU either way."""
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_CUDNN_CONV_MIN_FLOPS", "0")
    xs, ws, attrs = case
    inputs = {"x": random_array(rng, xs), "w": random_array(rng, ws), "b": random_array(rng, (ws[0],))}
    report = run_pattern(single_node_model("Conv", inputs, attrs=attrs), inputs, **TOL)
    assert (CUDNN_PATH in report.paths()) == cudnn_conv(0), report.paths()


def test_conv_below_the_flop_floor_keeps_mlx(rng, monkeypatch):
    """A convolution below ONNXRUNTIME_EP_MLX_CUDNN_CONV_MIN_FLOPS keeps MLX's convolution."""
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_CUDNN_CONV_MIN_FLOPS", str(2 ** 28))
    inputs = {"x": random_array(rng, (1, 4, 9, 9)), "w": random_array(rng, (6, 4, 3, 3))}
    report = run_pattern(single_node_model("Conv", inputs, attrs={"pads": [1, 1, 1, 1]}), inputs,
                         **TOL)
    assert CUDNN_PATH not in report.paths()


# Where MLX's convolution runs on the GPU (these cases are below the FLOP floor; unless
# ONNXRUNTIME_EP_MLX_CONV_NHWC_KERNEL=0) a graph input goes NHWC by a CUDA kernel; otherwise by
# MLX's transpose.
NHWC_KERNEL = (mlx_backend() == "gpu" and not cudnn_conv(2 * 4 * 64 * 33 * 31 * 9)
               and kernel_enabled("ONNXRUNTIME_EP_MLX_CONV_NHWC_KERNEL"))


@pytest.mark.parametrize("xs", [(3, 1, 5, 7), (2, 3, 33, 31), (1, 8, 9, 11), (2, 9, 7, 5),
                                (1, 33, 6, 13), (2, 64, 17, 9)], ids=str)
def test_conv_input_to_channels_last(xs, rng):
    """A graph input in NCHW goes channels-last before MLX's convolution: on the GPU by one of
    two kernels (a thread per pixel for at most 8 channels, 32 x 32 tiles above), elsewhere by
    MLX's transpose (the report's path says which). Channel counts on both sides of 8 and of tile
    edges, odd sizes."""
    x = random_array(rng, xs)
    # Weights scaled by 1/sqrt(fan-in): outputs of order 1, so TOL measures the summation order.
    w = (random_array(rng, (4, xs[1], 3, 3)) / np.sqrt(9 * xs[1])).astype(np.float32)
    inputs = {"x": x, "w": w}
    report = run_pattern(single_node_model("Conv", inputs, attrs={"pads": [1, 1, 1, 1]}), inputs,
                         **TOL)
    assert ("Conv input -> NHWC by one CUDA kernel" in report.paths()) == NHWC_KERNEL


def test_conv_weights_as_initializers_and_kernel_shape(rng):
    x = random_array(rng, (2, 3, 8, 9))
    w = random_array(rng, (4, 3, 3, 3))
    b = random_array(rng, (4,))
    model = single_node_model("Conv", {"x": x, "w": w, "b": b},
                              attrs={"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
                              initializers={"w": w, "b": b})
    check_on_ep(model, {"x": x}, **TOL)


def test_conv_opset_13(rng):
    x = random_array(rng, (1, 2, 7, 7))
    w = random_array(rng, (3, 2, 2, 2))
    check_on_ep(single_node_model("Conv", {"x": x, "w": w}, opset=13), {"x": x, "w": w}, **TOL)


def test_conv_refusals(rng):
    x = random_array(rng, (1, 2, 5, 5))
    w = random_array(rng, (3, 2, 3, 3))
    model = single_node_model("Conv", {"x": x, "w": w}, attrs={"auto_pad": "SAME_UPPER",
                                                              "dilations": [2, 2]})
    assert "dilations" in refusal(model, "Conv")
    x6 = random_array(rng, (1, 2, 3, 3, 3, 3))
    w6 = random_array(rng, (2, 2, 2, 2, 2, 2))
    assert "rank" in refusal(single_node_model("Conv", {"x": x6, "w": w6}), "Conv")


CT_CASES = [
    ((2, 3, 7), (3, 4, 3), {}),
    ((1, 4, 6), (4, 3, 4), {"group": 2, "strides": [3], "pads": [1, 2], "output_padding": [1]}),
    ((2, 3, 5, 6), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 0, 0, 1]}),
    ((1, 4, 5, 5), (4, 3, 3, 3), {"group": 2, "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 3, 4, 5), (3, 2, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                  "output_padding": [1, 0]}),
    ((1, 6, 4, 4), (6, 1, 3, 3), {"group": 6, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 3, 4), (2, 3, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
    ((1, 2, 3, 4), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 3, 4), (2, 3, 4, 3), {"strides": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 3, 4), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "VALID"}),
    ((1, 2, 3, 4), (2, 3, 2, 2), {"pads": [2, 2, 1, 1]}),  # pads beyond the kernel span: crops
    ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), {"strides": [2, 1, 2], "pads": [0, 1, 1, 1, 0, 0]}),
    ((1, 4, 3, 4, 3), (4, 2, 2, 3, 2), {"group": 2, "strides": [2, 1, 2]}),
    ((1, 2, 3, 4), (2, 3, 3, 3), {"strides": [2, 2], "output_shape": [6, 6]}),
    ((1, 2, 3, 4), (2, 3, 3, 3), {"strides": [2, 2], "output_shape": [6, 6],
                                  "auto_pad": "SAME_UPPER"}),
    # SAME_* with the kernel extent below the stride: ORT clamps the negative total padding to
    # zero and returns the full output, smaller than ONNX's in * stride.
    ((4, 1, 1, 2), (1, 1, 1, 4), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 3, 4), (2, 2, 1, 2), {"strides": [3, 3], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 3), (2, 2, 2), {"strides": [3], "auto_pad": "SAME_LOWER", "output_padding": [0]}),
]


@pytest.mark.parametrize("case", CT_CASES, ids=str)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose(case, bias, rng):
    xs, ws, attrs = case
    x = random_array(rng, xs)
    w = random_array(rng, ws)
    inputs = {"x": x, "w": w}
    if bias:
        inputs["b"] = random_array(rng, (ws[1] * attrs.get("group", 1),))
    check_on_ep(single_node_model("ConvTranspose", inputs, attrs=attrs), inputs, **TOL)


def test_resnet_like_block_runs_whole_on_ep(rng):
    """Conv -> (BatchNormalization, folded by ORT) -> Relu -> MaxPool -> Conv -> GlobalAveragePool, all on the EP."""
    import onnx
    from onnx import helper

    from ortmlx.testing import make_model

    x = random_array(rng, (2, 3, 32, 32))
    inits = {
        "w1": random_array(rng, (8, 3, 7, 7), low=-0.3, high=0.3),
        "s": random_array(rng, (8,), low=0.5, high=1.5), "bb": random_array(rng, (8,)),
        "m": random_array(rng, (8,)), "v": random_array(rng, (8,), low=0.5, high=2.0),
        "w2": random_array(rng, (16, 8, 3, 3), low=-0.3, high=0.3),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", strides=[2, 2],
                         pads=[3, 3, 3, 3]),
        helper.make_node("BatchNormalization", ["c1", "s", "bb", "m", "v"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["p", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c2"], ["y"], name="gap"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 16, 1, 1])],
        [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = make_model(graph, opset=17)
    # ORT's optimizer folds the BatchNormalization into conv1's weights before partitioning.
    names = [n.name for n in nodes if n.name != "bn"]
    check_on_ep(model, {"x": x}, node_names=names, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- hostile int64 attributes

def _conv_model(op, attrs, w_shape, rng):
    """X as a graph input, W as an initializer; no shape inference (it would reject some of the
    hostile attributes before ORT's kernels see them)."""
    import onnx
    from onnx import TensorProto, helper

    from ortmlx.testing import make_model

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = onnx.numpy_helper.from_array(random_array(rng, w_shape), "w")
    node = helper.make_node(op, ["x", "w"], ["y"], name="node", **attrs)
    return make_model(helper.make_graph([node], "g", [x], [y], [w]), check=False)


@pytest.mark.parametrize("op, attrs", [
    ("Conv", {"strides": [2**32, 1]}),          # wrapped to 0: a division by zero
    ("Conv", {"strides": [2**32 + 1, 1]}),      # wrapped to 1: a different model
    ("Conv", {"group": 2**32}),
    ("Conv", {"group": 2**32 + 1}),
    ("Conv", {"dilations": [2**32 + 1, 1]}),
    ("Conv", {"pads": [0, 0, 2**32, 0]}),
    ("ConvTranspose", {"strides": [2**32 + 1, 1]}),
    ("ConvTranspose", {"group": 2**32}),
    ("ConvTranspose", {"group": 2**32 + 2}),
    ("ConvTranspose", {"output_shape": [2**32 + 3, 3]}),
])
def test_conv_int64_attrs_beyond_int32_are_refused(op, attrs, rng):
    from isolated import check_hostile

    w_shape = (4, 2, 3, 3) if op == "Conv" else (2, 2, 3, 3)
    model = _conv_model(op, attrs, w_shape, rng)
    x = {"x": random_array(rng, (1, 2, 5, 5))}
    # ORT's CPU EP is the reference: it raises for most, and takes strides 2^32 as they are.
    check_hostile(model, x, op_type=op, refused="outside [")


@pytest.mark.parametrize("opset", [1, 7, 9])
@pytest.mark.parametrize("case", [CONV_CASES[1], CONV_CASES[3], CONV_CASES[8], CONV_CASES[11]],
                         ids=str)
def test_conv_old_opsets(case, opset, rng):
    xs, ws, attrs = case
    inputs = {"x": random_array(rng, xs), "w": random_array(rng, ws), "b": random_array(rng, (ws[0],))}
    check_on_ep(single_node_model("Conv", inputs, attrs=attrs, opset=opset), inputs, **TOL)


@pytest.mark.parametrize("opset", [1, 9])
def test_conv_transpose_old_opsets(opset, rng):
    x = random_array(rng, (1, 3, 5, 6))
    w = random_array(rng, (3, 4, 3, 2))
    attrs = {"strides": [2, 1], "pads": [1, 0, 0, 1], "output_padding": [1, 0]}
    check_on_ep(single_node_model("ConvTranspose", {"x": x, "w": w}, attrs=attrs, opset=opset),
                {"x": x, "w": w}, **TOL)


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
@pytest.mark.parametrize("xs,ws", [((2, 3, 11), (3, 3, 3)), ((1, 3, 7, 6), (3, 3, 2, 3)),
                                   ((1, 3, 4, 5, 3), (3, 3, 2, 2, 2))], ids=str)
def test_conv_unknown_x_rank(op, xs, ws, rng):
    """X's rank is known only at run time: W (an initializer) names it."""
    x, w = random_array(rng, xs), random_array(rng, ws)
    model = drop_input_ranks(single_node_model(op, {"x": x, "w": w}, initializers={"w": w}))
    check_on_ep(model, {"x": x}, **TOL)


def test_conv_unknown_ranks_from_kernel_shape(rng):
    """X and W of unknown rank: kernel_shape names the rank; a live rank that does not fit fails
    naming the node."""
    x, w = random_array(rng, (1, 2, 6, 5)), random_array(rng, (3, 2, 3, 3))
    model = drop_input_ranks(single_node_model("Conv", {"x": x, "w": w},
                                               attrs={"kernel_shape": [3, 3]}))
    check_on_ep(model, {"x": x, "w": w}, **TOL)
    x3, w3 = random_array(rng, (1, 2, 6)), random_array(rng, (3, 2, 3))
    check_error_on_ep(model, {"x": x3, "w": w3}, "kernel_shape")


def test_conv_unknown_rank_without_a_hint_is_refused(rng):
    x, w = random_array(rng, (1, 2, 6, 5)), random_array(rng, (3, 2, 3, 3))
    model = drop_input_ranks(single_node_model("Conv", {"x": x, "w": w}))
    assert "rank -1" in refusal(model, "Conv")
