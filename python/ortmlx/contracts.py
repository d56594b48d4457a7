"""Builders and references for pkg.onnax training contracts (today: AttentionVJP).

An autodiff tool (onnax) emits the pullback of scaled-dot-product attention as a model-local ONNX
function in domain `pkg.onnax` whose *name* carries its parameters (docs/ATTENTION_VJP.md):

    AttentionVJP_r{R}_q{HQ}_k{HK}_d{D}_s{SCALE}_c{C}_o{OUTS}_m{M}_{FP}
    AttentionVJPRecompute_...          (same fields; Y is recomputed, so Y is not an input)

This module builds such models the way a producer would (one call node + the function whose body
is plain ONNX, so ORT CPU can run it unclaimed), computes the float64 reference the EP is checked
against, and makes random feeds. Tests and bench/attention_vjp.py use it.

    model = attention_vjp_model(batch=2, sq=16, sk=16, hq=4, hk=2, d=32, causal=True, mask_kind=1)
    feeds = attention_vjp_feeds(model, np.random.default_rng(0))
    want = attention_vjp_reference_for(model, feeds)   # float64 dQ/dK/dV (the requested ones)
"""

from __future__ import annotations

import hashlib
import math
import re
import struct
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from ortmlx.testing import make_model

DOMAIN = "pkg.onnax"
PLAIN_PREFIX = "AttentionVJP_"
RECOMPUTE_PREFIX = "AttentionVJPRecompute_"
OUTPUT_NAMES = ("dQ", "dK", "dV")
NODE_NAME = "attention_vjp"
# Masked scores are replaced by this before Softmax (never -inf: a fully masked row would give
# NaN); such rows are zeroed afterwards. float32's lowest value is below any finite score.
_FILL = float(np.finfo(np.float32).min)


def scale_hex(scale: float) -> str:
    """8 lowercase hex digits: the IEEE-754 float32 bit pattern of `scale`."""
    return "%08x" % struct.unpack(">I", struct.pack(">f", float(scale)))[0]


def _fields(rank, hq, hk, d, scale, causal, outputs, mask_kind) -> list[str]:
    outs = "".join(str(int(o)) for o in outputs)
    return [f"r{int(rank)}", f"q{int(hq)}", f"k{int(hk)}", f"d{int(d)}", f"s{scale_hex(scale)}",
            f"c{int(causal)}", f"o{outs}", f"m{int(mask_kind)}"]


def default_fingerprint(rank, hq, hk, d, scale, causal, outputs, mask_kind, recompute=False) -> str:
    """A deterministic 16-hex-digit hash of the other fields (a producer's is opaque to us)."""
    text = ("Recompute:" if recompute else "Plain:") + "_".join(
        _fields(rank, hq, hk, d, scale, causal, outputs, mask_kind))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def attention_vjp_name(rank, hq, hk, d, scale, causal, outputs, mask_kind, recompute=False,
                       fingerprint=None) -> str:
    """The contract name (function name and call-node op type). No validation: tests build
    out-of-range names on purpose; `parse_attention_vjp_name` says whether a name is valid."""
    if fingerprint is None:
        fingerprint = default_fingerprint(rank, hq, hk, d, scale, causal, outputs, mask_kind,
                                          recompute)
    prefix = RECOMPUTE_PREFIX if recompute else PLAIN_PREFIX
    return prefix + "_".join(_fields(rank, hq, hk, d, scale, causal, outputs, mask_kind)
                             + [fingerprint])


@dataclass(frozen=True)
class AttentionVJPConfig:
    recompute: bool
    rank: int
    hq: int
    hk: int
    d: int
    scale: float
    causal: int
    outputs: tuple
    mask_kind: int
    fingerprint: str


_INT32_MAX = 2**31 - 1


def parse_attention_vjp_name(name: str) -> AttentionVJPConfig | None:
    """The contract's fields, or None when the name is not a valid contract (the EP then refuses).
    Mirrors the reference handler's parser, strict about the documented grammar."""
    recompute = name.startswith(RECOMPUTE_PREFIX)
    prefix = RECOMPUTE_PREFIX if recompute else PLAIN_PREFIX
    if not name.startswith(prefix):
        return None
    fields = name[len(prefix):].split("_")
    if len(fields) != 9:
        return None
    ints = {}
    for i, letter in enumerate("rqkd"):
        m = re.fullmatch(letter + r"([0-9]+)", fields[i])
        if not m:
            return None
        ints[letter] = int(m.group(1))
    m_scale = re.fullmatch(r"s([0-9a-fA-F]{8})", fields[4])
    m_causal = re.fullmatch(r"c([0-9]+)", fields[5])
    m_outs = re.fullmatch(r"o([0-9]+)", fields[6])
    m_mask = re.fullmatch(r"m([0-9]+)", fields[7])
    if not (m_scale and m_causal and m_outs and m_mask):
        return None
    if not re.fullmatch(r"[0-9a-fA-F]{16}", fields[8]):
        return None
    rank, hq, hk, d = ints["r"], ints["q"], ints["k"], ints["d"]
    scale = struct.unpack(">f", struct.pack(">I", int(m_scale.group(1), 16)))[0]
    causal, mask = int(m_causal.group(1)), int(m_mask.group(1))
    outputs = tuple(int(c) for c in m_outs.group(1))
    ok = (rank in (3, 4) and 0 < hq <= _INT32_MAX and 0 < hk <= _INT32_MAX and hq % hk == 0
          and 8 <= d <= 256 and d % 8 == 0 and (not recompute or d >= 32)
          and hq * d <= _INT32_MAX and hk * d <= _INT32_MAX
          and math.isfinite(scale) and scale > 0 and causal in (0, 1) and mask in (0, 1, 2)
          and outputs and all(o <= 2 for o in outputs)
          and all(a < b for a, b in zip(outputs, outputs[1:])))
    if not ok:
        return None
    return AttentionVJPConfig(recompute, rank, hq, hk, d, scale, causal, outputs, mask,
                              fields[8])


# --------------------------------------------------------------------------------------------
# The function body: plain ONNX (opset 21) implementing the contract's semantics exactly.
# --------------------------------------------------------------------------------------------

class _Body:
    """Accumulates the function's nodes; every value gets a unique name."""

    def __init__(self):
        self.nodes: list[onnx.NodeProto] = []
        self._n = 0

    def op(self, op_type, *inputs, out=None, **attrs):
        self._n += 1
        out = out or f"t{self._n}_{op_type}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def const(self, values, dtype=np.int64):
        arr = np.asarray(values, dtype=dtype)
        return self.op("Constant", value=onnx.numpy_helper.from_array(arr, f"c{self._n + 1}"))

    def shape(self, x, start, end=None):
        kw = {"start": start} if end is None else {"start": start, "end": end}
        return self.op("Shape", x, **kw)

    def reshape(self, x, shape, out=None):
        # allowzero=1: a 0 in the target shape is a real empty dim, never "copy the input dim".
        return self.op("Reshape", x, shape, out=out, allowzero=1)

    def transpose(self, x, perm, out=None):
        return self.op("Transpose", x, out=out, perm=list(perm))


def _body_nodes(rank, hq, hk, d, scale, causal, outputs, mask_kind, recompute):
    b = _Body()
    group = hq // hk

    def to_bhsd(x, heads):
        # (B, S, H*D) -> (B, H, S, D); rank 4 already is.
        if rank == 4:
            return x
        shp = b.op("Concat", b.shape(x, 0, 2), b.const([heads, d]), axis=0)
        return b.transpose(b.reshape(x, shp), [0, 2, 1, 3])

    def from_bhsd(x, like, out):
        if rank == 4:
            return b.op("Identity", x, out=out)
        return b.reshape(b.transpose(x, [0, 2, 1, 3]), b.shape(like, 0), out=out)

    def repeat_kv(x):
        # (B, HK, S, D) -> (B, HQ, S, D): consecutive query heads share one kv head.
        if group == 1:
            return x
        x5 = b.op("Expand", b.op("Unsqueeze", x, b.const([2])), b.const([1, 1, group, 1, 1]))
        shp = b.op("Concat", b.shape(x, 0, 1), b.const([hq]), b.shape(x, 2, 4), axis=0)
        return b.reshape(x5, shp)

    def group_sum(x):
        # (B, HQ, S, D) -> (B, HK, S, D): a kv head's gradient sums over its query heads.
        if group == 1:
            return x
        shp = b.op("Concat", b.shape(x, 0, 1), b.const([hk, group]), b.shape(x, 2, 4), axis=0)
        x5 = b.reshape(x, shp)
        # Sum of Gathers, not ReduceSum: ORT CPU's ReduceSum returns an empty input unreduced.
        return b.op("Sum", *[b.op("Gather", x5, b.const(i), axis=2) for i in range(group)])

    def key_t(x):
        return b.transpose(x, [0, 1, 3, 2])

    q = to_bhsd("Q", hq)
    k = repeat_kv(to_bhsd("K", hk))
    v = repeat_kv(to_bhsd("V", hk))
    dy = to_bhsd("dY", hq)
    scale_c = b.const(np.float32(scale), np.float32)
    scores = b.op("Mul", b.op("MatMul", q, key_t(k)), scale_c)  # (B, HQ, Sq, Sk)

    keep = None  # bool, broadcastable to the scores: False = key masked

    def conj(a, c):
        return c if a is None else b.op("And", a, c)

    sq = b.op("Squeeze", b.shape(q, 2, 3))
    sk = b.op("Squeeze", b.shape(k, 2, 3))
    zero, one = b.const(0), b.const(1)
    keys = b.op("Range", zero, sk, one)  # (Sk,)
    if causal:
        # Top-left alignment: key j is visible to query i iff j <= i (also when Sq != Sk).
        rows = b.op("Unsqueeze", b.op("Range", zero, sq, one), b.const([1]))  # (Sq, 1)
        keep = conj(keep, b.op("LessOrEqual", keys, rows))  # (Sq, Sk)
    if mask_kind in (1, 2):
        # The mask's last axis (width W) is matched to Sk: W == 1 broadcasts; otherwise key j
        # reads column min(j, W-1) and is masked when j >= W (wider masks are thus sliced).
        width = b.shape("Mask", -1)  # (1,)
        last = b.op("Squeeze", b.op("Sub", width, b.const([1])))
        cols = b.op("Max", b.op("Min", keys, last), zero)
        mask = b.op("Gather", "Mask", cols, axis=-1)  # Mask.shape[:-1] + (Sk,)
        in_width = b.op("Or", b.op("Less", keys, width), b.op("Equal", width, b.const([1])))
        if mask_kind == 1:
            keep = conj(keep, b.op("And", mask, in_width))
        else:
            keep = conj(keep, in_width)
            scores = b.op("Add", scores, mask)
            # Additive -inf entries mask their key like a False.
            keep = b.op("And", keep, b.op("Not", b.op("IsInf", scores, detect_positive=0)))
    if keep is not None:
        filled = b.op("Where", keep, scores, b.const(np.float32(_FILL), np.float32))
        # Zero masked entries: exact for partly masked rows, and fully masked rows become zeros.
        probs = b.op("Where", keep, b.op("Softmax", filled, axis=-1),
                     b.const(np.float32(0), np.float32))
    else:
        probs = b.op("Softmax", scores, axis=-1)

    if recompute:
        y = b.op("MatMul", probs, v)
    else:
        y = to_bhsd("Y", hq)  # taken as given

    # ORT CPU's MatMul leaves its output uninitialised when the contracted dim is 0, so a
    # gradient contracting over an empty Sq (dK, dV) or Sk (dQ) is forced to zeros (cheap: O(S*D)).
    fzero = b.const(np.float32(0), np.float32)

    def zero_if_empty(x, n):
        return b.op("Where", b.op("Equal", n, zero), fzero, x)

    results = {}
    if 2 in outputs:
        dv = zero_if_empty(group_sum(b.op("MatMul", key_t(probs), dy)), sq)
        results[2] = from_bhsd(dv, "V", "dV")
    if 0 in outputs or 1 in outputs:
        dp = b.op("MatMul", dy, key_t(v))
        # delta = rowsum(dY * Y) as a MatMul with ones (ORT CPU's ReduceSum mishandles empties).
        delta = b.op("MatMul", b.op("Mul", dy, y), b.const(np.ones((d, 1)), np.float32))
        ds = b.op("Mul", probs, b.op("Sub", dp, delta))
        if 0 in outputs:
            dq = zero_if_empty(b.op("Mul", b.op("MatMul", ds, k), scale_c), sk)
            results[0] = from_bhsd(dq, "Q", "dQ")
        if 1 in outputs:
            dk = zero_if_empty(group_sum(b.op("Mul", b.op("MatMul", key_t(ds), q), scale_c)), sq)
            results[1] = from_bhsd(dk, "K", "dK")
    return b.nodes


def _in_float32(nodes, inputs, outputs, io_type) -> list[onnx.NodeProto]:
    """The float32 body wrapped for float16/bfloat16 tensors: its inputs Cast to float32 first
    (exact), its outputs Cast back to `io_type` last (one rounding), float32 in between."""
    renamed = {n: f"{n}_f32" for n in inputs}
    for node in nodes:
        node.input[:] = [renamed.get(n, n) for n in node.input]
        node.output[:] = [renamed.get(n, f"{n}_f32" if n in outputs else n) for n in node.output]
    head = [helper.make_node("Cast", [n], [renamed[n]], to=TensorProto.FLOAT) for n in inputs]
    tail = [helper.make_node("Cast", [f"{n}_f32"], [n], to=io_type) for n in outputs]
    return head + list(nodes) + tail


def attention_vjp_function(name, rank, hq, hk, d, scale, causal, outputs, mask_kind,
                           recompute=False, opset=21, io_type=TensorProto.FLOAT
                           ) -> onnx.FunctionProto:
    """The model-local function (domain pkg.onnax) whose body is standard ONNX. io_type FLOAT16
    or BFLOAT16: tensors (and an additive mask) of that type, computed in float32."""
    inputs = ["Q", "K", "V"] + ([] if recompute else ["Y"]) + ["dY", "Mask"]
    out_names = [OUTPUT_NAMES[o] for o in outputs]
    nodes = _body_nodes(rank, hq, hk, d, scale, causal, outputs, mask_kind, recompute)
    if io_type != TensorProto.FLOAT:
        floats = inputs if mask_kind == 2 else inputs[:-1]
        nodes = _in_float32(nodes, floats, out_names, io_type)
    return helper.make_function(DOMAIN, name, inputs, out_names, nodes,
                                opset_imports=[helper.make_opsetid("", opset)])


def _tensor_shape(batch, seq, heads, d, rank):
    return [batch, seq, heads * d] if rank == 3 else [batch, heads, seq, d]


def attention_vjp_model(batch, sq, sk, hq, hk, d, rank=4, causal=False, mask_kind=0,
                        mask_shape=None, outputs=(0, 1, 2), recompute=False, scale=None,
                        fingerprint=None, dynamic_batch=False, name_override=None,
                        dynamic_seq=False, dtype=np.float32) -> onnx.ModelProto:
    """A model with one AttentionVJP call node named "attention_vjp" plus its function.

    Graph inputs Q, K, V, [Y], dY, Mask; outputs the requested gradients (dQ, dK, dV in order).
    Mask: BOOL for mask_kind 0/1, FLOAT for 2, shape `mask_shape` (rank 1..4; default
    (1, 1, sq, sk); a str entry is a symbolic dim). dynamic_batch / dynamic_seq declare those
    dims symbolic (B, Sq, Sk) on the tensor inputs and outputs. name_override replaces the
    contract name (for malformed names); the body still follows the given parameters.
    The body handles any live B/Sq/Sk (including 0) and mask widths >= 1. dtype float16 or
    ml_dtypes.bfloat16: tensors, outputs and an additive mask of that type (float32 inside).
    """
    io_type = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    outputs = tuple(outputs)
    name = name_override or attention_vjp_name(rank, hq, hk, d, scale, causal, outputs,
                                               mask_kind, recompute, fingerprint)
    mask_shape = tuple((1, 1, sq, sk) if mask_shape is None else mask_shape)
    bdim = "B" if dynamic_batch else batch
    qdim = "Sq" if dynamic_seq else sq
    kdim = "Sk" if dynamic_seq else sk
    qshape = _tensor_shape(bdim, qdim, hq, d, rank)
    kshape = _tensor_shape(bdim, kdim, hk, d, rank)
    shapes = {"Q": qshape, "K": kshape, "V": kshape, "Y": qshape, "dY": qshape}
    in_names = ["Q", "K", "V"] + ([] if recompute else ["Y"]) + ["dY"]
    graph_inputs = [helper.make_tensor_value_info(n, io_type, shapes[n]) for n in in_names]
    mdims = list(mask_shape)
    if dynamic_batch and len(mdims) == 4 and mdims[0] != 1:
        mdims[0] = "B"
    mtype = io_type if mask_kind == 2 else TensorProto.BOOL
    graph_inputs.append(helper.make_tensor_value_info("Mask", mtype, mdims))
    like = {0: qshape, 1: kshape, 2: kshape}
    graph_outputs = [helper.make_tensor_value_info(OUTPUT_NAMES[o], io_type, like[o])
                     for o in outputs]
    node = helper.make_node(name, in_names + ["Mask"], [OUTPUT_NAMES[o] for o in outputs],
                            name=NODE_NAME, domain=DOMAIN)
    fn = attention_vjp_function(name, rank, hq, hk, d, scale, causal, outputs, mask_kind,
                                recompute, io_type=io_type)
    graph = helper.make_graph([node], "attention_vjp", graph_inputs, graph_outputs)
    return make_model(graph, opset=21, extra_opsets={DOMAIN: 1}, functions=[fn])


# --------------------------------------------------------------------------------------------
# float64 reference
# --------------------------------------------------------------------------------------------

def _bhsd(x, heads, d, rank):
    x = np.asarray(x, dtype=np.float64)
    if rank == 3:
        b, s, _ = x.shape
        return x.reshape(b, s, heads, d).transpose(0, 2, 1, 3)
    return x


def _from_bhsd(x, like_shape, rank):
    if rank == 3:
        return x.transpose(0, 2, 1, 3).reshape(like_shape)
    return x


def _probs(q, k, mask, hq, hk, causal, mask_kind, scale):
    """(B, HQ, Sq, Sk) attention probabilities (fully masked rows are zeros) and repeated k."""
    group = hq // hk
    kr = np.repeat(k, group, axis=1)
    b, _, sq, _ = q.shape
    sk = k.shape[2]
    s = scale * np.einsum("bhid,bhjd->bhij", q, kr)
    keep = np.ones((b, hq, sq, sk), dtype=bool)
    if causal:
        keep &= np.arange(sk)[None, :] <= np.arange(sq)[:, None]
    if mask_kind in (1, 2):
        m = np.asarray(mask)
        width = m.shape[-1]
        if width == 1:
            full = np.broadcast_to(m, m.shape[:-1] + (sk,))
        else:
            # Keys at/after the mask's width are masked; a wider mask is sliced.
            full = np.full(m.shape[:-1] + (sk,), False if mask_kind == 1 else -np.inf,
                           dtype=np.bool_ if mask_kind == 1 else np.float64)
            n = min(width, sk)
            full[..., :n] = m[..., :n]
        if mask_kind == 1:
            keep &= np.broadcast_to(full, keep.shape)
        else:
            s = s + np.broadcast_to(full.astype(np.float64), keep.shape)
            keep &= ~np.isneginf(s)
            if width != 1:
                # Masked outright, not only through the -inf fill: a NaN score there (NaN + -inf
                # is NaN) must not count as a visible key.
                keep &= np.arange(sk) < width
    s = np.where(keep, s, -np.inf)
    rowmax = s.max(axis=-1, keepdims=True) if sk else np.zeros(s.shape[:-1] + (1,))
    live = np.isfinite(rowmax)
    e = np.where(keep, np.exp(s - np.where(live, rowmax, 0.0)), 0.0)
    denom = e.sum(axis=-1, keepdims=True)
    p = np.where(live & (denom > 0), e / np.where(denom > 0, denom, 1.0), 0.0)
    return p, kr


def attention_forward_reference(q, k, v, mask, *, hq, hk, causal, mask_kind, scale, rank):
    """float64 Y = softmax(scale Q K^T + bias) V in the input layout (rank 3 or 4)."""
    d = np.shape(q)[-1] // hq if rank == 3 else np.shape(q)[-1]
    q4, k4, v4 = _bhsd(q, hq, d, rank), _bhsd(k, hk, d, rank), _bhsd(v, hk, d, rank)
    p, _ = _probs(q4, k4, mask, hq, hk, causal, mask_kind, scale)
    y = np.einsum("bhij,bhjd->bhid", p, np.repeat(v4, hq // hk, axis=1))
    return _from_bhsd(y, np.shape(q), rank)


def attention_vjp_reference(q, k, v, dy, mask, *, hq, hk, causal, mask_kind, scale, rank,
                            outputs=(0, 1, 2), y=None):
    """float64 [dQ, dK, dV][outputs]. y=None recomputes Y (Recompute form); a given y is used
    as is (plain form: the pullback trusts the forward output it is handed)."""
    d = np.shape(q)[-1] // hq if rank == 3 else np.shape(q)[-1]
    group = hq // hk
    q4, k4, v4 = _bhsd(q, hq, d, rank), _bhsd(k, hk, d, rank), _bhsd(v, hk, d, rank)
    g4 = _bhsd(dy, hq, d, rank)
    p, kr = _probs(q4, k4, mask, hq, hk, causal, mask_kind, scale)
    vr = np.repeat(v4, group, axis=1)
    y4 = np.einsum("bhij,bhjd->bhid", p, vr) if y is None else _bhsd(y, hq, d, rank)
    dv = np.einsum("bhij,bhid->bhjd", p, g4)
    dp = np.einsum("bhid,bhjd->bhij", g4, vr)
    delta = (g4 * y4).sum(axis=-1, keepdims=True)
    ds = p * (dp - delta)
    dq = scale * np.einsum("bhij,bhjd->bhid", ds, kr)
    dk = scale * np.einsum("bhij,bhid->bhjd", ds, q4)

    def group_sum(x):
        b, _, s, dd = x.shape
        return x.reshape(b, hk, group, s, dd).sum(axis=2)

    grads = [_from_bhsd(dq, np.shape(q), rank),
             _from_bhsd(group_sum(dk), np.shape(k), rank),
             _from_bhsd(group_sum(dv), np.shape(v), rank)]
    return [grads[o] for o in outputs]


# --------------------------------------------------------------------------------------------
# feeds
# --------------------------------------------------------------------------------------------

def float32_boundary(model: onnx.ModelProto, onnx_type: int) -> onnx.ModelProto:
    """`model` (changed in place and returned) with float32 graph inputs and outputs: a Cast to
    `onnx_type` in front of each graph input of that type (renamed `<name>_f32`) and a Cast back
    to float32 behind each graph output (renamed likewise). For float16/bfloat16 contracts:
    numpy and ORT's Python API then carry bfloat16 too, while the contract node still sees (and
    gives) tensors of the half type."""
    graph = model.graph
    nodes = []
    for vi in graph.input:
        if vi.type.tensor_type.elem_type == onnx_type:
            nodes.append(helper.make_node("Cast", [f"{vi.name}_f32"], [vi.name], to=onnx_type,
                                          name=f"cast_{vi.name}"))
            vi.name = f"{vi.name}_f32"
            vi.type.tensor_type.elem_type = TensorProto.FLOAT
    nodes += list(graph.node)
    for vi in graph.output:
        nodes.append(helper.make_node("Cast", [vi.name], [f"{vi.name}_f32"], to=TensorProto.FLOAT,
                                      name=f"cast_{vi.name}"))
        vi.name = f"{vi.name}_f32"
        vi.type.tensor_type.elem_type = TensorProto.FLOAT
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def _contract_of(model) -> tuple[onnx.NodeProto, onnx.FunctionProto]:
    node = next(n for n in model.graph.node if n.domain == DOMAIN)
    fn = next(f for f in model.functions if f.name == node.op_type)
    return node, fn


def _params_from_body(model):
    """Contract parameters from the model's contract name (a malformed name needs `params`)."""
    node, _ = _contract_of(model)
    cfg = parse_attention_vjp_name(node.op_type)
    if cfg is None:
        raise ValueError(f"{node.op_type!r} is not a valid AttentionVJP contract name")
    return cfg


def attention_vjp_feeds(model, rng: np.random.Generator, dims: dict | None = None, *,
                        fully_masked_rows: bool = False, keep_prob: float = 0.85,
                        consistent_y: bool = True, params: AttentionVJPConfig | None = None):
    """Random float32 feeds for an AttentionVJP model (never zeros).

    dims: values for symbolic dims (B, Sq, Sk). Masks keep about `keep_prob` of the keys (kind 1:
    random False; kind 2: random values in [-1, 1] with -inf entries). fully_masked_rows masks
    every key of some query rows (needs a mask with an Sq axis, or causal with a masked key 0).
    Y (plain form) is the float32 forward output unless consistent_y=False (then random).
    params: the contract's parameters when the model's name is malformed on purpose.
    """
    cfg = params or _params_from_body(model)
    dims = dict(dims or {})
    shapes = {}
    for vi in model.graph.input:
        shapes[vi.name] = tuple(
            dims[dim.dim_param] if dim.dim_param else dim.dim_value
            for dim in vi.type.tensor_type.shape.dim)
    feeds = {}
    for n in ("Q", "K", "V", "dY"):
        feeds[n] = rng.standard_normal(shapes[n]).astype(np.float32)
    mshape = shapes["Mask"]
    rows_axis = len(mshape) - 2
    if cfg.mask_kind == 2:
        mask = rng.uniform(-1.0, 1.0, mshape).astype(np.float32)
        mask[rng.random(mshape) > keep_prob] = -np.inf
        if fully_masked_rows and rows_axis >= 0 and mshape[rows_axis] > 1:
            mask[..., ::3, :] = -np.inf
    else:
        mask = rng.random(mshape) < keep_prob
        if fully_masked_rows:
            if rows_axis >= 0 and mshape[rows_axis] > 1:
                mask[..., ::3, :] = False
            elif mshape[-1] > 0:
                # No query axis: masking key 0 leaves row 0 empty when causal.
                mask[..., 0] = False
    feeds["Mask"] = mask
    if not cfg.recompute and "Y" in shapes:
        if consistent_y:
            y = attention_forward_reference(
                feeds["Q"], feeds["K"], feeds["V"], mask, hq=cfg.hq, hk=cfg.hk,
                causal=cfg.causal, mask_kind=cfg.mask_kind, scale=cfg.scale, rank=cfg.rank)
            feeds["Y"] = y.astype(np.float32)
        else:
            feeds["Y"] = rng.standard_normal(shapes["Y"]).astype(np.float32)
    return feeds


def attention_vjp_reference_for(model, feeds, params: AttentionVJPConfig | None = None,
                                outputs=None):
    """The float64 reference for a model built by attention_vjp_model and its feeds (the
    model's requested gradients, or `outputs`)."""
    cfg = params or _params_from_body(model)
    return attention_vjp_reference(
        feeds["Q"], feeds["K"], feeds["V"], feeds["dY"], feeds["Mask"], hq=cfg.hq, hk=cfg.hk,
        causal=cfg.causal, mask_kind=cfg.mask_kind, scale=cfg.scale, rank=cfg.rank,
        outputs=cfg.outputs if outputs is None else outputs,
        y=None if cfg.recompute else feeds["Y"])
