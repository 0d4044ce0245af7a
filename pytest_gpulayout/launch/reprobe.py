"""After a launch on a live machine: did the GPUs' memory come back? Memory that did not means
something of the engine survives outside its tree, or another tenant arrived."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from pytest_gpulayout.machine.facts import Machine

MEMORY_SLACK_MIB = 256     # free memory may wobble by the driver's own bookkeeping
MEMORY_WAIT_S = 30.0       # the driver frees a dead process's memory within seconds


def _try_probe(reprobe: Callable[[], Machine] | None) -> Machine | None:
    if reprobe is None:
        return None
    try:
        return reprobe()
    except Exception:  # a probe that fails here only loses the after-check, never the launch
        return None


def memory_not_released(before: Machine, reprobe: Callable[[], Machine], indices: Sequence[int], *,
                        wait_s: float | None = None, sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """GPUs (machine ``indices``) with less free memory than before the launch, after waiting up to
    ``wait_s``. Matched by UUID, so a re-probe that numbers GPUs differently still compares the same cards.
    """
    wanted = [g for g in before.gpus if g.index in set(indices)]
    deadline = time.monotonic() + (MEMORY_WAIT_S if wait_s is None else wait_s)
    while True:
        try:
            after = reprobe()
        except Exception:
            return []
        short = []
        for g in wanted:
            now = next((h for h in after.gpus if h.uuid and h.uuid == g.uuid), None)
            if now is None or g.memory_free_mib is None or now.memory_free_mib is None:
                continue
            if now.memory_free_mib < g.memory_free_mib - MEMORY_SLACK_MIB:
                short.append(f"GPU{g.index} has {(g.memory_free_mib - now.memory_free_mib) / 1024:.2f} GiB less free "
                             f"than before the launch")
        if not short or time.monotonic() >= deadline:
            return short
        sleep(1.0)
