"""What the communicators take on every GPU of a multi-GPU instance, by the interconnect of its TP group.

NCCL sizes its buffers by the channels it opens, and it opens many more over NVLink than over PCIe
(NVIDIA/nccl#986: "memory usage is linearly tied to the number of channels"); both engines add their
own custom all-reduce buffers where the GPUs can reach each other's memory. The engines measure free
memory around this, so where it falls decides what it costs (the callers cite the engine code):

* SGLang measures ``pre`` after ``init_torch_distributed`` (``model_executor/model_runner.py``), so
  the communicators come out of ``pre`` and the pool loses ``mem_fraction_static`` x their size.
* vLLM before 0.11 takes its memory snapshot before ``init_worker_distributed_environment``
  (``v1/worker/gpu_worker.py`` 0.9.1-0.10.2), so the profile counts them as a non-torch increase;
  from 0.11 the snapshot comes after ("Now take memory snapshot after NCCL is initialized"), so
  they leave the budget alone but lower the free memory its start-up check compares.

The figures are SGLang's own "Init torch distributed ends. mem usage=X GB" lines, which measure
exactly this step (0.00 GB at TP 1), in public startup logs:

* NVLink (NVSwitch boards), plain TP: 1.13 GB (TP 4, 94 GB-class GPUs, sgl-project/sglang#10407),
  1.25 GB (H100 HGX, TP 8, SGLang 0.5.2, a Grok-2 deployment write-up), 1.77-2.01 GB (141 GB-class
  GPUs, TP 8, sgl-project/sglang#11716): the median, 1.25.
  DP-attention runs take more (1.81-2.50 GB, sgl-project/sglang#6017 and #5390) and are not
  distinguished here (``--enable-dp-attention`` is named as not modelled).
* Two GPUs over PCIe, where both engines' custom all-reduce still runs (``custom_all_reduce.py``
  refuses "more than two PCIe-only GPUs"): 0.19, 0.23 and 0.26 GB (2 x RTX 4090,
  sgl-project/sglang#16920, kvcache-ai/ktransformers#1661): the median, 0.23.
* More PCIe GPUs (custom all-reduce off), TP across hosts, and pipeline stages alone: 0.10
  (4 x 2080 Ti, sgl-project/sglang#5942), 0.13 (4 x L4, the run of tests/data/logs/sglang/013.txt),
  0.19 (4 x RTX 6000 Ada, #7212), 0.39 GB (4 x sm_120, NCCL 2.29, #40558): the median, 0.16. Across
  hosts 0.22-0.58 GB (#3888, #5347) and PP alone 0.16 GB are counted the same.

A TP group whose links the machine source does not give is counted as NVLink, the larger figure:
an unknown interconnect must not promise memory the engine will not have.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from enum import Enum

from pytest_gpulayout.machine.facts import Machine, is_nvlink

#: Per GPU, NCCL and custom all-reduce over an NVLink TP group (median of plain-TP startup logs).
NVLINK_COMMUNICATOR_GIB = 1.25
#: Per GPU, a TP pair over PCIe: few channels, plus the custom all-reduce buffers.
PCIE_PAIR_COMMUNICATOR_GIB = 0.23
#: Per GPU otherwise: custom all-reduce is off past two PCIe GPUs and across hosts, few channels.
OTHER_COMMUNICATOR_GIB = 0.16


class TpLink(Enum):
    """The interconnect of a TP group, as it decides the communicators' size."""

    NVLINK = "NVLink"
    PCIE = "PCIe"
    NETWORK = "the network between hosts"
    UNKNOWN = "unknown links"


def tp_link(machine: Machine, groups: Iterable[Sequence[int]]) -> TpLink:
    """The slowest interconnect class inside any of the TP ``groups`` (a replica's stages,
    ``Placement.replicas[d]``): ``NETWORK`` where a group spans hosts, else ``PCIE`` where one pair
    is not NVLink, else ``UNKNOWN`` where a pair's link is not given."""
    seen: set[TpLink] = set()
    for group in groups:
        for a, b in itertools.combinations(group, 2):
            kind = machine.effective_link(a, b)
            seen.add(TpLink.UNKNOWN if kind is None else TpLink.NETWORK if kind == "NET"
                     else TpLink.NVLINK if is_nvlink(kind) else TpLink.PCIE)
    for worst in (TpLink.NETWORK, TpLink.PCIE, TpLink.UNKNOWN, TpLink.NVLINK):
        if worst in seen:
            return worst
    return TpLink.PCIE  # one GPU per group: no TP traffic at all


def over_nvlink(tp: int, link: TpLink) -> bool:
    """Whether a TP group is counted as talking over NVLink (unknown links are: the larger figure)."""
    return tp > 1 and link in (TpLink.NVLINK, TpLink.UNKNOWN)


def communicator_gib(*, tp: int, world: int, link: TpLink) -> float:
    """Per GPU: nothing for one GPU; the NVLink figure for a TP group over NVLink (or unknown
    links); the pair figure for TP 2 over PCIe; otherwise the small figure (more PCIe GPUs, a TP
    group across hosts, pipeline stages that only send and receive)."""
    if world <= 1:
        return 0.0
    if over_nvlink(tp, link):
        return NVLINK_COMMUNICATOR_GIB
    if tp == 2 and link is TpLink.PCIE:
        return PCIE_PAIR_COMMUNICATOR_GIB
    return OTHER_COMMUNICATOR_GIB


def describe(*, tp: int, world: int, link: TpLink) -> str:
    """One clause for the notes: which figure was used and why."""
    gib = communicator_gib(tp=tp, world=world, link=link)
    if link is TpLink.UNKNOWN and tp > 1:
        return (f"the machine source does not give this TP group's links, so its communicators are counted "
                f"as over NVLink ({gib:.2f} GiB per GPU, the larger figure)")
    return f"communicators over {link.value}: {gib:.2f} GiB per GPU"
