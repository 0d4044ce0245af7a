"""Every engine by its manifest name: the one place that lists them.

Only the edges import this module (the CLI verbs, the pytest plugin and session, the manifest reader
that validates ``engine:``, and the resolver in ``subject.py`` that turns a deployment into its engine
object once). Everything else asks the engine object it was handed. Adding an engine is one folder
under ``engines/`` and one line here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from packaging.version import Version

from pytest_gpulayout.engine import Engine, parse_version
from pytest_gpulayout.engines.llamacpp.engine import LLAMACPP
from pytest_gpulayout.engines.sglang.engine import SGLANG
from pytest_gpulayout.engines.trtllm.engine import TRTLLM
from pytest_gpulayout.engines.vllm.engine import VLLM
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.launch.logparse import LogGrammar
from pytest_gpulayout.memory.common import resolve_version as _resolve_version

#: Every engine by its manifest name, in the order they are documented.
ENGINES: Mapping[str, Engine] = MappingProxyType({e.name: e for e in (VLLM, SGLANG, LLAMACPP, TRTLLM)})
ENGINE_NAMES: tuple[str, ...] = tuple(ENGINES)
#: ``--kv-cache-dtype`` choices per engine, checked per deployment so the launch never hands an engine
#: a value it rejects; and every value some engine accepts (the per-engine check follows).
ENGINE_KV_CACHE_DTYPES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {name: engine.cli.kv_cache_dtypes for name, engine in ENGINES.items()})
KV_CACHE_DTYPES: tuple[str, ...] = tuple(dict.fromkeys(d for ds in ENGINE_KV_CACHE_DTYPES.values() for d in ds))
#: The log grammars ``launch/logparse.py`` tells apart, in the order it tries them (engines with a log
#: parser of their own, llama.cpp, have none).
LOG_GRAMMARS: tuple[LogGrammar, ...] = tuple(e.logs for e in ENGINES.values() if e.logs is not None)
#: Newest releases whose source the rules were read from, by engine.
LATEST_KNOWN: Mapping[str, str] = MappingProxyType({name: e.latest_known for name, e in ENGINES.items()})


__all__ = ["ENGINES", "ENGINE_KV_CACHE_DTYPES", "ENGINE_NAMES", "KV_CACHE_DTYPES", "LATEST_KNOWN", "LOG_GRAMMARS",
           "check_engine", "get_engine", "log_grammars", "parse_version", "resolve_version"]


def get_engine(name: str) -> Engine:
    """The engine called ``name`` (case-insensitive); an ``InputError`` naming the key for any other."""
    try:
        return ENGINES[name.lower()]
    except KeyError:
        raise InputError(f"unknown engine {name!r} (expected one of: {', '.join(ENGINE_NAMES)})",
                         key="engine") from None


def log_grammars(engine: str = "auto") -> tuple[LogGrammar, ...]:
    """The log grammar of ``engine``, or every registered one for ``auto`` (the log's lines pick);
    ``ValueError`` for an engine whose log ``launch/logparse.py`` does not read."""
    if engine == "auto":
        return LOG_GRAMMARS
    grammar = ENGINES[engine].logs if engine in ENGINES else None
    if grammar is None:
        raise ValueError(f"engine must be auto or one of {', '.join(g.name for g in LOG_GRAMMARS)}, not {engine!r}")
    return (grammar,)


def check_engine(engine: str) -> str:
    """The engine's manifest name, lower case; an ``InputError`` naming the key for any other."""
    return get_engine(engine).name


def resolve_version(engine: str, pinned: str | None, host: Host = BARE_HOST) -> tuple[Version, str]:
    """``engine.resolve_version`` by the engine's manifest name (an unknown name is an ``InputError``)."""
    return _resolve_version(get_engine(engine).memory, pinned, host)
