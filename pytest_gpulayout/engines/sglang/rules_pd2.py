"""SGLang's refusals of PD disaggregation beside DeepSeek sparse attention (DSA), the unified memory pool's PD /
DCP / hybrid-SWA limits, the SWA and radix-eviction flag values, the NVFP4 prefill dequantization flags, multi-item
scoring's backend and the KV-cache sharding environment, the values they read as each release holds them
(``judge`` judges them in a frame of its own over the shared namespace and ``rules_model3``'s DSA frame).

* DSA prefill CP on a decode server (``_handle_model_specific_adjustments``' DSA branch, 0.5.8 - 0.5.18
  ``server_args.py``, from 0.5.19 ``arg_groups/model_hook.py``, 0.5.23 l.361-364): ``assert disaggregation_mode !=
  "decode"`` under prefill context parallelism (``--enable-nsa-prefill-context-parallel`` 0.5.8 - 0.5.12,
  ``--enable-dsa-prefill-context-parallel`` 0.5.13, ``--enable-prefill-cp`` from 0.5.14 after the legacy aliases:
  ``rules_model3``'s frame). ``--enable-dsa-cache-layer-split`` (0.5.16+, 0.5.23 l.365-400): on a decode server
  "not supported on decode workers" (l.369-375), without PD "only supported on PD prefill workers" (the ``raise``
  after that ``if``, l.376-380: judged only off a decode server, ``NON_PD_RULE``), and a transfer backend other
  than mooncake (``mooncake_tcp`` counts as mooncake, ``rules_pd.transfer_backend``; l.385-400). A model path
  ``instance://...`` returns before the branch (``rules_model3``).
* The DSA KV cache dtype after its default (0.5.9 - 0.5.12 ``_set_default_nsa_kv_cache_dtype``, 0.5.13 - 0.5.14
  ``_set_default_dsa_kv_cache_dtype``, from 0.5.15 ``overrides.py _dsa_kv_cache_dtype_default``, 0.5.23 l.525-544,
  run in the DSA branch on CUDA): ``auto`` becomes fp8_e4m3 or bfloat16 (both allowed), ``bf16`` bfloat16; any
  other dtype is refused, and from 0.5.20 a model with learnable attention sinks (``learnable_sink`` in its
  config) refuses a dtype other than auto / bf16 / bfloat16 first (l.527-531).
* DSA DCP (0.5.22+, ``model_overrides/deepseek_v2.py _dsa_dcp_overrides``, 0.5.23 l.18-24, called for a DSA model of
  ``_deepseek_family_overrides``' architectures, l.99-100; returns with ``--dcp-size`` 1): HiSparse / HiCache and PD
  disaggregation are refused.
* The unified memory pool (``handle_unified_memory_pool``, returns without ``--enable-unified-memory``): with PD,
  ``SGLANG_DISABLE_LAZY_COMPACTION`` (an ``EnvBool``, off unless set to true / 1 / yes / y; 0.5.18+, 0.5.23
  l.554-557); decode KV offload (0.5.21+) and host-pool retraction (0.5.21) refuse a hybrid-SWA model
  (``ModelConfig.is_hybrid_swa``: an architecture of ``is_hybrid_swa_model`` and no ``--disable-hybrid-swa-memory``,
  0.5.23 ``configs/model_config.py`` l.1215-1218; GPT-OSS and Llama 4 are listed from 0.5.20, a model with no
  sliding window outside the list is not; another is not judged). With ``--dcp-size`` > 1 (0.5.20+,
  ``_validate_unified_memory_dcp``, called at 0.5.23 l.681-682): an MLA model only, no hybrid-SWA model, no PD. The
  retraction backup is ``rules_pd.retraction_backup``'s. Its backend check reads the backends SGLang resolves: open.
* Spec v2 with decode KV offload (0.5.5.post3 - 0.5.9 ``_handle_cache_compatibility``, 0.5.9 l.2696-2702):
  ``SGLANG_ENABLE_SPEC_V2`` (an ``EnvBool``) on a decode server with ``--disaggregation-decode-enable-offload-
  kvcache``.
* ``--swa-full-tokens-ratio`` outside (0, 1] (0.5.7+, ``handle_cache_compatibility``; 0.5.23 l.427): the line's
  value, else 0.8 (the default, 0.5.10 ``server_args.py`` l.360; from 0.5.21 the field's fallback, 0.5.23
  ``fields/schedule.py`` l.150-161). Model branches that reset it first (MiMo-V2-Flash / Step-3.5 with hierarchical
  cache set 1.0: 0.5.10 l.1807 / l.1827, 0.5.23 ``overrides.py`` l.353-355; DeepSeek V4 / Inkling fill an unset one,
  ``deepseek_v4.py`` l.45-48, a value the check takes) are not judged where the line gives a ratio.
  ``--swa-prefix-tails`` below 0 (0.5.21+, l.429-431).
* Radix eviction: ``--enable-session-radix-cache`` needs ``--radix-eviction-policy priority`` (0.5.15 - 0.5.16,
  0.5.15 l.5767); ``--radix-eviction-policy tlru`` needs non-negative ``threshold`` / ``next_prompt_estimate`` in
  ``--radix-eviction-policy-config`` (each 0 when absent) with the threshold above the estimate (0.5.21+, 0.5.23
  l.375-391). The policy is the line's (a model default, Qwen3-VL's ``priority``, fills only an unset one).
* NVFP4 prefill dequantization (0.5.21+, ``handle_nvfp4_prefill_kv_dequant_dtype``, 0.5.23 l.34-97, run after the
  model-specific step and deterministic inference, before the backends are picked, ``pipeline.py`` l.241-242):
  ``--prefill-kv-cache-dequant-dtype`` other than auto needs ``--kv-cache-dtype nvfp4``; with it, the explicit
  backend (``--prefill-attention-backend``, else ``--attention-backend``) must be flashinfer or trtllm_mha when the
  dtype is auto (which it then picks: fp8_e4m3 / nvfp4; with none, nvfp4 on SM100, else fp8_e4m3), native NVFP4
  needs SM100, the explicit prefill backend must be the dtype's and the decode backend trtllm_mha. The explicit
  backend is the line's where nothing sets one first: a line that names none, with deterministic inference or a
  model whose overrides pick a backend (anything outside ``PLAIN_ARCHS``), is not judged there.
* Multi-item scoring (0.5.11+, ``_handle_multi_item_scoring`` / ``attention_hook.py handle_multi_item_scoring``,
  0.5.23 l.526-575, after the backends are picked, ``pipeline.py`` l.263): ``--enable-mis`` needs flashinfer for
  prefill and decode. Judged where the line names the backends (``--prefill-attention-backend`` /
  ``--decode-attention-backend``, else ``--attention-backend``) and no FP4 KV cache rewrites them; unnamed, SGLang
  picks them: not resolved here.
* KV-cache sharding (0.5.22+, ``kv_shard_hook.py handle_kv_cache_sharding``, 0.5.23 l.245-250):
  ``SGLANG_DISAGG_STAGING_BUFFER`` is refused.

The environment is the deployment's (``ask.env``; unset: the release's default).
"""

from __future__ import annotations

from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang import rules_model3, rules_pd
from pytest_gpulayout.engines.sglang.rules_model2 import is_deepseek_dsa
from pytest_gpulayout.engines.sglang.served import learnable_sink
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

RULES: Mapping[str, str] = {
    "sglang.dsa.prefill_cp.pd_decode": "DeepSeek DSA prefill context parallelism on a PD decode server (0.5.8+)",
    "sglang.dsa.cache_layer_split.pd": "--enable-dsa-cache-layer-split on a PD decode server, or with a transfer "
                                       "backend other than mooncake (0.5.16+)",
    "sglang.dsa.cache_layer_split.non_pd": "--enable-dsa-cache-layer-split without PD disaggregation (0.5.16+)",
    "sglang.dsa.kv_cache_dtype_default": "DeepSeek DSA with a --kv-cache-dtype other than auto / bf16 / bfloat16 / "
                                         "fp8_e4m3, or fp8 with learnable attention sinks (0.5.9+)",
    "sglang.dsa.dcp": "DeepSeek DSA with --dcp-size > 1 beside HiSparse / HiCache or PD disaggregation (0.5.22+)",
    "sglang.unified_memory.lazy_compaction": "--enable-unified-memory with PD disaggregation and "
                                             "SGLANG_DISABLE_LAZY_COMPACTION set (0.5.18+)",
    "sglang.unified_memory.hybrid_swa_transfer": "--enable-unified-memory decode KV offload (0.5.21+) or host-pool "
                                                 "retraction (0.5.21) with a hybrid-SWA model",
    "sglang.unified_memory.dcp": "--enable-unified-memory with --dcp-size > 1 on a non-MLA or hybrid-SWA model, or "
                                 "with PD disaggregation (0.5.20+)",
    "sglang.pd.spec_v2_decode_offload": "SGLANG_ENABLE_SPEC_V2 with decode KV offload on a PD decode server "
                                        "(0.5.5.post3 - 0.5.9)",
    "sglang.cache.swa_flags": "--swa-full-tokens-ratio outside (0, 1] (0.5.7+) or a negative --swa-prefix-tails "
                              "(0.5.21+)",
    "sglang.cache.radix_eviction": "--enable-session-radix-cache without the priority eviction policy (0.5.15 - "
                                   "0.5.16), or a tlru policy config whose threshold is negative or not above the "
                                   "next-prompt estimate (0.5.21+)",
    "sglang.kv4.nvfp4_dequant_flag": "--prefill-kv-cache-dequant-dtype without --kv-cache-dtype nvfp4, or NVFP4 "
                                     "with an explicit prefill backend that is neither flashinfer nor trtllm_mha "
                                     "(0.5.21+)",
    "sglang.kv4.nvfp4_prefill": "NVFP4 native prefill off SM100, or NVFP4 with a prefill / decode backend other "
                                "than the one its dequant dtype needs (0.5.21+)",
    "sglang.multi_item_scoring.backend": "--enable-mis with a prefill or decode attention backend other than "
                                         "flashinfer (0.5.11+)",
    "sglang.kv_cache_sharding.staging_buffer": "--enable-kv-cache-sharding with SGLANG_DISAGG_STAGING_BUFFER "
                                               "(0.5.22+)",
}

DSA_CP_RULE = "sglang.dsa.prefill_cp.pd_decode"
SPLIT_PD_RULE = "sglang.dsa.cache_layer_split.pd"
NON_PD_RULE = "sglang.dsa.cache_layer_split.non_pd"
DSA_DCP_RULE = "sglang.dsa.dcp"
DSA_KV_RULE = "sglang.dsa.kv_cache_dtype_default"
LAZY_RULE = "sglang.unified_memory.lazy_compaction"
SWA_TRANSFER_RULE = "sglang.unified_memory.hybrid_swa_transfer"
UNIFIED_DCP_RULE = "sglang.unified_memory.dcp"
SPEC_V2_RULE = "sglang.pd.spec_v2_decode_offload"
SWA_RULE = "sglang.cache.swa_flags"
EVICTION_RULE = "sglang.cache.radix_eviction"
DEQUANT_FLAG_RULE = "sglang.kv4.nvfp4_dequant_flag"
NVFP4_PREFILL_RULE = "sglang.kv4.nvfp4_prefill"
MIS_RULE = "sglang.multi_item_scoring.backend"
STAGING_RULE = "sglang.kv_cache_sharding.staging_buffer"
_DSA_RULES = (DSA_CP_RULE, SPLIT_PD_RULE, NON_PD_RULE, DSA_DCP_RULE, DSA_KV_RULE)
#: the rules judged in frames of their own (``judge``)
_OWN_FRAMES = (NVFP4_PREFILL_RULE, DSA_KV_RULE)

#: ``EnvBool.parse``'s true spellings (0.5.23 ``environ.py`` l.143-149; the same from 0.5.5)
_ENV_TRUE = ("true", "1", "yes", "y")
#: ``_deepseek_family_overrides``' architectures in both releases that hold ``_dsa_dcp_overrides`` (0.5.22 / 0.5.23
#: ``model_overrides/deepseek_v2.py`` l.37-49; 0.5.23 adds GLM-5-Next, HYV4, LongCat, Dots3)
DSA_DCP_ARCHS = frozenset({"DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration",
                           "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM"})
#: hybrid-SWA architectures every release from 0.5.20 lists (``is_hybrid_swa_model``: Llama 4 and ``SWA_SINK_ARCHS``'
#: GPT-OSS, 0.5.20 ``configs/model_config.py`` l.2345-2349)
HYBRID_SWA_ARCHS = frozenset({"GptOssForCausalLM", "Llama4ForConditionalGeneration"})
#: 0.5.23's ``is_hybrid_swa_model`` list (l.2655-2679, with ``SWA_SINK_ARCHS`` and ``MIMO_V2_MODEL_ARCHS``): a model
#: outside it and without a sliding window is not hybrid in any release
_HYBRID_SWA_LISTED = frozenset({
    "BeamForCausalLM", "Llama4ForConditionalGeneration", "DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN",
    "DeepseekV4ForCausalLMDSpark", "GptOssForCausalLM", "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM",
    "IQuestQ1ForCausalLM", "IQuestQ1MTP", "MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM", "MiMoV2MTP",
    "Step3p5ForCausalLM", "Step3p5MTP", "Step3p7ForConditionalGeneration", "Gemma4ForCausalLM",
    "Gemma4ForConditionalGeneration", "EmbeddingGemma2Model", "Gemma4UnifiedForConditionalGeneration",
    "DiffusionGemmaForBlockDiffusion", "LagunaForCausalLM", "MellumForCausalLM", "MuseGlimmerForCausalLM",
    "MuseGlimmerForConditionalGeneration", "InklingForConditionalGeneration", "InklingForConditionalGenerationMTP",
    "UnlimitedOCRForCausalLM"})
#: ``--swa-full-tokens-ratio``'s default (0.5.10 ``server_args.py`` l.360; 0.5.23 ``fields/schedule.py`` fallback)
SWA_RATIO_DEFAULT = 0.8
#: the architectures whose model branch resets the ratio to 1.0 under hierarchical cache (the others that touch it,
#: DeepSeek V4 and Inkling, fill an unset one with 0.1: a ratio the check takes, as it takes the default)
_SWA_RATIO_RESET = frozenset({"MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM", "Step3p5ForCausalLM"})
#: ``_NVFP4_PREFILL_BACKEND`` and its inverse (0.5.21 - 0.5.23 ``kv_cache_hook.py`` l.24-30)
NVFP4_PREFILL_BACKEND: Mapping[str, str] = {"fp8_e4m3": "flashinfer", "nvfp4": "trtllm_mha"}
NVFP4_PREFILL_DEQUANT_DTYPE: Mapping[str, str] = {b: d for d, b in NVFP4_PREFILL_BACKEND.items()}
#: dense / MoE GQA architectures whose model-specific step picks no attention backend before the NVFP4 hook
PLAIN_ARCHS = frozenset({"Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen2ForCausalLM", "Qwen2MoeForCausalLM",
                         "LlamaForCausalLM", "MistralForCausalLM"})
_FP4_KV = ("nvfp4", "fp4_mx_block16")
_INSTANCE_SCHEME = "instance://"




def _value(args: ResolvedArgs, dest: str, default: object) -> object:
    value = args.get(dest)
    return default if value is None else value


def env_bool(env: Mapping[str, str], name: str) -> bool:
    """An ``EnvBool`` as SGLang reads it: set to a true spelling (an invalid one raises there, before any check)."""
    return env.get(name, "").strip().lower() in _ENV_TRUE


def _arch(model: ModelSpec) -> str:
    return model.architectures[0] if model.architectures else ""


def is_hybrid_swa(args: ResolvedArgs, model: ModelSpec) -> bool | None:
    """``ModelConfig.is_hybrid_swa`` from 0.5.20 (see the module); None where it is not decided here."""
    if args.flag("disable_hybrid_swa_memory"):
        return False
    arch = _arch(model)
    if arch in HYBRID_SWA_ARCHS:
        return True
    sliding = model.sliding_window is not None or any("sliding" in t for t in model.layer_types)
    if arch not in _HYBRID_SWA_LISTED and not sliding and '"is_hybrid_swa"' not in model.config_json:
        return False
    return None


def _dequant(args: ResolvedArgs, model: ModelSpec, layout: Layout) -> dict[str, object]:
    """``handle_nvfp4_prefill_kv_dequant_dtype``'s locals (see the module): ``requested_dtype`` as the line gives it
    and, with NVFP4, ``explicit_backend``; outside NVFP4 the function returns before that local exists (None)."""
    kv = _value(args, "kv_cache_dtype", "auto")
    ns: dict[str, object] = {
        "requested_dtype": _value(args, "prefill_kv_cache_dequant_dtype", "auto"),
        "_NVFP4_PREFILL_DEQUANT_DTYPE": NVFP4_PREFILL_DEQUANT_DTYPE,
    }
    if kv != "nvfp4":
        ns["explicit_backend"] = None
        return ns
    explicit = args.get("prefill_attention_backend") or args.get("attention_backend")
    deterministic = args.flag("enable_deterministic_inference")
    if explicit is not None or (_arch(model) in PLAIN_ARCHS and not deterministic):
        ns["explicit_backend"] = explicit
    return ns


def _dequant_resolved(args: ResolvedArgs, layout: Layout) -> dict[str, object] | None:
    """The later checks' locals once an auto dtype is picked: ``requested_dtype``, ``target_prefill_backend`` and
    the explicit backends; None where the pick reads what is not resolved (the GPU, a backend a model sets)."""
    requested = _value(args, "prefill_kv_cache_dequant_dtype", "auto")
    explicit = args.get("prefill_attention_backend") or args.get("attention_backend")
    if requested == "auto":
        if explicit in NVFP4_PREFILL_DEQUANT_DTYPE:
            requested = NVFP4_PREFILL_DEQUANT_DTYPE[str(explicit)]
        elif explicit is not None:
            return None  # the flag check refuses first
        elif layout.compute_capability is None:
            return None
        else:
            requested = "nvfp4" if layout.compute_capability[0] == 10 else "fp8_e4m3"
    if requested not in NVFP4_PREFILL_BACKEND:
        return None
    return {"requested_dtype": requested, "target_prefill_backend": NVFP4_PREFILL_BACKEND[str(requested)],
            "explicit_prefill_backend": args.get("prefill_attention_backend"),
            "explicit_decode_backend": args.get("decode_attention_backend")}




def _dsa_kv(args: ResolvedArgs, model: ModelSpec) -> dict[str, object]:
    """The DSA default pass's ``kv_cache_dtype`` local after its rewrites and ``has_attention_sinks`` (see the
    module); ``auto`` becomes one of the two allowed dtypes whichever the GPU picks."""
    kv = str(_value(args, "kv_cache_dtype", "auto"))
    sinks = learnable_sink(model)
    return {"kv_cache_dtype": "bfloat16" if kv in ("auto", "bf16") else kv, "has_attention_sinks": sinks}


def _swa(args: ResolvedArgs, model: ModelSpec) -> dict[str, object]:
    """The ratio the range check reads (left out where a model branch may rewrite it) and the prefix tails."""
    ns: dict[str, object] = {"swa_prefix_tails": args.get("swa_prefix_tails")}
    reset = _arch(model) in _SWA_RATIO_RESET and args.flag("enable_hierarchical_cache")
    if not (reset and args.is_set("swa_full_tokens_ratio")):
        ratio = _value(args, "swa_full_tokens_ratio", SWA_RATIO_DEFAULT)
        ns["swa_full_tokens_ratio"] = ratio
        ns["resolution_result(server_args, 'swa_full_tokens_ratio')"] = ratio
    ns["prefix_tails"] = args.get("swa_prefix_tails")
    return ns


def _eviction(args: ResolvedArgs) -> dict[str, object]:
    """The policy, ``--enable-session-radix-cache`` and tlru's ``threshold`` / ``next_prompt_estimate`` locals."""
    config = args.get("radix_eviction_policy_config")
    config = config if isinstance(config, dict) else {}
    return {"radix_eviction_policy": _value(args, "radix_eviction_policy", "lru"),
            "enable_session_radix_cache": args.flag("enable_session_radix_cache"),
            "threshold": config.get("threshold", 0), "next_prompt_estimate": config.get("next_prompt_estimate", 0)}


def values(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version,
           env: Mapping[str, str]) -> dict[str, object]:
    """What this module's refusals read (see the module); a value not resolved here is left out."""
    ns: dict[str, object] = {
        "disaggregation_mode": _value(args, "disaggregation_mode", "null"),
        "disaggregation_transfer_backend": rules_pd.transfer_backend(args),
        "disaggregation_decode_retraction_backup": rules_pd.retraction_backup(args, listed),
        "disaggregation_decode_enable_offload_kvcache": args.flag("disaggregation_decode_enable_offload_kvcache"),
        "enable_dsa_cache_layer_split": args.flag("enable_dsa_cache_layer_split"),
        "enable_hisparse": args.flag("enable_hisparse"),
        "enable_hierarchical_cache": args.flag("enable_hierarchical_cache"),
        "kv_cache_dtype": _value(args, "kv_cache_dtype", "auto"),
        "use_mla_backend": model.is_mla,
        "envs.SGLANG_DISABLE_LAZY_COMPACTION.get()": env_bool(env, "SGLANG_DISABLE_LAZY_COMPACTION"),
        "envs.SGLANG_ENABLE_SPEC_V2.get()": env_bool(env, "SGLANG_ENABLE_SPEC_V2"),
        "envs.SGLANG_DISAGG_STAGING_BUFFER.get()": env_bool(env, "SGLANG_DISAGG_STAGING_BUFFER"),
    }
    hybrid = is_hybrid_swa(args, model)
    if hybrid is not None:
        ns["is_hybrid_swa"] = hybrid
    ns.update(_swa(args, model))
    ns.update(_eviction(args))
    ns.update(_dequant(args, model, layout))
    cc = layout.compute_capability
    if cc is not None:
        ns["is_sm100"] = cc[0] == 10
    prefill = args.get("prefill_attention_backend") or args.get("attention_backend")
    decode = args.get("decode_attention_backend") or args.get("attention_backend")
    if prefill is not None and decode is not None and args.get("kv_cache_dtype") not in _FP4_KV:
        ns["prefill_backend"], ns["decode_backend"] = prefill, decode
    return ns


def in_force(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version,
             dsa: Mapping[str, object]) -> list[str]:
    """This module's rules less those whose function returns before its checks for this line (see the module)."""
    mode = _value(args, "disaggregation_mode", "null")
    dcp = _value(args, "dcp_size", 1)
    drop: set[str] = set()
    path = args.get("model_path")
    if "is_deepseek_dsa" not in dsa or (isinstance(path, str) and path.lower().startswith(_INSTANCE_SCHEME)):
        drop.update(_DSA_RULES)
    if mode == "decode":
        drop.add(NON_PD_RULE)   # the decode raise comes first (0.5.23 model_hook.py l.369-375)
    if not (isinstance(dcp, int) and dcp > 1 and _arch(model) in DSA_DCP_ARCHS and is_deepseek_dsa(model, listed)):
        drop.add(DSA_DCP_RULE)
    if dsa.get("is_deepseek_dsa") is not True or _arch(model) not in DSA_DCP_ARCHS:
        drop.add(DSA_KV_RULE)
    if not args.flag("enable_unified_memory"):
        drop.update((LAZY_RULE, SWA_TRANSFER_RULE, UNIFIED_DCP_RULE))
    if not (isinstance(dcp, int) and dcp > 1):
        drop.add(UNIFIED_DCP_RULE)
    kv = _value(args, "kv_cache_dtype", "auto")
    if kv != "nvfp4" or _dequant_resolved(args, layout) is None:
        drop.add(NVFP4_PREFILL_RULE)
    if not args.flag("enable_mis"):
        drop.add(MIS_RULE)
    if not args.flag("enable_kv_cache_sharding"):
        drop.add(STAGING_RULE)
    return [r for r in RULES if r not in drop]


def judge(ask: Ask) -> Judged:
    """This module's rules in force for the line, over the shared namespace, ``rules_model3``'s DSA frame and
    ``values``; the NVFP4 checks after the dtype is picked in a frame of their own."""
    args = ask.args
    dsa = rules_model3.frame(args, ask.model, ask.layout, ask.listed).values
    merged = {**ask.values, **dsa, **values(args, ask.model, ask.layout, ask.listed, ask.env)}
    rules = in_force(args, ask.model, ask.layout, ask.listed, dsa)
    wanted = ask.among(r for r in rules if r not in _OWN_FRAMES)
    parts = [ask.book.judge(ask.version, merged, rules=wanted)] if wanted else []
    later = ask.among([NVFP4_PREFILL_RULE] if NVFP4_PREFILL_RULE in rules else [])
    resolved = _dequant_resolved(args, ask.layout)
    if later and resolved is not None:
        parts.append(ask.book.judge(ask.version, {**merged, **resolved}, rules=later))
    dsa_kv = ask.among([DSA_KV_RULE] if DSA_KV_RULE in rules else [])
    if dsa_kv:
        parts.append(ask.book.judge(ask.version, {**merged, **_dsa_kv(args, ask.model)}, rules=dsa_kv))
    refusals = tuple(r for j in parts for r in j.refusals)
    return Judged(refusals, tuple(dict.fromkeys(n for j in parts for n in j.not_judged)))
