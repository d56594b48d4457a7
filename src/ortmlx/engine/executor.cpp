#include "ortmlx/engine/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>

#include <mlx/device.h>
#include <mlx/memory.h>
#include <mlx/primitives.h>
#include <mlx/transforms.h>

#include "ortmlx/diagnostics/trace.h"
#include "ortmlx/engine/device/device_memory.h"
#include "ortmlx/engine/dtype.h"
#include "ortmlx/engine/host_memory.h"
#include "ortmlx/engine/layout.h"

namespace ortmlx {

namespace mx = mlx::core;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "float32[2,3]" for trace args and messages.
std::string describe(mx::Dtype dtype, const mx::Shape& shape) {
  std::string s = elem_type_name(from_mlx_dtype(dtype));
  s += '[';
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d) s += ',';
    s += std::to_string(shape[d]);
  }
  return s + ']';
}

std::string describe(const mx::array& a) {
  return describe(a.dtype(), a.shape());
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

// Elements times item size of a shape, saturating at kUncountable. MLX's own count
// (array::size, array::nbytes) is a product that wraps: float32[2^30, 2^30, 4] would be 0 bytes
// and [2^30, 2^30, 2^30] 0 elements, so the guard would let a run through that MLX cannot address.
size_t shape_bytes(const mx::Shape& shape, size_t itemsize) {
  for (const int d : shape)
    if (d == 0) return 0;
  size_t bytes = itemsize;
  for (const int d : shape)
    if (d < 0 || __builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes)) return kUncountable;
  return bytes;
}

// Bytes an unevaluated array will take when evaluated. MLX evaluates these primitives as views of
// their input's buffer on every backend: a broadcast of a small input to a huge shape allocates
// nothing. Reshape-like ones are views when their input is row-contiguous; that is known only for
// an input with data (otherwise the input is walked and counted itself, and the copy, if any, is
// no larger). Any array whose size overflows 64 bits, a view included, counts kUncountable: MLX's
// kernels would index it with a wrapped count (a crash, or a wrong answer such as a sum of 0).
size_t allocated_bytes(const mx::array& a) {
  const size_t bytes = shape_bytes(a.shape(), a.itemsize());
  if (bytes == kUncountable || !a.has_primitive()) return bytes;
  const char* name = a.primitive().name();
  static constexpr const char* kViews[] = {"Broadcast", "BroadcastAxes", "Transpose",
                                           "Slice",     "ExpandDims",    "Squeeze",
                                           "AsStrided", "StopGradient"};
  for (const char* v : kViews)
    if (std::strcmp(name, v) == 0) return 0;
  static constexpr const char* kReshapes[] = {"Reshape", "Flatten", "Unflatten", "Contiguous"};
  for (const char* v : kReshapes) {
    if (std::strcmp(name, v) != 0) continue;
    const auto& in = a.inputs();
    if (in.size() == 1 && in[0].status() != mx::array::Status::unscheduled &&
        in[0].flags().row_contiguous)
      return 0;
    break;
  }
  return bytes;
}

bool is_allocation_failure(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return true;
  // MLX's GPU allocators throw runtime_error("[malloc] Unable to allocate N bytes."); CUDA's own
  // error text is "out of memory".
  const char* what = e.what();
  return std::strstr(what, "[malloc]") != nullptr ||
         std::strstr(what, "Unable to allocate") != nullptr ||
         std::strstr(what, "out of memory") != nullptr;
}

const char* backend_name() {
  return mx::default_device() == mx::Device::gpu ? "GPU" : "CPU";
}

}  // namespace

void FootprintWalk::add(const mx::array& root, const NodeDesc* node) {
  stack_.push_back(&root);
  while (!stack_.empty()) {
    const mx::array& a = *stack_.back();
    stack_.pop_back();
    // Arrays with data (inputs, constants, anything evaluated) end the walk: they are allocated
    // already, and their graph is gone.
    if (a.status() != mx::array::Status::unscheduled) continue;
    if (!seen_.insert(a.id()).second) continue;
    // Siblings (the other outputs of a multi-output primitive) are allocated with `a` and share
    // its inputs.
    auto count = [&](const mx::array& x) {
      const size_t bytes = allocated_bytes(x);
      fp_.arrays += 1;
      if (__builtin_add_overflow(fp_.total, bytes, &fp_.total)) fp_.total = kUncountable;
      if (bytes > fp_.largest) {
        fp_.largest = bytes;
        fp_.shape = x.shape();
        fp_.dtype = x.dtype();
        fp_.node = node;
      }
    };
    count(a);
    for (const auto& s : a.siblings())
      if (seen_.insert(s.id()).second) count(s);
    for (const auto& in : a.inputs())
      if (in.status() == mx::array::Status::unscheduled) stack_.push_back(&in);
  }
}

AvailableMemory available_memory(size_t need) {
  const size_t limit = mx::get_memory_limit();
  if (need > limit) return {limit, ""};
  const size_t cache = mx::get_cache_memory();
  if (mx::default_device() == mx::Device::gpu) {
    // cudaMemGetInfo costs tens of microseconds: a need under half of what a query made in the
    // last 100 ms found free fits without asking again (only the MLX thread gets here).
    static size_t known_free = 0;
    static auto known_at = std::chrono::steady_clock::time_point{};
    const auto now = std::chrono::steady_clock::now();
    if (known_free == 0 || need > known_free / 2 ||
        now - known_at > std::chrono::milliseconds(100)) {
      known_free = device::device_free_bytes();
      known_at = now;
    }
    return {known_free == 0 ? limit : std::min(limit, known_free + cache), ""};
  }
  // Host memory: MemAvailable, the address-space limit and the cgroup's (engine/host_memory.h).
  const HostBudget host = host_memory_budget(need);
  size_t bytes = SIZE_MAX;
  if (host.bytes != SIZE_MAX && __builtin_add_overflow(host.bytes, cache, &bytes)) bytes = SIZE_MAX;
  if (bytes >= limit) return {limit, ""};  // unknown or above: MLX's limit
  return {bytes, host_bound_note(host.bound)};
}

std::string format_bytes(size_t bytes) {
  if (bytes == kUncountable) return "more than 16 EiB (its size overflows 64 bits)";
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes >= (size_t{1} << 30))
    std::snprintf(buf, sizeof(buf), "%.1f GiB", b / double(size_t{1} << 30));
  else if (bytes >= (size_t{1} << 20))
    std::snprintf(buf, sizeof(buf), "%.1f MiB", b / double(size_t{1} << 20));
  else if (bytes >= (size_t{1} << 10))
    std::snprintf(buf, sizeof(buf), "%.1f KiB", b / double(size_t{1} << 10));
  else
    std::snprintf(buf, sizeof(buf), "%zu bytes", bytes);
  return buf;
}

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

ExecConfig ExecConfig::from(const EpOptions& options) {
  ExecConfig c;
  // With MLX_DISABLE_COMPILE, mlx::compile returns the function itself: every call would trace
  // (counted as RETRACE). Run eagerly instead and say so in the counters.
  c.compile = options.compile_enabled() && std::getenv("MLX_DISABLE_COMPILE") == nullptr;
  c.cache_size = options.compile_cache_size;
  // auto: fusion on every device (MLX's own default; on GPUs fusion is the point). On MLX's CPU
  // backend it is graph-dependent (bench/results/engine.md): arithmetic chains 1.4x faster than
  // eager, transcendental-bound chains 0.75x (scalar JIT kernels): compile_fuse=0 for those.
  c.fuse = options.compile_fuse.value_or(true);
  return c;
}

Executor::Executor(std::shared_ptr<const Plan> plan, ExecConfig config)
    : plan_(std::move(plan)), config_(config), cache_(config.cache_size) {
  output_producers_.assign(plan_->output_names.size(), nullptr);
  for (size_t i = 0; i < plan_->output_names.size(); ++i)
    for (const auto& node : plan_->nodes)
      if (std::find(node.outputs.begin(), node.outputs.end(), plan_->output_names[i]) !=
          node.outputs.end())
        output_producers_[i] = &node;
}

void Executor::check_memory(const GraphFootprint& fp) const {
  if (fp.largest == 0) return;
  const AvailableMemory avail = available_memory(fp.largest);
  if (fp.largest <= avail.bytes && fp.largest != kUncountable) return;
  std::string msg = "fused node " + plan_->name + ": ";
  if (fp.node) msg += fp.node->label() + " ";
  msg += "needs " + format_bytes(fp.largest) + " for one " + describe(fp.dtype, fp.shape) +
         " tensor; " + format_bytes(avail.bytes) + " available to MLX's " + backend_name() +
         " backend" + avail.note;
  if (fp.total > fp.largest)
    msg += " (the run's " + std::to_string(fp.arrays) + " new tensors take up to " +
           format_bytes(fp.total) + ")";
  throw OutOfMemoryError(msg);
}

void Executor::verify(const mx::array& flags,
                      const std::vector<TranslationContext::Check>& checks) const {
  if (flags.size() != checks.size())
    throw NodeError("fused node " + plan_->name + ": " + std::to_string(flags.size()) +
                    " runtime check results for " + std::to_string(checks.size()) + " checks");
  // Small bools read once after the evaluation. On a GPU, array::data() would move MLX's device
  // buffer to unified memory; a device-to-host copy of a few bytes is cheaper.
  std::vector<uint8_t> ok(flags.size());
  static_assert(sizeof(bool) == 1);
  if (device::gpu_io_available() && flags.dtype() == mx::bool_)
    device::to_device(flags, ok.data());
  else
    std::memcpy(ok.data(), flags.data<bool>(), flags.nbytes());
  for (size_t i = 0; i < checks.size(); ++i)
    if (!ok[i]) throw NodeError(checks[i].node + ": " + checks[i].message);
}

void Executor::evaluate(std::vector<mx::array>& outputs, const GraphFootprint& fp) const {
  try {
    eval_outputs(outputs);
  } catch (const std::exception& e) {
    if (!is_allocation_failure(e)) throw;
    std::string msg =
        "fused node " + plan_->name + ": out of memory while evaluating (" + e.what() + ")";
    if (fp.largest) {
      const AvailableMemory avail = available_memory(fp.largest);
      msg += "; its largest tensor, " + describe(fp.dtype, fp.shape);
      if (fp.node) msg += " from " + fp.node->label();
      msg += ", needs " + format_bytes(fp.largest) + ", the run's " + std::to_string(fp.arrays) +
             " new tensors up to " + format_bytes(fp.total) + "; " + format_bytes(avail.bytes) +
             " available to MLX's " + backend_name() + " backend" + avail.note;
    }
    throw OutOfMemoryError(msg);
  }
}

std::vector<mx::array> Executor::trace(const std::vector<mx::array>& inputs,
                                       std::vector<TranslationContext::PathMark>* marks,
                                       TraceSink* sink, bool compiling,
                                       std::vector<std::pair<const NodeDesc*, mx::array>>* produced,
                                       std::vector<TranslationContext::Check>* checks) const {
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
      // Elementwise nodes on NCHW views of channels-last data run channels-last (layout.h).
      if (!(plan.options.fast_patterns.value_or(true) && translate_channels_last(ctx, node)))
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
    if (produced)
      for (const auto& out : node.outputs)
        if (!out.empty()) produced->emplace_back(&node, ctx.resolve(out));
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
  if (checks) {
    *checks = ctx.checks();
    if (!checks->empty()) outputs.push_back(mx::stack(ctx.check_values()));
  }
  return outputs;
}

RunResult Executor::run_eager(const std::vector<mx::array>& inputs, TraceSink* sink) {
  RunResult r;
  std::vector<std::pair<const NodeDesc*, mx::array>> produced;
  std::vector<TranslationContext::Check> checks;
  auto t0 = Clock::now();
  {
    TraceSpan span(sink, "mlx.translate", "ep.phase");
    if (sink) span.args().add("fused_node", plan_->name).add("compiled", false);
    r.outputs = trace(inputs, &r.marks, sink, /*compiling=*/false, &produced, &checks);
  }
  r.stats.translate_s = seconds_since(t0);
  t0 = Clock::now();
  {
    TraceSpan span(sink, "mlx.eval", "ep.phase");
    if (sink) span.args().add("fused_node", plan_->name).add("compiled", false);
    // Walked after the whole graph is built (a translator that reads values evaluates earlier
    // nodes), node by node in plan order, so each array is charged to the node that built it.
    FootprintWalk walk;
    for (const auto& [node, a] : produced) walk.add(a, node);
    // r.outputs may end with the stacked runtime checks, which no plan output names.
    for (size_t i = 0; i < r.outputs.size(); ++i)
      walk.add(r.outputs[i], i < output_producers_.size() ? output_producers_[i] : nullptr);
    produced.clear();
    const GraphFootprint& fp = walk.result();
    if (sink) span.args().add("largest_bytes", fp.largest);
    check_memory(fp);
    try {
      evaluate(r.outputs, fp);
    } catch (const NodeError&) {
      throw;
    } catch (const std::exception& e) {
      throw NodeError("fused node " + plan_->name + ": MLX evaluation failed: " + e.what());
    }
  }
  r.stats.eval_s = seconds_since(t0);
  if (!checks.empty()) {
    const mx::array flags = r.outputs.back();
    r.outputs.pop_back();
    verify(flags, checks);
  }
  return r;
}

bool Executor::run_compiled(const std::vector<mx::array>& inputs, TraceSink* sink, RunResult& r,
                            std::string& failure, bool& out_of_memory) {
  RunStats& st = r.stats;
  const std::string& key = st.shape_key;
  CompiledFn* fn = cache_.find(key);
  st.cache = fn ? CacheOutcome::kHit : CacheOutcome::kMiss;
  if (!fn) {
    const size_t evicted_before = cache_.evictions();
    fn = cache_.insert(key, std::make_unique<CompiledFn>(
                                [this](const std::vector<mx::array>& in, CompiledFn& self) {
                                  std::vector<TranslationContext::PathMark> marks;
                                  std::vector<TranslationContext::Check> checks;
                                  auto outs = trace(in, &marks, current_sink_, /*compiling=*/true,
                                                    nullptr, &checks);
                                  self.set_marks(std::move(marks));
                                  self.set_checks(std::move(checks));
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
    not_compilable_ = dynamic_cast<const NotCompilable*>(&e) != nullptr;
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
    auto memo = compiled_footprints_.find(key);
    if (traced || memo == compiled_footprints_.end()) {
      FootprintWalk walk;
      for (const auto& o : r.outputs) walk.add(o);
      // Bounded like the LRU it shadows; entries of evicted keys are simply walked again.
      if (compiled_footprints_.size() >= 2 * cache_.capacity()) compiled_footprints_.clear();
      memo = compiled_footprints_.insert_or_assign(key, walk.result()).first;
    }
    const GraphFootprint& fp = memo->second;
    if (sink) span.args().add("largest_bytes", fp.largest);
    try {
      check_memory(fp);
    } catch (const OutOfMemoryError& e) {
      // Nothing was evaluated and the compiled function is sound: keep it for its key.
      failure = e.what();
      out_of_memory = true;
      r.outputs.clear();
      return false;
    }
    try {
      evaluate(r.outputs, fp);
    } catch (const std::exception& e) {
      failure = std::string("evaluating the compiled function failed: ") + e.what();
      out_of_memory = dynamic_cast<const OutOfMemoryError*>(&e) != nullptr;
      r.outputs.clear();
      cache_.erase(key);
      return false;
    }
  }
  st.eval_s = seconds_since(t0);
  st.compiled = true;
  st.cache_entries = cache_.size();
  if (!fn->checks().empty()) {
    const mx::array flags = r.outputs.back();
    r.outputs.pop_back();
    // A failed check is the input's fault: thrown past the eager fallback, the function stays.
    verify(flags, fn->checks());
  }
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
  bool out_of_memory = false;
  if (run_compiled(inputs, sink, compiled, failure, out_of_memory)) return compiled;

  // The eager run decides: if it fails too, the input is at fault and its error is the answer
  // (compilation stays on); if it succeeds, compilation is what failed. A run that is too big
  // fails eagerly as well, and cheaply: the eager graph is built and walked, never evaluated (it
  // holds every array of the compiled graph, fused kernels unfused, so its largest is no smaller).
  RunResult r = run_eager(inputs, sink);
  r.stats.shape_key = key;
  if (out_of_memory) {
    // Memory was short for the compiled run but not for the eager one (freed in between, or
    // fragmentation on a GPU): not the compiler's fault, so compilation stays on. Reported as a
    // plain eager run.
    r.stats.compile_s += compiled.stats.compile_s;
    r.stats.evictions = compiled.stats.evictions;
    r.stats.cache_entries = cache_.size();
    return r;
  }
  r.stats.cache = compiled.stats.cache;
  r.stats.evictions = compiled.stats.evictions;
  r.stats.compile_s += compiled.stats.compile_s;
  r.stats.fallback = true;
  r.stats.fallback_reason = failure;
  compile_disabled_ = true;
  disabled_reason_ = failure;
  cache_.clear();
  compiled_footprints_.clear();
  r.stats.cache_entries = 0;
  // A plan that reads runtime values on the host (a runtime If condition, a Loop's trip count)
  // runs eagerly by design: no warning for that.
  if (!not_compilable_)
    std::cerr << "[ortmlx] fused node '" << plan_->name
              << "': compiled execution failed, running eagerly from now on: " << failure
              << std::endl;
  if (sink)
    sink->instant("mlx.compile_fallback", "ep.path",
                  TraceArgs().add("fused_node", plan_->name).add("reason", failure));
  return r;
}

}  // namespace ortmlx
