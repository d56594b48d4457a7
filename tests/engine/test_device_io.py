"""Device-resident I/O on a GPU backend: ORT tensors in the EP's device memory, bound through
IOBinding, go into MLX by one device-to-device copy each and come back the same way
(engine/device/device_memory.h). Checks the values against ORT CPU over several runs with new data
and new shapes, that the inputs are left as they were, and the cases that take other branches of
the copy code: an output that is an input passed through, an input whose values a translator
reads on the host (MLX then moves that buffer to unified memory), and an empty input. Skipped
where MLX has no GPU backend (the CPU flavour)."""

import json
import os
import tempfile

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ortmlx
from ortmlx.testing import EpReport, make_model, mlx_backend, run_cpu

pytestmark = pytest.mark.skipif(mlx_backend() != "gpu", reason="needs MLX's GPU backend")


def _gpu_device():
    ortmlx.register_execution_provider_library()
    devs = [d for d in ort.get_ep_devices()
            if d.ep_name == ortmlx.ep_name() and d.device.type == ort.OrtHardwareDeviceType.GPU]
    assert devs, "the EP offers no GPU device on a GPU backend"
    return devs[0]


class DeviceSession:
    """A session on the EP's GPU device with its report, and device OrtValues for I/O."""

    def __init__(self, model):
        self.dev = _gpu_device()
        self.mem_info = self.dev.memory_info(ort.OrtDeviceMemoryType.DEFAULT)
        fd, self.report_path = tempfile.mkstemp(prefix="ortmlx-dio-", suffix=".json")
        os.close(fd)
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        so.add_provider_for_devices([self.dev], {"report": self.report_path})
        self.sess = ort.InferenceSession(model.SerializeToString(), so)

    def on_device(self, arr):
        v = ort.OrtValue.ortvalue_from_shape_and_type(list(arr.shape), arr.dtype,
                                                      memory_info=self.mem_info)
        if arr.size:
            v.update_inplace(np.ascontiguousarray(arr))
        return v

    def run(self, feeds: dict, out_specs: dict) -> dict:
        io = self.sess.io_binding()
        ins = {k: self.on_device(a) for k, a in feeds.items()}
        for k, v in ins.items():
            io.bind_ortvalue_input(k, v)
        outs = {}
        for name, (shape, dtype) in out_specs.items():
            outs[name] = ort.OrtValue.ortvalue_from_shape_and_type(list(shape), dtype,
                                                                   memory_info=self.mem_info)
            io.bind_ortvalue_output(name, outs[name])
        self.sess.run_with_iobinding(io)
        io.synchronize_outputs()
        for k, v in ins.items():  # the EP copied the inputs; it never wrote to them
            assert "cpu" not in v.device_name().lower()
            np.testing.assert_array_equal(v.numpy(), feeds[k], err_msg=f"input {k} changed")
        return {k: v.numpy() for k, v in outs.items()}

    def report(self) -> EpReport:
        with open(self.report_path) as f:
            return EpReport(json.load(f))

    def close(self):
        del self.sess
        if os.path.exists(self.report_path):
            os.unlink(self.report_path)


def _model():
    # z = reshape(x + y, k): k is read on the host; xo passes x through; m = x * y. allowzero=1:
    # the empty case's k = [5, 0] means a 0 dimension, not "copy the input's" (which gives 5 x 5).
    f = T.FLOAT
    graph = h.make_graph(
        [h.make_node("Add", ["x", "y"], ["s"], name="add"),
         h.make_node("Reshape", ["s", "k"], ["z"], name="reshape", allowzero=1),
         h.make_node("Identity", ["x"], ["xo"], name="pass"),
         h.make_node("Mul", ["x", "y"], ["m"], name="mul")],
        "device_io",
        [h.make_tensor_value_info("x", f, ["a", "b"]), h.make_tensor_value_info("y", f, ["a", "b"]),
         h.make_tensor_value_info("k", T.INT64, [2])],
        [h.make_tensor_value_info("z", f, ["r0", "r1"]),
         h.make_tensor_value_info("xo", f, ["a", "b"]),
         h.make_tensor_value_info("m", f, ["a", "b"])])
    return make_model(graph, opset=17)


def check_model_run(s: DeviceSession, model, a: int, b: int, rng):
    """One run of _model() with new (a, b) inputs, compared with ORT CPU."""
    feeds = {"x": rng.standard_normal((a, b)).astype(np.float32),
             "y": rng.standard_normal((a, b)).astype(np.float32),
             "k": np.array([b, a], np.int64)}
    want = dict(zip(["z", "xo", "m"], run_cpu(model, feeds)))
    got = s.run(feeds, {"z": ((b, a), np.float32), "xo": ((a, b), np.float32),
                        "m": ((a, b), np.float32)})
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("shapes", [[(4, 6)], [(4, 6), (8, 3), (4, 6)], [(0, 5), (3, 5)]],
                         ids=["one_shape", "shapes_change", "empty_input"])
def test_device_io_matches_cpu(shapes):
    model = _model()
    s = DeviceSession(model)
    rng = np.random.default_rng(7)
    try:
        for a, b in shapes:
            for _ in range(2):  # the second run of a shape replays its compiled graph
                check_model_run(s, model, a, b, rng)
        rep = s.report()
        assert rep.executed_nodes() >= {"add", "reshape", "pass", "mul"}, rep.executed_nodes()
        assert rep.raw["io"] == "device", rep.raw["io"]
        assert rep.counters().get("input.copy", 0) > 0, rep.counters()
    finally:
        s.close()


def test_device_io_many_inputs_in_one_batch():
    # 24 inputs and 24 outputs (a decoder step's KV cache in miniature): one batched copy each way.
    n = 24
    nodes = [h.make_node("Neg", [f"i{j}"], [f"o{j}"], name=f"neg{j}") for j in range(n)]
    graph = h.make_graph(nodes, "many",
                         [h.make_tensor_value_info(f"i{j}", T.FLOAT, [2, 3, 5 + j]) for j in range(n)],
                         [h.make_tensor_value_info(f"o{j}", T.FLOAT, [2, 3, 5 + j]) for j in range(n)])
    model = make_model(graph, opset=17)
    s = DeviceSession(model)
    rng = np.random.default_rng(3)
    try:
        for _ in range(3):
            feeds = {f"i{j}": rng.standard_normal((2, 3, 5 + j)).astype(np.float32)
                     for j in range(n)}
            got = s.run(feeds, {f"o{j}": ((2, 3, 5 + j), np.float32) for j in range(n)})
            for j in range(n):
                np.testing.assert_array_equal(got[f"o{j}"], -feeds[f"i{j}"])
        assert s.report().executed_count() == n
    finally:
        s.close()


def test_device_io_legacy_copy_path():
    # ONNXRUNTIME_EP_MLX_DEVICE_COPY is read once per process: the tests above again, in a child
    # process on the previous path (a fill kernel per input, one copy call per tensor).
    import subprocess
    import sys

    env = dict(os.environ, ONNXRUNTIME_EP_MLX_DEVICE_COPY="legacy")
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k",
         "not legacy"], env=env, capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-2000:]
