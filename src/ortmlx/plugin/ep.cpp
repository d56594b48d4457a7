#include "ortmlx/plugin/ep.h"

#include <atomic>
#include <iostream>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "ortmlx/engine/device/device_memory.h"
#include "ortmlx/engine/executor.h"
#include "ortmlx/engine/mlx_thread.h"
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

// Every session config entry (the provider options arrive as "ep.mlxexecutionprovider.<key>").
std::vector<std::pair<std::string, std::string>> session_config_entries(
    const OrtSessionOptions* so) {
  std::vector<std::pair<std::string, std::string>> out;
  if (so == nullptr) return out;
  OrtKeyValuePairs* raw = nullptr;
  ORTMLX_CHECK(g_ort->GetSessionOptionsConfigEntries(so, &raw));
  std::unique_ptr<OrtKeyValuePairs, KeyValuePairsDeleter> kvps(raw);
  const char* const* keys = nullptr;
  const char* const* values = nullptr;
  size_t n = 0;
  g_ort->GetKeyValuePairs(kvps.get(), &keys, &values, &n);
  for (size_t i = 0; i < n; ++i)
    out.emplace_back(keys[i] ? keys[i] : "", values[i] ? values[i] : "");
  return out;
}

std::atomic<uint64_t> g_next_session_id{1};

std::vector<std::string> value_names(const std::vector<const OrtValueInfo*>& infos) {
  std::vector<std::string> names;
  for (const auto* vi : infos) names.push_back(value_name(vi));
  return names;
}

// Whether the EP claims a control-flow node whole (the same decision its own graph's
// GetCapability call makes: the registry's claim, which checks every body node, and the CPU
// policy).
bool enclosing_node_claimed(const OrtNode* node, bool cpu_policy) {
  GraphView enclosing;
  std::vector<std::string> implicit;
  enclosing.nodes.push_back(read_node(node, 0, enclosing, kClaimConstantBytes, implicit));
  const NodeView& n = enclosing.nodes.front();
  const OpRegistry& registry = OpRegistry::global();
  if (cpu_policy) {
    const OpEntry* entry = registry.find(n.domain, n.op_type, n.since_version);
    if (entry == nullptr || !entry->cpu_default) return false;
  }
  return registry.claim(enclosing, n).ok;
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
  try {
    options_ = EpOptions::resolve_entries(session_config_entries(session_options));
  } catch (const std::invalid_argument& e) {
    throw OrtError(ORT_INVALID_ARGUMENT, e.what());
  }
  if (options_.tf32 && *options_.tf32 != device::tf32_enabled())
    throw OrtError(ORT_INVALID_ARGUMENT,
                   std::string("provider option ") + kOptionPrefix + "tf32=" +
                       (*options_.tf32 ? "1" : "0") + " differs from this process's mode (" +
                       (device::tf32_enabled() ? "TF32" : "exact fp32") +
                       "): MLX reads its TF32 switch once per process, so set "
                       "ONNXRUNTIME_EP_MLX_TF32 before the EP library is registered");
  if (options_.cuda_graphs && *options_.cuda_graphs != device::cuda_graphs_enabled())
    throw OrtError(ORT_INVALID_ARGUMENT,
                   std::string("provider option ") + kOptionPrefix + "cuda_graphs=" +
                       (*options_.cuda_graphs ? "1" : "0") + " differs from this process's mode (" +
                       (device::cuda_graphs_enabled() ? "on" : "off") +
                       "): MLX reads its CUDA-graph switch once per process, so set "
                       "ONNXRUNTIME_EP_MLX_CUDA_GRAPHS before the EP library is registered");
  report_->set_backend(device::mlx_backend(), factory_.gpu() ? device::gpu_name() : std::string(),
                       factory_.gpu() ? "device" : "host", device::tf32_enabled());
  report_->set_cpu_isa(cpu_isa_name(options_.resolved_cpu_isa()));
  session_id_ = g_next_session_id.fetch_add(1);
  if (!options_.trace_path.empty()) {
    // The trace is written at session end; say now if its folder cannot take it (diagnostics
    // never fail a session, but a trace that silently never appears wastes a user's run).
    if (!TraceSink::writable(options_.trace_path))
      std::cerr << "[ortmlx] warning: the trace path '" << options_.trace_path
                << "' is not writable; no trace will be written" << std::endl;
    trace_ = TraceSink::open(options_.trace_path);
    trace_->instant("mlx.session_start", "ep",
                    TraceArgs().add("session", session_id_).add("trace", options_.trace_path));
  }
}

MlxEp::~MlxEp() {
  try {
    flush_report();
    const bool summary = options_.verbose || trace_;  // the trace implies the summary (reference)
    const std::string text = summary ? report_->summary_text() : std::string();
    if (summary) std::cerr << text << std::flush;
    if (trace_) {
      trace_->instant("mlx.session_summary", "ep",
                      TraceArgs()
                          .add("session", session_id_)
                          .add("summary", text)
                          .add("report", report_->to_json()));
      trace_->write();
    }
  } catch (const std::exception& e) {
    std::cerr << "[ortmlx] warning: " << e.what() << std::endl;
  } catch (...) {
    // never throw from a destructor; diagnostics are best effort at teardown
  }
}

void MlxEp::flush_report() const {
  if (options_.report_path.empty()) return;
  // Diagnostics never fail inference: a report that cannot be written is logged once.
  try {
    report_->write_json(options_.report_path);
  } catch (const std::exception& e) {
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) std::cerr << "[ortmlx] warning: " << e.what() << std::endl;
  }
}

const char* MlxEp::GetNameImpl(const OrtEp*) noexcept {
  return kEpName;
}

OrtStatus* MlxEp::GetCapabilityImpl(OrtEp* self, const OrtGraph* graph,
                                    OrtEpGraphSupportInfo* info) noexcept {
  return guard("GetCapability", [&] { static_cast<MlxEp*>(self)->get_capability(graph, info); });
}

void MlxEp::get_capability(const OrtGraph* graph, OrtEpGraphSupportInfo* info) {
  ReadGraph read = read_graph(graph, kClaimConstantBytes);
  const GraphView& view = read.view;
  const OpRegistry& registry = OpRegistry::global();

  // cpu_claim=auto on MLX's CPU backend: claim only entries measured at least as fast as ORT's
  // CPU EP there (OpEntry::cpu_default), leave the rest to ORT's CPU EP.
  const bool cpu_policy = options_.cpu_claim == EpOptions::CpuClaim::kAuto &&
                          std::string_view(device::mlx_backend()) == "cpu";
  // ORT partitions nested graphs first (bottom up), each in its own call. A body whose enclosing
  // If/Loop/Scan the EP will claim whole is left alone here: fusing its nodes now would hide them
  // from that claim (the body would hold this EP's fused nodes, not ONNX ops).
  const OrtNode* parent = nullptr;
  ORTMLX_CHECK(g_ort->Graph_GetParentNode(graph, &parent));
  if (parent && enclosing_node_claimed(parent, cpu_policy)) return;

  ClaimSummary summary;
  summary.total_nodes = view.nodes.size();
  std::vector<bool> claimed(view.nodes.size(), false);
  for (const NodeView& node : view.nodes) {
    // A later pass shows nodes ORT already assigned: this EP's fused nodes of an earlier pass
    // (kept, not offered) or another EP's. Neither is offered, so neither is refused.
    const char* assigned_ep = nullptr;
    ORTMLX_CHECK(g_ort->Node_GetEpName(read.ort_nodes[node.index], &assigned_ep));
    if (assigned_ep != nullptr && *assigned_ep != '\0') {
      if (std::string_view(assigned_ep) == kEpName)
        summary.kept_fused.push_back(node.name);
      else
        summary.other_ep_nodes++;
      summary.total_nodes--;
      continue;
    }
    ClaimResult r = registry.claim(view, node);
    if (r.ok && cpu_policy) {
      const OpEntry* entry = registry.find(node.domain, node.op_type, node.since_version);
      // A CPU-kernel entry counts as measured fast only with an instruction set that was.
      if (entry && (!entry->cpu_default || (entry->cpu_default_needs_fast_isa &&
                                            !cpu_isa_beats_ort_cpu(options_.resolved_cpu_isa()))))
        r = ClaimResult::no(
            "left to ORT's CPU EP: on MLX's CPU backend the EP claims only what runs at least as "
            "fast as ORT's CPU EP (cpu_claim=auto; cpu_claim=all claims it)");
    }
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
  if (parent) {
    const char* pname = nullptr;
    ORTMLX_CHECK(g_ort->Node_GetName(parent, &pname));
    key = std::string(pname ? pname : "") + "/" + key;
  }
  if (trace_) {
    TraceArgs args;
    args.add("graph", key)
        .add("session", session_id_)
        .add("claimed", summary.claimed_nodes)
        .add("total", summary.total_nodes)
        .add("unclaimed", summary.total_nodes - summary.claimed_nodes)
        .add("fused_subgraphs", summary.clusters);
    for (const auto& [op, r] : summary.refused) {
      std::string names;
      for (const auto& n : r.nodes) names += (names.empty() ? "" : ",") + n;
      args.add("fallback_" + op, "count=" + std::to_string(r.count) + "; reason=" + r.first_reason +
                                     "; nodes=" + names);
    }
    trace_->instant("mlx.getcapability", "ep.claim", args);
    trace_->counter("mlx.claimed_nodes",
                    TraceArgs()
                        .add("claimed", summary.claimed_nodes)
                        .add("unclaimed", summary.total_nodes - summary.claimed_nodes));
  }
  report_->record_claim(key, std::move(summary));
  if (options_.claim_debug) std::cerr << report_->claim_debug_text(key) << std::flush;
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

    // Constants become MLX arrays once, here, on the MLX thread (see engine/mlx_thread.h).
    std::shared_ptr<Plan> plan = MlxThread::get().run([&] {
      return build_plan(read.view, fused_name ? fused_name : "", live_inputs, value_names(outs));
    });
    plan->options = options_;
    std::vector<std::string> names, ops;
    for (const auto& n : plan->nodes) {
      names.push_back(n.name);
      ops.push_back(n.qualified_op());
    }
    report_->record_fused(plan->name, std::move(names), std::move(ops));
    // After the report recorded the ONNX nodes ORT assigned: chains become pattern nodes.
    for (const auto& [counter, n] : prepare_plan(*plan)) report_->count(counter, n);
    node_compute_infos[i] = new MlxComputeInfo(*this, std::move(plan), std::move(all_inputs));
  }
  flush_report();
}

void MlxEp::ReleaseNodeComputeInfosImpl(OrtEp*, OrtNodeComputeInfo** infos, size_t count) noexcept {
  for (size_t i = 0; i < count; ++i) delete static_cast<MlxComputeInfo*>(infos[i]);
}

OrtStatus* MlxEp::IsConcurrentRunSupportedImpl(OrtEp*, bool* supported) noexcept {
  // Compute is safe to call from several threads at once: all MLX work is queued onto the one
  // MLX thread (engine/mlx_thread.h), and the report and trace are locked. So concurrent Run
  // calls on one session are allowed; their CPU-EP parts overlap, their MLX parts take turns.
  *supported = true;
  return nullptr;
}

}  // namespace ortmlx::plugin
