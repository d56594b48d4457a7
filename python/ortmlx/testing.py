"""Helpers for tests and tools: run a model on MLXExecutionProvider and learn what ran there.

The EP writes a JSON report (session option `ep.mlxexecutionprovider.report`, or
ONNXRUNTIME_EP_MLX_REPORT) after Compile and after every Compute: which nodes it claimed, which
ORT assigned to it (fused nodes and the nodes inside them), how often each fused node ran, and
which fast/composed paths were taken. `EpRun` wraps that for tests.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field

import numpy as np

import ortmlx


@dataclass
class EpReport:
    raw: dict

    @property
    def fused(self) -> dict:
        return self.raw.get("fused", {})

    def assigned_nodes(self) -> set[str]:
        """Names of the model nodes ORT assigned to the EP (inside fused nodes). Unnamed nodes
        share the name "": count with assigned_count()."""
        return {n for f in self.fused.values() for n in f["nodes"]}

    def assigned_count(self) -> int:
        """How many model nodes ORT assigned to the EP (unnamed nodes included)."""
        return sum(len(f["nodes"]) for f in self.fused.values())

    def executed_count(self) -> int:
        """How many model nodes ran on the EP at least once (unnamed nodes included)."""
        return sum(len(f["nodes"]) for f in self.fused.values() if f["runs"] > 0)

    def executed_nodes(self) -> set[str]:
        """Names of nodes inside fused nodes that ran at least once."""
        return {n for f in self.fused.values() if f["runs"] > 0 for n in f["nodes"]}

    def executed_op_types(self) -> set[str]:
        return {op for f in self.fused.values() if f["runs"] > 0 for op in f["op_types"]}

    def total_nodes(self) -> int:
        """Nodes of ORT's final graph, summed over graphs: those offered to the EP in the latest
        GetCapability pass, those inside the EP's fused nodes that the pass kept from earlier
        ones (ORT asks again after inlining a function the EP refused), and those an earlier
        pass already left to another EP."""
        return sum(c["total_nodes"] + c.get("kept_nodes", 0) + c.get("other_ep_nodes", 0)
                   for c in self.raw.get("claims", {}).values() if c.get("latest", True))

    def refused(self) -> dict:
        """{op_type: {count, reason, nodes}} merged over all graphs."""
        out: dict = {}
        for claim in self.raw.get("claims", {}).values():
            for op, r in claim["refused"].items():
                out.setdefault(op, r)
        return out

    def paths(self) -> dict:
        return self.raw.get("paths", {})

    def counters(self) -> dict:
        return self.raw.get("counters", {})

    def mlx_memory(self) -> dict:
        """MLX's allocator after the session's latest run: {"active", "peak", "cache"} bytes
        (process-wide figures)."""
        return self.raw.get("mlx_memory", {})

    @property
    def backend(self) -> str:
        """MLX's backend the session ran on: "cpu" or "gpu"."""
        return self.raw.get("backend", "cpu")

    def describe_backend(self) -> str:
        """E.g. "GPU (NVIDIA H200, device I/O, exact fp32)" or "CPU"."""
        if self.backend != "gpu":
            return "CPU"
        parts = [p for p in (self.raw.get("device"), f"{self.raw.get('io', 'host')} I/O",
                             "TF32" if self.raw.get("tf32") else "exact fp32") if p]
        return f"GPU ({', '.join(parts)})"


@dataclass
class EpRun:
    """A session on MLXExecutionProvider (CPU EP as fallback) with its report file."""

    model: object  # onnx.ModelProto or path
    provider_options: dict = field(default_factory=dict)
    strict: bool = False  # session.disable_cpu_ep_fallback: every node must be on the EP
    session_config: dict = field(default_factory=dict)
    profile: bool = False  # ORT's profiler on (end_profiling() returns its events)
    # ORT's graph optimizations (an onnxruntime.GraphOptimizationLevel; None: ORT's default).
    # Tests of the EP's own pattern pass turn them off, since ORT fuses some chains first.
    optimization_level: object = None

    def __post_init__(self):
        import onnxruntime as ort

        fd, self.report_path = tempfile.mkstemp(prefix="ortmlx-report-", suffix=".json")
        os.close(fd)
        os.unlink(self.report_path)
        so = ort.SessionOptions()
        so.log_severity_level = 3
        if self.optimization_level is not None:
            so.graph_optimization_level = self.optimization_level
        if self.strict:
            so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        for k, v in self.session_config.items():
            so.add_session_config_entry(k, str(v))
        if self.profile:
            so.enable_profiling = True
            so.profile_file_prefix = os.path.join(tempfile.gettempdir(), "ortmlx-profile")
        opts = dict(self.provider_options)
        opts.setdefault("report", self.report_path)
        ortmlx.append_to_session_options(so, opts)
        data = self.model if isinstance(self.model, (str, bytes)) else self.model.SerializeToString()
        self.session = ort.InferenceSession(data, so)

    def run(self, feeds: dict, output_names=None):
        return self.session.run(output_names, feeds)

    def end_profiling(self) -> list[dict]:
        """Stops ORT's profiler (profile=True) and returns its events (Chrome trace format:
        "Node" events with args.provider and a duration in microseconds per kernel run)."""
        self.profile = False  # ended: close() has nothing left to clean up
        path = self.session.end_profiling()
        try:
            with open(path) as f:
                return json.load(f)
        finally:
            os.unlink(path)

    def report(self) -> EpReport:
        with open(self.report_path) as f:
            return EpReport(json.load(f))

    def close(self):
        if self.profile and self.session is not None:
            self.end_profiling()  # else ORT writes the profile when the session goes
        self.session = None
        try:
            os.unlink(self.report_path)
        except FileNotFoundError:
            pass


_BACKEND: str | None = None
_CUDA_MAJOR: int | None = None


def kernel_enabled(variable: str) -> bool:
    """Whether a kernel of ours that the environment variable switches is on, as the library
    decides it (ops::kernel_enabled): on unless the variable holds a false flag (0, false, off)."""
    value = os.environ.get(variable)
    return value is None or true_flag(value)


def cudnn_conv(flops: float) -> bool:
    """Whether a float32 Conv of `flops` (2 * output elements * C/groups * kernel size) runs on
    cuDNN in NCHW in this process (ops/conv/cuda/cudnn_conv.h): on the GPU unless
    ONNXRUNTIME_EP_MLX_CUDNN_CONV is a false flag, MLX's CUDA graphs are on
    (ONNXRUNTIME_EP_MLX_CUDA_GRAPHS, else MLX_USE_CUDA_GRAPHS) or the convolution has fewer FLOPs
    than ONNXRUNTIME_EP_MLX_CUDNN_CONV_MIN_FLOPS (default 2^28), as the library decides."""
    if mlx_backend() != "gpu" or not kernel_enabled("ONNXRUNTIME_EP_MLX_CUDNN_CONV"):
        return False
    if cuda_graphs():
        return False
    try:
        least = float(os.environ.get("ONNXRUNTIME_EP_MLX_CUDNN_CONV_MIN_FLOPS", ""))
    except ValueError:
        least = float(2 ** 28)
    return flops >= (least if least >= 0 else float(2 ** 28))


def cublaslt_matmul() -> bool:
    """Whether float32 products of at least two rows and two columns (batch dims each all 1 or
    the whole batch) run on cuBLASLt with a plan per shape in this process
    (ops/matmul/cuda/cublaslt_matmul.h): on the GPU where ONNXRUNTIME_EP_MLX_CUBLASLT_MATMUL is a
    true flag (opt-in) and MLX's CUDA graphs are off, as the library decides."""
    return (mlx_backend() == "gpu" and true_flag(os.environ.get("ONNXRUNTIME_EP_MLX_CUBLASLT_MATMUL", ""))
            and not cuda_graphs())


def cuda_graphs() -> bool:
    """Whether MLX's CUDA graphs are on in this process (ONNXRUNTIME_EP_MLX_CUDA_GRAPHS, else
    MLX_USE_CUDA_GRAPHS; off unless set), as the library decides (device::init_launch_mode)."""
    graphs = os.environ.get("ONNXRUNTIME_EP_MLX_CUDA_GRAPHS", os.environ.get("MLX_USE_CUDA_GRAPHS"))
    return graphs is not None and true_flag(graphs)


def softmax_kernel() -> bool:
    """Whether last-axis float32 Softmax runs as one CUDA kernel of ours in this process
    (ops/norm/cuda/softmax.h): on the GPU where ONNXRUNTIME_EP_MLX_SOFTMAX_KERNEL is a true flag
    (opt-in)."""
    return mlx_backend() == "gpu" and true_flag(os.environ.get("ONNXRUNTIME_EP_MLX_SOFTMAX_KERNEL", ""))


def layer_norm_kernel() -> bool:
    """Whether the fast LayerNorm runs as one CUDA kernel of ours in this process
    (ops/norm/cuda/layer_norm.h): on the GPU unless ONNXRUNTIME_EP_MLX_LAYER_NORM_KERNEL is a
    false flag."""
    return mlx_backend() == "gpu" and kernel_enabled("ONNXRUNTIME_EP_MLX_LAYER_NORM_KERNEL")


def true_flag(value: str) -> bool:
    """A flag's value as the library reads it (parse_flag): false for "", 0, false, off."""
    return value not in ("", "0", "false", "off", "FALSE", "OFF")


def mlx_backend() -> str:
    """MLX's backend in this process as the EP reports it: "cpu" or "gpu" (cached). Tests use it
    where the EP's path choice differs by backend."""
    global _BACKEND
    if _BACKEND is None:
        from onnx import TensorProto, helper

        ortmlx.register_execution_provider_library()
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
        graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "probe", [x], [y])
        run = EpRun(make_model(graph))
        try:
            run.run({"x": np.ones(2, np.float32)})
            _BACKEND = run.report().backend
        finally:
            run.close()
    return _BACKEND


def cuda_compute_major() -> int:
    """The compute capability's major number of the GPU this process's EP runs MLX on with the
    CUDA backend (nvidia-smi's compute_cap; cached), 0 on MLX's CPU backend or where nvidia-smi
    does not say."""
    global _CUDA_MAJOR
    if _CUDA_MAJOR is None:
        _CUDA_MAJOR = 0
        if mlx_backend() == "gpu":
            import subprocess

            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                    capture_output=True, text=True, timeout=30, check=False).stdout
                first = out.strip().splitlines()[0] if out.strip() else ""
                _CUDA_MAJOR = int(first.split(".")[0]) if first.split(".")[0].isdigit() else 0
            except (OSError, subprocess.SubprocessError):
                _CUDA_MAJOR = 0
    return _CUDA_MAJOR


def cuda_sm90() -> bool:
    """This process's EP runs MLX on the CUDA backend and the GPU is compute 9.x (H100, H200),
    where the CUDA flavour's own kernels have code (nvidia-smi's compute_cap; cached)."""
    return cuda_compute_major() == 9


def cpu_session(model):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def run_cpu(model, feeds: dict, output_names=None):
    return cpu_session(model).run(output_names, feeds)


def assert_ran_on_ep(run: EpRun, node_names) -> EpReport:
    """Asserts that every named node was assigned to the EP and its fused node executed."""
    report = run.report()
    executed = report.executed_nodes()
    missing = [n for n in node_names if n not in executed]
    assert not missing, (
        f"nodes not run on MLXExecutionProvider: {missing}; refused: {report.refused()}"
    )
    return report


def random_array(rng: np.random.Generator, shape, dtype=np.float32, low=-2.0, high=2.0):
    """Random test data, never all zeros or ones."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -50), min(info.max, 50)
        return rng.integers(lo, hi + 1, size=shape, dtype=dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


# ORT 1.30 reads ONNX IR up to 13; onnx 1.23 writes 14 by default.
IR_VERSION = 10


def registry_entries() -> list[dict]:
    """The EP's op registry as the registry-dump tool prints it (one dict per entry: domain,
    op_type, min_opset, max_opset, by_prefix, shape_keyed). The tool is $ORTMLX_REGISTRY_DUMP, or
    `ortmlx_registry_dump` next to the library (the build tree)."""
    import subprocess
    from pathlib import Path

    exe = os.environ.get("ORTMLX_REGISTRY_DUMP") or str(
        Path(ortmlx.library_path()).parent / "ortmlx_registry_dump")
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def registered_op_types(domain: str = "") -> set[str]:
    """Op types the registry knows in `domain` ("" = ONNX's default domain)."""
    return {e["op_type"] for e in registry_entries() if e["domain"] == domain}


def make_model(graph, opset: int = 21, extra_opsets=None, functions=None, check=True):
    """onnx ModelProto with an IR version ORT accepts, checked by onnx.checker."""
    import onnx
    from onnx import helper

    imports = [helper.make_opsetid("", opset)]
    for domain, version in (extra_opsets or {}).items():
        imports.append(helper.make_opsetid(domain, version))
    model = helper.make_model(graph, opset_imports=imports, functions=functions or [])
    model.ir_version = IR_VERSION
    if check:
        onnx.checker.check_model(model)
    return model
