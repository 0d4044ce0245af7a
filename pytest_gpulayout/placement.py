"""Ranks to GPUs, the way the engines assign them.

Both engines number the ranks of one replica ``pp_rank * tp + tp_rank`` and give rank ``r`` the
``r``-th visible device; DP replica ``d`` starts at device ``d * tp * pp`` (vLLM's DP engine cores,
SGLang's ``base_gpu_id += tp_size * pp_size`` per replica). The deployment's ``gpus`` list becomes
``CUDA_VISIBLE_DEVICES`` for the engine, so position ``k`` in that list is CUDA device ``k``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.machine.facts import Machine


class PlacementError(ValueError):
    """The layout cannot be placed on this machine (too few GPUs, unknown GPU)."""


@dataclass(frozen=True)
class Placement:
    """``replicas[d][s]`` is the TP group of pipeline stage ``s`` in DP replica ``d`` (GPU indices, TP rank order)."""

    replicas: tuple[tuple[tuple[int, ...], ...], ...]

    @property
    def gpus(self) -> tuple[int, ...]:
        return tuple(g for rep in self.replicas for stage in rep for g in stage)

    def replica_gpus(self, d: int) -> tuple[int, ...]:
        return tuple(g for stage in self.replicas[d] for g in stage)

    @property
    def tp_groups(self) -> tuple[tuple[int, ...], ...]:
        return tuple(stage for rep in self.replicas for stage in rep)

    def stage_boundaries(self) -> tuple[tuple[int, int], ...]:
        """GPU pairs that exchange activations between consecutive PP stages (same TP rank)."""
        pairs: list[tuple[int, int]] = []
        for rep in self.replicas:
            for s in range(len(rep) - 1):
                pairs.extend(zip(rep[s], rep[s + 1], strict=True))
        return tuple(pairs)


def format_group(group: tuple[int, ...] | list[int]) -> str:
    return "-".join(f"GPU{g}" for g in group)


def resolve_gpus(dep: Deployment, machine: Machine) -> tuple[int, ...]:
    """The machine GPU indices the deployment will run on, in CUDA order inside the engine."""
    need = dep.gpu_count
    if dep.gpus is None:
        if len(machine.gpus) < need:
            raise PlacementError(
                f"{dep.layout} needs {need} GPUs; the machine shows {len(machine.gpus)} "
                f"({machine.describe()})"
            )
        return machine.indices[:need]
    chosen: list[int] = []
    for ref in dep.gpus:
        try:
            chosen.append(machine.gpu(ref).index)
        except KeyError:
            known = ", ".join(str(i) for i in machine.indices) or "none"
            raise PlacementError(
                f"gpus lists {ref!r}, which is not a visible GPU on this machine (visible: {known})"
            ) from None
    if len(chosen) != need:
        raise PlacementError(f"gpus lists {len(chosen)} GPUs but {dep.layout} needs {need}")
    if len(set(chosen)) != len(chosen):
        raise PlacementError(f"gpus names the same GPU twice: {list(dep.gpus)}")
    return tuple(chosen)


def split_ranks(gpus: Sequence[int], tp: int, pp: int, dp: int) -> Placement:
    """The engines' arithmetic: rank ``r`` of stage ``s`` of replica ``d`` gets ``gpus[d*tp*pp + s*tp + r]``."""
    return Placement(tuple(
        tuple(tuple(gpus[d * tp * pp + s * tp + r] for r in range(tp)) for s in range(pp)) for d in range(dp)
    ))


def place(dep: Deployment, machine: Machine) -> Placement:
    """Assign every rank a GPU; raises ``PlacementError`` when the layout does not fit."""
    return split_ranks(resolve_gpus(dep, machine), dep.tp, dep.pp, dep.dp)
