"""ORTMLX_GRAPH_DUMP=DIR (a development aid): each fused node's MLX graph is written once per
output shapes, and tools/graph_stats.py counts it. The chain Mul, Tanh, Exp, Add, Sigmoid is one
fused elementwise region when compiled (the dump shows what a run launches)."""

import subprocess
import sys

from tests.engine.util import ROOT, run_python

CHILD = """
import numpy as np
from ortmlx.testing import EpRun, assert_ran_on_ep
from tests.engine.util import dynamic_chain_model
run = EpRun(dynamic_chain_model(), provider_options={"cpu_claim": "all"}, strict=True)
for rows in (2, 2, 3):
    run.run({"x": np.ones((rows, 8), np.float32)})
assert_ran_on_ep(run, ["mul", "tanh", "exp", "add", "sig"])
run.close()
print("ok")
"""


def test_graph_dump_writes_each_shape_once_and_stats_count_it(tmp_path):
    r = run_python(CHILD, {"ORTMLX_GRAPH_DUMP": str(tmp_path)}, check=False)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
    files = sorted(tmp_path.glob("*.txt"))
    assert len(files) == 2, files  # rows 2 (twice) and rows 3
    assert any("float32_2_8" in f.name for f in files) and any("float32_3_8" in f.name for f in files)
    text = files[0].read_text()
    assert text.startswith("Inputs:") and "Outputs:" in text
    stats = subprocess.run([sys.executable, "tools/graph_stats.py", str(tmp_path)], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout
    # The five elementwise ops fuse into one region under mlx::compile (the output's
    # `Contiguous` beside it copies nothing when the region's result is contiguous).
    assert stats.count("(1 fused elementwise regions), 0 views") == 2, stats

