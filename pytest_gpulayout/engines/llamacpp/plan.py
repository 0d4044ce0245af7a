"""``gpulayout plan MODEL.gguf --engine llamacpp``: llama.cpp's split modes and ratios, ranked.

Candidates: ``split_mode`` layer with llama.cpp's own split (free memory), an even split, the integer
ratios up to 4:1 either way and the fitting split of ``memory/llamacpp.py``; ``row`` and ``tensor`` at
the split that fits; ``none`` on each GPU alone. Each is judged by the same five checks
``gpulayout check`` runs (``rules/llamacpp.py``), so a plan row and a check agree.

Ranking: refused rows (a failing check) last; then fewer warnings; then fewer layers left on the CPU;
then ``layer`` before ``tensor`` before ``row`` (llama.cpp's docs/multi-gpu.md: layer is the default and
the most compatible, row is deprecated); then the largest smallest headroom (the most memory left on
the tightest GPU).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gpulayout.deployment import Deployment, Require
from pytest_gpulayout.engines.llamacpp.flags import FIT_TARGET_MIB, LlamaCppFlags, format_split
from pytest_gpulayout.engines.llamacpp.memory import fitting_split
from pytest_gpulayout.findings import Finding, Status, worst
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.gguf import GgufSpec

_MODE_ORDER = {"layer": 0, "tensor": 1, "row": 2, "none": 3}


@dataclass(frozen=True)
class LlamaCppRow:
    flags: LlamaCppFlags
    gpus: tuple[int, ...]
    findings: dict[str, Finding] = field(default_factory=dict)

    @property
    def status(self) -> Status:
        return worst(f.status for f in self.findings.values())

    @property
    def label(self) -> str:
        f = self.flags
        if f.mode == "none":
            return f"none (GPU{self.gpus[f.main_gpu or 0]})"
        split = format_split(f.tensor_split) if f.tensor_split else "by free memory"
        return f"{f.mode} {split}"

    @property
    def refused_by(self) -> str | None:
        for name, f in self.findings.items():
            if f.status is Status.FAIL:
                return name
        return None

    def key(self) -> tuple[Any, ...]:
        warns = sum(1 for f in self.findings.values() if f.status is Status.WARN)
        bal = self.findings["balance"].data
        headroom = bal.get("headroom_gib")
        return (self.refused_by is not None, warns, bal.get("cpu_layers") or 0, _MODE_ORDER[self.flags.mode],
                -(headroom if isinstance(headroom, (int, float)) else -1e9))

    def why(self) -> str:
        bad = [f for f in self.findings.values() if f.status in (Status.FAIL, Status.WARN)]
        if bad:
            return bad[0].text
        return self.findings["balance"].text


def plan_llamacpp(model: GgufSpec, machine: Machine, *, ctx_size: int | None, parallel: int | None,
                  cache_type_k: str | None = None, cache_type_v: str | None = None,
                  engine_version: str | None = None,
                  judge: Callable[[Deployment], Mapping[str, Finding]]) -> list[LlamaCppRow]:
    """The split modes and ratios worth trying, each judged by ``judge`` (the runner's static checks, which
    ``check`` runs: ``runner.evaluate``), for the llama.cpp build ``engine_version`` (``b11434``; None:
    unknown, as in a manifest without ``engine_version``)."""
    gpus = machine.indices
    base = LlamaCppFlags(ctx_size=ctx_size, parallel=parallel, cache_type_k=cache_type_k, cache_type_v=cache_type_v)
    free = [machine.gpu(g).memory_free_mib for g in gpus]
    cands: list[LlamaCppFlags] = []

    def add(**kw: Any) -> None:
        f = LlamaCppFlags(**{**base.__dict__, **kw})
        if f not in cands:
            cands.append(f)

    add()
    fit = None
    if len(gpus) > 1:
        if all(x is not None for x in free):
            fit = fitting_split(model, base, gpus, [x or 0 for x in free], FIT_TARGET_MIB)
        add(tensor_split=(1.0,) * len(gpus))
        if len(gpus) == 2:
            for a, b in itertools.product(range(1, 5), repeat=2):
                if (a == 1 or b == 1) and (a, b) != (1, 1):
                    add(tensor_split=(float(a), float(b)))
        split = tuple(float(p) for p in fit) if fit else None
        if split:
            add(tensor_split=split)
        for mode in ("tensor", "row"):
            add(split_mode=mode, tensor_split=split)
    for i in range(len(gpus)):
        add(split_mode="none", main_gpu=i)
    rows = []
    for f in cands:
        dep = Deployment(name="plan", model=model.source, engine="llamacpp", gpus=tuple(gpus), llamacpp=f,
                         require=Require(), base_dir=Path.cwd(), engine_version=engine_version)
        rows.append(LlamaCppRow(f, tuple(gpus), dict(judge(dep))))
    rows.sort(key=LlamaCppRow.key)
    return rows


def plan_json(model: GgufSpec, machine: Machine, rows: list[LlamaCppRow]) -> dict[str, Any]:
    out = []
    rank = 0
    for r in rows:
        refused = r.refused_by
        if refused is None:
            rank += 1
        kv = r.findings["kv_pool"].data
        out.append({
            "rank": None if refused else rank, "split_mode": r.flags.mode,
            "tensor_split": list(r.flags.tensor_split) if r.flags.tensor_split else None,
            "main_gpu": r.flags.main_gpu, "tensor_parallel_size": 1, "pipeline_parallel_size": 1,
            "data_parallel_size": 1, "gpus": list(r.gpus) if r.flags.mode != "none"
            else [r.gpus[r.flags.main_gpu or 0]], "status": r.status.value,
            "predicted_kv_tokens_per_replica": kv.get("predicted_kv_tokens_per_replica"),
            "independent_replicas": 1, "full_length_requests": kv.get("full_length_requests"),
            "refused_by": refused, "why": r.why(),
            "devices": r.findings["balance"].data.get("devices"),
            "checks": {n: f.to_json() for n, f in r.findings.items()},
        })
    return {"model": {"name": model.name, "source": model.source, "architecture": model.arch,
                      "layers": model.num_hidden_layers, "weights_gib": round(model.file_bytes / 2**30, 2)},
            "machine": {"source": machine.source, "gpus": len(machine.gpus), "models": machine.describe()},
            "engine": "llamacpp", "layouts": out}


def format_llamacpp_plan(model: GgufSpec, machine: Machine, rows: list[LlamaCppRow]) -> str:
    lines = [f"model: {model.name} ({model.source}): {model.arch}, {model.num_hidden_layers} layers, "
             f"{model.file_bytes / 2**30:.2f} GiB of weights",
             f"machine: {machine.source}: {machine.describe()}", "engine: llama.cpp", ""]
    table = [["#", "split", "GPU use (weights+KV+compute GiB / free GiB)", "CPU layers", "status", "checks"]]
    rank = 0
    for r in rows:
        if r.refused_by is None:
            rank += 1
        devs = r.findings["balance"].data.get("devices") or []
        use = ", ".join(f"GPU{d['gpu']} {d['total_mib'] / 1024:.1f}/{(d['free_mib'] or 0) / 1024:.1f}"
                        for d in devs if d["total_mib"])
        bad = ", ".join(f"{n} {f.status.value}" for n, f in r.findings.items()
                        if f.status in (Status.WARN, Status.FAIL)) or "all pass"
        table.append([str(rank) if r.refused_by is None else "-", r.label, use,
                      str(r.findings["balance"].data.get("cpu_layers", 0)),
                      "refused" if r.refused_by else r.status.value, bad])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines += ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in table]
    lines += ["", "why:"]
    rank = 0
    for r in rows:
        mark = "-"
        if r.refused_by is None:
            rank += 1
            mark = str(rank)
        lines.append(f"  {mark:>2}  {r.label}: {r.why()}")
    return "\n".join(lines) + "\n"
