import numpy as np
import pytest

from opcheck import check_on_ep, refusal, single_node_model
from ortmlx.testing import EpRun, assert_ran_on_ep, random_array


def run_on_ep(model, feeds):
    """Outputs of the model run on the EP (asserting node 'node' ran there)."""
    run = EpRun(model, strict=True)
    try:
        out = run.run(feeds)
        assert_ran_on_ep(run, ["node"])
        return out
    finally:
        run.close()

# ONNX MatMul is numpy.matmul: 1-D operands, batch broadcasting, empty M/N/K.
MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((1, 4), (4, 1)),
    ((2, 3, 4), (4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),  # batch broadcast both ways
    ((4,), (4, 5)),  # 1-D first: a leading 1 is added then removed
    ((3, 4), (4,)),  # 1-D second: a trailing 1 is added then removed
    ((4,), (4,)),  # both 1-D: a scalar
    ((4,), (2, 4, 3)),
    ((2, 3, 4), (4,)),
    ((0, 4), (4, 3)),  # M = 0
    ((3, 0), (0, 5)),  # K = 0: zeros
    ((2, 0, 4), (4, 3)),
]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes, rng):
    a = random_array(rng, shapes[0])
    b = random_array(rng, shapes[1])
    check_on_ep(single_node_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 8), (8,)), ((2, 1, 3, 4), (5, 4, 2))], ids=str)
def test_matmul_float16(shapes, rng):
    a = random_array(rng, shapes[0], np.float16)
    b = random_array(rng, shapes[1], np.float16)
    check_on_ep(single_node_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b}, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("opset", [9, 13])
def test_matmul_older_opsets(opset, rng):
    a = random_array(rng, (2, 3))
    b = random_array(rng, (3, 2))
    check_on_ep(single_node_model("MatMul", {"a": a, "b": b}, opset=opset), {"a": a, "b": b})


def test_matmul_with_constant_weight(rng):
    a = random_array(rng, (2, 5, 6))
    w = random_array(rng, (6, 3))
    model = single_node_model("MatMul", {"a": a, "w": w}, initializers={"w": w})
    check_on_ep(model, {"a": a}, rtol=1e-5, atol=1e-5)


def test_matmul_integer_is_refused(rng):
    a = random_array(rng, (2, 3), np.int32)
    b = random_array(rng, (3, 2), np.int32)
    reason = refusal(single_node_model("MatMul", {"a": a, "b": b}), "MatMul")
    assert reason and "int32" in reason and "integer" in reason


def test_matmul_float64_is_refused(rng):
    a = rng.uniform(size=(2, 3))
    b = rng.uniform(size=(3, 2))
    assert "float64" in refusal(single_node_model("MatMul", {"a": a, "b": b}), "MatMul")


GEMM_CASES = [
    # (M, K, N), transA, transB, alpha, beta, C shape (None = no C)
    ((3, 4, 5), 0, 0, 1.0, 1.0, (3, 5)),
    ((3, 4, 5), 1, 0, 1.0, 1.0, (5,)),
    ((3, 4, 5), 0, 1, 0.5, 2.0, (1, 5)),
    ((3, 4, 5), 1, 1, -1.5, 0.25, (3, 1)),
    ((3, 4, 5), 0, 0, 2.0, 1.0, ()),
    ((3, 4, 5), 0, 0, 1.0, 1.0, (1,)),
    ((1, 1, 1), 0, 0, 1.0, 1.0, (1, 1)),
    ((3, 4, 5), 0, 1, 0.75, 1.0, None),
    ((0, 4, 5), 0, 0, 1.0, 1.0, (5,)),  # M = 0
    ((3, 0, 5), 0, 0, 1.0, 1.0, (3, 5)),  # K = 0: Y = C
]


def gemm_inputs(rng, case, dtype=np.float32):
    (m, k, n), ta, tb, alpha, beta, c_shape = case
    a = random_array(rng, (k, m) if ta else (m, k), dtype)
    b = random_array(rng, (n, k) if tb else (k, n), dtype)
    inputs = {"a": a, "b": b}
    if c_shape is not None:
        inputs["c"] = random_array(rng, c_shape, dtype)
    attrs = {"transA": ta, "transB": tb, "alpha": alpha, "beta": beta}
    return inputs, attrs


@pytest.mark.parametrize("case", GEMM_CASES, ids=str)
def test_gemm(case, rng):
    inputs, attrs = gemm_inputs(rng, case)
    check_on_ep(single_node_model("Gemm", inputs, attrs=attrs), inputs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", GEMM_CASES[:4], ids=str)
def test_gemm_float16(case, rng):
    inputs, attrs = gemm_inputs(rng, case, np.float16)
    check_on_ep(single_node_model("Gemm", inputs, attrs=attrs), inputs, rtol=1e-3, atol=2e-3)


def test_gemm_defaults_and_opsets(rng):
    a = random_array(rng, (2, 3))
    b = random_array(rng, (3, 4))
    c = random_array(rng, (4,))
    for opset in (7, 9, 11, 13):  # C is required before opset 11
        check_on_ep(single_node_model("Gemm", {"a": a, "b": b, "c": c}, opset=opset), {"a": a, "b": b, "c": c})
    check_on_ep(single_node_model("Gemm", {"a": a, "b": b}, opset=11), {"a": a, "b": b})


def test_gemm_empty_k_scales_c_by_beta(rng):
    # Spec: Y = alpha * A'B' + beta * C = beta * C when K = 0. ORT 1.30's CPU kernel returns C
    # unscaled in this case, so the reference here is numpy.
    a = np.zeros((3, 0), np.float32)
    b = np.zeros((0, 4), np.float32)
    c = random_array(rng, (3, 4))
    got = run_on_ep(single_node_model("Gemm", {"a": a, "b": b, "c": c}, attrs={"beta": 3.0}),
                    {"a": a, "b": b, "c": c})
    np.testing.assert_allclose(got[0], 3.0 * c, rtol=1e-6)


def test_gemm_beta_zero_ignores_c(rng):
    # ORT CPU never reads C when beta == 0, so a NaN there must not reach Y.
    a = random_array(rng, (2, 3))
    b = random_array(rng, (3, 4))
    c = np.full((2, 4), np.nan, dtype=np.float32)
    got = check_on_ep(single_node_model("Gemm", {"a": a, "b": b, "c": c}, attrs={"beta": 0.0}),
                      {"a": a, "b": b, "c": c})
    assert np.isfinite(got[0]).all()


def test_gemm_constant_weights(rng):
    a = random_array(rng, (4, 6))
    w = random_array(rng, (5, 6))
    bias = random_array(rng, (5,))
    model = single_node_model("Gemm", {"a": a, "w": w, "bias": bias}, attrs={"transB": 1},
                              initializers={"w": w, "bias": bias})
    check_on_ep(model, {"a": a}, rtol=1e-5, atol=1e-5)


def test_gemm_float64_is_refused(rng):
    a = rng.uniform(size=(2, 3))
    b = rng.uniform(size=(3, 4))
    reason = refusal(single_node_model("Gemm", {"a": a, "b": b}), "Gemm")
    assert reason and "float64" in reason


def test_gemm_alpha_zero_keeps_nan_and_inf_of_a_and_b(rng):
    """Regression (issue 8, found by tests/fuzz): with alpha = 0 and a C input the EP used
    addmm, which hands alpha to BLAS, and BLAS then skips A B: a NaN or Inf in A or B vanished.
    ORT CPU (and IEEE: 0 * NaN) gives NaN."""
    a = random_array(rng, (3, 4))
    b = random_array(rng, (4, 5))
    a[1, 2] = np.nan
    b[0, 3] = np.inf
    c = random_array(rng, (3, 5))
    got = check_on_ep(single_node_model("Gemm", {"a": a, "b": b, "c": c},
                                        attrs={"alpha": 0.0, "beta": 2.0}),
                      {"a": a, "b": b, "c": c})
    assert np.isnan(got[0][1]).all() and np.isnan(got[0][:, 3]).all()
