"""Speculative decoding as each vLLM release receives it: ``values(args, model, layout, version, env)``, the frame
the ``vllm.speculative.*`` rules of ``config_checks.RULES`` are judged in, and ``notes(...)``, what of the line's
speculative options no rule judged.

The options reach the release in three ways:

- 0.8.0-0.8.1: the flags ``--speculative-model``, ``--num-speculative-tokens``, ``--ngram-prompt-lookup-max/min``,
  ``--speculative-draft-tensor-parallel-size``, ``--speculative-disable-by-batch-size``, the arguments of
  ``SpeculativeConfig.maybe_create_spec_config`` (vllm/config.py:1932-2046 in 0.8.0), under those names;
- 0.8.2-0.8.4: ``--speculative-config`` (its text read by ``ast.literal_eval``); in 0.8.2 also the same flags
  made into its keys where it is not given (``EngineArgs.create_speculative_config``, engine/arg_utils.py:1219-1262
  in 0.8.2; 0.8.3 removed the flags);
- from 0.8.5 ``--speculative-config`` alone; from 0.22 ``--spec-method`` / ``--spec-model`` / ``--spec-tokens``
  fill its ``method`` / ``model`` / ``num_speculative_tokens`` keys and refuse one given twice; from 0.26 the
  keys' dashes read as underscores (engine/arg_utils.py:2108-2128 in 0.33.0).

``SpeculativeConfig.__post_init__`` then changes what its checks read as it goes, and the frame holds each value
as the release holds it where the checks read it:

- ``self.method``: as given, an MTP alias (``deepseek_mtp``, ...) made ``mtp`` (0.11+, where the release's list
  is read here), a missing method ``ngram`` when the model is ``ngram`` / ``[ngram]``, else ``draft_model``
  (0.18+; ``custom_class`` for a dotted import path, 0.22+) (config/speculative.py:1236-1251 in 0.33.0);
- ``self.prompt_lookup_min`` / ``max`` for ngram: both 5 when neither is given, else the one given for both
  (:1303-1320 in 0.33.0, config.py:2620-2632 in 0.9.2); 0.8.0-0.8.1: ``ngram_prompt_lookup_min`` 1 when not given;
- ``self.num_speculative_tokens``: as given; not given with a draft model it is the draft config's ``n_predict``
  where it has one (:1600-1603 in 0.33.0), which is not read here, so it is left out and what reads it is not
  judged;
- the method the release ends with (``self.speculative_config.method`` in ``VllmConfig``): the one given for
  ngram / suffix / custom_class / extract_hidden_states / eagle / eagle3 / mtp, or the one a draft model's name
  gives (``eagle-`` and, 0.10.2+, ``eagle3`` in it, :1445-1448 in 0.33.0); a draft named otherwise is told by
  its config, which is not read, so it is left out.

``method: mtp`` without a model drafts with the target's own layers: the rule of the target's type reads the
target's config as ``hf_config_override`` would (see ``MTP_UNKNOWN_TARGETS``). Beside the config, ``VllmConfig``
and ``create_engine_config`` read ``--async-scheduling``, ``--kv-sharing-fast-prefill``, ``--enable-lora`` with the
scheduler's batch, and ``--per-request-spec-decode-metrics`` (``_beside``).

From 0.11.1 the config's pydantic fields refuse ``num_speculative_tokens`` below 1 (``Field(gt=0)``), a
``draft_tensor_parallel_size`` / ``prompt_lookup_min`` / ``max`` below 1 and a ``disable_by_batch_size`` below 2
(``ge``) before ``__post_init__`` runs (config/speculative.py:61-110 in 0.11.1): the checks behind them are not
reached, and pydantic's words are not the ledger's, so the line is said not judged (``notes``).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask, combine
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

#: rule id -> what it refuses: the rules this area judges, each in its frame (``judge``)
RULES: Mapping[str, str] = {
    "vllm.speculative.ngram_lookup": "ngram's prompt_lookup_min / prompt_lookup_max below 1, or min above max "
                                     "(--ngram-prompt-lookup-min/max in 0.8.0-0.8.1; SpeculativeConfig)",
    "vllm.speculative.tokens_without_model": "num_speculative_tokens without a draft model for a method that needs "
                                             "one (before 0.11: a target other than DeepSeek-V3 / MiMo / ...; "
                                             "custom_class without its module path) (SpeculativeConfig)",
    "vllm.speculative.num_tokens": "num_speculative_tokens not given where nothing gives it (SpeculativeConfig)",
    "vllm.speculative.num_tokens_positive": "num_speculative_tokens not above zero (SpeculativeConfig, before 0.11.1)",
    "vllm.speculative.draft_tp": "a draft_tensor_parallel_size other than 1 or the target's TP (SpeculativeConfig)",
    "vllm.speculative.tensor_parallel_size_key": "tensor_parallel_size given in --speculative-config (0.15+)",
    "vllm.speculative.disable_by_batch_size": "disable_by_batch_size below 2 (SpeculativeConfig, before 0.11.1)",
    "vllm.speculative.eagle3_target": "EAGLE-3 (and extract_hidden_states / dflash) on a target model type the "
                                      "release does not list (SpeculativeConfig, 0.8.5-0.21)",
    "vllm.speculative.multi_step": "speculative decoding with --num-scheduler-steps > 1 (0.8.0-0.10.0)",
    "vllm.speculative.async_scheduling": "--async-scheduling with speculative decoding (0.10.0-0.11.0), or with a "
                                         "method that is not EAGLE / MTP kind (VllmConfig, 0.11.1-0.32)",
    "vllm.speculative.draft_model_unsupported": "method draft_model (EngineArgs._check_feature_supported, "
                                                "0.11.1-0.14.1)",
    "vllm.speculative.spec_flags_twice": "--spec-method / --spec-model / --spec-tokens with the same key of "
                                         "--speculative-config (0.22+)",
    "vllm.speculative.mtp_target": "method mtp (or an MTP alias) without a draft on a target whose own config "
                                   "the release makes no MTP draft of (SpeculativeConfig, 0.11+)",
    "vllm.speculative.kv_sharing_fast_prefill": "--kv-sharing-fast-prefill with an EAGLE / MTP kind of method "
                                                "(VllmConfig, 0.10.2+)",
    "vllm.speculative.async_padded_drafter": "--async-scheduling with disable_padded_drafter_batch (VllmConfig, "
                                             "0.11.1-0.32)",
    "vllm.speculative.lora_batch": "--enable-lora with max_num_batched_tokens below max_num_seqs x "
                                   "(num_speculative_tokens + 1) (EngineArgs.create_engine_config, 0.11.1+)",
    "vllm.speculative.metrics_without_speculative": "--per-request-spec-decode-metrics without speculative decoding "
                                                    "(VllmConfig, 0.29+)",
}

#: the flags of 0.8.0-0.8.4, by the key of ``--speculative-config`` they fill (engine/arg_utils.py:1233-1252 in
#: 0.8.2); 0.8.0-0.8.1 hand them to ``maybe_create_spec_config`` under the flags' own names
LEGACY_FLAGS: Mapping[str, str] = {
    "model": "speculative_model", "num_speculative_tokens": "num_speculative_tokens",
    "draft_tensor_parallel_size": "speculative_draft_tensor_parallel_size",
    "disable_by_batch_size": "speculative_disable_by_batch_size", "max_model_len": "speculative_max_model_len",
    "prompt_lookup_max": "ngram_prompt_lookup_max", "prompt_lookup_min": "ngram_prompt_lookup_min",
    "quantization": "speculative_model_quantization",
}
CONFIG_SINCE = Version("0.8.2")                 # --speculative-config
LEGACY_FLAGS_UNTIL = Version("0.8.3")           # the flags are gone from 0.8.3 (engine/arg_utils.py)
LITERAL_EVAL_UNTIL = Version("0.8.5")           # 0.8.2-0.8.4 read the text with ast.literal_eval
SPEC_FLAGS_SINCE = Version("0.22.0")            # --spec-method / --spec-model / --spec-tokens
DASHED_KEYS_SINCE = Version("0.26.0")           # {k.replace("-", "_"): v}
#: config/speculative.py:61-110 in 0.11.1: pydantic ``Field`` bounds, checked before ``__post_init__``
PYDANTIC_BOUNDS_SINCE = Version("0.11.1")
PYDANTIC_BOUNDS: Mapping[str, int] = {"num_speculative_tokens": 1, "draft_tensor_parallel_size": 1,
                                      "prompt_lookup_min": 1, "prompt_lookup_max": 1, "disable_by_batch_size": 2}
#: a missing method becomes draft_model (0.18+) or custom_class for a dotted path (0.22+), before the checks
METHOD_INFERRED_SINCE = Version("0.18.0")
CUSTOM_CLASS_SINCE = Version("0.22.0")
#: a draft whose name has ``eagle3`` is EAGLE-3 from 0.10.2 (config/__init__.py:2143-2146); before, ``eagle-`` or
#: ``eagle3-`` made it ``eagle`` (config.py:2687-2689 in 0.9.2); ``dflash`` (0.20+) / ``dspark`` (0.25+) names
#: are told apart further on, by the draft's config
EAGLE3_BY_NAME_SINCE = Version("0.10.2")
OTHER_DRAFTS_BY_NAME_SINCE = Version("0.20.0")
#: the methods that are never told by a draft config: the method given is the one the release ends with
_NO_DRAFT = frozenset({"ngram", "ngram_gpu", "suffix", "custom_class", "extract_hidden_states"})
_KEPT = frozenset({"eagle", "eagle3", "mtp"})
NGRAM_NAMES = ("ngram", "[ngram]")

#: ``MTPModelTypes`` (config/speculative.py, 0.11.1+; ``MTP_MODEL_TYPES`` in 0.11.0), by the release that added
#: the names (read in each release's file): a method among them is made ``mtp``. A release not read here
#: (0.26, 0.28, 0.29, 0.31, 0.32) takes the list of the nearest read release below it only for the names every
#: read release at or above that one holds, which is all of them: the lists only grow.
MTP_ALIASES: tuple[tuple[Version, tuple[str, ...]], ...] = (
    (Version("0.11.0"), ("deepseek_mtp", "mimo_mtp", "glm4_moe_mtp", "ernie_mtp", "qwen3_next_mtp",
                         "longcat_flash_mtp")),
    (Version("0.11.1"), ("pangu_ultra_moe_mtp",)),
    (Version("0.14.0"), ("exaone_moe_mtp",)),
    (Version("0.15.0"), ("glm4_moe_lite_mtp",)),
    (Version("0.15.1"), ("step3p5_mtp",)),
    (Version("0.16.0"), ("glm_ocr_mtp",)),
    (Version("0.17.0"), ("nemotron_h_mtp", "qwen3_5_mtp")),
    (Version("0.20.0"), ("exaone4_5_mtp", "hy_v3_mtp")),
    (Version("0.21.0"), ("mimo_v2_mtp", "gemma4_mtp")),
    (Version("0.24.0"), ("minimax_m3_mtp",)),
    (Version("0.25.0"), ("bailing_hybrid_mtp",)),
    (Version("0.27.0"), ("kimi_k3_mtp", "inkling_mtp")),
    (Version("0.30.0"), ("dots3_note_mtp", "qwen4_exp_mtp", "bailing_hybrid_v3_mtp", "hy_v4_mtp", "glm5_next_mtp")),
    (Version("0.33.0"), ("step5_mtp",)),
)
#: 0.11.0's ``MTP_MODEL_TYPES`` (config/speculative.py:36-37) is the first
MTP_ALIASES_SINCE = Version("0.11.0")
#: releases whose MTP list was not read: a name the nearest read release below lacks may be there
_UNREAD = frozenset(Version(v) for v in ("0.26.0", "0.26.1", "0.28.0", "0.29.0", "0.31.0", "0.32.0"))

#: ``EagleModelTypes`` beyond the MTP names: eagle, eagle3; extract_hidden_states (0.17+); dflash (0.20+)
#: (config/speculative.py:54-56 in 0.20.0, :71-73 in 0.33.0); ``NgramGPUTypes`` ngram_gpu (0.18+)
EXTRACT_HIDDEN_STATES_SINCE = Version("0.17.0")
DFLASH_SINCE = Version("0.20.0")

#: the target model types EAGLE-3 accepts (``_verify_args``): 0.8.5-0.10.0 ``'llama' in model_type``
#: (config.py:3029 in 0.10.0); 0.10.1+ ``eagle3_target_supported`` (config/__init__.py:2373 in 0.10.1), from
#: 0.17 ``aux_hidden_states_supported`` for eagle3 and extract_hidden_states (and dflash, 0.20-0.21), read in each
#: release; the check is gone from 0.22
EAGLE3_TARGETS: tuple[tuple[Version, tuple[str, ...]], ...] = (
    (Version("0.8.5"), ("llama",)),
    (Version("0.10.1"), ("llama", "qwen")),
    (Version("0.11.0"), ("llama", "qwen", "minicpm", "gpt_oss")),
    (Version("0.16.0"), ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe")),
    (Version("0.17.0"), ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe",
                         "nemotron_h")),
    (Version("0.18.0"), ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe",
                         "nemotron_h", "deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25")),
    (Version("0.19.1"), ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe",
                         "nemotron_h", "deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25", "minimax_m2", "gemma4")),
    (Version("0.21.0"), ("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe",
                         "nemotron_h", "deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25", "minimax_m2", "gemma4",
                         "laguna")),
)
#: the condition's generator, as the ledger holds it (the evaluator reads it by its text)
_ANY_TARGET = ("any((supported_model in self.target_model_config.hf_text_config.model_type for supported_model in "
               "{name}))")
#: ``--spec-method`` / ``--spec-model`` / ``--spec-tokens``: the loop of ``create_speculative_config``
_SPEC_FLAGS = (("--spec-method", "method", "spec_method"), ("--spec-model", "model", "spec_model"),
               ("--spec-tokens", "num_speculative_tokens", "spec_tokens"))
_SPEC_FLAGS_LOOP = ("for (flag, key, value) in (('--spec-method', 'method', self.spec_method), ('--spec-model', "
                    "'model', self.spec_model), ('--spec-tokens', 'num_speculative_tokens', self.spec_tokens))")
#: ``method: mtp`` without a model drafts with the target's own layers: its config through
#: ``SpeculativeConfig.hf_config_override``, which makes an MTP model type of the targets it knows (deepseek_v3 ->
#: deepseek_mtp, qwen3_next -> qwen3_next_mtp, Glm4MoeForCausalLM -> glm4_moe_mtp, ...); a target it does not
#: know keeps its type, which is no MTP type, and the release refuses the method (``Unsupported speculative
#: method: 'mtp'``, config/speculative.py:1499 in 0.33.0; ``Speculative decoding with draft model is not
#: supported yet`` in 0.11.0-0.14.1). Judged only for these model types, whose name and whose architectures'
#: names no branch of ``hf_config_override`` reads (every string of the function, 0.11.0-0.33.0, each release
#: read; its only substring tests are ``'exaone4_5' in model_type`` and ``'BailingMoeV2_5ForCausalLM' in
#: architectures``); another target is not judged (the entry says what it reads).
MTP_UNKNOWN_TARGETS = frozenset({"cohere", "gemma2", "gemma3", "gemma3_text", "gpt_oss", "granite", "llama", "mistral",
                                 "mixtral", "olmo2", "phi3", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe"})
MTP_METHOD_SINCE = Version("0.11.0")
MTP_RULE = "vllm.speculative.mtp_target"
#: the names ``__post_init__`` reads by constant (config/speculative.py:92-93 in 0.33.0)
_DSPARK_ARCHITECTURES = {"_QWEN3_OMNI_DSPARK_ARCHITECTURE": "Qwen3OmniDSparkModel",
                         "_MUSE_SPARK_DSPARK_ARCHITECTURE": "MuseSparkDSparkModel"}
#: the keys the rules read (the others are named by ``notes``)
READ_KEYS = frozenset({"method", "model", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max",
                       "draft_tensor_parallel_size", "disable_by_batch_size", "tensor_parallel_size",
                       "speculative_token_tree", "disable_padded_drafter_batch", "suffix_decoding_max_tree_depth",
                       "max_model_len", "dspark_draft_topk"})   # the last two: rules_spec3


@dataclass(frozen=True)
class Speculative:
    """The speculative options as ``SpeculativeConfig`` receives them (``given`` None: the line sets none), the
    ``--spec-*`` flag given again in ``--speculative-config`` (0.22+), and what could not be read (``why``)."""

    given: Mapping[str, object] | None
    twice: tuple[str, str] | None = None     # (flag, key)
    legacy: bool = False                     # 0.8.0-0.8.1: maybe_create_spec_config's arguments
    why: str = ""


def _listed(table: tuple[tuple[Version, tuple[str, ...]], ...], version: Version, *,
            cumulative: bool) -> tuple[str, ...] | None:
    rows = [names for since, names in table if since <= version]
    if not rows:
        return None
    return tuple(n for names in rows for n in names) if cumulative else rows[-1]


def speculative(args: ResolvedArgs, version: Version) -> Speculative:
    """The line's speculative options as ``version`` hands them to ``SpeculativeConfig``."""
    if version < CONFIG_SINCE:
        flags = {key: args.get(flag) for key, flag in LEGACY_FLAGS.items() if args.is_set(flag)}
        if args.get("speculative_model") is None and args.get("num_speculative_tokens") is None:
            return Speculative(None)
        return Speculative(flags, legacy=True)
    raw = args.get("speculative_config") if args.is_set("speculative_config") else None
    if isinstance(raw, str) and version < LITERAL_EVAL_UNTIL:
        try:
            raw = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return Speculative({}, why="--speculative-config is not a Python literal (ast.literal_eval refuses it)")
    if raw is not None and not isinstance(raw, Mapping):
        return Speculative({}, why="--speculative-config is not a mapping")
    given: dict[str, object] | None = dict(raw) if isinstance(raw, Mapping) else None
    if given is None and version < LEGACY_FLAGS_UNTIL and (
            args.get("speculative_model") is not None or args.get("num_speculative_tokens") is not None):
        given = {key: args.get(flag) for key, flag in LEGACY_FLAGS.items() if args.get(flag) is not None}
    twice = None
    if version >= SPEC_FLAGS_SINCE:
        for flag, key, dest in _SPEC_FLAGS:
            value = args.get(dest)
            if value is None:
                continue
            given = {} if given is None else given
            if key in given:
                twice = (flag, key)
                break
            given[key] = value
    if given is not None and version >= DASHED_KEYS_SINCE:
        given = {str(k).replace("-", "_"): v for k, v in given.items()}
    return Speculative(given, twice)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int_or_none(value: object) -> bool:
    return value is None or _int(value) is not None


def _is_custom_proposer_path(model: object) -> bool:
    """``SpeculativeConfig._is_custom_proposer_path`` (config/speculative.py:1215-1224 in 0.33.0)."""
    if not isinstance(model, str) or model.startswith(("http://", "https://", "file://")) or "/" in model:
        return False
    parts = model.split(".")
    return len(parts) >= 2 and all(part.isidentifier() for part in parts)


def method_at_checks(given: Mapping[str, object], version: Version) -> str | None:
    """``self.method`` where ``__post_init__``'s checks read it (see the module docstring); None where the
    release keeps None there. Raises LookupError for an MTP-like name whose normalisation is not known."""
    method = given.get("method")
    model = given.get("model")
    if method is None:
        if version >= CUSTOM_CLASS_SINCE and _is_custom_proposer_path(model):
            return "custom_class"
        if model in NGRAM_NAMES:
            return "ngram"
        return "draft_model" if version >= METHOD_INFERRED_SINCE else None
    if not isinstance(method, str):
        raise LookupError(f"method {method!r}")
    if method == "[ngram]":
        return "ngram"
    if version >= MTP_ALIASES_SINCE and method != "mtp":
        aliases = _listed(MTP_ALIASES, version, cumulative=True) or ()
        if method in aliases:
            return "mtp"
        if method.endswith("_mtp") and (version in _UNREAD or version > MTP_ALIASES[-1][0]):
            raise LookupError(f"method {method!r}")
    return method


def final_method(given: Mapping[str, object], version: Version, at_checks: str | None) -> str | None:
    """The method the release ends with (``self.speculative_config.method``), None where the draft's config
    tells it (not read here)."""
    if at_checks in _NO_DRAFT or at_checks in _KEPT or (at_checks == "dflash" and version >= DFLASH_SINCE):
        return at_checks
    model = given.get("model")
    if not isinstance(model, str):
        return None
    name = model.lower()
    if version < EAGLE3_BY_NAME_SINCE:
        return "eagle" if ("eagle-" in name or "eagle3-" in name) else None
    if "eagle-" in name:
        return "eagle"
    if "eagle3" in name:
        return "eagle3"
    return None


def _may_be_aux(given: Mapping[str, object], version: Version) -> bool:
    """Whether the release may end with a method that reads the target's hidden states (eagle3, dflash; the
    methods the EAGLE-3 target check reads): given so, or a draft named so (0.10.2+: ``eagle3`` in the name,
    0.20+: ``dflash``)."""
    if given.get("method") in ("eagle3", "extract_hidden_states", "dflash"):
        return True
    model = given.get("model")
    name = model.lower() if isinstance(model, str) else ""
    return (version >= EAGLE3_BY_NAME_SINCE and "eagle3" in name) or (
        version >= OTHER_DRAFTS_BY_NAME_SINCE and "dflash" in name)


#: ``SpeculativeConfig.use_eagle``: eagle, eagle3, mtp (0.11+: the MTP aliases are made mtp), dflash (0.20+)
#: (config/speculative.py:562 in 0.11.0, :970 in 0.20.0, :2116-2120 in 0.33.0); 0.10.2 lists the MTP names
#: instead (config/__init__.py:2394)
USE_EAGLE_MTP_SINCE = Version("0.11.0")


def _uses_eagle(final: str, version: Version) -> bool | None:
    if final in ("eagle", "eagle3"):
        return True
    if final == "mtp":
        return True if version >= USE_EAGLE_MTP_SINCE else None
    if final == "dflash":
        return True
    return False if final in _NO_DRAFT else None


def _beside(args: ResolvedArgs) -> dict[str, object]:
    """The flags the speculative checks of ``VllmConfig`` / ``create_engine_config`` read beside the config:
    ``--kv-sharing-fast-prefill``, ``--enable-lora`` (``lora_config``), ``--per-request-spec-decode-metrics``."""
    return {
        "kv_sharing_fast_prefill": bool(args.get("kv_sharing_fast_prefill")),
        "lora_config": True if args.get("enable_lora") else None,
        "per_request_spec_decode_metrics": str(args.get("per_request_spec_decode_metrics") or "none"),
    }


#: the rule judged where the line sets no speculative decoding (its check asks for one)
WITHOUT_SPECULATIVE = frozenset({"vllm.speculative.metrics_without_speculative"})


def values_without(args: ResolvedArgs) -> dict[str, object]:
    """The frame of ``WITHOUT_SPECULATIVE`` for a line without speculative decoding."""
    return {"self.speculative_config": None, "speculative_config": None, **_beside(args)}


def _eagle_kinds(version: Version) -> tuple[str, ...]:
    """The names of ``EagleModelTypes`` a resolved final method can be (MTP aliases are made ``mtp`` first)."""
    kinds = ["eagle", "eagle3", "mtp"]
    if version >= EXTRACT_HIDDEN_STATES_SINCE:
        kinds.append("extract_hidden_states")
    if version >= DFLASH_SINCE:
        kinds.append("dflash")
    return tuple(kinds)


def out_of_bounds(given: Mapping[str, object], version: Version) -> tuple[str, ...]:
    """The keys pydantic refuses before ``__post_init__`` (0.11.1+)."""
    if version < PYDANTIC_BOUNDS_SINCE:
        return ()
    out = []
    for key, low in PYDANTIC_BOUNDS.items():
        value = _int(given.get(key))
        if value is not None and value < low:
            out.append(f"{key}={value}")
    return tuple(out)


#: the frame's own keys (no expression of the engine reads a name with a colon): the method as given and the
#: one the release ends with, for the rules that read ``method`` / ``self.method`` there
GIVEN_METHOD = "speculative:given_method"
FINAL_METHOD = "speculative:final_method"
MTP_DRAFT = "speculative:mtp_draft"
#: the rules whose entries read ``self.method`` after ``__post_init__`` (``_verify_args``), and the one that reads
#: the dict's ``method`` as given (``EngineArgs._check_feature_supported``, engine/arg_utils.py:1806-1818 in 0.11.1)
AFTER_POST_INIT = frozenset({"vllm.speculative.eagle3_target"})
AS_GIVEN = frozenset({"vllm.speculative.draft_model_unsupported"})
#: the rule that compares the token count: behind the check that it is given (``_verify_args`` refuses None first,
#: config/speculative.py:1946-1951 in 0.33.0, config.py:2046 in 0.8.0), so not judged where it is None
NEEDS_TOKENS = frozenset({"vllm.speculative.num_tokens_positive"})
#: the rules of ``EngineArgs`` reached before ``SpeculativeConfig`` is made (pydantic's bounds do not stop them)
BEFORE_CONFIG = frozenset({"vllm.speculative.spec_flags_twice", "vllm.speculative.draft_model_unsupported"})


def values(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version,
           env: Mapping[str, str] | None = None) -> dict[str, object]:
    """The frame of the ``vllm.speculative.*`` rules; {} when the line sets no speculative decoding (the release
    makes no ``SpeculativeConfig``: none of them is reached). ``frame(rule, values)`` gives one rule's."""
    spec = speculative(args, version)
    if spec.given is None or spec.why:
        return {}
    given = spec.given
    out: dict[str, object] = {
        # VllmConfig / EngineArgs: a speculative config is made
        "speculative_config": True, "self.speculative_config": True,
        "self.target_model_config": True, "target_model_config": True,
        "self.target_model_config.hf_text_config.model_type": model.model_type,
        "target_model_config.hf_text_config.model_type": model.model_type,
        "self.target_model_config.hf_config.model_type": model.hf_model_type,
        "target_parallel_config.tensor_parallel_size": layout.tensor_parallel_size,
        # create_speculative_config's --spec-* flags given again (0.22+)
        _SPEC_FLAGS_LOOP: True, "key in self.speculative_config": spec.twice is not None,
        GIVEN_METHOD: given.get("method"),
        # the key of _verify_args (0.15+); the layout's TP is another value of that name
        "self.tensor_parallel_size": given.get("tensor_parallel_size"),
        # what VllmConfig / create_engine_config read with it
        "self.speculative_config.disable_padded_drafter_batch": bool(given.get("disable_padded_drafter_batch")),
        **_beside(args),
    }
    if spec.twice is not None:
        out["flag"], out["key"] = spec.twice
    try:
        at_checks = method_at_checks(given, version)
    except LookupError:
        return out
    model_name = given.get("model")
    tokens = _int(given.get("num_speculative_tokens"))
    no_draft = at_checks in _NO_DRAFT or (spec.legacy and model_name == "[ngram]")
    out.update({
        "self.method": at_checks, "self.model": model_name, "speculative_model": model_name,
        "self.speculative_token_tree": given.get("speculative_token_tree"),
    })
    # a value that is not an integer where the checks compare one is left out (pydantic's, not these checks')
    if _int_or_none(given.get("disable_by_batch_size")):
        out["self.disable_by_batch_size"] = out["speculative_disable_by_batch_size"] = given.get(
            "disable_by_batch_size")
    if tokens is None and at_checks == "suffix":
        # suffix decoding takes suffix_decoding_max_tree_depth for a count not given (_validate_suffix_decoding,
        # config/speculative.py:1732-1735 in 0.33.0, :470-473 in 0.11.1): its default is not read here
        tokens = _int(given.get("suffix_decoding_max_tree_depth"))
        if tokens is not None:
            out["self.num_speculative_tokens"] = out["num_speculative_tokens"] = tokens
    elif _int_or_none(given.get("num_speculative_tokens")) and (
            tokens is not None or no_draft or model_name is None):
        # not given with a draft: the draft config's n_predict may give it (not read), so it is left out
        out["self.num_speculative_tokens"] = out["num_speculative_tokens"] = tokens
    # ngram's window, as defaulted before the checks
    low, high = _int(given.get("prompt_lookup_min")), _int(given.get("prompt_lookup_max"))
    if _int_or_none(given.get("prompt_lookup_min")) and _int_or_none(given.get("prompt_lookup_max")):
        if spec.legacy:
            out["ngram_prompt_lookup_min"] = 1 if low is None else low
            out["ngram_prompt_lookup_max"] = high
        else:
            if low is None and high is None:
                low = high = 5
            out["self.prompt_lookup_min"] = high if low is None else low
            out["self.prompt_lookup_max"] = low if high is None else high
    # the draft's tensor parallel size is checked only where a draft model is made: a named draft, or the
    # target's own MTP layers (0.11+: method mtp with a token count); before 0.11 the target's model type decides
    # (deepseek_v3, mimo, ...), which the rule of the tokens refuses otherwise: left out there
    draft_tp = given.get("draft_tensor_parallel_size")
    if no_draft or draft_tp is None:
        out["speculative_draft_tensor_parallel_size"] = None
    elif model_name is not None or (tokens is not None and at_checks == "mtp"):
        out["speculative_draft_tensor_parallel_size"] = draft_tp
    elif tokens is None:
        out["speculative_draft_tensor_parallel_size"] = None
    # _verify_args and VllmConfig read the method the release ends with
    final = final_method(given, version, at_checks)
    if final is not None:
        out[FINAL_METHOD] = out["self.speculative_config.method"] = final
        out["get_args(EagleModelTypes)"] = _eagle_kinds(version)
        out["get_args(NgramGPUTypes)"] = ("ngram_gpu",)
        uses_eagle = _uses_eagle(final, version)
        if uses_eagle is not None:
            out["self.speculative_config.use_eagle()"] = uses_eagle
    elif not _may_be_aux(given, version):
        # told by the draft's config, but never EAGLE-3 / extract_hidden_states / dflash: those come from the method
        # given or the draft's name only (config/speculative.py:587-592 in 0.20.0)
        out[FINAL_METHOD] = "draft_model"
    mtp = _mtp_draft(args, model, version, at_checks, tokens, model_name)
    if mtp:
        out[MTP_DRAFT] = mtp
    targets = _listed(EAGLE3_TARGETS, version, cumulative=False)
    if targets is not None:
        for name in ("eagle3_target_supported", "aux_hidden_states_supported"):
            out[name] = list(targets)
            out[_ANY_TARGET.format(name=name)] = any(t in model.model_type for t in targets)
    return out


def _mtp_draft(args: ResolvedArgs, model: ModelSpec, version: Version, at_checks: str | None, tokens: int | None,
               model_name: object) -> dict[str, object]:
    """The draft config ``method: mtp`` makes of the target (see ``MTP_UNKNOWN_TARGETS``), where it is known
    here: {} otherwise."""
    if version < MTP_METHOD_SINCE or at_checks != "mtp" or model_name is not None or tokens is None:
        return {}
    name = args.get("model_tag") if args.is_set("model_tag") else args.get("model") if args.is_set("model") else None
    # model = the target's (config/speculative.py:1252-1265 in 0.33.0), so the draft branch is reached
    reached: dict[str, object] = {"self.model": name or model.name, "self.draft_model_config.model": name or model.name}
    if (args.get("model_impl") == "transformers" or args.get("hf_overrides")
            or model.hf_model_type not in MTP_UNKNOWN_TARGETS or model.model_type not in MTP_UNKNOWN_TARGETS):
        return reached   # the draft's model type is hf_config_override's: not judged (the entry says so)
    aliases = _listed(MTP_ALIASES, version, cumulative=True) or ()
    return {
        **reached,
        "self.draft_model_config.hf_config.model_type": model.hf_model_type,
        "self.draft_model_config.architectures": tuple(model.architectures),
        "using_transformers_mtp": False, "get_args(MTPModelTypes)": (*aliases, "mtp"), "MTP_MODEL_TYPES": aliases,
        **_DSPARK_ARCHITECTURES,
    }


def frame(rule: str, common: Mapping[str, object]) -> dict[str, object]:
    """One rule's frame: ``self.method`` as ``_verify_args`` reads it (the method the release ends with; left out
    where the draft's config tells it), or the dict's ``method`` as given."""
    out = {k: v for k, v in common.items() if k not in (GIVEN_METHOD, FINAL_METHOD, MTP_DRAFT)}
    draft = common.get(MTP_DRAFT)
    if rule == MTP_RULE and isinstance(draft, Mapping):
        out.update(draft)
    if rule in AFTER_POST_INIT:
        out.pop("self.method", None)
        if FINAL_METHOD in common:
            out["self.method"] = common[FINAL_METHOD]
    if rule in AS_GIVEN and GIVEN_METHOD in common:
        out["method"] = common[GIVEN_METHOD]
    return out


def notes(args: ResolvedArgs, version: Version) -> tuple[str, ...]:
    """What of the line's speculative options the rules did not judge, in words."""
    spec = speculative(args, version)
    if spec.given is None:
        return ()
    if spec.why:
        return (f"speculative decoding: {spec.why}; its checks are not judged",)
    out = []
    bounds = out_of_bounds(spec.given, version)
    if bounds:
        out.append(f"speculative decoding: {', '.join(bounds)} is below the bound of SpeculativeConfig's pydantic "
                   f"field (vllm/config/speculative.py, 0.11.1+), which refuses it before any check, in pydantic's "
                   f"words (not modelled): SpeculativeConfig's checks are not judged")
    try:
        method_at_checks(spec.given, version)
    except LookupError as unknown:
        out.append(f"speculative decoding: {unknown.args[0]} is a name this release's MTP list may hold (not read "
                   f"here): SpeculativeConfig's checks are not judged")
    unread = sorted(str(k) for k in spec.given if k not in READ_KEYS)
    if unread:
        out.append(f"speculative decoding: {', '.join(unread)} not judged")
    # the draft's own config: read (or said unread) by rules_spec2
    return tuple(out)


def judged(args: ResolvedArgs, version: Version) -> bool:
    """Whether ``SpeculativeConfig``'s own checks are judged: pydantic refuses nothing first, and the method
    where they read it is known."""
    spec = speculative(args, version)
    if spec.given is None or spec.why or out_of_bounds(spec.given, version):
        return False
    try:
        method_at_checks(spec.given, version)
    except LookupError:
        return False
    return True


def judge(ask: Ask) -> Judged:
    """The ``vllm.speculative.*`` rules in force, each in its frame (``frame``), and what of the line's speculative
    options they did not judge; nothing where the line sets no speculative decoding but the rules about a
    speculative option without it (``WITHOUT_SPECULATIVE``)."""
    args, version = ask.args, ask.version
    common = values(args, ask.model, ask.layout, version, ask.env)
    said = notes(args, version)
    if not common:
        if speculative(args, version).given is not None:
            return Judged((), said)
        return ask.judge(values_without(args), WITHOUT_SPECULATIVE)
    rules = ask.among(RULES)
    if not judged(args, version):
        rules = [r for r in rules if r in BEFORE_CONFIG]
    parts = [ask.judge(frame(rule, common), [rule]) for rule in rules
             if not (rule in NEEDS_TOKENS and common.get("self.num_speculative_tokens", 0) is None)]
    return combine(parts, said)
