"""The order of the candidate layouts and the one-line "why" each one gets.

The sort key (``rank_key``) and the sentences (``why``) are kept side by side because they must
agree: a line that says "ranked after the layouts with room for 2" has to match where the key put
the row. The rules, in order, are listed in ``planner``'s module docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_gpulayout.findings import Status, facts_of, present
from pytest_gpulayout.machine.facts import Machine, describe_link, is_nvlink
from pytest_gpulayout.planner.rows import LayoutRow
from pytest_gpulayout.planner.verdicts import default_fraction_name
from pytest_gpulayout.rules.heads import HeadsFacts
from pytest_gpulayout.rules.kv_pool import KvPoolFacts
from pytest_gpulayout.rules.links import LinksFacts


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


def replica_room(row: LayoutRow, assumed: int | None) -> int:
    """Full-length requests per replica, capped at the assumed need: equal for every layout that meets it.

    With a need the user gave (``assumed`` None) every candidate meets it (the others are refused);
    a pool nobody could predict (memory unknown) is ranked as if it met the need.
    """
    if assumed is None or row.full_length_requests is None:
        return assumed or 0
    return min(min(row.full_length_requests), assumed)


def rank_key(row: LayoutRow, machine: Machine, assumed: int | None = None) -> tuple[object, ...]:
    """Sort key, best first; the rules in ``planner``'s module docstring, in order."""
    pcie_tp = links_severity(row)
    return (
        crosses_hosts(row, machine),
        -replica_room(row, assumed),
        -row.independent_replicas,
        -row.gpu_count,  # as many replicas either way: the spare GPUs give KV room rather than sit idle
        pcie_tp,
        row.tp if pcie_tp else -row.tp,  # TP inside NVLink; over PCIe, as little TP as possible
        row.status.severity,
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


@dataclass(frozen=True)
class WhyContext:
    """What every "why" line is measured against (so that the lines agree with the order)."""

    min_world: int  # fewest GPUs per replica among the layouts that meet the need
    max_replicas: int  # replicas that many GPUs per replica make on the GPUs planned on
    smaller: str | None  # why fewer GPUs per replica do not do
    total_gpus: int
    assumed: int | None  # full-length requests per replica assumed (None: the user gave the need)


def why_context(
    candidates: Sequence[LayoutRow], refused: Sequence[LayoutRow], n: int, assumed: int | None
) -> WhyContext:
    """What the "why" lines of one plan are measured against: the fewest GPUs per replica that meet
    the need, and why fewer do not."""
    fit = [r for r in candidates if replica_room(r, assumed) == (assumed or 0)] or list(candidates)
    min_world = min((r.group_size for r in fit), default=0)
    smaller: str | None = None
    if min_world > 1:
        short = [r for r in candidates if r.group_size < min_world and r.full_length_requests]
        if short:
            r = max(short, key=lambda r: (r.group_size, min(r.full_length_requests or (0,))))
            held = min(r.full_length_requests or (0,))
            smaller = (
                f"{_plural(r.group_size, 'GPU')} per replica hold{'s' if r.group_size == 1 else ''} only "
                f"{_plural(held, 'full-length request')}"
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
    return WhyContext(min_world, max_replicas, smaller, n, assumed)


def why(row: LayoutRow, ctx: WhyContext, fuller_above: bool = False) -> str:
    """One line: what the layout does and why it ranks where it does.

    ``fuller_above``: a layout with as many replicas on more GPUs ranks above this one.
    """
    parts: list[str] = []
    w = row.weights_gib_per_gpu
    tokens = _tokens_txt(row)
    full = row.full_length_requests
    known = bool(tokens)
    below = ctx.assumed is not None and full is not None and min(full) < ctx.assumed
    room = ""
    if tokens:
        room = f"{tokens} tokens of KV per replica"
        if full and row.max_model_len:
            room += f" ({_plural(min(full), f'full {row.max_model_len:,}-token request')}"
            room += f", {sum(full)} in all)" if row.dp > 1 else ")"
    if row.group_size == 1:
        what = "one GPU holds the model" if known and not below else "one GPU per replica"
        what += f" ({w:.1f} GiB of weights)" if w is not None else ""
        parts.append(what + (f" with {room}" if room else ""))
        parts.append(f"{row.dp} independent copies, no traffic between GPUs" if row.dp > 1 else "a single copy")
    else:
        if row.shared_experts:
            parts.append(
                f"vLLM shards the {_num_experts(row)} experts over all "
                f"TP x DP = {row.tp * row.dp} ranks (DP attention): the {row.dp} DP ranks exchange "
                f"activations in every MoE layer, one group rather than independent copies"
            )
        g, m = row.group_size, ctx.min_world
        if not known or below or not m:
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
        if row.tp > 1:
            kind = tp_link(row)
            if kind and is_nvlink(kind):
                parts.append(f"TP={row.tp} inside {kind} (NVLink)")
            elif kind:
                parts.append(
                    f"TP={row.tp} all-reduces after every layer over {kind} "
                    f"({describe_link(kind)}): works, slower than NVLink"
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
        if row.independent_replicas > 1:
            parts.append(f"{row.dp} replicas")
    if below and full is not None:
        parts.append(
            f"holds only {_plural(min(full), 'full-length request')} per replica, fewer than the "
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
    unknown_memory = {"balance", "kv_pool"} if not row.pool_predicted else set()
    warns = [c for c, s in row.verdicts.items() if s is Status.WARN and c not in unknown_memory]
    if warns:
        parts.append("warns: " + ", ".join(warns))
    return "; ".join(parts)


__all__ = ["WhyContext", "crosses_hosts", "links_severity", "rank_key", "replica_room", "tp_link", "why", "why_context"]
