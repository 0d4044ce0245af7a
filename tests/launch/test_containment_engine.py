"""Nothing of a launched engine survives: the cases where vLLM's own behaviour matters (CPU build).

Four real launches, each compared before and after (``tests/leaks.py``: ``/dev/shm``, the engine's
temp directory and ``/tmp``, listening ports, the GPU lock, processes):

- a normal launch (case 9 and the speed promise): no ZMQ sockets or ``vllm_dist_*`` left in the
  temp directory, and the tree gone within 2 s of the KV line. It is also the TP=1 case of the
  startup check's real pool (``test_startup_engine.py`` launches TP=2): the pool it reads is the
  1 GiB the launch asked for, equal to the prediction, and ``require`` holds;
- SIGTERM to the launching process after the weights are loaded (case 1): vLLM is stopped with
  its own stop signal (SIGTERM) and a real grace, its ``psm_*``/``sem.mp-*`` do not stay in ``/dev/shm``, the log is
  complete to its last line;
- SIGKILL of the launching process (case 2): the engine does not live on as an orphan;
- SIGKILL of the launching process and its watchdog at the same moment (round 4, item 2): neither.

vLLM's python comes from ``$GPULAYOUT_VLLM_PYTHON`` or ``<repo>/.engines/vllm-cpu``; without it the
tests skip, unless ``GPULAYOUT_REQUIRE_ENGINE=1`` (CI).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import pytest
from drivers import RESET_SIGNALS
from leaks import Snapshot, descendants_of
from real_engines import assert_cpu_pool_read_at_kv, vllm_python

from pytest_gpulayout.deployment import Deployment, Launch, Require
from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.findings import Status
from pytest_gpulayout.launch.startup import StartupReport, launch_deployment

HERE = Path(__file__).parents[1]
REPO = HERE.parent
TINY_DIR = HERE / "data" / "models" / "tiny-llama"
KV_LINE = "KV cache size:"


def tiny_tokens_per_gib() -> int:
    """1 GiB of KV for the tiny Llama on one rank: 2 (K, V) x bf16 x head_dim x KV heads x layers."""
    cfg = json.loads((TINY_DIR / "config.json").read_text())
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    return (1 << 30) // (cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * 2 * 2)


@dataclass
class Setup:
    dep: Deployment
    work: Path
    etmp: Path      # the TMPDIR the engine would have used: everything vLLM leaves there is a leak
    locks: Path
    marker: str     # in the engine's environment: finds its processes whatever vLLM titles them

    def snapshot(self) -> Snapshot:
        return Snapshot.take(private_dirs=(self.etmp,), markers=(self.marker,), lock_keys=("index-0",),
                             lock_dir=self.locks)


def _setup(work: Path, etmp: Path) -> Setup:
    python = vllm_python()
    model = work / f"tiny-llama-{uuid.uuid4().hex[:8]}"
    shutil.copytree(TINY_DIR, model)
    marker = f"GPULAYOUT_TEST_LAUNCH={uuid.uuid4().hex}"
    key, value = marker.split("=")
    dep = Deployment(
        name="tiny-cpu", model=str(model), engine="vllm", max_model_len=512, gpus=(0,),
        launch=Launch(enabled=True, command=(python, "-m", "vllm.entrypoints.openai.api_server"),
                      args=("--skip-tokenizer-init", "--enforce-eager"), timeout_s=400,
                      env=MappingProxyType({"VLLM_CPU_KVCACHE_SPACE": "1", "TMPDIR": str(etmp), key: value})))
    return Setup(dep, work, etmp, work / "locks", marker)


# ------------------------------------------------------------------------------------------------
# One normal launch, shared by the tests that read it
# ------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _short_tmp() -> Iterator[Path]:
    """The engine's TMPDIR: short, because vLLM binds ZMQ sockets at ``$TMPDIR/<uuid4>`` and a Unix
    socket path has at most 107 bytes (a pytest ``tmp_path`` is too long for that)."""
    path = Path(tempfile.mkdtemp(prefix="gl-etmp-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def etmp() -> Iterator[Path]:
    with _short_tmp() as path:
        yield path


@dataclass
class Normal:
    setup: Setup
    report: StartupReport
    leaks: list[str]
    kv_line_in_log: bool
    expected: int       # its pool: VLLM_CPU_KVCACHE_SPACE=1 is 1 GiB of KV
    seconds: float      # the launch, start to return


@pytest.fixture(scope="module")
def normal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Normal]:
    with _short_tmp() as etmp:
        yield from _normal(tmp_path_factory, etmp)


def _normal(tmp_path_factory: pytest.TempPathFactory, etmp: Path) -> Iterator[Normal]:
    setup = _setup(tmp_path_factory.mktemp("normal"), etmp)
    expected = tiny_tokens_per_gib()
    setup.dep = replace(setup.dep, require=Require(kv_tokens=expected))
    old = os.environ.get("GPULAYOUT_LOCK_DIR")
    os.environ["GPULAYOUT_LOCK_DIR"] = str(setup.locks)
    before = setup.snapshot()
    try:
        t0 = time.monotonic()
        report = launch_deployment(setup.dep, None, engine=ENGINES[setup.dep.engine].launch,
                                   log_dir=setup.work / "logs",
                                   prediction_tokens=expected)
        seconds = time.monotonic() - t0
        leaks = before.wait_clean(3)
        text = report.log_path.read_text(errors="replace") if report.log_path else ""
        yield Normal(setup, report, leaks, KV_LINE in text, expected, seconds)
    finally:
        before.kill_strays()
        if old is None:
            os.environ.pop("GPULAYOUT_LOCK_DIR", None)
        else:
            os.environ["GPULAYOUT_LOCK_DIR"] = old


@pytest.mark.engine
def test_real_vllm_leaves_nothing_in_tmp_shm_or_ports(normal: Normal) -> None:
    """Case 9: every launch used to leave vLLM's ZMQ sockets (and sometimes ``vllm_dist_*``) in /tmp."""
    assert normal.report.finding.status is Status.PASS, normal.report.finding.message
    assert normal.kv_line_in_log
    assert normal.leaks == []
    assert os.listdir(normal.setup.etmp) == []
    result = normal.report.result
    assert result is not None
    # vLLM did write into the launch's private TMPDIR (its ZMQ sockets), and the launch removed it
    assert any("/gpulayout-" in c and "entr" in c for c in result.cleaned), result.cleaned


@pytest.mark.engine
def test_real_vllm_cpu_pool_tp1(normal: Normal) -> None:
    """The startup check's real pool at TP=1 (TP=2: ``test_startup_engine.py``): 1 GiB of KV on the one
    rank, equal to the prediction, read before the server was up; nothing of the launch is left."""
    report, expected = normal.report, normal.expected
    print(f"\nvLLM CPU TP=1: KV after {report.seconds_to_kv} s, total {normal.seconds:.1f} s")
    assert_cpu_pool_read_at_kv(report, expected)
    assert normal.leaks == []  # its processes among them (the launch's marker in their environment)


@pytest.mark.engine
def test_real_vllm_tree_is_gone_within_2_s_of_the_kv_line(normal: Normal) -> None:
    result = normal.report.result
    assert result is not None and result.stopped_by == "kv" and result.seconds_to_kv is not None
    teardown = result.seconds_total - result.seconds_to_kv
    print(f"\nKV after {result.seconds_to_kv:.1f} s, tree gone {teardown:.2f} s later; "
          f"cleaned {getattr(result, 'cleaned', None)}")
    assert teardown < 2.0
    assert result.leftover_pids == ()


# ------------------------------------------------------------------------------------------------
# The launching process is interrupted or killed
# ------------------------------------------------------------------------------------------------
DRIVER = RESET_SIGNALS + textwrap.dedent("""
    import json, sys
    from dataclasses import replace
    from pathlib import Path
    from types import MappingProxyType
    from pytest_gpulayout.deployment import Deployment, Launch
    from pytest_gpulayout.engines.registry import ENGINES
    from pytest_gpulayout.launch.startup import launch_deployment
    spec = json.loads(sys.argv[1])
    launch = Launch(enabled=True, command=tuple(spec["command"]), args=tuple(spec["args"]),
                    env=MappingProxyType(spec["env"]), timeout_s=400)
    dep = Deployment(name="tiny-cpu", model=spec["model"], engine="vllm", max_model_len=512, gpus=(0,),
                     launch=launch)
    print("launching", flush=True)
    r = launch_deployment(dep, None, engine=ENGINES[dep.engine].launch,
                          log_dir=Path(spec["log_dir"]), stop_when="ready", grace_s=10)
    print("launch returned", r.finding.status, r.finding.message, flush=True)
""")


def _start_driver(setup: Setup, before: Snapshot | None = None) -> tuple[subprocess.Popen[bytes], Path]:
    log_dir = setup.work / "logs"
    spec = {"command": list(setup.dep.launch.command or ()), "args": list(setup.dep.launch.args),
            "env": dict(setup.dep.launch.env), "model": setup.dep.model, "log_dir": str(log_dir)}
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPULAYOUT_LOCK_DIR": str(setup.locks)}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(spec)], start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    if before is not None:
        before.launchers.add(driver.pid)   # its cgroup is this launch's
    return driver, log_dir


def _wait_for_kv_line(log_dir: Path, driver: subprocess.Popen[bytes], limit_s: float = 400) -> Path:
    """The weights are loaded and the pool is allocated once the KV line is in the log."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for log in log_dir.glob("startup-*.log"):
            if KV_LINE in log.read_text(errors="replace"):
                return log
        if driver.poll() is not None:
            pytest.fail(f"the launch ended before its KV line: {driver.communicate()[0][-3000:]!r}")
        time.sleep(0.2)
    pytest.fail("no KV line in the log")


@pytest.mark.engine
def test_real_vllm_sigterm_to_the_launcher_after_the_weights_load(tmp_path: Path, etmp: Path) -> None:
    """Case 1: SIGTERM (ignored by vLLM's API server before uvicorn), 2 s, SIGKILL used to leave psm_*
    and sem.mp-* in /dev/shm and lose the log's last lines (a buffered log, and a default SIGTERM
    re-raised before it was closed)."""
    setup = _setup(tmp_path, etmp)
    before = setup.snapshot()
    driver, log_dir = _start_driver(setup, before)
    try:
        log = _wait_for_kv_line(log_dir, driver)
        t0 = time.monotonic()
        driver.send_signal(signal.SIGTERM)
        out, _ = driver.communicate(timeout=120)
        took = time.monotonic() - t0
        leaks = before.wait_clean(5)
    finally:
        if driver.poll() is None:
            driver.kill()
        before.kill_strays()
    assert b"launch returned" not in out
    assert driver.returncode == -signal.SIGTERM, out[-2000:]   # then the signal did what it does
    print(f"\nstopped {took:.1f} s after SIGTERM to the launcher")
    assert leaks == []
    lines = log.read_text(errors="replace").splitlines()
    assert lines[-1].startswith("[gpulayout: launch ended: interrupt (signal SIGTERM"), lines[-3:]
    # asked its own way (Engine.stop_signal: SIGTERM) with the full grace, not 2 s. vLLM 0.32 on CPU,
    # stopped between its KV line and ready, does not finish on SIGINT within 40 s (measured, SIGINT to
    # its group or to the API server alone); on SIGTERM the tree exits (16 s on two loaded cores)
    assert "stop: SIGTERM, grace 10 s" in lines[-1], lines[-1]
    assert took >= 9.5 or "then SIGKILL" not in lines[-1]


@pytest.mark.engine
def test_real_vllm_survives_nothing_of_a_sigkilled_launcher(tmp_path: Path, etmp: Path) -> None:
    """Case 2: the OOM killer or a CI timeout SIGKILLs the launching process; its engine used to live
    on as an orphan of PID 1, reach ready, serve, and hold its ports and memory, and the GPU lock was
    free for the next launch to run beside it."""
    setup = _setup(tmp_path, etmp)
    before = setup.snapshot()
    driver, log_dir = _start_driver(setup, before)
    try:
        _wait_for_kv_line(log_dir, driver)
        driver.kill()
        driver.wait()
        leaks = before.wait_clean(15)
    finally:
        if driver.poll() is None:
            driver.kill()
        before.kill_strays()
    assert leaks == []


def _named(root: int, word: bytes) -> list[int]:
    """``root`` and its descendants whose command line names ``word`` (what ``pkill -f`` matches)."""
    out = []
    for pid in [root, *descendants_of(root)]:
        with contextlib.suppress(OSError):
            if word in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
    return out


@pytest.mark.engine
def test_real_vllm_dies_with_the_launcher_and_its_watchdog_killed_at_once(tmp_path: Path, etmp: Path) -> None:
    """Round 4, item 2: ``pkill -9 -f pytest_gpulayout`` (the launcher and its watchdog at the same moment)
    after the weights are loaded used to leave vLLM's API server's children under init, with their
    /dev/shm, the private TMPDIR and the cgroup, and the GPU lock free for the next launch."""
    setup = _setup(tmp_path, etmp)
    before = setup.snapshot()
    driver, log_dir = _start_driver(setup, before)
    try:
        _wait_for_kv_line(log_dir, driver)
        targets = _named(driver.pid, b"pytest_gpulayout")
        assert driver.pid in targets and any(b"watchdog.py" in Path(f"/proc/{p}/cmdline").read_bytes()
                                             for p in targets), targets
        for pid in targets:
            os.kill(pid, signal.SIGKILL)
        driver.wait()
        leaks = before.wait_clean(15)
    finally:
        if driver.poll() is None:
            driver.kill()
        before.kill_strays()
    assert leaks == []   # processes, /dev/shm, the TMPDIR, the cgroup, the GPU lock, listeners
    assert os.listdir(etmp) == []
