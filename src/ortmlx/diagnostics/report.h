// Per-session record of what the EP claimed, what ORT assigned to it, and what ran.
// Feeds CLAIM_DEBUG output, the VERBOSE summary and the JSON report file.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace ortmlx {

struct Refusal {
  size_t count = 0;
  std::string first_reason;
  std::vector<std::string> nodes;  // up to 16 names
};

struct ClaimSummary {
  size_t total_nodes = 0;  // nodes offered in this pass (not yet assigned to an EP)
  size_t claimed_nodes = 0;
  size_t clusters = 0;
  std::map<std::string, Refusal> refused;  // by qualified op type
  std::vector<std::string> claimed;        // node names
  // A later pass (ORT asks again after inlining a function the EP refused) shows the EP's own
  // fused nodes of earlier passes: kept, neither offered nor refused. Nodes of other EPs: counted.
  std::vector<std::string> kept_fused;  // names of this EP's fused nodes in the graph
  size_t other_ep_nodes = 0;
};

// What one Compute did (filled by plugin/compute.cpp from the executor's RunStats).
struct RunRecord {
  bool ok = true;         // false: the run failed (error returned to ORT)
  bool compiled = false;  // outputs came from a compiled function
  std::string cache;      // "HIT", "MISS", "RETRACE", or "" (eager run)
  bool fallback = false;  // compiled path failed, eager produced the outputs
  size_t evictions = 0;
  size_t cache_entries = 0;         // compiled functions held by the fused node after the run
  size_t segment_calls = 0;         // eager run: compiled segments called (engine/segments.h)
  bool captured = false;            // evaluated by capturing a CUDA graph (graph replay)
  size_t capture_blocks = 0;        // the capture's EP blocks that missed its block cache
  bool speculation_missed = false;  // a compiled run's assumption missed: redone eagerly
  bool replayed = false;            // a captured CUDA graph launched again
  bool replay_refused = false;      // its shape key will not be captured
  double translate_s = 0, compile_s = 0, eval_s = 0, copy_s = 0;
  double queue_s = 0;         // waiting for the MLX thread (other sessions' work, hand-off)
  double total_s = 0;         // wall time of the Compute call (includes waiting for MLX)
  size_t inputs_wrapped = 0;  // inputs MLX used in place (no copy)
  size_t inputs_copied = 0;
  uint64_t bytes_wrapped = 0, bytes_copied = 0, bytes_out = 0;
  size_t outputs = 0;
  std::vector<std::pair<std::string, bool>> paths;  // (label, fast) marks of this run
};

class SessionReport {
 public:
  // One GetCapability answer for a graph (keyed so repeated calls replace, not add up).
  void record_claim(const std::string& graph_key, ClaimSummary summary);
  // A fused node compiled at Compile, with the names and op types of the nodes inside it.
  void record_fused(const std::string& fused_name, std::vector<std::string> node_names,
                    std::vector<std::string> op_types);
  // Counters, times and paths of one Compute (one lock).
  void record_run(const std::string& fused_name, const RunRecord& run);
  void count(const std::string& counter, int64_t delta = 1);
  // Where this session runs: MLX's backend ("cpu" or "gpu"), its device name, where EP I/O lives
  // ("host" or "device") and the fp32 matmul mode.
  void set_backend(std::string backend, std::string device, std::string io, bool tf32);
  // Instruction set of the fused CPU kernels this session runs ("avx512", "avx2", "portable").
  void set_cpu_isa(std::string isa);
  // MLX's allocator after the latest run (process-wide figures: active, peak and cached bytes).
  void set_mlx_memory(size_t active, size_t peak, size_t cache);

  std::string claim_debug_text() const;  // refusals, for ONNXRUNTIME_EP_MLX_CLAIM_DEBUG
  std::string claim_debug_text(const std::string& graph_key) const;  // one graph
  std::string summary_text() const;  // for ONNXRUNTIME_EP_MLX_VERBOSE
  std::string to_json() const;       // for ONNXRUNTIME_EP_MLX_REPORT
  void write_json(const std::string& path) const;

  int64_t counter(const std::string& name) const;

 private:
  mutable std::mutex mu_;
  std::string backend_ = "cpu", device_, io_ = "host";
  bool tf32_ = false;
  std::string cpu_isa_;
  size_t mlx_active_ = 0, mlx_peak_ = 0, mlx_cache_ = 0;
  mutable std::mutex write_mu_;                 // serialises write_json
  std::map<std::string, ClaimSummary> claims_;  // latest GetCapability pass per graph
  // Earlier passes that answered differently: kept (a later pass still holds their fused nodes,
  // so their claims stand) or superseded (ORT started over, e.g. before an optimisation).
  std::map<std::string, std::pair<ClaimSummary, bool>> earlier_;  // key -> (pass, kept)
  // Nodes inside the fused nodes a pass kept from earlier passes (needs mu_ held).
  size_t kept_nodes(const ClaimSummary& c) const;
  struct Fused {
    std::vector<std::string> nodes;
    std::vector<std::string> op_types;
    size_t runs = 0;
    double seconds = 0;
    size_t compiled_runs = 0;
    size_t cache_entries = 0;
    bool eager_only = false;  // compilation switched off after a fallback
  };
  std::map<std::string, Fused> fused_;
  std::map<std::string, std::pair<size_t, bool>> paths_;  // label -> (count, fast)
  std::map<std::string, int64_t> counters_;
  std::map<std::string, double> times_;

  static void claim_text(std::ostream& os, const std::string& graph, const ClaimSummary& c);
};

std::string json_escape(const std::string& s);

}  // namespace ortmlx
