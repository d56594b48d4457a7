#include "ortmlx/engine/translation_context.h"

#include <stdexcept>

#include <mlx/transforms.h>

#include "ortmlx/engine/segments.h"

namespace ortmlx {

namespace mx = mlx::core;

TranslationContext::TranslationContext(const Plan& plan, mx::StreamOrDevice stream)
    : plan_(plan), stream_(stream) {}

TranslationContext::TranslationContext(const Plan& body, TranslationContext& enclosing)
    : plan_(body), stream_(enclosing.stream_), enclosing_(&enclosing), root_(enclosing.root_) {}

TranslationContext::TranslationContext(const Plan& plan, const TranslationContext& eager, Sealed)
    : plan_(plan), stream_(eager.stream_), enclosing_(&eager), sealed_(true), compiling_(true) {}

mx::array TranslationContext::resolve(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  auto c = plan_.constant_arrays.find(name);
  if (c != plan_.constant_arrays.end()) return c->second;
  if (enclosing_) return sealed_ ? enclosing_->resolve_constant(name) : enclosing_->resolve(name);
  throw std::runtime_error("value '" + name + "' is not available in fused node " + plan_.name);
}

mx::array TranslationContext::resolve_constant(const std::string& name) const {
  // A value bound in a scope shadows the constants of the scopes around it.
  if (values_.count(name))
    throw std::runtime_error("value '" + name +
                             "' is a runtime value that the compiled segment does not take");
  auto c = plan_.constant_arrays.find(name);
  if (c != plan_.constant_arrays.end()) return c->second;
  if (enclosing_) return enclosing_->resolve_constant(name);
  throw std::runtime_error("value '" + name + "' is not available in fused node " + plan_.name);
}

bool TranslationContext::has_constant(const std::string& name) const {
  if (values_.count(name)) return false;
  return plan_.constant_arrays.count(name) || (enclosing_ && enclosing_->has_constant(name));
}

std::optional<mx::array> TranslationContext::runtime_value(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  if (plan_.constant_arrays.count(name)) return std::nullopt;
  return enclosing_ && !sealed_ ? enclosing_->runtime_value(name) : std::nullopt;
}

mx::array TranslationContext::input(const NodeDesc& node, size_t i) const {
  if (i >= node.inputs.size() || node.inputs[i].empty())
    throw std::runtime_error("input " + std::to_string(i) + " is absent");
  return resolve(node.inputs[i]);
}

bool TranslationContext::has(const std::string& name) const {
  return values_.count(name) || plan_.constant_arrays.count(name) ||
         (enclosing_ && (sealed_ ? enclosing_->has_constant(name) : enclosing_->has(name)));
}

void TranslationContext::bind(const std::string& name, mx::array value) {
  values_.insert_or_assign(name, std::move(value));
}

std::optional<mx::array> TranslationContext::bound(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

void TranslationContext::unbind(const std::string& name) {
  values_.erase(name);
}

void TranslationContext::bind_output(const NodeDesc& node, size_t i, mx::array value) {
  if (i < node.outputs.size() && !node.outputs[i].empty()) bind(node.outputs[i], std::move(value));
}

mx::array TranslationContext::derived_constant(const std::string& key,
                                               const std::function<mx::array()>& make) const {
  auto it = plan_.derived_constants.find(key);
  if (it != plan_.derived_constants.end()) return it->second;
  mx::array a = make();
  // Built from constants (arrays with data), so it is no tracer and may be evaluated while a
  // compiled function is traced.
  mx::eval(a);
  plan_.derived_constants.insert_or_assign(key, a);
  return a;
}

const ConstTensor* TranslationContext::constant(const std::string& name) const {
  auto it = plan_.constant_host.find(name);
  if (it != plan_.constant_host.end()) return it->second.get();
  // A name bound in this scope shadows an enclosing constant of the same name.
  if (enclosing_ && !values_.count(name)) return enclosing_->constant(name);
  return nullptr;
}

const ConstTensor* TranslationContext::constant_input(const NodeDesc& node, size_t i) const {
  return i < node.inputs.size() && !node.inputs[i].empty() ? constant(node.inputs[i]) : nullptr;
}

void TranslationContext::mark_fast(const NodeDesc& node, std::string label) {
  root_->marks_.push_back({node.name, std::move(label), true});
}

void TranslationContext::add_marks(const std::vector<PathMark>& marks) {
  root_->marks_.insert(root_->marks_.end(), marks.begin(), marks.end());
}

void TranslationContext::add_check(Check check, mx::array ok) {
  root_->check_values_.push_back(std::move(ok));
  root_->checks_.push_back(std::move(check));
}

void TranslationContext::guard_checks(size_t first, const mx::array& taken) {
  auto& values = root_->check_values_;
  if (first >= values.size()) return;
  const mx::array not_taken = mx::logical_not(taken, stream_);
  for (size_t j = first; j < values.size(); ++j)
    values[j] = mx::logical_or(values[j], not_taken, stream_);
}

void TranslationContext::mark_composed(const NodeDesc& node, std::string reason) {
  root_->marks_.push_back({node.name, std::move(reason), false});
}

void TranslationContext::require(const NodeDesc& node, const mx::array& ok, std::string message) {
  // An empty check holds vacuously, and is left out: MLX's CUDA backend traps (SIGFPE) reducing
  // a 0-element array. Shapes are concrete here (plans are shape-keyed).
  if (ok.size() == 0) return;
  // Reduced inside the graph: the host reads one bool per check, whatever the shape of `ok`.
  root_->check_values_.push_back(mx::all(ok, stream_));
  root_->checks_.push_back({node.label(), std::move(message)});
}

void TranslationContext::speculate(const NodeDesc& node, const mx::array& holds,
                                   std::string assumption) {
  const size_t before = root_->checks_.size();
  require(node, holds, std::move(assumption));
  if (root_->checks_.size() > before) root_->checks_.back().speculation = true;
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

std::vector<mx::array> translate_body(TranslationContext& enclosing, const Plan& body,
                                      const std::vector<mx::array>& inputs) {
  if (inputs.size() != body.input_names.size())
    throw std::runtime_error("body " + body.name + " takes " +
                             std::to_string(body.input_names.size()) + " inputs, got " +
                             std::to_string(inputs.size()));
  TranslationContext ctx(body, enclosing);
  for (size_t i = 0; i < inputs.size(); ++i) ctx.bind(body.input_names[i], inputs[i]);
  const SegmentStore::NodeFn translate_node = [](TranslationContext& c, const NodeDesc& node) {
    node.entry->translate(c, node);
  };
  const SegmentStore::NodeFn run_node = [](TranslationContext& c, const NodeDesc& node) {
    try {
      node.entry->translate(c, node);
      for (const auto& out : node.outputs)
        if (!out.empty() && !c.has(out))
          throw std::runtime_error("translator did not produce output '" + out + "'");
    } catch (const NotCompilableYet& e) {
      throw NotCompilableYet(node.label() + ": " + e.what());
    } catch (const NotCompilable& e) {
      throw NotCompilable(node.label() + ": " + e.what());
    } catch (const std::exception& e) {
      throw std::runtime_error(node.label() + ": " + e.what());
    }
  };
  if (SegmentStore* segments = ctx.segments())
    segments->translate(ctx, body, run_node, translate_node);
  else
    for (const auto& node : body.nodes) run_node(ctx, node);
  std::vector<mx::array> outputs;
  outputs.reserve(body.output_names.size());
  for (const auto& name : body.output_names) outputs.push_back(ctx.resolve(name));
  return outputs;
}

int normalize_axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    throw std::runtime_error("axis " + std::to_string(axis) + " is out of range for rank " +
                             std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace ortmlx
