"""The speculative parameters SGLang picks by architecture, per release range (engines/sglang/specparams.py)."""

from __future__ import annotations

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang.specparams import auto_choose_speculative_params, eagle_params


@pytest.mark.parametrize(("version", "algorithm", "arch", "want"), [
    ("0.4.6", "EAGLE", "DeepseekV3ForCausalLM", (5, 4, 8)),
    ("0.4.7", "EAGLE", "DeepseekV3ForCausalLM", (3, 1, 4)),
    ("0.4.7", "EAGLE", "Qwen3ForCausalLM", (5, 4, 8)),
    ("0.4.10.post2", "EAGLE", "GptOssForCausalLM", (5, 4, 8)),
    ("0.5.1", "EAGLE", "GptOssForCausalLM", (3, 1, 4)),
    ("0.5.1", "STANDALONE", "Qwen3ForCausalLM", (5, 4, 8)),
    ("0.5.2", "STANDALONE", "LlamaForCausalLM", (3, 1, 4)),
    ("0.5.2", "EAGLE", "BailingMoeForCausalLM", (5, 4, 8)),
    ("0.5.3", "EAGLE", "BailingMoeForCausalLM", (3, 1, 4)),
    ("0.5.6", "EAGLE", "Glm4MoeForCausalLM", (5, 4, 8)),
    ("0.5.6.post1", "EAGLE", "Glm4MoeForCausalLM", (3, 1, 4)),
    ("0.5.7", "EAGLE", "Qwen3ForCausalLM", (5, 4, 8)),
    ("0.5.8", "EAGLE", "Qwen3ForCausalLM", (3, 1, 4)),
    ("0.5.23", "EAGLE3", "LlamaForCausalLM", (5, 4, 8)),
    ("0.5.23", "EAGLE", "Grok1ForCausalLM", (5, 4, 8)),
    ("0.5.23", "EAGLE", None, (3, 1, 4)),
])
def test_auto_choice_by_release(version: str, algorithm: str, arch: str | None, want: tuple[int, int, int]) -> None:
    assert auto_choose_speculative_params(Version(version), algorithm, arch) == want


def test_top_k_one_rewrites_draft_tokens_to_steps_plus_one() -> None:
    got = eagle_params(Version("0.5.23"), "EAGLE", "LlamaForCausalLM", steps=4, topk=1, draft_tokens=16)
    assert got is not None and (got.steps, got.topk, got.draft_tokens, got.auto) == (4, 1, 5, False)


def test_line_values_kept_when_top_k_above_one() -> None:
    got = eagle_params(Version("0.5.23"), "EAGLE", "Qwen3ForCausalLM", steps=4, topk=8, draft_tokens=16)
    assert got is not None and (got.topk, got.draft_tokens) == (8, 16)


def test_auto_when_no_steps_given() -> None:
    got = eagle_params(Version("0.5.7"), "EAGLE", "Qwen3ForCausalLM", steps=None, topk=None, draft_tokens=None)
    assert got is not None and (got.steps, got.topk, got.draft_tokens, got.auto) == (5, 4, 8, True)


def test_steps_without_top_k_not_resolved() -> None:
    assert eagle_params(Version("0.5.23"), "EAGLE", None, steps=3, topk=None, draft_tokens=None) is None
