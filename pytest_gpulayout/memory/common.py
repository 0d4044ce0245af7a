"""What every part of the memory model shares: the refusal when a GPU's memory is unknown, and
the engine name and version normalised the one way."""

from __future__ import annotations

from packaging.version import Version

from pytest_gpulayout.engines.registry import check_engine, parse_version, resolve_version


class MemoryUnknown(ValueError):
    """The pool cannot be predicted because a GPU's memory is unknown (e.g. a machine read from
    ``nvidia-smi topo -m`` text). The message says which GPU and which figure; checks skip with it."""


def engine_name(engine: str) -> str:
    """The engine's manifest name (``engines.versions.check_engine``)."""
    return check_engine(engine)


def engine_version(v: Version | str | None, engine: str) -> Version:
    if v is None:
        return resolve_version(engine, None)[0]
    return v if isinstance(v, Version) else parse_version(v)
