#!/usr/bin/env python3
r"""AttentionVJP on the CUDA backend: the fused CUDA kernels (cuda_fused, the default beyond the
dense limit on sm_90) and, with --full, the other paths vs torch's fp32 memory-efficient SDPA
backward on the same tensors.

On the H200, from the checkout root (after `source .gpu/env.sh`):

    python3 bench/gpu_attention_vjp.py --out $OUT          # cuda_fused, default grid (< 3 min)
    python3 bench/gpu_attention_vjp.py --full --out $OUT   # + blocked, Recompute form, native

Every cell names its path through the options (the EP's report confirms it):
- cuda_fused: attention_vjp_tiled=kernel with a dense limit of 0 (every shape beyond it);
- blocked: attention_vjp_tiled=blocked, attention_vjp_native=0, the default budget (the default
  beyond it for the plain form on GPU backends; its block size follows the budget);
- native (--full, Recompute form only): attention_vjp_native=1, the Recompute form's default on
  GPU backends (dense MLX ops, O(S^2) memory).

Writes OUT/gpu_attention_vjp.{json,md} (OUT: --out, default bench/results), and .png where
matplotlib is installed (bench/plot_gpu_attention_vjp.py, which also draws it from the JSON). Per shape
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

--ort-cuda adds ORT's own CUDA EP running the contract's ONNX body (the model's function, which
ORT inlines) on the same tensors, in the same process: onnxruntime-gpu must be the onnxruntime
Python imports (`source .ortgpu/env.sh` after `.gpu/env.sh`: ../shared/tools/ort_cuda_bundle.sh
packs it; the MLX EP registers into it). Device I/O through IOBinding, `use_tf32` as the EP's mode
(0 for exact fp32, 1 with --tf32), median ms; the row gets ort_cuda_ms, ort_cuda_tflops,
ort_cuda_mem_mib (device memory the session took, from cudaMemGetInfo before it and after its
runs: ORT's arena keeps its peak), ratio_ort_cuda (its ms / EP ms) and err_ort_cuda, or
ort_cuda_error. The markdown gets an "ORT CUDA EP" table.

--half runs the EP on a float16 contract (Q, K, V, Y, dY and the gradients in float16; the EP
computes in fp32): the inputs are the fp32 tensors rounded to float16, which torch's references
and backends then take in fp32 (bf16 ones: rounded once more), and the errors include the
gradients' rounding to float16 (about 2^-11). ORT's CUDA EP is not run then.

--half-cudnn runs the EP on bfloat16 contracts, on the opt-in cuDNN half mode
(attention_vjp_half_cudnn=1: cuDNN's fused SDPA backward, path cudnn_half) and, for comparison,
on the exact fused kernels (cuda_fused, fp32 inside); the inputs are the fp32 tensors rounded to
bfloat16, and torch's flash_bf16 and cudnn_bf16 backwards are added to --torch-backends (their
ratio_<b> columns compare the EP with them on the same values). ORT's Python API carries no
bfloat16, so the model takes and gives float32 at its graph boundary (a Cast per input and
output around the contract node, on the EP): the EP's times include those Casts. ORT's CUDA EP is
not run then. With --half too, the contracts are float16 and so is the graph boundary (no Casts in
the EP's time), against torch's flash_fp16 and cudnn_fp16 backwards. --profile adds each EP
cell's top kernels by GPU time (ep_kernels_ms in the JSON) to its time per pass.

--torch-backends (comma list, default `efficient`) picks the torch backward variants timed on the
same tensors, each the backward alone as above (the reference for Y and the errors stays
EFFICIENT_ATTENTION fp32 whatever the list):
- efficient: SDPA EFFICIENT_ATTENTION, fp32, torch's TF32 flags as they are (the columns above);
- math: SDPA MATH (dense, O(S^2) memory), fp32, torch.backends.cuda.matmul.allow_tf32 and
  torch.backends.cudnn.allow_tf32 off during the cell (restored after);
- math_tf32: the same with both flags on (the baseline of the EP's --tf32 mode);
- flash_bf16, cudnn_bf16: SDPA FLASH_ATTENTION / CUDNN_ATTENTION on bf16 copies of Q, K, V, dY;
  flash_fp16, cudnn_fp16: the same on float16 copies.
Per backend the JSON row has torch_<b>_ms, torch_<b>_tflops, torch_<b>_peak_mib, torch_<b>_runs
and ratio_<b> (torch ms / EP ms, > 1: the EP is faster), or torch_<b>_error where the backend
rejects the shape or runs out of memory (the run goes on). They are timed once per shape and
causal setting (shared by its forms and paths); a backend whose first run takes longer than
--max-cell-s is timed by one more run only. The markdown gets a second table, "torch backends",
unless the list is `efficient` alone. The fields torch / torch_peak_bytes keep meaning the
efficient backend (skipped when it is not in the list). All five:

    python3 bench/gpu_attention_vjp.py --out $OUT \
        --torch-backends efficient,math,math_tf32,flash_bf16,cudnn_bf16
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import json
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
from onnx import TensorProto

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
try:
    import ortmlx  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "python"))

import gpu_models as gm  # noqa: E402  (Env, sessions, device I/O, timing)

from ortmlx.contracts import attention_vjp_model, float32_boundary  # noqa: E402

SHAPES = [(4, 16, 16, 1024, 64), (4, 16, 16, 2048, 128), (2, 16, 16, 4096, 128),
          (2, 32, 8, 4096, 128), (1, 16, 16, 8192, 64)]
QUICK_SHAPES = [(1, 4, 2, 256, 64), (1, 2, 2, 300, 128)]
LABELS = {"onnax CUDA fused attention VJP": "cuda_fused", "onnax blocked attention VJP": "blocked",
          "onnax GEMM attention VJP": "dense", "onnax tiled attention VJP": "tiled",
          "onnax native SDPA attention VJP": "native",
          "onnax cuDNN half attention VJP": "cudnn_half"}


# The options that select each path (module docstring). kernel = the backend's fused kernel, with
# limit 0 so that it runs for every shape (the default grid is beyond the default 64 MiB budget
# anyway); blocked = MLX ops by query blocks with the default budget (a limit of 0 would mean
# 1-row blocks), native off so that the Recompute form takes it too; native = the vjp of MLX's
# SDPA (the Recompute form's default on GPU backends).
PATH_OPTIONS = {
    "cuda_fused": {"attention_vjp_tiled": "kernel", "attention_vjp_dense_limit_bytes": "0"},
    "blocked": {"attention_vjp_tiled": "blocked", "attention_vjp_native": "0"},
    "native": {"attention_vjp_native": "1"},
    "cudnn_half": {"attention_vjp_half_cudnn": "1"},
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


# torch's backward variants (--torch-backends): name -> (SDPBackend member, dtype, TF32 flags).
# TF32 None leaves torch's flags as the process has them (what the efficient column always did);
# math and math_tf32 pin them, as the targets compare the EP's exact and TF32 modes against each.
TORCH_BACKENDS = {
    "efficient": ("EFFICIENT_ATTENTION", "float32", None),
    "math": ("MATH", "float32", False),
    "math_tf32": ("MATH", "float32", True),
    "flash_bf16": ("FLASH_ATTENTION", "bfloat16", None),
    "cudnn_bf16": ("CUDNN_ATTENTION", "bfloat16", None),
    "flash_fp16": ("FLASH_ATTENTION", "float16", None),
    "cudnn_fp16": ("CUDNN_ATTENTION", "float16", None),
}


class TorchGqa:
    """torch SDPA with one backend (an SDPBackend member's name) on (B, H, S, D) tensors cast to
    `dtype` (a torch dtype's name) as new leaves; K/V repeated to HQ."""

    def __init__(self, t, q, k, v, dy, group, causal, scale, backend="EFFICIENT_ATTENTION",
                 dtype="float32"):
        self.t = t
        dt = getattr(t, dtype)
        self.leaves = [x.to(dt, copy=True).requires_grad_() for x in (q, k, v)]
        self.dy, self.group, self.causal, self.scale = dy.to(dt), group, bool(causal), scale
        from torch.nn.attention import SDPBackend, sdpa_kernel
        member = getattr(SDPBackend, backend)
        self.ctx = lambda: sdpa_kernel(member)

    def forward(self):
        q, k, v = self.leaves
        if self.group > 1:
            k = k.repeat_interleave(self.group, dim=1)
            v = v.repeat_interleave(self.group, dim=1)
        return self.t.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=self.causal, scale=self.scale)

    def grads(self, y):
        return self.t.autograd.grad(y, self.leaves, self.dy, retain_graph=True)


@contextlib.contextmanager
def torch_tf32(t, on: bool | None):
    """torch's TF32 flags (cuBLAS matmuls and cuDNN) set to `on` inside the block, restored after;
    None leaves them. The allow_tf32 setters also set the newer fp32_precision state, so torch's
    check against mixing the two APIs stays quiet."""
    if on is None:
        yield
        return
    m, c = t.backends.cuda.matmul, t.backends.cudnn
    saved = (m.allow_tf32, c.allow_tf32)
    try:
        m.allow_tf32 = on
        c.allow_tf32 = on
        yield
    finally:
        m.allow_tf32, c.allow_tf32 = saved


def torch_timed(fn, args, sync) -> dict:
    """gm.timed after one probe run (the first warm-up, so the warm-up count is unchanged). A
    backend whose probe alone is over --max-cell-s (dense math at a large S) gets one more timed
    run instead: gm.timed would still make at least 3 before its budget check stops it."""
    t0 = time.perf_counter()
    fn()
    sync()
    first = time.perf_counter() - t0
    if first <= args.max_cell_s:
        res = gm.timed(fn, args.warmup - 1, args.repeats, args.max_cell_s, sync)
        return dict(res, first_s=first)
    t0 = time.perf_counter()
    fn()
    sync()
    once = time.perf_counter() - t0
    return {"median_s": once, "min_s": once, "runs": 1, "first_s": first, "capped": True}


def torch_peak(t, fn) -> int:
    """Peak device memory of one run of fn above what was allocated before it (torch's
    allocator; the gradients fn returns count, as they are allocated inside it)."""
    t.cuda.synchronize()
    t.cuda.reset_peak_memory_stats()
    before = t.cuda.memory_allocated()
    fn()
    t.cuda.synchronize()
    return t.cuda.max_memory_allocated() - before


def warning_reasons(warned) -> str:
    """torch's reasons for refusing a backend (it warns them before its 'No available kernel'
    error), without the announcement lines and torch's source locations."""
    out = []
    for w in warned:
        msg = " ".join(str(w.message).split(" (Triggered internally")[0].split())
        if msg and not msg.endswith("because:") and msg not in out:
            out.append(msg)
    return "; ".join(out[:3])


def torch_backend(env, dev, group, causal, scale, name, args) -> dict:
    """Torch's backward alone with one --torch-backends variant on the cell's tensors: {"timing",
    "peak_bytes"}, or {"error"} when the backend rejects the shape or runs out of memory. Its
    graph (the S x S matrices of the math backend) is freed before it returns."""
    t = env.torch
    backend, dtype, tf32 = TORCH_BACKENDS[name]
    warned: list = []
    ta = y = None
    try:
        with warnings.catch_warnings(record=True) as warned, torch_tf32(t, tf32):
            warnings.simplefilter("always")
            ta = TorchGqa(t, *dev, group, causal, scale, backend, dtype)
            with ta.ctx():
                y = ta.forward()
                timing = torch_timed(lambda: ta.grads(y), args, t.cuda.synchronize)
                peak = torch_peak(t, lambda: ta.grads(y))
        return {"timing": timing, "peak_bytes": peak}
    except Exception as e:  # noqa: BLE001
        err = gm.failure(e)["error"]
        why = warning_reasons(warned)
        return {"error": f"{err} ({why})" if why else err}
    finally:
        ta = y = None
        gm.free_memory(env)


def put_backend(row, name, res: dict) -> None:
    """The flat JSON fields of one backend's result (module docstring)."""
    if "error" in res:
        row[f"torch_{name}_error"] = res["error"]
        return
    sec = res["timing"]["median_s"]
    row[f"torch_{name}_ms"] = round(sec * 1e3, 4)
    row[f"torch_{name}_tflops"] = round(row["flops"] / sec / 1e12, 3)
    row[f"torch_{name}_peak_mib"] = round(res["peak_bytes"] / 2**20, 1)
    row[f"torch_{name}_runs"] = res["timing"]["runs"]


def put_ratios(row, names) -> None:
    ep = row.get("ep")
    if not (isinstance(ep, dict) and "median_s" in ep):
        return
    for name in names:
        if f"torch_{name}_ms" in row:
            row[f"ratio_{name}"] = round(row[f"torch_{name}_ms"] / 1e3 / ep["median_s"], 3)


def bench_cell(env, mem: MlxMemory, shape, causal, form, path, args, backend_cache: dict) -> dict:
    """One row; backend_cache keeps the --torch-backends results of each (shape, causal) for the
    rows of its other forms and paths (the tensors are the same: the seed names no form)."""
    b, hq, hk, s, d = shape
    recompute = form == "recompute"
    row = {"b": b, "hq": hq, "hk": hk, "s": s, "d": d, "causal": causal, "form": form,
           "path": path, "flops": flops(b, hq, s, d, causal)}
    io_type = np.float16 if args.half else np.float32
    # --half-cudnn alone: bfloat16 contracts, float32 at the graph boundary (module docstring).
    bf16_boundary = args.half_cudnn and not args.half
    if args.half:
        row["io_dtype"] = "float16"
    if bf16_boundary:
        row["io_dtype"] = "bfloat16 (float32 graph boundary)"
    t = env.torch
    scale = float(np.float32(1.0 / math.sqrt(d)))
    try:
        model = attention_vjp_model(b, s, s, hq, hk, d, rank=4, causal=causal, mask_kind=0,
                                    mask_shape=(1,), recompute=recompute,
                                    dtype=ml_dtypes.bfloat16 if bf16_boundary else io_type)
        if bf16_boundary:
            model = float32_boundary(model, TensorProto.BFLOAT16)
        rng = np.random.default_rng([args.seed, s, hq, causal])
        qs, ks = (b, hq, s, d), (b, hk, s, d)
        feeds = {n: gm.random_normal(env, sh, rng) for n, sh in
                 (("Q", qs), ("K", ks), ("V", ks), ("dY", qs))}
        if args.half:  # float16 values, held in fp32 for torch
            feeds = {n: x.astype(np.float16).astype(np.float32) for n, x in feeds.items()}
        if bf16_boundary:  # bfloat16 values, held in fp32 (torch's bf16 backends: the same)
            feeds = {n: x.astype(ml_dtypes.bfloat16).astype(np.float32) for n, x in feeds.items()}
        feeds["Mask"] = np.ones((1,), dtype=bool)
    except Exception as e:  # noqa: BLE001
        row["error"] = gm.failure(e)["error"]
        return row

    ref = None
    backends = args.torch_backends
    if t is not None:
        dev = ta = y = None
        try:
            dev = [t.from_numpy(feeds[n]).cuda() for n in ("Q", "K", "V", "dY")]
            ta = TorchGqa(t, *dev, hq // hk, causal, scale)
            with ta.ctx():
                y = ta.forward()
                ref = [g.detach() for g in ta.grads(y)]
                if not recompute:
                    feeds["Y"] = y.detach().cpu().numpy()
                if not args.no_torch_time and "efficient" in backends:
                    row["torch"] = torch_timed(lambda: ta.grads(y), args, t.cuda.synchronize)
                    row["torch_peak_bytes"] = torch_peak(t, lambda: ta.grads(y))
                elif not args.no_torch_time:
                    row["torch"] = {"skipped": "efficient not in --torch-backends"}
        except Exception as e:  # noqa: BLE001
            row["torch"] = gm.failure(e)
        ta = y = None  # the reference's graph goes before the backends build theirs
        gm.free_memory(env)
        if not args.no_torch_time:
            if "efficient" in backends:
                to = row.get("torch", {})
                put_backend(row, "efficient", {"timing": to, "peak_bytes": row["torch_peak_bytes"]}
                            if "median_s" in to else {"error": to.get("error", "not timed")})
            cached = backend_cache.setdefault((tuple(shape), bool(causal)), {})
            for name in (n for n in backends if n != "efficient"):
                if dev is None:  # the upload failed (not cached: the next row may upload)
                    put_backend(row, name, {"error": row["torch"].get("error", "no tensors")})
                    continue
                if name not in cached:
                    cached[name] = torch_backend(env, dev, hq // hk, causal, scale, name, args)
                put_backend(row, name, cached[name])
        dev = None
        gm.free_memory(env)
    else:
        row["torch"] = {"skipped": env.torch_note}
    if not recompute and "Y" not in feeds:
        feeds["Y"] = gm.float32_forward(feeds, b, hq, s, d, causal, scale, 4) if hq == hk \
            else np.zeros(qs, np.float32)
    names = ("Q", "K", "V", "dY", "Mask") if recompute else ("Q", "K", "V", "Y", "dY", "Mask")
    feeds = {n: feeds[n] if n == "Mask" else feeds[n].astype(io_type, copy=False) for n in names}
    if bf16_boundary:  # the boundary's float32 inputs (Y rounded to bfloat16 by its Cast)
        feeds = {n if n == "Mask" else f"{n}_f32": x for n, x in feeds.items()}
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
        shapes = {"Q": qs, "K": ks}
        specs = [(o.name, shapes["Q" if o.name.startswith("dQ") else "K"], io_type)
                 for o in sess.get_outputs()]
        io = gm.DeviceIO(env, sess, feeds, specs) if env.has_device_io else None
        run = io.run if io else (lambda: sess.run(None, feeds))
        row["io"] = "device" if io else "host"
        row["ep"] = gm.timed(run, args.warmup, args.repeats, args.max_cell_s)
        put_ratios(row, backends)
        if args.profile:
            import gpu_profile
            kernels = gpu_profile.profile_runs(run, 2)["all_kernels"]  # CUPTI sees MLX's kernels
            row["ep_passes_ms"] = pass_times(kernels)
            row["ep_kernels_ms"] = top_kernels(kernels)  # by name: what "other" holds
        before = mem.reset()
        run()
        peak = mem.peak()
        if before is not None and peak is not None:
            row["ep_peak_bytes"] = peak - before
        if ref is not None:
            outs = io.read() if io else sess.run(None, feeds)
            row["err"] = {g: gm.rel_l2(env, np.asarray(o, np.float32), r)
                          for g, o, r in zip(("dQ", "dK", "dV"), outs, ref)}
        del io, sess
    except Exception as e:  # noqa: BLE001
        row["ep"] = gm.failure(e)
    gm.free_memory(env)
    if args.ort_cuda and path == "cuda_fused" and not args.half and not args.half_cudnn:
        ort_cuda_cell(env, row, model, feeds, ref, args)
    return row


def device_free_bytes(env) -> int | None:
    """Free device memory (cudaMemGetInfo through torch), or None without torch's CUDA."""
    t = env.torch
    if t is None:
        return None
    t.cuda.synchronize()
    return int(t.cuda.mem_get_info()[0])


def ort_cuda_cell(env, row, model, feeds, ref, args) -> None:
    """ORT's CUDA EP on the contract's ONNX body, same feeds (--ort-cuda; module docstring)."""
    import gpu_peer  # beside this file; imports onnxruntime (the GPU build under .ortgpu)
    sess = io = None
    try:
        free_before = device_free_bytes(env)
        sess = gpu_peer.cuda_session(model.SerializeToString(), tf32=args.tf32)
        specs = [(o.name, feeds["Q"].shape if o.name == "dQ" else feeds["K"].shape, np.float32)
                 for o in sess.get_outputs()]
        io = gpu_peer.CudaIO(sess, feeds, specs)
        timing = gm.timed(io.run, args.warmup, args.repeats, args.max_cell_s)
        free_after = device_free_bytes(env)
        sec = timing["median_s"]
        row["ort_cuda_ms"] = round(sec * 1e3, 4)
        row["ort_cuda_tflops"] = round(row["flops"] / sec / 1e12, 3)
        row["ort_cuda_runs"] = timing["runs"]
        if free_before is not None and free_after is not None:
            row["ort_cuda_mem_mib"] = round((free_before - free_after) / 2**20, 1)
        ep = row.get("ep")
        if isinstance(ep, dict) and "median_s" in ep:
            row["ratio_ort_cuda"] = round(sec / ep["median_s"], 3)
        if ref is not None:
            row["err_ort_cuda"] = max(gm.rel_l2(env, o, r) for o, r in zip(io.read(), ref))
    except Exception as e:  # noqa: BLE001
        row["ort_cuda_error"] = gm.failure(e)["error"]
    finally:
        io = sess = None
        gm.free_memory(env)


def ort_cuda_markdown(res) -> list[str]:
    rows = [r for r in res["rows"] if "ort_cuda_ms" in r or "ort_cuda_error" in r]
    if not rows:
        return []
    lines = ["", "## ORT CUDA EP on the contract's ONNX body", "",
             "ORT's CUDA EP (onnxruntime-gpu, `use_tf32` as the EP's mode) running the model's "
             "function body (dense, O(S^2) memory) on the same tensors with device I/O, median "
             "ms; memory: device memory the session took (cudaMemGetInfo before it and after its "
             "runs); ratio = its ms / EP ms (> 1: the EP is faster); err: max relative L2 of its "
             "gradients vs torch.", "",
             "| B | HQ | HK | S | D | causal | form | EP ms | ORT CUDA ms | ORT CUDA TFLOP/s | "
             "ORT CUDA MiB | ratio | err |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [str(r[k]) for k in ("b", "hq", "hk", "s", "d", "causal", "form")]
        cells.append(fmt_time(r.get("ep")).replace("|", "/")[:60])
        if "ort_cuda_ms" in r:
            err = r.get("err_ort_cuda")
            cells += [f"{r['ort_cuda_ms']:.1f}", f"{r['ort_cuda_tflops']:.1f}",
                      "-" if r.get("ort_cuda_mem_mib") is None else f"{r['ort_cuda_mem_mib']:.0f}",
                      "-" if r.get("ratio_ort_cuda") is None else f"{r['ratio_ort_cuda']:.2f}",
                      "-" if err is None else f"{err:.1e}"]
        else:
            cells += ["FAIL: " + r["ort_cuda_error"][:70].replace("|", "/"), "-", "-", "-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def pass_times(kernels) -> dict:
    """GPU ms per run of each fused pass (stats, dq, dkv, or dkvq: dq and dkv in one) and of
    everything else, from gpu_profile.profile_runs' kernel list."""
    passes = ("stats", "dq", "dkv", "dkvq")
    out = dict.fromkeys(passes + ("other",), 0.0)
    for name, _, ms in kernels:
        kind = next((k for k in passes if f"ortmlx_avjp_{k}_" in name), "other")
        out[kind] += ms
    return out


def top_kernels(kernels, top: int = 8) -> list:
    """[name (first 90 characters), GPU ms per run] of the `top` kernels by time, from
    gpu_profile.profile_runs' kernel list."""
    return [[name[:90], round(ms, 3)] for name, _, ms in sorted(kernels, key=lambda k: -k[2])[:top]]


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


# Torch's long-winded openings of the two expected failures, so that the table's short cell keeps
# the part that differs (torch's reason for refusing the backend, the size of the allocation).
ERROR_SHORT = {"RuntimeError: No available kernel. Aborting execution.": "no kernel:",
               "OutOfMemoryError: CUDA out of memory.": "OOM:"}


def backend_cells(row, name) -> list[str]:
    """ms, TFLOP/s, peak MiB and ratio of one --torch-backends variant, or its error, shortened,
    in the first cell (no '|': it would split the table's cell)."""
    if f"torch_{name}_ms" in row:
        ratio = row.get(f"ratio_{name}")
        return [f"{row[f'torch_{name}_ms']:.1f}", f"{row[f'torch_{name}_tflops']:.1f}",
                f"{row[f'torch_{name}_peak_mib']:.0f}", "-" if ratio is None else f"{ratio:.2f}"]
    err = row.get(f"torch_{name}_error")
    if not err:
        return ["-", "-", "-", "-"]
    for long, short in ERROR_SHORT.items():
        err = err.replace(long, short)
    return ["FAIL: " + err[:70].replace("|", "/"), "-", "-", "-"]


def backends_markdown(res) -> list[str]:
    """The "torch backends" table (only when --torch-backends asks for more than `efficient`,
    whose numbers the first table has)."""
    names = res.get("torch_backends", ["efficient"])
    if names == ["efficient"] or not any(
            f"torch_{n}_ms" in r or f"torch_{n}_error" in r for r in res["rows"] for n in names):
        return []
    lines = ["", "## torch backends", "",
             ("Torch's SDPA backward alone (retain_graph) per backend on the same tensors: "
             "efficient = EFFICIENT_ATTENTION fp32 (TF32 flags as the process has them); math = "
             "MATH fp32 (dense, O(S^2) memory) with torch's TF32 flags (cuda.matmul, cudnn) off; "
             "math_tf32 = the same with them on; flash_bf16 / cudnn_bf16 = FLASH_ATTENTION / "
             "CUDNN_ATTENTION on bf16 copies of Q, K, V, dY. GQA: K/V repeated to HQ heads for "
             "every backend. Median ms (a backend whose first run took longer than --max-cell-s "
             "is timed once more only: runs in the JSON), TFLOP/s as above, peak MiB above the "
             "memory before the backward (the forward's saved tensors not counted), ratio = torch "
             "ms / EP ms (> 1: the EP is faster). FAIL: the backend rejected the shape or ran out "
             "of memory (the JSON has the whole message)."), ""]
    head = "| B | HQ | HK | S | D | causal | form | path | EP ms |"
    rule = "|---|---|---|---|---|---|---|---|---|"
    for n in names:
        head += f" {n} ms | {n} TFLOP/s | {n} peak MiB | {n} ratio |"
        rule += "---|---|---|---|"
    lines += [head, rule]
    for r in res["rows"]:
        cells = [str(r[k]) for k in ("b", "hq", "hk", "s", "d", "causal", "form", "path")]
        cells.append(fmt_time(r.get("ep")).replace("|", "/")[:60])
        for n in names:
            cells += backend_cells(r, n)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def contract_type(res) -> str:
    if res.get("half_cudnn") and res.get("half"):
        return ("float16 contracts, float16 at the graph boundary (cudnn_half: cuDNN's fp16 "
                "backward; cuda_fused: fp32 inside the EP)")
    if res.get("half_cudnn"):
        return ("bfloat16 contracts (cudnn_half: cuDNN's bf16 backward; cuda_fused: fp32 inside "
                "the EP; float32 at the graph boundary, its Casts in the EP's time)")
    return "a float16 contract (fp32 inside the EP)" if res.get("half") else "fp32"


def markdown(res) -> str:
    lines = ["# AttentionVJP on the CUDA backend: fused kernels vs torch", "",
             f"Command: `{res['command']}`  ", f"Date: {res['date']}  ",
             f"GPU: {res['gpu']}  ", f"Versions: {json.dumps(res['versions'])}", "",
             f"Rank 4 (B, H, S, D), {contract_type(res)}, "
             "scale 1/sqrt(D), no mask. EP: one run with device I/O, "
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
    lines += backends_markdown(res)
    lines += ort_cuda_markdown(res)
    passes = [r for r in res["rows"] if r.get("ep_passes_ms")]
    if passes:
        lines += ["", "GPU time per pass of the fused path (profiled, ms per run):", "",
                  "| B | HQ | HK | S | D | causal | stats | dq | dkv | dkvq | other |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in passes:
            t = r["ep_passes_ms"]
            lines.append(f"| {r['b']} | {r['hq']} | {r['hk']} | {r['s']} | {r['d']} | "
                         f"{r['causal']} | {t['stats']:.2f} | {t['dq']:.2f} | {t['dkv']:.2f} | "
                         f"{t.get('dkvq', 0.0):.2f} | {t['other']:.2f} |")
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
    ap.add_argument("--torch-backends", default="efficient",
                    help="torch backward variants to time, comma-separated, of "
                    f"{','.join(TORCH_BACKENDS)} (module docstring)")
    ap.add_argument("--ort-cuda", action="store_true",
                    help="also ORT's CUDA EP on the contract's ONNX body (module docstring)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true",
                    help="also GPU time per fused pass (torch's profiler; cuda_fused cells)")
    ap.add_argument("--shapes", default="",
                    help="indices into the default grid to run, comma-separated (e.g. 0,2)")
    ap.add_argument("--causal", default="0,1", help="causal settings to run (0, 1 or 0,1)")
    ap.add_argument("--half", action="store_true",
                    help="the EP on a float16 contract (module docstring)")
    ap.add_argument("--half-cudnn", action="store_true",
                    help="the EP on bfloat16 contracts: cuDNN half mode and the exact fused "
                    "kernels, next to torch's bf16 backwards; with --half: float16 contracts at a "
                    "float16 boundary (module docstring)")
    # gpu_models.Env reads these.
    ap.add_argument("--tf32", action="store_true", help="EP TF32 mode (default exact fp32)")
    ap.add_argument("--cpu-binding", action="store_true")
    args = ap.parse_args()
    args.torch_backends = [n.strip() for n in args.torch_backends.split(",") if n.strip()]
    unknown = [n for n in args.torch_backends if n not in TORCH_BACKENDS]
    if unknown:
        ap.error(f"--torch-backends: unknown {','.join(unknown)}; known: "
                 f"{','.join(TORCH_BACKENDS)}")
    if args.half_cudnn:  # the baselines of the cuDNN half mode, in its contracts' type
        args.torch_backends += ["flash_fp16", "cudnn_fp16"] if args.half else ["flash_bf16",
                                                                             "cudnn_bf16"]
    args.torch_backends = list(dict.fromkeys(args.torch_backends))  # once each, in order
    env = gm.Env(args)
    mem = MlxMemory()
    shapes = QUICK_SHAPES if args.quick else SHAPES
    if args.shapes:
        shapes = [shapes[int(i)] for i in args.shapes.split(",")]
    forms = ["plain", "recompute"] if args.full else ["plain"]
    paths = ["cuda_fused", "blocked"] if args.full else ["cuda_fused"]
    if args.half_cudnn:
        paths = ["cudnn_half"] + paths
    res = {"command": " ".join(["python3"] + sys.argv),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
           "gpu": gm.gpu_name(env), "versions": gm.versions(env),
           "torch_backends": args.torch_backends, "half": args.half,
           "half_cudnn": args.half_cudnn, "rows": [],
           "notes": env.notes}
    if mem.lib is None:
        env.notes.append("EP peak memory not measured: libmlx's counters not found")
    if env.torch is not None and args.no_torch_time:
        env.notes.append("torch backends not timed (--no-torch-time)")
    backend_cache: dict = {}
    for shape in shapes:
        for causal in (int(c) for c in args.causal.split(",")):
            for form in forms:
                for path in paths + (["native"] if form == "recompute" else []):
                    row = bench_cell(env, mem, shape, causal, form, path, args, backend_cache)
                    res["rows"].append(row)
                    print(json.dumps({k: v for k, v in row.items() if k != "traceback"},
                                     default=str)[:400], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_attention_vjp.json").write_text(json.dumps(res, indent=1, default=str))
    md = markdown(res)
    (out / "gpu_attention_vjp.md").write_text(md)
    import plot_gpu_attention_vjp  # beside this file; matplotlib optional
    if plot_gpu_attention_vjp.plot(res, out / "gpu_attention_vjp.png"):
        print(f"wrote {out / 'gpu_attention_vjp.png'}")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
