"""What a launch may leave on the machine, compared before and after: ``/dev/shm``, temp entries,
listening ports, GPU locks and processes. Other tenants of the machine come and go meanwhile, so
each comparison only counts what is attributable to the launch:

- a new ``/dev/shm`` name counts when no live process maps or holds it and the launch made it: its name
  carries the fake's tag (``shm_only``), or, for a real engine, a process of the launch was seen holding it
  (a sampler reads the launch's processes' maps and open files every 0.1 s while they run): another
  engine on the machine leaves unheld ``psm_*`` of its own meanwhile, and they are not this launch's
  (reliability round 4, item 6);
- a new entry in the engine's temp directory (``TMPDIR``, test-owned, where vLLM puts its ZMQ IPC
  sockets and ``vllm_dist_*`` files) counts; the shared ``/tmp`` itself is not compared, because
  other tenants' engines leave the same uuid4-named sockets there meanwhile;
- a new listening port counts when its owner is the engine's (``marker`` in its command line or
  environment);
- a lock counts when it cannot be taken at once;
- a process counts when it started after the launch and carries ``marker`` (command line or environment);
- a cgroup counts when a launcher of this test made it (``gpulayout-<pid>-<n>`` below our own cgroup)
  during the snapshot: this process, a driver the test names (``launchers``), or the parent of a process
  of the launch seen while it ran; a neighbour's are its own;
- a listening socket of the launch off loopback counts even where its port was listening before.

``kill_strays`` is for the test's clean-up: on a failing run the leftovers must not stay behind.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import sys
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from pytest_gpulayout.errors import LaunchError
from pytest_gpulayout.launch.gpu_locks import gpu_locks
from pytest_gpulayout.launch.launcher import _own_cgroup_dir
from pytest_gpulayout.launch.proctree import process_table
from pytest_gpulayout.launch.watchdog import shm_names

SHM = Path("/dev/shm")


def ticks_now() -> int:
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK")) - 1


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants_of(root: int) -> list[int]:
    """The live descendants of ``root`` (not ``root`` itself), from one read of ``/proc``."""
    table = process_table()
    children: dict[int, list[int]] = {}
    for st in table.values():
        if st.state not in ("Z", "X"):
            children.setdefault(st.ppid, []).append(st.pid)
    out: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            out.append(child)
            stack.append(child)
    return out


def launch_cgroups() -> set[str]:
    """The cgroups the launcher made below ours (``launcher.make_cgroup``), by name."""
    base = _own_cgroup_dir()
    if base is None:
        return set()
    try:
        return {n for n in os.listdir(base) if n.startswith("gpulayout-")}
    except OSError:
        return set()


def _cgroup_launcher(name: str) -> int:
    parts = name.split("-")
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else -1


def _hex_address(text: str) -> str:
    """``0100007F:1F90`` (``/proc/net/tcp``, each 32-bit word in host order) -> ``127.0.0.1``; IPv6 as
    ``ipaddress`` writes it (``::ffff:127.0.0.2``, ``::``)."""
    raw = bytes.fromhex(text.rsplit(":", 1)[0])
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)) if sys.byteorder == "little" else raw
    return str(ipaddress.ip_address(words))


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, or an IPv4-mapped loopback address (``::ffff:127.0.0.2``)."""
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def listeners() -> dict[int, tuple[str, int]]:
    """Socket inode -> (address, port) of every TCP socket listening, and every UDP socket bound, on this host
    (``/proc/net/{tcp,tcp6,udp,udp6}``; UDP has no LISTEN state: a bound socket is how it listens)."""
    out: dict[int, tuple[str, int]] = {}
    for name in ("tcp", "tcp6", "udp", "udp6"):
        try:
            lines = Path("/proc/net", name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and (f[3] == "0A" if name.startswith("tcp") else f[3] == "07"):
                out[int(f[9])] = (_hex_address(f[1]), int(f[1].rsplit(":", 1)[1], 16))
    return out


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
    cgroups: set[str] = field(default_factory=set)    # the launcher's cgroups before the launch
    held: set[str] = field(default_factory=set)       # /dev/shm names the launch's processes were seen holding
    launchers: set[int] = field(default_factory=set)  # pids whose cgroups are this launch's (a test's driver)
    sampling: threading.Event | None = None           # set to stop the sampler (``stop``)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def take(cls, *, private_dirs: tuple[Path, ...] = (), markers: tuple[str, ...] = (),
             lock_keys: tuple[str, ...] = (), lock_dir: Path | None = None, shm_only: str = "") -> Snapshot:
        dirs: dict[str, set[str]] = {}
        for d in private_dirs:
            d.mkdir(parents=True, exist_ok=True)
            dirs[str(d)] = set(os.listdir(d))
        snap = cls(ticks_now(), set(os.listdir(SHM)), dirs, set(_listening()),
                   tuple(str(d) for d in private_dirs), markers, lock_keys, lock_dir, shm_only,
                   cgroups=launch_cgroups())
        if not shm_only and markers:
            snap.sampling = threading.Event()
            threading.Thread(target=snap._sample, daemon=True).start()
        return snap

    def _sample(self, every_s: float = 0.1, limit_s: float = 900.0, after_s: float = 3.0) -> None:
        """The /dev/shm names the launch's processes map or hold, as they run: until ``stop``, or ``after_s``
        once the processes it saw are all gone (nothing is left to make a name), or ``limit_s``."""
        assert self.sampling is not None
        deadline = time.monotonic() + limit_s
        seen = False
        gone_since: float | None = None
        while not self.sampling.is_set() and time.monotonic() < deadline:
            pids = self._matching()
            for pid in pids:
                self.held |= shm_names(pid)
            seen = seen or bool(pids)
            if seen and not pids:
                gone_since = gone_since or time.monotonic()
                if time.monotonic() - gone_since >= after_s:
                    return
            else:
                gone_since = None
            self.sampling.wait(every_s)

    def stop(self) -> None:
        if self.sampling is not None:
            self.sampling.set()

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
        with self.lock:
            return self._matching_unlocked()

    def _matching_unlocked(self) -> list[int]:
        """Processes started since the snapshot that are the launch's: a marker in the command line or
        environment, or in the session / group / parentage of one that has (vLLM retitles its workers
        with setproctitle, which also overwrites what /proc shows of their environment)."""
        table = {p: st for p, st in process_table().items()
                 if st.state not in ("Z", "X") and st.start >= self.since and p != os.getpid()}
        ours = {p for p in table if self._ours(p)}
        self.sessions.update(table[p].sid for p in ours)
        self.sessions.update(ours)
        # not the test's own session or group: a command the test runs (the CLI it starts, whose line names the
        # marker) is in it, and so is everything else started from the same terminal, job runner or CI step;
        # what of it is the launch's is found by parentage
        self.sessions -= {os.getsid(0), os.getpgid(0)}
        grown = True
        while grown:
            more = {p for p, st in table.items() if p not in ours and
                    (st.sid in self.sessions or st.pgid in self.sessions or st.ppid in ours)}
            ours |= more
            grown = bool(more)
        self.launchers.update(table[p].ppid for p in ours)   # the guard's parent is the launcher
        return sorted(ours)

    def processes(self) -> list[str]:
        return [f"pid {p}: {_cmdline(p)[:100]}" for p in self._matching()]

    def leaks(self) -> list[str]:
        """Everything attributable to the launch that is there now and was not before."""
        found = [f"process {p}" for p in self.processes()]
        new_shm = {n for n in set(os.listdir(SHM)) - self.shm if self.shm_only in n}
        if self.sampling is not None:   # a real engine's: only what the launch was seen to hold
            new_shm &= self.held
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
        for name in sorted(launch_cgroups() - self.cgroups):
            owner = _cgroup_launcher(name)
            if owner == os.getpid() or owner in self.launchers:
                found.append(f"cgroup {name}")
        ours = set(self._matching())
        if ours:
            owners = _socket_owners(set(listeners()))
            for ino, (address, port) in sorted(listeners().items()):
                if owners.get(ino) in ours and not is_loopback(address):
                    found.append(f"listener {address}:{port} off loopback (pid {owners[ino]})")
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
        self.stop()
        for _ in range(3):
            for pid in self._matching():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.3)
        new_shm = set(os.listdir(SHM)) - self.shm
        if self.sampling is not None:
            new_shm &= self.held
        for n in new_shm - _mapped_anywhere(new_shm):
            if n.startswith(("psm_", "sem.mp-")):
                with contextlib.suppress(OSError):
                    os.unlink(SHM / n)
