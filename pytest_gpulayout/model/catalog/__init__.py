"""Bundled ``config.json`` files of popular models, so a manifest can say ``model: Qwen/Qwen3-8B``.

The files under ``catalog/`` are the published Hugging Face configs (shape numbers exact; chat
templates and token ids trimmed where irrelevant). A file is named after its id with ``/`` written
as ``--`` (the Hugging Face cache's spelling): ``Qwen--Qwen3-8B.json``. They ship as package data,
so a wheel install can plan a layout for a model nobody has downloaded yet.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.suggest import close_matches

_SEP = "--"


@lru_cache(maxsize=1)
def _index() -> dict[str, str]:
    """Lower-cased id -> file name."""
    out: dict[str, str] = {}
    for entry in resources.files(__name__).iterdir():
        name = entry.name
        if name.endswith(".json") and _SEP in name:
            out[name[: -len(".json")].replace(_SEP, "/", 1).lower()] = name
    return out


def catalog_ids() -> list[str]:
    """Every bundled model id (``org/name``), sorted."""
    return sorted(name[: -len(".json")].replace(_SEP, "/", 1) for name in _index().values())


def find(ref: str) -> str | None:
    """The catalog id ``ref`` names, or ``None``.

    Matches the full id case-insensitively (``qwen/qwen3-8b``), or a bare name without the
    organisation (``Qwen3-8B``) when exactly one entry has it. A different organisation with a
    known name (``models/Qwen3-8B``) is *not* a match: that is a path that does not exist, and
    quietly reading the catalog instead would hide the mistake.
    """
    key = ref.strip().lower()
    ids = {i.lower(): i for i in catalog_ids()}
    if key in ids:
        return ids[key]
    if "/" not in key:
        hits = [i for low, i in ids.items() if low.split("/", 1)[1] == key]
        if len(hits) == 1:
            return hits[0]
    return None


def suggest(ref: str, n: int = 2) -> list[str]:
    """Catalog ids close to ``ref`` (for "did you mean")."""
    ids = catalog_ids()
    key = ref.strip()
    close = close_matches(key, ids, n=n)
    bare = key.rsplit("/", 1)[-1]
    by_name = {i.split("/", 1)[1]: i for i in ids}
    for m in close_matches(bare, list(by_name), n=n):
        if by_name[m] not in close:
            close.append(by_name[m])
    return close[:n]


def load_config(model_id: str) -> dict[str, Any]:
    """The bundled ``config.json`` of a catalog id (as returned by ``find``)."""
    name = _index().get(model_id.lower())
    if name is None:
        raise InputError(f"{model_id!r} is not in the bundled catalog", key="model")
    entry = resources.files(__name__).joinpath(name)
    data = json.loads(entry.read_text(encoding="utf-8"))
    if not isinstance(data, dict):   # pragma: no cover - the catalog is ours and tested
        raise InputError("catalog entry is not a JSON object", where=f"catalog:{model_id}")
    return data
