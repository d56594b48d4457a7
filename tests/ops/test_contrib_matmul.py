"""com.microsoft FusedMatMul and BiasAdd (issue 9): run on the EP, match ORT CPU (or numpy where
ORT's CPU EP has no kernel)."""

import numpy as np
import pytest

from contrib_model import contrib_model
from opcheck import check_on_ep, refusal
from ortmlx.testing import EpRun, assert_ran_on_ep


@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("alpha", [1.0, 0.37, 0.0])
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 6)),
                                    ((1, 1), (1, 1)), ((0, 4), (4, 2)), ((3, 0), (0, 2))], ids=str)
def test_fused_matmul(ta, tb, alpha, shapes, rng):
    sa, sb = list(shapes[0]), list(shapes[1])
    if ta:
        sa[-1], sa[-2] = sa[-2], sa[-1]
    if tb:
        sb[-1], sb[-2] = sb[-2], sb[-1]
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    model = contrib_model("FusedMatMul", {"a": a, "b": b},
                          attrs={"alpha": alpha, "transA": ta, "transB": tb})
    check_on_ep(model, {"a": a, "b": b}, rtol=1e-5, atol=1e-5)


def test_fused_matmul_refuses_trans_batch(rng):
    # All dims equal: shape inference accepts any batch transposition.
    a = rng.standard_normal((2, 2, 2)).astype(np.float32)
    b = rng.standard_normal((2, 2, 2)).astype(np.float32)
    model = contrib_model("FusedMatMul", {"a": a, "b": b}, attrs={"transBatchA": 1})
    assert "transBatch" in (refusal(model, "com.microsoft.FusedMatMul") or "")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(2, 3, 8), (1, 1, 1), (0, 2, 4)], ids=str)
def test_bias_add(dtype, shape, rng):
    x = rng.standard_normal(shape).astype(dtype)
    bias = rng.standard_normal(shape[-1:]).astype(dtype)
    skip = rng.standard_normal(shape).astype(dtype)
    model = contrib_model("BiasAdd", {"x": x, "bias": bias, "skip": skip})
    feeds = {"x": x, "bias": bias, "skip": skip}
    run = EpRun(model)
    try:
        got = run.run(feeds)[0]
        assert_ran_on_ep(run, ("node",))
    finally:
        run.close()
    # ORT's CPU EP has no BiasAdd kernel: reference is numpy, same order of adds.
    want = (x + bias) + skip
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
