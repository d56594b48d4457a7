"""Compiled vs eager execution on MLXExecutionProvider, side by side with ORT's CPU EP.

    .venv/bin/python bench/engine.py [--runs 50] [--out bench/results/engine.md]

For each model: a session with the shape-keyed compiled path (default), one with
`no_compile=1` (eager translation every run) and ORT's CPU EP, all in one process. Each is warmed
up, then timed as the median of many runs, rotating over several random inputs. Reported as
ratios (timings on a shared machine are indicative; ratios taken in one run are what we claim),
with the EP's own counters (cache hits, time split) and the largest |compiled - eager|.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from importlib import metadata

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import ortmlx  # noqa: E402
from ortmlx import models  # noqa: E402
from ortmlx.testing import EpRun, cpu_session, make_model  # noqa: E402


def tiny_model():
    """One Add on 4 floats: the fixed cost of a Compute (ORT, MLX thread hand-off, eval, copies)."""
    a = h.make_tensor_value_info("x", T.FLOAT, [4])
    y = h.make_tensor_value_info("y", T.FLOAT, [4])
    one = onnx.numpy_helper.from_array(np.ones(4, np.float32), "one")
    model = make_model(h.make_graph([h.make_node("Add", ["x", "one"], ["y"], name="add")],
                                    "tiny", [a], [y], [one]))
    return model, {"x": np.arange(4, dtype=np.float32)}


def elementwise_mlp(rows=256, width=1024, layers=4, seed=0):
    """Elementwise-heavy gated MLP (per-feature weights, no matmul): 7 ops per layer; the kind of
    graph mlx::compile fuses into few kernels."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    prev = "x"

    def w(name, scale, offset=0.0):
        inits.append(onnx.numpy_helper.from_array(
            (offset + rng.standard_normal(width) * scale).astype(np.float32), name))
        return name

    for i in range(layers):
        p = f"l{i}"
        n = [
            h.make_node("Mul", [prev, w(f"{p}.w1", 0.5, 1.0)], [f"{p}.a"], name=f"{p}/mul1"),
            h.make_node("Add", [f"{p}.a", w(f"{p}.b1", 0.1)], [f"{p}.b"], name=f"{p}/add1"),
            h.make_node("Gelu", [f"{p}.b"], [f"{p}.g"], name=f"{p}/gelu"),
            h.make_node("Mul", [prev, w(f"{p}.w2", 0.5, 1.0)], [f"{p}.c"], name=f"{p}/mul2"),
            h.make_node("Sigmoid", [f"{p}.c"], [f"{p}.s"], name=f"{p}/sigmoid"),
            h.make_node("Mul", [f"{p}.g", f"{p}.s"], [f"{p}.gs"], name=f"{p}/gate"),
            h.make_node("Add", [prev, f"{p}.gs"], [f"{p}.out"], name=f"{p}/residual"),
        ]
        nodes += n
        prev = f"{p}.out"
    nodes.append(h.make_node("Tanh", [prev], ["y"], name="out"))
    x = h.make_tensor_value_info("x", T.FLOAT, [rows, width])
    y = h.make_tensor_value_info("y", T.FLOAT, [rows, width])
    model = make_model(h.make_graph(nodes, "elementwise_mlp", [x], [y], inits))
    return model, {"x": rng.standard_normal((rows, width)).astype(np.float32)}


def arithmetic_mlp(rows=256, width=1024, layers=8, seed=0):
    """Memory-bound elementwise arithmetic (Mul, Add, Sub, Relu, Abs, Neg: no transcendentals),
    6 ops per layer: where fusing into one pass over memory should pay off."""
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    prev = "x"
    for i in range(layers):
        p = f"l{i}"
        for name, off in (("w", 1.0), ("b", 0.0)):
            inits.append(onnx.numpy_helper.from_array(
                (off + rng.standard_normal(width) * 0.1).astype(np.float32), f"{p}.{name}"))
        nodes += [
            h.make_node("Mul", [prev, f"{p}.w"], [f"{p}.a"], name=f"{p}/mul"),
            h.make_node("Add", [f"{p}.a", f"{p}.b"], [f"{p}.c"], name=f"{p}/add"),
            h.make_node("Relu", [f"{p}.c"], [f"{p}.r"], name=f"{p}/relu"),
            h.make_node("Neg", [f"{p}.c"], [f"{p}.n"], name=f"{p}/neg"),
            h.make_node("Abs", [f"{p}.n"], [f"{p}.ab"], name=f"{p}/abs"),
            h.make_node("Sub", [f"{p}.ab", f"{p}.r"], [f"{p}.out"], name=f"{p}/sub"),
        ]
        prev = f"{p}.out"
    nodes.append(h.make_node("Add", [prev, "x"], ["y"], name="residual"))
    x = h.make_tensor_value_info("x", T.FLOAT, [rows, width])
    y = h.make_tensor_value_info("y", T.FLOAT, [rows, width])
    model = make_model(h.make_graph(nodes, "arithmetic_mlp", [x], [y], inits))
    return model, {"x": rng.standard_normal((rows, width)).astype(np.float32)}


CASES = [
    ("tiny: one Add [4]", tiny_model, {}),
    ("arithmetic MLP 256x1024, 8 layers (49 ops)", arithmetic_mlp, {}),
    ("elementwise gated MLP 256x1024, 4 layers (29 ops)", elementwise_mlp, {}),
    ("demo encoder B2 S16 E64 H4, 2 layers", models.transformer_encoder, {}),
    ("encoder B4 S128 E256 H8 FFN1024, 4 layers", models.transformer_encoder,
     dict(batch=4, seq=128, embed=256, heads=8, ffn=1024, layers=4)),
]


def rotating_feeds(feeds, n=4, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        out.append({k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in feeds.items()})
    return out


def interleaved_times(fns: dict, feeds_list, warmup, runs):
    """Seconds per call of each fn, measured interleaved (one call of each per round, in a
    rotating order) so that load changes on a shared machine hit every variant alike."""
    names = list(fns)
    for i in range(warmup):
        for name in names:
            fns[name](feeds_list[i % len(feeds_list)])
    times = {name: [] for name in names}
    for i in range(runs):
        f = feeds_list[i % len(feeds_list)]
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            t0 = time.perf_counter()
            fns[name](f)
            times[name].append(time.perf_counter() - t0)
    return times


def paired_ratio(times, num, den):
    """Median over rounds of num/den: robust to load that shifts between rounds."""
    return statistics.median(a / b for a, b in zip(times[num], times[den]))


def machine():
    info = {"model": platform.processor() or "?", "cores": os.cpu_count()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() == "Model name":
                info["model"] = v.strip()
            if k.strip() in ("CPU(s)", "Thread(s) per core", "Core(s) per socket"):
                info[k.strip()] = v.strip()
    except OSError:
        pass
    return info


def versions():
    out = {"python": platform.python_version(), "ortmlx": ortmlx.version()}
    for pkg in ("onnxruntime", "mlx-cpu", "mlx-cuda-13", "onnx", "numpy"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    try:
        out["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                       capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return out


def ep_session(model, provider_options=None):
    """A plain session on the EP (no JSON report: writing it after every run would be timed)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    ortmlx.append_to_session_options(so, provider_options or {})
    return ort.InferenceSession(model.SerializeToString(), so)


def steady_split(model, feeds_list, provider_options, warmup, runs):
    """The EP's own per-run time split and counters in steady state (a separate session with the
    JSON report on: counters after warm-up are subtracted from those at the end)."""
    run = EpRun(model, provider_options=provider_options)
    try:
        for i in range(warmup):
            run.run(feeds_list[i % len(feeds_list)])
        t0 = dict(run.report().raw.get("times", {}))
        for i in range(runs):
            run.run(feeds_list[i % len(feeds_list)])
        rep = run.report()
        t1 = rep.raw.get("times", {})
        claims = [c for c in rep.raw["claims"].values() if not c.get("superseded")]
        return ({k: (t1.get(k, 0) - t0.get(k, 0)) / runs for k in t1}, rep.counters(),
                len(rep.executed_nodes()), sum(c["total_nodes"] for c in claims))
    finally:
        run.close()


def bench_case(label, build, kwargs, runs, warmup):
    model, feeds = build(**kwargs)
    feeds_list = rotating_feeds(feeds)
    sessions = {
        "compiled": ep_session(model),                       # default: fused kernels
        "unfused": ep_session(model, {"compile_fuse": 0}),   # compiled, no kernel fusion
        "eager": ep_session(model, {"no_compile": 1}),
    }
    cpu = cpu_session(model)
    outs, first = {}, {}
    for k, sess in sessions.items():
        t0 = time.perf_counter()
        outs[k] = sess.run(None, feeds)[0]
        first[k] = (time.perf_counter() - t0) * 1e3
    want = cpu.run(None, feeds)[0]
    n_runs = runs if sum(v.size for v in feeds.values()) * len(model.graph.node) < 5e6 \
        else max(10, runs // 3)
    fns = {k: (lambda f, s=s: s.run(None, f)) for k, s in sessions.items()}
    fns["cpu"] = lambda f: cpu.run(None, f)
    times = interleaved_times(fns, feeds_list, warmup, n_runs)
    t = {name: statistics.median(v) * 1e3 for name, v in times.items()}
    del sessions
    k = max(5, n_runs // 3)
    split_c, ctr, on_ep, total = steady_split(model, feeds_list, {}, warmup, k)
    split_e, _, _, _ = steady_split(model, feeds_list, {"no_compile": 1}, warmup, k)
    diff = lambda a, b: float(np.max(np.abs(a.astype(np.float64) - b)))  # noqa: E731
    return {
        "label": label, "nodes": f"{on_ep}/{total}", "runs": n_runs,
        "compiled_ms": t["compiled"], "unfused_ms": t["unfused"], "eager_ms": t["eager"],
        "cpu_ms": t["cpu"],
        "first": first,
        "speedup": paired_ratio(times, "eager", "compiled"),
        "speedup_unfused": paired_ratio(times, "eager", "unfused"),
        "vs_cpu": paired_ratio(times, "cpu", "compiled"),
        "diff_ce": diff(outs["compiled"], outs["eager"]),
        "diff_ue": diff(outs["unfused"], outs["eager"]),
        "diff_cpu": diff(outs["compiled"], want),
        "hits": ctr.get("cache.hit", 0), "misses": ctr.get("cache.miss", 0),
        "retraces": ctr.get("cache.retrace", 0), "fallbacks": ctr.get("compile.fallback", 0),
        "split_compiled": split_c, "split_eager": split_e,
    }


def split_text(times):
    if not times:
        return "-"
    keys = ("translate", "compile", "eval", "copy", "queue")
    parts = [f"{k} {times.get(k, 0) * 1e3:.3f}" for k in keys]
    other = (times.get("compute", 0) - sum(times.get(k, 0) for k in keys)) * 1e3
    return ", ".join(parts) + f", other {other:.3f} (total {times.get('compute', 0) * 1e3:.3f})"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "engine.md"))
    args = ap.parse_args(argv)
    ortmlx.register_execution_provider_library()

    rows = []
    for label, build, kwargs in CASES:
        print(f"... {label}", file=sys.stderr, flush=True)
        rows.append(bench_case(label, build, kwargs, args.runs, args.warmup))

    mach, ver = machine(), versions()
    lines = [
        "# Engine: compiled vs eager (MLXExecutionProvider, MLX CPU backend)",
        "",
        f"Command: `.venv/bin/python bench/engine.py --runs {args.runs} --warmup {args.warmup}`  ",
        f"Date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}  ",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in mach.items()) + "  ",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in ver.items()),
        "",
        "Median ms per `session.run` after warm-up, rotating 4 random inputs; all variants in one",
        "process, timed interleaved (one run of each per round). *compiled* = the default",
        "shape-keyed compiled path (MLX generates fused kernels), *unfused* = the same with",
        "`compile_fuse=0` (graph replay, no kernel fusion), *eager* = `no_compile=1`.",
        "*speed-up* = eager / compiled (>1: compiling helps), *vs CPU EP* = ORT CPU EP / compiled",
        "(>1: the MLX EP is faster), both the median of per-round ratios. The machine is shared",
        "with other jobs: read the ratios, not the absolute times.",
        "",
        "| model | nodes on EP | compiled ms | unfused ms | eager ms | speed-up (unfused) "
        "| ORT CPU ms | vs CPU EP | max abs compiled-eager (unfused-eager) | max abs vs CPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['nodes']} | {r['compiled_ms']:.3f} | {r['unfused_ms']:.3f} | "
            f"{r['eager_ms']:.3f} | {r['speedup']:.2f}x ({r['speedup_unfused']:.2f}x) | "
            f"{r['cpu_ms']:.3f} | {r['vs_cpu']:.2f}x | {r['diff_ce']:.1e} ({r['diff_ue']:.1e}) | "
            f"{r['diff_cpu']:.1e} |")
    lines += [
        "",
        "Where the time goes inside Compute, in steady state (a second pair of sessions with the",
        "JSON report on; ms per run after warm-up): translate = graph build (eager) or compiled",
        "replay, compile = trace + mlx::compile (misses only), eval = mlx::eval, copy = inputs in",
        "and outputs out, queue = waiting for the MLX thread, other = the rest of Compute. The",
        "difference between *total* and the session.run median above is ORT's own per-run work.",
        "Cache counters are those of the compiled stats session (first run + warm-up + runs). The",
        "first run of a session includes tracing, mlx::compile and, when fusing, the JIT",
        "compilation of new kernels (MLX keeps those for the rest of the process):",
        "",
        "| model | first run ms: compiled / unfused / eager | cache HIT / MISS / RETRACE "
        "| fallbacks | compiled: ms per run | eager: ms per run |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['first']['compiled']:.1f} / {r['first']['unfused']:.1f} / "
            f"{r['first']['eager']:.1f} | {r['hits']} / {r['misses']} / {r['retraces']} | "
            f"{r['fallbacks']} | "
            f"{split_text(r['split_compiled'])} | {split_text(r['split_eager'])} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
