"""The ``measure:`` block of a deployment (or of ``defaults``): the load one measurement drives.

Plain data, standard library only, so ``deployment.py`` can carry it without importing the measuring
(``measure/``): ``manifest/measure.py`` parses and validates it; the runner (``measure/run.py``) reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: the share of requests that must meet the SLO for a layout to "hold" it at a load: DistServe's
#: SLO attainment (https://arxiv.org/pdf/2401.09670, the paper ``vllm bench serve --goodput`` cites for
#: its definition, vllm/benchmarks/serve.py 0.32 ``--goodput`` help)
DEFAULT_ATTAINMENT = 0.9


@dataclass(frozen=True)
class Slo:
    """What each request must meet to count in the goodput.

    ``ttft_ms``, ``tpot_ms``, ``e2e_ms``: per request, its time to first token, its time per output
    token after the first (``(e2e - ttft) / (output tokens - 1)``) and its end-to-end latency, each
    within the bound: ``vllm bench serve --goodput ttft:.. tpot:.. e2el:..`` counts the same
    (``calculate_metrics``, vllm/benchmarks/serve.py 0.32 lines 624-660), as aiperf's ``--goodput``
    does. ``max_itl_ms``: a stricter rule under its own name, every inter-token gap of the request
    within it (its own figure, ``max_itl_goodput_rps``: streamed tokens that arrive in bursts fail it
    while their TPOT holds). ``attainment``: the share of requests meeting the SLO for a layout to
    hold it at a load (the request rate it holds is read against it).
    """

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    max_itl_ms: float | None = None
    attainment: float = DEFAULT_ATTAINMENT

    @property
    def set(self) -> bool:
        return self.goodput_set or self.max_itl_ms is not None

    @property
    def goodput_set(self) -> bool:
        """Whether ``vllm bench serve --goodput`` has something to count (TTFT, TPOT or E2E)."""
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2e_ms))

    def goodput_arg(self) -> str | None:
        """The value of ``vllm bench serve --goodput`` (``KEY:VALUE`` pairs in ms), None when unset."""
        pairs = [f"{k}:{float(v)!r}" for k, v in (("ttft", self.ttft_ms), ("tpot", self.tpot_ms), ("e2el", self.e2e_ms))
                 if v is not None]
        return " ".join(pairs) if pairs else None

    def words(self) -> str:
        parts = [f"{name} <= {v:g} ms" for name, v in (("TTFT", self.ttft_ms), ("TPOT", self.tpot_ms),
                                                        ("E2E", self.e2e_ms), ("every gap", self.max_itl_ms))
                 if v is not None]
        return ", ".join(parts) if parts else "no SLO"


@dataclass(frozen=True)
class Load:
    """One point of a sweep: closed loop (``concurrency`` requests in flight, the next sent when one
    ends: ``vllm bench serve --max-concurrency N --request-rate inf``) or open loop (requests sent at
    ``request_rate`` per second, Poisson for ``burstiness`` 1, gamma otherwise: ``--request-rate R
    --burstiness B``, vllm/benchmarks/serve.py 0.32 ``get_request``, lines 403-516, whatever the server's
    speed)."""

    concurrency: int | None = None
    request_rate: float | None = None
    burstiness: float = 1.0

    @property
    def axis(self) -> str:
        return "request_rate" if self.request_rate is not None else "concurrency"

    @property
    def x(self) -> float:
        """The value on its axis."""
        return float(self.request_rate if self.request_rate is not None else self.concurrency or 0)

    @property
    def key(self) -> str:
        """Short and file-name safe: ``c8``, ``r2.5``, ``r2.5-b0.5``."""
        if self.request_rate is None:
            return f"c{self.concurrency}"
        return f"r{self.request_rate:g}" + (f"-b{self.burstiness:g}" if self.burstiness != 1.0 else "")

    @property
    def words(self) -> str:
        if self.request_rate is None:
            return f"concurrency {self.concurrency}"
        kind = "Poisson" if self.burstiness == 1.0 else f"burstiness {self.burstiness:g}"
        return f"{self.request_rate:g} req/s ({kind})"

    def as_dict(self) -> dict[str, object]:
        return {"load": self.words, "concurrency": self.concurrency, "request_rate": self.request_rate,
                "burstiness": self.burstiness if self.request_rate is not None else None}


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: its prompt and output lengths in tokens, its arrival in seconds from
    the trace's first request."""

    input_length: int
    output_length: int
    timestamp: float


#: the requests in one window when neither ``requests`` nor ``duration_s`` is given
DEFAULT_REQUESTS = 64
DEFAULT_CONCURRENCY = (8,)


@dataclass(frozen=True)
class MeasureSpec:
    """What to drive against a deployment.

    The loads: ``concurrency`` (closed loop: one value, or a sweep) and ``request_rate`` (open loop, a
    sweep of requests/s with ``burstiness``); either or both, concurrency 8 when neither is given.
    ``requests`` per window, or ``duration_s`` (a window's request count sized from the rate the
    deployment served, measured before its first window). ``input_tokens``/``output_tokens``: fixed
    lengths (the output is forced to its length), unless a ``trace`` (JSONL: ``input_length``,
    ``output_length``, ``timestamp`` per request; read and checked at load, ``trace_requests``) replays
    real shapes and arrivals. ``warmup_requests`` (default: the concurrency; 4 for a request rate) run
    before each launch's first window at each load, not counted. ``launches``: independent launches of
    each deployment (interleaved: A B B A), the units the intervals are computed from; ``windows``: the
    windows each launch measures at each load. More launches follow while the verdict's intervals
    overlap and ``budget_s`` (the whole measurement, all deployments) is not spent. ``tokenizer``: a
    directory with the tokenizer (default: the model's directory; no network at run time).
    ``python``: the Python of an environment with vLLM, whose ``vllm bench serve`` drives the load
    (default: the deployment's own vLLM). ``max_regression``: the slowdown (a fraction) below a saved
    baseline (``--gpulayout-measure-baseline``) that fails, when the measured interval shows it.
    """

    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    request_rate: tuple[float, ...] = ()
    burstiness: float = 1.0
    requests: int | None = None
    duration_s: float | None = None
    input_tokens: int = 128
    output_tokens: int = 128
    trace: Path | None = None
    trace_requests: tuple[TraceRequest, ...] = ()
    slo: Slo = field(default_factory=Slo)
    warmup_requests: int | None = None   # None: one request per concurrent user
    budget_s: float = 900.0
    windows: int = 2
    launches: int = 2
    tokenizer: Path | None = None
    python: str | None = None
    max_regression: float = 0.10

    @property
    def window_requests(self) -> int:
        return self.requests if self.requests is not None else DEFAULT_REQUESTS

    @property
    def loads(self) -> tuple[Load, ...]:
        """Every point measured: the concurrency sweep, then the request-rate sweep, each ascending."""
        closed = tuple(Load(concurrency=c) for c in sorted(self.concurrency))
        opened = tuple(Load(request_rate=r, burstiness=self.burstiness) for r in sorted(self.request_rate))
        return closed + opened

    @property
    def longest_request(self) -> int:
        """The most tokens one request holds (prompt and output)."""
        if self.trace_requests:
            return max(r.input_length + r.output_length for r in self.trace_requests)
        return self.input_tokens + self.output_tokens
