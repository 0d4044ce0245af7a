"""The engine's own ``/metrics`` (Prometheus text) sampled while the load runs: KV-cache usage,
preemptions and waiting requests, as the engine counts them.

Names read: vLLM ``vllm:kv_cache_usage_perc`` (``vllm:gpu_cache_usage_perc`` before 0.10; a
fraction 0-1 despite the name), ``vllm:num_preemptions_total``, ``vllm:num_requests_waiting``;
SGLang ``sglang:token_usage``, ``sglang:num_queue_reqs``; llama-server (with ``--metrics``)
``llamacpp:kv_cache_usage_ratio``, ``llamacpp:requests_deferred``. Several engines (DP) report one
series each: usage is their mean, counts their sum. A server without ``/metrics`` gives ``None``s.
"""

from __future__ import annotations

import contextlib
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass

KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
            "llamacpp:kv_cache_usage_ratio")
PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")
WAITING = ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred")


def parse_prometheus(text: str) -> dict[str, list[float]]:
    """metric name -> the values of its series (labels dropped)."""
    out: dict[str, list[float]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        brace = line.find("{")
        space = line.find(" ")
        if 0 <= brace < space or (brace >= 0 and space < 0):
            name, rest = line[:brace], line[line.rfind("}") + 1:]
        else:
            name, _, rest = line.partition(" ")
        fields = rest.split()
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        out.setdefault(name, []).append(value)
    return out


@dataclass(frozen=True)
class Sample:
    kv_usage: float | None
    preemptions: float | None
    waiting: float | None


def _first(values: dict[str, list[float]], names: Iterable[str]) -> list[float] | None:
    for n in names:
        if n in values:
            return values[n]
    return None


def sample_of(text: str) -> Sample:
    v = parse_prometheus(text)
    kv, pre, wait = _first(v, KV_USAGE), _first(v, PREEMPTIONS), _first(v, WAITING)
    return Sample(kv_usage=sum(kv) / len(kv) if kv else None, preemptions=sum(pre) if pre is not None else None,
                  waiting=sum(wait) if wait is not None else None)


@dataclass(frozen=True)
class EngineMetrics:
    """What ``/metrics`` said through one window (``None`` where the engine does not export it)."""

    samples: int
    kv_usage_max: float | None
    kv_usage_mean: float | None
    preemptions: float | None      # during the window (the counter's growth)
    waiting_max: float | None
    waiting_mean: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def summarize(samples: list[Sample]) -> EngineMetrics:
    kv = [s.kv_usage for s in samples if s.kv_usage is not None]
    pre = [s.preemptions for s in samples if s.preemptions is not None]
    wait = [s.waiting for s in samples if s.waiting is not None]
    return EngineMetrics(
        samples=len(samples), kv_usage_max=max(kv) if kv else None, kv_usage_mean=sum(kv) / len(kv) if kv else None,
        preemptions=(pre[-1] - pre[0]) if pre else None, waiting_max=max(wait) if wait else None,
        waiting_mean=sum(wait) / len(wait) if wait else None)


def merge(windows: list[EngineMetrics]) -> EngineMetrics | None:
    """One deployment's metrics over all its windows."""
    if not windows:
        return None
    def mx(xs: list[float | None]) -> float | None:
        ys = [x for x in xs if x is not None]
        return max(ys) if ys else None
    def mean(xs: list[float | None]) -> float | None:
        ys = [x for x in xs if x is not None]
        return sum(ys) / len(ys) if ys else None
    pre = [w.preemptions for w in windows if w.preemptions is not None]
    return EngineMetrics(samples=sum(w.samples for w in windows), kv_usage_max=mx([w.kv_usage_max for w in windows]),
                         kv_usage_mean=mean([w.kv_usage_mean for w in windows]),
                         preemptions=sum(pre) if pre else None, waiting_max=mx([w.waiting_max for w in windows]),
                         waiting_mean=mean([w.waiting_mean for w in windows]))


class Scraper:
    """Reads ``url`` every ``interval_s`` in a thread of its own until :meth:`stop`."""

    def __init__(self, url: str, interval_s: float = 0.5, timeout_s: float = 2.0):
        self.url = url
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpulayout-metrics", daemon=True)

    def scrape(self) -> None:
        with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
            with urllib.request.urlopen(self.url, timeout=self.timeout_s) as resp:  # noqa: S310 (127.0.0.1)
                self.samples.append(sample_of(resp.read().decode("utf-8", "replace")))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.scrape()
            self._stop.wait(self.interval_s)

    def start(self) -> Scraper:
        self._thread.start()
        return self

    def stop(self) -> EngineMetrics:
        self._stop.set()
        self._thread.join(self.timeout_s + 1.0)
        self.scrape()  # the counters at the end of the window
        return summarize(self.samples)
