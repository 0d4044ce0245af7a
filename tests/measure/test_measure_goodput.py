"""Goodput as ``vllm bench serve --goodput`` counts it, per request: TTFT, TPOT = (e2e - ttft) /
(output - 1) and E2E within the SLO, read from the generator's own per-request lists and equal to the
figure the generator itself wrote; the every-gap rule only under its own name (``max_itl_ms``); and
bursty token delivery detected and said.

The recorded results are real ``vllm bench serve`` runs against the CPU build of vLLM 0.32 (tiny Llama,
word tokenizer): ``vllm-bench-serve-c8.json`` (16 requests, 8 at once, no SLO), and
``vllm-bench-serve-goodput.json`` (run with ``--goodput ttft:... tpot:...``: its ``request_goodput`` is
vLLM's own count of that SLO on those requests).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from measure_builders import window

from pytest_gpulayout.measure.figures import delivery_of, points_of
from pytest_gpulayout.measure.result import parse_result, read_result, tpot_s
from pytest_gpulayout.workload import Load, Slo

DATA = Path(__file__).parents[1] / "data" / "measure"
RECORDED = DATA / "vllm-bench-serve-c8.json"
GOODPUT = DATA / "vllm-bench-serve-goodput.json"
C8 = Load(concurrency=8)


def _slo_of(data: dict[str, object]) -> Slo:
    """The SLO the recorded run was given (its ``--goodput`` pairs, kept in its ``gpulayout_goodput``)."""
    pairs = dict(p.split(":") for p in str(data["gpulayout_goodput"]).split())
    return Slo(ttft_ms=float(pairs["ttft"]) if "ttft" in pairs else None,
               tpot_ms=float(pairs["tpot"]) if "tpot" in pairs else None,
               e2e_ms=float(pairs["e2el"]) if "e2el" in pairs else None)


def test_goodput_equals_the_generators_own_count_of_the_same_slo() -> None:
    """The generator was run with --goodput: the requests/s it counted good, recounted here from its
    per-request times, to the last digit; and the SLO splits the requests (neither all nor none)."""
    data = json.loads(GOODPUT.read_text())
    slo = _slo_of(data)
    w = parse_result(data, load=Load(concurrency=int(data["max_concurrency"])), slo=slo)
    assert w.good is not None and 0 < w.good < w.completed
    assert w.goodput_rps == data["request_goodput"]
    assert w.note is None    # the recount and the generator's own agree: nothing to say
    # the same requests by the old every-gap rule, with the TPOT bound as a bound on every gap: another figure
    every = parse_result(data, load=C8, slo=Slo(max_itl_ms=slo.tpot_ms))
    assert every.goodput_rps is None and every.good_max_itl is not None and every.good_max_itl != w.good


def test_each_request_is_held_to_ttft_tpot_and_e2e() -> None:
    g = json.loads(RECORDED.read_text())
    ok = [i for i, e in enumerate(g["errors"]) if not e]
    tpots = sorted(tpot_s(g["latencies"][i], g["ttfts"][i], g["output_lens"][i]) for i in ok)
    everyone = parse_result(g, load=C8, slo=Slo(ttft_ms=10_000, tpot_ms=10_000, e2e_ms=10_000))
    assert everyone.goodput_rps == pytest.approx(16 / g["duration"]) and everyone.attainment == 1.0
    cut = sorted(g["ttfts"])[7] * 1000  # the 8 fastest first tokens meet it
    assert parse_result(g, load=C8, slo=Slo(ttft_ms=cut)).good == 8
    by_tpot = tpots[11] * 1000          # the 12 lowest TPOTs meet it
    assert parse_result(g, load=C8, slo=Slo(tpot_ms=by_tpot)).good == 12
    by_e2e = sorted(g["latencies"])[3] * 1000
    assert parse_result(g, load=C8, slo=Slo(e2e_ms=by_e2e)).good == 4
    both = parse_result(g, load=C8, slo=Slo(ttft_ms=cut, tpot_ms=by_tpot))
    expect = sum(1 for i in ok if g["ttfts"][i] * 1000 <= cut
                 and tpot_s(g["latencies"][i], g["ttfts"][i], g["output_lens"][i]) * 1000 <= by_tpot)
    assert both.good == expect


def test_tpot_is_the_requests_own_time_per_token_after_the_first() -> None:
    assert tpot_s(1.0, 0.2, 5) == pytest.approx(0.2)
    assert tpot_s(1.0, 0.2, 1) == 0.0 and tpot_s(1.0, 0.2, 0) == 0.0   # vLLM: no TPOT for one token, counted 0
    g = json.loads(RECORDED.read_text())
    w = parse_result(g, load=C8)
    assert w.tpot_ms.p99 == pytest.approx(g["p99_tpot_ms"], rel=1e-9)   # the generator's own TPOT percentiles


def test_failed_requests_never_count_good_and_lower_the_attainment() -> None:
    g = json.loads(RECORDED.read_text())
    g["errors"] = ["boom", "boom"] + g["errors"][2:]
    g["completed"], g["failed"] = 14, 2
    w = parse_result(g, load=C8, slo=Slo(ttft_ms=1e9))
    assert w.good == 14 and w.attainment == pytest.approx(14 / 16)


def test_bursty_delivery_is_detected_and_said() -> None:
    """The recorded run's tokens came in bursts (median gap ~0.002 ms against a TPOT of ~2 ms): its ITL
    percentiles describe the delivery, and the line says so. Steady streaming is not flagged."""
    w = read_result(RECORDED, load=C8)
    d = delivery_of([w])
    assert d is not None and d.bursty
    assert d.median_itl_ms < 0.01 < 1.0 < d.median_tpot_ms
    text = d.text("dp2", C8)
    assert text.startswith("dp2: tokens reached the client in bursts at concurrency 8 (median gap")
    assert "the verdict reads TPOT" in text
    steady = delivery_of([window(100.0, tpot_s=0.02)])
    assert steady is not None and not steady.bursty
    point = points_of([w])[C8]
    assert point.as_dict("output_tokens_per_s")["delivery"]["bursty"] is True
