"""The confidence intervals the verdict rests on: Student's t over the windows' figures.

A window is one independent run of the load generator; its figure (goodput or output tokens/s) is
one sample. The 95 % interval of a mean is ``mean +- t(0.975, n-1) * s / sqrt(n)``; the interval of
the ratio of two means is taken on the log scale (delta method, Welch-Satterthwaite degrees of
freedom), where it is symmetric: ``exp(log(a/b) +- t * sqrt(s_a^2/(n_a a^2) + s_b^2/(n_b b^2)))``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: t(0.975, df) for df = 1..30; beyond, 1.96 is close enough (t(0.975, 30) = 2.042)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)


def t975(df: float) -> float:
    if df < 1:
        return math.inf
    i = int(math.floor(df))
    return _T975[i - 1] if i <= len(_T975) else 1.96


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high


def mean_ci(samples: Sequence[float]) -> Interval:
    n = len(samples)
    if n == 0:
        return Interval(0.0, -math.inf, math.inf, 0)
    m = statistics.fmean(samples)
    if n == 1:
        return Interval(m, -math.inf, math.inf, 1)
    half = t975(n - 1) * statistics.stdev(samples) / math.sqrt(n)
    return Interval(m, m - half, m + half, n)


def ratio_ci(a: Sequence[float], b: Sequence[float]) -> Interval:
    """95 % interval of mean(a) / mean(b) (both positive); infinite with fewer than 2 samples each."""
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    if ma <= 0 or mb <= 0:
        return Interval(math.inf if mb <= 0 < ma else 0.0 if ma <= 0 < mb else 1.0, 0.0, math.inf,
                        min(len(a), len(b)))
    r = ma / mb
    if len(a) < 2 or len(b) < 2:
        return Interval(r, 0.0, math.inf, min(len(a), len(b)))
    va = statistics.variance(a) / (len(a) * ma * ma)
    vb = statistics.variance(b) / (len(b) * mb * mb)
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(r, r, r, min(len(a), len(b)))
    df = (va + vb) ** 2 / ((va * va) / (len(a) - 1) + (vb * vb) / (len(b) - 1))
    half = t975(df) * se
    return Interval(r, r * math.exp(-half), r * math.exp(half), min(len(a), len(b)))


def separated(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether the 95 % interval of mean(a)/mean(b) excludes 1: a measurable difference."""
    ci = ratio_ci(a, b)
    return ci.low > 1.0 or ci.high < 1.0
