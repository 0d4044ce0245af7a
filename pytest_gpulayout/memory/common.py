"""What every part of the memory model shares: the refusal when a GPU's memory is unknown, and
the engine name and version normalised the one way."""

from __future__ import annotations

from packaging.version import Version

from pytest_gpulayout.engines import ENGINE_NAMES, ENGINES
from pytest_gpulayout.engines.versions import parse_version, resolve_version
from pytest_gpulayout.errors import InputError


class MemoryUnknown(ValueError):
    """The pool cannot be predicted because a GPU's memory is unknown (e.g. a machine read from
    ``nvidia-smi topo -m`` text). The message says which GPU and which figure; checks skip with it."""


def engine_name(engine: str) -> str:
    e = engine.lower()
    if e not in ENGINES:
        raise InputError(f"unknown engine {engine!r} (expected one of: {', '.join(ENGINE_NAMES)})",
                         key="engine")
    return e


def engine_version(v: Version | str | None, engine: str) -> Version:
    if v is None:
        return resolve_version(engine, None)[0]
    return v if isinstance(v, Version) else parse_version(v)
