"""Builds a harness of hand-written CUDA kernels for the host emulation of tools/avjp_cuda_emu
(emu.h; emu_build.py) for the tests beside this file, or skips without g++."""

from __future__ import annotations

import ctypes
import os
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "avjp_cuda_emu"))
import emu_build  # noqa: E402  (tools/avjp_cuda_emu/emu_build.py)


def build_or_skip(name: str, harness: str, kernels: str, entry: str) -> ctypes.CDLL:
    """kernels: the .cu file under src/ortmlx/ops the harness includes; entry: its C function."""
    if shutil.which("g++") is None:
        pytest.skip("the CUDA kernel emulation needs g++")
    lib = emu_build.build(name, harness, [os.path.join(emu_build.SRC, kernels)])
    getattr(lib, entry).restype = ctypes.c_int
    return lib
