"""What the startup check hands the engine: its argument vector (only the flags the deployment
sets, from the engine module's ``Flags``), its environment, and which GPUs it sees."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.errors import InputError, LaunchError
from pytest_gpulayout.launch.verdict import _ENGINE_NAMES
from pytest_gpulayout.machine.facts import Machine


def _version_tuple(version: str | None) -> tuple[int, ...] | None:
    if not version:
        return None
    try:
        from packaging.version import Version

        return Version(version).release
    except Exception:
        return None


def default_command(engine: str, engine_version: str | None = None) -> list[str]:
    """The engine's own entry point, from the Python running us (same virtual environment)."""
    if engine == "sglang":
        return [sys.executable, "-m", "sglang.launch_server"]
    v = _version_tuple(engine_version)
    if v is not None and v < (0, 5):  # before `vllm serve`
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    beside = Path(sys.executable).parent / "vllm"
    return [str(beside) if beside.is_file() else "vllm", "serve"]


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


def engine_argv(dep: Deployment, model_path: str, port: int, *,
                engine_version: str | None = None) -> list[str]:
    """The engine's argument vector for ``dep`` (never a shell string).

    ``launch.command`` replaces the entry point; when it ends in ``serve`` the model is positional,
    otherwise it goes to ``--model`` (vLLM) / ``--model-path`` (SGLang). Flags the deployment leaves
    unset (or at the engines' default of 1 for TP/PP/DP) are not passed, so engine defaults stay
    the engine's. ``launch.args`` come last.
    """
    if dep.engine not in _ENGINE_NAMES:
        raise InputError(f"engine must be vllm or sglang, not {dep.engine!r}",
                         key=f"deployments.{dep.name}.engine")
    cmd = list(dep.launch.command) if dep.launch.command else default_command(dep.engine, engine_version)
    if cmd and cmd[-1] == "serve":
        argv = [*cmd, model_path]
    else:
        argv = [*cmd, "--model" if dep.engine == "vllm" else "--model-path", model_path]
    if dep.engine == "vllm":
        flags = {"tp": "--tensor-parallel-size", "pp": "--pipeline-parallel-size",
                 "dp": "--data-parallel-size", "len": "--max-model-len", "mem": "--gpu-memory-utilization"}
    else:
        flags = {"tp": "--tp-size", "pp": "--pp-size", "dp": "--dp-size", "len": "--context-length",
                 "mem": "--mem-fraction-static"}
    for key, size in (("tp", dep.tp), ("pp", dep.pp), ("dp", dep.dp)):
        if size != 1:
            argv += [flags[key], str(size)]
    if dep.max_model_len is not None:
        argv += [flags["len"], str(dep.max_model_len)]
    if dep.memory_fraction is not None:
        argv += [flags["mem"], _fmt(dep.memory_fraction)]
    if dep.kv_cache_dtype and dep.kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", dep.kv_cache_dtype]
    if dep.enable_expert_parallel:
        argv += ["--enable-expert-parallel"] if dep.engine == "vllm" else ["--ep-size", str(dep.tp)]
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


def gpu_plan(dep: Deployment, machine: Machine | None = None,
             parent_visible: str | None = None) -> GpuPlan:
    """Which GPUs the engine gets, as it will see them, and the lock key of each.

    Indices are CUDA indices as this process sees them, so when our own ``CUDA_VISIBLE_DEVICES`` is
    set they are mapped through it. vLLM parses every entry with ``int()``, so vLLM gets indices
    (a UUID in the manifest is resolved through the machine); SGLang is given indices too.

    The lock key names the physical card: its NVML UUID when the machine was probed live, else the
    CUDA index it runs on (``index-N``). Two manifests that describe GPU 0 with different presets or
    snapshots (and so different made-up UUIDs) still take the same lock.
    """
    if machine is not None:
        from pytest_gpulayout.placement import PlacementError, resolve_gpus

        try:
            indices: list[int | str] = list(resolve_gpus(dep, machine))
        except PlacementError as err:
            raise LaunchError(f"cannot place {dep.layout}: {err}") from None
    else:
        indices = list(dep.gpus) if dep.gpus is not None else list(range(dep.gpu_count))
    parent = [e.strip() for e in (parent_visible or "").split(",") if e.strip()] if parent_visible else []
    visible: list[str] = []
    keys: list[str] = []
    for ref in indices:
        uuid = ""
        if isinstance(ref, str):
            if dep.engine == "vllm":
                raise LaunchError(f"gpus lists {ref!r}: vLLM needs CUDA indices in CUDA_VISIBLE_DEVICES; "
                                  f"give the index, or a machine (snapshot/live) that maps the UUID to one")
            entry = ref
            uuid = ref
        else:
            if parent:
                if ref >= len(parent):
                    raise LaunchError(f"GPU {ref} is not visible: CUDA_VISIBLE_DEVICES={parent_visible}")
                entry = parent[ref]
            else:
                entry = str(ref)
            if machine is not None and machine.source == "nvml":  # a snapshot's or preset's UUIDs name
                with_uuid = [g.uuid for g in machine.gpus if g.index == ref and g.uuid]  # no real card
                uuid = with_uuid[0] if with_uuid else ""
        visible.append(entry)
        keys.append(uuid or f"index-{entry}")
    return GpuPlan(tuple(visible), tuple(keys))


def engine_env(dep: Deployment, visible: Sequence[str],
               base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Our environment + the deployment's GPUs + unbuffered output + ``launch.env`` (which wins)."""
    env = dict(os.environ if base is None else base)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(visible)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(dep.launch.env)
    return env


def expected_reports(dep: Deployment, engine_version: str | None) -> tuple[int, int]:
    """``(expected_engines, ranks_per_engine)`` for the log watcher.

    vLLM >= 0.15 logs one KV size line per engine core (one per DP replica); 0.8 - 0.11 one per worker
    (``tp * pp`` per replica) before unifying them. SGLang logs one per rank and one summary per replica.
    """
    if dep.engine == "sglang":
        return dep.dp, dep.tp * dep.pp
    v = _version_tuple(engine_version)
    if v is not None and (0, 8) <= v < (0, 15):
        return dep.dp * dep.tp * dep.pp, 1
    return dep.dp, 1
