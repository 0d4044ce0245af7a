"""One layout's verdicts as a plan row: what the checks said, and the one reason it is refused.

The planner runs the same checks as ``gpulayout check`` (``evaluate.evaluate``); this module turns
their findings into a ``LayoutRow`` and words the refusal so that it reads the same for every DP
size (the users' whole demand, not each replica's share) and groups well in a table. It knows the
checks' data keys; the ranking and the plan only read the row.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.findings import Finding, Status, facts_of, present, worst
from pytest_gpulayout.machine.facts import describe_link, link_family
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.planner.request import Demand
from pytest_gpulayout.planner.rows import LayoutRow
from pytest_gpulayout.rules.balance import BalanceFacts
from pytest_gpulayout.rules.heads import tp_problems
from pytest_gpulayout.rules.kv_pool import KvPoolFacts
from pytest_gpulayout.rules.links import SLOW_FAMILIES, LinksFacts
from pytest_gpulayout.runner import engine_of
from pytest_gpulayout.suite import STATIC_NAMES

#: Order the checks are shown in (the suite's static checks).
CHECK_ORDER = STATIC_NAMES


def default_fraction_name(engine: str) -> str:
    """The engine's own name for the memory fraction the planner may suggest raising."""
    return engine_of(engine).planner.plan_fraction_name()


def _first_clause(text: str) -> str:
    """``32 attention heads do not divide by TP=3 (vLLM: ...)`` -> the part before the quote."""
    return text.split(" (", 1)[0].strip()


def _shorten(text: str, limit: int = 150) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + " ..."


def slow_link(row_findings: Mapping[str, Finding], dep: Deployment) -> str | None:
    """The link a TP (or MoE) group crosses when ``links`` warns for the socket interconnect (SYS) or the
    network between hosts (NET).

    Neither engine refuses a TP group over SYS or across hosts: vLLM and SGLang start and serve, slowly
    (every layer's all-reduce crosses it), so ``links`` warns and the plan lists such a layout as
    "starts, slow", after every layout that keeps TP on faster links. Under ``require.tp_links`` the
    team's policy decides: a link it refuses fails the row, one it accepts is not "slow".
    """
    links = facts_of(row_findings.get("links"), LinksFacts)
    f = row_findings.get("links")
    if links is None or f is None or f.status is not Status.WARN or dep.require.tp_links:
        return None
    kind = links.worst_link
    return kind if kind and link_family(kind) in SLOW_FAMILIES else None


def refusal(
    row_findings: Mapping[str, Finding],
    dep: Deployment,
    model: ModelSpec,
    demand: Demand,
    replicas: int | None = None,
) -> tuple[str, str] | None:
    """Why the layout cannot serve, as ``(check, "check: reason")`` (None when it can), in words that
    group well across DP sizes.

    ``demand`` is the users' need for the whole deployment, before the split over DP replicas, so
    that the reason reads the same for every DP size. ``replicas``: how many share it (default the
    deployment's DP; independent engines are each a DP=1 deployment).
    """
    fails = [row_findings[c] for c in CHECK_ORDER if c in row_findings and row_findings[c].status is Status.FAIL]
    if not fails:
        # SGLang starts with a pool smaller than one request (warn); a plan cannot recommend it
        kv = facts_of(row_findings.get("kv_pool"), KvPoolFacts)
        tokens = kv.predicted_kv_tokens if kv else None
        max_len = present(kv.max_model_len) if kv else None
        if kv is not None and tokens is not None and max_len:
            if tokens < max_len and (present(kv.max_concurrency) or 0) < 1:
                return "kv_pool", (f"kv_pool: {tokens:,} tokens of KV per replica, less than one "
                                   f"{max_len:,}-token request")
        return None
    f = fails[0]
    text = _refusal_text(f, dep, model, demand, dep.dp if replicas is None else replicas)
    return f.check, text


def _refusal_text(f: Finding, dep: Deployment, model: ModelSpec, demand: Demand, replicas: int) -> str:
    if f.check == "heads":
        problems = tp_problems(model, dep.tp)
        if problems:
            return "heads: " + "; ".join(_first_clause(p) for p in problems[:2])
    links = facts_of(f, LinksFacts)
    if links is not None:
        kind = links.worst_link
        if kind:
            return (f"links: a TP group crosses {kind} ({describe_link(kind)}), which require.tp_links does not "
                    f"accept; keep TP on faster links, PP across")
    kv = facts_of(f, KvPoolFacts)
    if kv is not None:
        tokens, max_len = kv.predicted_kv_tokens, present(kv.max_model_len)
        conc = present(kv.max_concurrency)
        smallest = kv.smallest
        if smallest is not None and smallest.max_concurrency is not None:
            conc = smallest.max_concurrency  # the value that decided, not the rounded one
        w = kv.weights_gib_per_rank
        share = "each replica's share of the" if replicas > 1 else "the"
        users, total_tokens = demand.concurrency, demand.kv_tokens
        if isinstance(tokens, int) and tokens <= 0:
            return f"kv_pool: {w} GiB of weights per GPU leave no room for a KV cache"
        if isinstance(tokens, int) and max_len and tokens < max_len and (conc is None or conc < 1):
            return f"kv_pool: {tokens:,} tokens of KV per replica, less than one {max_len:,}-token request"
        if isinstance(tokens, int) and dep.require.concurrency and users and conc is not None and max_len:
            need = dep.require.concurrency
            if conc < need or tokens < need * max_len:
                held = requests_number(conc) if conc < need else f"just under {need}"
                return (
                    f"kv_pool: {held} full {max_len:,}-token requests per replica ({tokens:,} tokens), "
                    f"short of {share} {users} needed"
                )
        if isinstance(tokens, int) and dep.require.kv_tokens and total_tokens and tokens < dep.require.kv_tokens:
            return f"kv_pool: {tokens:,} tokens of KV per replica, short of {share} {total_tokens:,} needed"
    balance = facts_of(f, BalanceFacts)
    if balance is not None:
        headroom, margin = balance.headroom_gib, present(balance.vllm_min_margin_gib)
        decides = engine_of(dep.engine).planner.plan_balance_margin()
        if decides == "headroom_gib" and isinstance(headroom, (int, float)) and headroom < 0:
            return (
                f"balance: SGLang's TP memory-balance check (min free >= 0.9 x max free) fails by "
                f"{-headroom:.2f} GiB ({balance.min_free_gib} against {balance.max_free_gib} GiB free)"
            )
        if decides == "vllm_min_margin_gib" and isinstance(margin, (int, float)) and margin < 0:
            return (
                f"balance: vLLM's start-up check fails: a GPU has {-margin:.2f} GiB less free than "
                f"gpu_memory_utilization x total"
            )
    return f"{f.check}: " + _shorten(f.text)


def requests_number(x: float) -> str:
    """Full-length requests as printed: rounded down to hundredths, so 3.998 reads 3.99, never 4."""
    return f"{math.floor(x * 100 + 1e-9) / 100:g}"


def full_requests(kv: KvPoolFacts | None, max_len: int | None) -> tuple[float, ...] | None:
    """Full ``max_model_len`` requests each replica holds at once, exact (not rounded down).

    Each replica's prediction carries the engine's own measure (vLLM's "Maximum concurrency" line,
    sliding-window aware); where a prediction has none, tokens over ``max_model_len``.
    """
    if kv is None or not kv.predictions or not max_len:
        return None
    return tuple(
        max(0.0, float(p.max_concurrency)) if p.max_concurrency is not None else max(0, p.kv_tokens) / max_len
        for p in kv.predictions
    )


def layout_row(
    dep: Deployment,
    model: ModelSpec,
    findings: dict[str, Finding],
    demand: Demand,
    replicas: int | None = None,
) -> LayoutRow:
    """The plan row for ``dep``: its GPUs, predicted memory, each check's verdict and the refusal."""
    kv = facts_of(findings.get("kv_pool"), KvPoolFacts)
    tokens = kv.predicted_kv_tokens_per_replica if kv else None
    max_len = (present(kv.max_model_len) if kv else None) or dep.max_model_len
    full = full_requests(kv, max_len)
    verdicts = {c: findings[c].status for c in CHECK_ORDER if c in findings}
    refused = refusal(findings, dep, model, demand, replicas)
    slow = slow_link(findings, dep) if refused is None else None
    status = worst(verdicts.values())
    return LayoutRow(
        tensor_parallel_size=dep.tp,
        pipeline_parallel_size=dep.pp,
        data_parallel_size=dep.dp,
        gpus=tuple(int(g) for g in (dep.gpus or ())),
        weights_gib_per_gpu=kv.weights_gib_per_rank if kv else None,
        kv_bytes_per_token_per_rank=kv.kv_bytes_per_token_per_rank if kv else None,
        predicted_kv_tokens_per_replica=tuple(tokens) if tokens else None,
        full_length_requests=full,
        max_model_len=max_len,
        status=status,
        verdicts=verdicts,
        why="",
        refused=refused[1] if refused else None,
        refused_by=refused[0] if refused else None,
        findings=findings,
        deployment=dep,
        shared_experts=engine_of(dep.engine).planner.plan_dp_shares_moe_experts() and model.is_moe and dep.dp > 1,
        slow_link=slow,
        expert_parallel=dep.enable_expert_parallel,
    )


def engines_row(parts: Sequence[LayoutRow], model: ModelSpec, hosts: int = 1) -> LayoutRow:
    """Independent engines, one per replica (each a DP=1 deployment on its GPUs), as one plan row.

    With ``hosts`` > 1 the parts are one deployment per host (each with its own DP replicas), not
    one engine per replica. A load balancer in front spreads the users, so each engine holds its
    share; the row is refused when any engine is (the first engine refused gives the reason), its
    verdicts are each check's worst, and its findings are those of the engine with the smallest
    pool, which sets what every engine can be given.
    """
    refused = next((p for p in parts if p.refused is not None), None)
    limiting = refused or min(parts, key=lambda p: min(p.predicted_kv_tokens_per_replica or (0,)))
    verdicts = {c: worst(p.verdicts[c] for p in parts if c in p.verdicts) for c in limiting.verdicts}
    tokens = [t for p in parts for t in (p.predicted_kv_tokens_per_replica or ())]
    full = [x for p in parts for x in (p.full_length_requests or ())]
    first = parts[0]
    return replace(
        limiting,
        data_parallel_size=sum(p.dp for p in parts),
        gpus=tuple(g for p in parts for g in p.gpus),
        predicted_kv_tokens_per_replica=tuple(tokens) if len(tokens) == len(parts) else None,
        full_length_requests=tuple(full) if len(full) == len(parts) else None,
        status=worst(p.status for p in parts),
        verdicts=verdicts,
        deployment=limiting.deployment or first.deployment,
        shared_experts=limiting.shared_experts if hosts > 1 else False,
        engines=hosts == 1 and model.is_moe,
        hosts=hosts,
        expert_parallel=first.expert_parallel,
        slow_link=next((p.slow_link for p in parts if p.slow_link), None),
    )


__all__ = ["CHECK_ORDER", "default_fraction_name", "engines_row", "full_requests", "layout_row", "refusal", "slow_link"]
