"""``gpulayout VERB ... | head -1``: the reader of stdout goes away early. Every verb stops quietly
(no BrokenPipeError traceback, no "Exception ignored" at exit) with 141, what a shell reports for
``cat`` in the same place, and never 1, which a pipeline reads as "a check failed"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_pynvml import FakeNvml

import pytest_gpulayout.machine.probe as probe_mod
from pytest_gpulayout.cli import EXIT_STDOUT_CLOSED, main
from pytest_gpulayout.machine.presets import load_preset

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parents[1] / "data"

VERBS = {
    "check": ["check", str(ROOT / "examples" / "01-two-l4-pcie" / "gpulayout.yaml")],
    "check --json": ["check", "--json", str(ROOT / "examples" / "01-two-l4-pcie" / "gpulayout.yaml")],
    "topo": ["topo", "--machine", "preset:8xH100-sxm"],
    "parse-log": ["parse-log", str(DATA / "logs" / "vllm-cpu" / "vllm-tp2.log")],
    "plan": ["plan", "Qwen/Qwen3-8B", "--machine", "preset:2xL4-pcie", "--engine-version", "0.33.0"],
    "--help": ["check", "--help"],
}


def _env(unbuffered: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return {**env, "PYTHONPATH": str(ROOT)}


def _run_into_closed_pipe(argv: list[str], unbuffered: bool) -> subprocess.CompletedProcess[bytes]:
    """stdout is a real pipe whose read end is closed before the first write (the deterministic form of
    ``| head -1``: with head the child may finish inside the 64 KiB pipe buffer first)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = _env(unbuffered)
    try:
        return subprocess.run([sys.executable, "-m", "pytest_gpulayout.cli", *argv], stdout=write_end,
                              stderr=subprocess.PIPE, env=env, cwd=ROOT, timeout=120, check=False)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED"])
@pytest.mark.parametrize("verb", list(VERBS))
def test_closed_stdout_is_quiet(verb, unbuffered):
    """Buffered (a user's default): short output meets the closed pipe only when flushed, which at
    interpreter exit would print "Exception ignored" and exit 120. Unbuffered: at the first print."""
    done = _run_into_closed_pipe(VERBS[verb], unbuffered)
    assert done.stderr.decode() == ""
    # argparse's help writer swallows the write error itself and exits 0: quiet, and not 1 either
    assert done.returncode in ((0, EXIT_STDOUT_CLOSED) if verb == "--help" else (EXIT_STDOUT_CLOSED,))


def test_head_one_in_a_shell_pipeline():
    """The way the user met it: ``set -o pipefail; gpulayout check ... | head -1``. A large output
    (the 8-GPU plan in JSON) makes the pipe fill and the reader leave while the child still writes."""
    env = _env(unbuffered=False)
    cmd = (f"set -o pipefail; {sys.executable} -m pytest_gpulayout.cli plan Qwen/Qwen3-8B "
           "--machine preset:8xH100-sxm --engine-version 0.33.0 --json | head -c 10")
    done = subprocess.run(["bash", "-c", cmd], capture_output=True, env=env, cwd=ROOT, timeout=120, check=False)
    # nothing but the plan's progress lines, which it writes on stderr once it has taken 2 s (a loaded machine):
    # no traceback, no "Broken pipe", no "Exception ignored"
    said = [line for line in done.stderr.decode().splitlines() if not line.startswith("gpulayout: plan: ")]
    assert said == []
    assert done.stdout.decode().startswith("{")
    assert done.returncode in (0, EXIT_STDOUT_CLOSED)  # 0 only if the plan fit into the pipe buffer first


def test_snapshot_into_a_closed_pipe(monkeypatch, tmp_path):
    """snapshot needs NVML: in-process with the fake, stdout a real pipe already closed at the reader."""
    real = probe_mod.probe
    monkeypatch.setattr(probe_mod, "probe", lambda nvml=None, env=None, **kw: real(
        nvml=FakeNvml(load_preset("2xL4-pcie")), env={}, host_root=tmp_path))
    read_end, write_end = os.pipe()
    os.close(read_end)
    out = os.fdopen(write_end, "w")
    saved = os.dup(1)
    try:
        os.dup2(write_end, 1)
        monkeypatch.setattr(sys, "stdout", out)
        assert main(["snapshot"]) == EXIT_STDOUT_CLOSED
    finally:
        os.dup2(saved, 1)
        os.close(saved)
