"""The serving engines, one module each behind ``base.Engine``; ``ENGINES`` is the registry."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pytest_gpulayout.engines.base import Engine
from pytest_gpulayout.engines.sglang import SGLANG
from pytest_gpulayout.engines.vllm import VLLM

#: Every engine by its manifest name, in the order they are documented.
ENGINES: Mapping[str, Engine] = MappingProxyType({e.name: e for e in (VLLM, SGLANG)})
ENGINE_NAMES: tuple[str, ...] = tuple(ENGINES)


def get_engine(name: str) -> Engine:
    """The engine called ``name`` (case-insensitive); ``KeyError`` for others (callers name the key)."""
    return ENGINES[name.lower()]


__all__ = ["ENGINES", "ENGINE_NAMES", "Engine", "get_engine"]
