"""Small, deterministic models built in code (no downloads): the demo, tests and benchmarks use them."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ortmlx.testing import make_model


class _GraphBuilder:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def weight(self, name, shape, scale):
        arr = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def scale_weight(self, name, n):
        """A norm scale near 1 (1 + N(0, 0.1^2))."""
        arr = (1.0 + self.rng.standard_normal(n) * 0.1).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def const_i64(self, name, values):
        self.inits.append(numpy_helper.from_array(np.asarray(values, dtype=np.int64), name))
        return name

    def const_f32(self, name, value):
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def op(self, op_type, inputs, prefix, n_out=1, **attrs):
        self._n += 1
        name = f"{prefix}/{op_type}_{self._n}"
        outs = [f"{name}:{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs


def transformer_encoder(batch=2, seq=16, embed=64, heads=4, ffn=128, layers=2, seed=0):
    """Pre-LN transformer encoder (self-attention + GELU MLP), float32, static shapes.

    Returns (model, feeds). Uses LayerNormalization, MatMul, Add, Reshape, Transpose, Mul,
    Softmax, Gelu: all claimed by the MLX EP.
    """
    rng = np.random.default_rng(seed)
    g = _GraphBuilder(rng)
    head_dim = embed // heads
    split_shape = g.const_i64("shape_split", [batch, seq, heads, head_dim])
    merge_shape = g.const_i64("shape_merge", [batch, seq, embed])
    scale = g.const_f32("attn_scale", 1.0 / np.sqrt(head_dim))
    x = "x"
    for layer in range(layers):
        p = f"layer{layer}"
        ln1_s = g.scale_weight(f"{p}.ln1.scale", embed)
        ln1_b = g.weight(f"{p}.ln1.bias", [embed], 0.1)
        h = g.op("LayerNormalization", [x, ln1_s, ln1_b], p, axis=-1, epsilon=1e-5)
        heads_out = []
        for proj in ("q", "k", "v"):
            w = g.weight(f"{p}.attn.{proj}.weight", [embed, embed], 1.0 / np.sqrt(embed))
            b = g.weight(f"{p}.attn.{proj}.bias", [embed], 0.02)
            t = g.op("Add", [g.op("MatMul", [h, w], p), b], p)
            t = g.op("Reshape", [t, split_shape], p)
            perm = [0, 2, 3, 1] if proj == "k" else [0, 2, 1, 3]
            heads_out.append(g.op("Transpose", [t], p, perm=perm))
        q, kt, v = heads_out
        scores = g.op("Mul", [g.op("MatMul", [q, kt], p), scale], p)
        probs = g.op("Softmax", [scores], p, axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v], p)], p, perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge_shape], p)
        wo = g.weight(f"{p}.attn.out.weight", [embed, embed], 1.0 / np.sqrt(embed))
        bo = g.weight(f"{p}.attn.out.bias", [embed], 0.02)
        x = g.op("Add", [x, g.op("Add", [g.op("MatMul", [ctx, wo], p), bo], p)], p)
        ln2_s = g.scale_weight(f"{p}.ln2.scale", embed)
        ln2_b = g.weight(f"{p}.ln2.bias", [embed], 0.1)
        h = g.op("LayerNormalization", [x, ln2_s, ln2_b], p, axis=-1, epsilon=1e-5)
        w1 = g.weight(f"{p}.mlp.fc1.weight", [embed, ffn], 1.0 / np.sqrt(embed))
        b1 = g.weight(f"{p}.mlp.fc1.bias", [ffn], 0.02)
        w2 = g.weight(f"{p}.mlp.fc2.weight", [ffn, embed], 1.0 / np.sqrt(ffn))
        b2 = g.weight(f"{p}.mlp.fc2.bias", [embed], 0.02)
        f = g.op("Gelu", [g.op("Add", [g.op("MatMul", [h, w1], p), b1], p)], p)
        x = g.op("Add", [x, g.op("Add", [g.op("MatMul", [f, w2], p), b2], p)], p)
    g.nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    graph = helper.make_graph(
        g.nodes, "transformer_encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, embed])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, embed])],
        g.inits)
    model = onnx.shape_inference.infer_shapes(make_model(graph, opset=21))
    feeds = {"x": rng.standard_normal((batch, seq, embed)).astype(np.float32)}
    return model, feeds


def mlp(batch=8, dims=(32, 64, 64, 10), seed=0):
    """Gemm/Relu MLP with a Softmax head: the smallest end-to-end model."""
    rng = np.random.default_rng(seed)
    g = _GraphBuilder(rng)
    x = "x"
    for i, (din, dout) in enumerate(zip(dims[:-1], dims[1:])):
        w = g.weight(f"fc{i}.weight", [dout, din], 1.0 / np.sqrt(din))
        b = g.weight(f"fc{i}.bias", [dout], 0.05)
        x = g.op("Gemm", [x, w, b], f"fc{i}", transB=1)
        if i < len(dims) - 2:
            x = g.op("Relu", [x], f"fc{i}")
    g.nodes.append(helper.make_node("Softmax", [x], ["y"], name="head/Softmax", axis=-1))
    graph = helper.make_graph(
        g.nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, dims[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, dims[-1]])],
        g.inits)
    model = onnx.shape_inference.infer_shapes(make_model(graph, opset=21))
    feeds = {"x": rng.standard_normal((batch, dims[0])).astype(np.float32)}
    return model, feeds


def resnet18(batch=32, size=224, classes=1000, seed=0):
    """ResNet-18 (basic blocks, BatchNormalization in inference form), float32, NCHW, static
    shapes, random weights. Returns (model, feeds). The GPU benchmarks' CNN at 224x224."""
    rng = np.random.default_rng(seed)
    g = _GraphBuilder(rng)

    def conv_bn(x, cin, cout, k, stride, prefix, relu=True):
        w = g.weight(f"{prefix}.w", [cout, cin, k, k], np.sqrt(2.0 / (cin * k * k)))
        y = g.op("Conv", [x, w], prefix, kernel_shape=[k, k], strides=[stride, stride],
                 pads=[k // 2] * 4)
        scale = g.scale_weight(f"{prefix}.bn.scale", cout)
        bias = g.weight(f"{prefix}.bn.bias", [cout], 0.1)
        mean = g.weight(f"{prefix}.bn.mean", [cout], 0.1)
        var = g.weight(f"{prefix}.bn.var", [cout], 0.1)
        g.inits[-1] = numpy_helper.from_array(
            (1.0 + np.abs(rng.standard_normal(cout)) * 0.1).astype(np.float32), var)
        y = g.op("BatchNormalization", [y, scale, bias, mean, var], prefix, epsilon=1e-5)
        return g.op("Relu", [y], prefix) if relu else y

    x = conv_bn("x", 3, 64, 7, 2, "stem")
    x = g.op("MaxPool", [x], "stem", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            p = f"layer{stage + 1}.{block}"
            stride = 2 if stage > 0 and block == 0 else 1
            y = conv_bn(x, cin, cout, 3, stride, f"{p}.conv1")
            y = conv_bn(y, cout, cout, 3, 1, f"{p}.conv2", relu=False)
            short = conv_bn(x, cin, cout, 1, stride, f"{p}.down", relu=False) \
                if stride != 1 or cin != cout else x
            x = g.op("Relu", [g.op("Add", [y, short], p)], p)
            cin = cout
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x], "head")], "head", axis=1)
    w = g.weight("fc.weight", [classes, 512], 1.0 / np.sqrt(512))
    b = g.weight("fc.bias", [classes], 0.02)
    g.nodes.append(helper.make_node("Gemm", [x, w, b], ["y"], name="head/Gemm", transB=1))
    graph = helper.make_graph(
        g.nodes, "resnet18",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, classes])],
        g.inits)
    model = onnx.shape_inference.infer_shapes(make_model(graph, opset=21))
    feeds = {"x": rng.standard_normal((batch, 3, size, size)).astype(np.float32)}
    return model, feeds


def decoder_step(batch=1, past=512, embed=768, heads=12, ffn=3072, layers=12, seed=0):
    """One generation step of a GPT-2-style decoder with a KV cache: the new token's hidden state
    x (B, 1, E) and each layer's past keys/values (B, H, past, E/H) in; the next hidden state
    and the presents (B, H, past + 1, E/H) out. Pre-LN blocks, Gelu MLP, no mask
    (one query attends to every cached position). float32, static shapes. Returns (model, feeds).
    """
    rng = np.random.default_rng(seed)
    g = _GraphBuilder(rng)
    hd = embed // heads
    split = g.const_i64("shape_split", [batch, 1, heads, hd])
    merge = g.const_i64("shape_merge", [batch, 1, embed])
    scale = g.const_f32("attn_scale", 1.0 / np.sqrt(hd))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 1, embed])]
    outputs = []
    feeds = {"x": rng.standard_normal((batch, 1, embed)).astype(np.float32)}
    x = "x"
    for layer in range(layers):
        p = f"h{layer}"
        ln1_s = g.scale_weight(f"{p}.ln1.scale", embed)
        h = g.op("LayerNormalization", [x, ln1_s, g.weight(f"{p}.ln1.bias", [embed], 0.1)], p,
                 axis=-1, epsilon=1e-5)
        w = g.weight(f"{p}.attn.qkv.weight", [embed, 3 * embed], 1.0 / np.sqrt(embed))
        qkv = g.op("Add", [g.op("MatMul", [h, w], p),
                           g.weight(f"{p}.attn.qkv.bias", [3 * embed], 0.02)], p)
        q, k, v = g.op("Split", [qkv, g.const_i64(f"{p}.split", [embed] * 3)], p, n_out=3,
                       axis=-1)
        q, k, v = (g.op("Transpose", [g.op("Reshape", [t, split], p)], p, perm=[0, 2, 1, 3])
                   for t in (q, k, v))
        for kind, new in (("key", k), ("value", v)):
            name = f"past_{kind}_{layer}"
            inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                        [batch, heads, past, hd]))
            feeds[name] = rng.standard_normal((batch, heads, past, hd)).astype(np.float32)
            present = f"present_{kind}_{layer}"
            g.nodes.append(helper.make_node("Concat", [name, new], [present],
                                            name=f"{p}/concat_{kind}", axis=2))
            outputs.append(helper.make_tensor_value_info(present, TensorProto.FLOAT,
                                                         [batch, heads, past + 1, hd]))
        kt = g.op("Transpose", [f"present_key_{layer}"], p, perm=[0, 1, 3, 2])
        probs = g.op("Softmax", [g.op("Mul", [g.op("MatMul", [q, kt], p), scale], p)], p,
                     axis=-1)
        ctx = g.op("MatMul", [probs, f"present_value_{layer}"], p)
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], p, perm=[0, 2, 1, 3]), merge], p)
        wo = g.weight(f"{p}.attn.out.weight", [embed, embed], 1.0 / np.sqrt(embed))
        x = g.op("Add", [x, g.op("Add", [g.op("MatMul", [ctx, wo], p),
                                         g.weight(f"{p}.attn.out.bias", [embed], 0.02)], p)], p)
        ln2_s = g.scale_weight(f"{p}.ln2.scale", embed)
        h = g.op("LayerNormalization", [x, ln2_s, g.weight(f"{p}.ln2.bias", [embed], 0.1)], p,
                 axis=-1, epsilon=1e-5)
        w1 = g.weight(f"{p}.mlp.fc1.weight", [embed, ffn], 1.0 / np.sqrt(embed))
        w2 = g.weight(f"{p}.mlp.fc2.weight", [ffn, embed], 1.0 / np.sqrt(ffn))
        f = g.op("Gelu", [g.op("Add", [g.op("MatMul", [h, w1], p),
                                       g.weight(f"{p}.mlp.fc1.bias", [ffn], 0.02)], p)], p)
        x = g.op("Add", [x, g.op("Add", [g.op("MatMul", [f, w2], p),
                                         g.weight(f"{p}.mlp.fc2.bias", [embed], 0.02)], p)], p)
    g.nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    outputs.insert(0, helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 1, embed]))
    graph = helper.make_graph(g.nodes, "decoder_step", inputs, outputs, g.inits)
    model = onnx.shape_inference.infer_shapes(make_model(graph, opset=21))
    return model, feeds
