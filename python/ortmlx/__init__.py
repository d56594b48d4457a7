"""ortmlx: locate, register and inspect the MLX execution provider for ONNX Runtime.

    import onnxruntime as ort, ortmlx
    ortmlx.register_execution_provider_library()
    so = ort.SessionOptions()
    ortmlx.append_to_session_options(so)
    sess = ort.InferenceSession("model.onnx", so)
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "append_to_session_options",
    "ep_name",
    "library_path",
    "register_execution_provider_library",
    "version",
]

_EP_NAME = "MLXExecutionProvider"
_VERSION = "0.1.0"
_REGISTERED: set[str] = set()


def ep_name() -> str:
    """The name ORT knows the EP by (selects its devices, appears in node placements)."""
    return _EP_NAME


def version() -> str:
    return _VERSION


def library_path() -> str:
    """Absolute path of libortmlx.so.

    Looks at $ORTMLX_LIBRARY, then a library packaged next to this module (wheel installs),
    then the build tree of the checkout this module lives in.
    """
    env = os.environ.get("ORTMLX_LIBRARY")
    if env:
        return str(Path(env).resolve())
    here = Path(__file__).resolve().parent
    for name in ("libortmlx.so", "libortmlx.dylib"):
        for candidate in (here / "lib" / name, here.parent.parent / "build" / name):
            if candidate.is_file():
                return str(candidate)
    raise FileNotFoundError(
        "libortmlx not found: build it with `make build`, or set ORTMLX_LIBRARY to its path"
    )


def register_execution_provider_library(registration_name: str = _EP_NAME) -> str:
    """Registers the plugin with ONNX Runtime's environment (once per process). Returns the path."""
    import onnxruntime as ort

    path = library_path()
    if registration_name not in _REGISTERED:
        ort.register_execution_provider_library(registration_name, path)
        _REGISTERED.add(registration_name)
    return path


def ep_devices():
    """The OrtEpDevice objects ORT offers for this EP (registering the library if needed)."""
    import onnxruntime as ort

    register_execution_provider_library()
    return [d for d in ort.get_ep_devices() if d.ep_name == _EP_NAME]


def append_to_session_options(session_options, provider_options: dict | None = None):
    """Adds MLXExecutionProvider to `session_options` (before ORT's CPU EP, which stays the fallback).

    provider_options become session config entries `ep.mlxexecutionprovider.<key>`. They are
    checked here against the EP's option table (ValueError naming the option), because ORT's Python
    API otherwise falls back to its CPU EP with only a warning when the EP refuses them.
    """
    from ortmlx.options import validate

    opts = validate(provider_options or {})
    devices = ep_devices()
    if not devices:
        raise RuntimeError("ONNX Runtime offers no device for MLXExecutionProvider")
    session_options.add_provider_for_devices(devices[:1], opts)
    return session_options
