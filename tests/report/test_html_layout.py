"""The HTML report as a newcomer saw it in a browser, at 900 and 1400 px wide: labels that overlapped,
a plan page whose headline contradicted its first row, and a verdict column off-screen.

Geometry comes from headless chromium itself: the test copy of each page gets a small script (the
report has none) that measures every label and column with ``getBoundingClientRect`` after layout
and writes the numbers into the DOM, which ``--dump-dom`` returns.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_html_report import CHROME_FLAGS, browser, l4_machine, parse

from pytest_gpulayout.findings import failed, passed
from pytest_gpulayout.machine.facts import Gpu, GpuProcess, Machine
from pytest_gpulayout.report.html import render_html
from pytest_gpulayout.report.views import DeploymentView, GpuMemory

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WIDTHS = (900, 1400)

MEASURE = """
<script>
(function () {
  const box = (el) => { const r = el.getBoundingClientRect();
                        return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
  const out = {viewport: document.documentElement.clientWidth, bars: [], columns: {}};
  for (const svg of document.querySelectorAll("svg[data-gpu]")) {
    out.bars.push({gpu: svg.getAttribute("data-gpu"),
                   texts: Array.from(svg.querySelectorAll("text")).map((t) => ({text: t.textContent, ...box(t)}))});
  }
  for (const th of document.querySelectorAll("table th")) {
    const table = th.closest("table").className;
    (out.columns[table] = out.columns[table] || []).push({name: th.textContent, ...box(th)});
  }
  const pre = document.createElement("pre");
  pre.id = "geometry";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def measure(page_html: str, width: int, tmp_path: Path, name: str) -> dict:
    """Render in chromium at ``width`` px; the geometry the script measured. Also keeps a screenshot
    (``GPULAYOUT_KEEP_SCREENSHOTS``) of the page as shipped, without the script."""
    exe = browser()
    page = tmp_path / f"{name}-{width}.html"
    page.write_text(page_html.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    base = [exe, *CHROME_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},1400"]
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    start = dom.stdout.index('<pre id="geometry">') + len('<pre id="geometry">')
    geometry = json.loads(dom.stdout[start:dom.stdout.index("</pre>", start)].replace("&quot;", '"')
                          .replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    keep = os.environ.get("GPULAYOUT_KEEP_SCREENSHOTS")
    if keep:
        shipped = tmp_path / f"{name}.html"
        shipped.write_text(page_html, encoding="utf-8")
        png = Path(keep) / f"{name}-{width}.png"
        subprocess.run([*base, f"--screenshot={png}", shipped.as_uri()], capture_output=True, timeout=120, check=True)
    return geometry


def _overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def busy_l4() -> Machine:
    """An L4 where another tenant holds 13 GiB: the weights segment starts far right on the bar."""
    gpu = Gpu(0, uuid="GPU-a", name="NVIDIA L4", memory_total_mib=23034, memory_free_mib=23034 - 13 * 1024,
              processes=(GpuProcess(4242, "python3", 13 * 1024),))
    return Machine(gpus=(gpu,), links={}, source="snapshot:busy.yaml")


@pytest.mark.parametrize("width", WIDTHS)
def test_over_by_label_never_covers_the_weights_label(width, tmp_path):
    # 22.49 GiB card, 13 GiB taken by a tenant, weights that need 64.1 GiB more than the card has
    mem = GpuMemory(total=22.49, weights=71.99, kv=0.0, activations=1.6, others=13.0)
    assert f"{mem.over:.1f}" == "64.1"
    view = DeploymentView(name="llama-70b-tp1", engine="vllm", layout="TP=1 PP=1 DP=1", replicas=(((0,),),),
                          findings={"kv_pool": failed("kv_pool", "the weights leave no room")}, memory={0: mem})
    geometry = measure(render_html(machine=busy_l4(), results=[view]), width, tmp_path, "over-by")
    (bar,) = geometry["bars"]
    texts = bar["texts"]
    labels = [t["text"] for t in texts]
    assert "over by 64.1 GiB" in labels and any(t.startswith("weights") or t == "72.0" for t in labels)
    clashes = [(a["text"], b["text"]) for i, a in enumerate(texts) for b in texts[i + 1:] if _overlap(a, b)]
    assert clashes == []


def test_plan_page_says_what_the_plan_recommends(tmp_path):
    """Qwen3-8B on two L4: #1 PP=2 passes, #2 TP=2 warns. The headline is the recommendation with #1's
    own status, not "overall: warn over 2 deployments"."""
    from pytest_gpulayout.machine.presets import load_preset
    from pytest_gpulayout.model.load import load_model
    from pytest_gpulayout.planner.plan import plan
    from pytest_gpulayout.report.html import render_plan_html

    p = plan(load_model("Qwen/Qwen3-8B"), load_preset("2xL4-pcie"))
    best = p.candidates[0]
    assert best.status.value == "pass" and any(r.status.value == "warn" for r in p.candidates[1:])
    html_text = render_plan_html(p)
    for width in WIDTHS:
        measure(html_text, width, tmp_path, "plan-two-l4")  # renders; screenshots kept on request
    dom = parse(html_text)
    (headline,) = dom.with_attr("p", "data-recommends")
    assert headline["data-recommends"] == best.layout
    text = " ".join(dom.text)
    assert f"plan recommends: #1 {best.layout} on GPUs 0,1 pass" in " ".join(text.split())
    assert "overall:" not in text


def test_plan_page_when_nothing_fits_says_so(tmp_path):
    from pytest_gpulayout.machine.presets import load_preset
    from pytest_gpulayout.model.load import load_model
    from pytest_gpulayout.planner.plan import plan
    from pytest_gpulayout.report.html import render_plan_html

    p = plan(load_model("meta-llama/Llama-3.1-70B-Instruct"), load_preset("2xL4-pcie"))
    assert not p.candidates
    text = " ".join(" ".join(parse(render_plan_html(p)).text).split())
    assert "no layout serves this model on these GPUs" in text and "overall:" not in text


@pytest.mark.parametrize("width", WIDTHS)
def test_verdict_column_is_on_screen(width, tmp_path):
    """DeepSeek-V3 on 8 x H200 (example 05): seven checks and a long placement cell pushed the verdict
    column past the right edge of a 900 px window."""
    from pytest_gpulayout.machine.sources import load_machine
    from pytest_gpulayout.manifest.load import load_manifest
    from pytest_gpulayout.report.views import views_from_report
    from pytest_gpulayout.runner import load_models, run_checks

    manifest = load_manifest(EXAMPLES / "05-deepseek-v3-mla" / "gpulayout.yaml")
    machine = load_machine(manifest.machine, manifest.base_dir)
    report = run_checks(manifest.deployments, machine, load_models(manifest.deployments))
    html_text = render_html(machine=machine, results=views_from_report(report), title="05")
    geometry = measure(html_text, width, tmp_path, "check-deepseek")
    (verdict,) = [c for c in geometry["columns"]["verdicts"] if c["name"] == "verdict"]
    assert verdict["right"] <= geometry["viewport"]
    for bar in geometry["bars"]:  # the memory bars fit the window too
        assert max(t["right"] for t in bar["texts"]) <= geometry["viewport"]


@pytest.mark.parametrize("width", WIDTHS)
def test_plan_status_column_is_on_screen(width, tmp_path):
    from pytest_gpulayout.machine.presets import load_preset
    from pytest_gpulayout.model.load import load_model
    from pytest_gpulayout.planner.plan import plan
    from pytest_gpulayout.report.html import render_plan_html

    geometry = measure(render_plan_html(plan(load_model("Qwen/Qwen3-8B"), load_preset("2xL4-pcie"))), width,
                       tmp_path, "plan-status")
    status = [c for c in geometry["columns"]["plan"] if c["name"] == "status"]
    assert status and all(c["right"] <= geometry["viewport"] for c in status)
    assert all(c["right"] <= geometry["viewport"] for c in geometry["columns"]["verdicts"] if c["name"] == "verdict")


def test_css_is_package_data_inlined_in_the_page():
    from importlib import resources

    css = resources.files("pytest_gpulayout.report").joinpath("report.css").read_text(encoding="utf-8")
    page = render_html(machine=l4_machine(), results=[DeploymentView(
        name="d", engine="vllm", layout="TP=1 PP=1 DP=1", replicas=(((0,),),),
        findings={"heads": passed("heads", "ok")})])
    assert f"<style>{css}</style>" in page and ".scroll" in css
