"""An engine's whole process tree, read from ``/proc``, so that stopping it leaves nothing behind.

Killing the process group is not enough: engines start workers that call ``setsid()`` or double-fork
to leave the group, and a pid can be reused by an unrelated process between two looks. So the
tree is tracked by walking ``/proc`` (children of children, plus orphans of the group or session),
and every pid is remembered with its start time, which tells a live pid from a reused one.

Split out of ``launcher`` so the launch code reads as the launch; the launcher is the only user of
``ProcessTree``. Linux only for the walk; without ``/proc`` only the process group is known.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` the tree walk needs."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    start: int      # start time in clock ticks since boot: tells a live pid from a reused one
    state: str


def _read_stat(pid: int) -> ProcStat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    try:
        fields = data[data.rindex(b")") + 2:].split()
        return ProcStat(pid, int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]), fields[0].decode())
    except (ValueError, IndexError):
        return None


def process_table() -> dict[int, ProcStat]:
    """Every process visible in ``/proc`` (empty where there is no ``/proc``)."""
    table: dict[int, ProcStat] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if name.isdigit():
            st = _read_stat(int(name))
            if st is not None:
                table[st.pid] = st
    return table


def _dead(st: ProcStat | None) -> bool:
    return st is None or st.state in ("Z", "X", "x")


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    st = _read_stat(pid)
    return not _dead(st) if os.path.isdir("/proc") else True


class ProcessTree:
    """The engine's process tree: the group leader plus every descendant ever seen."""

    def __init__(self, pid: int):
        self.root = pid
        self.known: dict[int, int] = {}     # pid -> start ticks
        st = _read_stat(pid)
        self.root_start = st.start if st else 0
        if st:
            self.known[pid] = st.start

    def scan(self) -> dict[int, ProcStat]:
        """Add descendants (also those that left the group) and session members to ``known``."""
        table = process_table()
        children: dict[int, list[int]] = {}
        for st in table.values():
            children.setdefault(st.ppid, []).append(st.pid)
        stack = [p for p, start in self.known.items() if p in table and table[p].start == start]
        while stack:
            p = stack.pop()
            for c in children.get(p, ()):
                if c not in self.known and not _dead(table[c]):
                    self.known[c] = table[c].start
                    stack.append(c)
        for st in table.values():  # orphans of the group or session (double fork): reparented to init
            if (st.pgid == self.root or st.sid == self.root) and st.pid not in self.known \
                    and st.start >= self.root_start and not _dead(st):
                self.known[st.pid] = st.start
        return table

    def alive(self, table: Mapping[int, ProcStat] | None = None) -> list[int]:
        table = process_table() if table is None else table
        if not table and not os.path.isdir("/proc"):  # no /proc: the group is all we know
            try:
                os.killpg(self.root, 0)
                return [self.root]
            except OSError:
                return []
        out = []
        for pid, start in self.known.items():
            st = table.get(pid)
            if st is not None and st.start == start and not _dead(st):
                out.append(pid)
        for st in table.values():
            if st.pgid == self.root and st.pid not in out and not _dead(st):
                out.append(st.pid)
        return sorted(out)

    def signal(self, sig: int) -> None:
        """``sig`` to the group, then to every live tracked process outside it (checked for pid reuse)."""
        with contextlib.suppress(OSError):
            os.killpg(self.root, sig)
        table = self.scan()
        for pid in self.alive(table):
            st = table.get(pid)
            if st is not None and st.pgid != self.root:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)

    def kill_now(self, grace_s: float = 2.0) -> None:
        """For signal handlers and exit hooks: SIGTERM, a short wait, SIGKILL."""
        self.scan()
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.alive():
            _reap(self.root)
            time.sleep(0.05)
        if self.alive():
            self.signal(signal.SIGKILL)
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and self.alive():  # SIGKILL is not instant
                _reap(self.root)
                time.sleep(0.02)
        _reap(self.root)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
