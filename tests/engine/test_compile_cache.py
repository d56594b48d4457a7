"""Compiled execution: shape-keyed cache hits and misses, the LRU bound, kill switches, compiled vs
eager numerics, resident constants. Counters come from the EP's JSON report."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, run_cpu
from tests.engine.util import CHAIN_NODES, dynamic_chain_model, elementwise_zoo_model


def _x(rng, rows, width=8):
    return rng.uniform(-2, 2, (rows, width)).astype(np.float32)


def _counters(run):
    c = run.report().counters()
    return {k: c.get(k, 0) for k in ("cache.hit", "cache.miss", "cache.retrace", "cache.evict",
                                     "compile.fallback", "compute.compiled", "compute.eager",
                                     "compute.error", "compute.runs")}


def _check_invariants(c):
    assert c["cache.hit"] + c["cache.miss"] + c["cache.retrace"] == \
        c["compute.compiled"] + c["compile.fallback"]
    assert c["compute.compiled"] + c["compute.eager"] + c["compute.error"] == c["compute.runs"]


def test_same_shape_hits_new_shape_misses(rng):
    model = dynamic_chain_model()
    run = EpRun(model, strict=True)
    try:
        x = _x(rng, 3)
        run.run({"x": x})
        assert _counters(run)["cache.miss"] == 1
        run.run({"x": _x(rng, 3)})  # same shape, new data
        c = _counters(run)
        assert (c["cache.miss"], c["cache.hit"], c["compute.compiled"]) == (1, 1, 2)
        run.run({"x": _x(rng, 5)})  # new shape
        c = _counters(run)
        assert (c["cache.miss"], c["cache.hit"]) == (2, 1)
        assert c["cache.retrace"] == 0 and c["compile.fallback"] == 0
        _check_invariants(c)
        assert_ran_on_ep(run, CHAIN_NODES)
    finally:
        run.close()


def test_cache_stays_within_its_bound(rng):
    model = dynamic_chain_model()
    run = EpRun(model, provider_options={"compile_cache_size": 2}, strict=True)
    try:
        shapes = [1, 2, 3, 4]
        for rows in shapes:
            x = _x(rng, rows)
            got = run.run({"x": x})[0]
            np.testing.assert_allclose(got, run_cpu(model, {"x": x})[0], rtol=1e-5, atol=1e-6)
            (fused,) = run.report().fused.values()
            assert fused["cache_entries"] <= 2
        c = _counters(run)
        assert (c["cache.miss"], c["cache.hit"], c["cache.evict"]) == (4, 0, 2)
        run.run({"x": _x(rng, 4)})  # most recent: still cached
        run.run({"x": _x(rng, 1)})  # evicted long ago: compiled again
        c = _counters(run)
        assert (c["cache.miss"], c["cache.hit"], c["cache.evict"]) == (5, 1, 3)
        (fused,) = run.report().fused.values()
        assert fused["cache_entries"] == 2
        _check_invariants(c)
    finally:
        run.close()


@pytest.mark.parametrize("knob", ["no_compile", "no_general_compile"])
def test_kill_switch_option_forces_eager(knob, rng):
    model = dynamic_chain_model()
    run = EpRun(model, provider_options={knob: 1}, strict=True)
    try:
        for rows in (2, 2, 3):
            run.run({"x": _x(rng, rows)})
        c = _counters(run)
        assert c["compute.eager"] == 3 and c["compute.compiled"] == 0
        assert c["cache.hit"] == c["cache.miss"] == c["cache.retrace"] == 0
        _check_invariants(c)
    finally:
        run.close()


@pytest.mark.parametrize("var", ["ONNXRUNTIME_EP_MLX_NO_COMPILE", "ONNXRUNTIME_EP_MLX_NO_GENERAL_COMPILE"])
def test_kill_switch_variable_forces_eager_and_the_option_wins(var, rng, monkeypatch):
    model = dynamic_chain_model()
    monkeypatch.setenv(var, "1")  # read when the session creates the EP
    run = EpRun(model, strict=True)
    override = EpRun(model, strict=True, provider_options={
        "no_compile" if var.endswith("_NO_COMPILE") else "no_general_compile": 0})
    try:
        run.run({"x": _x(rng, 2)})
        override.run({"x": _x(rng, 2)})
        assert _counters(run)["compute.eager"] == 1
        assert _counters(override)["compute.compiled"] == 1
    finally:
        run.close()
        override.close()


def test_compiled_and_eager_results_are_equal(rng):
    model = elementwise_zoo_model()
    feeds = {"x": rng.uniform(-2, 2, (4, 16)).astype(np.float32),
             "z": rng.uniform(-2, 2, (4, 16)).astype(np.float32)}
    compiled = EpRun(model, strict=True)
    eager = EpRun(model, strict=True, provider_options={"no_compile": 1})
    try:
        got_c = compiled.run(feeds)[0]
        got_c2 = compiled.run(feeds)[0]  # cache hit: same function, same numbers
        got_e = eager.run(feeds)[0]
        assert _counters(compiled)["compute.compiled"] == 2
        assert _counters(eager)["compute.eager"] == 1
        np.testing.assert_array_equal(got_c, got_c2)
        # Fused kernels may reassociate nothing here, but the CPU JIT may use different libm
        # paths than the eager kernels: equal to fp32 rounding.
        np.testing.assert_allclose(got_c, got_e, rtol=2e-6, atol=1e-6)
        np.testing.assert_allclose(got_c, run_cpu(model, feeds)[0], rtol=1e-5, atol=1e-5)
        assert_ran_on_ep(compiled, ["add", "gelu", "erf", "pow", "out"])
    finally:
        compiled.close()
        eager.close()


def bad_add_model():
    """Add of two independently sized vectors: mismatched sizes fail inside the EP."""
    a = h.make_tensor_value_info("a", T.FLOAT, ["n"])
    b = h.make_tensor_value_info("b", T.FLOAT, ["m"])
    y = h.make_tensor_value_info("y", T.FLOAT, ["k"])
    return make_model(h.make_graph([h.make_node("Add", ["a", "b"], ["s"], name="bad_add"),
                                    h.make_node("Exp", ["s"], ["y"], name="exp")],
                                   "g", [a, b], [y]))


@pytest.mark.parametrize("fuse", ["1", "0"])
def test_fused_and_unfused_compilation_match_eager(fuse, rng):
    model = elementwise_zoo_model()
    feeds = {"x": rng.uniform(-2, 2, (4, 16)).astype(np.float32),
             "z": rng.uniform(-2, 2, (4, 16)).astype(np.float32)}
    compiled = EpRun(model, strict=True, provider_options={"compile_fuse": fuse})
    eager = EpRun(model, strict=True, provider_options={"no_compile": 1})
    try:
        got_c, got_e = compiled.run(feeds)[0], eager.run(feeds)[0]
        assert _counters(compiled)["compute.compiled"] == 1
        if fuse == "0":
            np.testing.assert_array_equal(got_c, got_e)  # same primitives, replayed
        else:
            np.testing.assert_allclose(got_c, got_e, rtol=2e-6, atol=1e-6)
    finally:
        compiled.close()
        eager.close()


def test_bad_input_is_an_error_and_compilation_stays_on(rng):
    run = EpRun(bad_add_model(), strict=True)
    try:
        with pytest.raises(Exception, match="bad_add"):
            run.run({"a": np.ones(3, np.float32), "b": np.ones(4, np.float32)})
        av, bv = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
        np.testing.assert_allclose(run.run({"a": av, "b": bv})[0], np.exp(av + bv), rtol=1e-6)
        c = _counters(run)
        assert c["compute.error"] == 1 and c["compute.compiled"] == 1
        assert c["compile.fallback"] == 0
        (fused,) = run.report().fused.values()
        assert not fused["eager_only"]
        _check_invariants(c)
    finally:
        run.close()


def test_constants_stay_resident(rng):
    # A 1 MiB weight: only the live input is brought into MLX on each run.
    w = rng.uniform(-1, 1, (512, 512)).astype(np.float32)
    x = h.make_tensor_value_info("x", T.FLOAT, [512, 512])
    y = h.make_tensor_value_info("y", T.FLOAT, [512, 512])
    model = make_model(h.make_graph(
        [h.make_node("Mul", ["x", "w"], ["m"], name="mul"), h.make_node("Tanh", ["m"], ["y"], name="t")],
        "g", [x], [y], [onnx.numpy_helper.from_array(w, "w")]))
    run = EpRun(model, strict=True)
    try:
        xv = rng.uniform(-1, 1, (512, 512)).astype(np.float32)
        for _ in range(3):
            got = run.run({"x": xv})[0]
        np.testing.assert_allclose(got, np.tanh(xv * w), rtol=1e-5, atol=1e-6)
        c = run.report().counters()
        per_run = xv.nbytes
        assert c["input.copy_bytes"] + c.get("input.wrap_bytes", 0) == 3 * per_run
        assert c["input.copy"] + c.get("input.wrap", 0) == 3
        assert c["output.bytes"] == 3 * per_run
    finally:
        run.close()


def test_many_shapes_keep_memory_bounded(rng):
    # 40 distinct shapes through a cache of 2: MLX's compile cache entries must be released with
    # the LRU's (otherwise every shape's traced graph stays alive).
    import resource

    model = dynamic_chain_model(width=64)
    run = EpRun(model, provider_options={"compile_cache_size": 2})
    try:
        for rows in range(1, 11):
            run.run({"x": _x(rng, rows, 64)})
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for rows in range(11, 51):
            run.run({"x": _x(rng, rows, 64)})
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        c = _counters(run)
        assert c["cache.evict"] == 48
        (fused,) = run.report().fused.values()
        assert fused["cache_entries"] == 2
        assert after - before < 64 * 1024, f"peak RSS grew by {(after - before) / 1024:.1f} MiB"
    finally:
        run.close()
