// MatMul family: MatMul (numpy semantics, batched broadcasting), Gemm (2-D, alpha/beta/trans) and
// Det (batched determinants by LU with partial pivoting).
// MLX matmul has float kernels only (no integer path), so integer forms stay on ORT CPU.
// float32 products on MLX's CPU backend go through OpenBLAS (matmul_cpu.h): the mlx-cpu wheel's
// matmul runs on the reference BLAS.
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/cuda_support.h"
#include "ortmlx/ops/matmul/cuda/cublaslt_matmul.h"
#include "ortmlx/ops/matmul_cpu.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

constexpr const char* kFloatOnly = "float16/bfloat16/float32 only; MLX matmul has no integer path";
constexpr const char* kCublasLtPath = "MatMul/Gemm on cuBLASLt (a plan and algorithm per shape)";

ClaimResult claim_matmul(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  for (size_t i = 0; i < 2; ++i) {
    r = require_input_type(c, i, is_float_type, kFloatOnly);
    if (!r.ok) return r;
    ORTMLX_REQUIRE(c.input_rank(i) != 0, "scalar (rank 0) inputs are invalid for MatMul");
  }
  return require_same_types(c);
}

// ONNX MatMul = numpy.matmul: a 1-D first operand gets a leading 1, a 1-D second operand a
// trailing 1; both are removed from the result. Batch dimensions broadcast.
void translate_matmul(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array a = ctx.input(n, 0);
  mx::array b = ctx.input(n, 1);
  if (a.ndim() == 0 || b.ndim() == 0) throw std::runtime_error("MatMul inputs must have rank >= 1");
  const bool a_vec = a.ndim() == 1;
  const bool b_vec = b.ndim() == 1;
  if (a_vec) a = mx::reshape(a, {1, a.shape(0)}, s);
  if (b_vec) b = mx::reshape(b, {b.shape(0), 1}, s);
  if (a.shape(-1) != b.shape(-2))
    throw std::runtime_error("MatMul inner dimensions differ: " + std::to_string(a.shape(-1)) +
                             " vs " + std::to_string(b.shape(-2)));
  if (cublaslt_matmul_applies(a, b, std::nullopt, s)) ctx.mark_fast(n, kCublasLtPath);
  mx::array y = matmul_any(a, b, s);
  if (a_vec && b_vec) {
    mx::Shape out(y.shape().begin(), y.shape().end() - 2);
    y = mx::reshape(y, out, s);
  } else if (a_vec) {
    y = mx::squeeze(y, -2, s);
  } else if (b_vec) {
    y = mx::squeeze(y, -1, s);
  }
  ctx.bind_output(n, 0, y);
}

ClaimResult claim_gemm(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 || c.num_inputs() == 3, "expects 2 or 3 inputs");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = refuse_unknown_attrs(c, {"alpha", "beta", "transA", "transB"});
  if (!r.ok) return r;
  for (const char* flag : {"transA", "transB"}) {
    const int64_t v = c.node().attr_int(flag, 0);
    ORTMLX_REQUIRE(v == 0 || v == 1, std::string(flag) + " must be 0 or 1");
  }
  for (size_t i = 0; i < 2; ++i) {
    r = require_input_type(c, i, is_float_type, kFloatOnly);
    if (!r.ok) return r;
    const int64_t rank = c.input_rank(i);
    ORTMLX_REQUIRE(rank == -1 || rank == 2, "Gemm A and B must be 2-D");
  }
  if (c.has_input(2)) {
    r = require_input_type(c, 2, is_float_type, kFloatOnly);
    if (!r.ok) return r;
    ORTMLX_REQUIRE(c.input_rank(2) <= 2, "Gemm C must have rank <= 2");
  }
  return require_same_types(c);
}

// Y = alpha * A' @ B' + beta * C, with C unidirectionally broadcast to (M, N). ORT CPU ignores C
// when beta == 0 (it never reads it), so we do the same: NaNs in C do not leak through.
void translate_gemm(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array a = ctx.input(n, 0);
  mx::array b = ctx.input(n, 1);
  if (a.ndim() != 2 || b.ndim() != 2) throw std::runtime_error("Gemm A and B must be 2-D");
  if (n.attr_int("transA", 0) != 0) a = mx::transpose(a, s);
  if (n.attr_int("transB", 0) != 0) b = mx::transpose(b, s);
  if (a.shape(1) != b.shape(0))
    throw std::runtime_error("Gemm inner dimensions differ: " + std::to_string(a.shape(1)) +
                             " vs " + std::to_string(b.shape(0)));
  const float alpha = n.attr_float("alpha", 1.0f);
  const float beta = n.attr_float("beta", 1.0f);
  const bool has_c = n.inputs.size() > 2 && !n.inputs[2].empty();
  if (has_c && beta != 0.0f) {
    mx::array c = ctx.input(n, 2);
    const int m = a.shape(0), nn = b.shape(1);
    // Unidirectional: C's dims (right-aligned) must be 1 or equal to (M, N).
    bool ok = c.ndim() <= 2;
    for (int i = 0; ok && i < static_cast<int>(c.ndim()); ++i) {
      const int want = (static_cast<int>(c.ndim()) - i == 1) ? nn : m;
      ok = c.shape(i) == 1 || c.shape(i) == want;
    }
    if (!ok) throw std::runtime_error("Gemm C is not broadcastable to (M, N)");
    // A row of N added to every row (a layer's bias): in cuBLASLt's epilogue on the GPU.
    if (alpha != 0.0f && beta == 1.0f && c.ndim() >= 1 && c.shape(-1) == nn &&
        c.size() == static_cast<size_t>(nn)) {
      const mx::array bias = mx::reshape(c, {nn}, s);
      if (cublaslt_matmul_applies(a, b, bias, s)) {
        ctx.bind_output(n, 0, cublaslt_matmul(a, b, s, alpha, bias));
        ctx.mark_fast(n, kCublasLtPath);
        return;
      }
    }
    // Opt-in (ONNXRUNTIME_EP_MLX_GEMM_ADD=1): a layer's product and bias on a GPU backend as a
    // product and an Add, which fuse with elementwise ops after them and which the LayerNorm and
    // GELU kernels fold in (ops/lazy_graph.h: bias_add), where mx::addmm copies the broadcast C
    // into its output before the GEMM and hides the bias. Each element is round(AB + c) either
    // way: alpha = beta = 1 adds C to the float32 accumulator once (float32 only: a half
    // product would be rounded before the Add). Not on by default: in a same-process A/B on an
    // H100 (bench/results/gpu_peer.md) it showed no gain on the corpus models with Gemm.
    if (alpha == 1.0f && beta == 1.0f && a.dtype() == mx::float32 && gpu_backend() &&
        !use_blas_matmul(s, a.dtype()) && kernel_opted_in("ONNXRUNTIME_EP_MLX_GEMM_ADD")) {
      ctx.bind_output(n, 0, mx::add(matmul_any(a, b, s), c, s));
      return;
    }
    c = mx::broadcast_to(c, {m, nn}, s);
    if (alpha != 0.0f) {
      if (use_blas_matmul(s, a.dtype()) && c.dtype() == a.dtype() && b.dtype() == a.dtype())
        ctx.bind_output(n, 0, blas_matmul(a, b, s, alpha, c, beta));
      else
        ctx.bind_output(n, 0, mx::addmm(c, a, b, alpha, beta, s));
      return;
    }
    // alpha == 0: addmm (and sgemm) hand alpha to BLAS, which then skips A B altogether, so NaN
    // or Inf in A or B would vanish; ORT (and IEEE: 0 * NaN) keeps them. Multiply explicitly.
    mx::array y = mx::multiply(matmul_any(a, b, s), mx::array(0.0f, a.dtype()), s);
    ctx.bind_output(n, 0, mx::add(y, mx::multiply(c, mx::array(beta, c.dtype()), s), s));
    return;
  }
  if (alpha != 0.0f && use_blas_matmul(s, a.dtype()) && b.dtype() == a.dtype()) {
    ctx.bind_output(n, 0, blas_matmul(a, b, s, alpha));
    return;
  }
  if (alpha != 0.0f && cublaslt_matmul_applies(a, b, std::nullopt, s)) {
    ctx.bind_output(n, 0, cublaslt_matmul(a, b, s, alpha));
    ctx.mark_fast(n, kCublasLtPath);
    return;
  }
  mx::array y = matmul_any(a, b, s);
  if (alpha != 1.0f) y = mx::multiply(y, mx::array(alpha, y.dtype()), s);
  ctx.bind_output(n, 0, y);
}

// ---------------------------------------------------------------- Det

// Unrolled per column into lazy ops, so the matrix size must be known and small.
constexpr int64_t kMaxDetDim = 64;

ClaimResult claim_det(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  // On MLX's CUDA backend (H200) the unrolled LU took tens of seconds a test at 2x2-7x7 and did
  // not finish in minutes at 16x16: each column compiled fused kernels of its own (NVRTC), its
  // index being a literal. It is a graph value now (translate_det; on MLX CPU 150 JIT kernels
  // became 20 at 16x16), but the first run still compiles a few kernels of Det's own: GPU
  // backends leave Det to ORT until that is measured there.
  ORTMLX_REQUIRE(!gpu_backend(),
                 "Det runs on MLX's CPU backend only (the unrolled LU is impractically slow on "
                 "GPU backends)");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat; }, "float32 only (ORT's kernel)");
  if (!r.ok) return r;
  r = require_same_types(c);
  if (!r.ok) return r;
  const TensorInfo* x = c.input(0);
  ORTMLX_REQUIRE(x && x->has_shape && x->shape.size() >= 2, "input rank must be known and >= 2");
  const int64_t rows = x->shape[x->shape.size() - 2], cols = x->shape.back();
  ORTMLX_REQUIRE(rows >= 0 && rows == cols, "matrices must be square with a static size");
  ORTMLX_REQUIRE(rows <= kMaxDetDim, "matrices larger than " + std::to_string(kMaxDetDim) + "x" +
                                         std::to_string(kMaxDetDim) +
                                         " are not implemented (the LU is unrolled per column)");
  return ClaimResult::yes();
}

// Determinant as ORT's kernel computes it (Eigen's LU with partial pivoting): per column k, the
// row of largest magnitude at or below k (the first on ties) is swapped up, the rows below are
// reduced by multiples (column / pivot) of row k unless the pivot is zero; the determinant is
// the product of the pivots, negated per swap. A 0x0 matrix has determinant 1.
void translate_det(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  if (x.ndim() < 2 || x.shape(-1) != x.shape(-2))
    throw std::runtime_error("Det expects square matrices in the last two dims");
  const int d = x.shape(-1);
  mx::Shape batch(x.shape().begin(), x.shape().end() - 2);
  int64_t b = 1;
  for (int v : batch) b = checked_mul(b, v, "Det batch size");
  if (b == 0 || d == 0) {
    ctx.bind_output(n, 0, mx::ones(batch, mx::float32, s));
    return;
  }
  const int bi = checked_int(b, "Det batch size");
  mx::array a = mx::reshape(x, {bi, d, d}, s);
  const mx::array rows = mx::reshape(mx::arange(0, d, mx::int32, s), {1, d}, s);
  const mx::array row_idx = mx::reshape(rows, {1, d, 1}, s);
  const mx::array col_idx = mx::reshape(rows, {1, 1, d}, s);
  const mx::array zero(0.0f), minus_one(-1.0f), none(d, mx::int32);
  // The column index as a graph value, not a literal: MLX inlines literal scalars into the
  // kernels it fuses, so a literal k would give every column kernels of its own to compile
  // (150 JIT kernels, 47 s on a cold cache at 16x16 on MLX CPU); as a value, the columns share
  // them.
  const mx::array col_index = mx::arange(0, d, mx::int32, s);
  mx::array det = mx::ones({bi}, mx::float32, s);
  for (int k = 0; k < d; ++k) {
    const mx::array kv = mx::reshape(mx::slice(col_index, {k}, {k + 1}, s), {}, s);
    // Pivot row p >= k: the first of largest magnitude in column k.
    const mx::array col = mx::abs(mx::take(a, mx::array(k), 2, s), s);  // [b, d]
    const mx::array below = mx::greater_equal(rows, kv, s);
    const mx::array mag = mx::where(below, col, minus_one, s);
    const mx::array big = mx::max(mag, {1}, /*keepdims=*/true, s);
    const mx::array cand =
        mx::where(mx::logical_and(below, mx::equal(mag, big, s), s), rows, none, s);
    // A column of NaNs has no largest element: Eigen keeps row k then.
    mx::array p = mx::min(cand, {1}, /*keepdims=*/true, s);  // [b, 1]
    p = mx::where(mx::equal(p, none, s), kv, p, s);
    const mx::array nonzero = mx::not_equal(mx::squeeze(big, {1}, s), zero, s);
    p = mx::where(mx::expand_dims(nonzero, 1, s), p, kv, s);
    // Swap rows k and p (a per-matrix row permutation).
    const mx::array perm = mx::where(mx::equal(rows, kv, s), p,
                                     mx::where(mx::equal(rows, p, s), kv, rows, s), s);  // [b, d]
    a = mx::take_along_axis(a, mx::broadcast_to(mx::expand_dims(perm, 2, s), {bi, d, d}, s), 1, s);
    const mx::array swapped = mx::not_equal(mx::squeeze(p, {1}, s), kv, s);
    det = mx::where(swapped, mx::negative(det, s), det, s);
    const mx::array pivot_row = mx::take(a, mx::array(k), 1, s);      // [b, d]
    const mx::array pivot = mx::take(pivot_row, mx::array(k), 1, s);  // [b]
    det = mx::multiply(det, pivot, s);
    if (k + 1 == d) break;
    // Rows below k: a[i, j] -= l[i] * a[k, j] for j > k, l = a[i, k] / pivot (the column stays
    // as it is, all zeros, on a zero pivot; the update still runs, as in Eigen).
    const mx::array raw = mx::take(a, mx::array(k), 2, s);  // [b, d]
    const mx::array piv2 = mx::reshape(pivot, {bi, 1}, s);
    const mx::array lcol =
        mx::where(mx::not_equal(piv2, zero, s), mx::divide(raw, piv2, s), raw, s);
    const mx::array upd = mx::subtract(
        a, mx::multiply(mx::expand_dims(lcol, 2, s), mx::expand_dims(pivot_row, 1, s), s), s);
    const mx::array trailing =
        mx::logical_and(mx::greater(row_idx, kv, s), mx::greater(col_idx, kv, s), s);
    a = mx::where(trailing, upd, a, s);
  }
  ctx.bind_output(n, 0, mx::reshape(det, batch, s));
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  r.add("", "MatMul", 1, 1 << 30, claim_matmul, translate_matmul);
  // Gemm 1-6 carry the legacy `broadcast` attribute form; not implemented.
  r.add("", "Gemm", 7, 1 << 30, claim_gemm, translate_gemm);
  r.add("", "Det", 11, 1 << 30, claim_det, translate_det);
}

}  // namespace ortmlx
