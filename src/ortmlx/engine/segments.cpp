#include "ortmlx/engine/segments.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ortmlx/engine/compile_cache.h"

namespace ortmlx {

namespace mx = mlx::core;

namespace {

// Every value name `node` reads, those its bodies read from enclosing scopes included.
void add_reads(const NodeDesc& node, std::set<std::string>& out) {
  for (const auto& name : node.inputs)
    if (!name.empty()) out.insert(name);
  for (const auto& [attr, body] : node.bodies)
    if (body)
      for (const auto& inner : body->nodes) add_reads(inner, out);
}

}  // namespace

struct SegmentStore::PlanSegments {
  struct Segment {
    size_t begin = 0, end = 0;           // nodes [begin, end)
    bool compiled = false;               // false: its nodes translated one by one
    size_t misses = 0;                   // shape keys traced
    std::vector<std::string> reads;      // values from outside the segment, first use first
    std::vector<std::string> live_outs;  // values it produces that are read after it
    std::unique_ptr<CompileCache> cache;
  };
  std::vector<Segment> segments;
};

namespace {

using Segment = SegmentStore::PlanSegments::Segment;

Segment make_segment(const Plan& plan, size_t begin, size_t end, bool compiled, size_t cache) {
  Segment s;
  s.begin = begin;
  s.end = end;
  s.compiled = compiled;
  if (!compiled) return s;
  std::set<std::string> produced, seen;
  for (size_t k = begin; k < end; ++k) {
    for (const auto& name : plan.nodes[k].inputs)
      if (!name.empty() && !produced.count(name) && seen.insert(name).second)
        s.reads.push_back(name);
    if (!plan.nodes[k].bodies.empty()) {
      // An If inside a segment (selectable_if) reads outer-scope values through its branches
      // too; names its branches bind themselves resolve to nothing here and are dropped at the
      // call.
      std::set<std::string> body_reads;
      add_reads(plan.nodes[k], body_reads);
      for (const auto& name : body_reads)
        if (!produced.count(name) && seen.insert(name).second) s.reads.push_back(name);
    }
    for (const auto& name : plan.nodes[k].outputs)
      if (!name.empty()) produced.insert(name);
  }
  std::set<std::string> later(plan.output_names.begin(), plan.output_names.end());
  for (size_t k = end; k < plan.nodes.size(); ++k) add_reads(plan.nodes[k], later);
  for (size_t k = begin; k < end; ++k)
    for (const auto& name : plan.nodes[k].outputs)
      if (!name.empty() && later.count(name)) s.live_outs.push_back(name);
  s.cache = std::make_unique<CompileCache>(cache);
  return s;
}

}  // namespace

SegmentStore::SegmentStore(size_t cache_size, bool fuse) : cache_size_(cache_size), fuse_(fuse) {}

SegmentStore::~SegmentStore() = default;

size_t SegmentStore::take_calls() {
  const size_t n = calls_;
  calls_ = 0;
  return n;
}

SegmentStore::PlanSegments& SegmentStore::segments_of(const Plan& plan) {
  auto& slot = plans_[&plan];
  if (slot) return *slot;
  slot = std::make_unique<PlanSegments>();
  // Control-flow nodes alone; the runs of nodes between them compiled. An If with small
  // branches stays inside its run: traced with a runtime condition it selects between both
  // branches on the device (ops/control_flow.cpp), and where it cannot, its trace fails and it is
  // split out below like any node whose trace fails.
  const size_t n = plan.nodes.size();
  size_t begin = 0;
  for (size_t k = 0; k <= n; ++k) {
    if (k < n && (plan.nodes[k].bodies.empty() || selectable_if(plan.nodes[k]))) continue;
    if (k > begin) slot->segments.push_back(make_segment(plan, begin, k, true, cache_size_));
    if (k < n) slot->segments.push_back(make_segment(plan, k, k + 1, false, cache_size_));
    begin = k + 1;
  }
  return *slot;
}

void SegmentStore::translate(TranslationContext& ctx, const Plan& plan, const NodeFn& eager,
                             const NodeFn& traced) {
  PlanSegments& ps = segments_of(plan);
  for (size_t i = 0; i < ps.segments.size();) {
    Segment& seg = ps.segments[i];
    if (!seg.compiled) {
      for (size_t k = seg.begin; k < seg.end; ++k) eager(ctx, plan.nodes[k]);
      ++i;
      continue;
    }
    // The runtime values the segment reads, by name; constants it reads stay in the trace.
    std::vector<std::string> names;
    std::vector<mx::array> inputs;
    for (const auto& name : seg.reads)
      if (auto v = ctx.runtime_value(name)) {
        names.push_back(name);
        inputs.push_back(*v);
      }
    const std::string key = shape_key(inputs);
    CompiledFn* fn = seg.cache->find(key);
    if (!fn && ++seg.misses > cache_size_) {
      // More shapes than the LRU keeps (data-dependent sizes, a sequence growing over a long
      // Loop): every call would trace and compile. Its nodes run one by one from now on.
      seg.compiled = false;
      seg.cache.reset();
      continue;
    }
    if (!fn) {
      const size_t begin = seg.begin, end = seg.end;
      const std::vector<std::string> live_outs = seg.live_outs;
      fn = seg.cache->insert(key, std::make_unique<CompiledFn>(
                                      [this, &plan, names, begin, end, live_outs](
                                          const std::vector<mx::array>& in, CompiledFn& self) {
                                        TranslationContext sctx(plan, *tracing_scope_,
                                                                TranslationContext::Sealed{});
                                        for (size_t j = 0; j < names.size(); ++j)
                                          sctx.bind(names[j], in[j]);
                                        for (size_t k = begin; k < end; ++k) {
                                          failed_node_ = k;
                                          (*tracing_fn_)(sctx, plan.nodes[k]);
                                        }
                                        failed_node_.reset();
                                        std::vector<mx::array> out;
                                        for (const auto& name : live_outs)
                                          out.push_back(sctx.resolve(name));
                                        // One output per check: no op to split them in the eager
                                        // scope.
                                        for (const auto& ok : sctx.check_values())
                                          out.push_back(ok);
                                        self.set_marks(sctx.path_marks());
                                        self.set_checks(sctx.checks());
                                        return out;
                                      },
                                      fuse_));
    }
    tracing_scope_ = &ctx;
    tracing_fn_ = &traced;
    failed_node_.reset();
    std::vector<mx::array> outs;
    bool ok = true;
    try {
      outs = (*fn)(inputs);
    } catch (const std::exception&) {
      ok = false;
    }
    tracing_scope_ = nullptr;
    tracing_fn_ = nullptr;
    if (ok) {
      ++calls_;
      const size_t n_out = seg.live_outs.size();
      for (size_t j = 0; j < n_out; ++j) ctx.bind(seg.live_outs[j], outs[j]);
      ctx.add_marks(fn->marks());
      for (size_t c = 0; c < fn->checks().size(); ++c)
        ctx.add_check(fn->checks()[c], outs[n_out + c]);
      ++i;
      continue;
    }
    // The node whose trace failed translates on its own from now on (where it raises its error,
    // if the input is at fault); the nodes around it stay compiled. A failure outside the nodes'
    // traces splits the whole segment into single nodes. Then this position runs again.
    const size_t begin = seg.begin, end = seg.end;
    std::vector<Segment> parts;
    if (failed_node_) {
      const size_t k = *failed_node_;
      if (k > begin) parts.push_back(make_segment(plan, begin, k, true, cache_size_));
      parts.push_back(make_segment(plan, k, k + 1, false, cache_size_));
      if (k + 1 < end) parts.push_back(make_segment(plan, k + 1, end, true, cache_size_));
    } else {
      for (size_t k = begin; k < end; ++k)
        parts.push_back(make_segment(plan, k, k + 1, false, cache_size_));
    }
    failed_node_.reset();
    ps.segments.erase(ps.segments.begin() + static_cast<std::ptrdiff_t>(i));
    ps.segments.insert(ps.segments.begin() + static_cast<std::ptrdiff_t>(i),
                       std::make_move_iterator(parts.begin()),
                       std::make_move_iterator(parts.end()));
  }
}

}  // namespace ortmlx
