"""The confidence intervals the verdict rests on: Student's t over the launches' figures.

Windows are nested in launches: the windows of one launch share its server process, its memory
layout, its compiled graphs and whatever ran beside it, so they are not independent samples of the
layout (the same TP=2 layout measured 793 and 898 output tokens/s in two launches, its windows agreeing
within each). A launch is the unit: its figure is the mean of its windows, and the interval comes from
the spread between launches (a two-level nested design read at its top level).

The 95 % interval of a mean is ``mean +- t(0.975, n-1) * s / sqrt(n)``; the interval of
the ratio of two means is taken on the log scale (delta method, Welch-Satterthwaite degrees of
freedom), where it is symmetric: ``exp(log(a/b) +- t * sqrt(s_a^2/(n_a a^2) + s_b^2/(n_b b^2)))``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes 6.4)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        even = m * (b - m) * x / ((a + m2 - 1) * (a + m2))
        odd = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))
        for num in (even, odd):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function with ``df`` (possibly fractional) degrees of freedom."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t975(df: float) -> float:
    """t(0.975, df): the half-width factor of a 95 % interval, for fractional ``df`` too (Welch's degrees
    of freedom between two launches each are between 1 and 2: rounding them down to 1 would make the
    factor 12.7 where it is about 5)."""
    if df <= 0:
        return math.inf
    lo, hi = 0.0, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < 0.975:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-9 * max(1.0, mid):
            break
    return (lo + hi) / 2.0


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
