// Local normalisation family: LRN (cross-channel window), MeanVarianceNormalization, and
// ReverseSequence (a gather along the time axis). float32 (ReverseSequence also int64); LRN and
// MeanVarianceNormalization take float16/bfloat16 too, computed in float32 and rounded once (ORT's
// CPU EP runs float16 through float32; bfloat16, which it has no kernel for, is tested against
// its float32 result).
//
// LRN sums x^2 over the channel window [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to
// [0, C): the squares are zero-padded along axis 1 and `size` shifted slices added up.
// MeanVarianceNormalization follows the ONNX function body: (x - mean) / (sqrt(var) + 1e-9),
// with the variance taken two-pass (mean of squared deviations).
// ReverseSequence gathers along time_axis with index len-1-t for t < len and t otherwise.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

// ---------------------------------------------------------------- LRN

ClaimResult claim_lrn(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"alpha", "beta", "bias", "size"});
  if (!r.ok) return r;
  r = require_input_type(c, 0, is_float_type, "float16/bfloat16/float32 only");
  if (!r.ok) return r;
  r = require_same_types(c);
  if (!r.ok) return r;
  // ORT's CPU kernel (the reference) takes NCHW only.
  // A rank known only at run time is checked when translated.
  ORTMLX_REQUIRE(c.input_rank(0) < 0 || c.input_rank(0) == 4, "X must be 4-D (NCHW)");
  const int64_t size = c.node().attr_int("size", 0);
  // ORT's CPU kernel (the reference) rejects even sizes; keep the same contract.
  ORTMLX_REQUIRE(size >= 1 && size % 2 == 1, "size must be given, positive and odd");
  // Beyond int32, ORT's kernel fails to allocate its window buffer: leave it the error.
  r = require_int_range(c, "size", 1, std::numeric_limits<int32_t>::max());
  if (!r.ok) return r;
  return ClaimResult::yes();
}

mx::array in32(const mx::array& a, mx::StreamOrDevice s) {
  return a.dtype() == mx::float32 ? a : mx::astype(a, mx::float32, s);
}

mx::array narrowed(const mx::array& y, mx::Dtype dt, mx::StreamOrDevice s) {
  return y.dtype() == dt ? y : mx::astype(y, dt, s);
}

void translate_lrn(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::Dtype dt = ctx.input(n, 0).dtype();
  mx::array x = in32(ctx.input(n, 0), s);
  if (x.ndim() != 4)
    throw std::runtime_error("X must be 4-D (NCHW), got rank " + std::to_string(x.ndim()));
  const int64_t size = n.attr_int("size", 1);
  if (size < 1) throw std::runtime_error("size must be positive");
  const float alpha = n.attr_float("alpha", 1e-4f);
  const float beta = n.attr_float("beta", 0.75f);
  const float bias = n.attr_float("bias", 1.0f);
  const int ch = x.shape(1);
  // Window offsets beyond the channel count only reach padding zeros: clamp them to ch, so a
  // huge size (any int64) neither wraps when narrowed nor unrolls into billions of slices.
  const int lo = static_cast<int>(std::min<int64_t>((size - 1) / 2, ch));
  const int hi = static_cast<int>(std::min<int64_t>(size - 1 - (size - 1) / 2, ch));
  mx::array sq = mx::pad(mx::square(x, s), {1}, {lo}, {hi}, mx::array(0.0f), "constant", s);
  mx::Shape start(x.ndim(), 0), stop = sq.shape();
  mx::array sum = mx::zeros_like(x, s);
  for (int k = 0; k <= lo + hi; ++k) {
    start[1] = k;
    stop[1] = k + ch;
    sum = mx::add(sum, mx::slice(sq, start, stop, s), s);
  }
  mx::array denom = mx::add(mx::multiply(sum, mx::array(alpha / static_cast<float>(size)), s),
                            mx::array(bias), s);
  ctx.bind_output(n, 0, narrowed(mx::divide(x, mx::power(denom, mx::array(beta), s), s), dt, s));
}

// ---------------------------------------------------------------- MeanVarianceNormalization

ClaimResult claim_mvn(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"axes"});
  if (!r.ok) return r;
  r = require_input_type(c, 0, is_float_type, "float16/bfloat16/float32 only");
  if (!r.ok) return r;
  r = require_same_types(c);
  if (!r.ok) return r;
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank >= 1, "X rank must be known");
  const auto axes = c.node().attr_ints("axes");
  std::vector<int64_t> a = axes ? *axes : std::vector<int64_t>{0, 2, 3};
  for (int64_t v : a) ORTMLX_REQUIRE(v >= -rank && v < rank, "axes out of range");
  return ClaimResult::yes();
}

void translate_mvn(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::Dtype dt = ctx.input(n, 0).dtype();
  mx::array x = in32(ctx.input(n, 0), s);
  const int rank = static_cast<int>(x.ndim());
  const auto attr = n.attr_ints("axes");
  std::vector<int64_t> a = attr ? *attr : std::vector<int64_t>{0, 2, 3};
  std::vector<int> axes;
  for (int64_t v : a) axes.push_back(static_cast<int>(v < 0 ? v + rank : v));
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  mx::array mean = mx::mean(x, axes, true, s);
  mx::array d = mx::subtract(x, mean, s);
  mx::array var = mx::mean(mx::square(d, s), axes, true, s);
  mx::array den = mx::add(mx::sqrt(var, s), mx::array(1e-9f), s);
  ctx.bind_output(n, 0, narrowed(mx::divide(d, den, s), dt, s));
}

// ---------------------------------------------------------------- ReverseSequence

ClaimResult claim_reverse_sequence(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 1, "expects 2 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"batch_axis", "time_axis"});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat || t == ElemType::kInt64; },
      "float32 or int64 only");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_type(1) == ElemType::kInt64, "sequence_lens must be int64");
  ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == c.input_type(0),
                 "output type must match input");
  ORTMLX_REQUIRE(c.input_rank(0) >= 2, "input rank must be known and at least 2");
  const int64_t b = c.node().attr_int("batch_axis", 1), t = c.node().attr_int("time_axis", 0);
  ORTMLX_REQUIRE((b == 0 && t == 1) || (b == 1 && t == 0),
                 "batch_axis and time_axis must be 0 and 1 in some order");
  // ORT raises on a length outside [0, time]: constant lengths are checked here, the others by
  // a runtime check in the translation.
  const TensorInfo* x = c.input(0);
  const ConstTensor* lens = c.input_is_constant(1) ? c.constant_input(1) : nullptr;
  if (lens && x && x->has_shape && x->shape[static_cast<size_t>(t)] >= 0) {
    const int64_t steps = x->shape[static_cast<size_t>(t)];
    for (int64_t v : lens->as_int64().value_or(std::vector<int64_t>{}))
      ORTMLX_REQUIRE(v >= 0 && v <= steps, "sequence_lens value " + std::to_string(v) +
                                               " is outside [0, " + std::to_string(steps) +
                                               "] (ORT rejects it)");
  }
  return ClaimResult::yes();
}

void translate_reverse_sequence(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  const int bax = n.attr_int("batch_axis", 1) == 0 ? 0 : 1;
  const int tax = 1 - bax;
  const int batch = x.shape(bax), steps = x.shape(tax);
  mx::array lens = ctx.input(n, 1);
  if (lens.ndim() != 1 || lens.shape(0) != batch)
    throw std::runtime_error("sequence_lens must be 1-D with one length per batch row");
  // ORT raises for a length outside [0, steps]: a runtime check (constant lengths are refused at
  // claim time already). The kernels still see clipped lengths (MLX does not bounds-check),
  // clipped in int64 first: narrowing 2^32 + 1 would wrap to 1.
  const mx::array lo(int64_t{0}, mx::int64), hi(int64_t{steps}, mx::int64);
  ctx.require(n, mx::logical_and(mx::greater_equal(lens, lo, s), mx::less_equal(lens, hi, s), s),
              "sequence_lens values must be within [0, " + std::to_string(steps) + "]");
  lens = mx::astype(mx::clip(lens, lo, hi, s), mx::int32, s);
  mx::array t = mx::arange(steps, mx::int32, s);
  // (batch, steps) or (steps, batch) grid of source indices along the time axis.
  mx::array L = bax == 0 ? mx::reshape(lens, {batch, 1}, s) : mx::reshape(lens, {1, batch}, s);
  mx::array T = tax == 0 ? mx::reshape(t, {steps, 1}, s) : mx::reshape(t, {1, steps}, s);
  mx::array idx = mx::where(mx::less(T, L, s),
                            mx::subtract(mx::subtract(L, mx::array(1, mx::int32), s), T, s), T, s);
  mx::Shape ish = idx.shape();
  for (size_t i = 2; i < x.ndim(); ++i) ish.push_back(1);
  idx = mx::broadcast_to(mx::reshape(idx, ish, s), x.shape(), s);
  ctx.bind_output(n, 0, mx::take_along_axis(x, idx, tax, s));
}

}  // namespace

void register_local_norm_ops(OpRegistry& r) {
  r.add("", "LRN", 13, 1 << 30, claim_lrn, translate_lrn);
  r.add("", "MeanVarianceNormalization", 13, 1 << 30, claim_mvn, translate_mvn);
  r.add("", "ReverseSequence", 10, 1 << 30, claim_reverse_sequence, translate_reverse_sequence);
  // Older versions differ only in bfloat16 (13): the same claims; each its own entry.
  r.add("", "LRN", 1, 12, claim_lrn, translate_lrn);
  r.add("", "MeanVarianceNormalization", 9, 12, claim_mvn, translate_mvn);
}

}  // namespace ortmlx
