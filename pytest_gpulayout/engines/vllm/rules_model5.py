"""vLLM's check of the final quantization method against the GPU and the served dtype, by release.

``VllmConfig._get_quantization_config`` (config/vllm.py:915-950 in 0.33.0, config/__init__.py:3440-3470 in 0.10.1,
config.py:3400-3425 in 0.8.0) runs where ``model_config.quantization`` is set (the method the checkpoint's
``quantization_config``, ``--quantization`` and the override loop of ``ModelConfig._verify_quantization`` settled
on) and refuses, in this order:

- a GPU whose capability (``capability_tuple.to_int()``: major * 10 + minor) is below the method's config class's
  ``get_min_capability()``;
- a served dtype (``model_config.dtype``) outside the class's ``get_supported_act_dtypes()`` (an AWQ checkpoint
  with ``--dtype float32``, an MXFP4 one with ``--dtype float16``).

The method is ``rules_model.final_quantization`` (the mismatch and deprecation checks' own resolution). Where an
override may rename it on CUDA (an AWQ checkpoint may become ``awq_marlin`` / ``auto_awq``, a GPTQ or ModelOpt one
any override's name: ``rules_model.renamed_to``), every name the release holds is judged and the verdict is given
only where all give the same refusal, word for word (or none); otherwise the entry is named, never guessed.

``ModelConfig.get_total_num_kv_heads`` (0.8.3-0.13.0, config/model.py:1198-1214 in 0.13.0, config.py:895-901 in
0.8.3) refuses a Nemotron-NAS (DeciLM) config whose every block's attention is a no-op: it returns the first
attention block's ``num_attention_heads // n_heads_in_group`` and raises after the loop. Read from the model's
``config.json`` (``block_configs[*].attention.no_op``; an absent key is the config class's default, False); a
``multi_query`` config returns 1 first. A block the config does not spell as a mapping leaves the entry named.
0.13.0's message names ``self.model`` (the line's model) and ``self.architectures``.

``ModelConfig.__post_init__`` (0.27+, config/model.py:882-894 in 0.33.0, 769-781 in 0.27.0) refuses a
``--video-pruning-method`` (default evs) with a ``--video-pruning-rate`` above 0 that the multimodal class does not
list in ``supported_video_pruning_methods``: the registry reads the class attribute (empty for a class without
``SupportsMultiModalPruning``, whose default is ``("evs",)``: model_executor/models/interfaces.py:540 in 0.33.0) and
prints the class's ``__name__`` (registry.py:936). ``VideoPruningMethod`` is evs / vidcom2, so only a class that
inherits the default ``("evs",)`` refuses (vidcom2): ``EVS_ONLY``, read from every listed release's model classes
(each class's bases followed to the protocol; Qwen3-VL and its subclasses list both methods).

The Mamba cache's align mode with ``--disable-chunked-mm-input`` (``VllmConfig.__post_init__`` 0.15-0.17,
config/vllm.py:1008-1019 in 0.15.0; ``validate_block_size`` 0.18+, :3414-3419 in 0.33.0, called by the engine core
once the block size is final) is judged on a model the release's Mamba hooks leave alone: a class neither hybrid
nor attention-free (``MambaModelConfig.verify_and_update_config``, which sets or resets the mode from prefix
caching, runs for the Mamba architectures of ``MODELS_CONFIG_MAP``, all attention-free, and through
``HybridAttentionMambaModelConfig`` for a hybrid one: config/vllm.py:1286-1301, model_executor/models/config.py:
396-399 in 0.15.0). There the mode is ``--mamba-cache-mode`` as given, 0.15-0.32 (engine/arg_utils.py passes it to
``CacheConfig``); 0.33 passes it no more (deprecated), so the mode stays none. A hybrid or attention-free model is
named (its default prefix caching is not resolved here), and so is a line that gives --block-size,
--max-num-batched-tokens, --long-prefill-token-threshold or --max-num-partial-prefills (the align block's earlier
assertions read them) or an encoder-decoder config without the flag (the release turns chunked MM input off
itself).

Each method's minimum capability and dtypes are the release's class attributes as ``tools/engine_facts.py`` read
them from the wheel (``releases/<version>.json``, group ``quantization``); for a release between two extracted
ones a value is used only where the nearest extracted releases below and above agree on it (and the class returns
a literal), so a value that changed in between is not guessed; before the first extracted release (0.8.0-0.10.0)
only the plain methods read by hand are known (``EARLY_METHODS``). The served dtype is ``dtype.resolve_dtype`` (with
``--dtype auto`` on a float32 checkpoint the pooling runner prefers float16: judged only where both runners give
the same dtype). Without the GPU's capability neither entry is judged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.vllm import rules_model
from pytest_gpulayout.engines.vllm.dtype import resolve_dtype
from pytest_gpulayout.engines.vllm.interfaces import model_class
from pytest_gpulayout.generation import extracted_releases, release_facts
from pytest_gpulayout.refusals import Dtype, Judged

QUANT_CAPABILITY = "vllm.quantization.min_capability"
QUANT_DTYPE = "vllm.quantization.act_dtype"
NAS_KV_HEADS = "vllm.model.nemotron_nas_kv_heads"
VIDEO_PRUNING = "vllm.multimodal.video_pruning_method"
ALIGN_CHUNKED_MM = "vllm.mamba.align_chunked_mm_input"

RULES: Mapping[str, str] = {
    QUANT_CAPABILITY: "a quantization method (after the overrides) whose config class needs a higher compute "
                      "capability than the GPU's (VllmConfig._get_quantization_config)",
    QUANT_DTYPE: "a served dtype the quantization method's config class does not list among its activation "
                 "dtypes, e.g. --dtype float32 on an AWQ / FP8 checkpoint (VllmConfig._get_quantization_config)",
    NAS_KV_HEADS: "a Nemotron-NAS config whose every block's attention is a no-op: no KV head count "
                  "(ModelConfig.get_total_num_kv_heads, 0.8.3-0.13.0)",
    VIDEO_PRUNING: "--video-pruning-method vidcom2 with a --video-pruning-rate above 0 on a multimodal class that "
                   "supports only evs pruning (ModelConfig.__post_init__, 0.27+)",
    ALIGN_CHUNKED_MM: "--mamba-cache-mode align with --disable-chunked-mm-input on a model the Mamba hooks leave "
                      "alone (VllmConfig, 0.15-0.32)",
}

_NEMOTRON_VL = "NemotronH_Nano_VL_V2"
#: the architectures whose class inherits ``SupportsMultiModalPruning``'s default ``("evs",)`` and the class name the
#: registry prints, by the first release that holds each (read in 0.27.0-0.33.0: models/qwen2_5_vl.py,
#: nano_nemotron_vl.py, opencua.py, exaone4_5.py, cohere_compass.py)
EVS_ONLY: tuple[tuple[Version, Mapping[str, str]], ...] = (
    (Version("0.27.0"), {"Qwen2_5_VLForConditionalGeneration": "Qwen2_5_VLForConditionalGeneration",
                         "OpenCUAForConditionalGeneration": "OpenCUAForConditionalGeneration",
                         "Exaone4_5_ForConditionalGeneration": "Exaone4_5_ForConditionalGeneration",
                         "NemotronH_Nano_VL_V2": _NEMOTRON_VL, "NemotronH_Nano_Omni_Reasoning_V3": _NEMOTRON_VL,
                         "NemotronH_Super_Omni_Reasoning_V3": _NEMOTRON_VL}),
    (Version("0.29.0"), {"NemotronH_Omni_Reasoning_V3": _NEMOTRON_VL}),
    (Version("0.30.0"), {"CohereCompassForConditionalGeneration": "CohereCompassForConditionalGeneration"}),
)
_PRUNING_CONDITION = ("pruning_spec is not None and supported_pruning and (pruning_spec[0] not in "
                      "supported_pruning)")

#: torch's spellings in ``get_supported_act_dtypes`` and the name torch prints for each
_TORCH_NAMES = {"torch.half": "float16", "torch.float16": "float16", "torch.bfloat16": "bfloat16",
                "torch.float": "float32", "torch.float32": "float32", "torch.float8_e4m3fn": "float8_e4m3fn"}
#: the names either entry reads, left out of the shared namespace where a frame does not give them
#: an AWQ / GPTQ checkpoint (not in a kernel's serialized format) that ``AutoAWQConfig`` / ``AutoGPTQConfig``
#: claim on CUDA without a flag or with the checkpoint's own (``override_quantization_method``, model_executor/
#: layers/quantization/auto_awq.py:263-286 in 0.33.0, auto_gptq.py:214-233): first in ``_verify_quantization``'s
#: overrides (config/model.py:1396-1416 in 0.33.0) that can claim it, ``auto_gptq`` heading the list from 0.22.0 and
#: ``auto_awq`` ahead of ``awq`` / ``awq_marlin`` from 0.24.0; the other overrides before them (``inc``: an
#: auto-round checkpoint, ``moe_wna16``: only with that flag) do not claim it
_CLAIMED_BY: Mapping[str, tuple[Version, str]] = {"awq": (Version("0.24.0"), "auto_awq"),
                                                  "gptq": (Version("0.22.0"), "auto_gptq")}
_NAMES = ("model_config.quantization", "capability_tuple", "capability", "quant_config.get_min_capability()",
          "model_config.dtype", "supported_dtypes", "model_config.dtype not in supported_dtypes")


@dataclass(frozen=True)
class MethodFacts:
    """What ``_get_quantization_config`` reads of one method's config class in a release: ``min_capability``
    (None: not known for this release) and the activation dtypes by name (None: not known)."""

    min_capability: int | None
    act_dtypes: tuple[str, ...] | None


#: the checkpoint methods no override renames, as every release before the first extracted facts (0.8.0-0.10.0)
#: defines them (read in each release's model_executor/layers/quantization/fp8.py ``Fp8Config``,
#: compressed_tensors/compressed_tensors.py ``CompressedTensorsConfig``, bitsandbytes.py ``BitsAndBytesConfig``:
#: the same literals in all twelve)
EARLY_SINCE = Version("0.10.1")
EARLY_METHODS: Mapping[str, MethodFacts] = {
    "fp8": MethodFacts(80, ("bfloat16", "float16")),
    "compressed-tensors": MethodFacts(70, ("float16", "bfloat16")),
    "bitsandbytes": MethodFacts(70, ("float32", "float16", "bfloat16")),
}


#: ``get_supported_act_dtypes``'s list in the class's own order where the facts hold it sorted (the message prints
#: the list as the class returns it), by the class that defines it: the same in every extracted release
#: (read in each one's model_executor/layers/quantization/*.py)
_HALF_BF16 = ("float16", "bfloat16")
_F32_HALF_BF16 = ("float32", "float16", "bfloat16")
ACT_DTYPE_ORDER: Mapping[str, tuple[str, ...]] = {
    **dict.fromkeys(("AWQMarlinConfig", "AutoAWQConfig", "AutoGPTQConfig", "AutoRoundConfig", "BitBLASConfig",
                     "CPUAWQConfig", "DeepSpeedFPConfig", "GPTQBitBLASConfig", "GPTQMarlinConfig", "HQQMarlinConfig",
                     "INCConfig", "Int8TpuConfig", "QuarkConfig"), _HALF_BF16),
    **dict.fromkeys(("BitsAndBytesConfig", "CompressedTensorsConfig", "TorchAOConfig"), _F32_HALF_BF16),
    "GGUFConfig": ("float16", "bfloat16", "float32"),
    "ModelOptNvFp4Config": ("bfloat16", "float16", "float8_e4m3fn"),
}


def _facts_at(version: Version) -> tuple[Version, Mapping[str, Any]] | None:
    facts = release_facts("vllm", version, group="quantization")
    if facts is None:
        return None
    return facts.release, facts.data["quantization"]


def _one_method(quant: Mapping[str, Any], method: str) -> MethodFacts | None:
    """``method``'s facts in one extracted release (None: the release has no such method)."""
    entry = quant.get("by_method", {}).get(method)
    if not isinstance(entry, Mapping):
        return None
    cap = entry.get("min_capability")
    cap_known = isinstance(cap, int) and not isinstance(cap, bool) and entry.get("min_capability_literal") is True
    cls = quant.get("classes", {}).get(entry.get("class_path", ""), {})
    dtypes = cls.get("supported_act_dtypes", {}) if isinstance(cls, Mapping) else {}
    names: tuple[str, ...] | None = None
    if isinstance(dtypes, Mapping) and dtypes.get("literal") is True and isinstance(dtypes.get("value"), list):
        mapped = [_TORCH_NAMES.get(str(d)) for d in dtypes["value"]]
        names = tuple(m for m in mapped if m is not None) if all(m is not None for m in mapped) else None
        ordered = ACT_DTYPE_ORDER.get(str(dtypes.get("defined_in", "")))
        if names is not None and ordered is not None and sorted(ordered) == sorted(names):
            names = ordered
    return MethodFacts(int(cap) if cap_known and isinstance(cap, int) else None, names)


def method_facts(version: Version, method: str) -> MethodFacts | None:
    """``method``'s minimum capability and activation dtypes in ``version``: the nearest extracted release at
    or below it, each value kept only where the nearest extracted release above agrees (a value that changed
    between them, or a method the release below lacks, is not known); None where no facts reach the release or
    an extracted release holds no such method."""
    below = _facts_at(version)
    if below is None:
        return EARLY_METHODS.get(method) if version < EARLY_SINCE else None
    release, quant = below
    got = _one_method(quant, method)
    if release == version:
        return got
    if got is None:
        return MethodFacts(None, None)      # the release may have gained it since the extracted one below
    above = next((v for v in extracted_releases("vllm") if v > version and (
        (f := release_facts("vllm", v, group="quantization")) is not None and f.release == v)), None)
    later_quant = _facts_at(above) if above is not None else None
    later = _one_method(later_quant[1], method) if later_quant is not None else None
    if later is None:
        return MethodFacts(None, None)
    return MethodFacts(got.min_capability if got.min_capability == later.min_capability else None,
                       got.act_dtypes if got.act_dtypes == later.act_dtypes else None)


def candidate_methods(ask: Ask) -> tuple[bool, tuple[str, ...]]:
    """``(known, names)``: the names ``model_config.quantization`` may hold at ``_get_quantization_config`` (empty:
    none is set, or the mismatch check refused first); not known where ``final_quantization`` cannot say."""
    known, final = rules_model.final_quantization(ask.args, ask.model, ask.version)
    if not known:
        return False, ()
    if final is None:
        return True, ()
    quant_cfg = rules_model.quantization_values(ask.args, ask.model, ask.version).get("quant_cfg")
    if not isinstance(quant_cfg, Mapping):
        return True, (final,)       # the override loop runs only on a checkpoint's quantization_config
    plain = final in rules_model.PLAIN_CHECKPOINTS and not rules_model.serialized(quant_cfg) and \
        not ask.model.hf_model_type.startswith("deepseek_v4")
    if plain:
        return True, (final,)
    claimed = _CLAIMED_BY.get(final)
    if claimed is not None and ask.version >= claimed[0] and not rules_model.serialized(quant_cfg):
        return True, (claimed[1],)
    return True, tuple(sorted({final} | set(rules_model.renamed_to(final, quant_cfg))))


def served_dtype(ask: Ask) -> str | None:
    """The dtype the model is served in (``dtype.resolve_dtype``); None where it is not resolved or the runner
    would change it (``--dtype auto`` on a float32 checkpoint)."""
    requested = ask.args.get("dtype")
    asked = str(requested) if requested else None
    cc = ask.layout.compute_capability
    served = {resolve_dtype(ask.model, requested=asked, version=ask.version, cc=cc, gpu_name=ask.layout.gpu_name,
                            pooling=pooling).served for pooling in (False, True)}
    one = served.pop() if len(served) == 1 else None
    return one if isinstance(one, str) else None


def quant_frame(ask: Ask, method: str) -> dict[str, object] | None:
    """``_get_quantization_config``'s values for ``method`` (the keys it cannot know left out); None where the
    release holds no such method (an override cannot give that name)."""
    facts = method_facts(ask.version, method)
    if facts is None:
        return None
    out: dict[str, object] = {"model_config.quantization": method}
    cc = ask.layout.compute_capability
    if cc is not None:
        out["capability_tuple"] = cc
        out["capability"] = cc[0] * 10 + cc[1]
    if facts.min_capability is not None:
        out["quant_config.get_min_capability()"] = facts.min_capability
    dtype = served_dtype(ask)
    if dtype is not None:
        out["model_config.dtype"] = Dtype(dtype)
    if facts.act_dtypes is not None:
        out["supported_dtypes"] = [Dtype(d) for d in facts.act_dtypes]
        if dtype is not None:
            out["model_config.dtype not in supported_dtypes"] = dtype not in facts.act_dtypes
    return out


def _judge_all(ask: Ask, rule: str, frames: Sequence[Mapping[str, object]], what: str) -> Judged:
    """``rule`` over each frame; the verdict where every frame gives the same one, else the entry named."""
    base = {k: v for k, v in ask.values.items() if k not in _NAMES}
    results = [ask.book.judge(ask.version, {**base, **f}, rules=[rule]) for f in frames]
    if not results:
        return Judged()
    if any(r.not_judged for r in results):
        return Judged((), tuple(dict.fromkeys(n for r in results for n in r.not_judged)))
    said = {tuple((x.message, x.source) for x in r.refusals) for r in results}
    if len(said) == 1:
        return results[0]
    return Judged((), (f"{rule}: the override loop may name the method {what}, which the release judges "
                       f"differently here; not judged",))


_NAS_CONDITION = "self.hf_config.model_type == 'nemotron-nas'"


def all_attention_no_op(raw: Mapping[str, Any]) -> bool | None:
    """Whether ``get_total_num_kv_heads`` finds no attention block in a Nemotron-NAS config (its loop ends without
    returning); None where a block is not spelled as a mapping with an attention mapping (not known)."""
    blocks = raw.get("block_configs")
    if not isinstance(blocks, list):
        return None
    for block in blocks:
        attention = block.get("attention") if isinstance(block, Mapping) else None
        if not isinstance(attention, Mapping):
            return None
        if not attention.get("no_op", False):
            return False
    return True


def nas_frame(ask: Ask) -> dict[str, object] | None:
    """``get_total_num_kv_heads``'s values at its Nemotron-NAS raise (the loop's outcome folded into the condition
    the ledger gives); None where the config is not one (the check is not reached)."""
    raw = json.loads(ask.model.config_json) if ask.model.config_json else None
    if not isinstance(raw, Mapping) or raw.get("model_type") != "nemotron-nas":
        return None
    out: dict[str, object] = {}
    model = ask.args.get("model_tag")
    if isinstance(model, str) and model:
        out["self.model"] = model
    archs = raw.get("architectures")
    if isinstance(archs, list):
        out["self.architectures"] = list(archs)
    if raw.get("multi_query"):
        out[_NAS_CONDITION] = False         # returns 1 first (multi-query attention)
        return out
    none_left = all_attention_no_op(raw)
    if none_left is not None:
        out[_NAS_CONDITION] = none_left
    return out


def evs_only(version: Version) -> dict[str, str]:
    """``EVS_ONLY`` as ``version`` holds it: architecture -> the class name the registry prints."""
    out: dict[str, str] = {}
    for since, archs in EVS_ONLY:
        if version >= since:
            out.update(archs)
    return out


def pruning_frame(ask: Ask) -> dict[str, object] | None:
    """``__post_init__``'s values at the pruning check; None without a rate above 0 (``get_video_pruning_spec``
    is None) or where the registry's class is not known (the entry is then named)."""
    rate = ask.args.get("video_pruning_rate")
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or rate <= 0:
        return None
    method = str(ask.args.get("video_pruning_method") or "evs")
    cls = model_class(ask.model, ask.version)
    if cls is None:
        return {"pruning_spec[0]": method}
    name = evs_only(ask.version).get(cls.architecture)
    supported: tuple[str, ...] = ("evs",) if name is not None else ()
    return {"self._model_info.supports_multimodal": cls.flag("supports_multimodal"), "pruning_spec[0]": method,
            "supported_pruning": supported, "self._model_info.architecture": name or cls.architecture,
            _PRUNING_CONDITION: bool(supported) and method not in supported}


#: the release passes --mamba-cache-mode to CacheConfig until then (engine/arg_utils.py; 0.33.0 only warns)
_MODE_PASSED_BELOW = Version("0.33.0")
_ALIGN_EARLIER = ("block_size", "max_num_batched_tokens", "long_prefill_token_threshold", "max_num_partial_prefills")
_ALIGN_NAMES = ("self.cache_config.mamba_cache_mode", "self.scheduler_config.disable_chunked_mm_input")


def _encoder_decoder(raw: object) -> bool | None:
    if not isinstance(raw, Mapping):
        return None
    text = raw.get("text_config")
    return bool(raw.get("is_encoder_decoder")) or (isinstance(text, Mapping) and bool(text.get("is_encoder_decoder")))


def align_frame(ask: Ask) -> tuple[dict[str, object] | None, str | None]:
    """``(frame, why not)``: the align block's values where the Mamba hooks leave the mode as the line gives it;
    None and the reason where it is not known; ``(None, None)`` where the check cannot refuse (chunked MM input
    stays on, or the mode is not align)."""
    disabled = bool(ask.args.get("disable_chunked_mm_input"))
    raw = json.loads(ask.model.config_json) if ask.model.config_json else None
    maybe_disabled = disabled or _encoder_decoder(raw) is not False
    if not maybe_disabled:
        return None, None
    cls = model_class(ask.model, ask.version)
    if cls is None:
        return None, "the model's class is not known to the release's facts"
    if cls.flag("is_hybrid") or cls.flag("is_attention_free"):
        return None, f"{cls.architecture} is a Mamba model: its hooks set the cache mode from prefix caching"
    mode = str(ask.args.get("mamba_cache_mode") or "none") if ask.version < _MODE_PASSED_BELOW else "none"
    if mode != "align":
        return None, None
    if not disabled:
        return None, "an encoder-decoder config (or one not read): the release turns chunked MM input off itself"
    if any(ask.args.is_set(k) for k in _ALIGN_EARLIER):
        return None, "the align block's earlier assertions read the line's block size / token budget"
    return {_ALIGN_NAMES[0]: mode, _ALIGN_NAMES[1]: disabled}, None


def judge(ask: Ask) -> Judged:
    """The Nemotron-NAS KV heads, the video pruning method, the align mode, then the quantization checks."""
    nas = nas_frame(ask)
    heads = Judged()
    if nas is not None and ask.among([NAS_KV_HEADS]):
        base = {k: v for k, v in ask.values.items() if k not in (_NAS_CONDITION, "self.model", "self.architectures")}
        heads = ask.book.judge(ask.version, {**base, **nas}, rules=[NAS_KV_HEADS])
    pruning = pruning_frame(ask)
    prune = Judged()
    if pruning is not None and ask.among([VIDEO_PRUNING]):
        names = ("self._model_info.supports_multimodal", "pruning_spec[0]", "supported_pruning",
                 "self._model_info.architecture", _PRUNING_CONDITION)
        base = {k: v for k, v in ask.values.items() if k not in names}
        prune = ask.book.judge(ask.version, {**base, **pruning}, rules=[VIDEO_PRUNING])
    align = Judged()
    if ask.among([ALIGN_CHUNKED_MM]):
        frame, why = align_frame(ask)
        if frame is not None:
            base = {k: v for k, v in ask.values.items() if k not in _ALIGN_NAMES}
            align = ask.book.judge(ask.version, {**base, **frame}, rules=[ALIGN_CHUNKED_MM])
        elif why is not None:
            align = Judged((), (f"{ALIGN_CHUNKED_MM}: --mamba-cache-mode align not judged: {why}",))
    quant = judge_quantization(ask)
    parts = (heads, prune, align, quant)
    return Judged(tuple(r for j in parts for r in j.refusals),
                  tuple(dict.fromkeys(n for j in parts for n in j.not_judged)))


def judge_quantization(ask: Ask) -> Judged:
    """The capability check, then (where it does not refuse) the dtype check, over every name the method may
    hold."""
    wanted = ask.among([QUANT_CAPABILITY, QUANT_DTYPE])
    if not wanted:
        return Judged()
    known, names = candidate_methods(ask)
    if not known:
        return Judged((), (f"{QUANT_CAPABILITY} / {QUANT_DTYPE}: the final quantization method is not resolved "
                           f"(an override may claim the checkpoint for the flag); not judged",))
    if names and _facts_at(ask.version) is None and not (
            ask.version < EARLY_SINCE and all(m in EARLY_METHODS for m in names)):
        return Judged((), (f"{QUANT_CAPABILITY} / {QUANT_DTYPE}: vLLM {ask.version}'s quantization classes were not "
                           f"extracted (no facts at or below it): {' or '.join(names)} not checked",))
    frames = [f for f in (quant_frame(ask, m) for m in names) if f is not None]
    what = " or ".join(names)
    capability = _judge_all(ask, QUANT_CAPABILITY, frames, what) if QUANT_CAPABILITY in wanted else Judged()
    if capability.refusals or QUANT_DTYPE not in wanted:
        return capability
    dtype = _judge_all(ask, QUANT_DTYPE, frames, what)
    return Judged(dtype.refusals, tuple(dict.fromkeys((*capability.not_judged, *dtype.not_judged))))
