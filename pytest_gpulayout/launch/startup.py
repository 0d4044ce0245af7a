"""The ``startup`` check: launch the engine with the deployment's flags, read its real KV pool, stop it.

The static checks predict; this one asks the engine. It builds the engine's argument vector from the
deployment (only the flags the deployment sets: an unset value stays the engine's default), runs it
through the launcher until every engine has logged its KV pool, and judges the real numbers against
``require``. ``--load-format dummy`` is the default (``launch.dummy_weights``): the engine allocates
weights at full size without reading them, so the pool is the same as in production and the
launch takes seconds to minutes instead of a full model load.

``make_launcher`` is the body of the ``gpulayout_launch`` fixture for users' own regression tests.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.errors import InputError, LaunchError
from pytest_gpulayout.findings import Finding, Status, failed, passed, warned, worst
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.launch.facts import StartupFacts
from pytest_gpulayout.launch.launcher import LaunchResult, free_port, launch
from pytest_gpulayout.launch.logparse import (
    HEADS_NOT_DIVISIBLE,
    INSUFFICIENT_FREE_MEMORY,
    KV_CACHE_TOO_SMALL,
    NO_KV_MEMORY,
    OOM,
    TP_MEMORY_UNBALANCED,
)
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.spec import ModelSpec

CHECK = "startup"
#: How an engine is asked to stop: Ctrl-C, as in the terminal it was started from. vLLM 0.32's API
#: server does not exit on SIGTERM before uvicorn is up (it hangs until SIGKILL, measured: 10 s of
#: grace lost per launch); on SIGINT the API server, engine core and workers all exit in seconds.
STOP_SIGNAL = signal.SIGINT
TAIL_IN_MESSAGE = 12
#: actual/predicted outside this band is called out in the message (the real pool decides the verdict)
PREDICTION_BAND = (0.5, 2.0)
_ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
_LOG_COUNTER = itertools.count(1)

_FIXES = {
    TP_MEMORY_UNBALANCED: "free memory differs between the TP ranks (SGLang demands the least free >= 0.9 x "
                          "each rank's free): stop the other tenants or choose GPUs with equal free memory",
    HEADS_NOT_DIVISIBLE: "choose a tensor_parallel_size that divides the model's attention heads "
                         "(and pipeline_parallel_size that suits its layers)",
    KV_CACHE_TOO_SMALL: "one max_model_len request does not fit in the KV pool: lower max_model_len, raise "
                        "memory_fraction, use kv_cache_dtype: fp8 or spread the model over more GPUs",
    INSUFFICIENT_FREE_MEMORY: "the GPU has less free memory than memory_fraction asks for: lower "
                              "memory_fraction or free the GPU",
    NO_KV_MEMORY: "the weights leave no memory for the KV cache: raise memory_fraction, use more GPUs "
                  "(TP/PP) or a quantized model",
    OOM: "out of GPU memory: use more GPUs (TP/PP), a quantized model, or a lower memory_fraction",
}


@dataclass(frozen=True)
class StartupReport:
    """What ``gpulayout_launch`` returns: the real pool plus the ``startup`` finding about it."""

    kv_tokens: int | None
    kv_tokens_all: tuple[int, ...]
    max_concurrency: float | None
    seconds_to_kv: float | None
    error_kind: str | None
    log_path: Path | None
    finding: Finding
    result: LaunchResult | None = None   # None when the engine could not be started at all

    @property
    def ok(self) -> bool:
        return self.finding.status.value != "fail"


# ------------------------------------------------------------------------------------------------
# Argument vector and environment
# ------------------------------------------------------------------------------------------------
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


# ------------------------------------------------------------------------------------------------
# The check
# ------------------------------------------------------------------------------------------------
def _log_path(log_dir: Path, dep: Deployment) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in dep.name) or "deployment"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return log_dir / f"startup-{safe}-{stamp}-{os.getpid()}-{next(_LOG_COUNTER)}.log"


def _tail_text(lines: Sequence[str], n: int = TAIL_IN_MESSAGE) -> str:
    shown = [ln for ln in lines if ln.strip()][-n:]
    return "\n".join("    " + ln[:300] for ln in shown)


MEMORY_SLACK_MIB = 256     # free memory may wobble by the driver's own bookkeeping
MEMORY_WAIT_S = 30.0       # the driver frees a dead process's memory within seconds


def _try_probe(reprobe: Callable[[], Machine] | None) -> Machine | None:
    if reprobe is None:
        return None
    try:
        return reprobe()
    except Exception:  # a probe that fails here only loses the after-check, never the launch
        return None


def memory_not_released(before: Machine, reprobe: Callable[[], Machine], indices: Sequence[int], *,
                        wait_s: float | None = None, sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """GPUs (machine ``indices``) with less free memory than before the launch, after waiting up to
    ``wait_s``. Matched by UUID, so a re-probe that numbers GPUs differently still compares the same cards.
    """
    wanted = [g for g in before.gpus if g.index in set(indices)]
    deadline = time.monotonic() + (MEMORY_WAIT_S if wait_s is None else wait_s)
    while True:
        try:
            after = reprobe()
        except Exception:
            return []
        short = []
        for g in wanted:
            now = next((h for h in after.gpus if h.uuid and h.uuid == g.uuid), None)
            if now is None or g.memory_free_mib is None or now.memory_free_mib is None:
                continue
            if now.memory_free_mib < g.memory_free_mib - MEMORY_SLACK_MIB:
                short.append(f"GPU{g.index} has {(g.memory_free_mib - now.memory_free_mib) / 1024:.2f} GiB less free "
                             f"than before the launch")
        if not short or time.monotonic() >= deadline:
            return short
        sleep(1.0)


def launch_deployment(
    dep: Deployment,
    model: ModelSpec | None = None,
    *,
    machine: Machine | None = None,
    prediction_tokens: int | None = None,
    log_dir: Path,
    engine_version: str | None = None,
    stop_when: str = "kv",
    grace_s: float = 10.0,
    reprobe: Callable[[], Machine] | None = None,
    host: Host = BARE_HOST,
) -> StartupReport:
    """Launch ``dep`` briefly and judge what it allocated.

    Never raises for engine trouble (not found, failed, timed out): that is the finding. On a live
    machine (``machine.source == "nvml"``, or with ``reprobe`` given) the GPUs' free memory is read
    before the launch and again after the tree is gone: memory that did not come back means something
    of the engine survives outside its process tree (or another tenant arrived), and is reported.
    """
    if dep.engine == "llamacpp":  # its own argv, log lines and verdict (launch/llamacpp.py)
        from pytest_gpulayout.launch.llamacpp import launch_llamacpp

        finding, res = launch_llamacpp(dep, model, machine=machine, log_path=_log_path(Path(log_dir), dep),
                                       grace_s=grace_s)
        d = finding.data
        return StartupReport(d.get("kv_tokens"), (d["kv_tokens"],) if d.get("kv_tokens") else (),
                             d.get("max_concurrency"), d.get("seconds_to_kv"), d.get("error_kind"),
                             res.log_path if res is not None else None, finding, res)
    name = _ENGINE_NAMES.get(dep.engine, dep.engine)
    version = engine_version or dep.engine_version
    if version is None and not dep.launch.command:  # our environment's engine is the one launched
        version = host.installed(dep.engine)
    try:
        plan = gpu_plan(dep, machine, os.environ.get("CUDA_VISIBLE_DEVICES"))
        port = free_port()
        argv = engine_argv(dep, model_path_for(dep), port, engine_version=version)
        engines, ranks = expected_reports(dep, version)
        log_path = _log_path(Path(log_dir), dep)
        if reprobe is None and machine is not None and machine.source == "nvml":
            from pytest_gpulayout.machine.probe import probe as reprobe
        before = _try_probe(reprobe)
        result = launch(argv, env=engine_env(dep, plan.visible), expected_engines=engines, engine=dep.engine,
                        ranks_per_engine=ranks, timeout_s=dep.launch.timeout_s, log_path=log_path,
                        grace_s=grace_s, stop_when=stop_when, gpus=plan.lock_keys, stop_signal=STOP_SIGNAL)
    except LaunchError as err:
        cmd = list(dep.launch.command) if dep.launch.command else default_command(dep.engine, version)
        if "was not found" in str(err) or "not executable" in str(err):
            module = "vllm.entrypoints.openai.api_server" if dep.engine == "vllm" else "sglang.launch_server"
            msg = (f"{dep.name}: cannot launch {name}: {cmd[0]!r} was not found or is not executable. "
                   f"Install {name} where the check runs, or set launch.command in the manifest to the "
                   f"engine's entry point, e.g. [/path/to/venv/bin/python, -m, {module}]")
        else:
            msg = f"{dep.name}: cannot launch {name}: {err}"
        finding = failed(CHECK, msg, StartupFacts(kv_tokens=None, max_concurrency=None, seconds_to_kv=None,
                                                  error_kind=None, predicted_kv_tokens=prediction_tokens,
                                                  ratio=None, log_path=None, command=tuple(cmd)))
        return StartupReport(None, (), None, None, None, None, finding, None)
    finding = judge(dep, model, result, prediction_tokens=prediction_tokens)
    if before is not None and reprobe is not None:
        from pytest_gpulayout.placement import PlacementError, resolve_gpus

        try:
            short = memory_not_released(before, reprobe, resolve_gpus(dep, before))
        except PlacementError:
            short = []
        if short:
            finding = Finding(CHECK, worst([finding.status, Status.WARN]),
                              f"{finding.message} GPU memory did not come back after the engine stopped: "
                              f"{'; '.join(short)}. Look for engine processes outside its tree "
                              f"(nvidia-smi) before the next launch.",
                              dataclasses.replace(finding.facts, memory_not_released=tuple(short))
                              if isinstance(finding.facts, StartupFacts) else finding.facts)
    log = result.log
    return StartupReport(log.kv_tokens, log.kv_tokens_all, log.max_concurrency, result.seconds_to_kv,
                         log.error_kind, result.log_path, finding, result)


def run_startup(dep: Deployment, model: ModelSpec | None = None, *, machine: Machine | None = None,
                prediction_tokens: int | None = None, log_dir: Path, host: Host = BARE_HOST) -> Finding:
    """The ``startup`` check's finding for ``dep`` (launches the engine; see ``launch_deployment``)."""
    return launch_deployment(dep, model, machine=machine, prediction_tokens=prediction_tokens,
                             log_dir=log_dir, host=host).finding


def judge(dep: Deployment, model: ModelSpec | None, result: LaunchResult, *,
          prediction_tokens: int | None = None) -> Finding:
    """The verdict on one launch: pure, so every branch is testable from a recorded result."""
    name = _ENGINE_NAMES.get(dep.engine, dep.engine)
    log = result.log
    kv = log.kv_tokens
    length = (dep.max_model_len or log.max_concurrency_len
              or (model.max_position_embeddings if model is not None else None))
    concurrency: float | None = None
    if kv is not None and length:
        if log.max_concurrency is not None and log.max_concurrency_len == length:
            concurrency = log.max_concurrency
        else:
            concurrency = round(kv / length, 2)
    ratio = round(kv / prediction_tokens, 3) if kv is not None and prediction_tokens else None
    data = StartupFacts(
        kv_tokens=kv, kv_tokens_all=tuple(log.kv_tokens_all), max_concurrency=concurrency,
        max_model_len=length, seconds_to_kv=result.seconds_to_kv, seconds_total=result.seconds_total,
        error_kind=log.error_kind, error_numbers=dict(log.error_numbers), predicted_kv_tokens=prediction_tokens,
        ratio=ratio, log_path=str(result.log_path) if result.log_path else None,
        stopped_by=result.stopped_by, returncode=result.returncode,
        leftover_pids=tuple(result.leftover_pids), command=tuple(result.argv),
        stop=result.stop, escalated=result.escalated, stop_note=result.stop_note,
        cleaned=tuple(result.cleaned), containment=result.containment,
    )
    where = f" Log: {result.log_path}." if result.log_path else ""
    tail = _tail_text(result.tail)
    leftover = ""
    if result.leftover_pids:
        leftover = (f" Engine processes {', '.join(map(str, result.leftover_pids))} survived SIGKILL and are "
                    f"still running: kill them before the next launch.")

    if kv is None or result.stopped_by == "error":
        if log.error_kind is not None:
            fix = _FIXES.get(log.error_kind, "see the engine's log")
            msg = (f"{dep.name}: {name} failed to start {dep.layout} ({log.error_kind}): {log.error_line}. "
                   f"Fix: {fix}.{where}{leftover}")
        elif result.stopped_by == "timeout":
            msg = (f"{dep.name}: {name} did not report its KV pool within {dep.launch.timeout_s:.0f} s "
                   f"(launch.timeout_s); raise the timeout if the model is large, else see the log."
                   f"{where}{leftover}")
        else:
            msg = (f"{dep.name}: {name} exited with code {result.returncode} before reporting its KV pool, "
                   f"and its log names no known cause.{where}{leftover}")
        if tail:
            msg += f"\n  last lines:\n{tail}"
        return failed(CHECK, msg, data)

    pool = f"{kv:,} tokens"
    if len(log.kv_tokens_all) > 1 and len(set(log.kv_tokens_all)) > 1:
        pool += f" (smallest of {', '.join(f'{t:,}' for t in log.kv_tokens_all)})"
    conc_text = ""
    if concurrency is not None and length:
        conc_text = f"{concurrency:.2f} requests of {length:,} tokens"
    pred = ""
    if prediction_tokens:
        pred = f"; predicted {prediction_tokens:,} (actual/predicted {ratio:.2f})"
        if ratio is not None and not PREDICTION_BAND[0] <= ratio <= PREDICTION_BAND[1]:
            pred += (" -- far off: the machine the static checks read is not the one the engine ran on "
                     "(a snapshot or preset?), or the flags differ (memory_fraction, --enforce-eager, "
                     "launch.env such as VLLM_CPU_KVCACHE_SPACE); the real pool is the one to trust")
    said = f"{dep.name}: {name} started {dep.layout} with a KV pool of {pool}"
    said += f" = {conc_text}" if conc_text else ""
    said += f" after {result.seconds_to_kv:.0f} s" if result.seconds_to_kv is not None else ""
    said += pred

    problems: list[str] = []
    if length and kv < length:
        problems.append(f"not even one request of max_model_len {length:,} fits ({kv:,} tokens): lower "
                        f"max_model_len or raise memory_fraction")
    if dep.require.kv_tokens is not None and kv < dep.require.kv_tokens:
        short = dep.require.kv_tokens - kv
        problems.append(f"below require.kv_tokens {dep.require.kv_tokens:,} by {short:,} tokens: raise "
                        f"memory_fraction, use kv_cache_dtype: fp8 or more GPUs")
    if dep.require.concurrency is not None:
        if concurrency is None:
            problems.append("require.concurrency cannot be judged: neither max_model_len nor the log gives "
                            "the request length")
        elif concurrency < dep.require.concurrency:
            problems.append(f"{concurrency:.2f} full-length requests is below require.concurrency "
                            f"{dep.require.concurrency}")
    if result.leftover_pids:
        problems.append(leftover.strip())
    if problems:
        return failed(CHECK, f"{said}; " + "; ".join(problems) + f".{where}", data)
    if result.escalated:  # the pool is right, but the engine did not stop the way it was asked to
        cleaned = (f" Cleaned up after it: {', '.join(result.cleaned)}." if result.cleaned else "")
        return warned(CHECK, f"{said}, but {result.stop_note or 'its stop needed SIGKILL'}.{cleaned}{where}",
                      data)
    if log.error_kind is not None:
        fix = _FIXES.get(log.error_kind, "see the engine's log")
        return warned(CHECK, f"{said}, but it warned ({log.error_kind}): {log.error_line}. {fix}.{where}",
                      data)
    return passed(CHECK, f"{said}.{where}", data)


# ------------------------------------------------------------------------------------------------
# The fixture's body
# ------------------------------------------------------------------------------------------------
def _predicted(dep: Deployment, machine: Machine | None, model: ModelSpec | None, host: Host) -> int | None:
    """The kv_pool check's prediction for ``dep`` (smallest replica), or None where it cannot be made."""
    if machine is None or model is None:
        return None
    from pytest_gpulayout.rules.kv_pool import KvPoolFacts, check_kv_pool

    try:
        facts = check_kv_pool(dep, machine, model, host).facts
    except Exception:  # a prediction is a comparison aid; the launch is the measurement
        return None
    return facts.predicted_kv_tokens if isinstance(facts, KvPoolFacts) else None


def make_launcher(manifest_deployments: Mapping[str, Deployment], log_dir: Path,
                  load_model: Callable[..., ModelSpec] | None = None, *,
                  machine: Machine | None = None, host: Host = BARE_HOST) -> Callable[..., StartupReport]:
    """``launch(name_or_deployment, **overrides) -> StartupReport`` for users' regression tests.

    ``overrides`` are Deployment fields (``tensor_parallel_size=2``, ``max_model_len=4096``); ``launch``
    and ``require`` also accept a dict of their own fields, merged into the deployment's.
    The launch happens whether or not ``launch.enabled`` is set: calling the fixture is the opt-in.
    """
    fields = {f.name for f in dataclasses.fields(Deployment)}

    def launch_one(target: str | Deployment, **overrides: Any) -> StartupReport:
        if isinstance(target, Deployment):
            dep = target
        else:
            try:
                dep = manifest_deployments[target]
            except KeyError:
                from pytest_gpulayout.inputs.suggest import close_matches

                close = close_matches(str(target), list(manifest_deployments), n=2)
                hint = f" Did you mean {' or '.join(close)}?" if close else ""
                known = ", ".join(manifest_deployments) or "none"
                raise InputError(f"no deployment {target!r} in the manifest (known: {known}).{hint}") \
                    from None
        unknown = sorted(set(overrides) - fields)
        if unknown:
            from pytest_gpulayout.inputs.suggest import close_matches

            hints = [f"{k} (did you mean {' or '.join(close_matches(k, sorted(fields), n=2))}?)"
                     if close_matches(k, sorted(fields), n=2) else k for k in unknown]
            raise InputError(f"gpulayout_launch: unknown Deployment field(s): {', '.join(hints)}")
        for nested in ("launch", "require"):
            if isinstance(overrides.get(nested), Mapping):
                overrides[nested] = dataclasses.replace(getattr(dep, nested), **overrides[nested])
        if overrides:
            dep = dataclasses.replace(dep, **overrides)
        model = load_model(dep.model, dep.base_dir) if load_model is not None else None
        return launch_deployment(dep, model, machine=machine, log_dir=log_dir, host=host,
                                 prediction_tokens=_predicted(dep, machine, model, host))

    return launch_one
