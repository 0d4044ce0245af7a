"""vLLM's model, cache and multimodal config-time refusals: the values their conditions read, as each release holds
them (``values``, called from ``config_checks.namespace``). Sections below: the maximum length (here), the
``--quantization`` flag against the checkpoint and the deprecated methods, the multimodal flags on a text-only model,
``MultiModalConfig``'s checks, the external launcher's seed, 0.33.0's ``--kv-cache-dtype`` list, the renderer
workers and the tensor IPC of a multimodal model. Each section says what it leaves not judged, and why.

The model's maximum length as each vLLM release derives it, and what ``_get_and_verify_max_len`` refuses.

``ModelConfig`` calls ``_get_and_verify_max_len(hf_config=self.hf_text_config, ...)`` (0.8.0 ``config.py``
L388, 0.12.0 ``config/model.py`` L1741, 0.33.0 L2160). Read in each release's source, the derived length is:

* the smallest of the length keys the text config holds (``max_position_embeddings``, ``n_positions``,
  ``max_seq_len``, ``seq_length``, ``model_max_length``, ``max_target_positions``, ``max_sequence_length``,
  ``max_seq_length``, ``seq_len``: 0.8.0 ``config.py`` L2614-2639; from 0.14.0
  ``transformers_utils/model_arch_config_convertor.py derive_max_model_len_and_key``, 0.33.0 L374-407); from
  0.8.3 a truthy ``model_max_length`` replaces it ("For Command-R / Cohere, Cohere2 / Aya Vision models",
  0.8.3 ``config.py``);
* with ``--disable-sliding-window``, the model's sliding window where it is smaller (0.8.0 L2642-2649, 0.10.1
  ``config/__init__.py``, 0.33.0 ``config/model.py`` L2561-2567);
* the RoPE scaling factor, but for Gemma 3 (already scaled) and the types ``su`` / ``longrope`` / ``llama3``:
  up to 0.11.2 ``rope_scaling`` (``type`` read as ``rope_type``, ``mrope`` read as ``default``, which has no
  factor: 1.0), a ``yarn`` config starting from its ``original_max_position_embeddings``; from 0.12.0
  ``rope_parameters`` (per layer type where nested, the last factor wins, the top-level
  ``original_max_position_embeddings`` copied in: ``transformers_utils/config.py patch_rope_parameters``
  0.12.0 L301-325); from 0.30.0 the YaRN types (``yarn``, ``deepseek_yarn``, ``deepseek_llama_scaling``) are
  not scaled at all ("YaRN variants leave max_position_embeddings already scaled", 0.30.0 ``config/model.py``).

A ``--max-model-len`` above it is refused (``ValueError``) unless the config's ``model_max_length`` allows it or
``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is ``1`` / ``true`` (``envs.py``: ``.strip().lower() in ("1", "true")``);
up to 0.11.2 ``--disable-sliding-window`` on a model with a scaled RoPE, or above the derived length but within
``model_max_length``, is a ``NotImplementedError``.

Not judged (the values are left out, so the entry says what it read): a text config under another key than
``text_config``, a config without any length key where the loader knows no class default for it, a YaRN
config without ``original_max_position_embeddings`` before 0.30 (the release raises ``KeyError``), a
``--disable-sliding-window`` on a model whose window the loader could not settle. The tokenizer's
``model_max_length`` (``tokenizer_config.json``) refuses nothing on a generative model: 0.9.1 only caps the length
with it after the check (``ModelConfig.get_and_verify_max_len``), and from 0.9.2 it is read for the pooling runner
only ("for generative models, this can be incorrect and unduly limit the context window", 0.9.2 ``config.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask, combine
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.families import TYPE_DEFAULTS, text_model_type
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

#: the keys ``_get_and_verify_max_len`` (``derive_max_model_len_and_key`` from 0.14) reads, in its order
#: rule id -> what it refuses: the rules this area judges in frames of its own (``judge``); the other model rules read
#: the shared namespace (``values``) and are listed in ``config_checks.RULES``
RULES: Mapping[str, str] = {
    "vllm.model.max_len_above_derived": "--max-model-len above the length the release derives from the model's "
                                        "config, without VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (_get_and_verify_max_len)",
    "vllm.model.disable_sliding_window_unsupported": "--disable-sliding-window on a model with a scaled RoPE, or "
                                                     "with a length only model_max_length allows (0.8.0-0.11.2)",
    "vllm.model.quantization_deprecated": "a deprecated quantization method (the flag's or the checkpoint's) "
                                          "without --allow-deprecated-quantization (0.14+)",
}

LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
               "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
#: a truthy ``model_max_length`` replaces the smallest key (0.8.3 ``config.py``)
MODEL_MAX_LENGTH_WINS_SINCE = Version("0.8.3")
#: ``rope_parameters`` (per layer type where nested) instead of ``rope_scaling``; the NotImplementedErrors gone
ROPE_PARAMETERS_SINCE = Version("0.12.0")
#: the YaRN types are not scaled again (0.30.0 ``config/model.py``)
YARN_UNSCALED_SINCE = Version("0.30.0")
#: the message loses "This may lead to incorrect model outputs or CUDA errors." and gains the warning (0.10.2)
WARNING_SINCE = Version("0.10.2")
#: a ``null`` factor falls back to 1.0 (0.18.0); before, ``derived *= None`` raises TypeError
NULL_FACTOR_FALLBACK_SINCE = Version("0.18.0")
_UNSCALED = ("su", "longrope", "llama3")
_YARN_UNSCALED = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
#: the layer types of a nested ``rope_parameters`` (``ALLOWED_LAYER_TYPES``, transformers)
_LAYER_TYPES = frozenset({"full_attention", "sliding_attention", "chunked_attention", "linear_attention",
                          "conv", "mamba", "attention"})

WARNING = ("VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative position "
           "encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model uses absolute "
           "position encoding, positions exceeding derived_max_model_len will cause a CUDA array out-of-bounds "
           "error.")
LONG_ENV = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def text_config(model: ModelSpec) -> Mapping[str, Any] | None:
    """``hf_text_config`` as far as this module reads it: the config itself, or its ``text_config``, the keys it
    leaves out filled from the config class's defaults where the loader knows them; None where the config is not
    here (a hand-built spec, a GGUF) or its text part sits under another key."""
    if not model.config_json:
        return None
    cfg = json.loads(model.config_json)
    if not isinstance(cfg, Mapping):
        return None
    if any(isinstance(cfg.get(k), Mapping) for k in ("llm_config", "language_config", "thinker_config")):
        return None
    text = cfg.get("text_config")
    text = text if isinstance(text, Mapping) else cfg
    # the keys the config leaves out answer as transformers' config class defaults them (what ``getattr``
    # on the loaded config returns), where the loader knows the class (``model/families.py``)
    kind = text_model_type(cfg, text)
    return {**TYPE_DEFAULTS.get(kind, {}), **text, "model_type": text.get("model_type") or kind}


def _patched(rope: Mapping[str, Any]) -> dict[str, Any] | None:
    """``patch_rope_scaling_dict`` / ``patch_rope_parameters_dict``: ``type`` read as ``rope_type``, ``su`` as
    ``longrope``, ``mrope`` as ``default``; None where there is no type (the release raises)."""
    out = dict(rope)
    if "rope_type" not in out and "type" in out:
        out["rope_type"] = out["type"]
    if "rope_type" not in out:
        return None
    if out["rope_type"] == "su":
        out["rope_type"] = "longrope"
    elif out["rope_type"] == "mrope":
        out["rope_type"] = "default"
    return out


#: a ``sliding_window: 0`` (no window) reads as None before the length is derived (0.19.0 ``config/model.py``);
#: before, ``--disable-sliding-window`` caps the length at that 0
ZERO_WINDOW_IS_NONE_SINCE = Version("0.19.0")


def _window(text: Mapping[str, Any], model: ModelSpec, version: Version) -> tuple[int | None, bool]:
    """``get_hf_config_sliding_window`` / ``get_sliding_window``: the config's window unless ``use_sliding_window``
    is off; ``(window, known)`` (not known: the config names a window the loader found no layer using)."""
    raw = text.get("sliding_window")
    if isinstance(raw, list):
        sizes = [s for s in raw if isinstance(s, int)]
        raw = min(sizes) if sizes else None
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        return None, True
    if "use_sliding_window" in text and not text["use_sliding_window"]:
        return None, True
    if raw == 0:
        return (None if version >= ZERO_WINDOW_IS_NONE_SINCE else 0), True
    if model.sliding_layers == 0:
        return None, False
    return raw, True


def values(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version, env: Mapping[str, str],
           flags: Mapping[str, object]) -> dict[str, object]:
    """What the model rules read (``max_len_values``, ``quantization_values``, ``multimodal_values``); ``flags``:
    the interface flags of the model's class (``config_checks._arch_flags``, {} where no release knows it)."""
    return (max_len_values(args, model, version, env) | quantization_values(args, model, version)
            | multimodal_values(args, flags) | processor_values(args, flags) | seed_values(args, version, env)
            | kv_cache_dtype_values(args, version) | renderer_values(args, model, version, flags)
            | ipc_values(args, layout, flags))


def max_len_values(args: ResolvedArgs, model: ModelSpec, version: Version,
                   env: Mapping[str, str]) -> dict[str, object]:
    """The values ``_get_and_verify_max_len`` reads at its checks, for this line and model at ``version``: the
    derived length and its key, ``model_max_length``, the RoPE scaling, ``--disable-sliding-window`` and the
    variable. The length given (``max_model_len``) and the message's parts are ``frame``'s."""
    disable = bool(args.get("disable_sliding_window"))
    out: dict[str, object] = {
        "disable_sliding_window": disable,
        "envs.VLLM_ALLOW_LONG_MAX_MODEL_LEN": (env.get(LONG_ENV) or "0").strip().lower() in ("1", "true"),
    }
    text = text_config(model)
    if text is None:
        return out
    model_type = str(text.get("model_type") or model.model_type)
    out["hf_config.model_type"] = model_type
    mml = text.get("model_max_length")
    out["model_max_length"] = mml if _number(mml) else None
    rope_raw = text.get("rope_scaling") if version < ROPE_PARAMETERS_SINCE else (
        text.get("rope_parameters") or text.get("rope_scaling"))
    rope = _patched(rope_raw) if isinstance(rope_raw, Mapping) and version < ROPE_PARAMETERS_SINCE else None
    if version < ROPE_PARAMETERS_SINCE:
        out["rope_scaling"] = rope_raw if isinstance(rope_raw, Mapping) and rope_raw else None
        if rope is not None:
            out["rope_type"] = rope["rope_type"]
    derived: float | None = None
    key: str | None = None
    for k in LENGTH_KEYS:
        v = text.get(k)
        if v is None:
            continue
        if not _number(v):
            return out
        if derived is None or v < derived:
            key = k
        derived = v if derived is None else min(derived, v)
    if version >= MODEL_MAX_LENGTH_WINS_SINCE and _number(mml) and mml:
        key, derived = "model_max_length", mml
    if derived is None:
        return out
    if disable:
        window, known = _window(text, model, version)
        if not known:
            return out
        if window is not None and window < derived:
            key, derived = "sliding_window", window
    scaled = _scaled(derived, text, rope_raw, model_type, version)
    if scaled is None:
        return out
    out["derived_max_model_len"] = scaled
    out["max_len_key"] = key
    return out


def _scaled(derived: float, text: Mapping[str, Any], rope_raw: object, model_type: str,
            version: Version) -> float | None:
    """The RoPE scaling of the release applied to ``derived`` (None: the release raises, or the config cannot be
    read)."""
    if "gemma3" in model_type:
        return derived
    if version < ROPE_PARAMETERS_SINCE:
        if not isinstance(rope_raw, Mapping) or not rope_raw:
            return derived
        rope = _patched(rope_raw)
        if rope is None:
            return None
        if rope["rope_type"] in _UNSCALED:
            return derived
        scale: object = rope.get("factor", 1.0)
        if rope["rope_type"] == "yarn":
            original = rope.get("original_max_position_embeddings")
            if not isinstance(original, (int, float)) or isinstance(original, bool):
                return None
            derived = original
        return derived * scale if isinstance(scale, (int, float)) and not isinstance(scale, bool) else None
    # 0.12+: rope_parameters, from rope_scaling (or rope_parameters) and rope_theta (patch_rope_parameters)
    params: Any
    if isinstance(rope_raw, Mapping) and rope_raw:
        params = dict(rope_raw)
    elif _number(text.get("rope_theta")):
        params = {"rope_type": "default"}
    else:
        return derived
    nested = set(params) <= _LAYER_TYPES
    items = [p for p in params.values() if p is not None] if nested else [params]
    original_top = text.get("original_max_position_embeddings")
    factor: object = 1.0
    excluded = _YARN_UNSCALED if version >= YARN_UNSCALED_SINCE else _UNSCALED
    for item in items:
        if not isinstance(item, Mapping):
            return None
        rp = _patched(item)
        if rp is None:
            return None
        if original_top:
            rp["original_max_position_embeddings"] = original_top
        if rp["rope_type"] not in excluded:
            factor = rp.get("factor", factor)
            if rp["rope_type"] == "yarn":
                original = rp.get("original_max_position_embeddings")
                if not isinstance(original, (int, float)) or isinstance(original, bool):
                    return None
                derived = original
    if factor is None and version >= NULL_FACTOR_FALLBACK_SINCE:
        factor = 1.0
    return derived * factor if isinstance(factor, (int, float)) and not isinstance(factor, bool) else None


def frame(args: ResolvedArgs, ns: Mapping[str, object], version: Version) -> dict[str, object]:
    """The names ``_get_and_verify_max_len`` reads under a meaning of its own: ``max_model_len`` is the length the
    line gives (None when it gives none: the shared namespace holds the length the scheduler sees), ``msg`` and
    ``warning`` the locals its message is made of."""
    given = args.get("max_model_len") if args.is_set("max_model_len") else None
    max_len = given if isinstance(given, int) and not isinstance(given, bool) else None
    out: dict[str, object] = {"max_model_len": max_len}
    if max_len is not None and "derived_max_model_len" in ns:
        msg = (f"User-specified max_model_len ({max_len}) is greater than the derived max_model_len "
               f"({ns['max_len_key']}={ns['derived_max_model_len']} or model_max_length="
               f"{ns.get('model_max_length')} in model's config.json).")
        if version < WARNING_SINCE:
            msg += " This may lead to incorrect model outputs or CUDA errors."
        out["msg"] = msg
        out["warning"] = WARNING
    return out


def derived_length(args: ResolvedArgs, model: ModelSpec, version: Version, env: Mapping[str, str]) -> int | None:
    """``int(derived_max_model_len)``: the longest ``--max-model-len`` the release takes without
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` (a larger ``model_max_length`` aside); None where it is not known here."""
    derived = max_len_values(args, model, version, env).get("derived_max_model_len")
    return int(derived) if isinstance(derived, (int, float)) and not isinstance(derived, bool) else None


#: with a LongRoPE, a line without ``--max-model-len`` gets ``original_max_position_embeddings`` (0.11.1)
LONGROPE_DEFAULT_SINCE = Version("0.11.1")


def default_max_model_len(args: ResolvedArgs, model: ModelSpec, version: Version,
                          env: Mapping[str, str]) -> int | None:
    """The ``max_model_len`` the release settles on when the line gives none (``max_model_len is None``):
    ``int(derived_max_model_len)``, or from 0.11.1 a LongRoPE config's ``original_max_position_embeddings``
    (0.33.0 ``config/model.py`` L2639-2650). None where the derived length is not known here."""
    ns = max_len_values(args, model, version, env)
    derived = ns.get("derived_max_model_len")
    if not isinstance(derived, (int, float)) or isinstance(derived, bool):
        return None
    text = text_config(model) or {}
    rope = text.get("rope_parameters") or text.get("rope_scaling")
    if version >= LONGROPE_DEFAULT_SINCE and isinstance(rope, Mapping):
        items = list(rope.values()) if set(rope) <= _LAYER_TYPES else [rope]
        patched = [_patched(i) for i in items if isinstance(i, Mapping)]
        if any(p is not None and p["rope_type"] == "longrope" for p in patched):
            original = text.get("original_max_position_embeddings", derived)
            return int(original) if isinstance(original, (int, float)) and not isinstance(original, bool) else None
    return int(derived)


# -- --quantization against the checkpoint's quantization_config (ModelConfig._verify_quantization) ----------

#: ``quant_method`` is lower-cased, and from 0.8.5 ``compressed_tensors`` read as ``compressed-tensors``
COMPRESSED_TENSORS_SPELLING_SINCE = Version("0.8.5")
#: checkpoint methods no release's ``override_quantization_method`` claims (read in every listed release's
#: ``model_executor/layers/quantization/*.py`` and ``models/deepseek_v4*/quant_config.py``), but DeepSeek-V4's own
#: model types, whose fp8 checkpoints ``DeepseekV4FP8Config`` claims whatever the flag (0.20.0+)
PLAIN_CHECKPOINTS = frozenset({"fp8", "compressed-tensors", "bitsandbytes", "fbgemm_fp8", "fp_quant"})
#: the flags an AWQ / GPTQ checkpoint's overrides accept (``AWQMarlinConfig``: None, marlin, awq_marlin;
#: ``AutoAWQConfig`` 0.24+: awq, awq_marlin, auto_awq, marlin; ``GPTQMarlinConfig``, ``AutoGPTQConfig`` 0.22+,
#: ``GPTQBitBLASConfig``, the serialized-format ``MarlinConfig`` / ``GPTQMarlin24Config`` / ``BitBLASConfig``;
#: IPEX and the CPU configs off CUDA): with these the outcome depends on the checkpoint's kernel compatibility
AWQ_FAMILY = frozenset({"awq", "awq_marlin", "auto_awq", "marlin", "ipex", "cpu_awq"})
GPTQ_FAMILY = frozenset({"gptq", "gptq_marlin", "auto_gptq", "marlin", "gptq_marlin_24", "bitblas", "gptq_bitblas",
                         "ipex", "cpu_gptq"})
#: flags whose override claims a checkpoint of another method (``MoeWNA16Config``: GPTQ / AWQ; ``GGUFConfig``
#: 0.20-0.23 and ``HummingConfig`` 0.20+: any; ``DeepseekV4FP8Config``: fp8)
USER_CLAIMED = frozenset({"moe_wna16", "gguf", "humming", "deepseek_v4_fp8"})
_SERIALIZED_FORMATS = ("marlin", "marlin_24", "bitblas")


def _quant_cfg(model: ModelSpec) -> tuple[Mapping[str, Any] | None, bool]:
    """``_parse_quant_hf_config``: the config's ``quantization_config`` (``compression_config`` for older
    compressed-tensors checkpoints); ``(cfg, known)``, not known where only the text config holds one (read from
    0.10.2) or a ModelOpt ``hf_quant_config.json`` beside the config may hold it (not read here: a ModelOpt
    checkpoint's override claims it whatever the flag, so no mismatch is missed)."""
    if not model.config_json:
        return None, False
    cfg = json.loads(model.config_json)
    if not isinstance(cfg, Mapping):
        return None, False
    for key in ("quantization_config", "compression_config"):
        got = cfg.get(key)
        if isinstance(got, Mapping):
            return got, True
    text = cfg.get("text_config")
    if isinstance(text, Mapping) and any(isinstance(text.get(k), Mapping) for k in (
            "quantization_config", "compression_config")):
        return None, False
    return None, True


def _mismatch_certain(quant_cfg: Mapping[str, Any], method: str, asked: str, model_type: str) -> bool:
    """Whether no override of any listed release can claim this checkpoint for ``--quantization asked``, so the
    release compares the two as they are."""
    if asked in USER_CLAIMED:
        return False
    if serialized(quant_cfg):
        return False
    if method in PLAIN_CHECKPOINTS:
        return not model_type.startswith("deepseek_v4")
    if method == "awq":
        return asked not in AWQ_FAMILY
    if method == "gptq":
        return asked not in GPTQ_FAMILY
    return False


def quantization_values(args: ResolvedArgs, model: ModelSpec, version: Version) -> dict[str, object]:
    """``_verify_quantization``'s values at its mismatch check: ``quant_cfg``, the flag (``self.quantization``) and
    the checkpoint's ``quant_method``. ``quant_method`` is left out (not judged) where an override may rename
    both, unless the flag and the checkpoint agree (an override then renames both alike)."""
    asked_raw = args.get("quantization")
    asked = str(asked_raw) if isinstance(asked_raw, str) and asked_raw else None
    quant_cfg, known = _quant_cfg(model)
    out: dict[str, object] = {"self.quantization": asked}
    if not known:
        return out
    out["quant_cfg"] = quant_cfg
    if quant_cfg is None or asked is None:
        return out
    method = str(quant_cfg.get("quant_method", "")).lower()
    if version >= COMPRESSED_TENSORS_SPELLING_SINCE:
        method = method.replace("compressed_tensors", "compressed-tensors")
    if method and (method == asked or _mismatch_certain(quant_cfg, method, asked, model.hf_model_type)):
        out["quant_method"] = method
    return out


# -- the multimodal flags on a text-only model (ModelConfig._init_multimodal_config, 0.8.0-0.10.0) -----------

#: the flags ``_init_multimodal_config`` refuses where ``registry.is_multimodal_model(architectures)`` is False
#: (0.10.0 ``config.py`` L764-787; ``interleave_mm_strings`` from 0.10.0, the other three from 0.9.0, 0.8.x only
#: ``limit_mm_per_prompt``): the destinations of ``--limit-mm-per-prompt``, ``--mm-processor-kwargs``,
#: ``--disable-mm-preprocessor-cache`` and ``--interleave-mm-strings``
MM_FLAGS = ("limit_mm_per_prompt", "mm_processor_kwargs", "disable_mm_preprocessor_cache", "interleave_mm_strings")


def multimodal_values(args: ResolvedArgs, flags: Mapping[str, object]) -> dict[str, object]:
    """The multimodal flags as ``ModelConfig`` holds them where its refusals are reached: on a class the
    release's registry knows as text-only. On a multimodal class the refusals are not reached (the flags read
    as unset); on a class no extracted release knows, or under ``--model-impl transformers``, a flag the line
    sets is left out (not judged)."""
    given = {dest: args.get(dest) for dest in MM_FLAGS}
    if not any(given.values()):
        return dict.fromkeys(MM_FLAGS, None)
    if not flags or args.get("model_impl", "auto") == "transformers":
        return {d: None for d, v in given.items() if not v}
    if flags.get("supports_multimodal"):
        return dict.fromkeys(MM_FLAGS, None)
    return given


# -- MultiModalConfig._validate_multimodal_config (0.11.1+) ------------------------------------------------------

#: ``MultiModalConfig``'s defaults (``config/multimodal.py``: 0.11.1 L108-111, 0.33.0 L369-411), the same in every
#: listed release that validates them; ``ModelConfig`` drops the flags left at None before it builds the config
PROCESSOR_DEFAULTS: Mapping[str, object] = {
    "mm_processor_cache_type": "lru", "mm_shm_cache_max_object_size_mb": 128, "mm_encoder_attn_dtype": None,
    "mm_encoder_fp8_scale_path": None, "mm_encoder_fp8_scale_save_path": None,
}


def processor_values(args: ResolvedArgs, flags: Mapping[str, object]) -> dict[str, object]:
    """``MultiModalConfig``'s fields as ``ModelConfig.__post_init__`` builds it, only for a class the release's
    registry knows as multimodal (``if self._model_info.supports_multimodal``, 0.33.0 ``config/model.py`` L831):
    on a text-only class its checks are not reached (the defaults, which refuse nothing, stand in); on a class no
    extracted release knows, a flag the line sets is left out (not judged)."""
    given = {k: (args.get(k) if args.get(k) is not None else d) for k, d in PROCESSOR_DEFAULTS.items()}
    out: dict[str, object] = {"MultiModalConfig.mm_shm_cache_max_object_size_mb":
                              PROCESSOR_DEFAULTS["mm_shm_cache_max_object_size_mb"]}
    changed = [k for k, v in given.items() if v != PROCESSOR_DEFAULTS[k]]
    if not changed or (flags and not flags.get("supports_multimodal")):
        return {**out, **PROCESSOR_DEFAULTS}
    if not flags or args.get("model_impl", "auto") == "transformers":
        return {**out, **{k: v for k, v in PROCESSOR_DEFAULTS.items() if k not in changed}}
    return {**out, **given}


# -- a deprecated quantization method (ModelConfig._verify_quantization, 0.14+) --------------------------------

#: ``DEPRECATED_QUANTIZATION_METHODS`` (``model_executor/layers/quantization/__init__.py``), by the first listed
#: release that holds each list (the check itself is from 0.14.0)
DEPRECATED_METHODS: tuple[tuple[Version, frozenset[str]], ...] = (
    (Version("0.23.0"), frozenset({"fbgemm_fp8", "fp_quant"})),
    (Version("0.20.0"), frozenset({"tpu_int8", "fbgemm_fp8", "fp_quant"})),
    (Version("0.19.0"), frozenset({"tpu_int8", "fbgemm_fp8", "fp_quant", "experts_int8", "petit_nvfp4"})),
    (Version("0.16.0"), frozenset({"tpu_int8", "ptpc_fp8", "fbgemm_fp8", "fp_quant", "experts_int8", "petit_nvfp4"})),
    (Version("0.15.0"), frozenset({"tpu_int8", "ptpc_fp8", "fbgemm_fp8", "fp_quant", "bitblas", "gptq_marlin_24",
                                   "gptq_bitblas", "experts_int8", "ipex", "petit_nvfp4"})),
    (Version("0.14.0"), frozenset({"deepspeedfp", "tpu_int8", "ptpc_fp8", "fbgemm_fp8", "fp_quant", "bitblas",
                                   "gptq_marlin_24", "gptq_bitblas", "hqq", "experts_int8", "ipex", "auto-round",
                                   "rtn", "petit_nvfp4"})),
)
#: what an override can make of ``self.quantization`` on CUDA (IPEX, the CPU configs and Petit answer only off it)
OVERRIDE_RESULTS = frozenset({"gptq_marlin", "awq_marlin", "marlin", "gptq_marlin_24", "bitblas", "gptq_bitblas",
                              "moe_wna16", "modelopt", "modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed", "inc",
                              "gpt_oss_mxfp4", "gguf", "humming", "deepseek_v4_fp8", "auto_gptq", "auto_awq"})


def deprecated_methods(version: Version) -> frozenset[str]:
    return next((names for since, names in DEPRECATED_METHODS if version >= since), frozenset())


def final_quantization(args: ResolvedArgs, model: ModelSpec, version: Version) -> tuple[bool, str | None]:
    """``self.quantization`` after the override loop and the mismatch check: ``(known, value)``. Where the flag and
    the checkpoint differ for certain the release stops at the mismatch first (None stands in: the deprecation
    is not reached); where an override may rename it, known only when no name it can take is deprecated."""
    ns = quantization_values(args, model, version)
    asked = ns["self.quantization"]
    if "quant_cfg" not in ns:
        return False, None
    quant_cfg = ns["quant_cfg"]
    if not isinstance(quant_cfg, Mapping):
        return True, asked if isinstance(asked, str) else None
    method = ns.get("quant_method")
    if asked is not None and method is None:
        return False, None       # an override may claim the checkpoint for the flag
    if asked is not None and asked != method:
        return True, None        # refused as a mismatch before
    method = str(method) if method is not None else str(quant_cfg.get("quant_method", "")).lower()
    if version >= COMPRESSED_TENSORS_SPELLING_SINCE:
        method = method.replace("compressed_tensors", "compressed-tensors")
    if method in PLAIN_CHECKPOINTS and not model.hf_model_type.startswith("deepseek_v4") and \
            not serialized(quant_cfg):
        return True, method
    deprecated = deprecated_methods(version)
    if asked == method and method in ("awq", "gptq") and not serialized(quant_cfg):
        # --quantization awq / gptq on its own checkpoint: of the overrides only AutoAWQConfig / AutoGPTQConfig
        # (0.24+ / 0.22+) take that flag, giving auto_awq / auto_gptq; none of the three is ever deprecated
        return True, method
    if method not in deprecated and not (deprecated & renamed_to(method, quant_cfg)):
        return True, method      # whatever an override makes of it, no deprecated name
    return False, None


def renamed_to(method: str, quant_cfg: Mapping[str, Any]) -> frozenset[str]:
    """The names an override can give a checkpoint of ``method`` on CUDA without a flag: an AWQ checkpoint's
    ``AWQMarlinConfig`` / ``AutoAWQConfig`` (a serialized-format key aside); every override's name otherwise."""
    if method == "awq" and not serialized(quant_cfg):
        return frozenset({"awq_marlin", "auto_awq"})
    return OVERRIDE_RESULTS


def serialized(quant_cfg: Mapping[str, Any]) -> bool:
    """A checkpoint in a kernel's serialized format (``MarlinConfig``, ``GPTQMarlin24Config``, ``BitBLASConfig``)."""
    return quant_cfg.get("checkpoint_format") in _SERIALIZED_FORMATS or bool(
        quant_cfg.get("is_marlin_format") or quant_cfg.get("is_bitblas_format"))


def deprecated_frame(args: ResolvedArgs, model: ModelSpec, version: Version,
                     ns: Mapping[str, object]) -> dict[str, object]:
    """``ns`` with the deprecation check's names: ``self.quantization`` as that check reads it (removed where it
    is not known, so the entry says what it read), the release's list and ``--allow-deprecated-quantization``."""
    known, final = final_quantization(args, model, version)
    out = {k: v for k, v in ns.items() if k != "self.quantization"}
    out["me_quant.DEPRECATED_QUANTIZATION_METHODS"] = deprecated_methods(version)
    out["self.allow_deprecated_quantization"] = bool(args.get("allow_deprecated_quantization"))
    if known:
        out["self.quantization"] = final
    return out


# -- the external launcher without a seed (ModelConfig.verify_with_parallel_config, 0.8.3-0.11.0) ------------

#: ``ModelConfig.__post_init__`` sets a missing seed to 0 under V1 (``if envs.VLLM_USE_V1 and self.seed is None``,
#: 0.9.0 ``config.py`` L451) and from 0.11.1 always (``config/model.py`` L435); 0.8.3-0.8.5 keep ``None``
SEED_ZERO_UNDER_V1_SINCE = Version("0.9.0")
SEED_ZERO_SINCE = Version("0.11.1")


def seed_values(args: ResolvedArgs, version: Version, env: Mapping[str, str]) -> dict[str, object]:
    """``self.seed`` where ``verify_with_parallel_config`` asserts it under ``--distributed-executor-backend
    external_launcher``: ``--seed``, else what ``__post_init__`` made of its absence; left out where
    ``VLLM_USE_V1`` is not an integer (``envs.py``: ``bool(int(os.getenv("VLLM_USE_V1", "1")))`` raises)."""
    seed = args.get("seed")
    if seed is not None or version < SEED_ZERO_UNDER_V1_SINCE:
        return {"self.seed": seed}
    if version >= SEED_ZERO_SINCE:
        return {"self.seed": 0}
    raw = (env.get("VLLM_USE_V1") or "1").strip()
    if not raw.lstrip("-").isdigit():
        return {}
    return {"self.seed": 0 if int(raw) else None}


# -- --kv-cache-dtype outside the release's list (CacheConfig._validate_cache_dtype, 0.33.0) -------------------

#: ``KV_CACHE_DTYPES = list(get_args(CacheDType))`` (0.33.0 ``config/cache.py`` L44-73), in its order: 0.33.0's
#: parser gives the flag no choices (a platform backend may register more with ``register_kv_cache_dtype``; the
#: CUDA platform registers none), so the validator is the release's only check of the value
KV_CACHE_DTYPES_0_33 = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
                        "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc",
                        "turboquant_3bit_nc", "octave_k3v4", "octave_k3v3", "octave_k3v3_compact", "ultraquant_4bit",
                        "int4_per_token_head", "int8_per_token_head", "fp8_per_token_head", "nvfp4", "nvfp4_4over6")
KV_CACHE_DTYPE_VALIDATOR_SINCE = Version("0.33.0")


def kv_cache_dtype_values(args: ResolvedArgs, version: Version) -> dict[str, object]:
    """``is_known_kv_cache_dtype(cache_dtype)`` and the list the message prints, where the release validates the
    value itself (0.33.0; before, the flag's choices refuse an unknown value at the parse)."""
    if version < KV_CACHE_DTYPE_VALIDATOR_SINCE:
        return {}
    asked = str(args.get("kv_cache_dtype", "auto") or "auto")
    return {"is_known_kv_cache_dtype": asked in KV_CACHE_DTYPES_0_33, "KV_CACHE_DTYPES": list(KV_CACHE_DTYPES_0_33)}


# -- the renderer workers and the tensor IPC of a multimodal model (ModelConfig, 0.19+) -------------------------

#: ``ModelConfig.__post_init__`` refuses ``--renderer-num-workers > 1`` with the processor cache on for every
#: runner up to 0.26 (0.19.0 ``config/model.py`` L650-661), for the pooling runner only from 0.27
RENDERER_POOLING_ONLY_SINCE = Version("0.27.0")
#: ``MultiModalConfig.mm_processor_cache_gb``'s default, 0 for an encoder-decoder model (0.19.0 L610-611)
MM_PROCESSOR_CACHE_GB = 4


def _encoder_decoder(model: ModelSpec) -> bool | None:
    """``is_encoder_decoder(hf_config)``: the config's (or its text config's) ``is_encoder_decoder``; None where the
    config is not here."""
    if not model.config_json:
        return None
    cfg = json.loads(model.config_json)
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), Mapping) else {}
    return bool(cfg.get("is_encoder_decoder") or text.get("is_encoder_decoder"))


def renderer_values(args: ResolvedArgs, model: ModelSpec, version: Version,
                    flags: Mapping[str, object]) -> dict[str, object]:
    """``self._model_info.supports_multimodal``, ``renderer_num_workers``, the cache's size and the runner, where
    the renderer check reads them. A class no extracted release knows is judged only where the check cannot
    hold anyway (one renderer worker); the runner only where ``--runner`` names it."""
    workers = args.get("renderer_num_workers")
    workers = workers if isinstance(workers, int) and not isinstance(workers, bool) else 1
    out: dict[str, object] = {"renderer_num_workers": workers}
    if flags and args.get("model_impl", "auto") != "transformers":
        out["self._model_info.supports_multimodal"] = bool(flags.get("supports_multimodal"))
    elif workers <= 1:
        out["self._model_info.supports_multimodal"] = False  # the check cannot hold: nothing to know
    gb = args.get("mm_processor_cache_gb")
    enc_dec = _encoder_decoder(model)
    if enc_dec is not None:
        size = gb if isinstance(gb, (int, float)) and not isinstance(gb, bool) else MM_PROCESSOR_CACHE_GB
        out["self.multimodal_config.mm_processor_cache_gb"] = 0 if enc_dec else size
    runner = args.get("runner")
    if version >= RENDERER_POOLING_ONLY_SINCE and runner in ("generate", "pooling", "draft"):
        out["self.runner_type"] = runner
    elif version >= RENDERER_POOLING_ONLY_SINCE and flags and not flags.get("is_pooling_model"):
        # ``--runner auto`` on a class that is no pooling model runs it as it is (``_resolve_runner``): not pooling
        out["self.runner_type"] = "generate"
    return out


def ipc_values(args: ResolvedArgs, layout: Layout, flags: Mapping[str, object]) -> dict[str, object]:
    """``verify_with_parallel_config``'s ``mm_tensor_ipc`` check (0.19+): the multimodal config where the release
    builds one (a class its registry knows as multimodal), ``--mm-tensor-ipc`` and the world across DP (TP x PP x
    DP, PCP aside: with TP = PP = DP = 1 and PCP > 1 the world is left out). Without ``torch_shm`` the check
    cannot hold and ``None`` stands in for the config; with it, a class no extracted release knows is not
    judged."""
    ipc = args.get("mm_tensor_ipc")
    out: dict[str, object] = {"self.multimodal_config.mm_tensor_ipc": ipc}
    pcp = args.get("prefill_context_parallel_size")
    world = layout.tensor_parallel_size * layout.pipeline_parallel_size * layout.data_parallel_size
    if world > 1 or not (isinstance(pcp, int) and pcp > 1):
        out["parallel_config.world_size_across_dp"] = world
    if ipc != "torch_shm":
        out["self.multimodal_config"] = None
    elif flags and args.get("model_impl", "auto") != "transformers":
        out["self.multimodal_config"] = True if flags.get("supports_multimodal") else None
    return out


MAX_LEN_RULES = frozenset({"vllm.model.max_len_above_derived", "vllm.model.disable_sliding_window_unsupported"})
DEPRECATED_QUANT_RULE = "vllm.model.quantization_deprecated"


def judge(ask: Ask) -> Judged:
    """``_get_and_verify_max_len``'s rules in ``frame`` (its ``max_model_len`` is the length the line gives, where
    the shared namespace holds the length the scheduler sees), then the deprecation check in ``deprecated_frame``
    (its ``self.quantization`` is the method the override loop settled on, not the flag the mismatch check
    compares)."""
    in_max_len = ask.judge(frame(ask.args, ask.values, ask.version), MAX_LEN_RULES)
    deprecated = ask.among([DEPRECATED_QUANT_RULE])
    in_model = ask.book.judge(ask.version, deprecated_frame(ask.args, ask.model, ask.version, ask.values),
                              rules=deprecated) if deprecated else Judged()
    return combine((in_max_len, in_model))
