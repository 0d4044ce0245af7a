"""The machine a Ray cluster spans: one probe task pinned to every alive node, merged into one Machine.

vLLM spans nodes on Ray (``--distributed-executor-backend ray``): its workers land on the nodes the
cluster offers, so the machine to check is the cluster. Spellings (manifest ``machine:``, CLI
``--machine``, ``--gpulayout-machine``): ``ray`` (the cluster at ``RAY_ADDRESS``, else the one
``ray start`` recorded on this machine), ``ray:HOST:PORT`` / ``ray:auto`` and ``ray://HOST:PORT`` (Ray
Client). Rules that shape it:

* It connects to the user's running cluster and never starts one (``ray.init(address=None)`` would
  start a private one-node cluster that passes every check: the address is always explicit).
* One task per alive node, pinned there by ``NodeAffinitySchedulingStrategy(soft=False)`` and asking
  ``num_cpus=0, num_gpus=0``, so it reserves nothing and runs beside a serving job.
* A node whose probe fails or does not answer in time is named and the whole probe is a
  ``ProbeError`` (exit 3): never a partial machine that passes.
* Ray is an optional extra, imported here only; without it the error names the extra (exit 2).
* pytest-gpulayout must be importable on every node (the task runs its ``node_probe`` module there).

The merged machine numbers GPUs head node first, then by host name; each GPU carries its ``host``,
pairs across hosts are ``NET``, and ``Machine.nodes`` holds each node's facts (``machine/nodes.py``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pytest_gpulayout.errors import InputError, ProbeError
from pytest_gpulayout.host import HostEngine
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.machine.node_probe import probe_node
from pytest_gpulayout.machine.nodes import NodeFacts, node_from_dict
from pytest_gpulayout.machine.snapshot import machine_from_dict

PREFIX = "ray"
EXTRA_HINT = "pip install 'pytest-gpulayout[ray]'"
DEFAULT_TIMEOUT_S = 60.0
TIMEOUT_ENV = "GPULAYOUT_RAY_TIMEOUT_S"


def is_ray_spec(spec: str) -> bool:
    """``ray``, ``ray:ADDRESS`` or ``ray://HOST:PORT``."""
    s = spec.strip()
    return s == PREFIX or s.startswith(PREFIX + ":")


def address_of(spec: str, env: Mapping[str, str] | None = None) -> str:
    """The address ``ray.init`` gets: ``ray`` -> ``$RAY_ADDRESS`` or ``auto``; ``ray:X`` -> ``X``;
    ``ray://...`` unchanged (a Ray Client address)."""
    env = os.environ if env is None else env
    s = spec.strip()
    if s == PREFIX:
        return env.get("RAY_ADDRESS", "").strip() or "auto"
    if s.startswith(PREFIX + "://"):
        return s
    address = s[len(PREFIX) + 1:].strip()
    if not address:
        raise InputError("'ray:' needs an address (ray:HOST:PORT, ray:auto) or write plain 'ray'")
    return address


def timeout_from_env(env: Mapping[str, str] | None = None) -> float:
    env = os.environ if env is None else env
    raw = env.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise InputError(f"must be a number of seconds above 0, not {raw!r}", key=TIMEOUT_ENV)
    return value


def import_ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise InputError(f"the Ray machine source needs Ray ({err}): {EXTRA_HINT}") from None
    return ray


def _host_port(address: str) -> tuple[str, int] | None:
    a = address.split("://", 1)[-1]
    host, _, port = a.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _resolve_address(ray: Any, address: str) -> str:
    """``auto`` -> the recorded cluster's ``host:port`` (Ray's own lookup); an error if there is none."""
    if address != "auto":
        return address
    try:
        from ray._private.services import canonicalize_bootstrap_address_or_die
    except ImportError:  # another Ray layout: let ray.init do the lookup
        return address
    try:
        return str(canonicalize_bootstrap_address_or_die("auto"))
    except (ConnectionError, ValueError) as err:
        raise ProbeError(f"no running Ray cluster found (RAY_ADDRESS is not set, and {err}); start one with "
                         f"`ray start --head` or give machine: ray://HOST:PORT") from None


def _reachable(address: str, timeout_s: float) -> None:
    """A quick TCP connect first: ``ray.init`` at a dead address retries for minutes."""
    hp = _host_port(address)
    if hp is None:
        return
    try:
        socket.create_connection(hp, timeout=min(timeout_s, 10.0)).close()
    except OSError as err:
        raise ProbeError(f"no Ray cluster answers at {address} ({err.strerror or err}); is `ray start --head` "
                         f"running there, and is the address right?") from None


def host_keys(nodes: Sequence[Mapping[str, Any]], hostnames: Mapping[str, str]) -> dict[str, str]:
    """Node id -> the host name the machine uses: the hostname; where several nodes share one (several
    Ray nodes on one machine, containers with one name) ``hostname-IP``, else ``hostname-<node id>``."""
    def counts(keys: Mapping[str, str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for k in keys.values():
            out[k] = out.get(k, 0) + 1
        return out

    keys = {n["NodeID"]: hostnames[n["NodeID"]] for n in nodes}
    seen = counts(keys)
    for n in nodes:
        if seen[keys[n["NodeID"]]] > 1:
            keys[n["NodeID"]] = f"{hostnames[n['NodeID']]}-{n.get('NodeManagerAddress')}"
    seen = counts(keys)
    for n in nodes:
        if seen[keys[n["NodeID"]]] > 1:
            keys[n["NodeID"]] = f"{hostnames[n['NodeID']]}-{n['NodeID'][:8]}"
    return keys


def _is_head(node: Mapping[str, Any]) -> bool:
    return "node:__internal_head__" in (node.get("Resources") or {}) or bool(node.get("IsHeadNode"))


def merge(answers: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], source: str) -> Machine:
    """One Machine from each node's (Ray node record, probe answer), head first, GPUs renumbered.

    Pure: the tests feed it recorded answers. A node whose NVML saw no GPU is a CPU-only node when
    Ray offers no GPU there either, and a failed probe (``ProbeError``) when Ray says it has GPUs.
    """
    hostnames = {n["NodeID"]: str(a.get("hostname") or n.get("NodeManagerHostname") or n["NodeID"][:8])
                 for n, a in answers}
    keys = host_keys([n for n, _ in answers], hostnames)
    ordered = sorted(answers, key=lambda na: (not _is_head(na[0]), keys[na[0]["NodeID"]]))
    gpus: list[Gpu] = []
    links: dict[tuple[int, int], str] = {}
    nodes: dict[str, NodeFacts] = {}
    notes: list[str] = []
    drivers: list[str] = []
    for node, answer in ordered:
        host = keys[node["NodeID"]]
        ray_gpus = int(float((node.get("Resources") or {}).get("GPU", 0)))
        where = f"Ray node {host} ({node.get('NodeManagerAddress')})"
        raw = answer.get("machine")
        if raw is None:
            if ray_gpus:
                raise ProbeError(f"{where}: Ray offers {ray_gpus} GPU(s) there but the probe saw none: "
                                 f"{answer.get('gpu_error')}")
            notes.append(f"{host}: no GPU on this node ({answer.get('gpu_error')})")
            local: Machine | None = None
        else:
            local = machine_from_dict(raw, where=where, source="nvml")
            if ray_gpus != len(local.gpus):
                notes.append(f"{host}: Ray offers {ray_gpus} GPU(s) but NVML sees {len(local.gpus)}; the engine's "
                             f"Ray workers get only Ray's (ray start --num-gpus)")
        facts = dict(answer.get("node") or {})
        facts.update(node_id=node["NodeID"], ip=node.get("NodeManagerAddress"), head=_is_head(node),
                     ray_gpus=ray_gpus)
        nodes[host] = node_from_dict(host, facts, where)
        if local is None:
            continue
        if local.driver:
            drivers.append(local.driver)
        offset = len(gpus)
        for g in local.gpus:
            gpus.append(Gpu(index=offset + g.index, uuid=g.uuid, name=g.name, pci_bus_id=g.pci_bus_id,
                            memory_total_mib=g.memory_total_mib, memory_free_mib=g.memory_free_mib,
                            numa_node=g.numa_node, mig=g.mig, processes=g.processes, host=host))
        for (i, j), kind in local.links.items():
            links[(offset + i, offset + j)] = kind
        notes.extend(f"{host}: {n}" for n in local.notes)
    if not gpus:
        raise ProbeError(f"the Ray cluster ({source}) has no node with a GPU: "
                         + "; ".join(notes or ["no nodes"]))
    for a in range(len(gpus)):
        for b in range(a + 1, len(gpus)):
            if gpus[a].host != gpus[b].host:
                links[(a, b)] = "NET"
    head = next(iter(nodes))
    return Machine(gpus=tuple(gpus), links=links, host=head, driver=", ".join(dict.fromkeys(drivers)) or None,
                   source=source, notes=tuple(notes), nodes=nodes)


def engine_distributions(engines: Iterable[HostEngine]) -> dict[str, list[str]]:
    """What a node is asked to report of ``engines``, as plain data: name -> its distributions (engines
    that are no Python package, llama.cpp's binary, are left out)."""
    return {e.name: list(e.distributions) for e in engines if e.distributions}


def probe_cluster(address: str, model_dirs: Sequence[str] = (), *, engines: Iterable[HostEngine] = (),
                  timeout_s: float = DEFAULT_TIMEOUT_S, progress: Callable[[str, str], None] | None = None) -> Machine:
    """Probe every alive node of the running cluster at ``address`` (see the module docstring); each
    node reports the installed versions of ``engines`` (the registry's, passed in by the edge).

    ``progress(what, stage)`` hears, about once a second, what the probe waits for: the connection,
    then the nodes that have not answered yet (``launch/progress.py`` ``SlowTask``).
    """

    def say(what: str, stage: str) -> None:
        if progress is not None:
            progress(what, stage)

    ray = import_ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    connected_here = False
    if not ray.is_initialized():
        address = _resolve_address(ray, address)
        _reachable(address, timeout_s)
        _init(ray, address, timeout_s, say)
        connected_here = True
    source = f"ray:{address}"
    try:
        alive = [n for n in ray.nodes() if n.get("Alive")]
        if not alive:
            raise ProbeError(f"the Ray cluster at {address} has no alive node")
        task = ray.remote(num_cpus=0, num_gpus=0, max_retries=0)(probe_node)
        dists = engine_distributions(engines)
        refs = {n["NodeID"]: task.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False),
                    name=f"gpulayout-probe-{n['NodeID'][:8]}").remote(list(model_dirs), engines=dists)
                for n in alive}
        by_ref = {ref: nid for nid, ref in refs.items()}
        nodes = {n["NodeID"]: n for n in alive}
        # wait in slices of a second (the same deadline), so progress can name the nodes still probed
        ready: list[Any] = []
        pending = list(refs.values())
        deadline = time.monotonic() + timeout_s
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            done, pending = ray.wait(pending, num_returns=len(pending), timeout=min(left, 1.0))
            ready += done
            if pending:
                names = ", ".join(str(nodes[by_ref[ref]].get("NodeManagerHostname") or "?") for ref in pending)
                say(f"probing {len(pending)} of {len(refs)} nodes: {names}", f"{len(pending)} left")
        failures: list[str] = []
        answers: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
        for ref in pending:
            ray.cancel(ref, force=True)
            failures.append(f"{_node_label(nodes[by_ref[ref]])}: no answer within {timeout_s:g} s")
        for ref in ready:
            node = nodes[by_ref[ref]]
            try:
                answers.append((node, ray.get(ref)))
            except Exception as err:  # the task raised, or its worker died: name the node, keep the cause
                failures.append(f"{_node_label(node)}: the probe failed: {_cause(err)}")
        if failures:
            raise ProbeError(f"the Ray cluster at {address} could not be probed on every node (never a partial "
                             f"machine): " + "; ".join(sorted(failures)))
        return merge(answers, source)
    finally:
        if connected_here:
            ray.shutdown()


def _init(ray: Any, address: str, timeout_s: float, say: Callable[[str, str], None] | None = None) -> None:
    """``ray.init`` bounded in time: at an address that accepts TCP but is no (reachable) GCS, Ray retries
    for as long as it likes. The waiting thread is a daemon: a CLI run exits with the error at once."""
    import threading

    outcome: list[BaseException | None] = []

    def connect() -> None:
        try:
            ray.init(address=address, log_to_driver=False, logging_level="ERROR")
            outcome.append(None)
        except BaseException as err:  # handed to the caller's thread below
            outcome.append(err)

    t = threading.Thread(target=connect, name="gpulayout-ray-init", daemon=True)
    t.start()
    deadline = time.monotonic() + timeout_s
    while t.is_alive() and (left := deadline - time.monotonic()) > 0:
        t.join(min(left, 1.0))
        if t.is_alive() and say is not None:
            say(f"connecting to the Ray cluster at {address}", "connect")
    if not outcome:
        raise ProbeError(f"the Ray cluster at {address} did not let this process join within {timeout_s:g} s "
                         f"(the GCS is not reachable from here under the address it advertises?)")
    err = outcome[0]
    if err is not None:
        raise ProbeError(f"could not connect to the Ray cluster at {address}: {_cause(err)}") from None


def _node_label(node: Mapping[str, Any]) -> str:
    return f"node {node.get('NodeManagerHostname') or '?'} ({node.get('NodeManagerAddress')}, id {node['NodeID'][:8]})"


def _cause(err: BaseException) -> str:
    """The last line of a task's error: the exception the node raised, not Ray's wrapper."""
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(err).__name__
