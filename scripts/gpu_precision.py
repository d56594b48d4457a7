"""Measured error of each fp32 mode on the GPU (part 'precision' of scripts/gpu_suite.sh): the demo
encoder, a larger encoder and an MLP, each on the EP in exact mode (default) and with
ONNXRUNTIME_EP_MLX_TF32=1, against ORT's CPU EP. MLX reads its TF32 switch once per process, so each
mode runs in a child process. Prints a Markdown table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CASES = {
    "demo encoder B2 S16 E64 H4 L2": ("transformer_encoder", {}),
    "encoder B4 S128 E512 H8 F2048 L2": ("transformer_encoder",
                                         {"batch": 4, "seq": 128, "embed": 512, "heads": 8,
                                          "ffn": 2048}),
    "MLP B64 (512, 2048, 2048, 10)": ("mlp", {"batch": 64, "dims": (512, 2048, 2048, 10)}),
}


def child() -> None:
    import numpy as np

    import ortmlx
    from ortmlx import models
    from ortmlx.testing import EpRun, run_cpu

    ortmlx.register_execution_provider_library()
    out = {}
    for label, (fn, kw) in CASES.items():
        model, feeds = getattr(models, fn)(**kw)
        want = run_cpu(model, feeds)[0].astype(np.float64)
        run = EpRun(model, strict=True)
        got = run.run(feeds)[0].astype(np.float64)
        tf32 = run.report().raw.get("tf32")
        run.close()
        out[label] = {"max_abs": float(np.abs(got - want).max()),
                      "rel_l2": float(np.linalg.norm(got - want) / np.linalg.norm(want)),
                      "tf32": tf32}
    print(json.dumps(out))


def main() -> int:
    rows = {}
    for mode in ("0", "1"):
        env = dict(os.environ, ONNXRUNTIME_EP_MLX_TF32=mode)
        env.pop("MLX_ENABLE_TF32", None)
        r = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True,
                           text=True, check=False)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            return 1
        rows[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    print("| model | exact fp32: max abs / rel L2 | TF32: max abs / rel L2 |")
    print("|---|---|---|")
    for label in CASES:
        e, t = rows["0"][label], rows["1"][label]
        assert e["tf32"] is False and t["tf32"] is True, (e, t)
        print(f"| {label} | {e['max_abs']:.2e} / {e['rel_l2']:.2e} | "
              f"{t['max_abs']:.2e} / {t['rel_l2']:.2e} |")
    return 0


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        sys.exit(main())
