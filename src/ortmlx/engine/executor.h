// Executor: runs a Plan on live inputs, with ONE mlx::eval at the subgraph boundary.
//
// Compiled path (default): the plan is traced into a function and compiled with mlx::compile
// once per input signature (shape key = dtypes + shapes of the live inputs), kept in a bounded
// LRU (CompileCache). Any failure while tracing, compiling or evaluating the compiled function
// falls back to eager translation; if the eager run succeeds, the failure was specific to
// compilation: the plan runs eagerly from then on (logged once on stderr, counted). If the eager
// run fails too, its error is reported and compilation stays on (bad input is not a compile
// problem).
// Eager path (ONNXRUNTIME_EP_MLX_NO_COMPILE / NO_GENERAL_COMPILE, or after a fallback): every run
// translates each node through a TranslationContext, then evaluates. Where compilation is on but
// the plan cannot be traced whole (it reads runtime values on the host), the runs of nodes between
// those reads are compiled segments (engine/segments.h); a run that fails with segments and
// succeeds without them switches them off for the plan (logged once on stderr).
// Runtime checks (TranslationContext::require): each check is one bool computed in the graph; the
// executor evaluates them with the outputs (one stacked array, an extra output of the compiled
// function) and throws NodeError naming the node when one is false. A failed check is the input's
// fault: the compiled function stays cached and compilation stays on.
// Speculation (TranslationContext::speculate): a trace may assume runtime values (a Loop unrolled
// on its latest eager run's iteration count); each assumption is a check marked `speculation`.
// A run whose assumption fails is redone eagerly (SpeculationMissed, rerun_after_miss) and its
// key traced again on the next run; a trace that needs an eager run first (NotCompilableYet)
// keeps compilation on.
// Memory guard: before either path evaluates, the lazy graph is walked for the largest array it
// will allocate; one that MLX cannot get is an OutOfMemoryError, raised before anything is
// allocated (MLX's CPU backend would crash on it). Memory is never a compile problem: a compiled
// run that fails for memory does not switch the plan to eager (docs/ENGINE.md, "Memory guard").
//
// Threading: an Executor is not thread-safe; it is created, run and destroyed on the MLX thread
// (engine/mlx_thread.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <mlx/array.h>

#include "ortmlx/engine/compile_cache.h"
#include "ortmlx/engine/device/graph_replay.h"
#include "ortmlx/engine/footprint.h"
#include "ortmlx/engine/plan.h"
#include "ortmlx/engine/segments.h"
#include "ortmlx/engine/translation_context.h"

namespace ortmlx {

class TraceSink;

// An error raised while building or running one node; the message names the node.
class NodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A run whose tensors MLX cannot allocate (found by the memory guard, or an allocation failure
// MLX reported while evaluating). The message names the node and the bytes needed vs available.
class OutOfMemoryError : public NodeError {
 public:
  using NodeError::NodeError;
};

// A compiled run whose trace assumed runtime values that this run's inputs do not have
// (TranslationContext::speculate): not an error; the run is redone eagerly.
class SpeculationMissed : public NodeError {
 public:
  using NodeError::NodeError;
};

enum class CacheOutcome { kNone, kHit, kMiss, kRetrace };
// "HIT", "MISS", "RETRACE" (the reference EP's names), "" for kNone (eager run).
const char* cache_outcome_name(CacheOutcome c);

struct ExecConfig {
  bool compile = true;     // use the shape-keyed compiled path
  size_t cache_size = 16;  // compiled functions kept (LRU)
  bool fuse = true;        // let mlx::compile generate fused kernels
  // compiled segments in eager runs (engine/segments.h; ONNXRUNTIME_EP_MLX_EAGER_SEGMENTS=0: off)
  bool segments = true;
  // Graph replay captures a key on this cache hit (ONNXRUNTIME_EP_MLX_GRAPH_REPLAY=first: 0, the
  // key's first compiled run, traced or not; a testing aid that captures every compiled run).
  size_t capture_after_hits = 2;
  // From the session's options; `fuse` auto-resolves against MLX's default device.
  static ExecConfig from(const EpOptions& options);
};

struct RunStats {
  bool compiled = false;  // outputs came from a compiled function
  CacheOutcome cache = CacheOutcome::kNone;
  bool fallback = false;  // the compiled path failed; eager produced the outputs
  std::string fallback_reason;
  std::string shape_key;
  size_t evictions = 0;       // LRU evictions caused by this run
  size_t cache_entries = 0;   // compiled functions held after this run
  double translate_s = 0;     // graph build: eager translation, or compiled replay
  double compile_s = 0;       // trace + mlx::compile (first call of a compiled function)
  double eval_s = 0;          // mlx::eval of the outputs
  size_t segment_calls = 0;   // eager run: compiled segments called (engine/segments.h)
  bool captured = false;      // evaluated by capturing a CUDA graph (device/graph_replay.h)
  size_t capture_blocks = 0;  // a capture's blocks missing the EP's cache (capture_allocations)
  bool replayed = false;      // a captured graph was launched again: no trace, no mlx::eval
  // The compiled trace's assumption about runtime values missed: this run was redone eagerly.
  bool speculation_missed = false;
  std::string replay_note;  // why this run's key will not be captured ("" if it may be)
};

using Checks = std::vector<TranslationContext::Check>;

struct RunResult {
  std::vector<mlx::core::array> outputs;  // evaluated, row-contiguous, in plan output order
  std::vector<TranslationContext::PathMark> marks;
  RunStats stats;
  // A captured or replayed run queues its work without waiting, so its runtime checks are read
  // by the caller after its own wait (the flags copied with the outputs): when set, pass their
  // bytes to Executor::verify_flags before the outputs count.
  std::optional<mlx::core::array> check_flags;
  std::shared_ptr<const Checks> checks;
};

class Executor {
 public:
  explicit Executor(std::shared_ptr<const Plan> plan, ExecConfig config = {});
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  const Plan& plan() const { return *plan_; }

  // inputs follow plan().input_names. Throws NodeError naming the failing node. When `trace`
  // is set, phase spans (mlx.translate/compile/eval) and per-node build spans are recorded.
  RunResult run(const std::vector<mlx::core::array>& inputs, TraceSink* trace = nullptr);

  // Traces the plan into (unevaluated) output arrays. `compiling` tells translators that the
  // inputs are mlx::compile placeholders.
  // `produced`, when set, receives each node's output arrays with their node (memory guard).
  // `checks`, when set, receives the runtime checks; when there are any, one more array follows
  // the outputs: a bool per check, in order.
  // `segments`, when set (an eager trace), compiles the runs of nodes between host reads.
  std::vector<mlx::core::array> trace(
      const std::vector<mlx::core::array>& inputs, std::vector<TranslationContext::PathMark>* marks,
      TraceSink* sink = nullptr, bool compiling = false,
      std::vector<std::pair<const NodeDesc*, mlx::core::array>>* produced = nullptr,
      std::vector<TranslationContext::Check>* checks = nullptr,
      SegmentStore* segments = nullptr) const;

  // Graph replay (device/graph_replay.h): a key is captured on its capture_after_hits-th cache
  // hit; at most kMaxCapturedRuns captured runs are kept (least recently launched dropped first).
  static constexpr size_t kMaxCapturedRuns = 4;
  bool graph_replay_enabled() const { return replay_; }

  // Throws NodeError for the first false flag (one byte per check, in order); SpeculationMissed
  // when that flag is a speculation's (TranslationContext::speculate).
  void verify_flags(const std::vector<uint8_t>& ok, const Checks& checks) const;
  // After a captured or replayed run of `key` missed its speculation (verify_flags threw
  // SpeculationMissed): drops that key's compiled function and captured run and redoes the run
  // eagerly. Too many misses switch speculative unrolling off for this plan.
  RunResult rerun_after_miss(const std::string& key, const std::vector<mlx::core::array>& inputs,
                             TraceSink* sink, const std::string& why);
  // Misses after which traces stop unrolling Loops on their latest iteration count.
  static constexpr size_t kMaxSpeculationMisses = 4;
  // Compiled attempts that wanted an eager run first (NotCompilableYet) before compilation is
  // switched off like any NotCompilable.
  static constexpr size_t kMaxNotYet = 2;

  // GPU seconds of the latest launch of `key`'s captured run (device::replay_gpu_seconds), after
  // the caller waited for it; negative when the key has no captured run or the time is unknown.
  double replayed_gpu_seconds(const std::string& key);

  // Whether the next run may use the compiled path.
  bool compile_enabled() const { return config_.compile && !compile_disabled_; }
  // Why compilation was switched off for this plan after a fallback ("" when it was not).
  const std::string& disabled_reason() const { return disabled_reason_; }
  const CompileCache& cache() const { return cache_; }

 private:
  // The eager run: with compiled segments where they are on; a failure with them is retried
  // without, and switches them off when that succeeds.
  RunResult run_eager(const std::vector<mlx::core::array>& inputs, TraceSink* sink);
  RunResult run_eager_once(const std::vector<mlx::core::array>& inputs, TraceSink* sink,
                           SegmentStore* segments);
  // False (with `failure` set) when the compiled path could not produce the outputs;
  // `out_of_memory` tells that memory, not compilation, was the reason.
  bool run_compiled(const std::vector<mlx::core::array>& inputs, TraceSink* sink, RunResult& r,
                    std::string& failure, bool& out_of_memory);
  // Launches the captured run of `key`, if there is one (false: none).
  bool replay(const std::string& key, const std::vector<mlx::core::array>& inputs, TraceSink* sink,
              RunResult& r);
  // Evaluates r.outputs (a cache hit of `fn`, whose arrays `fp` counts) by capturing them, when
  // `key` is due; false when the caller must evaluate them (r.outputs rebuilt if a capture failed
  // midway).
  bool capture(const std::string& key, const std::vector<mlx::core::array>& inputs, CompiledFn& fn,
               const GraphFootprint& fp, RunResult& r);
  // Drops every compiled function, its footprint and its captured run.
  void drop_compiled();
  // Throws OutOfMemoryError when the largest array of `fp` cannot be allocated.
  void check_memory(const GraphFootprint& fp) const;
  // Reads the evaluated bools of the runtime checks; throws NodeError for the first false one.
  void verify(const mlx::core::array& flags,
              const std::vector<TranslationContext::Check>& checks) const;
  // Evaluates `outputs` (eval_outputs), turning MLX's allocation failures into OutOfMemoryError.
  void evaluate(std::vector<mlx::core::array>& outputs, const GraphFootprint& fp) const;

  std::shared_ptr<const Plan> plan_;
  ExecConfig config_;
  CompileCache cache_;
  bool compile_disabled_ = false;
  std::string disabled_reason_;
  bool not_compilable_ = false;  // the last compiled attempt failed with NotCompilable
  bool not_yet_ = false;         // ... with NotCompilableYet
  size_t not_yet_runs_ = 0;      // compiled attempts that failed with NotCompilableYet
  size_t speculation_misses_ = 0;
  bool unroll_on_history_ = true;  // TranslationContext::unrolls_loops_on_history
  // Compiled segments of eager runs: present where compilation is on, dropped for good when a
  // run fails with them and succeeds without.
  std::unique_ptr<SegmentStore> segments_;
  TraceSink* current_sink_ = nullptr;  // sink of the run in progress (read by compiled traces)
  // The node that produces each fused output (null for a fused input passed through).
  std::vector<const NodeDesc*> output_producers_;
  // Footprint of each compiled function's graph by shape key: a compiled function replays the
  // same graph for its key, so the walk runs once per key (bounded; cleared with the cache).
  std::unordered_map<std::string, GraphFootprint> compiled_footprints_;
  // Graph replay: per shape key, the cache hits seen and the captured run. Off for good after a
  // capture fails midway.
  struct ReplayEntry {
    size_t hits = 0;
    bool refused = false;  // capture_run said why not: never tried again for this key
    device::CapturedRunPtr run;
    std::vector<TranslationContext::PathMark> marks;
    std::shared_ptr<const Checks> checks;  // the compiled function's, when it has any
    uint64_t last_use = 0;
  };
  bool replay_ = false;
  uint64_t replay_clock_ = 0;
  std::unordered_map<std::string, ReplayEntry> replays_;
};

}  // namespace ortmlx
