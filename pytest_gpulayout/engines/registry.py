"""The serving engines, one module each behind ``base.Engine``; ``ENGINES`` is the registry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from pytest_gpulayout.engines.base import Engine
from pytest_gpulayout.engines.knobs import LaunchKnobs
from pytest_gpulayout.engines.llamacpp import LLAMACPP
from pytest_gpulayout.engines.sglang import SGLANG
from pytest_gpulayout.engines.vllm import VLLM

#: Every engine by its manifest name, in the order they are documented.
ENGINES: Mapping[str, Engine] = MappingProxyType({e.name: e for e in (VLLM, SGLANG, LLAMACPP)})
ENGINE_NAMES: tuple[str, ...] = tuple(ENGINES)


def get_engine(name: str) -> Engine:
    """The engine called ``name`` (case-insensitive); ``KeyError`` for others (callers name the key)."""
    return ENGINES[name.lower()]




def deployment_knobs(engine: str, args: Sequence[str], launch_env: Mapping[str, str],
                     host_env: Mapping[str, str]) -> LaunchKnobs:
    """What a deployment's ``launch.args`` and variables change for the checks: the engine inherits
    the host's environment with ``launch.env`` on top (``launch/argv.engine_env``)."""
    return get_engine(engine).knobs(args, {**host_env, **launch_env})


__all__ = ["ENGINES", "ENGINE_NAMES", "Engine", "LaunchKnobs", "deployment_knobs", "get_engine"]
