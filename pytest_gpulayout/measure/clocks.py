"""Each GPU's SM clock, temperature and power through a window, sampled through NVML; and whether
the layouts compared ran at matched clocks.

A layout whose GPUs ran at a mean SM clock more than ``MATCHED_TOLERANCE`` (15 %) below the fastest
layout's was throttled (heat, power cap, another tenant): its figures are flagged in the verdict,
not compared silently. NVML (``pynvml`` from ``nvidia-ml-py``, the ``measure`` extra) is imported
only when a sampler starts; without it, or without a GPU (the CPU build), ``clocks`` is ``None``.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MATCHED_TOLERANCE = 0.15


def load_nvml() -> Any | None:
    """The ``pynvml`` module, initialised; None where NVML or a driver is not there."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    return pynvml


@dataclass(frozen=True)
class GpuClocks:
    index: int
    sm_mhz_mean: float
    sm_mhz_min: float
    temperature_c_max: float | None
    power_w_mean: float | None
    samples: int

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "sm_mhz_mean": round(self.sm_mhz_mean, 1), "sm_mhz_min": self.sm_mhz_min,
                "temperature_c_max": self.temperature_c_max,
                "power_w_mean": None if self.power_w_mean is None else round(self.power_w_mean, 1),
                "samples": self.samples}


@dataclass(frozen=True)
class Clocks:
    """A deployment's GPUs through its windows; ``sm_mhz_mean`` over all of them."""

    gpus: tuple[GpuClocks, ...]

    @property
    def sm_mhz_mean(self) -> float:
        total = sum(g.samples for g in self.gpus)
        return sum(g.sm_mhz_mean * g.samples for g in self.gpus) / total if total else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"sm_mhz_mean": round(self.sm_mhz_mean, 1), "gpus": [g.as_dict() for g in self.gpus]}


class ClockSampler:
    """Samples the GPUs at NVML ``indices`` every ``interval_s`` in a thread until :meth:`stop`."""

    def __init__(self, nv: Any, indices: Sequence[int], interval_s: float = 0.5):
        self.nv = nv
        self.indices = tuple(indices)
        self.interval_s = interval_s
        self.readings: dict[int, list[tuple[float, float | None, float | None]]] = {i: [] for i in self.indices}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpulayout-clocks", daemon=True)

    def sample(self) -> None:
        nv = self.nv
        for i in self.indices:
            try:
                h = nv.nvmlDeviceGetHandleByIndex(i)
                sm = float(nv.nvmlDeviceGetClockInfo(h, getattr(nv, "NVML_CLOCK_SM", 1)))
            except Exception:
                continue
            temp: float | None = None
            power: float | None = None
            with contextlib.suppress(Exception):
                temp = float(nv.nvmlDeviceGetTemperature(h, getattr(nv, "NVML_TEMPERATURE_GPU", 0)))
            with contextlib.suppress(Exception):
                power = float(nv.nvmlDeviceGetPowerUsage(h)) / 1000.0  # mW
            self.readings[i].append((sm, temp, power))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def start(self) -> ClockSampler:
        self._thread.start()
        return self

    def stop(self) -> Clocks | None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        return clocks_of(self.readings)


def clocks_of(readings: Mapping[int, Sequence[tuple[float, float | None, float | None]]]) -> Clocks | None:
    gpus = []
    for i, rows in sorted(readings.items()):
        if not rows:
            continue
        sm = [r[0] for r in rows]
        temps = [r[1] for r in rows if r[1] is not None]
        powers = [r[2] for r in rows if r[2] is not None]
        gpus.append(GpuClocks(i, sum(sm) / len(sm), min(sm), max(temps) if temps else None,
                              sum(powers) / len(powers) if powers else None, len(rows)))
    return Clocks(tuple(gpus)) if gpus else None


def merge(parts: Sequence[Clocks | None]) -> Clocks | None:
    """One deployment's clocks over all its windows."""
    rows: dict[int, list[GpuClocks]] = {}
    for c in parts:
        for g in (c.gpus if c is not None else ()):
            rows.setdefault(g.index, []).append(g)
    gpus = []
    for i, gs in sorted(rows.items()):
        n = sum(g.samples for g in gs)
        temps = [g.temperature_c_max for g in gs if g.temperature_c_max is not None]
        powers = [(g.power_w_mean, g.samples) for g in gs if g.power_w_mean is not None]
        gpus.append(GpuClocks(i, sum(g.sm_mhz_mean * g.samples for g in gs) / n, min(g.sm_mhz_min for g in gs),
                              max(temps) if temps else None,
                              sum(p * k for p, k in powers) / sum(k for _, k in powers) if powers else None, n))
    return Clocks(tuple(gpus)) if gpus else None


def unmatched(clocks: Mapping[str, Clocks | None], tolerance: float = MATCHED_TOLERANCE) -> dict[str, str]:
    """Deployments whose mean SM clock ran more than ``tolerance`` below the fastest one's: name -> why."""
    known = {n: c.sm_mhz_mean for n, c in clocks.items() if c is not None and c.sm_mhz_mean > 0}
    if len(known) < 2:
        return {}
    top_name = max(known, key=lambda n: known[n])
    top = known[top_name]
    return {n: (f"its GPUs ran at {mhz:.0f} MHz mean SM clock, {100 * (1 - mhz / top):.0f} % below "
                f"{top_name}'s {top:.0f} MHz: not matched clocks (throttled? another tenant?)")
            for n, mhz in known.items() if mhz < top * (1 - tolerance)}
