"""Reading the model a reference names (``resolve.py`` finds it: a path, a model map or folder, the Hugging Face
cache, the catalog, the Hub): its ``config.json`` into a ``ModelSpec``, or its ``.gguf`` header; checkpoint sizes
are measured from safetensors headers where the files are there."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import load_json, read_text
from pytest_gpulayout.model import catalog
from pytest_gpulayout.model.config import spec_from_config
from pytest_gpulayout.model.gguf import load_gguf
from pytest_gpulayout.model.resolve import ModelSources, ResolvedModel, resolve_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.model.weights import measured_weight_bytes


def _read_json(path: Path, *, what: str = "model config") -> dict[str, Any]:
    data = load_json(read_text(path), path)
    if not isinstance(data, dict):
        raise InputError(f"a model config must be a JSON object, got {type(data).__name__}", where=path)
    _refuse_non_finite(data, path, "")
    return data


def _refuse_non_finite(value: object, path: Path, key: str) -> None:
    """``Infinity``, ``-Infinity`` and ``NaN`` are not JSON (Python's ``json`` reads and writes them
    anyway): a shape or a length that is not a finite number has no meaning, and read as a float it
    would be skipped or shown as "?" downstream. One line naming the key instead."""
    if isinstance(value, float) and not math.isfinite(value):
        written = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        raise InputError(f"is {written}, which is not a number a model config can use (JSON has no "
                         f"{written}): write a finite number, or remove the key", where=path, key=key or None)
    if isinstance(value, dict):
        for name, item in value.items():
            _refuse_non_finite(item, path, f"{key}.{name}" if key else str(name))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_non_finite(item, path, f"{key}[{i}]")


def load_model(ref: str, base_dir: Path | None = None, *, sources: ModelSources | None = None,
               revision: str | None = None) -> ModelSpec:
    """A model spec from what a manifest's ``model:`` says (``model/resolve.py`` finds it).

    A local folder holding ``config.json``, the file itself or a ``.gguf`` (relative paths resolve against
    ``base_dir``, the manifest's directory, else the working directory: an existing path wins, so a local copy
    of a catalog model with edits is read from disk); an entry of the model map or a models folder; a Hub id
    (``org/name``, ``@rev`` pinning a revision) in the Hugging Face cache, the bundled catalog (case-insensitive,
    ``Qwen3-8B`` without the organisation also works) or, online, on the Hub. Anything else is a
    ``resolve.ModelNotFound`` (an ``InputError``) saying how to supply it.

    Weights: where the model's folder has ``model.safetensors.index.json`` or ``*.safetensors`` files, their
    size is read from the index / the headers (never the tensor data) into ``weight_bytes_measured``; a
    single-file repository fetched from the Hub gives the Hub's own count; otherwise the memory model computes
    them from the config.
    """
    return spec_of(resolve_model(ref, base_dir, sources, revision=revision))


def spec_of(found: ResolvedModel) -> ModelSpec:
    """The spec of a resolved model: its config read, its checkpoint measured where its files are here."""
    if found.catalog_id is not None:
        entry = found.catalog_id
        return spec_from_config(catalog.load_config(entry), name=entry, source=f"catalog:{entry}")
    assert found.config is not None
    path = found.config
    if path.suffix.lower() == ".gguf":  # llama.cpp: metadata and tensor table
        return load_gguf(path)
    measured = found.weight_bytes or measured_weight_bytes(path.parent)
    return spec_from_config(_read_json(path), name=found.name or path.stem, source=str(path),
                            weight_bytes_measured=measured)
