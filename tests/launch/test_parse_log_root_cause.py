"""``gpulayout parse-log`` on the logs a newcomer pasted: the root cause of a failed vLLM worker, the
per-rank KV size of newer vLLM, and ``--json`` that prints its object also when it exits 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gpulayout import cli
from pytest_gpulayout.engines.registry import log_grammars
from pytest_gpulayout.launch import logparse
from pytest_gpulayout.launch.logparse import JSON_KEYS, StartupLog


def parse_log(text: str, engine: str = "auto") -> StartupLog:
    """The whole-log parser with the registered engines' grammars (``engine``: one of them, or auto)."""
    return logparse.parse_log(text, log_grammars(engine))

LOGS = Path(__file__).parents[1] / "data" / "logs"


def test_worker_valueerror_is_the_reported_cause_not_workerproc_failed_to_start() -> None:
    """A real log, unedited: vLLM 0.32 CPU, TP=2, a tiny block-FP8 Mixtral
    (``vllm-cpu/tiny-mixtral-fp8-config.json``, dense layers FP8 too). Each worker logs
    "WorkerProc failed to start." (vllm/v1/executor/multiproc_executor.py) and then the traceback
    whose last line is the ValueError; EngineCore and the API server then wrap it ("See stack trace
    for root cause", "See root cause above"). The ValueError is the answer."""
    log = parse_log((LOGS / "vllm-cpu" / "vllm-tp2-worker-fp8-kernel.log").read_text())
    assert log.engine == "vllm" and not log.has_pool
    assert log.error_kind == "other_error"
    assert log.error_line is not None
    assert log.error_line.startswith("ValueError: Failed to find a kernel that can implement the ScaledMM")


def test_block_fp8_divisibility_gives_kind_and_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    """Built from a real log: the run above with the attention layers left unquantized
    (``ignored_layers``) got past the dense layers and failed in the MoE; this vLLM build refines the
    block grid for TP (fp8.py ``resolve_fp8_moe_weight_block_shape``), so its worker raised "Unsupported
    FP8 MoE backend: NONE" (no FP8 MoE kernel on CPU) instead. The last frame and the exception line
    were replaced by what vLLM without that refinement raises for this model at TP=2 (moe intermediate
    384 / 2 = 192, not whole 128-wide blocks), text from
    vllm/model_executor/layers/quantization/utils/fp8_utils.py ``validate_fp8_block_shape_moe``;
    everything else is the engine's own output."""
    path = LOGS / "vllm-cpu" / "vllm-tp2-worker-fp8-block.log"
    assert "WorkerProc failed to start." in path.read_text()
    assert cli.main(["parse-log", str(path)]) == 1
    out = capsys.readouterr().out
    assert "error: heads_not_divisible (output_size_per_partition=192, block_n=128)" in out
    assert ("  ValueError: The output_size of gate's and up's weight = 192 is not divisible by weight "
            "quantization block_n = 128.") in out
    assert "WorkerProc failed" not in out
    assert cli.main(["parse-log", "--json", str(path)]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["error_kind"] == "heads_not_divisible"
    assert data["error_numbers"] == {"output_size_per_partition": 192, "block_n": 128}


def test_wrappers_never_displace_the_first_failure_line() -> None:
    # when no worker exception is in the paste, EngineCore's own "failed to start" stays the line
    text = ("(EngineCore pid=9) ERROR 01-01 00:00:00 [core.py:1510] EngineCore failed to start.\n"
            "(EngineCore pid=9) ERROR 01-01 00:00:00 [core.py:1510] Exception: WorkerProc initialization failed "
            "due to an exception in a background process. See stack trace for root cause.\n"
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
    assert parse_log(text).error_line == "EngineCore failed to start."


def test_newer_vllm_per_rank_summary_gives_available_kv_gib(capsys: pytest.CaptureFixture[str]) -> None:
    """A real paste (vllm/025.txt, an 8 x RTX 3090 PP=2 TP=4 run): only the per-rank summary of newer
    vLLM (gpu_worker.py "Free memory on device ... Current kv cache memory in use is 1.95 GiB"), cut
    before the pool line. It is not a whole answer (exit 2), but ``--json`` still says what it can."""
    path = LOGS / "vllm" / "025.txt"
    assert cli.main(["parse-log", "--json", str(path)]) == 2
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert list(data) == list(JSON_KEYS)
    assert data["available_kv_gib"] == 1.95 and data["engine"] == "vllm"
    assert data["kv_tokens"] is None and data["error_kind"] is None  # null where the log says nothing
    assert captured.err.count("\n") == 1 and "no KV pool line" in captured.err
