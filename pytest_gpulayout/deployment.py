"""One deployment from the manifest: a model, an engine and a TP x PP x DP layout, plus what it must hold.

Plain frozen data; ``manifest.py`` builds and validates it, checks read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_gpulayout.origin import Origin
from pytest_gpulayout.workload import MeasureSpec


@dataclass(frozen=True)
class Require:
    """What the deployment must deliver. ``None`` means: not demanded."""

    kv_tokens: int | None = None
    concurrency: int | None = None
    tp_links: tuple[str, ...] | None = None      # link kinds accepted inside a TP group
    balance_headroom_gib: float = 1.0            # margin above SGLang's 0.9 rule below which we warn


@dataclass(frozen=True)
class Launch:
    """How the ``startup`` check launches the engine (opt-in)."""

    enabled: bool = False
    command: tuple[str, ...] | None = None       # None: the engine's default entry point
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    timeout_s: float = 900.0
    dummy_weights: bool = True                   # --load-format dummy: same pool, nothing read from disk


class ParallelShape:
    """TP/PP/DP arithmetic shared by anything that has the three ``*_parallel_size`` fields
    (a deployment, a planner row), so the words and numbers for a layout are spelled once."""

    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    #: attention-DP groups inside each TP group (SGLang's ``--enable-dp-attention`` / ``--attn-dp-size``): they
    #: share the replica's TP x PP GPUs, so they add none; 1 where the engine runs no attention DP
    attention_data_parallel_size: int = 1

    @property
    def tp(self) -> int:
        return self.tensor_parallel_size

    @property
    def pp(self) -> int:
        return self.pipeline_parallel_size

    @property
    def dp(self) -> int:
        return self.data_parallel_size

    @property
    def attention_tp(self) -> int:
        """Ranks each attention layer is split over: TP, or TP / attention DP (SGLang's ``attn_tp_size``)."""
        return max(1, self.tp // max(1, self.attention_data_parallel_size))

    @property
    def world_size(self) -> int:
        """GPUs one replica spans (TP x PP)."""
        return self.tp * self.pp

    @property
    def gpu_count(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def layout(self) -> str:
        inside = (f" (attention DP={self.attention_data_parallel_size} inside TP)"
                  if self.attention_data_parallel_size > 1 else "")
        return f"TP={self.tp}{inside} PP={self.pp} DP={self.dp}"


@dataclass(frozen=True)
class Deployment(ParallelShape):
    name: str
    model: str                                   # as written: path (relative to base_dir) or catalog id
    engine: str = "vllm"
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    #: see ``ParallelShape``: set from the engine's own reading of the line (``CommandLine.as_run``)
    attention_data_parallel_size: int = 1
    gpus: tuple[int | str, ...] | None = None    # CUDA indices or UUIDs; None: first tp*pp*dp visible
    max_model_len: int | None = None
    memory_fraction: float | None = None         # None: engine default for engine_version
    kv_cache_dtype: str = "auto"
    engine_version: str | None = None            # pins engine defaults where the engine is not installed
    enable_expert_parallel: bool = False
    require: Require = field(default_factory=Require)
    launch: Launch = field(default_factory=Launch)
    base_dir: Path = field(default_factory=Path.cwd)   # manifest's directory: relative paths resolve here
    manifest_path: Path | None = None
    #: the engine's own options block, parsed by its folder (``engines/llamacpp/manifest.py``: the
    #: ``llamacpp:`` key); engine-neutral code never reads it
    llamacpp: Any = None
    #: the ``measure:`` block (``gpulayout measure``: workload.py); None when the manifest has none
    measure: MeasureSpec | None = None
    #: where an artifact's deployment stands (``origin.py``: the object, its pod, its image); None for a manifest's
    origin: Origin | None = None
