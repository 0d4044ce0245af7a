"""What the ``startup`` check found when it launched the engine (or why it did not)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_gpulayout.findings import ABSENT, Absent, Facts, register_facts


@register_facts("startup")
@dataclass(frozen=True)
class StartupFacts(Facts):
    """The real pool from the engine's log and how the launch went. A check that did not launch
    carries only the first four figures, all None; a launch that could not start has no log."""

    kv_tokens: int | None | Absent = ABSENT
    kv_tokens_all: tuple[int, ...] | Absent = ABSENT
    max_concurrency: float | None | Absent = ABSENT
    max_model_len: int | None | Absent = ABSENT
    seconds_to_kv: float | None | Absent = ABSENT
    seconds_total: float | None | Absent = ABSENT
    error_kind: str | None | Absent = ABSENT
    error_numbers: dict[str, float] | Absent = ABSENT
    predicted_kv_tokens: int | None | Absent = ABSENT
    ratio: float | None | Absent = ABSENT
    engine_config: dict[str, str] | Absent = ABSENT      # what the engine's log said it ran with (StartupLog.config)
    contradictions: tuple[str, ...] | Absent = ABSENT   # where that contradicts the deployment (verdict.cross_examine)
    log_path: str | None | Absent = ABSENT
    stopped_by: str | None | Absent = ABSENT
    returncode: int | None | Absent = ABSENT
    leftover_pids: tuple[int, ...] | Absent = ABSENT
    command: tuple[str, ...] | Absent = ABSENT
    stop: str | None | Absent = ABSENT             # how the tree was stopped (signal, kill, ...)
    escalated: bool | Absent = ABSENT              # the stop needed SIGKILL after the grace
    stop_note: str | None | Absent = ABSENT
    cleaned: tuple[str, ...] | Absent = ABSENT     # /dev/shm names, TMPDIR entries removed after the stop
    containment: str | None | Absent = ABSENT      # cgroup | subreaper
    memory_not_released: tuple[str, ...] | Absent = ABSENT
    # across the hosts of a Ray machine (launch/across.py); absent for a one-host launch
    nodes: tuple[str, ...] | Absent = ABSENT       # the hosts the launch spanned, rank 0 first
    node_commands: dict[str, tuple[str, ...]] | Absent = ABSENT  # host -> argv started there
    transport: dict[str, Any] | Absent = ABSENT    # NCCL's transport lines (launch/nccl.py) and the verdict
    node_leftovers: dict[str, tuple[int, ...]] | Absent = ABSENT  # host -> pids of this launch left after the stop
    launch_marker: str | Absent = ABSENT           # GPULAYOUT_LAUNCH_ID: how its processes were found on each node
    lock_wait_s: float | Absent = ABSENT           # seconds it waited for its GPU locks before the engine started
    log_cut: str | None | Absent = ABSENT          # why the saved log stops short (its size cap, a failed write)


#: The facts of a startup check that launched nothing.
NOT_LAUNCHED = StartupFacts(kv_tokens=None, max_concurrency=None, seconds_to_kv=None, error_kind=None)
