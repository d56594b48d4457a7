// com.microsoft FusedMatMul (alpha * op(A) op(B), op = optional transpose of the last two axes)
// and BiasAdd (X + bias + skip). FusedMatMul takes the MatMul path of matmul.cpp: the OpenBLAS
// primitive on MLX's CPU backend (alpha folded into sgemm), mx::matmul elsewhere.
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/matmul_cpu.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

bool is_f32(ElemType t) {
  return t == ElemType::kFloat;
}
bool f32_f16(ElemType t) {
  return t == ElemType::kFloat || t == ElemType::kFloat16;
}

ClaimResult claim_fused_matmul(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = refuse_unknown_attrs(c, {"alpha", "transA", "transB", "transBatchA", "transBatchB"});
  if (!r.ok) return r;
  const NodeView& n = c.node();
  ORTMLX_REQUIRE(n.attr_int("transBatchA", 0) == 0 && n.attr_int("transBatchB", 0) == 0,
                 "transBatchA/transBatchB are not implemented");
  for (const char* flag : {"transA", "transB"}) {
    const int64_t v = n.attr_int(flag, 0);
    ORTMLX_REQUIRE(v == 0 || v == 1, std::string(flag) + " must be 0 or 1");
  }
  for (size_t i = 0; i < 2; ++i) {
    r = require_input_type(c, i, is_f32, "float32 only");
    if (!r.ok) return r;
    // 1-D operands (numpy.matmul vector promotion combined with transposes) are left to ORT.
    ORTMLX_REQUIRE(c.input_rank(i) >= 2, "inputs need a static rank >= 2");
  }
  return require_same_types(c);
}

void translate_fused_matmul(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array a = ctx.input(n, 0);
  mx::array b = ctx.input(n, 1);
  if (a.ndim() < 2 || b.ndim() < 2) throw std::runtime_error("FusedMatMul inputs need rank >= 2");
  if (n.attr_int("transA", 0) != 0) a = mx::swapaxes(a, -1, -2, s);
  if (n.attr_int("transB", 0) != 0) b = mx::swapaxes(b, -1, -2, s);
  if (a.shape(-1) != b.shape(-2))
    throw std::runtime_error("FusedMatMul inner dimensions differ: " + std::to_string(a.shape(-1)) +
                             " vs " + std::to_string(b.shape(-2)));
  const float alpha = n.attr_float("alpha", 1.0f);
  // BLAS skips the product when alpha == 0 (NaN/Inf would not propagate): multiply explicitly.
  if (alpha != 0.0f && use_blas_matmul(s, a.dtype())) {
    ctx.bind_output(n, 0, blas_matmul(a, b, s, alpha));
    return;
  }
  mx::array y = matmul_any(a, b, s);
  if (alpha != 1.0f) y = mx::multiply(y, mx::array(alpha, y.dtype()), s);
  ctx.bind_output(n, 0, y);
}

// BiasAdd(X[N,S,C], bias[C], skip[N,S,C]) = X + bias + skip.
ClaimResult claim_bias_add(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 3, "expects 3 inputs");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  for (size_t i = 0; i < 3; ++i) {
    r = require_input_type(c, i, f32_f16, "float32/float16 only");
    if (!r.ok) return r;
  }
  ORTMLX_REQUIRE(c.input_rank(0) == 3 && c.input_rank(1) == 1 && c.input_rank(2) == 3,
                 "expects X (N,S,C), bias (C), skip (N,S,C)");
  return require_same_types(c);
}

void translate_bias_add(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array skip = ctx.input(n, 2);
  if (x.shape() != skip.shape()) throw std::runtime_error("BiasAdd: X and skip shapes differ");
  ctx.bind_output(n, 0, mx::add(mx::add(x, ctx.input(n, 1), s), skip, s));
}

}  // namespace

void register_contrib_matmul_ops(OpRegistry& r) {
  r.add("com.microsoft", "FusedMatMul", 1, 1 << 30, claim_fused_matmul, translate_fused_matmul);
  r.add("com.microsoft", "BiasAdd", 1, 1 << 30, claim_bias_add, translate_bias_add);
}

}  // namespace ortmlx
