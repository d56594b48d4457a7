#include "ortmlx/plugin/compute.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <thread>

#include <mlx/memory.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "ortmlx/diagnostics/trace.h"
#include "ortmlx/engine/device/device_memory.h"
#include "ortmlx/engine/dtype.h"
#include "ortmlx/engine/mlx_thread.h"
#include "ortmlx/plugin/device_io.h"
#include "ortmlx/plugin/ep.h"

namespace ortmlx::plugin {

namespace mx = mlx::core;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Counts MLX arrays that may still point into ORT's input buffers. MLX's raw-pointer array
// constructor either uses the buffer in place (its deleter runs when the array dies) or copies
// it (its deleter runs right after the copy). Wrapped buffers are not owned by MLX, so MLX never
// donates or writes them (array::is_donatable requires owned data).
struct InputPins {
  std::shared_ptr<std::atomic<int>> live = std::make_shared<std::atomic<int>>(0);

  // After our references are dropped, MLX's scheduler may still hold task closures for a moment;
  // wait until every in-place array is gone, since ORT frees the buffers when Compute returns.
  void wait_released() const {
    if (live->load() <= 0) return;
    mx::synchronize();
    for (int i = 0; i < 10000 && live->load() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (live->load() > 0) {
      static std::atomic<bool> logged{false};
      if (!logged.exchange(true))
        std::cerr << "[ortmlx] warning: MLX still references an input buffer after Compute"
                  << std::endl;
    }
  }
};

struct InputDesc {
  const OrtValue* value = nullptr;
  std::string name;
};

// Wraps (or, where MLX cannot use the memory in place, copies) an ORT input tensor.
// Device inputs are only allocated here; `uploads` copies them in afterwards, all at once.
mx::array to_mlx(const InputDesc& in, InputPins& pins, RunRecord& rec,
                 std::vector<device::Upload>& uploads) {
  OrtTensorTypeAndShapeInfo* raw = nullptr;
  ORTMLX_CHECK(g_ort->GetTensorTypeAndShape(in.value, &raw));
  std::unique_ptr<OrtTensorTypeAndShapeInfo, TensorInfoDeleter> tsi(raw);
  ONNXTensorElementDataType et{};
  ORTMLX_CHECK(g_ort->GetTensorElementType(tsi.get(), &et));
  size_t rank = 0;
  ORTMLX_CHECK(g_ort->GetDimensionsCount(tsi.get(), &rank));
  std::vector<int64_t> dims(rank);
  if (rank) ORTMLX_CHECK(g_ort->GetDimensions(tsi.get(), dims.data(), rank));
  const ElemType type = static_cast<ElemType>(et);
  auto dtype = to_mlx_dtype(type);
  if (!dtype)
    throw OrtError(ORT_INVALID_ARGUMENT,
                   "input '" + in.name + "' has unsupported type " + elem_type_name(type));
  mx::Shape shape;
  size_t numel = 1;
  for (int64_t d : dims) {
    if (d > std::numeric_limits<int32_t>::max())
      throw OrtError(ORT_INVALID_ARGUMENT, "input '" + in.name + "' has a dimension beyond int32");
    shape.push_back(static_cast<int32_t>(d));
    numel *= static_cast<size_t>(d);
  }
  const size_t bytes = numel * elem_type_size(type);
  if (bytes == 0) return mx::zeros(shape, *dtype);
  const void* data = nullptr;
  ORTMLX_CHECK(g_ort->GetTensorData(in.value, &data));
  if (on_gpu(in.value)) {
    // ORT's device buffer: one device-to-device copy into an MLX-owned buffer (device_memory.h
    // says why not in place).
    rec.inputs_copied += 1;
    rec.bytes_copied += bytes;
    mx::array a = device::new_device_array(shape, *dtype);
    uploads.push_back({a, data});
    return a;
  }
  auto live = pins.live;
  live->fetch_add(1);
  std::optional<mx::array> wrapped;
  try {
    wrapped.emplace(const_cast<void*>(data), shape, *dtype, [live](void*) { live->fetch_sub(1); });
  } catch (...) {
    live->fetch_sub(1);  // (a deleter that also ran only makes the count negative: harmless)
    throw;
  }
  mx::array a = std::move(*wrapped);
  if (static_cast<const void*>(a.data<uint8_t>()) == data) {
    rec.inputs_wrapped += 1;
    rec.bytes_wrapped += bytes;
  } else {
    rec.inputs_copied += 1;
    rec.bytes_copied += bytes;
  }
  return a;
}

// Host outputs are copied here; device outputs are listed in `copies` and copied all at once
// (device::copy_out reads MLX's device buffers in place; it never migrates them to the host).
// `device_read`: the array's buffer must not move (a captured run's, graph_replay.h), so a host
// output is copied from the device too, where a.data() would move the buffer to unified memory.
void to_ort(const mx::array& a, OrtKernelContext* ctx, size_t index, RunRecord& rec,
            std::vector<device::CopyOut>& copies, bool device_read) {
  std::vector<int64_t> dims(a.shape().begin(), a.shape().end());
  OrtValue* out = nullptr;
  ORTMLX_CHECK(g_ort->KernelContext_GetOutput(ctx, index, dims.data(), dims.size(), &out));
  rec.outputs += 1;
  const size_t bytes = a.nbytes();
  if (bytes == 0) return;
  void* dst = nullptr;
  ORTMLX_CHECK(g_ort->GetTensorMutableData(out, &dst));
  if (on_gpu(out))
    copies.push_back({a, dst});
  else if (device_read)
    copies.push_back({a, dst, /*to_host=*/true});
  else
    std::memcpy(dst, a.data<uint8_t>(), bytes);
  rec.bytes_out += bytes;
}

}  // namespace

MlxComputeInfo::MlxComputeInfo(MlxEp& ep, std::shared_ptr<Plan> plan,
                               std::vector<std::string> all_inputs)
    : OrtNodeComputeInfo{},
      ep_(ep),
      executor_(std::make_unique<Executor>(std::move(plan), ExecConfig::from(ep.options()))),
      all_inputs_(std::move(all_inputs)) {
  ort_version_supported = ORT_API_VERSION;
  CreateState = CreateStateImpl;
  Compute = ComputeImpl;
  ReleaseState = ReleaseStateImpl;
}

MlxComputeInfo::~MlxComputeInfo() {
  try {
    MlxThread::get().run([&] { executor_.reset(); });
  } catch (...) {
    // teardown is best effort; never throw from a destructor
  }
}

OrtStatus* MlxComputeInfo::CreateStateImpl(OrtNodeComputeInfo* self, OrtNodeComputeContext*,
                                           void** state) noexcept {
  *state = self;
  return nullptr;
}

void MlxComputeInfo::ReleaseStateImpl(OrtNodeComputeInfo*, void*) noexcept {}

OrtStatus* MlxComputeInfo::ComputeImpl(OrtNodeComputeInfo* self, void*,
                                       OrtKernelContext* kernel_context) noexcept {
  auto* info = static_cast<MlxComputeInfo*>(self);
  const std::string where = "Compute of fused node " + info->executor_->plan().name;
  return guard(where.c_str(), [&] { info->compute(kernel_context); });
}

void MlxComputeInfo::compute(OrtKernelContext* kernel_context) {
  const auto start = Clock::now();
  TraceSink* sink = ep_.trace();
  const double start_us = sink ? TraceSink::now_us() : 0.0;
  const Plan& plan = executor_->plan();

  size_t n_in = 0;
  ORTMLX_CHECK(g_ort->KernelContext_GetInputCount(kernel_context, &n_in));
  // ORT drops constant initializers from the fused node's inputs; accept either layout.
  const bool with_constants = n_in == all_inputs_.size() && n_in != plan.input_names.size();
  if (n_in != plan.input_names.size() && !with_constants)
    throw OrtError(ORT_FAIL, "expected " + std::to_string(plan.input_names.size()) +
                                 " inputs, ORT passed " + std::to_string(n_in));
  std::vector<InputDesc> descs;
  descs.reserve(plan.input_names.size());
  for (size_t i = 0; i < n_in; ++i) {
    const std::string& name = with_constants ? all_inputs_[i] : plan.input_names[i];
    if (with_constants && plan.constant_arrays.count(name)) continue;
    const OrtValue* value = nullptr;
    ORTMLX_CHECK(g_ort->KernelContext_GetInput(kernel_context, i, &value));
    if (value == nullptr) throw OrtError(ORT_FAIL, "input '" + name + "' is missing");
    descs.push_back({value, name});
  }

  RunRecord rec;
  RunStats stats;
  double queue_us = 0;
  try {
    MlxThread::get().run([&] {
      rec.queue_s = seconds_since(start);
      if (sink) {
        queue_us = TraceSink::now_us() - start_us;
        sink->name_thread("ortmlx MLX thread");
      }
      const size_t evicted_before = executor_->cache().evictions();
      InputPins pins;
      {
        std::vector<mx::array> inputs;
        inputs.reserve(descs.size());
        auto t0 = Clock::now();
        {
          TraceSpan span(sink, "mlx.copy", "ep.phase");
          std::vector<device::Upload> uploads;
          for (const auto& d : descs) inputs.push_back(to_mlx(d, pins, rec, uploads));
          // An executor with graph replay waits for the copies itself unless it replays.
          if (!uploads.empty())
            device::upload(uploads, /*wait=*/!executor_->graph_replay_enabled());
          if (sink)
            span.args()
                .add("direction", "in")
                .add("wrapped", rec.inputs_wrapped)
                .add("copied", rec.inputs_copied)
                .add("bytes", rec.bytes_wrapped + rec.bytes_copied);
        }
        rec.copy_s += std::chrono::duration<double>(Clock::now() - t0).count();
        RunResult result;
        try {
          result = executor_->run(inputs, sink);
        } catch (...) {
          rec.evictions = executor_->cache().evictions() - evicted_before;
          throw;
        }
        // A captured or replayed run that assumed runtime values (a Loop unrolled on its
        // latest iteration count) must hold before the outputs' shapes are given to ORT: its
        // flags are read first (one more wait), and a miss redoes the run eagerly.
        if (result.check_flags && std::any_of(result.checks->begin(), result.checks->end(),
                                              [](const auto& c) { return c.speculation; })) {
          std::vector<uint8_t> check_ok(result.check_flags->size());
          device::copy_out({{*result.check_flags, check_ok.data(), /*to_host=*/true}});
          try {
            executor_->verify_flags(check_ok, *result.checks);
            result.check_flags.reset();
          } catch (const SpeculationMissed& e) {
            const std::string key = result.stats.shape_key;
            result = RunResult{};
            result = executor_->rerun_after_miss(key, inputs, sink, e.what());
          }
        }
        stats = result.stats;
        t0 = Clock::now();
        {
          TraceSpan span(sink, "mlx.copy", "ep.phase");
          std::vector<device::CopyOut> copies;
          for (size_t i = 0; i < result.outputs.size(); ++i)
            to_ort(result.outputs[i], kernel_context, i, rec, copies,
                   result.stats.captured || result.stats.replayed);
          // A captured or replayed run's runtime checks: their flags come back with the outputs.
          std::vector<uint8_t> check_ok;
          if (result.check_flags) {
            check_ok.resize(result.check_flags->size());
            copies.push_back({*result.check_flags, check_ok.data(), /*to_host=*/true});
          }
          device::copy_out(copies);
          if (result.check_flags) executor_->verify_flags(check_ok, *result.checks);
          if (sink) span.args().add("direction", "out").add("bytes", rec.bytes_out);
        }
        const double copy_out_s = std::chrono::duration<double>(Clock::now() - t0).count();
        rec.copy_s += copy_out_s;
        if (stats.replayed) {
          // A replay only launches the graph: the host waits for it inside the output copy. The
          // graph's GPU time is the run's evaluation, so it moves from the copy to eval.
          const double gpu_s = executor_->replayed_gpu_seconds(stats.shape_key);
          if (gpu_s > stats.eval_s) {
            const double moved = std::min(gpu_s - stats.eval_s, copy_out_s);
            stats.eval_s += moved;
            rec.copy_s -= moved;
          }
        }
        for (const auto& mark : result.marks) {
          rec.paths.emplace_back(mark.label, mark.fast);
          if (!sink) continue;
          std::string op;
          for (const auto& n : plan.nodes)
            if (n.name == mark.node) op = n.qualified_op();
          if (mark.fast) {
            sink->instant(
                "mlx.fast_path", "op.fast",
                TraceArgs().add("node", mark.node).add("op", op).add("kernel", mark.label));
          } else {
            sink->instant(
                "composed-path: " + op, "op.composed",
                TraceArgs().add("node", mark.node).add("op", op).add("reason", mark.label));
          }
        }
        rec.evictions = executor_->cache().evictions() - evicted_before;
        // `result` and `inputs` die here: no MLX array may outlive Compute.
      }
      pins.wait_released();
      ep_.report().set_mlx_memory(mx::get_active_memory(), mx::get_peak_memory(),
                                  mx::get_cache_memory());
    });
  } catch (...) {
    rec.ok = false;
    rec.total_s = seconds_since(start);
    ep_.report().record_run(plan.name, rec);
    if (sink)
      sink->span("mlx.subgraph", "ep", start_us,
                 TraceArgs()
                     .add("fused_node", plan.name)
                     .add("error", true)
                     .add("session", ep_.session_id()));
    ep_.flush_report();
    throw;
  }
  rec.compiled = stats.compiled;
  rec.cache = cache_outcome_name(stats.cache);
  rec.fallback = stats.fallback;
  rec.cache_entries = stats.cache_entries;
  rec.segment_calls = stats.segment_calls;
  rec.captured = stats.captured;
  rec.capture_blocks = stats.capture_blocks;
  rec.speculation_missed = stats.speculation_missed;
  rec.replayed = stats.replayed;
  rec.replay_refused = !stats.replay_note.empty();
  rec.translate_s = stats.translate_s;
  rec.compile_s = stats.compile_s;
  rec.eval_s = stats.eval_s;
  rec.total_s = seconds_since(start);
  ep_.report().record_run(plan.name, rec);
  if (sink) {
    TraceArgs args;
    args.add("fused_node", plan.name)
        .add("nodes", plan.nodes.size())
        .add("path", stats.replayed   ? "replay"
                     : stats.compiled ? "general"
                                      : "eager")
        .add("cache", stats.compiled || stats.fallback ? cache_outcome_name(stats.cache) : "EAGER")
        .add("shape_key", stats.shape_key)
        .add("shape_keyed", plan.shape_keyed)
        .add("segment_calls", stats.segment_calls)
        .add("queue_us", queue_us)
        .add("session", ep_.session_id());
    if (stats.fallback) args.add("fallback", stats.fallback_reason);
    if (stats.captured) args.add("captured", true);
    if (!stats.replay_note.empty()) args.add("replay_refused", stats.replay_note);
    sink->span("mlx.subgraph", "ep", start_us, args);
  }
  ep_.flush_report();
}

}  // namespace ortmlx::plugin
