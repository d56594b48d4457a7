#include "ortmlx/engine/options.h"

#include <cstdlib>
#include <stdexcept>

namespace ortmlx {

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"claim_debug", "ONNXRUNTIME_EP_MLX_CLAIM_DEBUG",
       "print, per refused op type, count, first reason and up to 16 node names (stderr)"},
      {"verbose", "ONNXRUNTIME_EP_MLX_VERBOSE", "print a session summary at session end (stderr)"},
      {"trace", "ONNXRUNTIME_EP_MLX_TRACE", "write a Chrome/Perfetto trace JSON to this path"},
      {"report", "ONNXRUNTIME_EP_MLX_REPORT",
       "write a JSON report (claimed, assigned and executed nodes) to this path"},
      {"no_compile", "ONNXRUNTIME_EP_MLX_NO_COMPILE", "disable every mlx::compile path (eager)"},
      {"no_general_compile", "ONNXRUNTIME_EP_MLX_NO_GENERAL_COMPILE",
       "disable the general shape-keyed compiled path"},
      {"attention_vjp_dense_limit_bytes", "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_DENSE_LIMIT_BYTES",
       "byte budget of the dense AttentionVJP pullback (default 64 MiB)"},
      {"compile_cache_size", "ONNXRUNTIME_EP_MLX_COMPILE_CACHE_SIZE",
       "compiled functions kept per fused node, LRU (default 16)"},
  };
  return specs;
}

bool parse_flag(const std::string& v) {
  return !v.empty() && v != "0" && v != "false" && v != "off" && v != "FALSE" && v != "OFF";
}

EpOptions EpOptions::resolve(
    const std::function<std::optional<std::string>(const std::string&)>& session_value) {
  auto get = [&](const OptionSpec& spec) -> std::optional<std::string> {
    if (session_value) {
      if (auto v = session_value(spec.key)) return v;
    }
    if (const char* e = std::getenv(spec.env)) return std::string(e);
    return std::nullopt;
  };
  EpOptions o;
  for (const auto& spec : option_specs()) {
    auto v = get(spec);
    if (!v) continue;
    const std::string key = spec.key;
    if (key == "claim_debug") o.claim_debug = parse_flag(*v);
    else if (key == "verbose") o.verbose = (*v == "1" || *v == "true");
    else if (key == "trace") o.trace_path = *v;
    else if (key == "report") o.report_path = *v;
    else if (key == "no_compile") o.no_compile = parse_flag(*v);
    else if (key == "no_general_compile") o.no_general_compile = parse_flag(*v);
    else if (key == "attention_vjp_dense_limit_bytes" || key == "compile_cache_size") {
      if (v->empty()) continue;
      size_t pos = 0;
      unsigned long long n = 0;
      try {
        n = std::stoull(*v, &pos);
      } catch (const std::exception&) {
        pos = 0;
      }
      if (pos != v->size() || (*v)[0] == '-')
        throw std::invalid_argument(std::string("option ") + spec.key + " / " + spec.env +
                                    ": expected a non-negative integer, got '" + *v + "'");
      if (key == "compile_cache_size") o.compile_cache_size = n ? n : 1;
      else o.attention_vjp_dense_limit_bytes = n;
    }
  }
  return o;
}

}  // namespace ortmlx
