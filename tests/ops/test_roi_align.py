"""RoiAlign (opsets 10 and 16) on the EP vs ORT CPU: avg and max (ORT's max of the weighted
pixels), fixed and adaptive sampling grids, both coordinate modes, regions reaching past the
image and malformed ones, constant and runtime regions, empty shapes, bad batch indices, and
refusals."""

import numpy as np
import onnx
import pytest

from onnx import TensorProto, helper

from opcheck import check_on_ep, refusal
from ort_raises import check_raises_like_cpu
from ortmlx.testing import EpRun, make_model, random_array, run_cpu


def roi_model(x_shape, n_rois, opset, attrs, const_rois=None, dtype=TensorProto.FLOAT):
    """RoiAlign over graph inputs x, rois, batch_indices (rois an initializer when given)."""
    inputs = [helper.make_tensor_value_info("x", dtype, list(x_shape)),
              helper.make_tensor_value_info("batch_indices", TensorProto.INT64, [n_rois])]
    inits = []
    if const_rois is None:
        inputs.append(helper.make_tensor_value_info("rois", dtype, [n_rois, 4]))
    else:
        inits.append(onnx.numpy_helper.from_array(const_rois, "rois"))
    node = helper.make_node("RoiAlign", ["x", "rois", "batch_indices"], ["out0"], name="node",
                            **attrs)
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("out0", dtype, None)], inits)
    return make_model(graph, opset=opset, check=False)


def random_rois(rng, n, h, w, spread=1.3):
    """Regions [x1, y1, x2, y2] mostly inside an h x w image, some past its edges."""
    x1 = rng.uniform(-0.2 * w, w * spread * 0.8, n)
    y1 = rng.uniform(-0.2 * h, h * spread * 0.8, n)
    x2 = x1 + rng.uniform(0.2, w * 0.8, n)
    y2 = y1 + rng.uniform(0.2, h * 0.8, n)
    return np.stack([x1, y1, x2, y2], 1).astype(np.float32)


def check(x, rois, batch, opset, attrs, const=False):
    model = roi_model(x.shape, len(rois), opset, attrs, const_rois=rois if const else None)
    feeds = {"x": x, "batch_indices": batch}
    if not const:
        feeds["rois"] = rois
    check_on_ep(model, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [10, 16])
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ratio", [0, 1, 2, 3])
@pytest.mark.parametrize("const", [False, True])
def test_roi_align(opset, mode, ratio, const, rng):
    x = random_array(rng, (2, 3, 10, 12))
    rois = random_rois(rng, 5, 10, 12)
    batch = rng.integers(0, 2, 5).astype(np.int64)
    check(x, rois, batch, opset, {"mode": mode, "sampling_ratio": ratio, "output_height": 3,
                                  "output_width": 4}, const)


@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.0625])
def test_roi_align_modes_and_scale(ctm, mode, scale, rng):
    x = random_array(rng, (1, 4, 9, 7))
    rois = random_rois(rng, 6, 9 / scale, 7 / scale)
    check(x, rois, np.zeros(6, np.int64), 16,
          {"mode": mode, "coordinate_transformation_mode": ctm, "spatial_scale": scale,
           "output_height": 2, "output_width": 3})


@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_malformed_regions(ctm, mode, ratio, rng):
    # Reversed, empty, tiny and far-outside regions: half_pixel leaves them as they are (an
    # adaptive grid may be empty: 0), output_half_pixel makes them at least 1x1.
    x = random_array(rng, (1, 2, 6, 6))
    rois = np.array([[3, 3, 1, 1], [2, 2, 2, 2], [2, 2, 2.3, 2.2], [20, 20, 30, 30],
                     [-9, -9, -5, -5], [0, 0, 6, 6], [1.5, 0.5, 0.5, 4]], np.float32)
    check(x, rois, np.zeros(len(rois), np.int64), 16,
          {"mode": mode, "coordinate_transformation_mode": ctm, "sampling_ratio": ratio,
           "output_height": 2, "output_width": 2})


def test_roi_align_large_adaptive_grid(rng):
    # Regions of different sizes: different adaptive grids in one node.
    x = random_array(rng, (2, 8, 32, 32))
    rois = np.array([[0, 0, 31, 31], [4, 4, 8, 6], [0, 0, 2, 30], [10, 3, 30, 5]], np.float32)
    for mode in ("avg", "max"):
        check(x, rois, np.array([0, 1, 1, 0], np.int64), 16,
              {"mode": mode, "output_height": 7, "output_width": 7})


def test_roi_align_default_attrs(rng):
    x = random_array(rng, (1, 3, 8, 8))
    rois = random_rois(rng, 3, 8, 8)
    check(x, rois, np.zeros(3, np.int64), 16, {})
    check(x, rois, np.zeros(3, np.int64), 10, {})


def test_roi_align_regions_change_between_runs(rng):
    # The regions are read on the host each run (the plan runs eagerly).
    x = random_array(rng, (2, 2, 8, 8))
    model = roi_model(x.shape, 3, 16, {"output_height": 2, "output_width": 2})
    for _ in range(3):
        feeds = {"x": x, "rois": random_rois(rng, 3, 8, 8),
                 "batch_indices": rng.integers(0, 2, 3).astype(np.int64)}
        check_on_ep(model, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,n_rois,attrs", [((2, 3, 5, 5), 0, {}),
                                                ((2, 0, 5, 5), 3, {}),
                                                ((2, 3, 5, 5), 3, {"output_height": 0})],
                         ids=str)
def test_roi_align_empty(shape, n_rois, attrs, rng):
    x = random_array(rng, shape)
    rois = random_rois(rng, n_rois, 5, 5)
    check(x, rois, np.zeros(n_rois, np.int64), 16, attrs)


@pytest.mark.parametrize("bad", [2, -1])
def test_roi_align_bad_batch_index_raises_like_cpu(bad, rng):
    x = random_array(rng, (2, 2, 6, 6))
    rois = random_rois(rng, 2, 6, 6)
    model = roi_model(x.shape, 2, 16, {})
    good = {"x": x, "rois": rois, "batch_indices": np.array([0, 1], np.int64)}
    check_raises_like_cpu(model, dict(good, batch_indices=np.array([0, bad], np.int64)), good,
                          match="out of range", atol=1e-5)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf], ids=str)
@pytest.mark.parametrize("ratio", [0, 2])
@pytest.mark.parametrize("shape", [(2, 2, 6, 6), (2, 0, 6, 6)], ids=str)
def test_roi_align_non_finite_region_raises_like_cpu(value, ratio, shape, rng):
    # ORT checks every region value (its "All 'rois' values must be finite"), also with no
    # channels; the EP returned values (a NaN region sampled nothing).
    x = random_array(rng, shape)
    rois = random_rois(rng, 2, 6, 6)
    model = roi_model(x.shape, 2, 16, {"sampling_ratio": ratio})
    good = {"x": x, "rois": rois, "batch_indices": np.array([0, 1], np.int64)}
    bad_rois = rois.copy()
    bad_rois[1, 2] = value
    check_raises_like_cpu(model, dict(good, rois=bad_rois), good, match="finite", atol=1e-5)


@pytest.mark.parametrize("scale", [np.inf, np.nan, 1e38], ids=str)
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
def test_roi_align_non_finite_sample_points(scale, mode, ctm, rng):
    # A spatial_scale that is not finite, or overflows float32 times a region, puts NaN sample
    # points inside the image check: ORT's weights are NaN there (its index from the NaN is
    # undefined behaviour), so are its outputs; the EP gave 0 (it sampled nothing).
    x = random_array(rng, (2, 2, 6, 7))
    rois = np.array([[0, 0, 3, 3], [1, 1, 4, 5], [0.5, 2, 6, 4]], np.float32)
    check(x, rois, np.array([0, 1, 1], np.int64), 16,
          {"sampling_ratio": 2, "spatial_scale": float(scale), "mode": mode,
           "coordinate_transformation_mode": ctm, "output_height": 2, "output_width": 2})


def test_roi_align_no_channels_and_2_31_bins_raises_like_cpu(rng):
    # With no channels the output is empty, but ORT still builds its sample table per bin and
    # fails to allocate it for 2^31 - 1 bins (fuzz: a hostile output_height); the EP returned
    # the empty tensor. Now the EP's bound on sample points (2^26) applies here too.
    x = random_array(rng, (2, 0, 8, 5))
    rois = random_rois(rng, 1, 8, 5)
    model = roi_model(x.shape, 1, 16, {"output_height": 2**31 - 1, "output_width": 3})
    run = EpRun(model, strict=True)
    try:
        with pytest.raises(Exception, match=r"node 'node'.*2\^26 sample points"):
            run.run({"x": x, "rois": rois, "batch_indices": np.array([1], np.int64)})
    finally:
        run.close()


@pytest.mark.parametrize("shape", [(2, 0, 7, 3), (2, 3, 7, 3)], ids=str)
def test_roi_align_huge_sampling_ratio_raises_like_cpu(shape, rng):
    # A sampling_ratio of 2^31 - 1 makes ORT's sample table size overflow (SafeInt), with or
    # without channels; with none the EP returned the empty tensor (fuzz seed 20, o60_105). Its
    # grid bound now applies before the empty result.
    x = random_array(rng, shape)
    rois = random_rois(rng, 3, 7, 3)
    model = roi_model(x.shape, 3, 16, {"sampling_ratio": 2**31 - 1, "output_width": 3})
    feeds = {"x": x, "rois": rois, "batch_indices": np.array([0, 1, 1], np.int64)}
    with pytest.raises(Exception, match="SafeInt"):
        run_cpu(model, feeds)
    run = EpRun(model, strict=True)
    try:
        with pytest.raises(Exception, match=r"node 'node'.*sampling grid of region 0 is too"):
            run.run(feeds)
    finally:
        run.close()


def test_roi_align_refusals(rng):
    m = roi_model((1, 1, 4, 4), 1, 16, {}, dtype=TensorProto.DOUBLE)
    assert "float32 only" in refusal(m, "RoiAlign")
