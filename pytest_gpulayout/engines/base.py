"""What every engine module provides: one ``Engine`` per serving engine, behind one ``Protocol``.

Each engine's knowledge lives in its own module (``vllm.py``, ``sglang.py``): its names, the flags the
manifest keys map to, the variables it reads, its defaults by release, and what its startup check
expects from the log. Adding an engine is one new module registered in ``engines/__init__.py``; the
manifest, the rules, the launch and ``parse-log`` ask the registry instead of spelling engine names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from packaging.version import Version

    from pytest_gpulayout.engines.knobs import LaunchKnobs
    from pytest_gpulayout.model.spec import ModelSpec


@dataclass(frozen=True)
class Flags:
    """The engine's command-line flags for what the manifest's keys say (None: no such flag)."""

    model: str                      # the model path when the entry point does not take it positionally
    tensor_parallel_size: str
    pipeline_parallel_size: str
    data_parallel_size: str
    max_model_len: str
    memory_fraction: str
    kv_cache_dtype: str = "--kv-cache-dtype"
    #: aliases the engine also accepts for the same settings (refused in ``launch.args``)
    aliases: Mapping[str, tuple[str, ...]] | None = None


@dataclass(frozen=True)
class FractionDefault:
    """An engine's default memory fraction for one host and layout, and the derivation in words."""

    fraction: float
    why: str


class Engine(Protocol):
    """One serving engine. Everything that differs between releases is a method of ``version``."""

    #: the manifest's ``engine`` value and the name in messages
    name: str
    display: str
    #: package names that provide it (metadata only: never imported)
    distributions: tuple[str, ...]
    #: newest release whose source the rules were read from
    latest_known: str
    #: ``--kv-cache-dtype`` choices it accepts
    kv_cache_dtypes: tuple[str, ...]
    #: variable that lets ``max_model_len`` exceed the model's own maximum
    long_context_env: str
    #: variable that overrides the pipeline layer split
    pp_partition_env: str
    #: the module run as ``python -m`` to serve
    server_module: str
    flags: Flags

    def default_command(self, version: Version | None, python: str) -> list[str]:
        """The entry point of ``version`` in the environment of ``python``."""
        ...

    def default_memory_fraction(self, version: Version, *, gpu_total_mib: int, host_min_total_mib: int,
                                tp: int, pp: int, model: ModelSpec | None,
                                knobs: LaunchKnobs | None = None) -> FractionDefault:
        """The memory fraction the engine uses when none is given."""
        ...

    def knobs(self, args: Sequence[str], env: Mapping[str, str]) -> LaunchKnobs:
        """What a launch's flags and variables change for the checks."""
        ...

    def expected_reports(self, version: Version | None, *, tp: int, pp: int, dp: int) -> tuple[int, int]:
        """``(engines, ranks per engine)`` whose KV pool lines the startup check waits for."""
        ...
