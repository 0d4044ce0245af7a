"""SGLang's serving-frontend, watermark, pipeline, prefill-only KV cache and unified memory pool refusals, the values
they read as each release resolves them (``config_checks.py`` judges them; ``in_force`` says which it does not).

* SSL (``ServerArgs._handle_ssl_validation`` 0.5.10 - 0.5.18 ``server_args.py``; from 0.5.19
  ``arg_groups/serving_hook.py handle_ssl_validation``, 0.5.23 l.47-110): ``--ssl-keyfile`` and ``--ssl-certfile``
  go together, ``--ssl-ca-certs`` / ``--ssl-keyfile-password`` / ``--enable-ssl-refresh`` need both, and each file
  must exist (``os.path.isfile``: the files of the host that serves are not known here, so with a path given that
  check is not judged, and named).
* HTTP/2 (0.5.11+, same function): ``--http2-max-concurrent-streams`` in 1 .. 2**32 - 1 and
  ``--http2-initial-connection-window-size`` in 1024 .. 2**31 - 1 (0.5.18 - 0.5.22), no ``--enable-ssl-refresh``,
  and up to 0.5.13 no ``--tokenizer-worker-num`` > 1; ``granian`` must import (not judged: the image's packages are
  not known here). From 0.5.23 ``--enable-http-worker-reuseport`` needs ``--tokenizer-worker-num`` > 1 and no
  ``--enable-http2`` (l.91-93).
* Watermarks (0.5.22+, ``arg_groups/validation_hook.py check_watermark_server_args``, 0.5.23 l.34-106):
  ``--watermark-config`` needs ``--enable-watermark``; the rest run only with it (l.39-40). The settings
  ``watermark_key`` ... ``watermark_enforce_all`` come from ``--watermark-config`` (``serving_hook.py
  handle_watermark_config``, a JSON file or object): without it they are the fields' defaults (0.5.23
  ``arg_groups/fields/exec_.py`` l.84-111: key None, key_b None, context window 4, mixing 0.5, max 1.0, both flags
  off), which pass; with it they are not judged. ``--enable-custom-logit-processor``, a ``--dllm-algorithm`` or a
  ``--disaggregation-mode`` refuse it. ``--sampling-backend``'s choices are the built-in ones
  (``arg_groups/choices.py`` l.133-134), so that check passes.
* Pipeline parallelism (0.5.21+, ``validation_hook.py check_pipeline_parallel_compat``, called with ``pp_size > 1``
  from ``check_server_args``, 0.5.23 l.196-197): ``--min-free-slots-delay`` is refused (l.165-169). Its first assert
  (overlap schedule) is unreachable: ``overrides.py _pipeline_parallel_overlap_disable`` (0.5.23 l.1624-1627, run
  at ``pipeline.py`` l.302) sets ``disable_overlap_schedule`` for PP > 1 first.
* ``--prefill-only-disable-kv-cache`` (0.5.12+, ``ServerArgs._validate_prefill_only_disable_kv_cache_args``; from
  0.5.19 ``arg_groups/kv_cache_hook.py validate_prefill_only_disable_kv_cache_args``, 0.5.23 l.865-950): returns
  without the flag; runs before the memory defaults and the model's capability adjustments (0.5.23 ``pipeline.py``
  l.170, 0.5.18 ``server_args.py`` l.3649 before l.3677), so the values are the line's: it needs ``--is-embedding``,
  ``--chunked-prefill-size -1`` and ``--disable-radix-cache``, and refuses an FP4 / MXFP8 ``--kv-cache-dtype``,
  ``--attn-cp-size`` > 1, prefill context parallelism and ``--enable-hisparse``.
* ``--enable-unified-memory`` (0.5.15+, ``ServerArgs._handle_unified_memory_pool``; from 0.5.19 ``kv_cache_hook.py
  handle_unified_memory_pool``, 0.5.23 l.528-720): returns without the flag; the flag-level asserts: PD
  disaggregation (0.5.15 - 0.5.17 at all; from 0.5.18 with PP or ``--enable-hisparse``), hierarchical cache / LMCache
  (0.5.15 - 0.5.20; LMCache alone from 0.5.21), ``--dcp-size`` > 1 (0.5.15 - 0.5.19), two-batch overlap (0.5.20+)
  and ``--enable-unified-cache-external-linker`` (0.5.22+). A ``--dllm-algorithm`` turns LMCache off first
  (0.5.23 ``dllm_hook.py`` l.81): with it that check is not judged.
* gRPC and the sidecar (``ServerArgs._handle_deprecated_args``; from 0.5.19 ``serving_hook.py
  handle_deprecated_args``): 0.5.11 - 0.5.15 always set ``grpc_port`` to ``SGLANG_GRPC_PORT``, else ``--port`` +
  10000, and refuse it outside 1 .. 65535 (0.5.14 ``server_args.py`` l.2761-2768: ``--port 60000`` refuses). From
  0.5.16 ``grpc_port`` is ``--grpc-port``, else ``SGLANG_GRPC_PORT``, else ``--port`` + 10000 with the legacy
  ``--smg-grpc-mode`` / ``--grpc-mode``, else None (0.5.16 l.3318-3326); the native server (a port without the legacy
  mode) refuses ``--use-ray``, ``--encoder-only``, ``--tokenizer-worker-num`` > 1 and an API key, and
  ``--sidecar`` needs the native server. ``SGLANG_GRPC_WORKER_THREADS`` defaults to 4 (0.5.16 ``environ.py`` l.883).
  From 0.5.21 ``--grpc-response-timeout-secs`` must be positive.

The environment is the deployment's (``env``; unset: the release's default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from packaging.version import Version

from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Layout

#: the rules of this module (``config_checks.RULES``, block ``# -- cache``)
RULES: Mapping[str, str] = {
    "sglang.ssl.files": "--ssl-keyfile / --ssl-certfile without the other, or --ssl-ca-certs, --ssl-keyfile-password "
                        "or --enable-ssl-refresh without both (0.5.10+)",
    "sglang.http2": "--enable-http2 with an out-of-range stream count or window, --enable-ssl-refresh or (to 0.5.13) "
                    "several tokenizer workers; --enable-http-worker-reuseport without several workers (0.5.23)",
    "sglang.watermark.needs_enable": "--watermark-config without --enable-watermark (0.5.22+)",
    "sglang.watermark.conflicts": "--enable-watermark with a custom logit processor, a diffusion LLM or PD "
                                  "disaggregation (0.5.22+)",
    "sglang.pp.min_free_slots_delay": "--min-free-slots-delay with pipeline parallelism (0.5.21+)",
    "sglang.prefill_only_disable_kv_cache": "--prefill-only-disable-kv-cache without --is-embedding, "
                                            "--chunked-prefill-size -1 and --disable-radix-cache, or with an FP4 / "
                                            "MXFP8 KV cache, context parallelism or HiSparse (0.5.12+)",
    "sglang.unified_memory.flags": "--enable-unified-memory with PD disaggregation, hierarchical cache / LMCache, DCP, "
                                   "two-batch overlap or the unified-cache external linker (0.5.15+)",
    "sglang.grpc.port": "a gRPC port outside 1 .. 65535 (0.5.11 - 0.5.15: --port + 10000), or a non-positive "
                        "--grpc-response-timeout-secs",
    "sglang.grpc.native": "--sidecar without the native gRPC server, or the native gRPC server (--grpc-port) with "
                          "--use-ray, --encoder-only, several tokenizer workers or an API key (0.5.16+)",
}

WATERMARK_CONFLICTS = "sglang.watermark.conflicts"
PP_RULE = "sglang.pp.min_free_slots_delay"
PREFILL_ONLY_RULE = "sglang.prefill_only_disable_kv_cache"
UNIFIED_RULE = "sglang.unified_memory.flags"

#: 0.5.11 - 0.5.15 derive ``grpc_port`` from ``--port`` whether or not gRPC is used (0.5.14 ``server_args.py``
#: l.2761-2764); 0.5.16 only with the legacy SMG mode
GRPC_PORT_ALWAYS = (Version("0.5.11"), Version("0.5.16"))
GRPC_PORT_OFFSET = 10000
#: ``SGLANG_GRPC_WORKER_THREADS = EnvInt(4)`` (0.5.16 / 0.5.23 ``environ.py``)
GRPC_WORKER_THREADS_DEFAULT = 4
#: the watermark settings ``--watermark-config`` fills, and their field defaults (0.5.23 ``fields/exec_.py``
#: l.84-111; the same in 0.5.22)
WATERMARK_DEFAULTS: Mapping[str, object] = {
    "watermark_key": None, "watermark_key_b": None, "watermark_context_window": 4,
    "watermark_mixing_probability": 0.5, "watermark_max_probability": 1.0,
    "watermark_default_enabled": False, "watermark_enforce_all": False,
}
MAX_WATERMARK_CONTEXT_WINDOW = 64  # sampling/watermarking/config.py (the message says 1 to 64)
#: ``arg_groups/choices.py`` l.133 (0.5.22, 0.5.23): the parser's choices of ``--sampling-backend``
BUILT_IN_SAMPLING_BACKENDS = frozenset({"flashinfer", "pytorch", "ascend", "intel_xpu"})
#: the flags that turn prefill context parallelism on (``rules_parallel2.PREFILL_CP_FLAGS``), as the older releases
#: spell the one this function reads (0.5.12 - 0.5.13 ``enable_prefill_context_parallel``)
PREFILL_CP_SPELLINGS = ("enable_prefill_cp", "enable_prefill_context_parallel")


def _flag(args: ResolvedArgs, dest: str) -> bool:
    return bool(args.get(dest, False))


def _value(args: ResolvedArgs, dest: str, default: object) -> object:
    value = args.get(dest)
    return default if value is None else value


def _int_env(env: Mapping[str, str], name: str) -> int | None:
    text = env.get(name)
    if text is None or not text.strip().lstrip("-").isdigit():
        return None
    return int(text)


def values(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version,
           env: Mapping[str, str]) -> dict[str, object]:
    """What this module's refusals read, as ``version`` holds it when it checks them (see the module's docstring);
    a value the deployment does not tell (a file on the serving host) is left out: the entry is not judged."""
    ns: dict[str, object] = {
        dest: args.get(dest) for dest in (
            "ssl_keyfile", "ssl_certfile", "ssl_ca_certs", "ssl_keyfile_password", "http2_max_concurrent_streams",
            "http2_initial_connection_window_size", "watermark_config", "sampling_backend", "dllm_algorithm",
            "min_free_slots_delay", "kv_cache_dtype", "chunked_prefill_size", "sidecar", "sidecar_args",
            "api_key", "admin_api_key", "grpc_response_timeout_secs")
        if dest in args.values}
    for dest in ("enable_ssl_refresh", "enable_http2", "enable_http_worker_reuseport", "enable_watermark",
                 "enable_custom_logit_processor", "prefill_only_disable_kv_cache", "is_embedding",
                 "disable_radix_cache", "enable_hisparse", "enable_unified_memory", "enable_hierarchical_cache",
                 "enable_two_batch_overlap", "enable_unified_cache_external_linker", "use_ray", "encoder_only",
                 "smg_grpc_mode", "grpc_mode"):
        ns[dest] = _flag(args, dest)
    ns["enable_prefill_context_parallel"] = _flag(args, "enable_prefill_context_parallel")
    if args.get("dllm_algorithm") is None:  # a diffusion LLM turns LMCache off first (dllm_hook.py)
        ns["enable_lmcache"] = _flag(args, "enable_lmcache")
    ns["BUILT_IN_SAMPLING_BACKENDS"] = BUILT_IN_SAMPLING_BACKENDS
    ns["MAX_WATERMARK_CONTEXT_WINDOW"] = MAX_WATERMARK_CONTEXT_WINDOW
    if args.get("watermark_config") is None:
        ns.update(WATERMARK_DEFAULTS)
        # the context window's type test, as the release writes it (the evaluator applies no isinstance)
        ns["isinstance(cfg.watermark_context_window, bool)"] = False
        ns["isinstance(cfg.watermark_context_window, int)"] = True
    # ``envs.SGLANG_RUST_SERVER.get()``: an EnvBool, off unless the deployment sets it
    ns["envs.SGLANG_RUST_SERVER.get"] = env.get("SGLANG_RUST_SERVER", "").strip().lower() in ("1", "true", "yes")
    ns.update(_grpc(args, version, env))
    return ns


def _grpc(args: ResolvedArgs, version: Version, env: Mapping[str, str]) -> dict[str, object]:
    """``grpc_port``, ``legacy_grpc`` and ``native_grpc`` as ``_handle_deprecated_args`` sets them (see the module)."""
    port = _value(args, "port", 30000)
    env_port = _int_env(env, "SGLANG_GRPC_PORT")
    legacy = _flag(args, "smg_grpc_mode") or _flag(args, "grpc_mode")
    grpc_port: object
    if GRPC_PORT_ALWAYS[0] <= version < GRPC_PORT_ALWAYS[1]:
        grpc_port = env_port if env_port is not None else (port + GRPC_PORT_OFFSET if isinstance(port, int) else None)
    else:
        grpc_port = args.get("grpc_port")
        if grpc_port is None:
            grpc_port = env_port
        if grpc_port is None and legacy and isinstance(port, int):
            grpc_port = port + GRPC_PORT_OFFSET
    threads = _int_env(env, "SGLANG_GRPC_WORKER_THREADS")
    return {"grpc_port": grpc_port, "legacy_grpc": legacy, "native_grpc": grpc_port is not None and not legacy,
            "grpc_worker_threads": GRPC_WORKER_THREADS_DEFAULT if threads is None else threads}


def in_force(rules: Sequence[str], args: ResolvedArgs, layout: Layout) -> list[str]:
    """``rules`` less those whose function returns before its checks for this line: the watermark conflicts without
    ``--enable-watermark``, the PP check without PP, the prefill-only and unified-memory checks without their flag."""
    drop: set[str] = set()
    if not _flag(args, "enable_watermark"):
        drop.add(WATERMARK_CONFLICTS)
    if layout.pipeline_parallel_size <= 1:
        drop.add(PP_RULE)
    if not _flag(args, "prefill_only_disable_kv_cache"):
        drop.add(PREFILL_ONLY_RULE)
    if not _flag(args, "enable_unified_memory"):
        drop.add(UNIFIED_RULE)
    return [r for r in rules if r not in drop]
