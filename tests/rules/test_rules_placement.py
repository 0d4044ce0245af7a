"""Placement: enough GPUs, existing GPUs, other tenants, MIG, mixed models in a TP group."""

from __future__ import annotations

from builders import dep, llama, machine, subject

from pytest_gpulayout.findings import Status
from pytest_gpulayout.machine.facts import GpuProcess
from pytest_gpulayout.placement import place
from pytest_gpulayout.rules.placement import check_placement


def test_whole_idle_gpus_pass():
    f = check_placement(subject(dep(tp=2), machine(2), llama()))
    assert f.status is Status.PASS and f.data["gpus"] == [0, 1]


def test_too_few_gpus_fails_naming_the_count():
    f = check_placement(subject(dep(tp=2, dp=2), machine(2), llama()))
    assert f.status is Status.FAIL
    assert "needs 4 GPUs" in f.message and "shows 2" in f.message


def test_listed_gpu_missing_fails():
    f = check_placement(subject(dep(tp=2, gpus=(0, 5)), machine(2), llama()))
    assert f.status is Status.FAIL and "5" in f.message


def test_gpu_by_uuid_prefix():
    m = machine(2)
    f = check_placement(subject(dep(tp=2, gpus=(m.gpus[1].uuid[:12], 0)), m, llama()))
    assert f.status is Status.PASS and f.data["gpus"] == [1, 0]


def test_other_tenants_warn_with_pid_and_memory():
    m = machine(2, processes={1: [GpuProcess(4242, "python3", 3502)]})
    f = check_placement(subject(dep(tp=2), m, llama()))
    assert f.status is Status.WARN
    assert "python3 4242 (3.42 GiB)" in f.message


def test_mig_slices_fail_for_tp_and_warn_alone():
    m = machine(2, mig=(0, 1))
    assert check_placement(subject(dep(tp=2), m, llama())).status is Status.FAIL
    single = check_placement(subject(dep(), m, llama()))
    assert single.status is Status.WARN and "MIG" in single.message


def test_mixed_models_in_a_tp_group_warn_and_suggest_uneven_pp():
    m = machine(2, names=["NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB"])
    f = check_placement(subject(dep(tp=2), m, llama()))
    assert f.status is Status.WARN and "smallest card" in f.message and "PP" in f.message


def test_rank_order_matches_engines():
    # replica d, stage s, tp rank r -> visible device d*tp*pp + s*tp + r
    p = place(dep(tp=2, pp=2, dp=2), machine(8))
    assert p.replicas == (((0, 1), (2, 3)), ((4, 5), (6, 7)))
    assert p.stage_boundaries() == ((0, 2), (1, 3), (4, 6), (5, 7))
    # with an explicit list, position k in gpus is CUDA device k
    q = place(dep(tp=2, gpus=(3, 1)), machine(4))
    assert q.replicas == (((3, 1),),)


def test_topo_text_cannot_vouch_for_whole_gpus():
    m = machine(2, source="topo:paste.txt")
    f = check_placement(subject(dep(tp=2), m, llama()))
    assert f.status is Status.WARN and "unknown" in f.message and "no other tenants" not in f.message
