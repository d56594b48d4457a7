"""A fuzz worker process: reads tasks (JSON lines on stdin: family, batch, size, and optionally
the indices of the cases to run), rebuilds the batch, runs it (one session pair, split only
where ORT CPU rejects cases) and writes one JSON line per task with a record per case. Before
each session run it writes {"phase": "cpu"|"ep"}, so the parent knows which engine was running
when the process died. Its own stdout (the protocol) is a private copy; fd 1 goes to stderr so
that prints from native code cannot corrupt it.

Alone, for one case in this process (e.g. under a debugger):
    python -m tests.fuzz.worker --case o12_34
"""

from __future__ import annotations

import json
import os
import resource
import sys
import traceback

# Hostile shapes must fail to allocate, not take the machine's memory (the EP or ORT CPU may
# try to materialise them): a worker's address space is capped.
ADDRESS_SPACE_CAP = int(os.environ.get("ORTMLX_FUZZ_MEM_CAP_GB", "12")) << 30


def run_task(task: dict) -> list[dict]:
    from .batches import make_batch
    from .fuzzlib import Stats, record, run_cases

    cases, opset, opts = make_batch(task["family"], task["n"], task["size"])
    only = task.get("only")
    if only is not None:
        cases = [cases[i] for i in only]
    stats = Stats()
    verdicts = run_cases(cases, opset, opts, stats)
    return [record(c, v, opset) for c, v in zip(cases, verdicts)], stats.sessions


def _cap_memory():
    # ORTMLX_FUZZ_MEM_CAP_GB=0 turns the cap off: the GPU suite does, since a CUDA process
    # reserves far more address space than it uses and would fail to initialise under it.
    if ADDRESS_SPACE_CAP == 0:
        return
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = ADDRESS_SPACE_CAP if hard == resource.RLIM_INFINITY else min(hard, ADDRESS_SPACE_CAP)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ValueError, OSError):
        pass


def serve():
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    _cap_memory()
    import ortmlx

    from .fuzzlib import PHASE_HOOK

    ortmlx.register_execution_provider_library()

    def phase(what, cids):
        proto.write(json.dumps({"phase": what, "cids": cids if len(cids) == 1 else []}) + "\n")
        proto.flush()

    PHASE_HOOK[0] = phase
    proto.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        task = json.loads(line)
        try:
            recs, sessions = run_task(task)
            msg = {"result": recs, "sessions": sessions}
        except Exception:
            msg = {"error": traceback.format_exc()[-3000:]}
        proto.write(json.dumps(msg) + "\n")
        proto.flush()


def run_one(cid: str):
    import ortmlx

    from .batches import parse_cid

    family, n, i = parse_cid(cid)
    ortmlx.register_execution_provider_library()
    recs, _ = run_task({"family": family, "n": n, "size": i + 1, "only": [i]})
    for r in recs:
        print(json.dumps(r, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("ONNXRUNTIME_EP_MLX_CPU_CLAIM", "all")
    os.environ.setdefault("ORT_LOGGING_LEVEL", "3")
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        run_one(sys.argv[2])
    else:
        serve()
