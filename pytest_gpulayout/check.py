"""A check as an object: its name, the question it answers, the type of its facts, how it runs, how it
reads in the summary table, and what it needs of the checks before it.

Every check of the suite is one of these, listed once in ``suite.py``; ``runner.py`` runs them, in that
order, for pytest, ``gpulayout check``, the planner, the JSON, JUnit and the HTML, so that all of them
give the same verdicts by construction. What a check needs of the others is declared (``Gate``): the
runner works it out, not a rule of its own. An engine whose answer differs replaces or amends a single
check by name (``Replace``, ``Amend``, ``Omit``: ``EngineRules.check_overrides``); a new shared check runs for
every engine unless one says otherwise, and says why.

The model is pytest-xdist's scheduler protocol: a small protocol, chosen once; a check here is a
``Check`` (the protocol) and a rule of ``rules/`` becomes one through ``Rule``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pytest_gpulayout.engine import Amend, Replace, Subject
from pytest_gpulayout.findings import Facts, Finding, Status, skipped

if TYPE_CHECKING:
    from pytest_gpulayout.deployment import Deployment
    from pytest_gpulayout.host import Host
    from pytest_gpulayout.launch.progress import Progress


class Then(enum.Enum):
    """What a gate does to the check it guards when it holds."""

    #: the check is not run: it is skipped, naming the finding that decided (``Check.blocked``)
    SKIP = "skip"
    #: the check runs, but a pass or a warning becomes a skip that keeps its numbers for reference
    NOT_JUDGED = "not judged"


@dataclass(frozen=True)
class Gate:
    """``on``'s finding decides this check when ``when(finding)`` holds: ``then`` says how.

    ``why`` is the words of the reason ("the engine refuses this layout")."""

    on: str
    when: Callable[[Finding], bool]
    then: Then
    why: str = ""


def fails(f: Finding) -> bool:
    """A gate's condition: the other check failed."""
    return f.status is Status.FAIL


@dataclass(frozen=True)
class LaunchOptions:
    """What a run may do beyond the static checks: launch the engines (``--gpulayout-launch``,
    ``gpulayout check --launch``; a deployment's ``launch.enabled`` launches it anyway), where their logs
    go, and where each launch reports its phases."""

    launch: bool = False
    log_dir: Path | None = None
    progress: Callable[[str], Progress] | None = None


@dataclass(frozen=True)
class Context:
    """What a check is run with besides its subject: the deployment's findings so far (those it declared
    gates on are there), the host the edges read, and the launch options."""

    before: Mapping[str, Finding]
    host: Host
    options: LaunchOptions = field(default_factory=LaunchOptions)


class Check(Protocol):
    """One check of the suite (``suite.CHECKS``)."""

    @property
    def name(self) -> str:
        """The item name, the table column and the key of ``check --json``."""
        ...

    @property
    def question(self) -> str:
        """The question it answers, in one line (the README's table, the pytest item)."""
        ...

    @property
    def facts(self) -> type[Facts]:
        """The type of its facts (``Finding.facts``), for rebuilding a finding from its JSON."""
        ...

    @property
    def gates(self) -> tuple[Gate, ...]:
        """The checks whose findings decide this one, and how."""
        ...

    @property
    def static(self) -> bool:
        """A pure function of the subject, no process started (what the planner runs); ``startup`` launches."""
        ...

    def applies(self, dep: Deployment) -> bool:
        """Whether the check exists for ``dep`` at all (``deploy``: only for what an artifact's pod runs). A
        property of the deployment, so that pytest can parametrize the suite before anything is resolved."""
        ...

    def idle(self, s: Subject, ctx: Context) -> Finding | None:
        """The finding when the check has nothing to do in this run (``startup`` not asked to launch),
        before any gate is looked at; None: it runs."""
        ...

    def run(self, s: Subject, ctx: Context) -> Finding:
        """The finding for ``s`` (the runner names the deployment on it)."""
        ...

    def cell(self, f: Finding) -> str:
        """The one number a reader scans for in the summary table's cell (and the HTML's)."""
        ...

    def blocked(self, blocker: Finding, gate: Gate) -> Finding:
        """The finding when ``gate`` holds with ``Then.SKIP``: not run, because of ``blocker``."""
        ...


@dataclass(frozen=True)
class Rule:
    """A pure rule of ``rules/`` (``(subject) -> Finding``) as a check."""

    name: str
    question: str
    facts: type[Facts]
    rule: Callable[[Subject], Finding]
    #: the table cell's number from this check's facts ("" for a finding without them)
    number: Callable[[Finding], str] | None = None
    gates: tuple[Gate, ...] = ()
    static: bool = True

    def applies(self, dep: Deployment) -> bool:
        return True

    def idle(self, s: Subject, ctx: Context) -> Finding | None:
        return None

    def run(self, s: Subject, ctx: Context) -> Finding:
        return self.rule(s)

    def cell(self, f: Finding) -> str:
        # another engine's answer under this name (``Replace``) carries facts of its own: no number here
        return self.number(f) if self.number is not None and isinstance(f.facts, self.facts) else ""

    def blocked(self, blocker: Finding, gate: Gate) -> Finding:
        return skipped(self.name, f"not checked: {blocker.check} fails ({gate.why or blocker.text})")


@dataclass(frozen=True)
class Overridden:
    """A shared check as one engine runs it: replaced or amended (``Override``)."""

    shared: Check
    override: Replace | Amend

    @property
    def name(self) -> str:
        return self.shared.name

    @property
    def question(self) -> str:
        return self.shared.question

    @property
    def facts(self) -> type[Facts]:
        return self.shared.facts

    @property
    def gates(self) -> tuple[Gate, ...]:
        return self.shared.gates

    @property
    def static(self) -> bool:
        return self.shared.static

    def applies(self, dep: Deployment) -> bool:
        return self.shared.applies(dep)

    def idle(self, s: Subject, ctx: Context) -> Finding | None:
        return self.shared.idle(s, ctx)

    def run(self, s: Subject, ctx: Context) -> Finding:
        o = self.override
        if isinstance(o, Replace):
            return o.rule(s)
        return o.amend(s, self.shared.run(s, ctx))

    def cell(self, f: Finding) -> str:
        return self.shared.cell(f)

    def blocked(self, blocker: Finding, gate: Gate) -> Finding:
        return self.shared.blocked(blocker, gate)
