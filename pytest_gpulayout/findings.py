"""What a check returns: a verdict, a message a person can act on, and the numbers behind it."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


class Status(str, enum.Enum):
    """Verdict of one check. Ordered so that ``worst()`` can pick the most severe.

    ``skip`` ranks below ``pass``: a deployment whose checks passed except one that did not apply
    (e.g. links with TP=1) has passed; one whose checks were all skipped is ``skip``.
    """

    PASS = "pass"
    SKIP = "skip"
    WARN = "warn"
    FAIL = "fail"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]

    def __str__(self) -> str:  # "pass", not "Status.PASS", in messages and JSON
        return self.value


_SEVERITY = {Status.SKIP: 0, Status.PASS: 1, Status.WARN: 2, Status.FAIL: 3}


def worst(statuses: Iterable[Status]) -> Status:
    """The most severe status; a deployment whose checks were all skipped is ``skip``."""
    statuses = list(statuses)
    if not statuses:
        return Status.SKIP
    return max(statuses, key=lambda s: s.severity)


@dataclass(frozen=True)
class Finding:
    """One check's verdict for one deployment.

    ``message`` names the deployment, the GPUs and the number that decided, and the fix.
    ``data`` holds those numbers for JSON, JUnit properties and the HTML report.
    """

    check: str
    status: Status
    message: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status.value, "message": self.message, "data": dict(self.data)}


def passed(check: str, message: str, **data: Any) -> Finding:
    return Finding(check, Status.PASS, message, data)


def warned(check: str, message: str, **data: Any) -> Finding:
    return Finding(check, Status.WARN, message, data)


def failed(check: str, message: str, **data: Any) -> Finding:
    return Finding(check, Status.FAIL, message, data)


def skipped(check: str, message: str, **data: Any) -> Finding:
    return Finding(check, Status.SKIP, message, data)
