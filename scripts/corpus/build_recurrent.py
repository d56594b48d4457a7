"""Builds the recurrent corpus model without torch: the graph TorchScript (opset 17) exports for

    class SpeechRNN(nn.Module):            # log-mel frames -> per-frame class log-probabilities
        proj = nn.Linear(16, 32)
        lstm = nn.LSTM(32, 24, batch_first=True, bidirectional=True)
        gru = nn.GRU(48, 24, batch_first=True)
        head = nn.Linear(24, 10)
        def forward(self, feats):          # (2, 50, 16)
            x = relu(proj(feats))
            x, _ = lstm(x)
            x, h = gru(x)
            return log_softmax(head(x), -1), h

written node for node the way the exporter writes it (batch-first transposes around each
recurrent node, torch's gate order permuted into ONNX's in the weights, zero initial states as
initializers, the bidirectional Y reshaped to (T, B, 2H), the GRU with linear_before_reset=1, as
torch's GRU is defined) with torch-style uniform(-1/sqrt(H), 1/sqrt(H)) weights, then packed like
the exported models (tests/corpus/corpus.py). Needs only onnx and numpy:

    .venv/bin/python scripts/corpus/build_recurrent.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "corpus"))
import corpus  # noqa: E402

NAME = "speech_rnn"
B, T, F = 2, 50, 16
PROJ, H, CLASSES = 32, 24, 10
OPSET = 17


def uniform(rng, shape, fan):
    k = 1.0 / np.sqrt(fan)
    return rng.uniform(-k, k, size=shape).astype(np.float32)


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(zlib_seed())
    inits = []

    def init(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    nodes = []

    def node(op, ins, outs, **attrs):
        nodes.append(helper.make_node(op, ins, outs, name=f"/{op}_{len(nodes)}", **attrs))
        return outs[0] if len(outs) == 1 else outs

    # proj: Linear on a 3-D input exports as MatMul with the transposed weight, then Add.
    x = node("MatMul", ["feats", init("onnx::MatMul_proj", uniform(rng, (F, PROJ), F))],
             ["/proj/MatMul_output_0"])
    x = node("Add", [init("proj.bias", uniform(rng, (PROJ,), F)), x], ["/proj/Add_output_0"])
    x = node("Relu", [x], ["/Relu_output_0"])

    # LSTM (bidirectional, batch_first): to time-major, LSTM, Y (T, 2, B, H) -> (T, B, 2H).
    x = node("Transpose", [x], ["/lstm/Transpose_output_0"], perm=[1, 0, 2])
    w = init("onnx::LSTM_W", uniform(rng, (2, 4 * H, PROJ), H))
    r = init("onnx::LSTM_R", uniform(rng, (2, 4 * H, H), H))
    b = init("onnx::LSTM_B", uniform(rng, (2, 8 * H), H))
    h0 = init("/lstm/h0", np.zeros((2, B, H), np.float32))
    c0 = init("/lstm/c0", np.zeros((2, B, H), np.float32))
    y, _, _ = node("LSTM", [x, w, r, b, "", h0, c0],
                   ["/lstm/LSTM_output_0", "/lstm/LSTM_output_1", "/lstm/LSTM_output_2"],
                   hidden_size=H, direction="bidirectional")
    y = node("Transpose", [y], ["/lstm/Transpose_1_output_0"], perm=[0, 2, 1, 3])
    y = node("Reshape", [y, init("/lstm/Constant_output_0", np.array([0, 0, -1], np.int64))],
             ["/lstm/Reshape_output_0"])
    x = node("Transpose", [y], ["/lstm/Transpose_2_output_0"], perm=[1, 0, 2])

    # GRU (batch_first): to time-major, GRU, Y (T, 1, B, H) -> (T, B, H) -> batch-first.
    x = node("Transpose", [x], ["/gru/Transpose_output_0"], perm=[1, 0, 2])
    w = init("onnx::GRU_W", uniform(rng, (1, 3 * H, 2 * H), H))
    r = init("onnx::GRU_R", uniform(rng, (1, 3 * H, H), H))
    b = init("onnx::GRU_B", uniform(rng, (1, 6 * H), H))
    h0 = init("/gru/h0", np.zeros((1, B, H), np.float32))
    y, h = node("GRU", [x, w, r, b, "", h0], ["/gru/GRU_output_0", "hidden"],
                hidden_size=H, linear_before_reset=1)
    y = node("Squeeze", [y, init("/gru/Constant_output_0", np.array([1], np.int64))],
             ["/gru/Squeeze_output_0"])
    x = node("Transpose", [y], ["/gru/Transpose_1_output_0"], perm=[1, 0, 2])

    # head + log_softmax
    x = node("MatMul", [x, init("onnx::MatMul_head", uniform(rng, (H, CLASSES), H))],
             ["/head/MatMul_output_0"])
    x = node("Add", [init("head.bias", uniform(rng, (CLASSES,), H)), x],
             ["/head/Add_output_0"])
    node("LogSoftmax", [x], ["log_probs"], axis=-1)

    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("feats", TensorProto.FLOAT, [B, T, F])],
        [helper.make_tensor_value_info("log_probs", TensorProto.FLOAT, [B, T, CLASSES]),
         helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, B, H])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="onnx.helper")
    model.ir_version = corpus.IR_VERSION
    onnx.checker.check_model(model)
    return onnx.shape_inference.infer_shapes(model)


def zlib_seed() -> int:
    import zlib

    return zlib.crc32(NAME.encode())


def main() -> int:
    model = build()
    specs = [{"name": "feats", "dtype": "float32", "shape": [B, T, F], "kind": "normal",
              "std": 1.0}]
    info = {"exporter": "onnx.helper (TorchScript's graph for nn.LSTM / nn.GRU)", "opset": OPSET,
            "source": "scripts/corpus/build_recurrent.py"}
    nodes = corpus.model_node_count(model)
    packed = corpus.pack_model(model, NAME, specs, info)
    path = corpus.MODELS_DIR / f"{NAME}.onnx"
    onnx.save(packed, str(path))
    print(f"{NAME}: {nodes} nodes, opset {OPSET}, {path.stat().st_size / 1024:.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
