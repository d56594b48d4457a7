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
// translates each node through a TranslationContext, then evaluates.
//
// Threading: an Executor is not thread-safe; it is created, run and destroyed on the MLX thread
// (engine/mlx_thread.h).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <mlx/array.h>

#include "ortmlx/engine/compile_cache.h"
#include "ortmlx/engine/plan.h"
#include "ortmlx/engine/translation_context.h"

namespace ortmlx {

class TraceSink;

// An error raised while building or running one node; the message names the node.
class NodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class CacheOutcome { kNone, kHit, kMiss, kRetrace };
// "HIT", "MISS", "RETRACE" (the reference EP's names), "" for kNone (eager run).
const char* cache_outcome_name(CacheOutcome c);

struct ExecConfig {
  bool compile = true;     // use the shape-keyed compiled path
  size_t cache_size = 16;  // compiled functions kept (LRU)
  bool fuse = true;        // let mlx::compile generate fused kernels
  // From the session's options; `fuse` auto-resolves against MLX's default device.
  static ExecConfig from(const EpOptions& options);
};

// The auto fusion policy (compile_fuse=auto): fuse on every device (measured; docs/ENGINE.md).
bool default_compile_fuse();

struct RunStats {
  bool compiled = false;  // outputs came from a compiled function
  CacheOutcome cache = CacheOutcome::kNone;
  bool fallback = false;  // the compiled path failed; eager produced the outputs
  std::string fallback_reason;
  std::string shape_key;
  size_t evictions = 0;      // LRU evictions caused by this run
  size_t cache_entries = 0;  // compiled functions held after this run
  double translate_s = 0;    // graph build: eager translation, or compiled replay
  double compile_s = 0;      // trace + mlx::compile (first call of a compiled function)
  double eval_s = 0;         // mlx::eval of the outputs
};

struct RunResult {
  std::vector<mlx::core::array> outputs;  // evaluated, row-contiguous, in plan output order
  std::vector<TranslationContext::PathMark> marks;
  RunStats stats;
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
  std::vector<mlx::core::array> trace(const std::vector<mlx::core::array>& inputs,
                                      std::vector<TranslationContext::PathMark>* marks,
                                      TraceSink* sink = nullptr, bool compiling = false) const;

  // Whether the next run may use the compiled path.
  bool compile_enabled() const { return config_.compile && !compile_disabled_; }
  // Why compilation was switched off for this plan after a fallback ("" when it was not).
  const std::string& disabled_reason() const { return disabled_reason_; }
  const CompileCache& cache() const { return cache_; }

 private:
  RunResult run_eager(const std::vector<mlx::core::array>& inputs, TraceSink* sink);
  // False (with `failure` set) when the compiled path could not produce the outputs.
  bool run_compiled(const std::vector<mlx::core::array>& inputs, TraceSink* sink, RunResult& r,
                    std::string& failure);

  std::shared_ptr<const Plan> plan_;
  ExecConfig config_;
  CompileCache cache_;
  bool compile_disabled_ = false;
  std::string disabled_reason_;
  TraceSink* current_sink_ = nullptr;  // sink of the run in progress (read by compiled traces)
};

}  // namespace ortmlx
