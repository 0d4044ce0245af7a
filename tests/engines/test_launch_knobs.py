"""The static checks judge the engine the startup check launches: ``launch.args`` and ``launch.env``
change the prediction and the verdicts the way the engine's release does, and a flag the checks do
not model is named, never ignored."""

from __future__ import annotations

from dataclasses import replace

from builders import dep, machine, subject

from pytest_gpulayout.deployment import Launch
from pytest_gpulayout.findings import Status, facts_of
from pytest_gpulayout.host import Host
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.rules.balance import check_balance
from pytest_gpulayout.rules.kv_pool import KvPoolFacts, check_kv_pool

QWEN = load_model("Qwen/Qwen3-8B")


def _pool(d):  # type: ignore[no-untyped-def]
    f = check_kv_pool(subject(d, machine(2, name="NVIDIA H100 80GB HBM3", total=81559, free=81000), QWEN))
    facts = facts_of(f, KvPoolFacts)
    assert facts is not None
    return f, facts


def test_enforce_eager_drops_the_cuda_graph_reserve_of_vllm_0_20_plus():
    base = dep(tp=1, max_model_len=8192, engine_version="0.33.0")
    _, plain = _pool(base)
    f, eager = _pool(replace(base, launch=Launch(args=("--enforce-eager",))))
    assert eager.predicted_kv_tokens > plain.predicted_kv_tokens  # vllm 0.33 gpu_worker.py: no graph estimate
    assert "From the launch: enforce_eager" in f.message
    assert eager.launch_settings == ("enforce_eager",)


def test_kv_cache_memory_bytes_replaces_the_profiled_budget_from_0_10_2():
    gib = 1024 ** 3
    args = ("--kv-cache-memory-bytes", str(4 * gib))
    _, new = _pool(dep(tp=1, max_model_len=8192, engine_version="0.11.0", launch=Launch(args=args)))
    # 4 GiB / 147,456 B per token (Qwen3-8B bf16, 36 layers, 8 KV heads x 128), in 16-token blocks
    assert new.predicted_kv_tokens == 4 * gib // (147456 * 16) * 16
    f, old = _pool(dep(tp=1, max_model_len=8192, engine_version="0.10.1", launch=Launch(args=args)))
    assert old.predicted_kv_tokens != new.predicted_kv_tokens and "it came in 0.10.2" in f.message


def test_a_flag_the_checks_do_not_model_is_named():
    f, facts = _pool(dep(tp=1, max_model_len=8192, launch=Launch(args=("--kv-transfer-config", "{}",
                                                                       "--trust-remote-code"))))
    assert facts.not_modelled == ("--kv-transfer-config",)          # a neutral flag is not listed
    assert "Not modelled: --kv-transfer-config on the engine's command line" in f.message
    assert "startup check" in f.message


def test_max_num_batched_tokens_sizes_the_activation_reserve():
    base = dep(tp=1, max_model_len=8192, engine_version="0.33.0")
    _, small = _pool(replace(base, launch=Launch(args=("--max-num-batched-tokens=512", "--max-num-seqs", "16"))))
    _, plain = _pool(base)
    assert small.predicted_kv_tokens > plain.predicted_kv_tokens


def test_pp_partition_from_launch_env_moves_layers():
    base = dep(pp=2, max_model_len=8192, engine_version="0.33.0")
    _, even = _pool(base)
    _, uneven = _pool(replace(base, launch=Launch(env={"VLLM_PP_LAYER_PARTITION": "30,6"})))
    # the first stage holds 30 of 36 layers: its KV per token and weights grow, the pool shrinks
    assert uneven.kv_bytes_per_token_per_rank > even.kv_bytes_per_token_per_rank
    assert uneven.predicted_kv_tokens < even.predicted_kv_tokens


def _busy_pair():  # type: ignore[no-untyped-def]
    from pytest_gpulayout.machine.facts import Gpu, Machine

    gpus = (Gpu(0, name="NVIDIA L4", memory_total_mib=23034, memory_free_mib=22221),
            Gpu(1, name="NVIDIA L4", memory_total_mib=23034, memory_free_mib=18719))
    return Machine(gpus=gpus, links={(0, 1): "PHB"})


def test_sglang_balance_switch_in_launch_env_turns_the_failure_into_a_warning():
    d = dep(tp=2, engine="sglang", engine_version="0.5.23")
    strict = check_balance(subject(d, _busy_pair(), QWEN))
    assert strict.status is Status.FAIL
    assert "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0 in launch.env" in strict.message
    relaxed = check_balance(subject(replace(d, launch=Launch(env={"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK": "0"})),
                            _busy_pair(), QWEN))
    assert relaxed.status is Status.WARN and "turns that into a warning" in relaxed.message
    # the same switch exported on the host the engine is launched from counts too
    host = Host(env={"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK": "false"})
    assert check_balance(subject(d, _busy_pair(), QWEN, host)).status is Status.WARN
    # 0.4.3 has no switch at all
    old = check_balance(subject(replace(d, engine_version="0.4.3.post4",
                                launch=Launch(env={"SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK": "1"})), _busy_pair(), QWEN))
    assert old.status is Status.FAIL and "has no switch" in old.message


def test_heads_reports_the_pp_split_the_launch_sets():
    from pytest_gpulayout.findings import facts_of
    from pytest_gpulayout.rules.heads import HeadsFacts, check_heads

    d = dep(pp=2, max_model_len=8192, launch=Launch(env={"VLLM_PP_LAYER_PARTITION": "30,6"}))
    f = check_heads(subject(d, machine(2), QWEN))
    facts = facts_of(f, HeadsFacts)
    assert facts is not None and facts.pp_layer_split == (30, 6)
    assert "[30, 6]" in f.message


def test_sglang_dp_attention_is_modelled_not_named():
    # attention DP is modelled (tests/engines/test_sglang_dp_attention.py); a flag it does not model is still named
    f, facts = _pool(dep(tp=2, engine="sglang", max_model_len=8192,
                         launch=Launch(args=("--enable-dp-attention", "--enable-two-batch-overlap"))))
    assert facts.not_modelled == ("--enable-two-batch-overlap",)
    assert "--enable-dp-attention" not in f.message.split("Not modelled:")[1]
