"""Provider options: every knob is a session config key `ep.mlxexecutionprovider.<key>`; unknown
keys and bad values fail session creation with a message naming the option; the Python mirror
(ortmlx.options) matches the C++ table."""

import re
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

import ortmlx
from ortmlx import options
from ortmlx.testing import EpRun
from tests.engine.util import ROOT, dynamic_chain_model


def _session(provider_options):
    """A session on the EP with ORT's Python-side CPU fallback off, so EP errors surface. The
    options go straight into the session config (not through ortmlx.append_to_session_options,
    which checks them itself): these tests are about the EP's own checks."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_provider_for_devices(ortmlx.ep_devices()[:1],
                                {k: str(v) for k, v in provider_options.items()})
    return ort.InferenceSession(dynamic_chain_model().SerializeToString(), so, enable_fallback=0)


def _creation_error(provider_options) -> str:
    with pytest.raises(Exception) as err:
        _session(provider_options)
    return str(err.value)


def test_python_mirror_matches_the_cpp_table():
    msg = _creation_error({"no_such_knob": "1"})
    assert "unknown provider option 'ep.mlxexecutionprovider.no_such_knob'" in msg
    m = re.search(r"known options: ([^)]*)\)", msg)
    assert m, msg
    assert m.group(1).split(", ") == options.keys()


@pytest.mark.parametrize("opt", options.OPTIONS, ids=lambda o: o.key)
def test_every_option_is_accepted(opt, tmp_path, rng):
    value = opt.example.format(tmp=tmp_path)
    run = EpRun(dynamic_chain_model(), provider_options={opt.key: value}, strict=True)
    try:
        run.run({"x": rng.standard_normal((2, 8)).astype(np.float32)})
        if opt.key == "report":  # the option replaces EpRun's own report path
            run.report_path = value
        assert run.report().executed_nodes()
    finally:
        run.close()


@pytest.mark.parametrize("key,value,expect", [
    ("compile_cache_size", "0", "expected an integer >= 1"),
    ("compile_cache_size", "many", "expected an integer >= 1"),
    ("compile_cache_size", "-3", "expected an integer >= 1"),
    ("attention_vjp_dense_limit_bytes", "64MiB", "expected an integer >= 0"),
    ("no_compile", "maybe", "expected a flag"),
    ("verbose", "2", "expected a flag"),
    ("claim_debug", "enabled", "expected a flag"),
    ("compile_fuse", "sometimes", "expected a flag (1/0, true/false, on/off, yes/no, or auto)"),
    ("attention_vjp_tiled", "fused", "expected auto, kernel or blocked"),
    ("attention_vjp_tiled", "", "expected auto, kernel or blocked"),
])
def test_bad_values_fail_session_creation(key, value, expect):
    msg = _creation_error({key: value})
    assert "MLXExecutionProvider" in msg
    assert f"ep.mlxexecutionprovider.{key}='{value}'" in msg and expect in msg, msg


def test_bad_environment_value_fails_session_creation(monkeypatch):
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_COMPILE_CACHE_SIZE", "lots")
    msg = _creation_error({})
    assert "ONNXRUNTIME_EP_MLX_COMPILE_CACHE_SIZE='lots'" in msg, msg


def test_bad_attention_vjp_tiled_environment_value_fails(monkeypatch):
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_ATTENTION_VJP_TILED", "gpu")
    msg = _creation_error({})
    want = "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_TILED='gpu': expected auto, kernel or blocked"
    assert want in msg, msg


def test_option_overrides_environment(monkeypatch, rng):
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_COMPILE_CACHE_SIZE", "lots")  # would fail
    run = EpRun(dynamic_chain_model(), provider_options={"compile_cache_size": 1})
    try:
        for rows in (1, 2, 3):
            run.run({"x": rng.standard_normal((rows, 8)).astype(np.float32)})
        (fused,) = run.report().fused.values()
        assert fused["cache_entries"] == 1
    finally:
        run.close()


def test_cli_prints_the_option_table():
    out = subprocess.run([sys.executable, "-m", "ortmlx", "options"], capture_output=True,
                         text=True, cwd=ROOT, check=True).stdout
    assert "ep.mlxexecutionprovider.<key>" in out
    for opt in options.OPTIONS:
        line = next(line for line in out.splitlines() if line.startswith(opt.key + " "))
        assert opt.env in line and opt.meaning in line


@pytest.mark.parametrize("key,value,expect", [
    ("no_such_knob", "1", "unknown MLXExecutionProvider option 'no_such_knob'"),
    ("compile_cache_size", "0", "expected an integer"),
    ("attention_vjp_dense_limit_bytes", "64MiB", "expected an integer"),
    ("verbose", "2", "expected one of 1/0"),
    ("compile_fuse", "sometimes", "expected one of 1/0"),
    ("trace", "", "expected a non-empty path"),
])
def test_python_helper_refuses_bad_options(key, value, expect):
    """ORT's Python API falls back to the CPU EP with only a warning when the EP refuses its
    options; the helper raises first, so no session silently runs without the EP."""
    so = ort.SessionOptions()
    with pytest.raises(ValueError) as err:
        ortmlx.append_to_session_options(so, {key: value})
    assert key in str(err.value) and expect in str(err.value), str(err.value)


def test_python_helper_accepts_every_example(tmp_path):
    for opt in options.OPTIONS:
        options.validate({opt.key: opt.example.format(tmp=tmp_path)})


@pytest.mark.parametrize("key, env", [("cuda_graphs", "ONNXRUNTIME_EP_MLX_CUDA_GRAPHS"),
                                      ("tf32", "ONNXRUNTIME_EP_MLX_TF32")])
def test_process_wide_option_that_differs_from_the_process_fails(key, env):
    # Both switches are read by MLX once per process and decided when the library loads (neither
    # variable is set in the test process, so both modes are off): a session can confirm the
    # mode but not change it, and asking for the other one says how to get it.
    _session({key: "0"})
    msg = _creation_error({key: "1"})
    assert f"{key}=1 differs from this process's mode" in msg and env in msg, msg
