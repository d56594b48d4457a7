"""The CPU claim policy (option cpu_claim, issue 9): on MLX's CPU backend the EP claims by
default only what runs at least as fast there as on ORT's CPU EP (the AttentionVJP training
kernels), so adding the EP never slows a model down on a CPU-only machine; cpu_claim=all claims
every node the EP can run exactly (the rest of the suite runs that way, tests/conftest.py).
GPU backends claim everything they can under either value."""

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from ortmlx.contracts import attention_vjp_feeds, attention_vjp_model
from ortmlx.testing import EpRun, make_model, mlx_backend, random_array, run_cpu

POLICY_REASON = "left to ORT's CPU EP"


def _mlp():
    x = h.make_tensor_value_info("x", T.FLOAT, [4, 8])
    w = h.make_tensor_value_info("w", T.FLOAT, [8, 8])
    y = h.make_tensor_value_info("y", T.FLOAT, [4, 8])
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             h.make_node("Relu", ["m"], ["y"], name="relu")]
    return make_model(h.make_graph(nodes, "mlp", [x, w], [y]))


@pytest.mark.parametrize("value", ["auto", "all"])
def test_ordinary_ops_follow_the_policy(value, rng):
    model = _mlp()
    feeds = {"x": random_array(rng, (4, 8)), "w": random_array(rng, (8, 8))}
    run = EpRun(model, provider_options={"cpu_claim": value})
    try:
        got = run.run(feeds)[0]
        report = run.report()
    finally:
        run.close()
    np.testing.assert_allclose(got, run_cpu(model, feeds)[0], rtol=1e-5, atol=1e-6)
    if value == "auto" and mlx_backend() == "cpu":
        assert report.executed_count() == 0, report.fused
        refused = report.refused()
        assert set(refused) == {"MatMul", "Relu"}, refused
        assert all(POLICY_REASON in r["reason"] and "cpu_claim=all" in r["reason"]
                   for r in refused.values()), refused
    else:
        assert report.executed_count() == 2, (report.fused, report.refused())


def test_the_training_contract_is_claimed_by_default(rng):
    model = attention_vjp_model(1, 8, 8, 2, 2, 16, rank=4, causal=True)
    feeds = attention_vjp_feeds(model, rng)
    run = EpRun(model, provider_options={"cpu_claim": "auto"})
    try:
        run.run(feeds)
        report = run.report()
    finally:
        run.close()
    assert "attention_vjp" in report.executed_nodes(), (report.fused, report.refused())


def test_environment_variable_and_bad_values(monkeypatch, rng):
    model = _mlp()
    feeds = {"x": random_array(rng, (4, 8)), "w": random_array(rng, (8, 8))}
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_CPU_CLAIM", "auto")
    run = EpRun(model)
    try:
        run.run(feeds)
        on_ep = run.report().executed_count()
    finally:
        run.close()
    assert on_ep == (0 if mlx_backend() == "cpu" else 2)
    with pytest.raises(ValueError, match="cpu_claim"):
        EpRun(model, provider_options={"cpu_claim": "some"})
