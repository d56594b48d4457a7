// MatMul family: MatMul (numpy semantics, batched broadcasting) and Gemm (2-D, alpha/beta/trans).
// MLX matmul has float kernels only (no integer path), so integer forms stay on ORT CPU.
// float32 products on MLX's CPU backend go through OpenBLAS (matmul_cpu.h): the mlx-cpu wheel's
// matmul runs on the reference BLAS.
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/matmul_cpu.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

constexpr const char* kFloatOnly = "float16/bfloat16/float32 only; MLX matmul has no integer path";

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
  mx::array y = matmul_any(a, b, s);
  if (alpha != 1.0f) y = mx::multiply(y, mx::array(alpha, y.dtype()), s);
  ctx.bind_output(n, 0, y);
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  r.add("", "MatMul", 1, 1 << 30, claim_matmul, translate_matmul);
  // Gemm 1-6 carry the legacy `broadcast` attribute form; not implemented.
  r.add("", "Gemm", 7, 1 << 30, claim_gemm, translate_gemm);
}

}  // namespace ortmlx
