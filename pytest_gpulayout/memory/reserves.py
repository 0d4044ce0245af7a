"""The memory fraction an engine uses when none is given, with the refusal when it cannot be derived.

What each engine keeps out of the pool besides the weights is the engine's own
(``engines/vllm/budget.py``: the profile run's reserve; ``engines/sglang/budget.py``: context, load
overheads); estimates are cited there.
"""

from __future__ import annotations

from packaging.version import Version

from pytest_gpulayout.knobs import LaunchKnobs
from pytest_gpulayout.memory.common import FractionAnswer, MemoryEngine, MemoryUnknown, engine_version
from pytest_gpulayout.model.spec import ModelSpec


def default_fraction_answer(engine: MemoryEngine, version: Version | str, *, gpu_total_mib: int | None, tp: int,
                            pp: int, model: ModelSpec | None = None, host_min_total_mib: int | None = None,
                            knobs: LaunchKnobs | None = None) -> FractionAnswer:
    """The engine's default memory fraction for this GPU size and layout, why, and its notes.

    The rule is the engine's, by release (``engines/<name>/engine.py``). An engine that
    sizes it from the smallest GPU on the host (``host_min_total_mib``, default: this GPU's total)
    needs it (SGLang): ``MemoryUnknown`` when it is ``None``.
    """
    v = engine_version(version, engine)
    if engine.fraction_needs_total and gpu_total_mib is None:
        raise MemoryUnknown(engine.fraction_needs_total)
    total = gpu_total_mib or 0
    return engine.default_memory_fraction(v, gpu_total_mib=total, host_min_total_mib=host_min_total_mib or total,
                                          tp=tp, pp=pp, model=model, knobs=knobs)


def default_memory_fraction(engine: MemoryEngine, version: Version | str, *, gpu_total_mib: int | None, tp: int,
                            pp: int, model: ModelSpec | None = None,
                            host_min_total_mib: int | None = None,
                            knobs: LaunchKnobs | None = None) -> tuple[float, str]:
    """``default_fraction_answer``'s fraction and why."""
    d = default_fraction_answer(engine, version, gpu_total_mib=gpu_total_mib, tp=tp, pp=pp, model=model,
                                host_min_total_mib=host_min_total_mib, knobs=knobs)
    return d.fraction, d.why
