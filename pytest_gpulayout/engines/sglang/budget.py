"""SGLang's memory budget per rank (``model_executor/model_runner.py``, ``kv_cache_configurator``,
``pool_configurator``): the pool is what is free after the weights, minus the ``(1 - mem_fraction_static)``
slack of the free memory measured before loading (``pre``, the world's least free GPU after its context
and communicators). The engine-neutral arithmetic (KV bytes, weights, stages, communicators) is
``memory/``; this module is what is SGLang's alone.
"""

from __future__ import annotations

from packaging.version import Version

from pytest_gpulayout.engines.sglang.hybrid_swa import hybrid_swa
from pytest_gpulayout.engines.sglang.multimodal import serves_multimodal
from pytest_gpulayout.engines.sglang.pool_flags import apply, pool_flags
from pytest_gpulayout.engines.sglang.served import dsa_layout_note
from pytest_gpulayout.host import Host
from pytest_gpulayout.knobs import LaunchKnobs
from pytest_gpulayout.machine.facts import GIB, MIB
from pytest_gpulayout.memory.communicators import communicator_gib
from pytest_gpulayout.memory.communicators import describe as describe_communicators
from pytest_gpulayout.memory.kv import kv_layer_bytes_per_token
from pytest_gpulayout.memory.replica import RankBudgets, Replica, need_memory
from pytest_gpulayout.model.spec import NO_KV, SLIDING

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
#: SGLang's hybrid SWA pool (gpt-oss, Llama 4; which release gives it: ``hybrid_swa.py``): SWA layers get
#: ``swa_full_tokens_ratio`` (0.8) tokens per full-attention token (``model_runner.set_num_token_hybrid``).
SGLANG_SWA_FULL_TOKENS_RATIO = 0.8
#: Why SGLang reserves nothing next to the weights and the pool.
SGLANG_RESERVE_WHY = "SGLang keeps activations and CUDA graphs in the (1 - mem_fraction_static) slack"
#: SGLang's model runner shrinks ``mem_fraction_static`` for every multimodal model, given or default
#: ("Automatically reduce --mem-fraction-static to ... because this is a multimodal model",
#: ``model_executor/model_runner.py``): x 0.95 in 0.4.3.post4, x 0.90 in 0.4.6 (0.4.7-0.4.8 not
#: read). 0.4.9 moved it to ``server_args.py`` where it applies to the default only (x 0.90), and
#: 0.4.10 replaced it with ``adjust_mem_fraction_for_vlm`` (``engines/sglang/engine.py``).
SGLANG_RUNNER_VLM_FACTORS = ((Version("0.4.6"), 0.95), (Version("0.4.9"), 0.90))


def runner_vlm_factor(version: Version) -> float:
    """The model runner's multimodal factor on ``mem_fraction_static`` (1.0 where there is none)."""
    for until, factor in SGLANG_RUNNER_VLM_FACTORS:
        if version < until:
            return factor
    return 1.0


def free_before_load(r: Replica) -> float:
    """``pre``: the world's least free memory after the CUDA context and the communicators (bytes)."""
    frees_known = need_memory(r.gpus, "memory_free_mib", "free memory", "sglang")
    context = SGLANG_CONTEXT_GIB + communicator_gib(tp=r.tp, world=r.tp * r.pp, link=r.link)
    return min(frees_known) * MIB - context * GIB


def _ranks(r: Replica, notes: list[str], knobs: LaunchKnobs | None = None) -> RankBudgets:
    """SGLang, per rank: ``(pre - weights - load overhead) - pre x (1 - fraction)`` over the cell size,
    ``pre`` the world's least free memory after the context and the communicators (their size by
    the TP group's interconnect, ``memory/communicators.py``); hybrid SWA models count their sliding
    layers at ``swa_full_tokens_ratio``."""
    model, tp = r.model, r.tp
    if tp * r.pp > 1:
        notes.append(f"SGLang measures free memory after its communicators are set up; "
                     f"{describe_communicators(tp=tp, world=tp * r.pp, link=r.link)}.")
    pre = free_before_load(r)
    fraction = r.fraction
    served_mm = model.is_multimodal and serves_multimodal(r.version, model, (knobs or LaunchKnobs()).given) is None
    vlm = runner_vlm_factor(r.version) if served_mm else 1.0
    if vlm != 1.0:
        fraction *= vlm
        notes.append(f"SGLang {r.version} reduces mem_fraction_static for a multimodal model: "
                     f"{r.fraction:g} x {vlm:g} = {fraction:.3f} (model_executor/model_runner.py).")
    overhead = (SGLANG_LOAD_OVERHEAD_GIB + (SGLANG_LOAD_OVERHEAD_TP_GIB if tp > 1 else 0)) * GIB
    k = knobs or LaunchKnobs()
    caps = [g.compute_capability for g in r.gpus]
    decided = hybrid_swa(r.version, model, k.given, None if None in caps else min(c for c in caps if c))
    hybrid = decided.on
    if decided.why:
        notes.append(decided.why + ".")
    attn_tp = max(1, tp // max(1, k.attention_dp))
    per_layer = kv_layer_bytes_per_token(model, tp=attn_tp, kv_cache_dtype=r.kv_cache_dtype)
    kinds = model.layer_kinds
    flags = pool_flags(k.given)
    out = RankBudgets(block=flags.page_size, budgets=[], tokens=[], caches=[])
    for rank in range(len(r.gpus)):
        stage = rank // tp
        rest = int(pre - r.w_by_stage[stage] - overhead - pre * (1 - fraction))
        out.budgets.append(rest)
        out.caches.append(None)
        cell: float = r.kv_by_stage[stage]
        if hybrid:
            n_full = sum(1 for i in r.ranges[stage] if kinds[i] not in (NO_KV, SLIDING))
            n_swa = sum(1 for i in r.ranges[stage] if kinds[i] == SLIDING)
            cell = per_layer * (n_full + SGLANG_SWA_FULL_TOKENS_RATIO * n_swa)
        out.tokens.append(apply(int(max(0, rest) // cell), flags) if cell else None)
    if hybrid:
        notes.append(f"SGLang's hybrid SWA pool: the {model.sliding_layers} sliding layers keep "
                     f"{SGLANG_SWA_FULL_TOKENS_RATIO:g} tokens per full-attention token "
                     f"(swa_full_tokens_ratio).")
    if model.is_multimodal:
        notes.append("SGLang's multimodal cache reservation is not modelled.")
    if k.attention_dp > 1:
        notes.append(f"attention DP inside TP: {k.attention_dp} attention-DP groups of {attn_tp} rank"
                     f"{'s' if attn_tp != 1 else ''} each (attn_tp_size = {tp} // {k.attention_dp}, "
                     "layers/dp_attention.py); KV heads and attention weights follow the attention TP size, experts "
                     f"and MLP stay split over TP={tp}; every rank's pool serves its own group's requests.")
        dsa = dsa_layout_note(model, r.version)
        if dsa:
            notes.append(dsa)
    if flags.max_total_tokens is not None:
        notes.append(f"--max-total-tokens {flags.max_total_tokens:,} caps the pool (SGLang keeps the smaller of it and "
                     "what memory holds).")
    if flags.page_size > 1:
        notes.append(f"--page-size {flags.page_size}: the pool is rounded down to whole pages.")
    return out


def rank_budgets(r: Replica, *, knobs: LaunchKnobs, host: Host, dp: int, enable_expert_parallel: bool,
                 enforce_eager: bool, max_num_batched_tokens: int | None, max_num_seqs: int | None,
                 gpu_total_mib: int, notes: list[str]) -> RankBudgets:
    """SGLang's ranks; nothing is reserved beside the weights and the pool inside the fraction."""
    out = _ranks(r, notes, knobs)
    out.reserves.extend([0] * len(r.gpus))
    out.reserve_why = SGLANG_RESERVE_WHY
    return out
