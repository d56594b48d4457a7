"""Generator (b): one node per case, for every registry entry (ai.onnx and com.microsoft), with
random dtypes, attribute values (valid, out of range, hostile, absent), opsets across the entry's
range, input forms (graph input, constant initializer) and data (special values included).
The op families live in gen_elem.py, gen_shape.py, gen_nn.py, gen_control.py,
gen_recurrent.py, gen_vision.py and gen_ml.py (mixins of OpCases); each op has a method gen_<Op>
(com.microsoft: gen_ms_<Op>, ai.onnx.ml: gen_ml_<Op>),
which test_coverage.py checks against the registry. Mostly cases ORT CPU has a kernel for are
emitted; ORT rejecting one at load time marks it invalid (not counted)."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import AttributeProto, helper

from .fuzzlib import FLOATS, INTS, NP_OF, Case, TensorProto, cpu_kernels
from .gen_control import ControlGen
from .gen_data import broadcast_pair, data, floats, ints, rand_dim, rand_shape, rand_shape_axis
from .gen_elem import ElemGen, empty_marker
from .gen_ml import MlGen
from .gen_nn import NNGen
from .gen_recurrent import RecurrentGen
from .gen_shape import ShapeGen
from .gen_vision import VisionGen
from . import hostile
from .hostile import int_attribute_names, mutate_int_attribute

F32, F16, F64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE
I32, I64 = TensorProto.INT32, TensorProto.INT64
BOOL = TensorProto.BOOL

# The op types the registry claims (build/ortmlx_registry_dump), with the first opset each
# generator emits.
BINARY = ("Add", "Sub", "Mul", "Div")
UNARY = ("Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Relu", "Sigmoid", "Tanh", "Erf",
         "Gelu")
OPS = BINARY + ("Pow",) + UNARY + ("MatMul", "Gemm", "Reshape", "Transpose", "Unsqueeze",
                                   "Squeeze", "Flatten", "Concat", "Identity", "Cast",
                                   "ReduceSum", "ReduceMean", "LayerNormalization", "Softmax")
MIN_OPSET = {"Gelu": 20, "LayerNormalization": 17}
OPSETS = (4, 7, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24)
OPSET_P = np.array([0.5, 0.5, 1, 1, 3, 2, 3, 2, 2, 1, 2, 3, 2, 2, 3, 2, 3, 3], dtype=float)
# Opsets before 9 exist for the registry entries of older versions only (Reshape 1-4 with its
# shape attribute, Upsample 7-8): batches at those opsets make cases of these ops alone.
OLD_OPSET_OPS = ("Reshape", "Upsample")
# Share of cases whose node gets one int attribute set to a hostile value.
HOSTILE_ATTR_P = 0.03


def generated_ops() -> list[tuple[str, str]]:
    """(domain, op_type) of every op the generator makes ("" = ai.onnx)."""
    out = [("", op) for op in OPS]
    for name in dir(OpCases):
        if name.startswith("gen_ms_"):
            out.append(("com.microsoft", name[7:]))
        elif name.startswith("gen_ml_"):
            out.append(("ai.onnx.ml", name[7:]))
        elif name.startswith("gen_") and name[4:5].isupper():
            out.append(("", name[4:]))
    return sorted(set(out))


def _available(op: str, opset: int) -> bool:
    if op in NO_ONNX_SCHEMA:
        return True
    try:
        onnx.defs.get_schema(op, opset, "")
    except Exception:
        return False
    return True


# ai.onnx-domain ops ORT defines itself (no ONNX schema).
NO_ONNX_SCHEMA = ("SimplifiedLayerNormalization",)

# dtype draws: mostly what the EP claims, often what it refuses.
TYPE_WEIGHTS = ((F32, 8), (F16, 3), (F64, 2), (I32, 2), (I64, 2), (TensorProto.INT8, 1),
                (TensorProto.INT16, 1), (TensorProto.UINT8, 1), (TensorProto.UINT16, 1),
                (TensorProto.UINT32, 1), (TensorProto.UINT64, 1), (BOOL, 1))
_TYPES = np.array([t for t, _ in TYPE_WEIGHTS])
_TYPE_P = np.array([w for _, w in TYPE_WEIGHTS], dtype=float) / sum(w for _, w in TYPE_WEIGHTS)


def rand_type(rng, among=None):
    if among is not None:
        return int(rng.choice(np.asarray(among)))
    return int(rng.choice(_TYPES, p=_TYPE_P))


def _f64(a):
    return np.asarray(a, dtype=np.float64)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


# float64 references of the unary ops where ORT CPU's kernels are approximations (consulted when
# the EP and ORT CPU disagree).
UNARY_F64 = {"Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt, "Reciprocal": lambda x: 1.0 / x,
             "Sigmoid": _sigmoid, "Tanh": np.tanh, "Erf": _erf,
             "Gelu": lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))}


def make_node(op, inputs, outputs, name, **attrs):
    """helper.make_node, also for empty int-list attributes (their type cannot be inferred)."""
    empty = [k for k, v in attrs.items() if isinstance(v, list) and not v]
    node = helper.make_node(op, inputs, outputs, name=name,
                            **{k: v for k, v in attrs.items() if k not in empty})
    for k in empty:
        node.attribute.append(helper.make_attribute(k, [], attr_type=AttributeProto.INTS))
    return node


class OpCases(ElemGen, ShapeGen, NNGen, ControlGen, RecurrentGen, VisionGen, MlGen):
    """Makes single-node cases for a model opset."""

    def __init__(self, rng, opset):
        self.rng = rng
        self.opset = opset
        self.k = cpu_kernels()
        self.ops = [(d, op) for d, op in generated_ops()
                    if d or (MIN_OPSET.get(op, 1) <= opset and _available(op, opset))]
        if opset < 9:
            self.ops = [(d, op) for d, op in self.ops if not d and op in OLD_OPSET_OPS]

    # ---- helpers -----------------------------------------------------------------------------
    def pick_type(self, op, nin, among=None, extra_out=None, tries=12):
        """A dtype ORT CPU runs `op` with (every input and output of that type)."""
        for _ in range(tries):
            t = rand_type(self.rng, among)
            if self.k.supports(op, self.opset, [t] * nin, [extra_out or t]):
                return t
        return None

    def case(self, cid, op, nodes, feeds, outputs, consts=None, **kw):
        inits = [onnx.numpy_helper.from_array(v, k) for k, v in (consts or {}).items()]
        return Case(cid, "op", kw.pop("label", op), nodes, feeds, outputs, initializers=inits,
                    **kw)

    def inputs(self, cid, arrays, const_p=0.15, const_idx=None):
        """Names for the arrays: graph inputs, or (with probability const_p) initializers."""
        feeds, consts, names = {}, {}, []
        for i, a in enumerate(arrays):
            name = f"{cid}_x{i}"
            names.append(name)
            if (const_idx is not None and i in const_idx) or self.rng.random() < const_p:
                consts[name] = a
            else:
                feeds[name] = a
        return names, feeds, consts

    def data_kind(self):
        r = self.rng.random()
        return "special" if r < 0.2 else ("small" if r < 0.35 else "normal")

    def make(self, cid, op=None):
        domain, op = op or self.ops[int(self.rng.integers(len(self.ops)))]
        draws = hostile.DRAWS[0]
        prefix = {"": "gen_", "com.microsoft": "gen_ms_", "ai.onnx.ml": "gen_ml_"}[domain]
        fn = getattr(self, prefix + op, None)
        if fn is not None:
            c = fn(cid)
        else:
            c = self.gen_binary(cid, op) if op in BINARY else self.gen_unary(cid, op)
        if c is None:
            return None
        c.op = f"{domain}:{op}"
        if not domain and not c.reference_primary and len(c.nodes) == 1 and \
                self.rng.random() < HOSTILE_ATTR_P:
            what = mutate_int_attribute(self.rng, c.nodes[0],
                                        int_attribute_names(op, self.opset))
            if what:
                c.label += f" [{what}]"
        c.solo = c.solo or hostile.DRAWS[0] != draws
        return c

    def emit(self, cid, op, arrays, attrs=None, n_out=1, domain="", const_idx=(), const_p=0.15,
             label="", **kw):
        """One node over `arrays` (None: an absent optional input); const_idx: always
        initializers. Keyword arguments go to Case (reference, mag, ...)."""
        feeds, consts, names = {}, {}, []
        for i, a in enumerate(arrays):
            if a is None:
                names.append("")
                continue
            name = f"{cid}_x{i}"
            names.append(name)
            if i in const_idx or self.rng.random() < const_p:
                consts[name] = a
            else:
                feeds[name] = a
        while names and names[-1] == "":
            names.pop()
        outs = [f"{cid}_y{i}" for i in range(n_out)]
        node = make_node(op, names, outs, f"{cid}_n", **(attrs or {}))
        if domain:
            node.domain = domain
        shapes = [a.shape if a is not None else None for a in arrays]
        dt = next((a.dtype for a in arrays if a is not None), None)
        return self.case(cid, op, [node], feeds, outs, consts,
                         label=f"{op} {dt} {shapes} {attrs or {}} {label}".rstrip(), **kw)

    def types_for(self, op, build, among, tries=12):
        """A dtype t from `among` for which ORT CPU runs `op` with build(t) = (input types,
        output types); None if none found."""
        for _ in range(tries):
            t = int(self.rng.choice(np.asarray(among)))
            ins, outs = build(t)
            try:
                if self.k.supports(op, self.opset, ins, outs):
                    return t
            except Exception:
                return None
        return None

    # ---- elementwise ---------------------------------------------------------------------------
    def gen_binary(self, cid, op):
        t = self.pick_type(op, 2)
        if t is None:
            return None
        sa, sb = broadcast_pair(self.rng)
        kind = self.data_kind()
        a, b = data(self.rng, sa, t, kind), data(self.rng, sb, t, kind)
        if op == "Div" and t in INTS and self.rng.random() < 0.06:
            return self.int_div_hostile(cid, "Div", t, {})
        if op == "Div" and t in INTS:
            # Integer division by zero (and INT_MIN / -1) is undefined behaviour in ORT's kernel:
            # int_div_hostile makes those cases, run without ORT CPU.
            b = np.where(b == 0, 1, b).astype(b.dtype)
            if np.dtype(NP_OF[t]).kind == "i":
                b = np.where(b == -1, 2, b).astype(b.dtype)
        names, feeds, consts = self.inputs(cid, [a, b])
        node = make_node(op, names, [f"{cid}_y"], f"{cid}_n")
        return self.case(cid, op, [node], feeds, [f"{cid}_y"], consts,
                         label=f"{op} {onnx.helper.tensor_dtype_to_np_dtype(t)} {sa} {sb}")

    def gen_Pow(self, cid):
        for _ in range(12):
            tb = rand_type(self.rng, FLOATS + (I32, I64))
            te = rand_type(self.rng, FLOATS + (I32, I64, TensorProto.INT8))
            if self.k.supports("Pow", self.opset, [tb, te], [tb]):
                break
        else:
            return None
        sa, sb = broadcast_pair(self.rng)
        if tb in FLOATS:
            base = data(self.rng, sa, tb, "special" if self.rng.random() < 0.2 else "normal")
        else:
            base = ints(self.rng, sa, tb, low=-6, high=6)
        if te in FLOATS:
            if self.rng.random() < 0.5:
                ex = floats(self.rng, sb, te, -3, 3)
            else:
                ex = self.rng.integers(-3, 4, size=sb).astype(NP_OF[te])
        else:
            ex = ints(self.rng, sb, te, low=0 if tb not in FLOATS else -3, high=3)
        names, feeds, consts = self.inputs(cid, [base, ex])
        node = make_node("Pow", names, [f"{cid}_y"], f"{cid}_n")
        return self.case(cid, "Pow", [node], feeds, [f"{cid}_y"], consts,
                         label=f"Pow {base.dtype}^{ex.dtype} {sa} {sb}")

    # Value ranges per unary op (special values are mixed in separately).
    RANGES = {"Exp": (-20, 20), "Log": (0.01, 50), "Sqrt": (0, 50), "Reciprocal": (-4, 4),
              "Sigmoid": (-20, 20), "Tanh": (-10, 10), "Erf": (-4, 4), "Gelu": (-8, 8)}

    def gen_unary(self, cid, op):
        t = self.pick_type(op, 1)
        if t is None:
            return None
        shape = rand_shape(self.rng)
        if t in FLOATS:
            lo, hi = self.RANGES.get(op, (-50, 50))
            if t == F16 and op == "Exp":
                lo, hi = -8, 8
            specials = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-3, -1e-3, 1.0, -1.0)
            x = floats(self.rng, shape, t, lo, hi,
                       special_p=0.15 if self.rng.random() < 0.4 else 0.0, specials=specials)
        else:
            x = data(self.rng, shape, t, "special" if self.rng.random() < 0.3 else "normal")
        attrs = {}
        if op == "Gelu":
            r = self.rng.random()
            if r < 0.35:
                attrs["approximate"] = "tanh"
            elif r < 0.6:
                attrs["approximate"] = "none"
            elif r < 0.63:
                attrs["approximate"] = "fast"  # not a value ONNX defines
        names, feeds, consts = self.inputs(cid, [x])
        node = make_node(op, names, [f"{cid}_y"], f"{cid}_n", **attrs)
        fn = UNARY_F64.get(op)
        if op == "Gelu" and attrs.get("approximate", "none") == "tanh":
            fn = _gelu_tanh
        ref = (lambda: [fn(_f64(x))]) if fn is not None and t in FLOATS else None
        mag = None
        if op == "Gelu" and t in FLOATS:
            # x * (1 + erf(x / sqrt 2)) cancels for negative x: both ORT and the EP lose the
            # low bits there, an absolute error of a few float32 units of |x|.
            mag = [0.05 * float(np.max(np.abs(np.nan_to_num(_f64(x), posinf=0, neginf=0)),
                                       initial=0.0))]
        return self.case(cid, op, [node], feeds, [f"{cid}_y"], consts, reference=ref, mag=mag,
                         label=f"{op} {x.dtype} {shape} {attrs}")

    # ---- matmul ------------------------------------------------------------------------------
    def gen_MatMul(self, cid):
        t = self.pick_type("MatMul", 2, among=(F32, F32, F32, F16, F64, I32, I64))
        if t is None:
            return None
        r = self.rng
        ra, rb = int(r.integers(1, 5)), int(r.integers(1, 5))
        m, k, n = rand_dim(r, 0.1), rand_dim(r, 0.1), rand_dim(r, 0.1)
        batch = rand_shape(r, max(ra, rb) - 2) if max(ra, rb) > 2 else ()
        def bshape(rank):
            nb = max(rank - 2, 0)
            dims = batch[len(batch) - nb:] if nb else ()
            return tuple(1 if r.random() < 0.3 else d for d in dims)
        sa = (k,) if ra == 1 else bshape(ra) + (m, k)
        sb = (k,) if rb == 1 else bshape(rb) + (k, n)
        kind = "special" if r.random() < 0.1 else "normal"
        a, b = data(r, sa, t, kind), data(r, sb, t, kind)
        names, feeds, consts = self.inputs(cid, [a, b], const_p=0.2)

        def ref():
            if t in FLOATS:
                return [np.matmul(_f64(a), _f64(b))]
            return [np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(a.dtype)]
        mag = float(np.max(np.matmul(np.abs(_f64(np.nan_to_num(a))),
                                     np.abs(_f64(np.nan_to_num(b)))), initial=0.0)) \
            if t in FLOATS else 0.0
        node = make_node("MatMul", names, [f"{cid}_y"], f"{cid}_n")
        return self.case(cid, "MatMul", [node], feeds, [f"{cid}_y"], consts, reference=ref,
                         mag=[min(mag, 1e30)], label=f"MatMul {a.dtype} {sa} @ {sb}")

    def gen_Gemm(self, cid):
        t = self.pick_type("Gemm", 3, among=(F32, F32, F16, F64, I32, I64))
        if t is None:
            return None
        r = self.rng
        m, k, n = rand_dim(r, 0.1), rand_dim(r, 0.1), rand_dim(r, 0.1)
        ta, tb = int(r.random() < 0.4), int(r.random() < 0.4)
        attrs = {}
        if ta or r.random() < 0.2:
            attrs["transA"] = ta
        if tb or r.random() < 0.2:
            attrs["transB"] = tb
        alpha = beta = 1.0
        if r.random() < 0.5:
            alpha = float(r.choice([0.0, -1.0, 0.5, 2.0, float(r.uniform(-3, 3))]))
            attrs["alpha"] = alpha
        if r.random() < 0.5:
            beta = float(r.choice([0.0, -1.0, 0.5, 2.0, float(r.uniform(-3, 3))]))
            attrs["beta"] = beta
        sa = (k, m) if ta else (m, k)
        sb = (n, k) if tb else (k, n)
        kind = "special" if r.random() < 0.1 else "normal"
        arrays = [data(r, sa, t, kind), data(r, sb, t, kind)]
        c_shape = None
        if r.random() < 0.7:
            c_shape = [(), (1,), (n,), (1, n), (m, 1), (m, n), (1, 1)][int(r.integers(7))]
            arrays.append(data(r, c_shape, t, kind))
        names, feeds, consts = self.inputs(cid, arrays, const_p=0.2)
        a, b = arrays[0], arrays[1]

        def ref():
            if t in FLOATS:
                aa = _f64(a).T if ta else _f64(a)
                bb = _f64(b).T if tb else _f64(b)
                y = alpha * (aa @ bb)
                if c_shape is not None and beta != 0.0:
                    y = y + beta * _f64(arrays[2])
                return [np.broadcast_to(y, (m, n))]
            return None
        mag = 0.0
        if t in FLOATS:
            aa = np.abs(_f64(np.nan_to_num(a)))
            bb = np.abs(_f64(np.nan_to_num(b)))
            prod = (aa.T if ta else aa) @ (bb.T if tb else bb)
            mag = abs(alpha) * float(np.max(prod, initial=0.0))
            if c_shape is not None:
                mag += abs(beta) * float(np.max(np.abs(_f64(np.nan_to_num(arrays[2]))),
                                                initial=0.0))
        node = make_node("Gemm", names, [f"{cid}_y"], f"{cid}_n", **attrs)
        return self.case(cid, "Gemm", [node], feeds, [f"{cid}_y"], consts,
                         reference=ref if t in FLOATS else None, mag=[min(mag, 1e30)],
                         label=f"Gemm {a.dtype} A{sa} B{sb} C{c_shape} {attrs}")

    # ---- shape ops ---------------------------------------------------------------------------
    def any_type(self, op, nin=1):
        return self.pick_type(op, nin, among=(F32, F32, F16, F64, I32, I64, TensorProto.INT8,
                                              TensorProto.UINT8, TensorProto.UINT64, BOOL))

    def gen_Reshape(self, cid):
        t = self.any_type("Reshape")
        if not t:
            return None
        r = self.rng
        shape = rand_shape(r)
        x = data(r, shape, t)
        total = int(np.prod(shape)) if shape else 1
        # A target with the same element count: factor it into 0..4 dims.
        rank = int(r.integers(0, 5))
        target = [1] * rank
        rem = total
        if rank:
            for i in range(rank - 1):
                divs = [d for d in (1, 2, 3, 4, 5) if rem % d == 0] if rem else [0, 1, 2]
                target[i] = int(r.choice(divs))
                rem = rem // target[i] if target[i] else rem
            target[-1] = rem if total else int(r.choice([0, 1, 2]))
            if total == 0 and 0 not in target:
                target[int(r.integers(rank))] = 0
        elif total != 1:
            target = [total]
        allowzero = None
        if self.opset >= 14 and r.random() < 0.4:
            allowzero = int(r.random() < 0.5)
        if target and r.random() < 0.4 and total > 0:
            target[int(r.integers(len(target)))] = -1
        if not allowzero and r.random() < 0.3:
            for i in range(min(len(target), len(shape))):
                if target[i] == shape[i] and r.random() < 0.5:
                    target[i] = 0  # copy the input dim
        if r.random() < 0.04:
            target = target + [-1] if -1 in target else [-2] + target  # invalid
        if self.opset < 5:  # Reshape 1-4: the target is an attribute
            return self.emit(cid, "Reshape", [x], {"shape": [int(d) for d in target]},
                             label=f"-> {target}")
        spec = np.asarray(target, dtype=np.int64)
        names, feeds, consts = self.inputs(cid, [x, spec], const_p=0.05,
                                           const_idx={1} if r.random() < 0.92 else set())
        attrs = {} if allowzero is None else {"allowzero": allowzero}
        node = make_node("Reshape", names, [f"{cid}_y"], f"{cid}_n", **attrs)
        return self.case(cid, "Reshape", [node], feeds, [f"{cid}_y"], consts,
                         label=f"Reshape {x.dtype} {shape} -> {target} {attrs}")

    def gen_Transpose(self, cid):
        t = self.any_type("Transpose")
        if not t:
            return None
        r = self.rng
        shape = rand_shape(r)
        x = data(r, shape, t)
        attrs = {}
        if r.random() < 0.8:
            perm = [int(p) for p in r.permutation(len(shape))]
            if r.random() < 0.04 and perm:
                perm[0] = len(shape)  # invalid
            attrs["perm"] = perm
        names, feeds, consts = self.inputs(cid, [x])
        node = make_node("Transpose", names, [f"{cid}_y"], f"{cid}_n", **attrs)
        return self.case(cid, "Transpose", [node], feeds, [f"{cid}_y"], consts,
                         label=f"Transpose {x.dtype} {shape} {attrs}")

    def _axes_node(self, cid, op, x, axes, extra_attrs=None):
        """(Un)Squeeze / Reduce axes as the attribute (old opsets) or the input (new ones)."""
        attrs = dict(extra_attrs or {})
        arrays = [x]
        input_form = self.opset >= {"Squeeze": 13, "Unsqueeze": 13, "ReduceSum": 13,
                                    "ReduceMean": 18}[op]
        const_idx = set()
        if axes is not None:
            if input_form:
                arrays.append(np.asarray(axes, dtype=np.int64))
                if self.rng.random() < 0.92:
                    const_idx = {1}
            else:
                attrs["axes"] = list(axes)
        names, feeds, consts = self.inputs(cid, arrays, const_p=0.05, const_idx=const_idx)
        return make_node(op, names, [f"{cid}_y"], f"{cid}_n", **attrs), feeds, consts

    def gen_Squeeze(self, cid):
        t = self.any_type("Squeeze")
        if not t:
            return None
        r = self.rng
        shape = tuple(1 if r.random() < 0.4 else d for d in rand_shape(r))
        x = data(r, shape, t)
        ones = [i for i, d in enumerate(shape) if d == 1]
        axes = None
        if r.random() < 0.75:
            axes = [i - len(shape) if r.random() < 0.3 else i for i in ones
                    if r.random() < 0.6]
            if r.random() < 0.05 and shape:
                axes.append(int(r.integers(len(shape))))  # maybe not size 1: invalid
            if r.random() < 0.05 and axes:
                axes.append(axes[0])  # a repeat
        node, feeds, consts = self._axes_node(cid, "Squeeze", x, axes)
        return self.case(cid, "Squeeze", [node], feeds, [f"{cid}_y"], consts,
                         label=f"Squeeze {x.dtype} {shape} axes={axes}")

    def gen_Unsqueeze(self, cid):
        t = self.any_type("Unsqueeze")
        if not t:
            return None
        r = self.rng
        shape = rand_shape(r, hi=3)
        x = data(r, shape, t)
        n_new = int(r.integers(1, 3))
        out_rank = len(shape) + n_new
        axes = [int(a) for a in r.choice(out_rank, size=n_new, replace=False)]
        axes = [a - out_rank if r.random() < 0.3 else a for a in axes]
        if r.random() < 0.04:
            axes.append(out_rank + 1)  # out of range
        node, feeds, consts = self._axes_node(cid, "Unsqueeze", x, axes)
        return self.case(cid, "Unsqueeze", [node], feeds, [f"{cid}_y"], consts,
                         label=f"Unsqueeze {x.dtype} {shape} axes={axes}")

    def gen_Flatten(self, cid):
        t = self.any_type("Flatten")
        if not t:
            return None
        r = self.rng
        shape = rand_shape(r)
        x = data(r, shape, t)
        attrs = {}
        if r.random() < 0.8:
            attrs["axis"] = int(r.integers(-len(shape), len(shape) + 1)) if shape else 0
        names, feeds, consts = self.inputs(cid, [x])
        node = make_node("Flatten", names, [f"{cid}_y"], f"{cid}_n", **attrs)
        return self.case(cid, "Flatten", [node], feeds, [f"{cid}_y"], consts,
                         label=f"Flatten {x.dtype} {shape} {attrs}")

    def gen_Concat(self, cid):
        t = self.any_type("Concat")
        if not t:
            return None
        r = self.rng
        shape, axis = rand_shape_axis(r)
        parts = []
        for _ in range(int(r.integers(1, 5))):
            s = list(shape)
            s[axis] = rand_dim(r, 0.15)
            parts.append(data(r, tuple(s), t))
        names, feeds, consts = self.inputs(cid, parts)
        node = make_node("Concat", names, [f"{cid}_y"], f"{cid}_n", axis=axis)
        return self.case(cid, "Concat", [node], feeds, [f"{cid}_y"], consts,
                         label=f"Concat {parts[0].dtype} {[p.shape for p in parts]} axis={axis}")

    def gen_Identity(self, cid):
        t = self.any_type("Identity")
        if not t:
            return None
        shape = rand_shape(self.rng)
        x = data(self.rng, shape, t, "special")
        names, feeds, consts = self.inputs(cid, [x])
        node = make_node("Identity", names, [f"{cid}_y"], f"{cid}_n")
        return self.case(cid, "Identity", [node], feeds, [f"{cid}_y"], consts,
                         label=f"Identity {x.dtype} {shape}")

    def gen_Cast(self, cid):
        r = self.rng
        for _ in range(12):
            src, dst = rand_type(r), rand_type(r)
            if self.k.supports("Cast", self.opset, [src], [dst]):
                break
        else:
            return None
        shape = rand_shape(r)
        if src in FLOATS and dst in INTS:
            # Out-of-range and NaN float -> int conversions are undefined: in range only.
            info = np.iinfo(NP_OF[dst])
            lo = max(float(info.min), -6e4) if np.dtype(NP_OF[dst]).kind == "i" else 0.0
            hi = min(float(info.max), 6e4)
            x = floats(r, shape, src, lo * 0.99, hi * 0.99)
        elif src in FLOATS:
            x = data(r, shape, src, "special" if r.random() < 0.4 else "normal")
        else:
            x = data(r, shape, src, "special" if r.random() < 0.4 else "normal")
        attrs = {"to": int(dst)}
        if self.opset >= 19 and r.random() < 0.2:
            attrs["saturate"] = int(r.random() < 0.5)
        names, feeds, consts = self.inputs(cid, [x])
        node = make_node("Cast", names, [f"{cid}_y"], f"{cid}_n", **attrs)
        return self.case(cid, "Cast", [node], feeds, [f"{cid}_y"], consts,
                         label=f"Cast {x.dtype} -> {np.dtype(NP_OF[dst])} {shape} {attrs}")

    # ---- reductions and normalisation ------------------------------------------------------------
    def _reduce(self, cid, op):
        t = self.pick_type(op, 1, among=(F32, F32, F16, F64, I32, I64, TensorProto.UINT8,
                                          TensorProto.INT8, TensorProto.UINT32))
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r)
        if t in INTS and op == "ReduceSum" and r.random() < 0.35:
            # Sums beyond the type's range (ORT CPU saturates) and, for int64, beyond 2^53.
            x = ints(r, shape, t, big_p=0.6)
        else:
            x = data(r, shape, t, self.data_kind())
        rank = len(shape)
        axes = None
        if r.random() < 0.8:
            axes = [int(a) - (rank if r.random() < 0.3 else 0)
                    for a in r.choice(rank, size=int(r.integers(0, rank + 1)), replace=False)] \
                if rank else []
            if r.random() < 0.03:
                axes.append(rank + 2)  # out of range
        attrs = {}
        if r.random() < 0.6:
            attrs["keepdims"] = int(r.random() < 0.5)
        input_form = self.opset >= (13 if op == "ReduceSum" else 18)
        if input_form and r.random() < 0.3:
            attrs["noop_with_empty_axes"] = int(r.random() < 0.5)
        node, feeds, consts = self._axes_node(cid, op, x, axes, attrs)

        def ref():
            # The node's attributes when the reference runs: a hostile value may have replaced
            # one (seed 179, o39_28: keepdims 1 drawn, 0 run).
            # Axes as an attribute too (seed 219, o25_192: axes [2, 1] drawn, [-1, 1] run).
            final = {a.name: helper.get_attribute_value(a) for a in c.nodes[0].attribute}
            keep = final.get("keepdims", 1) == 1
            noop = final.get("noop_with_empty_axes", 0) == 1
            run_axes = list(final["axes"]) if "axes" in final else axes
            if run_axes and any(not -rank <= a < rank for a in run_axes):
                return None  # an axis out of range: the EP raises (compared with ORT CPU's error)
            if not run_axes and noop:
                return [x]
            ax = tuple(sorted({a % rank for a in run_axes})) if run_axes and rank \
                else tuple(range(rank))
            if t in FLOATS:
                xf = _f64(x)
                if op == "ReduceSum":
                    y = np.sum(xf, axis=ax, keepdims=keep)
                else:
                    cnt = int(np.prod([shape[a] for a in ax])) if ax else 1
                    y = np.sum(xf, axis=ax, keepdims=keep) / cnt if cnt else \
                        np.zeros(np.sum(xf, axis=ax, keepdims=keep).shape)
                return [y]
            if op != "ReduceSum":
                return None
            # Exact integer sum, saturated to the type's range (ORT's behaviour on overflow).
            y = np.asarray(np.sum(x.astype(object), axis=ax, keepdims=keep), dtype=object)
            info = np.iinfo(x.dtype)
            y = np.array(np.clip(y, int(info.min), int(info.max)), dtype=object)
            return [y.astype(x.dtype)]
        mag = float(np.sum(np.abs(_f64(np.nan_to_num(x))), initial=0.0)) if t in FLOATS else 0.0
        c = self.case(cid, op, [node], feeds, [f"{cid}_y"], consts,
                      reference=ref, mag=[min(mag, 1e30)],
                      label=f"{op} {x.dtype} {shape} axes={axes} {attrs}{empty_marker(x)}")
        return c

    def gen_ReduceSum(self, cid):
        return self._reduce(cid, "ReduceSum")

    def gen_ReduceMean(self, cid):
        return self._reduce(cid, "ReduceMean")

    def gen_LayerNormalization(self, cid):
        r = self.rng
        t = self.pick_type("LayerNormalization", 3, among=(F32, F32, F32, F16, F64),
                           extra_out=None)
        if t is None:
            return None
        shape = tuple(max(1, d) if i else d for i, d in enumerate(rand_shape(r, lo=1)))
        rank = len(shape)
        axis = int(r.integers(-rank, rank))
        attrs = {}
        if axis != -1 or r.random() < 0.3:
            attrs["axis"] = axis
        if r.random() < 0.5:
            attrs["epsilon"] = float(r.choice([1e-5, 1e-3, 0.0, 1.0, 1e-12,
                                               float(r.uniform(0, 0.1))]))
        if r.random() < 0.15:
            attrs["stash_type"] = int(r.choice([1, 0, 16]))
        if r.random() < 0.02:
            attrs["axis"] = rank  # out of range
        nshape = shape[axis:]
        huge = r.random() < 0.1
        if huge:
            # Rows near 1e37: their squared deviations overflow float32.
            x = (floats(r, shape, F64, -3, 3) * 1e37).astype(NP_OF[t]) if t != F16 else \
                floats(r, shape, t, -3e4, 3e4)
        else:
            x = data(r, shape, t, "special" if r.random() < 0.1 else "normal")
        arrays = [x, floats(r, nshape, t, -2, 2)]
        has_b = r.random() < 0.6
        if has_b:
            arrays.append(floats(r, nshape, t, -2, 2))
        n_out = int(r.integers(1, 4))
        names, feeds, consts = self.inputs(cid, arrays, const_p=0.3)
        outs = [f"{cid}_y{i}" for i in range(n_out)]
        node = make_node("LayerNormalization", names, outs, f"{cid}_n", **attrs)
        eps = attrs.get("epsilon", 1e-5)
        ax = axis % rank

        def ref():
            xf = _f64(x)
            red = tuple(range(ax, rank))
            with np.errstate(all="ignore"):
                mean = np.mean(xf, axis=red, keepdims=True)
                var = np.mean((xf - mean) ** 2, axis=red, keepdims=True)
                inv = 1.0 / np.sqrt(var + eps)
                y = (xf - mean) * inv * _f64(arrays[1])
                if has_b:
                    y = y + _f64(arrays[2])
            return [y, mean, inv][:n_out]
        scale_mag = float(np.max(np.abs(_f64(arrays[1])), initial=1.0))
        b_mag = float(np.max(np.abs(_f64(arrays[2])), initial=0.0)) if has_b else 0.0
        n = int(np.prod(nshape))
        x_mag = float(np.max(np.abs(_f64(np.nan_to_num(x, posinf=0, neginf=0))), initial=0.0))
        mag = [scale_mag * math.sqrt(max(n, 1)) + b_mag, x_mag, 0.0][:n_out]
        return self.case(cid, "LayerNormalization", [node], feeds, outs, consts,
                         reference=ref, mag=mag, tol_scale=4.0,
                         label=f"LayerNormalization {x.dtype} {shape} B={has_b} outs={n_out} "
                               f"{attrs}{' huge' if huge else ''}")

    def gen_Softmax(self, cid):
        t = self.pick_type("Softmax", 1, among=(F32, F32, F16, F64))
        if t is None:
            return None
        r = self.rng
        shape = rand_shape(r, lo=1)
        rank = len(shape)
        attrs = {}
        if r.random() < 0.8:
            attrs["axis"] = int(r.integers(-rank, rank))
        if r.random() < 0.02:
            attrs["axis"] = rank
        kind = r.random()
        if kind < 0.15:
            x = floats(r, shape, t, -3, 3, special_p=0.2,
                       specials=(np.nan, np.inf, -np.inf, -1e4, 1e4, 0.0))
        elif kind < 0.3:
            x = floats(r, shape, t, -8e3 if t != F16 else -6e4, 8e3 if t != F16 else 6e4)
        else:
            x = floats(r, shape, t, -5, 5)
        names, feeds, consts = self.inputs(cid, [x])
        node = make_node("Softmax", names, [f"{cid}_y"], f"{cid}_n", **attrs)
        old = self.opset < 13
        axis = attrs.get("axis", 1 if old else -1)

        def ref():
            xf = _f64(x)
            if old:
                a = axis % rank
                x2 = xf.reshape(int(np.prod(shape[:a])), int(np.prod(shape[a:])))
                ax = 1
            else:
                x2, ax = xf, axis % rank
            with np.errstate(all="ignore"):
                mx = np.max(x2, axis=ax, keepdims=True) if x2.size else 0.0
                e = np.exp(x2 - mx)
                y = e / np.sum(e, axis=ax, keepdims=True)
            return [y.reshape(shape)]
        return self.case(cid, "Softmax", [node], feeds, [f"{cid}_y"], consts, reference=ref,
                         mag=[1.0], label=f"Softmax {x.dtype} {shape} {attrs} opset {self.opset}")


def pick_opset(rng):
    return int(rng.choice(OPSETS, p=OPSET_P / OPSET_P.sum()))
