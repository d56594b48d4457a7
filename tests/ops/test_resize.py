"""Resize (nearest / linear / cubic; scales or sizes constant or fed at run time), DepthToSpace,
SpaceToDepth on the EP vs ORT CPU."""

import numpy as np
import pytest

from opcheck import (check_error_on_ep, check_on_ep, check_runs_on_ep, refusal,
                     single_node_model)
from ortmlx.testing import random_array, run_cpu

CTMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def resize_model(x, attrs, scales=None, sizes=None, opset=19, empty_scales=False):
    if scales is not None:
        scales = np.asarray(scales, np.float32)
        return single_node_model("Resize", {"x": x, "roi": None, "scales": scales}, attrs=attrs,
                                 initializers={"scales": scales}, opset=opset)
    sizes = np.asarray(sizes, np.int64)
    if empty_scales:
        e = np.zeros((0,), np.float32)
        return single_node_model("Resize", {"x": x, "roi": e, "scales": e.copy(), "sizes": sizes},
                                 attrs=attrs, initializers={"roi": e, "scales": e.copy(),
                                                            "sizes": sizes}, opset=opset)
    return single_node_model("Resize", {"x": x, "roi": None, "scales": None, "sizes": sizes},
                             attrs=attrs, initializers={"sizes": sizes}, opset=opset)


NEAREST_SCALES = [[1, 1, 2, 3], [1, 1, 0.5, 0.6], [1, 1, 1.7, 0.8], [1, 1, 3, 1]]


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("nm", NEAREST_MODES)
@pytest.mark.parametrize("scales", NEAREST_SCALES, ids=str)
def test_resize_nearest_scales(ctm, nm, scales, rng):
    if ctm == "half_pixel_symmetric":
        pytest.skip("refused for nearest (see test_resize_refusals)")
    x = random_array(rng, (2, 3, 5, 7))
    model = resize_model(x, {"mode": "nearest", "coordinate_transformation_mode": ctm,
                             "nearest_mode": nm}, scales=scales)
    check_on_ep(model, {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("nm", NEAREST_MODES)
@pytest.mark.parametrize("sizes", [[2, 3, 9, 4], [2, 3, 1, 13], [2, 3, 5, 7]], ids=str)
def test_resize_nearest_sizes(ctm, nm, sizes, rng):
    if ctm == "half_pixel_symmetric":
        pytest.skip("refused for nearest (see test_resize_refusals)")
    x = random_array(rng, (2, 3, 5, 7))
    model = resize_model(x, {"mode": "nearest", "coordinate_transformation_mode": ctm,
                             "nearest_mode": nm}, sizes=sizes)
    check_on_ep(model, {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
def test_resize_nearest_integers_and_other_ranks(dtype, rng):
    x = random_array(rng, (2, 5, 6), dtype)
    check_on_ep(resize_model(x, {"mode": "nearest"}, scales=[1, 2, 0.5]), {"x": x})
    x = random_array(rng, (7,), dtype)
    check_on_ep(resize_model(x, {"mode": "nearest"}, sizes=[11]), {"x": x})


def test_resize_empty_scales_next_to_sizes(rng):
    x = random_array(rng, (1, 2, 4, 5))
    check_on_ep(resize_model(x, {"mode": "linear"}, sizes=[1, 2, 7, 3], empty_scales=True),
                {"x": x}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 0.6], [1, 1, 1.7, 0.8]], ids=str)
def test_resize_linear_scales(ctm, scales, rng):
    x = random_array(rng, (2, 3, 5, 7))
    model = resize_model(x, {"mode": "linear", "coordinate_transformation_mode": ctm},
                         scales=scales)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("sizes", [[2, 3, 9, 4], [2, 3, 1, 13]], ids=str)
def test_resize_linear_sizes(ctm, sizes, rng):
    x = random_array(rng, (2, 3, 5, 7))
    model = resize_model(x, {"mode": "linear", "coordinate_transformation_mode": ctm},
                         sizes=sizes)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-6)


def test_resize_linear_2d_and_trilinear(rng):
    x = random_array(rng, (5, 6))
    check_on_ep(resize_model(x, {"mode": "linear"}, scales=[1.6, 0.5]), {"x": x},
                rtol=1e-5, atol=1e-6)
    x = random_array(rng, (1, 2, 3, 4, 5))
    check_on_ep(resize_model(x, {"mode": "linear"}, scales=[1, 1, 2, 1.5, 0.8]), {"x": x},
                rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("a", [-0.75, -0.5])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.5, 0.6]], ids=str)
def test_resize_cubic(ctm, exclude, a, scales, rng):
    x = random_array(rng, (1, 2, 6, 7))
    model = resize_model(x, {"mode": "cubic", "coordinate_transformation_mode": ctm,
                             "exclude_outside": exclude, "cubic_coeff_a": a}, scales=scales)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_resize_opset_13(rng):
    x = random_array(rng, (1, 2, 4, 5))
    check_on_ep(resize_model(x, {"mode": "linear"}, scales=[1, 1, 2, 2], opset=13), {"x": x},
                rtol=1e-5, atol=1e-6)


def test_resize_refusals(rng):
    x = random_array(rng, (1, 2, 4, 5))
    # Nearest with antialias: the EP leaves it to ORT's CPU EP, which rejects it when the
    # session is created (were it claimed, the session would build).
    from ortmlx.testing import EpRun

    m = resize_model(x, {"mode": "nearest", "antialias": 1}, scales=[1, 1, 0.5, 0.5])
    with pytest.raises(Exception, match="anti-aliasing"):
        EpRun(m).close()
    m = resize_model(x, {"mode": "nearest", "coordinate_transformation_mode": "tf_crop_and_resize"},
                     scales=[1, 1, 2, 2])
    assert "tf_crop_and_resize" in refusal(m, "Resize")
    m = resize_model(x, {"mode": "nearest", "coordinate_transformation_mode": "half_pixel_symmetric"},
                     scales=[1, 1, 0.5, 0.6])
    assert "half_pixel_symmetric" in refusal(m, "Resize")
    m = resize_model(x, {"mode": "nearest", "keep_aspect_ratio_policy": "not_larger"},
                     sizes=[1, 2, 8, 8])
    assert "keep_aspect_ratio_policy" in refusal(m, "Resize")
    # sizes fed at run time with a keep_aspect_ratio_policy other than stretch
    m = runtime_resize_model(x, {"mode": "nearest", "keep_aspect_ratio_policy": "not_larger"},
                             sizes=[1, 2, 8, 8])
    assert "keep_aspect_ratio_policy" in refusal(m, "Resize")


# ---------------------------------------------------------------- scales / sizes at run time

def runtime_resize_model(x, attrs, scales=None, sizes=None, opset=19, empty_scales=False):
    """Resize whose scales or sizes input is a graph input (its value known only at run time;
    `scales`/`sizes` say which input, and sizes its length). Scales have no static shape; sizes
    have their length as shape (ORT's shape inference rejects a sizes input of unknown length
    next to an X of known rank). empty_scales: scales is an empty constant next to sizes."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    from ortmlx.testing import make_model

    names = ["x", "", "scales" if scales is not None or empty_scales else ""]
    inputs = [h.make_tensor_value_info("x", T.FLOAT, list(x.shape))]
    inits = []
    if empty_scales:
        inits.append(onnx.numpy_helper.from_array(np.zeros(0, np.float32), "scales"))
    elif scales is not None:
        inputs.append(h.make_tensor_value_info("scales", T.FLOAT, None))
    if sizes is not None:
        names.append("sizes")
        inputs.append(h.make_tensor_value_info("sizes", T.INT64, [len(sizes)]))
    node = h.make_node("Resize", names, ["out0"], name="node", **attrs)
    y = h.make_tensor_value_info("out0", T.FLOAT, [f"d{i}" for i in range(x.ndim)])
    # check=False: onnx's checker wants a shape on every graph input; ORT takes unknown ranks.
    return make_model(h.make_graph([node], "g", inputs, [y], inits), opset=opset, check=False)


def _feeds(x, scales=None, sizes=None):
    f = {"x": x}
    if scales is not None:
        f["scales"] = np.asarray(scales, np.float32)
    if sizes is not None:
        f["sizes"] = np.asarray(sizes, np.int64)
    return f


@pytest.mark.parametrize("mode,ctm", [("nearest", "asymmetric"), ("nearest", "half_pixel"),
                                      ("linear", "half_pixel"), ("linear", "align_corners"),
                                      ("linear", "pytorch_half_pixel"), ("cubic", "half_pixel"),
                                      ("cubic", "align_corners")])
def test_resize_runtime_scales(mode, ctm, rng):
    # One session, new scales each run: the values are read for every run, never baked in.
    x = random_array(rng, (2, 3, 5, 7))
    runs = [[1, 1, 2, 3], [1, 1, 0.6, 0.6], [1, 1, 1.7, 0.8], [1, 1, 2, 3]]
    m = runtime_resize_model(x, {"mode": mode, "coordinate_transformation_mode": ctm},
                             scales=runs[0])
    check_runs_on_ep(m, [_feeds(x, scales=s) for s in runs], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_runtime_sizes(mode, rng):
    x = random_array(rng, (1, 2, 6, 4))
    runs = [[1, 2, 12, 8], [1, 2, 3, 5], [1, 2, 6, 4], [1, 2, 1, 9]]
    m = runtime_resize_model(x, {"mode": mode}, sizes=runs[0])
    check_runs_on_ep(m, [_feeds(x, sizes=s) for s in runs], rtol=1e-5, atol=1e-5)


def test_resize_runtime_sizes_with_empty_scales_axes_and_old_opsets(rng):
    import onnx

    x = random_array(rng, (1, 2, 6, 4))
    m = runtime_resize_model(x, {"mode": "linear"}, sizes=[1, 2, 9, 5], empty_scales=True)
    check_runs_on_ep(m, [_feeds(x, sizes=[1, 2, 9, 5]), _feeds(x, sizes=[1, 2, 3, 2])])
    m = runtime_resize_model(x, {"mode": "nearest", "axes": [2, 3]}, sizes=[9, 5], opset=18)
    check_runs_on_ep(m, [_feeds(x, sizes=[9, 5]), _feeds(x, sizes=[2, 7])], rtol=0, atol=0)
    for opset in (11, 13):
        m = runtime_resize_model(x, {"mode": "linear"}, scales=[1, 1, 2, 0.5], opset=opset)
        if opset == 11:  # roi is required before opset 13
            m.graph.node[0].input[1] = "roi"
            m.graph.initializer.append(onnx.numpy_helper.from_array(np.zeros(0, np.float32), "roi"))
        check_runs_on_ep(m, [_feeds(x, scales=s) for s in ([1, 1, 2, 0.5], [1, 1, 0.75, 3])])


@pytest.mark.parametrize("shape,sizes", [((0, 1, 4, 4), [0, 1, 8, 8]), ((1, 1, 0, 4), [1, 1, 0, 8]),
                                         ((0, 1, 4, 4), [0, 1, 2, 3])], ids=str)
def test_resize_runtime_sizes_keep_an_empty_dim_empty(shape, sizes, rng):
    # An empty dim sized to 0 counts as scale 1 for ORT (not 0 / 0): the output is empty.
    x = random_array(rng, shape)
    for mode in ("nearest", "linear"):
        m = runtime_resize_model(x, {"mode": mode}, sizes=sizes)
        check_runs_on_ep(m, [_feeds(x, sizes=sizes)], rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_runtime_channels_last_scales(mode, rng):
    # 4-D with the first and last scales 1: ORT's channels-last path; the EP resizes the two
    # middle axes as it resizes any axis.
    x = random_array(rng, (2, 5, 6, 3))
    runs = [[1, 2, 1.5, 1], [1, 1.25, 3, 1]] + ([[1, 0.5, 0.75, 1]] if mode == "linear" else [])
    m = runtime_resize_model(x, {"mode": mode}, scales=runs[0])
    check_runs_on_ep(m, [_feeds(x, scales=s) for s in runs], rtol=1e-5, atol=1e-5)


def test_resize_runtime_sizes_computed_from_shape_compile(rng):
    # sizes = Shape(x) * [1, 1, 2, 2], computed in the fused subgraph: fixed by the shape key,
    # so the plan compiles (no eager run) and follows new input shapes.
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    import onnxruntime as ort

    from ortmlx.testing import EpRun, assert_ran_on_ep, make_model

    g = h.make_graph(
        [h.make_node("Shape", ["x"], ["shp"], name="shape"),
         h.make_node("Mul", ["shp", "two"], ["sz"], name="mul"),
         h.make_node("Resize", ["x", "", "", "sz"], ["y"], name="node", mode="nearest")],
        "g", [h.make_tensor_value_info("x", T.FLOAT, ["n", "c", "h", "w"])],
        [h.make_tensor_value_info("y", T.FLOAT, ["n", "c", "h2", "w2"])],
        [onnx.numpy_helper.from_array(np.array([1, 1, 2, 2], np.int64), "two")])
    m = make_model(g, opset=19)
    # Graph optimizations off: ORT would otherwise fold nothing here, but keep the three nodes
    # as written so that they fuse into one subgraph.
    run = EpRun(m, strict=True, optimization_level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    try:
        for shape in [(1, 2, 3, 4), (2, 1, 5, 2), (1, 2, 3, 4)]:
            x = random_array(rng, shape)
            got = run.run({"x": x})
            np.testing.assert_array_equal(got[0], run_cpu(m, {"x": x})[0])
        rep = assert_ran_on_ep(run, ["shape", "mul", "node"])
        (fused,) = rep.fused.values()
        assert fused["runs"] == 3 and fused["compiled_runs"] == 3 and not fused["eager_only"]
        assert rep.counters().get("compute.eager", 0) == 0, rep.counters()
    finally:
        run.close()


@pytest.mark.parametrize("scales,sizes,match", [
    ([1, 1, 0, 2], None, "greater than 0"),
    ([1, 1, -1, 2], None, "greater than 0"),
    ([1, 1, np.nan, 2], None, "finite"),
    ([1, 1, np.inf, 2], None, "finite"),
    ([2, 2], None, "scales has 2 values"),
    ([], None, "either scales or sizes"),
    (None, [1, 2, 0, 4], "greater than 0"),
    (None, [1, 2, -3, 4], "greater than 0"),
    (None, [1, 2, 8, 0], "greater than 0"),
], ids=str)
def test_resize_runtime_values_raise_like_cpu(scales, sizes, match, rng):
    # Values ORT's kernel rejects: the EP raises too, naming the node, and the session still runs
    # valid values afterwards. (Scales next to sizes, both at run time, is rejected by ORT's
    # shape inference where X's rank is known, which the claim needs; the constant case is below.)
    x = random_array(rng, (1, 2, 4, 5))
    m = runtime_resize_model(x, {"mode": "nearest"}, scales=scales, sizes=sizes)
    bad = _feeds(x, scales, sizes)
    with pytest.raises(Exception):
        run_cpu(m, bad)
    check_error_on_ep(m, bad, match)
    good = _feeds(x, [1, 1, 2, 2] if scales is not None else None,
                  [1, 2, 8, 8] if sizes is not None else None)
    check_runs_on_ep(m, [good], rtol=0, atol=0)


@pytest.mark.parametrize("mode,scales", [("linear", [2, 1, 2, 2]), ("linear", [1, 2, 2, 2]),
                                         ("cubic", [1, 2, 2, 2]), ("cubic", [1, 0.5, 2, 1])])
def test_resize_runtime_unsupported_axes_raise_like_cpu(mode, scales, rng):
    x = random_array(rng, (1, 2, 4, 5))
    m = runtime_resize_model(x, {"mode": mode}, scales=scales)
    with pytest.raises(Exception, match="mode only supports"):
        run_cpu(m, _feeds(x, scales))
    check_error_on_ep(m, _feeds(x, scales), f"'{mode}' mode resizes")


def test_resize_constant_scales_next_to_empty_sizes_raise_like_cpu(rng):
    # ORT's kernel rejects a sizes input next to non-empty scales even when sizes is empty.
    x = random_array(rng, (1, 2, 4, 5))
    e = np.zeros(0, np.int64)
    s = np.array([1, 1, 2, 2], np.float32)
    m = single_node_model("Resize", {"x": x, "roi": None, "scales": s, "sizes": e},
                          attrs={"mode": "nearest"}, initializers={"scales": s, "sizes": e},
                          opset=19)
    with pytest.raises(Exception, match="Only one of scales or sizes"):
        run_cpu(m, {"x": x})
    check_error_on_ep(m, {"x": x}, "only one of scales and sizes")


# ---------------------------------------------------------------- antialias (opset 18+)

AA_SCALES = [[1, 1, 0.5, 0.5], [1, 1, 0.3, 0.75], [1, 1, 0.6, 0.45], [1, 1, 0.7, 2.3],
             [1, 1, 2, 1.5]]


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("scales", AA_SCALES, ids=str)
def test_resize_antialias_scales(mode, ctm, exclude, scales, rng):
    x = random_array(rng, (2, 3, 11, 13))
    model = resize_model(x, {"mode": mode, "antialias": 1, "coordinate_transformation_mode": ctm,
                             "exclude_outside": exclude}, scales=scales)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("sizes", [[1, 2, 4, 5], [1, 2, 7, 3], [1, 2, 1, 13], [1, 2, 10, 1],
                                   [1, 2, 15, 20]], ids=str)
def test_resize_antialias_sizes(mode, ctm, exclude, sizes, rng):
    x = random_array(rng, (1, 2, 12, 9))
    model = resize_model(x, {"mode": mode, "antialias": 1, "coordinate_transformation_mode": ctm,
                             "exclude_outside": exclude}, sizes=sizes)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("a", [-0.5, -0.75, -0.6, -1.0])
@pytest.mark.parametrize("exclude", [0, 1])
def test_resize_antialias_cubic_coeff_a(a, exclude, rng):
    x = random_array(rng, (1, 3, 16, 17))
    model = resize_model(x, {"mode": "cubic", "antialias": 1, "cubic_coeff_a": a,
                             "exclude_outside": exclude}, scales=[1, 1, 0.4, 0.55])
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("shape,sizes", [
    ((1, 1, 1, 9), [1, 1, 1, 4]), ((1, 1, 9, 1), [1, 1, 4, 1]),
    ((1, 1, 1, 9), [1, 1, 3, 2]), ((1, 1, 9, 1), [1, 1, 1, 1]),
    ((1, 9), [1, 4]), ((9, 1), [2, 1]), ((5, 9), [3, 4]),
], ids=str)
def test_resize_antialias_thin_and_2d(mode, shape, sizes, rng):
    x = random_array(rng, shape)
    model = resize_model(x, {"mode": mode, "antialias": 1}, sizes=sizes)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("exclude", [0, 1])
def test_resize_antialias_large_shrink(mode, exclude, rng):
    # Windows of 21 (linear) and 41 (cubic) taps.
    x = random_array(rng, (1, 2, 40, 57))
    model = resize_model(x, {"mode": mode, "antialias": 1, "exclude_outside": exclude},
                         scales=[1, 1, 0.1, 0.13])
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,scales", [((6, 9, 10), [0.5, 0.7, 1.6]),
                                          ((1, 2, 6, 9, 10), [1, 1, 0.4, 1, 0.6])], ids=str)
def test_resize_antialias_trilinear(shape, scales, rng):
    x = random_array(rng, shape)
    model = resize_model(x, {"mode": "linear", "antialias": 1}, scales=scales)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_resize_antialias_axes_and_opset_18(rng):
    x = random_array(rng, (1, 2, 10, 11))
    model = resize_model(x, {"mode": "cubic", "antialias": 1, "axes": [-1, 2]},
                         scales=[0.5, 0.4], opset=18)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("antialias", [0, 1])
@pytest.mark.parametrize("exclude", [2, -1])
def test_resize_exclude_outside_nonzero_means_on(antialias, exclude, rng):
    # ORT's CPU EP reads any non-zero exclude_outside as 1.
    x = random_array(rng, (1, 2, 7, 8))
    model = resize_model(x, {"mode": "cubic", "antialias": antialias, "exclude_outside": exclude},
                         scales=[1, 1, 0.6, 1.5])
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_resize_antialias_dynamic_dims(rng):
    # Spatial dims known only at run time: the weights are built per input shape.
    from isolated import loose_model

    scales = np.array([1, 1, 0.45, 0.6], np.float32)
    model = loose_model("Resize", [("x", np.float32, [1, 2, "h", "w"])],
                        {"mode": "cubic", "antialias": 1},
                        {"roi": np.zeros(0, np.float32), "scales": scales})
    for shape in [(1, 2, 9, 11), (1, 2, 20, 7)]:
        x = random_array(rng, shape)
        check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


def _onnx_antialias_cases():
    import warnings

    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c for c in node.collect_testcases(None)
                if c.name.startswith("test_resize") and "antialias" in c.name]


@pytest.mark.parametrize("case", _onnx_antialias_cases(), ids=lambda c: c.name)
def test_resize_antialias_onnx_cases_with_constant_inputs(case):
    # ONNX's antialias node cases feed scales/sizes as graph inputs, which the claim refuses
    # (the gate runs them on ORT CPU): here as initializers, against ORT CPU and ONNX's outputs.
    import onnx

    from ortmlx.testing import IR_VERSION

    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    model.ir_version = min(model.ir_version, IR_VERSION)
    inputs, expected = ([np.asarray(v) for v in d] for d in case.data_sets[0])
    feeds = {}
    for gi, v in zip(list(model.graph.input), inputs):
        if v.dtype == np.float32 and v.ndim == 4:
            feeds[gi.name] = v
        else:
            model.graph.initializer.append(onnx.numpy_helper.from_array(v, gi.name))
            model.graph.input.remove(gi)
    model.graph.node[0].name = "node"
    got = check_on_ep(model, feeds, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0], expected[0], rtol=case.rtol, atol=case.atol)


def test_resize_antialias_refusals(rng):
    x = random_array(rng, (1, 2, 6, 6)).astype(np.float16)
    m = resize_model(x, {"mode": "linear", "antialias": 1}, scales=[1, 1, 0.5, 0.5])
    assert "antialias: float32" in refusal(m, "Resize")


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 0.5, 0.5, 1], [1, 0.6, 1.5, 1], [1, 2, 3, 1]], ids=str)
def test_resize_channels_last_constant_scales(mode, scales, rng):
    # 4-D with the first and last scales 1: ORT's channels-last path, antialiased or not.
    x = random_array(rng, (2, 6, 7, 3))
    for aa in (0, 1):
        if mode == "cubic" and not aa and min(scales) < 1:
            continue  # ORT rejects it (checked in test_resize_runtime_unsupported_axes...)
        m = resize_model(x, {"mode": mode, "antialias": aa}, scales=scales)
        check_on_ep(m, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape,b", [((2, 8, 3, 5), 2), ((1, 27, 2, 3), 3), ((1, 4, 1, 1), 2)],
                         ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_depth_to_space(mode, shape, b, dtype, rng):
    x = random_array(rng, shape, dtype)
    model = single_node_model("DepthToSpace", {"x": x}, attrs={"blocksize": b, "mode": mode})
    check_on_ep(model, {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("shape,b", [((2, 3, 4, 6), 2), ((1, 2, 6, 9), 3), ((1, 1, 2, 2), 2)],
                         ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_space_to_depth(shape, b, dtype, rng):
    x = random_array(rng, shape, dtype)
    model = single_node_model("SpaceToDepth", {"x": x}, attrs={"blocksize": b})
    check_on_ep(model, {"x": x}, rtol=0, atol=0)


# ---------------------------------------------------------------- hostile int64 values

@pytest.mark.parametrize("op, blocksize", [
    ("DepthToSpace", 65536),       # blocksize^2 wrapped to 0 in int: a division by zero
    ("DepthToSpace", 2**32 + 1),   # wrapped to 1: a different model
    ("SpaceToDepth", 2**32),
    ("SpaceToDepth", 2**32 + 1),
])
def test_block_ops_refuse_blocksize_beyond_int32(op, blocksize, rng):
    from isolated import check_hostile, loose_model

    model = loose_model(op, [("x", np.float32, [1, 4, 2, 2])], {"blocksize": blocksize})
    check_hostile(model, {"x": random_array(rng, (1, 4, 2, 2))}, op_type=op, refused="outside [")


def test_resize_sizes_beyond_int32_refused():
    from isolated import loose_model

    # ORT's CPU EP returns the 2 GiB tensor; MLX dims are int32, so the node stays there.
    sizes = np.array([1, 1, 1, 2**31 + 8], np.int64)
    model = loose_model("Resize", [("x", np.uint8, [1, 1, 1, 2])], {"mode": "nearest"},
                        {"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
                         "sizes": sizes})
    assert "exceeds MLX's int32 dims" in (refusal(model, "Resize") or "")


def test_resize_scales_to_a_dim_beyond_int32_raise_then_run(rng):
    from isolated import check_hostile, loose_model

    # The output dim comes from the live input shape: a clean error at run time (ORT's CPU EP
    # would return a 2 GiB tensor; not computed here), then a good input runs.
    scales = np.array([1, 1, 1, 2**30 + 4], np.float32)
    model = loose_model("Resize", [("x", np.uint8, [1, 1, 1, "w"])], {"mode": "nearest"},
                        {"roi": np.zeros(0, np.float32), "scales": scales})
    bad = {"x": np.array([[[[3, 7]]]], np.uint8)}
    good = {"x": np.zeros((1, 1, 1, 0), np.uint8)}
    check_hostile(model, bad, good, op_type="Resize", error="exceeds MLX's int32 dims", cpu=False)


def test_resize_empty_input_or_output_like_cpu(rng):
    from isolated import check_hostile, loose_model

    # An empty input with a non-empty output raises in ORT; a scale rounding a dim to 0 gives
    # an empty output.
    sizes = np.array([1, 1, 6], np.int64)
    model = loose_model("Resize", [("x", np.float32, [1, 1, "w"])],
                        {"mode": "linear", "coordinate_transformation_mode": "asymmetric"},
                        {"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
                         "sizes": sizes})
    check_hostile(model, {"x": np.zeros((1, 1, 0), np.float32)},
                  {"x": random_array(rng, (1, 1, 3))}, op_type="Resize", error="zero")
    scales = np.array([1, 1, 0.4, 1], np.float32)
    model = loose_model("Resize", [("x", np.float32, [5, 2, 2, 1])],
                        {"mode": "cubic", "coordinate_transformation_mode": "align_corners"},
                        {"roi": np.zeros(0, np.float32), "scales": scales})
    r = check_hostile(model, {"x": random_array(rng, (5, 2, 2, 1))}, op_type="Resize")
    assert r["outputs"][0].shape == (5, 2, 0, 1)


@pytest.mark.parametrize("mode,antialias", [("cubic", 1), ("linear", 0), ("nearest", 0)])
def test_resize_zero_dim_to_non_zero_raises_even_if_output_is_empty(mode, antialias, rng):
    from isolated import check_hostile, loose_model

    # ORT checks each dim: a zero dim sized to 1 raises though the batch of 0 makes the output
    # empty anyway; the EP returned the empty (0, 1, 1, 4) (fuzz seed 20, o42_54).
    model = loose_model("Resize", [("x", np.float32, ["n", 1, "h", 1])],
                        {"mode": mode, "antialias": antialias, "axes": [2, -1]},
                        {"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
                         "sizes": np.array([1, 4], np.int64)}, opset=18)
    check_hostile(model, {"x": np.zeros((0, 1, 0, 1), np.float32)},
                  {"x": random_array(rng, (2, 1, 3, 1))}, op_type="Resize", error="zero")


# ---------------------------------------------------------------- axes (opset 18+)

@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("axes,scales", [([2, 3], [2.0, 0.6]), ([-1], [1.5]), ([3, 2], [2.0, 3.0])],
                         ids=str)
def test_resize_axes_scales(mode, axes, scales, rng):
    x = random_array(rng, (1, 2, 4, 5))
    check_on_ep(resize_model(x, {"mode": mode, "axes": axes}, scales=scales), {"x": x},
                rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("axes,sizes", [([2, 3], [7, 3]), ([-2], [9]), ([1], [5])], ids=str)
def test_resize_axes_sizes(mode, axes, sizes, rng):
    x = random_array(rng, (1, 2, 4, 5))
    check_on_ep(resize_model(x, {"mode": mode, "axes": axes}, sizes=sizes), {"x": x},
                rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [1, 11])
def test_depth_space_old_opsets(opset, rng):
    x = random_array(rng, (2, 8, 3, 4))
    check_on_ep(single_node_model("DepthToSpace", {"x": x}, attrs={"blocksize": 2}, opset=opset),
                {"x": x})
    if opset == 11:
        check_on_ep(single_node_model("DepthToSpace", {"x": x},
                                      attrs={"blocksize": 2, "mode": "CRD"}, opset=11), {"x": x})
    y = random_array(rng, (2, 3, 4, 6))
    check_on_ep(single_node_model("SpaceToDepth", {"x": y}, attrs={"blocksize": 2}, opset=opset),
                {"x": y})


def _resize11(x, attrs, scales=None, sizes=None, opset=11):
    """Opset 11-12 form: roi and scales are required (empty ones stand for absent)."""
    e = np.zeros((0,), np.float32)
    sc = np.asarray(scales, np.float32) if scales is not None else e.copy()
    inputs = {"x": x, "roi": e, "scales": sc}
    inits = {"roi": e, "scales": sc}
    if sizes is not None:
        inputs["sizes"] = inits["sizes"] = np.asarray(sizes, np.int64)
    return single_node_model("Resize", inputs, attrs=attrs, initializers=inits, opset=opset)


@pytest.mark.parametrize("opset", [11, 12])
@pytest.mark.parametrize("attrs,scales,sizes", [
    ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
     [1, 1, 2, 2], None),
    ({"mode": "nearest"}, [1, 1, 0.5, 1.5], None),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, None, [1, 2, 7, 9]),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, [1, 1, 2, 3], None),
    ({"mode": "cubic", "cubic_coeff_a": -0.75}, [1, 1, 2, 2], None),
], ids=str)
def test_resize_opsets_11_12(opset, attrs, scales, sizes, rng):
    x = random_array(rng, (1, 2, 4, 5))
    check_on_ep(_resize11(x, attrs, scales, sizes, opset), {"x": x}, rtol=1e-5, atol=1e-5)


def test_resize_opset_11_tf_half_pixel_for_nn_is_refused(rng):
    x = random_array(rng, (1, 2, 4, 5))
    model = _resize11(x, {"mode": "nearest", "coordinate_transformation_mode":
                          "tf_half_pixel_for_nn"}, [1, 1, 2, 2])
    assert "tf_half_pixel_for_nn" in refusal(model, "Resize")


# ---- Upsample 7-9, Resize 10: asymmetric coordinates, nearest truncates (ceil when shrinking)

def legacy_model(op, x, scales, mode, opset, runtime_scales=False):
    scales = np.asarray(scales, np.float32)
    if op == "Upsample" and opset < 9:
        return single_node_model("Upsample", {"x": x}, attrs={"mode": mode,
                                                              "scales": scales.tolist()},
                                 opset=opset)
    if runtime_scales:
        return single_node_model(op, {"x": x, "scales": scales}, attrs={"mode": mode},
                                 opset=opset, check=False)
    return single_node_model(op, {"x": x, "scales": scales}, attrs={"mode": mode},
                             initializers={"scales": scales}, opset=opset)


LEGACY = [("Upsample", 7), ("Upsample", 8), ("Upsample", 9), ("Resize", 10)]
UP_SCALES = [[1, 1, 2, 2], [1, 1, 2, 3], [1, 1, 1.5, 2.3], [1, 1, 1.1, 1], [2, 1, 1, 1.7],
             [1, 1, 1, 1]]


@pytest.mark.parametrize("op,opset", LEGACY)
@pytest.mark.parametrize("scales", UP_SCALES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int8, np.int32])
def test_legacy_nearest(op, opset, scales, dtype, rng):
    x = random_array(rng, (2, 3, 5, 7), dtype)
    check_on_ep(legacy_model(op, x, scales, "nearest", opset), {"x": x}, rtol=0, atol=0)


@pytest.mark.parametrize("op,opset", LEGACY)
@pytest.mark.parametrize("scales", [s for s in UP_SCALES if s[0] == 1], ids=str)
def test_legacy_linear(op, opset, scales, rng):
    x = random_array(rng, (2, 3, 5, 7))
    check_on_ep(legacy_model(op, x, scales, "linear", opset), {"x": x})


@pytest.mark.parametrize("op,opset", LEGACY)
def test_legacy_other_ranks(op, opset, rng):
    for shape, scales, mode in [((7,), [2.5], "nearest"), ((4, 5), [1.5, 2], "linear"),
                                ((3, 4, 5), [2, 1.5, 1.2], "linear"),
                                ((1, 2, 3, 4, 2), [1, 1, 2, 1.5, 3], "linear"),
                                ((2, 3, 2, 2, 3), [1, 2, 3, 1, 2], "nearest")]:
        x = random_array(rng, shape)
        check_on_ep(legacy_model(op, x, scales, mode, opset), {"x": x})


@pytest.mark.parametrize("scales", [[1, 1, 0.5, 0.6], [1, 1, 0.75, 1.5], [1, 0.4, 2, 0.34]],
                         ids=str)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize10_downsample(scales, mode, rng):
    if mode == "linear" and scales[1] != 1:
        pytest.skip("linear needs the outer scales at 1")
    x = random_array(rng, (2, 3, 7, 9))
    check_on_ep(legacy_model("Resize", x, scales, mode, 10), {"x": x})


@pytest.mark.parametrize("op,opset", [("Upsample", 9), ("Resize", 10)])
def test_legacy_scales_at_run_time(op, opset, rng):
    x = random_array(rng, (1, 2, 3, 4))
    for scales in ([1, 1, 2, 3], [1, 1, 1.5, 1]):
        s = np.asarray(scales, np.float32)
        model = legacy_model(op, x, s, "nearest", opset, runtime_scales=True)
        check_on_ep(model, {"x": x, "scales": s}, rtol=0, atol=0)


def test_legacy_empty_input(rng):
    x = random_array(rng, (2, 0, 3))
    check_on_ep(legacy_model("Upsample", x, [1, 2, 2], "nearest", 9), {"x": x})
    check_on_ep(legacy_model("Resize", x, [1, 0.5, 3], "nearest", 10), {"x": x})


def test_legacy_bad_runtime_scales_raise(rng):
    from isolated import loose_model
    from opcheck import check_error_on_ep

    x = random_array(rng, (1, 2, 3, 4))
    model = loose_model("Upsample", [("x", np.float32, [1, 2, 3, 4]), ("scales", np.float32, ["n"])],
                        {"mode": "nearest"}, opset=9)
    check_error_on_ep(model, {"x": x, "scales": np.array([1, 1, 0.5, 2], np.float32)}, ">= 1")
    check_error_on_ep(model, {"x": x, "scales": np.array([1, 2, 2], np.float32)}, "rank")
    # The session still runs good scales afterwards (checked against ORT CPU).
    check_on_ep(model, {"x": x, "scales": np.array([1, 1, 2, 1.5], np.float32)})


def test_legacy_refusals(rng):
    from isolated import loose_model

    model = loose_model("Upsample", [("x", np.float32, [1, 2, 3, 4])], {"mode": "cubic"},
                        initializers={"scales": np.array([1, 1, 2, 2], np.float32)}, opset=9)
    assert "mode" in (refusal(model, "Upsample") or "")
    xi = random_array(rng, (1, 2, 3, 4), np.uint8)
    assert "linear" in refusal(legacy_model("Resize", xi, [1, 1, 2, 2], "linear", 10), "Resize")
