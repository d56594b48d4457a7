import numpy as np
import onnx
import pytest
from onnx import helper

from opcheck import NP_TO_ONNX, check_on_ep, refusal, single_node_model
from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, random_array, run_cpu

I64 = np.int64


def const_input_model(op, x, name, values, attrs=None, opset=21):
    """op(x, <constant int64 input `name`>) with the constant as an initializer."""
    c = np.asarray(values, dtype=I64)
    return single_node_model(op, {"x": x, name: c}, attrs=attrs, initializers={name: c}, opset=opset)


def dynamic_model(op, x_dims, dtype, attrs=None, const_inputs=None, opset=21):
    """op(x, consts...) where x has symbolic dims (strings in x_dims): the EP only learns the
    shape at run time."""
    const_inputs = const_inputs or {}
    x = helper.make_tensor_value_info("x", NP_TO_ONNX[np.dtype(dtype)], list(x_dims))
    inits = [onnx.numpy_helper.from_array(np.asarray(v, dtype=I64), k) for k, v in const_inputs.items()]
    node = helper.make_node(op, ["x", *const_inputs], ["out0"], name="node", **(attrs or {}))
    # The output has a type but no shape (its rank may depend on the live input): valid ONNX, but
    # onnx.checker insists on a shape for graph outputs, so it is not run here.
    out = helper.make_tensor_value_info("out0", NP_TO_ONNX[np.dtype(dtype)], None)
    return make_model(helper.make_graph([node], "g", [x], [out], inits), opset=opset, check=False)


def finish(graph, opset=21):
    """Model with ONNX-inferred output types (the EP needs them), checked."""
    model = onnx.shape_inference.infer_shapes(make_model(graph, opset=opset, check=False))
    onnx.checker.check_model(model)
    return model


# ---------------------------------------------------------------- Reshape

RESHAPES = [
    ((2, 3, 4), [6, 4], 0),
    ((2, 3, 4), [-1, 4], 0),
    ((2, 3, 4), [0, -1], 0),  # 0 copies dim 0
    ((2, 3, 4), [0, 0, 2, 2], 0),
    ((2, 3, 4), [-1], 0),
    ((2, 3, 4), [4, 1, 3, 2, 1], 0),
    ((1,), [], 0),  # to a scalar
    ((), [1, 1], 0),
    ((0, 3), [3, 0], 1),  # allowzero: 0 is a real zero-sized dim
    ((0, 3), [0, 3], 0),
    ((0, 3), [-1, 3], 0),
    ((2, 6), [3, 2, 2], 1),  # allowzero without zeros: a plain reshape
]


@pytest.mark.parametrize("case", RESHAPES, ids=str)
def test_reshape(case, rng):
    shape, spec, allowzero = case
    x = random_array(rng, shape)
    model = const_input_model("Reshape", x, "shape", spec, attrs={"allowzero": allowzero})
    check_on_ep(model, {"x": x})


@pytest.mark.parametrize("opset", [5, 13, 14, 19])
def test_reshape_opsets(opset, rng):
    x = random_array(rng, (2, 3, 4), np.int64)
    check_on_ep(const_input_model("Reshape", x, "shape", [4, -1], opset=opset), {"x": x})


@pytest.mark.parametrize("case", [c for c in RESHAPES if c[2] == 0 and c[1] != []], ids=str)
@pytest.mark.parametrize("opset", [1, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])  # the types Reshape 1-4 defines
def test_reshape_shape_attribute(case, opset, dtype, rng):
    # Reshape 1-4: the target is the `shape` attribute (0 copies a dim, one -1 is inferred).
    shape, spec, _ = case
    x = random_array(rng, shape, dtype)
    # ONNX infers no output type for Reshape 1-4 (the checker would reject the untyped output).
    model = single_node_model("Reshape", {"x": x}, attrs={"shape": spec}, opset=opset,
                              check=False)
    check_on_ep(model, {"x": x})


def test_reshape_shape_attribute_refusals():
    from isolated import loose_model

    x = [("x", np.float32, [2, 3, 4])]
    for spec, why in [([-1, -1], "more than one -1"), ([2, -2, 3], "invalid"),
                      ([0, 0, 0, 0], "beyond the input rank")]:
        model = loose_model("Reshape", x, attrs={"shape": spec}, opset=4)
        assert why in (refusal(model, "Reshape") or ""), spec


def test_reshape_dynamic_input_shape(rng):
    # 0 and -1 resolve against the live shape.
    model = dynamic_model("Reshape", ["B", "S", 8], np.float32, const_inputs={"shape": [0, -1, 2, 4]})
    for shape in [(2, 3, 8), (1, 5, 8)]:
        x = random_array(rng, shape)
        check_on_ep(model, {"x": x})


def test_reshape_runtime_shape(rng):
    # A shape fed at run time is read on the host each run (the plan runs eagerly), so a new
    # shape value with the same input shape gives the right output.
    x = random_array(rng, (2, 6))
    node = helper.make_node("Reshape", ["x", "shape"], ["out0"], name="node")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 6]),
                      helper.make_tensor_value_info("shape", onnx.TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("out0", onnx.TensorProto.FLOAT, None)])
    model = make_model(graph, check=False)
    run = EpRun(model, strict=True)
    try:
        for spec in ([3, 4], [-1, 2], [12], [0, 2, 3]):
            feeds = {"x": x, "shape": np.array(spec, dtype=I64)}
            got = run.run(feeds)[0]
            np.testing.assert_array_equal(got, run_cpu(model, feeds)[0])
        assert_ran_on_ep(run, ["node"])
    finally:
        run.close()


# ---------------------------------------------------------------- Transpose

@pytest.mark.parametrize("case", [((2, 3, 4), None), ((2, 3, 4), [1, 0, 2]), ((2, 3, 4), [2, 0, 1]),
                                  ((5,), None), ((), None), ((2, 0, 3), [2, 1, 0]),
                                  ((1, 2, 1, 3), [3, 1, 0, 2])], ids=str)
def test_transpose(case, rng):
    shape, perm = case
    x = random_array(rng, shape)
    attrs = {"perm": perm} if perm is not None else None
    check_on_ep(single_node_model("Transpose", {"x": x}, attrs=attrs), {"x": x})


@pytest.mark.parametrize("dtype", [np.float16, np.int64, np.int8, np.uint16, np.bool_])
@pytest.mark.parametrize("opset", [1, 13, 21])
def test_transpose_types_and_opsets(dtype, opset, rng):
    x = random_array(rng, (3, 4), dtype)
    check_on_ep(single_node_model("Transpose", {"x": x}, opset=opset), {"x": x})


def test_transpose_float64_is_refused(rng):
    x = rng.uniform(size=(2, 3))
    assert "float64" in refusal(single_node_model("Transpose", {"x": x}), "Transpose")


# ---------------------------------------------------------------- Unsqueeze / Squeeze

UNSQUEEZE = [((3, 4), [0]), ((3, 4), [-1]), ((3, 4), [0, 3]), ((3, 4), [1, -1]), ((), [0]),
             ((), [0, 1]), ((0, 2), [1]), ((2, 3), [2, 0, 4])]


@pytest.mark.parametrize("case", UNSQUEEZE, ids=str)
@pytest.mark.parametrize("opset", [11, 13])
def test_unsqueeze(case, opset, rng):
    shape, axes = case
    x = random_array(rng, shape)
    if opset < 13:  # axes attribute
        model = single_node_model("Unsqueeze", {"x": x}, attrs={"axes": axes}, opset=opset)
    else:  # axes input
        model = const_input_model("Unsqueeze", x, "axes", axes, opset=opset)
    check_on_ep(model, {"x": x})


def test_unsqueeze_opset1_and_int(rng):
    x = random_array(rng, (2, 3), np.int32)
    check_on_ep(single_node_model("Unsqueeze", {"x": x}, attrs={"axes": [1]}, opset=1), {"x": x})


def test_unsqueeze_non_constant_axes_are_claimed(rng):
    """Axes fed at run time are claimed (read on the host each run)."""
    node = helper.make_node("Unsqueeze", ["x", "axes"], ["out0"], name="node")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3]),
                      helper.make_tensor_value_info("axes", onnx.TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("out0", onnx.TensorProto.FLOAT, ["a", "b", "c"])])
    x = random_array(rng, (2, 3))
    check_on_ep(finish(graph), {"x": x, "axes": np.array([-1], np.int64)})


SQUEEZE = [((1, 3, 1, 4), [0]), ((1, 3, 1, 4), [-2]), ((1, 3, 1, 4), [0, 2]), ((1, 3, 1, 4), None),
           ((3, 4), None), ((1,), None), ((1,), [0]), ((1, 0, 1), None), ((1, 0, 1), [2])]


@pytest.mark.parametrize("case", SQUEEZE, ids=str)
@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze(case, opset, rng):
    shape, axes = case
    x = random_array(rng, shape)
    if axes is None:
        model = single_node_model("Squeeze", {"x": x}, opset=opset)
    elif opset < 13:
        model = single_node_model("Squeeze", {"x": x}, attrs={"axes": axes}, opset=opset)
    else:
        model = const_input_model("Squeeze", x, "axes", axes, opset=opset)
    check_on_ep(model, {"x": x})


def test_squeeze_without_axes_uses_live_shape(rng):
    # A symbolic dim that is 1 at run time is squeezed; the same model keeps it when it is not 1.
    model = dynamic_model("Squeeze", ["N", 3, 1], np.float32)
    for shape in [(1, 3, 1), (4, 3, 1)]:
        x = random_array(rng, shape)
        got = check_on_ep(model, {"x": x})
        assert got[0].shape == tuple(d for d in shape if d != 1)


# ---------------------------------------------------------------- Flatten

@pytest.mark.parametrize("case", [((2, 3, 4), 1), ((2, 3, 4), 0), ((2, 3, 4), 3), ((2, 3, 4), -1),
                                  ((2, 3, 4), -3), ((5,), 1), ((2, 0, 3), 2), ((1, 1), 1)], ids=str)
def test_flatten(case, rng):
    shape, axis = case
    x = random_array(rng, shape)
    check_on_ep(single_node_model("Flatten", {"x": x}, attrs={"axis": axis}), {"x": x})


@pytest.mark.parametrize("opset", [9, 11, 13])
def test_flatten_default_axis_and_opsets(opset, rng):
    x = random_array(rng, (2, 3, 4), np.int64)
    check_on_ep(single_node_model("Flatten", {"x": x}, opset=opset), {"x": x})


# ---------------------------------------------------------------- Concat

CONCATS = [
    ([(2, 3), (2, 5)], 1),
    ([(2, 3), (4, 3), (1, 3)], 0),
    ([(2, 3, 4), (2, 1, 4)], -2),
    ([(2, 0), (2, 3)], 1),  # an empty input
    ([(0, 3), (0, 3)], 0),  # all empty
    ([(3,)], 0),  # a single input
    ([(1,), (1,), (1,), (1,), (1,)], -1),
]


@pytest.mark.parametrize("case", CONCATS, ids=str)
def test_concat(case, rng):
    shapes, axis = case
    feeds = {f"x{i}": random_array(rng, s) for i, s in enumerate(shapes)}
    check_on_ep(single_node_model("Concat", feeds, attrs={"axis": axis}), feeds)


@pytest.mark.parametrize("dtype", [np.int64, np.bool_, np.float16, np.uint8])
@pytest.mark.parametrize("opset", [4, 11, 13])
def test_concat_types_and_opsets(dtype, opset, rng):
    axis = 0 if opset < 11 else -1  # negative axes are valid from opset 11
    feeds = {"a": random_array(rng, (3,), dtype), "b": random_array(rng, (2,), dtype)}
    check_on_ep(single_node_model("Concat", feeds, attrs={"axis": axis}, opset=opset), feeds)


def test_concat_with_constant_input(rng):
    x = random_array(rng, (2, 3))
    c = random_array(rng, (1, 3))
    model = single_node_model("Concat", {"x": x, "c": c}, attrs={"axis": 0}, initializers={"c": c})
    check_on_ep(model, {"x": x})


def test_concat_empty_input_with_other_dims_raises(rng):
    """ONNX requires every dim but the axis's to match, empty inputs included. ORT CPU 1.30 skips
    an empty input in that check yet adds its axis size to the output, whose share it leaves
    unwritten ((2, 3, 1, 1) with (2, 0, 1, 1) on axis 2 gives (2, 3, 2, 1)); the EP raises an
    error naming the node and the dim, and the session then runs valid inputs (fuzz seed 82,
    o58_18; docs/RELIABILITY.md)."""
    ins = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [None] * 4) for n in "ab"]
    graph = helper.make_graph([helper.make_node("Concat", ["a", "b"], ["y"], name="node", axis=-2)],
                              "g", ins, [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT,
                                                                       [None] * 4)])
    model = make_model(graph, opset=13)
    run = EpRun(model, strict=True)
    try:
        bad = {"a": random_array(rng, (2, 3, 1, 1)), "b": random_array(rng, (2, 0, 1, 1))}
        with pytest.raises(Exception, match="Concat input 1 has dim 0 on axis 1 where input 0 has 3") as err:
            run.run(bad)
        assert "node" in str(err.value)
        good = {"a": random_array(rng, (2, 3, 1, 1)), "b": random_array(rng, (2, 3, 4, 1))}
        got = run.run(good)
        assert_ran_on_ep(run, ["node"])
        np.testing.assert_array_equal(got[0], np.concatenate([good["a"], good["b"]], axis=2))
    finally:
        run.close()


def test_concat_float64_is_refused(rng):
    feeds = {"a": rng.uniform(size=(2,)), "b": rng.uniform(size=(3,))}
    assert "float64" in refusal(single_node_model("Concat", feeds, attrs={"axis": 0}), "Concat")


# ---------------------------------------------------------------- Identity

@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.bool_, np.uint32])
@pytest.mark.parametrize("opset", [1, 13, 16, 21])
def test_identity(dtype, opset, rng):
    x = random_array(rng, (2, 3), dtype)
    check_on_ep(single_node_model("Identity", {"x": x}, opset=opset), {"x": x})


def test_identity_empty_and_scalar(rng):
    for shape in [(0, 4), ()]:
        x = random_array(rng, shape)
        check_on_ep(single_node_model("Identity", {"x": x}), {"x": x})


def test_identity_string_is_refused():
    x = np.array(["a", "b"], dtype=object)
    node = helper.make_node("Identity", ["x"], ["out0"], name="node")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("out0", onnx.TensorProto.STRING, [2])])
    reason = refusal(make_model(graph), "Identity")
    assert reason and "string" in reason


# ---------------------------------------------------------------- chained

def test_shape_chain_runs_fused(rng):
    """Reshape -> Transpose -> Unsqueeze -> Squeeze -> Flatten, all on the EP in one fused node."""
    x = random_array(rng, (2, 12))
    shape = np.array([2, 3, 4], dtype=I64)
    axes = np.array([0], dtype=I64)
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
        helper.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[2, 0, 1]),
        helper.make_node("Unsqueeze", ["t", "axes"], ["u"], name="unsqueeze"),
        helper.make_node("Squeeze", ["u", "axes"], ["s"], name="squeeze"),
        helper.make_node("Flatten", ["s"], ["out0"], name="flatten", axis=2),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 12])],
        [onnx.ValueInfoProto(name="out0")],
        [onnx.numpy_helper.from_array(shape, "shape"), onnx.numpy_helper.from_array(axes, "axes")])
    model = finish(graph)
    check_on_ep(model, {"x": x}, node_names=("reshape", "transpose", "unsqueeze", "squeeze", "flatten"))


@pytest.mark.parametrize("spec", [[2**21, 2**21, 2**21, 2], [2**62, 4, 0]])
def test_reshape_target_size_overflow_raises_like_cpu(spec, rng):
    from isolated import check_hostile, loose_model

    # The target's element count wraps to 0 in int64 (signed overflow, undefined): checked.
    model = loose_model("Reshape", [("x", np.float32, [0, "n"]), ("s", np.int64, [len(spec)])],
                        {"allowzero": 1})
    good = {"x": np.zeros((0, 3), np.float32), "s": np.array([3, 0] + [1] * (len(spec) - 2),
                                                               np.int64)}
    check_hostile(model, {"x": np.zeros((0, 3), np.float32), "s": np.array(spec, np.int64)},
                  good, op_type="Reshape", error="")


def test_squeeze_unsqueeze_axes_computed_at_run_time(rng):
    """Axes fed at run time are read on the host each run (the plan runs eagerly)."""
    from opcheck import check_runs_on_ep, drop_input_ranks

    x = random_array(rng, (3, 1, 4, 1))
    model = single_node_model("Squeeze", {"x": x, "axes": np.array([1], np.int64)}, opset=13,
                              check=False)
    model = drop_input_ranks(model, {"axes"})
    check_runs_on_ep(model, [{"x": x, "axes": np.array(a, np.int64)} for a in ([1], [-1, 1], [3])])
    x = random_array(rng, (3, 4))
    model = single_node_model("Unsqueeze", {"x": x, "axes": np.array([0], np.int64)}, opset=13,
                              check=False)
    model = drop_input_ranks(model, {"axes"})
    check_runs_on_ep(model, [{"x": x, "axes": np.array(a, np.int64)} for a in ([0], [1, -1], [2])])
