"""What a launch may leave on the machine, compared before and after: ``/dev/shm``, temp entries,
listening ports, GPU locks and processes. Other tenants of the machine come and go meanwhile, so
each comparison only counts what is attributable to the launch:

- a new ``/dev/shm`` name counts when no live process maps or holds it (a leak, not a neighbour's);
- a new entry in the engine's temp directory (``TMPDIR``, test-owned, where vLLM puts its ZMQ IPC
  sockets and ``vllm_dist_*`` files) counts; the shared ``/tmp`` itself is not compared, because
  other tenants' engines leave the same uuid4-named sockets there meanwhile;
- a new listening port counts when its owner is the engine's (``marker`` in its command line or
  environment);
- a lock counts when it cannot be taken at once;
- a process counts when it started after the launch and carries ``marker`` (command line or environment).

``kill_strays`` is for the test's clean-up: on a failing run the leftovers must not stay behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from pytest_gpulayout.errors import LaunchError
from pytest_gpulayout.launch.gpu_locks import gpu_locks
from pytest_gpulayout.launch.proctree import process_table

SHM = Path("/dev/shm")


def ticks_now() -> int:
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK")) - 1


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _listening() -> dict[int, set[int]]:
    """port -> socket inodes of TCP sockets in LISTEN state (IPv4 and IPv6)."""
    out: dict[int, set[int]] = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A":
                out.setdefault(int(f[1].rsplit(":", 1)[1], 16), set()).add(int(f[9]))
    return out


def _socket_owners(inodes: set[int]) -> dict[int, int]:
    owners: dict[int, int] = {}
    for pid in process_table():
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                ino = int(target[8:-1])
                if ino in inodes:
                    owners[ino] = pid
    return owners


def _mapped_anywhere(names: set[str]) -> set[str]:
    """Those of ``names`` (under /dev/shm) that some live process maps or holds open."""
    found: set[str] = set()
    if not names:
        return found
    paths = {f"/dev/shm/{n}": n for n in names}
    for pid in process_table():
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/maps", "rb") as f:
                data = f.read().decode(errors="replace")
            for path, n in paths.items():
                if path in data:
                    found.add(n)
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    n2 = paths.get(os.readlink(f"/proc/{pid}/fd/{fd}"))
                    if n2:
                        found.add(n2)
    return found


@dataclass
class Snapshot:
    since: int
    shm: set[str]
    tmp: dict[str, set[str]]
    ports: set[int]
    private_dirs: tuple[str, ...] = ()
    markers: tuple[str, ...] = ()
    lock_keys: tuple[str, ...] = ()
    lock_dir: Path | None = None
    shm_only: str = ""   # count only /dev/shm names containing this (a fake's own names)
    sessions: set[int] = field(default_factory=set)   # sessions/groups of the launch's processes seen so far

    @classmethod
    def take(cls, *, private_dirs: tuple[Path, ...] = (), markers: tuple[str, ...] = (),
             lock_keys: tuple[str, ...] = (), lock_dir: Path | None = None, shm_only: str = "") -> Snapshot:
        dirs: dict[str, set[str]] = {}
        for d in private_dirs:
            d.mkdir(parents=True, exist_ok=True)
            dirs[str(d)] = set(os.listdir(d))
        return cls(ticks_now(), set(os.listdir(SHM)), dirs, set(_listening()),
                   tuple(str(d) for d in private_dirs), markers, lock_keys, lock_dir, shm_only)

    def _ours(self, pid: int) -> bool:
        """Carries a marker in its command line or its environment (vLLM retitles its processes)."""
        cmd = _cmdline(pid)
        if any(m in cmd for m in self.markers):
            return True
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        except OSError:
            return False
        return any(m in env for m in self.markers)

    def _matching(self) -> list[int]:
        """Processes started since the snapshot that are the launch's: a marker in the command line or
        environment, or in the session / group / parentage of one that has (vLLM retitles its workers
        with setproctitle, which also overwrites what /proc shows of their environment)."""
        table = {p: st for p, st in process_table().items()
                 if st.state not in ("Z", "X") and st.start >= self.since and p != os.getpid()}
        ours = {p for p in table if self._ours(p)}
        self.sessions.update(table[p].sid for p in ours)
        self.sessions.update(ours)
        grown = True
        while grown:
            more = {p for p, st in table.items() if p not in ours and
                    (st.sid in self.sessions or st.pgid in self.sessions or st.ppid in ours)}
            ours |= more
            grown = bool(more)
        return sorted(ours)

    def processes(self) -> list[str]:
        return [f"pid {p}: {_cmdline(p)[:100]}" for p in self._matching()]

    def leaks(self) -> list[str]:
        """Everything attributable to the launch that is there now and was not before."""
        found = [f"process {p}" for p in self.processes()]
        new_shm = {n for n in set(os.listdir(SHM)) - self.shm if self.shm_only in n}
        found += [f"/dev/shm/{n}" for n in sorted(new_shm - _mapped_anywhere(new_shm))]
        for d, before in self.tmp.items():
            with contextlib.suppress(OSError):
                for n in sorted(set(os.listdir(d)) - before):
                    found.append(f"{d}/{n}")
        listening = _listening()
        new_ports = {p: inos for p, inos in listening.items() if p not in self.ports}
        if new_ports:
            owners = _socket_owners(set().union(*new_ports.values()))
            ours = set(self._matching())
            for port, inos in sorted(new_ports.items()):
                pids = [owners[i] for i in inos if i in owners]
                if any(pid in ours for pid in pids):
                    found.append(f"port {port} listening (pid {', '.join(map(str, pids))})")
        if self.lock_keys:
            try:
                with gpu_locks(self.lock_keys, self.lock_dir, timeout_s=0.5):
                    pass
            except LaunchError as err:
                found.append(f"lock: {err}")
        return found

    def wait_clean(self, seconds: float, known: Collection[str] = ()) -> list[str]:
        """``leaks()`` once nothing but ``known`` (leftovers the caller accounts for) is left, or what is
        still there after ``seconds``."""
        deadline = time.monotonic() + seconds
        while True:
            found = self.leaks()
            if not [x for x in found if x not in known] or time.monotonic() >= deadline:
                return found
            time.sleep(0.5)

    def kill_strays(self) -> None:
        """Clean-up for a failing test: SIGKILL what the launch left running, unlink its unmapped shm."""
        for _ in range(3):
            for pid in self._matching():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.3)
        new_shm = set(os.listdir(SHM)) - self.shm
        for n in new_shm - _mapped_anywhere(new_shm):
            if n.startswith(("psm_", "sem.mp-")):
                with contextlib.suppress(OSError):
                    os.unlink(SHM / n)
