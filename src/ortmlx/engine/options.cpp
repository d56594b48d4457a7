#include "ortmlx/engine/options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <stdexcept>

namespace ortmlx {

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"claim_debug", "ONNXRUNTIME_EP_MLX_CLAIM_DEBUG", "flag",
       "print, per refused op type, count, first reason and up to 16 node names (stderr)"},
      {"verbose", "ONNXRUNTIME_EP_MLX_VERBOSE", "flag",
       "print a session summary at session end (stderr); the variable must be exactly 1"},
      {"trace", "ONNXRUNTIME_EP_MLX_TRACE", "path",
       "write a Chrome/Perfetto trace JSON to this path at session end"},
      {"report", "ONNXRUNTIME_EP_MLX_REPORT", "path",
       "write a JSON report (claimed, assigned and executed nodes, counters) to this path"},
      {"no_compile", "ONNXRUNTIME_EP_MLX_NO_COMPILE", "flag",
       "disable every mlx::compile path (eager only)"},
      {"no_general_compile", "ONNXRUNTIME_EP_MLX_NO_GENERAL_COMPILE", "flag",
       "disable the general shape-keyed compiled path (A/B numerics)"},
      {"attention_vjp_dense_limit_bytes", "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_DENSE_LIMIT_BYTES",
       "integer", "byte budget of the dense AttentionVJP pullback (default 64 MiB)"},
      {"compile_cache_size", "ONNXRUNTIME_EP_MLX_COMPILE_CACHE_SIZE", "integer",
       "compiled functions kept per fused node, LRU (default 16, at least 1)"},
      {"compile_fuse", "ONNXRUNTIME_EP_MLX_COMPILE_FUSE", "auto|flag",
       "fuse elementwise ops into generated kernels when compiling: auto (default, fuse) or a "
       "flag; off skips MLX's kernel JIT on first use"},
      {"attention_vjp_native", "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_NATIVE", "auto|flag",
       "AttentionVJPRecompute without a dense limit: vjp of MLX's fused SDPA (on), the plain "
       "form's paths by the default budget (off), or auto (default: native on GPU backends, fused "
       "kernel on MLX CPU)"},
      {"attention_vjp_tiled", "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_TILED", "auto|kernel|blocked",
       "AttentionVJP beyond the dense limit: kernel (the backend's fused kernel: CPU kernel on MLX "
       "CPU, the CUDA kernels on CUDA with an sm_90 GPU; an error elsewhere), blocked (MLX ops by "
       "query blocks, any backend) or auto (default: kernel where the backend has one, blocked on "
       "other GPU backends)"},
      {"attention_vjp_mlx_ops", "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_MLX_OPS", "flag",
       "tests: AttentionVJP picks and runs its paths as on GPU backends (MLX ops: dense, blocked, "
       "native) also on MLX's CPU backend"},
      {"attention_vjp_half_cudnn", "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_HALF_CUDNN", "flag",
       "float16/bfloat16 AttentionVJP through cuDNN's fused SDPA backward on CUDA (sm_80+, Sq = "
       "Sk a multiple of 128, D <= 128; other problems keep the exact paths): P and dS rounded to "
       "the half type, gradients within 2e-2 (bf16) / 4e-3 (fp16) relative L2; default off"},
      {"cpu_claim", "ONNXRUNTIME_EP_MLX_CPU_CLAIM", "auto|all",
       "what the EP claims on MLX's CPU backend: auto (default: only what runs at least as fast "
       "there as on ORT's CPU EP, today the AttentionVJP training kernels) or all (every node it "
       "can run exactly); GPU backends claim everything they can"},
      {"cpu_isa", "ONNXRUNTIME_EP_MLX_CPU_ISA", "auto|avx512|avx2|portable",
       "instruction set of the fused CPU kernels (AttentionVJP): auto (default: the fastest this "
       "CPU runs) or one forced (benchmarks, tests; one the CPU lacks is an error)"},
      {"fast_patterns", "ONNXRUNTIME_EP_MLX_FAST_PATTERNS", "auto|flag",
       "recognise LayerNorm/RMSNorm/GELU chains in fused subgraphs and run them as one op, and "
       "LayerNormalization as MLX's fused kernel: auto (default: chains everywhere, the fused "
       "LayerNormalization kernel on GPU backends), 1 (also on MLX CPU) or 0 (off)"},
      {"cuda_graphs", "ONNXRUNTIME_EP_MLX_CUDA_GRAPHS", "flag",
       "MLX's CUDA graphs for kernel launches (default off: direct launches cost less host time "
       "per run on inference graphs); process-wide, decided when the library loads: a session "
       "value that differs from the process mode fails"},
      {"tf32", "ONNXRUNTIME_EP_MLX_TF32", "flag",
       "TF32 fp32 matmuls on CUDA (default off: exact fp32); process-wide, decided when the "
       "library loads: a session value that differs from the process mode fails"},
  };
  return specs;
}

std::string option_keys_text() {
  std::string s;
  for (const auto& spec : option_specs()) s += (s.empty() ? "" : ", ") + std::string(spec.key);
  return s;
}

bool parse_flag(const std::string& v) {
  return !v.empty() && v != "0" && v != "false" && v != "off" && v != "FALSE" && v != "OFF";
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Where a value came from, for error messages.
std::string origin(const OptionSpec& spec, bool from_session) {
  return from_session ? std::string("provider option ") + kOptionPrefix + spec.key
                      : std::string("environment variable ") + spec.env;
}

// Session values are strict: a typo in a flag must not silently mean "on".
bool parse_strict_flag(const OptionSpec& spec, const std::string& v) {
  const std::string l = lower(v);
  if (l == "1" || l == "true" || l == "on" || l == "yes") return true;
  if (l == "0" || l == "false" || l == "off" || l == "no" || l.empty()) return false;
  throw std::invalid_argument(origin(spec, true) + "='" + v +
                              "': expected a flag (1/0, true/false, on/off, yes/no" +
                              (std::string(spec.kind) == "auto|flag" ? ", or auto)" : ")"));
}

// auto | kernel | blocked, either case; an empty environment value means auto.
EpOptions::AttentionVjpTiled parse_tiled(const OptionSpec& spec, const std::string& v,
                                         bool from_session) {
  using Tiled = EpOptions::AttentionVjpTiled;
  const std::string l = lower(v);
  if (l == "auto" || (l.empty() && !from_session)) return Tiled::kAuto;
  if (l == "kernel") return Tiled::kKernel;
  if (l == "blocked") return Tiled::kBlocked;
  throw std::invalid_argument(origin(spec, from_session) + "='" + v +
                              "': expected auto, kernel or blocked");
}

// auto | all, either case; an empty environment value means auto.
EpOptions::CpuClaim parse_cpu_claim(const OptionSpec& spec, const std::string& v,
                                    bool from_session) {
  const std::string l = lower(v);
  if (l == "auto" || (l.empty() && !from_session)) return EpOptions::CpuClaim::kAuto;
  if (l == "all") return EpOptions::CpuClaim::kAll;
  throw std::invalid_argument(origin(spec, from_session) + "='" + v + "': expected auto or all");
}

// auto | avx512 | avx2 | portable, either case; an empty environment value means auto. An
// instruction set this CPU lacks is refused here, so the session fails at creation.
EpOptions::CpuIsa parse_cpu_isa(const OptionSpec& spec, const std::string& v, bool from_session) {
  using Isa = EpOptions::CpuIsa;
  const std::string l = lower(v);
  Isa isa;
  if (l == "auto" || (l.empty() && !from_session))
    isa = Isa::kAuto;
  else if (l == "avx512")
    isa = Isa::kAvx512;
  else if (l == "avx2")
    isa = Isa::kAvx2;
  else if (l == "portable")
    isa = Isa::kPortable;
  else
    throw std::invalid_argument(origin(spec, from_session) + "='" + v +
                                "': expected auto, avx512, avx2 or portable");
  if (!cpu_isa_supported(isa))
    throw std::invalid_argument(origin(spec, from_session) + "='" + v + "': this CPU lacks " +
                                cpu_isa_name(isa) + " (it runs " +
                                cpu_isa_name(EpOptions{}.resolved_cpu_isa()) + ")");
  return isa;
}

uint64_t parse_count(const OptionSpec& spec, const std::string& v, bool from_session,
                     uint64_t minimum) {
  size_t pos = 0;
  unsigned long long n = 0;
  bool ok = !v.empty() && std::isdigit(static_cast<unsigned char>(v[0]));
  if (ok) {
    try {
      n = std::stoull(v, &pos);
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || pos != v.size() || n < minimum)
    throw std::invalid_argument(origin(spec, from_session) + "='" + v +
                                "': expected an integer >= " + std::to_string(minimum));
  return n;
}

}  // namespace

EpOptions EpOptions::resolve(
    const std::function<std::optional<std::string>(const std::string&)>& session_value) {
  EpOptions o;
  for (const auto& spec : option_specs()) {
    std::optional<std::string> v;
    bool from_session = false;
    if (session_value) {
      v = session_value(spec.key);
      from_session = v.has_value();
    }
    if (!v) {
      if (const char* e = std::getenv(spec.env)) v = std::string(e);
    }
    if (!v) continue;
    const std::string key = spec.key;
    auto flag = [&] { return from_session ? parse_strict_flag(spec, *v) : parse_flag(*v); };
    if (key == "claim_debug")
      o.claim_debug = flag();
    else if (key == "verbose")
      o.verbose = from_session ? parse_strict_flag(spec, *v) : *v == "1";
    else if (key == "trace")
      o.trace_path = *v;
    else if (key == "report")
      o.report_path = *v;
    else if (key == "no_compile")
      o.no_compile = flag();
    else if (key == "no_general_compile")
      o.no_general_compile = flag();
    else if (key == "compile_fuse") {
      if (lower(*v) == "auto" || (v->empty() && !from_session))
        o.compile_fuse.reset();
      else
        o.compile_fuse = from_session ? parse_strict_flag(spec, *v) : parse_flag(*v);
    } else if (key == "attention_vjp_native") {
      if (lower(*v) == "auto" || (v->empty() && !from_session))
        o.attention_vjp_native.reset();
      else
        o.attention_vjp_native = from_session ? parse_strict_flag(spec, *v) : parse_flag(*v);
    } else if (key == "fast_patterns") {
      if (lower(*v) == "auto" || (v->empty() && !from_session))
        o.fast_patterns.reset();
      else
        o.fast_patterns = from_session ? parse_strict_flag(spec, *v) : parse_flag(*v);
    } else if (key == "tf32") {
      if (!v->empty() || from_session) o.tf32 = flag();
    } else if (key == "cuda_graphs") {
      if (!v->empty() || from_session) o.cuda_graphs = flag();
    } else if (key == "cpu_claim") {
      o.cpu_claim = parse_cpu_claim(spec, *v, from_session);
    } else if (key == "cpu_isa") {
      o.cpu_isa = parse_cpu_isa(spec, *v, from_session);
    } else if (key == "attention_vjp_mlx_ops") {
      o.attention_vjp_mlx_ops = flag();
    } else if (key == "attention_vjp_half_cudnn") {
      o.attention_vjp_half_cudnn = flag();
    } else if (key == "attention_vjp_tiled") {
      o.attention_vjp_tiled = parse_tiled(spec, *v, from_session);
    } else if (key == "attention_vjp_dense_limit_bytes") {
      if (!v->empty() || from_session)
        o.attention_vjp_dense_limit_bytes = parse_count(spec, *v, from_session, 0);
    } else if (key == "compile_cache_size") {
      if (!v->empty() || from_session)
        o.compile_cache_size = parse_count(spec, *v, from_session, 1);
    }
  }
  return o;
}

const char* cpu_isa_name(EpOptions::CpuIsa isa) {
  using Isa = EpOptions::CpuIsa;
  return isa == Isa::kAvx512     ? "avx512"
         : isa == Isa::kAvx2     ? "avx2"
         : isa == Isa::kPortable ? "portable"
                                 : "auto";
}

bool cpu_isa_supported(EpOptions::CpuIsa isa) {
  using Isa = EpOptions::CpuIsa;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // The same tests as the kernels' (ops/attention_vjp/cpu_rows.h).
  if (isa == Isa::kAvx512) return __builtin_cpu_supports("avx512f");
  if (isa == Isa::kAvx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  if (isa == Isa::kAvx512 || isa == Isa::kAvx2) return false;
#endif
  return true;
}

bool cpu_isa_beats_ort_cpu(EpOptions::CpuIsa isa) {
  return isa == EpOptions::CpuIsa::kAvx512;
}

EpOptions::CpuIsa EpOptions::resolved_cpu_isa() const {
  if (cpu_isa != CpuIsa::kAuto) return cpu_isa;
  if (cpu_isa_supported(CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (cpu_isa_supported(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kPortable;
}

EpOptions EpOptions::resolve_entries(
    const std::vector<std::pair<std::string, std::string>>& entries) {
  const std::string prefix = kOptionPrefix;
  std::map<std::string, std::string> ours;
  for (const auto& [k, v] : entries) {
    if (k.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string key = k.substr(prefix.size());
    bool known = false;
    for (const auto& spec : option_specs()) known = known || key == spec.key;
    if (!known)
      throw std::invalid_argument("unknown provider option '" + k +
                                  "' (known options: " + option_keys_text() + ")");
    ours[key] = v;
  }
  return resolve([&](const std::string& key) -> std::optional<std::string> {
    auto it = ours.find(key);
    if (it == ours.end()) return std::nullopt;
    return it->second;
  });
}

}  // namespace ortmlx
