#!/usr/bin/env python3
"""MLX EP on a GPU: models and the AttentionVJP contract vs ORT CPU and torch, in one run.

On the H200, from the checkout root (after `source .gpu/env.sh`):

    python3 bench/gpu_models.py                        # default run (a few minutes)
    python3 bench/gpu_models.py --model m.onnx --dim batch=8 --dim seq=128
    python3 bench/gpu_models.py --quick --out /tmp/g   # tiny sizes: a smoke test (CPU is fine)

Writes OUT/gpu_models.{json,md,png} (OUT: --out, default bench/results) and prints short tables
last. What it measures:

1. Models (the demo encoder, a larger encoder from the same builder, and any --model files):
   ORT CPU EP vs the MLX EP with host I/O (`sess.run` on numpy) vs the MLX EP with device I/O
   (IOBinding: inputs uploaded once to the EP's GPU memory, outputs pre-allocated there; only
   `run_with_iobinding` is timed). Max |EP - ORT CPU| per I/O mode.
2. AttentionVJP (pkg.onnax) plain and Recompute forms, B2 H16 D128, rank 3 (B, S, H*D),
   S 1024..8192, causal and not: EP host I/O, EP device I/O, torch eager SDPA fp32 on the same
   data (memory-efficient backend; forward+backward, and backward alone with retain_graph).
   FLOPs 10*B*H*S^2*D (halved when causal); relative L2 error of the EP's gradients vs torch's.
3. The share of a run spent outside MLX's evaluation, AttentionVJPRecompute B2 H16 S4096 D128
   causal, device I/O: (wall of run_with_iobinding - MLX eval) / wall, median over runs; eval
   per run from the EP's JSON report (cumulative times, diffed run by run) and, as a cross-check,
   from its trace (mlx.eval spans inside each mlx.subgraph span). Target <= 10%.

Every cell is wrapped: a failure is recorded in the table (and its traceback in the JSON) and
the run goes on. Without torch or CUDA the torch columns are skipped; without a GPU EP device
(CPU build of the EP) the device-I/O columns are skipped (`--cpu-binding` then runs them with
IOBinding on CPU memory, which only tests the plumbing).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import gc
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
try:
    import ortmlx  # noqa: F401
except ImportError:  # run from a checkout without PYTHONPATH
    sys.path.insert(0, str(ROOT / "python"))

import onnxruntime as ort

import ortmlx
from ortmlx import models as ortmlx_models
from ortmlx.contracts import (attention_forward_reference, attention_vjp_model,
                              attention_vjp_reference)

NVIDIA = 0x10DE
TARGET_OUTSIDE_EVAL = 0.10


# ------------------------------------------------------------------------------------------
# environment: EP device, torch, versions
# ------------------------------------------------------------------------------------------

class Env:
    """What this process can use: the EP's devices, device I/O, torch on CUDA."""

    def __init__(self, args):
        self.args = args
        self.notes: list[str] = []
        self.report_backend = None  # backend/device/io/tf32 as the EP's report states them
        if args.tf32:
            # The EP decides the process's fp32 matmul mode when its library loads.
            os.environ["ONNXRUNTIME_EP_MLX_TF32"] = "1"
        ortmlx.register_execution_provider_library()
        self.ep_devices = [d for d in ort.get_ep_devices() if d.ep_name == ortmlx.ep_name()]
        if not self.ep_devices:
            raise RuntimeError("ONNX Runtime offers no device for MLXExecutionProvider")
        gpus = [d for d in self.ep_devices if d.device.type == ort.OrtHardwareDeviceType.GPU]
        self.gpu_dev = gpus[0] if gpus else None
        self.session_dev = self.gpu_dev or self.ep_devices[0]
        self.mem_info = None
        self.vendor_id = NVIDIA
        self.device_id = 0
        self.device_io = None  # "gpu", "cpu-binding" or None (skipped)
        if self.gpu_dev is not None:
            try:
                self.mem_info = self.gpu_dev.memory_info(ort.OrtDeviceMemoryType.DEFAULT)
            except Exception as e:  # noqa: BLE001
                self.notes.append(f"GPU EP device has no DEFAULT memory info ({e})")
            if self.mem_info is not None:
                self.vendor_id = int(getattr(self.mem_info, "device_vendor_id", NVIDIA) or NVIDIA)
                self.device_id = int(getattr(self.mem_info, "device_id", 0) or 0)
                self.device_io = "gpu"
            else:
                self.notes.append("device-I/O columns skipped: the GPU EP device exposes no "
                                  "DEFAULT memory info")
        elif args.cpu_binding:
            self.device_io = "cpu-binding"
            self.notes.append("the EP offers no GPU device (CPU build): the device-I/O columns "
                              "use IOBinding on CPU memory (--cpu-binding), which only tests the "
                              "plumbing")
        else:
            self.notes.append("device-I/O columns skipped: the EP offers no GPU device "
                              "(CPU build of the EP)")
        self.device_upload = None  # how device inputs were made (recorded on first use)
        self.sync_outputs = None   # whether IOBinding.synchronize_outputs works (first use)
        self.torch = None
        self.torch_note = ""
        if args.no_torch:
            self.torch_note = "torch columns skipped (--no-torch)"
        else:
            try:
                import torch
                if torch.cuda.is_available():
                    self.torch = torch
                    torch.manual_seed(args.seed)
                else:
                    self.torch_note = "torch columns skipped: torch has no CUDA device"
            except ImportError:
                self.torch_note = "torch columns skipped: torch is not installed"
        if self.torch_note:
            self.notes.append(self.torch_note)

    @property
    def has_device_io(self) -> bool:
        return self.device_io is not None

    def note_report(self, rep: dict) -> None:
        """Keeps the first report's statement of where the EP ran (backend, device, I/O, TF32)."""
        if self.report_backend is None:
            self.report_backend = {k: rep.get(k) for k in ("backend", "device", "io", "tf32")}
            if self.device_io == "gpu" and rep.get("backend") not in (None, "gpu"):
                self.notes.append(f"the EP has a GPU device but its report says backend "
                                  f"{rep.get('backend')!r}")


def libmlx_info() -> dict:
    """MLX's version and backend, read from the libmlx the EP loaded (no mlx Python package on
    the GPU machine): mlx::core::version() and mlx::core::gpu::is_available() through ctypes."""
    path = None
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "libmlx" in line and line.rstrip().endswith(".so"):
                    path = line.split()[-1]
                    break
    except OSError:
        pass
    info = {"path": path, "version": None, "gpu_available": None}
    if not path:
        return info
    try:
        lib = ctypes.CDLL(path)
        fn = lib._ZN3mlx4core7versionEv
        fn.restype = ctypes.c_char_p
        info["version"] = fn().decode()
    except Exception as e:  # noqa: BLE001
        info["version_error"] = str(e)
    try:
        lib = ctypes.CDLL(path)
        fn = lib._ZN3mlx4core3gpu12is_availableEv
        fn.restype = ctypes.c_bool
        info["gpu_available"] = bool(fn())
    except Exception as e:  # noqa: BLE001
        info["gpu_error"] = str(e)
    return info


def name_selected(name: str, patterns) -> bool:
    """--only of the GPU benches: a pattern matches names containing it, or, written `=name`,
    that name alone (`bert` also selects the distilbert models; `=bert` does not)."""
    return not patterns or any(name == p[1:] if p.startswith("=") else p in name
                               for p in patterns)


def gpu_name(env: Env) -> str:
    if env.torch is not None:
        t = env.torch
        p = t.cuda.get_device_properties(0)
        return (f"{t.cuda.get_device_name(0)} (sm_{p.major}{p.minor}, "
                f"{p.total_memory / 2**30:.0f} GiB)")
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return "none found"


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                      if ln.startswith("Model name")), platform.processor())
    except OSError:
        model = platform.processor()
    return f"{model}, {os.cpu_count()} cores"


def git_commit() -> str:
    # ORTMLX_COMMIT: the commit the bundle was built from, where the checkout's .git is not it
    # (a copied working tree on the GPU machine).
    if os.environ.get("ORTMLX_COMMIT"):
        return os.environ["ORTMLX_COMMIT"]
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=20).stdout.strip()
        if not commit:
            return "unknown (no git checkout)"
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True, timeout=20).stdout.strip()
        return commit + (" + uncommitted changes in src/" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def versions(env: Env) -> dict:
    mlx = libmlx_info()
    out = {
        "onnxruntime": ort.__version__,
        "ortmlx": f"{ortmlx.version()} (commit {git_commit()})",
        "ortmlx_library": ortmlx.library_path(),
        "mlx": mlx.get("version") or "?",
        "mlx_backend": ("CUDA (gpu::is_available)" if mlx.get("gpu_available")
                        else "CPU" if mlx.get("gpu_available") is False else "?"),
        "libmlx": mlx.get("path"),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "ep_devices": [f"{d.device.type.name} vendor 0x{d.device.vendor_id:04x} "
                       f"device {d.device.device_id} {dict(d.ep_metadata)}"
                       for d in env.ep_devices],
    }
    if env.torch is not None:
        t = env.torch
        out["torch"] = f"{t.__version__} (CUDA {t.version.cuda}, cuDNN {t.backends.cudnn.version()})"
    else:
        try:
            import torch
            out["torch"] = f"{torch.__version__} (no CUDA device)"
        except ImportError:
            out["torch"] = "not installed"
    try:
        import onnx
        out["onnx"] = onnx.__version__
    except ImportError:
        pass
    return out


def settings(env: Env) -> dict:
    s = {
        "MLX_ENABLE_TF32": os.environ.get("MLX_ENABLE_TF32", "unset"),
        "ep_report": env.report_backend,
        "ep_env": {k: v for k, v in os.environ.items() if k.startswith("ONNXRUNTIME_EP_MLX")},
        "device_io": env.device_io or "skipped",
        "device_upload": env.device_upload,
        "iobinding_synchronize_outputs": env.sync_outputs,
        "repeats": env.args.repeats, "warmup": env.args.warmup,
        "max_cell_s": env.args.max_cell_s, "seed": env.args.seed,
    }
    if env.torch is not None:
        t = env.torch
        s["torch_tf32"] = (f"matmul.allow_tf32={t.backends.cuda.matmul.allow_tf32}, "
                           f"cudnn.allow_tf32={t.backends.cudnn.allow_tf32}, "
                           f"float32_matmul_precision={t.get_float32_matmul_precision()}")
    return s


# ------------------------------------------------------------------------------------------
# sessions, device I/O, timing
# ------------------------------------------------------------------------------------------

def _model_data(model):
    return model if isinstance(model, (str, bytes)) else model.SerializeToString()


def ep_session(env: Env, model, provider_options=None):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    opts = {k: str(v) for k, v in (provider_options or {}).items()}
    so.add_provider_for_devices([env.session_dev], opts)
    sess = ort.InferenceSession(_model_data(model), so)
    # ORT's Python API falls back to the CPU EP alone when the EP fails to create (printing an
    # "EP Error" banner): never time that as the EP.
    if ortmlx.ep_name() not in sess.get_providers():
        raise RuntimeError(f"the session has no {ortmlx.ep_name()} (ORT fell back to "
                           f"{sess.get_providers()}; see the 'EP Error' message above)")
    return sess


def cpu_session(model):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(_model_data(model), so, providers=["CPUExecutionProvider"])


class DeviceIO:
    """Inputs uploaded once and outputs pre-allocated in the EP's device memory, bound to one
    session (env.device_io == "cpu-binding": the same with CPU OrtValues)."""

    def __init__(self, env: Env, sess, feeds: dict, out_specs):
        self.env = env
        self.sess = sess
        self.io = sess.io_binding()
        self.inputs = {}
        for name, arr in feeds.items():
            v = self._to_device(np.ascontiguousarray(arr))
            self.inputs[name] = v
            self.io.bind_ortvalue_input(name, v)
        self.names = [n for n, _, _ in out_specs]
        self.outputs = {}
        for name, shape, dtype in out_specs:
            if env.device_io == "gpu":
                v = ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype,
                                                              memory_info=env.mem_info)
            else:
                v = ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype)
            self.outputs[name] = v
            self.io.bind_ortvalue_output(name, v)
        first_in = next(iter(self.inputs.values()), None)
        first_out = next(iter(self.outputs.values()), None)
        self.placement = (f"inputs on {first_in.device_name() if first_in else '-'}, "
                          f"outputs on {first_out.device_name() if first_out else '-'}")
        if env.device_io == "gpu" and "cpu" in self.placement:
            env.notes.append(f"device I/O asked for GPU memory but ORT placed {self.placement}")

    def _to_device(self, arr):
        env = self.env
        if env.device_io != "gpu":
            return ort.OrtValue.ortvalue_from_numpy(arr)
        # ortvalue_from_numpy copies to the device through the EP's data transfer; if that is
        # not available, allocate with the EP's allocator and copy in with update_inplace.
        if env.device_upload in (None, "ortvalue_from_numpy"):
            try:
                v = ort.OrtValue.ortvalue_from_numpy(arr, "gpu", env.device_id, env.vendor_id)
                env.device_upload = "ortvalue_from_numpy"
                return v
            except Exception as e:  # noqa: BLE001
                if env.device_upload is not None:
                    raise
                env.notes.append(f"ortvalue_from_numpy(..., 'gpu', {env.device_id}, "
                                 f"0x{env.vendor_id:x}) failed ({str(e)[:160]}); inputs are "
                                 "allocated with the EP's memory info and filled by update_inplace")
        v = ort.OrtValue.ortvalue_from_shape_and_type(list(arr.shape), arr.dtype,
                                                      memory_info=env.mem_info)
        v.update_inplace(arr)
        env.device_upload = "ortvalue_from_shape_and_type(memory_info) + update_inplace"
        return v

    def run(self):
        self.sess.run_with_iobinding(self.io)
        if self.env.sync_outputs is None:
            try:
                self.io.synchronize_outputs()
                self.env.sync_outputs = True
            except Exception:  # noqa: BLE001
                self.env.sync_outputs = False
        elif self.env.sync_outputs:
            self.io.synchronize_outputs()

    def read(self) -> list:
        try:
            return [self.outputs[n].numpy() for n in self.names]
        except Exception:  # noqa: BLE001
            return list(self.io.copy_outputs_to_cpu())


MIN_CELL_S = 0.3  # fast cells run past `repeats` until this long (at most MAX_RUNS runs)
MAX_RUNS = 200


def timed(fn, warmup: int, repeats: int, max_s: float, sync=None) -> dict:
    """Warm-up runs (the first one timed separately: it compiles), then `repeats` timed runs
    (more, up to MAX_RUNS, while the cell has run for less than MIN_CELL_S; fewer, but at least
    3, once it has run for max_s seconds); median and min."""
    t0 = time.perf_counter()
    fn()
    if sync:
        sync()
    first = time.perf_counter() - t0
    for _ in range(max(0, warmup - 1)):
        fn()
    if sync:
        sync()
    times = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t0)
        n, elapsed = len(times), time.perf_counter() - start
        if n >= repeats and (elapsed >= MIN_CELL_S or n >= MAX_RUNS):
            break
        if n >= min(3, repeats) and elapsed > max_s:
            break
    return {"median_s": statistics.median(times), "min_s": min(times), "runs": len(times),
            "first_s": first}


@contextlib.contextmanager
def capture_stderr():
    """Captures what native code writes to fd 2 inside the block into box["text"]."""
    box = {}
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            yield box
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            box["text"] = f.read().decode(errors="replace")


def failure(e: BaseException) -> dict:
    msg = " ".join(str(e).split())
    return {"error": f"{type(e).__name__}: {msg[:240]}", "traceback": traceback.format_exc()}


def free_memory(env: Env):
    gc.collect()
    if env.torch is not None:
        env.torch.cuda.empty_cache()


def max_abs_diff(got: list, want: list) -> float:
    worst = 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return float("inf")
        if g.size == 0:
            continue
        if np.issubdtype(w.dtype, np.floating):
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))))
        elif not np.array_equal(g, w):
            return float("inf")
    return worst


# ------------------------------------------------------------------------------------------
# 1. models
# ------------------------------------------------------------------------------------------

_NP_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_,
}


def random_feeds_for(sess, dims: dict, rng, int_high: int) -> dict:
    feeds = {}
    for inp in sess.get_inputs():
        shape = [d if isinstance(d, int) and d >= 0 else dims.get(str(d), 1) for d in inp.shape]
        dtype = _NP_TYPES.get(inp.type)
        if dtype is None:
            raise ValueError(f"input {inp.name}: type {inp.type} not supported by this bench")
        if dtype == np.bool_:
            feeds[inp.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            feeds[inp.name] = rng.integers(0, int_high, size=shape).astype(dtype)
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def builtin_models(quick: bool):
    """(name, builder kwargs) of the encoders built by ortmlx.models.transformer_encoder."""
    demo = ("demo encoder B2 S16 E64 H4 L2", {})  # what `python -m ortmlx demo` runs
    if quick:
        return [demo, ("encoder B2 S64 E128 H4 F256 L2",
                       dict(batch=2, seq=64, embed=128, heads=4, ffn=256, layers=2))]
    return [demo, ("encoder B8 S512 E768 H12 F3072 L4",
                   dict(batch=8, seq=512, embed=768, heads=12, ffn=3072, layers=4))]


def bench_model(env: Env, name: str, model, feeds: dict | None, args) -> dict:
    row = {"model": name}
    a = args
    try:
        cpu = cpu_session(model)
        if feeds is None:
            feeds = random_feeds_for(cpu, a.dims, np.random.default_rng(a.seed), a.int_high)
        row["inputs"] = {k: list(v.shape) for k, v in feeds.items()}
        want = cpu.run(None, feeds)
        out_specs = [(o.name, w.shape, w.dtype) for o, w in zip(cpu.get_outputs(), want)]
    except Exception as e:  # noqa: BLE001
        row["cpu"] = failure(e)
        return row
    try:
        row["cpu"] = timed(lambda: cpu.run(None, feeds), a.warmup, a.repeats, a.max_cell_s)
    except Exception as e:  # noqa: BLE001
        row["cpu"] = failure(e)
    del cpu
    # Which nodes ran on the EP: a separate session with the report (the report is rewritten
    # after every run, which would add a file write to each timed run).
    with tempfile.TemporaryDirectory(prefix="gpu_models-") as tmp:
        report_path = os.path.join(tmp, "report.json")
        try:
            s = ep_session(env, model, {"report": report_path})
            s.run(None, feeds)
            with open(report_path) as f:
                rep = json.load(f)
            env.note_report(rep)
            fused = rep.get("fused", {})
            executed = sum(len(v["nodes"]) for v in fused.values() if v.get("runs", 0) > 0)
            total = sum(c["total_nodes"] for c in rep.get("claims", {}).values()
                        if not c.get("superseded", False))
            row["on_ep"] = f"{executed}/{total}"
            row["fused_nodes"] = len(fused)
            refused = {}
            for c in rep.get("claims", {}).values():
                for op, r in c.get("refused", {}).items():
                    refused.setdefault(op, r.get("reason", ""))
            row["refused"] = refused
            del s
        except Exception as e:  # noqa: BLE001
            row["report_error"] = failure(e)["error"]
    try:
        sess = ep_session(env, model)
    except Exception as e:  # noqa: BLE001
        row["ep_host"] = failure(e)
        return row
    box = {}

    def host():
        box["out"] = sess.run(None, feeds)

    try:
        row["ep_host"] = timed(host, a.warmup, a.repeats, a.max_cell_s)
        row["diff_host"] = max_abs_diff(box["out"], want)
    except Exception as e:  # noqa: BLE001
        row["ep_host"] = failure(e)
    if env.has_device_io:
        try:
            dio = DeviceIO(env, sess, feeds, out_specs)
            row["ep_device"] = timed(dio.run, a.warmup, a.repeats, a.max_cell_s)
            row["ep_device"]["placement"] = dio.placement
            row["diff_device"] = max_abs_diff(dio.read(), want)
            del dio
        except Exception as e:  # noqa: BLE001
            row["ep_device"] = failure(e)
    else:
        row["ep_device"] = {"skipped": "no GPU EP device"}
    del sess
    free_memory(env)
    return row


# ------------------------------------------------------------------------------------------
# 2. AttentionVJP
# ------------------------------------------------------------------------------------------

def attn_flops(b, h, s, d, causal) -> float:
    return 10.0 * b * h * s * s * d * (0.5 if causal else 1.0)


def attn_shape(b, s, h, d, rank):
    return (b, s, h * d) if rank == 3 else (b, h, s, d)


def random_normal(env: Env, shape, rng):
    """Fresh float32 N(0, 1) data (torch's GPU generator when there is one: much faster)."""
    if env.torch is not None:
        t = env.torch
        return t.randn(*shape, device="cuda", dtype=t.float32).cpu().numpy()
    return rng.standard_normal(shape, dtype=np.float32)


class TorchAttention:
    """torch eager SDPA on the contract's data: leaves in the contract layout, viewed as
    (B, H, S, D) for SDPA (a strided view for rank 3, which the memory-efficient kernel reads
    as is), fp32, scale 1/sqrt(D), is_causal (top-left, the contract's alignment for Sq == Sk)."""

    def __init__(self, env: Env, feeds, b, h, s, d, causal, scale, rank):
        t = self.t = env.torch
        self.env = env
        dev = "cuda"
        self.leaves = [t.from_numpy(feeds[n]).to(dev).requires_grad_() for n in ("Q", "K", "V")]
        self.causal = bool(causal)
        self.scale = scale
        self.b, self.h, self.s, self.d, self.rank = b, h, s, d, rank
        self.dy = self.bhsd(t.from_numpy(feeds["dY"]).to(dev))
        from torch.nn.attention import SDPBackend
        self.backend_name = "EFFICIENT_ATTENTION"
        self.backend = SDPBackend.EFFICIENT_ATTENTION

    def bhsd(self, x):
        if self.rank == 3:
            return x.view(self.b, self.s, self.h, self.d).transpose(1, 2)
        return x

    def ctx(self):
        from torch.nn.attention import sdpa_kernel
        if self.backend is None:
            return contextlib.nullcontext()
        return sdpa_kernel(self.backend)

    def forward(self):
        q, k, v = (self.bhsd(x) for x in self.leaves)
        return self.t.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=self.causal, scale=self.scale)

    def fwd_bwd(self):
        with self.ctx():
            y = self.forward()
            return self.t.autograd.grad(y, self.leaves, self.dy)

    def reference(self):
        """(Y in the contract layout as numpy, [dQ, dK, dV] as GPU tensors). Falls back to
        torch's default backend selection when the memory-efficient kernel refuses."""
        try:
            with self.ctx():
                y = self.forward()
                grads = self.t.autograd.grad(y, self.leaves, self.dy)
        except RuntimeError as e:
            self.env.notes.append(f"torch EFFICIENT_ATTENTION refused ({str(e)[:120]}); "
                                  "torch columns use its default SDPA backend selection")
            self.backend, self.backend_name = None, "default"
            y = self.forward()
            grads = self.t.autograd.grad(y, self.leaves, self.dy)
        y = y.detach()
        if self.rank == 3:
            y = y.transpose(1, 2).reshape(self.b, self.s, self.h * self.d)
        return y.contiguous().cpu().numpy(), [g.detach() for g in grads]

    def time(self, args) -> tuple[dict, dict]:
        sync = self.t.cuda.synchronize
        both = timed(self.fwd_bwd, args.warmup, args.repeats, args.max_cell_s, sync)
        try:
            with self.ctx():
                y = self.forward()
                bwd = timed(lambda: self.t.autograd.grad(y, self.leaves, self.dy,
                                                         retain_graph=True),
                            args.warmup, args.repeats, args.max_cell_s, sync)
            del y
        except Exception as e:  # noqa: BLE001
            bwd = failure(e)
        return both, bwd


def rel_l2(env: Env, got: np.ndarray, want) -> float:
    if env.torch is not None and not isinstance(want, np.ndarray):
        t = env.torch
        g = t.from_numpy(np.ascontiguousarray(got)).to(want.device).double()
        w = want.double()
        den = float(t.linalg.vector_norm(w))
        return float(t.linalg.vector_norm(g - w)) / max(den, 1e-300)
    g = np.asarray(got, dtype=np.float64)
    w = np.asarray(want, dtype=np.float64)
    return float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-300))


def short_paths(paths) -> str:
    names = {"onnax GEMM attention VJP": "dense", "onnax tiled attention VJP": "tiled",
             "onnax native SDPA attention VJP": "native"}
    got = [names.get(p, p) for p in paths or []]
    return "+".join(got) if got else "-"


def float32_forward(feeds, b, h, s, d, causal, scale, rank):
    """Y in float32, one (b, h) slice at a time (no torch, sizes too large for float64)."""
    def bhsd(x):
        return x.reshape(b, s, h, d).transpose(0, 2, 1, 3) if rank == 3 else x
    q, k, v = (bhsd(feeds[n]) for n in ("Q", "K", "V"))
    y = np.empty((b, h, s, d), dtype=np.float32)
    tri = np.triu(np.ones((s, s), dtype=bool), 1) if causal else None
    for i in range(b):
        for j in range(h):
            sc = (q[i, j] @ k[i, j].T) * np.float32(scale)
            if tri is not None:
                sc[tri] = -np.inf
            sc -= sc.max(axis=-1, keepdims=True)
            p = np.exp(sc)
            p /= p.sum(axis=-1, keepdims=True)
            y[i, j] = p @ v[i, j]
    return y.transpose(0, 2, 1, 3).reshape(b, s, h * d) if rank == 3 else y


def bench_attention_cell(env: Env, form: str, causal: int, b, h, s, d, rank, args) -> dict:
    recompute = form == "recompute"
    row = {"form": form, "causal": causal, "b": b, "h": h, "s": s, "d": d, "rank": rank,
           "flops": attn_flops(b, h, s, d, causal)}
    rng = np.random.default_rng([args.seed, s, causal, int(recompute)])
    scale = float(np.float32(1.0 / math.sqrt(d)))  # the contract name's float32 scale
    shape = attn_shape(b, s, h, d, rank)
    try:
        model = attention_vjp_model(b, s, s, h, h, d, rank=rank, causal=causal, mask_kind=0,
                                    mask_shape=(1,), recompute=recompute)
        feeds = {n: random_normal(env, shape, rng) for n in ("Q", "K", "V", "dY")}
        feeds["Mask"] = np.ones((1,), dtype=bool)  # mask kind 0: ignored by the contract
    except Exception as e:  # noqa: BLE001
        row["ep_host"] = failure(e)
        return row

    # torch: Y for the plain form, the reference gradients, and its times.
    ref, ref_kind = None, None
    tattn = None
    if env.torch is not None:
        try:
            tattn = TorchAttention(env, feeds, b, h, s, d, causal, scale, rank)
            y, ref = tattn.reference()
            ref_kind = f"torch SDPA fp32 ({tattn.backend_name})"
            if not recompute:
                feeds["Y"] = y
            row["torch_backend"] = tattn.backend_name
            row["torch_fwd_bwd"], row["torch_bwd"] = tattn.time(args)
        except Exception as e:  # noqa: BLE001
            row["torch_fwd_bwd"] = failure(e)
            row["torch_bwd"] = {"skipped": "torch failed"}
    else:
        row["torch_fwd_bwd"] = row["torch_bwd"] = {"skipped": env.torch_note}
    small = b * h * s * s <= 2**24
    if ref is None and small:
        kw = dict(hq=h, hk=h, causal=causal, mask_kind=0, scale=scale, rank=rank)
        if not recompute:
            feeds["Y"] = attention_forward_reference(
                feeds["Q"], feeds["K"], feeds["V"], feeds["Mask"], **kw).astype(np.float32)
        ref = attention_vjp_reference(feeds["Q"], feeds["K"], feeds["V"], feeds["dY"],
                                      feeds["Mask"], y=None if recompute else feeds["Y"], **kw)
        ref_kind = "float64 numpy reference"
    if not recompute and "Y" not in feeds:
        feeds["Y"] = float32_forward(feeds, b, h, s, d, causal, scale, rank)
    row["reference"] = ref_kind or "none"
    names = ("Q", "K", "V", "dY", "Mask") if recompute else ("Q", "K", "V", "Y", "dY", "Mask")
    feeds = {n: feeds[n] for n in names}

    def errors(outs):
        if ref is None:
            return None
        return {g: rel_l2(env, o, r) for g, o, r in zip(("dQ", "dK", "dV"), outs, ref)}

    # Which path ran and that the node is on the EP: one run of a session with the report
    # (kept out of the timed session: the report is rewritten after every run).
    with tempfile.TemporaryDirectory(prefix="gpu_models-") as tmp:
        report_path = os.path.join(tmp, "report.json")
        try:
            s_rep = ep_session(env, model, {"report": report_path})
            s_rep.run(None, feeds)
            with open(report_path) as f:
                rep = json.load(f)
            env.note_report(rep)
            row["paths"] = sorted(rep.get("paths", {}))
            row["on_ep"] = any("attention_vjp" in v.get("nodes", []) and v.get("runs", 0) > 0
                               for v in rep.get("fused", {}).values())
            del s_rep
        except Exception as e:  # noqa: BLE001
            row["report_error"] = failure(e)["error"]
    free_memory(env)

    try:
        sess = ep_session(env, model)
    except Exception as e:  # noqa: BLE001
        row["ep_host"] = failure(e)
        return row
    box = {}

    def host():
        box["out"] = sess.run(None, feeds)

    try:
        row["ep_host"] = timed(host, args.warmup, args.repeats, args.max_cell_s)
        row["err_host"] = errors(box.pop("out"))
    except Exception as e:  # noqa: BLE001
        row["ep_host"] = failure(e)
    if env.has_device_io:
        try:
            specs = [(o.name, feeds["Q"].shape if o.name == "dQ" else feeds["K"].shape,
                      np.float32) for o in sess.get_outputs()]
            dio = DeviceIO(env, sess, feeds, specs)
            row["ep_device"] = timed(dio.run, args.warmup, args.repeats, args.max_cell_s)
            row["ep_device"]["placement"] = dio.placement
            row["err_device"] = errors(dio.read())
            del dio
        except Exception as e:  # noqa: BLE001
            row["ep_device"] = failure(e)
    else:
        row["ep_device"] = {"skipped": "no GPU EP device"}
    del sess, tattn, ref
    free_memory(env)
    return row


# ------------------------------------------------------------------------------------------
# 3. time outside MLX's evaluation
# ------------------------------------------------------------------------------------------

def _report_times(path) -> dict:
    with open(path) as f:
        rep = json.load(f)
    out = dict(rep.get("times", {}))
    out["runs"] = rep.get("counters", {}).get("compute.runs", 0)
    return out


def trace_evals(path, n_runs_total: int) -> list[dict] | None:
    """Per session run: MLX eval seconds and EP Compute seconds from the Chrome trace
    (mlx.eval spans inside mlx.subgraph spans; k subgraph spans per run when k fused nodes)."""
    with open(path) as f:
        data = json.load(f)
    events = data.get("traceEvents", data) if isinstance(data, dict) else data
    subs = sorted((e for e in events if e.get("ph") == "X" and e.get("name") == "mlx.subgraph"),
                  key=lambda e: e["ts"])
    evals = [e for e in events if e.get("ph") == "X" and e.get("name") == "mlx.eval"]
    if not subs or len(subs) % n_runs_total:
        return None
    k = len(subs) // n_runs_total
    out = []
    for i in range(n_runs_total):
        group = subs[i * k:(i + 1) * k]
        ev = 0.0
        for sub in group:
            lo, hi = sub["ts"], sub["ts"] + sub["dur"]
            ev += sum(e["dur"] for e in evals if e["ts"] >= lo - 1 and e["ts"] + e["dur"] <= hi + 1)
        out.append({"eval_s": ev * 1e-6, "compute_s": sum(g["dur"] for g in group) * 1e-6})
    return out


def bench_overhead(env: Env, args) -> dict:
    b, h, d = args.b, args.h, args.d
    s = args.overhead_s
    res = {"config": f"AttentionVJPRecompute B{b} H{h} S{s} D{d} causal, rank {args.rank}",
           "io": "device" if env.device_io == "gpu" else (env.device_io or "host"),
           "target": TARGET_OUTSIDE_EVAL}
    rng = np.random.default_rng([args.seed, 99])
    try:
        model = attention_vjp_model(b, s, s, h, h, d, rank=args.rank, causal=1, mask_kind=0,
                                    mask_shape=(1,), recompute=True)
        shape = attn_shape(b, s, h, d, args.rank)
        feeds = {n: random_normal(env, shape, rng) for n in ("Q", "K", "V", "dY")}
        feeds["Mask"] = np.ones((1,), dtype=bool)
    except Exception as e:  # noqa: BLE001
        res["error"] = failure(e)["error"]
        return res
    n = args.overhead_runs
    warm = max(2, args.warmup)

    def runner(sess):
        if env.has_device_io:
            specs = [(o.name, shape, np.float32) for o in sess.get_outputs()]
            dio = DeviceIO(env, sess, feeds, specs)
            return dio.run, dio
        return (lambda: sess.run(None, feeds)), None

    tmp = tempfile.mkdtemp(prefix="gpu_models-overhead-")
    # (a) the JSON report: cumulative times, read between runs.
    try:
        rpath = os.path.join(tmp, "report.json")
        sess = ep_session(env, model, {"report": rpath})
        run, keep = runner(sess)
        for _ in range(warm):
            run()
        rows = []
        before = _report_times(rpath)
        for _ in range(n):
            t0 = time.perf_counter()
            run()
            wall = time.perf_counter() - t0
            after = _report_times(rpath)
            delta = {k: after.get(k, 0) - before.get(k, 0) for k in
                     ("eval", "compute", "copy", "translate", "compile", "queue", "runs")}
            rows.append({"wall_s": wall, **{f"{k}_s" if k != "runs" else "computes": v
                                            for k, v in delta.items()}})
            before = after
        res["report"] = summarise_overhead(rows)
        del keep, run, sess
    except Exception as e:  # noqa: BLE001
        res["report"] = failure(e)
    free_memory(env)
    # (b) the trace: mlx.eval spans per mlx.subgraph span (written when the session ends).
    try:
        tpath = os.path.join(tmp, "trace.json")
        sess = ep_session(env, model, {"trace": tpath})
        run, keep = runner(sess)
        walls = []
        for i in range(warm + n):
            t0 = time.perf_counter()
            run()
            if i >= warm:
                walls.append(time.perf_counter() - t0)
        with capture_stderr() as captured:  # the EP prints its session summary with a trace
            del keep, run, sess
            gc.collect()
        res["trace_session_summary"] = captured.get("text", "")
        per_run = trace_evals(tpath, warm + n)
        if per_run is None:
            res["trace"] = {"error": "trace has no mlx.subgraph spans matching the runs"}
        else:
            rows = [{"wall_s": w, "eval_s": p["eval_s"], "compute_s": p["compute_s"]}
                    for w, p in zip(walls, per_run[warm:])]
            res["trace"] = summarise_overhead(rows)
    except Exception as e:  # noqa: BLE001
        res["trace"] = failure(e)
    free_memory(env)
    # (c) no diagnostics: the wall time a user sees; outside-eval estimated with (a)'s eval.
    try:
        sess = ep_session(env, model)
        run, keep = runner(sess)
        t = timed(run, warm, n, max(args.max_cell_s, 20.0))
        res["plain"] = t
        ev = res.get("report", {}).get("eval_median_s")
        if ev:
            res["plain"]["outside_eval_est"] = (t["median_s"] - ev) / t["median_s"]
        del keep, run, sess
    except Exception as e:  # noqa: BLE001
        res["plain"] = failure(e)
    free_memory(env)
    for name in ("report.json", "trace.json"):
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(tmp, name))
    with contextlib.suppress(OSError):
        os.rmdir(tmp)
    res["flops"] = attn_flops(b, h, s, d, 1)
    return res


def summarise_overhead(rows: list[dict]) -> dict:
    med = lambda key: statistics.median(r[key] for r in rows)  # noqa: E731
    frac = [(r["wall_s"] - r["eval_s"]) / r["wall_s"] for r in rows]
    out = {"runs": len(rows), "outside_eval_median": statistics.median(frac),
           "outside_eval_min": min(frac), "outside_eval_max": max(frac),
           "wall_median_s": med("wall_s"), "eval_median_s": med("eval_s"),
           "per_run": rows}
    if all("compute_s" in r for r in rows):
        out["compute_median_s"] = med("compute_s")
        # Inside the EP's Compute but not MLX eval (copies, cache lookup, queue), and outside
        # the EP's Compute (ORT, IOBinding, Python, the report file write).
        out["ep_not_eval_median_s"] = statistics.median(r["compute_s"] - r["eval_s"] for r in rows)
        out["outside_ep_median_s"] = statistics.median(r["wall_s"] - r["compute_s"] for r in rows)
    phases = ("copy_s", "translate_s", "compile_s", "queue_s")
    for k in phases:
        if all(k in r for r in rows):
            out[k.replace("_s", "_median_s")] = med(k)
    if all(k in r for r in rows for k in phases + ("compute_s",)):
        # Inside Compute but in none of the EP's timed phases (input pins, bookkeeping).
        out["other_median_s"] = statistics.median(
            r["compute_s"] - r["eval_s"] - sum(r[k] for k in phases) for r in rows)
    if all("computes" in r for r in rows):
        out["computes_per_run"] = sorted({r["computes"] for r in rows})
    return out


# ------------------------------------------------------------------------------------------
# output
# ------------------------------------------------------------------------------------------

def ms(cell) -> str:
    if not cell:
        return "-"
    if "median_s" in cell:
        return f"{cell['median_s'] * 1e3:.3g}" if cell["median_s"] < 0.1 else \
            f"{cell['median_s'] * 1e3:.0f}"
    if "error" in cell:
        return "FAIL: " + cell["error"][:60].replace("|", "/")
    return "skip"


def tflops(flops, cell) -> str:
    if cell and cell.get("median_s"):
        x = flops / cell["median_s"] / 1e12
        return f"{x:.1f}" if x >= 10 else f"{x:.3g}"
    return "-"


def ratio(a, b) -> str:
    """b time / a time: a's throughput relative to b's (>1: a is faster)."""
    if a and b and a.get("median_s") and b.get("median_s"):
        return f"{b['median_s'] / a['median_s']:.2f}"
    return "-"


def fmt_err(e) -> str:
    if not e:
        return "-"
    return f"{max(e.values()):.1e}"


def fmt_diff(x) -> str:
    return "-" if x is None else ("mismatch" if x == float("inf") else f"{x:.1e}")


def model_table(rows) -> list[str]:
    head = ("| model | on EP | ORT CPU ms | EP host-I/O ms | EP device-I/O ms | host/CPU speed | "
            "device/CPU speed | max abs diff host | max abs diff device |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r.get('on_ep', '?')} | {ms(r.get('cpu'))} | "
            f"{ms(r.get('ep_host'))} | {ms(r.get('ep_device'))} | "
            f"{ratio(r.get('ep_host'), r.get('cpu'))} | {ratio(r.get('ep_device'), r.get('cpu'))}"
            f" | {fmt_diff(r.get('diff_host'))} | {fmt_diff(r.get('diff_device'))} |")
    return lines


def attention_table(rows) -> list[str]:
    head = ("| form | causal | S | EP path | EP device ms | EP host ms | torch f+b ms | "
            "torch bwd ms | EP device TFLOP/s | torch f+b TFLOP/s | torch bwd TFLOP/s | "
            "EP/torch f+b | EP/torch bwd | rel L2 device | rel L2 host |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        f = r["flops"]
        dev = r.get("ep_device") if r.get("ep_device", {}).get("median_s") else None
        path = short_paths(r.get("paths"))
        if r.get("on_ep") is False:
            path += " (NOT on EP)"
        lines.append(
            f"| {'Recompute' if r['form'] == 'recompute' else 'plain'} | {r['causal']} | "
            f"{r['s']} | {path} | {ms(r.get('ep_device'))} | {ms(r.get('ep_host'))} | "
            f"{ms(r.get('torch_fwd_bwd'))} | {ms(r.get('torch_bwd'))} | "
            f"{tflops(f, r.get('ep_device'))} | {tflops(f, r.get('torch_fwd_bwd'))} | "
            f"{tflops(f, r.get('torch_bwd'))} | "
            f"{ratio(dev or r.get('ep_host'), r.get('torch_fwd_bwd'))} | "
            f"{ratio(dev or r.get('ep_host'), r.get('torch_bwd'))} | "
            f"{fmt_err(r.get('err_device'))} | {fmt_err(r.get('err_host'))} |")
    return lines


def overhead_lines(o) -> list[str]:
    if not o:
        return []
    out = [f"{o['config']}, {o['io']} I/O; target: outside MLX eval <= "
           f"{o['target']:.0%} of the run's wall time."]
    if "error" in o:
        return out + [f"- FAILED: {o['error']}"]
    for key, label in (("report", "JSON report (times.eval diffed per run)"),
                       ("trace", "trace (mlx.eval spans per mlx.subgraph)")):
        r = o.get(key) or {}
        if "outside_eval_median" in r:
            verdict = "met" if r["outside_eval_median"] <= o["target"] else "NOT met"
            line = (f"- {label}: outside eval {r['outside_eval_median']:.1%} median "
                    f"(min {r['outside_eval_min']:.1%}, max {r['outside_eval_max']:.1%}) over "
                    f"{r['runs']} runs, {verdict}; wall {r['wall_median_s'] * 1e3:.2f} ms, "
                    f"eval {r['eval_median_s'] * 1e3:.2f} ms")
            if "compute_median_s" in r:
                line += (f", EP Compute {r['compute_median_s'] * 1e3:.2f} ms (in Compute, not "
                         f"eval: {r['ep_not_eval_median_s'] * 1e3:.3f} ms; outside Compute: "
                         f"{r['outside_ep_median_s'] * 1e3:.3f} ms)")
            if "copy_median_s" in r:
                line += (f"; copy {r['copy_median_s'] * 1e3:.3f} ms, translate "
                         f"{r['translate_median_s'] * 1e3:.3f} ms, compile "
                         f"{r['compile_median_s'] * 1e3:.3f} ms, queue "
                         f"{r['queue_median_s'] * 1e3:.3f} ms, other "
                         f"{r.get('other_median_s', 0) * 1e3:.3f} ms (medians of each)")
            out.append(line)
        elif r:
            out.append(f"- {label}: FAILED: {r.get('error', '?')}")
    p = o.get("plain") or {}
    if "median_s" in p:
        est = p.get("outside_eval_est")
        out.append(f"- no diagnostics: wall {p['median_s'] * 1e3:.2f} ms median over {p['runs']}"
                   + (f"; with the report's eval median, outside eval ~{est:.1%}"
                      if est is not None else "")
                   + f"; {o['flops'] / p['median_s'] / 1e12:.2f} TFLOP/s")
    elif p:
        out.append(f"- no diagnostics: FAILED: {p.get('error', '?')}")
    return out


def plot(data, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(2, 3, figsize=(18, 10))
    att = data.get("attention", [])
    series = (("ep_device", "-o", "EP device I/O", "tab:blue"),
              ("ep_host", "--o", "EP host I/O", "tab:cyan"),
              ("torch_fwd_bwd", "-s", "torch fwd+bwd", "tab:red"),
              ("torch_bwd", ":s", "torch bwd only", "tab:orange"))
    for i, form in enumerate(("plain", "recompute")):
        for j, causal in enumerate((0, 1)):
            ax = axes[i][j]
            rs = [r for r in att if r["form"] == form and r["causal"] == causal]
            for key, style, label, color in series:
                pts = [(r["s"], r["flops"] / r[key]["median_s"] / 1e12) for r in rs
                       if (r.get(key) or {}).get("median_s")]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label,
                            color=color)
            ax.set_xscale("log", base=2)
            sizes = sorted({r["s"] for r in rs})
            if sizes:
                ax.set_xticks(sizes)
                ax.set_xticklabels([str(x) for x in sizes])
            ax.set_ylim(bottom=0)
            ax.set_xlabel("S (Sq = Sk)")
            ax.set_ylabel("TFLOP/s (10*B*H*S^2*D, /2 causal)")
            ax.set_title(f"AttentionVJP{'Recompute' if form == 'recompute' else ''} "
                         f"{'causal' if causal else 'non-causal'}")
            ax.grid(True, which="both", alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=8)
    ax = axes[0][2]
    rows = data.get("models", [])
    keys = (("cpu", "ORT CPU"), ("ep_host", "EP host I/O"), ("ep_device", "EP device I/O"))
    width = 0.25
    for k, (key, label) in enumerate(keys):
        xs, ys = [], []
        for i, r in enumerate(rows):
            c = r.get(key) or {}
            if c.get("median_s"):
                xs.append(i + (k - 1) * width)
                ys.append(c["median_s"] * 1e3)
        if xs:
            ax.bar(xs, ys, width, label=label)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["model"] for r in rows], rotation=15, fontsize=7, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("median ms per run")
    ax.set_title("models")
    if rows:
        ax.legend(fontsize=8)
    ax = axes[1][2]
    o = data.get("overhead") or {}
    for key, style, label in (("report", "-o", "report"), ("trace", "-s", "trace")):
        r = o.get(key) or {}
        if r.get("per_run"):
            ax.plot([100 * (p["wall_s"] - p["eval_s"]) / p["wall_s"] for p in r["per_run"]],
                    style, label=label)
    ax.axhline(100 * TARGET_OUTSIDE_EVAL, color="red", ls="--", label="target")
    ax.set_xlabel("run")
    ax.set_ylabel("% of wall time outside MLX eval")
    ax.set_title(o.get("config", "outside MLX eval"), fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle(f"ortmlx on {data['gpu']} - {data['date']}", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def strip_tracebacks(x):
    if isinstance(x, dict):
        return {k: strip_tracebacks(v) for k, v in x.items() if k != "traceback"}
    if isinstance(x, list):
        return [strip_tracebacks(v) for v in x]
    return x


def write_outputs(data: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    base = out / "gpu_models"
    base.with_suffix(".json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    has_plot = plot(data, base.with_suffix(".png"))
    v, st = data["versions"], data["settings"]
    a = data["attention_settings"]
    md = [
        "# ortmlx on the GPU: models and AttentionVJP vs ORT CPU and torch",
        "",
        f"Command: `{data['command']}` ({data['elapsed_s'] / 60:.1f} min)",
        "",
        f"Date: {data['date']}",
        "",
        f"GPU: {data['gpu']}; host CPU: {data['cpu']}",
        "",
        f"Versions: onnxruntime {v['onnxruntime']}; torch {v.get('torch')}; MLX {v['mlx']} "
        f"(backend {v['mlx_backend']}, {v.get('libmlx')}); ortmlx {v['ortmlx']}; "
        f"onnx {v.get('onnx', '?')}; numpy {v['numpy']}; Python {v['python']}",
        "",
        f"EP devices: {'; '.join(v['ep_devices'])}",
        "",
        f"EP session as its report states it: {fmt_backend(st.get('ep_report'))}",
        "",
        f"Settings: MLX_ENABLE_TF32={st['MLX_ENABLE_TF32']}; EP variables "
        f"{st['ep_env'] or 'none'}; device I/O: {st['device_io']} (inputs made by "
        f"{st['device_upload'] or '-'}; IOBinding.synchronize_outputs after each run: "
        f"{st['iobinding_synchronize_outputs']}); torch: {st.get('torch_tf32', '-')}; "
        f"warm-up {st['warmup']} runs (the first, which compiles, is recorded as first_s in the "
        f"JSON), then the median of {st['repeats']} timed runs (a cell faster than that runs "
        f"on until {MIN_CELL_S} s, at most {MAX_RUNS} runs; a slow one stops after "
        f"{st['max_cell_s']} s, at least 3 runs; the JSON has each cell's count); "
        f"seed {st['seed']}.",
        "",
    ]
    if data.get("complete") is False:
        md += ["**Incomplete run**: the process stopped before the end; these are the cells it "
               "had measured (rendered with --report-only).", ""]
    if data["notes"]:
        md += ["Notes from this run:", ""] + [f"- {n}" for n in data["notes"]] + [""]
    md += [
        "## 1. Models: ORT CPU EP vs MLX EP (host I/O, device I/O)",
        "",
        "Host I/O: `sess.run` with numpy inputs and outputs (the EP's host<->device copies are "
        "in the time). Device I/O: inputs uploaded once into the EP's device memory and "
        "outputs pre-allocated there, bound with IOBinding; only `run_with_iobinding` is "
        "timed. `on EP`: nodes the EP ran / nodes of ORT's optimised graph (from a separate "
        "session with the report, so the timed sessions write no report). Speed columns are "
        "ORT CPU time / EP time (> 1: the EP is faster). Diffs: max |EP - ORT CPU| over all "
        "outputs (TF32 on the MLX side, when on, shows here as ~1e-3). The encoders come from "
        "`ortmlx.models.transformer_encoder` (random weights, seed fixed); --model files get "
        "random inputs (float N(0,1), ints in [0, int_high), dynamic dims from --dim or 1).",
        "",
        *model_table(data.get("models", [])),
        "",
        "## 2. AttentionVJP: EP vs torch eager SDPA (fp32)",
        "",
        f"B{a['b']} H{a['h']} D{a['d']}, rank {a['rank']} ((B, S, H*D) when 3), HQ = HK, "
        "Sq = Sk = S, scale 1/sqrt(D), mask kind 0 (Mask (1,) bool, ignored), fresh N(0,1) data "
        "per cell. Plain form: Y is torch's fp32 forward output on the same data (so both sides "
        "differentiate the same Y); the Recompute form recomputes Y inside the EP. torch: "
        "`scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1/sqrt(D))` under "
        "`sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION)` (memory-efficient, O(S) memory) on views "
        "of the contract-layout tensors; `torch f+b` times forward + "
        "`torch.autograd.grad(y, (q, k, v), dY)`, `torch bwd` the backward alone "
        "(`retain_graph=True` on one forward), synchronised with torch.cuda.synchronize(). "
        "TFLOP/s: 10*B*H*S^2*D for every column (the backward's count, halved when causal; the "
        "forward that torch f+b and the Recompute form also run is not counted). EP/torch: "
        "torch time / EP time, device I/O (host I/O when device I/O is missing); > 1: the EP "
        "is faster. The fair pairing is plain form vs `torch bwd` (both are given the forward's "
        "output; torch also keeps its log-sum-exp, the EP recomputes it) and Recompute vs "
        "`torch f+b`. rel L2: max over dQ/dK/dV of ||EP - ref|| / ||ref||, ref = "
        "torch's gradients (the float64 numpy reference when torch is missing and S is small). "
        "EP path: the contract path the EP's report names (dense/tiled/native).",
        "",
        *attention_table(data.get("attention", [])),
        "",
        "## 3. Time outside MLX's evaluation",
        "",
        "Per run: (wall time of `run_with_iobinding` - MLX eval time) / wall time. Eval from "
        "the EP's JSON report (`times.eval`, cumulative, read between runs: the report is "
        "rewritten inside each Compute, so its file write counts as outside-eval time) and from "
        "the trace (`mlx.eval` spans inside `mlx.subgraph` spans; written at session end). The "
        "`no diagnostics` line times a session without report or trace.",
        "",
        *overhead_lines(data.get("overhead")),
        "",
    ]
    if has_plot:
        md += [f"![attention TFLOP/s, models, outside-eval share]({base.with_suffix('.png').name})",
               ""]
    base.with_suffix(".md").write_text("\n".join(md))


def fmt_backend(b) -> str:
    if not b:
        return "no report read"
    if b.get("backend") is None:
        return "(this EP build's report names no backend)"
    if b.get("backend") != "gpu":
        return f"backend {b.get('backend')}, {b.get('io')} I/O"
    return (f"backend gpu ({b.get('device') or '?'}), {b.get('io')} I/O, "
            f"{'TF32' if b.get('tf32') else 'exact fp32'} matmuls")


def print_summary(data: dict, out: Path) -> None:
    print()
    print(f"== {data['gpu']} | ORT {data['versions']['onnxruntime']} | MLX "
          f"{data['versions']['mlx']} ({data['versions']['mlx_backend']}) | torch "
          f"{data['versions'].get('torch')} | EP: {fmt_backend(data['settings'].get('ep_report'))}"
          f" | MLX_ENABLE_TF32={data['settings']['MLX_ENABLE_TF32']}, "
          f"EP env {data['settings']['ep_env'] or '-'} | device I/O: "
          f"{data['settings']['device_io']}")
    for n in data["notes"]:
        print("note:", n)
    if data.get("models"):
        print("\n-- models (ms; speed = CPU time / EP time)")
        print("\n".join(model_table(data["models"])))
    if data.get("attention"):
        print("\n-- AttentionVJP (ms, TFLOP/s; EP/torch = torch time / EP time)")
        print("\n".join(attention_table(data["attention"])))
    if data.get("overhead"):
        print("\n-- outside MLX eval")
        print("\n".join(overhead_lines(data["overhead"])))
    print(f"\nwrote {out / 'gpu_models.md'}, .json, .png ({data['elapsed_s']:.0f} s)")


# ------------------------------------------------------------------------------------------
# main
# ------------------------------------------------------------------------------------------

def parse_dims(items) -> dict:
    dims = {}
    for it in items or []:
        name, _, value = it.partition("=")
        if not value:
            raise SystemExit(f"--dim {it!r}: expected name=value")
        dims[name] = int(value)
    return dims


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"),
                    help="output folder (default bench/results)")
    ap.add_argument("--quick", action="store_true",
                    help="tiny sizes, 2 repeats: a smoke test (CPU is fine)")
    ap.add_argument("--repeats", type=int, default=None, help="timed runs per cell (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="warm-up runs per cell (>= 2)")
    ap.add_argument("--max-cell-s", type=float, default=8.0,
                    help="stop a cell's timed loop after this many seconds (at least 3 runs)")
    ap.add_argument("--model", action="append", default=[], help="an ONNX model file (repeat)")
    ap.add_argument("--dim", action="append", default=[],
                    help="name=value for a symbolic input dim of --model files (default 1)")
    ap.add_argument("--int-high", type=int, default=16,
                    help="integer inputs of --model files are drawn from [0, int_high)")
    ap.add_argument("--no-builtin-models", action="store_true",
                    help="skip the built-in encoders")
    ap.add_argument("--skip-models", action="store_true")
    ap.add_argument("--skip-attention", action="store_true")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--sizes", type=int, nargs="+", default=None,
                    help="AttentionVJP S values (default 1024 2048 4096 8192)")
    ap.add_argument("--forms", nargs="+", default=["plain", "recompute"],
                    choices=["plain", "recompute"])
    ap.add_argument("--causal", type=int, nargs="+", default=[0, 1], choices=[0, 1])
    ap.add_argument("--b", type=int, default=None, help="AttentionVJP batch (default 2)")
    ap.add_argument("--h", type=int, default=None, help="AttentionVJP heads (default 16)")
    ap.add_argument("--d", type=int, default=None, help="AttentionVJP head size (default 128)")
    ap.add_argument("--rank", type=int, default=3, choices=[3, 4],
                    help="contract layout: 3 (B, S, H*D), 4 (B, H, S, D)")
    ap.add_argument("--overhead-s", type=int, default=None, help="S of part 3 (default 4096)")
    ap.add_argument("--overhead-runs", type=int, default=None, help="runs of part 3 (default 20)")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch columns")
    ap.add_argument("--tf32", action="store_true",
                    help="TF32 fp32 matmuls in MLX (sets ONNXRUNTIME_EP_MLX_TF32=1 before the EP "
                         "loads; default: the EP's exact fp32)")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the .md/.png from OUT/gpu_models.json of an earlier run")
    ap.add_argument("--cpu-binding", action="store_true",
                    help="without a GPU EP device, run the device-I/O columns with IOBinding on "
                         "CPU memory (tests the plumbing only)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    q = args.quick
    args.repeats = args.repeats or (2 if q else 10)
    args.warmup = max(2, args.warmup)
    args.b = args.b or (1 if q else 2)
    args.h = args.h or (4 if q else 16)
    args.d = args.d or 128
    args.sizes = args.sizes or ([128, 256] if q else [1024, 2048, 4096, 8192])
    args.overhead_s = args.overhead_s or (256 if q else 4096)
    args.overhead_runs = args.overhead_runs or (3 if q else 20)
    args.dims = parse_dims(args.dim)
    out = Path(args.out)
    if args.report_only:
        data = json.loads((out / "gpu_models.json").read_text())
        write_outputs(data, out)
        print_summary(data, out)
        return 0

    started = time.time()
    env = Env(args)
    cmd_env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in
                       ("MLX_ENABLE_TF32", "ONNXRUNTIME_EP_MLX_TF32") if k in os.environ
                       and not (args.tf32 and k == "ONNXRUNTIME_EP_MLX_TF32"))
    data = {
        "command": (cmd_env + " " if cmd_env else "") + "python3 " + " ".join(
            shlex.quote(x) for x in [os.path.relpath(sys.argv[0], os.getcwd())] + sys.argv[1:]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": gpu_name(env), "cpu": cpu_name(),
        "attention_settings": {"b": args.b, "h": args.h, "d": args.d, "rank": args.rank,
                               "sizes": args.sizes},
        "models": [], "attention": [], "overhead": None,
    }
    data["versions"] = versions(env)
    print(f"ortmlx gpu bench: GPU {data['gpu']}; device I/O {env.device_io or 'skipped'}; "
          f"torch {'on' if env.torch else 'off'}; MLX {data['versions']['mlx']} "
          f"({data['versions']['mlx_backend']})", flush=True)

    def finish(complete: bool) -> dict:
        """The data as written: tracebacks moved to one list. Written after every cell too
        (complete: false), so a crash (e.g. an abort inside a native library) leaves the cells
        measured so far; `--report-only` renders them."""
        data["elapsed_s"] = time.time() - started
        data["settings"] = settings(env)
        data["notes"] = list(dict.fromkeys(env.notes))
        data["complete"] = complete
        tracebacks = []

        def collect(x):
            if isinstance(x, dict):
                if "traceback" in x:
                    tracebacks.append(x["traceback"])
                for v in x.values():
                    collect(v)
            elif isinstance(x, list):
                for v in x:
                    collect(v)
        collect({k: v for k, v in data.items() if k != "tracebacks"})
        stripped = strip_tracebacks(data)
        stripped["tracebacks"] = tracebacks
        if not complete:
            out.mkdir(parents=True, exist_ok=True)
            (out / "gpu_models.json").write_text(json.dumps(stripped, indent=1, default=str))
        return stripped

    if not args.skip_models:
        todo = [] if args.no_builtin_models else list(builtin_models(q))
        for name, kw in todo:
            try:
                model, feeds = ortmlx_models.transformer_encoder(seed=args.seed, **kw)
                row = bench_model(env, name, model, feeds, args)
            except Exception as e:  # noqa: BLE001
                row = {"model": name, "cpu": failure(e)}
            data["models"].append(row)
            print(model_table([row])[-1], flush=True)
            finish(False)
        for path in args.model:
            try:
                row = bench_model(env, os.path.basename(path), os.path.abspath(path), None, args)
            except Exception as e:  # noqa: BLE001
                row = {"model": os.path.basename(path), "cpu": failure(e)}
            row["path"] = os.path.abspath(path)
            data["models"].append(row)
            print(model_table([row])[-1], flush=True)
            finish(False)

    # Part 3 before the AttentionVJP grid: its largest sizes are the likeliest to fail hard.
    if not args.skip_overhead:
        try:
            data["overhead"] = bench_overhead(env, args)
        except Exception as e:  # noqa: BLE001
            data["overhead"] = {"config": "overhead", "io": "-", "target": TARGET_OUTSIDE_EVAL,
                                "error": failure(e)["error"]}
        print("\n".join(overhead_lines(data["overhead"])), flush=True)
        finish(False)

    if not args.skip_attention:
        for form in args.forms:
            for causal in args.causal:
                for s in args.sizes:
                    try:
                        row = bench_attention_cell(env, form, causal, args.b, args.h, s, args.d,
                                                   args.rank, args)
                    except Exception as e:  # noqa: BLE001
                        row = {"form": form, "causal": causal, "s": s,
                               "flops": attn_flops(args.b, args.h, s, args.d, causal),
                               "ep_host": failure(e)}
                    data["attention"].append(row)
                    print(attention_table([row])[-1], flush=True)
                    finish(False)

    final = finish(True)
    write_outputs(final, out)
    print_summary(final, out)
    if final["tracebacks"]:
        print(f"\n{len(final['tracebacks'])} cell(s) failed; first traceback (all in the JSON):")
        print(final["tracebacks"][0][-1500:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
