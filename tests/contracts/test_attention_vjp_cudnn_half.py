"""The cudnn_half AttentionVJP path (docs/ATTENTION_VJP.md, "cuDNN half mode"): float16 and
bfloat16 contracts through cuDNN's fused SDPA backward on the CUDA backend, opt-in with the
option attention_vjp_half_cudnn (ONNXRUNTIME_EP_MLX_ATTENTION_VJP_HALF_CUDNN).

Its semantics are not the exact half contract's (float32 inside, one rounding per gradient):
cuDNN rounds P and dS to the half type before its tensor-core products (fp32 accumulation). So
the gradients are compared with the float64 reference of the rounded inputs by relative L2 error
per gradient: at most 2e-2 for bfloat16 and 4e-3 for float16. Why these bounds: the unit
roundoff u is 2^-8 (3.9e-3) for bfloat16 and 2^-11 (4.9e-4) for float16; rounding P and dS
before the products dV = P^T dY, dQ = dS K, dK = dS^T Q, and each gradient once at the end,
adds errors of the order of u relative to the sums, and dS = P (dP - delta) cancels where dP is
close to delta, which scales the error of dQ and dK up by a small factor. 5u (bfloat16) and 8u
(float16) cover that, while a wrong mask, scale, layout or statistic gives errors of order 1.
Rows with every key masked are the contract's zeros, exactly.

The GPU tests skip without the CUDA backend on an sm_80 or newer GPU (cuDNN's SDPA needs
Ampere); the option's parsing and the CPU flavour's refusal of the path run everywhere. Every
test id holds "cudnn_half", so `pytest tests/contracts -k cudnn_half` selects them.
"""

from __future__ import annotations

import numpy as np
import pytest

import ortmlx
from ortmlx import options
from ortmlx.contracts import NODE_NAME, attention_vjp_reference_for, float32_boundary
from ortmlx.testing import EpRun, assert_ran_on_ep, cuda_compute_major, mlx_backend
from tests.contracts.test_attention_vjp import (  # noqa: F401 (fixtures)
    LIMIT_ENV,
    NATIVE_ENV,
    TILED_ENV,
    Case,
    _feeds,
    claim_landed,
    expected_label,
    gradient_magnitude,
    handler_missing,
    run_on_ep,
)
from tests.contracts.test_attention_vjp_half import TYPES, rounded_feeds

HALF_CUDNN_ENV = "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_HALF_CUDNN"
CUDNN_HALF_LABEL = "onnax cuDNN half attention VJP"
REL_L2_TOL = {"bfloat16": 2e-2, "float16": 4e-3}  # module docstring


@pytest.fixture
def cudnn_gpu(claim_landed):  # noqa: F811
    if mlx_backend() != "gpu":
        pytest.skip("cudnn_half needs the CUDA flavour on an NVIDIA GPU (this EP runs MLX on its "
                    f"{mlx_backend()} backend)")
    if cuda_compute_major() < 8:
        pytest.skip(f"cudnn_half needs an sm_80 or newer GPU (cuDNN's SDPA); this one is compute "
                    f"{cuda_compute_major()}.x")
    return True


def half_cudnn_on(monkeypatch):
    """The option on, every other path option at its default (the path goes first anyway)."""
    monkeypatch.setenv(HALF_CUDNN_ENV, "1")
    for name in (NATIVE_ENV, TILED_ENV, LIMIT_ENV):
        monkeypatch.delenv(name, raising=False)


def run_half(case, type_name, rng):
    """The contract in `type_name` on the EP (float32 at the graph boundary, as in
    test_attention_vjp_half.py): its gradients as float32, the report, the float64 reference of
    the rounded inputs and the gradients' magnitude."""
    np_type, onnx_type, _ = TYPES[type_name]
    model = case.model(dtype=np_type)
    rounded, boundary = rounded_feeds(_feeds(case, model, rng), np_type)
    got, report = run_on_ep(float32_boundary(model, onnx_type), boundary)
    assert NODE_NAME in report.executed_nodes(), report.fused
    want = attention_vjp_reference_for(model, rounded)
    return got, report, want, gradient_magnitude(model, rounded)


def dead_rows(dq, case):
    """dQ's query rows 0, 3, 6, ...: those attention_vjp_feeds masks whole (fully_masked_rows)."""
    return dq[:, :, ::3] if case.rank == 4 else dq[:, ::3]


def C(*args, **kw):  # noqa: N802  (as test_attention_vjp.py's C)
    """A Case on the default path choice (the option's path goes ahead of it)."""
    return Case(*args, path="auto", **kw)


# (rank, b, sq, sk, hq, hk, d, ...): Sq = Sk a multiple of 128, D <= 128: what the path takes.
CUDNN_CASES = [
    C(4, 1, 128, 128, 4, 4, 64),
    C(3, 1, 128, 128, 4, 4, 64, causal=1),
    C(4, 2, 256, 256, 8, 2, 128, causal=1),
    C(3, 1, 128, 128, 2, 1, 32, causal=1, outputs=(1, 2)),
    # Masks: boolean and additive, broadcast over batch and heads or not, with fully masked
    # rows, causal folded in, a narrow additive mask (keys beyond its width hidden).
    C(4, 2, 256, 256, 8, 2, 128, causal=1, mask=1, mask_shape=(2, 1, 256, 256), full_rows=True),
    C(3, 2, 256, 256, 8, 2, 128, mask=2, mask_shape=(256, 256), full_rows=True,
      outputs=(0, 2)),
    C(4, 1, 128, 128, 4, 4, 64, mask=2, mask_shape=(1, 4, 128, 128), outputs=(1,)),
    C(4, 2, 256, 256, 8, 2, 64, mask=1, mask_shape=(256,), outputs=(2,)),
    C(3, 1, 128, 128, 4, 2, 64, causal=1, mask=2, mask_shape=(128, 100), outputs=(0,)),
    # The plain form takes Y as given (here: not the forward output).
    C(4, 1, 128, 128, 4, 4, 64, mask=1, mask_shape=(128, 128), consistent_y=False),
    # Recompute form (d >= 32).
    C(4, 2, 256, 256, 8, 2, 128, causal=1, recompute=True),
    C(3, 1, 128, 128, 4, 4, 64, mask=2, mask_shape=(1, 128, 128), full_rows=True,
      outputs=(0, 1), recompute=True),
    C(4, 1, 128, 128, 4, 4, 64, causal=1, mask=1, mask_shape=(128, 128), full_rows=True,
      recompute=True),
]


def _id(case):
    return "cudnn_half_" + case.id


def check_gradients(case, type_name, got, want, mag):
    np_type = TYPES[type_name][0]
    for o, g, w in zip(case.outputs, got, want):
        what = f"d{'QKV'[o]} {type_name} {case.id}"
        assert g.shape == w.shape and np.isfinite(g).all(), what
        # Values of the half type (the gradients leave the node in it).
        np.testing.assert_array_equal(g, g.astype(np_type).astype(np.float32), err_msg=what)
        err = float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-3 * max(mag, 1e-3)))
        assert err <= REL_L2_TOL[type_name], f"{what}: relative L2 error {err:.2e}"
        if o == 0 and case.full_rows:
            # A fully masked query row's dQ is zeros (never NaN), exactly. attention_vjp_feeds
            # masks every key of query rows 0, 3, 6, ... (the mask has a query axis here).
            assert not dead_rows(w, case).any(), f"{what}: the feeds' dead rows moved"
            assert not dead_rows(g, case).any(), f"{what}: fully masked rows"


@pytest.mark.parametrize("type_name", sorted(TYPES))
@pytest.mark.parametrize("case", CUDNN_CASES, ids=_id)
def test_cudnn_half_matches_reference(case, type_name, rng, monkeypatch, cudnn_gpu):
    half_cudnn_on(monkeypatch)
    got, report, want, mag = run_half(case, type_name, rng)
    assert CUDNN_HALF_LABEL in report.paths(), sorted(report.paths())
    check_gradients(case, type_name, got, want, mag)


def test_cudnn_half_runs_are_not_captured_for_graph_replay(rng, monkeypatch, cudnn_gpu, capfd):
    # MLX launches cuDNN's SDPA as a CUDA graph of its own, which a stream capture cannot hold:
    # graph replay (on by default in the CUDA flavour, captures a run's third run) refuses such
    # runs up front rather than failing a capture, and every run stays right.
    half_cudnn_on(monkeypatch)
    monkeypatch.delenv("ONNXRUNTIME_EP_MLX_GRAPH_REPLAY", raising=False)
    case = C(4, 2, 256, 256, 8, 2, 128, causal=1, mask=1, mask_shape=(2, 1, 256, 256),
             full_rows=True)
    np_type, onnx_type, _ = TYPES["bfloat16"]
    model = case.model(dtype=np_type)
    # float32_boundary changes its model in place: the feeds and the reference read `model`.
    run = EpRun(float32_boundary(case.model(dtype=np_type), onnx_type))
    try:
        for _ in range(4):
            rounded, boundary = rounded_feeds(_feeds(case, model, rng), np_type)
            got = run.run(boundary)
            want = attention_vjp_reference_for(model, rounded)
            check_gradients(case, "bfloat16", got, want, gradient_magnitude(model, rounded))
        report = assert_ran_on_ep(run, [NODE_NAME])
        assert CUDNN_HALF_LABEL in report.paths(), sorted(report.paths())
        c = report.counters()
        assert c.get("graph_replay.capture", 0) == 0 and c.get("graph_replay.replay", 0) == 0, c
        assert c.get("graph_replay.refused", 0) == 1, c
    finally:
        run.close()
    assert "capture failed" not in capfd.readouterr().err


# What the path leaves to the exact paths: Sq not a multiple of 128, Sq != Sk, D > 128.
GATED_OUT = [
    C(4, 1, 100, 100, 4, 4, 64, causal=1),
    C(3, 1, 128, 256, 4, 2, 64, mask=1, mask_shape=(128, 256)),
    C(4, 1, 128, 128, 2, 2, 256),
]


@pytest.mark.parametrize("case", GATED_OUT, ids=_id)
def test_cudnn_half_gated_out_shapes_take_the_exact_paths(case, rng, monkeypatch, cudnn_gpu):
    half_cudnn_on(monkeypatch)
    got, report, want, mag = run_half(case, "bfloat16", rng)
    assert CUDNN_HALF_LABEL not in report.paths(), sorted(report.paths())
    assert expected_label("auto", case.recompute) in report.paths(), sorted(report.paths())
    unit = TYPES["bfloat16"][2]
    for o, g, w in zip(case.outputs, got, want):
        # The exact half contract: one rounding of a float32 result (test_attention_vjp_half.py).
        np.testing.assert_allclose(g, w, rtol=2 * unit, atol=1e-4 * max(mag, 1e-3),
                                   err_msg=f"d{'QKV'[o]}")


def test_cudnn_half_option_parses():
    assert "attention_vjp_half_cudnn" in options.keys()
    opt = next(o for o in options.OPTIONS if o.key == "attention_vjp_half_cudnn")
    assert opt.env == HALF_CUDNN_ENV and opt.kind == "flag"
    assert options.validate({opt.key: "on"}) == {opt.key: "on"}
    with pytest.raises(ValueError, match="attention_vjp_half_cudnn"):
        options.validate({opt.key: "sometimes"})


def test_cudnn_half_bad_option_value_fails_session_creation(claim_landed):
    """The EP's own check (ORT's fallback to its CPU EP off, so the failure shows)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_provider_for_devices(ortmlx.ep_devices()[:1], {"attention_vjp_half_cudnn": "sometimes"})
    model = CUDNN_CASES[0].model(dtype=TYPES["bfloat16"][0])
    with pytest.raises(Exception, match="attention_vjp_half_cudnn"):
        ort.InferenceSession(model.SerializeToString(), so, enable_fallback=0)


@pytest.mark.parametrize("type_name", sorted(TYPES))
def test_cudnn_half_is_not_taken_on_mlx_cpu(type_name, rng, monkeypatch, claim_landed):
    """On MLX's CPU backend (the CPU flavour) the option changes nothing: a problem the path
    would take on a GPU runs its usual path with the same bits, option given as a provider
    option."""
    if mlx_backend() == "gpu":
        pytest.skip("the CPU backend's behaviour (the GPU tests above cover the CUDA backend)")
    for name in (HALF_CUDNN_ENV, NATIVE_ENV, TILED_ENV, LIMIT_ENV):
        monkeypatch.delenv(name, raising=False)
    np_type, onnx_type, _ = TYPES[type_name]
    case = C(4, 1, 128, 128, 4, 2, 64, causal=1, mask=1, mask_shape=(128, 128), full_rows=True)
    model = float32_boundary(case.model(dtype=np_type), onnx_type)
    _, feeds = rounded_feeds(_feeds(case, case.model(dtype=np_type), rng), np_type)
    results = {}
    for on in ("0", "1"):
        run = EpRun(model, provider_options={"attention_vjp_half_cudnn": on})
        try:
            got = run.run(feeds)
            report = assert_ran_on_ep(run, [NODE_NAME])
        finally:
            run.close()
        assert CUDNN_HALF_LABEL not in report.paths(), sorted(report.paths())
        assert expected_label("auto", case.recompute) in report.paths(), sorted(report.paths())
        results[on] = got
    for a, b in zip(results["0"], results["1"]):
        np.testing.assert_array_equal(a, b)
