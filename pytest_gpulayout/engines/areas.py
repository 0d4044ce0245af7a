"""Rule areas: the modules of an engine's config-time rules that judge in frames of their own.

An engine's ``config_checks.py`` resolves one shared namespace (the layout, the line's destinations, the
model's config) and judges over it the ledger rules whose entries read those names as they mean there. A
release's config classes reuse names with other meanings (``self.model`` is the draft in vLLM's
``SpeculativeConfig``, ``self.backend`` the Mamba backend in ``MambaConfig``), so each area of rules that reads
such names is a module of its own that judges its rules in a frame of its own over the shared namespace:
``engines/vllm/rules_*.py``, ``engines/sglang/rules_*.py``.

An area is a module with ``RULES`` (rule id -> what it refuses, in words; the ids its ``config_classes.yaml``
items give) and ``judge(ask)``. The engine lists its areas once (``AREAS`` in its ``config_checks.py``); their
rules join the engine's ``RULES`` and are left out of the shared judgement, and ``judge_areas`` asks each in
order. A new area is a module and one line there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from packaging.version import Version

from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.knobs import Serving
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout, Refusal, RuleBook


@dataclass(frozen=True)
class Ask:
    """One deployment as a rule area is asked about it: the engine's rule book, the release asked and the
    nearest listed one at or below it, the shared namespace (``values``), the rules in force for the line
    (``active``: the engine's RULES less the ones its gates leave out), and what the frames are built from;
    ``serving`` and ``packages`` (the nodes' probed packages, ``packages.node_packages``) say the engine's own
    environment (``engines/packages.py``)."""

    book: RuleBook
    version: Version
    listed: Version
    values: Mapping[str, object]
    active: tuple[str, ...]
    args: ResolvedArgs
    model: ModelSpec
    layout: Layout
    env: Mapping[str, str]
    serving: Serving = field(default_factory=Serving)
    packages: Mapping[str, str | None] = field(default_factory=dict)

    def among(self, rules: Iterable[str]) -> list[str]:
        """The rules of ``rules`` in force for this line, in the engine's order."""
        wanted = frozenset(rules)
        return [r for r in self.active if r in wanted]

    def judge(self, frame: Mapping[str, object], rules: Iterable[str]) -> Judged:
        """The rules of ``rules`` in force, judged over the shared namespace with ``frame`` over it."""
        wanted = self.among(rules)
        if not wanted:
            return Judged()
        return self.book.judge(self.version, {**self.values, **frame}, rules=wanted)


class Area(Protocol):
    """A module of config-time rules judged in frames of its own (see the module docstring)."""

    RULES: Mapping[str, str]

    def judge(self, ask: Ask) -> Judged: ...


def rules_of(areas: Sequence[Area]) -> dict[str, str]:
    """Every rule of ``areas``, in order; a rule id claimed by two areas is a programming error."""
    out: dict[str, str] = {}
    for area in areas:
        twice = set(out) & set(area.RULES)
        if twice:
            raise ValueError(f"rule {sorted(twice)[0]!r} is in two areas")
        out.update(area.RULES)
    return out


def combine(parts: Iterable[Judged], notes: Iterable[str] = ()) -> Judged:
    """The refusals of ``parts`` in order, and ``notes`` then their entries not judged, each said once."""
    parts = tuple(parts)
    refusals: tuple[Refusal, ...] = tuple(r for j in parts for r in j.refusals)
    return Judged(refusals, tuple(dict.fromkeys((*notes, *(n for j in parts for n in j.not_judged)))))


def judge_areas(areas: Sequence[Area], ask: Ask) -> tuple[Judged, ...]:
    """What each area makes of ``ask``, in order."""
    return tuple(area.judge(ask) for area in areas)
