"""What a speculative-decoding draft takes of each rank's memory, as the engine counts it (``draft_memory``).

Engine-neutral: the engine says how much of the draft sits inside the budget its KV pool is sized from (vLLM: the
draft's weights are loaded before the profile run and its attention layers join the KV cache spec, so both come out
of the pool; SGLang: the draft worker is built after the target's pool, from the slack, so nothing comes out of it),
and what it could not count. ``predict_pool`` adds the per-stage figures to the target's and carries ``uncounted``
into the prediction, where the ``kv_pool`` check reads it: a pool that leaves something out is an upper bound, and a
requirement it meets only so is never a silent pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pytest_gpulayout.model import weights as W
from pytest_gpulayout.model.spec import ModelSpec


@dataclass(frozen=True)
class DraftMemory:
    """Per PP stage: the draft's weight bytes and KV bytes per token on the most loaded rank of that stage, as they
    come out of the engine's KV budget (empty: nothing does); ``notes``: what the figures assume; ``uncounted``: what
    of the draft's memory is not in them (each a phrase naming it), so the predicted pool is an upper bound."""

    weights_by_stage: tuple[int, ...] = ()
    kv_by_stage: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    uncounted: tuple[str, ...] = ()


NO_DRAFT = DraftMemory()


def plus(base: tuple[int, ...], extra: tuple[int, ...]) -> tuple[int, ...]:
    """``base`` with ``extra`` added stage by stage (``extra`` empty: ``base`` unchanged)."""
    if not extra:
        return base
    if len(extra) != len(base):
        raise ValueError(f"draft figures for {len(extra)} stages, the target has {len(base)}")
    return tuple(b + e for b, e in zip(base, extra, strict=True))


def config_int(model: ModelSpec, key: str) -> int | None:
    """A top-level integer of the model's ``config.json`` the spec does not keep (EAGLE-3's ``draft_vocab_size``)."""
    if not model.config_json:
        return None
    try:
        got = json.loads(model.config_json).get(key)
    except (ValueError, AttributeError):
        return None
    return got if isinstance(got, int) and not isinstance(got, bool) else None


def head_vocab(draft: ModelSpec) -> int:
    """The rows of a draft's lm_head: EAGLE-3's ``draft_vocab_size`` where its config has one, else its vocabulary."""
    return config_int(draft, "draft_vocab_size") or draft.vocab_size


def eagle_extra_bytes(draft: ModelSpec, *, eagle3: bool, tp: int, precision: W.Precision) -> float:
    """What an EAGLE head holds beside a decoder layer of its config: the ``fc`` that folds the target's hidden
    states in (a plain / replicated linear, whole on every rank: 2 x hidden wide for EAGLE, 3 x for EAGLE-3) and, for
    EAGLE-3, a QKV projection that reads 2 x hidden (vLLM ``models/llama_eagle.py`` / ``llama_eagle3.py``, SGLang
    ``models/llama_eagle.py`` / ``llama_eagle3.py``)."""
    h = draft.hidden_size
    if not eagle3:
        return 2 * h * h * precision("mlp")
    q = -(-draft.num_attention_heads // tp) * draft.head_dim
    kv = 2 * max(1, draft.num_key_value_heads // tp) * draft.head_dim
    return (3 * h * h + h * (q + kv)) * precision("attn")


def mtp_layer_bytes(model: ModelSpec, *, sharding: W.Sharding, precision: W.Precision) -> float:
    """One multi-token-prediction layer of ``model`` on one rank (DeepSeek-V3 style, ``num_nextn_predict_layers``):
    a decoder layer like its last, ``eh_proj`` (2 x hidden -> hidden, a plain linear: whole on every rank) and its
    ``enorm`` / ``hnorm`` / final norm; its embedding and head are counted by the caller, by the engine's sharing."""
    h = model.hidden_size
    one = W.layer_bytes(model, model.num_hidden_layers - 1, sharding=sharding, precision=precision)
    return one + 2 * h * h * precision("mlp") + 3 * h * precision("norm")
