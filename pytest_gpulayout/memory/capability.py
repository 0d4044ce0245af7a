"""A GPU's CUDA compute capability, for the engine rules that switch on it (vLLM 0.8.0-0.10.1 fall
back to its V0 engine below 8.0: ``engines/vllm/defaults.runs_v0``).

``Gpu.compute_capability`` is read where the machine knows it; until then (and for snapshots that
lack it) the GPU's marketing name decides, from NVIDIA's table (developer.nvidia.com/cuda-gpus).
Only the architectures below 8.0 matter to the rules, so the table lists those and the common
newer names; an unknown name gives ``None`` (the rules then keep the release's default engine).
"""

from __future__ import annotations

from pytest_gpulayout.machine.facts import Gpu

#: Substrings of ``nvidia-smi`` names (lower case), most specific first, and their capability.
_BY_NAME: tuple[tuple[str, float], ...] = (
    ("p100", 6.0), ("p40", 6.1), ("p4", 6.1), ("gtx 10", 6.1), ("titan x", 6.1),
    ("v100", 7.0), ("titan v", 7.0),
    ("t4", 7.5), ("rtx 20", 7.5), ("2080", 7.5), ("2070", 7.5), ("2060", 7.5), ("titan rtx", 7.5),
    ("quadro rtx", 7.5), ("rtx 8000", 7.5), ("rtx 6000", 7.5), ("rtx 5000", 7.5), ("rtx 4000", 7.5),
    ("gtx 16", 7.5),
    ("a100", 8.0), ("a800", 8.0), ("a30", 8.0),
    ("a10", 8.6), ("a40", 8.6), ("a6000", 8.6), ("a5000", 8.6), ("a4000", 8.6), ("rtx 30", 8.6),
    ("l4", 8.9), ("l40", 8.9), ("rtx 40", 8.9),
    ("h100", 9.0), ("h200", 9.0), ("h800", 9.0), ("h20", 9.0), ("gh200", 9.0),
    ("b200", 10.0), ("b300", 10.3), ("gb200", 10.0),
)


def compute_capability(gpu: Gpu) -> float | None:
    """``major.minor`` of ``gpu``: the machine's reading where there is one, else from its name."""
    known = getattr(gpu, "compute_capability", None)
    if isinstance(known, (int, float)):
        return float(known)
    if isinstance(known, tuple) and len(known) == 2:
        return float(f"{known[0]}.{known[1]}")
    return capability_from_name(gpu.name)


def capability_from_name(name: str) -> float | None:
    """The capability NVIDIA's table gives a GPU named ``name`` (``None``: not in the table)."""
    low = name.lower()
    # "RTX A6000" / "RTX 6000 Ada": the Ampere/Ada workstation names reuse Turing's numbers
    if "ada" in low:
        return 8.9
    if "rtx a" in low:
        return 8.6
    for key, cc in _BY_NAME:
        if key in low:
            return cc
    return None
