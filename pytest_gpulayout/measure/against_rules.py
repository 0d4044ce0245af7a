"""The measured verdict beside the rules' ranking (``gpulayout plan --measure``): where they agree, where
the measurement overturns the rules' first choice, and where it cannot tell (then the rules' ranking,
made on memory and links, stands)."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_gpulayout.measure.record import Measurement
from pytest_gpulayout.measure.stats import ratio_ci
from pytest_gpulayout.measure.verdict import FIGURE_WORDS


def inversions(rules_order: Sequence[str], m: Measurement) -> list[str]:
    """Each pair the rules rank one way and the measurement, measurably, the other."""
    v = m.verdict
    if v.load is None:
        return []
    points = {n: dm.points().get(v.load) for n, dm in m.deployments.items()}
    words = FIGURE_WORDS.get(v.figure, v.figure)
    out = []
    for i, above in enumerate(rules_order):
        for below in rules_order[i + 1:]:
            a, b = points.get(above), points.get(below)
            if a is None or b is None:
                continue
            r = ratio_ci(b.samples(v.figure), a.samples(v.figure))
            if r.low > 1.0:
                out.append(f"the rules rank {above} above {below}; measured, {below} serves {r.mean:.2f}x its {words} "
                           f"(95 % CI {r.low:.2f}-{r.high:.2f}): measurably ahead")
    return out


def against_rules(rules_order: Sequence[str], m: Measurement) -> list[str]:
    """Both rankings, whether the measurement agrees with the rules' first, and each pair it measurably
    orders the other way."""
    v = m.verdict
    measured = [r.name for r in v.ranking]
    ranked = [n for n in rules_order if n in m.deployments]
    rules = ", ".join(f"{i}. {n}" for i, n in enumerate(ranked, start=1))
    if not measured or v.load is None or not ranked:
        return [f"rules: {rules}; measured: no verdict ({v.text})"]
    lines = [f"rules: {rules}; measured at {v.load.words}: " + ", ".join(f"{r.rank}. {r.name}" for r in v.ranking)]
    first = ranked[0]
    words = FIGURE_WORDS.get(v.figure, v.figure)
    if not v.decided:
        lines.append(f"the measurement cannot tell {v.ranking[0].name} from {v.runner_up} at {v.load.words}: the "
                     f"rules' first stands ({first}, on memory and links)")
        return lines + inversions(ranked, m)
    if v.choose == first:
        assert v.ratio is not None
        lines.append(f"the measurement agrees with the rules: {first}, their first, serves {v.ratio.mean:.2f}x the "
                     f"{words} of {v.runner_up} (95 % CI {v.ratio.low:.2f}-{v.ratio.high:.2f})")
        return lines + inversions(ranked, m)
    assert v.choose is not None
    points = {n: dm.points().get(v.load) for n, dm in m.deployments.items()}
    best, theirs = points.get(v.choose), points.get(first)
    if best is None or theirs is None:
        lines.append(f"the measurement disagrees with the rules: they rank {first} first, the measurement chooses "
                     f"{v.choose}, and {first} was not measured at {v.load.words}")
        return lines + inversions(ranked, m)
    r = ratio_ci(best.samples(v.figure), theirs.samples(v.figure))
    how = "measurably" if r.low > 1.0 else "though not measurably"
    lines.append(f"the measurement disagrees with the rules: they rank {first} first; measured at {v.load.words}, "
                 f"{v.choose} serves {r.mean:.2f}x its {words} (95 % CI {r.low:.2f}-{r.high:.2f}, {how}): choose "
                 f"{v.choose} for this load, if its memory (the plan's rows) holds your need")
    return lines + [x for x in inversions(ranked, m) if not x.startswith(f"the rules rank {first} above {v.choose};")]
