"""The live machine through NVML (``nvidia-ml-py``, module ``pynvml``), numbered the way the engine sees it.

This is the only module that reads hardware. It returns the same frozen Machine a snapshot gives, so
checks never know the difference. Three rules shape it:

* GPU numbers are CUDA's, not NVML's: ``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER`` from the
  environment are applied (``visible.py``), because that is what the engine will get.
* A probe that could not see GPUs never yields a machine: no bindings, no driver, no permission,
  zero GPUs, an empty ``CUDA_VISIBLE_DEVICES`` all raise ``ProbeError`` with one line saying what to
  do. Facts NVML would not give (memory of a MIG parent without privileges, the link of a pair whose
  topology query failed) stay ``None``/missing, with a note, never a guess.
* Link kinds use ``nvidia-smi topo -m`` terms: ``NV<n>`` for n NVLinks between the pair (or, on
  NVSwitch systems, the GPU's switch-link count when NVLink P2P works between them), otherwise the
  PCIe level from the common ancestor (PIX, PXB, PHB, NODE, SYS).

``nvmlShutdown`` is always called once ``nvmlInit`` succeeded.
"""

from __future__ import annotations

import os
import socket
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import ProbeError
from pytest_gpulayout.machine.capability import fill_from_names
from pytest_gpulayout.machine.facts import MIB, Gpu, GpuProcess, Machine
from pytest_gpulayout.machine.visible import MigInstance, NvmlGpu, VisibleDevice, resolve

REPLAY_HINT = "Run on the GPU host, or replay a snapshot with --machine FILE / --gpulayout-machine FILE."

_ERROR_NAMES = (
    "NVML_ERROR_UNINITIALIZED",
    "NVML_ERROR_INVALID_ARGUMENT",
    "NVML_ERROR_NOT_SUPPORTED",
    "NVML_ERROR_NO_PERMISSION",
    "NVML_ERROR_NOT_FOUND",
    "NVML_ERROR_DRIVER_NOT_LOADED",
    "NVML_ERROR_TIMEOUT",
    "NVML_ERROR_LIBRARY_NOT_FOUND",
    "NVML_ERROR_FUNCTION_NOT_FOUND",
    "NVML_ERROR_GPU_IS_LOST",
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
    "NVML_ERROR_INSUFFICIENT_SIZE",
    "NVML_ERROR_UNKNOWN",
)

_INIT_MESSAGES = {
    "NVML_ERROR_LIBRARY_NOT_FOUND": "NVML could not be loaded: no NVIDIA driver on this machine",
    "NVML_ERROR_DRIVER_NOT_LOADED": "NVML could not be loaded: the NVIDIA kernel driver is not running",
    "NVML_ERROR_NO_PERMISSION": "NVML refused access to the GPUs: this user may not open /dev/nvidia*",
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": (
        "NVML and the NVIDIA kernel driver are different versions (driver updated without a reboot?)"
    ),
}


# -- small helpers over the binding ------------------------------------------------------------


def _const(nv: Any, name: str, default: Any) -> Any:
    return getattr(nv, name, default)


def _errs(nv: Any, *names: str) -> tuple[type[BaseException], ...]:
    """The binding's exception classes by name (missing ones skipped), for ``except`` clauses."""
    return tuple(c for c in (getattr(nv, n, None) for n in names) if isinstance(c, type))


def _nvml_error(nv: Any) -> tuple[type[BaseException], ...]:
    return _errs(nv, "NVMLError", "NVMLLibraryMismatchError") or (Exception,)


def _code_name(nv: Any, err: BaseException) -> str:
    value = getattr(err, "value", None)
    for name in _ERROR_NAMES:
        if value is not None and getattr(nv, name, object()) == value:
            return name
    return f"NVML error {value}" if value is not None else type(err).__name__


def _text(v: object) -> str:
    """Bindings before 11.x return ``bytes`` for names/UUIDs; current ones ``str``."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace").rstrip("\x00")
    return str(v)


def _import_pynvml() -> Any:
    try:
        with warnings.catch_warnings():
            # The deprecated `pynvml` package's import hook warns on any `import pynvml`, even of
            # nvidia-ml-py's module; under -W error that would turn a working probe into a crash.
            warnings.simplefilter("ignore", FutureWarning)
            import pynvml
    except ImportError as err:
        raise ProbeError(
            f"NVML bindings are not installed (import pynvml failed: {err}); pip install nvidia-ml-py. "
            + REPLAY_HINT
        ) from None
    return pynvml


# -- facts per GPU -----------------------------------------------------------------------------


def _pci_key_from_bus_id(bus_id: str) -> tuple[int, int, int] | None:
    try:
        dom, bus, rest = bus_id.strip().split(":")
        dev = rest.split(".")[0]
        return int(dom, 16), int(bus, 16), int(dev, 16)
    except ValueError:
        return None


def _pci_key(info: Any) -> tuple[int, int, int] | None:
    """(domain, bus, device) as integers; string forms differ (legacy 4-digit vs 8-digit domain)."""
    dom, bus, dev = (
        int(getattr(info, "domain", 0)),
        int(getattr(info, "bus", 0)),
        int(getattr(info, "device", 0)),
    )
    if (dom, bus, dev) == (0, 0, 0):
        for attr in ("busId", "busIdLegacy"):
            raw = getattr(info, attr, b"")
            key = _pci_key_from_bus_id(_text(raw)) if raw else None
            if key is not None and key != (0, 0, 0):
                return key
    return dom, bus, dev


def _bus_id(info: Any) -> str:
    raw = _text(getattr(info, "busId", b"") or b"")
    if raw:
        return raw
    dom, bus, dev = _pci_key(info) or (0, 0, 0)
    return f"{dom:08X}:{bus:02X}:{dev:02X}.0"


def _memory(nv: Any, h: Any) -> tuple[int, int, int | None]:
    """(total, free, reserved) in MiB: the v2 struct where the driver has it (it also says what the
    driver reserves, which CUDA leaves out of its total), else v1 (same total and free; reserved
    unknown)."""
    v2 = getattr(nv, "nvmlMemory_v2", None)
    info = None
    if v2 is not None:
        try:
            info = nv.nvmlDeviceGetMemoryInfo(h, version=v2)
        except TypeError:  # bindings older than the `version` keyword
            info = None
        except _errs(
            nv, "NVMLError_FunctionNotFound", "NVMLError_NotSupported", "NVMLError_ArgumentVersionMismatch"
        ):
            info = None
    if info is None:
        info = nv.nvmlDeviceGetMemoryInfo(h)
        return int(info.total) // MIB, int(info.free) // MIB, None
    reserved = getattr(info, "reserved", None)
    return int(info.total) // MIB, int(info.free) // MIB, (None if reserved is None else int(reserved) // MIB)


def _mig_enabled(nv: Any, h: Any) -> bool:
    try:
        current = nv.nvmlDeviceGetMigMode(h)[0]
    except _nvml_error(nv):  # NotSupported on GPUs without MIG, FunctionNotFound on old drivers
        return False
    return bool(current == _const(nv, "NVML_DEVICE_MIG_ENABLE", 1))


def _mig_instances(nv: Any, h: Any) -> list[tuple[MigInstance, Any]]:
    out: list[tuple[MigInstance, Any]] = []
    try:
        slots = int(nv.nvmlDeviceGetMaxMigDeviceCount(h))
    except _nvml_error(nv):
        return out
    for k in range(slots):
        try:
            mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, k)
        except _nvml_error(nv):  # empty slot: NVML_ERROR_NOT_FOUND
            continue
        if not bool(nv.nvmlDeviceIsMigDeviceHandle(mh)):  # a ctypes c_uint: `== 1` would always be False
            continue
        gi = ci = None
        try:
            gi = int(nv.nvmlDeviceGetGpuInstanceId(mh))
            ci = int(nv.nvmlDeviceGetComputeInstanceId(mh))
        except _nvml_error(nv):
            pass
        out.append(
            (
                MigInstance(uuid=_text(nv.nvmlDeviceGetUUID(mh)), gpu_instance_id=gi, compute_instance_id=ci),
                mh,
            )
        )
    return out


def _numa_node(nv: Any, h: Any, pci: tuple[int, int, int] | None, root: Path) -> int | None:
    """The host NUMA node the GPU hangs off (``NUMA Affinity`` in topo -m), or None.

    NVML's memory affinity first; then sysfs. Not ``nvmlDeviceGetNumaNodeId``: that is the GPU's own
    memory node on coherent systems (``GPU NUMA ID``), a different thing.
    """
    try:
        mask = nv.nvmlDeviceGetMemoryAffinity(h, 4, _const(nv, "NVML_AFFINITY_SCOPE_NODE", 0))
        nodes = [w * 64 + b for w, word in enumerate(mask) for b in range(64) if (int(word) >> b) & 1]
        if len(nodes) == 1:
            return nodes[0]
        if len(nodes) > 1:
            return None
    except _nvml_error(nv) + (AttributeError, TypeError):
        pass
    if pci is None:
        return None
    dom, bus, dev = pci
    path = root / "sys" / "bus" / "pci" / "devices" / f"{dom:04x}:{bus:02x}:{dev:02x}.0" / "numa_node"
    try:
        node = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def _process_name(root: Path, pid: int) -> str:
    try:
        return (root / "proc" / str(pid) / "comm").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return ""  # another container's PID, or gone already


def _processes(nv: Any, h: Any, root: Path) -> tuple[GpuProcess, ...] | None:
    """Compute processes on the device, or None when NVML would not list them."""
    try:
        try:
            procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
        except _errs(nv, "NVMLLibraryMismatchError", "NVMLError_FunctionNotFound"):
            procs = nv.nvmlDeviceGetComputeRunningProcesses_v2(h)  # drivers without the _v3 symbol
    except _nvml_error(nv) + (AttributeError,):
        return None
    out: dict[int, GpuProcess] = {}
    for p in procs:
        pid = int(p.pid)
        used = getattr(p, "usedGpuMemory", None)
        if pid not in out:
            out[pid] = GpuProcess(
                pid=pid, name=_process_name(root, pid), used_mib=None if used is None else int(used) // MIB
            )
    return tuple(out.values())


# -- links -------------------------------------------------------------------------------------


@dataclass
class _NvLinks:
    gpu_links: Counter[tuple[int, int, int]] = field(default_factory=Counter)
    switch_links: int = 0


def _nvlinks(nv: Any, h: Any) -> _NvLinks:
    """Active NVLinks of one GPU: how many go to each peer GPU (by PCI) and how many to NVSwitches."""
    info = _NvLinks()
    stop = _errs(nv, "NVMLError_InvalidArgument", "NVMLError_NotSupported", "NVMLError_FunctionNotFound")
    enabled = _const(nv, "NVML_FEATURE_ENABLED", 1)
    t_gpu = _const(nv, "NVML_NVLINK_DEVICE_TYPE_GPU", 0)
    t_switch = _const(nv, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
    for link in range(int(_const(nv, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            state = nv.nvmlDeviceGetNvLinkState(h, link)
        except stop:  # past the GPU's last link, or no NVLink at all
            break
        except _nvml_error(nv):  # one faulty link: look at the next
            continue
        if state != enabled:
            continue
        try:
            rtype = nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link)
        except _nvml_error(nv) + (AttributeError,):  # old drivers: links then only went GPU to GPU
            rtype = t_gpu
        if rtype == t_switch:
            info.switch_links += 1
            continue
        if rtype != t_gpu:
            continue  # IBM NPU / unknown
        try:
            remote = _pci_key(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link))
        except _nvml_error(nv):
            continue
        if remote is not None:
            info.gpu_links[remote] += 1
    return info


def _pcie_kind(nv: Any, ha: Any, hb: Any) -> str | None:
    levels = {
        _const(nv, "NVML_TOPOLOGY_INTERNAL", 0): "PIX",
        _const(nv, "NVML_TOPOLOGY_SINGLE", 10): "PIX",
        _const(nv, "NVML_TOPOLOGY_MULTIPLE", 20): "PXB",
        _const(nv, "NVML_TOPOLOGY_HOSTBRIDGE", 30): "PHB",
        _const(nv, "NVML_TOPOLOGY_NODE", 40): "NODE",
        _const(nv, "NVML_TOPOLOGY_SYSTEM", 50): "SYS",
    }
    try:
        level = nv.nvmlDeviceGetTopologyCommonAncestor(ha, hb)
    except _nvml_error(nv):
        return None
    return levels.get(level)


def _p2p_nvlink_ok(nv: Any, ha: Any, hb: Any) -> bool:
    idx = _const(nv, "NVML_P2P_CAPS_INDEX_NVLINK", 2)
    if isinstance(idx, tuple):  # nvidia-ml-py spells some indices with a trailing comma: (0,)
        idx = idx[0]
    try:
        status = nv.nvmlDeviceGetP2PStatus(ha, hb, idx)
    except _nvml_error(nv):
        return False
    return bool(status == _const(nv, "NVML_P2P_STATUS_OK", 0))


# -- the probe ---------------------------------------------------------------------------------


@dataclass
class _Physical:
    gpu: NvmlGpu
    handle: Any
    pci: tuple[int, int, int] | None
    mig_handles: dict[str, Any]


def _read_physical(nv: Any) -> list[_Physical]:
    out: list[_Physical] = []
    for i in range(int(nv.nvmlDeviceGetCount())):
        h = nv.nvmlDeviceGetHandleByIndex(i)
        pci_info = nv.nvmlDeviceGetPciInfo(h)
        mig_on = _mig_enabled(nv, h)
        instances = _mig_instances(nv, h) if mig_on else []
        gpu = NvmlGpu(
            nvml_index=i,
            uuid=_text(nv.nvmlDeviceGetUUID(h)),
            name=_text(nv.nvmlDeviceGetName(h)),
            pci_bus_id=_bus_id(pci_info),
            mig_enabled=mig_on,
            mig_instances=tuple(inst for inst, _ in instances),
        )
        out.append(_Physical(gpu, h, _pci_key(pci_info), {inst.uuid: mh for inst, mh in instances}))
    return out


def _capability(nv: Any, h: Any) -> tuple[int, int] | None:
    """The GPU's CUDA compute capability (``nvmlDeviceGetCudaComputeCapability``: ``(major, minor)``); None
    where the driver or the bindings do not give it (the machine then derives it from the name)."""
    try:
        major, minor = nv.nvmlDeviceGetCudaComputeCapability(h)
        return int(major), int(minor)
    except _nvml_error(nv):
        return None


def _no_gpu_error(
    env: Mapping[str, str], physical: list[_Physical], warnings_: tuple[str, ...]
) -> ProbeError:
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if not physical:
        return ProbeError(
            "NVML sees no GPU on this machine (the driver is loaded, 0 devices). " + REPLAY_HINT
        )
    seen = ", ".join(f"{p.gpu.nvml_index}={p.gpu.uuid}" for p in physical)
    if cvd is not None and not cvd.strip():
        return ProbeError(
            "CUDA_VISIBLE_DEVICES is set but empty, so the engine would see no GPU "
            f"(NVML sees {len(physical)}: {seen}); unset it or list the GPUs to use."
        )
    why = "; ".join(warnings_) or f"CUDA_VISIBLE_DEVICES={cvd!r} selects no GPU"
    return ProbeError(f"{why} (NVML sees {len(physical)}: {seen}); fix CUDA_VISIBLE_DEVICES.")


def _link(nv: Any, a: _Physical, b: _Physical, nvl: dict[int, _NvLinks], whole: bool) -> str | None:
    if whole:
        for p in (a, b):  # each GPU's links are read once, not once per pair
            if p.gpu.nvml_index not in nvl:
                nvl[p.gpu.nvml_index] = _nvlinks(nv, p.handle)
        la, lb = nvl[a.gpu.nvml_index], nvl[b.gpu.nvml_index]
        n = (la.gpu_links.get(b.pci, 0) if b.pci else 0) or (lb.gpu_links.get(a.pci, 0) if a.pci else 0)
        if n:
            return f"NV{n}"
        if la.switch_links and lb.switch_links and _p2p_nvlink_ok(nv, a.handle, b.handle):
            return f"NV{min(la.switch_links, lb.switch_links)}"
    return _pcie_kind(nv, a.handle, b.handle)


def _build(nv: Any, env: Mapping[str, str], root: Path) -> Machine:
    try:
        driver: str | None = _text(nv.nvmlSystemGetDriverVersion())
    except _nvml_error(nv):
        driver = None
    physical = _read_physical(nv)
    by_index = {p.gpu.nvml_index: p for p in physical}
    vis = resolve(env.get("CUDA_VISIBLE_DEVICES"), [p.gpu for p in physical], env.get("CUDA_DEVICE_ORDER"))
    if not vis.devices:
        raise _no_gpu_error(env, physical, vis.warnings)
    notes = list(vis.warnings)
    gpus: list[Gpu] = []
    for k, dev in enumerate(vis.devices):
        phys = by_index[dev.gpu.nvml_index]
        handle = phys.mig_handles[dev.mig.uuid] if dev.mig is not None else phys.handle
        name = dev.gpu.name
        if dev.mig is not None:
            try:
                name = _text(nv.nvmlDeviceGetName(handle))
            except _nvml_error(nv):
                name = f"{dev.gpu.name} MIG"
        total: int | None
        free: int | None
        reserved: int | None
        try:
            total, free, reserved = _memory(nv, handle)
        except _nvml_error(nv) as err:
            total = free = reserved = None
            notes.append(f"GPU{k}: NVML would not report memory ({err}); memory unknown")
        procs = _processes(nv, handle, root)
        if procs is None:
            procs = ()
            notes.append(f"GPU{k}: NVML would not list compute processes; other tenants unknown")
        gpus.append(
            Gpu(
                index=k,
                uuid=dev.uuid,
                name=name,
                pci_bus_id=dev.gpu.pci_bus_id,
                memory_total_mib=total,
                memory_free_mib=free,
                memory_reserved_mib=reserved,
                numa_node=_numa_node(nv, phys.handle, phys.pci, root),
                mig=dev.mig is not None or dev.gpu.mig_enabled,
                processes=procs,
                compute_capability=_capability(nv, phys.handle),
            )
        )
    links: dict[tuple[int, int], str] = {}
    nvl: dict[int, _NvLinks] = {}
    devs: list[VisibleDevice] = list(vis.devices)
    for i in range(len(devs)):
        for j in range(i + 1, len(devs)):
            a, b = by_index[devs[i].gpu.nvml_index], by_index[devs[j].gpu.nvml_index]
            if a is b:
                notes.append(f"GPU{i} and GPU{j} are MIG instances of one GPU: there is no link between them")
                continue
            # MIG instances cannot use NVLink P2P, so only the PCIe path counts for them.
            whole = not (gpus[i].mig or gpus[j].mig)
            kind = _link(nv, a, b, nvl, whole)
            if kind is None:
                notes.append(f"GPU{i}-GPU{j}: NVML gave no topology for this pair; link unknown")
            else:
                links[(i, j)] = kind
    filled, derived = fill_from_names(gpus)
    if derived is not None:
        notes.append(derived.replace("the file does not give it", "NVML did not give it"))
    return Machine(
        gpus=tuple(filled),
        links=links,
        host=socket.gethostname(),
        driver=driver,
        source="nvml",
        notes=tuple(notes),
    )


def probe(nvml: Any = None, env: Mapping[str, str] | None = None, *, host_root: str | Path = "/") -> Machine:
    """The live machine as the engine will see it; ``ProbeError`` when it cannot be seen.

    ``nvml`` is the binding module (default: ``pynvml`` from nvidia-ml-py, imported here, lazily);
    ``env`` supplies ``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER`` (default ``os.environ``);
    ``host_root`` is where ``/proc`` and ``/sys`` are read from (process names, NUMA fallback).
    """
    nv = nvml if nvml is not None else _import_pynvml()
    env = os.environ if env is None else env
    errors = _nvml_error(nv)
    try:
        nv.nvmlInit()
    except errors as err:
        code = _code_name(nv, err)
        head = _INIT_MESSAGES.get(code, f"NVML could not be initialised: {err}")
        raise ProbeError(f"{head} ({code}). {REPLAY_HINT}") from None
    try:
        return _build(nv, env, Path(host_root))
    except errors as err:
        raise ProbeError(
            f"NVML failed while reading the GPUs: {err} ({_code_name(nv, err)}). {REPLAY_HINT}"
        ) from None
    finally:
        try:
            nv.nvmlShutdown()
        except errors:
            pass
