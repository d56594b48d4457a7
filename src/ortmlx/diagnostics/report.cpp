#include "ortmlx/diagnostics/report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include <unistd.h>

namespace ortmlx {

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

void SessionReport::record_claim(const std::string& graph_key, ClaimSummary summary) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_["getcapability.calls"] += 1;
  auto it = claims_.find(graph_key);
  if (it != claims_.end()) {
    // ORT asks again for the same graph after changing it (e.g. it inlined a refused function
    // call node). Keep the earlier pass when its answer differs, so that its refusals stay
    // visible (JSON report); the session summary counts only the latest pass of each graph.
    const ClaimSummary& old = it->second;
    bool same = old.total_nodes == summary.total_nodes && old.claimed == summary.claimed &&
                old.refused.size() == summary.refused.size();
    if (same)
      for (const auto& [op, r] : old.refused) {
        auto jt = summary.refused.find(op);
        same = same && jt != summary.refused.end() && jt->second.count == r.count;
      }
    if (!same) {
      const bool kept = !summary.kept_fused.empty();
      earlier_[graph_key + " (earlier pass " + std::to_string(earlier_.size() + 1) + ")"] = {old,
                                                                                             kept};
    }
  }
  claims_[graph_key] = std::move(summary);
}

size_t SessionReport::kept_nodes(const ClaimSummary& c) const {
  size_t n = 0;
  for (const auto& name : c.kept_fused) {
    auto it = fused_.find(name);
    if (it != fused_.end()) n += it->second.nodes.size();
  }
  return n;
}

void SessionReport::record_fused(const std::string& fused_name, std::vector<std::string> nodes,
                                 std::vector<std::string> op_types) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& f = fused_[fused_name];
  f.nodes = std::move(nodes);
  f.op_types = std::move(op_types);
}

void SessionReport::record_run(const std::string& fused_name, const RunRecord& run) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_["compute.runs"] += 1;
  times_["compute"] += run.total_s;
  times_["copy"] += run.copy_s;
  times_["translate"] += run.translate_s;
  times_["compile"] += run.compile_s;
  times_["eval"] += run.eval_s;
  times_["queue"] += run.queue_s;
  if (run.cache == "HIT")
    counters_["cache.hit"] += 1;
  else if (run.cache == "MISS")
    counters_["cache.miss"] += 1;
  else if (run.cache == "RETRACE")
    counters_["cache.retrace"] += 1;
  if (run.evictions) counters_["cache.evict"] += static_cast<int64_t>(run.evictions);
  if (run.fallback) counters_["compile.fallback"] += 1;
  auto& f = fused_[fused_name];
  if (!run.ok) {
    counters_["compute.error"] += 1;
    return;
  }
  counters_[run.compiled ? "compute.compiled" : "compute.eager"] += 1;
  if (run.segment_calls) counters_["eager.segment"] += static_cast<int64_t>(run.segment_calls);
  if (run.captured) counters_["graph_replay.capture"] += 1;
  if (run.speculation_missed) counters_["compile.speculation_miss"] += 1;
  if (run.capture_blocks)
    counters_["graph_replay.capture_blocks"] += static_cast<int64_t>(run.capture_blocks);
  if (run.replayed) counters_["graph_replay.replay"] += 1;
  if (run.replay_refused) counters_["graph_replay.refused"] += 1;
  counters_["input.wrap"] += static_cast<int64_t>(run.inputs_wrapped);
  counters_["input.copy"] += static_cast<int64_t>(run.inputs_copied);
  counters_["input.wrap_bytes"] += static_cast<int64_t>(run.bytes_wrapped);
  counters_["input.copy_bytes"] += static_cast<int64_t>(run.bytes_copied);
  counters_["output.copy"] += static_cast<int64_t>(run.outputs);
  counters_["output.bytes"] += static_cast<int64_t>(run.bytes_out);
  f.runs += 1;
  f.seconds += run.total_s;
  if (run.compiled) f.compiled_runs += 1;
  f.cache_entries = run.cache_entries;
  if (run.fallback) f.eager_only = true;
  for (const auto& [label, fast] : run.paths) {
    auto& p = paths_[label];
    p.first += 1;
    p.second = fast;
  }
}

void SessionReport::count(const std::string& counter, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_[counter] += delta;
}

int64_t SessionReport::counter(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counters_.find(name);
  return it == counters_.end() ? 0 : it->second;
}

void SessionReport::claim_text(std::ostream& os, const std::string& graph, const ClaimSummary& c) {
  os << "[ortmlx] claim: graph '" << graph << "': " << c.claimed_nodes << "/" << c.total_nodes
     << " nodes claimed in " << c.clusters << " cluster(s)";
  if (!c.kept_fused.empty())
    os << "; " << c.kept_fused.size() << " fused node(s) of an earlier pass kept";
  os << "\n";
  for (const auto& [op, r] : c.refused) {
    os << "[ortmlx]   refused " << op << " x" << r.count << ": " << r.first_reason << " [";
    for (size_t i = 0; i < r.nodes.size(); ++i) os << (i ? ", " : "") << r.nodes[i];
    if (r.count > r.nodes.size()) os << ", ... " << (r.count - r.nodes.size()) << " more";
    os << "]\n";
  }
}

std::string SessionReport::claim_debug_text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  for (const auto& [graph, c] : claims_) claim_text(os, graph, c);
  return os.str();
}

std::string SessionReport::claim_debug_text(const std::string& graph_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  auto it = claims_.find(graph_key);
  if (it != claims_.end()) claim_text(os, it->first, it->second);
  return os.str();
}

namespace {

std::string pct(size_t part, size_t whole) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1)
     << (whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0) << "%";
  return os.str();
}

std::string mib(int64_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << static_cast<double>(bytes) / (1024.0 * 1024.0)
     << " MiB";
  return os.str();
}

std::string ms(double seconds) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(3) << seconds * 1e3 << "ms";
  return os.str();
}

}  // namespace

std::string SessionReport::summary_text() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t total = 0, claimed = 0, clusters = 0;
  std::map<std::string, Refusal> refused;
  for (const auto& [graph, c] : claims_) {
    // The latest pass per graph, plus what it kept from earlier passes.
    total += c.total_nodes + kept_nodes(c);
    claimed += c.claimed_nodes + kept_nodes(c);
    clusters += c.clusters + c.kept_fused.size();
    for (const auto& [op, r] : c.refused) {
      auto& agg = refused[op];
      if (agg.count == 0) agg.first_reason = r.first_reason;
      agg.count += r.count;
    }
  }
  size_t assigned = 0, executed = 0, fused_run = 0;
  for (const auto& [name, f] : fused_) {
    assigned += f.nodes.size();
    if (f.runs > 0) {
      executed += f.nodes.size();
      ++fused_run;
    }
  }
  auto ctr = [&](const char* k) {
    auto it = counters_.find(k);
    return it == counters_.end() ? int64_t{0} : it->second;
  };
  auto tm = [&](const char* k) {
    auto it = times_.find(k);
    return it == times_.end() ? 0.0 : it->second;
  };
  // Top 8 refused op types by count.
  std::vector<std::pair<std::string, Refusal>> top(refused.begin(), refused.end());
  std::stable_sort(top.begin(), top.end(),
                   [](const auto& a, const auto& b) { return a.second.count > b.second.count; });
  if (top.size() > 8) top.resize(8);

  std::ostringstream os;
  os << "===== MLX EP session summary =====\n";
  os << "  claim:   " << claimed << "/" << total << " nodes claimed (" << pct(claimed, total)
     << ") in " << clusters << " cluster(s), " << ctr("getcapability.calls")
     << " GetCapability call(s)\n";
  os << "  nodes:   " << executed << "/" << total << " nodes ran on the EP ("
     << pct(executed, total) << "); " << assigned << " assigned in " << fused_.size()
     << " fused subgraph(s), " << fused_run << " of them ran\n";
  if (!top.empty()) os << "           unclaimed (-> CPU):\n";
  for (const auto& [op, r] : top)
    os << "             - " << op << " x" << r.count << ": " << r.first_reason << "\n";
  os << "  compute: " << ctr("compute.runs") << " run(s): compiled=" << ctr("compute.compiled")
     << " eager=" << ctr("compute.eager") << " failed=" << ctr("compute.error")
     << "  (cache: " << ctr("cache.hit") << " HIT / " << ctr("cache.miss") << " MISS / "
     << ctr("cache.retrace") << " RETRACE, " << ctr("cache.evict") << " evicted; "
     << ctr("compile.fallback") << " eager fallback(s))\n";
  os << "  memory:  inputs " << ctr("input.wrap") << " wrapped in place ("
     << mib(ctr("input.wrap_bytes")) << "), " << ctr("input.copy") << " copied ("
     << mib(ctr("input.copy_bytes")) << "); outputs " << ctr("output.copy") << " copied out ("
     << mib(ctr("output.bytes")) << ")\n";
  const double phases = tm("translate") + tm("compile") + tm("eval") + tm("copy") + tm("queue");
  os << "  timing:  translate=" << ms(tm("translate")) << " compile=" << ms(tm("compile")) << " (x"
     << ctr("cache.miss") + ctr("cache.retrace") << ") eval=" << ms(tm("eval"))
     << " copy=" << ms(tm("copy")) << " queue=" << ms(tm("queue"))
     << " other=" << ms(std::max(0.0, tm("compute") - phases)) << " total=" << ms(tm("compute"))
     << "\n";
  // Chains the pattern pass replaced at Compile (ops/patterns), by pattern.
  std::string patterns;
  for (const auto& [name, v] : counters_)
    if (name.rfind("pattern.", 0) == 0)
      patterns += " " + name.substr(std::string("pattern.").size()) + "=" + std::to_string(v);
  if (!patterns.empty()) os << "  patterns:" << patterns << "\n";
  for (const auto& [label, p] : paths_)
    os << "  path:    " << (p.second ? "fast " : "composed ") << label << " x" << p.first << "\n";
  os << "==================================\n";
  return os.str();
}

void SessionReport::set_backend(std::string backend, std::string device, std::string io,
                                bool tf32) {
  std::lock_guard<std::mutex> lock(mu_);
  backend_ = std::move(backend);
  device_ = std::move(device);
  io_ = std::move(io);
  tf32_ = tf32;
}

void SessionReport::set_cpu_isa(std::string isa) {
  std::lock_guard<std::mutex> lock(mu_);
  cpu_isa_ = std::move(isa);
}

void SessionReport::set_mlx_memory(size_t active, size_t peak, size_t cache) {
  std::lock_guard<std::mutex> lock(mu_);
  mlx_active_ = active;
  mlx_peak_ = peak;
  mlx_cache_ = cache;
}

std::string SessionReport::to_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  auto str_list = [&](const std::vector<std::string>& v) {
    os << "[";
    for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << "\"" << json_escape(v[i]) << "\"";
    os << "]";
  };
  os << "{\"ep\":\"MLXExecutionProvider\",\"backend\":\"" << json_escape(backend_)
     << "\",\"device\":\"" << json_escape(device_) << "\",\"io\":\"" << json_escape(io_)
     << "\",\"cpu_isa\":\"" << json_escape(cpu_isa_) << "\",\"tf32\":" << (tf32_ ? "true" : "false")
     << ",\"mlx_memory\":{\"active\":" << mlx_active_ << ",\"peak\":" << mlx_peak_
     << ",\"cache\":" << mlx_cache_ << "},\"claims\":{";
  bool first = true;
  // (key, pass, latest, superseded)
  std::vector<std::tuple<const std::string*, const ClaimSummary*, bool, bool>> passes;
  for (const auto& [graph, c] : claims_) passes.emplace_back(&graph, &c, true, false);
  for (const auto& [graph, e] : earlier_) passes.emplace_back(&graph, &e.first, false, !e.second);
  for (const auto& [graph_ptr, c_ptr, latest, superseded] : passes) {
    const std::string& graph = *graph_ptr;
    const ClaimSummary& c = *c_ptr;
    os << (first ? "" : ",") << "\"" << json_escape(graph)
       << "\":{\"latest\":" << (latest ? "true" : "false")
       << ",\"superseded\":" << (superseded ? "true" : "false")
       << ",\"total_nodes\":" << c.total_nodes << ",\"claimed_nodes\":" << c.claimed_nodes
       << ",\"clusters\":" << c.clusters << ",\"kept_fused\":";
    str_list(c.kept_fused);
    os << ",\"kept_nodes\":" << kept_nodes(c) << ",\"other_ep_nodes\":" << c.other_ep_nodes
       << ",\"claimed\":";
    str_list(c.claimed);
    os << ",\"refused\":{";
    bool f2 = true;
    for (const auto& [op, r] : c.refused) {
      os << (f2 ? "" : ",") << "\"" << json_escape(op) << "\":{\"count\":" << r.count
         << ",\"reason\":\"" << json_escape(r.first_reason) << "\",\"nodes\":";
      str_list(r.nodes);
      os << "}";
      f2 = false;
    }
    os << "}}";
    first = false;
  }
  os << "},\"fused\":{";
  first = true;
  for (const auto& [name, f] : fused_) {
    os << (first ? "" : ",") << "\"" << json_escape(name) << "\":{\"nodes\":";
    str_list(f.nodes);
    os << ",\"op_types\":";
    str_list(f.op_types);
    os << ",\"runs\":" << f.runs << ",\"seconds\":" << f.seconds
       << ",\"compiled_runs\":" << f.compiled_runs << ",\"cache_entries\":" << f.cache_entries
       << ",\"eager_only\":" << (f.eager_only ? "true" : "false") << "}";
    first = false;
  }
  os << "},\"paths\":{";
  first = true;
  for (const auto& [label, p] : paths_) {
    os << (first ? "" : ",") << "\"" << json_escape(label) << "\":{\"count\":" << p.first
       << ",\"fast\":" << (p.second ? "true" : "false") << "}";
    first = false;
  }
  os << "},\"counters\":{";
  first = true;
  for (const auto& [k, v] : counters_) {
    os << (first ? "" : ",") << "\"" << json_escape(k) << "\":" << v;
    first = false;
  }
  os << "},\"times\":{";
  first = true;
  for (const auto& [k, v] : times_) {
    os << (first ? "" : ",") << "\"" << json_escape(k) << "\":" << v;
    first = false;
  }
  os << "}}\n";
  return os.str();
}

void SessionReport::write_json(const std::string& path) const {
  // Compute may run on several threads at once; each writer uses its own temp file and the
  // renames are serialised, so readers always see one complete report.
  std::lock_guard<std::mutex> write_lock(write_mu_);
  const std::string text = to_json();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write report to " + path);
    f << text;
    if (!f) throw std::runtime_error("cannot write report to " + path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write report to " + path);
  }
}

}  // namespace ortmlx
