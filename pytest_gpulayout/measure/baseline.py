"""``--gpulayout-measure-baseline FILE``: a measured deployment's output tokens/s saved with its
launches' figures, and a later run judged against it through the interval of their ratio: the gate is
sized to the noise both runs measured, not drawn as a fixed line under one mean.

The ratio ``now / saved`` and its 95 % interval come from the two runs' launch-level figures
(``stats.ratio_ci``, the interval the verdict uses). With ``max_regression`` (default 10 %):

- ``fail``: the whole interval lies below 1 (measurably slower) and the mean is more than
  ``max_regression`` below: a regression, told with its interval;
- ``pass``: the interval reaches 1 (no measurable slowdown), or the slowdown is measured but smaller
  than ``max_regression`` (said);
- ``inconclusive``: the mean is more than ``max_regression`` below but the interval also reaches 1
  (or a run had one launch, so no interval exists): the noise hides whether it regressed. Never a
  silent pass: pytest reports it as a warning, with the interval, so more launches can settle it.

A figure is compared only with one measured the same way: same deployment, engine, engine release,
machine (host name and GPU models), concurrency and load shape (input/output tokens or trace,
requests per window, the request rate). A measurement with no saved figure of its kind saves it
(never overwritten by later runs: a baseline that followed each run would let a slow drift through);
one of another release or machine is saved beside the others, and says so. The file is JSON
(``entries``, one object per kind), rewritten whole under a lock, so parallel workers do not lose each
other's. An entry saved before the launches were kept (no ``launch_samples``) counts as one launch.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import not_regular
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.measure.stats import Interval, ratio_ci
from pytest_gpulayout.workload import Load, MeasureSpec

FILE_VERSION = 1
DEFAULT_MAX_REGRESSION = 0.10


@dataclass(frozen=True)
class BaselineKey:
    """What must be the same for two figures to be compared."""

    deployment: str
    engine: str
    release: str          # "unknown" where the release could not be read
    machine: str
    concurrency: int | None   # None for an open-loop request rate (named in ``load``)
    load: str

    def words(self) -> str:
        return (f"{self.deployment} ({self.engine} {self.release}, {self.machine}, concurrency {self.concurrency}, "
                f"{self.load})")


def machine_key(machine: Machine | None, hostname: str | None = None) -> str:
    """The host's name and its GPU models (``node1: 2x NVIDIA H100 80GB HBM3``); no GPUs: ``node1: no GPU``."""
    host = hostname or (machine.host if machine is not None and machine.host else None) or socket.gethostname()
    gpus = machine.gpus if machine is not None else ()
    if not gpus:
        return f"{host}: no GPU"
    names: dict[str, int] = {}
    for g in gpus:
        names[g.name] = names.get(g.name, 0) + 1
    return f"{host}: " + ", ".join(f"{n}x {name}" for name, n in names.items())


def load_key(spec: MeasureSpec, load: Load | None = None) -> str:
    shape = (f"trace {spec.trace.name}" if spec.trace is not None
             else f"{spec.input_tokens} in / {spec.output_tokens} out")
    size = f"{spec.duration_s:g} s" if spec.duration_s is not None else f"{spec.window_requests} requests"
    rate = f", {load.words}" if load is not None and load.request_rate is not None else ""
    return f"{shape}, {size} a window{rate}"


class GateStatus(enum.Enum):
    SAVED = "saved"
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Outcome:
    """How a run compares with the saved figure of its kind, with the sentence."""

    gate: GateStatus
    text: str
    baseline: float | None = None
    ratio: Interval | None = None

    @property
    def status(self) -> str:
        return self.gate.value


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    lock = path.with_name(path.name + ".lock")
    with open(lock, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_entries(path: Path) -> list[dict[str, Any]]:
    kind = not_regular(path)
    if kind is not None:  # a FIFO would block the read, and the write after it
        raise InputError(f"{path}: not a regular file: {kind}", key="--gpulayout-measure-baseline")
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: not a measure baseline: {err}", key="--gpulayout-measure-baseline") from None
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise InputError(f"{path}: not a measure baseline (no 'entries' list)", key="--gpulayout-measure-baseline")
    return entries


def _matches(entry: Mapping[str, Any], key: BaselineKey) -> bool:
    return all(entry.get(k) == v for k, v in asdict(key).items())


def judge(now: Sequence[float], saved: Sequence[float], max_regression: float) -> tuple[GateStatus, Interval, str]:
    """The gate over two runs' launch-level figures: status, the ratio's interval, and why in words."""
    r = ratio_ci(now, saved)
    drop = 1 - r.mean
    interval = (f"95 % CI {r.low:.2f}-{r.high:.2f} over {len(now)} and {len(saved)} launches"
                if len(now) > 1 and len(saved) > 1 else f"one launch {'now' if len(now) < 2 else 'saved'}: no interval")
    if len(now) < 2 or len(saved) < 2:
        if drop > max_regression:
            return GateStatus.INCONCLUSIVE, r, (f"{r.mean:.2f}x the baseline, {drop:.1%} below, but {interval} to "
                                                f"tell a regression from noise: measure with launches >= 2")
        return GateStatus.PASS, r, f"{r.mean:.2f}x the baseline ({interval}; within max_regression)"
    if r.high < 1.0 and drop > max_regression:
        return GateStatus.FAIL, r, (f"{drop:.1%} below the baseline ({r.mean:.2f}x, {interval}: measurably slower, "
                                    f"more than max_regression {max_regression:.0%})")
    if r.high < 1.0:
        return GateStatus.PASS, r, (f"{r.mean:.2f}x the baseline ({interval}): measurably slower, by less than "
                                    f"max_regression {max_regression:.0%}")
    if drop > max_regression:
        return GateStatus.INCONCLUSIVE, r, (f"{r.mean:.2f}x the baseline, {drop:.1%} below, but the {interval} reaches "
                                            f"1: the noise hides whether it regressed; measure more launches")
    return GateStatus.PASS, r, f"{r.mean:.2f}x the baseline ({interval}: no measurable slowdown)"


def compare_or_save(path: Path, key: BaselineKey, launch_samples: Sequence[float], *,
                    max_regression: float = DEFAULT_MAX_REGRESSION, extra: Mapping[str, Any] | None = None) -> Outcome:
    """Compare this run's launch-level output tokens/s with the saved figure of ``key``'s kind, or save
    them when there is none."""
    if not 0 <= max_regression < 1:
        raise InputError(f"max_regression must be a fraction from 0 to 1 (0.10 is 10 %), not {max_regression:g}",
                         key="max_regression")
    samples = [float(x) for x in launch_samples]
    if not samples:
        raise InputError("no launch was measured: nothing to compare with the baseline",
                         key="--gpulayout-measure-baseline")
    mean = sum(samples) / len(samples)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        entries = read_entries(path)
        saved = next((e for e in entries if _matches(e, key)), None)
        if saved is None:
            others = [e for e in entries if e.get("deployment") == key.deployment]
            entries.append({**asdict(key), "output_tokens_per_s": round(mean, 3),
                            "launch_samples": [round(x, 3) for x in samples],
                            "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **(extra or {})})
            tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"version": FILE_VERSION, "entries": entries}, indent=2) + "\n")
            os.replace(tmp, path)
            why = ""
            if others:
                seen = "; ".join(sorted({f"{e.get('engine')} {e.get('release')} on {e.get('machine')}, concurrency "
                                         f"{e.get('concurrency')}, {e.get('load')}" for e in others}))
                why = f" (the saved ones were measured otherwise, so not compared: {seen})"
            return Outcome(GateStatus.SAVED, f"baseline saved: {key.words()}: {mean:.1f} output tokens/s over "
                                             f"{len(samples)} launches in {path}{why}")
    base = float(saved["output_tokens_per_s"])
    base_samples = saved.get("launch_samples")
    if not (isinstance(base_samples, list) and base_samples and all(isinstance(x, (int, float)) for x in base_samples)):
        base_samples = [base]
    gate, ratio, why = judge(samples, [float(x) for x in base_samples], max_regression)
    when = saved.get("saved", "?")
    text = (f"{key.deployment}: {mean:.1f} output tokens/s against the baseline {base:.1f} saved {when} "
            f"({key.engine} {key.release}, {key.machine}, concurrency {key.concurrency}, {key.load}): {why}")
    return Outcome(gate, text, base, ratio)


def gate(figures: Mapping[str, Any], path: Path, key: BaselineKey, max_regression: float) -> dict[str, Any]:
    """``figures["baseline"]`` of a deployment measured (``gpulayout measure --json``'s figures): its
    launches' output tokens/s at the deciding load against the saved ones of ``key``'s kind."""
    samples = figures.get("output_tokens_per_s_launches") or [figures["output_tokens_per_s"]]
    outcome = compare_or_save(path, key, samples, max_regression=max_regression,
                              extra={"layout": figures.get("layout"), "ci95": figures.get("output_tokens_per_s_ci95")})
    r = outcome.ratio
    return {"status": outcome.status, "text": outcome.text, "output_tokens_per_s": outcome.baseline,
            "ratio": None if r is None else round(r.mean, 4),
            "ratio_ci95": None if r is None or r.high == float("inf") else [round(r.low, 4), round(r.high, 4)],
            "max_regression": max_regression, "file": str(path)}
