"""``cluster``: do the nodes a deployment spans agree, hold the model, and talk over InfiniBand?

A multi-node start that goes wrong costs 10-20 minutes and its causes are always the same, each read
from the engines or the libraries under them:

* another vLLM/SGLang, torch, Python or Ray on one node: Ray refuses a node of another Ray or Python
  at join (``ray/_private/utils.py`` ``check_version_info``), vLLM's workers unpickle the driver's
  objects and the torch.distributed rendezvous hangs when the two sides differ (fail);
* the model missing or different on one node: every worker reads the path the head passes
  (``vllm/v1/executor/ray_executor.py`` sends the same ``model`` to all workers), so one node without
  it dies at load, one with another config.json builds another model (fail);
* vLLM refuses nodes that share an IP ("Every node should have a unique IP address",
  ``vllm/v1/executor/ray_executor.py``), and waits forever for a placement group that asks a node for
  more GPUs than Ray offers there ("Waiting for creating a placement group", ``vllm/v1/executor/
  ray_utils.py``) (fail);
* NCCL falls back to TCP sockets when no InfiniBand port is ACTIVE or ``NCCL_IB_DISABLE=1``, which is
  too slow for tensor parallel across hosts; NCCL of another version on one node; a ``/dev/shm`` under
  1 GiB (Docker's default is 64 MiB: NCCL's shared-memory transport and vLLM's shared-memory broadcast
  queue live there) (warn).

One host: ``skip``. Facts come from ``Machine.nodes`` (``machine/nodes.py``), gathered on every node
by the Ray machine source or replayed from a snapshot's ``nodes:`` section; a rule never looks at the
machine it runs on. TP across hosts is a ``links`` warning (the engines start it); PP across hosts passes there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_gpulayout.check import Rule
from pytest_gpulayout.engine import Subject
from pytest_gpulayout.findings import Facts, Finding, RawFacts, Status, register_facts
from pytest_gpulayout.machine.nodes import NodeFacts, model_dir_key
from pytest_gpulayout.placement import PlacementError

CHECK = "cluster"
SHM_MIN_MIB = 1024
#: What must be the same on every node of a deployment (the engine's own package is added per deployment).
MUST_MATCH = ("torch", "python", "ray")

SHM_FIX = ("give the container a larger /dev/shm (docker run --shm-size=16g or --ipc=host; in Kubernetes an "
           "emptyDir with medium: Memory mounted at /dev/shm)")
IB_FIX = ("set NCCL_IB_HCA to its HCA (ibstat shows which port is Active) or bring the port up; without "
          "InfiniBand set NCCL_SOCKET_IFNAME to the fastest interface and keep tensor parallel inside a host "
          "(pipeline_parallel_size across hosts)")


@dataclass(frozen=True)
class Mismatch:
    """One fact that differs between the nodes of a deployment: ``values`` by host."""

    what: str
    values: Mapping[str, str | None]

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "values": dict(self.values)}


@register_facts("cluster")
@dataclass(frozen=True)
class ClusterFacts(Facts):
    """The numbers behind a ``cluster`` verdict (``Finding.data``)."""

    nodes: tuple[str, ...]
    mismatches: tuple[Mismatch, ...] = ()
    transport: str | None = None            # "ib" | "socket" | None (the deployment stays on one host)
    model_dir: str | None = None
    shm_mib: Mapping[str, int | None] = field(default_factory=dict)
    ib_active: Mapping[str, list[str]] = field(default_factory=dict)
    gpus_per_node: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"nodes": list(self.nodes), "mismatches": [m.to_json() for m in self.mismatches],
                "transport": self.transport, "model_dir": self.model_dir, "shm_mib": dict(self.shm_mib),
                "ib_active": {k: list(v) for k, v in self.ib_active.items()},
                "gpus_per_node": dict(self.gpus_per_node)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterFacts:
        return cls(nodes=tuple(data.get("nodes") or ()),
                   mismatches=tuple(Mismatch(m["what"], dict(m["values"])) for m in data.get("mismatches") or ()),
                   transport=data.get("transport"), model_dir=data.get("model_dir"),
                   shm_mib=dict(data.get("shm_mib") or {}),
                   ib_active={k: list(v) for k, v in (data.get("ib_active") or {}).items()},
                   gpus_per_node=dict(data.get("gpus_per_node") or {}))


def _reference(hosts: tuple[str, ...], nodes: Mapping[str, NodeFacts]) -> str:
    """The node whose facts the others are held to: the head (where vLLM starts), else the first."""
    return next((h for h in hosts if nodes[h].head), hosts[0])


def _short(v: str | None) -> str:
    return "not installed" if v is None else v


def _model_value(f: NodeFacts, key: str) -> str | None:
    m = f.models.get(key)
    if m is None:
        return None
    if not m.exists:
        return "missing"
    digest = (m.config_sha256 or "?")[:12]
    return digest + (f"+index {m.index_sha256[:12]}" if m.index_sha256 else "")


def check_cluster(s: Subject) -> Finding:
    dep, machine, model = s.dep, s.machine, s.model
    if machine.stand_in is not None:  # a multi-node artifact judged on copies of one node: nothing to compare
        return Finding(CHECK, Status.SKIP, f"{machine.stand_in.sentence()}: the nodes' software, model files and "
                       "network are not known; probe the cluster with machine: ray, or snapshot it with gpulayout "
                       "snapshot --ray.", RawFacts({"nodes": list(machine.hosts), "mismatches": [], "transport": None}))
    if len(machine.hosts) <= 1:
        return Finding(CHECK, Status.SKIP, "one host: nothing to compare across nodes.",
                       RawFacts({"nodes": list(machine.hosts), "mismatches": [], "transport": None}))
    try:
        placement = s.placement
    except PlacementError as err:
        return Finding(CHECK, Status.SKIP, f"cluster not checked: {err}",
                       RawFacts({"nodes": [], "mismatches": [], "transport": None}))
    per_node: dict[str, int] = {}
    for g in placement.gpus:
        node = machine.gpu(g).host or machine.host or "?"
        per_node[node] = per_node.get(node, 0) + 1
    hosts = tuple(per_node)
    crosses = len(hosts) > 1
    unknown = [h for h in hosts if h not in machine.nodes]
    if unknown:
        return Finding(CHECK, Status.WARN,
                       f"no node facts for {', '.join(unknown)} (this machine source has no nodes: "
                       f"section), so versions, model files and the network cannot be compared. Probe the "
                       f"cluster with machine: ray, or take the snapshot with gpulayout snapshot --ray.",
                       ClusterFacts(nodes=hosts, gpus_per_node=per_node))
    nodes = {h: machine.nodes[h] for h in hosts}
    ref = _reference(hosts, nodes)
    fails: list[str] = []
    warns: list[str] = []
    mismatches: list[Mismatch] = []

    for what in (dep.engine, *MUST_MATCH):
        values = {h: nodes[h].version(what) for h in hosts}
        if len(set(values.values())) > 1:
            mismatches.append(Mismatch(what, values))
            odd = [h for h in hosts if values[h] != values[ref]]
            fix = (f"install {what}=={values[ref]} there" if what != "python" and values[ref]
                   else f"use Python {values[ref]} there" if values[ref] else f"install {what} on {ref}")
            fails.append(f"{what} differs: {ref} has {_short(values[ref])}, "
                         + ", ".join(f"{h} has {_short(values[h])}" for h in odd)
                         + f" (the engine hangs or refuses at join): {fix}, or build every node from one image")
        elif what == dep.engine and values[ref] is None:
            fails.append(f"{what} is not installed on {', '.join(hosts)}: install it on every node")

    nccl = {h: nodes[h].nccl for h in hosts}
    if crosses and len(set(nccl.values())) > 1:
        mismatches.append(Mismatch("nccl", nccl))
        warns.append("NCCL differs: " + ", ".join(f"{h} has {nccl[h] or 'no nvidia-nccl wheel'}" for h in hosts)
                     + ": install the same nvidia-nccl-cu* wheel everywhere (it comes with torch)")

    key = model_dir_key(model.source) if model is not None else None
    if key is not None:
        values = {h: _model_value(nodes[h], key) for h in hosts}
        not_probed = [h for h in hosts if values[h] is None]
        if not_probed:
            warns.append(f"the model directory {key} was not looked up on {', '.join(not_probed)} (probe with "
                         f"the manifest: gpulayout check with machine: ray, or snapshot --ray --manifest)")
        known = {h: v for h, v in values.items() if v is not None}
        if len(set(known.values())) > 1 or "missing" in known.values():
            mismatches.append(Mismatch("model", values))
            missing = [h for h, v in known.items() if v == "missing"]
            if missing:
                fails.append(f"the model directory {key} (config.json) is missing on {', '.join(missing)}: copy it "
                             f"there (rsync -a {key}/ NODE:{key}/) or put it on storage every node mounts")
            present = {h: v for h, v in known.items() if v != "missing"}
            if len(set(present.values())) > 1:
                fails.append(f"the model in {key} differs between nodes (sha256 of config.json"
                             f"/safetensors index: " + ", ".join(f"{h} {v}" for h, v in present.items())
                             + "): copy the head's files to every node")

    ray = s.engine.rules.ray_cluster()   # an engine that spans nodes over Ray (vLLM): its IP and GPU rules
    if ray is not None and crosses:
        by_ip: dict[str, list[str]] = {}
        for h in hosts:
            ip = nodes[h].env.get(ray.host_ip_env) or nodes[h].ip
            if ip:
                by_ip.setdefault(ip, []).append(h)
        for ip, same in by_ip.items():
            if len(same) > 1:
                mismatches.append(Mismatch("ip", {h: ip for h in same}))
                fails.append(f"{', '.join(same)} share the IP {ip}: {s.engine.display} refuses "
                             f"('{ray.unique_ip_error}'); give each node its own address (ray start "
                             f"--node-ip-address, {ray.host_ip_env})")
        for h in hosts:
            offered = nodes[h].ray_gpus
            if offered is not None and per_node[h] > offered:
                fails.append(f"the layout puts {per_node[h]} GPUs on {h} but Ray offers {offered} there: "
                             f"{s.engine.display}'s placement group waits forever; start Ray there with "
                             f"--num-gpus={per_node[h]}")

    transport: str | None = None
    ib_active = {h: [f"{p.device}:{p.port}" for p in nodes[h].active_ib_ports] for h in hosts}
    if crosses:
        transport = "ib"
        for h in hosts:
            if nodes[h].env.get("NCCL_IB_DISABLE", "").strip() == "1":
                transport = "socket"
                warns.append(f"NCCL_IB_DISABLE=1 on {h}: NCCL will use sockets: unset it there")
            elif not ib_active[h]:
                transport = "socket"
                ports = ", ".join(f"{p.device}:{p.port} {p.state}" for p in nodes[h].infiniband)
                seen = f"its ports: {ports}" if ports else "it has no InfiniBand device"
                warns.append(f"no active InfiniBand port on {h} ({seen}): NCCL will use sockets: not efficient "
                             f"for cross-node tensor parallel; {IB_FIX}")
    shm = {h: nodes[h].shm_mib for h in hosts}
    for h in hosts:
        size = shm[h]
        if size is not None and size < SHM_MIN_MIB:
            warns.append(f"/dev/shm on {h} is {size} MiB (under {SHM_MIN_MIB} MiB: NCCL's shared-memory transport "
                         f"and vLLM's broadcast queue fail or crawl): {SHM_FIX}")

    facts = ClusterFacts(nodes=hosts, mismatches=tuple(mismatches), transport=transport, model_dir=key,
                         shm_mib=shm, ib_active=ib_active, gpus_per_node=per_node)
    lead = f"{len(hosts)} node{'s' if len(hosts) > 1 else ''} ({', '.join(hosts)})"
    if fails:
        return Finding(CHECK, Status.FAIL, f"{lead}: " + "; ".join(fails + warns) + ".", facts)
    if warns:
        return Finding(CHECK, Status.WARN, f"{lead}: " + "; ".join(warns) + ".", facts)
    r = nodes[ref]
    agree = ", ".join(f"{w} {_short(r.version(w))}" for w in (dep.engine, *MUST_MATCH))
    model_txt = f"; the model in {key} is the same on each" if key else ""
    net = f"; NCCL goes over InfiniBand ({', '.join(ib_active[ref])} on {ref})" if transport == "ib" else ""
    return Finding(CHECK, Status.PASS, f"{lead} agree on {agree}{model_txt}{net}.", facts)


def _number(f: Finding) -> str:
    facts = f.facts
    assert isinstance(facts, ClusterFacts)
    if facts.mismatches:
        return "differs: " + ",".join(m.what for m in facts.mismatches)
    if facts.transport:
        return facts.transport
    return f"{len(facts.nodes)} nodes" if len(facts.nodes) > 1 else ""


CLUSTER = Rule(CHECK, "Several hosts: the same engine, torch, Python and Ray on every node, the model present and "
               "identical on each, InfiniBand rather than sockets, /dev/shm large enough?", ClusterFacts, check_cluster,
               _number)
