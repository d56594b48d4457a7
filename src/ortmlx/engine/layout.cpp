#include "ortmlx/engine/layout.h"

#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <mlx/ops.h>
#include <mlx/primitives.h>

namespace ortmlx {

namespace mx = mlx::core;

namespace {

const std::vector<int> kToFirst{0, 3, 1, 2};
const std::vector<int> kToLast{0, 2, 3, 1};

// Elementwise ops of the default domain whose translators broadcast their inputs as ONNX does
// and depend on nothing but values (no axis attributes, no shapes from inputs).
bool elementwise(const NodeDesc& n) {
  static const std::set<std::string> ops = {
      "Add",       "Sub",     "Mul",        "Div",     "Pow",      "Max",         "Min",
      "Sum",       "Mean",    "Relu",       "Sigmoid", "Tanh",     "HardSigmoid", "HardSwish",
      "LeakyRelu", "Elu",     "Selu",       "Clip",    "Neg",      "Abs",         "Exp",
      "Log",       "Sqrt",    "Reciprocal", "Erf",     "Softplus", "Mish",        "Gelu",
      "PRelu",     "Floor",   "Ceil",       "Round",   "Sign",     "Where",       "Equal",
      "Less",      "Greater", "Not",        "And",     "Or",       "Identity"};
  return n.domain.empty() && ops.count(n.op_type) != 0;
}

// GlobalAveragePool of a float32 NCHW view of NHWC data: the mean over the NHWC array's spatial
// axes (1, 2), bound as the NCHW view of its (N, 1, 1, C) result, so the pooled data is never
// copied to NCHW first. The same elements are averaged; only the order of the sums may differ.
bool global_average_pool_channels_last(TranslationContext& ctx, const NodeDesc& node) {
  if (node.inputs.empty() || node.inputs[0].empty() || node.outputs.size() != 1) return false;
  const auto src = channels_last_source(ctx.resolve(node.inputs[0]));
  if (!src || src->dtype() != mx::float32 || src->size() == 0) return false;
  const auto s = ctx.stream();
  ctx.bind(node.outputs[0], channels_first_view(mx::mean(*src, {1, 2}, true, s), s));
  ctx.mark_fast(node, "GlobalAveragePool channels-last (no NCHW copy)");
  return true;
}

// Concat of rank-4 inputs, at least one an NCHW view of NHWC data: the NHWC arrays (the other
// inputs as NHWC views) concatenated on the matching NHWC axis, bound as an NCHW view. A copy
// either way; this one writes NHWC, which the next convolution reads without another copy.
bool concat_channels_last(TranslationContext& ctx, const NodeDesc& node) {
  if (node.inputs.empty() || node.outputs.size() != 1) return false;
  int64_t axis = node.attr_int("axis", 1);
  if (axis < 0) axis += 4;
  if (axis < 0 || axis > 3) return false;
  static const int kNhwcAxis[4] = {0, 3, 1, 2};
  const auto s = ctx.stream();
  std::vector<mx::array> parts;
  bool any = false;
  for (const auto& name : node.inputs) {
    if (name.empty()) return false;
    const mx::array a = ctx.resolve(name);
    if (a.ndim() != 4 || (!parts.empty() && a.dtype() != parts.front().dtype())) return false;
    if (auto src = channels_last_source(a)) {
      parts.push_back(*src);
      any = true;
    } else {
      parts.push_back(mx::transpose(a, kToLast, s));
    }
  }
  if (!any) return false;
  for (size_t d = 0; d < 4; ++d) {
    if (static_cast<int64_t>(d) == kNhwcAxis[axis]) continue;
    for (const auto& p : parts)
      if (p.shape(static_cast<int>(d)) != parts.front().shape(static_cast<int>(d))) return false;
  }
  ctx.bind(node.outputs[0], channels_first_view(mx::concatenate(parts, kNhwcAxis[axis], s), s));
  ctx.mark_fast(node, "Concat channels-last (no NCHW copy)");
  return true;
}

}  // namespace

std::optional<mx::array> channels_last_source(const mx::array& a) {
  if (a.ndim() != 4 || !a.has_primitive()) return std::nullopt;
  // By name: libmlx exports no RTTI for its primitives (no dynamic_cast); state() is inline.
  if (std::strcmp(a.primitive().name(), "Transpose") != 0 || a.inputs().size() != 1)
    return std::nullopt;
  if (static_cast<const mx::Transpose&>(a.primitive()).state() != kToFirst) return std::nullopt;
  return a.inputs()[0];
}

mx::array channels_first_view(const mx::array& nhwc, mx::StreamOrDevice s) {
  return mx::transpose(nhwc, kToFirst, s);
}

bool translate_channels_last(TranslationContext& ctx, const NodeDesc& node) {
  if (node.domain.empty() && node.op_type == "GlobalAveragePool")
    return global_average_pool_channels_last(ctx, node);
  if (node.domain.empty() && node.op_type == "Concat") return concat_channels_last(ctx, node);
  if (!elementwise(node) || node.outputs.size() != 1 || node.outputs[0].empty()) return false;
  std::vector<std::pair<std::string, mx::array>> inputs;
  bool any = false;
  std::set<std::string> seen;
  for (const auto& name : node.inputs) {
    if (name.empty() || !seen.insert(name).second) continue;
    mx::array a = ctx.resolve(name);
    if (a.ndim() > 4) return false;
    if (auto src = channels_last_source(a)) {
      inputs.emplace_back(name, *src);
      any = true;
      continue;
    }
    inputs.emplace_back(name, a);
  }
  if (!any) return false;
  const auto s = ctx.stream();
  Rebinding rebinding(ctx);
  for (auto& [name, a] : inputs) {
    if (channels_last_source(ctx.resolve(name))) {
      rebinding.bind(name, a);
      continue;
    }
    // Right-aligned to rank 4, then the same permutation (a view): broadcasting is unchanged.
    // Scalars and size-1 values need neither.
    if (a.size() == 1 && a.ndim() <= 1) continue;
    mx::Shape shape(4 - a.ndim(), 1);
    shape.insert(shape.end(), a.shape().begin(), a.shape().end());
    rebinding.bind(name, mx::transpose(mx::reshape(a, shape, s), kToLast, s));
  }
  node.entry->translate(ctx, node);
  const mx::array out = ctx.resolve(node.outputs[0]);
  if (out.ndim() != 4)
    throw std::runtime_error("internal: channels-last elementwise output of rank " +
                             std::to_string(out.ndim()));
  ctx.bind(node.outputs[0], channels_first_view(out, s));
  ctx.mark_fast(node, "channels-last elementwise (no NCHW copy)");
  return true;
}

}  // namespace ortmlx
