"""Per-GPU locks and a free local port: what keeps concurrent launches from stepping on each other.

Two launches that share a GPU must never overlap, also across pytest-xdist workers and separate
pytest runs, because each measures the memory the other is using. So every launch holds an
exclusive ``flock`` per GPU for its whole run, in one machine-wide directory (GPUs are
machine-wide), taken in sorted order so two launches wanting overlapping sets cannot deadlock.
The engine listens on 127.0.0.1 only, on a port that is free when it is chosen.

Split out of ``launcher``, which re-exports these names; nothing here starts a process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from pytest_gpulayout.errors import LaunchError


def default_lock_dir() -> Path:
    """``$GPULAYOUT_LOCK_DIR``, else one machine-wide directory (GPUs are machine-wide), else per user."""
    env = os.environ.get("GPULAYOUT_LOCK_DIR")
    if env:
        return Path(env)
    shared = Path(tempfile.gettempdir()) / "pytest-gpulayout-locks"
    try:
        shared.mkdir(mode=0o1777, exist_ok=True)
        if shared.stat().st_uid == os.getuid():
            with contextlib.suppress(OSError):
                shared.chmod(0o1777)
        if os.access(shared, os.W_OK | os.X_OK):
            return shared
    except OSError:
        pass
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime else Path(tempfile.gettempdir())
    return base / f"pytest-gpulayout-locks-{os.getuid()}"


def _lock_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:120] or "gpu"


@contextlib.contextmanager
def gpu_locks(keys: Iterable[str], lock_dir: Path | None = None,
              timeout_s: float | None = None) -> Iterator[tuple[str, ...]]:
    """Hold an exclusive ``flock`` per GPU key (a UUID, or ``index-N``) for the block.

    Taken in sorted order, so two launches asking for overlapping GPU sets cannot deadlock.
    ``timeout_s`` None waits as long as it takes (the other launch has its own timeout).
    """
    names = sorted({_lock_name(k) for k in keys})
    directory = lock_dir if lock_dir is not None else default_lock_dir()
    fds: list[int] = []
    try:
        if names:
            directory.mkdir(parents=True, exist_ok=True)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for name in names:
            path = directory / f"{name}.lock"
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC, 0o644)
            fds.append(fd)
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if deadline is not None and time.monotonic() > deadline:
                        raise LaunchError(f"GPU lock {path} is still held by another launch after "
                                          f"{timeout_s:.0f} s") from None
                    time.sleep(0.05)
        yield tuple(names)
    finally:
        for fd in reversed(fds):
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the engine binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
