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

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.knobs import LaunchKnobs
from pytest_gpulayout.machine.facts import GIB, Gpu, Machine
from pytest_gpulayout.memory.common import MemoryEngine, resolve_version
from pytest_gpulayout.memory.communicators import TpLink, tp_link
from pytest_gpulayout.memory.draft import plus
from pytest_gpulayout.memory.kv import kv_bytes_per_token_by_stage
from pytest_gpulayout.memory.replica import Replica, need_memory
from pytest_gpulayout.memory.reserves import default_fraction_answer
from pytest_gpulayout.memory.stages import stage_ranges
from pytest_gpulayout.memory.weights import weight_bytes_by_stage
from pytest_gpulayout.model import weights as W
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.placement import Placement

#: ``model.notes`` that say a value was filled in rather than read (``model/config.py``): class
#: defaults for keys a config leaves out, a missing ``intermediate_size`` or ``torch_dtype``.
FILLED_NOTE_STARTS = ("Filled from", "intermediate_size missing", "No torch_dtype")
#: ``model.notes`` an engine's ``as_served`` adds when the line rewrites the config (vLLM ``--hf-overrides``,
#: ``VLLM_MLA_DISABLE``): the verdict says what was applied
SERVED_NOTE_START = "As served:"

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
    #: what of the memory the engine takes out of the pool is not counted (a speculative draft that could not be
    #: read, ``memory/draft.py``): the pool is then an upper bound, and ``kv_pool`` never passes on it silently
    uncounted: tuple[str, ...] = ()
    #: what may stop the engine starting that the pool does not show (``RankBudgets.cautions``)
    cautions: tuple[str, ...] = ()

    @property
    def fits_one_request(self) -> bool | None:
        """Can the pool hold one ``max_model_len`` request (vLLM refuses to start otherwise)?"""
        if self.max_concurrency is None:
            return None
        return self.max_concurrency >= 1.0


def predict_pool(model: ModelSpec, *, engine: MemoryEngine, engine_version: str | Version | None, tp: int, pp: int,
                 gpus: Sequence[Gpu], max_model_len: int | None, memory_fraction: float | None,
                 kv_cache_dtype: str = "auto", enable_expert_parallel: bool = False, dp: int = 1,
                 enforce_eager: bool = False, max_num_batched_tokens: int | None = None,
                 max_num_seqs: int | None = None,
                 pp_layer_partition: str | Sequence[int] | None = None,
                 host: Host = BARE_HOST, host_min_total_mib: int | None = None,
                 knobs: LaunchKnobs | None = None, link: TpLink = TpLink.UNKNOWN,
                 version_source: str | None = None) -> PoolPrediction:
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
    models (their KV cache groups, ``engines/vllm/kv_groups.py``). GPU memory unknown -> ``MemoryUnknown``.

    ``link``: the interconnect of the replica's TP groups (``communicators.tp_link``; unknown counts as
    NVLink), which sizes the communicators SGLang and vLLM before 0.11 take out of the pool.

    ``knobs`` are what the launch's flags and variables change (``engines/knobs.py``): they fill
    ``enforce_eager``, the scheduler sizes and the PP partition where those are not given, and
    ``--kv-cache-memory-bytes`` (vLLM >= 0.10.2) / ``--block-size`` replace the budget / block.
    """
    e = engine
    k = knobs or LaunchKnobs()
    enforce_eager = enforce_eager or k.enforce_eager
    max_num_batched_tokens = max_num_batched_tokens or k.max_num_batched_tokens
    max_num_seqs = max_num_seqs or k.max_num_seqs
    pp_layer_partition = pp_layer_partition or k.pp_layer_partition
    if len(gpus) != tp * pp:
        raise ValueError(f"predict_pool needs one replica's {tp * pp} GPUs (TP={tp} x PP={pp}), "
                         f"got {len(gpus)}")
    if isinstance(engine_version, Version) and version_source is not None:
        version, vsource = engine_version, version_source  # the deployment's release, resolved once (Subject)
    else:
        version, vsource = resolve_version(e, None if engine_version is None else str(engine_version), host)
    max_len = max_model_len or model.max_position_embeddings
    notes: list[str] = []
    if vsource == "assumed latest known":
        notes.append(f"{e.name} is not installed here: defaults of {e.name} {version} assumed (pin engine_version).")

    totals = need_memory(gpus, "memory_total_mib", "total memory", e.name)
    if memory_fraction is not None:
        fraction, fsource = float(memory_fraction), "memory_fraction"
    else:
        d = default_fraction_answer(e, version, gpu_total_mib=min(totals), tp=tp, pp=pp, model=model,
                                    host_min_total_mib=host_min_total_mib, knobs=k)
        fraction, fsource = d.fraction, d.why
        notes.extend(d.notes)
    ranges = stage_ranges(model.num_hidden_layers, pp, e, partition=pp_layer_partition, version=version)
    attn_tp = max(1, tp // max(1, k.attention_dp))  # SGLang's attention DP: KV heads follow tp / attn_dp
    kv_by_stage = kv_bytes_per_token_by_stage(model, engine=e, tp=attn_tp, pp=pp, kv_cache_dtype=kv_cache_dtype,
                                              pp_layer_partition=pp_layer_partition, version=version)
    w_by_stage = weight_bytes_by_stage(model, tp=tp, pp=pp, engine=e,
                                       enable_expert_parallel=enable_expert_parallel, dp=dp,
                                       pp_layer_partition=pp_layer_partition, version=version,
                                       attention_dp=k.attention_dp,
                                       dp_lm_head="--enable-dp-lm-head" in k.given)  # SGLang's flag only
    # a speculative draft's weights and KV, where the engine sizes the pool with them (``memory/draft.py``)
    draft = e.draft_memory(model, knobs=k, version=version, tp=tp, ranges=tuple(ranges), kv_cache_dtype=kv_cache_dtype,
                           dp=dp, enable_expert_parallel=enable_expert_parallel)
    kv_by_stage, w_by_stage = plus(kv_by_stage, draft.kv_by_stage), plus(w_by_stage, draft.weights_by_stage)
    notes.extend(draft.notes)
    replica = Replica(model=model, version=version, tp=tp, pp=pp, gpus=tuple(gpus), fraction=fraction,
                       kv_cache_dtype=kv_cache_dtype, max_model_len=max_len, ranges=tuple(ranges),
                       kv_by_stage=tuple(kv_by_stage), w_by_stage=tuple(w_by_stage), link=link)
    ranks = e.rank_budgets(replica, knobs=k, host=host, dp=dp, enable_expert_parallel=enable_expert_parallel,
                           enforce_eager=enforce_eager, max_num_batched_tokens=max_num_batched_tokens,
                           max_num_seqs=max_num_seqs, gpu_total_mib=min(totals), notes=notes)
    reserves, reserve_why = ranks.reserves, ranks.reserve_why
    reserve = max(reserves)
    block, budgets, tokens = ranks.block, ranks.budgets, ranks.tokens

    bounded = [r for r, t in enumerate(tokens) if t is not None]
    if bounded:
        # ties (SGLang sizes every rank by the world's least free GPU) go to the GPU with least free memory
        limiting_rank = min(bounded, key=lambda r: (tokens[r], budgets[r], gpus[r].memory_free_mib or 0))
        kv_tokens = tokens[limiting_rank] or 0
    else:
        limiting_rank, kv_tokens = min(range(len(budgets)), key=budgets.__getitem__), 0
        notes.append(f"{model.name} has no layer with a per-token KV cache: there is no token pool to size.")

    concurrency: float | None = None
    own_measure = ranks.concurrency is not None
    if max_len:
        concurrency = kv_tokens / max_len
        if ranks.concurrency is not None:  # the engine's own measure (vLLM's KV cache groups)
            concurrency = ranks.concurrency
            notes.append(ranks.concurrency_note)

    # -- what the numbers assume -------------------------------------------------------------
    if model.is_mla:
        notes.append(f"MLA: every rank caches the full {model.kv_lora_rank}+{model.qk_rope_head_dim} latent "
                     f"per layer, so TP does not shrink KV per token.")
    elif model.num_key_value_heads < attn_tp:
        notes.append(f"{model.num_key_value_heads} KV heads < TP={attn_tp}: each rank keeps one replicated head.")
    if model.sliding_layers and not own_measure:
        notes.append(f"{model.sliding_layers} of {model.num_hidden_layers} layers use a "
                     f"{model.sliding_window:,}-token sliding window: counted as full per token, as the "
                     f"engines report the pool; a request needs less there"
                     + (" (max_concurrency accounts for it)." if e.concurrency_counts_sliding else "."))
    no_kv = model.num_hidden_layers - model.kv_layers
    if no_kv:
        notes.append(f"{no_kv} linear-attention/Mamba layers keep a fixed per-request state, not per-token "
                     f"KV (that state is not modelled).")
    q = model.quantization
    if model.served_kv_cache_dtype:
        notes.append(f"KV cache in {model.served_kv_cache_dtype}: {model.served_kv_cache_why}.")
    elif (kv_cache_dtype or "auto").lower() == "auto" and q is not None and q.kv_cache_dtype:
        notes.append(f"KV cache in {q.kv_cache_dtype}: the checkpoint declares a KV cache scheme.")
    ratio = W.measured_ratio(model)
    if model.weight_bytes_measured and abs(ratio - 1) > 0.10:
        notes.append(f"The checkpoint measures {model.weight_bytes_measured / GIB:.1f} GiB against "
                     f"{W.computed_weight_bytes(model, on_disk=True) / GIB:.1f} GiB computed from its "
                     f"config; per-rank weights follow the measured size.")
    notes.extend(e.load_notes(model))
    # what the model's config left out and the loader filled in (class defaults, a missing width or
    # dtype) changes every figure above: the verdict names the keys and the values used
    notes.extend(n for n in model.notes
                 if "not modelled" in n or n.startswith((*FILLED_NOTE_STARTS, SERVED_NOTE_START)))

    w_max = max(w_by_stage)
    return PoolPrediction(
        engine=e.name, version=str(version), version_source=vsource, memory_fraction=fraction,
        fraction_source=fsource, kv_cache_dtype=kv_cache_dtype, kv_bytes_per_token_per_rank=max(kv_by_stage),
        kv_bytes_per_token_by_stage=kv_by_stage, weights_bytes_per_rank=w_max,
        weights_bytes_by_stage=w_by_stage, weights_gib_per_rank=w_max / GIB,
        activation_reserve_gib=reserve / GIB, activation_reserve_why=reserve_why,
        kv_budget_bytes_per_rank=min(budgets), kv_tokens=kv_tokens,
        kv_tokens_by_gpu=tuple((g.index, t) for g, t in zip(gpus, tokens, strict=True) if t is not None),
        block_size=block,
        max_model_len=max_len, max_concurrency=concurrency, limiting_gpu=gpus[limiting_rank].index,
        sliding_layers=model.sliding_layers, kv_layers=model.kv_layers, notes=tuple(notes),
        uncounted=draft.uncounted, cautions=tuple(ranks.cautions),
    )


def predict_replicas(dep: Deployment, machine: Machine, model: ModelSpec, host: Host, knobs: LaunchKnobs, *,
                     engine: MemoryEngine, version: Version, version_source: str, placement: Placement,
                     max_model_len: int | None) -> list[PoolPrediction]:
    """One ``PoolPrediction`` per DP replica of ``dep`` on ``machine`` (raises ``MemoryUnknown``): each
    replica's GPUs in rank order, as the engines place them. The release, the placement and the context
    length are the deployment's own, resolved once (``engine.Subject``), as are ``knobs``, the launch's
    settings; the checks read the result once per deployment, through ``Subject.replicas``."""
    predicted = [
        predict_pool(
            model, engine=engine, engine_version=version, version_source=version_source, tp=dep.tp, pp=dep.pp,
            gpus=[machine.gpu(i) for i in placement.replica_gpus(d)], max_model_len=max_model_len,
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
