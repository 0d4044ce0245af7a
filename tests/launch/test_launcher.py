"""The launcher against a fake engine: every fault ends with a clear result and nothing left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from drivers import RESET_SIGNALS

from pytest_gpulayout.engines.registry import LOG_GRAMMARS
from pytest_gpulayout.engines.sglang.log import SGLANG_LOG
from pytest_gpulayout.errors import LaunchError
from pytest_gpulayout.launch.launcher import LaunchResult, free_port, gpu_locks, launch, pid_alive

HERE = Path(__file__).parents[1]
FAKE = HERE / "fakes" / "fake_engine.py"
LOGS = HERE / "data" / "logs"
TINY_LOG = LOGS / "vllm-cpu" / "vllm-tiny.log"
TINY = HERE / "data" / "models" / "tiny-llama" / "config.json"


def tiny_tokens_per_gib() -> int:
    cfg = json.loads(TINY.read_text())
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    per_token = cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * 2 * 2  # K+V, bf16
    return (1 << 30) // per_token


class Fake:
    """Builds a fake engine's argv and reads back the processes it started."""

    def __init__(self, tmp_path: Path):
        self.dir = tmp_path / "pids"
        self.dir.mkdir()
        self.locks = tmp_path / "locks"
        self.tmp = tmp_path

    def argv(self, log: Path | None, mode: str = "replay", **opts: object) -> list[str]:
        argv = [sys.executable, str(FAKE), "--fake-mode", mode, "--fake-pid-dir", str(self.dir)]
        if log is not None:
            argv += ["--fake-log", str(log)]
        for k, v in opts.items():
            argv += [f"--fake-{k.replace('_', '-')}", str(v)]
        return argv

    def processes(self) -> dict[str, tuple[int, int, int]]:
        """role -> (pid, pgid, sid) for every process the fake started."""
        out = {}
        for p in self.dir.glob("*.pid"):
            pid, pgid, sid = (int(x) for x in p.read_text().split())
            out[p.stem.rsplit("-", 1)[0]] = (pid, pgid, sid)
        return out

    def run(self, argv: list[str], **kw: object) -> LaunchResult:
        kw.setdefault("env", dict(os.environ))
        kw.setdefault("timeout_s", 20)
        kw.setdefault("grace_s", 2)
        kw.setdefault("log_path", self.tmp / "engine.log")
        kw.setdefault("lock_dir", self.locks)
        kw.setdefault("grammars", LOG_GRAMMARS)
        return launch(argv, **kw)  # type: ignore[arg-type]

    def assert_all_gone(self, result: LaunchResult | None = None) -> None:
        procs = self.processes()
        assert procs, "the fake engine never started"
        alive = {role: pid for role, (pid, _, _) in procs.items() if pid_alive(pid)}
        assert alive == {}, f"left running: {alive}"
        if result is not None:
            assert result.leftover_pids == ()


@pytest.fixture
def fake(tmp_path: Path) -> Fake:
    return Fake(tmp_path)


def test_stops_at_kv_pool_at_once(fake: Fake) -> None:
    # the verdict is known at the pool: the tree is killed there and then, not shut down over seconds
    result = fake.run(fake.argv(TINY_LOG, scale=0.1, max_gap=1.0), linger_s=0.2, grace_s=30)
    assert result.stopped_by == "kv" and result.stop == "kill" and not result.escalated
    assert result.log.kv_tokens == tiny_tokens_per_gib() and not result.log.ready
    assert result.returncode == -signal.SIGKILL
    assert result.seconds_to_kv is not None and result.seconds_total - result.seconds_to_kv < 2.0
    text = result.log_path.read_text() if result.log_path else ""
    assert "KV cache size" in text and "[shutdown]" not in text
    fake.assert_all_gone(result)


def test_stops_at_kv_pool_and_shuts_down_gracefully_when_asked(fake: Fake) -> None:
    # KV at 07:12:01, ready at 07:12:06 in the recording: 0.5 s apart at this scale, more than the linger
    result = fake.run(fake.argv(TINY_LOG, scale=0.1, max_gap=1.0), linger_s=0.2, kv_stop="signal")
    assert result.stopped_by == "kv"
    assert result.log.kv_tokens == tiny_tokens_per_gib()
    assert result.log.engine == "vllm" and result.log.error_kind is None
    assert result.seconds_to_kv is not None and 0 < result.seconds_to_kv <= result.seconds_total
    assert not result.log.ready        # stopped before the server came up
    assert result.returncode == 0      # the fake's SIGTERM handler ran: SIGTERM came first, not SIGKILL
    text = result.log_path.read_text() if result.log_path else ""
    assert "KV cache size" in text
    assert "[shutdown]" in text        # output kept flowing into the log while the engine shut down
    assert any("KV cache size" in line for line in result.tail)
    fake.assert_all_gone(result)


def test_stop_signal_is_what_the_engine_gets_first(fake: Fake) -> None:
    result = fake.run(fake.argv(TINY_LOG), stop_signal=signal.SIGINT, kv_stop="signal")
    assert result.log_path is not None
    assert f"stopping on signal {int(signal.SIGINT)}" in result.log_path.read_text()
    fake.assert_all_gone(result)


def test_stop_when_ready_waits_for_the_server(fake: Fake) -> None:
    result = fake.run(fake.argv(TINY_LOG), stop_when="ready")
    assert result.stopped_by == "ready" and result.log.ready
    assert result.seconds_to_kv is not None and result.seconds_to_kv < result.seconds_total
    fake.assert_all_gone(result)


def test_argv_is_passed_verbatim_without_a_shell(fake: Fake) -> None:
    odd = "--served-model-name=$(touch pwned); `id` | ; *"
    fake.run(fake.argv(TINY_LOG) + [odd])
    assert json.loads((fake.dir / "argv.json").read_text())["argv"] == [odd]
    assert not (Path.cwd() / "pwned").exists()


def test_engine_error_stops_with_the_error(fake: Fake) -> None:
    result = fake.run(fake.argv(LOGS / "vllm-cpu" / "vllm-tp3.log", "exits-early"))
    assert result.stopped_by == "error"
    assert result.returncode == 1
    assert result.log.error_kind == "heads_not_divisible"
    assert result.log.error_line and "tensor parallel size (3)" in result.log.error_line
    # the linger kept the traceback's last lines
    assert any("must be divisible" in line for line in result.tail)
    fake.assert_all_gone(result)


def test_error_in_a_still_running_engine_stops_it(fake: Fake) -> None:
    # the error lines arrive, but the process does not exit by itself (an API server waiting on a dead core)
    log = fake.tmp / "err.log"
    log.write_text("(EngineCore_DP0 pid=9) ERROR 01-01 00:00:00 [core.py:700] EngineCore failed to start.\n"
                   "(EngineCore_DP0 pid=9) ValueError: No available memory for the cache blocks. Try "
                   "increasing.\n")
    result = fake.run(fake.argv(log), timeout_s=30)
    assert result.stopped_by == "error" and result.seconds_total < 10
    assert result.log.error_kind == "no_kv_memory"
    fake.assert_all_gone(result)


def test_failure_right_after_the_pool_is_an_error(fake: Fake) -> None:
    log = fake.tmp / "late.log"
    log.write_text("(EngineCore pid=1) INFO 11-29 07:12:01 [kv_cache_utils.py:2327] CPU KV cache size: 524,288 "
                   "tokens, Maximum concurrency for 512 tokens per request: 1024.00x\n"
                   "(EngineCore pid=1) ERROR 11-29 07:12:01 [core.py:700] EngineCore failed to start.\n")
    result = fake.run(fake.argv(log))
    assert result.stopped_by == "error" and result.log.kv_tokens == 524288
    assert result.log.error_kind == "other_error"
    fake.assert_all_gone(result)


def test_engine_that_exits_without_a_known_cause(fake: Fake) -> None:
    result = fake.run(fake.argv(LOGS / "vllm" / "013.txt", "exits-early", exit_code=3))
    assert result.stopped_by == "exit" and result.returncode == 3
    assert result.log.kv_tokens is None and result.log.error_kind is None
    fake.assert_all_gone(result)


def test_engine_that_never_reports_times_out(fake: Fake) -> None:
    result = fake.run(fake.argv(TINY_LOG, "never-reports"), timeout_s=1.5)
    assert result.stopped_by == "timeout" and result.timed_out
    assert 1.5 <= result.seconds_total < 10
    assert result.log.kv_tokens is None
    fake.assert_all_gone(result)


def test_engine_ignoring_sigterm_is_killed(fake: Fake) -> None:
    result = fake.run(fake.argv(TINY_LOG, "replay,ignore-term"), grace_s=0.5, kv_stop="signal")
    assert result.stopped_by == "kv"
    assert result.returncode == -signal.SIGKILL
    assert result.escalated and result.stop_note and "did not stop within" in result.stop_note
    fake.assert_all_gone(result)


def test_grandchildren_also_those_that_left_the_group_are_killed(fake: Fake) -> None:
    result = fake.run(fake.argv(TINY_LOG, "replay,fork", scale=0.05), grace_s=0.5)
    procs = fake.processes()
    assert set(procs) == {"main", "child", "escaped", "escaped-grandchild"}
    main_pgid = procs["main"][1]
    assert procs["child"][1] == main_pgid
    assert procs["escaped"][1] != main_pgid and procs["escaped-grandchild"][1] != main_pgid  # really escaped
    assert result.stopped_by == "kv"
    fake.assert_all_gone(result)


def test_flood_of_output_keeps_memory_bounded(fake: Fake) -> None:
    tracemalloc.start()
    try:
        result = fake.run(fake.argv(LOGS / "vllm-cpu" / "vllm-dp2.log", "flood", flood_mb=12),
                          expected_engines=2, max_log_bytes=1 << 20, tail_lines=30, timeout_s=60)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.stopped_by == "kv"
    assert len(result.log.kv_tokens_all) == 2
    assert result.lines > 80_000
    assert peak < 6 << 20, f"peak {peak / 2**20:.1f} MiB while 12 MB streamed through"
    assert len(result.tail) == 30
    assert result.log_truncated and result.log_path is not None
    # the cap, the truncation note and the closing line (which may name up to three new /dev/shm
    # segments of neighbours on a busy machine)
    closing = result.log_path.read_bytes().rsplit(b"\n", 2)[-2]
    assert closing.startswith(b"[gpulayout: launch ended")
    assert result.log_path.stat().st_size < (1 << 20) + 100 + len(closing)
    fake.assert_all_gone(result)


def test_sglang_multi_rank_replay_waits_for_every_rank(fake: Fake) -> None:
    result = fake.run(fake.argv(LOGS / "sglang" / "013.txt", scale=0.2, max_gap=2.0),
                      grammars=(SGLANG_LOG,), expected_engines=1, ranks_per_engine=4)
    assert result.stopped_by == "kv"
    assert result.log.kv_tokens_all == (46611,) * 4
    # stopped at the allocation lines, not at the summary printed seconds later after CUDA graphs
    assert not any("max_total_num_tokens" in line for line in result.tail)
    fake.assert_all_gone(result)


def test_missing_command_is_a_launch_error(fake: Fake) -> None:
    with pytest.raises(LaunchError, match="no-such-engine-binary.*not found"):
        fake.run(["no-such-engine-binary", "serve", "x"])


def test_stop_when_must_be_known(fake: Fake) -> None:
    with pytest.raises(ValueError):
        fake.run(fake.argv(TINY_LOG), stop_when="never")


# ------------------------------------------------------------------------------------------------
# Interrupting the process that launched the engine
# ------------------------------------------------------------------------------------------------
# every signal a test sends acts as in a terminal, whatever started pytest (`&` ignores SIGINT, `nohup`
# SIGHUP), and the launcher keeps an ignored signal ignored
DRIVER = RESET_SIGNALS + textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from pytest_gpulayout.engines.registry import LOG_GRAMMARS
    from pytest_gpulayout.launch.launcher import launch
    argv = sys.argv[1:-1]
    print("launching", flush=True)
    launch(argv, env=dict(os.environ), grammars=LOG_GRAMMARS, timeout_s=120, grace_s=1, lock_dir=Path(sys.argv[-1]))
    print("launch returned", flush=True)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_interrupted_launcher_leaves_no_engine(fake: Fake, sig: signal.Signals) -> None:
    argv = fake.argv(TINY_LOG, "never-reports,fork")
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, *argv, str(fake.locks)], start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while len(fake.processes()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(fake.processes()) == 4, "fake engine did not start its processes"
        time.sleep(0.5)  # the launcher's /proc walk has seen them
        driver.send_signal(sig)
        out, _ = driver.communicate(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert b"launch returned" not in out
    fake.assert_all_gone()


def test_an_ignored_sigint_leaves_the_launch_alone(fake: Fake) -> None:
    # a job started with `&` ignores SIGINT: a stray one must not kill the engine mid-launch
    driver_src = DRIVER.replace("from pathlib import Path",
                                "from pathlib import Path\nsignal.signal(signal.SIGINT, signal.SIG_IGN)").replace(
        "launch(argv,", "r = launch(argv,").replace('print("launch returned", flush=True)',
                                                      'print("launch returned", r.stopped_by, flush=True)')
    argv = fake.argv(TINY_LOG, scale=0.3)
    driver = subprocess.Popen([sys.executable, "-c", driver_src, *argv, str(fake.locks)], start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not fake.processes() and time.monotonic() < deadline:
            time.sleep(0.05)
        driver.send_signal(signal.SIGINT)
        out, _ = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert b"launch returned kv" in out, out[-2000:]


def test_importing_the_launcher_installs_nothing() -> None:
    # the plugin imports it in every pytest run: no exit hook, no signal handler until a launch
    src = textwrap.dedent("""
        import atexit, signal
        def state():
            return atexit._ncallbacks(), [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)]
        before = state()
        import pytest_gpulayout.launch.launcher
        assert state() == before, (before, state())
    """)
    if not hasattr(__import__("atexit"), "_ncallbacks"):
        pytest.skip("atexit._ncallbacks is CPython's")
    done = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def test_exit_while_a_thread_launches_leaves_no_engine(fake: Fake) -> None:
    # signal handlers need the main thread; the exit hook armed by the launch still stops the engine
    driver_src = DRIVER.replace("launch(argv,", "threading.Thread(target=lambda: launch(argv,").replace(
        "lock_dir=Path(sys.argv[-1]))", "lock_dir=Path(sys.argv[-1])), daemon=True).start()").replace(
        'print("launch returned", flush=True)', "sys.stdin.readline(); sys.exit(0)")
    driver_src = "import threading\n" + driver_src
    argv = fake.argv(TINY_LOG, "never-reports,fork")
    driver = subprocess.Popen([sys.executable, "-c", driver_src, *argv, str(fake.locks)], start_new_session=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while len(fake.processes()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(fake.processes()) == 4, "fake engine did not start its processes"
        time.sleep(0.5)  # the launcher's /proc walk has seen them
        out, _ = driver.communicate(b"exit\n", timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, out[-2000:]
    fake.assert_all_gone()
    fake.assert_all_gone()


# ------------------------------------------------------------------------------------------------
# GPU locks
# ------------------------------------------------------------------------------------------------
def _launch_in_threads(fake: Fake, gpu_sets: list[list[str]]) -> list[LaunchResult]:
    results: list[LaunchResult | None] = [None] * len(gpu_sets)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = fake.run(fake.argv(TINY_LOG, scale=0.05), gpus=gpu_sets[i],
                                  log_path=fake.tmp / f"engine{i}.log")
        except BaseException as err:  # pragma: no cover - surfaced below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(gpu_sets))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def test_launches_sharing_a_gpu_never_overlap(fake: Fake) -> None:
    a, b = _launch_in_threads(fake, [["GPU-aaaa", "GPU-bbbb"], ["GPU-bbbb", "GPU-cccc"]])
    first, second = sorted((a, b), key=lambda r: r.started_at)
    assert second.started_at >= first.ended_at
    fake.assert_all_gone()


def test_launches_on_different_gpus_run_together(fake: Fake) -> None:
    a, b = _launch_in_threads(fake, [["GPU-aaaa"], ["GPU-bbbb"]])
    assert a.started_at < b.ended_at and b.started_at < a.ended_at


def test_lock_held_by_another_process_blocks_the_launch(fake: Fake) -> None:
    fake.locks.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time\n"
         "f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
         "print('held', flush=True); time.sleep(30)",
         str(fake.locks / "GPU-aaaa.lock")], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        with pytest.raises(LaunchError, match="still held"):
            fake.run(fake.argv(TINY_LOG), gpus=["GPU-aaaa"], lock_timeout_s=0.3)
        assert fake.processes() == {}  # the engine was never started
    finally:
        holder.kill()
        holder.wait()
    with gpu_locks(["GPU-aaaa"], fake.locks, timeout_s=5):  # released with its holder
        pass


def test_free_port_is_bindable_on_loopback() -> None:
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
