"""Links policy: NVLink passes, PCIe warns and suggests PP, SYS and NET warn louder (the engines start
them), require.tp_links overrides (and is the only way to a fail)."""

from __future__ import annotations

import pytest
from builders import dep, llama, machine, subject

from pytest_gpulayout.deployment import Launch, Require
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
                                         ("PXB", Status.WARN), ("NODE", Status.WARN), ("SYS", Status.WARN)])
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
    assert f.status is Status.WARN
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


def test_tp_across_sockets_warns_loudly_and_require_tp_links_can_fail_it():
    """Issue 19 item 6: vLLM and SGLang start TP over SYS (no check in either refuses it), so ``check``
    warns, as ``plan`` ranks it "starts, slow"; a team's ``require.tp_links`` still fails it."""
    f = check_links(subject(dep(tp=2), machine(2, link="SYS"), llama()))
    assert f.status is Status.WARN
    assert "CPU socket interconnect" in f.message and "fraction of the throughput" in f.message
    assert "require.tp_links: [SYS] accepts it" in f.message
    strict = Require(tp_links=("NODE",))
    f = check_links(subject(dep(tp=2, require=strict), machine(2, link="SYS"), llama()))
    assert f.status is Status.FAIL and "does not accept" in f.message


def test_tp_across_hosts_is_net_and_warns_without_node_facts():
    gpus = (Gpu(0, host="a", memory_total_mib=1, memory_free_mib=1), Gpu(1, host="b", memory_total_mib=1,
                                                                          memory_free_mib=1))
    f = check_links(subject(dep(tp=2), Machine(gpus=gpus, links={(0, 1): "SYS"}), llama()))
    assert f.status is Status.WARN and f.data["worst_link"] == "NET" and f.data["transport"] == "unknown"
    assert "no node facts for a, b" in f.message and "TCP sockets otherwise" in f.message
    off = check_links(subject(dep(tp=2, launch=Launch(env={"NCCL_IB_DISABLE": "1"})),
                              Machine(gpus=gpus, links={(0, 1): "SYS"}), llama()))
    assert off.data["transport"] == "socket" and "NCCL_IB_DISABLE=1 in launch.env" in off.message


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


# -- MoE traffic under DP and EP (issue 19 item 7) -------------------------------------------------------
# vLLM 0.33 ``model_executor/layers/fused_moe/config.py`` ``FusedMoEParallelConfig.make`` flattens TP across
# DP (``flatten_tp_across_dp_and_pcp``): a MoE layer spans all TP x DP ranks, and every MoE layer all-gathers
# the tokens and reduce-scatters the results across them (``distributed/device_communicators/all2all.py``
# ``AgRsAll2AllManager``, the default ``all2all_backend``), or runs an all-to-all with an EP backend.
# SGLang 0.5.23's EP is inside the TP group (``ep_size = tp_size``): its DP replicas exchange nothing.

def _moe(**kw: object):
    return llama(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=1024, **kw)


def test_vllm_dp_of_a_moe_is_judged_like_tp_over_pcie():
    f = check_links(subject(dep(dp=2), machine(2, link="PHB"), _moe()))
    assert f.status is Status.WARN and f.data["worst_link"] == "PHB"
    assert f.data["moe_groups"] == [[0, 1]]
    assert "MoE group (DP=2 x TP=1) GPU0-GPU1 is joined by PHB" in f.message
    assert "all-gather / reduce-scatter" in f.message and "independent engines" in f.message


def test_vllm_dp_of_a_moe_with_ep_names_the_all_to_all_and_spans_the_replicas():
    links = {(0, 1): "NV4", (2, 3): "NV4", (0, 2): "SYS", (0, 3): "SYS", (1, 2): "SYS", (1, 3): "SYS"}
    f = check_links(subject(dep(tp=2, dp=2, enable_expert_parallel=True), machine(4, links=links), _moe()))
    # each TP group is on NVLink, but the MoE group of the two replicas crosses the sockets
    assert f.status is Status.WARN and f.data["worst_link"] == "SYS"
    assert f.data["moe_groups"] == [[0, 1, 2, 3]]
    assert "all-to-all (expert parallel over 4 ranks)" in f.message
    nv = Require(tp_links=("NV",))
    f = check_links(subject(dep(tp=2, dp=2, enable_expert_parallel=True, require=nv), machine(4, links=links), _moe()))
    assert f.status is Status.FAIL and "does not accept" in f.message


def test_vllm_dp_of_a_moe_across_hosts_is_net():
    gpus = (Gpu(0, host="a", memory_total_mib=1, memory_free_mib=1), Gpu(1, host="b", memory_total_mib=1,
                                                                          memory_free_mib=1))
    f = check_links(subject(dep(dp=2), Machine(gpus=gpus, links={(0, 1): "SYS"}), _moe()))
    assert f.status is Status.WARN and f.data["worst_link"] == "NET"


def test_dp_of_a_dense_model_and_sglang_dp_of_a_moe_carry_no_model_traffic():
    assert check_links(subject(dep(dp=2), machine(2, link="SYS"), llama())).status is Status.SKIP
    sglang = check_links(subject(dep(dp=2, engine="sglang", enable_expert_parallel=True), machine(2, link="SYS"),
                                 _moe()))
    assert sglang.status is Status.SKIP and "moe_groups" not in sglang.data
