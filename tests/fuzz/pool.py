"""The parent side: a pool of worker processes (tests/fuzz/worker.py, one per core by default,
ORTMLX_FUZZ_WORKERS) that run batches; pytest itself never runs a session, so it never dies.

A worker that dies (signal, abort) or exceeds the task timeout (ORTMLX_FUZZ_TIMEOUT seconds) is
replaced, and its task is bisected into halves run as new tasks until the culprits are single
cases: each is reported as "crash" (the EP session was running) or "ort_crash" (ORT CPU's was:
not counted, like any case ORT rejects); a death while the case was generated or its model built
(ONNX's shape inference) is "invalid", not counted either.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def worker_count() -> int:
    return max(1, int(os.environ.get("ORTMLX_FUZZ_WORKERS", os.cpu_count() or 1)))


def task_timeout() -> float:
    return float(os.environ.get("ORTMLX_FUZZ_TIMEOUT", "120"))


class Worker:
    def __init__(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT), str(ROOT / "python")] + [p for p in env.get("PYTHONPATH", "").split(
                os.pathsep) if p])
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz.worker"], cwd=ROOT,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buf = b""
        self.task = None
        self.phase = "start"
        self.started = 0.0

    def send(self, task):
        self.task, self.phase, self.started = task, "generate", time.monotonic()
        self.single = None  # index of the case when the running session has just one
        self.proc.stdin.write((json.dumps(task) + "\n").encode())
        self.proc.stdin.flush()

    def lines(self):
        """Complete lines available now; None at end of file (the process died)."""
        try:
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
        except BlockingIOError:
            chunk = b""
        else:
            if not chunk:
                return None
        self.buf += chunk
        *done, self.buf = self.buf.split(b"\n")
        return [json.loads(x) for x in done if x.strip()]

    def log_tail(self) -> str:
        self.log.seek(0)
        text = self.log.read().decode(errors="replace")
        return " | ".join(text.strip().splitlines()[-3:])[-400:]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


class Pool:
    def __init__(self, n=None):
        self.n = n or worker_count()
        self.idle: list[Worker] = []
        self.spawned = 0

    def _worker(self) -> Worker:
        if self.idle:
            return self.idle.pop()
        self.spawned += 1
        return Worker()

    def close(self):
        for w in self.idle:
            try:
                w.proc.stdin.close()
            except OSError:
                pass
            w.kill()
        self.idle.clear()

    def run(self, next_task, on_records):
        """Runs tasks until next_task() returns None and nothing is in flight. next_task(n_in_
        flight_cases) gives a new task dict (family, n, size, only); on_records(task, records,
        sessions) receives each finished (sub)task's records."""
        sel = selectors.DefaultSelector()
        pending: deque = deque()  # bisection halves, before any new batch
        busy: dict[int, Worker] = {}
        timeout = task_timeout()

        def planned():
            return sum(len(w.task["only"]) if w.task.get("only") is not None else w.task["size"]
                       for w in busy.values()) + sum(
                len(t["only"]) if t.get("only") is not None else t["size"] for t in pending)

        def fail(w: Worker, why: str):
            sel.unregister(w.proc.stdout)
            del busy[w.proc.pid]
            task, phase = w.task, w.phase
            detail = f"{why} while {phase} ({w.log_tail()})"
            w.kill()
            only = task.get("only")
            if only is None:
                only = list(range(task["size"]))
            if w.single is not None and w.single in only and len(only) > 1:
                # The process died in a session of one case: that one is the culprit; the
                # others run again.
                on_records(task, [crash_record(task, w.single, phase, detail)], 0)
                pending.appendleft(dict(task, only=[i for i in only if i != w.single]))
                return
            if len(only) == 1:
                on_records(task, [crash_record(task, only[0], phase, detail)], 0)
                return
            half = len(only) // 2
            for part in (only[:half], only[half:]):
                pending.appendleft(dict(task, only=part))

        try:
            while True:
                while len(busy) < self.n:
                    task = pending.popleft() if pending else next_task(planned())
                    if task is None:
                        break
                    w = self._worker()
                    try:
                        w.send(task)
                    except (BrokenPipeError, OSError):
                        w.task = task
                        busy[w.proc.pid] = w
                        sel.register(w.proc.stdout, selectors.EVENT_READ, w)
                        fail(w, "the worker exited before the task")
                        continue
                    busy[w.proc.pid] = w
                    sel.register(w.proc.stdout, selectors.EVENT_READ, w)
                if not busy:
                    break
                now = time.monotonic()
                wait = max(0.05, min(w.started + timeout - now for w in busy.values()))
                for key, _ in sel.select(wait):
                    w = key.data
                    got = w.lines()
                    if got is None:
                        code = w.proc.wait()
                        fail(w, f"exit status {code}" if code >= 0 else f"signal {-code}")
                        continue
                    for msg in got:
                        if "phase" in msg:
                            w.phase = msg["phase"]
                            cids = msg.get("cids") or []
                            w.single = int(cids[0].rsplit("_", 1)[1]) if cids else None
                        elif "error" in msg:
                            raise RuntimeError(f"fuzz worker failed on {w.task}:\n{msg['error']}")
                        elif "result" in msg:
                            sel.unregister(w.proc.stdout)
                            del busy[w.proc.pid]
                            task, w.task = w.task, None
                            self.idle.append(w)
                            on_records(task, msg["result"], msg.get("sessions", 0))
                for w in list(busy.values()):
                    if time.monotonic() - w.started > timeout:
                        fail(w, f"timeout ({timeout:.0f} s)")
        except BaseException:
            for w in busy.values():
                w.kill()
            raise
        finally:
            sel.close()


def crash_record(task, index, phase, detail) -> dict:
    """The record of a case whose process died, rebuilt here (generating runs no session)."""
    from .batches import make_batch
    from .fuzzlib import Verdict, record

    cases, opset, _ = make_batch(task["family"], task["n"], index + 1)
    if phase in ("generate", "build"):
        # No session was running: ONNX itself died (seen: its shape inference on
        # LayerNormalization with axis 2^31). No reference, so not counted, like a case ONNX
        # rejects with an exception.
        return record(cases[index], Verdict("invalid", f"ONNX crashed: {detail}"), opset)
    status = "ort_crash" if phase == "cpu" else "crash"
    return record(cases[index], Verdict(status, detail), opset)


_POOL: Pool | None = None


def pool() -> Pool:
    global _POOL
    if _POOL is None:
        _POOL = Pool()
    return _POOL


def close_pool():
    global _POOL
    if _POOL is not None:
        _POOL.close()
        _POOL = None
