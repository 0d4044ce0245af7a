"""Text renderings shared by the CLI, the pytest terminal summary and the HTML report: the table
(deployment x check, each cell the verdict and the number that decided it), JUnit properties, and the
planner's per-replica numbers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_gpulayout.findings import Finding, Status

_MARK = {Status.PASS: "pass", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.SKIP: "skip"}


def _tokens(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return ""
    n = int(n)
    if abs(n) >= 10_000_000:
        return f"{n / 1e6:.0f}M tok"
    if abs(n) >= 10_000:
        return f"{n / 1e3:.0f}k tok"
    return f"{n} tok"


def key_number(f: Finding) -> str:
    """The one number a reader scans for in each check's cell."""
    d = f.data
    if f.check == "placement":
        gpus = d.get("gpus")
        return "GPU " + ",".join(map(str, gpus)) if gpus else f"{d.get('gpus_needed')} needed"
    if f.check == "heads":
        if f.status is Status.FAIL:  # the number that decided: heads that TP does not divide (else see message)
            if d.get("attention_heads_per_rank") is None:
                return f"{d.get('num_attention_heads')} heads, TP={d.get('tensor_parallel_size')}"
            return ""
        return f"kv/rank {d.get('kv_heads_per_rank')}"
    if f.check == "balance":
        # vLLM deployments carry their own rule's margin; SGLang's is the 0.9-rule headroom
        if d.get("vllm_min_margin_gib") is not None:
            return f"{d['vllm_min_margin_gib']:+.2f} GiB"
        if d.get("headroom_gib") is not None:
            return f"{d['headroom_gib']:+.2f} GiB"
        return ""
    if f.check == "links":
        return str(d.get("worst_link") or "")
    if f.check == "kv_pool":
        return _tokens(d.get("predicted_kv_tokens"))
    if f.check == "cluster":
        if d.get("mismatches"):
            return "differs: " + ",".join(str(m.get("what")) for m in d["mismatches"])
        if d.get("transport"):
            return str(d["transport"])
        return f"{len(d['nodes'])} nodes" if len(d.get("nodes") or ()) > 1 else ""
    if f.check == "startup":
        if d.get("error_kind"):
            return str(d["error_kind"])
        return _tokens(d.get("kv_tokens"))
    return ""


def cell(f: Finding | None) -> str:
    if f is None:
        return "-"
    num = key_number(f)
    return f"{_MARK[f.status]} {num}".strip()


def summary_table(rows: Mapping[str, Mapping[str, Finding]], checks: Iterable[str]) -> list[str]:
    """Aligned table: one row per deployment, one column per check, plus the overall verdict."""
    checks = list(checks)
    header = ["deployment", *checks, "verdict"]
    body = []
    for name, findings in rows.items():
        statuses = [f.status for f in findings.values()]
        from pytest_gpulayout.findings import worst

        body.append([name, *(cell(findings.get(c)) for c in checks), _MARK[worst(statuses)]])
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in body]
    return lines


def junit_properties(f: Finding) -> list[tuple[str, str]]:
    """Numbers as ``name=value`` pairs for JUnit XML (``gpulayout.<check>.<key>``)."""
    import json

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


def requests_text(values: Sequence[int] | None) -> str:
    """Full-length requests the whole layout holds at once: ``14 (7 x2)`` with replicas."""
    if not values:
        return "?"
    if len(values) == 1:
        return str(values[0])
    alike = f"{values[0]} x{len(values)}" if len(set(values)) == 1 else " / ".join(map(str, values))
    return f"{sum(values)} ({alike})"
