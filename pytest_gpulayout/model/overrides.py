"""A model's config with an engine's overrides applied, derived again: what the engine serves when its
command line rewrites the Hugging Face config (vLLM ``--hf-overrides``, ``--rope-scaling``).

Engine-neutral: the engine says how it applies a mapping (``nested``: a mapping for a sub-config updates it key
by key, as vLLM's ``ModelConfig._apply_dict_overrides`` does from 0.11.1; otherwise ``config.update``'s
top-level assignment, which replaces a sub-config with the given mapping), this module applies it to the
``config.json`` the spec was read from (``ModelSpec.config_json``) and reads the result as the loader does
(``model/config.py spec_from_config``), so layers, KV heads, the RoPE scaling and the derived maximum length
all follow. A checkpoint's measured weight bytes are scaled by what the override changes in the computed
ones (fewer layers load fewer weights).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.model.config import spec_from_config
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.model.weights import computed_weight_bytes


def _update_nested(target: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """vLLM 0.11.1+ ``ModelConfig._update_nested``: a mapping over an existing mapping recurses, anything
    else is set."""
    for key, value in overrides.items():
        inner = target.get(key)
        if isinstance(value, Mapping) and isinstance(inner, dict):
            _update_nested(inner, value)
        else:
            target[key] = value


def _is_sub_config(key: str, value: object) -> bool:
    """A sub-config object (``text_config``, ``vision_config``, ...), which ``_apply_dict_overrides`` updates
    in place, as opposed to a dict-valued field (``rope_scaling``), which it sets."""
    return key.endswith("_config") and isinstance(value, dict)


def overridden_config(config: Mapping[str, Any], overrides: Mapping[str, Any], *, nested: bool) -> dict[str, Any]:
    """``config`` with ``overrides`` applied (see the module docstring)."""
    out: dict[str, Any] = json.loads(json.dumps(config))
    for key, value in overrides.items():
        if nested and isinstance(value, Mapping) and _is_sub_config(key, out.get(key)):
            _update_nested(out[key], value)
        else:
            out[key] = value
    return out


def flatten(overrides: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``key=value`` for each leaf (``text_config.num_hidden_layers=2``), for messages."""
    out: list[str] = []
    for key, value in overrides.items():
        if isinstance(value, Mapping) and not key.startswith("rope"):
            out += flatten(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}={json.dumps(value, sort_keys=True)}")
    return out


def with_overrides(model: ModelSpec, overrides: Mapping[str, Any], *, nested: bool, note: str) -> ModelSpec:
    """``model`` as served with ``overrides`` on its config; ``note`` (what applied them, and where) is added to
    its notes. Raises ``InputError`` when the overridden config is one the loader refuses, and when the spec
    has no config to apply them to (a GGUF, a hand-built spec)."""
    if not model.config_json:
        raise InputError(f"{model.name}: no config.json to apply the overrides to", key="--hf-overrides")
    cfg = overridden_config(json.loads(model.config_json), overrides, nested=nested)
    measured = model.weight_bytes_measured
    spec = spec_from_config(cfg, name=model.name, source=model.source)
    if measured:
        before = computed_weight_bytes(model, on_disk=True)
        after = computed_weight_bytes(spec, on_disk=True)
        measured = round(measured * after / before) if before else measured
    return dataclasses.replace(spec, weight_bytes_measured=measured, served_dtype=model.served_dtype,
                               mla_disabled=model.mla_disabled, notes=(*spec.notes, note))
