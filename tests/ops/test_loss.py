"""Loss family: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss run on the EP and match ORT
CPU (which runs ONNX's function bodies)."""

import numpy as np
import pytest

from opcheck import check_error_on_ep, check_on_ep, refusal, single_node_model
from ort_raises import check_raises_like_cpu
from ortmlx.testing import random_array, run_cpu

OPS = ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"]
SHAPES = [(3, 5), (2, 4, 3), (2, 3, 2, 4), (1, 1), (4, 2, 1, 1, 2)]


def _targets(rng, shape, dtype=np.int64, ignore=None):
    n, c, *rest = shape
    t = rng.integers(-c, c, size=(n, *rest)).astype(dtype)  # negative ones count from the end
    if ignore is not None and t.size:
        t.flat[rng.random(t.size) < 0.3] = ignore
    return t


def _model(op, x, t, w, attrs, opset, n_out=1):
    inputs = {"x": x, "t": t}
    if w is not None:
        inputs["w"] = w
    return single_node_model(op, inputs, attrs=attrs, opset=opset, n_outputs=n_out)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True], ids=["", "weight"])
@pytest.mark.parametrize("ignore", [None, 1, -1], ids=["", "ignore1", "ignore-1"])
def test_loss(op, shape, reduction, weighted, ignore, rng):
    x = random_array(rng, shape, low=-3, high=1)
    t = _targets(rng, shape, ignore=ignore)
    w = random_array(rng, (shape[1],), low=0.1, high=2) if weighted else None
    attrs = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    feeds = {"x": x, "t": t} | ({"w": w} if weighted else {})
    check_on_ep(_model(op, x, t, w, attrs, 13), feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("opset", [12, 13, 22])
@pytest.mark.parametrize("tdtype", [np.int32, np.int64])
def test_loss_opsets_and_target_types(op, opset, tdtype, rng):
    x = random_array(rng, (3, 4, 2), low=-3, high=1)
    t = _targets(rng, (3, 4, 2), tdtype, ignore=2)
    w = random_array(rng, (4,), low=0.1, high=2)
    check_on_ep(_model(op, x, t, w, {"ignore_index": 2}, opset), {"x": x, "t": t, "w": w},
                rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_softmax_cross_entropy_log_prob_output(reduction, rng):
    x = random_array(rng, (2, 5, 3), low=-4, high=4)
    t = _targets(rng, (2, 5, 3))
    model = _model("SoftmaxCrossEntropyLoss", x, t, None, {"reduction": reduction}, 13, n_out=2)
    check_on_ep(model, {"x": x, "t": t}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("weighted", [False, True])
def test_every_target_ignored_gives_nan_mean(op, weighted, rng):
    x = random_array(rng, (3, 4))
    t = np.full((3,), 7, np.int64)
    w = random_array(rng, (4,), low=0.1, high=2) if weighted else None
    feeds = {"x": x, "t": t} | ({"w": w} if weighted else {})
    check_on_ep(_model(op, x, t, w, {"ignore_index": 7}, 13), feeds)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_empty_batch(reduction, weighted, rng):
    x = np.zeros((0, 3), np.float32)
    t = np.zeros((0,), np.int64)
    w = random_array(rng, (3,), low=0.1, high=2) if weighted else None
    feeds = {"x": x, "t": t} | ({"w": w} if weighted else {})
    check_on_ep(_model("NegativeLogLikelihoodLoss", x, t, w, {"reduction": reduction}, 13), feeds)


def test_softmax_cross_entropy_empty_scores_fail_like_ort(rng):
    """The function body reshapes the scores to [N, C, -1]: ORT rejects zero elements there, so
    does the EP (naming the node)."""
    x = np.zeros((0, 3), np.float32)
    t = np.zeros((0,), np.int64)
    model = _model("SoftmaxCrossEntropyLoss", x, t, None, {}, 13)
    with pytest.raises(Exception):
        run_cpu(model, {"x": x, "t": t})
    check_error_on_ep(model, {"x": x, "t": t}, "no elements")


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_softmax_cross_entropy_empty_spatial_dims(reduction):
    x = np.zeros((2, 3, 0), np.float32)
    t = np.zeros((2, 0), np.int64)
    model = _model("SoftmaxCrossEntropyLoss", x, t, None, {"reduction": reduction}, 13, n_out=2)
    check_on_ep(model, {"x": x, "t": t})


def test_loss_special_values():
    x = np.array([[np.nan, 1, 2], [np.inf, 0, -1], [-np.inf, 3, 1e30]], np.float32)
    t = np.array([1, 1, 2], np.int64)
    for op in OPS:
        check_on_ep(_model(op, x, t, None, {"reduction": "none"}, 13), {"x": x, "t": t})
    # A NaN score in the class an ignored target would have read stays out of the loss.
    t = np.array([0, 1, 0], np.int64)
    check_on_ep(_model("NegativeLogLikelihoodLoss", x, t, None, {"ignore_index": 0}, 13),
                {"x": x, "t": t})


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("bad_target", [4, -5, 1 << 40])
def test_out_of_range_target_raises_like_ort(op, bad_target, rng):
    x = random_array(rng, (3, 4))
    good = np.array([0, 3, -4], np.int64)
    bad = np.array([0, bad_target, 1], np.int64)
    model = _model(op, x, good, None, {"ignore_index": 2}, 13)
    check_raises_like_cpu(model, {"x": x, "t": bad}, {"x": x, "t": good},
                          match=r"target out of range.*\[-4,3\]", rtol=1e-5, atol=1e-5)


def test_out_of_range_ignore_index_is_not_an_error(rng):
    x = random_array(rng, (3, 4))
    t = np.array([0, -100, 3], np.int64)
    model = _model("NegativeLogLikelihoodLoss", x, t, None, {"ignore_index": -100}, 13)
    check_on_ep(model, {"x": x, "t": t})


def test_refusals(rng):
    x = random_array(rng, (3, 4)).astype(np.float16)
    t = np.zeros((3,), np.int64)
    assert "float32 scores only" in refusal(
        _model("NegativeLogLikelihoodLoss", x, t, None, {}, 13), "NegativeLogLikelihoodLoss")
