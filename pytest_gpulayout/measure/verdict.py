"""The verdict: every layout ranked, which to choose only where the 95 % intervals say so, and what
the rest of the measurement shows (the curves, where they cross, the SLO each holds, the latency).

The deciding figure is the goodput under the SLO (vLLM's rule: ``result.good_requests``) when every
deployment measured has one, else output tokens/s. The deciding load is the highest load every
deployment was measured at (the concurrency sweep's, else the request-rate sweep's). There every
layout is ranked by its mean over launches, each next to the one below it through the interval of
their ratio over launches (``stats.ratio_ci``): "choose X: 1.34x the output tokens/s of Y (95 % CI
1.21-1.47, 2 launches each) at concurrency 8" when the best and the runner-up's interval excludes 1,
else "no measurable difference ... pick on memory (see kv_pool)". The lines under it say, over each
sweep, which layout leads at each load and where that changes; with an SLO, up to which load each
layout holds it (``attainment`` of its requests within it); and the latency percentiles of every layout
at the deciding load, with or without an SLO. A deployment measured at clocks more than 15 % below the
fastest one's is named, never compared silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_gpulayout.measure.figures import Point
from pytest_gpulayout.measure.stats import Interval, ratio_ci
from pytest_gpulayout.workload import Load, Slo

FIGURE_WORDS = {"goodput_rps": "goodput (requests/s within the SLO)", "output_tokens_per_s": "output tokens/s",
                "max_itl_goodput_rps": "goodput (requests/s with every gap within max_itl_ms)"}
FIGURE_UNITS = {"goodput_rps": "req/s", "output_tokens_per_s": "tok/s", "max_itl_goodput_rps": "req/s"}


@dataclass(frozen=True)
class Ranked:
    """One layout's place at the deciding load, and how it compares with the next one down."""

    name: str
    rank: int
    interval: Interval
    vs_next: Interval | None = None   # the ratio of this one's mean to the next one's, over launches

    @property
    def above_next(self) -> bool | None:
        """Measurably above the next one (None for the last)."""
        return None if self.vs_next is None else self.vs_next.low > 1.0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rank": self.rank, "deployment": self.name, "mean": round(self.interval.mean, 3),
                               "ci95": _ci(self.interval), "launches": self.interval.n}
        if self.vs_next is not None:
            out["vs_next"] = {"ratio": round(self.vs_next.mean, 3), "ci95": _ci(self.vs_next),
                              "measurable": self.above_next}
        return out


@dataclass(frozen=True)
class Verdict:
    choose: str | None
    text: str
    figure: str
    load: Load | None
    ratio: Interval | None = None
    runner_up: str | None = None
    decided: bool = False
    ranking: tuple[Ranked, ...] = ()
    lines: tuple[str, ...] = field(default_factory=tuple)

    @property
    def concurrency(self) -> int | None:
        return self.load.concurrency if self.load is not None else None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"choose": self.choose, "text": self.text, "figure": self.figure,
                                  "decided": self.decided,
                                  **(self.load.as_dict() if self.load is not None else
                                     {"load": None, "concurrency": None, "request_rate": None}),
                                  "ranking": [r.as_dict() for r in self.ranking], "lines": list(self.lines)}
        if self.ratio is not None:
            out["ratio"] = {"mean": round(self.ratio.mean, 3), "ci95": [round(self.ratio.low, 3),
                                                                        round(self.ratio.high, 3)]}
            out["against"] = self.runner_up
        return out


def deciding_figure(slos: Mapping[str, Slo]) -> str:
    """Goodput (vLLM's rule) when every deployment bounds TTFT, TPOT or E2E; the every-gap goodput when
    each bounds only ``max_itl_ms``; else output tokens/s."""
    if slos and all(s.goodput_set for s in slos.values()):
        return "goodput_rps"
    if slos and all(s.max_itl_ms is not None for s in slos.values()):
        return "max_itl_goodput_rps"
    return "output_tokens_per_s"


def deciding_load(points: Mapping[str, Mapping[Load, Point]]) -> Load | None:
    """The highest load every deployment served at: on the concurrency sweep where there is one."""
    sets = [{load for load, p in ps.items() if p.served} for ps in points.values()]
    common = set.intersection(*sets) if sets else set()
    if not common:
        return None
    closed = [ld for ld in common if ld.axis == "concurrency"]
    return max(closed or common, key=lambda ld: ld.x)


def _x(load: Load) -> str:
    return f"{load.x:g} req/s" if load.axis == "request_rate" else f"{load.x:g}"


def _axis_words(axis: str) -> str:
    return "request rate" if axis == "request_rate" else "concurrency"


def rank(points: Mapping[str, Point], figure: str) -> tuple[Ranked, ...]:
    """Every layout at one load, best first, each against the next one down."""
    order = sorted(points, key=lambda n: points[n].mean(figure) or 0.0, reverse=True)
    out = []
    for i, name in enumerate(order):
        nxt = order[i + 1] if i + 1 < len(order) else None
        vs = ratio_ci(points[name].samples(figure), points[nxt].samples(figure)) if nxt else None
        out.append(Ranked(name, i + 1, points[name].interval(figure), vs))
    return tuple(out)


def ranking_line(ranked: Sequence[Ranked], figure: str, load: Load, points: Mapping[str, Point]) -> str:
    """Every layout at ``load``: its mean over launches, each launch's figure (a handful say more than a
    wide interval), its 95 % interval, and how far ahead of the next one it is."""
    unit = FIGURE_UNITS.get(figure, "")
    parts = []
    for i, r in enumerate(ranked):
        samples = points[r.name].samples(figure)
        each = f"launches {', '.join(f'{x:.3g}' for x in samples)}" if len(samples) <= 5 else f"{len(samples)} launches"
        ci = (f"; 95 % CI {max(r.interval.low, 0.0):.3g}-{r.interval.high:.3g}" if r.interval.n > 1
              else "; one launch: no interval")
        part = f"{r.rank}. {r.name} {r.interval.mean:.3g} {unit} ({each}{ci})"
        if i:
            prev = ranked[i - 1]
            assert prev.vs_next is not None
            how = "measurably" if prev.above_next else "not measurably"
            if prev.interval.n > 1 and r.interval.n > 1:
                part += (f", {prev.name} {prev.vs_next.mean:.2f}x it (95 % CI {prev.vs_next.low:.2f}-"
                         f"{prev.vs_next.high:.2f}: {how} ahead)")
            else:
                part += f", {prev.name} {prev.vs_next.mean:.2f}x it"
        parts.append(part)
    return f"ranked at {load.words} by {FIGURE_WORDS.get(figure, figure)}, mean of launches: " + "; ".join(parts)


def crossover_line(points: Mapping[str, Mapping[Load, Point]], figure: str, axis: str) -> str | None:
    """Which layout measurably leads at each load of one sweep, and where that changes (None: fewer than
    two loads). A load where the best is not measurably ahead of the next leads nobody: no curve is
    said to cross through it."""
    common = sorted(set.intersection(*[{ld for ld, p in ps.items() if p.served and ld.axis == axis}
                                       for ps in points.values()]), key=lambda ld: ld.x)
    if len(common) < 2:
        return None
    leaders: list[tuple[Load, str, bool]] = []
    for load in common:
        ranked = rank({n: ps[load] for n, ps in points.items()}, figure)
        leaders.append((load, ranked[0].name, bool(ranked[0].above_next)))
    words = FIGURE_WORDS.get(figure, figure)
    sure = [(ld, name) for ld, name, measurable in leaders if measurable]
    unsure = [_x(ld) for ld, _, measurable in leaders if not measurable]
    tail = f"; no measurable difference at {', '.join(unsure)}" if unsure else ""
    head = f"over {_axis_words(axis)} {', '.join(_x(ld) for ld in common)}"
    if not sure:
        return f"{head}: no layout serves measurably more {words} at any load measured"
    groups: list[list[tuple[Load, str]]] = []
    for item in sure:
        if groups and groups[-1][-1][1] == item[1]:
            groups[-1].append(item)
        else:
            groups.append([item])
    if len(groups) == 1:
        return (f"{head}: {groups[0][0][1]} serves measurably the most {words} at "
                f"{', '.join(_x(ld) for ld, _ in groups[0])}{tail}")
    spans = [f"{g[0][1]} at {', '.join(_x(ld) for ld, _ in g)}" for g in groups]
    cross = "; ".join(f"between {_x(a[-1][0])} and {_x(b[0][0])}" for a, b in zip(groups, groups[1:], strict=False))
    return f"{head}: the most {words} comes measurably from {', '.join(spans)}: the curves cross {cross}{tail}"


def held_up_to(curve: Sequence[tuple[float, float]], attainment: float) -> tuple[str, float]:
    """Up to which load a layout holds its SLO: ``("all", x_max)``, ``("none", x_min)`` or ``("up_to",
    x)``, ``x`` interpolated linearly between the last load that held it and the first that did not."""
    if curve[0][1] < attainment:
        return "none", curve[0][0]
    for (x0, a0), (x1, a1) in zip(curve, curve[1:], strict=False):
        if a1 < attainment:
            return "up_to", x0 + (a0 - attainment) / (a0 - a1) * (x1 - x0)
    return "all", curve[-1][0]


def slo_line(points: Mapping[str, Mapping[Load, Point]], slos: Mapping[str, Slo], axis: str) -> str | None:
    """"tp2 holds the SLO up to 3.1 req/s, dp2 up to 4.4" over one sweep (None: no SLO, or no load)."""
    parts = []
    interpolated = False
    first_slo: Slo | None = None
    for name, ps in points.items():
        slo = slos.get(name)
        curve = sorted((ld.x, p.attainment) for ld, p in ps.items() if ld.axis == axis and p.attainment is not None)
        if slo is None or not slo.goodput_set or not curve:
            continue
        first_slo = first_slo or slo
        kind, x = held_up_to([(a, float(b)) for a, b in curve], slo.attainment)
        unit = " req/s" if axis == "request_rate" else ""
        pre = "" if axis == "request_rate" else "concurrency "
        if kind == "all":
            parts.append(f"{name} at every load measured (up to {pre}{x:g}{unit})")
        elif kind == "none":
            parts.append(f"{name} at none (from {pre}{x:g}{unit}: {curve[0][1] * 100:.0f} % of requests met it)")
        else:
            parts.append(f"{name} up to {pre}{x:.2g}{unit}")
            interpolated = True
    if not parts or first_slo is None:
        return None
    return (f"holds the SLO ({first_slo.words()}, for {first_slo.attainment * 100:g} % of requests) over "
            f"{_axis_words(axis)}: " + ", ".join(parts) + (" (interpolated between the loads measured)"
                                                            if interpolated else ""))


def latency_line(points: Mapping[str, Point], load: Load) -> str:
    """Every layout's p99 TTFT, TPOT and E2E at ``load``, lowest first, every request pooled."""
    parts = []
    for label, name in (("TTFT", "ttft"), ("TPOT", "tpot"), ("E2E", "e2e")):
        vals = [(n, p.pooled(name).p99) for n, p in points.items()]
        known = sorted(((n, v) for n, v in vals if v is not None), key=lambda t: t[1])
        if known:
            parts.append(f"{label} p99 " + ", ".join(f"{n} {v:.0f} ms" for n, v in known))
    return f"latency at {load.words}, every request pooled: " + "; ".join(parts) if parts else \
        f"latency at {load.words}: no request completed"


def decide(points: Mapping[str, Mapping[Load, Point]], figure: str, unmatched: Mapping[str, str] | None = None,
           slos: Mapping[str, Slo] | None = None) -> Verdict:
    """The verdict over the deployments' points (those with none served are not candidates)."""
    measured = {n: ps for n, ps in points.items() if any(p.served for p in ps.values())}
    load = deciding_load(measured)
    if load is None or len(measured) < 2:
        only = next(iter(measured), None)
        text = ("nothing measured: no verdict" if only is None
                else f"only {only} was measured: nothing to compare it with" if len(measured) < 2
                else "the deployments share no load they were all measured at: no verdict")
        alone = (latency_line({only: measured[only][load]}, load),) if only is not None and load is not None else ()
        return Verdict(None, text, figure, load, lines=alone)
    at = {n: ps[load] for n, ps in measured.items()}
    ranked = rank(at, figure)
    best, second = ranked[0], ranked[1]
    assert best.vs_next is not None
    ci = best.vs_next
    words = FIGURE_WORDS.get(figure, figure)
    n = min(best.interval.n, second.interval.n)
    tp_best, tp_second = at[best.name].pooled("tpot").p99, at[second.name].pooled("tpot").p99
    context = (f"; TPOT p99 {tp_best:.0f} ms against {tp_second:.0f} ms"
               if tp_best is not None and tp_second is not None else "")
    flags = "; ".join(f"{name}: {why}" for name, why in (unmatched or {}).items() if name in at)
    if ci.low > 1.0:
        text = (f"choose {best.name}: {ci.mean:.2f}x the {words} of {second.name} (95 % CI {ci.low:.2f}-"
                f"{ci.high:.2f}, {n} launches each) at {load.words}{context}")
        if flags:
            text += f". Clocks not matched, so read this with care: {flags}"
    elif n < 2:
        text = (f"no measurable difference at {load.words}: {best.name} {ci.mean:.2f}x the {words} of "
                f"{second.name} from one launch each, which gives no interval (measure.launches: 2 or more for "
                f"one): pick on memory (see kv_pool)")
    else:
        text = (f"no measurable difference at {load.words}: {best.name} {ci.mean:.2f}x the {words} of "
                f"{second.name}, 95 % CI {ci.low:.2f}-{ci.high:.2f} over {n} launches each: pick on memory "
                f"(see kv_pool)")
        if flags:
            text += f". Clocks not matched: {flags}"
    lines = [ranking_line(ranked, figure, load, at)]
    for axis in ("concurrency", "request_rate"):
        line = crossover_line(measured, figure, axis)
        if line:
            lines.append(line)
        held = slo_line(measured, slos or {}, axis)
        if held:
            lines.append(held)
    lines.append(latency_line(at, load))
    for name, p in at.items():
        d = p.delivery
        if d is not None and d.bursty:
            lines.append(d.text(name, load))
    return Verdict(best.name if ci.low > 1.0 else None, text, figure, load, ci, second.name, ci.low > 1.0, ranked,
                   tuple(lines))


def _ci(ci: Interval) -> list[float] | None:
    return [round(ci.low, 3), round(ci.high, 3)] if ci.n > 1 and ci.high != float("inf") else None
