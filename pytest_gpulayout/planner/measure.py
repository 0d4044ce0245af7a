"""The measurement hint: where the rules cannot decide between TP over PCIe and PP, say so and
write the manifest that measures both.

It is the one place the planner writes YAML (a ``gpulayout.yaml`` the user saves and runs with the
startup check), so the quoting and the manifest's shape are kept here, away from the ranking that
decides when the hint applies.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pytest_gpulayout.machine.facts import Machine, describe_link
from pytest_gpulayout.planner.gpus import LinkCosts
from pytest_gpulayout.planner.ranking import links_severity, tp_fills_domain, tp_link
from pytest_gpulayout.planner.request import PlanRequest
from pytest_gpulayout.planner.rows import LayoutRow, Measurement


def _machine_ref(machine: Machine) -> str:
    src = machine.source or "auto"
    for prefix in ("snapshot:", "topo:"):
        if src.startswith(prefix):
            path = Path(src[len(prefix) :])
            try:  # the snippet is saved as ./gpulayout.yaml: a path under the working directory reads best
                return str(path.relative_to(Path.cwd()))
            except ValueError:
                return str(path)
    if src in ("nvml", "live", "probe", "unknown"):
        return "auto"
    return src


def _yaml_scalar(value: object) -> str:
    if isinstance(value, str):
        safe = value and all(ch.isalnum() or ch in "._/-:" for ch in value) and value[0].isalpha()
        return value if safe else json.dumps(value)
    return json.dumps(value)


def measurement(candidates: Sequence[LayoutRow], machine: Machine, request: PlanRequest,
                links: LinkCosts | None = None) -> Measurement | None:
    """TP over PCIe against PP at the same replica size: the rules cannot tell which serves faster.

    On a two-socket box the TP layout measured is "TP inside each socket, PP across" where the
    replica size allows it (the layout such servers are built for), else the best TP over PCIe.
    """
    if not candidates:
        return None
    top = candidates[0]
    if top.group_size == 1:
        return None
    same = [
        r for r in candidates if (r.independent_replicas, r.group_size) == (top.independent_replicas, top.group_size)
    ]
    pcie = [r for r in same if r.tp > 1 and links_severity(r) == 1 and not r.slow_link]
    socket = [r for r in pcie if r.pp > 1 and tp_fills_domain(r, links or LinkCosts(machine))]
    tp_pcie = (socket or pcie)[0] if (socket or pcie) else None
    pp_only = next((r for r in same if r.tp == 1 and r.pp > 1), None)
    if tp_pcie is None or pp_only is None:
        return None
    kind = tp_link(tp_pcie) or "PCIe"
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
        f"  engine: {request.engine}",
        f"  model: {_yaml_scalar(request.model_ref)}",
    ]
    if request.engine_version:
        lines.append(f"  engine_version: {_yaml_scalar(request.engine_version)}")
    if request.max_model_len:
        lines.append(f"  max_model_len: {request.max_model_len}")
    if request.memory_fraction is not None:
        lines.append(f"  memory_fraction: {request.memory_fraction:g}")
    if request.kv_cache_dtype != "auto":
        lines.append(f"  kv_cache_dtype: {_yaml_scalar(request.kv_cache_dtype)}")
    lines.append("  launch: {enabled: true}")
    lines.append("deployments:")
    for r in (pp_only, tp_pcie):
        lines.append(f"  {r.name}:")
        lines.append(f"    tensor_parallel_size: {r.tp}")
        lines.append(f"    pipeline_parallel_size: {r.pp}")
        if r.dp > 1:
            lines.append(f"    data_parallel_size: {r.dp}")
        lines.append(f"    gpus: [{', '.join(map(str, r.gpus))}]")
        req = request.demand.per_replica(r.dp)
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


__all__ = ["measurement"]


# -- plan --measure: the layouts measured, split against copies ----------------------------------------

#: how many distinct layouts ``plan --measure`` measures by default
MEASURE_TOP = 3


def _kind(row: LayoutRow) -> str:
    """What the layout does with its GPUs: copies (DP), a tensor split, a pipeline split."""
    if row.dp > 1:
        return "copies"
    return "tensor" if row.pp == 1 else "pipeline"


def measured_layouts(candidates: Sequence[LayoutRow], top: int = MEASURE_TOP) -> tuple[LayoutRow, ...]:
    """The layouts ``plan --measure`` puts under one load, in the rules' order: on as many GPUs as the
    rules' first, the best-ranked of each kind (copies, a tensor split, a pipeline split) first, so a
    split is measured against copies wherever both fit, then the next distinct shapes by rank, ``top`` in
    all. Layouts one server cannot run (independent engines behind a balancer, several hosts) and those
    whose pool was not predicted are left out."""
    serving = [r for r in candidates if r.pool_predicted and not r.engines and r.hosts == 1]
    if not serving or top < 1:
        return ()
    gpus = serving[0].gpu_count
    same = [r for r in serving if r.gpu_count == gpus]
    distinct: dict[tuple[int, int, int, bool], LayoutRow] = {}
    for r in same:
        distinct.setdefault((r.tp, r.pp, r.dp, r.expert_parallel), r)
    rows = list(distinct.values())
    firsts: dict[str, LayoutRow] = {}
    for r in rows:
        firsts.setdefault(_kind(r), r)
    chosen = sorted(firsts.values(), key=rows.index)[:top]
    chosen += [r for r in rows if r not in chosen][: top - len(chosen)]
    return tuple(sorted(chosen, key=rows.index))


def manifest_machine(machine: Machine) -> str:
    """The machine as a manifest names it from anywhere: a snapshot's absolute path, a preset, or auto."""
    src = machine.source or "auto"
    for prefix in ("snapshot:", "topo:"):
        if src.startswith(prefix):
            return str(Path(src[len(prefix):]).resolve())
    return src if src.startswith(("preset:", "ray")) else "auto"


def measuring_manifest(rows: Sequence[LayoutRow], machine: Machine, *, launch: dict[str, object] | None = None,
                       load: dict[str, object] | None = None) -> dict[str, object]:
    """The ``gpulayout.yaml`` (as data) that measures ``rows`` under one load: each row a deployment of its
    TP/PP/DP sizes on its GPUs, ``launch`` (a manifest ``launch:`` block) and ``load`` (a ``measure:``
    block) applied to every one of them."""
    first = rows[0].deployment
    assert first is not None
    model = first.model
    if Path(model).exists():  # a local folder or config: absolute, so the manifest means it from anywhere
        model = str(Path(model).resolve())
    defaults: dict[str, object] = {"engine": first.engine, "model": model}
    for key, value in (("engine_version", first.engine_version), ("max_model_len", first.max_model_len),
                       ("memory_fraction", first.memory_fraction)):
        if value is not None:
            defaults[key] = value
    if first.kv_cache_dtype != "auto":
        defaults["kv_cache_dtype"] = first.kv_cache_dtype
    defaults["launch"] = {"enabled": True, **(launch or {})}
    if load:
        defaults["measure"] = dict(load)
    deployments: dict[str, object] = {}
    for r in rows:
        dep: dict[str, object] = {"tensor_parallel_size": r.tp, "pipeline_parallel_size": r.pp,
                                  "data_parallel_size": r.dp, "gpus": list(r.gpus)}
        if r.expert_parallel:
            dep["enable_expert_parallel"] = True
        deployments[r.name] = dep
    return {"version": 1, "machine": manifest_machine(machine), "defaults": defaults, "deployments": deployments}


__all__ += ["MEASURE_TOP", "manifest_machine", "measured_layouts", "measuring_manifest"]
