"""One-node models for com.microsoft contrib ops (and ORT's default-domain contrib ops): ONNX's
checker and shape inference do not know them, so outputs are declared by name and ORT infers
their types."""

from __future__ import annotations

import onnx
from onnx import helper

from opcheck import NP_TO_ONNX
from ortmlx.testing import make_model


def contrib_model(op_type, inputs: dict, attrs=None, outputs=("out0",), initializers=None,
                  domain="com.microsoft", opset=21):
    """inputs: name -> np.ndarray (graph input or initializer) or None (absent optional input).
    outputs: output names, "" for an absent optional output. The node is named 'node'."""
    initializers = initializers or {}
    in_names, graph_inputs = [], []
    for name, value in inputs.items():
        if value is None:
            in_names.append("")
            continue
        in_names.append(name)
        if name not in initializers:
            graph_inputs.append(helper.make_tensor_value_info(name, NP_TO_ONNX[value.dtype],
                                                              list(value.shape)))
    while in_names and in_names[-1] == "":
        in_names.pop()
    node = helper.make_node(op_type, in_names, list(outputs), name="node", domain=domain,
                            **(attrs or {}))
    inits = [onnx.numpy_helper.from_array(v, k) for k, v in initializers.items()]
    graph_outputs = [onnx.ValueInfoProto(name=o) for o in outputs if o]
    graph = helper.make_graph([node], "g", graph_inputs, graph_outputs, inits)
    return make_model(graph, opset=opset, extra_opsets={"com.microsoft": 1}, check=False)
