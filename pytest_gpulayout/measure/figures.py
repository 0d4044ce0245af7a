"""A deployment's figures at one load, over all its launches: the launch-level samples the intervals come
from (``stats.py``), the percentiles of every request pooled, the SLO attainment, and how its tokens
reached the client.

Percentiles are taken over all requests of all windows pooled, never averaged over windows (the mean of
per-window p99s of 64 requests each is not a p99 of anything). Throughput and goodput are per launch:
the mean of its windows, one sample per launch.

**Bursty delivery.** ``vllm bench serve`` times each streamed chunk as it arrives (``itl``, one gap per
chunk after the first). Where a server flushes several tokens at once (a DP front end relaying its
engines' outputs in batches, a busy CPU build), most gaps are near zero and a few are long: the median
ITL falls far under the request's own TPOT, the p99 far over it. Such ITL percentiles describe the
delivery, not the decoding; TPOT (``(e2e - ttft) / (output - 1)``) is what each request waited per token,
and it is what the verdict and the goodput read. A median gap under a quarter of the median TPOT is
called bursty here, and said.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gpulayout.measure.result import Percentiles, Window, percentile, percentiles_ms
from pytest_gpulayout.measure.stats import Interval, mean_ci
from pytest_gpulayout.workload import Load

#: a median inter-token gap under this share of the median TPOT: tokens arrive in bursts
BURST_RATIO = 0.25


@dataclass(frozen=True)
class Delivery:
    """How tokens reached the client at one load (milliseconds, every request pooled)."""

    median_itl_ms: float
    p99_itl_ms: float
    median_tpot_ms: float

    @property
    def bursty(self) -> bool:
        return self.median_tpot_ms > 0 and self.median_itl_ms < BURST_RATIO * self.median_tpot_ms

    def text(self, name: str, load: Load) -> str:
        return (f"{name}: tokens reached the client in bursts at {load.words} (median gap {self.median_itl_ms:.3g} ms, "
                f"p99 {self.p99_itl_ms:.3g} ms, against a median TPOT of {self.median_tpot_ms:.3g} ms): its ITL "
                f"figures describe the delivery, not the decoding; the verdict reads TPOT, and goodput counts "
                f"TPOT as vllm bench serve --goodput does")

    def as_dict(self) -> dict[str, Any]:
        return {"bursty": self.bursty, "median_itl_ms": round(self.median_itl_ms, 4),
                "p99_itl_ms": round(self.p99_itl_ms, 4), "median_tpot_ms": round(self.median_tpot_ms, 4)}


def delivery_of(windows: Sequence[Window]) -> Delivery | None:
    gaps = [g * 1000.0 for w in windows for g in w.requests.gaps]
    tpots = [t * 1000.0 for w in windows for t in w.requests.timed_tpots]
    if not gaps or not tpots:
        return None
    mid, p99 = percentile(gaps, 50), percentile(gaps, 99)
    assert mid is not None and p99 is not None
    return Delivery(mid, p99, statistics.median(tpots))


@dataclass(frozen=True)
class Point:
    """A deployment's windows at one load, from every launch."""

    load: Load
    windows: tuple[Window, ...]

    @property
    def served(self) -> tuple[Window, ...]:
        """The windows where at least one request completed."""
        return tuple(w for w in self.windows if w.completed > 0)

    @property
    def launches(self) -> tuple[int, ...]:
        return tuple(sorted({w.launch for w in self.served}))

    def samples(self, figure: str) -> list[float]:
        """One sample per launch: the mean of its windows' ``figure``."""
        out = []
        for n in self.launches:
            xs = [w.figure(figure) for w in self.served if w.launch == n]
            out.append(sum(xs) / len(xs))
        return out

    def interval(self, figure: str) -> Interval:
        return mean_ci(self.samples(figure))

    def mean(self, figure: str) -> float | None:
        xs = self.samples(figure)
        return sum(xs) / len(xs) if xs else None

    def pooled(self, name: str) -> Percentiles:
        """``ttft``, ``tpot``, ``itl`` or ``e2e`` percentiles over every request of every window."""
        if name == "ttft":
            values = [x for w in self.windows for x in w.requests.ttft_s]
        elif name == "tpot":
            values = [x for w in self.windows for x in w.requests.timed_tpots]
        elif name == "itl":
            values = [x for w in self.windows for x in w.requests.gaps]
        else:
            values = [x for w in self.windows for x in w.requests.e2e_s]
        return percentiles_ms(values)

    @property
    def completed(self) -> int:
        return sum(w.completed for w in self.windows)

    @property
    def failed(self) -> int:
        return sum(w.failed for w in self.windows)

    @property
    def attainment(self) -> float | None:
        """The share of every request sent (failed ones too) that met the SLO (vLLM's rule)."""
        goods = [w.good for w in self.windows]
        sent = self.completed + self.failed
        if not sent or any(g is None for g in goods):
            return None
        return sum(g for g in goods if g is not None) / sent

    @property
    def delivery(self) -> Delivery | None:
        return delivery_of(self.windows)

    def as_dict(self, figure: str) -> dict[str, Any]:
        ci = self.interval(figure)
        tps = self.interval("output_tokens_per_s")
        goodput = self.interval("goodput_rps") if self.windows and self.windows[0].good is not None else None
        every = (self.interval("max_itl_goodput_rps")
                 if self.windows and self.windows[0].good_max_itl is not None else None)
        delivery = self.delivery
        return {
            **self.load.as_dict(),
            "figure": figure, "mean": _r(ci.mean if ci.n else None), "ci95": _ci(ci),
            "output_tokens_per_s": _r(tps.mean if tps.n else None), "output_tokens_per_s_ci95": _ci(tps),
            "output_tokens_per_s_launches": [round(x, 3) for x in self.samples("output_tokens_per_s")],
            "requests_per_s": _r(self.mean("requests_per_s")),
            "goodput_rps": _r(goodput.mean) if goodput is not None and goodput.n else None,
            "goodput_rps_ci95": _ci(goodput) if goodput is not None else None,
            "max_itl_goodput_rps": _r(every.mean) if every is not None and every.n else None,
            "slo_attainment": _r(self.attainment, 4),
            "ttft_ms": self.pooled("ttft").as_dict(), "tpot_ms": self.pooled("tpot").as_dict(),
            "itl_ms": self.pooled("itl").as_dict(), "e2e_ms": self.pooled("e2e").as_dict(),
            "requests": {"completed": self.completed, "failed": self.failed},
            "launches": len(self.launches), "windows": len(self.windows),
            "delivery": delivery.as_dict() if delivery is not None else None,
        }


def points_of(windows: Sequence[Window]) -> dict[Load, Point]:
    """The windows grouped by load, in the order the loads were first measured."""
    by: dict[Load, list[Window]] = {}
    for w in windows:
        by.setdefault(w.load, []).append(w)
    return {load: Point(load, tuple(ws)) for load, ws in by.items()}


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(v, nd)


def _ci(ci: Interval | None) -> list[float] | None:
    """``[low, high]``; None where there is no interval (fewer than two launches)."""
    if ci is None or ci.n < 2:
        return None
    return [round(ci.low, 3), round(ci.high, 3)]
