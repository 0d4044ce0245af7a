"""A fake ``pynvml`` module built from a Machine, faithful where the probe depends on it.

It raises the real exception classes of nvidia-ml-py (``pynvml.NVMLError(code)`` returns the
generated subclass, e.g. ``NVMLError_NotSupported``), exposes the real constants (including the
``NVML_P2P_CAPS_INDEX_READ == (0,)`` trap, which raises ``ctypes.ArgumentError`` if passed, as the
real unprototyped call does), returns the real ctypes structs (``nvmlPciInfo_t`` with ``bytes`` bus
ids, ``c_nvmlMemory_t`` / ``c_nvmlMemory_v2_t``), a ``c_uint`` from ``nvmlDeviceIsMigDeviceHandle``
and ``str`` names/UUIDs like current bindings. Any NVML function the fake does not implement is an
``AttributeError``, so a probe that starts using a new call fails here instead of passing by luck.

The machine's GPU ``index`` is the NVML index unless ``nvml_order`` says otherwise. Links become
hardware: ``NV<n>`` pairs get n NVLinks each way (or, with ``nvswitch=True``, every GPU gets as many
links to NVSwitches as its largest ``NV<n>`` and NVLink P2P works between NV pairs); PCIe kinds
become common-ancestor levels; a pair the machine does not give makes the topology query fail.
"""

from __future__ import annotations

import ctypes
import uuid as uuidlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pynvml

from pytest_gpulayout.machine.facts import Gpu, Machine, is_nvlink, nvlink_count

MIB = 1024 * 1024

_KIND_TO_LEVEL = {
    "PIX": pynvml.NVML_TOPOLOGY_SINGLE,
    "PXB": pynvml.NVML_TOPOLOGY_MULTIPLE,
    "PHB": pynvml.NVML_TOPOLOGY_HOSTBRIDGE,
    "NODE": pynvml.NVML_TOPOLOGY_NODE,
    "SYS": pynvml.NVML_TOPOLOGY_SYSTEM,
}


#: ``nvmlDeviceGetCudaComputeCapability`` of real cards (``nvidia-smi --query-gpu=name,compute_cap``)
_REAL_CAPABILITIES = (
    ("H100", (9, 0)), ("H200", (9, 0)), ("GH200", (9, 0)), ("B200", (10, 0)), ("A100", (8, 0)),
    ("L40S", (8, 9)), ("L4", (8, 9)), ("RTX 4090", (8, 9)), ("RTX 6000 Ada", (8, 9)), ("RTX 5000 Ada", (8, 9)),
    ("RTX 3090", (8, 6)), ("RTX A4000", (8, 6)), ("RTX A6000", (8, 6)), ("A10", (8, 6)),
    ("T4", (7, 5)), ("V100", (7, 0)), ("RTX 5090", (12, 0)),
)


def err(code: int) -> pynvml.NVMLError:
    """The exception the real binding raises for an NVML return code (a generated subclass)."""
    return pynvml.NVMLError(code)


@dataclass(frozen=True)
class MigSpec:
    """One MIG instance to create on a GPU of the fake."""

    uuid: str
    name: str
    memory_total_mib: int
    memory_free_mib: int
    gpu_instance_id: int
    compute_instance_id: int = 0


def mig_specs(parent: Gpu, count: int, profile: str = "3g.40gb") -> list[MigSpec]:
    """``count`` equal MIG instances of ``parent`` with deterministic MIG UUIDs."""
    total = (parent.memory_total_mib or 81920) // count - 256
    return [
        MigSpec(
            uuid="MIG-" + str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, f"{parent.uuid}/{k}")),
            name=f"{parent.name} MIG {profile}",
            memory_total_mib=total,
            memory_free_mib=total - 13,
            gpu_instance_id=k + 1,
        )
        for k in range(count)
    ]


@dataclass(frozen=True)
class _Handle:
    pos: int  # NVML index
    mig: int | None = None


@dataclass(frozen=True)
class _Link:
    active: bool
    remote_type: int
    remote_pci: tuple[int, int, int]


def _parse_bus(bus_id: str) -> tuple[int, int, int]:
    dom, bus, rest = bus_id.split(":")
    return int(dom, 16), int(bus, 16), int(rest.split(".")[0], 16)


def _pci_struct(
    key: tuple[int, int, int], legacy_only: bool = False, no_ints: bool = False
) -> pynvml.nvmlPciInfo_t:
    dom, bus, dev = key
    info = pynvml.nvmlPciInfo_t()
    if not no_ints:
        info.domain, info.bus, info.device = dom, bus, dev
    info.pciDeviceId = 0x233010DE
    info.busIdLegacy = f"{dom:04X}:{bus:02X}:{dev:02X}.0".encode()
    if not legacy_only:
        info.busId = f"{dom:08X}:{bus:02X}:{dev:02X}.0".encode()
    return info


class FakeNvml:
    """Stands in for the ``pynvml`` module: pass it as ``probe(nvml=FakeNvml(machine))``."""

    def __init__(
        self,
        machine: Machine,
        *,
        nvswitch: bool = False,
        init_error: int | None = None,
        no_v2_memory: bool = False,
        old_bindings: bool = False,
        mig: Mapping[int, Iterable[MigSpec]] | None = None,
        mig_capable: Iterable[int] = (),
        remote_type_unsupported: bool = False,
        remote_pci_legacy: bool = False,
        remote_pci_strings_only: bool = False,
        nvml_order: Iterable[int] | None = None,
        inactive_links: int = 0,
        link_end: int = pynvml.NVML_ERROR_INVALID_ARGUMENT,
        processes_error: int | None = None,
        no_v3_processes: bool = False,
        memory_error: Mapping[int, int] | None = None,
        reserved_mib: int = 500,
        cuda_driver_version: int = 12040,
    ) -> None:
        hosts = {g.host for g in machine.gpus}
        if len(hosts) > 1:
            raise ValueError("NVML sees one host; a multi-host machine cannot be faked")
        order = list(nvml_order) if nvml_order is not None else [g.index for g in machine.gpus]
        self._gpus: list[Gpu] = [machine.gpu(i) for i in order]  # position = NVML index
        self._pos_of = {g.index: pos for pos, g in enumerate(self._gpus)}
        self._machine = machine
        self.driver = machine.driver or "550.90.07"
        self.nvswitch = nvswitch
        self.init_error = init_error
        self.no_v2_memory = no_v2_memory
        self.old_bindings = old_bindings
        self.remote_type_unsupported = remote_type_unsupported
        self.remote_pci_legacy = remote_pci_legacy
        self.remote_pci_strings_only = remote_pci_strings_only
        self.link_end = link_end
        self.processes_error = processes_error
        self.no_v3_processes = no_v3_processes
        self.memory_error = dict(memory_error or {})
        self.reserved_mib = reserved_mib
        self.cuda_driver_version = cuda_driver_version
        self.mig = {self._pos_of[i]: list(specs) for i, specs in (mig or {}).items()}
        self.mig_capable = {self._pos_of[i] for i in mig_capable} | set(self.mig)
        self.initialized = 0
        self.init_calls = 0
        self.shutdown_calls = 0
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self._pci = [
            _parse_bus(g.pci_bus_id) if g.pci_bus_id else (0, 0x10 + pos, 0)
            for pos, g in enumerate(self._gpus)
        ]
        self._links = [self._make_links(pos, inactive_links) for pos in range(len(self._gpus))]

    # -- construction helpers ------------------------------------------------------------------
    def _kind(self, a: int, b: int) -> str | None:
        return self._machine.link(self._gpus[a].index, self._gpus[b].index)

    def _make_links(self, pos: int, inactive: int) -> list[_Link]:
        links: list[_Link] = []
        counts = {
            other: nvlink_count(k)
            for other in range(len(self._gpus))
            if other != pos and (k := self._kind(pos, other)) and is_nvlink(k)
        }
        if self.nvswitch:
            switch_pci = [(0, 0xC5 + s, 0) for s in range(4)]
            for n in range(max(counts.values(), default=0)):
                links.append(_Link(True, pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH, switch_pci[n % 4]))
        else:
            for other, n in counts.items():
                links += [_Link(True, pynvml.NVML_NVLINK_DEVICE_TYPE_GPU, self._pci[other])] * n
        if len(links) > pynvml.NVML_NVLINK_MAX_LINKS:
            raise ValueError(f"GPU at NVML index {pos} would need {len(links)} NVLinks; use nvswitch=True")
        if links:
            links += [_Link(False, pynvml.NVML_NVLINK_DEVICE_TYPE_GPU, (0, 0, 0))] * inactive
        return links

    # -- module surface ------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        # Constants, exception classes and structs come from the real binding; functions do not.
        if name == "nvmlMemory_v2" and self.old_bindings:
            raise AttributeError(name)
        if name.startswith(("NVML_", "NVMLError", "NVMLLibraryMismatchError", "nvmlMemory_v", "c_nvml")):
            return getattr(pynvml, name)
        if name in ("nvmlPciInfo_t", "nvmlFriendlyObject"):
            return getattr(pynvml, name)
        raise AttributeError(f"FakeNvml does not implement {name}")

    def _str(self, s: str) -> Any:
        return s.encode() if self.old_bindings else s

    def _enter(self, fn: str, *args: Any) -> None:
        self.calls.append((fn, args))
        if self.initialized <= 0:
            raise err(pynvml.NVML_ERROR_UNINITIALIZED)

    def _handle(self, h: Any) -> _Handle:
        if not isinstance(h, _Handle) or not 0 <= h.pos < len(self._gpus):
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return h

    def nvmlInit(self) -> None:
        self.init_calls += 1
        self.calls.append(("nvmlInit", ()))
        if self.init_error is not None:
            raise err(self.init_error)
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.shutdown_calls += 1
        self.initialized -= 1

    def nvmlSystemGetDriverVersion(self) -> Any:
        self._enter("nvmlSystemGetDriverVersion")
        return self._str(self.driver)

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._enter("nvmlDeviceGetHandleByIndex", index)
        if not 0 <= index < len(self._gpus):
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    def nvmlDeviceGetCudaComputeCapability(self, h: Any) -> tuple[int, int]:
        """``(major, minor)`` as the binding returns it: the machine's own value, else what NVIDIA lists for
        the GPU's name (its own table, not the package's); a name it does not know answers NotSupported."""
        self._enter("nvmlDeviceGetCudaComputeCapability", h)
        h = self._handle(h)
        g = self._gpus[h.pos]
        if g.compute_capability is not None:
            return g.compute_capability
        for key, cc in _REAL_CAPABILITIES:
            if key in g.name:
                return cc
        raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetName(self, h: Any) -> Any:
        self._enter("nvmlDeviceGetName", h)
        h = self._handle(h)
        if h.mig is not None:
            return self._str(self.mig[h.pos][h.mig].name)
        return self._str(self._gpus[h.pos].name)

    def nvmlDeviceGetUUID(self, h: Any) -> Any:
        self._enter("nvmlDeviceGetUUID", h)
        h = self._handle(h)
        if h.mig is not None:
            return self._str(self.mig[h.pos][h.mig].uuid)
        return self._str(self._gpus[h.pos].uuid)

    def nvmlDeviceGetPciInfo(self, h: Any) -> pynvml.nvmlPciInfo_t:
        self._enter("nvmlDeviceGetPciInfo", h)
        h = self._handle(h)
        return _pci_struct(self._pci[h.pos])

    def nvmlDeviceGetMemoryInfo(self, h: Any, version: int | None = None) -> Any:
        if self.old_bindings and version is not None:
            raise TypeError("nvmlDeviceGetMemoryInfo() got an unexpected keyword argument 'version'")
        self._enter("nvmlDeviceGetMemoryInfo", h, version)
        h = self._handle(h)
        if h.mig is None and h.pos in self.memory_error:
            raise err(self.memory_error[h.pos])
        if h.mig is not None:
            spec = self.mig[h.pos][h.mig]
            total, free = spec.memory_total_mib, spec.memory_free_mib
        else:
            g = self._gpus[h.pos]
            if g.memory_total_mib is None or g.memory_free_mib is None:
                raise err(pynvml.NVML_ERROR_NO_PERMISSION)
            total, free = g.memory_total_mib, g.memory_free_mib
        if version:
            if self.no_v2_memory:
                raise err(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
            if version != pynvml.nvmlMemory_v2:
                raise err(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
            m2 = pynvml.c_nvmlMemory_v2_t()
            own = None if h.mig is not None else self._gpus[h.pos].memory_reserved_mib
            reserved = own if own is not None else min(self.reserved_mib, total - free)
            m2.version, m2.total, m2.reserved = version, total * MIB, reserved * MIB
            m2.free, m2.used = free * MIB, (total - free - reserved) * MIB
            return m2
        m1 = pynvml.c_nvmlMemory_t()
        m1.total, m1.free, m1.used = total * MIB, free * MIB, (total - free) * MIB
        return m1

    def nvmlDeviceGetMemoryAffinity(self, h: Any, node_set_size: int, scope: int) -> Any:
        self._enter("nvmlDeviceGetMemoryAffinity", h, node_set_size, scope)
        h = self._handle(h)
        node = self._gpus[h.pos].numa_node
        if node is None:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        arr = (ctypes.c_ulonglong * node_set_size)()
        arr[node // 64] = 1 << (node % 64)
        return arr

    def nvmlDeviceGetMigMode(self, h: Any) -> list[int]:
        self._enter("nvmlDeviceGetMigMode", h)
        h = self._handle(h)
        if h.pos not in self.mig_capable:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        on = pynvml.NVML_DEVICE_MIG_ENABLE if h.pos in self.mig else pynvml.NVML_DEVICE_MIG_DISABLE
        return [on, on]

    def nvmlDeviceGetMaxMigDeviceCount(self, h: Any) -> int:
        self._enter("nvmlDeviceGetMaxMigDeviceCount", h)
        h = self._handle(h)
        return 7 if h.pos in self.mig_capable else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: Any, index: int) -> _Handle:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex", h, index)
        h = self._handle(h)
        if index >= len(self.mig.get(h.pos, [])):
            raise err(pynvml.NVML_ERROR_NOT_FOUND)
        return _Handle(h.pos, index)

    def nvmlDeviceIsMigDeviceHandle(self, h: Any) -> ctypes.c_uint:
        self._enter("nvmlDeviceIsMigDeviceHandle", h)
        return ctypes.c_uint(1 if self._handle(h).mig is not None else 0)

    def nvmlDeviceGetGpuInstanceId(self, h: Any) -> int:
        self._enter("nvmlDeviceGetGpuInstanceId", h)
        h = self._handle(h)
        if h.mig is None:
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.mig[h.pos][h.mig].gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, h: Any) -> int:
        self._enter("nvmlDeviceGetComputeInstanceId", h)
        h = self._handle(h)
        if h.mig is None:
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.mig[h.pos][h.mig].compute_instance_id

    def _procs(self, h: _Handle) -> list[Any]:
        if self.processes_error is not None:
            raise err(self.processes_error)
        if h.mig is not None:
            return []
        return [
            pynvml.nvmlFriendlyObject(
                {
                    "pid": p.pid,
                    "usedGpuMemory": None if p.used_mib is None else p.used_mib * MIB,
                    "gpuInstanceId": 0xFFFFFFFF,
                    "computeInstanceId": 0xFFFFFFFF,
                }
            )
            for p in self._gpus[h.pos].processes
        ]

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        self._enter("nvmlDeviceGetComputeRunningProcesses", h)
        if self.no_v3_processes:
            raise pynvml.NVMLLibraryMismatchError(
                "Unversioned function called and the pyNVML version does not match"
            )
        return self._procs(self._handle(h))

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h: Any) -> list[Any]:
        self._enter("nvmlDeviceGetComputeRunningProcesses_v2", h)
        return self._procs(self._handle(h))

    def _link(self, h: Any, link: int) -> _Link:
        h = self._handle(h)
        links = self._links[h.pos]
        if not links:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < len(links):
            raise err(self.link_end)
        return links[link]

    def nvmlDeviceGetNvLinkState(self, h: Any, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkState", h, link)
        return pynvml.NVML_FEATURE_ENABLED if self._link(h, link).active else pynvml.NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: Any, link: int) -> int:
        if self.old_bindings:
            raise AttributeError("module 'pynvml' has no attribute 'nvmlDeviceGetNvLinkRemoteDeviceType'")
        self._enter("nvmlDeviceGetNvLinkRemoteDeviceType", h, link)
        lk = self._link(h, link)
        if self.remote_type_unsupported:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return lk.remote_type

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: Any, link: int) -> pynvml.nvmlPciInfo_t:
        self._enter("nvmlDeviceGetNvLinkRemotePciInfo", h, link)
        lk = self._link(h, link)
        if not lk.active:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return _pci_struct(
            lk.remote_pci, legacy_only=self.remote_pci_legacy, no_ints=self.remote_pci_strings_only
        )

    def nvmlDeviceGetP2PStatus(self, h1: Any, h2: Any, index: Any) -> int:
        if isinstance(index, tuple):  # what ctypes does with NVML_P2P_CAPS_INDEX_READ == (0,)
            raise ctypes.ArgumentError("argument 3: TypeError: Don't know how to convert parameter 3")
        self._enter("nvmlDeviceGetP2PStatus", h1, h2, index)
        a, b = self._handle(h1), self._handle(h2)
        if index == pynvml.NVML_P2P_CAPS_INDEX_NVLINK:
            kind = self._kind(a.pos, b.pos)
            return (
                pynvml.NVML_P2P_STATUS_OK
                if kind and is_nvlink(kind)
                else pynvml.NVML_P2P_STATUS_NOT_SUPPORTED
            )
        return pynvml.NVML_P2P_STATUS_NOT_SUPPORTED

    def nvmlDeviceGetTopologyCommonAncestor(self, h1: Any, h2: Any) -> int:
        self._enter("nvmlDeviceGetTopologyCommonAncestor", h1, h2)
        a, b = self._handle(h1), self._handle(h2)
        if a.pos == b.pos:
            return pynvml.NVML_TOPOLOGY_INTERNAL
        kind = self._kind(a.pos, b.pos)
        if kind is None:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if is_nvlink(kind):  # the PCIe path under the NVLinks
            same = self._gpus[a.pos].numa_node == self._gpus[b.pos].numa_node
            return pynvml.NVML_TOPOLOGY_NODE if same else pynvml.NVML_TOPOLOGY_SYSTEM
        return _KIND_TO_LEVEL[kind]


def nvml_library_present() -> bool:
    """Whether this host has the real NVML library (a driver): the tests of "no driver" skip there."""
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True
