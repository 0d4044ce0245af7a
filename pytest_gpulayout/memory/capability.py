"""A GPU's CUDA compute capability as the memory rules compare it (vLLM 0.8.0-0.10.1 fall back to
its V0 engine below 8.0: ``engines/vllm/defaults.runs_v0``).

The machine's reading (``Gpu.compute_capability``: NVML, a snapshot, a preset) where there is one,
else NVIDIA's table by GPU name (``machine/capability.py``, the one table); ``None`` when neither
knows, and the rules then keep the release's default engine.
"""

from __future__ import annotations

from pytest_gpulayout.machine import capability as table
from pytest_gpulayout.machine.facts import Gpu


def compute_capability(gpu: Gpu) -> float | None:
    """``major.minor`` of ``gpu`` as a number (7.5 for a T4)."""
    cc = gpu.compute_capability or table.capability_from_name(gpu.name)
    return None if cc is None else float(f"{cc[0]}.{cc[1]}")


def capability_from_name(name: str) -> float | None:
    """The capability NVIDIA's table gives a GPU named ``name`` (``None``: not in the table)."""
    cc = table.capability_from_name(name)
    return None if cc is None else float(f"{cc[0]}.{cc[1]}")
