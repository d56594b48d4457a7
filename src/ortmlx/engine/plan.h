// A Plan is everything needed to run one fused node: the ordered node descriptors, the fused
// node's I/O names (in ORT's order), and the constants, copied into MLX arrays once at Compile.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <mlx/array.h>

#include "ortmlx/engine/options.h"
#include "ortmlx/graph/graph_view.h"
#include "ortmlx/registry/registry.h"

namespace ortmlx {

struct Plan;

struct NodeDesc : NodeView {
  std::vector<TensorInfo> input_infos;   // static infos (dtype, maybe shape) per input
  std::vector<TensorInfo> output_infos;  // per output
  const OpEntry* entry = nullptr;
  // Control flow: each subgraph as a plan of its own (inputs: the body's formal inputs; values
  // it reads from enclosing graphs resolve in the enclosing translation scope).
  std::map<std::string, std::shared_ptr<const Plan>> bodies;
  const Plan& body(const std::string& attr) const;

  // Message prefix naming the node: "node 'attn/MatMul' (MatMul)".
  std::string label() const;
};

struct Plan {
  std::string name;  // the fused node's name
  std::vector<NodeDesc> nodes;
  std::vector<std::string> input_names;   // fused node inputs, ORT order (constants dropped)
  std::vector<std::string> output_names;  // fused node outputs, ORT order
  std::vector<TensorInfo> output_infos;
  std::map<std::string, mlx::core::array> constant_arrays;
  std::map<std::string, std::shared_ptr<const ConstTensor>> constant_host;
  bool shape_keyed = false;  // some node needs concrete shapes when traced
  EpOptions options;         // the session's knobs (read by translators, e.g. byte budgets)
  // Entries of the pattern nodes the pattern pass put into `nodes` (ops/patterns): each holds
  // the chain's original nodes, translated when the fast form does not apply.
  std::vector<std::shared_ptr<const OpEntry>> pattern_entries;
  // Values derived from constants alone (a weight in another layout), evaluated once and reused
  // by every trace and eager run (TranslationContext::derived_constant). Mutable: filled while
  // translating, which happens only on the MLX thread, one job at a time.
  mutable std::map<std::string, mlx::core::array> derived_constants;
  // Per Loop node of this plan run eagerly (ops/control_flow.cpp): how many iterations its
  // latest eager run took, the count a compiled trace unrolls when the Loop's condition is a
  // runtime value. Mutable like derived_constants.
  struct LoopHistory {
    bool unroll = true;  // ONNXRUNTIME_EP_MLX_LOOP_SPECULATE, read when first translated
    int64_t iterations = 0;
    bool observed = false;  // an eager run has set `iterations`
  };
  mutable std::map<const NodeDesc*, LoopHistory> loop_history;
};

// Builds a Plan from the graph ORT hands to Compile (all constant data copied into `graph`).
// Throws std::runtime_error naming the node when an op is missing from the registry.
std::shared_ptr<Plan> build_plan(const GraphView& graph, std::string fused_name,
                                 std::vector<std::string> input_names,
                                 std::vector<std::string> output_names,
                                 const OpRegistry& registry = OpRegistry::global());

// The Compile-time rewrites of a built plan, run after the report recorded the ONNX nodes ORT
// assigned: the pattern pass (ops/patterns) where the options enable it. Returns how many
// rewrites of each kind were made, by report counter name ("pattern.<name>").
std::map<std::string, int64_t> prepare_plan(Plan& plan);

// Plan of a control-flow body: its graph inputs and outputs, its nodes and constants.
std::shared_ptr<Plan> build_body_plan(const GraphView& body, std::string name,
                                      const OpRegistry& registry = OpRegistry::global());

// MLX array holding a copy of a constant tensor.
mlx::core::array constant_to_array(const ConstTensor& t);

// Whether an If node may be translated for both conditions, its outputs selected on the device,
// when its condition is a runtime value inside a compiled trace (ops/control_flow.cpp): its
// branches hold at most kMaxSelectedIfNodes nodes together, nested bodies counted, and no Loop
// or Scan; ONNXRUNTIME_EP_MLX_IF_SELECT=0 (read when a plan is translated) turns it off. Compiled
// segments of eager runs take such an If into a segment instead of cutting there.
inline constexpr size_t kMaxSelectedIfNodes = 64;
bool selectable_if(const NodeDesc& node);

}  // namespace ortmlx
