// Loss family: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12 and 13+).
// ORT's CPU EP has no kernel for either: it runs ONNX's function bodies, so these follow the
// bodies step by step (GatherElements of the target class, Where on the ignore_index mask, Mul
// by the gathered weights, ReduceSum / ReduceMean or a weighted mean). Targets index the class
// axis as GatherElements does: negative values count from the end, and a target outside
// [-C, C) that is not ignore_index is an error (a runtime check; the indices the kernels see are
// clamped, so the evaluation before the error never reads outside the scores).
#include <limits>
#include <optional>
#include <string>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

bool target_type(ElemType t) {
  return t == ElemType::kInt32 || t == ElemType::kInt64;
}

bool f32(ElemType t) {
  return t == ElemType::kFloat;
}

// Inputs (scores [N, C, d1..dk], target [N, d1..dk], optional weight [C]); outputs: the loss and
// (SoftmaxCrossEntropyLoss) the optional log_prob.
ClaimResult claim_loss(const ClaimContext& c, size_t max_outputs) {
  ORTMLX_REQUIRE(c.num_inputs() >= 2 && c.num_inputs() <= 3, "expects 2 or 3 inputs");
  ORTMLX_REQUIRE(c.num_outputs() >= 1 && c.num_outputs() <= max_outputs,
                 "expects at most " + std::to_string(max_outputs) + " outputs");
  auto r = refuse_unknown_attrs(c, {"reduction", "ignore_index"});
  if (!r.ok) return r;
  const std::string red = c.node().attr_string("reduction", "mean");
  ORTMLX_REQUIRE(red == "none" || red == "sum" || red == "mean",
                 "reduction '" + red + "' is not one of none, sum, mean");
  // The function bodies spell their zero and one constants as float: other score types do not
  // expand.
  r = require_input_type(c, 0, f32, "float32 scores only");
  if (!r.ok) return r;
  r = require_input_type(c, 1, target_type, "int32 or int64 targets");
  if (!r.ok) return r;
  if (c.has_input(2)) {
    r = require_input_type(c, 2, f32, "float32 weights only");
    if (!r.ok) return r;
    const int64_t wr = c.input_rank(2);
    ORTMLX_REQUIRE(wr < 0 || wr == 1, "weight must be 1-D");
  }
  for (size_t i = 0; i < c.num_outputs(); ++i) {
    const ElemType t = c.output_type(i);
    ORTMLX_REQUIRE(t == ElemType::kUndefined || t == ElemType::kFloat, "outputs must be float32");
  }
  const int64_t xr = c.input_rank(0), tr = c.input_rank(1);
  ORTMLX_REQUIRE(xr < 0 || xr >= 2, "scores rank must be >= 2");
  ORTMLX_REQUIRE(xr < 0 || tr < 0 || tr == xr - 1, "target rank must be scores rank - 1");
  return ClaimResult::yes();
}

ClaimResult claim_nll(const ClaimContext& c) {
  return claim_loss(c, 1);
}

ClaimResult claim_sce(const ClaimContext& c) {
  return claim_loss(c, 2);
}

// log_softmax over axis 1: (x - max) - log(sum(exp(x - max))), as ORT's LogSoftmax kernel.
mx::array log_softmax_classes(const mx::array& x, mx::StreamOrDevice s) {
  const mx::array m = mx::max(x, {1}, /*keepdims=*/true, s);
  const mx::array sh = mx::subtract(x, m, s);
  return mx::subtract(sh, mx::log(mx::sum(mx::exp(sh, s), {1}, /*keepdims=*/true, s), s), s);
}

// The loss of the NegativeLogLikelihoodLoss body over log-probabilities `x`.
mx::array nll(TranslationContext& ctx, const NodeDesc& n, const mx::array& x) {
  const auto s = ctx.stream();
  const mx::array target = ctx.input(n, 1);
  if (x.ndim() < 2 || target.ndim() + 1 != x.ndim())
    throw std::runtime_error("target rank must be scores rank - 1 (scores rank >= 2)");
  mx::Shape want = x.shape();
  want.erase(want.begin() + 1);
  if (target.shape() != want)
    throw std::runtime_error("target shape must be the scores shape without the class axis");
  const int64_t classes = x.shape(1);
  const bool has_weight = n.inputs.size() > 2 && !n.inputs[2].empty();
  std::optional<mx::array> weight;
  if (has_weight) {
    weight = ctx.input(n, 2);
    if (weight->ndim() != 1 || weight->shape(0) != classes)
      throw std::runtime_error("weight must be 1-D with one value per class (scores dim 1)");
  }
  const mx::array t64 = mx::astype(target, mx::int64, s);
  std::optional<mx::array> ignored;
  mx::array idx = t64;
  if (n.has_attr("ignore_index")) {
    ignored = mx::equal(t64, mx::array(n.attr_int("ignore_index", 0), mx::int64), s);
    idx = mx::where(*ignored, mx::array(int64_t{0}, mx::int64), t64, s);
  }
  if (classes == 0 && target.size() != 0)
    throw std::runtime_error("the class axis is empty: no target is valid");
  const mx::array dim(classes, mx::int64);
  ctx.require(
      n, mx::logical_and(mx::greater_equal(idx, mx::negative(dim, s), s), mx::less(idx, dim, s), s),
      "target out of range: every target that is not ignore_index must be within the "
      "inclusive range [" +
          std::to_string(-classes) + "," + std::to_string(classes - 1) + "]");
  const mx::array zero64(int64_t{0}, mx::int64);
  mx::array safe = mx::where(mx::less(idx, zero64, s), mx::add(idx, dim, s), idx, s);
  safe = mx::minimum(mx::maximum(safe, zero64, s),
                     mx::maximum(mx::subtract(dim, mx::array(int64_t{1}, mx::int64), s), zero64, s),
                     s);
  const std::string red = n.attr_string("reduction", "mean");
  if (target.size() == 0) {
    // No element: an empty loss, ReduceSum's 0, ReduceMean's 0 (ORT's value for an empty
    // mean), or a weighted mean of 0 / 0.
    if (red == "none") return mx::zeros(want, mx::float32, s);
    const bool weighted = has_weight || n.has_attr("ignore_index");
    if (red == "sum" || !weighted) return mx::array(0.0f);
    return mx::array(std::numeric_limits<float>::quiet_NaN());
  }
  mx::array picked = mx::squeeze(mx::take_along_axis(x, mx::expand_dims(safe, 1, s), 1, s), {1}, s);
  const mx::array zero(0.0f);
  if (ignored) picked = mx::where(*ignored, zero, picked, s);
  mx::array loss = mx::negative(picked, s);
  std::optional<mx::array> w;
  if (weight) {
    w = mx::take(*weight, safe, 0, s);
    if (ignored) w = mx::where(*ignored, zero, *w, s);
  } else if (ignored) {
    w = mx::where(*ignored, zero, mx::array(1.0f), s);
  }
  if (w) loss = mx::multiply(loss, *w, s);
  if (red == "none") return loss;
  if (red == "sum") return mx::sum(loss, false, s);
  if (w) return mx::divide(mx::sum(loss, false, s), mx::sum(*w, false, s), s);
  return mx::mean(loss, false, s);
}

void translate_nll(TranslationContext& ctx, const NodeDesc& n) {
  ctx.bind_output(n, 0, nll(ctx, n, ctx.input(n, 0)));
}

void translate_sce(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  if (x.ndim() < 2) throw std::runtime_error("scores rank must be >= 2");
  // The function body reshapes the scores to [N, C, -1], which ORT rejects when N or C is 0
  // (nothing to infer the -1 from).
  if (x.shape(0) == 0 || x.shape(1) == 0)
    throw std::runtime_error(
        "scores have no elements in N x C: the function body's Reshape to "
        "[N, C, -1] is invalid (ORT rejects it too)");
  const mx::array logp = x.size() == 0 ? x : log_softmax_classes(x, s);
  ctx.bind_output(n, 0, nll(ctx, n, logp));
  if (n.outputs.size() > 1 && !n.outputs[1].empty()) ctx.bind_output(n, 1, logp);
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  // Two schema versions each (13 adds types the claim does not admit); one semantics.
  r.add("", "NegativeLogLikelihoodLoss", 12, 12, claim_nll, translate_nll);
  r.add("", "NegativeLogLikelihoodLoss", 13, 1 << 30, claim_nll, translate_nll);
  r.add("", "SoftmaxCrossEntropyLoss", 12, 12, claim_sce, translate_sce);
  r.add("", "SoftmaxCrossEntropyLoss", 13, 1 << 30, claim_sce, translate_sce);
}

}  // namespace ortmlx
