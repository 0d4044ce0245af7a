"""``gpulayout measure`` against the real CPU build of vLLM (``@pytest.mark.engine``): two deployments
of the tiny Llama that differ only in ``--max-num-seqs`` (1 against 16) under 8 concurrent requests,
each launched twice, interleaved (A B B A). The verdict must choose 16 by its goodput with the interval
over launches, the goodput must be the load generator's own count of the same SLO (``--goodput``, vLLM's
per-request TTFT/TPOT rule) in every window, the figures must equal its JSON for the same run, and an
interrupted measurement must leave nothing behind.

The tiny model ships only its config.json; ``conftest.py``'s ``model_dir`` gives it a word-level
tokenizer, so ``vllm bench serve`` and the server tokenize offline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from drivers import reset_signals
from leaks import Snapshot
from measure_leaks import launcher_named_shm
from real_engines import vllm_python

from pytest_gpulayout.manifest.load import load_manifest
from pytest_gpulayout.measure.run import measure

HERE = Path(__file__).parents[1]
REPO = HERE.parent

#: the load: short windows (24 requests of 32 tokens in, 32 out), two in each of two launches; an SLO
#: loose enough for a loaded 2-core machine, so goodput decides and every window counts it
MEASURE = {"concurrency": 8, "requests": 24, "input_tokens": 32, "output_tokens": 32, "windows": 2, "launches": 2,
           "budget_s": 600, "slo": {"ttft_ms": 3000, "tpot_ms": 200}}
#: no compilation (the CPU build keeps its worker in a process of its own: ``uni`` is turned into ``mp``)
SPEEDY = ["--enforce-eager"]


def _manifest(tmp_path: Path, model: Path, **measure_block: object) -> Path:
    python = vllm_python()
    block = {**MEASURE, **measure_block}
    data = {
        "version": 1,
        "defaults": {
            "model": str(model), "max_model_len": 512,
            "launch": {"command": [python, "-m", "vllm.entrypoints.openai.api_server"],
                       "args": [*SPEEDY, "--max-num-seqs", "16"],
                       "env": {"VLLM_CPU_KVCACHE_SPACE": "1"}, "timeout_s": 400},
            "measure": block,
        },
        "deployments": {
            "seqs16": {},
            "seqs1": {"launch": {"args": [*SPEEDY, "--max-num-seqs", "1"]}},
        },
    }
    path = tmp_path / "gpulayout.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.engine
def test_real_measure_chooses_more_sequences_and_agrees_with_the_generator(tmp_path: Path, model_dir: Path) -> None:
    manifest = load_manifest(_manifest(tmp_path, model_dir))
    before = Snapshot.take(markers=(str(model_dir),))
    t0 = time.monotonic()
    result = measure(manifest.deployments, work_dir=tmp_path / "work", use_nvml=False)
    took = time.monotonic() - t0
    data = result.to_json()
    print(f"\nmeasure of two CPU deployments, {len(data['order'])} launches: {took:.0f} s; verdict: "
          f"{data['verdict']['text']}")
    assert data["status"] == "pass", data
    a, b = (d.name for d in manifest.deployments)
    assert data["order"][:4] == [a, b, b, a]   # interleaved: A B B A
    assert data["verdict"]["figure"] == "goodput_rps" and data["verdict"]["choose"] == "seqs16"
    assert data["verdict"]["text"].startswith("choose seqs16: ")
    assert data["stopped"]["reason"] == "decided"
    low, high = data["verdict"]["ratio"]["ci95"]
    assert 1.0 < low <= data["verdict"]["ratio"]["mean"] <= high
    for name, d in data["deployments"].items():
        launches = len(d["launches"])
        assert launches >= 2 and len(d["output_tokens_per_s_launches"]) == launches, name
        assert d["requests"] == {"completed": MEASURE["requests"] * len(d["windows"]), "failed": 0}, name
        assert d["clocks"] is None  # the CPU build: no NVML
        assert d["engine_metrics"]["samples"] > 0 and d["engine_metrics"]["kv_usage_max"] is not None
        for w in d["windows"]:  # each window's figures are the generator's own for that run
            own = json.loads(Path(w["result"]).read_text())
            assert w["completed"] == own["completed"] and w["failed"] == own["failed"]
            # goodput: vLLM's own count of the same SLO in the generator's file, recounted here to the request
            assert w["good"] == round(own["request_goodput"] * own["duration"])
            assert w["generator_goodput_rps"] == own["request_goodput"] and w["note"] is None
            assert w["output_tokens_per_s"] == pytest.approx(own["output_throughput"], rel=1e-3)
            assert w["requests_per_s"] == pytest.approx(own["request_throughput"], rel=1e-3)
            for key, theirs in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("itl_ms", "itl"), ("e2e_ms", "e2el")):
                for q in ("p50", "p90", "p99"):
                    assert w[key][q] == pytest.approx(own[f"{q}_{theirs}_ms"], rel=1e-3, abs=1e-3)
            assert w["command"].startswith("vllm bench serve ") and "--goodput ttft:3000.0 tpot:200.0" in w["command"]
    # the deciding figures are what the verdict says: seqs16 over seqs1, the mean of their launches
    ratio = data["deployments"]["seqs16"]["goodput_rps"] / data["deployments"]["seqs1"]["goodput_rps"]
    assert ratio == pytest.approx(data["verdict"]["ratio"]["mean"], rel=1e-2)
    assert Path(data["sweep_csv"]).is_file()
    named = launcher_named_shm(tmp_path / "work")   # named by the launcher as not the engine's: not counted
    assert [x for x in before.wait_clean(15, known=named) if x not in named] == []


@pytest.mark.engine
def test_interrupting_a_measurement_leaves_nothing_behind(tmp_path: Path, model_dir: Path) -> None:
    path = _manifest(tmp_path, model_dir, requests=2000, windows=2, launches=1)
    work = tmp_path / "work"
    before = Snapshot.take(markers=(str(model_dir),))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # Ctrl-C as in a terminal, whatever started pytest (a background job ignores SIGINT, and so would the CLI)
    proc = subprocess.Popen([sys.executable, "-m", "pytest_gpulayout.cli", "measure", str(path), "--log-dir",
                             str(work), "--deployments", "seqs1"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT,
                            preexec_fn=reset_signals)
    try:
        deadline = time.monotonic() + 300
        # the load started: each window's exact generator command is kept beside its result as it starts
        while time.monotonic() < deadline and not list(work.glob("*.cmd")):
            assert proc.poll() is None, proc.communicate()[0].decode()
            time.sleep(0.5)
        assert list(work.glob("*.cmd")), "no window started within 300 s"
        time.sleep(3)
        assert before.processes(), "the engine and the generator should be running now"
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=120)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out
    assert "gpulayout: interrupted" in out
    assert before.wait_clean(15) == []
