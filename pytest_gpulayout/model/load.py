"""Finding a model: a directory holding ``config.json``, the file itself, a ``.gguf``, or a bundled
catalog id; checkpoint sizes are measured from safetensors headers where the files are there."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import DIRECTORY, LOOP_MESSAGE, load_json, not_regular, read_text, symlink_loop
from pytest_gpulayout.model import catalog
from pytest_gpulayout.model.config import spec_from_config
from pytest_gpulayout.model.gguf import load_gguf
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


def load_model(ref: str, base_dir: Path | None = None) -> ModelSpec:
    """A model spec from a directory holding ``config.json``, a config file, or a catalog id.

    ``ref`` is what a manifest's ``model:`` says. An existing path wins (relative paths resolve
    against ``base_dir``, the manifest's directory, else the working directory), so a local copy of
    a catalog model with edits is read from disk. Otherwise ``ref`` must be a bundled catalog id,
    e.g. ``Qwen/Qwen3-8B`` (case-insensitive; ``Qwen3-8B`` without the organisation also works).
    Anything else is an ``InputError`` with a "did you mean" and a hint to point at a config.json.

    Weights: where the model directory has ``model.safetensors.index.json`` or ``*.safetensors``
    files, their size is read from the index / the headers (never the tensor data) into
    ``weight_bytes_measured``; otherwise the memory model computes them from the config.
    """
    if not isinstance(ref, str) or not ref.strip():
        raise InputError("the model reference is empty: give a directory with config.json, a config.json "
                         "path or a catalog id such as Qwen/Qwen3-8B")
    ref = ref.strip()
    path = Path(ref).expanduser()
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    kind = not_regular(path)
    if kind is not None and kind != DIRECTORY:  # a FIFO or a device would be waited on, or never end
        raise InputError(f"the model is not a regular file: {kind}", where=path)
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            kind = not_regular(config)
            if kind is not None:
                raise InputError(f"the model's config.json is not a regular file: {kind}", where=config)
            if symlink_loop(config):
                raise InputError(LOOP_MESSAGE + ", so the model's config.json cannot be read", where=config)
            raise InputError("no config.json in this directory (a model directory must hold the "
                             "Hugging Face config.json)", where=path)
        return spec_from_config(_read_json(config), name=path.resolve().name, source=str(config),
                                weight_bytes_measured=measured_weight_bytes(path))
    if path.is_file() and path.suffix.lower() == ".gguf":  # llama.cpp: metadata and tensor table
        return load_gguf(path)
    if path.is_file():
        name = path.resolve().parent.name if path.name == "config.json" else path.stem
        return spec_from_config(_read_json(path), name=name or path.stem, source=str(path),
                                weight_bytes_measured=measured_weight_bytes(path.parent))
    entry = catalog.find(ref)
    if entry is not None:
        return spec_from_config(catalog.load_config(entry), name=entry, source=f"catalog:{entry}")
    looks_like_path = (ref.startswith((".", "/", "~")) or ref.endswith(".json")
                       or ref.count("/") > 1 or "\\" in ref or path.is_symlink())
    close = catalog.suggest(ref)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    if looks_like_path and symlink_loop(path):
        raise InputError(LOOP_MESSAGE + ", so the model's config.json cannot be read", where=str(path))
    if looks_like_path:
        # ``where`` names the path; the text does not repeat it (evaluate.load_models prefixes ``where``
        # to this message when it re-wraps the error under the manifest's key)
        raise InputError(f"no such file or directory.{hint} Point model: at a directory holding "
                         f"config.json or at the config.json itself", where=str(path))
    ids = catalog.catalog_ids()
    raise InputError(f"{ref!r} is neither a path nor a bundled catalog model.{hint} Point model: at a "
                     f"directory holding config.json (or the file itself), or use one of the {len(ids)} "
                     f"catalog ids ({', '.join(ids[:3])}, ...)")
