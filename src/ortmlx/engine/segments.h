// Compiled segments of eager plans.
//
// A plan that reads runtime values on the host (a runtime If condition, a Loop's trip count or
// condition, a shape computed from data) cannot be traced whole for mlx::compile, so it runs
// eagerly: every op becomes a kernel of its own, and on a GPU each launch costs host time. Between
// those host reads, runs of nodes compile on their own as *segments*: a segment is a shape-keyed
// compiled function whose inputs are the runtime values its nodes read (bound in its scope or an
// enclosing one; never captured, see TranslationContext::Sealed) and whose outputs are the values
// that later nodes, their bodies or the plan's outputs read. Control-flow nodes are never inside a
// segment (their bodies, translated eagerly, get segments of their own). A node whose trace fails
// (it reads a host value, or raises on its input) is split out of its segment and from then on
// translates on its own, where it raises its error as in a plain eager run. A segment that meets
// more shape keys than its LRU keeps (data-dependent sizes) would trace on every call: its nodes
// then run one by one.
//
// Not thread-safe: used on the MLX thread only, like the executor that owns it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>

#include "ortmlx/engine/plan.h"
#include "ortmlx/engine/translation_context.h"

namespace ortmlx {

class SegmentStore {
 public:
  // cache_size: compiled functions kept per segment (LRU by shape key); fuse: as ExecConfig.
  SegmentStore(size_t cache_size, bool fuse);
  ~SegmentStore();
  SegmentStore(const SegmentStore&) = delete;
  SegmentStore& operator=(const SegmentStore&) = delete;

  // How a node is translated: `eager` runs one node in the eager scope (with the caller's error
  // wrapping and checks); `traced` translates one node inside a segment's trace (errors propagate).
  using NodeFn = std::function<void(TranslationContext&, const NodeDesc&)>;

  // Translates `plan`'s nodes into the eager scope `ctx` (which binds the plan's inputs), the
  // compilable runs of nodes as segments. Afterwards ctx binds every value read after the node
  // that produced it, and the plan's outputs; values used only inside a segment stay inside.
  void translate(TranslationContext& ctx, const Plan& plan, const NodeFn& eager,
                 const NodeFn& traced);

  // Segment calls made since the last take_calls() (the executor reports them per run).
  size_t take_calls();

 public:
  struct PlanSegments;  // defined in segments.cpp

 private:
  PlanSegments& segments_of(const Plan& plan);

  size_t cache_size_;
  bool fuse_;
  size_t calls_ = 0;
  std::unordered_map<const Plan*, std::unique_ptr<PlanSegments>> plans_;
  // While a segment is called: the eager scope its constants resolve in and the node translator
  // (a trace happens inside the call, on a new shape key); the node whose trace is running.
  const TranslationContext* tracing_scope_ = nullptr;
  const NodeFn* tracing_fn_ = nullptr;
  std::optional<size_t> failed_node_;
};

}  // namespace ortmlx
