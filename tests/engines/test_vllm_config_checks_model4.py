"""vLLM 0.10.0's ``--task`` against the model's class (``engines/vllm/rules_model4.py``): an
embedding model (BAAI/bge-m3, XLMRobertaModel) or a reranker (BAAI/bge-reranker-v2-m3,
XLMRobertaForSequenceClassification) served with ``--task generate`` / ``embed``, each refused case (the
release's words, its file:line, its exception) with an accepted neighbour; ``--override-pooler-config`` normalize
false on a Matryoshka model (bge-m3 given ``matryoshka_dimensions`` by ``--hf-overrides``, 0.8.4-0.10.0), where
``--task`` says the runner; and the parser-converted values
(``human_readable_int``, ``nullable_kvs``, ``optional_type`` / ``parse_type``) the release's parser refuses before
any config class, in the release's words.

``tests/data/models/bge-reranker-v2-m3`` is BAAI/bge-reranker-v2-m3's config.json shape (bge-m3's XLM-R large with
the sequence-classification head's architecture and labels)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from packaging.version import Version
from vllm_line_cases import LineCase, case_id, judge, layout

from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec

#: the model configs of tests/data/models, wherever the tests are started from
MODELS_DIR = str(Path(__file__).resolve().parents[1] / "data" / "models")

RUNNER_TASK = "vllm.model.runner_task_unsupported"
NORMALIZE = "vllm.pooler.matryoshka_normalize"
_OFF = '--override-pooler-config {"normalize":false}'
_MRL = '--hf-overrides {"matryoshka_dimensions":[256,512,1024]}'
_MRL_NULL = '--hf-overrides {"matryoshka_dimensions":null}'
_NORMALIZE = "`normalize` must be enabled (set to True) for models that are compatible with Matryoshka Representation."
_DIR = MODELS_DIR
M = "Qwen/Qwen3-8B"

MODELS: Mapping[str, ModelSpec] = {
    "dense": load_model(M),
    "bge-m3": load_model(f"{_DIR}/bge-m3"),
    "reranker": load_model(f"{_DIR}/bge-reranker-v2-m3"),
}


def model_of(name: str) -> ModelSpec:
    return MODELS[name]


CASES = [
    LineCase(RUNNER_TASK, "0.10.0", "--task generate", layout(), model="bge-m3",
             refused="This model does not support task='generate'. Available tasks for runner='generate': []",
             source="vllm/config.py:961"),
    LineCase(RUNNER_TASK, "0.10.0", "--task embed", layout(), model="bge-m3"),
    LineCase(RUNNER_TASK, "0.10.0", "--task embed", layout(), model="reranker",
             refused="This model does not support task='embed'. Available tasks for runner='pooling': ['classify']",
             source="vllm/config.py:961"),
    LineCase(RUNNER_TASK, "0.10.0", "--task score", layout(), model="reranker"),
    LineCase(RUNNER_TASK, "0.10.0", "--task transcription", layout(),
             refused="This model does not support task='transcription'. Available tasks for runner='generate': "
                     "['generate']", source="vllm/config.py:961"),
    LineCase(RUNNER_TASK, "0.10.0", "--task generate", layout()),
    LineCase(RUNNER_TASK, "0.10.0", "--task reward", layout(), model="reranker",
             refused="This model does not support task='reward'. Available tasks for runner='pooling': ['classify']",
             source="vllm/config.py:961"),
    LineCase(RUNNER_TASK, "0.10.0", "--task classify", layout(), model="reranker"),
    # a Matryoshka embedding model (bge-m3 given matryoshka_dimensions) with normalize turned off
    LineCase(NORMALIZE, "0.8.4", f"--task embed {_OFF} {_MRL}", layout(), model="bge-m3",
             refused=_NORMALIZE, source="vllm/config.py:590"),
    LineCase(NORMALIZE, "0.8.4", f'--task embed --override-pooler-config {{"normalize":true}} {_MRL}', layout(),
             model="bge-m3"),
    LineCase(NORMALIZE, "0.9.2", f"--task embed {_OFF} {_MRL_NULL}", layout(), model="bge-m3",
             refused=_NORMALIZE, source="vllm/config.py:742"),
    LineCase(NORMALIZE, "0.9.2", f"--task embed {_OFF}", layout(), model="bge-m3"),
    LineCase(NORMALIZE, "0.10.0", f"--task embed {_OFF} {_MRL}", layout(), model="bge-m3",
             refused=_NORMALIZE, source="vllm/config.py:812"),
    # 0.10.0 reads matryoshka_dimensions' truth, not its presence
    LineCase(NORMALIZE, "0.10.0", f"--task embed {_OFF} {_MRL_NULL}", layout(), model="bge-m3"),
    # not the pooling runner: no pooler config is built
    LineCase(NORMALIZE, "0.10.0", f"--task generate {_OFF} {_MRL}", layout()),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_line(case: LineCase) -> None:
    judge(case, model_of)


def test_the_rule_holds_only_in_0_10_0() -> None:
    """0.10.1 moved the runner to ``--runner`` / ``--convert`` (rules_model3); before 0.10.0 there is no
    ``_resolve_runner``."""
    for version in ("0.9.1", "0.10.1"):
        args = resolve("--task generate".split(), Version(version))
        assert args.ok, args.errors
        judged = config_check(args, MODELS["bge-m3"], layout(), Version(version))
        assert not [r for r in judged.refusals if r.rule == RUNNER_TASK]


def test_the_runner_a_line_does_not_say_leaves_normalize_not_judged() -> None:
    """``--task auto``: the runner is the class's or the repository's Sentence Transformers files' choice."""
    args = resolve(f"{_OFF} {_MRL}".split(), Version("0.9.2"))
    assert args.ok, args.errors
    judged = config_check(args, MODELS["bge-m3"], layout(), Version("0.9.2"))
    assert not [r for r in judged.refusals if r.rule == NORMALIZE]
    assert any("_init_pooler_config" in n and NORMALIZE in n for n in judged.not_judged), judged.not_judged


def test_0_10_0_has_no_runner_flag() -> None:
    """The served model's runner is ModelConfig's default there: the explicit-runner raise is not reached."""
    assert resolve("--runner generate".split(), Version("0.10.0")).errors == (
        "vllm: error: unrecognized arguments: --runner",)


def test_a_class_the_facts_do_not_settle_is_not_judged() -> None:
    """Under ``--model-impl transformers`` the class the release builds is not the registry's: not judged, named."""
    args = resolve("--task generate --model-impl transformers".split(), Version("0.10.0"))
    assert args.ok, args.errors
    judged = config_check(args, MODELS["bge-m3"], layout(), Version("0.10.0"))
    assert not [r for r in judged.refusals if r.rule == RUNNER_TASK]
    assert any("ModelConfig._resolve_runner" in n and RUNNER_TASK in n for n in judged.not_judged), \
        judged.not_judged


# -- the parser's refusals of the values it converts (unreachable for the config classes) --------------------
PARSER = [
    ("0.8.4", ["--max-model-len", "1.5K"],
     "argument --max-model-len: Decimals are not allowed with binary suffixes like K. Did you mean to use 1.5k "
     "instead?"),
    ("0.19.1", ["--max-num-batched-tokens", "2.5M"],
     "argument --max-num-batched-tokens: Decimals are not allowed with binary suffixes like M. Did you mean to use "
     "2.5m instead?"),
    ("0.8.0", ["--limit-mm-per-prompt", "image"],
     "argument --limit-mm-per-prompt: Each item should be in the form KEY=VALUE"),
    ("0.9.2", ["--limit-mm-per-prompt", "image=x"],
     "argument --limit-mm-per-prompt: Failed to parse value of item image=x"),
    ("0.8.0", ["--limit-mm-per-prompt", "image=1,image=2"],
     "argument --limit-mm-per-prompt: Conflicting values specified for key: image"),
    ("0.8.5", ["--num-gpu-blocks-override", "abc"],
     "argument --num-gpu-blocks-override: Value abc cannot be converted to <class 'int'>."),
    ("0.33.0", ["--num-gpu-blocks-override", "abc"],
     "argument --num-gpu-blocks-override: Value abc cannot be converted to <class 'int'>."),
]


@pytest.mark.parametrize(("version", "words", "said"), PARSER, ids=[f"{v}-{w[0]}" for v, w, _ in PARSER])
def test_the_parser_refuses_the_converted_value_first(version: str, words: list[str], said: str) -> None:
    args = resolve([M, *words], Version(version))
    assert args.errors == (f"vllm serve: error: {said}",)


@pytest.mark.parametrize(("version", "words", "value"), [
    ("0.8.4", ["--max-model-len", "1.5k"], 1500),
    ("0.8.0", ["--limit-mm-per-prompt", "image=2,video=1"], {"image": 2, "video": 1}),
    ("0.8.5", ["--num-gpu-blocks-override", "128"], 128),
])
def test_the_parser_converts_the_neighbour(version: str, words: list[str], value: object) -> None:
    args = resolve([M, *words], Version(version))
    assert args.ok and args.get(words[0].removeprefix("--").replace("-", "_")) == value, args.errors
