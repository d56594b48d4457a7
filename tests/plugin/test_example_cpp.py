"""examples/cpp: the C++ application registers the library, appends the EP with options and
reports where each node ran."""

import subprocess
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ortmlx
from ortmlx.testing import make_model


def test_cpp_example_runs_a_model_on_the_ep(tmp_path):
    exe = Path(ortmlx.library_path()).parent / "ortmlx_run_model"
    if not exe.is_file():
        pytest.skip(f"{exe.name} not built next to the library (ORTMLX_BUILD_EXAMPLES=OFF)")
    x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])
    y = h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])
    nodes = [h.make_node("Tanh", ["x"], ["t"], name="tanh"),
             h.make_node("RandomUniformLike", ["t"], ["y"], name="random")]  # no MLX version
    path = tmp_path / "m.onnx"
    onnx.save(make_model(h.make_graph(nodes, "g", [x], [y])), str(path))
    r = subprocess.run([str(exe), ortmlx.library_path(), str(path), "cpu_claim=all"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "node tanh (Tanh) ran on MLXExecutionProvider" in r.stdout, r.stdout
    assert "node random (RandomUniformLike) ran on CPUExecutionProvider" in r.stdout, r.stdout
    bad = subprocess.run([str(exe), ortmlx.library_path(), str(path), "no_such_option=1"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "no_such_option" in bad.stderr
