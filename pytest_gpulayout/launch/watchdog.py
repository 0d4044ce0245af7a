"""The engine's keeper: a small process in the engine's session that owns its whole tree.

The launcher does not start the engine itself. It starts this watchdog (``python -I -S watchdog.py``,
standard library only, so it starts in milliseconds and imports nothing of the engine's environment),
and the watchdog starts the engine. Why a process of its own:

- **Every descendant comes back to it.** It sets ``PR_SET_CHILD_SUBREAPER`` (Linux ``prctl``), so a
  worker that double-forks and calls ``setsid()`` is reparented to the watchdog, not to PID 1: the
  descendants of the watchdog are exactly the engine's tree, and "no child left" (``ECHILD``) means
  the tree is gone. Where the host allows it, the engine also runs in a cgroup v2 of its own
  (``cgroup.kill`` ends it in one write; ``cgroup.procs`` lists it without a walk).
- **A killed watchdog still leaves nothing.** The watchdog's parent is its guard (``Guard`` below), a
  subreaper too, whose command line names nothing of ours; the engine's main process dies with the
  watchdog (``PR_SET_PDEATHSIG``), the rest of the tree comes back to the guard, which stops it, removes
  what it made and holds the GPU locks until it is gone. The environment of both is clean: the engine's
  (``launch.env``) comes in the spec file (``--spec``), never into theirs.
- **A killed launcher still leaves nothing.** The launcher holds the write end of the control pipe.
  When it closes (a normal end, a crash, SIGKILL by the OOM killer or a CI timeout), the watchdog
  stops the tree, cleans up after it and exits. The GPU lock files are passed to it too, so the lock
  is held until the tree is really gone and the next launch cannot start beside an orphan.
- **What the tree made is removed, and nothing else.** ``/dev/shm`` is listed (name, device, inode)
  before the engine starts. Before the final SIGKILL the tree is frozen (SIGSTOP) and the names each
  process maps or holds open are read from ``/proc/<pid>/maps`` and ``/proc/<pid>/fd`` (the launcher
  reads them every second too); once the tree is gone, a name is unlinked only when the tree used it,
  it appeared during the launch (not in the listing, or another file under the same name), it is a
  plain file owned by the user the engine ran as, and no live process outside the tree maps or holds
  it (vLLM's multiprocessing resource tracker, which would unlink its ``psm_*`` segments and
  ``sem.mp-*`` semaphores, dies with the tree). A model kept in ``/dev/shm`` for speed, or another
  user's segment, was there before the launch and stays. A new segment under a name the engines'
  libraries give (``ENGINE_SHM_PREFIXES``) that nobody holds is reported as ``unattributed``, not
  removed: /dev/shm does not say who created a file, and a concurrent launch or another program of the
  same user creates the same names (measured: two launches side by side removed each other's
  segments when the name was taken as proof). The launch's private ``TMPDIR`` (vLLM puts its ZMQ IPC
  sockets and ``vllm_dist_*`` files there: ``vllm/utils/network_utils.py get_open_zmq_ipc_path``,
  ``vllm/v1/executor``) is removed.
- **A signal to the engine's process group never reaches another group.** The group's id is the
  engine's pid. The watchdog reads the engine's exit without reaping it (``waitid(WNOWAIT)``), so its
  pid stays taken (a zombie) until the tree is gone, and ``killpg`` cannot hit a group that reused
  the number; it is reaped last. Signals to single pids go through ``os.kill`` right after the walk
  that found them as descendants of this subreaper.
- **The GPU locks outlive every survivor.** When something of the tree survives SIGKILL (a process
  stuck in the kernel, in uninterruptible sleep), the report says so and the watchdog stays, holding
  the GPU locks, until the survivors are gone: the next launch never starts beside them. The launcher
  does the same through a small keeper (``--hold``) when it had to finish without the watchdog.
- **The engine starts clean.** SIGINT, SIGTERM, SIGHUP and SIGPIPE at their defaults and no signal
  blocked, whatever the launcher inherited (a job started with ``&`` ignores SIGINT, and vLLM's
  API server would then ignore the Ctrl-C it is stopped with); stdin is ``/dev/null``.

Protocol. Control pipe (launcher to watchdog), one command per line: ``signal N`` (send N to the
whole tree), ``shm NAME`` (a ``/dev/shm`` name the launcher saw mapped), ``kill`` (stop hard, clean,
report, exit; end of file means the same). Status pipe (watchdog to launcher), one JSON object per
line: ``{"spawned": pid, "cgroup": bool}`` or ``{"spawn_error": errno, "message": ...}``, then
``{"shm": name}`` when a new ``/dev/shm`` name is seen held by the tree (``ShmWatch``),
``{"exit": returncode}`` when the engine's main process ends, ``{"empty": true}`` when the whole
tree is gone, and last ``{"final": ..., "killed": [...], "cleaned": [...], "leftover": [...],
"unattributed": [...]}``. The guard writes on the same pipe ``{"watchdog_died": code, "watchdog": pid}``
when the watchdog ended before it finished, then its own ``final``. Watchdog to guard (``--guard FD``):
``shm NAME`` for each ``/dev/shm`` name the watchdog took to be the tree's.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
SHM_DIR = "/dev/shm"
KILL_WAIT_S = 10.0
#: names the engines' libraries give what they create in ``/dev/shm``: Python multiprocessing's
#: ``SharedMemory`` (``psm_``, ``wnsm_``) and semaphores (``sem.mp-``, ``sem.loky-``), NCCL's SHM transport
#: (``nccl-``), torch's shared-memory manager (``torch_``)
ENGINE_SHM_PREFIXES = ("psm_", "wnsm_", "sem.mp-", "sem.loky-", "nccl-", "torch_")

#: what ``/dev/shm`` held: name -> (device, inode)
ShmListing = dict[str, tuple[int, int]]


# ------------------------------------------------------------------------------------------------
# /proc helpers (also used by the launcher, which imports this module)
# ------------------------------------------------------------------------------------------------
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (Linux), loaded before a fork so that the child only calls it; None elsewhere."""
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return prctl
    except (OSError, AttributeError):
        return None


def set_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux >= 3.4); False elsewhere."""
    prctl = _prctl()
    return prctl is not None and int(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0


def _stat(pid: int) -> tuple[int, str] | None:
    """(ppid, state) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2:].split()
        return int(fields[1]), fields[0].decode()
    except (OSError, ValueError, IndexError):
        return None


def descendants(root: int) -> list[int]:
    """Live descendants of ``root`` (not ``root`` itself), read from ``/proc`` in one pass."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        st = _stat(int(name))
        if st is not None and st[1] not in ("Z", "X", "x"):
            children.setdefault(st[0], []).append(int(name))
    out: list[int] = []
    stack = [root]
    while stack:
        for c in children.get(stack.pop(), ()):
            out.append(c)
            stack.append(c)
    return sorted(out)


def _mapped_file(line: bytes) -> set[tuple[int, int]]:
    """``{(st_dev, st_ino)}`` of the file a ``/proc/<pid>/maps`` line maps (its ``major:minor`` and inode)."""
    parts = line.split(maxsplit=5)
    try:
        major, minor = (int(x, 16) for x in parts[3].split(b":"))
        return {(os.makedev(major, minor), int(parts[4]))}
    except (IndexError, ValueError):
        return set()


def shm_names(pid: int) -> set[str]:
    """Names under ``/dev/shm`` that ``pid`` maps or holds open (POSIX shm segments, named semaphores).

    A named semaphore is mapped under another name: glibc's ``sem_open`` maps a temporary file, links it to
    ``sem.<name>`` and unlinks the temporary one, so the maps line reads ``/dev/shm/sem.XXXXXX (deleted)``
    for the file ``sem.mp-...`` names (what Python's multiprocessing locks of a TP=2 or PP=2 vLLM are). Such a
    mapping is matched by its file (device and inode) against the names ``/dev/shm`` holds now."""
    names: set[str] = set()
    prefix = SHM_DIR + "/"
    renamed: set[tuple[int, int]] = set()
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            for line in f:
                i = line.find(b" /dev/shm/")
                if i >= 0:
                    path = line[i + 1:].rstrip(b"\n").decode("utf-8", "replace")
                    if path.endswith(" (deleted)"):
                        renamed |= _mapped_file(line)
                    path = path.removesuffix(" (deleted)")
                    if path.startswith(prefix) and "/" not in path[len(prefix):]:
                        names.add(path[len(prefix):])
    except OSError:
        pass
    if renamed:
        names |= {name for name, ident in (shm_listing() or {}).items() if ident in renamed}
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix) and not target.endswith(" (deleted)") and "/" not in target[len(prefix):]:
            names.add(target[len(prefix):])
    return names


def shm_listing() -> ShmListing | None:
    """Every name in ``/dev/shm`` now, with the file it names (device, inode); None when it cannot be
    listed (then nothing is ever removed: what was there before is unknown)."""
    out: ShmListing = {}
    try:
        entries = list(os.scandir(SHM_DIR))
    except OSError:
        return None
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        out[entry.name] = (st.st_dev, st.st_ino)
    return out


def _held_elsewhere(names: set[str], tree: set[int]) -> set[str]:
    """Those of ``names`` that a live process outside ``tree`` (and other than this one) maps or holds."""
    held: set[str] = set()
    me = os.getpid()
    try:
        pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return held
    for pid in pids:
        if pid in tree or pid == me:
            continue
        held |= shm_names(pid) & names
        if held == names:
            break
    return held


def shm_to_remove(used: set[str], before: ShmListing | None, tree: set[int]) -> tuple[list[str], list[str]]:
    """``(removable, unattributed)``: the ``/dev/shm`` names this launch may unlink once its tree is
    gone, and the new engine-named ones nobody holds that it leaves (see the module docstring).

    ``used``: names the tree was seen to map or hold; ``before``: the listing taken before the engine
    started; ``tree``: the tree's pids (excluded from the "used elsewhere" look).
    """
    now = shm_listing()
    if before is None or now is None:
        return [], []
    uid = os.geteuid()
    candidates: set[str] = set()
    for name, ident in now.items():
        if before.get(name) == ident:
            continue  # there before the launch: never ours to remove
        if name not in used and not name.startswith(ENGINE_SHM_PREFIXES):
            continue
        try:
            st = os.lstat(os.path.join(SHM_DIR, name))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid == uid and (st.st_dev, st.st_ino) == ident:
            candidates.add(name)
    if candidates:
        candidates -= _held_elsewhere(candidates, tree)
    return sorted(candidates & used), sorted(candidates - used)


def _children() -> list[int]:
    """This process's children (zombies included), from ``/proc/self/task/*/children``, else a walk."""
    me = os.getpid()
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{me}/task"):
            with open(f"/proc/{me}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
        return out
    except (OSError, ValueError):
        pass
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if name.isdigit():
            st = _stat(int(name))
            if st is not None and st[0] == me:
                out.append(int(name))
    return out


def _start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (tells it from a process that reuses its pid)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2:].split()
        return None if fields[0] in (b"Z", b"X", b"x") else int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def remove_private(tmpdir: str, cgroup: str) -> int:
    """Remove the launch's private ``TMPDIR`` and its cgroup once nothing of the tree is left; the entries
    the ``TMPDIR`` still had (the engine's sockets and files), for the report."""
    entries = 0
    if tmpdir and os.path.isdir(tmpdir):
        try:
            entries = len(os.listdir(tmpdir))
        except OSError:
            entries = 0
        shutil.rmtree(tmpdir, ignore_errors=True)
    if cgroup:
        # EBUSY while a killed process is still exiting: it has left ``cgroup.procs`` but not the cgroup (it
        # takes longer on a loaded machine: 0.5 s was seen to be too short under pytest -n 2 on two cores)
        deadline = time.monotonic() + KILL_WAIT_S
        while True:
            try:
                os.rmdir(cgroup)
                break
            except OSError as err:
                if err.errno != errno.EBUSY or time.monotonic() >= deadline:
                    break
                time.sleep(0.01)
    return entries


def hold(keep: list[int], pids: dict[int, int], poll_s: float = 0.2, kill_every_s: float = 5.0, *,
         tmpdir: str = "", cgroup: str = "") -> None:
    """Keep the GPU lock descriptors ``keep`` open while any of ``pids`` (pid -> start ticks) lives,
    SIGKILLing them again now and then (a process out of uninterruptible sleep dies at once); then remove
    the launch's ``tmpdir`` and ``cgroup``, which the survivors may have been using."""
    next_kill = time.monotonic() + kill_every_s
    while True:
        live = {p: s for p, s in pids.items() if _start_ticks(p) == s}
        if not live:
            break
        if time.monotonic() >= next_kill:
            for pid in live:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            next_kill = time.monotonic() + kill_every_s
        with contextlib.suppress(ChildProcessError, OSError):
            for child in _children():
                os.waitpid(child, os.WNOHANG)
        time.sleep(poll_s)
    remove_private(tmpdir, cgroup)
    for fd in keep:
        with contextlib.suppress(OSError):
            os.close(fd)


class ShmWatch:
    """Names created in ``/dev/shm`` while the engine runs, as they appear (Linux inotify, through
    ``ctypes``: the watchdog imports nothing outside the standard library). /dev/shm does not record
    who created a file, but its creator maps or holds it at that moment (``shm_open`` + ``mmap`` for
    multiprocessing's ``SharedMemory``, ``sem_open`` for its semaphores): a name a process of the tree
    holds when it appears is the tree's, even if the process that made it is gone by the end (a vLLM
    worker that exits before the stop, leaving its ``sem.mp-*`` to a resource tracker that dies with
    the tree). Unavailable (no inotify): ``fd`` is -1 and only the maps read at the stop count."""

    IN_CREATE = 0x100
    IN_MOVED_TO = 0x80
    _HEADER = 16  # struct inotify_event: int wd; uint32 mask, cookie, len; then the name

    def __init__(self) -> None:
        self.fd = -1
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
            if fd >= 0 and int(libc.inotify_add_watch(fd, SHM_DIR.encode(), self.IN_CREATE | self.IN_MOVED_TO)) >= 0:
                self.fd = fd
            elif fd >= 0:
                os.close(fd)
        except (OSError, AttributeError):
            self.fd = -1

    def names(self) -> list[str]:
        """The names created since the last call (non-blocking)."""
        out: list[str] = []
        while self.fd >= 0:
            try:
                data = os.read(self.fd, 65536)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            off = 0
            while off + self._HEADER <= len(data):
                length = int.from_bytes(data[off + 12:off + 16], sys.byteorder)
                raw = data[off + self._HEADER:off + self._HEADER + length].split(b"\0", 1)[0]
                if raw:
                    out.append(raw.decode("utf-8", "replace"))
                off += self._HEADER + length
        return out

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


def cgroup_procs(path: str) -> list[int]:
    try:
        with open(os.path.join(path, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


# ------------------------------------------------------------------------------------------------
# The watchdog
# ------------------------------------------------------------------------------------------------
class Watchdog:
    def __init__(self, control: int, status: int, cgroup: str, tmpdir: str, keep: list[int], *,
                 guard: int = -1, engine_env: dict[str, str] | None = None):
        self.control = control
        self.status = status
        self.cgroup = cgroup
        self.tmpdir = tmpdir
        self.keep = keep
        self.guard = guard                # write end of the pipe to the guard: the /dev/shm names it must know
        self.engine_env = engine_env      # the engine's environment (None: ours); the watchdog's own is clean
        self.engine = -1
        self.engine_reaped = False
        self.exit_reported = False
        self.empty_reported = False
        self.shm: set[str] = set()
        self.shm_before: ShmListing | None = None  # taken just before the engine starts
        self.shm_watch: ShmWatch | None = None
        self.shm_pending: dict[str, float] = {}   # new names not yet seen held by the tree: until when to look
        self.buf = b""
        self.stop_requested = ""

    def send(self, **msg: object) -> None:
        with contextlib.suppress(OSError):
            os.write(self.status, (json.dumps(msg) + "\n").encode())

    def own_shm(self, name: str) -> None:
        """``name`` in ``/dev/shm`` is the tree's: remember it, and tell the guard (which removes it if this
        watchdog is killed before it could)."""
        if name in self.shm:
            return
        self.shm.add(name)
        if self.guard >= 0:
            try:
                os.write(self.guard, f"shm {name}\n".encode())
            except OSError:  # the guard is gone: the launcher has the names too
                os.close(self.guard)
                self.guard = -1

    def tree(self) -> list[int]:
        pids = set(descendants(os.getpid()))
        if self.cgroup:
            pids.update(cgroup_procs(self.cgroup))
        pids.discard(os.getpid())
        return sorted(pids)

    def signal_tree(self, sig: int) -> list[int]:
        if self.engine > 0 and not self.engine_reaped:  # its unreaped pid keeps the group's id ours
            with contextlib.suppress(OSError):
                os.killpg(self.engine, sig)
        pids = self.tree()
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        return pids

    def reap(self) -> bool:
        """Reap every exited child but the engine, whose exit is read without reaping it (``WNOWAIT``:
        its pid, the id of its process group, stays taken); True when the tree is gone."""
        for pid in _children():
            if pid != self.engine:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
        running = False
        if self.engine > 0 and not self.engine_reaped:
            try:
                info = os.waitid(os.P_PID, self.engine, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                info = None
                self.engine_reaped = True
            if info is None:
                running = not self.engine_reaped
            elif not self.exit_reported:
                code = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
                self.send(exit=code)
                self.exit_reported = True
        if running or [p for p in _children() if p != self.engine]:
            return False
        if not self.empty_reported and self.engine > 0 and not (self.cgroup and cgroup_procs(self.cgroup)):
            self.send(empty=True)
            self.empty_reported = True
        return True

    def reap_engine(self) -> None:
        """Reap the engine's zombie, last (the tree is gone, nothing is signalled any more)."""
        if self.engine > 0 and not self.engine_reaped:
            with contextlib.suppress(ChildProcessError, OSError):
                if os.waitpid(self.engine, os.WNOHANG)[0] == self.engine:
                    self.engine_reaped = True

    def spawn(self, argv: list[str]) -> bool:
        cgroup = self.cgroup
        self.shm_watch = ShmWatch()      # before the listing: nothing created in between is missed
        self.shm_before = shm_listing()  # what the engine finds there is not its to remove
        parent = os.getpid()
        prctl = _prctl()

        def child_setup() -> None:  # runs in the engine's process between fork and exec (no threads here)
            # it dies with this watchdog, however the watchdog ends (SIGKILL included): the guard above
            # then finds the rest of the tree reparented to it
            if prctl is not None:
                prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                if os.getppid() != parent:  # the watchdog died before the line above
                    os._exit(1)
            os.setpgid(0, 0)  # its own group: one killpg reaches it, and never the watchdog
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGQUIT):
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            if cgroup:
                try:
                    with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                        f.write("0")
                except OSError:
                    pass

        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=1, stderr=subprocess.STDOUT,
                                    close_fds=True, preexec_fn=child_setup, env=self.engine_env)
        except OSError as err:
            self.send(spawn_error=err.errno or 0, message=err.strerror or str(err))
            return False
        except (ValueError, TypeError) as err:  # a NUL byte: the launcher checks, this is the last word
            self.send(spawn_error=0, message=str(err))
            return False
        self.engine = proc.pid
        in_cgroup = bool(cgroup) and proc.pid in cgroup_procs(cgroup)
        if not in_cgroup:
            self.cgroup = ""
        # only the engine's tree writes to the output pipe now, so its end of file is the tree's
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        self.send(spawned=proc.pid, cgroup=in_cgroup, watchdog=os.getpid())
        # Popen's own bookkeeping must not reap the engine behind our back
        proc.returncode = 0
        return True

    def commands(self) -> bool:
        """Read the control pipe; True when the launcher asked to finish (or is gone)."""
        try:
            data = os.read(self.control, 4096)
        except InterruptedError:
            return False
        except OSError:
            data = b""
        if not data:
            self.stop_requested = self.stop_requested or "launcher gone"
            return True
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        done = False
        for raw in lines:
            word, _, arg = raw.decode("utf-8", "replace").partition(" ")
            if word == "signal":
                with contextlib.suppress(ValueError):
                    self.signal_tree(int(arg))
            elif word == "shm" and arg and "/" not in arg:
                self.own_shm(arg)
            elif word == "kill":
                self.stop_requested = self.stop_requested or (arg or "asked")
                done = True
        return done

    def attribute_shm(self) -> None:
        """New /dev/shm names a process of the tree holds as they appear become the tree's (``ShmWatch``);
        one not held yet is looked at again for a second (its creator may map it a moment later)."""
        now = time.monotonic()
        if self.shm_watch is not None:
            for name in self.shm_watch.names():
                if "/" not in name and name not in self.shm:
                    self.shm_pending.setdefault(name, now + 1.0)
        if not self.shm_pending:
            return
        held: set[str] = set()
        for pid in self.tree():
            held |= shm_names(pid) & set(self.shm_pending)
        for name in list(self.shm_pending):
            if name in held:
                self.own_shm(name)
                self.send(shm=name)  # the launcher keeps it too, for a clean-up without us
                del self.shm_pending[name]
            elif now >= self.shm_pending[name]:
                del self.shm_pending[name]

    def loop(self) -> None:
        while True:
            if self.stop_requested:
                return
            watched = [self.shm_watch.fd] if self.shm_watch is not None and self.shm_watch.fd >= 0 else []
            try:
                ready, _, _ = select.select([self.control, *watched], [], [], 0.05)
            except InterruptedError:
                ready = []
            self.attribute_shm()
            if self.control in ready and self.commands():
                return
            self.reap()

    def finish(self) -> None:
        """Freeze the tree, read what it maps, SIGKILL it, wait until it is gone, remove what it made."""
        killed: list[int] = []
        seen: set[int] = set()
        self.attribute_shm()  # the names that appeared since the last look
        if not self.reap():
            for _ in range(20):  # until no new process appears between two looks
                new = [p for p in self.tree() if p not in seen]
                if not new:
                    break
                for pid in new:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGSTOP)
                seen.update(new)
            for pid in seen:
                self.shm |= shm_names(pid)
            if self.cgroup:
                with contextlib.suppress(OSError), open(os.path.join(self.cgroup, "cgroup.kill"), "w") as f:
                    f.write("1")
            deadline = time.monotonic() + KILL_WAIT_S
            while time.monotonic() < deadline:
                pids = self.signal_tree(signal.SIGKILL)
                killed.extend(p for p in pids if p not in killed)
                if self.reap() and not pids:
                    break
                time.sleep(0.01)
        leftover = self.tree()
        cleaned: list[str] = []
        unattributed: list[str] = []
        if not leftover:
            self.reap_engine()  # nothing is signalled any more: its zombie need not hold the group's id
            removable, unattributed = shm_to_remove(self.shm, self.shm_before, seen)
            for name in removable:
                path = os.path.join(SHM_DIR, name)
                try:
                    os.unlink(path)
                    cleaned.append(path)
                except OSError:
                    pass
            entries = remove_private(self.tmpdir, self.cgroup)
            if entries:
                cleaned.append(f"{self.tmpdir} ({entries} entr{'y' if entries == 1 else 'ies'})")
        self.send(final=self.stop_requested, killed=sorted(killed), cleaned=cleaned, leftover=leftover,
                  unattributed=[os.path.join(SHM_DIR, n) for n in unattributed])
        if leftover:  # survivors of SIGKILL: the GPU locks stay held until they are gone too
            starts = {p: t for p in leftover if (t := _start_ticks(p)) is not None}
            for fd in (self.status, self.control):
                with contextlib.suppress(OSError):
                    os.close(fd)
            hold(self.keep, starts, tmpdir=self.tmpdir, cgroup=self.cgroup)
            self.reap()
        if self.shm_watch is not None:
            self.shm_watch.close()
        for fd in self.keep:  # the GPU locks: released only now that the tree is gone
            with contextlib.suppress(OSError):
                os.close(fd)
        self.reap_engine()


class Guard(Watchdog):
    """The watchdog's guard: the parent of the watchdog, and the subreaper above the engine's tree.

    ``pkill -9 -f pytest_gpulayout``, or a runner that kills a job's processes, takes the launcher and its
    watchdog at the same moment; nothing was left then to stop the tree, which lived on under init with
    its cgroup, TMPDIR, /dev/shm segments, and the GPU lock free for the next launch. The guard is started
    as ``python -I -S - guard FD`` (this file on its standard input, its options in the spec file ``FD``),
    so its command line names nothing of this project, and in a session of its own. When the watchdog
    ends without finishing (killed, crashed), the engine's main process dies with it (``PR_SET_PDEATHSIG``,
    set by the watchdog) and every other process of the tree is reparented to the guard (the nearest
    living subreaper); the guard tells the launcher (``{"watchdog_died": code}``), freezes and kills the
    tree, removes the ``/dev/shm`` names the watchdog passed it and the tree maps, the private TMPDIR and
    the cgroup, and holds the GPU locks until the tree is gone. A watchdog that finished (exit 0, nothing
    left) ends the guard at once.
    """

    def __init__(self, spec: dict[str, Any], spec_fd: int):
        super().__init__(-1, int(spec["status"]), str(spec.get("cgroup", "")), str(spec.get("tmpdir", "")),
                         [int(x) for x in spec.get("keep", ())])
        self.spec = spec
        self.spec_fd = spec_fd
        self.names = -1

    def _read_names(self, block_s: float) -> None:
        if self.names < 0:
            time.sleep(block_s)
            return
        try:
            ready, _, _ = select.select([self.names], [], [], block_s)
        except InterruptedError:
            return
        if not ready:
            return
        try:
            data = os.read(self.names, 65536)
        except InterruptedError:
            return
        except OSError:
            data = b""
        if not data:
            os.close(self.names)
            self.names = -1
            return
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        for raw in lines:
            word, _, name = raw.decode("utf-8", "replace").partition(" ")
            if word == "shm" and name and "/" not in name:
                self.shm.add(name)

    def run(self) -> int:
        set_subreaper()
        self.shm_before = shm_listing()
        control = int(self.spec["control"])
        names_r, names_w = os.pipe()
        argv = [sys.executable, "-I", "-S", str(self.spec["watchdog"]), "--control", str(control), "--status",
                str(self.status), "--cgroup", self.cgroup, "--tmpdir", self.tmpdir, "--keep",
                ",".join(map(str, self.keep)), "--spec", str(self.spec_fd), "--guard", str(names_w), "--",
                *[str(a) for a in self.spec["engine"]]]
        try:
            dog = subprocess.Popen(argv, stdin=subprocess.DEVNULL, close_fds=True, env=clean_env(),
                                   pass_fds=(control, self.status, names_w, self.spec_fd, *self.keep))
        except OSError as err:
            self.send(spawn_error=err.errno or 0, message=f"cannot start the watchdog: {err.strerror or err}")
            return 1
        finally:
            for fd in (control, names_w, self.spec_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.names = names_r
        devnull = os.open(os.devnull, os.O_WRONLY)  # only the tree writes to the output pipe now
        os.dup2(devnull, 1)
        os.close(devnull)
        code = None
        while code is None:
            self._read_names(0.05)
            if self.stop_requested and dog.poll() is None:
                with contextlib.suppress(OSError):
                    dog.kill()
            code = dog.poll()
        while self.names >= 0:  # what it said before it ended
            self._read_names(0.0)
            if self.names >= 0 and not select.select([self.names], [], [], 0)[0]:
                break
        if code == 0 and not self.tree():
            for fd in self.keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
            return 0
        self.send(watchdog_died=code, watchdog=dog.pid)
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        self.stop_requested = f"the watchdog (pid {dog.pid}) ended ({how}) before the tree was gone"
        self.finish()
        return 0


def read_spec(fd: int) -> dict[str, Any]:
    """The JSON options of a guard or keeper, from the (unlinked) file ``fd`` the launcher wrote."""
    data = os.pread(fd, max(os.fstat(fd).st_size, 0), 0)
    spec = json.loads(data.decode("utf-8"))
    if not isinstance(spec, dict):
        raise ValueError("the spec is not a JSON object")
    return spec


def clean_env() -> dict[str, str]:
    """The environment of the guard, the watchdog and the keeper: nothing of ``launch.env`` (an ``LD_PRELOAD``
    there is the engine's, not theirs) and nothing of ours but what a Python needs to start where the
    launcher's did (``LD_LIBRARY_PATH``)."""
    return {k: os.environ[k] for k in ("LD_LIBRARY_PATH",) if k in os.environ}


def _fds(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _helper(mode: str, fd: int) -> int:
    """``python -I -S - guard|hold FD``: the guard, or the launcher's keeper of the GPU locks."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):  # not a terminal's: they have sessions of their own
        signal.signal(sig, signal.SIG_IGN)
    spec = read_spec(fd)
    if mode == "hold":  # hold the GPU locks while the survivors it names live, then remove the TMPDIR and cgroup
        os.close(fd)
        pids = {int(p): int(t) for p, t in spec.get("pids", {}).items()}
        hold([int(x) for x in spec.get("keep", ())], pids, tmpdir=str(spec.get("tmpdir", "")),
             cgroup=str(spec.get("cgroup", "")))
        return 0
    guard = Guard(spec, fd)

    def on_term(signum: int, frame: object) -> None:
        guard.stop_requested = guard.stop_requested or f"guard got signal {signum}"

    signal.signal(signal.SIGTERM, on_term)
    return guard.run()


def main(args: Iterable[str]) -> int:
    argv = list(args)
    if len(argv) == 2 and argv[0] in ("guard", "hold") and argv[1].isdigit():
        return _helper(argv[0], int(argv[1]))
    opts: dict[str, str] = {}
    while argv and argv[0] != "--":
        key = argv.pop(0)
        opts[key.lstrip("-")] = argv.pop(0) if argv else ""
    engine = argv[1:]
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):  # a terminal's signals are the launcher's to act on
        signal.signal(sig, signal.SIG_IGN)
    engine_env: dict[str, str] | None = None
    if opts.get("spec", "").isdigit():  # the engine's environment; ours is clean
        spec_fd = int(opts["spec"])
        engine_env = {str(k): str(v) for k, v in read_spec(spec_fd).get("env", {}).items()}
        os.close(spec_fd)
    dog = Watchdog(int(opts["control"]), int(opts["status"]), opts.get("cgroup", ""), opts.get("tmpdir", ""),
                   _fds(opts.get("keep", "")), guard=int(opts.get("guard", "-1") or -1), engine_env=engine_env)

    def on_term(signum: int, frame: object) -> None:
        dog.stop_requested = dog.stop_requested or f"watchdog got signal {signum}"

    signal.signal(signal.SIGTERM, on_term)
    set_subreaper()
    if dog.spawn(engine):
        dog.loop()
    dog.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
