#!/usr/bin/env python3
"""What ptxas made of a CUDA kernel, without a GPU: per function of a cubin its registers, stack
(spill) bytes and local-memory loads and stores, and per loop (a backward branch in the SASS) its
length and instruction mix, so two builds of a kernel can be compared before any device time is
spent on them (which loop spills, how many shared loads and conversions an mma costs).

    python3 tools/cubin_stats.py build-cuda/attention_vjp_cuda_d128.cubin [--function dkvq]
        [--min-loop 40] [--top 12]

Needs `cuobjdump` (the CUDA toolkit's, or PyPI `nvidia-cuda-cuobjdump`): on PATH, or named by
$CUOBJDUMP. A loop is a backward branch and the address range it closes; nested loops appear
once each (an outer loop's mix counts its inner loops' instructions once, as written, not as
executed). ptxas may place a loop's latch, or a rare path's jump back, after unrelated blocks, so
a long range can take in code outside the loop: read the short inner loops first.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_BRANCH = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")
_RESOURCE = re.compile(r"Function (\S+):\s*$")


def cuobjdump() -> str:
    tool = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not tool:
        sys.exit("cubin_stats: cuobjdump not found (set $CUOBJDUMP or put it on PATH)")
    return tool


def run(args: list[str]) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def resources(cubin: str) -> dict[str, dict[str, int]]:
    """REG, STACK, SHARED, LOCAL... per function, as `cuobjdump --dump-resource-usage` prints."""
    out: dict[str, dict[str, int]] = {}
    name = None
    for line in run([cuobjdump(), "--dump-resource-usage", cubin]).splitlines():
        m = _RESOURCE.search(line)
        if m:
            name = m.group(1)
            continue
        if name and "REG:" in line:
            out[name] = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", line)}
            name = None
    return out


def functions(cubin: str) -> dict[str, list[tuple[int, str]]]:
    """The SASS of each kernel (device functions it calls included): (address, instruction)."""
    out: dict[str, list[tuple[int, str]]] = {}
    current = None
    for line in run([cuobjdump(), "-sass", cubin]).splitlines():
        if "Function :" in line:
            current = line.split("Function :", 1)[1].strip()
            out[current] = []
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            out[current].append((int(m.group(1), 16), m.group(2)))
    return out


def opcode(text: str) -> str:
    words = text.split()
    if words and words[0].startswith("@"):  # a predicate guard
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def loops(sass: list[tuple[int, str]], min_len: int) -> list[tuple[int, int, collections.Counter]]:
    """Every backward branch's body, [target, branch], of at least min_len instructions."""
    index = {addr: i for i, (addr, _) in enumerate(sass)}
    found = []
    for i, (addr, text) in enumerate(sass):
        m = _BRANCH.search(text)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target < addr and target in index and i + 1 - index[target] >= min_len:
            body = sass[index[target] : i + 1]
            found.append((target, addr, collections.Counter(opcode(t) for _, t in body)))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cubin")
    ap.add_argument("--function", default="", help="substring of the function names to show")
    ap.add_argument("--min-loop", type=int, default=40, help="shortest loop body to list")
    ap.add_argument("--top", type=int, default=12, help="opcodes listed per loop")
    args = ap.parse_args()
    usage = resources(args.cubin)
    for name, sass in functions(args.cubin).items():
        if args.function not in name:
            continue
        total = collections.Counter(opcode(t) for _, t in sass)
        r = usage.get(name, {})
        print(f"{name}: REG {r.get('REG', '?')} STACK {r.get('STACK', '?')} "
              f"instructions {len(sass)} HMMA {total['HMMA']} LDS {total['LDS']} "
              f"LDL {total['LDL']} STL {total['STL']}")
        for start, end, mix in loops(sass, args.min_loop):
            top = ", ".join(f"{op} {n}" for op, n in mix.most_common(args.top))
            print(f"  loop {start:#x}-{end:#x}: {sum(mix.values())} instructions: {top}")


if __name__ == "__main__":
    main()
