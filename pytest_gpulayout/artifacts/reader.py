"""What an artifact reader is: one kind of file a team ships (Kubernetes objects, KubeRay, KServe, compose,
Helm values, shell text), read into the engine invocations it runs and the pod around each.

Each kind is one module of ``artifacts/`` with a ``READER`` object behind this protocol, listed once in
``artifacts/registry.py``; ``artifacts/load.py`` hands every file to every reader and builds the deployments
(``artifacts/build.py``). Adding a kind is a module with its ``READER`` and one line in the registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pytest_gpulayout.artifacts.commands import Invocation
from pytest_gpulayout.inputs.shell import Files
from pytest_gpulayout.origin import Pod


@dataclass(frozen=True)
class Artifact:
    """One file as the readers see it: its text, and its YAML documents when it is YAML (None: shell text)."""

    path: Path
    #: how errors name it (the path as the user gave it, or ``--cmd``)
    where: str
    text: str
    docs: tuple[object, ...] | None = None

    def mappings(self) -> tuple[Mapping[str, object], ...]:
        """The documents that are mappings (the objects most readers look at)."""
        return tuple(d for d in self.docs or () if isinstance(d, Mapping))


@dataclass(frozen=True)
class Read:
    """What one reader found in an artifact: each engine invocation with the pod that runs it (None: a bare
    command line), and what it recognised (``seen``: for the one line that says nothing runs an engine)."""

    found: tuple[tuple[Invocation, Pod | None], ...] = ()
    seen: tuple[str, ...] = ()


class Reader(Protocol):
    """One kind of artifact."""

    @property
    def kind(self) -> str:
        """What it reads, as the README and the "found no engine" line name it."""
        ...

    def read(self, artifact: Artifact) -> Read:
        """The invocations ``artifact`` holds of this kind (nothing when it holds none of it)."""
        ...


def beside(folder: Path) -> Files:
    """The scripts a shell text may run or source that stand beside it (``source ./env.sh``, ``bash
    scripts/serve.sh``): a relative path under ``folder`` that is a readable text file; an absolute path, or one
    that leaves the folder, names the machine the artifact runs on, not the artifact (None)."""
    root = folder.resolve()

    def read(path: str) -> tuple[str, str] | None:
        if not path or path.startswith(("/", "~", "$")):
            return None
        target = (root / path).resolve()
        if root not in target.parents or not target.is_file():
            return None
        try:
            return target.read_text(encoding="utf-8"), str(target.relative_to(root))
        except (OSError, UnicodeDecodeError):
            return None

    return read


def read_all(readers: Sequence[Reader], artifact: Artifact) -> Read:
    """Every reader's findings in ``artifact``, in the registry's order."""
    found: list[tuple[Invocation, Pod | None]] = []
    seen: list[str] = []
    for reader in readers:
        r = reader.read(artifact)
        found.extend(r.found)
        seen.extend(r.seen)
    return Read(tuple(found), tuple(seen))
