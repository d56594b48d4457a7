#include "ortmlx/diagnostics/report.h"

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace ortmlx {

std::string json_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
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
  claims_[graph_key] = std::move(summary);
}

void SessionReport::record_fused(const std::string& fused_name, std::vector<std::string> nodes,
                                 std::vector<std::string> op_types) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& f = fused_[fused_name];
  f.nodes = std::move(nodes);
  f.op_types = std::move(op_types);
}

void SessionReport::record_compute(const std::string& fused_name, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& f = fused_[fused_name];
  f.runs += 1;
  f.seconds += seconds;
}

void SessionReport::record_path(const std::string& label, bool fast) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& p = paths_[label];
  p.first += 1;
  p.second = fast;
}

void SessionReport::count(const std::string& counter, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_[counter] += delta;
}

void SessionReport::add_time(const std::string& phase, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  times_[phase] += seconds;
}

int64_t SessionReport::counter(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = counters_.find(name);
  return it == counters_.end() ? 0 : it->second;
}

std::string SessionReport::claim_debug_text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  for (const auto& [graph, c] : claims_) {
    os << "[ortmlx] claim: graph '" << graph << "': " << c.claimed_nodes << "/" << c.total_nodes
       << " nodes claimed in " << c.clusters << " cluster(s)\n";
    for (const auto& [op, r] : c.refused) {
      os << "[ortmlx]   refused " << op << " x" << r.count << ": " << r.first_reason << " [";
      for (size_t i = 0; i < r.nodes.size(); ++i) os << (i ? ", " : "") << r.nodes[i];
      os << "]\n";
    }
  }
  return os.str();
}

std::string SessionReport::summary_text() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t total = 0, claimed = 0, clusters = 0;
  std::map<std::string, Refusal> refused;
  for (const auto& [graph, c] : claims_) {
    total += c.total_nodes;
    claimed += c.claimed_nodes;
    clusters += c.clusters;
    for (const auto& [op, r] : c.refused) {
      auto& agg = refused[op];
      if (agg.count == 0) agg.first_reason = r.first_reason;
      agg.count += r.count;
    }
  }
  size_t assigned = 0, runs = 0;
  for (const auto& [name, f] : fused_) {
    assigned += f.nodes.size();
    runs += f.runs;
  }
  auto ctr = [&](const char* k) {
    auto it = counters_.find(k);
    return it == counters_.end() ? int64_t{0} : it->second;
  };
  std::ostringstream os;
  os << std::fixed << std::setprecision(1);
  os << "===== MLX EP session summary =====\n";
  os << "  claim:   " << claimed << "/" << total << " nodes claimed ("
     << (total ? 100.0 * static_cast<double>(claimed) / static_cast<double>(total) : 0.0)
     << "%), " << assigned << " assigned in " << fused_.size() << " fused subgraph(s)\n";
  if (!refused.empty()) os << "           unclaimed (-> CPU):\n";
  for (const auto& [op, r] : refused)
    os << "             - " << op << " x" << r.count << ": " << r.first_reason << "\n";
  os << "  compute: " << runs << " run(s); compiled=" << ctr("compute.compiled")
     << " eager=" << ctr("compute.eager") << " (cache: " << ctr("cache.hit") << " HIT / "
     << ctr("cache.miss") << " MISS / " << ctr("cache.retrace") << " RETRACE, "
     << ctr("compile.fallback") << " eager fallback(s))\n";
  os << "  timing: ";
  for (const auto& [phase, s] : times_) os << " " << phase << "=" << s * 1e6 << "us";
  os << "\n";
  for (const auto& [label, p] : paths_)
    os << "  path:    " << (p.second ? "fast " : "composed ") << label << " x" << p.first << "\n";
  os << "==================================\n";
  return os.str();
}

std::string SessionReport::to_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  auto str_list = [&](const std::vector<std::string>& v) {
    os << "[";
    for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << "\"" << json_escape(v[i]) << "\"";
    os << "]";
  };
  os << "{\"ep\":\"MLXExecutionProvider\",\"claims\":{";
  bool first = true;
  for (const auto& [graph, c] : claims_) {
    os << (first ? "" : ",") << "\"" << json_escape(graph) << "\":{\"total_nodes\":"
       << c.total_nodes << ",\"claimed_nodes\":" << c.claimed_nodes
       << ",\"clusters\":" << c.clusters << ",\"claimed\":";
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
    os << ",\"runs\":" << f.runs << ",\"seconds\":" << f.seconds << "}";
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
  const std::string text = to_json();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write report to " + path);
    f << text;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot write report to " + path);
}

}  // namespace ortmlx
