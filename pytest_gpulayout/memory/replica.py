"""One replica as the engines' rank loops read it, and their answer per rank: the data the memory model
hands an engine's budget (``MemoryEngine.rank_budgets``) and gets back. Its own module so that what the
model asks of an engine (``memory/common.py``) and the pool's frame (``memory/pool.py``) both use it
without importing each other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from packaging.version import Version

from pytest_gpulayout.machine.facts import Gpu
from pytest_gpulayout.memory.communicators import TpLink
from pytest_gpulayout.model.spec import ModelSpec


class MemoryUnknown(ValueError):
    """The pool cannot be predicted because a GPU's memory is unknown (e.g. a machine read from
    ``nvidia-smi topo -m`` text). The message says which GPU and which figure; checks skip with it."""


def need_memory(gpus: Sequence[Gpu], attr: str, what: str, engine: str) -> list[int]:
    missing = [g.index for g in gpus if getattr(g, attr) is None]
    if missing:
        names = ", ".join(f"GPU{i}" for i in missing)
        raise MemoryUnknown(f"the {what} of {names} is unknown, and {engine} sizes its pool from it "
                            f"(use a live probe or a snapshot with memory)")
    return [getattr(g, attr) for g in gpus]



@dataclass(frozen=True)
class Replica:
    """One replica as each engine's rank loop reads it (``engines/<name>/budget.py``): layout, GPUs in
    rank order, the memory fraction and the per-stage sizes (``rank = pp_rank x tp + tp_rank``)."""

    model: ModelSpec
    version: Version
    tp: int
    pp: int
    gpus: tuple[Gpu, ...]
    fraction: float
    kv_cache_dtype: str
    #: the context length the engine runs with (the deployment's, else the model's derived maximum)
    max_model_len: int | None
    ranges: tuple[range, ...]
    kv_by_stage: tuple[int, ...]
    w_by_stage: tuple[int, ...]
    link: TpLink = TpLink.UNKNOWN

    @property
    def gpu_name(self) -> str:
        return self.gpus[0].name if self.gpus else ""


@dataclass
class RankBudgets:
    """An engine's answer per rank: the KV budget, the tokens it alone could hold (None: no KV layer
    on its stage), what it reserves besides the weights and why; where the engine measures the pool's
    concurrency its own way (vLLM's KV cache groups), that figure and its note."""

    block: int
    budgets: list[int]
    tokens: list[int | None]
    caches: list[object | None]
    reserves: list[int] = field(default_factory=list)
    reserve_why: str = ""
    concurrency: float | None = None
    concurrency_note: str = ""
    #: what may stop the engine starting that the pool does not show (sentences; a speculative draft that does not
    #: fit where the engine puts it): ``kv_pool`` never passes silently on them
    cautions: list[str] = field(default_factory=list)
