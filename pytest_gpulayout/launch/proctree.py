"""An engine's whole process tree, read from ``/proc``, so that stopping it leaves nothing behind.

Killing the process group is not enough: engines start workers that call ``setsid()`` or double-fork
to leave the group, and a pid can be reused by an unrelated process between two looks. So the
tree is tracked by walking ``/proc`` (children of children, plus orphans of its groups and sessions),
and every pid is remembered with its start time, which tells a live pid from a reused one. A signal
goes to a remembered pid only while it is still the process that started then (through a pidfd where
the kernel has them, so a pid reused between the check and the signal is never hit), and to a process
group only while a live process of the tree is in it (a group id cannot be reused while it has a
member).

When the watchdog that owns the tree is gone (SIGKILLed from outside), its orphans are reparented to
init and nothing links a worker that left the group and the session to the tree any more, except
what it inherited: the launch's private ``TMPDIR`` in its environment (``marker``). ``sweep`` finds
the tree by everything at once (remembered pids, their children, members of their groups and
sessions, the marker), freezes each process it finds (SIGSTOP: a frozen process cannot fork a new
one), looks again until nothing new appears, and only then SIGKILLs them all.

Split out of ``launcher`` so the launch code reads as the launch; the launcher is the only user of
``ProcessTree``. Linux only for the walk; without ``/proc`` only the process group is known.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
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


def _environ_has(pid: int, marker: bytes) -> bool:
    """Whether ``pid``'s environment (as it was exec'd) holds the entry ``marker`` (``KEY=value``)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return marker in data.split(b"\0")


def signal_checked(pid: int, start: int, sig: int) -> bool:
    """``sig`` to ``pid`` only while it is the process that started at ``start`` (clock ticks since
    boot). Through a pidfd where the kernel has them: the pidfd is opened first and the start time
    checked after, so a pid reused in between is never signalled. False when it was not sent."""
    pidfd = -1
    opener = getattr(os, "pidfd_open", None)
    if opener is not None:
        try:
            pidfd = opener(pid)
        except ProcessLookupError:
            return False
        except OSError:  # ENOSYS / EINVAL on old kernels: the start check alone
            pidfd = -1
    try:
        st = _read_stat(pid)
        if st is None or st.start != start or _dead(st):
            return False
        if pidfd >= 0:
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(pid, sig)
        return True
    except OSError:
        return False
    finally:
        if pidfd >= 0:
            os.close(pidfd)


class ProcessTree:
    """The engine's process tree: the group leader plus every descendant ever seen.

    ``marker``: an environment entry (``KEY=value``) only the tree's processes carry (the launcher
    gives its private ``TMPDIR``); ``sweep`` finds orphans by it.
    """

    def __init__(self, pid: int, marker: str = ""):
        self.root = pid
        self.known: dict[int, int] = {}     # pid -> start ticks
        self.marker = marker.encode() if marker else b""
        st = _read_stat(pid)
        self.root_start = st.start if st else 0
        if st:
            self.known[pid] = st.start
        self._own = {os.getpid(), os.getpgid(0), os.getsid(0)}  # never ours to sweep
        self._marked: dict[tuple[int, int], bool] = {}

    def _live_known(self, table: Mapping[int, ProcStat]) -> dict[int, int]:
        out = {}
        for pid, start in self.known.items():
            st = table.get(pid)
            if st is not None and st.start == start and not _dead(st):
                out[pid] = start
        return out

    def _groups(self, table: Mapping[int, ProcStat], pids: Iterable[int]) -> set[int]:
        """The process groups and sessions that live processes of ours are in (their ids cannot be
        reused while they are), less this process's own."""
        out: set[int] = set()
        for pid in pids:
            st = table.get(pid)
            if st is not None:
                out.update((st.pgid, st.sid))
        return out - self._own

    def group_is_ours(self, pgid: int, table: Mapping[int, ProcStat] | None = None) -> bool:
        """True while a live process of the tree is in process group ``pgid`` (then ``killpg`` cannot
        reach a stranger's group under a reused id)."""
        table = process_table() if table is None else table
        return pgid not in self._own and any(table[p].pgid == pgid for p in self._live_known(table))

    def _members(self, table: Mapping[int, ProcStat], *, marker: bool) -> dict[int, int]:
        """Every live process of the tree now: the known ones, their children, members of their groups and
        sessions (started after the root), and with ``marker`` every process that carries it."""
        ours = self._live_known(table)
        while True:
            groups = self._groups(table, ours)
            grown = False
            for st in table.values():
                if st.pid in ours or st.pid in self._own or _dead(st) or st.start < self.root_start:
                    continue
                hit = st.ppid in ours or st.pgid in groups or st.sid in groups
                if not hit and marker and self.marker:
                    key = (st.pid, st.start)
                    if key not in self._marked:
                        self._marked[key] = _environ_has(st.pid, self.marker)
                    hit = self._marked[key]
                if hit:
                    ours[st.pid] = st.start
                    grown = True
            if not grown:
                return ours

    def scan(self) -> dict[int, ProcStat]:
        """Add descendants (also those that left the group) and members of the tree's groups and sessions
        to ``known``."""
        table = process_table()
        for pid, start in self._members(table, marker=False).items():
            self.known.setdefault(pid, start)
        return table

    def alive(self, table: Mapping[int, ProcStat] | None = None) -> list[int]:
        table = process_table() if table is None else table
        if not table and not os.path.isdir("/proc"):  # no /proc: the group is all we know
            try:
                os.killpg(self.root, 0)
                return [self.root]
            except OSError:
                return []
        return sorted(self._members(table, marker=False))

    def signal(self, sig: int) -> None:
        """``sig`` to the root's group while it is ours, then to every live tracked process outside it
        (each checked for pid reuse)."""
        table = self.scan()
        group = self.group_is_ours(self.root, table)
        if group:
            with contextlib.suppress(OSError):
                os.killpg(self.root, sig)
        for pid in self.alive(table):
            st = table.get(pid)
            if st is not None and not (group and st.pgid == self.root):
                signal_checked(pid, self.known.get(pid, st.start), sig)

    def sweep(self, wait_s: float = 10.0, frozen_hook: Callable[[list[int]], None] | None = None) -> list[int]:
        """Stop the tree without its watchdog: freeze every process of it (see the module docstring),
        look again until nothing new appears, call ``frozen_hook`` with the frozen pids (to read what
        they map), SIGKILL them all, wait until they are gone (up to ``wait_s``). Returns the pids
        still alive (none)."""
        frozen: dict[int, int] = {}
        for _ in range(50):
            table = process_table()
            new = {p: s for p, s in self._members(table, marker=True).items() if p not in frozen}
            if not new:
                break
            for pid, start in new.items():
                signal_checked(pid, start, signal.SIGSTOP)
                self.known.setdefault(pid, start)
            frozen.update(new)
        if frozen_hook is not None:
            frozen_hook(sorted(frozen))
        deadline = time.monotonic() + wait_s
        while True:
            table = process_table()
            members = self._members(table, marker=True)
            for pid, start in members.items():
                self.known.setdefault(pid, start)
                signal_checked(pid, start, signal.SIGKILL)
            if not members or time.monotonic() >= deadline:
                return sorted(members)
            time.sleep(0.02)

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
