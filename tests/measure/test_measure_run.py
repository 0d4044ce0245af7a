"""The measurement's schedule without an engine: the launcher replaced by one that serves at once, the
load generator by a runner that writes a result from the recorded ``vllm bench serve`` run (its speed
set per deployment and launch). What is checked is what the user sees: launches interleaved (A B B A),
two of each by default, more while the intervals overlap, the budget and why it stopped, windows sized
to ``duration_s`` from the first launch, each window's command and result kept, and the windows also
in ``vllm bench sweep``'s layout."""

from __future__ import annotations

import csv
import json
import shlex
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_gpulayout.manifest.load import parse_manifest
from pytest_gpulayout.measure import generator as gen_mod
from pytest_gpulayout.measure import run as run_mod
from pytest_gpulayout.measure.schedule import StopReason

RECORDED = Path(__file__).parents[1] / "data" / "measure" / "vllm-bench-serve-c8.json"

#: a stand-in for ``vllm bench serve``: each job writes the recorded run's per-request lists, as many
#: requests as --num-prompts, its duration divided by the speed FAKE_SPEEDS gives the deployment's launch
FAKE_RUNNER = f"""
import json, os, sys
base = json.load(open({str(RECORDED)!r}))
speeds = json.loads(os.environ["FAKE_SPEEDS"])
for line in sys.stdin:
    job = json.loads(line)
    a = job["args"]
    flag = lambda f: a[a.index(f) + 1]
    name, launch = flag("--result-filename").split("-L")[0], int(flag("--result-filename").split("-L")[1][0])
    n = int(flag("--num-prompts"))
    speed = speeds[name][launch % len(speeds[name])]
    out = dict(base)
    for k in ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "generated_texts", "errors"):
        out[k] = [base[k][i % 16] for i in range(n)]
    out.update(duration=base["duration"] * n / 16 / speed, completed=n, failed=0, num_prompts=n)
    with open(os.path.join(flag("--result-dir"), flag("--result-filename")), "w") as f:
        json.dump(out, f)
    open(job["done"] + ".part", "w").write("ok")
    os.replace(job["done"] + ".part", job["done"])   # as the real runner does: never read half-written
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The launches made, by deployment, in order."""
    made: list[str] = []

    def launch(argv: list[str], *, serve: Any, log_path: Path, **kw: Any) -> Any:
        made.append(log_path.name.split("-")[1])
        while serve():
            time.sleep(0.005)
        return SimpleNamespace(stopped_by="ready", log=SimpleNamespace(ready=True), tail=(), returncode=0,
                               log_path=log_path, leftover_pids=())

    monkeypatch.setattr(run_mod, "launch", launch)
    monkeypatch.setattr(gen_mod, "RUNNER", FAKE_RUNNER)
    return made


def _measure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, speeds: dict[str, list[float]],
             **block: Any) -> dict[str, Any]:
    monkeypatch.setenv("FAKE_SPEEDS", json.dumps(speeds))
    measure = {"concurrency": 8, "requests": 16, "windows": 2, "python": sys.executable, "budget_s": 120, **block}
    data = {"version": 1, "defaults": {"model": "Qwen/Qwen3-8B", "max_model_len": 512,
                                       "launch": {"command": [sys.executable, "-c", "pass"]}, "measure": measure},
            "deployments": {n: {} for n in speeds}}
    manifest = parse_manifest(data, path=tmp_path / "gpulayout.yaml")
    result = run_mod.measure(manifest.deployments, work_dir=tmp_path / "work", use_nvml=False)
    return result.to_json()


def _flags(cmd: Path) -> dict[str, str]:
    argv = shlex.split(cmd.read_text())
    assert argv[:3] == ["vllm", "bench", "serve"]
    return {a: b for a, b in zip(argv[3:], argv[4:], strict=False) if a.startswith("--")}


def test_two_interleaved_launches_each_then_a_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       fake: list[str]) -> None:
    out = _measure(tmp_path, monkeypatch, {"fast": [2.0, 2.1], "slow": [1.0, 1.02]})
    assert fake == out["order"] == ["fast", "slow", "slow", "fast"]
    assert out["stopped"]["reason"] == StopReason.DECIDED.value
    assert out["verdict"]["choose"] == "fast" and "2 launches each" in out["verdict"]["text"]
    for name in ("fast", "slow"):
        d = out["deployments"][name]
        assert [r["launch"] for r in d["launches"]] == [0, 1] and len(d["windows"]) == 4
        assert len(d["output_tokens_per_s_launches"]) == 2 and d["output_tokens_per_s_ci95"] is not None
        assert [r["position"] for r in d["launches"]] == ([0, 3] if name == "fast" else [1, 2])
    # every window's exact command and its result, kept; each launch and window its own prompts (seed), the
    # same prompts for both layouts in the same launch and window
    work = tmp_path / "work"
    seeds = {p.name: _flags(p)["--seed"] for p in work.glob("*.cmd")}
    assert len(seeds) == 8 and len(set(seeds.values())) == 4
    assert seeds["fast-L0-c8-w1.cmd"] == seeds["slow-L0-c8-w1.cmd"] != seeds["fast-L1-c8-w1.cmd"]
    w = out["deployments"]["slow"]["windows"][0]
    assert Path(w["result"]).is_file() and w["command"] == (work / "slow-L0-c8-w0.cmd").read_text().strip()
    flags = _flags(work / "slow-L0-c8-w0.cmd")
    assert flags["--num-warmups"] == "8" and _flags(work / "slow-L0-c8-w1.cmd")["--num-warmups"] == "0"


def test_more_launches_while_the_intervals_overlap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   fake: list[str]) -> None:
    out = _measure(tmp_path, monkeypatch, {"a": [1.0, 1.2, 0.9], "b": [1.1, 0.95, 1.05]})
    assert out["stopped"]["reason"] == StopReason.LAUNCHES.value
    assert "still no measurable difference after 5 launches each" in out["stopped"]["text"]
    assert fake == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]   # the order keeps alternating
    assert not out["verdict"]["decided"] and out["verdict"]["text"].startswith("no measurable difference")


def test_only_the_undecided_pair_is_launched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    fake: list[str]) -> None:
    """A clearly slower third layout keeps its two launches and its rank; the best two, not yet apart,
    are the ones launched again."""
    out = _measure(tmp_path, monkeypatch, {"a": [1.0, 1.2, 0.9], "b": [1.1, 0.95, 1.05], "c": [0.3, 0.31]})
    assert fake == ["a", "b", "c", "c", "b", "a", "a", "b", "b", "a", "a", "b"]
    assert [len(out["deployments"][n]["launches"]) for n in ("a", "b", "c")] == [5, 5, 2]
    assert [r["deployment"] for r in out["verdict"]["ranking"]][2] == "c"


def test_a_spent_budget_stops_the_launches_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       fake: list[str]) -> None:
    out = _measure(tmp_path, monkeypatch, {"a": [1.0], "b": [2.0]}, budget_s=0.01)
    assert fake == ["a", "b"]                       # each deployment's first launch always runs
    assert out["stopped"]["reason"] == StopReason.BUDGET.value
    assert "before the planned launches were done (launches: a 1 of 2, b 1 of 2)" in out["stopped"]["text"]
    for name in ("a", "b"):   # its first window always runs; the budget cut the second, and it is said
        d = out["deployments"][name]
        assert len(d["windows"]) == 1 and d["launches"][0]["cut"] == ["window 2 at concurrency 8"]
        assert "launch 1: the budget was spent before window 2 at concurrency 8" in d["notes"]


def test_windows_are_sized_to_duration_s_from_the_first_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               fake: list[str]) -> None:
    """The first launch measures the rate it serves (a calibration run, not counted) before its first
    window, and every window of every launch is duration_s x that rate."""
    block = {"duration_s": 0.5, "requests": None}
    out = _measure(tmp_path, monkeypatch, {"a": [1.0, 1.0], "b": [3.0, 3.0]}, **block)
    work = tmp_path / "work"
    for name in ("a", "b"):
        d = out["deployments"][name]
        (cal,) = d["calibrations"]
        assert _flags(work / f"{name}-L0-c8-cal.cmd")["--num-prompts"] == "16"
        assert _flags(work / f"{name}-L0-c8-cal.cmd")["--num-warmups"] == "8"
        expect = str(round(cal["requests_per_s"] * 0.5))
        for launch in (0, 1):
            for w in (0, 1):
                assert _flags(work / f"{name}-L{launch}-c8-w{w}.cmd")["--num-prompts"] == expect
        assert _flags(work / f"{name}-L0-c8-w0.cmd")["--num-warmups"] == "0"   # the calibration warmed it
        assert not (work / f"{name}-L1-c8-cal.cmd").exists()                  # once, in the first launch
        assert [w["duration_s"] for w in d["windows"]] == pytest.approx([0.5] * 4, rel=0.05)


def test_open_loop_rates_and_the_sweep_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              fake: list[str]) -> None:
    out = _measure(tmp_path, monkeypatch, {"a": [1.0, 1.1], "b": [2.0, 2.1]}, concurrency=None,
                   request_rate=[2, 4], burstiness=0.5)
    work = tmp_path / "work"
    flags = _flags(work / "a-L0-r4-b0.5-w0.cmd")
    assert (flags["--request-rate"], flags["--burstiness"]) == ("4", "0.5") and "--max-concurrency" not in flags
    assert out["verdict"]["request_rate"] == 4.0 and out["verdict"]["load"] == "4 req/s (burstiness 0.5)"
    d = out["deployments"]["b"]
    assert [p["request_rate"] for p in d["points"]] == [2.0, 4.0] and all(p["launches"] == 2 for p in d["points"])
    # vllm bench sweep's layout: SERVE-<name>-BENCH-<params>/run=<n>.json, summary.json, one summary.csv
    sweep = work / "sweep"
    comb = sweep / "SERVE--b-BENCH--request_rate=4.0-burstiness=0.5"
    runs = json.loads((comb / "summary.json").read_text())
    assert [r["run_number"] for r in runs] == [0, 1, 2, 3] and [r["_launch"] for r in runs] == [0, 0, 1, 1]
    assert json.loads((comb / "run=2.json").read_text()) == runs[2]
    assert runs[0]["_benchmark_name"] == "b" and runs[0]["request_rate"] == 4.0 and "ttfts" not in runs[0]
    with (sweep / "summary.csv").open() as fh:
        rows = list(csv.reader(fh))
    head = rows[0]
    assert head[0] == "" and {"run_number", "_benchmark_name", "tensor_parallel_size", "request_rate",
                              "output_throughput", "p99_ttft_ms"} <= set(head)
    assert len(rows) == 1 + 16 and [r[0] for r in rows[1:]] == [str(i) for i in range(16)]
    assert out["sweep_csv"] == str(sweep / "summary.csv")
