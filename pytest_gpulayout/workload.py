"""The ``measure:`` block of a deployment (or of ``defaults``): the load one measurement drives.

Plain data, standard library only, so ``deployment.py`` can carry it without importing the measuring
(``measure/``): ``manifest/measure.py`` parses and validates it; the runner (``measure/run.py``) reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Slo:
    """The service level a request must meet to count in the goodput (None: not constrained)."""

    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None

    @property
    def set(self) -> bool:
        return self.ttft_p99_ms is not None or self.itl_p99_ms is not None


#: the requests in one window when neither ``requests`` nor ``duration_s`` is given
DEFAULT_REQUESTS = 64


@dataclass(frozen=True)
class MeasureSpec:
    """What to drive against a deployment.

    ``concurrency``: one value, or several (a sweep; the verdict reads the highest). ``requests`` per
    window, or ``duration_s`` (a window's request count is sized from the first window's rate).
    ``input_tokens``/``output_tokens``: fixed lengths (the output is forced to its length), unless a
    ``trace`` (JSONL: ``input_length``, ``output_length``, ``timestamp`` per request) replays real
    shapes. ``warmup_requests`` (default: the concurrency) run before each window, not counted.
    ``windows``: the windows measured at first per concurrency; more follow while the verdict's confidence
    intervals overlap
    and ``budget_s`` (the whole measurement, all deployments) is not spent. ``tokenizer``: a
    directory with the tokenizer (default: the model's directory; no network at run time).
    ``python``: the Python of an environment with vLLM, whose ``vllm bench serve`` drives the load
    (default: the deployment's own vLLM). ``max_regression``: how far (a fraction) output tokens/s
    may fall below a saved baseline (``--gpulayout-measure-baseline``) before the test fails.
    """

    concurrency: tuple[int, ...] = (8,)
    requests: int | None = None
    duration_s: float | None = None
    input_tokens: int = 128
    output_tokens: int = 128
    trace: Path | None = None
    slo: Slo = field(default_factory=Slo)
    warmup_requests: int | None = None   # None: one request per concurrent user
    budget_s: float = 900.0
    windows: int = 4
    tokenizer: Path | None = None
    python: str | None = None
    max_regression: float = 0.10

    @property
    def window_requests(self) -> int:
        return self.requests if self.requests is not None else DEFAULT_REQUESTS
