"""The heads rule mirrors the engines' divisibility asserts; these are the edges users hit."""

from __future__ import annotations

import pytest
from builders import dep, llama, machine, subject

from pytest_gpulayout.findings import Status
from pytest_gpulayout.model.spec import ModelSpec, Quantization
from pytest_gpulayout.rules.heads import check_heads, tp_problems, valid_tp_sizes


def test_tp3_for_32_heads_fails_with_engine_text_and_valid_sizes():
    f = check_heads(subject(dep("llama-tp3", tp=3), machine(4), llama()))
    assert f.status is Status.FAIL
    assert "Total number of attention heads (32) must be divisible by tensor parallel size (3)" in f.message
    assert "TP sizes that divide: 1, 2, 4, 8" in f.message
    assert f.data["num_attention_heads"] == 32 and f.data["num_key_value_heads"] == 8


@pytest.mark.parametrize("heads,tp,expected", [(28, 8, Status.FAIL), (52, 8, Status.FAIL), (40, 3, Status.FAIL),
                                               (28, 4, Status.PASS), (52, 4, Status.PASS)])
def test_real_error_reports(heads, tp, expected):
    # errors/001, 003, 005 from users: 28 heads TP=8, 52 heads TP=8, 40 heads TP=3
    model = llama(heads=heads, kv=4, hidden_size=heads * 128, intermediate_size=heads * 512)
    assert check_heads(subject(dep(tp=tp), machine(8), model)).status is expected


def test_kv_heads_fewer_than_tp_are_replicated():
    f = check_heads(subject(dep(tp=8), machine(8), llama(kv=2)))
    assert f.status is Status.PASS
    assert f.data["kv_heads_per_rank"] == 1
    assert f.data["kv_head_replicas"] == 4
    assert "replicated on 4 ranks" in f.message


def test_kv_heads_not_a_divisor_of_tp_fail():
    # 6 KV heads, TP=4: 6 >= 4 but 6 % 4 != 0
    f = check_heads(subject(dep(tp=4), machine(4), llama(heads=24, kv=6, hidden_size=3072, intermediate_size=8192)))
    assert f.status is Status.FAIL
    assert "6 KV heads do not divide by TP=4" in f.message
    # 3 KV heads, TP=4 < ... : tp % kv != 0
    problems = tp_problems(llama(heads=24, kv=3, intermediate_size=8192), 8)
    assert any("not a multiple of the 3 KV heads" in p for p in problems)


def test_kv_heads_per_rank_shrinks_with_tp():
    assert check_heads(subject(dep(tp=2), machine(2), llama())).data["kv_heads_per_rank"] == 4
    assert check_heads(subject(dep(tp=4), machine(4), llama())).data["kv_heads_per_rank"] == 2


def test_mla_has_no_kv_head_rule_and_one_latent_per_rank():
    ds = llama(heads=128, kv=128, layers=61, kv_lora_rank=512, qk_rope_head_dim=64, hidden_size=7168,
               intermediate_size=18432, vocab_size=129280)
    f = check_heads(subject(dep(tp=8), machine(8), ds))
    assert f.status is Status.PASS
    assert f.data["kv_heads_per_rank"] == 1
    assert "MLA" in f.message


def test_pp_uneven_split_is_allowed_and_explained_per_engine():
    v = check_heads(subject(dep(pp=3), machine(3), llama(layers=32)))
    assert v.status is Status.PASS
    assert v.data["pp_layer_split"] == [11, 11, 10]  # vLLM: extra layers before the last stage
    assert "VLLM_PP_LAYER_PARTITION" in v.message
    s = check_heads(subject(dep(pp=3, engine="sglang"), machine(3), llama(layers=32)))
    assert s.data["pp_layer_split"] == [10, 11, 11]  # SGLang: the last stages take the extra layers
    assert "SGLANG_PP_LAYER_PARTITION" in s.message


def test_more_stages_than_layers_fails():
    f = check_heads(subject(dep(pp=4), machine(4), llama(layers=2)))
    assert f.status is Status.FAIL
    assert "more stages than" in f.message


def test_vocab_padding_rule():
    # 32000 vocab padded to 32000 (multiple of 64): divisible by 2 and 4, not by 3
    m = llama(heads=48, kv=48, hidden_size=6144, intermediate_size=24576, vocab_size=32000)
    assert any("vocabulary" in p for p in tp_problems(m, 3))
    assert not any("vocabulary" in p for p in tp_problems(m, 4))


def test_moe_expert_parallel_uneven_warns_and_too_many_ranks_fail():
    moe = llama(num_experts=6, num_experts_per_tok=2, moe_intermediate_size=1024)
    warn = check_heads(subject(dep(tp=4, enable_expert_parallel=True), machine(4), moe))
    assert warn.status is Status.WARN and "do not split evenly" in warn.message
    big = check_heads(subject(dep(tp=8, enable_expert_parallel=True), machine(8), moe))
    assert big.status is Status.FAIL and "exceeds the 6 experts" in big.message
    even = check_heads(subject(dep(tp=2, enable_expert_parallel=True), machine(2), moe))
    assert even.status is Status.PASS and even.data["expert_parallel_size"] == 2


def test_int4_group_size_must_divide_per_rank_width():
    awq = llama(intermediate_size=14336, quantization=Quantization("awq", 4, group_size=128))
    assert check_heads(subject(dep(tp=2), machine(2), awq)).status is Status.PASS   # 7168 / 128 = 56
    f = check_heads(subject(dep(tp=8), machine(8), awq))                              # 1792 / 128 = 14 -> ok
    assert f.status is Status.PASS
    odd = llama(intermediate_size=13824, quantization=Quantization("gptq", 4, group_size=128))
    assert check_heads(subject(dep(tp=4), machine(8), odd)).status is Status.PASS    # 3456 / 128 = 27
    bad = check_heads(subject(dep(tp=8), machine(8), odd))                            # 1728 / 128 = 13.5
    assert bad.status is Status.FAIL
    assert "mlp.down_proj input is 1728 wide, not a whole number of 128-wide quantization groups" in bad.message
    # vLLM 0.33 auto_gptq.py: Marlin refuses, Machete / Humming take it, nothing checks the scales
    assert "no check for it" in bad.message and "Not verified" in bad.message
    assert "TP sizes that start: 1, 2, 4" in bad.message
    old = check_heads(subject(dep(tp=8, engine_version="0.28.0"), machine(8), odd))
    assert old.status is Status.FAIL
    assert "Failed to find a kernel that can implement the WNA16 linear layer" in old.message


def test_valid_tp_sizes_for_qwen_like_model():
    m = ModelSpec(name="q", source="t", model_type="qwen2", num_attention_heads=28, num_key_value_heads=4,
                  head_dim=128, num_hidden_layers=28, hidden_size=3584, intermediate_size=18944,
                  vocab_size=152064)
    assert valid_tp_sizes(m, 8) == [1, 2, 4]


def test_mxfp4_pads_per_rank_widths_so_gpt_oss_runs_at_tp4_and_tp8():
    # gpt-oss-120b is served at TP=4/8: vLLM pads the mxfp4 expert width, there is no group rule
    from pytest_gpulayout.model.load import load_model

    model = load_model("openai/gpt-oss-120b")
    for tp in (1, 2, 4, 8):
        assert check_heads(subject(dep(tp=tp), machine(8), model)).status is Status.PASS, tp


def test_vllm_moe_with_dp_shards_experts_over_tp_times_dp():
    # Qwen3-30B-A3B-like: expert width 768; vLLM without EP shards each expert over TP x DP ranks
    moe = llama(heads=32, kv=4, num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768,
                intermediate_size=6144)
    bad = check_heads(subject(dep(dp=5), machine(8), moe))
    assert bad.status is Status.FAIL and "TP x DP = 5" in bad.message and "768" in bad.message
    assert "data_parallel_size that divides it with TP=1: 1, 2, 3, 4, 6, 8" in bad.message
    assert "TP sizes that divide" not in bad.message  # DP is the problem, not TP
    assert check_heads(subject(dep(dp=4), machine(8), moe)).status is Status.PASS
    assert check_heads(subject(dep(dp=5,
                               enable_expert_parallel=True), machine(8), moe)).status is Status.WARN  # 128 / 5 uneven
    # SGLang DP replicas are full copies: no such rule
    assert check_heads(subject(dep(dp=5, engine="sglang"), machine(8), moe)).status is Status.PASS


def test_expert_parallel_on_a_dense_model_fails_in_vllm_and_warns_in_sglang():
    f = check_heads(subject(dep(tp=2, enable_expert_parallel=True), machine(2), llama()))
    assert f.status is Status.FAIL and "has no experts" in f.message and "vLLM" in f.message
    s = check_heads(subject(dep(tp=2, engine="sglang", enable_expert_parallel=True), machine(2), llama()))
    assert s.status is Status.WARN and "no effect" in s.message and "vLLM" not in s.message


def test_sglang_expert_parallel_lives_inside_the_tp_group():
    moe = llama(num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768)
    s = check_heads(subject(dep(tp=4, dp=2, engine="sglang", enable_expert_parallel=True), machine(8), moe))
    assert s.data["expert_parallel_size"] == 4 and "32 per rank" in s.message
    v = check_heads(subject(dep(tp=4, dp=2, enable_expert_parallel=True), machine(8), moe))
    assert v.data["expert_parallel_size"] == 8 and "16 per rank" in v.message
