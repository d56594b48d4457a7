"""The concurrency contract (docs/ENGINE.md): Compute may be called from any number of threads, on
one session or many; all MLX work runs on one MLX thread, so results are always correct."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from ortmlx.testing import EpRun, run_cpu
from tests.engine.util import dynamic_chain_model, elementwise_zoo_model


def _hammer(work, n_threads):
    errors = []
    start = threading.Barrier(n_threads)

    def body(i):
        try:
            start.wait()
            work(i)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_several_sessions_in_several_threads():
    models = [dynamic_chain_model(weight_seed=s) for s in range(4)] + [elementwise_zoo_model()]
    runs = [EpRun(m, strict=True, provider_options={"compile_cache_size": 3}) for m in models]

    def work(i):
        rng = np.random.default_rng(100 + i)
        run, model = runs[i], models[i]
        for k in range(25):
            if i < 4:
                feeds = {"x": rng.uniform(-2, 2, (1 + k % 5, 8)).astype(np.float32)}
            else:
                feeds = {"x": rng.uniform(-2, 2, (4, 16)).astype(np.float32),
                         "z": rng.uniform(-2, 2, (4, 16)).astype(np.float32)}
            got = run.run(feeds)[0]
            want = run_cpu(model, feeds)[0]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    try:
        _hammer(work, len(runs))
        for run in runs:
            c = run.report().counters()
            assert c["compute.runs"] == 25 and c.get("compute.error", 0) == 0
            assert c.get("cache.retrace", 0) == 0  # one MLX thread: one compile cache
    finally:
        for run in runs:
            run.close()


def test_one_session_called_from_several_threads():
    model = dynamic_chain_model()
    run = EpRun(model, strict=True)

    def work(i):
        rng = np.random.default_rng(7 * i)
        for k in range(30):
            x = rng.uniform(-2, 2, (1 + (i + k) % 3, 8)).astype(np.float32)
            np.testing.assert_allclose(run.run({"x": x})[0], run_cpu(model, {"x": x})[0],
                                       rtol=1e-5, atol=1e-6)

    try:
        _hammer(work, 6)
        c = run.report().counters()
        assert c["compute.runs"] == 180 and c["compute.compiled"] == 180
        assert c["cache.miss"] == 3 and c["cache.hit"] == 177  # three shapes, compiled once each
    finally:
        run.close()


def test_sessions_created_and_destroyed_while_others_run(rng):
    model = dynamic_chain_model()
    keep = EpRun(model, strict=True)
    x = rng.uniform(-1, 1, (2, 8)).astype(np.float32)
    want = run_cpu(model, {"x": x})[0]

    def work(i):
        for _ in range(10):
            if i == 0:
                tmp = EpRun(model, strict=True)
                np.testing.assert_allclose(tmp.run({"x": x})[0], want, rtol=1e-5, atol=1e-6)
                tmp.close()
                del tmp
            else:
                np.testing.assert_allclose(keep.run({"x": x})[0], want, rtol=1e-5, atol=1e-6)

    try:
        _hammer(work, 3)
    finally:
        keep.close()


# Both hand-off paths of the MLX thread (engine/mlx_thread.h): never spinning (every hand-off
# sleeps on its condition variable) and spinning up to 100 ms (every hand-off is caught by the
# spin). The budget is read once per process, so each runs in a child process.
_SPIN_CHILD = """
import threading, numpy as np
from ortmlx.testing import EpRun, run_cpu
from tests.engine.util import dynamic_chain_model
model = dynamic_chain_model()
run = EpRun(model, strict=True)
errors = []
def work(i):
    rng = np.random.default_rng(11 * i)
    try:
        for k in range(20):
            x = rng.uniform(-2, 2, (1 + (i + k) % 3, 8)).astype(np.float32)
            np.testing.assert_allclose(run.run({"x": x})[0], run_cpu(model, {"x": x})[0],
                                       rtol=1e-5, atol=1e-6)
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
assert not errors, errors
assert run.report().counters()["compute.runs"] == 80
run.close()
print("ok")
"""


@pytest.mark.parametrize("spin_us", ["0", "100000"])
def test_hand_offs_with_and_without_spinning(spin_us):
    env = dict(os.environ, ONNXRUNTIME_EP_MLX_SPIN_US=spin_us)
    r = subprocess.run([sys.executable, "-c", _SPIN_CHILD], env=env, capture_output=True,
                       text=True, timeout=300, cwd=str(Path(__file__).resolve().parents[2]))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
