"""vLLM's speculative decoding against the scheduler's token budget (``engines/vllm/rules_spec4.py``,
``VllmConfig._set_max_num_scheduled_tokens``, 0.17+). Each refused case (the release's words, its file:line, its
exception) has an accepted neighbour on every release range where the check changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version
from vllm_line_cases import LineCase, case_id, judge, layout, model_of

from pytest_gpulayout.engines.vllm import rules_spec4
from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check

BUDGET = rules_spec4.BUDGET
NOT_MAPPING = rules_spec4.NOT_MAPPING
MODELS = Path(__file__).resolve().parent.parent / "data" / "models"
QWEN3_DRAFT = str(MODELS / "qwen3-8b-fp8")     # a plain Qwen3 draft checkpoint
XPRESS_DRAFT = str(MODELS / "qwen3-xpress-draft")   # Qwen3XPressModel, draft_vocab_size 32000, xpress_topc 64
EAGLE3_DRAFT = str(MODELS / "EAGLE3-LLaMA3.1-Instruct-8B")
XPRESS = rules_spec4.XPRESS


def spec(**keys: object) -> str:
    return "--speculative-config " + json.dumps(keys, separators=(",", ":"))


#: ngram drafting in parallel: K - 1 slots per request (no draft model to read)
P_NGRAM = spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=3, parallel_drafting=True)
NGRAM = spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=3)
NO_TOKEN = "which does not allow any tokens to be scheduled"

CASES = [
    # 0.33: xpress_topc only for an XPress dflash draft, within its draft vocabulary
    LineCase(XPRESS, "0.33.0", spec(method="eagle3", model=EAGLE3_DRAFT, num_speculative_tokens=3, xpress_topc=8),
             layout(), refused="xpress_topc is only supported by XPress", source="vllm/config/speculative.py:1621"),
    LineCase(XPRESS, "0.33.0", spec(method="eagle3", model=EAGLE3_DRAFT, num_speculative_tokens=3), layout()),
    LineCase(XPRESS, "0.33.0", spec(method="dflash", model=XPRESS_DRAFT, num_speculative_tokens=8,
                                    xpress_topc=32001), layout(),
             refused="xpress_topc must be between 0 and the draft vocabulary size (32000)",
             source="vllm/config/speculative.py:1634"),
    LineCase(XPRESS, "0.33.0", spec(method="dflash", model=XPRESS_DRAFT, num_speculative_tokens=8,
                                    xpress_topc=32000), layout()),
    LineCase(XPRESS, "0.33.0", spec(method="dflash", model=XPRESS_DRAFT, num_speculative_tokens=8), layout()),
    # 0.8.2: the flag's Python literal must be a dict
    LineCase(NOT_MAPPING, "0.8.2", "Qwen/Qwen3-8B --speculative-config [3]", layout(), refused="",
             source="vllm/engine/arg_utils.py:1263", exception="AssertionError"),
    LineCase(NOT_MAPPING, "0.8.2", "Qwen/Qwen3-8B --speculative-config 3", layout(), refused="",
             source="vllm/engine/arg_utils.py:1263", exception="AssertionError"),
    LineCase(NOT_MAPPING, "0.8.2", 'Qwen/Qwen3-8B --speculative-config {"method":"ngram","num_speculative_tokens":3,'
             '"prompt_lookup_max":3}', layout()),
    # 0.17-0.19: max_num_scheduled_tokens is derived from the budget, the one check cannot fail
    LineCase(BUDGET, "0.17.0", P_NGRAM + " --max-num-batched-tokens 512 --max-num-seqs 256", layout()),
    # 0.20-0.27: the 2 x 256 draft slots take the whole budget of 512
    LineCase(BUDGET, "0.24.0", P_NGRAM + " --max-num-batched-tokens 512 --max-num-seqs 256", layout(),
             refused="max_num_scheduled_tokens is set to 0 based on the speculative decoding settings, " + NO_TOKEN,
             source="vllm/config/vllm.py:1605"),
    LineCase(BUDGET, "0.24.0", P_NGRAM + " --max-num-batched-tokens 513 --max-num-seqs 256", layout()),
    LineCase(BUDGET, "0.24.0", NGRAM + " --max-num-batched-tokens 512 --max-num-seqs 256", layout()),
    # 0.26-0.27: a given --max-num-scheduled-tokens without room for the slots
    LineCase(BUDGET, "0.27.1", P_NGRAM + " --max-num-batched-tokens 2048 --max-num-seqs 256 "
             "--max-num-scheduled-tokens 2000", layout(),
             refused="VllmConfig received max_num_scheduled_tokens but it does not have enough slots to support the "
                     "speculative decoding settings. It should be greater by at least 512, but got "
                     "max_num_batched_tokens=2048 and max_num_scheduled_tokens=2000.",
             source="vllm/config/vllm.py:1771"),
    LineCase(BUDGET, "0.27.1", P_NGRAM + " --max-num-batched-tokens 2048 --max-num-seqs 256 "
             "--max-num-scheduled-tokens 1536", layout()),
    LineCase(BUDGET, "0.27.1", NGRAM + " --max-num-scheduled-tokens 0", layout(),
             refused="max_num_scheduled_tokens is set to 0 based on", source="vllm/config/vllm.py:1748"),
    # 0.28-0.31: the slots no longer scale with max_num_seqs; a given 0 still refuses (Field ge=0)
    LineCase(BUDGET, "0.28.0", P_NGRAM + " --max-num-batched-tokens 512 --max-num-seqs 256", layout()),
    LineCase(BUDGET, "0.28.0", NGRAM + " --max-num-scheduled-tokens 0", layout(),
             refused="max_num_scheduled_tokens is set to 0 based on", source="vllm/config/vllm.py:1853"),
    LineCase(BUDGET, "0.28.0", NGRAM + " --max-num-scheduled-tokens 1", layout()),
    # 0.28-0.32: a budget at or below the per-request slots
    LineCase(BUDGET, "0.32.0", spec(method="ngram", num_speculative_tokens=8, prompt_lookup_max=3,
                                    parallel_drafting=True) + " --max-num-batched-tokens 7 --max-num-seqs 4",
             layout(), refused="VllmConfig does not have enough slots to schedule a token and support the "
                               "speculative decoding settings. Got max_num_batched_tokens=7 and "
                               "scheduled_token_delta=7.", source="vllm/config/vllm.py:2286"),
    LineCase(BUDGET, "0.32.0", spec(method="ngram", num_speculative_tokens=8, prompt_lookup_max=3,
                                    parallel_drafting=True) + " --max-num-batched-tokens 8 --max-num-seqs 4",
             layout()),
    # 0.33: against num_lookahead_tokens (K for EAGLE-3 / draft_model, 0 for ngram)
    LineCase(BUDGET, "0.33.0", spec(method="ngram", num_speculative_tokens=8, prompt_lookup_max=3,
                                    parallel_drafting=True) + " --max-num-batched-tokens 7 --max-num-seqs 4",
             layout()),
    LineCase(BUDGET, "0.33.0", spec(method="draft_model", model=QWEN3_DRAFT, num_speculative_tokens=8)
             + " --max-num-batched-tokens 8 --max-num-seqs 4", layout(),
             refused="VllmConfig does not have enough slots to schedule a token and support the speculative decoding "
                     "settings. Got max_num_batched_tokens=8 and num_lookahead_tokens=8.",
             source="vllm/config/vllm.py:2372"),
    LineCase(BUDGET, "0.33.0", spec(method="draft_model", model=QWEN3_DRAFT, num_speculative_tokens=7)
             + " --max-num-batched-tokens 8 --max-num-seqs 4", layout()),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_budget(case: LineCase) -> None:
    judge(case)


def test_draft_slots_by_release() -> None:
    """``max_num_new_slots_for_drafting`` as each release range counts it."""
    slots = rules_spec4.draft_slots
    v20, v28, v33 = Version("0.20.0"), Version("0.28.0"), Version("0.33.0")
    assert slots("draft_model", 4, False, v20) == 1
    assert slots("draft_model", 4, True, v20) == 4
    assert slots("eagle3", 4, True, v20) == 3
    assert slots("dflash", 4, True, v20) == 3
    assert slots("dflash", 4, True, v28) == 4
    assert slots("draft_model", 4, True, v28) == 4
    assert slots("dflash", 4, True, v33) == 0
    assert slots("dspark", 4, True, v33) == 0
    assert slots("mtp", None, False, v28) == 0
    assert slots("eagle3", None, True, v28) is None


def test_lookahead_tokens() -> None:
    """``VllmConfig.num_lookahead_tokens`` of 0.33.0."""
    assert rules_spec4.lookahead_tokens("dflash", 4) == 5
    assert rules_spec4.lookahead_tokens("eagle3", 4) == 4
    assert rules_spec4.lookahead_tokens("draft_model", 4) == 4
    assert rules_spec4.lookahead_tokens("ngram", 4) == 0
    assert rules_spec4.lookahead_tokens("dflash", None) is None


def test_dspark_lookahead_not_judged() -> None:
    """0.33's DSpark lookahead reads the draft's sample_from_anchor: said not judged, not guessed."""
    version = Version("0.33.0")
    budget = rules_spec4.Budget("dspark", 7, True, 7, 4, None)
    frame, why = rules_spec4.budget_values(budget, version)
    assert frame is None and "sample_from_anchor" in why


def test_default_budget_passes() -> None:
    """A budget the line leaves to the release's defaults is judged with the resolved defaults: a plain ngram line
    is not refused."""
    version = Version("0.28.0")
    args = resolve(NGRAM.split(), version)
    judged = config_check(args, model_of("dense"), layout(), version, env={})
    assert not [r for r in judged.refusals if r.rule == BUDGET]


def test_literal_values() -> None:
    """The assertion reads the literal's type; text that is no literal is literal_eval's own error (not judged)."""
    assert rules_spec4.literal_values("[3]") == {rules_spec4.NOT_MAPPING_CONDITION: True,
                                                 "self.speculative_config": [3]}
    assert rules_spec4.literal_values("{'method': 'ngram'}") == {rules_spec4.NOT_MAPPING_CONDITION: False,
                                                                 "self.speculative_config": {"method": "ngram"}}
    assert rules_spec4.literal_values("ngram") is None
    assert rules_spec4.literal_values(None) is None


def test_dflash_architectures() -> None:
    """EAGLEConfig's dflash renaming, by which a Qwen3XPressModel draft is XPress."""
    assert rules_spec4.dflash_architectures(("Qwen3XPressModel", "DFlashQwen3XPressModel", "LiLiCorrDraftModel")) == (
        "DFlashQwen3XPressModel", "DFlashQwen3XPressModel", "LiLiCorrDraftModel")
