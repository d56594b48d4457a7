"""The fused kernels a compiled subgraph needs do not grow with an unrolled loop's length.

MLX inlines literal scalars into the elementwise kernels it fuses, so a translator that unrolls a
loop with its counter as a literal (Det's column, a recurrent net's step under sequence_lens, a
Loop's iteration number) gives every iteration kernels of their own to generate and compile:
on a cold cache, Det 16x16 took 47 s and 150 kernels on MLX CPU, and did not finish in minutes
on CUDA (NVRTC). The counters come from graph values instead; these tests count the kernels
MLX's CPU backend compiles (its JIT libraries under $TMPDIR/mlx) for a short and a long loop,
each in a fresh child process with an empty cache, and allow a few more for the long one."""

import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from ortmlx.testing import make_model, mlx_backend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(mlx_backend() != "cpu",
                                reason="counts the JIT libraries of MLX's CPU backend")

CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from ortmlx.testing import EpRun, assert_ran_on_ep
    model_path, feeds_path = sys.argv[1:3]
    feeds = dict(np.load(feeds_path))
    run = EpRun(model_path, strict=True)
    try:
        run.run(feeds)
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()
""")


def jit_kernels(model, feeds) -> int:
    """JIT libraries MLX's CPU backend builds to run `model` once on the EP, from an empty cache."""
    with tempfile.TemporaryDirectory(prefix="ortmlx-jit-") as tmp:
        model_path, feeds_path = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "f.npz")
        onnx.save(model, model_path)
        np.savez(feeds_path, **feeds)
        env = dict(os.environ, TMPDIR=tmp, ONNXRUNTIME_EP_MLX_CPU_CLAIM="all",
                   ONNXRUNTIME_EP_MLX_COMPILE_FUSE="1")
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(ROOT, "python")] + [p for p in [env.get("PYTHONPATH")] if p])
        r = subprocess.run([sys.executable, "-c", CHILD, model_path, feeds_path], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        count = 0
        for _, _, files in os.walk(os.path.join(tmp, "mlx")):
            count += sum(f.endswith(".so") for f in files)
        return count


def det_model(d):
    x = np.random.default_rng(0).uniform(-2, 2, (2, d, d)).astype(np.float32)
    graph = h.make_graph([h.make_node("Det", ["x"], ["y"], name="node")], "det",
                         [h.make_tensor_value_info("x", T.FLOAT, [2, d, d])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2])])
    return make_model(graph), {"x": x}


def lstm_model(steps):
    rng = np.random.default_rng(0)
    hidden, batch, width = 4, 3, 5
    feeds = {"X": rng.uniform(-1, 1, (steps, batch, width)).astype(np.float32),
             "sequence_lens": np.array([steps, steps - 1, 2], np.int32)}
    inits = [onnx.numpy_helper.from_array(
                 rng.uniform(-0.5, 0.5, (1, 4 * hidden, width)).astype(np.float32), "W"),
             onnx.numpy_helper.from_array(
                 rng.uniform(-0.5, 0.5, (1, 4 * hidden, hidden)).astype(np.float32), "R")]
    graph = h.make_graph(
        [h.make_node("LSTM", ["X", "W", "R", "", "sequence_lens"], ["Y"], name="node",
                     hidden_size=hidden)], "lstm",
        [h.make_tensor_value_info("X", T.FLOAT, [steps, batch, width]),
         h.make_tensor_value_info("sequence_lens", T.INT32, [batch])],
        [h.make_tensor_value_info("Y", T.FLOAT, [steps, 1, batch, hidden])], inits)
    return make_model(graph), feeds


def loop_model(trip):
    """y <- tanh(y * i + y), i the iteration number: the body reads the counter."""
    body = h.make_graph(
        [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
         h.make_node("Mul", ["y_in", "fi"], ["m"]),
         h.make_node("Add", ["m", "y_in"], ["a"]),
         h.make_node("Tanh", ["a"], ["y_out"]),
         h.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
         h.make_tensor_value_info("y_in", T.FLOAT, [4, 8])],
        [h.make_tensor_value_info("c_out", T.BOOL, []),
         h.make_tensor_value_info("y_out", T.FLOAT, [4, 8])])
    graph = h.make_graph(
        [h.make_node("Loop", ["M", "", "y0"], ["y"], body=body, name="node")], "loop",
        [h.make_tensor_value_info("y0", T.FLOAT, [4, 8])],
        [h.make_tensor_value_info("y", T.FLOAT, [4, 8])],
        [onnx.numpy_helper.from_array(np.array(trip, np.int64), "M")])
    x = np.random.default_rng(0).uniform(-1, 1, (4, 8)).astype(np.float32)
    return make_model(graph, opset=17), {"y0": x}


@pytest.mark.parametrize("build,short,long", [(det_model, 3, 9), (lstm_model, 4, 12),
                                              (loop_model, 3, 12)],
                         ids=["Det", "LSTM_sequence_lens", "Loop_iteration_number"])
def test_kernel_count_does_not_grow_with_the_loop(build, short, long):
    few = jit_kernels(*build(short))
    many = jit_kernels(*build(long))
    assert few > 0, "no JIT libraries found: MLX's CPU JIT cache moved; update this test"
    # MLX may group an unrolled chain's first and last iterations differently (a kernel or two
    # more or less); a literal counter costs kernels per iteration.
    assert many <= few + 3, f"{few} fused kernels at {short} iterations, {many} at {long}"
