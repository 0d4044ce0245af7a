"""The startup check cross-examines the engine (issue 20, item 7): what the engine prints about its own
configuration is held to the deployment, and a real pool more than 10 % from the prediction warns with
both figures and the prediction's term most likely off.

The lines are the engines' own: vLLM V1 ``v1/engine/core.py`` "Initializing a V1 LLM engine (v0.x) with
config: ... max_seq_len=..., tensor_parallel_size=..." (V0 ``engine/llm_engine.py`` "Initializing an LLM
engine (v0.x) with config:"), the API server's "non-default args: {...}" (``entrypoints/utils.py``), and
SGLang's ``server_args=ServerArgs(...)`` (``srt/server_args.py``, printed after its defaults are filled).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType, ModuleType

import pytest

from pytest_gpulayout.deployment import Deployment, Launch
from pytest_gpulayout.engines.registry import ENGINES, log_grammars
from pytest_gpulayout.findings import Status
from pytest_gpulayout.launch.launcher import LaunchResult
from pytest_gpulayout.launch.logparse import StartupLog, parse_log
from pytest_gpulayout.launch.startup import run_startup
from pytest_gpulayout.launch.verdict import cross_examine, judge, term_off
from pytest_gpulayout.machine.facts import GIB

HERE = Path(__file__).parents[1]
REPO = HERE.parent
LOGS = HERE / "data" / "logs"
FAKE = HERE / "fakes" / "fake_engine.py"
TINY_DIR = HERE / "data" / "models" / "tiny-llama"

#: vllm-project/vllm#10517 (v0.5.4, 2 x H100): the V0 engine's config line, as printed
V0_LINE = ("INFO 11-21 01:02:03 llm_engine.py:174] Initializing an LLM engine (v0.5.4) with config: "
           "model='/mnt/models/models--meta-llama--llama-3-1-70b-instruct', speculative_config=None, "
           "tokenizer='/mnt/models/models--meta-llama--llama-3-1-70b-instruct', skip_tokenizer_init=False, "
           "tokenizer_mode=auto, revision=None, rope_scaling=None, rope_theta=None, tokenizer_revision=None, "
           "trust_remote_code=False, dtype=torch.float16, max_seq_len=131072, download_dir=None, "
           "load_format=LoadFormat.AUTO, tensor_parallel_size=2, pipeline_parallel_size=1, "
           "disable_custom_all_reduce=False, quantization=None, enforce_eager=False, kv_cache_dtype=auto, "
           "quantization_param_path=None, device_config=cuda, decoding_config=DecodingConfig("
           "guided_decoding_backend='outlines'), seed=0, served_model_name=llama)")
#: SGLang 0.4.x's server_args line (shape of srt/server_args.py's dataclass repr)
SGL_LINE = ("[2025-03-08 12:28:40] server_args=ServerArgs(model_path='Qwen/QwQ-32B', tokenizer_path='Qwen/QwQ-32B', "
            "tokenizer_mode='auto', load_format='auto', trust_remote_code=False, dtype='auto', "
            "kv_cache_dtype='auto', quantization=None, context_length=None, device='cuda', "
            "served_model_name='Qwen/QwQ-32B', chat_template=None, is_embedding=False, revision=None, "
            "host='0.0.0.0', port=30000, mem_fraction_static=0.85, max_running_requests=None, "
            "max_total_tokens=None, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            "schedule_policy='lpm', schedule_conservativeness=1.0, cpu_offload_gb=0, tp_size=4, "
            "stream_interval=1, random_seed=1, dp_size=1, load_balance_method='round_robin')")


def _result(log: StartupLog) -> LaunchResult:
    return LaunchResult(argv=("engine",), pid=1, returncode=-2, seconds_to_kv=10.0, seconds_total=11.0, log=log,
                        log_path=Path("/logs/x.log"), tail=(), timed_out=False, leftover_pids=(),
                        stopped_by="kv", started_at=0.0, ended_at=1.0)


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_calibration", REPO / "benchmarks" / "bench_calibration.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_calibration", module)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------------------------
# What the engine says it ran with
# ------------------------------------------------------------------------------------------------
def test_vllm_v1_config_line_of_a_real_cpu_launch() -> None:
    log = parse_log((LOGS / "vllm-cpu" / "vllm-tp2.log").read_text(), log_grammars("vllm"))
    assert log.config["version"] == "0.32.0"
    assert log.config["tensor_parallel_size"] == "2" and log.config["pipeline_parallel_size"] == "1"
    assert log.config["max_model_len"] == "512" and log.config["kv_cache_dtype"] == "auto"


def test_vllm_v0_config_line() -> None:
    log = parse_log(V0_LINE, log_grammars())
    assert log.engine == "vllm"
    assert dict(log.config) == {"version": "0.5.4", "model": "/mnt/models/models--meta-llama--llama-3-1-70b-instruct",
                                "max_model_len": "131072", "tensor_parallel_size": "2",
                                "pipeline_parallel_size": "1", "kv_cache_dtype": "auto", "device": "cuda"}


def test_sglang_server_args() -> None:
    log = parse_log(SGL_LINE + "\n[2025-03-08 12:29:21 TP0] KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, "
                               "V size: 1.42 GB", log_grammars())
    assert log.engine == "sglang"
    assert log.config["tensor_parallel_size"] == "4" and log.config["memory_fraction"] == "0.85"
    assert "max_model_len" not in log.config  # context_length=None: the model's own, nothing said


# ------------------------------------------------------------------------------------------------
# Held to the deployment
# ------------------------------------------------------------------------------------------------
def test_cross_examine_names_each_contradiction() -> None:
    said = {"version": "0.32.0", "tensor_parallel_size": "2", "pipeline_parallel_size": "1", "max_model_len": "512",
            "memory_fraction": "0.85", "kv_cache_dtype": "auto"}
    agree = Deployment(name="d", model="m", tensor_parallel_size=2, max_model_len=512, engine_version="0.32")
    assert cross_examine(agree, said) == []
    unset = Deployment(name="d", model="m", tensor_parallel_size=2)  # length and release left to the engine
    assert cross_examine(unset, said) == []
    wrong = Deployment(name="d", model="m", tensor_parallel_size=4, pipeline_parallel_size=1, max_model_len=4096,
                       memory_fraction=0.9, kv_cache_dtype="fp8", engine_version="0.11.0")
    found = cross_examine(wrong, said)
    assert "it ran tensor_parallel_size=2 where the deployment sets tensor_parallel_size 4" in found
    assert "it ran max_model_len=512 where the deployment sets max_model_len 4096" in found
    assert any("memory fraction of 0.85" in f for f in found)
    assert any("kv_cache_dtype=auto" in f for f in found)
    assert any("release 0.32.0 where the deployment pins engine_version 0.11.0" in f for f in found)
    assert len(found) == 5


def test_a_post_release_of_the_pinned_version_agrees() -> None:
    dep = Deployment(name="d", model="m", engine_version="0.6.4")
    assert cross_examine(dep, {"version": "0.6.4.post1"}) == []
    assert cross_examine(dep, {"version": "0.6.5"}) != []


def test_judge_fails_when_the_log_contradicts_the_deployment() -> None:
    log = parse_log((LOGS / "vllm-cpu" / "vllm-tp2.log").read_text(), log_grammars("vllm"))
    dep = Deployment(name="tiny", model="m", tensor_parallel_size=1, max_model_len=512)
    f = judge(dep, None, _result(log), name="vLLM")
    assert f.status is Status.FAIL
    assert "tensor_parallel_size=2 where the deployment sets tensor_parallel_size 1" in f.message
    assert f.data["contradictions"] and f.data["engine_config"]["version"] == "0.32.0"
    same = judge(replace(dep, tensor_parallel_size=2), None, _result(log), name="vLLM")
    assert same.status is Status.PASS, same.message


@pytest.fixture
def fake_dep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    monkeypatch.setenv("GPULAYOUT_LOCK_DIR", str(tmp_path / "locks"))
    (tmp_path / "pids").mkdir()
    shutil.copytree(TINY_DIR, tmp_path / "tiny")
    return Deployment(
        name="tiny", model="tiny", base_dir=tmp_path, max_model_len=512,
        launch=Launch(command=(sys.executable, str(FAKE), "--fake-log", str(LOGS / "vllm-cpu" / "vllm-tiny.log"),
                               "--fake-pid-dir", str(tmp_path / "pids")), timeout_s=30,
                      env=MappingProxyType({"FAKE_ENGINE_SCALE": "0.002"})))


@pytest.mark.parametrize(("change", "needle"), [
    ({"max_model_len": 1024}, "it ran max_model_len=512 where the deployment sets max_model_len 1024"),
    ({"engine_version": "0.10.1"}, "it is release 0.32.0 where the deployment pins engine_version 0.10.1"),
])
def test_full_startup_check_fails_a_launch_that_ran_something_else(fake_dep: Deployment, tmp_path: Path,
                                                                   change: dict[str, object], needle: str) -> None:
    """Through the launcher: the fake engine replays a real vLLM 0.32 CPU launch (TP 1, 512 tokens)."""
    ok = run_startup(fake_dep, None, engine=ENGINES["vllm"].launch, log_dir=tmp_path / "logs")
    assert ok.status is Status.PASS, ok.message
    f = run_startup(replace(fake_dep, **change), None, engine=ENGINES["vllm"].launch, log_dir=tmp_path / "logs")  # type: ignore[arg-type]
    assert f.status is Status.FAIL and needle in f.message, f.message
    assert "did not run the layout the checks judged" in f.message


# ------------------------------------------------------------------------------------------------
# More than 10 % off: the term most likely off
# ------------------------------------------------------------------------------------------------
bench = _load_bench()


def _prediction() -> object:
    """vllm/001: Llama-3.1-8B on one RTX 3090 at 0.90, predicted from its header (-0.7 % of the log)."""
    return bench.measure(next(c for c in bench.CASES if c.log == "vllm/001.txt")).prediction


def test_the_ledger_row_within_ten_percent_passes() -> None:
    row = bench.measure(next(c for c in bench.CASES if c.log == "vllm/001.txt"))
    dep = Deployment(name="d", model="m", max_model_len=20000, memory_fraction=0.9)
    f = judge(dep, None, _result(row.logged), name="vLLM", prediction=row.prediction)
    assert f.status is Status.PASS, f.message
    assert f.data["predicted_kv_tokens"] == row.prediction.kv_tokens


def test_term_off_memory_fraction() -> None:
    p = _prediction()
    log = StartupLog(engine="sglang", kv_tokens=50000, config=MappingProxyType({"memory_fraction": "0.7"}))
    assert term_off(log, p, 50000).startswith("the memory fraction: the engine ran with 0.7")  # type: ignore[arg-type]


def test_term_off_bytes_per_token() -> None:
    p = _prediction()
    bpt = p.kv_bytes_per_token_per_rank  # type: ignore[attr-defined]
    tokens = int(2 * GIB / (bpt / 2))   # the engine's 2 GiB hold twice the tokens: fp8 KV, say
    log = StartupLog(engine="vllm", kv_tokens=tokens, available_kv_gib=2.0)
    assert term_off(log, p, tokens).startswith("the KV bytes per token")  # type: ignore[arg-type]


def test_term_off_weights_then_reserve() -> None:
    p = _prediction()
    w = p.weights_gib_per_rank  # type: ignore[attr-defined]
    bpt = p.kv_bytes_per_token_per_rank  # type: ignore[attr-defined]
    more = p.kv_tokens + int(3 * GIB / bpt)  # type: ignore[attr-defined]  # 3 GiB more KV than predicted
    light = StartupLog(engine="vllm", kv_tokens=more, weights_gib=w - 3.0)
    assert term_off(light, p, more).startswith("the weights: the engine loaded")  # type: ignore[arg-type]
    same_weights = StartupLog(engine="vllm", kv_tokens=more, weights_gib=w)
    assert term_off(same_weights, p, more).startswith("the reserve besides the weights")  # type: ignore[arg-type]


def test_judge_warns_with_both_figures_and_the_term() -> None:
    p = _prediction()
    w = p.weights_gib_per_rank  # type: ignore[attr-defined]
    fewer = int(p.kv_tokens * 0.8)  # type: ignore[attr-defined]
    log = StartupLog(engine="vllm", kv_tokens=fewer, kv_tokens_all=(fewer,), weights_gib=w + 0.01)
    dep = Deployment(name="d", model="m", max_model_len=4096, memory_fraction=0.9)
    f = judge(dep, None, _result(log), name="vLLM", prediction=p)  # type: ignore[arg-type]
    assert f.status is Status.WARN
    assert f"the real pool of {fewer:,} tokens is -20.0 % off the predicted {p.kv_tokens:,}" in f.message  # type: ignore[attr-defined]
    assert "the term most likely off is the reserve besides the weights" in f.message
