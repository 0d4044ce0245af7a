"""The memory model: KV bytes per token per rank, weights per rank, PP splits, and the KV pool.

Pure functions over a ``ModelSpec``, a layout and GPU memory figures, each mirroring the engine code
that decides the number (cited in the docstrings; versions per ``engines.py``). Two engines, two
budgets:

* **vLLM** (``gpu_worker.determine_available_memory``): a fraction of each GPU's *total* memory,
  ``total x gpu_memory_utilization``, minus what the profile run measured (weights, activation peak,
  non-torch allocations, and from 0.20 a CUDA-graph estimate). Then every rank gets the smallest
  rank's block count.
* **SGLang** (``kv_cache_configurator._profile_available_bytes``): the *free* memory measured before
  the weights load, MIN over the TP x PP world (``pre``); after loading, whatever is free minus the
  slack ``pre x (1 - mem_fraction_static)`` becomes the pool.

Where an engine's figure depends on things we cannot see before launch (the activation peak, the
CUDA context) we use a documented estimate and say so; the ``startup`` check measures the truth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines import ENGINE_NAMES, ENGINES, deployment_knobs, get_engine
from pytest_gpulayout.engines.knobs import LaunchKnobs
from pytest_gpulayout.engines.versions import parse_version, resolve_version
from pytest_gpulayout.engines.vllm import FREE_MEMORY_CHECK_SINCE, KV_CACHE_MEMORY_BYTES_SINCE
from pytest_gpulayout.engines.vllm import block_size as vllm_block_size
from pytest_gpulayout.engines.vllm import scheduler_defaults as vllm_scheduler_defaults
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.machine.facts import GIB, MIB, Gpu, Machine
from pytest_gpulayout.memory.vllm_kv import HYBRID_SINCE, VllmKvCache, vllm_kv_cache
from pytest_gpulayout.memory.vllm_kv import describe as describe_vllm_cache
from pytest_gpulayout.model import weights as W
from pytest_gpulayout.model.spec import NO_KV, SLIDING, ModelSpec
from pytest_gpulayout.placement import place

#: Bytes per KV element for explicit ``kv_cache_dtype`` values (vLLM ``STR_DTYPE_TO_TORCH_DTYPE``
#: maps every fp8 flavour to uint8; ``mxfp8`` adds one scale byte per 32, ``nvfp4`` an fp8 scale per 16).
KV_DTYPE_BYTES: dict[str, float] = {
    "float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "bf16": 2, "float32": 4, "fp32": 4,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "int8": 1,
    "mxfp8": 1 + 1 / 32, "nvfp4": 0.5 + 1 / 16,
}
#: vLLM's DeepSeek-specific MLA cache formats: bytes per token per layer (``state_content_bytes``).
MLA_KV_FORMAT_BYTES = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}

#: vLLM's Hopper mxfp4 MoE kernels re-layout the expert weights: gpt-oss-120b reported
#: "Model loading took 65.97 GiB" (0.10.1) and 64.38 GiB (0.14.1) against 60.8 GiB on disk, i.e.
#: ~7 % more for the experts (which are 93 % of the checkpoint).
VLLM_MXFP4_EXPERT_LAYOUT = 1.07

#: vLLM: non-torch memory the profile run sees (cuBLAS workspace; NCCL / custom all-reduce buffers
#: when the instance spans GPUs). Startup logs show 0.1-0.6 GiB.
VLLM_NON_TORCH_GIB = 0.15
VLLM_NON_TORCH_MULTI_GPU_GIB = 0.25
#: vLLM >= 0.20 subtracts an estimate of the CUDA-graph pool before sizing the KV cache
#: (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1``). Logs: "0.58 GiB (estimated)"; 0.88 ~ 0.8592 on 24 GiB.
VLLM_CUDAGRAPH_GIB = 0.5
#: vLLM's sampler warm-up holds ``max_num_seqs x vocab`` fp32 logits and probabilities.
SAMPLER_BYTES_PER_LOGIT = 8

#: SGLang measures ``pre`` (``get_available_gpu_memory``, MIN over the TP x PP world) after its CUDA
#: context and the communicators exist (``model_runner.py`` / ``distributed/bootstrap.py``), so an idle
#: GPU's NVML free memory is this much higher than ``pre``. Counted once: the machine's free figure
#: already excludes the driver's reservation. Measured on sglang/013 (QwQ-32B TP4 on 4 x L4,
#: 0.4.3.post4): ``pre`` = 6.09 + 15.54 = 21.63 GiB against 22.00 GiB free on an idle L4: 0.37 GiB
#: for context and NCCL together (0.75 GiB was assumed before, which under-predicted that pool 12 %).
SGLANG_CONTEXT_GIB = 0.30
SGLANG_COMMUNICATOR_GIB = 0.07
#: What SGLang holds after "Load weight end" beyond the weights (rope caches, sampling buffers):
#: 0.06 GiB for Qwen3-14B at TP=1, 0.29 GiB for QwQ-32B at TP=4 in public startup logs.
SGLANG_LOAD_OVERHEAD_GIB = 0.1
SGLANG_LOAD_OVERHEAD_TP_GIB = 0.2
#: SGLang's hybrid SWA pool (gpt-oss, Llama 4): SWA layers get ``swa_full_tokens_ratio`` (0.8)
#: tokens per full-attention token (``model_runner.set_num_token_hybrid``).
SGLANG_SWA_FULL_TOKENS_RATIO = 0.8
SGLANG_HYBRID_SWA_ARCHS = frozenset({"GptOssForCausalLM", "Llama4ForConditionalGeneration"})


class MemoryUnknown(ValueError):
    """The pool cannot be predicted because a GPU's memory is unknown (e.g. a machine read from
    ``nvidia-smi topo -m`` text). The message says which GPU and which figure; checks skip with it."""


def _engine(engine: str) -> str:
    e = engine.lower()
    if e not in ENGINES:
        raise InputError(f"unknown engine {engine!r} (expected one of: {', '.join(ENGINE_NAMES)})",
                         key="engine")
    return e


def _version(v: Version | str | None, engine: str) -> Version:
    if v is None:
        return resolve_version(engine, None)[0]
    return v if isinstance(v, Version) else parse_version(v)


# ---------------------------------------------------------------------------------------------
# Pipeline split
# ---------------------------------------------------------------------------------------------

def _parse_partition(partition: str | Sequence[int], num_layers: int, pp: int, env: str) -> tuple[int, ...]:
    if isinstance(partition, str):
        try:
            parts = tuple(int(x) for x in partition.split(","))
        except ValueError:
            raise InputError(f"invalid partition string {partition!r}: a comma list of layer counts per "
                             f"stage, e.g. 16,16", key=env) from None
    else:
        parts = tuple(int(x) for x in partition)
    if len(parts) != pp:
        raise InputError(f"{len(parts)} stages given but pipeline_parallel_size is {pp}", key=env)
    if sum(parts) != num_layers:
        raise InputError(f"stages sum to {sum(parts)} layers but the model has {num_layers}", key=env)
    if any(p < 0 for p in parts):
        raise InputError(f"negative layer count in {partition!r}", key=env)
    return parts


def pp_partition(num_layers: int, pp: int, engine: str, *, partition: str | Sequence[int] | None = None,
                 version: Version | str | None = None) -> tuple[int, ...]:
    """Layers per pipeline stage, as the engine splits them.

    * vLLM (``vllm/distributed/utils.py get_pp_indices``): ``num_layers // pp`` each; the remainder
      goes one layer each to ``partitions[-2]``, ``partitions[-3]``, ... (never the last stage, which
      also holds the lm_head). vLLM before 0.7 gave the whole remainder to the last stage.
    * SGLang (``python/sglang/srt/distributed/utils.py get_pp_indices``): the **last**
      ``num_layers % pp`` stages get one extra layer.

    ``partition`` is the user's override (``VLLM_PP_LAYER_PARTITION`` / ``SGLANG_PP_LAYER_PARTITION``,
    a comma list or a sequence); the caller passes it explicitly, this function never reads the
    environment. A wrong count or sum is an ``InputError`` naming the variable.
    """
    e = _engine(engine)
    if pp < 1:
        raise ValueError(f"pipeline_parallel_size must be >= 1, got {pp}")
    if partition is not None:
        env = "VLLM_PP_LAYER_PARTITION" if e == "vllm" else "SGLANG_PP_LAYER_PARTITION"
        return _parse_partition(partition, num_layers, pp, env)
    base, rem = divmod(num_layers, pp)
    parts = [base] * pp
    if e == "vllm":
        if version is not None and _version(version, e) < Version("0.7"):
            parts[-1] += rem
        else:
            for i in range(2, rem + 2):
                parts[-i] += 1
    else:
        for i in range(pp - rem, pp):
            parts[i] += 1
    return tuple(parts)


def stage_ranges(num_layers: int, pp: int, engine: str, *, partition: str | Sequence[int] | None = None,
                 version: Version | str | None = None) -> tuple[range, ...]:
    """The layer indices each stage holds (``pp_partition`` laid end to end)."""
    out, start = [], 0
    for n in pp_partition(num_layers, pp, engine, partition=partition, version=version):
        out.append(range(start, start + n))
        start += n
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# KV bytes
# ---------------------------------------------------------------------------------------------

def kv_heads_per_rank(model: ModelSpec, tp: int) -> int:
    """KV heads one rank stores: ``max(1, kv_heads // tp)`` (vLLM ``ModelConfig.get_num_kv_heads``,
    SGLang ``ModelConfig.get_num_kv_heads``): below one head per rank the heads are replicated.
    MLA caches one latent per token: 1."""
    if model.is_mla:
        return 1
    return max(1, model.num_key_value_heads // tp)


def kv_element_bytes(model: ModelSpec, kv_cache_dtype: str = "auto") -> float:
    """Bytes per cached K/V element.

    ``auto`` is the model's activation dtype: 2 bytes for bf16/fp16 checkpoints, and also for fp32
    ones (both engines run those in bf16/fp16) and for fp8-*weight* checkpoints (activations stay
    16-bit). Only a checkpoint that declares a KV cache scheme (compressed-tensors
    ``kv_cache_scheme``, ModelOpt ``kv_cache_quant_algo: FP8``) makes ``auto`` 1 byte.
    """
    d = (kv_cache_dtype or "auto").lower()
    if d == "auto":
        q = model.quantization
        if q is not None and q.kv_cache_dtype:
            return KV_DTYPE_BYTES.get(q.kv_cache_dtype, 1)
        return float(min(model.dtype_bytes, 2))
    if d in KV_DTYPE_BYTES:
        return KV_DTYPE_BYTES[d]
    if d in MLA_KV_FORMAT_BYTES:
        if not model.is_mla:
            raise InputError(f"{d} is a cache format for MLA models (DeepSeek); {model.name} has no MLA",
                             key="kv_cache_dtype")
        return 1.0
    raise InputError(f"unknown kv_cache_dtype {kv_cache_dtype!r} (auto, bfloat16, float16, fp8, fp8_e4m3, "
                     f"fp8_e5m2, ...)", key="kv_cache_dtype")


def kv_layer_bytes_per_token(model: ModelSpec, *, tp: int, kv_cache_dtype: str = "auto") -> int:
    """Bytes one attention layer caches per token on one rank.

    * MHA/GQA (vLLM ``AttentionSpec.page_size_bytes`` / block; SGLang ``_compute_cell_size``):
      ``kv_heads_per_rank x (head_dim + v_head_dim) x bytes``.
    * MLA (vLLM ``MLAAttention.get_kv_cache_spec``; SGLang ``calculate_mla_kv_cache_dim``):
      ``(kv_lora_rank + qk_rope_head_dim) x bytes`` on every rank, not divided by TP and with no
      separate V. vLLM's ``fp8_ds_mla`` is 656 B and ``nvfp4_ds_mla`` 352 B per layer.
    """
    d = (kv_cache_dtype or "auto").lower()
    if model.is_mla:
        if d in MLA_KV_FORMAT_BYTES:
            return MLA_KV_FORMAT_BYTES[d]
        return math.ceil(((model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0))
                         * kv_element_bytes(model, d))
    return math.ceil(kv_heads_per_rank(model, tp) * (model.head_dim + model.head_dim_v)
                     * kv_element_bytes(model, d))


def kv_bytes_per_token_by_stage(model: ModelSpec, *, engine: str, tp: int, pp: int = 1,
                                kv_cache_dtype: str = "auto",
                                pp_layer_partition: str | Sequence[int] | None = None,
                                version: Version | str | None = None) -> tuple[int, ...]:
    """Per PP stage: KV bytes per token on each rank of that stage (its KV layers x per-layer bytes).

    Layers without a per-token cache (``NO_KV``: linear attention, Mamba) count 0. Sliding-window
    layers count as full: that is SGLang's cell size (it disables its hybrid-SWA pool for Gemma),
    and the figure vLLM's hybrid allocator reports tokens by (``num_blocks // groups x block``);
    what a *request* needs in those layers is less, which ``PoolPrediction.max_concurrency`` models.
    """
    per_layer = kv_layer_bytes_per_token(model, tp=tp, kv_cache_dtype=kv_cache_dtype)
    kinds = model.layer_kinds
    return tuple(per_layer * sum(1 for i in r if kinds[i] != NO_KV)
                 for r in stage_ranges(model.num_hidden_layers, pp, engine, partition=pp_layer_partition,
                                       version=version))


def kv_bytes_per_token_per_rank(model: ModelSpec, *, engine: str, tp: int, pp: int = 1,
                                kv_cache_dtype: str = "auto",
                                pp_layer_partition: str | Sequence[int] | None = None) -> int:
    """KV bytes per token on the most loaded rank (the PP stage with the most KV layers).

    Qwen3-8B, TP=2, bf16: 36 layers x 4 heads x 256 x 2 B = 73,728. DeepSeek-V3 at any TP:
    61 x 576 x 2 B = 70,272.
    """
    return max(kv_bytes_per_token_by_stage(model, engine=engine, tp=tp, pp=pp, kv_cache_dtype=kv_cache_dtype,
                                           pp_layer_partition=pp_layer_partition))


# ---------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------

def expert_sharding(model: ModelSpec, *, engine: str, tp: int, dp: int = 1,
                    enable_expert_parallel: bool = False) -> W.Sharding:
    """How routed experts are cut across ranks.

    * vLLM (``FusedMoEParallelConfig.make``): MoE layers flatten TP across DP, so the expert group
      is ``tp x dp`` ranks. With ``--enable-expert-parallel`` whole experts are spread over it
      (EP size = tp x dp; ``ceil(E / ep)`` on the busiest rank); without, each expert's width is
      split ``tp x dp`` ways.
    * SGLang: ``--dp-size`` replicas are separate worlds; EP lives inside the TP group
      (``ep_size = tp``), else each expert is split by TP (``moe_tp_size = tp / ep_size``).
    """
    e = _engine(engine)
    if not model.is_moe:
        return W.Sharding(tp=tp, expert_tp=tp)
    group = tp * dp if e == "vllm" else tp
    if enable_expert_parallel and group > 1:
        return W.Sharding(tp=tp, expert_tp=1, ep=group)
    return W.Sharding(tp=tp, expert_tp=group)


def _load_precision(model: ModelSpec, engine: str) -> W.Precision:
    q = model.quantization
    scale = VLLM_MXFP4_EXPERT_LAYOUT if (engine == "vllm" and q is not None and q.method == "mxfp4") else 1.0
    return W.Precision(model, dtype_bytes=min(model.dtype_bytes, 2), expert_scale=scale)


def weight_bytes_by_stage(model: ModelSpec, *, tp: int, pp: int, engine: str,
                          enable_expert_parallel: bool = False, dp: int = 1,
                          pp_layer_partition: str | Sequence[int] | None = None,
                          version: Version | str | None = None) -> tuple[int, ...]:
    """Weight bytes on the most loaded rank of each PP stage.

    A stage holds its layers; the first also the input embedding (and the vision tower, which vLLM
    builds on every rank), the last the final norm and lm_head (a second copy of a tied embedding
    when PP > 1). TP splits attention heads (KV projections replicate below one head per rank), the
    dense MLP and the 64-padded vocabulary; experts follow ``expert_sharding``; norms and the router
    are whole on every rank. Where the checkpoint was measured, the split is scaled to its size.
    """
    e = _engine(engine)
    sharding = expert_sharding(model, engine=e, tp=tp, dp=dp, enable_expert_parallel=enable_expert_parallel)
    if tp == 1 and pp == 1 and sharding.whole:
        sharding = W.Sharding()
    prec = _load_precision(model, e)
    ratio = W.measured_ratio(model)
    ranges = stage_ranges(model.num_hidden_layers, pp, e, partition=pp_layer_partition, version=version)
    return tuple(round(W.stage_bytes(model, r, first=i == 0, last=i == len(ranges) - 1, sharding=sharding,
                                     precision=prec) * ratio)
                 for i, r in enumerate(ranges))


def weight_bytes_per_rank(model: ModelSpec, *, tp: int, pp: int, engine: str,
                          enable_expert_parallel: bool = False, dp: int = 1,
                          pp_layer_partition: str | Sequence[int] | None = None) -> int:
    """Weight bytes on the most loaded rank (max over PP stages; see ``weight_bytes_by_stage``)."""
    return max(weight_bytes_by_stage(model, tp=tp, pp=pp, engine=engine,
                                     enable_expert_parallel=enable_expert_parallel, dp=dp,
                                     pp_layer_partition=pp_layer_partition))


# ---------------------------------------------------------------------------------------------
# Engine defaults and reserves
# ---------------------------------------------------------------------------------------------

def default_memory_fraction(engine: str, version: Version | str, *, gpu_total_mib: int | None, tp: int,
                            pp: int, model: ModelSpec | None = None,
                            host_min_total_mib: int | None = None,
                            knobs: LaunchKnobs | None = None) -> tuple[float, str]:
    """The engine's default memory fraction for this GPU size and layout, and why.

    The rule is the engine module's, by release (``engines/vllm.py``, ``engines/sglang.py``). SGLang
    sizes it from the smallest GPU on the host (``host_min_total_mib``, default: this GPU's total) and
    needs it: ``MemoryUnknown`` when it is ``None``.
    """
    e = _engine(engine)
    v = _version(version, e)
    if e == "sglang" and gpu_total_mib is None:
        raise MemoryUnknown("GPU total memory is unknown, and SGLang derives mem_fraction_static from it; "
                            "set memory_fraction or use a machine source with memory")
    total = gpu_total_mib or 0
    d = get_engine(e).default_memory_fraction(v, gpu_total_mib=total, host_min_total_mib=host_min_total_mib or total,
                                              tp=tp, pp=pp, model=model, knobs=knobs)
    return d.fraction, d.why


def activation_reserve_bytes(model: ModelSpec, *, engine: str, version: Version | str | None, tp: int,
                             pp: int, gpu_total_mib: int | None, gpu_name: str = "",
                             enforce_eager: bool = False, max_num_batched_tokens: int | None = None,
                             max_num_seqs: int | None = None, dp: int = 1,
                             enable_expert_parallel: bool = False,
                             max_model_len: int | None = None) -> tuple[int, str]:
    """Memory vLLM's profile run takes out of the budget besides the weights (an estimate), and how.

    vLLM (``Worker.determine_available_memory``: ``requested - non_kv_cache_memory - cudagraph``)::

        forward = max_num_batched_tokens x 2 B x (4 x hidden + q + 2 x kv (per rank) + 3 x ffn per rank)
        sampler = max_num_seqs x vocab x 8 B                      # fp32 logits + probabilities
        reserve = max(forward, sampler) + non-torch (0.15 GiB, +0.25 GiB over several GPUs)
                  + 0.5 GiB CUDA graphs (>= 0.20 unless enforce_eager)

    with ``ffn`` the dense width, or ``top_k x moe_intermediate`` (+ shared) for MoE, split like the
    weights; ``max_num_batched_tokens``/``max_num_seqs`` default as ``vllm serve`` sets them
    (8192/1024 on >= 70 GiB non-A100 GPUs from 0.9, else 2048/256). Startup logs put Llama-3.1-8B's
    activation peak at ~1.3 GiB; this gives ~1.0 GiB + 0.65 GiB.

    SGLang: 0. Its ``mem_fraction_static`` is defined as (weights + KV pool) / memory; activations
    and CUDA graphs live in the ``1 - fraction`` slack the default formula reserves.
    """
    e = _engine(engine)
    if e == "sglang":
        return 0, "SGLang keeps activations and CUDA graphs in the (1 - mem_fraction_static) slack"
    v = _version(version, e)
    tokens, seqs = vllm_scheduler_defaults(v, gpu_total_mib=gpu_total_mib, gpu_name=gpu_name,
                                           max_model_len=max_model_len or model.max_position_embeddings)
    tokens = max_num_batched_tokens or tokens
    seqs = max_num_seqs or seqs
    h = model.hidden_size
    q = -(-model.num_attention_heads // tp) * model.head_dim
    kv = 2 * kv_heads_per_rank(model, tp) * model.head_dim
    if model.is_moe:
        sh = expert_sharding(model, engine=e, tp=tp, dp=dp, enable_expert_parallel=enable_expert_parallel)
        inter = model.moe_intermediate_size or model.intermediate_size
        ffn = (model.num_experts_per_tok or 1) * -(-inter // sh.expert_tp)
        ffn += -(-model.shared_expert_intermediate_size // tp)
    else:
        ffn = -(-model.intermediate_size // tp)
    forward = tokens * 2 * (4 * h + q + kv + 3 * ffn)
    sampler = seqs * model.vocab_size * SAMPLER_BYTES_PER_LOGIT
    non_torch = VLLM_NON_TORCH_GIB + (VLLM_NON_TORCH_MULTI_GPU_GIB if tp * pp * dp > 1 else 0.0)
    graphs = VLLM_CUDAGRAPH_GIB if (v >= Version("0.20") and not enforce_eager) else 0.0
    total = max(forward, sampler) + (non_torch + graphs) * GIB
    why = (f"activation peak ~{max(forward, sampler) / GIB:.2f} GiB (max_num_batched_tokens {tokens}, "
           f"max_num_seqs {seqs}) + non-torch {non_torch:.2f} GiB"
           + (f" + CUDA graphs {graphs:.2f} GiB" if graphs else ""))
    return round(total), why


# ---------------------------------------------------------------------------------------------
# Pool prediction
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PoolPrediction:
    """One replica's predicted KV pool and the numbers behind it (bytes unless named ``_gib``)."""

    engine: str
    version: str
    version_source: str                    # pinned | installed | assumed latest known
    memory_fraction: float
    fraction_source: str                   # "memory_fraction" (the deployment) or the default's derivation
    kv_cache_dtype: str
    kv_bytes_per_token_per_rank: int       # most loaded stage
    kv_bytes_per_token_by_stage: tuple[int, ...]
    weights_bytes_per_rank: int            # most loaded rank
    weights_bytes_by_stage: tuple[int, ...]
    weights_gib_per_rank: float
    activation_reserve_gib: float
    activation_reserve_why: str
    kv_budget_bytes_per_rank: int          # smallest over ranks (negative: weights do not fit)
    kv_tokens: int                         # the replica's pool (every rank gets the smallest)
    kv_tokens_by_gpu: tuple[tuple[int, int], ...]  # (GPU index, tokens that rank alone could hold);
    #                                                ranks of a stage without KV layers are left out
    block_size: int
    max_model_len: int | None
    max_concurrency: float | None          # full-length requests the pool holds at once
    limiting_gpu: int                      # index of the GPU whose budget sets the pool
    sliding_layers: int
    kv_layers: int
    notes: tuple[str, ...] = ()

    @property
    def fits_one_request(self) -> bool | None:
        """Can the pool hold one ``max_model_len`` request (vLLM refuses to start otherwise)?"""
        if self.max_concurrency is None:
            return None
        return self.max_concurrency >= 1.0


def _need_memory(gpus: Sequence[Gpu], attr: str, what: str, engine: str) -> list[int]:
    missing = [g.index for g in gpus if getattr(g, attr) is None]
    if missing:
        names = ", ".join(f"GPU{i}" for i in missing)
        raise MemoryUnknown(f"the {what} of {names} is unknown, and {engine} sizes its pool from it "
                            f"(use a live probe or a snapshot with memory)")
    return [getattr(g, attr) for g in gpus]


def _vllm_concurrency(model: ModelSpec, *, stage_layers: Sequence[range], tp: int, kv_cache_dtype: str,
                      kv_tokens: int, max_len: int, block: int, batched_tokens: int) -> float:
    """vLLM's "Maximum concurrency" for a hybrid (sliding + full) model
    (``kv_cache_utils.get_max_concurrency_for_kv_cache_config``): pool memory over one request's
    need, where a full layer needs ``cdiv(max_len, block)`` blocks and a sliding one
    ``cdiv(min(window - 1 + max_num_batched_tokens, max_len), block) + 1``."""
    per_layer = kv_layer_bytes_per_token(model, tp=tp, kv_cache_dtype=kv_cache_dtype)
    kinds = model.layer_kinds
    window = model.sliding_window or max_len
    full_blocks = -(-max_len // block)
    swa_blocks = -(-min(window - 1 + batched_tokens, max_len) // block) + 1
    best = math.inf
    for r in stage_layers:
        n_full = sum(1 for i in r if kinds[i] not in (NO_KV, SLIDING))
        n_swa = sum(1 for i in r if kinds[i] == SLIDING)
        need = (n_full * full_blocks + n_swa * min(swa_blocks, full_blocks)) * block * per_layer
        have = kv_tokens * (n_full + n_swa) * per_layer
        if need:
            best = min(best, have / need)
    return 0.0 if best is math.inf else best


def predict_pool(model: ModelSpec, *, engine: str, engine_version: str | None, tp: int, pp: int,
                 gpus: Sequence[Gpu], max_model_len: int | None, memory_fraction: float | None,
                 kv_cache_dtype: str = "auto", enable_expert_parallel: bool = False, dp: int = 1,
                 enforce_eager: bool = False, max_num_batched_tokens: int | None = None,
                 max_num_seqs: int | None = None,
                 pp_layer_partition: str | Sequence[int] | None = None,
                 host: Host = BARE_HOST, host_min_total_mib: int | None = None,
                 knobs: LaunchKnobs | None = None) -> PoolPrediction:
    """Predict one replica's KV pool. ``gpus`` are the replica's GPUs in rank order
    (``rank = pp_rank x tp + tp_rank``, both engines' mapping).

    vLLM (0.10+, ``gpu_worker.determine_available_memory`` + ``kv_cache_utils``), per rank::

        budget = ceil(total x gpu_memory_utilization) - weights(stage) - activation_reserve
        tokens = budget // (bytes_per_token(stage) x block) x block          # block 16 (MLA: 64)
        pool   = min over ranks                                           # get_kv_cache_configs

    (before 0.10 the profile also counted other processes' memory: ``total - free`` is subtracted).

    SGLang (``kv_cache_configurator`` + ``pool_configurator``)::

        pre    = min free over the TP x PP world - CUDA context (0.5 GiB, +0.25 GiB communicators)
        rest   = (pre - weights(stage) - load overhead) - pre x (1 - mem_fraction_static)
        tokens = rest // cell_size(stage)            # page size 1; PP: MIN over stages

    gpt-oss-style hybrid SWA models in SGLang report the full-attention pool: ``rest`` over
    ``full_layers + 0.8 x swa_layers`` layers. ``max_model_len`` defaults to the model's derived
    maximum; ``max_concurrency`` is ``kv_tokens / max_model_len`` except for vLLM hybrid sliding
    models (see ``_vllm_concurrency``). GPU memory unknown -> ``MemoryUnknown``.

    ``knobs`` are what the launch's flags and variables change (``engines/knobs.py``): they fill
    ``enforce_eager``, the scheduler sizes and the PP partition where those are not given, and
    ``--kv-cache-memory-bytes`` (vLLM >= 0.10.2) / ``--block-size`` replace the budget / block.
    """
    e = _engine(engine)
    k = knobs or LaunchKnobs()
    enforce_eager = enforce_eager or k.enforce_eager
    max_num_batched_tokens = max_num_batched_tokens or k.max_num_batched_tokens
    max_num_seqs = max_num_seqs or k.max_num_seqs
    pp_layer_partition = pp_layer_partition or k.pp_layer_partition
    if len(gpus) != tp * pp:
        raise ValueError(f"predict_pool needs one replica's {tp * pp} GPUs (TP={tp} x PP={pp}), "
                         f"got {len(gpus)}")
    version, vsource = resolve_version(e, engine_version, host)
    notes: list[str] = []
    if vsource == "assumed latest known":
        notes.append(f"{e} is not installed here: defaults of {e} {version} assumed (pin engine_version).")

    totals = _need_memory(gpus, "memory_total_mib", "total memory", e)
    if memory_fraction is not None:
        fraction, fsource = float(memory_fraction), "memory_fraction"
    else:
        fraction, fsource = default_memory_fraction(e, version, gpu_total_mib=min(totals), tp=tp, pp=pp,
                                                    model=model, host_min_total_mib=host_min_total_mib,
                                                    knobs=k)
    ranges = stage_ranges(model.num_hidden_layers, pp, e, partition=pp_layer_partition, version=version)
    kv_by_stage = kv_bytes_per_token_by_stage(model, engine=e, tp=tp, pp=pp, kv_cache_dtype=kv_cache_dtype,
                                              pp_layer_partition=pp_layer_partition, version=version)
    w_by_stage = weight_bytes_by_stage(model, tp=tp, pp=pp, engine=e,
                                       enable_expert_parallel=enable_expert_parallel, dp=dp,
                                       pp_layer_partition=pp_layer_partition, version=version)
    gpu_name = gpus[0].name if gpus else ""
    reserve, reserve_why = activation_reserve_bytes(
        model, engine=e, version=version, tp=tp, pp=pp, gpu_total_mib=min(totals), gpu_name=gpu_name,
        enforce_eager=enforce_eager, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
        dp=dp, enable_expert_parallel=enable_expert_parallel, max_model_len=max_model_len)

    budgets: list[int] = []
    tokens: list[int | None] = []     # None: this rank holds no KV layer, so it does not bound the pool
    hybrid_caches: list[VllmKvCache | None] = []
    if e == "vllm":
        block = k.block_size or vllm_block_size(model.is_mla, version=version, gpu_name=gpu_name,
                                                kv_cache_dtype=kv_cache_dtype)
        fixed = k.kv_cache_memory_bytes if version >= KV_CACHE_MEMORY_BYTES_SINCE else None
        if k.kv_cache_memory_bytes and fixed is None:
            notes.append(f"--kv-cache-memory-bytes is not in vLLM {version} (it came in "
                         f"{KV_CACHE_MEMORY_BYTES_SINCE}): the profiled budget is used.")
        frees: list[int | None] = [g.memory_free_mib for g in gpus]
        old = version < FREE_MEMORY_CHECK_SINCE  # 0.9.0's budget also subtracts other processes' memory
        if old and any(f is None for f in frees):
            notes.append(f"vLLM < {FREE_MEMORY_CHECK_SINCE} also subtracts other processes' memory; free memory "
                         f"unknown, not counted.")

        layer_bytes = kv_layer_bytes_per_token(model, tp=tp, kv_cache_dtype=kv_cache_dtype)
        states = model.layer_state_bytes(tp)
        batched = max_num_batched_tokens or vllm_scheduler_defaults(
            version, gpu_total_mib=min(totals), gpu_name=gpu_name, max_model_len=max_model_len)[0]
        for rank, g in enumerate(gpus):
            stage = rank // tp
            total = (g.memory_total_mib or 0) * MIB
            budget = math.ceil(total * fraction) - w_by_stage[stage] - reserve
            free = frees[rank]
            if old and free is not None:
                budget -= max(0, total - free * MIB)
            if fixed is not None:  # gpu_worker.py: the given bytes replace the profiled budget
                budget = fixed
            budgets.append(budget)
            stage_kinds = [model.layer_kinds[i] for i in ranges[stage]]
            stage_states = [states[i] for i in ranges[stage]]
            mixed = len({k for k in stage_kinds if k != NO_KV}) > 1 or any(stage_states)
            if mixed and version >= HYBRID_SINCE and (max_model_len or model.max_position_embeddings):
                cache = vllm_kv_cache(
                    version, kinds=stage_kinds, page_bytes=layer_bytes * block, block_size=block,
                    budget_bytes=budget, max_model_len=max_model_len or model.max_position_embeddings or 0,
                    max_num_batched_tokens=batched, pp=pp, sliding_window=model.sliding_window,
                    chunk_size=model.attention_chunk_size, state_bytes=stage_states)
                hybrid_caches.append(cache)
                tokens.append(cache.logged_tokens if kv_by_stage[stage] else None)
                continue
            hybrid_caches.append(None)
            per_block = kv_by_stage[stage] * block
            tokens.append(max(0, budget) // per_block * block if per_block else None)
        if old:
            notes.append(f"vLLM {version} (< 0.10) sizes from total x fraction minus everything in use "
                         f"on the GPU, other tenants included.")
    else:
        block = 1
        frees_known = _need_memory(gpus, "memory_free_mib", "free memory", e)
        world = tp * pp
        context = SGLANG_CONTEXT_GIB + (SGLANG_COMMUNICATOR_GIB if world > 1 else 0)
        pre = min(frees_known) * MIB - context * GIB
        overhead = (SGLANG_LOAD_OVERHEAD_GIB + (SGLANG_LOAD_OVERHEAD_TP_GIB if tp > 1 else 0)) * GIB
        hybrid = bool(set(model.architectures) & SGLANG_HYBRID_SWA_ARCHS) and model.sliding_layers > 0
        per_layer = kv_layer_bytes_per_token(model, tp=tp, kv_cache_dtype=kv_cache_dtype)
        kinds = model.layer_kinds
        for rank in range(len(gpus)):
            stage = rank // tp
            rest = int(pre - w_by_stage[stage] - overhead - pre * (1 - fraction))
            budgets.append(rest)
            cell: float = kv_by_stage[stage]
            if hybrid:
                n_full = sum(1 for i in ranges[stage] if kinds[i] not in (NO_KV, SLIDING))
                n_swa = sum(1 for i in ranges[stage] if kinds[i] == SLIDING)
                cell = per_layer * (n_full + SGLANG_SWA_FULL_TOKENS_RATIO * n_swa)
            tokens.append(int(max(0, rest) // cell) if cell else None)
        if hybrid:
            notes.append(f"SGLang's hybrid SWA pool: the {model.sliding_layers} sliding layers keep "
                         f"{SGLANG_SWA_FULL_TOKENS_RATIO:g} tokens per full-attention token "
                         f"(swa_full_tokens_ratio).")
        if model.is_multimodal:
            notes.append("SGLang's multimodal cache reservation is not modelled.")

    bounded = [r for r, t in enumerate(tokens) if t is not None]
    if bounded:
        limiting_rank = min(bounded, key=lambda r: (tokens[r], budgets[r]))
        kv_tokens = tokens[limiting_rank] or 0
    else:
        limiting_rank, kv_tokens = min(range(len(budgets)), key=budgets.__getitem__), 0
        notes.append(f"{model.name} has no layer with a per-token KV cache: there is no token pool to size.")

    max_len = max_model_len or model.max_position_embeddings
    concurrency: float | None = None
    vllm_caches = [c for c in hybrid_caches if c is not None] if e == "vllm" else []
    if max_len:
        concurrency = kv_tokens / max_len
        if vllm_caches:  # vLLM's own measure for mixed attention kinds (memory/vllm_kv.py)
            concurrency = min(c.max_concurrency for c in vllm_caches)
            notes.append(describe_vllm_cache(min(vllm_caches, key=lambda c: c.max_concurrency), version))

    # -- what the numbers assume -------------------------------------------------------------
    if model.is_mla:
        notes.append(f"MLA: every rank caches the full {model.kv_lora_rank}+{model.qk_rope_head_dim} latent "
                     f"per layer, so TP does not shrink KV per token.")
    elif model.num_key_value_heads < tp:
        notes.append(f"{model.num_key_value_heads} KV heads < TP={tp}: each rank keeps one replicated head.")
    if model.sliding_layers and not vllm_caches:
        notes.append(f"{model.sliding_layers} of {model.num_hidden_layers} layers use a "
                     f"{model.sliding_window:,}-token sliding window: counted as full per token, as the "
                     f"engines report the pool; a request needs less there"
                     + (" (max_concurrency accounts for it)." if e == "vllm" else "."))
    no_kv = model.num_hidden_layers - model.kv_layers
    if no_kv:
        notes.append(f"{no_kv} linear-attention/Mamba layers keep a fixed per-request state, not per-token "
                     f"KV (that state is not modelled).")
    q = model.quantization
    if (kv_cache_dtype or "auto").lower() == "auto" and q is not None and q.kv_cache_dtype:
        notes.append(f"KV cache in {q.kv_cache_dtype}: the checkpoint declares a KV cache scheme.")
    ratio = W.measured_ratio(model)
    if model.weight_bytes_measured and abs(ratio - 1) > 0.10:
        notes.append(f"The checkpoint measures {model.weight_bytes_measured / GIB:.1f} GiB against "
                     f"{W.computed_weight_bytes(model, on_disk=True) / GIB:.1f} GiB computed from its "
                     f"config; per-rank weights follow the measured size.")
    if e == "vllm" and model.quantization is not None and model.quantization.method == "mxfp4":
        notes.append(f"vLLM's mxfp4 expert layout counted at +{VLLM_MXFP4_EXPERT_LAYOUT - 1:.0%} "
                     f"(gpt-oss-120b loads 64.4-66.0 GiB from 60.8 GiB on disk).")
    notes.extend(n for n in model.notes if "not modelled" in n)

    w_max = max(w_by_stage)
    return PoolPrediction(
        engine=e, version=str(version), version_source=vsource, memory_fraction=fraction,
        fraction_source=fsource, kv_cache_dtype=kv_cache_dtype, kv_bytes_per_token_per_rank=max(kv_by_stage),
        kv_bytes_per_token_by_stage=kv_by_stage, weights_bytes_per_rank=w_max,
        weights_bytes_by_stage=w_by_stage, weights_gib_per_rank=w_max / GIB,
        activation_reserve_gib=reserve / GIB, activation_reserve_why=reserve_why,
        kv_budget_bytes_per_rank=min(budgets), kv_tokens=kv_tokens,
        kv_tokens_by_gpu=tuple((g.index, t) for g, t in zip(gpus, tokens, strict=True) if t is not None),
        block_size=block,
        max_model_len=max_len, max_concurrency=concurrency, limiting_gpu=gpus[limiting_rank].index,
        sliding_layers=model.sliding_layers, kv_layers=model.kv_layers, notes=tuple(notes),
    )


def predict_replicas(dep: Deployment, machine: Machine, model: ModelSpec,
                     host: Host = BARE_HOST) -> list[PoolPrediction]:
    """One ``PoolPrediction`` per DP replica of ``dep`` on ``machine`` (raises ``MemoryUnknown`` /
    ``PlacementError``): each replica's GPUs in rank order, as the engines place them."""
    placement = place(dep, machine)
    knobs = deployment_knobs(dep.engine, dep.launch.args, dep.launch.env, host.env)
    return [
        predict_pool(
            model, engine=dep.engine, engine_version=dep.engine_version, tp=dep.tp, pp=dep.pp,
            gpus=[machine.gpu(i) for i in placement.replica_gpus(d)], max_model_len=dep.max_model_len,
            memory_fraction=dep.memory_fraction, kv_cache_dtype=dep.kv_cache_dtype,
            enable_expert_parallel=dep.enable_expert_parallel, dp=dep.dp, host=host,
            host_min_total_mib=host_min_total_mib(machine, placement.replica_gpus(d)), knobs=knobs,
        )
        for d in range(dep.dp)
    ]


def host_min_total_mib(machine: Machine, gpus: Sequence[int]) -> int | None:
    """The smallest total memory over every GPU on the host(s) of ``gpus``: what SGLang's
    ``get_nvgpu_memory_capacity()`` reads from ``nvidia-smi`` (which ignores CUDA_VISIBLE_DEVICES)."""
    hosts = {machine.gpu(i).host for i in gpus}
    totals = [g.memory_total_mib for g in machine.gpus if g.host in hosts and g.memory_total_mib is not None]
    return min(totals) if totals else None

