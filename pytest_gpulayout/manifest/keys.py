"""The manifest's vocabulary: its keys, the engine flags and other tools' spellings people carry over
(each mapped to the key it means, with a note), the flags a key already owns in ``launch.args``,
and the "unknown key" message that uses them."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_gpulayout.engines.llamacpp import manifest as _llamacpp
from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.inputs.values import Ctx, show
from pytest_gpulayout.manifest.fields import (
    DEPLOYMENT_FIELDS,
    FLAG_KEYS,
    LAUNCH_FIELDS,
    REQUIRE_FIELDS,
    SECTIONS,
)

MANIFEST_NAME = "gpulayout.yaml"
MANIFEST_VERSION = 1

TOP_KEYS = ("version", "machine", "defaults", "deployments")
#: the keys of a deployment, of its require and of its launch (``manifest/fields.py``: spelled once)
_OWN = tuple(f.key for f in DEPLOYMENT_FIELDS if f.key not in _llamacpp.KEYS)
DEPLOYMENT_KEYS = (*_OWN, *SECTIONS, *_llamacpp.KEYS)  # engine: llamacpp's keys last (engines/llamacpp/manifest.py)
REQUIRE_KEYS = tuple(f.key for f in REQUIRE_FIELDS)
LAUNCH_KEYS = tuple(f.key for f in LAUNCH_FIELDS)


_MEMORY_NOTE = "(it maps to vLLM --gpu-memory-utilization and SGLang --mem-fraction-static)"
_LEN_NOTE = "(it maps to vLLM --max-model-len and SGLang --context-length)"
_TP_NOTE = "(it maps to vLLM --tensor-parallel-size and SGLang --tp-size)"
_PP_NOTE = "(it maps to vLLM --pipeline-parallel-size and SGLang --pp-size)"
_DP_NOTE = "(it maps to vLLM --data-parallel-size and SGLang --dp-size)"
_EP_NOTE = "(it maps to vLLM --enable-expert-parallel and SGLang --ep-size equal to the TP size)"
_DUMMY_NOTE = "(true passes --load-format dummy: the same pool, no weights read from disk)"

# Spellings people carry over from engine flags or other tools, keyed by their normalized form
# (lower case, '-' -> '_'): canonical key (dotted from the section) and a note on what it maps to.
DEPLOYMENT_ALIASES: dict[str, tuple[str, str]] = {
    **dict.fromkeys(
        ("tp", "tp_size", "tensor_parallel", "tensor_parallelism", "tensor_parallel_degree"),
        ("tensor_parallel_size", _TP_NOTE),
    ),
    **dict.fromkeys(
        ("pp", "pp_size", "pipeline_parallel", "pipeline_parallelism", "pipeline_parallel_degree"),
        ("pipeline_parallel_size", _PP_NOTE),
    ),
    **dict.fromkeys(
        ("dp", "dp_size", "data_parallel", "data_parallelism", "data_parallel_degree"),
        ("data_parallel_size", _DP_NOTE),
    ),
    **dict.fromkeys(
        ("gpu_memory_utilization", "gpu_mem_util", "gpu_memory_util", "memory_utilization",
         "mem_fraction_static", "mem_fraction", "gpu_memory_fraction", "mem_frac"),
        ("memory_fraction", _MEMORY_NOTE),
    ),
    **dict.fromkeys(
        ("context_length", "context_len", "max_context_length", "max_context_len", "max_seq_len",
         "max_seq_length", "max_sequence_length", "seq_len", "max_len", "max_tokens"),
        ("max_model_len", _LEN_NOTE),
    ),
    **dict.fromkeys(
        ("model_path", "model_name", "model_id", "model_dir", "path"),
        ("model", "(a directory holding config.json, a config.json, or a catalog id like 'Qwen/Qwen3-8B')"),
    ),
    **dict.fromkeys(("kv_dtype", "cache_dtype", "kv_cache_type"), ("kv_cache_dtype", "")),
    **dict.fromkeys(
        ("ep", "ep_size", "expert_parallel", "enable_ep", "enable_ep_moe", "expert_parallel_size"),
        ("enable_expert_parallel", _EP_NOTE),
    ),
    **dict.fromkeys(
        ("devices", "device_ids", "gpu_ids", "gpu", "cuda_visible_devices", "gpu_indices"),
        ("gpus", "(CUDA indices or GPU UUIDs, as a list)"),
    ),
    **dict.fromkeys(
        ("version", "vllm_version", "sglang_version", "engine_ver"),
        ("engine_version", "(pins the engine's defaults where the engine is not installed)"),
    ),
    **dict.fromkeys(("backend", "framework", "server", "runtime"), ("engine", "(vllm or sglang)")),
    **dict.fromkeys(("requires", "requirements", "expect", "expects"), ("require", "")),
    **dict.fromkeys(("launcher", "startup", "run"), ("launch", "")),
    **dict.fromkeys(("benchmark", "bench", "load", "load_test", "measurement"), ("measure", "")),
    # keys that belong one level down
    **{k: (f"require.{k}", "") for k in REQUIRE_KEYS},
    **{k: (f"launch.{k}", "") for k in LAUNCH_KEYS},
    **dict.fromkeys(("load_format", "dummy", "dummy_load"), ("launch.dummy_weights", _DUMMY_NOTE)),
    "max_concurrency": ("require.concurrency", ""),
    "timeout": ("launch.timeout_s", ""),
    "extra_args": ("launch.args", ""),
    **_llamacpp.ALIASES,
}
REQUIRE_ALIASES: dict[str, tuple[str, str]] = {
    **dict.fromkeys(
        ("tokens", "kv_cache_tokens", "min_kv_tokens", "kv_pool_tokens", "kv_pool", "num_tokens"),
        ("kv_tokens", "(the KV pool must hold at least this many tokens)"),
    ),
    **dict.fromkeys(
        ("max_concurrency", "users", "concurrent_requests", "max_users", "requests"),
        ("concurrency", "(this many full-length max_model_len requests must fit in the KV pool)"),
    ),
    **dict.fromkeys(("links", "allowed_links", "tp_link", "link", "link_kinds"), ("tp_links", "")),
    **dict.fromkeys(
        ("headroom_gib", "headroom", "balance_headroom", "balance_margin_gib"),
        ("balance_headroom_gib", ""),
    ),
}
LAUNCH_ALIASES: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("cmd", "argv", "entrypoint", "entry_point", "executable", "program"), ("command", "")),
    **dict.fromkeys(
        ("extra_args", "flags", "engine_args", "arguments", "extra_flags", "argument"), ("args", ""),
    ),
    **dict.fromkeys(("environment", "environ", "env_vars", "envs", "variables"), ("env", "")),
    **dict.fromkeys(("timeout", "timeout_seconds", "startup_timeout", "timeout_sec"), ("timeout_s", "")),
    **dict.fromkeys(("load_format", "dummy", "dummy_load", "dummy_weight"), ("dummy_weights", _DUMMY_NOTE)),
    **dict.fromkeys(("enable", "on", "active"), ("enabled", "")),
}
TOP_ALIASES: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("deployment", "models", "services", "layouts", "serving"), ("deployments", "")),
    **dict.fromkeys(("machines", "hardware", "snapshot", "topo", "preset", "host"), ("machine", "")),
    **dict.fromkeys(("default", "common", "base"), ("defaults", "")),
    **dict.fromkeys(("manifest_version", "schema_version"), ("version", "")),
}

# Engine flags that a manifest key already controls: passing them again in launch.args would make
# the engine run a different layout from the one the static checks judged.
def _arg_owners() -> dict[str, str]:
    """Every engine's flag (and its aliases) for a manifest key, from the engine modules' ``Flags``."""
    owners: dict[str, str] = {}
    for engine in ENGINES.values():
        f = engine.cli.flags
        for key in FLAG_KEYS:
            flag = getattr(f, key)
            if flag:
                owners[flag] = key
        for key, aliases in (f.aliases or {}).items():
            owners.update(dict.fromkeys(aliases, key))
    return owners


#: Engine flags that a manifest key already controls (passing them again in launch.args would make the
#: engine run another layout than the one the static checks judged), with the shorthands the engines take.
ARG_OWNERS: dict[str, str] = {**_arg_owners(), "--tp": "tensor_parallel_size", "--pp": "pipeline_parallel_size",
                              "--dp": "data_parallel_size"}
ARG_LAUNCHER = ("--host", "--port")



def norm_key(word: str) -> str:
    return word.strip().lower().replace("-", "_").replace(" ", "_")


def check_keys(
    ctx: Ctx,
    mapping: Mapping[Any, Any],
    known: Sequence[str],
    aliases: Mapping[str, tuple[str, str]],
    prefix: str,
    *,
    section: str,
) -> None:
    for key in mapping:
        if isinstance(key, str) and key in known:
            continue
        dotted = f"{prefix}.{key}" if prefix else str(key)
        ctx.fail(dotted, unknown_key_message(key, known, aliases, section))


def unknown_key_message(key: object, known: Sequence[str], aliases: Mapping[str, tuple[str, str]],
                         section: str) -> str:
    head = f"unknown key {show(key)}"
    expected = f"(expected one of: {', '.join(known)})"
    if not isinstance(key, str):
        return f"{head}: keys must be strings {expected}"
    norm = norm_key(key)
    if norm in known:
        return f"{head}: did you mean {norm!r}? (manifest keys are lower case with underscores)"
    if norm in aliases:
        target, note = aliases[norm]
        return f"{head}: did you mean {target!r}?" + (f" {note}" if note else "")
    if section == "top" and (norm in DEPLOYMENT_KEYS or norm in DEPLOYMENT_ALIASES):
        where = "it belongs inside a deployment: put it under deployments.<name> or under defaults"
        if norm in DEPLOYMENT_KEYS:
            return f"{head}: {where}"
        target, note = DEPLOYMENT_ALIASES[norm]
        return f"{head}: {where}, and did you mean {target!r}?" + (f" {note}" if note else "")
    candidates = {k: (k, "") for k in known}
    candidates.update(aliases)
    close = difflib.get_close_matches(norm, list(candidates), n=1, cutoff=0.6)
    if close:
        target, note = candidates[close[0]]
        return f"{head}: did you mean {target!r}?" + (f" {note}" if note else "")
    return f"{head} {expected}"


