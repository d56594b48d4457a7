"""Runs whose outputs cannot be allocated: the memory guard turns them into a clean error that
names the node (MLX's CPU backend would crash the process), and the session stays usable.

The oversized runs feed small inputs whose result is at least 64 GiB and at least twice the
machine's memory, so the guard must refuse them before anything is allocated. The cases run in a
child interpreter: should the guard ever regress, the tests fail instead of killing pytest.
"""

import math
import os
import re
import resource
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from ortmlx.testing import EpRun, assert_ran_on_ep, make_model
from tests.engine.util import ROOT, run_python

GIB = 1 << 30


def _target_bytes() -> int:
    """What the oversized output must exceed: 64 GiB, and twice the machine's memory."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return max(64 * GIB, 2 * total)


def _format_gib(nbytes: int) -> str:
    return f"{nbytes / GIB:.1f} GiB"


def broadcast_add_model():
    """a[n, 1, 1] + b[1, m, 4] -> Add -> Relu, all dims symbolic. Nodes: big_add, relu."""
    a = h.make_tensor_value_info("a", T.FLOAT, ["a0", "a1", "a2"])
    b = h.make_tensor_value_info("b", T.FLOAT, ["b0", "b1", "b2"])
    y = h.make_tensor_value_info("y", T.FLOAT, ["y0", "y1", "y2"])
    nodes = [
        h.make_node("Add", ["a", "b"], ["s"], name="big_add"),
        h.make_node("Relu", ["s"], ["y"], name="relu"),
    ]
    return make_model(h.make_graph(nodes, "broadcast_add", [a, b], [y]))


def matmul_model():
    """a[m, k] x b[k, n] -> MatMul, symbolic dims. Node: big_matmul."""
    a = h.make_tensor_value_info("a", T.FLOAT, ["m", "k"])
    b = h.make_tensor_value_info("b", T.FLOAT, ["k", "n"])
    y = h.make_tensor_value_info("y", T.FLOAT, ["m", "n"])
    nodes = [h.make_node("MatMul", ["a", "b"], ["y"], name="big_matmul")]
    return make_model(h.make_graph(nodes, "big_matmul", [a, b], [y]))


def _case(name: str):
    """(model, node names, oversized feeds and output bytes, small feeds, reference)."""
    rng = np.random.default_rng(7)
    target = _target_bytes()
    if name == "add":
        # (n, 1, 1) + (1, n, 4) fp32 -> 16 n^2 bytes; n = 65536 gives 64 GiB from 1.25 MiB in.
        n = 1 << math.ceil(math.log2(math.sqrt(target / 16)))
        big = {"a": np.ones((n, 1, 1), np.float32), "b": np.ones((1, n, 4), np.float32)}
        small = {"a": rng.uniform(-1, 1, (3, 1, 1)).astype(np.float32),
                 "b": rng.uniform(-1, 1, (1, 5, 4)).astype(np.float32)}
        want = np.maximum(small["a"] + small["b"], 0)
        return broadcast_add_model(), ["big_add", "relu"], big, 16 * n * n, small, want
    # (m, 8) x (8, m) fp32 -> 4 m^2 bytes; m = 131072 gives 64 GiB from 8 MiB in.
    m = 1 << math.ceil(math.log2(math.sqrt(target / 4)))
    big = {"a": np.ones((m, 8), np.float32), "b": np.ones((8, m), np.float32)}
    small = {"a": rng.uniform(-1, 1, (4, 8)).astype(np.float32),
             "b": rng.uniform(-1, 1, (8, 6)).astype(np.float32)}
    return matmul_model(), ["big_matmul"], big, 4 * m * m, small, small["a"] @ small["b"]


def check_oversized_then_small(name: str, provider_options: dict):
    """One case, in the child interpreter (run_cases)."""
    import ortmlx

    ortmlx.register_execution_provider_library()
    model, nodes, big, big_bytes, small, want = _case(name)
    run = EpRun(model, provider_options=provider_options, strict=True)
    try:
        with pytest.raises(Exception) as err:
            run.run(big)
        msg = str(err.value)
        # The error names the node that builds the tensor, and the bytes it needs.
        assert f"node '{nodes[0]}'" in msg, msg
        assert f"needs {_format_gib(big_bytes)}" in msg, msg
        assert "available" in msg, msg
        # The same session runs a normal input, on the EP.
        got = run.run(small)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        report = assert_ran_on_ep(run, nodes)
        c = report.counters()
        assert c.get("compute.error", 0) == 1, c
        # Memory is not a compile problem: no eager fallback, the small run compiled.
        assert c.get("compile.fallback", 0) == 0, c
        (fused,) = report.fused.values()
        assert not fused["eager_only"], fused
        compiled = provider_options.get("no_compile") != "1"
        assert c.get("compute.compiled", 0) == (1 if compiled else 0), c
        assert c.get("compute.eager", 0) == (0 if compiled else 1), c
    finally:
        run.close()


CASES = [(name, path) for name in ("add", "matmul") for path in ("compiled", "eager")]


def run_cases():
    """Child interpreter: every case in turn, one line each ("OK add/compiled" or "FAIL ...")."""
    for name, path in CASES:
        opts = {} if path == "compiled" else {"no_compile": "1"}
        try:
            check_oversized_then_small(name, opts)
            print(f"OK {name}/{path}", flush=True)
        except (Exception, pytest.fail.Exception) as e:  # pytest.raises fails with the latter
            print(f"FAIL {name}/{path}: {e!r}".replace("\n", " "), flush=True)


@pytest.fixture(scope="module")
def child():
    # One interpreter for all cases (each costs a session, not a process start).
    return run_python("from tests.engine.test_allocation import run_cases\nrun_cases()\n",
                      check=False)


@pytest.mark.parametrize("name,path", CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_oversized_output_is_a_clean_error(child, name, path):
    lines = child.stdout.splitlines()
    mine = [ln for ln in lines if ln.split(" ", 1)[-1].startswith(f"{name}/{path}")]
    assert mine == [f"OK {name}/{path}"], (
        f"child exited with {child.returncode}\nstdout:\n{child.stdout}\n"
        f"stderr:\n{child.stderr[-4000:]}")


# ---- sizes that overflow 64 bits

OVERFLOW_CASES = ["Expand", "Tile", "ConstantOfShape", "ExpandSum"]


def overflow_model(case: str):
    """One shape-taking node fed its shape at run time ("ExpandSum": Expand then ReduceSum)."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["a", "b", "c"])
    s = h.make_tensor_value_info("s", T.INT64, [3])
    y = h.make_tensor_value_info("y", T.FLOAT, [] if case == "ExpandSum" else ["y0", "y1", "y2"])
    if case == "ConstantOfShape":
        value = h.make_tensor("v", T.FLOAT, [1], [1.5])
        nodes = [h.make_node(case, ["s"], ["y"], name="big", value=value)]
        return make_model(h.make_graph(nodes, "g", [s], [y]))
    nodes = [h.make_node("Tile" if case == "Tile" else "Expand", ["x", "s"], ["e"], name="big")]
    if case == "ExpandSum":
        nodes.append(h.make_node("ReduceSum", ["e"], ["y"], name="sum", keepdims=0))
    else:
        nodes[0].output[0] = "y"
    return make_model(h.make_graph(nodes, "g", [x, s], [y]))


def check_overflowing_size(case: str, provider_options: dict):
    """float32[2^30, 2^30, 4] is 2^64 bytes, [2^30] * 3 holds 2^90 elements: MLX's own counts wrap
    (to 0), which let the run through the guard (SIGSEGV, or a sum of 0.0). The guard counts with
    saturation and refuses it; the session then runs a small shape."""
    import ortmlx

    from ortmlx.testing import run_cpu

    ortmlx.register_execution_provider_library()
    model = overflow_model(case)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (1, 1, 1)).astype(np.float32)
    big = [1 << 30, 1 << 30, 1 << 30 if case == "ExpandSum" else 4]
    feeds = {"s": np.array(big, np.int64)}
    if case != "ConstantOfShape":
        feeds["x"] = x
    run = EpRun(model, provider_options=provider_options, strict=True)
    try:
        with pytest.raises(Exception) as err:
            run.run(feeds)
        msg = str(err.value)
        # The op's own shape arithmetic (checked_shape) or the memory guard's saturating count,
        # whichever sees the size first: a clean error naming the node either way.
        assert "node 'big'" in msg and re.search(r"overflows (64 bits|int64)", msg), msg
        feeds["s"] = np.array([2, 3, 4], np.int64)
        got = run.run(feeds)[0]
        assert_ran_on_ep(run, ["big"])
    finally:
        run.close()
    np.testing.assert_allclose(got, run_cpu(model, feeds)[0], rtol=1e-6)


def run_overflow_cases():
    for case in OVERFLOW_CASES:
        for path in ("compiled", "eager"):
            opts = {} if path == "compiled" else {"no_compile": "1"}
            try:
                check_overflowing_size(case, opts)
                print(f"OK {case}/{path}", flush=True)
            except (Exception, pytest.fail.Exception) as e:
                print(f"FAIL {case}/{path}: {e!r}".replace("\n", " "), flush=True)


@pytest.fixture(scope="module")
def overflow_child():
    return run_python("from tests.engine.test_allocation import run_overflow_cases\n"
                      "run_overflow_cases()\n", check=False)


@pytest.mark.parametrize("case", OVERFLOW_CASES)
@pytest.mark.parametrize("path", ["compiled", "eager"])
def test_size_overflowing_64_bits_is_a_clean_error(overflow_child, case, path):
    lines = overflow_child.stdout.splitlines()
    mine = [ln for ln in lines if ln.split(" ", 1)[-1].startswith(f"{case}/{path}")]
    assert mine == [f"OK {case}/{path}"], (
        f"child exited with {overflow_child.returncode}\nstdout:\n{overflow_child.stdout}\n"
        f"stderr:\n{overflow_child.stderr[-4000:]}")


# ---- an address-space limit (RLIMIT_AS) below the free memory

PAD_NEED = 8 * ((1 << 31) - 1)  # int64[2^31 - 1]: 16.0 GiB


def pad_model():
    """Pad of int64 data by runtime pads (fuzz seed 4, o60_47). Node: big_pad."""
    x = h.make_tensor_value_info("x", T.INT64, ["n"])
    p = h.make_tensor_value_info("p", T.INT64, [2])
    y = h.make_tensor_value_info("y", T.INT64, ["m"])
    nodes = [h.make_node("Pad", ["x", "p"], ["y"], name="big_pad")]
    return make_model(h.make_graph(nodes, "big_pad", [x, p], [y]))


def address_space_bytes() -> int:
    """The process's address space (VmSize), from /proc/self/statm."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def print_loaded_address_space():
    """Child: the address space of a process that loaded the EP and ran a Pad on it."""
    import ortmlx

    ortmlx.register_execution_provider_library()
    run = EpRun(pad_model(), provider_options={"cpu_claim": "all"}, strict=True)
    try:
        run.run({"x": np.array([1, 2], np.int64), "p": np.array([1, 1], np.int64)})
    finally:
        run.close()
    print(address_space_bytes(), flush=True)


def _too_big_then_small(model, names, big, wants, small):
    """Child, started under RLIMIT_AS, compiled and eager: the `big` feeds are an error whose
    message holds each of `wants` and blames the limit; then `small` runs on the EP like ORT
    CPU. Prints "OK <path>" or "FAIL <path>: why" per path."""
    import ortmlx

    from ortmlx.testing import run_cpu

    ortmlx.register_execution_provider_library()
    for path, opts in (("compiled", {}), ("eager", {"no_compile": "1"})):
        run = EpRun(model, provider_options={"cpu_claim": "all", **opts}, strict=True)
        try:
            with pytest.raises(Exception) as err:
                run.run(big)
            msg = str(err.value)
            for want in wants + ["address-space limit (RLIMIT_AS)"]:
                assert want in msg, msg
            got = run.run(small)
            assert_ran_on_ep(run, names)
            for g, w in zip(got, run_cpu(model, small)):
                np.testing.assert_array_equal(g, w)
            print(f"OK {path}", flush=True)
        except (Exception, pytest.fail.Exception) as e:
            print(f"FAIL {path}: {e!r}".replace("\n", " "), flush=True)
        finally:
            run.close()


def run_pad_under_limit():
    """Child: the 16 GiB Pad, then a small one."""
    small = {"x": np.random.default_rng(11).integers(-1000, 1000, 7).astype(np.int64),
             "p": np.array([2, 3], np.int64)}
    _too_big_then_small(pad_model(), ["big_pad"],
                        {"x": np.array([5], np.int64), "p": np.array([1 << 31, -2], np.int64)},
                        ["node 'big_pad'", f"needs {_format_gib(PAD_NEED)}"], small)


def test_address_space_limit_is_a_clean_error():
    """Under an address-space limit below the free memory, MLX's CPU allocator fails the 16 GiB
    allocation and its kernel wrote through it (SIGSEGV). The guard reads the limit: a clean error
    naming the node, and the session runs a small Pad afterwards. The limit is the address space
    of a process that loaded the EP plus 4 GiB, set before the child starts."""
    from ortmlx.testing import mlx_backend

    if mlx_backend() != "cpu":
        pytest.skip("MLX's GPU allocators throw on a failed allocation (and reserve far more "
                    "address space)")
    _check_child_under_address_space_limit("run_pad_under_limit", max_cap=PAD_NEED)


def _check_child_under_address_space_limit(function: str, max_cap: int | None = None):
    """Runs tests.engine.test_allocation.<function>() in a child whose address space is capped at
    that of a process that loaded the EP plus 4 GiB; it must print OK for both paths."""
    loaded = run_python("from tests.engine.test_allocation import print_loaded_address_space\n"
                        "print_loaded_address_space()\n")
    cap = int(loaded.stdout.split()[-1]) + 4 * GIB
    if max_cap is not None:
        assert cap < max_cap, f"the loaded EP takes {_format_gib(cap - 4 * GIB)} of address space"

    def limit():
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY
                                                else min(cap, hard), hard))

    code = f"from tests.engine.test_allocation import {function}\n{function}()\n"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                           preexec_fn=limit)
    report = (f"child exited with {child.returncode} under a {_format_gib(cap)} limit\n"
              f"stdout:\n{child.stdout}\nstderr:\n{child.stderr[-4000:]}")
    assert child.returncode == 0, report
    assert child.stdout.splitlines() == ["OK compiled", "OK eager"], report


PADS = 3
PADS_EACH = 8 * (1 << 28)  # int64[2^28 + 5] per output: 2.0 GiB, each below the 4 GiB headroom


def pads_model():
    """Three Pads of one small input, each its own output: each fits the memory left, together
    they do not. Nodes pad0..pad2 (distinct pad values, so that no optimizer merges them)."""
    x = h.make_tensor_value_info("x", T.INT64, ["n"])
    p = h.make_tensor_value_info("p", T.INT64, [2])
    nodes, outputs, inits = [], [], []
    for i in range(PADS):
        inits.append(h.make_tensor(f"c{i}", T.INT64, [], [i + 1]))
        nodes.append(h.make_node("Pad", ["x", "p", f"c{i}"], [f"y{i}"], name=f"pad{i}"))
        outputs.append(h.make_tensor_value_info(f"y{i}", T.INT64, ["m"]))
    return make_model(h.make_graph(nodes, "pads", [x, p], outputs, inits))


def run_pads_under_limit():
    """Child: three 2 GiB outputs (a clean error, where MLX's CPU allocator failed the third and
    its kernel wrote through it: SIGSEGV), then small ones."""
    _too_big_then_small(
        pads_model(), [f"pad{i}" for i in range(PADS)],
        {"x": np.array([5], np.int64), "p": np.array([1 << 28, 4], np.int64)},
        [f"needs {_format_gib(PADS * PADS_EACH)} at once for its {PADS} outputs"],
        {"x": np.array([7, -3], np.int64), "p": np.array([2, 1], np.int64)})


def test_outputs_that_fit_one_by_one_but_not_together_are_a_clean_error():
    """The guard adds up what an evaluation holds at once (here its outputs), not only its
    largest tensor. Same address-space limit as above: the loaded EP plus 4 GiB."""
    from ortmlx.testing import mlx_backend

    if mlx_backend() != "cpu":
        pytest.skip("MLX's GPU allocators throw on a failed allocation (and reserve far more "
                    "address space)")
    _check_child_under_address_space_limit("run_pads_under_limit")
