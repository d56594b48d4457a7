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


@pytest.mark.parametrize("size", [1001, 2**31 - 1])
def test_lrn_size_beyond_channels_matches_cpu(size, rng):
    from isolated import check_hostile, loose_model

    # Window offsets beyond the channel count only reach zeros: clamped, not unrolled (size was
    # narrowed to int and unrolled one slice per offset).
    model = loose_model("LRN", [("x", np.float32, [1, 5, 3, 3])],
                        {"size": size, "alpha": 0.5, "beta": 0.75, "bias": 1.0})
    feeds = {"x": random_array(rng, (1, 5, 3, 3))}
    if size < 2**20:
        r = check_hostile(model, feeds, op_type="LRN")
    else:  # ORT's CPU EP fails to allocate its window here; the EP's answer is still the sum
        r = check_hostile(model, feeds, op_type="LRN", cpu=False)
        assert r["error"] is None, r["error"]
        # Checked against float64 (a documented leniency, fuzz seed 13 o47_187): every window
        # holds all 5 channels.
        x = feeds["x"].astype(np.float64)
        sq = np.broadcast_to((x ** 2).sum(axis=1, keepdims=True), x.shape)
        want = x / (1.0 + 0.5 / size * sq) ** 0.75
        np.testing.assert_allclose(r["outputs"][0], want, rtol=1e-5, atol=1e-6)
    assert "node" in r["executed"]


@pytest.mark.parametrize("size", [2**32 + 1, 2**63 - 1])
def test_lrn_refuses_size_beyond_int32(size, rng):
    from isolated import check_hostile, loose_model

    # 2^32 + 1 was narrowed to 1: a different model. ORT's CPU EP raises for these.
    model = loose_model("LRN", [("x", np.float32, [1, 5, 3, 3])],
                        {"size": size, "alpha": 0.5, "beta": 0.75, "bias": 1.0})
    check_hostile(model, {"x": random_array(rng, (1, 5, 3, 3))}, op_type="LRN",
                  refused="outside [")


@pytest.mark.parametrize("lens", [[2, 1, 0], [-1, 1, 1], [2**32 + 1, 1, 1], [-(2**63), 0, 1]])
def test_reverse_sequence_lengths_out_of_range_raise_like_cpu(lens, rng):
    from isolated import check_hostile, loose_model

    # Lengths outside [0, steps] raise in ORT (2^32 + 1 was narrowed to 1 and reversed nothing);
    # the check runs inside the graph, and a good run follows in the same session.
    model = loose_model("ReverseSequence", [("x", np.float32, [1, 3]), ("lens", np.int64, [3])],
                        {"batch_axis": 1, "time_axis": 0})
    x = random_array(rng, (1, 3))
    check_hostile(model, {"x": x, "lens": np.array(lens, np.int64)},
                  {"x": x, "lens": np.array([1, 0, 1], np.int64)}, op_type="ReverseSequence",
                  error="sequence_lens")


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


@pytest.mark.parametrize("opset", [1, 12])
def test_lrn_old_opsets(opset, rng):
    x = random_array(rng, (2, 6, 4, 5))
    attrs = {"size": 3, "alpha": 2e-3, "beta": 0.6, "bias": 1.5}
    check_on_ep(single_node_model("LRN", {"x": x}, attrs=attrs, opset=opset), {"x": x},
                rtol=1e-5, atol=1e-6)


def test_lrn_unknown_rank(rng):
    from opcheck import check_error_on_ep, drop_input_ranks

    x = random_array(rng, (2, 6, 4, 5))
    model = drop_input_ranks(single_node_model("LRN", {"x": x}, attrs={"size": 3}))
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-6)
    check_error_on_ep(model, {"x": random_array(rng, (2, 6, 4))}, "4-D")


def test_mvn_opset_9(rng):
    x = random_array(rng, (2, 3, 4, 5))
    check_on_ep(single_node_model("MeanVarianceNormalization", {"x": x}, opset=9), {"x": x},
                rtol=1e-5, atol=1e-5)
    check_on_ep(single_node_model("MeanVarianceNormalization", {"x": x}, attrs={"axes": [1, 3]},
                                  opset=9), {"x": x}, rtol=1e-5, atol=1e-5)
