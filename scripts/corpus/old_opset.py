"""Rewrites packed corpus models to an older default-domain opset, as an exporter of that era would
have written them: the models found in the wild that still say opset 9 or 11.

    .venv/bin/python scripts/corpus/old_opset.py            # the committed set (OLD_MODELS)
    .venv/bin/python scripts/corpus/old_opset.py resnet18s 9

Needs only onnx and numpy (no torch): the packed model in tests/corpus/models/<name>.onnx is
rewritten into tests/corpus/models/<name>_opset<N>.onnx, its weight recipe kept. ONNX's own
version converter is not used: it has no down-adapters for several ops (Relu 14, Reshape 14,
LayerNormalization, HardSwish). Rewrites (each checked against the target opset's schemas):
inputs that became attributes go back to attributes (Unsqueeze/Squeeze/Reduce* axes, Split
split, Slice starts/ends/axes before 10, Pad pads before 11, Clip bounds before 11; their values
must be constants), LayerNormalization (17) is decomposed into ReduceMean/Sub/Mul/Add/Sqrt/Div
as exporters did before it existed, and ops whose later versions only widened their types keep
their nodes. Anything else fails loudly.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.defs
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "corpus" / "models"
sys.path.insert(0, str(ROOT / "tests" / "corpus"))
import corpus  # noqa: E402  (onnx + numpy only: shared with the tests)

# (model, opset) pairs committed to the corpus.
OLD_MODELS = [("resnet18s", 9), ("resnet18s", 11), ("distilbert", 9), ("distilbert", 11)]

# Op types whose newer versions (up to opset 17) only widened types or added attributes these
# models do not set: the node is valid as it is at the older opset.
SAME_NODE = {
    "Add", "Sub", "Mul", "Div", "Relu", "Sqrt", "Erf", "Tanh", "Pow", "MatMul", "Gemm", "Conv",
    "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Gather", "Transpose", "Cast",
    "Shape", "Expand", "Where", "Equal", "ConstantOfShape", "Concat", "Reshape", "Softmax",
    "Constant", "Identity", "BatchNormalization",
}


class Values:
    """Constant values by tensor name: initializers and Constant node outputs."""

    def __init__(self, graph: onnx.GraphProto):
        self.v = {t.name: numpy_helper.to_array(t) for t in graph.initializer if t.raw_data or
                  t.int64_data or t.int32_data or t.float_data}
        for n in graph.node:
            if n.op_type == "Constant":
                for a in n.attribute:
                    if a.name == "value":
                        self.v[n.output[0]] = numpy_helper.to_array(a.t)

    def ints(self, name: str) -> list[int]:
        if name not in self.v:
            raise SystemExit(f"{name} is not a constant: cannot become an attribute")
        return [int(x) for x in np.asarray(self.v[name]).reshape(-1)]

    def scalar(self, name: str) -> float:
        return float(np.asarray(self.v[name]).reshape(-1)[0])


def _attrs(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _node(node, inputs, attrs):
    return helper.make_node(node.op_type, inputs, list(node.output), name=node.name, **attrs)


def rewrite(node, vals: Values, opset: int, fresh) -> list[onnx.NodeProto]:
    op, ins, attrs = node.op_type, list(node.input), _attrs(node)
    if op in ("Unsqueeze", "Squeeze") and len(ins) > 1:
        return [_node(node, ins[:1], dict(attrs, axes=vals.ints(ins[1])))]
    if op.startswith("Reduce") and len(ins) > 1:
        return [_node(node, ins[:1], dict(attrs, axes=vals.ints(ins[1])))]
    if op == "Split" and len(ins) > 1:
        return [_node(node, ins[:1], dict(attrs, split=vals.ints(ins[1])))]
    if op == "Slice" and opset < 10:
        if len(ins) > 4 and ins[4] and any(s != 1 for s in vals.ints(ins[4])):
            raise SystemExit(f"{node.name}: Slice steps other than 1 need opset 10")
        a = {"starts": vals.ints(ins[1]), "ends": vals.ints(ins[2])}
        if len(ins) > 3 and ins[3]:
            a["axes"] = vals.ints(ins[3])
        return [_node(node, ins[:1], a)]
    if op == "Pad" and opset < 11:
        a = dict(attrs, pads=vals.ints(ins[1]))
        if len(ins) > 2 and ins[2]:
            a["value"] = vals.scalar(ins[2])
        return [_node(node, ins[:1], a)]
    if op == "Clip" and opset < 11:
        a = {}
        for i, key in ((1, "min"), (2, "max")):
            if len(ins) > i and ins[i]:
                a[key] = vals.scalar(ins[i])
        return [_node(node, ins[:1], a)]
    if op == "LayerNormalization":
        # The pre-17 exporters' pattern: normalise over the last axes with ReduceMean.
        axis = int(attrs.get("axis", -1))
        if axis != -1:
            raise SystemExit(f"{node.name}: LayerNormalization axis {axis} is not rewritten")
        x, scale = ins[0], ins[1]
        bias = ins[2] if len(ins) > 2 and ins[2] else None
        eps = fresh("eps")
        mean, d, sq, var, ve, std, y, ys = (fresh(s) for s in
                                            ("mean", "d", "sq", "var", "ve", "std", "y", "ys"))
        out = node.output[0]
        nodes = [
            helper.make_node("Constant", [], [eps], value=numpy_helper.from_array(
                np.array(attrs.get("epsilon", 1e-5), np.float32))),
            helper.make_node("ReduceMean", [x], [mean], axes=[-1], keepdims=1),
            helper.make_node("Sub", [x, mean], [d]),
            helper.make_node("Mul", [d, d], [sq]),
            helper.make_node("ReduceMean", [sq], [var], axes=[-1], keepdims=1),
            helper.make_node("Add", [var, eps], [ve]),
            helper.make_node("Sqrt", [ve], [std]),
            helper.make_node("Div", [d, std], [y]),
            helper.make_node("Mul", [y, scale], [ys if bias else out]),
        ]
        if bias:
            nodes.append(helper.make_node("Add", [ys, bias], [out]))
        if len(node.output) > 1 and any(node.output[1:]):
            raise SystemExit(f"{node.name}: LayerNormalization statistics outputs")
        return nodes
    if op in ("MaxPool", "AveragePool") and opset < 10:
        # ceil_mode and dilations came in opset 10: their defaults may simply be left out.
        if attrs.pop("ceil_mode", 0) != 0 or any(d != 1 for d in attrs.pop("dilations", [])):
            raise SystemExit(f"{node.name}: ceil_mode/dilations need opset 10")
        return [_node(node, ins, attrs)]
    if op in ("Slice", "Pad", "Clip"):  # the input forms, from opset 10/11 on
        return [node]
    if op in SAME_NODE:
        if op == "Reshape" and "allowzero" in attrs:
            if attrs.pop("allowzero"):
                raise SystemExit(f"{node.name}: Reshape allowzero=1 needs opset 14")
            return [_node(node, ins, attrs)]
        if op == "Equal" and opset < 11:
            return [node]  # integer comparison in these models; the checker says if not
        return [node]
    raise SystemExit(f"{node.name}: {op} has no rewrite to opset {opset}")


def convert(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    vals = Values(model.graph)
    counter = iter(range(1 << 30))

    def fresh(stem: str) -> str:
        return f"old_opset_{stem}_{next(counter)}"

    nodes = []
    for node in model.graph.node:
        nodes.extend(rewrite(node, vals, opset, fresh))
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    del out.opset_import[:]
    out.opset_import.extend([helper.make_opsetid("", opset)])
    # Inputs that became attributes may leave constants unused: drop those.
    used = {i for n in out.graph.node for i in n.input}
    keep = [t for t in out.graph.initializer if t.name in used]
    del out.graph.initializer[:]
    out.graph.initializer.extend(keep)
    live = [n for n in out.graph.node
            if n.op_type != "Constant" or n.output[0] in used or
            n.output[0] in {o.name for o in out.graph.output}]
    del out.graph.node[:]
    out.graph.node.extend(live)
    del out.graph.value_info[:]
    return out


def main(argv: list[str]) -> None:
    pairs = [(argv[0], int(argv[1]))] if argv else OLD_MODELS
    for name, opset in pairs:
        model = onnx.load(str(MODELS / f"{name}.onnx"))
        old = convert(model, opset)
        path = MODELS / f"{name}_opset{opset}.onnx"
        onnx.save(old, str(path))
        # The packed file holds weight recipes, not weights: check the model they regenerate,
        # and that ORT's CPU EP runs it.
        full = corpus.load_model(path.stem)
        onnx.checker.check_model(full, full_check=True)
        import onnxruntime as ort

        sess = ort.InferenceSession(full.SerializeToString(), providers=["CPUExecutionProvider"])
        sess.run(None, corpus.make_inputs(full, np.random.default_rng(0)))
        print(f"{path.relative_to(ROOT)}: {len(old.graph.node)} nodes at opset {opset}")


if __name__ == "__main__":
    main(sys.argv[1:])
