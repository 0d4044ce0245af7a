"""The attention backends and page size SGLang resolves (``engines/sglang/attention.py``), per release range, read
against the releases' source (0.5.9 ``server_args.py`` l.1774-1910; 0.5.14 l.3640-3650, l.3813-3826, l.4407-4465;
0.5.23 ``arg_groups/model_override_base.py`` l.277-351, ``overrides.py`` l.1127-1190, ``model_overrides/gpt_oss.py``
l.29-44, ``model_overrides/deepseek_v2.py`` l.178-185)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang.attention import resolve_backends
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Layout

LLAMA, QWEN, DEEPSEEK, GPT_OSS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B", "deepseek-ai/DeepSeek-V3",
                                  "openai/gpt-oss-120b")


def model(name: str) -> ModelSpec:
    """The catalog's model; DeepSeek-V3 with a config.json that writes no DSA indexer (``index_topk: null``)."""
    spec = load_model(name)
    if name == DEEPSEEK:
        return replace(spec, config_json=json.dumps({"architectures": list(spec.architectures),
                                                     "index_topk": None}))
    return spec


def resolved(name: str, words: str, cc: tuple[int, int] | None, version: str) -> tuple[object, ...]:
    line = resolve(["--model-path", name, *words.split()], Version(version))
    r = resolve_backends(line, model(name), Layout(compute_capability=cc), Version(version))
    return (r.prefill, r.decode, r.page_size) if r.reason is None else (r.reason,)


@pytest.mark.parametrize("version", ["0.5.9", "0.5.14", "0.5.23"])
@pytest.mark.parametrize(("name", "cc", "expected"), [
    (LLAMA, (8, 0), ("flashinfer", "flashinfer", 1)),
    (QWEN, (8, 0), ("flashinfer", "flashinfer", 1)),
    (QWEN, (9, 0), ("fa3", "fa3", 1)),
    (QWEN, (10, 0), ("trtllm_mha", "trtllm_mha", 64)),
    (DEEPSEEK, (8, 0), ("triton", "triton", 1)),
    (DEEPSEEK, (9, 0), ("fa3", "fa3", 1)),
    (DEEPSEEK, (10, 0), ("trtllm_mla", "trtllm_mla", 64)),
    (GPT_OSS, (8, 0), ("triton", "triton", 1)),
    (GPT_OSS, (9, 0), ("fa3", "fa3", 1)),
    (GPT_OSS, (10, 0), ("trtllm_mha", "trtllm_mha", 64)),
])
def test_defaults_by_model_and_gpu(name: str, cc: tuple[int, int], expected: tuple[object, ...],
                                   version: str) -> None:
    assert resolved(name, "", cc, version) == expected


def test_deepseek_split_flag_keeps_the_mla_default_on_sm100() -> None:
    """A split flag skips DeepSeek's trtllm_mla pick: the MLA default (flashinfer on SM100) fills the other."""
    assert resolved(DEEPSEEK, "--prefill-attention-backend fa3", (10, 0), "0.5.23") == ("fa3", "flashinfer", 1)


def test_equal_split_flags_set_the_base_backend() -> None:
    assert resolved(QWEN, "--prefill-attention-backend triton --decode-attention-backend triton", (10, 0),
                    "0.5.23") == ("triton", "triton", 1)


@pytest.mark.parametrize(("version", "expected"), [("0.5.16", 64), ("0.5.17", 128)])
def test_trtllm_mha_page_128_from_0517(version: str, expected: int) -> None:
    assert resolved(QWEN, "--page-size 128", (10, 0), version) == ("trtllm_mha", "trtllm_mha", expected)


def test_trtllm_mla_page_32_kept_and_flashmla_forced_64() -> None:
    assert resolved(DEEPSEEK, "--page-size 32", (10, 0), "0.5.23")[2] == 32
    assert resolved(DEEPSEEK, "--attention-backend flashmla --page-size 16", (9, 0), "0.5.23") == (
        "flashmla", "flashmla", 64)


@pytest.mark.parametrize(("name", "words", "cc", "version", "reason"), [
    (QWEN, "", None, "0.5.23", "compute capability is not known"),
    (QWEN, "", (9, 0), "0.5.8", "from 0.5.9"),
    (QWEN, "--speculative-algorithm EAGLE", (9, 0), "0.5.23", "speculative decoding"),
    (QWEN, "--enable-deterministic-inference", (9, 0), "0.5.23", "--enable-deterministic-inference"),
    (GPT_OSS, "--decode-attention-backend fa3", (9, 0), "0.5.23", "attention sinks"),
    ("Qwen/Qwen3-235B-A22B", "", (9, 0), "0.5.23", "model branch"),
])
def test_not_resolved_says_why(name: str, words: str, cc: tuple[int, int] | None, version: str,
                               reason: str) -> None:
    got = resolved(name, words, cc, version)
    assert len(got) == 1 and reason in str(got[0])


def test_deepseek_without_a_config_is_not_resolved() -> None:
    line = resolve(["--model-path", DEEPSEEK], Version("0.5.23"))
    r = resolve_backends(line, load_model(DEEPSEEK), Layout(compute_capability=(9, 0)), Version("0.5.23"))
    assert r.prefill is None and r.reason is not None and "DSA" in r.reason
