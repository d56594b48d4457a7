"""com.microsoft MatMulNBits on the EP, compared with ORT's CPU kernel (accuracy_level 0) and
with a float64 dequantise-then-matmul reference."""

import numpy as np
import pytest

from contrib_model import contrib_model
from opcheck import check_on_ep, refusal
from ortmlx.testing import EpRun, assert_ran_on_ep, random_array


def pack(vals, bits):
    """uint8 values < 2^bits along the last axis -> packed bytes, low bits first."""
    per = 8 / bits
    per = int(per)
    v = vals.reshape(*vals.shape[:-1], -1, per).astype(np.uint8)
    out = np.zeros(v.shape[:-1], np.uint8)
    for i in range(per):
        out |= (v[..., i] << (i * bits)).astype(np.uint8)
    return out


def quantized(rng, N, K, bits, bs, zp_form):
    nb = (K + bs - 1) // bs
    q = rng.integers(0, 2 ** bits, size=(N, nb, bs)).astype(np.uint8)
    b = pack(q, bits)  # [N, nb, bs*bits/8]
    scales = random_array(rng, (N, nb), low=0.01, high=0.2)
    zp_vals = rng.integers(0, 2 ** bits, size=(N, nb)).astype(np.uint8)
    if zp_form == "none":
        zp, zpf = None, np.full((N, nb), 2 ** (bits - 1), np.float64)
    elif zp_form == "packed":
        padded = np.zeros((N, ((nb * bits + 7) // 8) * (8 // bits)), np.uint8)
        padded[:, :nb] = zp_vals
        zp, zpf = pack(padded, bits), zp_vals.astype(np.float64)
    else:  # unpacked float
        zp = zp_vals.astype(np.float32)
        zpf = zp.astype(np.float64)
    w = (q.astype(np.float64) - zpf[..., None]) * scales.astype(np.float64)[..., None]
    w = w.reshape(N, nb * bs)[:, :K]
    return b, scales, zp, w


@pytest.mark.parametrize("bits", [4, 8, 2])
@pytest.mark.parametrize("bs", [32, 64, 128])
@pytest.mark.parametrize("zp_form", ["none", "packed", "float"])
@pytest.mark.parametrize("a_shape,K,N", [((3, 64), 64, 24), ((2, 5, 96), 96, 17), ((1, 100), 100, 8)],
                         ids=str)
def test_matmul_nbits(bits, bs, zp_form, a_shape, K, N, rng):
    if bits == 2 and zp_form == "float":
        pytest.skip("covered by the 4/8-bit float zero point cases")
    b, scales, zp, w = quantized(rng, N, K, bits, bs, zp_form)
    a = random_array(rng, a_shape)
    ins = {"a": a, "b": b, "scales": scales, "zp": zp}
    inits = {"b": b, "scales": scales}
    if zp is not None:
        inits["zp"] = zp
    model = contrib_model("MatMulNBits", ins, {"K": K, "N": N, "bits": bits, "block_size": bs},
                          initializers=inits)
    if bits == 8 and zp_form == "float":
        # ORT's CPU kernel rejects 8-bit weights with float zero points ("Only 2b and 4b ... for
        # unpacked compute"): float64 reference only.
        got = [run_on_ep(model, {"a": a})]
    else:
        got = check_on_ep(model, {"a": a}, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[0], a.astype(np.float64) @ w.T, rtol=1e-4, atol=1e-4)


def test_matmul_nbits_bias_and_runtime_weights(rng):
    K, N, bs = 64, 16, 32
    b, scales, zp, w = quantized(rng, N, K, 4, bs, "packed")
    a = random_array(rng, (4, K))
    bias = random_array(rng, (N,))
    ins = {"a": a, "b": b, "scales": scales, "zp": zp, "g_idx": None, "bias": bias}
    model = contrib_model("MatMulNBits", ins, {"K": K, "N": N, "bits": 4, "block_size": bs})
    check_on_ep(model, {k: v for k, v in ins.items() if v is not None}, rtol=1e-4, atol=1e-4)


def run_on_ep(model, feeds):
    run = EpRun(model, strict=True)
    try:
        out = run.run(feeds)[0]
        assert_ran_on_ep(run, ("node",))
        return out
    finally:
        run.close()


def test_matmul_nbits_accuracy_level_4_is_exact(rng):
    """accuracy_level 4 lets ORT's CPU kernel quantise A to int8; the EP computes the exact
    dequantised product (float64 reference)."""
    K, N, bs = 64, 8, 32
    b, scales, zp, w = quantized(rng, N, K, 4, bs, "none")
    a = random_array(rng, (3, K))
    model = contrib_model("MatMulNBits", {"a": a, "b": b, "scales": scales},
                          {"K": K, "N": N, "bits": 4, "block_size": bs, "accuracy_level": 4},
                          initializers={"b": b, "scales": scales})
    got = run_on_ep(model, {"a": a})
    np.testing.assert_allclose(got, a.astype(np.float64) @ w.T, rtol=1e-5, atol=1e-5)


def test_matmul_nbits_float16(rng):
    K, N, bs = 64, 16, 32
    b, scales, zp, w = quantized(rng, N, K, 4, bs, "packed")
    a = random_array(rng, (3, K), np.float16)
    model = contrib_model("MatMulNBits", {"a": a, "b": b, "scales": scales.astype(np.float16),
                                          "zp": zp},
                          {"K": K, "N": N, "bits": 4, "block_size": bs},
                          initializers={"b": b, "scales": scales.astype(np.float16), "zp": zp})
    check_on_ep(model, {"a": a}, rtol=2e-3, atol=5e-3)


def test_matmul_nbits_g_idx_is_refused(rng):
    K, N, bs = 32, 4, 32
    b, scales, zp, w = quantized(rng, N, K, 4, bs, "none")
    ins = {"a": random_array(rng, (2, K)), "b": b, "scales": scales, "zp": None,
           "g_idx": np.zeros(K, np.int32)}
    model = contrib_model("MatMulNBits", ins, {"K": K, "N": N, "bits": 4, "block_size": bs},
                          initializers={"b": b, "scales": scales, "g_idx": ins["g_idx"]})
    assert "g_idx" in (refusal(model, "com.microsoft.MatMulNBits") or "")


@pytest.mark.parametrize("attr, value", [("block_size", 2**32), ("block_size", 2**33),
                                         ("K", 2**32 + 16), ("N", 2**32 + 4)])
def test_matmul_nbits_refuses_sizes_beyond_int32(attr, value, rng):
    from isolated import check_hostile, loose_model

    # block_size 2^32 wrapped to 0 in int: a division by zero; K/N wrapped to small values.
    attrs = {"K": 16, "N": 4, "bits": 4, "block_size": 16, attr: value}
    b = rng.integers(0, 256, (4, 1, 8), dtype=np.uint8)
    model = loose_model("MatMulNBits", [("a", np.float32, [2, 16])], attrs,
                        {"b": b, "scales": random_array(rng, (4,))}, domain="com.microsoft")
    # ORT rejects these when it builds its own kernel (session creation): the EP must refuse
    # them rather than claim and crash.
    r = check_hostile(model, {"a": random_array(rng, (2, 16))}, op_type="MatMulNBits")
    assert "node" not in r["executed"]
