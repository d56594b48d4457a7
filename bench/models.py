"""The real-architecture corpus (tests/corpus) timed: ORT CPU EP vs MLXExecutionProvider.

    .venv/bin/python bench/models.py [--runs 30] [--warmup 5] [--models bert,gpt2]
                                     [--out bench/results/models.md]

Three configurations, each in its own process (the EP reads ONNXRUNTIME_EP_MLX_CPU_CLAIM when its
library loads, so one process per setting): ORT's CPU EP alone; the EP with default settings
(MLX's CPU backend may leave ops to ORT's CPU EP where MLX is slower); the EP with
ONNXRUNTIME_EP_MLX_CPU_CLAIM=all (every op the EP can run). Per model: warm-up, then the median
ms of `session.run` over N runs with the corpus's seeded inputs; ratio = EP / CPU (<1: the EP is
faster). Writes a Markdown table (command, date, machine, versions) and a bar plot of the ratios
when matplotlib is installed in the venv.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import zlib
from importlib import metadata

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "corpus"))

import corpus  # noqa: E402

CONFIGS = {
    "cpu": ("ORT CPU EP", None),
    "ep": ("EP default", None),
    "ep_all": ("EP claim=all", "all"),
}


def worker(config: str, names: list[str], runs: int, warmup: int) -> None:
    """Times every model in this process; one JSON line per model on stdout."""
    import ortmlx
    from ortmlx.testing import EpRun, cpu_session

    if config != "cpu":
        ortmlx.register_execution_provider_library()
    for name in names:
        model = corpus.load_model(name)
        feeds = corpus.make_inputs(model, np.random.default_rng(zlib.crc32(name.encode())))
        ep_run = None
        if config == "cpu":
            sess = cpu_session(model)
        else:
            ep_run = EpRun(model)
            sess = ep_run.session
        for _ in range(warmup):
            out = sess.run(None, feeds)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            out = sess.run(None, feeds)
            times.append(time.perf_counter() - t0)
        rec = {"model": name, "ms": 1e3 * statistics.median(times),
               "nodes": corpus.model_node_count(model),
               "outputs": [o.astype(np.float64).ravel()[:4096].tolist() for o in out]}
        if ep_run is not None:
            report = ep_run.report()
            rec.update(on_ep=report.executed_count(), total=corpus.graph_nodes(report),
                       fused=sum(1 for f in report.fused.values() if f["runs"] > 0))
            ep_run.close()
        print(json.dumps(rec), flush=True)


def library_knows_cpu_claim() -> bool:
    """Whether the library has the cpu_claim option (older ones fail to create the EP with it,
    and ORT then falls back to its CPU EP): without it "EP default" claims everything too."""
    code = ("import ortmlx, sys; sys.path.insert(0, %r); import corpus;"
            "from ortmlx.testing import EpRun; ortmlx.register_execution_provider_library();"
            "EpRun(corpus.load_model('whisper_encoder'), provider_options={'cpu_claim': 'auto'})"
            % os.path.join(ROOT, "tests", "corpus"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return p.returncode == 0 and "unknown provider option" not in p.stdout + p.stderr


def run_config(config: str, names, runs, warmup) -> dict:
    env = dict(os.environ)
    env.pop("ONNXRUNTIME_EP_MLX_CPU_CLAIM", None)
    if CONFIGS[config][1]:
        env["ONNXRUNTIME_EP_MLX_CPU_CLAIM"] = CONFIGS[config][1]
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", config, "--models",
           ",".join(names), "--runs", str(runs), "--warmup", str(warmup)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    out = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            out[rec["model"]] = rec
    if p.returncode != 0:
        print(f"{config}: worker failed (rc {p.returncode}):\n{p.stderr[-3000:]}", file=sys.stderr)
    return out


def machine() -> str:
    model, cores = platform.processor() or "?", os.cpu_count()
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            k, _, v = line.partition(":")
            if k.strip() == "Model name":
                model = v.strip()
    except OSError:
        pass
    return f"{model}, {cores} cores"


def versions() -> str:
    import ortmlx
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
    lib = ortmlx.library_path()
    built = datetime.datetime.fromtimestamp(os.path.getmtime(lib), datetime.timezone.utc)
    out["library"] = f"{os.path.relpath(lib, ROOT)} (built {built:%Y-%m-%d %H:%M} UTC)"
    return ", ".join(f"{k} {v}" for k, v in out.items())


def max_diff(a: dict, b: dict) -> float:
    if not a or not b:
        return float("nan")
    return max((float(np.max(np.abs(np.array(x) - np.array(y)))) if len(x) else 0.0)
               for x, y in zip(a["outputs"], b["outputs"]))


def fmt_ratio(ep: dict | None, cpu: dict | None) -> str:
    return f"{ep['ms'] / cpu['ms']:.2f}x" if ep and cpu else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--models", default="")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "models.md"))
    ap.add_argument("--worker", choices=list(CONFIGS))
    args = ap.parse_args()
    names = args.models.split(",") if args.models else corpus.model_names()
    if args.worker:
        worker(args.worker, names, args.runs, args.warmup)
        return 0

    knows_cpu_claim = library_knows_cpu_claim()
    load_before = os.getloadavg()
    results = {c: run_config(c, names, args.runs, args.warmup) for c in CONFIGS}
    load_after = os.getloadavg()
    cpu, ep, ep_all = (results[c] for c in CONFIGS)
    rows = []
    for n in names:
        c, e, a = cpu.get(n), ep.get(n), ep_all.get(n)

        def share(r):
            return f"{r['on_ep']}/{r['total']}" if r else "n/a"

        def ms(r):
            return f"{r['ms']:.3f}" if r else "failed"

        rows.append(f"| {n} | {c['nodes'] if c else '?'} | {ms(c)} | {share(e)} | {ms(e)} | "
                    f"{fmt_ratio(e, c)} | {share(a)} | {a['fused'] if a else '?'} | {ms(a)} | "
                    f"{fmt_ratio(a, c)} | {max_diff(a, c):.1e} |")
        print(rows[-1], flush=True)

    cmd = "python bench/models.py " + " ".join(sys.argv[1:])
    lines = [
        "# Real-architecture corpus: ORT CPU EP vs MLXExecutionProvider",
        "",
        f"Command: `.venv/bin/{cmd.strip()}`  ",
        f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  ",
        f"Machine: {machine()}; load average (1 min) {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after  ",
        f"Versions: {versions()}",
        "",
        "Models: tests/corpus (small configs of real architectures, random weights; see "
        "tests/corpus/README.md). Median ms per `session.run` over "
        f"{args.runs} runs after {args.warmup} warm-up runs, same seeded inputs each run; each "
        "configuration in its own process, run one after the other. *EP default*: the EP with "
        "default settings; *EP claim=all*: `ONNXRUNTIME_EP_MLX_CPU_CLAIM=all`. *on EP*: model "
        "nodes that ran on the EP / nodes of ORT's graph. *ratio* = EP ms / CPU ms (<1: the EP "
        "is faster). *max abs diff*: EP claim=all vs ORT CPU on the first 4096 values of each "
        "output. *parts*: fused EP partitions that ran (each costs a hand-off to the MLX thread "
        "and back per run). The machine is shared with other jobs: read the ratios, not the "
        "absolute times.",
        "",
        "| model | nodes | ORT CPU ms | on EP (default) | EP default ms | ratio | on EP (all) | "
        "parts | EP all ms | ratio | max abs diff |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    if not knows_cpu_claim:
        lines += ["", "Note: this library predates the `cpu_claim` option, so *EP default* "
                  "claims everything as *EP claim=all* does (the two columns differ by noise)."]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    plot = os.path.splitext(args.out)[0] + ".png"
    note = write_plot(plot, names, cpu, ep, ep_all)
    if note:
        lines += ["", note]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


def write_plot(path, names, cpu, ep, ep_all) -> str:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ("No plot: matplotlib is not installed in this venv "
                "(`.venv/bin/pip install -r bench/requirements.txt`).")
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(names)), 4))
    for off, (res, label) in zip((-0.2, 0.2), ((ep, "EP default"), (ep_all, "EP claim=all"))):
        ratios = [res[n]["ms"] / cpu[n]["ms"] if n in res and n in cpu else np.nan for n in names]
        ax.bar(x + off, ratios, width=0.4, label=label)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(x, names, rotation=45, ha="right")
    ax.set_ylabel("EP ms / ORT CPU ms (log; < 1: EP faster)")
    ax.set_title("Corpus models: MLXExecutionProvider vs ORT CPU EP")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return ""


if __name__ == "__main__":
    sys.exit(main())
