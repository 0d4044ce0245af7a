"""vLLM's speculative-decoding checks beyond ``rules_speculative``: the keys of ``--speculative-config`` that only
its later checks read, and the draft checkpoint's own config, by release.

The line's speculative options are read as ``rules_speculative`` reads them (``speculative``: the dict as the
release receives it, ``method_at_checks`` / ``final_method``: the method where ``__post_init__`` branches and the one
it ends with); nothing is judged where its ``judged`` says pydantic refuses the dict first or the method is not known.

- The V0 acceptance sampler (0.8.0-0.9.2): ``acceptance_method`` unset or neither ``rejection_sampler`` nor
  ``typical_acceptance_sampler``, and a negative ``posterior_threshold`` / ``posterior_alpha`` with the typical
  sampler (``SpeculativeConfig._verify_args``, config.py:2877-2898 in 0.9.2), the posteriors defaulted to 0.09 / 0.3
  for it first (:2764-2768); 0.8.0-0.8.1 read ``--spec-decoding-acceptance-method`` (its choices are the two names)
  and ``--typical-acceptance-sampler-posterior-threshold`` / ``-alpha`` (defaulted in ``maybe_create_spec_config``,
  config.py:2051-2054 in 0.8.0) and refuse a negative posterior whatever the method (:2257-2265); 0.8.2-0.8.4 fill
  the keys from those flags without ``--speculative-config`` (engine/arg_utils.py:1233-1252 in 0.8.2, the last release
  with the flags). From 0.9.1
  the config is a pydantic dataclass and ``acceptance_method`` a Literal: another value is pydantic's to refuse, in
  its words, and said not judged.
- Synthetic rejection sampling (0.20+, ``_verify_args`` and ``_resolve_synthetic_acceptance_rates``,
  config/speculative.py:1973-1989 and 600-632 in 0.33.0): exactly one of ``synthetic_acceptance_rates`` (one rate per
  speculative token, each in [0, 1], non-increasing) or ``synthetic_acceptance_length`` (in [1, n + 1]) with
  ``rejection_sample_method: synthetic``, neither without it. Pydantic makes the rates and the length floats.
- ``use_heterogeneous_vocab`` (0.25+) only with the ``draft_model`` method, greedy draft sampling and (0.33) without
  ``use_local_argmax_reduction``; FLy verification (``rejection_sample_method: fly``, 0.33) at least 2 tokens, a
  window below them and not with ``extract_hidden_states`` (:1994-2034 in 0.33.0); adaptive verification only with
  DSpark (0.28-0.29, config/speculative.py:1508 in 0.29.0) and not with ``use_local_argmax_reduction`` (0.30+,
  :1718 in 0.33.0); ``index_share_for_mtp_iteration`` only with ``mtp`` (0.29+, :1706); ``draft_lm_head_quantization``
  only with eagle / eagle3 / mtp (0.33, :1953-1959).
- The draft checkpoint's config, read the way the deployment's draft is (``model/load.load_model``: a path, the
  model map, the Hugging Face cache, the catalog, the Hub): its ``n_predict`` against ``num_speculative_tokens``
  (``__post_init__``, config/speculative.py:1584-1612 in 0.33.0, config.py:2741 in 0.9.2) and, for the
  ``draft_model`` method, its vocabulary against the target's (``verify_equal_vocab_size_if_draft_model``, 0.15+,
  :2040-2055 in 0.33.0). Only a draft whose config ``SpeculativeConfig.hf_config_override`` leaves as it is (a model
  type of ``rules_speculative.MTP_UNKNOWN_TARGETS``, none of the architectures the override names) is judged: its
  ``n_predict`` is the key of its config.json (``EAGLEConfig`` copies the draft's keys, transformers_utils/configs/
  eagle.py), and the method the release ends with is the one given, or by the draft's name (``eagle-``, ``eagle3``;
  ``dflash`` from 0.20, ``dspark`` from 0.25), else ``draft_model`` (0.18+ infers it for a missing method; 0.15-0.17
  need it given). A draft that cannot be read, or whose config the override rewrites, is named in the line's notes
  and its checks are not judged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask, combine
from pytest_gpulayout.engines.vllm import rules_speculative as rs
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged

ACCEPTANCE = "vllm.speculative2.acceptance_method"
SYNTHETIC = "vllm.speculative2.synthetic_acceptance"
SYNTHETIC_KEYS = "vllm.speculative2.synthetic_keys_without_synthetic"
HETEROGENEOUS = "vllm.speculative2.heterogeneous_vocab"
FLY = "vllm.speculative2.fly_verification"
ADAPTIVE = "vllm.speculative2.adaptive_verification"
INDEX_SHARE = "vllm.speculative2.index_share_needs_mtp"
LM_HEAD_QUANT = "vllm.speculative2.draft_lm_head_quantization_method"
N_PREDICT = "vllm.speculative2.n_predict_divisible"
DRAFT_VOCAB = "vllm.speculative2.draft_vocab_size"

RULES: Mapping[str, str] = {
    ACCEPTANCE: "the V0 acceptance sampler: acceptance_method unset or unknown, or a negative typical-acceptance "
                "posterior_threshold / posterior_alpha (SpeculativeConfig, 0.8.0-0.9.2)",
    SYNTHETIC: "rejection_sample_method synthetic without exactly one of synthetic_acceptance_rates / "
               "synthetic_acceptance_length, or with rates / a length out of range (SpeculativeConfig, 0.20+)",
    SYNTHETIC_KEYS: "synthetic_acceptance_rates / synthetic_acceptance_length without rejection_sample_method "
                    "synthetic (SpeculativeConfig, 0.20+)",
    HETEROGENEOUS: "use_heterogeneous_vocab with a method other than draft_model, a draft_sample_method other than "
                   "greedy, or use_local_argmax_reduction (SpeculativeConfig, 0.25+)",
    FLY: "rejection_sample_method fly with extract_hidden_states, fewer than 2 speculative tokens, or a "
         "fly_window_size not below them (SpeculativeConfig, 0.33)",
    ADAPTIVE: "enable_adaptive_verification with a method other than dspark (0.28-0.29), or with "
              "use_local_argmax_reduction (0.30+) (SpeculativeConfig)",
    INDEX_SHARE: "index_share_for_mtp_iteration with a method other than mtp (SpeculativeConfig, 0.29+)",
    LM_HEAD_QUANT: "draft_lm_head_quantization with a method other than eagle / eagle3 / mtp (SpeculativeConfig, "
                   "0.33)",
    N_PREDICT: "num_speculative_tokens above the draft config's n_predict and not a multiple of it "
               "(SpeculativeConfig; the draft's config.json read)",
    DRAFT_VOCAB: "method draft_model with a draft whose vocabulary size is not the target's (SpeculativeConfig, "
                 "0.15+; the draft's config.json read)",
}

#: the releases whose speculative-config shapes differ for these checks
CONFIG_SINCE = rs.CONFIG_SINCE                  # 0.8.2: SpeculativeConfig's own acceptance keys
PYDANTIC_CONFIG_SINCE = Version("0.9.1")        # config.py:27 in 0.9.1: ``from pydantic.dataclasses import dataclass``
DRAFT_MODEL_INFERRED_SINCE = rs.METHOD_INFERRED_SINCE   # 0.18: a missing method is draft_model
DFLASH_BY_NAME_SINCE = rs.OTHER_DRAFTS_BY_NAME_SINCE    # 0.20: "dflash" in the draft's name
DSPARK_BY_NAME_SINCE = Version("0.25.0")        # config/speculative.py:1007-1016 in 0.25.0: "dspark" in the name
ACCEPTANCE_METHODS = ("rejection_sampler", "typical_acceptance_sampler")
#: the defaults of the typical sampler's posteriors (config.py:2764-2768 in 0.9.2, 2051-2054 in 0.8.0)
POSTERIOR_DEFAULTS = {"threshold": 0.09, "alpha": 0.3}
#: ``draft_lm_head_quantization: Literal["fp8", "nvfp4"] | None`` (config/speculative.py:484 in 0.33.0)
LM_HEAD_QUANTIZATIONS = ("fp8", "nvfp4")
#: methods whose proposer needs no draft model (``self.draft_model_config`` stays None)
NO_DRAFT_METHODS = frozenset({"ngram", "ngram_gpu", "suffix", "custom_class", "extract_hidden_states"})
#: architectures ``hf_config_override`` names although their model type is one it leaves alone (config/
#: speculative.py:720-727 and 1070 in 0.33.0)
OVERRIDDEN_ARCHITECTURES = frozenset({"RadioMBartPrefixForCausalLM", "MistralLarge3ForCausalLM",
                                      "EagleMistralLarge3ForCausalLM"})
#: architectures by which ``__post_init__`` tells a dflash / dspark draft (config/speculative.py:1455-1476 in 0.33.0)
SPECIAL_ARCHITECTURES = frozenset({"MuseGlimmerAssistantModel", "Qwen3DSparkModel", "Qwen3OmniDSparkModel",
                                   "MuseSparkDSparkModel", "Gemma4DSparkModel", "DSparkDraftModel"})

#: the rules whose checks each lead with one key of the config (a check cannot refuse without it)
KEYED: Mapping[str, tuple[str, ...]] = {
    SYNTHETIC_KEYS: ("synthetic_acceptance_rates", "synthetic_acceptance_length"),
    HETEROGENEOUS: ("use_heterogeneous_vocab",), FLY: ("rejection_sample_method",),
    ADAPTIVE: ("enable_adaptive_verification",), INDEX_SHARE: ("index_share_for_mtp_iteration",),
    LM_HEAD_QUANT: ("draft_lm_head_quantization",),
}

#: the key whose check asks ``is not None``: a given ``false`` is refused too
KEPT_WHEN_FALSE = frozenset({INDEX_SHARE})

_ANY_RATE_OUT = "not all((0.0 <= r <= 1.0 for r in rates))"
_RATES_RISE = "any((rates[i] > rates[i - 1] for i in range(1, n)))"
_LENGTH_OUT = "not 1.0 <= length <= float(n + 1)"


@dataclass(frozen=True)
class Draft:
    """The draft checkpoint's config as ``load_model`` reads it, or why it could not be."""

    spec: ModelSpec | None
    why: str = ""


@cache
def read_draft(ref: str) -> Draft:
    """The draft ``ref`` names, read once per process (the same file every line naming it reads)."""
    try:
        return Draft(load_model(ref))
    except InputError as err:
        return Draft(None, str(err))


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _raw(draft: ModelSpec) -> Mapping[str, object]:
    try:
        data = json.loads(draft.config_json) if draft.config_json else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def plain(draft: ModelSpec) -> bool:
    """Whether ``hf_config_override`` leaves the draft's config as it is (see the module docstring)."""
    return (draft.hf_model_type in rs.MTP_UNKNOWN_TARGETS and draft.model_type in rs.MTP_UNKNOWN_TARGETS
            and not set(draft.architectures) & (OVERRIDDEN_ARCHITECTURES | SPECIAL_ARCHITECTURES))


def draft_method(name: str, given: Mapping[str, object], version: Version, at_checks: str | None) -> str | None:
    """The method the release ends with for a plain draft named ``name`` (``__post_init__``'s detection,
    config/speculative.py:1437-1502 in 0.33.0, 370-407 in 0.15.0): the method given if it is one the detection
    keeps, else by the name, else ``draft_model`` where the method is (or is inferred as) ``draft_model``; None where
    the release refuses the method instead (``Unsupported speculative method``, ``rules_speculative``)."""
    known = rs.final_method(given, version, at_checks)
    if known is not None:
        return known
    lowered = name.lower()
    if at_checks in ("dflash", "dspark"):
        return at_checks
    if version >= DFLASH_BY_NAME_SINCE and "dflash" in lowered:
        return "dflash"
    if version >= DSPARK_BY_NAME_SINCE and "dspark" in lowered:
        return "dspark"
    return "draft_model" if at_checks == "draft_model" else None


@dataclass(frozen=True)
class Line:
    """What these checks read of the line's speculative options."""

    given: Mapping[str, object]
    at_checks: str | None
    final: str | None               # None: told by a draft config not judged here
    tokens: int | None              # num_speculative_tokens as the checks read it (None: not known)
    draft: ModelSpec | None         # the plain draft read, where the line names one
    notes: tuple[str, ...] = ()


def line_of(args: ResolvedArgs, version: Version) -> Line | None:
    """The line's speculative options as these checks read them; None where the line sets none or
    ``rules_speculative`` says its checks are not judged."""
    spec = rs.speculative(args, version)
    if spec.given is None or spec.why or not rs.judged(args, version):
        return None
    given = spec.given
    at_checks = rs.method_at_checks(given, version)
    final = rs.final_method(given, version, at_checks)
    tokens = _int(given.get("num_speculative_tokens"))
    name = given.get("model")
    draft: ModelSpec | None = None
    notes: tuple[str, ...] = ()
    if isinstance(name, str) and name not in rs.NGRAM_NAMES and at_checks not in NO_DRAFT_METHODS:
        read = read_draft(name)
        if read.spec is None:
            notes = (f"speculative decoding: the draft {name!r} could not be read ({read.why}), so the checks of "
                     f"its config (n_predict, its method, vocabulary, max_model_len) are not judged",)
        elif args.get("model_impl") == "transformers" or not plain(read.spec):
            notes = (f"speculative decoding: the draft {name!r} (model type {read.spec.hf_model_type}) is rewritten "
                     f"by SpeculativeConfig.hf_config_override, which is not modelled, so the checks of its config "
                     f"(n_predict, its method, vocabulary, max_model_len) are not judged",)
        else:
            draft = read.spec
            final = draft_method(name, given, version, at_checks)
            n_predict = _int(_raw(draft).get("n_predict"))
            if tokens is None and n_predict is not None:
                tokens = n_predict     # "Default to max value defined in draft model config"
    return Line(given, at_checks, final, tokens, draft, notes)


def acceptance_frame(args: ResolvedArgs, line: Line, version: Version) -> tuple[dict[str, object] | None, str]:
    """The acceptance sampler's values where ``_verify_args`` reads them, or why they are not judged."""
    if version < CONFIG_SINCE:
        threshold = args.get("typical_acceptance_sampler_posterior_threshold")
        alpha = args.get("typical_acceptance_sampler_posterior_alpha")
        return {"self.draft_token_acceptance_method": args.get("spec_decoding_acceptance_method")
                or ACCEPTANCE_METHODS[0],
                "self.typical_acceptance_sampler_posterior_threshold":
                    POSTERIOR_DEFAULTS["threshold"] if threshold is None else threshold,
                "self.typical_acceptance_sampler_posterior_alpha":
                    POSTERIOR_DEFAULTS["alpha"] if alpha is None else alpha}, ""
    if not args.is_set("speculative_config") and version < rs.LEGACY_FLAGS_UNTIL:
        values: dict[str, object] = {
            "acceptance_method": args.get("spec_decoding_acceptance_method") or ACCEPTANCE_METHODS[0],
            "posterior_threshold": args.get("typical_acceptance_sampler_posterior_threshold"),
            "posterior_alpha": args.get("typical_acceptance_sampler_posterior_alpha")}
    else:
        values = {"acceptance_method": line.given.get("acceptance_method", ACCEPTANCE_METHODS[0]),
                  "posterior_threshold": line.given.get("posterior_threshold"),
                  "posterior_alpha": line.given.get("posterior_alpha")}
    method = values["acceptance_method"]
    if version >= PYDANTIC_CONFIG_SINCE and method not in ACCEPTANCE_METHODS:
        return None, (f"speculative decoding: acceptance_method={method!r} is outside SpeculativeConfig's Literal, "
                      f"which pydantic refuses first in its words (config.py, 0.9.1+): not judged")
    for key in ("posterior_threshold", "posterior_alpha"):
        if values[key] is not None and not _number(values[key]):
            return None, f"speculative decoding: {key}={values[key]!r} is not a number: not judged"
        if values[key] is None and method == "typical_acceptance_sampler":
            values[key] = POSTERIOR_DEFAULTS[key.removeprefix("posterior_")]
    return {f"self.{k}": v for k, v in values.items()}, ""


def synthetic_frame(line: Line) -> tuple[dict[str, object] | None, str]:
    """``_resolve_synthetic_acceptance_rates(n, rates, length)`` as ``_verify_args`` calls it under
    ``rejection_sample_method == "synthetic"``; None where it is not called or a value is not known."""
    if line.given.get("rejection_sample_method") != "synthetic" or line.tokens is None:
        return None, ""
    rates, length = line.given.get("synthetic_acceptance_rates"), line.given.get("synthetic_acceptance_length")
    if rates is not None and not (isinstance(rates, list) and all(_number(r) for r in rates)):
        return None, "speculative decoding: synthetic_acceptance_rates is not a list of numbers: not judged"
    if length is not None and not _number(length):
        return None, "speculative decoding: synthetic_acceptance_length is not a number: not judged"
    n = line.tokens
    floats = [float(r) for r in rates] if isinstance(rates, list) else None
    size = float(length) if isinstance(length, (int, float)) and not isinstance(length, bool) else None
    out: dict[str, object] = {"n": n, "rates": floats, "length": size}
    if floats is not None:
        out[_ANY_RATE_OUT] = not all(0.0 <= r <= 1.0 for r in floats)
        out[_RATES_RISE] = any(floats[i] > floats[i - 1] for i in range(1, min(n, len(floats))))
    if size is not None:
        out[_LENGTH_OUT] = not 1.0 <= size <= float(n + 1)
    return out, ""


def keys_frame(line: Line) -> dict[str, object]:
    """The keys the later checks of ``__post_init__`` / ``_verify_args`` read, as given or defaulted, and the method
    the release ends with where it is known (``self.method`` and the predicates of it)."""
    given = line.given
    out: dict[str, object] = {
        "self.rejection_sample_method": given.get("rejection_sample_method", "standard"),
        "self.synthetic_acceptance_rates": given.get("synthetic_acceptance_rates"),
        "self.synthetic_acceptance_length": given.get("synthetic_acceptance_length"),
        "self.use_heterogeneous_vocab": bool(given.get("use_heterogeneous_vocab", False)),
        "self.draft_sample_method": given.get("draft_sample_method", "greedy"),
        "self.use_local_argmax_reduction": bool(given.get("use_local_argmax_reduction", False)),
        "self.enable_adaptive_verification": bool(given.get("enable_adaptive_verification", False)),
        "self.index_share_for_mtp_iteration": given.get("index_share_for_mtp_iteration"),
    }
    fly_window = given.get("fly_window_size")
    if fly_window is None or (_int(fly_window) or 0) >= 1:     # Field(ge=1): pydantic refuses a smaller one first
        out["self.fly_window_size"] = fly_window
    if line.tokens is not None:
        out["self.num_speculative_tokens"] = line.tokens
    quantization = given.get("draft_lm_head_quantization")
    if quantization is None or quantization in LM_HEAD_QUANTIZATIONS:
        out["self.draft_lm_head_quantization"] = quantization
    final = line.final
    if final is not None:
        out.update({
            "self.method": final, "uses_draft_model": final == "draft_model",
            "uses_extract_hidden_states": final == "extract_hidden_states",
            "self.draft_model_config": None if final in NO_DRAFT_METHODS else True,
        })
        if final != "mtp":
            out["use_gemma4_mtp"] = False
    return out


def draft_frame(line: Line, target: ModelSpec) -> dict[str, object] | None:
    """The draft's ``n_predict`` and vocabulary where ``__post_init__`` / ``_verify_args`` read them; None without a
    plain draft read."""
    draft = line.draft
    if draft is None:
        return None
    n_predict = _int(_raw(draft).get("n_predict"))
    out: dict[str, object] = {
        "self.method": line.at_checks, "self.model": line.given.get("model"),
        "speculative_model": line.given.get("model"), "n_predict": n_predict,
        "target_vocab_size": target.vocab_size, "draft_vocab_size": draft.vocab_size,
        "self.target_model_config": True, "self.draft_model_config": True,
    }
    tokens = _int(line.given.get("num_speculative_tokens"))
    out["self.num_speculative_tokens"] = out["num_speculative_tokens"] = tokens
    if line.final is not None:
        out["use_dspark"] = line.final == "dspark"
    return out


def judge(ask: Ask) -> Judged:
    """The rules of this module in force, each in its frame over the shared namespace, and what of the line's
    speculative options they could not read."""
    line = line_of(ask.args, ask.version)
    if line is None:
        return Judged()
    parts: list[Judged] = []
    notes: list[str] = list(line.notes)
    keys = keys_frame(line)
    acceptance, why = acceptance_frame(ask.args, line, ask.version)
    notes += [why] if why else []
    if acceptance is not None:
        parts.append(ask.judge(acceptance, [ACCEPTANCE]))
    synthetic, why = synthetic_frame(line)
    notes += [why] if why else []
    if synthetic is not None:
        parts.append(ask.judge(synthetic, [SYNTHETIC]))
    # each check is a conjunction led by its own key: judged only where the line gives that key
    parts.append(ask.judge(keys, [rule for rule, names in KEYED.items() if any(
        line.given.get(k) is not None and (rule in KEPT_WHEN_FALSE or line.given.get(k) is not False)
        for k in names)]))
    drafted = draft_frame(line, ask.model)
    if drafted is not None:
        parts.append(ask.judge(drafted, [N_PREDICT]))
        if line.final == "draft_model" and not keys["self.use_heterogeneous_vocab"]:
            parts.append(ask.judge({**drafted, "self.method": line.final}, [DRAFT_VOCAB]))
    return combine(parts, notes)
