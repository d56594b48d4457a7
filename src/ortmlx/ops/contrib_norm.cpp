// Contrib normalisation ops as ONNX Runtime defines them (onnxruntime/core/graph/contrib_ops):
//   SimplifiedLayerNormalization (registered by ORT in the default domain, since 1): RMS norm over
//     [axis, rank) with scale, optional inv_std_var output.
//   com.microsoft SkipLayerNormalization: sum = input + skip (+ bias), LayerNorm of sum over the
//     last axis with gamma (+ beta); optional outputs mean, inv_std_var, input_skip_bias_sum.
//   com.microsoft SkipSimplifiedLayerNormalization: the same with RMS normalisation.
// All compute in float32 (as ORT's CPU kernels do for half inputs: the sum is formed in float32,
// normalised unrounded, and rounded to T only for the outputs).
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/norm_kernels.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

mx::array f32(const mx::array& a, mx::StreamOrDevice s) {
  return a.dtype() == mx::float32 ? a : mx::astype(a, mx::float32, s);
}

mx::array to_type(const mx::array& a, mx::Dtype dt, mx::StreamOrDevice s) {
  return a.dtype() == dt ? a : mx::astype(a, dt, s);
}

// Optional float outputs (mean, inv_std_var) are float32 (type U).
ClaimResult require_float_outputs(const ClaimContext& c, std::initializer_list<size_t> outs) {
  for (size_t i : outs) {
    if (i >= c.num_outputs() || c.node().outputs[i].empty()) continue;
    const ElemType t = c.output_type(i);
    ORTMLX_REQUIRE(t == ElemType::kUndefined || t == ElemType::kFloat,
                   "output " + std::to_string(i) + " type " + type_str(t) + " is not float32");
  }
  return ClaimResult::yes();
}

ClaimResult require_float_inputs(const ClaimContext& c) {
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    auto r = require_input_type(c, i, is_float_type, "float16/bfloat16/float32 only");
    if (!r.ok) return r;
  }
  return require_same_types(c);
}

// ---------------------------------------------------------------- SimplifiedLayerNormalization

ClaimResult claim_simplified_ln(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs (X, scale)");
  ORTMLX_REQUIRE(c.num_outputs() == 1 || c.num_outputs() == 2, "expects 1 or 2 outputs");
  auto r = refuse_unknown_attrs(c, {"axis", "epsilon", "stash_type"});
  if (!r.ok) return r;
  r = require_float_inputs(c);
  if (!r.ok) return r;
  r = require_float_outputs(c, {1});
  if (!r.ok) return r;
  const int64_t stash = c.node().attr_int("stash_type", 1);
  ORTMLX_REQUIRE(stash == 1, "stash_type " + std::to_string(stash) + " is not implemented");
  return require_norm_axis(c);
}

void translate_simplified_ln(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  mx::array scale = ctx.input(n, 1);
  const int rank = static_cast<int>(x.ndim());
  const int axis = normalize_axis(n.attr_int("axis", -1), rank);
  const std::vector<int> axes = trailing_axes(axis, rank);
  check_unidirectional(scale, x, "scale");
  NormRows st = rms_norm_rows(f32(x, s), axes, n.attr_float("epsilon", 1e-5f), s);
  ctx.bind_output(n, 0, to_type(mx::multiply(st.y, f32(scale, s), s), x.dtype(), s));
  ctx.bind_output(n, 1, st.inv_std);
}

// ----------------------------------------------------------------
// Skip(Simplified)LayerNormalization

// Input indices: input, skip, gamma, then beta (LayerNorm form only) and bias.
template <bool kSimplified>
ClaimResult claim_skip_ln(const ClaimContext& c) {
  const size_t max_in = kSimplified ? 4 : 5;
  ORTMLX_REQUIRE(c.num_inputs() >= 3 && c.num_inputs() <= max_in,
                 "expects 3 to " + std::to_string(max_in) + " inputs");
  ORTMLX_REQUIRE(c.num_outputs() >= 1 && c.num_outputs() <= 4, "expects 1 to 4 outputs");
  auto r = refuse_unknown_attrs(c, {"epsilon"});
  if (!r.ok) return r;
  r = require_float_inputs(c);
  if (!r.ok) return r;
  r = require_float_outputs(c, {1, 2});
  if (!r.ok) return r;
  // ORT's RMS form has no mean; its output slot 1 is refused rather than filled with zeros.
  ORTMLX_REQUIRE(!kSimplified || c.num_outputs() < 2 || c.node().outputs[1].empty(),
                 "the mean output of SkipSimplifiedLayerNormalization is not implemented");
  // Output 3 (input_skip_bias_sum) has type T.
  if (c.num_outputs() > 3 && !c.node().outputs[3].empty()) {
    const ElemType t = c.output_type(3);
    ORTMLX_REQUIRE(t == ElemType::kUndefined || t == c.input_type(0),
                   "input_skip_bias_sum type differs from the input type");
  }
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank < 0 || rank == 2 || rank == 3, "input must be 2-D or 3-D");
  for (size_t i = 2; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    const int64_t ri = c.input_rank(i);
    ORTMLX_REQUIRE(ri < 0 || ri == 1, "gamma/beta/bias must be 1-D");
  }
  return ClaimResult::yes();
}

template <bool kSimplified>
void translate_skip_ln(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array skip = ctx.input(n, 1);
  const mx::array gamma = ctx.input(n, 2);
  const int rank = static_cast<int>(x.ndim());
  const int hidden = x.shape(-1);
  auto check_hidden = [&](const mx::array& a, const char* what) {
    if (a.ndim() != 1 || a.shape(0) != hidden)
      throw std::runtime_error(std::string(what) + " must have shape (hidden_size)");
  };
  check_hidden(gamma, "gamma");
  // ORT accepts skip of the input's shape, (1, S, H) or (S, H): all broadcast to the input.
  check_unidirectional(skip, x, "skip");
  mx::array sum = mx::add(f32(x, s), f32(skip, s), s);
  std::optional<mx::array> beta;
  const size_t bias_idx = kSimplified ? 3 : 4;
  if (!kSimplified && n.inputs.size() > 3 && !n.inputs[3].empty()) {
    beta = ctx.input(n, 3);
    check_hidden(*beta, "beta");
  }
  if (n.inputs.size() > bias_idx && !n.inputs[bias_idx].empty()) {
    const mx::array bias = ctx.input(n, bias_idx);
    check_hidden(bias, "bias");
    sum = mx::add(sum, f32(bias, s), s);
  }
  const std::vector<int> axes = {rank - 1};
  const float eps = n.attr_float("epsilon", 1e-12f);
  NormRows st = kSimplified ? rms_norm_rows(sum, axes, eps, s) : layer_norm_rows(sum, axes, eps, s);
  mx::array y = mx::multiply(st.y, f32(gamma, s), s);
  if (beta) y = mx::add(y, f32(*beta, s), s);
  ctx.bind_output(n, 0, to_type(y, x.dtype(), s));
  ctx.bind_output(n, 1, st.mean);
  ctx.bind_output(n, 2, st.inv_std);
  ctx.bind_output(n, 3, to_type(sum, x.dtype(), s));
}

}  // namespace

void register_contrib_norm_ops(OpRegistry& r) {
  // ORT registers SimplifiedLayerNormalization in the ONNX domain (since version 1).
  r.add("", "SimplifiedLayerNormalization", 1, 1 << 30, claim_simplified_ln,
        translate_simplified_ln);
  r.add("com.microsoft", "SkipLayerNormalization", 1, 1 << 30, claim_skip_ln<false>,
        translate_skip_ln<false>);
  r.add("com.microsoft", "SkipSimplifiedLayerNormalization", 1, 1 << 30, claim_skip_ln<true>,
        translate_skip_ln<true>);
}

}  // namespace ortmlx
