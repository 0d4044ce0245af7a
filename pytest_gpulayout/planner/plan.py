"""Rank the TP x PP x DP layouts a machine allows for one model, by the rules the field uses.

The question people bring is "split the model across the cards, or copy it?". This module answers
it with the same checks ``gpulayout check`` runs (``evaluate.evaluate``), so a layout the planner
ranks first is one the preflight passes, and a refusal carries the reason the check gave.

Ranking, best first (each rule applies only where the ones above it tie):

1. PP across hosts comes after every layout that stays inside one host; TP over the socket
   interconnect (SYS) or across hosts (NET) comes after every layout that keeps TP inside a socket:
   the engines start it ("starts, slow"), the ``links`` check warns, so it is listed, not refused
   (``require.tp_links`` makes it a refusal).
2. The need, with the ``kv_pool`` check's margin (``rules.kv_pool.TIGHT_MARGIN``). With
   ``--concurrency`` / ``--kv-tokens`` a layout short of it is refused, and one that meets it by less
   than the margin (the check warns) ranks after the layouts that meet it with room: two copies
   3% over their halves are not "one GPU holds it with room". Without a need the planner assumes
   ``ASSUMED_REQUESTS_PER_REPLICA`` full-length requests per replica, with the same margin; layouts
   holding fewer rank after, the closest first. The header says what was assumed.
3. More independent replicas first: copies win when one GPU holds the model with room; when one
   GPU does not, the fewest GPUs per replica that fit, then more replicas. vLLM shards a MoE
   model's experts over every DP rank (one group), so for MoE under vLLM the plan also lists
   independent engines (one server per replica behind a load balancer, ``xN engines``).
4. With as many replicas either way, use every GPU (PP=7 on 8 GPUs after PP=8).
5. Split the way the links allow: TP where NVLink joins the group; over PCIe, pure PP first, then
   TP filling each socket with PP across (the two a measurement decides between), then other TP
   sizes, the least TP first.
6. Cleaner verdicts.

For a MoE model each layout whose experts the engine would spread over more than one rank with
expert parallel on (``Engine.expert_layout``: vLLM over TP x DP, SGLang inside the TP group) is also
listed with it on (``TP=4 PP=1 DP=2 EP``): whole experts per rank and an all-to-all per MoE layer
instead of each expert split, so a width the split refuses can still serve.

Which layouts are listed is ``space``'s: every one on a single host; on several, the layouts
of one host, each shape that fits a host deployed on every host (``xN hosts``), replicas over whole
hosts with TP inside and PP across, and one TP across hosts (starts, slow). Each distinct (TP, PP, DP,
placement class) is evaluated once: alike GPUs and hosts give the same verdicts.

Layouts a check refuses (heads do not divide, the weights or the pool do not fit, a link
``require.tp_links`` does not accept, an engine start-up check that would fail) are listed after the
candidates with that reason.

GPUs are chosen per layout, not taken in index order: each replica gets the set of GPUs whose
slowest internal link is fastest (then the most free memory), and inside it each TP group gets the
fastest-linked GPUs. On a box where GPU0 sits on the other socket, TP=2 lands on a PHB pair.

This module holds ``plan()`` itself, the memory-fraction search and the plan's notes. The parts it
puts together: ``gpus`` (GPU choice), ``space`` (which layouts), ``request`` (the settings and the
users' demand), ``verdicts`` (one layout's row and refusal), ``ranking`` (the order and the "why"
lines), ``measure`` (the measurement manifest), ``rows`` (the data model). The names other code
imports from here (``plan``, ``Plan``, ``LayoutRow``, ``choose_gpus``, ``layouts``, ``per_replica``,
...) are re-exported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.findings import facts_of, present
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.planner.gpus import LinkCosts, choose_gpus, layouts
from pytest_gpulayout.planner.measure import measurement
from pytest_gpulayout.planner.ranking import (
    NEED_ORDER,
    need_met,
    rank_key,
    replica_room,
    why,
    why_context,
)
from pytest_gpulayout.planner.request import Demand, PlanRequest, model_reference, per_replica
from pytest_gpulayout.planner.rows import LayoutRow, Measurement, Plan, closest_key, holds_something
from pytest_gpulayout.planner.space import cross_host, multi_host, single_host
from pytest_gpulayout.planner.verdicts import (
    CHECK_ORDER,
    default_fraction_name,
    engines_row,
    layout_row,
    requests_number,
)
from pytest_gpulayout.rules.kv_pool import TIGHT_MARGIN, FractionOrigin, KvPoolFacts
from pytest_gpulayout.runner import engine_of, evaluate

#: How a plan picks the GPUs of a layout: ``(machine, tp, pp, dp, links)`` -> GPU indices or None.
Chooser = Callable[[Machine, int, int, int, LinkCosts, "Sequence[int] | None"], "tuple[int, ...] | None"]

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
    progress: Callable[[str, str], None] | None = None,
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
    ``progress(what, stage)`` hears which layout is being evaluated (``launch/progress.py``
    ``SlowTask``: shown only when the plan takes long).
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
    return _plan(model, machine, request, n, host, choose_gpus, progress)


def _plan(
    model: ModelSpec,
    machine: Machine,
    request: PlanRequest,
    n: int,
    host: Host,
    chooser: Chooser,
    progress: Callable[[str, str], None] | None = None,
) -> Plan:
    """``plan()`` with the GPU choice given (``choose_gpus``; the tests pass the exhaustive one)."""
    links = LinkCosts(machine)
    assumed = None if request.demand.given else ASSUMED_REQUESTS_PER_REPLICA
    ev = _Evaluator(request, machine, model, host, links, chooser)
    sizes = [len(h) for h in links.hosts]
    every: list[tuple[int, int, int]] = []
    if len(sizes) == 1:
        shapes = single_host(n)
    else:
        inside, every, across = multi_host(sizes, n)
        shapes = inside + across
    serving = engine_of(request.engine)
    engines = serving.planner.plan_dp_shares_moe_experts() and model.is_moe
    #: an engine without DP replicas (``Engine.data_parallel``) gets DP layouts as independent engines only
    one_replica = not serving.planner.data_parallel

    def say(what: str, stage: str) -> None:
        if progress is not None:
            progress(what, stage)

    def rows_for(shape_list: Sequence[tuple[int, int, int]]) -> list[LayoutRow]:
        out = []
        for i, (tp, pp, dp) in enumerate(shape_list, 1):
            say(f"evaluating TP={tp} PP={pp} DP={dp} ({i} of {len(shape_list)} layouts)", "layouts")
            row = None if one_replica and dp > 1 else ev.row(tp, pp, dp)
            if row is not None:
                out.append(row)
            if model.is_moe and not (one_replica and dp > 1) and serving.memory.expert_layout(tp, dp, True)[0] > 1:
                # expert parallel, a layout of its own: whole experts per rank, all-to-all per MoE layer
                ep_row = ev.row(tp, pp, dp, ep=True)
                if ep_row is not None:
                    out.append(ep_row)
            if (engines or one_replica) and dp > 1:
                eng = ev.engines(tp, pp, dp)
                if eng is not None:
                    out.append(eng)
        return out

    rows = rows_for(shapes)
    for i, (tp, pp, dp) in enumerate(every, 1):
        if one_replica and dp > 1:
            continue  # a DP deployment on each host: the engine has none
        say(f"evaluating TP={tp} PP={pp} DP={dp} on every host ({i} of {len(every)})", "per host")
        per_host = ev.per_host(tp, pp, dp)
        if per_host is not None:
            rows.append(per_host)
    if len(sizes) > 1:
        for k, cross in cross_host(sizes, n, model.num_hidden_layers):
            say(f"evaluating {len(cross)} layouts across {k} hosts", f"across {k} hosts")
            new = [r for tp, pp, dp in cross if (r := ev.spanning(tp, pp, dp, k)) is not None]
            rows += new
            if any(r.refused is None and need_met(r, assumed) in ("with room", None) for r in new):
                break  # more hosts per replica only make fewer replicas
    host_size = max(sizes)
    if request.memory_fraction is None:
        hinted = []
        for i, r in enumerate(rows, 1):
            say(f"trying higher memory fractions for {r.layout} ({i} of {len(rows)})", "memory fractions")
            hinted.append(_with_fraction_hint(r, machine, model, request.demand, assumed, host)
                          if r.gpu_count <= host_size else r)
        rows = hinted
    rows = [replace(r, need_met=need_met(r, assumed)) if r.refused is None else r for r in rows]
    candidates = sorted((r for r in rows if r.refused is None), key=lambda r: rank_key(r, machine, assumed, links))
    candidates = [replace(r, rank=i + 1) for i, r in enumerate(candidates)]
    refused = sorted(
        (r for r in rows if r.refused is not None), key=lambda r: (r.group_size, r.tp, r.pp, r.dp, r.engines)
    )
    ctx = why_context(candidates, refused, n, assumed, TIGHT_MARGIN)
    whys = []
    for i, r in enumerate(candidates):
        fuller = any(
            o.independent_replicas == r.independent_replicas
            and o.gpu_count > r.gpu_count
            and NEED_ORDER[o.need_met] == NEED_ORDER[r.need_met]
            and replica_room(o, assumed) == replica_room(r, assumed)
            for o in candidates[:i]
        )
        whys.append(replace(r, why=why(r, ctx, fuller)))
    ranked = tuple(whys) + tuple(replace(r, why=f"refused: {r.refused}") for r in refused)

    first_kv = next((f for r in rows if (f := facts_of(r.findings.get("kv_pool"), KvPoolFacts))), None)
    resolved_len = request.max_model_len
    if resolved_len is None and first_kv is not None:
        resolved_len = present(first_kv.max_model_len)
    notes, noted = _notes(model, machine, request, rows, candidates, refused, assumed, n, links)
    return Plan(
        model=model,
        machine=machine,
        engine=request.engine,
        engine_version=request.engine_version,
        max_model_len=resolved_len,
        required=request.demand.describe(resolved_len),
        layouts=ranked,
        notes=notes,
        measurement=measurement([r for r in candidates if not r.engines], machine, request, links),
        gpus_considered=n,
        assumed_requests=assumed,
        concurrency=request.demand.concurrency,
        kv_tokens=request.demand.kv_tokens,
        margin=TIGHT_MARGIN,
        noted=noted,
    )


class _Evaluator:
    """Rows for layouts, each distinct (TP, PP, DP, placement class) evaluated once.

    Two GPU lists of one class (the same GPU classes position by position, hosts alike, the same
    pattern of hosts) give the same verdicts: the checks read GPU models, memory, tenants and links,
    all of which the class fixes. Independent engines hit this most: eight alike GPUs are one
    evaluation, not eight.
    """

    def __init__(self, request: PlanRequest, machine: Machine, model: ModelSpec, host: Host,
                 links: LinkCosts, chooser: Chooser):
        self.request, self.machine, self.model, self.host = request, machine, model, host
        self.links, self.chooser = links, chooser
        self._cache: dict[tuple[object, ...], LayoutRow] = {}
        self.evaluations = 0

    def _class_key(self, gpus: Sequence[int]) -> tuple[object, ...]:
        lk = self.links
        sig_ids: dict[tuple[object, ...], int] = {}
        hosts: dict[int, int] = {}
        out = []
        for g in gpus:
            h = lk.host_of[g]
            sig = sig_ids.setdefault(lk.signature[h], len(sig_ids))
            members = lk.hosts[h]
            rep = next(i for i, x in enumerate(members) if lk.klass[x] == lk.klass[g])
            out.append((sig, rep, hosts.setdefault(h, len(hosts))))
        return tuple(out)

    def _evaluate(self, tp: int, pp: int, dp: int, gpus: tuple[int, ...], share: int,
                  cached: bool, ep: bool = False) -> LayoutRow:
        key = (tp, pp, dp, share, ep, self._class_key(gpus))
        if cached and key in self._cache:
            return replace(self._cache[key], gpus=gpus, span=self._hosts_of(gpus))
        dep = self.request.deployment(tp, pp, dp, gpus, share=share, expert_parallel=ep)
        self.evaluations += 1
        row = layout_row(dep, self.model, evaluate(dep, self.machine, self.model, self.host),
                         self.request.demand, share)
        row = replace(row, span=self._hosts_of(gpus))  # one deployment on these GPUs: the hosts it spans
        self._cache[key] = row
        return row

    def _hosts_of(self, gpus: Sequence[int]) -> int:
        """How many hosts these GPUs sit on (``hosts_per_deployment``)."""
        if len(self.links.hosts) < 2:
            return 1
        host_of = self.links.host_of
        return len({host_of[g] for g in gpus})

    def row(self, tp: int, pp: int, dp: int, ep: bool = False) -> LayoutRow | None:
        gpus = self.chooser(self.machine, tp, pp, dp, self.links, None)
        if gpus is None:
            return None
        return self._evaluate(tp, pp, dp, gpus, dp, cached=False, ep=ep)

    def per_host(self, tp: int, pp: int, dp: int) -> LayoutRow | None:
        """The in-host layout ``(tp, pp, dp)`` deployed on every host that has the GPUs, one
        deployment per host behind a load balancer: each holds its share of the users."""
        hosts = [h for h in self.links.hosts if len(h) >= tp * pp * dp]
        if len(hosts) < 2:
            return None
        share = dp * len(hosts)
        parts = []
        for members in hosts:
            gpus = self.chooser(self.machine, tp, pp, dp, self.links, members)
            if gpus is None:  # pragma: no cover - the host has the GPUs
                return None
            parts.append(self._evaluate(tp, pp, dp, gpus, share, cached=True))
        return self._merged(parts, tp, pp, dp, share, hosts=len(hosts))

    def spanning(self, tp: int, pp: int, dp: int, k: int) -> LayoutRow | None:
        """``dp`` replicas of ``k`` whole hosts each (TP inside a host, PP across), one deployment per
        replica: one replica when ``dp`` is 1, else alike replicas are one evaluation."""
        if dp == 1:
            return self.row(tp, pp, 1)
        gpus = self.chooser(self.machine, tp, pp, dp, self.links, None)
        if gpus is None:
            return None
        w = tp * pp
        parts = [self._evaluate(tp, pp, 1, gpus[i * w:(i + 1) * w], dp, cached=True) for i in range(dp)]
        return replace(self._merged(parts, tp, pp, 1, dp, hosts=dp), span=k)

    def _merged(self, parts: list[LayoutRow], tp: int, pp: int, dp: int, share: int, hosts: int) -> LayoutRow:
        merged = engines_row(parts, self.model, hosts)
        limiting = next(p for p in parts if p.findings is merged.findings)
        if limiting.deployment is not None and tuple(limiting.deployment.gpus or ()) != limiting.gpus:
            # its findings came from an alike group: re-read them for its own GPUs (the messages name GPUs)
            fresh = self._evaluate(tp, pp, dp, limiting.gpus, share, cached=False)
            merged = replace(merged, findings=fresh.findings, deployment=fresh.deployment, refused=fresh.refused,
                             refused_by=fresh.refused_by)
        return merged

    def engines(self, tp: int, pp: int, dp: int) -> LayoutRow | None:
        """``dp`` independent engines of TP x PP, on the GPUs the DP layout would take."""
        gpus = self.chooser(self.machine, tp, pp, dp, self.links, None)
        if gpus is None:
            return None
        w = tp * pp
        parts = [self._evaluate(tp, pp, 1, gpus[i * w:(i + 1) * w], dp, cached=True) for i in range(dp)]
        return replace(self._merged(parts, tp, pp, 1, dp, hosts=1), engines=True)  # 'xN engines', any model


def _notes(
    model: ModelSpec,
    machine: Machine,
    request: PlanRequest,
    rows: Sequence[LayoutRow],
    candidates: Sequence[LayoutRow],
    refused: Sequence[LayoutRow],
    assumed: int | None,
    n: int,
    links: LinkCosts,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The plan's notes, in the order they are shown (what is unknown, what a higher memory fraction
    would change, why nothing serves, engine caveats, the GPUs left out, the machine source's own),
    and the refused layouts they name (the table shows those)."""
    notes: list[str] = []
    noted: list[str] = []
    if not machine.memory_known:
        notes.append(
            f"GPU memory is unknown from {machine.source}: the KV pool could NOT be predicted and the "
            f"memory balance NOT checked, so no layout is known to fit (exit code 1). Layouts are "
            f"ranked on heads and links alone, as if each fits. Probe the host (--machine auto) or use "
            f"a snapshot/preset with memory for a verdict."
        )
    fraction = _fraction_note(machine, request.engine, candidates, refused, assumed, links)
    if fraction is not None:
        notes.append(fraction[0])
        noted.append(fraction[1])
    too_big = _weights_exceed(model, machine, rows, n) if not candidates else None
    if too_big is not None:
        notes.append(too_big)
    elif not candidates:
        notes.append(
            "no layout on these GPUs serves this model with what was asked: see the refusals "
            "(quantize, use kv_cache_dtype: fp8, shorten max_model_len, or add GPUs)"
        )
    if engine_of(request.engine).planner.plan_dp_shares_moe_experts() and model.is_moe:
        notes.append(
            f"{model.name} is a mixture of experts: vLLM's own DP shards the experts over all TP x DP "
            f"ranks, so its DP ranks are one group (DP attention), not independent copies. Independent "
            f"engines (one server per GPU group behind a load balancer) are listed as their own "
            f"layouts, 'xN engines'."
        )
    if len(links.hosts) > 1:
        big = max(len(h) for h in links.hosts)
        notes.append(
            f"{len(links.hosts)} hosts: TP stays inside a host (larger TP is listed once: it starts, slow), PP "
            f"crosses hosts, copies go per host; layouts up to {big} GPUs are shown on one host and "
            f"copied onto every host"
        )
    n_visible = len(machine.gpus)
    if request.max_gpus is not None and request.max_gpus < n_visible:
        notes.append(f"planned on {request.max_gpus} of the {n_visible} visible GPUs (--gpus)")
    notes.extend(machine.notes)
    if not candidates and rows and too_big is None:
        closest = _closest(refused)
        if closest is not None:
            notes.append(closest)
    return tuple(notes), tuple(noted)


def _weights_exceed(model: ModelSpec, machine: Machine, rows: Sequence[LayoutRow], n: int) -> str | None:
    """When nothing serves because the weights alone do not fit the GPUs' memory, the one line that
    says so (a shorter context cannot help then)."""
    single = next((r for r in rows if r.gpu_count == 1 and not r.engines), None)
    kv = facts_of(single.findings.get("kv_pool"), KvPoolFacts) if single else None
    if kv is None or not machine.memory_known:
        return None
    weights = kv.weights_gib_per_rank
    fraction = present(kv.memory_fraction)
    frac = float(fraction) if fraction is not None else 1.0
    totals = sorted((g.memory_total_mib or 0 for g in machine.gpus), reverse=True)[:n]
    total = sum(totals) / 1024
    if weights <= total * frac:
        return None
    # a checkpoint already quantized (DeepSeek-V3 ships FP8) needs a smaller one, not FP8
    fix = "a smaller quantization or more nodes" if model.quantization is not None else "FP8 weights or more nodes"
    return (
        f"the weights alone ({weights:,.1f} GiB) exceed the GPUs' {total * frac:,.1f} GiB ({frac:g} of "
        f"{total:,.1f} GiB on {len(totals)} GPUs, the engine's memory fraction): {fix}"
    )


def _fraction_note(
    machine: Machine,
    engine: str,
    candidates: Sequence[LayoutRow],
    refused: Sequence[LayoutRow],
    assumed: int | None,
    links: LinkCosts,
) -> tuple[str, str] | None:
    """A layout refused only by the engine's default memory fraction that would rank first (or above
    the best candidate) with the fraction that serves: the note naming it and the fraction, and the
    layout it names."""
    hinted = [r for r in refused if r.fits_with_memory_fraction is not None]
    if not hinted:
        return None

    def as_served(r: LayoutRow) -> tuple[object, ...]:
        # with the fraction it meets the need (that is what the search asked): rank it like a candidate
        return rank_key(replace(r, refused=None, refused_by=None, need_met="with room"), machine, assumed, links)

    first = min(hinted, key=as_served)
    best = candidates[0] if candidates else None
    if best is not None and as_served(first) >= rank_key(best, machine, assumed, links):
        return None
    kv = facts_of(first.findings.get("kv_pool"), KvPoolFacts)
    default = present(kv.memory_fraction) if kv else None
    text = (
        f"{first.layout} is refused only by {default_fraction_name(engine)} {default:g}: with "
        f"--memory-fraction {first.fits_with_memory_fraction:.2f} it serves and would rank "
        f"{'first' if best is None else f'above {best.layout}'} (re-run with it; the startup check confirms)"
    )
    return text, first.layout


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
    every check passes and each replica holds the need (the assumed one too) with the kv_pool
    check's margin; None when even the cap does not.

    The pool grows with the fraction, so the search halves the range, and every fraction it returns
    was evaluated with all the checks. vLLM's start-up check (free memory >= fraction x total)
    tightens as the fraction grows: a layout that fails it at the cap gets no suggestion, which errs
    towards saying nothing rather than suggesting a fraction the engine would refuse.
    """

    def serves(hundredths: int) -> bool:
        d = replace(dep, memory_fraction=hundredths / 100)
        row = layout_row(d, model, evaluate(d, machine, model, host), demand)
        # with room: under the kv_pool margin it would still rank after the layouts with room
        return row.refused is None and need_met(row, assumed) in ("with room", None)

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
    kept = engine_of(dep.engine).planner.plan_fraction_keeps_back()
    text = f"kv_pool: {what}; --memory-fraction {fits:.2f} would serve ({kept}: confirm with the startup check)"
    return replace(row, refused=text, fits_with_memory_fraction=fits)


def _closest(refused: Sequence[LayoutRow]) -> str | None:
    """When nothing serves: the layout that holds the most (the first refused row of the table), and
    what would close the gap."""
    sized = [r for r in refused if holds_something(r) and r.full_length_requests]
    if not sized:
        return None
    best = min(sized, key=closest_key)
    total = sum(best.full_length_requests or ())
    tokens = sum(best.predicted_kv_tokens_per_replica or ())
    return (
        f"the most any layout holds: {best.layout} on GPUs {','.join(map(str, best.gpus))}, "
        f"{requests_number(total)} full-length requests at once ({tokens:,} tokens of KV in all). To reach "
        f"the demand: kv_cache_dtype fp8 (about twice the tokens), a shorter max_model_len, a higher memory "
        f"fraction, a quantized checkpoint, or more GPUs"
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
    "plan",
]
