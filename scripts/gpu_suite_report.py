"""Summarises a scripts/gpu_suite.sh run: passed / failed / skipped per part (from JUnit XML),
crashes and time-outs (from exit codes), skip reasons grouped. Prints Markdown."""

from __future__ import annotations

import collections
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def junit_counts(path: Path):
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    counts = collections.Counter()
    skips = collections.Counter()
    failures = []
    for suite in suites:
        for case in suite.iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            kind = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    kind = "failed"
                    failures.append((name, (child.get("message") or "").splitlines()[0][:160]
                                     if child.get("message") else ""))
                elif child.tag == "skipped":
                    kind = "skipped"
                    skips[(child.get("message") or "").split(":")[0][:90]] += 1
            counts[kind] += 1
    return counts, skips, failures


def log_counts(path: Path):
    """Counts from a part's log when pytest wrote no XML (cut off by its time limit): the parts
    run with -v, so every finished test left a line '[gwN] [ n%] PASSED|FAILED|... id', and every
    started one a line with its id alone (xdist). Also returns the finished ids and the ids
    started but not finished when the part was cut (a hang shows up there, call after call)."""
    counts, failures, finished, started = collections.Counter(), [], set(), set()
    if not path.exists():
        return counts, failures, finished, set()
    for line in path.read_text(errors="replace").splitlines():
        m = re.search(r"\b(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) (tests/\S.*?)\s*$", line)
        if not m:
            if line.startswith("tests/") and "::" in line:
                started.add(line.strip())
            continue
        kind = {"PASSED": "passed", "XPASS": "passed", "FAILED": "failed", "ERROR": "failed"}.get(
            m.group(1), "skipped")
        counts[kind] += 1
        finished.add(m.group(2))
        if kind == "failed":
            failures.append((m.group(2), "(name from the log; the run was cut off)"))
    return counts, failures, finished, started - finished


def unreached(out: Path, name: str, finished: set, in_flight: set) -> list[str]:
    """The collected ids (gpu_suite.sh writes NAME.collected.txt) that neither finished nor
    started: written to NAME.unreached.txt, one id a line, for the suite's `list` part."""
    collected = out / f"{name}.collected.txt"
    if not collected.exists():
        return []
    ids = [ln.strip() for ln in collected.read_text().splitlines() if "::" in ln]
    left = [i for i in ids if i not in finished and i not in in_flight]
    (out / f"{name}.unreached.txt").write_text("".join(f"{i}\n" for i in left))
    return left


def main(out: Path) -> None:
    rcs = {}
    for line in (out / "parts.txt").read_text().splitlines():
        bits = line.split()
        if len(bits) >= 3 and bits[1].startswith("rc="):
            rcs[bits[0]] = (int(bits[1][3:]), bits[2].split("=")[1])
    print((out / "env.txt").read_text().strip().replace("\n", "  \n"))
    print()
    print("| part | passed | failed | skipped | exit | seconds |")
    print("|---|---|---|---|---|---|")
    all_fail, all_skip, cut_notes = [], collections.Counter(), []
    for name, (rc, secs) in rcs.items():
        xml = out / f"{name}.xml"
        if xml.exists():
            c, skips, fails = junit_counts(xml)
            all_skip.update({(name, k): v for k, v in skips.items()})
            all_fail += [(name, n, m) for n, m in fails]
            cells = (c["passed"], c["failed"], c["skipped"])
        else:
            c, fails, finished, in_flight = log_counts(out / f"{name}.log")
            if c:
                all_fail += [(name, n, m) for n, m in fails]
                cells = (f"{c['passed']} (so far)", c["failed"], c["skipped"])
                left = unreached(out, name, finished, in_flight)
                cut_notes.append(f"- {name}: {len(in_flight)} tests running when it was cut"
                                 + "".join(f"\n  - `{t}`" for t in sorted(in_flight)[:20])
                                 + f"\n  and {len(left)} not reached ({name}.unreached.txt in "
                                   "the logs: the `list` part's input)")
            else:
                cells = ("ok" if rc == 0 else "-", "-" if rc == 0 else "see log", "-")
        note = {124: "timeout", 137: "killed"}.get(rc, "crash" if rc > 128 else str(rc))
        print(f"| {name} | {cells[0]} | {cells[1]} | {cells[2]} | {note} | {secs} |")
    # Parts still running when the call's time ran out: a log but no exit line.
    for log in sorted(out.glob("*.log")):
        if log.stem in rcs or log.stem == "precision" and "precision" in rcs:
            continue
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        last = lines[-1][:100] if lines else "(empty log)"
        print(f"| {log.stem} | - | - | - | cut off by the call's time limit; last line: "
              f"`{last}` | - |")
    if cut_notes:
        print("\nCut off by the time limit:")
        print("\n".join(cut_notes))
    if all_fail:
        print("\nFailures:")
        for part, n, m in all_fail[:150]:
            print(f"- {part}: `{n}` {m}")
    precision = out / "precision.log"
    if precision.exists() and "| model |" in precision.read_text():
        text = precision.read_text()
        print("\nError of each fp32 mode against ORT CPU (scripts/gpu_precision.py):\n")
        print(text[text.index("| model |"):].strip())
    if all_skip:
        print("\nSkips by reason:")
        for (part, reason), n in all_skip.most_common(30):
            print(f"- {part}: {n} x {reason}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
