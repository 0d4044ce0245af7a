"""The ``startup`` check: launch the engine with the deployment's flags, read its real KV pool, stop it.

The static checks predict; this one asks the engine. It builds the engine's argument vector from the
deployment (only the flags the deployment sets: an unset value stays the engine's default), runs it
through the launcher until every engine has logged its KV pool, and judges the real numbers against
``require``. ``--load-format dummy`` is the default (``launch.dummy_weights``): the engine allocates
weights at full size without reading them, so the pool is the same as in production and the
launch takes seconds to minutes instead of a full model load.

The argument vector is ``launch/argv.py``, the verdict ``launch/verdict.py``, the memory re-probe
``launch/reprobe.py``, the fixture's body ``fixtures.py`` (an edge, beside ``plugin.py``).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.errors import LaunchError
from pytest_gpulayout.findings import Finding, Status, failed, worst
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.launch.across import launch_across, node_spans
from pytest_gpulayout.launch.argv import engine_env, expected_reports, gpu_plan, model_path_for, release
from pytest_gpulayout.launch.facts import StartupFacts
from pytest_gpulayout.launch.launcher import LaunchResult, free_port, launch
from pytest_gpulayout.launch.progress import Progress
from pytest_gpulayout.launch.reprobe import _try_probe, memory_not_released
from pytest_gpulayout.launch.served import Served
from pytest_gpulayout.launch.verdict import _LOG_COUNTER, CHECK, judge
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.machine.probe import probe
from pytest_gpulayout.memory.pool import PoolPrediction
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.placement import PlacementError, resolve_gpus


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




def _log_path(log_dir: Path, dep: Deployment) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in dep.name) or "deployment"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return log_dir / f"startup-{safe}-{stamp}-{os.getpid()}-{next(_LOG_COUNTER)}.log"


def launch_deployment(
    dep: Deployment,
    model: ModelSpec | None = None,
    *,
    engine: Served,
    machine: Machine | None = None,
    prediction_tokens: int | None = None,
    prediction: PoolPrediction | None = None,
    log_dir: Path,
    engine_version: str | None = None,
    stop_when: str = "kv",
    grace_s: float = 10.0,
    reprobe: Callable[[], Machine] | None = None,
    host: Host = BARE_HOST,
    progress: Progress | None = None,
) -> StartupReport:
    """Launch ``dep`` briefly with ``engine`` (its engine object) and judge what it allocated.

    Never raises for engine trouble (not found, failed, timed out): that is the finding. On a live
    machine (``machine.source == "nvml"``, or with ``reprobe`` given) the GPUs' free memory is read
    before the launch and again after the tree is gone: memory that did not come back means something
    of the engine survives outside its process tree (or another tenant arrived), and is reported.
    ``prediction``: the static checks' pool with its terms (``KvPoolFacts.smallest``): a real pool more
    than 10 % away is a warning that names the term most likely off. The engine's own account of its
    configuration is held to the deployment (``verdict.cross_examine``): a contradiction fails.
    """
    if prediction is not None and prediction_tokens is None:
        prediction_tokens = prediction.kv_tokens
    own = engine.own_launch()
    if own is not None:  # its own argv, log lines and verdict (llama.cpp: engines/llamacpp/launch.py)
        finding, res = own(dep, model, machine=machine, log_path=_log_path(Path(log_dir), dep), grace_s=grace_s,
                           progress=progress)
        d = finding.data
        return StartupReport(d.get("kv_tokens"), (d["kv_tokens"],) if d.get("kv_tokens") else (),
                             d.get("max_concurrency"), d.get("seconds_to_kv"), d.get("error_kind"),
                             res.log_path if res is not None else None, finding, res)
    name = engine.display
    version = engine_version or dep.engine_version
    if version is None and not dep.launch.command:  # our environment's engine is the one launched
        version = host.installed(dep.engine)
    if machine is not None and machine.source.startswith("ray:"):  # GPUs on several hosts: launch/across.py
        across = _launch_across(dep, model, machine, engine=engine, prediction_tokens=prediction_tokens,
                                log_dir=Path(log_dir), engine_version=version, stop_when=stop_when,
                                grace_s=grace_s, progress=progress)
        if across is not None:
            return across
    try:
        plan = gpu_plan(dep, machine, os.environ.get("CUDA_VISIBLE_DEVICES"), engine=engine)
        port = free_port()
        argv = engine.launch_argv(dep, model_path_for(dep), port, release(engine, version))
        engines, ranks = expected_reports(engine, dep, release(engine, version))
        log_path = _log_path(Path(log_dir), dep)
        if reprobe is None and machine is not None and machine.source == "nvml":
            reprobe = probe
        before = _try_probe(reprobe)
        result = launch(argv, env=engine_env(dep, plan.visible), watcher=engine.log_watcher(engines, ranks),
                        timeout_s=dep.launch.timeout_s, log_path=log_path,
                        grace_s=grace_s, stop_when=stop_when, gpus=plan.lock_keys, stop_signal=engine.stop_signal,
                        progress=progress)
    except LaunchError as err:
        cmd = (list(dep.launch.command) if dep.launch.command
               else engine.default_command(release(engine, version), sys.executable))
        if "was not found" in str(err) or "not executable" in str(err):
            module = engine.server_module
            msg = (f"cannot launch {name}: {cmd[0]!r} was not found or is not executable. "
                   f"Install {name} where the check runs, or set launch.command in the manifest to the "
                   f"engine's entry point, e.g. [/path/to/venv/bin/python, -m, {module}]")
        else:
            msg = f"cannot launch {name}: {err}"
        finding = failed(CHECK, msg, StartupFacts(kv_tokens=None, max_concurrency=None, seconds_to_kv=None,
                                                  error_kind=None, predicted_kv_tokens=prediction_tokens,
                                                  ratio=None, log_path=None, command=tuple(cmd)))
        return StartupReport(None, (), None, None, None, None, finding, None)
    finding = judge(dep, model, result, name=name, prediction_tokens=prediction_tokens, prediction=prediction,
                    engine_version=engine_version or dep.engine_version)
    if before is not None and reprobe is not None:
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


def _launch_across(dep: Deployment, model: ModelSpec | None, machine: Machine, *, engine: Served,
                   prediction_tokens: int | None,
                   log_dir: Path, engine_version: str | None, stop_when: str,
                   grace_s: float, progress: Progress | None = None) -> StartupReport | None:
    """The launch across the hosts of a Ray machine; None when the deployment stays on one host."""
    try:
        spans = node_spans(dep, machine)
    except LaunchError as err:
        finding = failed(CHECK, f"cannot launch across hosts: {err}",
                         StartupFacts(kv_tokens=None, max_concurrency=None, seconds_to_kv=None, error_kind=None,
                                      predicted_kv_tokens=prediction_tokens, log_path=None))
        return StartupReport(None, (), None, None, None, None, finding, None)
    if not spans:
        return None
    finding, res = launch_across(dep, model, machine, spans, engine=engine, prediction_tokens=prediction_tokens,
                                 progress=progress, log_path=_log_path(log_dir, dep), engine_version=engine_version,
                                 stop_when=stop_when, grace_s=grace_s)
    if res is None:
        return StartupReport(None, (), None, None, None, None, finding, None)
    log = res.log
    return StartupReport(log.kv_tokens, log.kv_tokens_all, log.max_concurrency, res.seconds_to_kv, log.error_kind,
                         res.log_path, finding, res)


def run_startup(dep: Deployment, model: ModelSpec | None = None, *, engine: Served, machine: Machine | None = None,
                prediction_tokens: int | None = None, prediction: PoolPrediction | None = None, log_dir: Path,
                host: Host = BARE_HOST, progress: Progress | None = None) -> Finding:
    """The ``startup`` check's finding for ``dep`` (launches the engine; see ``launch_deployment``)."""
    return launch_deployment(dep, model, engine=engine, machine=machine, prediction_tokens=prediction_tokens,
                             prediction=prediction, log_dir=log_dir, host=host, progress=progress).finding
