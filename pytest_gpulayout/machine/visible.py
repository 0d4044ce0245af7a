"""Which GPUs the engine will see, and in which order: ``CUDA_VISIBLE_DEVICES`` as CUDA reads it.

NVML ignores ``CUDA_VISIBLE_DEVICES``, the engine does not. A preflight that numbers GPUs the NVML
way checks the wrong cards whenever the variable is set (``CUDA_VISIBLE_DEVICES=2,3`` makes NVML's
GPU2 the engine's ``cuda:0``), so the probe maps NVML devices to CUDA indices here.

The rules mirror the CUDA driver (and PyTorch's ``_parse_visible_devices`` /
``_transform_uuid_to_ordinals``, which copy them):

* unset: every GPU, in CUDA's device order; set but empty: no GPU at all;
* a comma list; each entry is an integer ordinal, ``GPU-<uuid>`` (any unique prefix of the UUID),
  ``MIG-<uuid>`` (a MIG instance) or the legacy ``MIG-GPU-<uuid>/<gi>/<ci>``;
* the listed order becomes the CUDA order (``2,0`` makes NVML's GPU2 ``cuda:0``);
* the first entry that is not valid (negative, out of range, unknown or ambiguous UUID, not a
  number) ends the list silently: ``0,2,-1,1`` means ``0,2``;
* a GPU listed twice makes the whole set empty;
* integer ordinals count in CUDA's device order: ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` is ascending
  PCI bus id (nvidia-smi's order); the default ``FASTEST_FIRST`` is a heuristic (roughly the
  fastest GPU first) that we cannot reproduce without CUDA, so it is approximated by NVML's order
  (which is PCI order in practice) and a warning is returned when the GPUs are of different
  models, the one case where the two orders can differ.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

PCI_BUS_ID = "PCI_BUS_ID"
FASTEST_FIRST = "FASTEST_FIRST"


@dataclass(frozen=True)
class MigInstance:
    """A MIG device on a physical GPU (what a ``MIG-<uuid>`` entry selects)."""

    uuid: str
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass(frozen=True)
class NvmlGpu:
    """A physical GPU as NVML enumerates it; the input to the CUDA visibility rules."""

    nvml_index: int
    uuid: str
    name: str = ""
    pci_bus_id: str | None = None
    mig_enabled: bool = False
    mig_instances: tuple[MigInstance, ...] = ()


@dataclass(frozen=True)
class VisibleDevice:
    """What the engine's ``cuda:<position>`` is: a whole GPU, or one MIG instance on it."""

    gpu: NvmlGpu
    mig: MigInstance | None = None

    @property
    def uuid(self) -> str:
        return self.mig.uuid if self.mig is not None else self.gpu.uuid


@dataclass(frozen=True)
class Visibility:
    """The devices CUDA will number 0, 1, ... plus caveats worth showing the user."""

    devices: tuple[VisibleDevice, ...]
    warnings: tuple[str, ...] = field(default=())


def pci_sort_key(bus_id: str | None) -> tuple[int, ...]:
    """``"00000000:1B:00.0"`` (or the legacy ``"0000:1B:00.0"``) as comparable integers."""
    if not bus_id:
        return (1 << 62,)
    parts = re.split(r"[:.]", bus_id.strip())
    try:
        return tuple(int(p, 16) for p in parts)
    except ValueError:
        return (1 << 62,)


def cuda_order(gpus: Sequence[NvmlGpu], device_order: str | None) -> list[NvmlGpu]:
    """The GPUs in the order CUDA enumerates them (see the module docstring for FASTEST_FIRST)."""
    ordered = sorted(gpus, key=lambda g: g.nvml_index)
    if (device_order or "").strip().upper() == PCI_BUS_ID:
        ordered = sorted(ordered, key=lambda g: pci_sort_key(g.pci_bus_id))
    return ordered


def _ordinal(entry: str) -> int | None:
    """The leading integer of an entry, as ``strtoul`` reads it; None when there is none."""
    m = re.match(r"^[+-]?\d+", entry)
    return int(m.group(0)) if m else None


def _match_gpu_uuid(entry: str, gpus: Sequence[NvmlGpu]) -> NvmlGpu | None:
    hits = [g for g in gpus if g.uuid.lower().startswith(entry.lower())]
    return hits[0] if len(hits) == 1 else None


def _match_mig(entry: str, gpus: Sequence[NvmlGpu]) -> VisibleDevice | None:
    legacy = re.match(r"^MIG-(GPU-[0-9A-Fa-f-]+)/(\d+)/(\d+)$", entry)
    if legacy:
        parent = _match_gpu_uuid(legacy.group(1), gpus)
        if parent is None:
            return None
        gi, ci = int(legacy.group(2)), int(legacy.group(3))
        for inst in parent.mig_instances:
            if inst.gpu_instance_id == gi and inst.compute_instance_id == ci:
                return VisibleDevice(parent, inst)
        return None
    hits = [
        VisibleDevice(g, inst)
        for g in gpus
        for inst in g.mig_instances
        if inst.uuid.lower().startswith(entry.lower())
    ]
    return hits[0] if len(hits) == 1 else None


def resolve(
    cuda_visible_devices: str | None, gpus: Sequence[NvmlGpu], device_order: str | None
) -> Visibility:
    """The devices the engine sees for ``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER``, plus warnings."""
    ordered = cuda_order(gpus, device_order)
    warnings: list[str] = []
    cvd = cuda_visible_devices
    uses_ordinals = cvd is None
    devices: list[VisibleDevice] = []
    if cvd is None:
        devices = [VisibleDevice(g) for g in ordered]
    elif cvd.strip():
        entries = cvd.split(",")
        for pos, raw in enumerate(entries):
            entry = raw.strip()
            dev: VisibleDevice | None = None
            if entry.upper().startswith("GPU-"):
                g = _match_gpu_uuid(entry, ordered)
                dev = VisibleDevice(g) if g is not None else None
            elif entry.upper().startswith("MIG-"):
                dev = _match_mig(entry, ordered)
            else:
                n = _ordinal(entry)
                uses_ordinals = True
                dev = VisibleDevice(ordered[n]) if n is not None and 0 <= n < len(ordered) else None
            if dev is None:
                if not entry:  # a trailing comma: nothing lost worth a warning
                    break
                rest = ",".join(e.strip() for e in entries[pos:])
                warnings.append(
                    f"CUDA_VISIBLE_DEVICES={cvd!r}: entry {entry!r} matches no GPU, so CUDA ignores it and "
                    f"everything after it ({rest!r})"
                )
                break
            if any(d.uuid == dev.uuid for d in devices):
                warnings.append(
                    f"CUDA_VISIBLE_DEVICES={cvd!r} lists the same device twice ({entry!r}), "
                    "so CUDA sees no GPU"
                )
                devices = []
                break
            devices.append(dev)
    names = {g.name for g in gpus if g.name}
    order = (device_order or FASTEST_FIRST).strip().upper()
    if uses_ordinals and len(names) > 1 and order != PCI_BUS_ID:
        warnings.append(
            f"GPUs of different models ({', '.join(sorted(names))}) and CUDA_DEVICE_ORDER is not PCI_BUS_ID: "
            "CUDA numbers them fastest first, which may differ from NVML's order used here; set "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID (or list GPU UUIDs in CUDA_VISIBLE_DEVICES) so indices are certain"
        )
    return Visibility(devices=tuple(devices), warnings=tuple(warnings))


def resolve_visible(
    cuda_visible_devices: str | None, gpus: Sequence[NvmlGpu], device_order: str | None
) -> list[VisibleDevice]:
    """The devices CUDA numbers 0, 1, ... (``resolve(...).devices``); see the module docstring."""
    return list(resolve(cuda_visible_devices, gpus, device_order).devices)
