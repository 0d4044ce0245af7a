"""The plan's data model: one ``LayoutRow`` per layout, the ``Measurement`` hint, and the ``Plan``.

These are what every consumer reads (``gpulayout plan``'s text and ``--json``, the HTML report,
tests), so they live apart from how they are computed: a renderer imports the shapes without the
GPU choice, the checks or the ranking rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_gpulayout.deployment import Deployment, ParallelShape
from pytest_gpulayout.findings import Finding, Status
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.placement import split_ranks


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
    #: full ``max_model_len`` requests each replica holds at once, exact (the engine's measure, not
    #: rounded down: 3.78, not 3)
    full_length_requests: tuple[float, ...] | None
    max_model_len: int | None
    status: Status
    verdicts: Mapping[str, Status]
    why: str
    refused: str | None = None
    #: the check that refuses the layout (``refused`` starts with its name)
    refused_by: str | None = None
    findings: Mapping[str, Finding] = field(default_factory=dict)
    deployment: Deployment | None = None
    #: vLLM shards a MoE model's experts over all TP x DP ranks: its DP ranks then exchange
    #: activations in every MoE layer and are one group, not independent copies
    shared_experts: bool = False
    #: refused only by the engine's default memory fraction: the smallest fraction (up to
    #: ``planner.FRACTION_CAP``) with which every check passes
    fits_with_memory_fraction: float | None = None
    #: one engine per replica behind a load balancer (a MoE model under vLLM, whose own DP makes one
    #: expert-parallel group): each engine is its own deployment on its replica's GPUs
    engines: bool = False
    #: the engine starts, but a TP (or MoE) group talks over this link (SYS: across CPU sockets; NET: hosts)
    slow_link: str | None = None
    #: how the layout meets the need it was ranked against: "with room", "narrowly" (under the
    #: kv_pool check's margin), "short" (fewer than the assumed requests), None (pool not predicted)
    need_met: str | None = None
    #: 1-based place among the candidates (None when refused); set by ``plan()``
    rank: int | None = None
    #: the same deployment on each of this many hosts behind a load balancer (1: one deployment);
    #: ``data_parallel_size`` counts the replicas of all of them
    hosts: int = 1
    #: hosts each of those deployments spans (PP across hosts); 1: each fits one host
    span: int = 1
    #: the MoE layers' experts spread whole over the engine's EP ranks (``enable_expert_parallel``), a
    #: layout of its own for MoE models; the JSON carries ``expert_parallel: true`` on these rows only
    expert_parallel: bool = False

    @property
    def layout(self) -> str:
        return self._layout + (" EP" if self.expert_parallel else "")

    @property
    def _layout(self) -> str:
        if self.engines:
            return f"TP={self.tp} PP={self.pp} x{self.dp} engines"
        if self.hosts > 1 and self.span > 1:
            return f"TP={self.tp} PP={self.pp} DP={self.dp // self.hosts} x{self.hosts} ({self.span} hosts each)"
        if self.hosts > 1:
            return f"TP={self.tp} PP={self.pp} DP={self.dp // self.hosts} x{self.hosts} hosts"
        return super().layout

    @property
    def refusal_detail(self) -> str:
        """The refusal without the check's name in front ("" for a candidate)."""
        if self.refused is None:
            return ""
        prefix = f"{self.refused_by}: "
        return self.refused[len(prefix):] if self.refused.startswith(prefix) else self.refused

    @property
    def pool_predicted(self) -> bool:
        """False when the KV pool could not be predicted (GPU memory unknown): nobody knows it fits."""
        return self.predicted_kv_tokens_per_replica is not None

    @property
    def group_size(self) -> int:
        """GPUs that talk to each other while serving: one replica, or all of them when experts are shared."""
        return self.gpu_count // self.hosts if self.shared_experts else self.world_size

    @property
    def independent_replicas(self) -> int:
        return self.hosts if self.shared_experts else self.dp

    @property
    def name(self) -> str:
        """Deployment name usable in a manifest and in test ids."""
        return self._name + ("-ep" if self.expert_parallel else "")

    @property
    def _name(self) -> str:
        if self.engines:
            return f"tp{self.tp}-pp{self.pp}-x{self.dp}"
        if self.hosts > 1:
            each = f"-{self.span}-hosts-each" if self.span > 1 else "-hosts"
            return f"tp{self.tp}-pp{self.pp}-dp{self.dp // self.hosts}-x{self.hosts}{each}"
        return f"tp{self.tp}-pp{self.pp}-dp{self.dp}"

    @property
    def replicas(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """``replicas[d][s]`` = TP group of stage ``s`` of replica ``d`` (same shape as ``Placement``)."""
        return split_ranks(self.gpus, self.tp, self.pp, self.dp).replicas

    def to_json(self) -> dict[str, Any]:
        out = self._json()
        if self.expert_parallel:
            out = {**{k: out[k] for k in ("rank", "layout")}, "expert_parallel": True, **out}
        return out

    def _json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "layout": self.layout,
            "tensor_parallel_size": self.tp,
            "pipeline_parallel_size": self.pp,
            "data_parallel_size": self.dp,
            "gpus": list(self.gpus),
            "status": self.status.value,
            "refused": self.refused,
            "refused_by": self.refused_by,
            "independent_engines": self.engines,
            "per_host_deployments": self.hosts if self.hosts > 1 else None,
            "hosts_per_deployment": self.span,
            "starts_slow": self.slow_link,
            "need_met": self.need_met,
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
    #: the need the layouts were ranked against, as given (whole deployment, before the DP split)
    concurrency: int | None = None
    kv_tokens: int | None = None
    #: a replica clearing its need by less than this share meets it only narrowly (kv_pool's margin)
    margin: float = 0.0
    #: refused layouts a note names (so the table shows them next to the closest refused ones)
    noted: tuple[str, ...] = ()

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
        return row.rank if row.rank is not None else self.candidates.index(row) + 1

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
        """Refused for memory (pool short, start-up check) but holding something, the most first
        (the first is the one the "most any layout holds" note names), then any refused layout a
        note names."""
        short = sorted((r for r in self.refused if holds_something(r)), key=closest_key)[:limit]
        short += [r for r in self.refused if r.layout in self.noted and r not in short]
        return short

    def find(self, tp: int, pp: int = 1, dp: int = 1, *, engines: bool = False, hosts: int = 1,
             ep: bool = False) -> LayoutRow | None:
        for r in self.layouts:
            if (r.tp, r.pp, r.dp, r.engines, r.hosts, r.expert_parallel) == (tp, pp, dp, engines, hosts, ep):
                return r
        return None

    def need_json(self) -> dict[str, Any]:
        """The need the layouts were ranked against: given, or assumed, and the margin."""
        return {
            "concurrency": self.concurrency,
            "kv_tokens": self.kv_tokens,
            "assumed_full_length_requests_per_replica": self.assumed_requests,
            "margin": self.margin,
            "text": self.required or self.assumed,
        }

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
            "need": self.need_json(),
            "assumed_need": (
                None
                if self.assumed_requests is None
                else {"full_length_requests_per_replica": self.assumed_requests, "text": self.assumed}
            ),
            "notes": list(self.notes),
            "measurement": self.measurement.to_json() if self.measurement else None,
            "layouts": [r.to_json() for r in self.layouts],
        }


def holds_something(row: LayoutRow) -> bool:
    """Refused for memory (pool short, start-up check) with a pool that holds some tokens."""
    t = row.predicted_kv_tokens_per_replica
    return bool(t) and min(t or (0,)) > 0 and row.refused_by in ("kv_pool", "balance")


def closest_key(row: LayoutRow) -> tuple[float, int, int]:
    """Order of the refused layouts closest to the need: the most requests held in all first."""
    return (
        -sum(row.full_length_requests or (0,)),
        -sum(row.predicted_kv_tokens_per_replica or (0,)),
        row.gpu_count,
    )


__all__ = ["LayoutRow", "Measurement", "Plan", "closest_key", "holds_something"]
