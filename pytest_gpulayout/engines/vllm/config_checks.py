"""What vLLM refuses at config time, by release: ``config_refusals(args, model, layout, version)``.

The refusals are the release's own raises, listed from its source into ``config_ledger.json`` by
``tools/config_ledger.py`` (``vllm/config/*.py``, ``vllm/config.py`` before 0.10.1, ``engine/arg_utils.py``)
and answered in ``config_classes.yaml``. The entries classified ``rule: <id>`` (``RULES`` below) are judged
here: their conditions, as the release wrote them, are evaluated over the values the release holds at that
point (``namespace``), and a refusal carries the release's message with those values filled in, its exception
class and ``file:line`` in that release. A release between two listed ones is answered by the nearest listed
release below it (the refusal says so).

What the namespace holds is resolved the way the release resolves it:

- the layout's sizes (``Layout``: TP, PP, DP) and the command line's destinations (``ResolvedArgs``: a flag
  the line does not set takes the release's default, below where the release computes it);
- the scheduler defaults of ``EngineArgs._set_default_args`` (``_set_default_args_v1`` before 0.11,
  ``_set_default_max_num_seqs_and_batched_tokens_args`` from 0.12), per release and GPU (``scheduler``);
- the model's config (heads, KV heads, experts, MLA) and its class's interfaces (``SupportsPP``, from
  ``releases/*.json`` group ``interfaces``).

A condition that reads a value the namespace does not hold (a flag the rules do not resolve, a local the rule
does not know) leaves its entry not judged: ``config_check`` says which, nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from packaging.version import Version

from pytest_gpulayout.engines.areas import Area, Ask, combine, judge_areas, rules_of
from pytest_gpulayout.engines.vllm import (
    defaults,
    rules_fields,
    rules_hybrid,
    rules_image,
    rules_model,
    rules_model3,
    rules_model4,
    rules_model5,
    rules_post,
    rules_post2,
    rules_post3,
    rules_post4,
    rules_post5,
    rules_small,
    rules_spec2,
    rules_spec3,
    rules_spec4,
    rules_speculative,
)
from pytest_gpulayout.engines.vllm.interfaces import model_class
from pytest_gpulayout.generation import release_facts
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.knobs import Serving
from pytest_gpulayout.machine.facts import GIB_MIB
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout, Refusal, RuleBook, load_ledger

DISPLAY = "vLLM"

#: rule id -> what it refuses, for the rules judged over the shared namespace (``namespace``). Each is the id
#: ``config_classes.yaml`` gives the ledger entries it decides.
_SHARED: Mapping[str, str] = {
    "vllm.scheduler.batched_below_max_len":
        "chunked prefill off and max_num_batched_tokens below max_model_len (SchedulerConfig)",
    "vllm.scheduler.batched_below_seqs": "max_num_batched_tokens below max_num_seqs (SchedulerConfig)",
    "vllm.scheduler.partial_prefills":
        "max_num_partial_prefills / max_long_partial_prefills out of range, or > 1 without chunked prefill",
    "vllm.scheduler.value_ranges":
        "a negative --num-lookahead-slots, --num-scheduler-steps below 1, --max-num-active-seqs above max_num_seqs",
    "vllm.cache.nvfp4_kv_with_mla": "an nvfp4 --kv-cache-dtype on an MLA model (VllmConfig, 0.21+)",
    "vllm.parallel.eplb_needs_ep": "--enable-eplb without --enable-expert-parallel (ParallelConfig)",
    "vllm.parallel.eplb_needs_parallelism": "--enable-eplb at TP x (PCP x) DP = 1 (ParallelConfig)",
    "vllm.parallel.tp_divisible_by_dcp": "TP not divisible by --decode-context-parallel-size",
    "vllm.parallel.dcp_with_pcp": "with prefill context parallel, a DCP size other than 1, PCP or TP x PCP",
    "vllm.parallel.dp_local_above_dp": "--data-parallel-size-local above --data-parallel-size",
    "vllm.parallel.elastic_ep": "--enable-elastic-ep without --enable-eplb, or with PP > 1",
    "vllm.parallel.world_above_devices": "TP x PP above the CUDA devices an artifact's CUDA_VISIBLE_DEVICES shows "
                                         "the engine on its node, one node, no executor backend (ParallelConfig)",
    "vllm.model.heads_divisible_by_tp": "attention heads not divisible by TP (ModelConfig)",
    "vllm.model.pp_needs_supports_pp": "PP > 1 on an architecture without SupportsPP (ModelConfig)",
    "vllm.model.ep_needs_experts": "--enable-expert-parallel on a model without experts (ModelConfig)",
    "vllm.model.dcp_gqa": "decode context parallel on a GQA/MQA model: TP above the KV heads, DCP at most "
                          "TP // KV heads, query heads per KV head divisible by DCP (ModelConfig)",
    "vllm.dtype.float16_refused": "--dtype half for a model type that refuses float16 (_check_valid_dtype)",
    "vllm.cache.gpu_memory_utilization": "--gpu-memory-utilization above 1.0 (CacheConfig, before 0.10.1)",
    "vllm.cache.cpu_offload_negative": "a negative --cpu-offload-gb (CacheConfig)",
    "vllm.compilation.capture_sizes_twice": "--cudagraph-capture-sizes / --cuda-graph-sizes / "
                                            "--max-cudagraph-capture-size given with the same key of "
                                            "--compilation-config (EngineArgs.create_engine_config, 0.11.1+)",
    "vllm.scheduler.async_with_pp": "--async-scheduling with PP > 1 (0.10.0-0.14.1)",
    "vllm.scheduler.async_with_uni": "--async-scheduling with --distributed-executor-backend uni (0.10.x)",
    "vllm.model.routed_experts_parallel": "--enable-return-routed-experts with PP > 1 or context parallel "
                                          "(VllmConfig, 0.22-0.30)",
    "vllm.parallel.external_dp_needs_moe": "external-LB data parallel (--data-parallel-external-lb or "
                                           "--data-parallel-rank) at DP > 1 on a model without experts (0.21+)",
    "vllm.parallel.hybrid_and_external_lb": "--data-parallel-hybrid-lb with --data-parallel-external-lb (0.11.1+)",
    "vllm.parallel.fault_tolerance_needs_external_lb": "--enable-fault-tolerance without external-LB data "
                                                       "parallel (0.27+)",
    "vllm.parallel.redundant_experts_need_eplb": "redundant experts without --enable-eplb (ParallelConfig, "
                                                 "0.9.2+), or a negative count (0.9.2-0.11.0)",
    "vllm.mamba.stochastic_rounding": "--enable-mamba-cache-stochastic-rounding with the triton backend off "
                                      "SM 10.x (MambaConfig), or without --mamba-ssm-cache-dtype float16 "
                                      "(VllmConfig, 0.20+)",
    "vllm.kernel.kda_fused_needs_rocm": "--kda-prefill-backend fused on CUDA (ROCm only; "
                                        "EngineArgs.create_engine_config, 0.30+)",
    "vllm.parallel.nnodes_options": "--nnodes > 1 with a --data-parallel-backend other than mp, a world size "
                                    "--nnodes does not divide, a --node-rank outside [0, nnodes), or an external-LB "
                                    "rank --node-rank cannot identify (EngineArgs.create_engine_config, 0.11.1+)",
    "vllm.parallel.external_lb_options": "external-LB data parallel without a rank, or with a "
                                         "--data-parallel-size-local other than 1; --data-parallel-hybrid-lb "
                                         "without --data-parallel-size-local (EngineArgs.create_engine_config)",
    "vllm.parallel.dp_rank_range": "a data-parallel rank outside [0, --data-parallel-size) (ParallelConfig, 0.9.2+)",
    "vllm.parallel.external_lb_needs_dp": "external-LB data parallel (--data-parallel-external-lb or "
                                          "--data-parallel-rank) at DP = 1 (ParallelConfig, 0.9.2+)",
    "vllm.parallel.hc_sp_needs_pp1": "--enable-hc-sp at TP > 1 with PP > 1 (ModelConfig, 0.32+)",
    "vllm.parallel.pcp_limits": "--prefill-context-parallel-size > 1 on 0.12.0, or with DP > 1 (0.26-0.29) "
                                "(ParallelConfig)",
    "vllm.lora.default_mm_loras_text_model": "--default-mm-loras on a model that is not multimodal (0.10+)",
    # -- model
    "vllm.model.quantization_mismatch": "--quantization other than the checkpoint's quantization_config method, "
                                        "where no override of the release claims the checkpoint for it",
    "vllm.model.mm_flags_text_only": "--limit-mm-per-prompt / --mm-processor-kwargs / --disable-mm-preprocessor-"
                                     "cache / --interleave-mm-strings on a text-only model (0.8.0-0.10.0)",
    "vllm.multimodal.processor_flags": "on a multimodal model, --mm-shm-cache-max-object-size-mb without "
                                       "--mm-processor-cache-type shm, or the FP8 encoder scale paths without "
                                       "--mm-encoder-attn-dtype fp8 or both given (MultiModalConfig, 0.11.1+)",
    "vllm.model.external_launcher_needs_seed": "--distributed-executor-backend external_launcher without --seed "
                                               "(0.8.3-0.8.5, and 0.9.0-0.11.0 with VLLM_USE_V1=0)",
    "vllm.cache.kv_cache_dtype_unknown": "a --kv-cache-dtype outside the release's KV_CACHE_DTYPES (CacheConfig, "
                                         "0.33.0, whose parser gives the flag no choices)",
    "vllm.multimodal.renderer_workers_with_cache": "--renderer-num-workers > 1 on a multimodal model with the "
                                                   "processor cache on (0.19-0.26; from 0.27 the pooling runner only)",
    "vllm.multimodal.torch_shm_ipc_parallel": "--mm-tensor-ipc torch_shm on a multimodal model at TP x PP x DP > 1 "
                                              "(0.19+)",
}

#: the rule areas (``engines/areas.py``), each judged in frames of its own, in the order their refusals are said
AREAS: tuple[Area, ...] = (
    rules_speculative,  # speculative decoding
    rules_model,        # the model's length and deprecated quantization
    rules_post,         # compilation options, executor backends, dual-batch overlap
    rules_small,        # LoRA, structured outputs, connectors, observability and the other small configs
    rules_hybrid,       # Mamba / hybrid-model and pooling options
    rules_spec2,        # speculative decoding keys and the named draft's own config
    rules_post2,        # CUDA-graph sizes, profiler, kernel flags, NIXL with context parallel, routed experts
    rules_model3,       # runners and pooling heads, --quantization(-config), multimodal processor options
    rules_spec3,        # Qwen3-Omni DSpark drafts, dspark_draft_topk, the draft max_model_len, EAGLE on V0, the oracle
    rules_post3,        # ReplaySSM, adaptive verification, Model Runner V2 replay / PCP, dual-chunk, V0 by hand
    rules_model4,       # 0.10.0's --runner / --task against the model's class
    rules_post4,        # speculative decoding with watermarking, sampling replay, routed experts, DCP interleave
    rules_image,        # packages the engine's environment holds: OpenTelemetry, FlashInfer, Ray
    rules_spec4,        # speculative decoding against the scheduler's token budget
    rules_model5,       # the final quantization method against the GPU's capability and the served dtype
    rules_post5,        # the AuxOutput connector (returned routed experts) on a runner other than generate
)
#: every rule: the ones judged over the shared namespace (above), then each area's
RULES: Mapping[str, str] = {**_SHARED, **rules_of(AREAS)}

#: the condition of the call that reaches a rule's function, where its own ``if`` chain does not say it
#: (``ModelConfig.verify_with_parallel_config`` calls ``_verify_with_expert_parallelism`` only under
#: ``parallel_config.enable_expert_parallel``)
_CALLED_ONLY_IF: Mapping[str, str] = {"vllm.model.ep_needs_experts": "enable_expert_parallel"}
#: the rules that read the scheduler's defaults, and the destinations of the line that can make them refuse
_SCHEDULER_RULES = frozenset({"vllm.scheduler.batched_below_max_len", "vllm.scheduler.batched_below_seqs"})
_SCHEDULER_GIVEN = ("max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill")
#: the rules judged in a frame of their own: the values of the release's function under names other rules read
#: with another meaning (``world_size`` in ``create_engine_config`` is the world across DP, ``self.
#: data_parallel_rank`` there the flag and in ``ParallelConfig`` ``rank or 0``); see ``engine_args_frame`` and
#: ``parallel_config_frame``
_ENGINE_ARGS_RULES = frozenset({"vllm.parallel.nnodes_options", "vllm.parallel.external_lb_options"})
_PARALLEL_CONFIG_RULES = frozenset({"vllm.parallel.dp_rank_range", "vllm.parallel.external_lb_needs_dp"})
_FRAMED_HERE = _ENGINE_ARGS_RULES | _PARALLEL_CONFIG_RULES
#: ``create_engine_config``'s world size counts PCP from 0.30 (engine/arg_utils.py:2399-2404 in 0.33.0, 2075-2082 in
#: 0.28.0); from 0.31 a given --data-parallel-rank is kept where --nnodes would infer one (:2425-2434 in 0.33.0;
#: 0.20.0's :1753-1754 overwrites it)
PCP_IN_DP_WORLD_SINCE = Version("0.30.0")
GIVEN_DP_RANK_KEPT_SINCE = Version("0.31.0")
#: the rule that reads the devices the engine sees: judged only where the deployment says them (``Layout.devices``)
_DEVICES_RULE = "vllm.parallel.world_above_devices"


@cache
def book() -> RuleBook:
    return RuleBook(load_ledger("vllm"), DISPLAY, RULES)


@cache
def _functions() -> Mapping[str, str]:
    """Each ledger entry's id -> the function it is raised in (``rules_fields.beside``)."""
    return {e.id: e.function for e in book().ledger.entries}


# -- the scheduler's defaults, by release -------------------------------------------------------------------

#: ``EngineArgs._set_default_args``: from 0.11.1 a ``--no-enable-chunked-prefill`` is kept (before, V1
#: "always uses chunked prefills" for generative models: ``self.enable_chunked_prefill = True``) and the
#: defaults are clamped (``max_num_batched_tokens = min(max_num_seqs * max_model_len, ...)``, and ``max(
#: max_model_len, ...)`` with chunked prefill off; ``max_num_seqs = min(max_num_seqs, max_num_batched_tokens)``)
CHUNKED_PREFILL_KEPT_SINCE = Version("0.11.1")
#: 0.8.0-0.8.4 pick the large defaults by name ("h100" or "h200" in the device name); 0.8.5 by memory
#: (>= 70 GiB); 0.9.0 leaves A100s out (PR #17885); 0.28 adds a >= 160 GiB tier; 0.33 leaves GB10 out
LARGE_BY_MEMORY_SINCE = Version("0.8.5")
A100_EXCLUDED_SINCE = Version("0.9.0")
HUGE_TIER_SINCE = Version("0.28.0")
GB10_EXCLUDED_SINCE = Version("0.33.0")
#: 0.8.0-0.8.3: ``default_max_num_seqs = 1024`` on every GPU; from 0.8.4 256 below the large tier
SMALL_SEQS_SINCE = Version("0.8.4")
#: ``--performance-mode throughput`` doubles both defaults (0.17+)
PERFORMANCE_MODE_SINCE = Version("0.17.0")
#: ``parallel_config.use_batched_dp_moe`` (DP > 1, EP, a DeepEP low-latency / NIXL EP all2all backend) takes
#: ``DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP`` (0.20+): not resolved here
BATCHED_DP_MOE_SINCE = Version("0.20.0")
_BATCHED_DP_BACKENDS = ("deepep_low_latency", "nixl_ep")
#: multimodal prefix LMs raise the batch to their largest item (``_get_min_mm_batched_tokens``, 0.28+)
MM_PREFIX_LM_SINCE = Version("0.28.0")


@dataclass(frozen=True)
class Scheduler:
    """The scheduler's three values as the release resolves them (None: not resolved, and why)."""

    enable_chunked_prefill: bool | None
    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    why: str = ""


def _tier(version: Version, layout: Layout) -> tuple[int, int] | None:
    """``(max_num_batched_tokens, max_num_seqs)`` for ``vllm serve`` (the OpenAI API server's usage context)
    on the layout's GPU; None when the GPU's memory (or, before 0.8.5, its name) is unknown."""
    name = layout.gpu_name.lower()
    small_seqs = 256 if version >= SMALL_SEQS_SINCE else 1024
    if version < LARGE_BY_MEMORY_SINCE:
        if not name:
            return None
        return (8192, 1024) if ("h100" in name or "h200" in name) else (2048, small_seqs)
    if layout.gpu_total_mib is None:
        return None
    total = layout.gpu_total_mib
    if version >= HUGE_TIER_SINCE and total >= 160 * GIB_MIB:
        return 16384, 1024
    large = total >= 70 * GIB_MIB
    if version >= A100_EXCLUDED_SINCE and "a100" in name:
        large = False
    if version >= GB10_EXCLUDED_SINCE and layout.compute_capability == (12, 1):
        large = False
    return (8192, 1024) if large else (2048, 256)


def _value(args: ResolvedArgs, dest: str, default: object) -> object:
    """The line's value, else the release's default (also where the parser's default is None)."""
    value = args.get(dest)
    return default if value is None else value


def _int(args: ResolvedArgs, dest: str) -> int | None:
    value = args.get(dest) if args.is_set(dest) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def scheduler(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version, *, max_model_len: int | None,
              v0: bool, multimodal: bool) -> Scheduler:
    """The release's ``enable_chunked_prefill``, ``max_num_batched_tokens`` and ``max_num_seqs`` for this line,
    model and GPU (``vllm serve``'s usage context)."""
    batched = _int(args, "max_num_batched_tokens")
    seqs = _int(args, "max_num_seqs")
    chunked_given = args.get("enable_chunked_prefill") if args.is_set("enable_chunked_prefill") else None
    chunked_arg = chunked_given if isinstance(chunked_given, bool) else None
    if v0:
        # 0.8.0-0.10.1.1 below SM 8.0: _set_default_args_v0, then SchedulerConfig.__post_init__ (config.py)
        chunked = chunked_arg if chunked_arg is not None else defaults.v0_chunked_prefill(
            version, max_model_len=max_model_len, sliding_window=model.sliding_layers > 0,
            multimodal=multimodal, mla=model.is_mla)
        if batched is None:
            batched = defaults.v0_batched_tokens(version, max_model_len=max_model_len, chunked=chunked,
                                                 multimodal=multimodal)
        return Scheduler(chunked, batched, seqs if seqs is not None else 256)
    if version < CHUNKED_PREFILL_KEPT_SINCE:
        chunked = True  # "V1 always uses chunked prefills" (generative models)
    else:
        chunked = chunked_arg if chunked_arg is not None else True  # is_chunked_prefill_supported: generative
    if batched is not None and seqs is not None:
        return Scheduler(chunked, batched, seqs)
    tier = _tier(version, layout)
    if tier is None:
        return Scheduler(chunked, batched, seqs, "the GPU's memory is unknown, so vLLM's default batch is not")
    if version >= BATCHED_DP_MOE_SINCE and batched is None and layout.data_parallel_size > 1 and bool(
            args.get("enable_expert_parallel")) and args.get("all2all_backend") in _BATCHED_DP_BACKENDS:
        return Scheduler(chunked, None, seqs, "the batched-DP MoE default batch is not resolved")
    if version >= MM_PREFIX_LM_SINCE and batched is None and multimodal:
        return Scheduler(chunked, None, seqs, "a multimodal model's default batch (its largest item) is not resolved")
    d_batched, d_seqs = tier
    if version >= PERFORMANCE_MODE_SINCE and args.get("performance_mode") == "throughput":
        d_batched, d_seqs = d_batched * 2, d_seqs * 2
    if version < CHUNKED_PREFILL_KEPT_SINCE:
        return Scheduler(chunked, batched if batched is not None else d_batched, seqs if seqs is not None else d_seqs)
    out_seqs = seqs if seqs is not None else d_seqs
    if batched is None:
        if max_model_len is None:
            return Scheduler(chunked, None, seqs, "max_model_len is unknown")
        out_batched = d_batched if chunked else max(max_model_len, d_batched)
        out_batched = min(out_seqs * max_model_len, out_batched)
    else:
        out_batched = batched
    if seqs is None:
        out_seqs = min(out_seqs, out_batched)
    return Scheduler(chunked, out_batched, out_seqs)


# -- the namespace ----------------------------------------------------------------------------------------

def _arch_flags(model: ModelSpec, version: Version) -> dict[str, object]:
    """The interface flags of the model's class (the first of its architectures the release's registry
    reads), from the facts; {} when no extracted release at or below ``version`` knows the class."""
    cls = model_class(model, version)
    if cls is None:
        return {}
    return {**cls.flags, "is_pp_supported_model": cls.flag("supports_pp"), "architecture": cls.architecture}


def namespace(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version, *,
              env: Mapping[str, str] | None = None) -> tuple[dict[str, object], list[str]]:
    """The values the rules' conditions and messages read, and what could not be resolved (in words)."""
    env = env or {}
    notes: list[str] = []
    tp, pp, dp = layout.tensor_parallel_size, layout.pipeline_parallel_size, layout.data_parallel_size
    cc = layout.compute_capability
    v0 = defaults.runs_v0(version, compute_capability=cc[0] + cc[1] / 10 if cc else None) or (
        env.get("VLLM_USE_V1") == "0" and version < Version("0.11"))
    max_len = args.get("max_model_len") if args.is_set("max_model_len") else None
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len <= 0:
        max_len = rules_model.default_max_model_len(args, model, version, env) or model.max_position_embeddings
    multimodal = model.is_multimodal
    flags = _arch_flags(model, version)
    if flags:
        multimodal = bool(flags.get("supports_multimodal")) or multimodal
    sched = scheduler(args, model, layout, version, max_model_len=max_len, v0=v0, multimodal=multimodal)
    if sched.why:
        notes.append(f"the scheduler's defaults: {sched.why}")
    dcp = _value(args, "decode_context_parallel_size", 1)
    pcp = _value(args, "prefill_context_parallel_size", 1)
    kv = model.num_key_value_heads
    ns: dict[str, object] = {
        # the layout
        "tensor_parallel_size": tp, "pipeline_parallel_size": pp, "data_parallel_size": dp, "tp": tp,
        "world_size": tp * pp,
        "decode_context_parallel_size": dcp, "dcp": dcp, "prefill_context_parallel_size": pcp, "pcp": pcp,
        "data_parallel_size_local": args.get("data_parallel_size_local") if args.is_set(
            "data_parallel_size_local") else dp,
        # flags the rules read (the release's defaults where the line does not set them)
        "enable_expert_parallel": bool(args.get("enable_expert_parallel", False)),
        "enable_eplb": bool(args.get("enable_eplb", False)),
        "enable_elastic_ep": bool(args.get("enable_elastic_ep", False)),
        "gpu_memory_utilization": args.get("gpu_memory_utilization", defaults.gpu_memory_utilization(version)),
        "cpu_offload_gb": args.get("cpu_offload_gb", 0),
        "max_num_partial_prefills": args.get("max_num_partial_prefills", 1),
        "max_long_partial_prefills": args.get("max_long_partial_prefills", 1),
        "num_lookahead_slots": args.get("num_lookahead_slots", 0),
        "num_scheduler_steps": args.get("num_scheduler_steps", 1),
        "max_num_active_seqs": args.get("max_num_active_seqs"),
        "cache_dtype": str(args.get("kv_cache_dtype", "auto") or "auto"),
        # the platform: CUDA
        "is_cuda": True, "is_cuda_alike": True, "is_rocm": False, "is_cpu": False, "is_tpu": False,
        "is_xpu": False, "is_hpu": False, "is_neuron": False,
        # the model's config
        "total_num_attention_heads": model.num_attention_heads, "total_num_kv_heads": kv,
        "use_mla": model.is_mla and env.get("VLLM_MLA_DISABLE") != "1",
        "is_moe": model.is_moe, "num_experts": model.num_experts or 0,
        "model_type": model.hf_model_type,
    }
    ns.update(_launch_mode_values(args))
    ns.update(_compilation_values(args))
    if args.is_set("cuda_graph_sizes") and args.is_set("cudagraph_capture_sizes") and \
            ns["compilation_config.cudagraph_capture_sizes"] is None:
        # 0.11.1-0.12.0: --cuda-graph-sizes fills compilation_config's sizes, then --cudagraph-capture-sizes meets them
        notes.append("--cuda-graph-sizes with --cudagraph-capture-sizes: the second against the first is not judged")
    if cc is not None:
        # MambaConfig.__post_init__ (config/mamba.py:65-67 in 0.20.0): ``is_device_capability_family(100)``, SM 10.x
        ns["is_device_capability_family"] = cc[0] == 10
    if kv:
        ns["max_dcp_size"] = tp // kv
        ns["num_q_per_kv"] = model.num_attention_heads // kv
    if max_len is not None:
        ns["max_model_len"] = max_len
        # SchedulerConfig.__post_init__: with partial prefills a threshold of 0 becomes 4 % of max_model_len
        threshold = _value(args, "long_prefill_token_threshold", 0)
        if threshold == 0 and isinstance(ns["max_num_partial_prefills"], int) and ns["max_num_partial_prefills"] > 1:
            threshold = int(max_len * 0.04)
        ns["long_prefill_token_threshold"] = threshold
    if sched.enable_chunked_prefill is not None:
        ns["enable_chunked_prefill"] = ns["chunked_prefill_enabled"] = sched.enable_chunked_prefill
    if sched.max_num_batched_tokens is not None:
        ns["max_num_batched_tokens"] = sched.max_num_batched_tokens
    if sched.max_num_seqs is not None:
        ns["max_num_seqs"] = sched.max_num_seqs
    if layout.devices is not None:
        # ParallelConfig.__post_init__ (config/parallel.py:1066-1077 in 0.33.0): current_platform.device_count()
        # (cuda_device_count_stateless() before 0.20) counts the devices CUDA_VISIBLE_DEVICES shows the process
        ns.update({"device_count": layout.devices, "cuda_device_count_stateless": layout.devices,
                   "gpu_count": layout.devices, "world_size_across_dp": tp * pp * dp,
                   "nnodes": args.get("nnodes", 1) or 1,
                   "VLLM_XLA_USE_SPMD": False})
    if flags and args.get("model_impl", "auto") != "transformers":
        # an architecture no extracted release at or below knows: SupportsPP not judged (the entry says so)
        ns["is_pp_supported_model"] = flags["is_pp_supported_model"]
    ns.update(rules_small.values(args, model, layout, version, env))
    ns.update(rules_model.values(args, model, layout, version, env, flags))
    ns.update(_dtype_values(args, model, version))
    return ns, notes


def _launch_mode_values(args: ResolvedArgs) -> dict[str, object]:
    """The flags of the launch modes the rules read, as ``EngineArgs`` holds them: async scheduling (an explicit
    ``--async-scheduling``: from 0.14 the default ``None`` is resolved by ``VllmConfig.__post_init__``, which
    turns it off where it is not supported and refuses nothing), the data-parallel load-balancing modes and
    ``create_engine_config``'s local ``data_parallel_external_lb = self.data_parallel_external_lb or
    self.data_parallel_rank is not None`` (engine/arg_utils.py:2444-2446 in 0.33.0, 1793-1795 in 0.21.0),
    redundant experts (``--num-redundant-experts``, forwarded over ``--eplb-config``'s, engine/arg_utils.py:
    1303-1304 in 0.10.2), routed experts, the Mamba cache's stochastic rounding and the KDA prefill backend
    (engine/arg_utils.py:2867-2878 in 0.33.0)."""
    external_flag = bool(args.get("data_parallel_external_lb"))
    eplb = args.get("eplb_config")
    redundant = args.get("num_redundant_experts")
    if redundant is None and isinstance(eplb, Mapping):
        redundant = eplb.get("num_redundant_experts")
    backend = args.get("mamba_backend")
    return {
        "async_scheduling": args.get("async_scheduling") is True,
        "distributed_executor_backend": args.get("distributed_executor_backend"),
        "self.data_parallel_external_lb": external_flag,
        "data_parallel_external_lb": external_flag or args.get("data_parallel_rank") is not None,
        "data_parallel_hybrid_lb": bool(args.get("data_parallel_hybrid_lb")),
        "enable_fault_tolerance": bool(args.get("enable_fault_tolerance")),
        "num_redundant_experts": redundant if redundant is not None else 0,
        "model_config": True,  # ``self.model_config is not None``: the model is read
        "enable_return_routed_experts": bool(args.get("enable_return_routed_experts")),
        "enable_stochastic_rounding": bool(args.get("enable_mamba_cache_stochastic_rounding")),
        "mamba_ssm_cache_dtype": str(args.get("mamba_ssm_cache_dtype") or "auto"),
        "self.backend": str(backend or "triton").upper(), "MambaBackendEnum.TRITON": "TRITON",
        "kda_prefill_backend": args.get("kda_prefill_backend"),
        "enable_hc_sp": bool(args.get("enable_hc_sp")),
    }


@dataclass(frozen=True)
class DataParallelLaunch:
    """What ``EngineArgs.create_engine_config`` makes of the data-parallel launch flags (engine/arg_utils.py:
    2380-2530 in 0.33.0, 1724-1820 in 0.20.0, 1070-1110 in 0.10.0): the flags as given, the world it
    divides by ``--nnodes``, the rank ``--node-rank`` infers and the values it hands ``ParallelConfig``."""

    nnodes: int
    node_rank: int
    world_size: int                  # DP x PP x TP (x PCP from 0.30), the local of the --nnodes checks
    rank: int | None                 # --data-parallel-rank, or the one --nnodes / --node-rank infer
    size_local: int | None           # --data-parallel-size-local, or the one --nnodes infers (internal LB)
    external_lb: bool                # the local: --data-parallel-external-lb or a rank given
    parallel_rank: int               # ParallelConfig's data_parallel_rank
    parallel_size_local: int         # ParallelConfig's data_parallel_size_local
    parallel_external_lb: bool       # ParallelConfig's data_parallel_external_lb


def _opt_int(args: ResolvedArgs, dest: str) -> int | None:
    value = args.get(dest)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def data_parallel_launch(args: ResolvedArgs, layout: Layout, version: Version) -> DataParallelLaunch:
    """The release's data-parallel launch values for this line (see ``DataParallelLaunch``)."""
    tp, pp, dp = layout.tensor_parallel_size, layout.pipeline_parallel_size, layout.data_parallel_size
    pcp = _opt_int(args, "prefill_context_parallel_size") or 1
    nnodes = _opt_int(args, "nnodes") or 1
    node_rank = _opt_int(args, "node_rank") or 0
    within_dp = pp * tp * (pcp if version >= PCP_IN_DP_WORLD_SINCE else 1)
    world = dp * within_dp
    rank = _opt_int(args, "data_parallel_rank")
    size_local = _opt_int(args, "data_parallel_size_local")
    external_flag = bool(args.get("data_parallel_external_lb"))
    inferred = 0
    if nnodes > 1 and world % nnodes == 0 and 0 <= node_rank < nnodes:
        inferred = node_rank * (world // nnodes) // within_dp
        if dp > 1 and external_flag:
            if version < GIVEN_DP_RANK_KEPT_SINCE or (rank is None and nnodes % dp == 0):
                rank = inferred
        elif size_local is None:
            size_local = max(world // nnodes // within_dp, 1)
    external = external_flag or rank is not None
    if external:
        parallel_rank, parallel_local = rank or 0, 1
    elif size_local is not None:
        start = _opt_int(args, "data_parallel_start_rank")
        parallel_rank, parallel_local = (start if start is not None else inferred), size_local
        # the hybrid LB with one local rank switches to the external LB (engine/arg_utils.py:2493-2501 in 0.33.0)
        external = bool(args.get("data_parallel_hybrid_lb")) and size_local == 1
    else:
        parallel_rank, parallel_local = rank or 0, dp
    return DataParallelLaunch(nnodes, node_rank, world, rank, size_local, external_flag or rank is not None,
                              parallel_rank, parallel_local, external)


def engine_args_frame(launch: DataParallelLaunch, args: ResolvedArgs) -> dict[str, object]:
    """``create_engine_config``'s names: ``self.<flag>`` as ``EngineArgs`` holds it, its local ``world_size``."""
    return {
        "self.nnodes": launch.nnodes, "self.node_rank": launch.node_rank, "world_size": launch.world_size,
        "self.data_parallel_backend": args.get("data_parallel_backend") or "mp",
        "self.data_parallel_rank": launch.rank, "self.data_parallel_size_local": launch.size_local,
        "data_parallel_external_lb": launch.external_lb,
    }


def parallel_config_frame(launch: DataParallelLaunch) -> dict[str, object]:
    """``ParallelConfig``'s fields as ``create_engine_config`` fills them (engine/arg_utils.py:2571-2576 in
    0.33.0: ``data_parallel_rank=self.data_parallel_rank or 0``, the local external-LB flag and local size)."""
    return {
        "self.data_parallel_rank": launch.parallel_rank, "self.data_parallel_size_local": launch.parallel_size_local,
        "self.data_parallel_external_lb": launch.parallel_external_lb,
    }


def _compilation_values(args: ResolvedArgs) -> dict[str, object]:
    """The CUDA-graph sizes given twice (``EngineArgs.create_engine_config``, engine/arg_utils.py:2834-2849 in
    0.33.0): the top-level flags, and the same keys of ``--compilation-config`` (JSON or dotted ``-cc.<key>``)."""
    cc = args.get("compilation_config")
    given = cc if isinstance(cc, Mapping) else {}
    return {
        "cuda_graph_sizes": args.get("cuda_graph_sizes") if args.is_set("cuda_graph_sizes") else None,
        "cudagraph_capture_sizes": args.get("cudagraph_capture_sizes") if args.is_set(
            "cudagraph_capture_sizes") else None,
        "max_cudagraph_capture_size": args.get("max_cudagraph_capture_size") if args.is_set(
            "max_cudagraph_capture_size") else None,
        "compilation_config.cudagraph_capture_sizes": given.get("cudagraph_capture_sizes"),
        "compilation_config.max_cudagraph_capture_size": given.get("max_cudagraph_capture_size"),
    }


def _dtype_values(args: ResolvedArgs, model: ModelSpec, version: Version) -> dict[str, object]:
    """``_check_valid_dtype(model_type, torch_dtype)``: the explicit ``--dtype`` (``auto`` never resolves to a
    dtype the model type refuses) and the release's ``_FLOAT16_NOT_SUPPORTED_MODELS``."""
    facts = release_facts("vllm", version, group="dtype")
    if facts is None:
        return {}
    table = facts.data["dtype"].get("float16_not_supported") or {}
    asked = str(args.get("dtype", "auto") or "auto").lower()
    names = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32",
             "float32": "float32"}
    # ``auto`` never resolves to float16 for a model type of the table (``_resolve_auto_dtype`` leaves it out)
    served = names.get(asked, "auto" if asked == "auto" else None)
    out: dict[str, object] = {"_FLOAT16_NOT_SUPPORTED_MODELS": table, "torch.float16": "float16",
                              "torch.bfloat16": "bfloat16", "torch.float32": "float32"}
    if served is not None:
        out["dtype"] = served
        if model.hf_model_type in table:
            out["reason"] = table[model.hf_model_type]
    return out


# -- the entry points -------------------------------------------------------------------------------------

def config_check(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version, *,
                 env: Mapping[str, str] | None = None, serving: Serving | None = None,
                 packages: Mapping[str, str | None] | None = None) -> Judged:
    """Every config-time refusal of ``RULES`` that ``version`` (the nearest listed release at or below it)
    makes for this command line, model and layout, and the entries it could not judge. vLLM stops at the
    first refusal it meets; the others follow once it is fixed. ``serving`` / ``packages``: the engine's
    environment and the nodes' probed packages (``engines/packages.py``)."""
    values, notes = namespace(args, model, layout, version, env=env)
    active = [r for r in RULES if (r not in _CALLED_ONLY_IF or bool(values.get(_CALLED_ONLY_IF[r])))
              and (r != _DEVICES_RULE or layout.devices is not None)]
    if not any(args.is_set(d) for d in _SCHEDULER_GIVEN):
        # the release's own defaults never refuse each other (its clamps and tiers keep the batch at least
        # max_num_seqs, and at least max_model_len without chunked prefill): nothing to judge, nothing to say
        active = [r for r in active if r not in _SCHEDULER_RULES]
        notes = [n for n in notes if not n.startswith("the scheduler's defaults")]
    judged = book().judge(version, values, rules=[r for r in active if r in _SHARED and r not in _FRAMED_HERE])
    launch = data_parallel_launch(args, layout, version)
    in_engine_args = book().judge(version, {**values, **engine_args_frame(launch, args)},
                                  rules=[r for r in active if r in _ENGINE_ARGS_RULES])
    in_parallel = book().judge(version, {**values, **parallel_config_frame(launch)},
                               rules=[r for r in active if r in _PARALLEL_CONFIG_RULES])
    ask = Ask(book(), version, book().ledger.listed(version) or version, values, tuple(active), args, model, layout,
              env or {}, serving or Serving(), packages or {})
    return rules_fields.beside(  # -- fields: pydantic's field constraints (0.11+), before the classes' own raises
        combine((judged, in_engine_args, in_parallel, *judge_areas(AREAS, ask)), notes),
        rules_fields.check(args, version, values), _functions())


def config_refusals(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version, *,
                    env: Mapping[str, str] | None = None) -> tuple[Refusal, ...]:
    """The refusals of ``config_check`` (see there)."""
    return config_check(args, model, layout, version, env=env).refusals
