// Channel normalisation family: BatchNormalization (inference form), InstanceNormalization,
// GroupNormalization (opset 18: scale/bias per group; opset 21: per channel), LpNormalization
// (p = 1 or 2). float32, and float16/bfloat16 through float32.
//
// BatchNormalization folds the statistics into one scale and bias per channel, as ORT's CPU
// kernel does (scale / sqrt(var + eps), B - mean * that), so the rounding matches closely.
// Instance and group statistics use the two-pass variance (mean, then mean of squared
// deviations) of the ONNX function bodies.
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ortmlx/engine/layout.h"
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

ClaimResult require_all_float32(const ClaimContext& c) {
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    auto r = require_input_type(c, i, is_float_type, "float16/bfloat16/float32 only");
    if (!r.ok) return r;
  }
  return require_same_types(c);
}

// Half types are normalised in float32 and rounded once (ORT's CPU EP runs float16 through
// float32; it has no bfloat16 kernels, so bfloat16 is tested against its float32 result).
mx::array in32(const TranslationContext& ctx, const NodeDesc& n, size_t i) {
  const mx::array a = ctx.input(n, i);
  return a.dtype() == mx::float32 ? a : mx::astype(a, mx::float32, ctx.stream());
}

void bind_narrowed(TranslationContext& ctx, const NodeDesc& n, const mx::array& y) {
  const mx::Dtype dt = ctx.input(n, 0).dtype();
  ctx.bind_output(n, 0, y.dtype() == dt ? y : mx::astype(y, dt, ctx.stream()));
}

// (C) -> (C, 1, ..., 1) so it broadcasts along axis 1 of a rank-`rank` array.
mx::array per_channel(const mx::array& p, int rank, mx::StreamOrDevice s) {
  mx::Shape sh{p.shape(0)};
  for (int i = 2; i < rank; ++i) sh.push_back(1);
  return mx::reshape(p, sh, s);
}

void check_channel_param(const mx::array& p, int channels, const char* what) {
  if (p.ndim() != 1 || p.shape(0) != channels)
    throw std::runtime_error(std::string(what) + " must be 1-D with one value per channel");
}

// Run-time rank check for inputs whose rank the claim did not know.
void require_rank(const mx::array& x, size_t at_least, const char* what) {
  if (x.ndim() < at_least)
    throw std::runtime_error(std::string(what) + " rank " + std::to_string(x.ndim()) +
                             " is below " + std::to_string(at_least));
}

// ---------------------------------------------------------------- BatchNormalization

ClaimResult claim_batch_norm(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 5, "expects 5 inputs (X, scale, B, mean, var)");
  for (size_t i = 0; i < 5; ++i)
    ORTMLX_REQUIRE(c.has_input(i), "input " + std::to_string(i) + " is absent");
  ORTMLX_REQUIRE(c.num_outputs() == 1,
                 "only the inference form (one output) is implemented; running statistics "
                 "outputs are not");
  // Opsets 7-8 carry `spatial` (1: one statistic per channel, the only form of later opsets);
  // spatial=0 (statistics per channel and position) is not implemented.
  const bool old_form = c.node().since_version < 9;
  auto r = old_form ? refuse_unknown_attrs(c, {"epsilon", "momentum", "spatial"})
                    : refuse_unknown_attrs(c, {"epsilon", "momentum", "training_mode"});
  if (!r.ok) return r;
  ORTMLX_REQUIRE(!old_form || c.node().attr_int("spatial", 1) == 1,
                 "spatial=0 (per-position statistics) is not implemented");
  ORTMLX_REQUIRE(c.node().attr_int("training_mode", 0) == 0,
                 "training_mode=1 (batch statistics) is not implemented");
  r = require_all_float32(c);
  if (!r.ok) return r;
  // An unknown rank is checked when translated (require_rank).
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank < 0 || rank >= 2, "X rank must be at least 2");
  for (size_t i = 1; i < 5; ++i) ORTMLX_REQUIRE(c.input_rank(i) == 1, "statistics must be 1-D");
  return ClaimResult::yes();
}

void translate_batch_norm(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = in32(ctx, n, 0);
  require_rank(x, 2, "X");
  const int rank = static_cast<int>(x.ndim());
  const int ch = x.shape(1);
  mx::array scale = in32(ctx, n, 1), bias = in32(ctx, n, 2), mean = in32(ctx, n, 3),
            var = in32(ctx, n, 4);
  check_channel_param(scale, ch, "scale");
  check_channel_param(bias, ch, "B");
  check_channel_param(mean, ch, "input_mean");
  check_channel_param(var, ch, "input_var");
  const float eps = n.attr_float("epsilon", 1e-5f);
  mx::array k = mx::divide(scale, mx::sqrt(mx::add(var, mx::array(eps), s), s), s);
  mx::array b = mx::subtract(bias, mx::multiply(mean, k, s), s);
  // On an NCHW view of channels-last data (a convolution's output) the parameters broadcast on
  // its last axis, and the result stays channels-last (engine/layout.h).
  if (ctx.options().fast_patterns.value_or(true) && k.ndim() == 1) {
    if (auto x_cl = channels_last_source(x)) {
      ctx.bind_output(n, 0, channels_first_view(mx::add(mx::multiply(*x_cl, k, s), b, s), s));
      ctx.mark_fast(n, "BatchNormalization channels-last (no NCHW copy)");
      return;
    }
  }
  mx::array y = mx::add(mx::multiply(x, per_channel(k, rank, s), s), per_channel(b, rank, s), s);
  bind_narrowed(ctx, n, y);
}

// ---------------------------------------------------------------- InstanceNormalization

ClaimResult claim_instance_norm(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 3 && c.num_outputs() == 1,
                 "expects 3 inputs (input, scale, B) and 1 output");
  auto r = refuse_unknown_attrs(c, {"epsilon"});
  if (!r.ok) return r;
  r = require_all_float32(c);
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_rank(0) < 0 || c.input_rank(0) >= 3, "input rank must be at least 3");
  return ClaimResult::yes();
}

// Normalises x over `axes` (two-pass mean / variance).
mx::array normalize(const mx::array& x, const std::vector<int>& axes, float eps,
                    mx::StreamOrDevice s) {
  mx::array mean = mx::mean(x, axes, true, s);
  mx::array d = mx::subtract(x, mean, s);
  mx::array var = mx::mean(mx::square(d, s), axes, true, s);
  return mx::multiply(d, mx::rsqrt(mx::add(var, mx::array(eps), s), s), s);
}

void translate_instance_norm(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = in32(ctx, n, 0);
  require_rank(x, 3, "input");
  const int rank = static_cast<int>(x.ndim());
  mx::array scale = in32(ctx, n, 1), bias = in32(ctx, n, 2);
  check_channel_param(scale, x.shape(1), "scale");
  check_channel_param(bias, x.shape(1), "B");
  std::vector<int> axes;
  for (int i = 2; i < rank; ++i) axes.push_back(i);
  mx::array y = normalize(x, axes, n.attr_float("epsilon", 1e-5f), s);
  y = mx::add(mx::multiply(y, per_channel(scale, rank, s), s), per_channel(bias, rank, s), s);
  bind_narrowed(ctx, n, y);
}

// ---------------------------------------------------------------- GroupNormalization

ClaimResult claim_group_norm(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 3 && c.num_outputs() == 1,
                 "expects 3 inputs (X, scale, bias) and 1 output");
  auto r = refuse_unknown_attrs(c, {"epsilon", "num_groups", "stash_type"});
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.node().has_attr("num_groups"), "num_groups is required");
  r = require_int_range(c, "num_groups", 1, std::numeric_limits<int32_t>::max());
  if (!r.ok) return r;
  // stash_type (opset 21) only changes half-precision inputs; ours are float32.
  r = require_all_float32(c);
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_rank(0) < 0 || c.input_rank(0) >= 2, "X rank must be at least 2");
  ORTMLX_REQUIRE(c.input_rank(1) == 1 && c.input_rank(2) == 1, "scale and bias must be 1-D");
  return ClaimResult::yes();
}

// per_group: opset 18 (scale/bias hold one value per group), else opset 21 (per channel).
TranslateFn translate_group_norm(bool per_group) {
  return [per_group](TranslationContext& ctx, const NodeDesc& n) {
    const auto s = ctx.stream();
    mx::array x = in32(ctx, n, 0);
    require_rank(x, 2, "X");
    const int rank = static_cast<int>(x.ndim());
    const int ch = x.shape(1);
    const int groups = checked_int(n.attr_int("num_groups", 1), "num_groups");
    if (groups < 1) throw std::runtime_error("num_groups must be positive");
    if (ch % groups != 0)
      throw std::runtime_error("channels (" + std::to_string(ch) +
                               ") are not divisible by "
                               "num_groups (" +
                               std::to_string(groups) + ")");
    mx::array scale = in32(ctx, n, 1), bias = in32(ctx, n, 2);
    const int want = per_group ? groups : ch;
    if (scale.shape(0) != want || bias.shape(0) != want)
      throw std::runtime_error(std::string("scale and bias must have one value per ") +
                               (per_group ? "group" : "channel"));
    if (per_group) {
      // One value per group -> one per channel (each repeated C/G times).
      scale = mx::repeat(scale, ch / groups, 0, s);
      bias = mx::repeat(bias, ch / groups, 0, s);
    }
    // ORT runs GroupNormalization as its function body, whose Reshape to (N, G, -1) fails on
    // an empty input: raise the same way.
    if (x.size() == 0) throw std::runtime_error("empty input (ORT cannot group it either)");
    mx::Shape grouped{x.shape(0), groups, -1};
    mx::array xg = mx::reshape(x, grouped, s);
    mx::array y = mx::reshape(normalize(xg, {2}, n.attr_float("epsilon", 1e-5f), s), x.shape(), s);
    y = mx::add(mx::multiply(y, per_channel(scale, rank, s), s), per_channel(bias, rank, s), s);
    bind_narrowed(ctx, n, y);
  };
}

// ---------------------------------------------------------------- LpNormalization

ClaimResult claim_lp_norm(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"axis", "p"});
  if (!r.ok) return r;
  const int64_t p = c.node().attr_int("p", 2);
  ORTMLX_REQUIRE(p == 1 || p == 2, "p=" + std::to_string(p) + " is not 1 or 2");
  r = require_all_float32(c);
  if (!r.ok) return r;
  const int64_t rank = c.input_rank(0);
  const int64_t axis = c.node().attr_int("axis", -1);
  // An unknown rank is checked when translated (normalize_axis throws for an axis out of range).
  ORTMLX_REQUIRE(rank < 0 || (rank >= 1 && axis >= -rank && axis < rank),
                 "axis " + std::to_string(axis) + " is out of range");
  return ClaimResult::yes();
}

void translate_lp_norm(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = in32(ctx, n, 0);
  const int axis = normalize_axis(n.attr_int("axis", -1), static_cast<int>(x.ndim()));
  mx::array norm = n.attr_int("p", 2) == 1
                       ? mx::sum(mx::abs(x, s), {axis}, true, s)
                       : mx::sqrt(mx::sum(mx::square(x, s), {axis}, true, s), s);
  // ORT leaves a zero vector at zero (no division by a zero norm).
  const mx::array zero = mx::equal(norm, mx::array(0.0f), s);
  mx::array y = mx::where(zero, mx::array(0.0f),
                          mx::divide(x, mx::where(zero, mx::array(1.0f), norm, s), s), s);
  bind_narrowed(ctx, n, y);
}

}  // namespace

void register_channel_norm_ops(OpRegistry& r) {
  // One entry from opset 7 (ORT has no kernel for 6): the claim picks the attribute set.
  r.add("", "BatchNormalization", 7, 1 << 30, claim_batch_norm, translate_batch_norm);
  r.add("", "InstanceNormalization", 6, 1 << 30, claim_instance_norm, translate_instance_norm);
  r.add("", "GroupNormalization", 18, 20, claim_group_norm, translate_group_norm(true));
  r.add("", "GroupNormalization", 21, 1 << 30, claim_group_norm, translate_group_norm(false));
  r.add("", "LpNormalization", 1, 1 << 30, claim_lp_norm, translate_lp_norm);
}

}  // namespace ortmlx
