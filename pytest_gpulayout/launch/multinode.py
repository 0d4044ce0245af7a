"""Starting an engine across the nodes of a Ray cluster, and stopping every process of it on every node.

Engines span nodes differently (``Engine.across_hosts``), and the startup check launches each the way it runs in
production:

* vLLM runs one API server on the head node with ``--distributed-executor-backend ray``; its workers
  are Ray actors the engine places itself (``vllm/v1/executor/ray_utils.py`` ``initialize_ray_cluster``
  connects to ``RAY_ADDRESS``). Only the head process is ours to start; the workers die with it.
* SGLang runs one server process per node, ``--nnodes N --node-rank i --dist-init-addr HEAD:PORT``
  (``python/sglang/srt/server_args.py``); we start each through a Ray actor pinned to its node.

Each per-node process is owned by a small actor on that node (``NodeProcess``) which tracks the
process tree through ``/proc`` exactly as the one-host launcher does (``proctree.ProcessTree``), so
``stop`` there means the same thing: SIGTERM to the tree, SIGKILL after a grace period, and the list
of processes still alive afterwards, which must be empty. ``NCCL_DEBUG=INFO`` is set for every launch
so the log says which transport NCCL took (``launch/nccl.py``).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.launch.argv import release
from pytest_gpulayout.launch.proctree import ProcessTree
from pytest_gpulayout.launch.served import Served

NCCL_ENV = {"NCCL_DEBUG": "INFO"}


def head_argv(engine: Served, dep: Deployment, model_path: str, port: int, *,
              engine_version: str | None = None) -> list[str]:
    """The head's argv when ``engine`` places its own workers through Ray (``ray-executor``): the
    deployment's flags plus what the engine needs to span hosts (vLLM: the Ray executor)."""
    return [*engine.launch_argv(dep, model_path, port, release(engine, engine_version)),
            *engine.node_args(nnodes=1, rank=0, dist_init_addr="")]


def ray_head_env(dep: Deployment, address: str) -> dict[str, str]:
    """What the head process gets on top of its environment: the cluster to join, NCCL's transport lines."""
    return {**NCCL_ENV, **dict(dep.launch.env), "RAY_ADDRESS": address}


def node_argvs(engine: Served, dep: Deployment, model_path: str, port: int, *, head_ip: str, dist_port: int,
               nnodes: int) -> list[list[str]]:
    """One argv per node for an engine with a process per node, rank 0 on the head (which alone serves HTTP
    on ``port``)."""
    base = engine.launch_argv(dep, model_path, port, None)
    return [[*base, *engine.node_args(nnodes=nnodes, rank=rank, dist_init_addr=f"{head_ip}:{dist_port}")]
            for rank in range(nnodes)]


class NodeProcess:
    """A Ray actor body: one engine process on this node, its tree tracked, stopped for good."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._tree: Any = None
        self._log: Path | None = None

    def start(self, argv: Sequence[str], env: Mapping[str, str], log_path: str) -> int:
        self._log = Path(log_path)
        self._log.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log, "wb") as out:
            self._proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env={**os.environ, **env}, start_new_session=True)
        self._tree = ProcessTree(self._proc.pid)
        return self._proc.pid

    def alive(self) -> list[int]:
        if self._tree is None:
            return []
        self._tree.scan()
        return list(self._tree.alive())

    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def stop(self, grace_s: float = 10.0) -> list[int]:
        """SIGTERM the whole tree, SIGKILL what is left after ``grace_s``; the pids still alive (none)."""
        if self._tree is None:
            return []
        self._tree.kill_now(grace_s)
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        return list(self._tree.alive())

    def log_lines(self) -> list[str]:
        if self._log is None:
            return []
        try:
            return self._log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []

    def log_since(self, offset: int, limit: int = 4 << 20) -> tuple[bytes, int]:
        """What the log gained after byte ``offset`` (at most ``limit`` bytes) and the new offset: the
        startup check follows the rank-0 log from another host this way."""
        if self._log is None:
            return b"", offset
        try:
            with open(self._log, "rb") as f:
                f.seek(offset)
                data = f.read(limit)
        except OSError:
            return b"", offset
        return data, offset + len(data)


@dataclass
class NodeLaunch:
    """Engine processes started through actors, one per node (node id -> actor)."""

    ray: Any
    actors: dict[str, Any] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    closed: bool = False

    def alive(self) -> dict[str, list[int]]:
        refs = {n: a.alive.remote() for n, a in self.actors.items()}
        return {n: self.ray.get(r, timeout=60) for n, r in refs.items()}

    def log_lines(self) -> dict[str, list[str]]:
        return {n: self.ray.get(a.log_lines.remote(), timeout=60) for n, a in self.actors.items()}

    def stop(self, grace_s: float = 10.0, *, release: bool = True) -> dict[str, list[int]]:
        """Stop every node's process tree; returns what is still alive per node (empty lists).
        ``release=False`` keeps the actors, so their logs can still be read; ``close()`` then ends them."""
        refs = {n: a.stop.remote(grace_s) for n, a in self.actors.items()}
        left = {n: self.ray.get(r, timeout=grace_s + 60) for n, r in refs.items()}
        if release:
            self.close()
        return left

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for a in self.actors.values():
            self.ray.kill(a)


def start_on_nodes(ray: Any, plan: Sequence[tuple[str, Sequence[str], Mapping[str, str], str]]) -> NodeLaunch:
    """Start ``(node id, argv, env, log path)`` each on its node; the caller must ``stop()`` the result."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    actor_cls = ray.remote(num_cpus=0, num_gpus=0, max_restarts=0)(NodeProcess)
    launch = NodeLaunch(ray)
    try:
        for node_id, argv, env, log_path in plan:
            actor = actor_cls.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)).remote()
            launch.actors[node_id] = actor
            launch.pids[node_id] = ray.get(actor.start.remote(list(argv), dict(env), log_path), timeout=120)
    except BaseException:
        launch.stop(grace_s=2.0)
        raise
    return launch
