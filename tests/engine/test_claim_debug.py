"""ONNXRUNTIME_EP_MLX_CLAIM_DEBUG: per refused op type, count, first reason, up to 16 node names."""

import re

from tests.engine.util import run_python

SCRIPT = """
    import numpy as np, ortmlx
    from onnx import TensorProto as T, helper as h
    from ortmlx.testing import EpRun, make_model
    ortmlx.register_execution_provider_library()
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
    nodes, prev = [], "x"
    for i in range(20):   # Exp (claimed) and a random op (refused) alternate; another once
        op = "RandomUniformLike" if i % 2 else "Exp"
        nodes.append(h.make_node(op, [prev], [f"t{i}"], name=f"{op.lower()}_{i}"))
        prev = f"t{i}"
    nodes.append(h.make_node("RandomNormalLike", [prev], ["y"], name="normal_last"))
    EpRun(make_model(h.make_graph(nodes, "g", [x], [y]))OPTS).run({"x": np.full((2, 3), 0.1, np.float32)})
    print("done")
"""


def _check(stderr):
    assert "11/21 nodes claimed" in stderr or "10/21 nodes claimed" in stderr, stderr
    m = re.search(r"refused RandomUniformLike x(\d+): no MLX implementation of "
                  r"RandomUniformLike \[([^\]]*)\]", stderr)
    assert m, stderr
    assert int(m.group(1)) == 10
    names = [n.strip() for n in m.group(2).split(",")]
    assert names == [f"randomuniformlike_{i}" for i in range(1, 20, 2)]
    assert ("refused RandomNormalLike x1: no MLX implementation of RandomNormalLike "
            "[normal_last]") in stderr


def test_claim_debug_variable():
    out = run_python(SCRIPT.replace("OPTS", ""), {"ONNXRUNTIME_EP_MLX_CLAIM_DEBUG": "1"})
    _check(out.stderr)


def test_claim_debug_provider_option():
    out = run_python(SCRIPT.replace("OPTS", ', provider_options={"claim_debug": 1}'))
    _check(out.stderr)


def test_claim_debug_lists_at_most_16_names():
    code = SCRIPT.replace("OPTS", "").replace("range(20)", "range(40)").replace(
        'op = "RandomUniformLike" if i % 2 else "Exp"', 'op = "RandomUniformLike"')
    out = run_python(code, {"ONNXRUNTIME_EP_MLX_CLAIM_DEBUG": "1"})
    m = re.search(r"refused RandomUniformLike x40: [^\[]*\[([^\]]*)\]", out.stderr)
    assert m, out.stderr
    names = [n.strip() for n in m.group(1).split(",")]
    assert names[:16] == [f"randomuniformlike_{i}" for i in range(16)]
    assert names[16:] == ["... 24 more"]


def test_no_claim_debug_by_default():
    out = run_python(SCRIPT.replace("OPTS", ""))
    assert "refused" not in out.stderr
