// Elementwise family: binary arithmetic (numpy broadcasting, as ONNX), unary math, activations.
#include <cmath>
#include <iterator>

#include "ortmlx/ops/common.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

using BinaryFn = mx::array (*)(const mx::array&, const mx::array&, mx::StreamOrDevice);
using UnaryFn = mx::array (*)(const mx::array&, mx::StreamOrDevice);

bool numeric_type(ElemType t) {
  return is_float_type(t) || is_int_type(t);
}

ClaimFn claim_binary(bool allow_int) {
  return [allow_int](const ClaimContext& c) -> ClaimResult {
    ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs");
    for (size_t i = 0; i < 2; ++i) {
      auto r = require_input_type(
          c, i, [&](ElemType t) { return allow_int ? numeric_type(t) : is_float_type(t); },
          allow_int ? "float or integer" : "float16/bfloat16/float32 only");
      if (!r.ok) return r;
    }
    return require_same_types(c);
  };
}

TranslateFn translate_binary(BinaryFn fn) {
  return [fn](TranslationContext& ctx, const NodeDesc& n) {
    ctx.bind_output(n, 0, fn(ctx.input(n, 0), ctx.input(n, 1), ctx.stream()));
  };
}

// Pow: float base; exponent of the base's type or any integer type; output has the base's type.
ClaimResult claim_pow(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs");
  auto r = require_input_type(c, 0, is_float_type, "float base only");
  if (!r.ok) return r;
  r = require_input_type(
      c, 1, [&](ElemType t) { return t == c.input_type(0) || is_int_type(t); },
      "exponent must match the base type or be an integer");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == c.input_type(0),
                 "output type must equal the base type");
  return ClaimResult::yes();
}

void translate_pow(TranslationContext& ctx, const NodeDesc& n) {
  mx::array base = ctx.input(n, 0);
  mx::array exponent = mx::astype(ctx.input(n, 1), base.dtype(), ctx.stream());
  ctx.bind_output(n, 0, mx::power(base, exponent, ctx.stream()));
}

enum class UnaryTypes { kFloat, kSigned, kNumeric };

ClaimFn claim_unary(UnaryTypes types, std::initializer_list<const char*> attrs = {}) {
  std::vector<const char*> known(attrs);
  return [types, known](const ClaimContext& c) -> ClaimResult {
    ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
    for (const auto& [name, v] : c.node().attrs) {
      bool ok = false;
      for (const char* k : known) ok = ok || name == k;
      ORTMLX_REQUIRE(ok, "attribute '" + name + "' is not implemented");
    }
    auto pred = [types](ElemType t) {
      switch (types) {
        case UnaryTypes::kFloat:
          return is_float_type(t);
        case UnaryTypes::kSigned:
          return is_float_type(t) || is_signed_int_type(t);
        case UnaryTypes::kNumeric:
          return is_float_type(t) || is_int_type(t);
      }
      return false;
    };
    auto r = require_input_type(c, 0, pred,
                                types == UnaryTypes::kFloat    ? "float16/bfloat16/float32 only"
                                : types == UnaryTypes::kSigned ? "float or signed integer"
                                                               : "float or integer");
    if (!r.ok) return r;
    return require_same_types(c);
  };
}

TranslateFn translate_unary(UnaryFn fn) {
  return [fn](TranslationContext& ctx, const NodeDesc& n) {
    ctx.bind_output(n, 0, fn(ctx.input(n, 0), ctx.stream()));
  };
}

// erf with float32 accuracy near 0. mx::erf (MLX 0.32) is a fit with about 3e-7 absolute error
// everywhere, so its relative error grows without bound as x -> 0 (measured: 100% below 1e-4,
// 2e-3 at 1e-3, 3e-5 at 0.05; from 0.5 on under 3e-6). Below |x| = 0.5 the Maclaurin series to x^15
// (truncation under 1e-9 relative there) is used instead. Half types are computed in float32.
mx::array erf_accurate(const mx::array& x, mx::StreamOrDevice s) {
  const mx::Dtype dt = x.dtype();
  const mx::array xf = dt == mx::float32 ? x : mx::astype(x, mx::float32, s);
  const mx::array x2 = mx::square(xf, s);
  // erf(x) = 2/sqrt(pi) * x * sum_n (-1)^n x^(2n) / (n! (2n+1)), n = 0..7, in Horner form.
  constexpr float kCoef[] = {-1.f / 75600, 1.f / 9360, -1.f / 1320, 1.f / 216,
                             -1.f / 42,    1.f / 10,   -1.f / 3,    1.f};
  mx::array p = mx::array(kCoef[0]);
  for (size_t i = 1; i < std::size(kCoef); ++i)
    p = mx::add(mx::multiply(p, x2, s), mx::array(kCoef[i]), s);
  const mx::array series = mx::multiply(mx::multiply(xf, p, s), mx::array(1.1283791670955126f), s);
  const mx::array small = mx::less(mx::abs(xf, s), mx::array(0.5f), s);
  const mx::array y = mx::where(small, series, mx::erf(xf, s), s);
  return dt == mx::float32 ? y : mx::astype(y, dt, s);
}

void translate_erf(TranslationContext& ctx, const NodeDesc& n) {
  ctx.bind_output(n, 0, erf_accurate(ctx.input(n, 0), ctx.stream()));
}

void translate_relu(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  ctx.bind_output(n, 0, mx::maximum(x, mx::zeros({}, x.dtype(), ctx.stream()), ctx.stream()));
}

void translate_reciprocal(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  ctx.bind_output(n, 0, mx::reciprocal(x, ctx.stream()));
}

ClaimResult claim_gelu(const ClaimContext& c) {
  auto r = claim_unary(UnaryTypes::kFloat, {"approximate"})(c);
  if (!r.ok) return r;
  const std::string approx = c.node().attr_string("approximate", "none");
  ORTMLX_REQUIRE(approx == "none" || approx == "tanh",
                 "approximate='" + approx + "' is not 'none' or 'tanh'");
  return ClaimResult::yes();
}

void translate_gelu(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  // Compute in float32 for half types, as ORT does, then cast back.
  const mx::Dtype dt = x.dtype();
  mx::array xf = dt == mx::float32 ? x : mx::astype(x, mx::float32, s);
  mx::array inner(0.0f);
  if (n.attr_string("approximate", "none") == "tanh") {
    const float k = std::sqrt(2.0f / static_cast<float>(M_PI));
    mx::array cube = mx::multiply(mx::multiply(xf, xf, s), xf, s);
    mx::array t =
        mx::multiply(mx::array(k), mx::add(xf, mx::multiply(mx::array(0.044715f), cube, s), s), s);
    inner = mx::tanh(t, s);
  } else {
    inner = erf_accurate(mx::multiply(xf, mx::array(static_cast<float>(M_SQRT1_2)), s), s);
  }
  mx::array y =
      mx::multiply(mx::multiply(mx::array(0.5f), xf, s), mx::add(mx::array(1.0f), inner, s), s);
  ctx.bind_output(n, 0, dt == mx::float32 ? y : mx::astype(y, dt, s));
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  r.add("", "Add", 7, 1 << 30, claim_binary(true), translate_binary(mx::add));
  r.add("", "Sub", 7, 1 << 30, claim_binary(true), translate_binary(mx::subtract));
  r.add("", "Mul", 7, 1 << 30, claim_binary(true), translate_binary(mx::multiply));
  // Integer Div truncates in ONNX; MLX's divide promotes to float: keep integers on CPU.
  r.add("", "Div", 7, 1 << 30, claim_binary(false), translate_binary(mx::divide));
  r.add("", "Pow", 7, 1 << 30, claim_pow, translate_pow);

  r.add("", "Neg", 6, 1 << 30, claim_unary(UnaryTypes::kSigned), translate_unary(mx::negative));
  r.add("", "Abs", 6, 1 << 30, claim_unary(UnaryTypes::kNumeric), translate_unary(mx::abs));
  r.add("", "Exp", 6, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_unary(mx::exp));
  r.add("", "Log", 6, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_unary(mx::log));
  r.add("", "Sqrt", 6, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_unary(mx::sqrt));
  r.add("", "Reciprocal", 6, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_reciprocal);
  r.add("", "Relu", 6, 1 << 30, claim_unary(UnaryTypes::kSigned), translate_relu);
  r.add("", "Sigmoid", 6, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_unary(mx::sigmoid));
  r.add("", "Tanh", 6, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_unary(mx::tanh));
  r.add("", "Erf", 9, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_erf);
  r.add("", "Gelu", 20, 1 << 30, claim_gelu, translate_gelu);
}

}  // namespace ortmlx
