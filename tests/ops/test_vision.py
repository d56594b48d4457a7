"""Vision family: CenterCropPad runs on the EP and matches ORT CPU (which runs ONNX's function
body)."""

import numpy as np
import pytest

from opcheck import check_on_ep, single_node_model
from ort_raises import dynamic_dims
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
