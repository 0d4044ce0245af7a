"""Starting the watchdog's guard and the lock keeper: processes that must outlive whatever kills us.

Both run ``watchdog.py`` (``guard`` and ``hold``), but not by its path: a Python started as
``python -I -S - guard FD`` reads the program from its standard input (an unlinked copy of
``watchdog.py``) and its options from the unlinked JSON file ``FD``. Its command line therefore names
nothing of this project (no path, no ``gpulayout-`` TMPDIR or cgroup), and ``pkill -9 -f
pytest_gpulayout`` or ``pkill -f gpulayout``, which take the launcher and its watchdog at the same moment,
leave it to stop the engine's tree, clean up after it and hold the GPU locks until it is gone
(reliability round 4, item 2). The interpreter is the base one under a virtual environment
(``sys._base_executable``, symlinks resolved), whose path does not carry the project's folder either;
the programs use the standard library only.

Their environment is clean (``watchdog.clean_env``): the engine's (``launch.env``, an ``LD_PRELOAD``
there) reaches the engine through the spec file, never these processes.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from pytest_gpulayout.launch.watchdog import clean_env

WATCHDOG = str(Path(__file__).with_name("watchdog.py"))


@functools.lru_cache(maxsize=1)
def _source() -> bytes:
    return Path(WATCHDOG).read_bytes()


def helper_python() -> str:
    """The interpreter for the helpers: the base one of a virtual environment where it runs (the standard
    library is all they import), else this one."""
    base = getattr(sys, "_base_executable", "") or sys.executable
    real = os.path.realpath(base)
    return real if os.path.isfile(real) and os.access(real, os.X_OK) else sys.executable


def check_spawnable(argv: Sequence[str], env: Mapping[str, str]) -> None:
    """Raise ``ValueError`` where ``subprocess`` would for the engine's own spawn (a NUL byte, a ``=`` in a
    variable's name): the launcher says so before it starts anything, as one line."""
    for arg in argv:
        if "\0" in arg:
            raise ValueError("embedded null byte")
    for key, value in env.items():
        if "\0" in key or "\0" in value:
            raise ValueError("embedded null byte")
        if "=" in key or not key:
            raise ValueError(f"illegal environment variable name {key!r}")


def unlinked(data: bytes, where: str | None = None) -> IO[bytes]:
    """An unnamed file holding ``data``, positioned at its start: in memory (``memfd_create``: a full disk
    does not stop a launch's clean-up from starting), else an unnamed 0600 file in ``where``."""
    memfd = getattr(os, "memfd_create", None)
    f: IO[bytes]
    try:
        if memfd is None:
            raise OSError("no memfd_create")
        f = open(memfd("gl-spec"), "w+b")  # handed to the caller, who closes it
    except OSError:
        f = tempfile.TemporaryFile(dir=where if where and os.path.isdir(where) else None)
    f.write(data)
    f.flush()
    f.seek(0)
    return f


def start_helper(mode: str, spec: Mapping[str, Any], *, pass_fds: Sequence[int] = (), where: str | None = None,
                 stdout: int | None = subprocess.DEVNULL, stderr: int | None = subprocess.DEVNULL,
                 ) -> subprocess.Popen[bytes]:
    """``python -I -S - <mode> FD`` in a session of its own, with ``watchdog.py`` on its stdin and ``spec``
    (JSON) in ``FD``; ``pass_fds`` are inherited as they are numbered here (the spec names them)."""
    with unlinked(_source(), where) as program, unlinked(json.dumps(dict(spec)).encode(), where) as options:
        fd = options.fileno()
        return subprocess.Popen([helper_python(), "-I", "-S", "-", mode, str(fd)], stdin=program, stdout=stdout,
                                stderr=stderr, env=clean_env(), start_new_session=True,
                                pass_fds=(fd, *pass_fds))
