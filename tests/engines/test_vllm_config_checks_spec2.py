"""vLLM's later speculative-decoding checks (``engines/vllm/rules_spec2.py``): the V0 acceptance sampler keys
(0.8.0-0.9.2), synthetic rejection sampling (0.20+), heterogeneous vocabularies, FLy and adaptive verification,
``index_share_for_mtp_iteration`` and ``draft_lm_head_quantization``, and the draft checkpoint's own config (its
``n_predict``, its vocabulary for the ``draft_model`` method). Each refused case (the release's words, its file:line,
its exception) has an accepted neighbour on every release range where the check changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version
from vllm_line_cases import LineCase, case_id, judge, layout

from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec

MODELS = Path(__file__).resolve().parent.parent / "data" / "models"
#: drafts as a deployment names them (absolute folders: the real release's harness runs elsewhere)
N_PREDICT_DRAFT = str(MODELS / "qwen3-draft-n-predict")     # a Qwen3 draft whose config.json says n_predict: 2
SMALL_VOCAB_DRAFT = str(MODELS / "tiny-llama")               # a Llama draft, vocab_size 1024
SAME_VOCAB_DRAFT = str(MODELS / "qwen3-14b")                 # Qwen3's vocabulary (151936), as the target's
EAGLE3_DRAFT = str(MODELS / "EAGLE3-LLaMA3.1-Instruct-8B")
REWRITTEN_DRAFT = str(MODELS / "deepseek-v3.2")              # a model type hf_config_override rewrites

ACCEPTANCE = "vllm.speculative2.acceptance_method"
SYNTHETIC = "vllm.speculative2.synthetic_acceptance"
SYNTHETIC_KEYS = "vllm.speculative2.synthetic_keys_without_synthetic"
HETEROGENEOUS = "vllm.speculative2.heterogeneous_vocab"
FLY = "vllm.speculative2.fly_verification"
ADAPTIVE = "vllm.speculative2.adaptive_verification"
INDEX_SHARE = "vllm.speculative2.index_share_needs_mtp"
LM_HEAD = "vllm.speculative2.draft_lm_head_quantization_method"
N_PREDICT = "vllm.speculative2.n_predict_divisible"
VOCAB = "vllm.speculative2.draft_vocab_size"

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
Q = "Qwen/Qwen3-8B "   # 0.8.0-0.8.4 take the model as a positional word the line must give
LEGACY_NGRAM = "--speculative-model [ngram] --num-speculative-tokens 3 --ngram-prompt-lookup-max 4"
OLD_NGRAM = {"model": "[ngram]", "num_speculative_tokens": 3, "prompt_lookup_max": 4}


def spec(**keys: object) -> str:
    return f"--speculative-config {json.dumps(keys, separators=(',', ':'))}"


def model_of(name: str) -> ModelSpec:
    return load_model({"dense": "Qwen/Qwen3-8B"}[name])


CASES = [
    # -- the V0 acceptance sampler: 0.8.0-0.8.1's flags (a negative posterior whatever the method)
    LineCase(ACCEPTANCE, "0.8.0", Q + LEGACY_NGRAM +
             " --typical-acceptance-sampler-posterior-threshold -1", layout(),
             refused="Expected typical_acceptance_sampler_posterior_threshold and typical_acceptance_sampler_"
                     "posterior_alpha to be > 0. Instead found typical_acceptance_sampler_posterior_threshold = -1.0 "
                     "and typical_acceptance_sampler_posterior_alpha = 0.3", source="vllm/config.py:2259"),
    LineCase(ACCEPTANCE, "0.8.0", Q + LEGACY_NGRAM +
             " --typical-acceptance-sampler-posterior-threshold 0.2", layout()),
    # 0.8.2-0.9.0: --speculative-config's keys (a Python literal up to 0.8.4); 0.8.2 fills them from the flags
    LineCase(ACCEPTANCE, "0.8.2", Q + spec(**OLD_NGRAM, acceptance_method="greedy"), layout(),
             refused="Expected acceptance_method to be either rejection_sampler or typical_acceptance_sampler. "
                     "Instead it is greedy", source="vllm/config.py:2267"),
    LineCase(ACCEPTANCE, "0.8.2", Q + spec(**OLD_NGRAM, acceptance_method="typical_acceptance_sampler"), layout()),
    LineCase(ACCEPTANCE, "0.8.2", Q + LEGACY_NGRAM +
             " --spec-decoding-acceptance-method typical_acceptance_sampler"
             " --typical-acceptance-sampler-posterior-alpha -2", layout(),
             refused="Expected the posterior_threshold and posterior_alpha of typical_acceptance_sampler to be > 0. "
                     "Instead found posterior_threshold = 0.09 and posterior_alpha = -2.0",
             source="vllm/config.py:2276"),
    LineCase(ACCEPTANCE, "0.8.2", Q + LEGACY_NGRAM +
             " --typical-acceptance-sampler-posterior-alpha -2", layout()),   # the rejection sampler reads none
    LineCase(ACCEPTANCE, "0.8.4", Q + spec(**OLD_NGRAM, acceptance_method="typical_acceptance_sampler",
                                           posterior_alpha=-0.5), layout(),
             refused="Instead found posterior_threshold = 0.09 and posterior_alpha = -0.5",
             source="vllm/config.py:2485"),
    LineCase(ACCEPTANCE, "0.9.0", spec(**NGRAM, acceptance_method=None), layout(),
             refused="acceptance_method is not set. Expected values are rejection_sampler or "
                     "typical_acceptance_sampler.", source="vllm/config.py:2711"),
    LineCase(ACCEPTANCE, "0.9.2", spec(**NGRAM, acceptance_method="typical_acceptance_sampler",
                                       posterior_threshold=-0.1), layout(),
             refused="Instead found posterior_threshold = -0.1 and posterior_alpha = 0.3",
             source="vllm/config.py:2893"),
    LineCase(ACCEPTANCE, "0.9.2", spec(**NGRAM, acceptance_method="typical_acceptance_sampler",
                                       posterior_threshold=0.1), layout()),
    # -- synthetic rejection sampling (0.20+)
    LineCase(SYNTHETIC, "0.20.0", spec(**NGRAM, rejection_sample_method="synthetic",
                                       synthetic_acceptance_rates=[0.9, 0.8]),
             layout(), refused="synthetic_acceptance_rates must have length 3, got [0.9, 0.8].",
             source="vllm/config/speculative.py:231"),
    LineCase(SYNTHETIC, "0.20.0", spec(**NGRAM, rejection_sample_method="synthetic",
                                       synthetic_acceptance_rates=[0.9, 0.8, 0.7]), layout()),
    LineCase(SYNTHETIC, "0.33.0", spec(**NGRAM, rejection_sample_method="synthetic"), layout(),
             refused="rejection_sample_method='synthetic' requires exactly one of synthetic_acceptance_rates or "
                     "synthetic_acceptance_length.", source="vllm/config/speculative.py:608"),
    LineCase(SYNTHETIC, "0.33.0", spec(**NGRAM, rejection_sample_method="synthetic",
                                       synthetic_acceptance_rates=[1, 2, 0]),
             layout(), refused="synthetic_acceptance_rates entries must be in [0, 1], got [1.0, 2.0, 0.0].",
             source="vllm/config/speculative.py:618"),
    LineCase(SYNTHETIC, "0.33.0", spec(**NGRAM, rejection_sample_method="synthetic",
                                       synthetic_acceptance_rates=[0.5, 0.9, 0.4]), layout(),
             refused="synthetic_acceptance_rates must be non-increasing, got [0.5, 0.9, 0.4].",
             source="vllm/config/speculative.py:623"),
    LineCase(SYNTHETIC, "0.33.0", spec(**NGRAM, rejection_sample_method="synthetic",
                                       synthetic_acceptance_length=5),
             layout(), refused="synthetic_acceptance_length must be in [1, 4], got 5.0.",
             source="vllm/config/speculative.py:629"),
    LineCase(SYNTHETIC, "0.33.0", spec(**NGRAM, rejection_sample_method="synthetic",
                                       synthetic_acceptance_length=2.5),
             layout()),
    LineCase(SYNTHETIC_KEYS, "0.33.0", spec(**NGRAM, synthetic_acceptance_length=2.5), layout(),
             refused="synthetic_acceptance_rates / synthetic_acceptance_length are only valid with "
                     "rejection_sample_method='synthetic'.", source="vllm/config/speculative.py:1985"),
    LineCase(SYNTHETIC_KEYS, "0.20.0", spec(**NGRAM, synthetic_acceptance_rates=[0.5, 0.4, 0.3]), layout(),
             refused="are only valid with rejection_sample_method='synthetic'.",
             source="vllm/config/speculative.py:895"),
    LineCase(SYNTHETIC_KEYS, "0.20.0", spec(**NGRAM), layout()),
    # -- a heterogeneous vocabulary (0.25+)
    LineCase(HETEROGENEOUS, "0.25.0", spec(**NGRAM, use_heterogeneous_vocab=True), layout(),
             refused="use_heterogeneous_vocab only works with method='draft_model'",
             source="vllm/config/speculative.py:1174"),
    LineCase(HETEROGENEOUS, "0.33.0", spec(model=SMALL_VOCAB_DRAFT, num_speculative_tokens=3,
                                           use_heterogeneous_vocab=True, draft_sample_method="probabilistic"),
             layout(), refused="use_heterogeneous_vocab currently only supports greedy draft sampling.",
             source="vllm/config/speculative.py:2001"),
    LineCase(HETEROGENEOUS, "0.33.0", spec(model=SMALL_VOCAB_DRAFT, num_speculative_tokens=3,
                                           use_heterogeneous_vocab=True, use_local_argmax_reduction=True),
             layout(), refused="use_heterogeneous_vocab is not compatible with use_local_argmax_reduction",
             source="vllm/config/speculative.py:2008"),
    LineCase(HETEROGENEOUS, "0.33.0", spec(model=SMALL_VOCAB_DRAFT, num_speculative_tokens=3,
                                           use_heterogeneous_vocab=True), layout()),
    # -- FLy verification (0.33)
    LineCase(FLY, "0.33.0", spec(method="ngram", num_speculative_tokens=1, prompt_lookup_max=4,
                                 rejection_sample_method="fly"), layout(),
             refused="FLy requires num_speculative_tokens to be at least 2.", source="vllm/config/speculative.py:2021"),
    LineCase(FLY, "0.33.0", spec(**NGRAM, rejection_sample_method="fly", fly_window_size=3), layout(),
             refused="FLy requires fly_window_size to be smaller than num_speculative_tokens.",
             source="vllm/config/speculative.py:2027"),
    LineCase(FLY, "0.33.0", spec(**NGRAM, rejection_sample_method="fly", fly_window_size=2), layout()),
    # -- adaptive verification: DSpark only (0.28-0.29), then not with the local argmax reduction (0.30+)
    LineCase(ADAPTIVE, "0.29.0", spec(**NGRAM, enable_adaptive_verification=True), layout(),
             refused="Adaptive verification only supported with DSpark", source="vllm/config/speculative.py:1508"),
    LineCase(ADAPTIVE, "0.33.0", spec(**NGRAM, enable_adaptive_verification=True), layout()),
    LineCase(ADAPTIVE, "0.33.0", spec(**NGRAM, enable_adaptive_verification=True, use_local_argmax_reduction=True),
             layout(), refused="use_local_argmax_reduction never materializes. Disable one of them.",
             source="vllm/config/speculative.py:1718"),
    # -- index_share_for_mtp_iteration (0.29+): only with mtp, even given false
    LineCase(INDEX_SHARE, "0.33.0", spec(**NGRAM, index_share_for_mtp_iteration=False), layout(),
             refused="index_share_for_mtp_iteration is only supported with method='mtp'",
             source="vllm/config/speculative.py:1706"),
    LineCase(INDEX_SHARE, "0.29.0", spec(**NGRAM), layout()),
    # -- draft_lm_head_quantization (0.33): eagle / eagle3 / mtp only
    LineCase(LM_HEAD, "0.33.0", spec(**NGRAM, draft_lm_head_quantization="fp8"), layout(),
             refused="draft_lm_head_quantization is not supported for method 'ngram'.",
             source="vllm/config/speculative.py:1956"),
    LineCase(LM_HEAD, "0.33.0", spec(model=EAGLE3_DRAFT, num_speculative_tokens=3, draft_lm_head_quantization="fp8"),
             layout()),
    # -- the draft's n_predict, read from its config.json, by release
    LineCase(N_PREDICT, "0.33.0", spec(model=N_PREDICT_DRAFT, num_speculative_tokens=3), layout(),
             refused="num_speculative_tokens:3 must be divisible by n_predict=2",
             source="vllm/config/speculative.py:1609"),
    LineCase(N_PREDICT, "0.33.0", spec(model=N_PREDICT_DRAFT, num_speculative_tokens=4), layout()),
    LineCase(N_PREDICT, "0.20.0", spec(model=N_PREDICT_DRAFT, num_speculative_tokens=5), layout(),
             refused="num_speculative_tokens:5 must be divisible by n_predict=2",
             source="vllm/config/speculative.py:667"),
    LineCase(N_PREDICT, "0.20.0", spec(model=SAME_VOCAB_DRAFT, num_speculative_tokens=5), layout()),
    LineCase(N_PREDICT, "0.9.2", spec(model=N_PREDICT_DRAFT, num_speculative_tokens=3), layout(),
             refused="num_speculative_tokens:3 must be divisible by n_predict=2", source="vllm/config.py:2741"),
    LineCase(N_PREDICT, "0.9.2", spec(model=N_PREDICT_DRAFT, num_speculative_tokens=2), layout()),
    LineCase(N_PREDICT, "0.8.0", Q + f"--speculative-model {N_PREDICT_DRAFT} --num-speculative-tokens 3", layout(),
             refused="num_speculative_tokens=3 must be divisible by n_predict=2", source="vllm/config.py:2022"),
    LineCase(N_PREDICT, "0.8.0", Q + f"--speculative-model {N_PREDICT_DRAFT} --num-speculative-tokens 1", layout()),
    # -- a draft_model draft's vocabulary against the target's (0.15+)
    LineCase(VOCAB, "0.33.0", spec(model=SMALL_VOCAB_DRAFT, num_speculative_tokens=3), layout(),
             refused="Target and draft model should have the same vocabulary size. Target model vocab_size=151936. "
                     "Draft model vocab_size=1024.", source="vllm/config/speculative.py:2049"),
    LineCase(VOCAB, "0.33.0", spec(model=SAME_VOCAB_DRAFT, num_speculative_tokens=3), layout()),
    LineCase(VOCAB, "0.15.0", spec(method="draft_model", model=SMALL_VOCAB_DRAFT, num_speculative_tokens=3),
             layout(), refused="Draft model vocab_size=1024.", source="vllm/config/speculative.py:691"),
    LineCase(VOCAB, "0.15.0", spec(method="draft_model", model=SAME_VOCAB_DRAFT, num_speculative_tokens=3), layout()),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_line(case: LineCase) -> None:
    judge(case, model_of)


def _checked(line: str, version: str) -> tuple[list[str], tuple[str, ...]]:
    args = resolve(line.split(), Version(version))
    assert args.ok, args.errors
    judged = config_check(args, model_of("dense"), layout(), Version(version))
    return [r.rule for r in judged.refusals], judged.not_judged


def test_a_draft_that_cannot_be_read_is_named_and_its_checks_are_not_judged() -> None:
    rules, notes = _checked(spec(model="nobody/no-such-draft", num_speculative_tokens=3), "0.33.0")
    assert N_PREDICT not in rules and VOCAB not in rules
    assert any("the draft 'nobody/no-such-draft' could not be read" in n and "n_predict" in n for n in notes), notes


def test_a_draft_whose_config_the_override_rewrites_is_not_judged() -> None:
    rules, notes = _checked(spec(model=REWRITTEN_DRAFT, num_speculative_tokens=3), "0.33.0")
    assert VOCAB not in rules     # 129280 is not 151936, but the draft's method is hf_config_override's
    assert any("hf_config_override" in n and "deepseek_v32" in n for n in notes), notes


def test_a_method_outside_the_pydantic_literal_is_pydantics_from_0_9_1() -> None:
    rules, notes = _checked(spec(**NGRAM, acceptance_method="greedy"), "0.9.1")
    assert ACCEPTANCE not in rules
    assert any("acceptance_method='greedy' is outside SpeculativeConfig's Literal" in n for n in notes), notes


def test_a_draft_read_gives_the_token_count_its_n_predict_gives() -> None:
    """Without num_speculative_tokens the draft's n_predict is the count: the synthetic rates are held to it."""
    rules, _ = _checked(spec(model=N_PREDICT_DRAFT, rejection_sample_method="synthetic",
                             synthetic_acceptance_rates=[0.9, 0.8, 0.7]), "0.33.0")
    assert SYNTHETIC in rules
    rules, _ = _checked(spec(model=N_PREDICT_DRAFT, rejection_sample_method="synthetic",
                             synthetic_acceptance_rates=[0.9, 0.8]), "0.33.0")
    assert SYNTHETIC not in rules
