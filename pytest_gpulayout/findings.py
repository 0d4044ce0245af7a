"""What a check returns: a verdict, a message a person can act on, and the typed facts behind it.

Each check has a frozen dataclass of facts (``rules/<check>.py``: ``PlacementFacts``, ``HeadsFacts``,
...). The planner, the report, the plugin and the startup check read their attributes; only
serialization (``check --json``, JUnit properties, the HTML) turns them into the ``data`` mapping, whose
keys are the JSON contract (README.md, "The CLI"). A field can be ``ABSENT``: the check did not get
that far on this path (e.g. no GPU list when placement failed), and its key is left out of ``data``;
a field whose metadata says ``json=False`` is for the code only (an enum where the JSON has text).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final, TypeVar


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


#: A verdict when some checks did not run (pytest ``-k``, ``-x``, deselection, an interrupt) and none of
#: those that ran failed: never ``pass``, since a check that did not run may be the one that fails.
INCOMPLETE: Final = "incomplete"


def verdict_of(status: Status, incomplete: bool) -> str:
    """The verdict over checks of which some may not have run: a fail stays a fail, anything else is
    ``incomplete``; with every check run, the status itself."""
    return INCOMPLETE if incomplete and status is not Status.FAIL else status.value


class Absent(enum.Enum):
    """Marks a fact the check did not establish on this path (its key is left out of ``data``)."""

    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = Absent.ABSENT

T = TypeVar("T")


def present(value: T | Absent) -> T | None:
    """``value``, or None where the fact is absent: for readers that treat both alike."""
    return None if isinstance(value, Absent) else value


#: Field metadata for facts that are not part of the JSON ``data`` (typed views for the code).
CODE_ONLY: Final[Mapping[str, bool]] = {"json": False}


def _plain(value: object) -> object:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _frozen(value: object) -> object:
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
        # mappings stay mappings (error numbers)
    return value


FactsT = TypeVar("FactsT", bound="Facts")


@dataclass(frozen=True)
class Facts:
    """Base of every check's facts: the fields, in order, are the JSON ``data`` keys."""

    @classmethod
    def from_json(cls: type[FactsT], data: Mapping[str, Any]) -> FactsT:
        """The facts back from their ``data`` (a report from an xdist worker, a saved JSON): a key
        missing from ``data`` is ``ABSENT``; code-only fields take their defaults."""
        unknown = set(data) - {f.name for f in fields(cls) if f.metadata.get("json", True)}
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown keys {sorted(unknown)}")
        values = {f.name: _frozen(data[f.name]) if f.name in data else ABSENT
                  for f in fields(cls) if f.metadata.get("json", True)}
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            if not f.metadata.get("json", True):
                continue
            value = getattr(self, f.name)
            if value is ABSENT:
                continue
            out[f.name] = _plain(value)
        return out


@dataclass(frozen=True)
class NoFacts(Facts):
    """For a finding that carries no numbers."""


@dataclass(frozen=True)
class RawFacts(Facts):
    """Facts as plain JSON numbers: an engine whose answers under a shared check name carry keys of
    their own (llama.cpp), or a saved report whose keys this version does not know."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.values)

    @classmethod
    def from_json(cls: type[FactsT], data: Mapping[str, Any]) -> FactsT:
        return cls(values=dict(data))  # type: ignore[call-arg]


#: The facts class of each check, for ``facts_from_json`` (filled by ``register_facts``).
_FACTS_BY_CHECK: dict[str, type[Facts]] = {}


def register_facts(check: str) -> Callable[[type[FactsT]], type[FactsT]]:
    """Class decorator: ``cls`` holds the facts of ``check`` (so a report can be rebuilt from JSON)."""

    def mark(cls: type[FactsT]) -> type[FactsT]:
        _FACTS_BY_CHECK[check] = cls
        return cls

    return mark


def facts_from_json(check: str, data: Mapping[str, Any]) -> Facts:
    """The typed facts of ``check`` rebuilt from their JSON ``data``."""
    if not data:
        return NoFacts()
    # the rule modules register their classes when they are imported (``evaluate`` imports them all);
    # an unregistered check keeps its numbers as they are
    cls = _FACTS_BY_CHECK.get(check)
    try:
        facts = cls.from_json(data) if cls is not None else RawFacts(dict(data))
    except ValueError:  # keys of another engine's rules (llama.cpp) under the same check name
        return RawFacts(dict(data))
    # a rebuilt finding serializes as it came (an xdist worker's report, a saved JSON): facts that would add or
    # change keys (a skipped cluster check's three keys) stay the numbers they were
    return facts if facts.to_json() == dict(data) else RawFacts(dict(data))


@dataclass(frozen=True)
class Finding:
    """One check's verdict for one deployment.

    ``text`` says what decided (the GPUs, the number, the engine's words) and the fix; ``deployment`` is
    the deployment it is about (the runner sets it: a rule writes only its sentence), and ``message``, the
    two together, is what a person reads. ``facts`` holds the numbers, typed; ``data`` is their JSON form
    (serialization only). Code reads ``status``, ``facts`` and ``text``, never a message taken apart.
    """

    check: str
    status: Status
    text: str
    facts: Facts = field(default_factory=NoFacts)
    deployment: str = ""

    def __post_init__(self) -> None:
        # a finding built from plain JSON numbers (a saved report, a hand-made test) gets typed facts
        if isinstance(self.facts, Mapping):
            object.__setattr__(self, "facts", facts_from_json(self.check, self.facts))

    @property
    def message(self) -> str:
        """``<deployment>: <text>``: the line the CLI prints, pytest reports and the JSON carries."""
        return f"{self.deployment}: {self.text}" if self.deployment else self.text

    def about(self, deployment: str) -> Finding:
        """This finding, of ``deployment``."""
        return self if self.deployment == deployment else replace(self, deployment=deployment)

    def with_status(self, status: Status, text: str | None = None) -> Finding:
        """The same finding and facts with another verdict (and sentence)."""
        return replace(self, status=status, text=self.text if text is None else text)

    @property
    def data(self) -> dict[str, Any]:
        """The facts as the JSON ``data`` mapping: for serialization, never for decisions."""
        return self.facts.to_json()

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status.value, "message": self.message, "data": self.data}


def facts_of(finding: Finding | None, cls: type[FactsT]) -> FactsT | None:
    """The typed facts of ``finding`` when they are a ``cls`` (None for no finding or other facts)."""
    if finding is not None and isinstance(finding.facts, cls):
        return finding.facts
    return None


def _facts(check: str, facts: Facts | None, data: Mapping[str, Any]) -> Facts:
    """``facts``, or facts built from keyword numbers (``passed("links", msg, worst_link="PHB")``)."""
    if facts is not None:
        if data:
            raise TypeError("give facts or keyword numbers, not both")
        return facts
    return facts_from_json(check, data)


def passed(check: str, message: str, facts: Facts | None = None, **data: Any) -> Finding:
    return Finding(check, Status.PASS, message, _facts(check, facts, data))


def warned(check: str, message: str, facts: Facts | None = None, **data: Any) -> Finding:
    return Finding(check, Status.WARN, message, _facts(check, facts, data))


def failed(check: str, message: str, facts: Facts | None = None, **data: Any) -> Finding:
    return Finding(check, Status.FAIL, message, _facts(check, facts, data))


def skipped(check: str, message: str, facts: Facts | None = None, **data: Any) -> Finding:
    return Finding(check, Status.SKIP, message, _facts(check, facts, data))
