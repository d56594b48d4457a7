// EP knobs. Each has an environment variable (same names as the reference MLX EP) and a session
// config key `ep.mlxexecutionprovider.<key>`; the session option wins over the variable.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ortmlx {

struct OptionSpec {
  const char* key;      // provider option key (after "ep.mlxexecutionprovider.")
  const char* env;      // environment variable
  const char* meaning;  // one line for README / --help
};

// Every knob, in one table (README's option list is generated from it by `python -m ortmlx options`).
const std::vector<OptionSpec>& option_specs();

struct EpOptions {
  bool claim_debug = false;        // print refusals per op type at GetCapability
  bool verbose = false;            // session summary on stderr at session end
  std::string trace_path;          // Chrome/Perfetto trace JSON
  std::string report_path;         // JSON report of claimed/assigned/run nodes (tests, tools)
  bool no_compile = false;         // disable every mlx::compile path
  bool no_general_compile = false; // disable the general shape-keyed compiled path
  std::optional<uint64_t> attention_vjp_dense_limit_bytes;
  size_t compile_cache_size = 16;  // compiled functions kept per fused node (LRU)

  // `session_value(key)` returns the session config value for "ep.mlxexecutionprovider.<key>".
  static EpOptions resolve(
      const std::function<std::optional<std::string>(const std::string&)>& session_value);
};

// "1", "true", "on", any non-empty value other than "0"/"false"/"off" -> true.
bool parse_flag(const std::string& v);

}  // namespace ortmlx
