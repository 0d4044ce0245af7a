"""``links``: is the link inside each TP group fast enough?

Tensor parallelism all-reduces activations after every layer, so every TP group wants NVLink or
NVSwitch. Over PCIe (PIX/PXB/PHB/NODE) it works but slowly: warn and suggest PP, which sends data
only at stage boundaries. Across the CPU socket interconnect (SYS) or hosts (NET) it fails.
``require.tp_links`` replaces that policy: a link passes when its kind is listed (``NV`` standing for
any NVLink count) or faster than the slowest kind listed. PP stage boundaries may cross any link.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engine import Subject
from pytest_gpulayout.findings import ABSENT, Absent, Facts, Finding, failed, passed, register_facts, skipped, warned
from pytest_gpulayout.machine.facts import Machine, describe_link, is_nvlink, link_family, link_rank, slowest
from pytest_gpulayout.placement import PlacementError, format_group

CHECK = "links"
_WARN_FAMILIES = ("PIX", "PXB", "PHB", "NODE")


def _policy_status(kind: str, allowed: tuple[str, ...] | None) -> str:
    """'pass' / 'warn' / 'fail' for one link kind under the default policy or ``require.tp_links``."""
    if allowed:
        if link_family(kind) == "NV" and "NV" in allowed:
            return "pass"
        if kind in allowed:
            return "pass"
        slowest_allowed = max(link_rank("NV1") if a == "NV" else link_rank(a) for a in allowed)
        return "pass" if link_rank(kind) <= slowest_allowed else "fail"
    fam = link_family(kind)
    if fam == "NV":
        return "pass"
    if fam in _WARN_FAMILIES:
        return "warn"
    return "fail"


@register_facts("links")
@dataclass(frozen=True)
class LinksFacts(Facts):
    """The slowest link inside a TP group (or across PP stages when TP=1); the groups and the links at
    the stage boundaries are absent when the layout could not be placed."""

    worst_link: str | None
    tp_groups: tuple[tuple[int, ...], ...] | Absent = ABSENT
    pp_boundary_links: tuple[str, ...] | Absent = ABSENT


def _pp_suggestion(dep: Deployment, machine: Machine, group: tuple[int, ...]) -> str:
    """Name the layout that keeps TP on fast links: TP inside NVLink islands, PP across them."""
    tp = len(group)
    for t in range(tp - 1, 1, -1):
        if tp % t:
            continue
        chunks = [group[i:i + t] for i in range(0, tp, t)]
        if all(all(k and is_nvlink(k) for _, _, k in machine.links_within(c)) for c in chunks):
            return (f"tensor_parallel_size: {t}, pipeline_parallel_size: {dep.pp * tp // t} "
                    f"(TP inside the NVLink groups, PP across them)")
    return f"tensor_parallel_size: 1, pipeline_parallel_size: {dep.pp * tp}"


def check_links(s: Subject) -> Finding:
    dep, machine = s.dep, s.machine
    try:
        placement = s.placement
    except PlacementError as err:
        return skipped(CHECK, f"{dep.name}: links not checked: {err}", LinksFacts(worst_link=None))
    allowed = dep.require.tp_links
    boundaries = sorted({machine.effective_link(a, b) or "unknown" for a, b in placement.stage_boundaries()})
    data = LinksFacts(worst_link=None, tp_groups=tuple(tuple(g) for g in placement.tp_groups),
                      pp_boundary_links=tuple(boundaries))
    if dep.tp == 1:
        if dep.pp > 1:
            known = [k for k in boundaries if k != "unknown"]
            data = replace(data, worst_link=slowest(known))
            return passed(
                CHECK,
                f"{dep.name}: no TP group spans two GPUs; PP stage boundaries cross "
                f"{', '.join(boundaries)} (fine: pipeline parallel sends activations only between stages).",
                data,
            )
        return skipped(CHECK, f"{dep.name}: each replica uses one GPU (TP=1, PP=1): no link carries "
                       f"model traffic.", data)

    unknown: list[str] = []
    worst_kind: str | None = None
    worst_group: tuple[int, ...] = ()
    worst_pair: tuple[int, int] = (0, 0)
    for group in placement.tp_groups:
        for a, b, _ in machine.links_within(group):
            kind = machine.effective_link(a, b)
            if kind is None:
                unknown.append(f"GPU{a}-GPU{b}")
                continue
            if worst_kind is None or link_rank(kind) > link_rank(worst_kind):
                worst_kind, worst_group, worst_pair = kind, group, (a, b)
    data = replace(data, worst_link=worst_kind)
    if worst_kind is None:
        return warned(CHECK, f"{dep.name}: the machine source ({machine.source}) does not say how "
                      f"{', '.join(unknown)} are linked; cannot judge the TP groups. Probe the host or use "
                      f"a snapshot with links.", data)
    verdict = _policy_status(worst_kind, allowed)
    group_txt = format_group(worst_group)
    pair_txt = f"GPU{worst_pair[0]}-GPU{worst_pair[1]}"
    where = f"TP group {group_txt}" if len(worst_group) == 2 else f"TP group {group_txt} ({pair_txt})"
    desc = describe_link(worst_kind)
    unknown_txt = f" Links not reported for {', '.join(unknown)}." if unknown else ""
    if verdict == "pass":
        policy = f" (accepted by require.tp_links: {list(allowed)})" if allowed else ""
        n_groups = len(placement.tp_groups)
        return (warned if unknown else passed)(
            CHECK,
            f"{dep.name}: {n_groups} TP group{'s' if n_groups > 1 else ''} of {dep.tp}; slowest link "
            f"inside is {worst_kind} ({desc}){policy}.{unknown_txt}",
            data,
        )
    suggestion = _pp_suggestion(dep, machine, worst_group)
    accept = f"require.tp_links: [{worst_kind}]" if link_family(worst_kind) != "NV" else "require.tp_links"
    if allowed:
        return failed(
            CHECK,
            f"{dep.name}: {where} is joined by {worst_kind} ({desc}), which require.tp_links {list(allowed)} "
            f"does not accept. Use {suggestion}, or put the TP group on GPUs linked by {', '.join(allowed)}."
            + unknown_txt,
            data,
        )
    text = (f"{dep.name}: {where} is joined by {worst_kind} ({desc}): tensor parallel sends an all-reduce "
            f"after every layer over it. Use {suggestion} instead (PP sends data only at stage boundaries)")
    if verdict == "fail":
        return failed(CHECK, text + f", keep the TP group on one socket, or set {accept} to accept it."
                      + unknown_txt, data)
    return warned(CHECK, text + f", or {accept} to accept it." + unknown_txt, data)
