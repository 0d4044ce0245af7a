"""The pytest side of ``gpulayout measure`` without an engine: the ``gpulayout_measure`` fixture, the
baseline (``--gpulayout-measure-baseline``: saved, then compared at the same release and machine) and
the suite's ``--gpulayout-measure`` with its JUnit properties. The measurement itself is replaced by
one built from the recorded ``vllm bench serve`` result (a plugin given with ``-p``), scaled by
``FAKE_SCALE`` per deployment; the real one runs in ``test_measure_engine.py``."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.measure.baseline import BaselineKey, compare_or_save, load_key, machine_key
from pytest_gpulayout.measure.text import junit_properties
from pytest_gpulayout.workload import MeasureSpec

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).parents[1] / "data" / "measure" / "vllm-bench-serve-c8.json"

FAKE_PLUGIN = f'''
import os
from dataclasses import replace

import pytest_gpulayout.fixtures as fx
from pytest_gpulayout.measure.result import read_result
from pytest_gpulayout.measure.run import DeploymentMeasure, Measurement
from pytest_gpulayout.measure.verdict import decide
from pytest_gpulayout.workload import MeasureSpec


def fake_measure(deployments, *, work_dir, **kw):
    scale = dict(x.split("=") for x in os.environ.get("FAKE_SCALE", "").split(",") if x)
    dms = {{}}
    for d in deployments:
        dm = DeploymentMeasure(d, d.measure or MeasureSpec())
        w = read_result({str(RECORDED)!r}, concurrency=dm.spec.concurrency[-1])
        f = float(scale.get(d.name, 1))
        dm.windows += [replace(w, output_tokens_per_s=w.output_tokens_per_s * f * k) for k in (0.99, 1.0, 1.01)]
        dms[d.name] = dm
    v = decide({{n: dm.windows for n, dm in dms.items()}}, "output_tokens_per_s")
    return Measurement(dms, v, {{}}, 1.0)


fx.measure = fake_measure
'''

MANIFEST = """\
version: 1
machine: preset:2xL4-pcie
defaults:
  engine: vllm
  engine_version: "0.33.0"
  model: Qwen/Qwen3-8B
  max_model_len: 8192
  measure: {concurrency: [4, 8], requests: 16, max_regression: 0.2}
deployments:
  tp2: {tensor_parallel_size: 2}
  dp2: {data_parallel_size: 2}
"""

USER_TEST = """
def test_tp2_throughput(gpulayout_measure):
    figures = gpulayout_measure("tp2", concurrency=8)
    assert figures["concurrency"] == 8 and figures["status"] == "pass"
    assert figures["output_tokens_per_s"] > 0 and figures["itl_ms"]["p99"] > 0
    print("BASELINE", figures.get("baseline", {}).get("status"))
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), str(pytester.path),
                                                                 os.environ.get("PYTHONPATH")) if p))
    monkeypatch.delenv("FAKE_SCALE", raising=False)
    pytester.makefile(".yaml", gpulayout=MANIFEST)
    pytester.makepyfile(fake_measure_plugin=FAKE_PLUGIN, test_user=USER_TEST)
    return pytester


def _run(p: pytest.Pytester, *args: str) -> pytest.RunResult:
    return p.runpytest_subprocess("-p", "fake_measure_plugin", "-p", "no:cacheprovider", "-s", *args, timeout=120)


def test_fixture_saves_the_baseline_then_fails_a_regression(project: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    base = project.path / "base.json"
    first = _run(project, f"--gpulayout-measure-baseline={base}", "test_user.py")
    first.assert_outcomes(passed=1)
    assert "BASELINE saved" in first.stdout.str()
    entries = json.loads(base.read_text())["entries"]
    assert len(entries) == 1
    e = entries[0]
    assert (e["deployment"], e["engine"], e["release"], e["concurrency"]) == ("tp2", "vllm", "0.33.0", 8)
    assert e["machine"].endswith(": 2x NVIDIA L4") and e["load"] == "128 in / 128 out, 16 requests a window"
    saved = e["output_tokens_per_s"]

    monkeypatch.setenv("FAKE_SCALE", "tp2=0.85")  # 15 % slower: within this manifest's 20 %
    within = _run(project, f"--gpulayout-measure-baseline={base}", "test_user.py")
    within.assert_outcomes(passed=1)
    assert "BASELINE pass" in within.stdout.str()

    monkeypatch.setenv("FAKE_SCALE", "tp2=0.7")   # 30 % slower: fails, naming the saved figure
    slow = _run(project, f"--gpulayout-measure-baseline={base}", "test_user.py")
    slow.assert_outcomes(failed=1)
    out = slow.stdout.str()
    assert f"below the baseline {saved:.1f}" in out and "30.0% below" in out and "max_regression 20%" in out
    assert json.loads(base.read_text())["entries"][0]["output_tokens_per_s"] == saved  # never overwritten


def test_another_release_is_saved_beside_not_compared(tmp_path: Path) -> None:
    base = tmp_path / "b.json"
    key = BaselineKey("tp2", "vllm", "0.32.0", "h: no GPU", 8, "32 in / 32 out, 24 requests a window")
    assert compare_or_save(base, key, 100.0).status == "saved"
    assert compare_or_save(base, key, 95.0).status == "pass"
    fail = compare_or_save(base, key, 89.0)
    assert fail.status == "fail" and fail.ratio == pytest.approx(0.89)
    newer = BaselineKey(**{**key.__dict__, "release": "0.33.0"})
    out = compare_or_save(base, newer, 50.0)
    assert out.status == "saved" and "measured otherwise, so not compared: vllm 0.32.0" in out.text
    assert len(json.loads(base.read_text())["entries"]) == 2
    assert compare_or_save(base, newer, 49.0).status == "pass"
    with pytest.raises(InputError, match="max_regression must be a fraction"):
        compare_or_save(base, key, 1.0, max_regression=10)
    base.write_text("[]")
    with pytest.raises(InputError, match="not a measure baseline"):
        compare_or_save(base, key, 1.0)


def test_keys_name_the_machine_and_the_load() -> None:
    m = Machine(gpus=(Gpu(0, "a", "NVIDIA H100"), Gpu(1, "b", "NVIDIA H100")), source="t")
    assert machine_key(m, "node1") == "node1: 2x NVIDIA H100"
    assert machine_key(None, "node1") == "node1: no GPU"
    assert load_key(MeasureSpec(duration_s=30)) == "128 in / 128 out, 30 s a window"


def test_suite_measures_every_deployment_with_junit_properties(project: pytest.Pytester,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SCALE", "tp2=2")
    xml = project.path / "junit.xml"
    result = _run(project, "--gpulayout", "--gpulayout-measure", f"--junitxml={xml}", "-k", "measure")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "gpulayout measure: verdict: choose tp2: 2.00x the output tokens/s of dp2" in out
    props = {p.get("name"): p.get("value") for p in ET.parse(xml).iter("property")}
    assert props["gpulayout.measure.choose"] == "tp2"
    assert props["gpulayout.measure.tp2.concurrency"] == "8"
    assert float(props["gpulayout.measure.tp2.output_tokens_per_s"]) == pytest.approx(
        2 * float(props["gpulayout.measure.dp2.output_tokens_per_s"]), rel=1e-3)
    assert props["gpulayout.measure.dp2.requests.completed"] == "48"
    assert "gpulayout.measure.tp2.itl_ms.p99" in props
    assert "pytest_gpulayout/checks/test_measure.py::test_measure PASSED" in out or "passed" in out
    without = _run(project, "--gpulayout", "-k", "measure")   # opt-in: no measure item without the flag
    without.assert_outcomes()
    assert "test_measure" not in without.stdout.str()


def test_junit_properties_flatten_the_figures() -> None:
    d = {"status": "pass", "engine": "vllm", "layout": "TP=2", "concurrency": 8, "output_tokens_per_s": 10.5,
         "requests_per_s": 1.0, "goodput_rps": None, "ttft_ms": {"p50": 1.0, "p90": 2.0, "p99": None},
         "requests": {"completed": 3, "failed": 0}, "windows": [{}, {}], "engine_metrics": {"samples": 2},
         "notes": []}
    props = dict(junit_properties("tp2", d))
    assert props["gpulayout.measure.tp2.goodput_rps"] == "" and props["gpulayout.measure.tp2.ttft_ms.p99"] == ""
    assert props["gpulayout.measure.tp2.windows"] == "2"
    assert json.loads(props["gpulayout.measure.tp2.engine_metrics"]) == {"samples": 2}
    assert "gpulayout.measure.tp2.notes" not in props


# ------------------------------------------------------------------------------------------------
# gpulayout plan --measure: the candidates the plan's "measure" line names, measured under the plan
# ------------------------------------------------------------------------------------------------


def _fake_measure(seen: list[list[Any]]) -> Any:
    from dataclasses import replace

    from pytest_gpulayout.measure.result import read_result
    from pytest_gpulayout.measure.run import DeploymentMeasure, Measurement
    from pytest_gpulayout.measure.verdict import decide

    def fake(deployments: Any, *, work_dir: Path, **kw: Any) -> Measurement:
        seen.append(list(deployments))
        seen.append(kw.get("predicted"))
        dms = {}
        for d in deployments:
            dm = DeploymentMeasure(d, d.measure or MeasureSpec())
            w = read_result(RECORDED, concurrency=8)
            f = 1.5 if d.tp == 1 else 1.0
            dm.windows += [replace(w, output_tokens_per_s=w.output_tokens_per_s * f * k) for k in (0.99, 1.0, 1.01)]
            dms[d.name] = dm
        return Measurement(dms, decide({n: dm.windows for n, dm in dms.items()}, "output_tokens_per_s"), {}, 1.0)

    return fake


def test_plan_measure_runs_the_named_candidates_and_puts_the_verdict_under_the_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_gpulayout.cli import main
    from pytest_gpulayout.measure import run as run_mod

    seen: list[list[Any]] = []
    monkeypatch.setattr(run_mod, "measure", _fake_measure(seen))
    argv = ["plan", "Qwen/Qwen3-8B", "--machine", "preset:2xL4-pcie", "--max-model-len", "8192", "--concurrency",
            "8", "--measure", "--log-dir", str(tmp_path / "logs")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert [(d.tp, d.pp, d.gpus) for d in seen[0]] == [(1, 2, (0, 1)), (2, 1, (0, 1))]  # what "measure:" names
    pools = seen[1]  # kv_pool's prediction per replica, for the preemptions to be read against
    assert set(pools) == {"tp1-pp2-dp1", "tp2-pp1-dp1"} and all(len(v) == 1 and v[0] > 0 for v in pools.values())
    plan_part, measured = out.split("\nmeasured (")
    assert "measure: The rules cannot decide TP=1 PP=2 DP=1 against TP=2 PP=1 DP=1" in plan_part
    assert measured.startswith("tp1-pp2-dp1: TP=1 PP=2 DP=1, tp2-pp1-dp1: TP=2 PP=1 DP=1):")
    assert "verdict: choose tp1-pp2-dp1: 1.50x the output tokens/s of tp2-pp1-dp1" in measured
    assert f"logs and load-generator results: {tmp_path / 'logs'}" in measured
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["measured"]["verdict"]["choose"] in data["measured"]["candidates"]
    assert set(data["measured"]["candidates"].values()) == {"TP=1 PP=2 DP=1", "TP=2 PP=1 DP=1"}


def test_plan_measure_with_nothing_to_measure_says_so(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_gpulayout.cli import main
    from pytest_gpulayout.measure import run as run_mod

    seen: list[list[Any]] = []
    monkeypatch.setattr(run_mod, "measure", _fake_measure(seen))
    argv = ["plan", "Qwen/Qwen3-8B", "--machine", "preset:8xH100-sxm", "--max-model-len", "8192", "--measure"]
    assert main(argv) == 0
    assert "measured: nothing to measure: the rules decided" in capsys.readouterr().out and seen == []
    assert main(["plan", "Qwen/Qwen3-8B", "--engine", "llamacpp", "--measure"]) == 2
    assert "names no layouts to measure" in capsys.readouterr().err
