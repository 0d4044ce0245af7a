"""The order of the launches, and why a measurement stopped.

Launches are interleaved, the order reversed every round (A B, B A, A B ...; with three: A B C, C B A):
whatever drifts through the measurement (a co-tenant starting, the machine warming, a cache filling)
falls on every layout alike instead of on whichever ran last, the way a paired, counterbalanced
(ABBA) design cancels a linear drift. Run in a fixed order, the drift is mixed with the layout.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


def round_order(names: Sequence[str], round_index: int) -> list[str]:
    """The deployments in the order of round ``round_index`` (0-based): forward, then backward."""
    return list(names) if round_index % 2 == 0 else list(reversed(names))


def interleaved(names: Sequence[str], rounds: int) -> list[str]:
    """Every launch of ``rounds`` rounds, in order: ``A B B A`` for two deployments and two rounds."""
    return [n for r in range(rounds) for n in round_order(names, r)]


class StopReason(enum.Enum):
    """Why no further launch was made."""

    DECIDED = "decided"        # the verdict's interval excludes 1
    BUDGET = "budget"          # budget_s was spent (the intervals still overlapped, or planned launches were cut)
    LAUNCHES = "launches"      # the most launches a layout is given, and the intervals still overlap
    FAILED = "failed"          # a deployment could not be measured
    ALONE = "alone"            # one deployment: nothing to compare
    NO_VERDICT = "no_verdict"  # the deployments share no load they all served


@dataclass(frozen=True)
class Stopped:
    reason: StopReason
    text: str

    def as_dict(self) -> dict[str, str]:
        return {"reason": self.reason.value, "text": self.text}
