"""Whether a package is in the engine's environment, from what the deployment and the release say.

The serving environment's facts come from the deployment (its image, its env, the nodes' probed packages where
the engine runs in the probed environment), never from whatever is installed on the machine running the check.
Two sources, in order:

- the nodes' probed packages (a machine snapshot's ``nodes:`` ``packages``, ``machine/node_probe.py``) where the
  deployment runs the engine installed in that environment (``Serving.engine_here``): a version there is
  INSTALLED, a package probed and not found is ABSENT;
- the release's wheel requirements (``engines/<engine>/requires.json``, from the wheel's ``Requires-Dist`` by
  ``tools/engine_requires.py``): what every install of the release shares. A requirement whose markers hold on
  Linux x86_64 and aarch64 for every CPython the release may run on is INSTALLED; one that holds on one machine
  only is UNKNOWN, said so.

Otherwise the answer is UNKNOWN with the words of how the deployment can say it: a package the wheel does not
require may still be in an image someone built.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cache
from importlib import resources

from packaging.version import Version

from pytest_gpulayout.knobs import Serving

#: the machines the checks judge (NVIDIA GPUs on Linux): ``tools/engine_requires.py`` records on which of them each
#: requirement's marker holds for every CPython a release may run on
MACHINES = ("x86_64", "aarch64")


class Presence(Enum):
    INSTALLED = "installed"
    ABSENT = "absent"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Found:
    """Whether the package is there, and where that was read, in words."""

    presence: Presence
    where: str


def canonical(name: str) -> str:
    """The PEP 503 normal form of a distribution name (``flashinfer_python`` -> ``flashinfer-python``)."""
    return "-".join(part for part in name.replace("_", "-").replace(".", "-").lower().split("-") if part)


@cache
def _requires(engine: str) -> Mapping[str, tuple[tuple[str, str, str, str], ...]]:
    root = resources.files(f"pytest_gpulayout.engines.{engine}") / "requires.json"
    data = json.loads(root.read_text(encoding="utf-8"))
    return {v: tuple((n, s, m, on) for n, s, m, on in reqs) for v, reqs in data["releases"].items()}


def requirement(engine: str, version: Version, package: str) -> tuple[str, str, str, str] | None:
    """The release's own requirement of ``package`` (name, specifier, marker, the machines it holds on), read in
    ``version`` or the nearest recorded release below it; None where it has none (or no release at or below is
    recorded)."""
    table = _requires(engine)
    below = [v for v in table if Version(v) <= version]
    if not below:
        return None
    listed = max(below, key=Version)
    name = canonical(package)
    return next((r for r in table[listed] if r[0] == name), None)


def from_wheel(engine: str, version: Version, package: str) -> Found | None:
    """What the release's wheel says of ``package``: INSTALLED where it requires it on every machine the checks
    judge, UNKNOWN (said why) where only on some; None where it does not require it."""
    req = requirement(engine, version, package)
    if req is None:
        return None
    name, spec, marker, holds = req
    on = [m for m in MACHINES if m in holds.split(",")]
    pinned = f"{name}{spec}" + (f"; {marker}" if marker else "")
    if len(on) == len(MACHINES):
        return Found(Presence.INSTALLED, f"{engine} {version}'s wheel requires {pinned} (METADATA Requires-Dist, "
                                         f"on Linux x86_64 and aarch64)")
    where = f"on {' and '.join(on)} only" if on else "not on every CPython of Linux x86_64 or aarch64"
    return Found(Presence.UNKNOWN, f"{engine} {version}'s wheel requires {pinned} {where} (METADATA "
                                   f"Requires-Dist): the node's machine decides")


def node_packages(nodes: Mapping[str, Mapping[str, str | None]]) -> dict[str, str | None]:
    """The packages every node reports, by name: a version where each node has one (the first node's), None
    where some node probed it and lacks it; a package some node did not probe is left out."""
    out: dict[str, str | None] = {}
    per_node = [{canonical(k): v for k, v in pkgs.items()} for pkgs in nodes.values()]
    if not per_node:
        return out
    for name in set.intersection(*(set(p) for p in per_node)):
        versions = [p[name] for p in per_node]
        out[name] = None if any(v is None for v in versions) else versions[0]
    return out


def in_environment(engine: str, version: Version, package: str, serving: Serving,
                   packages: Mapping[str, str | None]) -> Found:
    """Whether ``package`` is in the environment the engine runs in (see the module docstring). ``packages``:
    the nodes' probed packages (``node_packages``), read only where ``serving.engine_here``."""
    name = canonical(package)
    if serving.engine_here and name in packages:
        got = packages[name]
        if got is not None:
            return Found(Presence.INSTALLED, f"{name} {got} is installed in the environment the engine runs in "
                                             f"(the nodes' probed packages)")
        return Found(Presence.ABSENT, f"{name} is not installed in the environment the engine runs in (the "
                                      f"nodes' probed packages)")
    wheel = from_wheel(engine, version, name)
    if wheel is not None and wheel.presence is Presence.INSTALLED:
        return wheel
    place = f"the image {serving.image}" if serving.image else "the engine's environment"
    said = (f"; {wheel.where}" if wheel is not None
            else f"; {engine} {version}'s wheel does not require it (METADATA Requires-Dist)")
    return Found(Presence.UNKNOWN, f"whether {name} is installed in {place} is not known{said}: the deployment "
                                   f"says it where the engine runs in the probed environment (a machine snapshot's "
                                   f"nodes: packages with the engine launched there)")
