"""One window's figures, from the load generator's own JSON (``vllm bench serve --save-result
--save-detailed``): recomputed from its per-request times, and checked against its aggregates.

The JSON keys read (``vllm/benchmarks/serve.py``): ``duration``, ``completed``, ``failed``,
``output_lens``, ``ttfts`` (s), ``itls`` (s, one list per request), ``latencies`` (s), ``errors``
(``""`` for a request that succeeded), and the aggregates ``output_throughput``,
``request_throughput``, ``p50/p90/p99_{ttft,itl,e2el}_ms``. Percentiles are numpy's default
(linear interpolation), as the generator computes them, so both agree.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import GpuLayoutError
from pytest_gpulayout.workload import Slo

PERCENTILES = (50, 90, 99)
NO_SLO = Slo()


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
class Window:
    """One run of the load generator against one deployment at one concurrency."""

    concurrency: int
    duration_s: float
    completed: int
    failed: int
    output_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    ttft_ms: Percentiles
    itl_ms: Percentiles
    e2e_ms: Percentiles
    goodput_rps: float | None          # requests/s meeting the SLO; None without an SLO
    generator: Mapping[str, Any]       # the generator's own aggregates, as it wrote them
    result_path: str | None = None
    note: str | None = None            # where a figure is not the generator's own, why
    first_error: str | None = None     # the last line of the first failed request's error

    @property
    def failure(self) -> str | None:
        """What to say when requests failed: none completed (an error), or some (a note)."""
        if not self.failed:
            return None
        why = f": {self.first_error}" if self.first_error else ""
        if not self.completed:
            return f"no request completed at concurrency {self.concurrency} ({self.failed} failed{why})"
        return f"{self.failed} of {self.failed + self.completed} requests failed at concurrency {self.concurrency}{why}"

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


def _pcts(values_s: Sequence[float]) -> Percentiles:
    ms = [v * 1000.0 for v in values_s]
    p = [percentile(ms, q) for q in PERCENTILES]
    return Percentiles(p[0], p[1], p[2])


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None else round(v, nd)


def goodput(ttfts: Sequence[float], itls: Sequence[Sequence[float]], ok: Sequence[bool], duration_s: float,
            slo: Slo) -> float | None:
    """Requests/s that met the SLO: a successful request whose first token came within
    ``ttft_p99_ms`` and whose every inter-token gap was within ``itl_p99_ms`` (each request is held
    to the SLO's bound; the p99 of the window is then within it too when 99 % of them meet it)."""
    if not slo.set or duration_s <= 0:
        return None
    good = 0
    for i, success in enumerate(ok):
        if not success:
            continue
        if slo.ttft_p99_ms is not None and ttfts[i] * 1000.0 > slo.ttft_p99_ms:
            continue
        if slo.itl_p99_ms is not None and any(x * 1000.0 > slo.itl_p99_ms for x in itls[i]):
            continue
        good += 1
    return good / duration_s


def _list(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list):
        raise MeasureError(f"{where}: the load generator's result has no per-request {key!r} list "
                           f"(was it run with --save-detailed?)")
    return value


def parse_result(data: Mapping[str, Any], *, concurrency: int, slo: Slo = NO_SLO, where: str = "result",
                 forced_output: int | None = None) -> Window:
    """The figures of one window from the generator's JSON (already loaded).

    ``forced_output``: the output length the load forced (``max_tokens`` with ``ignore_eos``). The
    generator takes a request's output tokens from the server's ``usage`` when it comes in a chunk of
    its own (vLLM, SGLang), else it re-tokenizes the streamed text with its ``--tokenizer``:
    llama-server sends ``usage`` in the last token's chunk, so the count is the tokenizer's, not the
    server's. Where a successful request's count is not the forced length, the forced length is
    counted (the server stops each request there) and the window's ``note`` says so."""
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
    ok = [not e for e in errors]
    if not (len(ok) == len(ttfts) == len(itls) == len(lat) == len(out_lens)):
        raise MeasureError(f"{where}: the per-request lists differ in length")
    good_ttft = [t for t, s in zip(ttfts, ok, strict=True) if s]
    good_itl = [g for gaps, s in zip(itls, ok, strict=True) if s for g in gaps]
    good_lat = [t for t, s in zip(lat, ok, strict=True) if s]
    tokens = sum(n for n, s in zip(out_lens, ok, strict=True) if s)
    note = None
    counted = [n for n, s in zip(out_lens, ok, strict=True) if s]
    if forced_output is not None and any(n != forced_output for n in counted):
        note = (f"the load generator counted {tokens / len(counted):.1f} output tokens a request, not the "
                f"{forced_output} forced: the server's usage did not reach it (llama-server sends it in the last "
                f"token's chunk) and it re-tokenized the text; output tokens/s counts the forced length")
        tokens = forced_output * len(counted)
    aggregates = {k: v for k, v in data.items() if not isinstance(v, list)}
    errs = [str(e).strip().splitlines() for e in errors if e]
    first_error = next((lines[-1][:200] for lines in errs if lines), None)
    return Window(
        concurrency=concurrency, duration_s=duration, completed=completed, failed=failed, output_tokens=tokens,
        output_tokens_per_s=tokens / duration if duration > 0 else 0.0,
        requests_per_s=completed / duration if duration > 0 else 0.0,
        ttft_ms=_pcts(good_ttft), itl_ms=_pcts(good_itl), e2e_ms=_pcts(good_lat),
        goodput_rps=goodput(ttfts, itls, ok, duration, slo), generator=aggregates, note=note,
        first_error=first_error)


def read_result(path: Path, *, concurrency: int, slo: Slo = NO_SLO, forced_output: int | None = None) -> Window:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise MeasureError(f"{path}: cannot read the load generator's result: {err}") from None
    if not isinstance(data, dict):
        raise MeasureError(f"{path}: the load generator's result is not a JSON object")
    w = parse_result(data, concurrency=concurrency, slo=slo, where=str(path), forced_output=forced_output)
    return Window(**{**w.__dict__, "result_path": str(path)})
