// Internal to the pattern pass (ops/patterns): the plan index the matchers read and the match
// they return, shared by patterns.cpp and the matchers that live in files of their own.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ortmlx/engine/plan.h"
#include "ortmlx/engine/translation_context.h"

namespace ortmlx::ops::patterns::detail {

// A value's producer and consumers, and which nodes earlier matches took.
class PlanIndex {
 public:
  explicit PlanIndex(const Plan& plan) : plan_(plan), taken_(plan.nodes.size(), false) {
    for (size_t i = 0; i < plan.nodes.size(); ++i) {
      for (const auto& out : plan.nodes[i].outputs)
        if (!out.empty()) producer_[out] = i;
      for (const auto& in : plan.nodes[i].inputs)
        if (!in.empty()) consumers_[in].insert(i);
    }
    for (const auto& o : plan.output_names) outputs_.insert(o);
  }

  const NodeDesc& node(size_t i) const { return plan_.nodes[i]; }

  // The default-domain `op` node producing `value` (its first output), not taken by a match.
  std::optional<size_t> producer(const std::string& value, const char* op) const {
    auto it = producer_.find(value);
    if (it == producer_.end() || !is(it->second, op)) return std::nullopt;
    if (node(it->second).outputs.empty() || node(it->second).outputs[0] != value)
      return std::nullopt;
    return it->second;
  }

  // The only node reading `value`, when it is a default-domain `op` and `value` is no fused
  // output.
  std::optional<size_t> sole_consumer(const std::string& value, const char* op) const {
    if (outputs_.count(value)) return std::nullopt;
    auto it = consumers_.find(value);
    if (it == consumers_.end() || it->second.size() != 1) return std::nullopt;
    const size_t c = *it->second.begin();
    if (!is(c, op)) return std::nullopt;
    return c;
  }

  // True when `value` is read only by nodes of `chain` and is no fused output.
  bool internal(const std::string& value, const std::set<size_t>& chain) const {
    if (outputs_.count(value)) return false;
    auto it = consumers_.find(value);
    if (it == consumers_.end()) return true;
    for (size_t c : it->second)
      if (!chain.count(c)) return false;
    return true;
  }

  // Values of a constant initializer converted to double (float and integer types).
  std::optional<std::vector<double>> constant(const std::string& value) const {
    auto it = plan_.constant_host.find(value);
    if (it == plan_.constant_host.end() || !it->second) return std::nullopt;
    return it->second->as_double();
  }
  std::optional<double> scalar(const std::string& value) const {
    auto v = constant(value);
    if (!v || v->size() != 1) return std::nullopt;
    return (*v)[0];
  }
  // A float32 constant of rank 0 or 1 (a norm's scale or shift, broadcast on the last axis).
  bool vector_constant(const std::string& value) const {
    auto it = plan_.constant_host.find(value);
    return it != plan_.constant_host.end() && it->second && it->second->dtype == ElemType::kFloat &&
           it->second->shape.size() <= 1;
  }

  // The nodes reading `value` (ascending).
  std::set<size_t> readers(const std::string& value) const {
    auto it = consumers_.find(value);
    return it == consumers_.end() ? std::set<size_t>{} : it->second;
  }
  const ConstTensor* constant_tensor(const std::string& value) const {
    auto it = plan_.constant_host.find(value);
    return it == plan_.constant_host.end() ? nullptr : it->second.get();
  }

  void take(const std::set<size_t>& nodes) {
    for (size_t i : nodes) taken_[i] = true;
  }
  bool taken(size_t i) const { return taken_[i]; }

  // An untaken default-domain `op` node.
  bool is(size_t i, const char* op) const {
    const NodeDesc& n = node(i);
    return !taken_[i] && n.domain.empty() && n.op_type == op;
  }

 private:
  const Plan& plan_;
  std::map<std::string, size_t> producer_;
  std::map<std::string, std::set<size_t>> consumers_;
  std::set<std::string> outputs_;
  std::vector<bool> taken_;
};

struct Match {
  std::string pattern;
  std::set<size_t> nodes;
  size_t last = 0;  // the node whose first output is the chain's result
  std::vector<std::string> inputs;
  std::map<std::string, AttrValue> attrs;
  // Patterns of several results (shared_input_matmul): the pattern node's outputs, one per
  // matched node, in place of the last node's first output, and the position of the pattern node
  // (its inputs are produced before `at`, every reader of its outputs comes after it).
  std::vector<std::string> outputs;
  std::optional<size_t> at;
};

// Two or more MatMuls reading the same float32 A with constant 2-D float32 weights of one K:
// anchored at the earliest of them (shared_input_matmul.cpp). Applies where MatMul runs on MLX's
// own matmul (GPU backends; MLX CPU with the internal switch ORTMLX_INTERNAL_CPU_MATMUL=mlx).
std::optional<Match> match_shared_input_matmul(const PlanIndex& ix, size_t i);
// Its translator: one product with the concatenated weight, the outputs slices of the last axis;
// false (the MatMuls run as they are) when A does not fit the weight.
bool shared_input_matmul_chain(TranslationContext& ctx, const NodeDesc& n);

}  // namespace ortmlx::ops::patterns::detail
