"""What a release refuses on a GPU generation, or cannot build at all: the engine-neutral half.

Each engine answers ``Engine.generation_refusals(subject)`` (``engines/vllm/generation.py``,
``engines/sglang/generation.py``) from the facts ``tools/engine_facts.py`` extracted from its released
wheels (``engines/<name>/releases/<version>.json``, shipped as package data). This module loads those
files, picks the release whose facts answer for a deployment's release, and holds the checks the
engines share the shape of (a quantization method's minimum capability, the architecture registry).

A release between two extracted ones is answered by the nearest extracted release at or below it, and
every message says which; a release older than the oldest extracted one is not guessed at: the finding
says what was not checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from pytest_gpulayout.engine import GenerationVerdict, Subject
from pytest_gpulayout.machine.capability import Capability, as_int, format_capability, lowest

if TYPE_CHECKING:
    from pytest_gpulayout.machine.facts import Gpu


@dataclass
class Collect:
    refusals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def verdict(self) -> GenerationVerdict:
        return GenerationVerdict(tuple(self.refusals), tuple(self.warnings), tuple(self.notes))


@dataclass(frozen=True)
class ReleaseFacts:
    """The extracted facts that answer for ``asked`` (those of ``release``, the nearest at or below it)."""

    engine: str
    asked: Version
    release: Version
    data: Mapping[str, Any]

    @property
    def exact(self) -> bool:
        return self.asked == self.release

    def has(self, group: str) -> bool:
        return group in self.data.get("groups", ()) and group in self.data

    def cite(self, display: str) -> str:
        """``vLLM 0.33.0`` or ``vLLM 0.29.1 (facts of 0.28.0, the nearest extracted release below it)``."""
        if self.exact:
            return f"{display} {self.asked}"
        return f"{display} {self.asked} (facts of {self.release}, the nearest extracted release below it)"


@cache
def extracted_releases(engine: str) -> tuple[Version, ...]:
    """The releases whose facts ship in ``engines/<engine>/releases/``, oldest first."""
    try:
        root = resources.files(f"pytest_gpulayout.engines.{engine}") / "releases"
        names = [entry.name for entry in root.iterdir() if entry.name.endswith(".json")]
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        return ()
    out = []
    for name in names:
        try:
            out.append(Version(name[: -len(".json")]))
        except InvalidVersion:
            continue
    return tuple(sorted(out))


@cache
def _load(engine: str, release: str) -> Mapping[str, Any]:
    root = resources.files(f"pytest_gpulayout.engines.{engine}") / "releases"
    data: Mapping[str, Any] = json.loads((root / f"{release}.json").read_text(encoding="utf-8"))
    return data


def release_facts(engine: str, version: Version, group: str = "architectures") -> ReleaseFacts | None:
    """The facts that answer for ``version``: those of the nearest extracted release at or below it whose file
    holds ``group`` (releases between full extractions carry only the model-type and interface groups,
    ``tools/engine_facts.py --only model``); None when no release at or below it holds the group."""
    for v in reversed([v for v in extracted_releases(engine) if v <= version]):
        data = _load(engine, str(v))
        if group in data.get("groups", ()):
            return ReleaseFacts(engine, version, v, data)
    return None


def not_known(display: str, engine: str, version: Version, what: str, group: str = "architectures") -> str:
    """The note for a release older than the oldest extracted one (that holds ``group``)."""
    known = [v for v in extracted_releases(engine) if group in _load(engine, str(v)).get("groups", ())]
    oldest = f" (the oldest extracted is {known[0]})" if known else ""
    return f"{what} of {display} {version} not checked: no facts were extracted for it{oldest}"


# -- the deployment's GPUs ------------------------------------------------------------------------

def deployment_gpus(s: Subject) -> list[Gpu]:
    """The GPUs the deployment runs on (every GPU of the machine where they cannot be placed)."""
    try:
        return [s.machine.gpu(i) for i in s.placement.gpus]
    except Exception:  # PlacementError: placement's own check reports it
        return list(s.machine.gpus)


def gpu_capability(s: Subject) -> tuple[Capability | None, str, list[Gpu]]:
    """The lowest compute capability among the deployment's GPUs (every rank runs the same kernels),
    the GPU it belongs to in words, and the GPUs whose capability is unknown."""
    gpus = deployment_gpus(s)
    cc, unknown = lowest(gpus)
    who = next((g.name or g.label for g in gpus if g.compute_capability == cc), "") if cc else ""
    return cc, who, unknown


def launch_value(args: Sequence[str], *flags: str) -> str | None:
    """The value of the last of ``flags`` in ``launch.args`` (``--dtype half`` or ``--dtype=half``)."""
    found: str | None = None
    for k, a in enumerate(args):
        for f in flags:
            if a == f and k + 1 < len(args):
                found = args[k + 1]
            elif a.startswith(f + "="):
                found = a[len(f) + 1:]
    return found


# -- shared checks ----------------------------------------------------------------------------------

def min_capability(entry: Mapping[str, Any]) -> int | None:
    """A quantization method's minimum capability on CUDA from its facts entry (the lowest of the cases the
    engine chooses between: never a refusal it might not make); None where the facts do not say."""
    for key in ("min_capability", "min_capability_on_cuda"):
        v = entry.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    cases = [c.get("value") for c in entry.get("min_capability_on_cuda_cases", ()) if isinstance(c, Mapping)]
    ints = [c for c in cases if isinstance(c, int) and not isinstance(c, bool)]
    return min(ints) if ints else None


def gate_template(facts: ReleaseFacts) -> tuple[str, str] | None:
    """The quantization gate's text and file in this release (``quantization.gate_texts``: the
    ``_get_quantization_config`` raise)."""
    for g in facts.data.get("quantization", {}).get("gate_texts", ()):
        if (str(g.get("function", "")).endswith("_get_quantization_config")
                and "Minimum capability" in str(g.get("template", ""))):
            return str(g["template"]), str(g["file"])
    return None


def fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``{expression}`` replaced by the value whose key the expression contains
    (``{quant_config.get_min_capability()}`` by ``get_min_capability``); unknown ones stay as written."""
    def sub(m: re.Match[str]) -> str:
        expr = m.group(1)
        for key, value in values.items():
            if key in expr:
                return value
        return m.group(0)
    return re.sub(r"\{([^{}]+)\}", sub, template)


def check_quantization_gate(c: Collect, s: Subject, facts: ReleaseFacts, display: str, method: str | None,
                            gate_file: str, cc: Capability | None, who: str) -> None:
    """The release's refusal of a quantization method below its minimum capability
    (``get_min_capability`` of the method's config class, checked when the engine builds its config)."""
    if method is None:
        return
    entry = facts.data.get("quantization", {}).get("by_method", {}).get(method)
    if entry is None:
        c.notes.append(f"quantization method {method!r} is not among {facts.cite(display)}'s methods "
                       f"(its minimum capability not checked)")
        return
    need = min_capability(entry)
    if need is None or need < 0:
        return
    if cc is None:
        c.notes.append(f"{method} needs compute capability {need / 10:.1f} on {facts.cite(display)}; the GPUs' "
                       f"capability is unknown, so not checked (give compute_capability in the snapshot)")
        return
    if as_int(cc) >= need:
        return
    gate = gate_template(facts)
    template, file = gate if gate else (
        "The quantization method {q} is not supported for the current GPU. Minimum capability: "
        "{get_min_capability}. Current capability: {capability}.", gate_file)
    text = fill(template, {"quantization": method, "get_min_capability": str(need), "capability": str(as_int(cc))})
    c.refusals.append(
        f"{s.model.name} is {method}-quantized, which {facts.cite(display)} builds only on compute capability "
        f">= {need / 10:.1f} ({entry.get('class', method)}.get_min_capability, {entry.get('file', file)}); "
        f"{who} has {format_capability(cc)}. {display} raises: \"{text}\" ({file})")


def short_list(names: Sequence[str], limit: int = 8) -> str:
    """The first ``limit`` names and how many more (the engine prints hundreds)."""
    head = ", ".join(names[:limit])
    return f"[{head}, ... {len(names) - limit} more]" if len(names) > limit else f"[{head}]"
