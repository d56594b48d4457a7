#include "ortmlx/engine/executor.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <new>
#include <set>

#include <mlx/device.h>
#include <mlx/graph_utils.h>
#include <mlx/primitives.h>
#include <mlx/transforms.h>

#include "ortmlx/diagnostics/trace.h"
#include "ortmlx/engine/device/device_memory.h"
#include "ortmlx/engine/dtype.h"
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

// A development aid (ORTMLX_GRAPH_DUMP=DIR): the MLX graph a fused node evaluates, as MLX prints
// it (mlx::core::print_graph), written once per fused node and output shapes to DIR. A compiled
// function's outputs carry its fused graph (one `Compiled` primitive per fused elementwise
// region), so the file lists what a run launches, to count kernels without a GPU
// (tools/graph_stats.py).
void dump_graph(const std::string& plan_name, const std::vector<mx::array>& outputs) {
  static const char* dir = std::getenv("ORTMLX_GRAPH_DUMP");
  if (dir == nullptr || *dir == '\0') return;
  std::string key = plan_name;
  for (const auto& o : outputs) key += "_" + describe(o);
  for (char& c : key)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '_';
  static std::mutex mu;
  static std::set<std::string> written;
  const std::lock_guard<std::mutex> lock(mu);
  if (!written.insert(key).second) return;
  std::ofstream out(std::string(dir) + "/" + key.substr(0, 200) + ".txt");
  mx::print_graph(out, outputs);
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
  const char* segments = std::getenv("ONNXRUNTIME_EP_MLX_EAGER_SEGMENTS");
  c.segments = segments == nullptr || parse_flag(segments);
  const char* replay = std::getenv("ONNXRUNTIME_EP_MLX_GRAPH_REPLAY");
  if (replay != nullptr && std::string(replay) == "first") c.capture_after_hits = 0;
  return c;
}

Executor::Executor(std::shared_ptr<const Plan> plan, ExecConfig config)
    : plan_(std::move(plan)),
      config_(config),
      cache_(config.cache_size),
      segments_(config.compile && config.segments
                    ? std::make_unique<SegmentStore>(config.cache_size, config.fuse)
                    : nullptr),
      replay_(config.compile && device::graph_replay_available()) {
  output_producers_.assign(plan_->output_names.size(), nullptr);
  for (size_t i = 0; i < plan_->output_names.size(); ++i)
    for (const auto& node : plan_->nodes)
      if (std::find(node.outputs.begin(), node.outputs.end(), plan_->output_names[i]) !=
          node.outputs.end())
        output_producers_[i] = &node;
}

void Executor::check_memory(const GraphFootprint& fp) const {
  if (fp.largest == 0) return;
  const size_t need = std::max(fp.largest, fp.held_together);
  const AvailableMemory avail = available_memory(need);
  if (need <= avail.bytes && fp.largest != kUncountable) return;
  if (fp.largest <= avail.bytes && fp.largest != kUncountable)
    throw OutOfMemoryError("fused node " + plan_->name + ": needs " +
                           format_bytes(fp.held_together) + " at once for " + fp.held_what +
                           " (each tensor fits; the largest, " + describe(fp.dtype, fp.shape) +
                           ", takes " + format_bytes(fp.largest) + "); " +
                           format_bytes(avail.bytes) + " available to MLX's " + backend_name() +
                           " backend" + avail.note);
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
  verify_flags(ok, checks);
}

double Executor::replayed_gpu_seconds(const std::string& key) {
  auto it = replays_.find(key);
  if (it == replays_.end() || !it->second.run) return -1.0;
  return device::replay_gpu_seconds(*it->second.run);
}

void Executor::verify_flags(const std::vector<uint8_t>& ok, const Checks& checks) const {
  if (ok.size() != checks.size())
    throw NodeError("fused node " + plan_->name + ": " + std::to_string(ok.size()) +
                    " runtime check results for " + std::to_string(checks.size()) + " checks");
  for (size_t i = 0; i < checks.size(); ++i) {
    if (ok[i]) continue;
    if (checks[i].speculation)
      throw SpeculationMissed(checks[i].node + ": the compiled trace assumed that " +
                              checks[i].message);
    throw NodeError(checks[i].node + ": " + checks[i].message);
  }
}

void Executor::evaluate(std::vector<mx::array>& outputs, const GraphFootprint& fp) const {
  try {
    dump_graph(plan_->name, outputs);
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
                                       std::vector<TranslationContext::Check>* checks,
                                       SegmentStore* segments) const {
  const Plan& plan = *plan_;
  if (inputs.size() != plan.input_names.size())
    throw NodeError("fused node " + plan.name + " expected " +
                    std::to_string(plan.input_names.size()) + " inputs, got " +
                    std::to_string(inputs.size()));
  TranslationContext ctx(plan);
  ctx.set_compiling(compiling);
  ctx.set_unrolls_loops_on_history(unroll_on_history_);
  if (compiling) segments = nullptr;
  ctx.set_segments(segments);
  for (size_t i = 0; i < inputs.size(); ++i) ctx.bind(plan.input_names[i], inputs[i]);
  // Elementwise nodes on NCHW views of channels-last data run channels-last (layout.h).
  const bool layout = plan.options.fast_patterns.value_or(true);
  const SegmentStore::NodeFn translate_node = [layout](TranslationContext& c,
                                                       const NodeDesc& node) {
    if (!(layout && translate_channels_last(c, node))) node.entry->translate(c, node);
  };
  const SegmentStore::NodeFn run_node = [&](TranslationContext& c, const NodeDesc& node) {
    const double start_us = sink ? TraceSink::now_us() : 0.0;
    try {
      translate_node(c, node);
      for (size_t i = 0; i < node.outputs.size(); ++i)
        if (!node.outputs[i].empty() && !c.has(node.outputs[i]))
          throw std::runtime_error("translator did not produce output '" + node.outputs[i] + "'");
    } catch (const NodeError&) {
      throw;
    } catch (const NotCompilableYet& e) {
      throw NotCompilableYet(node.label() + ": " + e.what());
    } catch (const NotCompilable& e) {
      throw NotCompilable(node.label() + ": " + e.what());
    } catch (const std::exception& e) {
      throw NodeError(node.label() + ": " + e.what());
    }
    if (sink) trace_node(*sink, node, c, start_us);
  };
  if (segments)
    segments->translate(ctx, plan, run_node, translate_node);
  else
    for (const auto& node : plan.nodes) run_node(ctx, node);
  // Values inside a compiled segment that nothing after it reads are not bound: not listed.
  if (produced)
    for (const auto& node : plan.nodes)
      for (const auto& out : node.outputs)
        if (auto v = out.empty() ? std::nullopt : ctx.bound(out)) produced->emplace_back(&node, *v);
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
  if (!segments_) return run_eager_once(inputs, sink, nullptr);
  std::string failure;
  bool memory = false;
  try {
    RunResult r = run_eager_once(inputs, sink, segments_.get());
    r.stats.segment_calls = segments_->take_calls();
    return r;
  } catch (const OutOfMemoryError&) {
    memory = true;
  } catch (const std::exception& e) {
    failure = e.what();
  }
  segments_->take_calls();
  // Without segments. Memory is not the segments' fault, but the error then names the node that
  // builds the tensor (a segment's inner values are not listed). Otherwise, if this run fails too,
  // the input is at fault and its error is the answer.
  RunResult r = run_eager_once(inputs, sink, nullptr);
  if (memory) return r;
  segments_.reset();
  std::cerr << "[ortmlx] fused node '" << plan_->name
            << "': compiled segments of the eager run failed, running every node on its own from "
               "now on: "
            << failure << std::endl;
  return r;
}

RunResult Executor::run_eager_once(const std::vector<mx::array>& inputs, TraceSink* sink,
                                   SegmentStore* segments) {
  RunResult r;
  std::vector<std::pair<const NodeDesc*, mx::array>> produced;
  std::vector<TranslationContext::Check> checks;
  auto t0 = Clock::now();
  {
    TraceSpan span(sink, "mlx.translate", "ep.phase");
    if (sink) span.args().add("fused_node", plan_->name).add("compiled", false);
    r.outputs = trace(inputs, &r.marks, sink, /*compiling=*/false, &produced, &checks, segments);
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
      walk.add_output(r.outputs[i], i < output_producers_.size() ? output_producers_[i] : nullptr);
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
  not_yet_ = false;
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
    not_yet_ = dynamic_cast<const NotCompilableYet*>(&e) != nullptr;
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
      for (const auto& o : r.outputs) walk.add_output(o);
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
      // A key due for graph replay is evaluated by its capture (same kernels, same results).
      const bool captured = replay_ && (!traced || config_.capture_after_hits == 0) &&
                            capture(key, inputs, *fn, fp, r);
      if (!captured) evaluate(r.outputs, fp);
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
    if (st.captured) {  // still running on MLX's stream: the caller reads the flags after its wait
      r.check_flags = flags;
      r.checks = replays_.at(key).checks;
      return true;
    }
    // A failed check is the input's fault: thrown past the eager fallback, the function stays.
    verify(flags, fn->checks());
  }
  return true;
}

bool Executor::replay(const std::string& key, const std::vector<mx::array>& inputs, TraceSink* sink,
                      RunResult& r) {
  auto it = replays_.find(key);
  if (it == replays_.end() || !it->second.run) return false;
  RunStats& st = r.stats;
  const auto t0 = Clock::now();
  {
    TraceSpan span(sink, "mlx.eval", "ep.phase");
    if (sink) span.args().add("fused_node", plan_->name).add("compiled", true).add("replay", true);
    try {
      r.outputs = device::replay_run(*it->second.run, inputs);
    } catch (const std::exception& e) {
      throw NodeError("fused node " + plan_->name + ": CUDA graph replay failed: " + e.what());
    }
  }
  st.eval_s = seconds_since(t0);
  st.cache = CacheOutcome::kHit;
  st.compiled = true;
  st.replayed = true;
  st.cache_entries = cache_.size();
  r.marks = it->second.marks;
  if (it->second.checks) {  // the stacked flags follow the outputs, read after the caller's wait
    r.check_flags = r.outputs.back();
    r.outputs.pop_back();
    r.checks = it->second.checks;
  }
  it->second.last_use = ++replay_clock_;
  return true;
}

bool Executor::capture(const std::string& key, const std::vector<mx::array>& inputs, CompiledFn& fn,
                       const GraphFootprint& fp, RunResult& r) {
  if (replays_.size() >= 16 * kMaxCapturedRuns)  // counts of keys never captured: bounded
    std::erase_if(replays_, [](const auto& kv) { return !kv.second.run; });
  ReplayEntry& entry = replays_[key];
  if (entry.refused) return false;
  if (config_.capture_after_hits != 0 && ++entry.hits < config_.capture_after_hits) return false;
  // A captured run keeps every array of its graph out of MLX's cache while it can be launched
  // (up to kMaxCapturedRuns of them): a run whose arrays would take more than an eighth of what
  // MLX can get is evaluated the usual way (such runs are GPU-bound; replay gains them little).
  const size_t room = available_memory(fp.total).bytes / 8;
  if (fp.total > room) {
    entry.refused = true;
    r.stats.replay_note = "its arrays take up to " + format_bytes(fp.total) +
                          ", more than the eighth of the memory MLX can get (" +
                          format_bytes(room) + ") a captured run may hold";
    return false;
  }
  dump_graph(plan_->name, r.outputs);  // what the capture launches, as evaluate() would dump it
  size_t held = 0;
  ReplayEntry* oldest = nullptr;
  for (auto& [k, e] : replays_) {
    if (!e.run) continue;
    ++held;
    if (oldest == nullptr || e.last_use < oldest->last_use) oldest = &e;
  }
  if (held >= kMaxCapturedRuns && oldest != nullptr) oldest->run.reset();
  try {
    device::Capture c = device::capture_run(r.outputs, inputs);
    if (!c.run) {
      entry.refused = true;
      r.stats.replay_note = c.why_not;
      return false;
    }
    r.stats.capture_blocks = device::capture_allocations(*c.run);
    entry.run = std::move(c.run);
    entry.marks = fn.marks();
    entry.checks = fn.checks().empty() ? nullptr : std::make_shared<const Checks>(fn.checks());
    entry.last_use = ++replay_clock_;
    r.stats.captured = true;
    return true;
  } catch (const device::CaptureFailed& e) {
    replay_ = false;
    replays_.clear();
    std::cerr << "[ortmlx] fused node '" << plan_->name
              << "': graph replay off for this node: " << e.what() << std::endl;
    r.stats.replay_note = e.what();
    r.outputs = fn(inputs);  // the failed capture's arrays hold nothing valid: build them again
    return false;
  }
}

void Executor::drop_compiled() {
  cache_.clear();
  replays_.clear();
  compiled_footprints_.clear();
}

RunResult Executor::rerun_after_miss(const std::string& key, const std::vector<mx::array>& inputs,
                                     TraceSink* sink, const std::string& why) {
  // The key's function baked in the assumption: traced again on the next run, which sees what
  // this eager run learns (e.g. a Loop's new iteration count).
  cache_.erase(key);
  replays_.erase(key);
  compiled_footprints_.erase(key);
  if (++speculation_misses_ >= kMaxSpeculationMisses && unroll_on_history_) {
    unroll_on_history_ = false;
    drop_compiled();
  }
  if (sink)
    sink->instant("mlx.speculation_missed", "ep.path",
                  TraceArgs().add("fused_node", plan_->name).add("reason", why));
  if (replay_) device::wait_uploads();
  RunResult r = run_eager(inputs, sink);
  r.stats.shape_key = key;
  r.stats.speculation_missed = true;
  r.stats.cache_entries = cache_.size();
  return r;
}

RunResult Executor::run(const std::vector<mx::array>& inputs, TraceSink* sink) {
  const std::string key = shape_key(inputs);
  RunResult compiled;
  compiled.stats.shape_key = key;
  if (replay_ && compile_enabled() && replay(key, inputs, sink, compiled)) return compiled;
  // Any other run may read inputs on the host: the copies an executor with graph replay left
  // unwaited (device::upload) must be done first.
  if (replay_) device::wait_uploads();
  if (!compile_enabled()) {
    RunResult r = run_eager(inputs, sink);
    r.stats.shape_key = key;
    return r;
  }
  std::string failure;
  bool out_of_memory = false;
  try {
    if (run_compiled(inputs, sink, compiled, failure, out_of_memory)) return compiled;
  } catch (const SpeculationMissed& e) {
    return rerun_after_miss(key, inputs, sink, e.what());
  }
  if (not_yet_ && ++not_yet_runs_ <= kMaxNotYet) {
    // The trace needs what an eager run learns (NotCompilableYet): compilation stays on.
    RunResult r = run_eager(inputs, sink);
    r.stats.shape_key = key;
    r.stats.cache = compiled.stats.cache;
    r.stats.compile_s += compiled.stats.compile_s;
    r.stats.cache_entries = cache_.size();
    return r;
  }

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
  drop_compiled();
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
