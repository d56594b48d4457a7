import numpy as np
import pytest

from opcheck import check_on_ep, refusal, single_node_model
from ortmlx.testing import random_array

# (equation, operand shapes): every form the EP implements (one or two operands, diagonals,
# sums, batched matmul, outer and elementwise products, implicit output), compared with ORT CPU.
CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),  # implicit output: "ik"
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 8), (2, 3, 7, 8)]),  # attention scores
    ("bhqk,bhkd->bhqd", [(2, 3, 5, 7), (2, 3, 7, 8)]),
    ("bsh,hd->bsd", [(2, 16, 32), (32, 24)]),  # projection
    ("ij,jk->ki", [(3, 4), (4, 5)]),  # output transposed
    ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("bn,anm->bam", [(3, 4), (2, 4, 5)]),
    ("ijk,ikl->jl", [(3, 4, 5), (3, 5, 2)]),  # two contracted letters
    ("ij,kl->ijkl", [(2, 3), (4, 5)]),  # outer product
    ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),  # elementwise
    ("ij,ji->ij", [(3, 4), (4, 3)]),
    ("i,i->", [(7,)] * 2),  # dot
    ("bi,bi->b", [(5, 6), (5, 6)]),
    ("ab,ba->a", [(3, 4), (4, 3)]),
    ("ij,j->i", [(3, 4), (4,)]),  # matrix-vector
    ("ij,k->i", [(3, 4), (5,)]),  # letters only in one operand are summed first
    ("iij,jk->ik", [(3, 3, 4), (4, 2)]),  # diagonal, then matmul
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii->", [(4, 4)]),  # trace
    ("ii", [(4, 4)]),  # implicit: trace
    ("ij->", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ijk->kj", [(2, 3, 4)]),
    ("i->i", [(5,)]),
    ("ij", [(3, 4)]),  # implicit identity
    ("ji", [(3, 4)]),  # implicit: letters sorted, a transpose
    ("BIJ,BJK->BIK", [(2, 3, 4), (2, 4, 5)]),  # upper case
    ("ij, jk -> ik", [(3, 4), (4, 5)]),  # spaces
    ("ij,jk->ik", [(0, 4), (4, 5)]),  # empty
    ("ij,jk->ik", [(3, 0), (0, 5)]),  # empty contraction: zeros
    ("bij,bjk->bik", [(1, 1, 1), (1, 1, 1)]),
    ("bij,bjk->bik", [(4, 32, 48), (4, 48, 40)]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_einsum(case, rng):
    equation, shapes = case
    inputs = {f"x{i}": random_array(rng, s) for i, s in enumerate(shapes)}
    model = single_node_model("Einsum", inputs, attrs={"equation": equation}, opset=12)
    got = check_on_ep(model, inputs, rtol=1e-5, atol=1e-5)
    want = np.einsum(equation.replace(" ", ""), *inputs.values())
    assert got[0].shape == want.shape


@pytest.mark.parametrize("opset", [12, 13, 21])
def test_einsum_opsets(opset, rng):
    inputs = {"a": random_array(rng, (2, 3, 4)), "b": random_array(rng, (2, 4, 5))}
    model = single_node_model("Einsum", inputs, attrs={"equation": "bij,bjk->bik"}, opset=opset)
    check_on_ep(model, inputs, rtol=1e-5, atol=1e-5)


def test_einsum_constant_operand(rng):
    x = random_array(rng, (2, 6, 8))
    w = random_array(rng, (8, 3))
    model = single_node_model("Einsum", {"x": x, "w": w}, attrs={"equation": "bsh,hd->bsd"},
                              opset=12, initializers={"w": w})
    check_on_ep(model, {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("equation,shapes,why", [
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)], "ellipsis"),
    ("iii->i", [(3, 3, 3)], "more than twice"),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], "three or more"),
    ("Ij,jk", [(2, 3), (3, 4)], "implicit output"),
], ids=str)
def test_einsum_refusals(equation, shapes, why, rng):
    inputs = {f"x{i}": random_array(rng, s) for i, s in enumerate(shapes)}
    model = single_node_model("Einsum", inputs, attrs={"equation": equation}, opset=12)
    reason = refusal(model, "Einsum")
    assert reason and why in reason


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_einsum_other_types_are_refused(dtype, rng):
    # float16 is claimed (tests/ops/test_half.py).
    inputs = {"a": random_array(rng, (2, 3), dtype), "b": random_array(rng, (3, 4), dtype)}
    model = single_node_model("Einsum", inputs, attrs={"equation": "ij,jk->ik"}, opset=12)
    reason = refusal(model, "Einsum")
    assert reason and "float16/bfloat16/float32 only" in reason
