#!/usr/bin/env python3
"""Several MLX EP sessions of one model in one process, timed in turns against ORT's CUDA EP: does
a session's speed depend on the session (its captured CUDA graph, its memory), not on the model?

On the GPU machine, from the checkout root, with ortmlx's bundle and the peer's:

    ( source .gpu/env.sh && source .ortgpu/env.sh && \
      python3 bench/gpu_replay_sessions.py --models resnet18s_opset11 bert --sessions 4 --out OUT )

Per model: one CUDA EP session (use_tf32=0) and --sessions MLX EP sessions, all with device I/O
(bench/gpu_peer.py's runners), timed in interleaved rounds. Every MLX EP session writes its JSON
report (the same cost for each), from which this reads its graph-replay counters (captures,
replays, capture_blocks: the capture's EP blocks that missed the EP's cache) and its `eval` time
per run (for a replayed run: the graph's GPU time between CUDA events). A session slower in wall
time but not in `eval` loses its time on the host; one slower in `eval` runs a slower graph.
Writes OUT/gpu_replay_sessions.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "tests" / "corpus"))

import gpu_models as gm  # noqa: E402
import gpu_peer  # noqa: E402


def report_state(path: Path) -> dict:
    rep = json.loads(path.read_text())
    counters = rep.get("counters", {})
    return {"runs": counters.get("compute.runs", 0), "eval_s": rep.get("times", {}).get("eval", 0.0),
            "graph_replay": {k: v for k, v in counters.items() if k.startswith("graph_replay")}}


def bench_model(env, name: str, args, tmp: Path) -> dict:
    import corpus

    model = corpus.load_model(name)
    feeds = corpus.make_inputs(model, np.random.default_rng(0))
    data = model.SerializeToString()
    cpu = gm.cpu_session(data)
    want = cpu.run(None, feeds)
    out_specs = [(o.name, w.shape, w.dtype) for o, w in zip(cpu.get_outputs(), want)]
    del cpu
    runners, reports, keep = {}, {}, []
    for i in range(args.sessions):
        path = tmp / f"{name}_{i}.json"
        sess = gm.ep_session(env, data, {"report": str(path)})
        io = gm.DeviceIO(env, sess, feeds, out_specs)
        keep += [sess, io]
        runners[f"mlx{i}"] = io.run
        reports[f"mlx{i}"] = path
    csess = gpu_peer.cuda_session(data, False)
    cio = gpu_peer.CudaIO(csess, feeds, out_specs)
    keep += [csess, cio]
    runners["cuda"] = cio.run
    before = {k: None for k in reports}
    # Warm every session (its first run translates and captures), then note its report.
    for fn in runners.values():
        for _ in range(args.warmup):
            fn()
    for k, p in reports.items():
        before[k] = report_state(p)
    cells = gpu_peer.timed_interleaved(runners, 1, args.repeats, args.rounds, 1e9)
    row = {"model": name, "sessions": {}}
    cuda_ms = cells["cuda"]["median_s"] * 1e3
    row["cuda_ms"] = cuda_ms
    for k, p in reports.items():
        after = report_state(p)
        runs = after["runs"] - before[k]["runs"]
        cell = cells[k]
        row["sessions"][k] = {
            "median_ms": cell["median_s"] * 1e3, "min_ms": cell["min_s"] * 1e3,
            "vs_cuda": cell["median_s"] * 1e3 / cuda_ms,
            "eval_ms_per_run": (after["eval_s"] - before[k]["eval_s"]) * 1e3 / max(1, runs),
            "graph_replay": after["graph_replay"]}
    del keep, runners
    gm.free_memory(env)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["resnet18s_opset11", "resnet18s_opset9"])
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    env = gm.Env(SimpleNamespace(tf32=False, cpu_binding=False, no_torch=True, seed=0))
    result = {"command": "python3 bench/gpu_replay_sessions.py " + " ".join(sys.argv[1:]),
              "date": time.strftime("%Y-%m-%d %H:%MZ", time.gmtime()),
              "versions": {k: v for k, v in gm.versions(env).items() if k != "torch"},
              "rows": []}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = ["| model | session | MLX EP ms (min) | vs CUDA EP | eval ms a run | graph_replay counters |",
             "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="replay_sessions-") as tmp:
        for name in args.models:
            try:
                row = bench_model(env, name, args, Path(tmp))
            except Exception as e:  # noqa: BLE001
                row = {"model": name, "error": gm.failure(e)}
                print(name, "failed:", row["error"], flush=True)
            result["rows"].append(row)
            for k, s in row.get("sessions", {}).items():
                counters = ", ".join(f"{c.split('.', 1)[1]} {v}" for c, v in s["graph_replay"].items())
                line = (f"| {name} | {k} | {s['median_ms']:.3f} ({s['min_ms']:.3f}) | "
                        f"{s['vs_cuda']:.2f}x | {s['eval_ms_per_run']:.3f} | {counters} |")
                lines.append(line)
                print(line, flush=True)
            if "cuda_ms" in row:
                print(f"| {name} | CUDA EP | {row['cuda_ms']:.3f} | | | |", flush=True)
                lines.append(f"| {name} | CUDA EP | {row['cuda_ms']:.3f} | | | |")
            (out / "gpu_replay_sessions.json").write_text(json.dumps(result, indent=1))
    (out / "gpu_replay_sessions.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
