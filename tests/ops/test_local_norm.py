"""LRN, MeanVarianceNormalization, ReverseSequence on the EP vs ORT CPU."""

import numpy as np
import pytest

from opcheck import check_on_ep, refusal, single_node_model
from ortmlx.testing import EpRun, random_array


@pytest.mark.parametrize("size", [1, 3, 5])
@pytest.mark.parametrize("shape", [(2, 5, 4, 3), (1, 7, 3, 1), (1, 1, 2, 2), (2, 6, 3, 2)], ids=str)
def test_lrn(size, shape, rng):
    x = random_array(rng, shape)
    attrs = {"size": size, "alpha": 0.02, "beta": 0.8, "bias": 1.5}
    check_on_ep(single_node_model("LRN", {"x": x}, attrs=attrs), {"x": x}, rtol=1e-5, atol=1e-6)


def test_lrn_defaults(rng):
    x = random_array(rng, (1, 4, 3, 3))
    check_on_ep(single_node_model("LRN", {"x": x}, attrs={"size": 3}), {"x": x},
                rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axes", [[0, 2, 3], [2, 3], [1], [-1]], ids=str)
def test_mvn(axes, rng):
    x = random_array(rng, (2, 3, 4, 5))
    attrs = {} if axes is None else {"axes": axes}
    check_on_ep(single_node_model("MeanVarianceNormalization", {"x": x}, attrs=attrs), {"x": x},
                rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch_axis,time_axis", [(1, 0), (0, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("extra", [(), (3,), (2, 3)], ids=str)
def test_reverse_sequence(batch_axis, time_axis, dtype, extra, rng):
    batch, steps = 4, 5
    shape = [0, 0, *extra]
    shape[batch_axis], shape[time_axis] = batch, steps
    x = random_array(rng, tuple(shape), dtype)
    lens = np.array([1, 5, 3, 0][:batch], dtype=np.int64)
    lens[3] = 2
    attrs = {"batch_axis": batch_axis, "time_axis": time_axis}
    model = single_node_model("ReverseSequence", {"x": x, "lens": lens}, attrs=attrs)
    check_on_ep(model, {"x": x, "lens": lens})


@pytest.mark.parametrize("bad", [6, -1, 1 << 40])
def test_reverse_sequence_constant_length_out_of_range_is_refused(bad, rng):
    """ORT raises on a length outside [0, time]; constant lengths are checked at claim time
    (the translation would clip them)."""
    x = random_array(rng, (5, 3))
    lens = np.array([2, bad, 1], np.int64)
    model = single_node_model("ReverseSequence", {"x": x, "lens": lens},
                              initializers={"lens": lens}, attrs={"batch_axis": 1, "time_axis": 0})
    assert "outside [0, 5]" in refusal(model, "ReverseSequence")


def test_reverse_sequence_constant_lengths_in_range_run(rng):
    x = random_array(rng, (5, 3))
    lens = np.array([5, 0, 3], np.int64)
    model = single_node_model("ReverseSequence", {"x": x, "lens": lens},
                              initializers={"lens": lens}, attrs={"batch_axis": 1, "time_axis": 0})
    check_on_ep(model, {"x": x})


@pytest.mark.parametrize("bad", [6, -1, 1 << 40])
def test_reverse_sequence_runtime_length_out_of_range_raises(bad, rng):
    """Lengths fed at run time: the run raises like ORT's, and the session stays usable."""
    x = random_array(rng, (5, 3))
    model = single_node_model("ReverseSequence", {"x": x, "lens": np.zeros(3, np.int64)},
                              attrs={"batch_axis": 1, "time_axis": 0})
    run = EpRun(model, strict=True)
    try:
        with pytest.raises(Exception, match="sequence_lens values must be within"):
            run.run({"x": x, "lens": np.array([2, bad, 1], np.int64)})
        good = np.array([5, 0, 3], np.int64)
        got = run.run({"x": x, "lens": good})
    finally:
        run.close()
    want = x.copy()
    for b, n in enumerate(good):
        want[:n, b] = x[:n, b][::-1]
    np.testing.assert_array_equal(got[0], want)
