"""Nothing of a launched engine survives, whatever happens: the cases of the fake engine.

Each test reproduces one way a launch used to leave something behind (a daemon, shared memory, a
lock nobody could take, a log written through a planted link, ...) and compares the machine before
and after (``tests/leaks.py``). The cases where vLLM's own behaviour matters are in
``test_containment_engine.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from drivers import RESET_SIGNALS
from fakes import fake_engine
from leaks import Snapshot

from pytest_gpulayout.deployment import Deployment, Launch
from pytest_gpulayout.engines.registry import ENGINES, LOG_GRAMMARS
from pytest_gpulayout.errors import LaunchError
from pytest_gpulayout.findings import Status
from pytest_gpulayout.launch import launcher
from pytest_gpulayout.launch.launcher import LaunchResult, launch, pid_alive
from pytest_gpulayout.launch.startup import launch_deployment
from pytest_gpulayout.machine.facts import Gpu, Machine

HERE = Path(__file__).parents[1]
REPO = HERE.parent
FAKE = HERE / "fakes" / "fake_engine.py"
TINY_LOG = HERE / "data" / "logs" / "vllm-cpu" / "vllm-tiny.log"
TINY_DIR = HERE / "data" / "models" / "tiny-llama"


class Fake:
    def __init__(self, tmp_path: Path):
        self.tmp = tmp_path
        self.pids = tmp_path / "pids"
        self.pids.mkdir()
        self.locks = tmp_path / "locks"
        self.etmp = tmp_path / "engine-tmp"   # the TMPDIR the engine would have used
        self.etmp.mkdir()

    def argv(self, mode: str, **opts: object) -> list[str]:
        argv = [sys.executable, str(FAKE), "--fake-mode", mode, "--fake-pid-dir", str(self.pids),
                "--fake-log", str(TINY_LOG)]
        for k, v in opts.items():
            argv += [f"--fake-{k.replace('_', '-')}", str(v)]
        return argv

    def env(self) -> dict[str, str]:
        return {**os.environ, "TMPDIR": str(self.etmp)}

    def run(self, argv: list[str], **kw: object) -> LaunchResult:
        kw.setdefault("env", self.env())
        kw.setdefault("timeout_s", 30)
        kw.setdefault("grace_s", 2)
        kw.setdefault("log_path", self.tmp / "engine.log")
        kw.setdefault("lock_dir", self.locks)
        kw.setdefault("grammars", LOG_GRAMMARS)
        return launch(argv, **kw)  # type: ignore[arg-type]

    def processes(self) -> dict[str, int]:
        out = {}
        for p in self.pids.glob("*.pid"):
            out[p.stem.rsplit("-", 1)[0]] = int(p.read_text().split()[0])
        return out

    def alive(self) -> dict[str, int]:
        return {role: pid for role, pid in self.processes().items() if pid_alive(pid)}

    def shm(self) -> list[str]:
        f = self.pids / "shm.json"
        return list(json.loads(f.read_text())) if f.is_file() else []

    def snapshot(self) -> Snapshot:
        # only this fake's own /dev/shm names: other tenants' engines, and other tests' fakes, come and go
        return Snapshot.take(private_dirs=(self.etmp,), markers=(str(self.pids),),
                             shm_only=f"fake{fake_engine.shm_tag(str(self.pids))}")


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Fake]:
    f = Fake(tmp_path)
    yield f
    for pid in f.alive().values():  # a failing test must not leave its fakes running
        os.kill(pid, signal.SIGKILL)
    for name in f.shm():
        with_path = Path("/dev/shm") / name
        if with_path.exists():
            with_path.unlink()


@pytest.fixture
def fresh_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Graces measured by earlier tests in this process must not lengthen this one's."""
    monkeypatch.setattr(launcher, "_MEASURED_STOPS", [], raising=False)


# ------------------------------------------------------------------------------------------------
# Case 5: a double fork plus setsid() escaped the tree walk, and the verdict saw no leftovers
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup-if-allowed", "subreaper-only"])
def test_a_double_forked_setsid_daemon_is_stopped_too(fake: Fake, cgroup: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launcher, "USE_CGROUP", cgroup, raising=False)
    before = fake.snapshot()
    result = fake.run(fake.argv("replay,daemon", scale=0.05))
    assert result.stopped_by == "kv"
    if not cgroup:
        assert result.containment == "subreaper"
    assert "daemon" in fake.processes(), "the fake never daemonized"
    assert fake.alive() == {}, f"survived the launch: {fake.alive()}"
    assert result.leftover_pids == ()
    assert before.leaks() == []


def test_the_tree_is_contained_by_a_subreaper_or_a_cgroup(fake: Fake) -> None:
    result = fake.run(fake.argv("replay,daemon", scale=0.05))
    assert result.containment in ("cgroup", "subreaper")
    base = launcher._own_cgroup_dir()
    if result.containment == "cgroup" and base is not None:  # its cgroup goes with it
        assert list(base.glob(f"gpulayout-{os.getpid()}-*")) == []


# ------------------------------------------------------------------------------------------------
# Case 3: a normal stop longer than the grace was SIGKILLed, leaked shm, and still passed silently
# ------------------------------------------------------------------------------------------------
def _dep(fake: Fake, mode: str, **opts: object) -> Deployment:
    model = fake.tmp / "tiny"
    if not model.exists():
        import shutil

        shutil.copytree(TINY_DIR, model)
    return Deployment(name="tiny", model="tiny", base_dir=fake.tmp, max_model_len=512, gpus=(0,),
                      launch=Launch(command=tuple(fake.argv(mode, **opts)), timeout_s=30,
                                    env=MappingProxyType({"TMPDIR": str(fake.etmp)})))


def test_a_stop_longer_than_the_grace_warns_and_leaves_no_shm(fake: Fake, fresh_grace: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAYOUT_LOCK_DIR", str(fake.locks))
    before = fake.snapshot()
    dep = _dep(fake, "replay,shm,slow-stop", scale=0.01, stop_s=4)
    report = launch_deployment(dep, None, engine=ENGINES[dep.engine].launch,
                               log_dir=fake.tmp / "logs", stop_when="ready", grace_s=1)
    names = fake.shm()
    assert names, "the fake made no shared memory"
    assert report.kv_tokens is not None
    assert report.finding.status is Status.WARN, report.finding.message
    assert "did not stop within its 1 s grace" in report.finding.message
    assert report.finding.data["escalated"] is True
    assert sorted(report.finding.data["cleaned"]) == sorted(f"/dev/shm/{n}" for n in names)
    assert fake.alive() == {}
    assert before.leaks() == []


# ------------------------------------------------------------------------------------------------
# Fault run, item 1: cleanup deleted a user's file in /dev/shm that the engine only used (a GGUF model
# kept there for speed); a segment the tree made and closed without mapping is named in the log
# ------------------------------------------------------------------------------------------------
@pytest.fixture
def users_file() -> Iterator[Path]:
    path = Path("/dev/shm") / f"gpulayout-test-model-{os.getpid()}-{time.monotonic_ns()}.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 4092)
    yield path
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


@pytest.mark.parametrize("stop", ["graceful", "kill"])
def test_a_file_the_engine_only_uses_in_dev_shm_survives_and_what_it_made_goes(
        fake: Fake, users_file: Path, stop: str, fresh_grace: None) -> None:
    before = fake.snapshot()
    # the graceful stop lasts long enough for the launcher to read the tree's maps (every second)
    mode = "replay,shm,shm-closed,use-shm," + ("ignore-term" if stop == "kill" else "slow-stop")
    result = fake.run(fake.argv(mode, scale=0.01, use_shm=users_file.name, stop_s=1.5), stop_when="ready",
                      grace_s=1 if stop == "kill" else 5)
    made = fake.shm()
    assert len(made) == 3, f"the fake did not make its segments: {made}"
    assert result.escalated is (stop == "kill")
    assert users_file.is_file(), "the launch deleted a file that was in /dev/shm before it"
    assert users_file.read_bytes()[:4] == b"GGUF"
    assert f"/dev/shm/{users_file.name}" not in result.cleaned
    if stop == "kill":   # no clean exit: the watchdog removes what the tree made and used, mapped or only
        # held open while it was made (seen as it appeared), and nothing else
        assert sorted(result.cleaned) == sorted(f"/dev/shm/{n}" for n in made)
    assert not [n for n in made if (Path("/dev/shm") / n).exists()], "a segment the tree made stayed behind"
    if stop == "graceful":
        assert before.leaks() == []


def test_a_segment_a_gone_worker_made_and_used_is_removed(fake: Fake) -> None:
    # made and mapped by a child that exits before the stop: nobody holds it at the end, but the watchdog
    # saw the tree hold it when it appeared (inotify), so it is the tree's (vLLM's sem.mp-* after TP 2)
    result = fake.run(fake.argv("replay,shm-child,ignore-term", scale=0.05), stop_when="ready", grace_s=0.5)
    made = [n for n in fake.shm() if "child" in n]
    assert made, "the fake's child made no segment"
    assert f"/dev/shm/{made[0]}" in result.cleaned
    assert not (Path("/dev/shm") / made[0]).exists()


@pytest.mark.parametrize("when", ["before", "during"])
def test_a_segment_under_an_engine_name_that_the_engine_never_used_is_not_removed(fake: Fake, when: str) -> None:
    # another program's multiprocessing segment (or a concurrent launch's), made before the launch or
    # while it runs: the name alone is no licence (side by side, two launches removed each other's)
    theirs = Path("/dev/shm") / f"psm_not_the_engines_{os.getpid()}_{when}"
    if when == "before":
        theirs.write_bytes(b"x")

    def during() -> None:  # once the engine runs (its pid file), so after the listing the launch takes
        deadline = time.monotonic() + 30
        while not list(fake.pids.glob("main-*.pid")) and time.monotonic() < deadline:
            time.sleep(0.01)
        theirs.write_bytes(b"x")

    timer = threading.Thread(target=during) if when == "during" else None
    opts = {"wait_for": theirs} if when == "during" else {}  # and the engine waits for it: before its stop
    try:
        if timer is not None:
            timer.start()
        result = fake.run(fake.argv("replay,shm,ignore-term", scale=0.05, **opts), stop_when="ready", grace_s=0.5)
        assert theirs.exists()
        assert str(theirs) not in result.cleaned
        if when == "during":  # new, unheld, engine-named: left, and the log says so
            assert f"held by no process, but not seen used by the engine): {theirs}" in \
                (fake.tmp / "engine.log").read_text()
    finally:
        if timer is not None:
            timer.join()
        theirs.unlink(missing_ok=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a file another user owns")
def test_as_root_a_segment_of_another_user_made_during_the_launch_is_not_removed(fake: Fake) -> None:
    from pytest_gpulayout.launch.watchdog import shm_listing, shm_to_remove

    before = shm_listing()
    theirs = Path("/dev/shm") / f"psm_other_user_{os.getpid()}"
    theirs.write_bytes(b"x")
    os.chown(theirs, 65534, 65534)
    try:
        assert theirs.name not in shm_to_remove({theirs.name}, before, set())[0]
        os.chown(theirs, 0, 0)   # the same file, ours: removable
        assert theirs.name in shm_to_remove({theirs.name}, before, set())[0]
        assert shm_to_remove({theirs.name}, None, set()) == ([], [])   # no listing before: nothing at all
    finally:
        theirs.unlink(missing_ok=True)


def test_the_grace_grows_with_the_stops_it_measured(fake: Fake, fresh_grace: None) -> None:
    # first stop: 1.2 s of shutdown against 1 s of grace -> SIGKILL; the next one waits longer and is clean
    first = fake.run(fake.argv("replay,slow-stop", scale=0.01, stop_s=1.2), grace_s=1, stop_when="ready")
    assert first.escalated and first.grace_s == 1
    second = fake.run(fake.argv("replay,slow-stop", scale=0.01, stop_s=1.2), grace_s=1, stop_when="ready",
                      log_path=fake.tmp / "engine2.log")
    assert second.grace_s is not None and second.grace_s >= 1.5
    assert not second.escalated and second.returncode == 0
    assert "fake engine: stopped" in (fake.tmp / "engine2.log").read_text()


# ------------------------------------------------------------------------------------------------
# Case 4: locks keyed by the machine source's UUIDs let two descriptions of GPU 0 launch together
# ------------------------------------------------------------------------------------------------
def test_two_descriptions_of_gpu0_never_launch_together(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAYOUT_LOCK_DIR", str(fake.locks))
    machines = [Machine(gpus=(Gpu(0, uuid="GPU-from-a-preset"),), source="preset:a"),
                Machine(gpus=(Gpu(0, uuid="GPU-from-a-snapshot"),), source="snapshot:b.json")]
    dep = _dep(fake, "replay", scale=0.05)
    results: list[LaunchResult | None] = [None, None]

    def run(i: int) -> None:
        r = launch_deployment(dep, None, engine=ENGINES[dep.engine].launch,
                              machine=machines[i], log_dir=fake.tmp / f"logs{i}", stop_when="ready")
        results[i] = r.result

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    a, b = results
    assert a is not None and b is not None
    first, second = sorted((a, b), key=lambda r: r.started_at)
    assert second.started_at >= first.ended_at, "both launched on GPU 0 at once"


# ------------------------------------------------------------------------------------------------
# Case 6: the lock wait had no limit and no message
# ------------------------------------------------------------------------------------------------
HOLDER = textwrap.dedent("""
    import fcntl, os, signal, sys
    os.makedirs(os.path.dirname(sys.argv[1]), mode=0o700, exist_ok=True)
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0); os.write(fd, b"%d\\n" % os.getpid())
    print("held", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)   # a launcher stopped with Ctrl-Z, holding its GPU
""")


def _launch_in_thread(fn: object, limit_s: float) -> tuple[BaseException | None, float]:
    box: list[BaseException | None] = [None]

    def body() -> None:
        try:
            fn()  # type: ignore[operator]
        except BaseException as err:
            box[0] = err

    t0 = time.monotonic()
    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(limit_s)
    assert not t.is_alive(), f"the launch was still waiting for its GPU lock after {limit_s} s"
    return box[0], time.monotonic() - t0


def test_a_stopped_lock_holder_is_named_and_waited_for_within_the_timeout(
        fake: Fake, capfd: pytest.CaptureFixture[str]) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(fake.locks / "index-0.lock")],
                              stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        err, took = _launch_in_thread(lambda: fake.run(fake.argv("replay"), gpus=["index-0"], timeout_s=30,
                                                          lock_timeout_s=2), 15)
        assert isinstance(err, LaunchError), err
        assert f"GPU 0 is still held by pid {holder.pid}" in str(err)
        assert took < 8
        assert f"waiting for GPU 0 held by pid {holder.pid}" in capfd.readouterr().err
        assert fake.processes() == {}  # the engine was never started
    finally:
        holder.kill()
        holder.wait()


def test_a_fifo_at_the_lock_path_is_refused_not_waited_on(fake: Fake) -> None:
    fake.locks.mkdir(mode=0o700)
    fifo = fake.locks / "index-0.lock"
    os.mkfifo(fifo)
    try:
        err, _ = _launch_in_thread(lambda: fake.run(fake.argv("replay"), gpus=["index-0"], timeout_s=5), 10)
    finally:
        with contextlib.suppress(OSError):  # an open() blocked on the FIFO waits for a writer: be one
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert isinstance(err, LaunchError) and "not a regular file" in str(err)


def test_lock_files_are_private_to_the_user(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPULAYOUT_LOCK_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(fake.tmp))
    result = fake.run(fake.argv("replay", scale=0.01), gpus=["index-0"], lock_dir=None)
    assert result.stopped_by == "kv"
    dirs = [p for p in fake.tmp.iterdir() if p.name.startswith("pytest-gpulayout-locks")]
    assert len(dirs) == 1
    assert stat.S_IMODE(dirs[0].stat().st_mode) == 0o700
    lock = dirs[0] / "index-0.lock"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    assert lock.read_text().split() == [str(os.getpid())]  # the holder's pid, for the next one's message


# ------------------------------------------------------------------------------------------------
# Case 7: a launcher started with SIGINT ignored passed that on, so every SIGINT stop ended in SIGKILL
# ------------------------------------------------------------------------------------------------
IGNORING_DRIVER = RESET_SIGNALS + textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # a job started with `&`
    from pytest_gpulayout.engines.registry import LOG_GRAMMARS
    from pytest_gpulayout.launch.launcher import launch
    r = launch(sys.argv[2:], env=dict(os.environ), grammars=LOG_GRAMMARS, timeout_s=60, grace_s=5, stop_when="ready",
               stop_signal=signal.SIGINT, log_path=Path(sys.argv[1]))
    print("returncode", r.returncode, "escalated", getattr(r, "escalated", None), flush=True)
""")


def test_an_engine_gets_sigint_at_its_default_even_from_a_background_job(fake: Fake) -> None:
    log = fake.tmp / "bg.log"
    done = subprocess.run([sys.executable, "-c", IGNORING_DRIVER, str(log), *fake.argv("replay,default-signals",
                                                                                        scale=0.01)],
                          capture_output=True, text=True, timeout=60, env={**fake.env(), "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "escalated False" in done.stdout, done.stdout
    assert "fake engine: KeyboardInterrupt" in log.read_text()   # the Ctrl-C reached it, no SIGKILL needed
    assert fake.alive() == {}


# ------------------------------------------------------------------------------------------------
# Case 8: a planted symlink in a shared log dir was followed; default permissions; 0-byte logs
# ------------------------------------------------------------------------------------------------
def test_a_planted_link_at_the_log_path_is_refused(fake: Fake) -> None:
    shared = fake.tmp / "shared-logs"
    shared.mkdir()
    precious = fake.tmp / "precious"
    precious.write_text("keep me\n")
    (shared / "engine.log").symlink_to(precious)
    with pytest.raises(LaunchError, match="already exists"):
        fake.run(fake.argv("replay"), log_path=shared / "engine.log")
    assert precious.read_text() == "keep me\n"
    assert fake.processes() == {}


def test_the_log_is_private_and_complete(fake: Fake) -> None:
    result = fake.run(fake.argv("replay", scale=0.01))
    assert result.log_path is not None
    assert stat.S_IMODE(result.log_path.stat().st_mode) == 0o600
    assert "KV cache size" in result.log_path.read_text()


def test_a_missing_command_leaves_no_log(fake: Fake) -> None:
    log = fake.tmp / "logs" / "engine.log"
    before = fake.snapshot()
    with pytest.raises(LaunchError, match="no-such-engine-binary.*not found"):
        fake.run(["no-such-engine-binary", "serve", "x"], log_path=log)
    assert not log.exists()
    assert before.leaks() == []



# ------------------------------------------------------------------------------------------------
# Issue 24 item 3: a NUL byte reached Popen, which raised ValueError: a traceback, and the private
# TMPDIR and the cgroup made for the launch were left behind every time
# ------------------------------------------------------------------------------------------------
def _own_cgroups() -> list[Path]:
    base = launcher._own_cgroup_dir()
    return [] if base is None else list(base.glob(f"gpulayout-{os.getpid()}-*"))


@pytest.mark.parametrize("where", ["argv", "env"])
def test_a_nul_byte_is_a_launch_error_and_leaves_nothing(fake: Fake, where: str) -> None:
    log = fake.tmp / "logs" / "engine.log"
    argv, env = fake.argv("replay", scale=0.01), fake.env()
    if where == "argv":
        argv.append("--max-num-seqs=1\0")
    else:
        env["EVIL"] = "a\0b"
    before = fake.snapshot()
    with pytest.raises(LaunchError, match="null byte"):
        fake.run(argv, env=env, log_path=log)
    assert list(fake.etmp.iterdir()) == []          # the private TMPDIR went
    assert _own_cgroups() == []                     # and the cgroup made for the launch
    assert not log.exists()
    assert before.leaks() == []
    assert fake.run(fake.argv("replay", scale=0.01), log_path=fake.tmp / "again.log").stopped_by == "kv"


def test_whatever_the_spawn_raises_what_the_launch_made_is_removed(
        fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real = launcher.make_cgroup

    def recording() -> str:
        made.append(real())
        return made[-1]

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("spawn broke")

    monkeypatch.setattr(launcher, "make_cgroup", recording)
    monkeypatch.setattr(launcher.subprocess, "Popen", broken)
    fds = set(os.listdir("/proc/self/fd"))
    with pytest.raises(RuntimeError, match="spawn broke"):
        fake.run(fake.argv("replay", scale=0.01))
    assert list(fake.etmp.iterdir()) == []
    assert made and all(not path or not Path(path).exists() for path in made)
    assert set(os.listdir("/proc/self/fd")) <= fds  # the pipes to the watchdog were closed too

# ------------------------------------------------------------------------------------------------
# Case 1 (the launcher's side; the real engine is in test_containment_engine.py): an interrupt stops
# with the launch's own stop signal and a real grace, a second one escalates, the log is complete
# ------------------------------------------------------------------------------------------------
# every signal a test sends acts as in a terminal, whatever started pytest: a background job (`&`) ignores
# SIGINT, `nohup` SIGHUP, and the launcher keeps an ignored signal ignored (Case 7; round 4, item 6)
DRIVER = RESET_SIGNALS + textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from pytest_gpulayout.engines.registry import LOG_GRAMMARS
    from pytest_gpulayout.launch.launcher import launch
    print("launching", flush=True)
    launch(sys.argv[2:], env=dict(os.environ), grammars=LOG_GRAMMARS, timeout_s=120, grace_s=8, stop_when="ready",
           stop_signal=signal.SIGINT, log_path=Path(sys.argv[1]))
    print("launch returned", flush=True)
""")


def _driver(fake: Fake, mode: str, **opts: object) -> tuple[subprocess.Popen[bytes], Path]:
    log = fake.tmp / "driver.log"
    argv = fake.argv(mode, **opts)
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(log), *argv], start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env={**fake.env(), "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 30
    while not fake.shm() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake.shm(), "the fake engine did not start"
    time.sleep(0.5)
    return driver, log


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_an_interrupt_stops_the_engine_its_own_way_with_a_real_grace(fake: Fake, sig: signal.Signals) -> None:
    before = fake.snapshot()
    driver, log = _driver(fake, "never-reports,shm,slow-stop", stop_s=3)
    try:
        t0 = time.monotonic()
        driver.send_signal(sig)
        out, _ = driver.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if driver.poll() is None:
            driver.kill()
    assert b"launch returned" not in out
    assert driver.returncode != 0
    text = log.read_text()
    assert f"stopping on signal {int(signal.SIGINT)}" in text   # the launch's stop signal, not ours
    assert "fake engine: stopped" in text                        # its whole shutdown, in the log
    assert took >= 3                                             # the grace was not cut to 2 s
    assert fake.alive() == {}
    assert before.leaks() == []


def test_a_second_interrupt_escalates(fake: Fake) -> None:
    before = fake.snapshot()
    driver, log = _driver(fake, "never-reports,shm,slow-stop", stop_s=30)
    try:
        t0 = time.monotonic()
        driver.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        driver.send_signal(signal.SIGTERM)
        driver.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if driver.poll() is None:
            driver.kill()
    assert took < 6
    text = log.read_text()
    assert "fake engine: stopping on signal 2" in text
    # said as what it was: the stop began with SIGINT and a second interrupt made it a SIGKILL (round 4,
    # item 5: the tree, gone by that SIGKILL, read as a graceful stop)
    assert "stop: SIGINT, grace 8 s, then SIGKILL (a second interrupt)" in text.splitlines()[-1], text[-500:]
    assert fake.alive() == {}
    assert before.leaks() == []   # the killed fake's shm was unlinked for it


# ------------------------------------------------------------------------------------------------
# Case 2 (the launcher's side): SIGKILL of the launching process leaves nothing
# ------------------------------------------------------------------------------------------------
def test_a_sigkilled_launcher_leaves_nothing(fake: Fake) -> None:
    before = replace(fake.snapshot(), lock_keys=("index-0",), lock_dir=fake.locks)
    driver_src = DRIVER.replace("timeout_s=120,",
                                f"timeout_s=120, gpus=['index-0'], lock_dir=Path({str(fake.locks)!r}),")
    log = fake.tmp / "driver.log"
    driver = subprocess.Popen([sys.executable, "-c", driver_src, str(log),
                               *fake.argv("never-reports,shm,fork,daemon")], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**fake.env(), "PYTHONPATH": str(REPO)})
    before.launchers.add(driver.pid)   # its cgroup is this launch's
    try:
        deadline = time.monotonic() + 30
        while len(fake.processes()) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(fake.processes()) >= {"main", "child", "escaped", "daemon"}
        time.sleep(0.3)
        driver.kill()
        driver.wait()
        # the watchdog's (or guard's) own budget, with nobody left to wait for it: up to 10 s for the
        # SIGKILL, 10 s for its cgroup, and a look at every process's maps (seen past 10 s at load 15)
        leaks = before.wait_clean(30)
        assert leaks == []
        assert fake.alive() == {}
    finally:
        if driver.poll() is None:
            driver.kill()


# ------------------------------------------------------------------------------------------------
# Issue 24 item 2: without a cgroup, a killed watchdog let the processes that left the group and the
# session escape: the launcher's fallback walked the tree it had seen and missed those it had not
# ------------------------------------------------------------------------------------------------
def _kill_the_watchdog_when(fake: Fake, roles: set[str], limit_s: float = 30, *,
                            guard: bool = False) -> threading.Thread:
    """A thread that SIGKILLs the launch's watchdog (the engine's parent) as soon as every role in ``roles`` has
    written its pid file; with ``guard`` its guard too (the session leader of the engine's main process), at
    the same moment, so that the launcher is left to finish alone."""

    def body() -> None:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if roles <= set(fake.processes()):
                main = next(fake.pids.glob("main-*.pid")).read_text().split()
                stat = Path(f"/proc/{main[0]}/stat").read_bytes()
                watchdog = int(stat[stat.rindex(b")") + 2:].split()[1])
                for pid in (watchdog, int(main[2])) if guard else (watchdog,):
                    os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.01)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("cgroup", [True, False], ids=["cgroup-if-allowed", "subreaper-only"])
def test_a_killed_watchdog_leaves_nothing_the_launcher_finishes_alone(fake: Fake, cgroup: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launcher, "USE_CGROUP", cgroup, raising=False)
    before = replace(fake.snapshot(), lock_keys=("index-0",), lock_dir=fake.locks)
    roles = {"main", "child", "escaped", "escaped-grandchild", "daemon"}
    killer = _kill_the_watchdog_when(fake, roles, guard=True)
    # the launcher looks at the tree once at the start, never again: what left the group and the
    # session after that is found by the TMPDIR it inherited
    result = fake.run(fake.argv("never-reports,shm,fork,daemon"), scan_interval_s=600, gpus=["index-0"])
    killer.join()
    assert roles <= set(fake.processes()), fake.processes()
    assert fake.alive() == {}, f"escaped: {fake.alive()}"
    assert result.leftover_pids == ()
    assert before.wait_clean(5) == []


# ------------------------------------------------------------------------------------------------
# Issue 24 item 9: the engine's process group was signalled by the engine's pid after the engine was
# reaped (a reused pid names another group), and the GPU lock was released although processes
# survived SIGKILL
# ------------------------------------------------------------------------------------------------
def _state(pid: int) -> str:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return "gone"
    return data[data.rindex(b")") + 2:].split()[0].decode()


def test_the_engines_pid_names_its_group_until_the_tree_is_gone(fake: Fake) -> None:
    # the engine exits at once and leaves its group's children running (they ignore SIGTERM): while the
    # tree is being stopped, the group's id must stay the engine's (an unreaped zombie), never free for reuse
    seen: list[str] = []

    def watch() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "child" not in fake.processes():
            time.sleep(0.01)
        main = fake.processes().get("main")
        while main is not None and time.monotonic() < deadline and "child" in fake.alive():
            seen.append(_state(main))
            time.sleep(0.02)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    result = fake.run(fake.argv("never-reports,exits-early,fork", scale=0.01, exit_code=3), grace_s=1)
    t.join()
    assert result.stopped_by == "exit" and result.returncode == 3
    after_exit = seen[seen.index("Z"):] if "Z" in seen else seen[-1:]
    assert after_exit and set(after_exit) == {"Z"}, f"the engine's pid was freed while its group lived: {seen[-5:]}"
    assert _state(fake.processes()["main"]) == "gone"   # reaped in the end
    assert fake.alive() == {} and result.leftover_pids == ()


HOLDING_WATCHDOG = textwrap.dedent("""
    import fcntl, os, signal, subprocess, sys
    sys.path.insert(0, sys.argv[2])
    import watchdog
    watchdog.KILL_WAIT_S = 0.5
    lock = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    survivor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    real_kill = os.kill
    def kill(pid, sig):   # it "survives SIGKILL", as a process stuck in uninterruptible sleep does
        if not (pid == survivor.pid and sig == signal.SIGKILL):
            real_kill(pid, sig)
    watchdog.os.kill = kill
    ctl_r, ctl_w = os.pipe()
    st_r, st_w = os.pipe()
    os.close(ctl_w)   # the launcher is gone
    dog = watchdog.Watchdog(ctl_r, st_w, "", "", [lock])
    print("survivor", survivor.pid, flush=True)
    dog.finish()
    print("finished", flush=True)
    signal.pause()
""")


def _lock_free(path: Path) -> bool:
    import fcntl

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_the_watchdog_holds_the_gpu_lock_while_a_survivor_of_sigkill_lives(tmp_path: Path) -> None:
    lock = tmp_path / "index-0.lock"
    here = str(REPO / "pytest_gpulayout" / "launch")
    dog = subprocess.Popen([sys.executable, "-c", HOLDING_WATCHDOG, str(lock), here],
                           stdout=subprocess.PIPE, text=True)
    survivor = -1
    try:
        assert dog.stdout is not None
        survivor = int(dog.stdout.readline().split()[1])
        time.sleep(2.0)   # its kill loop (0.5 s) is long over
        assert pid_alive(survivor)
        assert not _lock_free(lock), "the GPU lock was released while a process of the tree still ran"
        os.kill(survivor, signal.SIGKILL)
        assert dog.stdout.readline().strip() == "finished"
        assert _lock_free(lock)
    finally:
        with contextlib.suppress(OSError):
            os.kill(survivor, signal.SIGKILL)
        dog.kill()
        dog.wait()


def test_without_its_watchdog_the_launcher_keeps_the_lock_while_a_survivor_lives(
        fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gpulayout.launch import proctree

    monkeypatch.setattr(launcher, "USE_CGROUP", False, raising=False)
    real = proctree.signal_checked
    spared: list[int] = []

    def signal_checked(pid: int, start: int, sig: int) -> bool:
        if sig == signal.SIGKILL and fake.processes().get("child") == pid:   # it "survives SIGKILL"
            spared.append(pid)
            return False
        return real(pid, start, sig)

    monkeypatch.setattr(proctree, "signal_checked", signal_checked)
    killer = _kill_the_watchdog_when(fake, {"main", "child", "escaped", "daemon"}, guard=True)
    result = fake.run(fake.argv("never-reports,fork,daemon"), gpus=["index-0"])
    killer.join()
    child = fake.processes()["child"]
    try:
        assert spared and result.leftover_pids == (child,)
        environ = Path(f"/proc/{child}/environ").read_bytes().decode(errors="replace").split("\0")
        tmpdir = dict(kv.split("=", 1) for kv in environ if "=" in kv).get("TMPDIR", "")
        assert "gpulayout-" in tmpdir and os.path.isdir(tmpdir)  # the launch's own, kept while it may be used
        time.sleep(0.5)
        assert not _lock_free(fake.locks / "index-0.lock"), "the GPU lock was released beside a survivor"
        os.kill(child, signal.SIGCONT)
        os.kill(child, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while (not _lock_free(fake.locks / "index-0.lock") or os.path.isdir(tmpdir)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _lock_free(fake.locks / "index-0.lock")
        assert not os.path.isdir(tmpdir), "the launch's TMPDIR outlived the survivor"
    finally:
        with contextlib.suppress(OSError):
            os.kill(child, signal.SIGKILL)


# ------------------------------------------------------------------------------------------------
# Issue 24 item 7 (rest): the engine's own stop signal, SIGKILL said in the verdict, no compounding
# grace, Ctrl-Z stops the engine with the launcher, a killed watchdog said as such
# ------------------------------------------------------------------------------------------------
def test_a_launch_sends_the_stop_signal_its_engine_honours(fake: Fake, fresh_grace: None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAYOUT_LOCK_DIR", str(fake.locks))
    dep = _dep(fake, "replay", scale=0.01)
    engine = ENGINES[dep.engine]
    assert engine.launch.stop_signal == signal.SIGTERM   # vLLM's API server does not end on SIGINT before ready
    report = launch_deployment(dep, None, engine=engine.launch, log_dir=fake.tmp / "logs", stop_when="ready")
    assert report.log_path is not None
    text = report.log_path.read_text()
    assert f"fake engine: stopping on signal {int(engine.launch.stop_signal)}" in text
    assert f"stop: {signal.Signals(engine.launch.stop_signal).name}, grace" in text


def test_the_verdict_says_when_sigkill_was_needed(fake: Fake, fresh_grace: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAYOUT_LOCK_DIR", str(fake.locks))
    dep = _dep(fake, "never-reports,ignore-term", scale=0.01)
    dep = replace(dep, launch=replace(dep.launch, timeout_s=2))
    report = launch_deployment(dep, None, engine=ENGINES[dep.engine].launch, log_dir=fake.tmp / "logs", grace_s=1)
    assert report.finding.status is Status.FAIL
    assert report.finding.data["escalated"] is True
    assert "did not report its KV pool within 2 s" in report.finding.message
    assert "Its stop needed SIGKILL: the engine did not stop within its 1 s grace" in report.finding.message


def test_stops_that_need_sigkill_do_not_compound_the_grace(fake: Fake, fresh_grace: None) -> None:
    graces = []
    for i in range(3):
        r = fake.run(fake.argv("replay,ignore-term", scale=0.01), grace_s=1, stop_when="ready",
                     log_path=fake.tmp / f"engine{i}.log")
        assert r.escalated
        graces.append(r.grace_s)
    assert graces == [1, 3, 3]   # was 1, 3, 9 (and 10 -> 30 -> 90 s with the default grace)
    assert launcher.adapted_grace(10, [20, 60, 180]) == 30


def test_a_killed_watchdog_is_said_in_the_verdict(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAYOUT_LOCK_DIR", str(fake.locks))
    dep = _dep(fake, "never-reports,fork")
    killer = _kill_the_watchdog_when(fake, {"main", "child", "escaped"})
    report = launch_deployment(dep, None, engine=ENGINES[dep.engine].launch, log_dir=fake.tmp / "logs")
    killer.join()
    result = report.result
    assert result is not None and result.stopped_by == "watchdog"
    assert result.watchdog_returncode == -signal.SIGKILL and result.returncode is None
    assert report.finding.status is Status.FAIL
    assert "watchdog was killed from outside (by SIGKILL)" in report.finding.message
    assert "exited with code" not in report.finding.message
    assert fake.alive() == {}


def test_ctrl_z_stops_the_engine_with_the_launcher_and_sigcont_resumes_both(fake: Fake) -> None:
    log = fake.tmp / "driver.log"
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(log), *fake.argv("never-reports,shm,fork")],
                              process_group=0, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**fake.env(), "PYTHONPATH": str(REPO)})

    def states() -> dict[str, str]:
        return {role: _state(pid) for role, pid in fake.processes().items()}

    def wait_for(want: str, limit_s: float = 10) -> dict[str, str]:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            now = states()
            if now and all(s == want for s in now.values()):
                return now
            time.sleep(0.05)
        return states()

    try:
        deadline = time.monotonic() + 30
        while not {"main", "child", "escaped", "escaped-grandchild"} <= set(fake.processes()) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        driver.send_signal(signal.SIGTSTP)   # what Ctrl-Z in its terminal sends
        assert set(wait_for("T").values()) == {"T"}, "the engine went on while its launcher was stopped"
        assert _state(driver.pid) == "T"
        driver.send_signal(signal.SIGCONT)   # fg
        assert "T" not in set(wait_for("S").values()), "the engine stayed stopped after the launcher went on"
        driver.send_signal(signal.SIGTERM)
        driver.wait(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert fake.alive() == {}


# ------------------------------------------------------------------------------------------------
# Issue 24 item 5: one GPU had a lock name per machine source (a live probe's UUID, a snapshot's or
# preset's index-0, a UUID in CUDA_VISIBLE_DEVICES as index-GPU-...), and llama.cpp without gpus took none
# ------------------------------------------------------------------------------------------------
def test_one_gpu_has_one_lock_name_whatever_describes_the_machine() -> None:
    from pytest_gpulayout.launch.argv import gpu_plan

    real = "GPU-6c5a3f1e-0000-4000-8000-000000000000"
    live = Machine(gpus=(Gpu(0, uuid=real),), source="nvml")   # NVML at launch time
    dep = Deployment(name="d", model="m", gpus=(0,))
    keys = {
        "live probe": gpu_plan(dep, live, None).lock_keys,
        "preset": gpu_plan(dep, Machine(gpus=(Gpu(0, uuid="GPU-from-a-preset"),), source="preset:a"), None,
                           live=live).lock_keys,
        "snapshot": gpu_plan(dep, Machine(gpus=(Gpu(0),), source="snapshot:b.json"), None, live=live).lock_keys,
        "no machine": gpu_plan(dep, None, None, live=live).lock_keys,
        "UUID in CUDA_VISIBLE_DEVICES": gpu_plan(dep, None, real, live=live).lock_keys,
    }
    assert set(keys.values()) == {(real,)}, keys
    # without NVML a UUID entry is named by the UUID (it was "index-GPU-..."), an index by the index
    assert gpu_plan(dep, None, real, live=None).lock_keys == (real,)
    assert gpu_plan(dep, Machine(gpus=(Gpu(0, uuid="GPU-from-a-preset"),), source="preset:a"), None,
                    live=None).lock_keys == ("index-0",)


def test_llamacpp_without_gpus_locks_what_it_sees(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gpulayout.engines.llamacpp import launch as llamacpp_launch

    seen: list[tuple[str, ...]] = []

    def recording(argv: list[str], **kw: object) -> LaunchResult:
        seen.append(tuple(kw["gpus"]))  # type: ignore[arg-type,call-overload]
        raise LaunchError("recorded")

    monkeypatch.setattr(llamacpp_launch, "launch", recording)
    monkeypatch.setattr("pytest_gpulayout.launch.argv.live_machine", lambda: None)
    dep = Deployment(name="l", model="m.gguf", engine="llamacpp", base_dir=fake.tmp,
                     launch=Launch(command=(sys.executable, str(FAKE))))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    llamacpp_launch.launch_llamacpp(dep, None, machine=None, log_path=fake.tmp / "l.log")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    llamacpp_launch.launch_llamacpp(dep, None, machine=None, log_path=fake.tmp / "l2.log")
    assert seen == [("host",), ("index-1", "index-3")]


# ------------------------------------------------------------------------------------------------
# Issue 24 item 6: the wait for a GPU ate the engine's timeout (and a wait as long as it failed the
# check), it was silent under pytest -n 2, and the verdict did not say it
# ------------------------------------------------------------------------------------------------
def _hold_lock(path: Path, seconds: float) -> threading.Thread:
    import fcntl

    path.parent.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    t = threading.Timer(seconds, os.close, (fd,))
    t.start()
    return t


def test_a_wait_for_the_gpu_is_reported_and_not_the_engines_time(fake: Fake,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAYOUT_LOCK_DIR", str(fake.locks))
    monkeypatch.setattr("pytest_gpulayout.launch.argv.live_machine", lambda: None)
    dep = _dep(fake, "replay", scale=0.01)
    dep = replace(dep, launch=replace(dep.launch, timeout_s=4))
    phases: list[str] = []
    holder = _hold_lock(fake.locks / "index-0.lock", 5)   # longer than the engine's whole timeout
    try:
        report = launch_deployment(dep, None, engine=ENGINES[dep.engine].launch, log_dir=fake.tmp / "logs",
                                   progress=lambda phase, *rest: phases.append(phase))
    finally:
        holder.join()
    assert report.result is not None and report.result.stopped_by == "kv", report.finding.message
    assert report.result.lock_wait_s >= 4.5
    assert any(p.startswith(f"waiting for GPU 0 held by pid {os.getpid()}") for p in phases), phases
    assert phases.index(next(p for p in phases if p.startswith("waiting"))) < phases.index("starting")
    assert report.finding.status is Status.PASS
    assert "waited 5 s for its GPUs" in report.finding.message, report.finding.message
    assert report.finding.data["lock_wait_s"] >= 4.5


def test_an_xdist_worker_says_its_waits_for_gpus_on_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_gpulayout.launch.progress import pytest_reporter

    class Plugins:
        def get_plugin(self, name: str) -> None:
            return None

    class WorkerConfig:
        workerinput = {"workerid": "gw1"}
        pluginmanager = Plugins()

        def get_verbosity(self) -> int:
            return 0

    reporter = pytest_reporter(WorkerConfig())
    assert reporter is not None, "an xdist worker's waits were silent"
    report = reporter.for_launch("qwen-tp2")
    report("waiting for GPU 0 held by pid 4242 (up to 660 s)", 0.0, 660.0, None)
    report("starting", 3.0, 600.0, None)   # its phases stay off the controller's line of dots
    report("cleaned", 9.0, 600.0, None)
    err = capsys.readouterr().err
    assert err == "[gw1] gpulayout: startup qwen-tp2: waiting for GPU 0 held by pid 4242 (up to 660 s), 0 s of 660 s\n"
