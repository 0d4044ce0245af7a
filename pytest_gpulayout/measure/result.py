"""One window's figures, from the load generator's own JSON (``vllm bench serve --save-result
--save-detailed``): recomputed from its per-request times, and checked against its aggregates.

The JSON keys read (``vllm/benchmarks/serve.py`` 0.32, ``benchmark``'s result, lines 1278-1301):
``duration``, ``completed``, ``failed``, ``input_lens``, ``output_lens``, ``ttfts`` (s), ``itls`` (s, one
list per request), ``latencies`` (s), ``errors`` (``""`` for a request that succeeded), ``request_goodput``
(with ``--goodput``), and the aggregates ``output_throughput``, ``request_throughput``,
``p50/p90/p99_{ttft,tpot,itl,e2el}_ms``. Percentiles are numpy's default (linear interpolation), as the
generator computes them, so both agree.

Goodput is vLLM's rule (``calculate_metrics``, serve.py lines 605-660): a successful request counts when
its TTFT, its TPOT = ``(latency - ttft) / (output_len - 1)`` (0 for one token or none) and its latency are
each within the SLO's bound; ``max_itl_ms`` (every gap of the request within it) is counted apart.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import GpuLayoutError
from pytest_gpulayout.workload import Load, Slo

PERCENTILES = (50, 90, 99)
NO_SLO = Slo()
#: serve.py's ``MILLISECONDS_TO_SECONDS_CONVERSION``: the SLO's milliseconds are divided by it, and each
#: request's seconds compared with the quotient (``s >= r``), the same float operations here
MS_PER_S = 1000


class MeasureError(GpuLayoutError):
    """The load generator could not run, or its result cannot be read (exit 1: the measurement failed)."""

    exit_code = 1


@dataclass(frozen=True)
class Percentiles:
    p50: float | None
    p90: float | None
    p99: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {"p50": _r(self.p50), "p90": _r(self.p90), "p99": _r(self.p99)}


@dataclass(frozen=True)
class Requests:
    """The successful requests of one window, each as the generator timed it (seconds)."""

    ttft_s: tuple[float, ...] = ()
    #: vLLM's per-request TPOT, ``(latency - ttft) / (output_len - 1)``; 0 for an output of one token
    tpot_s: tuple[float, ...] = ()
    e2e_s: tuple[float, ...] = ()
    itl_s: tuple[tuple[float, ...], ...] = ()
    output_lens: tuple[int, ...] = ()
    input_lens: tuple[int, ...] = ()

    @property
    def gaps(self) -> list[float]:
        return [g for gaps in self.itl_s for g in gaps]

    @property
    def timed_tpots(self) -> list[float]:
        """The TPOTs vLLM takes percentiles of: requests with more than one output token."""
        return [t for t, n in zip(self.tpot_s, self.output_lens, strict=True) if n > 1]


@dataclass(frozen=True)
class Window:
    """One run of the load generator against one launch of a deployment at one load."""

    load: Load
    duration_s: float
    completed: int
    failed: int
    output_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    itl_ms: Percentiles
    e2e_ms: Percentiles
    good: int | None                   # requests meeting the SLO by vLLM's rule; None without one
    good_max_itl: int | None           # requests whose every gap met slo.max_itl_ms; None without it
    generator: Mapping[str, Any]       # the generator's own aggregates, as it wrote them
    requests: Requests = Requests()
    launch: int = 0                    # which launch of its deployment (0-based)
    result_path: str | None = None
    command: str | None = None         # the window's ``vllm bench serve`` command line
    note: str | None = None            # where a figure is not the generator's own, why
    first_error: str | None = None     # the last line of the first failed request's error

    @property
    def concurrency(self) -> int | None:
        return self.load.concurrency

    @property
    def goodput_rps(self) -> float | None:
        return None if self.good is None or self.duration_s <= 0 else self.good / self.duration_s

    @property
    def max_itl_goodput_rps(self) -> float | None:
        return None if self.good_max_itl is None or self.duration_s <= 0 else self.good_max_itl / self.duration_s

    @property
    def attainment(self) -> float | None:
        """The share of the window's requests (failed ones too) that met the SLO."""
        sent = self.completed + self.failed
        return None if self.good is None or not sent else self.good / sent

    @property
    def failure(self) -> str | None:
        """What to say when requests failed: none completed (an error), or some (a note)."""
        if not self.failed:
            return None
        why = f": {self.first_error}" if self.first_error else ""
        if not self.completed:
            return f"no request completed at {self.load.words} ({self.failed} failed{why})"
        return f"{self.failed} of {self.failed + self.completed} requests failed at {self.load.words}{why}"

    def figure(self, name: str) -> float:
        value = getattr(self, name)
        return float(value) if value is not None else 0.0


def percentile(values: Sequence[float], q: float) -> float | None:
    """numpy's default percentile (linear between closest ranks); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def percentiles_ms(values_s: Sequence[float]) -> Percentiles:
    ms = [v * 1000.0 for v in values_s]
    p = [percentile(ms, q) for q in PERCENTILES]
    return Percentiles(p[0], p[1], p[2])


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(v, nd)


def tpot_s(latency_s: float, ttft_s: float, output_len: int) -> float:
    """vLLM's time per output token of one request (serve.py lines 624-631): 0 for one token or none."""
    return (latency_s - ttft_s) / (output_len - 1) if output_len > 1 else 0.0


def good_requests(requests: Requests, slo: Slo) -> int | None:
    """How many requests ``vllm bench serve --goodput`` counts good: each of TTFT, TPOT and E2E that the
    SLO bounds within it (``slo / 1000 >= value``, serve.py lines 640-660); None when it bounds none."""
    slo_values: list[float] = []
    valid_metrics: list[tuple[float, ...]] = []
    for bound_ms, values in ((slo.ttft_ms, requests.ttft_s), (slo.tpot_ms, requests.tpot_s),
                             (slo.e2e_ms, requests.e2e_s)):
        if bound_ms is not None:
            slo_values.append(bound_ms / MS_PER_S)
            valid_metrics.append(values)
    if not slo_values:
        return None
    return sum(all(s >= r for s, r in zip(slo_values, req, strict=True)) for req in zip(*valid_metrics, strict=True))


def good_every_gap(requests: Requests, slo: Slo) -> int | None:
    """Requests whose every inter-token gap is within ``slo.max_itl_ms`` (a rule of its own, not vLLM's)."""
    if slo.max_itl_ms is None:
        return None
    bound = slo.max_itl_ms / MS_PER_S
    return sum(all(bound >= g for g in gaps) for gaps in requests.itl_s)


def _list(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list):
        raise MeasureError(f"{where}: the load generator's result has no per-request {key!r} list "
                           f"(was it run with --save-detailed?)")
    return value


def parse_result(data: Mapping[str, Any], *, load: Load, slo: Slo = NO_SLO, where: str = "result",
                 forced_output: int | None = None, launch: int = 0) -> Window:
    """The figures of one window from the generator's JSON (already loaded).

    ``forced_output``: the output length the load forced (``max_tokens`` with ``ignore_eos``). The
    generator takes a request's output tokens from the server's ``usage`` when it comes in a chunk of
    its own (vLLM, SGLang), else it re-tokenizes the streamed text with its ``--tokenizer``:
    llama-server sends ``usage`` in the last token's chunk, so the count is the tokenizer's, not the
    server's. Where a successful request's count is not the forced length, the forced length is
    counted in output tokens/s (the server stops each request there) and the window's ``note`` says so;
    TPOT and goodput keep the generator's count, as ``--goodput`` does."""
    try:
        duration = float(data["duration"])
        completed = int(data["completed"])
        failed = int(data.get("failed", 0))
    except (KeyError, TypeError, ValueError) as err:
        raise MeasureError(f"{where}: not a vllm bench serve result ({err})") from None
    errors = _list(data, "errors", where)
    ttfts = [float(x) for x in _list(data, "ttfts", where)]
    itls = [[float(y) for y in x] for x in _list(data, "itls", where)]
    lat = [float(x) for x in _list(data, "latencies", where)]
    out_lens = [int(x) for x in _list(data, "output_lens", where)]
    in_lens = [int(x) for x in data.get("input_lens") or [0] * len(out_lens)]
    ok = [not e for e in errors]
    if not (len(ok) == len(ttfts) == len(itls) == len(lat) == len(out_lens) == len(in_lens)):
        raise MeasureError(f"{where}: the per-request lists differ in length")
    idx = [i for i, s in enumerate(ok) if s]
    reqs = Requests(ttft_s=tuple(ttfts[i] for i in idx),
                    tpot_s=tuple(tpot_s(lat[i], ttfts[i], out_lens[i]) for i in idx),
                    e2e_s=tuple(lat[i] for i in idx), itl_s=tuple(tuple(itls[i]) for i in idx),
                    output_lens=tuple(out_lens[i] for i in idx), input_lens=tuple(in_lens[i] for i in idx))
    tokens = sum(reqs.output_lens)
    note = None
    if forced_output is not None and any(n != forced_output for n in reqs.output_lens):
        note = (f"the load generator counted {tokens / len(idx):.1f} output tokens a request, not the "
                f"{forced_output} forced: the server's usage did not reach it (llama-server sends it in the last "
                f"token's chunk) and it re-tokenized the text; output tokens/s counts the forced length")
        tokens = forced_output * len(idx)
    aggregates = {k: v for k, v in data.items() if not isinstance(v, list)}
    errs = [str(e).strip().splitlines() for e in errors if e]
    first_error = next((lines[-1][:200] for lines in errs if lines), None)
    good = good_requests(reqs, slo)
    theirs = data.get("request_goodput")
    if good is not None and isinstance(theirs, (int, float)) and duration > 0 \
            and not math.isclose(theirs, good / duration, rel_tol=1e-9, abs_tol=1e-12):
        note = "; ".join(x for x in (note, f"the load generator's own goodput {theirs:.4g} req/s differs from "
                                           f"{good / duration:.4g} recounted from its per-request times") if x)
    return Window(
        load=load, duration_s=duration, completed=completed, failed=failed, output_tokens=tokens,
        output_tokens_per_s=tokens / duration if duration > 0 else 0.0,
        requests_per_s=completed / duration if duration > 0 else 0.0,
        ttft_ms=percentiles_ms(reqs.ttft_s), tpot_ms=percentiles_ms(reqs.timed_tpots),
        itl_ms=percentiles_ms(reqs.gaps), e2e_ms=percentiles_ms(reqs.e2e_s),
        good=good, good_max_itl=good_every_gap(reqs, slo), generator=aggregates, requests=reqs, launch=launch,
        note=note, first_error=first_error)


def read_result(path: Path, *, load: Load, slo: Slo = NO_SLO, forced_output: int | None = None,
                launch: int = 0, command: str | None = None) -> Window:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise MeasureError(f"{path}: cannot read the load generator's result: {err}") from None
    if not isinstance(data, dict):
        raise MeasureError(f"{path}: the load generator's result is not a JSON object")
    w = parse_result(data, load=load, slo=slo, where=str(path), forced_output=forced_output, launch=launch)
    return replace(w, result_path=str(path), command=command)
