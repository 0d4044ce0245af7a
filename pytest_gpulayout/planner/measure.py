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
