"""The order of the candidate layouts and the one-line "why" each one gets.

The sort key (``rank_key``) and the sentences (``why``) are kept side by side because they must
agree: a line that says "ranked after the layouts with room for 2" has to match where the key put
the row. The rules, in order, are listed in ``planner``'s module docstring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pytest_gpulayout.findings import Status, facts_of, present
from pytest_gpulayout.machine.facts import Machine, describe_link, is_nvlink
from pytest_gpulayout.planner.gpus import LinkCosts
from pytest_gpulayout.planner.rows import LayoutRow
from pytest_gpulayout.planner.verdicts import default_fraction_name, requests_number
from pytest_gpulayout.rules.heads import HeadsFacts
from pytest_gpulayout.rules.kv_pool import TIGHT_MARGIN, KvPoolFacts, shortfalls
from pytest_gpulayout.rules.links import LinksFacts
from pytest_gpulayout.runner import engine_of


def crosses_hosts(row: LayoutRow, machine: Machine) -> bool:
    for rep in row.replicas:
        hosts = {machine.gpu(g).host for stage in rep for g in stage}
        if len(hosts - {None}) > 1:
            return True
    return False


def links_severity(row: LayoutRow) -> int:
    """0 when no TP group leaves NVLink (or TP=1), 1 when a TP group runs over PCIe or unknown links."""
    st = row.verdicts.get("links")
    return 1 if st is Status.WARN else 0


#: How a layout meets the need, best first (``LayoutRow.need_met``).
NEED_ORDER = {"with room": 0, None: 0, "narrowly": 1, "short": 2}


def need_met(row: LayoutRow, assumed: int | None, margin: float = TIGHT_MARGIN) -> str | None:
    """"with room", "narrowly" or "short" (None: the pool was not predicted).

    With a need the user gave, the replica's share is judged by the ``kv_pool`` check's own rule
    (``shortfalls``: under ``TIGHT_MARGIN`` to spare is a warning); with none, against the assumed
    full-length requests per replica with the same margin.
    """
    full, tokens = row.full_length_requests, row.predicted_kv_tokens_per_replica
    if not full or not tokens or row.deployment is None:
        return None
    held = min(full)
    if assumed is not None:
        if held < assumed:
            return "short"
        return "narrowly" if held < assumed * (1 + margin) else "with room"
    unmet, tight = shortfalls(row.deployment, min(tokens), held, row.max_model_len)
    if unmet:
        return "short"
    return "narrowly" if tight else "with room"


def replica_room(row: LayoutRow, assumed: int | None) -> float:
    """Full-length requests per replica, capped at the assumed need: equal for every layout that meets it.

    With a need the user gave (``assumed`` None) every candidate meets it (the others are refused);
    a pool nobody could predict (memory unknown) is ranked as if it met the need.
    """
    if assumed is None or row.full_length_requests is None:
        return assumed or 0
    return min(min(row.full_length_requests), assumed)


def tp_fills_domain(row: LayoutRow, links: LinkCosts) -> bool:
    """Each TP group is exactly the GPUs of its socket (the GPUs its members reach without SYS):
    "TP inside each socket, PP across", the layout two-socket PCIe servers are built for."""
    return row.tp > 1 and all(set(g) == set(links.domain[g[0]]) for rep in row.replicas for g in rep)


def rank_key(row: LayoutRow, machine: Machine, assumed: int | None = None,
             links: LinkCosts | None = None) -> tuple[object, ...]:
    """Sort key, best first; the rules in ``planner``'s module docstring, in order."""
    pcie_tp = links_severity(row)
    if pcie_tp and links is not None and tp_fills_domain(row, links):
        pcie_class = 1  # TP inside each socket, PP across: next to pure PP
    else:
        pcie_class = 2 * pcie_tp
    need = NEED_ORDER[row.need_met]
    return (
        crosses_hosts(row, machine),
        row.slow_link is not None,
        need,
        -min(row.full_length_requests or (0,)) if need == 2 else 0,
        -row.independent_replicas,
        -row.gpu_count,  # as many replicas either way: the spare GPUs give KV room rather than sit idle
        pcie_class,
        row.tp if pcie_tp else -row.tp,  # TP inside NVLink; over PCIe, as little TP as possible
        row.status.severity,
        row.engines,
        row.gpus,
    )


def _tokens_txt(row: LayoutRow) -> str:
    t = row.predicted_kv_tokens_per_replica
    if not t:
        return ""
    return f"{min(t):,}" if len(set(t)) == 1 else f"{min(t):,}-{max(t):,}"


def tp_link(row: LayoutRow) -> str | None:
    f = facts_of(row.findings.get("links"), LinksFacts)
    return f.worst_link if f and row.tp > 1 else None


def _num_experts(row: LayoutRow) -> int | str:
    heads = facts_of(row.findings.get("heads"), HeadsFacts)
    n = present(heads.num_experts) if heads else None
    return "" if n is None else n


def _boundary_links(row: LayoutRow) -> list[str]:
    f = facts_of(row.findings.get("links"), LinksFacts)
    return list(present(f.pp_boundary_links) or []) if f else []


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _over(row: LayoutRow, assumed: int | None) -> tuple[float, str] | None:
    """How far each replica clears its share of the need (0.03 = 3% over) and the share in words."""
    full, tokens, dep = row.full_length_requests, row.predicted_kv_tokens_per_replica, row.deployment
    if not full or not tokens or dep is None:
        return None
    each = "each replica's share of the" if row.independent_replicas > 1 else "the"
    if assumed is not None:
        return min(full) / assumed - 1, f"the {assumed} full-length requests per replica assumed"
    req = dep.require
    if req.kv_tokens:
        return min(tokens) / req.kv_tokens - 1, f"{each} {req.kv_tokens * max(row.dp, 1):,} tokens needed"
    if req.concurrency:
        return min(full) / req.concurrency - 1, f"{each} {req.concurrency * max(row.dp, 1)} requests needed"
    return None


def narrow_text(row: LayoutRow, assumed: int | None, margin: float) -> str:
    """``30,928 tokens per copy, 3% over each one's share of the 60,000 needed (under the 10% margin)``."""
    over = _over(row, assumed)
    held = f"{_tokens_txt(row)} tokens per replica"
    if over is None:
        return held
    return f"{held}, {over[0]:.0%} over {over[1]} (under the {margin:.0%} margin the kv_pool check asks)"


@dataclass(frozen=True)
class WhyContext:
    """What every "why" line is measured against (so that the lines agree with the order)."""

    min_world: int  # fewest GPUs per replica among the layouts that meet the need with room
    max_replicas: int  # replicas that many GPUs per replica make on the GPUs planned on
    smaller: str | None  # why fewer GPUs per replica do not do
    total_gpus: int
    assumed: int | None  # full-length requests per replica assumed (None: the user gave the need)
    margin: float = TIGHT_MARGIN
    #: the one-GPU copies on as many GPUs, by GPU count (for "splitting grows the total pool N x")
    copies: Mapping[int, LayoutRow] = field(default_factory=dict)


def _room(row: LayoutRow) -> bool:
    return NEED_ORDER[row.need_met] == 0


def why_context(
    candidates: Sequence[LayoutRow], refused: Sequence[LayoutRow], n: int, assumed: int | None,
    margin: float = TIGHT_MARGIN,
) -> WhyContext:
    """What the "why" lines of one plan are measured against: the fewest GPUs per replica that meet
    the need with room, and why fewer do not."""
    fit = [r for r in candidates if _room(r) and not r.slow_link] or list(candidates)
    min_world = min((r.group_size for r in fit), default=0)
    smaller: str | None = None
    if min_world > 1:
        short = [r for r in candidates if r.group_size < min_world and r.full_length_requests]
        if short:
            r = max(short, key=lambda r: (r.group_size, r.independent_replicas, min(r.full_length_requests or (0,))))
            held = min(r.full_length_requests or (0,))
            if r.need_met == "narrowly":
                who = "one GPU per replica" if r.group_size == 1 else f"{r.group_size} GPUs per replica"
                smaller = f"{who} meets the need only narrowly: {narrow_text(r, assumed, margin)}"
            else:
                smaller = (
                    f"{_plural(r.group_size, 'GPU')} per replica hold{'s' if r.group_size == 1 else ''} only "
                    f"{requests_number(held)} full-length requests"
                )
        else:
            single = next((r for r in refused if r.gpu_count == 1), None)
            if single is not None and single.fits_with_memory_fraction is not None and single.deployment:
                kv = facts_of(single.findings.get("kv_pool"), KvPoolFacts)
                default = present(kv.memory_fraction) if kv else None
                smaller = (
                    f"one GPU: refused at {default_fraction_name(single.deployment.engine)} {default:g}, "
                    f"serves with --memory-fraction {single.fits_with_memory_fraction:.2f}"
                )
            elif single is not None and single.refused:
                smaller = f"one GPU: {single.refusal_detail}"
    max_replicas = n // min_world if min_world else 0
    copies: dict[int, LayoutRow] = {}
    for r in [*candidates, *refused]:
        if r.tp == 1 and r.pp == 1 and r.dp > 1 and r.independent_replicas == r.dp and r.pool_predicted:
            copies.setdefault(r.gpu_count, r)
    return WhyContext(min_world, max_replicas, smaller, n, assumed, margin, copies)


def _split_gain(row: LayoutRow, ctx: WhyContext) -> str | None:
    """A split that ranks above copies on as many GPUs because the copies lack room: by how much the
    one pool outgrows the copies' pools together (the weights are stored once, not once per copy)."""
    copies = ctx.copies.get(row.gpu_count)
    if copies is None or row.group_size == 1 or copies.independent_replicas <= row.independent_replicas:
        return None
    if _room(copies) and copies.refused is None:
        return None
    mine = sum(row.predicted_kv_tokens_per_replica or ())
    theirs = sum(copies.predicted_kv_tokens_per_replica or ())
    if not mine or theirs <= 0:
        return None
    k = copies.dp
    stored = "double the weights" if k == 2 else f"store the weights {k} times"
    return (
        f"splitting grows the total pool {mine / theirs:.1f}x here ({mine:,} tokens against {theirs:,} in "
        f"{k} copies), while copies {stored}"
    )


def why(row: LayoutRow, ctx: WhyContext, fuller_above: bool = False) -> str:
    """One line: what the layout does and why it ranks where it does.

    ``fuller_above``: a layout with as many replicas on more GPUs ranks above this one.
    """
    parts: list[str] = []
    w = row.weights_gib_per_gpu
    tokens = _tokens_txt(row)
    full = row.full_length_requests
    known = bool(tokens)
    below = row.need_met == "short"
    narrow = row.need_met == "narrowly"
    room = ""
    if tokens:
        room = f"{tokens} tokens of KV per replica"
        if full and row.max_model_len:
            held = requests_number(min(full))
            room += f" ({held} full {row.max_model_len:,}-token requests"
            room += f", {requests_number(sum(full))} in all)" if row.dp > 1 else ")"
    if row.slow_link:
        kind = row.slow_link
        inside = "a host" if kind == "NET" else "a socket"
        what, keeps = ((f"TP={row.tp} all-reduces after every layer", "TP") if row.tp > 1
                       else (f"the {row.dp} DP ranks exchange every MoE layer's tokens", "that traffic"))
        parts.append(
            f"starts, slow: {what} over {kind} ({describe_link(kind)}); "
            f"the engine starts it, but it is ranked after every layout that keeps {keeps} inside {inside}"
        )
    if row.group_size == 1:
        what = "one GPU holds the model" if known and not below and not narrow else "one GPU per replica"
        what += f" ({w:.1f} GiB of weights)" if w is not None else ""
        parts.append(what + (f" with {room}" if room else ""))
        if row.engines:
            engine = engine_of(row.deployment.engine) if row.deployment is not None else None
            parts.append(
                f"{row.dp} independent engines, one per GPU behind a load balancer: no traffic between them"
                + (f" ({engine.display}'s own DP would make one expert-parallel group of them)"
                   if engine is not None and engine.planner.data_parallel else "")
            )
        else:
            parts.append(f"{row.dp} independent copies, no traffic between GPUs" if row.dp > 1 else "a single copy")
    else:
        if row.expert_parallel:
            ep = facts_of(row.findings.get("heads"), HeadsFacts)
            ep_size = present(ep.expert_parallel_size) if ep else None
            over = f" over {ep_size} ranks" if ep_size else ""
            parts.append(
                f"expert parallel: the {_num_experts(row)} experts spread whole{over} instead of each split "
                f"across them; every MoE layer sends its tokens to the experts' ranks (all-to-all)"
            )
        if row.shared_experts:
            parts.append(
                f"vLLM {'spreads' if row.expert_parallel else 'shards'} the {_num_experts(row)} experts over all "
                f"TP x DP = {row.tp * row.dp} ranks (DP attention): the {row.dp} DP ranks exchange "
                f"activations in every MoE layer, one group rather than independent copies"
            )
        if row.engines:
            parts.append(f"{row.dp} independent engines of {row.world_size} GPUs behind a load balancer")
        g, m = row.group_size, ctx.min_world
        if not known or below or narrow or not m:
            parts.append(f"{g} GPUs per replica")
        elif g == m:
            need = f"needs {g} GPUs" + (" per replica" if not row.shared_experts else "")
            if ctx.smaller:
                need += f" ({ctx.smaller})"
            parts.append(need)
        elif row.gpu_count < ctx.total_gpus:
            parts.append(f"{g} GPUs per replica where {m} would do: more KV room per replica")
        elif row.shared_experts or row.independent_replicas >= ctx.max_replicas:
            extra = row.gpu_count - m * row.independent_replicas
            parts.append(
                f"{g} GPUs per replica where {m} would do: {m}-GPU replicas make no more than "
                f"{_plural(ctx.max_replicas, 'replica')} on {ctx.total_gpus} GPUs, so the other "
                f"{_plural(extra, 'GPU')} add{'s' if extra == 1 else ''} KV room instead of sitting idle"
            )
        else:
            parts.append(
                f"spreads each replica over {g} GPUs where {m} would do: more KV room per replica, "
                f"{_plural(row.independent_replicas, 'replica')} where {m}-GPU ones make {ctx.max_replicas}"
            )
        gain = _split_gain(row, ctx) if known and not below and not narrow else None
        if gain:
            parts.append(gain)
        if row.tp > 1 and not row.slow_link:
            tp_kind = tp_link(row)
            if tp_kind and is_nvlink(tp_kind):
                parts.append(f"TP={row.tp} inside {tp_kind} (NVLink)")
            elif tp_kind:
                parts.append(
                    f"TP={row.tp} all-reduces after every layer over {tp_kind} "
                    f"({describe_link(tp_kind)}): works, slower than NVLink"
                )
            else:
                parts.append(f"TP={row.tp} over links the machine source does not report")
        if row.pp > 1:
            heads = facts_of(row.findings.get("heads"), HeadsFacts)
            split_layers = present(heads.pp_layer_split) if heads else None
            layers = list(split_layers) if split_layers else None
            bounds = ", ".join(_boundary_links(row)) or "unknown links"
            split = f" splits the layers {layers} and" if layers else ""
            parts.append(f"PP={row.pp}{split} sends activations over {bounds} only at stage boundaries")
        if room:
            parts.append(room)
        if row.independent_replicas > 1 and not row.engines:
            parts.append(f"{row.dp} replicas")
    if narrow:
        parts.append(
            f"meets the need only narrowly: {narrow_text(row, ctx.assumed, ctx.margin)}: "
            f"ranked after the layouts with room"
        )
    if below and full is not None and ctx.assumed is not None:
        parts.append(
            f"holds only {requests_number(min(full))} full-length requests per replica, fewer than the "
            f"{ctx.assumed} assumed: ranked after the layouts with room for {ctx.assumed}"
        )
    used = row.gpu_count
    if used < ctx.total_gpus:
        idle = f"uses {used} of {ctx.total_gpus} GPUs"
        if fuller_above:
            idle += f", {ctx.total_gpus - used} idle: ranked after layouts with as many replicas that use more GPUs"
        parts.append(idle)
    if not row.pool_predicted:
        parts.append("KV pool NOT predicted (GPU memory unknown): whether it fits is not known")
    said = {"balance", "kv_pool"} if not row.pool_predicted else set()
    if row.slow_link:
        said.add("links")  # "starts, slow" above is the links warning
    warns = [c for c, s in row.verdicts.items() if s is Status.WARN and c not in said]
    if warns:
        parts.append("warns: " + ", ".join(warns))
    return "; ".join(parts)


__all__ = [
    "NEED_ORDER",
    "WhyContext",
    "crosses_hosts",
    "links_severity",
    "need_met",
    "rank_key",
    "replica_room",
    "tp_fills_domain",
    "tp_link",
    "why",
    "why_context",
]
