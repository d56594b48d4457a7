"""The EP's knobs: provider options (session config keys `ep.mlxexecutionprovider.<key>`) and the
environment variables they override.

The source of truth is the C++ table in src/ortmlx/engine/options.cpp (`option_specs()`); this list
mirrors it for `python -m ortmlx options` and the README. tests/engine/test_options.py keeps the two
in step: the EP rejects an unknown key with a message listing every key it knows, and the test
compares that list with this one.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "ep.mlxexecutionprovider."


@dataclass(frozen=True)
class Option:
    key: str      # provider option key (after PREFIX)
    env: str      # environment variable (same names as the reference MLX EP)
    kind: str     # "flag", "path", "integer", "auto|flag", "auto|kernel|blocked", "auto|all", "auto|avx512|avx2|portable"
    meaning: str
    example: str  # a valid value (tests create a session with it)


OPTIONS: tuple[Option, ...] = (
    Option("claim_debug", "ONNXRUNTIME_EP_MLX_CLAIM_DEBUG", "flag",
           "print, per refused op type, count, first reason and up to 16 node names (stderr)", "1"),
    Option("verbose", "ONNXRUNTIME_EP_MLX_VERBOSE", "flag",
           "print a session summary at session end (stderr); the variable must be exactly 1", "1"),
    Option("trace", "ONNXRUNTIME_EP_MLX_TRACE", "path",
           "write a Chrome/Perfetto trace JSON to this path at session end", "{tmp}/trace.json"),
    Option("report", "ONNXRUNTIME_EP_MLX_REPORT", "path",
           "write a JSON report (claimed, assigned and executed nodes, counters) to this path",
           "{tmp}/report.json"),
    Option("no_compile", "ONNXRUNTIME_EP_MLX_NO_COMPILE", "flag",
           "disable every mlx::compile path (eager only)", "1"),
    Option("no_general_compile", "ONNXRUNTIME_EP_MLX_NO_GENERAL_COMPILE", "flag",
           "disable the general shape-keyed compiled path (A/B numerics)", "1"),
    Option("attention_vjp_dense_limit_bytes", "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_DENSE_LIMIT_BYTES",
           "integer", "byte budget of the dense AttentionVJP pullback (default 64 MiB)", "1048576"),
    Option("compile_cache_size", "ONNXRUNTIME_EP_MLX_COMPILE_CACHE_SIZE", "integer",
           "compiled functions kept per fused node, LRU (default 16, at least 1)", "4"),
    Option("compile_fuse", "ONNXRUNTIME_EP_MLX_COMPILE_FUSE", "auto|flag",
           "fuse elementwise ops into generated kernels when compiling: auto (default, fuse) or a "
           "flag; off skips MLX's kernel JIT on first use", "auto"),
    Option("attention_vjp_native", "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_NATIVE", "auto|flag",
           "AttentionVJPRecompute without a dense limit: vjp of MLX's fused SDPA (on), the plain "
           "form's paths by the default budget (off), or auto (default: native on GPU backends, "
           "fused kernel on MLX CPU)",
           "auto"),
    Option("attention_vjp_tiled", "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_TILED", "auto|kernel|blocked",
           "AttentionVJP beyond the dense limit: kernel (the backend's fused kernel: CPU kernel on "
           "MLX CPU, the CUDA kernels on CUDA with an sm_90 GPU; an error elsewhere), blocked "
           "(MLX ops by query blocks, any backend) or auto (default: kernel where the backend has "
           "one, blocked on other GPU backends)",
           "blocked"),
    Option("attention_vjp_mlx_ops", "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_MLX_OPS", "flag",
           "tests: AttentionVJP picks and runs its paths as on GPU backends (MLX ops: dense, "
           "blocked, native) also on MLX's CPU backend", "1"),
    Option("attention_vjp_half_cudnn", "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_HALF_CUDNN", "flag",
           "float16/bfloat16 AttentionVJP through cuDNN's fused SDPA backward on CUDA (sm_80+, "
           "Sq = Sk a multiple of 128, D <= 128; other problems keep the exact paths): P and dS "
           "rounded to the half type, gradients within 2e-2 (bf16) / 4e-3 (fp16) relative L2; "
           "default off", "1"),
    Option("cpu_claim", "ONNXRUNTIME_EP_MLX_CPU_CLAIM", "auto|all",
           "what the EP claims on MLX's CPU backend: auto (default: only what runs at least as "
           "fast there as on ORT's CPU EP, today the AttentionVJP training kernels) or all (every "
           "node it can run exactly); GPU backends claim everything they can", "all"),
    Option("cpu_isa", "ONNXRUNTIME_EP_MLX_CPU_ISA", "auto|avx512|avx2|portable",
           "instruction set of the fused CPU kernels (AttentionVJP): auto (default: the fastest "
           "this CPU runs) or one forced (benchmarks, tests; one the CPU lacks is an error)",
           "auto"),
    Option("fast_patterns", "ONNXRUNTIME_EP_MLX_FAST_PATTERNS", "auto|flag",
           "recognise LayerNorm/RMSNorm/GELU chains in fused subgraphs and run them as one op, and "
           "LayerNormalization as MLX's fused kernel: auto (default: chains everywhere, the fused "
           "LayerNormalization kernel on GPU backends), 1 (also on MLX CPU) or 0 (off)", "auto"),
    Option("cuda_graphs", "ONNXRUNTIME_EP_MLX_CUDA_GRAPHS", "flag",
           "MLX's CUDA graphs for kernel launches (default off: direct launches cost less host "
           "time per run on inference graphs); process-wide, decided when the library loads: a "
           "session value that differs from the process mode fails", "0"),
    Option("tf32", "ONNXRUNTIME_EP_MLX_TF32", "flag",
           "TF32 fp32 matmuls on CUDA (default off: exact fp32); process-wide, decided when the "
           "library loads: a session value that differs from the process mode fails", "0"),
)

FLAG_VALUES = "1/0, true/false, on/off, yes/no"


def keys() -> list[str]:
    return [o.key for o in OPTIONS]


def format_table() -> str:
    """A plain-text table: key, environment variable, kind, meaning."""
    rows = [("key", "environment variable", "kind", "meaning")]
    rows += [(o.key, o.env, o.kind, o.meaning) for o in OPTIONS]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"Provider options are session config entries {PREFIX}<key> (ortmlx.append_to_session_options",
             "passes a dict of them); each overrides its environment variable.", ""]
    for i, r in enumerate(rows):
        lines.append("  ".join(r[j].ljust(widths[j]) for j in range(3)) + "  " + r[3])
        if i == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 7)
    lines.append("")
    lines.append(f"Flags take {FLAG_VALUES} as provider options; an environment flag is on for any")
    lines.append("non-empty value other than 0 (VERBOSE: exactly 1). An unknown key or a bad value fails")
    lines.append("session creation with a message naming the option.")
    return "\n".join(lines)


_FLAGS = {"1", "0", "true", "false", "on", "off", "yes", "no"}


def validate(provider_options: dict) -> dict[str, str]:
    """The provider options as strings, checked against the EP's table the way the EP checks
    session values: an unknown key or a bad value raises ValueError naming the option. (Through
    Python, ORT's default is to fall back to its CPU EP when the EP fails session creation, so a
    typo would otherwise only show as a warning and a slow session.)"""
    by_key = {o.key: o for o in OPTIONS}
    out = {}
    for key, value in provider_options.items():
        opt = by_key.get(key)
        if opt is None:
            raise ValueError(f"unknown MLXExecutionProvider option '{key}' "
                             f"(known options: {', '.join(by_key)})")
        v = str(value).strip() if not isinstance(value, bool) else ("1" if value else "0")
        low = v.lower()
        choices = opt.kind.split("|")
        ok = True
        if opt.kind == "path":
            ok = v != ""
        elif opt.kind == "integer":
            minimum = 1 if key == "compile_cache_size" else 0
            ok = v.isdigit() and int(v) >= minimum
        elif "flag" in choices:
            ok = low in _FLAGS or ("auto" in choices and low == "auto") or low == ""
        else:  # an enumeration such as auto|kernel|blocked
            ok = low in choices
        if not ok:
            expected = {"path": "a non-empty path", "integer": "an integer"}.get(
                opt.kind, f"one of {FLAG_VALUES}" if "flag" in choices else " / ".join(choices))
            raise ValueError(f"MLXExecutionProvider option {key}={value!r}: expected {expected}")
        out[key] = v
    return out
