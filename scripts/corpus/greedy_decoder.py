"""Builds tests/corpus/models/greedy_decoder.onnx: a tiny greedy decoder written with onnx.helper
(no exporter has a control-flow model this small), packed like the exported corpus models.

prompt [1, 16] -> LayerNormalization -> If (sum(prompt) > 0, a runtime condition: one of two
projections) -> h0; then a Loop of at most 8 decoding steps: logits = h @ W_out + b, token =
argmax, h = an If on the step's runtime max logit (two update rules, both reading the token's
embedding and the outer-scope weights), tokens appended with Concat (a loop-carried value that
grows), the loop ends at the EOS token (condition from Equal). Outputs: the tokens, the final
state, and each step's max logit (a scan output).

    .venv/bin/python scripts/corpus/greedy_decoder.py   (deterministic; needs only onnx, numpy)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.corpus.corpus import MODELS_DIR, pack_model  # noqa: E402

DIM, VOCAB, STEPS, EOS = 16, 12, 8, 5
F, I64, B = TP.FLOAT, TP.INT64, TP.BOOL


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(20261203)

    def w(name, *shape, scale=1.0):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        w("ln_g", DIM, scale=0.2), w("ln_b", DIM, scale=0.1),
        w("W_a", DIM, DIM, scale=0.5), w("W_b", DIM, DIM, scale=0.5),
        w("W_out", DIM, VOCAB, scale=0.8), w("b_out", VOCAB, scale=0.1),
        w("E", VOCAB, DIM), w("W_h", DIM, DIM, scale=0.4),
        numpy_helper.from_array(np.float32(0.0), "zero_f"),
        numpy_helper.from_array(np.float32(1.0), "thr"),
        numpy_helper.from_array(np.array([EOS], np.int64), "eos"),
        numpy_helper.from_array(np.array([0], np.int64), "ax0"),
        numpy_helper.from_array(np.int64(STEPS), "max_steps"),
        numpy_helper.from_array(np.array(True), "go"),
        numpy_helper.from_array(np.zeros((0,), np.int64), "no_tokens"),
    ]
    inits[0].CopyFrom(numpy_helper.from_array(
        (1.0 + 0.2 * rng.standard_normal(DIM)).astype(np.float32), "ln_g"))

    # Top-level If: the branch depends on the prompt (a runtime condition).
    then_g = helper.make_graph(
        [helper.make_node("MatMul", ["ln", "W_a"], ["pa"], name="start/then/matmul"),
         helper.make_node("Tanh", ["pa"], ["h0_t"], name="start/then/tanh")],
        "start_then", [], [vi("h0_t", F, [1, DIM])])
    else_g = helper.make_graph(
        [helper.make_node("MatMul", ["ln", "W_b"], ["pb"], name="start/else/matmul"),
         helper.make_node("Sin", ["pb"], ["h0_e"], name="start/else/sin")],
        "start_else", [], [vi("h0_e", F, [1, DIM])])

    # Inside the step: the update rule depends on the step's max logit.
    upd_then = helper.make_graph(
        [helper.make_node("MatMul", ["emb", "W_h"], ["eh"], name="step/upd/then/matmul"),
         helper.make_node("Add", ["eh", "h_in"], ["uh"], name="step/upd/then/add"),
         helper.make_node("Tanh", ["uh"], ["h_t"], name="step/upd/then/tanh")],
        "upd_then", [], [vi("h_t", F, [1, DIM])])
    upd_else = helper.make_graph(
        [helper.make_node("Sub", ["emb", "h_in"], ["dh"], name="step/upd/else/sub"),
         helper.make_node("Sin", ["dh"], ["h_e"], name="step/upd/else/sin")],
        "upd_else", [], [vi("h_e", F, [1, DIM])])
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "W_out"], ["lm"], name="step/logits/matmul"),
         helper.make_node("Add", ["lm", "b_out"], ["logits"], name="step/logits/add"),
         helper.make_node("ArgMax", ["logits"], ["tok"], name="step/argmax", axis=1, keepdims=0),
         helper.make_node("Gather", ["E", "tok"], ["emb"], name="step/embed", axis=0),
         helper.make_node("ReduceMax", ["logits"], ["top"], name="step/top", keepdims=0),
         helper.make_node("Greater", ["top", "thr"], ["confident"], name="step/confident"),
         helper.make_node("If", ["confident"], ["h_out"], name="step/update",
                          then_branch=upd_then, else_branch=upd_else),
         helper.make_node("Concat", ["toks_in", "tok"], ["toks_out"], name="step/append", axis=0),
         helper.make_node("Equal", ["tok", "eos"], ["is_eos"], name="step/is_eos"),
         helper.make_node("Not", ["is_eos"], ["more"], name="step/not_eos"),
         helper.make_node("Squeeze", ["more", "ax0"], ["cond_out"], name="step/cond"),
         helper.make_node("Identity", ["top"], ["top_out"], name="step/top_out")],
        "step", [vi("i", I64, []), vi("cond_in", B, []), vi("h_in", F, [1, DIM]),
                 vi("toks_in", I64, ["n"])],
        [vi("cond_out", B, []), vi("h_out", F, [1, DIM]), vi("toks_out", I64, ["m"]),
         vi("top_out", F, [])])

    nodes = [
        helper.make_node("LayerNormalization", ["prompt", "ln_g", "ln_b"], ["ln"], name="norm",
                         axis=-1, epsilon=1e-5),
        helper.make_node("ReduceSum", ["prompt"], ["total"], name="start/sum", keepdims=0),
        helper.make_node("Greater", ["total", "zero_f"], ["positive"], name="start/positive"),
        helper.make_node("If", ["positive"], ["h0"], name="start", then_branch=then_g,
                         else_branch=else_g),
        helper.make_node("Loop", ["max_steps", "go", "h0", "no_tokens"],
                         ["state", "tokens", "top_logits"], name="decode", body=body),
    ]
    graph = helper.make_graph(
        nodes, "greedy_decoder", [vi("prompt", F, [1, DIM])],
        [vi("tokens", I64, ["steps"]), vi("state", F, [1, DIM]), vi("top_logits", F, ["steps"])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    return model


def main():
    model = build()
    inputs = [{"name": "prompt", "shape": [1, DIM], "dtype": "float32", "kind": "normal"}]
    info = {"source": "hand-built greedy decoder (scripts/corpus/greedy_decoder.py)"}
    pack_model(model, "greedy_decoder", inputs, info)
    out = MODELS_DIR / "greedy_decoder.onnx"
    onnx.save(model, str(out))
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
