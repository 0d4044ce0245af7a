"""A stand-in for vLLM / SGLang: replays a recorded startup log, then "serves" until SIGTERM.

Run as a script (the launcher starts it like an engine). Options come from ``--fake-*`` flags or the
``FAKE_ENGINE_*`` environment (so it also works behind ``launch.argv.engine_argv``, which appends real
engine flags: everything it does not know is ignored, and written to ``<pid-dir>/argv.json``).

Modes (``--fake-mode``, comma separated):
  replay         print the log's startup part with its timing scaled down, idle, print the shutdown part
                 on SIGTERM and exit 0 (default)
  never-reports  print only what comes before the first KV pool line, then idle
  exits-early    print the whole log, then exit with ``--fake-exit-code`` (default 1)
  ignore-term    ignore SIGTERM and SIGINT (the launcher must SIGKILL it)
  fork           start a child in the group and one that calls setsid() (leaves the group) with a
                 grandchild; all ignore SIGTERM and sleep
  flood          print ``--fake-flood-mb`` MB of noise as fast as possible before the replay
  daemon         double-fork a daemon that calls setsid() in between and ignores SIGTERM/SIGINT; the
                 middle process exits at once, so the daemon is an orphan no tree walk sees being born
  shm            create and map ``/dev/shm/psm_fake<tag>_<pid>`` and ``sem.mp-fake<tag>-<pid>`` (like vLLM's
                 multiprocessing resource tracker); only a graceful stop unlinks them (names in
                 ``<pid-dir>/shm.json``)
  shm-closed     create ``/dev/shm/psm_unmapped_<pid>``, hold it open a moment and close it without
                 mapping it (also in ``shm.json``): a segment the tree made and no longer uses
  shm-child      a child creates and maps ``/dev/shm/psm_fake<tag>_child_<pid>``, holds it a moment and exits
                 without unlinking it (also in ``shm.json``): made and used by the tree, held by no one
                 at the stop (a vLLM worker gone before its resource tracker)
  use-shm        map the existing ``/dev/shm/<--fake-use-shm>`` read-only (a model kept in ``/dev/shm``
                 for speed): used by the engine, not made by it
  slow-stop      on the stop signal, take ``--fake-stop-s`` seconds to shut down (printing as it goes)
  ray-workers    like vLLM on Ray: join the cluster at ``RAY_ADDRESS`` and start one actor pinned to each
                 alive node (``ray-worker-<pid>.pid``); they end with this process, as a job's actors do
  ray-detached   the same with detached actors, which outlive this process (a leak to be found)
  rendezvous     like torch.distributed's init across ``--nnodes N``: wait (up to 60 s) until N servers
                 have written their ``main-*.pid`` into ``--fake-pid-dir`` before the replay
  default-signals  install no handler: SIGINT is Python's KeyboardInterrupt (and stays ignored when
                 the engine inherited it ignored), SIGTERM kills; like vLLM's API server before uvicorn
``--fake-wait-for PATH``: before the replay, wait (up to 30 s) until PATH exists, so a test can make
something happen while the engine runs, not before it or after its stop.
Every process writes ``<pid-dir>/<role>-<pid>.pid`` ("pid pgid sid") so tests can check that all of
them are gone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import time
import zlib
from datetime import datetime

KV_RE = re.compile(r"KV cache size:|KV Cache is allocated|blocks: \d|max_total_num_tokens=")
READY_RE = re.compile(r"Application startup complete|fired up and ready to roll")
VLLM_TS = re.compile(r"\b(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")
SGL_TS = re.compile(r"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


def _opt(ns: argparse.Namespace, name: str, default: str) -> str:
    value = getattr(ns, name)
    if value is None:
        value = os.environ.get("FAKE_ENGINE_" + name.upper(), default)
    return str(value)


def _timestamp(line: str) -> float | None:
    m = SGL_TS.search(line)
    if m:
        return datetime(*map(int, m.groups())).timestamp()  # type: ignore[misc]
    m = VLLM_TS.search(line)
    if m:
        mo, d, h, mi, s = map(int, m.groups())
        return datetime(2000, mo, d, h, mi, s).timestamp()
    return None


def _read_log(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".txt") and "\n---\n" in text:  # recorded paste: header, ---, the log
        text = text.split("\n---\n", 1)[1]
    return text.splitlines()


def _write_whole(pid_dir: str, name: str, text: str) -> None:
    """Write then rename: a test polling the folder never reads a half-written file."""
    partial = os.path.join(pid_dir, f".{name}.{os.getpid()}.partial")
    with open(partial, "w") as f:
        f.write(text)
    os.replace(partial, os.path.join(pid_dir, name))


def _pidfile(pid_dir: str, role: str) -> None:
    if pid_dir:
        _write_whole(pid_dir, f"{role}-{os.getpid()}.pid", f"{os.getpid()} {os.getpgid(0)} {os.getsid(0)}")


def _sleeper(pid_dir: str, role: str) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _pidfile(pid_dir, role)
    while True:
        time.sleep(1)


def _fork_children(pid_dir: str) -> None:
    if os.fork() == 0:  # in the group
        _sleeper(pid_dir, "child")
    if os.fork() == 0:  # leaves the group and the session, then forks a grandchild
        os.setsid()
        if os.fork() == 0:
            _sleeper(pid_dir, "escaped-grandchild")
        _sleeper(pid_dir, "escaped")


def _daemonize(pid_dir: str) -> None:
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            _sleeper(pid_dir, "daemon")
        os._exit(0)
    os.waitpid(middle, 0)


def shm_tag(pid_dir: str) -> str:
    """The ``<tag>`` in the fake's ``/dev/shm`` names: its pid directory's, so that a test counts its own
    fake's segments and not a neighbour's under ``pytest -n`` (``Fake.snapshot``)."""
    return f"{zlib.crc32(pid_dir.encode()):08x}" if pid_dir else ""


def _make_shm(pid_dir: str, modes: set[str]) -> list[str]:
    import mmap

    tag = shm_tag(pid_dir)
    names = [f"psm_fake{tag}_{os.getpid()}", f"sem.mp-fake{tag}-{os.getpid()}"] if "shm" in modes else []
    keep = []
    for name in names:
        fd = os.open(f"/dev/shm/{name}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, 1 << 20)
        keep.append(mmap.mmap(fd, 1 << 20))
        os.close(fd)
    if "shm-child" in modes:
        name = f"psm_fake{tag}_child_{os.getpid()}"
        child = os.fork()
        if child == 0:
            fd = os.open(f"/dev/shm/{name}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            os.ftruncate(fd, 1 << 16)
            mapped = mmap.mmap(fd, 1 << 16)
            time.sleep(0.3)
            mapped.close()
            os._exit(0)
        os.waitpid(child, 0)
        names.append(name)
    if "shm-closed" in modes:
        name = f"psm_unmapped_{os.getpid()}"  # no "fake" in it: other tests' leak checks count those
        fd = os.open(f"/dev/shm/{name}", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        time.sleep(0.3)  # held open while it is set up, then closed without ever being mapped
        os.close(fd)
        names.append(name)
    _SHM_KEEP.extend(keep)
    if pid_dir:
        _write_whole(pid_dir, "shm.json", json.dumps(names))
    return names


_SHM_KEEP: list[object] = []


def _use_shm(name: str) -> None:
    import mmap

    fd = os.open(f"/dev/shm/{name}", os.O_RDONLY)
    _SHM_KEEP.append(mmap.mmap(fd, 0, prot=mmap.PROT_READ))
    _SHM_KEEP.append(fd)  # held open too, as llama.cpp holds its model file


def _rendezvous(pid_dir: str, nnodes: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if len([n for n in os.listdir(pid_dir) if n.startswith("main-")]) >= nnodes:
            return
        time.sleep(0.05)
    print(f"fake engine: only some of {nnodes} nodes joined the rendezvous", flush=True)


def _ray_workers(pid_dir: str, detached: bool) -> None:
    """One actor on every alive node of the cluster at ``RAY_ADDRESS``, as vLLM's Ray executor starts its
    workers (``vllm/v1/executor/ray_executor.py``); returns once each has written its pid file."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(log_to_driver=False, logging_level="ERROR")

    class FakeEngineWorker:
        def start(self, pid_dir: str) -> int:
            _pidfile(pid_dir, "ray-worker")
            return os.getpid()

    cls = ray.remote(num_cpus=0, num_gpus=0)(FakeEngineWorker)
    actors = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        opts: dict[str, object] = {"scheduling_strategy": NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)}
        if detached:
            opts.update(lifetime="detached", name=f"fake-worker-{os.getpid()}-{n['NodeID'][:8]}",
                        namespace="fake-engine")
        actors.append(cls.options(**opts).remote())
    ray.get([a.start.remote(pid_dir) for a in actors], timeout=120)
    _SHM_KEEP.extend(actors)  # kept referenced: an owned actor ends when its handle does


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    for name in ("log", "mode", "scale", "max-gap", "pid-dir", "exit-code", "flood-mb", "stop-s",
                 "use-shm", "wait-for"):
        parser.add_argument(f"--fake-{name}", dest=name.replace("-", "_"))
    ns, rest = parser.parse_known_args()
    log = _opt(ns, "log", "")
    modes = set(_opt(ns, "mode", "replay").split(","))
    scale = float(_opt(ns, "scale", "0.01"))
    max_gap = float(_opt(ns, "max_gap", "0.2"))
    pid_dir = _opt(ns, "pid_dir", "")
    exit_code = int(_opt(ns, "exit_code", "1"))
    flood_mb = float(_opt(ns, "flood_mb", "0"))
    stop_s = float(_opt(ns, "stop_s", "0"))

    _pidfile(pid_dir, "main")
    if pid_dir:
        seen = {"argv": rest, "env": {k: v for k, v in os.environ.items()
                                      if k.startswith(("CUDA_", "VLLM_", "SGLANG_", "GPULAYOUT_", "NCCL_", "RAY_"))}}
        for name in ("argv.json", f"argv-{os.getpid()}.json"):  # the last one, and each process's own
            _write_whole(pid_dir, name, json.dumps(seen))

    lines = _read_log(log) if log else []
    ready = next((i for i, ln in enumerate(lines) if READY_RE.search(ln)), None)
    startup, shutdown = (lines, []) if ready is None else (lines[:ready + 1], lines[ready + 1:])
    if "never-reports" in modes:
        first_kv = next((i for i, ln in enumerate(startup) if KV_RE.search(ln)), len(startup))
        startup, shutdown = startup[:first_kv], []

    shm = _make_shm(pid_dir, modes)
    wait_for = _opt(ns, "wait_for", "")
    deadline = time.monotonic() + 30
    while wait_for and not os.path.exists(wait_for) and time.monotonic() < deadline:
        time.sleep(0.01)
    if "use-shm" in modes:
        _use_shm(_opt(ns, "use_shm", ""))

    def shut_down(why: str) -> None:
        print(f"fake engine: {why}", flush=True)
        if "slow-stop" in modes:
            steps = max(1, int(stop_s / 0.1))
            for i in range(steps):
                time.sleep(stop_s / steps)
                print(f"fake engine: shutting down ({i + 1}/{steps})", flush=True)
        for ln in shutdown:
            print(ln)
        for name in shm:  # what the resource tracker does at a clean exit
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"/dev/shm/{name}")
        print("fake engine: stopped", flush=True)
        sys.stdout.flush()
        os._exit(0)

    def on_term(signum: int, frame: object) -> None:
        shut_down(f"stopping on signal {signum}")

    if "default-signals" not in modes:
        for sig in (signal.SIGTERM, signal.SIGINT):  # like a server: both mean "shut down"
            signal.signal(sig, signal.SIG_IGN if "ignore-term" in modes else on_term)
    if "fork" in modes:
        _fork_children(pid_dir)
    if "daemon" in modes:
        _daemonize(pid_dir)
    if "rendezvous" in modes and "--nnodes" in rest:
        _rendezvous(pid_dir, int(rest[rest.index("--nnodes") + 1]))
    if "ray-workers" in modes or "ray-detached" in modes:
        _ray_workers(pid_dir, detached="ray-detached" in modes)
    try:
        _serve(modes, startup, flood_mb, scale, max_gap, exit_code)
    except KeyboardInterrupt:
        shut_down("KeyboardInterrupt")


def _serve(modes: set[str], startup: list[str], flood_mb: float, scale: float, max_gap: float,
           exit_code: int) -> None:
    out = sys.stdout
    if "flood" in modes:
        noise = ("INFO 01-01 00:00:00 [flood.py:1] " + "x" * 100 + "\n") * 1000
        for _ in range(int(flood_mb * 1e6 / len(noise)) + 1):
            out.write(noise)
        out.flush()
    prev = None
    for ln in startup:
        ts = _timestamp(ln)
        if ts is not None and prev is not None and ts > prev:
            time.sleep(min((ts - prev) * scale, max_gap))
        if ts is not None:
            prev = ts
        out.write(ln + "\n")
        out.flush()
    if "exits-early" in modes:
        sys.exit(exit_code)
    while True:  # serving
        time.sleep(1)


if __name__ == "__main__":
    main()
