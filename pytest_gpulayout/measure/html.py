"""``gpulayout measure --html FILE``: one self-contained page (inline CSS and SVG, no script, nothing
fetched): the verdict, the table, output tokens/s per window and deployment (the spread the
confidence interval comes from) and the latency percentiles."""

from __future__ import annotations

import html
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


def render(data: dict[str, Any]) -> str:
    deps: dict[str, Any] = data["deployments"]
    tps = {n: [w["output_tokens_per_s"] for w in d["windows"]] for n, d in deps.items()}
    lat = {f"{n} {k}": [d[k][q] or 0.0 for q in ("p50", "p90", "p99")]
           for n, d in deps.items() for k in ("ttft_ms", "itl_ms")}
    rows = "".join(
        f"<tr><td>{html.escape(n)}</td><td>{d['status']}</td><td>{d['output_tokens_per_s']}</td>"
        f"<td>{d['requests_per_s']}</td><td>{d['ttft_ms']['p99']}</td><td>{d['itl_ms']['p99']}</td>"
        f"<td>{d['e2e_ms']['p99']}</td><td>{d['requests']['completed']}</td><td>{d['requests']['failed']}</td>"
        f"<td>{d['goodput_rps']}</td><td>{len(d['windows'])}</td></tr>" for n, d in deps.items())
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
        f"<h2>Output tokens/s, each window</h2>{_bars('output tokens/s per window', tps, 'tokens/s')}"
        f"<h2>Latency percentiles (p50, p90, p99)</h2>{_bars('TTFT and ITL', lat, 'ms')}"
        "</body></html>\n")


def write_html(data: dict[str, Any], path: Path) -> None:
    path.write_text(render(data), encoding="utf-8")
