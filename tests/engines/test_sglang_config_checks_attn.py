"""SGLang's refusals over the attention backends it resolves (``engines/sglang/rules_attn.py``): the release's words
at its line beside the same line accepted (decode graphs off, another backend, another release)."""

from __future__ import annotations

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.engines.sglang.rules_attn import KV_SHARD_BACKEND, UNIFIED_TRTLLM_MHA
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

QWEN = "Qwen/Qwen3-8B"
B200, H100 = (10, 0), (9, 0)
REFUSED = "--enable-unified-memory does not yet support decode cuda graphs with the trtllm_mha attention backend"


def judge(version: str, words: str, cc: tuple[int, int] | None = B200) -> Judged:
    line = resolve(["--model-path", QWEN, *words.split()], Version(version))
    assert line.ok, line.errors
    return config_check(line, load_model(QWEN), Layout(1, 1, 1, cc, "GPU", 81559), Version(version))


def test_resolved_trtllm_mha_with_decode_graphs_refuses() -> None:
    """Qwen3 on SM100 resolves trtllm_mha (no --attention-backend on the line): unified memory refuses."""
    assert_verdict(judge("0.5.22", "--enable-unified-memory"), UNIFIED_TRTLLM_MHA, REFUSED,
                   exception="AssertionError", version="0.5.22", source="sglang/srt/arg_groups/kv_cache_hook.py:715")


@pytest.mark.parametrize(("version", "words", "cc"), [
    ("0.5.22", "--enable-unified-memory --disable-cuda-graph", B200),
    ("0.5.22", "--enable-unified-memory --cuda-graph-backend-decode disabled", B200),
    ("0.5.22", "--enable-unified-memory", H100),                            # fa3 on Hopper
    ("0.5.22", "--enable-unified-memory --decode-attention-backend flashinfer", B200),
    ("0.5.23", "--enable-unified-memory", B200),                            # the assert is gone
    ("0.5.22", "", B200),                                                   # no unified memory
])
def test_accepted_neighbours(version: str, words: str, cc: tuple[int, int]) -> None:
    assert_verdict(judge(version, words, cc), UNIFIED_TRTLLM_MHA, None, exception="AssertionError", version=version)


def test_named_trtllm_mha_refuses() -> None:
    assert_verdict(judge("0.5.22", "--enable-unified-memory --attention-backend trtllm_mha --page-size 16", B200),
                   UNIFIED_TRTLLM_MHA, REFUSED, exception="AssertionError", version="0.5.22")


@pytest.mark.parametrize(("words", "cc", "why"), [
    ("--enable-unified-memory", None, "compute capability"),
    ("--enable-unified-memory --enable-mis", B200, "--enable-mis"),
])
def test_not_judged_says_why(words: str, cc: tuple[int, int] | None, why: str) -> None:
    judged = judge("0.5.22", words, cc)
    assert not [r for r in judged.refusals if r.rule == UNIFIED_TRTLLM_MHA]
    assert any(why in n and "trtllm_mha decode backend" in n for n in judged.not_judged), judged.not_judged


KV_SHARD = "--enable-kv-cache-sharding --disaggregation-mode prefill --page-size 64"


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
def test_kv_sharding_refuses_the_resolved_trtllm_mha_prefill(version: str) -> None:
    """Qwen3 on SM100 resolves trtllm_mha: KV sharding takes fa3 or trtllm_mla only; on Hopper fa3 passes."""
    assert_verdict(judge(version, KV_SHARD), KV_SHARD_BACKEND, "requires the fa3 prefill attention backend, or "
                   "trtllm_mla for plain-TP MLA; got 'trtllm_mha'", exception="ValueError", version=version)
    assert_verdict(judge(version, KV_SHARD, H100), KV_SHARD_BACKEND, None, exception="ValueError", version=version)


def test_kv_sharding_trtllm_mla_needs_mla() -> None:
    assert_verdict(judge("0.5.22", f"{KV_SHARD} --attention-backend trtllm_mla"), KV_SHARD_BACKEND,
                   "KV sharding with trtllm_mla requires an MLA model.", exception="ValueError", version="0.5.22")


def test_kv_sharding_on_an_unknown_gpu_is_not_judged() -> None:
    judged = judge("0.5.22", KV_SHARD, None)
    assert not [r for r in judged.refusals if r.rule == KV_SHARD_BACKEND]
    assert any("--enable-kv-cache-sharding with a prefill" in n for n in judged.not_judged), judged.not_judged
