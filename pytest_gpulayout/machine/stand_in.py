"""One node's snapshot standing for each node of a multi-node artifact.

A two-node LeaderWorkerSet (8 GPUs a pod, TP=8 x PP=2), a StatefulSet under ``--nnodes 2`` or a KubeRay cluster
of GPU workers runs one engine over several nodes; the machine a check is given is usually one node (a
snapshot, a preset, the host it runs on). Judged against it as it is, every such layout "needs 16 GPUs; the
machine shows 8". As the schedulers have it, each node of the artifact is one such machine: the pod's GPUs of
it (``CUDA_VISIBLE_DEVICES``'s entries where the artifact sets them), numbered after the nodes before it, on a
host of its own, so every check sees the world as the engine will (TP inside a node over its links, a stage
boundary or a TP group across nodes over the network). The machine says so (``Machine.stand_in``), and the
checks that read it say so in their findings (``placement``; ``cluster`` has no node facts to compare).

A machine that already spans hosts (a Ray cluster, a multi-host snapshot) is the cluster itself: it is used
as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pytest_gpulayout.machine.facts import Gpu, Machine

if TYPE_CHECKING:
    from pytest_gpulayout.deployment import Deployment


@dataclass(frozen=True)
class StandIn:
    """``source``'s GPUs stand for each of the artifact's nodes: ``gpus_per_node`` of them on each."""

    source: str
    gpus_per_node: tuple[int, ...]
    #: what makes the nodes, as the artifact says it (``LeaderWorkerSet/vllm (spec.leaderWorkerTemplate.size)``)
    why: str
    #: the GPUs each node needs for the layout's share of the world, and the GPUs the one machine has
    needed: tuple[int, ...] = ()
    available: int = 0

    @property
    def nodes(self) -> int:
        return len(self.gpus_per_node)

    @property
    def short(self) -> bool:
        """A node shows fewer GPUs than its share of the world."""
        return any(have < need for have, need in zip(self.gpus_per_node, self.needed, strict=False))

    def sentence(self) -> str:
        """How the finding says it."""
        each = (f"{self.gpus_per_node[0]} GPUs each" if len(set(self.gpus_per_node)) == 1
                else "GPUs " + " + ".join(map(str, self.gpus_per_node)))
        return (f"one node's machine ({self.source}) stands for each of the {self.nodes} nodes of {self.why} "
                f"({each})")


def _visible(machine: Machine, visible: Sequence[str] | None, count: int) -> list[Gpu]:
    """The node's GPUs the engine sees: ``CUDA_VISIBLE_DEVICES``'s entries where they name the machine's
    GPUs, else its first ``count`` (all of them where it has fewer)."""
    if visible:
        chosen: list[Gpu] = []
        for ref in visible:
            try:
                chosen.append(machine.gpu(int(ref) if ref.strip().isdigit() else ref.strip()))
            except KeyError:
                break
        else:
            return chosen[:count] if len(chosen) >= count else chosen
    return list(machine.gpus[:count])


def _why(dep: Deployment) -> str:
    origin = dep.origin
    assert origin is not None
    pod = origin.pod
    if pod is not None and pod.pods > 1:
        return f"{pod.obj} ({pod.group_field or 'its group'})"
    return f"{origin.source} (--nnodes {origin.nodes})"


def per_node(dep: Deployment, machine: Machine) -> Machine:
    """``machine`` as the deployment's nodes: itself for a deployment of one node (or a machine of several
    hosts already), else one copy of its GPUs per node of the artifact (``Origin.node_gpus``)."""
    origin = dep.origin
    if origin is None or len(machine.hosts) > 1 or not machine.gpus:
        return machine
    counts = origin.node_gpus(dep.tp, dep.pp, dep.dp)
    if counts is None:
        return machine
    base = machine.host or "node"
    gpus: list[Gpu] = []
    links: dict[tuple[int, int], str] = {}
    for k, count in enumerate(counts):
        node = _visible(machine, origin.visible, count)
        start = len(gpus)
        for i, g in enumerate(node):
            gpus.append(replace(g, index=start + i, host=f"{base}-{k}", uuid=f"{g.uuid}-node{k}" if g.uuid else ""))
        for a in range(len(node)):
            for b in range(a + 1, len(node)):
                kind = machine.link(node[a].index, node[b].index)
                if kind is not None:
                    links[(start + a, start + b)] = kind
    shown = tuple(min(c, len(_visible(machine, origin.visible, c))) for c in counts)
    stand_in = StandIn(machine.source, shown, _why(dep), counts, len(machine.gpus))
    return Machine(tuple(gpus), links, host=None, driver=machine.driver, source=machine.source,
                   notes=machine.notes, stand_in=stand_in)
