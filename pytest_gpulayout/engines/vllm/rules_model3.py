"""vLLM's model refusals about the runner against the model's class, the pooling head's dtype, prompt embeddings, the
quantization name and ``--quantization-config``, a 16-bit KV cache dtype, the multimodal encoder's backend and
processor device, an EC producer on a text-only model and a model pulled from an object store, by release. Each rule
judges in a frame of its own over the shared namespace (its entries read ``self.runner_type``, ``head_dtype``,
``value``, ``v``, ``device``, ``self.quantization`` under the meaning of their own function).

- ``ModelConfig.__post_init__``'s runner checks (0.10.1+; config/model.py:712-740 in 0.33.0, 709-733 in 0.32.0,
  config/__init__.py:686-701 in 0.10.1): ``--runner generate`` on a model class that is no text-generation model,
  ``--runner pooling --convert none`` on one that is no pooling model, and from 0.22 ``--runner generate`` /
  ``--runner draft`` on an embedding model (``is_pooling_model and not is_generative_model``). The registry's answers
  are the release's interface facts (``releases/*.json`` group ``interfaces``): ``is_pooling_model``; the facts hold
  no text-generation flag (``is_text_generation_model`` asks for ``compute_logits``), so a class the facts do not flag
  as pooling is taken as a text-generation one and a pooling class as none (no class of the pooling registries' model
  files of 0.11.0, 0.20.0 and 0.33.0 defines ``compute_logits`` itself; the CPU vLLM 0.32 agrees on BAAI/bge-m3 and
  Qwen3-8B, tests/engines/test_vllm_config_checks_real.py). With ``--runner auto`` the release picks the runner from
  the architecture or from a Sentence Transformers ``modules.json`` in the repository (``_get_default_runner_type``),
  which is not read here: on a pooling class both give ``pooling``; on a generative class with ``--convert auto``
  neither refuses (``generate`` on a generative class, or ``pooling`` with the converter the suffix table picks,
  always one of ``_RUNNER_CONVERTS["pooling"]``), so ``generate`` stands in; with ``--runner auto --convert none`` on
  a generative class the runner is not known and the entries are named, never guessed. ``--task`` (0.10.1-0.12, which
  rewrites the runner and the converter first) and ``--model-impl transformers`` are not judged either, nor an
  architecture no extracted release at or below knows (given defaults alone, the registry itself answers an
  architecture it does not know: nothing is said then).
- ``_get_head_dtype`` (0.10.2+, config/model.py:2521-2542 in 0.33.0): ``--hf-overrides`` ``head_dtype`` that is a
  string outside ``_STR_DTYPE_TO_TORCH_DTYPE`` (after ``lower()``; ``model`` exactly is the model's dtype) or
  neither a string nor null (a number, a list). ``ModelConfig.head_dtype`` is read when the pooler's head is built
  (model_executor/layers/pooler.py:436 in 0.10.2), while the model loads: the engine does not start, though the
  refusal comes after ``create_engine_config``. Judged on the pooling runner; on another runner the entries are named
  (0.33.0 reads it for the generation head too, earlier releases not everywhere).
- ``ModelConfig.validate_model_config_after`` (0.29+, config/model.py:1076-1081 in 0.33.0):
  ``--enable-prompt-embeds`` on an encoder-decoder model (``is_encoder_decoder`` of the config or its text config).
- ``ModelConfig._verify_quantization`` (0.10.0+, config/model.py:1460-1466 in 0.33.0): a ``--quantization`` name
  outside ``QUANTIZATION_METHODS`` (the facts' ``quantization.methods`` of the nearest extracted release). Before
  0.10.0 the flag's choices refuse another name at the parse. A name that the nearest extracted releases below and
  above disagree on is named, not judged (the list changed in between).
- ``VllmConfig._reject_mismatched_float_kv_cache`` (0.33.0, config/vllm.py:1492-1507): a ``--kv-cache-dtype``
  float16 / bfloat16 other than the dtype the model is served in (``dtype.resolve_dtype``, the pooling runner
  preferring float16); where that dtype is not resolved (the GPU's capability unknown) the entry is named.
- ``MultiModalConfig._validate_mm_encoder_attn_backend`` (0.12+, config/multimodal.py:496-505 in 0.33.0):
  ``--mm-encoder-attn-backend XFORMERS`` (any case) on a class the release's registry knows as multimodal, the only
  one ``ModelConfig`` builds a ``MultiModalConfig`` for (``rules_model.processor_values``).
- ``MultiModalConfig.get_mm_processor_device_type`` / ``validate_mm_processor_device`` (0.28+, config/multimodal.py:
  597-664 in 0.33.0), which ``VllmConfig.__post_init__`` reaches on a multimodal class (config/vllm.py:2088-2090,
  3014-3023): ``--mm-processor-kwargs`` ``device`` that ``torch.device`` does not parse, or that names the CUDA device
  (also ``--mm-processor-device`` other than cpu / auto, folded into the kwargs where they give no device,
  config/multimodal.py:558-592) on an instance that is not an encode-only EC producer. Only a device string is
  judged: its type among those every torch of the releases' range parses (a newer type, a non-string, is named).
- ``VllmConfig._resolve_mm_encoder_only`` (0.29+, config/vllm.py:2889-2901 in 0.33.0): an encode-only EC producer
  (``--ec-transfer-config`` with a connector and ``ec_role`` ``ec_producer``) on a class that is not multimodal.
- ``VllmConfig.try_verify_and_update_config`` (0.11+, config/vllm.py:2775-2795 in 0.33.0): a model given as an object
  store URI (``vllm serve s3://...``; gs:// too, az:// from 0.18, transformers_utils/runai_utils.py:16) with a
  ``--load-format`` other than auto (which becomes runai_streamer) or the release's streaming formats. The message's
  ``Model:`` is the local mirror ``ObjectStorageModel`` pulls the config into (``$VLLM_ASSETS_CACHE/model_streamer/``
  and the URI's SHA-256 in 8 hex digits, runai_utils.py:56-68): the home directory reads ``$HOME`` from the
  deployment's environment, ``~`` where it does not say.
- ``QuantizationConfigArgs`` (``--quantization-config``, 0.22+; config/quantization.py:56-189 in 0.33.0): vLLM
  validates the flag's JSON while it parses the line (``parse_dataclass``, engine/arg_utils.py), so the field
  validators' ``ValueError`` is printed by argparse as the flag's invalid value, each field's in turn: a ``linear`` /
  ``moe`` string that is an online shorthand without that kind's spec (``int8_per_channel_weight_only`` and
  ``nvfp4_per_token`` define only ``moe``), or neither a shorthand nor a ``QUANT_KEY_NAMES`` name, a ``weight`` /
  ``activation`` string of a spec that is no such name; from 0.30 a ``targets`` value that is no online shorthand
  (the first such item; a ``re:`` pattern before it that Python's ``re`` cannot compile is named, not judged: the
  release compiles with ``regex``, whose errors are not modelled) and, once the fields are valid, ``targets`` with
  ``linear`` / ``moe``. 0.22-0.29 then refuse, in ``EngineArgs.__post_init__`` (``resolve_quantization_config``),
  the flag with a ``--quantization`` that is no online shorthand. A ``TypeError`` of a validator (a spec's key that
  is not a string, ``targets`` that is not an object) is not pydantic's to wrap: argparse prints its own words
  ("invalid parse_dataclass value"), so those entries stay open.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask, combine
from pytest_gpulayout.engines.vllm import rules_model
from pytest_gpulayout.engines.vllm.dtype import resolve_dtype
from pytest_gpulayout.engines.vllm.interfaces import model_class
from pytest_gpulayout.generation import extracted_releases, release_facts
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged

RUNNER = "vllm.model.runner_unsupported"
HEAD_DTYPE = "vllm.pooling.head_dtype"
PROMPT_EMBEDS = "vllm.model.prompt_embeds_encoder_decoder"
QUANT_UNKNOWN = "vllm.model.quantization_unknown"
FLOAT_KV = "vllm.cache.float_kv_dtype_mismatch"
MM_XFORMERS = "vllm.multimodal.encoder_attn_xformers"
MM_DEVICE = "vllm.multimodal.processor_device"
EC_PRODUCER_TEXT = "vllm.multimodal.ec_producer_text_model"
OBJECT_STORE = "vllm.model.object_store_load_format"
QUANT_CONFIG = "vllm.quantization.config_options"

RULES: Mapping[str, str] = {
    RUNNER: "--runner generate on a class that is no text-generation model, --runner pooling --convert none on one "
            "that is no pooling model, --runner generate / draft on an embedding model (ModelConfig, 0.10.1+)",
    HEAD_DTYPE: "--hf-overrides head_dtype that is not a dtype name, or neither a string nor null, on the pooling "
                "runner (_get_head_dtype, 0.10.2+)",
    PROMPT_EMBEDS: "--enable-prompt-embeds on an encoder-decoder model (ModelConfig, 0.29+)",
    QUANT_UNKNOWN: "a --quantization name outside the release's QUANTIZATION_METHODS (ModelConfig, 0.10.0+)",
    FLOAT_KV: "--kv-cache-dtype float16 / bfloat16 other than the model's served dtype (VllmConfig, 0.33.0)",
    MM_XFORMERS: "--mm-encoder-attn-backend XFORMERS on a multimodal model (MultiModalConfig, 0.12+)",
    MM_DEVICE: "a multimodal processor device torch cannot parse, or the CUDA device outside an encode-only EC "
               "producer (MultiModalConfig, 0.28+)",
    EC_PRODUCER_TEXT: "an encode-only EC producer (--ec-transfer-config ec_role ec_producer) on a model that is not "
                      "multimodal (VllmConfig, 0.29+)",
    QUANT_CONFIG: "--quantization-config with an unknown quantization name, a shorthand without that layer kind's "
                  "spec, a target that is no online shorthand, targets with linear / moe, or (0.22-0.29) with a "
                  "--quantization that is no online shorthand (QuantizationConfigArgs, 0.22+)",
    OBJECT_STORE: "a model from an object store (s3:// / gs:// / az://) with a --load-format that does not stream it "
                  "(VllmConfig, 0.11+)",
}

#: ``_RUNNER_CONVERTS["pooling"]``: ``reward`` too up to 0.18 (config/model.py:91 in 0.18.1, :96 in 0.19.0)
POOLING_CONVERTS_REWARD_UNTIL = Version("0.19.0")
#: ``--runner draft`` and a converter given with ``--runner auto`` (the pooling runner) count from 0.22
#: (``_get_runner_type(architectures, runner, convert)``, config/model.py:1307-1329 in 0.33.0)
EMBEDDING_CHECK_SINCE = Version("0.22.0")
#: ``--task`` rewrites ``--runner`` / ``--convert`` before the checks (config/__init__.py:632-672 in 0.10.1)
TASK_UNTIL = Version("0.13.0")
#: ``_STR_DTYPE_TO_TORCH_DTYPE`` (config/model.py:2380-2386 in 0.33.0, config/__init__.py:2606-2612 in 0.10.2)
#: the device types of ``torch.device`` strings in every torch the listed releases pin (c10 ``DeviceType`` names)
TORCH_DEVICE_TYPES = frozenset({"cpu", "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "xla",
                                "vulkan", "meta", "hpu", "lazy", "ipu", "xpu", "mps", "privateuseone", "mtia"})
#: the object-store schemes (``SUPPORTED_SCHEMES``): az:// from 0.18 (transformers_utils/runai_utils.py:16)
AZURE_SCHEME_SINCE = Version("0.18.0")
STR_DTYPES: Mapping[str, str] = {"half": "float16", "float16": "float16", "float": "float32", "float32": "float32",
                                 "bfloat16": "bfloat16"}


def known_class(ask: Ask) -> bool | None:
    """Whether the model's class is a pooling one, by the release's interface facts; None where no extracted
    release at or below knows it, or under ``--model-impl transformers``."""
    if ask.args.get("model_impl", "auto") == "transformers":
        return None
    cls = model_class(ask.model, ask.version)
    return None if cls is None else cls.flag("is_pooling_model")


def _generates(ask: Ask) -> bool | None:
    """Whether the model's class generates text (``is_text_generation_model``: it has ``compute_logits``; a pooling
    class may too, e.g. ``InternLM2ForRewardModel``, ``JambaForSequenceClassification``), by the release's interface
    facts (``text_generation``); None where the facts do not say."""
    cls = model_class(ask.model, ask.version)
    return None if cls is None else cls.generates


def runner_frame(ask: Ask, pooling_class: bool | None) -> dict[str, object] | None:
    """``__post_init__``'s names at the runner checks (see the module docstring); None where nothing can refuse
    (no runner / converter flag on a class no release knows); without ``self.runner_type`` where it is not known."""
    args, version = ask.args, ask.version
    runner = str(args.get("runner") or "auto")
    convert = str(args.get("convert") or "auto")
    task = args.get("task") if version < TASK_UNTIL else None
    if pooling_class is None:
        return {} if (runner, convert) != ("auto", "auto") or task is not None else None
    pooling_converts = ["embed", "classify"] + (["reward"] if version < POOLING_CONVERTS_REWARD_UNTIL else [])
    out: dict[str, object] = {
        "is_pooling_model": pooling_class,
        "generate_converts": [], "pooling_converts": pooling_converts,
        "convert_option": "<" + "|".join(pooling_converts) + ">", "self.task": None,
    }
    generates = _generates(ask) if pooling_class else False
    if generates is not None:  # unknown (no facts): the entries reading it are named, never guessed
        out["is_generative_model"] = generates if pooling_class else True
    if task is not None:
        return {k: v for k, v in out.items() if k != "self.task"}
    if runner == "auto":
        if pooling_class:
            runner_type = "pooling"
        elif version >= EMBEDDING_CHECK_SINCE and convert not in ("auto", "none"):
            runner_type = "pooling"
        elif convert == "auto":
            runner_type = "generate"   # or pooling by a Sentence Transformers config: neither refuses
        else:
            return out                 # --convert none: the runner a modules.json picks is not known
    else:
        runner_type = runner
    if convert != "auto":
        convert_type = convert
    elif runner_type == "pooling":
        # the class's own head, else the converter the suffix table picks: one of pooling_converts either way
        convert_type = "none" if pooling_class else pooling_converts[0]
    else:
        convert_type = "none"
    out["self.runner_type"] = runner_type
    out["self.convert_type"] = convert_type
    return out


def served_runner(ask: Ask, pooling_class: bool | None) -> str | None:
    """The runner the line serves the model with, where ``runner_frame`` knows it."""
    frame = runner_frame(ask, pooling_class)
    value = frame.get("self.runner_type") if frame else None
    return str(value) if isinstance(value, str) else None


def head_dtype_frame(args: ResolvedArgs, runner: str | None) -> dict[str, object] | None:
    """``_get_head_dtype``'s names for ``--hf-overrides`` ``head_dtype``; None without it; without the names where
    the runner is not the pooling one (named, not judged)."""
    overrides = args.get("hf_overrides")
    if isinstance(overrides, str):
        try:
            overrides = json.loads(overrides)
        except ValueError:
            return None
    if not isinstance(overrides, Mapping) or overrides.get("head_dtype") is None:
        return None
    if runner != "pooling":
        return {}
    raw = overrides["head_dtype"]
    is_str = isinstance(raw, str)
    value = raw.lower() if isinstance(raw, str) else raw
    return {"not (head_dtype == 'model')": raw != "model", "head_dtype": value,
            "isinstance(head_dtype, str)": is_str, "not (isinstance(head_dtype, str))": not is_str,
            "not (isinstance(head_dtype, torch.dtype))": True, "not (head_dtype is None)": True,
            "_STR_DTYPE_TO_TORCH_DTYPE": dict(STR_DTYPES)}


def prompt_embeds_frame(args: ResolvedArgs, model: ModelSpec) -> dict[str, object] | None:
    """``validate_model_config_after``'s two flags; None without ``--enable-prompt-embeds``."""
    if not args.get("enable_prompt_embeds"):
        return None
    enc_dec = rules_model._encoder_decoder(model)
    out: dict[str, object] = {"self.enable_prompt_embeds": True}
    if enc_dec is not None:
        out["self.is_encoder_decoder"] = enc_dec
    return out


def _methods(version: Version) -> tuple[Version, Sequence[str]] | None:
    facts = release_facts("vllm", version, group="quantization")
    if facts is None:
        return None
    return facts.release, list(facts.data["quantization"]["methods"])


def quantization_frame(args: ResolvedArgs, version: Version) -> dict[str, object] | None:
    """``_verify_quantization``'s ``supported_quantization`` for a ``--quantization`` name; None without the flag;
    without the list where the nearest extracted releases below and above ``version`` disagree on the name."""
    asked = args.get("quantization")
    if not isinstance(asked, str) or not asked:
        return None
    below = _methods(version)
    if below is None:
        return {}
    release, methods = below
    out: dict[str, object] = {"self.quantization": asked}
    if release != version:
        above = next((v for v in extracted_releases("vllm") if v > version and (
            (got := release_facts("vllm", v, group="quantization")) is not None and got.release == v)), None)
        later = _methods(above) if above is not None else None
        if later is not None and (asked in methods) != (asked in later[1]):
            return out
    out["supported_quantization"] = methods
    return out


def float_kv_wanted(ask: Ask, runner: str | None) -> tuple[bool, str | None]:
    """``(reached, model_dtype)`` for ``_reject_mismatched_float_kv_cache``: reached with a 16-bit cache dtype; the
    served dtype where it is resolved (None: named, not judged)."""
    cache = str(ask.args.get("kv_cache_dtype") or "auto")
    if cache not in ("float16", "bfloat16"):
        return False, None
    requested = ask.args.get("dtype")
    resolution = resolve_dtype(ask.model, requested=str(requested) if requested else None, version=ask.version,
                               cc=ask.layout.compute_capability, gpu_name=ask.layout.gpu_name,
                               pooling=runner == "pooling")
    if runner is None and str(requested or "auto").lower() == "auto" and resolution.checkpoint == "float32":
        return True, None            # the pooling runner would prefer float16: not known which
    return True, resolution.served


def float_kv_frame(ask: Ask, runner: str | None) -> dict[str, object] | None:
    reached, served = float_kv_wanted(ask, runner)
    if not reached:
        return None
    cache = str(ask.args.get("kv_cache_dtype"))
    if served is None:
        return {"cache_dtype": cache}
    if served == cache:
        return None
    allowed = f"`auto` or `{served}`" if served in ("float16", "bfloat16") else "`auto`"
    return {"cache_dtype": cache, "model_dtype": served, "allowed": allowed}


def xformers_frame(args: ResolvedArgs, flags_multimodal: bool | None) -> dict[str, object] | None:
    """``_validate_mm_encoder_attn_backend``'s ``value``: the flag's text, on a multimodal class; None where the
    validator is not reached (no flag, a text-only class); {} on a class no release knows (named)."""
    value = args.get("mm_encoder_attn_backend")
    if not isinstance(value, str) or flags_multimodal is False:
        return None
    if flags_multimodal is None:
        return {}
    return {"value": value, "isinstance(value, str)": True}


def _multimodal_class(ask: Ask) -> bool | None:
    if ask.args.get("model_impl", "auto") == "transformers":
        return None
    cls = model_class(ask.model, ask.version)
    return None if cls is None else cls.flag("supports_multimodal")


def _json(value: object) -> object:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _ec_encode_only(args: ResolvedArgs) -> bool | None:
    """``ec_config.is_encode_only`` (config/ec_transfer.py:99-116 in 0.29.0): a connector with ``ec_role``
    ``ec_producer``; False without ``--ec-transfer-config``; None where its text is not a JSON object."""
    given = args.get("ec_transfer_config")
    if given is None:
        return False
    cfg = _json(given)
    if not isinstance(cfg, Mapping):
        return None
    return cfg.get("ec_connector") is not None and cfg.get("ec_role") == "ec_producer"


def _device_type(device: str) -> str | None:
    """``torch.device(device).type`` for the strings every torch of the range parses alike; "" where torch refuses
    the string (a type it lacks, in capitals or with other characters; an index that is not a number), None where
    it is not known here (a lower-case word no listed type is: a newer torch may know it)."""
    kind, sep, index = device.partition(":")
    if kind in TORCH_DEVICE_TYPES:
        return kind if not sep or re.fullmatch(r"[0-9]+", index) else ""
    return None if re.fullmatch(r"[a-z_]+", kind) else ""


def mm_device_frame(args: ResolvedArgs, multimodal: bool | None) -> dict[str, object] | None:
    """The names of ``get_mm_processor_device_type`` (a device torch refuses) and ``validate_mm_processor_device``
    (the CUDA device off an encode-only instance; its early returns are not among the entry's conditions, so the
    frame says False where they return); None where the checks are not reached."""
    kwargs = _json(args.get("mm_processor_kwargs"))
    device = kwargs.get("device") if isinstance(kwargs, Mapping) else None
    flag = args.get("mm_processor_device")
    if device is None and flag not in (None, "auto"):
        device = "cpu" if flag == "cpu" else "cuda"
    if device is None or multimodal is False:
        return None
    if multimodal is None or not isinstance(device, str):
        return {}
    kind = _device_type(device)
    if kind is None:
        return {}
    out: dict[str, object] = {"device": device, "except (RuntimeError, TypeError, ValueError)": kind == "",
                              "device_type": kind}
    encode_only = _ec_encode_only(args) if kind == "cuda" else True
    if encode_only is not None:
        out["ec_config is None or not ec_config.is_encode_only"] = not encode_only
    return out


def ec_producer_frame(args: ResolvedArgs, multimodal: bool | None) -> dict[str, object] | None:
    """``_resolve_mm_encoder_only``'s ``mm_config`` on an encode-only EC producer; None where it returns first."""
    encode_only = _ec_encode_only(args)
    if encode_only is False:
        return None
    if encode_only is None or multimodal is None:
        return {}
    return {"mm_config": {} if multimodal else None}


def _cache_root(env: Mapping[str, str]) -> str:
    """``envs.VLLM_ASSETS_CACHE`` (envs.py:943-948 in 0.33.0): the variable, else ``$XDG_CACHE_HOME/vllm/assets``,
    else ``~/.cache/vllm/assets``, ``~`` expanded from ``$HOME`` where the environment gives it."""
    home = env.get("HOME") or "~"
    given = env.get("VLLM_ASSETS_CACHE")
    root = given if given else f"{env.get('XDG_CACHE_HOME') or home + '/.cache'}/vllm/assets"
    return (home + root[1:] if root.startswith("~") else root).rstrip("/") or "/"


def object_store_frame(args: ResolvedArgs, version: Version, env: Mapping[str, str]) -> dict[str, object] | None:
    """``try_verify_and_update_config``'s names for a model given as an object-store URI (the line's positional);
    None where the model is not one."""
    uri = args.get("model_tag")
    if not isinstance(uri, str):
        return None
    schemes = ("s3://", "gs://", "az://") if version >= AZURE_SCHEME_SINCE else ("s3://", "gs://")
    remote = uri.lower().startswith(schemes)
    if not remote:
        return None
    mirror = f"{_cache_root(env)}/model_streamer/{hashlib.sha256(uri.encode()).hexdigest()[:8]}"
    return {"hasattr(self.model_config, 'model_weights') and is_runai_obj_uri(self.model_config.model_weights)": True,
            "self.load_config.load_format": str(args.get("load_format") or "auto"), "self.model_config.model": mirror}


#: per release range (the first listed release holding each): ``QUANT_KEY_NAMES``, and ``_ONLINE_SHORTHANDS`` with the
#: layer kinds each defines (config/quantization.py in each release; ``ONLINE_QUANT_SHORTHAND_NAMES`` is the
#: shorthands and ``online``)
_FP8 = ("fp8_per_tensor_static", "fp8_per_tensor_dynamic", "fp8_per_token")
_BOTH = ("linear", "moe")
QUANT_CONFIG_TABLES: tuple[tuple[Version, tuple[str, ...], Mapping[str, tuple[str, ...]]], ...] = (
    (Version("0.33.0"), (*_FP8, "fp8_per_channel_static", "fp8_per_block_static", "fp8_per_block_dynamic", "mxfp8",
                         "mxfp4", "nvfp4_per_token", "int8_per_channel_static", "int8_per_group_32",
                         "int4_per_group_32"),
     {"fp8_per_tensor": _BOTH, "fp8_per_block": _BOTH, "fp8_per_channel": _BOTH, "mxfp8": _BOTH, "mxfp4": _BOTH,
      "int8_per_channel_weight_only": ("moe",), "nvfp4_per_token": ("moe",)}),
    (Version("0.32.0"), (*_FP8, "fp8_per_channel_static", "fp8_per_block_static", "fp8_per_block_dynamic", "mxfp8",
                         "mxfp4", "nvfp4_per_token", "int8_per_channel_static", "int4_per_group_32"),
     {"fp8_per_tensor": _BOTH, "fp8_per_block": _BOTH, "fp8_per_channel": _BOTH, "mxfp8": _BOTH, "mxfp4": _BOTH,
      "int8_per_channel_weight_only": ("moe",), "nvfp4_per_token": ("moe",)}),
    (Version("0.28.0"), (*_FP8, "fp8_per_channel_static", "fp8_per_block_static", "fp8_per_block_dynamic", "mxfp8",
                         "mxfp4", "int8_per_channel_static"),
     {"fp8_per_tensor": _BOTH, "fp8_per_block": _BOTH, "fp8_per_channel": _BOTH, "mxfp8": _BOTH, "mxfp4": _BOTH,
      "int8_per_channel_weight_only": ("moe",), "nvfp4_per_token": ("moe",)}),
    (Version("0.26.0"), (*_FP8, "fp8_per_channel_static", "fp8_per_block_static", "fp8_per_block_dynamic", "mxfp8",
                         "mxfp4", "int8_per_channel_static"),
     {"fp8_per_tensor": _BOTH, "fp8_per_block": _BOTH, "fp8_per_channel": _BOTH, "mxfp8": _BOTH,
      "int8_per_channel_weight_only": ("moe",), "nvfp4_per_token": ("moe",)}),
    (Version("0.24.0"), (*_FP8, "fp8_per_channel_static", "fp8_per_block_static", "fp8_per_block_dynamic", "mxfp8",
                         "mxfp4", "int8_per_channel_static"),
     {"fp8_per_tensor": _BOTH, "fp8_per_block": _BOTH, "fp8_per_channel": _BOTH, "mxfp8": _BOTH,
      "int8_per_channel_weight_only": ("moe",)}),
    (Version("0.22.0"), (*_FP8, "fp8_per_block_static", "fp8_per_block_dynamic", "mxfp8", "mxfp4",
                         "int8_per_channel_static"),
     {"fp8_per_tensor": _BOTH, "fp8_per_block": _BOTH, "mxfp8": _BOTH, "int8_per_channel_weight_only": ("moe",)}),
)
#: ``str(QuantSpec)`` of a shorthand's spec (its weight key's name, config/quantization.py:94-107 in 0.33.0), where
#: the weight key is one of ``QUANT_KEY_NAMES`` (``mxfp4`` / ``nvfp4_per_token`` weights are not: left out)
_SHORTHAND_WEIGHT = {"fp8_per_tensor": "fp8_per_tensor_static", "fp8_per_block": "fp8_per_block_static",
                     "fp8_per_channel": "fp8_per_channel_static", "mxfp8": "mxfp8",
                     "int8_per_channel_weight_only": "int8_per_channel_static"}
QUANT_CONFIG_TARGETS_SINCE = Version("0.30.0")
#: ``resolve_quantization_config`` refuses the flag beside a --quantization that is no online shorthand (0.22-0.29)
QUANT_CONFIG_WITH_METHOD_UNTIL = Version("0.30.0")


def _quant_tables(version: Version) -> tuple[tuple[str, ...], Mapping[str, tuple[str, ...]]] | None:
    return next(((keys, shorts) for since, keys, shorts in QUANT_CONFIG_TABLES if version >= since), None)


def _key_frame(v: object, keys: Sequence[str]) -> dict[str, object] | None:
    """``_coerce_quant_key(v)``'s names (a ``ValueError`` for a string that is no name); None where it refuses
    nothing or raises a ``TypeError`` (argparse's words, not the entry's)."""
    if not isinstance(v, str):
        return None
    return {"v": v, "except KeyError": v not in keys, "QUANT_KEY_NAMES": list(keys)}


def _spec_str(field: str, given: object, shorts: Mapping[str, tuple[str, ...]]) -> str | None:
    """``str(self.linear)`` / ``str(self.moe)`` once validated; None where it is not known here."""
    if given is None:
        return "None"
    if isinstance(given, str):
        return _SHORTHAND_WEIGHT.get(given) if given in shorts else given
    if isinstance(given, Mapping):
        weight = given.get("weight")
        return "None" if weight is None else weight if isinstance(weight, str) else None
    return None


def quant_config_frames(args: ResolvedArgs, version: Version) -> list[dict[str, object]]:
    """One frame per check ``--quantization-config`` meets, in the release's order (see the module docstring)."""
    given = _json(args.get("quantization_config"))
    tables = _quant_tables(version)
    if not isinstance(given, Mapping) or tables is None:
        return []
    keys, shorts = tables
    frames: list[dict[str, object]] = []
    failed = False
    for field in ("linear", "moe"):
        value = given.get(field)
        if isinstance(value, str):
            if value in shorts:
                missing = field not in shorts[value]
                frames.append({"v": value, "v in _ONLINE_SHORTHANDS": True, "spec is None": missing,
                               "field_name": field})
                failed |= missing
                continue
            one = _key_frame(value, keys)
        elif isinstance(value, Mapping):
            for key in ("weight", "activation"):
                one = _key_frame(value.get(key), keys)
                if one is not None:
                    frames.append({**one, "v in _ONLINE_SHORTHANDS": False})
                    failed |= bool(one["except KeyError"])
            continue
        else:
            continue
        if one is not None:
            frames.append({**one, "v in _ONLINE_SHORTHANDS": False})
            failed |= bool(one["except KeyError"])
    targets = given.get("targets")
    if version >= QUANT_CONFIG_TARGETS_SINCE and isinstance(targets, Mapping):
        for pattern, shorthand in targets.items():
            wrong = not isinstance(shorthand, str) or shorthand not in shorts
            item: dict[str, object] = {
                "for (pattern, shorthand) in v.items()": True, "pattern": pattern, "shorthand": shorthand,
                "not isinstance(pattern, str)": False, "_ONLINE_SHORTHANDS": dict(shorts),
                "not isinstance(shorthand, str) or shorthand not in _ONLINE_SHORTHANDS": wrong}
            if wrong:
                frames.append({**item, "pattern.startswith('re:')": False})
                failed = True
                break
            if str(pattern).startswith("re:"):
                try:
                    re.compile(str(pattern)[3:])
                except re.error:
                    frames.append({**item, "pattern.startswith('re:')": True})   # regex's verdict: named
                    failed = True
                    break
            frames.append({**item, "pattern.startswith('re:')": str(pattern).startswith("re:"),
                           "except re.error": False})
        if not failed:
            linear, moe = _spec_str("linear", given.get("linear"), shorts), _spec_str("moe", given.get("moe"), shorts)
            out: dict[str, object] = {"self.targets": dict(targets),
                                      "self.linear is not None or self.moe is not None":
                                      given.get("linear") is not None or given.get("moe") is not None}
            if linear is not None and moe is not None:
                out |= {"self.linear": linear, "self.moe": moe}
            frames.append(out)
    if not failed and version < QUANT_CONFIG_WITH_METHOD_UNTIL:
        method = args.get("quantization")
        names = (*shorts, "online")
        frames.append({"quantization is not None and quantization not in ONLINE_QUANT_SHORTHAND_NAMES":
                       isinstance(method, str) and method not in names, "quantization": method,
                       "quantization_config": dict(given), "ONLINE_QUANT_SHORTHAND_NAMES": names})
    # each frame answers one check: the first conditions of the others (their early returns are not among them) are
    # False there
    return [{**_QUANT_CONFIG_NEUTRAL, **f} for f in frames]


#: the first condition of each ``QUANT_CONFIG`` entry, False (see ``quant_config_frames``)
_QUANT_CONFIG_NEUTRAL: Mapping[str, object] = {
    "v in _ONLINE_SHORTHANDS": False, "except KeyError": False, "for (pattern, shorthand) in v.items()": False,
    "self.linear is not None or self.moe is not None": False,
    "quantization is not None and quantization not in ONLINE_QUANT_SHORTHAND_NAMES": False,
}


def _one(ask: Ask, rule: str, frame: Mapping[str, object] | None, names: Sequence[str] = ()) -> Judged:
    """``rule`` judged in ``frame``; a frame without ``names`` (the values it could not resolve) is judged with
    them removed from the shared namespace too, so the entry says what it read."""
    if frame is None or not ask.among([rule]):
        return Judged()
    base = {k: v for k, v in ask.values.items() if k not in names or k in frame}
    return ask.book.judge(ask.version, {**base, **frame}, rules=[rule])


def _each(ask: Ask, rule: str, frames: Sequence[Mapping[str, object]]) -> list[Judged]:
    """``rule`` judged in each frame, each refusal said once."""
    out: list[Judged] = []
    seen: set[tuple[str, str]] = set()
    for frame in frames:
        one = _one(ask, rule, frame)
        fresh = tuple(r for r in one.refusals if (r.entry, r.message) not in seen)
        seen |= {(r.entry, r.message) for r in fresh}
        out.append(Judged(fresh, one.not_judged))
    return out


def _first_raised(judged: Judged) -> Judged:
    """The refusal the release raises first of one function's consecutive raises (the lowest line): the runner
    checks of ``__post_init__`` follow one another, and the first one met ends the start (the embedding check at
    config/model.py:715-723 in 0.33.0 before the generate check at :724-727 it overlaps)."""
    if len(judged.refusals) < 2:
        return judged
    first = min(judged.refusals, key=lambda r: int(r.source.rsplit(":", 1)[1]))
    return Judged((first,), judged.not_judged)


def judge(ask: Ask) -> Judged:
    """The rules of this module in force, each in its frame over the shared namespace."""
    pooling_class = known_class(ask)
    runner = served_runner(ask, pooling_class)
    multimodal = _multimodal_class(ask)
    parts = [
        _first_raised(_one(ask, RUNNER, runner_frame(ask, pooling_class),
                           ("self.runner_type", "self.convert_type", "is_generative_model", "is_pooling_model"))),
        _one(ask, HEAD_DTYPE, head_dtype_frame(ask.args, runner), ("head_dtype",)),
        _one(ask, PROMPT_EMBEDS, prompt_embeds_frame(ask.args, ask.model), ("self.is_encoder_decoder",)),
        _one(ask, QUANT_UNKNOWN, quantization_frame(ask.args, ask.version), ("supported_quantization",)),
        _one(ask, FLOAT_KV, float_kv_frame(ask, runner), ("model_dtype",)),
        _one(ask, MM_XFORMERS, xformers_frame(ask.args, multimodal), ("value",)),
        _one(ask, MM_DEVICE, mm_device_frame(ask.args, multimodal), ("device", "device_type")),
        _one(ask, EC_PRODUCER_TEXT, ec_producer_frame(ask.args, multimodal), ("mm_config",)),
        _one(ask, OBJECT_STORE, object_store_frame(ask.args, ask.version, ask.env), ()),
        *_each(ask, QUANT_CONFIG, quant_config_frames(ask.args, ask.version)),
    ]
    return combine(parts)
