"""vLLM's layout of hybrid (linear-attention / Mamba + attention) KV caches: ``engines/vllm/kv_groups.py``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from packaging.version import Version

from pytest_gpulayout.engines.vllm.kv_groups import (
    STATE,
    describe,
    group_size_of,
    hybrid_layout,
    mamba_cache_mode,
    vllm_kv_cache,
    vllm_state_bytes,
)
from pytest_gpulayout.machine.facts import GIB
from pytest_gpulayout.memory.kv import kv_layer_bytes_per_token
from pytest_gpulayout.model.families import MAMBA2, LinearState
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import FULL, NO_KV

MODELS = Path(__file__).resolve().parents[1] / "data" / "models"


def _cache(model, version: str, budget: int, tp: int, max_len: int):
    v = Version(version)
    layer = kv_layer_bytes_per_token(model, tp=tp, kv_cache_dtype="auto")
    return vllm_kv_cache(v, kinds=model.layer_kinds, page_bytes=layer * 16, block_size=16, budget_bytes=budget,
                         max_model_len=max_len, max_num_batched_tokens=8192, pp=1, sliding_window=None,
                         chunk_size=None, state_bytes=vllm_state_bytes(model, tp, v),
                         state_kind=model.linear_state.kind if model.linear_state else None)


def test_qwen3_next_tp2_h200_at_0_10_2_is_log_201():
    """vllm/201.txt: 'attention block size to 544 tokens', 'Padding mamba page size by 1.49%',
    44.59 GiB -> 'GPU KV cache size: 973,760 tokens', '14.77x', 'num_gpu_blocks is: 7162'."""
    m = load_model(str(MODELS / "qwen3-next-80b-a3b-instruct"))
    assert max(vllm_state_bytes(m, 2, Version("0.10.2"))) == 548_864
    c = _cache(m, "0.10.2", int(44.59 * GIB), tp=2, max_len=262_144)
    assert c.block_size == 544 and c.state_page_bytes == 557_056 and round(c.state_padding * 100, 2) == 1.49
    assert sorted(c.group_kinds) == ["full", STATE, STATE, STATE]
    assert c.num_blocks == 7162 and c.logged_tokens == 973_760 and f"{c.max_concurrency:.2f}" == "14.77"
    assert c.blocks_per_request == 482 + 3 and c.mamba_cache_mode == "none"
    text = describe(c, Version("0.10.2"))
    assert "544 tokens" in text and "557,056-byte page" in text and "3 linear-attention state groups" in text


def test_later_releases_change_the_group_size_and_the_state_blocks():
    # group_size: min count up to 0.11, max where max < 1.25 x min from 0.12, 1.5 x from 0.18
    assert group_size_of(Version("0.11.0"), [12, 14]) == 12
    assert group_size_of(Version("0.12.0"), [12, 14]) == 14
    assert group_size_of(Version("0.17.1"), [12, 17]) == 12
    assert group_size_of(Version("0.18.0"), [12, 17]) == 17
    # prefix caching on by default for hybrids from 0.26: "all" for Mamba families in 0.26-0.27, "align" after
    assert mamba_cache_mode(Version("0.25.0"), "gated_delta_net") == "none"
    assert mamba_cache_mode(Version("0.26.0"), "gated_delta_net") == "align"
    assert mamba_cache_mode(Version("0.26.0"), "mamba2") == "all"
    assert mamba_cache_mode(Version("0.28.0"), "mamba2") == "align"
    m = load_model(str(MODELS / "qwen3-next-80b-a3b-instruct"))
    c = _cache(m, "0.32.0", int(44.59 * GIB), tp=2, max_len=262_144)
    # "align": 2 state blocks per request in each of the 3 state groups; logged as max_concurrency x max_model_len
    assert c.num_blocks == 7162 and c.blocks_per_request == 482 + 3 * 2 and c.mamba_cache_mode == "align"
    assert c.logged_tokens == int(7162 / 488 * 262_144)


def test_a_mamba2_hybrid_pads_groups_for_tp_and_aligns_to_its_chunk():
    """Mamba2 (Granite-4 / Nemotron-H shapes): n_groups=1 is replicated to TP groups
    (``extra_groups_for_head_shards``); NemotronH's SSM state is float32 from 0.20; in 0.26's "all"
    mode the block is a multiple of the 256-token chunk and every block of a request is kept."""
    ls = LinearState(MAMBA2, 128 * 64 + 2 * 1 * 128, 4, 128, 64, 128, n_groups=1)
    assert ls.conv_elements_per_rank(2) == (128 * 64 + 2 * 2 * 128) // 2 * 3
    base = load_model(str(MODELS / "hybrid-linear"))
    m = replace(base, linear_state=ls, layer_types=tuple((FULL if i % 6 == 5 else NO_KV) for i in range(48)),
                architectures=("NemotronHForCausalLM",))
    bf16 = vllm_state_bytes(m, 2, Version("0.19.1"))[0]
    fp32 = vllm_state_bytes(m, 2, Version("0.20.0"))[0]
    assert fp32 - bf16 == ls.ssm_elements_per_rank(2) * 2
    layer = kv_layer_bytes_per_token(m, tp=2, kv_cache_dtype="auto")
    lay = hybrid_layout(Version("0.26.0"), token_bytes=layer, state_page=fp32, block_size=16, max_model_len=65536,
                        state_kind=MAMBA2)
    assert lay.mode == "all" and lay.block_size % 256 == 0 and lay.state_blocks == -(-65536 // lay.block_size)
    c = _cache(m, "0.19.1", 40 * GIB, tp=2, max_len=65536)
    # 8 full-attention layers, 40 Mamba2 layers: group_size 8, 1 + 5 groups, 1 state block each
    assert c.group_kinds.count(STATE) == 5 and c.state_blocks_per_request == 5
    assert c.num_blocks == 40 * GIB // (c.block_size * layer * 8)
