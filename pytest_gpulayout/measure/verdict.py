"""The verdict: which layout to choose, and only when the 95 % confidence intervals say so.

The deciding figure is the goodput under the SLO when every deployment measured has one, else
output tokens/s, at the highest concurrency they all ran. The best and the runner-up (by the mean
over windows) are compared through the interval of their ratio (``stats.ratio_ci``): when it
excludes 1, "choose X: 1.34x the output tokens/s of Y (95 % CI 1.21-1.47) at P99 ITL 41 ms against
58 ms"; else "no measurable difference at this load: pick on memory (see kv_pool)". A deployment
measured at clocks more than 15 % below the fastest one's is named in the verdict, never compared
silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_gpulayout.measure.result import Window
from pytest_gpulayout.measure.stats import Interval, ratio_ci

FIGURE_WORDS = {"goodput_rps": "goodput (requests/s within the SLO)", "output_tokens_per_s": "output tokens/s"}


@dataclass(frozen=True)
class Verdict:
    choose: str | None
    text: str
    figure: str
    concurrency: int | None
    ratio: Interval | None = None
    runner_up: str | None = None
    decided: bool = False

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"choose": self.choose, "text": self.text, "figure": self.figure,
                                  "concurrency": self.concurrency}
        if self.ratio is not None:
            out["ratio"] = {"mean": round(self.ratio.mean, 3), "ci95": [round(self.ratio.low, 3),
                                                                        round(self.ratio.high, 3)]}
            out["against"] = self.runner_up
        return out


def deciding_figure(with_slo: Mapping[str, bool]) -> str:
    return "goodput_rps" if with_slo and all(with_slo.values()) else "output_tokens_per_s"


def common_concurrency(windows: Mapping[str, Sequence[Window]]) -> int | None:
    sets = [{w.concurrency for w in ws} for ws in windows.values() if ws]
    if not sets:
        return None
    common = set.intersection(*sets)
    return max(common) if common else None


def samples(windows: Sequence[Window], figure: str, concurrency: int) -> list[float]:
    return [w.figure(figure) for w in windows if w.concurrency == concurrency and w.completed > 0]


def _p99_itl(windows: Sequence[Window], concurrency: int) -> float | None:
    xs = [w.itl_ms.p99 for w in windows if w.concurrency == concurrency and w.itl_ms.p99 is not None]
    return sum(xs) / len(xs) if xs else None


def decide(windows: Mapping[str, Sequence[Window]], figure: str, unmatched: Mapping[str, str] | None = None) -> Verdict:
    """The verdict over the deployments' windows (those with none are not candidates)."""
    conc = common_concurrency(windows)
    measured = {n: ws for n, ws in windows.items() if ws}
    if conc is None or len(measured) < 2:
        only = next(iter(measured), None)
        text = ("nothing measured: no verdict" if only is None
                else f"only {only} was measured: nothing to compare it with")
        return Verdict(None, text, figure, conc)
    per = {n: samples(ws, figure, conc) for n, ws in measured.items()}
    per = {n: s for n, s in per.items() if s}
    if len(per) < 2:
        return Verdict(None, "fewer than two deployments completed requests: no verdict", figure, conc)
    ranked = sorted(per, key=lambda n: sum(per[n]) / len(per[n]), reverse=True)
    best, second = ranked[0], ranked[1]
    ci = ratio_ci(per[best], per[second])
    words = FIGURE_WORDS.get(figure, figure)
    flags = "; ".join(f"{n}: {why}" for n, why in (unmatched or {}).items() if n in (best, second))
    if ci.low > 1.0:
        itl_best, itl_second = _p99_itl(measured[best], conc), _p99_itl(measured[second], conc)
        at = (f" at P99 ITL {itl_best:.0f} ms against {itl_second:.0f} ms"
              if itl_best is not None and itl_second is not None else "")
        text = (f"choose {best}: {ci.mean:.2f}x the {words} of {second} (95 % CI {ci.low:.2f}-{ci.high:.2f}, "
                f"{ci.n} windows each){at}, at concurrency {conc}")
        if flags:
            text += f". Clocks not matched, so read this with care: {flags}"
        return Verdict(best, text, figure, conc, ci, second, True)
    text = (f"no measurable difference at this load (concurrency {conc}: {best} {ci.mean:.2f}x the {words} of "
            f"{second}, 95 % CI {ci.low:.2f}-{ci.high:.2f}): pick on memory (see kv_pool)")
    if flags:
        text += f". Clocks not matched: {flags}"
    return Verdict(None, text, figure, conc, ci, second, False)
