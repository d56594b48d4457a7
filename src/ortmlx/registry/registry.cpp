#include "ortmlx/registry/registry.h"

#include "ortmlx/ops/ops.h"

namespace ortmlx {

namespace {
bool same_domain(const std::string& a, const std::string& b) {
  auto norm = [](const std::string& d) { return d == "ai.onnx" ? std::string() : d; };
  return norm(a) == norm(b);
}
}  // namespace

const TensorInfo* ClaimContext::input(size_t i) const {
  return has_input(i) ? graph_.info(node_.inputs[i]) : nullptr;
}
const TensorInfo* ClaimContext::output(size_t i) const {
  return i < node_.outputs.size() && !node_.outputs[i].empty() ? graph_.info(node_.outputs[i])
                                                               : nullptr;
}
ElemType ClaimContext::input_type(size_t i) const {
  const TensorInfo* t = input(i);
  return t ? t->dtype : ElemType::kUndefined;
}
int64_t ClaimContext::input_rank(size_t i) const {
  const TensorInfo* t = input(i);
  return t ? t->rank() : -1;
}
ElemType ClaimContext::output_type(size_t i) const {
  const TensorInfo* t = output(i);
  return t ? t->dtype : ElemType::kUndefined;
}
bool ClaimContext::input_is_constant(size_t i) const {
  return has_input(i) && graph_.is_constant(node_.inputs[i]);
}
const ConstTensor* ClaimContext::constant_input(size_t i) const {
  return has_input(i) ? graph_.constant(node_.inputs[i]) : nullptr;
}

void OpRegistry::add(OpEntry entry) {
  entries_.push_back(std::move(entry));
}

void OpRegistry::add(std::string domain, std::string op_type, int min_opset, int max_opset,
                     ClaimFn claim, TranslateFn translate) {
  OpEntry e;
  e.domain = std::move(domain);
  e.op_type = std::move(op_type);
  e.min_opset = min_opset;
  e.max_opset = max_opset;
  e.claim = std::move(claim);
  e.translate = std::move(translate);
  add(std::move(e));
}

const OpEntry* OpRegistry::find(const std::string& domain, const std::string& op_type,
                                int since_version, std::string* why) const {
  bool name_known = false;
  for (const auto& e : entries_) {
    if (!same_domain(e.domain, domain)) continue;
    const bool match = e.by_prefix ? op_type.rfind(e.op_type, 0) == 0 : op_type == e.op_type;
    if (!match) continue;
    name_known = true;
    if (since_version >= e.min_opset && since_version <= e.max_opset) return &e;
  }
  if (why) {
    const std::string q = domain.empty() ? op_type : domain + "." + op_type;
    *why = name_known ? q + " opset " + std::to_string(since_version) + " is not implemented"
                      : "no MLX implementation of " + q;
  }
  return nullptr;
}

ClaimResult OpRegistry::claim(const GraphView& graph, const NodeView& node) const {
  // Subgraphs are read for the control-flow ops, whose claims check every body node.
  if (node.has_subgraphs && node.subgraphs.empty())
    return ClaimResult::no("nodes with subgraphs are not claimed");
  std::string why;
  const OpEntry* e = find(node.domain, node.op_type, node.since_version, &why);
  if (!e) return ClaimResult::no(why);
  ClaimContext ctx(graph, node);
  try {
    return e->claim(ctx);
  } catch (const std::exception& ex) {
    return ClaimResult::no(std::string("claim check failed: ") + ex.what());
  }
}

const OpRegistry& OpRegistry::global() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_all_ops(r);
    return r;
  }();
  return registry;
}

}  // namespace ortmlx
