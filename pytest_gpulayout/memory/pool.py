"""The memory model: KV bytes per token per rank, weights per rank, PP splits, and the KV pool.

Pure functions over a ``ModelSpec``, a layout and GPU memory figures, each mirroring the engine code
that decides the number (cited in the docstrings; versions per ``engines.py``). Two engines, two
budgets:

* **vLLM** (``gpu_worker.determine_available_memory``): a fraction of each GPU's *total* memory as
  CUDA reports it, ``total x gpu_memory_utilization``, minus what the profile run measured (weights, activation peak,
  non-torch allocations, and from 0.20 a CUDA-graph estimate). Then every rank gets the smallest
  rank's block count.
* **SGLang** (``kv_cache_configurator._profile_available_bytes``): the *free* memory measured before
  the weights load, MIN over the TP x PP world (``pre``); after loading, whatever is free minus the
  slack ``pre x (1 - mem_fraction_static)`` becomes the pool.

Where an engine's figure depends on things we cannot see before launch (the activation peak, the
CUDA context) we use a documented estimate and say so; the ``startup`` check measures the truth.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.registry import deployment_knobs, resolve_version
from pytest_gpulayout.engines.vllm.engine import (
    KV_CACHE_MEMORY_BYTES_SINCE,
    counts_other_tenants,
    oversubscribes_silently,
    samples_on_driver_only,
    warmup_sorts_logits,
)
from pytest_gpulayout.engines.vllm.engine import block_size as vllm_block_size
from pytest_gpulayout.engines.vllm.engine import scheduler_defaults as vllm_scheduler_defaults
from pytest_gpulayout.engines.vllm.kv_groups import HYBRID_SINCE, VllmKvCache, vllm_kv_cache
from pytest_gpulayout.engines.vllm.kv_groups import describe as describe_vllm_cache
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.knobs import LaunchKnobs
from pytest_gpulayout.machine.facts import GIB, MIB, Gpu, Machine
from pytest_gpulayout.memory.common import MemoryUnknown, engine_name
from pytest_gpulayout.memory.communicators import TpLink, communicator_gib, tp_link
from pytest_gpulayout.memory.communicators import describe as describe_communicators
from pytest_gpulayout.memory.kv import (
    VLLM_MXFP4_EXPERT_LAYOUT,
    kv_bytes_per_token_by_stage,
    kv_layer_bytes_per_token,
)
from pytest_gpulayout.memory.reserves import (
    SGLANG_CONTEXT_GIB,
    SGLANG_HYBRID_SWA_ARCHS,
    SGLANG_LOAD_OVERHEAD_GIB,
    SGLANG_LOAD_OVERHEAD_TP_GIB,
    SGLANG_RESERVE_WHY,
    SGLANG_SWA_FULL_TOKENS_RATIO,
    activation_reserve_bytes,
    default_memory_fraction,
)
from pytest_gpulayout.memory.stages import stage_ranges
from pytest_gpulayout.memory.weights import weight_bytes_by_stage
from pytest_gpulayout.model import weights as W
from pytest_gpulayout.model.spec import NO_KV, SLIDING, ModelSpec
from pytest_gpulayout.placement import place

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



@dataclass(frozen=True)
class _Replica:
    """One replica as both engines' rank loops read it: layout, GPUs in rank order, the memory
    fraction and the per-stage sizes (``rank = pp_rank x tp + tp_rank``)."""

    model: ModelSpec
    version: Version
    tp: int
    pp: int
    gpus: tuple[Gpu, ...]
    fraction: float
    kv_cache_dtype: str
    max_model_len: int | None
    ranges: tuple[range, ...]
    kv_by_stage: tuple[int, ...]
    w_by_stage: tuple[int, ...]
    link: TpLink = TpLink.UNKNOWN

    @property
    def gpu_name(self) -> str:
        return self.gpus[0].name if self.gpus else ""


@dataclass(frozen=True)
class _Ranks:
    """Per rank: the KV budget, the tokens it alone could hold (None: no KV layer on its stage) and
    vLLM's KV cache groups where the stage mixes attention kinds."""

    block: int
    budgets: list[int]
    tokens: list[int | None]
    caches: list[VllmKvCache | None]


def _vllm_reserves(r: _Replica, *, enforce_eager: bool, max_num_batched_tokens: int | None,
                   max_num_seqs: int | None, dp: int, enable_expert_parallel: bool,
                   sampler_sorts: bool) -> tuple[list[int], str]:
    """Each rank's activation / non-torch / CUDA-graph reserve, and how. V0 samples on one rank (the
    driver of the last stage, ``engines/vllm.samples_on_driver_only``); the others reserve the forward
    peak only."""
    reserve_of = functools.partial(
        activation_reserve_bytes, r.model, engine="vllm", version=r.version, tp=r.tp, pp=r.pp,
        gpu_total_mib=min(g.memory_total_mib or 0 for g in r.gpus), gpu_name=r.gpu_name,
        enforce_eager=enforce_eager, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
        dp=dp, enable_expert_parallel=enable_expert_parallel, max_model_len=r.max_model_len, link=r.link,
        sampler_sorts=sampler_sorts)
    reserve, why = reserve_of()
    n = r.tp * r.pp
    if not samples_on_driver_only(r.version) or n == 1:
        return [reserve] * n, why
    sampling_rank = (r.pp - 1) * r.tp
    others, _ = reserve_of(samples=False)
    if others != reserve:
        why += f" on rank {sampling_rank}, which samples (V0); {others / GIB:.2f} GiB on the others"
    return [reserve if rank == sampling_rank else others for rank in range(n)], why


def _vllm_ranks(r: _Replica, k: LaunchKnobs, reserves: Sequence[int], batched: int, notes: list[str]) -> _Ranks:
    """vLLM, per rank: ``ceil(CUDA total x fraction) - weights - reserve`` (less other tenants where
    the release counts them), in blocks; KV cache groups for stages that mix attention kinds."""
    model, version, tp = r.model, r.version, r.tp
    block = k.block_size or vllm_block_size(model.is_mla, version=version, gpu_name=r.gpu_name,
                                            kv_cache_dtype=r.kv_cache_dtype)
    fixed = k.kv_cache_memory_bytes if version >= KV_CACHE_MEMORY_BYTES_SINCE else None
    if k.kv_cache_memory_bytes and fixed is None:
        notes.append(f"--kv-cache-memory-bytes is not in vLLM {version} (it came in "
                     f"{KV_CACHE_MEMORY_BYTES_SINCE}): the profiled budget is used.")
    frees: list[int | None] = [g.memory_free_mib for g in r.gpus]
    old = counts_other_tenants(version)  # its budget also subtracts other processes' memory
    if old and any(f is None for f in frees):
        notes.append(f"vLLM {version} also subtracts other processes' memory; free memory unknown, "
                     f"not counted.")
    guessed = next((g for g in r.gpus if g.memory_reserved_mib is None), None)
    if guessed is not None:
        notes.append(f"vLLM multiplies the total CUDA reports, NVML's less the driver's reservation: "
                     f"not read here, {guessed.driver_reserve_mib} MiB assumed.")

    layer_bytes = kv_layer_bytes_per_token(model, tp=tp, kv_cache_dtype=r.kv_cache_dtype)
    states = model.layer_state_bytes(tp)
    out = _Ranks(block=block, budgets=[], tokens=[], caches=[])
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
        if mixed and version >= HYBRID_SINCE and (r.max_model_len or model.max_position_embeddings):
            cache = vllm_kv_cache(
                version, kinds=stage_kinds, page_bytes=layer_bytes * block, block_size=block,
                budget_bytes=budget, max_model_len=r.max_model_len or model.max_position_embeddings or 0,
                max_num_batched_tokens=batched, pp=r.pp, sliding_window=model.sliding_window,
                chunk_size=model.attention_chunk_size, state_bytes=stage_states)
            out.caches.append(cache)
            out.tokens.append(cache.logged_tokens if r.kv_by_stage[stage] else None)
            continue
        out.caches.append(None)
        per_block = r.kv_by_stage[stage] * block
        out.tokens.append(max(0, budget) // per_block * block if per_block else None)
    if old:
        notes.append(f"vLLM {version} sizes from total x fraction minus everything in use on the GPU, "
                     f"other tenants included.")
    elif oversubscribes_silently(version):
        notes.append(f"vLLM {version} sizes from total x fraction as if the GPU were its alone: other "
                     f"tenants' memory is not subtracted, and nothing checks that it is free.")
    return out


def _sglang_ranks(r: _Replica, notes: list[str]) -> _Ranks:
    """SGLang, per rank: ``(pre - weights - load overhead) - pre x (1 - fraction)`` over the cell size,
    ``pre`` the world's least free memory after the context and the communicators (their size by
    the TP group's interconnect, ``memory/communicators.py``); hybrid SWA models count their sliding
    layers at ``swa_full_tokens_ratio``."""
    model, tp = r.model, r.tp
    frees_known = _need_memory(r.gpus, "memory_free_mib", "free memory", "sglang")
    context = SGLANG_CONTEXT_GIB + communicator_gib(tp=tp, world=tp * r.pp, link=r.link)
    if tp * r.pp > 1:
        notes.append(f"SGLang measures free memory after its communicators are set up; "
                     f"{describe_communicators(tp=tp, world=tp * r.pp, link=r.link)}.")
    pre = min(frees_known) * MIB - context * GIB
    overhead = (SGLANG_LOAD_OVERHEAD_GIB + (SGLANG_LOAD_OVERHEAD_TP_GIB if tp > 1 else 0)) * GIB
    hybrid = bool(set(model.architectures) & SGLANG_HYBRID_SWA_ARCHS) and model.sliding_layers > 0
    per_layer = kv_layer_bytes_per_token(model, tp=tp, kv_cache_dtype=r.kv_cache_dtype)
    kinds = model.layer_kinds
    out = _Ranks(block=1, budgets=[], tokens=[], caches=[])
    for rank in range(len(r.gpus)):
        stage = rank // tp
        rest = int(pre - r.w_by_stage[stage] - overhead - pre * (1 - r.fraction))
        out.budgets.append(rest)
        out.caches.append(None)
        cell: float = r.kv_by_stage[stage]
        if hybrid:
            n_full = sum(1 for i in r.ranges[stage] if kinds[i] not in (NO_KV, SLIDING))
            n_swa = sum(1 for i in r.ranges[stage] if kinds[i] == SLIDING)
            cell = per_layer * (n_full + SGLANG_SWA_FULL_TOKENS_RATIO * n_swa)
        out.tokens.append(int(max(0, rest) // cell) if cell else None)
    if hybrid:
        notes.append(f"SGLang's hybrid SWA pool: the {model.sliding_layers} sliding layers keep "
                     f"{SGLANG_SWA_FULL_TOKENS_RATIO:g} tokens per full-attention token "
                     f"(swa_full_tokens_ratio).")
    if model.is_multimodal:
        notes.append("SGLang's multimodal cache reservation is not modelled.")
    return out


def predict_pool(model: ModelSpec, *, engine: str, engine_version: str | None, tp: int, pp: int,
                 gpus: Sequence[Gpu], max_model_len: int | None, memory_fraction: float | None,
                 kv_cache_dtype: str = "auto", enable_expert_parallel: bool = False, dp: int = 1,
                 enforce_eager: bool = False, max_num_batched_tokens: int | None = None,
                 max_num_seqs: int | None = None,
                 pp_layer_partition: str | Sequence[int] | None = None,
                 host: Host = BARE_HOST, host_min_total_mib: int | None = None,
                 knobs: LaunchKnobs | None = None, link: TpLink = TpLink.UNKNOWN) -> PoolPrediction:
    """Predict one replica's KV pool. ``gpus`` are the replica's GPUs in rank order
    (``rank = pp_rank x tp + tp_rank``, both engines' mapping).

    vLLM (0.10+, ``gpu_worker.determine_available_memory`` + ``kv_cache_utils``), per rank::

        budget = ceil(cuda_total x gpu_memory_utilization) - weights(stage) - activation_reserve(rank)
        tokens = budget // (bytes_per_token(stage) x block) x block          # block 16 (MLA: 64)
        pool   = min over ranks                                           # get_kv_cache_configs

    ``cuda_total`` is NVML's total less the driver's reservation (``Gpu.cuda_total_mib``). Before
    0.6.5 and in 0.8-0.9.0 the profile also counts other processes' memory (``total - free`` is
    subtracted; ``engines/vllm.counts_other_tenants``); V0 (< 0.8) reserves its sampler peak on the
    one rank that samples (``_vllm_reserves``).

    SGLang (``kv_cache_configurator`` + ``pool_configurator``)::

        pre    = min free over the TP x PP world - CUDA context (0.24 GiB)
                 - communicators (TP over NVLink 1.25 GiB, else 0.19; ``memory/communicators.py``)
        rest   = (pre - weights(stage) - load overhead) - pre x (1 - mem_fraction_static)
        tokens = rest // cell_size(stage)            # page size 1; PP: MIN over stages

    gpt-oss-style hybrid SWA models in SGLang report the full-attention pool: ``rest`` over
    ``full_layers + 0.8 x swa_layers`` layers. ``max_model_len`` defaults to the model's derived
    maximum; ``max_concurrency`` is ``kv_tokens / max_model_len`` except for vLLM hybrid sliding
    models (their KV cache groups, ``memory/vllm_kv.py``). GPU memory unknown -> ``MemoryUnknown``.

    ``link``: the interconnect of the replica's TP groups (``communicators.tp_link``; unknown counts as
    NVLink), which sizes the communicators SGLang and vLLM before 0.11 take out of the pool.

    ``knobs`` are what the launch's flags and variables change (``engines/knobs.py``): they fill
    ``enforce_eager``, the scheduler sizes and the PP partition where those are not given, and
    ``--kv-cache-memory-bytes`` (vLLM >= 0.10.2) / ``--block-size`` replace the budget / block.
    """
    e = engine_name(engine)
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
    replica = _Replica(model=model, version=version, tp=tp, pp=pp, gpus=tuple(gpus), fraction=fraction,
                       kv_cache_dtype=kv_cache_dtype, max_model_len=max_model_len, ranges=tuple(ranges),
                       kv_by_stage=tuple(kv_by_stage), w_by_stage=tuple(w_by_stage), link=link)
    if e == "vllm":
        sorts = warmup_sorts_logits(version, env={**host.env, **k.env},
                                    flashinfer_installed=host.library("flashinfer-python") is not None)
        reserves, reserve_why = _vllm_reserves(
            replica, enforce_eager=enforce_eager, max_num_batched_tokens=max_num_batched_tokens,
            max_num_seqs=max_num_seqs, dp=dp, enable_expert_parallel=enable_expert_parallel,
            sampler_sorts=sorts)
        batched = max_num_batched_tokens or vllm_scheduler_defaults(
            version, gpu_total_mib=min(totals), gpu_name=replica.gpu_name, max_model_len=max_model_len)[0]
        ranks = _vllm_ranks(replica, k, reserves, batched, notes)
    else:
        reserves = [0] * (tp * pp)
        reserve_why = SGLANG_RESERVE_WHY
        ranks = _sglang_ranks(replica, notes)
    reserve = max(reserves)
    block, budgets, tokens, hybrid_caches = ranks.block, ranks.budgets, ranks.tokens, ranks.caches

    bounded = [r for r, t in enumerate(tokens) if t is not None]
    if bounded:
        # ties (SGLang sizes every rank by the world's least free GPU) go to the GPU with least free memory
        limiting_rank = min(bounded, key=lambda r: (tokens[r], budgets[r], gpus[r].memory_free_mib or 0))
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


def predict_replicas(dep: Deployment, machine: Machine, model: ModelSpec, host: Host = BARE_HOST,
                     knobs: LaunchKnobs | None = None) -> list[PoolPrediction]:
    """One ``PoolPrediction`` per DP replica of ``dep`` on ``machine`` (raises ``MemoryUnknown`` /
    ``PlacementError``): each replica's GPUs in rank order, as the engines place them. ``knobs``: the
    launch's settings when the caller has read them already. The checks read it once per deployment,
    through ``engine.Subject.replicas``."""
    if knobs is None:
        knobs = deployment_knobs(dep.engine, dep.launch.args, dep.launch.env, host.env)
    placement = place(dep, machine)
    predicted = [
        predict_pool(
            model, engine=dep.engine, engine_version=dep.engine_version, tp=dep.tp, pp=dep.pp,
            gpus=[machine.gpu(i) for i in placement.replica_gpus(d)], max_model_len=dep.max_model_len,
            memory_fraction=dep.memory_fraction, kv_cache_dtype=dep.kv_cache_dtype,
            enable_expert_parallel=dep.enable_expert_parallel, dp=dep.dp, host=host,
            host_min_total_mib=host_min_total_mib(machine, placement.replica_gpus(d)), knobs=knobs,
            link=tp_link(machine, placement.replicas[d]),
        )
        for d in range(dep.dp)
    ]
    return predicted


def host_min_total_mib(machine: Machine, gpus: Sequence[int]) -> int | None:
    """The smallest total memory over every GPU on the host(s) of ``gpus``: what SGLang's
    ``get_nvgpu_memory_capacity()`` reads from ``nvidia-smi`` (which ignores CUDA_VISIBLE_DEVICES)."""
    hosts = {machine.gpu(i).host for i in gpus}
    totals = [g.memory_total_mib for g in machine.gpus if g.host in hosts and g.memory_total_mib is not None]
    return min(totals) if totals else None
