"""An engine that logs its KV pool and then dies has not started: the startup check fails and says so.

Reliability round 4, item 1: an engine that printed its pool line and then exited with code 3 passed
(the launcher turned "exited after the KV line" into ``kv`` and the verdict never read the exit code);
the code appeared only in the JSON. Here the fake engine replays vLLM's CPU log up to its KV line and
exits at once, inside the launcher's linger after that line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import pytest

from pytest_gpulayout.deployment import Deployment, Launch
from pytest_gpulayout.engines.llamacpp.launch import judge_llamacpp
from pytest_gpulayout.engines.llamacpp.log import parse_llamacpp_log
from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.findings import Status
from pytest_gpulayout.launch.launcher import StopReason, StopWhen, launch, pid_alive
from pytest_gpulayout.launch.startup import StartupReport, launch_deployment

HERE = Path(__file__).parents[1]
FAKE = HERE / "fakes" / "fake_engine.py"
TINY_LOG = HERE / "data" / "logs" / "vllm-cpu" / "vllm-tiny.log"
KV_LINE = "CPU KV cache size: 524,288 tokens"


@pytest.fixture
def until_kv(tmp_path: Path) -> Path:
    """vLLM's CPU log up to and including its KV line, then one line of the engine's own."""
    lines = TINY_LOG.read_text().splitlines()
    kv = next(i for i, ln in enumerate(lines) if KV_LINE in ln)
    path = tmp_path / "until-kv.log"
    path.write_text("\n".join([*lines[:kv + 1], "(EngineCore pid=7285) INFO 11-29 07:12:01 [core.py:1] "
                               "compiling the model"]) + "\n")
    return path


def _launch(tmp_path: Path, log: Path, *, exit_code: int, stop_when: str = "kv") -> StartupReport:
    pids = tmp_path / "pids"
    pids.mkdir(exist_ok=True)
    command = (sys.executable, str(FAKE), "--fake-mode", "exits-early", "--fake-exit-code", str(exit_code),
               "--fake-log", str(log), "--fake-pid-dir", str(pids), "--fake-scale", "0.001")
    dep = Deployment(name="tiny", model=str(tmp_path), base_dir=tmp_path, max_model_len=512, gpus=(0,),
                     launch=Launch(command=command, timeout_s=30, env=MappingProxyType({})))
    return launch_deployment(dep, None, engine=ENGINES[dep.engine].launch, log_dir=tmp_path / "logs",
                             stop_when=stop_when)


@pytest.fixture
def locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("GPULAYOUT_LOCK_DIR", str(tmp_path / "locks"))
    yield


@pytest.mark.parametrize("stop_when", ["kv", "ready"])
def test_an_engine_that_exits_with_code_3_after_its_pool_line_failed_to_start(
        tmp_path: Path, until_kv: Path, locks: None, stop_when: str) -> None:
    report = _launch(tmp_path, until_kv, exit_code=3, stop_when=stop_when)
    result = report.result
    assert result is not None and result.log.kv_tokens == 524288   # the pool line was read
    assert result.stopped_by == "exit" and result.returncode == 3
    assert report.finding.status is Status.FAIL, report.finding.message
    msg = report.finding.message
    assert "exited with code 3 after it reported its KV pool (524,288 tokens)" in msg
    assert "failed to start" in msg
    assert "compiling the model" in msg.split("last lines:", 1)[1]    # its last log lines are shown
    assert str(report.log_path) in msg
    assert report.finding.data["returncode"] == 3 and report.finding.data["stopped_by"] == "exit"
    started = [int(f.read_text().split()[0]) for f in (tmp_path / "pids").glob("*.pid")]
    assert started and not [pid for pid in started if pid_alive(pid)]


def test_an_engine_that_exits_0_after_its_pool_line_did_not_serve_either(
        tmp_path: Path, until_kv: Path, locks: None) -> None:
    """Exit code 0 before it was stopped is no start either: a server that ends by itself serves nothing."""
    report = _launch(tmp_path, until_kv, exit_code=0)
    assert report.finding.status is Status.FAIL, report.finding.message
    assert "exited with code 0 after it reported its KV pool" in report.finding.message


def test_an_engine_still_running_at_its_pool_line_passes(tmp_path: Path, locks: None) -> None:
    """The control: the same log, the engine alive when the launcher stops it at the pool, passes."""
    pids = tmp_path / "pids"
    pids.mkdir()
    command = (sys.executable, str(FAKE), "--fake-log", str(TINY_LOG), "--fake-pid-dir", str(pids),
               "--fake-scale", "0.001")
    dep = Deployment(name="tiny", model=str(tmp_path), base_dir=tmp_path, max_model_len=512, gpus=(0,),
                     launch=Launch(command=command, timeout_s=30, env=MappingProxyType({})))
    report = launch_deployment(dep, None, engine=ENGINES[dep.engine].launch, log_dir=tmp_path / "logs")
    assert report.result is not None and report.result.stopped_by == "kv"
    assert report.finding.status is Status.PASS, report.finding.message


def test_llama_server_that_exits_after_its_kv_lines_failed_to_start() -> None:
    """The same for llama.cpp's own verdict: its real CPU log, ended by itself with code 3."""
    real = (HERE / "data" / "logs" / "llamacpp" / "real-cpu-b11434.log").read_text(encoding="utf-8")
    log = parse_llamacpp_log(real)
    assert log.kv_mib is not None
    dep = Deployment(name="tiny", model="tiny.gguf", engine="llamacpp")
    died = judge_llamacpp(dep, log, None, stopped_by="exit", returncode=3, leftover=(), log_path=Path("/l/x.log"),
                          seconds_to_kv=0.1, argv=("llama-server",), tail=("srv  load_model: done",))
    assert died.status is Status.FAIL
    assert f"exited with code 3 after it reported its KV cache ({log.kv_mib:,.2f} MiB)" in died.message
    assert "srv  load_model: done" in died.message
    stopped = judge_llamacpp(dep, log, None, stopped_by="kv", returncode=-9, leftover=(), log_path=Path("/l/x.log"),
                             seconds_to_kv=0.1, argv=("llama-server",), tail=())
    assert stopped.status is Status.PASS, stopped.message


def test_why_a_launch_stopped_is_an_enum_with_the_old_json_words() -> None:
    assert [r.value for r in StopReason] == ["kv", "ready", "error", "exit", "timeout", "interrupt", "watchdog"]
    assert StopReason("exit") is StopReason.EXIT and StopReason.EXIT == "exit"
    assert f"{StopReason.KV}" == "kv" and str(StopWhen.READY) == "ready"
    assert json.dumps({"stopped_by": StopReason.WATCHDOG}) == '{"stopped_by": "watchdog"}'
    with pytest.raises(ValueError, match="stop_when must be 'kv' or 'ready', not 'pool'"):
        launch(["true"], env={}, timeout_s=1, stop_when="pool")
