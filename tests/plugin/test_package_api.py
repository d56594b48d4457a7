"""The Python package's public API: ORT's plugin-EP packaging convention and the reference MLX
EP's names, both call forms of append_to_session_options, idempotent registration."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ortmlx
from ortmlx.testing import make_model, random_array


def _model():
    x = h.make_tensor_value_info("x", T.FLOAT, [3, 4])
    y = h.make_tensor_value_info("y", T.FLOAT, [3, 4])
    return make_model(h.make_graph([h.make_node("Tanh", ["x"], ["y"], name="tanh")], "g", [x], [y]))


def _strict_options():
    so = ort.SessionOptions()
    so.log_severity_level = 3
    # Session creation fails if any node is left on ORT's CPU EP: proves the EP was appended.
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return so


def _runs_on_ep(so, rng):
    x = random_array(rng, (3, 4))
    sess = ort.InferenceSession(_model().SerializeToString(), so)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], np.tanh(x), rtol=1e-6, atol=1e-6)


def test_packaging_convention_names():
    assert ortmlx.get_ep_names() == [ortmlx.get_ep_name()] == [ortmlx.EP_NAME]
    assert ortmlx.EP_NAME == ortmlx.ep_name() == "MLXExecutionProvider"
    path = ortmlx.get_library_path()
    assert path == ortmlx.library_path() and os.path.isabs(path) and os.path.isfile(path)


def test_version_and_vendor_match_the_library():
    assert ortmlx.__version__ == ortmlx.version()
    device = ortmlx.ep_devices()[0]
    assert device.ep_vendor == ortmlx.vendor()
    assert device.ep_metadata.get("ortmlx.version") == ortmlx.__version__


def test_register_is_idempotent():
    assert ortmlx.register_execution_provider_library() == ortmlx.library_path()
    assert ortmlx.register_execution_provider_library(ortmlx.EP_NAME) == ortmlx.library_path()
    assert ortmlx.register_execution_provider_library(
        registration_name=ortmlx.EP_NAME) == ortmlx.library_path()


def test_register_accepts_a_library_ort_already_registered():
    # A fresh process: the caller registers through ORT first (as ORT's guide shows), then code
    # written for the reference EP registers again under the same name.
    code = textwrap.dedent("""
        import onnxruntime as ort, ortmlx
        ort.register_execution_provider_library(ortmlx.get_ep_name(), ortmlx.get_library_path())
        ortmlx.register_execution_provider_library()
        ortmlx.register_execution_provider_library(ortmlx.EP_NAME)
        so = ort.SessionOptions()
        ortmlx.append_to_session_options(so)
        print(len(ortmlx.ep_devices()))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"


def test_register_reports_other_failures(monkeypatch, tmp_path):
    monkeypatch.setenv("ORTMLX_LIBRARY", str(tmp_path / "missing.so"))
    with pytest.raises(Exception) as err:
        ortmlx.register_execution_provider_library("ortmlx-missing-library")
    assert "already registered" not in str(err.value)


@pytest.mark.parametrize("form", ["none", "dict_second", "name_and_dict", "keywords",
                                  "options_keyword", "name_none"])
def test_append_call_forms(form, rng, tmp_path):
    report = str(tmp_path / "report.json")
    opts = {"report": report}
    so = _strict_options()
    if form == "none":
        ortmlx.append_to_session_options(so)
        opts = None
    elif form == "dict_second":
        ortmlx.append_to_session_options(so, opts)
    elif form == "name_and_dict":
        ortmlx.append_to_session_options(so, ortmlx.EP_NAME, opts)
    elif form == "keywords":
        ortmlx.append_to_session_options(so, name=ortmlx.EP_NAME, provider_options=opts)
    elif form == "options_keyword":
        ortmlx.append_to_session_options(so, provider_options=opts)
    else:
        ortmlx.append_to_session_options(so, None, opts)
    _runs_on_ep(so, rng)
    if opts is not None:  # the options reached the EP: it wrote the report they asked for
        with open(report) as f:
            assert json.load(f)["ep"] == ortmlx.EP_NAME


def test_append_rejects_options_given_twice_and_bad_names():
    so = ort.SessionOptions()
    with pytest.raises(TypeError):
        ortmlx.append_to_session_options(so, {"verbose": "1"}, {"verbose": "1"})
    with pytest.raises(TypeError):
        ortmlx.append_to_session_options(so, 3)
    with pytest.raises(ValueError, match="no_such_option"):
        ortmlx.append_to_session_options(so, ortmlx.EP_NAME, {"no_such_option": "1"})


def _create_ep_factories_with(get_api, version: bytes):
    """Calls the library's CreateEpFactories with an OrtApiBase whose GetApi and version string
    the test chooses. Returns (error message or None, *num_factories)."""
    import ctypes
    from pathlib import Path

    ort_lib = ctypes.CDLL(str(next(Path(ort.__file__).parent.glob("capi/libonnxruntime.so*"))))
    ort_lib.OrtGetApiBase.restype = ctypes.c_void_p
    get_api_t = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint32)
    version_t = ctypes.CFUNCTYPE(ctypes.c_void_p)  # a pointer into `text`, kept alive below
    real = ctypes.cast(ort_lib.OrtGetApiBase(), ctypes.POINTER(ctypes.c_void_p * 2)).contents
    real_get_api = get_api_t(real[0])

    class ApiBase(ctypes.Structure):
        _fields_ = [("GetApi", get_api_t), ("GetVersionString", version_t)]

    text = ctypes.create_string_buffer(version)
    keep = (get_api_t(lambda v: get_api(real_get_api, v)), version_t(lambda: ctypes.addressof(text)))
    base = ApiBase(*keep)
    lib = ctypes.CDLL(ortmlx.library_path())
    lib.CreateEpFactories.restype = ctypes.c_void_p
    lib.CreateEpFactories.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_void_p, ctypes.c_size_t,
                                      ctypes.POINTER(ctypes.c_size_t)]
    factories = (ctypes.c_void_p * 1)()
    num = ctypes.c_size_t(7)
    status = lib.CreateEpFactories(b"probe", ctypes.addressof(base), None, factories, 1,
                                   ctypes.byref(num))
    if not status:
        return None, num.value
    # OrtApi's third member is GetErrorMessage in every version.
    api = ctypes.cast(real_get_api(1), ctypes.POINTER(ctypes.c_void_p * 3)).contents
    get_message = ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(api[2])
    return get_message(status).decode(), num.value  # the status is left (a few bytes)


def test_library_refuses_an_older_onnxruntime():
    msg, num = _create_ep_factories_with(lambda real, v: real(v), b"1.29.1")
    assert num == 0
    assert msg is not None and ">= 1.30" in msg and "1.29.1" in msg


def test_library_refuses_an_onnxruntime_without_its_api_version():
    # An ORT older than the headers' API version answers GetApi(ORT_API_VERSION) with null.
    msg, num = _create_ep_factories_with(lambda real, v: real(v) if v < 20 else None, b"1.19.0")
    assert num == 0
    assert msg is not None and "C API version" in msg and "1.19.0" in msg
