"""A launch says what happened to it (reliability round 4, item 5).

- a log cut short by a full disk passed, pointing at a log with no KV line: now it warns that the log is
  cut short, where and why (here the kernel refuses the write as a full disk does: a file size limit);
- after SIGTERM or SIGHUP the folder holding the failed launch's logs was not named (only Ctrl-C's
  ``KeyboardInterrupt`` reached the line that names it);
- an ``LD_PRELOAD`` in ``launch.env`` was loaded into the watchdog too: the watchdog and its guard now
  run with a clean environment, the engine with its own;
- a 300 MB log took 48 s of a 60 s timeout to read: the launcher now reads a chunk of lines at a time,
  and a block where nothing can matter costs one search.

(The second Ctrl-C's SIGKILL said as a plain stop is ``test_containment.py``'s
``test_a_second_interrupt_escalates``.)
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from drivers import RESET_SIGNALS, reset_signals

from pytest_gpulayout.engines.registry import LOG_GRAMMARS
from pytest_gpulayout.launch.launcher import launch
from pytest_gpulayout.launch.logparse import LogWatcher, parse_log

HERE = Path(__file__).parents[1]
REPO = HERE.parent
FAKE = HERE / "fakes" / "fake_engine.py"
LOGS = HERE / "data" / "logs"
TINY_LOG = LOGS / "vllm-cpu" / "vllm-tiny.log"
TINY_DIR = HERE / "data" / "models" / "tiny-llama"


def _fake(pids: Path, mode: str, *extra: str) -> list[str]:
    return [sys.executable, str(FAKE), "--fake-mode", mode, "--fake-log", str(TINY_LOG), "--fake-pid-dir", str(pids),
            "--fake-scale", "0.001", *extra]


# ------------------------------------------------------------------------------------------------
# A log cut short by a failed write
# ------------------------------------------------------------------------------------------------
FULL_DISK_DRIVER = RESET_SIGNALS + textwrap.dedent("""
    import json, resource, sys
    from pathlib import Path
    from types import MappingProxyType
    from pytest_gpulayout.deployment import Deployment, Launch
    from pytest_gpulayout.engines.registry import ENGINES
    from pytest_gpulayout.launch.startup import launch_deployment
    def fill_the_disk(phase, *_):
        # once the engine runs, the kernel refuses this process's writes past 2,000 bytes of a file, as a
        # disk that fills up refuses them
        if phase == "starting":
            resource.setrlimit(resource.RLIMIT_FSIZE, (2000, resource.RLIM_INFINITY))
    spec = json.loads(sys.argv[1])
    dep = Deployment(name="tiny", model=spec["model"], max_model_len=512, gpus=(0,),
                     launch=Launch(command=tuple(spec["command"]), timeout_s=60, env=MappingProxyType({})))
    report = launch_deployment(dep, None, engine=ENGINES[dep.engine].launch, log_dir=Path(spec["logs"]),
                               progress=fill_the_disk)
    print(json.dumps({"status": report.finding.status.value, "message": report.finding.message,
                      "data": report.finding.data}))
""")


def test_a_log_cut_short_by_a_failed_write_is_said_not_passed_silently(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    spec = {"model": str(tmp_path), "command": _fake(pids, "replay"), "logs": str(tmp_path / "logs")}
    done = subprocess.run([sys.executable, "-c", FULL_DISK_DRIVER, json.dumps(spec)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO),
                                                       "GPULAYOUT_LOCK_DIR": str(tmp_path / "locks")})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    (log,) = (tmp_path / "logs").glob("startup-*.log")
    assert "KV cache size" not in log.read_text()            # the log really lacks the KV line
    assert out["data"]["kv_tokens"] == 524288                 # which the launch read as it streamed
    assert out["status"] == "warn", out["message"]
    assert "its log is cut short: writing it failed after 2,000 bytes (File too large)" in out["message"]
    assert str(log) in out["message"]
    assert out["data"]["log_cut"].startswith("its log is cut short")


# ------------------------------------------------------------------------------------------------
# SIGTERM and SIGHUP name the folder of the logs, as Ctrl-C does
# ------------------------------------------------------------------------------------------------
def _manifest(root: Path) -> Path:
    (root / "pids").mkdir()
    shutil.copytree(TINY_DIR, root / "tiny-llama")
    (root / "machine.yaml").write_text((HERE / "data" / "snapshots" / "two-l4.yaml").read_text())
    command = json.dumps(_fake(root / "pids", "never-reports"))
    path = root / "gpulayout.yaml"
    path.write_text(f"version: 1\nmachine: machine.yaml\ndeployments:\n  slow:\n    model: ./tiny-llama\n"
                    f"    max_model_len: 512\n    launch:\n      command: {command}\n      timeout_s: 60\n")
    return path


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_that_ends_the_run_names_the_folder_of_the_kept_logs(tmp_path: Path, sig: signal.Signals) -> None:
    manifest = _manifest(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPULAYOUT_LOCK_DIR": str(tmp_path / "locks"), "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "pytest_gpulayout.cli", "check", str(manifest), "--launch",
                             "--json"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=reset_signals)
    try:
        deadline = time.monotonic() + 60
        while not list((tmp_path / "pids").glob("main-*.pid")) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (folder,) = tmp.glob("gpulayout-logs-*")
    assert [p.name for p in folder.iterdir()] == [next(folder.iterdir()).name]   # the interrupted launch's log
    assert "Traceback" not in err
    said = [line for line in err.splitlines() if str(folder) in line and "logs of the launches" in line]
    assert said, err


# ------------------------------------------------------------------------------------------------
# launch.env is the engine's: not the watchdog's, not its guard's
# ------------------------------------------------------------------------------------------------
def _preloadable() -> str:
    for lib in ("/lib/x86_64-linux-gnu/libanl.so.1", "/usr/lib/x86_64-linux-gnu/libanl.so.1",
                "/lib/aarch64-linux-gnu/libanl.so.1", "/usr/lib64/libanl.so.1", "/lib64/libanl.so.1"):
        if os.path.isfile(lib):
            return lib
    pytest.skip("no libanl.so.1 to preload")


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(kv.split("=", 1) for kv in raw.split("\0") if "=" in kv)


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2:].split()[1])


def test_launch_env_reaches_the_engine_and_not_its_watchdog(tmp_path: Path) -> None:
    lib = _preloadable()
    pids = tmp_path / "pids"
    pids.mkdir()
    seen: dict[str, object] = {}

    def look() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not list(pids.glob("main-*.pid")):
            time.sleep(0.02)
        main = int(next(pids.glob("main-*.pid")).read_text().split()[0])
        watchdog = _parent(main)
        guard = _parent(watchdog)
        seen.update(engine=_environ(main), watchdog=_environ(watchdog), guard=_environ(guard),
                    maps=Path(f"/proc/{watchdog}/maps").read_text() + Path(f"/proc/{guard}/maps").read_text(),
                    cmdline=Path(f"/proc/{watchdog}/cmdline").read_bytes())
        (tmp_path / "go").touch()

    looker = threading.Thread(target=look, daemon=True)
    looker.start()
    env = {**os.environ, "LD_PRELOAD": lib, "GPULAYOUT_TEST_SECRET": "s3cret", "TMPDIR": str(tmp_path)}
    result = launch(_fake(pids, "replay", "--fake-wait-for", str(tmp_path / "go")), env=env, grammars=LOG_GRAMMARS,
                    timeout_s=60, lock_dir=tmp_path / "locks")
    looker.join()
    assert result.stopped_by == "kv"
    assert b"watchdog.py" in seen["cmdline"]  # type: ignore[operator]
    engine, watchdog, guard = seen["engine"], seen["watchdog"], seen["guard"]
    assert isinstance(engine, dict) and isinstance(watchdog, dict) and isinstance(guard, dict)
    assert engine["LD_PRELOAD"] == lib and engine["GPULAYOUT_TEST_SECRET"] == "s3cret"
    for own in (watchdog, guard):
        assert "LD_PRELOAD" not in own and "GPULAYOUT_TEST_SECRET" not in own, own
        assert not [k for k in own if k not in ("LD_LIBRARY_PATH",)], own   # nothing but what Python needs
    assert lib not in str(seen["maps"]) and "libanl" not in str(seen["maps"])


# ------------------------------------------------------------------------------------------------
# A flood of output is read at a cost per block, not per line
# ------------------------------------------------------------------------------------------------
def test_a_100_mb_flood_before_the_pool_costs_the_launcher_little(tmp_path: Path) -> None:
    """The launcher's own CPU for 100 MB of noise before the pool line (the fake's ``flood``). The old
    per-line reading spent about 33 ms per MB here (300 MB: 10 s of CPU, 22 s to the pool on two shared
    cores; 48 s of a 60 s timeout in the fault run), the block reading about 9 ms."""
    pids = tmp_path / "pids"
    pids.mkdir()
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = launch(_fake(pids, "flood,replay", "--fake-flood-mb", "100"), env=dict(os.environ),
                    grammars=LOG_GRAMMARS, timeout_s=120, lock_dir=tmp_path / "locks", log_path=tmp_path / "e.log")
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert result.stopped_by == "kv" and result.log.kv_tokens == 524288
    assert result.lines > 700_000
    assert cpu < 2.0, f"{cpu:.1f} s of CPU for 100 MB of output"


@pytest.mark.parametrize("log", sorted(p for d in ("vllm", "sglang", "errors", "vllm-cpu", "multinode")
                                       for p in (LOGS / d).glob("*") if p.suffix in (".txt", ".log")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_lines_read_a_chunk_at_a_time_give_the_verdict_of_lines_read_one_by_one(log: Path) -> None:
    lines = log.read_text(errors="replace").splitlines()
    one = parse_log("\n".join(lines), LOG_GRAMMARS)
    for size in (1, 7, 1000):
        watcher = LogWatcher(LOG_GRAMMARS)
        for i in range(0, len(lines), size):
            watcher.feed_lines(lines[i:i + size])
        assert watcher.result() == one
        assert watcher.lines == len(lines)
