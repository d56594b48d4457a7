// Per-session record of what the EP claimed, what ORT assigned to it, and what ran.
// Feeds CLAIM_DEBUG output, the VERBOSE summary and the JSON report file.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace ortmlx {

struct Refusal {
  size_t count = 0;
  std::string first_reason;
  std::vector<std::string> nodes;  // up to 16 names
};

struct ClaimSummary {
  size_t total_nodes = 0;
  size_t claimed_nodes = 0;
  size_t clusters = 0;
  std::map<std::string, Refusal> refused;  // by qualified op type
  std::vector<std::string> claimed;        // node names
};

class SessionReport {
 public:
  // One GetCapability answer for a graph (keyed so repeated calls replace, not add up).
  void record_claim(const std::string& graph_key, ClaimSummary summary);
  // A fused node compiled at Compile, with the names and op types of the nodes inside it.
  void record_fused(const std::string& fused_name, std::vector<std::string> node_names,
                    std::vector<std::string> op_types);
  void record_compute(const std::string& fused_name, double seconds);
  void record_path(const std::string& label, bool fast);
  void count(const std::string& counter, int64_t delta = 1);
  void add_time(const std::string& phase, double seconds);

  std::string claim_debug_text() const;  // refusals, for ONNXRUNTIME_EP_MLX_CLAIM_DEBUG
  std::string summary_text() const;      // for ONNXRUNTIME_EP_MLX_VERBOSE
  std::string to_json() const;           // for ONNXRUNTIME_EP_MLX_REPORT
  void write_json(const std::string& path) const;

  int64_t counter(const std::string& name) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, ClaimSummary> claims_;
  struct Fused {
    std::vector<std::string> nodes;
    std::vector<std::string> op_types;
    size_t runs = 0;
    double seconds = 0;
  };
  std::map<std::string, Fused> fused_;
  std::map<std::string, std::pair<size_t, bool>> paths_;  // label -> (count, fast)
  std::map<std::string, int64_t> counters_;
  std::map<std::string, double> times_;
};

std::string json_escape(const std::string& s);

}  // namespace ortmlx
