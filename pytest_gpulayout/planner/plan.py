"""Rank the TP x PP x DP layouts a machine allows for one model, by the rules the field uses.

The question people bring is "split the model across the cards, or copy it?". This module answers
it with the same checks ``gpulayout check`` runs (``evaluate.evaluate``), so a layout the planner
ranks first is one the preflight passes, and a refusal carries the reason the check gave.

Ranking, best first (each rule applies only where the ones above it tie):

1. PP across hosts comes after every layout that stays inside one host.
2. Room for what the users need. With ``--concurrency`` / ``--kv-tokens`` a layout short of it is
   refused; without them the planner assumes each replica should hold at least
   ``ASSUMED_REQUESTS_PER_REPLICA`` full-length requests at once (a replica that holds one serves
   long requests one at a time), and layouts holding fewer rank after those that do, the closest
   first. The header says what was assumed.
3. More independent replicas first. This is "copies win when one GPU holds the model with the KV
   room the users need" (a one-GPU replica sends nothing between GPUs and every GPU is another
   copy) and, when one GPU does not, "the fewest GPUs per replica that fit, then more replicas".
   (vLLM shards a MoE model's experts over every DP rank, so there its DP ranks are one group.)
4. With as many replicas either way, use every GPU: GPUs that cannot make another replica give the
   replicas KV room rather than sit idle, so a layout that leaves GPUs idle ranks after one that
   does not (PP=7 on 8 GPUs after PP=8 and TP=2 x PP=4 when neither makes two replicas).
5. Split inside the host the way the links allow: TP where NVLink joins the group (the engines
   all-reduce after every layer), PP over PCIe or across sockets (it sends activations only at
   stage boundaries and accepts uneven layer splits). A TP group over PCIe works but warns; whether
   it beats PP there depends on the workload, so the plan says so and offers the manifest that
   measures both with the startup check.
6. Cleaner verdicts.

Layouts a check refuses (heads do not divide, the weights or the pool do not fit, TP across sockets,
an engine start-up check that would fail) are listed after the candidates with that reason.

GPUs are chosen per layout, not taken in index order: each replica gets the set of GPUs whose
slowest internal link is fastest (then the most free memory), and inside it each TP group gets the
fastest-linked GPUs. On a box where GPU0 sits on the other socket, TP=2 lands on a PHB pair.

This module holds ``plan()`` itself, the memory-fraction search and the plan's notes. The parts it
puts together: ``plan_gpus`` (GPU choice), ``plan_request`` (the settings and the users' demand),
``plan_verdicts`` (one layout's row and refusal), ``plan_ranking`` (the order and the "why" lines),
``plan_measure`` (the measurement manifest), ``plan_rows`` (the data model). The names other code
imports from here (``plan``, ``Plan``, ``LayoutRow``, ``choose_gpus``, ``layouts``, ``per_replica``,
...) are re-exported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.evaluate import evaluate
from pytest_gpulayout.findings import facts_of, present
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.planner.gpus import LinkCosts, choose_gpus, layouts
from pytest_gpulayout.planner.measure import measurement
from pytest_gpulayout.planner.ranking import crosses_hosts, rank_key, replica_room, why, why_context
from pytest_gpulayout.planner.request import Demand, PlanRequest, model_reference, per_replica
from pytest_gpulayout.planner.rows import LayoutRow, Measurement, Plan
from pytest_gpulayout.planner.verdicts import CHECK_ORDER, default_fraction_name, layout_row
from pytest_gpulayout.report.text import per_replica_text, requests_text
from pytest_gpulayout.rules.kv_pool import FractionOrigin, KvPoolFacts

#: Without --concurrency / --kv-tokens: the full-length requests each replica should hold at once.
#: One is what the engines need to start; a replica that holds only one serves long requests one at
#: a time, so layouts with fewer rank after the ones with this much room.
ASSUMED_REQUESTS_PER_REPLICA = 2
#: The highest memory fraction the planner suggests when the engine's default is what refuses a layout.
FRACTION_CAP = 0.95


def plan(
    model: ModelSpec,
    machine: Machine,
    *,
    engine: str = "vllm",
    engine_version: str | None = None,
    max_model_len: int | None = None,
    concurrency: int | None = None,
    kv_tokens: int | None = None,
    max_gpus: int | None = None,
    memory_fraction: float | None = None,
    kv_cache_dtype: str = "auto",
    model_ref: str | None = None,
    host: Host = BARE_HOST,
) -> Plan:
    """Every TP x PP x DP layout on up to ``max_gpus`` of the machine's GPUs, checked and ranked.

    ``concurrency`` (full ``max_model_len`` requests at once) and ``kv_tokens`` are what the users need
    from the whole deployment: DP replicas share them evenly, so each replica must hold its share
    (64 users on DP=2 are 32 per copy; on TP=2 all 64 in one sharded pool). With neither, each
    replica must hold one full-length request (what the engines need to start), and layouts holding
    fewer than ``ASSUMED_REQUESTS_PER_REPLICA`` rank after those that do (``Plan.assumed`` says so).
    With the engine's default memory fraction, a layout refused for its pool is tried at higher
    fractions (up to ``FRACTION_CAP``): the refusal then names the fraction that serves.
    ``model_ref`` is how the model is named in the manifest snippet of a measurement hint (default:
    from ``model.source``). ``host`` supplies the installed engine version when none is pinned.
    """
    n_visible = len(machine.gpus)
    if n_visible == 0:
        raise InputError("the machine shows no GPUs: nothing to plan", where=machine.source)
    if max_gpus is not None and max_gpus > n_visible:
        raise InputError(
            f"--gpus {max_gpus}: the machine shows only {n_visible} GPUs ({machine.describe()})",
            where=machine.source,
        )
    request = PlanRequest(
        model_ref=model_ref or model_reference(model),
        engine=engine,
        engine_version=engine_version,
        max_model_len=max_model_len,
        demand=Demand(concurrency=concurrency, kv_tokens=kv_tokens),
        max_gpus=max_gpus,
        memory_fraction=memory_fraction,
        kv_cache_dtype=kv_cache_dtype,
    )
    n = max_gpus or n_visible
    link_table = LinkCosts(machine)

    rows: list[LayoutRow] = []
    for tp, pp, dp in layouts(n):
        gpus = choose_gpus(machine, tp, pp, dp, link_table)
        if gpus is None:  # pragma: no cover - layouts() never asks for more than n
            continue
        dep = request.deployment(tp, pp, dp, gpus)
        rows.append(layout_row(dep, model, evaluate(dep, machine, model, host), request.demand))

    assumed = None if request.demand.given else ASSUMED_REQUESTS_PER_REPLICA
    if memory_fraction is None:
        rows = [_with_fraction_hint(r, machine, model, request.demand, assumed, host) for r in rows]
    candidates = sorted((r for r in rows if r.refused is None), key=lambda r: rank_key(r, machine, assumed))
    refused = sorted((r for r in rows if r.refused is not None), key=lambda r: (r.group_size, r.tp, r.pp, r.dp))
    ctx = why_context(candidates, refused, n, assumed)
    whys = []
    for i, r in enumerate(candidates):
        fuller = any(
            o.independent_replicas == r.independent_replicas
            and o.gpu_count > r.gpu_count
            and replica_room(o, assumed) == replica_room(r, assumed)
            for o in candidates[:i]
        )
        whys.append(replace(r, why=why(r, ctx, fuller)))
    ranked = tuple(whys) + tuple(replace(r, why=f"refused: {r.refused}") for r in refused)

    first_kv = next((f for r in rows if (f := facts_of(r.findings.get("kv_pool"), KvPoolFacts))), None)
    resolved_len = max_model_len
    if resolved_len is None and first_kv is not None:
        resolved_len = present(first_kv.max_model_len)
    return Plan(
        model=model,
        machine=machine,
        engine=engine,
        engine_version=engine_version,
        max_model_len=resolved_len,
        required=request.demand.describe(resolved_len),
        layouts=ranked,
        notes=_notes(model, machine, request, rows, candidates, refused, assumed),
        measurement=measurement(candidates, machine, request),
        gpus_considered=n,
        assumed_requests=assumed,
    )


def _notes(
    model: ModelSpec,
    machine: Machine,
    request: PlanRequest,
    rows: Sequence[LayoutRow],
    candidates: Sequence[LayoutRow],
    refused: Sequence[LayoutRow],
    assumed: int | None,
) -> tuple[str, ...]:
    """The plan's notes, in the order they are shown: what is unknown, what a higher memory fraction
    would change, why nothing serves, engine caveats, the GPUs left out, the machine source's own."""
    notes: list[str] = []
    if not machine.memory_known:
        notes.append(
            f"GPU memory is unknown from {machine.source}: the KV pool could NOT be predicted and the "
            f"memory balance NOT checked, so no layout is known to fit (exit code 1). Layouts are "
            f"ranked on heads and links alone, as if each fits. Probe the host (--machine auto) or use "
            f"a snapshot/preset with memory for a verdict."
        )
    fraction = _fraction_note(machine, request.engine, candidates, refused, assumed)
    if fraction is not None:
        notes.append(fraction)
    if not candidates:
        notes.append(
            "no layout on these GPUs serves this model with what was asked: see the refusals "
            "(quantize, use kv_cache_dtype: fp8, shorten max_model_len, or add GPUs)"
        )
    if request.engine == "vllm" and model.is_moe:
        notes.append(
            f"{model.name} is a mixture of experts: vLLM shards the experts over all TP x DP ranks, so "
            f"its DP ranks are one group (DP attention), not independent copies. For independent "
            f"copies run one engine per GPU group."
        )
    n_visible = len(machine.gpus)
    if request.max_gpus is not None and request.max_gpus < n_visible:
        notes.append(f"planned on {request.max_gpus} of the {n_visible} visible GPUs (--gpus)")
    notes.extend(machine.notes)
    if not candidates and rows:
        closest = _closest(rows)
        if closest is not None:
            notes.append(closest)
    return tuple(notes)


def _fraction_note(
    machine: Machine,
    engine: str,
    candidates: Sequence[LayoutRow],
    refused: Sequence[LayoutRow],
    assumed: int | None,
) -> str | None:
    """A layout refused only by the engine's default memory fraction that would rank first (or above
    the best candidate) with the fraction that serves: name it and the fraction."""
    hinted = [r for r in refused if r.fits_with_memory_fraction is not None]
    if not hinted:
        return None
    # with the fraction it meets the need: it would rank by replicas, then GPUs used
    first = min(hinted, key=lambda r: (crosses_hosts(r, machine), -r.independent_replicas, -r.gpu_count))
    best = candidates[0] if candidates else None
    better = best is None or (
        (crosses_hosts(first, machine), -(assumed or 0), -first.independent_replicas, -first.gpu_count)
        < (crosses_hosts(best, machine), -replica_room(best, assumed), -best.independent_replicas, -best.gpu_count)
    )
    if not better:
        return None
    kv = facts_of(first.findings.get("kv_pool"), KvPoolFacts)
    default = present(kv.memory_fraction) if kv else None
    return (
        f"{first.layout} is refused only by {default_fraction_name(engine)} {default:g}: with "
        f"--memory-fraction {first.fits_with_memory_fraction:.2f} it serves and would rank "
        f"{'first' if best is None else f'above {best.layout}'} (re-run with it; the startup check confirms)"
    )


def _fraction_that_fits(
    dep: Deployment,
    machine: Machine,
    model: ModelSpec,
    demand: Demand,
    default: float,
    assumed: int | None,
    host: Host = BARE_HOST,
) -> float | None:
    """The smallest memory fraction, in hundredths above ``default`` up to ``FRACTION_CAP``, with which
    every check passes and each replica holds the need (the assumed one too); None when even the cap
    does not.

    The pool grows with the fraction, so the search halves the range, and every fraction it returns
    was evaluated with all the checks. vLLM's start-up check (free memory >= fraction x total)
    tightens as the fraction grows: a layout that fails it at the cap gets no suggestion, which errs
    towards saying nothing rather than suggesting a fraction the engine would refuse.
    """

    def serves(hundredths: int) -> bool:
        d = replace(dep, memory_fraction=hundredths / 100)
        row = layout_row(d, model, evaluate(d, machine, model, host), demand)
        return row.refused is None and replica_room(row, assumed) == (assumed or 0)

    lo, hi = math.floor(default * 100 + 1e-9) + 1, round(FRACTION_CAP * 100)
    if lo > hi or not serves(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if serves(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi / 100


def _with_fraction_hint(
    row: LayoutRow,
    machine: Machine,
    model: ModelSpec,
    demand: Demand,
    assumed: int | None,
    host: Host = BARE_HOST,
) -> LayoutRow:
    """A layout refused for its pool at the engine's default memory fraction: if a higher fraction
    serves, say so with the number (the weights are not what refuses it then)."""
    kv = facts_of(row.findings.get("kv_pool"), KvPoolFacts)
    dep = row.deployment
    if dep is None or kv is None or row.refused_by != "kv_pool":
        return row
    default = present(kv.memory_fraction)
    if kv.fraction_origin is not FractionOrigin.ENGINE_DEFAULT or default is None:
        return row
    fits = _fraction_that_fits(dep, machine, model, demand, float(default), assumed, host)
    if fits is None:
        return row
    name = f"{default_fraction_name(dep.engine)} {default:g}"
    detail = row.refusal_detail
    if kv.predicted_kv_tokens is not None and kv.predicted_kv_tokens <= 0:
        w = kv.weights_gib_per_rank
        what = f"{name} leaves no room for a KV cache next to {w} GiB of weights per GPU"
    else:
        what = f"{detail} at {name}"
    kept = (
        "less kept back for activations and CUDA graphs"
        if dep.engine == "sglang"
        else "less headroom for CUDA graphs and other processes"
    )
    text = f"kv_pool: {what}; --memory-fraction {fits:.2f} would serve ({kept}: confirm with the startup check)"
    return replace(row, refused=text, fits_with_memory_fraction=fits)


def _closest(rows: Sequence[LayoutRow]) -> str | None:
    """When nothing serves: the layout that holds the most, and what would close the gap."""
    sized = [r for r in rows if r.full_length_requests and r.refused_by == "kv_pool"]
    if not sized:
        return None
    best = max(sized, key=lambda r: (sum(r.full_length_requests or ()), -r.gpu_count))
    total = sum(best.full_length_requests or ())
    tokens = sum(best.predicted_kv_tokens_per_replica or ())
    return (
        f"the most any layout holds: {best.layout} on GPUs {','.join(map(str, best.gpus))}, {total} "
        f"full-length requests at once ({tokens:,} tokens of KV in all). To reach the demand: "
        f"kv_cache_dtype fp8 (about twice the tokens), a shorter max_model_len, a higher memory fraction, "
        f"a quantized checkpoint, or more GPUs"
    )


__all__ = [
    "CHECK_ORDER",
    "LayoutRow",
    "Measurement",
    "Plan",
    "choose_gpus",
    "layouts",
    "model_reference",
    "per_replica",
    "per_replica_text",
    "plan",
    "requests_text",
]
