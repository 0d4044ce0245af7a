"""``gpulayout measure --html FILE``: one self-contained page (inline CSS and SVG, no script, nothing
fetched): the verdict, the table, output tokens/s against concurrency (one line per deployment, the
mean of its windows at each concurrency), output tokens/s per window and deployment (the spread the
confidence interval comes from) and the latency percentiles."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

_COLORS = ("#3465a4", "#cc0000", "#4e9a06", "#c4a000", "#75507b", "#ce5c00")


def _bars(title: str, series: dict[str, list[float]], unit: str) -> str:
    """Grouped bars: one group per deployment, one bar per value."""
    w, h, pad = 640, 220, 40
    top = max((v for vs in series.values() for v in vs), default=0.0) or 1.0
    n = sum(len(vs) for vs in series.values()) + len(series)
    bw = (w - 2 * pad) / max(n, 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h + 40}" role="img">',
             f'<text x="{pad}" y="16" font-size="13">{html.escape(title)} ({html.escape(unit)})</text>']
    x = float(pad)
    for k, (name, vs) in enumerate(series.items()):
        color = _COLORS[k % len(_COLORS)]
        start = x
        for v in vs:
            bh = (h - 40) * v / top
            parts.append(f'<rect x="{x:.1f}" y="{h - bh:.1f}" width="{bw * 0.9:.1f}" height="{bh:.1f}" '
                         f'fill="{color}"><title>{html.escape(name)}: {v:.1f} {html.escape(unit)}</title></rect>')
            x += bw
        parts.append(f'<text x="{start:.1f}" y="{h + 16}" font-size="11">{html.escape(name)}</text>')
        x += bw
    parts.append(f'<line x1="{pad}" y1="{h}" x2="{w - pad}" y2="{h}" stroke="#555"/>')
    parts.append(f'<text x="4" y="{h - (h - 40) + 4}" font-size="10">{top:.0f}</text></svg>')
    return "".join(parts)


def by_concurrency(deps: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """Per deployment, (concurrency, mean output tokens/s of its windows there), by concurrency."""
    out: dict[str, list[tuple[int, float]]] = {}
    for name, d in deps.items():
        at: dict[int, list[float]] = {}
        for w in d.get("windows", ()):
            if w.get("concurrency") is not None and w.get("output_tokens_per_s") is not None:
                at.setdefault(int(w["concurrency"]), []).append(float(w["output_tokens_per_s"]))
        out[name] = [(c, sum(vs) / len(vs)) for c, vs in sorted(at.items())]
    return out


def _nice_step(top: float, ticks: int = 5) -> float:
    raw = top / ticks
    mag = 10 ** math.floor(math.log10(raw))
    return float(next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw))


def _lines(series: dict[str, list[tuple[int, float]]]) -> str:
    """Output tokens/s against concurrency: one polyline (with a marker per point) per deployment,
    both axes with ticks, a legend at the right. One concurrency level: one point per deployment."""
    w, h, left, right, top_pad, bottom = 640, 280, 56, 130, 16, 44
    pw, ph = w - left - right, h - top_pad - bottom
    cs = sorted({c for pts in series.values() for c, _ in pts})
    ymax = max((v for pts in series.values() for _, v in pts), default=0.0) or 1.0
    step = _nice_step(ymax)
    ytop = step * math.ceil(ymax / step)
    lo, hi = (min(cs), max(cs)) if cs else (0, 1)

    def x_of(c: int) -> float:
        return left + (pw / 2 if hi == lo else pw * (c - lo) / (hi - lo))

    def y_of(v: float) -> float:
        return top_pad + ph * (1 - v / ytop)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" class="lines">',
             f'<g class="axes" stroke="#555"><line x1="{left}" y1="{top_pad + ph}" x2="{left + pw}" '
             f'y2="{top_pad + ph}"/><line x1="{left}" y1="{top_pad}" x2="{left}" y2="{top_pad + ph}"/></g>']
    k = 0
    while k * step <= ytop + step / 1e6:
        y = y_of(k * step)
        parts.append(f'<line class="ytick" x1="{left - 4}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" '
                     f'stroke="#ddd"/><text x="{left - 6}" y="{y + 4:.1f}" font-size="10" '
                     f'text-anchor="end">{k * step:g}</text>')
        k += 1
    for c in cs:
        x = x_of(c)
        parts.append(f'<line class="xtick" x1="{x:.1f}" y1="{top_pad + ph}" x2="{x:.1f}" y2="{top_pad + ph + 4}" '
                     f'stroke="#555"/><text x="{x:.1f}" y="{top_pad + ph + 16}" font-size="10" '
                     f'text-anchor="middle">{c}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{h - 8}" font-size="11" text-anchor="middle">'
                 'concurrency (requests in flight)</text>'
                 f'<text x="12" y="{top_pad + ph / 2:.1f}" font-size="11" text-anchor="middle" '
                 f'transform="rotate(-90 12 {top_pad + ph / 2:.1f})">output tokens/s</text>')
    for i, (name, pts) in enumerate(series.items()):
        color = _COLORS[i % len(_COLORS)]
        label = html.escape(name)
        coords = " ".join(f"{x_of(c):.1f},{y_of(v):.1f}" for c, v in pts)
        parts.append(f'<g class="series" data-deployment="{label}">')
        if len(pts) > 1:
            parts.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>')
        for c, v in pts:
            parts.append(f'<circle cx="{x_of(c):.1f}" cy="{y_of(v):.1f}" r="4" fill="{color}" '
                         f'data-concurrency="{c}" data-value="{v:.3f}"><title>{label} at concurrency {c}: '
                         f'{v:.1f} tokens/s</title></circle>')
        ly = top_pad + 8 + 18 * i
        parts.append(f'</g><g class="legend"><line x1="{left + pw + 14}" y1="{ly}" x2="{left + pw + 34}" y2="{ly}" '
                     f'stroke="{color}" stroke-width="2"/><circle cx="{left + pw + 24}" cy="{ly}" r="3" '
                     f'fill="{color}"/><text x="{left + pw + 40}" y="{ly + 4}" font-size="11">{label}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def render(data: dict[str, Any]) -> str:
    deps: dict[str, Any] = data["deployments"]
    tps = {n: [w["output_tokens_per_s"] for w in d["windows"]] for n, d in deps.items()}
    lat = {f"{n} {k}": [d[k][q] or 0.0 for q in ("p50", "p90", "p99")]
           for n, d in deps.items() for k in ("ttft_ms", "itl_ms")}
    rows = "".join(
        f"<tr><td>{html.escape(n)}</td><td>{d['status']}</td><td>{d['output_tokens_per_s']}</td>"
        f"<td>{d['requests_per_s']}</td><td>{d['ttft_ms']['p99']}</td><td>{d['itl_ms']['p99']}</td>"
        f"<td>{d['e2e_ms']['p99']}</td><td>{d['requests']['completed']}</td><td>{d['requests']['failed']}</td>"
        f"<td>{'-' if d['goodput_rps'] is None else d['goodput_rps']}</td><td>{len(d['windows'])}</td></tr>"
        for n, d in deps.items())
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>gpulayout measure</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:right}"
        "td:first-child{text-align:left}table{border-collapse:collapse}tr:nth-child(even){background:#f4f4f4}"
        "</style></head><body>"
        f"<h1>gpulayout measure: {html.escape(str(data['status']))}</h1>"
        f"<p><b>Verdict:</b> {html.escape(str(data['verdict']['text']))}</p>"
        "<table><tr><th>deployment</th><th>status</th><th>out tok/s</th><th>req/s</th><th>TTFT p99 ms</th>"
        "<th>ITL p99 ms</th><th>E2E p99 ms</th><th>done</th><th>failed</th><th>goodput</th><th>windows</th></tr>"
        f"{rows}</table>"
        f"<h2>Output tokens/s against concurrency</h2>{_lines(by_concurrency(deps))}"
        f"<h2>Output tokens/s, each window</h2>{_bars('output tokens/s per window', tps, 'tokens/s')}"
        f"<h2>Latency percentiles (p50, p90, p99)</h2>{_bars('TTFT and ITL', lat, 'ms')}"
        "</body></html>\n")


def write_html(data: dict[str, Any], path: Path) -> None:
    path.write_text(render(data), encoding="utf-8")
