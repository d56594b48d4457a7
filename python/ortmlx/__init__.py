"""ortmlx: locate, register and inspect the MLX execution provider for ONNX Runtime.

    import onnxruntime as ort, ortmlx
    ort.register_execution_provider_library(ortmlx.get_ep_name(), ortmlx.get_library_path())
    so = ort.SessionOptions()
    ortmlx.append_to_session_options(so, provider_options={"verbose": "1"})
    sess = ort.InferenceSession("model.onnx", so)

Two naming schemes are offered so that code written for other plugin EPs works unchanged:
ONNX Runtime's plugin-EP packaging convention (`get_library_path`, `get_ep_names`, `get_ep_name`)
and the reference Apple MLX EP's module API (`EP_NAME`, `ep_name`, `version`, `vendor`,
`library_path`, `register_execution_provider_library`, `append_to_session_options`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "EP_NAME",
    "__version__",
    "append_to_session_options",
    "ep_devices",
    "ep_name",
    "get_ep_name",
    "get_ep_names",
    "get_library_path",
    "library_path",
    "register_execution_provider_library",
    "vendor",
    "version",
]

EP_NAME = "MLXExecutionProvider"
__version__ = "0.1.0"
_VENDOR = "ortmlx"  # the factory's vendor string (OrtEpDevice.ep_vendor)

_REGISTERED: set[str] = set()
_LOCK = threading.Lock()


def ep_name() -> str:
    """The name ORT knows the EP by (selects its devices, appears in node placements)."""
    return EP_NAME


def get_ep_name() -> str:
    """ORT's packaging convention: the EP name, to select this EP's OrtEpDevice objects."""
    return EP_NAME


def get_ep_names() -> list[str]:
    """ORT's packaging convention: every EP name the library provides (one here)."""
    return [EP_NAME]


def version() -> str:
    return __version__


def vendor() -> str:
    return _VENDOR


def library_path() -> str:
    """Absolute path of libortmlx.so.

    Looks at $ORTMLX_LIBRARY, then a library packaged next to this module (wheel installs),
    then the build tree of the checkout this module lives in.
    """
    env = os.environ.get("ORTMLX_LIBRARY")
    if env:
        path = Path(env).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"ORTMLX_LIBRARY names {path}, which is not a file")
        return str(path)
    here = Path(__file__).resolve().parent
    for name in ("libortmlx.so", "libortmlx.dylib"):
        for candidate in (here / "lib" / name, here.parent.parent / "build" / name):
            if candidate.is_file():
                return str(candidate)
    raise FileNotFoundError(
        "libortmlx not found: install a wheel (ortmlx-cpu or ortmlx-cu13), build it with "
        "`make build`, or set ORTMLX_LIBRARY to its path"
    )


def get_library_path() -> str:
    """ORT's packaging convention: absolute path of the plugin library, for
    onnxruntime.register_execution_provider_library(name, path)."""
    return library_path()


def _already_registered(error: Exception) -> bool:
    # ORT 1.30 raises onnxruntime...Fail("... library is already registered under NAME") when a
    # registration name is taken; its Python API has no query for registered libraries.
    return "already registered" in str(error)


def register_execution_provider_library(name: str = EP_NAME, **kwargs) -> str:
    """Registers the plugin with ONNX Runtime's environment under `name`. Returns the path.

    Idempotent: a second call, or a library ORT already registered under `name` (by the caller,
    through onnxruntime.register_execution_provider_library), is success.
    """
    import onnxruntime as ort

    if "registration_name" in kwargs:  # the keyword of earlier releases
        name = kwargs.pop("registration_name")
    if kwargs:
        raise TypeError(f"unexpected keyword arguments: {sorted(kwargs)}")
    path = library_path()
    with _LOCK:
        if name not in _REGISTERED:
            try:
                ort.register_execution_provider_library(name, path)
            except Exception as e:  # noqa: BLE001 - ORT's pybind exception types are not public
                if not _already_registered(e):
                    raise
            _REGISTERED.add(name)
    return path


def ep_devices(name: str = EP_NAME):
    """The OrtEpDevice objects ORT offers for this EP (registering the library under `name` if
    needed)."""
    import onnxruntime as ort

    register_execution_provider_library(name)
    return [d for d in ort.get_ep_devices() if d.ep_name == EP_NAME]


def append_to_session_options(session_options, name=EP_NAME, provider_options=None):
    """Adds MLXExecutionProvider to `session_options` (before ORT's CPU EP, which stays the
    fallback), registering the library under `name` first if needed.

    Both call forms work: `append_to_session_options(so, name, provider_options)` (the reference
    EP's) and `append_to_session_options(so, provider_options)` (a mapping in second position is
    provider options; ortmlx's earlier form).

    provider_options become session config entries `ep.mlxexecutionprovider.<key>`. They are
    checked here against the EP's option table (ValueError naming the option), because ORT's Python
    API otherwise falls back to its CPU EP with only a warning when the EP refuses them.
    """
    from ortmlx.options import validate

    if isinstance(name, Mapping):
        if provider_options is not None:
            raise TypeError("provider options given twice (second and third argument)")
        name, provider_options = EP_NAME, name
    if name is None:
        name = EP_NAME
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    opts = validate(dict(provider_options or {}))
    devices = ep_devices(name)
    if not devices:
        raise RuntimeError(f"ONNX Runtime offers no device for {EP_NAME}")
    session_options.add_provider_for_devices(devices[:1], opts)
    return session_options
