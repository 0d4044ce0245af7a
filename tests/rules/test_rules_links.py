"""Links policy: NVLink passes, PCIe warns and suggests PP, SYS/NET fail, require.tp_links overrides."""

from __future__ import annotations

import pytest
from builders import dep, llama, machine, subject

from pytest_gpulayout.deployment import Require
from pytest_gpulayout.findings import Status
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.rules.links import check_links


def test_two_l4_phb_warns_and_suggests_pp2():
    f = check_links(subject(dep("qwen3-8b-tp2", tp=2), machine(2, link="PHB"), llama()))
    assert f.status is Status.WARN
    assert f.data["worst_link"] == "PHB"
    assert "TP group GPU0-GPU1 is joined by PHB" in f.message
    assert "pipeline_parallel_size: 2" in f.message
    assert "require.tp_links: [PHB]" in f.message


@pytest.mark.parametrize("kind,status", [("NV12", Status.PASS), ("NV1", Status.PASS), ("PIX", Status.WARN),
                                         ("PXB", Status.WARN), ("NODE", Status.WARN), ("SYS", Status.FAIL)])
def test_default_policy(kind, status):
    assert check_links(subject(dep(tp=2), machine(2, link=kind), llama())).status is status


def test_pp_across_sys_is_fine():
    f = check_links(subject(dep(pp=2), machine(2, link="SYS"), llama()))
    assert f.status is Status.PASS
    assert "SYS" in f.message and "stage" in f.message


def test_tp1_dp_only_uses_no_links():
    f = check_links(subject(dep(dp=2), machine(2, link="SYS"), llama()))
    assert f.status is Status.SKIP


def test_worst_link_in_a_4_gpu_group_across_sockets_and_island_suggestion():
    # two NVLink pairs on two sockets: TP=4 crosses SYS; TP=2 x PP=2 keeps TP inside NVLink
    links = {(0, 1): "NV4", (2, 3): "NV4", (0, 2): "SYS", (0, 3): "SYS", (1, 2): "SYS", (1, 3): "SYS"}
    f = check_links(subject(dep(tp=4), machine(4, links=links), llama()))
    assert f.status is Status.FAIL
    assert f.data["worst_link"] == "SYS"
    assert "tensor_parallel_size: 2, pipeline_parallel_size: 2" in f.message


def test_require_tp_links_accepts_listed_and_faster_kinds():
    accept_phb = Require(tp_links=("PHB",))
    assert check_links(subject(dep(tp=2, require=accept_phb), machine(2, link="PHB"), llama())).status is Status.PASS
    assert check_links(subject(dep(tp=2, require=accept_phb), machine(2, link="PIX"), llama())).status is Status.PASS
    assert check_links(subject(dep(tp=2, require=accept_phb), machine(2, link="NV8"), llama())).status is Status.PASS
    f = check_links(subject(dep(tp=2, require=accept_phb), machine(2, link="SYS"), llama()))
    assert f.status is Status.FAIL and "does not accept" in f.message
    nvlink_only = Require(tp_links=("NV",))
    assert check_links(subject(dep(tp=2, require=nvlink_only), machine(2, link="NV18"), llama())).status is Status.PASS
    assert check_links(subject(dep(tp=2, require=nvlink_only), machine(2, link="PIX"), llama())).status is Status.FAIL


def test_tp_across_hosts_is_net_and_fails():
    gpus = (Gpu(0, host="a", memory_total_mib=1, memory_free_mib=1), Gpu(1, host="b", memory_total_mib=1,
                                                                          memory_free_mib=1))
    f = check_links(subject(dep(tp=2), Machine(gpus=gpus, links={(0, 1): "SYS"}), llama()))
    assert f.status is Status.FAIL and f.data["worst_link"] == "NET"


def test_unknown_link_is_never_a_pass():
    m = Machine(gpus=(Gpu(0), Gpu(1)), links={})
    f = check_links(subject(dep(tp=2), m, llama()))
    assert f.status is Status.WARN
    assert "does not say how" in f.message


def test_uses_the_deployments_gpus():
    links = {(0, 1): "SYS", (0, 2): "SYS", (1, 2): "PHB"}
    m = machine(3, links=links)
    assert check_links(subject(dep(tp=2), m, llama())).data["worst_link"] == "SYS"
    assert check_links(subject(dep(tp=2, gpus=(1, 2)), m, llama())).data["worst_link"] == "PHB"
