"""Preemptions read against the prediction: the engine's ``/metrics`` counted preemptions during a
window at a concurrency the predicted KV pool (the kv_pool check's: ``runner.subject_of(...).replicas``)
says fits. Then the pool the engine really had was smaller than predicted, or the load's requests
were longer than the measure block says: either is worth a line, with the numbers.

The load's need per replica: ``ceil(concurrency / replicas)`` requests of ``input_tokens +
output_tokens``. A trace, or an open-loop request rate, holds no known number of requests at once, so
no claim is made for them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_gpulayout.workload import Load, MeasureSpec


def load_tokens_per_replica(spec: MeasureSpec, concurrency: int, replicas: int) -> int | None:
    """KV tokens the load holds at once on the busiest replica; None for a trace."""
    if spec.trace is not None or spec.trace_requests:
        return None
    return math.ceil(concurrency / max(replicas, 1)) * (spec.input_tokens + spec.output_tokens)


def preemption_note(spec: MeasureSpec, load: Load, preemptions: float | None,
                    predicted: Sequence[int] | None) -> str | None:
    """The line for ``preemptions`` counted at ``load`` against ``predicted`` (KV tokens per replica);
    None when nothing was preempted, or no prediction or load size is known."""
    if not preemptions or not predicted or load.concurrency is None:
        return None
    concurrency = load.concurrency
    need = load_tokens_per_replica(spec, concurrency, len(predicted))
    if need is None:
        return None
    pool = min(predicted)
    pools = f"{pool:,} tokens" + (f" per replica (x{len(predicted)})" if len(predicted) > 1 else "")
    per = math.ceil(concurrency / len(predicted))
    held = f"{per} requests of {spec.input_tokens} + {spec.output_tokens} tokens = {need:,} tokens"
    if pool >= need:
        return (f"{preemptions:g} preemptions at concurrency {concurrency}, where the predicted pool "
                f"({pools}, kv_pool) holds the load ({held}, {pool / need:.1f}x): the engine's real pool was "
                f"smaller than predicted (compare the startup check's), or the requests were longer")
    return (f"{preemptions:g} preemptions at concurrency {concurrency}, as predicted: the pool ({pools}, kv_pool) "
            f"is short of the load ({held})")
