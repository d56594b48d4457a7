"""How speech_rnn (tests/corpus: Linear, bidirectional LSTM, GRU, Linear) scales with its
sequence length on MLXExecutionProvider, and an A/B of two builds of the library in one run.

    .venv/bin/python bench/recurrent.py [--steps 10 50 200] [--lib A=path --lib B=path]
        [--runs 30] [--out bench/results/recurrent.md]

For each step count the model is rebuilt (scripts/corpus/build_recurrent.py with T patched,
real random weights) and run in a fresh process per library (the libraries alternate, the
rounds repeat so that load shifts hit both): session creation, first run (trace + compile +
run), the median of later runs (wall clock, and the process's CPU time over all its threads,
which a loaded machine disturbs less), and ORT's CPU EP in the same process; the best of the
rounds is reported. cpu_claim=all, so the
recurrent nodes run on the EP on MLX's CPU backend too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(steps: int, runs: int) -> dict:
    sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, os.path.join(ROOT, "scripts", "corpus"))
    import numpy as np
    import onnxruntime as ort

    import build_recurrent
    import ortmlx
    from ortmlx.testing import cpu_session

    build_recurrent.T = steps
    model = build_recurrent.build()
    rng = np.random.default_rng(0)
    feeds = [{"feats": rng.standard_normal((build_recurrent.B, steps, build_recurrent.F))
              .astype(np.float32)} for _ in range(3)]
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "0")
    ortmlx.append_to_session_options(so, {"cpu_claim": "all"})
    t0 = time.perf_counter()
    sess = ort.InferenceSession(model.SerializeToString(), so)
    create = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = sess.run(None, feeds[0])
    first = time.perf_counter() - t0
    cpu = cpu_session(model)
    want = cpu.run(None, feeds[0])
    err = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want))
    ep, ep_cpu, ref = [], [], []
    for i in range(runs):
        f = feeds[i % len(feeds)]
        t0, c0 = time.perf_counter(), time.process_time()
        sess.run(None, f)
        ep.append(time.perf_counter() - t0)
        ep_cpu.append(time.process_time() - c0)  # all threads: less sensitive to machine load
        t0 = time.perf_counter()
        cpu.run(None, f)
        ref.append(time.perf_counter() - t0)
    return {"create_s": create, "first_s": first, "steady_ms": statistics.median(ep) * 1e3,
            "steady_cpu_ms": statistics.median(ep_cpu) * 1e3,
            "cpu_ms": statistics.median(ref) * 1e3, "max_err": err}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, nargs="+", default=[10, 50, 200])
    ap.add_argument("--lib", action="append", default=[],
                    help="LABEL=path of a libortmlx.so (default: $ORTMLX_LIBRARY)")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--worker", type=int)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.runs)))
        return 0
    libs = [tuple(x.split("=", 1)) for x in args.lib] or \
        [("lib", os.environ.get("ORTMLX_LIBRARY", ""))]
    results: dict = {}
    for _ in range(args.rounds):
        for steps in args.steps:
            for label, path in libs:
                env = dict(os.environ, ORTMLX_LIBRARY=path)
                out = subprocess.run([sys.executable, __file__, "--worker", str(steps), "--runs",
                                      str(args.runs)], env=env, capture_output=True, text=True,
                                     check=True).stdout
                results.setdefault((steps, label), []).append(json.loads(out.splitlines()[-1]))
    lines = ["| steps | library | create s | first run s | later runs ms (wall) | "
             "later runs ms (process CPU) | ORT CPU EP ms | max abs err |",
             "|---|---|---|---|---|---|---|---|"]
    for steps in args.steps:
        for label, _ in libs:
            rs = results[(steps, label)]

            def best(k, rs=rs):
                return min(r[k] for r in rs)  # the least loaded of the rounds

            lines.append(f"| {steps} | {label} | {best('create_s'):.3f} | {best('first_s'):.3f} | "
                         f"{best('steady_ms'):.2f} | {best('steady_cpu_ms'):.2f} | {best('cpu_ms'):.2f} | "
                         f"{max(r['max_err'] for r in rs):.1e} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
