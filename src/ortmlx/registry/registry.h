// The op registry: (domain, op_type, [min_opset, max_opset]) -> claim predicate + translator.
// Contract families whose op names carry parameters (pkg.onnax AttentionVJP_...) register by
// prefix.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ortmlx/graph/graph_view.h"

namespace ortmlx {

class TranslationContext;
struct NodeDesc;

// The answer of a claim predicate: ok, or a human-readable reason for refusing.
struct ClaimResult {
  bool ok = true;
  std::string reason;
  static ClaimResult yes() { return {}; }
  static ClaimResult no(std::string why) { return {false, std::move(why)}; }
};

// What a claim predicate may look at: the node and the static graph around it.
class ClaimContext {
 public:
  ClaimContext(const GraphView& graph, const NodeView& node) : graph_(graph), node_(node) {}
  const NodeView& node() const { return node_; }
  const GraphView& graph() const { return graph_; }
  size_t num_inputs() const { return node_.inputs.size(); }
  size_t num_outputs() const { return node_.outputs.size(); }
  bool has_input(size_t i) const { return i < node_.inputs.size() && !node_.inputs[i].empty(); }
  // Static info of input/output i; nullptr when absent or unknown to ORT.
  const TensorInfo* input(size_t i) const;
  const TensorInfo* output(size_t i) const;
  ElemType input_type(size_t i) const;
  // Static rank of input i, or -1 when absent or unknown.
  int64_t input_rank(size_t i) const;
  ElemType output_type(size_t i) const;
  bool input_is_constant(size_t i) const;
  // Host copy of a constant input (small constants are always copied); nullptr otherwise.
  const ConstTensor* constant_input(size_t i) const;

 private:
  const GraphView& graph_;
  const NodeView& node_;
};

using ClaimFn = std::function<ClaimResult(const ClaimContext&)>;
using TranslateFn = std::function<void(TranslationContext&, const NodeDesc&)>;

struct OpEntry {
  std::string domain;   // "" is the default ONNX domain
  std::string op_type;  // exact name, or a prefix when by_prefix
  int min_opset = 1;
  int max_opset = 1 << 30;
  ClaimFn claim;
  TranslateFn translate;
  bool by_prefix = false;
  // Claimed on MLX's CPU backend under the default policy (option cpu_claim=auto): only entries
  // measured at least as fast there as ORT's CPU EP (bench/results) set it.
  bool cpu_default = false;
  // cpu_default holds only where the session's CPU kernel instruction set (option cpu_isa) was
  // measured faster too (cpu_isa_beats_ort_cpu): the fused kernels' speed depends on it.
  bool cpu_default_needs_fast_isa = false;
  // Shape-keyed ops need concrete input shapes when traced (custom kernels, grids).
  bool shape_keyed = false;
};

class OpRegistry {
 public:
  void add(OpEntry entry);
  // Convenience for the common case: one op, opset range, claim and translate.
  void add(std::string domain, std::string op_type, int min_opset, int max_opset, ClaimFn claim,
           TranslateFn translate);

  // Entry for a node, or nullptr; `why` is set when nothing matches.
  const OpEntry* find(const std::string& domain, const std::string& op_type, int since_version,
                      std::string* why = nullptr) const;
  // Full claim decision for a node: registry lookup plus the entry's predicate.
  ClaimResult claim(const GraphView& graph, const NodeView& node) const;

  const std::vector<OpEntry>& entries() const { return entries_; }

  // The process-wide registry with every op family registered (built once, then read-only).
  static const OpRegistry& global();

 private:
  std::vector<OpEntry> entries_;
};

// Helper for claim predicates: `ORTMLX_REQUIRE(cond, "reason")` refuses with the reason.
#define ORTMLX_REQUIRE(cond, reason)                       \
  do {                                                     \
    if (!(cond)) return ::ortmlx::ClaimResult::no(reason); \
  } while (0)

}  // namespace ortmlx
