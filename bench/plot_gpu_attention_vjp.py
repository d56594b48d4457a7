#!/usr/bin/env python3
"""The PNG of bench/gpu_attention_vjp.py: TFLOP/s per shape and causal setting, the EP's fused
kernels next to each torch backward the run timed on the same tensors (log scale; backward
FLOPs = 10 * B * HQ * S^2 * D, halved when causal). Reads the bench's JSON only, so it runs
wherever matplotlib is installed (the bench calls it after a run when it can):

    python3 bench/plot_gpu_attention_vjp.py RUN.json [--tf32 TF32_RUN.json] --png OUT.png

RUN.json: a run in the EP's exact fp32 mode (its torch_<backend>_tflops columns are plotted);
--tf32: a run of the same shapes with the EP's --tf32 mode, added as one more series.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# torch backends of the bench (--torch-backends) and their legend labels.
TORCH_SERIES = [("efficient", "torch efficient fp32"), ("math", "torch math fp32"),
                ("math_tf32", "torch math TF32"), ("flash_bf16", "torch flash bf16"),
                ("cudnn_bf16", "torch cuDNN bf16")]


def key(row: dict) -> tuple:
    return tuple(row[k] for k in ("b", "hq", "hk", "s", "d", "causal"))


def ep_tflops(row: dict) -> float | None:
    ep = row.get("ep")
    if not isinstance(ep, dict) or not ep.get("median_s"):
        return None
    return row["flops"] / ep["median_s"] / 1e12


def fused_rows(res: dict) -> list[dict]:
    """The plain form's cuda_fused cells that timed, in the run's order."""
    return [r for r in res.get("rows", []) if r.get("form") == "plain" and
            r.get("path") == "cuda_fused" and ep_tflops(r) is not None]


def plot(res: dict, png: Path, tf32_res: dict | None = None) -> bool:
    """Writes the PNG; False where matplotlib is missing or nothing timed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = fused_rows(res)
    if not rows:
        return False
    mode = "TF32" if "--tf32" in res.get("command", "") else "fp32-accurate"
    series = [(f"EP {mode}", [ep_tflops(r) for r in rows])]
    if tf32_res:
        tf = {key(r): ep_tflops(r) for r in fused_rows(tf32_res)}
        series.append(("EP TF32", [tf.get(key(r)) for r in rows]))
    for name, label in TORCH_SERIES:
        values = [r.get(f"torch_{name}_tflops") for r in rows]
        if any(v for v in values):
            series.append((label, values))
    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(rows) + 2), 4.8))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(rows))]
        ax.bar([x for x, v in zip(xs, values) if v], [v for v in values if v], width,
               label=label)
    ax.set_yscale("log")
    ax.set_ylabel("TFLOP/s (backward, log scale)")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"B{r['b']} H{r['hq']}/{r['hk']}\nS{r['s']} D{r['d']}"
                        f"{' causal' if r['causal'] else ''}" for r in rows], fontsize=7)
    ax.set_title(f"AttentionVJP backward, {res.get('gpu', 'GPU')} ({res.get('date', '')})",
                 fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="a gpu_attention_vjp.json of an exact fp32 run")
    ap.add_argument("--tf32", help="a gpu_attention_vjp.json of a --tf32 run of the same shapes")
    ap.add_argument("--png", required=True)
    args = ap.parse_args()
    res = json.loads(Path(args.json).read_text())
    tf32 = json.loads(Path(args.tf32).read_text()) if args.tf32 else None
    if not plot(res, Path(args.png), tf32):
        print("nothing plotted (matplotlib missing, or no timed cuda_fused cell)")
        return 1
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
