"""SGLang's cache, Mamba, serving-frontend and remaining argument refusals (SSL / HTTP2, gRPC, watermarks, PP, the
prefill-only KV cache, the unified memory pool and page-major layout, the FP4 KV cache's platform, hierarchical
cache, HiSparse, LayerNorm SP, the Mamba flags, deterministic inference, IQuest Q1, aux hidden states), the
values they read as each release resolves them (``config_checks.py`` judges them; ``in_force`` says which it does
not).

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
  ``--attn-cp-size`` > 1, prefill context parallelism and ``--enable-hisparse``. After the backends settle,
  ``handle_prefill_only_disable_kv_cache`` (0.5.23 l.321-348) needs an fa3 / fa4 prefill backend
  (``attention_backends_of``: ``--prefill-attention-backend``, else ``--attention-backend``): judged where the line
  names one and no ``--enable-mis`` rewrites it (``attention_hook.py handle_multi_item_scoring``); unnamed, SGLang
  picks one, not resolved here.
* ``--enable-unified-memory`` (0.5.15+, ``ServerArgs._handle_unified_memory_pool``; from 0.5.19 ``kv_cache_hook.py
  handle_unified_memory_pool``, 0.5.23 l.528-720): returns without the flag; the flag-level asserts: PD
  disaggregation (0.5.15 - 0.5.17 at all; from 0.5.18 with PP or ``--enable-hisparse``), hierarchical cache / LMCache
  (0.5.15 - 0.5.20; LMCache alone from 0.5.21), ``--dcp-size`` > 1 (0.5.15 - 0.5.19), two-batch overlap (0.5.20+)
  and ``--enable-unified-cache-external-linker`` (0.5.22+). The flags are the line's: the one hook that turns
  hierarchical cache / LMCache off, a diffusion LLM's (``dllm_hook.py``), runs after it (0.5.23 ``pipeline.py``
  l.338 before l.342; 0.5.15 ``server_args.py`` l.2794 before l.2797).
* gRPC and the sidecar (``ServerArgs._handle_deprecated_args``; from 0.5.19 ``serving_hook.py
  handle_deprecated_args``): 0.5.11 - 0.5.15 always set ``grpc_port`` to ``SGLANG_GRPC_PORT``, else ``--port`` +
  10000, and refuse it outside 1 .. 65535 (0.5.14 ``server_args.py`` l.2761-2768: ``--port 60000`` refuses). From
  0.5.16 ``grpc_port`` is ``--grpc-port``, else ``SGLANG_GRPC_PORT``, else ``--port`` + 10000 with the legacy
  ``--smg-grpc-mode`` / ``--grpc-mode``, else None (0.5.16 l.3318-3326); the native server (a port without the legacy
  mode) refuses ``--use-ray``, ``--encoder-only``, ``--tokenizer-worker-num`` > 1 and an API key, and
  ``--sidecar`` needs the native server. ``SGLANG_GRPC_WORKER_THREADS`` defaults to 4 (0.5.16 ``environ.py`` l.883).
  From 0.5.21 ``--grpc-response-timeout-secs`` must be positive.
* LayerNorm sequence parallelism (0.5.19+, ``arg_groups/layernorm_sp_hook.py``; ``handle_layernorm_sp`` returns
  without ``--enable-layernorm-sp``, 0.5.23 l.114-121): ``validate_layernorm_sp`` refuses an architecture outside
  ``layers/layernorm_sp.py SP_SUPPORTED_ARCHITECTURES`` (``Qwen3ForCausalLM``; 0.5.23 also Muse Spark, l.53-54),
  TP 1, attention DP and (0.5.22+) PP; 0.5.23 refuses ``--enable-megamoe-for-layernorm-sp`` without
  ``--enable-layernorm-sp`` (l.117-120) or off Muse Spark (l.128-129). The Muse Spark checks (EP, quantization,
  MoE backends, ``SGLANG_MOE_NVFP4_DISPATCH``) are not modelled.
* Page-major KV layout (0.5.19+, ``kv_cache_hook.py handle_page_major_kv_layout``, 0.5.23 l.770-789): returns
  without ``--enable-page-major-kv-layout`` (``--enable-unified-memory`` sets it) and asserts unified memory.
* FP4 KV cache (``handle_kv4_compatibility``, returns unless ``--kv-cache-dtype`` is ``nvfp4`` / ``fp4_mx_block16``,
  0.5.23 l.117-118; 0.5.16 ``server_args.py`` l.5078): ``nvfp4`` needs SM100 or SM120 (0.5.16+, 0.5.23 l.124-131:
  ``is_sm100`` / ``is_sm120`` = ``utils/common.py _check_cuda_device_version`` on the compute capability's major
  with CUDA 12.8, which any build that runs on Blackwell has); FP4 refuses ``--enable-unified-memory`` (0.5.21+,
  l.132-137). The backend checks after them read the attention backends SGLang resolves: not modelled.
* Hierarchical cache (``arg_groups/hicache_hook.py``): the unified-cache external linker (0.5.20+) refuses
  ``--enable-hierarchical-cache`` and ``--hicache-storage-backend`` and (0.5.23) a disabled radix cache or a
  ``--radix-cache-backend``, and ``--enable-linker-mla-dedup`` needs the Mooncake linker (0.5.21+, 0.5.23 l.39-60);
  ``--hicache-host-memory-fraction`` must be in (0, 1] (0.5.21+, ``handle_hicache_ratio_default`` l.115-116); with
  ``--enable-hierarchical-cache`` and ``--dcp-size`` > 1 (``resolve_hicache_dcp_compatibility`` returns otherwise,
  0.5.23 l.131-133; 0.5.17 ``server_args.py`` l.7162) an L3 ``--hicache-storage-backend`` (to 0.5.22; from 0.5.23
  with ``--hicache-host-memory-mode buffer_only``), LMCache, HiSparse and a non-MLA model are refused.
* HiSparse (0.5.12+, ``arg_groups/hisparse_hook.py validate_hisparse``, returns without ``--enable-hisparse``):
  only DeepSeek's sparse-attention (DSA) models, DeepSeek V4 and (0.5.21+) MiniMax M3 (``configs/model_config.py
  is_deepseek_dsa``: an architecture of its list with ``index_topk`` in the config), with ``--disable-radix-cache``;
  0.5.22+ refuses ``--enable-mixed-chunk`` (``validate_hisparse_feature_combos``). The KV dtype and DSA backend
  checks read what SGLang resolves for the model: not modelled.
* Mamba backend flags (0.5.15+, ``ServerArgs._handle_mamba_backend``; from 0.5.19 ``arg_groups/mamba_hook.py
  handle_mamba_backend``, 0.5.23 l.19-72, run for every model): ``--mamba-cache-philox-rounds`` >= 0,
  ``--mamba-max-states-per-path`` -1 or positive (0.5.17+), and ``--enable-mamba-cache-stochastic-rounding`` needs
  ``--mamba-ssm-dtype float16`` (the line's: nothing sets it before, 0.5.23 ``pipeline.py`` l.251 runs this before
  ``handle_linear_attn_backend``, l.253) and, with the triton ``--mamba-backend`` (the default), SM100. Whether
  FlashInfer's mamba module imports (``--mamba-backend flashinfer``, checked from 0.5.9) is the image's: not judged.
* Deterministic inference's attention backend (0.5.3 - 0.5.14, ``ServerArgs._handle_deterministic_inference``;
  ``--rl-on-policy-target`` turns it on, 0.5.14 l.5957-5961): an ``--attention-backend`` outside
  ``DETERMINISTIC_ATTENTION_BACKEND_CHOICES`` (flashinfer, fa3, triton; 0.5.13+ also ascend) is refused (0.5.14
  l.6021-6026), and for a DeepSeek model one other than fa3 / triton (0.5.4.post1+, l.6028-6033). Judged only where
  the line names the backend: unnamed, the release picks an allowed one (0.5.12+, l.6004-6019) or, before 0.5.12,
  checks the one ``_handle_attention_backend_compatibility`` picked first (0.5.11 l.849 before l.900), which is not
  resolved here. From 0.5.15 (the check in ``arg_groups/``) a named backend is ``rules_mamba``'s rule.
* IQuest Q1 (0.5.21+, ``arg_groups/model_overrides/iquest_q1.py _iquest_q1_overrides``, registered for
  ``IQuestQ1ForCausalLM`` / ``IQuestQ1MTP``, 0.5.23 l.11-40): any attention backend the line names other than fa3,
  context parallelism (``--attn-cp-size`` / ``--dcp-size`` > 1, ``--enable-prefill-cp``), attention DP and PP are
  refused; it runs in the model-specific step, before ``handle_attention_backend_compatibility`` picks a backend
  (0.5.23 ``pipeline.py`` l.225 / l.242), so the backends are the line's. Its speculative checks wait on speculative
  decoding. MiniMax M3's (``minimax_m3.py``) all read the quantization SGLang resolves for the checkpoint
  (``quant_resolved == 'minimax_m3_nvfp4'``): not modelled.
* Aux hidden-state capture (0.5.23, ``validation_hook.py handle_aux_hidden_state_capture`` l.697-748, run early in
  the pipeline, l.94, so the values are the line's): ``--return-aux-hidden-state-layer-ids`` needs
  ``--enable-return-aux-hidden-states``, which needs ``--speculative-algorithm`` EAGLE3 / DFLASH / DSPARK (here only
  the capture convention's name), no draft model path, PP 1, and layer ids (except EAGLE3) that are non-negative and
  distinct.
* ``--disable-fast-image-processor`` (0.5.18+, ``handle_deprecated_args``, 0.5.23 ``serving_hook.py`` l.256-261)
  conflicts with an ``--image-processor-backend`` other than auto / pil.
* An explicit Mamba radix-cache strategy on a model without Mamba state (0.5.21+, ``model_hook.py
  handle_mamba_radix_cache``, called for every model at the end of the model-specific step, 0.5.23 l.737 / l.1048-1066):
  ``--mamba-radix-cache-strategy extra_buffer`` / ``extra_buffer_lazy`` with the radix cache on
  (``mamba_extra_buffer_of``, ``model_override_base.py`` l.260-265) is refused where the model uses no Mamba radix
  cache: one without linear-attention state outside ``overrides.py _MAMBA_RADIX_CACHE_ARCHS``; a hybrid model is not
  judged.
* ``disable_radix_cache`` is the line's, except where SGLang turns the radix cache off itself before a check reads it:
  a PD decode worker (0.5.23 ``pd_disaggregation_hook.py`` l.121-126), ``--enable-deterministic-inference``
  (``attention_hook.py`` l.655-662) and ``--enable-mis`` (l.556-562); there it is not judged.

The environment is the deployment's (``env``; unset: the release's default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

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
    "sglang.layernorm_sp": "--enable-layernorm-sp with a model it does not support, TP 1, attention DP or PP "
                           "(0.5.19+)",
    "sglang.layernorm_sp.megamoe": "--enable-megamoe-for-layernorm-sp without --enable-layernorm-sp (0.5.23)",
    "sglang.page_major_kv_layout": "--enable-page-major-kv-layout without --enable-unified-memory (0.5.19+)",
    "sglang.kv4.platform": "--kv-cache-dtype nvfp4 off Blackwell SM100 / SM120 (0.5.16+), or an FP4 KV cache with "
                           "--enable-unified-memory (0.5.21+)",
    "sglang.hicache.external_linker": "--enable-unified-cache-external-linker with hierarchical cache, a storage "
                                      "backend or no radix cache, or --enable-linker-mla-dedup without it (0.5.20+)",
    "sglang.hicache.host_memory_fraction": "--hicache-host-memory-fraction outside (0, 1] (0.5.21+)",
    "sglang.hicache.dcp": "--enable-hierarchical-cache with --dcp-size > 1 beside an L3 storage backend, LMCache, "
                          "HiSparse or a non-MLA model (0.5.17+)",
    "sglang.mamba.backend_flags": "a negative --mamba-cache-philox-rounds, a --mamba-max-states-per-path of 0 or below "
                                  "-1, or --enable-mamba-cache-stochastic-rounding without float16 SSM state or (with "
                                  "the triton backend) off SM100 (0.5.15+)",
    "sglang.deterministic.attention_backend": "--enable-deterministic-inference with an --attention-backend it does "
                                              "not support (for DeepSeek: other than fa3 / triton) (0.5.3 - 0.5.14)",
    "sglang.iquest_q1": "an IQuest Q1 model with a non-FA3 attention backend, context parallelism, attention DP or PP "
                        "(0.5.21+)",
    "sglang.aux_hidden_states.needs_enable": "--return-aux-hidden-state-layer-ids without "
                                             "--enable-return-aux-hidden-states (0.5.23)",
    "sglang.aux_hidden_states": "--enable-return-aux-hidden-states without its capture convention, with a draft "
                                "model, PP or bad layer ids (0.5.23)",
    "sglang.image_processor": "--disable-fast-image-processor with an --image-processor-backend other than auto / pil "
                              "(0.5.18+)",
    "sglang.mamba.strategy_needs_state": "--mamba-radix-cache-strategy extra_buffer(_lazy) on a model without Mamba "
                                         "state (0.5.21+)",
    "sglang.hisparse": "--enable-hisparse with a model other than DeepSeek DSA / V4 / MiniMax M3, with the radix "
                       "cache, or (0.5.22+) with --enable-mixed-chunk",
}

WATERMARK_CONFLICTS = "sglang.watermark.conflicts"
PP_RULE = "sglang.pp.min_free_slots_delay"
PREFILL_ONLY_RULE = "sglang.prefill_only_disable_kv_cache"
UNIFIED_RULE = "sglang.unified_memory.flags"
LAYERNORM_SP_RULE = "sglang.layernorm_sp"
PAGE_MAJOR_RULE = "sglang.page_major_kv_layout"
KV4_RULE = "sglang.kv4.platform"
HICACHE_DCP_RULE = "sglang.hicache.dcp"
DETERMINISTIC_RULE = "sglang.deterministic.attention_backend"
IQUEST_RULE = "sglang.iquest_q1"
AUX_RULE = "sglang.aux_hidden_states"
#: ``mamba_extra_buffer_of``'s strategies (0.5.23 ``model_override_base.py`` l.262-265)
MAMBA_EXTRA_BUFFER_STRATEGIES = ("extra_buffer", "extra_buffer_lazy")
MAMBA_STATE_RULE = "sglang.mamba.strategy_needs_state"
#: ``validation_hook.py`` l.694 (0.5.23)
AUX_HIDDEN_STATE_CAPTURE_METHODS = ("EAGLE3", "DFLASH", "DSPARK")
#: ``_register_for("IQuestQ1ForCausalLM", "IQuestQ1MTP")`` (0.5.23 ``model_overrides/iquest_q1.py`` l.11)
IQUEST_ARCHS = frozenset({"IQuestQ1ForCausalLM", "IQuestQ1MTP"})
#: the backend test of ``_iquest_q1_overrides`` as the ledger holds it (a generator: given as its value)
IQUEST_BACKENDS_TEST = "any((backend not in (None, 'fa3') for backend in requested))"
#: ``server_args.py`` ``DETERMINISTIC_ATTENTION_BACKEND_CHOICES`` / ``RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND``
#: by the release that first holds the value (0.5.3 l.~150; ascend from 0.5.13)
DETERMINISTIC_BACKENDS: tuple[tuple[Version, list[str], list[str]], ...] = (
    (Version("0.5.3"), ["flashinfer", "fa3", "triton"], ["fa3", "triton"]),
    (Version("0.5.13"), ["flashinfer", "fa3", "triton", "ascend"], ["fa3", "triton", "ascend"]),
)
#: the architectures ``_handle_deterministic_inference`` calls DeepSeek (0.5.4.post1 l.1683-1687; 0.5.10 adds
#: MistralLarge3 / Pixtral / GlmMoeDsa): the first three in every release, the others left out (not judged)
DEEPSEEK_DETERMINISTIC = frozenset({"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM"})
DEEPSEEK_DETERMINISTIC_LATER = frozenset({"MistralLarge3ForCausalLM", "PixtralForConditionalGeneration",
                                          "GlmMoeDsaForCausalLM"})
HISPARSE_RULE = "sglang.hisparse"
#: ``configs/model_config.py``: the architectures ``is_deepseek_v4`` / ``is_minimax_sparse`` (0.5.21+) name
DEEPSEEK_V4_ARCHS = frozenset({"DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "DeepseekV4ForCausalLMDSpark"})
MINIMAX_SPARSE_ARCHS = frozenset({"MiniMaxM3SparseForCausalLM", "MiniMaxM3SparseForConditionalGeneration"})
#: architectures every release's ``is_deepseek_dsa`` / ``is_deepseek_nsa`` lists (0.5.12 ``configs/model_config.py``
#: l.102-114); a model with ``index_topk`` and another architecture is not judged
DSA_ARCHS = frozenset({"DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM"})
#: ``handle_kv4_compatibility`` returns for any other dtype (0.5.23 ``kv_cache_hook.py`` l.117)
FP4_KV_DTYPES = frozenset({"nvfp4", "fp4_mx_block16"})
#: ``layers/layernorm_sp.py``: the architectures LayerNorm SP supports, by the release that first lists them
SP_SUPPORTED_ARCHITECTURES: tuple[tuple[Version, frozenset[str]], ...] = (
    (Version("0.5.19"), frozenset({"Qwen3ForCausalLM"})),
    (Version("0.5.23"), frozenset({"Qwen3ForCausalLM", "MuseSparkForConditionalGeneration"})),
)
MUSE_SP_ARCHITECTURES = frozenset({"MuseSparkForConditionalGeneration"})
#: compute-capability majors of ``utils/common.py`` ``is_sm100_supported`` / ``is_sm120_supported`` (each also needs
#: CUDA >= 12.8, which a build that runs on those GPUs has)
SM100_MAJORS, SM120_MAJORS = (10,), (12,)

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
            "api_key", "admin_api_key", "grpc_response_timeout_secs", "hicache_storage_backend",
            "hicache_host_memory_mode", "hicache_host_memory_fraction", "unified_cache_external_linker_backend",
            "unified_cache_external_linker_config", "radix_cache_backend", "mamba_cache_philox_rounds",
            "mamba_max_states_per_path", "mamba_ssm_dtype", "mamba_backend")
        if dest in args.values}
    ns["enable_deterministic_inference"] = _deterministic_on(args)
    for dest in ("enable_mamba_cache_stochastic_rounding", "enable_linker_mla_dedup", "enable_mixed_chunk",
                 "enable_ssl_refresh", "enable_http2", "enable_http_worker_reuseport", "enable_watermark",
                 "enable_custom_logit_processor", "prefill_only_disable_kv_cache", "is_embedding",
                 "disable_radix_cache", "enable_hisparse", "enable_unified_memory", "enable_hierarchical_cache",
                 "enable_two_batch_overlap", "enable_unified_cache_external_linker", "use_ray", "encoder_only",
                 "smg_grpc_mode", "grpc_mode"):
        ns[dest] = args.flag(dest)
    ns["enable_prefill_context_parallel"] = args.flag("enable_prefill_context_parallel")
    ns["enable_lmcache"] = args.flag("enable_lmcache")
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
    ns.update(_layernorm_sp(args, model, version))
    ns["enable_page_major_kv_layout"] = args.flag("enable_page_major_kv_layout")
    ns.update(_platform(layout))
    # handle_hicache's / handle_hicache_ratio_default's locals (0.5.23 hicache_hook.py l.26, l.114)
    ns["config"] = args.get("unified_cache_external_linker_config")
    ns["fraction"] = args.get("hicache_host_memory_fraction")
    if _radix_rewritten(args):
        del ns["disable_radix_cache"]
    ns.update(_sparse_models(model))
    ns.update(_deterministic(args, model, version))
    prefill_backend = args.get("prefill_attention_backend") or args.get("attention_backend")
    if prefill_backend is not None and not args.flag("enable_mis"):
        ns["prefill_backend"] = prefill_backend   # handle_prefill_only_disable_kv_cache's local
    ns.update(_aux_hidden_states(args))
    ns.update(_mamba_strategy(args, model))
    ns["disable_fast_image_processor"] = args.flag("disable_fast_image_processor")
    ns["image_processor_backend"] = args.get("image_processor_backend")
    requested = (args.get("attention_backend"), args.get("prefill_attention_backend"),
                 args.get("decode_attention_backend"))
    ns[IQUEST_BACKENDS_TEST] = any(backend not in (None, "fa3") for backend in requested)
    return ns


def _deterministic(args: ResolvedArgs, model: ModelSpec, version: Version) -> dict[str, object]:
    """``_handle_deterministic_inference``'s flag, its backend lists and its ``is_deepseek_model`` local."""
    arch = model.architectures[0] if model.architectures else ""
    ns: dict[str, object] = {}
    for since, choices, radix in DETERMINISTIC_BACKENDS:
        if version >= since:
            ns["DETERMINISTIC_ATTENTION_BACKEND_CHOICES"] = choices
            ns["RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND"] = radix
    if arch not in DEEPSEEK_DETERMINISTIC_LATER:
        ns["is_deepseek_model"] = arch in DEEPSEEK_DETERMINISTIC
    return ns


def _aux_hidden_states(args: ResolvedArgs) -> dict[str, object]:
    """``handle_aux_hidden_state_capture``'s flag, ``method`` and ``layer_ids`` locals; its two generator / set
    tests are given as their values (the evaluator applies neither)."""
    layer_ids = args.get("return_aux_hidden_state_layer_ids")
    spec = args.get("speculative_algorithm")
    ns: dict[str, object] = {
        "enable_return_aux_hidden_states": args.flag("enable_return_aux_hidden_states"),
        "return_aux_hidden_state_layer_ids": layer_ids, "layer_ids": layer_ids,
        "method": str(spec or "").upper(), "_AUX_HIDDEN_STATE_CAPTURE_METHODS": AUX_HIDDEN_STATE_CAPTURE_METHODS,
        "speculative_draft_model_path": args.get("speculative_draft_model_path"),
    }
    # the message's ``{cfg.speculative_algorithm!r}``, by its full text: the line's, read before any resolution
    ns["cfg.speculative_algorithm"] = spec
    if isinstance(layer_ids, list):
        ns["list(layer_ids)"] = list(layer_ids)
        ns["any((layer_id < 0 for layer_id in layer_ids))"] = any(
            isinstance(i, int) and i < 0 for i in layer_ids)
        ns["len(set(layer_ids)) != len(layer_ids)"] = len(set(layer_ids)) != len(layer_ids)
    return ns


def _mamba_strategy(args: ResolvedArgs, model: ModelSpec) -> dict[str, object]:
    """``handle_mamba_radix_cache``'s ``view.uses_mamba_radix_cache`` (False for a model without linear-attention
    state; a hybrid one is left out) and ``mamba_extra_buffer_of(view)`` (left out where SGLang may turn the radix
    cache off itself)."""
    ns: dict[str, object] = {}
    if model.linear_state is None:
        ns["uses_mamba_radix_cache"] = False
    if not _radix_rewritten(args):
        ns["mamba_extra_buffer_of"] = (not args.flag("disable_radix_cache")
                                       and args.get("mamba_radix_cache_strategy") in MAMBA_EXTRA_BUFFER_STRATEGIES)
    ns["mamba_radix_cache_strategy"] = args.get("mamba_radix_cache_strategy")
    ns["hf_config.architectures[0]"] = model.architectures[0] if model.architectures else None
    return ns


def _deterministic_on(args: ResolvedArgs) -> bool:
    return args.flag("enable_deterministic_inference") or args.get("rl_on_policy_target") is not None


def _radix_rewritten(args: ResolvedArgs) -> bool:
    """Whether SGLang may turn the radix cache off itself before a check reads it (see the module)."""
    return (args.get("disaggregation_mode") == "decode" or args.flag("enable_deterministic_inference")
            or args.flag("enable_mis"))


def _sparse_models(model: ModelSpec) -> dict[str, object]:
    """``validate_hisparse``'s model tests: ``is_deepseek_dsa(hf_config)`` (0.5.12 ``is_deepseek_nsa``), the V4 and
    MiniMax M3 ones; a model with ``index_topk`` outside the architectures every release lists is left out."""
    arch = model.architectures[0] if model.architectures else ""
    ns: dict[str, object] = {"is_v4_hisparse": arch in DEEPSEEK_V4_ARCHS,
                             "is_m3_hisparse": arch in MINIMAX_SPARSE_ARCHS, "use_mla_backend": model.is_mla}
    if model.index_head_dim is None or arch in DSA_ARCHS:
        ns["is_deepseek_dsa"] = ns["is_deepseek_nsa"] = model.index_head_dim is not None
    return ns


def _platform(layout: Layout) -> dict[str, object]:
    """The GPU-generation probes the FP4 and Mamba checks read (``get_platform().is_sm100`` from 0.5.19,
    ``is_sm100_supported()`` before), from the lowest compute capability; unknown: left out (not judged)."""
    cc = layout.compute_capability
    if cc is None:
        return {}
    major = cc[0]
    sm100, sm120 = major in SM100_MAJORS, major in SM120_MAJORS
    return {"is_sm100": sm100, "is_sm100_supported": sm100, "is_sm120": sm120, "is_sm120_supported": sm120}


def _layernorm_sp(args: ResolvedArgs, model: ModelSpec, version: Version) -> dict[str, object]:
    """``validate_layernorm_sp``'s arguments: the model's first architecture and the release's supported set."""
    architecture = model.architectures[0] if model.architectures else None
    supported = next((archs for since, archs in reversed(SP_SUPPORTED_ARCHITECTURES) if version >= since),
                     frozenset())
    use_megamoe = args.flag("enable_megamoe_for_layernorm_sp")
    return {"enable_layernorm_sp": args.flag("enable_layernorm_sp"), "use_megamoe": use_megamoe,
            "enable_megamoe_for_layernorm_sp": use_megamoe, "architecture": architecture,
            "SP_SUPPORTED_ARCHITECTURES": supported,
            "is_muse_spark_architecture": architecture in MUSE_SP_ARCHITECTURES}


def _grpc(args: ResolvedArgs, version: Version, env: Mapping[str, str]) -> dict[str, object]:
    """``grpc_port``, ``legacy_grpc`` and ``native_grpc`` as ``_handle_deprecated_args`` sets them (see the module)."""
    port = _value(args, "port", 30000)
    env_port = _int_env(env, "SGLANG_GRPC_PORT")
    legacy = args.flag("smg_grpc_mode") or args.flag("grpc_mode")
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


def in_force(rules: Sequence[str], args: ResolvedArgs, model: ModelSpec, layout: Layout) -> list[str]:
    """``rules`` less those whose function returns before its checks for this line (or that SGLang reaches only for
    another model or flag): the watermark conflicts without ``--enable-watermark``, the PP check without PP, the
    prefill-only, unified-memory, LayerNorm SP, page-major, HiSparse, aux-capture checks without their flag, the FP4
    ones without an FP4 KV cache, HiCache's DCP ones without both, deterministic inference's without a named backend,
    IQuest Q1's for other models, the Mamba-state one without an extra-buffer strategy."""
    drop: set[str] = set()
    if not args.flag("enable_watermark"):
        drop.add(WATERMARK_CONFLICTS)
    if layout.pipeline_parallel_size <= 1:
        drop.add(PP_RULE)
    if not args.flag("prefill_only_disable_kv_cache"):
        drop.add(PREFILL_ONLY_RULE)
    if not args.flag("enable_unified_memory"):
        drop.add(UNIFIED_RULE)
    if not args.flag("enable_layernorm_sp"):
        drop.add(LAYERNORM_SP_RULE)
    if not args.flag("enable_page_major_kv_layout"):
        drop.add(PAGE_MAJOR_RULE)
    if args.get("kv_cache_dtype") not in FP4_KV_DTYPES:
        drop.add(KV4_RULE)
    dcp = args.get("dcp_size")
    if not (args.flag("enable_hierarchical_cache") and isinstance(dcp, int) and dcp > 1):
        drop.add(HICACHE_DCP_RULE)
    if not args.flag("enable_hisparse"):
        drop.add(HISPARSE_RULE)
    if not (_deterministic_on(args) and args.get("attention_backend") is not None):
        drop.add(DETERMINISTIC_RULE)
    if not model.architectures or model.architectures[0] not in IQUEST_ARCHS:
        drop.add(IQUEST_RULE)
    if not args.flag("enable_return_aux_hidden_states"):
        drop.add(AUX_RULE)
    if args.get("mamba_radix_cache_strategy") not in MAMBA_EXTRA_BUFFER_STRATEGIES:
        drop.add(MAMBA_STATE_RULE)   # the entry needs an extra-buffer strategy (auto resolves per model)
    return [r for r in rules if r not in drop]


def judge(ask: Ask) -> Judged:
    """The rules of this module in force (``in_force``), over the shared namespace (``values`` adds to it)."""
    return ask.judge({}, RULES)
