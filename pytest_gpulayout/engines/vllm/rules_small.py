"""vLLM's small configs, by release: LoRA (``LoRAConfig``), structured outputs (``DecodingConfig`` before 0.11,
``StructuredOutputsConfig`` from 0.11), the KV and encoder-cache connectors (``KVTransferConfig``,
``ECTransferConfig``), tracing (``ObservabilityConfig``, ``EngineArgs.create_engine_config``) and the profiler
(``ProfilerConfig``, 0.13+), the attention config's options (``AttentionConfig``) and Engram (``EngramConfig``, 0.30+).

Their entries read names other rules read with another meaning (``self.backend`` is the Mamba backend in
``MambaConfig``, the structured-outputs backend here), so each config is judged in a frame of its own
(``frames``): the shared namespace plus that config's fields as the release holds them. ``values`` adds to the
shared namespace only what means the same everywhere (the model's ``is_multimodal_model``, ``--default-mm-loras``).

Where the release builds the config from a JSON flag (``--kv-transfer-config`` from 0.9, ``--structured-outputs-
config`` from 0.11), vLLM builds it while it parses the line (``parse_dataclass``: ``TypeAdapter(cls).
validate_json``, engine/arg_utils.py:198-202 in 0.11.0; ``KVTransferConfig.from_cli`` before 0.9): the refusal
is this entry's raise, printed by argparse as the flag's invalid value (``vllm serve: error: argument
--kv-transfer-config: ... Value error, <the words>``).

A value the deployment does not say (the V0 or V1 engine the release's oracle picks, the model class's
interfaces where no extracted release knows the architecture) is left out: its entry is named, never guessed.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask, combine
from pytest_gpulayout.engines.vllm import defaults
from pytest_gpulayout.engines.vllm.interfaces import model_class
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

# -- the rules of this module ----------------------------------------------------------------------------------

LORA_VALUE_RANGES = "vllm.lora.value_ranges"
LORA_CPU_OFFLOAD = "vllm.lora.cpu_offload"
LORA_LONG_LORA_V1 = "vllm.lora.long_lora_v1"
LORA_MODEL_SUPPORT = "vllm.lora.model_support"
LORA_MEGA_MOE = "vllm.lora.mega_moe_backend"
LORA_DEFAULT_MM = "vllm.lora.default_mm_loras_text_model"
LORA_INKLING = "vllm.lora.inkling_multimem_ar"
LORA_ADAPTIVE_VERIFICATION = "vllm.lora.adaptive_verification"
GUIDED_BACKEND = "vllm.structured_outputs.guided_backend"
STRUCTURED_OPTIONS = "vllm.structured_outputs.backend_options"
REASONING_PARSER = "vllm.structured_outputs.reasoning_parser"
KV_CONNECTOR_ROLE = "vllm.kv_transfer.connector_role"
EC_CONNECTOR_ROLE = "vllm.ec_transfer.connector_role"
TRACE_MODULES = "vllm.observability.detailed_trace_modules"
TRACES_NEED_ENDPOINT = "vllm.observability.detailed_traces_need_endpoint"
PROFILER_OPTIONS = "vllm.profiler.options"
ATTENTION_OPTIONS = "vllm.attention.options"
ENGRAM_OPTIONS = "vllm.engram.options"
ENGRAM_MODEL = "vllm.engram.model_support"
ATTENTION_BACKEND_TWICE = "vllm.attention.backend_twice"
AUTOTUNE_TWICE = "vllm.kernel.flashinfer_autotune_twice"
IR_OP_PRIORITY_TWICE = "vllm.kernel.ir_op_priority_twice"
KV_OFFLOADING_SIZE = "vllm.kv_transfer.offloading_size"
EC_MANAGER_CLS = "vllm.ec_transfer.manager_needs_cls"
WATERMARK_KEY = "vllm.watermark.key_bits"
HISTOGRAM_BOOL = "vllm.observability.histogram_bool_bounds"
HISTOGRAM_BUCKETS = "vllm.observability.histogram_buckets"
PROMPT_ADAPTER_LIMITS = "vllm.lora.prompt_adapter_limits"
TOKENIZER_POOL_OPTIONS = "vllm.tokenizer_pool.options"
IR_OP_PRIORITY_STRINGS = "vllm.kernel.ir_op_priority_strings"
KV_EXPANDABLE_SEGMENTS = "vllm.kv_transfer.expandable_segments"
QLORA_BITSANDBYTES = "vllm.lora.qlora_bitsandbytes"
HIDDEN_STATES_CHUNKED = "vllm.kv_transfer.hidden_states_chunked_prefill"
PREFETCH_OFFLOAD = "vllm.offload.prefetch_options"

#: the rules ``LoRAConfig`` decides: the engine builds it only under ``--enable-lora`` (``lora_config =
#: LoRAConfig(...) if self.enable_lora else None``, engine/arg_utils.py:1332-1340 in 0.8.0, 2691-2710 in 0.33.0)
#: and verifies it against the other configs in ``VllmConfig.__post_init__`` (config.py:3451-3454 in 0.8.0,
#: config/vllm.py:1591-1593 in 0.33.0)
LORA_RULES = frozenset({LORA_VALUE_RANGES, LORA_CPU_OFFLOAD, LORA_LONG_LORA_V1, LORA_MODEL_SUPPORT, LORA_MEGA_MOE,
                        LORA_INKLING})
#: ``VllmConfig._validate_adaptive_verification`` returns first unless the speculative config enables adaptive
#: verification (config/vllm.py, 0.29+): its LoRA raise (``self.lora_config is not None``) is in force only there
ADAPTIVE_RULES = frozenset({LORA_ADAPTIVE_VERIFICATION})
STRUCTURED_RULES = frozenset({GUIDED_BACKEND, STRUCTURED_OPTIONS, REASONING_PARSER})
KV_RULES = frozenset({KV_CONNECTOR_ROLE, HIDDEN_STATES_CHUNKED})
EC_RULES = frozenset({EC_CONNECTOR_ROLE})
#: ``VllmConfig._verify_kv_transfer_compat``'s raise sits under early returns only (no ``if`` of its own): in force
#: only where none of them returns (``kv_transfer_compat_frame``)
KV_COMPAT_RULES = frozenset({KV_EXPANDABLE_SEGMENTS})
TRACE_RULES = frozenset({TRACE_MODULES, TRACES_NEED_ENDPOINT})
PROFILER_RULES = frozenset({PROFILER_OPTIONS})
ATTENTION_RULES = frozenset({ATTENTION_OPTIONS})
ENGRAM_RULES = frozenset({ENGRAM_OPTIONS, ENGRAM_MODEL})
#: ``create_engine_config``'s top-level flags against the same key of their config's JSON
TWICE_RULES = frozenset({ATTENTION_BACKEND_TWICE, AUTOTUNE_TWICE, IR_OP_PRIORITY_TWICE, IR_OP_PRIORITY_STRINGS})
OFFLOAD_RULES = frozenset({KV_OFFLOADING_SIZE, EC_MANAGER_CLS, WATERMARK_KEY, PREFETCH_OFFLOAD})
#: ``ObservabilityConfig``'s two validators of ``--custom-histogram-buckets`` loop with the same words over
#: different values (the raw JSON, then pydantic's floats): two rules, each in its own frame
HISTOGRAM_BOOL_RULES = frozenset({HISTOGRAM_BOOL})
HISTOGRAM_RULES = frozenset({HISTOGRAM_BUCKETS})
PROMPT_ADAPTER_RULES = frozenset({PROMPT_ADAPTER_LIMITS})
TOKENIZER_POOL_RULES = frozenset({TOKENIZER_POOL_OPTIONS})
QLORA_RULES = frozenset({QLORA_BITSANDBYTES})
#: every rule judged in a frame of this module (``frames``); the others of ``RULES`` read the shared namespace
FRAMED = LORA_RULES | STRUCTURED_RULES | KV_RULES | EC_RULES | TRACE_RULES | PROFILER_RULES | ATTENTION_RULES \
    | ENGRAM_RULES | TWICE_RULES | OFFLOAD_RULES | HISTOGRAM_BOOL_RULES | HISTOGRAM_RULES | PROMPT_ADAPTER_RULES \
    | TOKENIZER_POOL_RULES | KV_COMPAT_RULES | QLORA_RULES | ADAPTIVE_RULES

#: rule id -> what it refuses: the rules of ``FRAMED``, each judged in its frame (``judge``)
RULES: Mapping[str, str] = {
    "vllm.lora.value_ranges": "with --enable-lora, a --max-lora-rank or --lora-extra-vocab-size outside the "
                              "release's choices, --max-loras below 1, or --max-cpu-loras below --max-loras",
    "vllm.lora.cpu_offload": "--enable-lora with --cpu-offload-gb > 0 (0.8.0-0.8.2; on the V0 engine to 0.11.0)",
    "vllm.lora.long_lora_v1": "--enable-lora with --long-lora-scaling-factors on the V1 engine (0.8.4-0.9.2)",
    "vllm.lora.model_support": "--enable-lora on a model class without SupportsLoRA (0.33)",
    "vllm.lora.mega_moe_backend": "--enable-lora with a MegaMoE --moe-backend (0.33)",
    "vllm.lora.inkling_multimem_ar": "--enable-lora on an Inkling model without INKLING_MULTIMEM_AR=0 (0.26+)",
    "vllm.lora.adaptive_verification": "--enable-lora with the speculative config's adaptive verification (0.29+)",
    "vllm.lora.prompt_adapter_limits": "--enable-prompt-adapter without --max-prompt-adapter-token, or with "
                                       "--max-prompt-adapters below 1 (0.8.0-0.9.2)",
    "vllm.lora.qlora_bitsandbytes": "a QLoRA adapter without BitsAndBytes quantization; before 0.8.2 also "
                                    "BitsAndBytes quantization and load format one without the other",
    "vllm.tokenizer_pool.options": "a tokenizer pool (--tokenizer-pool-size > 0) of a type other than ray, or "
                                   "whose extra config is not a JSON object (0.8.0-0.8.4)",
    "vllm.structured_outputs.guided_backend": "a --guided-decoding-backend the engine's DecodingConfig does not "
                                              "list (0.8.x)",
    "vllm.structured_outputs.backend_options": "disable_any_whitespace with a backend other than xgrammar / "
                                               "guidance, or disable_additional_properties without guidance",
    "vllm.structured_outputs.reasoning_parser": "a --structured-outputs-config reasoning_parser the release does "
                                                "not register (0.11.1-0.12.0)",
    "vllm.kv_transfer.connector_role": "--kv-transfer-config with a kv_connector and no kv_role, or (before 0.9) "
                                       "a kv_role outside kv_producer / kv_consumer / kv_both",
    "vllm.kv_transfer.hidden_states_chunked_prefill": "the ExampleHiddenStatesConnector with chunked prefill on "
                                                      "(0.22-0.23)",
    "vllm.kv_transfer.expandable_segments": "a KV connector with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                                            "and no cuMem allocator (sleep mode in 0.21) (0.21+)",
    "vllm.ec_transfer.connector_role": "--ec-transfer-config with an ec_connector and no ec_role (0.11.1+)",
    "vllm.observability.detailed_trace_modules": "a --collect-detailed-traces module outside model / worker / all "
                                                 "(0.8.x)",
    "vllm.observability.detailed_traces_need_endpoint": "--collect-detailed-traces without --otlp-traces-endpoint "
                                                        "(0.11.1+)",
    "vllm.profiler.options": "--profiler-config options of another profiler than the one chosen (torch / proton), "
                             "the chosen one without its directory, or Proton data and output formats that "
                             "conflict (ProfilerConfig, 0.13+)",
    "vllm.attention.options": "--attention-config with the removed use_cudnn_prefill (0.21), a backend_per_kind "
                              "kind KV caches lack (0.26+), or an indexer option against indexer_kv_dtype",
    "vllm.engram.options": "--engram-config's dp_shared_memory / use_thp without cpu_offload, dp_shared_memory "
                           "at DP 1, with elastic EP or a load format other than auto / safetensors / pt (0.30+)",
    "vllm.engram.model_support": "--engram-config on a model without n-gram embedding layers (0.30+)",
    "vllm.attention.backend_twice": "--attention-backend with --attention-config's backend (0.13+)",
    "vllm.kernel.flashinfer_autotune_twice": "--enable-flashinfer-autotune with --kernel-config's "
                                             "enable_flashinfer_autotune (0.16+)",
    "vllm.kernel.ir_op_priority_twice": "an op's --ir-op-priority with the same op of --kernel-config's "
                                        "ir_op_priority (0.20+)",
    "vllm.kernel.ir_op_priority_strings": "an op priority of --ir-op-priority / --kernel-config listing a "
                                          "non-string (0.20+)",
    "vllm.kv_transfer.offloading_size": "--kv-offloading-backend without --kv-offloading-size (0.11.1-0.13.0)",
    "vllm.ec_transfer.manager_needs_cls": "--ec-manager-config's manager_config without encoder_cache_manager_cls "
                                          "(0.28+)",
    "vllm.offload.prefetch_options": "prefetch weight offload with --offload-num-in-group above "
                                     "--offload-group-size, or --offload-prefetch-step 0 (0.17+)",
    "vllm.watermark.key_bits": "a --watermark-config key above 64 bits (0.30+)",
    "vllm.observability.histogram_bool_bounds": "a boolean bound in --custom-histogram-buckets (0.32+)",
    "vllm.observability.histogram_buckets": "--custom-histogram-buckets with an unknown family, an empty list, a "
                                            "bound not finite and positive, or bounds not increasing (0.32+)",
}


# -- the V0 / V1 engine of 0.8-0.11 -------------------------------------------------------------------------------

#: ``envs.VLLM_USE_V1`` (``bool(int(os.getenv("VLLM_USE_V1", "1")))``, envs.py:506-507 in 0.8.2) is what
#: ``EngineArgs.create_engine_config`` leaves after its oracle: unset, ``_is_v1_supported_oracle`` turns V1 off
#: for any of its fallback features (engine/arg_utils.py:1292-1460 in 0.8.5) and below SM 8.0; set, it is kept
#: (and the oracle refuses the features V1 lacks in its own words). The engine is known where the environment
#: sets it, or where the release falls back to V0 below SM 8.0 (``defaults.runs_v0``)
def use_v1(version: Version, env: Mapping[str, str], layout: Layout) -> bool | None:
    """The release's ``envs.VLLM_USE_V1`` at config time where the deployment says it; None where the oracle
    decides from the rest of the line (its fallback features are not modelled)."""
    given = env.get("VLLM_USE_V1")
    if given is not None and given.strip().lstrip("-").isdigit():
        return bool(int(given))
    cc = layout.compute_capability
    if defaults.runs_v0(version, compute_capability=cc[0] + cc[1] / 10 if cc else None):
        return False
    return None


# -- LoRA ------------------------------------------------------------------------------------------------------------

#: ``LoRAConfig.__post_init__``'s locals (config.py:2326-2327 in 0.8.0 ... config/lora.py:104-105 in 0.11.0); from
#: 0.11.1 ``max_lora_rank`` is ``MaxLoRARanks`` (a ``Literal``: the parser's choices) and the extra vocabulary is gone
POSSIBLE_MAX_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
POSSIBLE_EXTRA_VOCAB_SIZES = (256, 512)
#: config/kernel.py:149-170 in 0.33.0: ``MEGA_MOE_BACKENDS = NATIVE_MEGA_MOE_BACKENDS | FLASHINFER_MOE_EP_BACKENDS``
MEGA_MOE_BACKENDS = frozenset({"deep_gemm_mega_moe", "flashinfer_moe_ep_cutedsl", "flashinfer_moe_ep_mega_deep_gemm"})


def _class_flags(model: ModelSpec, version: Version) -> dict[str, object]:
    """The interfaces of the model's class (``supports_lora``, ``supports_multimodal``) and its name: the first of
    the model's architectures the extracted release at or below ``version`` knows; {} when none does."""
    cls = model_class(model, version)
    return {} if cls is None else {**cls.flags, "architecture": cls.architecture}


def _native_class(args: ResolvedArgs, model: ModelSpec, version: Version) -> dict[str, object]:
    """The class flags where the release serves the model with its own class: ``--model-impl transformers``
    serves it with the Transformers backend's class, whose interfaces are not these."""
    if args.get("model_impl", "auto") == "transformers":
        return {}
    return _class_flags(model, version)


def lora_frame(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version,
               env: Mapping[str, str]) -> dict[str, object]:
    """``LoRAConfig``'s fields as ``create_engine_config`` passes them, and what its ``verify_with_*`` read.

    - ``max_cpu_loras``: ``self.max_cpu_loras if self.max_cpu_loras and self.max_cpu_loras > 0 else None``
      (engine/arg_utils.py:1339-1340 in 0.8.0, 2703-2705 in 0.33.0), so 0 or less is "as many as max_loras";
    - ``cache_config.cpu_offload_gb``: ``--cpu-offload-gb`` (``verify_with_cache_config``, 0.8.0-0.11.0);
    - ``envs.VLLM_USE_V1``: see ``use_v1`` (left out where the oracle decides);
    - ``model_config.is_lora_supported`` (0.33.0): the class's ``SupportsLoRA`` (``_model_info.supports_lora``,
      config/model.py:2033-2034), left out where no extracted release knows the class; ``runner_type`` is never
      ``draft`` for the served model (a speculative drafter's config is its own);
    - ``kernel_config.moe_backend`` (0.33.0): ``--moe-backend`` where not ``auto`` (engine/arg_utils.py:2800-2801),
      else ``--kernel-config``'s key;
    - ``is_inkling`` (0.26+): ``any("Inkling" in arch for arch in architectures)`` with the environment's
      ``INKLING_MULTIMEM_AR`` (config/lora.py:162-170 in 0.33.0);
    - ``create_engine_config``'s LoRA with speculative decoding (0.11.1+, engine/arg_utils.py:2712-2724 in 0.33.0):
      ``--speculative-config``'s ``num_speculative_tokens`` where it gives one (else the draft's config decides it:
      left out), against the scheduler's batch as the shared namespace resolves it."""
    given_cpu = args.get("max_cpu_loras")
    max_cpu = given_cpu if isinstance(given_cpu, int) and not isinstance(given_cpu, bool) and given_cpu > 0 else None
    kernel = args.get("kernel_config")
    moe_backend = args.get("moe_backend") or "auto"
    if moe_backend == "auto" and isinstance(kernel, Mapping):
        moe_backend = kernel.get("moe_backend") or "auto"
    long_lora = args.get("long_lora_scaling_factors")
    out: dict[str, object] = {
        "self.max_lora_rank": args.get("max_lora_rank", 16), "possible_max_ranks": POSSIBLE_MAX_RANKS,
        "self.lora_extra_vocab_size": args.get("lora_extra_vocab_size", 256),
        "possible_lora_extra_vocab_size": POSSIBLE_EXTRA_VOCAB_SIZES,
        "self.max_loras": args.get("max_loras", 1), "self.max_cpu_loras": max_cpu,
        "cache_config.cpu_offload_gb": args.get("cpu_offload_gb", 0) or 0,
        "self.long_lora_scaling_factors": tuple(long_lora) if isinstance(long_lora, Sequence) else long_lora,
        "moe_backend": str(moe_backend).lower().replace("-", "_"), "MEGA_MOE_BACKENDS": MEGA_MOE_BACKENDS,
        "model_config.runner_type": "generate",
        "model_config.model": args.get("model_tag") or args.get("model") or model.name,
        "is_inkling": any("Inkling" in arch for arch in model.architectures),
        "lora_config": True, "speculative_config": None,
        "os.environ.get('INKLING_MULTIMEM_AR', '1')": env.get("INKLING_MULTIMEM_AR", "1"),
    }
    spec = args.get("speculative_config")
    if isinstance(spec, Mapping) and spec:
        out["speculative_config"] = dict(spec)
        tokens = spec.get("num_speculative_tokens")
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            out["speculative_config.num_speculative_tokens"] = tokens
    v1 = use_v1(version, env, layout)
    if v1 is not None:
        out["envs.VLLM_USE_V1"] = v1
    flags = _native_class(args, model, version)
    if flags:
        out["model_config.is_lora_supported"] = bool(flags.get("supports_lora"))
        out["model_config.architecture"] = flags["architecture"]
    return out


def prompt_adapter_frame(args: ResolvedArgs, env: Mapping[str, str]) -> dict[str, object]:
    """``PromptAdapterConfig`` (0.8.0-0.9.2: ``PromptAdapterConfig(max_prompt_adapters=...,
    max_prompt_adapter_token=...) if self.enable_prompt_adapter else None``, engine/arg_utils.py:1352-1355 in 0.8.0).
    With ``VLLM_USE_V1=1`` the V1 oracle refuses ``--enable-prompt-adapter`` first, in its own words
    (``_raise_or_fallback``, engine/arg_utils.py:1443-1446 in 0.8.4): the values are left out, so the entries are
    said not judged."""
    if env.get("VLLM_USE_V1") == "1":
        return {}
    return {"self.max_prompt_adapters": args.get("max_prompt_adapters", 1),
            "self.max_prompt_adapter_token": args.get("max_prompt_adapter_token", 0)}


#: ``create_engine_config`` sets ``self.quantization = self.load_format = "bitsandbytes"`` for a pre-quantized
#: BitsAndBytes model before ``create_load_config`` from 0.8.4 (engine/arg_utils.py:1234-1236 in 0.8.5)
BNB_PREQUANTIZED_SINCE = Version("0.8.4")


def qlora_frame(args: ResolvedArgs, model: ModelSpec, version: Version) -> dict[str, object]:
    """``EngineArgs.create_load_config``'s ``quantization`` / ``load_format`` / ``qlora_adapter_name_or_path``
    (engine/arg_utils.py:1160-1175 in 0.8.0, 1181-1190 in 0.8.2, 1028-1032 in 0.8.5) as the release holds them
    there: the flags, a GGUF file's ``gguf`` for both (``create_model_config``, :1110-1112 in 0.8.0), and from 0.8.4
    a pre-quantized BitsAndBytes checkpoint's ``bitsandbytes`` for both."""
    quantization = args.get("quantization")
    load_format = args.get("load_format") or "auto"
    if str(args.get("model_tag") or args.get("model") or model.source).lower().endswith(".gguf"):
        quantization = load_format = "gguf"
    method = model.quantization.method if model.quantization is not None else None
    if version >= BNB_PREQUANTIZED_SINCE and "bitsandbytes" in (method, quantization):
        quantization = load_format = "bitsandbytes"
    return {"self.quantization": quantization, "self.load_format": load_format,
            "self.qlora_adapter_name_or_path": args.get("qlora_adapter_name_or_path")}


def tokenizer_pool_frame(args: ResolvedArgs) -> dict[str, object] | None:
    """``TokenizerPoolConfig.create_config`` (0.8.0-0.8.4, config.py:1240-1270 in 0.8.0): a pool only where
    ``--tokenizer-pool-size`` is above 0, its extra config read as JSON (not a JSON text: ``json.loads`` raises
    first, not this entry)."""
    size = args.get("tokenizer_pool_size")
    if not isinstance(size, int) or not size:
        return None
    extra = args.get("tokenizer_pool_extra_config")
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except ValueError:
            return None
    pool_type = args.get("tokenizer_pool_type") or "ray"
    return {"self.pool_type": pool_type, "isinstance(self.pool_type, type)": False,
            "isinstance(self.extra_config, dict)": isinstance(extra or {}, dict)}


# -- structured outputs ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GuidedBackends:
    """``DecodingConfig.__post_init__``'s valid backends in one release (config.py:2788 in 0.8.0, 2803-2806 in
    0.8.2, 3030-3033 in 0.8.4, 3136-3138 in 0.8.5, 3307-3309 in 0.9.0, 3623-3626 in 0.10.0) and the raw values the
    V1 oracle keeps V1 for (``SUPPORTED_GUIDED_DECODING``, engine/arg_utils.py:1465 in 0.8.0, 1540-1542 in 0.8.2,
    1383-1386 in 0.8.3; 0.8.5 ``split(':')[0] in get_args(GuidedDecodingBackendV1)``, :1337-1344)."""

    since: Version
    v0: tuple[str, ...]
    v1: tuple[str, ...] | None      # None: one list whatever the engine (0.8.0-0.8.1)
    as_list: bool                   # printed as a list (``[...]``) rather than ``get_args``'s tuple
    oracle: tuple[str, ...] | None  # raw values the oracle keeps V1 for; None: by backend name in ``v1``


_LMFE = "lm-format-enforcer"
GUIDED_BACKENDS = (
    GuidedBackends(Version("0.8.0"), ("outlines", _LMFE, "xgrammar"), None, True, ("xgrammar", "xgrammar:nofallback")),
    GuidedBackends(Version("0.8.2"), ("outlines", _LMFE, "xgrammar"), ("xgrammar", "guidance", "auto"), True,
                   ("xgrammar", "xgrammar:disable-any-whitespace", "guidance", "auto")),
    GuidedBackends(Version("0.8.3"), ("outlines", _LMFE, "xgrammar"), ("xgrammar", "guidance", "auto"), True,
                   ("xgrammar", "xgrammar:disable-any-whitespace", "guidance", "guidance:disable-any-whitespace",
                    "auto")),
    GuidedBackends(Version("0.8.4"), ("outlines", _LMFE, "xgrammar", "auto"), ("xgrammar", "guidance", "auto"), True,
                   ("xgrammar", "xgrammar:disable-any-whitespace", "guidance", "guidance:disable-any-whitespace",
                    "auto")),
    GuidedBackends(Version("0.8.5"), ("auto", "outlines", _LMFE, "xgrammar", "guidance"),
                   ("auto", "xgrammar", "guidance"), False, None),
)
#: from 0.9 the check cannot refuse (its entry is unreachable): the parser's choices are V0's list, and the oracle
#: keeps V1 only for V1's backends (``self.guided_decoding_backend not in get_args(GuidedDecodingBackendV1)``:
#: fallback to V0, or with ``VLLM_USE_V1=1`` its own NotImplementedError; engine/arg_utils.py:1236-1242 in 0.9.0,
#: 1335-1341 in 0.10.0); 0.10.1 drops the check
GUIDED_CHECK_UNTIL = Version("0.9.0")
#: ``StructuredOutputsConfig`` from 0.11.0, built from ``--structured-outputs-config`` alone: the deprecated
#: ``--guided-decoding-*`` flags are assigned to the built config afterwards, unvalidated (engine/arg_utils.py:
#: 1411-1422 in 0.11.0, 1722-1728 in 0.11.1)
STRUCTURED_OUTPUTS_SINCE = Version("0.11.0")


def _guided_table(version: Version) -> GuidedBackends | None:
    if version >= GUIDED_CHECK_UNTIL:
        return None
    below = [t for t in GUIDED_BACKENDS if t.since <= version]
    return below[-1] if below else None


def _valid_guided(table: GuidedBackends, raw: str, name: str, v1: bool | None) -> tuple[str, ...] | None:
    """The list ``DecodingConfig`` checks ``name`` against, where the engine it runs in is known (see ``use_v1``);
    None where it is not, or where the oracle refuses first (``VLLM_USE_V1=1`` with a backend it lacks)."""
    kept = name in (table.v1 or ()) if table.oracle is None else raw in table.oracle   # 0.8.5: by the name
    if v1 is True and not kept:
        return None                 # the oracle raises NotImplementedError (its words, not this entry's)
    if table.v1 is None:
        return table.v0
    if v1 is None and not kept:
        v1 = False                  # unset: the oracle falls back to V0 for this backend
    if v1 is None:
        # V1 unless another feature of the line falls back: the same answer either way where both lists hold it
        return table.v1 if name in table.v1 and name in table.v0 else None
    return table.v1 if v1 else table.v0


#: ``ReasoningParserManager.list_registered()`` (``sorted`` eager and lazy names, reasoning/abs_reasoning_parsers.py:
#: 166-168 in 0.11.1): the lazy ones ``vllm/reasoning/__init__.py`` registers (``_REASONING_PARSERS_TO_REGISTER``, the
#: same 15 in 0.11.1, 0.11.2 and 0.12.0; no parser registers itself eagerly), read where the config is validated
#: (0.11.1-0.12.0)
REASONING_PARSERS = ("deepseek_r1", "deepseek_v3", "ernie45", "glm45", "granite", "hunyuan_a13b", "kimi_k2",
                     "minimax_m2", "minimax_m2_append_think", "mistral", "olmo3", "openai_gptoss", "qwen3", "seed_oss",
                     "step3")


def structured_frame(args: ResolvedArgs, layout: Layout, version: Version, env: Mapping[str, str]) -> dict[str, object]:
    """The structured-outputs config's backend and options as the release builds them.

    - before 0.9: ``DecodingConfig(guided_decoding_backend=--guided-decoding-backend)``, options after a colon
      (``GuidedDecodingParams.backend_name``: the part before ``:``);
    - 0.9.0-0.10.2: ``DecodingConfig(backend=..., disable_any_whitespace=--guided-decoding-disable-any-whitespace,
      disable_additional_properties=...)`` (engine/arg_utils.py:1156-1162 in 0.9.0, 1396-1402 in 0.10.2); the
      parser's choices leave no colon;
    - from 0.11.0: ``--structured-outputs-config``'s keys (``backend`` ``auto``, the options off), and in
      0.11.1-0.12.0 its ``reasoning_parser`` against the registered parsers (``REASONING_PARSERS``; a
      ``reasoning_parser_plugin`` may register more, so the list is left out where one is given)."""
    if version >= STRUCTURED_OUTPUTS_SINCE:
        given = args.get("structured_outputs_config")
        so = given if isinstance(given, Mapping) else {}
        out: dict[str, object] = {
            "self.backend": so.get("backend", "auto"),
            "self.disable_any_whitespace": bool(so.get("disable_any_whitespace", False)),
            "self.disable_additional_properties": bool(so.get("disable_additional_properties", False)),
            "self.reasoning_parser": so.get("reasoning_parser", "")}
        plugin = so.get("reasoning_parser_plugin")
        if not (isinstance(plugin, str) and len(plugin) > 3):
            out["valid_reasoning_parsers"] = list(REASONING_PARSERS)
            out["','.join(valid_reasoning_parsers)"] = ",".join(REASONING_PARSERS)
        return out
    raw = str(args.get("guided_decoding_backend") or "xgrammar")
    name = raw.split(":")[0]
    options = set(raw.split(":", 1)[1].strip().split(",")) if ":" in raw else set()
    out = {
        "backend": name, "self.backend": name,
        "self.disable_any_whitespace": bool(args.get("guided_decoding_disable_any_whitespace"))
        or "disable-any-whitespace" in options,
        "self.disable_additional_properties": bool(args.get("guided_decoding_disable_additional_properties"))
        or "no-additional-properties" in options,
    }
    table = _guided_table(version)
    if table is not None:
        valid = _valid_guided(table, raw, name, use_v1(version, env, layout))
        if valid is not None:
            out["valid_guided_backends"] = list(valid) if table.as_list else valid
    return out


# -- the KV connector --------------------------------------------------------------------------------------------

#: ``get_args(KVRole)`` (``Literal[KVProducer, KVConsumer]``, flattened: config.py:3498-3500 in 0.9.0)
KV_ROLES = ("kv_producer", "kv_both", "kv_consumer")


#: ``get_args(ECRole)`` (config/ec_transfer.py:10-12 in 0.33.0)
EC_ROLES = ("ec_producer", "ec_both", "ec_consumer")




def ec_transfer_frame(args: ResolvedArgs) -> dict[str, object] | None:
    """``--ec-transfer-config``'s connector and role (0.11.1+, the encoder-cache connector); None without it."""
    given = args.json_object("ec_transfer_config")
    if given is None:
        return None
    return {"self.ec_connector": given.get("ec_connector"), "self.ec_role": given.get("ec_role"),
            "get_args(ECRole)": EC_ROLES}


def kv_transfer_frame(args: ResolvedArgs) -> dict[str, object] | None:
    """``--kv-transfer-config``'s connector and role (a JSON string before 0.9, ``KVTransferConfig.from_cli``);
    None without the flag, or where its text is not a JSON object (the parse refuses it first). With it,
    ``VllmConfig._post_init_kv_transfer_config`` reads the connector against the scheduler's chunked prefill
    (0.22-0.23, config/vllm.py:731-746 in 0.22.0: the shared namespace's ``enable_chunked_prefill``)."""
    given = args.json_object("kv_transfer_config")
    if given is None:
        return None
    return {"self.kv_connector": given.get("kv_connector"), "self.kv_role": given.get("kv_role"),
            "get_args(KVRole)": KV_ROLES, "self.kv_transfer_config": dict(given),
            "self.kv_transfer_config.kv_connector": given.get("kv_connector")}


def _opt_int(args: ResolvedArgs, dest: str, default: int) -> int | None:
    """An integer flag, its default where the line leaves it unset (None: not an integer)."""
    value = args.get(dest, default)
    if value is None:
        return default
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def offload_frame(args: ResolvedArgs) -> dict[str, object]:
    """Three one-line configs:

    - ``VllmConfig._post_init_kv_transfer_config`` (0.11.1-0.13.0, config/vllm.py:459-476 in 0.12.0) returns first
      without ``--kv-offloading-backend``, so its condition (``(kv_offloading_size := ...) is None``) holds only with
      the backend and without ``--kv-offloading-size``;
    - ``EncoderCacheManagerConfig.__post_init__`` (0.28+): ``--ec-manager-config``'s ``manager_config`` without
      ``encoder_cache_manager_cls``;
    - ``WatermarkConfig.validate_watermark_settings`` (0.30+, after pydantic's own field checks: ``key`` an integer
      >= 0, config/watermarking.py:30, 59-61 in 0.33.0): ``--watermark-config``'s key above 64 bits;
    - ``OffloadConfig.validate_offload_config`` (0.17+, config/offload.py:97-112 in 0.33.0): the prefetch weight
      offload's ``--offload-num-in-group`` above ``--offload-group-size``, or ``--offload-prefetch-step`` 0, where
      ``--offload-backend prefetch`` or a group size above 0 turns it on (values pydantic's ``ge`` bounds refuse
      first are left out: ``offload_group_size >= 0``, ``offload_num_in_group >= 1``, ``offload_prefetch_step
      >= 0``, :54-66)."""
    backend = args.get("kv_offloading_backend")
    ec = args.get("ec_manager_config")
    ecm: Mapping[str, object] = ec if isinstance(ec, Mapping) else {}
    out: dict[str, object] = {
        "(kv_offloading_size := self.cache_config.kv_offloading_size) is None":
            backend is not None and args.get("kv_offloading_size") is None,
        "self.encoder_cache_manager_cls": ecm.get("encoder_cache_manager_cls"),
        "self.manager_config": ecm.get("manager_config"),
    }
    group, in_group, step = (_opt_int(args, "offload_group_size", 0), _opt_int(args, "offload_num_in_group", 1),
                             _opt_int(args, "offload_prefetch_step", 1))
    if group is not None and in_group is not None and step is not None and group >= 0 and in_group >= 1 \
            and step >= 0:
        out.update({"self.offload_backend": args.get("offload_backend") or "auto",
                    "self.prefetch.offload_group_size": group, "self.prefetch.offload_num_in_group": in_group,
                    "self.prefetch.offload_prefetch_step": step})
    watermark = args.json_object("watermark_config")
    key = watermark.get("key") if watermark is not None else None
    if watermark is None:
        out["self.key"] = 0
    elif isinstance(key, int) and not isinstance(key, bool) and key >= 0:
        out["self.key"] = key
    return out


#: 0.21.0 exempts sleep mode (config/vllm.py:716-746); from 0.22 the cuMem allocator, which sleep mode turns on
#: (``ModelConfig``: config/model.py:537-544 in 0.22.0, 666-673 in 0.33.0)
CUMEM_EXEMPT_SINCE = Version("0.22.0")


def kv_transfer_compat_frame(args: ResolvedArgs, version: Version,
                             env: Mapping[str, str]) -> dict[str, object] | None:
    """``_verify_kv_transfer_compat`` past its early returns (config/vllm.py:1246-1296 in 0.33.0): a KV connector,
    ``expandable_segments:True`` in the engine's ``PYTORCH_CUDA_ALLOC_CONF`` (as the deployment sets it), and
    neither the cuMem allocator (``--enable-cumem-allocator`` or ``--enable-sleep-mode``) nor, in 0.21, sleep mode;
    None where one of them returns."""
    kv = args.json_object("kv_transfer_config")
    connector = kv.get("kv_connector") if kv is not None else None
    if connector is None or "expandable_segments:True" not in env.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        return None
    sleep = bool(args.get("enable_sleep_mode"))
    if sleep or (version >= CUMEM_EXEMPT_SINCE and bool(args.get("enable_cumem_allocator"))):
        return None
    return {"self.kv_transfer_config.kv_connector": connector}


# -- tracing ----------------------------------------------------------------------------------------------------

#: engine/arg_utils.py:36 in 0.8.0 (:43 in 0.8.5); from 0.9 ``collect_detailed_traces`` is a list of
#: ``DetailedTraceModules`` (a ``Literal``: the parser's choices)
ALLOWED_DETAILED_TRACE_MODULES = ["model", "worker", "all"]


#: 0.8.0-0.10.1's V1 oracle falls back to V0 for tracing (``if self.otlp_traces_endpoint or
#: self.collect_detailed_traces: _raise_or_fallback(...)``), and with ``VLLM_USE_V1=1`` refuses it in its own words
#: before the module loop (the oracle: engine/arg_utils.py:1215, the loop: :1368 in 0.8.0)
TRACING_ORACLE_UNTIL = Version("0.10.2")


def trace_frames(args: ResolvedArgs, version: Version, env: Mapping[str, str]) -> list[dict[str, object]]:
    """``create_engine_config``'s loop over ``--collect-detailed-traces`` split at commas (engine/arg_utils.py:
    1368-1375 in 0.8.0) at the module it stops at (the first it does not allow, else the last; left out where
    the oracle refuses first), and ``ObservabilityConfig``'s tracing fields (config/observability.py:217-222 in
    0.33.0)."""
    given = args.get("collect_detailed_traces")
    endpoint = args.get("otlp_traces_endpoint")
    base: dict[str, object] = {"self.collect_detailed_traces": given, "self.otlp_traces_endpoint": endpoint,
                               "ALLOWED_DETAILED_TRACE_MODULES": ALLOWED_DETAILED_TRACE_MODULES}
    if not isinstance(given, str):
        return [{**base, "for m in detailed_trace_modules": False}]
    if version < TRACING_ORACLE_UNTIL and env.get("VLLM_USE_V1") == "1":
        return [base]
    modules = given.split(",")
    bad = [m for m in modules if m not in ALLOWED_DETAILED_TRACE_MODULES]
    return [{**base, "for m in detailed_trace_modules": True, "m": bad[0] if bad else modules[-1]}]


#: ``BUCKET_FAMILY_KEYS`` (``get_args(BucketFamilyKey)``, v1/metrics/buckets.py:14-27 in 0.32.0 and 0.33.0)
BUCKET_FAMILY_KEYS = frozenset({"request_latency", "time_to_first_token", "inter_token_latency", "iteration_tokens",
                                "request_params_n", "request_num_preemptions", "request_tokens",
                                "kv_cache_residency"})


def _float(value: object) -> float | None:
    """A JSON number as pydantic's lax float reads it (None: pydantic refuses it, in its words)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def histogram_frames(args: ResolvedArgs) -> list[tuple[frozenset[str], dict[str, object]]]:
    """``--custom-histogram-buckets`` (0.32+) as ``ObservabilityConfig``'s validators walk it (config/observability.py:
    167-212 in 0.33.0): first the raw JSON for a boolean bound (a family whose value is not a list is skipped: the
    loop's ``continue``), then, where pydantic reads every bound as a float, each family in order (a known family,
    a non-empty list, finite positive bounds, strictly increasing) up to the first that fails."""
    raw = args.get("custom_histogram_buckets")
    if not isinstance(raw, Mapping):
        return []
    bools = [(family, bound) for family, buckets in raw.items() if isinstance(buckets, list)
             for bound in buckets if isinstance(bound, bool)]
    before: dict[str, object] = {"isinstance(value, dict)": True,
                                 "for (family, buckets) in value.items()": bool(bools),
                                 "for bound in buckets": bool(bools), "isinstance(bound, bool)": bool(bools),
                                 "family": bools[0][0] if bools else "", "bound": bools[0][1] if bools else 0}
    out: list[tuple[frozenset[str], dict[str, object]]] = [(HISTOGRAM_BOOL_RULES, before)]
    if bools:
        return out
    typed: dict[str, list[float]] = {}
    for family, buckets in raw.items():
        if not isinstance(buckets, list):
            return out              # pydantic refuses the type first
        floats = [_float(b) for b in buckets]
        if any(f is None for f in floats):
            return out
        typed[str(family)] = [f for f in floats if f is not None]
    for family, buckets in typed.items():
        bad = [b for b in buckets if not math.isfinite(b) or b <= 0]
        checks = {"family not in BUCKET_FAMILY_KEYS": family not in BUCKET_FAMILY_KEYS, "not buckets": not buckets,
                  "not math.isfinite(bound) or bound <= 0": bool(bad),
                  "any((a >= b for a, b in pairwise(buckets)))":
                      any(a >= b for a, b in itertools.pairwise(buckets))}
        failed = next((c for c, held in checks.items() if held), None)
        if failed is None:
            continue
        # the state at the raise: the first check that fails holds, the later ones are not reached
        out.append((HISTOGRAM_RULES, {
            "for (family, buckets) in value.items()": True, "family": family, "buckets": buckets,
            "BUCKET_FAMILY_KEYS": BUCKET_FAMILY_KEYS, "for bound in buckets": bool(bad),
            "bound": bad[0] if bad else 0.0, **{c: c == failed for c in checks}}))
        return out
    out.append((HISTOGRAM_RULES, {"for (family, buckets) in value.items()": False}))
    return out


# -- the profiler -----------------------------------------------------------------------------------------------

#: 0.13-0.15 read the deprecated environment in the validator itself (``_set_from_env_if_set``, config/profiler.py:
#: 124-170 in 0.13.0): ``VLLM_TORCH_CUDA_PROFILE`` sets the profiler (``cuda`` for 1, else none), otherwise a
#: ``VLLM_TORCH_PROFILER_DIR`` sets the directory and, where non-empty, the torch profiler; 0.16 drops them
PROFILER_ENV_UNTIL = Version("0.16.0")
#: the Proton options ``non_default_proton_options`` lists with their defaults (config/profiler.py:192-205 in 0.28.0;
#: 0.30 adds ``proton_graph_attribution``, :196-210)
_PROTON_OPTIONS = (("proton_profiler_dir", ""), ("proton_context", "shadow"), ("proton_data", "tree"),
                   ("proton_backend", None), ("proton_mode", None), ("proton_hook", None),
                   ("proton_output_format", None))
PROTON_GRAPH_ATTRIBUTION_SINCE = Version("0.30.0")


def _is_uri_path(path: str) -> bool:
    """``_is_uri_path`` (config/profiler.py:52-62 in 0.33.0): a scheme of more than one character before ``://``."""
    return "://" in path and len(path.split("://")[0]) > 1


def profiler_frame(args: ResolvedArgs, version: Version, env: Mapping[str, str]) -> dict[str, object]:
    """``ProfilerConfig``'s fields from ``--profiler-config`` (JSON or dotted keys; 0.13+) and the locals of its
    validator (``profiler_dir`` / ``torch_profiler_dir``, ``activities``, ``non_default_proton_options`` and the
    message's ``options``, ``output_format``), after the deprecated environment of 0.13-0.15."""
    given = args.get("profiler_config")
    pc: Mapping[str, object] = given if isinstance(given, Mapping) else {}
    profiler = pc.get("profiler")
    torch_dir = str(pc.get("torch_profiler_dir") or "")
    if version < PROFILER_ENV_UNTIL:
        if "VLLM_TORCH_CUDA_PROFILE" in env:
            profiler = "cuda" if env["VLLM_TORCH_CUDA_PROFILE"] == "1" else None
        elif "VLLM_TORCH_PROFILER_DIR" in env:
            torch_dir = env["VLLM_TORCH_PROFILER_DIR"]
            if torch_dir:
                profiler = "torch"
    options: list[tuple[str, object, object]] = [(name, pc.get(name, default), default)
                                                  for name, default in _PROTON_OPTIONS]
    if version >= PROTON_GRAPH_ATTRIBUTION_SINCE:
        options.append(("proton_graph_attribution", bool(pc.get("proton_graph_attribution", False)), False))
    non_default = [name for name, value, default in options if value != default]
    proton_dir = str(pc.get("proton_profiler_dir") or "")
    mode = pc.get("proton_mode")
    activities = pc.get("torch_profiler_activities")
    out: dict[str, object] = {
        "self.profiler": profiler, "profiler_dir": torch_dir, "torch_profiler_dir": torch_dir,
        "activities": tuple(activities) if isinstance(activities, Sequence) else None,
        "self.capture_torch_profiler": bool(pc.get("capture_torch_profiler", False)),
        "non_default_proton_options": non_default, "options": ", ".join(non_default),
        "proton_profiler_dir": proton_dir, "_is_uri_path(proton_profiler_dir)": _is_uri_path(proton_dir),
        "output_format": pc.get("proton_output_format"), "self.proton_data": pc.get("proton_data", "tree"),
        "self.proton_graph_attribution": bool(pc.get("proton_graph_attribution", False)),
        "self.proton_mode": mode,
        "self.proton_mode.split(':', 1)[0].lower() == 'periodic_flushing'":
            isinstance(mode, str) and mode.split(":", 1)[0].lower() == "periodic_flushing",
    }
    if isinstance(activities, Sequence):
        out["len(set(activities))"] = len(set(activities))
    return out


# -- the attention config -------------------------------------------------------------------------------------------

#: ``KVCacheSpecKind``'s values (v1/kv_cache_interface.py, the same in 0.26.0-0.33.0): the kinds
#: ``backend_per_kind`` may name (config/attention.py:240-264 in 0.33.0)
KV_CACHE_SPEC_KINDS = frozenset({"full_attention", "mla_attention", "sliding_window", "sliding_window_mla", "mamba",
                                 "chunked_local_attention", "sink_full_attention", "encoder_only_attention",
                                 "cross_attention", "unknown"})


def attention_frame(args: ResolvedArgs) -> dict[str, object]:
    """``AttentionConfig``'s fields from ``--attention-config`` / ``-ac`` (built from the JSON: the top-level
    attention flags are assigned to a copy in ``create_engine_config`` afterwards, unvalidated: engine/arg_utils.py:
    2029-2045 in 0.21.0).

    - ``use_cudnn_prefill`` (0.21.0): ``_migrate_deprecated_mla_prefill_flags`` returns first where
      ``mla_prefill_backend`` is set (config/attention.py:109-122), so it counts only without one;
    - ``backend_per_kind`` (0.26+): its field validator's loop stops at the first kind ``KVCacheSpecKind`` lacks;
    - ``use_fp4_indexer_cache`` against ``indexer_kv_dtype`` (0.28-0.29), ``minimax_m3_indexer_cp`` (0.33)."""
    given = args.get("attention_config")
    ac: Mapping[str, object] = given if isinstance(given, Mapping) else {}
    per_kind = ac.get("backend_per_kind")
    kinds = list(per_kind) if isinstance(per_kind, Mapping) else []
    bad = [k for k in kinds if k not in KV_CACHE_SPEC_KINDS]
    out: dict[str, object] = {
        "self.use_cudnn_prefill": bool(ac.get("use_cudnn_prefill")) and ac.get("mla_prefill_backend") is None,
        "for (kind, backend) in value.items()": bool(kinds), "kind": bad[0] if bad else (kinds[-1] if kinds else ""),
        "valid_kinds": KV_CACHE_SPEC_KINDS, "', '.join(sorted(valid_kinds))": ", ".join(sorted(KV_CACHE_SPEC_KINDS)),
        "self.use_fp4_indexer_cache": ac.get("use_fp4_indexer_cache"),
        "self.indexer_kv_dtype": ac.get("indexer_kv_dtype", "auto"),
        "self.minimax_m3_indexer_cp": bool(ac.get("minimax_m3_indexer_cp")),
    }
    return out


# -- a top-level flag and the same key of its config ---------------------------------------------------------------

#: ``AttentionConfig.validate_backend_before`` reads ``auto`` as None from 0.18 (config/attention.py:220-230 in
#: 0.33.0; 0.17.1 looks ``AUTO`` up in the enum); from 0.27 ``__post_init__`` moves a MiniMax MSA alias out of
#: ``backend`` (``self.backend = None``, config/attention.py:172-182 in 0.33.0)
ATTENTION_AUTO_AS_NONE_SINCE = Version("0.18.0")
MSA_ALIASES_SINCE = Version("0.27.0")
_MSA_ALIASES = frozenset({"CUTLASS_MSA", "TRITON_MSA"})


def _op_priority(value: object) -> list[str]:
    """An op's priority as ``IrOpPriorityConfig._to_list_str`` reads it (a comma list or a list; empty: unset)."""
    if isinstance(value, str):
        return [v for v in value.replace(" ", "").split(",") if v] if value.replace(" ", "") else []
    return list(value) if isinstance(value, Sequence) else []


def twice_frame(args: ResolvedArgs, version: Version) -> dict[str, object]:
    """``create_engine_config``'s overrides of a config by its top-level flag (engine/arg_utils.py:2726-2737 and
    2787-2820 in 0.33.0): ``--attention-backend`` over ``--attention-config``'s backend (0.13+),
    ``--enable-flashinfer-autotune`` over ``--kernel-config``'s (0.16+) and ``--ir-op-priority`` over
    ``--kernel-config``'s ``ir_op_priority`` op by op (0.20+; an op left empty is skipped: the loop's ``continue``),
    at the first op set in both."""
    attention = args.get("attention_config")
    backend = attention.get("backend") if isinstance(attention, Mapping) else None
    if isinstance(backend, str):
        if version >= ATTENTION_AUTO_AS_NONE_SINCE and backend.lower() == "auto":
            backend = None
        elif version >= MSA_ALIASES_SINCE and backend.upper() in _MSA_ALIASES:
            backend = None
    kernel = args.get("kernel_config")
    kc: Mapping[str, object] = kernel if isinstance(kernel, Mapping) else {}
    top = args.get("ir_op_priority")
    top_ops = top if isinstance(top, Mapping) else {}
    nested = kc.get("ir_op_priority")
    nested_ops = nested if isinstance(nested, Mapping) else {}
    both = [op for op, value in top_ops.items() if _op_priority(value) and _op_priority(nested_ops.get(op))]
    # IrOpPriorityConfig._to_list_str, the field validator of every op (mode before: config/kernel.py:66-72 in
    # 0.33.0), of --ir-op-priority and of --kernel-config's ir_op_priority alike
    listed = [v for ops in (top_ops, nested_ops) for v in ops.values() if not isinstance(v, str)]
    not_strings = any(isinstance(v, Sequence) and not all(isinstance(x, str) for x in v) for v in listed)
    return {
        "self.attention_backend": args.get("attention_backend"), "attention_config.backend": backend,
        "self.enable_flashinfer_autotune": args.get("enable_flashinfer_autotune"),
        "kernel_config.enable_flashinfer_autotune": kc.get("enable_flashinfer_autotune"),
        "for (op_name, op_priority) in asdict(self.ir_op_priority).items()": bool(both),
        "op_name": both[0] if both else "",
        "getattr(kernel_config.ir_op_priority, op_name)": bool(both),
        "not (all((isinstance(v, str) for v in value)))": not_strings,
    }


# -- Engram -------------------------------------------------------------------------------------------------------

#: ``_NGRAM_LAYER_FIELDS`` (config/engram.py in 0.30.0-0.33.0): the architectures with n-gram embedding layers
NGRAM_LAYER_FIELDS: Mapping[str, str] = {"DeepseekV41ForCausalLM": "engram_layer_ids",
                                         "Qwen4ExpForCausalLM": "ple_layer_ids",
                                         "Qwen4ExpForConditionalGeneration": "ple_layer_ids"}
#: 0.30's ``cpu_offload`` defaults to ``VLLM_PLE_CPU_OFFLOAD`` (``bool(int(os.getenv(..., "1")))``, envs.py:2047) and
#: its ``dp_shared_memory`` to False; from 0.31 ``cpu_offload`` is True and ``dp_shared_memory`` None, resolved
#: before the parallel checks (``resolve_dp_shared_memory``, config/engram.py:89-97 in 0.31.0)
ENGRAM_RESOLVED_SINCE = Version("0.31.0")


def engram_frame(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version,
                 env: Mapping[str, str]) -> dict[str, object] | None:
    """``EngramConfig`` from ``--engram-config`` (0.30+) as ``VllmConfig._resolve_and_verify_engram_config`` verifies
    it (config/vllm.py:1462-1490 in 0.33.0); None without the flag (the engine's default config, built only for a
    model with n-gram layers, refuses nothing)."""
    given = args.get("engram_config")
    if not isinstance(given, Mapping):
        return None
    if version < ENGRAM_RESOLVED_SINCE:
        ple = env.get("VLLM_PLE_CPU_OFFLOAD", "1")
        default_offload = bool(int(ple)) if ple.strip().lstrip("-").isdigit() else True
    else:
        default_offload = True
    cpu_offload = bool(given.get("cpu_offload", default_offload))
    use_thp = bool(given.get("use_thp", False))
    shared = given.get("dp_shared_memory", None if version >= ENGRAM_RESOLVED_SINCE else False)
    if shared is None:
        shared = cpu_offload and not use_thp and layout.data_parallel_size > 1 and not bool(
            args.get("enable_elastic_ep"))
    out: dict[str, object] = {
        "self.cpu_offload": cpu_offload, "self.use_thp": use_thp, "self.dp_shared_memory": bool(shared),
        "self.embedding_across_dp": bool(given.get("embedding_across_dp", False)),
        "load_config.load_format": args.get("load_format") or "auto",
    }
    fields = {NGRAM_LAYER_FIELDS.get(arch) for arch in model.architectures} - {None}
    if not fields:
        out["field"] = None     # no architecture of the model has n-gram layers: whichever the release picks
    return out


# -- the entry points ---------------------------------------------------------------------------------------------

def values(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version,
           env: Mapping[str, str]) -> dict[str, object]:
    """What this module adds to the shared namespace: ``--default-mm-loras`` and ``model_config.
    is_multimodal_model`` (``self.multimodal_config is not None``: set where the class ``SupportsMultiModal``,
    config/model.py:831-881 in 0.33.0, config.py:764-772 in 0.10.0), read by ``create_engine_config``'s
    default-modality LoRA check (engine/arg_utils.py:2685-2689 in 0.33.0) whether or not LoRA is on."""
    out: dict[str, object] = {"self.default_mm_loras": args.get("default_mm_loras") or None}
    flags = _native_class(args, model, version)
    if flags:
        out["model_config.is_multimodal_model"] = bool(flags.get("supports_multimodal"))
    return out


def frames(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version,
           env: Mapping[str, str]) -> list[tuple[frozenset[str], dict[str, object]]]:
    """The frames this module's framed rules are judged in (each over the shared namespace), and the rules of each;
    a rule of ``FRAMED`` in none of them is not reached by this line (LoRA off, no KV connector)."""
    out: list[tuple[frozenset[str], dict[str, object]]] = []
    if bool(args.get("enable_lora")):
        lora = lora_frame(args, model, layout, version, env)
        out.append((LORA_RULES, lora))
        spec = lora["speculative_config"]
        if isinstance(spec, Mapping) and spec.get("enable_adaptive_verification") is True:
            # past _validate_adaptive_verification's early return (config/vllm.py:3153-3161 in 0.33.0)
            out.append((ADAPTIVE_RULES, {"self.lora_config": True}))
    if bool(args.get("enable_prompt_adapter")):
        out.append((PROMPT_ADAPTER_RULES, prompt_adapter_frame(args, env)))
    out.append((QLORA_RULES, qlora_frame(args, model, version)))
    pool = tokenizer_pool_frame(args)
    if pool is not None:
        out.append((TOKENIZER_POOL_RULES, pool))
    out.append((STRUCTURED_RULES, structured_frame(args, layout, version, env)))
    kv = kv_transfer_frame(args)
    if kv is not None:
        out.append((KV_RULES, kv))
    compat = kv_transfer_compat_frame(args, version, env)
    if compat is not None:
        out.append((KV_COMPAT_RULES, compat))
    ec = ec_transfer_frame(args)
    if ec is not None:
        out.append((EC_RULES, ec))
    out += [(TRACE_RULES, frame) for frame in trace_frames(args, version, env)]
    out += histogram_frames(args)
    out.append((PROFILER_RULES, profiler_frame(args, version, env)))
    out.append((ATTENTION_RULES, attention_frame(args)))
    out.append((TWICE_RULES, twice_frame(args, version)))
    out.append((OFFLOAD_RULES, offload_frame(args)))
    engram = engram_frame(args, model, layout, version, env)
    if engram is not None:
        out.append((ENGRAM_RULES, engram))
    return out


def judge(ask: Ask) -> Judged:
    """The rules of ``FRAMED`` in force, each frame of ``frames`` over the shared namespace."""
    return combine(ask.judge(frame, rules)
                   for rules, frame in frames(ask.args, ask.model, ask.layout, ask.version, ask.env))
