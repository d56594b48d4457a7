#include "ortmlx/plugin/ep.h"

#include <iostream>
#include <limits>
#include <optional>
#include <vector>

#include "ortmlx/engine/executor.h"
#include "ortmlx/engine/plan.h"
#include "ortmlx/graph/partitioner.h"
#include "ortmlx/plugin/compute.h"
#include "ortmlx/plugin/factory.h"
#include "ortmlx/plugin/graph_reader.h"
#include "ortmlx/registry/registry.h"

namespace ortmlx::plugin {

namespace {

// Constants up to this size are copied at GetCapability so that claim predicates can read
// shape/axes/etc. inputs; bigger ones (weights) are only copied at Compile.
constexpr size_t kClaimConstantBytes = 64 * 1024;
constexpr size_t kMaxRefusalNames = 16;

std::optional<std::string> session_config(const OrtSessionOptions* so, const std::string& key) {
  if (so == nullptr) return std::nullopt;
  int has = 0;
  ORTMLX_CHECK(g_ort->HasSessionConfigEntry(so, key.c_str(), &has));
  if (!has) return std::nullopt;
  size_t size = 0;
  ORTMLX_CHECK(g_ort->GetSessionConfigEntry(so, key.c_str(), nullptr, &size));
  std::string value(size, '\0');
  ORTMLX_CHECK(g_ort->GetSessionConfigEntry(so, key.c_str(), value.data(), &size));
  while (!value.empty() && value.back() == '\0') value.pop_back();
  return value;
}

std::vector<std::string> value_names(const std::vector<const OrtValueInfo*>& infos) {
  std::vector<std::string> names;
  for (const auto* vi : infos) names.push_back(value_name(vi));
  return names;
}

}  // namespace

MlxEp::MlxEp(MlxEpFactory& factory, const OrtSessionOptions* session_options,
             const OrtLogger* logger)
    : OrtEp{}, factory_(factory), logger_(logger), report_(std::make_unique<SessionReport>()) {
  ort_version_supported = ORT_API_VERSION;
  GetName = GetNameImpl;
  GetCapability = GetCapabilityImpl;
  Compile = CompileImpl;
  ReleaseNodeComputeInfos = ReleaseNodeComputeInfosImpl;
  IsConcurrentRunSupported = IsConcurrentRunSupportedImpl;
  options_ = EpOptions::resolve([&](const std::string& key) {
    return session_config(session_options, std::string("ep.mlxexecutionprovider.") + key);
  });
}

MlxEp::~MlxEp() {
  try {
    flush_report();
    if (options_.verbose) std::cerr << report_->summary_text() << std::flush;
  } catch (...) {
    // never throw from a destructor; diagnostics are best effort at teardown
  }
}

void MlxEp::flush_report() const {
  if (!options_.report_path.empty()) report_->write_json(options_.report_path);
}

const char* MlxEp::GetNameImpl(const OrtEp*) noexcept { return kEpName; }

OrtStatus* MlxEp::GetCapabilityImpl(OrtEp* self, const OrtGraph* graph,
                                    OrtEpGraphSupportInfo* info) noexcept {
  return guard("GetCapability", [&] { static_cast<MlxEp*>(self)->get_capability(graph, info); });
}

void MlxEp::get_capability(const OrtGraph* graph, OrtEpGraphSupportInfo* info) {
  ReadGraph read = read_graph(graph, kClaimConstantBytes);
  const GraphView& view = read.view;
  const OpRegistry& registry = OpRegistry::global();

  ClaimSummary summary;
  summary.total_nodes = view.nodes.size();
  std::vector<bool> claimed(view.nodes.size(), false);
  for (const NodeView& node : view.nodes) {
    ClaimResult r = registry.claim(view, node);
    if (r.ok) {
      claimed[node.index] = true;
      summary.claimed_nodes++;
      summary.claimed.push_back(node.name);
      continue;
    }
    Refusal& ref = summary.refused[node.qualified_op()];
    if (ref.count++ == 0) ref.first_reason = r.reason;
    if (ref.nodes.size() < kMaxRefusalNames) ref.nodes.push_back(node.name);
  }

  const auto clusters = partition_convex(view, claimed, read.implicit_inputs);
  summary.clusters = clusters.size();
  OrtNodeFusionOptions fusion{};
  fusion.ort_version_supported = ORT_API_VERSION;
  fusion.drop_constant_initializers = true;  // constants are copied into MLX at Compile
  for (const auto& cluster : clusters) {
    std::vector<const OrtNode*> nodes;
    for (size_t idx : cluster) nodes.push_back(read.ort_nodes[idx]);
    ORTMLX_CHECK(
        g_ep_api->EpGraphSupportInfo_AddNodesToFuse(info, nodes.data(), nodes.size(), &fusion));
  }

  const char* graph_name = nullptr;
  ORTMLX_CHECK(g_ort->Graph_GetName(graph, &graph_name));
  std::string key = graph_name && *graph_name ? graph_name : "main";
  const OrtNode* parent = nullptr;
  ORTMLX_CHECK(g_ort->Graph_GetParentNode(graph, &parent));
  if (parent) {
    const char* pname = nullptr;
    ORTMLX_CHECK(g_ort->Node_GetName(parent, &pname));
    key = std::string(pname ? pname : "") + "/" + key;
  }
  report_->record_claim(key, std::move(summary));
  if (options_.claim_debug) std::cerr << report_->claim_debug_text() << std::flush;
  flush_report();
}

OrtStatus* MlxEp::CompileImpl(OrtEp* self, const OrtGraph** graphs, const OrtNode** fused_nodes,
                              size_t count, OrtNodeComputeInfo** node_compute_infos,
                              OrtNode** ep_context_nodes) noexcept {
  for (size_t i = 0; i < count; ++i) node_compute_infos[i] = nullptr;
  OrtStatus* st = guard("Compile", [&] {
    static_cast<MlxEp*>(self)->compile(graphs, fused_nodes, count, node_compute_infos);
  });
  if (st) {
    for (size_t i = 0; i < count; ++i) {
      delete static_cast<MlxComputeInfo*>(node_compute_infos[i]);
      node_compute_infos[i] = nullptr;
    }
  }
  (void)ep_context_nodes;  // EPContext models are not produced
  return st;
}

void MlxEp::compile(const OrtGraph** graphs, const OrtNode** fused_nodes, size_t count,
                    OrtNodeComputeInfo** node_compute_infos) {
  for (size_t i = 0; i < count; ++i) {
    ReadGraph read = read_graph(graphs[i], std::numeric_limits<size_t>::max());
    const char* fused_name = nullptr;
    ORTMLX_CHECK(g_ort->Node_GetName(fused_nodes[i], &fused_name));

    size_t n_in = 0, n_out = 0;
    ORTMLX_CHECK(g_ort->Node_GetNumInputs(fused_nodes[i], &n_in));
    ORTMLX_CHECK(g_ort->Node_GetNumOutputs(fused_nodes[i], &n_out));
    std::vector<const OrtValueInfo*> ins(n_in), outs(n_out);
    if (n_in) ORTMLX_CHECK(g_ort->Node_GetInputs(fused_nodes[i], ins.data(), n_in));
    if (n_out) ORTMLX_CHECK(g_ort->Node_GetOutputs(fused_nodes[i], outs.data(), n_out));
    std::vector<std::string> all_inputs = value_names(ins);
    // With drop_constant_initializers, ORT does not feed constants at Compute.
    std::vector<std::string> live_inputs;
    for (const auto& name : all_inputs)
      if (!read.view.is_constant(name)) live_inputs.push_back(name);

    std::shared_ptr<Plan> plan;
    {
      std::lock_guard<std::mutex> lock(mlx_mutex());
      plan = build_plan(read.view, fused_name ? fused_name : "", live_inputs, value_names(outs));
    }
    plan->options = options_;
    std::vector<std::string> names, ops;
    for (const auto& n : plan->nodes) {
      names.push_back(n.name);
      ops.push_back(n.qualified_op());
    }
    report_->record_fused(plan->name, std::move(names), std::move(ops));
    node_compute_infos[i] = new MlxComputeInfo(*this, std::move(plan), std::move(all_inputs));
  }
  flush_report();
}

void MlxEp::ReleaseNodeComputeInfosImpl(OrtEp*, OrtNodeComputeInfo** infos,
                                        size_t count) noexcept {
  for (size_t i = 0; i < count; ++i) delete static_cast<MlxComputeInfo*>(infos[i]);
}

OrtStatus* MlxEp::IsConcurrentRunSupportedImpl(OrtEp*, bool* supported) noexcept {
  // MLX graphs are built and evaluated under one process-wide lock; concurrent Run calls on one
  // session would only queue on it, so ORT serialises them for us.
  *supported = false;
  return nullptr;
}

}  // namespace ortmlx::plugin
