"""What a speculative-decoding draft takes of each rank's memory, as the engine counts it (``draft_memory``).

Engine-neutral: the engine says how much of the draft sits inside the budget its KV pool is sized from (vLLM: the
draft's weights are loaded before the profile run and its attention layers join the KV cache spec, so both come out
of the pool; SGLang: the draft worker is built after the target's pool, from the slack, so nothing comes out of it),
and what it could not count. ``predict_pool`` adds the per-stage figures to the target's and carries ``uncounted``
into the prediction, where the ``kv_pool`` check reads it: a pool that leaves something out is an upper bound, and a
requirement it meets only so is never a silent pass.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DraftMemory:
    """Per PP stage: the draft's weight bytes and KV bytes per token on the most loaded rank of that stage, as they
    come out of the engine's KV budget (empty: nothing does); ``notes``: what the figures assume; ``uncounted``: what
    of the draft's memory is not in them (each a phrase naming it), so the predicted pool is an upper bound."""

    weights_by_stage: tuple[int, ...] = ()
    kv_by_stage: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    uncounted: tuple[str, ...] = ()


NO_DRAFT = DraftMemory()


def plus(base: tuple[int, ...], extra: tuple[int, ...]) -> tuple[int, ...]:
    """``base`` with ``extra`` added stage by stage (``extra`` empty: ``base`` unchanged)."""
    if not extra:
        return base
    if len(extra) != len(base):
        raise ValueError(f"draft figures for {len(extra)} stages, the target has {len(base)}")
    return tuple(b + e for b, e in zip(base, extra, strict=True))
