"""Inputs that ORT CPU rejects at run time: the EP must raise too, naming the node, and the same
session must then run a good input correctly (a failed runtime check leaves it usable)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ortmlx.testing import EpRun, assert_ran_on_ep, run_cpu


def check_raises_like_cpu(model, bad: dict, good: dict, node="node", match=None,
                          provider_options=None, rtol=1e-5, atol=1e-6):
    """ORT CPU raises on `bad`; so must the EP, with "node '<node>'" and `match` (a regex) in the
    message. Then `good` runs on the EP in the same session and matches ORT CPU."""
    with pytest.raises(Exception):
        run_cpu(model, bad)
    run = EpRun(model, strict=True, provider_options=provider_options or {})
    try:
        with pytest.raises(Exception) as err:
            run.run(bad)
        msg = str(err.value)
        assert f"node '{node}'" in msg, msg
        if match is not None:
            assert re.search(match, msg), msg
        got = run.run(good)
        assert_ran_on_ep(run, [node])
    finally:
        run.close()
    want = run_cpu(model, good)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return msg


def dynamic_dims(model):
    """The model with every graph input dim symbolic and output shapes dropped (types kept), so
    one session runs inputs of any shape."""
    g = model.graph
    for inp in g.input:
        for j, d in enumerate(inp.type.tensor_type.shape.dim):
            d.ClearField("dim_value")
            d.dim_param = f"{inp.name}_{j}"
    for out in g.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    del g.value_info[:]
    return model
