// Elementwise family: binary arithmetic (numpy broadcasting, as ONNX), unary math, activations.
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/elementwise.h"
#include "ortmlx/ops/elementwise/cuda/gelu.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {

namespace ops {

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

// Gelu, computed in float32 for half types (as ORT does), cast back. tanh: the tanh
// approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); otherwise the erf form.
mx::array gelu(const mx::array& x, bool tanh_approx, mx::StreamOrDevice s) {
  const mx::Dtype dt = x.dtype();
  mx::array xf = dt == mx::float32 ? x : mx::astype(x, mx::float32, s);
  GeluForm form;  // (0.5 x) (1 + inner), the kernel's arithmetic and this path's
  form.tanh_form = tanh_approx;
  if (cuda_gelu_supports(xf.size(), s)) {
    const mx::array y = cuda_gelu(xf, form, s);
    return dt == mx::float32 ? y : mx::astype(y, dt, s);
  }
  mx::array inner(0.0f);
  if (tanh_approx) {
    mx::array cube = mx::multiply(mx::multiply(xf, xf, s), xf, s);
    mx::array t = mx::multiply(mx::array(form.k),
                               mx::add(xf, mx::multiply(mx::array(form.alpha), cube, s), s), s);
    inner = mx::tanh(t, s);
  } else {
    inner = erf_accurate(mx::multiply(xf, mx::array(form.c), s), s);
  }
  mx::array y = mx::multiply(mx::multiply(mx::array(form.half), xf, s),
                             mx::add(mx::array(1.0f), inner, s), s);
  return dt == mx::float32 ? y : mx::astype(y, dt, s);
}

}  // namespace ops

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

// Integer Div truncates toward zero, as C (and ORT's CPU kernel) does. A zero divisor is a run-time
// error naming the node with ORT's message; INT_MIN / -1 wraps to INT_MIN (ORT's kernel traps).
// Whether MLX's floor_divide floors or truncates integers, a quotient rounded down with a remainder
// of the other sign than a is moved up by one, so the result is the truncated one.
void translate_div(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array a = ctx.input(n, 0);
  const mx::array b = ctx.input(n, 1);
  if (!mx::issubdtype(a.dtype(), mx::integer)) {
    ctx.bind_output(n, 0, mx::divide(a, b, s));
    return;
  }
  const mx::array zero = mx::zeros({}, b.dtype(), s);
  const mx::array one = mx::ones({}, b.dtype(), s);
  const mx::array is_zero = mx::equal(b, zero, s);
  ctx.require(n, mx::logical_not(is_zero, s), "Integer division by zero");
  if (!mx::issubdtype(a.dtype(), mx::signedinteger)) {
    ctx.bind_output(n, 0, mx::floor_divide(a, mx::where(is_zero, one, b, s), s));
    return;
  }
  const mx::array minus_one = mx::equal(b, mx::array(-1, b.dtype()), s);
  const mx::array divisor = mx::where(mx::logical_or(is_zero, minus_one, s), one, b, s);
  mx::array q = mx::floor_divide(a, divisor, s);
  const mx::array r = mx::subtract(a, mx::multiply(q, divisor, s), s);
  const mx::array rounded_down = mx::logical_and(
      mx::not_equal(r, zero, s), mx::not_equal(mx::less(r, zero, s), mx::less(a, zero, s), s), s);
  q = mx::where(rounded_down, mx::add(q, one, s), q, s);
  ctx.bind_output(n, 0, mx::where(minus_one, mx::negative(a, s), q, s));
}

// Pow: float base; exponent of the base's type, or int32/int64 (the integer exponents ORT's CPU
// EP runs); output has the base's type.
ClaimResult claim_pow(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs");
  auto r = require_input_type(c, 0, is_float_type, "float base only");
  if (!r.ok) return r;
  r = require_input_type(
      c, 1,
      [&](ElemType t) {
        return t == c.input_type(0) || t == ElemType::kInt32 || t == ElemType::kInt64;
      },
      "exponent must match the base type or be int32/int64");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == c.input_type(0),
                 "output type must equal the base type");
  return ClaimResult::yes();
}

// Float base, integer exponent n. Casting n to the base type loses its low bits above 2^24, and
// with them the parity that decides the sign ((-1)^16777217 came out +1). Instead: the sign is
// taken from n's parity (in integers), the magnitude is |b|^hi * |b|^lo with n = hi + lo, lo the
// C remainder of n by 2^24 (exact in float32) and hi a multiple of 2^24 with n's sign (exact in
// float32 below 2^48; beyond, every |b| != 1 gives 0 or inf either way). For |n| < 2^24, hi = 0
// and the magnitude is the single rounding of pow(|b|, n). Same signs for hi and lo mean no
// spurious overflow times underflow. A negative base includes -0 (1/b < 0), as C's pow does.
mx::array pow_int_exponent(const mx::array& base, const mx::array& n_any, mx::StreamOrDevice s) {
  const mx::Dtype dt = base.dtype();
  const mx::array b = dt == mx::float32 ? base : mx::astype(base, mx::float32, s);
  const mx::array n = mx::astype(n_any, mx::int64, s);
  const mx::array zero_i(int64_t{0});
  const mx::array step(int64_t{1} << 24);
  mx::array lo = mx::remainder(n, step, s);  // numpy-style: in [0, 2^24)
  lo = mx::where(mx::logical_and(mx::less(n, zero_i, s), mx::not_equal(lo, zero_i, s), s),
                 mx::subtract(lo, step, s), lo, s);
  const mx::array hi = mx::subtract(n, lo, s);
  const mx::array mag_b = mx::abs(b, s);
  const mx::array mag = mx::multiply(mx::power(mag_b, mx::astype(hi, mx::float32, s), s),
                                     mx::power(mag_b, mx::astype(lo, mx::float32, s), s), s);
  const mx::array zero_f(0.0f);
  const mx::array negative_base =
      mx::logical_or(mx::less(b, zero_f, s), mx::less(mx::reciprocal(b, s), zero_f, s), s);
  const mx::array odd = mx::not_equal(mx::remainder(n, mx::array(int64_t{2}), s), zero_i, s);
  const mx::array y =
      mx::where(mx::logical_and(negative_base, odd, s), mx::negative(mag, s), mag, s);
  return dt == mx::float32 ? y : mx::astype(y, dt, s);
}

void translate_pow(TranslationContext& ctx, const NodeDesc& n) {
  mx::array base = ctx.input(n, 0);
  mx::array exponent = ctx.input(n, 1);
  if (exponent.dtype() == base.dtype()) {
    ctx.bind_output(n, 0, mx::power(base, exponent, ctx.stream()));
  } else {
    ctx.bind_output(n, 0, pow_int_exponent(base, exponent, ctx.stream()));
  }
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
  const mx::array x = ctx.input(n, 0);
  if (cuda_gelu_supports(x.size(), ctx.stream())) ctx.mark_fast(n, kGeluCudaPath);
  ctx.bind_output(n, 0, gelu(x, n.attr_string("approximate", "none") == "tanh", ctx.stream()));
}

// ---- Types for the ops added in issue 9: what is implemented and tested against ORT's CPU EP
// (bfloat16, which ORT's CPU EP has no kernels for, against its float32 result rounded to
// bfloat16). ORT's CPU EP has no int16/uint16 Min/Max kernel.
bool f32_f16(ElemType t) {
  return is_float_type(t);
}
bool f32_f16_or_int(ElemType t) {
  return f32_f16(t) || is_int_type(t);
}
bool min_max_type(ElemType t) {
  return f32_f16(t) || type_in(t, {ElemType::kInt8, ElemType::kInt32, ElemType::kInt64,
                                   ElemType::kUInt8, ElemType::kUInt32, ElemType::kUInt64});
}

bool clip_type(ElemType t) {
  return min_max_type(t);  // the same set: float32, float16, int8/32/64, uint8/32/64
}

// Variadic Min/Max/Sum/Mean: one or more inputs of one type, numpy broadcasting.
ClaimFn claim_variadic(bool (*pred)(ElemType), const char* what) {
  return [pred, what](const ClaimContext& c) -> ClaimResult {
    ORTMLX_REQUIRE(c.num_inputs() >= 1, "expects at least 1 input");
    auto r = refuse_unknown_attrs(c, {});
    if (!r.ok) return r;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      r = require_input_type(c, i, pred, what);
      if (!r.ok) return r;
    }
    return require_same_types(c);
  };
}

// Folds left to right (input 0 op input 1, then op input 2, ...), the order ORT's CPU EP adds in.
// Mean divides the sum by the input count.
// bfloat16 Sum/Mean accumulate in float32 and round once (the float32 reference: ORT's CPU EP
// has no bfloat16 kernel); Min/Max are exact in any type.
TranslateFn translate_variadic(BinaryFn fn, bool mean) {
  return [fn, mean](TranslationContext& ctx, const NodeDesc& n) {
    const auto s = ctx.stream();
    mx::array acc = ctx.input(n, 0);
    const mx::Dtype dt = acc.dtype();
    const bool widen = dt == mx::bfloat16 && fn == static_cast<BinaryFn>(mx::add);
    if (widen) acc = mx::astype(acc, mx::float32, s);
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      const mx::array next = ctx.input(n, i);
      acc = fn(acc, widen ? mx::astype(next, mx::float32, s) : next, s);
    }
    if (mean && n.inputs.size() > 1)
      acc = mx::divide(acc, mx::array(static_cast<float>(n.inputs.size()), acc.dtype()), s);
    ctx.bind_output(n, 0, widen ? mx::astype(acc, dt, s) : acc);
  };
}

// Mod. fmod=0 (integers only, per the spec): the result takes the divisor's sign, which is what
// mx::remainder computes. fmod=1: C fmod, the dividend's sign. Floats: |a| rem |b| (exact, no sign
// fix-up for non-negative operands) with a's sign. Signed integers: the numpy-style remainder
// minus b where its sign differs from a's (exact, cannot overflow).
ClaimResult claim_mod(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs");
  auto r = refuse_unknown_attrs(c, {"fmod"});
  if (!r.ok) return r;
  const int64_t fmod = c.node().attr_int("fmod", 0);
  ORTMLX_REQUIRE(fmod == 0 || fmod == 1, "fmod must be 0 or 1");
  for (size_t i = 0; i < 2; ++i) {
    r = require_input_type(c, i, f32_f16_or_int, "float16/bfloat16/float32 or integer");
    if (!r.ok) return r;
  }
  r = require_same_types(c);
  if (!r.ok) return r;
  ORTMLX_REQUIRE(fmod == 1 || !f32_f16(c.input_type(0)),
                 "fmod=0 is invalid for floating-point inputs");
  return ClaimResult::yes();
}

// An integer divisor the remainder kernel can take: 0 (ORT raises "Integer modulo by zero": a
// runtime check here) and, for signed types, -1 (INT_MIN % -1 traps on x86 although the remainder
// is 0, which is ORT's answer for fmod=1) both become 1, whose remainder is 0 as well.
mx::array safe_integer_divisor(TranslationContext& ctx, const NodeDesc& n, const mx::array& b) {
  const auto s = ctx.stream();
  const mx::array zero = mx::zeros({}, b.dtype(), s);
  const mx::array is_zero = mx::equal(b, zero, s);
  ctx.require(n, mx::logical_not(is_zero, s), "Integer modulo by zero");
  mx::array replace = is_zero;
  if (mx::issubdtype(b.dtype(), mx::signedinteger))
    replace = mx::logical_or(replace, mx::equal(b, mx::array(-1, b.dtype()), s), s);
  return mx::where(replace, mx::ones({}, b.dtype(), s), b, s);
}

void translate_mod(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array a = ctx.input(n, 0);
  const mx::Dtype dt = a.dtype();
  const bool integer = mx::issubdtype(dt, mx::integer);
  const mx::array b = integer ? safe_integer_divisor(ctx, n, ctx.input(n, 1)) : ctx.input(n, 1);
  const bool c_fmod = n.attr_int("fmod", 0) == 1;
  if (!c_fmod || (!mx::issubdtype(dt, mx::signedinteger) && !mx::issubdtype(dt, mx::floating))) {
    ctx.bind_output(n, 0, mx::remainder(a, b, s));
    return;
  }
  const mx::array zero = mx::zeros({}, dt, s);
  if (mx::issubdtype(dt, mx::floating)) {
    const mx::array r = mx::remainder(mx::abs(a, s), mx::abs(b, s), s);
    // a's sign including -0: 1/a < 0 catches -0.
    const mx::array neg =
        mx::logical_or(mx::less(a, zero, s), mx::less(mx::reciprocal(a, s), zero, s), s);
    ctx.bind_output(n, 0, mx::where(neg, mx::negative(r, s), r, s));
    return;
  }
  const mx::array r = mx::remainder(a, b, s);
  const mx::array fix = mx::logical_and(
      mx::not_equal(r, zero, s), mx::not_equal(mx::less(r, zero, s), mx::less(a, zero, s), s), s);
  ctx.bind_output(n, 0, mx::where(fix, mx::subtract(r, b, s), r, s));
}

// Clip (opset 11+): optional scalar min and max inputs of the data's type.
ClaimResult claim_clip(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 1 && c.num_inputs() <= 3, "expects 1 to 3 inputs");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  // int16/uint16: ORT's CPU EP has no Clip kernel for them to match against.
  r = require_input_type(c, 0, clip_type, "float16/bfloat16/float32, int8/32/64 or uint8/32/64");
  if (!r.ok) return r;
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    const TensorInfo* info = c.input(i);
    ORTMLX_REQUIRE(info && info->has_shape &&
                       (info->shape.empty() || (info->shape.size() == 1 && info->shape[0] == 1)),
                   "min/max must have a static scalar shape ([] or [1])");
  }
  return require_same_types(c);
}

// As ORT's CPU kernel: y = x < lo ? lo : x, then y = hi < y ? hi : y. A NaN bound never wins a
// comparison, so it is ignored (mx::maximum/minimum would propagate it), and an absent float
// bound is the type's lowest/highest finite value, so -Inf and Inf clip to it.
void translate_clip(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array y = ctx.input(n, 0);
  const bool is_float = mx::issubdtype(y.dtype(), mx::floating);
  // The type's largest finite value (float32's rounds to inf in bfloat16).
  const double finite_max = y.dtype() == mx::float16    ? 65504.0
                            : y.dtype() == mx::bfloat16 ? 3.3895313892515355e38
                                                        : double(std::numeric_limits<float>::max());
  auto bound = [&](size_t i, double fallback) -> std::optional<mx::array> {
    if (n.inputs.size() > i && !n.inputs[i].empty()) return mx::reshape(ctx.input(n, i), {}, s);
    if (is_float) return mx::array(fallback, y.dtype());
    return std::nullopt;  // integers: every value is within the type's range
  };
  if (const auto lo = bound(1, -finite_max)) y = mx::where(mx::less(y, *lo, s), *lo, y, s);
  if (const auto hi = bound(2, finite_max)) y = mx::where(mx::less(*hi, y, s), *hi, y, s);
  ctx.bind_output(n, 0, y);
}

// Clip opsets 6-10: the bounds are float attributes (absent: the type's lowest and highest finite
// value, as ORT's Clip_6 kernel), float32 only (ORT's kernel is float-only). Same comparisons as
// translate_clip.
ClaimResult claim_clip_attrs(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"min", "max"});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat; }, "float32 only");
  if (!r.ok) return r;
  return require_same_types(c);
}

void translate_clip_attrs(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array y = ctx.input(n, 0);
  const float lo = n.attr_float("min", std::numeric_limits<float>::lowest());
  const float hi = n.attr_float("max", std::numeric_limits<float>::max());
  const mx::array lo_a(lo, y.dtype()), hi_a(hi, y.dtype());
  y = mx::where(mx::less(y, lo_a, s), lo_a, y, s);
  y = mx::where(mx::less(hi_a, y, s), hi_a, y, s);
  ctx.bind_output(n, 0, y);
}

// Unary ops on float32/float16 (and integers where `ints`), no attributes.
ClaimFn claim_unary_new(bool ints) {
  return [ints](const ClaimContext& c) -> ClaimResult {
    ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
    auto r = refuse_unknown_attrs(c, {});
    if (!r.ok) return r;
    r = require_input_type(
        c, 0, ints ? f32_f16_or_int : f32_f16,
        ints ? "float16/bfloat16/float32 or integer" : "float16/bfloat16/float32 only");
    if (!r.ok) return r;
    return require_same_types(c);
  };
}

// Transcendental unary ops: half types are computed in float32 and rounded once, as ORT does.
TranslateFn translate_unary_f32(UnaryFn fn) {
  return [fn](TranslationContext& ctx, const NodeDesc& n) {
    const auto s = ctx.stream();
    const mx::array x = ctx.input(n, 0);
    if (x.dtype() == mx::float32) {
      ctx.bind_output(n, 0, fn(x, s));
    } else {
      ctx.bind_output(n, 0, mx::astype(fn(mx::astype(x, mx::float32, s), s), x.dtype(), s));
    }
  };
}

// Round: half to even (mx::round with 0 decimals rounds that way).
mx::array round0(const mx::array& x, mx::StreamOrDevice s) {
  return mx::round(x, 0, s);
}

// Sign: -1/0/1 as (x > 0) - (x < 0); NaN stays NaN in float32 (as on ORT's CPU EP).
mx::array sign_onnx(const mx::array& x, mx::StreamOrDevice s) {
  if (mx::issubdtype(x.dtype(), mx::unsignedinteger))
    return mx::astype(mx::not_equal(x, mx::zeros({}, x.dtype(), s), s), x.dtype(), s);
  const mx::array zero = mx::zeros({}, x.dtype(), s);
  const mx::array y = mx::subtract(mx::astype(mx::greater(x, zero, s), x.dtype(), s),
                                   mx::astype(mx::less(x, zero, s), x.dtype(), s), s);
  // ORT's float16 kernel (opsets 9-13 alike, measured with ORT 1.30) gives 0 for NaN; float32
  // keeps it.
  if (x.dtype() == mx::float16) return y;
  return mx::issubdtype(x.dtype(), mx::floating) ? mx::where(mx::isnan(x, s), x, y, s) : y;
}

// Dropout in inference: training_mode absent or a constant false; output = input, mask all true.
// `ratio` does not matter then (and `seed` only seeds training).
ClaimResult claim_dropout(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 1 && c.num_inputs() <= 3, "expects 1 to 3 inputs");
  auto r = refuse_unknown_attrs(c, {"seed"});
  if (!r.ok) return r;
  r = require_input_type(c, 0, f32_f16, "float16/bfloat16/float32 only");
  if (!r.ok) return r;
  if (c.has_input(2)) {
    const ConstTensor* t = c.constant_input(2);
    ORTMLX_REQUIRE(t && t->dtype == ElemType::kBool && t->numel() == 1 && t->bytes.size() == 1,
                   "training_mode must be absent or a constant bool (training is not implemented)");
    ORTMLX_REQUIRE(t->bytes[0] == 0, "training_mode=true is not implemented");
  }
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == c.input_type(0), "output type differs");
  if (c.num_outputs() > 1 && !c.node().outputs[1].empty()) {
    const ElemType mask = c.output_type(1);
    ORTMLX_REQUIRE(mask == ElemType::kUndefined || mask == ElemType::kBool, "mask must be bool");
  }
  return ClaimResult::yes();
}

// Dropout opsets 7-11: `ratio` an attribute, inference only (ORT runs them as an identity). The
// mask output is of the data's type in 7-9 and bool in 10-11; ORT's kernel fills it with zeros
// (false), unlike opset 12+ (all true).
ClaimResult claim_dropout_old(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
  auto r = refuse_unknown_attrs(c, {"ratio"});
  if (!r.ok) return r;
  r = require_input_type(c, 0, f32_f16, "float32/float16 only");
  if (!r.ok) return r;
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == c.input_type(0), "output type differs");
  if (c.num_outputs() > 1 && !c.node().outputs[1].empty()) {
    const ElemType mask = c.output_type(1);
    const ElemType want = c.node().since_version >= 10 ? ElemType::kBool : c.input_type(0);
    ORTMLX_REQUIRE(mask == ElemType::kUndefined || mask == want,
                   "mask must be bool (opset 10+) or of the data's type");
  }
  return ClaimResult::yes();
}

void translate_dropout_old(TranslationContext& ctx, const NodeDesc& n) {
  const mx::array x = ctx.input(n, 0);
  ctx.bind_output(n, 0, x);
  if (n.outputs.size() > 1 && !n.outputs[1].empty())
    ctx.bind_output(
        n, 1, mx::zeros(x.shape(), n.since_version >= 10 ? mx::bool_ : x.dtype(), ctx.stream()));
}

void translate_dropout(TranslationContext& ctx, const NodeDesc& n) {
  const mx::array x = ctx.input(n, 0);
  ctx.bind_output(n, 0, x);
  if (n.outputs.size() > 1 && !n.outputs[1].empty())
    ctx.bind_output(n, 1, mx::full(x.shape(), mx::array(true), ctx.stream()));
}

// Versions before the ones above that ORT 1.30's CPU EP still runs. Where the old version
// differs only in the types or broadcasting it admits (Max/Min/Sum/Mean 6 and 8 had no integers,
// 6 no broadcasting; Floor/Ceil 6, Sign 9, Mod 10, Clip 11-12 had no bfloat16) the same claim
// and translator serve, since a model cannot carry what its version does not define; each is
// its own entry, as ORT's versioned kernels.
void register_old_elementwise_opsets(OpRegistry& r) {
  const char* min_max_types = "float32, float16, int8, int32, int64, uint8, uint32, uint64";
  r.add("", "Max", 6, 12, claim_variadic(min_max_type, min_max_types),
        translate_variadic(mx::maximum, false));
  r.add("", "Min", 6, 12, claim_variadic(min_max_type, min_max_types),
        translate_variadic(mx::minimum, false));
  r.add("", "Sum", 6, 12, claim_variadic(f32_f16, "float32/float16 only"),
        translate_variadic(mx::add, false));
  r.add("", "Mean", 6, 12, claim_variadic(f32_f16, "float32/float16 only"),
        translate_variadic(mx::add, true));
  r.add("", "Mod", 10, 12, claim_mod, translate_mod);
  r.add("", "Clip", 6, 10, claim_clip_attrs, translate_clip_attrs);
  r.add("", "Clip", 11, 12, claim_clip, translate_clip);
  r.add("", "Floor", 6, 12, claim_unary_new(false), translate_unary(mx::floor));
  r.add("", "Ceil", 6, 12, claim_unary_new(false), translate_unary(mx::ceil));
  r.add("", "Sign", 9, 12, claim_unary_new(true), translate_unary(sign_onnx));
  r.add("", "Dropout", 7, 11, claim_dropout_old, translate_dropout_old);
  r.add("", "Dropout", 12, 12, claim_dropout, translate_dropout);
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  r.add("", "Add", 7, 1 << 30, claim_binary(true), translate_binary(mx::add));
  r.add("", "Sub", 7, 1 << 30, claim_binary(true), translate_binary(mx::subtract));
  r.add("", "Mul", 7, 1 << 30, claim_binary(true), translate_binary(mx::multiply));
  r.add("", "Div", 7, 1 << 30, claim_binary(true), translate_div);
  r.add("", "Pow", 7, 1 << 30, claim_pow, translate_pow);

  r.add("", "Neg", 6, 1 << 30, claim_unary(UnaryTypes::kSigned), translate_unary(mx::negative));
  r.add("", "Abs", 6, 1 << 30, claim_unary(UnaryTypes::kNumeric), translate_unary(mx::abs));
  r.add("", "Exp", 6, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_unary(exp_full_range));
  r.add("", "Log", 6, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_unary(mx::log));
  r.add("", "Sqrt", 6, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_unary(mx::sqrt));
  r.add("", "Reciprocal", 6, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_reciprocal);
  r.add("", "Relu", 6, 1 << 30, claim_unary(UnaryTypes::kSigned), translate_relu);
  r.add("", "Sigmoid", 6, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_unary(mx::sigmoid));
  r.add("", "Tanh", 6, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_unary(mx::tanh));
  r.add("", "Erf", 9, 1 << 30, claim_unary(UnaryTypes::kFloat), translate_erf);
  r.add("", "Gelu", 20, 1 << 30, claim_gelu, translate_gelu);
  // Issue 9 coverage; opsets from 13 (the first version for later ops).
  r.add("", "Max", 13, 1 << 30,
        claim_variadic(min_max_type,
                       "float16/bfloat16/float32, int8, int32, int64, uint8, uint32, uint64"),
        translate_variadic(mx::maximum, false));
  r.add("", "Min", 13, 1 << 30,
        claim_variadic(min_max_type,
                       "float16/bfloat16/float32, int8, int32, int64, uint8, uint32, uint64"),
        translate_variadic(mx::minimum, false));
  r.add("", "Sum", 13, 1 << 30, claim_variadic(f32_f16, "float16/bfloat16/float32 only"),
        translate_variadic(mx::add, false));
  r.add("", "Mean", 13, 1 << 30, claim_variadic(f32_f16, "float16/bfloat16/float32 only"),
        translate_variadic(mx::add, true));
  r.add("", "Mod", 13, 1 << 30, claim_mod, translate_mod);
  r.add("", "Clip", 13, 1 << 30, claim_clip, translate_clip);
  r.add("", "Floor", 13, 1 << 30, claim_unary_new(false), translate_unary(mx::floor));
  r.add("", "Ceil", 13, 1 << 30, claim_unary_new(false), translate_unary(mx::ceil));
  r.add("", "Round", 11, 1 << 30, claim_unary_new(false), translate_unary(round0));
  r.add("", "Sign", 13, 1 << 30, claim_unary_new(true), translate_unary(sign_onnx));
  // Version in effect at opset 13 (7 or 9); version 22 only adds bfloat16.
  struct Trig {
    const char* name;
    UnaryFn fn;
    int since;
  };
  const Trig trig[] = {
      {"Sin", mx::sin, 7},       {"Cos", mx::cos, 7},      {"Tan", mx::tan, 7},
      {"Asin", mx::arcsin, 7},   {"Acos", mx::arccos, 7},  {"Atan", mx::arctan, 7},
      {"Sinh", mx::sinh, 9},     {"Cosh", mx::cosh, 9},    {"Asinh", mx::arcsinh, 9},
      {"Acosh", mx::arccosh, 9}, {"Atanh", mx::arctanh, 9}};
  for (const Trig& t : trig)
    r.add("", t.name, t.since, 1 << 30, claim_unary_new(false), translate_unary_f32(t.fn));
  r.add("", "Dropout", 13, 1 << 30, claim_dropout, translate_dropout);
  register_old_elementwise_opsets(r);
}

}  // namespace ortmlx
