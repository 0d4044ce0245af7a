"""Start an engine briefly, read its startup log as it streams, and stop it with its whole process tree.

This is the only module that starts processes. Its promises:

- The engine gets an argument vector, never a shell; it runs in its own session and process group
  (``start_new_session``), so one ``killpg`` reaches the API server, engine cores and workers.
- It stops the engine as soon as the log answers the question: every expected engine has reported
  its KV pool, a recognised error has happened (after a short linger, so the traceback's last line
  is in the log), the process exited, or the timeout passed. Then ``stop_signal`` (SIGTERM, or
  SIGINT: what a Ctrl-C in the engine's terminal sends) to the group, ``grace_s`` to shut down, SIGKILL.
- Nothing is left behind. Descendants are tracked by walking ``/proc`` (children of children) while
  the engine runs, so a worker that called ``setsid()`` to leave the group is still found and killed.
  ``LaunchResult.leftover_pids`` lists whatever survived SIGKILL (it must be empty).
- Memory stays bounded however much the engine prints: lines are parsed as they stream, only the
  last ``tail_lines`` are kept, and the log file is capped.
- Interrupting pytest (Ctrl-C, SIGTERM, SIGHUP) still stops the engine: ``launch`` cleans up in
  ``finally``, and chained signal handlers plus an ``atexit`` hook kill every active launch. The
  first launch installs them; importing this module changes nothing.
- Launches that share a GPU never overlap, also across pytest-xdist workers: a ``flock`` per GPU,
  taken in sorted order (no deadlock between two launches wanting overlapping sets).

The tree walk lives in ``proctree`` (Linux only, ``/proc``; elsewhere only the process group is
killed), the GPU locks and the free port in ``gpu_locks``. This module keeps the signal handling and
the launch itself, and re-exports ``process_table``, ``pid_alive``, ``gpu_locks``, ``default_lock_dir``
and ``free_port`` for the callers that import them from here.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any, Literal, Protocol

from pytest_gpulayout.errors import LaunchError
from pytest_gpulayout.launch.gpu_locks import default_lock_dir, free_port, gpu_locks
from pytest_gpulayout.launch.logparse import LogWatcher, StartupLog, clean
from pytest_gpulayout.launch.proctree import ProcessTree, pid_alive, process_table

__all__ = ["LaunchResult", "StopReason", "default_lock_dir", "free_port", "gpu_locks", "launch", "pid_alive",
           "process_table"]

#: Why a launch stopped (``LaunchResult.stopped_by``).
StopReason = Literal["kv", "ready", "error", "exit", "timeout"]
_READ_CHUNK = 1 << 16
_LINE_BREAK_RE = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class LaunchResult:
    """What one brief launch saw and how it ended.

    ``stopped_by``: ``kv`` (every expected pool reported), ``ready`` (server up, with
    ``stop_when="ready"``), ``error`` (recognised error), ``exit`` (the engine exited by itself),
    ``timeout``. ``returncode`` is the engine's own code for ``exit``, else usually ``-15``/``-9``
    (our signal). ``seconds_to_kv``: from start until the last expected pool was reported;
    ``seconds_to_stop``: until the stop began (the answer was known); ``seconds_total``: until the
    whole tree was gone. The difference of the last two is the engine's own shutdown.
    """

    argv: tuple[str, ...]
    pid: int
    returncode: int | None
    seconds_to_kv: float | None
    seconds_total: float
    log: StartupLog
    log_path: Path | None
    tail: tuple[str, ...]
    timed_out: bool
    leftover_pids: tuple[int, ...]
    stopped_by: StopReason
    started_at: float          # time.time() when the engine was started (after the GPU locks)
    ended_at: float            # time.time() when the last process of the tree was gone
    lines: int = 0
    log_truncated: bool = False
    seconds_to_stop: float | None = None


# ------------------------------------------------------------------------------------------------
# Active launches: killed on SIGTERM/SIGHUP/SIGINT to this process and at interpreter exit
# ------------------------------------------------------------------------------------------------
_ACTIVE: dict[int, ProcessTree] = {}
_PREVIOUS: dict[int, Any] = {}
_INSTALL_LOCK = threading.Lock()
_HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_exit_hook_registered = False


def _kill_active(grace_s: float = 2.0) -> None:
    for tree in list(_ACTIVE.values()):
        with contextlib.suppress(Exception):
            tree.kill_now(grace_s)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """Stop every engine first, then do what the previous handler would have done."""
    if _ACTIVE:
        _kill_active()
    prev = _PREVIOUS.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    # SIG_IGN: ignore, as before


def _install_handlers() -> None:
    """Arm the clean-up before an engine starts: the ``atexit`` hook, and the signal handlers.

    Called by every launch rather than at import, so importing the launcher has no side effect.
    """
    global _exit_hook_registered
    with _INSTALL_LOCK:
        if not _exit_hook_registered:
            atexit.register(_kill_active)
            _exit_hook_registered = True
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread; atexit + finally still apply
        for sig in _HANDLED_SIGNALS:
            current = signal.getsignal(sig)
            if current is _on_signal or current == signal.SIG_IGN:
                # an ignored signal (e.g. SIGINT for a job started with `&`) stays ignored: the run
                # goes on, so its engines must too; killing them would turn a stray signal into a
                # false engine failure
                continue
            try:
                signal.signal(sig, _on_signal)
            except (ValueError, OSError):
                continue
            _PREVIOUS[sig] = current if current is not None else signal.SIG_DFL


class Watcher(Protocol):
    """What the launch loop asks of a log parser (``LogWatcher``; llama.cpp's in ``engines/llamacpp.py``)."""

    lines: int

    @property
    def kv_complete(self) -> bool: ...
    @property
    def failed(self) -> bool: ...
    @property
    def ready(self) -> bool: ...
    def feed(self, raw: str) -> None: ...
    def result(self) -> StartupLog: ...


# ------------------------------------------------------------------------------------------------
# The launch
# ------------------------------------------------------------------------------------------------
def launch(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    expected_engines: int = 1,
    engine: str = "auto",
    timeout_s: float,
    log_path: Path | None = None,
    grace_s: float = 10.0,
    stop_when: str = "kv",
    ranks_per_engine: int = 1,
    gpus: Iterable[str] = (),
    lock_dir: Path | None = None,
    lock_timeout_s: float | None = None,
    linger_s: float = 0.5,
    tail_lines: int = 30,
    max_log_bytes: int = 64 << 20,
    max_line_bytes: int = 64 << 10,
    scan_interval_s: float = 0.2,
    stop_signal: int = signal.SIGTERM,
    watcher: Watcher | None = None,
) -> LaunchResult:
    """Run ``argv`` until the log answers, then stop it and its whole tree. See the module docstring.

    ``env`` is the complete environment of the engine. ``gpus`` are the lock keys of the GPUs it
    uses. Raises ``LaunchError`` when the command cannot be started at all.
    """
    if stop_when not in ("kv", "ready"):
        raise ValueError(f"stop_when must be 'kv' or 'ready', not {stop_when!r}")
    if not argv:
        raise LaunchError("empty engine command")
    with gpu_locks(gpus, lock_dir, lock_timeout_s):
        w: Watcher = watcher if watcher is not None else LogWatcher(engine, expected_engines, ranks_per_engine)
        run = _Launch(tuple(str(a) for a in argv), dict(env), w,
                      timeout_s=timeout_s, log_path=log_path, grace_s=grace_s, stop_when=stop_when,
                      linger_s=linger_s, tail_lines=tail_lines, max_log_bytes=max_log_bytes,
                      max_line_bytes=max_line_bytes, scan_interval_s=scan_interval_s, stop_signal=stop_signal)
        return run.run()


class _Launch:
    def __init__(self, argv: tuple[str, ...], env: dict[str, str], watcher: Watcher, *, timeout_s: float,
                 log_path: Path | None, grace_s: float, stop_when: str, linger_s: float, tail_lines: int,
                 max_log_bytes: int, max_line_bytes: int, scan_interval_s: float, stop_signal: int):
        self.argv = argv
        self.env = env
        self.watcher = watcher
        self.timeout_s = timeout_s
        self.log_path = log_path
        self.grace_s = grace_s
        self.stop_when = stop_when
        self.linger_s = linger_s
        self.tail: deque[str] = deque(maxlen=max(1, tail_lines))
        self.max_log_bytes = max_log_bytes
        self.max_line_bytes = max_line_bytes
        self.scan_interval_s = scan_interval_s
        self.stop_signal = stop_signal
        self.feeding = True
        self.log_file: IO[bytes] | None = None
        self.log_bytes = 0
        self.log_truncated = False
        self.pending = b""
        self.eof = False
        self.fd = -1
        self.selector: selectors.BaseSelector | None = None

    # -- output ----------------------------------------------------------------------------------
    def _write_log(self, chunk: bytes) -> None:
        if self.log_file is None or self.log_truncated:
            return
        room = self.max_log_bytes - self.log_bytes
        if len(chunk) > room:
            self.log_file.write(chunk[:max(room, 0)])
            self.log_file.write(b"\n[gpulayout: log truncated here: it passed the size cap]\n")
            self.log_truncated = True
        else:
            self.log_file.write(chunk)
        self.log_bytes += len(chunk)

    def _line(self, raw: bytes) -> None:
        if not self.feeding:
            return
        text = raw.decode("utf-8", "replace")
        self.watcher.feed(text)
        self.tail.append(clean(text))

    def _pump(self, wait_s: float) -> None:
        """Read what the engine printed (waiting up to ``wait_s``), write it, feed it line by line."""
        if self.eof or self.selector is None:
            time.sleep(wait_s)
            return
        if not self.selector.select(timeout=wait_s):
            return
        for _ in range(64):  # drain what is there, but come back to the clock regularly
            try:
                chunk = os.read(self.fd, _READ_CHUNK)
            except BlockingIOError:
                return
            except OSError as err:
                if err.errno == errno.EINTR:
                    continue
                chunk = b""
            if not chunk:
                self.eof = True
                self.selector.unregister(self.fd)
                if self.pending:
                    self._line(self.pending)
                    self.pending = b""
                return
            self._write_log(chunk)
            data = self.pending + chunk
            parts = _LINE_BREAK_RE.split(data)
            self.pending = parts.pop()
            for part in parts:
                self._line(part)
            while len(self.pending) > self.max_line_bytes:  # a "line" that never ends
                self._line(self.pending[:self.max_line_bytes])
                self.pending = self.pending[self.max_line_bytes:]

    # -- lifecycle -------------------------------------------------------------------------------------
    def run(self) -> LaunchResult:
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.log_file = open(self.log_path, "wb")  # noqa: SIM115 - closed in finally
        _install_handlers()
        t0 = time.monotonic()
        started_at = time.time()
        try:
            proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
                                    close_fds=True)
        except FileNotFoundError:
            self._close_log()
            raise LaunchError(f"cannot start the engine: {self.argv[0]!r} was not found") from None
        except PermissionError:
            self._close_log()
            raise LaunchError(f"cannot start the engine: {self.argv[0]!r} is not executable") from None
        except OSError as err:
            self._close_log()
            raise LaunchError(f"cannot start the engine {self.argv[0]!r}: {err.strerror or err}") from None
        tree = ProcessTree(proc.pid)
        _ACTIVE[proc.pid] = tree
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)
        stopped_by: StopReason = "timeout"
        kv_at: float | None = None
        interrupted = False
        try:
            stopped_by, kv_at = self._watch(proc, tree, t0)
            stop_at = time.monotonic()
        except BaseException:
            interrupted = True
            raise
        finally:
            self.feeding = False
            leftovers = self._stop(proc, tree, min(self.grace_s, 2.0) if interrupted else self.grace_s)
            _ACTIVE.pop(proc.pid, None)
            ended_at = time.time()
            if self.selector is not None:
                self.selector.close()
            with contextlib.suppress(OSError):
                proc.stdout.close()
            self._close_log()
        return LaunchResult(
            argv=self.argv, pid=proc.pid, returncode=proc.returncode,
            seconds_to_kv=None if kv_at is None else round(kv_at - t0, 3),
            seconds_total=round(time.monotonic() - t0, 3), log=self.watcher.result(), log_path=self.log_path,
            tail=tuple(self.tail), timed_out=stopped_by == "timeout", leftover_pids=tuple(leftovers),
            stopped_by=stopped_by, started_at=started_at, ended_at=ended_at, lines=self.watcher.lines,
            log_truncated=self.log_truncated, seconds_to_stop=round(stop_at - t0, 3),
        )

    def _close_log(self) -> None:
        if self.log_file is not None:
            with contextlib.suppress(OSError):
                self.log_file.close()
            self.log_file = None

    def _watch(self, proc: subprocess.Popen[bytes], tree: ProcessTree, t0: float) -> tuple[StopReason, float | None]:
        deadline = t0 + self.timeout_s
        next_scan = 0.0
        reason: StopReason | None = None
        linger_until = 0.0
        kv_at: float | None = None
        w = self.watcher
        while True:
            now = time.monotonic()
            if now >= next_scan:
                tree.scan()
                next_scan = now + self.scan_interval_s
            self._pump(0.05 if reason is None else min(0.05, max(linger_until - now, 0.0)))
            now = time.monotonic()
            if kv_at is None and w.kv_complete:
                kv_at = now
            if reason is None:
                if w.failed:
                    reason, linger_until = "error", now + self.linger_s
                elif self.stop_when == "kv" and w.kv_complete:
                    reason, linger_until = "kv", now + self.linger_s   # concurrency line, late ranks
                elif self.stop_when == "ready" and w.ready:
                    reason, linger_until = "ready", now
                elif proc.poll() is not None:
                    reason, linger_until = "exit", now + 0.3           # what it printed last
                elif now >= deadline:
                    reason, linger_until = "timeout", now
            if reason is not None:
                if now >= linger_until or (self.eof and proc.poll() is not None):
                    if w.failed:
                        reason = "error"  # also when it failed right after reporting its pool
                    elif reason == "exit" and w.kv_complete:
                        reason = "kv"
                    return reason, kv_at

    def _stop(self, proc: subprocess.Popen[bytes], tree: ProcessTree, grace_s: float) -> list[int]:
        """Signal the tree, keep draining its output for ``grace_s``, SIGKILL what is left, verify."""
        try:
            tree.scan()
            if proc.poll() is None or tree.alive():
                tree.signal(self.stop_signal)
                self._wait_gone(proc, tree, grace_s)
            if tree.alive():
                tree.signal(signal.SIGKILL)
                self._wait_gone(proc, tree, 5.0)
        except KeyboardInterrupt:  # a second Ctrl-C while stopping: no more grace
            tree.signal(signal.SIGKILL)
            self._wait_gone(proc, tree, 2.0)
            raise
        finally:
            with contextlib.suppress(Exception):
                proc.wait(timeout=1.0)
        return tree.alive()

    def _wait_gone(self, proc: subprocess.Popen[bytes], tree: ProcessTree, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        next_scan = 0.0
        while time.monotonic() < deadline:
            self._pump(0.05)  # an engine blocked on a full pipe would never finish shutting down
            proc.poll()
            now = time.monotonic()
            if now >= next_scan:
                table = tree.scan()
                if proc.returncode is not None and not tree.alive(table):
                    return
                next_scan = now + 0.1
