"""Speculative decoding in vLLM's KV budget: what the draft takes out of the pool, per release.

Read in the wheels (``vllm-<v>/``):

* Where the draft lives. The V1 model runner builds the drafter on the last pipeline stage only
  (``v1/worker/gpu_model_runner.py``: ``if self.speculative_config and get_pp_group().is_last_rank`` L180 in 0.10.0,
  L280 in 0.11.0, L598 in 0.33.0) and loads it right after the target (``load_model``: ``self.drafter.load_model``), so
  its weights are in the memory the profile run sees before ``determine_available_memory`` sizes the pool. Its
  attention layers register in the same forward context as the target's (0.11.0 ``v1/spec_decode/eagle.py``
  L824-826: ``get_layers_from_vllm_config(..., Attention).keys() - target_attn_layer_names``) and so join the KV cache
  spec: every block holds the draft's layers beside the target's, in the target's cache dtype and block size, and
  ``num_blocks = budget // (bytes of all layers per block)``. V0 (``spec_decode/spec_decode_worker.py
  split_num_cache_blocks_evenly``, L1292-1312 in 0.8.5) gives both models the same block count out of the target's
  budget, ``blocks x scorer / (scorer + proposer)``: the same arithmetic.
* The draft's dtype is the target's (``config/speculative.py``: ``dtype=self.target_model_config.dtype``, L2668 of
  0.9.2 ``config.py``, L299 in 0.11.0, L1418 in 0.33.0), its TP the target's unless ``draft_tensor_parallel_size``
  says otherwise.
* What an EAGLE draft shares with the target (``EagleProposer.load_model``), so that it is not counted twice:
  0.8.0-0.8.2 have no V1 EAGLE proposer (``v1/spec_decode/`` holds ``ngram_proposer.py`` alone) and fall back to V0,
  whose proposer worker loads the draft whole. 0.8.3-0.8.5 (0.8.5 ``eagle.py`` L238-249): ``eagle`` takes the target's
  lm_head; ``eagle3`` its embedding only where the checkpoint lacks one (not read here: counted). 0.9.0-0.10.x (0.9.2
  ``eagle.py`` L343-366): the embedding where PP is 1 and its shape is the target's; the lm_head for ``eagle`` (never
  for ``eagle3``). 0.11.0 (``eagle.py`` L854-902): the same, and ``eagle3``'s lm_head where its shape
  (``draft_vocab_size``) is the target's. From 0.11.1 (``has_own_embed_tokens`` / ``has_own_lm_head``, set from the
  checkpoint's tensor names: 0.11.1 ``eagle.py`` L1010-1060, ``models/utils.py`` L860-877; 0.33.0
  ``v1/spec_decode/llm_base_proposer.py`` L1418-1558): whichever the checkpoint lacks, or holds identical to the
  target's; the names are read from the draft's weight map or safetensors headers where they are here, else both are
  counted as loaded and the note says so. ``draft_model`` drafts share nothing (0.33.0 ``v1/spec_decode/draft_model.py``
  L115-122).
* MTP (``method: mtp`` and the release's aliases, ``deepseek_mtp``, ...) drafts with the target checkpoint's own
  ``num_nextn_predict_layers`` layers, which the target's loader skips without speculative decoding
  (``model/weights.py mtp_bytes``): each a full decoder layer, ``eh_proj`` (``nn.Linear``, whole on every rank), its
  norms and a ``shared_head`` whose ``ParallelLMHead`` is its own up to 0.15 and the target's lm_head from 0.16
  (0.16.0 ``eagle.py`` L1521, 0.33.0 ``llm_base_proposer.py`` L1560-1575); the embedding is shared as for EAGLE (from
  0.11.1 always, PP 1: "Detected MTP model"). Its attention caches like the target's layers.
* ``ngram`` / ``ngram_gpu`` / ``suffix`` propose from the prompt and the output so far: no draft model, no draft
  memory (``v1/spec_decode/ngram_proposer.py``, ``suffix_decoding.py``).

Not counted beside the weights and KV: the draft's own activation peak in the profile run and its CUDA graphs (small
next to its weights; the startup check measures them). What else is not counted is said (``DraftMemory.uncounted``):
a draft that could not be read, a method whose draft is not modelled here (medusa, mlp_speculator, dflash, custom
proposers), the draft's KV beside a stage whose layers form hybrid KV cache groups (``kv_groups.py``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from packaging.version import Version

from pytest_gpulayout.engines.vllm import rules_speculative as rs
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.knobs import LaunchKnobs, SpecDraft
from pytest_gpulayout.machine.facts import GIB
from pytest_gpulayout.memory.common import MemoryEngine
from pytest_gpulayout.memory.draft import NO_DRAFT, DraftMemory, eagle_extra_bytes, mtp_layer_bytes
from pytest_gpulayout.memory.draft import head_vocab as draft_head_vocab
from pytest_gpulayout.memory.kv import kv_layer_bytes_per_token
from pytest_gpulayout.memory.weights import expert_sharding, weight_bytes_by_stage
from pytest_gpulayout.model import weights as W
from pytest_gpulayout.model.spec import NO_KV, ModelSpec

#: the flags whose whole effect on the pool this module models (``--speculative-config`` and the flags that fill
#: it: 0.8.0-0.8.4's, 0.22+'s ``--spec-*``)
SPEC_FLAGS = frozenset({
    "--speculative-config", "--speculative-model", "--num-speculative-tokens",
    "--speculative-draft-tensor-parallel-size", "--speculative-max-model-len", "--speculative-disable-by-batch-size",
    "--ngram-prompt-lookup-max", "--ngram-prompt-lookup-min", "--speculative-model-quantization",
    "--spec-method", "--spec-model", "--spec-tokens",
})
#: methods that propose without a draft model
NO_DRAFT_METHODS = frozenset({"ngram", "ngram_gpu", "suffix"})
EAGLE_METHODS = frozenset({"eagle", "eagle3"})
#: V1's EAGLE proposer (``v1/spec_decode/eagle.py``) first ships in 0.8.3 (0.8.0-0.8.2 have ``ngram_proposer.py``
#: alone, and ``_is_v1_supported_oracle`` falls back to V0 for the other methods: 0.8.5 ``engine/arg_utils.py``
#: L1423-1440); V0's proposer worker loads the draft as a model of its own
V1_SPEC_SINCE = Version("0.8.3")
#: the eras of ``EagleProposer.load_model``'s sharing (see the module docstring)
SHARE_BY_SHAPE_SINCE = Version("0.9.0")      # 0.9.2 eagle.py L343-366
EAGLE3_LM_HEAD_BY_SHAPE_SINCE = Version("0.11.0")  # 0.11.0 eagle.py L886-902
SHARE_BY_CHECKPOINT_SINCE = Version("0.11.1")  # 0.11.1 eagle.py L1010-1060
#: ``speculative_config.kv_cache_dtype``: the draft's layers cache in it (0.28.0 ``config/speculative.py`` L126,
#: ``v1/spec_decode/llm_base_proposer.py`` L1311-1316; 0.33.0 ``_DRAFT_VLLM_CONFIG_OVERRIDES`` L396-402)
DRAFT_KV_DTYPE_SINCE = Version("0.28.0")
#: the MTP layers' ``shared_head.head`` is the target's lm_head from 0.16 (0.16.0 eagle.py L1521)
MTP_HEAD_SHARED_SINCE = Version("0.16.0")
#: where each era's sharing is read, for the note
_WHERE = ((SHARE_BY_CHECKPOINT_SINCE, "v1/spec_decode/eagle.py has_own_embed_tokens / llm_base_proposer.py "
                                      "_maybe_share_embeddings"),
          (SHARE_BY_SHAPE_SINCE, "v1/spec_decode/eagle.py load_model: \"share embed_tokens with the target model\""),
          (Version("0"), "v1/spec_decode/eagle.py load_model"))


def speculative_draft(args: ResolvedArgs, version: Version) -> SpecDraft | None:
    """The line's speculative decoding as ``version`` ends with it (``rules_speculative``), None where it sets none."""
    spec = rs.speculative(args, version)
    if spec.given is None:
        return None
    if spec.why:
        return SpecDraft(method="", why=spec.why)
    given = spec.given
    try:
        at_checks = rs.method_at_checks(given, version)
    except LookupError:
        at_checks = None
    method = rs.final_method(given, version, at_checks) or ""
    if not method and isinstance(given.get("method"), str):
        method = str(given["method"])
    model = given.get("model")
    ref = model if isinstance(model, str) and model not in rs.NGRAM_NAMES else ""
    if method in NO_DRAFT_METHODS or _is_mtp(method, version):
        ref = ""  # an n-gram proposer has no model; MTP drafts with the target's own layers
    dtp = given.get("draft_tensor_parallel_size")
    dtype = given.get("kv_cache_dtype") if version >= DRAFT_KV_DTYPE_SINCE else None
    return SpecDraft(method=method, ref=ref, tensor_parallel_size=dtp if isinstance(dtp, int) and dtp > 0 else None,
                     kv_cache_dtype=dtype if isinstance(dtype, str) else "")


def _is_mtp(method: str, version: Version) -> bool:
    """An MTP method as the release ends with it: ``mtp`` (0.11+ makes the aliases ``mtp``), or a ``*_mtp`` name
    (before 0.11 the method stays as given)."""
    return method == "mtp" or (version < rs.MTP_ALIASES_SINCE and method.endswith("_mtp"))


def _method_of_draft(draft: ModelSpec) -> str:
    """The method a draft's config tells where the line does not (``SpeculativeConfig.__post_init__``: a
    ``medusa`` / ``mlp_speculator`` model type, an EAGLE model type or architecture, else ``draft_model``)."""
    names = " ".join((draft.model_type, *draft.architectures)).lower()
    if "medusa" in names or "mlp_speculator" in names or "mlpspeculator" in names:
        return "medusa" if "medusa" in names else "mlp_speculator"
    if "eagle3" in names:
        return "eagle3"
    if "eagle" in names:
        return "eagle"
    return "draft_model"


def _last_stage_mixed(model: ModelSpec, ranges: tuple[range, ...], tp: int) -> bool:
    """Whether the last stage's layers form several KV cache groups (``budget._ranks``'s ``mixed``)."""
    kinds = [model.layer_kinds[i] for i in ranges[-1]]
    states = model.layer_state_bytes(tp)
    return len({k for k in kinds if k != NO_KV}) > 1 or any(states[i] for i in ranges[-1])


def _on_last(value: int, stages: int) -> tuple[int, ...]:
    return (0,) * (stages - 1) + (value,)


def draft_memory(engine: MemoryEngine, model: ModelSpec, *, knobs: LaunchKnobs, version: Version, tp: int,
                 ranges: tuple[range, ...], kv_cache_dtype: str, dp: int,
                 enable_expert_parallel: bool) -> DraftMemory:
    """The draft's weights and KV bytes per token on each rank of the last stage, as ``version`` sizes its pool with
    them (the module docstring); ``NO_DRAFT`` without speculative decoding."""
    d = knobs.draft
    if d is None:
        return NO_DRAFT
    stages = len(ranges)
    method = d.method
    if d.why:
        return DraftMemory(uncounted=(f"the speculative draft's weights and KV cache ({d.why})",))
    if method in NO_DRAFT_METHODS:
        return DraftMemory(notes=(f"Speculative decoding by {method}: no draft model, so nothing beside the target "
                                  f"comes out of the pool.",))
    if _is_mtp(method, version):
        return _mtp(engine, model, version=version, tp=tp, ranges=ranges,
                    kv_cache_dtype=d.kv_cache_dtype or kv_cache_dtype, dp=dp,
                    enable_expert_parallel=enable_expert_parallel, method=method)
    if d.model is None:
        what = f"the draft model {d.ref}'s" if d.ref else "the draft model's"
        why = d.unread or "the line names no draft model"
        return DraftMemory(uncounted=(f"{what} weights and KV cache ({why})",))
    draft = dataclasses.replace(d.model, served_dtype=model.served_dtype or model.dtype)
    if not method:
        method = _method_of_draft(draft)
    if method not in EAGLE_METHODS and method != "draft_model":
        return DraftMemory(uncounted=(f"the {method} draft {d.ref}'s weights and KV cache (not modelled)",))
    dtp = d.tensor_parallel_size or tp
    weights, shared, assumed = _draft_weights(draft, model, engine=engine, version=version, tp=dtp, pp=stages,
                                              method=method)
    layers = draft.kv_layers
    per_token = layers * kv_layer_bytes_per_token(draft, tp=dtp, kv_cache_dtype=d.kv_cache_dtype or kv_cache_dtype)
    uncounted: tuple[str, ...] = ()
    if _last_stage_mixed(model, ranges, tp):
        uncounted = (f"the draft {d.ref}'s KV cache beside the hybrid KV cache groups of {model.name}",)
        per_token = 0
    where = next(w for since, w in _WHERE if version >= since)
    note = (f"Speculative decoding ({method}, draft {draft.name}): vLLM {version} loads the draft before its profile "
            f"run and caches its {layers} attention layer{'s' if layers != 1 else ''} beside the target's "
            f"(v1/worker/gpu_model_runner.py load_model / get_kv_cache_spec): {weights / GIB:.2f} GiB of weights and "
            f"{per_token:,} B/token on each rank of the last stage counted"
            + (f", {' and '.join(shared)} shared with the target ({where})" if shared else "")
            + (f"; {assumed}" if assumed else "") + ".")
    return DraftMemory(weights_by_stage=_on_last(weights, stages), kv_by_stage=_on_last(per_token, stages),
                       notes=(note,), uncounted=uncounted)


def checkpoint_names(draft: ModelSpec) -> frozenset[str] | None:
    """The tensor names of the draft's checkpoint where they can be read without loading it (the weight map of
    ``model.safetensors.index.json`` / ``pytorch_model.bin.index.json``, else the ``*.safetensors`` headers);
    None where the folder holds neither (a bare config, a single ``pytorch_model.bin``, a catalog entry)."""
    if not draft.source or draft.source.startswith("catalog:"):
        return None
    folder = Path(draft.source).parent
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        p = folder / index
        if p.is_file():
            try:
                data = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError):
                return None
            names = data.get("weight_map") if isinstance(data, dict) else None
            return frozenset(str(n) for n in names) if isinstance(names, dict) else None
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    try:
        return frozenset(n for f in files for n in W.safetensors_header(f) if n != "__metadata__")
    except (OSError, InputError):
        return None


def _draft_weights(draft: ModelSpec, target: ModelSpec, *, engine: MemoryEngine, version: Version, tp: int, pp: int,
                   method: str) -> tuple[int, tuple[str, ...], str]:
    """(bytes of the draft on one rank, what of it is the target's, what is assumed) by the release's sharing."""
    if method == "draft_model":  # a model of its own: nothing shared (draft_model.py L115-122)
        return weight_bytes_by_stage(draft, tp=tp, pp=1, engine=engine)[0], (), ""
    if version < V1_SPEC_SINCE:  # V0's proposer worker loads the draft as a model of its own
        prec0 = W.Precision(draft, dtype_bytes=draft.served_dtype_bytes)
        whole = weight_bytes_by_stage(draft, tp=tp, pp=1, engine=engine)[0]
        whole += round(eagle_extra_bytes(draft, eagle3=method == "eagle3", tp=tp, precision=prec0))
        return whole, (), "V0's proposer worker loads it whole (spec_decode/spec_decode_worker.py; sharing not read)"
    # an EAGLE head is built whole from its config, then the shared parts are swapped for the target's
    built = dataclasses.replace(draft, weight_bytes_measured=None)
    sharding = W.Sharding() if tp == 1 else W.Sharding(tp=tp, expert_tp=tp)
    prec = W.Precision(built, dtype_bytes=built.served_dtype_bytes)
    total = weight_bytes_by_stage(built, tp=tp, pp=1, engine=engine)[0]
    total += round(eagle_extra_bytes(built, eagle3=method == "eagle3", tp=tp, precision=prec))
    embed = round(W.embedding_bytes(built, sharding=sharding, precision=prec))
    head_vocab = draft_head_vocab(built)
    full_head = W.lm_head_bytes(built, sharding=sharding, precision=prec)
    head = 0 if built.tie_word_embeddings else round(full_head * head_vocab / built.vocab_size)
    total -= round(full_head) - head if not built.tie_word_embeddings else 0  # EAGLE-3: draft_vocab_size rows
    shared: list[str] = []
    assumed = ""
    if version >= SHARE_BY_CHECKPOINT_SINCE:
        names = checkpoint_names(built)
        if names is None:
            assumed = ("its checkpoint's tensors were not read: its embedding and lm_head are counted as loaded "
                       "(vLLM shares the ones the checkpoint lacks or holds identical to the target's)")
        else:
            if pp == 1 and not any("embed_tokens" in n for n in names):
                total -= embed
                shared.append("the embedding")
            if not any("lm_head" in n for n in names):
                total -= head
                shared.append("the lm_head")
            if any("embed_tokens" in n for n in names) and pp == 1:
                assumed = ("the embedding its checkpoint holds is counted (vLLM shares it where it is identical to "
                           "the target's, which is not read)")
        return max(0, total), tuple(shared), assumed
    same_embed = built.vocab_size == target.vocab_size and built.hidden_size == target.hidden_size
    if version >= SHARE_BY_SHAPE_SINCE and pp == 1 and same_embed:
        total -= embed
        shared.append("the embedding")
    if method == "eagle" or (method == "eagle3" and version >= EAGLE3_LM_HEAD_BY_SHAPE_SINCE
                             and head_vocab == target.vocab_size and built.hidden_size == target.hidden_size):
        total -= head
        shared.append("the lm_head")
    if version < SHARE_BY_SHAPE_SINCE and method == "eagle3":
        assumed = "its embedding is counted (0.8's EAGLE-3 takes the target's only where its checkpoint lacks one)"
    return max(0, total), tuple(shared), assumed


def _mtp(engine: MemoryEngine, model: ModelSpec, *, version: Version, tp: int, ranges: tuple[range, ...],
         kv_cache_dtype: str, dp: int, enable_expert_parallel: bool, method: str) -> DraftMemory:
    """The target's own MTP layers (the module docstring), on the last stage."""
    n = model.num_nextn_predict_layers
    if not n:
        return DraftMemory(uncounted=(f"the {method} layers of {model.name} (its config declares no "
                                      f"num_nextn_predict_layers)",))
    stages = len(ranges)
    sharding = expert_sharding(model, engine=engine, tp=tp, dp=dp, enable_expert_parallel=enable_expert_parallel)
    if tp == 1 and sharding.whole:
        sharding = W.Sharding()
    prec = W.Precision(model, dtype_bytes=model.served_dtype_bytes, expert_scale=engine.expert_scale(model))
    one = mtp_layer_bytes(model, sharding=sharding, precision=prec)
    head = version < MTP_HEAD_SHARED_SINCE
    if head:
        one += W.lm_head_bytes(model, sharding=sharding, precision=prec)
    weights = n * one
    embed = version < SHARE_BY_SHAPE_SINCE or stages > 1
    if embed:
        weights += W.embedding_bytes(model, sharding=sharding, precision=prec)
    weights_b = round(weights * W.measured_ratio(model))
    per_token = n * kv_layer_bytes_per_token(model, tp=tp, kv_cache_dtype=kv_cache_dtype)
    uncounted: tuple[str, ...] = ()
    if _last_stage_mixed(model, ranges, tp):
        uncounted = (f"the MTP layers' KV cache beside the hybrid KV cache groups of {model.name}",)
        per_token = 0
    layers = f"{n} MTP layer{'s' if n != 1 else ''}"
    note = (f"Speculative decoding ({method}): vLLM {version} loads {model.name}'s {layers} "
            f"(num_nextn_predict_layers), which it skips without speculative decoding, and caches them beside the "
            f"target's: {weights_b / GIB:.2f} GiB of weights and {per_token:,} B/token on each rank of the last stage "
            f"counted (the embedding {'loaded' if embed else 'shared with the target'}, the shared head "
            f"{'its own' if head else 'the target lm_head'}).")
    return DraftMemory(weights_by_stage=_on_last(weights_b, stages), kv_by_stage=_on_last(per_token, stages),
                       notes=(note,), uncounted=uncounted)

