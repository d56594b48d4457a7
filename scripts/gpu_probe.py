"""First checks on a GPU machine (part 'probe' of scripts/gpu_suite.sh): the EP's device, a run
with host I/O, a run with device I/O through IOBinding (ORT-allocated device tensors, and a torch
CUDA tensor bound by pointer), a graph mixing EP and CPU-EP nodes, and the fp32 mode. Exits non-zero
on the first failed check."""

from __future__ import annotations

import sys
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

import ortmlx
from ortmlx.testing import EpRun, make_model, run_cpu

NVIDIA = 0x10DE


def model(mixed=False):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])
    nodes = [helper.make_node("MatMul", ["x", "x"], ["m"], name="mm"),
             helper.make_node("Sin" if mixed else "Relu", ["m"], ["s"], name="mid"),
             helper.make_node("Add", ["s", "x"], ["y"], name="add")]
    return make_model(helper.make_graph(nodes, "probe", [x], [y]))


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        sys.exit(1)


def main() -> int:
    ortmlx.register_execution_provider_library()
    devs = [d for d in ort.get_ep_devices() if d.ep_name == ortmlx.ep_name()]
    check(len(devs) == 1, f"one MLXExecutionProvider device ({len(devs)})")
    dev = devs[0]
    print("      hardware device:", dev.device.type, hex(dev.device.vendor_id), dev.device.vendor,
          dict(dev.ep_metadata))
    check(dev.device.type == ort.OrtHardwareDeviceType.GPU, "EP device is a GPU")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    m = model()
    want = run_cpu(m, {"x": x})[0]
    run = EpRun(m, strict=True)
    got = run.run({"x": x})[0]
    rep = run.report()
    print("      backend:", rep.describe_backend())
    check(rep.backend == "gpu", "MLX backend is the GPU")
    err = float(np.abs(got - want).max() / np.abs(want).max())
    check(err < 1e-5, f"host I/O matches ORT CPU (rel err {err:.2e}, exact fp32 expects < 1e-5)")
    check(not rep.raw.get("tf32"), "exact fp32 mode by default")

    # Device I/O: inputs and outputs stay on the GPU between runs.
    sess = run.session
    xv = ort.OrtValue.ortvalue_from_numpy(x, "gpu", 0, NVIDIA)
    check(xv.device_name().lower() in ("gpu", "cuda"), f"device OrtValue ({xv.device_name()})")
    yv = ort.OrtValue.ortvalue_from_shape_and_type([64, 64], np.float32, "gpu", 0, NVIDIA)
    io = sess.io_binding()
    io.bind_ortvalue_input("x", xv)
    io.bind_ortvalue_output("y", yv)
    sess.run_with_iobinding(io)
    got = yv.numpy()
    check(float(np.abs(got - want).max() / np.abs(want).max()) < 1e-5, "IOBinding device I/O")
    t0 = time.perf_counter()
    for _ in range(50):
        sess.run_with_iobinding(io)
    print(f"      device-I/O run: {(time.perf_counter() - t0) / 50 * 1e3:.3f} ms")
    counters = run.report().counters()
    print("      counters:", {k: v for k, v in counters.items() if "copy" in k or "bytes" in k})
    try:
        import torch

        tx = torch.from_numpy(x).cuda()
        ty = torch.empty((64, 64), device="cuda")
        io2 = sess.io_binding()
        io2.bind_input("x", "cuda", 0, np.float32, [64, 64], tx.data_ptr())
        io2.bind_output("y", "cuda", 0, np.float32, [64, 64], ty.data_ptr())
        torch.cuda.synchronize()
        sess.run_with_iobinding(io2)
        check(float((ty.cpu().numpy() - want).__abs__().max() / np.abs(want).max()) < 1e-5,
              "torch CUDA tensors bound by pointer")
    except ImportError:
        print("      (torch not installed: pointer binding not checked)")
    except Exception as e:  # report, do not stop: ORT's device naming may differ
        print(f"WARN  torch pointer binding: {type(e).__name__}: {e}")
    run.close()

    mixed = model(mixed=True)
    want = run_cpu(mixed, {"x": x})[0]
    run = EpRun(mixed)
    got = run.run({"x": x})[0]
    check(float(np.abs(got - want).max() / np.abs(want).max()) < 1e-5,
          "EP + CPU-EP nodes in one graph (ORT inserts the copies)")
    check({"mm", "add"} <= run.report().executed_nodes(), "MatMul and Add ran on the EP")
    run.close()
    print("probe: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
