"""The AttentionVJP contract with the fused CPU kernel's instruction set forced (option cpu_isa:
avx512, avx2, portable; each one this CPU runs): a representative subset of the contract cases and
of the non-finite cases of test_attention_vjp.py, re-run per instruction set (the full suite runs
with the default, the fastest this CPU has). Also what the option decides: the instruction set
named in the EP's report, bad values refused, and cpu_claim=auto claiming the contract only with
an instruction set measured faster than ORT's CPU EP (AVX-512 so far; not AVX2, not portable).
"""

from __future__ import annotations

import numpy as np
import pytest

from ortmlx.contracts import attention_vjp_feeds, attention_vjp_model
from ortmlx.testing import EpRun, mlx_backend

from . import test_attention_vjp as base  # its test functions, called per instruction set
from .test_attention_vjp import (  # noqa: F401 - fixtures are found by name
    CASES,
    NONFINITE_VARIANTS,
    claim_landed,
    contract_op,
    handler_missing,
    refusal_of,
)

ISA_ENV = "ONNXRUNTIME_EP_MLX_CPU_ISA"
CLAIM_ENV = "ONNXRUNTIME_EP_MLX_CPU_CLAIM"


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


FLAGS = _cpu_flags()
# What the kernels test for (src/ortmlx/ops/attention_vjp/cpu_rows.h).
SUPPORTED = {"avx512": "avx512f" in FLAGS, "avx2": {"avx2", "fma"} <= FLAGS, "portable": True}
ISAS = ["avx512", "avx2", "portable"]
BEST = next(isa for isa in ISAS if SUPPORTED[isa])

# The hand-picked cases the fused kernel runs (dense, tiled and auto paths; both forms, every
# mask kind, GQA/MQA, causal, output subsets, fully masked rows), then a few sampled ones.
_KERNEL = [c for c in CASES if c.path in ("auto", "dense", "tiled")]
ISA_CASES = _KERNEL[:22] + _KERNEL[-6:]
ISA_NONFINITE = [v for v in NONFINITE_VARIANTS if v[0] in ("dense", "tiled", "auto")]

needs_cpu_backend = pytest.mark.skipif(
    mlx_backend() == "gpu", reason="the fused CPU kernel runs on MLX's CPU backend only")


def _force(monkeypatch, isa):
    if not SUPPORTED[isa]:
        pytest.skip(f"this CPU lacks {isa}")
    monkeypatch.setenv(ISA_ENV, isa)


@needs_cpu_backend
@pytest.mark.parametrize("case", ISA_CASES, ids=lambda c: c.id)
@pytest.mark.parametrize("isa", ISAS)
def test_contract_with_isa(isa, case, rng, monkeypatch, claim_landed):  # noqa: F811
    _force(monkeypatch, isa)
    base.test_on_ep_matches_reference_and_cpu(case, rng, monkeypatch, claim_landed)


@needs_cpu_backend
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("which", ["Q", "K", "dY"])
@pytest.mark.parametrize("variant", ISA_NONFINITE, ids=lambda v: f"{v[0]}_r{v[1]}_"
                         f"{'rec' if v[2] else 'plain'}_c{v[3]}_m{v[4]}")
@pytest.mark.parametrize("isa", ISAS)
def test_non_finite_with_isa(isa, variant, which, value, rng, monkeypatch,
                             claim_landed):  # noqa: F811
    _force(monkeypatch, isa)
    base.test_non_finite_inputs_follow_the_reference(variant, which, value, False, rng,
                                                     monkeypatch, claim_landed)


def _session_facts(monkeypatch, isa=None, claim="auto", options=None):
    """(claimed?, refusal entry, report's cpu_isa) of a small contract model."""
    monkeypatch.setenv(CLAIM_ENV, claim)
    if isa is None:
        monkeypatch.delenv(ISA_ENV, raising=False)
    else:
        monkeypatch.setenv(ISA_ENV, isa)
    model = attention_vjp_model(1, 8, 8, 2, 2, 32, causal=1)
    run = EpRun(model, provider_options=options or {})
    try:
        run.run(attention_vjp_feeds(model, np.random.default_rng(0)))
        report = run.report()
        claimed = "attention_vjp" in report.executed_nodes()
        return claimed, refusal_of(report, contract_op(model)), report.raw.get("cpu_isa")
    finally:
        run.close()


@needs_cpu_backend
def test_report_names_the_isa_that_runs(monkeypatch, claim_landed):  # noqa: F811
    assert _session_facts(monkeypatch)[2] == BEST
    for isa in ISAS:
        if SUPPORTED[isa]:
            assert _session_facts(monkeypatch, isa, claim="all")[2] == isa
    # The provider option wins over the variable.
    assert _session_facts(monkeypatch, BEST, claim="all",
                          options={"cpu_isa": "portable"})[2] == "portable"


@needs_cpu_backend
@pytest.mark.parametrize("isa", ISAS)
def test_auto_claim_follows_the_measured_isa(isa, monkeypatch, claim_landed):  # noqa: F811
    """cpu_claim=auto claims the contract only where its kernel was measured at least as fast as
    ORT CPU running the body on a machine with that instruction set (bench/results/
    attention_vjp*.md): AVX-512 only so far; with AVX2 or the portable code the node is left to
    ORT's CPU EP (so no machine gets slower; engine/options.cpp: cpu_isa_beats_ort_cpu)."""
    if not SUPPORTED[isa]:
        pytest.skip(f"this CPU lacks {isa}")
    claimed, refusal, ran = _session_facts(monkeypatch, isa)
    assert ran == isa
    if isa != "avx512":
        assert not claimed
        assert refusal and "left to ORT's CPU EP" in refusal["reason"], refusal
    else:
        assert claimed, refusal
    # cpu_claim=all runs the kernel in any instruction set.
    assert _session_facts(monkeypatch, isa, claim="all")[0]


@pytest.mark.parametrize("bad", ["sse9", "AVX-2", ""])
def test_bad_isa_value_is_refused(bad):
    with pytest.raises(Exception, match=r"cpu_isa='.*': expected auto.*avx512.*avx2.*portable"):
        EpRun(attention_vjp_model(1, 4, 4, 2, 2, 32), provider_options={"cpu_isa": bad}).close()


@pytest.mark.parametrize("isa", [i for i in ISAS if not SUPPORTED[i]] or ["none"])
def test_isa_the_cpu_lacks_is_refused(isa, monkeypatch):
    if isa == "none":
        pytest.skip("this CPU runs every instruction set the kernels have")
    monkeypatch.setenv(ISA_ENV, isa)
    with pytest.raises(Exception, match=f"this CPU lacks {isa}"):
        EpRun(attention_vjp_model(1, 4, 4, 2, 2, 32)).close()
