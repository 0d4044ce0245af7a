"""Measure deployments on the same GPUs, launch after launch: each launch starts the engine to ready,
drives its windows while the server stays up (``driver.py``), and stops its whole tree.

Every deployment is launched ``launches`` times (default 2), interleaved, the order reversed every
round (A B B A: ``schedule.py``), each launch measuring ``windows`` windows at every load. The budget
(``measure.budget_s``, the largest of the deployments') covers the whole measurement: each launch gets
an even share of what is left, and a deployment's first launch always runs, however slowly it starts;
a later one is not begun when the launches so far say it would not fit. Then, while the verdict's
interval still overlaps 1 and the budget allows, one more round of launches at the deciding load, up
to ``MAX_LAUNCHES`` each, of the best and the runner-up only (the pair the verdict could not separate; the
others keep their planned launches and their rank). Why it stopped is kept (``Measurement.stopped``).

Before any launch every deployment's load is checked (``preflight.py``) and a trace is written as the
generator's dataset (``dataset.py``); after the last, the windows are also written in ``vllm bench
sweep``'s layout (``sweep.py``).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.errors import LaunchError
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.launch.argv import (
    engine_env,
    expected_reports,
    gpu_plan,
    model_path_for,
    release,
    visible_lock_keys,
)
from pytest_gpulayout.launch.launcher import free_port, launch
from pytest_gpulayout.launch.progress import Progress
from pytest_gpulayout.launch.verdict import STOP_SIGNAL
from pytest_gpulayout.measure import clocks as clk
from pytest_gpulayout.measure.dataset import write_timed_trace
from pytest_gpulayout.measure.driver import Driver, steps_for
from pytest_gpulayout.measure.generator import Generators, generator_python
from pytest_gpulayout.measure.preflight import check_inputs
from pytest_gpulayout.measure.record import DeploymentMeasure, LaunchRecord, Measurement
from pytest_gpulayout.measure.schedule import Stopped, StopReason, round_order
from pytest_gpulayout.measure.sweep import write_sweep
from pytest_gpulayout.measure.verdict import Verdict, decide, deciding_figure
from pytest_gpulayout.workload import Load, MeasureSpec

#: the most launches of one deployment, the planned ones and those added while the intervals overlap
MAX_LAUNCHES = 5

__all__ = ["DeploymentMeasure", "Measurement", "measure", "measured_release"]


_RELEASE_OF = ("import sys\nfrom importlib import metadata\nfor d in sys.argv[1:]:\n    try:\n"
               "        print(metadata.version(d))\n        break\n    except metadata.PackageNotFoundError:\n"
               "        pass\n")


def measured_release(dep: Deployment, host: Host) -> str | None:
    """The engine release a measurement ran: the pinned ``engine_version``; launched from this
    environment, the installed one; with a ``launch.command`` naming a Python (or with one beside
    it), the engine's distribution in that Python (package metadata, one short subprocess); else None
    (a binary of its own, such as llama-server, does not say it here)."""
    if dep.engine_version:
        return str(dep.engine_version)
    if not dep.launch.command:
        return host.installed(dep.engine)
    engine = ENGINES[dep.engine]
    first = Path(dep.launch.command[0])
    python = first if first.name.startswith("python") else first.parent / "python"
    if not engine.distributions or first.parent == Path() or not python.is_file():
        return None
    try:
        out = subprocess.run([str(python), "-c", _RELEASE_OF, *engine.distributions], capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = out.stdout.strip().splitlines()
    return found[0] if out.returncode == 0 and found else None


def _launch_args(dep: Deployment, port: int, host: Host) -> tuple[list[str], dict[str, str], Any, tuple[str, ...],
                                                                    list[int]]:
    """argv, env, log watcher, GPU lock keys and the NVML indices of ``dep``'s server on ``port``."""
    engine = ENGINES[dep.engine]
    version = dep.engine_version
    if version is None and not dep.launch.command:
        version = host.installed(dep.engine)
    rel = release(engine.launch, version)
    argv = engine.launch.launch_argv(dep, model_path_for(dep), port, rel)
    argv += [a for a in engine.launch.metrics_args if a not in argv]  # its /metrics, read during the load
    engines, ranks = expected_reports(engine.launch, dep, rel)
    watcher = engine.launch.log_watcher(engines, ranks)
    if dep.gpus is None and engine.launch.own_launch() is not None:
        # an engine with its own launch (llama.cpp) spreads layers over every visible GPU: it inherits them,
        # and each is locked, as its startup check locks them (``launch.argv.visible_lock_keys``)
        env = {**os.environ, **dep.launch.env}
        return argv, env, watcher, visible_lock_keys(None, os.environ.get("CUDA_VISIBLE_DEVICES")), []
    plan = gpu_plan(dep, None, os.environ.get("CUDA_VISIBLE_DEVICES"), engine=engine.launch)
    return (argv, engine_env(dep, plan.visible), watcher, plan.lock_keys,
            [int(v) for v in plan.visible if v.isdigit()])


class _Run:
    """One measurement's shared state: the work folder, the deadline, the samplers, the generators,
    the order the launches ran in."""

    def __init__(self, dms: dict[str, DeploymentMeasure], *, t0: float, work: Path, host: Host,
                 progress: Callable[[str], Progress] | None, on_window: Callable[[str], None] | None,
                 nvml: Any | None, generators: Generators, traces: Mapping[str, Path]):
        self.dms = dms
        self.deadline = t0 + max(dm.spec.budget_s for dm in dms.values())
        self.work = work
        self.host = host
        self.progress = progress
        self.on_window = on_window
        self.nvml = nvml
        self.generators = generators
        self.traces = traces
        self.order: list[str] = []

    def launch_seconds(self) -> float:
        """The longest a launch took so far (0 before any)."""
        return max((r.seconds for dm in self.dms.values() for r in dm.launches), default=0.0)

    def once(self, dm: DeploymentMeasure, loads: Sequence[Load], *, deadline: float) -> None:
        """One launch of ``dm``: to ready, its windows at ``loads``, stopped."""
        dep = dm.deployment
        number = len(dm.launches)
        t0 = time.monotonic()
        port = free_port()
        try:
            argv, env, watcher, locks, indices = _launch_args(dep, port, self.host)
        except LaunchError as err:
            dm.errors.append(f"cannot launch: {err}")
            return
        driver = Driver(dm, steps_for(dm, loads, dm.spec.windows), launch=number, port=port, work=self.work,
                        deadline=deadline, nvml=self.nvml, gpu_indices=indices, on_window=self.on_window,
                        generators=self.generators, python=generator_python(dm.spec, dep.launch.command),
                        trace_file=self.traces.get(dep.name))
        log_path = self.work / f"engine-{dep.name}-{time.strftime('%Y%m%d-%H%M%S')}-{number}.log"
        driver.log_hint = str(log_path)
        self.order.append(dep.name)
        try:
            result = launch(argv, env=env, watcher=watcher, timeout_s=dep.launch.timeout_s + max(deadline - t0, 0.0),
                            log_path=log_path, stop_when="ready", serve=driver, gpus=locks, stop_signal=STOP_SIGNAL,
                            progress=self.progress(dep.name) if self.progress else None)
        except LaunchError as err:
            dm.errors.append(f"cannot launch: {err}")
            return
        finally:
            driver.close()
            took = time.monotonic() - t0
            dm.seconds += took
        dm.launches.append(LaunchRecord(number, len(self.order) - 1, took, driver.measured,
                                        str(result.log_path) if result.log_path else None, result.stopped_by,
                                        tuple(driver.cut)))
        if driver.cut:
            dm.notes.append(f"launch {number + 1}: the budget was spent before {', '.join(driver.cut)}")
        if result.stopped_by != "ready" or not result.log.ready:
            tail = " | ".join(result.tail[-3:])
            dm.errors.append(f"the server stopped before the load was done ({result.stopped_by}, exit code "
                             f"{result.returncode}): {tail} (log: {result.log_path})")
        if result.leftover_pids:
            dm.errors.append(f"processes of the engine survived its stop: {list(result.leftover_pids)}")

    def verdict(self) -> tuple[Verdict, dict[str, str]]:
        dms = self.dms
        unmatched = clk.unmatched({n: dm.merged_clocks() for n, dm in dms.items()})
        figure = deciding_figure({n: dm.spec.slo for n, dm in dms.items()})
        v = decide({n: dm.points() for n, dm in dms.items() if dm.status == "pass"}, figure, unmatched,
                   {n: dm.spec.slo for n, dm in dms.items()})
        return v, unmatched

    def planned(self) -> Stopped | None:
        """Every deployment's planned launches, interleaved; a Stopped when the budget cut them short."""
        names = list(self.dms)
        rounds = max(dm.spec.launches for dm in self.dms.values())
        total = sum(dm.spec.launches for dm in self.dms.values())
        done = 0
        for r in range(rounds):
            for name in round_order(names, r):
                dm = self.dms[name]
                if dm.spec.launches <= r or dm.errors:
                    continue
                now = time.monotonic()
                if dm.launches and now + self.launch_seconds() > self.deadline:
                    short = ", ".join(f"{n} {len(d.launches)} of {d.spec.launches}" for n, d in self.dms.items())
                    return Stopped(StopReason.BUDGET, f"the budget ({self._budget():g} s) was spent before the "
                                                      f"planned launches were done (launches: {short})")
                share = (self.deadline - now) / max(total - done, 1)
                self.once(dm, dm.spec.loads, deadline=now + share)
                done += 1
        return None

    def _budget(self) -> float:
        return max(dm.spec.budget_s for dm in self.dms.values())

    def stop_now(self, v: Verdict) -> Stopped | None:
        """Why no further round is run after verdict ``v`` (None: run one)."""
        failed = [n for n, dm in self.dms.items() if dm.status == "fail"]
        if failed:
            return Stopped(StopReason.FAILED, f"not every deployment could be measured ({', '.join(failed)})")
        if len(self.dms) == 1:
            dm = next(iter(self.dms.values()))
            return Stopped(StopReason.ALONE, f"one deployment: {_launches(len(dm.launches))} measured, nothing to "
                                             f"compare it with")
        if v.load is None or v.ratio is None:
            return Stopped(StopReason.NO_VERDICT, v.text)
        fewest = min(len(self.dms[n].launches) for n in self.contenders(v))
        each = _launches(fewest)
        if v.decided:
            return Stopped(StopReason.DECIDED, f"the 95 % interval of {v.choose} against {v.runner_up} excludes 1 "
                                               f"after {each} each")
        if fewest >= MAX_LAUNCHES:
            return Stopped(StopReason.LAUNCHES, f"still no measurable difference after {each} each (the most "
                                                f"given): they serve alike at this load")
        if time.monotonic() + len(self.contenders(v)) * self.launch_seconds() > self.deadline:
            return Stopped(StopReason.BUDGET, f"the budget ({self._budget():g} s) is spent and the intervals still "
                                              f"overlap after {each} each: raise measure.budget_s or "
                                              f"measure.launches for a verdict")
        return None

    def contenders(self, v: Verdict) -> list[str]:
        """The two the verdict could not separate (the best and the runner-up), in the manifest's order:
        only their interval decides, so only they are launched again."""
        pair = {v.ranking[0].name, v.runner_up} if v.ranking and v.runner_up else set(self.dms)
        return [n for n in self.dms if n in pair]

    def more(self) -> tuple[Verdict, dict[str, str], Stopped]:
        """Further rounds at the deciding load, of the best and the runner-up, while their interval overlaps
        1 and the budget allows."""
        v, unmatched = self.verdict()
        while (stopped := self.stop_now(v)) is None:
            assert v.load is not None
            pair = self.contenders(v)
            each = min(len(self.dms[n].launches) for n in pair)
            for name in round_order(pair, each):
                now = time.monotonic()
                self.once(self.dms[name], [v.load], deadline=now + (self.deadline - now) / len(pair))
            v, unmatched = self.verdict()
        return v, unmatched, stopped


def _launches(n: int) -> str:
    return f"{n} launch" if n == 1 else f"{n} launches"


def _traces(dms: Mapping[str, DeploymentMeasure], work: Path) -> dict[str, Path]:
    """Each trace written as the generator's timed_trace dataset (``dataset.py``), once per deployment."""
    out = {}
    for name, dm in dms.items():
        if dm.spec.trace_requests:
            out[name] = write_timed_trace(dm.spec.trace_requests, work / f"{name}-trace.timed.jsonl")
    return out


def measure(deployments: Sequence[Deployment], *, work_dir: Path, host: Host = BARE_HOST,
            progress: Callable[[str], Progress] | None = None, on_window: Callable[[str], None] | None = None,
            nvml: Any | None = None, use_nvml: bool = True,
            predicted: Mapping[str, tuple[int, ...]] | None = None) -> Measurement:
    """Measure ``deployments`` (each with its ``measure`` block, or the defaults) and decide.
    ``predicted``: the kv_pool prediction (KV tokens per replica) by deployment name, which
    preemptions are read against (``measure/preemption.py``). Raises ``InputError`` before any launch
    when a load cannot be served (``preflight.py``)."""
    t0 = time.monotonic()
    check_inputs(deployments)
    work_dir.mkdir(parents=True, exist_ok=True)
    if nvml is None and use_nvml:
        nvml = clk.load_nvml()
    dms = {d.name: DeploymentMeasure(d, d.measure or MeasureSpec(), predicted_kv_tokens=(predicted or {}).get(d.name))
           for d in deployments}
    generators = Generators(work_dir)
    run = _Run(dms, t0=t0, work=work_dir, host=host, progress=progress, on_window=on_window, nvml=nvml,
               generators=generators, traces=_traces(dms, work_dir))
    try:
        # the generators start now: their imports overlap the first engine's start-up
        generators.warm([generator_python(dm.spec, dm.deployment.launch.command) for dm in dms.values()])
        cut = run.planned()
        if cut is None:
            v, unmatched, stopped = run.more()
        else:
            (v, unmatched), stopped = run.verdict(), cut
    finally:
        generators.close()
    sweep = write_sweep(work_dir / "sweep", {n: (dm.deployment, dm.windows) for n, dm in dms.items()})
    return Measurement(dms, v, unmatched, time.monotonic() - t0, run.order, stopped, str(sweep))
