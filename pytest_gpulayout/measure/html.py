"""``gpulayout measure --html FILE``: one self-contained page (inline CSS and SVG, no script, nothing
fetched): the verdict and what it rests on, the table, the deciding figure (goodput under the SLO, else
output tokens/s) against each sweep's load with each layout's 95 % interval as an error bar, the
deciding figure of every launch (the spread the interval comes from), and the latency percentiles. Every
chart has its axes with ticks and units; a value that was not measured is shown as "-", never ``None``."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gpulayout.measure.verdict import FIGURE_UNITS, FIGURE_WORDS

_COLORS = ("#3465a4", "#cc0000", "#4e9a06", "#c4a000", "#75507b", "#ce5c00")
_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 660, 300, 64, 140, 16, 48


def _e(v: object) -> str:
    return html.escape(str(v))


def _cell(v: object, nd: int = 1) -> str:
    """A table cell: ``-`` where nothing was measured."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return _e(v)


def nice_step(top: float, ticks: int = 5) -> float:
    raw = max(top, 1e-12) / ticks
    mag = 10 ** math.floor(math.log10(raw))
    return float(next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw))


def _y_axis(ymax: float, ph: float, unit: str) -> tuple[list[str], float]:
    """The y axis's ticks and grid lines from 0 to a round top at least ``ymax``; the top."""
    step = nice_step(ymax or 1.0)
    ytop = step * max(math.ceil((ymax or 1.0) / step), 1)
    parts = []
    k = 0
    while k * step <= ytop + step / 1e6:
        y = _TOP + ph * (1 - k * step / ytop)
        parts.append(f'<line class="ytick" x1="{_LEFT - 4}" y1="{y:.1f}" x2="{_W - _RIGHT}" y2="{y:.1f}" '
                     f'stroke="#ddd"/><text x="{_LEFT - 6}" y="{y + 4:.1f}" font-size="10" '
                     f'text-anchor="end">{k * step:g}</text>')
        k += 1
    parts.append(f'<text x="12" y="{_TOP + ph / 2:.1f}" font-size="11" text-anchor="middle" '
                 f'transform="rotate(-90 12 {_TOP + ph / 2:.1f})">{_e(unit)}</text>')
    return parts, ytop


def line_chart(series: Mapping[str, Sequence[tuple[float, float, float | None, float | None]]], *, x_label: str,
               y_label: str, css: str = "lines", continuous_x: bool = False) -> str:
    """One polyline per deployment through ``(x, y)`` in the order given, a whisker from ``lo`` to ``hi`` at
    each point (its 95 % interval; none where there is none), both axes with ticks, a legend at the right.
    The x ticks are the loads measured, or (``continuous_x``: a measured quantity) round steps from 0."""
    pw, ph = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    xs = sorted({x for pts in series.values() for x, *_ in pts})
    ymax = max((max(y, hi or y) for pts in series.values() for _, y, _, hi in pts), default=0.0)
    grid, ytop = _y_axis(ymax, ph, y_label)
    lo_x, hi_x = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if continuous_x:
        step = nice_step(hi_x or 1.0)
        lo_x, hi_x = 0.0, step * max(math.ceil((hi_x or 1.0) / step), 1)
        xs = [k * step for k in range(int(round(hi_x / step)) + 1)]

    def x_of(x: float) -> float:
        return _LEFT + (pw / 2 if hi_x == lo_x else pw * (x - lo_x) / (hi_x - lo_x))

    def y_of(v: float) -> float:
        return _TOP + ph * (1 - max(v, 0.0) / ytop)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" class="{css}">',
             *grid,
             f'<g class="axes" stroke="#555"><line x1="{_LEFT}" y1="{_TOP + ph}" x2="{_LEFT + pw}" '
             f'y2="{_TOP + ph}"/><line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + ph}"/></g>']
    for x in xs:
        px = x_of(x)
        parts.append(f'<line class="xtick" x1="{px:.1f}" y1="{_TOP + ph}" x2="{px:.1f}" y2="{_TOP + ph + 4}" '
                     f'stroke="#555"/><text x="{px:.1f}" y="{_TOP + ph + 16}" font-size="10" '
                     f'text-anchor="middle">{x:.3g}</text>')
    parts.append(f'<text x="{_LEFT + pw / 2:.1f}" y="{_H - 8}" font-size="11" text-anchor="middle">'
                 f'{_e(x_label)}</text>')
    for i, (name, pts) in enumerate(series.items()):
        color = _COLORS[i % len(_COLORS)]
        label = _e(name)
        parts.append(f'<g class="series" data-deployment="{label}">')
        if len(pts) > 1:
            coords = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y, _, _ in pts)
            parts.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y, lo, hi in pts:
            if lo is not None and hi is not None:
                parts.append(f'<line class="ci" x1="{x_of(x):.1f}" y1="{y_of(hi):.1f}" x2="{x_of(x):.1f}" '
                             f'y2="{y_of(lo):.1f}" stroke="{color}" data-low="{lo:.3f}" data-high="{hi:.3f}"/>')
            interval = f" (95 % CI {lo:.3g}-{hi:.3g})" if lo is not None and hi is not None else ""
            parts.append(f'<circle cx="{x_of(x):.1f}" cy="{y_of(y):.1f}" r="4" fill="{color}" data-x="{x:g}" '
                         f'data-value="{y:.3f}"><title>{label} at {x:g}: {y:.3g} {_e(y_label)}{interval}</title>'
                         f'</circle>')
        ly = _TOP + 8 + 18 * i
        parts.append(f'</g><g class="legend"><line x1="{_LEFT + pw + 14}" y1="{ly}" x2="{_LEFT + pw + 34}" y2="{ly}" '
                     f'stroke="{color}" stroke-width="2"/><circle cx="{_LEFT + pw + 24}" cy="{ly}" r="3" '
                     f'fill="{color}"/><text x="{_LEFT + pw + 40}" y="{ly + 4}" font-size="11">{label}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(groups: Mapping[str, Sequence[tuple[str, float]]], *, y_label: str, css: str = "bars") -> str:
    """Grouped bars, one group per deployment, each bar labelled; a y axis with ticks from 0."""
    pw, ph = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    ymax = max((v for bars in groups.values() for _, v in bars), default=0.0)
    grid, ytop = _y_axis(ymax, ph, y_label)
    n = sum(len(b) for b in groups.values()) + max(len(groups) - 1, 0)
    bw = pw / max(n, 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" role="img" class="{css}">', *grid,
             f'<g class="axes" stroke="#555"><line x1="{_LEFT}" y1="{_TOP + ph}" x2="{_LEFT + pw}" y2="{_TOP + ph}"/>'
             f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + ph}"/></g>']
    x = float(_LEFT)
    for k, (name, bars) in enumerate(groups.items()):
        color = _COLORS[k % len(_COLORS)]
        start = x
        for label, v in bars:
            bh = ph * max(v, 0.0) / ytop
            parts.append(f'<rect class="bar" x="{x + bw * 0.05:.1f}" y="{_TOP + ph - bh:.1f}" width="{bw * 0.9:.1f}" '
                         f'height="{bh:.1f}" fill="{color}" data-deployment="{_e(name)}" data-label="{_e(label)}" '
                         f'data-value="{v:.3f}"><title>{_e(name)} {_e(label)}: {v:.3g} {_e(y_label)}</title></rect>'
                         f'<text x="{x + bw / 2:.1f}" y="{_TOP + ph + 12}" font-size="9" '
                         f'text-anchor="middle">{_e(label)}</text>')
            x += bw
        parts.append(f'<text x="{(start + x) / 2:.1f}" y="{_TOP + ph + 28}" font-size="11" '
                     f'text-anchor="middle">{_e(name)}</text>')
        x += bw
    parts.append("</svg>")
    return "".join(parts)


def curves(deps: Mapping[str, Any], axis: str, key: str = "mean") -> dict[str, list[tuple[float, float, float | None,
                                                                                          float | None]]]:
    """Per deployment, ``(x, value, low, high)`` of its points on one sweep (``key``: the deciding figure's
    ``mean`` with ``ci95``, or another point key without an interval)."""
    out: dict[str, list[tuple[float, float, float | None, float | None]]] = {}
    for name, d in deps.items():
        pts = []
        for p in d.get("points", ()):
            x = p.get("request_rate") if axis == "request_rate" else p.get("concurrency")
            value = p.get(key)
            if x is None or value is None:
                continue
            ci = p.get("ci95") if key == "mean" else None
            lo, hi = (ci[0], ci[1]) if isinstance(ci, list) and len(ci) == 2 else (None, None)
            pts.append((float(x), float(value), lo, hi))
        if pts:
            out[name] = sorted(pts)
    return out


def tradeoff(deps: Mapping[str, Any]) -> dict[str, list[tuple[float, float, float | None, float | None]]]:
    """Per deployment, ``(p99 TPOT ms, output tokens/s)`` at each load of every sweep: its throughput-latency
    curve (up and to the left is better)."""
    out: dict[str, list[tuple[float, float, float | None, float | None]]] = {}
    for name, d in deps.items():
        pts: list[tuple[float, float, float | None, float | None]] = [
            (float(p["tpot_ms"]["p99"]), float(p["output_tokens_per_s"]), None, None) for p in d.get("points", ())
            if (p.get("tpot_ms") or {}).get("p99") is not None and p.get("output_tokens_per_s") is not None]
        if pts:
            out[name] = pts   # in load order: the curve goes where the load takes it
    return out


def _launch_bars(deps: Mapping[str, Any], figure: str) -> dict[str, list[tuple[str, float]]]:
    """The deciding figure of each launch at the deciding load: the samples the interval comes from."""
    out: dict[str, list[tuple[str, float]]] = {}
    for name, d in deps.items():
        here = [w for w in d.get("windows", ()) if (w.get("concurrency"), w.get("request_rate")) ==
                (d.get("concurrency"), d.get("request_rate"))]
        by: dict[int, list[float]] = {}
        for w in here:
            v = w.get(figure)
            if v is not None and w.get("completed"):
                by.setdefault(int(w.get("launch", 0)), []).append(float(v))
        out[name] = [(f"L{n + 1}", sum(vs) / len(vs)) for n, vs in sorted(by.items())]
    return out


def _latency_bars(deps: Mapping[str, Any]) -> dict[str, list[tuple[str, float]]]:
    out: dict[str, list[tuple[str, float]]] = {}
    for name, d in deps.items():
        bars = []
        for k, label in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT")):
            for q in ("p50", "p99"):
                v = (d.get(k) or {}).get(q)
                if v is not None:
                    bars.append((f"{label} {q}", float(v)))
        out[name] = bars
    return out


def _table(deps: Mapping[str, Any]) -> str:
    head = ("<tr><th>deployment</th><th>status</th><th>out tok/s</th><th>95 % CI</th><th>req/s</th><th>goodput</th>"
            "<th>SLO met</th><th>TTFT p99 ms</th><th>TPOT p99 ms</th><th>ITL p99 ms</th><th>E2E p99 ms</th>"
            "<th>done</th><th>failed</th><th>launches</th><th>windows</th></tr>")
    rows = []
    for n, d in deps.items():
        ci = d.get("output_tokens_per_s_ci95")
        att = d.get("slo_attainment")
        itl = _cell((d.get("itl_ms") or {}).get("p99"))
        if (d.get("delivery") or {}).get("bursty"):
            itl += " (bursts)"
        rows.append(
            f"<tr><td>{_e(n)}</td><td>{_e(d['status'])}</td><td>{_cell(d.get('output_tokens_per_s'))}</td>"
            f"<td>{_cell(f'{max(ci[0], 0):.0f}..{ci[1]:.0f}' if isinstance(ci, list) else None)}</td>"
            f"<td>{_cell(d.get('requests_per_s'), 2)}</td><td>{_cell(d.get('goodput_rps'), 2)}</td>"
            f"<td>{_cell(None if att is None else f'{att:.0%}')}</td>"
            f"<td>{_cell((d.get('ttft_ms') or {}).get('p99'))}</td>"
            f"<td>{_cell((d.get('tpot_ms') or {}).get('p99'))}</td>"
            f"<td>{itl}</td><td>{_cell((d.get('e2e_ms') or {}).get('p99'))}</td>"
            f"<td>{_cell(d['requests']['completed'])}</td><td>{_cell(d['requests']['failed'])}</td>"
            f"<td>{len(d.get('launches', ()))}</td><td>{len(d.get('windows', ()))}</td></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def render(data: Mapping[str, Any]) -> str:
    deps: Mapping[str, Any] = data["deployments"]
    v = data["verdict"]
    figure = str(v.get("figure") or "output_tokens_per_s")
    words, unit = FIGURE_WORDS.get(figure, figure), FIGURE_UNITS.get(figure, "")
    sections = []
    for axis, x_label in (("concurrency", "concurrency (requests in flight)"),
                          ("request_rate", "request rate (requests/s sent, open loop)")):
        series = curves(deps, axis)
        if series:
            sections.append(f"<h2>{_e(words)} against {_e(x_label)}</h2>"
                            f"<p>Each point: the mean of the launches at that load; the bar through it: its 95 % "
                            f"interval over launches.</p>"
                            + line_chart(series, x_label=x_label, y_label=f"{words} ({unit})",
                                         css=f"lines deciding {axis}"))
            if figure != "output_tokens_per_s":
                sections.append(line_chart(curves(deps, axis, "output_tokens_per_s"), x_label=x_label,
                                           y_label="output tokens/s", css=f"lines throughput {axis}"))
    curve = tradeoff(deps)
    if any(len(pts) > 1 for pts in curve.values()):
        sections.append("<h2>Throughput against latency, each load a point</h2>"
                        + line_chart(curve, x_label="TPOT p99 (ms per output token, each request)",
                                     y_label="output tokens/s", css="lines tradeoff", continuous_x=True))
    load = v.get("load") or "the deciding load"
    sections.append(f"<h2>{_e(words)} of each launch at {_e(load)}</h2>"
                    + bar_chart(_launch_bars(deps, figure), y_label=f"{words} ({unit})", css="bars launches"))
    sections.append(f"<h2>Latency at {_e(load)}, every request pooled</h2>"
                    + bar_chart(_latency_bars(deps), y_label="milliseconds", css="bars latency"))
    stopped = data.get("stopped") or {}
    lines = "".join(f"<li>{_e(x)}</li>" for x in v.get("lines", ()))
    notes = "".join(f"<li>{_e(n)}: {_e(x)}</li>" for n, d in deps.items() for x in (*d["errors"], *d.get("notes", ())))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>gpulayout measure</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:right}"
        "td:first-child{text-align:left}table{border-collapse:collapse}tr:nth-child(even){background:#f4f4f4}"
        "</style></head><body>"
        f"<h1>gpulayout measure: {_e(data['status'])}</h1>"
        f"<p><b>Verdict:</b> {_e(v['text'])}</p><ul>{lines}</ul>"
        + (f"<p>Stopped ({_e(stopped.get('reason'))}): {_e(stopped.get('text'))}</p>" if stopped.get("text") else "")
        + _table(deps) + "".join(sections) + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "")
        + "</body></html>\n")


def write_html(data: Mapping[str, Any], path: Path) -> None:
    path.write_text(render(data), encoding="utf-8")
