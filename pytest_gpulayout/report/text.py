"""Text renderings shared by the CLI, the pytest terminal summary and the HTML report: the table
(deployment x check, each cell the verdict and the number that decided it), JUnit properties, and the
planner's per-replica numbers."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence

from pytest_gpulayout.findings import Finding, Status, verdict_of, worst
from pytest_gpulayout.suite import cell as suite_cell

_MARK = {Status.PASS: "pass", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.SKIP: "skip"}


def key_number(f: Finding) -> str:
    """The one number a reader scans for in each check's cell: the check object says which (``Check.cell``)."""
    return suite_cell(f)


def cell(f: Finding | None) -> str:
    if f is None:
        return "-"
    num = key_number(f)
    return f"{_MARK[f.status]} {num}".strip()


def summary_table(rows: Mapping[str, Mapping[str, Finding]], checks: Iterable[str],
                  not_run: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Aligned table: one row per deployment, one column per check, plus the overall verdict.

    ``not_run``: per deployment, the checks that did not run (a partial pytest run): their cells say
    ``not run`` and the verdict is at best ``incomplete``."""
    checks = list(checks)
    missing = not_run or {}
    header = ["deployment", *checks, "verdict"]
    body = []
    for name, findings in rows.items():
        status = worst(f.status for f in findings.values())
        skipped_here = missing.get(name, ())
        verdict = _MARK[status] if not skipped_here or status is Status.FAIL else verdict_of(status, True)
        body.append([name, *("not run" if c in skipped_here else cell(findings.get(c)) for c in checks), verdict])
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in body]
    return lines


def junit_properties(f: Finding) -> list[tuple[str, str]]:
    """Numbers as ``name=value`` pairs for JUnit XML (``gpulayout.<check>.<key>``)."""
    props = [(f"gpulayout.{f.check}.status", f.status.value)]
    for k, v in f.data.items():
        if v is None or isinstance(v, (int, float, str, bool)):
            props.append((f"gpulayout.{f.check}.{k}", "" if v is None else str(v)))
        else:  # lists and mappings (per-replica pools, GPU lists) as JSON, not dropped
            props.append((f"gpulayout.{f.check}.{k}", json.dumps(v, default=str)))
    return props


def per_replica_text(values: Sequence[int] | None) -> str:
    """``407,488 x8`` when the replicas are alike, else each one: ``60,545 / 48,112``; ``?`` unknown."""
    if not values:
        return "?"
    if len(set(values)) == 1:
        return f"{values[0]:,}" + (f" x{len(values)}" if len(values) > 1 else "")
    return " / ".join(f"{v:,}" for v in values)


def requests_text(values: Sequence[float] | None) -> str:
    """Full-length requests the whole layout holds at once: ``14.2 (7.1 x2)`` with replicas.

    Exact counts are printed rounded down to hundredths (3.998 reads 3.99: it does not hold 4).
    """
    if not values:
        return "?"

    def num(x: float) -> str:
        return f"{math.floor(x * 100 + 1e-9) / 100:g}"

    if len(values) == 1:
        return num(values[0])
    alike = f"{num(values[0])} x{len(values)}" if len(set(values)) == 1 else " / ".join(num(v) for v in values)
    return f"{num(sum(values))} ({alike})"
