"""A GPU's CUDA compute capability: parsed, printed, and derived from its name where no probe said it.

NVML reports it (``nvmlDeviceGetCudaComputeCapability``, ``machine/probe.py``) and snapshots keep it
(``compute_capability: "9.0"``). Older snapshots and hand-written files carry only the GPU's name;
for them ``capability_from_name`` reads NVIDIA's table (https://developer.nvidia.com/cuda-gpus) and
the machine's notes say "compute capability from the GPU name". A name the table does not know stays
``None``: the checks then say what they could not verify, never assume a generation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from pytest_gpulayout.machine.facts import Gpu

Capability = tuple[int, int]

#: Substrings of ``nvmlDeviceGetName`` (upper case, first match wins: the longer names come first)
#: and the capability NVIDIA lists for them.
NAME_TABLE: tuple[tuple[str, Capability], ...] = (
    # Blackwell
    ("RTX PRO 6000 BLACKWELL", (12, 0)), ("RTX PRO 5000 BLACKWELL", (12, 0)),
    ("RTX PRO 4500 BLACKWELL", (12, 0)), ("RTX PRO 4000 BLACKWELL", (12, 0)),
    ("RTX 5090", (12, 0)), ("RTX 5080", (12, 0)), ("RTX 5070", (12, 0)), ("RTX 5060", (12, 0)),
    ("GB300", (10, 3)), ("B300", (10, 3)), ("GB200", (10, 0)), ("B200", (10, 0)), ("B100", (10, 0)),
    ("DGX SPARK", (12, 1)), ("GB10", (12, 1)),
    # Hopper
    ("GH200", (9, 0)), ("H200", (9, 0)), ("H100", (9, 0)), ("H800", (9, 0)), ("H20", (9, 0)),
    # Ada
    ("L40S", (8, 9)), ("L40", (8, 9)), ("L20", (8, 9)), ("L4", (8, 9)),
    ("RTX 6000 ADA", (8, 9)), ("RTX 5000 ADA", (8, 9)), ("RTX 4500 ADA", (8, 9)), ("RTX 4000 ADA", (8, 9)),
    ("RTX 4090", (8, 9)), ("RTX 4080", (8, 9)), ("RTX 4070", (8, 9)), ("RTX 4060", (8, 9)),
    # Ampere
    ("A100", (8, 0)), ("A800", (8, 0)), ("A30", (8, 0)),
    ("A40", (8, 6)), ("A16", (8, 6)), ("A10G", (8, 6)), ("A10", (8, 6)), ("A2", (8, 6)),
    ("RTX A6000", (8, 6)), ("RTX A5500", (8, 6)), ("RTX A5000", (8, 6)), ("RTX A4500", (8, 6)),
    ("RTX A4000", (8, 6)), ("RTX 3090", (8, 6)), ("RTX 3080", (8, 6)), ("RTX 3070", (8, 6)),
    ("RTX 3060", (8, 6)), ("JETSON AGX ORIN", (8, 7)), ("ORIN", (8, 7)),
    # Turing
    ("T4", (7, 5)), ("RTX 2080", (7, 5)), ("RTX 2070", (7, 5)), ("RTX 2060", (7, 5)),
    ("QUADRO RTX 8000", (7, 5)), ("QUADRO RTX 6000", (7, 5)), ("TITAN RTX", (7, 5)),
    # Volta
    ("V100", (7, 0)), ("TITAN V", (7, 0)),
    # Pascal
    ("P100", (6, 0)), ("P40", (6, 1)), ("P4", (6, 1)), ("GTX 1080", (6, 1)),
)

#: Streaming multiprocessors (NVIDIA's data sheets), matched like ``NAME_TABLE`` (the Triton top-k/top-p
#: kernel's per-program buffer has one row per SM: ``engines/vllm/budget.py``).
SM_TABLE: tuple[tuple[str, int], ...] = (
    ("H100 PCIE", 114), ("H100", 132), ("H200", 132), ("H800", 132), ("GH200", 132), ("H20", 78),
    ("B200", 148), ("A100", 108), ("A800", 108), ("L40S", 142), ("L40", 142), ("L20", 92), ("L4", 58),
    ("RTX 4090", 128), ("RTX 3090", 82), ("RTX A6000", 84), ("A40", 84), ("A10G", 80), ("A10", 72),
)

_T = TypeVar("_T")
_CC_RE = re.compile(r"^\s*(\d+)\.(\d+)\s*$")
#: NVML names MIG slices "<GPU name> MIG 3g.40gb": the slice has its parent's capability
_MIG_RE = re.compile(r"\s+MIG\s+\S+$")


def _by_name(table: Sequence[tuple[str, _T]], name: str) -> _T | None:
    """The first entry of ``table`` whose key stands in ``name`` as a whole word (NVML's spelling, a MIG
    slice as its parent GPU)."""
    upper = _MIG_RE.sub("", name.upper()).replace("-", " ")
    for key, value in table:
        if re.search(rf"(?<![A-Z0-9]){re.escape(key)}(?![A-Z0-9])", upper):
            return value
    return None


def capability_from_name(name: str) -> Capability | None:
    """The capability NVIDIA lists for a GPU named ``name`` (NVML's spelling); None when not in the table."""
    return _by_name(NAME_TABLE, name)


def sm_count_from_name(name: str) -> int | None:
    """The streaming multiprocessors of a GPU named ``name`` (``SM_TABLE``); None when not in the table."""
    return _by_name(SM_TABLE, name)


def parse_capability(text: object) -> Capability | None:
    """``"9.0"`` (or ``9.0``) -> ``(9, 0)``; None when it is not ``<major>.<minor>``."""
    if isinstance(text, bool) or not isinstance(text, (str, float, int)):
        return None
    m = _CC_RE.match(str(text))
    return (int(m.group(1)), int(m.group(2))) if m else None


def format_capability(cc: Capability) -> str:
    """``(9, 0)`` -> ``"9.0"``."""
    return f"{cc[0]}.{cc[1]}"


def as_int(cc: Capability) -> int:
    """The engines' integer spelling: ``(8, 6)`` -> 86 (vLLM ``DeviceCapability.to_int``)."""
    return cc[0] * 10 + cc[1]


def fill_from_names(gpus: Sequence[Gpu]) -> tuple[list[Gpu], str | None]:
    """``gpus`` with each missing capability derived from the GPU's name, and the machine note that says so
    (None when nothing was derived)."""
    out: list[Gpu] = []
    derived: list[str] = []
    for g in gpus:
        if g.compute_capability is None and g.name:
            cc = capability_from_name(g.name)
            if cc is not None:
                g = replace(g, compute_capability=cc)
                derived.append(f"{g.label} {format_capability(cc)}")
        out.append(g)
    if not derived:
        return out, None
    return out, ("compute capability from the GPU name (the file does not give it): " + ", ".join(derived))


def lowest(gpus: Sequence[Gpu]) -> tuple[Capability | None, list[Gpu]]:
    """The lowest capability among ``gpus`` (every rank runs the same kernels) and the GPUs whose capability
    is unknown."""
    known = [g.compute_capability for g in gpus if g.compute_capability is not None]
    unknown = [g for g in gpus if g.compute_capability is None]
    return (min(known) if known else None), unknown
