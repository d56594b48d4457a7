"""Hostile values for the op generators: int attribute values at the edges of 32 and 64 bits,
huge dims (element or byte counts beyond 64 bits, single dims >= 2^31), out-of-range indices.

The generic attribute mutation (`mutate_int_attribute`) replaces one int (or one element of an
ints) attribute of a generated node, present or not, by a hostile value; ORT CPU is the oracle:
where it raises at run time the EP must refuse or raise as well.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto, helper

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
HOSTILE_INTS = (0, -1, -2, 1 << 31, (1 << 31) - 1, -(1 << 31), 1 << 32, (1 << 32) + 1,
                -(1 << 32), INT64_MIN, INT64_MAX, INT64_MIN + 1)
# Dims that make tensors no machine holds (alone or multiplied: > 2^64 bytes), or with a zero
# beside them, empty tensors with huge dims.
HUGE_DIMS = (1 << 31, (1 << 31) + 1, 1 << 32, (1 << 32) + 1, 1 << 40, (1 << 62), INT64_MAX)


# Counts hostile draws: OpCases marks a case whose generation drew one as solo (run alone).
DRAWS = [0]


def mark():
    DRAWS[0] += 1


def hpick(rng, values):
    """One of `values` (hostile ones, ints or floats: the type is kept), counted as a hostile
    draw."""
    mark()
    return values[int(rng.integers(len(values)))]


def hostile_int(rng) -> int:
    mark()
    return int(HOSTILE_INTS[int(rng.integers(len(HOSTILE_INTS)))])


def huge_dim(rng) -> int:
    mark()
    return int(HUGE_DIMS[int(rng.integers(len(HUGE_DIMS)))])


def huge_shape(rng, rank: int) -> list[int]:
    """A shape with a dim >= 2^31: either empty (a 0 beside it) or of at least 2^62 elements
    (so no allocation can succeed: the byte count overflows or exceeds any memory)."""
    rank = max(rank, 1)
    dims = [int(rng.integers(1, 4)) for _ in range(rank)]
    dims[int(rng.integers(rank))] = huge_dim(rng)
    if rng.random() < 0.3:
        dims[int(rng.integers(rank))] = 0
    elif int(np.prod([float(d) for d in dims])) < (1 << 62):
        if rank == 1:
            dims[0] = 1 << 62
        else:
            i = int(rng.integers(rank))
            dims[i] = max(dims[i], 1 << 31)
            j = (i + 1) % rank
            dims[j] = max(dims[j], 1 << 32)
    return dims


def int_attribute_names(op: str, opset: int, domain: str = "") -> list[str]:
    """The INT and INTS attributes of `op`'s schema at `opset`."""
    try:
        schema = onnx.defs.get_schema(op, opset, domain)
    except Exception:
        return []
    return [n for n, a in schema.attributes.items()
            if a.type in (AttributeProto.INT, AttributeProto.INTS)]


def mutate_int_attribute(rng, node, names: list[str]) -> str | None:
    """Sets one of `names` on `node` to a hostile value (one element if it is an ints list);
    returns a label for the case, or None when the op has no int attribute."""
    present = {a.name: a for a in node.attribute if a.name in names}
    if not names:
        return None
    name = names[int(rng.integers(len(names)))]
    value = hostile_int(rng)
    if name in present:
        attr = present[name]
        if attr.type == AttributeProto.INTS and len(attr.ints):
            i = int(rng.integers(len(attr.ints)))
            attr.ints[i] = value
            return f"hostile {name}[{i}]={value}"
        node.attribute.remove(attr)
    try:
        schema_ints = AttributeProto.INTS == _attr_type(node, name)
    except Exception:
        schema_ints = False
    node.attribute.append(helper.make_attribute(name, [value] if schema_ints else value))
    return f"hostile {name}={value}"


def _attr_type(node, name):
    schema = onnx.defs.get_schema(node.op_type, 10 ** 4, node.domain)
    return schema.attributes[name].type


def out_of_range(rng, n: int) -> int:
    """An index outside [-n, n)."""
    mark()
    choices = (n, n + 1, -n - 1, 1 << 31, -(1 << 31), 1 << 32, INT64_MAX, INT64_MIN)
    return int(choices[int(rng.integers(len(choices)))])
