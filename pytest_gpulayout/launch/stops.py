"""When a launch is asked to stop, and why it stopped: the launcher's two vocabularies, as enums.

Both are ``str`` enums so that their JSON (``check --json``'s ``startup.stopped_by``) and every
comparison with the old strings (``result.stopped_by == "kv"``) stay what they were; ``str()`` and
f-strings give the value on every Python (3.12 changed ``format()`` of mixed-in enums to the name).
"""

from __future__ import annotations

import enum


class _Word(str, enum.Enum):
    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class StopWhen(_Word):
    """What the launch waits for before it stops the engine (``launch(stop_when=...)``)."""

    KV = "kv"         # every expected engine has reported its KV pool
    READY = "ready"   # the server says it is up (and, with ``serve``, the load is done)


class StopReason(_Word):
    """Why a launch stopped (``LaunchResult.stopped_by``)."""

    KV = "kv"                  # every expected pool reported, the engine still running
    READY = "ready"            # the server was up (``stop_when="ready"``), still running
    ERROR = "error"            # a recognised error line in its log
    EXIT = "exit"              # the engine exited by itself before it was stopped: it did not start
    TIMEOUT = "timeout"        # ``timeout_s`` passed first
    INTERRUPT = "interrupt"    # a signal to the launching process
    WATCHDOG = "watchdog"      # the watchdog was killed from outside; the launcher stopped the tree


def stop_when(value: str | StopWhen) -> StopWhen:
    """``value`` as a ``StopWhen``; ``ValueError`` naming the choices for anything else."""
    try:
        return StopWhen(value)
    except ValueError:
        raise ValueError(f"stop_when must be 'kv' or 'ready', not {value!r}") from None
