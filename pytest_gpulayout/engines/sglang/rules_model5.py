"""SGLang's refusals of ``--language-model-only``, of ``--load-publish-endpoint`` against ``--kv-events-config`` and
of DeepSeek sparse attention (DSA) with a pooled index key under decode context parallelism, by release.

- ``--language-model-only`` (0.5.18 ``server_args.py _handle_language_model_only`` L7659-7687; from 0.5.19
  ``arg_groups/model_hook.py handle_language_model_only``, 0.5.23 L1079-1110, called from
  ``handle_encoder_disaggregation``): it returns without the flag; then it refuses the first of ``--encoder-only``,
  ``--language-only``, ``--enable-prefix-mm-cache``, ``--enable-broadcast-mm-inputs-process`` and
  ``--mm-enable-dp-encoder`` that is on, and a checkpoint none of whose architectures is in
  ``ServerArgs.LANGUAGE_MODEL_ONLY_ARCHITECTURES`` (the class list of each release, ``LMO_ARCHITECTURES``). Muse
  Spark's model override turns ``--mm-enable-dp-encoder`` on itself under attention DP (0.5.23
  ``arg_groups/overrides.py:321-327``): its flag check is not judged for that architecture when the line leaves
  the flag unset.
- ``--load-publish-endpoint`` (0.5.19+ ``arg_groups/validation_hook.py check_load_publish_args``, 0.5.23
  L435-474, the last call of ``check_server_args``): unset or ``off`` returns; else ``--kv-events-config`` must be
  given and, parsed as pydantic's ``KVEventsConfig`` (``disaggregation/kv_events.py``: ``publisher`` defaults to
  ``"null"``, ``endpoint`` to ``"tcp://*:5557"``, unknown keys ignored), name a publisher other than ``null`` with a
  non-empty endpoint. A config that is not a JSON object of the fields' own types is not judged (pydantic's words
  are not reproduced); nor is ``resolve_load_pub_range``'s reason (the endpoint arithmetic).
- DSA with ``--dcp-size > 1`` and a checkpoint whose ``index_kpool`` (``getattr(hf_config, 'index_kpool', 1)``,
  0.5.23 ``configs/model_config.py:530-531``) is above 1: the DeepSeek family's override on CUDA (0.5.22
  ``model_overrides/deepseek_v2.py:165``, 0.5.23 L164), for the architectures it is registered for and a config
  that makes the model DSA (``is_deepseek_dsa``, as ``rules_model3`` tells it from ``config.json``).

- MiniMax-M3.1 NVFP4 (0.5.23 ``arg_groups/model_overrides/minimax_m3.py _minimax_m3_overrides``, registered for
  ``MINIMAX_M3``): the quantization is ``--quantization`` as given (``unquant`` reads as an explicit None,
  ``serving_hook.py:695-703``), else the checkpoint's: ``quantization_config.quant_method``, where ``mxfp8`` with
  ``moe_quant_algo`` NVFP4 and ``moe_quant_format`` ``nvfp4-pack-quantized`` is ``minimax_m3_nvfp4`` (L18-34). Then
  ``--page-size`` must be unset or 128 (L92-93); on Blackwell only (off it the override returns at L94-101) the
  MoE all-to-all backend must be none or megamoe (L102-111) and an explicit KV cache dtype fp8_e4m3 (L116-119).
  The values are the line's as the hooks before the override leave them: ``--moe-runner-backend megamoe`` is an
  alias of ``--moe-a2a-backend megamoe`` with the runner auto (``mega_moe_hook.py:259-276``), a tokenspeed_mla
  attention backend sets the KV cache dtype fp8_e4m3 (``serving_hook.py:324-330``). The speculative checks before
  them read the speculative algorithm SGLang resolves: not judged here.

- DeepSeek-V4 prefill context parallelism's MoE all-to-all backend (``validate_deepseek_v4_cp``: 0.5.17 - 0.5.18
  none / deepep / megamoe, 0.5.17 ``deepseek_v4_hook.py:180-185``; from 0.5.19 mori too, 0.5.23 L229-234), judged
  where ``rules_model4`` judges that function's other checks (the V4 architecture with prefill CP on, in each
  release's spelling). The backend is ``--moe-a2a-backend`` after ``--moe-runner-backend megamoe``'s alias (0.5.18
  ``server_args.py:3790-3802``, run at L3618 before the model adjustments at L3680; 0.5.19+ ``handle_mega_moe``).

- the attention-DP width of a DeepSeek context-parallel layout (0.5.22 - 0.5.23 ``model_override_base.py
  context_parallel_attn_dp_size``, L235): ``--attn-dp-size > 1`` beside ``--dp-size > 1`` (after the deprecated
  ``--enable-dp-attention`` spelling has moved its width, ``parallel_hook.py handle_deprecated_dp_attention``), where
  a layout calls it: DeepSeek-V4 prefill CP (``deepseek_v4_hook.py:205``, after its strategy checks) and DSA
  prefill CP on CUDA (``model_overrides/deepseek_v2.py:110``). The MLA prefill CP of the rest of the DeepSeek family
  (L191-196) is called where ``use_mla_backend`` holds, which is not resolved here: not judged.

- ``SGLANG_RUST_SERVER`` on a PD prefill server (0.5.17+ ``arg_groups/pd_disaggregation_hook.py
  _alias_bootstrap_port_to_api_port``, called for ``--disaggregation-mode prefill`` with the variable on: 0.5.17
  L105-106, 0.5.23 L150-151): the Rust server serves the KV bootstrap registry on the api port, so
  ``--disaggregation-bootstrap-port`` must be its default (8998, the field's: 0.5.23 ``fields/disagg.py:83``) or
  ``--port``. From 0.5.23 it returns first for a transfer backend whose bootstrap server is not the common one
  (``rust_server_serves_kv_bootstrap``); every built-in backend a prefill server takes (mooncake, mori, nixl,
  ascend: ``disaggregation/utils.py get_kv_class``) subclasses ``CommonKVBootstrapServer``, and ``fake`` is refused
  on prefill before (L145-147).

- ``--multi-item-scoring-delimiter`` with chunked prefill on (0.5.3.post1 - 0.5.10.post1 ``server_args.py
  check_server_args``, 0.5.10 L6169-6177): the size must be -1. Unset, the release gives it a positive one by GPU
  memory (0.5.10 ``_handle_gpu_memory_settings`` L1166-1226: 2048 ... 16384, every branch ``if ... is None``) and the
  only later rewrite divides it by the DP size (L2641; -1 stays -1): nothing in these releases sets -1 itself, so
  only ``--chunked-prefill-size -1`` passes. The radix-cache entry beside it is left open: these releases turn the
  radix cache off themselves for many models and features.

- ``SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS`` in the launch environment, whatever its value (0.5.20+
  ``arg_groups/validation_hook.py validate_sampling_mask_max_tokens``, 0.5.23 L678-685, run for every line at
  ``pipeline.py:92``; ``EnvField.is_set`` is ``name in os.environ``, ``environ.py:88-89``).

- Qwen4-Exp's model override (0.5.20+ ``arg_groups/model_overrides/qwen4_exp.py _qwen4_exp_overrides``, registered
  for ``Qwen4ExpForConditionalGeneration``; 0.5.23 L28-39): PD over MORI with PP, ``--enable-unified-memory``; and
  from 0.5.22 ``--qsa-indexer-dtype fp8_e4m3`` off a CUDA SM90 / SM100 GPU (0.5.23 L78-84). Its compressed-indexer
  check (L85-88) reads ``parse_qsa_profile`` over the checkpoint's config: left open.

- MiMo-V2 prefill CP-v2 in a strategy other than zigzag (0.5.16 - 0.5.18 ``server_args.py
  _handle_context_parallelism``, 0.5.18 L6520-6526; 0.5.19 ``arg_groups/parallel_hook.py:50-55``): CP-v2 is
  ``SGLANG_ENABLE_CP_V2`` as the launch sets it (an ``EnvBool``: true / 1 / yes / y, false / 0 / no / n, any other
  spelling its default False), else on for MiMo-V2, which ``CP_V2_DEFAULT_MODEL_CLASSES`` lists and which is not
  DSA (0.5.19 L40-47, ``layers/cp/utils.py:43-53``; the same block in 0.5.16 - 0.5.18). The text-only check beside
  it reads ``model_config.is_multimodal``: left open.

A remote-instance model path (``instance://``) returns before the model overrides (0.5.23 ``model_hook.py:160-163``):
neither the DSA nor the MiniMax rules are judged for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang import rules_model3, rules_model4
from pytest_gpulayout.engines.sglang.rules_model import Frame, gpu_values
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

RULES: Mapping[str, str] = {
    "sglang.language_model_only": "--language-model-only with an encoder / multimodal-cache flag, or with a "
                                  "checkpoint whose architecture the release does not list for it (0.5.18+)",
    "sglang.load_publish.kv_events": "--load-publish-endpoint without --kv-events-config, or with a null publisher "
                                     "or an empty endpoint in it (0.5.19+)",
    "sglang.dsa.index_kpool_dcp": "--dcp-size > 1 with a DSA checkpoint whose index_kpool is above 1 (0.5.22+)",
    "sglang.deepseek_v4.prefill_cp_a2a": "DeepSeek-V4 prefill CP with a MoE all-to-all backend other than none / "
                                         "deepep / megamoe (and mori from 0.5.19)",
    "sglang.cp.attn_dp_replicas": "--attn-dp-size > 1 with --dp-size > 1 in a DeepSeek-V4 or DSA prefill-CP layout "
                                  "(0.5.22+)",
    "sglang.pd.rust_server_bootstrap_port": "SGLANG_RUST_SERVER on a PD prefill server with a "
                                            "--disaggregation-bootstrap-port other than its default or --port "
                                            "(0.5.17+)",
    "sglang.multi_item_scoring.chunked_prefill": "--multi-item-scoring-delimiter without --chunked-prefill-size -1 "
                                                 "(0.5.3.post1 - 0.5.10.post1)",
    "sglang.env.sampling_mask_max_tokens": "SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS set in the launch "
                                           "environment (0.5.20+: removed)",
    "sglang.qwen4_exp.overrides": "Qwen4-Exp with PD over MORI and PP, with --enable-unified-memory, or with "
                                  "--qsa-indexer-dtype fp8_e4m3 off an SM90 / SM100 GPU (0.5.20+)",
    "sglang.mimo_v2.cp_v2_strategy": "MiMo-V2 prefill CP-v2 (on by default) in a --cp-strategy other than zigzag "
                                     "(0.5.16 - 0.5.19)",
    "sglang.minimax_m3.nvfp4_page_size": "MiniMax-M3.1 NVFP4 with a --page-size other than 128 (0.5.23)",
    "sglang.minimax_m3.nvfp4_blackwell": "MiniMax-M3.1 NVFP4 on Blackwell with a MoE all-to-all backend other than "
                                         "none / megamoe or a KV cache dtype other than fp8_e4m3 (0.5.23)",
}

#: ``ServerArgs.LANGUAGE_MODEL_ONLY_ARCHITECTURES`` by the first release of each (0.5.18 ``server_args.py``,
#: 0.5.20 adds Cosmos 3, 0.5.22 DeepSeek-V4: 0.5.23 ``server_args.py:335-340``)
LMO_ARCHITECTURES: tuple[tuple[Version, tuple[str, ...]], ...] = (
    (Version("0.5.18"), ("MuseGlimmerForConditionalGeneration",)),
    (Version("0.5.20"), ("MuseGlimmerForConditionalGeneration", "Cosmos3ForConditionalGeneration",
                         "Cosmos3EdgeForConditionalGeneration")),
    (Version("0.5.22"), ("DeepseekV4ForCausalLM", "MuseGlimmerForConditionalGeneration",
                         "Cosmos3ForConditionalGeneration", "Cosmos3EdgeForConditionalGeneration")),
)
#: the flags ``--language-model-only`` cannot be combined with, in the release's order (0.5.23 L1083-1093)
LMO_CONFLICTS: tuple[tuple[str, str], ...] = (
    ("encoder_only", "--encoder-only"), ("language_only", "--language-only"),
    ("enable_prefix_mm_cache", "--enable-prefix-mm-cache"),
    ("enable_broadcast_mm_inputs_process", "--enable-broadcast-mm-inputs-process"),
    ("mm_enable_dp_encoder", "--mm-enable-dp-encoder"),
)
#: the loop's text as the ledger holds it, by the spelling of each release (``self.`` in 0.5.18, ``cfg.`` after)
LMO_LOOPS = tuple(
    "for (flag, name) in (" + ", ".join(f"({owner}.{dest}, '{name}')" for dest, name in LMO_CONFLICTS) + ")"
    for owner in ("self", "cfg"))
LMO_ARCH_CONDITIONS = tuple(f"not any((a in {owner}.LANGUAGE_MODEL_ONLY_ARCHITECTURES for a in architectures))"
                            for owner in ("self", "server_args"))
MUSE_SPARK = "MuseSparkForConditionalGeneration"

#: ``KVEventsConfig``'s fields by the first release of each and the JSON types pydantic takes for them without a
#: conversion this module would have to reproduce (0.5.19 ``disaggregation/kv_events.py``; 0.5.22 adds ``bind``
#: and ``format``)
_STR, _INT, _OPT_STR, _OPT_BOOL = (str,), (int,), (str, type(None)), (bool, type(None))
KV_EVENTS_FIELDS: tuple[tuple[Version, Mapping[str, tuple[type, ...]]], ...] = (
    (Version("0.5.19"), {"publisher": _STR, "endpoint": _STR, "replay_endpoint": _OPT_STR, "buffer_steps": _INT,
                         "hwm": _INT, "max_queue_size": _INT, "topic": _STR}),
    (Version("0.5.22"), {"publisher": _STR, "endpoint": _STR, "bind": _OPT_BOOL, "replay_endpoint": _OPT_STR,
                         "buffer_steps": _INT, "hwm": _INT, "max_queue_size": _INT, "topic": _STR,
                         "format": _STR}),
)
KV_EVENTS_FORMATS = ("default", "dynamo")
KV_EVENTS_DEFAULTS: Mapping[str, str] = {"publisher": "null", "endpoint": "tcp://*:5557"}

#: ``index_kpool`` of a DSA checkpoint without the key (``get_dsa_index_kpool``)
INDEX_KPOOL_DEFAULT = 1
_INSTANCE_SCHEME = "instance://"

#: ``validate_deepseek_v4_cp``'s all-to-all backends by the first release of each (0.5.17 L180, 0.5.19 L205)
V4_CP_A2A: tuple[tuple[Version, tuple[str, ...]], ...] = (
    (Version("0.5.17"), ("none", "deepep", "megamoe")),
    (Version("0.5.19"), ("none", "deepep", "megamoe", "mori")),
)
#: the first release whose ``--moe-runner-backend megamoe`` is an alias of ``--moe-a2a-backend megamoe``
MEGAMOE_ALIAS_SINCE = Version("0.5.18")

#: ``disaggregation_bootstrap_port``'s field default, the ``default_port`` the check reads (0.5.17 - 0.5.23)
BOOTSTRAP_PORT_DEFAULT = 8998
_ENV_TRUE = ("1", "true", "yes")

#: the condition's text of the multi-item chunked-prefill check (0.5.10 ``server_args.py:6173``)
MULTI_ITEM_CHUNKED = "not (self.chunked_prefill_size == -1)"

#: the removed variable ``validate_sampling_mask_max_tokens`` refuses by its presence (0.5.23 L679)
SAMPLING_MASK_ENV = "SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS"

QWEN4_EXP = "Qwen4ExpForConditionalGeneration"

#: the spellings ``EnvBool.parse`` takes (0.5.19 ``environ.py:143-150``); another one reads as the default
_ENV_BOOL_TRUE, _ENV_BOOL_FALSE = ("true", "1", "yes", "y"), ("false", "0", "no", "n")
CP_V2_ENV = "SGLANG_ENABLE_CP_V2"

MINIMAX_M3 = ("MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration")
MINIMAX_NVFP4 = "minimax_m3_nvfp4"
#: the attention backends whose (deprecated) tokenspeed_mla spelling makes ``handle_deprecated_args`` set the KV
#: cache dtype fp8_e4m3 before the model overrides (0.5.23 ``serving_hook.py:324-330``)
TOKENSPEED = "tokenspeed_mla"


def _by_release(table: tuple[tuple[Version, object], ...], listed: Version) -> object:
    chosen: object = None
    for since, value in table:
        if listed >= since:
            chosen = value
    return chosen


def _language_model_only(args: ResolvedArgs, model: ModelSpec, listed: Version, rules: list[str],
                         notes: list[str]) -> dict[str, object]:
    """The first conflicting flag that is on (``flag`` / ``name`` and the loop's text), the architectures and the
    release's list (see the module docstring)."""
    rule = "sglang.language_model_only"
    if not bool(args.get("language_model_only", False)):
        rules.remove(rule)
        return {}
    arch = model.architectures[0] if model.architectures else ""
    first = next(((dest, name) for dest, name in LMO_CONFLICTS if bool(args.get(dest, False))), None)
    if first is None and arch == MUSE_SPARK and not args.is_set("mm_enable_dp_encoder"):
        notes.append(f"{arch}: whether its model override turns --mm-enable-dp-encoder on under attention DP "
                     "is not resolved: --language-model-only is not judged")
        rules.remove(rule)
        return {}
    supported = _by_release(LMO_ARCHITECTURES, listed)
    assert isinstance(supported, tuple)
    out: dict[str, object] = {loop: first is not None for loop in LMO_LOOPS}
    out["flag"] = first is not None
    out["name"] = first[1] if first is not None else None
    architectures = list(model.architectures)
    out["architectures"] = architectures
    for owner in ("self", "server_args"):
        out[f"list({owner}.LANGUAGE_MODEL_ONLY_ARCHITECTURES)"] = list(supported)
    unsupported = not any(a in supported for a in architectures)
    out.update({condition: unsupported for condition in LMO_ARCH_CONDITIONS})
    return out


def _kv_events(args: ResolvedArgs, listed: Version, rules: list[str], notes: list[str]) -> dict[str, object]:
    """``load_publish_endpoint`` as the check trims it, ``kv_events_config`` as given and, parsed, its
    ``publisher`` and ``endpoint`` (see the module docstring)."""
    rule = "sglang.load_publish.kv_events"
    mode = args.get("load_publish_endpoint")
    mode = mode.strip() if isinstance(mode, str) else ""
    if not mode or mode.lower() == "off":
        rules.remove(rule)
        return {}
    given = args.get("kv_events_config")
    out: dict[str, object] = {"kv_events_config": given}
    if not given:
        return out
    fields = _by_release(KV_EVENTS_FIELDS, listed)
    assert isinstance(fields, dict)
    try:
        parsed = json.loads(str(given))
    except ValueError:
        parsed = None
    typed = isinstance(parsed, dict) and all(
        isinstance(value, fields[key]) and not (isinstance(value, bool) and fields[key] == _INT)
        for key, value in parsed.items() if key in fields)
    if typed and isinstance(parsed, dict) and "format" in parsed and "format" in fields:
        typed = parsed["format"] in KV_EVENTS_FORMATS
    if not typed or not isinstance(parsed, dict):
        notes.append("--kv-events-config is not a JSON object of KVEventsConfig's field types: how the release's "
                     "pydantic model takes it is not reproduced, its --load-publish-endpoint checks are not judged")
        rules.remove(rule)
        return {}
    out["except Exception"] = False
    for key, default in KV_EVENTS_DEFAULTS.items():
        out[key] = parsed.get(key, default)
    return out


def _index_kpool(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version,
                 rules: list[str]) -> dict[str, object]:
    """``is_deepseek_dsa``, the checkpoint's ``index_kpool`` and ``--dcp-size`` for the DeepSeek family's
    override (see the module docstring)."""
    rule = "sglang.dsa.index_kpool_dcp"
    path = args.get("model_path")
    arch = model.architectures[0] if model.architectures else ""
    dsa = rules_model3.frame(args, model, layout, listed).values.get("is_deepseek_dsa")
    config = rules_model4._config(model)
    kpool = config.get("index_kpool", INDEX_KPOOL_DEFAULT) if config is not None else None
    if ((isinstance(path, str) and path.lower().startswith(_INSTANCE_SCHEME))
            or arch not in rules_model4.DEEPSEEK_FAMILY or dsa is None or rules_model4._int(kpool) is None):
        rules.remove(rule)
        return {}
    return {"is_deepseek_dsa": dsa, "index_kpool": kpool, "dcp_size": args.get("dcp_size", 1),
            "is_npu": False, "is_xpu": False, "is_hip": False}


def _checkpoint_quant(config: dict[str, object] | None) -> object:
    """``_resolve_quant_method`` over ``config.json`` (0.5.23 ``minimax_m3.py:18-34``)."""
    qc = config.get("quantization_config") if config is not None else None
    if not isinstance(qc, dict):
        return None
    method = qc.get("quant_method")
    if method != "mxfp8":
        return method
    if str(qc.get("moe_quant_algo", "")).upper() != "NVFP4" or qc.get("moe_quant_format") != "nvfp4-pack-quantized":
        return method
    return MINIMAX_NVFP4


def _minimax_m3(args: ResolvedArgs, model: ModelSpec, ask_values: Mapping[str, object], rules: list[str],
                notes: list[str]) -> dict[str, object]:
    """``quant_resolved``, ``page_size``, the MoE backends and the KV cache dtype as the override reads them (see
    the module docstring); the Blackwell rule only where the GPU is Blackwell."""
    page, blackwell = "sglang.minimax_m3.nvfp4_page_size", "sglang.minimax_m3.nvfp4_blackwell"
    path = args.get("model_path")
    arch = model.architectures[0] if model.architectures else ""
    if arch not in MINIMAX_M3 or (isinstance(path, str) and path.lower().startswith(_INSTANCE_SCHEME)):
        rules.remove(page)
        rules.remove(blackwell)
        return {}
    given = args.get("quantization")
    checkpoint = _checkpoint_quant(rules_model4._config(model))
    quant = None if given == "unquant" else given if given is not None else checkpoint
    runner, a2a = _moe_backends(args, Version("0.5.23"))
    kv = args.get("kv_cache_dtype", "auto")
    if TOKENSPEED in (args.get("attention_backend"), args.get("decode_attention_backend")):
        kv = "fp8_e4m3"
    is_blackwell = ask_values.get("is_blackwell")
    if not isinstance(is_blackwell, bool) or not is_blackwell:
        rules.remove(blackwell)
        if not isinstance(is_blackwell, bool) and quant == MINIMAX_NVFP4:
            notes.append(f"{arch}: whether the GPU is Blackwell is not known: its NVFP4 all-to-all / KV cache dtype "
                         "checks are not judged")
    return {"quant_resolved": quant, "page_size": args.get("page_size"), "moe_runner_backend": runner,
            "moe_a2a_backend": a2a, "kv_cache_dtype": kv}


def _moe_backends(args: ResolvedArgs, listed: Version) -> tuple[object, object]:
    """``moe_runner_backend`` / ``moe_a2a_backend`` after the megamoe runner alias, where the release has it."""
    runner, a2a = args.get("moe_runner_backend", "auto"), args.get("moe_a2a_backend", "none")
    if runner == "megamoe" and listed >= MEGAMOE_ALIAS_SINCE:
        return "auto", "megamoe"
    return runner, a2a


def _deepseek_v4_cp_a2a(args: ResolvedArgs, listed: Version, v4: Frame, rules: list[str]) -> dict[str, object]:
    """The all-to-all backend and the release's list, where ``rules_model4`` judges the V4 CP check."""
    rule = "sglang.deepseek_v4.prefill_cp_a2a"
    supported = _by_release(V4_CP_A2A, listed)
    if "sglang.deepseek_v4.prefill_cp" not in v4.rules or not isinstance(supported, tuple):
        rules.remove(rule)
        return {}
    return {"moe_a2a_backend": _moe_backends(args, listed)[1], "supported_a2a_backends": supported}


def _cp_attn_dp(args: ResolvedArgs, model: ModelSpec, v4: Frame, ask_values: Mapping[str, object],
               rules: list[str], notes: list[str]) -> dict[str, object]:
    """The attention-DP width and the replicas where a CP layout calls ``context_parallel_attn_dp_size`` (see the
    module docstring)."""
    rule = "sglang.cp.attn_dp_replicas"
    arch = model.architectures[0] if model.architectures else ""
    path = args.get("model_path")
    remote = isinstance(path, str) and path.lower().startswith(_INSTANCE_SCHEME)
    prefill_cp = bool(args.get("enable_prefill_cp", False))
    v4_cp = arch == rules_model4.V4 and "sglang.deepseek_v4.prefill_cp" in v4.rules
    family = not remote and prefill_cp and arch in rules_model4.DEEPSEEK_FAMILY
    dsa_cp = family and v4.values.get("is_deepseek_dsa") is True
    if not (v4_cp or dsa_cp):
        rules.remove(rule)
        if family and v4.values.get("is_deepseek_dsa") is not True:
            notes.append(f"{arch}: whether its prefill CP is DSA or MLA context parallelism (use_mla_backend) is not "
                         "resolved: its attention-DP width check is not judged")
        return {}
    return {"attn_dp_size": ask_values.get("attn_dp_size"), "dp_size": ask_values.get("dp_size")}


def _rust_bootstrap(args: ResolvedArgs, env: Mapping[str, str], rules: list[str]) -> dict[str, object]:
    """The ports the check compares, on a prefill server with ``SGLANG_RUST_SERVER`` on (an ``EnvBool``: a true
    spelling; see the module docstring)."""
    rule = "sglang.pd.rust_server_bootstrap_port"
    rust = env.get("SGLANG_RUST_SERVER", "").strip().lower() in _ENV_TRUE
    prefill = args.get("disaggregation_mode") == "prefill"
    if not rust or not prefill or args.get("disaggregation_transfer_backend") == "fake":
        rules.remove(rule)
        return {}
    return {"default_port": BOOTSTRAP_PORT_DEFAULT, "port": args.get("port"),
            "disaggregation_bootstrap_port": args.get("disaggregation_bootstrap_port")}


def _multi_item(args: ResolvedArgs, rules: list[str]) -> dict[str, object]:
    """The delimiter as given and whether chunked prefill stays on (see the module docstring)."""
    rule = "sglang.multi_item_scoring.chunked_prefill"
    delimiter = args.get("multi_item_scoring_delimiter")
    if delimiter is None:
        rules.remove(rule)
        return {}
    return {"multi_item_scoring_delimiter": delimiter,
            MULTI_ITEM_CHUNKED: not (args.is_set("chunked_prefill_size") and args.get("chunked_prefill_size") == -1)}


def _qwen4_exp(args: ResolvedArgs, model: ModelSpec, ask_values: Mapping[str, object],
               rules: list[str]) -> dict[str, object]:
    """The flags the override reads first, PP from the layout, the platform as CUDA (see the module docstring)."""
    rule = "sglang.qwen4_exp.overrides"
    path = args.get("model_path")
    arch = model.architectures[0] if model.architectures else ""
    if arch != QWEN4_EXP or (isinstance(path, str) and path.lower().startswith(_INSTANCE_SCHEME)):
        rules.remove(rule)
        return {}
    return {"disaggregation_mode": args.get("disaggregation_mode", "null"),
            "disaggregation_transfer_backend": args.get("disaggregation_transfer_backend"),
            "pp_size": ask_values.get("pp_size"),
            "enable_unified_memory": bool(args.get("enable_unified_memory", False)),
            "qsa_indexer_dtype": args.get("qsa_indexer_dtype"), "is_cuda": True}


def _mimo_cp_v2(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version, env: Mapping[str, str],
                rules: list[str]) -> dict[str, object]:
    """Prefill CP, the strategy and CP-v2 as the release resolves it for MiMo-V2 (see the module docstring)."""
    rule = "sglang.mimo_v2.cp_v2_strategy"
    path = args.get("model_path")
    arch = model.architectures[0] if model.architectures else ""
    if arch not in rules_model4.MIMO_V2 or (isinstance(path, str) and path.lower().startswith(_INSTANCE_SCHEME)):
        rules.remove(rule)
        return {}
    dsa = rules_model3.frame(args, model, layout, listed).values
    if CP_V2_ENV in env:
        cp_v2 = env[CP_V2_ENV].lower() in _ENV_BOOL_TRUE
    else:
        cp_v2 = True      # CP_V2_DEFAULT_MODEL_CLASSES lists both MiMo-V2 architectures, not DSA models
    out: dict[str, object] = {f"envs.{CP_V2_ENV}.get": cp_v2, "model_arch": arch,
                              "enable_prefill_cp": dsa.get("enable_prefill_cp", False),
                              "cp_strategy": dsa.get("cp_strategy", args.get("cp_strategy"))}
    for owner in ("self", "cfg"):
        out[f"parse_connector_type({owner}.model_path) != ConnectorType.INSTANCE"] = True
    return out


def frame(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version,
          ask_values: Mapping[str, object], env: Mapping[str, str]) -> Frame:
    """The values ``RULES``'s entries read at ``listed`` and the rules to judge (see the module docstring)."""
    rules = list(RULES)
    notes: list[str] = []
    values: dict[str, object] = {}
    values.update(_language_model_only(args, model, listed, rules, notes))
    values.update(_kv_events(args, listed, rules, notes))
    values.update(_index_kpool(args, model, layout, listed, rules))
    values.update(gpu_values(layout, listed))
    values.update(_minimax_m3(args, model, values, rules, notes))
    v4 = rules_model4.frame(args, model, layout, listed, ask_values)
    values.update(_deepseek_v4_cp_a2a(args, listed, v4, rules))
    values.update(_cp_attn_dp(args, model, v4, ask_values, rules, notes))
    values.update(_rust_bootstrap(args, env, rules))
    values.update(_multi_item(args, rules))
    values.update(_qwen4_exp(args, model, ask_values, rules))
    values.update(_mimo_cp_v2(args, model, layout, listed, env, rules))
    values[f"envs.{SAMPLING_MASK_ENV}.is_set"] = SAMPLING_MASK_ENV in env
    return Frame(values, tuple(rules), tuple(notes))


def judge(ask: Ask) -> Judged:
    """The rules ``frame`` names, in that frame over the shared namespace, and what it could not resolve."""
    framed = frame(ask.args, ask.model, ask.layout, ask.listed, ask.values, ask.env)
    judged = ask.judge(framed.values, framed.rules)
    return Judged(judged.refusals, framed.notes + judged.not_judged)
