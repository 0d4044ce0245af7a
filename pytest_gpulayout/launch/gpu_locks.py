"""Per-GPU locks and a free local port: what keeps concurrent launches from stepping on each other.

Two launches that share a GPU must never overlap, also across pytest-xdist workers and separate
pytest runs, because each measures the memory the other is using. So every launch holds an
exclusive ``flock`` per physical GPU (its NVML UUID read at launch time, else its index; ``launch/argv.py``) until
its whole tree is gone, in a 0700 directory of the user, taken in sorted order so two launches
wanting overlapping sets cannot deadlock, and waited for with a limit and a message.
The engine listens on 127.0.0.1 only, on a port that is free when it is chosen.

Split out of ``launcher``, which re-exports these names; nothing here starts a process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_gpulayout.errors import LaunchError


def default_lock_dir() -> Path:
    """``$GPULAYOUT_LOCK_DIR``, else a directory of this user's: ``$XDG_RUNTIME_DIR`` or the temp dir.

    Per user, mode 0700: a lock file anyone can open is a lock anyone can hold (a stray ``flock``
    on a world-writable file, or a FIFO planted at its path, used to block every launch). Launches of
    different users on one GPU therefore do not see each other's locks; the GPU's memory check
    (``startup.memory_not_released``) and the engines' own free-memory checks still do.
    """
    env = os.environ.get("GPULAYOUT_LOCK_DIR")
    if env:
        return Path(env)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "pytest-gpulayout-locks"
    return Path(tempfile.gettempdir()) / f"pytest-gpulayout-locks-{os.getuid()}"


def _lock_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)[:120] or "gpu"


def gpu_label(key: str) -> str:
    """``index-0`` -> ``GPU 0``; a UUID stays as it is (``GPU GPU-8f3c...``); ``host``: no GPU was known."""
    if key == "host":
        return "the host (no GPU known)"
    return f"GPU {key[len('index-'):]}" if key.startswith("index-") else f"GPU {key}"


def _private_dir(directory: Path) -> None:
    """Create ``directory`` 0700, and refuse one that is not a directory of ours or that others may write."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(directory)
    except OSError as err:
        raise LaunchError(f"cannot create the GPU lock directory {directory}: {err.strerror or err}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise LaunchError(f"GPU lock directory {directory} is not a directory (a symlink?): remove it or set "
                          f"GPULAYOUT_LOCK_DIR")
    if st.st_uid != os.getuid():
        raise LaunchError(f"GPU lock directory {directory} belongs to uid {st.st_uid}, not to you: set "
                          f"GPULAYOUT_LOCK_DIR to a directory of your own")
    if stat.S_IMODE(st.st_mode) & 0o077:
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o700)


def _holder(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text.split()[0]) if text else None
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class HeldLocks:
    """Open lock files (each holds its ``flock`` while any copy of its descriptor is open)."""

    fds: tuple[int, ...]
    names: tuple[str, ...]
    waited_s: float

    def release(self) -> None:
        """Close our descriptors. No ``LOCK_UN``: a watchdog holding a copy keeps the lock until the tree is gone."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def print_wait(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def acquire(keys: Iterable[str], lock_dir: Path | None = None, timeout_s: float | None = None,
            on_wait: Callable[[str], None] | None = None) -> HeldLocks:
    """Take an exclusive ``flock`` per GPU key (``index-N`` or an NVML UUID), in sorted order.

    Never blocks in ``open`` (``O_NONBLOCK``: a FIFO at the path cannot hang us; it is refused, as is
    anything but a regular file of ours) nor in ``flock`` (``LOCK_NB``, polled). Waits at most
    ``timeout_s`` (None: as long as it takes), saying once per GPU ``waiting for GPU 0 held by pid N``
    through ``on_wait`` (default: a line on stderr). The holder writes its pid into the file.
    """
    by_name: dict[str, str] = {}
    for k in keys:
        by_name.setdefault(_lock_name(k), k)
    names = sorted(by_name)
    directory = lock_dir if lock_dir is not None else default_lock_dir()
    say = on_wait or print_wait
    t0 = time.monotonic()
    deadline = None if timeout_s is None else t0 + timeout_s
    fds: list[int] = []
    try:
        if names:
            _private_dir(directory)
        for name in names:
            label = gpu_label(by_name[name])
            path = directory / f"{name}.lock"
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
            except OSError as err:
                raise LaunchError(f"cannot open the lock file of {label} {path}: {err.strerror or err} "
                                  f"(remove it if it is not a lock file)") from None
            fds.append(fd)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                raise LaunchError(f"lock file of {label} {path} is not a regular file of yours: remove it")
            if stat.S_IMODE(st.st_mode) != 0o600:
                with contextlib.suppress(OSError):
                    os.fchmod(fd, 0o600)
            said = False
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = _holder(fd)
                    who = f"pid {holder}" if holder is not None else "another process"
                    if deadline is not None and time.monotonic() >= deadline:
                        raise LaunchError(f"{label} is still held by {who} after {time.monotonic() - t0:.1f} s "
                                          f"(lock {path}); that launch has not finished: wait for it, or stop "
                                          f"it") from None
                    if not said:
                        limit = f" (up to {timeout_s:.0f} s)" if timeout_s is not None else ""
                        say(f"gpulayout: waiting for {label} held by {who}{limit}")
                        said = True
                    time.sleep(0.05)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except BaseException:
        HeldLocks(tuple(fds), (), 0.0).release()
        raise
    return HeldLocks(tuple(fds), tuple(names), time.monotonic() - t0)


@contextlib.contextmanager
def gpu_locks(keys: Iterable[str], lock_dir: Path | None = None,
              timeout_s: float | None = None) -> Iterator[tuple[str, ...]]:
    """Hold an exclusive ``flock`` per GPU key for the block (see ``acquire``); yields the lock names."""
    held = acquire(keys, lock_dir, timeout_s)
    try:
        yield held.names
    finally:
        held.release()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the engine binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
