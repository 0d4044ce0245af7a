"""SGLang's attention DP inside TP and the flags that set its pool, as a user sees them in the verdicts.

Each expectation is SGLang's own rule, read in the wheels (``engines/sglang/parallel.py``, ``pool_flags.py``,
``engine.memory_defaults``): ``--tp 8 --dp 8 --enable-dp-attention`` is 8 GPUs, not 64.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from builders import dep, subject
from packaging.version import Version

from pytest_gpulayout.cli import main
from pytest_gpulayout.deployment import Launch, Require
from pytest_gpulayout.engines.sglang.engine import SGLANG, memory_defaults
from pytest_gpulayout.findings import Status, facts_of
from pytest_gpulayout.machine.presets import load_preset
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.rules.heads import check_heads
from pytest_gpulayout.rules.kv_pool import KvPoolFacts, check_kv_pool
from pytest_gpulayout.rules.placement import PlacementFacts, check_placement

H200 = load_preset("8xH200")
DSV3 = load_model("deepseek-ai/DeepSeek-V3")
DP_ATTENTION = Launch(args=("--enable-dp-attention",))


def _named(facts: KvPoolFacts) -> bool:
    """Whether the finding names flags as not modelled (``ABSENT`` / empty: none)."""
    return isinstance(facts.not_modelled, tuple) and bool(facts.not_modelled)


def _sg(version: str, **kw: object):  # type: ignore[no-untyped-def]
    return dep(engine="sglang", engine_version=version, max_model_len=32768, **kw)


def test_tp8_dp8_with_dp_attention_is_eight_gpus_on_every_release_spelling():
    for version in ("0.4.6", "0.5.10", "0.5.21", "0.5.23"):
        f = check_placement(subject(_sg(version, tp=8, dp=8, launch=DP_ATTENTION), H200, DSV3))
        facts = facts_of(f, PlacementFacts)
        assert f.status is Status.PASS, (version, f.message)
        assert facts is not None and facts.gpus_needed == 8


def test_dp_without_dp_attention_is_data_parallel_copies():
    f = check_placement(subject(_sg("0.5.10", tp=8, dp=8), H200, DSV3))
    assert f.status is Status.FAIL and "needs 64 GPUs" in f.message


def test_attn_dp_size_names_the_groups_from_0_5_22():
    d = _sg("0.5.23", tp=8, launch=Launch(args=("--attn-dp-size", "8")))
    s = subject(d, H200, DSV3)
    assert (s.dep.gpu_count, s.dep.attention_tp) == (8, 1)


def test_kv_heads_per_rank_follow_the_attention_tp_size():
    qwen = load_model("Qwen/Qwen3-235B-A22B")   # 4 KV heads: one per rank at TP=8, all four at attention TP 1
    plain = facts_of(check_kv_pool(subject(_sg("0.5.10", tp=8), H200, qwen)), KvPoolFacts)
    dpa = facts_of(check_kv_pool(subject(_sg("0.5.10", tp=8, dp=8, launch=DP_ATTENTION), H200, qwen)), KvPoolFacts)
    assert plain is not None and dpa is not None
    assert dpa.kv_bytes_per_token_per_rank == 4 * plain.kv_bytes_per_token_per_rank
    assert dpa.weights_gib_per_rank > plain.weights_gib_per_rank  # attention replicated over the 8 groups
    assert not _named(dpa)


def test_heads_divide_by_the_attention_tp_size():
    # 64 heads at TP=16 attention-DP 16: one head per rank is fine; the check names the attention split
    qwen = load_model("Qwen/Qwen3-235B-A22B")
    f = check_heads(subject(_sg("0.5.10", tp=16, dp=16, launch=DP_ATTENTION), None, qwen))
    assert f.status is not Status.FAIL
    assert "attention over 1 rank" in f.message


def test_the_default_fraction_keeps_the_dp_attention_reserve_from_0_5_3():
    gpu, bs = 143771, 512
    plain = memory_defaults(Version("0.5.10"), gpu, tp=8, pp=1, is_mla=True, prefill_graphs=False)
    dpa = memory_defaults(Version("0.5.10"), gpu, tp=8, pp=1, is_mla=True, prefill_graphs=False, attention_dp=8)
    # server_args.py: + max_bs x dp x 3, and x 1.5 more above a batch of 300 (the 10 GiB floor is below both)
    assert round((plain.mem_fraction_static - dpa.mem_fraction_static) * gpu) in range(
        int(bs * 8 * 4.5) - 200, int(bs * 8 * 4.5) + 200)
    old = memory_defaults(Version("0.5.2"), gpu, tp=8, pp=1, attention_dp=8)
    assert old.mem_fraction_static == memory_defaults(Version("0.5.2"), gpu, tp=8, pp=1).mem_fraction_static


def test_dp_attention_at_dp_1_is_modelled_not_named():
    d = _sg("0.5.10", tp=2, launch=DP_ATTENTION)
    f = check_kv_pool(subject(d, H200, DSV3))
    facts = facts_of(f, KvPoolFacts)
    assert facts is not None and not _named(facts)
    assert "Not modelled" not in f.message


def test_max_total_tokens_caps_the_pool():
    f = check_kv_pool(subject(_sg("0.5.23", tp=8, launch=Launch(args=("--max-total-tokens", "100000"))), H200, DSV3))
    facts = facts_of(f, KvPoolFacts)
    assert facts is not None and facts.predicted_kv_tokens == 100000 and not _named(facts)


def test_page_size_rounds_the_pool_to_whole_pages():
    base = facts_of(check_kv_pool(subject(_sg("0.5.23", tp=8), H200, DSV3)), KvPoolFacts)
    paged = facts_of(check_kv_pool(subject(_sg("0.5.23", tp=8, launch=Launch(args=("--page-size", "64"))),
                                           H200, DSV3)), KvPoolFacts)
    assert base is not None and paged is not None
    assert paged.predicted_kv_tokens == base.predicted_kv_tokens // 64 * 64 != base.predicted_kv_tokens


def test_chunked_prefill_off_reserves_max_prefill_tokens():
    on = facts_of(check_kv_pool(subject(_sg("0.5.23", tp=8), H200, DSV3)), KvPoolFacts)
    off = facts_of(check_kv_pool(subject(_sg("0.5.23", tp=8, launch=Launch(args=("--chunked-prefill-size", "-1"))),
                                         H200, DSV3)), KvPoolFacts)
    assert on is not None and off is not None
    assert off.predicted_kv_tokens < on.predicted_kv_tokens
    smaller = facts_of(check_kv_pool(subject(_sg("0.5.23", tp=8, launch=Launch(
        args=("--chunked-prefill-size", "-1", "--max-prefill-tokens", "4096"))), H200, DSV3)), KvPoolFacts)
    assert smaller is not None and off.predicted_kv_tokens < smaller.predicted_kv_tokens
    assert not _named(smaller)


def test_max_running_requests_leaves_the_pool_alone():
    base = facts_of(check_kv_pool(subject(_sg("0.5.23", tp=8), H200, DSV3)), KvPoolFacts)
    capped = facts_of(check_kv_pool(subject(_sg("0.5.23", tp=8, launch=Launch(
        args=("--max-running-requests", "16"))), H200, DSV3)), KvPoolFacts)
    assert base is not None and capped is not None
    assert capped.predicted_kv_tokens == base.predicted_kv_tokens and not _named(capped)


def test_a_launch_writes_the_dp_size_sglang_reads_back():
    d = _sg("0.5.10", tp=8, dp=8, launch=DP_ATTENTION)
    s = subject(d, H200, DSV3)
    argv = SGLANG.launch.launch_argv(s.dep, "/m", 30000, Version("0.5.10"))
    assert argv[argv.index("--dp-size") + 1] == "8" and "--enable-dp-attention" in argv
    assert s.dep.gpu_count == 8


def test_a_two_node_artifact_with_dp_attention_is_sixteen_gpus(tmp_path: Path, capsys):  # type: ignore[no-untyped-def]
    script = tmp_path / "serve.sh"
    script.write_text("python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 16 --dp 16 "
                      "--enable-dp-attention --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000\n")
    main(["check", str(script), "--machine", "preset:8xH200", "--json"])
    out = capsys.readouterr().out
    assert '"gpus_needed": 16' in out
    assert "needs 256" not in out


def test_require_fails_on_the_smaller_dp_attention_pool():
    # the DP-attention pool of one rank is what a request can use: a requirement above it fails
    need = Require(kv_tokens=400_000)
    plain = check_kv_pool(subject(replace(_sg("0.5.10", tp=8), require=need), H200, DSV3))
    dpa = check_kv_pool(subject(replace(_sg("0.5.10", tp=8, dp=8, launch=DP_ATTENTION), require=need), H200, DSV3))
    assert plain.status is Status.PASS and dpa.status is Status.FAIL


def test_dp_lm_head_replicates_the_lm_head_over_the_attention_dp_groups():
    # --enable-dp-lm-head (0.4.9+): ParallelLMHead(use_attn_tp_group=enable_dp_lm_head) splits the lm_head over
    # attn_tp = tp // dp ranks (models/deepseek_v2.py, qwen3_moe.py): at TP 8 / DP 8 every rank holds it whole
    dsv3 = DSV3
    lm_head_gib = 129280 * 7168 * 2 * (1 - 1 / 8) / 2**30   # whole minus the 1/8 it had at TP 8
    for version in ("0.4.9", "0.5.10", "0.5.23"):
        plain = facts_of(check_kv_pool(subject(_sg(version, tp=8, dp=8, launch=DP_ATTENTION), H200, dsv3)),
                         KvPoolFacts)
        head = facts_of(check_kv_pool(subject(_sg(version, tp=8, dp=8, launch=Launch(
            args=("--enable-dp-attention", "--enable-dp-lm-head"))), H200, dsv3)), KvPoolFacts)
        assert plain is not None and head is not None
        assert abs(head.weights_gib_per_rank - plain.weights_gib_per_rank - lm_head_gib) < 0.02, version
        assert head.predicted_kv_tokens < plain.predicted_kv_tokens


def test_dp_lm_head_by_model_type_and_release():
    from pytest_gpulayout.memory.weights import dp_lm_head_splits_over_attention as splits
    assert splits("deepseek_v3", "0.4.9") and splits("qwen3_moe", "0.5.23") and splits("llama", "0.5.10")
    assert not splits("qwen3", "0.5.6") and splits("qwen3", "0.5.8")      # qwen3.py reads the flag from 0.5.8
    assert not splits("gpt_oss", "0.4.10.post2") and splits("gpt_oss", "0.5.0rc0")
    assert not splits("deepseek_v3", "0.4.6")                            # no --enable-dp-lm-head before 0.4.9
    assert not splits("mistral", "0.5.23")
