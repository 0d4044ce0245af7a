"""``placement``: are the GPUs the layout needs there, whole, not MIG slices, and alike inside a TP group?

Engines split a model assuming every rank owns its GPU: another tenant's memory shrinks one rank's
budget and, through the min over ranks, everyone's pool; MIG slices have no P2P between them (and
vLLM cannot parse ``MIG-`` entries in ``CUDA_VISIBLE_DEVICES``); mixed GPU models make the smallest
card set the size for every rank.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_gpulayout.check import Rule
from pytest_gpulayout.engine import Subject
from pytest_gpulayout.findings import ABSENT, Absent, Facts, Finding, failed, passed, present, register_facts, warned
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.placement import PlacementError, format_group

CHECK = "placement"


@register_facts("placement")
@dataclass(frozen=True)
class PlacementFacts(Facts):
    """Where the ranks land. ``gpus`` and ``replicas`` are absent when the layout could not be placed;
    ``mig_gpus`` and ``foreign_processes`` only when there are any."""

    gpus_needed: int
    gpus_visible: int
    gpus: tuple[int, ...] | Absent = ABSENT
    replicas: tuple[tuple[tuple[int, ...], ...], ...] | Absent = ABSENT
    mig_gpus: tuple[int, ...] | Absent = ABSENT
    foreign_processes: tuple[str, ...] | Absent = ABSENT


def _tenants(machine: Machine, gpus: tuple[int, ...]) -> list[str]:
    out = []
    for i in gpus:
        g = machine.gpu(i)
        if not g.processes:
            continue
        procs = ", ".join(
            f"{p.name or 'pid'} {p.pid}" + (f" ({p.used_mib / 1024:.2f} GiB)" if p.used_mib is not None else "")
            for p in g.processes[:4]
        )
        more = f" and {len(g.processes) - 4} more" if len(g.processes) > 4 else ""
        out.append(f"GPU{i}: {procs}{more}")
    return out


def _short_list(s: Subject) -> str | None:
    """An artifact's ``CUDA_VISIBLE_DEVICES`` that shows the engine fewer GPUs than its world, in its words."""
    origin, dep = s.dep.origin, s.dep
    visible = origin.visible if origin is not None else None
    if origin is None or not visible or len(visible) >= dep.gpu_count or s.machine.stand_in is not None:
        return None
    return (f"CUDA_VISIBLE_DEVICES={','.join(visible)} ({origin.source}) shows the engine {len(visible)} "
            f"GPU{'s' if len(visible) != 1 else ''}, but TP x PP x DP = {dep.gpu_count} ({dep.tp} x {dep.pp} x "
            f"{dep.dp}): list {dep.gpu_count} devices there, or lower the layout to fit {len(visible)}")


def _node_groups(s: Subject, gpus: tuple[int, ...]) -> str:
    """``GPU0-GPU7 on host-0, GPU8-GPU15 on host-1``: the ranks' GPUs by node."""
    by: dict[str, list[int]] = {}
    for i in gpus:
        by.setdefault(s.machine.gpu(i).host or "?", []).append(i)
    return ", ".join(f"GPU{g[0]}-GPU{g[-1]} on {h}" if len(g) > 1 else f"GPU{g[0]} on {h}" for h, g in by.items())


def check_placement(s: Subject) -> Finding:
    dep, machine = s.dep, s.machine
    data = PlacementFacts(gpus_needed=dep.gpu_count, gpus_visible=len(machine.gpus))
    short = _short_list(s)
    if short is not None:
        return failed(CHECK, f"{short}.", data)
    stand_in = machine.stand_in
    if stand_in is not None and stand_in.short:
        need = max(stand_in.needed)
        return failed(CHECK, f"{dep.layout} puts {need} GPUs on each of the {stand_in.nodes} nodes of {stand_in.why}, "
                             f"but the machine that stands for each node ({stand_in.source}) shows "
                             f"{min(stand_in.gpus_per_node)}: give the machine of one node as it is (a snapshot of "
                             f"it, --machine), or lower the layout.", data)
    try:
        placement = s.placement
    except PlacementError as err:
        return failed(CHECK, f"{err}. Change gpus, or reduce tensor/pipeline/data_parallel_size.",
                      data)
    data = replace(data, gpus=tuple(placement.gpus),
                   replicas=tuple(tuple(tuple(stage) for stage in rep) for rep in placement.replicas))
    problems: list[str] = []
    warnings: list[str] = []

    migs = [i for i in placement.gpus if machine.gpu(i).mig]
    if migs:
        data = replace(data, mig_gpus=tuple(migs))
        where = ", ".join(f"GPU{i}" for i in migs)
        if dep.world_size > 1:
            problems.append(f"{where} {'is a MIG slice' if len(migs) == 1 else 'are MIG slices'}: MIG instances "
                            f"have no P2P/NVLink between them, so TP/PP across them cannot work; use whole GPUs")
        else:
            warnings.append(f"{where} {'is a MIG slice' if len(migs) == 1 else 'are MIG slices'}: "
                            f"{s.engine.rules.mig_note()}the slice's memory is all the replica gets")

    tenants = _tenants(machine, placement.gpus)
    if tenants:
        data = replace(data, foreign_processes=tuple(tenants))
        warnings.append("other tenants on the GPUs this layout uses (" + "; ".join(tenants) + "): the split "
                        "wants whole GPUs; their memory shrinks the pool of every rank in the group")

    for group in placement.tp_groups:
        names = {machine.gpu(i).name for i in group}
        if len(names) > 1:
            small = min(group, key=lambda i: machine.gpu(i).memory_total_mib or 0)
            warnings.append(
                f"TP group {format_group(group)} mixes {', '.join(sorted(n or '?' for n in names))}: every rank "
                f"gets the size of the smallest card (GPU{small}); prefer PP with an uneven layer split "
                f"(VLLM_PP_LAYER_PARTITION / SGLANG_PP_LAYER_PARTITION) so each card holds what fits"
            )
    gpus_txt = ", ".join(f"GPU{i}" for i in placement.gpus)
    if not machine.tenants_known:
        warnings.append(f"other tenants and MIG mode of {gpus_txt} are unknown (machine from {machine.source}: "
                        f"topo text lists links only); probe the host (machine: auto) to check them")
    if problems:
        return failed(CHECK, "; ".join(problems + warnings) + ".", data)
    if warnings:
        return warned(CHECK, "; ".join(warnings) + ".", data)
    if stand_in is not None:
        return passed(CHECK, f"{dep.layout} on {stand_in.nodes} nodes, {_node_groups(s, placement.gpus)}: "
                             f"{stand_in.sentence()}; whole GPUs, no other tenants.", data)
    return passed(CHECK, f"{dep.layout} on {gpus_txt} ({len(placement.gpus)} of "
                  f"{len(machine.gpus)} visible), whole GPUs, no other tenants.", data)


def _number(f: Finding) -> str:
    facts = f.facts
    assert isinstance(facts, PlacementFacts)
    gpus = present(facts.gpus)
    return "GPU " + ",".join(map(str, gpus)) if gpus else f"{facts.gpus_needed} needed"


PLACEMENT = Rule(CHECK, "Are the GPUs the layout needs visible, whole (no other tenants), not MIG slices, alike inside "
                 "a TP group, and enough (TP x PP x DP)?", PlacementFacts, check_placement, _number)
