"""The startup check cross-examines llama-server (issue 20, item 7): what its log says it ran with is held
to the deployment, and a contradiction fails the verdict with one clause naming both figures.

The logs are real (``tests/data/logs/llamacpp/``: ``real-cpu-b11434.log`` was recorded here from the b11434
``llama-server`` the tests build, ``-c 1000 -np 3``). Contradictions are planted in a copy: a line is
replaced, or a line llama.cpp b11434 prints on a GPU build is added in its own format (``src/llama.cpp``
"using device", ``src/llama-model.cpp`` "offloaded N/M layers to GPU"; the CPU build prints neither).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from gguf_tiny import write_tiny_llama
from real_engines import llama_server

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.llamacpp.crossexam import contradictions
from pytest_gpulayout.engines.llamacpp.flags import LlamaCppFlags
from pytest_gpulayout.engines.llamacpp.launch import judge_llamacpp
from pytest_gpulayout.engines.llamacpp.log import LlamaCppLog, parse_llamacpp_log
from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.findings import Finding, Status
from pytest_gpulayout.machine.facts import Machine

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs" / "llamacpp"
REAL = (LOGS / "real-cpu-b11434.log").read_text(encoding="utf-8")
#: the launch that recorded it: ``-c 1000 -np 3`` at build b11434
RAN = LlamaCppFlags(ctx_size=1000, parallel=3)
LOADING = "load_tensors: loading model tensors, this can take a while... (load_mode = mmap)"
#: ``llama_prepare_model_devices`` (src/llama.cpp) on a two-GPU CUDA build, in b11434's format
TWO_GPUS = ("0.00.004.300 I llama_prepare_model_devices: using device CUDA0 (NVIDIA H100 80GB HBM3) "
            "(0000:19:00.0) - 80606 MiB free\n"
            "0.00.004.301 I llama_prepare_model_devices: using device CUDA1 (NVIDIA H100 80GB HBM3) "
            "(0000:3b:00.0) - 80606 MiB free\n")
META = ("0.00.004.299 I llama_prepare_model_devices: creating a Meta device for tensor parallelism from 2 devices:\n"
        "0.00.004.299 I llama_prepare_model_devices: - device 0: CUDA0 (NVIDIA H100 80GB HBM3)\n"
        "0.00.004.299 I llama_prepare_model_devices: - device 1: CUDA1 (NVIDIA H100 80GB HBM3)\n"
        "0.00.004.300 I llama_prepare_model_devices: using device Meta() (Meta()) (unknown id) - 161212 MiB free\n")


def dep(flags: LlamaCppFlags = RAN, **kw: Any) -> Deployment:
    return Deployment(name="tiny", model="tiny.gguf", engine="llamacpp", llamacpp=flags, **kw)


def planted(old: str, new: str, text: str = REAL) -> LlamaCppLog:
    """The real log with the line(s) ``old`` replaced by ``new`` (``old`` must be there)."""
    assert old in text
    return parse_llamacpp_log(text.replace(old, new, 1))


def offloaded(n: int, of: int = 5) -> LlamaCppLog:
    """The real log as a GPU build prints ``load_tensors`` (the tiny model: 4 layers + the output layer)."""
    return planted(LOADING, f"{LOADING}\n0.00.007.222 I load_tensors: offloaded {n}/{of} layers to GPU")


def verdict(d: Deployment, log: LlamaCppLog) -> Finding:
    return judge_llamacpp(d, log, None, stopped_by="kv", returncode=None, leftover=(), log_path=Path("/logs/x.log"),
                          seconds_to_kv=0.1, argv=("llama-server",), tail=())


# -- what it says ----------------------------------------------------------------------------------
def test_the_real_log_says_what_it_ran_with() -> None:
    log = parse_llamacpp_log(REAL)
    assert log.config == {"version": "b11434", "max_model_len": "512", "n_ctx": "1536", "n_ctx_seq": "512",
                          "n_seq_max": "3", "n_slots": "3", "n_ctx_train": "4096", "kv_unified": "false"}
    assert dict(log.to_startup_log().config) == log.config
    assert log.to_json()["config"] == log.config


def test_the_2025_spelling_and_the_older_build_line() -> None:
    """``n_ctx_per_seq`` (InftyAI/llmaz#402's log) and the server's "build: N (commit) with" before 2026."""
    text = (LOGS / "unified-kv-self-cpu-llmaz402.log").read_text(encoding="utf-8").partition("\n---\n")[2]
    log = parse_llamacpp_log("build: 4462 (c05e8c99) with cc (Ubuntu 13.3.0) 13.3.0 for x86_64-linux-gnu\n" + text)
    assert log.config["n_ctx_seq"] == "4096" and log.config["max_model_len"] == "4096"
    assert log.config["version"] == "b4462"


def test_the_served_models_devices_not_a_draft_models() -> None:
    """A draft model loads after the served model's context: its device lines are not the deployment's."""
    text = REAL.replace(LOADING, TWO_GPUS + LOADING, 1) + TWO_GPUS.replace("CUDA1", "CUDA2")
    log = parse_llamacpp_log(text)
    assert log.devices == ("CUDA0", "CUDA1") and log.config["devices"] == "CUDA0,CUDA1"


def test_a_split_mode_the_log_shows() -> None:
    assert parse_llamacpp_log(REAL).split_mode is None  # layer or none: only the devices tell
    assert planted(LOADING, META + LOADING).split_mode == "tensor"
    row = planted("CPU_Mapped model buffer size", "CUDA_Split model buffer size")
    assert row.split_mode == "row"


# -- held to the deployment ------------------------------------------------------------------------
def test_the_launch_that_recorded_it_agrees() -> None:
    assert contradictions(dep(engine_version="b11434"), parse_llamacpp_log(REAL)) == []
    f = verdict(dep(engine_version="b11434"), parse_llamacpp_log(REAL))
    assert f.status is Status.PASS, f.message
    assert f.data["contradictions"] == [] and f.data["engine_config"]["version"] == "b11434"


def test_another_build_than_engine_version_pins() -> None:
    log = planted("build 11434 (b11434)", "build 11400 (b11400)")
    f = verdict(dep(engine_version="b11434"), log)
    assert f.status is Status.FAIL
    assert "it is release b11400 where the deployment pins engine_version b11434" in f.message
    assert f.data["contradictions"] == [c for c in f.data["contradictions"] if "b11400" in c]
    assert contradictions(dep(), log) == []  # nothing pinned: any build


def test_another_context_per_slot() -> None:
    f = verdict(dep(replace(RAN, ctx_size=2048)), parse_llamacpp_log(REAL))
    assert f.status is Status.FAIL
    assert ("it ran n_ctx 512 per slot (n_ctx_seq) where the deployment's ctx_size 2048 over parallel 3 slots "
            "gives 768") in f.message
    assert "launch.args or launch.command override it?" in f.message


def test_a_split_cache_where_the_deployment_has_a_unified_one() -> None:
    """No ``parallel``: llama-server's 4 auto slots share one cache of the whole ``ctx_size``."""
    (found,) = contradictions(dep(LlamaCppFlags(ctx_size=1000)), parse_llamacpp_log(REAL))
    assert found == ("it ran n_ctx 512 per slot (n_ctx_seq) (kv_unified false) where the deployment's ctx_size "
                     "1000 in one unified KV cache gives 1024")


def test_other_slots() -> None:
    found = contradictions(dep(replace(RAN, parallel=2)), parse_llamacpp_log(REAL))
    # 1000 over 2 slots is 512 each too: the total and the slots say it
    assert found == ["it ran n_ctx 1536 in all where the deployment's ctx_size 1000 over parallel 2 slots gives 1024",
                     "it ran 3 slots (n_seq_max) where the deployment sets parallel 2"]


def test_what_the_deployment_leaves_to_llamacpp_is_not_held_against_it() -> None:
    """No ``ctx_size`` (``--fit`` picks one), no ``parallel``, ``n_gpu_layers`` auto, no ``gpus``."""
    log = planted(LOADING, TWO_GPUS + LOADING + "\n0.00.007.222 I load_tensors: offloaded 3/5 layers to GPU")
    assert contradictions(dep(LlamaCppFlags(n_gpu_layers="auto")), log) == []
    assert contradictions(dep(LlamaCppFlags()), log) == []


@pytest.mark.parametrize(("ngl", "ran", "found"), [
    ("all", 3, "it offloaded 3/5 layers to the GPU where the deployment asks for all (n_gpu_layers all)"),
    (99, 3, "it offloaded 3/5 layers to the GPU where the deployment asks for 99 (n_gpu_layers)"),
    (4, 5, "it offloaded 5/5 layers to the GPU where the deployment asks for 4 (n_gpu_layers)"),
    ("all", 5, None), (99, 5, None), (3, 3, None),
])
def test_offloaded_layers_against_n_gpu_layers(ngl: int | str, ran: int, found: str | None) -> None:
    got = contradictions(dep(replace(RAN, n_gpu_layers=ngl)), offloaded(ran))
    assert got == ([found] if found else [])


def test_devices_against_gpus_and_split_mode() -> None:
    two = planted(LOADING, TWO_GPUS + LOADING)
    assert contradictions(dep(gpus=(0, 1)), two) == []
    assert contradictions(dep(gpus=(0,)), two) == [
        "it used 2 device(s) (CUDA0, CUDA1) where the deployment's gpus lists 1 (split_mode layer)"]
    assert contradictions(dep(replace(RAN, split_mode="none"), gpus=(0, 1)), two) == [
        "it used 2 device(s) (CUDA0, CUDA1) where split_mode none keeps main_gpu only"]
    assert contradictions(dep(replace(RAN, split_mode="tensor"), gpus=(0, 1)), two) == [
        "it used CUDA0, CUDA1 without a Meta device where the deployment sets split_mode tensor"]


def test_split_mode_tensor_against_the_meta_device() -> None:
    meta = planted(LOADING, META + LOADING)
    assert contradictions(dep(replace(RAN, split_mode="tensor"), gpus=(0, 1)), meta) == []
    assert contradictions(dep(replace(RAN, split_mode="tensor"), gpus=(0, 1, 2, 3)), meta) == [
        "it split the tensors over 2 devices where the deployment's gpus lists 4"]
    assert contradictions(dep(gpus=(0, 1)), meta) == [
        "it ran split mode tensor where the deployment sets split_mode layer"]


def test_each_contradiction_is_a_clause_of_one_failure() -> None:
    log = planted("build 11434 (b11434)", "build 11400 (b11400)",
                  REAL.replace(LOADING, f"{LOADING}\n0.00.007.222 I load_tensors: offloaded 3/5 layers to GPU"))
    f = verdict(dep(replace(RAN, ctx_size=2048, n_gpu_layers="all"), engine_version="b11434"), log)
    assert f.status is Status.FAIL and len(f.data["contradictions"]) == 3
    assert f.message.count("\n") == 0 and "; ".join(f.data["contradictions"]) in f.message


def test_a_contradiction_is_said_beside_a_kv_mismatch_and_a_failed_start() -> None:
    log = planted("build 11434 (b11434)", "build 11400 (b11400)")
    mismatch = judge_llamacpp(dep(engine_version="b11434"), log, {"CPU": 2 * 1024 * 1024}, stopped_by="kv",
                              returncode=None, leftover=(), log_path=None, seconds_to_kv=0.1, argv=(), tail=())
    assert mismatch.status is Status.FAIL
    assert "the prediction was CPU 2.00 MiB" in mismatch.message and "b11400" in mismatch.message
    died = judge_llamacpp(dep(engine_version="b11434"), parse_llamacpp_log(REAL.split("llama_kv_cache:")[0]
                                                                              .replace("11434 (b11434)", "11400 (x)")),
                          None, stopped_by="exit", returncode=1, leftover=(), log_path=None, seconds_to_kv=None,
                          argv=(), tail=())
    assert died.status is Status.FAIL and "did not report its KV cache" in died.message and "b11400" in died.message


# -- the real thing ----------------------------------------------------------------------------------
@pytest.mark.engine
def test_real_llama_server_of_another_build_than_pinned_fails(tmp_path: Path) -> None:
    """The b11434 server the tests build, launched for a deployment that pins b11400: its own build line
    fails the check although its KV cache is the predicted one."""
    from pytest_gpulayout.launch.startup import launch_deployment
    from pytest_gpulayout.manifest.load import load_manifest
    from pytest_gpulayout.runner import load_models

    tiny = write_tiny_llama(tmp_path / "tiny.gguf")
    body = (f"version: 1\ndeployments:\n  tiny:\n    engine: llamacpp\n    engine_version: b11400\n"
            f"    model: {tiny}\n    ctx_size: 1000\n    parallel: 3\n"
            f"    launch:\n      command: [{llama_server()}]\n      timeout_s: 120\n")
    (tmp_path / "gpulayout.yaml").write_text(body)
    d = load_manifest(tmp_path / "gpulayout.yaml").deployments[0]
    report = launch_deployment(d, load_models([d])["tiny"], engine=ENGINES[d.engine].launch,
                               machine=Machine(gpus=(), source="cpu"), log_dir=tmp_path / "logs")
    f = report.finding
    assert f.status is Status.FAIL, f.message
    assert f.data["kv_matches_prediction"] is True
    assert f.data["contradictions"] == [
        "it is release b11434 where the deployment pins engine_version b11400 (the checks judged b11400's "
        "defaults and rules)"]
    assert f.data["engine_config"]["n_ctx_seq"] == "512" and f.data["engine_config"]["n_seq_max"] == "3"
