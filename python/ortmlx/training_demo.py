"""A small training step whose graph holds a pkg.onnax AttentionVJP contract (part of `make demo`).

One self-attention layer (rank-3 layout, causal, 2 heads of 32) trained for a few SGD steps on a
squared-error loss. The forward pass is plain ONNX; the backward pass of attention is the
AttentionVJPRecompute contract (a model-local function in pkg.onnax, as an ONNX autodiff tool
emits it); the weight gradients and the update are plain ONNX again. The EP claims the contract
by its name and runs it fused; ORT's CPU EP runs the same graph with the function body inlined.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ortmlx import contracts
from ortmlx.testing import EpRun, cpu_session, make_model

BATCH, SEQ, EMBED, HEADS = 2, 32, 64, 2
HEAD_DIM = EMBED // HEADS
LR = 0.5
CONTRACT_NODE = "attention_vjp"


def training_step_model() -> onnx.ModelProto:
    scale = 1.0 / math.sqrt(HEAD_DIM)
    name = contracts.attention_vjp_name(3, HEADS, HEADS, HEAD_DIM, scale, 1, (0, 1, 2), 0,
                                        recompute=True)
    fn = contracts.attention_vjp_function(name, 3, HEADS, HEADS, HEAD_DIM, scale, 1, (0, 1, 2), 0,
                                          recompute=True)
    inits = [
        numpy_helper.from_array(np.array([BATCH, SEQ, HEADS, HEAD_DIM], np.int64), "split"),
        numpy_helper.from_array(np.array([BATCH, SEQ, EMBED], np.int64), "merge"),
        numpy_helper.from_array(np.array([BATCH * SEQ, EMBED], np.int64), "rows"),
        numpy_helper.from_array(np.array(scale, np.float32), "scale"),
        numpy_helper.from_array(np.array(LR, np.float32), "lr"),
        numpy_helper.from_array(np.array(1.0 / (BATCH * SEQ * EMBED), np.float32), "inv_n"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),
        numpy_helper.from_array(np.triu(np.full((SEQ, SEQ), -1e9, np.float32), 1), "causal_bias"),
    ]
    n = helper.make_node
    nodes = []
    for w in ("q", "k", "v"):
        nodes.append(n("MatMul", ["x", f"w{w}"], [w], name=f"fwd/{w}_proj"))
        nodes.append(n("Reshape", [w, "split"], [f"{w}4"], name=f"fwd/{w}_split"))
        nodes.append(n("Transpose", [f"{w}4"], [f"{w}h"], name=f"fwd/{w}_heads", perm=[0, 2, 1, 3]))
    nodes += [
        n("Transpose", ["kh"], ["kt"], name="fwd/k_t", perm=[0, 1, 3, 2]),
        n("MatMul", ["qh", "kt"], ["s0"], name="fwd/scores"),
        n("Mul", ["s0", "scale"], ["s1"], name="fwd/scale"),
        n("Add", ["s1", "causal_bias"], ["s2"], name="fwd/causal"),
        n("Softmax", ["s2"], ["p"], name="fwd/softmax", axis=-1),
        n("MatMul", ["p", "vh"], ["yh"], name="fwd/pv"),
        n("Transpose", ["yh"], ["y4"], name="fwd/y_merge_t", perm=[0, 2, 1, 3]),
        n("Reshape", ["y4", "merge"], ["y"], name="fwd/y_merge"),
        # loss = 0.5 * mean((y - target)^2);  dL/dy = (y - target) / N
        n("Sub", ["y", "target"], ["err"], name="loss/err"),
        n("Mul", ["err", "err"], ["sq"], name="loss/sq"),
        n("ReduceMean", ["sq"], ["mse"], name="loss/mean", keepdims=0),
        n("Mul", ["mse", "half"], ["loss"], name="loss/half"),
        n("Mul", ["err", "inv_n"], ["dy"], name="grad/dy"),
        # the attention pullback: the contract node (Recompute form: Y is recomputed)
        n(name, ["q", "k", "v", "dy", "mask"], ["dq", "dk", "dv"], name=CONTRACT_NODE,
          domain=contracts.DOMAIN),
        n("Reshape", ["x", "rows"], ["x2"], name="grad/x_rows"),
        n("Transpose", ["x2"], ["xt"], name="grad/x_t", perm=[1, 0]),
    ]
    for w in ("q", "k", "v"):
        nodes += [
            n("Reshape", [f"d{w}", "rows"], [f"d{w}2"], name=f"grad/d{w}_rows"),
            n("MatMul", ["xt", f"d{w}2"], [f"dw{w}"], name=f"grad/dw{w}"),
            n("Mul", [f"dw{w}", "lr"], [f"step{w}"], name=f"sgd/{w}_step"),
            n("Sub", [f"w{w}", f"step{w}"], [f"w{w}_new"], name=f"sgd/{w}_update"),
        ]
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "attention_training_step",
        [helper.make_tensor_value_info("x", f32, [BATCH, SEQ, EMBED]),
         helper.make_tensor_value_info("target", f32, [BATCH, SEQ, EMBED])]
        + [helper.make_tensor_value_info(f"w{w}", f32, [EMBED, EMBED]) for w in "qkv"]
        + [helper.make_tensor_value_info("mask", TensorProto.BOOL, [1])],
        [helper.make_tensor_value_info("loss", f32, [])]
        + [helper.make_tensor_value_info(f"w{w}_new", f32, [EMBED, EMBED]) for w in "qkv"],
        inits)
    return make_model(graph, opset=21, extra_opsets={contracts.DOMAIN: 1}, functions=[fn])


def _train(session_run, feeds, steps):
    feeds = dict(feeds)
    losses = []
    for _ in range(steps):
        loss, wq, wk, wv = session_run(feeds)
        losses.append(float(loss))
        feeds.update(wq=wq, wk=wk, wv=wv)
    return losses, feeds


def main(seed: int = 0, steps: int = 5) -> bool:
    rng = np.random.default_rng(seed)
    model = training_step_model()
    feeds = {
        "x": rng.standard_normal((BATCH, SEQ, EMBED)).astype(np.float32),
        "target": rng.standard_normal((BATCH, SEQ, EMBED)).astype(np.float32),
        "mask": np.array([True]),
    }
    for w in "qkv":
        feeds[f"w{w}"] = (rng.standard_normal((EMBED, EMBED)) / math.sqrt(EMBED)).astype(np.float32)

    ep = EpRun(model)
    try:
        ep_losses, ep_final = _train(lambda f: ep.run(f), feeds, steps)
        report = ep.report()
    finally:
        ep.close()
    cpu = cpu_session(model)
    cpu_losses, cpu_final = _train(lambda f: cpu.run(None, f), feeds, steps)

    claimed = CONTRACT_NODE in report.executed_nodes()
    on_ep, total = report.executed_count(), report.total_nodes()
    diff = max(float(np.max(np.abs(ep_final[k].astype(np.float64) - cpu_final[k])))
               for k in ("wq", "wk", "wv"))
    print(f"== training step with AttentionVJP (B{BATCH} S{SEQ} E{EMBED} H{HEADS}, causal, "
          f"{steps} SGD steps) ==")
    print(f"  contract node '{CONTRACT_NODE}' claimed and run by MLXExecutionProvider: "
          f"{'yes' if claimed else 'NO'}")
    paths = ", ".join(f"{k} x{v['count']}" for k, v in sorted(report.paths().items())) or "none"
    print(f"  nodes on MLXExecutionProvider: {on_ep}/{total}; fused paths: {paths}")
    print("  loss per step (MLX EP):  " + " ".join(f"{x:.5f}" for x in ep_losses))
    print("  loss per step (ORT CPU): " + " ".join(f"{x:.5f}" for x in cpu_losses))
    print(f"  max |weights MLX - CPU| after {steps} steps = {diff:.3e}  (limit 1e-4)")
    ok = claimed and diff <= 1e-4 and ep_losses[-1] < ep_losses[0]
    print("  result:", "OK" if ok else "FAILED")
    return ok
