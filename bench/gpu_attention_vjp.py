#!/usr/bin/env python3
"""AttentionVJP on the CUDA backend: the fused CUDA kernels (cuda_fused, opt-in) and, with
--full, the default paths vs torch's fp32 memory-efficient SDPA backward on the same tensors.

On the H200, from the checkout root (after `source .gpu/env.sh`):

    python3 bench/gpu_attention_vjp.py --out $OUT          # cuda_fused, default grid (< 3 min)
    python3 bench/gpu_attention_vjp.py --full --out $OUT   # + blocked, Recompute form, native

Every cell names its path through the options (the EP's report confirms it):
- cuda_fused: attention_vjp_tiled=kernel with a dense limit of 0 (every shape beyond it);
- blocked: attention_vjp_tiled=blocked, attention_vjp_native=0, the default budget (the default
  beyond it for the plain form on GPU backends; its block size follows the budget);
- native (--full, Recompute form only): attention_vjp_native=1, the Recompute form's default on
  GPU backends (dense MLX ops, O(S^2) memory).

Writes OUT/gpu_attention_vjp.{json,md} (OUT: --out, default bench/results). Per shape
(B, HQ, HK, S, D), causal and not, rank 4, plain form (Y from torch's forward):
- EP: one session run with device I/O (IOBinding, inputs uploaded once, outputs pre-allocated
  in GPU memory), median of timed runs; the path the EP's report names; TFLOP/s with
  10 * B * HQ * S^2 * D FLOPs for the backward (halved when causal); peak device memory of the
  run above what was allocated before it (MLX's allocator, read through ctypes).
- torch: SDPA fp32 with the EFFICIENT_ATTENTION backend, backward alone (autograd.grad with
  retain_graph), median; its peak memory above the memory before the backward. GQA: K and V are
  repeated to HQ heads (repeat_interleave) before SDPA, so autograd sums their gradients.
- speed ratio torch_time / ep_time (> 1: the EP is faster), relative L2 error of the EP's
  gradients vs torch's.
Every cell is wrapped: a failure is recorded and the run goes on.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
try:
    import ortmlx  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))

import gpu_models as gm  # noqa: E402  (Env, sessions, device I/O, timing)

from ortmlx.contracts import attention_vjp_model  # noqa: E402

SHAPES = [(4, 16, 16, 1024, 64), (4, 16, 16, 2048, 128), (2, 16, 16, 4096, 128),
          (2, 32, 8, 4096, 128), (1, 16, 16, 8192, 64)]
QUICK_SHAPES = [(1, 4, 2, 256, 64), (1, 2, 2, 300, 128)]
LABELS = {"onnax CUDA fused attention VJP": "cuda_fused", "onnax blocked attention VJP": "blocked",
          "onnax GEMM attention VJP": "dense", "onnax tiled attention VJP": "tiled",
          "onnax native SDPA attention VJP": "native"}


# The options that select each path (module docstring). kernel = the backend's fused kernel, with
# limit 0 so that it runs for every shape (the default grid is beyond the default 64 MiB budget
# anyway); blocked = MLX ops by query blocks with the default budget (a limit of 0 would mean
# 1-row blocks), native off so that the Recompute form takes it too; native = the vjp of MLX's
# SDPA (the Recompute form's default on GPU backends).
PATH_OPTIONS = {
    "cuda_fused": {"attention_vjp_tiled": "kernel", "attention_vjp_dense_limit_bytes": "0"},
    "blocked": {"attention_vjp_tiled": "blocked", "attention_vjp_native": "0"},
    "native": {"attention_vjp_native": "1"},
}


class MlxMemory:
    """MLX's allocator counters of the libmlx the EP loaded (ctypes; no mlx Python package)."""

    def __init__(self):
        self.lib = None
        path = gm.libmlx_info().get("path")
        if path:
            try:
                lib = ctypes.CDLL(path)
                for name in ("_ZN3mlx4core15get_peak_memoryEv", "_ZN3mlx4core17get_active_memoryEv"):
                    getattr(lib, name).restype = ctypes.c_size_t
                self.lib = lib
            except Exception:  # noqa: BLE001
                self.lib = None

    def reset(self) -> int | None:
        if self.lib is None:
            return None
        self.lib._ZN3mlx4core17reset_peak_memoryEv()
        return int(self.lib._ZN3mlx4core17get_active_memoryEv())

    def peak(self) -> int | None:
        return None if self.lib is None else int(self.lib._ZN3mlx4core15get_peak_memoryEv())


def flops(b, hq, s, d, causal) -> float:
    return 10.0 * b * hq * s * s * d * (0.5 if causal else 1.0)


class TorchGqa:
    """torch SDPA fp32 (memory-efficient backend) on (B, H, S, D) tensors; K/V repeated to HQ."""

    def __init__(self, t, q, k, v, dy, group, causal, scale):
        self.t = t
        self.leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        self.dy, self.group, self.causal, self.scale = dy, group, bool(causal), scale
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.ctx = lambda: sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION)

    def forward(self):
        q, k, v = self.leaves
        if self.group > 1:
            k = k.repeat_interleave(self.group, dim=1)
            v = v.repeat_interleave(self.group, dim=1)
        return self.t.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=self.causal, scale=self.scale)

    def grads(self, y):
        return self.t.autograd.grad(y, self.leaves, self.dy, retain_graph=True)


def bench_cell(env, mem: MlxMemory, shape, causal, form, path, args) -> dict:
    b, hq, hk, s, d = shape
    recompute = form == "recompute"
    row = {"b": b, "hq": hq, "hk": hk, "s": s, "d": d, "causal": causal, "form": form,
           "path": path, "flops": flops(b, hq, s, d, causal)}
    t = env.torch
    scale = float(np.float32(1.0 / math.sqrt(d)))
    try:
        model = attention_vjp_model(b, s, s, hq, hk, d, rank=4, causal=causal, mask_kind=0,
                                    mask_shape=(1,), recompute=recompute)
        rng = np.random.default_rng([args.seed, s, hq, causal])
        qs, ks = (b, hq, s, d), (b, hk, s, d)
        feeds = {n: gm.random_normal(env, sh, rng) for n, sh in
                 (("Q", qs), ("K", ks), ("V", ks), ("dY", qs))}
        feeds["Mask"] = np.ones((1,), dtype=bool)
    except Exception as e:  # noqa: BLE001
        row["error"] = gm.failure(e)["error"]
        return row

    ref = None
    if t is not None:
        try:
            dev = [t.from_numpy(feeds[n]).cuda() for n in ("Q", "K", "V", "dY")]
            ta = TorchGqa(t, *dev, hq // hk, causal, scale)
            with ta.ctx():
                y = ta.forward()
                ref = [g.detach() for g in ta.grads(y)]
                if not recompute:
                    feeds["Y"] = y.detach().cpu().numpy()
                if not args.no_torch_time:
                    row["torch"] = gm.timed(lambda: ta.grads(y), args.warmup, args.repeats,
                                            args.max_cell_s, t.cuda.synchronize)
                    t.cuda.synchronize()
                    t.cuda.reset_peak_memory_stats()
                    before = t.cuda.memory_allocated()
                    ta.grads(y)
                    t.cuda.synchronize()
                    row["torch_peak_bytes"] = t.cuda.max_memory_allocated() - before
            del y, ta, dev
        except Exception as e:  # noqa: BLE001
            row["torch"] = gm.failure(e)
        gm.free_memory(env)
    else:
        row["torch"] = {"skipped": env.torch_note}
    if not recompute and "Y" not in feeds:
        feeds["Y"] = gm.float32_forward(feeds, b, hq, s, d, causal, scale, 4) if hq == hk \
            else np.zeros(qs, np.float32)
    names = ("Q", "K", "V", "dY", "Mask") if recompute else ("Q", "K", "V", "Y", "dY", "Mask")
    feeds = {n: feeds[n] for n in names}
    opts = PATH_OPTIONS[path]

    with tempfile.TemporaryDirectory(prefix="gpu_attention_vjp-") as tmp:
        report_path = os.path.join(tmp, "report.json")
        try:
            s_rep = gm.ep_session(env, model, dict(opts, report=report_path))
            s_rep.run(None, feeds)
            with open(report_path) as f:
                rep = json.load(f)
            env.note_report(rep)
            row["paths"] = [LABELS.get(p, p) for p in sorted(rep.get("paths", {}))]
            del s_rep
        except Exception as e:  # noqa: BLE001
            row["error"] = gm.failure(e)["error"]
            return row
    gm.free_memory(env)
    try:
        sess = gm.ep_session(env, model, opts)
        specs = [(o.name, feeds["Q"].shape if o.name == "dQ" else feeds["K"].shape, np.float32)
                 for o in sess.get_outputs()]
        io = gm.DeviceIO(env, sess, feeds, specs) if env.has_device_io else None
        run = io.run if io else (lambda: sess.run(None, feeds))
        row["io"] = "device" if io else "host"
        row["ep"] = gm.timed(run, args.warmup, args.repeats, args.max_cell_s)
        if args.profile:
            row["ep_passes_ms"] = pass_times(run)
        before = mem.reset()
        run()
        peak = mem.peak()
        if before is not None and peak is not None:
            row["ep_peak_bytes"] = peak - before
        if ref is not None:
            outs = io.read() if io else sess.run(None, feeds)
            row["err"] = {g: gm.rel_l2(env, o, r) for g, o, r in zip(("dQ", "dK", "dV"), outs, ref)}
        del io, sess
    except Exception as e:  # noqa: BLE001
        row["ep"] = gm.failure(e)
    gm.free_memory(env)
    return row


def pass_times(run) -> dict:
    """GPU ms per run of each fused pass (stats, dq, dkv) and of everything else, from two
    profiled runs (bench/gpu_profile.py: CUPTI sees MLX's kernels)."""
    import gpu_profile
    prof = gpu_profile.profile_runs(run, 2)
    out = {"stats": 0.0, "dq": 0.0, "dkv": 0.0, "other": 0.0}
    for name, _, ms in prof["all_kernels"]:
        kind = next((k for k in ("stats", "dq", "dkv") if f"ortmlx_avjp_{k}_" in name), "other")
        out[kind] += ms
    return out


def fmt_time(cell) -> str:
    if not isinstance(cell, dict):
        return "-"
    if "median_s" in cell:
        return f"{cell['median_s'] * 1e3:.1f}"
    return cell.get("skipped") or ("FAIL: " + cell.get("error", "?")[:60])


def tflops(row, key) -> str:
    c = row.get(key)
    if isinstance(c, dict) and "median_s" in c:
        return f"{row['flops'] / c['median_s'] / 1e12:.1f}"
    return "-"


def mib(x) -> str:
    return "-" if x is None else f"{x / 2**20:.0f}"


def markdown(res) -> str:
    lines = ["# AttentionVJP on the CUDA backend: fused kernels vs torch", "",
             f"Command: `{res['command']}`  ", f"Date: {res['date']}  ",
             f"GPU: {res['gpu']}  ", f"Versions: {json.dumps(res['versions'])}", "",
             "Rank 4 (B, H, S, D), fp32, scale 1/sqrt(D), no mask. EP: one run with device I/O, "
             "median ms; torch: SDPA EFFICIENT_ATTENTION backward alone (retain_graph), median "
             "ms. TFLOP/s from 10*B*HQ*S^2*D (halved when causal). Peak: device memory above "
             "what was allocated before the run (MLX's allocator / torch's). Ratio: torch ms / "
             "EP ms (> 1: the EP is faster). Err: max relative L2 of dQ, dK, dV vs torch.", "",
             "| B | HQ | HK | S | D | causal | form | path (report) | EP ms | EP TFLOP/s | "
             "EP peak MiB | torch ms | torch TFLOP/s | torch peak MiB | ratio | err |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        ratio = "-"
        ep, to = r.get("ep", {}), r.get("torch", {})
        if isinstance(ep, dict) and isinstance(to, dict) and "median_s" in ep and "median_s" in to:
            ratio = f"{to['median_s'] / ep['median_s']:.2f}"
        err = max(r["err"].values()) if r.get("err") else None
        lines.append(
            f"| {r['b']} | {r['hq']} | {r['hk']} | {r['s']} | {r['d']} | {r['causal']} | "
            f"{r['form']} | {'+'.join(r.get('paths', [])) or r.get('error', '-')[:60]} | "
            f"{fmt_time(ep)} | {tflops(r, 'ep')} | {mib(r.get('ep_peak_bytes'))} | "
            f"{fmt_time(to)} | {tflops(r, 'torch')} | {mib(r.get('torch_peak_bytes'))} | "
            f"{ratio} | {'-' if err is None else f'{err:.1e}'} |")
    passes = [r for r in res["rows"] if r.get("ep_passes_ms")]
    if passes:
        lines += ["", "GPU time per pass of the fused path (profiled, ms per run):", "",
                  "| B | HQ | HK | S | D | causal | stats | dq | dkv | other |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in passes:
            t = r["ep_passes_ms"]
            lines.append(f"| {r['b']} | {r['hq']} | {r['hk']} | {r['s']} | {r['d']} | "
                         f"{r['causal']} | {t['stats']:.2f} | {t['dq']:.2f} | {t['dkv']:.2f} | "
                         f"{t['other']:.2f} |")
    if res["notes"]:
        lines += ["", "Notes:"] + [f"- {n}" for n in res["notes"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    ap.add_argument("--full", action="store_true",
                    help="also the blocked (MLX-op) path, the Recompute form and its native "
                    "path")
    ap.add_argument("--quick", action="store_true", help="tiny shapes: a smoke test")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max-cell-s", type=float, default=3.0)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-torch-time", action="store_true", help="torch for Y and errors only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true",
                    help="also GPU time per fused pass (torch's profiler; cuda_fused cells)")
    ap.add_argument("--shapes", default="",
                    help="indices into the default grid to run, comma-separated (e.g. 0,2)")
    ap.add_argument("--causal", default="0,1", help="causal settings to run (0, 1 or 0,1)")
    # gpu_models.Env reads these.
    ap.add_argument("--tf32", action="store_true", help="EP TF32 mode (default exact fp32)")
    ap.add_argument("--cpu-binding", action="store_true")
    args = ap.parse_args()
    env = gm.Env(args)
    mem = MlxMemory()
    shapes = QUICK_SHAPES if args.quick else SHAPES
    if args.shapes:
        shapes = [shapes[int(i)] for i in args.shapes.split(",")]
    forms = ["plain", "recompute"] if args.full else ["plain"]
    paths = ["cuda_fused", "blocked"] if args.full else ["cuda_fused"]
    res = {"command": " ".join(["python3"] + sys.argv),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
           "gpu": gm.gpu_name(env), "versions": gm.versions(env), "rows": [],
           "notes": env.notes}
    if mem.lib is None:
        env.notes.append("EP peak memory not measured: libmlx's counters not found")
    for shape in shapes:
        for causal in (int(c) for c in args.causal.split(",")):
            for form in forms:
                for path in paths + (["native"] if form == "recompute" else []):
                    row = bench_cell(env, mem, shape, causal, form, path, args)
                    res["rows"].append(row)
                    print(json.dumps({k: v for k, v in row.items() if k != "traceback"},
                                     default=str)[:400], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_attention_vjp.json").write_text(json.dumps(res, indent=1, default=str))
    md = markdown(res)
    (out / "gpu_attention_vjp.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
