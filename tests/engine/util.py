"""Models and helpers shared by the engine tests (elementwise ops only, so they never depend on
op families that other work is still adding)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from ortmlx.testing import make_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def dynamic_chain_model(width: int = 8, weight_seed: int = 0):
    """x[n, width] -> Mul(w) -> Tanh -> Exp -> Add(x) -> Sigmoid -> y, with a symbolic batch dim,
    so one session can be fed many shapes. Node names: mul, tanh, exp, add, sig."""
    rng = np.random.default_rng(weight_seed)
    x = h.make_tensor_value_info("x", T.FLOAT, ["n", width])
    y = h.make_tensor_value_info("y", T.FLOAT, ["n", width])
    w = onnx.numpy_helper.from_array(rng.uniform(-1.5, 1.5, width).astype(np.float32), "w")
    nodes = [
        h.make_node("Mul", ["x", "w"], ["a"], name="mul"),
        h.make_node("Tanh", ["a"], ["b"], name="tanh"),
        h.make_node("Exp", ["b"], ["c"], name="exp"),
        h.make_node("Add", ["c", "x"], ["d"], name="add"),
        h.make_node("Sigmoid", ["d"], ["y"], name="sig"),
    ]
    return make_model(h.make_graph(nodes, "chain", [x], [y], [w]))


CHAIN_NODES = ["mul", "tanh", "exp", "add", "sig"]


def elementwise_zoo_model(shape=(4, 16)):
    """Every elementwise op the engine tests may rely on, in one fused graph (positive-domain ops
    get positive inputs through Abs/Exp first)."""
    x = h.make_tensor_value_info("x", T.FLOAT, list(shape))
    z = h.make_tensor_value_info("z", T.FLOAT, list(shape))
    y = h.make_tensor_value_info("y", T.FLOAT, list(shape))
    two = onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two")
    half = onnx.numpy_helper.from_array(np.array(0.5, np.float32), "half")
    n = h.make_node
    nodes = [
        n("Add", ["x", "z"], ["s"], name="add"),
        n("Sub", ["s", "two"], ["d"], name="sub"),
        n("Mul", ["d", "z"], ["m"], name="mul"),
        n("Abs", ["m"], ["ab"], name="abs"),
        n("Add", ["ab", "half"], ["pos"], name="add_pos"),
        n("Div", ["x", "pos"], ["q"], name="div"),
        n("Pow", ["pos", "half"], ["p"], name="pow"),
        n("Neg", ["q"], ["ng"], name="neg"),
        n("Exp", ["ng"], ["e"], name="exp"),
        n("Log", ["pos"], ["lg"], name="log"),
        n("Sqrt", ["pos"], ["sq"], name="sqrt"),
        n("Reciprocal", ["sq"], ["rc"], name="recip"),
        n("Relu", ["d"], ["rl"], name="relu"),
        n("Sigmoid", ["m"], ["sg"], name="sigmoid"),
        n("Tanh", ["q"], ["th"], name="tanh"),
        n("Erf", ["ng"], ["ef"], name="erf"),
        n("Gelu", ["d"], ["gl"], name="gelu"),
        n("Add", ["p", "e"], ["a1"], name="a1"),
        n("Add", ["lg", "rc"], ["a2"], name="a2"),
        n("Add", ["rl", "sg"], ["a3"], name="a3"),
        n("Add", ["th", "ef"], ["a4"], name="a4"),
        n("Add", ["a1", "a2"], ["a5"], name="a5"),
        n("Add", ["a3", "a4"], ["a6"], name="a6"),
        n("Add", ["a5", "a6"], ["a7"], name="a7"),
        n("Mul", ["a7", "gl"], ["y"], name="out"),
    ]
    return make_model(h.make_graph(nodes, "zoo", [x, z], [y], [two, half]))


def run_python(code: str, env_extra: dict | None = None, check: bool = True):
    """Runs `code` in a fresh interpreter at the repo root (EP env vars are read per process)."""
    env = dict(os.environ)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, cwd=ROOT, check=check)


SUMMARY_RE = {
    "claim": re.compile(r"claim:\s+(\d+)/(\d+) nodes claimed \(([\d.]+)%\) in (\d+) cluster\(s\), "
                        r"(\d+) GetCapability call\(s\)"),
    "nodes": re.compile(r"nodes:\s+(\d+)/(\d+) nodes ran on the EP \(([\d.]+)%\); (\d+) assigned in "
                        r"(\d+) fused subgraph\(s\), (\d+) of them ran"),
    "compute": re.compile(r"compute: (\d+) run\(s\): compiled=(\d+) eager=(\d+) failed=(\d+)\s+"
                          r"\(cache: (\d+) HIT / (\d+) MISS / (\d+) RETRACE, (\d+) evicted; "
                          r"(\d+) eager fallback\(s\)\)"),
    "timing": re.compile(r"timing:\s+translate=([\d.]+)ms compile=([\d.]+)ms \(x(\d+)\) "
                         r"eval=([\d.]+)ms copy=([\d.]+)ms queue=([\d.]+)ms other=([\d.]+)ms "
                         r"total=([\d.]+)ms"),
}


def parse_summary(stderr: str) -> dict:
    """The numbers of the VERBOSE session summary, by line."""
    assert "===== MLX EP session summary =====" in stderr, stderr
    out = {}
    for key, rx in SUMMARY_RE.items():
        m = rx.search(stderr)
        assert m, f"summary line '{key}' not found in:\n{stderr}"
        out[key] = [float(g) if "." in g else int(g) for g in m.groups()]
    return out


def load_trace(path: str) -> list[dict]:
    with open(path) as f:
        data = json.load(f)
    assert isinstance(data, dict) and isinstance(data["traceEvents"], list)
    return data["traceEvents"]
