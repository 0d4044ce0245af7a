"""``--gpulayout-measure-baseline FILE``: a measured deployment's output tokens/s saved, and a later run
failing when it falls more than ``max_regression`` (default 10 %) below the saved figure.

A figure is compared only with one measured the same way: same deployment, engine, engine release,
machine (host name and GPU models), concurrency and load shape (input/output tokens or trace,
requests per window). A measurement with no saved figure of its kind saves it (never overwritten by
later runs: a baseline that followed each run would let a slow drift through); one of another
release or machine is saved beside the others, and says so. The file is JSON (``entries``, one
object per kind), rewritten whole under a lock, so parallel workers do not lose each other's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import not_regular
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.workload import MeasureSpec

FILE_VERSION = 1
DEFAULT_MAX_REGRESSION = 0.10


@dataclass(frozen=True)
class BaselineKey:
    """What must be the same for two figures to be compared."""

    deployment: str
    engine: str
    release: str          # "unknown" where the release could not be read
    machine: str
    concurrency: int
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


def load_key(spec: MeasureSpec) -> str:
    shape = (f"trace {spec.trace.name}" if spec.trace is not None
             else f"{spec.input_tokens} in / {spec.output_tokens} out")
    size = f"{spec.duration_s:g} s" if spec.duration_s is not None else f"{spec.window_requests} requests"
    return f"{shape}, {size} a window"


@dataclass(frozen=True)
class Outcome:
    """``saved`` (no figure of its kind yet), ``pass`` or ``fail`` (regressed), with the sentence."""

    status: str
    text: str
    baseline: float | None = None
    ratio: float | None = None


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


def compare_or_save(path: Path, key: BaselineKey, output_tokens_per_s: float, *,
                    max_regression: float = DEFAULT_MAX_REGRESSION, extra: Mapping[str, Any] | None = None) -> Outcome:
    """Compare with the saved figure of ``key``'s kind, or save this one when there is none."""
    if not 0 <= max_regression < 1:
        raise InputError(f"max_regression must be a fraction from 0 to 1 (0.10 is 10 %), not {max_regression:g}",
                         key="max_regression")
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        entries = read_entries(path)
        saved = next((e for e in entries if _matches(e, key)), None)
        if saved is None:
            others = [e for e in entries if e.get("deployment") == key.deployment]
            entries.append({**asdict(key), "output_tokens_per_s": round(output_tokens_per_s, 3),
                            "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **(extra or {})})
            tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"version": FILE_VERSION, "entries": entries}, indent=2) + "\n")
            os.replace(tmp, path)
            why = ""
            if others:
                seen = "; ".join(sorted({f"{e.get('engine')} {e.get('release')} on {e.get('machine')}, concurrency "
                                         f"{e.get('concurrency')}, {e.get('load')}" for e in others}))
                why = f" (the saved ones were measured otherwise, so not compared: {seen})"
            return Outcome("saved", f"baseline saved: {key.words()}: {output_tokens_per_s:.1f} output tokens/s "
                                    f"in {path}{why}")
    base = float(saved["output_tokens_per_s"])
    ratio = output_tokens_per_s / base if base > 0 else float("inf")
    when = saved.get("saved", "?")
    if ratio < 1 - max_regression:
        return Outcome("fail", f"{key.deployment}: {output_tokens_per_s:.1f} output tokens/s is "
                               f"{(1 - ratio):.1%} below the baseline {base:.1f} saved {when} ({key.engine} "
                               f"{key.release}, {key.machine}, concurrency {key.concurrency}, {key.load}; "
                               f"max_regression {max_regression:.0%})",
                       base, ratio)
    return Outcome("pass", f"{key.deployment}: {output_tokens_per_s:.1f} output tokens/s, {ratio:.2f}x the baseline "
                           f"{base:.1f} saved {when} (within max_regression {max_regression:.0%})", base, ratio)
