"""What the engines keep out of the KV pool besides the weights: the default memory fraction and
vLLM's activation / CUDA-graph reserve, SGLang's context and load overheads (estimates, cited)."""

from __future__ import annotations

from packaging.version import Version

from pytest_gpulayout.engines.registry import get_engine
from pytest_gpulayout.engines.vllm.engine import (
    FLASHINFER_SAMPLER_ENV,
    FLASHINFER_SAMPLER_OPT_IN_SINCE,
    counts_communicators_in_budget,
    counts_other_tenants,
    samples_on_driver_only,
)
from pytest_gpulayout.engines.vllm.engine import scheduler_defaults as vllm_scheduler_defaults
from pytest_gpulayout.knobs import LaunchKnobs
from pytest_gpulayout.machine.facts import GIB
from pytest_gpulayout.memory.common import MemoryUnknown, engine_name, engine_version
from pytest_gpulayout.memory.communicators import NVLINK_COMMUNICATOR_GIB, TpLink, over_nvlink
from pytest_gpulayout.memory.kv import kv_heads_per_rank
from pytest_gpulayout.memory.weights import expert_sharding
from pytest_gpulayout.model.spec import ModelSpec

#: vLLM: non-torch memory the profile run sees (cuBLAS workspace; NCCL / custom all-reduce buffers
#: when the instance spans GPUs). Startup logs show 0.1-0.6 GiB. Before 0.11 the communicators set
#: up at start-up are part of it, and over NVLink they take ``communicators.NVLINK_COMMUNICATOR_GIB``
#: instead (``engines/vllm.counts_communicators_in_budget``).
VLLM_NON_TORCH_GIB = 0.15
VLLM_NON_TORCH_MULTI_GPU_GIB = 0.25
#: The releases that size from ``total - free - torch allocated`` (``engines/vllm.counts_other_tenants``:
#: before 0.6.5, and 0.8-0.9.0) count as non-torch everything in use on the GPU besides torch's
#: tensors, the worker's own CUDA context included: vllm/001 (one RTX 3090) logs
#: ``non_torch_memory=0.35GiB``. Replaces ``VLLM_NON_TORCH_GIB`` for those releases.
VLLM_NON_TORCH_OLD_GIB = 0.35
#: vLLM >= 0.20 subtracts an estimate of the CUDA-graph pool before sizing the KV cache
#: (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1``). Logs: "0.58 GiB (estimated)"; 0.88 ~ 0.8592 on 24 GiB.
VLLM_CUDAGRAPH_GIB = 0.5
#: vLLM's sampler warm-up holds ``max_num_seqs x vocab`` fp32 logits and probabilities (V1 where
#: FlashInfer or the Triton top-k/top-p kernel samples: ``engines/vllm.warmup_sorts_logits``).
SAMPLER_BYTES_PER_LOGIT = 8
#: V0's profile run samples with ``top_k = vocab - 1`` (0.7.2 ``worker/model_runner.py _dummy_run``:
#: "Enable top-k sampling to reflect the accurate memory usage"), so the driver sorts every logit
#: (``layers/sampler.py _apply_top_k_top_p``: ``logits.sort(dim=-1)``). Live at the sort, per logit:
#: the gathered logits in the model dtype (2 B) and their fp32 copy (4), the sorted values and int64
#: indices (12), the sort's int64 input indices (8) and its key/value scratch (12): 38 B. vllm/023
#: (TP 2 on RTX 4090s, 256 x 152,064 logits) has its pool set by rank 0 with 1.23 GiB less KV than
#: rank 1 quotes (0.19 GiB activation peak); this gives 1.38 GiB on rank 0. V1's warm-up
#: (``_dummy_sampler_run``: ``top_k = vocab - 1``, ``top_p = 0.9``) holds the same on every rank
#: where the PyTorch path sorts (``v1/sample/ops/topk_topp_sampler.apply_top_k_top_p``): vllm/011
#: (gpt-oss-120b, 1024 x 201,088 logits on one H100, 0.10.1 from pip, no FlashInfer) logged
#: -2.14 GiB for KV, 7.5 GiB held besides the weights; this gives 7.3 GiB of it.
SORTING_SAMPLER_BYTES_PER_LOGIT = 38

#: SGLang measures ``pre`` (``get_available_gpu_memory``, MIN over the TP x PP world) after its CUDA
#: context and the communicators exist (``model_executor/model_runner.py`` / ``distributed/bootstrap.py``),
#: so an idle GPU's NVML free memory is higher than ``pre`` by this context plus
#: ``communicators.communicator_gib``. Counted once: the machine's free figure already excludes the
#: driver's reservation. Measured on sglang/013's own run (QwQ-32B TP4 on 4 x L4, 0.4.3.post4,
#: didier-durand/llms-in-clouds docs/sglang.md): "Init torch distributed ends. mem usage=0.13 GB",
#: then "Load weight begin. avail mem=21.63 GB", against 22.00 GiB free on an idle L4: 0.24 GiB of context.
SGLANG_CONTEXT_GIB = 0.24
#: What SGLang holds after "Load weight end" beyond the weights (rope caches, sampling buffers):
#: 0.06 GiB for Qwen3-14B at TP=1, 0.29 GiB for QwQ-32B at TP=4 in public startup logs.
SGLANG_LOAD_OVERHEAD_GIB = 0.1
SGLANG_LOAD_OVERHEAD_TP_GIB = 0.2
#: SGLang's hybrid SWA pool (gpt-oss, Llama 4): SWA layers get ``swa_full_tokens_ratio`` (0.8)
#: tokens per full-attention token (``model_runner.set_num_token_hybrid``).
SGLANG_SWA_FULL_TOKENS_RATIO = 0.8
#: Why SGLang reserves nothing next to the weights and the pool.
SGLANG_RESERVE_WHY = "SGLang keeps activations and CUDA graphs in the (1 - mem_fraction_static) slack"
SGLANG_HYBRID_SWA_ARCHS = frozenset({"GptOssForCausalLM", "Llama4ForConditionalGeneration"})



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
    e = engine_name(engine)
    v = engine_version(version, e)
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
                             max_model_len: int | None = None, samples: bool = True,
                             link: TpLink, sampler_sorts: bool) -> tuple[int, str]:
    """Memory vLLM's profile run takes out of the budget besides the weights (an estimate), and how.

    vLLM (``Worker.determine_available_memory``: ``requested - non_kv_cache_memory - cudagraph``)::

        forward = max_num_batched_tokens x 2 B x (3 x hidden + max(3 x ffn, 2 x q + k + v) per rank)
        sampler = max_num_seqs x vocab x 8 B       # V1 (FlashInfer / Triton): fp32 logits + probabilities
                  max_num_seqs x vocab x 38 B      # the top-k/top-p sort: V0 (< 0.8) on the sampling
                                                   # rank only; V1 on every rank where ``sampler_sorts``
        reserve = max(forward, sampler) + non-torch (0.15 GiB; 0.35 where the release counts
                  ``total - free``; +0.25 GiB over several GPUs, +1.25 GiB instead before 0.11
                  when the TP group talks over NVLink or ``link`` is unknown) + 0.5 GiB CUDA
                  graphs (>= 0.20 unless enforce_eager)

    ``samples``: whether this rank runs the sampler. In V0 only the driver of the last pipeline stage
    does (``engines/vllm.samples_on_driver_only``); the other ranks reserve the forward peak alone.
    ``sampler_sorts``: whether the warm-up takes the PyTorch sort (``engines/vllm.warmup_sorts_logits``).

    with ``ffn`` the dense width, or ``top_k x moe_intermediate`` (+ shared) for MoE, split like the
    weights; ``max_num_batched_tokens``/``max_num_seqs`` default as ``vllm serve`` sets them
    (8192/1024 on >= 70 GiB non-A100 GPUs from 0.9, else 2048/256). ``forward`` is the peak of one
    layer: the residual stream, the normed input and the layer's output (3 x hidden) next to either
    the MLP's gate/up and activation outputs (3 x ffn) or attention's q/k/v and output (2 x q + k + v).
    vllm/001 (V0, Llama-3.1-8B, 20,000 profiled tokens) logs ``peak_torch_memory=17.06GiB`` after
    ``Loading model weights took 14.9888 GB``: a 2.07 GiB peak; this gives 2.06 GiB.

    SGLang: 0. Its ``mem_fraction_static`` is defined as (weights + KV pool) / memory; activations
    and CUDA graphs live in the ``1 - fraction`` slack the default formula reserves.
    """
    e = engine_name(engine)
    if e == "sglang":
        return 0, SGLANG_RESERVE_WHY
    v = engine_version(version, e)
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
    forward = tokens * 2 * (3 * h + max(3 * ffn, 2 * q + kv))
    v0 = samples_on_driver_only(v)
    # V1 warms up min(max_num_seqs, max_num_batched_tokens) requests (0.10.1 ``_dummy_run``:
    # ``num_reqs = min(num_tokens, max_num_reqs)``); V0 profiles max_num_seqs sequences
    rows = seqs if v0 else min(seqs, tokens)
    sampler = (rows * model.vocab_size * (SORTING_SAMPLER_BYTES_PER_LOGIT if sampler_sorts else SAMPLER_BYTES_PER_LOGIT)
               if samples or not v0 else 0)
    base = VLLM_NON_TORCH_OLD_GIB if counts_other_tenants(v) else VLLM_NON_TORCH_GIB
    non_torch = base
    if tp * pp * dp > 1:
        nvlink = counts_communicators_in_budget(v) and over_nvlink(tp, link)
        non_torch += NVLINK_COMMUNICATOR_GIB if nvlink else VLLM_NON_TORCH_MULTI_GPU_GIB
    graphs = VLLM_CUDAGRAPH_GIB if (v >= Version("0.20") and not enforce_eager) else 0.0
    total = max(forward, sampler) + (non_torch + graphs) * GIB
    peak = ("forward" if forward >= sampler else
            "the V0 sampler's top-k sort" if v0 else
            f"the sampler warm-up's top-k/top-p sort (PyTorch; {_sort_fix(v)})" if sampler_sorts else
            "the sampler warm-up")
    why = (f"activation peak ~{max(forward, sampler) / GIB:.2f} GiB, {peak} (max_num_batched_tokens {tokens}, "
           f"max_num_seqs {seqs}) + non-torch {non_torch:.2f} GiB"
           + (f" + CUDA graphs {graphs:.2f} GiB" if graphs else ""))
    return round(total), why


def _sort_fix(v: Version) -> str:
    """What makes a V1 release sample without the sort (``engines/vllm.warmup_sorts_logits``)."""
    if v < FLASHINFER_SAMPLER_OPT_IN_SINCE:
        return "FlashInfer, when installed (the flashinfer-python package), samples without it"
    return f"{FLASHINFER_SAMPLER_ENV}=1 samples with FlashInfer without it"
