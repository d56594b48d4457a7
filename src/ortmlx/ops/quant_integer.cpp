// Integer-arithmetic quantized ops (default domain): DynamicQuantizeLinear, MatMulInteger,
// QLinearMatMul, ConvInteger, QLinearConv; uint8/int8 operands as ORT's CPU EP takes them.
//
// MLX has no integer matmul or convolution. float32 computes an integer dot product exactly
// while every partial sum stays below 2^24 in magnitude, in any summation order (blocked, with
// FMA, or with TF32 inputs, which hold 8-bit values exactly): zero-point-shifted 8-bit operands
// lie in [-255, 255], so up to kExactTerms = 258 products (258 * 255^2 < 2^24) are exact. Longer
// reductions are split into chunks of at most that many terms, each chunk's exact float32 result
// converted to int32 and the chunks summed in int32, as ORT's int32 accumulators do (wrapping
// alike).
//
// Requantization follows ORT's output stage (MLAS): the int32 sum (plus an int32 bias) as
// float32, times the float32 multiplier a_scale * b_scale[j] / y_scale, rounded half to even,
// plus the output zero point, saturated to the output type.
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/conv.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

constexpr int kExactTerms = 258;

bool q8(ElemType t) {
  return t == ElemType::kInt8 || t == ElemType::kUInt8;
}
bool is_f32(ElemType t) {
  return t == ElemType::kFloat;
}

// ---------------------------------------------------------------- claim helpers

// Input i, when given, is a per-tensor parameter: a scalar or one element (where the shape is
// known; a live shape is checked when translated).
ClaimResult require_per_tensor(const ClaimContext& c, size_t i, const char* what) {
  if (!c.has_input(i)) return ClaimResult::yes();
  const TensorInfo* t = c.input(i);
  if (!t || !t->has_shape) return ClaimResult::yes();
  ORTMLX_REQUIRE(t->shape.empty() || (t->shape.size() == 1 && t->shape[0] <= 1),
                 std::string(what) + " must be a scalar or hold one element");
  return ClaimResult::yes();
}

// A parameter of the B operand (zero point or scale): per tensor, or per column as ORT allows it
// (1-D of B's column count for a 2-D B; else B's rank with a 1 in place of K).
ClaimResult require_b_param(const ClaimContext& c, size_t i, size_t b_input, const char* what) {
  if (!c.has_input(i)) return ClaimResult::yes();
  const TensorInfo* t = c.input(i);
  const TensorInfo* b = c.input(b_input);
  if (!t || !t->has_shape || !b || !b->has_shape) return ClaimResult::yes();
  const size_t r = t->shape.size(), br = b->shape.size();
  if (r == 0 || (r == 1 && t->shape[0] == 1)) return ClaimResult::yes();
  if (r == 1) {
    ORTMLX_REQUIRE(br == 2 && (t->shape[0] < 0 || b->shape[1] < 0 || t->shape[0] == b->shape[1]),
                   std::string(what) + " must be per tensor or hold one value per column of B");
    return ClaimResult::yes();
  }
  ORTMLX_REQUIRE(r == br && t->shape[r - 2] == 1,
                 std::string(what) + " must be per tensor or per column of B");
  return ClaimResult::yes();
}

// ---------------------------------------------------------------- translate helpers

// A per-tensor parameter as a 0-d array; ORT raises on any other element count.
mx::array per_tensor(const mx::array& p, const char* what, mx::StreamOrDevice s) {
  if (p.size() != 1)
    throw std::runtime_error(std::string(what) + " must be a scalar or hold one element, got " +
                             std::to_string(p.size()));
  return mx::reshape(p, {}, s);
}

// A B parameter shaped to broadcast against B (per column) or as a 0-d array.
mx::array b_param(const mx::array& p, const mx::array& b, const char* what, mx::StreamOrDevice s) {
  if (p.size() == 1 && p.ndim() <= 1) return mx::reshape(p, {}, s);
  bool ok = false;
  if (p.ndim() == 1) {
    ok = b.ndim() == 2 && p.shape(0) == b.shape(1);
  } else if (p.ndim() == b.ndim() && p.shape(-2) == 1) {
    ok = true;
    for (int i = 0; i < static_cast<int>(p.ndim()); ++i)
      if (i != static_cast<int>(p.ndim()) - 2 && p.shape(i) != b.shape(i)) ok = false;
  }
  if (!ok)
    throw std::runtime_error(std::string(what) +
                             " must be a scalar, one element, or one value per column of B");
  return p;
}

// int32(x) - int32(zero point), as float32 (exact: |value| <= 255).
mx::array shifted(const mx::array& x, const std::optional<mx::array>& zp, mx::StreamOrDevice s) {
  mx::array xi = mx::astype(x, mx::int32, s);
  if (zp) xi = mx::subtract(xi, mx::astype(*zp, mx::int32, s), s);
  return mx::astype(xi, mx::float32, s);
}

std::optional<mx::array> optional_input(const TranslationContext& ctx, const NodeDesc& n,
                                        size_t i) {
  if (n.inputs.size() > i && !n.inputs[i].empty()) return ctx.input(n, i);
  return std::nullopt;
}

// The exact int32 product of shifted operands (see the top): K split into exact chunks.
mx::array exact_matmul(const mx::array& a, const mx::array& b, mx::StreamOrDevice s) {
  const int k = a.shape(-1);
  if (b.ndim() < 2 || b.shape(-2) != k)
    throw std::runtime_error("A's columns (" + std::to_string(k) + ") differ from B's rows");
  if (k <= kExactTerms) return mx::astype(mx::matmul(a, b, s), mx::int32, s);
  std::optional<mx::array> acc;
  for (int k0 = 0; k0 < k; k0 += kExactTerms) {
    const int k1 = std::min(k, k0 + kExactTerms);
    mx::Shape as(a.ndim(), 0), ae = a.shape(), bs(b.ndim(), 0), be = b.shape();
    as.back() = k0;
    ae.back() = k1;
    bs[b.ndim() - 2] = k0;
    be[b.ndim() - 2] = k1;
    mx::array part =
        mx::astype(mx::matmul(mx::slice(a, as, ae, s), mx::slice(b, bs, be, s), s), mx::int32, s);
    acc = acc ? mx::add(*acc, part, s) : part;
  }
  return *acc;
}

// round_half_even(acc * multiplier) + zero point, saturated to `out`. A NaN (a zero y_scale
// makes the multiplier infinite and 0 * inf NaN) saturates to the type's lowest value, as ORT
// CPU's requantization gives it (its float-to-int conversion turns NaN into INT_MIN before the
// saturating pack; fuzz seed 94); a plain cast would give 0.
mx::array requantize(const mx::array& acc, const mx::array& multiplier, const mx::array& zp,
                     mx::Dtype out, mx::StreamOrDevice s) {
  mx::array y = mx::round(mx::multiply(mx::astype(acc, mx::float32, s), multiplier, s), 0, s);
  y = mx::add(y, mx::astype(zp, mx::float32, s), s);
  const float lo = out == mx::int8 ? -128.f : 0.f;
  const float hi = out == mx::int8 ? 127.f : 255.f;
  y = mx::where(mx::isnan(y, s), mx::array(lo), mx::clip(y, mx::array(lo), mx::array(hi), s), s);
  return mx::astype(y, out, s);
}

// ---------------------------------------------------------------- DynamicQuantizeLinear

ClaimResult claim_dynamic_quantize(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 3, "expects 1 input and 3 outputs");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  return require_input_type(c, 0, is_f32, "float32 only");
}

// As ORT: the range [min(x, 0), max(x, 0)] maps onto [0, 255]; scale = range / 255 (1 for an
// empty range), zero point = round_half_even(clamp(-min / scale, 0, 255)); y quantizes x with
// them (x / scale in float32, rounded half to even, plus the zero point, saturated).
void translate_dynamic_quantize(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array inf(std::numeric_limits<float>::infinity());
  mx::array lo = mx::array(0.f), hi = mx::array(0.f);
  if (x.size() != 0) {
    // ORT's min/max scan (MLAS vector min/max) passes over NaNs: they never set the range.
    const mx::array nan = mx::isnan(x, s);
    lo = mx::minimum(mx::min(mx::where(nan, inf, x, s), false, s), lo, s);
    hi = mx::maximum(mx::max(mx::where(nan, mx::negative(inf, s), x, s), false, s), hi, s);
  }
  const mx::array scale = mx::where(mx::equal(hi, lo, s), mx::array(1.f),
                                    mx::divide(mx::subtract(hi, lo, s), mx::array(255.f), s), s);
  const mx::array izp = mx::subtract(mx::array(0.f), mx::divide(lo, scale, s), s);
  // ORT clamps with std::max(0, std::min(255, izp)): a NaN zero point (an infinite range gives
  // -inf / inf) becomes 255 there, where a NaN-propagating clip would leave NaN.
  const mx::array upper = mx::where(mx::less(izp, mx::array(255.f), s), izp, mx::array(255.f), s);
  const mx::array zp =
      mx::round(mx::where(mx::less(mx::array(0.f), upper, s), upper, mx::array(0.f), s), 0, s);
  // ORT's quantize clamps x / scale into [-zp, 255 - zp] with vector max/min that turn a NaN
  // into the lower bound: a NaN quotient (x NaN, or +-inf / inf) gives 0.
  const mx::array q = mx::divide(x, scale, s);
  mx::array y = mx::add(mx::round(q, 0, s), zp, s);
  y = mx::where(mx::isnan(q, s), mx::array(0.f), mx::clip(y, mx::array(0.f), mx::array(255.f), s),
                s);
  ctx.bind_output(n, 0, mx::astype(y, mx::uint8, s));
  ctx.bind_output(n, 1, scale);
  ctx.bind_output(n, 2, mx::astype(zp, mx::uint8, s));
}

// ---------------------------------------------------------------- MatMulInteger, QLinearMatMul

// A and B of rank >= 2 where known (1-D operands are not implemented).
ClaimResult require_matrix_ranks(const ClaimContext& c, size_t a, size_t b) {
  ORTMLX_REQUIRE(
      c.input_rank(a) != 0 && c.input_rank(a) != 1 && c.input_rank(b) != 0 && c.input_rank(b) != 1,
      "1-D (or scalar) operands are not implemented");
  return ClaimResult::yes();
}

void check_matrix_ranks(const mx::array& a, const mx::array& b) {
  if (a.ndim() < 2 || b.ndim() < 2)
    throw std::runtime_error("1-D (or scalar) operands are not implemented");
}

ClaimResult claim_matmul_integer(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 2 && c.num_inputs() <= 4 && c.num_outputs() == 1,
                 "expects 2 to 4 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  for (size_t i : {0, 1}) {
    r = require_input_type(c, i, q8, "int8 or uint8");
    if (!r.ok) return r;
  }
  for (size_t i : {2, 3})
    if (c.has_input(i))
      ORTMLX_REQUIRE(c.input_type(i) == c.input_type(i - 2),
                     "zero point type differs from its operand's");
  r = require_per_tensor(c, 2, "a_zero_point");
  if (!r.ok) return r;
  r = require_b_param(c, 3, 1, "b_zero_point");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == ElemType::kInt32,
                 "output must be int32");
  return require_matrix_ranks(c, 0, 1);
}

void translate_matmul_integer(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array a = ctx.input(n, 0), b = ctx.input(n, 1);
  check_matrix_ranks(a, b);
  std::optional<mx::array> za = optional_input(ctx, n, 2), zb = optional_input(ctx, n, 3);
  if (za) za = per_tensor(*za, "a_zero_point", s);
  if (zb) zb = b_param(*zb, b, "b_zero_point", s);
  ctx.bind_output(n, 0, exact_matmul(shifted(a, za, s), shifted(b, zb, s), s));
}

ClaimResult claim_qlinear_matmul(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 8 && c.num_outputs() == 1, "expects 8 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  for (size_t i : {0, 3}) {
    r = require_input_type(c, i, q8, "int8 or uint8");
    if (!r.ok) return r;
  }
  const ElemType ta = c.input_type(0);
  // ORT's kernels: int8 A takes int8 B and gives int8; uint8 A takes either and gives uint8.
  ORTMLX_REQUIRE(ta == ElemType::kUInt8 || c.input_type(3) == ElemType::kInt8,
                 "int8 A needs an int8 B");
  for (size_t i : {1, 4, 6}) {
    r = require_input_type(c, i, is_f32, "float32 scales");
    if (!r.ok) return r;
  }
  for (size_t i : {2, 5, 7}) {
    r = require_input_type(c, i, q8, "int8 or uint8 zero points");
    if (!r.ok) return r;
  }
  ORTMLX_REQUIRE(
      c.input_type(2) == ta && c.input_type(5) == c.input_type(3) && c.input_type(7) == ta,
      "zero point types differ from their operands' (y's is A's)");
  ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == ta,
                 "output type differs from A's");
  for (auto [i, what] : {std::pair<size_t, const char*>{1, "a_scale"},
                         {2, "a_zero_point"},
                         {6, "y_scale"},
                         {7, "y_zero_point"}}) {
    r = require_per_tensor(c, i, what);
    if (!r.ok) return r;
  }
  r = require_b_param(c, 4, 3, "b_scale");
  if (!r.ok) return r;
  r = require_b_param(c, 5, 3, "b_zero_point");
  if (!r.ok) return r;
  return require_matrix_ranks(c, 0, 3);
}

void translate_qlinear_matmul(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array a = ctx.input(n, 0), b = ctx.input(n, 3);
  check_matrix_ranks(a, b);
  const mx::array sa = per_tensor(ctx.input(n, 1), "a_scale", s);
  const mx::array za = per_tensor(ctx.input(n, 2), "a_zero_point", s);
  const mx::array sb = b_param(ctx.input(n, 4), b, "b_scale", s);
  const mx::array zb = b_param(ctx.input(n, 5), b, "b_zero_point", s);
  const mx::array sy = per_tensor(ctx.input(n, 6), "y_scale", s);
  const mx::array zy = per_tensor(ctx.input(n, 7), "y_zero_point", s);
  if (sb.ndim() != 0 && zb.ndim() != 0 && sb.shape() != zb.shape())
    throw std::runtime_error("b_scale and b_zero_point shapes differ");
  const mx::array acc = exact_matmul(shifted(a, za, s), shifted(b, zb, s), s);
  // (a_scale * b_scale) / y_scale in float32, ORT's order.
  const mx::array mult = mx::divide(mx::multiply(sa, sb, s), sy, s);
  ctx.bind_output(n, 0, requantize(acc, mult, zy, a.dtype(), s));
}

// ---------------------------------------------------------------- ConvInteger, QLinearConv

// Shared: X (input 0) and W (input w) int8/uint8, Conv's attributes; CPU backend only (cuDNN may
// pick inexact algorithms such as Winograd or FFT for the float32 convolution); a kernel of more
// than kExactTerms taps cannot be split into exact chunks.
ClaimResult claim_conv_integer_common(const ClaimContext& c, size_t w) {
  ORTMLX_REQUIRE(!gpu_backend(),
                 "integer convolution is exact on MLX's CPU backend only (GPU convolution "
                 "algorithms may round)");
  auto r = refuse_unknown_attrs(
      c, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  if (!r.ok) return r;
  for (size_t i : {size_t{0}, w}) {
    r = require_input_type(c, i, q8, "int8 or uint8");
    if (!r.ok) return r;
  }
  const int64_t rank = c.input_rank(0) >= 0 ? c.input_rank(0) : c.input_rank(w);
  r = claim_conv_attributes(c, rank, w);
  if (!r.ok) return r;
  const TensorInfo* wi = c.input(w);
  if (wi && wi->has_shape) {
    int64_t taps = 1;
    for (size_t i = 2; i < wi->shape.size(); ++i) taps *= wi->shape[i] < 0 ? 1 : wi->shape[i];
    ORTMLX_REQUIRE(taps <= kExactTerms, "a kernel of more than " + std::to_string(kExactTerms) +
                                            " taps is not implemented (exactness bound)");
  }
  return ClaimResult::yes();
}

// The exact int32 convolution of shifted X and W (float32, channels-first), channels-last
// result: input channels split per group into chunks of at most kExactTerms products.
mx::array exact_conv_cl(const NodeDesc& n, const mx::array& x, const mx::array& w, int groups,
                        mx::StreamOrDevice s) {
  int64_t taps = 1;
  for (int i = 2; i < static_cast<int>(w.ndim()); ++i) taps *= w.shape(i);
  const int cg = w.ndim() > 1 ? w.shape(1) : 0;
  if (taps * cg <= kExactTerms)
    return mx::astype(conv_forward_cl(n, x, w, groups, std::nullopt, s), mx::int32, s);
  if (taps > kExactTerms)
    throw std::runtime_error("a kernel of more than " + std::to_string(kExactTerms) +
                             " taps is not implemented (exactness bound)");
  if (groups < 1 || x.shape(1) != int64_t{cg} * groups || w.shape(0) % groups != 0)
    throw std::runtime_error("channels do not match group * W.shape[1] (or M % group != 0)");
  const int chunk = static_cast<int>(kExactTerms / taps), mg = w.shape(0) / groups;
  std::vector<mx::array> outs;
  for (int g = 0; g < groups; ++g) {
    std::optional<mx::array> acc;
    for (int c0 = 0; c0 < cg; c0 += chunk) {
      const int c1 = std::min(cg, c0 + chunk);
      mx::Shape xs(x.ndim(), 0), xe = x.shape(), ws(w.ndim(), 0), we = w.shape();
      xs[1] = g * cg + c0;
      xe[1] = g * cg + c1;
      ws[0] = g * mg;
      we[0] = (g + 1) * mg;
      ws[1] = c0;
      we[1] = c1;
      mx::array part = mx::astype(
          conv_forward_cl(n, mx::slice(x, xs, xe, s), mx::slice(w, ws, we, s), 1, std::nullopt, s),
          mx::int32, s);
      acc = acc ? mx::add(*acc, part, s) : part;
    }
    outs.push_back(*acc);
  }
  return outs.size() == 1 ? outs[0] : mx::concatenate(outs, -1, s);
}

ClaimResult claim_conv_integer(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 2 && c.num_inputs() <= 4 && c.num_outputs() == 1,
                 "expects 2 to 4 inputs and 1 output");
  auto r = claim_conv_integer_common(c, 1);
  if (!r.ok) return r;
  for (size_t i : {2, 3})
    if (c.has_input(i))
      ORTMLX_REQUIRE(c.input_type(i) == c.input_type(i - 2),
                     "zero point type differs from its operand's");
  r = require_per_tensor(c, 2, "x_zero_point");
  if (!r.ok) return r;
  // ORT's kernel takes one W zero point only.
  r = require_per_tensor(c, 3, "w_zero_point");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == ElemType::kInt32,
                 "output must be int32");
  return ClaimResult::yes();
}

void translate_conv_integer(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0), w = ctx.input(n, 1);
  std::optional<mx::array> zx = optional_input(ctx, n, 2), zw = optional_input(ctx, n, 3);
  if (zx) zx = per_tensor(*zx, "x_zero_point", s);
  if (zw) zw = per_tensor(*zw, "w_zero_point", s);
  const int groups = checked_int(n.attr_int("group", 1), "group");
  const mx::array y_cl = exact_conv_cl(n, shifted(x, zx, s), shifted(w, zw, s), groups, s);
  ctx.bind_output(n, 0, mx::transpose(y_cl, to_channels_first(y_cl.ndim()), s));
}

ClaimResult claim_qlinear_conv(const ClaimContext& c) {
  ORTMLX_REQUIRE((c.num_inputs() == 8 || c.num_inputs() == 9) && c.num_outputs() == 1,
                 "expects 8 or 9 inputs and 1 output");
  auto r = claim_conv_integer_common(c, 3);
  if (!r.ok) return r;
  const ElemType tx = c.input_type(0);
  ORTMLX_REQUIRE(tx == ElemType::kUInt8 || c.input_type(3) == ElemType::kInt8,
                 "int8 X needs an int8 W");
  for (size_t i : {1, 4, 6}) {
    r = require_input_type(c, i, is_f32, "float32 scales");
    if (!r.ok) return r;
  }
  for (size_t i : {2, 5, 7}) {
    r = require_input_type(c, i, q8, "int8 or uint8 zero points");
    if (!r.ok) return r;
  }
  ORTMLX_REQUIRE(
      c.input_type(2) == tx && c.input_type(5) == c.input_type(3) && c.input_type(7) == tx,
      "zero point types differ from their operands' (y's is X's)");
  if (c.has_input(8)) {
    r = require_input_type(
        c, 8, [](ElemType t) { return t == ElemType::kInt32; }, "int32 B");
    if (!r.ok) return r;
  }
  ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == tx,
                 "output type differs from X's");
  for (auto [i, what] : {std::pair<size_t, const char*>{1, "x_scale"},
                         {2, "x_zero_point"},
                         {6, "y_scale"},
                         {7, "y_zero_point"}}) {
    r = require_per_tensor(c, i, what);
    if (!r.ok) return r;
  }
  for (size_t i : {4, 5})
    ORTMLX_REQUIRE(c.input_rank(i) <= 1, "w_scale and w_zero_point must be scalars or 1-D");
  return ClaimResult::yes();
}

// A per-output-channel W parameter (scalar, one element or M values) as a 0-d or [M] array.
mx::array per_channel(const mx::array& p, int m, const char* what, mx::StreamOrDevice s) {
  if (p.size() == 1) return mx::reshape(p, {}, s);
  if (p.ndim() != 1 || p.shape(0) != m)
    throw std::runtime_error(std::string(what) + " must hold 1 or " + std::to_string(m) +
                             " values (one per output channel)");
  return p;
}

void translate_qlinear_conv(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0), w = ctx.input(n, 3);
  if (w.ndim() < 3) throw std::runtime_error("W rank must be 3, 4 or 5");
  const int m = w.shape(0);
  const mx::array sx = per_tensor(ctx.input(n, 1), "x_scale", s);
  const mx::array zx = per_tensor(ctx.input(n, 2), "x_zero_point", s);
  const mx::array sw = per_channel(ctx.input(n, 4), m, "w_scale", s);
  mx::array zw = per_channel(ctx.input(n, 5), m, "w_zero_point", s);
  const mx::array sy = per_tensor(ctx.input(n, 6), "y_scale", s);
  const mx::array zy = per_tensor(ctx.input(n, 7), "y_zero_point", s);
  if (zw.ndim() == 1) {  // one zero point per output channel: along W's first axis
    mx::Shape zs(w.ndim(), 1);
    zs[0] = m;
    zw = mx::reshape(zw, zs, s);
  }
  const int groups = checked_int(n.attr_int("group", 1), "group");
  // Channels-last: per-channel parameters and the bias broadcast along the last axis.
  mx::array acc = exact_conv_cl(n, shifted(x, zx, s), shifted(w, zw, s), groups, s);
  if (auto bias = optional_input(ctx, n, 8)) {
    if (bias->ndim() != 1 || bias->shape(0) != m)
      throw std::runtime_error("B must hold one int32 value per output channel");
    acc = mx::add(acc, *bias, s);
  }
  const mx::array mult = mx::divide(mx::multiply(sx, sw, s), sy, s);
  const mx::array y_cl = requantize(acc, mult, zy, x.dtype(), s);
  ctx.bind_output(n, 0, mx::transpose(y_cl, to_channels_first(y_cl.ndim()), s));
}

}  // namespace

void register_quant_integer_ops(OpRegistry& r) {
  r.add("", "DynamicQuantizeLinear", 11, 1 << 30, claim_dynamic_quantize,
        translate_dynamic_quantize);
  r.add("", "MatMulInteger", 10, 1 << 30, claim_matmul_integer, translate_matmul_integer);
  // QLinearMatMul 21 only widens the scale types (float16, which ORT's CPU EP lacks).
  r.add("", "QLinearMatMul", 10, 20, claim_qlinear_matmul, translate_qlinear_matmul);
  r.add("", "QLinearMatMul", 21, 1 << 30, claim_qlinear_matmul, translate_qlinear_matmul);
  r.add("", "ConvInteger", 10, 1 << 30, claim_conv_integer, translate_conv_integer);
  r.add("", "QLinearConv", 10, 1 << 30, claim_qlinear_conv, translate_qlinear_conv);
}

}  // namespace ortmlx
