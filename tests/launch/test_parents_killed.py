"""The engine's tree dies with its parents, whatever kills them, and the GPU lock is held until it has.

Reliability round 4, item 2: SIGKILL of the launching process and its watchdog at the same moment
(what ``pkill -9 -f pytest_gpulayout`` does, or a CI runner killing every process of a job) left the
engine's child, a setsid child and grandchild and a daemon alive under init for minutes, with their
cgroup, private TMPDIR and /dev/shm segments, and the GPU lock released so that the next launch
started beside them. Here the fake engine starts all four kinds, maps shared memory, and the test
SIGKILLs, at once, every process of the launch whose command line names ``pytest_gpulayout`` (the
launcher and its watchdog), as ``pkill -9 -f`` would, but only within this launch, so that the
neighbours under ``pytest -n`` live on. The real engine's case is in ``test_containment_engine.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from drivers import RESET_SIGNALS
from fakes import fake_engine
from leaks import Snapshot, descendants_of

from pytest_gpulayout.engines.registry import LOG_GRAMMARS
from pytest_gpulayout.launch import launcher
from pytest_gpulayout.launch.launcher import launch, pid_alive

HERE = Path(__file__).parents[1]
REPO = HERE.parent
FAKE = HERE / "fakes" / "fake_engine.py"
TINY_LOG = HERE / "data" / "logs" / "vllm-cpu" / "vllm-tiny.log"
ROLES = {"main", "child", "escaped", "escaped-grandchild", "daemon"}

DRIVER = RESET_SIGNALS + textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from pytest_gpulayout.engines.registry import LOG_GRAMMARS
    from pytest_gpulayout.launch import launcher
    from pytest_gpulayout.launch.launcher import launch
    launcher.USE_CGROUP = sys.argv[3] == "cgroup"
    launch(sys.argv[4:], env=dict(os.environ), grammars=LOG_GRAMMARS, timeout_s=120, grace_s=5, stop_when="ready",
           gpus=["index-0"], lock_dir=Path(sys.argv[2]), log_path=Path(sys.argv[1]))
""")


class Launch:
    def __init__(self, tmp: Path, cgroup: bool):
        self.tmp = tmp
        self.pids = tmp / "pids"
        self.pids.mkdir()
        self.locks = tmp / "locks"
        self.etmp = tmp / "engine-tmp"
        self.etmp.mkdir()
        self.cgroup = cgroup
        self.driver: subprocess.Popen[bytes] | None = None

    def start(self) -> subprocess.Popen[bytes]:
        argv = [sys.executable, str(FAKE), "--fake-mode", "never-reports,shm,fork,daemon", "--fake-pid-dir",
                str(self.pids), "--fake-log", str(TINY_LOG)]
        env = {**os.environ, "TMPDIR": str(self.etmp), "PYTHONPATH": str(REPO)}
        mode = "cgroup" if self.cgroup else "subreaper"
        self.driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(self.tmp / "engine.log"), str(self.locks),
                                        mode, *argv], start_new_session=True, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, env=env)
        return self.driver

    def processes(self) -> dict[str, int]:
        return {p.stem.rsplit("-", 1)[0]: int(p.read_text().split()[0]) for p in self.pids.glob("*.pid")}

    def alive(self) -> dict[str, int]:
        return {role: pid for role, pid in self.processes().items() if pid_alive(pid)}

    def lock_free(self) -> bool:
        path = self.locks / "index-0.lock"
        if not path.exists():
            return True
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)


@pytest.fixture
def run(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Launch]:
    lr = Launch(tmp_path, cgroup=request.param)
    yield lr
    for pid in lr.alive().values():   # a failing test must not leave its fakes running
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if lr.driver is not None and lr.driver.poll() is None:
        lr.driver.kill()
        lr.driver.wait()


def _ours_named(root: int, word: str) -> list[int]:
    """``root`` and its descendants whose command line names ``word`` (``pkill -f word``, within one launch)."""
    out = []
    for pid in [root, *descendants_of(root)]:
        with contextlib.suppress(OSError):
            if word in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                out.append(pid)
    return out


@pytest.mark.parametrize("run", [True, False], ids=["cgroup-if-allowed", "subreaper-only"], indirect=True)
def test_sigkill_of_the_launcher_and_its_watchdog_at_once_leaves_nothing(run: Launch) -> None:
    before = Snapshot.take(private_dirs=(run.etmp,), markers=(str(run.pids),), lock_keys=("index-0",),
                           lock_dir=run.locks, shm_only=f"fake{fake_engine.shm_tag(str(run.pids))}")
    driver = run.start()
    before.launchers.add(driver.pid)   # its cgroup is this launch's
    deadline = time.monotonic() + 30
    while not (ROLES <= set(run.processes()) and (run.pids / "shm.json").exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ROLES <= set(run.processes()), run.processes()
    time.sleep(0.3)   # the watchdog has seen the tree's shared memory
    targets = _ours_named(driver.pid, "pytest_gpulayout")
    watchdogs = [p for p in targets if b"watchdog.py" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert driver.pid in targets and watchdogs, "the launcher and its watchdog are what pkill -f would take"
    for pid in targets:
        os.kill(pid, signal.SIGKILL)
    driver.wait()
    # while anything of the tree lives, the GPU lock stays held: the next launch never starts beside it
    beside: list[dict[str, int]] = []
    deadline = time.monotonic() + 15
    while run.alive() and time.monotonic() < deadline:
        if run.lock_free() and (alive := run.alive()):
            beside.append(alive)
        time.sleep(0.02)
    assert run.alive() == {}, f"survived both parents: {run.alive()}"
    assert beside == [], f"the GPU lock was free while these ran: {beside[0]}"
    # the watchdog's (or guard's) own budget, with nobody left to wait for it: up to 10 s for the
    # SIGKILL, 10 s for its cgroup, and a look at every process's maps (seen past 10 s at load 15)
    leaks = before.wait_clean(30)
    assert leaks == []     # processes, /dev/shm, the private TMPDIR, the cgroup, the lock, listeners
    assert run.lock_free()



def _watchdog_of(main: int) -> int:
    stat = Path(f"/proc/{main}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2:].split()[1])


@pytest.mark.parametrize("run", [True, False], ids=["cgroup-if-allowed", "subreaper-only"], indirect=True)
def test_a_killed_watchdog_s_guard_stops_the_tree_and_removes_what_it_made(run: Launch,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The watchdog alone SIGKILLed, the launcher alive: the guard stops the tree (its main process died with
    the watchdog, the rest came back to the guard), unlinks its /dev/shm segments and says so."""
    monkeypatch.setattr(launcher, "USE_CGROUP", run.cgroup)
    before = Snapshot.take(private_dirs=(run.etmp,), markers=(str(run.pids),), lock_keys=("index-0",),
                           lock_dir=run.locks, shm_only=f"fake{fake_engine.shm_tag(str(run.pids))}")
    killed: list[int] = []

    def kill_it() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if ROLES <= set(run.processes()) and (run.pids / "shm.json").exists():
                time.sleep(0.3)  # the watchdog has seen the tree's shared memory
                killed.append(_watchdog_of(run.processes()["main"]))
                os.kill(killed[0], signal.SIGKILL)
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_it, daemon=True)
    killer.start()
    argv = [sys.executable, str(FAKE), "--fake-mode", "never-reports,shm,fork,daemon", "--fake-pid-dir",
            str(run.pids), "--fake-log", str(TINY_LOG)]
    result = launch(argv, env={**os.environ, "TMPDIR": str(run.etmp)}, grammars=LOG_GRAMMARS, timeout_s=60,
                    gpus=["index-0"], lock_dir=run.locks, log_path=run.tmp / "engine.log")
    killer.join()
    assert killed, "the watchdog was never killed"
    assert result.stopped_by == "watchdog" and result.watchdog_returncode == -signal.SIGKILL
    assert run.alive() == {} and result.leftover_pids == ()
    shm = [f"/dev/shm/{n}" for n in json.loads((run.pids / "shm.json").read_text())]
    assert set(shm) <= set(result.cleaned), result.cleaned
    end = (run.tmp / "engine.log").read_text().splitlines()[-1]
    assert f"the watchdog (pid {killed[0]}) was killed from outside (SIGKILL); its guard" in end, end
    assert before.wait_clean(5) == []
