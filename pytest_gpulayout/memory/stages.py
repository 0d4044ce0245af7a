"""Pipeline stages: which layers each PP rank holds, as the engine splits them."""

from __future__ import annotations

from collections.abc import Sequence

from packaging.version import Version

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.memory.common import MemoryEngine, engine_version

# ---------------------------------------------------------------------------------------------
# Pipeline split
# ---------------------------------------------------------------------------------------------

def _parse_partition(partition: str | Sequence[int], num_layers: int, pp: int, env: str) -> tuple[int, ...]:
    if isinstance(partition, str):
        try:
            parts = tuple(int(x) for x in partition.split(","))
        except ValueError:
            raise InputError(f"invalid partition string {partition!r}: a comma list of layer counts per "
                             f"stage, e.g. 16,16", key=env) from None
    else:
        parts = tuple(int(x) for x in partition)
    if len(parts) != pp:
        raise InputError(f"{len(parts)} stages given but pipeline_parallel_size is {pp}", key=env)
    if sum(parts) != num_layers:
        raise InputError(f"stages sum to {sum(parts)} layers but the model has {num_layers}", key=env)
    if any(p < 0 for p in parts):
        raise InputError(f"negative layer count in {partition!r}", key=env)
    return parts


def remainder_before_last(num_layers: int, pp: int) -> tuple[int, ...]:
    """``num_layers // pp`` each; the remainder one layer each to ``partitions[-2]``, ``[-3]``, ... (never
    the last stage, which also holds the lm_head): vLLM >= 0.7 (``vllm/distributed/utils.py
    get_pp_indices``)."""
    base, rem = divmod(num_layers, pp)
    parts = [base] * pp
    for i in range(2, rem + 2):
        parts[-i] += 1
    return tuple(parts)


def remainder_on_last(num_layers: int, pp: int) -> tuple[int, ...]:
    """The whole remainder on the last stage: vLLM before 0.7."""
    base, rem = divmod(num_layers, pp)
    return tuple([base] * (pp - 1) + [base + rem])


def remainder_to_last_stages(num_layers: int, pp: int) -> tuple[int, ...]:
    """The **last** ``num_layers % pp`` stages get one extra layer: SGLang
    (``python/sglang/srt/distributed/utils.py get_pp_indices``)."""
    base, rem = divmod(num_layers, pp)
    return tuple(base + (1 if i >= pp - rem else 0) for i in range(pp))


def pp_partition(num_layers: int, pp: int, engine: MemoryEngine, *,
                 partition: str | Sequence[int] | None = None,
                 version: Version | str | None = None) -> tuple[int, ...]:
    """Layers per pipeline stage, as the engine splits them (``engine.stage_split``: one of the splits
    above, by engine and release).

    ``partition`` is the user's override (the engine's ``pp_partition_env``, e.g.
    ``VLLM_PP_LAYER_PARTITION`` / ``SGLANG_PP_LAYER_PARTITION``, a comma list or a sequence); the caller
    passes it explicitly, this function never reads the environment. A wrong count or sum is an
    ``InputError`` naming the variable.
    """
    if pp < 1:
        raise ValueError(f"pipeline_parallel_size must be >= 1, got {pp}")
    if partition is not None:
        return _parse_partition(partition, num_layers, pp, engine.pp_partition_env)
    return engine.stage_split(num_layers, pp, None if version is None else engine_version(version, engine))


def stage_ranges(num_layers: int, pp: int, engine: MemoryEngine, *,
                 partition: str | Sequence[int] | None = None,
                 version: Version | str | None = None) -> tuple[range, ...]:
    """The layer indices each stage holds (``pp_partition`` laid end to end)."""
    out, start = [], 0
    for n in pp_partition(num_layers, pp, engine, partition=partition, version=version):
        out.append(range(start, start + n))
        start += n
    return tuple(out)
