"""Triton Inference Server's TensorRT-LLM backend: a model repository's ``config.pbtxt`` with ``backend:
"tensorrtllm"`` (``triton-inference-server/tensorrtllm_backend``, ``all_models/inflight_batcher_llm/tensorrt_llm``).

The backend reads its ``parameters`` (``gpt_model_path`` the built engine, ``kv_cache_free_gpu_mem_fraction``,
``max_tokens_in_paged_kv_cache``, ``gpu_device_ids``, ...); the layout is the engine's own, built into it: the
engine folder's ``config.json`` (``pretrained_config.mapping``: ``tp_size``, ``pp_size``), and Triton is started
with that world (``scripts/launch_triton_server.py --world_size``). The model whose shapes the checks read is the
checkpoint the ensemble's ``preprocessing/config.pbtxt`` names (``tokenizer_dir``), beside this model's folder.
A template value left unfilled (``${engine_dir}``: ``tools/fill_template.py`` was not run) and a layout the
engine folder does not say are named as unknown (the ``config`` check says so). The parameters are fields, not
a command line: the deployment's arguments are these values, judged as they are."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from packaging.version import Version

from pytest_gpulayout.artifacts.commands import Invocation
from pytest_gpulayout.artifacts.reader import Artifact, Read
from pytest_gpulayout.engines.registry import get_engine
from pytest_gpulayout.inputs.engine_args import ResolvedArgs

ENGINE = "trtllm"
VIA = "the Triton tensorrtllm backend parameters"
_BACKEND = re.compile(r'^\s*backend\s*:\s*"tensorrtllm"', re.M)
_PARAM = re.compile(r'parameters\s*:?\s*\{\s*key\s*:\s*"([^"]+)"\s*value\s*:?\s*\{\s*string_value\s*:\s*"([^"]*)"',
                    re.S)
_TEMPLATE = re.compile(r"\$\{[^}]*\}")
_TOKENIZER = re.compile(r'key\s*:\s*"tokenizer_dir"\s*value\s*:?\s*\{\s*string_value\s*:\s*"([^"]*)"', re.S)


def is_trtllm_config(text: str) -> bool:
    return bool(_BACKEND.search(text))


def parameters(text: str) -> dict[str, str]:
    """The model's ``parameters`` (protobuf text format: ``key`` / ``value { string_value }``), comments dropped."""
    body = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    return {m.group(1): m.group(2) for m in _PARAM.finditer(body)}


def _engine_config(folder: Path | None) -> Mapping[str, Any] | None:
    """A built engine's ``config.json`` (what ``trtllm-build`` wrote), where the artifact holds it."""
    if folder is None or not (folder / "config.json").is_file():
        return None
    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, Mapping) else None


def _engine_mapping(data: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """``(tp_size, pp_size)`` from a built engine's ``config.json`` (``pretrained_config.mapping``)."""
    if data is None:
        return None
    mapping = (data.get("pretrained_config") or {}).get("mapping") or data.get("mapping") or {}
    if not isinstance(mapping, Mapping) or "tp_size" not in mapping:
        return None
    return int(mapping.get("tp_size") or 1), int(mapping.get("pp_size") or 1)


def _built_max_seq_len(data: Mapping[str, Any] | None) -> int | None:
    """The longest sequence the engine was built for (``build_config.max_seq_len``): a built engine serves
    no longer request, so its pool is judged in requests of that length, not the model's maximum."""
    build = (data or {}).get("build_config")
    value = build.get("max_seq_len") if isinstance(build, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _local(base: Path, path: str) -> Path | None:
    """A folder the parameter names, where it is part of the artifact (relative to the repository's files)."""
    if not path or _TEMPLATE.search(path):
        return None
    candidate = Path(path) if Path(path).is_absolute() else base / path
    return candidate if candidate.is_dir() else None


def _tokenizer_dir(model_dir: Path) -> str | None:
    """The checkpoint the ensemble's preprocessing model loads (``../preprocessing/config.pbtxt``)."""
    pre = model_dir.parent / "preprocessing" / "config.pbtxt"
    if not pre.is_file():
        return None
    m = _TOKENIZER.search(pre.read_text(encoding="utf-8", errors="replace"))
    return m.group(1) if m and not _TEMPLATE.search(m.group(1)) else None


def find(artifact: Artifact) -> list[Invocation]:
    params = parameters(artifact.text)
    base = artifact.path.parent
    engine_dir = params.get("gpt_model_path") or params.get("engine_dir") or ""
    unknown = list(dict.fromkeys(t for v in params.values() for t in _TEMPLATE.findall(v)))
    built = _engine_config(_local(base, engine_dir))
    layout = _engine_mapping(built)
    if layout is None and engine_dir and not _TEMPLATE.search(engine_dir):
        unknown.append(f"the engine's TP x PP (its config.json in gpt_model_path {engine_dir})")
    model = _tokenizer_dir(base) or engine_dir
    values: dict[str, Any] = {"model": model}
    if layout is not None:
        values["tp_size"], values["pp_size"] = layout
    max_seq_len = _built_max_seq_len(built)
    if max_seq_len is not None:
        values["max_seq_len"] = max_seq_len
    fraction = params.get("kv_cache_free_gpu_mem_fraction", "")
    try:
        values["kv_cache_free_gpu_memory_fraction"] = float(fraction)
    except ValueError:
        pass

    def fields(version: Version | None) -> ResolvedArgs:
        defaults = get_engine(ENGINE).cli.resolve_args([], version)
        return ResolvedArgs(engine=ENGINE, release=defaults.release, values=MappingProxyType({**defaults.values,
                                                                                             **values}),
                            given=frozenset(values), release_note=defaults.release_note, dests=defaults.dests)

    name = str(artifact.path.parent.name or artifact.path.name)
    return [Invocation(ENGINE, (), "tritonserver tensorrtllm backend", f"{name}/config.pbtxt",
                       MappingProxyType({}), unknown=tuple(unknown), fields=fields, via=VIA)]


@dataclass(frozen=True)
class TritonReader:
    kind: str = "Triton tensorrtllm backend config.pbtxt"

    def read(self, artifact: Artifact) -> Read:
        if artifact.docs is not None or not is_trtllm_config(artifact.text):
            return Read()
        return Read(tuple((i, None) for i in find(artifact)), ("Triton tensorrtllm model config",))


READER = TritonReader()
