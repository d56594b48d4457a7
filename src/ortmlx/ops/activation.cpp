// Activation family: LeakyRelu, PRelu, Elu, Selu, Celu, HardSigmoid, HardSwish, Softplus,
// Softsign, Mish, ThresholdedRelu, Swish, Shrink; com.microsoft Gelu, FastGelu, BiasGelu,
// QuickGelu. All are computed in float32 (half inputs are widened and the result rounded once, as
// ORT's CPU EP does for float16).
#include <cmath>
#include <functional>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/elementwise.h"
#include "ortmlx/ops/elementwise/cuda/gelu.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

// y = f(x in float32, node) for one input.
using ActFn = std::function<mx::array(const mx::array&, const NodeDesc&, mx::StreamOrDevice)>;

// float16 and bfloat16 are widened to float32 and the result rounded once (ORT's CPU EP runs
// float16 activations through float32 too; it has no bfloat16 kernels, so bfloat16 is tested
// against its float32 result rounded to bfloat16).
bool f32_f16(ElemType t) {
  return is_float_type(t);
}
bool f32_only(ElemType t) {
  return t == ElemType::kFloat;
}

ClaimFn claim_act(std::initializer_list<const char*> attrs, bool half = true) {
  std::vector<const char*> known(attrs);
  return [known, half](const ClaimContext& c) -> ClaimResult {
    ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
    for (const auto& [name, v] : c.node().attrs) {
      bool ok = false;
      for (const char* k : known) ok = ok || name == k;
      ORTMLX_REQUIRE(ok, "attribute '" + name + "' is not implemented");
    }
    auto r = half ? require_input_type(c, 0, f32_f16, "float16/bfloat16/float32 only")
                  : require_input_type(c, 0, f32_only, "float32 only");
    if (!r.ok) return r;
    return require_same_types(c);
  };
}

// Shrink: float32 and float16 (see shrink below for the integer types).
ClaimResult claim_shrink(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"bias", "lambd"});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat || t == ElemType::kFloat16; },
      "float32/float16 only: ORT casts integer results back through an undefined float "
      "conversion");
  if (!r.ok) return r;
  return require_same_types(c);
}

mx::array to_f32(const mx::array& x, mx::StreamOrDevice s) {
  return x.dtype() == mx::float32 ? x : mx::astype(x, mx::float32, s);
}

mx::array from_f32(const mx::array& y, mx::Dtype dt, mx::StreamOrDevice s) {
  return dt == mx::float32 ? y : mx::astype(y, dt, s);
}

TranslateFn translate_act(ActFn fn) {
  return [fn](TranslationContext& ctx, const NodeDesc& n) {
    const auto s = ctx.stream();
    const mx::array x = ctx.input(n, 0);
    ctx.bind_output(n, 0, from_f32(fn(to_f32(x, s), n, s), x.dtype(), s));
  };
}

mx::array f(float v) {
  return mx::array(v);
}

// log(1 + exp(x)) without overflow: x + log1p(exp(-x)) for x > 0.
mx::array softplus(const mx::array& x, mx::StreamOrDevice s) {
  const mx::array pos = mx::add(x, mx::log1p(mx::exp(mx::negative(x, s), s), s), s);
  const mx::array neg = mx::log1p(mx::exp(x, s), s);
  return mx::where(mx::greater(x, f(0), s), pos, neg, s);
}

mx::array leaky_relu(const mx::array& x, const NodeDesc& n, mx::StreamOrDevice s) {
  const float alpha = n.attr_float("alpha", 0.01f);
  return mx::where(mx::greater_equal(x, f(0), s), x, mx::multiply(x, f(alpha), s), s);
}

mx::array elu(const mx::array& x, const NodeDesc& n, mx::StreamOrDevice s) {
  const float alpha = n.attr_float("alpha", 1.0f);
  return mx::where(mx::greater_equal(x, f(0), s), x, mx::multiply(f(alpha), mx::expm1(x, s), s), s);
}

mx::array selu(const mx::array& x, const NodeDesc& n, mx::StreamOrDevice s) {
  const float alpha = n.attr_float("alpha", 1.67326319217681884765625f);
  const float gamma = n.attr_float("gamma", 1.05070102214813232421875f);
  const mx::array neg = mx::multiply(f(alpha), mx::expm1(x, s), s);
  return mx::multiply(f(gamma), mx::where(mx::greater(x, f(0), s), x, neg, s), s);
}

mx::array celu(const mx::array& x, const NodeDesc& n, mx::StreamOrDevice s) {
  const float alpha = n.attr_float("alpha", 1.0f);
  const mx::array neg = mx::multiply(f(alpha), mx::expm1(mx::divide(x, f(alpha), s), s), s);
  return mx::add(mx::maximum(x, f(0), s), mx::minimum(neg, f(0), s), s);
}

mx::array hard_sigmoid_ab(const mx::array& x, float alpha, float beta, mx::StreamOrDevice s) {
  const mx::array lin = mx::add(mx::multiply(x, f(alpha), s), f(beta), s);
  return mx::maximum(mx::minimum(lin, f(1), s), f(0), s);
}

mx::array hard_sigmoid(const mx::array& x, const NodeDesc& n, mx::StreamOrDevice s) {
  return hard_sigmoid_ab(x, n.attr_float("alpha", 0.2f), n.attr_float("beta", 0.5f), s);
}

mx::array hard_swish(const mx::array& x, const NodeDesc&, mx::StreamOrDevice s) {
  return mx::multiply(x, hard_sigmoid_ab(x, 1.0f / 6.0f, 0.5f, s), s);
}

mx::array softplus_node(const mx::array& x, const NodeDesc&, mx::StreamOrDevice s) {
  return softplus(x, s);
}

mx::array softsign(const mx::array& x, const NodeDesc&, mx::StreamOrDevice s) {
  return mx::divide(x, mx::add(f(1), mx::abs(x, s), s), s);
}

mx::array mish(const mx::array& x, const NodeDesc&, mx::StreamOrDevice s) {
  return mx::multiply(x, mx::tanh(softplus(x, s), s), s);
}

mx::array thresholded_relu(const mx::array& x, const NodeDesc& n, mx::StreamOrDevice s) {
  const float alpha = n.attr_float("alpha", 1.0f);
  return mx::where(mx::greater(x, f(alpha), s), x, f(0), s);
}

// Swish (opset 24): x * sigmoid(alpha * x). ORT 1.30 has no kernel: it runs the function body.
mx::array swish(const mx::array& x, const NodeDesc& n, mx::StreamOrDevice s) {
  const float alpha = n.attr_float("alpha", 1.0f);
  return mx::multiply(x, mx::sigmoid(mx::multiply(x, f(alpha), s), s), s);
}

// Shrink: x < -lambd ? x + bias : (x > lambd ? x - bias : 0), in float32 as ORT's CPU kernel
// (float16 widened and rounded once). Integer types are refused: ORT adds the float bias to the
// integer and casts back, an undefined conversion when the result leaves the type's range.
mx::array shrink(const mx::array& x, const NodeDesc& n, mx::StreamOrDevice s) {
  const float bias = n.attr_float("bias", 0.0f);
  const float lambd = n.attr_float("lambd", 0.5f);
  const mx::array low = mx::add(x, f(bias), s), high = mx::subtract(x, f(bias), s);
  const mx::array zero = mx::zeros_like(x, s);
  return mx::where(mx::less(x, f(-lambd), s), low,
                   mx::where(mx::greater(x, f(lambd), s), high, zero, s), s);
}

mx::array quick_gelu(const mx::array& x, const NodeDesc& n, mx::StreamOrDevice s) {
  const float alpha = n.attr_float("alpha", 1.702f);
  return mx::multiply(x, mx::sigmoid(mx::multiply(x, f(alpha), s), s), s);
}

// PRelu: slope broadcasts to X's shape (unidirectionally); y = x < 0 ? slope * x : x.
ClaimResult claim_prelu(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  for (size_t i = 0; i < 2; ++i) {
    r = require_input_type(c, i, f32_f16, "float16/bfloat16/float32 only");
    if (!r.ok) return r;
  }
  r = require_same_types(c);
  if (!r.ok) return r;
  const TensorInfo* x = c.input(0);
  const TensorInfo* slope = c.input(1);
  ORTMLX_REQUIRE(x && slope && x->has_shape && slope->has_shape, "X and slope ranks must be known");
  ORTMLX_REQUIRE(slope->shape.size() <= x->shape.size(), "slope rank exceeds X rank");
  const size_t off = x->shape.size() - slope->shape.size();
  for (size_t i = 0; i < slope->shape.size(); ++i) {
    const int64_t sd = slope->shape[i], xd = x->shape[off + i];
    ORTMLX_REQUIRE(sd == 1 || (sd >= 0 && sd == xd),
                   "slope must broadcast to X (static dims 1 or equal to X's)");
  }
  return ClaimResult::yes();
}

void translate_prelu(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array xf = to_f32(x, s);
  const mx::array slope = to_f32(ctx.input(n, 1), s);
  const mx::array y = mx::where(mx::less(xf, f(0), s), mx::multiply(xf, slope, s), xf, s);
  ctx.bind_output(n, 0, from_f32(y, x.dtype(), s));
}

// com.microsoft Gelu / FastGelu / BiasGelu: X (float32), optional 1-D bias added to X's last axis
// first (required for BiasGelu, optional for FastGelu, absent for Gelu).
enum class BiasUse { kNone, kOptional, kRequired };

ClaimFn claim_contrib_gelu(BiasUse bias) {
  return [bias](const ClaimContext& c) -> ClaimResult {
    const size_t max_in = bias == BiasUse::kNone ? 1 : 2;
    ORTMLX_REQUIRE(c.num_inputs() >= 1 && c.num_inputs() <= max_in,
                   "expects at most " + std::to_string(max_in) + " inputs");
    auto r = refuse_unknown_attrs(c, {});
    if (!r.ok) return r;
    r = require_input_type(c, 0, f32_only, "float32 only");
    if (!r.ok) return r;
    ORTMLX_REQUIRE(bias != BiasUse::kRequired || c.has_input(1), "bias input is required");
    if (c.has_input(1)) {
      r = require_input_type(c, 1, f32_only, "float32 only");
      if (!r.ok) return r;
      const TensorInfo* x = c.input(0);
      const TensorInfo* b = c.input(1);
      ORTMLX_REQUIRE(x && b && x->has_shape && b->has_shape && b->shape.size() == 1 &&
                         !x->shape.empty() && b->shape[0] >= 0 && b->shape[0] == x->shape.back(),
                     "bias must be 1-D with X's static last dimension");
    }
    return require_same_types(c);
  };
}

TranslateFn translate_contrib_gelu(bool tanh_approx) {
  return [tanh_approx](TranslationContext& ctx, const NodeDesc& n) {
    const auto s = ctx.stream();
    mx::array x = ctx.input(n, 0);
    if (n.inputs.size() > 1 && !n.inputs[1].empty()) x = mx::add(x, ctx.input(n, 1), s);
    if (cuda_gelu_supports(x.size(), s)) ctx.mark_fast(n, kGeluCudaPath);
    ctx.bind_output(n, 0, gelu(x, tanh_approx, s));
  };
}

}  // namespace

void register_activation_ops(OpRegistry& r) {
  // Versions in effect at opset 13 (LeakyRelu 16 and the 22s only add bfloat16; Celu 28 only
  // adds types).
  r.add("", "LeakyRelu", 6, 1 << 30, claim_act({"alpha"}), translate_act(leaky_relu));
  // From opset 7 (ORT has no kernel for 6); 7-8 differ only in admitting no integer types.
  r.add("", "PRelu", 7, 1 << 30, claim_prelu, translate_prelu);
  r.add("", "Elu", 6, 1 << 30, claim_act({"alpha"}), translate_act(elu));
  r.add("", "Selu", 6, 1 << 30, claim_act({"alpha", "gamma"}), translate_act(selu));
  // ORT's CPU EP runs Celu in float32 only (nothing to match float16 against).
  r.add("", "Celu", 12, 1 << 30, claim_act({"alpha"}, false), translate_act(celu));
  r.add("", "HardSigmoid", 6, 1 << 30, claim_act({"alpha", "beta"}), translate_act(hard_sigmoid));
  r.add("", "HardSwish", 14, 1 << 30, claim_act({}), translate_act(hard_swish));
  r.add("", "Softplus", 1, 1 << 30, claim_act({}), translate_act(softplus_node));
  r.add("", "Softsign", 1, 1 << 30, claim_act({}), translate_act(softsign));
  r.add("", "Mish", 18, 1 << 30, claim_act({}), translate_act(mish));
  r.add("", "ThresholdedRelu", 10, 1 << 30, claim_act({"alpha"}), translate_act(thresholded_relu));
  r.add("", "Swish", 24, 1 << 30, claim_act({"alpha"}), translate_act(swish));
  r.add("", "Shrink", 9, 1 << 30, claim_shrink, translate_act(shrink));

  // com.microsoft contrib ops (opset 1), float32 (ORT's CPU kernels are float32 only).
  r.add("com.microsoft", "Gelu", 1, 1 << 30, claim_contrib_gelu(BiasUse::kNone),
        translate_contrib_gelu(false));
  r.add("com.microsoft", "BiasGelu", 1, 1 << 30, claim_contrib_gelu(BiasUse::kRequired),
        translate_contrib_gelu(false));
  r.add("com.microsoft", "FastGelu", 1, 1 << 30, claim_contrib_gelu(BiasUse::kOptional),
        translate_contrib_gelu(true));
  r.add("com.microsoft", "QuickGelu", 1, 1 << 30, claim_act({"alpha"}, false),
        translate_act(quick_gelu));
}

}  // namespace ortmlx
