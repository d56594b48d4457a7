#!/usr/bin/env python3
"""AttentionVJP contract: MLXExecutionProvider vs ORT CPU running the contract's ONNX body.

    .venv/bin/python bench/attention_vjp.py            # full grid (< 20 min on 2 cores)
    .venv/bin/python bench/attention_vjp.py --quick    # two sizes, a smoke run
    .venv/bin/python bench/attention_vjp.py --isa avx512,avx2,portable --out bench/results/x
                                                       # the CPU kernel in each instruction set

Every (configuration, S, runner) is measured in a fresh subprocess: build the model, create
the session, run once to warm up (compile), then time runs on rotating fresh random inputs
(never zeros) and take the median; the process's peak RSS (getrusage ru_maxrss, whole process
including Python/ORT/MLX) is read after the runs. The EP runs with its default settings unless
a configuration forces a path (ONNXRUNTIME_EP_MLX_ATTENTION_VJP_DENSE_LIMIT_BYTES=0: tiled),
and the report says which path ran. --isa runs the EP once per instruction set of the fused CPU
kernel (ONNXRUNTIME_EP_MLX_CPU_ISA: auto, avx512, avx2, portable), each cell against the same ORT
CPU measurement, so one machine shows them side by side; the EP's report says which ran. Writes
bench/results/attention_vjp.{md,json,png} (--out for another name).

FLOPs: the backward as 10*B*H*Sq*Sk*D (QK^T, dV, dP, dQ, dK), halved when causal.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SIZES = [256, 512, 1024, 2048, 4096]

# name, batch, heads, head dim, causal, EP path forced ("" = default; "recompute": the
# Recompute form, which takes MLX's native SDPA vjp by default), largest S for ORT CPU
# [, largest S for the EP].
# The body on ORT CPU materialises several (B, H, S, S) fp32 tensors: at B1 H8 S4096 it peaks
# near 4 GiB and ~10 s a run; B2 H16 would need ~4x that, so it is capped at S=2048.
CONFIGS = [
    ("B1 H8 D64", 1, 8, 64, 0, "", 4096),
    ("B1 H8 D128 causal", 1, 8, 128, 1, "", 2048),
    ("B2 H16 D64 causal", 2, 16, 64, 1, "", 2048),
    ("B2 H16 D128", 2, 16, 128, 0, "", 1024),
    ("B1 H8 D64 tiled", 1, 8, 64, 0, "tiled", 0),  # memory vs S on the tiled path
    # The native path runs at ~2 GFLOP/s on MLX's CPU backend (~20 s a run at S=4096): capped.
    ("B1 H8 D64 causal Recompute", 1, 8, 64, 1, "recompute", 2048, 2048),
]
QUICK_SIZES = [256, 1024]


# ------------------------------------------------------------------------------------------
# worker: one measurement in this (fresh) process
# ------------------------------------------------------------------------------------------

def worker(args) -> dict:
    import resource

    import numpy as np

    import ortmlx
    from ortmlx.contracts import attention_vjp_model
    from ortmlx.testing import EpRun, cpu_session

    b, h, s, d, causal = args.b, args.h, args.s, args.d, args.causal
    recompute = args.path == "recompute"
    model = attention_vjp_model(b, s, s, h, h, d, rank=3, causal=causal, mask_kind=0,
                                mask_shape=(1,), recompute=recompute)
    names = ("Q", "K", "V", "dY") if recompute else ("Q", "K", "V", "Y", "dY")
    rng = np.random.default_rng(args.seed)

    def fresh():
        x = {n: rng.standard_normal((b, s, h * d)).astype(np.float32) for n in names}
        x["Mask"] = np.ones((1,), dtype=bool)
        return x

    inputs = [fresh() for _ in range(2)]  # rotated, so no run reuses the previous one's data
    run = None
    if args.runner == "ep":
        if args.path == "tiled":
            os.environ["ONNXRUNTIME_EP_MLX_ATTENTION_VJP_DENSE_LIMIT_BYTES"] = "0"
        os.environ["ONNXRUNTIME_EP_MLX_CPU_ISA"] = args.isa
        # The kernel runs in every instruction set asked for: cpu_claim=auto would leave the node
        # to ORT's CPU EP with the portable code (not measured faster; see docs/ATTENTION_VJP.md).
        os.environ["ONNXRUNTIME_EP_MLX_CPU_CLAIM"] = "all"
        ortmlx.register_execution_provider_library()
        run = EpRun(model)
        session = run.session
    else:
        session = cpu_session(model)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    session.run(None, inputs[0])
    first = time.perf_counter() - t0
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (len(times) < args.runs and time.perf_counter() - start < 15.0):
        feeds = inputs[(len(times) + 1) % len(inputs)]
        t0 = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    out = {"median_s": float(np.median(times)), "min_s": min(times), "runs": len(times),
           "first_s": first, "peak_rss_mib": peak / 1024, "base_rss_mib": base_rss / 1024}
    if run is not None:
        report = run.report()
        out["paths"] = sorted(report.paths())
        out["on_ep"] = "attention_vjp" in report.executed_nodes()
        out["isa"] = report.raw.get("cpu_isa", "?")
        run.close()
    return out


def measure(runner, b, h, s, d, causal, path, timeout, isa="auto") -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--runner", runner,
           "--b", str(b), "--h", str(h), "--s", str(s), "--d", str(d), "--causal", str(causal),
           "--path", path, "--isa", isa]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout}s"}
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        return {"error": f"exit {r.returncode}: {tail[:200]}"}
    return json.loads(r.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------
# driver
# ------------------------------------------------------------------------------------------

def flops(b, h, s, d, causal):
    return 10.0 * b * h * s * s * d * (0.5 if causal else 1.0)


def short_path(paths):
    names = {"onnax GEMM attention VJP": "dense", "onnax tiled attention VJP": "tiled",
             "onnax native SDPA attention VJP": "native"}
    got = [names.get(p, p) for p in paths or []]
    return "+".join(got) if got else "-"


def machine() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                      if ln.startswith("Model name")), platform.processor())
        flags = next((ln.split(":", 1)[1].split() for ln in out.splitlines()
                      if ln.startswith("Flags")), [])
    except OSError:
        model, flags = platform.processor(), []
    simd = "AVX-512" if "avx512f" in flags else "AVX2 + FMA" if {"avx2", "fma"} <= set(
        flags) else "no AVX2"
    return (f"{model} ({simd}), {os.cpu_count()} cores, {platform.system()} "
            f"{platform.machine()}")


def versions() -> str:
    from importlib import metadata

    import onnxruntime

    import ortmlx

    mlx = next((f"{n} {metadata.version(n)}" for n in ("mlx-cpu", "mlx-cuda-13", "mlx")
                if _has_dist(n)), "mlx ?")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src"],
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        commit += " + uncommitted changes in " + ", ".join(
            ln.split()[-1] for ln in dirty.splitlines())
    return (f"onnxruntime {onnxruntime.__version__}, {mlx}, ortmlx {ortmlx.version()} "
            f"(commit {commit}), Python {platform.python_version()}")


def _has_dist(name):
    from importlib import metadata

    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        return False


def fmt_ms(x):
    return f"{x * 1e3:.1f}" if x is not None else "-"


def table(rows) -> list[str]:
    head = ("| config | S | EP path | kernel ISA | EP ms | ORT CPU ms | speed-up | EP peak MiB | "
            "CPU peak MiB | memory ratio | EP GFLOP/s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        ep, cpu = r["ep"], r["cpu"]
        ep_t = ep.get("median_s")
        cpu_t = cpu.get("median_s") if cpu else None
        speed = f"{cpu_t / ep_t:.1f}x" if ep_t and cpu_t else "-"
        ep_m = ep.get("peak_rss_mib")
        cpu_m = cpu.get("peak_rss_mib") if cpu else None
        mem = f"{cpu_m / ep_m:.1f}x" if ep_m and cpu_m else "-"
        gf = f"{r['flops'] / ep_t / 1e9:.1f}" if ep_t else "-"
        cpu_cell = fmt_ms(cpu_t) if cpu_t else (cpu.get("error", "capped") if cpu else "capped")
        ep_cell = fmt_ms(ep_t) if ep_t else ep.get("error", "?")
        path = short_path(ep.get("paths"))
        if ep.get("on_ep") is False:
            path += " (NOT on EP)"
        isa = ep.get("isa", "-") if path != "native" else f"({ep.get('isa', '-')}, unused)"
        lines.append(f"| {r['config']} | {r['s']} | {path} | {isa} | {ep_cell} | {cpu_cell} | "
                     f"{speed} | "
                     f"{ep_m and f'{ep_m:.0f}' or '-'} | {cpu_m and f'{cpu_m:.0f}' or '-'} | "
                     f"{mem} | {gf} |")
    return lines


def targets(rows) -> list[str]:
    """The goals we report against: at S=2048 >= 3x faster and >= 10x lower peak memory than
    the body on ORT CPU; on the tiled path, memory flat in S past the dense budget."""
    out = ["## Against the targets", "",
           "Peak RSS is the whole process's: about 100-180 MiB of it (Python, ORT, MLX, the "
           "inputs) is there before the first run, which bounds the peak-RSS ratio whenever the "
           "body's own peak is below a few GiB; the run-time growth is given next to it.", ""]
    for r in rows:
        if r["s"] != 2048 or not r["cpu"] or not r["cpu"].get("median_s") \
                or not r["ep"].get("median_s"):
            continue
        sp = r["cpu"]["median_s"] / r["ep"]["median_s"]
        mem = r["cpu"]["peak_rss_mib"] / r["ep"]["peak_rss_mib"]
        grow = ((r["cpu"]["peak_rss_mib"] - r["cpu"]["base_rss_mib"])
                / max(1.0, r["ep"]["peak_rss_mib"] - r["ep"]["base_rss_mib"]))
        out.append(f"- S=2048, {r['config']} ({r['ep'].get('isa', '-')}): {sp:.2f}x faster (target 3x: "
                   f"{'met' if sp >= 3 else 'NOT met'}), {mem:.2f}x lower peak RSS (target 10x: "
                   f"{'met' if mem >= 10 else 'NOT met'}); counting only what the runs add "
                   f"(peak - RSS after session creation) the body takes {grow:.1f}x the EP's.")
    out += per_isa(rows)
    for name, isa in dict.fromkeys((r["config"], r["ep"].get("isa")) for r in rows):
        tiled = [r for r in rows if r["config"] == name and r["ep"].get("isa") == isa
                 and r["ep"].get("peak_rss_mib")
                 and short_path(r["ep"].get("paths")) == "tiled"]
        if len(tiled) >= 2:
            lo, hi = tiled[0], tiled[-1]
            grow = [f"{r['ep']['peak_rss_mib'] - r['ep']['base_rss_mib']:.0f}" for r in tiled]
            io = [f"{8 * r['b'] * r['h'] * r['s'] * r['d'] * 4 / 2**20:.0f}" for r in tiled]
            scores = [f"{4 * r['b'] * r['h'] * r['s'] ** 2 / 2**20:.0f}" for r in tiled]
            out.append(
                f"- {name} ({isa}), tiled path, S={'/'.join(str(r['s']) for r in tiled)}: EP peak RSS "
                f"{lo['ep']['peak_rss_mib']:.0f} -> {hi['ep']['peak_rss_mib']:.0f} MiB; growth "
                f"during the runs (peak - RSS after session creation) {'/'.join(grow)} MiB, "
                f"against {'/'.join(io)} MiB of O(S) inputs+outputs (8 tensors) and "
                f"{'/'.join(scores)} MiB for ONE (B, H, S, S) fp32 score matrix.")
    return out


def per_isa(rows) -> list[str]:
    """Per kernel instruction set, the smallest speed-up at S >= 1024 over the non-causal and
    the causal rows that have an ORT CPU time (targets: 1.5x and 2.5x)."""
    out = []
    for isa in dict.fromkeys(r["ep"].get("isa") for r in rows):
        for causal, goal in ((0, 1.5), (1, 2.5)):
            cells = [(r["cpu"]["median_s"] / r["ep"]["median_s"], r) for r in rows
                     if r["ep"].get("isa") == isa and r["causal"] == causal and r["s"] >= 1024
                     and r["cpu"] and r["cpu"].get("median_s") and r["ep"].get("median_s")]
            if not cells:
                continue
            sp, worst = min(cells, key=lambda c: c[0])
            out.append(f"- {isa}, {'causal' if causal else 'non-causal'} rows at S >= 1024: "
                       f"smallest speed-up {sp:.2f}x ({worst['config']}, S={worst['s']}; target "
                       f"{goal}x: {'met' if sp >= goal else 'NOT met'}), over {len(cells)} cells.")
    return out


def plot(rows, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(13, 5))
    configs = list(dict.fromkeys(r["config"] for r in rows))
    isas = list(dict.fromkeys(r["ep"].get("isa") for r in rows))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, name in enumerate(configs):
        rs = [r for r in rows if r["config"] == name]
        c = colors[i % len(colors)]
        # One EP line per kernel instruction set (dotted after the first), one ORT CPU line.
        series = [("ep", isa, "-o" if j == 0 else ":^", f"EP {isa}" if len(isas) > 1 else "EP")
                  for j, isa in enumerate(isas)] + [("cpu", isas[0], "--s", "ORT CPU body")]
        for key, isa, style, label in series:
            pts = [(r["s"], r[key]) for r in rs
                   if r["ep"].get("isa") == isa and r[key] and r[key].get("median_s")]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ax_t.plot(xs, [p[1]["median_s"] * 1e3 for p in pts], style, color=c,
                      label=f"{name}: {label}")
            ax_m.plot(xs, [p[1]["peak_rss_mib"] for p in pts], style, color=c,
                      label=f"{name}: {label}")
    for ax, title, unit in ((ax_t, "median time per backward", "ms"),
                            (ax_m, "process peak RSS", "MiB")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length S (Sq = Sk)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    ax_t.legend(fontsize=7)
    fig.suptitle("AttentionVJP (pkg.onnax): MLX EP vs the ONNX body on ORT CPU, fp32")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def write_outputs(data: dict, out: Path) -> None:
    rows = data["rows"]
    lines = table(rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    has_plot = plot(rows, out.with_suffix(".png"))
    load = data.get("loadavg")
    md = [
        "# AttentionVJP: MLX EP vs ORT CPU running the contract body",
        "",
        f"Command: `{data['command']}` ({data['elapsed_s'] / 60:.1f} min)",
        "",
        f"Machine: {data['machine']}" + (
            f"; load average {load[0]:.1f} at the start, {load[1]:.1f} at the end (the machine "
            "is shared with other work)" if load else ""),
        "",
        f"Versions: {data['versions']}",
        "",
        *([data["note"], ""] if data.get("note") else []),
        "Plain form (`AttentionVJP_r3_..._o012_m0`, Y given; the `Recompute` rows use "
        "`AttentionVJPRecompute_...`), Sq = Sk = S, HQ = HK, fp32, "
        "random inputs rotated between runs. Times: median after one warm-up run (which also "
        f"compiles); each cell is measured in {data['repeat']} fresh process(es) per runner, "
        "alternating EP and CPU, and the lower median is kept. Memory: peak RSS of the whole "
        "measuring process (Python + ORT + MLX + inputs; about 100 MiB before any run), the "
        "ratio is CPU / EP. The EP runs with default "
        "settings (dense while 4*B*H*S^2 bytes <= 64 MiB, else tiled; both run the fused CPU "
        "kernel on MLX's CPU backend, which recomputes Y for the Recompute form) except the "
        "`tiled` rows, which force the tiled path with "
        "ONNXRUNTIME_EP_MLX_ATTENTION_VJP_DENSE_LIMIT_BYTES=0, and the kernel instruction set "
        "(`kernel ISA`, as the EP's report names it), forced per run with "
        "ONNXRUNTIME_EP_MLX_CPU_ISA where the command passes --isa. "
        "`capped`: the ORT CPU body is not run there (it materialises several (B, H, S, S) "
        "fp32 tensors: too slow and too large for this 2-core, 24 GiB machine shared with "
        "other work). GFLOP/s counts 10*B*H*S^2*D, halved when causal.",
        "",
        *lines,
        "",
    ]
    md += targets(rows) + [""]
    if has_plot:
        md += [f"![time and memory]({out.with_suffix('.png').name})", ""]
    out.with_suffix(".md").write_text("\n".join(md))
    print("\n".join(lines))
    print(f"wrote {out.with_suffix('.md')}" + (" and .png" if has_plot else ""))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--runner", choices=["ep", "cpu"], default="ep")
    ap.add_argument("--b", type=int, default=1)
    ap.add_argument("--h", type=int, default=8)
    ap.add_argument("--s", type=int, default=256)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--causal", type=int, default=0)
    ap.add_argument("--path", default="")
    ap.add_argument("--isa", default="auto",
                    help="comma-separated kernel instruction sets to run the EP with (auto, "
                         "avx512, avx2, portable); each is measured against the same ORT CPU run")
    ap.add_argument("--sizes", default="", help="comma-separated S values (default: the grid)")
    ap.add_argument("--configs", default="",
                    help="comma-separated substrings; only configurations whose name has one")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per cell and runner")
    ap.add_argument("--timeout", type=int, default=420)
    ap.add_argument("--out", default=str(RESULTS / "attention_vjp"))
    ap.add_argument("--note", default="", help="a paragraph for the report (machine caveats)")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the .md/.png from the .json of an earlier run")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    out = Path(args.out)
    if args.report_only:
        data = json.loads(out.with_suffix(".json").read_text())
        if args.note:
            data["note"] = args.note
        write_outputs(data, out)
        return 0

    sizes = QUICK_SIZES if args.quick else SIZES
    if args.sizes:
        sizes = [int(x) for x in args.sizes.split(",")]
    isas = [x.strip() for x in args.isa.split(",") if x.strip()]
    configs = [c for c in CONFIGS
               if not args.configs or any(k in c[0] for k in args.configs.split(","))]
    rows = []
    started = time.time()
    load0 = os.getloadavg()[0]
    build = versions()  # at the start: commits landing during the run must not be credited
    for name, b, h, d, causal, path, cpu_max, *ep_max in configs:
        for s in sizes:
            if ep_max and s > ep_max[0]:
                continue
            cpu_path = "recompute" if path == "recompute" else ""
            eps, cpus = {isa: [] for isa in isas}, []
            for _ in range(args.repeat):  # alternate, so all see the same background load
                for isa in isas:
                    eps[isa].append(measure("ep", b, h, s, d, causal, path, args.timeout, isa))
                if s <= cpu_max:
                    cpus.append(measure("cpu", b, h, s, d, causal, cpu_path, args.timeout))
            cpu = min(cpus, key=lambda r: r.get("median_s", float("inf"))) if cpus else None
            for isa in isas:
                ep = min(eps[isa], key=lambda r: r.get("median_s", float("inf")))
                ep.setdefault("isa", isa)
                row = {"config": name, "b": b, "h": h, "d": d, "causal": causal, "s": s,
                       "forced_path": path, "flops": flops(b, h, s, d, causal), "ep": ep,
                       "cpu": cpu}
                rows.append(row)
                print(table([row])[-1], flush=True)
    cmd = "ORTMLX_LIBRARY=$PWD/build/libortmlx.so .venv/bin/python " + shlex.join(
        ["bench/attention_vjp.py", *sys.argv[1:]])
    data = {"command": cmd, "machine": machine(), "versions": build,
            "elapsed_s": time.time() - started, "repeat": args.repeat,
            "loadavg": [load0, os.getloadavg()[0]], "rows": rows, "note": args.note}
    write_outputs(data, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
