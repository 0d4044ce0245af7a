"""Start an engine briefly, read its startup log as it streams, and stop it with its whole process tree.

This is the only module that starts processes. Its promises:

- The engine gets an argument vector, never a shell. It is started by a small watchdog
  (``watchdog.py``), itself started by its guard (``watchdog.Guard``, in a session of its own, its command
  line naming nothing of ours: ``helpers.py``); the watchdog is the subreaper of the engine's tree
  (``PR_SET_CHILD_SUBREAPER``: a worker that double-forks and calls ``setsid()`` still comes back
  to it) and, where the host lets us create one, the engine runs in a cgroup v2 of its own
  (``cgroup.kill``). The engine starts with SIGINT/SIGTERM/SIGHUP at their defaults and a private
  ``TMPDIR`` (inside the one it would have used), removed afterwards.
- **Nothing is left behind, whatever happens to us.** The watchdog holds the read end of a pipe
  whose write end only the launcher has: when the launcher ends in any way (returns, raises, is
  SIGKILLed by the OOM killer or a CI timeout) the watchdog freezes the tree, reads the
  ``/dev/shm`` names it maps, SIGKILLs it, waits until it is gone, unlinks those names, removes the
  private ``TMPDIR`` and only then releases the GPU locks. ``LaunchResult.cleaned`` says what it
  removed, ``leftover_pids`` what survived (it must be empty). **The tree dies with its parents,
  whatever kills them**: the engine's main process has the watchdog's death as its own
  (``PR_SET_PDEATHSIG``), and the guard, the subreaper above the watchdog, gets the rest of the tree
  back when the watchdog dies; it then does the watchdog's work (stop, clean, hold the GPU locks until
  the tree is gone) and says so (``{"watchdog_died": code}``): ``pkill -9 -f pytest_gpulayout``, which
  takes this process and the watchdog at once, leaves nothing. **Each finishes alone**: when the
  guard is killed too, the engine's tree is orphaned to init, and the launcher
  does the watchdog's work: it remembers every pid of the tree it saw with its start time, and its
  fallback (``ProcessTree.sweep``) freezes and SIGKILLs those, their children, the members of their
  process groups and sessions, and every process whose environment carries the launch's private
  ``TMPDIR`` (what a worker that left the group and the session before we saw it still inherited).
- It stops the engine as soon as the log answers the question: every expected engine has reported
  its KV pool, a recognised error has happened (after a short linger, so the traceback's last line
  is in the log), the process exited, or the timeout passed.
  At the KV pool the verdict is known and the rest is teardown; with the containment and clean-up
  above a hard stop is safe, so the tree is SIGKILLed at once (``kv_stop="kill"``, the default:
  gone within a second of the KV line instead of vLLM's 7-9 s shutdown on CPU, and on GPUs no
  CUDA-graph capture). Every other stop is graceful: ``stop_signal`` (the engine's own,
  ``Engine.stop_signal``: the one its server honours at every phase of its startup) to the tree, a
  grace, SIGKILL. The grace is ``max(grace_s, 1.5 x the longest stop measured in this process)``, at
  most 3 x ``grace_s``: a machine where engines take longer to stop gets more, and stops that needed
  SIGKILL do not compound across the launches of a run. A graceful stop that ran out of grace is
  reported (``escalated``, ``stop_note``; the verdict says so), never silently passed.
- **Interrupts.** The first Ctrl-C/SIGTERM/SIGHUP to this process stops every active launch the
  graceful way (its own stop signal, its full grace), a second one escalates to SIGKILL; then the
  signal does what it would have done (KeyboardInterrupt, or the default action). A signal this
  process ignores (a job started with ``&`` ignores SIGINT) stays ignored. Ctrl-Z (SIGTSTP) stops
  the engines' trees with this process (SIGSTOP through their watchdogs), and SIGCONT resumes them;
  the time stopped does not count against their timeouts. The first launch
  installs the handlers and an ``atexit`` hook; importing this module changes nothing.
- The log is created ``O_CREAT | O_EXCL | O_NOFOLLOW`` with mode 0600 (a planted symlink or file
  in a shared ``--log-dir`` is refused, never followed), only once the command could be started
  (no 0-byte log for a missing command), and written unbuffered, so every signal path keeps it.
- Memory stays bounded however much the engine prints: lines are parsed as they stream, only the
  last ``tail_lines`` are kept, and the log file is capped.
- Launches that share a GPU never overlap, also across pytest-xdist workers: a ``flock`` per
  physical GPU (``gpu_locks``), held by the watchdog until the tree is gone. The wait for it is
  not the engine's time: it has a limit of its own (``lock_timeout_s``, default
  ``lock_wait_limit``), the engine gets its whole ``timeout_s`` after it, and it is said
  ("waiting for GPU 0 held by pid N") through ``progress`` (also from pytest-xdist workers:
  ``launch/progress.py``), else ``on_wait``, else on stderr; ``LaunchResult.lock_wait_s`` is how
  long. When something survives SIGKILL (``leftover_pids``), the lock stays held until it is gone
  too: the watchdog stays for it, or, when the watchdog was killed, a keeper (``watchdog.py
  --hold``) the launcher starts.

The tree walk lives in ``proctree`` and ``watchdog``, the GPU locks and the free port in
``gpu_locks``. This module re-exports ``process_table``, ``pid_alive``, ``gpu_locks``,
``default_lock_dir`` and ``free_port`` for the callers that import them from here.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from pytest_gpulayout.errors import LaunchError
from pytest_gpulayout.launch.gpu_locks import (
    HeldLocks,
    acquire,
    default_lock_dir,
    free_port,
    gpu_locks,
    print_wait,
)
from pytest_gpulayout.launch.helpers import WATCHDOG, check_spawnable, helper_python, start_helper
from pytest_gpulayout.launch.logparse import LogGrammar, LogWatcher, StartupLog, clean
from pytest_gpulayout.launch.proctree import ProcessTree, pid_alive, process_table
from pytest_gpulayout.launch.progress import CLEANED, KV_REPORTED, STOPPING, PhaseTracker, Progress
from pytest_gpulayout.launch.stops import StopReason, StopWhen
from pytest_gpulayout.launch.stops import stop_when as as_stop_when
from pytest_gpulayout.launch.watchdog import ShmListing, cgroup_procs, shm_listing, shm_names, shm_to_remove

__all__ = ["LaunchResult", "StopReason", "StopWhen", "default_lock_dir", "free_port", "gpu_locks", "launch",
           "pid_alive", "process_table"]

_READ_CHUNK = 1 << 16
#: how long the watchdog may take to start and report the engine's pid
_SPAWN_WAIT_S = 60.0
#: how long its final SIGKILL and clean-up may take (it gives up on the kill after 10 s)
_FINAL_WAIT_S = 20.0
#: how often the launcher reads the tree's memory maps for ``/dev/shm`` names
_MAPS_INTERVAL_S = 1.0
_GRACE_CAP_S = 120.0
def lock_wait_limit(timeout_s: float, grace_s: float) -> float:
    """How long a launch waits for its GPU locks by default: long enough for another launch's whole
    run (its timeout and a stop at the longest grace), twice, and a minute."""
    return 2 * (timeout_s + _GRACE_GROWTH * grace_s) + 60.0


#: the adapted grace is at most this many times the grace asked for: stops that needed SIGKILL do not
#: compound (10 -> 30 -> 90 s across the deployments of one run)
_GRACE_GROWTH = 3.0
_SOCKET_PATH_MAX = 100   # sizeof(sockaddr_un.sun_path) is 108 with its NUL; leave a margin
_TMP_NAME_LEN = len("/gpulayout-") + 8
#: graceful stops measured in this process (seconds from the stop signal until the tree was gone)
_MEASURED_STOPS: list[float] = []


@dataclass(frozen=True)
class LaunchResult:
    """What one brief launch saw and how it ended.

    ``stopped_by`` (``StopReason``): ``kv`` (every expected pool reported), ``ready`` (server up, with
    ``stop_when="ready"``), ``error`` (recognised error), ``exit`` (the engine exited by itself before it
    was stopped, also right after its pool line: it did not start),
    ``timeout``, ``interrupt`` (a signal to this process, when its previous handler does not raise),
    ``watchdog`` (the watchdog was killed from outside: ``watchdog_returncode`` says how; the launcher
    stopped the tree itself). ``returncode`` is the engine's own code for ``exit``, else our signal
    (``-9`` after a hard stop); None when the watchdog died before it could say.
    ``seconds_to_kv``: from start until the last expected pool was reported;
    ``seconds_to_stop``: until the stop began (the answer was known); ``seconds_total``: until the
    whole tree was gone. The difference of the last two is the teardown.

    ``stop``: ``kill`` (the hard stop at the pool, by design), ``signal`` (``stop_signal`` and a
    grace). ``escalated``: a graceful stop ran out of its grace (``grace_s``) and needed SIGKILL;
    ``stop_note`` says why in words. ``cleaned``: what the tree left and the launch removed
    (``/dev/shm`` names, the private ``TMPDIR``). ``containment``: ``cgroup`` or ``subreaper``.
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
    stop: str = "signal"
    escalated: bool = False
    stop_note: str | None = None
    grace_s: float | None = None
    cleaned: tuple[str, ...] = ()
    containment: str = ""
    lock_wait_s: float = 0.0
    watchdog_returncode: int | None = None
    suspended_s: float = 0.0
    log_error: str | None = None   # why writing the log failed (``No space left on device``): it stops short
    log_bytes: int = 0             # bytes of output the log holds
    log_lines: int = 0             # lines of output the log holds (of ``lines``)

    def __post_init__(self) -> None:
        # a result recorded with the old strings ("kv") reads as the enum, so ``is`` comparisons hold
        object.__setattr__(self, "stopped_by", StopReason(self.stopped_by))


# ------------------------------------------------------------------------------------------------
# Active launches: stopped on SIGTERM/SIGHUP/SIGINT to this process and at interpreter exit
# ------------------------------------------------------------------------------------------------
_ACTIVE: dict[int, _Launch] = {}
_PREVIOUS: dict[int, Any] = {}
_PENDING: list[int] = []           # signals received while launches were active, to redeliver after
_INSTALL_LOCK = threading.Lock()
_HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: the ``atexit`` hook, once registered (a list, so no ``global`` is needed to set it)
_EXIT_HOOK: list[Callable[[], None]] = []


def _kill_active() -> None:
    """At exit: every active launch's watchdog kills and cleans its tree; wait until it has."""
    for run in list(_ACTIVE.values()):
        with contextlib.suppress(Exception):
            run.abort()


def _previous(signum: int, frame: FrameType | None) -> None:
    prev = _PREVIOUS.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    # SIG_IGN: ignore, as before


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """First signal: every launch stops gracefully, then the signal is redelivered. Second: SIGKILL now."""
    if not _ACTIVE:
        _previous(signum, frame)
        return
    escalate = bool(_PENDING)
    _PENDING.append(signum)
    for run in list(_ACTIVE.values()):
        run.interrupt(signum, escalate)


def _on_suspend(signum: int, frame: FrameType | None) -> None:
    """Ctrl-Z (SIGTSTP): the engines are stopped with us (SIGSTOP to each tree), or they would go on
    holding their GPUs and locks and running out their clocks; on SIGCONT they go on, and the time
    spent stopped does not count against their timeouts."""
    runs = list(_ACTIVE.values())
    for run in runs:
        run.suspend()
    t = time.monotonic()
    prev = _PREVIOUS.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        try:
            os.kill(os.getpid(), signum)   # stopped here until SIGCONT
        finally:
            signal.signal(signum, _on_suspend)
    for run in runs:
        run.resume(time.monotonic() - t)


def _redeliver(log_path: Path | None = None) -> None:
    """After the last active launch is cleaned up: do what the pending signal would have done.

    Where that is the default action (SIGTERM, SIGHUP), this process ends here and no caller's ``finally``
    runs to say where the logs of the launches that did not pass are (the CLI says it on Ctrl-C, whose
    ``KeyboardInterrupt`` unwinds): so it is said here, on stderr, first."""
    if not _PENDING or _ACTIVE:
        return
    signum = _PENDING[0]
    _PENDING.clear()
    if log_path is not None and _PREVIOUS.get(signum, signal.SIG_DFL) == signal.SIG_DFL and log_path.exists():
        with contextlib.suppress(OSError):
            os.write(2, f"gpulayout: stopped by {_signal_name(signum)}: the logs of the launches that did not "
                        f"pass, the one it interrupted among them, are in {log_path.parent}\n".encode())
    if threading.current_thread() is threading.main_thread():
        _previous(signum, None)
    else:
        os.kill(os.getpid(), signum)  # the main thread's handler sees no active launch: previous action


def _install_handlers() -> None:
    """Arm the clean-up before an engine starts: the ``atexit`` hook, and the signal handlers.

    Called by every launch rather than at import, so importing the launcher has no side effect.
    """
    with _INSTALL_LOCK:
        if not _EXIT_HOOK:
            atexit.register(_kill_active)
            _EXIT_HOOK.append(_kill_active)
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread; atexit + the watchdog still apply
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
        current = signal.getsignal(signal.SIGTSTP)
        if current is not _on_suspend and current != signal.SIG_IGN:
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signal.SIGTSTP, _on_suspend)
                _PREVIOUS[signal.SIGTSTP] = current if current is not None else signal.SIG_DFL


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
    def feed_lines(self, lines: Sequence[str]) -> None: ...
    def result(self) -> StartupLog: ...


def adapted_grace(grace_s: float, measured: Sequence[float] | None = None) -> float:
    """The grace for the next graceful stop: at least ``grace_s``, and 1.5 x the longest measured stop,
    but at most ``_GRACE_GROWTH`` x ``grace_s`` (and ``_GRACE_CAP_S``)."""
    stops = _MEASURED_STOPS if measured is None else measured
    if not stops:
        return grace_s
    return round(max(grace_s, min(_GRACE_CAP_S, _GRACE_GROWTH * grace_s, 1.5 * max(stops))), 1)


# ------------------------------------------------------------------------------------------------
# Containment helpers
# ------------------------------------------------------------------------------------------------
_CGROUP_COUNTER = iter(range(1, 1 << 30))
#: try a cgroup v2 per launch (tests turn it off to exercise the subreaper alone)
USE_CGROUP = True


def _own_cgroup_dir() -> Path | None:
    """This process's cgroup v2 directory, from ``/proc/self/cgroup`` (``0::/path``) and the cgroup2 mount."""
    try:
        rel = next(line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                   if line.startswith("0::"))
        mounts = [line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    except (OSError, StopIteration, IndexError):
        return None
    for fields in mounts:
        if "-" in fields and fields[fields.index("-") + 1] == "cgroup2":
            root, mount = fields[3], fields[4]
            if rel.startswith(root):
                return Path(mount) / rel[len(root):].lstrip("/")
    return None


def make_cgroup() -> str:
    """A fresh cgroup v2 below ours for one engine, or "" where the host does not let us (then the
    subreaper alone contains the tree). Needs ``cgroup.kill`` (Linux >= 5.14) to be worth it."""
    base = _own_cgroup_dir() if USE_CGROUP else None
    if base is None or not (base / "cgroup.procs").is_file():
        return ""
    path = base / f"gpulayout-{os.getpid()}-{next(_CGROUP_COUNTER)}"
    try:
        path.mkdir(mode=0o755)
    except OSError:
        return ""
    if not (path / "cgroup.kill").is_file():
        with contextlib.suppress(OSError):
            path.rmdir()
        return ""
    return str(path)


def _remove_cgroup(path: str) -> None:
    if path:
        with contextlib.suppress(OSError):
            Path(path, "cgroup.kill").write_text("1")
        for _ in range(100):
            try:
                os.rmdir(path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


# ------------------------------------------------------------------------------------------------
# The launch
# ------------------------------------------------------------------------------------------------
def launch(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    expected_engines: int = 1,
    grammars: Sequence[LogGrammar] = (),
    timeout_s: float,
    log_path: Path | None = None,
    grace_s: float = 10.0,
    stop_when: str | StopWhen = StopWhen.KV,
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
    kv_stop: str = "kill",
    on_wait: Callable[[str], None] | None = None,
    watcher: Watcher | None = None,
    progress: Progress | None = None,
    serve: Callable[[], bool] | None = None,
) -> LaunchResult:
    """Run ``argv`` until the log answers, then stop it and its whole tree. See the module docstring.

    ``env`` is the complete environment of the engine (its ``TMPDIR`` is replaced by a private
    directory inside it). ``gpus`` are the lock keys of the GPUs it uses; the wait for them has its own
    limit (``lock_timeout_s``, default ``lock_wait_limit``) and does not count against ``timeout_s``.
    ``kv_stop``: ``kill`` (hard stop at the
    pool) or ``signal`` (graceful, like every other stop). Raises ``LaunchError`` when the command
    cannot be started at all, its log file cannot be created, or the GPUs stay taken.

    ``progress(phase, elapsed_s, timeout_s, log_path)`` is called from the launch loop on each phase
    change (``launch/progress.py``: starting ... cleaned, read from the log as it streams) and about
    once a second in between with the same phase; an exception from it is dropped (and it is not
    called again): progress never fails a launch or its clean-up.

    ``serve`` (with ``stop_when="ready"``): keep the server up once it is ready, for as long as
    ``serve()`` returns True. It is polled from the launch loop (about every 50 ms, on this thread,
    so it must return at once: poll a load generator, do not wait for it); the loop goes on reading
    the engine's output, watching its tree and its exit, and the timeout still counts (give it the
    startup and the served time). When ``serve()`` returns False the answer is known and the tree is
    stopped like at the KV pool (``kv_stop``); ``stopped_by`` is ``ready``. An exception from it
    stops the tree hard and propagates.
    """
    when = as_stop_when(stop_when)
    if serve is not None and when is not StopWhen.READY:
        raise ValueError("serve needs stop_when='ready'")
    if kv_stop not in ("kill", "signal"):
        raise ValueError(f"kv_stop must be 'kill' or 'signal', not {kv_stop!r}")
    if not argv:
        raise LaunchError("empty engine command")
    called_at = time.monotonic()
    wait = lock_wait_limit(timeout_s, grace_s) if lock_timeout_s is None else lock_timeout_s

    def waiting(line: str) -> None:
        """The wait for a GPU, said through ``progress`` (a phase of its own), else ``on_wait``/stderr."""
        if on_wait is not None or progress is None:
            (on_wait or print_wait)(line)
        if progress is not None:
            with contextlib.suppress(Exception):  # progress never fails a launch
                progress(line.removeprefix("gpulayout: "), round(time.monotonic() - called_at, 1), wait, log_path)

    held = acquire(gpus, lock_dir, wait, waiting)
    try:
        w: Watcher = watcher if watcher is not None else LogWatcher(grammars, expected_engines, ranks_per_engine)
        run = _Launch(tuple(str(a) for a in argv), dict(env), w,
                      timeout_s=timeout_s, log_path=log_path,
                      grace_s=adapted_grace(grace_s), base_grace_s=grace_s, stop_when=when, linger_s=linger_s,
                      tail_lines=tail_lines, max_log_bytes=max_log_bytes, max_line_bytes=max_line_bytes,
                      scan_interval_s=scan_interval_s, stop_signal=stop_signal, kv_stop=kv_stop, locks=held,
                      progress=progress, progress_clock=(time.monotonic(), timeout_s), serve=serve)
        return run.run()
    finally:
        held.release()


class _Launch:
    def __init__(self, argv: tuple[str, ...], env: dict[str, str], watcher: Watcher, *, timeout_s: float,
                 log_path: Path | None, grace_s: float, stop_when: StopWhen, linger_s: float, tail_lines: int,
                 base_grace_s: float | None = None,
                 max_log_bytes: int, max_line_bytes: int, scan_interval_s: float, stop_signal: int,
                 kv_stop: str, locks: HeldLocks, progress: Progress | None = None,
                 progress_clock: tuple[float, float] | None = None, serve: Callable[[], bool] | None = None):
        self.argv = argv
        self.serve = serve
        self.env = env
        self.watcher = watcher
        self.timeout_s = timeout_s
        self.log_path = log_path
        self.grace_s = grace_s
        self.base_grace_s = grace_s if base_grace_s is None else base_grace_s
        self.stop_when = stop_when
        self.suspended_s = 0.0   # time stopped by Ctrl-Z: not counted against the timeout
        self.linger_s = linger_s
        self.tail: deque[str] = deque(maxlen=max(1, tail_lines))
        self.max_log_bytes = max_log_bytes
        self.max_line_bytes = max_line_bytes
        self.scan_interval_s = scan_interval_s
        self.stop_signal = stop_signal
        self.kv_stop = kv_stop
        self.locks = locks
        self.feeding = True
        self.log_fd = -1
        self.log_bytes = 0
        self.log_truncated = False
        self.log_error: str | None = None
        self.log_written = 0          # bytes of output in the log
        self.log_lines: int | None = None   # lines read when the log stopped taking them
        self.pending = b""
        self.eof = False
        self.fd = -1
        self.selector: selectors.BaseSelector | None = None
        # the watchdog and what it told us
        self.dog: subprocess.Popen[bytes] | None = None
        self.ctl = -1
        self.status_fd = -1
        self.status_buf = b""
        self.engine_pid = -1
        self.in_cgroup = False
        self.spawn_error: tuple[int, str] | None = None
        self.exit_code: int | None = None
        self.exited = False
        self.empty = False
        self.final: dict[str, Any] | None = None
        self.watchdog_pid = -1               # the watchdog (the guard's child, the engine's parent)
        self.watchdog_died: int | None = None  # its exit status, when its guard saw it end before finishing
        self.tmpdir = ""
        self.cgroup = ""
        self.shm_sent: set[str] = set()
        self.shm_before: ShmListing | None = None  # /dev/shm before the launch, for the fallback clean-up
        # interrupts (set from the signal handler)
        self.interrupted: int | None = None
        self.escalate = False
        # progress (launch/progress.py): the phase read from the log, reported on change and each second
        self.progress = progress
        self.phases = PhaseTracker(kv_from_log=False)  # the pool is the watcher's word (every engine)
        self.progress_since, self.progress_timeout = progress_clock or (time.monotonic(), timeout_s)
        self.next_tick = 0.0

    # -- the watchdog ------------------------------------------------------------------------------
    def _send(self, line: str) -> None:
        if self.ctl >= 0:
            try:
                os.write(self.ctl, (line + "\n").encode())
            except OSError:  # the watchdog is gone: its end of the story is in the status pipe
                pass

    def _close_ctl(self) -> None:
        if self.ctl >= 0:
            with contextlib.suppress(OSError):
                os.close(self.ctl)
            self.ctl = -1

    def _status(self) -> None:
        """Read what the watchdog reported (non-blocking)."""
        while self.status_fd >= 0:
            try:
                chunk = os.read(self.status_fd, 4096)
            except BlockingIOError:
                return
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                if self.selector is not None:
                    with contextlib.suppress(KeyError, ValueError):
                        self.selector.unregister(self.status_fd)
                os.close(self.status_fd)
                self.status_fd = -1
                return
            self.status_buf += chunk
            *lines, self.status_buf = self.status_buf.split(b"\n")
            for raw in lines:
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
                if "spawned" in msg:
                    self.engine_pid = int(msg["spawned"])
                    self.in_cgroup = bool(msg.get("cgroup"))
                    self.watchdog_pid = int(msg.get("watchdog", -1))
                elif "watchdog_died" in msg:  # from the guard: the watchdog ended without finishing
                    self.watchdog_died = int(msg["watchdog_died"])
                    self.watchdog_pid = int(msg.get("watchdog", self.watchdog_pid))
                elif "spawn_error" in msg:
                    self.spawn_error = (int(msg["spawn_error"]), str(msg.get("message", "")))
                elif "exit" in msg:
                    self.exit_code = msg["exit"]
                    self.exited = True
                elif "shm" in msg:  # the watchdog saw the tree hold a name it just created
                    self.shm_sent.add(str(msg["shm"]))
                elif "empty" in msg:
                    self.empty = True
                elif "final" in msg:
                    self.final = msg

    def _dog_gone(self) -> bool:
        """The watchdog ended without finishing (its guard says so), or the guard itself is gone."""
        return self.dog is None or self.watchdog_died is not None or self.dog.poll() is not None

    def _lost_code(self) -> int | None:
        """How the watchdog (else its guard) ended when it was lost: its exit status."""
        if self.watchdog_died is not None:
            return self.watchdog_died
        return self.dog.returncode if self.dog is not None else None

    def interrupt(self, signum: int, escalate: bool) -> None:
        """From the signal handler (main thread, between two bytecodes of whatever ran)."""
        if self.interrupted is None:
            self.interrupted = signum
        if escalate:
            self.escalate = True
            self._send("kill second interrupt")

    def suspend(self) -> None:
        """From the SIGTSTP handler: stop the tree with us."""
        self._send(f"signal {int(signal.SIGSTOP)}")

    def resume(self, stopped_s: float) -> None:
        """From the SIGTSTP handler, after SIGCONT: the tree goes on; its clock did not run meanwhile."""
        self._send(f"signal {int(signal.SIGCONT)}")
        self.suspended_s += stopped_s

    def abort(self) -> None:
        """At exit: let the watchdog kill and clean the tree, and wait for it (no pipe reading)."""
        self.escalate = True
        self._send("kill exit")
        self._close_ctl()
        if self.dog is not None:
            with contextlib.suppress(Exception):
                self.dog.wait(_FINAL_WAIT_S)

    # -- output ----------------------------------------------------------------------------------
    def _write_log(self, chunk: bytes) -> None:
        if self.log_fd < 0 or self.log_truncated:
            return
        room = self.max_log_bytes - self.log_bytes
        if len(chunk) > room:
            self.log_written += self._write_all(chunk[:max(room, 0)])
            if not self.log_truncated:
                self._write_all(b"\n[gpulayout: log truncated here: it passed the size cap]\n")
            self.log_truncated = True
        else:
            self.log_written += self._write_all(chunk)
        self.log_bytes += len(chunk)
        if self.log_truncated and self.log_lines is None:
            self.log_lines = self.watcher.lines  # the lines of this chunk and after are not in it

    def _write_all(self, data: bytes) -> int:
        """Write ``data`` to the log; the bytes written (fewer when a write failed: the log stops there)."""
        view = memoryview(data)
        done = 0
        while view:
            try:
                n = os.write(self.log_fd, view)
            except InterruptedError:
                continue
            except OSError as err:  # disk full (or a file size limit): the launch goes on, the log stops
                self.log_truncated = True
                self.log_error = self.log_error or err.strerror or str(err)
                return done
            view = view[n:]
            done += n
        return done

    def _lines(self, texts: list[str]) -> None:
        """Whole lines the engine printed: to the watcher and the phase tracker a chunk at a time (each
        skips a block where nothing can matter with one search), the last ones kept raw for the tail
        (cleaned when the result is made: a flood costs no per-line work here)."""
        if not self.feeding or not texts:
            return
        self.watcher.feed_lines(texts)
        self.tail.extend(texts[-(self.tail.maxlen or 1):])
        if self.progress is not None:
            self.phases.feed_lines(texts, self._report)  # each phase it passes through is said

    # -- progress --------------------------------------------------------------------------------------
    def _report(self) -> None:
        """Tell ``progress`` the phase (on a change, or as the clock's tick)."""
        if self.progress is None:
            return
        now = time.monotonic()
        self.next_tick = now + 1.0
        try:
            self.progress(self.phases.phase, round(now - self.progress_since, 1), self.progress_timeout,
                          self.log_path)
        except Exception:  # a reporter's trouble is never the launch's
            self.progress = None

    def _phase(self, phase: str) -> None:
        if self.phases.advance(phase):
            self._report()

    def _tick(self) -> None:
        if self.progress is not None and time.monotonic() >= self.next_tick:
            self._report()

    def _pump(self, wait_s: float) -> None:
        """Read what the engine printed and the watchdog said (waiting up to ``wait_s``)."""
        if self.selector is None or not self.selector.get_map():
            time.sleep(wait_s)
            return
        events = self.selector.select(timeout=wait_s)
        if any(key.fd == self.status_fd for key, _ in events):
            self._status()
        if self.eof or not any(key.fd == self.fd for key, _ in events):
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
                    self._lines([self.pending.decode("utf-8", "replace")])
                    self.pending = b""
                return
            self._write_log(chunk)
            data = self.pending + chunk
            cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1   # \r\n, \r and \n end a line
            self.pending = data[cut:]
            if cut:  # one decode for the chunk's whole lines (a character never spans a line break)
                text = data[:cut].decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
                self._lines(text.split("\n")[:-1])
            while len(self.pending) > self.max_line_bytes:  # a "line" that never ends
                self._lines([self.pending[:self.max_line_bytes].decode("utf-8", "replace")])
                self.pending = self.pending[self.max_line_bytes:]

    # -- lifecycle -------------------------------------------------------------------------------------
    def _open_log(self) -> None:
        if self.log_path is None:
            return
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                  | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            raise LaunchError(f"log file {self.log_path} already exists (a file or a link planted there?): "
                              f"refusing to overwrite it or follow it; choose another log directory") from None
        except OSError as err:
            raise LaunchError(f"cannot create the log file {self.log_path}: {err.strerror or err}") from None

    def _close_log(self, remove: bool = False) -> None:
        if self.log_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.log_fd)
            self.log_fd = -1
            if remove and self.log_path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self.log_path)

    def _private_tmp(self) -> None:
        """A fresh 0700 ``TMPDIR`` for the engine, inside the one it would have used when that is short
        enough: vLLM binds ZMQ IPC sockets at ``$TMPDIR/<uuid4>`` (``vllm/utils/network_utils.py``
        ``get_open_zmq_ipc_path``), and a Unix socket path has at most 107 bytes."""
        base = self.env.get("TMPDIR") or tempfile.gettempdir()
        candidates = [base] if len(base) + _TMP_NAME_LEN + 37 <= _SOCKET_PATH_MAX else []
        candidates += [tempfile.gettempdir(), "/tmp"]
        for where in candidates:
            try:
                self.tmpdir = tempfile.mkdtemp(prefix="gpulayout-", dir=where)
                break
            except OSError:
                continue
        else:
            raise LaunchError(f"cannot create a temporary directory for the engine in {base}")
        self.env["TMPDIR"] = self.tmpdir

    def _start(self) -> None:
        """Start the watchdog, which starts the engine; raise ``LaunchError`` if the engine cannot start."""
        ctl_r = st_w = -1
        try:
            check_spawnable(self.argv, self.env)
            self._private_tmp()
            self.cgroup = make_cgroup()
            ctl_r, self.ctl = os.pipe()
            self.status_fd, st_w = os.pipe()
            self.shm_before = shm_listing()
            # the guard starts the watchdog, which starts the engine (``helpers.py``, ``watchdog.Guard``); the
            # engine's environment goes in the spec, the two keepers run with a clean one
            spec = {"watchdog": WATCHDOG, "engine": list(self.argv), "env": self.env, "control": ctl_r,
                    "status": st_w, "cgroup": self.cgroup, "tmpdir": self.tmpdir, "keep": list(self.locks.fds)}
            self.dog = start_helper("guard", spec, pass_fds=(ctl_r, st_w, *self.locks.fds), where=self.tmpdir,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except BaseException as err:
            # whatever went wrong (an OSError, a NUL byte in an argument or the environment, an
            # interrupt): nothing was started, so what we made so far is ours to remove
            self._close_pipes()
            self._cleanup_self()
            if isinstance(err, OSError):
                raise LaunchError(f"cannot start the engine's watchdog ({helper_python()}): "
                                  f"{err.strerror or err}") from None
            if isinstance(err, ValueError):
                raise LaunchError(f"cannot start the engine {self.argv[0]!r}: {err}") from None
            raise
        finally:
            for fd in (ctl_r, st_w):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        assert self.dog.stdout is not None
        self.fd = self.dog.stdout.fileno()
        os.set_blocking(self.fd, False)
        os.set_blocking(self.status_fd, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)
        self.selector.register(self.status_fd, selectors.EVENT_READ)
        deadline = time.monotonic() + _SPAWN_WAIT_S
        while self.engine_pid < 0 and self.spawn_error is None and time.monotonic() < deadline:
            if self.status_fd < 0 or self.watchdog_died is not None:
                break
            ready = self.selector.select(timeout=0.05)
            if any(key.fd == self.status_fd for key, _ in ready):
                self._status()
        if self.engine_pid > 0:
            return
        # the engine could not be started: let the watchdog clean up, and say why
        self._finish_dog()
        self._close_pipes()
        self._cleanup_self()
        name = self.argv[0]
        if self.spawn_error is None:
            raise LaunchError(f"cannot start the engine {name!r}: its watchdog did not report (exit code "
                              f"{self._lost_code()})")
        code, message = self.spawn_error
        if code == errno.ENOENT:
            raise LaunchError(f"cannot start the engine: {name!r} was not found")
        if code in (errno.EACCES, errno.EPERM, errno.ENOEXEC):
            raise LaunchError(f"cannot start the engine: {name!r} is not executable")
        raise LaunchError(f"cannot start the engine {name!r}: {message}")

    def _cleanup_self(self) -> None:
        """What we made ourselves, when no watchdog took it over (or it died)."""
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        _remove_cgroup(self.cgroup)
        self._close_ctl()

    def _close_pipes(self) -> None:
        if self.selector is not None:
            self.selector.close()
            self.selector = None
        if self.dog is not None and self.dog.stdout is not None:
            with contextlib.suppress(OSError):
                self.dog.stdout.close()
        if self.status_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.status_fd)
            self.status_fd = -1

    def _finish_dog(self, why: str = "done") -> None:
        """Ask the watchdog to kill and clean what is left, read its report, wait for it to exit."""
        self._send(f"kill {why}")
        self._close_ctl()
        deadline = time.monotonic() + _FINAL_WAIT_S
        while self.final is None and self.status_fd >= 0 and time.monotonic() < deadline:
            self._pump(0.05)
        if self.final is not None and self.final.get("leftover"):
            return  # it stays, holding the GPU locks, until the survivors of SIGKILL are gone
        if self.dog is not None:
            try:
                self.dog.wait(max(deadline - time.monotonic(), 1.0))
            except subprocess.TimeoutExpired:
                self.dog.kill()
                self.dog.wait()

    def run(self) -> LaunchResult:
        _install_handlers()
        self._open_log()
        t0 = time.monotonic()
        started_at = time.time()
        _ACTIVE[id(self)] = self  # from here on a signal stops this launch (and is redelivered after)
        try:
            try:
                self._start()
            except BaseException:
                self._close_log(remove=True)  # no log for a command that never ran
                raise
            return self._run(t0, started_at)
        finally:
            _ACTIVE.pop(id(self), None)
            if self.interrupted is not None:
                _redeliver(self.log_path)

    def _run(self, t0: float, started_at: float) -> LaunchResult:
        assert self.dog is not None
        # the private TMPDIR marks every process of the tree, also one orphaned when the watchdog is killed
        tree = ProcessTree(self.dog.pid, marker=f"TMPDIR={self.tmpdir}" if self.tmpdir else "")
        stopped_by = StopReason.TIMEOUT
        kv_at: float | None = None
        stop_at = time.monotonic()
        hard = True  # an unexpected exception ends in the hard stop
        note: str | None = None
        escalated = False
        grace_used: float | None = None
        self._report()  # starting
        try:
            stopped_by, kv_at = self._watch(tree, t0)
            self.feeding = False  # what it prints while it stops is not part of its startup
            self._phase(STOPPING)
            stop_at = time.monotonic()
            # after a served load the answer is known too: the same stop as at the KV pool
            hard = (stopped_by is StopReason.KV or (stopped_by is StopReason.READY and self.serve is not None)) \
                and self.kv_stop == "kill"
            if not hard:
                grace_used = self.grace_s
                escalated, note = self._graceful(tree)
        finally:
            self.feeding = False
            self._finish_dog("kv" if hard else "stopped")
            leftovers = self._verify(tree)
            ended_at = time.time()
            t_end = time.monotonic()
            self._close_pipes()
            self._log_end(stopped_by, hard, escalated, t_end - stop_at, leftovers)
            self._close_log()
            self._phase(CLEANED)
        final = self.final or {}
        lost = stopped_by is StopReason.WATCHDOG
        return LaunchResult(
            argv=self.argv, pid=self.engine_pid,
            returncode=self.exit_code if self.exited else None if lost else -signal.SIGKILL,
            seconds_to_kv=None if kv_at is None else round(kv_at - t0, 3),
            seconds_total=round(t_end - t0, 3), log=self.watcher.result(), log_path=self.log_path,
            tail=tuple(clean(t) for t in self.tail), timed_out=stopped_by is StopReason.TIMEOUT,
            leftover_pids=tuple(leftovers),
            stopped_by=stopped_by, started_at=started_at, ended_at=ended_at, lines=self.watcher.lines,
            log_truncated=self.log_truncated, seconds_to_stop=round(stop_at - t0, 3),
            stop="kill" if hard else "signal", escalated=escalated, stop_note=note, grace_s=grace_used,
            cleaned=tuple(final.get("cleaned", ())), containment="cgroup" if self.in_cgroup else "subreaper",
            lock_wait_s=round(self.locks.waited_s, 3),
            watchdog_returncode=self._lost_code() if lost else None,
            suspended_s=round(self.suspended_s, 3), log_error=self.log_error, log_bytes=self.log_written,
            log_lines=self.watcher.lines if self.log_lines is None else self.log_lines,
        )

    def _log_end(self, stopped_by: StopReason, hard: bool, escalated: bool, teardown_s: float,
                 leftovers: list[int]) -> None:
        """One closing line, so a reader of the log knows it is complete and how the launch ended."""
        if self.log_fd < 0:
            return
        why = str(stopped_by)
        if self.interrupted is not None:
            why = f"interrupt (signal {_signal_name(self.interrupted)} to the launcher)"
        elif stopped_by is StopReason.WATCHDOG and self.dog is not None:
            code = self._lost_code()
            how_dog = _signal_name(-code) if code is not None and code < 0 else f"exit code {code}"
            if self.watchdog_died is not None:
                why = (f"the watchdog (pid {self.watchdog_pid}) was killed from outside ({how_dog}); its guard "
                       f"(pid {self.dog.pid}) stopped the tree")
            else:
                why = (f"the watchdog's guard (pid {self.dog.pid}) was killed from outside ({how_dog}); the "
                       f"launcher stopped the tree")
        how = "SIGKILL at once (verdict known)" if hard else (
            f"{_signal_name(self.stop_signal)}, grace {self.grace_s:g} s"
            + ((", then SIGKILL (a second interrupt)" if self.escalate else ", then SIGKILL") if escalated else ""))
        cleaned = len((self.final or {}).get("cleaned", ()))
        left = f"; LEFT RUNNING: {leftovers}" if leftovers else ""
        unattributed = (self.final or {}).get("unattributed") or []
        if unattributed:  # new, unheld, engine-named: perhaps the engine's, perhaps a neighbour's
            more = f" and {len(unattributed) - 3} more" if len(unattributed) > 3 else ""
            shown = ", ".join(unattributed[:3]) + more
            left += (f"; left in place (appeared during the launch, held by no process, but not seen used "
                     f"by the engine): {shown}")
        if self.log_error:  # if room came back: say what is missing above this line
            left += f"; this log stopped at {self.log_written:,} bytes ({self.log_error}): lines are missing above"
        self._write_all(f"[gpulayout: launch ended: {why}; stop: {how}; tree gone {teardown_s:.1f} s later; "
                        f"cleaned {cleaned} item(s){left}]\n".encode())

    def _scan(self, tree: ProcessTree, maps: bool) -> None:
        tree.scan()
        if not maps:
            return
        for pid in tree.alive():
            if self.dog is not None and pid in (self.dog.pid, self.watchdog_pid):
                continue
            for name in shm_names(pid) - self.shm_sent:
                self.shm_sent.add(name)
                self._send(f"shm {name}")

    def _watch(self, tree: ProcessTree, t0: float) -> tuple[StopReason, float | None]:
        next_scan = 0.0
        next_maps = time.monotonic() + 0.5
        reason: StopReason | None = None
        linger_until = 0.0
        kv_at: float | None = None
        w = self.watcher
        while True:
            now = time.monotonic()
            deadline = t0 + self.timeout_s + self.suspended_s
            if now >= next_scan:
                maps = now >= next_maps
                self._scan(tree, maps)
                next_scan = now + self.scan_interval_s
                if maps:
                    next_maps = now + _MAPS_INTERVAL_S
            self._pump(0.05 if reason is None else min(0.05, max(linger_until - now, 0.0)))
            now = time.monotonic()
            if kv_at is None and w.kv_complete:
                kv_at = now
                self._phase(KV_REPORTED)
            self._tick()
            if self.interrupted is not None:
                return StopReason.INTERRUPT, kv_at
            if reason is None:
                if w.failed:
                    reason, linger_until = StopReason.ERROR, now + self.linger_s
                elif self.stop_when is StopWhen.KV and w.kv_complete:
                    reason, linger_until = StopReason.KV, now + self.linger_s   # concurrency line, late ranks
                elif self.stop_when is StopWhen.READY and w.ready and (self.serve is None or not self.serve()):
                    reason, linger_until = StopReason.READY, now
                elif self.exited:
                    reason, linger_until = StopReason.EXIT, now + 0.3           # what it printed last
                elif self._dog_gone():  # killed from outside: it never said the engine exited
                    reason, linger_until = StopReason.WATCHDOG, now + 0.3
                elif now >= deadline:
                    reason, linger_until = StopReason.TIMEOUT, now
            if reason is not None:
                if now >= linger_until or (self.eof and (self.exited or self._dog_gone())):
                    if w.failed:
                        reason = StopReason.ERROR  # also when it failed right after reporting its pool
                    elif self.exited and reason in (StopReason.KV, StopReason.READY):
                        # it ended by itself before it was stopped (in the linger after its pool line, or
                        # before it served): an engine that dies after its pool has not started
                        reason = StopReason.EXIT
                    return reason, kv_at

    def _graceful(self, tree: ProcessTree) -> tuple[bool, str | None]:
        """``stop_signal`` to the whole tree, up to the grace for it to be gone; (escalated, why)."""
        self._status()
        if self.escalate:  # a second interrupt before the stop began: the watchdog SIGKILLed the tree
            return True, "a second interrupt came before the stop began: the engine was SIGKILLed"
        if self.empty or self._dog_gone():
            return False, None
        t = time.monotonic()
        self._send(f"signal {self.stop_signal}")
        next_scan = 0.0
        while not self.empty and not self.escalate and not self._dog_gone() \
                and time.monotonic() < t + self.grace_s + self.suspended_s:
            self._pump(0.05)
            self._tick()
            if time.monotonic() >= next_scan:  # late shm names (workers map segments while they shut down)
                self._scan(tree, maps=True)
                next_scan = time.monotonic() + _MAPS_INTERVAL_S
        took = time.monotonic() - t
        if self.escalate:  # before ``empty``: the tree is gone because the second interrupt's SIGKILL ended it
            return True, (f"a second interrupt cut the stop short after {took:.1f} s: the engine was "
                          f"SIGKILLed")
        if self.empty:
            _MEASURED_STOPS.append(took)
            return False, None
        # it took longer than the grace: back off, from the grace asked for (never compounding)
        _MEASURED_STOPS.append(2 * self.base_grace_s)
        return True, (f"the engine did not stop within its {self.grace_s:g} s grace after "
                      f"{_signal_name(self.stop_signal)}: it was SIGKILLed (raise grace_s; the next "
                      f"launch in this run waits {adapted_grace(self.grace_s):g} s)")

    def _verify(self, tree: ProcessTree) -> list[int]:
        """What is still alive of the tree. Where the watchdog could not finish, do its work ourselves."""
        dog_pid = self.dog.pid if self.dog is not None else -1
        final = self.final
        if final is None:  # the watchdog died before its report (killed from outside): fall back
            def frozen(pids: list[int]) -> None:  # what the frozen tree maps is what it may have made
                for pid in pids:
                    if pid != dog_pid:
                        self.shm_sent.update(shm_names(pid))
                if self.cgroup:
                    with contextlib.suppress(OSError):
                        Path(self.cgroup, "cgroup.kill").write_text("1")

            # its orphans are init's now: find them by what they were seen as and by the TMPDIR they
            # inherited, freeze them, SIGKILL them (``ProcessTree.sweep``)
            tree.sweep(_FINAL_WAIT_S / 2, frozen)
            if not [p for p in tree.alive() if p != dog_pid] and not (self.cgroup and cgroup_procs(self.cgroup)):
                for name in shm_to_remove(self.shm_sent, self.shm_before, set(tree.alive()))[0]:
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join("/dev/shm", name))
                self._cleanup_self()
        alive = set(final.get("leftover", ()) if final else ())
        alive.update(p for p in tree.alive() if p != dog_pid)
        left = sorted(p for p in alive if pid_alive(p))
        if left and not (final and final.get("leftover") and not self._dog_gone()):
            self._keep_locks(left)
        return left

    def _keep_locks(self, survivors: list[int]) -> None:
        """Survivors of SIGKILL and no watchdog to hold the GPU locks until they are gone: a keeper does
        (``watchdog.py hold``, started like the guard: ``helpers.py``), so the next launch never starts beside
        them, and then removes the private ``TMPDIR`` and the cgroup the survivors may have been using."""
        if not (self.locks.fds or self.tmpdir or self.cgroup):
            return
        table = process_table()
        spec = {"pids": {str(p): table[p].start for p in survivors if p in table}, "keep": list(self.locks.fds),
                "tmpdir": self.tmpdir, "cgroup": self.cgroup}
        with contextlib.suppress(OSError, ValueError):
            start_helper("hold", spec, pass_fds=self.locks.fds)
