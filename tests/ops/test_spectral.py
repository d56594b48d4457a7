"""HannWindow, HammingWindow, BlackmanWindow on the EP vs ORT CPU. Both compute ORT's cosine sum
on the host in double with ORT's constants (its truncated pi included); ORT 1.30's wheel rounds
some values to the neighbouring float32 (its compiled cos differs from the C library's in the last
bits of a double): 1e-7 absolute (under one float32 ulp of 1) plus 1e-6 relative."""

import numpy as np
import pytest

import onnx
from onnx import TensorProto, helper

from opcheck import NP_TO_ONNX, check_on_ep, refusal
from ort_raises import check_raises_like_cpu
from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, random_array, run_cpu

WINDOWS = ["HannWindow", "HammingWindow", "BlackmanWindow"]


def tol(op):
    return dict(rtol=1e-6, atol=1e-7)


def window_model(op, size, attrs=None):
    """The size is a graph input: with a constant size ORT folds the node away before any EP
    sees it. The output length is then unknown to ONNX, so the output is typed only."""
    node = helper.make_node(op, ["size"], ["out0"], name="node", **(attrs or {}))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("size", NP_TO_ONNX[size.dtype], [])],
        [helper.make_tensor_value_info("out0", (attrs or {}).get("output_datatype", TensorProto.FLOAT),
                                       None)])
    return make_model(graph, opset=17, check=False)


@pytest.mark.parametrize("op", WINDOWS)
@pytest.mark.parametrize("size", [0, 1, 2, 7, 10, 64, 1001])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_window(op, size, periodic, dtype):
    s = np.array(size, dtype)
    check_on_ep(window_model(op, s, {"periodic": periodic}), {"size": s}, **tol(op))


@pytest.mark.parametrize("op", WINDOWS)
def test_window_size_changes_between_runs(op):
    # The size is read on the host each run (it decides the output shape).
    model = window_model(op, np.array(0, np.int64))
    for size in (9, 4, 9):
        s = np.array(size, np.int64)
        check_on_ep(model, {"size": s}, **tol(op))


@pytest.mark.parametrize("op", WINDOWS)
def test_window_refusals(op):
    s = np.array(8, np.int64)
    m = window_model(op, s, {"output_datatype": 7})
    assert "float32 only" in refusal(m, op)
    m = window_model(op, s, {"output_datatype": 11})
    assert "float32 only" in refusal(m, op)


@pytest.mark.parametrize("op", WINDOWS)
def test_window_negative_size_raises_like_cpu(op):
    s = np.array(-3, np.int64)
    check_raises_like_cpu(window_model(op, s), {"size": s},
                          {"size": np.array(5, np.int64)}, match="negative", **tol(op))


# ---------------------------------------------------------------- DFT

def dft_model(x, attrs, opset, dft_length=None, axis=None):
    """DFT with dft_length and (opset 20) axis as graph inputs when given; outputs typed only
    (their length follows the inputs' values)."""
    names, g_in = ["x"], [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))]
    feeds = {"x": x}
    for name, value in (("dft_length", dft_length), ("axis", axis)):
        if value is None:
            names.append("")
            continue
        names.append(name)
        g_in.append(helper.make_tensor_value_info(name, NP_TO_ONNX[value.dtype], []))
        feeds[name] = value
    while names[-1] == "":
        names.pop()
    node = helper.make_node("DFT", names, ["out0"], name="node", **attrs)
    graph = helper.make_graph([node], "g", g_in,
                              [helper.make_tensor_value_info("out0", TensorProto.FLOAT, None)])
    return make_model(graph, opset=opset, check=False), feeds


# MLX's FFT and ORT's own FFT round differently: 1e-4 relative, and an absolute term of 1e-5 of
# the sum of magnitudes along the axis (the scale a bin's rounding error grows with).
def dft_check(model, feeds, x):
    scale = float(np.abs(x).sum(axis=tuple(range(1, x.ndim - 1))).max())
    check_on_ep(model, feeds, rtol=1e-4, atol=1e-5 * max(scale, 1.0))


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("complex_in", [False, True])
@pytest.mark.parametrize("inverse", [0, 1])
@pytest.mark.parametrize("axis", [1, 2])
@pytest.mark.parametrize("n", [8, 10, 7])
def test_dft(opset, complex_in, inverse, axis, n, rng):
    x = random_array(rng, (2, n, 6, 2 if complex_in else 1))
    if axis == 2:
        x = random_array(rng, (2, 5, n, 2 if complex_in else 1))
    attrs = {"inverse": inverse}
    if opset == 17:
        attrs["axis"] = axis
        model, feeds = dft_model(x, attrs, 17)
    else:
        model, feeds = dft_model(x, attrs, 20, axis=np.array(axis - x.ndim if axis == 2 else axis,
                                                              np.int64))
    dft_check(model, feeds, x)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("n,length", [(8, 8), (10, 16), (9, 5), (6, 7)], ids=str)
def test_dft_onesided_and_length(opset, n, length, rng):
    x = random_array(rng, (3, n, 1))
    for onesided in (0, 1):
        attrs = {"onesided": onesided}
        model, feeds = dft_model(x, attrs, opset, dft_length=np.array(length, np.int64))
        dft_check(model, feeds, x)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("shape", [(0, 4, 3, 2), (2, 4, 0, 1), (0, 6, 1)], ids=str)
@pytest.mark.parametrize("onesided", [0, 1])
def test_dft_empty_batch(opset, shape, onesided):
    # An empty dim beside the signal axis: an empty result, as ORT CPU (the EP raised MLX's
    # "Cannot do a non-empty take from an array with zero elements").
    x = np.zeros(shape, np.float32)
    attrs = {"onesided": onesided} if shape[-1] == 1 else {}
    axis = np.array(1, np.int64) if opset == 20 else None  # opset 20's default is -2
    if opset == 17:
        attrs["axis"] = 1
    model, feeds = dft_model(x, attrs, opset, axis=axis)
    check_on_ep(model, feeds)
    model, feeds = dft_model(x, attrs, opset, dft_length=np.array(5, np.int64), axis=axis)
    check_on_ep(model, feeds)


def test_dft_refusals(rng):
    from opcheck import refusal as why

    x = random_array(rng, (1, 6, 2))
    model, _ = dft_model(x, {"onesided": 1, "inverse": 1}, 20)
    assert "onesided" in why(model, "DFT")
    node = helper.make_node("DFT", ["x"], ["out0"], name="node")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16,
                                                                          [1, 6, 1])],
                              [helper.make_tensor_value_info("out0", TensorProto.FLOAT16, None)])
    assert "float32 only" in why(make_model(graph, opset=20, check=False), "DFT")


# ---------------------------------------------------------------- STFT

def stft_model(x, step, window=None, frame_length=None, attrs=None, const_window=False):
    """STFT with frame_step, window and frame_length as graph inputs (the window an initializer
    when const_window); output typed only (its shape follows the inputs' values)."""
    g_in = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)),
            helper.make_tensor_value_info("step", NP_TO_ONNX[step.dtype], [])]
    feeds, inits, names = {"x": x, "step": step}, [], ["x", "step"]
    if window is None:
        names.append("")
    elif const_window:
        names.append("window")
        inits.append(onnx.numpy_helper.from_array(window, "window"))
    else:
        names.append("window")
        g_in.append(helper.make_tensor_value_info("window", TensorProto.FLOAT, list(window.shape)))
        feeds["window"] = window
    if frame_length is not None:
        names.append("frame_length")
        g_in.append(helper.make_tensor_value_info("frame_length", NP_TO_ONNX[frame_length.dtype], []))
        feeds["frame_length"] = frame_length
    while names[-1] == "":
        names.pop()
    node = helper.make_node("STFT", names, ["out0"], name="node", **(attrs or {}))
    graph = helper.make_graph([node], "g", g_in,
                              [helper.make_tensor_value_info("out0", TensorProto.FLOAT, None)], inits)
    return make_model(graph, opset=17, check=False), feeds


def symbolic_dims(model, dims):
    """The model with the given dims of its graph inputs symbolic ({input name: [dim index]}),
    so one session runs inputs of other sizes (the signal's last dim stays static)."""
    for vi in model.graph.input:
        for j in dims.get(vi.name, []):
            vi.type.tensor_type.shape.dim[j].dim_param = f"{vi.name}_{j}"
    return model


def stft_check(model, feeds, x):
    # As dft_check: the absolute term scales with the largest frame's sum of magnitudes.
    scale = float(np.abs(x).sum(axis=1).max()) if x.size else 1.0
    check_on_ep(model, feeds, rtol=1e-4, atol=1e-5 * max(scale, 1.0))


@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("length,frame,step", [(20, 6, 3), (32, 8, 2), (17, 5, 1), (16, 16, 4),
                                               (21, 1, 1), (30, 7, 40), (64, 16, 5)], ids=str)
@pytest.mark.parametrize("form", ["window", "frame_length", "both", "const_window"])
def test_stft_real(onesided, length, frame, step, form, rng):
    x = random_array(rng, (2, length, 1))
    window = random_array(rng, (frame,)) if form != "frame_length" else None
    flen = np.array(frame, np.int64) if form in ("frame_length", "both") else None
    model, feeds = stft_model(x, np.array(step, np.int64), window, flen, {"onesided": onesided},
                              const_window=form == "const_window")
    stft_check(model, feeds, x)


@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("length,frame,step", [(20, 6, 3), (32, 8, 2), (9, 9, 1)], ids=str)
def test_stft_complex(onesided, length, frame, step, rng):
    x = random_array(rng, (3, length, 2))
    model, feeds = stft_model(x, np.array(step, np.int32), frame_length=np.array(frame, np.int32),
                              attrs={"onesided": onesided})
    stft_check(model, feeds, x)


def test_stft_rank2_signal_default_onesided(rng):
    # ORT takes a [batch, length] signal as real; onesided defaults to 1.
    x = random_array(rng, (2, 25))
    model, feeds = stft_model(x, np.array(4, np.int64), random_array(rng, (10,)))
    stft_check(model, feeds, x)


def test_stft_hann_window_from_graph(rng):
    # The usual spectrogram form: a HannWindow feeding STFT, both on the EP.
    x = random_array(rng, (1, 200, 1))
    nodes = [helper.make_node("HannWindow", ["wsize"], ["window"], name="win"),
             helper.make_node("STFT", ["x", "step", "window"], ["out0"], name="node")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 200, 1]),
                     helper.make_tensor_value_info("step", TensorProto.INT64, []),
                     helper.make_tensor_value_info("wsize", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("out0", TensorProto.FLOAT, None)])
    model = make_model(graph, opset=17, check=False)
    feeds = {"x": x, "step": np.array(10, np.int64), "wsize": np.array(32, np.int64)}
    scale = float(np.abs(x).sum())
    check_on_ep(model, feeds, node_names=("win", "node"), rtol=1e-4, atol=1e-5 * scale)


def test_stft_values_change_between_runs(rng):
    # frame_step and frame_length decide the output shape: read on the host each run.
    x = random_array(rng, (2, 30, 1))
    model, _ = stft_model(x, np.array(1, np.int64), frame_length=np.array(4, np.int64))
    for step, flen in ((3, 8), (5, 4), (3, 8)):
        feeds = {"x": x, "step": np.array(step, np.int64), "frame_length": np.array(flen, np.int64)}
        stft_check(model, feeds, x)


def test_stft_2d_window_like_cpu(rng):
    # Invalid by the spec; ORT's kernel takes the first dim as the size and reads that many values.
    x = random_array(rng, (2, 20, 1))
    model, feeds = stft_model(x, np.array(3, np.int64), random_array(rng, (4, 3)))
    stft_check(model, feeds, x)


def test_stft_empty_batch(rng):
    x = np.zeros((0, 12, 1), np.float32)
    model, feeds = stft_model(x, np.array(2, np.int64), frame_length=np.array(4, np.int64))
    check_on_ep(model, feeds)


# Fuzz seed 158, o32_3: STFT of a (0, 4, 2) signal with frame_length -1. ORT's kernel computes
# the output shape and runs no frame for an empty batch, so a frame_length of 0 or below is valid
# there while the shape has no negative dim: -1 gives 6 frames of (-1 >> 1) + 1 = 0 onesided
# bins. The EP raised "frame_length must be greater than zero".
@pytest.mark.parametrize("shape", [(0, 4, 2), (0, 4, 1), (0, 4), (0, 0, 1)], ids=str)
@pytest.mark.parametrize("flen,step,onesided", [(-1, 1, 1), (-2, 1, 1), (-1, 2, 1), (0, 1, 1),
                                                (0, 3, 0), (4, 1, 1)], ids=str)
def test_stft_empty_batch_with_frame_length_zero_or_below(shape, flen, step, onesided):
    if flen > shape[1]:
        pytest.skip("frame_length beyond the signal raises on both")
    x = np.zeros(shape, np.float32)
    model, feeds = stft_model(x, np.array(step, np.int64), frame_length=np.array(flen, np.int64),
                              attrs={"onesided": onesided})
    check_on_ep(model, feeds)


@pytest.mark.parametrize("flen,onesided", [(-3, 1), (-1, 0), (-2**62, 1), (5, 1)], ids=str)
def test_stft_empty_batch_with_a_negative_output_dim_raises_like_cpu(flen, onesided):
    # ORT's allocator rejects the negative bin count ((-3 >> 1) + 1 = -1; -1 bins two-sided); a
    # frame beyond the signal raises as for a non-empty batch.
    x = np.zeros((0, 4, 1), np.float32)
    model, good = stft_model(x, np.array(1, np.int64), frame_length=np.array(2, np.int64),
                             attrs={"onesided": onesided})
    bad = dict(good, frame_length=np.array(flen, np.int64))
    check_raises_like_cpu(model, bad, good, match="frame_length")


@pytest.mark.parametrize("bad,match", [({"step": 0}, "frame_step"), ({"step": -2}, "frame_step"),
                                       ({"frame_length": 21}, "exceeds"),
                                       ({"frame_length": -3}, "frame_length")], ids=str)
def test_stft_bad_values_raise_like_cpu(bad, match, rng):
    x = random_array(rng, (2, 20, 1))
    model, good = stft_model(x, np.array(3, np.int64), frame_length=np.array(6, np.int64))
    feeds = dict(good)
    for k, v in bad.items():
        feeds[k] = np.array(v, np.int64)
    check_raises_like_cpu(model, feeds, good, match=match, rtol=1e-4, atol=1e-4)


def test_stft_window_length_mismatch_raises_like_cpu(rng):
    x = random_array(rng, (2, 20, 1))
    model, good = stft_model(x, np.array(3, np.int64), random_array(rng, (6,)),
                             np.array(6, np.int64))
    bad = dict(good, frame_length=np.array(5, np.int64))
    check_raises_like_cpu(model, bad, good, match="differs", rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("step", [2**31, 2**40, 2**62], ids=str)
def test_stft_one_frame_with_a_step_beyond_int32(step, rng):
    # A single frame never uses the step: valid at any size (the EP raised "exceeds MLX's int32
    # range" where ORT CPU answers).
    x = random_array(rng, (2, 20, 1))
    model, feeds = stft_model(x, np.array(step, np.int64), frame_length=np.array(6, np.int64))
    stft_check(model, feeds, x)


def test_stft_float32_frame_count_past_the_signal_raises(rng):
    # ORT's frame count, floor(float(length - frame_length) / float(step)) + 1 in float32, rounds
    # up past the signal for a length beyond 2^24: 2^24 + 3 rounds to 2^24 + 4, so step 2 gives
    # 2^23 + 3 frames of 1 sample, the last starting at the signal's length. The EP gathered
    # past the end (a value read out of bounds in the last frame); it now raises, naming the
    # node, and the session keeps working.
    big = np.ones((1, 2**24 + 4, 1), np.float32)
    model, _ = stft_model(big, np.array(2, np.int64), frame_length=np.array(1, np.int64),
                          attrs={"onesided": 0})
    model = symbolic_dims(model, {"x": [0, 1]})
    run = EpRun(model, strict=True)
    try:
        with pytest.raises(Exception, match=r"node 'node'.*reaches past the signal"):
            run.run({"x": big, "step": np.array(2, np.int64),
                     "frame_length": np.array(1, np.int64)})
        x = random_array(rng, (2, 21, 1))
        good = {"x": x, "step": np.array(2, np.int64), "frame_length": np.array(5, np.int64)}
        got = run.run(good)
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    np.testing.assert_allclose(got[0], run_cpu(model, good)[0], rtol=1e-4, atol=1e-4)


def test_stft_window_with_fewer_values_than_its_first_dim_raises(rng):
    # A [3, 0] window: ORT's kernel takes 3 as the frame length and reads 3 values of an empty
    # buffer (not run here); the EP raises a clear error naming the node.
    x = random_array(rng, (1, 20, 1))
    model, feeds = stft_model(x, np.array(3, np.int64), np.zeros((3, 0), np.float32))
    run = EpRun(symbolic_dims(model, {"window": [0, 1]}), strict=True)
    try:
        with pytest.raises(Exception, match=r"node 'node'.*fewer than its first dim"):
            run.run(feeds)
        good = dict(feeds, window=random_array(rng, (3, 2)))
        run.run(good)
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()


def test_stft_refusals(rng):
    x = random_array(rng, (1, 16, 2))
    model, _ = stft_model(x, np.array(2, np.int64), random_array(rng, (4,)))
    assert "complex" in refusal(model, "STFT")
    model, _ = stft_model(random_array(rng, (1, 16, 1)), np.array(2, np.int64),
                          np.array(0.5, np.float32))
    assert "scalar" in refusal(model, "STFT")
    model, _ = stft_model(random_array(rng, (1, 16, 1)), np.array(2, np.int64))
    assert "window or a frame_length" in refusal(model, "STFT")
    node = helper.make_node("STFT", ["x", "step", "", "fl"], ["out0"], name="node")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1, 16, 1]),
                      helper.make_tensor_value_info("step", TensorProto.INT64, []),
                      helper.make_tensor_value_info("fl", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("out0", TensorProto.DOUBLE, None)])
    assert "float32 only" in refusal(make_model(graph, opset=17, check=False), "STFT")


def test_stft_speech_frames(rng):
    # A speech front end's frames (400 samples, hop 160, a Hann window initializer); 400 is no
    # power of two (ORT's kernel then sums the DFT directly).
    x = random_array(rng, (1, 1600, 1))
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 400)).astype(np.float32)
    model, feeds = stft_model(x, np.array(160, np.int64), window, const_window=True)
    stft_check(model, feeds, x)


# ---------------------------------------------------------------- MelWeightMatrix

def mel_model(int_type=np.int64, attrs=None):
    """All five inputs are graph inputs: with constants ORT folds the node before any EP sees it.
    The output shape follows the values, so the output is typed only."""
    names = ["num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"]
    types = [NP_TO_ONNX[np.dtype(int_type)]] * 3 + [TensorProto.FLOAT] * 2
    node = helper.make_node("MelWeightMatrix", names, ["out0"], name="node", **(attrs or {}))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(k, t, []) for k, t in zip(names, types)],
        [helper.make_tensor_value_info("out0", (attrs or {}).get("output_datatype",
                                                                 TensorProto.FLOAT), None)])
    return make_model(graph, opset=17, check=False)


def mel_feeds(num, dft, rate, lo, hi, int_type=np.int64):
    return {"num_mel_bins": np.array(num, int_type), "dft_length": np.array(dft, int_type),
            "sample_rate": np.array(rate, int_type),
            "lower_edge_hertz": np.array(lo, np.float32),
            "upper_edge_hertz": np.array(hi, np.float32)}


MEL_CASES = [
    (8, 16, 8192, 0, 4096),        # ONNX's backend case
    (80, 400, 16000, 0, 8000),     # a speech front end (Whisper's sizes)
    (128, 2048, 22050, 0, 11025),
    (40, 512, 16000, 20, 7600),
    (3, 8, 100, 0, 40),            # every triangle a single bin
    (10, 64, 1000, 5.5, 499.9),
    (0, 16, 8192, 0, 4000),        # no mel bins: [9, 0]
    (4, 0, 8192, 0, 4000),         # dft_length 0 and -1: one bin (C++ division)
    (4, -1, 8192, 0, 0),
    (4, 16, 8192, 4000, 100),      # upper below lower: backwards points write nothing
    (6, 33, 1000, 100, 100),       # lower == upper
]


@pytest.mark.parametrize("case", MEL_CASES, ids=str)
@pytest.mark.parametrize("int_type", [np.int32, np.int64])
def test_mel_weight_matrix(case, int_type):
    check_on_ep(mel_model(int_type), mel_feeds(*case, int_type=int_type), rtol=0, atol=0)


def test_mel_weight_matrix_random(rng):
    model = mel_model()
    for _ in range(30):
        rate = int(rng.integers(100, 48000))
        dft = int(rng.integers(2, 1025))
        lo, hi = sorted(rng.uniform(0, rate / 2 * dft / (dft + 1), size=2))
        num = int(rng.integers(1, 60))
        check_on_ep(model, mel_feeds(num, dft, rate, lo, hi), rtol=0, atol=0)


@pytest.mark.parametrize("bad", [(8, 16, 8192, 0, 8192), (8, 16, 8192, -1, 4000),
                                 (8, 16, 0, 0, 4000), (-1, 16, 8192, 0, 4000),
                                 (8, 16, 8192, float("nan"), 4000)], ids=str)
def test_mel_weight_matrix_bad_values_raise_like_cpu(bad):
    check_raises_like_cpu(mel_model(), mel_feeds(*bad), mel_feeds(8, 16, 8192, 0, 4096),
                          match="num_mel_bins|edge_hertz", rtol=0, atol=0)


def test_mel_weight_matrix_refusals():
    for dt in (TensorProto.DOUBLE, TensorProto.INT64, TensorProto.UINT8):
        assert "float32 only" in refusal(mel_model(attrs={"output_datatype": dt}),
                                         "MelWeightMatrix")
