"""Generator (a): AttentionVJP contract calls (pkg.onnax) with mutated names and interfaces.

Each case is one call node plus its model-local function. The name starts from a valid contract
(random rank, heads, head size, scale, causal, outputs, mask kind; tiny B/Sq/Sk including 0) and
is then often mutated: characters (replaced, inserted, dropped; signs, exponents, spaces,
non-ASCII digits), whole fields (order, letters, duplicates, missing), numbers (zero, negative,
huge, leading zeros, other bases), the scale's hex digits (count, case, NaN/Inf/negative/zero
patterns), the output list, the prefix and the fingerprint. Interfaces are mutated too (input
and output counts, ranks, dtypes, static widths, head dims, mask dtype/rank, unknown shapes).

The oracle: `parse_attention_vjp_name` (the documented grammar) on an ASCII name plus the claim's
interface rules decide whether the EP must claim the call; claimed calls are checked against the
float64 reference of what the *name* says, refused ones run the function body on ORT CPU in both
sessions. Valid calls sometimes carry NaN/Inf in Q, K, V, Y, dY or the additive mask.
"""

from __future__ import annotations

import math
import string

import numpy as np
from onnx import TensorProto, helper

from ortmlx.contracts import (DOMAIN, attention_vjp_function, attention_vjp_reference,
                              parse_attention_vjp_name, scale_hex)

from .fuzzlib import ONNX_OF, Case

PLAIN, RECOMPUTE = "AttentionVJP_", "AttentionVJPRecompute_"
LETTERS = "rqkdscom"
HEADS = ((1, 1), (2, 1), (2, 2), (4, 2), (4, 1), (3, 3), (6, 2))

# Paths by provider options (the dense/tiled labels are chosen by the limit).
PATH_OPTIONS = {
    "dense": {"attention_vjp_dense_limit_bytes": str(1 << 40)},
    "tiled": {"attention_vjp_dense_limit_bytes": "0"},
    "auto": {},
    "native": {"attention_vjp_native": "on"},
    "blocked": {"attention_vjp_dense_limit_bytes": "0", "attention_vjp_tiled": "blocked"},
}


class Base:
    """A valid contract: its fields and the shapes of one call."""

    def __init__(self, rng):
        r = rng
        self.recompute = r.random() < 0.3
        self.rank = int(r.choice([3, 4]))
        self.hq, self.hk = HEADS[int(r.integers(len(HEADS)))]
        self.d = int(r.choice([32, 40])) if self.recompute else int(r.choice([8, 16, 24]))
        self.scale = float(r.choice([1 / math.sqrt(self.d), 0.125, float(r.uniform(0.05, 1.5))]))
        self.scale = float(np.float32(self.scale))
        self.causal = int(r.integers(2))
        subsets = [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]
        self.outputs = subsets[int(r.integers(len(subsets)))]
        self.mask = int(r.integers(3))
        self.fp = "".join(r.choice(list("0123456789abcdefABCDEF"), size=16))
        self.b = int(r.choice([1, 1, 2, 2, 0])) if r.random() < 0.97 else 0
        self.sq = int(r.integers(1, 7)) if r.random() < 0.95 else 0
        self.sk = int(r.integers(1, 7)) if r.random() < 0.95 else 0
        # Mask: rank 1..4, broadcasting against (B, HQ, Sq, Sk); its last axis any width.
        mrank = int(r.integers(1, 5))
        width = int(r.choice([1, max(self.sk, 1), max(1, self.sk - 2), self.sk + 2]))
        full = (self.b, self.hq, self.sq, width)[4 - mrank:]
        self.mask_shape = tuple(x if i == mrank - 1 or r.random() < 0.5 else 1
                                for i, x in enumerate(full))

    def fields(self):
        return [f"r{self.rank}", f"q{self.hq}", f"k{self.hk}", f"d{self.d}",
                f"s{scale_hex(self.scale)}", f"c{self.causal}",
                "o" + "".join(map(str, self.outputs)), f"m{self.mask}", self.fp]

    def name(self):
        return (RECOMPUTE if self.recompute else PLAIN) + "_".join(self.fields())

    def shape(self, which):
        heads = self.hk if which in ("K", "V") else self.hq
        seq = self.sk if which in ("K", "V") else self.sq
        if self.rank == 3:
            return (self.b, seq, heads * self.d)
        return (self.b, heads, seq, self.d)

    def input_names(self):
        return ["Q", "K", "V"] + ([] if self.recompute else ["Y"]) + ["dY", "Mask"]


# ------------------------------------------------------------------------------------------
# name mutations
# ------------------------------------------------------------------------------------------

ODD_CHARS = list(string.ascii_letters + string.digits + "_+-.e ") + ["\u0663", "\u00b2", "\t"]


def mutate_name(rng, base: Base) -> str:
    r = rng
    prefix = RECOMPUTE if base.recompute else PLAIN
    fields = base.fields()
    kind = int(r.integers(12))
    if kind == 0:  # a character replaced, inserted or dropped anywhere
        name = prefix + "_".join(fields)
        i = int(r.integers(len(name) + 1))
        op = int(r.integers(3))
        ch = str(r.choice(ODD_CHARS))
        if op == 0 and i < len(name):
            return name[:i] + ch + name[i + 1:]
        if op == 1:
            return name[:i] + ch + name[i:]
        return name[:i] + name[i + 1:]
    if kind == 1:  # a numeric field: signs, zeros, huge, exponent, spaces, other digits
        i = int(r.choice([0, 1, 2, 3, 5, 7]))
        letter, value = fields[i][0], fields[i][1:]
        value = str(r.choice([
            "+" + value, "-" + value, "0" + value, "00" + value, value + "0", value + "e0",
            "1e1", " " + value, value + " ", "0", "-0", "+0", "2147483648", "99999999999",
            "2147483647", "0x" + value, "\u0663", str(int(value) + 1), str(int(value) * 2),
            str(int(r.integers(0, 300))), "", "1.0"]))
        fields[i] = letter + value
    elif kind == 2:  # the scale field
        bits = scale_hex(base.scale)
        fields[4] = "s" + str(r.choice([
            "+" + bits[1:], "+3e8", "3e8", bits[:7], bits + "0", "0" + bits, bits.upper(),
            "7f800000", "ff800000", "7fc00000", "00000000", "80000000", "be000000",
            "00000001", "3f80000g", "3f80 000", "0x3f8000", "%08x" % int(r.integers(0, 2**32)),
            scale_hex(float(r.uniform(0.01, 4))), "3F800000", "1p-3", bits[:6] + "__"]))
    elif kind == 3:  # the output list
        fields[6] = "o" + str(r.choice(["", "3", "012", "210", "00", "0112", "02", "12", "1",
                                        "0", "2", "01", "-1", "0 1", "+1", "o1", "0,1"]))
    elif kind == 4:  # causal and mask kind
        i = int(r.choice([5, 7]))
        fields[i] = fields[i][0] + str(r.choice(["0", "1", "2", "3", "-1", "+1", "01", "1e0"]))
    elif kind == 5:  # field letters swapped / wrong
        i, j = r.choice(8, size=2, replace=False)
        fields[i], fields[j] = fields[j], fields[i]
        if r.random() < 0.5:
            k = int(r.integers(8))
            fields[k] = str(r.choice(list("xyzRQKD"))) + fields[k][1:]
    elif kind == 6:  # a field duplicated or dropped, an extra one
        i = int(r.integers(len(fields)))
        op = int(r.integers(3))
        if op == 0:
            fields.insert(i, fields[i])
        elif op == 1:
            del fields[i]
        else:
            fields.insert(i, "v1")
    elif kind == 7:  # the fingerprint
        fields[8] = str(r.choice([
            fields[8][:15], fields[8] + "0", fields[8][:15] + "g", fields[8].upper(),
            "0" * 16, "f" * 16, "", fields[8][:8] + "_" + fields[8][8:], "0x" + fields[8][:14]]))
    elif kind == 8:  # the prefix
        prefix = str(r.choice(["AttentionVJP", "attentionVJP_", "AttentionVJPRecompute",
                               "AttentionVJPrecompute_", "AttentionVJP__", "AttentionVJPX_",
                               "AttentionVJP_Recompute_",
                               RECOMPUTE if prefix == PLAIN else PLAIN]))
    elif kind == 9:  # valid names with other values (often another interface)
        fields[1] = f"q{int(r.choice([1, 2, 3, 4, 6, 8]))}"
        fields[2] = f"k{int(r.choice([1, 2, 3, 4]))}"
        fields[3] = f"d{int(r.choice([0, 4, 8, 12, 16, 24, 32, 40, 256, 264]))}"
    elif kind == 10:  # head size and rank
        fields[0] = f"r{int(r.choice([2, 3, 4, 5]))}"
        fields[3] = f"d{int(r.choice([8, 16, 24, 32, 40, 64]))}"
    else:  # separators
        name = prefix + "_".join(fields)
        return name.replace("_", str(r.choice(["__", "-", "", "_ "])), int(r.integers(1, 3)))
    return prefix + "_".join(fields)


# ------------------------------------------------------------------------------------------
# cases
# ------------------------------------------------------------------------------------------

def _claim_oracle(name, infos, n_outputs):
    """Whether the EP must claim a call `name` whose inputs have `infos` [(dtype, shape)]
    (shape None: unknown; dims None: symbolic) and which has n_outputs outputs."""
    if not name.isascii():
        return False
    cfg = parse_attention_vjp_name(name)
    if cfg is None:
        return False
    if len(infos) != (5 if cfg.recompute else 6) or n_outputs != len(cfg.outputs):
        return False
    tensors = 4 if cfg.recompute else 5
    for i in range(tensors):
        dtype, shape = infos[i]
        if dtype != TensorProto.FLOAT or shape is None or len(shape) != cfg.rank:
            return False
        heads = cfg.hk if i in (1, 2) else cfg.hq
        width = heads * cfg.d if cfg.rank == 3 else cfg.d
        if shape[-1] != width or (cfg.rank == 4 and shape[1] != heads):
            return False
    dtype, shape = infos[tensors]
    if shape is None or not 1 <= len(shape) <= 4:
        return False
    return dtype == (TensorProto.FLOAT if cfg.mask_kind == 2 else TensorProto.BOOL)


def _copy_source(inputs, i, out):
    """The input a trivial body copies into output `out` (number i): dQ <- Q, dK <- K, dV <- V
    where they exist (right shape and type), else some input."""
    want = {"dQ": "Q", "dK": "K", "dV": "V"}.get(out)
    return want if want in inputs else inputs[i % len(inputs)]


def _trivial_function(name, inputs, outputs):
    """A cheap body: each output is a copy of an input."""
    nodes = [helper.make_node("Identity", [_copy_source(inputs, i, o)], [o])
             for i, o in enumerate(outputs)]
    return helper.make_function(DOMAIN, name, inputs, outputs, nodes,
                                opset_imports=[helper.make_opsetid("", 21)])


def _amax(a):
    a = np.asarray(a, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(np.abs(a).max()) if a.size else 0.0


def _overflows(raw, p):
    return p.scale * p.d * _amax(raw["Q"]) * _amax(raw["K"]) > 1e36


def _noise(raw, p, base):
    """Absolute float32 rounding noise of the gradients, divided by the comparison's relative
    tolerance (1e-4) so it adds to the magnitude. dS = P (dP - delta) cancels: its rounding error,
    about eps * (|dP| + |delta|), reaches dQ and dK multiplied by the scale and summed over keys
    or queries. With a huge scale the scores themselves are ill-conditioned (an error of ~1 in a
    score changes P outright): then only NaN/Inf positions and finiteness are compared."""
    qk = p.scale * p.d * _amax(raw["Q"]) * _amax(raw["K"])
    if qk * 2e-7 > 1e-3:
        return math.inf
    y = raw.get("Y", raw["V"])
    dp = p.d * _amax(raw["dY"]) * (_amax(raw["V"]) + _amax(y))
    noise = p.scale * max(base.sq, base.sk, 1) * 5e-7 * dp * max(_amax(raw["K"]), _amax(raw["Q"]))
    return noise / 1e-4


class ContractCases:
    def __init__(self, rng, path):
        self.rng = rng
        self.path = path
        self.names: dict = {}  # contract name -> the body key it was built with (one batch)

    def new_batch(self):
        self.names = {}

    def feeds(self, base, cid, nonfinite):
        r = self.rng
        f = {}
        for n in ("Q", "K", "V", "dY") + (() if base.recompute else ("Y",)):
            f[n] = r.standard_normal(base.shape("K" if n == "V" else n)).astype(np.float32)
        if base.mask == 2:
            m = r.uniform(-1, 1, base.mask_shape).astype(np.float32)
            m[r.random(base.mask_shape) > 0.8] = -np.inf
        else:
            m = r.random(base.mask_shape) < 0.8
        f["Mask"] = m
        if nonfinite:
            targets = [n for n in f if n != "Mask" and f[n].size] + \
                      (["Mask"] if base.mask == 2 and m.size else [])
            for _ in range(int(r.integers(1, 3))):
                if not targets:
                    break
                n = str(r.choice(targets))
                a = f[n]
                idx = tuple(int(r.integers(s)) for s in a.shape)
                a[idx] = float(r.choice([np.nan, np.inf, -np.inf]))
        return {f"{cid}_{n}": v for n, v in f.items()}

    def make(self, cid):
        r = self.rng
        base = Base(r)
        name = base.name()
        mode = r.random()
        mutated_name = mode < 0.5
        if mutated_name:
            name = mutate_name(r, base)
        interface = None
        if 0.5 <= mode < 0.68:
            interface = int(r.integers(9))
        body_key = (base.name(), interface)
        if self.names.setdefault(name, body_key) != body_key:
            return None  # this name already has another body in the batch
        nonfinite = not mutated_name and interface is None and r.random() < 0.2
        ins = base.input_names()
        feeds = self.feeds(base, cid, nonfinite)
        # Declared dims where they differ from the feed's shape ("unknown": no shape; None
        # entries: symbolic dims).
        declared: dict = {}
        out_names = ["dQ", "dK", "dV"]
        outs = [out_names[o] for o in base.outputs]
        trivial = False
        if interface is not None:
            r2 = r.random()
            if interface == 0:  # an input too many or too few
                if r2 < 0.5:
                    ins = ins + ["Extra"]
                    feeds[f"{cid}_Extra"] = np.ones((1,), np.float32)
                else:
                    drop = ins[int(r.integers(len(ins)))]
                    ins = [n for n in ins if n != drop]
                    del feeds[f"{cid}_{drop}"]
                trivial = True
            elif interface == 1:  # an output too many or too few
                if r2 < 0.5 or len(outs) == 1:
                    outs = outs + [str(r.choice([o for o in out_names if o not in outs] or
                                                ["dX"]))]
                else:
                    outs = outs[:-1]
                trivial = True
            elif interface in (2, 3):  # a tensor's or the mask's dtype
                n = str(r.choice(ins))
                a = feeds[f"{cid}_{n}"]
                nt = r.choice([np.float16, np.float64, np.int32, np.bool_, np.float32])
                feeds[f"{cid}_{n}"] = a.astype(nt)
                trivial = True
            elif interface == 4:  # a tensor's rank
                n = str(r.choice(ins[:-1]))
                a = feeds[f"{cid}_{n}"]
                feeds[f"{cid}_{n}"] = a.reshape(a.shape + (1,)) if r2 < 0.5 else \
                    a.reshape((-1,) if a.size else (0,))
                trivial = True
            elif interface == 5:  # a static width or head count that is not the name's
                n = str(r.choice(ins[:-1]))
                a = feeds[f"{cid}_{n}"]
                shape = list(a.shape)
                ax = -1 if (base.rank == 3 or r2 < 0.5) else 1
                shape[ax] += int(r.choice([-1, 1, 8]))
                shape[ax] = max(shape[ax], 0)
                feeds[f"{cid}_{n}"] = np.zeros(shape, a.dtype) + (a.flat[0] if a.size else 0)
                trivial = True
            elif interface == 6:  # symbolic dims: B/S (claimable) or the last one (not)
                n = str(r.choice(ins[:-1]))
                dims = list(feeds[f"{cid}_{n}"].shape)
                declared[n] = dims
                if r2 < 0.5:
                    dims[0] = None
                    seq_ax = 1 if base.rank == 3 else 2
                    dims[seq_ax] = None
                else:
                    dims[-1] = None
            elif interface == 7:  # the mask's shape unknown, or of rank 0 / 5
                if r2 < 0.4:
                    declared["Mask"] = "unknown"
                else:
                    a = feeds[f"{cid}_Mask"]
                    feeds[f"{cid}_Mask"] = a.reshape(()) if (r2 < 0.7 and a.size == 1) else \
                        a.reshape((1,) + a.shape + (1,) * max(0, 4 - a.ndim))
                    trivial = True
            else:  # a tensor declared with an unknown shape
                n = str(r.choice(ins[:-1]))
                declared[n] = "unknown"
        # Value infos from the (possibly mutated) feeds and declared dims.
        input_infos = []
        oracle_infos = []
        for n in ins:
            a = feeds[f"{cid}_{n}"]
            t = ONNX_OF[a.dtype]
            dims = declared.get(n, list(a.shape))
            if dims == "unknown":
                input_infos.append(helper.make_tensor_value_info(f"{cid}_{n}", t, None))
                oracle_infos.append((t, None))
            else:
                sym = [f"{cid}_{n}_d{i}" if d is None else d for i, d in enumerate(dims)]
                input_infos.append(helper.make_tensor_value_info(f"{cid}_{n}", t, sym))
                oracle_infos.append((t, [-1 if d is None else d for d in dims]))
        # The EP decides from the name and the value infos alone, so most calls get a body that
        # copies Q/K/V (ORT inlines it when the EP refuses: cheap); some get the real body,
        # which the EP session then runs partly on the EP, checked against the float64 reference.
        real_body = not trivial and r.random() < 0.08
        if not real_body:
            fn = _trivial_function(name, list(ins), list(outs))
        else:
            fn = attention_vjp_function(name, base.rank, base.hq, base.hk, base.d, base.scale,
                                        base.causal, base.outputs, base.mask, base.recompute)
        node = helper.make_node(name, [f"{cid}_{n}" for n in ins], [f"{cid}_{o}" for o in outs],
                                name=f"{cid}_n", domain=DOMAIN)
        expect = _claim_oracle(name, oracle_infos, len(outs))
        cfg = parse_attention_vjp_name(name) if expect else None
        raw = {n: feeds[f"{cid}_{n}"] for n in ins}

        def ref():
            if _overflows(raw, cfg):
                # Scores beyond float32's range (a scale near FLT_MAX): float32 rounds them to
                # Inf where float64 does not, so no value can be compared; the call must still
                # be claimed and run.
                return None
            return attention_vjp_reference(
                raw["Q"], raw["K"], raw["V"], raw["dY"], raw["Mask"], hq=cfg.hq, hk=cfg.hk,
                causal=cfg.causal, mask_kind=cfg.mask_kind, scale=cfg.scale, rank=cfg.rank,
                outputs=cfg.outputs, y=None if cfg.recompute else raw["Y"])
        mag = None
        unbroadcastable = False
        if real_body or expect:
            params = cfg or parse_attention_vjp_name(base.name())
            try:
                with np.errstate(all="ignore"):
                    grads = attention_vjp_reference(
                        raw["Q"], raw["K"], raw["V"], raw["dY"], raw["Mask"], hq=params.hq,
                        hk=params.hk, causal=params.causal, mask_kind=params.mask_kind,
                        scale=params.scale, rank=params.rank, outputs=(0, 1, 2),
                        y=None if params.recompute else raw["Y"])
            except ValueError:
                # A mutated head count the mask (drawn for the base's heads) does not broadcast
                # against (seed 25, c21_73: mask (1, 4, 4, 1), 8 heads): the contract's body
                # raises there (the copying stand-in body would not), so the EP must refuse the
                # call or raise.
                grads, unbroadcastable = [], True
            finite = [np.abs(g[np.isfinite(g)]).max() for g in grads if np.isfinite(g).any()]
            mag = [max(finite or [0.0], default=0.0) + _noise(raw, params, base)] * len(outs)
        label = (f"{name!r} path={self.path}{' real-body' if real_body else ''} "
                 f"B{base.b} Sq{base.sq} Sk{base.sk} mask{base.mask_shape}"
                 + (f" interface#{interface}" if interface is not None else "")
                 + (" nonfinite" if nonfinite else ""))
        fn_ins = list(ins)

        def body_ref():
            # What the body computes when the EP refuses the call.
            if not real_body:
                return [raw[_copy_source(fn_ins, i, o)] for i, o in enumerate(outs)]
            p = parse_attention_vjp_name(base.name())
            with np.errstate(all="ignore"):
                return attention_vjp_reference(
                    raw["Q"], raw["K"], raw["V"], raw["dY"], raw["Mask"], hq=p.hq, hk=p.hk,
                    causal=p.causal, mask_kind=p.mask_kind, scale=p.scale, rank=p.rank,
                    outputs=p.outputs, y=None if p.recompute else raw["Y"])
        return Case(cid, "contract", label, [node], feeds, [f"{cid}_{o}" for o in outs],
                    input_infos=input_infos, functions=[fn],
                    reference=ref if expect else None, reference_primary=expect,
                    refused_reference=body_ref, expect_claim=expect, mag=mag, tol_scale=5.0,
                    needs_cpu=False, expect_raise=unbroadcastable)
