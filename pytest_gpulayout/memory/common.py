"""What every part of the memory model shares: the refusal when a GPU's memory is unknown, and what
the arithmetic asks of the engine it sizes for.

The memory model never imports an engine and never tests an engine's name: it is handed the engine
object (``engines/<name>/engine.py``) and asks it, through ``MemoryEngine``, the few things that differ
(how it splits layers over pipeline stages, how it spreads experts, its per-rank budget). The engine
objects satisfy this protocol structurally (they implement ``pytest_gpulayout.engine.Engine``, which
includes it), so the dependency points one way: engines use memory, memory names no engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from packaging.version import Version

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.memory.replica import MemoryUnknown, RankBudgets, Replica

if TYPE_CHECKING:
    from pytest_gpulayout.host import Host
    from pytest_gpulayout.knobs import LaunchKnobs
    from pytest_gpulayout.memory.draft import DraftMemory
    from pytest_gpulayout.model.spec import ModelSpec

__all__ = ["FractionAnswer", "MemoryEngine", "MemoryUnknown", "RankBudgets", "Replica", "engine_version",
           "resolve_version"]


class FractionAnswer(Protocol):
    """An engine's default memory fraction and its derivation in words (``engine.FractionDefault``)."""

    @property
    def fraction(self) -> float: ...

    @property
    def why(self) -> str: ...

    @property
    def notes(self) -> tuple[str, ...]: ...


class MemoryEngine(Protocol):
    """What the memory model asks of an engine (a part of ``pytest_gpulayout.engine.Engine``)."""

    name: str
    display: str
    latest_known: str
    #: variable that overrides the pipeline layer split
    pp_partition_env: str
    #: why the default memory fraction cannot be derived without the GPU's total ("" where it can)
    fraction_needs_total: str
    #: whether its own max_concurrency already accounts for sliding-window layers
    concurrency_counts_sliding: bool

    def parse_version(self, text: str) -> Version: ...

    def stage_split(self, num_layers: int, pp: int, version: Version | None) -> tuple[int, ...]:
        """Layers per pipeline stage when no override is given."""
        ...

    def expert_layout(self, tp: int, dp: int, expert_parallel: bool) -> tuple[int, int]:
        """``(EP size, ranks per expert)``."""
        ...

    def expert_scale(self, model: ModelSpec) -> float:
        """How much larger its loaded experts are than on disk (a kernel's re-layout)."""
        ...

    def load_notes(self, model: ModelSpec) -> list[str]:
        """What its prediction for ``model`` assumes about the loaded weights."""
        ...

    def default_memory_fraction(self, version: Version, *, gpu_total_mib: int, host_min_total_mib: int,
                                tp: int, pp: int, model: ModelSpec | None,
                                knobs: LaunchKnobs | None = None) -> FractionAnswer:
        ...

    def rank_budgets(self, r: Replica, *, knobs: LaunchKnobs, host: Host, dp: int, enable_expert_parallel: bool,
                     enforce_eager: bool, max_num_batched_tokens: int | None, max_num_seqs: int | None,
                     gpu_total_mib: int, notes: list[str]) -> RankBudgets:
        """Each rank's KV budget, the tokens it alone could hold and its reserve, the engine's way."""
        ...

    def draft_memory(self, model: ModelSpec, *, knobs: LaunchKnobs, version: Version, tp: int,
                     ranges: tuple[range, ...], kv_cache_dtype: str, dp: int,
                     enable_expert_parallel: bool) -> DraftMemory:
        """What the line's speculative draft (``knobs.draft``) takes out of the KV budget, per stage
        (``memory/draft.py``); ``NO_DRAFT`` where there is none or the engine keeps it outside the budget."""
        ...


def engine_version(v: Version | str | None, engine: MemoryEngine) -> Version:
    """``v`` as the engine spells releases; the newest release read when none is given."""
    if v is None:
        return engine.parse_version(engine.latest_known)
    return v if isinstance(v, Version) else engine.parse_version(v)


def resolve_version(engine: MemoryEngine, pinned: str | None, host: Host) -> tuple[Version, str]:
    """The engine version defaults are taken for, and where it came from.

    ``pinned`` (the deployment's ``engine_version``) wins: it lets a CI machine without the engine
    check what the GPU host will run. Then the package installed on ``host``. Else the newest release we
    know, which the source string says, so a report never hides that it assumed.
    """
    if pinned is not None and str(pinned).strip():
        return engine.parse_version(str(pinned)), "pinned"
    found = host.installed(engine.name)
    if found is not None:
        try:
            return engine.parse_version(found), "installed"
        except InputError:
            pass
    return engine.parse_version(engine.latest_known), "assumed latest known"
