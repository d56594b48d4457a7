// EP knobs. Each has an environment variable (same names as the reference MLX EP) and a session
// config key `ep.mlxexecutionprovider.<key>`; the session option wins over the variable.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ortmlx {

inline constexpr const char* kOptionPrefix = "ep.mlxexecutionprovider.";

struct OptionSpec {
  const char* key;      // provider option key (after "ep.mlxexecutionprovider.")
  const char* env;      // environment variable
  const char* kind;     // "flag", "path", "integer", "auto|flag", "auto|kernel|blocked"
  const char* meaning;  // one line for README / --help
};

// Every knob, in one table. python/ortmlx/options.py mirrors it; tests/engine/test_options.py
// checks the mirror against this table through the EP's unknown-key error message.
const std::vector<OptionSpec>& option_specs();

struct EpOptions {
  bool claim_debug = false;         // print refusals per op type at GetCapability
  bool verbose = false;             // session summary on stderr at session end
  std::string trace_path;           // Chrome/Perfetto trace JSON
  std::string report_path;          // JSON report of claimed/assigned/run nodes (tests, tools)
  bool no_compile = false;          // disable every mlx::compile path
  bool no_general_compile = false;  // disable the general shape-keyed compiled path
  std::optional<uint64_t> attention_vjp_dense_limit_bytes;
  size_t compile_cache_size = 16;  // compiled functions kept per fused node (LRU)
  // Let mlx::compile fuse elementwise ops into generated kernels. nullopt = auto (fuse: see
  // ExecConfig::from); off trades kernel fusion for no JIT compilation on first use.
  std::optional<bool> compile_fuse;
  // AttentionVJPRecompute without an explicit dense limit: true = the seed's native path (vjp of
  // MLX's fused SDPA), false = recompute + the plain form's choice by the default budget (dense,
  // or what attention_vjp_tiled picks beyond it), nullopt = auto: native on GPU backends, fused
  // kernel on MLX's CPU backend, where MLX's SDPA vjp runs on a reference-BLAS matmul (measured
  // 15-25x slower than ORT CPU running the function body).
  std::optional<bool> attention_vjp_native;
  // AttentionVJP beyond the dense budget: kAuto = the backend's fused kernel where it has one
  // (the CPU kernel on MLX's CPU backend, the CUDA kernels on the CUDA backend with an sm_90
  // GPU), blocked MLX ops on other GPU backends; kKernel = the backend's fused kernel (a clear
  // error where there is none); kBlocked = blocked MLX ops on any backend (tests, A/B).
  enum class AttentionVjpTiled { kAuto, kKernel, kBlocked };
  AttentionVjpTiled attention_vjp_tiled = AttentionVjpTiled::kAuto;
  // Tests: AttentionVJP picks and runs its paths as on a GPU backend (MLX ops: dense, blocked,
  // native) also on MLX's CPU backend, where the fused CPU kernel runs by default.
  bool attention_vjp_mlx_ops = false;
  // float16/bfloat16 AttentionVJP through cuDNN's fused SDPA backward on the CUDA backend where
  // it takes the problem (ops/attention_vjp/cuda/cudnn_half.h); its products round P and dS to
  // the half type, so it is opt-in (default: the exact paths, float32 inside).
  bool attention_vjp_half_cudnn = false;
  // What the EP claims on MLX's CPU backend: kAuto = only the op entries measured at least as
  // fast there as on ORT's CPU EP (OpEntry::cpu_default: the fused training kernels); the rest
  // is left to ORT's CPU EP, so adding the EP never slows a model down on a CPU-only machine.
  // kAll = every node the EP can run exactly (tests, and users who want MLX anyway). GPU
  // backends always claim everything they can.
  enum class CpuClaim { kAuto, kAll };
  CpuClaim cpu_claim = CpuClaim::kAuto;
  // Instruction set of the fused CPU kernels (AttentionVJP): kAuto = the fastest this CPU runs
  // (AVX-512, else AVX2 + FMA, else portable C++); the others force one (benchmarks, tests): one
  // the CPU lacks is rejected when the options are read. cpu_claim=auto claims the kernels only
  // with an instruction set measured faster than ORT's CPU EP (cpu_isa_beats_ort_cpu).
  enum class CpuIsa { kAuto, kAvx512, kAvx2, kPortable };
  CpuIsa cpu_isa = CpuIsa::kAuto;
  // cpu_isa with kAuto replaced by what this CPU runs.
  CpuIsa resolved_cpu_isa() const;
  // Pattern pass (ops/patterns): nullopt = auto (decomposed LayerNorm/RMSNorm/GELU chains are
  // rewritten on every backend; the LayerNormalization op takes mx::fast::layer_norm on GPU
  // backends only, where it is one kernel: on MLX's CPU backend it is the same ops composed, and
  // the op's own translator also guards rows that overflow), true = everything on every backend,
  // false = off (today's op-by-op translation).
  std::optional<bool> fast_patterns;
  // TF32 matmuls on CUDA. MLX reads its switch once per process, so the mode is decided when the
  // library loads (device::init_precision_mode, from the environment variable); a session value
  // is only a check against it. nullopt = not given by the session.
  std::optional<bool> tf32;
  // MLX's CUDA graphs: process-wide like tf32 (device::init_launch_mode); a session value is only
  // a check against the process mode. nullopt = not given by the session.
  std::optional<bool> cuda_graphs;

  // True when Compute may use mlx::compile (neither kill switch is set).
  bool compile_enabled() const { return !no_compile && !no_general_compile; }

  // `session_value(key)` returns the session config value for "ep.mlxexecutionprovider.<key>".
  // Environment values follow the reference EP (lenient flags, VERBOSE must be "1"); session
  // values are strict. Throws std::invalid_argument naming the key/variable on a bad value.
  static EpOptions resolve(
      const std::function<std::optional<std::string>(const std::string&)>& session_value);

  // Same, from every session config entry: entries under "ep.mlxexecutionprovider." whose key
  // is not in option_specs() are rejected (a typo must not be silently ignored).
  static EpOptions resolve_entries(const std::vector<std::pair<std::string, std::string>>& entries);
};

// "avx512", "avx2", "portable" (or "auto").
const char* cpu_isa_name(EpOptions::CpuIsa isa);
// Whether this CPU runs an instruction set's kernels (kAuto and kPortable: always).
bool cpu_isa_supported(EpOptions::CpuIsa isa);
// Whether the fused CPU kernels in this instruction set were measured at least as fast as ORT's
// CPU EP running the contract body on a machine that has it (bench/results/attention_vjp*.md):
// AVX-512 only, so far. AVX2 + FMA has been measured only forced on an AVX-512 machine, against
// ORT's AVX-512 code, where the non-causal rows were slower; the one AVX2-only measurement (the
// earlier OpenBLAS fallback) was slower too. Until an AVX2-only machine shows the kernels faster,
// cpu_claim=auto leaves the contract to ORT there (and with the portable code): no machine gets
// slower by default; cpu_claim=all runs the kernels anyway.
bool cpu_isa_beats_ort_cpu(EpOptions::CpuIsa isa);

// Environment flag semantics: any non-empty value other than "0"/"false"/"off" -> true.
bool parse_flag(const std::string& v);

// "key1, key2, ..." of option_specs(), for messages.
std::string option_keys_text();

}  // namespace ortmlx
