"""Vision family: CenterCropPad runs on the EP and matches ORT CPU (which runs ONNX's function
body)."""

import numpy as np
import pytest

from opcheck import check_error_on_ep, check_on_ep, refusal, single_node_model
from ort_raises import check_raises_like_cpu, dynamic_dims
from opcheck import check_runs_on_ep
from ortmlx.testing import random_array

I64 = np.int64


@pytest.mark.parametrize("case", [
    ((4, 6), [2, 3], None), ((5, 7), [8, 10], None), ((5, 6), [3, 9], None),
    ((3, 5, 4), [4, 1], [0, 2]), ((3, 5, 4), [6], [-2]), ((2, 3, 4), [2, 3, 4], None),
    ((2, 3, 4), [0, 3, 5], None), ((0, 3), [2, 3], None), ((1, 1), [1, 1], None),
], ids=str)
@pytest.mark.parametrize("const_shape", [True, False], ids=["const", "input"])
def test_center_crop_pad(case, const_shape, rng):
    shape, target, axes = case
    x = random_array(rng, shape)
    sh = np.array(target, I64)
    attrs = {} if axes is None else {"axes": axes}
    if const_shape:
        model = single_node_model("CenterCropPad", {"x": x, "s": sh}, attrs=attrs, opset=18,
                                  initializers={"s": sh})
        check_on_ep(model, {"x": x})
    else:
        model = single_node_model("CenterCropPad", {"x": x, "s": sh}, attrs=attrs, opset=18,
                                  check=False)
        check_on_ep(model, {"x": x, "s": sh})


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float16, np.uint8, np.bool_])
def test_center_crop_pad_types(dtype, rng):
    x = random_array(rng, (3, 4), dtype)
    sh = np.array([5, 2], I64)
    model = single_node_model("CenterCropPad", {"x": x, "s": sh}, opset=18, initializers={"s": sh})
    check_on_ep(model, {"x": x})


def test_center_crop_pad_runtime_shapes_change_between_runs(rng):
    x = random_array(rng, (4, 5))
    model = dynamic_dims(single_node_model("CenterCropPad", {"x": x, "s": np.array([2, 7], I64)},
                                           opset=18, check=False))
    check_runs_on_ep(model, [{"x": x, "s": np.array(s, I64)}
                             for s in ([2, 7], [6, 1], [4, 5], [0, 9])])


@pytest.mark.parametrize("target", [[-1, 3], [2, -5], [-7, -12], [-4, 0]], ids=str)
def test_center_crop_pad_negative_sizes_give_empty_axes(target, rng):
    """The function body's Slice ends before it starts for a negative size: an empty axis."""
    x = random_array(rng, (4, 5))
    sh = np.array(target, I64)
    model = single_node_model("CenterCropPad", {"x": x, "s": sh}, opset=18, check=False)
    check_on_ep(model, {"x": x, "s": sh})


# ---------------------------------------------------------------- MaxUnpool

def _unpooled(shape, ks, st, pads):
    nd = len(ks)
    return shape[:2] + tuple((shape[2 + i] - 1) * st[i] - pads[i] - pads[i + nd] + ks[i]
                             for i in range(nd))


@pytest.mark.parametrize("opset", [9, 11, 22])
@pytest.mark.parametrize("case", [
    ((1, 1, 2, 2), [2, 2], [2, 2], [0, 0, 0, 0]), ((2, 3, 3, 2), [3, 2], [2, 1], [1, 0, 0, 1]),
    ((1, 2, 5), [2], [2], [0, 0]), ((1, 1, 2, 2, 2), [2, 2, 2], [2, 2, 2], [0] * 6),
    ((0, 2, 2, 2), [2, 2], [2, 2], [0] * 4),
], ids=str)
def test_max_unpool(opset, case, rng):
    shape, ks, st, pads = case
    out = _unpooled(shape, ks, st, pads)
    x = random_array(rng, shape)
    idx = rng.permutation(int(np.prod(out)))[:x.size].reshape(shape).astype(I64)
    attrs = {"kernel_shape": ks, "strides": st, "pads": pads}
    model = single_node_model("MaxUnpool", {"x": x, "i": idx}, attrs=attrs, opset=opset)
    check_on_ep(model, {"x": x, "i": idx})


@pytest.mark.parametrize("const", [True, False], ids=["const", "input"])
def test_max_unpool_output_shape(const, rng):
    x = random_array(rng, (1, 2, 2, 2))
    out = np.array([1, 2, 5, 5], I64)
    idx = rng.permutation(50)[:8].reshape(1, 2, 2, 2).astype(I64)
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    inits = {"o": out} if const else {}
    model = single_node_model("MaxUnpool", {"x": x, "i": idx, "o": out}, attrs=attrs,
                              initializers=inits, check=False)
    feeds = {"x": x, "i": idx} | ({} if const else {"o": out})
    check_on_ep(model, feeds)


def test_max_unpool_out_of_range_index_raises_like_ort(rng):
    x = random_array(rng, (1, 1, 2, 2))
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    good = np.array([[[[0, 3], [9, 15]]]], I64)
    model = single_node_model("MaxUnpool", {"x": x, "i": good}, attrs=attrs)
    for bad_value in (16, -1, 1 << 40):
        bad = good.copy()
        bad[0, 0, 1, 0] = bad_value
        check_raises_like_cpu(model, {"x": x, "i": bad}, {"x": x, "i": good},
                              match=r"index out of bounds.*\[0, 16\)")


def test_max_unpool_refusals(rng):
    x = random_array(rng, (1, 1, 2, 2)).astype(np.float16)
    idx = np.zeros((1, 1, 2, 2), I64)
    model = single_node_model("MaxUnpool", {"x": x, "i": idx}, attrs={"kernel_shape": [2, 2]},
                              check=False)
    assert "float32 only" in refusal(model, "MaxUnpool")


# ---------------------------------------------------------------- Col2Im

def _blocks(img, blk, attrs):
    nd = len(img)
    st = attrs.get("strides", [1] * nd)
    dil = attrs.get("dilations", [1] * nd)
    pads = attrs.get("pads", [0] * 2 * nd)
    return int(np.prod([(img[i] + pads[i] + pads[i + nd] - (dil[i] * (blk[i] - 1) + 1)) // st[i]
                        + 1 for i in range(nd)]))


@pytest.mark.parametrize("case", [
    (1, 1, [3, 3], [1, 3], {}), (2, 3, [4, 5], [2, 2], {"strides": [2, 1]}),
    (1, 1, [5, 5], [2, 2], {"pads": [1, 0, 0, 1], "dilations": [2, 1]}),
    (1, 2, [5, 5], [1, 3], {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    (1, 2, [5], [3], {"strides": [1]}), (2, 1, [2, 3, 4], [2, 2, 2], {}),
    (1, 2, [4, 3, 3], [2, 1, 2], {"strides": [2, 1, 1], "pads": [1, 0, 0, 0, 1, 1]}),
    (0, 1, [3, 3], [2, 2], {}), (1, 3, [1, 1], [1, 1], {}),
], ids=str)
def test_col2im(case, rng):
    n, c, img, blk, attrs = case
    x = random_array(rng, (n, c * int(np.prod(blk)), _blocks(img, blk, attrs)))
    img, blk = np.array(img, I64), np.array(blk, I64)
    model = single_node_model("Col2Im", {"x": x, "img": img, "blk": blk}, attrs=attrs, opset=18,
                              initializers={"img": img, "blk": blk}, check=False)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_col2im_shapes_as_inputs(rng):
    x = random_array(rng, (1, 4, 12))
    img, blk = np.array([4, 5], I64), np.array([2, 2], I64)
    model = single_node_model("Col2Im", {"x": x, "img": img, "blk": blk}, opset=18, check=False)
    check_on_ep(model, {"x": x, "img": img, "blk": blk}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("img,blk,dil", [([6], [2], [2]), ([3, 3, 4], [2, 2, 2], [1, 1, 2])])
def test_col2im_dilations_beyond_2d_are_refused(img, blk, dil, rng):
    x = random_array(rng, (1, int(np.prod(blk)), _blocks(img, blk, {"dilations": dil})))
    img, blk = np.array(img, I64), np.array(blk, I64)
    model = single_node_model("Col2Im", {"x": x, "img": img, "blk": blk},
                              attrs={"dilations": dil}, opset=18,
                              initializers={"img": img, "blk": blk}, check=False)
    assert "2 image dims only" in refusal(model, "Col2Im")


def test_col2im_wrong_block_count_raises(rng):
    x = random_array(rng, (1, 4, 11))
    img, blk = np.array([4, 5], I64), np.array([2, 2], I64)
    model = single_node_model("Col2Im", {"x": x, "img": img, "blk": blk}, opset=18,
                              initializers={"img": img, "blk": blk}, check=False)
    check_error_on_ep(model, {"x": x}, "sliding blocks")


# ---------------------------------------------------------------- AffineGrid

@pytest.mark.parametrize("size", [[2, 3, 4, 5], [1, 1, 1, 1], [1, 2, 3, 1], [2, 1, 2, 3, 4],
                                  [1, 1, 1, 2, 1], [0, 3, 2, 2]], ids=str)
@pytest.mark.parametrize("align", [None, 0, 1])
@pytest.mark.parametrize("const", [True, False], ids=["const", "input"])
def test_affine_grid(size, align, const, rng):
    sd = len(size) - 2
    theta = random_array(rng, (size[0], sd, sd + 1), low=-2, high=2)
    sz = np.array(size, I64)
    attrs = {} if align is None else {"align_corners": align}
    model = single_node_model("AffineGrid", {"t": theta, "s": sz}, attrs=attrs, opset=20,
                              initializers={"s": sz} if const else {}, check=False)
    check_on_ep(model, {"t": theta} | ({} if const else {"s": sz}), rtol=1e-5, atol=1e-6)


def test_affine_grid_batch_mismatch_raises(rng):
    theta = random_array(rng, (2, 2, 3))
    sz = np.array([3, 1, 2, 2], I64)
    model = single_node_model("AffineGrid", {"t": theta, "s": sz}, opset=20,
                              initializers={"s": sz}, check=False)
    check_error_on_ep(model, {"t": theta}, "theta's batch")


def test_affine_grid_empty_spatial_size_raises_like_ort(rng):
    theta = random_array(rng, (1, 2, 3))
    model = single_node_model("AffineGrid", {"t": theta, "s": np.array([1, 1, 2, 2], I64)},
                              opset=20, check=False)
    check_raises_like_cpu(model, {"t": theta, "s": np.array([1, 1, 0, 3], I64)},
                          {"t": theta, "s": np.array([1, 1, 3, 2], I64)}, match="positive")


# ---------------------------------------------------------------- MaxRoiPool

def _rois(rng, n, batch, h, w, scale):
    b = rng.integers(0, batch, size=(n, 1)).astype(np.float32)
    x1 = rng.uniform(-2, w / scale, size=(n, 1))
    y1 = rng.uniform(-2, h / scale, size=(n, 1))
    x2 = x1 + rng.uniform(-1, w / scale, size=(n, 1))
    y2 = y1 + rng.uniform(-1, h / scale, size=(n, 1))
    return np.concatenate([b, x1, y1, x2, y2], axis=1).astype(np.float32)


@pytest.mark.parametrize("case", [((2, 3, 8, 6), 5, [2, 2], 1.0), ((1, 2, 5, 7), 3, [3, 1], 0.5),
                                  ((3, 1, 4, 4), 4, [1, 1], 2.0), ((1, 2, 6, 6), 0, [2, 3], 1.0),
                                  ((2, 2, 3, 9), 6, [4, 5], 0.25)], ids=str)
def test_max_roi_pool(case, rng):
    shape, nr, pooled, scale = case
    x = random_array(rng, shape, low=-3, high=3)
    rois = _rois(rng, nr, shape[0], shape[2], shape[3], scale)
    attrs = {"pooled_shape": pooled, "spatial_scale": scale}
    model = single_node_model("MaxRoiPool", {"x": x, "r": rois}, attrs=attrs, opset=13)
    check_on_ep(model, {"x": x, "r": rois})


def test_max_roi_pool_edges():
    x = np.arange(2 * 1 * 4 * 5, dtype=np.float32).reshape(2, 1, 4, 5) - 20
    x[1, 0, 1, 1] = -np.inf
    rois = np.array([[0, 0.5, 0.5, 2.5, 2.5],      # halves round away from zero
                     [1, -0.5, -0.5, 0.4, 0.4],    # -0.5 rounds to -1
                     [1, 3, 3, 1, 1],              # malformed: forced to 1x1
                     [1.9, 10, 10, 12, 12],        # outside the image: empty bins, 0
                     [0, 1, 1, 1, 1]], np.float32)
    model = single_node_model("MaxRoiPool", {"x": x, "r": rois}, attrs={"pooled_shape": [2, 2]},
                              opset=13)
    check_on_ep(model, {"x": x, "r": rois})


def test_max_roi_pool_bad_batch_index_raises_like_ort(rng):
    x = random_array(rng, (2, 1, 4, 4))
    good = np.array([[1, 0, 0, 3, 3]], np.float32)
    model = single_node_model("MaxRoiPool", {"x": x, "r": good}, attrs={"pooled_shape": [2, 2]},
                              opset=13)
    for b in (2.0, -1.0, 1e10):
        bad = good.copy()
        bad[0, 0] = b
        check_raises_like_cpu(model, {"x": x, "r": bad}, {"x": x, "r": good},
                              match=r"batch index out of range")
