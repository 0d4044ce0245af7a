"""vLLM's CUDA-graph memory estimate, which it takes out of the KV budget from 0.20.

What the engine does (read in the 0.20.0, 0.21.0, 0.28.0 and 0.32.0 wheels):

* ``v1/worker/gpu_worker.py determine_available_memory`` (0.20.0 L363-423, 0.32.0 L678-736): after the
  profile run, where ``compilation_config.cudagraph_mode != NONE``, ``cudagraph_memory_estimate =
  model_runner.profile_cudagraph_memory()``, and ``available_kv_cache_memory_bytes = requested_memory -
  non_kv_cache_memory - cudagraph_memory_estimate_applied``, the estimate applied when
  ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` is set. ``gpu_memory_utilization`` itself is not changed:
  the "equivalent to --gpu-memory-utilization=X" line (0.20.0 L455-468) only reports ``util - estimate /
  total``.
* ``envs.py``: the variable defaults to "1" from 0.20.0 (L1724-1726; 0.21.0 L1768; 0.32.0 L2221) and to
  "0" in 0.19.1 (L1654), which prints the estimate without subtracting it. The log line says "default
  since v0.21.0", but the 0.20.0 wheel already defaults to 1: ``ESTIMATE_SUBTRACTED_SINCE`` is 0.20.
* ``v1/worker/gpu_model_runner.py profile_cudagraph_memory`` (0.20.0 L5949-6043, 0.32.0 L6333-6480): for
  each mode ``cudagraph_dispatcher.get_capture_descs()`` returns (PIECEWISE, then FULL; largest first) it
  captures the first two sizes and measures free memory around each; the estimate is ``max`` over modes of
  the first capture + ``sum`` over modes of ``(n_graphs - 1) x max(second capture, 1 MiB)``.

The graph counts are exact here (``capture_sizes``, ``graph_counts``); what one capture takes is measured on
the GPU by the engine and is modelled here from public logs (``tests/data/calibration/cudagraph_estimates.json``):
``PER_GRAPH_LAYER_MIB`` per extra graph per layer of the rank, at least ``FIRST_CAPTURE_GIB``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.machine.capability import capability_from_name
from pytest_gpulayout.machine.facts import GIB, MIB

#: ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to "1" (0.20.0 ``envs.py`` L1724-1726; "0" in 0.19.1).
ESTIMATE_SUBTRACTED_SINCE = Version("0.20")
#: The variable exists from 0.18.0 (``envs.py`` L1635, default "0"; absent in 0.17.1): set to 1 there, 0.18-0.19
#: subtract the estimate too; set to 0 from 0.20 they subtract nothing (``gpu_worker.py
#: determine_available_memory``: ``cudagraph_memory_estimate_applied = estimate if
#: envs.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS else 0``).
ESTIMATE_ENV = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
ESTIMATE_ENV_SINCE = Version("0.18")


def subtracts_estimate(version: Version, env: Mapping[str, str]) -> bool:
    """Whether the release takes its CUDA-graph estimate out of the KV budget with ``env`` (``bool(int(...))``
    as ``envs.py`` reads it; a value that is not an integer: the default)."""
    raw = (env.get(ESTIMATE_ENV) or "").strip()
    if version >= ESTIMATE_ENV_SINCE and raw.lstrip("-").isdigit():
        return bool(int(raw))
    return version >= ESTIMATE_SUBTRACTED_SINCE


def _compilation(typed: Mapping[str, object]) -> Mapping[str, object]:
    """``--compilation-config`` / ``-cc`` / ``-O {json}`` as the release parsed it (a mapping from 0.10; 0.8-0.9
    keep the JSON text)."""
    raw = typed.get("compilation_config")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, Mapping) else {}


def given_capture_sizes(typed: Mapping[str, object]) -> list[int] | None:
    """``compilation_config.cudagraph_capture_sizes`` where the line sets it (``-cc '{"cudagraph_capture_sizes":
    [...]}'``, ``--compilation-config.cudagraph_capture_sizes``): ``_set_cudagraph_sizes`` then captures those
    (0.21.0 ``config/vllm.py`` L1540-1589: ``if self.compilation_config.cudagraph_capture_sizes is not None``,
    sorted, those above ``max_num_batched_tokens`` dropped); None: the default list."""
    sizes = _compilation(typed).get("cudagraph_capture_sizes")
    if not isinstance(sizes, list):
        return None
    return [s for s in sizes if isinstance(s, int) and not isinstance(s, bool) and s > 0]


def given_max_capture_size(typed: Mapping[str, object], given: Mapping[str, str | None]) -> int | None:
    """``--max-cudagraph-capture-size`` or ``compilation_config.max_cudagraph_capture_size``."""
    flag = _int_or_none(given.get("--max-cudagraph-capture-size"))
    if flag is not None:
        return flag
    got = _compilation(typed).get("max_cudagraph_capture_size")
    return got if isinstance(got, int) and not isinstance(got, bool) else None
#: ``VllmConfig._set_cudagraph_sizes`` appends ``max_num_batched_tokens`` when it is within the capture
#: ceiling (0.21.0 ``config/vllm.py`` L1580-1585; not in 0.20.0).
CAPTURES_MAX_NUM_TOKENS_SINCE = Version("0.21")
#: The default ceiling is 1024 on data-center Blackwell (``is_device_capability_family(100)``), 512
#: elsewhere: 0.28.0 ``config/vllm.py`` L1937-1939 and 0.32.0; 0.21.0 has 512 everywhere (0.22-0.27 not read).
BLACKWELL_CEILING_SINCE = Version("0.28")
#: ``uniform_decode_sizes = [max_num_seqs]`` is appended when within the ceiling (0.32.0 ``config/vllm.py``
#: L2447-2448; not in 0.28.0).
CAPTURES_MAX_NUM_SEQS_SINCE = Version("0.32")
DEFAULT_CEILING = 512
BLACKWELL_CEILING = 1024

#: What one more captured graph adds, per layer of the rank (the pieces of a PIECEWISE graph and the
#: kernels of a FULL one both grow with the layers). The envelope (largest) of ``estimate / (layers x
#: extra graphs)`` over the logs of releases that subtract the estimate (0.20+, ``fit: true`` in
#: ``tests/data/calibration/cudagraph_estimates.json``): 0.26-0.30 MiB. The 0.18/0.19 logs held out from
#: it span 0.30-0.80 MiB (A100 with driver 535, 0.80; TP 4 over PCIe with NCCL in the graphs, 0.42), so
#: this under-estimates some GPUs: the data are too scattered for a tight figure.
PER_GRAPH_LAYER_MIB = 0.3
#: At least this much: three logs with one graph per mode (PIECEWISE=1, FULL=1) estimate 0.36, 0.43 and
#: 0.47 GiB, the first capture alone (its workspaces; FULL's first capture runs at ``max_num_tokens //
#: size`` tokens per request). The smallest of them.
FIRST_CAPTURE_GIB = 0.36
#: The range the public logs show for the default capture sizes (51 PIECEWISE + 35 FULL graphs), quoted
#: in the pool's note.
OBSERVED_GIB = (0.37, 2.73)
#: ``per_graph`` is never under 1 MiB (``profile_cudagraph_memory``: "at least 1 MiB per graph").
MIN_PER_GRAPH_BYTES = 1 * MIB


@dataclass(frozen=True)
class CudaGraphs:
    """The graphs vLLM captures per mode and its estimate as modelled here."""

    piecewise: int
    full: int
    largest_piecewise: int
    largest_full: int
    layers: int
    estimate_bytes: int

    @property
    def count(self) -> int:
        return self.piecewise + self.full

    def describe(self) -> str:
        parts = []
        if self.piecewise:
            parts.append(f"PIECEWISE={self.piecewise} (largest={self.largest_piecewise})")
        if self.full:
            parts.append(f"FULL={self.full} (largest={self.largest_full})")
        return ", ".join(parts)


def _sm100(gpu_name: str) -> bool:
    """SM 10.x (``is_device_capability_family(100)``) by the GPU's name (``machine/capability.py``); the RTX
    50xx and RTX PRO Blackwell cards are SM 12.x."""
    cc = capability_from_name(gpu_name)
    return cc is not None and cc[0] == 10


def capture_sizes(version: Version, *, max_num_seqs: int, max_num_batched_tokens: int, gpu_name: str = "",
                  max_capture_size: int | None = None) -> list[int]:
    """``cudagraph_capture_sizes`` as ``VllmConfig._set_cudagraph_sizes`` sets them by default (0.21.0
    ``config/vllm.py`` L1540-1589, 0.32.0 L2340-2500; no speculative decoding, no sequence parallelism):
    1, 2, 4, every 8 below 256, every 16 from 256, up to ``min(2 x max_num_seqs, 512 (1024 on SM 10.x),
    max_num_batched_tokens)``."""
    ceiling = BLACKWELL_CEILING if version >= BLACKWELL_CEILING_SINCE and _sm100(gpu_name) else DEFAULT_CEILING
    top = max_capture_size if max_capture_size is not None else min(max_num_seqs * 2, ceiling)
    top = min(max_num_batched_tokens, top)
    if top < 1:
        return []
    sizes = [i for i in (1, 2, 4) if i <= top]
    if top >= 8:
        sizes += list(range(8, min(top + 1, 256), 8))
    if top >= 256:
        sizes += list(range(256, top + 1, 16))
    if max_capture_size is None:
        if version >= CAPTURES_MAX_NUM_TOKENS_SINCE and max_num_batched_tokens <= top:
            sizes.append(max_num_batched_tokens)
        if version >= CAPTURES_MAX_NUM_SEQS_SINCE and max_num_seqs <= top:
            sizes.append(max_num_seqs)
    return sorted(set(sizes))


def graphs_off(given: Mapping[str, str | None], *, enforce_eager: bool,
               typed: Mapping[str, object] | None = None) -> bool:
    """No graphs: ``--enforce-eager``, ``-O0`` (``OPTIMIZATION_LEVEL_00``: ``cudagraph_mode`` NONE) or a
    ``--compilation-config`` whose ``cudagraph_mode`` is NONE."""
    if enforce_eager:
        return True
    for flag in ("--optimization-level", "-O"):
        if (given.get(flag) or "").strip() == "0":
            return True
    mode_typed = _compilation(typed or {}).get("cudagraph_mode")
    if (isinstance(mode_typed, str) and mode_typed.upper() == "NONE") or mode_typed == 0:
        return True
    config = given.get("--compilation-config") or given.get("-cc") or ""
    if config:
        try:
            mode = json.loads(config).get("cudagraph_mode")
        except (ValueError, AttributeError):
            mode = "NONE" if "NONE" in config.upper() and "CUDAGRAPH_MODE" in config.upper() else None
        if (isinstance(mode, str) and mode.upper() == "NONE") or mode == 0:
            return True
    return False


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def cuda_graphs(version: Version, *, layers: int, max_num_seqs: int, max_num_batched_tokens: int,
                gpu_name: str = "", given: Mapping[str, str | None] | None = None,
                typed: Mapping[str, object] | None = None) -> CudaGraphs:
    """The graphs the default ``FULL_AND_PIECEWISE`` mode captures and the estimate for a rank holding
    ``layers`` layers. PIECEWISE: every capture size (``cudagraph_dispatcher.initialize_cudagraph_keys``,
    0.21.0 L188-202); FULL: the sizes up to ``max_num_seqs`` (uniform decode, L206-230).

    ``estimate = max(FIRST_CAPTURE_GIB, PER_GRAPH_LAYER_MIB x layers x sum over modes of (n - 1))``
    """
    given, typed = given or {}, typed or {}
    listed = given_capture_sizes(typed)
    if listed is not None:
        sizes = sorted({s for s in listed if s <= max_num_batched_tokens})
    else:
        sizes = capture_sizes(version, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                              gpu_name=gpu_name, max_capture_size=given_max_capture_size(typed, given))
    full = [s for s in sizes if s <= max_num_seqs]
    extra = max(len(sizes) - 1, 0) + max(len(full) - 1, 0)
    per_graph = max(PER_GRAPH_LAYER_MIB * MIB * layers, MIN_PER_GRAPH_BYTES)
    estimate = max(FIRST_CAPTURE_GIB * GIB, per_graph * extra) if sizes else 0.0
    return CudaGraphs(piecewise=len(sizes), full=len(full), largest_piecewise=max(sizes, default=0),
                      largest_full=max(full, default=0), layers=layers, estimate_bytes=math.ceil(estimate))
