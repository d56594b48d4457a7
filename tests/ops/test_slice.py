"""Slice, Split, Pad, Tile, Expand: constant and runtime shape-deciding inputs, negative steps,
clamping, empty and size-1 dims, every claimed dtype; compared with ORT CPU."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from opcheck import NP_TO_ONNX, check_on_ep, refusal, single_node_model
from ortmlx.testing import make_model, random_array

I64 = np.int64
BIG = np.iinfo(np.int64).max
DTYPES = [np.float32, np.float16, np.int32, np.int64, np.bool_, np.int8, np.uint8]


def model_with(op, x, consts: dict, runtime=(), attrs=None, opset=21, n_outputs=1):
    """op(x, consts...): consts are initializers unless named in `runtime` (then graph inputs).
    None in consts marks an absent optional input."""
    inputs = {"x": x, **consts}
    inits = {k: v for k, v in consts.items() if v is not None and k not in runtime}
    feeds = {"x": x, **{k: consts[k] for k in runtime}}
    try:
        return single_node_model(op, inputs, attrs=attrs, initializers=inits, opset=opset,
                                 n_outputs=n_outputs), feeds
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError):
        pass
    # ONNX cannot infer the output shapes (runtime sizes) or rejects the values: outputs typed,
    # shapes left to the run.
    names = [k if v is not None else "" for k, v in inputs.items()]
    node = h.make_node(op, names, [f"out{i}" for i in range(n_outputs)], name="node",
                       **(attrs or {}))
    g_in = [h.make_tensor_value_info(k, NP_TO_ONNX[v.dtype], list(v.shape))
            for k, v in inputs.items() if v is not None and k not in inits]
    outs = [h.make_tensor_value_info(f"out{i}", NP_TO_ONNX[x.dtype], None)
            for i in range(n_outputs)]
    graph = h.make_graph([node], "g", g_in, outs,
                         [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    return make_model(graph, opset=opset, check=False), feeds


# ---------------------------------------------------------------- Slice

SLICES = [
    ((5, 6), [1, 0], [4, 6], None, None),
    ((5, 6), [0], [-1], [1], None),
    ((5, 6), [-3], [BIG], [0], None),  # clamped end
    ((5, 6), [4], [-BIG], [1], [-1]),  # negative step to the front
    ((5, 6), [-1, 5], [-BIG, 0], [0, 1], [-2, -3]),
    ((5, 6), [10], [-10], [0], [-1]),  # start clamped to dim - 1
    ((5, 6), [2], [2], [1], None),  # empty
    ((5, 6), [3], [1], [0], [1]),  # empty: end before start
    ((4, 3, 5), [0, 1], [BIG, 3], [2, 0], [2, 1]),
    ((4, 3, 5), [1], [4], [-1], [3]),
    ((0, 3), [0], [2], [1], None),
    ((1, 7), [0, 6], [1, 0], [0, 1], [1, -2]),
    ((8,), [-BIG], [BIG], None, [3]),
    # An end of INT64_MAX with a negative step is open in ORT (through element 0), where ONNX
    # would clamp it to dim - 1 and give nothing.
    ((5, 6), [4], [BIG], [1], [-1]),
    ((4, 3), [4, 2], [BIG, -3], [-1, -2], [-2, 2]),
    ((4, 3), [BIG], [BIG], [0], [-1]),
    ((4, 3), [1], [BIG - 1], [0], [-1]),  # one below: clamped, empty
    # A start before the first element with a negative step clamps to element 0 (ONNX and
    # ORT; numpy gives nothing).
    ((4, 2, 3), [-3, -3, 2], [2, -3, -3], [0, 1, 2], [-2, -2, 1]),
    ((3, 2), [-10], [-BIG - 1], [0], [-1]),
    ((3, 2), [-4], [-5], [0], [-1]),
    # Steps past the dim (beyond int32 too: valid ONNX) take at most one element; the EP raised
    # "does not fit int32" for runtime steps and refused constant ones.
    ((5, 4, 3, 4), [5, 2, -4], [5, 3, -2**31], [1, 2, -1], [-2**63, 1, -1]),
    ((5, 6), [1], [BIG], [1], [BIG]),
    ((5, 6), [4], [-BIG], [0], [-2**63]),
    ((5, 6), [0, 5], [5, -BIG], [0, 1], [2**31, -2**31]),
    ((5, 6), [2], [0], [1], [-(2**31) - 1]),
    ((0, 3), [0], [5], [0], [2**40]),
    ((7, 2), [-BIG], [BIG], [0], [7]),
]


@pytest.mark.parametrize("case", SLICES, ids=str)
@pytest.mark.parametrize("runtime", [False, True], ids=["const", "runtime"])
def test_slice(case, runtime, rng):
    shape, starts, ends, axes, steps = case
    x = random_array(rng, shape)
    consts = {"starts": np.array(starts, I64), "ends": np.array(ends, I64),
              "axes": None if axes is None else np.array(axes, I64),
              "steps": None if steps is None else np.array(steps, I64)}
    if steps is None:
        consts.pop("steps")
        if axes is None:
            consts.pop("axes")
    rt = [k for k, v in consts.items() if v is not None] if runtime else ()
    model, feeds = model_with("Slice", x, consts, runtime=rt)
    check_on_ep(model, feeds)


@pytest.mark.parametrize("dtype", DTYPES)
def test_slice_types_int32_indices(dtype, rng):
    x = random_array(rng, (4, 5), dtype)
    consts = {"starts": np.array([3, 1], np.int32), "ends": np.array([0, 5], np.int32),
              "axes": np.array([0, 1], np.int32), "steps": np.array([-1, 2], np.int32)}
    model, feeds = model_with("Slice", x, consts)
    check_on_ep(model, feeds)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_pad_reflect_of_an_empty_input_like_cpu(dtype):
    # Nothing to mirror: ORT CPU returns the empty (0, 5) without checking the pads against the
    # dim of 2; the EP raised "reflect pads must be smaller than the dim" (fuzz seed 94, o38_147).
    x = np.zeros((0, 2), dtype)
    model, feeds = model_with("Pad", x, {"pads": np.array([0, 1, 0, 2], I64)},
                              attrs={"mode": "reflect"})
    got = check_on_ep(model, feeds)
    assert got[0].shape == (0, 5)


def test_pad_negative_reflect_is_refused(rng):
    x = random_array(rng, (4, 5))
    model, _ = model_with("Pad", x, {"pads": np.array([-1, 0, 1, 0], I64)},
                          attrs={"mode": "reflect"})
    assert "negative pads" in refusal(model, "Pad")


# ---------------------------------------------------------------- Split

@pytest.mark.parametrize("case", [((6, 4), 0, [2, 4]), ((6, 4), 1, [1, 1, 2]), ((6, 4), -1, [0, 4]),
                                  ((5,), 0, [5]), ((2, 0), 0, [1, 1])], ids=str)
@pytest.mark.parametrize("runtime", [False, True], ids=["const", "runtime"])
def test_split_sizes(case, runtime, rng):
    shape, axis, sizes = case
    x = random_array(rng, shape)
    model, feeds = model_with("Split", x, {"split": np.array(sizes, I64)},
                              runtime=("split",) if runtime else (), attrs={"axis": axis},
                              n_outputs=len(sizes))
    check_on_ep(model, feeds)


@pytest.mark.parametrize("case", [((6, 4), 0, 3), ((6, 4), 1, 2), ((7,), 0, 1)], ids=str)
@pytest.mark.parametrize("opset", [11, 13])
def test_split_equal(case, opset, rng):
    shape, axis, parts = case
    x = random_array(rng, shape, np.int64)
    check_on_ep(single_node_model("Split", {"x": x}, attrs={"axis": axis}, n_outputs=parts,
                                  opset=opset), {"x": x})


@pytest.mark.parametrize("case", [((7, 2), 0, 3), ((8,), 0, 3), ((5, 3), 0, 2), ((6,), 0, 3)],
                         ids=str)
def test_split_num_outputs(case, rng):
    shape, axis, parts = case
    x = random_array(rng, shape, np.float16)
    model = single_node_model("Split", {"x": x}, attrs={"axis": axis, "num_outputs": parts},
                              n_outputs=parts, opset=18)
    check_on_ep(model, {"x": x})


def test_split_attr_opset11(rng):
    x = random_array(rng, (5, 3), np.bool_)
    model = single_node_model("Split", {"x": x}, attrs={"axis": 0, "split": [2, 3]}, n_outputs=2,
                              opset=11)
    check_on_ep(model, {"x": x})


# ---------------------------------------------------------------- Pad

PADS = [
    ((3, 4), [1, 2, 0, 1]),
    ((3, 4), [0, 0, 0, 0]),
    ((2, 3, 4), [0, 1, 2, 1, 0, 3]),
    ((1, 5), [0, 3, 0, 1]),
]


@pytest.mark.parametrize("case", PADS, ids=str)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("runtime", [False, True], ids=["const", "runtime"])
def test_pad(case, mode, runtime, rng):
    shape, pads = case
    if mode == "reflect" and shape == (1, 5) and pads[1] > 0:
        pads = [0, 2, 0, 1]  # reflect needs pads < dim
    x = random_array(rng, shape)
    consts = {"pads": np.array(pads, I64)}
    if mode == "constant":
        consts["value"] = np.array(1.25, np.float32)
    model, feeds = model_with("Pad", x, consts, runtime=tuple(consts) if runtime else (),
                              attrs={"mode": mode})
    check_on_ep(model, feeds)


@pytest.mark.parametrize("pads", [[-1, 0, 1, -2], [0, -1, 0, 2], [-2, -1, -1, -1]], ids=str)
def test_pad_negative_constant(pads, rng):
    x = random_array(rng, (4, 5))
    model, feeds = model_with("Pad", x, {"pads": np.array(pads, I64)})
    check_on_ep(model, feeds)


@pytest.mark.parametrize("dtype", DTYPES)
def test_pad_types_default_value(dtype, rng):
    x = random_array(rng, (2, 3), dtype)
    model, feeds = model_with("Pad", x, {"pads": np.array([1, 0, 0, 2], I64)})
    check_on_ep(model, feeds)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_axes_opset18(mode, rng):
    x = random_array(rng, (3, 4, 5))
    consts = {"pads": np.array([1, 2, 2, 1], I64), "value": None, "axes": np.array([-1, 0], I64)}
    model, feeds = model_with("Pad", x, consts, attrs={"mode": mode}, opset=18)
    check_on_ep(model, feeds)


WRAP_PADS = [
    ((3, 4), [1, 2, 0, 1]),
    ((3, 4), [3, 4, 5, 9]),  # leading pads equal to the dim, trailing pads beyond it
    ((2, 3, 4), [0, 1, 2, 1, 0, 3]),
    ((1, 5), [1, 0, 7, 0]),
    ((3, 4), [0, 0, 0, 0]),
]


@pytest.mark.parametrize("case", WRAP_PADS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_pad_wrap(case, dtype, rng):
    shape, pads = case
    x = random_array(rng, shape, dtype)
    model, feeds = model_with("Pad", x, {"pads": np.array(pads, I64)}, attrs={"mode": "wrap"})
    check_on_ep(model, feeds)


def test_pad_wrap_axes_opset18(rng):
    x = random_array(rng, (3, 4, 5))
    consts = {"pads": np.array([2, 1, 3, 6], I64), "value": None, "axes": np.array([-1, 1], I64)}
    model, feeds = model_with("Pad", x, consts, attrs={"mode": "wrap"}, opset=18)
    check_on_ep(model, feeds)


def test_pad_wrap_refusals(rng):
    x = random_array(rng, (3, 4))
    # ORT copies a leading pad larger than the dim from outside the input (uninitialised values).
    model, _ = model_with("Pad", x, {"pads": np.array([4, 0, 0, 0], I64)}, attrs={"mode": "wrap"})
    assert "larger than the dim" in refusal(model, "Pad")
    model, _ = model_with("Pad", x, {"pads": np.array([1, 1, 1, 1], I64)}, runtime=("pads",),
                          attrs={"mode": "wrap"})
    assert "constant pads" in refusal(model, "Pad")
    model, _ = model_with("Pad", x, {"pads": np.array([-1, 0, 0, 0], I64)}, attrs={"mode": "wrap"})
    assert "negative pads" in refusal(model, "Pad")


# ---------------------------------------------------------------- Tile

@pytest.mark.parametrize("case", [((2, 3), [2, 1]), ((2, 3), [1, 3]), ((4,), [3]), ((2, 1, 2), [1, 4, 2]),
                                  ((2, 3), [0, 2]), ((0, 2), [3, 1]), ((1, 1), [1, 1])], ids=str)
@pytest.mark.parametrize("runtime", [False, True], ids=["const", "runtime"])
def test_tile(case, runtime, rng):
    shape, reps = case
    x = random_array(rng, shape)
    model, feeds = model_with("Tile", x, {"repeats": np.array(reps, I64)},
                              runtime=("repeats",) if runtime else ())
    check_on_ep(model, feeds)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tile_types(dtype, rng):
    x = random_array(rng, (2, 3), dtype)
    model, feeds = model_with("Tile", x, {"repeats": np.array([2, 2], I64)}, opset=13)
    check_on_ep(model, feeds)


# ---------------------------------------------------------------- Expand

@pytest.mark.parametrize("case", [((3, 1), [3, 4]), ((3, 1), [2, 1, 6]), ((1,), [5]), ((2, 3), [3]),
                                  ((2, 3), [1, 1]), ((1, 3), [0, 3]), ((), [2, 2]),
                                  ((4, 1, 2), [4, 3, 1]), ((2, 3), [])], ids=str)
@pytest.mark.parametrize("runtime", [False, True], ids=["const", "runtime"])
def test_expand(case, runtime, rng):
    shape, target = case
    x = random_array(rng, shape)
    model, feeds = model_with("Expand", x, {"shape": np.array(target, I64)},
                              runtime=("shape",) if runtime else ())
    check_on_ep(model, feeds)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opset", [8, 13])
def test_expand_types(dtype, opset, rng):
    x = random_array(rng, (3, 1), dtype)
    model, feeds = model_with("Expand", x, {"shape": np.array([2, 3, 2], I64)}, opset=opset)
    check_on_ep(model, feeds)


# ---------------------------------------------------------------- hostile int64 values

@pytest.mark.parametrize("op", ["Tile", "Expand"])
@pytest.mark.parametrize("values", [[2**30, 2**30, 4], [2**31, 1, 1], [2**32 + 1, 1, 1],
                                    [2**30, 2**30, 2**30], [0, 2**31, 2**31]])
def test_tile_expand_huge_outputs_clean_error(op, values):
    from isolated import check_hostile, loose_model

    # Output dims whose product overflows, or a dim beyond MLX's int32 dims: an error naming
    # the node instead of a crash; the session then runs a good input.
    model = loose_model(op, [("x", np.float32, [1, 1, 1]), ("r", np.int64, [3])])
    x = np.array([[[1.5]]], np.float32)
    good = {"x": x, "r": np.array([2, 3, 1], np.int64)}
    check_hostile(model, {"x": x, "r": np.array(values, np.int64)}, good, op_type=op, error="",
                  cpu=False)


@pytest.mark.parametrize("sizes", [
    [2**63 - 1, 2**63 - 1, 6],            # sums to 4 modulo 2^64
    [2**62, 2**62, 2**62, 2**62 + 4],     # likewise
    [-1, 5],
    [0, 4],
])
def test_split_sizes_summing_modulo_2_64_raise_like_cpu(sizes, rng):
    from isolated import check_hostile, loose_model

    split = np.array(sizes, np.int64)
    model = loose_model("Split", [("x", np.float32, [3, 4]), ("s", np.int64, [len(sizes)])],
                        {"axis": 1}, n_outputs=len(sizes))
    x = random_array(rng, (3, 4))
    good = {"x": x, "s": np.array([1, 3] + [0] * (len(sizes) - 2), np.int64)}
    check_hostile(model, {"x": x, "s": split}, good, op_type="Split",
                  error=None if min(sizes) == 0 else "split size")


@pytest.mark.parametrize("pads", [
    [-(2**63), 0, 0, 0], [0, 0, -(2**63), 0], [-(2**63) + 5, 0, 0, 0], [2**63 - 1, 0, 0, 0],
    [0, 2**32, 0, 0], [0, 2**31 - 3, 0, 0], [0, -3, 0, -2], [-1, 0, 0, 1],
])
def test_pad_extreme_pads_like_cpu(pads, rng):
    from isolated import check_hostile, loose_model

    # INT64_MIN was negated (overflow) and cropped the axis to nothing where ORT raises; a pad
    # that makes a dim beyond int32 is an error naming the node (ORT fails to allocate it).
    model = loose_model("Pad", [("x", np.float32, [3, 4]), ("p", np.int64, [4])],
                        {"mode": "constant"})
    x = random_array(rng, (3, 4))
    good = {"x": x, "p": np.array([1, 0, 0, 1], np.int64)}
    huge = max(pads) >= 2**31 - 3
    check_hostile(model, {"x": x, "p": np.array(pads, np.int64)}, good, op_type="Pad",
                  error="" if huge else None, cpu=not huge)


@pytest.mark.parametrize("shape, pads", [
    ((2, 3, 1, 1), [0, -2, 2, 2, 0, 1, -2, -2]),  # crops past the input, made up by padding
    ((3, 4), [2, -5, -4, 6]),
    ((3, 4), [-3, 0, 3, 0]),
    ((3, 4), [-2, 0, -2, 0]),                     # removes more than the dim: ORT raises
])
def test_pad_negative_pads_past_the_input_like_cpu(shape, pads, rng):
    from isolated import check_hostile, loose_model

    model = loose_model("Pad", [("x", np.int32, list(shape)), ("p", np.int64, [len(pads)])],
                        {"mode": "constant"}, {"v": np.array(7, np.int32)})
    x = rng.integers(-50, 50, shape).astype(np.int32)
    good = {"x": x, "p": np.array([1] + [0] * (len(pads) - 1), np.int64)}
    check_hostile(model, {"x": x, "p": np.array(pads, np.int64)}, good, op_type="Pad")


def test_split_num_outputs_beyond_the_dim_raises_like_cpu(rng):
    from isolated import check_hostile, loose_model

    model = loose_model("Split", [("x", np.uint8, [1, "n"])], {"axis": 1, "num_outputs": 3},
                        n_outputs=3)
    good = {"x": rng.integers(0, 255, (1, 7)).astype(np.uint8)}
    check_hostile(model, {"x": rng.integers(0, 255, (1, 2)).astype(np.uint8)}, good,
                  op_type="Split", error="num_outputs")


def test_pad_wrap_empty_input_raises_like_cpu(rng):
    from ort_raises import check_raises_like_cpu

    node = h.make_node("Pad", ["x", "pads"], ["out0"], name="node", mode="wrap")
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, ["n", 3])],
                         [h.make_tensor_value_info("out0", T.FLOAT, None)],
                         [onnx.numpy_helper.from_array(np.array([0, 1, 0, 2], I64), "pads")])
    model = make_model(graph, opset=21, check=False)
    check_raises_like_cpu(model, {"x": np.zeros((0, 3), np.float32)},
                          {"x": random_array(rng, (2, 3))}, match="empty")


@pytest.mark.parametrize("attrs", [{"starts": [1], "ends": [3]},
                                   {"starts": [0, -3], "ends": [2, 1000], "axes": [0, 2]},
                                   {"starts": [-100, 1], "ends": [-1, -1], "axes": [-1, 1]},
                                   {"starts": [4], "ends": [2], "axes": [1]}], ids=str)
def test_slice_opset_1_attributes(attrs, rng):
    x = random_array(rng, (4, 5, 6))
    check_on_ep(single_node_model("Slice", {"x": x}, attrs=attrs, opset=1), {"x": x})


@pytest.mark.parametrize("attrs", [{"pads": [1, 0, 2, 0, 3, 1]},
                                   {"pads": [0, 2, 1, 1, 0, 0], "value": 1.5},
                                   {"pads": [1, -1, 0, 0, 2, 1]},
                                   {"pads": [1, 2, 0, 2, 1, 0], "mode": "reflect"},
                                   {"pads": [2, 0, 1, 0, 3, 1], "mode": "edge"}], ids=str)
def test_pad_opset_2_attributes(attrs, rng):
    x = random_array(rng, (3, 4, 5))
    check_on_ep(single_node_model("Pad", {"x": x}, attrs=attrs, opset=2), {"x": x})


@pytest.mark.parametrize("shape, axis", [((3, 4, 5), 1), ((1, 3, 4), -1), ((5, 0, 0, 4), -1)],
                         ids=str)
def test_split_num_outputs_with_an_empty_tail_raises_like_cpu(shape, axis, rng):
    """Dim 4 into 3 outputs of ceil(4 / 3) = 2: the last would be empty, which ORT (1.30) rejects
    ("Split size 2 exceeds the remaining size"); the EP returned 2, 2 and 0."""
    from isolated import check_hostile, loose_model

    dims = ["d" if i == axis % len(shape) else s for i, s in enumerate(shape)]
    model = loose_model("Split", [("x", np.float32, dims)], {"axis": axis, "num_outputs": 3},
                        n_outputs=3)
    good_shape = tuple(7 if i == axis % len(shape) else s for i, s in enumerate(shape))
    check_hostile(model, {"x": random_array(rng, shape)}, {"x": random_array(rng, good_shape)},
                  op_type="Split", error="split size 2 exceeds the remaining size")


@pytest.mark.parametrize("mode, dtype", [("edge", np.int8), ("constant", np.float32)])
def test_pad_beyond_int32_is_the_documented_dim_limit(mode, dtype, rng):
    """A pad of 2^31 makes a dim MLX's int32 dims cannot hold: the error names the node and the
    documented limit (ORT CPU, given the memory, returns the 2 GiB tensor)."""
    from isolated import check_hostile, loose_model

    model = loose_model("Pad", [("x", dtype, [2]), ("p", np.int64, [2])], {"mode": mode})
    x = np.array([3, -4]).astype(dtype)
    check_hostile(model, {"x": x, "p": np.array([1, 2**31], np.int64)},
                  {"x": x, "p": np.array([1, 2], np.int64)}, op_type="Pad",
                  error="exceeds MLX's int32 dims", cpu=False)
