"""Failure classes known and owned elsewhere: a failure matching one is counted as "excluded"
(printed, not failing the test). One entry per class: (status, op key regex, regex over the
case's label and detail, why, the change expected to fix it). Remove an entry when its fix lands.
"""

from __future__ import annotations

import re

KNOWN: list[tuple[str, str, str, str, str]] = [
]

_COMPILED = [(s, re.compile(o), re.compile(d), why, fix) for s, o, d, why, fix in KNOWN]


def known_class(rec: dict) -> str | None:
    """The reason a failure record is of a known class, or None."""
    text = f"{rec['label']} {rec['detail']}"
    for status, op, pattern, why, fix in _COMPILED:
        if rec["status"] == status and op.fullmatch(rec["op"]) and pattern.search(text):
            return f"known: {why}; fix expected from {fix}"
    return None
