"""GridSample (opsets 16 and 20) on the EP vs ORT CPU: every mode and padding mode, with and
without align_corners, 4-D and (opset 20) 5-D, grids reaching outside the image, coordinates on
exact half pixels (nearest rounds half to even, as ORT), empty shapes, and refusals."""

import numpy as np
import pytest

from onnx import TensorProto, helper

from opcheck import check_on_ep, refusal
from ort_raises import check_raises_like_cpu
from ortmlx.testing import make_model, random_array

MODES = {16: ["bilinear", "nearest", "bicubic"], 20: ["linear", "nearest", "cubic"]}
PADS = ["zeros", "border", "reflection"]


def gs_model(x_shape, g_shape, opset, attrs, dtype=TensorProto.FLOAT):
    node = helper.make_node("GridSample", ["x", "grid"], ["out0"], name="node", **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", dtype, list(x_shape)),
                      helper.make_tensor_value_info("grid", dtype, list(g_shape))],
        [helper.make_tensor_value_info("out0", dtype, None)])
    return make_model(graph, opset=opset, check=False)


def grid_of(rng, shape, spread=1.3):
    """Grid coordinates in [-spread, spread]: about a quarter of the points outside the image."""
    return (rng.uniform(-spread, spread, size=shape)).astype(np.float32)


def check(x, grid, opset, attrs):
    model = gs_model(x.shape, grid.shape, opset, attrs)
    check_on_ep(model, {"x": x, "grid": grid}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [16, 20])
@pytest.mark.parametrize("mode_i", [0, 1, 2])
@pytest.mark.parametrize("pad", PADS)
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_4d(opset, mode_i, pad, align, rng):
    x = random_array(rng, (2, 3, 5, 7))
    grid = grid_of(rng, (2, 4, 6, 2))
    check(x, grid, opset, {"mode": MODES[opset][mode_i], "padding_mode": pad,
                           "align_corners": align})


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("pad", PADS)
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_5d(mode, pad, align, rng):
    x = random_array(rng, (2, 2, 3, 4, 5))
    grid = grid_of(rng, (2, 3, 2, 4, 3))
    check(x, grid, 20, {"mode": mode, "padding_mode": pad, "align_corners": align})


@pytest.mark.parametrize("pad", PADS)
@pytest.mark.parametrize("mode_i", [0, 1, 2])
def test_grid_sample_far_outside(pad, mode_i, rng):
    # Coordinates several image sizes away: reflection folds them back several times.
    x = random_array(rng, (1, 2, 4, 3))
    grid = grid_of(rng, (1, 8, 8, 2), spread=7.0)
    check(x, grid, 20, {"mode": MODES[20][mode_i], "padding_mode": pad})


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("pad", PADS)
def test_grid_sample_nearest_half_pixels(align, pad, rng):
    # Grid values that map to exact half pixels: rounded half to even, as ORT (std::nearbyint).
    x = random_array(rng, (1, 1, 6, 6))
    h = 6
    if align:  # coord = (g + 1) / 2 * 5 = k + 0.5  ->  g = (2k + 1) / 5 - 1
        vals = [(2 * k + 1) / 5 - 1 for k in range(-1, 6)]
    else:  # coord = ((g + 1) * 6 - 1) / 2 = k + 0.5  ->  g = (2k + 2) / 6 - 1
        vals = [(2 * k + 2) / h - 1 for k in range(-1, 6)]
    v = np.array(vals, np.float32)
    grid = np.stack(np.meshgrid(v, v[::-1]), axis=-1)[None].astype(np.float32)
    check(x, grid, 20, {"mode": "nearest", "padding_mode": pad, "align_corners": align})


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (1, 2, 1, 5), (3, 1, 4, 1)], ids=str)
@pytest.mark.parametrize("pad", PADS)
def test_grid_sample_unit_dims(shape, pad, rng):
    x = random_array(rng, shape)
    grid = grid_of(rng, (shape[0], 3, 2, 2))
    for mode in MODES[20]:
        check(x, grid, 20, {"mode": mode, "padding_mode": pad})


@pytest.mark.parametrize("x_shape,g_shape", [((0, 2, 3, 3), (0, 2, 2, 2)),
                                             ((2, 0, 3, 3), (2, 2, 2, 2)),
                                             ((2, 3, 3, 3), (2, 0, 4, 2))], ids=str)
def test_grid_sample_empty(x_shape, g_shape, rng):
    x = random_array(rng, x_shape)
    grid = grid_of(rng, g_shape)
    for mode in MODES[20]:
        check(x, grid, 20, {"mode": mode})


def test_grid_sample_default_attrs(rng):
    x = random_array(rng, (2, 3, 6, 4))
    grid = grid_of(rng, (2, 5, 5, 2))
    check(x, grid, 16, {})
    check(x, grid, 20, {})


def test_grid_sample_identity_grid(rng):
    # align_corners with a grid of the pixel centres reproduces the image (bilinear and cubic).
    x = random_array(rng, (1, 2, 5, 4))
    gy, gx = np.meshgrid(np.linspace(-1, 1, 5), np.linspace(-1, 1, 4), indexing="ij")
    grid = np.stack([gx, gy], -1)[None].astype(np.float32)
    for mode in MODES[20]:
        check(x, grid, 20, {"mode": mode, "align_corners": 1})


def test_grid_sample_batch_mismatch_raises_like_cpu(rng):
    node = helper.make_node("GridSample", ["x", "grid"], ["out0"], name="node")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2, 4, 4]),
                      helper.make_tensor_value_info("grid", TensorProto.FLOAT, [None, 3, 3, 2])],
        [helper.make_tensor_value_info("out0", TensorProto.FLOAT, None)])
    model = make_model(graph, opset=20, check=False)
    x = random_array(rng, (2, 2, 4, 4))
    good = {"x": x, "grid": grid_of(rng, (2, 3, 3, 2))}
    bad = {"x": x, "grid": grid_of(rng, (3, 3, 3, 2))}
    check_raises_like_cpu(model, bad, good, match="batch", atol=1e-5)


def test_grid_sample_empty_image_raises_like_cpu(rng):
    node = helper.make_node("GridSample", ["x", "grid"], ["out0"], name="node")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, None, 3]),
                      helper.make_tensor_value_info("grid", TensorProto.FLOAT, [1, 2, 2, 2])],
        [helper.make_tensor_value_info("out0", TensorProto.FLOAT, None)])
    model = make_model(graph, opset=20, check=False)
    grid = grid_of(rng, (1, 2, 2, 2))
    check_raises_like_cpu(model, {"x": random_array(rng, (1, 2, 0, 3)), "grid": grid},
                          {"x": random_array(rng, (1, 2, 4, 3)), "grid": grid},
                          match="non-empty", atol=1e-5)


def test_grid_sample_refusals(rng):
    m = gs_model((1, 1, 2, 3, 3), (1, 2, 2, 2, 3), 20, {"mode": "cubic"})
    assert "4-D only" in refusal(m, "GridSample")
    m = gs_model((1, 1, 1, 3), (1, 2, 2, 2), 20, {"padding_mode": "reflection",
                                                  "align_corners": 1})
    assert "out of bounds" in refusal(m, "GridSample")
    m = gs_model((1, 1, 3, 3), (1, 2, 2, 2), 20, {}, dtype=TensorProto.DOUBLE)
    assert "float32 only" in refusal(m, "GridSample")
