"""Engine versions and the defaults that depend on them.

Defaults move between releases (vLLM's ``gpu_memory_utilization`` went from 0.9 to 0.92 in 0.20;
SGLang replaced a step table with a formula in 0.5), so every default is looked up for a version:
the one pinned in the manifest (``engine_version``), else the one installed on the ``Host`` (read once
at the edges from package metadata, ``host.py``), else the newest we have read.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.host import BARE_HOST, Host

ENGINES = ("vllm", "sglang")

#: Newest releases whose source the memory model was checked against (reference notes).
LATEST_KNOWN = {"vllm": "0.33.0", "sglang": "0.5.23"}

GIB_MIB = 1024


def _check_engine(engine: str) -> str:
    e = engine.lower()
    if e not in ENGINES:
        raise InputError(f"unknown engine {engine!r} (expected one of: {', '.join(ENGINES)})", key="engine")
    return e


def parse_version(text: str, *, key: str = "engine_version") -> Version:
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        raise InputError(f"not a version: {text!r} (e.g. 0.11.0)", key=key) from None


def resolve_version(engine: str, pinned: str | None, host: Host = BARE_HOST) -> tuple[Version, str]:
    """The engine version defaults are taken for, and where it came from.

    ``pinned`` (the deployment's ``engine_version``) wins: it lets a CI machine without the engine
    check what the GPU host will run. Then the package installed on ``host``. Else the newest release we know,
    which the source string says, so a report never hides that it assumed.
    """
    e = _check_engine(engine)
    if pinned is not None and str(pinned).strip():
        return parse_version(pinned), "pinned"
    found = host.installed(e)
    if found is not None:
        try:
            return Version(found), "installed"
        except InvalidVersion:
            pass
    return Version(LATEST_KNOWN[e]), "assumed latest known"


# ---------------------------------------------------------------------------------------------
# vLLM defaults
# ---------------------------------------------------------------------------------------------

def vllm_gpu_memory_utilization(version: Version) -> float:
    """``--gpu-memory-utilization`` default: 0.92 from 0.20 (``vllm/config/cache.py``), 0.9 before."""
    return 0.92 if version >= Version("0.20") else 0.9


def vllm_scheduler_defaults(version: Version, *, gpu_total_mib: int | None,
                            gpu_name: str = "", max_model_len: int | None = None) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` of ``vllm serve`` (``EngineArgs._set_default_args``).

    From 0.9 (PR #17885): GPUs with >= 70 GiB that are not A100s get 8192 tokens and 1024 sequences
    for the API server; others 2048 and 256. Before 0.8 the default engine was V0, where chunked
    prefill is off up to a 32K context (0.6.6 ``EngineArgs.create_engine_config``:
    ``use_long_context = max_model_len > 32768``) and ``SchedulerConfig`` then batches a whole
    prompt: ``max(max_model_len, 2048)`` tokens, which is what its profile run allocates.
    """
    if version < Version("0.8") and max_model_len and max_model_len <= 32768:
        return max(max_model_len, 2048), 256
    big = (gpu_total_mib is not None and gpu_total_mib >= 70 * GIB_MIB and "a100" not in gpu_name.lower())
    if version >= Version("0.9") and big:
        return 8192, 1024
    return 2048, 256


def vllm_block_size(model_is_mla: bool) -> int:
    """KV block size: ``CacheConfig.DEFAULT_BLOCK_SIZE = 16``; MLA backends (FlashMLA) use 64."""
    return 64 if model_is_mla else 16


# ---------------------------------------------------------------------------------------------
# SGLang defaults
# ---------------------------------------------------------------------------------------------

def sglang_memory_defaults(gpu_mem_mib: int, tp: int) -> tuple[int, int]:
    """``(chunked_prefill_size, decode cuda graph max_bs)`` by GPU memory (0.5.23 ``memory_hook.py``).

    <20 GiB: 2048, 8; <35: 4096, 48 (tp<4) / 160; <60: 4096, 32 / 160; <90 and <160: 8192, 256 / 512;
    larger: 16384, 512.
    """
    g = gpu_mem_mib / GIB_MIB
    if g < 20:
        return 2048, 8
    if g < 35:
        return 4096, 48 if tp < 4 else 160
    if g < 60:
        return 4096, 32 if tp < 4 else 160
    if g < 160:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def sglang_prefill_graph_sizes(max_bs: int) -> list[int]:
    """Token counts SGLang captures prefill (piecewise) CUDA graphs for (``cuda_graph_hook.py``)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1024 + 1, 64)) + list(range(1280, 4096 + 1, 256))
             + list(range(4608, max_bs + 1, 512)))
    return [s for s in sizes if s <= max_bs]


#: Piecewise (prefill) CUDA graphs became SGLang's default with PR #16331 (Jan 2026).
SGLANG_PREFILL_GRAPH_DEFAULT_FROM = Version("0.5.8")
