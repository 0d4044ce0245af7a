"""The class vLLM's registry resolves for a model and the interfaces it has, by release.

``tools/engine_facts.py`` reads each release's registry (``model_executor/models/registry.py``) and the classes it
names into the ``interfaces`` group of ``releases/*.json``: which architectures set each interface flag
(``supports_pp``, ``supports_multimodal``, ``is_pooling_model``, ...), which were read without any, and which
generate text (``text_generation``: the class or a base defines ``compute_logits``,
``interfaces_base.is_text_generation_model``). The registry resolves the first of the model's architectures it
knows; the rules of every area ask this one module for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from packaging.version import Version

from pytest_gpulayout.generation import release_facts
from pytest_gpulayout.model.spec import ModelSpec


@dataclass(frozen=True)
class ModelClass:
    """The class of a model as a release's registry resolves it: its architecture, each interface flag of the
    release's facts, and whether it generates text (None where the release's facts do not say)."""

    architecture: str
    flags: Mapping[str, bool]
    generates: bool | None

    def flag(self, name: str) -> bool:
        return self.flags.get(name, False)


@dataclass(frozen=True)
class _Index:
    by_flag: Mapping[str, frozenset[str]]
    known: frozenset[str]
    text_generation: frozenset[str] | None


@cache
def _index(release: Version) -> _Index | None:
    facts = release_facts("vllm", release, group="interfaces")
    if facts is None:
        return None
    interfaces = facts.data["interfaces"]
    by_flag = {name: frozenset(archs) for name, archs in interfaces["by_flag"].items()}
    known = frozenset().union(*by_flag.values()) | frozenset(interfaces.get("without_flags", ()))
    generating = interfaces.get("text_generation")
    return _Index(by_flag, known, frozenset(generating) if generating is not None else None)


def model_class(model: ModelSpec, version: Version) -> ModelClass | None:
    """The class of ``model`` in the nearest extracted release at or below ``version`` (the first of its
    architectures that release knows); None where no extracted release knows it."""
    index = _index(version)
    if index is None:
        return None
    for arch in model.architectures:
        if arch in index.known:
            return ModelClass(arch, {flag: arch in archs for flag, archs in index.by_flag.items()},
                              None if index.text_generation is None else arch in index.text_generation)
    return None
