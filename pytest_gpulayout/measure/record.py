"""What a measurement holds, and its JSON (``gpulayout measure --json``, README.md "gpulayout measure"):
per deployment its launches, windows and figures at each load; over all of them the verdict, the
order the launches ran in and why the measurement stopped."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.measure import clocks as clk
from pytest_gpulayout.measure import metrics as met
from pytest_gpulayout.measure.figures import Point, points_of
from pytest_gpulayout.measure.preemption import preemption_note
from pytest_gpulayout.measure.result import Window
from pytest_gpulayout.measure.schedule import Stopped, StopReason
from pytest_gpulayout.measure.verdict import Verdict
from pytest_gpulayout.workload import Load, MeasureSpec


@dataclass(frozen=True)
class LaunchRecord:
    """One launch of a deployment: its place in the order, how long it took, how it ended."""

    number: int                 # 0-based, of this deployment
    position: int               # 0-based, in the whole measurement's order
    seconds: float
    windows: int
    log: str | None
    stopped_by: str
    cut: tuple[str, ...] = ()   # the windows the budget left out

    def as_dict(self) -> dict[str, Any]:
        return {"launch": self.number, "position": self.position, "seconds": round(self.seconds, 1),
                "windows": self.windows, "log": self.log, "stopped_by": self.stopped_by, "cut": list(self.cut)}


@dataclass
class DeploymentMeasure:
    """What one deployment's launches and windows gave."""

    deployment: Deployment
    spec: MeasureSpec
    windows: list[Window] = field(default_factory=list)
    calibrations: list[Window] = field(default_factory=list)   # the runs that sized windows to duration_s
    rates: dict[Load, float] = field(default_factory=dict)    # requests/s served, per load, for duration_s
    metrics: list[met.EngineMetrics] = field(default_factory=list)
    clocks: list[clk.Clocks | None] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    preempted: dict[Load, float] = field(default_factory=dict)  # /metrics' preemptions per load
    predicted_kv_tokens: tuple[int, ...] | None = None          # kv_pool's prediction, per replica
    launches: list[LaunchRecord] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def status(self) -> str:
        return "fail" if self.errors or not self.windows else "pass"

    def points(self) -> dict[Load, Point]:
        return points_of(self.windows)

    def preemption_notes(self) -> list[str]:
        notes = (preemption_note(self.spec, ld, n, self.predicted_kv_tokens) for ld, n in self.preempted.items())
        return [n for n in notes if n]

    def merged_clocks(self) -> clk.Clocks | None:
        return clk.merge(self.clocks)

    def to_json(self, load: Load | None, figure: str = "output_tokens_per_s",
                unmatched: str | None = None) -> dict[str, Any]:
        """Its figures at ``load`` (the verdict's; else its highest), each load's, each launch's and window's."""
        points = self.points()
        point = points.get(load) if load is not None else None
        if point is None and points:
            point = max(points.values(), key=lambda p: (p.load.axis == "concurrency", p.load.x))
        here = point.as_dict(figure) if point is not None else None
        merged = met.merge(self.metrics)
        c = self.merged_clocks()
        empty = {"p50": None, "p90": None, "p99": None}
        keys = ("output_tokens_per_s", "output_tokens_per_s_ci95", "output_tokens_per_s_launches", "requests_per_s",
                "goodput_rps", "goodput_rps_ci95", "max_itl_goodput_rps", "slo_attainment", "delivery")
        return {
            "status": self.status,
            "engine": self.deployment.engine,
            "layout": self.deployment.layout,
            **(point.load.as_dict() if point is not None else dict.fromkeys(("load", "concurrency", "request_rate",
                                                                            "burstiness"))),
            "figure": figure,
            **{k: (here[k] if here is not None else None) for k in keys},
            **{k: (here[k] if here is not None else dict(empty)) for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")},
            "requests": here["requests"] if here is not None else {"completed": 0, "failed": 0},
            "slo": _slo(self.spec),
            "points": [p.as_dict(figure) for p in points.values()],
            "launches": [r.as_dict() for r in self.launches],
            "windows": [window_json(w) for w in self.windows],
            "calibrations": [window_json(w) for w in self.calibrations],
            "clocks": c.as_dict() if c is not None else None,
            "clocks_matched": unmatched is None,
            "clocks_note": unmatched,
            "engine_metrics": merged.as_dict() if merged is not None else None,
            "errors": list(self.errors),
            "notes": list(dict.fromkeys([*self.notes, *(w.note for w in self.windows if w.note),
                                         *(w.failure for w in self.windows if w.failure and w.completed),
                                         *self.preemption_notes()])),
            "predicted_kv_tokens_per_replica": list(self.predicted_kv_tokens) if self.predicted_kv_tokens else None,
            "seconds": round(self.seconds, 1),
        }


def _slo(spec: MeasureSpec) -> dict[str, Any] | None:
    s = spec.slo
    if not s.set:
        return None
    return {"ttft_ms": s.ttft_ms, "tpot_ms": s.tpot_ms, "e2e_ms": s.e2e_ms, "max_itl_ms": s.max_itl_ms,
            "attainment": s.attainment, "goodput_arg": s.goodput_arg()}


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def window_json(w: Window) -> dict[str, Any]:
    return {**w.load.as_dict(), "launch": w.launch, "duration_s": round(w.duration_s, 3), "completed": w.completed,
            "failed": w.failed, "output_tokens_per_s": round(w.output_tokens_per_s, 3),
            "requests_per_s": round(w.requests_per_s, 3), "ttft_ms": w.ttft_ms.as_dict(),
            "tpot_ms": w.tpot_ms.as_dict(), "itl_ms": w.itl_ms.as_dict(), "e2e_ms": w.e2e_ms.as_dict(),
            "good": w.good, "goodput_rps": _r(w.goodput_rps), "max_itl_goodput_rps": _r(w.max_itl_goodput_rps),
            "result": w.result_path, "command": w.command,
            "generator_output_tokens_per_s": w.generator.get("output_throughput"),
            "generator_goodput_rps": w.generator.get("request_goodput"), "note": w.note}


@dataclass
class Measurement:
    deployments: dict[str, DeploymentMeasure]
    verdict: Verdict
    unmatched: dict[str, str]
    seconds: float
    order: list[str] = field(default_factory=list)     # the deployment of each launch, in the order run
    stopped: Stopped = field(default_factory=lambda: Stopped(StopReason.DECIDED, ""))
    sweep_csv: str | None = None                       # vllm bench sweep's layout of the windows

    @property
    def status(self) -> str:
        if any(d.status == "fail" for d in self.deployments.values()):
            return "fail"
        return "warn" if self.unmatched else "pass"

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "verdict": self.verdict.as_dict(),
                "deployments": {n: d.to_json(self.verdict.load, self.verdict.figure, self.unmatched.get(n))
                                for n, d in self.deployments.items()},
                "order": list(self.order), "stopped": self.stopped.as_dict(),
                "seconds": round(self.seconds, 1), "load_generator": "vllm bench serve",
                "sweep_csv": self.sweep_csv}
