"""The communicators' memory by the TP group's interconnect (``memory/communicators.py``) and where each
engine release pays for it: SGLang's ``pre`` (after ``init_torch_distributed``), vLLM's budget before
0.11 (snapshot before NCCL, ``v1/worker/gpu_worker.py`` 0.10.2) and not from 0.11 (snapshot after it)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from builders import cluster, dep, llama, machine, subject

from pytest_gpulayout.machine.facts import GIB, Machine
from pytest_gpulayout.memory.communicators import (
    NVLINK_COMMUNICATOR_GIB,
    OTHER_COMMUNICATOR_GIB,
    PCIE_PAIR_COMMUNICATOR_GIB,
    TpLink,
    communicator_gib,
    tp_link,
)

H100 = 81559


def h100s(n: int, link: str | None) -> Machine:
    m = machine(n, name="NVIDIA H100 80GB HBM3", total=H100, free=H100 - 500, link=link or "NV18")
    return m if link else replace(m, links={})


@pytest.mark.parametrize(("m", "groups", "want"), [
    (machine(4, link="NV18"), [[0, 1, 2, 3]], TpLink.NVLINK),
    (machine(4, link="PHB"), [[0, 1, 2, 3]], TpLink.PCIE),
    # one PCIe pair in a group is what NCCL's ring runs at
    (machine(4, link="NV4", links={(1, 2): "SYS"}), [[0, 1, 2, 3]], TpLink.PCIE),
    # TP 2 x PP 2: the PCIe pair (1, 2) joins the stages, not a TP group
    (machine(4, link="NV4", links={(1, 2): "SYS"}), [[0, 1], [2, 3]], TpLink.NVLINK),
    (h100s(2, None), [[0, 1]], TpLink.UNKNOWN),
    (cluster(2), [[6, 7, 8, 9]], TpLink.NETWORK),
])
def test_tp_link_is_the_slowest_class_inside_any_tp_group(m, groups, want):
    assert tp_link(m, groups) is want


def test_figures_by_class():
    assert communicator_gib(tp=1, world=1, link=TpLink.NVLINK) == 0.0
    assert communicator_gib(tp=4, world=4, link=TpLink.NVLINK) == NVLINK_COMMUNICATOR_GIB
    assert communicator_gib(tp=4, world=4, link=TpLink.UNKNOWN) == NVLINK_COMMUNICATOR_GIB  # never promise more
    assert communicator_gib(tp=2, world=2, link=TpLink.PCIE) == PCIE_PAIR_COMMUNICATOR_GIB  # custom all-reduce on
    assert communicator_gib(tp=4, world=4, link=TpLink.PCIE) == OTHER_COMMUNICATOR_GIB     # ... off past two
    assert communicator_gib(tp=2, world=2, link=TpLink.NETWORK) == OTHER_COMMUNICATOR_GIB
    assert communicator_gib(tp=1, world=2, link=TpLink.NVLINK) == OTHER_COMMUNICATOR_GIB   # PP only


def test_sglang_pool_over_nvlink_is_smaller_by_the_fraction_of_the_communicators():
    """SGLang subtracts the communicators with ``pre`` (``model_runner.init_torch_distributed``), and
    the pool is ``pre x fraction - weights``: over NVLink it loses ``0.9 x (1.25 - 0.16)`` GiB per GPU."""
    d = dep(tp=4, engine="sglang", engine_version="0.5.23", memory_fraction=0.9, max_model_len=8192)
    model = llama()
    nv, pcie, unknown = (subject(d, h100s(4, link), model).replicas[0] for link in ("NV18", "PHB", None))
    per_token = nv.kv_bytes_per_token_per_rank
    lost = (pcie.kv_tokens - nv.kv_tokens) * per_token / GIB
    assert lost == pytest.approx(0.9 * (NVLINK_COMMUNICATOR_GIB - OTHER_COMMUNICATOR_GIB), abs=0.01)
    assert unknown.kv_tokens == nv.kv_tokens
    assert any("communicators over NVLink: 1.25 GiB per GPU" in n for n in nv.notes)
    assert any("communicators over PCIe: 0.16 GiB per GPU" in n for n in pcie.notes)
    assert any("does not give this TP group's links" in n for n in unknown.notes)


@pytest.mark.parametrize(("version", "nvlink_costs_gib"), [
    ("0.10.2", NVLINK_COMMUNICATOR_GIB - 0.25),   # counted as non-torch memory since the snapshot
    ("0.11.0", 0.0),                               # the snapshot is taken after NCCL: not in the budget
])
def test_vllm_pays_for_nvlink_communicators_in_its_budget_only_before_0_11(version, nvlink_costs_gib):
    d = dep(tp=2, engine_version=version, memory_fraction=0.9, max_model_len=8192)
    model = llama()
    nv, pcie = (subject(d, h100s(2, link), model).replicas[0] for link in ("NV18", "PHB"))
    assert (pcie.kv_budget_bytes_per_rank - nv.kv_budget_bytes_per_rank) / GIB == pytest.approx(
        nvlink_costs_gib, abs=0.001)
