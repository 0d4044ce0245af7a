"""The ``startup`` check when a deployment's GPUs span several hosts of a Ray machine.

Each engine is launched the way it spans nodes in production (``launch/multinode.py``), as the engine
says (``Engine.across_hosts``):

* ``ray-executor`` (vLLM): one API server on this host (the head), through the one-host ``launch()`` so its own tree is
  contained and stopped as on one host, with ``--distributed-executor-backend ray``, ``RAY_ADDRESS``
  and ``NCCL_DEBUG=INFO``. Its workers are Ray actors the engine places itself
  (``vllm/v1/executor/ray_utils.py`` ``initialize_ray_cluster``); they are not in our tree, so after
  the stop every node is swept through Ray for processes of this launch. Which GPUs a worker gets on
  its node is Ray's choice (its ``GPU`` resource); the deployment's ``gpus`` pick the hosts. vLLM
  refuses a placement group without a bundle on the driver's node (``_verify_bundles`` there), so the
  check must run on one of the deployment's hosts.
* ``process-per-node`` (SGLang): one server per node through an actor pinned there (``start_on_nodes``), ``--nnodes N
  --node-rank i --dist-init-addr HEAD:PORT`` (``python/sglang/srt/server_args.py``), each node seeing
  its own GPUs; the rank-0 log is followed through its actor and fed to the same ``LogWatcher`` as on
  one host; every node's tree is stopped and checked gone.

How the processes of one launch are found on a node: a marker, ``GPULAYOUT_LAUNCH_ID=<uuid>``, in the
environment of every process of it. The head process and its children inherit it; Ray actors get it
through the job's runtime environment, which ``ray.init`` in the engine reads from
``RAY_JOB_CONFIG_JSON_ENV_VAR`` (``ray/_private/worker.py``, the variable ``ray job submit`` uses), so
vLLM's workers carry it on whatever node they land. Processes still marked after the stop are killed
and reported (``warn``; ``fail`` when even SIGKILL leaves them).

With ``NCCL_DEBUG=INFO`` NCCL prints which transport each channel took; the lines are read from the
logs (``launch/nccl.py``): InfiniBand passes, sockets between hosts warn with the fix.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.errors import LaunchError, ProbeError
from pytest_gpulayout.findings import Finding, Status, failed, worst
from pytest_gpulayout.launch.argv import expected_reports, model_path_for, release
from pytest_gpulayout.launch.facts import StartupFacts
from pytest_gpulayout.launch.launcher import LaunchResult, StopReason, free_port, launch
from pytest_gpulayout.launch.logparse import clean
from pytest_gpulayout.launch.multinode import NCCL_ENV, head_argv, node_argvs, ray_head_env, start_on_nodes
from pytest_gpulayout.launch.nccl import parse_transports, transport_verdict
from pytest_gpulayout.launch.proctree import pid_alive, process_table
from pytest_gpulayout.launch.progress import Progress
from pytest_gpulayout.launch.served import Served
from pytest_gpulayout.launch.verdict import CHECK, judge
from pytest_gpulayout.machine import ray as rsrc
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.placement import PlacementError, resolve_gpus

MARKER_ENV = "GPULAYOUT_LAUNCH_ID"
RAY_JOB_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
RAY_PREFIX = "ray:"
#: How long the engine's Ray workers get to exit by themselves after the head is gone (Ray ends a
#: job's actors when its driver exits; measured about 1-3 s on a local cluster).
WORKER_EXIT_S = 10.0
POLL_S = 0.2
TAIL_LINES = 30


@dataclass(frozen=True)
class NodeSpan:
    """One host a deployment runs on: its Ray node, its IP and the deployment's GPUs there, as that
    host numbers them (its own CUDA indices)."""

    host: str
    node_id: str
    ip: str
    head: bool
    gpus: tuple[int, ...]


def node_spans(dep: Deployment, machine: Machine | None) -> tuple[NodeSpan, ...]:
    """The hosts ``dep`` spans in rank order (the host of its first GPUs first); ``()`` when it stays
    on one host or the machine is not a Ray cluster (then the one-host launch applies)."""
    if machine is None or not machine.source.startswith(RAY_PREFIX) or len(machine.hosts) <= 1:
        return ()
    try:
        chosen = resolve_gpus(dep, machine)
    except PlacementError:
        return ()  # the placement check says why; the one-host path reports it at launch
    by_host: dict[str, list[int]] = {}
    for i in chosen:
        g = machine.gpu(i)
        host = g.host or machine.host or ""
        local = [x.index for x in machine.gpus if x.host == g.host].index(g.index)
        by_host.setdefault(host, []).append(local)
    if len(by_host) <= 1:
        return ()
    spans = []
    for host, gpus in by_host.items():
        node = machine.nodes.get(host)
        if node is None or not node.node_id or not node.ip:
            raise LaunchError(f"the machine has no Ray node id and IP for host {host} (a snapshot without "
                              f"them cannot be launched on: use machine: ray, the live cluster)")
        spans.append(NodeSpan(host, node.node_id, node.ip, node.head, tuple(gpus)))
    return tuple(spans)


def marker_env(launch_id: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The marker for the launched process, and for every Ray actor its job starts (merged into a job
    config already in ``environ``, as under ``ray job submit``)."""
    job: dict[str, Any] = {}
    raw = environ.get(RAY_JOB_ENV)
    if raw:
        try:
            loaded = json.loads(raw)
            job = loaded if isinstance(loaded, dict) else {}
        except ValueError:
            job = {}
    runtime_env = dict(job.get("runtime_env") or {})
    env_vars = dict(runtime_env.get("env_vars") or {})
    env_vars[MARKER_ENV] = launch_id
    runtime_env["env_vars"] = env_vars
    job["runtime_env"] = runtime_env
    return {MARKER_ENV: launch_id, RAY_JOB_ENV: json.dumps(job)}


# ------------------------------------------------------------------------------------------------
# On each node (a Ray task): the processes of one launch, and killing what is left of them
# ------------------------------------------------------------------------------------------------
def kernel_id() -> str:
    """Which kernel and PID namespace this process sees ``/proc`` of: several Ray nodes on one machine
    (the tests' cluster, containers sharing the host's PIDs) all see every process of it."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


def marked_processes(launch_id: str, *, raylet: str | None = None,
                     unowned: bool = True) -> list[tuple[int, int, str]]:
    """(pid, start time, command line) of every live process here whose environment carries
    ``GPULAYOUT_LAUNCH_ID=launch_id`` or whose command line names it.

    ``raylet``: this node's raylet pid (``RAY_RAYLET_PID``, which Ray gives every worker and so every
    process an actor starts); a process of another raylet belongs to another Ray node on this kernel
    and is left to that node's sweep. ``unowned``: also count marked processes of no raylet (the head
    process's own tree)."""
    needle = f"{MARKER_ENV}={launch_id}".encode()
    me = os.getpid()
    out: list[tuple[int, int, str]] = []
    for pid, st in process_table().items():
        if pid == me or st.state in ("Z", "X", "x"):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if needle not in env and launch_id.encode() not in cmd:
            continue
        owner = next((e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"RAY_RAYLET_PID=")), None)
        if owner is None and not unowned:
            continue
        if owner is not None and raylet is not None and owner != raylet:
            continue
        out.append((pid, st.start, cmd.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200]))
    return out


def sweep_node(launch_id: str, wait_s: float, checker_kernel: str, checker_node: bool) -> dict[str, Any]:
    """Wait up to ``wait_s`` for this launch's processes here to exit, SIGKILL the rest; what was seen.
    Processes of no raylet are this node's when the check runs here or this node has a kernel of its own."""
    raylet = os.environ.get("RAY_RAYLET_PID")
    unowned = checker_node or kernel_id() != checker_kernel

    def scan() -> list[tuple[int, int, str]]:
        return marked_processes(launch_id, raylet=raylet, unowned=unowned)

    deadline = time.monotonic() + wait_s
    found = scan()
    while found and time.monotonic() < deadline:
        time.sleep(POLL_S)
        found = scan()
    for pid, _, _ in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 5.0
    alive = [p for p, _, _ in found]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if pid_alive(p)]
    return {"hostname": socket.gethostname(), "killed": [[p, c] for p, _, c in found], "alive": alive}


def sweep_nodes(ray: Any, node_ids: Sequence[str], launch_id: str, wait_s: float) -> dict[str, dict[str, Any]]:
    """``sweep_node`` on every node at once (pinned, ``num_cpus=0``); a node that does not answer says why."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here, kernel = str(ray.get_runtime_context().get_node_id()), kernel_id()
    task = ray.remote(num_cpus=0, num_gpus=0, max_retries=0)(sweep_node)
    refs = {n: task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n, soft=False))
            .remote(launch_id, wait_s, kernel, n == here) for n in node_ids}
    out: dict[str, dict[str, Any]] = {}
    for n, ref in refs.items():
        try:
            out[n] = ray.get(ref, timeout=wait_s + 60)
        except Exception as err:  # the node died or its task failed: the verdict names it
            out[n] = {"error": _cause(err)}
    return out


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on this host (a task pinned to the rank-0 node runs it there)."""
    ports: list[int] = []
    while len(ports) < count:
        p = free_port()
        if p not in ports:
            ports.append(p)
    return ports


# ------------------------------------------------------------------------------------------------
# Ray connection
# ------------------------------------------------------------------------------------------------
def _cause(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(err).__name__


def _connect(address: str) -> tuple[Any, bool]:
    """Ray, joined to the cluster at ``address`` (reused when this process is joined already)."""
    ray = rsrc.import_ray()
    if ray.is_initialized():
        return ray, False
    rsrc._reachable(address, rsrc.DEFAULT_TIMEOUT_S)
    rsrc._init(ray, address, rsrc.DEFAULT_TIMEOUT_S)
    return ray, True


def _alive_nodes(ray: Any) -> list[str]:
    return [n["NodeID"] for n in ray.nodes() if n.get("Alive")]


# ------------------------------------------------------------------------------------------------
# The verdict across nodes
# ------------------------------------------------------------------------------------------------
def _host_of(machine: Machine, node_id: str) -> str:
    for host, facts in machine.nodes.items():
        if facts.node_id == node_id:
            return host
    return node_id[:8]


def with_nodes(base: Finding, spans: Sequence[NodeSpan], logs: Sequence[str], sweep: Mapping[str, Mapping[str, Any]],
               machine: Machine, launch_id: str, commands: Mapping[str, Sequence[str]]) -> Finding:
    """``base`` (the pool verdict, ``launch/verdict.judge``) plus what only a multi-node launch shows:
    NCCL's transport between the hosts, and this launch's processes left on any node. Pure."""
    transports = parse_transports(logs)
    t_status, t_text = transport_verdict(transports, crosses_hosts=True)
    statuses = [base.status]
    notes: list[str] = []
    if base.status is not Status.FAIL or transports.cross_host is not None:  # a failed start: only what it saw
        statuses.append(Status(t_status))
        notes.append(t_text)
    leftovers: dict[str, tuple[int, ...]] = {}
    for node_id, answer in sweep.items():
        host = _host_of(machine, node_id)
        if "error" in answer:
            statuses.append(Status.WARN)
            notes.append(f"could not check {host} for processes left by the launch: {answer['error']}")
            continue
        killed = [(int(p), str(c)) for p, c in answer.get("killed", [])]
        if killed:
            leftovers[host] = tuple(p for p, _ in killed)
            shown = "; ".join(f"{p} {c[:80]}" for p, c in killed[:4])
            alive = [int(p) for p in answer.get("alive", [])]
            if alive:
                statuses.append(Status.FAIL)
                notes.append(f"processes of this launch on {host} survived SIGKILL ({', '.join(map(str, alive))}): "
                             f"kill them before the next launch")
            else:
                statuses.append(Status.WARN)
                notes.append(f"{len(killed)} process(es) of this launch were still running on {host} after the "
                             f"stop and were killed ({shown}): the engine does not stop all of its workers "
                             f"(a detached Ray actor?)")
    hosts = tuple(s.host for s in spans)
    transport = {**transports.to_json(), "status": t_status, "note": t_text}
    facts = base.facts
    if isinstance(facts, StartupFacts):
        facts = dataclasses.replace(facts, nodes=hosts, transport=transport, node_leftovers=leftovers,
                                    launch_marker=f"{MARKER_ENV}={launch_id}",
                                    node_commands={h: tuple(c) for h, c in commands.items()})
    said = " ".join(n if n.endswith(".") else n + "." for n in notes if n)
    msg = f"{base.message}\n  across {len(hosts)} hosts ({', '.join(hosts)}): {said}" if said else base.message
    return Finding(base.check, worst(statuses), msg, facts)


def _not_launched(dep: Deployment, why: str, command: Sequence[str] = ()) -> Finding:
    return failed(CHECK, f"cannot launch across the Ray cluster's hosts: {why}",
                  StartupFacts(kv_tokens=None, max_concurrency=None, seconds_to_kv=None, error_kind=None,
                               log_path=None, command=tuple(command)))


def launch_across(dep: Deployment, model: Any, machine: Machine, spans: Sequence[NodeSpan], *, engine: Served,
                  prediction_tokens: int | None, log_path: Path, engine_version: str | None,
                  stop_when: str = "kv", grace_s: float = 10.0,
                  worker_exit_s: float | None = None,
                  progress: Progress | None = None) -> tuple[Finding, LaunchResult | None]:
    """Launch ``dep`` across ``spans`` (see the module docstring); never raises for engine or cluster
    trouble: that is the finding. ``worker_exit_s``: default ``WORKER_EXIT_S``, read at the call."""
    if worker_exit_s is None:
        worker_exit_s = WORKER_EXIT_S
    address = machine.source[len(RAY_PREFIX):]
    try:
        ray, joined_here = _connect(address)
    except (ProbeError, LaunchError) as err:
        return _not_launched(dep, str(err)), None
    try:
        how = engine.across_hosts()
        if how == "ray-executor":
            return _ray_head(ray, engine, dep, model, machine, spans, address, prediction_tokens=prediction_tokens,
                             log_path=log_path, engine_version=engine_version, stop_when=stop_when,
                             grace_s=grace_s, worker_exit_s=worker_exit_s, progress=progress)
        if how is None:
            return _not_launched(dep, f"{engine.display} does not run across hosts"), None
        return _per_node(ray, engine, dep, model, machine, spans, prediction_tokens=prediction_tokens,
                         log_path=log_path,
                       stop_when=stop_when, grace_s=grace_s)
    finally:
        if joined_here:
            ray.shutdown()


def _read_lines(path: Path | None) -> list[str]:
    if path is None:
        return []
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def _ray_head(ray: Any, engine: Served, dep: Deployment, model: Any, machine: Machine, spans: Sequence[NodeSpan],
              address: str, *, prediction_tokens: int | None, log_path: Path, engine_version: str | None,
              stop_when: str, grace_s: float, worker_exit_s: float,
              progress: Progress | None = None) -> tuple[Finding, LaunchResult | None]:
    """One server on this host, its workers Ray actors the engine places itself (vLLM)."""
    here = str(ray.get_runtime_context().get_node_id())
    head = next((s for s in spans if s.node_id == here), None)
    if head is None:
        return _not_launched(dep, f"{engine.display}'s API server runs where the check runs "
                                  f"({_host_of(machine, here)}), and {engine.display} refuses a placement group "
                                  f"without GPUs on that node; run the check on one of "
                                  f"{', '.join(s.host for s in spans)}"), None
    launch_id = uuid.uuid4().hex
    port = free_port()
    argv = head_argv(engine, dep, model_path_for(dep), port, engine_version=engine_version)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **ray_head_env(dep, address), **marker_env(launch_id, os.environ)}
    engines, ranks = expected_reports(engine, dep, release(engine, engine_version))
    locks = [g.uuid or f"index-{i}" for i, g in enumerate(x for x in machine.gpus if x.host == head.host)
             if i in head.gpus]
    try:
        result = launch(argv, env=env, watcher=engine.log_watcher(engines, ranks), timeout_s=dep.launch.timeout_s,
                        log_path=log_path, grace_s=grace_s, stop_when=stop_when, gpus=locks,
                        stop_signal=engine.stop_signal, progress=progress)
    except LaunchError as err:
        sweep_nodes(ray, _alive_nodes(ray), launch_id, 2.0)
        return _not_launched(dep, f"{engine.display}: {err}", argv), None
    sweep = sweep_nodes(ray, _alive_nodes(ray), launch_id, worker_exit_s)
    base = judge(dep, model, result, name=engine.display, prediction_tokens=prediction_tokens)
    return with_nodes(base, spans, _read_lines(result.log_path), sweep, machine, launch_id,
                      {head.host: argv}), result


def _node_log(log_path: Path, rank: int) -> Path:
    return log_path.with_name(f"{log_path.stem}.rank{rank}{log_path.suffix}")


def _per_node(ray: Any, engine: Served, dep: Deployment, model: Any, machine: Machine, spans: Sequence[NodeSpan], *,
              prediction_tokens: int | None, log_path: Path, stop_when: str,
              grace_s: float) -> tuple[Finding, LaunchResult | None]:
    """One server process per host, each through an actor pinned there (SGLang)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    rank0 = spans[0]
    ports_task = ray.remote(num_cpus=0, num_gpus=0, max_retries=0)(free_ports)
    try:
        port, dist_port = ray.get(ports_task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
            node_id=rank0.node_id, soft=False)).remote(2), timeout=60)
    except Exception as err:
        return _not_launched(dep, f"no free port on {rank0.host}: {_cause(err)}"), None
    argvs = node_argvs(engine, dep, model_path_for(dep), port, head_ip=rank0.ip, dist_port=dist_port,
                              nnodes=len(spans))
    launch_id = uuid.uuid4().hex
    plan = []
    for rank, (span, argv) in enumerate(zip(spans, argvs, strict=True)):
        env = {"PYTHONUNBUFFERED": "1", "CUDA_VISIBLE_DEVICES": ",".join(map(str, span.gpus)), **NCCL_ENV,
               **dict(dep.launch.env), **marker_env(launch_id, {})}
        plan.append((span.node_id, argv, env, str(_node_log(log_path, rank))))
    commands = {s.host: a for s, a in zip(spans, argvs, strict=True)}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0, started_at = time.monotonic(), time.time()
    try:
        nodes = start_on_nodes(ray, plan)
    except Exception as err:
        sweep_nodes(ray, [s.node_id for s in spans], launch_id, 2.0)
        return _not_launched(dep, f"{engine.display} did not start on every node: {_cause(err)}", argvs[0]), None
    watcher = engine.log_watcher(dep.dp, max(1, len(rank0.gpus) // max(1, dep.dp)))
    tail: list[str] = []
    stopped_by = StopReason.TIMEOUT
    seconds_to_kv: float | None = None
    returncode: int | None = None
    problem: str | None = None
    try:
        with open(log_path, "wb") as local:
            offset, partial, last_rc = 0, b"", 0.0
            actor0 = nodes.actors[rank0.node_id]
            while True:
                chunk, offset = ray.get(actor0.log_since.remote(offset), timeout=60)
                local.write(chunk)
                *whole, partial = (partial + chunk).split(b"\n")
                for raw in whole:
                    text = raw.decode("utf-8", "replace")
                    watcher.feed(text)
                    tail.append(clean(text))
                del tail[:-TAIL_LINES]
                now = time.monotonic()
                if watcher.failed:
                    stopped_by = StopReason.ERROR
                    break
                if watcher.kv_complete and seconds_to_kv is None:
                    seconds_to_kv = now - t0
                if (stop_when == "kv" and watcher.kv_complete) or (stop_when == "ready" and watcher.ready):
                    stopped_by = StopReason.KV if stop_when == "kv" else StopReason.READY
                    break
                if now - last_rc >= 1.0:  # also scans each node's tree, so no child is missed
                    last_rc = now
                    nodes.alive()
                    codes = {n: ray.get(a.returncode.remote(), timeout=60) for n, a in nodes.actors.items()}
                    ended = [c for c in codes.values() if c is not None]
                    if ended:
                        stopped_by = StopReason.EXIT
                        returncode = codes[rank0.node_id] if codes[rank0.node_id] is not None else ended[0]
                        break
                if now - t0 >= dep.launch.timeout_s:
                    break
                if not chunk:
                    time.sleep(POLL_S)
    except Exception as err:  # a node or its actor died under us: stop the rest, say so
        problem = f"lost a node during the launch: {_cause(err)}"
        stopped_by = StopReason.ERROR
    seconds_to_stop = time.monotonic() - t0
    try:
        left = nodes.stop(grace_s, release=False)
    except Exception as err:
        left = {}
        problem = problem or f"could not stop every node's engine through its actor: {_cause(err)}"
    sweep = sweep_nodes(ray, [s.node_id for s in spans], launch_id, 2.0)
    try:
        logs = nodes.log_lines()
    except Exception:  # an actor is gone: its log with it
        logs = {}
    nodes.close()
    rank0_lines = logs.get(rank0.node_id, [])
    if rank0_lines:  # the whole rank-0 log, shutdown included, beside the others' on their nodes
        log_path.write_text("\n".join(rank0_lines) + "\n", encoding="utf-8")
    leftover = tuple(p for pids in left.values() for p in pids)
    result = LaunchResult(
        argv=tuple(argvs[0]), pid=nodes.pids[rank0.node_id], returncode=returncode, seconds_to_kv=seconds_to_kv,
        seconds_total=time.monotonic() - t0, log=watcher.result(), log_path=log_path, tail=tuple(tail),
        timed_out=stopped_by is StopReason.TIMEOUT, leftover_pids=leftover, stopped_by=stopped_by,
        started_at=started_at,
        ended_at=time.time(), lines=watcher.lines, seconds_to_stop=seconds_to_stop, stop="signal", grace_s=grace_s,
        containment="ray-actor")
    base = judge(dep, model, result, name=engine.display, prediction_tokens=prediction_tokens)
    if problem:
        base = Finding(base.check, Status.FAIL, f"{base.message} {engine.display} across hosts: {problem}.",
                       base.facts)
    all_lines = [ln for n in (s.node_id for s in spans) for ln in logs.get(n, [])]
    return with_nodes(base, spans, all_lines, sweep, machine, launch_id, commands), result
