"""What the HTML report shows of each deployment, built from the checks' findings: the placement's
TP groups and, per GPU, the predicted weights, KV pool, activations and other tenants
(``GpuMemory``). Pure data; ``report/html.py`` draws it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_gpulayout.findings import Finding, Status, facts_of, present, verdict_of, worst
from pytest_gpulayout.machine.facts import GIB, Machine
from pytest_gpulayout.rules.kv_pool import KvPoolFacts
from pytest_gpulayout.rules.placement import PlacementFacts

if TYPE_CHECKING:  # annotations only: keep this module light to import
    from pytest_gpulayout.deployment import Deployment
    from pytest_gpulayout.model.spec import ModelSpec
    from pytest_gpulayout.planner.rows import Plan



@dataclass(frozen=True)
class GpuMemory:
    """Predicted use of one GPU by one deployment, in GiB.

    ``others`` is what is gone before the engine starts (other tenants plus the driver's own
    reservation: total - free as NVML reports it). ``free`` is what is left after the engine takes
    its memory fraction; ``over`` is by how much the parts exceed the card (the layout does not fit).
    """

    total: float
    weights: float
    kv: float
    activations: float
    others: float

    @property
    def used(self) -> float:
        return self.weights + self.kv + self.activations + self.others

    @property
    def free(self) -> float:
        return max(0.0, self.total - self.used)

    @property
    def over(self) -> float:
        return max(0.0, self.used - self.total)

    def part(self, key: str) -> float:
        return self.free if key == "free" else float(getattr(self, key))


@dataclass(frozen=True)
class DeploymentView:
    """What the report shows of one deployment.

    - ``name``: deployment name (or plan rank and layout);
    - ``engine``: ``vllm`` | ``sglang``;
    - ``layout``: ``TP=2 PP=1 DP=1``;
    - ``replicas``: ``replicas[d][s]`` = GPU indices of the TP group of stage ``s`` of DP replica ``d``
      (``Placement.replicas``; empty when the layout could not be placed);
    - ``findings``: check name -> ``Finding`` (static checks, plus ``startup`` when it ran);
    - ``memory``: GPU index -> predicted :class:`GpuMemory` (empty when memory is unknown);
    - ``model``: model name; ``note``: why ``memory`` is empty, if it is.
    """

    name: str
    engine: str
    layout: str
    replicas: tuple[tuple[tuple[int, ...], ...], ...]
    findings: Mapping[str, Finding]
    memory: Mapping[int, GpuMemory] = field(default_factory=dict)
    model: str = ""
    note: str = ""
    #: checks that did not run (a partial pytest run): the verdict is then at best ``incomplete``
    not_run: tuple[str, ...] = ()

    @property
    def status(self) -> Status:
        return worst(f.status for f in self.findings.values())

    @property
    def verdict(self) -> str:
        return verdict_of(self.status, bool(self.not_run))

    @property
    def tp_groups(self) -> list[tuple[int, ...]]:
        return [stage for rep in self.replicas for stage in rep]


# -- building views -----------------------------------------------------------------------------


def _replica_parts(kv_facts: KvPoolFacts) -> list[tuple[float, float, float]] | None:
    """Per DP replica ``(weights, kv budget, activation reserve)`` per rank in GiB, from the ``kv_pool``
    facts: the predictions themselves when the finding carries them (made in this process), else the
    JSON numbers (a finding rebuilt from an xdist worker's report or a saved JSON), which are the
    deployment's smallest replica's; None when no pool was predicted."""
    if kv_facts.predictions:
        return [(p.weights_bytes_per_rank / GIB, p.kv_budget_bytes_per_rank / GIB, p.activation_reserve_gib)
                for p in kv_facts.predictions]
    budget = present(kv_facts.kv_budget_gib_per_rank)
    reserve = present(kv_facts.activation_reserve_gib)
    if budget is None or reserve is None:
        return None
    return [(kv_facts.weights_gib_per_rank, budget, reserve)]


def memory_split(dep: Deployment, machine: Machine, model: ModelSpec,
                 findings: Mapping[str, Finding] | None = None) -> tuple[dict[int, GpuMemory], str]:
    """Per-GPU predicted memory of ``dep``, or ``({}, why not)``, drawn from the ``kv_pool`` and
    ``placement`` findings' facts (never recomputed: the report shows what the checks judged).

    Activations: an engine that keeps a reserve for them inside its memory fraction (vLLM's profile
    run) shows that reserve; one that reserves nothing inside it (SGLang keeps activations and CUDA
    graphs in the ``1 - mem_fraction_static`` slack) shows the free memory the weights and the pool
    leave.
    """
    found = findings or {}
    kv_facts = facts_of(found.get("kv_pool"), KvPoolFacts)
    where = facts_of(found.get("placement"), PlacementFacts)
    replicas = present(where.replicas) if where else None
    if not replicas:
        placed = found.get("placement")
        return {}, placed.message if placed is not None else "not placed"
    parts = _replica_parts(kv_facts) if kv_facts else None
    if not parts:
        pool = found.get("kv_pool")
        return {}, pool.message if pool is not None else "no pool prediction"
    out: dict[int, GpuMemory] = {}
    for d, stages in enumerate(replicas):
        weights, budget, reserve = parts[min(d, len(parts) - 1)]
        kv = max(0.0, budget)
        for g in (g for stage in stages for g in stage):
            gpu = machine.gpu(g)
            total = (gpu.memory_total_mib or 0) / 1024
            free = (gpu.memory_free_mib or 0) / 1024
            act = max(0.0, reserve) if reserve > 0 else max(0.0, free - weights - kv)
            out[g] = GpuMemory(total=total, weights=weights, kv=kv, activations=act, others=max(0.0, total - free))
    return out, ""


def deployment_view(
    dep: Deployment,
    machine: Machine,
    model: ModelSpec,
    findings: Mapping[str, Finding],
    *,
    name: str | None = None,
) -> DeploymentView:
    """A view of one checked deployment: its placement and predicted per-GPU memory, from its findings."""
    where = facts_of(findings.get("placement"), PlacementFacts)
    replicas = present(where.replicas) if where else None
    memory, note = memory_split(dep, machine, model, findings)
    return DeploymentView(
        name=name or dep.name,
        engine=dep.engine,
        layout=dep.layout,
        replicas=replicas or (),
        findings=dict(findings),
        memory=memory,
        model=getattr(model, "name", dep.model),  # a model that could not be read: its reference
        note=note,
    )


def views_from_report(report: Any) -> list[DeploymentView]:
    """Views for every deployment of an ``evaluate.Report`` (what ``check`` and the plugin hold)."""
    return [
        dataclasses.replace(deployment_view(r.deployment, report.machine, r.model, r.findings, name=name),
                            not_run=tuple(getattr(r, "not_run", ())), model=r.model_name)
        for name, r in report.results.items()
    ]


def plan_views(plan: Plan, top: int = 3) -> list[DeploymentView]:
    """Views of the ``top`` best candidate layouts of a plan (refused ones when there is no candidate)."""
    rows: list[Any] = []
    for r in plan.candidates:  # one of each TP x PP shape: copies, TP, PP side by side
        if len(rows) < top and all((r.tp, r.pp) != (s.tp, s.pp) for s in rows):
            rows.append(r)
    rows = rows or plan.closest_refused(top) or list(plan.refused[:top])
    views = []
    for row in rows:
        assert row.deployment is not None
        label = f"#{plan.layouts.index(row) + 1} {row.layout}" if row.refused is None else f"refused {row.layout}"
        views.append(deployment_view(row.deployment, plan.machine, plan.model, row.findings, name=label))
    return views
