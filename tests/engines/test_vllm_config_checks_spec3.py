"""vLLM's speculative-decoding checks of ``engines/vllm/rules_spec3.py``: a Qwen3-Omni target's DSpark draft read
from its config.json (0.29+), ``dspark_draft_topk`` (0.28+), the speculative ``max_model_len`` against the draft's and
the target's, EAGLE with chunked prefill (0.8.0-0.11.0, V0 from 0.8.3) and ``method: draft_model`` in V1's support
oracle (0.10.0-0.11.0). Each refused case (the release's words, its file:line, its exception) has an accepted
neighbour on every release range where the check changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version
from vllm_line_cases import EnvCase, LineCase, case_id, judge, layout

from pytest_gpulayout.engines.vllm import rules_spec3
from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import book, config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Layout

MODELS = Path(__file__).resolve().parent.parent / "data" / "models"
OMNI_TARGET = str(MODELS / "qwen3-omni-30b-a3b-instruct")     # thinker text: hidden 2048, 32 / 4 heads, 48 layers
OMNI_DRAFT = str(MODELS / "qwen3-omni-dspark-draft")          # Qwen3OmniDSparkModel, block_size 7, fits the target
GENERIC_DRAFT = str(MODELS / "qwen3-dspark-generic-draft")    # the same, as a generic Qwen3DSparkModel
WIDE_DRAFT = str(MODELS / "qwen3-omni-dspark-draft-8b-sized")  # hidden / target_hidden_size 4096
MROPE_DRAFT = str(MODELS / "qwen3-omni-dspark-draft-mrope")   # rope_scaling with an mrope_section
QWEN3_DRAFT = str(MODELS / "qwen3-8b-fp8")                     # a plain Qwen3 draft: 40960 positions, rope_theta
EAGLE_DRAFT = str(MODELS / "EAGLE-LLaMA3-Instruct-8B")
EAGLE3_DRAFT = str(MODELS / "EAGLE3-LLaMA3.1-Instruct-8B")

OMNI = rules_spec3.OMNI
TOPK = rules_spec3.TOPK
MAX_LEN = rules_spec3.MAX_LEN
EAGLE = rules_spec3.EAGLE_CHUNKED
ORACLE = rules_spec3.ORACLE
Q = "Qwen/Qwen3-8B "   # 0.8.0-0.8.4 take the model as a positional word the line must give
T4 = (7, 5)


def spec(**keys: object) -> str:
    return f"--speculative-config {json.dumps(keys, separators=(',', ':'))}"


def model_of(name: str) -> ModelSpec:
    return load_model({"dense": "Qwen/Qwen3-8B", "omni": OMNI_TARGET}[name])


def dspark(draft: str = OMNI_DRAFT, **keys: object) -> str:
    return spec(method="dspark", model=draft, **{"num_speculative_tokens": 7, **keys})


CASES = [
    # -- Qwen3-Omni DSpark: the draft's architecture, block size, sizes and RoPE, by release range
    LineCase(OMNI, "0.33.0", dspark(GENERIC_DRAFT), layout(), model="omni",
             refused="Qwen3-Omni DSpark requires a standalone draft checkpoint with architectures="
                     "['Qwen3OmniDSparkModel']; generic Qwen3DSparkModel checkpoints must be converted first.",
             source="vllm/config/speculative.py:180"),
    LineCase(OMNI, "0.33.0", dspark(), layout(), model="omni"),
    LineCase(OMNI, "0.33.0", dspark(num_speculative_tokens=5), layout(), model="omni",
             refused="Qwen3-Omni DSpark requires num_speculative_tokens to match the trained block_size (7); got 5.",
             source="vllm/config/speculative.py:199"),
    LineCase(OMNI, "0.33.0", dspark(WIDE_DRAFT), layout(), model="omni",
             refused="Qwen3-Omni DSpark draft target_hidden_size must match the target text hidden size (2048); "
                     "got 4096.", source="vllm/config/speculative.py:216"),
    LineCase(OMNI, "0.33.0", dspark(MROPE_DRAFT), layout(), model="omni",
             refused="Qwen3-Omni DSpark draft checkpoints must use logical 1-D RoPE and must not define mrope_section.",
             source="vllm/config/speculative.py:389"),
    # the method told by the draft's architecture, its token count by its block size (0.31+)
    LineCase(OMNI, "0.31.0", spec(model=GENERIC_DRAFT), layout(), model="omni",
             refused="generic Qwen3DSparkModel checkpoints must be converted first.",
             source="vllm/config/speculative.py:161"),
    LineCase(OMNI, "0.31.0", spec(model=OMNI_DRAFT), layout(), model="omni"),
    LineCase(OMNI, "0.29.0", dspark(num_speculative_tokens=6), layout(), model="omni",
             refused="to match the trained block_size (7); got 6.", source="vllm/config/speculative.py:177"),
    LineCase(OMNI, "0.29.0", dspark(), layout(), model="omni"),
    LineCase(OMNI, "0.32.0", dspark(MROPE_DRAFT), layout(), model="omni",
             refused="must not define mrope_section.", source="vllm/config/speculative.py:369"),
    # a target that is not Qwen3-Omni: the function returns first
    LineCase(OMNI, "0.33.0", dspark(GENERIC_DRAFT), layout()),
    # -- dspark_draft_topk (0.28+)
    LineCase(TOPK, "0.33.0", spec(model=EAGLE3_DRAFT, num_speculative_tokens=3, dspark_draft_topk=8), layout(),
             refused="dspark_draft_topk is only supported by DSpark", source="vllm/config/speculative.py:1641"),
    LineCase(TOPK, "0.33.0", dspark(dspark_draft_topk=200000), layout(), model="omni",
             refused="dspark_draft_topk must be between 1 and the draft vocabulary size (152064)",
             source="vllm/config/speculative.py:1657"),
    LineCase(TOPK, "0.33.0", dspark(dspark_draft_topk=64), layout(), model="omni"),
    LineCase(TOPK, "0.29.0", dspark(dspark_draft_topk=64), layout(), model="omni"),
    LineCase(TOPK, "0.28.0", dspark(dspark_draft_topk=64), layout(),
             refused="dspark_draft_topk is only supported by Qwen3DSparkModel",
             source="vllm/config/speculative.py:1114"),
    LineCase(TOPK, "0.28.0", dspark(GENERIC_DRAFT, dspark_draft_topk=64), layout()),
    # -- the speculative max_model_len: against the draft's derived length (to 0.21), then the target's
    LineCase(MAX_LEN, "0.20.0", spec(model=QWEN3_DRAFT, num_speculative_tokens=3, max_model_len=50000), layout(),
             refused="speculative_max_model_len=50000 cannot be larger than draft_max_model_len=40960",
             source="vllm/config/speculative.py:770"),
    LineCase(MAX_LEN, "0.20.0", spec(model=QWEN3_DRAFT, num_speculative_tokens=3, max_model_len=8192) +
             " --max-model-len 4096", layout(),
             refused="speculative_max_model_len=8192 cannot be larger than target_max_model_len=4096",
             source="vllm/config/speculative.py:776"),
    LineCase(MAX_LEN, "0.20.0", spec(model=QWEN3_DRAFT, num_speculative_tokens=3, max_model_len=4096), layout()),
    LineCase(MAX_LEN, "0.33.0", spec(model=QWEN3_DRAFT, num_speculative_tokens=3, max_model_len=8192) +
             " --max-model-len 4096", layout(),
             refused="speculative_max_model_len=8192 cannot be larger than target_max_model_len=4096",
             source="vllm/config/speculative.py:1787"),
    LineCase(MAX_LEN, "0.33.0", spec(model=QWEN3_DRAFT, num_speculative_tokens=3, max_model_len=4096) +
             " --max-model-len 8192", layout()),
    LineCase(MAX_LEN, "0.10.0", spec(model=QWEN3_DRAFT, num_speculative_tokens=3, max_model_len=50000), layout(),
             refused="cannot be larger than draft_max_model_len=40960", source="vllm/config.py:2936"),
    LineCase(MAX_LEN, "0.8.0", Q + f"--speculative-model {QWEN3_DRAFT} --num-speculative-tokens 3 "
                                   "--speculative-max-model-len 4096 --max-model-len 2048", layout(),
             refused="speculative_max_model_len=4096 cannot be larger than target_max_model_len=2048",
             source="vllm/config.py:2100"),
    LineCase(MAX_LEN, "0.8.0", Q + f"--speculative-model {QWEN3_DRAFT} --num-speculative-tokens 3 "
                                   "--speculative-max-model-len 2048", layout()),
    # -- EAGLE with chunked prefill: 0.8.0-0.8.1 for a draft named "eagle", V0 below SM 8.0 from 0.8.3
    LineCase(EAGLE, "0.8.0", Q + "--speculative-model eagle --num-speculative-tokens 3 --enable-chunked-prefill",
             layout(), refused="Chunked prefill and EAGLE are not compatible.", source="vllm/config.py:1951"),
    LineCase(EAGLE, "0.8.0", Q + "--speculative-model eagle --num-speculative-tokens 3", layout()),
    LineCase(EAGLE, "0.10.0", spec(model=EAGLE_DRAFT, num_speculative_tokens=3) + " --enable-chunked-prefill",
             layout(cc=T4), refused="Chunked prefill and EAGLE are not compatible when using V0.",
             source="vllm/config.py:2861"),
    LineCase(EAGLE, "0.10.0", spec(model=EAGLE_DRAFT, num_speculative_tokens=3), layout(cc=T4)),
    LineCase(EAGLE, "0.10.0", spec(model=QWEN3_DRAFT, num_speculative_tokens=3) + " --enable-chunked-prefill",
             layout(cc=T4)),
    # -- method draft_model in V1's support oracle (0.10.0-0.11.0)
    LineCase(ORACLE, "0.10.0", spec(method="draft_model", model=QWEN3_DRAFT, num_speculative_tokens=3), layout(),
             refused="Speculative decoding with draft model is not supported yet. Please consider using other "
                     "speculative decoding methods such as ngram, medusa, eagle, or deepseek_mtp.",
             source="vllm/engine/arg_utils.py:1398", exception="NotImplementedError"),
    LineCase(ORACLE, "0.10.0", spec(method="draft_model", model=QWEN3_DRAFT, num_speculative_tokens=3),
             layout(cc=T4)),   # below SM 8.0 the oracle falls back to V0 first
    LineCase(ORACLE, "0.11.0", spec(method="draft_model", model=QWEN3_DRAFT, num_speculative_tokens=3), layout(),
             refused="Draft model speculative decoding is not supported yet.", source="vllm/engine/arg_utils.py:1486",
             exception="NotImplementedError"),
    LineCase(ORACLE, "0.11.0", spec(model=QWEN3_DRAFT, num_speculative_tokens=3), layout()),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_line(case: LineCase) -> None:
    judge(case, model_of)




ENV_CASES = [
    # 0.8.2 refuses EAGLE with chunked prefill on V1 too, which always chunks prefills
    EnvCase(LineCase(EAGLE, "0.8.2", Q + spec(model=EAGLE_DRAFT, num_speculative_tokens=3), layout(),
                     refused="Chunked prefill and EAGLE are not compatible.", source="vllm/config.py:2094"),
            {"VLLM_USE_V1": "1"}),
    EnvCase(LineCase(EAGLE, "0.8.2", Q + spec(model=EAGLE_DRAFT, num_speculative_tokens=3), layout()),
            {"VLLM_USE_V1": "0"}),
    # from 0.8.3 only V0
    EnvCase(LineCase(EAGLE, "0.8.5", spec(method="eagle", model=EAGLE_DRAFT, num_speculative_tokens=3) +
                     " --enable-chunked-prefill", layout(),
                     refused="Chunked prefill and EAGLE are not compatible when using V0.",
                     source="vllm/config.py:2393"), {"VLLM_USE_V1": "0"}),
    EnvCase(LineCase(EAGLE, "0.8.5", spec(method="eagle", model=EAGLE_DRAFT, num_speculative_tokens=3) +
                     " --enable-chunked-prefill", layout()), {"VLLM_USE_V1": "1"}),
    EnvCase(LineCase(EAGLE, "0.8.3", Q + spec(model=EAGLE_DRAFT, num_speculative_tokens=3) +
                     " --enable-chunked-prefill", layout(),
                     refused="Chunked prefill and EAGLE are not compatible when using V0.",
                     source="vllm/config.py:2181"), {"VLLM_USE_V1": "0"}),
    # VLLM_USE_V1=0: the oracle is not asked
    EnvCase(LineCase(ORACLE, "0.10.2", spec(method="draft_model", model=QWEN3_DRAFT, num_speculative_tokens=3),
                     layout()), {"VLLM_USE_V1": "0"}),
    EnvCase(LineCase(ORACLE, "0.10.2", spec(method="draft_model", model=QWEN3_DRAFT, num_speculative_tokens=3),
                     layout(), refused="Speculative decoding with draft model is not supported yet.",
                     source="vllm/engine/arg_utils.py:1497", exception="NotImplementedError"), {"VLLM_USE_V1": "1"}),
]


@pytest.mark.parametrize("env_case", ENV_CASES, ids=lambda c: case_id(c.case))
def test_line_with_env(env_case: EnvCase) -> None:
    judge(env_case.case, model_of, env_case.env)


def _checked(line: str, version: str, model: str = "dense", lay: Layout | None = None,
             env: dict[str, str] | None = None) -> tuple[list[str], tuple[str, ...]]:
    args = resolve(line.split(), Version(version))
    assert args.ok, args.errors
    judged = config_check(args, model_of(model), lay or layout(), Version(version), env=env)
    return [r.rule for r in judged.refusals], judged.not_judged


# -- each check of _validate_qwen3_omni_dspark, on a draft config built here (the release's words) ------------------

GOOD = json.loads((MODELS / "qwen3-omni-dspark-draft" / "config.json").read_text())


def _omni(version: str, **changes: object) -> list[tuple[str, str]]:
    """The refusals of the Qwen3-Omni rule for the good draft with ``changes`` (None: the key removed)."""
    raw = {k: v for k, v in {**GOOD, **changes}.items() if v is not None}
    listed = Version(version)
    draft = rules_spec3.DSparkDraft("a/draft", raw, "dspark", tuple(raw["architectures"]), 7)
    entries = sorted(book().ledger.held(OMNI, listed), key=lambda e: e.line_in(listed) or 0)
    steps, unknown = rules_spec3.omni_steps(draft, json.loads(load_model(OMNI_TARGET).config_json or "{}"))
    judged = book().judge(listed, rules_spec3.omni_values(entries, steps, unknown), rules=[OMNI])
    return [(r.message, r.source) for r in rules_spec3._first(judged).refusals]


@pytest.mark.parametrize(("changes", "words", "line"), [
    ({"block_size": 0}, "Qwen3-Omni DSpark requires a positive integer block_size in the draft config.", 194),
    ({"hidden_size": 1024, "target_hidden_size": 2048},
     "Qwen3-Omni DSpark draft hidden_size must match the target thinker hidden size (2048); got 1024.", 222),
    ({"num_key_value_heads": 8}, "Qwen3-Omni DSpark draft num_key_value_heads must match the target thinker value "
                                 "(4); got 8.", 257),
    ({"dspark_target_layer_ids": []}, "Qwen3-Omni DSpark requires a non-empty target_layer_ids list in the draft "
                                      "config.", 270),
    ({"dspark_target_layer_ids": [1, "x"]}, "Qwen3-Omni DSpark target_layer_ids must contain only integers.", 278),
    ({"dspark_target_layer_ids": [5, 1]}, "Qwen3-Omni DSpark target_layer_ids must be unique and strictly "
                                          "increasing.", 282),
    ({"dspark_target_layer_ids": [1, 48]}, "Qwen3-Omni DSpark target_layer_ids must be zero-based text-layer indices "
                                           "in [0, 47]; got [1, 48].", 291),
    ({"use_aux_hidden_state": False}, "Qwen3-Omni DSpark requires use_aux_hidden_state=true because Omni "
                                      "conditioning is supplied through thinker hidden states.", 297),
    ({"markov_rank": None}, "Qwen3-Omni DSpark requires a positive integer markov_rank in the draft config.", 308),
    ({"markov_head_type": "gated"}, "Qwen3-Omni DSpark currently requires markov_head_type='vanilla'; got 'gated'.",
     314),
    ({"dspark_bonus_anchor": True}, "Qwen3-Omni DSpark requires sample_from_anchor=true and "
                                    "dspark_bonus_anchor=false.", 322),
    ({"vocab_size": -1}, "Qwen3-Omni DSpark input vocab_size must be a positive integer; got -1.", 338),
    ({"draft_vocab_size": 200000}, "Qwen3-Omni DSpark draft_vocab_size must be a positive integer no larger than "
                                   "target vocab_size (152064); got 200000.", 350),
    ({"mask_token_id": 152064}, "Qwen3-Omni DSpark requires a valid mask/noise token id within the draft input "
                                "vocabulary [0, 152063].", 374),
])
def test_each_omni_check_refuses_first_in_the_release_words(changes: dict[str, object], words: str,
                                                            line: int) -> None:
    assert _omni("0.33.0", **changes) == [(words, f"vllm/config/speculative.py:{line}")]


def test_the_good_draft_passes_every_omni_check() -> None:
    assert _omni("0.33.0") == []
    assert _omni("0.30.0") == []


def test_only_the_first_failing_omni_check_is_said() -> None:
    # a wrong markov head and an M-RoPE section: the release raises at the first
    assert _omni("0.33.0", markov_head_type="gated", mrope_section=[1, 2]) == [
        ("Qwen3-Omni DSpark currently requires markov_head_type='vanilla'; got 'gated'.",
         "vllm/config/speculative.py:314")]


def test_a_size_the_draft_config_lacks_is_not_guessed() -> None:
    # transformers' Qwen3Config would default the KV heads: the check that reads them is not judged
    assert _omni("0.33.0", num_key_value_heads=None) == []
    listed = Version("0.33.0")
    raw = {k: v for k, v in GOOD.items() if k != "num_key_value_heads"}
    draft = rules_spec3.DSparkDraft("a/draft", raw, "dspark", ("Qwen3OmniDSparkModel",), 7)
    entries = sorted(book().ledger.held(OMNI, listed), key=lambda e: e.line_in(listed) or 0)
    steps, unknown = rules_spec3.omni_steps(draft, json.loads(load_model(OMNI_TARGET).config_json or "{}"))
    judged = book().judge(listed, rules_spec3.omni_values(entries, steps, unknown), rules=[OMNI])
    assert unknown and not judged.refusals and judged.not_judged


def test_the_draft_max_model_len_above_its_own_from_0_22_is_the_draft_model_configs_refusal() -> None:
    line = spec(model=QWEN3_DRAFT, num_speculative_tokens=3, max_model_len=50000)
    args = resolve(line.split(), Version("0.33.0"))
    judged = config_check(args, model_of("dense"), layout(), Version("0.33.0"))
    assert [r.rule for r in judged.refusals] == ["vllm.model.max_len_above_derived"]
    assert judged.refusals[0].message.startswith(
        "User-specified max_model_len (50000) is greater than the derived max_model_len (max_position_embeddings="
        "40960.0 or model_max_length=None in model's config.json).")
    rules, _ = _checked(spec(model=QWEN3_DRAFT, num_speculative_tokens=3, max_model_len=40960), "0.33.0")
    assert rules == []


def test_eagle_with_chunked_prefill_where_the_oracle_chooses_the_engine_is_not_judged() -> None:
    rules, notes = _checked(spec(method="eagle", model=EAGLE_DRAFT, num_speculative_tokens=3) +
                            " --enable-chunked-prefill", "0.9.2")
    assert EAGLE not in rules
    assert any("eagle_chunked_prefill" in n for n in notes)
