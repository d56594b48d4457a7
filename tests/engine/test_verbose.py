"""ONNXRUNTIME_EP_MLX_VERBOSE=1: the session summary on stderr at EP teardown, numbers consistent."""

from tests.engine.util import parse_summary, run_python

SCRIPT = """
    import gc, numpy as np, ortmlx
    from ortmlx.testing import EpRun
    from tests.engine.util import dynamic_chain_model
    from tests.plugin.test_plugin import _chain_model
    ortmlx.register_execution_provider_library()
    run = EpRun(dynamic_chain_model(), provider_options={"compile_cache_size": 2})
    for rows in (1, 2, 1, 3, 4, 1):
        run.run({"x": np.full((rows, 8), 0.25, np.float32)})
    run.close(); del run; gc.collect()
    # a second session with a refused op (RandomUniformLike stays on CPU), two fused subgraphs
    mixed = EpRun(_chain_model(["Exp", "RandomUniformLike", "Tanh", "Abs"]))
    mixed.run({"x": np.full((2, 3), 0.5, np.float32)})
    mixed.close(); del mixed; gc.collect()
    # a third session: one run fails inside the EP (shapes do not broadcast), one succeeds
    from tests.engine.test_compile_cache import bad_add_model
    bad = EpRun(bad_add_model())
    try:
        bad.run({"a": np.ones(3, np.float32), "b": np.ones(4, np.float32)})
    except Exception:
        pass
    bad.run({"a": np.ones(3, np.float32), "b": np.ones(3, np.float32)})
    bad.close(); del bad; gc.collect()
    print("done")
"""


def test_verbose_summary_numbers_add_up():
    out = run_python(SCRIPT, {"ONNXRUNTIME_EP_MLX_VERBOSE": "1"})
    assert "done" in out.stdout
    first, second, third = out.stderr.split("===== MLX EP session summary =====")[1:4]
    s = parse_summary("===== MLX EP session summary =====" + first)
    claimed, total, pct, clusters, calls = s["claim"]
    assert (claimed, total, clusters) == (5, 5, 1) and pct == 100.0 and calls >= 1
    ran, total2, pct2, assigned, fused, fused_ran = s["nodes"]
    assert (ran, total2, assigned, fused, fused_ran) == (5, 5, 5, 1, 1)
    runs, compiled, eager, failed, hit, miss, retrace, evicted, fallback = s["compute"]
    assert runs == 6 and failed == 0
    assert compiled + eager + failed == runs
    assert hit + miss + retrace == compiled + fallback
    # shapes 1, 2, 1, 3, 4, 1 through a cache of 2: M M H M(evicts 2) M(evicts 1) M(evicts 3)
    assert (hit, miss, retrace, evicted, fallback) == (1, 5, 0, 3, 0)
    translate, compile_ms, compiles, eval_ms, copy, queue, other, total_ms = s["timing"]
    assert compiles == miss + retrace
    parts = translate + compile_ms + eval_ms + copy + queue + other
    assert abs(parts - total_ms) <= 0.01 + 1e-3 * total_ms

    s2 = parse_summary("===== MLX EP session summary =====" + second)
    claimed, total, pct, clusters, _ = s2["claim"]
    assert (claimed, total, clusters) == (3, 4, 2) and pct == 75.0
    ran, _, pct_ran, assigned, fused, fused_ran = s2["nodes"]
    assert (ran, assigned, fused, fused_ran) == (3, 3, 2, 2) and pct_ran == 75.0
    assert "- RandomUniformLike x1: no MLX implementation of RandomUniformLike" in second
    runs, compiled, eager, failed, hit, miss, retrace, _, _ = s2["compute"]
    assert (runs, compiled, miss) == (2, 2, 2)  # one run of each fused subgraph

    s3 = parse_summary("===== MLX EP session summary =====" + third)
    runs, compiled, eager, failed, hit, miss, retrace, evicted, fallback = s3["compute"]
    assert (runs, compiled, eager, failed) == (2, 1, 0, 1)
    assert hit + miss + retrace == compiled + fallback


def test_verbose_must_be_exactly_one():
    # Reference semantics: ONNXRUNTIME_EP_MLX_VERBOSE must be exactly "1".
    out = run_python(SCRIPT, {"ONNXRUNTIME_EP_MLX_VERBOSE": "true"})
    assert "MLX EP session summary" not in out.stderr


def test_verbose_provider_option():
    code = SCRIPT.replace('{"compile_cache_size": 2}', '{"compile_cache_size": 2, "verbose": 1}')
    out = run_python(code)
    assert out.stderr.count("===== MLX EP session summary =====") == 1
