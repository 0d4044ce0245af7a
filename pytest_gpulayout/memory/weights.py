"""Weights per rank: how the engines shard dense layers, experts (TP, EP, vLLM's TP x DP
flattening) and stages, from the checkpoint's precision."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from packaging.version import Version

from pytest_gpulayout.memory.common import MemoryEngine
from pytest_gpulayout.memory.stages import stage_ranges
from pytest_gpulayout.model import weights as W
from pytest_gpulayout.model.spec import ModelSpec

# ---------------------------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------------------------

#: model types whose input embedding stays split over the whole TP group under SGLang's attention DP
#: (0.5.10 ``models/llama.py``: ``VocabParallelEmbedding`` without ``use_attn_tp_group``)
EMBED_OVER_TP = frozenset({"llama"})

#: SGLang's ``--enable-dp-lm-head``: the model types whose ``ParallelLMHead`` is built with
#: ``use_attn_tp_group=enable_dp_lm_head`` and so is split over the attention TP group (``tp // attn_dp``)
#: instead of the whole TP group, i.e. replicated across the attention-DP groups
#: (``layers/vocab_parallel_embedding.py``: ``tp_size = attn_tp_size if use_attn_tp_group``). Read per release
#: in each wheel's ``models/``: 0.4.9 ``deepseek_v2.py`` l.2030 (also DeepSeek-V3, whose ``DeepseekV3ForCausalLM``
#: lives there), ``qwen3_moe.py`` l.715, ``llama.py`` l.424, ``qwen2_moe.py``; 0.4.10.post2 adds ``glm4_moe.py``;
#: 0.5.0rc0 ``gpt_oss.py``; 0.5.2 ``qwen3_next.py``; 0.5.8 ``qwen3.py`` (0.5.6 has not); unchanged to 0.5.23
#: (``deepseek_v2.py`` l.3296, ``qwen3_moe.py`` l.1022, ``llama.py`` l.578). The flag does not exist before
#: 0.4.9 (0.4.6 ``server_args.py`` has no ``enable_dp_lm_head``); releases between the read ones take the
#: earlier read one's list.
DP_LM_HEAD_MODEL_TYPES: tuple[tuple[Version, frozenset[str]], ...] = (
    (Version("0.4.9"), frozenset({"deepseek_v2", "deepseek_v3", "qwen3_moe", "llama", "qwen2_moe"})),
    (Version("0.4.10.post2"), frozenset({"glm4_moe"})),
    (Version("0.5.0rc0"), frozenset({"gpt_oss"})),
    (Version("0.5.2"), frozenset({"qwen3_next"})),
    (Version("0.5.8"), frozenset({"qwen3"})),
)


def dp_lm_head_splits_over_attention(model_type: str, version: Version | str | None) -> bool:
    """Whether SGLang ``version`` splits ``model_type``'s lm_head over the attention TP group under
    ``--enable-dp-lm-head`` (``DP_LM_HEAD_MODEL_TYPES``); None: the latest read release."""
    v = Version(str(version)) if version is not None else DP_LM_HEAD_MODEL_TYPES[-1][0]
    return any(v >= since and model_type in types for since, types in DP_LM_HEAD_MODEL_TYPES)


def expert_sharding(model: ModelSpec, *, engine: MemoryEngine, tp: int, dp: int = 1,
                    enable_expert_parallel: bool = False) -> W.Sharding:
    """How routed experts are cut across ranks.

    * vLLM (``FusedMoEParallelConfig.make``): MoE layers flatten TP across DP, so the expert group
      is ``tp x dp`` ranks. With ``--enable-expert-parallel`` whole experts are spread over it
      (EP size = tp x dp; ``ceil(E / ep)`` on the busiest rank); without, each expert's width is
      split ``tp x dp`` ways.
    * SGLang: ``--dp-size`` replicas are separate worlds; EP lives inside the TP group
      (``ep_size = tp``), else each expert is split by TP (``moe_tp_size = tp / ep_size``).
    """
    if not model.is_moe:
        return W.Sharding(tp=tp, expert_tp=tp)
    ep, per_expert = engine.expert_layout(tp, dp, enable_expert_parallel)  # engines/<name>/divisibility.py
    if ep > 1:
        return W.Sharding(tp=tp, expert_tp=1, ep=ep)
    return W.Sharding(tp=tp, expert_tp=per_expert)


def _load_precision(model: ModelSpec, engine: MemoryEngine) -> W.Precision:
    return W.Precision(model, dtype_bytes=model.served_dtype_bytes, expert_scale=engine.expert_scale(model))


def weight_bytes_by_stage(model: ModelSpec, *, tp: int, pp: int, engine: MemoryEngine,
                          enable_expert_parallel: bool = False, dp: int = 1,
                          pp_layer_partition: str | Sequence[int] | None = None,
                          version: Version | str | None = None, attention_dp: int = 1,
                          dp_lm_head: bool = False) -> tuple[int, ...]:
    """Weight bytes on the most loaded rank of each PP stage.

    ``attention_dp`` > 1 (SGLang's attention DP inside TP): the attention projections are split over
    ``tp // attention_dp`` ranks and replicated across the groups (``models/deepseek_v2.py``,
    ``qwen3_moe.py``: ``get_attention_tp_size()``), and so is the input embedding except in Llama
    (``llama.py`` builds it over the whole TP group); MLP, experts and lm_head stay split over TP, except
    that ``dp_lm_head`` (SGLang's ``--enable-dp-lm-head``) splits the lm_head over the attention TP group too for
    the model types of ``DP_LM_HEAD_MODEL_TYPES``.

    A stage holds its layers; the first also the input embedding (and the vision tower, which vLLM
    builds on every rank), the last the final norm and lm_head (a second copy of a tied embedding
    when PP > 1). TP splits attention heads (KV projections replicate below one head per rank), the
    dense MLP and the 64-padded vocabulary; experts follow ``expert_sharding``; norms and the router
    are whole on every rank. Where the checkpoint was measured, the split is scaled to its size.
    """
    e = engine
    sharding = expert_sharding(model, engine=e, tp=tp, dp=dp, enable_expert_parallel=enable_expert_parallel)
    if attention_dp > 1:
        sharding = replace(sharding, attn_tp=max(1, tp // attention_dp),
                           embed_on_attention=model.model_type not in EMBED_OVER_TP,
                           lm_head_on_attention=dp_lm_head and dp_lm_head_splits_over_attention(model.model_type,
                                                                                                version))
    if tp == 1 and pp == 1 and sharding.whole:
        sharding = W.Sharding()
    prec = _load_precision(model, e)
    ratio = W.measured_ratio(model)
    ranges = stage_ranges(model.num_hidden_layers, pp, e, partition=pp_layer_partition, version=version)
    return tuple(round(W.stage_bytes(model, r, first=i == 0, last=i == len(ranges) - 1, sharding=sharding,
                                     precision=prec) * ratio)
                 for i, r in enumerate(ranges))


def weight_bytes_per_rank(model: ModelSpec, *, tp: int, pp: int, engine: MemoryEngine,
                          enable_expert_parallel: bool = False, dp: int = 1,
                          pp_layer_partition: str | Sequence[int] | None = None) -> int:
    """Weight bytes on the most loaded rank (max over PP stages; see ``weight_bytes_by_stage``)."""
    return max(weight_bytes_by_stage(model, tp=tp, pp=pp, engine=engine,
                                     enable_expert_parallel=enable_expert_parallel, dp=dp,
                                     pp_layer_partition=pp_layer_partition))
