"""Control flow (issue 16): If, Loop and Scan are claimed whole, their bodies translated into the
fused node's MLX graph, and every case matches ORT's CPU EP."""

from __future__ import annotations

import contextlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from opcheck import check_on_ep, refusal
from ort_raises import check_raises_like_cpu
from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, run_cpu

F = TP.FLOAT
I64 = TP.INT64
B = TP.BOOL


def vi(name, dtype, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, value):
    return helper.make_node("Constant", [], [name], name=f"{name}_const",
                            value=numpy_helper.from_array(np.asarray(value), name))


def model(nodes, inputs, outputs, inits=(), opset=21):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = make_model(graph, opset=opset, check=False)
    # Not onnx.checker: it wants a shape on every typed value, and a value whose rank differs
    # between branches or iterations (legal) has none.
    return onnx.shape_inference.infer_shapes(m, strict_mode=True)


def branches_add_mul():
    """then: x + y (outer scope), else: x * y - 1."""
    then_g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["t"], name="then_add")],
                               "then", [], [vi("t", F, None)])
    one = numpy_helper.from_array(np.float32(1.0), "one")
    else_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "y"], ["m"], name="else_mul"),
         helper.make_node("Sub", ["m", "one"], ["e"], name="else_sub")],
        "else", [], [vi("e", F, None)], [one])
    return then_g, else_g


SELECTED = "If: both branches, output selected on the device"


def if_model(cond_from_input=True, cond_value=True):
    then_g, else_g = branches_add_mul()
    nodes, inputs, inits = [], [vi("x", F, [2, 3]), vi("y", F, [2, 3])], []
    if cond_from_input:
        inputs.append(vi("c", B, []))
    else:
        inits.append(numpy_helper.from_array(np.array(cond_value), "c"))
    nodes.append(helper.make_node("If", ["c"], ["out"], name="node", then_branch=then_g,
                                  else_branch=else_g))
    return model(nodes, inputs, [vi("out", F, None)], inits)


@pytest.mark.parametrize("cond", [True, False])
def test_if_runtime_condition(cond, rng):
    x, y = rng.standard_normal((2, 3), dtype=np.float32), rng.standard_normal((2, 3), dtype=np.float32)
    m = if_model()
    run = EpRun(m, strict=True)
    try:
        # One session, both branches: the condition is read per run.
        for c in (cond, not cond, cond):
            feeds = {"x": x, "y": y, "c": np.array(c)}
            got = run.run(feeds)
            np.testing.assert_allclose(got[0], run_cpu(m, feeds)[0], rtol=1e-6)
        report = assert_ran_on_ep(run, ["node"])
        # Small branches of one output shape: both traced, the output selected on the device, so
        # the fused node stays compiled (no host read of the condition).
        assert SELECTED in report.paths(), report.paths()
        assert all(not f.get("eager_only") and f["compiled_runs"] == 3
                   for f in report.fused.values()), report.fused
    finally:
        run.close()


@pytest.mark.parametrize("cond", [True, False])
def test_if_constant_condition(cond, rng):
    # ORT inlines the taken branch of an If on a constant initializer before partitioning: the
    # branch's nodes must all run on the EP (strict session) and match.
    x, y = rng.standard_normal((2, 3), dtype=np.float32), rng.standard_normal((2, 3), dtype=np.float32)
    m = if_model(cond_from_input=False, cond_value=cond)
    run = EpRun(m, strict=True)
    try:
        got = run.run({"x": x, "y": y})
    finally:
        run.close()
    np.testing.assert_allclose(got[0], run_cpu(m, {"x": x, "y": y})[0], rtol=1e-6)


def test_if_shape_derived_condition(rng):
    # cond = (x.shape[0] == 4): fixed by the shape key, so the plan stays compiled.
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu")],
                               "then", [], [vi("t", F, None)])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")],
                               "else", [], [vi("e", F, None)])
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["d0"], name="gather", axis=0),
             helper.make_node("Equal", ["d0", "four"], ["c"], name="eq"),
             helper.make_node("If", ["c"], ["out"], name="node", then_branch=then_g,
                              else_branch=else_g)]
    inits = [numpy_helper.from_array(np.int64(0), "zero"), numpy_helper.from_array(np.int64(4), "four")]
    m = model(nodes, [vi("x", F, ["n", 3])], [vi("out", F, None)], inits)
    run = EpRun(m, strict=True)
    try:
        for n in (4, 2, 4):
            feeds = {"x": rng.standard_normal((n, 3), dtype=np.float32)}
            np.testing.assert_array_equal(run.run(feeds)[0], run_cpu(m, feeds)[0])
        assert_ran_on_ep(run, ["node", "shape", "gather", "eq"])
        fused = run.report().fused
        assert all(not f.get("eager_only") for f in fused.values()), fused
    finally:
        run.close()


def test_if_branches_with_different_ops_and_outputs(rng):
    # Two outputs; the then branch has more nodes and reads an outer-scope value twice.
    then_g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["mm"], name="t_mm"),
         helper.make_node("Tanh", ["mm"], ["t0"], name="t_tanh"),
         helper.make_node("ReduceSum", ["x"], ["t1"], name="t_sum", keepdims=0)],
        "then", [], [vi("t0", F, None), vi("t1", F, None)])
    else_g = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["e0"], name="e_sig"),
         helper.make_node("ReduceMax", ["x"], ["e1"], name="e_max", keepdims=0)],
        "else", [], [vi("e0", F, None), vi("e1", F, None)])
    w = rng.standard_normal((3, 3), dtype=np.float32)
    nodes = [helper.make_node("If", ["c"], ["o0", "o1"], name="node", then_branch=then_g,
                              else_branch=else_g)]
    m = model(nodes, [vi("x", F, [2, 3]), vi("c", B, [])], [vi("o0", F, None), vi("o1", F, None)],
              [numpy_helper.from_array(w, "w")])
    x = rng.standard_normal((2, 3), dtype=np.float32)
    for c in (True, False):
        check_on_ep(m, {"x": x, "c": np.array(c)}, rtol=1e-5, atol=1e-6)


def test_if_branch_output_shape_differs_from_other_branch(rng):
    # Branches of different output shapes: legal, the If output's shape is the taken branch's.
    then_g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["t"], name="t_sum", keepdims=0)],
                               "then", [], [vi("t", F, None)])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="e_id")],
                               "else", [], [vi("e", F, None)])
    nodes = [helper.make_node("If", ["c"], ["out"], name="node", then_branch=then_g, else_branch=else_g)]
    m = model(nodes, [vi("x", F, [2, 3]), vi("c", B, [])], [vi("out", F, None)])
    x = rng.standard_normal((2, 3), dtype=np.float32)
    for c in (True, False):
        check_on_ep(m, {"x": x, "c": np.array(c)})


def gather_or_sum_model():
    """If (c) then x[i] (Gather, a runtime index) else sum(x): the then branch raises on an index
    out of range, which must not fail a run that takes the else branch."""
    then_g = helper.make_graph([helper.make_node("Gather", ["x", "i"], ["t"], name="t_gather", axis=0)],
                               "then", [], [vi("t", F, [])])
    else_g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], name="e_sum", keepdims=0)],
                               "else", [], [vi("e", F, [])])
    nodes = [helper.make_node("If", ["c"], ["out"], name="node", then_branch=then_g, else_branch=else_g)]
    return model(nodes, [vi("x", F, [4]), vi("i", I64, []), vi("c", B, [])], [vi("out", F, None)])


def test_if_selected_branch_checks_hold_only_when_taken(rng):
    m = gather_or_sum_model()
    x = rng.standard_normal(4, dtype=np.float32)
    run = EpRun(m, strict=True)
    try:
        # The out-of-range index sits in the branch not taken: no error, the sum.
        for feeds in ({"x": x, "i": np.array(9, np.int64), "c": np.array(False)},
                      {"x": x, "i": np.array(2, np.int64), "c": np.array(True)},
                      {"x": x, "i": np.array(-9, np.int64), "c": np.array(False)}):
            np.testing.assert_allclose(run.run(feeds)[0], run_cpu(m, feeds)[0], rtol=1e-6)
        # Taken, it raises naming the Gather, and the session still runs.
        with pytest.raises(Exception, match="t_gather"):
            run.run({"x": x, "i": np.array(9, np.int64), "c": np.array(True)})
        feeds = {"x": x, "i": np.array(1, np.int64), "c": np.array(True)}
        np.testing.assert_allclose(run.run(feeds)[0], x[1], rtol=0)
        assert SELECTED in assert_ran_on_ep(run, ["node"]).paths()
    finally:
        run.close()


def test_if_select_switched_off_reads_the_condition_on_the_host(monkeypatch):
    # Read when the plan is translated (the session's first run): off, the fused node runs
    # eagerly, the condition read on the host, and the values are the same.
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_IF_SELECT", "0")
    m = if_model()
    run = EpRun(m, strict=True)
    try:
        x = np.ones((2, 3), np.float32)
        for c in (True, False):
            feeds = {"x": x, "y": x, "c": np.array(c)}
            np.testing.assert_array_equal(run.run(feeds)[0], run_cpu(m, feeds)[0])
        report = assert_ran_on_ep(run, ["node"])
        assert SELECTED not in report.paths(), report.paths()
        assert all(f["eager_only"] for f in report.fused.values()), report.fused
    finally:
        run.close()


def test_if_condition_with_many_elements_raises(rng):
    m = if_model()
    x, y = rng.standard_normal((2, 3), dtype=np.float32), rng.standard_normal((2, 3), dtype=np.float32)
    # A rank-0 condition is declared, so ORT's CPU EP rejects a 2-element one before running.
    with pytest.raises(Exception):
        run_cpu(m, {"x": x, "y": y, "c": np.array([True, False])})


def test_if_refuses_unclaimed_body_node():
    then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"], name="t_id")],
                               "then", [], [vi("t", TP.STRING, None)])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="e_id")],
                               "else", [], [vi("e", TP.STRING, None)])
    nodes = [helper.make_node("If", ["c"], ["out"], name="node", then_branch=then_g, else_branch=else_g)]
    m = model(nodes, [vi("x", TP.STRING, [2]), vi("c", B, [])], [vi("out", TP.STRING, None)])
    reason = refusal(m, "If")
    assert reason is not None and "then_branch" in reason, reason


# ---- Loop ------------------------------------------------------------------------------------

def loop_body(cond_node=None, extra_scan=True):
    """Body: carried x -> x * 1.5 + i (float), scan output x; cond passes through unless given."""
    nodes = [helper.make_node("Cast", ["i"], ["fi"], name="b_cast", to=F),
             helper.make_node("Mul", ["x_in", "k"], ["xm"], name="b_mul"),
             helper.make_node("Add", ["xm", "fi"], ["x_out"], name="b_add")]
    outs = [vi("cond_out", B, []), vi("x_out", F, None)]
    if cond_node is None:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_cond"))
    else:
        nodes += cond_node
    if extra_scan:
        nodes.append(helper.make_node("Neg", ["x_out"], ["scan"], name="b_neg"))
        outs.append(vi("scan", F, None))
    k = numpy_helper.from_array(np.float32(1.5), "k")
    return helper.make_graph(nodes, "body", [vi("i", I64, []), vi("cond_in", B, []), vi("x_in", F, [3])],
                             outs, [k])


def test_loop_constant_trip_count_unrolls(rng):
    nodes = [helper.make_node("Loop", ["M", "", "x"], ["xf", "scan"], name="node", body=loop_body())]
    m = model(nodes, [vi("x", F, [2, 3])], [vi("xf", F, None), vi("scan", F, None)],
              [numpy_helper.from_array(np.int64(5), "M")])
    run = EpRun(m, strict=True)
    try:
        for _ in range(2):
            feeds = {"x": rng.standard_normal((2, 3), dtype=np.float32)}
            got, want = run.run(feeds), run_cpu(m, feeds)
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-6)
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()


@pytest.mark.parametrize("trip", [0, 1, 7])
def test_loop_runtime_trip_count(trip, rng):
    nodes = [helper.make_node("Loop", ["M", "", "x"], ["xf", "scan"], name="node", body=loop_body())]
    m = model(nodes, [vi("x", F, [2, 3]), vi("M", I64, [])], [vi("xf", F, None), vi("scan", F, None)])
    check_on_ep(m, {"x": rng.standard_normal((2, 3), dtype=np.float32), "M": np.array(trip, np.int64)})


def _sum_below(limit_name):
    # cond_out = ReduceSum(x_out) < limit (a data-dependent termination)
    return [helper.make_node("ReduceSum", ["x_out"], ["s"], name="b_sum", keepdims=0),
            helper.make_node("Less", ["s", limit_name], ["cond_out"], name="b_less")]


@pytest.mark.parametrize("with_trip", [False, True])
def test_loop_condition(with_trip, rng):
    body = loop_body(cond_node=_sum_below("limit"))
    nodes = [helper.make_node("Loop", ["M" if with_trip else "", "c", "x"], ["xf", "scan"], name="node",
                              body=body)]
    inputs = [vi("x", F, [2, 3]), vi("c", B, []), vi("limit", F, [])]
    if with_trip:
        inputs.append(vi("M", I64, []))
    m = model(nodes, inputs, [vi("xf", F, None), vi("scan", F, None)])
    x = np.abs(rng.standard_normal((2, 3), dtype=np.float32)) + 0.1
    for limit, c in ((200.0, True), (1e9, True), (5.0, False)):
        feeds = {"x": x, "c": np.array(c), "limit": np.array(limit, np.float32)}
        if with_trip:
            feeds["M"] = np.array(6, np.int64)
        check_on_ep(m, feeds, rtol=1e-5)


def test_loop_trip_count_ignores_body_condition_like_cpu(rng):
    # A trip count and no condition input: the body's condition output still stops the loop on
    # ORT's CPU EP; the EP does the same.
    body = loop_body(cond_node=_sum_below("limit"))
    nodes = [helper.make_node("Loop", ["M", "", "x"], ["xf", "scan"], name="node", body=body)]
    m = model(nodes, [vi("x", F, [2, 3]), vi("limit", F, [])], [vi("xf", F, None), vi("scan", F, None)],
              [numpy_helper.from_array(np.int64(8), "M")])
    x = np.abs(rng.standard_normal((2, 3), dtype=np.float32)) + 0.1
    check_on_ep(m, {"x": x, "limit": np.array(40.0, np.float32)})


def test_loop_carried_value_grows(rng):
    # A carried sequence grows by one row per iteration (Concat): its shape changes every step.
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_cond"),
         helper.make_node("Cast", ["i"], ["fi"], name="b_cast", to=F),
         helper.make_node("Add", ["row", "fi"], ["r2"], name="b_add"),
         helper.make_node("Concat", ["seq_in", "r2"], ["seq_out"], name="b_cat", axis=0)],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("seq_in", F, ["n", 4])],
        [vi("cond_out", B, []), vi("seq_out", F, None)])
    nodes = [helper.make_node("Loop", ["M", "", "seq"], ["seq_f"], name="node", body=body)]
    m = model(nodes, [vi("seq", F, [1, 4]), vi("row", F, [1, 4]), vi("M", I64, [])], [vi("seq_f", F, None)])
    feeds = {"seq": rng.standard_normal((1, 4), dtype=np.float32),
             "row": rng.standard_normal((1, 4), dtype=np.float32), "M": np.array(5, np.int64)}
    check_on_ep(m, feeds)


def test_loop_scan_output_changing_shape_raises(rng):
    # The scan output is the growing sequence itself: stacking needs one shape; both EPs refuse
    # the run.
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_cond"),
         helper.make_node("Concat", ["seq_in", "row"], ["seq_out"], name="b_cat", axis=0),
         helper.make_node("Identity", ["seq_out"], ["scan"], name="b_scan")],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("seq_in", F, ["n", 4])],
        [vi("cond_out", B, []), vi("seq_out", F, None), vi("scan", F, None)])
    nodes = [helper.make_node("Loop", ["M", "", "seq"], ["seq_f", "scan"], name="node", body=body)]
    m = model(nodes, [vi("seq", F, [1, 4]), vi("row", F, [1, 4]), vi("M", I64, [])],
              [vi("seq_f", F, None), vi("scan", F, None)])
    seq = rng.standard_normal((1, 4), dtype=np.float32)
    row = rng.standard_normal((1, 4), dtype=np.float32)
    check_raises_like_cpu(m, {"seq": seq, "row": row, "M": np.array(3, np.int64)},
                          {"seq": seq, "row": row, "M": np.array(1, np.int64)}, match="scan output 0")


def test_if_nested_in_loop(rng):
    # Inside the body: If (i is even) then x + 1 else x * w (w from the outermost graph).
    then_g = helper.make_graph([helper.make_node("Add", ["x_in", "one"], ["t"], name="t_add")],
                               "then", [], [vi("t", F, None)])
    else_g = helper.make_graph([helper.make_node("Mul", ["x_in", "w"], ["e"], name="e_mul")],
                               "else", [], [vi("e", F, None)])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_cond"),
         helper.make_node("Mod", ["i", "two"], ["r"], name="b_mod"),
         helper.make_node("Equal", ["r", "zero"], ["even"], name="b_eq"),
         helper.make_node("If", ["even"], ["x_out"], name="b_if", then_branch=then_g, else_branch=else_g)],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("x_in", F, [3])],
        [vi("cond_out", B, []), vi("x_out", F, None)],
        [numpy_helper.from_array(np.int64(2), "two"), numpy_helper.from_array(np.int64(0), "zero"),
         numpy_helper.from_array(np.float32(1.0), "one")])
    nodes = [helper.make_node("Loop", ["M", "", "x"], ["xf"], name="node", body=body)]
    m = model(nodes, [vi("x", F, [3]), vi("w", F, [3]), vi("M", I64, [])], [vi("xf", F, None)])
    feeds = {"x": rng.standard_normal(3, dtype=np.float32), "w": rng.standard_normal(3, dtype=np.float32),
             "M": np.array(5, np.int64)}
    check_on_ep(m, feeds)


def greedy_decoding_model(vocab=7, dim=5, max_len=6, eos=3):
    """Greedy decoding: state h; each step logits = h @ W, token = argmax, h = tanh(E[token] + h),
    tokens concatenated; stops at EOS (cond from Equal) or max_len."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "W"], ["logits"], name="b_mm"),
         helper.make_node("ArgMax", ["logits"], ["tok"], name="b_argmax", axis=1, keepdims=0),
         helper.make_node("Gather", ["E", "tok"], ["emb"], name="b_gather", axis=0),
         helper.make_node("Add", ["emb", "h_in"], ["pre"], name="b_add"),
         helper.make_node("Tanh", ["pre"], ["h_out"], name="b_tanh"),
         helper.make_node("Concat", ["toks_in", "tok"], ["toks_out"], name="b_cat", axis=0),
         helper.make_node("Equal", ["tok", "eos"], ["is_eos"], name="b_eq"),
         helper.make_node("Not", ["is_eos"], ["not_eos"], name="b_not"),
         helper.make_node("Squeeze", ["not_eos", "ax0"], ["cond_out"], name="b_squeeze")],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("h_in", F, [1, dim]), vi("toks_in", I64, ["n"])],
        [vi("cond_out", B, []), vi("h_out", F, [1, dim]), vi("toks_out", I64, None)])
    nodes = [helper.make_node("Loop", ["M", "go", "h0", "toks0"], ["h_f", "toks"], name="node", body=body)]
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.standard_normal((dim, vocab)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal((vocab, dim)).astype(np.float32), "E"),
             numpy_helper.from_array(np.array([eos], np.int64), "eos"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             numpy_helper.from_array(np.int64(max_len), "M"),
             numpy_helper.from_array(np.zeros((0,), np.int64), "toks0")]
    return model(nodes, [vi("h0", F, [1, dim]), vi("go", B, [])], [vi("h_f", F, None), vi("toks", I64, None)],
                 inits)


def test_greedy_decoding_loop(rng):
    m = greedy_decoding_model()
    for _ in range(4):
        check_on_ep(m, {"h0": rng.standard_normal((1, 5), dtype=np.float32), "go": np.array(True)})


UNROLLED = "Loop: unrolled on its latest run's iteration count, conditions checked on the device"


def gather_steps_model(host_read=False, trip_input=True):
    """Loop over i while i + 1 < limit (at most M, a graph input or the constant 9): x += table[i]
    (Gather by a runtime index: out of range once i passes the table). With host_read, x also
    adds sum(Range(0, i + 1)), whose size the EP reads on the host."""
    nodes = [helper.make_node("Gather", ["table", "i"], ["v"], name="b_gather", axis=0),
             helper.make_node("Add", ["x_in", "v"], ["x_out0" if host_read else "x_out"], name="b_add"),
             helper.make_node("Add", ["i", "one"], ["i1"], name="b_next"),
             helper.make_node("Less", ["i1", "limit"], ["cond_out"], name="b_less"),
             helper.make_node("Neg", ["v"], ["scan"], name="b_neg")]
    if host_read:
        nodes += [helper.make_node("Range", ["zero", "i1", "one"], ["r"], name="b_range"),
                  helper.make_node("ReduceSum", ["r"], ["rs"], name="b_rsum", keepdims=0),
                  helper.make_node("Cast", ["rs"], ["rf"], name="b_rcast", to=F),
                  helper.make_node("Add", ["x_out0", "rf"], ["x_out"], name="b_radd")]
    body = helper.make_graph(
        nodes, "body", [vi("i", I64, []), vi("cond_in", B, []), vi("x_in", F, [])],
        [vi("cond_out", B, []), vi("x_out", F, []), vi("scan", F, [])],
        [numpy_helper.from_array(np.int64(1), "one"), numpy_helper.from_array(np.int64(0), "zero")])
    loop = helper.make_node("Loop", ["M", "", "x"], ["xf", "scan"], name="node", body=body)
    inputs = [vi("x", F, []), vi("table", F, [4]), vi("limit", I64, [])]
    inits = []
    if trip_input:
        inputs.append(vi("M", I64, []))
    else:
        inits.append(numpy_helper.from_array(np.int64(9), "M"))
    return model([loop], inputs, [vi("xf", F, None), vi("scan", F, None)], inits)


def gather_feeds(table, limit, trip=None):
    feeds = {"x": np.array(0.5, np.float32), "table": table, "limit": np.array(limit, np.int64)}
    if trip is not None:
        feeds["M"] = np.array(trip, np.int64)
    return feeds


@contextlib.contextmanager
def gather_session(rng, **model_args):
    """(session, model, table) of gather_steps_model, the session closed afterwards."""
    m = gather_steps_model(**model_args)
    run = EpRun(m, strict=True)
    try:
        yield run, m, rng.standard_normal(4, dtype=np.float32)
    finally:
        run.close()


def run_limits(run, m, table, limits, trip=None):
    """Runs the gather_steps_model session once per limit, each against ORT's CPU EP."""
    for limit in limits:
        feeds = gather_feeds(table, limit, trip)
        for g, w in zip(run.run(feeds), run_cpu(m, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_loop_unrolling_switched_off(monkeypatch, rng):
    # Off: the Loop with a runtime condition stays eager (read when the node is first translated).
    monkeypatch.setenv("ONNXRUNTIME_EP_MLX_LOOP_SPECULATE", "0")
    with gather_session(rng, trip_input=False) as (run, m, table):
        run_limits(run, m, table, (4, 4, 4, 3))
        report = assert_ran_on_ep(run, ["node"])
        assert UNROLLED not in report.paths(), report.paths()
        assert report.counters().get("compute.compiled", 0) == 0, report.counters()


def test_loop_body_reading_its_iteration_number_on_the_host_unrolls(rng):
    # Range's size comes from the iteration number, which each unrolled iteration fixes at trace
    # time: the Loop still compiles on its latest count (misses redone eagerly, same values).
    with gather_session(rng, host_read=True, trip_input=False) as (run, m, table):
        run_limits(run, m, table, (4, 4, 4, 2, 4))
        report = assert_ran_on_ep(run, ["node"])
        assert UNROLLED in report.paths(), report.paths()
        assert report.counters().get("compute.compiled", 0) == 2, report.counters()


def test_loop_with_runtime_trip_count_stays_eager(rng):
    # A trip count read on the host each run: never unrolled; errors of iterations that run raise
    # naming the node, and the session still runs.
    with gather_session(rng) as (run, m, table):
        run_limits(run, m, table, (4, 4, 2, 3), trip=9)
        with pytest.raises(Exception, match="b_gather"):
            run.run(gather_feeds(table, 6, trip=9))
        run_limits(run, m, table, (3,), trip=9)
        assert UNROLLED not in assert_ran_on_ep(run, ["node"]).paths()


def test_loop_compiled_on_its_latest_iteration_count(rng):
    # A constant trip count and a runtime condition: the first run is eager and counts the
    # iterations; later runs are compiled with the Loop unrolled that many times, each condition
    # checked on the device. A run that ends elsewhere misses, and is redone eagerly (exact); the
    # next run compiles on the new count.
    with gather_session(rng, trip_input=False) as (run, m, table):
        run_limits(run, m, table, (4, 4, 4, 4, 2, 2, 2, 4))
        report = assert_ran_on_ep(run, ["node"])
        assert UNROLLED in report.paths(), report.paths()
        counters = report.counters()
        assert counters.get("compute.compiled", 0) >= 4, counters
        assert counters.get("compile.speculation_miss", 0) == 2, counters
        # A compiled run whose Loop runs on past the table: the trace's assumption misses first,
        # and the eager run raises naming the Gather, as ORT's CPU EP does; the session still runs.
        with pytest.raises(Exception, match="b_gather"):
            run.run(gather_feeds(table, 6))
        run_limits(run, m, table, (3,))


def test_loop_unrolling_stops_after_repeated_misses(rng):
    # Every run ends at another count: after a few misses the plan runs eagerly (chunks), still
    # exact.
    with gather_session(rng, trip_input=False) as (run, m, table):
        run_limits(run, m, table, (1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4))
        counters = assert_ran_on_ep(run, ["node"]).counters()
        assert counters.get("compile.speculation_miss", 0) <= 4, counters
        assert counters.get("compute.eager", 0) >= 6, counters


# ---- Scan ------------------------------------------------------------------------------------

def scan_model(in_dirs=None, in_axes=None, out_dirs=None, out_axes=None, x_shape=(4, 3), opset=21):
    """Running sum: state s (shape [3]) += slice; scan outputs s and slice * 2."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "xt"], ["s_out"], name="b_add"),
         helper.make_node("Mul", ["xt", "two"], ["y"], name="b_mul")],
        "body", [vi("s_in", F, [3]), vi("xt", F, [3])], [vi("s_out", F, [3]), vi("s_scan", F, [3]), vi("y", F, [3])])
    body.node.append(helper.make_node("Identity", ["s_out"], ["s_scan"], name="b_id"))
    body.initializer.append(numpy_helper.from_array(np.float32(2.0), "two"))
    attrs = {"num_scan_inputs": 1}
    if in_dirs is not None:
        attrs["scan_input_directions"] = in_dirs
    if in_axes is not None:
        attrs["scan_input_axes"] = in_axes
    if out_dirs is not None:
        attrs["scan_output_directions"] = out_dirs
    if out_axes is not None:
        attrs["scan_output_axes"] = out_axes
    nodes = [helper.make_node("Scan", ["s0", "x"], ["sf", "ss", "ys"], name="node", body=body, **attrs)]
    return model(nodes, [vi("s0", F, [3]), vi("x", F, list(x_shape))],
                 [vi("sf", F, None), vi("ss", F, None), vi("ys", F, None)], opset=opset)


@pytest.mark.parametrize("in_dirs,in_axes,out_dirs,out_axes,x_shape", [
    (None, None, None, None, (4, 3)),
    ([1], None, None, None, (4, 3)),
    (None, [1], None, None, (3, 5)),
    ([1], [-1], [1, 0], [0, 1], (3, 5)),
    (None, None, [0, 1], [-1, -2], (1, 3)),
], ids=str)
def test_scan(in_dirs, in_axes, out_dirs, out_axes, x_shape, rng):
    m = scan_model(in_dirs, in_axes, out_dirs, out_axes, x_shape)
    feeds = {"s0": rng.standard_normal(3, dtype=np.float32),
             "x": rng.standard_normal(x_shape, dtype=np.float32)}
    check_on_ep(m, feeds)


def test_scan_opset9(rng):
    m = scan_model(x_shape=(4, 3), opset=9)
    check_on_ep(m, {"s0": rng.standard_normal(3, dtype=np.float32),
                    "x": rng.standard_normal((4, 3), dtype=np.float32)})


def test_scan_opset8_refused():
    # Scan-8 has a batch axis and sequence lengths: left to ORT's CPU EP, with the reason.
    body = helper.make_graph([helper.make_node("Add", ["s_in", "xt"], ["s_out"], name="b_add")],
                             "body", [vi("s_in", F, [3]), vi("xt", F, [3])], [vi("s_out", F, [3])])
    nodes = [helper.make_node("Scan", ["", "s0", "x"], ["sf"], name="node", body=body,
                              num_scan_inputs=1)]
    m = model(nodes, [vi("s0", F, [2, 3]), vi("x", F, [2, 4, 3])], [vi("sf", F, None)], opset=8)
    reason = refusal(m, "Scan")
    assert reason is not None and "opset 8" in reason, reason


def test_if_declared_output_shape_is_not_checked_like_cpu(rng):
    # ORT's CPU EP returns the taken branch's output even where it differs from the shape the If
    # declares; the EP does the same (no error of its own).
    then_g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["t"], name="t_sum", keepdims=0)],
                               "then", [], [vi("t", F, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e"], name="e_id")],
                               "else", [], [vi("e", F, [2, 3])])
    nodes = [helper.make_node("If", ["c"], ["out"], name="node", then_branch=then_g, else_branch=else_g)]
    graph = helper.make_graph(nodes, "g", [vi("x", F, [2, 3]), vi("c", B, [])], [vi("out", F, [2, 3])])
    m = make_model(graph, opset=21, check=False)
    x = rng.standard_normal((2, 3), dtype=np.float32)
    for c in (True, False):
        check_on_ep(m, {"x": x, "c": np.array(c)})


def test_cpu_claim_auto_leaves_control_flow_to_ort():
    # Under cpu_claim=auto on MLX's CPU backend control flow is not claimed (not measured faster
    # than ORT's CPU EP); its bodies are then partitioned like any graph.
    m = if_model()
    run = EpRun(m, provider_options={"cpu_claim": "auto"})
    try:
        x = np.ones((2, 3), np.float32)
        run.run({"x": x, "y": x, "c": np.array(True)})
        reason = run.report().refused().get("If", {}).get("reason", "")
    finally:
        run.close()
    from ortmlx.testing import mlx_backend
    if mlx_backend() == "cpu":
        assert "cpu_claim" in reason, reason
