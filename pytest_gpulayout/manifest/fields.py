"""The deployment's keys, spelled once: each key of a deployment (and of its ``require`` and ``launch``
sections) with how its value is read, and whether an engine flag carries it on a command line.

``manifest/keys.py`` takes the key lists from here, ``manifest/load.py`` the parsers, ``manifest/keys.ARG_OWNERS``
the keys whose flags ``launch.args`` may not repeat, and ``artifacts/build.py`` the keys it reads back from an
engine's command line (``Engine.flags`` names each one's flag); ``deployment.Deployment`` has a field of
each name (a test holds them to it). The model is vLLM's ``EngineArgs``: one table the CLI derives from.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from pytest_gpulayout.engines.llamacpp import manifest as _llamacpp
from pytest_gpulayout.engines.registry import ENGINE_NAMES, KV_CACHE_DTYPES
from pytest_gpulayout.inputs.values import (
    INT_TEXT_RE,
    Ctx,
    bool_value,
    choice_value,
    describe,
    did_you_mean,
    int_value,
    number_value,
    show,
    string_list_value,
    string_value,
)
from pytest_gpulayout.machine.facts import normalize_link

#: how a value is read: ``(ctx, value, dotted key) -> value`` or ``ctx.fail``
Parser = Callable[[Ctx, object, str], object]

_UUID_RE = re.compile(r"(GPU|MIG)-[0-9A-Za-z][0-9A-Za-z/-]*")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
NV_FAMILY = {"NV", "NVLINK", "NVSWITCH", "NVL"}


def optional(parse: Callable[[Ctx, object, str], object]) -> Callable[[Ctx, object, str], object]:
    """``null`` allowed: it means the built-in "not set" default (and overrides ``defaults``)."""

    def wrapped(ctx: Ctx, value: object, key: str) -> object:
        return None if value is None else parse(ctx, value, key)

    return wrapped

def parse_gpus(ctx: Ctx, value: object, key: str) -> tuple[int | str, ...]:
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if parts and all(INT_TEXT_RE.fullmatch(p) for p in parts):
            return ctx.fail(key, f"must be a list, not the string {show(value)}: write it as a list: "
                                 f"[{', '.join(parts)}]")
    if isinstance(value, int) and not isinstance(value, bool):
        return ctx.fail(key, f"must be a list of CUDA indices or GPU UUIDs, not the number {value}: "
                             f"write [{value}]")
    if not isinstance(value, (list, tuple)):
        return ctx.fail(key, f"must be a list of CUDA indices or GPU UUIDs, not {describe(value)}")
    if not value:
        return ctx.fail(key, "is empty: list the GPUs, or leave gpus out to use the first tp*pp*dp visible")
    out: list[int | str] = []
    seen: dict[object, int] = {}
    for i, item in enumerate(value):
        item_key = f"{key}[{i}]"
        if isinstance(item, bool):
            ctx.fail(item_key, f"must be a CUDA index (an integer >= 0) or a GPU UUID, not {describe(item)}")
        if isinstance(item, int):
            if item < 0:
                ctx.fail(item_key, f"must be a CUDA index >= 0, not {item}")
            ident: object = item
        elif isinstance(item, str):
            text = item.strip()
            if INT_TEXT_RE.fullmatch(text):
                ctx.fail(item_key, f"must be a CUDA index or a GPU UUID, not the string {show(item)}: "
                                   f"write {int(text)} without quotes")
            if not _UUID_RE.fullmatch(text):
                ctx.fail(item_key, f"{show(item)} is neither a CUDA index nor a GPU UUID "
                                   "(GPU-... or MIG-..., as nvidia-smi -L prints them)")
            item = text
            ident = text.lower()
        else:
            ctx.fail(item_key, f"must be a CUDA index or a GPU UUID, not {describe(item)}")
        if ident in seen:
            ctx.fail(key, f"lists GPU {item} twice (items {seen[ident]} and {i}); "
                          "each rank needs its own GPU")
        seen[ident] = i
        out.append(item)
    return tuple(out)

def parse_memory_fraction(ctx: Ctx, value: object, key: str) -> float:
    what = "a fraction of GPU memory in (0, 1], e.g. 0.9"
    v = number_value(ctx, value, key, what=what)
    if not 0 < v <= 1:
        hint = f": for {v:g}% write {v / 100:g}" if 2 <= v <= 100 else ""
        return ctx.fail(key, f"must be {what}, not {v:g}{hint}")
    return v

def parse_engine_version(ctx: Ctx, value: object, key: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        why = " (YAML reads an unquoted 0.10 as the number 0.1)" if isinstance(value, float) else ""
        return ctx.fail(key, f"must be a quoted version string such as \"0.11.0\", "
                             f"not the number {value!r}{why}")
    text = string_value(ctx, value, key, what="a version string such as \"0.11.0\"")
    if re.fullmatch(r"b\d+", text.strip()):
        return text.strip()  # a llama.cpp build tag (b11434)
    try:
        Version(text.strip())
    except InvalidVersion:
        return ctx.fail(key, f"{show(value)} is not a version number (write e.g. \"0.11.0\")")
    return text.strip()

def parse_tp_links(ctx: Ctx, value: object, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return ctx.fail(key, f"must be a list of link kinds, not the string {show(value)}: "
                             f"write it as a list: [{value}]")
    if not isinstance(value, (list, tuple)):
        return ctx.fail(key, f"must be a list of link kinds such as [NVLink, PIX], not {describe(value)}")
    if not value:
        return ctx.fail(key, "is empty, which would reject every TP group: list the link kinds to accept, "
                             "or leave tp_links out for the default policy")
    kinds: list[str] = []
    choices = ("NVLink", "NV<n>", "PIX", "PXB", "PHB", "NODE", "SYS", "NET")
    for i, item in enumerate(value):
        item_key = f"{key}[{i}]"
        if not isinstance(item, str):
            ctx.fail(item_key, f"must be a link kind (NVLink, NV<n>, PIX, PXB, PHB, NODE, SYS, NET), "
                               f"not {describe(item)}")
        text = item.strip()
        if text.upper() in NV_FAMILY:
            kind = "NV"
        else:
            try:
                kind = normalize_link(text)
            except ValueError:
                if text.upper() in ("PCIE", "PCI", "PCI-E"):
                    ctx.fail(item_key, f"{show(item)} is not one link kind: list the PCIe kinds to accept "
                                       "(PIX, PXB, PHB, NODE, SYS)")
                ctx.fail(item_key, f"unknown link kind {show(item)}{did_you_mean(text, choices)} "
                                   f"(expected NVLink, NV<n>, PIX, PXB, PHB, NODE, SYS or NET)")
        if kind not in kinds:
            kinds.append(kind)
    return tuple(kinds)

def parse_env(ctx: Ctx, value: object, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        return ctx.fail(key, f"must be a mapping of NAME: \"value\", not {describe(value)}")
    out: dict[str, str] = {}
    for name, val in value.items():
        item_key = f"{key}.{name}"
        if not isinstance(name, str) or not _ENV_NAME_RE.fullmatch(name):
            ctx.fail(item_key, f"{show(name)} is not an environment variable name")
        if name == "CUDA_VISIBLE_DEVICES":
            ctx.fail(item_key, "is set by the launcher from the placement; choose the GPUs with the "
                               "deployment's 'gpus' key so the static checks look at the same GPUs")
        if isinstance(val, str):
            out[name] = val
        elif isinstance(val, (bool, int, float)):
            text = str(val).lower() if isinstance(val, bool) else str(val)
            ctx.fail(item_key, f"must be a string, not {describe(val)}: quote it: \"{text}\"")
        else:
            ctx.fail(item_key, f"must be a string, not {describe(val)}")
    return out

def positive_number(what: str, *, allow_zero: bool) -> Callable[[Ctx, object, str], float]:
    def parse(ctx: Ctx, value: object, key: str) -> float:
        v = number_value(ctx, value, key, what=what)
        if v < 0 or (v == 0 and not allow_zero):
            return ctx.fail(key, f"must be {what}, not {v:g}")
        return v

    return parse


def int_at_least(minimum: int) -> Callable[[Ctx, object, str], int]:
    def parse(ctx: Ctx, value: object, key: str) -> int:
        return int_value(ctx, value, key, minimum=minimum)

    return parse


@dataclass(frozen=True)
class Field:
    """One key: its name (the manifest's and the ``Deployment`` field's), how its value is read, and whether an
    engine flag carries it (``Engine.flags.<key>``: ``--tensor-parallel-size``, ``--tp-size``, ...)."""

    key: str
    parse: Parser
    #: an engine flag carries it on a command line (artifacts read it back; launch.args may not repeat it)
    flag: bool = False
    #: a whole number (an artifact's flag value is read as one)
    integer: bool = False


def _model(ctx: Ctx, v: object, k: str) -> object:
    return string_value(ctx, v, k, what="a model directory, a config.json path or a catalog id like 'Qwen/Qwen3-8B'")


def _engine(ctx: Ctx, v: object, k: str) -> object:
    return choice_value(ctx, v, k, ENGINE_NAMES, "engine")


def _kv_cache_dtype(ctx: Ctx, v: object, k: str) -> object:
    return choice_value(ctx, v, k, KV_CACHE_DTYPES, "kv_cache_dtype")


#: a deployment's own keys, in the order the manifest documents them (``require``, ``launch``, ``measure`` are
#: sections; llama.cpp's keys follow, ``engines/llamacpp/manifest.py``)
DEPLOYMENT_FIELDS: tuple[Field, ...] = (
    Field("model", _model),
    Field("engine", _engine),
    Field("gpus", optional(parse_gpus)),
    Field("tensor_parallel_size", int_at_least(1), flag=True, integer=True),
    Field("pipeline_parallel_size", int_at_least(1), flag=True, integer=True),
    Field("data_parallel_size", int_at_least(1), flag=True, integer=True),
    Field("max_model_len", optional(int_at_least(1)), flag=True, integer=True),
    Field("memory_fraction", optional(parse_memory_fraction), flag=True),
    Field("kv_cache_dtype", _kv_cache_dtype, flag=True),
    Field("engine_version", optional(parse_engine_version)),
    Field("enable_expert_parallel", bool_value),
    *(Field(key, parse) for key, parse in _llamacpp.FIELDS.items()),
)
SECTIONS = ("require", "launch", "measure")
REQUIRE_FIELDS: tuple[Field, ...] = (
    Field("kv_tokens", optional(int_at_least(1))),
    Field("concurrency", optional(int_at_least(1))),
    Field("tp_links", optional(parse_tp_links)),
    Field("balance_headroom_gib", positive_number("a number of GiB >= 0", allow_zero=True)),
)


def _command(ctx: Ctx, v: object, k: str) -> object:
    return string_list_value(ctx, v, k, example="vllm, serve", allow_empty=False)


def _args(ctx: Ctx, v: object, k: str) -> object:
    return () if v is None else string_list_value(ctx, v, k, example="--enforce-eager", allow_empty=True)


LAUNCH_FIELDS: tuple[Field, ...] = (
    Field("enabled", bool_value),
    Field("command", optional(_command)),
    Field("args", _args),
    Field("env", parse_env),
    Field("timeout_s", positive_number("a number of seconds > 0", allow_zero=False)),
    Field("dummy_weights", bool_value),
)


def parsers(fields: tuple[Field, ...]) -> Mapping[str, Parser]:
    """``{key: parser}`` of a table."""
    return {f.key: f.parse for f in fields}


#: the keys an engine flag carries, in order
FLAG_KEYS: tuple[str, ...] = tuple(f.key for f in DEPLOYMENT_FIELDS if f.flag)
INTEGER_KEYS: frozenset[str] = frozenset(f.key for f in DEPLOYMENT_FIELDS if f.integer)


def parsed(fields: tuple[Field, ...], ctx: Ctx, raw: Mapping[Any, Any], prefix: str) -> dict[str, Any]:
    """Each key of ``raw`` read by its field's parser (the keys are checked before: ``keys.check_keys``)."""
    table = parsers(fields)
    return {key: table[key](ctx, value, f"{prefix}.{key}") for key, value in raw.items()}
