"""float32 MatMul / Gemm / Einsum on MLX's CPU backend: MLX's own matmul vs the OpenBLAS primitive
(src/ortmlx/ops/matmul_cpu.h), side by side with ORT's CPU EP.

    .venv/bin/python bench/matmul_cpu.py [--runs 30] [--out bench/results/matmul_cpu.md]

Each case is a small ONNX model with constant weights (as in inference). Three sessions per case
in one process: the EP with MLX's matmul (ORTMLX_INTERNAL_CPU_MATMUL=mlx, set around each of its
runs: nodes are translated, and compiled functions traced, on their first run), the EP with the
OpenBLAS primitive (the default), and ORT's CPU EP; timed interleaved (one run of each per
round), medians of per-round ratios reported.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ortmlx  # noqa: E402
from engine import ep_session, machine, paired_ratio, versions  # noqa: E402
from ortmlx import models  # noqa: E402
from ortmlx.testing import EpRun, cpu_session, make_model  # noqa: E402

SWITCH = "ORTMLX_INTERNAL_CPU_MATMUL"


def typed(graph):
    """The model of `graph`, output type and shape filled in by ONNX shape inference."""
    return onnx.shape_inference.infer_shapes(make_model(graph, opset=21, check=False),
                                             strict_mode=True)


def one_node(op, x_shape, w_shape, attrs=None, bias=None, seed=0):
    """y = op(x, W[, bias]) with W (and bias) constant."""
    rng = np.random.default_rng(seed)
    inits = [onnx.numpy_helper.from_array(rng.standard_normal(w_shape).astype(np.float32), "w")]
    ins = ["x", "w"]
    if bias is not None:
        inits.append(onnx.numpy_helper.from_array(rng.standard_normal(bias).astype(np.float32),
                                                  "bias"))
        ins.append("bias")
    x = h.make_tensor_value_info("x", T.FLOAT, list(x_shape))
    node = h.make_node(op, ins, ["y"], name="node", **(attrs or {}))
    model = typed(h.make_graph([node], op, [x], [onnx.ValueInfoProto(name="y")], inits))
    return model, {"x": rng.standard_normal(x_shape).astype(np.float32)}


def two_inputs(op, a_shape, b_shape, attrs=None, seed=0):
    """y = op(a, b), both activations (e.g. attention scores)."""
    rng = np.random.default_rng(seed)
    a = h.make_tensor_value_info("a", T.FLOAT, list(a_shape))
    b = h.make_tensor_value_info("b", T.FLOAT, list(b_shape))
    node = h.make_node(op, ["a", "b"], ["y"], name="node", **(attrs or {}))
    model = typed(h.make_graph([node], op, [a, b], [onnx.ValueInfoProto(name="y")]))
    return model, {"a": rng.standard_normal(a_shape).astype(np.float32),
                   "b": rng.standard_normal(b_shape).astype(np.float32)}


CASES = [
    ("MatMul (1,128,768) x (768,768)", lambda: one_node("MatMul", (1, 128, 768), (768, 768))),
    ("MatMul (8,64,64) x (64,64)", lambda: one_node("MatMul", (8, 64, 64), (64, 64))),
    ("MatMul (256,512) x (512,1000)", lambda: one_node("MatMul", (256, 512), (512, 1000))),
    ("MatMul (3136,64) x (64,256) [1x1 conv, 56x56]",
     lambda: one_node("MatMul", (3136, 64), (64, 256))),
    ("MatMul (1,12,128,64) x (1,12,64,128) [scores]",
     lambda: two_inputs("MatMul", (1, 12, 128, 64), (1, 12, 64, 128))),
    ("Gemm (32,512) x (1000,512)^T + bias [classifier]",
     lambda: one_node("Gemm", (32, 512), (1000, 512), {"transB": 1}, bias=(1000,))),
    ("Einsum bhqd,bhkd->bhqk (1,12,128,64)",
     lambda: two_inputs("Einsum", (1, 12, 128, 64), (1, 12, 128, 64),
                        {"equation": "bhqd,bhkd->bhqk"})),
    ("encoder B4 S128 E256 H8 FFN1024, 4 layers",
     lambda: models.transformer_encoder(batch=4, seq=128, embed=256, heads=8, ffn=1024,
                                        layers=4)),
]


def run_mlx_matmul(sess, feeds):
    os.environ[SWITCH] = "mlx"
    try:
        return sess.run(None, feeds)
    finally:
        del os.environ[SWITCH]


def nodes_on_ep(model, feeds, mlx_switch):
    """'on EP / total' nodes, from a session with the JSON report."""
    if mlx_switch:
        os.environ[SWITCH] = "mlx"
    run = EpRun(model)
    try:
        run.run(feeds)
        rep = run.report()
        claims = [c for c in rep.raw["claims"].values() if not c.get("superseded")]
        return f"{len(rep.executed_nodes())}/{sum(c['total_nodes'] for c in claims)}"
    finally:
        run.close()
        os.environ.pop(SWITCH, None)


def bench_case(label, build, runs, warmup):
    model, feeds = build()
    rng = np.random.default_rng(1)
    feeds_list = [{k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in feeds.items()}
                  for _ in range(4)]
    mlx_sess, blas_sess, cpu = ep_session(model), ep_session(model), cpu_session(model)
    fns = {
        "mlx": lambda f: run_mlx_matmul(mlx_sess, f),
        "blas": lambda f: blas_sess.run(None, f),
        "cpu": lambda f: cpu.run(None, f),
    }
    outs = {k: fn(feeds)[0] for k, fn in fns.items()}  # first runs: traces with the switch set
    t0 = time.perf_counter()
    fns["mlx"](feeds)
    n = runs if time.perf_counter() - t0 < 0.2 else max(5, runs // 5)
    names = list(fns)
    for i in range(warmup):
        for name in names:
            fns[name](feeds_list[i % 4])
    times = {name: [] for name in names}
    for i in range(n):
        f = feeds_list[i % 4]
        for name in names[i % 3:] + names[:i % 3]:
            t = time.perf_counter()
            fns[name](f)
            times[name].append(time.perf_counter() - t)
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    diff = lambda a, b: float(np.max(np.abs(a.astype(np.float64) - b)))  # noqa: E731
    scale = float(np.max(np.abs(outs["cpu"])))
    return {
        "label": label, "runs": n, "ms": ms,
        "nodes_blas": nodes_on_ep(model, feeds, False),
        "nodes_mlx": nodes_on_ep(model, feeds, True),
        "blas_vs_mlx": paired_ratio(times, "mlx", "blas"),
        "blas_vs_cpu": paired_ratio(times, "cpu", "blas"),
        "mlx_vs_cpu": paired_ratio(times, "cpu", "mlx"),
        "diff_blas": diff(outs["blas"], outs["cpu"]) / scale,
        "diff_mlx": diff(outs["mlx"], outs["cpu"]) / scale,
    }


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "matmul_cpu.md"))
    args = ap.parse_args(argv)
    # Claim every node on MLX's CPU backend (the cpu_claim policy would otherwise leave these to
    # ORT's CPU EP where MLX is slower); an EP without that option ignores the variable.
    os.environ["ONNXRUNTIME_EP_MLX_CPU_CLAIM"] = "all"
    ortmlx.register_execution_provider_library()
    os.environ.pop(SWITCH, None)
    rows = []
    for label, build in CASES:
        print(f"... {label}", file=sys.stderr, flush=True)
        rows.append(bench_case(label, build, args.runs, args.warmup))
    mach, ver = machine(), versions()
    lines = [
        "# float32 matmul on MLX's CPU backend: MLX's matmul vs the OpenBLAS primitive",
        "",
        f"Command: `.venv/bin/python bench/matmul_cpu.py --runs {args.runs} "
        f"--warmup {args.warmup}`  ",
        f"Date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}  ",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in mach.items()) + "  ",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in ver.items()),
        "",
        "Median ms per `session.run` after warm-up (rotating 4 random inputs; weights are",
        "constants). *EP (MLX matmul)* = MLXExecutionProvider with "
        f"`{SWITCH}=mlx` (MLX's matmul:",
        "the mlx-cpu wheel's reference BLAS), *EP (OpenBLAS)* = the default (the OpenBLAS",
        "primitive for float32 on the CPU backend), *ORT CPU* = ORT's CPU EP. All three in one",
        "process, timed interleaved; ratios are medians of per-round ratios (>1: the first is",
        "faster). *rel. diff* = max |EP - ORT CPU| / max |ORT CPU|.",
        "",
        "| case | nodes on EP: OpenBLAS (MLX) | EP (MLX matmul) ms | EP (OpenBLAS) ms | ORT CPU ms "
        "| OpenBLAS vs MLX matmul | OpenBLAS vs ORT CPU | MLX matmul vs ORT CPU "
        "| rel. diff OpenBLAS (MLX) | runs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        m = r["ms"]
        lines.append(
            f"| {r['label']} | {r['nodes_blas']} ({r['nodes_mlx']}) | {m['mlx']:.3f} | {m['blas']:.3f} | "
            f"{m['cpu']:.3f} | {r['blas_vs_mlx']:.1f}x | {r['blas_vs_cpu']:.2f}x | "
            f"{r['mlx_vs_cpu']:.3f}x | {r['diff_blas']:.1e} ({r['diff_mlx']:.1e}) | "
            f"{r['runs']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
