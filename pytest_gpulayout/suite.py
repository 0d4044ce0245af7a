"""The suite: every check, once, in the order it is reported (the one registry).

pytest's items (``checks/``), ``gpulayout check``'s lines and table, the JSON's keys, JUnit's properties,
the HTML's columns and the planner's verdicts all come from this list, through ``runner.py``. A new check
is a rule with its facts class (``rules/<name>.py``), its ``Check`` object there, one line here, and a test
module in ``checks/``; it runs for every engine, unless an engine replaces, amends or omits it by name
(``EngineRules.check_overrides``, applied by ``checks_for``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pytest_gpulayout.check import Check, Overridden
from pytest_gpulayout.engine import Amend, Engine, Omit, Override, Replace
from pytest_gpulayout.findings import Finding
from pytest_gpulayout.rules.balance import BALANCE
from pytest_gpulayout.rules.cluster import CLUSTER
from pytest_gpulayout.rules.config import CONFIG
from pytest_gpulayout.rules.deploy import DEPLOY
from pytest_gpulayout.rules.heads import HEADS
from pytest_gpulayout.rules.kv_pool import KV_POOL
from pytest_gpulayout.rules.links import LINKS
from pytest_gpulayout.rules.placement import PLACEMENT
from pytest_gpulayout.rules.startup import STARTUP

#: Every check, in the order findings are reported.
CHECKS: tuple[Check, ...] = (CONFIG, PLACEMENT, HEADS, BALANCE, LINKS, KV_POOL, CLUSTER, STARTUP, DEPLOY)
BY_NAME: Mapping[str, Check] = MappingProxyType({c.name: c for c in CHECKS})
CHECK_NAMES: tuple[str, ...] = tuple(BY_NAME)
#: the checks that start no process (the planner's), in order
STATIC_NAMES: tuple[str, ...] = tuple(c.name for c in CHECKS if c.static)


def _apply(check: Check, override: Override | None) -> Check | None:
    if override is None:
        return check
    if isinstance(override, Omit):
        return None
    if isinstance(override, (Replace, Amend)):
        return Overridden(check, override)
    raise TypeError(f"not a check override: {override!r}")  # pragma: no cover - mypy checks the union


def checks_for(engine: Engine) -> tuple[Check, ...]:
    """The suite as ``engine`` runs it: each shared check, replaced or amended where the engine says so,
    without the ones it omits (each with its reason, ``Omit.why``)."""
    overrides = engine.rules.check_overrides
    unknown = set(overrides) - set(BY_NAME)
    if unknown:  # an override of a check that does not exist would never run: say so where it is made
        raise ValueError(f"{engine.name}: check_overrides names no check of the suite: {', '.join(sorted(unknown))}")
    return tuple(c for c in (_apply(check, overrides.get(check.name)) for check in CHECKS) if c is not None)


def cell(f: Finding) -> str:
    """The number of ``f`` in the summary table (its check object says which)."""
    c = BY_NAME.get(f.check)
    return c.cell(f) if c is not None else ""
