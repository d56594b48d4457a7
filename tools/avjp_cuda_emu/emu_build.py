"""Builds a harness of CUDA kernels for the host emulation (emu.h) into a shared library, once
per version of its sources, and loads it with ctypes. Used by check.py (the AttentionVJP
kernels), tests/ops/test_recurrent_cuda_emu.py (the LSTM/GRU recurrence kernel) and
tests/ops/test_conv_cuda_emu.py (the NCHW -> NHWC kernels)."""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "..", "src", "ortmlx", "ops")


def build(name: str, harness: str, sources: list[str], out_dir: str | None = None) -> ctypes.CDLL:
    """harness: a file in this folder; sources: what it includes (paths), for the hash. The
    library is named by the hash of everything it is built from, so runs of different trees (or
    versions) never share one."""
    harness = os.path.join(HERE, harness)
    flags = ["-std=c++20", "-O2", "-fPIC", "-shared", "-pthread", "-Wno-unknown-pragmas"]
    digest = hashlib.sha1(" ".join(flags).encode())
    for f in [os.path.join(HERE, "emu.h"), harness, *sources]:
        with open(f, "rb") as src:
            digest.update(src.read())
    out = os.path.join(out_dir or tempfile.gettempdir(),
                       f"{name}_{os.getuid()}_{digest.hexdigest()[:12]}.so")
    if not os.path.exists(out):  # built once per version; the rename keeps a parallel run whole
        tmp = f"{out}.{os.getpid()}.tmp"
        subprocess.run(["g++", *flags, "-include", os.path.join(HERE, "emu.h"), "-o", tmp, harness],
                       check=True)
        os.replace(tmp, out)
    return ctypes.CDLL(out)
