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
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .deployment import Deployment, ParallelShape, Require
from .errors import InputError
from .evaluate import STATIC_CHECKS
from .findings import Finding, Status, worst
from .machine import LINK_KINDS, Machine, describe_link, is_nvlink, link_rank
from .modelspec import ModelSpec
from .placement import split_ranks

#: Order the checks are shown in (the static checks of ``evaluate``).
CHECK_ORDER = tuple(STATIC_CHECKS)
#: Above this many GPU subsets, pick groups greedily instead of trying every subset.
_EXACT_LIMIT = 4000
#: Without --concurrency / --kv-tokens: the full-length requests each replica should hold at once.
#: One is what the engines need to start; a replica that holds only one serves long requests one at
#: a time, so layouts with fewer rank after the ones with this much room.
ASSUMED_REQUESTS_PER_REPLICA = 2
#: The highest memory fraction the planner suggests when the engine's default is what refuses a layout.
FRACTION_CAP = 0.95


# -- GPU choice ---------------------------------------------------------------------------------


def _cost(kind: str | None) -> int:
    """Scalar link cost, fastest lowest: NV by descending count, PIX ... SYS, unknown, NET."""
    if kind is None:
        return LINK_KINDS.index("SYS") * 100 + 50
    fam, neg_count = link_rank(kind)
    return fam * 100 + neg_count


class _Links:
    """Pairwise link costs, computed once per plan (the planner asks for them thousands of times)."""

    def __init__(self, machine: Machine):
        self.machine = machine
        idx = machine.indices
        self.cost = {(a, b): _cost(machine.effective_link(a, b)) for a in idx for b in idx if a != b}
        self.free = {g.index: (g.memory_free_mib or 0) for g in machine.gpus}
        self.name = {g.index: g.name for g in machine.gpus}

    def score(self, group: Sequence[int]) -> tuple[int, int, int, int, tuple[int, ...]]:
        """Lower is better: slowest internal link, total link cost, mixed GPU models, least free memory."""
        pairs = [self.cost[a, b] for a, b in itertools.combinations(group, 2)]
        return (
            max(pairs, default=0),
            sum(pairs),
            len({self.name[g] for g in group}),
            -min(self.free[g] for g in group),
            tuple(group),
        )

    def best_group(self, avail: Sequence[int], k: int) -> tuple[int, ...]:
        """The ``k`` GPUs of ``avail`` with the best score (every subset when few, else grown greedily)."""
        if k >= len(avail):
            return tuple(avail)
        if math.comb(len(avail), k) <= _EXACT_LIMIT:
            return min((tuple(c) for c in itertools.combinations(avail, k)), key=self.score)
        best: tuple[int, ...] | None = None
        for seed in avail:
            group = [seed]
            while len(group) < k:
                rest = [g for g in avail if g not in group]
                group.append(min(rest, key=lambda g: self.score(sorted([*group, g]))))
            cand = tuple(sorted(group))
            if best is None or self.score(cand) < self.score(best):
                best = cand
        assert best is not None
        return best

    def between(self, a: Sequence[int], b: Sequence[int]) -> int:
        """Cost of a stage boundary: same TP rank talks to same TP rank."""
        return max(self.cost[x, y] for x, y in zip(a, b, strict=True))


def choose_gpus(machine: Machine, tp: int, pp: int, dp: int, links: _Links | None = None) -> tuple[int, ...] | None:
    """GPU indices for the layout in engine order (replica, stage, TP rank), or ``None`` if too few.

    Replica by replica: the ``tp x pp`` GPUs whose slowest link is fastest (then most free memory);
    inside it, TP groups by the same rule; stages chained so each boundary crosses the best link left.
    """
    links = links or _Links(machine)
    avail = list(machine.indices)
    # idle GPUs first, so that a subset of equal links takes the GPUs other tenants leave alone
    avail.sort(key=lambda g: (-links.free[g], g))
    if tp * pp * dp > len(avail):
        return None
    order: list[int] = []
    for _ in range(dp):
        replica = list(links.best_group(sorted(avail), tp * pp))
        for g in replica:
            avail.remove(g)
        groups: list[tuple[int, ...]] = []
        left = sorted(replica)
        for _ in range(pp):
            grp = links.best_group(left, tp)
            groups.append(grp)
            left = [g for g in left if g not in grp]
        stages = [groups.pop(0)]
        while groups:
            nxt = min(groups, key=lambda grp: (links.between(stages[-1], grp), grp))
            groups.remove(nxt)
            stages.append(nxt)
        for stage in stages:
            order.extend(stage)
    return tuple(order)


def layouts(n: int) -> list[tuple[int, int, int]]:
    """Every (tp, pp, dp) with ``tp * pp * dp <= n``."""
    return [
        (tp, pp, dp) for tp in range(1, n + 1) for pp in range(1, n // tp + 1) for dp in range(1, n // (tp * pp) + 1)
    ]


# -- rows ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayoutRow(ParallelShape):
    """One candidate layout with its GPUs, predicted memory and verdicts.

    ``refused`` holds the reason a check gave when the layout cannot serve (None for candidates);
    ``findings`` keeps every check's full message for ``--json`` and the HTML report.
    """

    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    gpus: tuple[int, ...]
    weights_gib_per_gpu: float | None
    kv_bytes_per_token_per_rank: int | None
    predicted_kv_tokens_per_replica: tuple[int, ...] | None
    full_length_requests: tuple[int, ...] | None
    max_model_len: int | None
    status: Status
    verdicts: Mapping[str, Status]
    why: str
    refused: str | None = None
    findings: Mapping[str, Finding] = field(default_factory=dict)
    deployment: Deployment | None = None
    #: vLLM shards a MoE model's experts over all TP x DP ranks: its DP ranks then exchange
    #: activations in every MoE layer and are one group, not independent copies
    shared_experts: bool = False
    #: refused only by the engine's default memory fraction: the smallest fraction (up to
    #: ``FRACTION_CAP``) with which every check passes
    fits_with_memory_fraction: float | None = None

    @property
    def pool_predicted(self) -> bool:
        """False when the KV pool could not be predicted (GPU memory unknown): nobody knows it fits."""
        return self.predicted_kv_tokens_per_replica is not None

    @property
    def group_size(self) -> int:
        """GPUs that talk to each other while serving: one replica, or all of them when experts are shared."""
        return self.gpu_count if self.shared_experts else self.world_size

    @property
    def independent_replicas(self) -> int:
        return 1 if self.shared_experts else self.dp

    @property
    def name(self) -> str:
        """Deployment name usable in a manifest and in test ids."""
        return f"tp{self.tp}-pp{self.pp}-dp{self.dp}"

    @property
    def replicas(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """``replicas[d][s]`` = TP group of stage ``s`` of replica ``d`` (same shape as ``Placement``)."""
        return split_ranks(self.gpus, self.tp, self.pp, self.dp).replicas

    def to_json(self) -> dict[str, Any]:
        return {
            "tensor_parallel_size": self.tp,
            "pipeline_parallel_size": self.pp,
            "data_parallel_size": self.dp,
            "gpus": list(self.gpus),
            "status": self.status.value,
            "refused": self.refused,
            "weights_gib_per_gpu": self.weights_gib_per_gpu,
            "kv_bytes_per_token_per_rank": self.kv_bytes_per_token_per_rank,
            "predicted_kv_tokens_per_replica": (
                None if self.predicted_kv_tokens_per_replica is None else list(self.predicted_kv_tokens_per_replica)
            ),
            "full_length_requests": (None if self.full_length_requests is None else list(self.full_length_requests)),
            "max_model_len": self.max_model_len,
            "independent_replicas": self.independent_replicas,
            "pool_predicted": self.pool_predicted,
            "fits_with_memory_fraction": self.fits_with_memory_fraction,
            "verdicts": {k: v.value for k, v in self.verdicts.items()},
            "why": self.why,
            "checks": {k: f.to_json() for k, f in self.findings.items()},
        }


@dataclass(frozen=True)
class Measurement:
    """Where the rules cannot decide between two layouts: what to measure, and the manifest for it."""

    text: str
    candidates: tuple[str, ...]  # layout strings, e.g. ("TP=1 PP=2 DP=1", "TP=2 PP=1 DP=1")
    manifest: str  # YAML for the startup check (launch: {enabled: true})

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "candidates": list(self.candidates), "manifest": self.manifest}


@dataclass(frozen=True)
class Plan:
    """The ranked layouts: candidates best first, then the refused ones (``layouts`` holds both)."""

    model: ModelSpec
    machine: Machine
    engine: str
    engine_version: str | None
    max_model_len: int | None
    required: str | None  # the requirement in words, None when none was given
    layouts: tuple[LayoutRow, ...]
    notes: tuple[str, ...] = ()
    measurement: Measurement | None = None
    gpus_considered: int = 0
    #: without --concurrency / --kv-tokens: full-length requests per replica assumed (None when given)
    assumed_requests: int | None = None

    @property
    def candidates(self) -> tuple[LayoutRow, ...]:
        return tuple(r for r in self.layouts if r.refused is None)

    @property
    def refused(self) -> tuple[LayoutRow, ...]:
        return tuple(r for r in self.layouts if r.refused is not None)

    @property
    def serving(self) -> tuple[LayoutRow, ...]:
        """Candidates known to serve: their pool was predicted (GPU memory known) and holds the need."""
        return tuple(r for r in self.candidates if r.pool_predicted)

    @property
    def best(self) -> LayoutRow | None:
        c = self.candidates
        return c[0] if c else None

    @property
    def assumed(self) -> str | None:
        """The need assumed when none was given, in words (None when the user gave one)."""
        if self.assumed_requests is None:
            return None
        n = self.assumed_requests
        return (
            f"none given; assumed room for {n} full-length request{'s' if n != 1 else ''} per replica "
            f"(layouts holding fewer rank after those that do; --concurrency or --kv-tokens sets the real need)"
        )

    def rank(self, row: LayoutRow) -> int:
        """1-based place of a candidate among all candidates (the order of ``--json`` and ``--all``)."""
        return self.candidates.index(row) + 1

    def headline(self, limit: int | None = 10) -> tuple[list[LayoutRow], int]:
        """The candidates worth a line, best first, and how many were left out.

        A layout also listed with more replicas and no worse verdict says nothing new (the same shape
        on fewer GPUs), so it is left out, as is everything past ``limit``. ``limit=None``: all of them.
        """
        if limit is None:
            return list(self.candidates), 0
        shown: list[LayoutRow] = []
        hidden = 0
        for r in self.candidates:
            dup = any(
                s.tp == r.tp and s.pp == r.pp and s.dp > r.dp and s.status.severity <= r.status.severity for s in shown
            )
            if dup or len(shown) >= limit:
                hidden += 1
                continue
            shown.append(r)
        return shown, hidden

    def closest_refused(self, limit: int = 3) -> list[LayoutRow]:
        """Refused for memory (pool short, start-up check) but holding something: how far off they are."""
        short = [
            r
            for r in self.refused
            if r.predicted_kv_tokens_per_replica
            and min(r.predicted_kv_tokens_per_replica) > 0
            and (r.refused or "").startswith(("kv_pool", "balance"))
        ]
        short.sort(
            key=lambda r: (
                -sum(r.full_length_requests or (0,)),
                -sum(r.predicted_kv_tokens_per_replica or (0,)),
            )
        )
        return short[:limit]

    def find(self, tp: int, pp: int = 1, dp: int = 1) -> LayoutRow | None:
        for r in self.layouts:
            if (r.tp, r.pp, r.dp) == (tp, pp, dp):
                return r
        return None

    def to_json(self) -> dict[str, Any]:
        m = self.model
        return {
            "model": {
                "name": m.name,
                "source": m.source,
                "num_attention_heads": m.num_attention_heads,
                "num_key_value_heads": m.num_key_value_heads,
                "num_hidden_layers": m.num_hidden_layers,
            },
            "machine": {
                "source": self.machine.source,
                "gpus": len(self.machine.gpus),
                "models": self.machine.describe(),
                "gpus_considered": self.gpus_considered,
            },
            "engine": self.engine,
            "engine_version": self.engine_version,
            "max_model_len": self.max_model_len,
            "required": self.required,
            "assumed_need": (
                None
                if self.assumed_requests is None
                else {"full_length_requests_per_replica": self.assumed_requests, "text": self.assumed}
            ),
            "notes": list(self.notes),
            "measurement": self.measurement.to_json() if self.measurement else None,
            "layouts": [r.to_json() for r in self.layouts],
        }


def per_replica_text(values: Sequence[int] | None) -> str:
    """``407,488 x8`` when the replicas are alike, else each one: ``60,545 / 48,112``; ``?`` unknown."""
    if not values:
        return "?"
    if len(set(values)) == 1:
        return f"{values[0]:,}" + (f" x{len(values)}" if len(values) > 1 else "")
    return " / ".join(f"{v:,}" for v in values)


def requests_text(values: Sequence[int] | None) -> str:
    """Full-length requests the whole layout holds at once: ``14 (7 x2)`` with replicas."""
    if not values:
        return "?"
    if len(values) == 1:
        return str(values[0])
    alike = f"{values[0]} x{len(values)}" if len(set(values)) == 1 else " / ".join(map(str, values))
    return f"{sum(values)} ({alike})"


# -- evaluation of one layout -------------------------------------------------------------------


def _first_clause(text: str) -> str:
    """``32 attention heads do not divide by TP=3 (vLLM: ...)`` -> the part before the quote."""
    return text.split(" (", 1)[0].strip()


def _strip_name(message: str, name: str) -> str:
    prefix = f"{name}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def _shorten(text: str, limit: int = 150) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + " ..."


def _refusal(
    row_findings: Mapping[str, Finding],
    dep: Deployment,
    model: ModelSpec,
    demand: tuple[int | None, int | None] = (None, None),
) -> str | None:
    """Why the layout cannot serve (None when it can), in words that group well across DP sizes.

    ``demand`` is the users' (concurrency, kv_tokens) for the whole deployment, before the split
    over DP replicas, so that the reason reads the same for every DP size.
    """
    fails = [row_findings[c] for c in CHECK_ORDER if c in row_findings and row_findings[c].status is Status.FAIL]
    kv = row_findings.get("kv_pool")
    if not fails:
        # SGLang starts with a pool smaller than one request (warn); a plan cannot recommend it
        if kv is not None and kv.data.get("predicted_kv_tokens") is not None and kv.data.get("max_model_len"):
            tokens, max_len = kv.data["predicted_kv_tokens"], kv.data["max_model_len"]
            if tokens < max_len and (kv.data.get("max_concurrency") or 0) < 1:
                return f"kv_pool: {tokens:,} tokens of KV per replica, less than one {max_len:,}-token request"
        return None
    f = fails[0]
    d = f.data
    if f.check == "heads":
        from .rules.heads import tp_problems

        problems = tp_problems(model, dep.tp)
        if problems:
            return "heads: " + "; ".join(_first_clause(p) for p in problems[:2])
    if f.check == "links":
        kind = d.get("worst_link")
        if kind:
            return f"links: a TP group crosses {kind} ({describe_link(kind)}); keep TP inside a socket, PP across"
    if f.check == "kv_pool":
        tokens, max_len = d.get("predicted_kv_tokens"), d.get("max_model_len")
        conc = d.get("max_concurrency")
        w = d.get("weights_gib_per_rank")
        share = "each replica's share of the" if dep.dp > 1 else "the"
        users, total_tokens = demand
        if isinstance(tokens, int) and tokens <= 0:
            return f"kv_pool: {w} GiB of weights per GPU leave no room for a KV cache"
        if isinstance(tokens, int) and max_len and tokens < max_len and (conc is None or conc < 1):
            return f"kv_pool: {tokens:,} tokens of KV per replica, less than one {max_len:,}-token request"
        if isinstance(tokens, int) and dep.require.concurrency and users and conc is not None and max_len:
            need = dep.require.concurrency
            if conc < need or tokens < need * max_len:
                held = f"{conc:g}" if conc < need else f"just under {need}"  # 3.998 is rounded to 4.0
                return (
                    f"kv_pool: {held} full {max_len:,}-token requests per replica ({tokens:,} tokens), "
                    f"short of {share} {users} needed"
                )
        if isinstance(tokens, int) and dep.require.kv_tokens and total_tokens and tokens < dep.require.kv_tokens:
            return f"kv_pool: {tokens:,} tokens of KV per replica, short of {share} {total_tokens:,} needed"
    if f.check == "balance":
        headroom, margin = d.get("headroom_gib"), d.get("vllm_min_margin_gib")
        if dep.engine == "sglang" and isinstance(headroom, (int, float)) and headroom < 0:
            return (
                f"balance: SGLang's TP memory-balance check (min free >= 0.9 x max free) fails by "
                f"{-headroom:.2f} GiB ({d.get('min_free_gib')} against {d.get('max_free_gib')} GiB free)"
            )
        if dep.engine == "vllm" and isinstance(margin, (int, float)) and margin < 0:
            return (
                f"balance: vLLM's start-up check fails: a GPU has {-margin:.2f} GiB less free than "
                f"gpu_memory_utilization x total"
            )
    return f"{f.check}: " + _shorten(_strip_name(f.message, dep.name))


def _full_requests(
    tokens: Sequence[int] | None, max_len: int | None, max_concurrency: float | None
) -> tuple[int, ...] | None:
    """Whole ``max_model_len`` requests each replica holds at once.

    The memory model's ``max_concurrency`` (the smallest replica's, sliding-window aware like vLLM's
    "Maximum concurrency" line) scales with the pool, so other replicas get it in proportion.
    """
    if not tokens or not max_len:
        return None
    lo = min(tokens)
    if max_concurrency is not None and lo > 0:
        per_token = float(max_concurrency) / lo
        return tuple(int(t * per_token + 1e-9) if t > 0 else 0 for t in tokens)
    return tuple(int(t) // int(max_len) if t > 0 else 0 for t in tokens)


def _row(
    dep: Deployment,
    machine: Machine,
    model: ModelSpec,
    findings: dict[str, Finding],
    demand: tuple[int | None, int | None] = (None, None),
) -> LayoutRow:
    kv = findings.get("kv_pool")
    d = dict(kv.data) if kv else {}
    tokens = d.get("predicted_kv_tokens_per_replica")
    max_len = d.get("max_model_len") or dep.max_model_len
    full = _full_requests(tokens, max_len, d.get("max_concurrency"))
    verdicts = {c: findings[c].status for c in CHECK_ORDER if c in findings}
    return LayoutRow(
        tensor_parallel_size=dep.tp,
        pipeline_parallel_size=dep.pp,
        data_parallel_size=dep.dp,
        gpus=tuple(int(g) for g in (dep.gpus or ())),
        weights_gib_per_gpu=d.get("weights_gib_per_rank"),
        kv_bytes_per_token_per_rank=d.get("kv_bytes_per_token_per_rank"),
        predicted_kv_tokens_per_replica=tuple(tokens) if tokens else None,
        full_length_requests=full,
        max_model_len=max_len,
        status=worst(verdicts.values()),
        verdicts=verdicts,
        why="",
        refused=_refusal(findings, dep, model, demand),
        findings=findings,
        deployment=dep,
        shared_experts=dep.engine == "vllm" and model.is_moe and dep.dp > 1,
    )


# -- ranking ------------------------------------------------------------------------------------


def _crosses_hosts(row: LayoutRow, machine: Machine) -> bool:
    for rep in row.replicas:
        hosts = {machine.gpu(g).host for stage in rep for g in stage}
        if len(hosts - {None}) > 1:
            return True
    return False


def _links_severity(row: LayoutRow) -> int:
    """0 when no TP group leaves NVLink (or TP=1), 1 when a TP group runs over PCIe or unknown links."""
    st = row.verdicts.get("links")
    return 1 if st is Status.WARN else 0


def _room(row: LayoutRow, assumed: int | None) -> int:
    """Full-length requests per replica, capped at the assumed need: equal for every layout that meets it.

    With a need the user gave (``assumed`` None) every candidate meets it (the others are refused);
    a pool nobody could predict (memory unknown) is ranked as if it met the need.
    """
    if assumed is None or row.full_length_requests is None:
        return assumed or 0
    return min(min(row.full_length_requests), assumed)


def _rank_key(row: LayoutRow, machine: Machine, assumed: int | None = None) -> tuple:
    """Sort key, best first; the rules in the module docstring, in order."""
    pcie_tp = _links_severity(row)
    return (
        _crosses_hosts(row, machine),
        -_room(row, assumed),
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


def _tp_link(row: LayoutRow) -> str | None:
    f = row.findings.get("links")
    return f.data.get("worst_link") if f and row.tp > 1 else None


def _boundary_links(row: LayoutRow) -> list[str]:
    f = row.findings.get("links")
    return list(f.data.get("pp_boundary_links") or []) if f else []


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class _WhyContext:
    """What every "why" line is measured against (so that the lines agree with the order)."""

    min_world: int  # fewest GPUs per replica among the layouts that meet the need
    max_replicas: int  # replicas that many GPUs per replica make on the GPUs planned on
    smaller: str | None  # why fewer GPUs per replica do not do
    total_gpus: int
    assumed: int | None  # full-length requests per replica assumed (None: the user gave the need)


def _why_context(
    candidates: Sequence[LayoutRow], refused: Sequence[LayoutRow], n: int, assumed: int | None
) -> _WhyContext:
    fit = [r for r in candidates if _room(r, assumed) == (assumed or 0)] or list(candidates)
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
                kv = single.findings.get("kv_pool")
                default = kv.data.get("memory_fraction") if kv else None
                smaller = (
                    f"one GPU: refused at {_default_fraction_name(single.deployment.engine)} {default:g}, "
                    f"serves with --memory-fraction {single.fits_with_memory_fraction:.2f}"
                )
            elif single is not None and single.refused:
                smaller = f"one GPU: {single.refused.split(': ', 1)[-1]}"
    max_replicas = n // min_world if min_world else 0
    return _WhyContext(min_world, max_replicas, smaller, n, assumed)


def _why(row: LayoutRow, ctx: _WhyContext, fuller_above: bool = False) -> str:
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
                f"vLLM shards the {row.findings['heads'].data.get('num_experts', '')} experts over all "
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
            kind = _tp_link(row)
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
            heads = row.findings.get("heads")
            layers = heads.data.get("pp_layer_split") if heads else None
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


# -- measurement hint ---------------------------------------------------------------------------


def _machine_ref(machine: Machine) -> str:
    src = machine.source or "auto"
    for prefix in ("snapshot:", "topo:"):
        if src.startswith(prefix):
            from pathlib import Path

            path = Path(src[len(prefix) :])
            try:  # the snippet is saved as ./gpulayout.yaml: a path under the working directory reads best
                return str(path.relative_to(Path.cwd()))
            except ValueError:
                return str(path)
    if src in ("nvml", "live", "probe", "unknown"):
        return "auto"
    return src


def _yaml_scalar(value: object) -> str:
    import json

    if isinstance(value, str):
        safe = value and all(ch.isalnum() or ch in "._/-:" for ch in value) and value[0].isalpha()
        return value if safe else json.dumps(value)
    return json.dumps(value)


def _measurement(
    candidates: Sequence[LayoutRow],
    machine: Machine,
    model_ref: str,
    engine: str,
    engine_version: str | None,
    max_model_len: int | None,
    memory_fraction: float | None,
    kv_cache_dtype: str,
    concurrency: int | None,
    kv_tokens: int | None,
) -> Measurement | None:
    """TP over PCIe against PP at the same replica size: the rules cannot tell which serves faster."""
    if not candidates:
        return None
    top = candidates[0]
    if top.group_size == 1:
        return None
    same = [
        r for r in candidates if (r.independent_replicas, r.group_size) == (top.independent_replicas, top.group_size)
    ]
    tp_pcie = next((r for r in same if r.tp > 1 and _links_severity(r) == 1), None)
    pp_only = next((r for r in same if r.tp == 1 and r.pp > 1), None)
    if tp_pcie is None or pp_only is None:
        return None
    kind = _tp_link(tp_pcie) or "PCIe"
    text = (
        f"The rules cannot decide {pp_only.layout} against {tp_pcie.layout} here: TP all-reduces after "
        f"every layer over {kind} ({describe_link(kind) if kind != 'PCIe' else 'PCIe'}), while PP sends "
        f"less but leaves stages idle at low concurrency. Which serves faster depends on your batch "
        f"sizes: measure both. The startup check launches each one briefly and reports the KV pool it "
        f"really allocates; run your load test against both before choosing."
    )
    lines = [
        "version: 1",
        f"machine: {_yaml_scalar(_machine_ref(machine))}",
        "defaults:",
        f"  engine: {engine}",
        f"  model: {_yaml_scalar(model_ref)}",
    ]
    if engine_version:
        lines.append(f"  engine_version: {_yaml_scalar(engine_version)}")
    if max_model_len:
        lines.append(f"  max_model_len: {max_model_len}")
    if memory_fraction is not None:
        lines.append(f"  memory_fraction: {memory_fraction:g}")
    if kv_cache_dtype != "auto":
        lines.append(f"  kv_cache_dtype: {_yaml_scalar(kv_cache_dtype)}")
    lines.append("  launch: {enabled: true}")
    lines.append("deployments:")
    for r in (pp_only, tp_pcie):
        lines.append(f"  {r.name}:")
        lines.append(f"    tensor_parallel_size: {r.tp}")
        lines.append(f"    pipeline_parallel_size: {r.pp}")
        if r.dp > 1:
            lines.append(f"    data_parallel_size: {r.dp}")
        lines.append(f"    gpus: [{', '.join(map(str, r.gpus))}]")
        req = per_replica(r.dp, concurrency, kv_tokens)
        items = []
        if req.kv_tokens:
            items.append(f"kv_tokens: {req.kv_tokens}")
        if req.concurrency:
            items.append(f"concurrency: {req.concurrency}")
        if r is tp_pcie and kind != "PCIe":
            items.append(f"tp_links: [{kind}]")
        if items:
            lines.append("    require: {" + ", ".join(items) + "}")
    return Measurement(text, (pp_only.layout, tp_pcie.layout), "\n".join(lines) + "\n")


# -- the plan -----------------------------------------------------------------------------------


def model_reference(model: ModelSpec) -> str:
    """What a manifest's ``model:`` would say for this spec (catalog id or config path)."""
    src = model.source
    if src.startswith("catalog:"):
        return src[len("catalog:") :]
    if src.endswith("config.json"):
        from pathlib import Path

        return str(Path(src).parent)
    return src or model.name


def per_replica(dp: int, concurrency: int | None, kv_tokens: int | None) -> Require:
    """The users' demand as each DP replica's requirement: replicas share the load evenly (round robin)."""
    return Require(
        kv_tokens=-(-kv_tokens // dp) if kv_tokens else None,
        concurrency=-(-concurrency // dp) if concurrency else None,
    )


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
    from ``model.source``).
    """
    from .evaluate import evaluate

    n_visible = len(machine.gpus)
    if n_visible == 0:
        raise InputError("the machine shows no GPUs: nothing to plan", where=machine.source)
    if max_gpus is not None and max_gpus > n_visible:
        raise InputError(
            f"--gpus {max_gpus}: the machine shows only {n_visible} GPUs ({machine.describe()})",
            where=machine.source,
        )
    n = max_gpus or n_visible
    ref = model_ref or model_reference(model)
    link_table = _Links(machine)

    rows: list[LayoutRow] = []
    for tp, pp, dp in layouts(n):
        gpus = choose_gpus(machine, tp, pp, dp, link_table)
        if gpus is None:  # pragma: no cover - layouts() never asks for more than n
            continue
        dep = Deployment(
            name=f"tp{tp}-pp{pp}-dp{dp}",
            model=ref,
            engine=engine,
            tensor_parallel_size=tp,
            pipeline_parallel_size=pp,
            data_parallel_size=dp,
            gpus=gpus,
            max_model_len=max_model_len,
            memory_fraction=memory_fraction,
            kv_cache_dtype=kv_cache_dtype,
            engine_version=engine_version,
            require=per_replica(dp, concurrency, kv_tokens),
        )
        rows.append(_row(dep, machine, model, evaluate(dep, machine, model), (concurrency, kv_tokens)))

    assumed = None if (concurrency or kv_tokens) else ASSUMED_REQUESTS_PER_REPLICA
    if memory_fraction is None:
        rows = [_with_fraction_hint(r, machine, model, (concurrency, kv_tokens), assumed) for r in rows]
    candidates = sorted((r for r in rows if r.refused is None), key=lambda r: _rank_key(r, machine, assumed))
    refused = sorted((r for r in rows if r.refused is not None), key=lambda r: (r.group_size, r.tp, r.pp, r.dp))
    ctx = _why_context(candidates, refused, n, assumed)
    whys = []
    for i, r in enumerate(candidates):
        fuller = any(
            o.independent_replicas == r.independent_replicas
            and o.gpu_count > r.gpu_count
            and _room(o, assumed) == _room(r, assumed)
            for o in candidates[:i]
        )
        whys.append(_replace_why(r, _why(r, ctx, fuller)))
    ranked = tuple(whys) + tuple(_replace_why(r, f"refused: {r.refused}") for r in refused)

    notes: list[str] = []
    if not machine.memory_known:
        notes.append(
            f"GPU memory is unknown from {machine.source}: the KV pool could NOT be predicted and the "
            f"memory balance NOT checked, so no layout is known to fit (exit code 1). Layouts are "
            f"ranked on heads and links alone, as if each fits. Probe the host (--machine auto) or use "
            f"a snapshot/preset with memory for a verdict."
        )
    hinted = [r for r in refused if r.fits_with_memory_fraction is not None]
    if hinted:
        # with the fraction it meets the need: it would rank by replicas, then GPUs used
        first = min(hinted, key=lambda r: (_crosses_hosts(r, machine), -r.independent_replicas, -r.gpu_count))
        best = candidates[0] if candidates else None
        better = best is None or (
            (_crosses_hosts(first, machine), -(assumed or 0), -first.independent_replicas, -first.gpu_count)
            < (_crosses_hosts(best, machine), -_room(best, assumed), -best.independent_replicas, -best.gpu_count)
        )
        if better:
            kv = first.findings.get("kv_pool")
            default = kv.data.get("memory_fraction") if kv else None
            notes.append(
                f"{first.layout} is refused only by {_default_fraction_name(engine)} {default:g}: with "
                f"--memory-fraction {first.fits_with_memory_fraction:.2f} it serves and would rank "
                f"{'first' if best is None else f'above {best.layout}'} (re-run with it; the startup check confirms)"
            )
    if not candidates:
        notes.append(
            "no layout on these GPUs serves this model with what was asked: see the refusals "
            "(quantize, use kv_cache_dtype: fp8, shorten max_model_len, or add GPUs)"
        )
    if engine == "vllm" and model.is_moe:
        notes.append(
            f"{model.name} is a mixture of experts: vLLM shards the experts over all TP x DP ranks, so "
            f"its DP ranks are one group (DP attention), not independent copies. For independent "
            f"copies run one engine per GPU group."
        )
    if max_gpus is not None and max_gpus < n_visible:
        notes.append(f"planned on {max_gpus} of the {n_visible} visible GPUs (--gpus)")
    notes.extend(machine.notes)

    first_kv = next((r.findings.get("kv_pool") for r in rows if r.findings.get("kv_pool")), None)
    resolved_len = max_model_len
    if resolved_len is None and first_kv is not None:
        resolved_len = first_kv.data.get("max_model_len")
    required = None
    if kv_tokens or concurrency:
        parts = []
        if concurrency:
            parts.append(
                f"{concurrency} full-length requests at once"
                + (f" ({concurrency * resolved_len:,} tokens of KV)" if resolved_len else "")
            )
        if kv_tokens:
            parts.append(f"{kv_tokens:,} tokens of KV")
        required = " and ".join(parts) + " in all, shared evenly by the DP replicas"
    if not candidates and rows:
        closest = _closest(rows)
        if closest is not None:
            notes.append(closest)
    measurement = _measurement(
        candidates,
        machine,
        ref,
        engine,
        engine_version,
        max_model_len,
        memory_fraction,
        kv_cache_dtype,
        concurrency,
        kv_tokens,
    )
    return Plan(
        model=model,
        machine=machine,
        engine=engine,
        engine_version=engine_version,
        max_model_len=resolved_len,
        required=required,
        layouts=ranked,
        notes=tuple(notes),
        measurement=measurement,
        gpus_considered=n,
        assumed_requests=assumed,
    )


def _default_fraction_name(engine: str) -> str:
    return "SGLang's default mem_fraction_static" if engine == "sglang" else "vLLM's default gpu_memory_utilization"


def _fraction_that_fits(
    dep: Deployment,
    machine: Machine,
    model: ModelSpec,
    demand: tuple[int | None, int | None],
    default: float,
    assumed: int | None,
) -> float | None:
    """The smallest memory fraction, in hundredths above ``default`` up to ``FRACTION_CAP``, with which
    every check passes and each replica holds the need (the assumed one too); None when even the cap
    does not.

    The pool grows with the fraction, so the search halves the range, and every fraction it returns
    was evaluated with all the checks. vLLM's start-up check (free memory >= fraction x total)
    tightens as the fraction grows: a layout that fails it at the cap gets no suggestion, which errs
    towards saying nothing rather than suggesting a fraction the engine would refuse.
    """
    from dataclasses import replace

    from .evaluate import evaluate

    def serves(hundredths: int) -> bool:
        d = replace(dep, memory_fraction=hundredths / 100)
        row = _row(d, machine, model, evaluate(d, machine, model), demand)
        return row.refused is None and _room(row, assumed) == (assumed or 0)

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
    demand: tuple[int | None, int | None],
    assumed: int | None,
) -> LayoutRow:
    """A layout refused for its pool at the engine's default memory fraction: if a higher fraction
    serves, say so with the number (the weights are not what refuses it then)."""
    kv = row.findings.get("kv_pool")
    dep = row.deployment
    if dep is None or kv is None or not (row.refused or "").startswith("kv_pool"):
        return row
    default = kv.data.get("memory_fraction")
    if kv.data.get("memory_fraction_source") == "memory_fraction" or not isinstance(default, (int, float)):
        return row
    fits = _fraction_that_fits(dep, machine, model, demand, float(default), assumed)
    if fits is None:
        return row
    from dataclasses import replace

    name = f"{_default_fraction_name(dep.engine)} {default:g}"
    detail = (row.refused or "").split(": ", 1)[-1]
    if "leave no room for a KV cache" in detail:
        w = kv.data.get("weights_gib_per_rank")
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
    sized = [r for r in rows if r.full_length_requests and r.refused and r.refused.startswith("kv_pool")]
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


def _replace_why(row: LayoutRow, why: str) -> LayoutRow:
    from dataclasses import replace

    return replace(row, why=why)


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
