"""vLLM's speculative decoding against the scheduler's token budget (``VllmConfig._set_max_num_scheduled_tokens``,
0.17+), 0.8.2's ``--speculative-config`` literal that is not a mapping and 0.33's ``xpress_topc``, beside
``rules_speculative`` / ``rules_spec2`` / ``rules_spec3``, whose readings of the line (the final method, the token
count, the named draft) it reuses.

With speculative decoding the release sets ``max_num_scheduled_tokens`` and refuses a budget that leaves no token
to schedule or no room for the draft slots. What it reads, per release range:

- 0.17-0.27 (config/vllm.py:1292-1321 in 0.17.0, 1585-1633 in 0.24.0): ``scheduled_token_delta =
  max_num_new_slots_for_drafting * max_num_seqs``; ``max_num_scheduled_tokens`` is the one given
  (``--max-num-scheduled-tokens``, 0.26+; ``Field(ge=0)``) else ``max_num_batched_tokens - scheduled_token_delta``;
  from 0.20 a value ``<= 0`` is refused, then ``max_num_batched_tokens < max_num_scheduled_tokens + delta``.
  ``max_num_new_slots_for_drafting`` is ``K - 1`` with parallel drafting, plus 1 for ``draft_model``
  (config/speculative.py:954-967 in 0.20.0).
- 0.28-0.32 (config/vllm.py:1839-1876 in 0.28.0): ``max_num_scheduled_tokens`` is the one given else
  ``max_num_batched_tokens``; ``<= 0`` is refused, then ``max_num_batched_tokens <= max_num_new_slots_for_drafting``
  (no longer times ``max_num_seqs``), which is ``K`` for DFlash, with parallel drafting ``K`` (draft_model) or
  ``K - 1``, else 1 for draft_model and 0 (config/speculative.py:1421-1459 in 0.28.0).
- 0.33 (config/vllm.py:2341-2377): the same first check, then ``max_num_batched_tokens <= num_lookahead_tokens``
  (config/vllm.py:626-652): ``K + 1`` for DFlash (and a DSpark draft whose config says ``sample_from_anchor``
  false, which is not read here: not judged), ``K`` for the EAGLE family (eagle, eagle3, mtp, dflash, dspark) and
  draft_model, else 0.

0.8.2's ``EngineArgs.create_speculative_config`` (engine/arg_utils.py:1255-1263) evaluates the flag's text
(``type=nullable_str``, :783-787) with ``ast.literal_eval`` and asserts a ``dict``: a literal of another type (a list,
a number, a string) is an ``AssertionError`` there (text that is no literal is ``literal_eval``'s own error, not
this check).

``xpress_topc`` (0.33, config/speculative.py:1620-1640): refused where the draft is not XPress (``is_xpress()``,
:2131-2144: method ``dflash`` and an architecture in ``XPRESS_ARCHITECTURES`` once ``EAGLEConfig`` has renamed
them, ``X`` -> ``DFlashX``, transformers_utils/configs/eagle.py:65-76), then, for an XPress draft, the key of the line
(else the draft config's) outside ``[0, draft_vocab_size or vocab_size]``. Judged for a named draft
``rules_spec3.dspark_draft`` reads, once ``num_speculative_tokens`` is known there (else "A speculative model was
provided ..." refuses first, :1612-1618).

Parallel drafting is the ``parallel_drafting`` key, which ``__post_init__`` turns on for DFlash (0.20+) and DSpark
(0.26+) (config/speculative.py:646 in 0.20.0, 1582 in 0.33.0). ``max_num_batched_tokens`` and ``max_num_seqs`` are
the scheduler's values as the shared namespace resolves them (nothing in ``VllmConfig.__post_init__`` rewrites them
before this call); where one is not known, or the final method or a ``K`` the budget needs is not, the rule is not
judged.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask, combine
from pytest_gpulayout.engines.vllm import rules_spec2 as rs2
from pytest_gpulayout.engines.vllm import rules_spec3 as rs3
from pytest_gpulayout.engines.vllm import rules_speculative as rs
from pytest_gpulayout.refusals import Judged

BUDGET = "vllm.speculative4.scheduled_token_budget"
NOT_MAPPING = "vllm.speculative4.config_literal_not_dict"
XPRESS = "vllm.speculative4.xpress_topc"

RULES: Mapping[str, str] = {
    BUDGET: "speculative decoding whose draft slots leave max_num_batched_tokens no token to schedule, or a "
            "--max-num-scheduled-tokens without room for them (VllmConfig._set_max_num_scheduled_tokens, 0.17+)",
    NOT_MAPPING: "--speculative-config whose Python literal is not a dict (EngineArgs.create_speculative_config, "
                 "0.8.2)",
    XPRESS: "xpress_topc for a draft that is not an XPress dflash draft, or outside [0, the draft's vocabulary] "
            "(SpeculativeConfig, 0.33)",
}
#: config/speculative.py:98 in 0.33.0
XPRESS_ARCHITECTURES = frozenset({"Qwen3XPressModel", "DFlashQwen3XPressModel"})
#: the condition of 0.8.2's assertion, as the ledger lists it (engine/arg_utils.py:1263)
NOT_MAPPING_CONDITION = "not (isinstance(self.speculative_config, dict))"

#: the function appears in 0.17.0 (config/vllm.py:1292)
BUDGET_SINCE = Version("0.17.0")
#: the slots stop scaling with max_num_seqs and DFlash counts K (config/vllm.py:1845-1847 in 0.28.0)
PER_REQUEST_SLOTS_SINCE = Version("0.28.0")
#: the slot check reads num_lookahead_tokens and DFlash / DSpark add no slot (config/vllm.py:2371 in 0.33.0)
LOOKAHEAD_SINCE = Version("0.33.0")
#: ``max_num_scheduled_tokens: int | None = Field(default=None, ge=1)`` (config/scheduler.py:55 in 0.32.0; ``ge=0``
#: in 0.24-0.31, config/scheduler.py:56)
SCHEDULED_GE1_SINCE = Version("0.32.0")
#: ``__post_init__`` turns parallel drafting on for these (config/speculative.py:1582 in 0.33.0)
PARALLEL_METHODS = frozenset({"dflash", "dspark"})
#: ``use_eagle()`` in 0.33.0 (config/speculative.py:2116-2120)
EAGLE_FAMILY = frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})


@dataclass(frozen=True)
class Budget:
    """What ``_set_max_num_scheduled_tokens`` reads: the final method, ``K`` (None where not known), whether it
    drafts in parallel, and the scheduler's two values."""

    method: str
    tokens: int | None
    parallel: bool
    batched: int
    seqs: int
    scheduled: int | None      # --max-num-scheduled-tokens (0.26+), None where not given


def draft_slots(method: str, tokens: int | None, parallel: bool, version: Version) -> int | None:
    """``SpeculativeConfig.max_num_new_slots_for_drafting`` of ``version`` (see the module docstring); None where
    it needs ``K`` and ``K`` is not known."""
    if version >= LOOKAHEAD_SINCE and method in PARALLEL_METHODS:
        return 0
    if version >= PER_REQUEST_SLOTS_SINCE:
        if method == "dflash":
            return tokens
        if parallel:
            if tokens is None:
                return None
            return tokens if method == "draft_model" else tokens - 1
        return 1 if method == "draft_model" else 0
    slots = 0
    if parallel:
        if tokens is None:
            return None
        slots = tokens - 1
    return slots + 1 if method == "draft_model" else slots


def lookahead_tokens(method: str, tokens: int | None) -> int | None:
    """``VllmConfig.num_lookahead_tokens`` of 0.33.0 (config/vllm.py:626-652) for a method other than DSpark (whose
    draft config's ``sample_from_anchor`` decides); None where ``K`` is needed and not known."""
    if method == "dflash":
        return None if tokens is None else tokens + 1
    if method in EAGLE_FAMILY or method == "draft_model":
        return tokens
    return 0


def budget_values(budget: Budget, version: Version) -> tuple[dict[str, object] | None, str]:
    """The frame of ``_set_max_num_scheduled_tokens`` in ``version``, or why it is not judged."""
    slots = draft_slots(budget.method, budget.tokens, budget.parallel, version)
    if slots is None:
        return None, ("speculative decoding: the draft slots against max_num_batched_tokens need "
                      "num_speculative_tokens, which the line does not give: not judged")
    batched = budget.batched
    out: dict[str, object] = {"self.speculative_config": True, "max_num_batched_tokens": batched,
                              "self.speculative_config.max_num_new_slots_for_drafting": slots,
                              "self.scheduler_config.max_num_seqs": budget.seqs}
    if version < PER_REQUEST_SLOTS_SINCE:
        delta = slots * budget.seqs
        scheduled = budget.scheduled if budget.scheduled is not None else batched - delta
        out.update({"scheduled_token_delta": delta, "max_num_scheduled_tokens": scheduled,
                    "self.scheduler_config.max_num_scheduled_tokens": scheduled})
        return out, ""
    scheduled = budget.scheduled if budget.scheduled is not None else batched
    out.update({"scheduled_token_delta": slots, "self.scheduler_config.max_num_scheduled_tokens": scheduled})
    if version >= LOOKAHEAD_SINCE:
        if budget.method == "dspark":
            return None, ("speculative decoding: a DSpark draft's lookahead slots read its config's "
                          "sample_from_anchor, which is not read here: the token budget is not judged")
        look = lookahead_tokens(budget.method, budget.tokens)
        if look is None:
            return None, ("speculative decoding: the lookahead slots against max_num_batched_tokens need "
                          "num_speculative_tokens, which the line does not give: not judged")
        out["self.num_lookahead_tokens"] = look
    return out, ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def budget_of(ask: Ask) -> tuple[Budget | None, str]:
    """The line's budget as ``_set_max_num_scheduled_tokens`` reads it, or why not (a note; "" where the line sets
    no speculative decoding or ``rules_speculative`` says its checks are not judged)."""
    line = rs2.line_of(ask.args, ask.version)
    if line is None:
        return None, ""
    if line.final is None:
        return None, ("speculative decoding: the final method (told by the draft's config) is not known, so the "
                      "token budget is not judged")
    batched, seqs = _int(ask.values.get("max_num_batched_tokens")), _int(ask.values.get("max_num_seqs"))
    if batched is None or seqs is None:
        return None, ("speculative decoding: the scheduler's max_num_batched_tokens / max_num_seqs are not known "
                      "here, so the token budget is not judged")
    scheduled = _int(ask.args.get("max_num_scheduled_tokens"))
    if scheduled is not None and scheduled < (1 if ask.version >= SCHEDULED_GE1_SINCE else 0):
        return None, ""          # SchedulerConfig's pydantic bound refuses it first, in pydantic's words
    parallel = line.given.get("parallel_drafting") is True or line.final in PARALLEL_METHODS
    tokens = line.tokens
    if tokens is None and line.final == "dspark":
        draft, _ = rs3.dspark_draft(ask.args, ask.version)
        tokens = draft.tokens if draft is not None else None
    return Budget(line.final, tokens, parallel, batched, seqs, scheduled), ""


def _first(judged: Judged) -> Judged:
    """The function's checks run in order: the first that refuses is the one raised."""
    if len(judged.refusals) <= 1:
        return judged
    first = min(judged.refusals, key=lambda r: int(r.source.rsplit(":", 1)[1]))
    return Judged((first,), judged.not_judged)


def literal_values(text: object) -> dict[str, object] | None:
    """0.8.2's assertion over the flag's text: None where ``literal_eval`` refuses it first (or no text is given)."""
    if not isinstance(text, str):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return {NOT_MAPPING_CONDITION: not isinstance(value, dict), "self.speculative_config": value}


def _literal(ask: Ask) -> Judged:
    wanted = ask.among([NOT_MAPPING])
    if not wanted or not ask.args.is_set("speculative_config"):
        return Judged()
    frame = literal_values(ask.args.get("speculative_config"))
    return ask.book.judge(ask.version, frame, rules=wanted) if frame is not None else Judged()


def dflash_architectures(archs: tuple[str, ...]) -> tuple[str, ...]:
    """The draft's architectures as ``EAGLEConfig`` renames them for dflash (transformers_utils/configs/eagle.py:65-76
    in 0.33.0)."""
    return tuple(a if a.startswith("DFlash") or a.endswith("DFlash") or a == "LiLiCorrDraftModel" else f"DFlash{a}"
                 for a in archs)


def xpress_values(given: Mapping[str, object], draft: rs3.DSparkDraft) -> dict[str, object] | None:
    """The frame of the two ``xpress_topc`` checks, or None where they are not reached / not known."""
    asked = given.get("xpress_topc")
    if asked is not None and (_int(asked) is None or _int(asked) < 0):  # type: ignore[operator]
        return None              # Field(ge=0): pydantic refuses first
    if "speculators_config" in draft.raw:
        return None              # a speculators-format draft keeps its own hf_config: not modelled
    xpress = draft.method == "dflash" and bool(set(dflash_architectures(draft.architectures)) & XPRESS_ARCHITECTURES)
    out: dict[str, object] = {"self.method": draft.method or "(told by the draft's config)", "self.model": draft.name,
                              "self.xpress_topc": asked, "self.xpress_topc is not None and (not self.is_xpress())":
                              asked is not None and not xpress, "self.is_xpress()": xpress, "is_xpress": xpress}
    if not xpress:
        out["xpress_topc"] = None
        return out
    topc = asked if asked is not None else draft.raw.get("xpress_topc")
    out["xpress_topc"] = topc
    if topc is None:
        return out
    vocab = draft.raw.get("draft_vocab_size") or draft.raw.get("vocab_size")
    if _int(topc) is None or _int(vocab) is None:
        return None              # a class default or a value of another type: not guessed
    out.update({"draft_vocab_size": vocab, "not 0 <= xpress_topc <= draft_vocab_size":
                not 0 <= topc <= vocab})  # type: ignore[operator]
    return out


def _xpress(ask: Ask) -> Judged:
    wanted = ask.among([XPRESS])
    if not wanted:
        return Judged()
    spec = rs.speculative(ask.args, ask.version)
    if spec.given is None or (spec.given.get("xpress_topc") is None and not spec.given.get("model")):
        return Judged()
    draft, _ = rs3.dspark_draft(ask.args, ask.version)
    if draft is None:
        if spec.given.get("xpress_topc") is not None:
            return combine([], ["speculative decoding: xpress_topc reads the named draft's config, which is not read "
                                "(or is rewritten) here: not judged"])
        return Judged()
    tokens = draft.tokens if draft.tokens is not None else _int(draft.raw.get("n_predict"))
    if tokens is None:
        return Judged()          # "A speculative model was provided, but num_speculative_tokens ..." first
    frame = xpress_values(spec.given, draft)
    return _first(ask.book.judge(ask.version, frame, rules=wanted)) if frame is not None else Judged()


def judge(ask: Ask) -> Judged:
    """The rules in force, each judged in its own frame, and what they could not read."""
    return combine([_literal(ask), _budget(ask), _xpress(ask)])


def _budget(ask: Ask) -> Judged:
    wanted = ask.among([BUDGET])
    if not wanted or ask.version < BUDGET_SINCE or not rs.judged(ask.args, ask.version):
        return Judged()
    budget, why = budget_of(ask)
    if budget is None:
        return combine([], [why] if why else [])
    frame, why = budget_values(budget, ask.version)
    if frame is None:
        return combine([], [why])
    return _first(ask.book.judge(ask.version, frame, rules=wanted))
