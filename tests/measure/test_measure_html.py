"""``gpulayout measure --html``: the deciding figure plotted against each sweep's load with each layout's
interval over launches, charts with scales, and no ``None`` anywhere on the page (built from hand-made
windows: two deployments, two concurrencies, two launches each)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from measure_builders import launches

from pytest_gpulayout.manifest.load import parse_manifest
from pytest_gpulayout.measure.html import curves, render, write_html
from pytest_gpulayout.measure.record import DeploymentMeasure, Measurement
from pytest_gpulayout.measure.verdict import decide
from pytest_gpulayout.workload import Load, MeasureSpec, Slo

SVG = "{http://www.w3.org/2000/svg}"
C1, C8 = Load(concurrency=1), Load(concurrency=8)
#: output tokens/s of each launch: deployment -> load -> launches
FIGURES = {"tp2": {C1: [100.0, 110.0], C8: [600.0, 620.0]}, "pp2": {C1: [90.0, 94.0], C8: [400.0, 410.0]}}


def _result(tmp_path: Path, goodput: float | None = None, slo: Slo | None = None) -> dict[str, Any]:
    manifest = parse_manifest({"version": 1, "deployments": {n: {"model": "Qwen/Qwen3-8B"} for n in FIGURES}},
                              path=tmp_path / "gpulayout.yaml")
    deps = {}
    for d in manifest.deployments:
        ws = [w for load, values in FIGURES[d.name].items()
              for w in launches(values, load=load, goodput=goodput, tpot_s=0.01 * load.x)]
        deps[d.name] = DeploymentMeasure(d, MeasureSpec(slo=slo or Slo()), windows=ws)
    figure = "goodput_rps" if goodput is not None else "output_tokens_per_s"
    verdict = decide({n: dm.points() for n, dm in deps.items()}, figure)
    return Measurement(deps, verdict, {}, 12.0).to_json()


def _svgs(page: str, css: str) -> list[ET.Element]:
    return [ET.fromstring(m.group(0)) for m in re.finditer(r'<svg[^>]*class="[^"]*' + css + r'[^"]*".*?</svg>', page,
                                                             re.S)]


def test_the_deciding_figure_against_concurrency_with_its_interval(tmp_path: Path) -> None:
    data = _result(tmp_path)
    assert curves(data["deployments"], "concurrency")["tp2"] == [(1.0, 105.0, *data["deployments"]["tp2"]["points"][0]
                                                                  ["ci95"]), (8.0, 610.0, *data["deployments"]["tp2"]
                                                                              ["points"][1]["ci95"])]
    write_html(data, tmp_path / "m.html")
    page = (tmp_path / "m.html").read_text()
    (svg,) = _svgs(page, "deciding concurrency")
    series = {g.get("data-deployment"): g for g in svg.iter(f"{SVG}g") if g.get("class") == "series"}
    assert list(series) == ["tp2", "pp2"]
    pts = {n: [(float(c.get("data-x", "")), float(c.get("data-value", "")), float(c.get("cy", "")))
               for c in g.iter(f"{SVG}circle")] for n, g in series.items()}
    assert [(x, v) for x, v, _ in pts["tp2"]] == [(1.0, 105.0), (8.0, 610.0)]
    assert pts["tp2"][1][2] < pts["tp2"][0][2]   # more tokens/s is higher on the page
    # each point's 95 % interval over launches, as a whisker around it
    bars = [(float(x.get("data-low", "")), float(x.get("data-high", ""))) for x in series["tp2"].iter(f"{SVG}line")
            if x.get("class") == "ci"]
    assert bars == [tuple(p["ci95"]) for p in data["deployments"]["tp2"]["points"]]
    for low, high in bars:
        assert low < high
    # scales: y ticks from 0 past the highest whisker, x ticks at the loads, axis titles with units
    yticks = [float(t.text or "") for t in svg.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    assert yticks[0] == 0 and yticks == sorted(yticks) and yticks[-1] >= max(h for _, h in bars)
    titles = [t.text for t in svg.iter(f"{SVG}text")]
    assert "output tokens/s (tok/s)" in titles and "concurrency (requests in flight)" in titles
    # each layout's throughput-latency curve: a point per load, TPOT p99 across, tokens/s up
    (tradeoff,) = _svgs(page, "tradeoff")
    curve = [(float(c.get("data-x", "")), float(c.get("data-value", ""))) for g in tradeoff.iter(f"{SVG}g")
             if g.get("data-deployment") == "tp2" for c in g.iter(f"{SVG}circle")]
    assert curve == [(10.0, 105.0), (80.0, 610.0)]


def test_goodput_is_plotted_when_it_decides_and_throughput_beside_it(tmp_path: Path) -> None:
    data = _result(tmp_path, goodput=0.8, slo=Slo(ttft_ms=500))
    assert data["verdict"]["figure"] == "goodput_rps"
    page = render(data)
    (deciding,) = _svgs(page, "deciding concurrency")
    assert "goodput (requests/s within the SLO) (req/s)" in [t.text for t in deciding.iter(f"{SVG}text")]
    assert len(_svgs(page, "throughput concurrency")) == 1


def test_bars_have_a_scale_and_the_page_never_says_none(tmp_path: Path) -> None:
    data = _result(tmp_path)
    # a deployment that never completed a request: its figures are null in the JSON
    data["deployments"]["pp2"].update({"output_tokens_per_s": None, "requests_per_s": None, "goodput_rps": None,
                                       "tpot_ms": {"p50": None, "p90": None, "p99": None}})
    page = render(data)
    assert "None" not in page and "null" not in page
    for css in ("launches", "latency"):
        (svg,) = _svgs(page, f"bars {css}")
        ticks = [float(t.text or "") for t in svg.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
        assert len(ticks) >= 3 and ticks[0] == 0
    (per_launch,) = _svgs(page, "bars launches")
    values = {(r.get("data-deployment"), r.get("data-label")): float(r.get("data-value", ""))
              for r in per_launch.iter(f"{SVG}rect")}
    assert values == {("tp2", "L1"): 600.0, ("tp2", "L2"): 620.0, ("pp2", "L1"): 400.0, ("pp2", "L2"): 410.0}
