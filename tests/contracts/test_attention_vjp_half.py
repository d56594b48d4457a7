"""AttentionVJP contracts on float16 and bfloat16 tensors: the EP computes in float32 and rounds
each gradient to the input type once (docs/ATTENTION_VJP.md), as the contract body does (Casts
around the float32 body). Checked on every path against the float64 reference of the rounded
inputs and against ORT CPU running the body.

The models take and give float32 at the graph boundary (Casts to and from the half type around
the contract node), so that numpy and ORT's Python API carry bfloat16 too; the contract node
itself sees half tensors, and must run on the EP."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto

from ortmlx.contracts import NODE_NAME, attention_vjp_reference_for, float32_boundary
from ortmlx.testing import run_cpu
from tests.contracts.test_attention_vjp import (  # noqa: F401 (fixtures)
    CASES,
    EMPTY,
    _feeds,
    claim_landed,
    expected_label,
    gradient_magnitude,
    handler_missing,
    run_on_ep,
    set_path,
)

TYPES = {"float16": (np.float16, TensorProto.FLOAT16, 2.0**-11),
         "bfloat16": (ml_dtypes.bfloat16, TensorProto.BFLOAT16, 2.0**-8)}  # unit roundoff


def _one_per_variant():
    """A case per (rank, mask kind, form, path) of the float32 list: every path and interface."""
    seen, out = set(), []
    for c in CASES:
        key = (c.rank, c.mask, c.recompute, c.path, c.hq != c.hk)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


HALF_CASES = _one_per_variant()


def rounded_feeds(feeds: dict, np_type) -> tuple[dict, dict]:
    """The float32 feeds as the half type holds them (in float32, exact: what the contract
    computes on), and the same under the input names of float32_boundary's model."""
    rounded = {k: v.astype(np_type).astype(np.float32) if v.dtype == np.float32 else v
               for k, v in feeds.items()}
    return rounded, {f"{k}_f32" if v.dtype == np.float32 else k: v for k, v in rounded.items()}


@pytest.mark.parametrize("type_name", sorted(TYPES))
@pytest.mark.parametrize("case", HALF_CASES, ids=lambda c: c.id)
def test_half_contract_matches_reference_and_cpu(case, type_name, rng, monkeypatch, claim_landed):
    np_type, onnx_type, unit = TYPES[type_name]
    set_path(monkeypatch, case.path, case.limit())
    model = case.model(dtype=np_type)
    rounded, boundary = rounded_feeds(_feeds(case, model, rng), np_type)
    wrapped = float32_boundary(model, onnx_type)
    got, report = run_on_ep(wrapped, boundary)
    assert NODE_NAME in report.executed_nodes(), report.fused
    assert expected_label(case.path, case.recompute) in report.paths(), sorted(report.paths())
    want = attention_vjp_reference_for(model, rounded)
    mag = gradient_magnitude(model, rounded)
    body = run_cpu(wrapped, boundary)
    for o, g, w, c in zip(case.outputs, got, want, body):
        what = f"d{'QKV'[o]} {type_name}"
        # Values of the half type: rounding them again changes nothing.
        np.testing.assert_array_equal(g, g.astype(np_type).astype(np.float32), err_msg=what)
        # One rounding of a float32 result (float32 noise: as the float32 tests' 1e-4 of the
        # gradients' magnitude): within two units of the type's roundoff of the exact value.
        atol = 1e-4 * max(mag, 1e-3)
        np.testing.assert_allclose(g, w, rtol=2 * unit, atol=atol, err_msg=f"{what} vs float64")
        np.testing.assert_allclose(g, c, rtol=2 * unit, atol=atol, err_msg=f"{what} vs ORT CPU")


@pytest.mark.parametrize("type_name", sorted(TYPES))
@pytest.mark.parametrize("case", EMPTY[:3], ids=lambda c: c.id)
def test_half_contract_empty_dims_give_zeros_of_the_type(case, type_name, rng, monkeypatch,
                                                         claim_landed):
    np_type, onnx_type, _ = TYPES[type_name]
    set_path(monkeypatch, case.path, case.limit())
    model = case.model(dtype=np_type)
    feeds = _feeds(case, model, rng)
    wrapped = float32_boundary(model, onnx_type)
    got, report = run_on_ep(wrapped, {f"{k}_f32" if v.dtype == np.float32 else k: v
                                      for k, v in feeds.items()})
    assert NODE_NAME in report.executed_nodes(), report.fused
    shapes = {0: feeds["Q"].shape, 1: feeds["K"].shape, 2: feeds["V"].shape}
    for o, g in zip(case.outputs, got):
        assert g.shape == shapes[o] and not np.any(g), f"d{'QKV'[o]}"
