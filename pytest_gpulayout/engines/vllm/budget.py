"""vLLM's memory budget per rank: what its profile run keeps out of the KV pool besides the weights
(activation peak, sampler warm-up, non-torch memory, CUDA graphs; estimates, cited), and each rank's
``ceil(CUDA total x gpu_memory_utilization) - weights - reserve`` in blocks, with its KV cache groups
for stages that mix attention kinds (``v1/worker/gpu_worker.py determine_available_memory``,
``v1/core/kv_cache_utils.py``). The engine-neutral arithmetic (KV bytes, weights, stages,
communicators) is ``memory/``; this module is what is vLLM's alone.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

from packaging.version import Version

from pytest_gpulayout.engines.vllm.cudagraphs import (
    ESTIMATE_ENV,
    ESTIMATE_SUBTRACTED_SINCE,
    CudaGraphs,
    cuda_graphs,
    graphs_off,
    subtracts_estimate,
)
from pytest_gpulayout.engines.vllm.cudagraphs import OBSERVED_GIB as OBSERVED_CUDAGRAPH_GIB
from pytest_gpulayout.engines.vllm.defaults import (
    FLASHINFER_SAMPLER_ENV,
    FLASHINFER_SAMPLER_OPT_IN_SINCE,
    KV_CACHE_MEMORY_BYTES_SINCE,
    TRITON_TOP_K_TOP_P_MIN_ROWS,
    V1_DEFAULT_SINCE,
    counts_communicators_in_budget,
    counts_other_tenants,
    flashinfer_in_engine_image,
    oversubscribes_silently,
    runs_v0,
    samples_on_driver_only,
    v0_chunked_prefill,
    warmup_sorts_logits,
    warmup_uses_triton_top_k_top_p,
)
from pytest_gpulayout.engines.vllm.defaults import block_size as vllm_block_size
from pytest_gpulayout.engines.vllm.defaults import scheduler_defaults as vllm_scheduler_defaults
from pytest_gpulayout.engines.vllm.kv_groups import (
    HYBRID_SINCE,
    VllmKvCache,
    chunked_hybrid,
    vllm_kv_cache,
    vllm_state_bytes,
)
from pytest_gpulayout.engines.vllm.kv_groups import describe as describe_vllm_cache
from pytest_gpulayout.host import Host
from pytest_gpulayout.knobs import LaunchKnobs
from pytest_gpulayout.machine.capability import sm_count_from_name
from pytest_gpulayout.machine.facts import GIB, MIB
from pytest_gpulayout.memory.capability import compute_capability
from pytest_gpulayout.memory.common import MemoryEngine, engine_version
from pytest_gpulayout.memory.communicators import NVLINK_COMMUNICATOR_GIB, TpLink, over_nvlink
from pytest_gpulayout.memory.kv import kv_heads_per_rank, kv_layer_bytes_per_token
from pytest_gpulayout.memory.replica import RankBudgets, Replica
from pytest_gpulayout.memory.weights import expert_sharding
from pytest_gpulayout.model.spec import NO_KV, ModelSpec

#: vLLM: non-torch memory the profile run sees (cuBLAS workspace; NCCL / custom all-reduce buffers
#: when the instance spans GPUs). Startup logs show 0.1-0.6 GiB. Before 0.11 the communicators set
#: up at start-up are part of it, and over NVLink they take ``communicators.NVLINK_COMMUNICATOR_GIB``
#: instead (``engines/vllm/engine.counts_communicators_in_budget``).
VLLM_NON_TORCH_GIB = 0.15
VLLM_NON_TORCH_MULTI_GPU_GIB = 0.25
#: The releases that size from ``total - free - torch allocated`` (``engines/vllm/engine.counts_other_tenants``:
#: before 0.6.5, and 0.8-0.9.0) count as non-torch everything in use on the GPU besides torch's
#: tensors, the worker's own CUDA context included: vllm/001 (one RTX 3090) logs
#: ``non_torch_memory=0.35GiB``. Replaces ``VLLM_NON_TORCH_GIB`` for those releases.
VLLM_NON_TORCH_OLD_GIB = 0.35
#: vLLM's sampler warm-up holds ``max_num_seqs x vocab`` fp32 logits and probabilities (V1 where
#: FlashInfer samples: ``engines/vllm/engine.warmup_sorts_logits``; an estimate, not re-read against
#: FlashInfer's own buffers). The Triton kernel's path is ``TRITON_SAMPLER_BYTES_PER_LOGIT``.
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
#: V1 from 0.17 where the Triton top-k/top-p kernel filters in place (``defaults.warmup_uses_triton_top_k_top_p``),
#: per logit at ``random_sample`` (0.19.1 ``v1/sample/sampler.py Sampler.forward`` -> ``sample`` ->
#: ``v1/sample/ops/topk_topp_sampler.py forward_native`` -> ``random_sample``; 0.17.0 the same): the
#: model-dtype logits ``_dummy_sampler_run`` still holds (2 B), ``Sampler.forward``'s
#: ``logits.to(torch.float32)`` (4), ``forward_native``'s ``probs = logits.softmax(dtype=float32)`` (4) and
#: ``random_sample``'s ``q = torch.empty_like(probs)`` (4): 14 B.
TRITON_SAMPLER_BYTES_PER_LOGIT = 14
#: ``apply_top_k_top_p_triton`` keeps a per-program fp32 row of the vocabulary, cached for the process
#: (0.17.0 / 0.19.1 ``v1/sample/ops/topk_topp_triton.py``: ``NUM_PROGRAMS = min(num_sm, batch_size)``;
#: ``size = min(next_power_of_2(NUM_PROGRAMS), num_sm)``; ``buffer = logits.new_empty((size, vocab_size))``
#: in ``_TRITON_BUFFER_CACHE``), so ``num_sm`` rows of 4 B logits are live at the warm-up's peak.
TRITON_BUFFER_BYTES_PER_LOGIT = 4
#: Streaming multiprocessors where ``machine/capability.py``'s ``SM_TABLE`` does not know the GPU: Hopper
#: SXM's (the Triton buffer differs by < 0.1 GiB across the GPUs there at a 152k vocabulary).
DEFAULT_SM_COUNT = 132
#: V1's profile run keeps the dummy forward's output while the sampler warms up (0.9.2 and 0.19.1
#: ``v1/worker/gpu_model_runner.py profile_run``: ``hidden_states, last_hidden_states = self._dummy_run(
#: self.max_num_tokens, is_profile=True)``, then ``self._dummy_sampler_run(last_hidden_states)``, and
#: ``del hidden_states`` only after it): ``max_num_batched_tokens x hidden`` in the model dtype, plus the
#: ``num_reqs`` gathered rows (``hidden_states[logit_indices]``) and their ``torch.rand_like`` copy in
#: ``_dummy_sampler_run``. 2 B per value (bf16/fp16), as the forward estimate counts them.
HIDDEN_BYTES = 2


def sm_count(gpu_name: str) -> int:
    """The GPU's streaming multiprocessors by name (``machine/capability.py``), else ``DEFAULT_SM_COUNT``."""
    return sm_count_from_name(gpu_name) or DEFAULT_SM_COUNT


def triton_buffer_rows(rows: int, gpu_name: str) -> int:
    """Rows of ``apply_top_k_top_p_triton``'s cached buffer for a batch of ``rows`` (0.19.1
    ``topk_topp_triton.py``): ``min(next_power_of_2(min(num_sm, rows)), num_sm)``."""
    sms = sm_count(gpu_name)
    programs = max(1, min(sms, rows))
    return min(1 << (programs - 1).bit_length(), sms)


def activation_reserve_bytes(
    model: ModelSpec,
    *,
    engine: MemoryEngine,
    version: Version | str | None,
    tp: int,
    pp: int,
    gpu_total_mib: int | None,
    gpu_name: str = "",
    enforce_eager: bool = False,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    dp: int = 1,
    enable_expert_parallel: bool = False,
    max_model_len: int | None = None,
    samples: bool = True,
    link: TpLink,
    sampler_sorts: bool,
    v0: bool | None = None,
    triton_top_k_top_p: bool = False,
    given: Mapping[str, str | None] | None = None,
    knobs: LaunchKnobs | None = None,
) -> tuple[int, str]:
    """Memory vLLM's profile run takes out of the budget besides the weights (an estimate), and how.

    vLLM (``Worker.determine_available_memory``: ``requested - non_kv_cache_memory - cudagraph``)::

        forward = max_num_batched_tokens x 2 B x (3 x hidden + max(3 x ffn, 2 x q + k + v) per rank)
        sampler = max_num_seqs x vocab x 8 B       # V1 with FlashInfer: fp32 logits + probabilities
                  max_num_seqs x vocab x 14 B      # V1 >= 0.17, the Triton kernel (``triton_top_k_top_p``),
                  + min(next_pow2(rows), SMs) x vocab x 4 B    # and its cached per-program buffer
                  max_num_seqs x vocab x 38 B      # the top-k/top-p sort: V0 (< 0.8) on the sampling
                                                   # rank only; V1 on every rank where ``sampler_sorts``
                  + (max_num_batched_tokens + 2 x max_num_seqs) x hidden x 2 B   # V1: the dummy
                                                   # forward's hidden states, still held (``HIDDEN_BYTES``)
        reserve = max(forward, sampler) + non-torch (0.15 GiB; 0.35 where the release counts
                  ``total - free``; +0.25 GiB over several GPUs, +1.25 GiB instead before 0.11
                  when the TP group talks over NVLink or ``link`` is unknown) + CUDA graphs
                  (>= 0.20 unless enforce_eager, -O0 or cudagraph_mode NONE: ``cudagraph_estimate``)

    ``samples``: whether this rank runs the sampler. In V0 only the driver of the last pipeline stage
    does (``engines/vllm/engine.samples_on_driver_only``); the other ranks reserve the forward peak alone.
    ``sampler_sorts``: whether the warm-up takes the PyTorch sort (``engines/vllm/engine.warmup_sorts_logits``).
    ``triton_top_k_top_p``: whether it takes the Triton kernel (``defaults.warmup_uses_triton_top_k_top_p``;
    batches under ``TRITON_TOP_K_TOP_P_MIN_ROWS`` rows sort instead).
    ``v0``: the engine runs V0 (``defaults.runs_v0``: before 0.8, or 0.8-0.10.1 below SM 8.0); None:
    the release's default engine. V0 batches a whole ``max_model_len`` prompt in its profile run
    unless it prefills in chunks (``defaults.v0_chunked_prefill``).

    with ``ffn`` the dense width, or ``top_k x moe_intermediate`` (+ shared) for MoE, split like the
    weights; ``max_num_batched_tokens``/``max_num_seqs`` default as ``vllm serve`` sets them
    (8192/1024 on >= 70 GiB non-A100 GPUs from 0.9, else 2048/256). ``forward`` is the peak of one
    layer: the residual stream, the normed input and the layer's output (3 x hidden) next to either
    the MLP's gate/up and activation outputs (3 x ffn) or attention's q/k/v and output (2 x q + k + v).
    vllm/001 (V0, Llama-3.1-8B, 20,000 profiled tokens) logs ``peak_torch_memory=17.06GiB`` after
    ``Loading model weights took 14.9888 GB``: a 2.07 GiB peak; this gives 2.06 GiB.

    SGLang reserves nothing here (``engines/sglang/budget.py``).
    """
    v = engine_version(version, engine)
    v0 = samples_on_driver_only(v, v0=v0)
    tokens, seqs = _scheduler(model, v, v0=v0, gpu_total_mib=gpu_total_mib, gpu_name=gpu_name,
                              max_model_len=max_model_len)
    tokens = max_num_batched_tokens or tokens
    seqs = max_num_seqs or seqs
    h = model.hidden_size
    q = -(-model.num_attention_heads // tp) * model.head_dim
    kv = 2 * kv_heads_per_rank(model, tp) * model.head_dim
    if model.is_moe:
        sh = expert_sharding(model, engine=engine, tp=tp, dp=dp, enable_expert_parallel=enable_expert_parallel)
        inter = model.moe_intermediate_size or model.intermediate_size
        ffn = (model.num_experts_per_tok or 1) * -(-inter // sh.expert_tp)
        ffn += -(-model.shared_expert_intermediate_size // tp)
    else:
        ffn = -(-model.intermediate_size // tp)
    forward = tokens * 2 * (3 * h + max(3 * ffn, 2 * q + kv))
    # V1 warms up min(max_num_seqs, max_num_batched_tokens) requests (0.10.1 ``_dummy_run``:
    # ``num_reqs = min(num_tokens, max_num_reqs)``); V0 profiles max_num_seqs sequences
    rows = seqs if v0 else min(seqs, tokens)
    triton = triton_top_k_top_p and not v0 and rows >= TRITON_TOP_K_TOP_P_MIN_ROWS
    sampler_sorts = sampler_sorts or (triton_top_k_top_p and not v0 and not triton)
    if v0:
        sampler = rows * model.vocab_size * SORTING_SAMPLER_BYTES_PER_LOGIT if samples else 0
    else:
        per_logit = (SORTING_SAMPLER_BYTES_PER_LOGIT if sampler_sorts
                     else TRITON_SAMPLER_BYTES_PER_LOGIT if triton else SAMPLER_BYTES_PER_LOGIT)
        sampler = rows * model.vocab_size * per_logit
        if triton:
            sampler += triton_buffer_rows(rows, gpu_name) * model.vocab_size * TRITON_BUFFER_BYTES_PER_LOGIT
        sampler += (tokens + 2 * rows) * h * HIDDEN_BYTES  # profile_run's hidden states, still held
    base = VLLM_NON_TORCH_OLD_GIB if counts_other_tenants(v, v0=v0) else VLLM_NON_TORCH_GIB
    non_torch = base
    if tp * pp * dp > 1:
        nvlink = counts_communicators_in_budget(v) and over_nvlink(tp, link)
        non_torch += NVLINK_COMMUNICATOR_GIB if nvlink else VLLM_NON_TORCH_MULTI_GPU_GIB
    cg = cudagraph_estimate(model, v, pp=pp, tokens=tokens, seqs=seqs, gpu_name=gpu_name,
                            enforce_eager=enforce_eager, given=given, v0=v0, knobs=knobs)
    graphs = cg.estimate_bytes / GIB if cg is not None else 0.0
    total = max(forward, sampler) + non_torch * GIB + (cg.estimate_bytes if cg is not None else 0)
    peak = (
        "forward"
        if forward >= sampler
        else "the V0 sampler's top-k sort"
        if v0
        else f"the sampler warm-up's top-k/top-p sort (PyTorch; {_sort_fix(v)})"
        if sampler_sorts
        else "the sampler warm-up (Triton top-k/top-p)"
        if triton
        else "the sampler warm-up"
    )
    why = (
        f"activation peak ~{max(forward, sampler) / GIB:.2f} GiB, {peak} (max_num_batched_tokens {tokens}, "
        f"max_num_seqs {seqs}) + non-torch {non_torch:.2f} GiB"
        + (f" + CUDA graphs {graphs:.2f} GiB ({cg.describe()})" if cg is not None and graphs else "")
    )
    return round(total), why


def cudagraph_estimate(model: ModelSpec, v: Version, *, pp: int, tokens: int, seqs: int, gpu_name: str,
                       enforce_eager: bool, given: Mapping[str, str | None] | None, v0: bool,
                       knobs: LaunchKnobs | None = None) -> CudaGraphs | None:
    """What vLLM takes out of the budget for CUDA graphs (``engines/vllm/cudagraphs.py``): where
    ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` says so (default 1 from 0.20; the launch's value from 0.18:
    ``cudagraphs.subtracts_estimate``) in V1 unless graphs are off; the capture sizes the line gives
    (``compilation_config.cudagraph_capture_sizes``, ``max_cudagraph_capture_size``) or the default ones; the
    rank's layers are the largest stage's. None: nothing subtracted."""
    env = knobs.env if knobs is not None else {}
    typed = knobs.typed if knobs is not None else {}
    if (not subtracts_estimate(v, env) or v0
            or graphs_off(given or {}, enforce_eager=enforce_eager, typed=typed)):
        return None
    layers = -(-model.num_hidden_layers // max(pp, 1))
    return cuda_graphs(v, layers=layers, max_num_seqs=seqs, max_num_batched_tokens=tokens, gpu_name=gpu_name,
                       given=given, typed=typed)


def _scheduler(model: ModelSpec, v: Version, *, v0: bool, gpu_total_mib: int | None, gpu_name: str,
               max_model_len: int | None) -> tuple[int, int]:
    """The scheduler's default batch for ``model``: V0's depends on whether it prefills in chunks,
    which depends on the model (sliding window, vision, MLA: ``defaults.v0_chunked_prefill``). ``max_model_len``
    is the replica's context length (``Replica.max_model_len``: the deployment's, else the model's)."""
    max_len = max_model_len
    chunked = v0_chunked_prefill(v, max_model_len=max_len, sliding_window=model.sliding_window is not None,
                                 multimodal=model.is_multimodal, mla=model.is_mla) if v0 else None
    return vllm_scheduler_defaults(v, gpu_total_mib=gpu_total_mib, gpu_name=gpu_name, max_model_len=max_len,
                                   v0=v0, chunked_prefill=chunked, multimodal=model.is_multimodal and v0)


def _cudagraph_note(r: Replica, knobs: LaunchKnobs, *, v0: bool, enforce_eager: bool, batched: int,
                    max_num_seqs: int | None, gpu_total_mib: int) -> str:
    """The pool's note on the CUDA-graph estimate vLLM subtracts (0.20+), "" where it subtracts none."""
    seqs = max_num_seqs or _scheduler(r.model, r.version, v0=v0, gpu_total_mib=gpu_total_mib, gpu_name=r.gpu_name,
                                      max_model_len=r.max_model_len)[1]
    cg = cudagraph_estimate(r.model, r.version, pp=r.pp, tokens=batched, seqs=seqs, gpu_name=r.gpu_name,
                            enforce_eager=enforce_eager, given=knobs.given, v0=v0, knobs=knobs)
    if cg is None:
        if r.version >= ESTIMATE_SUBTRACTED_SINCE and not v0 and not subtracts_estimate(r.version, knobs.env):
            return (f"{ESTIMATE_ENV}={knobs.env.get(ESTIMATE_ENV)}: vLLM {r.version} measures its CUDA-graph "
                    f"estimate but does not subtract it from the KV budget (v1/worker/gpu_worker.py "
                    f"determine_available_memory); the graphs then come out of the headroom.")
        return ""
    lo, hi = OBSERVED_CUDAGRAPH_GIB
    return (
        f"vLLM {r.version} subtracts its measured CUDA-graph estimate from the KV budget "
        f"(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, default 1 since 0.20): predicted here "
        f"{cg.estimate_bytes / GIB:.2f} GiB per GPU ({cg.count} graphs: {cg.describe()}; {cg.layers} layers per "
        f"rank); observed {lo}-{hi} GiB in public logs for the default sizes, so the pool may differ by about "
        f"a GiB either way (--enforce-eager or VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 subtract nothing)."
    )


def _sort_fix(v: Version) -> str:
    """What makes a V1 release sample without the sort (``engines/vllm/engine.warmup_sorts_logits``)."""
    if v < FLASHINFER_SAMPLER_OPT_IN_SINCE:
        return "FlashInfer, when installed (the flashinfer-python package), samples without it"
    return f"{FLASHINFER_SAMPLER_ENV}=1 samples with FlashInfer without it"


def _reserves(
    engine: MemoryEngine,
    r: Replica,
    *,
    enforce_eager: bool,
    max_num_batched_tokens: int | None,
    max_num_seqs: int | None,
    dp: int,
    enable_expert_parallel: bool,
    sampler_sorts: bool,
    v0: bool,
    triton_top_k_top_p: bool = False,
    given: Mapping[str, str | None] | None = None,
    knobs: LaunchKnobs | None = None,
) -> tuple[list[int], str]:
    """Each rank's activation / non-torch / CUDA-graph reserve, and how. V0 samples on one rank (the
    driver of the last stage, ``engines/vllm.samples_on_driver_only``); the others reserve the forward
    peak only."""
    reserve_of = functools.partial(
        activation_reserve_bytes,
        r.model,
        engine=engine,
        version=r.version,
        tp=r.tp,
        pp=r.pp,
        gpu_total_mib=min(g.memory_total_mib or 0 for g in r.gpus),
        gpu_name=r.gpu_name,
        enforce_eager=enforce_eager,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        dp=dp,
        enable_expert_parallel=enable_expert_parallel,
        max_model_len=r.max_model_len,
        link=r.link,
        sampler_sorts=sampler_sorts,
        v0=v0,
        triton_top_k_top_p=triton_top_k_top_p,
        given=given,
        knobs=knobs,
    )
    reserve, why = reserve_of()
    n = r.tp * r.pp
    if not v0 or n == 1:
        return [reserve] * n, why
    sampling_rank = (r.pp - 1) * r.tp
    others, _ = reserve_of(samples=False)
    if others != reserve:
        why += f" on rank {sampling_rank}, which samples (V0); {others / GIB:.2f} GiB on the others"
    return [reserve if rank == sampling_rank else others for rank in range(n)], why


def _ranks(r: Replica, k: LaunchKnobs, reserves: Sequence[int], batched: int, notes: list[str], *,
           v0: bool) -> RankBudgets:
    """vLLM, per rank: ``ceil(CUDA total x fraction) - weights - reserve`` (less other tenants where
    the release counts them), in blocks; KV cache groups for stages that mix attention kinds."""
    model, version, tp = r.model, r.version, r.tp
    block = k.block_size or vllm_block_size(
        model.is_mla, version=version, gpu_name=r.gpu_name, kv_cache_dtype=r.kv_cache_dtype
    )
    fixed = k.kv_cache_memory_bytes if version >= KV_CACHE_MEMORY_BYTES_SINCE else None
    if k.kv_cache_memory_bytes and fixed is None:
        notes.append(
            f"--kv-cache-memory-bytes is not in vLLM {version} (it came in "
            f"{KV_CACHE_MEMORY_BYTES_SINCE}): the profiled budget is used."
        )
    frees: list[int | None] = [g.memory_free_mib for g in r.gpus]
    old = counts_other_tenants(version, v0=v0)  # its budget also subtracts other processes' memory
    if old and any(f is None for f in frees):
        notes.append(f"vLLM {version} also subtracts other processes' memory; free memory unknown, not counted.")
    guessed = next((g for g in r.gpus if g.memory_reserved_mib is None), None)
    if guessed is not None:
        notes.append(
            f"vLLM multiplies the total CUDA reports, NVML's less the driver's reservation: "
            f"not read here, {guessed.driver_reserve_mib} MiB assumed."
        )

    override = _blocks_override(k)
    if override is not None:
        notes.append(f"--num-gpu-blocks-override {override:,}: vLLM {version} allocates exactly {override:,} blocks "
                     f"of {block} tokens per worker, whatever the budget (v1/core/kv_cache_utils.py: "
                     f"\"Overriding num_gpu_blocks=... with num_gpu_blocks_override=...\").")
    chunks = chunked_hybrid(version, k.env) and not _hybrid_manager_off(k)
    layer_bytes = kv_layer_bytes_per_token(model, tp=tp, kv_cache_dtype=r.kv_cache_dtype)
    states = model.layer_state_bytes(tp)
    out = RankBudgets(block=block, budgets=[], tokens=[], caches=[])
    for rank, g in enumerate(r.gpus):
        stage = rank // tp
        total = (g.cuda_total_mib or 0) * MIB
        budget = math.ceil(total * r.fraction) - r.w_by_stage[stage] - reserves[rank]
        free = frees[rank]
        if old and free is not None:
            budget -= max(0, total - free * MIB)
        if fixed is not None:  # gpu_worker.py: the given bytes replace the profiled budget
            budget = fixed
        out.budgets.append(budget)
        stage_kinds = [model.layer_kinds[i] for i in r.ranges[stage]]
        stage_states = [states[i] for i in r.ranges[stage]]
        mixed = len({kind for kind in stage_kinds if kind != NO_KV}) > 1 or any(stage_states)
        if mixed and not any(stage_states) and _hybrid_manager_off(k):
            mixed = False  # every layer in one full-attention group
        if mixed and version >= HYBRID_SINCE and r.max_model_len:
            cache = vllm_kv_cache(
                version,
                kinds=stage_kinds,
                page_bytes=layer_bytes * block,
                block_size=block,
                budget_bytes=budget,
                max_model_len=r.max_model_len,
                max_num_batched_tokens=batched,
                pp=r.pp,
                sliding_window=model.sliding_window,
                chunk_size=model.attention_chunk_size,
                state_bytes=[vllm_state_bytes(model, tp, version)[i] for i in r.ranges[stage]],
                is_mla=model.is_mla,
                state_kind=model.linear_state.kind if model.linear_state else None,
                chunked_groups=chunks,
                num_blocks_override=override,
            )
            out.caches.append(cache)
            out.tokens.append(cache.logged_tokens if r.kv_by_stage[stage] else None)
            continue
        out.caches.append(None)
        per_block = r.kv_by_stage[stage] * block
        blocks = (max(0, budget) // per_block if per_block else 0) if override is None else override
        out.tokens.append(blocks * block if per_block else None)
    if old:
        notes.append(
            f"vLLM {version} sizes from total x fraction minus everything in use on the GPU, other tenants included."
        )
    elif oversubscribes_silently(version) or (v0 and version >= V1_DEFAULT_SINCE):
        notes.append(
            f"vLLM {version} sizes from total x fraction as if the GPU were its alone: other "
            f"tenants' memory is not subtracted, and nothing checks that it is free."
        )
    return out


def _blocks_override(k: LaunchKnobs) -> int | None:
    """``--num-gpu-blocks-override`` as the release parsed it (``CacheConfig.num_gpu_blocks_override``)."""
    got = k.typed.get("num_gpu_blocks_override")
    return got if isinstance(got, int) and not isinstance(got, bool) and got > 0 else None


def _hybrid_manager_off(k: LaunchKnobs) -> bool:
    """``--disable-hybrid-kv-cache-manager``: one group for all layers (``unify_hybrid_kv_cache_specs``)."""
    return k.typed.get("disable_hybrid_kv_cache_manager") is True


#: vLLM's Hopper mxfp4 MoE kernels re-layout the expert weights: gpt-oss-120b reported
#: "Model loading took 65.97 GiB" (0.10.1) and 64.38 GiB (0.14.1) against 60.8 GiB on disk, i.e.
#: ~7 % more for the experts (which are 93 % of the checkpoint).
VLLM_MXFP4_EXPERT_LAYOUT = 1.07


def expert_scale(model: ModelSpec) -> float:
    q = model.quantization
    return VLLM_MXFP4_EXPERT_LAYOUT if q is not None and q.method == "mxfp4" else 1.0


def load_notes(model: ModelSpec) -> list[str]:
    if expert_scale(model) == 1.0:
        return []
    return [
        f"vLLM's mxfp4 expert layout counted at +{VLLM_MXFP4_EXPERT_LAYOUT - 1:.0%} "
        f"(gpt-oss-120b loads 64.4-66.0 GiB from 60.8 GiB on disk)."
    ]


def _capability(r: Replica) -> float | None:
    """The replica's lowest compute capability (``memory/capability.py``; None: unknown)."""
    known = [cc for g in r.gpus if (cc := compute_capability(g)) is not None]
    return min(known) if known else None


def rank_budgets(
    engine: MemoryEngine,
    r: Replica,
    *,
    knobs: LaunchKnobs,
    host: Host,
    dp: int,
    enable_expert_parallel: bool,
    enforce_eager: bool,
    max_num_batched_tokens: int | None,
    max_num_seqs: int | None,
    gpu_total_mib: int,
    notes: list[str],
) -> RankBudgets:
    """vLLM's ranks: the reserves (the sampler path read from the engine's environment: the host's
    variables with ``launch.env`` on top), the scheduler's batch, then ``_ranks``; where stages mix
    attention kinds, the pool's concurrency is vLLM's own measure over its KV cache groups."""
    cc = _capability(r)
    v0 = runs_v0(r.version, compute_capability=cc)
    if v0 and r.version >= V1_DEFAULT_SINCE:
        notes.append(
            f"vLLM {r.version} falls back to its V0 engine on {r.gpu_name or 'this GPU'} (compute capability "
            f"{cc:.1f} < 8.0: engine/arg_utils.py _is_v1_supported_oracle): V0's profile run and budget apply."
        )
    env = {**host.env, **knobs.env}
    flashinfer, assumed = flashinfer_in_engine_image(
        r.version, env=env, host_env=host.env, host_flashinfer=host.library("flashinfer-python"),
        serving=knobs.serving,
    )
    sorts = warmup_sorts_logits(r.version, env=env, flashinfer_installed=flashinfer, v0=v0)
    triton = warmup_uses_triton_top_k_top_p(r.version, env=env, v0=v0)
    if assumed and not v0:
        notes.append(assumed)
    reserves, why = _reserves(
        engine,
        r,
        enforce_eager=enforce_eager,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        dp=dp,
        enable_expert_parallel=enable_expert_parallel,
        sampler_sorts=sorts,
        v0=v0,
        triton_top_k_top_p=triton,
        given=knobs.given,
        knobs=knobs,
    )
    batched = (
        max_num_batched_tokens
        or _scheduler(r.model, r.version, v0=v0, gpu_total_mib=gpu_total_mib, gpu_name=r.gpu_name,
                      max_model_len=r.max_model_len)[0]
    )
    cg_note = _cudagraph_note(r, knobs, v0=v0, enforce_eager=enforce_eager, batched=batched,
                              max_num_seqs=max_num_seqs, gpu_total_mib=gpu_total_mib)
    if cg_note:
        notes.append(cg_note)
    out = _ranks(r, knobs, reserves, batched, notes, v0=v0)
    out.reserves.extend(reserves)
    out.reserve_why = why
    caches = [c for c in out.caches if isinstance(c, VllmKvCache)]
    max_len = r.max_model_len
    if caches and max_len:  # vLLM's own measure for mixed attention kinds (kv_groups.py)
        out.concurrency = min(c.max_concurrency for c in caches)
        out.concurrency_note = describe_vllm_cache(min(caches, key=lambda c: c.max_concurrency), r.version)
    return out
