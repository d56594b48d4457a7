#!/usr/bin/env python3
"""The MLX EP against ONNX Runtime's own CUDA EP, in one process, on the same data (the peer an
NVIDIA user would pick instead).

On the H200, from the checkout root, with ortmlx's bundle and the peer's (onnxruntime-gpu 1.30.0,
made by the project's ort_cuda_bundle.sh into a git-ignored folder, e.g. .ortgpu):

    ( source .gpu/env.sh && source .ortgpu/env.sh && python3 bench/gpu_peer.py --out $OUT )

ortmlx registers into that same onnxruntime, so both EPs run in one process. Each precision mode
runs in a child process of its own (the EP decides its fp32 matmul mode when its library loads):
  exact: the MLX EP's default (exact fp32) vs the CUDA EP with use_tf32=0;
  tf32:  ONNXRUNTIME_EP_MLX_TF32=1 vs the CUDA EP with use_tf32=1.
Per model: both EPs with device-resident I/O (IOBinding: inputs uploaded once, outputs
pre-allocated on the GPU; only run_with_iobinding + synchronize_outputs is timed), both sessions
alive at once and timed in turns (rounds of --repeats runs each, --rounds rounds), medians; the
ratio MLX EP / CUDA EP (< 1: the MLX EP is faster); max |EP - ORT CPU| for both; the MLX EP's
partitions (fused nodes, eager ones, nodes on the EP / all) and its per-run time outside MLX's
evaluation (median wall per run minus the mean eval time per run its JSON report accumulates
over a second loop).
Models: the 14 corpus models (tests/corpus), the transformer encoder at B1 S128 and B8 S512
(E768 H12 F3072, L12 and L4), ResNet-18 at batch 32 224x224, and a GPT-2-small-sized decoder step
with a KV cache of 512 positions (ortmlx.models).

Writes OUT/gpu_peer.{json,md,png}; every cell is wrapped (a failure is recorded, the run goes on).
`--quick` shrinks everything (a smoke test: without the CUDA EP its columns say so).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "tests" / "corpus"))

import gpu_models as gm  # noqa: E402  (shared probes, device I/O and timing)
import onnxruntime as ort  # noqa: E402

from ortmlx import models as builders  # noqa: E402

CUDA_EP = "CUDAExecutionProvider"
TARGET_RATIO = {"encoder": 1.0, "cnn": 1.0, "decoder": 1.0, "corpus": 1.5}
TARGET_OUTSIDE_EVAL_MS = 0.2


def model_list(quick: bool):
    """(name, kind, builder) with kind in corpus / encoder / cnn / decoder."""
    import corpus

    out = []
    for name in corpus.model_names():
        def load(name=name):
            m = corpus.load_model(name)
            return m, corpus.make_inputs(m, np.random.default_rng(0))
        out.append((name, "corpus", load))
    if quick:
        out = out[:2]
        enc = [("encoder B1 S16 E64 L2", dict(batch=1, seq=16, embed=64, heads=4, ffn=128,
                                              layers=2))]
        cnn = ("resnet18 B2 64x64", dict(batch=2, size=64))
        dec = ("decoder step B1 past 16 E64 L2", dict(past=16, embed=64, heads=4, ffn=128,
                                                     layers=2))
    else:
        enc = [("encoder B1 S128 E768 H12 F3072 L12",
                dict(batch=1, seq=128, embed=768, heads=12, ffn=3072, layers=12)),
               ("encoder B8 S512 E768 H12 F3072 L4",
                dict(batch=8, seq=512, embed=768, heads=12, ffn=3072, layers=4))]
        cnn = ("resnet18 B32 224x224", dict(batch=32, size=224))
        dec = ("decoder step B1 past 512 E768 H12 L12 (GPT-2 small)", dict(past=512))
    for name, kw in enc:
        out.append((name, "encoder", lambda kw=kw: builders.transformer_encoder(**kw)))
    out.append((cnn[0], "cnn", lambda kw=cnn[1]: builders.resnet18(**kw)))
    out.append((dec[0], "decoder", lambda kw=dec[1]: builders.decoder_step(**kw)))
    return out


class CudaIO:
    """Device-resident I/O for ORT's CUDA EP: inputs uploaded once, outputs pre-allocated."""

    def __init__(self, sess, feeds: dict, out_specs):
        self.sess, self.io = sess, sess.io_binding()
        self.keep = []
        for name, arr in feeds.items():
            v = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(arr), "cuda", 0)
            self.keep.append(v)
            self.io.bind_ortvalue_input(name, v)
        self.outputs = []
        for name, shape, dtype in out_specs:
            v = ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype, "cuda", 0)
            self.outputs.append(v)
            self.io.bind_ortvalue_output(name, v)

    def run(self):
        self.sess.run_with_iobinding(self.io)
        self.io.synchronize_outputs()

    def read(self) -> list:
        return [v.numpy() for v in self.outputs]


def cuda_session(model_bytes: bytes, tf32: bool):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_bytes, so, providers=[
        (CUDA_EP, {"use_tf32": "1" if tf32 else "0", "device_id": "0"}), "CPUExecutionProvider"])
    if CUDA_EP not in sess.get_providers():
        raise RuntimeError(f"the session has no {CUDA_EP} ({sess.get_providers()})")
    return sess


def partitions(env, model_bytes: bytes, feeds: dict) -> dict:
    """The MLX EP's report after one run: fused nodes, eager ones, nodes on the EP."""
    with tempfile.TemporaryDirectory(prefix="gpu_peer-") as tmp:
        path = os.path.join(tmp, "report.json")
        s = gm.ep_session(env, model_bytes, {"report": path})
        s.run(None, feeds)
        rep = json.loads(Path(path).read_text())
        del s
    fused = rep.get("fused", {})
    executed = sum(len(v["nodes"]) for v in fused.values() if v.get("runs", 0) > 0)
    total = sum(c["total_nodes"] + c.get("kept_nodes", 0) + c.get("other_ep_nodes", 0)
                for c in rep.get("claims", {}).values() if c.get("latest", True))
    refused = sorted({op for c in rep.get("claims", {}).values() for op in c.get("refused", {})})
    # Fast paths taken per run (the pattern pass, fused kernels): "fast N" in the table.
    fast = sum(p.get("count", 0) for p in rep.get("paths", {}).values() if p.get("fast"))
    return {"fused": len(fused), "eager": sum(1 for v in fused.values() if v.get("eager_only")),
            "on_ep": f"{executed}/{total}", "refused": refused, "fast": fast}


# Report counters that say how the measured runs ran (diffed over the same runs as the phases).
RUN_COUNTERS = {"runs": "compute.runs", "replayed": "graph_replay.replay",
                "captured": "graph_replay.capture", "eager": "compute.eager",
                "speculation_miss": "compile.speculation_miss"}


def phases_per_run(env, model_bytes: bytes, feeds: dict, out_specs,
                   runs: int) -> tuple[dict, dict]:
    """Seconds per device-I/O run of each phase the EP's JSON report accumulates (eval: MLX's
    evaluation; translate: the graph build or compiled replay; copy: input/output copies; queue:
    the wait for the EP's MLX thread), diffed over `runs` runs; and how many of those runs were
    replayed CUDA graphs, captures, eager runs and speculation misses (RUN_COUNTERS). That
    session rewrites its report after every run, so its wall time is not the one compared: the
    timed loop runs without a report."""
    with tempfile.TemporaryDirectory(prefix="gpu_peer-") as tmp:
        path = os.path.join(tmp, "report.json")
        s = gm.ep_session(env, model_bytes, {"report": path})
        dio = gm.DeviceIO(env, s, feeds, out_specs)
        for _ in range(3):
            dio.run()
        r0 = json.loads(Path(path).read_text())
        for _ in range(runs):
            dio.run()
        r1 = json.loads(Path(path).read_text())
        del dio, s
    t0, t1 = r0["times"], r1["times"]
    phases = {k: (t1.get(k, 0.0) - t0.get(k, 0.0)) / runs
              for k in ("eval", "translate", "copy", "queue")}
    c0, c1 = r0.get("counters", {}), r1.get("counters", {})
    return phases, {k: c1.get(c, 0) - c0.get(c, 0) for k, c in RUN_COUNTERS.items()}


def timed_interleaved(fns: dict, warmup: int, repeats: int, rounds: int, max_s: float) -> dict:
    """Times several runners in turns: each round runs every runner `repeats` times in a row,
    over `rounds` rounds (fewer, but at least two, once max_s seconds per runner have passed), so
    that clock and thermal drift on the GPU falls on all runners alike. A runner that raises is
    dropped and its error recorded. Per runner: median, min, runs, first (compiling) run."""
    cells, live = {}, {}
    for key, fn in fns.items():
        try:
            t0 = time.perf_counter()
            fn()
            first = time.perf_counter() - t0
            for _ in range(max(0, warmup - 1)):
                fn()
            cells[key] = {"first_s": first, "times": []}
            live[key] = fn
        except Exception as e:  # noqa: BLE001
            cells[key] = gm.failure(e)
    start = time.perf_counter()
    for r in range(rounds):
        for key in list(live):
            try:
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    live[key]()
                    cells[key]["times"].append(time.perf_counter() - t0)
            except Exception as e:  # noqa: BLE001
                cells[key] = gm.failure(e)
                del live[key]
        if r >= 1 and time.perf_counter() - start > max_s * max(1, len(live)):
            break
    for key in live:
        t = cells[key].pop("times")
        cells[key] |= {"median_s": statistics.median(t), "min_s": min(t), "runs": len(t)}
    return cells


def translated_with(setting: str, env, data: bytes, feeds: dict, out_specs):
    """A device-I/O MLX EP session whose first run (its translation) sees setting = "VAR=VALUE"
    in the environment; the variable is restored after. The library's switches are read at each
    translation, and later runs replay it: the A/B session of --ab (here and gpu_profile.py)."""
    var, _, value = setting.partition("=")
    before = os.environ.get(var)
    os.environ[var] = value
    try:
        io = gm.DeviceIO(env, gm.ep_session(env, data), feeds, out_specs)
        io.run()
        return io
    finally:
        if before is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = before


def bench_one(env, name: str, kind: str, build, args, tf32: bool, has_cuda: bool) -> dict:
    row = {"model": name, "kind": kind}
    try:
        model, feeds = build()
        data = model.SerializeToString()
        cpu = gm.cpu_session(data)
        want = cpu.run(None, feeds)
        out_specs = [(o.name, w.shape, w.dtype) for o, w in zip(cpu.get_outputs(), want)]
        del cpu
    except Exception as e:  # noqa: BLE001
        row["error"] = gm.failure(e)
        return row
    row["inputs"] = {k: list(v.shape) for k, v in feeds.items()}
    try:
        row["partitions"] = partitions(env, data, feeds)
    except Exception as e:  # noqa: BLE001
        row["partitions"] = gm.failure(e)
    # Both EPs alive at once, timed in turns (timed_interleaved).
    runners, keep = {}, []
    try:
        sess = gm.ep_session(env, data)
        dio = gm.DeviceIO(env, sess, feeds, out_specs)
        keep += [sess, dio]
        runners["mlx"] = dio
    except Exception as e:  # noqa: BLE001
        row["mlx"] = gm.failure(e)
    if args.ab:  # a second MLX EP session, translated with VAR=VALUE set (same process, in turns)
        try:
            dio_b = translated_with(args.ab, env, data, feeds, out_specs)
            keep.append(dio_b)
            runners["mlx_ab"] = dio_b
        except Exception as e:  # noqa: BLE001
            row["mlx_ab"] = gm.failure(e)
    if not has_cuda:
        row["cuda"] = {"skipped": f"this onnxruntime has no {CUDA_EP}"}
    else:
        try:
            csess = cuda_session(data, tf32)
            cio = CudaIO(csess, feeds, out_specs)
            keep += [csess, cio]
            runners["cuda"] = cio
        except Exception as e:  # noqa: BLE001
            row["cuda"] = gm.failure(e)
    cells = timed_interleaved({k: r.run for k, r in runners.items()}, args.warmup, args.repeats,
                              args.rounds, args.max_cell_s)
    for key, runner in runners.items():
        row[key] = cells[key]
        if "median_s" in cells[key]:
            try:
                row[key]["err"] = gm.max_abs_diff(runner.read(), want)
            except Exception as e:  # noqa: BLE001
                row[key]["err_failure"] = gm.failure(e)
    del runners, keep
    gm.free_memory(env)
    if "median_s" in row.get("mlx", {}):
        try:
            ph, counts = phases_per_run(env, data, feeds, out_specs, args.overhead_runs)
            wall = row["mlx"]["median_s"]
            row["outside_eval"] = {"wall_ms": wall * 1e3, "eval_ms": ph["eval"] * 1e3,
                                   "outside_ms": (wall - ph["eval"]) * 1e3,
                                   **{f"{k}_ms": v * 1e3 for k, v in ph.items() if k != "eval"}}
            row["run_counts"] = counts
        except Exception as e:  # noqa: BLE001
            row["outside_eval"] = gm.failure(e)
        gm.free_memory(env)
    return row


def worker(args) -> int:
    tf32 = args.worker == "tf32"
    env = gm.Env(SimpleNamespace(tf32=tf32, cpu_binding=args.cpu_binding, no_torch=True,
                                 seed=0))
    has_cuda = CUDA_EP in ort.get_available_providers()
    vers = {k: v for k, v in gm.versions(env).items() if k != "torch"}  # torch is not used
    result = {"mode": args.worker, "versions": vers, "device_io": env.device_io,
              "has_cuda_ep": has_cuda, "rows": [], "notes": env.notes}
    out = Path(args.json)
    for name, kind, build in model_list(args.quick):
        if not gm.name_selected(name, args.only):
            continue
        t0 = time.time()
        row = bench_one(env, name, kind, build, args, tf32, has_cuda)
        row["seconds"] = round(time.time() - t0, 1)
        result["rows"].append(row)
        ab = f" mlx[{args.ab}] {fmt_ms(row.get('mlx_ab'))}" if args.ab else ""
        print(f"[{args.worker}] {name}: mlx {fmt_ms(row.get('mlx'))}{ab} cuda "
              f"{fmt_ms(row.get('cuda'))} ({row['seconds']} s)", flush=True)
        out.write_text(json.dumps(result, indent=1, default=str))
    return 0


def fmt_ms(cell) -> str:
    if not isinstance(cell, dict):
        return "-"
    if "median_s" in cell:
        return f"{cell['median_s'] * 1e3:.3g}"
    if "skipped" in cell:
        return "skipped"
    return "FAILED" if "error" in cell else "-"


def fmt_err(cell) -> str:
    return f"{cell['err']:.1e}" if isinstance(cell, dict) and "err" in cell else "-"


def ratio(row) -> float | None:
    m, c = row.get("mlx", {}), row.get("cuda", {})
    if "median_s" in m and "median_s" in c and c["median_s"] > 0:
        return m["median_s"] / c["median_s"]
    return None


def table(mode: dict) -> list[str]:
    knob = f", {mode['knob']}" if mode.get("knob") else ""
    lines = [f"### {mode['mode']} fp32{knob} (MLX EP {'TF32' if mode['mode'] == 'tf32' else 'exact'}; "
             f"CUDA EP use_tf32={'1' if mode['mode'] == 'tf32' else '0'})", "",
             "| model | CUDA EP ms | MLX EP ms | MLX / CUDA | target | max err CUDA EP | "
             "max err MLX EP | MLX partitions (fused / eager / nodes on EP; report runs replayed) | "
             "MLX outside eval ms (translate / copy / queue) |",
             "|---|---|---|---|---|---|---|---|---|"]
    ab = any("mlx_ab" in r for r in mode["rows"])
    if ab:  # the same-process A/B session: its time and its ratio to the CUDA EP
        lines[2] += f" MLX EP ms with {mode.get('ab')} | its ratio | its max err |"
        lines[3] += "---|---|---|"
    for r in mode["rows"]:
        x = ratio(r)
        target = TARGET_RATIO.get(r["kind"])
        mark = "" if x is None or target is None else (" ok" if x <= target else " **missed**")
        p = r.get("partitions", {})
        parts = (f"{p['fused']} / {p['eager']} / {p['on_ep']}" if "fused" in p
                 else ("failed" if p else "-"))
        if p.get("fast"):
            parts += f"; fast {p['fast']}"
        n = r.get("run_counts")
        if n and n.get("runs"):  # how the report's runs ran: replayed CUDA graphs, eager runs
            parts += f"; replayed {n['replayed']}/{n['runs']}"
            if n.get("eager"):
                parts += f", eager {n['eager']}"
            if n.get("speculation_miss"):
                parts += f", missed {n['speculation_miss']}"
        o = r.get("outside_eval")
        outside = f"{o['outside_ms']:.3f}" if o and "outside_ms" in o else "-"
        if o and "translate_ms" in o:  # the EP's own phases outside the evaluation
            outside += f" ({o['translate_ms']:.3f} / {o['copy_ms']:.3f} / {o['queue_ms']:.3f})"
        lines.append(f"| {r['model']} | {fmt_ms(r.get('cuda'))} | {fmt_ms(r.get('mlx'))} | "
                     f"{f'{x:.2f}x' if x else '-'}{mark} | <= {target} | "
                     f"{fmt_err(r.get('cuda'))} | {fmt_err(r.get('mlx'))} | {parts} | "
                     f"{outside} |")
        if ab:
            b, c = r.get("mlx_ab", {}), r.get("cuda", {})
            xb = (b["median_s"] / c["median_s"] if "median_s" in b and c.get("median_s")
                  else None)
            lines[-1] += f" {fmt_ms(b)} | {f'{xb:.2f}x' if xb else '-'} | {fmt_err(b)} |"
    fails = [(r["model"], side, r[side]["error"]) for r in mode["rows"]
             for side in ("mlx", "cuda", "error") if isinstance(r.get(side), dict)
             and "error" in r[side]]
    if fails:
        lines += ["", "Failures:"] + [f"- {m} ({s}): {e}" for m, s, e in fails]
    return lines


def summary(mode: dict) -> list[str]:
    lines = []
    for kind, target in TARGET_RATIO.items():
        xs = [ratio(r) for r in mode["rows"] if r["kind"] == kind and ratio(r)]
        if xs:
            lines.append(f"- {kind}: MLX / CUDA {min(xs):.2f}x-{max(xs):.2f}x (target <= "
                         f"{target}); {sum(x <= target for x in xs)} of {len(xs)} meet it")
    outs = [r["outside_eval"]["outside_ms"] for r in mode["rows"]
            if r["kind"] == "corpus" and "outside_ms" in r.get("outside_eval", {})]
    if outs:
        lines.append(f"- per-run time outside MLX's evaluation, corpus models: median "
                     f"{statistics.median(outs):.3f} ms (target <= {TARGET_OUTSIDE_EVAL_MS})")
    return lines


def plot(modes: list[dict], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(11, 5.5))
    names = [r["model"] for r in modes[0]["rows"]]
    width = 0.8 / max(1, len(modes))
    for i, mode in enumerate(modes):
        by_name = {r["model"]: r for r in mode["rows"]}
        xs = [(ratio(by_name[n]) or 0.0) if n in by_name else 0.0 for n in names]
        ax.bar([j + i * width for j in range(len(xs))], xs, width, label=f"{mode['mode']} fp32 {mode.get('knob') or ''}".strip())
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks([j + width * (len(modes) - 1) / 2 for j in range(len(names))])
    ax.set_xticklabels([n.split(" (")[0] for n in names], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("MLX EP time / ORT CUDA EP time (lower is better)")
    ax.set_title("MLX EP vs ONNX Runtime's CUDA EP, device I/O, medians")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def report(modes: list[dict], out: Path, command: str) -> None:
    v = modes[0].get("versions", {}) if modes else {}
    lines = ["# MLX EP vs ONNX Runtime's CUDA EP (GPU, device-resident I/O)", "",
             f"Command: `{command}`", "",
             "Versions and machine: " + ", ".join(f"{k} {val}" for k, val in v.items()), "",
             "Both EPs run in one process on the same data, both sessions alive, timed in "
             "turns (rounds of runs of each EP); medians of timed "
             "`run_with_iobinding` + `synchronize_outputs`; errors are max |EP - ORT CPU|. "
             "Ratio < 1: the MLX EP is faster. Targets: <= 1.0 on the encoders, the CNN and the "
             "decoder step, <= 1.5 on the corpus models (exact fp32).", ""]
    for mode in modes:
        lines += table(mode) + [""] + summary(mode) + [""]
        if mode.get("notes"):
            lines += ["Notes: " + "; ".join(mode["notes"]), ""]
    if plot(modes, out / "gpu_peer.png"):
        lines += ["![ratios](gpu_peer.png)", ""]
    (out / "gpu_peer.md").write_text("\n".join(lines))
    (out / "gpu_peer.json").write_text(json.dumps(modes, indent=1, default=str))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--modes", nargs="+", default=["exact", "tf32"], choices=["exact", "tf32"])
    ap.add_argument("--only", nargs="+", default=[], help="models whose name contains one of these (=NAME: that model alone)")
    ap.add_argument("--repeats", type=int, default=20, help="timed runs per EP per round")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds of `repeats` runs, the EPs taking turns (interleaved timing)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max-cell-s", type=float, default=3.0)
    ap.add_argument("--overhead-runs", type=int, default=20)
    ap.add_argument("--mode-timeout-s", type=int, default=400,
                    help="a mode's child process is stopped after this long (its rows so far kept)")
    ap.add_argument("--knob", action="append", default=[],
                    help="VAR=VALUE[,VAR=VALUE...]: one more exact-mode run with these environment variables set "
                         "(e.g. MLX_MAX_OPS_PER_BUFFER=100, MLX_USE_CUDA_GRAPHS=0); repeatable")
    ap.add_argument("--ab", default="",
                    help="VAR=VALUE: a second MLX EP session in the same process, translated with "
                         "VAR=VALUE set (switches the library reads per translation), timed in turns")
    ap.add_argument("--knob-only", nargs="+", default=[],
                    help="the knob runs take only models whose name contains one of these")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cpu-binding", action="store_true",
                    help="CPU build of the EP: IOBinding on CPU memory (plumbing only)")
    ap.add_argument("--worker", choices=["exact", "tf32"], help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    modes = []
    runs = [(m, None) for m in args.modes] + [("exact", k) for k in args.knob]
    for i, (mode, knob) in enumerate(runs):
        path = out / f".gpu_peer_{i}.json"
        path.unlink(missing_ok=True)
        env = dict(os.environ)
        if mode == "tf32":
            env["ONNXRUNTIME_EP_MLX_TF32"] = "1"
        for setting in (knob.split(",") if knob else []):  # VAR=VALUE[,VAR=VALUE...]
            var, _, value = setting.partition("=")
            env[var] = value
        cmd = [sys.executable, __file__, "--worker", mode, "--json", str(path),
               "--repeats", str(args.repeats), "--rounds", str(args.rounds),
               "--warmup", str(args.warmup),
               "--max-cell-s", str(args.max_cell_s), "--overhead-runs", str(args.overhead_runs)]
        cmd += (["--quick"] if args.quick else []) + (["--cpu-binding"] if args.cpu_binding else [])
        cmd += (["--ab", args.ab] if args.ab else [])
        only = args.knob_only if knob and args.knob_only else args.only
        cmd += (["--only", *only] if only else [])
        try:
            subprocess.run(cmd, env=env, timeout=args.mode_timeout_s)
        except subprocess.TimeoutExpired:
            print(f"[{mode}] stopped after {args.mode_timeout_s} s; rows so far kept")
        if path.exists():
            modes.append(json.loads(path.read_text()) | {"knob": knob, "ab": args.ab})
            path.unlink()
    argv = sys.argv[1:]
    if "--out" in argv[:-1]:  # the folder is the caller's (a machine path): say OUT
        argv[argv.index("--out") + 1] = "OUT"
    shown = " ".join(argv)
    report(modes, out, f"python3 bench/gpu_peer.py {shown}".strip())
    print((out / "gpu_peer.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
