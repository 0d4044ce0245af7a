"""The manifest keys of ``engine: llamacpp`` (design.md, "Contracts added in the second wave").

``manifest/load.py`` adds :data:`KEYS` to the deployment keys, parses each with :data:`FIELDS` where it is
written (``defaults`` or a deployment), and calls :func:`build_flags` on the merged deployment. Every
error is one line naming the key, as for the other engines' keys.

Keys: ``split_mode`` (none | layer | row | tensor), ``tensor_split`` (list of proportions, one per GPU),
``main_gpu``, ``n_gpu_layers`` (an integer, ``auto`` or ``all``), ``ctx_size``, ``parallel``,
``cache_type_k``, ``cache_type_v``, ``fit`` (true/false), and for ``--rpc`` setups ``rpc`` (the
``host:port`` list) and ``rpc_host`` (the address the ``rpc-server`` processes listen on, when it is
meant to be another than 127.0.0.1).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_gpulayout.engines.llamacpp.flags import (
    ARG_OWNERS,
    CACHE_TYPES,
    LAUNCHER_ARGS,
    SPLIT_MODES,
    TENSOR_CACHE_TYPES,
    LlamaCppFlags,
)
from pytest_gpulayout.inputs.values import Ctx, bool_value, did_you_mean, int_value, show, string_value

KEYS = ("split_mode", "tensor_split", "main_gpu", "n_gpu_layers", "ctx_size", "parallel",
        "cache_type_k", "cache_type_v", "fit", "rpc", "rpc_host")

#: llama.cpp flag spellings -> the key (normalized: lower case, '-' -> '_').
ALIASES: Mapping[str, tuple[str, str]] = {
    **dict.fromkeys(("sm", "splitmode", "split"), ("split_mode", "(llama.cpp -sm/--split-mode)")),
    **dict.fromkeys(("ts", "tensor_splits", "split_ratio", "ratio"), ("tensor_split", "(llama.cpp -ts)")),
    **dict.fromkeys(("mg", "main_device"), ("main_gpu", "(llama.cpp -mg/--main-gpu)")),
    **dict.fromkeys(("ngl", "gpu_layers", "n_gpu_layer", "layers_on_gpu"), ("n_gpu_layers", "(llama.cpp -ngl)")),
    **dict.fromkeys(("c", "n_ctx", "context_size", "ctx", "ctx_len"), ("ctx_size", "(llama.cpp -c/--ctx-size)")),
    **dict.fromkeys(("np", "n_parallel", "slots", "parallel_slots"), ("parallel", "(llama.cpp -np/--parallel)")),
    **dict.fromkeys(("ctk", "cache_type", "type_k"), ("cache_type_k", "(llama.cpp -ctk)")),
    **dict.fromkeys(("ctv", "type_v"), ("cache_type_v", "(llama.cpp -ctv)")),
    **dict.fromkeys(("fit_params", "auto_fit"), ("fit", "(llama.cpp --fit on|off)")),
    **dict.fromkeys(("rpc_servers", "rpc_hosts"), ("rpc", "(llama.cpp --rpc host:port,...)")),
}

_HOSTPORT_RE = re.compile(r"^(?P<host>\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(?P<port>\d{1,5})$")
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def _split_mode(ctx: Ctx, v: object, key: str) -> str:
    if not isinstance(v, str) or v not in SPLIT_MODES:
        word = v if isinstance(v, str) else ""
        ctx.fail(key, f"unknown split_mode {show(v)}{did_you_mean(word.lower(), SPLIT_MODES)} "
                      f"(expected one of: {', '.join(SPLIT_MODES)})")
    return v


def _tensor_split(ctx: Ctx, v: object, key: str) -> tuple[float, ...]:
    if isinstance(v, str):
        parts = [p for p in re.split(r"[,/]", v) if p.strip()]
        ctx.fail(key, f"must be a list of proportions, not the string {show(v)}: write "
                      f"[{', '.join(p.strip() for p in parts)}]")
    if not isinstance(v, (list, tuple)) or not v:
        ctx.fail(key, f"must be a non-empty list of proportions, one per GPU (e.g. [3, 1]), not {show(v)}")
    out = []
    for i, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            ctx.fail(f"{key}[{i}]", f"must be a number >= 0, not {show(x)}")
        out.append(float(x))
    if sum(out) == 0:
        ctx.fail(key, "is all zeros, which llama.cpp reads as 'not set' (split by free memory): leave "
                      "tensor_split out for that")
    return tuple(out)


def _ngl(ctx: Ctx, v: object, key: str) -> int | str:
    if isinstance(v, str) and v in ("auto", "all"):
        return v
    if isinstance(v, str):
        ctx.fail(key, f"must be an integer >= 0, 'auto' or 'all', not {show(v)}"
                      f"{did_you_mean(v.lower(), ('auto', 'all'))}")
    return int_value(ctx, v, key, minimum=0)


def _cache_type(ctx: Ctx, v: object, key: str) -> str:
    types = tuple(CACHE_TYPES)
    if not isinstance(v, str) or v not in CACHE_TYPES:
        word = v.lower() if isinstance(v, str) else ""
        if word in CACHE_TYPES:
            ctx.fail(key, f"llama.cpp cache types are lower case: write {word!r}")
        ctx.fail(key, f"unknown cache type {show(v)}{did_you_mean(word, types)} "
                      f"(llama.cpp accepts: {', '.join(types)})")
    return v


def _rpc(ctx: Ctx, v: object, key: str) -> tuple[str, ...]:
    if isinstance(v, str):
        ctx.fail(key, f"must be a list of host:port strings, not the string {show(v)}: write "
                      f"[{', '.join(s.strip() for s in v.split(','))}]")
    if not isinstance(v, (list, tuple)):
        ctx.fail(key, f"must be a list of host:port strings, not {show(v)}")
    out = []
    for i, item in enumerate(v):
        if not isinstance(item, str) or not _HOSTPORT_RE.match(item.strip()):
            ctx.fail(f"{key}[{i}]", f"must be host:port (e.g. 192.168.1.20:50052), not {show(item)}")
        out.append(item.strip())
    return tuple(out)


def _host(ctx: Ctx, v: object, key: str) -> str:
    return string_value(ctx, v, key, what="an address string (e.g. 192.168.1.20)").strip()


FIELDS: Mapping[str, Callable[[Any, object, str], object]] = {
    "split_mode": _split_mode,
    "tensor_split": _tensor_split,
    "main_gpu": lambda c, v, k: int_value(c, v, k, minimum=0),
    "n_gpu_layers": _ngl,
    "ctx_size": lambda c, v, k: int_value(c, v, k, minimum=1),
    "parallel": lambda c, v, k: int_value(c, v, k, minimum=1),
    "cache_type_k": _cache_type,
    "cache_type_v": _cache_type,
    "fit": bool_value,
    "rpc": _rpc,
    "rpc_host": _host,
}

#: other engines' keys that have a llama.cpp spelling
_FOREIGN = {
    "tensor_parallel_size": "llama.cpp has no TP size: use split_mode: tensor (or row) over the gpus list",
    "pipeline_parallel_size": "llama.cpp has no PP size: split_mode: layer (the default) is its pipeline split",
    "data_parallel_size": "llama.cpp serves one replica per server: write one deployment per replica",
    "max_model_len": "llama.cpp's context is ctx_size (-c)",
    "memory_fraction": "llama.cpp has no memory fraction: it takes what the weights, KV cache and compute "
                       "buffers need (fit keeps 1 GiB free per device)",
    "enable_expert_parallel": "llama.cpp has no expert parallel switch",
}


def is_loopback(host: str) -> bool:
    h = host.strip().lower()
    return h in _LOOPBACK or h.startswith("127.")


def build_flags(ctx: Ctx, fields: Mapping[str, Any], prefix: str, inherited: frozenset[str]) -> LlamaCppFlags | None:
    """Cross-key checks for the llama.cpp keys; the flags for ``engine: llamacpp``, else None."""
    engine = fields.get("engine", "vllm")
    present = [k for k in KEYS if k in fields]

    def note(k: str) -> str:
        return " (it is set in defaults)" if k in inherited else ""

    if engine != "llamacpp":
        if present:
            k = present[0]
            ctx.fail(f"{prefix}.{k}", f"is a llama.cpp key, but the engine is {engine}: set engine: llamacpp "
                                      f"or remove it{note(k)}")
        return None
    for k, why in _FOREIGN.items():
        if k in fields and fields[k] not in (None, 1, False):
            ctx.fail(f"{prefix}.{k}", f"is not a llama.cpp setting: {why}{note(k)}")
    if fields.get("kv_cache_dtype", "auto") != "auto":
        ctx.fail(f"{prefix}.kv_cache_dtype", "llama.cpp sets the KV cache type per tensor: use cache_type_k "
                                             "and cache_type_v (f16, q8_0, q4_0 ...)" + note("kv_cache_dtype"))
    model = fields.get("model")
    if isinstance(model, str) and not model.lower().endswith(".gguf") and not Path(model).is_dir():
        ctx.fail(f"{prefix}.model", f"engine llamacpp loads a .gguf file, not {show(model)}")
    flags = LlamaCppFlags(**{k: fields[k] for k in present})
    gpus = fields.get("gpus")
    if flags.tensor_split is not None and gpus is not None and len(flags.tensor_split) != len(gpus):
        ctx.fail(f"{prefix}.tensor_split", f"has {len(flags.tensor_split)} proportions for {len(gpus)} GPUs "
                                           f"in gpus: give one per GPU, in the order of gpus")
    if flags.main_gpu is not None and gpus is not None and flags.main_gpu >= len(gpus):
        ctx.fail(f"{prefix}.main_gpu", f"is {flags.main_gpu}, but gpus lists {len(gpus)}: main_gpu counts "
                                       f"the deployment's GPUs from 0 (llama.cpp: invalid value for main_gpu)")
    if flags.mode == "tensor":
        for k in ("cache_type_k", "cache_type_v"):
            t = getattr(flags, k)
            if t is not None and t not in TENSOR_CACHE_TYPES:
                ctx.fail(f"{prefix}.{k}", f"{t} is quantized: split_mode tensor keeps K/V unquantized "
                                          f"(f32, f16 or bf16; llama.cpp: 'simultaneous use of SPLIT_MODE_TENSOR "
                                          f"and KV cache quantization not implemented')")
    if flags.rpc_host is not None and not flags.rpc:
        ctx.fail(f"{prefix}.rpc_host", "is set without rpc: list the RPC servers (host:port) it belongs to")
    return flags


def check_launch_args(ctx: Ctx, args: tuple[str, ...], prefix: str) -> None:
    """``launch.args`` must not set a flag a key owns (the launch would run another layout)."""
    for i, arg in enumerate(args):
        flag = arg.split("=", 1)[0]
        if flag in ARG_OWNERS:
            owner = ARG_OWNERS[flag]
            ctx.fail(f"{prefix}.launch.args[{i}]", f"sets {flag}, which the manifest key '{owner}' controls: set "
                                                   f"{owner} instead, so the static checks judge what runs")
        if flag in LAUNCHER_ARGS:
            ctx.fail(f"{prefix}.launch.args[{i}]", f"sets {flag}: the launcher listens on 127.0.0.1 only, on a "
                                                   "free port it picks")
