"""Balance: SGLang's min >= 0.9 x max rule over the TP x PP world, vLLM's utilization rule per rank."""

from __future__ import annotations

from dataclasses import replace

import pytest
from builders import dep, llama, machine, subject

from pytest_gpulayout.deployment import Require
from pytest_gpulayout.findings import Status
from pytest_gpulayout.rules.balance import check_balance


def busy_l4():
    # reference scenario 1: 21.70 GiB free on GPU0, 18.28 GiB on GPU1
    return machine(2, free=[22221, 18719])


def test_reference_scenario_sglang_tp2_fails_by_1_25_gib():
    f = check_balance(subject(dep("qwen3-8b-sglang-tp2", tp=2, engine="sglang"), busy_l4(), llama()))
    assert f.status is Status.FAIL
    assert f.data["headroom_gib"] == pytest.approx(-1.25, abs=0.005)
    assert f.data["min_free_gib"] == 18.28 and f.data["max_free_gib"] == 21.7
    assert "short by 1.25 GiB" in f.message
    assert "The memory capacity is unbalanced" in f.message
    assert "GPU1" in f.message


def test_sglang_thin_headroom_warns_against_margin():
    # 20.0 vs 21.7 GiB: headroom 0.47 < default 1 GiB margin
    m = machine(2, free=[22221, 20480])
    f = check_balance(subject(dep(tp=2, engine="sglang"), m, llama()))
    assert f.status is Status.WARN and "below the 1 GiB margin" in f.message
    relaxed = check_balance(subject(dep(tp=2, engine="sglang", require=Require(balance_headroom_gib=0.25)), m, llama()))
    assert relaxed.status is Status.PASS


def test_sglang_tp1_has_no_balance_rule():
    f = check_balance(subject(dep(engine="sglang"), busy_l4(), llama()))
    assert f.status is Status.SKIP
    assert f.data["headroom_gib"] is None


def test_sglang_pp_ranks_are_in_the_same_world():
    # TP=2 x PP=2: GPU3 busy -> the whole world's min drops
    m = machine(4, free=[22221, 22221, 22221, 15000])
    f = check_balance(subject(dep(tp=2, pp=2, engine="sglang"), m, llama()))
    assert f.status is Status.FAIL and "GPU3" in f.message


def test_sglang_dp_replicas_are_separate_worlds():
    # replica 0 on GPU0-1 balanced, replica 1 on GPU2-3 balanced, but the replicas differ: no failure
    m = machine(4, free=[22221, 22221, 16000, 16000])
    f = check_balance(subject(dep(tp=2, dp=2, engine="sglang"), m, llama()))
    assert f.status is not Status.FAIL


def test_vllm_free_below_utilization_fails_and_suggests_a_fraction():
    f = check_balance(subject(dep(tp=2, memory_fraction=0.9), busy_l4(), llama()))
    assert f.status is Status.FAIL
    assert "vLLM refuses to start" in f.message and "GPU1" in f.message
    # of the total CUDA reports (22.49 GiB from NVML less ~0.44 GiB the driver reserves), less what vLLM
    # holds when it compares (0.5 GiB of context, and from 0.11 a PCIe pair's 0.23 GiB of communicators):
    # (18.28 - 0.73) / 22.05
    assert "x 22.05 GiB (the total CUDA reports: 22.49 less ~0.44 GiB the driver reserves)" in f.message
    assert "memory_fraction: 0.79" in f.message
    ok = check_balance(subject(dep(tp=2, memory_fraction=0.75), busy_l4(), llama()))
    assert ok.status is Status.PASS


def test_vllm_default_fraction_by_version():
    # 22221/23034 = 0.9647 free: passes 0.9 and 0.92 with room
    m = machine(2)
    new = check_balance(subject(dep(tp=2, engine_version="0.33.0"), m, llama()))
    assert new.data["gpu_memory_utilization"] == 0.92
    old = check_balance(subject(dep(tp=2, engine_version="0.11.0"), m, llama()))
    assert old.data["gpu_memory_utilization"] == 0.9


def test_memory_unknown_warns_never_passes():
    m = machine(2, total=None, free=None)
    f = check_balance(subject(dep(tp=2, engine="sglang"), m, llama()))
    assert f.status is Status.WARN and "NOT checked" in f.message and "GPU0, GPU1" in f.message


def test_vllm_before_0_10_has_no_free_memory_rule():
    # vLLM 0.8.5 sizes the pool around other tenants instead of refusing (the check came in 0.10)
    old = check_balance(subject(dep(tp=2, memory_fraction=0.9, engine_version="0.8.5"), busy_l4(), llama()))
    assert old.status is Status.PASS and "no free-memory start-up check" in old.message
    new = check_balance(subject(dep(tp=2, memory_fraction=0.9, engine_version="0.10.0"), busy_l4(), llama()))
    assert new.status is Status.FAIL
    # the check came in 0.9.1 (vllm 0.9.1 v1/worker/gpu_worker.py), not 0.10: a busy GPU fails there too
    first = check_balance(subject(dep(tp=2, memory_fraction=0.9, engine_version="0.9.1"), busy_l4(), llama()))
    assert first.status is Status.FAIL and "Free memory on device" in first.message
    assert check_balance(subject(dep(tp=2, memory_fraction=0.9, engine_version="0.9.0"), busy_l4(), llama())).status \
        is Status.PASS


def test_sglang_mixed_card_sizes_cannot_be_fixed_by_freeing_memory():
    from pytest_gpulayout.machine.facts import Gpu, Machine

    gpus = (Gpu(0, name="NVIDIA L4", memory_total_mib=23034, memory_free_mib=22221),
            Gpu(1, name="NVIDIA A100-SXM4-80GB", memory_total_mib=81920, memory_free_mib=81158))
    f = check_balance(subject(dep(tp=2, engine="sglang"), Machine(gpus=gpus, links={(0, 1): "PHB"}), llama()))
    assert f.status is Status.FAIL
    assert "no cleanup makes it pass" in f.message and "do not mix card sizes" in f.message
    assert "Free " not in f.message


def test_vllm_advice_names_idle_gpus_not_a_fraction_that_cannot_hold_the_weights():
    # 8 x H100, Llama 3.1 70B at TP=4 on GPUs 0-3, GPU3 runs another tenant (60 GiB): the fraction that
    # passes vLLM's start-up check on GPU3 (~0.24) cannot hold ~33 GiB of weights per GPU; GPUs 4-7 are idle
    from pytest_gpulayout.machine.facts import GpuProcess
    from pytest_gpulayout.model.load import load_model

    m = machine(8, name="NVIDIA H100 80GB HBM3", total=81559, free=[81000] * 3 + [20000] + [81000] * 4,
                link="NV18", processes={3: [GpuProcess(pid=4242, name="python3", used_mib=61000)]})
    f = check_balance(subject(dep(tp=4, gpus=(0, 1, 2, 3), engine_version="0.33.0"), m,
                      load_model("meta-llama/Llama-3.1-70B-Instruct")))
    assert f.status is Status.FAIL
    assert "GPU4, GPU5, GPU6, GPU7 are idle: set gpus: [0, 1, 2, 4]" in f.message
    assert "cannot serve" in f.message and "set memory_fraction: 0.2" not in f.message


@pytest.mark.parametrize(("version", "link", "status"), [
    ("0.10.2", "NV18", Status.PASS),   # snapshot before NCCL: only the CUDA context is held at the check
    ("0.11.0", "NV18", Status.WARN),   # after NCCL: ~1.25 GiB of communicators over NVLink join the context
    ("0.11.0", "PHB", Status.PASS),    # a PCIe pair's communicators are small
])
def test_vllm_free_check_counts_communicators_from_0_11_by_interconnect(version, link, status):
    """H100s with 1.2 GiB to spare over gpu_memory_utilization x total: enough for vLLM 0.10's check
    (taken before NCCL is set up) and for a PCIe pair's 0.23 GiB from 0.11, but not for the 0.5 GiB
    of context plus 1.25 GiB of NVLink communicators 0.11 holds when it compares."""
    total, reserved = 81559, 500
    free = round(0.9 * (total - reserved) + 1.2 * 1024)
    m = machine(2, name="NVIDIA H100 80GB HBM3", total=total, free=free, link=link)
    f = check_balance(subject(dep(tp=2, memory_fraction=0.9, engine_version=version), m, llama()))
    assert f.status is status, f.message
    if status is Status.WARN:
        assert "communicators (~1.25 GiB per GPU, NVLink)" in f.message and "1.16 GiB to spare" in f.message


def test_vllm_free_check_with_replicas_on_different_links_of_the_same_cost():
    """DP 2 at TP 4: one replica over PCIe, the other across hosts. Both cost 0.16 GiB of
    communicators; the margin takes that once (it used to raise comparing the two link kinds)."""
    m = machine(8, link="PHB")
    m = replace(m, gpus=tuple(replace(g, host="a" if g.index < 6 else "b") for g in m.gpus))
    f = check_balance(subject(dep(tp=4, dp=2, memory_fraction=0.9, engine_version="0.33.0"), m, llama()))
    assert f.status is Status.PASS, f.message
