#!/usr/bin/env python3
"""Where a run's time goes on the GPU: the MLX EP (and ORT's CUDA EP when the peer bundle is
loaded) under torch's profiler (CUPTI traces every kernel of the process, MLX's included).

On the H200, from the checkout root:

    ( source .gpu/env.sh && python3 bench/gpu_profile.py --out $OUT --only bert resnet18s )
    ( source .gpu/env.sh && source .ortgpu/env.sh && python3 bench/gpu_profile.py --out $OUT )

Per model and EP, with device-resident I/O (bench/gpu_models.DeviceIO / gpu_peer.CudaIO):
  wall ms      median wall time per run, measured without the profiler;
  kernels      GPU kernels (and memcpy/memset) per run;
  gpu ms       summed kernel time per run; busy ms: the union of their intervals;
  idle share   1 - busy / wall: time the GPU waits for the host (launch, graph capture and
               update, synchronisation): the part more kernel speed cannot remove;
  top kernels  by time per run; host API  CUDA runtime/driver calls by time per run.
Writes OUT/gpu_profile.{json,md}. Models are those of bench/gpu_peer.py (`--only` filters).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import gpu_models as gm  # noqa: E402
import gpu_peer as peer  # noqa: E402
import onnxruntime as ort  # noqa: E402

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
HOST_CATS = {"cuda_runtime", "cuda_driver"}


def short(name: str, width: int = 70) -> str:
    name = name.split("(")[0] if "<" not in name else name
    return name if len(name) <= width else name[: width - 3] + "..."


def profile_runs(run, runs: int) -> dict:
    """Runs `run` `runs` times under torch's profiler; per-run kernel and host-API figures."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with tempfile.TemporaryDirectory(prefix="gpu_profile-") as tmp:
        path = os.path.join(tmp, "trace.json")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            for _ in range(runs):
                run()
            torch.cuda.synchronize()
            wall = (time.perf_counter() - t0) / runs
        prof.export_chrome_trace(path)
        trace = json.loads(Path(path).read_text())
    return {"profiled_wall_ms": wall * 1e3, **per_run(trace, runs)}


def per_run(trace: dict, runs: int) -> dict:
    """Kernel and host-API figures per run from a chrome trace of `runs` runs."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    gpu = [e for e in events if e.get("cat") in GPU_CATS]
    host = [e for e in events if e.get("cat") in HOST_CATS]
    spans = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in gpu)
    busy, end = 0.0, None
    for a, b in spans:
        if end is None or a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    by_kernel, by_api = defaultdict(float), defaultdict(lambda: [0, 0.0])
    count = defaultdict(int)
    for e in gpu:
        by_kernel[short(e["name"])] += e.get("dur", 0)
        count[short(e["name"])] += 1
    for e in host:
        by_api[e["name"]][0] += 1
        by_api[e["name"]][1] += e.get("dur", 0)
    top = sorted(by_kernel.items(), key=lambda kv: -kv[1])[:12]
    apis = sorted(by_api.items(), key=lambda kv: -kv[1][1])[:10]
    return {
        "kernels_per_run": len(gpu) / runs,
        "gpu_ms": sum(e.get("dur", 0) for e in gpu) / runs / 1e3,
        "busy_ms": busy / runs / 1e3,
        "top_kernels": [(k, v / runs / 1e3) for k, v in top],
        "host_api": [(k, c / runs, t / runs / 1e3) for k, (c, t) in apis],
        # Every kernel (JSON only): launches per run and ms per run, by launches.
        "all_kernels": [(k, count[k] / runs, by_kernel[k] / runs / 1e3)
                        for k in sorted(count, key=lambda k: -count[k])],
    }


def one(env, name, build, args, has_cuda) -> dict:
    row = {"model": name}
    model, feeds = build()
    data = model.SerializeToString()
    cpu = gm.cpu_session(data)
    want = cpu.run(None, feeds)
    out_specs = [(o.name, w.shape, w.dtype) for o, w in zip(cpu.get_outputs(), want)]
    del cpu
    sides = [("mlx", lambda: gm.DeviceIO(env, gm.ep_session(env, data), feeds, out_specs))]
    if args.ab:  # the same model translated with a switch set (read at each translation)
        sides.append(("mlx_ab", lambda: peer.translated_with(args.ab, env, data, feeds, out_specs)))
    if has_cuda:
        sides.append(("cuda", lambda: peer.CudaIO(peer.cuda_session(data, False), feeds,
                                                  out_specs)))
    for side, make in sides:
        try:
            io = make()
            timed = gm.timed(io.run, args.warmup, args.repeats, args.max_cell_s)
            prof = profile_runs(io.run, args.profile_runs)
            row[side] = {"wall_ms": timed["median_s"] * 1e3, **prof,
                         "err": gm.max_abs_diff(io.read(), want)}
            row[side]["idle_share"] = 1 - row[side]["busy_ms"] / row[side]["profiled_wall_ms"]
            del io
        except Exception as e:  # noqa: BLE001
            row[side] = gm.failure(e)
        gm.free_memory(env)
    return row


SIDES = ("mlx", "mlx_ab", "cuda")  # mlx_ab: the MLX EP translated with --ab's switch set


def table(rows) -> list[str]:
    lines = ["| model | EP | wall ms | profiled ms | kernels/run | gpu ms | busy ms | idle share |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for side in SIDES:
            c = r.get(side)
            if not c:
                continue
            if "wall_ms" not in c:
                lines.append(f"| {r['model']} | {side} | failed: {str(c)[:80]} |||||")
                continue
            lines.append(f"| {r['model']} | {side} | {c['wall_ms']:.3g} | "
                         f"{c['profiled_wall_ms']:.3g} | {c['kernels_per_run']:.0f} | "
                         f"{c['gpu_ms']:.3g} | {c['busy_ms']:.3g} | {c['idle_share']:.0%} |")
    return lines


def details(rows) -> list[str]:
    out = []
    for r in rows:
        for side in SIDES:
            c = r.get(side)
            if not c or "top_kernels" not in c:
                continue
            out += ["", f"### {r['model']}, {side}", "", "| kernel | ms/run |", "|---|---|"]
            out += [f"| `{k}` | {v:.4f} |" for k, v in c["top_kernels"]]
            out += ["", "| host API | calls/run | ms/run |", "|---|---|---|"]
            out += [f"| `{k}` | {n:.1f} | {t:.4f} |" for k, n, t in c["host_api"]]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(BENCH / "results"))
    ap.add_argument("--only", nargs="+", default=[],
                    help="models whose name contains one of these (=NAME: that model alone)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max-cell-s", type=float, default=2.0)
    ap.add_argument("--profile-runs", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cpu-binding", action="store_true")
    ap.add_argument("--ab", default="",
                    help="VAR=VALUE: the MLX EP once more (side mlx_ab), translated with VAR=VALUE "
                         "set, in the same process")
    args = ap.parse_args()
    import torch  # noqa: F401  (its CUPTI-backed profiler sees every kernel of the process)

    env = gm.Env(SimpleNamespace(tf32=False, cpu_binding=args.cpu_binding, no_torch=True, seed=0))
    has_cuda = peer.CUDA_EP in ort.get_available_providers()
    rows = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    knobs = {k: os.environ[k] for k in os.environ if k.startswith(("MLX_", "ONNXRUNTIME_EP_MLX"))}
    for name, _, build in peer.model_list(args.quick):
        if not gm.name_selected(name, args.only):
            continue
        t0 = time.time()
        try:
            rows.append(one(env, name, build, args, has_cuda))
        except Exception as e:  # noqa: BLE001
            rows.append({"model": name, "mlx": gm.failure(e)})
        print(f"{name}: {time.time() - t0:.1f} s", flush=True)
        result = {"versions": gm.versions(env), "knobs": knobs, "ab": args.ab, "rows": rows}
        (out / "gpu_profile.json").write_text(json.dumps(result, indent=1, default=str))
    ab = f"; mlx_ab: the MLX EP translated with {args.ab}" if args.ab else ""
    md = ["# Where a run's time goes on the GPU", "",
          f"Knobs: {knobs or 'none'}{ab}; versions: {gm.versions(env)}", ""] + table(rows) + details(rows)
    (out / "gpu_profile.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
