"""The measurement as text: the table of ``gpulayout measure`` (and of ``pytest --gpulayout-measure``),
the lines under it, and the figures as JUnit properties (``gpulayout.measure.<deployment>.<key>``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def _f(v: object, nd: int = 1) -> str:
    return "-" if v is None else f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def _ci(ci: object) -> str:
    """A 95 % interval as ``low..high``; a figure is never below 0, so neither is the low end shown."""
    if not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return "-"
    return f"{max(ci[0], 0):.0f}..{ci[1]:.0f}"


def _bursty(d: Mapping[str, Any]) -> bool:
    delivery = d.get("delivery")
    return bool(isinstance(delivery, Mapping) and delivery.get("bursty"))


def table(data: Mapping[str, Any]) -> list[str]:
    """One row per deployment: its figures at the verdict's load (throughput: the mean of its launches
    with their 95 % interval; latency: every request pooled)."""
    head = (f"{'deployment':<20} {'status':<6} {'out tok/s':>10} {'95 % CI':>11} {'req/s':>7} {'goodput':>8} "
            f"{'TTFT p99':>9} {'TPOT p99':>9} {'ITL p99':>8} {'E2E p99':>9} {'done':>5} {'fail':>5} {'launch':>6} "
            f"{'win':>4}")
    rows = [head, "-" * len(head)]
    flagged = False
    for name, d in data["deployments"].items():
        itl = _f(d["itl_ms"]["p99"])
        if _bursty(d):
            itl += "*"
            flagged = True
        rows.append(f"{name:<20} {d['status']:<6} {_f(d['output_tokens_per_s']):>10} "
                    f"{_ci(d.get('output_tokens_per_s_ci95')):>11} {_f(d['requests_per_s'], 2):>7} "
                    f"{_f(d['goodput_rps'], 2):>8} {_f(d['ttft_ms']['p99']):>9} {_f(d['tpot_ms']['p99']):>9} "
                    f"{itl:>8} {_f(d['e2e_ms']['p99']):>9} {d['requests']['completed']:>5} "
                    f"{d['requests']['failed']:>5} {len(d.get('launches', ())):>6} {len(d['windows']):>4}")
    if flagged:
        rows.append("* tokens reached the client in bursts: ITL describes the delivery, TPOT the decoding (below)")
    return rows


def lines_under(data: Mapping[str, Any]) -> list[str]:
    """The verdict and what it rests on, why measuring stopped, then each deployment's errors and notes."""
    v = data["verdict"]
    out = [f"verdict: {v['text']}"]
    out += [f"  {line}" for line in v.get("lines", ())]
    stopped = data.get("stopped")
    if isinstance(stopped, Mapping) and stopped.get("text"):
        out.append(f"stopped ({stopped['reason']}): {stopped['text']}")
    if data.get("order"):
        out.append("launch order: " + " ".join(data["order"]))
    for name, d in data["deployments"].items():
        out += [f"{name}: {x}" for x in (*d["errors"], *d.get("notes", ()))]
        if d.get("clocks_note"):
            out.append(f"{name}: {d['clocks_note']}")
    if data.get("sweep_csv"):
        out.append(f"in vllm bench sweep's layout: {data['sweep_csv']}")
    return out


def junit_properties(name: str, d: Mapping[str, Any]) -> list[tuple[str, str]]:
    """One deployment's figures as ``name=value`` pairs: numbers as they are, percentiles and the
    request counts one property each, the rest (clocks, engine metrics, notes) as JSON."""
    pre = f"gpulayout.measure.{name}"
    props: list[tuple[str, str]] = []
    for k in ("status", "engine", "layout", "load", "concurrency", "request_rate", "output_tokens_per_s",
              "requests_per_s", "goodput_rps", "slo_attainment"):
        v = d.get(k)
        props.append((f"{pre}.{k}", "" if v is None else str(v)))
    for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        for q, v in (d.get(k) or {}).items():
            props.append((f"{pre}.{k}.{q}", "" if v is None else str(v)))
    for k, v in (d.get("requests") or {}).items():
        props.append((f"{pre}.requests.{k}", str(v)))
    props.append((f"{pre}.launches", str(len(d.get("launches", ())))))
    props.append((f"{pre}.windows", str(len(d.get("windows", ())))))
    for k in ("output_tokens_per_s_ci95", "goodput_rps_ci95", "delivery", "engine_metrics", "clocks", "notes",
              "errors", "baseline"):
        if d.get(k) not in (None, [], {}):
            props.append((f"{pre}.{k}", json.dumps(d[k], default=str)))
    return props
