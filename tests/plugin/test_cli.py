"""`python -m ortmlx doctor` and `python -m ortmlx run MODEL.onnx` on small models from
ortmlx.models."""

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from ortmlx.__main__ import main
from ortmlx.models import mlp
from ortmlx.testing import make_model, mlx_backend


def test_doctor_passes_in_a_working_setup():
    r = subprocess.run([sys.executable, "-m", "ortmlx", "doctor"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    labels = ["onnxruntime", "mlx wheels", "library", "backend", "precision", "tiny model"]
    if mlx_backend() != "gpu":  # the fused CPU kernels' instruction set: MLX's CPU backend only
        labels.append("cpu kernels")
    for label in labels:
        assert f"  {label} " in r.stdout, label
    assert "3/3 nodes on the EP" in r.stdout
    assert r.stdout.rstrip().endswith("runs a model wholly on MLX")


def test_doctor_fails_clearly_without_the_library(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ORTMLX_LIBRARY", str(tmp_path / "nowhere" / "libortmlx.so"))
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "problems:" in out and "nowhere" in out


@pytest.fixture
def mlp_file(tmp_path):
    """The MLP with a symbolic batch dimension."""
    model, _ = mlp(batch=4)
    for vi in (model.graph.input[0], model.graph.output[0]):
        vi.type.tensor_type.shape.dim[0].dim_param = "batch"
    path = tmp_path / "mlp.onnx"
    onnx.save(model, str(path))
    return path


def test_run_reports_placement_error_and_times(mlp_file, tmp_path, capsys):
    report = tmp_path / "out.json"
    assert main(["run", str(mlp_file), "--dim", "batch=3", "-o", "cpu_claim=all",
                 "--repeat", "2", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "6 of 6 on MLXExecutionProvider" in out
    assert "input       x: float32[3, 32]" in out
    data = json.loads(report.read_text())
    assert data["nodes_on_ep"] == data["nodes_total"] == 6
    assert len(data["partitions"]) == 1 and data["partitions"][0]["nodes"] == 6
    assert data["errors_vs_cpu"]["y"]["max_abs_error"] < 1e-5
    assert data["median_seconds"]["ort_cpu"] > 0 and data["median_seconds"]["mlx_ep"] > 0
    assert data["inputs"]["x"]["shape"] == [3, 32]


def test_run_default_symbolic_dim_is_one(mlp_file, tmp_path, capsys):
    report = tmp_path / "out.json"
    assert main(["run", str(mlp_file), "-o", "cpu_claim=all", "--repeat", "1",
                 "--report", str(report)]) == 0
    assert json.loads(report.read_text())["inputs"]["x"]["shape"] == [1, 32]


def test_run_with_inputs_file_and_refused_ops(tmp_path, capsys, rng):
    # RandomUniformLike has no MLX implementation: it stays on ORT CPU and is listed with its
    # reason (seeded: ORT CPU gives the same values in both sessions).
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 5])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 5])
    nodes = [h.make_node("Exp", ["x"], ["a"], name="exp"),
             h.make_node("RandomUniformLike", ["a"], ["b"], name="random", seed=1.0),
             h.make_node("Tanh", ["b"], ["y"], name="tanh")]
    path = tmp_path / "chain.onnx"
    onnx.save(make_model(h.make_graph(nodes, "chain", [x], [y])), str(path))
    inputs = tmp_path / "in.npz"
    data = rng.uniform(-1, 1, (2, 5)).astype(np.float32)
    np.savez(inputs, x=data)
    report = tmp_path / "out.json"
    assert main(["run", str(path), "--inputs", str(inputs), "-o", "cpu_claim=all",
                 "--repeat", "1", "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "2 of 3 on MLXExecutionProvider" in out
    assert "RandomUniformLike x1: no MLX implementation of RandomUniformLike" in out
    got = json.loads(report.read_text())
    assert len(got["partitions"]) == 2
    assert got["errors_vs_cpu"]["y"]["max_abs_error"] < 1e-5


def test_run_rejects_bad_arguments(mlp_file, tmp_path):
    with pytest.raises(SystemExit, match="name=value"):
        main(["run", str(mlp_file), "--dim", "batch"])
    np.savez(tmp_path / "in.npz", other=np.zeros(3, np.float32))
    with pytest.raises(SystemExit, match="no array named 'x'"):
        main(["run", str(mlp_file), "--inputs", str(tmp_path / "in.npz")])
