"""The HTML report: self-contained, and what a person sees after a real browser renders it.

The browser tests use Debian's chromium headless (``--dump-dom`` for the rendered DOM,
``--screenshot`` for a PNG). Without chromium they skip, unless ``GPULAYOUT_REQUIRE_BROWSER`` is set
(CI installs chromium and sets it), in which case they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pytest_gpulayout.findings import Finding, Status, failed, passed, skipped, warned
from pytest_gpulayout.machine.facts import Gpu, GpuProcess, Machine
from pytest_gpulayout.report.html import render_html
from pytest_gpulayout.report.views import DeploymentView, GpuMemory

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROME_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
    "--disable-dev-shm-usage",  # its shared memory in /tmp, not .org.chromium.Chromium.* left in /dev/shm
)


# -- helpers ------------------------------------------------------------------------------------


def browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("GPULAYOUT_REQUIRE_BROWSER"):
        pytest.fail("GPULAYOUT_REQUIRE_BROWSER is set but no chromium is installed (apt-get install -y chromium)")
    pytest.skip("chromium not installed (apt-get install -y chromium); set GPULAYOUT_REQUIRE_BROWSER to require it")


def render_in_browser(page: Path, tmp_path: Path, *, screenshot: Path | None = None) -> str:
    """The DOM after chromium rendered ``page`` (and a PNG of it when ``screenshot`` is given)."""
    exe = browser()
    profile = tmp_path / "chromium-profile"
    base = [exe, *CHROME_FLAGS, f"--user-data-dir={profile}"]
    shm_before = {n for n in os.listdir("/dev/shm") if "chromium" in n.lower()}
    dom = subprocess.run([*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    left = {n for n in os.listdir("/dev/shm") if "chromium" in n.lower()} - shm_before
    assert not left, f"the browser test left {sorted(left)} in /dev/shm"
    if screenshot is not None:
        shot = subprocess.run(
            [*base, f"--screenshot={screenshot}", "--window-size=1280,2200", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shot.returncode == 0, shot.stderr[-2000:]
    return dom.stdout


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


class Elements(HTMLParser):
    """Every start tag with its attributes, plus the visible text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def find(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        return [
            a
            for t, a in self.tags
            if t == tag and all(a.get(k.rstrip("_").replace("_", "-")) == v for k, v in attrs.items())
        ]

    def with_attr(self, tag: str, attr: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and attr in a]


def parse(dom: str) -> Elements:
    p = Elements()
    p.feed(dom)
    return p


def assert_self_contained(page: str) -> None:
    """No URL anywhere, no element that loads anything, no script."""
    assert "http://" not in page and "https://" not in page
    dom = parse(page)
    loading = [(t, a) for t, a in dom.tags if {"src", "href", "xlink:href", "srcset", "data"} & set(a)]
    assert not loading, f"elements that load something: {loading}"
    assert not [t for t, _ in dom.tags if t in ("script", "link", "iframe", "object", "embed", "img")]
    assert not re.search(r"url\(|@import|@font-face", page)


# -- a hand-built report: known numbers in, the same numbers on the page ------------------------


def l4_machine(free1: int = 22221, tenant: bool = False) -> Machine:
    gpus = (
        Gpu(0, uuid="GPU-a", name="NVIDIA L4", memory_total_mib=23034, memory_free_mib=22221),
        Gpu(
            1,
            uuid="GPU-b",
            name="NVIDIA L4",
            memory_total_mib=23034,
            memory_free_mib=free1,
            processes=(GpuProcess(4242, "python3", 3502),) if tenant else (),
        ),
    )
    return Machine(gpus=gpus, links={(0, 1): "PHB"}, source="snapshot:machine.yaml", driver="580.95.05")


def views_two_l4() -> list[DeploymentView]:
    tp2 = DeploymentView(
        name="qwen3-8b-tp2",
        engine="vllm",
        layout="TP=2 PP=1 DP=1",
        replicas=(((0, 1),),),
        findings={
            "placement": passed("placement", "ok", gpus=[0, 1]),
            "heads": passed("heads", "ok", kv_heads_per_rank=4),
            "balance": passed("balance", "ok", headroom_gib=None, vllm_min_margin_gib=1.23),
            "links": warned(
                "links",
                "TP group GPU0-GPU1 is joined by PHB: use pipeline_parallel_size: 2",
                worst_link="PHB",
            ),
            "kv_pool": passed("kv_pool", "ok", predicted_kv_tokens=81234),
            "startup": skipped("startup", "not launched"),
        },
        memory={
            0: GpuMemory(total=22.49, weights=7.63, kv=10.47, activations=1.6, others=0.79),
            1: GpuMemory(total=22.49, weights=7.63, kv=10.47, activations=1.6, others=0.79),
        },
        model="Qwen3-8B",
    )
    dp2 = DeploymentView(
        name="qwen3-8b-dp2",
        engine="vllm",
        layout="TP=1 PP=1 DP=2",
        replicas=(((0,),), ((1,),)),
        findings={
            "placement": passed("placement", "ok", gpus=[0, 1]),
            "heads": passed("heads", "ok", kv_heads_per_rank=8),
            "links": skipped("links", "one GPU per replica", worst_link=None),
            "kv_pool": failed(
                "kv_pool",
                "qwen3-8b-dp2: short of require.concurrency 4 by 3,000 tokens",
                predicted_kv_tokens=29768,
            ),
        },
        memory={
            0: GpuMemory(total=22.49, weights=15.26, kv=4.06, activations=1.6, others=0.79),
            1: GpuMemory(total=22.49, weights=15.26, kv=4.06, activations=1.6, others=0.79),
        },
        model="Qwen3-8B",
    )
    return [tp2, dp2]


def test_page_is_self_contained_and_escapes_text():
    views = views_two_l4()
    hostile = DeploymentView(
        name="<img src=x onerror=alert(1)>",
        engine="vllm",
        layout="TP=1 PP=1 DP=1",
        replicas=(((0,),),),
        findings={"heads": passed("heads", "<b>&</b>")},
    )
    page = render_html(machine=l4_machine(), results=[*views, hostile], title="two L4 <test>")
    assert_self_contained(page)
    assert "<img" not in page and "&lt;img src=x" in page
    assert "<title>two L4 &lt;test&gt;</title>" in page


def test_memory_bars_carry_the_predicted_numbers():
    page = render_html(machine=l4_machine(), results=views_two_l4())
    dom = parse(page)
    weights = dom.find("rect", data_segment="weights")
    assert {w["data-gib"] for w in weights} == {"7.63", "15.26"}
    # TP=2: one bar per GPU (5 parts each); DP=2: replica 1 looks like replica 0, so it is drawn once
    assert len(dom.with_attr("rect", "data-segment")) == 2 * 5 + 1 * 5
    (same,) = dom.with_attr("p", "data-same-as")
    assert same["data-same-as"] == "0"
    assert "replica 1 (GPU1): the same as replica 0" in " ".join(dom.text)
    text = " ".join(dom.text)
    # free = total - everything else, shown in GiB next to every bar
    assert "free 2.00 GiB" in text and "KV pool 10.5 GiB" in text
    assert "all numbers in GiB" in text


def test_layout_that_does_not_fit_says_by_how_much():
    over = DeploymentView(
        name="too-big",
        engine="vllm",
        layout="TP=1 PP=1 DP=1",
        replicas=(((0,),),),
        findings={"kv_pool": failed("kv_pool", "no room")},
        memory={0: GpuMemory(total=22.49, weights=26.0, kv=0.0, activations=1.0, others=0.79)},
    )
    page = render_html(machine=l4_machine(), results=[over])
    assert "over by 5.30 GiB" in page
    dom = parse(page)
    (svg,) = dom.with_attr("svg", "data-gpu")
    segments = dom.with_attr("rect", "data-segment")
    right = max(float(r["x"]) + float(r["width"]) for r in segments)
    assert right <= float(svg["width"]) + 0.5  # cut at the card's size, never past the bar
    assert {r["data-segment"] for r in segments} == {"others", "weights"}  # no room left for the rest


def test_verdict_table_colours_by_status_and_lists_what_to_act_on():
    page = render_html(machine=l4_machine(), results=views_two_l4())
    dom = parse(page)
    cells = {(c["data-check"], c["data-status"]) for c in dom.with_attr("td", "data-check")}
    assert ("links", "warn") in cells and ("kv_pool", "fail") in cells and ("heads", "pass") in cells
    text = " ".join(dom.text)
    assert "What to act on" in text
    assert "use pipeline_parallel_size: 2" in text and "short of require.concurrency 4" in text


def test_link_matrix_colours_links_and_outlines_tp_groups():
    machine = Machine(
        gpus=tuple(Gpu(i, name="RTX 4090") for i in range(5)),
        links={
            (0, 1): "SYS",
            (0, 2): "SYS",
            (0, 3): "SYS",
            (0, 4): "SYS",
            (1, 2): "PHB",
            (1, 3): "NODE",
            (1, 4): "NODE",
            (2, 3): "NODE",
            (2, 4): "NODE",
            (3, 4): "PHB",
        },
        source="topo:003.txt",
    )
    v = DeploymentView(
        name="tp2-dp2",
        engine="vllm",
        layout="TP=2 PP=1 DP=2",
        replicas=(((1, 2),), ((3, 4),)),
        findings={"links": warned("links", "PHB", worst_link="PHB")},
    )
    page = render_html(machine=machine, results=[v])
    dom = parse(page)
    links = dom.with_attr("rect", "data-link")
    assert len(links) == 5 * 4
    assert {r["data-link"] for r in links} == {"SYS", "PHB", "NODE"}
    outlines = dom.find("rect", data_tp_group="tp2-dp2")
    assert len(outlines) == 2  # {1,2} and {3,4}, adjacent: one box each
    assert "GPU memory is unknown" in page  # topo text has no memory: said, not drawn


# -- in a real browser --------------------------------------------------------------------------


def test_browser_renders_the_hand_built_report(tmp_path):
    browser()
    page = tmp_path / "report.html"
    page.write_text(
        render_html(machine=l4_machine(free1=18719, tenant=True), results=views_two_l4(), title="two L4, hand-built"),
        encoding="utf-8",
    )
    png = tmp_path / "report.png"
    dom = parse(render_in_browser(page, tmp_path, screenshot=png))
    assert len(dom.find("svg", class_="links")) == 1
    assert {w["data-gib"] for w in dom.find("rect", data_segment="kv")} == {"10.47", "4.06"}
    assert len(dom.with_attr("td", "data-check")) == 10
    text = " ".join(dom.text)
    assert "qwen3-8b-tp2" in text and "PHB" in text
    width, height = png_size(png)
    assert (width, height) == (1280, 2200)
    assert png.stat().st_size > 20_000  # a blank page compresses to a few kB
    keep = os.environ.get("GPULAYOUT_KEEP_SCREENSHOTS")
    if keep:
        shutil.copy(png, Path(keep) / "hand-built.png")


def _check_report_dom(dom: Elements, names: list[str]) -> None:
    for name in names:
        assert dom.find("tr", data_deployment=name), name
        assert dom.find("div", data_memory=name), name


@pytest.mark.parametrize(
    "example,names",
    [
        ("01-two-l4-pcie/gpulayout.yaml", ["qwen3-8b-tp2", "qwen3-8b-pp2", "qwen3-8b-dp2"]),
        ("02-two-32gb-gemma3/gpulayout.yaml", ["gemma3-12b-tp2", "gemma3-12b-dp2"]),
    ],
)
def test_browser_renders_reference_scenarios_from_check(example, names, tmp_path):
    browser()
    from pytest_gpulayout.machine.sources import load_machine
    from pytest_gpulayout.manifest.load import load_manifest
    from pytest_gpulayout.report.views import views_from_report
    from pytest_gpulayout.runner import load_models, run_checks

    manifest = load_manifest(EXAMPLES / example)
    machine = load_machine(manifest.machine, manifest.base_dir)
    report = run_checks(manifest.deployments, machine, load_models(manifest.deployments))
    views = views_from_report(report)
    html_text = render_html(machine=machine, results=views, title=example)
    assert_self_contained(html_text)
    page = tmp_path / "report.html"
    page.write_text(html_text, encoding="utf-8")
    png = tmp_path / "report.png"
    dom = parse(render_in_browser(page, tmp_path, screenshot=png))
    _check_report_dom(dom, names)
    # every GPU of every deployment has a bar; its weights are what kv_pool predicted
    for v in views:
        kv = v.findings["kv_pool"].data
        bars = dom.find("div", data_memory=v.name)
        assert bars
        gpus = {g for rep in v.replicas for st in rep for g in st}
        assert set(v.memory) == gpus
        for mem in v.memory.values():
            assert mem.weights == pytest.approx(kv["weights_gib_per_rank"], abs=0.01)
    statuses = {c["data-status"] for c in dom.with_attr("td", "data-check")}
    assert statuses >= {"pass"}
    assert png_size(png)[0] == 1280
    keep = os.environ.get("GPULAYOUT_KEEP_SCREENSHOTS")
    if keep:
        shutil.copy(png, Path(keep) / (example.split("/")[0] + ".png"))


def test_status_colours_differ():
    from pytest_gpulayout.report.html import STATUS_COLOURS

    assert len({STATUS_COLOURS[s] for s in Status}) == 4


def test_finding_messages_show_in_tooltips():
    f = Finding("links", Status.WARN, "TP group GPU0-GPU1 is joined by PHB", {"worst_link": "PHB"})
    v = DeploymentView(name="d", engine="vllm", layout="TP=2 PP=1 DP=1", replicas=(((0, 1),),), findings={"links": f})
    dom = parse(render_html(machine=l4_machine(), results=[v]))
    (cell,) = dom.with_attr("td", "data-check")
    assert cell["title"] == f.message


def test_browser_renders_the_plan_page(tmp_path):
    browser()
    from pytest_gpulayout.machine.presets import load_preset
    from pytest_gpulayout.model.load import load_model
    from pytest_gpulayout.planner.plan import plan
    from pytest_gpulayout.report.html import render_plan_html

    p = plan(load_model("Qwen/Qwen3-8B"), load_preset("2xL4-pcie"))  # needs two cards: PP=2 vs TP=2
    html_text = render_plan_html(p)
    assert_self_contained(html_text)
    page = tmp_path / "plan.html"
    page.write_text(html_text, encoding="utf-8")
    png = tmp_path / "plan.png"
    dom = parse(render_in_browser(page, tmp_path, screenshot=png))
    ranked = [r["data-layout"] for r in dom.with_attr("tr", "data-layout") if r.get("class") != "refused"]
    assert ranked[:2] == ["TP=1 PP=2 DP=1", "TP=2 PP=1 DP=1"]
    text = " ".join(dom.text)
    assert "Needs a measurement" in text and "launch: {enabled: true}" in text
    # the top layouts' bars and TP outline are drawn: PP=2 has none, TP=2 outlines {0,1}
    assert dom.find("div", data_memory="#1 TP=1 PP=2 DP=1") and dom.find("div", data_memory="#2 TP=2 PP=1 DP=1")
    assert len(dom.find("rect", data_tp_group="#2 TP=2 PP=1 DP=1")) == 1
    assert {w["data-gib"] for w in dom.find("rect", data_segment="weights")} == {
        f"{p.candidates[0].weights_gib_per_gpu:.2f}"
    }
    keep = os.environ.get("GPULAYOUT_KEEP_SCREENSHOTS")
    if keep:
        shutil.copy(png, Path(keep) / "plan-two-l4.png")
