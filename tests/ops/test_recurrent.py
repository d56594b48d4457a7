"""RNN, GRU, LSTM on the EP vs ORT CPU: directions, activations, clip, sequence_lens, initial
states, peepholes, output subsets, batch-major layout, refusals and bad inputs."""

from __future__ import annotations

import itertools
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from opcheck import check_on_ep
from ort_raises import check_raises_like_cpu
from ortmlx.testing import (EpRun, assert_ran_on_ep, kernel_enabled, make_model, mlx_backend,
                            random_array, run_cpu)
from pattern_check import run_pattern

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
N_OUT = {"RNN": 2, "GRU": 2, "LSTM": 3}
INPUT_NAMES = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
# Every activation ORT's kernels implement (a plain string: these tests are not about the
# standalone activation ops of the same names).
ACTS = ("Sigmoid Tanh Relu Affine LeakyRelu ThresholdedRelu ScaledTanh HardSigmoid Elu Softsign "
        "Softplus").split()
SIGMOID, TANH = ACTS[:2]


def rnn_inputs(rng, op, T=4, B=3, I=5, H=4, nd=1, bias=True, lens=None, init_h=False,
               init_c=False, peep=False, batch_major=False, scale=0.5):
    """Feeds in input order (None: absent); weights scaled so the gates stay in range."""
    g = GATES[op]
    x_shape = (B, T, I) if batch_major else (T, B, I)
    ins = {
        "X": random_array(rng, x_shape),
        "W": random_array(rng, (nd, g * H, I), low=-scale, high=scale),
        "R": random_array(rng, (nd, g * H, H), low=-scale, high=scale),
        "B": random_array(rng, (nd, 2 * g * H), low=-scale, high=scale) if bias else None,
        "sequence_lens": None if lens is None else np.asarray(lens, np.int32),
        "initial_h": random_array(rng, (nd, B, H)) if init_h else None,
    }
    if op == "LSTM":
        ins["initial_c"] = random_array(rng, (nd, B, H)) if init_c else None
        ins["P"] = random_array(rng, (nd, 3 * H), low=-scale, high=scale) if peep else None
    while list(ins.values())[-1] is None:
        ins.popitem()
    return ins


def rnn_model(op, ins, attrs, outputs=None, opset=14, dynamic=(), consts=()):
    """One node named 'node'; outputs: which of Y, Y_h(, Y_c) to produce (default all).
    dynamic: input names whose dims are symbolic; consts: input names made initializers."""
    outputs = outputs if outputs is not None else [True] * N_OUT[op]
    in_names, graph_inputs, inits = [], [], []
    for name, v in ins.items():
        if v is None:
            in_names.append("")
            continue
        in_names.append(name)
        if name in consts:
            inits.append(onnx.numpy_helper.from_array(v, name))
            continue
        elem = TensorProto.INT32 if v.dtype == np.int32 else \
            onnx.helper.np_dtype_to_tensor_dtype(v.dtype)
        shape = [f"{name}_{i}" for i in range(v.ndim)] if name in dynamic else list(v.shape)
        graph_inputs.append(helper.make_tensor_value_info(name, elem, shape))
    out_names = [(f"out{i}" if want else "") for i, want in enumerate(outputs)]
    while out_names and out_names[-1] == "":
        out_names.pop()
    node = helper.make_node(op, in_names, out_names, name="node", **attrs)
    graph = helper.make_graph([node], "g", graph_inputs,
                              [onnx.ValueInfoProto(name=o) for o in out_names if o], inits)
    model = make_model(graph, opset=opset, check=False)
    return onnx.shape_inference.infer_shapes(model)


def feeds_of(ins, consts=()):
    return {k: v for k, v in ins.items() if v is not None and k not in consts}


def check(op, ins, attrs, outputs=None, opset=14, consts=()):
    model = rnn_model(op, ins, attrs, outputs, opset, consts=consts)
    return check_on_ep(model, feeds_of(ins, consts), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [7, 14])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_directions(op, direction, opset, rng):
    nd = 2 if direction == "bidirectional" else 1
    ins = rnn_inputs(rng, op, nd=nd, init_h=True, init_c=True)
    check(op, ins, {"hidden_size": 4, "direction": direction}, opset=opset)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_defaults_no_optional_inputs(op, rng):
    ins = rnn_inputs(rng, op, bias=False)
    check(op, ins, {"hidden_size": 4})


@pytest.mark.parametrize("consts", [("W", "R", "B"), ("W", "R", "B", "initial_h")])
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_constant_weights(op, consts, rng):
    ins = rnn_inputs(rng, op, nd=2, init_h=True)
    check(op, ins, {"hidden_size": 4, "direction": "bidirectional"}, consts=consts)


@pytest.mark.parametrize("lbr", [0, 1, 5])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_gru_linear_before_reset(lbr, direction, rng):
    nd = 2 if direction == "bidirectional" else 1
    ins = rnn_inputs(rng, "GRU", nd=nd, init_h=True)
    check("GRU", ins, {"hidden_size": 4, "direction": direction, "linear_before_reset": lbr})


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_linear_before_reset_without_bias(lbr, rng):
    ins = rnn_inputs(rng, "GRU", bias=False, init_h=True)
    check("GRU", ins, {"hidden_size": 4, "linear_before_reset": lbr})


def _act_attrs(names, with_params):
    attrs = {"activations": names}
    if with_params:  # distinct values, consumed in order by the activations that take them
        attrs["activation_alpha"] = [0.3, 0.7, 1.3, 0.45, 0.9, 1.1][:len(names)]
        attrs["activation_beta"] = [0.2, -0.4, 0.6, 0.35, -0.1, 0.5][:len(names)]
    return attrs


@pytest.mark.parametrize("with_params", [False, True])
@pytest.mark.parametrize("act", ACTS)
def test_rnn_activations(act, with_params, rng):
    ins = rnn_inputs(rng, "RNN", nd=2, init_h=True, scale=0.3)
    attrs = {"hidden_size": 4, "direction": "bidirectional",
             **_act_attrs([act, TANH], with_params)}
    check("RNN", ins, attrs)
    # in the second direction, it consumes the first alpha/beta
    attrs = {"hidden_size": 4, "direction": "bidirectional",
             **_act_attrs([SIGMOID, act], with_params)}
    check("RNN", ins, attrs)


@pytest.mark.parametrize("with_params", [False, True])
@pytest.mark.parametrize("act", ACTS)
def test_gru_activations(act, with_params, rng):
    ins = rnn_inputs(rng, "GRU", nd=2, init_h=True, scale=0.3)
    for names in ([act, TANH, SIGMOID, act], [act, act, act.upper(), act.lower()]):
        for lbr in (0, 1):
            attrs = {"hidden_size": 4, "direction": "bidirectional", "linear_before_reset": lbr,
                     **_act_attrs(names, with_params)}
            check("GRU", ins, attrs)


@pytest.mark.parametrize("with_params", [False, True])
@pytest.mark.parametrize("act", ACTS)
def test_lstm_activations(act, with_params, rng):
    ins = rnn_inputs(rng, "LSTM", nd=2, init_h=True, init_c=True, peep=True, scale=0.3)
    for names in ([act, TANH, TANH, SIGMOID, act, act], [act] * 6):
        attrs = {"hidden_size": 4, "direction": "bidirectional", **_act_attrs(names, with_params)}
        check("LSTM", ins, attrs)


def test_rnn_two_activations_for_one_direction_take_the_first(rng):
    ins = rnn_inputs(rng, "RNN")
    check("RNN", ins, {"hidden_size": 4, "activations": "Relu Sigmoid".split()})


# ORT's GRU/LSTM reject clip <= 0 (test_clip_not_positive_refused); its RNN clips to 0 at 0 and
# not at all below.
CLIPS = [("RNN", 0.0), ("RNN", -1.0)] + [(op, c) for op in GATES for c in (0.3, 2.0)]


@pytest.mark.parametrize("op,clip", CLIPS)
def test_clip(op, clip, rng):
    ins = rnn_inputs(rng, op, nd=2, init_h=True, scale=1.0)
    check(op, ins, {"hidden_size": 4, "direction": "bidirectional", "clip": clip})


@pytest.mark.parametrize("input_forget", [0, 1])
@pytest.mark.parametrize("peep", [False, True])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_lstm_peepholes_and_input_forget(direction, peep, input_forget, rng):
    nd = 2 if direction == "bidirectional" else 1
    ins = rnn_inputs(rng, "LSTM", nd=nd, init_h=True, init_c=True, peep=peep)
    check("LSTM", ins, {"hidden_size": 4, "direction": direction, "input_forget": input_forget})


LENS = [[4, 4, 4], [2, 4, 1], [0, 3, 4], [0, 0, 0], [1, 1, 1]]


@pytest.mark.parametrize("lens", LENS, ids=str)
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_sequence_lens(op, direction, lens, rng):
    """Outputs zero past each row's length; final states from each row's last live step; a row
    of length 0 gets zero final states (as ORT's CPU kernels give)."""
    nd = 2 if direction == "bidirectional" else 1
    ins = rnn_inputs(rng, op, nd=nd, lens=lens, init_h=True, init_c=True, peep=op == "LSTM")
    attrs = {"hidden_size": 4, "direction": direction}
    if op == "GRU":
        attrs["linear_before_reset"] = 1
    check(op, ins, attrs)


@pytest.mark.parametrize("lens", [[2, 4, 1], [0, 3, 4]], ids=str)
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_sequence_lens_final_states_only(op, lens, rng):
    """Without Y (ORT's kernels then write the final state in place)."""
    ins = rnn_inputs(rng, op, nd=2, lens=lens, init_h=True, init_c=True)
    outputs = [False] + [True] * (N_OUT[op] - 1)
    check(op, ins, {"hidden_size": 4, "direction": "bidirectional"}, outputs=outputs)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_output_subsets(op, rng):
    ins = rnn_inputs(rng, op, nd=2, lens=[3, 4, 2], init_h=True)
    for outputs in itertools.product([False, True], repeat=N_OUT[op]):
        if any(outputs):
            check(op, ins, {"hidden_size": 4, "direction": "bidirectional"}, outputs=list(outputs))


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_layout_batch_major(op, direction, rng):
    """layout=1: ORT's CPU kernels refuse it, so the reference is the time-major model on ORT
    CPU with X transposed in and Y, Y_h, Y_c transposed out (the ONNX definition)."""
    nd = 2 if direction == "bidirectional" else 1
    ins = rnn_inputs(rng, op, nd=nd, lens=[3, 4, 1], init_h=True, init_c=True,
                     batch_major=True)
    # initial states are batch-major too
    for k in ("initial_h", "initial_c"):
        if ins.get(k) is not None:
            ins[k] = np.ascontiguousarray(ins[k].transpose(1, 0, 2))
    attrs = {"hidden_size": 4, "direction": direction}
    model = rnn_model(op, ins, {**attrs, "layout": 1})
    run = EpRun(model, strict=True)
    try:
        got = run.run(feeds_of(ins))
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    tm = dict(ins)
    tm["X"] = np.ascontiguousarray(ins["X"].transpose(1, 0, 2))
    for k in ("initial_h", "initial_c"):
        if tm.get(k) is not None:
            tm[k] = np.ascontiguousarray(tm[k].transpose(1, 0, 2))
    want = run_cpu(rnn_model(op, tm, attrs), feeds_of(tm))
    np.testing.assert_allclose(got[0], want[0].transpose(2, 0, 1, 3), rtol=1e-5, atol=1e-5)
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, w.transpose(1, 0, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_long_sequence(op, rng):
    ins = rnn_inputs(rng, op, T=200, B=2, I=8, H=16, nd=2, init_h=True, scale=0.3)
    check(op, ins, {"hidden_size": 16, "direction": "bidirectional"})


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_same_session_new_shapes(op, rng):
    """Batch and time are dynamic: each shape gets its own unrolled graph."""
    ins = rnn_inputs(rng, op, nd=2)
    model = rnn_model(op, ins, {"hidden_size": 4, "direction": "bidirectional"}, dynamic=("X",))
    run = EpRun(model, strict=True)
    try:
        for T, B in ((4, 3), (7, 1), (1, 2)):
            feeds = feeds_of(ins)
            feeds["X"] = random_array(rng, (T, B, 5))
            got = run.run(feeds)
            want = run_cpu(model, feeds)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()


# ---------------------------------------------------------------- refusals


def _refusal(op, ins, attrs, opset=14):
    """The EP's refusal reason. ORT's CPU kernel rejects most of these models when the session
    is created (after the EP's claim pass has written its report), so the session may fail."""
    import json
    import os
    import tempfile

    import onnxruntime as ort

    import ortmlx
    from ortmlx.testing import EpReport

    model = rnn_model(op, ins, attrs, opset=opset)
    fd, path = tempfile.mkstemp(prefix="ortmlx-report-", suffix=".json")
    os.close(fd)
    os.unlink(path)
    so = ort.SessionOptions()
    so.log_severity_level = 4
    ortmlx.append_to_session_options(so, {"report": path})
    try:
        ort.InferenceSession(model.SerializeToString(), so)
    except Exception:
        pass  # ORT's CPU kernel rejected the node the EP refused
    try:
        with open(path) as f:
            report = EpReport(json.load(f))
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return report.refused().get(op, {}).get("reason")


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_double_refused(op, rng):
    ins = {k: (v.astype(np.float64) if v.dtype == np.float32 else v)
           for k, v in rnn_inputs(rng, op).items() if v is not None}
    assert "float32" in _refusal(op, ins, {"hidden_size": 4})


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_missing_hidden_size_refused(op, rng):
    assert "hidden_size" in _refusal(op, rnn_inputs(rng, op), {})


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
@pytest.mark.parametrize("clip", [0.0, -1.0])
def test_clip_not_positive_refused(op, clip, rng):
    assert "clip must be positive" in _refusal(op, rnn_inputs(rng, op),
                                               {"hidden_size": 4, "clip": clip})


@pytest.mark.parametrize("op,acts,reason", [
    ("RNN", ["relu"], "activation 'relu'"),            # ORT's RNN matches names exactly
    ("GRU", [SIGMOID, "Gaussian"], "activation 'Gaussian'"),
    ("LSTM", [SIGMOID, TANH], "expected 3"),
    ("GRU", [SIGMOID, TANH, TANH], "expected 2"),
])
def test_bad_activations_refused(op, acts, reason, rng):
    assert reason in _refusal(op, rnn_inputs(rng, op), {"hidden_size": 4, "activations": acts})


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_short_alpha_beta_lists_fall_back_to_defaults(op, rng):
    """alpha/beta are consumed in order by the activations that take them; past the end of a
    list ORT uses its defaults (LeakyRelu 0.01, HardSigmoid 0.2/0.5, Elu 1.0, else 0)."""
    per_dir = {"RNN": 1, "GRU": 2, "LSTM": 3}[op]
    names = ("LeakyRelu HardSigmoid Elu".split() * 2)[:per_dir] + \
        ("HardSigmoid Elu LeakyRelu".split() * 2)[:per_dir]
    ins = rnn_inputs(rng, op, nd=2, init_h=True, scale=0.3)
    check(op, ins, {"hidden_size": 4, "direction": "bidirectional", "activations": names,
                    "activation_alpha": [0.2], "activation_beta": [0.1]})


def test_bad_direction_refused(rng):
    assert "direction" in _refusal("GRU", rnn_inputs(rng, "GRU"),
                                   {"hidden_size": 4, "direction": "sideways"})


# ---------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("bad_input,bad_shape", [("W", (1, 5, 5)), ("R", (1, 4, 3)),
                                                 ("B", (1, 7)), ("initial_h", (1, 2, 4))])
def test_wrong_input_shape_raises_like_cpu(op, bad_input, bad_shape, rng):
    ins = rnn_inputs(rng, op, init_h=True)
    model = rnn_model(op, ins, {"hidden_size": 4}, dynamic=tuple(ins))
    good = feeds_of(ins)
    bad = dict(good)
    g = GATES[op]
    shape = list(bad_shape)
    if bad_input in ("W", "R"):
        shape[1] *= g if bad_input == "R" else 1
    bad[bad_input] = random_array(rng, tuple(shape))
    check_raises_like_cpu(model, bad, good, match=bad_input)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("bad", [[5, 1, 1], [-1, 2, 2]], ids=str)
def test_sequence_lens_out_of_range_raise_like_cpu(op, bad, rng):
    ins = rnn_inputs(rng, op, lens=[1, 2, 3])
    model = rnn_model(op, ins, {"hidden_size": 4})
    good = feeds_of(ins)
    check_raises_like_cpu(model, {**good, "sequence_lens": np.array(bad, np.int32)}, good,
                          match="sequence_lens")


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_sequence_lens_wrong_length_raises_like_cpu(op, rng):
    ins = rnn_inputs(rng, op, lens=[1, 2, 3])
    model = rnn_model(op, ins, {"hidden_size": 4}, dynamic=("sequence_lens",))
    good = feeds_of(ins)
    check_raises_like_cpu(model, {**good, "sequence_lens": np.array([1, 2], np.int32)}, good,
                          match="sequence_lens")


def test_static_sequence_beyond_unroll_limit_refused(rng):
    """A static length past the unrolled limit is left to ORT (its compile would take seconds)."""
    ins = rnn_inputs(rng, "GRU", T=1025, B=1, I=2, H=2)
    assert "exceeds the unrolled limit 1024" in _refusal("GRU", ins, {"hidden_size": 2})


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_empty_batch(op, rng):
    """Batch 0 gives empty outputs (ORT's GRU and LSTM kernels abort the process on it, so
    the shapes are the reference; RNN is compared with ORT CPU)."""
    ins = rnn_inputs(rng, op, B=0, nd=2, init_h=True)
    model = rnn_model(op, ins, {"hidden_size": 4, "direction": "bidirectional"})
    if op == "RNN":
        check_on_ep(model, feeds_of(ins))
        return
    run = EpRun(model, strict=True)
    try:
        got = run.run(feeds_of(ins))
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    assert [g.shape for g in got] == [(4, 2, 0, 4)] + [(2, 0, 4)] * (N_OUT[op] - 1)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_overflowing_gate_inputs_clamp_like_cpu(op, bias, rng):
    """ORT's GRU/LSTM clamp every gate input to [-FLT_MAX, FLT_MAX] even without clip: an
    overflowing X·W^T becomes FLT_MAX (finite through Affine), not Inf. Input size 1: each
    product overflows alone, whatever order a matmul sums in."""
    ins = rnn_inputs(rng, op, I=1, nd=2, bias=bias, init_h=True, init_c=True)
    ins["X"] = (ins["X"] * np.float32(1e38)).astype(np.float32)
    ins["W"] = (ins["W"] * np.float32(100)).astype(np.float32)
    ins["R"] = np.zeros_like(ins["R"])
    names = ["Affine", TANH, TANH] if op == "LSTM" else ["Affine", TANH]
    attrs = {"hidden_size": 4, "direction": "bidirectional", "activations": names * 2,
             "activation_alpha": [1e-30] * 6, "activation_beta": [0.0] * 6}
    model = rnn_model(op, ins, attrs)
    want = run_cpu(model, feeds_of(ins))
    got = check_on_ep(model, feeds_of(ins), rtol=1e-4, atol=1e-3)
    assert all(np.isfinite(g).all() for g in got) and all(np.isfinite(w).all() for w in want)


def test_softplus_activation_finite_up_to_the_float32_limit(rng):
    """Softplus(x) = log(1 + e^x) as ORT computes it is finite up to x = 88.72 and inf past it;
    MLX's CPU exp returned inf past 88 (fuzz seed 245, o57_43: a GRU whose candidate gate's
    input reached 88.61). An RNN with input size 1 and W = 1 puts X itself into the activation."""
    x = np.array([87.5, 88.2, 88.61, 88.7, 88.9, 10.0], np.float32).reshape(6, 1, 1)
    ins = {"X": x, "W": np.ones((1, 1, 1), np.float32), "R": np.zeros((1, 1, 1), np.float32)}
    attrs = {"hidden_size": 1, "activations": ["Softplus"]}
    got = check_on_ep(rnn_model("RNN", ins, attrs), feeds_of(ins), rtol=1e-6)[0].ravel()
    assert np.isfinite(got[:4]).all() and np.isinf(got[4]), got


# On the GPU (unless ONNXRUNTIME_EP_MLX_RNN_KERNEL=0) an LSTM or GRU direction with default
# activations is one CUDA kernel; otherwise MLX ops.
RNN_KERNEL = mlx_backend() == "gpu" and kernel_enabled("ONNXRUNTIME_EP_MLX_RNN_KERNEL")


@pytest.mark.parametrize("op, attrs", [
    ("LSTM", {"direction": "bidirectional"}),
    ("LSTM", {"direction": "reverse", "clip": 0.8}),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 1}),
    ("GRU", {"direction": "forward"}),
], ids=str)
def test_recurrence_kernel_path(op, attrs, rng):
    """The time loop as one CUDA kernel where opted in on the GPU (the report's path says so),
    MLX ops elsewhere; ORT CPU's result either way."""
    nd = 2 if attrs["direction"] == "bidirectional" else 1
    ins = rnn_inputs(rng, op, T=7, B=3, I=5, H=6, nd=nd, init_h=True, init_c=op == "LSTM")
    model = rnn_model(op, ins, {"hidden_size": 6, **attrs})
    report = run_pattern(model, feeds_of(ins), rtol=1e-5, atol=1e-5)
    assert (f"{op} time loop -> one CUDA kernel" in report.paths()) == RNN_KERNEL

