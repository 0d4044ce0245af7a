"""``gpulayout measure`` of real launches beyond one process (``@pytest.mark.engine``): ``gpulayout plan
--measure --launch FILE`` on two CPU "GPUs" (``VLLM_CPU_OMP_THREADS_BIND=0|1``, the tiny Llama), which puts
two copies (DP=2) against a pipeline split (PP=2) and a tensor split (TP=2) under one load: a trace,
replayed as prompts of its stated lengths; and llama-server (a tiny GGUF, ``--metrics`` added by its
engine object). Each deployment's figures are the load generator's own for the same run (the JSON it
wrote). Short windows, one launch of each layout (the interval over launches is the seqs test's):
the point is that every layout is launched, loaded, read and stopped for real.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from gguf_tiny import write_tiny_llama
from leaks import Snapshot
from measure_leaks import launcher_named_shm
from real_engines import llama_server, vllm_python

from pytest_gpulayout.manifest.load import load_manifest
from pytest_gpulayout.measure.run import measure

REPO = Path(__file__).parents[2]
SNAPSHOT = REPO / "tests" / "data" / "snapshots" / "two-l4.yaml"
#: the trace: eight requests of different lengths, 50 ms apart
TRACE = [(16, 8), (40, 16), (24, 4), (64, 12), (16, 16), (33, 8), (48, 5), (20, 10)]

#: two windows of 8 requests, 4 at once, 16 tokens out, in one launch; a budget that leaves no time for
#: more (each deployment's first launch always runs)
SHORT = {"concurrency": 4, "requests": 8, "input_tokens": 16, "output_tokens": 16, "windows": 2, "launches": 1,
         "budget_s": 1}
#: PP=2 on the CPU build (0.32) cannot serve with --enforce-eager: the CPU runner skips its warm-up without
#: compilation, so the pipeline's intermediate tensors are never allocated and every request fails
#: (``assert self.intermediate_tensors is not None``, gpu_model_runner.py). Compiling with the eager
#: backend runs the warm-up without inductor's minutes.
EAGER_BACKEND = ["--compilation-config", '{"mode": 3, "backend": "eager", "cudagraph_mode": "NONE"}']


def agrees_with_the_generator(d: dict[str, Any], *, miscounted: bool = False) -> None:
    """Every window's figures are the generator's own for that run; ``miscounted``: the generator
    re-tokenized the text (llama-server), so output tokens/s counts the forced length, and says so."""
    for w in d["windows"]:
        own = json.loads(Path(w["result"]).read_text())
        assert (w["completed"], w["failed"]) == (own["completed"], own["failed"])
        assert w["generator_output_tokens_per_s"] == own["output_throughput"]
        if miscounted:
            assert w["note"] and "re-tokenized" in w["note"]
            forced = w["completed"] * SHORT["output_tokens"] / own["duration"]
            assert w["output_tokens_per_s"] == pytest.approx(forced, rel=1e-3)
        else:
            assert w["note"] is None
            assert w["output_tokens_per_s"] == pytest.approx(own["output_throughput"], rel=1e-3)
        assert w["requests_per_s"] == pytest.approx(own["request_throughput"], rel=1e-3)
        for key, theirs in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("itl_ms", "itl"), ("e2e_ms", "e2el")):
            for q in ("p50", "p90", "p99"):
                if w[key][q] is None and key == "tpot_ms":   # no request counted 2 tokens or more: no TPOT
                    assert max(own["output_lens"]) <= 1 and own[f"{q}_tpot_ms"] == 0.0   # (the generator says 0)
                    continue
                assert w[key][q] == pytest.approx(own[f"{q}_{theirs}_ms"], rel=1e-3, abs=1e-3)


@pytest.mark.engine
def test_real_plan_measure_puts_copies_against_splits_under_a_trace(tmp_path: Path, model_dir: Path) -> None:
    python = vllm_python()
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"input_length": i, "output_length": o, "timestamp": 0.05 * n}) + "\n"
                             for n, (i, o) in enumerate(TRACE)))
    launch = tmp_path / "launch.yaml"   # the measure block rides in the launch file; its trace is relative to it
    launch.write_text(yaml.safe_dump({
        "launch": {"command": [python, "-m", "vllm.entrypoints.openai.api_server"], "args": EAGER_BACKEND,
                   "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "0|1"}, "timeout_s": 600},
        "measure": {"concurrency": 4, "trace": "trace.jsonl", "windows": 1, "launches": 1, "budget_s": 1}}))
    work = tmp_path / "work"
    before = Snapshot.take(markers=(str(model_dir),))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest_gpulayout.cli", "plan", str(model_dir), "--machine",
                           str(SNAPSHOT), "--max-model-len", "512", "--measure", "--launch", str(launch), "--log-dir",
                           str(work), "--json"], cwd=REPO, capture_output=True, text=True, timeout=1500)
    print(f"\nplan --measure of TP=2, PP=2, DP=2 (one launch each): {time.monotonic() - t0:.0f} s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)["measured"]
    print(f"verdict: {out['verdict']['text']}")
    assert out["status"] == "pass", {n: d["errors"] for n, d in out["deployments"].items()}
    # a split against copies: the plan's three shapes, in the rules' order, each launched with the file's block
    assert out["candidates"] == {"tp1-pp1-dp2": "TP=1 PP=1 DP=2", "tp1-pp2-dp1": "TP=1 PP=2 DP=1",
                                 "tp2-pp1-dp1": "TP=2 PP=1 DP=1"}
    assert out["order"] == list(out["candidates"])
    for name, d in out["deployments"].items():
        assert d["layout"] == out["candidates"][name]
        assert d["requests"] == {"completed": len(TRACE) * len(d["windows"]), "failed": 0}, name
        assert d["engine_metrics"]["samples"] > 0 and d["engine_metrics"]["kv_usage_max"] is not None, name
        for w in d["windows"]:   # the trace's requests, each of the lengths it states
            own = json.loads(Path(w["result"]).read_text())
            assert [(i, o) for i, o in zip(own["input_lens"], own["output_lens"], strict=True)] == TRACE, name
            assert "--dataset-name timed_trace" in w["command"]
        agrees_with_the_generator(d)
    v = out["verdict"]   # one of the three is chosen with its ratio, or none is, saying so: never silence
    assert v["concurrency"] == 4 and [r["deployment"] for r in v["ranking"]] != []
    assert len(v["ranking"]) == 3 and out["against_rules"][0].startswith("rules: 1. tp1-pp1-dp2, 2. tp1-pp2-dp1")
    assert out["stopped"]["reason"] == "budget"   # one launch each, the budget spent: said, not hidden
    assert before.processes() == []
    named = launcher_named_shm(work)
    # named ones are kept: on a shared machine they may be another run's, and no test removes those
    assert [x for x in before.wait_clean(15, known=named) if x not in named] == []


@pytest.mark.engine
def test_real_llama_server_is_measured_with_its_metrics(tmp_path: Path, model_dir: Path) -> None:
    """llama-server serves the OpenAI completions the generator speaks; its ``/metrics`` (``--metrics``,
    added by the engine object) gives the deferred requests (build b11434 exports no KV usage). The
    generator tokenizes with the word tokenizer (its prompts are text to llama-server), and counts
    the output by re-tokenizing it (llama-server's usage rides in the last token's chunk): the forced
    length is counted instead, and said. A request can fail when llama-server's HTTP library closes a
    kept-alive connection the generator is writing to: counted as failed, never timed."""
    server = llama_server()
    gguf = write_tiny_llama(tmp_path / "tiny.gguf", n_head=2, n_head_kv=1)
    data = {
        "version": 1,
        "defaults": {"engine": "llamacpp", "model": str(gguf), "ctx_size": 4096,
                     "launch": {"command": [server], "timeout_s": 120},
                     "measure": {**SHORT, "tokenizer": str(model_dir), "python": vllm_python()}},
        "deployments": {"slots4": {"parallel": 4}, "slots1": {"parallel": 1}},
    }
    (tmp_path / "gpulayout.yaml").write_text(yaml.safe_dump(data))
    manifest = load_manifest(tmp_path / "gpulayout.yaml")
    before = Snapshot.take(markers=(str(gguf),))
    t0 = time.monotonic()
    result = measure(manifest.deployments, work_dir=tmp_path / "work", use_nvml=False)
    out = result.to_json()
    print(f"\nllama-server measured in {time.monotonic() - t0:.0f} s; verdict: {out['verdict']['text']}")
    assert out["status"] == "pass", {n: d["errors"] for n, d in out["deployments"].items()}
    for name in ("slots4", "slots1"):
        d = out["deployments"][name]
        assert d["engine"] == "llamacpp"
        assert sum(d["requests"].values()) == 8 * len(d["windows"]) and d["requests"]["completed"] > 0, name
        assert d["output_tokens_per_s"] > 0 and d["ttft_ms"]["p99"] is not None
        assert d["engine_metrics"]["samples"] > 0 and d["engine_metrics"]["waiting_max"] is not None, name
        assert any("re-tokenized" in n for n in d["notes"])
        agrees_with_the_generator(d, miscounted=True)
    assert out["verdict"]["concurrency"] == 4
    assert before.wait_clean(15) == []
