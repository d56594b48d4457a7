#include "ortmlx/engine/executor.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include <mlx/transforms.h>

#include "ortmlx/diagnostics/trace.h"
#include "ortmlx/engine/dtype.h"

namespace ortmlx {

namespace mx = mlx::core;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "float32[2,3]" for trace args.
std::string describe(const mx::array& a) {
  std::string s = elem_type_name(from_mlx_dtype(a.dtype()));
  s += '[';
  for (size_t d = 0; d < a.ndim(); ++d) {
    if (d) s += ',';
    s += std::to_string(a.shape(static_cast<int>(d)));
  }
  return s + ']';
}

// One "op" span per node while the graph is built: shapes, dtypes, elements, bytes.
void trace_node(TraceSink& sink, const NodeDesc& node, const TranslationContext& ctx,
                double start_us) {
  TraceArgs args;
  args.add("node", node.name).add("op", node.qualified_op());
  std::string ins, outs;
  for (const auto& in : node.inputs) {
    if (!ins.empty()) ins += ", ";
    ins += in.empty() ? "-" : (ctx.has(in) ? describe(ctx.resolve(in)) : "?");
  }
  int64_t elements = 0, bytes = 0;
  for (const auto& out : node.outputs) {
    if (!outs.empty()) outs += ", ";
    if (out.empty() || !ctx.has(out)) {
      outs += "-";
      continue;
    }
    mx::array a = ctx.resolve(out);
    outs += describe(a);
    elements += static_cast<int64_t>(a.size());
    bytes += static_cast<int64_t>(a.nbytes());
  }
  args.add("inputs", ins).add("outputs", outs).add("elements", elements).add("bytes", bytes);
  if (ctx.compiling()) args.add("compiling", true);
  sink.span(node.qualified_op(), "op", start_us, args);
}

// Evaluates the outputs that hold elements. MLX's CUDA backend divides by the element count when
// it sizes a kernel launch, so evaluating an empty array kills the process with SIGFPE (seen on
// an H200 for Add, Relu, MatMul, Gemm, ReduceMean and LayerNormalization on 0-sized tensors).
// An empty output needs no computation: it becomes an empty array that owns no kernel.
void eval_outputs(std::vector<mx::array>& outputs) {
  std::vector<mx::array> todo;
  todo.reserve(outputs.size());
  for (const auto& o : outputs)
    if (o.size() != 0) todo.push_back(o);
  mx::eval(todo);
  for (auto& o : outputs) {
    if (o.size() != 0) continue;
    static char nothing = 0;
    o = mx::array(static_cast<void*>(&nothing), o.shape(), o.dtype(), [](void*) {});
  }
}

}  // namespace

const char* cache_outcome_name(CacheOutcome c) {
  switch (c) {
    case CacheOutcome::kHit:
      return "HIT";
    case CacheOutcome::kMiss:
      return "MISS";
    case CacheOutcome::kRetrace:
      return "RETRACE";
    case CacheOutcome::kNone:
      return "";
  }
  return "";
}

bool default_compile_fuse() {
  // Fusion on every device (MLX's own default; on GPUs fusion is the point). On MLX's CPU
  // backend it is graph-dependent (bench/results/engine.md): arithmetic chains 1.4x faster than
  // eager, transcendental-bound chains 0.75x (scalar JIT kernels): compile_fuse=0 for those.
  return true;
}

ExecConfig ExecConfig::from(const EpOptions& options) {
  ExecConfig c;
  // With MLX_DISABLE_COMPILE, mlx::compile returns the function itself: every call would trace
  // (counted as RETRACE). Run eagerly instead and say so in the counters.
  c.compile = options.compile_enabled() && std::getenv("MLX_DISABLE_COMPILE") == nullptr;
  c.cache_size = options.compile_cache_size;
  c.fuse = options.compile_fuse.value_or(default_compile_fuse());
  return c;
}

Executor::Executor(std::shared_ptr<const Plan> plan, ExecConfig config)
    : plan_(std::move(plan)), config_(config), cache_(config.cache_size) {}

std::vector<mx::array> Executor::trace(const std::vector<mx::array>& inputs,
                                       std::vector<TranslationContext::PathMark>* marks,
                                       TraceSink* sink, bool compiling) const {
  const Plan& plan = *plan_;
  if (inputs.size() != plan.input_names.size())
    throw NodeError("fused node " + plan.name + " expected " +
                    std::to_string(plan.input_names.size()) + " inputs, got " +
                    std::to_string(inputs.size()));
  TranslationContext ctx(plan);
  ctx.set_compiling(compiling);
  for (size_t i = 0; i < inputs.size(); ++i) ctx.bind(plan.input_names[i], inputs[i]);
  for (const auto& node : plan.nodes) {
    const double start_us = sink ? TraceSink::now_us() : 0.0;
    try {
      node.entry->translate(ctx, node);
      for (size_t i = 0; i < node.outputs.size(); ++i)
        if (!node.outputs[i].empty() && !ctx.has(node.outputs[i]))
          throw std::runtime_error("translator did not produce output '" + node.outputs[i] + "'");
    } catch (const NodeError&) {
      throw;
    } catch (const NotCompilable& e) {
      throw NotCompilable(node.label() + ": " + e.what());
    } catch (const std::exception& e) {
      throw NodeError(node.label() + ": " + e.what());
    }
    if (sink) trace_node(*sink, node, ctx, start_us);
  }
  std::vector<mx::array> outputs;
  outputs.reserve(plan.output_names.size());
  for (size_t i = 0; i < plan.output_names.size(); ++i) {
    mx::array out = ctx.resolve(plan.output_names[i]);
    const ElemType want = plan.output_infos[i].dtype;
    if (want != ElemType::kUndefined && from_mlx_dtype(out.dtype()) != want)
      throw NodeError("fused node " + plan.name + ": output '" + plan.output_names[i] +
                      "' has type " + elem_type_name(from_mlx_dtype(out.dtype())) +
                      " but ONNX expects " + elem_type_name(want));
    outputs.push_back(mx::contiguous(out));
  }
  if (marks) *marks = ctx.path_marks();
  return outputs;
}

RunResult Executor::run_eager(const std::vector<mx::array>& inputs, TraceSink* sink) {
  RunResult r;
  auto t0 = Clock::now();
  {
    TraceSpan span(sink, "mlx.translate", "ep.phase");
    if (sink) span.args().add("fused_node", plan_->name).add("compiled", false);
    r.outputs = trace(inputs, &r.marks, sink, /*compiling=*/false);
  }
  r.stats.translate_s = seconds_since(t0);
  t0 = Clock::now();
  {
    TraceSpan span(sink, "mlx.eval", "ep.phase");
    if (sink) span.args().add("fused_node", plan_->name).add("compiled", false);
    try {
      eval_outputs(r.outputs);
    } catch (const std::exception& e) {
      throw NodeError("fused node " + plan_->name + ": MLX evaluation failed: " + e.what());
    }
  }
  r.stats.eval_s = seconds_since(t0);
  return r;
}

bool Executor::run_compiled(const std::vector<mx::array>& inputs, TraceSink* sink, RunResult& r,
                            std::string& failure) {
  RunStats& st = r.stats;
  const std::string& key = st.shape_key;
  CompiledFn* fn = cache_.find(key);
  st.cache = fn ? CacheOutcome::kHit : CacheOutcome::kMiss;
  if (!fn) {
    const size_t evicted_before = cache_.evictions();
    fn = cache_.insert(key, std::make_unique<CompiledFn>(
                                [this](const std::vector<mx::array>& in, CompiledFn& self) {
                                  std::vector<TranslationContext::PathMark> marks;
                                  auto outs = trace(in, &marks, current_sink_, /*compiling=*/true);
                                  self.set_marks(std::move(marks));
                                  return outs;
                                },
                                config_.fuse));
    st.evictions = cache_.evictions() - evicted_before;
  }

  const size_t traces_before = fn->traces();
  current_sink_ = sink;
  const double start_us = sink ? TraceSink::now_us() : 0.0;
  auto t0 = Clock::now();
  try {
    r.outputs = (*fn)(inputs);
  } catch (const std::exception& e) {
    current_sink_ = nullptr;
    st.compile_s = seconds_since(t0);
    if (sink)
      sink->span("mlx.compile", "ep.phase", start_us,
                 TraceArgs().add("fused_node", plan_->name).add("error", e.what()));
    failure = std::string("tracing/compiling failed: ") + e.what();
    cache_.erase(key);
    return false;
  }
  current_sink_ = nullptr;
  const bool traced = fn->traces() != traces_before;
  if (traced && st.cache == CacheOutcome::kHit) st.cache = CacheOutcome::kRetrace;
  (traced ? st.compile_s : st.translate_s) = seconds_since(t0);
  if (sink)
    sink->span(traced ? "mlx.compile" : "mlx.translate", "ep.phase", start_us,
               TraceArgs()
                   .add("fused_node", plan_->name)
                   .add("compiled", true)
                   .add("cache", cache_outcome_name(st.cache))
                   .add("shape_key", key));
  r.marks = fn->marks();

  t0 = Clock::now();
  {
    TraceSpan span(sink, "mlx.eval", "ep.phase");
    if (sink) span.args().add("fused_node", plan_->name).add("compiled", true);
    try {
      eval_outputs(r.outputs);
    } catch (const std::exception& e) {
      failure = std::string("evaluating the compiled function failed: ") + e.what();
      r.outputs.clear();
      cache_.erase(key);
      return false;
    }
  }
  st.eval_s = seconds_since(t0);
  st.compiled = true;
  st.cache_entries = cache_.size();
  return true;
}

RunResult Executor::run(const std::vector<mx::array>& inputs, TraceSink* sink) {
  const std::string key = shape_key(inputs);
  if (!compile_enabled()) {
    RunResult r = run_eager(inputs, sink);
    r.stats.shape_key = key;
    return r;
  }
  RunResult compiled;
  compiled.stats.shape_key = key;
  std::string failure;
  if (run_compiled(inputs, sink, compiled, failure)) return compiled;

  // The eager run decides: if it fails too, the input is at fault and its error is the answer
  // (compilation stays on); if it succeeds, compilation is what failed.
  RunResult r = run_eager(inputs, sink);
  r.stats.shape_key = key;
  r.stats.cache = compiled.stats.cache;
  r.stats.evictions = compiled.stats.evictions;
  r.stats.compile_s += compiled.stats.compile_s;
  r.stats.fallback = true;
  r.stats.fallback_reason = failure;
  compile_disabled_ = true;
  disabled_reason_ = failure;
  cache_.clear();
  r.stats.cache_entries = 0;
  std::cerr << "[ortmlx] fused node '" << plan_->name
            << "': compiled execution failed, running eagerly from now on: " << failure
            << std::endl;
  if (sink)
    sink->instant("mlx.compile_fallback", "ep.path",
                  TraceArgs().add("fused_node", plan_->name).add("reason", failure));
  return r;
}

}  // namespace ortmlx
