"""Windows and points built by hand for the verdict, the statistics and the pages, without an engine:
each figure given is one launch (one window, or several: a list), with per-request times that give
the latencies asked for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_gpulayout.measure.figures import Point, points_of
from pytest_gpulayout.measure.result import Requests, Window, percentiles_ms
from pytest_gpulayout.workload import Load

C8 = Load(concurrency=8)


def window(tps: float, *, load: Load = C8, launch: int = 0, goodput: float | None = None, ttft_s: float = 0.1,
           tpot_s: float = 0.02, gap_s: float | None = None, requests: int = 10, out: int = 8) -> Window:
    """One window of ``requests`` alike requests, ``tps`` output tokens/s over 10 s; ``goodput`` requests/s
    met the SLO (None: no SLO); ``gap_s`` each inter-token gap (default: ``tpot_s``, steady streaming)."""
    gap = tpot_s if gap_s is None else gap_s
    reqs = Requests(ttft_s=(ttft_s,) * requests, tpot_s=(tpot_s,) * requests,
                    e2e_s=(ttft_s + tpot_s * (out - 1),) * requests, itl_s=((gap,) * (out - 1),) * requests,
                    output_lens=(out,) * requests, input_lens=(32,) * requests)
    good = None if goodput is None else round(goodput * 10.0)
    return Window(load=load, duration_s=10.0, completed=requests, failed=0, output_tokens=int(tps * 10),
                  output_tokens_per_s=tps, requests_per_s=requests / 10.0, ttft_ms=percentiles_ms(reqs.ttft_s),
                  tpot_ms=percentiles_ms(reqs.timed_tpots), itl_ms=percentiles_ms(reqs.gaps),
                  e2e_ms=percentiles_ms(reqs.e2e_s), good=good, good_max_itl=None, generator={}, requests=reqs,
                  launch=launch)


def launches(values: Sequence[float | Sequence[float]], **kw: object) -> list[Window]:
    """Windows for launches 0, 1, ...: each value one launch's window, or a list of its windows."""
    out = []
    for n, v in enumerate(values):
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            out.append(window(float(x), launch=n, **kw))  # type: ignore[arg-type]
    return out


def points(figures: Mapping[str, Sequence[float | Sequence[float]]], **kw: object) -> dict[str, dict[Load, Point]]:
    """Per deployment, its points (one load: ``kw['load']`` or concurrency 8) from its launches' figures."""
    return {name: points_of(launches(values, **kw)) for name, values in figures.items()}
