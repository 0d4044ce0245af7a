"""TensorRT-LLM as the fourth engine (issue 23): its log grammar on real public logs, its Mapping rules
with its own texts, its pool against a documented case, its flags and YAML, and its launch.

Sources (``pytest_gpulayout/engines/trtllm/defaults.py``): NVIDIA/TensorRT-LLM ``tensorrt_llm/mapping.py``,
``tensorrt_llm/_torch/pyexecutor/_util.py`` (KvCacheCreator) and ``resource_manager.py`` at 1.2.0rc2
(commit b35ac1b6); ``tensorrt_llm/llmapi/llm_args.py`` and ``tensorrt_llm/commands/serve.py`` (1.x main).
There is no CPU build of TensorRT-LLM: the launch is tested with the fake engine replaying its logs.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest

from pytest_gpulayout.cli import main
from pytest_gpulayout.deployment import Deployment, Launch, Require
from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.engines.trtllm.divisibility import mapping_refusals
from pytest_gpulayout.engines.trtllm.engine import TRTLLM, first_stages_take_remainder
from pytest_gpulayout.engines.trtllm.log import parse_trtllm_log
from pytest_gpulayout.errors import InputError, LaunchError
from pytest_gpulayout.findings import Status
from pytest_gpulayout.launch.startup import launch_deployment
from pytest_gpulayout.machine.presets import load_preset
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.planner.plan import plan
from pytest_gpulayout.runner import evaluate, subject_of

HERE = Path(__file__).parents[1]
LOGS = HERE / "data" / "logs" / "trtllm"
MODELS = HERE / "data" / "models"
FAKE = HERE / "fakes" / "fake_engine.py"


def _log(name: str) -> str:
    return (LOGS / name).read_text().split("\n---\n", 1)[1]


# -- the log grammar, on real public logs -----------------------------------------------------------------
@pytest.mark.parametrize("name, tokens, blocks, gib", [
    ("001.log", 860_320, None, 52.51),        # NVIDIA/TensorRT-LLM#6294, 0.20 PyTorch backend
    ("002.log", 3_731_744, 116_617, 78.30),   # triton-inference-server/tutorials#150
    ("003.log", 10_718, None, None),          # NVIDIA/TensorRT-LLM#224, TensorRT engine era
    ("004.log", 132_608, None, 64.75),        # NVIDIA/TensorRT-LLM#1400 (69524783104 bytes)
])
def test_real_logs_parse_to_the_numbers_they_print(name: str, tokens: int, blocks: int | None,
                                                    gib: float | None) -> None:
    log = parse_trtllm_log(_log(name))
    assert log.engine == "trtllm" and log.error_kind is None
    assert log.kv_tokens == tokens and log.gpu_blocks == blocks and log.available_kv_gib == gib


@pytest.mark.parametrize("name, numbers", [
    # the PyTorch backend's own explanation, under a rank tag (1.0.0rc1/rc3, 8 x H200)
    ("oom-executor-kv-cache-5872.log", {"total_gib": 140.06, "free_gib": 108.86}),
    # the same text without any [TRT-LLM] tag: only the RuntimeError was pasted (MLPerf GPT-OSS)
    ("oom-executor-gpt-oss-mlcommons2501.log", {"total_gib": 276.50, "free_gib": 200.47}),
    # the C++ runtime's CUDA check, its line broken in two by the copy (2023, under Triton)
    ("oom-cudamallocasync-260.log", {}),
])
def test_real_out_of_memory_logs_are_oom(name: str, numbers: dict[str, float],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Round 4, item 7: these were error_kind none (5872: a rank tag hid the [E] line) or other_error."""
    log = parse_trtllm_log(_log(name))
    assert (log.engine, log.error_kind, dict(log.error_numbers)) == ("trtllm", "oom", numbers)
    assert log.error_line and "out of memory" in log.error_line.replace("insufficient GPU memory", "out of memory")
    assert main(["parse-log", str(LOGS / name), "--json"]) == 1   # a failed start; the engine told by its lines
    assert json.loads(capsys.readouterr().out)["error_kind"] == "oom"


def test_parse_log_cli_reads_trtllm_forced_and_auto(capsys: pytest.CaptureFixture[str]) -> None:
    for extra in ([], ["--engine", "trtllm"]):
        assert main(["parse-log", "--json", str(LOGS / "001.log"), *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["engine"] == "trtllm" and out["kv_tokens"] == 860_320 and out["available_kv_gib"] == 52.51
        assert set(out) == {"engine", "kv_tokens", "kv_tokens_all", "gpu_blocks", "max_concurrency",
                            "max_concurrency_len", "available_kv_gib", "error_kind", "error_numbers"}


def test_parse_log_refuses_trtllm_for_a_vllm_log(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse-log", str(HERE / "data" / "logs" / "vllm" / "001.txt"), "--engine", "trtllm"]) == 2
    assert "no TensorRT-LLM line" in capsys.readouterr().err


def test_estimation_pool_before_the_profiling_mark_is_not_the_pool() -> None:
    text = ("[TensorRT-LLM][INFO] [MemUsageChange] Allocated 0.50 GiB for max tokens in paged KV cache (8224).\n"
            "[TRT-LLM] [I] Peak memory during memory usage profiling (torch + non-torch): 20.00 GiB, available KV "
            "cache memory when calculating max tokens: 53.00 GiB, fraction is set 0.9\n")
    w = TRTLLM.launch.log_watcher(1, 1)
    for line in text.splitlines():
        w.feed(line)
    assert not w.kv_complete  # the estimation run's small cache
    w.feed("[TensorRT-LLM][INFO] [MemUsageChange] Allocated 53.00 GiB for max tokens in paged KV cache (434176).")
    assert w.kv_complete and w.result().kv_tokens == 434_176


@pytest.mark.parametrize("line, kind", [
    ("RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: maxTokensInPagedKvCache (64) must be large enough to "
     "process at least 1 sequence", "kv_cache_too_small"),
    ("AssertionError: Impossible to fit in any sequence in kvCache", "kv_cache_too_small"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "oom"),
    ("ValueError: moe_tp_size * moe_ep_size * moe_cluster_size must equal to moe_world_size, but got 3 != 4",
     "heads_not_divisible"),
])
def test_refusals(line: str, kind: str) -> None:
    w = TRTLLM.launch.log_watcher(1, 1)
    w.feed(line)
    assert w.failed and w.result().error_kind == kind


# -- Mapping, heads, fraction -----------------------------------------------------------------------------
def _moe_subject_findings(args: tuple[str, ...], tp: int = 4) -> dict[str, object]:
    model = load_model(str(MODELS / "qwen1.5-moe-a2.7b"))
    d = Deployment(name="moe", model="x", engine="trtllm", tensor_parallel_size=tp, gpus=tuple(range(tp)),
                   launch=Launch(args=args))
    return dict(evaluate(d, load_preset("8xH100-sxm"), model))


def test_a_layout_that_breaks_mapping_fails_with_trtllm_text() -> None:
    f = _moe_subject_findings(("--ep_size", "3"))["heads"]
    assert f.status is Status.FAIL  # type: ignore[attr-defined]
    assert ("moe_tp_size * moe_ep_size * moe_cluster_size must equal to moe_world_size, but got 3 != 4"
            in f.message)  # type: ignore[attr-defined]
    assert "tensorrt_llm/mapping.py" in f.message  # type: ignore[attr-defined]


def test_mapping_rules() -> None:
    assert mapping_refusals(world=4, tp=4, pp=1, ep=2) == []
    assert "world_size must equal to tp_size * pp_size * cp_size, but got 4 != 4 * 1 * 2." in \
        mapping_refusals(world=4, tp=4, pp=1, cp=2)[0].text
    assert "60 experts do not split over moe_ep_size 8" in mapping_refusals(world=8, tp=8, pp=1, ep=8,
                                                                            num_experts=60)[0].text
    assert first_stages_take_remainder(10, 4) == (3, 3, 2, 2)   # torch.tensor_split


def _case(**kw: object) -> Deployment:
    base: dict[str, object] = dict(name="case", model="x", engine="trtllm", tensor_parallel_size=1, gpus=(0,),
                                   memory_fraction=0.8, launch=Launch(args=("--max_num_tokens", "23552")))
    base.update(kw)
    return Deployment(**base)  # type: ignore[arg-type]


def test_pool_of_a_documented_case_lands_in_the_band() -> None:
    """NVIDIA/TensorRT-LLM#6294 (001.log): nvidia/Llama-3.1-8B-Instruct-FP8 on one H100 80GB,
    free_gpu_memory_fraction 0.8, max_num_tokens 23552: 860,320 tokens. The FP8-KV Llama-3.1-8B config
    here has the same shapes and KV bytes (65,536 B/token); its weights come to the 8.46 GiB the log says."""
    model = load_model(str(MODELS / "llama-3.1-8b-fp8-kv"))
    s = subject_of(_case(), load_preset("8xH100-sxm"), model)
    p = s.replicas[0]
    assert p.kv_bytes_per_token_per_rank == 65_536 and round(p.weights_gib_per_rank, 2) == 8.46
    assert p.block_size == 32 and p.kv_tokens % 32 == 0
    assert 0.95 <= p.kv_tokens / 860_320 <= 1.05, p.kv_tokens


def test_fraction_of_one_is_refused_with_trtllm_text() -> None:
    model = load_model(str(MODELS / "llama-3.1-8b-fp8-kv"))
    f = evaluate(_case(memory_fraction=1.0), load_preset("8xH100-sxm"), model)["kv_pool"]
    assert f.status is Status.FAIL and "freeMemFraction 1.0 must be smaller than 1.0" in f.message


def test_short_pool_starts_with_max_seq_len_lowered() -> None:
    model = load_model(str(MODELS / "llama-3.1-8b-fp8-kv"))
    d = _case(memory_fraction=0.01, max_model_len=131072)
    f = evaluate(d, load_preset("8xH100-sxm"), model)["kv_pool"]
    assert f.status is Status.WARN and "starts with max_seq_len lowered to" in f.message
    d = replace(d, launch=Launch(args=("--fail_fast_on_attention_window_too_large",)))
    assert evaluate(d, load_preset("8xH100-sxm"), model)["kv_pool"].status is Status.FAIL


# -- flags and the YAML -------------------------------------------------------------------------------
def test_yaml_overrides_the_flags_and_refuses_what_the_manifest_owns(tmp_path: Path) -> None:
    y = tmp_path / "extra.yaml"
    y.write_text("max_num_tokens: 4096\nkv_cache_config:\n  tokens_per_block: 64\n  enable_block_reuse: false\n"
                 "speculative_config: {decoding_type: MTP}\n")
    k = TRTLLM.cli.knobs(["--max_num_tokens", "8192", "--extra_llm_api_options", str(y)], {})
    assert k.max_num_batched_tokens == 4096 and k.block_size == 64
    assert k.not_modelled == ("extra_llm_api_options:speculative_config",)
    y.write_text("kv_cache_config:\n  free_gpu_memory_fraction: 0.5\n")
    with pytest.raises(InputError, match="memory_fraction"):
        TRTLLM.cli.knobs(["--config", str(y)], {})


# -- the launch ---------------------------------------------------------------------------------------
def test_launch_argv() -> None:
    d = Deployment(name="d", model="m", engine="trtllm", tensor_parallel_size=2, pipeline_parallel_size=2,
                   max_model_len=8192, memory_fraction=0.85, enable_expert_parallel=True,
                   launch=Launch(args=("--max_batch_size", "64")))
    argv = TRTLLM.launch.launch_argv(d, "/models/x", 8123, None)
    assert argv[-2:] == ["--max_batch_size", "64"]
    assert argv[1:3] == ["serve", "/models/x"] and argv[0].endswith("trtllm-serve")
    assert argv[3:-2] == ["--tp_size", "2", "--pp_size", "2", "--max_seq_len", "8192",
                          "--kv_cache_free_gpu_memory_fraction", "0.85", "--ep_size", "2",
                          "--host", "127.0.0.1", "--port", "8123"]
    with pytest.raises(LaunchError, match="no data-parallel"):
        TRTLLM.launch.launch_argv(replace(d, data_parallel_size=2), "/models/x", 8123, None)


@pytest.fixture
def fake_dep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    monkeypatch.setenv("GPULAYOUT_LOCK_DIR", str(tmp_path / "locks"))
    (tmp_path / "pids").mkdir()
    shutil.copytree(MODELS / "llama-3.1-8b-fp8-kv", tmp_path / "llama")
    return Deployment(name="trt", model="llama", engine="trtllm", base_dir=tmp_path, tensor_parallel_size=1,
                      launch=Launch(command=(sys.executable, str(FAKE), "--fake-log", str(LOGS / "001.log"),
                                             "--fake-pid-dir", str(tmp_path / "pids"), "serve"), timeout_s=30,
                                    env=MappingProxyType({"FAKE_ENGINE_SCALE": "0.005"})))


def test_startup_with_the_fake_engine_replaying_a_trtllm_log(fake_dep: Deployment, tmp_path: Path) -> None:
    # the excerpt has neither a profiling mark nor a ready line, so its pool line is never the final
    # one: the launch runs to its timeout. The pool it read is the one KvCacheCreator profiles with, not
    # the one it serves from, so the check fails as for no pool (it passed on it: a pass on a pool the
    # engine never settled). The replay takes well under a second; 5 s of timeout, not 30.
    dep = replace(fake_dep, require=Require(kv_tokens=800_000), launch=replace(fake_dep.launch, timeout_s=5))
    r = launch_deployment(dep, None, engine=ENGINES["trtllm"].launch, log_dir=tmp_path / "logs")
    assert r.finding.status is Status.FAIL, r.finding.message
    assert "did not report its KV pool within 5 s" in r.finding.message
    assert "It had printed only the pool it profiles with (860,320 tokens)" in r.finding.message
    argv = json.loads((tmp_path / "pids" / "argv.json").read_text())["argv"]
    assert argv[:2] == ["serve", str(tmp_path / "llama")]
    assert argv[argv.index("--host") + 1] == "127.0.0.1"


def test_startup_that_runs_out_of_memory_fails_as_oom_with_its_fix(fake_dep: Deployment, tmp_path: Path) -> None:
    cmd = list(fake_dep.launch.command or ())
    cmd[cmd.index("--fake-log") + 1] = str(LOGS / "oom-executor-kv-cache-5872.log")
    dep = replace(fake_dep, launch=replace(fake_dep.launch, command=(*cmd, "--fake-mode", "exits-early")))
    r = launch_deployment(dep, None, engine=ENGINES["trtllm"].launch, log_dir=tmp_path / "logs")
    assert r.finding.status is Status.FAIL, r.finding.message
    assert r.error_kind == "oom"
    assert "failed to start TP=1 PP=1 DP=1 (oom)" in r.finding.message and "Fix: out of GPU memory" in r.finding.message


def test_startup_lowered_max_seq_len_is_a_warning(fake_dep: Deployment, tmp_path: Path) -> None:
    cmd = list(fake_dep.launch.command or ())
    cmd[cmd.index("--fake-log") + 1] = str(LOGS / "lowered-constructed.log")
    dep = replace(fake_dep, max_model_len=262144, launch=replace(fake_dep.launch, command=tuple(cmd)))
    r = launch_deployment(dep, None, engine=ENGINES["trtllm"].launch, log_dir=tmp_path / "logs")
    assert r.finding.status is Status.WARN, r.finding.message
    assert "starts with max_seq_len lowered to 131,072 (asked for 262,144)" in r.finding.message


# -- the planner: no DP replicas (Engine.data_parallel) -------------------------------------------------
def test_plan_offers_dp_layouts_only_as_independent_engines() -> None:
    """trtllm-serve has no data-parallel replicas: a layout with DP > 1 is listed as independent engines
    ('xN engines', one deployment per replica), never as one DP deployment."""
    model = load_model(str(MODELS / "llama-3.1-8b-fp8-kv"))
    p = plan(model, load_preset("8xH100-sxm"), engine="trtllm", max_model_len=8192, max_gpus=4)
    copies = [r for r in p.layouts if r.data_parallel_size > 1 or r.engines]
    assert copies and all(r.engines for r in copies)
    assert all(r.deployment is None or r.deployment.dp == 1 for r in p.layouts)


# -- launch.args with click's spelling rules (Engine.parse_args) ----------------------------------------
def test_parse_args_reads_clicks_exact_spellings() -> None:
    parsed = TRTLLM.cli.parse_args(["--tensor_parallel_size", "2", "--max_num_tokens=4096", "--trust_remote_code",
                                "--tp", "2"])
    assert parsed.value("--tp_size") == "2" and parsed.value("--max_num_tokens") == "4096"
    assert parsed.has("--trust_remote_code") and parsed.unknown == ("--tp",)  # no prefixes in click
    assert parsed.usage_error() is None  # the table is not every option: an unknown one is not modelled
