"""vLLM's config-time refusals of speculative decoding (``engines/vllm/config_checks.py``, the frame of
``engines/vllm/rules_speculative.py``): each command line read by the release's own parser (``--speculative-config``
JSON and dotted keys, the ``--speculative-model`` / ``--num-speculative-tokens`` / ``--ngram-prompt-lookup-*``
flags of 0.8.0-0.8.1, ``--spec-method`` / ``--spec-tokens`` of 0.22+), then judged over the ledger's entries, in
the release's words and at its line (read in the unpacked wheels: ``vllm/config.py`` SpeculativeConfig before
0.10.1, ``vllm/config/__init__.py`` in 0.10.1-0.10.2, ``vllm/config/speculative.py`` from 0.11,
``vllm/config/vllm.py``, ``vllm/engine/arg_utils.py``). Each refusal has its accepted neighbour: the same line
without the conflict, another target model, or a release without the check.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from packaging.version import Version
from vllm_line_cases import LineCase, case_id, judge, layout

from pytest_gpulayout.cli import main
from pytest_gpulayout.engines.vllm import rules_speculative
from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import RULES, config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec

#: the model configs of tests/data/models, wherever the tests are started from
MODELS_DIR = str(Path(__file__).resolve().parents[1] / "data" / "models")

Case = LineCase

MODELS = {"dense": "Qwen/Qwen3-8B", "deepseek": "deepseek-ai/DeepSeek-V3", "llama": "meta-llama/Llama-3.1-8B-Instruct",
          "mistral": f"{MODELS_DIR}/mistral-sw", "qwen3_next": f"{MODELS_DIR}/qwen3-next-80b-a3b-instruct"}


def model_of(name: str) -> ModelSpec:
    return load_model(MODELS[name])


def spec(**keys: object) -> str:
    """``--speculative-config`` with ``keys`` as one JSON word."""
    return "--speculative-config " + json.dumps(keys, separators=(",", ":"))


NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
EAGLE3 = {"method": "eagle3", "model": "AngelSlim/Qwen3-8B_eagle3", "num_speculative_tokens": 3}
Q = "Qwen/Qwen3-8B "   # 0.8.0-0.8.1 take the model as a positional word the line must give

CASES = [
    # config/speculative.py:1303-1326 (0.33.0): one side given is both; min above max refused
    Case("vllm.speculative.ngram_lookup", "0.33.0", spec(method="ngram", num_speculative_tokens=3,
                                                         prompt_lookup_min=5, prompt_lookup_max=3), layout(),
         refused="prompt_lookup_min=5 must be <= prompt_lookup_max=3", source="vllm/config/speculative.py:1323"),
    Case("vllm.speculative.ngram_lookup", "0.33.0", spec(method="ngram", num_speculative_tokens=3,
                                                         prompt_lookup_min=5), layout()),
    # config.py:2620-2645 (0.9.2): max 0 alone makes min 0 too, and min is checked first
    Case("vllm.speculative.ngram_lookup", "0.9.2", spec(method="ngram", num_speculative_tokens=3,
                                                        prompt_lookup_max=0), layout(),
         refused="prompt_lookup_min=0 must be > 0", source="vllm/config.py:2639"),
    Case("vllm.speculative.ngram_lookup", "0.9.2", spec(model="[ngram]", num_speculative_tokens=3), layout()),
    # config.py:1959-1968 (0.8.0): the flags; min defaults to 1, max is required
    Case("vllm.speculative.ngram_lookup", "0.8.0", Q + "--speculative-model [ngram] --num-speculative-tokens 3 "
         "--ngram-prompt-lookup-min 4 --ngram-prompt-lookup-max 2", layout(),
         refused="ngram_prompt_lookup_min=4 cannot be larger than ngram_prompt_lookup_max=2",
         source="vllm/config.py:1966"),
    Case("vllm.speculative.ngram_lookup", "0.8.0", Q + "--speculative-model [ngram] --num-speculative-tokens 3",
         layout(), refused="ngram_prompt_lookup_max=None must be > 0", source="vllm/config.py:1962"),
    Case("vllm.speculative.ngram_lookup", "0.8.0", Q + "--speculative-model [ngram] --num-speculative-tokens 3 "
         "--ngram-prompt-lookup-max 4", layout()),
    # engine/arg_utils.py:1219-1252 (0.8.2): without --speculative-config the flags fill its keys
    Case("vllm.speculative.ngram_lookup", "0.8.2", Q + "--speculative-model [ngram] --num-speculative-tokens 3 "
         "--ngram-prompt-lookup-min 5 --ngram-prompt-lookup-max 2", layout(),
         refused="prompt_lookup_min=5 must be <= prompt_lookup_max=2", source="vllm/config.py:2040"),

    # config/speculative.py:1250-1296 (0.33.0): a token count without a draft, for a method that needs one
    Case("vllm.speculative.tokens_without_model", "0.33.0", spec(method="eagle3", num_speculative_tokens=3), layout(),
         refused="num_speculative_tokens was provided but without speculative model.",
         source="vllm/config/speculative.py:1293"),
    Case("vllm.speculative.tokens_without_model", "0.33.0", spec(method="custom_class", num_speculative_tokens=3),
         layout(), refused="method='custom_class' requires 'model' to contain the custom proposer module path"),
    Case("vllm.speculative.tokens_without_model", "0.33.0", spec(method="mtp", num_speculative_tokens=1), layout(),
         model="deepseek"),
    Case("vllm.speculative.tokens_without_model", "0.33.0", spec(method="suffix", num_speculative_tokens=3), layout()),
    # config.py:2599-2612 (0.9.2): no method then; the target's own MTP layers only for DeepSeek-V3 and MiMo
    Case("vllm.speculative.tokens_without_model", "0.9.2", spec(num_speculative_tokens=1), layout(),
         refused="num_speculative_tokens was provided without speculative model.", source="vllm/config.py:2612"),
    Case("vllm.speculative.tokens_without_model", "0.9.2", spec(num_speculative_tokens=1), layout(), model="deepseek"),
    # config/__init__.py (0.10.2 adds Qwen3-Next, ERNIE 4.5 MoE; 0.10.1 has not)
    Case("vllm.speculative.tokens_without_model", "0.10.1", spec(num_speculative_tokens=1), layout(tp=4),
         model="qwen3_next", refused="num_speculative_tokens was provided without speculative model.",
         source="vllm/config/__init__.py:2062"),
    Case("vllm.speculative.tokens_without_model", "0.10.2", spec(num_speculative_tokens=1), layout(tp=4),
         model="qwen3_next"),
    # config.py:1932-1941 (0.8.0): maybe_create_spec_config's arguments
    Case("vllm.speculative.tokens_without_model", "0.8.0", Q + "--num-speculative-tokens 3", layout(),
         refused="num_speculative_tokens was provided without speculative_model.", source="vllm/config.py:1939"),
    Case("vllm.speculative.tokens_without_model", "0.8.0", "deepseek-ai/DeepSeek-V3 --num-speculative-tokens 1",
         layout(), model="deepseek"),

    # config/speculative.py:1946-1951 (0.33.0): ngram has no draft to give the count
    Case("vllm.speculative.num_tokens", "0.33.0", spec(method="ngram", prompt_lookup_max=4), layout(),
         refused="num_speculative_tokens must be provided with speculative model unless the draft model config "
                 "contains an n_predict parameter.", source="vllm/config/speculative.py:1947"),
    Case("vllm.speculative.num_tokens", "0.33.0", spec(**NGRAM), layout()),
    # suffix decoding takes its tree depth for the count (config/speculative.py:1732-1735 in 0.33.0)
    Case("vllm.speculative.num_tokens", "0.33.0", spec(method="suffix"), layout()),
    Case("vllm.speculative.num_tokens", "0.8.0", Q + "--speculative-model [ngram] --ngram-prompt-lookup-max 4",
         layout(), refused="num_speculative_tokens must be provided with speculative_model unless",
         source="vllm/config.py:2046"),
    # a draft without a count: its config's n_predict may give one (not read), so nothing is refused
    Case("vllm.speculative.num_tokens", "0.33.0", spec(method="eagle3", model="AngelSlim/Qwen3-8B_eagle3"), layout()),
    # config/speculative.py:526-528 (0.11.0); from 0.11.1 pydantic's Field(gt=0) refuses first
    Case("vllm.speculative.num_tokens_positive", "0.11.0", spec(method="ngram", num_speculative_tokens=0,
                                                                 prompt_lookup_max=4), layout(),
         refused="Expected num_speculative_tokens to be greater than zero (0).",
         source="vllm/config/speculative.py:527"),
    Case("vllm.speculative.num_tokens_positive", "0.10.0", spec(method="ngram", num_speculative_tokens=-1,
                                                                 prompt_lookup_max=4), layout(),
         refused="Expected num_speculative_tokens to be greater than zero (-1).", source="vllm/config.py:3014"),
    Case("vllm.speculative.num_tokens_positive", "0.11.0", spec(**NGRAM), layout()),

    # config/speculative.py:1849-1869 (0.33.0), called where a draft model is made
    Case("vllm.speculative.draft_tp", "0.33.0", spec(**EAGLE3, draft_tensor_parallel_size=2), layout(tp=4),
         refused="speculative_draft_tensor_parallel_size=2 cannot be other value than 1 or target model "
                 "tensor_parallel_size", source="vllm/config/speculative.py:1866"),
    Case("vllm.speculative.draft_tp", "0.33.0", spec(**EAGLE3, draft_tensor_parallel_size=1), layout(tp=4)),
    Case("vllm.speculative.draft_tp", "0.33.0", spec(**EAGLE3, draft_tensor_parallel_size=4), layout(tp=4)),
    Case("vllm.speculative.draft_tp", "0.33.0", spec(**NGRAM, draft_tensor_parallel_size=2), layout(tp=4)),
    Case("vllm.speculative.draft_tp", "0.9.2", spec(model="yuhuili/EAGLE-LLaMA3.1-Instruct-8B",
                                                    num_speculative_tokens=3, draft_tensor_parallel_size=2),
         layout(tp=8), model="llama",
         refused="speculative_draft_tensor_parallel_size=2 cannot be other value than 1",
         source="vllm/config.py:2829"),
    # config/speculative.py:1940-1944 (0.33.0), from 0.15
    Case("vllm.speculative.tensor_parallel_size_key", "0.33.0", spec(**EAGLE3, tensor_parallel_size=1), layout(),
         refused="'tensor_parallel_size' is not a valid argument in the speculative_config. Please pass "
                 "'draft_tensor_parallel_size' instead.", source="vllm/config/speculative.py:1941"),
    Case("vllm.speculative.tensor_parallel_size_key", "0.14.1", spec(**EAGLE3, tensor_parallel_size=1), layout()),
    Case("vllm.speculative.tensor_parallel_size_key", "0.33.0", spec(**EAGLE3), layout()),

    # config.py:3020-3025 (0.10.0); 0.8.0's flag; from 0.11.1 pydantic's Field(ge=2)
    Case("vllm.speculative.disable_by_batch_size", "0.10.0", spec(**NGRAM, disable_by_batch_size=1), layout(),
         refused="Expect the batch size threshold of disabling speculative decoding is > 1, but got "
                 "self.disable_by_batch_size=1", source="vllm/config.py:3023"),
    Case("vllm.speculative.disable_by_batch_size", "0.8.0", Q + "--speculative-model [ngram] --num-speculative-tokens "
         "3 --ngram-prompt-lookup-max 4 --speculative-disable-by-batch-size 1", layout(),
         refused="but got speculative_disable_by_batch_size=1", source="vllm/config.py:1947"),
    Case("vllm.speculative.disable_by_batch_size", "0.10.0", spec(**NGRAM, disable_by_batch_size=4), layout()),

    # _verify_args: the EAGLE-3 target's model type, by release (config/speculative.py:920-932 in 0.20.0)
    Case("vllm.speculative.eagle3_target", "0.20.0", spec(**EAGLE3), layout(), model="mistral",
         refused="eagle3 is only supported for ['llama', 'qwen', 'minicpm', 'gpt_oss', 'hunyuan_vl', "
                 "'hunyuan_v1_dense', 'afmoe', 'nemotron_h', 'deepseek_v2', 'deepseek_v3', 'kimi_k2', 'kimi_k25', "
                 "'minimax_m2', 'gemma4'] models. Got self.target_model_config.hf_text_config.model_type='mistral'",
         source="vllm/config/speculative.py:929"),
    Case("vllm.speculative.eagle3_target", "0.20.0", spec(**EAGLE3), layout()),
    Case("vllm.speculative.eagle3_target", "0.22.0", spec(**EAGLE3), layout(), model="mistral"),
    # DeepSeek-V3 joins the list in 0.18
    Case("vllm.speculative.eagle3_target", "0.17.0", spec(**EAGLE3), layout(tp=8), model="deepseek",
         refused="Got self.target_model_config.hf_text_config.model_type='deepseek_v3'"),
    Case("vllm.speculative.eagle3_target", "0.18.0", spec(**EAGLE3), layout(tp=8), model="deepseek"),
    # config.py:3026-3031 (0.10.0): Llama only
    Case("vllm.speculative.eagle3_target", "0.10.0", spec(**EAGLE3), layout(),
         refused="Eagle3 is only supported for Llama models. Got "
                 "self.target_model_config.hf_text_config.model_type='qwen3'", source="vllm/config.py:3029"),
    Case("vllm.speculative.eagle3_target", "0.10.0", spec(**EAGLE3), layout(), model="llama"),

    # engine/arg_utils.py:1190-1196 (0.10.0)
    Case("vllm.speculative.multi_step", "0.10.0", "--num-scheduler-steps 4 " + spec(**NGRAM), layout(),
         refused="Speculative decoding is not supported with multi-step (--num-scheduler-steps > 1)",
         source="vllm/engine/arg_utils.py:1194"),
    Case("vllm.speculative.multi_step", "0.10.0", spec(**NGRAM), layout()),

    # config/vllm.py:774-787 (0.20.0): an explicit --async-scheduling with a method not of the EAGLE / MTP kind
    Case("vllm.speculative.async_scheduling", "0.20.0", "--async-scheduling " + spec(**NGRAM), layout(),
         refused="Currently, async scheduling is only supported with EAGLE/MTP/Draft Model/NGram GPU kind of "
                 "speculative decoding", source="vllm/config/vllm.py:784"),
    Case("vllm.speculative.async_scheduling", "0.20.0", "--async-scheduling " + spec(**EAGLE3), layout()),
    Case("vllm.speculative.async_scheduling", "0.20.0", spec(**NGRAM), layout()),
    Case("vllm.speculative.async_scheduling", "0.33.0", "--async-scheduling " + spec(**NGRAM), layout()),
    # engine/arg_utils.py:1298-1300 (0.11.0): any speculative decoding
    Case("vllm.speculative.async_scheduling", "0.11.0", "--async-scheduling " + spec(**EAGLE3), layout(),
         refused="Currently, speculative decoding is not supported with async scheduling.",
         source="vllm/engine/arg_utils.py:1302"),

    # engine/arg_utils.py:1806-1818 (0.11.1): the method as given; 0.15 serves draft models
    Case("vllm.speculative.draft_model_unsupported", "0.12.0",
         spec(method="draft_model", model="Qwen/Qwen3-0.6B", num_speculative_tokens=3), layout(),
         exception="NotImplementedError", refused="Draft model speculative decoding is not supported yet.",
         source="vllm/engine/arg_utils.py:1775"),
    Case("vllm.speculative.draft_model_unsupported", "0.15.0",
         spec(method="draft_model", model="Qwen/Qwen3-0.6B", num_speculative_tokens=3), layout()),
    Case("vllm.speculative.draft_model_unsupported", "0.12.0", spec(**EAGLE3), layout()),

    # config/speculative.py:1431-1499 (0.33.0): mtp drafts with the target's own layers; hf_config_override makes
    # no MTP model of Qwen3-8B, so its type is no MTP type and the method is refused
    Case("vllm.speculative.mtp_target", "0.33.0", spec(method="mtp", num_speculative_tokens=1), layout(),
         exception="NotImplementedError", refused="Unsupported speculative method: 'mtp'",
         source="vllm/config/speculative.py:1499"),
    Case("vllm.speculative.mtp_target", "0.20.0", spec(method="deepseek_mtp", num_speculative_tokens=1), layout(),
         exception="NotImplementedError", refused="Unsupported speculative method: 'mtp'",
         source="vllm/config/speculative.py:620"),
    Case("vllm.speculative.mtp_target", "0.12.0", spec(method="mtp", num_speculative_tokens=1), layout(),
         exception="NotImplementedError", refused="Speculative decoding with draft model is not supported yet."),
    Case("vllm.speculative.mtp_target", "0.33.0", spec(method="mtp", num_speculative_tokens=1), layout(tp=8),
         model="deepseek"),
    Case("vllm.speculative.mtp_target", "0.33.0", spec(**EAGLE3), layout()),

    # config/vllm.py:2017-2026 (0.33.0): use_eagle() is eagle / eagle3 / mtp / dflash / dspark
    Case("vllm.speculative.kv_sharing_fast_prefill", "0.33.0", "--kv-sharing-fast-prefill " + spec(**EAGLE3), layout(),
         refused="Fast prefill optimization for KV sharing is not compatible with EAGLE",
         source="vllm/config/vllm.py:2023"),
    Case("vllm.speculative.kv_sharing_fast_prefill", "0.11.0", "--kv-sharing-fast-prefill " + spec(**EAGLE3), layout(),
         exception="NotImplementedError", refused="Fast prefill optimization for KV sharing is not compatible",
         source="vllm/config/__init__.py:394"),
    Case("vllm.speculative.kv_sharing_fast_prefill", "0.33.0", "--kv-sharing-fast-prefill " + spec(**NGRAM), layout()),
    Case("vllm.speculative.kv_sharing_fast_prefill", "0.33.0", spec(**EAGLE3), layout()),
    # config/vllm.py:786-791 (0.20.0), under an explicit --async-scheduling; gone in 0.33
    Case("vllm.speculative.async_padded_drafter", "0.20.0",
         "--async-scheduling " + spec(**EAGLE3, disable_padded_drafter_batch=True), layout(),
         refused="Async scheduling is not compatible with disable_padded_drafter_batch=True.",
         source="vllm/config/vllm.py:790"),
    Case("vllm.speculative.async_padded_drafter", "0.20.0", spec(**EAGLE3, disable_padded_drafter_batch=True),
         layout()),
    Case("vllm.speculative.async_padded_drafter", "0.33.0",
         "--async-scheduling " + spec(**EAGLE3, disable_padded_drafter_batch=True), layout()),
    # engine/arg_utils.py:2712-2724 (0.33.0): an H100's default batch is 8192 tokens for 1024 sequences
    Case("vllm.speculative.lora_batch", "0.33.0", "--enable-lora " + spec(**{**EAGLE3, "num_speculative_tokens": 8}),
         layout(), refused="Consider increasing max_num_batched_tokens or decreasing num_speculative_tokens",
         source="vllm/engine/arg_utils.py:2721"),
    Case("vllm.speculative.lora_batch", "0.33.0", "--enable-lora " + spec(**EAGLE3), layout()),
    Case("vllm.speculative.lora_batch", "0.33.0", "--enable-lora --max-num-batched-tokens 16384 "
         + spec(**{**EAGLE3, "num_speculative_tokens": 8}), layout()),
    # config/vllm.py:1734-1740 (0.33.0): the per-request metrics need speculative decoding
    Case("vllm.speculative.metrics_without_speculative", "0.33.0", "--per-request-spec-decode-metrics summary",
         layout(), refused="--per-request-spec-decode-metrics requires speculative decoding to be enabled",
         source="vllm/config/vllm.py:1738"),
    Case("vllm.speculative.metrics_without_speculative", "0.33.0",
         "--per-request-spec-decode-metrics summary " + spec(**NGRAM), layout()),

    # engine/arg_utils.py:2108-2121 (0.33.0)
    Case("vllm.speculative.spec_flags_twice", "0.33.0", "--spec-method ngram " + spec(**NGRAM), layout(),
         refused="--spec-method and --speculative-config['method'] are mutually exclusive",
         source="vllm/engine/arg_utils.py:2118"),
    Case("vllm.speculative.spec_flags_twice", "0.22.0", "--spec-tokens 2 " + spec(**NGRAM), layout(),
         refused="--spec-tokens and --speculative-config['num_speculative_tokens'] are mutually exclusive"),
    Case("vllm.speculative.spec_flags_twice", "0.33.0",
         "--spec-method ngram --spec-tokens 2 " + spec(prompt_lookup_max=4), layout()),
]


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_the_release_refuses_the_speculative_line_in_its_own_words(case: LineCase) -> None:
    judge(case, model_of)


def test_every_speculative_rule_has_a_refusing_and_an_accepted_case() -> None:
    rules = {r for r in RULES if r.startswith("vllm.speculative.")}
    refusing = {c.rule for c in CASES if c.refused is not None}
    accepted = {c.rule for c in CASES if c.refused is None}
    assert refusing == accepted == rules


def _check(line: str, version: str, model: str = "dense") -> tuple[tuple[str, ...], tuple[str, ...]]:
    v = Version(version)
    judged = config_check(resolve(line.split(), v), model_of(model), layout(), v)
    return tuple(r.rule for r in judged.refusals), judged.not_judged


def test_a_line_without_speculative_decoding_is_not_judged_by_its_rules() -> None:
    refusals, not_judged = _check("--max-model-len 4096", "0.33.0")
    assert not [r for r in refusals if r.startswith("vllm.speculative.")]
    assert not [n for n in not_judged if "speculative" in n]


def test_the_check_says_which_speculative_options_it_did_not_judge() -> None:
    """A named draft whose config cannot be read (rules_spec2), keys no rule reads, and the token count a draft's
    n_predict may give are said, not guessed."""
    _, not_judged = _check(spec(method="eagle3", model="AngelSlim/Qwen3-8B_eagle3", quantization="fp8",
                                max_model_len=4096), "0.33.0")
    assert any("the draft 'AngelSlim/Qwen3-8B_eagle3' could not be read" in n for n in not_judged)
    assert any("speculative decoding: quantization not judged" in n for n in not_judged)
    # the speculative max_model_len is rules_spec3's, which says it needs the draft's config
    assert any("max_model_len against the draft's length is not judged" in n for n in not_judged)
    assert any("vllm.speculative.num_tokens" in n and "self.num_speculative_tokens" in n for n in not_judged)


@pytest.mark.parametrize(("keys", "said"), [
    ({"method": "ngram", "num_speculative_tokens": 0, "prompt_lookup_max": 4}, "num_speculative_tokens=0"),
    ({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 0}, "prompt_lookup_min=0"),
    ({**EAGLE3, "draft_tensor_parallel_size": 0}, "draft_tensor_parallel_size=0"),
])
def test_a_value_below_pydantics_bound_is_said_not_judged_from_0_11_1(keys: dict[str, object], said: str) -> None:
    """From 0.11.1 SpeculativeConfig's fields are bounded (config/speculative.py:61-110 in 0.11.1): pydantic refuses
    before any check, in its own words, which are not the ledger's: nothing is refused in words vLLM would not
    print, and the line says why it was not judged."""
    refusals, not_judged = _check(spec(**keys), "0.20.0")
    assert not [r for r in refusals if r.startswith("vllm.speculative.")]
    assert any(said in n and "pydantic" in n for n in not_judged)


def test_mtp_on_a_target_hf_config_override_may_convert_is_said_not_judged() -> None:
    """DeepSeek-V3's own MTP layers are made a draft by hf_config_override (not modelled): nothing is refused and
    the check says what it did not read."""
    refusals, not_judged = _check(spec(method="mtp", num_speculative_tokens=1), "0.33.0", model="deepseek")
    assert "vllm.speculative.mtp_target" not in refusals
    assert any("vllm.speculative.mtp_target" in n and "self.draft_model_config" in n for n in not_judged)


def test_0_8_2_reads_the_config_text_as_a_python_literal() -> None:
    """0.8.2-0.8.4 read --speculative-config with ``ast.literal_eval`` (engine/arg_utils.py:1255-1258 in 0.8.2):
    JSON's ``true`` is no Python literal, so the config is not judged, and the check says so."""
    refusals, not_judged = _check(Q + spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=True), "0.8.2")
    assert not [r for r in refusals if r.startswith("vllm.speculative.")]
    assert any("ast.literal_eval" in n for n in not_judged)


def test_an_mtp_alias_is_read_as_mtp_where_the_release_lists_it() -> None:
    """``deepseek_mtp`` is ``mtp`` in 0.11+ (config/speculative.py:1246-1251 in 0.33.0): the target's own layers,
    no draft model needed."""
    given = {"method": "deepseek_mtp", "num_speculative_tokens": 1}
    assert rules_speculative.method_at_checks(given, Version("0.33.0")) == "mtp"
    assert rules_speculative.method_at_checks(given, Version("0.10.2")) == "deepseek_mtp"
    refusals, _ = _check(spec(**given), "0.33.0", model="deepseek")
    assert "vllm.speculative.tokens_without_model" not in refusals


@pytest.mark.parametrize(("line", "refused"), [
    ('vllm serve Qwen/Qwen3-8B --speculative-config \'{"method":"ngram","num_speculative_tokens":3,'
     '"prompt_lookup_min":5,"prompt_lookup_max":3}\'', "prompt_lookup_min=5 must be <= prompt_lookup_max=3"),
    ('vllm serve Qwen/Qwen3-8B --speculative-config \'{"method":"ngram","num_speculative_tokens":3,'
     '"prompt_lookup_max":3}\'', None),
])
def test_gpulayout_check_fails_a_speculative_line_in_the_releases_words(
        capsys: pytest.CaptureFixture[str], line: str, refused: str | None) -> None:
    """``gpulayout check --cmd``: the refusal is the config check's failure (exit 1), the neighbour passes it."""
    assert shlex.split(line)[4].startswith("{")
    code = main(["check", "--cmd", line, "--machine", "preset:8xH100-sxm", "--json"])
    config = json.loads(capsys.readouterr().out)["deployments"]["--cmd:1"]["checks"]["config"]
    if refused is None:
        assert config["status"] == "pass", config["message"]
        return
    assert code == 1 and config["status"] == "fail"
    assert f'vLLM 0.33.0 raises ValueError: "{refused}' in config["message"]


def test_a_draft_that_could_not_be_read_is_no_pass(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The config check whose refusals read a draft it could not read warns (and names it), never passes: the
    release may still refuse the line on the draft's config. Its reachable neighbour, n-gram, reads no draft."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    line = ('vllm serve Qwen/Qwen3-8B --speculative-config '
            '\'{"method":"eagle3","model":"no-such-org/no-such-draft","num_speculative_tokens":3}\'')
    main(["check", "--cmd", line, "--machine", "preset:8xH100-sxm", "--json"])
    config = json.loads(capsys.readouterr().out)["deployments"]["--cmd:1"]["checks"]["config"]
    assert config["status"] == "warn", config["message"]
    assert "not judged, so the release may still refuse it" in config["message"]
    assert "the draft 'no-such-org/no-such-draft' could not be read" in config["message"]
