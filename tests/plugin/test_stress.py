"""Stress (issue 8): many session lifetimes, concurrent sessions and one session shared by 8
threads, with resident memory (RSS) and MLX's active memory reported before and after. The figures
are printed at the end of the pytest run (tests/plugin/conftest.py)."""

from __future__ import annotations

import gc
import threading

import numpy as np

from ortmlx.testing import EpRun, run_cpu
from tests.engine.util import dynamic_chain_model
from tests.plugin.conftest import STRESS_FIGURES

MiB = 1024 * 1024


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _one_session_run(x) -> dict:
    run = EpRun(dynamic_chain_model(), strict=True)
    try:
        run.run({"x": x})
        return run.report().mlx_memory()
    finally:
        run.close()
        del run


def test_many_session_lifetimes_keep_memory_flat(rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    for _ in range(20):  # warm-up: ORT's and MLX's one-time allocations, compiled kernels
        _one_session_run(x)
    gc.collect()
    rss0, mlx0 = _rss(), _one_session_run(x)["active"]
    cycles = 300
    for _ in range(cycles):
        mem = _one_session_run(x)
    gc.collect()
    rss1, mlx1 = _rss(), mem["active"]
    STRESS_FIGURES.append(
        f"{cycles} session create/run/destroy cycles: RSS {rss0 / MiB:.1f} -> {rss1 / MiB:.1f} MiB, "
        f"MLX active {mlx0 / MiB:.2f} -> {mlx1 / MiB:.2f} MiB")
    assert rss1 - rss0 < 40 * MiB, (rss0, rss1)
    assert mlx1 <= mlx0 + 1 * MiB, (mlx0, mlx1)


def test_shared_session_on_8_threads_is_bitwise_stable(rng):
    run = EpRun(dynamic_chain_model(), strict=True)
    inputs = [rng.standard_normal((n, 8)).astype(np.float32) for n in (1, 3, 8, 17)]
    want = [run.run({"x": x})[0] for x in inputs]
    rss0, mlx0 = _rss(), run.report().mlx_memory()["active"]
    errors: list[str] = []

    def worker(seed):
        for i in range(100):
            k = (seed + i) % len(inputs)
            got = run.run({"x": inputs[k]})[0]
            if not np.array_equal(got, want[k]):
                errors.append(f"thread {seed} run {i}: differs")
                return

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rss1, mlx1 = _rss(), run.report().mlx_memory()["active"]
    run.close()
    STRESS_FIGURES.append(
        f"1 session, 8 threads x 100 runs: RSS {rss0 / MiB:.1f} -> {rss1 / MiB:.1f} MiB, "
        f"MLX active {mlx0 / MiB:.2f} -> {mlx1 / MiB:.2f} MiB, {len(errors)} differing runs")
    assert not errors, errors[:3]
    assert mlx1 <= mlx0 + 1 * MiB, (mlx0, mlx1)


def test_8_concurrent_sessions_match_ort_cpu(rng):
    models = [dynamic_chain_model(weight_seed=s) for s in range(8)]
    x = rng.standard_normal((5, 8)).astype(np.float32)
    want = [run_cpu(m, {"x": x})[0] for m in models]
    rss0 = _rss()
    errors: list[str] = []

    def worker(i):
        run = EpRun(models[i], strict=True)
        try:
            for _ in range(50):
                got = run.run({"x": x})[0]
                if not np.allclose(got, want[i], rtol=1e-5, atol=1e-6):
                    errors.append(f"session {i} differs from ORT CPU")
                    return
        finally:
            run.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    rss1 = _rss()
    STRESS_FIGURES.append(f"8 sessions on 8 threads x 50 runs: RSS {rss0 / MiB:.1f} -> "
                          f"{rss1 / MiB:.1f} MiB, {len(errors)} mismatches")
    assert not errors, errors
