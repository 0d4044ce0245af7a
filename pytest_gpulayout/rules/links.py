"""``links``: is the link inside each group of GPUs that talks on every layer fast enough?

Tensor parallelism all-reduces activations after every layer, so every TP group wants NVLink or
NVSwitch. A mixture of experts adds the MoE layers' traffic, over the ranks the engine spreads them
on (``Engine.expert_layout``): vLLM's DP of a MoE makes one group of all TP x DP ranks of a stage
(``fused_moe/config.py`` ``FusedMoEParallelConfig.make``; every MoE layer all-gathers the tokens and
reduce-scatters the results across them, ``distributed/device_communicators/all2all.py``
``AgRsAll2AllManager``, or all-to-all with an expert-parallel backend), so its DP ranks are judged
like a TP group; SGLang's expert parallel stays inside the TP group.

No link stops an engine: vLLM and SGLang start a TP group across PCIe, the CPU sockets and hosts
(Kimi-K2's and DeepSeek's own guides serve TP=16 on two nodes). So the default policy never fails:
over PCIe (PIX/PXB/PHB/NODE) it warns and suggests PP, which sends data only at stage boundaries;
across the CPU socket interconnect (SYS) it warns louder; across hosts (NET) it warns that NCCL runs
every layer's collective over InfiniBand verbs, louder still when a node has no active InfiniBand
port or ``NCCL_IB_DISABLE=1`` (TCP sockets). ``require.tp_links`` replaces that policy: a link passes
when its kind is listed (``NV`` standing for any NVLink count) or faster than the slowest kind
listed, and fails otherwise. PP stage boundaries may cross any link.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_gpulayout.check import Rule
from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engine import Subject
from pytest_gpulayout.findings import ABSENT, Absent, Facts, Finding, failed, passed, register_facts, skipped, warned
from pytest_gpulayout.machine.facts import Machine, describe_link, is_nvlink, link_family, link_rank, slowest
from pytest_gpulayout.placement import Placement, PlacementError, format_group

CHECK = "links"
_WARN_FAMILIES = ("PIX", "PXB", "PHB", "NODE")
#: the link kinds the engines start a TP group over but slowest of all: the planner ranks them
#: "starts, slow" (``planner/verdicts.slow_link``)
SLOW_FAMILIES = ("SYS", "NET")


def _policy_status(kind: str, allowed: tuple[str, ...] | None) -> str:
    """'pass' / 'warn' / 'fail' for one link kind under the default policy or ``require.tp_links``."""
    if allowed:
        if link_family(kind) == "NV" and "NV" in allowed:
            return "pass"
        if kind in allowed:
            return "pass"
        slowest_allowed = max(link_rank("NV1") if a == "NV" else link_rank(a) for a in allowed)
        return "pass" if link_rank(kind) <= slowest_allowed else "fail"
    return "pass" if link_family(kind) == "NV" else "warn"


@register_facts("links")
@dataclass(frozen=True)
class LinksFacts(Facts):
    """The slowest link inside a TP group (or across PP stages when TP=1); the groups and the links at
    the stage boundaries are absent when the layout could not be placed. ``moe_groups``: the groups a
    MoE layer's traffic spans where they are wider than the TP groups (vLLM's DP of a MoE);
    ``transport``: how NCCL crosses hosts inside a group ("ib", "socket", "unknown"; absent: no group
    crosses hosts)."""

    worst_link: str | None
    tp_groups: tuple[tuple[int, ...], ...] | Absent = ABSENT
    pp_boundary_links: tuple[str, ...] | Absent = ABSENT
    moe_groups: tuple[tuple[int, ...], ...] | Absent = ABSENT
    transport: str | Absent = ABSENT


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


def moe_groups(s: Subject, placement: Placement) -> tuple[tuple[int, ...], ...]:
    """The GPU groups a MoE layer's traffic spans where they are wider than one TP group (empty: none).

    The engine says over how many ranks it spreads a MoE layer (``expert_layout``: EP size x ranks per
    expert); past the TP size it spans the DP replicas, stage by stage (vLLM: TP x DP ranks)."""
    dep = s.dep
    if not s.model.is_moe or dep.dp < 2:
        return ()
    ep, shards = s.engine.memory.expert_layout(dep.tp, dep.dp, dep.enable_expert_parallel)
    if ep * shards <= dep.tp:
        return ()
    return tuple(tuple(g for rep in placement.replicas for g in rep[st]) for st in range(dep.pp))


def _transport(s: Subject, hosts: set[str]) -> tuple[str, str]:
    """How NCCL crosses between ``hosts``: ("ib" | "socket" | "unknown", the why in words)."""
    nodes = s.machine.nodes
    if s.dep.launch.env.get("NCCL_IB_DISABLE", "").strip() == "1":
        return "socket", "NCCL_IB_DISABLE=1 in launch.env"
    unknown = sorted(h for h in hosts if h not in nodes)
    if unknown:
        return "unknown", f"no node facts for {', '.join(unknown)}"
    for h in sorted(hosts):
        if nodes[h].env.get("NCCL_IB_DISABLE", "").strip() == "1":
            return "socket", f"NCCL_IB_DISABLE=1 on {h}"
        if not nodes[h].active_ib_ports:
            return "socket", f"no active InfiniBand port on {h}"
    return "ib", "an active InfiniBand port on " + ", ".join(sorted(hosts))


def _hosts_of(machine: Machine, group: tuple[int, ...]) -> set[str]:
    return {machine.gpu(g).host or machine.host or "" for g in group}


def _slow_text(kind: str, transport: tuple[str, str] | None, traffic: str) -> str:
    """What the default policy says of a group over SYS or NET (it warns: the engines start it)."""
    if link_family(kind) == "SYS":
        return (f"every {traffic} crosses the CPU socket interconnect, the slowest path inside a host: the "
                f"engines start it, but expect a fraction of the throughput TP inside one socket gives")
    how, why = transport or ("unknown", "")
    if how == "ib":
        return (f"every {traffic} goes over the network: NCCL runs it on InfiniBand verbs ({why}); the "
                f"engines start it (the vendors' guides serve TP=16 on two nodes), slower than NVLink")
    if how == "socket":
        return (f"every {traffic} goes over TCP sockets ({why}): NCCL without InfiniBand is an order of "
                f"magnitude slower than NVLink; the engines start it, but expect it to crawl")
    return (f"every {traffic} goes over the network ({why}: NCCL uses InfiniBand verbs where every node has "
            f"an active port, TCP sockets otherwise); the engines start it, slower than NVLink")


def check_links(s: Subject) -> Finding:
    dep, machine = s.dep, s.machine
    try:
        placement = s.placement
    except PlacementError as err:
        return skipped(CHECK, f"links not checked: {err}", LinksFacts(worst_link=None))
    allowed = dep.require.tp_links
    boundaries = sorted({machine.effective_link(a, b) or "unknown" for a, b in placement.stage_boundaries()})
    moe = moe_groups(s, placement)
    data = LinksFacts(worst_link=None, tp_groups=tuple(tuple(g) for g in placement.tp_groups),
                      pp_boundary_links=tuple(boundaries), moe_groups=moe or ABSENT)
    ep = dep.enable_expert_parallel
    moe_traffic = (f"MoE layer's all-to-all (expert parallel over {len(moe[0])} ranks)" if ep and moe else
                   f"MoE layer's all-gather / reduce-scatter (each expert split over {len(moe[0])} ranks)"
                   if moe else "")
    # the groups judged: each TP group (an all-reduce per layer), then each MoE group wider than it
    groups: list[tuple[tuple[int, ...], str]] = []
    if dep.tp > 1:
        groups.extend((tuple(g), "TP") for g in placement.tp_groups)
    groups.extend((g, "MoE") for g in moe)
    if not groups:
        if dep.pp > 1:
            known = [k for k in boundaries if k != "unknown"]
            data = replace(data, worst_link=slowest(known))
            return passed(
                CHECK,
                f"no TP group spans two GPUs; PP stage boundaries cross "
                f"{', '.join(boundaries)} (fine: pipeline parallel sends activations only between stages).",
                data,
            )
        return skipped(CHECK, "each replica uses one GPU (TP=1, PP=1): no link carries "
                       "model traffic.", data)

    unknown: list[str] = []
    worst_kind: str | None = None
    worst_group: tuple[int, ...] = ()
    worst_role = "TP"
    worst_pair: tuple[int, int] = (0, 0)
    hosts_crossed: set[str] = set()
    for group, role in groups:
        hosts = _hosts_of(machine, group)
        if len(hosts) > 1:
            hosts_crossed |= hosts
        for a, b, _ in machine.links_within(group):
            kind = machine.effective_link(a, b)
            if kind is None:
                unknown.append(f"GPU{a}-GPU{b}")
                continue
            if worst_kind is None or link_rank(kind) > link_rank(worst_kind):
                worst_kind, worst_group, worst_role, worst_pair = kind, group, role, (a, b)
    transport = _transport(s, hosts_crossed) if hosts_crossed else None
    data = replace(data, worst_link=worst_kind, transport=transport[0] if transport else ABSENT)
    if worst_kind is None:
        unknown_txt = ", ".join(dict.fromkeys(unknown))
        return warned(CHECK, f"the machine source ({machine.source}) does not say how "
                      f"{unknown_txt} are linked; cannot judge the TP groups. Probe the host or use "
                      f"a snapshot with links.", data)
    verdict = _policy_status(worst_kind, allowed)
    group_txt = format_group(worst_group)
    pair_txt = f"GPU{worst_pair[0]}-GPU{worst_pair[1]}"
    noun = "TP group" if worst_role == "TP" else f"MoE group (DP={dep.dp} x TP={dep.tp})"
    where = f"{noun} {group_txt}" if len(worst_group) == 2 else f"{noun} {group_txt} ({pair_txt})"
    desc = describe_link(worst_kind)
    unknown_txt = f" Links not reported for {', '.join(dict.fromkeys(unknown))}." if unknown else ""
    moe_txt = (f" {s.engine.display} sends every {moe_traffic} between the {len(moe[0])} GPUs of each "
               f"DP group ({', '.join(format_group(g) for g in moe)})." if moe and worst_role == "TP" else "")
    if verdict == "pass":
        policy = f" (accepted by require.tp_links: {list(allowed)})" if allowed else ""
        n_groups = len(placement.tp_groups)
        inside = (f"{n_groups} TP group{'s' if n_groups > 1 else ''} of {dep.tp}" if dep.tp > 1
                  else f"{len(moe)} MoE group{'s' if len(moe) > 1 else ''} of {len(moe[0])}")
        return (warned if unknown else passed)(
            CHECK,
            f"{inside}; slowest link inside is {worst_kind} ({desc}){policy}.{moe_txt}{unknown_txt}",
            data,
        )
    if worst_role == "TP":
        suggestion = _pp_suggestion(dep, machine, worst_group)
        traffic = "layer's all-reduce"
        does = f"tensor parallel sends an all-reduce after every layer over it. Use {suggestion} instead " \
               f"(PP sends data only at stage boundaries)"
        instead = f"Use {suggestion} instead (PP sends data only at stage boundaries)"
    else:
        traffic = moe_traffic
        does = (f"{s.engine.display} sends every {moe_traffic} over it. Keep each DP group on fast links, "
                f"or serve independent engines (one per replica behind a load balancer) instead")
        instead = "Keep each DP group on fast links, or serve independent engines"
    accept = f"require.tp_links: [{worst_kind}]" if link_family(worst_kind) != "NV" else "require.tp_links"
    if allowed:
        return failed(
            CHECK,
            f"{where} is joined by {worst_kind} ({desc}), which require.tp_links {list(allowed)} "
            f"does not accept. {instead}, or put the group on GPUs linked by {', '.join(allowed)}."
            + moe_txt + unknown_txt,
            data,
        )
    if link_family(worst_kind) in SLOW_FAMILIES:
        keep = "one host" if link_family(worst_kind) == "NET" else "one socket"
        return warned(CHECK, f"{where} is joined by {worst_kind} ({desc}): "
                      f"{_slow_text(worst_kind, transport, traffic)}. {instead}, or keep the group inside {keep}; "
                      f"{accept} accepts it, a require.tp_links without {worst_kind} makes it a failure."
                      + moe_txt + unknown_txt, data)
    return warned(CHECK, f"{where} is joined by {worst_kind} ({desc}): {does}, or {accept} to "
                  f"accept it." + moe_txt + unknown_txt, data)


def _number(f: Finding) -> str:
    facts = f.facts
    assert isinstance(facts, LinksFacts)
    return str(facts.worst_link or "")


LINKS = Rule(CHECK, "Is each TP group joined by NVLink/NVSwitch, or is this a PCIe / cross-socket / cross-host TP that "
             "should be PP?", LinksFacts, check_links, _number)
