"""One-node (or few-node) model checks: the node must run on MLXExecutionProvider and match ORT CPU."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ortmlx.testing import EpRun, assert_ran_on_ep, make_model, run_cpu

NP_TO_ONNX = {
    np.dtype(np.float32): onnx.TensorProto.FLOAT,
    np.dtype(np.float16): onnx.TensorProto.FLOAT16,
    np.dtype(np.float64): onnx.TensorProto.DOUBLE,
    np.dtype(np.int8): onnx.TensorProto.INT8,
    np.dtype(np.int16): onnx.TensorProto.INT16,
    np.dtype(np.int32): onnx.TensorProto.INT32,
    np.dtype(np.int64): onnx.TensorProto.INT64,
    np.dtype(np.uint8): onnx.TensorProto.UINT8,
    np.dtype(np.uint16): onnx.TensorProto.UINT16,
    np.dtype(np.uint32): onnx.TensorProto.UINT32,
    np.dtype(np.uint64): onnx.TensorProto.UINT64,
    np.dtype(np.bool_): onnx.TensorProto.BOOL,
}


def single_node_model(op_type, inputs: dict, attrs=None, n_outputs=1, initializers=None,
                      opset=21, domain="", output_types=None, check=True):
    """A model with one node named 'node'. inputs: name -> np.ndarray (graph inputs) or
    None (absent optional input). initializers: name -> np.ndarray (constant inputs, in order
    after the graph inputs unless listed in `inputs` as a name)."""
    initializers = initializers or {}
    in_names = []
    graph_inputs = []
    for name, value in inputs.items():
        if value is None:
            in_names.append("")
            continue
        in_names.append(name)
        if name not in initializers:
            graph_inputs.append(helper.make_tensor_value_info(name, NP_TO_ONNX[value.dtype], list(value.shape)))
    for name in initializers:
        if name not in in_names:
            in_names.append(name)
    out_names = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, in_names, out_names, name="node", domain=domain, **(attrs or {}))
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in initializers.items()]
    outputs = [onnx.ValueInfoProto(name=o) for o in out_names]
    graph = helper.make_graph([node], "g", graph_inputs, outputs, inits)
    model = make_model(graph, opset=opset, check=False)
    # ONNX shape inference fills in the output types (and shapes) so the EP sees them.
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    if check:  # check=False: outputs whose type ONNX does not infer (function ops) stay untyped
        onnx.checker.check_model(model)
    return model


def check_on_ep(model, feeds: dict, node_names=("node",), rtol=1e-5, atol=1e-6, strict=True):
    """Runs on the EP (asserting the nodes ran there) and on ORT CPU; compares every output."""
    run = EpRun(model, strict=strict)
    try:
        got = run.run(feeds)
        assert_ran_on_ep(run, node_names)
    finally:
        run.close()
    want = run_cpu(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)
    return got


def refusal(model, op_type):
    """The EP's refusal reason for op_type in model (None when claimed)."""
    run = EpRun(model)
    try:
        return run.report().refused().get(op_type, {}).get("reason")
    finally:
        run.close()


def drop_input_ranks(model, names=None):
    """The model with the graph inputs `names` (all when None) of unknown rank, and no inferred
    value infos, so the EP's claim sees a rank known only at run time."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        if names is None or vi.name in names:
            vi.type.tensor_type.ClearField("shape")
    for vi in m.graph.output:
        if not vi.type.HasField("tensor_type"):  # not inferred (function ops): X's type
            vi.type.tensor_type.elem_type = m.graph.input[0].type.tensor_type.elem_type
        vi.type.tensor_type.ClearField("shape")
    del m.graph.value_info[:]
    return m


def check_error_on_ep(model, feeds: dict, match: str, node_name="node"):
    """Runs on the EP (strict: nothing falls back): the run fails with an error naming the node
    and matching `match`."""
    import pytest

    run = EpRun(model, strict=True)
    try:
        with pytest.raises(Exception, match=match) as err:
            run.run(feeds)
        assert node_name in str(err.value), str(err.value)
    finally:
        run.close()


def check_runs_on_ep(model, feeds_list, node_names=("node",), rtol=1e-5, atol=1e-6):
    """One EP session run with each feeds in turn (inputs that decide shapes change between runs:
    nothing of one run may be baked into the next); every run matches ORT CPU."""
    run = EpRun(model, strict=True)
    try:
        for feeds in feeds_list:
            got = run.run(feeds)
            assert_ran_on_ep(run, node_names)
            want = run_cpu(model, feeds)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape, (g.shape, w.shape)
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    finally:
        run.close()
