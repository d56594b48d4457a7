"""`python -m ortmlx doctor` and `python -m ortmlx run MODEL.onnx`.

doctor: is this installation usable? (ORT version, library, devices, MLX, backend, a tiny model
wholly on the EP). run: where does a given model run, how close to ORT's CPU EP, how fast.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import statistics
import sys
import time

import numpy as np

import ortmlx

MIN_ORT = (1, 30)

# ORT's input type strings -> numpy dtypes (bfloat16 through ml_dtypes, which onnx installs).
_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int8)": np.int8, "tensor(int16)": np.int16, "tensor(int32)": np.int32,
    "tensor(int64)": np.int64, "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
}


def _version_tuple(text: str) -> tuple[int, ...]:
    out = []
    for part in text.split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def mlx_distributions() -> dict[str, str]:
    """Installed MLX wheels and their versions (mlx-cpu, mlx-cuda-13, ...)."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name == "mlx" or name.startswith("mlx-"):
            found[name] = dist.version
    return dict(sorted(found.items()))


def loaded_library(fragment: str) -> str | None:
    """Path of a shared library mapped into this process whose file name contains `fragment`
    (Linux: /proc/self/maps), e.g. the libmlx.so the EP really loaded."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "/" in path and fragment in os.path.basename(path):
                    return path
    except OSError:
        pass
    return None


def describe_report(raw: dict) -> tuple[str, str]:
    """(backend and device, precision mode) from the EP's JSON report."""
    if raw.get("backend") != "gpu":
        return "MLX CPU", "exact fp32 (CPU backend)"
    device = raw.get("device") or "unknown GPU"
    return (f"MLX CUDA ({device}, {raw.get('io', 'host')} I/O)",
            "TF32 fp32 matmuls" if raw.get("tf32") else "exact fp32 (TF32 off)")


# ---------------------------------------------------------------------------------------------
# doctor


def _tiny_model():
    from onnx import TensorProto, helper

    from ortmlx.testing import make_model

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 4],
                           np.linspace(-1, 1, 32, dtype=np.float32).tolist())
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul"),
             helper.make_node("Tanh", ["m"], ["t"], name="tanh"),
             helper.make_node("Add", ["t", "m"], ["y"], name="add")]
    return make_model(helper.make_graph(nodes, "doctor", [x], [y], [w])), \
        np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)


def doctor(out=None) -> int:
    out = out or sys.stdout
    problems: list[str] = []

    def line(label, value):
        print(f"  {label:<14} {value}", file=out)

    print("ortmlx doctor", file=out)
    line("python", sys.version.split()[0])
    try:
        import onnxruntime as ort
    except ImportError as e:
        print(f"FAIL: onnxruntime is not importable ({e}); install onnxruntime or "
              "onnxruntime-gpu (>= 1.30)", file=out)
        return 1
    line("onnxruntime", f"{ort.__version__} ({os.path.dirname(ort.__file__)})")
    if _version_tuple(ort.__version__)[:2] < MIN_ORT:
        problems.append(f"onnxruntime {ort.__version__} is older than "
                        f"{'.'.join(map(str, MIN_ORT))}, the first release ortmlx serves")
    line("ortmlx", f"{ortmlx.__version__} ({os.path.dirname(ortmlx.__file__)})")
    mlx = mlx_distributions()
    line("mlx wheels", ", ".join(f"{k}=={v}" for k, v in mlx.items()) or "none installed")
    try:
        path = ortmlx.get_library_path()
        line("library", path)
    except FileNotFoundError as e:
        problems.append(str(e))
        path = None
    devices = []
    if path is not None:
        try:
            devices = ortmlx.ep_devices()
        except Exception as e:  # noqa: BLE001 - ORT reports load failures as its own types
            problems.append(f"ONNX Runtime could not load {path}: {e}")
    if path is not None and not problems:
        if not devices:
            problems.append(f"ONNX Runtime offers no device for {ortmlx.EP_NAME}")
        else:
            meta = devices[0].ep_metadata
            line("ep device", f"{devices[0].ep_name} ({devices[0].ep_vendor}), "
                              f"backend {meta.get('ortmlx.backend', 'cpu')}")
            lib_version = meta.get("ortmlx.version")
            if lib_version != ortmlx.__version__:
                problems.append(f"library version {lib_version} differs from the Python "
                                f"package's {ortmlx.__version__}: {path} is not this package's")
        line("libmlx", loaded_library("libmlx") or "not loaded")
    if devices and not problems:
        problems += _doctor_run(line)
    if problems:
        print("problems:", file=out)
        for p in problems:
            print(f"  - {p}", file=out)
        return 1
    print("ok: the EP loads and runs a model wholly on MLX", file=out)
    return 0


def _doctor_run(line) -> list[str]:
    """Runs the tiny model with every node required on the EP (no CPU fallback)."""
    from ortmlx.testing import EpRun

    model, w = _tiny_model()
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    try:
        run = EpRun(model, {"cpu_claim": "all"}, strict=True)
    except Exception as e:  # noqa: BLE001
        return [f"a tiny model (MatMul, Tanh, Add) did not run wholly on the EP: {e}"]
    try:
        got = run.run({"x": x})[0]
        report = run.report()
    finally:
        run.close()
    backend, precision = describe_report(report.raw)
    line("backend", backend)
    line("precision", precision)
    if report.raw.get("backend") != "gpu" and report.raw.get("cpu_isa"):
        # The fused CPU kernels' instruction set (option cpu_isa); cpu_claim=auto claims them
        # only with one measured faster than ORT's CPU EP (docs/ATTENTION_VJP.md).
        line("cpu kernels", report.raw["cpu_isa"])
    m = x.astype(np.float64) @ w
    err = float(np.max(np.abs(got - (np.tanh(m) + m))))
    ran = report.executed_count()
    line("tiny model", f"{ran}/3 nodes on the EP, max abs error {err:.2e}")
    problems = []
    if ran != 3:
        problems.append(f"only {ran} of the tiny model's 3 nodes ran on the EP")
    if not err <= 1e-3:  # TF32 on CUDA stays well inside this; a wrong result does not
        problems.append(f"the tiny model's result is wrong (max abs error {err:.2e})")
    return problems


# ---------------------------------------------------------------------------------------------
# run


def _parse_pairs(pairs, what) -> dict[str, str]:
    out = {}
    for p in pairs or []:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise SystemExit(f"{what} must be name=value, got '{p}'")
        out[key] = value
    return out


def make_feeds(inputs, dims: dict[str, int], npz: str | None, seed: int) -> dict:
    """Feeds for ORT inputs (NodeArg list): from `npz` when given (by input name), else random
    data of each input's type, symbolic dimensions from `dims` (default 1)."""
    rng = np.random.default_rng(seed)
    given = dict(np.load(npz)) if npz else {}
    feeds = {}
    for arg in inputs:
        if arg.name in given:
            feeds[arg.name] = given[arg.name]
            continue
        if npz:
            raise SystemExit(f"{npz} has no array named '{arg.name}' "
                             f"(it has: {', '.join(given) or 'none'})")
        shape = []
        for d in arg.shape:
            if isinstance(d, int) and d >= 0:
                shape.append(d)
            elif isinstance(d, str) and d in dims:
                shape.append(int(dims[d]))
            else:
                shape.append(1)
        dtype = _ORT_TYPES.get(arg.type)
        if arg.type == "tensor(bfloat16)":
            import ml_dtypes

            dtype = ml_dtypes.bfloat16
        if dtype is None:
            raise SystemExit(f"input '{arg.name}' has type {arg.type}: give it with --inputs")
        dtype = np.dtype(dtype)
        if dtype == np.bool_:
            feeds[arg.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            # Small non-negative integers: valid as indices and sizes in most models.
            feeds[arg.name] = rng.integers(0, 4, size=shape).astype(dtype)
        else:
            feeds[arg.name] = rng.uniform(-1, 1, size=shape).astype(dtype)
    return feeds


def _median_seconds(fn, repeat: int) -> float:
    fn()  # warm-up (first-run compilation, allocations)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _max_error(got, ref) -> dict:
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        return {"shape_mismatch": [list(got.shape), list(ref.shape)]}
    if got.size == 0:
        return {"max_abs_error": 0.0}
    if np.issubdtype(ref.dtype, np.floating) or ref.dtype.kind == "V" or ref.dtype.name == "bfloat16":
        g, r = got.astype(np.float64), ref.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(r)
        diff = np.where(both_nan | (g == r), 0.0, np.abs(g - r))
        scale = float(np.max(np.abs(np.where(np.isfinite(r), r, 0.0)))) or 1.0
        return {"max_abs_error": float(np.max(diff)), "max_rel_error": float(np.max(diff)) / scale}
    return {"mismatches": int(np.count_nonzero(got != ref))}


def _seconds_per_run(first: dict, last: dict) -> float | None:
    """A fused node's mean Compute time per run between two EP reports (first: after the first
    run, so that compilation is not in it), or None if it did not run in between."""
    runs = last.get("runs", 0) - first.get("runs", 0)
    return (last.get("seconds", 0.0) - first.get("seconds", 0.0)) / runs if runs > 0 else None


def run_model(args, out=None) -> int:
    out = out or sys.stdout
    import onnxruntime as ort

    from ortmlx.testing import EpRun, EpReport

    path = os.path.abspath(args.model)
    if not os.path.isfile(path):
        raise SystemExit(f"no such model: {args.model}")
    dims = _parse_pairs(args.dim, "--dim")
    options = _parse_pairs(args.option, "--option")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    cpu = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = make_feeds(cpu.get_inputs(), dims, args.inputs, args.seed)
    ref = cpu.run(None, feeds)

    # With --html, ORT's profiler times the nodes left to ORT's CPU EP (a few microseconds per
    # node added to the EP session's times).
    ep = EpRun(path, options, profile=bool(args.html))
    profile: list[dict] = []
    try:
        got = ep.run(feeds)
        report: EpReport = ep.report()  # after the first run: compilation is in its times
        t_ep = _median_seconds(lambda: ep.run(feeds), args.repeat)
        if args.html:
            profile = ep.end_profiling()
    finally:
        raw = ep.report().raw if os.path.exists(ep.report_path) else {}
        ep.close()
    t_cpu = _median_seconds(lambda: cpu.run(None, feeds), args.repeat)

    backend, precision = describe_report(report.raw)
    total, on_ep = report.total_nodes(), report.assigned_count()
    partitions = [{"name": k, "nodes": len(v["nodes"]), "op_types": sorted(set(v["op_types"])),
                   "seconds_per_run": _seconds_per_run(report.fused.get(k, {}),
                                                       raw.get("fused", {}).get(k, {}))}
                  for k, v in report.fused.items()]
    refused = {op: {"count": r.get("count"), "reason": r.get("reason")}
               for op, r in sorted(report.refused().items())}
    errors = {o.name: _max_error(g, r) for o, g, r in zip(cpu.get_outputs(), got, ref)}
    summary = {
        "model": path, "backend": backend, "precision": precision,
        "provider_options": options,
        "inputs": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in feeds.items()},
        "nodes_on_ep": on_ep, "nodes_total": total, "partitions": partitions,
        "refused": refused, "errors_vs_cpu": errors,
        "median_seconds": {"ort_cpu": t_cpu, "mlx_ep": t_ep}, "repeat": args.repeat,
        "ep_report": raw,
    }

    print(f"model       {path}", file=out)
    print(f"backend     {backend}, {precision}", file=out)
    for k, v in summary["inputs"].items():
        print(f"input       {k}: {v['dtype']}{v['shape']}", file=out)
    print(f"nodes       {on_ep} of {total} on {ortmlx.EP_NAME}", file=out)
    print(f"partitions  {len(partitions)}", file=out)
    for p in partitions:
        t = p["seconds_per_run"]
        print(f"  {p['nodes']:>5} nodes: {', '.join(p['op_types'])}"
              + (f" ({t * 1e3:.3f} ms/run)" if t is not None else ""), file=out)
    if refused:
        print("refused op types", file=out)
        for op, r in refused.items():
            print(f"  {op} x{r['count']}: {r['reason']}", file=out)
    print("outputs vs ORT CPU", file=out)
    for name, e in errors.items():
        text = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                         for k, v in e.items())
        print(f"  {name}: {text}", file=out)
    print(f"median time ORT CPU {t_cpu * 1e3:.3f} ms, MLX EP {t_ep * 1e3:.3f} ms "
          f"({t_ep / t_cpu:.2f}x of CPU; {args.repeat} runs)", file=out)
    if on_ep == 0 and report.raw.get("backend") != "gpu" and "cpu_claim" not in options:
        print("note: on MLX's CPU backend the EP claims by default only what it runs faster "
              "than ORT's CPU EP; pass --option cpu_claim=all to see every node it can run",
              file=out)
    if args.html:
        write_partition_html(args.html, path, report.raw, raw, profile, backend, summary)
        print(f"html        {args.html}", file=out)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=1)
        print(f"report      {args.report}", file=out)
    return 0


def write_partition_html(out_path, model_path, first_raw, last_raw, profile, backend, summary):
    """The page of `run --html` (ortmlx.html): the graph coloured by partition. first_raw and
    last_raw: the EP's report after the first run and at the end; profile: ORT's profiler events
    of the EP session."""
    import onnx

    from ortmlx import html

    model = onnx.load(model_path, load_external_data=False)
    data = html.placement(model, first_raw, last_raw, html.ort_graph_node_names(model_path),
                          html.cpu_seconds_per_run(profile))
    lines = [f"{backend}, {summary['precision']}; "
             f"{summary['nodes_on_ep']} of {summary['nodes_total']} nodes of ORT's graph on "
             f"{ortmlx.EP_NAME} in {len(summary['partitions'])} subgraph(s)",
             f"median time per run: ORT CPU {summary['median_seconds']['ort_cpu'] * 1e3:.3f} ms, "
             f"MLX EP session {summary['median_seconds']['mlx_ep'] * 1e3:.3f} ms "
             f"({summary['repeat']} runs)"]
    if summary["provider_options"]:
        lines.append("provider options: " + ", ".join(
            f"{k}={v}" for k, v in summary["provider_options"].items()))
    html.write_html(out_path, data, os.path.basename(model_path), lines)


def add_subcommands(sub) -> None:
    sub.add_parser("doctor", help="check the installation: ORT, MLX, library, a model on the EP")
    run = sub.add_parser("run", help="run an ONNX model on ORT CPU and on the EP and compare")
    run.add_argument("model", help="path of an .onnx file")
    run.add_argument("--dim", action="append", metavar="NAME=VALUE",
                     help="value of a symbolic input dimension (default 1); repeatable")
    run.add_argument("--inputs", metavar="FILE.npz", help="input arrays by input name")
    run.add_argument("-o", "--option", action="append", metavar="KEY=VALUE",
                     help="an EP provider option (python -m ortmlx options); repeatable")
    run.add_argument("--repeat", type=int, default=10, help="timed runs per side (default 10)")
    run.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    run.add_argument("--report", metavar="OUT.json", help="write everything printed as JSON")
    run.add_argument("--html", metavar="OUT.html",
                     help="write a self-contained page drawing the graph coloured by partition")


def dispatch(args) -> int | None:
    if args.cmd == "doctor":
        return doctor()
    if args.cmd == "run":
        return run_model(args)
    return None

