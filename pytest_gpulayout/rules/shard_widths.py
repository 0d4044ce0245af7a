"""Per-rank widths the engines refuse for quantized and expert-parallel layouts, by release.

Head and vocabulary divisibility (``heads.tp_problems``) is not enough: a checkpoint's quantization
adds rules on every rank's *share* of a layer, and the engines raise at load time when a share does
not line up. Those rules differ per engine and release, so each engine holds its own, read from its
released wheels with their exact error texts: ``engines/vllm/divisibility.py`` (block-FP8 dense and
MoE shares, the 0.19 merged-layer skip and the 0.29 MoE scale refinement, the WNA16 / Marlin kernels'
groups and tiles) and ``engines/sglang/divisibility.py`` (block-FP8, Marlin groups, the bare
compressed-tensors assert, whole experts per EP rank). The rules ask the engine object
(``Engine.shard_problems``); the engine-neutral pieces (each rank's share of a layer, ``WidthProblem``)
are in ``pytest_gpulayout/shards.py``.

What stays here is the same for every engine: the widths besides heads / MLP / vocab that the
parallel layers split by TP.
"""

from __future__ import annotations

from pytest_gpulayout.engine import ShardLayout
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.shards import WidthProblem


def extra_tp_widths(model: ModelSpec) -> list[tuple[str, int]]:
    """Widths besides heads / MLP / vocab that the parallel layers ``divide()`` by TP
    (vllm ``distributed/utils.py divide``): the shared expert, the linear-attention state."""
    out: list[tuple[str, int]] = []
    if model.is_moe and model.shared_expert_intermediate_size:
        out.append(("shared expert MLP width", model.shared_expert_intermediate_size))
    if model.linear_state is not None and model.state_layers:
        out.extend((w, v) for w, v in model.linear_state.tp_widths() if v)
    return out


def shard_problems(model: ModelSpec, lay: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
    """Every share ``lay`` gets that its engine refuses, and notes about shares it adapts."""
    return lay.engine.rules.shard_problems(model, lay)
