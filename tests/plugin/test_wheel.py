"""The CPU wheel (ortmlx-cpu): built from the library's existing CMake tree, installed into a fresh
venv outside the checkout with its pinned dependencies, then used the way ORT's plugin-EP guide
shows. Skipped, with the reason, where it cannot be built (no CMake tree behind the library under
test, a GPU build, no package index for pip's isolated build)."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ortmlx
from ortmlx.testing import mlx_backend

ROOT = Path(__file__).resolve().parents[2]
# Downloaded dependency wheels, kept between runs so that later runs install offline.
WHEELHOUSE = ROOT / "build-wheel" / "wheelhouse"
NO_INDEX = ("Could not find a version", "Failed to establish a new connection",
            "No matching distribution", "Temporary failure in name resolution")


def _run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def _clean_env(**extra):
    """The environment of the fresh venv's processes: nothing pointing into the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "ORTMLX_LIBRARY", "VIRTUAL_ENV")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def cpu_wheel(tmp_path_factory) -> Path:
    build_dir = Path(ortmlx.library_path()).parent
    if not (build_dir / "CMakeCache.txt").is_file():
        pytest.skip(f"the library under test is not in a CMake build tree ({build_dir})")
    if mlx_backend() != "cpu":
        pytest.skip("the library under test is a GPU build; the CPU wheel packs a CPU build")
    if shutil.which("cmake") is None or shutil.which("readelf") is None:
        pytest.skip("cmake and readelf are needed to build the wheel")
    dist = tmp_path_factory.mktemp("dist")
    r = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", dist, ROOT],
             env={**os.environ, "ORTMLX_FLAVOUR": "cpu", "ORTMLX_BUILD_DIR": str(build_dir),
                  "ORTMLX_JOBS": "2"}, timeout=900)
    if r.returncode != 0 and any(s in r.stdout + r.stderr for s in NO_INDEX):
        pytest.skip("pip could not fetch the build requirements (setuptools, wheel): "
                    "no package index reachable")
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = list(dist.glob("ortmlx_cpu-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def fresh_venv(cpu_wheel, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    base = getattr(sys, "_base_executable", sys.executable)
    r = _run([base, "-m", "venv", venv], timeout=300)
    assert r.returncode == 0, r.stderr
    py = venv / "bin" / "python"
    # onnxruntime is the user's choice (not a dependency of the wheel): the suite's pin here.
    constraints = ROOT / "requirements-base.txt"
    want = [cpu_wheel, "onnxruntime", "-c", constraints]
    install = [py, "-m", "pip", "install", "-q", "--no-index", "--find-links", WHEELHOUSE, *want]
    r = _run(install, env=_clean_env(), timeout=600)
    if r.returncode != 0:  # first run: fetch the pinned dependencies once
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        d = _run([py, "-m", "pip", "download", "-q", "-d", WHEELHOUSE, *want],
                 env=_clean_env(), timeout=900)
        for stale in WHEELHOUSE.glob("ortmlx_*.whl"):
            stale.unlink()
        if d.returncode != 0 and any(s in d.stdout + d.stderr for s in NO_INDEX):
            pytest.skip("the wheel's dependencies are not downloaded and no package index is "
                        "reachable")
        assert d.returncode == 0, d.stdout + d.stderr
        r = _run(install, env=_clean_env(), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return venv


def test_installed_wheel_runs_a_node_on_the_ep(fresh_venv, tmp_path):
    code = textwrap.dedent("""
        import sys
        from pathlib import Path
        import numpy as np
        import onnxruntime as ort
        from onnx import TensorProto as T, helper as h
        import ortmlx

        lib = ortmlx.get_library_path()
        assert Path(lib).is_relative_to(sys.prefix), lib
        ort.register_execution_provider_library(ortmlx.get_ep_name(), lib)
        devices = [d for d in ort.get_ep_devices() if d.ep_name == ortmlx.get_ep_name()]
        so = ort.SessionOptions()
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        so.add_provider_for_devices(devices, {"cpu_claim": "all"})
        x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
        y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
        g = h.make_graph([h.make_node("Tanh", ["x"], ["y"])], "g", [x], [y])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 21)], ir_version=10)
        sess = ort.InferenceSession(m.SerializeToString(), so)
        a = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
        np.testing.assert_allclose(sess.run(None, {"x": a})[0], np.tanh(a), rtol=1e-6)
        print(lib)
    """)
    py = fresh_venv / "bin" / "python"
    r = _run([py, "-c", code], cwd=tmp_path, env=_clean_env(), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lib = r.stdout.strip().splitlines()[-1]

    doctor = _run([py, "-m", "ortmlx", "doctor"], cwd=tmp_path, env=_clean_env(), timeout=300)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr

    ldd = _run(["ldd", lib]).stdout
    assert "not found" not in ldd, ldd
    assert str(ROOT) not in ldd and "/build" not in ldd, ldd
    dynamic = _run(["readelf", "-d", lib]).stdout
    runpath = [line for line in dynamic.splitlines() if "RUNPATH" in line or "RPATH" in line]
    assert runpath and all("$ORIGIN" in line and str(ROOT) not in line for line in runpath), runpath
