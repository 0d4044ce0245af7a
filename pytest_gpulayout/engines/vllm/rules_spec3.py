"""vLLM's speculative-decoding checks that read the draft checkpoint's DSpark fields, the draft's length and the V0 /
V1 engine choice (beside ``rules_speculative`` and ``rules_spec2``, whose readings of the line they reuse).

- Qwen3-Omni DSpark (0.29+): ``_validate_qwen3_omni_dspark`` (config/speculative.py:167-392 in 0.33.0, the same
  function in 0.29-0.32, :145-370 in 0.29.0), called from ``__post_init__`` for the ``dspark`` method (given, or told
  by the draft's name or architectures, :1455-1476 in 0.33.0) once the draft ``ModelConfig`` is made, on a Qwen3-Omni
  target (model type ``qwen3_omni_moe`` or a Qwen3-Omni architecture): the draft's architectures, its block size
  against ``num_speculative_tokens``, its hidden size / heads / KV heads / head dim against the thinker's text config,
  its ``target_layer_ids``, ``use_aux_hidden_state``, the Markov head, the anchors, its vocabularies and its noise
  token id, and no M-RoPE. The checks run in order and the first that fails raises, so the frame holds the values up
  to the first failure and every later check as not reached. ``num_speculative_tokens`` is the one given, else (0.31+)
  the draft config's top-level ``block_size`` / ``dspark_block_size`` (:1592-1599), else (0.29-0.30) its
  ``n_predict`` (:1414-1427 in 0.29.0).
- ``dspark_draft_topk`` (0.28+, :1640-1672 in 0.33.0): only with DSpark, within [1, the draft's vocabulary], and only
  for a ``Qwen3DSparkModel`` (0.28) or a Qwen3 / Qwen3-Omni DSpark draft (0.29+); the key of the line, else the draft
  config's.
- The speculative ``max_model_len`` (``_maybe_override_draft_max_model_len``, :1763-1805 in 0.33.0, config.py:
  2076-2110 in 0.8.0): not above the draft's nor the target's. Up to 0.21 the draft ``ModelConfig`` derives its own
  length (``max_model_len=None``, config/speculative.py:572 in 0.20.0); from 0.22 it is made with the speculative
  ``max_model_len`` (:678 in 0.22.0), so the draft's length is that one and only the target's can refuse (a length
  above the draft's derived one is ``ModelConfig``'s refusal of the draft first: said not judged).
- EAGLE with chunked prefill (0.8.0-0.11.0): refused always in 0.8.0-0.8.2 (0.8.0-0.8.1 for a draft named
  ``eagle``), on the V0 engine from 0.8.3. The V1 engine of 0.8-0.11.0 always chunks prefills
  (``_set_default_args_v1``); V0 only with ``--enable-chunked-prefill`` given (``_set_default_args_v0`` never turns
  it on with speculative decoding, engine/arg_utils.py:1469-1494 in 0.10.0). The engine is ``rules_small.use_v1``,
  and in 0.8.0-0.8.2 the oracle's speculative check (a ``--speculative-model`` that is not ngram falls back to V0,
  engine/arg_utils.py:1641-1651 in 0.8.2; 0.8.2's oracle does not read ``--speculative-config``).
- ``method: draft_model`` in V1's support oracle (0.10.0-0.11.0, engine/arg_utils.py:1392-1400 in 0.10.0, 1477-1489
  in 0.11.0): refused where the oracle reaches its speculative check, that is ``VLLM_USE_V1`` is not 0 and none of
  its earlier features sends the line to V0 first (judged where the line gives none of them and, for 0.10.0-0.10.1,
  the GPU's compute capability is known).

Only a draft that ``rules_spec2.read_draft`` reads and whose model type ``hf_config_override`` leaves as it is
(``rules_speculative.MTP_UNKNOWN_TARGETS``) is judged; keys a transformers config class would default where the
draft's ``config.json`` lacks them (hidden size, heads, head dim, vocabulary) are not guessed: the check that reads
one is not judged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask, combine
from pytest_gpulayout.engines.vllm import rules_model, rules_small
from pytest_gpulayout.engines.vllm import rules_spec2 as rs2
from pytest_gpulayout.engines.vllm import rules_speculative as rs
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, LedgerEntry

OMNI = "vllm.speculative3.qwen3_omni_dspark"
TOPK = "vllm.speculative3.dspark_draft_topk"
MAX_LEN = "vllm.speculative3.draft_max_model_len"
EAGLE_CHUNKED = "vllm.speculative3.eagle_chunked_prefill"
ORACLE = "vllm.speculative3.draft_model_v1_oracle"

RULES: Mapping[str, str] = {
    OMNI: "a Qwen3-Omni target's DSpark draft whose config.json breaks the Qwen3-Omni DSpark contract (architecture, "
          "block size, sizes against the thinker, target layers, Markov head, vocabularies, RoPE) (0.29+)",
    TOPK: "dspark_draft_topk with a method other than dspark, outside [1, the draft's vocabulary], or for a draft "
          "architecture other than Qwen3 / Qwen3-Omni DSpark (SpeculativeConfig, 0.28+)",
    MAX_LEN: "--speculative-config max_model_len above the draft's derived length or the target's max_model_len "
             "(SpeculativeConfig)",
    EAGLE_CHUNKED: "EAGLE with chunked prefill (0.8.0-0.8.2; from 0.8.3 on the V0 engine: below SM 8.0 or "
                   "VLLM_USE_V1=0, with --enable-chunked-prefill) (SpeculativeConfig, to 0.11.0)",
    ORACLE: "method draft_model in V1's support oracle (EngineArgs._is_v1_supported_oracle, 0.10.0-0.11.0)",
}

#: config/speculative.py:86-93 in 0.33.0
QWEN3_OMNI_TARGETS = frozenset({"Qwen3OmniMoeForConditionalGeneration", "Qwen3OmniMoeThinkerForConditionalGeneration"})
QWEN3_OMNI_DSPARK = "Qwen3OmniDSparkModel"
MUSE_SPARK_DSPARK = "MuseSparkDSparkModel"
#: the release from which DSpark takes its token count from the draft's block size (``use_dspark()``, 0.31.0
#: config/speculative.py:1475-1482); before, the draft's ``n_predict``
DSPARK_BLOCK_TOKENS_SINCE = Version("0.31.0")
#: the Muse Spark DSpark architecture joins the detection (0.33.0 config/speculative.py:1464)
MUSE_SPARK_SINCE = Version("0.33.0")
#: the draft ModelConfig takes the speculative max_model_len (config/speculative.py:678 in 0.22.0)
DRAFT_GIVEN_LEN_SINCE = Version("0.22.0")
#: ``max_model_len: int | None = Field(default=None, ge=1)`` (config/speculative.py:84 in 0.11.1)
LEN_BOUND_SINCE = Version("0.11.1")
#: 0.8.3 adds ``not envs.VLLM_USE_V1`` to the EAGLE check; 0.8.3's oracle reads ``--speculative-config``'s method
EAGLE_V0_ONLY_SINCE = Version("0.8.3")
#: the legacy ``SpeculativeConfig.maybe_create_spec_config`` (0.8.0-0.8.1)
CONFIG_CLASS_SINCE = rs.CONFIG_SINCE
#: the oracle's earlier features, by the release range that checks them (engine/arg_utils.py:1296-1392 in 0.10.0,
#: 1451-1489 in 0.11.0): a line that gives one of them is not judged (the oracle may leave V1 first)
_ORACLE_FEATURES: tuple[tuple[Version, Version, tuple[str, ...]], ...] = (
    (Version("0.10.0"), Version("0.10.2"), ("load_format", "logits_processor_pattern", "preemption_mode",
                                            "disable_async_output_proc", "scheduler_delay_factor", "kv_cache_dtype",
                                            "enable_prompt_embeds", "max_num_partial_prefills",
                                            "max_long_partial_prefills")),
    (Version("0.10.0"), Version("0.10.1.1"), ("num_scheduler_steps", "guided_decoding_backend",
                                              "otlp_traces_endpoint", "collect_detailed_traces")),
    (Version("0.11.0"), Version("0.11.0"), ("logits_processor_pattern", "max_num_partial_prefills",
                                            "max_long_partial_prefills")),
)
#: 0.10.0-0.10.1 send a GPU below SM 8.0 to V0 before the speculative check (engine/arg_utils.py:1344-1354 in 0.10.0)
ORACLE_CC_UNTIL = Version("0.10.2")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _raw(spec: ModelSpec) -> Mapping[str, object]:
    try:
        data = json.loads(spec.config_json) if spec.config_json else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _archs(raw: Mapping[str, object]) -> tuple[str, ...]:
    archs = raw.get("architectures")
    return tuple(str(a) for a in archs) if isinstance(archs, list) else ()


def is_qwen3_omni_target(model: ModelSpec) -> bool:
    """``_is_qwen3_omni_target`` (config/speculative.py:115-121 in 0.33.0)."""
    return model.hf_model_type == "qwen3_omni_moe" or bool(set(model.architectures) & QWEN3_OMNI_TARGETS)


def dspark_detected(name: str, raw: Mapping[str, object], at_checks: str | None, version: Version) -> str | None:
    """The method ``__post_init__``'s detection ends with for a named draft, where it is one of the parallel
    drafters (config/speculative.py:1432-1476 in 0.33.0, 1274-1304 in 0.29.0): the method given if it is kept, else by
    the name or the architectures; None where it is told otherwise (MTP, medusa, draft_model ...)."""
    if at_checks in ("eagle", "eagle3", "dflash", "dspark"):
        return at_checks
    lowered, archs = name.lower(), set(_archs(raw))
    if "eagle-" in lowered:
        return "eagle"
    if "eagle3" in lowered:
        return "eagle3"
    if "dflash" in lowered or "MuseGlimmerAssistantModel" in archs:
        return "dflash"
    named = {"Qwen3DSparkModel", "Gemma4DSparkModel"}
    if version >= Version("0.29.0"):
        named.add(QWEN3_OMNI_DSPARK)
    if version >= MUSE_SPARK_SINCE:
        named.add(MUSE_SPARK_DSPARK)
    if "dspark" in lowered or archs & named or (
            version >= Version("0.29.0") and "DSparkDraftModel" in archs and raw.get("model_type") == "qwen3"):
        return "dspark"
    return None


@dataclass(frozen=True)
class DSparkDraft:
    """A named draft the DSpark checks read: its config as ``config.json`` gives it, its architectures as the DSpark
    branch leaves them, and the token count where ``_validate_qwen3_omni_dspark`` receives it."""

    name: str
    raw: Mapping[str, object]
    method: str | None
    architectures: tuple[str, ...]
    tokens: int | None


def dspark_draft(args: ResolvedArgs, version: Version) -> tuple[DSparkDraft | None, str]:
    """The line's named draft where the DSpark checks read it, or why not (a note; "" where none is named)."""
    spec = rs.speculative(args, version)
    if spec.given is None or spec.why or not rs.judged(args, version):
        return None, ""
    given = spec.given
    at_checks = rs.method_at_checks(given, version)
    name = given.get("model")
    if not isinstance(name, str) or name in rs.NGRAM_NAMES or at_checks in rs2.NO_DRAFT_METHODS:
        return None, ""
    read = rs2.read_draft(name)
    if read.spec is None:
        return None, ""          # rules_spec2 names the draft that cannot be read
    raw = _raw(read.spec)
    if args.get("model_impl") == "transformers" or read.spec.hf_model_type not in rs.MTP_UNKNOWN_TARGETS or set(
            _archs(raw)) & rs2.OVERRIDDEN_ARCHITECTURES:
        return None, ""          # hf_config_override rewrites it: rules_spec2 says so
    method = dspark_detected(name, raw, at_checks, version)
    archs = _archs(raw)
    if method == "dspark" and version >= Version("0.29.0"):
        if "DSparkDraftModel" in archs and raw.get("model_type") == "qwen3":
            archs = ("Qwen3DSparkModel",)
        elif not set(archs) & {"Qwen3DSparkModel", QWEN3_OMNI_DSPARK, MUSE_SPARK_DSPARK, "Gemma4DSparkModel",
                               "K3DSparkModel"}:
            archs = ("DSparkDraftModel",)    # the DeepSeek-V4 rewrite (config/speculative.py:1543-1566 in 0.33.0)
    tokens = _int(given.get("num_speculative_tokens"))
    if tokens is None and method == "dspark":
        if version >= DSPARK_BLOCK_TOKENS_SINCE:
            tokens = _int(raw.get("block_size"))
            if raw.get("block_size") is None:
                tokens = _int(raw.get("dspark_block_size"))
        else:
            tokens = _int(raw.get("n_predict"))
    return DSparkDraft(name, raw, method, archs, tokens), ""


# -- dspark_draft_topk (0.28+) --------------------------------------------------------------------------------

def topk_values(given: Mapping[str, object], draft: DSparkDraft | None, final: str | None,
                version: Version) -> dict[str, object] | None:
    """``__post_init__``'s values at the ``dspark_draft_topk`` checks (config/speculative.py:1640-1672 in 0.33.0):
    None where they are not reached or not known."""
    asked = _int(given.get("dspark_draft_topk"))
    if given.get("dspark_draft_topk") is not None and (asked is None or asked < 1):
        return None              # Field(ge=1): pydantic refuses first, in its words
    method = draft.method if draft is not None else final
    tokens = draft.tokens if draft is not None else _int(given.get("num_speculative_tokens"))
    if method is None or tokens is None:
        return None              # told by a config not read, or "A speculative model was provided ..." first
    out: dict[str, object] = {"self.dspark_draft_topk": asked, "self.method": method, "self.model": True}
    if method != "dspark" or draft is None:
        # the DSpark branch's own values are read only for dspark (its first check refuses or passes first)
        out["dspark_draft_topk"] = None
        return out
    topk = asked if asked is not None else _int(draft.raw.get("dspark_draft_topk"))
    out["dspark_draft_topk"] = topk
    vocab = draft.raw.get("draft_vocab_size") or draft.raw.get("vocab_size")
    if topk is not None:
        if _int(vocab) is None:
            return {k: v for k, v in out.items() if k != "dspark_draft_topk"}   # a class default: not guessed
        out["draft_vocab_size"] = vocab
        out["self.draft_model_config.architectures"] = draft.architectures
        out["_QWEN3_OMNI_DSPARK_ARCHITECTURE"] = QWEN3_OMNI_DSPARK
    return out


# -- Qwen3-Omni DSpark (0.29+) ----------------------------------------------------------------------------------

_CLASS_KEYS = ("hidden_size", "num_attention_heads", "vocab_size")


def _nested(raw: Mapping[str, object], section: str, name: str) -> object:
    block = raw.get(section)
    return block.get(name) if isinstance(block, Mapping) else None


def _dspark_value(raw: Mapping[str, object], name: str) -> object:
    """``_get_qwen3_dspark_value``: ``dflash_config``, then ``eagle_config``, then the top level."""
    value = _nested(raw, "dflash_config", name)
    if value is None:
        value = _nested(raw, "eagle_config", name)
    return raw.get(name) if value is None else value


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _head_dim(config: Mapping[str, object]) -> object:
    """``_get_attention_head_dim`` (config/speculative.py:131-145 in 0.33.0)."""
    if config.get("head_dim") is not None:
        return config["head_dim"]
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 and hidden % heads == 0:
        return hidden // heads
    return None


class _Unknown(Exception):
    """A value the check reads that this config does not settle (a transformers class default)."""


class _Refused(Exception):
    """A check refused: the function raises there, and no later check runs."""


@dataclass(frozen=True)
class Step:
    """One check of ``_validate_qwen3_omni_dspark``: whether it refuses, and the values its message prints."""

    refuses: bool
    shows: Mapping[str, object]


def omni_steps(draft: DSparkDraft, target_raw: Mapping[str, object]) -> tuple[list[Step], bool]:
    """The function's checks in its order, each as the release evaluates it, up to the first that refuses; and
    whether they stopped at a value that is not known (the rest is then not judged)."""
    raw, steps = draft.raw, []

    def known(config: Mapping[str, object], key: str) -> object:
        if key not in config:
            raise _Unknown(key)
        return config[key]

    def run() -> None:
        def step(refuses: bool, **shows: object) -> None:
            steps.append(Step(refuses, shows))
            if refuses:
                raise _Refused

        step(QWEN3_OMNI_DSPARK not in set(draft.architectures),
             _QWEN3_OMNI_DSPARK_ARCHITECTURE=QWEN3_OMNI_DSPARK)
        block = _dspark_value(raw, "block_size")
        if block is None:
            block = _dspark_value(raw, "dspark_block_size")
        step(not _positive(block))
        step(draft.tokens != block, block_size=block, num_speculative_tokens=draft.tokens)
        thinker = target_raw.get("thinker_config")
        text = thinker.get("text_config") if isinstance(thinker, Mapping) else None
        if not isinstance(text, Mapping):
            raise _Unknown("thinker_config.text_config")
        hidden = known(text, "hidden_size")
        step(raw.get("target_hidden_size") != hidden, target_hidden_size=hidden,
             draft_target_hidden_size=raw.get("target_hidden_size"))
        step(known(raw, "hidden_size") != hidden, target_hidden_size=hidden, draft_hidden_size=raw["hidden_size"])
        target_heads = known(text, "num_attention_heads")
        draft_heads = known(raw, "num_attention_heads")
        if "head_dim" not in raw or "head_dim" not in text:
            raise _Unknown("head_dim")
        target = {"num_attention_heads": target_heads,
                  "num_key_value_heads": text.get("num_key_value_heads", target_heads),
                  "head_dim": _head_dim(text)}
        mine = {"num_attention_heads": draft_heads, "num_key_value_heads": known(raw, "num_key_value_heads"),
                "head_dim": _head_dim(raw)}
        for name, value in target.items():
            shows = {"name": name, "target_value": value, "draft_value": mine[name]}
            if not _positive(value):
                step(True, **shows)
            if mine[name] != value:
                steps.append(Step(False, shows))
                step(True, **shows)
        steps.extend([Step(False, {}), Step(False, {})])   # the loop's two checks, passed
        layers = _nested(raw, "dflash_config", "target_layer_ids")
        for key in ("dspark_target_layer_ids", "target_layer_ids"):
            if layers is None:
                layers = raw.get(key)
        step(not isinstance(layers, list) or not layers)
        assert isinstance(layers, list)
        step(any(not isinstance(i, int) or isinstance(i, bool) for i in layers))
        step(list(layers) != sorted(set(layers)))
        count = known(text, "num_hidden_layers")
        if not isinstance(count, int):
            raise _Unknown("num_hidden_layers")
        step(layers[0] < 0 or layers[-1] >= count, target_num_layers=count, target_layer_ids=layers)
        step(_dspark_value(raw, "use_aux_hidden_state") is not True)
        step(not _positive(raw.get("markov_rank")))
        step(raw.get("markov_head_type") != "vanilla", markov_head_type=raw.get("markov_head_type"))
        step(raw.get("sample_from_anchor", True) is not True or raw.get("dspark_bonus_anchor", False) is not False)
        vocab = known(text, "vocab_size")
        draft_vocab = known(raw, "vocab_size")
        step(not _positive(draft_vocab), draft_input_vocab_size=draft_vocab)
        output = raw.get("draft_vocab_size")
        output = draft_vocab if output is None else output
        step(not _positive(output) or not (isinstance(vocab, int) and 0 < output <= vocab),  # type: ignore[operator]
             draft_output_vocab_size=output, target_vocab_size=vocab)
        noise = _nested(raw, "dflash_config", "mask_token_id")
        for key in ("mask_token_id", "dspark_noise_token_id", "pard_token", "ptd_token_id"):
            if noise is None:
                noise = raw.get(key)
            if noise is not None:
                break
        step(not isinstance(noise, int) or isinstance(noise, bool)
             or not 0 <= noise < draft_vocab, draft_input_vocab_size=draft_vocab)  # type: ignore[operator]
        ropes = (raw.get("rope_parameters"), raw.get("rope_scaling"))
        step(raw.get("mrope_section") is not None or any(isinstance(r, Mapping) and "mrope_section" in r
                                                         for r in ropes))

    try:
        run()
    except _Refused:
        return steps, False
    except _Unknown:
        return steps, True
    return steps, False


def omni_values(entries: Sequence[LedgerEntry], steps: Sequence[Step], unknown: bool) -> dict[str, object]:
    """The frame of ``entries`` (the rule's, in the release's line order) from ``steps``: each check's condition as
    it evaluates, every check after the first that refuses as not reached (False), and the values the messages
    print; the checks from an unknown value on are left out (not judged)."""
    out: dict[str, object] = {}
    for i, entry in enumerate(entries):
        for cond in entry.conditions[:-1]:
            out[cond] = True                     # the loop over the attention sizes
        if i < len(steps):
            out[entry.conditions[-1]] = steps[i].refuses
            out.update(steps[i].shows)
        elif not unknown:
            out[entry.conditions[-1]] = False    # not reached: an earlier check refused, or all passed
    return out


# -- the speculative max_model_len ------------------------------------------------------------------------------

def max_len_values(args: ResolvedArgs, version: Version, target_len: object, draft: ModelSpec | None,
                   env: Mapping[str, str]) -> tuple[dict[str, object] | None, str]:
    """``_maybe_override_draft_max_model_len``'s arguments, or why they are not judged (a note; "" where the line
    gives no speculative max_model_len)."""
    spec = rs.speculative(args, version)
    if spec.given is None or spec.why or not rs.judged(args, version):
        return None, ""
    asked = spec.given.get("max_model_len")
    if asked is None:
        return None, ""
    length = _int(asked)
    if length is None or (version >= LEN_BOUND_SINCE and length < 1):
        return None, ""          # pydantic's bound (ge=1) or a value no integer: refused first, in pydantic's words
    if draft is None:
        return None, ("speculative decoding: max_model_len against the draft's length is not judged (the draft's "
                      "config is not read or not plain)")
    derived = rules_model.default_max_model_len(ResolvedArgs("vllm", str(version)), draft, version, env)
    if derived is None:
        return None, "speculative decoding: the draft's derived max_model_len is not known here: not judged"
    if version >= DRAFT_GIVEN_LEN_SINCE:
        if length > derived:
            return None, ""      # the draft's ModelConfig judges it first (``draft_model_config_values``)
        derived = length
    if not isinstance(target_len, int):
        return None, "speculative decoding: the target's max_model_len is not known here: not judged"
    return {"speculative_max_model_len": length, "draft_max_model_len": derived,
            "target_max_model_len": target_len}, ""


def draft_model_config_values(args: ResolvedArgs, version: Version, draft: ModelSpec | None,
                              env: Mapping[str, str]) -> dict[str, object] | None:
    """From 0.22 the draft ``ModelConfig`` is made with the speculative ``max_model_len`` (config/speculative.py:
    1423 in 0.33.0): its own ``_get_and_verify_max_len`` judges that length against the draft's derived one, the
    frame of ``rules_model``'s max-length rules for the draft (None where no plain draft is read)."""
    spec = rs.speculative(args, version)
    if version < DRAFT_GIVEN_LEN_SINCE or spec.given is None or draft is None:
        return None
    length = _int(spec.given.get("max_model_len"))
    if length is None or length < 1:
        return None
    draft_args = ResolvedArgs("vllm", str(version), values={"max_model_len": length},
                              given=frozenset({"max_model_len"}))
    ns = rules_model.max_len_values(draft_args, draft, version, env)
    return {**ns, **rules_model.frame(draft_args, ns, version)}


# -- EAGLE with chunked prefill (0.8.0-0.11.0) --------------------------------------------------------------------

#: 0.8.2-0.8.4 tell the method by the draft's name alone (config/speculative.py:2080-2090 in 0.8.2: ``eagle-`` in it
#: is EAGLE, whatever the method given); 0.8.5 keeps a given eagle / eagle3 (config.py:2373-2377 in 0.8.5); 0.10.2
#: tells ``eagle3`` in the name as EAGLE-3 (config/__init__.py:2172-2176 in 0.10.2), before ``eagle3-`` was EAGLE
GIVEN_EAGLE_KEPT_SINCE = Version("0.8.5")


def eagle_method(given: Mapping[str, object], at_checks: str | None, version: Version) -> str:
    """The method at the EAGLE check: eagle, eagle3, or another (``other``: the draft's config may tell medusa /
    mlp_speculator / MTP / draft_model, none of them EAGLE, which only the method given or the name makes)."""
    model = given.get("model")
    name = model.lower() if isinstance(model, str) else ""
    if version < GIVEN_EAGLE_KEPT_SINCE:
        return "eagle" if "eagle-" in name else "other" if at_checks not in ("ngram", "[ngram]") else "ngram"
    if at_checks in ("eagle", "eagle3", "ngram"):
        return at_checks
    if version < rs.EAGLE3_BY_NAME_SINCE:
        return "eagle" if ("eagle-" in name or "eagle3-" in name) else "other"
    return "eagle" if "eagle-" in name else "eagle3" if "eagle3" in name else "other"


def eagle_values(args: ResolvedArgs, ask: Ask) -> dict[str, object] | None:
    """The EAGLE check's values (see the module docstring); None where the engine or the method is not known."""
    version = ask.version
    spec = rs.speculative(args, version)
    if spec.given is None or spec.why or not rs.judged(args, version):
        return None
    flag = args.get("enable_chunked_prefill") is True
    given_v1 = ask.env.get("VLLM_USE_V1", "").strip()
    if spec.legacy or (version < EAGLE_V0_ONLY_SINCE and not args.is_set("speculative_config")):
        # the oracle's --speculative-model check: V0 for a draft that is not ngram (or, with VLLM_USE_V1=1, its
        # own refusal first)
        if given_v1 == "1":
            return None
        v1: bool | None = False
    else:
        v1 = rules_small.use_v1(version, ask.env, ask.layout)
    chunked: bool | None = True if v1 else flag if v1 is False else (True if flag else None)
    model = spec.given.get("model")
    if spec.legacy:
        if chunked is None:
            return None
        return {"enable_chunked_prefill": chunked, "speculative_model": model}
    at_checks = rs.method_at_checks(spec.given, version)
    out: dict[str, object] = {"self.model": True if model is None and at_checks not in ("ngram", "[ngram]") else model,
                              "self.method": eagle_method(spec.given, at_checks, version)}
    if version < EAGLE_V0_ONLY_SINCE:
        if chunked is not None:
            out["self.enable_chunked_prefill"] = chunked
    elif v1 is not None or not flag:
        out["self.enable_chunked_prefill and (not envs.VLLM_USE_V1)"] = flag and v1 is False
    return out


# -- draft_model in V1's support oracle (0.10.0-0.11.0) -----------------------------------------------------------

def oracle_values(args: ResolvedArgs, ask: Ask) -> dict[str, object] | None:
    """The oracle's speculative check where it is reached (see the module docstring); None where it is not, or
    where an earlier feature of the oracle may leave V1 first."""
    version = ask.version
    spec = rs.speculative(args, version)
    if spec.given is None or spec.why:
        return None
    method = spec.given.get("method")
    if method != "draft_model":
        return {"self.speculative_config is not None and self.speculative_config.get('method') == 'draft_model'":
                False, "self.speculative_config": True, "method": method}
    if ask.env.get("VLLM_USE_V1", "").strip() == "0":
        # try_v1 is false: the oracle is not asked
        return {"self.speculative_config is not None and self.speculative_config.get('method') == 'draft_model'":
                False, "self.speculative_config": None, "method": method}
    for first, last, dests in _ORACLE_FEATURES:
        if first <= version <= last and any(args.is_set(d) for d in dests):
            return None
    cc = ask.layout.compute_capability
    if version < ORACLE_CC_UNTIL and (cc is None or cc[0] < 8):
        return None
    if ask.model.linear_state is not None:
        return None              # a Mamba / hybrid model: is_v1_compatible / has_inner_state first
    return {"self.speculative_config is not None and self.speculative_config.get('method') == 'draft_model'": True,
            "self.speculative_config": True, "method": method}


# -- the area ---------------------------------------------------------------------------------------------------

def _n_predict_first(draft: DSparkDraft, version: Version) -> bool:
    """0.29-0.30 hold a DSpark draft's token count to its ``n_predict`` before (config/speculative.py:1414-1427 in
    0.29.0): a count that is not a multiple is refused there first."""
    n_predict = _int(draft.raw.get("n_predict"))
    return (version < DSPARK_BLOCK_TOKENS_SINCE and n_predict is not None and draft.tokens is not None
            and draft.tokens > n_predict and draft.tokens % n_predict != 0)


def _first(judged: Judged) -> Judged:
    """The checks of one function run in order: the first that refuses (its line) is the one raised."""
    if len(judged.refusals) <= 1:
        return judged
    first = min(judged.refusals, key=lambda r: int(r.source.rsplit(":", 1)[1]))
    return Judged((first,), judged.not_judged)


def _judge(ask: Ask, frame: Mapping[str, object], rule: str) -> Judged:
    """``rule`` in force judged over ``frame`` alone (no shared name read with another meaning)."""
    wanted = ask.among([rule])
    return ask.book.judge(ask.version, frame, rules=wanted) if wanted else Judged()


def judge(ask: Ask) -> Judged:
    """The rules of this module in force, each in its frame, and what they could not read."""
    args, version = ask.args, ask.version
    parts: list[Judged] = []
    notes: list[str] = []
    spec = rs.speculative(args, version)
    if spec.given is None:
        return Judged()
    judged_here = not spec.why and rs.judged(args, version)
    oracle = oracle_values(args, ask)
    if oracle is not None:
        parts.append(_judge(ask, oracle, ORACLE))
    elif spec.given.get("method") == "draft_model" and ask.among([ORACLE]):
        notes.append("speculative decoding: method draft_model in V1's support oracle: an earlier feature of the "
                     "oracle (or VLLM_USE_V1, the GPU, a Mamba model) decides first: not judged")
    if not judged_here:
        return combine(parts, notes)
    eagle = eagle_values(args, ask)
    if eagle is not None:
        parts.append(_judge(ask, eagle, EAGLE_CHUNKED))
    draft, why = dspark_draft(args, version)
    notes += [why] if why else []
    line = rs2.line_of(args, version)
    final = line.final if line is not None else None
    topk = topk_values(spec.given, draft, final, version) if (
        spec.given.get("dspark_draft_topk") is not None or draft is not None) else None
    topk_judged = _first(_judge(ask, topk, TOPK)) if topk is not None else Judged()
    parts.append(topk_judged)
    if draft is not None and draft.method == "dspark" and draft.tokens is not None and not topk_judged.refusals \
            and is_qwen3_omni_target(ask.model) and ask.among([OMNI]) and not _n_predict_first(draft, version):
        entries = sorted(ask.book.ledger.held(OMNI, ask.listed), key=lambda e: e.line_in(ask.listed) or 0)
        steps, unknown = omni_steps(draft, _raw(ask.model))
        parts.append(_first(_judge(ask, omni_values(entries, steps, unknown), OMNI)))
    frame, why = max_len_values(args, version, ask.values.get("max_model_len"),
                                line.draft if line is not None else None, ask.env)
    notes += [why] if why else []
    if frame is not None:
        parts.append(_first(_judge(ask, frame, MAX_LEN)))
    drafted = draft_model_config_values(args, version, line.draft if line is not None else None, ask.env)
    if drafted is not None:
        rules = ask.among(rules_model.MAX_LEN_RULES)
        parts.append(ask.book.judge(version, drafted, rules=rules) if rules else Judged())
    return combine(parts, notes)

