"""``gpulayout measure --html``: the line chart of output tokens/s against concurrency, one line per
deployment, from the measurement's JSON (two deployments, two concurrencies, built from the recorded
load-generator result)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_gpulayout.manifest.load import parse_manifest
from pytest_gpulayout.measure.html import by_concurrency, render, write_html
from pytest_gpulayout.measure.result import read_result
from pytest_gpulayout.measure.run import DeploymentMeasure, Measurement
from pytest_gpulayout.measure.verdict import decide
from pytest_gpulayout.workload import MeasureSpec

RECORDED = Path(__file__).parents[1] / "data" / "measure" / "vllm-bench-serve-c8.json"
SVG = "{http://www.w3.org/2000/svg}"

#: output tokens/s of each window: deployment -> concurrency -> windows
FIGURES = {"tp2": {1: [100.0, 110.0], 8: [600.0, 620.0]}, "pp2": {1: [90.0, 94.0], 8: [400.0, 410.0]}}


def _result(tmp_path: Path) -> dict[str, Any]:
    manifest = parse_manifest({"version": 1, "deployments": {n: {"model": "Qwen/Qwen3-8B"} for n in FIGURES}},
                              path=tmp_path / "gpulayout.yaml")
    base = read_result(RECORDED, concurrency=8)
    deps = {d.name: DeploymentMeasure(d, d.measure or MeasureSpec(),
                                      windows=[replace(base, concurrency=c, output_tokens_per_s=v)
                                               for c, vs in FIGURES[d.name].items() for v in vs])
            for d in manifest.deployments}
    verdict = decide({n: d.windows for n, d in deps.items()}, "output_tokens_per_s")
    return Measurement(deps, verdict, {}, 12.0).to_json()


def _line_chart(page: str) -> ET.Element:
    found = re.search(r'<svg[^>]*class="lines".*?</svg>', page, re.S)
    assert found, "no line chart on the page"
    return ET.fromstring(found.group(0))


def test_line_chart_has_one_series_per_deployment_with_a_point_per_concurrency(tmp_path: Path) -> None:
    data = _result(tmp_path)
    assert by_concurrency(data["deployments"]) == {"tp2": [(1, 105.0), (8, 610.0)], "pp2": [(1, 92.0), (8, 405.0)]}
    write_html(data, tmp_path / "m.html")
    svg = _line_chart((tmp_path / "m.html").read_text())
    series = {g.get("data-deployment"): g for g in svg.iter(f"{SVG}g") if g.get("class") == "series"}
    assert list(series) == ["tp2", "pp2"]
    points = {n: [(int(c.get("data-concurrency", "")), float(c.get("data-value", "")),
                   float(c.get("cx", "")), float(c.get("cy", ""))) for c in g.iter(f"{SVG}circle")]
              for n, g in series.items()}
    assert [(c, v) for c, v, _, _ in points["tp2"]] == [(1, 105.0), (8, 610.0)]
    assert [(c, v) for c, v, _, _ in points["pp2"]] == [(1, 92.0), (8, 405.0)]
    # concurrency runs left to right, tokens/s upwards (SVG's y grows downwards), both lines share the axes
    (_, _, x1, y1), (_, _, x8, y8) = points["tp2"]
    assert x1 < x8 and y8 < y1
    assert [x for *_, x, _ in points["pp2"]] == [x1, x8] and points["pp2"][1][3] > y8
    for n, g in series.items():  # each line joins its points, in order
        line = g.find(f"{SVG}polyline")
        assert line is not None
        assert line.get("points") == " ".join(f"{x:.1f},{y:.1f}" for *_, x, y in points[n])
    legend = [t.text for g in svg.iter(f"{SVG}g") if g.get("class") == "legend" for t in g.iter(f"{SVG}text")]
    assert legend == ["tp2", "pp2"]
    xticks = [t.text for t in svg.iter(f"{SVG}text") if t.get("text-anchor") == "middle" and t.text in ("1", "8")]
    assert xticks == ["1", "8"]
    yticks = [float(t.text or "") for t in svg.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    assert yticks[0] == 0 and yticks[-1] >= 610.0 and yticks == sorted(yticks) and len(yticks) >= 3


def test_one_concurrency_is_one_point_per_deployment(tmp_path: Path) -> None:
    data = _result(tmp_path)
    for d in data["deployments"].values():
        d["windows"] = [w for w in d["windows"] if w["concurrency"] == 8]
    svg = _line_chart(render(data))
    series = [g for g in svg.iter(f"{SVG}g") if g.get("class") == "series"]
    assert [len(list(g.iter(f"{SVG}circle"))) for g in series] == [1, 1]
    assert all(g.find(f"{SVG}polyline") is None for g in series)
    assert pytest.approx(sorted(float(c.get("data-value", "")) for g in series for c in g.iter(f"{SVG}circle"))) == [
        405.0, 610.0]
