#!/usr/bin/env python3
"""Counts what a fused node's MLX graph launches, from the files the EP writes with
ORTMLX_GRAPH_DUMP=DIR (mlx::core::print_graph of the graph each fused node evaluates, once per
node and output shapes).

    ORTMLX_GRAPH_DUMP=DIR python3 my_run.py      # any run of the EP
    python3 tools/graph_stats.py DIR [--top 25] [--lines]

For each file: the primitives that compute (one kernel or library call each on a GPU backend,
fused elementwise regions counted once as `Compiled*`) and the views (Reshape, Transpose,
Broadcast, Slice, ...: no kernel unless a later primitive needs a contiguous copy of them,
which MLX's CUDA backend then makes inside that primitive). A Reshape of a non-contiguous
array copies; the dump does not say which, so views are listed apart and not counted as
launches. Use it to see which ops a change removes without a GPU (the CUDA flavour's graph
differs from the CPU flavour's where kernels of ours replace MLX ops: dump on the backend you
study)."""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

VIEWS = {"Reshape", "Transpose", "Broadcast", "Slice", "Squeeze", "ExpandDims", "AsStrided",
         "BroadcastAxes", "Unflatten", "Flatten", "StopGradient", "Depends"}
LINE = re.compile(r"^(\w+) ")


def primitive(line: str) -> str | None:
    """The primitive's name of one graph line, or None for the Inputs/Outputs headers."""
    if line.startswith(("Inputs:", "Outputs:")):
        return None
    m = LINE.match(line)
    return m.group(1) if m else None


def family(name: str) -> str:
    """Fused regions are named after every op inside them; one family for all of them."""
    return "Compiled (fused elementwise)" if name.startswith("Compiled") else name


def stats(path: Path) -> tuple[collections.Counter, collections.Counter]:
    compute, views = collections.Counter(), collections.Counter()
    for line in path.read_text().splitlines():
        name = primitive(line)
        if name is None:
            continue
        (views if name in VIEWS else compute)[name] += 1
    return compute, views


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path, help="the ORTMLX_GRAPH_DUMP directory (or one file)")
    ap.add_argument("--top", type=int, default=25, help="primitives listed per file")
    ap.add_argument("--lines", action="store_true", help="also print each graph line")
    args = ap.parse_args()
    files = sorted(args.dir.glob("*.txt")) if args.dir.is_dir() else [args.dir]
    if not files:
        print(f"no graph files in {args.dir}", file=sys.stderr)
        return 1
    for f in files:
        compute, views = stats(f)
        fused = sum(n for k, n in compute.items() if k.startswith("Compiled"))
        print(f"{f.name}: {sum(compute.values())} computing primitives "
              f"({fused} fused elementwise regions), {sum(views.values())} views")
        by_family = collections.Counter()
        for k, n in compute.items():
            by_family[family(k)] += n
        for k, n in by_family.most_common(args.top):
            print(f"  {n:5d}  {k}")
        print("  views: " + ", ".join(f"{k} {n}" for k, n in views.most_common()))
        if args.lines:
            print(f.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
