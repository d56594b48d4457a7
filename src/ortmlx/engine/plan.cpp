#include "ortmlx/engine/plan.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include <mlx/allocator.h>
#include <mlx/ops.h>

#include "ortmlx/engine/dtype.h"
#include "ortmlx/ops/patterns/patterns.h"

namespace ortmlx {

namespace mx = mlx::core;

std::string NodeDesc::label() const {
  return "node '" + name + "' (" + qualified_op() + ")";
}

namespace {

// Nodes of `plan` and of its nested bodies; SIZE_MAX when one of them is a Loop or Scan.
size_t nested_node_count(const Plan& plan) {
  size_t n = 0;
  for (const auto& node : plan.nodes) {
    if (node.op_type == "Loop" || node.op_type == "Scan") return SIZE_MAX;
    ++n;
    for (const auto& [attr, body] : node.bodies) {
      if (!body) continue;
      const size_t inner = nested_node_count(*body);
      if (inner == SIZE_MAX) return SIZE_MAX;
      n += inner;
    }
  }
  return n;
}

}  // namespace

bool selectable_if(const NodeDesc& node) {
  // Read at each call (segment building and traces, not per run), so that one process can hold
  // sessions translated with and without it (bench/gpu_peer.py --ab).
  const char* v = std::getenv("ONNXRUNTIME_EP_MLX_IF_SELECT");
  if ((v != nullptr && !parse_flag(v)) || node.op_type != "If" || !node.domain.empty())
    return false;
  size_t total = 0;
  for (const char* attr : {"then_branch", "else_branch"}) {
    auto it = node.bodies.find(attr);
    if (it == node.bodies.end() || !it->second) return false;
    const size_t n = nested_node_count(*it->second);
    if (n == SIZE_MAX) return false;
    total += n;
  }
  return total <= kMaxSelectedIfNodes;
}

const Plan& NodeDesc::body(const std::string& attr) const {
  auto it = bodies.find(attr);
  if (it == bodies.end() || !it->second)
    throw std::runtime_error("subgraph attribute '" + attr + "' is missing");
  return *it->second;
}

mx::array constant_to_array(const ConstTensor& t) {
  auto dtype = to_mlx_dtype(t.dtype);
  if (!dtype)
    throw std::runtime_error(std::string("unsupported constant type ") + elem_type_name(t.dtype));
  mx::Shape shape(t.shape.begin(), t.shape.end());
  if (t.bytes.empty()) return mx::zeros(shape, *dtype);
  mx::array a(mx::allocator::malloc(t.bytes.size()), shape, *dtype);
  std::memcpy(a.data<uint8_t>(), t.bytes.data(), t.bytes.size());
  return a;
}

std::shared_ptr<Plan> build_plan(const GraphView& graph, std::string fused_name,
                                 std::vector<std::string> input_names,
                                 std::vector<std::string> output_names,
                                 const OpRegistry& registry) {
  auto plan = std::make_shared<Plan>();
  plan->name = std::move(fused_name);
  plan->input_names = std::move(input_names);
  plan->output_names = std::move(output_names);
  for (const auto& out : plan->output_names) {
    const TensorInfo* info = graph.info(out);
    plan->output_infos.push_back(info ? *info : TensorInfo{});
    // A body may return a constant directly (ORT turns a branch's Constant node into an
    // initializer of the branch).
    auto c = graph.constants.find(out);
    if (c != graph.constants.end() && !plan->constant_host.count(out)) {
      plan->constant_host[out] = c->second;
      plan->constant_arrays.emplace(out, constant_to_array(*c->second));
    }
  }
  for (const auto& node : graph.nodes) {
    NodeDesc d;
    static_cast<NodeView&>(d) = node;
    std::string why;
    d.entry = registry.find(node.domain, node.op_type, node.since_version, &why);
    if (!d.entry) throw std::runtime_error(d.label() + ": " + why);
    for (const auto& in : node.inputs) {
      const TensorInfo* info = in.empty() ? nullptr : graph.info(in);
      d.input_infos.push_back(info ? *info : TensorInfo{});
      if (!in.empty() && graph.is_constant(in) && !plan->constant_host.count(in)) {
        auto it = graph.constants.find(in);
        if (it == graph.constants.end())
          throw std::runtime_error(d.label() + ": constant '" + in + "' has no data");
        plan->constant_host[in] = it->second;
        plan->constant_arrays.emplace(in, constant_to_array(*it->second));
      }
    }
    for (const auto& out : node.outputs) {
      const TensorInfo* info = out.empty() ? nullptr : graph.info(out);
      d.output_infos.push_back(info ? *info : TensorInfo{});
    }
    for (const auto& [attr, sub] : node.subgraphs) {
      auto body = build_body_plan(*sub, d.name + "/" + attr, registry);
      plan->shape_keyed = plan->shape_keyed || body->shape_keyed;
      d.bodies[attr] = std::move(body);
    }
    plan->shape_keyed = plan->shape_keyed || d.entry->shape_keyed;
    plan->nodes.push_back(std::move(d));
  }
  return plan;
}

std::map<std::string, int64_t> prepare_plan(Plan& plan) {
  std::map<std::string, int64_t> counts;
  if (!ops::patterns::chains_enabled(plan.options)) return counts;
  for (const auto& [pattern, n] : ops::patterns::apply(plan))
    counts["pattern." + pattern] = static_cast<int64_t>(n);
  return counts;
}

std::shared_ptr<Plan> build_body_plan(const GraphView& body, std::string name,
                                      const OpRegistry& registry) {
  return build_plan(body, std::move(name), body.graph_inputs, body.graph_outputs, registry);
}

}  // namespace ortmlx
