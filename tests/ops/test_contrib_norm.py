"""SimplifiedLayerNormalization (ORT's default-domain contrib op) and com.microsoft
Skip(Simplified)LayerNormalization: on the EP, compared with ORT's CPU kernels."""

import numpy as np
import pytest

from contrib_model import contrib_model
from opcheck import check_on_ep, refusal
from ortmlx.testing import random_array


def feeds_of(d):
    return {k: v for k, v in d.items() if v is not None}


# ---------------------------------------------------------------- SimplifiedLayerNormalization

@pytest.mark.parametrize("case", [((2, 5, 16), -1, (16,)), ((3, 7), -1, (7,)),
                                  ((2, 3, 8), 1, (3, 8)), ((1, 1, 1), -1, (1,)),
                                  ((4, 33), 1, (33,))], ids=str)
@pytest.mark.parametrize("with_inv", [False, True])
def test_simplified_layer_norm(case, with_inv, rng):
    shape, axis, s_shape = case
    ins = {"x": random_array(rng, shape), "scale": random_array(rng, s_shape)}
    outs = ("out0", "out1") if with_inv else ("out0",)
    model = contrib_model("SimplifiedLayerNormalization", ins, {"axis": axis, "epsilon": 1e-6},
                          outputs=outs, domain="", opset=17)
    check_on_ep(model, ins, rtol=1e-5, atol=1e-5)


def test_simplified_layer_norm_float16(rng):
    ins = {"x": random_array(rng, (2, 6, 32), np.float16),
           "scale": random_array(rng, (32,), np.float16)}
    model = contrib_model("SimplifiedLayerNormalization", ins, domain="", opset=17)
    check_on_ep(model, ins, rtol=2e-3, atol=2e-3)


def test_simplified_layer_norm_constant_scale(rng):
    x = random_array(rng, (3, 4, 24))
    scale = random_array(rng, (24,))
    model = contrib_model("SimplifiedLayerNormalization", {"x": x, "scale": scale},
                          initializers={"scale": scale}, domain="", opset=17)
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_simplified_layer_norm_huge_value_matches_float64(rng):
    """A row holding 1e30: ORT CPU's float32 mean square overflows and every output is 0; the EP
    scales the row first and matches float64 (x / rms = sqrt(48) at the huge value)."""
    from ortmlx.testing import EpRun, assert_ran_on_ep

    x = random_array(rng, (3, 2, 4, 2))
    x[1, 1, 1, 1] = 1e30
    scale = random_array(rng, (3, 2, 4, 2))
    model = contrib_model("SimplifiedLayerNormalization", {"x": x, "scale": scale}, {"axis": 0},
                          domain="", opset=17)
    run = EpRun(model, strict=True)
    try:
        got = run.run({"x": x, "scale": scale})[0]
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    xd = x.astype(np.float64)
    want = xd / np.sqrt(np.mean(xd * xd) + 1e-5) * scale
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert abs(got[1, 1, 1, 1]) > 1.0


# ---------------------------------------------------------------- SkipLayerNormalization

SKIP_SHAPES = [((2, 5, 16), (2, 5, 16)), ((2, 5, 16), (1, 5, 16)), ((2, 5, 16), (5, 16)),
               ((1, 1, 8), (1, 1, 8)), ((3, 7, 33), (3, 7, 33)), ((6, 16), (6, 16))]


@pytest.mark.parametrize("shapes", SKIP_SHAPES, ids=str)
@pytest.mark.parametrize("beta,bias", [(True, True), (False, False), (True, False), (False, True)])
def test_skip_layer_norm(shapes, beta, bias, rng):
    x_shape, s_shape = shapes
    if len(x_shape) == 2 and len(s_shape) != 2:
        pytest.skip("n/a")
    h = x_shape[-1]
    ins = {"x": random_array(rng, x_shape), "skip": random_array(rng, s_shape),
           "gamma": random_array(rng, (h,)),
           "beta": random_array(rng, (h,)) if beta else None,
           "bias": random_array(rng, (h,)) if bias else None}
    model = contrib_model("SkipLayerNormalization", ins, {"epsilon": 1e-5},
                          outputs=("out0", "", "", "out3"))
    check_on_ep(model, feeds_of(ins), rtol=1e-5, atol=1e-5)


def test_skip_layer_norm_only_output(rng):
    ins = {"x": random_array(rng, (2, 3, 8)), "skip": random_array(rng, (2, 3, 8)),
           "gamma": random_array(rng, (8,))}
    check_on_ep(contrib_model("SkipLayerNormalization", ins), ins, rtol=1e-5, atol=1e-5)


def test_skip_layer_norm_mean_inv_std_outputs(rng):
    ins = {"x": random_array(rng, (2, 3, 8)), "skip": random_array(rng, (2, 3, 8)),
           "gamma": random_array(rng, (8,)), "beta": random_array(rng, (8,))}
    model = contrib_model("SkipLayerNormalization", ins, outputs=("out0", "out1", "out2", "out3"))
    check_on_ep(model, ins, rtol=1e-5, atol=1e-5)


def test_skip_layer_norm_float16(rng):
    ins = {"x": random_array(rng, (2, 4, 32), np.float16),
           "skip": random_array(rng, (2, 4, 32), np.float16),
           "gamma": random_array(rng, (32,), np.float16),
           "beta": random_array(rng, (32,), np.float16),
           "bias": random_array(rng, (32,), np.float16)}
    model = contrib_model("SkipLayerNormalization", ins, outputs=("out0", "", "", "out3"))
    check_on_ep(model, ins, rtol=2e-3, atol=3e-3)


# ---------------------------------------------------------------- SkipSimplifiedLayerNormalization

@pytest.mark.parametrize("shapes", SKIP_SHAPES, ids=str)
@pytest.mark.parametrize("bias", [True, False])
def test_skip_simplified_layer_norm(shapes, bias, rng):
    x_shape, s_shape = shapes
    h = x_shape[-1]
    ins = {"x": random_array(rng, x_shape), "skip": random_array(rng, s_shape),
           "gamma": random_array(rng, (h,)), "bias": random_array(rng, (h,)) if bias else None}
    model = contrib_model("SkipSimplifiedLayerNormalization", ins, {"epsilon": 1e-6},
                          outputs=("out0", "", "", "out3"))
    check_on_ep(model, feeds_of(ins), rtol=1e-5, atol=1e-5)


def test_skip_simplified_layer_norm_inv_std_output(rng):
    ins = {"x": random_array(rng, (2, 3, 8)), "skip": random_array(rng, (2, 3, 8)),
           "gamma": random_array(rng, (8,))}
    model = contrib_model("SkipSimplifiedLayerNormalization", ins, outputs=("out0", "", "out2"))
    check_on_ep(model, ins, rtol=1e-5, atol=1e-5)


def test_skip_simplified_layer_norm_float16(rng):
    ins = {"x": random_array(rng, (2, 4, 32), np.float16),
           "skip": random_array(rng, (2, 4, 32), np.float16),
           "gamma": random_array(rng, (32,), np.float16)}
    model = contrib_model("SkipSimplifiedLayerNormalization", ins, outputs=("out0", "", "", "out3"))
    check_on_ep(model, ins, rtol=2e-3, atol=3e-3)


def test_skip_simplified_mean_output_is_refused(rng):
    ins = {"x": random_array(rng, (2, 3, 8)), "skip": random_array(rng, (2, 3, 8)),
           "gamma": random_array(rng, (8,))}
    model = contrib_model("SkipSimplifiedLayerNormalization", ins, outputs=("out0", "out1"))
    reason = refusal(model, "com.microsoft.SkipSimplifiedLayerNormalization")
    assert reason and "mean" in reason
