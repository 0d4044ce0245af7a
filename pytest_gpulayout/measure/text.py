"""The measurement as text: the table of ``gpulayout measure`` (and of ``pytest --gpulayout-measure``),
the lines under it, and the figures as JUnit properties (``gpulayout.measure.<deployment>.<key>``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def _f(v: object, nd: int = 1) -> str:
    return "-" if v is None else f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def table(data: Mapping[str, Any]) -> list[str]:
    """One row per deployment: its figures at the verdict's concurrency."""
    head = f"{'deployment':<20} {'status':<6} {'out tok/s':>10} {'req/s':>8} {'TTFT p99':>9} {'ITL p99':>8} " \
           f"{'E2E p99':>9} {'done':>5} {'fail':>5} {'goodput':>8} {'win':>4}"
    rows = [head, "-" * len(head)]
    for name, d in data["deployments"].items():
        rows.append(f"{name:<20} {d['status']:<6} {_f(d['output_tokens_per_s']):>10} "
                    f"{_f(d['requests_per_s'], 2):>8} {_f(d['ttft_ms']['p99']):>9} {_f(d['itl_ms']['p99']):>8} "
                    f"{_f(d['e2e_ms']['p99']):>9} {d['requests']['completed']:>5} {d['requests']['failed']:>5} "
                    f"{_f(d['goodput_rps'], 2):>8} {len(d['windows']):>4}")
    return rows


def lines_under(data: Mapping[str, Any]) -> list[str]:
    """The verdict, then each deployment's errors, notes and clock flag."""
    out = [f"verdict: {data['verdict']['text']}"]
    for name, d in data["deployments"].items():
        out += [f"{name}: {x}" for x in (*d["errors"], *d.get("notes", ()))]
        if d.get("clocks_note"):
            out.append(f"{name}: {d['clocks_note']}")
    return out


def junit_properties(name: str, d: Mapping[str, Any]) -> list[tuple[str, str]]:
    """One deployment's figures as ``name=value`` pairs: numbers as they are, percentiles and the
    request counts one property each, the rest (clocks, engine metrics, notes) as JSON."""
    pre = f"gpulayout.measure.{name}"
    props: list[tuple[str, str]] = []
    for k in ("status", "engine", "layout", "concurrency", "output_tokens_per_s", "requests_per_s", "goodput_rps"):
        v = d.get(k)
        props.append((f"{pre}.{k}", "" if v is None else str(v)))
    for k in ("ttft_ms", "itl_ms", "e2e_ms"):
        for q, v in (d.get(k) or {}).items():
            props.append((f"{pre}.{k}.{q}", "" if v is None else str(v)))
    for k, v in (d.get("requests") or {}).items():
        props.append((f"{pre}.requests.{k}", str(v)))
    props.append((f"{pre}.windows", str(len(d.get("windows", ())))))
    for k in ("output_tokens_per_s_ci95", "engine_metrics", "clocks", "notes", "errors", "baseline"):
        if d.get(k) not in (None, [], {}):
            props.append((f"{pre}.{k}", json.dumps(d[k], default=str)))
    return props
