"""Every registry entry has a fuzz generator: an op family added to the registry without one
fails here (add gen_<Op> / gen_ms_<Op> to a gen_*.py mixin of gen_ops.OpCases)."""

from ortmlx.testing import registry_entries

from .gen_contracts import PLAIN, RECOMPUTE
from .gen_ops import OPSETS, generated_ops


def test_every_registry_entry_has_a_generator():
    have = set(generated_ops())
    missing = []
    for e in registry_entries():
        key = (e["domain"], e["op_type"])
        if e.get("by_prefix"):
            # The AttentionVJP contract: gen_contracts.py makes calls of both prefixes.
            if not any(p.startswith(e["op_type"]) for p in (PLAIN, RECOMPUTE)):
                missing.append(f"{key} (contract prefix)")
            continue
        if key not in have:
            missing.append(str(key))
        elif e["domain"] == "" and not any(e["min_opset"] <= o <= e["max_opset"]
                                           for o in OPSETS):
            missing.append(f"{key}: no fuzz opset in {e['min_opset']}..{e['max_opset']}")
    assert not missing, f"registry entries without a fuzz generator: {missing}"
