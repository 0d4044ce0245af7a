"""TensorRT-LLM's KV budget per rank: ``KvCacheCreator`` of the PyTorch backend.

``tensorrt_llm/_torch/pyexecutor/_util.py`` (1.2.0rc2, commit b35ac1b6), ``configure_kv_cache_capacity``
and ``_cal_max_memory``: after the weights load, one estimation run pushes requests totalling
``max_num_tokens`` tokens through the model; then::

    peak        = torch peak (weights + activations + the small estimation KV cache)
                  + max(used on the device - used by torch, 0)     # NCCL, CUDA context, other processes
    available   = (total - peak + estimation KV cache) x free_gpu_memory_fraction
    max_tokens  = available // kv_size_per_token

``total`` and ``used`` come from ``torch.cuda.mem_get_info()`` (the whole device, so other processes on
the GPU shrink the pool, the fraction is of what is left after the peak, not of the total).
``resource_manager.py`` ``KVCacheManager.calculate_max_num_blocks`` then takes the MIN over every rank
(``allreduce(max_tokens, op=MIN)``: the smallest rank sets the pool) and
``blocks = ceil(max_tokens / tokens_per_block)`` with 32 tokens per block. MLA caches the full
``kv_lora_rank + qk_rope_head_dim`` latent on every rank (``get_cache_size_per_token``: no TP division).

What the log does not say is estimated: the activation peak of the estimation run (its shape below)
and the memory outside torch (CUDA context, cuBLAS workspaces). In the 0.20 log read
(NVIDIA/TensorRT-LLM#6294) the CUDA graphs are captured after the pool is allocated, so they live in
the ``1 - fraction`` slack and are not counted here.
"""

from __future__ import annotations

import math

from pytest_gpulayout.engines.trtllm.defaults import DEFAULT_MAX_NUM_TOKENS, TOKENS_PER_BLOCK
from pytest_gpulayout.host import Host
from pytest_gpulayout.knobs import LaunchKnobs
from pytest_gpulayout.machine.facts import GIB, MIB
from pytest_gpulayout.memory.communicators import communicator_gib
from pytest_gpulayout.memory.communicators import describe as describe_communicators
from pytest_gpulayout.memory.replica import RankBudgets, Replica, need_memory
from pytest_gpulayout.model.spec import ModelSpec

#: Memory outside torch on a rank without peers: CUDA context and library workspaces (an estimate;
#: TensorRT-LLM logs it as "Memory used outside torch (e.g., NCCL and CUDA graphs)").
TRTLLM_NON_TORCH_GIB = 0.75
#: Bytes of activation kept per token of the estimation run, in units of the model dtype's width:
#: the fused gate/up output (2 x I / TP), its activation (I / TP), the QKV output and four hidden-wide
#: buffers (residual, norm, attention output, o_proj output). An estimate of the peak's shape.
ACTIVATION_HIDDEN_BUFFERS = 4


def activation_bytes(model: ModelSpec, tp: int, max_num_tokens: int) -> int:
    """The estimation run's activation peak on one rank: ``max_num_tokens`` tokens at once."""
    width = 2  # the activations run in bf16/fp16 whatever the weights' format
    inter = model.intermediate_size
    if model.is_moe and model.moe_intermediate_size:
        inter = model.moe_intermediate_size * max(1, model.num_experts_per_tok or 1)
    qkv = (model.num_attention_heads + 2 * model.num_key_value_heads) * model.head_dim
    per_token = width * (3 * inter // tp + qkv // tp + ACTIVATION_HIDDEN_BUFFERS * model.hidden_size)
    return per_token * max_num_tokens


def rank_budgets(r: Replica, *, knobs: LaunchKnobs, host: Host, dp: int, enable_expert_parallel: bool,
                 enforce_eager: bool, max_num_batched_tokens: int | None, max_num_seqs: int | None,
                 gpu_total_mib: int, notes: list[str]) -> RankBudgets:
    """Per rank ``(total - peak) x fraction`` over the stage's KV bytes per token, rounded the way the
    pool is (the MIN over ranks, then whole 32-token blocks: ``predict_pool`` takes the smallest)."""
    totals = need_memory(r.gpus, "memory_total_mib", "total memory", "TensorRT-LLM")
    frees = need_memory(r.gpus, "memory_free_mib", "free memory", "TensorRT-LLM")
    tokens_run = max_num_batched_tokens or DEFAULT_MAX_NUM_TOKENS
    block = knobs.block_size or TOKENS_PER_BLOCK
    act = activation_bytes(r.model, r.tp, tokens_run)
    comm = communicator_gib(tp=r.tp, world=r.tp * r.pp, link=r.link)
    out = RankBudgets(block=block, budgets=[], tokens=[], caches=[])
    for rank, gpu in enumerate(r.gpus):
        stage = rank // r.tp
        total_mib = gpu.cuda_total_mib or totals[rank]
        total = total_mib * MIB
        others = max(0, total_mib - frees[rank]) * MIB   # mem_get_info counts every process on the device
        reserve = int(act + (TRTLLM_NON_TORCH_GIB + comm) * GIB)
        peak = r.w_by_stage[stage] + reserve + others
        budget = int((total - peak) * r.fraction)
        if knobs.kv_cache_memory_bytes:
            budget = min(budget, knobs.kv_cache_memory_bytes)   # kv_cache_config.max_gpu_total_bytes
        out.budgets.append(budget)
        out.reserves.append(reserve)
        out.caches.append(None)
        cell = r.kv_by_stage[stage]
        out.tokens.append(math.ceil(max(0, budget) // cell / block) * block if cell else None)
    out.reserve_why = (f"TensorRT-LLM's profiling peak: activations for max_num_tokens={tokens_run:,} "
                       f"({act / GIB:.2f} GiB, estimated) and {TRTLLM_NON_TORCH_GIB + comm:.2f} GiB outside torch")
    if r.tp * r.pp > 1:
        notes.append(f"TensorRT-LLM counts NCCL in its profiling peak; "
                     f"{describe_communicators(tp=r.tp, world=r.tp * r.pp, link=r.link)}.")
    notes.append(f"TensorRT-LLM: the KV cache gets free_gpu_memory_fraction {r.fraction:g} of what is left after "
                 f"its profiling peak (weights, activations for {tokens_run:,} tokens, memory outside torch and "
                 f"other processes), not of the total; the smallest rank sets every rank's pool "
                 f"(_torch/pyexecutor/_util.py KvCacheCreator).")
    return out
