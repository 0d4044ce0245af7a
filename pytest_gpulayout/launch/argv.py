"""What the startup check hands the engine: its argument vector (only the flags the deployment
sets, from the engine's ``Flags``), its environment, and which GPUs it sees.

Which flags, which entry point and which reports to wait for are the engine's (``engines/<name>/``);
this module only assembles them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from packaging.version import Version

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.errors import LaunchError
from pytest_gpulayout.launch.served import Served
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.machine.probe import probe
from pytest_gpulayout.placement import PlacementError, resolve_gpus


class FlagNames(Protocol):
    """The engine's flags for what the manifest's keys say (``engine.Flags``)."""

    @property
    def model(self) -> str: ...
    @property
    def tensor_parallel_size(self) -> str: ...
    @property
    def pipeline_parallel_size(self) -> str: ...
    @property
    def data_parallel_size(self) -> str: ...
    @property
    def max_model_len(self) -> str: ...
    @property
    def memory_fraction(self) -> str: ...
    @property
    def kv_cache_dtype(self) -> str: ...


def release(engine: Served, version: str | None) -> Version | None:
    """``version`` as ``engine`` spells its releases; None when unset or not one of them."""
    if not version:
        return None
    try:
        return engine.parse_version(version)
    except Exception:
        return None


def model_path_for(dep: Deployment) -> str:
    """What the engine should load: the model directory (also when ``model`` names its config.json)."""
    path = Path(dep.model).expanduser()
    if not path.is_absolute():
        path = dep.base_dir / path
    if path.is_dir():
        return str(path)
    if path.is_file():
        return str(path.parent)
    return dep.model  # a hub id: the engine resolves it


def _fmt(value: float) -> str:
    return f"{value:g}"


def serve_argv(flags: FlagNames, command: Sequence[str], dep: Deployment, model_path: str, port: int, *,
               expert_parallel: Sequence[str]) -> list[str]:
    """A Python serving engine's argument vector for ``dep`` (never a shell string).

    ``command`` is the entry point (``launch.command`` or the engine's default); when it ends in
    ``serve`` the model is positional, otherwise it goes to ``flags.model``. Flags the deployment
    leaves unset (or at the engines' default of 1 for TP/PP/DP) are not passed, so engine defaults
    stay the engine's. ``expert_parallel``: the engine's flags for ``enable_expert_parallel``.
    ``launch.args`` come last.
    """
    cmd = list(command)
    if cmd and cmd[-1] == "serve":
        argv = [*cmd, model_path]
    else:
        argv = [*cmd, flags.model, model_path]
    for flag, size in ((flags.tensor_parallel_size, dep.tp), (flags.pipeline_parallel_size, dep.pp),
                       (flags.data_parallel_size, dep.dp)):
        if size != 1:
            argv += [flag, str(size)]
    if dep.max_model_len is not None:
        argv += [flags.max_model_len, str(dep.max_model_len)]
    if dep.memory_fraction is not None:
        argv += [flags.memory_fraction, _fmt(dep.memory_fraction)]
    if dep.kv_cache_dtype and dep.kv_cache_dtype != "auto":
        argv += [flags.kv_cache_dtype, dep.kv_cache_dtype]
    if dep.enable_expert_parallel:
        argv += list(expert_parallel)
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    if dep.launch.dummy_weights:
        argv += ["--load-format", "dummy"]
    argv += list(dep.launch.args)
    return argv


@dataclass(frozen=True)
class GpuPlan:
    """``visible``: the CUDA_VISIBLE_DEVICES entries for the engine; ``lock_keys``: one per physical GPU."""

    visible: tuple[str, ...]
    lock_keys: tuple[str, ...]


#: ``gpu_plan``'s default for ``live``: read the machine through NVML at launch time
PROBE: Literal["probe"] = "probe"
#: the lock key of a launch that sees no GPU anyone could name (no NVML, no machine, no
#: ``CUDA_VISIBLE_DEVICES``): the host, so such launches never overlap either
HOST_KEY = "host"


def live_machine() -> Machine | None:
    """The machine as NVML shows it now (numbered as this process's CUDA sees it), or None without NVML."""
    try:
        return probe()
    except Exception:  # no bindings, no driver, no GPU: the keys fall back to indices
        return None


def _uuid_like(entry: str) -> bool:
    return entry.startswith(("GPU-", "MIG-"))


def _physical(gpu: Gpu) -> str:
    """A live GPU's lock key: its NVML UUID, else its PCI bus id."""
    if gpu.uuid:
        return gpu.uuid
    return f"pci-{gpu.pci_bus_id}" if gpu.pci_bus_id else f"index-{gpu.index}"


def _lock_key(ref: int | str, entry: str, live: Machine | None) -> str:
    """The name of the physical card behind ``ref`` (a CUDA index as we see it, or a UUID) whose
    ``CUDA_VISIBLE_DEVICES`` entry is ``entry``: its NVML UUID when NVML answers now (PCI bus id
    where it has no UUID), else the UUID the entry gives, else its index as the system numbers it."""
    if live is not None:
        for g in live.gpus:
            if (isinstance(ref, int) and g.index == ref) or (isinstance(ref, str) and g.uuid == ref):
                return _physical(g)
    if isinstance(ref, str) or _uuid_like(entry):
        return entry
    return f"index-{entry}"


def gpu_plan(dep: Deployment, machine: Machine | None = None, parent_visible: str | None = None, *,
             engine: Served | None = None, live: Machine | None | Literal["probe"] = PROBE) -> GpuPlan:
    """Which GPUs the engine gets, as it will see them, and the lock key of each.

    Indices are CUDA indices as this process sees them, so when our own ``CUDA_VISIBLE_DEVICES`` is
    set they are mapped through it. An engine that parses every entry with ``int()`` (vLLM:
    ``engine.cuda_indices_only()``) gets indices (a UUID in the manifest is resolved through the
    machine); the others are given indices too.

    The lock key names the physical card, whatever described the machine (a live probe, a snapshot, a
    preset, nothing): its NVML UUID read at launch time (``live``: default, probe NVML now; a live
    ``machine`` is used as it is), else the UUID a ``CUDA_VISIBLE_DEVICES`` entry or the manifest
    gives, else its index as the system numbers it (``index-N``, through our ``CUDA_VISIBLE_DEVICES``).
    A snapshot's or preset's made-up UUIDs never name a lock.
    """
    if machine is not None:
        try:
            indices: list[int | str] = list(resolve_gpus(dep, machine))
        except PlacementError as err:
            raise LaunchError(f"cannot place {dep.layout}: {err}") from None
    else:
        indices = list(dep.gpus) if dep.gpus is not None else list(range(dep.gpu_count))
    if machine is not None and machine.source == "nvml":
        live = machine
    elif live == PROBE:
        live = live_machine()
    parent = [e.strip() for e in (parent_visible or "").split(",") if e.strip()] if parent_visible else []
    visible: list[str] = []
    keys: list[str] = []
    for ref in indices:
        if isinstance(ref, str):
            if engine is not None and engine.cuda_indices_only():
                raise LaunchError(f"gpus lists {ref!r}: {engine.display} needs CUDA indices in "
                                  f"CUDA_VISIBLE_DEVICES; give the index, or a machine (snapshot/live) that maps "
                                  f"the UUID to one")
            entry = ref
        elif parent:
            if ref >= len(parent):
                raise LaunchError(f"GPU {ref} is not visible: CUDA_VISIBLE_DEVICES={parent_visible}")
            entry = parent[ref]
        else:
            entry = str(ref)
        visible.append(entry)
        keys.append(_lock_key(ref, entry, live if isinstance(live, Machine) else None))
    return GpuPlan(tuple(visible), tuple(keys))


def visible_lock_keys(machine: Machine | None = None, parent_visible: str | None = None, *,
                      live: Machine | None | Literal["probe"] = PROBE) -> tuple[str, ...]:
    """The lock keys of every GPU an engine that takes all it sees (llama.cpp without ``gpus``) uses:
    each live GPU, else each entry of our ``CUDA_VISIBLE_DEVICES``, else each GPU of ``machine``;
    ``HOST_KEY`` when none is known (such a launch still never overlaps another like it)."""
    if machine is not None and machine.source == "nvml":
        live = machine
    elif live == PROBE:
        live = live_machine()
    if isinstance(live, Machine) and live.gpus:
        return tuple(sorted({_physical(g) for g in live.gpus}))
    parent = [e.strip() for e in (parent_visible or "").split(",") if e.strip()]
    if parent:
        return tuple(sorted({_lock_key(i, e, None) for i, e in enumerate(parent)}))
    if machine is not None and machine.gpus:
        return tuple(sorted({f"index-{g.index}" for g in machine.gpus}))
    return (HOST_KEY,)


def engine_env(dep: Deployment, visible: Sequence[str],
               base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Our environment + the deployment's GPUs + unbuffered output + ``launch.env`` (which wins)."""
    env = dict(os.environ if base is None else base)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(visible)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(dep.launch.env)
    return env


def expected_reports(engine: Served, dep: Deployment, version: Version | None) -> tuple[int, int]:
    """``(expected_engines, ranks_per_engine)`` for the log watcher, as ``engine`` logs its pools."""
    return engine.expected_reports(version, tp=dep.tp, pp=dep.pp, dp=dep.dp)
