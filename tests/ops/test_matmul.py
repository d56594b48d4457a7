import numpy as np
import onnx
import pytest
from onnx import helper

from opcheck import NP_TO_ONNX, check_on_ep, refusal, single_node_model
from ortmlx.testing import (EpRun, assert_ran_on_ep, cublaslt_matmul, make_model, mlx_backend,
                            random_array)
from pattern_check import run_pattern


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


# float32 on MLX's CPU backend runs through the OpenBLAS primitive (src/ortmlx/ops/matmul_cpu.h):
# batch folding (B shared by every batch), per-batch loops with broadcasting on either side,
# transposed and non-BLAS-layout operands (views made by a Transpose node on the EP), and the
# A/B switch back to MLX's matmul.
BLAS_SHAPES = [
    ((1, 128, 96), (96, 80)),  # folds into one sgemm
    ((8, 16, 16), (16, 16)),
    ((2, 3, 5, 4), (4, 6)),  # two batch axes fold
    ((1, 5, 4), (3, 4, 2)),  # A broadcast over the batch
    ((2, 1, 3, 4), (1, 5, 4, 2)),  # both broadcast, middle axes
    ((3, 1, 4), (3, 4, 1)),  # M = N = 1 per batch
    ((4, 5, 0), (4, 0, 3)),  # K = 0 with batches: zeros
    ((64, 33), (33, 17)),
    # Over the per-thread work threshold (4 MFLOP): split across threads by batch, or by blocks
    # of rows (folded, and not folded with one batch).
    ((3, 100, 200), (3, 200, 150)),
    ((1, 300, 256), (256, 200)),
    ((1, 1, 301, 256), (1, 256, 199)),
]


def sum_atol(k):
    """Absolute tolerance for a float32 sum of k products of values in [-2, 2]: the order of the
    additions differs between OpenBLAS and ORT's MLAS, and the rounding error grows with k."""
    return 1e-5 * max(1.0, k / 32)


@pytest.mark.parametrize("shapes", BLAS_SHAPES, ids=str)
def test_matmul_blas_shapes(shapes, rng):
    a = random_array(rng, shapes[0])
    b = random_array(rng, shapes[1])
    check_on_ep(single_node_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b}, rtol=1e-5,
                atol=sum_atol(shapes[0][-1]))


def transpose_matmul_model(a, b, perm_a, perm_b):
    """Transpose(a) @ Transpose(b), both Transposes on the EP: MatMul sees strided views."""
    nodes, ins = [], []
    names = []
    for name, x, perm in (("a", a, perm_a), ("b", b, perm_b)):
        ins.append(helper.make_tensor_value_info(name, NP_TO_ONNX[x.dtype], list(x.shape)))
        if perm is None:
            names.append(name)
        else:
            nodes.append(helper.make_node("Transpose", [name], [name + "t"], perm=list(perm),
                                          name="t" + name))
            names.append(name + "t")
    nodes.append(helper.make_node("MatMul", names, ["y"], name="node"))
    graph = helper.make_graph(nodes, "g", ins, [onnx.ValueInfoProto(name="y")])
    model = onnx.shape_inference.infer_shapes(make_model(graph, opset=21, check=False))
    return model, [n.name for n in nodes]


@pytest.mark.parametrize("case", [
    # (a shape, perm a, b shape, perm b)
    ((4, 6), (1, 0), (4, 5), None),  # A^T: CblasTrans
    ((6, 4), None, (5, 4), (1, 0)),  # B^T
    ((2, 4, 6), (0, 2, 1), (2, 5, 4), (0, 2, 1)),  # both, batched
    ((6, 3, 4), (1, 0, 2), (4, 5), None),  # batch axis moved: row stride 3*4
    ((6, 4, 3), (2, 0, 1), (3, 4, 5), (0, 1, 2)),  # neither axis unit-stride: packed copy
    ((1, 6, 4), (0, 2, 1), (3, 6, 5), None),  # transposed A broadcast over the batch
], ids=str)
def test_matmul_strided_operands(case, rng):
    sa, pa, sb, pb = case
    a = random_array(rng, sa)
    b = random_array(rng, sb)
    model, names = transpose_matmul_model(a, b, pa, pb)
    check_on_ep(model, {"a": a, "b": b}, node_names=names, rtol=1e-5, atol=1e-5)


CUBLASLT_PATH = "MatMul/Gemm on cuBLASLt (a plan and algorithm per shape)"


@pytest.mark.parametrize("case", [
    # (op, a shape, b shape, attributes, C shape or None, takes cuBLASLt on the GPU)
    ("MatMul", (2, 3, 40), (40, 5), {}, None, True),  # the batch folds into the rows
    ("MatMul", (2, 3, 40), (2, 40, 5), {}, None, True),  # strided batch
    ("MatMul", (1, 3, 40), (4, 40, 5), {}, None, True),  # A the same for every batch
    ("MatMul", (2, 1, 3, 40), (1, 4, 40, 5), {}, None, False),  # broadcast both ways: MLX's
    ("MatMul", (1, 40), (40, 5), {}, None, False),  # one row: MLX's matrix-vector kernel
    ("Gemm", (6, 40), (5, 40), {"transB": 1}, (5,), True),  # bias in the epilogue, B^T as is
    ("Gemm", (40, 6), (40, 5), {"transA": 1, "alpha": 0.5}, (1, 5), True),
    ("Gemm", (6, 40), (40, 5), {"alpha": -2.0}, None, True),
    ("Gemm", (6, 40), (40, 5), {"beta": 0.5}, (5,), False),  # beta != 1: MLX's addmm
    ("Gemm", (6, 40), (40, 5), {}, (6, 5), False),  # C not a row: MLX's addmm
], ids=str)
def test_matmul_cublaslt_path(case, rng):
    """Which product ran, per the report: cuBLASLt with a plan per shape on the GPU where it
    applies (alpha and a bias row in its epilogue), MLX's matmul elsewhere; the values match ORT
    CPU either way."""
    op, sa, sb, attrs, sc, applies = case
    inputs = {"a": random_array(rng, sa), "b": random_array(rng, sb)}
    if sc is not None:
        inputs["c"] = random_array(rng, sc)
    report = run_pattern(single_node_model(op, inputs, attrs=attrs), inputs, rtol=1e-5,
                         atol=sum_atol(40))
    assert (CUBLASLT_PATH in report.paths()) == (applies and cublaslt_matmul()), report.paths()


def test_matmul_nan_and_inf_propagate(rng):
    a = random_array(rng, (3, 6, 8))
    b = random_array(rng, (8, 5))
    a[1, 2, 3] = np.nan
    b[4, 1] = np.inf
    got = check_on_ep(single_node_model("MatMul", {"a": a, "b": b}), {"a": a, "b": b}, rtol=1e-5, atol=1e-5)
    assert np.isnan(got[0][1, 2]).all()


def test_matmul_mlx_switch_gives_same_result(rng, monkeypatch):
    """ORTMLX_INTERNAL_CPU_MATMUL=mlx (the bench's A/B switch) uses MLX's matmul instead."""
    a = random_array(rng, (2, 7, 9))
    b = random_array(rng, (9, 3))
    model = single_node_model("MatMul", {"a": a, "b": b})
    blas = run_on_ep(model, {"a": a, "b": b})[0]
    monkeypatch.setenv("ORTMLX_INTERNAL_CPU_MATMUL", "mlx")
    mlx = run_on_ep(model, {"a": a, "b": b})[0]
    np.testing.assert_allclose(blas, mlx, rtol=1e-5, atol=1e-5)


GEMM_BLAS_CASES = [
    ((33, 20, 17), 1, 1, 0.5, -1.25, (17,)),
    ((16, 64, 40), 0, 1, 1.0, 1.0, (16, 40)),
    ((16, 64, 40), 1, 0, 2.0, 0.0, (16, 40)),  # beta = 0: C unused
    ((5, 7, 3), 0, 0, -1.0, 1.0, (5, 1)),
    ((5, 7, 3), 1, 1, 1.0, 3.0, (1, 1)),
    ((8, 12, 4), 0, 0, 1.0, 1.0, None),
    ((0, 4, 5), 1, 1, 1.0, 1.0, (5,)),  # M = 0
    ((3, 4, 0), 0, 0, 1.0, 1.0, (3, 1)),  # N = 0
    ((300, 256, 200), 1, 0, 1.0, 1.0, (200,)),  # row blocks of a transposed A, on threads
    ((301, 256, 199), 0, 1, 0.5, 2.0, (301, 199)),
]


@pytest.mark.parametrize("case", GEMM_BLAS_CASES, ids=str)
def test_gemm_blas(case, rng):
    inputs, attrs = gemm_inputs(rng, case)
    check_on_ep(single_node_model("Gemm", inputs, attrs=attrs), inputs, rtol=1e-5,
                atol=sum_atol(case[0][1]) * max(1.0, abs(case[3])))


def test_gemm_nan_in_c_propagates(rng):
    a = random_array(rng, (4, 6))
    b = random_array(rng, (6, 5))
    c = random_array(rng, (5,))
    c[2] = np.nan
    got = check_on_ep(single_node_model("Gemm", {"a": a, "b": b, "c": c}, attrs={"beta": 0.5}),
                      {"a": a, "b": b, "c": c})
    assert np.isnan(got[0][:, 2]).all() and np.isfinite(np.delete(got[0], 2, axis=1)).all()


@pytest.mark.parametrize("a_shape, b_len", [((0, 2), 2), ((0, 2, 4), 4), ((2, 0, 4), 4)],
                         ids=str)
def test_matmul_empty_left_by_a_vector(a_shape, b_len, rng):
    """A valid empty product: ORT CPU (1.30) raises "left operand cannot broadcast" for it (a
    documented difference, docs/RELIABILITY.md); the EP returns numpy's empty result."""
    a = np.zeros(a_shape, np.float32)
    b = random_array(rng, (b_len,))
    run = EpRun(single_node_model("MatMul", {"a": a, "b": b}), strict=True)
    try:
        (got,) = run.run({"a": a, "b": b})
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
    want = np.matmul(a, b)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)


# ---------------------------------------------------------------- Det

# Det is claimed on MLX's CPU backend only (ops/matmul.cpp says why).
CPU_BACKEND_ONLY = pytest.mark.skipif(mlx_backend() != "cpu",
                                      reason="Det is claimed on the CPU backend only")


@CPU_BACKEND_ONLY
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (4, 4), (7, 7), (2, 3, 3), (2, 2, 5, 5),
                                   (0, 3, 3), (3, 0, 0), (0, 0), (16, 16)], ids=str)
def test_det(shape, rng):
    x = random_array(rng, shape, low=-2, high=2)
    check_on_ep(single_node_model("Det", {"x": x}), {"x": x}, rtol=2e-5, atol=2e-5)


@CPU_BACKEND_ONLY
def test_det_singular_and_pivoting():
    x = np.array([[[0, 1, 2], [3, 4, 5], [6, 7, 8]],      # singular, needs a swap first
                  [[0, 0, 1], [0, 1, 0], [1, 0, 0]],      # a permutation (det -1)
                  [[0, 0, 0], [1, 2, 3], [4, 5, 6]],      # a zero row
                  [[2, 2, 2], [2, 2, 2], [-2, 1, 3]],     # equal pivots: the first wins
                  [[1e-30, 1, 0], [1, 0, 0], [0, 0, 1e30]]], np.float32)
    check_on_ep(single_node_model("Det", {"x": x}), {"x": x}, rtol=1e-5, atol=1e-5)


@CPU_BACKEND_ONLY
def test_det_refusals(rng):
    x = random_array(rng, (70, 70))
    assert "larger than 64x64" in refusal(single_node_model("Det", {"x": x}), "Det")
    m = single_node_model("Det", {"x": random_array(rng, (3, 3))})
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "n"
    del m.graph.value_info[:]
    assert "static size" in refusal(m, "Det")


@pytest.mark.skipif(mlx_backend() == "cpu", reason="GPU backends only")
def test_det_refused_on_gpu_backends(rng):
    model = single_node_model("Det", {"x": random_array(rng, (3, 3))})
    assert "CPU backend only" in (refusal(model, "Det") or "")
