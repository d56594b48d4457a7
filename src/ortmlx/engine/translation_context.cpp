#include "ortmlx/engine/translation_context.h"

#include <stdexcept>

namespace ortmlx {

namespace mx = mlx::core;

TranslationContext::TranslationContext(const Plan& plan, mx::StreamOrDevice stream)
    : plan_(plan), stream_(stream) {}

mx::array TranslationContext::resolve(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  auto c = plan_.constant_arrays.find(name);
  if (c != plan_.constant_arrays.end()) return c->second;
  throw std::runtime_error("value '" + name + "' is not available in fused node " + plan_.name);
}

mx::array TranslationContext::input(const NodeDesc& node, size_t i) const {
  if (i >= node.inputs.size() || node.inputs[i].empty())
    throw std::runtime_error("input " + std::to_string(i) + " is absent");
  return resolve(node.inputs[i]);
}

bool TranslationContext::has(const std::string& name) const {
  return values_.count(name) || plan_.constant_arrays.count(name);
}

void TranslationContext::bind(const std::string& name, mx::array value) {
  values_.insert_or_assign(name, std::move(value));
}

void TranslationContext::bind_output(const NodeDesc& node, size_t i, mx::array value) {
  if (i < node.outputs.size() && !node.outputs[i].empty()) bind(node.outputs[i], std::move(value));
}

const ConstTensor* TranslationContext::constant(const std::string& name) const {
  auto it = plan_.constant_host.find(name);
  return it == plan_.constant_host.end() ? nullptr : it->second.get();
}

const ConstTensor* TranslationContext::constant_input(const NodeDesc& node, size_t i) const {
  return i < node.inputs.size() && !node.inputs[i].empty() ? constant(node.inputs[i]) : nullptr;
}

void TranslationContext::mark_fast(const NodeDesc& node, std::string label) {
  marks_.push_back({node.name, std::move(label), true});
}

void TranslationContext::mark_composed(const NodeDesc& node, std::string reason) {
  marks_.push_back({node.name, std::move(reason), false});
}

void TranslationContext::require(const NodeDesc& node, const mx::array& ok, std::string message) {
  // An empty check holds vacuously, and is left out: MLX's CUDA backend traps (SIGFPE) reducing
  // a 0-element array. Shapes are concrete here (plans are shape-keyed).
  if (ok.size() == 0) return;
  // Reduced inside the graph: the host reads one bool per check, whatever the shape of `ok`.
  check_values_.push_back(mx::all(ok, stream_));
  checks_.push_back({node.label(), std::move(message)});
}

mx::array TranslationContext::reshape(const mx::array& a, const mx::Shape& shape) const {
  return mx::reshape(a, shape, stream_);
}

mx::array TranslationContext::transpose(const mx::array& a, const std::vector<int>& axes) const {
  return mx::transpose(a, axes, stream_);
}

mx::array TranslationContext::contiguous(const mx::array& a) const {
  return mx::contiguous(a, false, stream_);
}

mx::array TranslationContext::zeros(const mx::Shape& shape, mx::Dtype dtype) const {
  return mx::zeros(shape, dtype, stream_);
}

int normalize_axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    throw std::runtime_error("axis " + std::to_string(axis) + " is out of range for rank " +
                             std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace ortmlx
