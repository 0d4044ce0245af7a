"""The machine as the checks see it: GPUs (as CUDA will number them) and the link between every pair.

Every source (live NVML probe, snapshot file, preset, pasted ``nvidia-smi topo -m`` text) produces
this same frozen object, so checks never know or care where the facts came from. Memory is in MiB,
as NVML reports it; ``None`` means unknown (e.g. from topo text) and is never replaced by a guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_gpulayout.machine.nodes import NodeFacts
    from pytest_gpulayout.machine.stand_in import StandIn

MIB = 1024 * 1024
GIB = 1024 * MIB
#: MiB in a GiB (NVML reports MiB; the engines' size tiers are in GiB).
GIB_MIB = 1024

#: Link kinds, fastest first, in ``nvidia-smi topo -m`` vocabulary. ``NV<n>`` stands for any NVLink
#: bond (NVSwitch systems report ``NV<n>`` for every pair); ``NET`` crosses hosts.
PCIE_KINDS = ("PIX", "PXB", "PHB", "NODE", "SYS")
LINK_KINDS = ("NV", *PCIE_KINDS, "NET")

LINK_DESCRIPTIONS = {
    "NV": "NVLink",
    "PIX": "PCIe through at most one PCIe switch",
    "PXB": "PCIe through several PCIe switches",
    "PHB": "PCIe through the CPU host bridge",
    "NODE": "PCIe across host bridges inside one NUMA node",
    "SYS": "PCIe plus the CPU socket interconnect (QPI/UPI)",
    "NET": "the network between hosts",
}

_NV_RE = re.compile(r"^NV(\d+)$")
_ALIASES = {"SOC": "SYS", "X": "X"}


def normalize_link(kind: str) -> str:
    """Canonical spelling of a link kind: upper case, old ``SOC`` -> ``SYS``, ``NV#`` kept with its count.

    Raises ``ValueError`` for anything that is not a link kind, ``NV0`` included: a bond of zero
    NVLinks is no NVLink at all, and accepting it would rank a PCIe pair as the fastest link there is.
    """
    k = kind.strip().upper()
    k = _ALIASES.get(k, k)
    if k in PCIE_KINDS or k == "NET":
        return k
    m = _NV_RE.match(k)
    if m:
        if int(m.group(1)) == 0:
            raise ValueError(f"{kind.strip()} means no NVLink (zero links), so it is not a link kind: give the "
                             f"pair's PCIe kind (PIX, PXB, PHB, NODE or SYS)")
        return f"NV{int(m.group(1))}"
    raise ValueError(f"unknown link kind {kind!r} (expected NV<n>, PIX, PXB, PHB, NODE, SYS or NET)")


def link_family(kind: str) -> str:
    """``NV12`` -> ``NV``; PCIe kinds and ``NET`` are their own family."""
    return "NV" if _NV_RE.match(kind) else kind


def nvlink_count(kind: str) -> int:
    m = _NV_RE.match(kind)
    return int(m.group(1)) if m else 0


def is_nvlink(kind: str) -> bool:
    return bool(_NV_RE.match(kind))


def link_rank(kind: str) -> tuple[int, int]:
    """Sort key, fastest first: NVLink by descending link count, then PIX ... SYS, NET."""
    fam = link_family(kind)
    return (LINK_KINDS.index(fam), -nvlink_count(kind))


def slowest(kinds: Iterable[str]) -> str | None:
    kinds = list(kinds)
    return max(kinds, key=link_rank) if kinds else None


def describe_link(kind: str) -> str:
    fam = link_family(kind)
    if fam == "NV":
        return f"NVLink ({nvlink_count(kind)} links)"
    return LINK_DESCRIPTIONS[fam]


@dataclass(frozen=True)
class GpuProcess:
    """A compute process of another tenant on a GPU (host PID; NVML may not know its memory)."""

    pid: int
    name: str = ""
    used_mib: int | None = None


#: The driver's reservation where NVML did not report it: the gap between NVML's total and the
#: total CUDA reports in public startup logs. vllm/001 (RTX 3090): 24,576 MiB against
#: ``total_gpu_memory=23.58GiB`` (24,146 MiB), 430 MiB; vllm/023 (RTX 4090): 24,564 MiB against
#: ``total_gpu_memory (23.55GiB)`` in the reporter's quote (vllm-project/vllm#13061), 449 MiB.
DRIVER_RESERVE_ESTIMATE_MIB = 450


@dataclass(frozen=True)
class Gpu:
    """One GPU as CUDA will number it inside the engine (``index``)."""

    index: int
    uuid: str = ""
    name: str = ""
    pci_bus_id: str | None = None
    memory_total_mib: int | None = None
    memory_free_mib: int | None = None
    numa_node: int | None = None
    mig: bool = False
    processes: tuple[GpuProcess, ...] = ()
    host: str | None = None
    #: What the driver keeps for itself (NVML's v2 memory struct); None where it was not read. Last,
    #: so positional construction keeps its meaning.
    memory_reserved_mib: int | None = None
    #: CUDA compute capability ``(major, minor)`` (NVML ``nvmlDeviceGetCudaComputeCapability``, a snapshot's
    #: ``compute_capability``, or the GPU's name: ``machine/capability.py``); None where nothing said it
    compute_capability: tuple[int, int] | None = None

    @property
    def label(self) -> str:
        return f"GPU{self.index}"

    @property
    def total_gib(self) -> float | None:
        return None if self.memory_total_mib is None else self.memory_total_mib / 1024

    @property
    def driver_reserve_mib(self) -> int | None:
        """The driver's reservation: as NVML's v2 struct read it, else ``DRIVER_RESERVE_ESTIMATE_MIB``
        (at most 1/16 of a small GPU). None when the total is unknown."""
        if self.memory_total_mib is None:
            return None
        if self.memory_reserved_mib is not None:
            return self.memory_reserved_mib
        return min(DRIVER_RESERVE_ESTIMATE_MIB, self.memory_total_mib // 16)

    @property
    def cuda_total_mib(self) -> int | None:
        """The total a CUDA context reports (``cudaMemGetInfo``, ``torch.cuda.mem_get_info()[1]``):
        NVML's total less the driver's reservation (``driver_reserve_mib``). vLLM multiplies *this*
        by ``gpu_memory_utilization``."""
        reserve = self.driver_reserve_mib
        return None if self.memory_total_mib is None or reserve is None else self.memory_total_mib - reserve

    @property
    def free_gib(self) -> float | None:
        return None if self.memory_free_mib is None else self.memory_free_mib / 1024

    @property
    def foreign_used_mib(self) -> int | None:
        """Memory other tenants hold, as NVML reports it (None where NVML did not say)."""
        known = [p.used_mib for p in self.processes if p.used_mib is not None]
        return sum(known) if known else None


def _pair(i: int, j: int) -> tuple[int, int]:
    return (i, j) if i <= j else (j, i)


@dataclass(frozen=True)
class Machine:
    """GPUs plus the link kind of every pair (keys ``(i, j)`` with ``i < j``).

    ``source`` says where the facts came from (``nvml``, ``snapshot:path``, ``preset:name``,
    ``topo:path``), so every report can say what it looked at. ``notes`` are caveats the source
    found while reading the machine (e.g. CUDA's device order is ambiguous on a mixed host), to be
    shown next to the verdicts rather than lost. ``nodes`` holds each host's software, network and
    model-file facts on a multi-node machine (``machine/nodes.py``; empty for one host).
    """

    gpus: tuple[Gpu, ...]
    links: Mapping[tuple[int, int], str] = field(default_factory=dict)
    host: str | None = None
    driver: str | None = None
    source: str = "unknown"
    notes: tuple[str, ...] = ()
    nodes: Mapping[str, NodeFacts] = field(default_factory=dict)
    #: one node's machine standing for each node of a multi-node artifact (``machine/stand_in.py``); None: the
    #: machine as it was read
    stand_in: StandIn | None = None

    def __post_init__(self) -> None:
        norm = {_pair(i, j): normalize_link(k) for (i, j), k in dict(self.links).items() if i != j}
        object.__setattr__(self, "links", MappingProxyType(norm))
        object.__setattr__(self, "nodes", MappingProxyType(dict(self.nodes)))
        object.__setattr__(self, "gpus", tuple(sorted(self.gpus, key=lambda g: g.index)))
        # index lookups are the hot path of a plan on hundreds of GPUs: one dict, not a scan
        object.__setattr__(self, "_by_index", {g.index: g for g in self.gpus})

    # -- lookups -------------------------------------------------------------------------------
    @property
    def indices(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus)

    def gpu(self, ref: int | str) -> Gpu:
        """A GPU by CUDA index or (prefix of) UUID; ``KeyError`` if there is none or it is ambiguous."""
        if isinstance(ref, int):
            found: Gpu | None = self.__dict__["_by_index"].get(ref)
            if found is None:
                raise KeyError(ref)
            return found
        matches = [g for g in self.gpus if g.uuid and g.uuid.lower().startswith(ref.lower())]
        if len(matches) != 1:
            raise KeyError(ref)
        return matches[0]

    def link(self, i: int, j: int) -> str | None:
        """Link kind between two GPUs; ``None`` if the source did not say (never guessed)."""
        if i == j:
            return None
        return self.links.get(_pair(i, j))

    def effective_link(self, i: int, j: int) -> str | None:
        """What traffic between two GPUs crosses: ``NET`` when they sit on different hosts, else the link."""
        gi, gj = self.gpu(i), self.gpu(j)
        if gi.host and gj.host and gi.host != gj.host:
            return "NET"
        return self.link(i, j)

    def links_within(self, group: Iterable[int]) -> Iterator[tuple[int, int, str | None]]:
        group = list(group)
        for a in range(len(group)):
            for b in range(a + 1, len(group)):
                yield group[a], group[b], self.link(group[a], group[b])

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts the GPUs sit on (and hosts with node facts but no GPU), in GPU order."""
        seen = dict.fromkeys(g.host or self.host or "" for g in self.gpus)
        seen.update(dict.fromkeys(self.nodes))
        return tuple(h for h in seen if h)

    @property
    def tenants_known(self) -> bool:
        """False for sources that cannot list processes or MIG mode (pasted ``nvidia-smi topo -m``)."""
        return not self.source.startswith("topo:")

    @property
    def memory_known(self) -> bool:
        return all(g.memory_total_mib is not None and g.memory_free_mib is not None for g in self.gpus)

    def headline(self) -> str:
        """``snapshot:m.yaml: 2 x NVIDIA L4, driver 580.95.05``: the machine in one line, as every
        output (check, plan, topo, the pytest header, the HTML) opens with it."""
        return f"{self.source}: {self.describe()}" + (f", driver {self.driver}" if self.driver else "")

    def describe(self) -> str:
        """``2 x NVIDIA L4`` (or a mix), used in report headers."""
        counts: dict[str, int] = {}
        for g in self.gpus:
            counts[g.name or "unknown GPU"] = counts.get(g.name or "unknown GPU", 0) + 1
        return ", ".join(f"{n} x {name}" for name, n in counts.items()) or "no GPUs"
