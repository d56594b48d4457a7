"""The real-architecture corpus: packed ONNX models and the loader that makes them runnable.

A packed model (tests/corpus/models/<name>.onnx) is the exported ModelProto with every large float
tensor's data removed. Its metadata_props hold two JSON recipes:
  - "ortmlx.corpus.weights": {tensor key: {"rule": "normal", "mean", "std", "lo", "hi", "seed"}}
    or {"rule": "fill", "value"}; the tensor keeps its name, dims and data type. Regenerated
    values are normal(mean, std) clipped to the original [lo, hi], so positive tensors
    (BatchNorm variances, scales) stay positive and the scale of activations stays realistic.
    Small tensors and all non-float tensors (shapes, axes, indices, masks) are kept verbatim.
  - "ortmlx.corpus.inputs": [{"name", "dtype", "shape", "kind", ...}] how to build test inputs.
Tensor keys: "init:<name>" for graph initializers, "const:<output name>" for Constant nodes'
value attributes (in the main graph and in subgraphs).

Only onnx and numpy are needed here: scripts/corpus/export.py (torch, in .venv-corpus) writes the
packed files with pack_model(); tests and bench/models.py load them with load_model().
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

MODELS_DIR = Path(__file__).resolve().parent / "models"
WEIGHTS_KEY = "ortmlx.corpus.weights"
INPUTS_KEY = "ortmlx.corpus.inputs"
INFO_KEY = "ortmlx.corpus.info"
# Float tensors with at most this many elements are stored verbatim (scales, epsilons, small
# biases); larger ones become a recipe.
VERBATIM_MAX = 64
FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16}
# ORT 1.30 reads ONNX IR <= 13; exporters may write newer.
IR_VERSION = 10


def model_names() -> list[str]:
    return sorted(p.name[: -len(".onnx")] for p in MODELS_DIR.glob("*.onnx"))


def _tensors(graph: onnx.GraphProto):
    """(key, TensorProto) for every initializer and Constant value in graph and its subgraphs."""
    for t in graph.initializer:
        yield "init:" + t.name, t
    for node in graph.node:
        for attr in node.attribute:
            if node.op_type == "Constant" and attr.name == "value" and attr.HasField("t"):
                yield "const:" + node.output[0], attr.t
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for g in attr.graphs:
                yield from _tensors(g)


def _strip_debug_info(graph: onnx.GraphProto) -> None:
    """Exporter stack traces and fx names (local paths, not needed to run the model)."""
    graph.doc_string = ""
    for node in graph.node:
        node.doc_string = ""
        del node.metadata_props[:]
        for attr in node.attribute:
            if attr.HasField("g"):
                _strip_debug_info(attr.g)
            for g in attr.graphs:
                _strip_debug_info(g)


def _seed(model_name: str, key: str) -> int:
    return zlib.crc32(f"{model_name}/{key}".encode())


def pack_model(model: onnx.ModelProto, name: str, inputs: list[dict], info: dict) -> onnx.ModelProto:
    """Strips large float tensors (in place) and records recipes and input specs."""
    recipes = {}
    for key, t in _tensors(model.graph):
        if t.data_type not in FLOAT_TYPES or t.data_location == onnx.TensorProto.EXTERNAL:
            continue
        a = numpy_helper.to_array(t)
        if a.size <= VERBATIM_MAX:
            continue
        a64 = a.astype(np.float64)
        if not np.all(np.isfinite(a64)):
            continue  # e.g. -inf masks: keep exact
        lo, hi = float(a64.min()), float(a64.max())
        if lo == hi:
            recipes[key] = {"rule": "fill", "value": lo}
        else:
            recipes[key] = {"rule": "normal", "mean": float(a64.mean()), "std": float(a64.std()),
                            "lo": lo, "hi": hi}
        dims, dtype, tname = list(t.dims), t.data_type, t.name
        t.Clear()
        t.name, t.data_type = tname, dtype
        t.dims.extend(dims)
    _strip_debug_info(model.graph)
    for f in model.functions:
        for node in f.node:
            node.doc_string = ""
            del node.metadata_props[:]
    model.doc_string = ""
    del model.metadata_props[:]
    for k, v in ((WEIGHTS_KEY, recipes), (INPUTS_KEY, inputs), (INFO_KEY, info)):
        model.metadata_props.add(key=k, value=json.dumps(v, sort_keys=True))
    return model


def _meta(model: onnx.ModelProto, key: str):
    for p in model.metadata_props:
        if p.key == key:
            return json.loads(p.value)
    raise KeyError(f"corpus model has no {key} metadata")


def _regenerate(name: str, key: str, t: onnx.TensorProto, recipe: dict) -> None:
    shape = tuple(t.dims)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
    if recipe["rule"] == "fill":
        a = np.full(shape, recipe["value"], dtype=np.float64)
    else:
        rng = np.random.default_rng(_seed(name, key))
        a = rng.normal(recipe["mean"], recipe["std"], size=shape)
        a = np.clip(a, recipe["lo"], recipe["hi"])
    t.CopyFrom(numpy_helper.from_array(a.astype(dtype), t.name))


def load_model(name: str) -> onnx.ModelProto:
    """The packed model `name` with its weights regenerated (deterministic): runnable."""
    model = onnx.load(str(MODELS_DIR / f"{name}.onnx"))
    recipes = _meta(model, WEIGHTS_KEY)
    for key, t in _tensors(model.graph):
        if key in recipes:
            _regenerate(name, key, t, recipes[key])
    model.ir_version = min(model.ir_version, IR_VERSION)
    return model


def model_info(model: onnx.ModelProto) -> dict:
    return _meta(model, INFO_KEY)


def make_inputs(model: onnx.ModelProto, rng: np.random.Generator) -> dict:
    """Seeded test inputs per the model's input specs."""
    feeds = {}
    for spec in _meta(model, INPUTS_KEY):
        shape, dtype = tuple(spec["shape"]), np.dtype(spec["dtype"])
        kind = spec["kind"]
        if kind == "int":  # token ids etc.: uniform in [low, high)
            a = rng.integers(spec["low"], spec["high"], size=shape)
        elif kind == "mask":  # attention mask: ones, the last `pad` positions of batch row 1 off
            a = np.ones(shape)
            if shape[0] > 1 and spec.get("pad", 0):
                a[1, -spec["pad"]:] = 0
        elif kind == "normal":
            a = rng.normal(0.0, spec.get("std", 1.0), size=shape)
        else:
            raise ValueError(f"unknown input kind {kind!r}")
        feeds[spec["name"]] = a.astype(dtype)
    return feeds


def node_count(graph: onnx.GraphProto, functions=None) -> int:
    """Nodes of graph and its subgraphs (If/Loop/Scan bodies); a call to a model-local function
    counts as the nodes of its body (what ORT runs after inlining it)."""
    functions = functions or {}
    n = 0
    for node in graph.node:
        f = functions.get((node.domain, node.op_type))
        n += len(f.node) if f is not None else 1
        for attr in node.attribute:
            if attr.HasField("g"):
                n += node_count(attr.g, functions)
            for g in attr.graphs:
                n += node_count(g, functions)
    return n


def model_node_count(model: onnx.ModelProto) -> int:
    funcs = {(f.domain, f.name): f for f in model.functions}
    return node_count(model.graph, funcs)


def graph_nodes(report) -> int:
    """Nodes of ORT's final graph per an ortmlx.testing.EpReport, from the latest GetCapability
    pass of each graph: nodes offered (total_nodes), nodes inside the EP's fused nodes kept from
    an earlier pass (kept_nodes) and nodes an earlier pass left to another EP (other_ep_nodes).
    EpReport.total_nodes() leaves the last term out, which overstates the share when ORT re-ran
    GetCapability after inlining a function (mobilenet_v3_small: 133 instead of 142); this sum
    matches the node count of ORT's profiler (fused nodes expanded + CPU nodes) on the corpus."""
    total = 0
    for c in report.raw.get("claims", {}).values():
        if c.get("latest", not c.get("superseded", False)):
            total += c["total_nodes"] + c.get("kept_nodes", 0) + c.get("other_ep_nodes", 0)
    return total
