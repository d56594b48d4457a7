"""MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool on the EP vs ORT CPU."""

import numpy as np
import pytest

from opcheck import check_error_on_ep, check_on_ep, drop_input_ranks, refusal, single_node_model
from ortmlx.testing import EpRun, random_array, run_cpu

POOL_CASES = [
    ((2, 3, 11), {"kernel_shape": [3]}),
    ((1, 2, 12), {"kernel_shape": [4], "strides": [3], "pads": [1, 2]}),
    ((2, 3, 9, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 13, 8), {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [0, 1, 2, 0]}),
    ((1, 2, 11, 11), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 10, 9), {"kernel_shape": [3, 2], "strides": [3, 2], "pads": [1, 0, 1, 1],
                     "ceil_mode": 1}),
    ((1, 2, 10, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 10, 9), {"kernel_shape": [2, 3], "strides": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 10, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"}),
    ((1, 3, 6, 7, 5), {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 0]}),
    ((1, 1, 1, 1), {"kernel_shape": [1, 1]}),
    # More taps (49) than the translator pools as one slice per tap: the window-view path.
    ((1, 2, 12, 11), {"kernel_shape": [7, 7], "strides": [2, 2], "pads": [3, 3, 2, 2]}),
]

DILATED = [
    ((1, 2, 12, 11), {"kernel_shape": [3, 3], "dilations": [2, 2]}),
    ((1, 2, 12, 11), {"kernel_shape": [2, 3], "dilations": [3, 1], "strides": [2, 2],
                      "pads": [1, 1, 0, 2]}),
    ((1, 2, 12, 11), {"kernel_shape": [3, 3], "dilations": [2, 2], "ceil_mode": 1, "strides": [2, 2]}),
]


@pytest.mark.parametrize("case", POOL_CASES + DILATED, ids=str)
def test_max_pool(case, rng):
    shape, attrs = case
    x = random_array(rng, shape)
    check_on_ep(single_node_model("MaxPool", {"x": x}, attrs=attrs), {"x": x})


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_max_pool_integers(dtype, rng):
    x = random_array(rng, (1, 3, 9, 8), dtype)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    check_on_ep(single_node_model("MaxPool", {"x": x}, attrs=attrs), {"x": x})


@pytest.mark.parametrize("case", POOL_CASES, ids=str)
@pytest.mark.parametrize("cip", [0, 1])
def test_average_pool(case, cip, rng):
    shape, attrs = case
    x = random_array(rng, shape)
    attrs = dict(attrs, count_include_pad=cip)
    check_on_ep(single_node_model("AveragePool", {"x": x}, attrs=attrs), {"x": x},
                rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", DILATED, ids=str)
@pytest.mark.parametrize("cip", [0, 1])
def test_average_pool_dilated(case, cip, rng):
    shape, attrs = case
    x = random_array(rng, shape)
    attrs = dict(attrs, count_include_pad=cip)
    check_on_ep(single_node_model("AveragePool", {"x": x}, attrs=attrs, opset=19), {"x": x},
                rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 7), (1, 4, 5, 6), (2, 2, 3, 4, 5), (1, 1, 1, 1)], ids=str)
def test_global_pool(op, shape, rng):
    x = random_array(rng, shape)
    check_on_ep(single_node_model(op, {"x": x}), {"x": x}, rtol=1e-5, atol=1e-6)


def _typed_model(op, x, attrs, outputs, opset=21):
    import onnx
    from onnx import helper

    from ortmlx.testing import make_model

    node = helper.make_node(op, ["x"], [o[0] for o in outputs], name="node", **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info(n, t, sh) for n, t, sh in outputs])
    return make_model(graph, opset=opset)


def test_pool_refusals(rng):
    x = random_array(rng, (1, 2, 6, 6))
    model = _typed_model("MaxPool", x, {"kernel_shape": [2, 2]},
                         [("out0", 1, [1, 2, 5, 5]), ("out1", 7, [1, 2, 5, 5])])
    assert refusal(model, "MaxPool") is None  # Indices are implemented
    x64 = rng.uniform(size=(1, 2, 6, 6))
    assert "float32" in refusal(single_node_model("MaxPool", {"x": x64},
                                                  attrs={"kernel_shape": [2, 2]}), "MaxPool")


LP_CASES = [
    ((2, 3, 11), {"kernel_shape": [3]}),
    ((2, 3, 9, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 13, 8), {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [0, 1, 2, 0]}),
    ((1, 2, 10, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 10, 9), {"kernel_shape": [2, 3], "strides": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 3, 6, 7, 5), {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2]}),
    ((1, 1, 1, 1), {"kernel_shape": [1, 1]}),
]

LP_CASES_18 = [
    ((1, 2, 11, 11), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 12, 11), {"kernel_shape": [3, 3], "dilations": [2, 2]}),
]


@pytest.mark.parametrize("case", LP_CASES, ids=str)
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool(case, p, rng):
    shape, attrs = case
    x = random_array(rng, shape)
    check_on_ep(single_node_model("LpPool", {"x": x}, attrs=dict(attrs, p=p), opset=11), {"x": x},
                rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", LP_CASES_18, ids=str)
def test_lp_pool_opset18(case, rng):
    shape, attrs = case
    x = random_array(rng, shape)
    check_on_ep(single_node_model("LpPool", {"x": x}, attrs=dict(attrs, p=2), opset=18), {"x": x},
                rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape", [(2, 3, 7), (1, 4, 5, 6), (2, 2, 3, 4, 5), (1, 1, 1, 1)], ids=str)
def test_global_lp_pool(p, shape, rng):
    x = random_array(rng, shape)
    check_on_ep(single_node_model("GlobalLpPool", {"x": x}, attrs={"p": p}), {"x": x},
                rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2**32 + 1, 1]},
    {"kernel_shape": [2, 2], "strides": [2**32 + 1, 1]},
    {"kernel_shape": [2, 2], "dilations": [2**32, 1]},
    {"kernel_shape": [2**32 + 2, 2], "pads": [2**32 + 1, 0, 0, 0]},
])
def test_pool_refuses_int64_attrs_beyond_int32(op, attrs, rng):
    from isolated import check_hostile, loose_model

    # Narrowed to int these wrapped (2^32 + 1 -> 1): a different model, or a crash.
    model = loose_model(op, [("x", np.float32, [1, 2, 5, 5])], attrs)
    check_hostile(model, {"x": random_array(rng, (1, 2, 5, 5))}, op_type=op, refused="outside [")


# Windows overhanging the padded input: ORT sizes the output by truncating division, so an
# overhang below one stride still gives one output (reduced over the taps that land on data or
# pads) and a little more gives none; only a negative size is an error.
OVERHANG = [
    ((1, 1, 4, 6), {"kernel_shape": [2, 4], "strides": [2, 2], "dilations": [1, 2]}),
    ((1, 2, 4, 5), {"kernel_shape": [2, 4], "strides": [2, 2], "dilations": [1, 2]}),
    ((5, 1, 5, 6), {"kernel_shape": [3, 5], "strides": [1, 1], "dilations": [2, 2],
                    "pads": [2, 1, 2, 1]}),
    ((2, 2, 7, 4, 4), {"kernel_shape": [4, 3, 2], "dilations": [1, 2, 2]}),
    ((1, 1, 4, 6), {"kernel_shape": [2, 4], "strides": [2, 2], "dilations": [1, 2],
                    "ceil_mode": 1}),
]


@pytest.mark.parametrize("case", OVERHANG, ids=str)
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_pool_window_overhanging_the_input(case, op, rng):
    shape, attrs = case
    if op == "LpPool" and "ceil_mode" in attrs:
        pytest.skip("LpPool has ceil_mode from opset 18 only")
    x = random_array(rng, shape)
    check_on_ep(single_node_model(op, {"x": x}, attrs=attrs, opset=19), {"x": x},
                rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_window_far_beyond_the_input_is_an_error(op, rng):
    x = random_array(rng, (1, 1, 4, 4))
    model = single_node_model(op, {"x": x}, opset=19,
                              attrs={"kernel_shape": [2, 4], "dilations": [1, 2]})
    run = EpRun(model, strict=True)
    try:
        with pytest.raises(Exception, match="pooling window is larger than the padded input"):
            run.run({"x": x})
    finally:
        run.close()


# Dilation 2 with stride 1 over several channels: MLX's CPU reductions of that overlapping view
# mixed up channels (the windows are copied first now).
@pytest.mark.parametrize("cip", [0, 1])
@pytest.mark.parametrize("shape", [(2, 2, 5), (2, 3, 9), (1, 2, 9, 7)], ids=str)
def test_average_pool_dilated_stride_1_many_channels(shape, cip, rng):
    nd = len(shape) - 2
    attrs = {"kernel_shape": [4, 2][:nd], "dilations": [2] * nd, "pads": [2, 1][:nd] * 2,
             "strides": [1] * nd, "count_include_pad": cip}
    x = random_array(rng, shape)
    check_on_ep(single_node_model("AveragePool", {"x": x}, attrs=attrs, opset=19), {"x": x})


@pytest.mark.parametrize("op", ["MaxPool", "LpPool"])
def test_pool_dilated_stride_1_many_channels(op, rng):
    x = random_array(rng, (2, 3, 9, 7))
    attrs = {"kernel_shape": [3, 2], "dilations": [2, 2]}
    check_on_ep(single_node_model(op, {"x": x}, attrs=attrs, opset=19), {"x": x},
                rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,attrs", [("GlobalAveragePool", {}), ("GlobalMaxPool", {}),
                                      ("MaxPool", {"kernel_shape": [1]}),
                                      ("AveragePool", {"kernel_shape": [1]})])
@pytest.mark.parametrize("shape", [(2, 0, 4), (2, 3, 0)], ids=str)
def test_pool_empty_channel_or_spatial_dim_is_an_error(op, attrs, shape):
    """ORT's pools take an empty input only through N = 0."""
    x = np.zeros(shape, np.float32)
    run = EpRun(single_node_model(op, {"x": x}, attrs=attrs), strict=True)
    try:
        with pytest.raises(Exception, match="an empty input must have N = 0"):
            run.run({"x": x})
    finally:
        run.close()


def test_global_lp_pool_empty_spatial_dim_is_an_error():
    x = np.zeros((4, 0, 3), np.float32)
    run = EpRun(single_node_model("GlobalLpPool", {"x": x}, attrs={"p": 3}, opset=12),
                strict=True)
    try:
        with pytest.raises(Exception, match="an empty input must have N = 0"):
            run.run({"x": x})
    finally:
        run.close()


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(0, 3, 4), (0, 4, 0, 5), (0, 0, 3)], ids=str)
def test_global_pool_empty_batch(op, shape):
    x = np.zeros(shape, np.float32)
    check_on_ep(single_node_model(op, {"x": x}), {"x": x})


# ---------------------------------------------------------------- MaxPool Indices

def _indices_model(x, attrs):
    return single_node_model("MaxPool", {"x": x}, attrs=attrs, n_outputs=2)


@pytest.mark.parametrize("case", POOL_CASES + DILATED, ids=str)
@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices(case, storage_order, rng):
    shape, attrs = case
    x = random_array(rng, shape)
    check_on_ep(_indices_model(x, dict(attrs, storage_order=storage_order)), {"x": x})


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_max_pool_indices_integers_with_ties(dtype, rng):
    # Few distinct values: ties everywhere, where ORT keeps the first position in the window.
    x = rng.integers(0, 3, size=(2, 3, 7, 6)).astype(dtype)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 1], "pads": [1, 1, 1, 1]}
    check_on_ep(_indices_model(x, attrs), {"x": x})


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices_nan_inf_and_windows_in_the_padding(storage_order, rng):
    # A NaN wins only as the first element of its window on the data; -inf windows keep their
    # first element; a window wholly in the padding gives the lowest finite value and position
    # -1 in every dim (ORT's CPU kernel, measured).
    x = random_array(rng, (2, 3, 6, 5))
    x[0, 0, 0, :] = np.nan
    x[0, 1, 2, 1] = np.nan
    x[1, 2, :2, :2] = -np.inf
    x[1, 0] = np.round(x[1, 0])  # ties
    attrs = {"kernel_shape": [2, 2], "storage_order": storage_order, "pads": [1, 1, 0, 1]}
    check_on_ep(_indices_model(x, attrs), {"x": x})
    attrs = {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "dilations": [6, 5],
             "storage_order": storage_order}
    check_on_ep(_indices_model(x, attrs), {"x": x})
    x1 = random_array(rng, (1, 2, 2))
    check_on_ep(_indices_model(x1, {"kernel_shape": [2], "pads": [1, 1], "dilations": [3]}),
                {"x": x1})


def test_max_pool_indices_empty_batch():
    x = np.zeros((0, 2, 4, 4), np.float32)
    check_on_ep(_indices_model(x, {"kernel_shape": [2, 2]}), {"x": x})


# Old opsets: MaxPool 1 (no storage_order), 8 (storage_order), 10 (ceil_mode, dilations), 11;
# AveragePool 7 (count_include_pad), 10 (ceil_mode); LpPool 2.
@pytest.mark.parametrize("op,opset", [("MaxPool", 1), ("MaxPool", 8), ("MaxPool", 10),
                                      ("MaxPool", 11), ("AveragePool", 7), ("AveragePool", 10),
                                      ("LpPool", 2)])
@pytest.mark.parametrize("case", [POOL_CASES[1], POOL_CASES[3], POOL_CASES[6], POOL_CASES[9]],
                         ids=str)
def test_pool_old_opsets(op, opset, case, rng):
    shape, attrs = case
    attrs = dict(attrs)
    if op == "AveragePool" and opset >= 7:
        attrs["count_include_pad"] = 1
    x = random_array(rng, shape)
    check_on_ep(single_node_model(op, {"x": x}, attrs=attrs, opset=opset), {"x": x},
                rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,opset", [("MaxPool", 10), ("AveragePool", 10)])
def test_pool_old_opsets_ceil_mode(op, opset, rng):
    shape, attrs = POOL_CASES[5]
    x = random_array(rng, shape)
    check_on_ep(single_node_model(op, {"x": x}, attrs=attrs, opset=opset), {"x": x})


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("case", [POOL_CASES[0], POOL_CASES[2], POOL_CASES[9]], ids=str)
def test_pool_unknown_rank(op, case, rng):
    """X's rank is known only at run time: kernel_shape names it."""
    shape, attrs = case
    x = random_array(rng, shape)
    model = drop_input_ranks(single_node_model(op, {"x": x}, attrs=attrs))
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_unknown_rank_that_does_not_fit_is_an_error(op, rng):
    model = drop_input_ranks(single_node_model(op, {"x": random_array(rng, (1, 2, 5, 5))},
                                               attrs={"kernel_shape": [2, 2]}))
    check_error_on_ep(model, {"x": random_array(rng, (1, 2, 5))}, "does not match kernel_shape")


@pytest.mark.parametrize("op", ["LpPool", "MaxPool", "AveragePool"])
def test_pool_windows_beyond_int32_dims_are_an_error(op, rng):
    """A kernel near 2^31 with SAME padding makes the padded span of the windows exceed MLX's
    int32 dims: a clean error naming the node (ORT CPU pools each window over the data it
    reaches; a documented limit, docs/RELIABILITY.md; fuzz seed 89, o21_62)."""
    x = random_array(rng, (3, 3, 2, 6))
    model = single_node_model(op, {"x": x}, attrs={"kernel_shape": [2 ** 31 - 1, 5],
                                                   "auto_pad": "SAME_UPPER"})
    check_error_on_ep(drop_input_ranks(model), {"x": x}, "exceeds MLX's int32 dims")


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 2, 3, 4), (1, 2, 3, 2, 2)], ids=str)
def test_global_pool_unknown_rank(op, shape, rng):
    x = random_array(rng, shape)
    check_on_ep(drop_input_ranks(single_node_model(op, {"x": x})), {"x": x},
                rtol=1e-5, atol=1e-5)
    check_error_on_ep(drop_input_ranks(single_node_model(op, {"x": x})),
                      {"x": random_array(rng, (2, 3))}, "rank 2")


def like_cpu_with_negative_padding(model, x, raises):
    """ORT CPU raises "padding values must be non-negative" and the EP names the same (raises),
    or both pool with the negative padding and agree."""
    if raises:
        with pytest.raises(Exception, match="padding values must be non-negative"):
            run_cpu(model, {"x": x})
        check_error_on_ep(model, {"x": x}, "padding values must be non-negative")
    else:
        check_on_ep(model, {"x": x})


# SAME padding with a stride beyond the kernel needs negative padding: ORT (1.30) raises for
# MaxPool and for AveragePool before opset 19, and pools without it for LpPool and AveragePool 19.
@pytest.mark.parametrize("op, opset, raises", [("AveragePool", 11, True), ("MaxPool", 19, True),
                                               ("AveragePool", 19, False), ("LpPool", 18, False)])
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_pool_same_padding_with_a_stride_beyond_the_kernel(op, opset, raises, auto_pad, rng):
    x = random_array(rng, (5, 1, 6, 2, 1))
    model = single_node_model(op, {"x": x}, opset=opset, attrs={
        "kernel_shape": [5, 1, 1], "strides": [2, 2, 1], "auto_pad": auto_pad})
    like_cpu_with_negative_padding(model, x, raises)


# AveragePool before opset 19 with ceil_mode and count_include_pad both set runs ORT's generic
# pool, which pools with the negative padding as its opset-19 kernel does; the EP raised (fuzz
# seed 102, o21_111: AveragePool 3-D, strides [1, 2, 1], kernel [2, 1, 3], SAME_UPPER).
@pytest.mark.parametrize("opset", [10, 11, 18])
@pytest.mark.parametrize("ceil_mode, count_include_pad, raises", [(1, 1, False), (1, 0, True),
                                                                  (0, 1, True)])
@pytest.mark.parametrize("shape,kernel,stride", [((1, 3, 5, 2, 3), [2, 1, 3], [1, 2, 1]),
                                                 ((1, 2, 8, 3), [2, 1], [4, 1])], ids=str)
def test_average_pool_ceil_and_pad_count_take_negative_same_padding_like_cpu(
        opset, ceil_mode, count_include_pad, raises, shape, kernel, stride, rng):
    x = random_array(rng, shape)
    model = single_node_model("AveragePool", {"x": x}, opset=opset, attrs={
        "kernel_shape": kernel, "strides": stride, "auto_pad": "SAME_UPPER",
        "ceil_mode": ceil_mode, "count_include_pad": count_include_pad})
    like_cpu_with_negative_padding(model, x, raises)


@pytest.mark.parametrize("op, opset", [("AveragePool", 11), ("AveragePool", 17),
                                       ("MaxPool", 12), ("MaxPool", 19)])
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_pool_negative_same_padding_on_an_empty_batch_like_cpu(op, opset, auto_pad):
    # ORT returns the empty output of a batch of 0 before its "padding values must be
    # non-negative" check; the EP raised (fuzz seed 22, o16_149: AveragePool 17, (0, 2, 2, 4),
    # strides [2, 1], kernel [1, 4]).
    x = np.zeros((0, 2, 2, 4), np.float32)
    model = single_node_model(op, {"x": x}, opset=opset, attrs={
        "kernel_shape": [1, 4], "strides": [2, 1], "auto_pad": auto_pad})
    got = check_on_ep(model, {"x": x})
    assert got[0].shape == (0, 2, 1, 4)


# ORT's MLAS pools raise for that negative padding (float MaxPool with one output), its other
# kernels pool with it (MaxPool with the Indices output, column-major storage_order, dilations or
# integer types;
# LpPool; AveragePool 19), a negative low pad starting the first window inside the data (SAME_
# UPPER truncates -3 / 2 to -1). The EP raised "padding values must be non-negative" for the
# MaxPool forms (fuzz seed 2: MaxPool with Indices) and could not pad by a negative amount.
@pytest.mark.parametrize("form", ["indices", "storage_order", "dilations", "int8", "float16",
                                  "lp", "avg19"])
@pytest.mark.parametrize("shape,kernel,stride", [((1, 3, 2), [1], [2]), ((2, 1, 4), [1], [4]),
                                                 ((1, 2, 6), [2], [3]), ((1, 1, 4, 7), [1, 2],
                                                                         [4, 5])], ids=str)
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_pool_negative_same_padding_like_cpu(form, shape, kernel, stride, auto_pad, rng):
    dtype = {"int8": np.int8, "float16": np.float16}.get(form, np.float32)
    x = random_array(rng, shape, dtype)
    attrs = {"kernel_shape": kernel, "strides": stride, "auto_pad": auto_pad}
    op, opset, n_out = {"lp": ("LpPool", 18, 1), "avg19": ("AveragePool", 19, 1),
                        "indices": ("MaxPool", 12, 2)}.get(form, ("MaxPool", 12, 1))
    if form == "storage_order":
        attrs["storage_order"] = 1
    if form == "dilations":
        attrs["dilations"] = [2] * len(kernel)
    model = single_node_model(op, {"x": x}, opset=opset, attrs=attrs, n_outputs=n_out)
    if form == "float16":  # ORT's float16 MaxPool raises, as its float32 MLAS one
        with pytest.raises(Exception, match="padding values must be non-negative"):
            run_cpu(model, {"x": x})
        check_error_on_ep(model, {"x": x}, "padding values must be non-negative")
        return
    check_on_ep(model, {"x": x})
