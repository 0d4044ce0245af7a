"""The verdict over launches, without an engine: intervals from the spread between launches (windows
nested in them), percentiles from every request pooled, every layout ranked, the curves over a sweep
and where they cross, the SLO each layout holds up to, the latency said without an SLO, and the
interleaved order of the launches."""

from __future__ import annotations

import math
import statistics

import pytest
from measure_builders import launches, points, window

from pytest_gpulayout.measure.figures import points_of
from pytest_gpulayout.measure.result import percentile
from pytest_gpulayout.measure.schedule import interleaved, round_order
from pytest_gpulayout.measure.stats import mean_ci, ratio_ci, t975
from pytest_gpulayout.measure.verdict import decide, deciding_figure, held_up_to
from pytest_gpulayout.workload import Load, Slo

C8 = Load(concurrency=8)
TPS = "output_tokens_per_s"


def test_the_interval_comes_from_the_launches_not_the_windows() -> None:
    """Two launches whose windows agree within each but not between them: the interval is the launches'
    (two samples, wide), not the four windows' (tight, and wrong: they are not independent)."""
    p = points_of(launches([[793.0, 795.0], [898.0, 900.0]]))[C8]
    assert p.samples(TPS) == [794.0, 899.0]
    ci = p.interval(TPS)
    assert (ci.n, ci.mean) == (2, 846.5)
    half = t975(1) * statistics.stdev([794.0, 899.0]) / math.sqrt(2)
    assert (ci.low, ci.high) == pytest.approx((846.5 - half, 846.5 + half))
    windows = mean_ci([793.0, 795.0, 898.0, 900.0])
    assert ci.high - ci.low > 3 * (windows.high - windows.low)


def test_t_factor_for_fractional_degrees_of_freedom() -> None:
    """Welch's degrees of freedom between two launches each fall between 1 and 2."""
    assert t975(1) == pytest.approx(12.706, abs=1e-3) and t975(2) == pytest.approx(4.303, abs=1e-3)
    assert t975(30) == pytest.approx(2.042, abs=1e-3) and t975(1e6) == pytest.approx(1.960, abs=1e-3)
    assert 4.303 < t975(1.84) < 12.706


def test_percentiles_pool_every_request() -> None:
    """One launch slow at its first tokens: the pooled p99 is the p99 of all 20 requests, not the mean
    of the two windows' p99s."""
    ws = [window(100.0, launch=0, ttft_s=0.1), window(100.0, launch=1, ttft_s=0.9)]
    p = points_of(ws)[C8]
    pooled = [0.1 * 1000] * 10 + [0.9 * 1000] * 10
    assert p.pooled("ttft").p99 == pytest.approx(percentile(pooled, 99))
    assert p.pooled("ttft").p99 != pytest.approx((ws[0].ttft_ms.p99 + ws[1].ttft_ms.p99) / 2)  # type: ignore[operator]


def test_every_layout_is_ranked_each_against_the_next() -> None:
    """DP ahead of TP with intervals apart is chosen; PP, not measurably behind TP, is still ranked."""
    v = decide(points({"tp2": [623.0, 640.0], "pp2": [600.0, 650.0], "dp2": [762.0, 770.0]}), TPS)
    assert [r.name for r in v.ranking] == ["dp2", "tp2", "pp2"]
    assert v.choose == "dp2" and v.decided and v.runner_up == "tp2"
    assert v.text.startswith("choose dp2: 1.21x the output tokens/s of tp2 (95 % CI")
    assert "2 launches each) at concurrency 8" in v.text
    assert v.ranking[0].above_next is True and v.ranking[1].above_next is False
    line = v.lines[0]
    assert line.startswith("ranked at concurrency 8 by output tokens/s, mean of launches: 1. dp2 766 tok/s "
                           "(launches 762, 770; 95 % CI 715-817); 2. tp2 632 tok/s (launches 623, 640; 95 % CI")
    assert "3. pp2 625 tok/s (launches 600, 650; 95 % CI 307-943), tp2 1.01x it (95 % CI 0.71-1.44: not " \
           "measurably ahead)" in line
    assert "dp2 1.21x it (95 % CI" in line and "measurably ahead)" in line
    data = v.as_dict()
    assert [r["deployment"] for r in data["ranking"]] == ["dp2", "tp2", "pp2"]  # type: ignore[index]


def test_no_measurable_difference_says_so_with_its_interval() -> None:
    v = decide(points({"a": [100.0, 120.0], "b": [105.0, 112.0]}), TPS)
    assert v.choose is None and not v.decided
    assert v.text.startswith("no measurable difference at concurrency 8: a 1.01x the output tokens/s of b")
    assert "over 2 launches each: pick on memory (see kv_pool)" in v.text


def test_one_launch_each_has_no_interval_and_decides_nothing() -> None:
    v = decide(points({"a": [300.0], "b": [100.0]}), TPS)
    assert not v.decided and v.ratio is not None and math.isinf(v.ratio.high)
    assert "one launch: no interval" in v.lines[0]


def test_latency_is_reported_without_an_slo() -> None:
    """PP's first tokens come much sooner than TP's and DP's: said, though no SLO was given."""
    pts = {"tp2": points_of(launches([600.0, 610.0], ttft_s=0.709))[C8],
           "pp2": points_of(launches([500.0, 505.0], ttft_s=0.296))[C8],
           "dp2": points_of(launches([620.0, 640.0], ttft_s=0.793))[C8]}
    v = decide({n: {C8: p} for n, p in pts.items()}, TPS)
    latency = next(x for x in v.lines if x.startswith("latency at concurrency 8"))
    assert "TTFT p99 pp2 296 ms, tp2 709 ms, dp2 793 ms" in latency
    assert "TPOT p99" in latency and "E2E p99" in latency


def test_bursty_delivery_is_named_in_the_verdict_and_tpot_read_instead() -> None:
    pts = {"tp2": points_of(launches([600.0, 610.0], tpot_s=0.0078, gap_s=0.0078))[C8],
           "dp2": points_of(launches([760.0, 770.0], tpot_s=0.0078, gap_s=0.000004))[C8]}
    v = decide({n: {C8: p} for n, p in pts.items()}, TPS)
    assert any(x.startswith("dp2: tokens reached the client in bursts") for x in v.lines)
    assert not any(x.startswith("tp2: tokens reached") for x in v.lines)
    assert "TPOT p99 8 ms against 8 ms" in v.text and "ITL" not in v.text


def _sweep(figures: dict[str, dict[Load, list[float]]], **kw: object) -> dict[str, dict]:  # type: ignore[type-arg]
    out = {}
    for name, by_load in figures.items():
        ws = [w for load, values in by_load.items() for w in launches(values, load=load, **kw)]
        out[name] = points_of(ws)
    return out


def test_the_curves_cross_and_it_is_said_in_words() -> None:
    c1, c4, c8 = Load(concurrency=1), Load(concurrency=4), Load(concurrency=8)
    pts = _sweep({"tp2": {c1: [120.0, 121.0], c4: [400.0, 405.0], c8: [600.0, 610.0]},
                  "dp2": {c1: [90.0, 91.0], c4: [380.0, 385.0], c8: [760.0, 770.0]}})
    v = decide(pts, TPS)
    assert v.load == c8 and v.choose == "dp2"
    cross = next(x for x in v.lines if x.startswith("over concurrency"))
    assert cross == ("over concurrency 1, 4, 8: the most output tokens/s comes measurably from tp2 at 1, 4, dp2 at 8: "
                     "the curves cross between 4 and 8")


def test_curves_do_not_cross_through_a_load_where_nobody_measurably_leads() -> None:
    """At concurrency 1 the two serve alike (one slightly ahead by chance): that is no crossover."""
    c1, c8 = Load(concurrency=1), Load(concurrency=8)
    pts = _sweep({"seqs16": {c1: [100.0, 104.0], c8: [600.0, 610.0]},
                  "seqs1": {c1: [101.0, 105.0], c8: [150.0, 152.0]}})
    line = next(x for x in decide(pts, TPS).lines if x.startswith("over concurrency"))
    assert line == ("over concurrency 1, 8: seqs16 serves measurably the most output tokens/s at 8; no measurable "
                    "difference at 1")


def test_the_rate_each_layout_holds_the_slo_up_to() -> None:
    """"TP=2 holds the SLO up to 3.1 req/s, DP=2 up to 4.4": each layout's SLO attainment over an
    open-loop sweep, the crossing interpolated between the rates measured."""
    rates = [Load(request_rate=r) for r in (1.0, 2.0, 4.0, 6.0)]
    slo = Slo(ttft_ms=500, tpot_ms=50)
    # goodput per window out of 1 req/s... over 10 s windows of 10 requests: attainment = goodput
    tp = {ld: [a, a] for ld, a in zip(rates, (1.0, 1.0, 0.7, 0.2), strict=True)}
    dp = {ld: [a, a] for ld, a in zip(rates, (1.0, 1.0, 1.0, 0.6), strict=True)}
    pts = {"tp2": points_of([w for ld, vs in tp.items() for w in launches([100.0, 101.0], load=ld, goodput=vs[0])]),
           "dp2": points_of([w for ld, vs in dp.items() for w in launches([100.0, 101.0], load=ld, goodput=vs[0])])}
    v = decide(pts, deciding_figure({"tp2": slo, "dp2": slo}), slos={"tp2": slo, "dp2": slo})
    held = next(x for x in v.lines if x.startswith("holds the SLO"))
    assert "(TTFT <= 500 ms, TPOT <= 50 ms, for 90 % of requests) over request rate" in held
    # tp2: 100 % at 2, 70 % at 4 -> 2 + (1.0 - 0.9) / (1.0 - 0.7) x 2 = 2.67; dp2: 100 % at 4, 60 % at 6 -> 4.5
    assert "tp2 up to 2.7 req/s" in held and "dp2 up to 4.5 req/s" in held
    assert held_up_to([(1.0, 0.95), (2.0, 0.93)], 0.9) == ("all", 2.0)
    assert held_up_to([(1.0, 0.5), (2.0, 0.2)], 0.9) == ("none", 1.0)


def test_goodput_decides_when_every_layout_has_an_slo() -> None:
    slo = Slo(ttft_ms=500)
    assert deciding_figure({"a": slo, "b": slo}) == "goodput_rps"
    assert deciding_figure({"a": slo, "b": Slo()}) == "output_tokens_per_s"
    assert deciding_figure({"a": Slo(max_itl_ms=50), "b": Slo(max_itl_ms=50)}) == "max_itl_goodput_rps"
    v = decide(points({"a": [100.0, 101.0], "b": [200.0, 201.0]}, goodput=0.9), "goodput_rps")
    assert v.choose is None and "goodput (requests/s within the SLO)" in v.text   # equal goodput: no winner


def test_launches_are_interleaved() -> None:
    assert interleaved(["a", "b"], 2) == ["a", "b", "b", "a"]
    assert interleaved(["a", "b", "c"], 3) == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert round_order(["a", "b"], 3) == ["b", "a"]


def test_ratio_interval_uses_the_launch_samples() -> None:
    ci = ratio_ci([22.6, 32.8], [4.88, 6.42])   # 16 against 1 sequences, two launches each, seen on the CPU build
    assert ci.low > 1.0 and 4.0 < ci.mean < 6.0
