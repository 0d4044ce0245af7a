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
from pytest_gpulayout.measure.baseline import BaselineKey, GateStatus, compare_or_save, judge, load_key, machine_key
from pytest_gpulayout.measure.text import junit_properties
from pytest_gpulayout.workload import Load, MeasureSpec

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).parents[1] / "data" / "measure" / "vllm-bench-serve-c8.json"

FAKE_PLUGIN = f'''
import os
from dataclasses import replace

import pytest_gpulayout.fixtures as fx
from pytest_gpulayout.measure.record import LaunchRecord
from pytest_gpulayout.measure.result import read_result
from pytest_gpulayout.measure.run import DeploymentMeasure, Measurement
from pytest_gpulayout.measure.verdict import decide
from pytest_gpulayout.workload import Load, MeasureSpec


def fake_measure(deployments, *, work_dir, **kw):
    """Three launches of each deployment, one window each, the recorded run scaled by FAKE_SCALE (and
    spread by FAKE_SPREAD, a fraction each side)."""
    scale = dict(x.split("=") for x in os.environ.get("FAKE_SCALE", "").split(",") if x)
    spread = float(os.environ.get("FAKE_SPREAD", "0.01"))
    dms = {{}}
    for d in deployments:
        dm = DeploymentMeasure(d, d.measure or MeasureSpec())
        load = Load(concurrency=dm.spec.concurrency[-1])
        f = float(scale.get(d.name, 1))
        for n, k in enumerate((1 - spread, 1.0, 1 + spread)):
            w = read_result({str(RECORDED)!r}, load=load, launch=n)
            dm.windows.append(replace(w, output_tokens_per_s=w.output_tokens_per_s * f * k))
        dm.launches += [LaunchRecord(n, n, 1.0, 1, None, "ready") for n in range(3)]
        dms[d.name] = dm
    v = decide({{n: dm.points() for n, dm in dms.items()}}, "output_tokens_per_s")
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
    assert len(e["launch_samples"]) == 3   # the launches, so a later run is judged against the measured noise

    monkeypatch.setenv("FAKE_SCALE", "tp2=0.85")  # 15 % slower: measurable, within this manifest's 20 %
    within = _run(project, f"--gpulayout-measure-baseline={base}", "test_user.py")
    within.assert_outcomes(passed=1)
    assert "BASELINE pass" in within.stdout.str()

    monkeypatch.setenv("FAKE_SCALE", "tp2=0.7")   # 30 % slower, the interval below 1: fails, naming the baseline
    slow = _run(project, f"--gpulayout-measure-baseline={base}", "test_user.py")
    slow.assert_outcomes(failed=1)
    out = slow.stdout.str()
    assert f"against the baseline {saved:.1f}" in out and "30.0% below the baseline" in out
    assert "measurably slower, more than max_regression 20%" in out and "95 % CI 0.6" in out

    # 30 % slower but with launches spread +-40 %: the interval reaches 1, the noise hides it: a warning, not a pass
    monkeypatch.setenv("FAKE_SPREAD", "0.4")
    noisy = _run(project, f"--gpulayout-measure-baseline={base}", "test_user.py", "-W",
                 "error::pytest_gpulayout.GpuLayoutWarning")
    noisy.assert_outcomes(failed=1)
    assert "the noise hides whether it regressed" in noisy.stdout.str()
    assert json.loads(base.read_text())["entries"][0]["output_tokens_per_s"] == saved  # never overwritten


def test_another_release_is_saved_beside_not_compared(tmp_path: Path) -> None:
    base = tmp_path / "b.json"
    key = BaselineKey("tp2", "vllm", "0.32.0", "h: no GPU", 8, "32 in / 32 out, 24 requests a window")
    assert compare_or_save(base, key, [100.0, 102.0]).status == "saved"
    assert compare_or_save(base, key, [95.0, 97.0]).status == "pass"
    fail = compare_or_save(base, key, [80.0, 81.0])
    assert fail.gate == GateStatus.FAIL and fail.ratio is not None and fail.ratio.mean == pytest.approx(80.5 / 101)
    newer = BaselineKey(**{**key.__dict__, "release": "0.33.0"})
    out = compare_or_save(base, newer, [50.0, 51.0])
    assert out.status == "saved" and "measured otherwise, so not compared: vllm 0.32.0" in out.text
    assert len(json.loads(base.read_text())["entries"]) == 2
    assert compare_or_save(base, newer, [49.0, 50.0]).status == "pass"
    with pytest.raises(InputError, match="max_regression must be a fraction"):
        compare_or_save(base, key, [1.0], max_regression=10)
    base.write_text("[]")
    with pytest.raises(InputError, match="not a measure baseline"):
        compare_or_save(base, key, [1.0])


def test_the_gate_is_sized_to_the_measured_noise() -> None:
    """Not one mean against a fixed 10 % line: the interval of the ratio over both runs' launches."""
    tight = [100.0, 101.0, 99.0]
    assert judge([85.0, 86.0, 84.0], tight, 0.10)[0] == GateStatus.FAIL          # measured, past the tolerance
    assert judge([95.0, 96.0, 94.0], tight, 0.10)[0] == GateStatus.PASS          # measured, within it (said)
    assert "measurably slower, by less than" in judge([95.0, 96.0, 94.0], tight, 0.10)[2]
    noisy = [60.0, 100.0, 140.0]                                                   # one run's own interval +-50 %
    status, ratio, why = judge([75.0, 105.0, 60.0], noisy, 0.10)
    assert status == GateStatus.INCONCLUSIVE and ratio.high > 1 and "noise hides" in why
    assert judge([99.0, 101.0], noisy, 0.10)[0] == GateStatus.PASS
    assert judge([70.0], [100.0], 0.10)[0] == GateStatus.INCONCLUSIVE               # one launch: no interval
    assert judge([99.0], [100.0], 0.10)[0] == GateStatus.PASS


def test_keys_name_the_machine_and_the_load() -> None:
    m = Machine(gpus=(Gpu(0, "a", "NVIDIA H100"), Gpu(1, "b", "NVIDIA H100")), source="t")
    assert machine_key(m, "node1") == "node1: 2x NVIDIA H100"
    assert machine_key(None, "node1") == "node1: no GPU"
    assert load_key(MeasureSpec(duration_s=30)) == "128 in / 128 out, 30 s a window"
    rate = load_key(MeasureSpec(), Load(request_rate=2.0))
    assert rate == "128 in / 128 out, 64 requests a window, 2 req/s (Poisson)"


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
    assert props["gpulayout.measure.dp2.requests.completed"] == "48" and props["gpulayout.measure.dp2.launches"] == "3"
    assert "gpulayout.measure.tp2.itl_ms.p99" in props
    assert "pytest_gpulayout/checks/test_measure.py::test_measure PASSED" in out or "passed" in out
    without = _run(project, "--gpulayout", "-k", "measure")   # opt-in: no measure item without the flag
    without.assert_outcomes()
    assert "test_measure" not in without.stdout.str()


def test_junit_properties_flatten_the_figures() -> None:
    d = {"status": "pass", "engine": "vllm", "layout": "TP=2", "concurrency": 8, "output_tokens_per_s": 10.5,
         "requests_per_s": 1.0, "goodput_rps": None, "ttft_ms": {"p50": 1.0, "p90": 2.0, "p99": None},
         "launches": [{}, {}],
         "requests": {"completed": 3, "failed": 0}, "windows": [{}, {}], "engine_metrics": {"samples": 2},
         "notes": []}
    props = dict(junit_properties("tp2", d))
    assert props["gpulayout.measure.tp2.goodput_rps"] == "" and props["gpulayout.measure.tp2.ttft_ms.p99"] == ""
    assert props["gpulayout.measure.tp2.windows"] == "2" and props["gpulayout.measure.tp2.launches"] == "2"
    assert json.loads(props["gpulayout.measure.tp2.engine_metrics"]) == {"samples": 2}
    assert "gpulayout.measure.tp2.notes" not in props


# ------------------------------------------------------------------------------------------------
# gpulayout plan --measure: the candidates the plan's "measure" line names, measured under the plan
# ------------------------------------------------------------------------------------------------


def _fake_measure(seen: list[Any], speed: dict[tuple[int, int, int], float]) -> Any:
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
            f = speed[(d.tp, d.pp, d.dp)]
            for n, k in enumerate((0.99, 1.0, 1.01)):
                w = read_result(RECORDED, load=Load(concurrency=8), launch=n)
                dm.windows.append(replace(w, output_tokens_per_s=w.output_tokens_per_s * f * k))
            dms[d.name] = dm
        return Measurement(dms, decide({n: dm.points() for n, dm in dms.items()}, "output_tokens_per_s"), {}, 1.0)

    return fake


PLAN = ["plan", "Qwen/Qwen3-8B", "--machine", "preset:2xL4-pcie", "--max-model-len", "8192", "--measure"]


def test_plan_measure_puts_a_split_against_copies_with_the_launch_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Qwen3-8B on two L4s: the rules rank two copies first; the measurement (copies slower here) says it
    disagrees. The --launch file's block reaches every measured layout; the measuring manifest is kept."""
    from pytest_gpulayout.cli import main
    from pytest_gpulayout.measure import run as run_mod

    seen: list[Any] = []
    monkeypatch.setattr(run_mod, "measure", _fake_measure(seen, {(1, 1, 2): 1.0, (1, 2, 1): 1.5, (2, 1, 1): 1.2}))
    launch = tmp_path / "launch.yaml"
    launch.write_text("launch:\n  command: [/venv/bin/python, -m, vllm.entrypoints.openai.api_server]\n"
                      "  args: [--enforce-eager]\n  env: {VLLM_X: '1'}\n  timeout_s: 300\n"
                      "measure: {concurrency: 4, requests: 16}\n")
    argv = [*PLAN, "--launch", str(launch), "--log-dir", str(tmp_path / "logs")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    deps = seen[0]
    assert [(d.tp, d.pp, d.dp, d.gpus) for d in deps] == [(1, 1, 2, (0, 1)), (1, 2, 1, (0, 1)), (2, 1, 1, (0, 1))]
    for d in deps:   # the launch file applied to every measured layout, and its load
        assert d.launch.command == ("/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server")
        assert d.launch.args == ("--enforce-eager",) and dict(d.launch.env) == {"VLLM_X": "1"}
        assert d.launch.timeout_s == 300 and d.measure.concurrency == (4,) and d.measure.requests == 16
    pools = seen[1]  # kv_pool's prediction per replica, for the preemptions to be read against
    assert set(pools) == {"tp1-pp1-dp2", "tp1-pp2-dp1", "tp2-pp1-dp1"} and len(pools["tp1-pp1-dp2"]) == 2
    plan_part, measured = out.split("\nmeasured (")
    assert measured.startswith("tp1-pp1-dp2: TP=1 PP=1 DP=2, tp1-pp2-dp1: TP=1 PP=2 DP=1, "
                               "tp2-pp1-dp1: TP=2 PP=1 DP=1):")
    assert "verdict: choose tp1-pp2-dp1: 1.25x the output tokens/s of tp2-pp1-dp1" in measured
    assert "rules: 1. tp1-pp1-dp2, 2. tp1-pp2-dp1, 3. tp2-pp1-dp1; measured at concurrency 8: 1. tp1-pp2-dp1, " \
           "2. tp2-pp1-dp1, 3. tp1-pp1-dp2" in measured
    assert "the measurement disagrees with the rules: they rank tp1-pp1-dp2 first; measured at concurrency 8, " \
           "tp1-pp2-dp1 serves 1.50x its output tokens/s" in measured
    assert "the rules rank tp1-pp1-dp2 above tp2-pp1-dp1; measured, tp2-pp1-dp1 serves 1.20x its output tokens/s " \
           "(95 % CI" in measured
    kept = tmp_path / "logs" / "gpulayout.yaml"
    assert f"the measuring manifest: {kept}" in measured and kept.is_file()
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["measured"]["verdict"]["choose"] == "tp1-pp2-dp1"
    assert data["measured"]["rules_rank"] == {"tp1-pp1-dp2": 1, "tp1-pp2-dp1": 2, "tp2-pp1-dp1": 3}


def test_plan_measure_top_and_nothing_to_measure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_gpulayout.cli import main
    from pytest_gpulayout.measure import run as run_mod

    seen: list[Any] = []
    monkeypatch.setattr(run_mod, "measure", _fake_measure(seen, {(1, 1, 2): 1.0, (1, 2, 1): 1.0, (2, 1, 1): 1.0}))
    assert main([*PLAN, "--measure-top", "2", "--log-dir", str(tmp_path / "a")]) == 0
    assert [(d.tp, d.pp, d.dp) for d in seen[0]] == [(1, 1, 2), (1, 2, 1)]   # copies against the best split
    assert "the measurement cannot tell" in capsys.readouterr().out
    seen.clear()
    # 65,536 tokens of KV: only the splits serve; both are measured
    assert main([*PLAN, "--concurrency", "8", "--log-dir", str(tmp_path / "b")]) == 0
    assert [(d.tp, d.pp, d.dp) for d in seen[0]] == [(1, 2, 1), (2, 1, 1)]
    seen.clear()
    big = ["plan", "meta-llama/Llama-3.1-70B-Instruct", "--machine", "preset:2xL4-pcie", "--measure"]
    assert main(big) == 1 and seen == []
    assert "measured: nothing to measure: fewer than two layouts serve" in capsys.readouterr().out
    assert main(["plan", "Qwen/Qwen3-8B", "--engine", "llamacpp", "--measure"]) == 2
    assert "names no layouts to measure" in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ("launch:\n  comand: [x]\n", "launch.comand: unknown key 'comand': did you mean 'command'?"),
    ("launch:\n  args: --x\n", "launch.args: "),
    ("lunch: {}\n", "unknown key 'lunch'"),
    ("measure: {request_rate: 0}\n", "measure.request_rate: must be a number of requests/s > 0"),
    ("[1, 2]\n", "must be a mapping with a 'launch:' block"),
])
def test_a_bad_launch_file_is_one_line_before_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch, text: str,
                                                       message: str) -> None:
    from pytest_gpulayout.cli import main
    from pytest_gpulayout.measure import run as run_mod

    monkeypatch.setattr(run_mod, "measure", lambda *a, **k: pytest.fail("measured"))
    f = tmp_path / "launch.yaml"
    f.write_text(text)
    assert main([*PLAN, "--launch", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gpulayout: {f}: ") and message in err and len(err.splitlines()) == 1, err
    assert main(["plan", "Qwen/Qwen3-8B", "--launch", str(f)]) == 2
    assert "--launch goes with --measure" in capsys.readouterr().err
