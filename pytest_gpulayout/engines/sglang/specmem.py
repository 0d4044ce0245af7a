"""Speculative decoding in SGLang's memory, per release: the default ``mem_fraction_static`` it lowers, and where the
draft worker's memory comes from.

Read in the wheels (``sglang-<v>/``):

* The target's pool is sized first, from the target alone (``model_executor/model_runner.py profile_max_num_token``);
  with EAGLE / EAGLE3 / NEXTN / STANDALONE the target then raises its ``max_total_num_tokens`` by a headroom for the
  draft and verify tokens it shares its token indices with, ``max_num_reqs x (speculative_num_steps x
  speculative_eagle_topk + speculative_num_draft_tokens) + 100`` (``draft_runner_cache_size``, 0.5.6
  ``model_runner.py`` L1696-1718), which the draft worker (``speculative/eagle_worker.py``, ``standalone_worker.py``)
  then allocates as its own KV pool, with its weights and its CUDA graphs, out of what the target left: the
  ``(1 - mem_fraction_static)`` slack. So the draft takes nothing out of the pool the checks predict (the headroom
  tokens are for the draft and verify tokens, not for requests); it takes memory out of the slack, which is why the
  default fraction is lowered for it.
* The default ``mem_fraction_static`` reserves more for it (``server_args.py``): 0.4.8 - 0.5.1.post3 ``reserved_mem +=
  2 * 1024`` for any algorithm ("draft model and larger cuda graph buffers", 0.4.8 L307-309, before the attention-DP
  term); 0.5.2 6 GiB for STANDALONE, else 2 (L486-492); 0.5.3 - 0.5.9 after the 10 GiB floor, 6 GiB for STANDALONE, 2
  for the others but NGRAM (0.5.6 L848-853); 0.5.10 - 0.5.13.post1 4 GiB instead of 2 ("eagle draft models and cuda
  graphs", 0.5.10 L1316-1322, 0.5.13 L1628-1634); 0.5.14 on, no speculative term (0.5.14 ``server_args.py``
  L3278-3312, 0.5.23 ``arg_groups/memory_hook.py`` L296-316). Before 0.4.8 the default is the TP table this model
  reads (``engine.memory_defaults``); 0.4.7's speculative term is not read.
* From 0.5.14 the draft is counted in the pool instead (sgl-project/sglang#23862, "Fix --mem-fraction-static not
  accounting for EAGLE draft model KV cache"): the draft's weights are loaded before the target's pool is profiled
  (``model_executor/model_runner_kv_cache_mixin.py _profile_available_bytes`` L85-119: "Loaded weights (target +
  draft)"), and for EAGLE / EAGLE3 / NEXTN / STANDALONE the target's cell size is scaled to hold the draft's layers
  too, ``int(cell x (1 + draft_layers / layers))`` (``pool_configurator.py`` L129-145), ``draft_layers`` the draft
  config's ``num_nextn_predict_layers``, else its layer count (``model_runner.py`` L435-455); NEXTN on DeepSeek /
  GLM-4.5 / ... drafts with the target's own checkpoint when no draft path is given
  (``arg_groups/speculative_hook.py`` L290-306). The draft's embedding and lm_head are built before they are
  swapped for the target's and are still resident when the pool is sized (sgl-project/sglang#36452), so they count.
"""

from __future__ import annotations

import dataclasses

from packaging.version import Version

from pytest_gpulayout.engines.sglang.budget import free_before_load
from pytest_gpulayout.engines.sglang.hybrid_swa import MODELLED as HYBRID_SWA_ARCHS
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.knobs import LaunchKnobs, SpecDraft
from pytest_gpulayout.machine.facts import GIB
from pytest_gpulayout.memory.common import MemoryEngine
from pytest_gpulayout.memory.draft import NO_DRAFT, DraftMemory, eagle_extra_bytes, head_vocab, mtp_layer_bytes
from pytest_gpulayout.memory.kv import kv_layer_bytes_per_token
from pytest_gpulayout.memory.replica import RankBudgets, Replica
from pytest_gpulayout.memory.weights import expert_sharding, weight_bytes_by_stage
from pytest_gpulayout.model import weights as W
from pytest_gpulayout.model.spec import NO_KV, ModelSpec

#: the flags whose effect on the checks this module models (the default fraction; the draft's place in the slack)
SPEC_FLAGS = frozenset({
    "--speculative-algorithm", "--speculative-draft-model-path", "--speculative-num-steps",
    "--speculative-eagle-topk", "--speculative-num-draft-tokens",
})
#: ``reserved_mem`` (MiB) the default fraction adds for speculative decoding: (from, {algorithm: MiB}, otherwise MiB,
#: added after the 10 GiB floor) by release (the module docstring)
SPEC_RESERVE: tuple[tuple[Version, dict[str, float], float, bool], ...] = (
    (Version("0.4.8"), {}, 2 * 1024, False),
    (Version("0.5.2"), {"STANDALONE": 6 * 1024}, 2 * 1024, False),
    (Version("0.5.3"), {"STANDALONE": 6 * 1024, "NGRAM": 0}, 2 * 1024, True),
    (Version("0.5.10"), {"STANDALONE": 6 * 1024, "NGRAM": 0}, 4 * 1024, True),
    (Version("0.5.14"), {}, 0, True),
)
#: the first release whose default fraction this model reads the speculative term of
SPEC_RESERVE_SINCE = SPEC_RESERVE[0][0]
#: the release from which the draft's weights and layers are counted in the target's pool (sglang#23862)
POOL_COUNTS_DRAFT_SINCE = Version("0.5.14")
#: the algorithms whose draft the 0.5.14+ cell size counts (``spec_info.py is_eagle`` / ``is_standalone``; NEXTN is
#: EAGLE by then)
COUNTED_ALGORITHMS = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"})


def speculative_reserve_mib(version: Version, algorithm: str | None) -> float:
    """MiB the release's default ``mem_fraction_static`` reserves for ``algorithm`` (0: none, or before 0.4.8)."""
    if not algorithm:
        return 0.0
    rows = [row for row in SPEC_RESERVE if version >= row[0]]
    if not rows:
        return 0.0
    _, by_algorithm, other, _ = rows[-1]
    return by_algorithm.get(algorithm.upper(), other)


def speculative_draft(args: ResolvedArgs, version: Version) -> SpecDraft | None:
    """``--speculative-algorithm`` and ``--speculative-draft-model-path`` as the line gives them (None: none given)."""
    if not args.is_set("speculative_algorithm"):
        return None
    algorithm = args.get("speculative_algorithm")
    if not isinstance(algorithm, str) or not algorithm:
        return None
    path = args.get("speculative_draft_model_path") if args.is_set("speculative_draft_model_path") else None
    return SpecDraft(method=algorithm.upper(), ref=path if isinstance(path, str) else "")


def draft_memory(engine: MemoryEngine, model: ModelSpec, *, knobs: LaunchKnobs, version: Version, tp: int,
                 ranges: tuple[range, ...], kv_cache_dtype: str, dp: int,
                 enable_expert_parallel: bool) -> DraftMemory:
    """Before 0.5.14 nothing out of the pool, the note says where the draft's memory comes from; from 0.5.14 the
    draft's weights and layers, as the release counts them (the module docstring)."""
    d = knobs.draft
    if d is None:
        return NO_DRAFT
    if d.method == "NGRAM":
        return DraftMemory(notes=("Speculative decoding by NGRAM: no draft model, nothing beside the target.",))
    if version >= POOL_COUNTS_DRAFT_SINCE:
        if d.method not in COUNTED_ALGORITHMS:
            return DraftMemory(uncounted=(f"the {d.method} draft's weights and KV cache (not modelled)",))
        return _in_pool(engine, model, d, knobs=knobs, version=version, tp=tp, ranges=ranges,
                        kv_cache_dtype=kv_cache_dtype, dp=dp, enable_expert_parallel=enable_expert_parallel)
    draft = f"the draft {d.ref}" if d.ref else "the draft"
    if d.ref and d.model is None:
        draft += f" (not read: {d.unread})"
    return DraftMemory(notes=(
        f"Speculative decoding ({d.method}): SGLang {version} sizes the target's pool first and builds {draft}'s "
        f"weights, KV pool (the target's token count plus a draft/verify headroom, model_runner.py "
        f"draft_runner_cache_size) and CUDA graphs out of the (1 - mem_fraction_static) slack, not out of the pool; "
        f"a draft that alone exceeds the slack is warned of; whether it fits beside activations and CUDA graphs is "
        f"what a launch measures.",))


def _in_pool(engine: MemoryEngine, model: ModelSpec, d: SpecDraft, *, knobs: LaunchKnobs, version: Version, tp: int,
             ranges: tuple[range, ...], kv_cache_dtype: str, dp: int, enable_expert_parallel: bool) -> DraftMemory:
    """0.5.14+: the draft's weights on every rank and its layers in the target's cell size."""
    if d.ref and d.model is None:
        return DraftMemory(uncounted=(f"the draft model {d.ref}'s weights and KV cache ({d.unread})",))
    own = d.model is None  # no draft path: the target's own MTP layers (speculative_hook.py L290-306)
    draft = model if d.model is None else dataclasses.replace(d.model, served_dtype=model.served_dtype or model.dtype)
    mtp = draft.num_nextn_predict_layers
    if own and not mtp:
        return DraftMemory(uncounted=(f"the {d.method} draft's weights and KV cache (no draft model path, and "
                                      f"{model.name} declares no num_nextn_predict_layers)",))
    layers = mtp or draft.num_hidden_layers
    weights_b = _draft_weights(engine, draft, d.method, tp=tp, dp=dp, enable_expert_parallel=enable_expert_parallel)
    attn_tp = max(1, tp // max(1, knobs.attention_dp))
    per_layer = kv_layer_bytes_per_token(model, tp=attn_tp, kv_cache_dtype=kv_cache_dtype)
    extra: list[int] = []
    for r in ranges:
        n = sum(1 for i in r if model.layer_kinds[i] != NO_KV)
        cell = per_layer * n
        extra.append(int(cell * (1 + layers / n)) - cell if n else 0)
    stages = len(ranges)
    uncounted: tuple[str, ...] = ()
    if set(model.architectures) & HYBRID_SWA_ARCHS and model.sliding_layers:
        # the hybrid SWA pool's cell is its own (budget._ranks): the draft's layers are not added to it here
        uncounted, extra = (f"the draft's layers in the hybrid SWA cell of {model.name}",), [0] * stages
    weights_by_stage = (weights_b,) * stages  # the draft worker runs on every rank of the world
    name = model.name if own else draft.name
    note = (f"Speculative decoding ({d.method}, draft {name}{' MTP layers' if own else ''}): SGLang {version} loads "
            f"the draft before it sizes the pool and scales the cell size by (1 + {layers} / layers) "
            f"(model_runner_kv_cache_mixin.py _profile_available_bytes, pool_configurator.py): {weights_b / GIB:.2f} "
            f"GiB of draft weights and {max(extra):,} B/token per rank counted, the draft's embedding and lm_head "
            f"included (built before they are swapped for the target's).")
    return DraftMemory(weights_by_stage=weights_by_stage, kv_by_stage=tuple(extra), notes=(note,),
                       uncounted=uncounted)


def _draft_of(model: ModelSpec, d: SpecDraft) -> ModelSpec | None:
    """The draft as SGLang builds it: the model read (in the target's dtype), or the target's own MTP layers where no
    draft path is given; None where neither."""
    if d.model is not None:
        return dataclasses.replace(d.model, served_dtype=model.served_dtype or model.dtype)
    return model if not d.ref and model.num_nextn_predict_layers else None


def _draft_weights(engine: MemoryEngine, draft: ModelSpec, method: str, *, tp: int, dp: int,
                   enable_expert_parallel: bool) -> int:
    """The draft worker's weights on one rank: a NextN draft's MTP layers with the embedding and head it builds; a
    STANDALONE model as its checkpoint loads; an EAGLE head built whole from its config (``fc`` included, EAGLE-3's
    lm_head at ``draft_vocab_size`` rows)."""
    mtp = draft.num_nextn_predict_layers
    sharding = expert_sharding(draft, engine=engine, tp=tp, dp=dp, enable_expert_parallel=enable_expert_parallel)
    if tp == 1 and sharding.whole:
        sharding = W.Sharding()
    prec = W.Precision(draft, dtype_bytes=draft.served_dtype_bytes, expert_scale=engine.expert_scale(draft))
    if mtp:
        weights = mtp * mtp_layer_bytes(draft, sharding=sharding, precision=prec)
        weights += W.embedding_bytes(draft, sharding=sharding, precision=prec)
        weights += W.lm_head_bytes(draft, sharding=sharding, precision=prec)
        return round(weights * W.measured_ratio(draft))
    if method == "STANDALONE":
        return weight_bytes_by_stage(draft, tp=tp, pp=1, engine=engine)[0]
    out = weight_bytes_by_stage(dataclasses.replace(draft, weight_bytes_measured=None), tp=tp, pp=1, engine=engine)[0]
    out += round(eagle_extra_bytes(draft, eagle3=method == "EAGLE3", tp=tp, precision=prec))
    if not draft.tie_word_embeddings and head_vocab(draft) != draft.vocab_size:
        full = W.lm_head_bytes(draft, sharding=sharding, precision=prec)
        out -= round(full * (1 - head_vocab(draft) / draft.vocab_size))
    return out


def _given_int(knobs: LaunchKnobs, flag: str) -> int | None:
    raw = knobs.given.get(flag)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def slack_cautions(engine: MemoryEngine, r: Replica, out: RankBudgets, *, knobs: LaunchKnobs, dp: int,
                   enable_expert_parallel: bool) -> list[str]:
    """Before 0.5.14, whether the draft worker fits the slack it is allocated from after the target's pool (the
    module docstring): its weights and a KV pool of the target's token count (plus the draft / verify headroom where
    the line sets the speculative sizes) against ``pre x (1 - mem_fraction_static)``, before any activation or CUDA
    graph. A sentence where it does not (sgl-project/sglang#23862: "causing OOM at launch"); none where it does."""
    d = knobs.draft
    if d is None or r.version >= POOL_COUNTS_DRAFT_SINCE or d.method not in COUNTED_ALGORITHMS:
        return []
    draft = _draft_of(r.model, d)
    tokens = [t for t in out.tokens if t is not None]
    if draft is None or not tokens:
        return []
    pool = min(tokens)
    steps, topk = _given_int(knobs, "--speculative-num-steps"), _given_int(knobs, "--speculative-eagle-topk")
    verify = _given_int(knobs, "--speculative-num-draft-tokens")
    if steps is not None and topk is not None and verify is not None and r.max_model_len:
        reqs = _given_int(knobs, "--max-running-requests") or min(max(int(pool / r.max_model_len * 512), 2048), 4096)
        pool += reqs * (steps * topk + verify) + 100  # draft_runner_cache_size (0.5.6 model_runner.py L1696-1718)
    attn_tp = max(1, r.tp // max(1, knobs.attention_dp))
    layers = draft.num_nextn_predict_layers or draft.num_hidden_layers
    cell = layers * kv_layer_bytes_per_token(draft, tp=attn_tp, kv_cache_dtype=r.kv_cache_dtype)
    weights = _draft_weights(engine, draft, d.method, tp=r.tp, dp=dp, enable_expert_parallel=enable_expert_parallel)
    need = weights + pool * cell
    slack = free_before_load(r) * (1 - r.fraction)
    if need <= slack:
        return []
    return [f"SGLang {r.version} builds the {d.method} draft after the pool, out of the (1 - mem_fraction_static) "
            f"slack of {slack / GIB:.2f} GiB, and the draft alone needs {need / GIB:.2f} GiB ({weights / GIB:.2f} "
            f"GiB of weights, a KV pool of {pool:,} tokens x {cell:,} B), before activations and CUDA graphs: it is "
            f"likely to run out of memory at launch (sgl-project/sglang#23862). Lower --mem-fraction-static to leave "
            f"room for it."]
