"""SGLang's refusals about PD disaggregation's decode host pool and flags, hierarchical cache (HiCache) and the KV
cache layout / dtype / pool flags that a command line decides, the values they read as each release holds them
(``judge`` judges them in a frame of its own over the shared namespace; the gates say which a line reaches).

* Decode round robin (0.5.2 ``server_args.py`` ``__post_init__`` l.820-826; 0.5.3 - 0.5.6.post2
  ``_handle_disaggregation``; 0.5.7 ``_handle_pd_disaggregation`` l.2187-2192): a decode server with ``--dp-size``
  > 1 needs ``--prefill-round-robin-balance`` unless ``is_in_ci()`` (``SGLANG_IS_IN_CI``, off unless the
  deployment's environment sets it). ``dp_size`` is the line's there (attention DP stays inside TP before 0.5.22).
* The decode host pool (``handle_cache_compatibility``: 0.5.3 - 0.5.18 ``server_args.py``
  ``_handle_cache_compatibility``, from 0.5.19 ``arg_groups/kv_cache_hook.py``, 0.5.23 l.351-409):
  ``--disaggregation-decode-retraction-backup host_pool`` only on a decode server, without ``--dcp-size`` > 1 and,
  with priority scheduling, with ``--disable-priority-preemption`` (0.5.18+); ``--disaggregation-decode-enable-
  offload-kvcache`` only on a decode server, with a ``--hicache-storage-backend`` (0.5.10+) and not beside a
  host-pool retraction (0.5.18+). The retraction backup is the line's, except that ``handle_pd_disaggregation``
  sets ``host_pool`` first where the line asks for decode host receive (0.5.21: a
  ``--disaggregation-decode-host-receive-threshold`` above 0, 0.5.21 ``pd_disaggregation_hook.py`` l.57-69; 0.5.22+:
  below 1, 0.5.23 l.68-80; the defaults 0.0 / 1.0 ask for none); nothing else rewrites these flags before (the
  hook runs at 0.5.23 ``pipeline.py`` l.334, after the PD hook at l.147). The spec-v2 check (0.5.5.post3 - 0.5.9)
  reads ``SGLANG_ENABLE_SPEC_V2`` and stays open.
* ``--enable-response-store`` with a disaggregation mode (0.5.20+, ``validation_hook.py validate_response_store``,
  0.5.23 l.109-116) and ``--language-model-only`` with one (0.5.18 ``server_args.py`` ``_handle_language_model_only``
  l.7677; 0.5.19 - 0.5.21 ``model_hook.py handle_language_model_only``; 0.5.22+ except a ``deepseek_v41`` config,
  0.5.23 l.1097), which returns without the flag (0.5.23 l.1081-1082).
* Hierarchical cache without the radix cache (0.5.1 - 0.5.2 ``__post_init__``, 0.5.3 - 0.5.18
  ``_handle_cache_compatibility``, then ``kv_cache_hook.py`` 0.5.23 l.393-397): the radix cache is off where the
  line gives ``--disable-radix-cache`` or the server is a PD decode server without
  ``--disaggregation-decode-enable-radix-cache`` (the PD step turns it off first in every release: 0.5.1 l.703
  before l.726, 0.5.2 l.818 before l.850, from 0.5.3 ``_handle_disaggregation`` / ``_handle_pd_disaggregation``
  before ``_handle_cache_compatibility``, 0.5.23 ``pipeline.py`` l.147 before l.334). Otherwise several model and
  feature branches turn it off on their own first (a hybrid Mamba model, an embedding or encoder-decoder model,
  deterministic inference, multi-item scoring: 0.5.23 ``model_hook.py`` l.219 / l.785 / l.850 / l.881 / l.1005,
  ``model_overrides/minicpm.py`` l.27), which is not resolved: the entry is then not judged.
* HiCache's host memory mode (0.5.19+, ``hicache_hook.py validate_hicache_host_memory_mode``, 0.5.23 l.247-296),
  which ``handle_hicache`` calls only with ``--enable-hierarchical-cache``, decode KV offload, or on a decode server
  whose retraction backup is unset or ``host_pool`` (0.5.23 l.62-72), and from 0.5.20 not with the unified-cache
  external linker (it returns first, l.44-60): ``buffer_only`` needs a ``--hicache-storage-backend``, refuses
  ``--hicache-write-policy write_back`` (0.5.19 - 0.5.21; from 0.5.22 it rewrites it to write_through) and a decode
  server. ``--hicache-host-memory-mode buffer_only`` with ``--enable-lmcache`` is refused too (0.5.21+,
  ``handle_cache_compatibility`` l.466-469).
* KV cache sharding's flag conflicts (0.5.22+, ``kv_shard_hook.py handle_kv_cache_sharding``, 0.5.23 l.86-272,
  run after the model-specific step and the backends at ``pipeline.py`` l.284; it returns without
  ``--enable-kv-cache-sharding``): a diffusion LLM, a ``--radix-cache-backend``, the unified-cache external linker,
  streaming sessions, the session radix cache, FlexKV, unified memory, ``--dcp-size`` > 1, HiCache (0.5.22; from
  0.5.23 only with a storage backend, or a DSA model outside host memory mode ``cache``), LMCache, HiSparse,
  dynamic chunking with PP, two-batch overlap, a chunked-attention model (``attention_chunk_size``), a transfer
  backend other than mooncake / nixl, a DSA MLA model (0.5.22), and the MLA / GQA sharding axes (MLA without prefill
  CP: no attention DP and TP > 1; GQA: ``--enable-prefill-cp`` with ``--attn-cp-size`` > 1). The checks that read
  the page size, chunked-prefill size, attention backends or environment SGLang resolves stay open.
* IB devices (``validate_ib_devices``; 0.5.9 - 0.5.18 ``server_args.py`` ``_validate_ib_devices``): called for
  ``--disaggregation-ib-device`` with the mooncake transfer backend on a PD server or ``--encoder-transfer-backend
  mooncake`` (0.5.23 ``pd_disaggregation_hook.py`` l.322-332; ``mooncake_tcp`` clears the device from 0.5.20, l.37),
  and for ``--mooncake-ib-device`` with ``--elastic-ep-backend mooncake`` (0.5.23 ``parallel_hook.py`` l.540-545).
  Only what the line alone decides is judged: an empty list (0.5.9 - 0.5.12 no name after splitting on commas, and
  0.5.9 a name twice; from 0.5.13 an empty or blank string); the rest reads the serving host's
  ``/sys/class/infiniband``.
* ``--kv-cache-dtype mxfp8`` off Blackwell (0.5.16+, ``handle_mxfp8_kv_cache_compatibility``, 0.5.23 l.100-109:
  ``is_blackwell`` = compute-capability major 10, 11 or 12 with CUDA 12.8, ``utils/common.py`` l.297).
* Unified memory with PD disaggregation (0.5.18+, ``handle_unified_memory_pool``, returns without
  ``--enable-unified-memory``): only the mooncake transfer backend (0.5.21+ ``server_args.py``
  ``_unified_memory_pd_transfer_backends``: ``{'mooncake'}``); with decode KV offload (0.5.21+) only the ``file``
  storage backend and no MLA or Mamba-hybrid model; a host-pool retraction without the decode radix cache (0.5.21)
  and no Mamba-hybrid model. ``mambaish_config`` is None for a model without linear-attention state; a hybrid one
  is not judged. The hybrid-SWA checks stay open.
* Page-major layout (0.5.17+, ``handle_page_major_kv_layout``: on with ``--enable-page-major-kv-layout`` or
  ``--enable-unified-memory``, 0.5.23 l.773-780): ``--mamba-backend`` other than triton is refused (l.855-859),
  for every model; nothing sets the Mamba backend before.
* HiSparse in ``check_server_args`` (0.5.10 - 0.5.11, l.6180-6191 in 0.5.10): a model that is not DSA, or the radix
  cache on (the values ``rules_cache`` resolves for ``validate_hisparse``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout, Refusal

RULES: Mapping[str, str] = {
    "sglang.pd.decode_round_robin": "a PD decode server with --dp-size > 1 without --prefill-round-robin-balance "
                                    "(0.5.2 - 0.5.7)",
    "sglang.pd.decode_host_pool": "a host-pool decode retraction or decode KV offload off a decode server, with DCP, "
                                  "priority preemption or each other, or offload without a HiCache storage backend "
                                  "(0.5.3+)",
    "sglang.pd.response_store": "--enable-response-store with a disaggregation mode (0.5.20+)",
    "sglang.language_model_only.pd": "--language-model-only with a disaggregation mode (0.5.18+)",
    "sglang.hicache.radix_cache": "--enable-hierarchical-cache with the radix cache off (0.5.1+)",
    "sglang.hicache.host_memory_mode": "--hicache-host-memory-mode buffer_only without a storage backend, with "
                                       "write_back (to 0.5.21) or on a decode server (0.5.19+)",
    "sglang.lmcache.buffer_only": "--hicache-host-memory-mode buffer_only with --enable-lmcache (0.5.21+)",
    "sglang.kv_cache_sharding.flags": "--enable-kv-cache-sharding beside a feature or model it does not support, a "
                                      "transfer backend other than mooncake / nixl, or without its sharding axis "
                                      "(0.5.22+)",
    "sglang.pd.ib_devices": "an empty --disaggregation-ib-device / --mooncake-ib-device list (0.5.9+)",
    "sglang.kv_mxfp8.platform": "--kv-cache-dtype mxfp8 off Blackwell (0.5.16+)",
    "sglang.unified_memory.pd": "--enable-unified-memory with PD disaggregation over a transfer backend other than "
                                "mooncake, or with decode KV offload / host-pool retraction it does not support "
                                "(0.5.18+)",
    "sglang.page_major_kv_layout.mamba_backend": "the page-major KV layout with --mamba-backend other than triton "
                                                 "(0.5.17+)",
    "sglang.hisparse.check_server_args": "--enable-hisparse off DSA models or with the radix cache on (0.5.10 - "
                                         "0.5.11)",
}

ROUND_ROBIN_RULE = "sglang.pd.decode_round_robin"
HOST_POOL_RULE = "sglang.pd.decode_host_pool"
LMO_RULE = "sglang.language_model_only.pd"
HICACHE_RADIX_RULE = "sglang.hicache.radix_cache"
HOST_MEMORY_RULE = "sglang.hicache.host_memory_mode"
SHARDING_RULE = "sglang.kv_cache_sharding.flags"
IB_RULE = "sglang.pd.ib_devices"
MXFP8_RULE = "sglang.kv_mxfp8.platform"
UNIFIED_PD_RULE = "sglang.unified_memory.pd"
PAGE_MAJOR_MAMBA_RULE = "sglang.page_major_kv_layout.mamba_backend"
HISPARSE_RULE = "sglang.hisparse.check_server_args"

#: ``handle_pd_disaggregation`` sets ``host_pool`` for decode host receive: from 0.5.21 for a threshold above 0,
#: from 0.5.22 for one below 1 (0.5.21 / 0.5.23 ``pd_disaggregation_hook.py`` l.57 / l.68)
HOST_RECEIVE_SINCE, HOST_RECEIVE_BELOW_ONE_SINCE = Version("0.5.21"), Version("0.5.22")
#: ``handle_hicache`` returns first for the unified-cache external linker from 0.5.20 (0.5.20 l.26-37)
HICACHE_LINKER_RETURNS_SINCE = Version("0.5.20")
#: ``_unified_memory_pd_transfer_backends`` (0.5.21 - 0.5.23 ``server_args.py`` l.279 / l.346 / l.347)
UNIFIED_PD_TRANSFER_BACKENDS = frozenset({"mooncake"})
#: ``utils/common.py is_blackwell_supported = is_blackwell``: compute-capability majors (with CUDA >= 12.8, which a
#: build that runs on those GPUs has; 0.5.16 l.274-280, 0.5.23 l.297)
BLACKWELL_MAJORS = (10, 11, 12)
#: the ``set`` test of 0.5.9's duplicate-device check, given as its value (the evaluator applies no ``set``)
DUPLICATE_TEST = "len(devices) != len(set(devices))"
#: the message's list of them, by its text (the evaluator applies no ``str.join``)
SUPPORTED_BACKENDS_WORDS = "', '.join(sorted(supported_backends))"
#: the names the shared namespace gives that this frame resolves itself (left out where it cannot)
_OWN = ("disable_radix_cache",)




def _value(args: ResolvedArgs, dest: str, default: object) -> object:
    value = args.get(dest)
    return default if value is None else value


def transfer_backend(args: ResolvedArgs) -> object:
    """``--disaggregation-transfer-backend`` as the checks read it: ``mooncake_tcp`` is mooncake (0.5.23
    ``pd_disaggregation_hook.py`` l.30-44)."""
    backend = _value(args, "disaggregation_transfer_backend", "mooncake")
    return "mooncake" if backend == "mooncake_tcp" else backend


def retraction_backup(args: ResolvedArgs, listed: Version) -> object:
    """The decode retraction backup when the cache checks read it (see the module)."""
    threshold = args.get("disaggregation_decode_host_receive_threshold")
    if isinstance(threshold, (int, float)) and listed >= HOST_RECEIVE_SINCE and (
            threshold < 1 if listed >= HOST_RECEIVE_BELOW_ONE_SINCE else threshold > 0) and 0 <= threshold <= 1:
        return "host_pool"
    return args.get("disaggregation_decode_retraction_backup")


def _radix_off(args: ResolvedArgs, mode: object) -> bool | None:
    """Whether the radix cache is off when the hierarchical-cache check reads it; None: not resolved."""
    if mode == "decode":
        return None if args.flag("disaggregation_decode_enable_radix_cache") else True
    if args.is_set("disable_radix_cache") and args.flag("disable_radix_cache"):
        return True
    return None


def values(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version,
           env: Mapping[str, str]) -> dict[str, object]:
    """What this module's refusals read (see the module); a value not resolved here is left out."""
    mode = _value(args, "disaggregation_mode", "null")
    ns: dict[str, object] = {dest: args.flag(dest) for dest in (
        "prefill_round_robin_balance", "enable_priority_scheduling", "disable_priority_preemption",
        "disaggregation_decode_enable_offload_kvcache", "disaggregation_decode_enable_radix_cache",
        "enable_response_store", "language_model_only", "enable_hierarchical_cache", "enable_lmcache",
        "enable_unified_cache_external_linker", "enable_streaming_session", "enable_session_radix_cache",
        "enable_flexkv", "enable_unified_memory", "enable_hisparse", "enable_dynamic_chunking",
        "enable_two_batch_overlap", "enable_int8_mamba_checkpoint")}
    ns.update({
        "disaggregation_mode": mode,
        "disaggregation_transfer_backend": transfer_backend(args),
        "disaggregation_decode_retraction_backup": retraction_backup(args, listed),
        "hicache_storage_backend": args.get("hicache_storage_backend"),
        "hicache_host_memory_mode": _value(args, "hicache_host_memory_mode", "cache"),
        "hicache_write_policy": _value(args, "hicache_write_policy", "write_through"),
        "dllm_algorithm": args.get("dllm_algorithm"),
        "radix_cache_backend": args.get("radix_cache_backend"),
        "attention_chunk_size": model.attention_chunk_size,
        "supported_backends": UNIFIED_PD_TRANSFER_BACKENDS,
        SUPPORTED_BACKENDS_WORDS: ", ".join(sorted(UNIFIED_PD_TRANSFER_BACKENDS)),
        "mamba_backend": _value(args, "mamba_backend", "triton"),
        # ``is_in_ci()``: ``SGLANG_IS_IN_CI``, off unless the deployment sets it
        "is_in_ci": env.get("SGLANG_IS_IN_CI", "").strip().lower() in ("1", "true", "yes"),
        "hf_config.model_type": model.hf_model_type,
    })
    radix_off = _radix_off(args, mode)
    if radix_off is not None:
        ns["disable_radix_cache"] = radix_off
    if model.linear_state is None:
        ns["mambaish_config"] = None   # ``mambaish_config(model_config)``: no Mamba-style state
    cc = layout.compute_capability
    if cc is not None:
        ns["is_blackwell"] = ns["is_blackwell_supported"] = cc[0] in BLACKWELL_MAJORS
    return ns


def in_force(rules: Sequence[str], args: ResolvedArgs, listed: Version, retraction: object) -> list[str]:
    """``rules`` less those whose function returns before its checks for this line (see the module)."""
    mode = _value(args, "disaggregation_mode", "null")
    drop: set[str] = set()
    if not args.flag("language_model_only"):
        drop.add(LMO_RULE)
    linker_returns = listed >= HICACHE_LINKER_RETURNS_SINCE and args.flag("enable_unified_cache_external_linker")
    reaches_hicache = (args.flag("enable_hierarchical_cache")
                       or args.flag("disaggregation_decode_enable_offload_kvcache")
                       or (mode == "decode" and retraction in (None, "host_pool")))
    if linker_returns or not reaches_hicache or args.get("hicache_host_memory_mode") != "buffer_only":
        drop.add(HOST_MEMORY_RULE)   # its checks follow ``if mode == "cache": return`` (0.5.23 l.268-269)
    if not args.flag("enable_kv_cache_sharding"):
        drop.add(SHARDING_RULE)
    if args.get("kv_cache_dtype") != "mxfp8":
        drop.add(MXFP8_RULE)
    if not args.flag("enable_unified_memory"):
        drop.add(UNIFIED_PD_RULE)
    if not (args.flag("enable_page_major_kv_layout") or args.flag("enable_unified_memory")):
        drop.add(PAGE_MAJOR_MAMBA_RULE)
    if not args.flag("enable_hisparse"):
        drop.add(HISPARSE_RULE)
    drop.add(IB_RULE)   # judged per flag in frames of its own (``ib_frames``)
    return [r for r in rules if r not in drop]


def ib_frames(args: ResolvedArgs) -> list[dict[str, object]]:
    """One frame per IB device flag the release validates for this line (see the module): ``device_str`` and
    what 0.5.9 - 0.5.12 (``devices``) and 0.5.13+ (``normalized_input``) make of it before they read sysfs."""
    mode = _value(args, "disaggregation_mode", "null")
    given = []
    pd_mooncake = _value(args, "disaggregation_transfer_backend", "mooncake") == "mooncake" and mode in (
        "prefill", "decode")
    if pd_mooncake or args.get("encoder_transfer_backend") == "mooncake":
        given.append(args.get("disaggregation_ib_device"))
    if args.get("elastic_ep_backend") == "mooncake":
        given.append(args.get("mooncake_ib_device"))
    frames: list[dict[str, object]] = []
    for device_str in given:
        if not isinstance(device_str, str):
            continue   # ``if device_str is None: return None``
        devices = [d.strip() for d in device_str.split(",") if d.strip()]
        frames.append({"device_str": device_str, "devices": devices, "normalized_input": device_str.strip(),
                       DUPLICATE_TEST: len(devices) != len(set(devices))})
    return frames


def judge(ask: Ask) -> Judged:
    """This module's rules in force for the line, over the shared namespace with ``values`` over it (less the names
    it resolves itself), then the IB device frames."""
    args = ask.args
    frame = values(args, ask.model, ask.layout, ask.listed, ask.env)
    base = {k: v for k, v in ask.values.items() if k not in _OWN}
    merged = {**base, **frame}
    wanted = ask.among(in_force(list(RULES), args, ask.listed, frame["disaggregation_decode_retraction_backup"]))
    judged = ask.book.judge(ask.version, merged, rules=wanted) if wanted else Judged()
    refusals: list[Refusal] = list(judged.refusals)
    not_judged: list[str] = list(judged.not_judged)
    if IB_RULE in ask.active:
        for ib in ib_frames(args):
            one = ask.book.judge(ask.version, {**merged, **ib}, rules=[IB_RULE])
            refusals.extend(one.refusals)
            not_judged.extend(one.not_judged)
    return Judged(tuple(refusals), tuple(dict.fromkeys(not_judged)))
