"""Measure deployments one after the other on the same GPUs: launch to ready, drive the load window
after window while the server stays up (the launcher's ``serve`` poll), stop the whole tree, next.

The budget (``measure.budget_s``, the largest of the deployments') covers the whole measurement.
First every deployment gets ``windows`` windows at each concurrency (within its share of the budget;
its first concurrency always, however slowly it started: the rest are named in its notes when cut);
while the verdict's interval still overlaps 1 and the budget allows another launch, the deployments
are launched again for two more windows each at the deciding concurrency.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
from pytest_gpulayout.launch.launcher import LaunchResult, free_port, launch
from pytest_gpulayout.launch.progress import Progress
from pytest_gpulayout.launch.verdict import STOP_SIGNAL
from pytest_gpulayout.measure import clocks as clk
from pytest_gpulayout.measure import metrics as met
from pytest_gpulayout.measure.generator import Generator, Generators, Job, JobEnd, generator_args, generator_python
from pytest_gpulayout.measure.preemption import preemption_note
from pytest_gpulayout.measure.result import MeasureError, Window, read_result
from pytest_gpulayout.measure.stats import mean_ci
from pytest_gpulayout.measure.verdict import Verdict, decide, deciding_figure
from pytest_gpulayout.workload import MeasureSpec

#: how long one generator job may take beyond its share of the budget (the generator's own start-up,
#: ~8 s on CPU, overlaps the first engine's)
_GENERATOR_SLACK_S = 120.0
_MAX_ROUNDS = 3


@dataclass
class DeploymentMeasure:
    """What one deployment's launches and windows gave."""

    deployment: Deployment
    spec: MeasureSpec
    windows: list[Window] = field(default_factory=list)
    metrics: list[met.EngineMetrics] = field(default_factory=list)
    clocks: list[clk.Clocks | None] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    preempted: dict[int, float] = field(default_factory=dict)  # /metrics' preemptions per concurrency
    predicted_kv_tokens: tuple[int, ...] | None = None          # kv_pool's prediction, per replica
    launches: list[LaunchResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def status(self) -> str:
        return "fail" if self.errors or not self.windows else "pass"

    def at(self, concurrency: int) -> list[Window]:
        return [w for w in self.windows if w.concurrency == concurrency]

    def preemption_notes(self) -> list[str]:
        notes = (preemption_note(self.spec, c, n, self.predicted_kv_tokens) for c, n in sorted(self.preempted.items()))
        return [n for n in notes if n]

    def merged_clocks(self) -> clk.Clocks | None:
        return clk.merge(self.clocks)

    def to_json(self, concurrency: int | None, unmatched: str | None = None) -> dict[str, Any]:
        ws = self.at(concurrency) if concurrency is not None else []
        if not ws and self.windows:
            ws = self.at(max(w.concurrency for w in self.windows))

        def mean(name: str) -> float | None:
            xs = [getattr(w, name) for w in ws if getattr(w, name) is not None]
            return round(sum(xs) / len(xs), 3) if xs else None

        def pct(name: str) -> dict[str, float | None]:
            out: dict[str, float | None] = {}
            for q in ("p50", "p90", "p99"):
                xs = [getattr(getattr(w, name), q) for w in ws]
                ys = [x for x in xs if x is not None]
                out[q] = round(sum(ys) / len(ys), 3) if ys else None
            return out

        tps = mean_ci([w.output_tokens_per_s for w in ws]) if ws else None
        merged = met.merge(self.metrics)
        c = self.merged_clocks()
        return {
            "status": self.status,
            "engine": self.deployment.engine,
            "layout": self.deployment.layout,
            "concurrency": ws[0].concurrency if ws else None,
            "output_tokens_per_s": mean("output_tokens_per_s"),
            "output_tokens_per_s_ci95": ([round(tps.low, 3), round(tps.high, 3)]
                                         if tps is not None and tps.n > 1 else None),
            "requests_per_s": mean("requests_per_s"),
            "ttft_ms": pct("ttft_ms"), "itl_ms": pct("itl_ms"), "e2e_ms": pct("e2e_ms"),
            "requests": {"completed": sum(w.completed for w in ws), "failed": sum(w.failed for w in ws)},
            "goodput_rps": mean("goodput_rps"),
            "windows": [window_json(w) for w in self.windows],
            "clocks": c.as_dict() if c is not None else None,
            "clocks_matched": unmatched is None,
            "clocks_note": unmatched,
            "engine_metrics": merged.as_dict() if merged is not None else None,
            "errors": list(self.errors),
            "notes": list(dict.fromkeys([*self.notes, *(w.note for w in self.windows if w.note),
                                         *(w.failure for w in self.windows if w.failure and w.completed),
                                         *self.preemption_notes()])),
            "predicted_kv_tokens_per_replica": list(self.predicted_kv_tokens) if self.predicted_kv_tokens else None,
            "seconds": round(self.seconds, 1),
        }


def window_json(w: Window) -> dict[str, Any]:
    return {"concurrency": w.concurrency, "duration_s": round(w.duration_s, 3), "completed": w.completed,
            "failed": w.failed, "output_tokens_per_s": round(w.output_tokens_per_s, 3),
            "requests_per_s": round(w.requests_per_s, 3), "ttft_ms": w.ttft_ms.as_dict(),
            "itl_ms": w.itl_ms.as_dict(), "e2e_ms": w.e2e_ms.as_dict(),
            "goodput_rps": None if w.goodput_rps is None else round(w.goodput_rps, 3), "result": w.result_path,
            "generator_output_tokens_per_s": w.generator.get("output_throughput"), "note": w.note}


@dataclass
class Measurement:
    deployments: dict[str, DeploymentMeasure]
    verdict: Verdict
    unmatched: dict[str, str]
    seconds: float

    @property
    def status(self) -> str:
        if any(d.status == "fail" for d in self.deployments.values()):
            return "fail"
        return "warn" if self.unmatched else "pass"

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "verdict": self.verdict.as_dict(),
                "deployments": {n: d.to_json(self.verdict.concurrency, self.unmatched.get(n))
                                for n, d in self.deployments.items()},
                "seconds": round(self.seconds, 1),
                "load_generator": "vllm bench serve"}


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


def _tokenizer(dep: Deployment, spec: MeasureSpec) -> str:
    if spec.tokenizer is not None:
        return str(spec.tokenizer)
    return model_path_for(dep)


class _Driver:
    """The launcher's ``serve`` poll: one generator job after another, until the plan is done."""

    def __init__(self, dm: DeploymentMeasure, plan: list[tuple[int, int]], *, port: int, work: Path, deadline: float,
                 nvml: Any | None, gpu_indices: Sequence[int], seed0: int, on_window: Callable[[str], None] | None,
                 generators: Generators):
        self.dm = dm
        self.plan = list(plan)
        self.port = port
        self.work = work
        self.deadline = deadline
        self.nvml = nvml
        self.gpu_indices = gpu_indices
        self.seed = seed0
        self.on_window = on_window
        self.generators = generators
        self.current: Generator | None = None
        self.job: Job | None = None
        self.started = 0
        self.log_hint = ""
        self.concurrency = 0
        self.scraper: met.Scraper | None = None
        self.sampler: clk.ClockSampler | None = None
        self.python = generator_python(dm.spec, dm.deployment.launch.command)

    def __call__(self) -> bool:
        if self.current is not None:
            end = self.current.poll()
            if end is None:
                return True
            self._finish(end)
        if not self.plan or self.dm.errors:
            return False
        if self.started and time.monotonic() >= self.deadline:
            # the first job always runs (a slow start-up must not leave a deployment unmeasured)
            left = ", ".join(str(c) for c, _ in self.plan)
            self.dm.notes.append(f"the budget was spent before concurrency {left} was measured")
            return False
        self.started += 1
        self._start(*self.plan.pop(0))
        return True

    def _start(self, concurrency: int, windows: int) -> None:
        spec = self.dm.spec
        self.concurrency = concurrency
        self.seed += 10
        stem = f"{self.dm.deployment.name}-c{concurrency}-s{self.seed}"
        requests = spec.window_requests
        if spec.duration_s is not None:
            rates = [w.requests_per_s for w in self.dm.windows if w.concurrency == concurrency]
            requests = max(concurrency, int(rates[-1] * spec.duration_s)) if rates else max(4 * concurrency, 16)
        args = generator_args(spec, base_url=f"http://127.0.0.1:{self.port}", model=model_path_for(self.dm.deployment),
                              tokenizer=_tokenizer(self.dm.deployment, spec), concurrency=concurrency,
                              requests=requests, result_dir=self.work, seed=self.seed)
        self.job = Job(args, windows, self.work, stem)
        (self.work / f"{stem}.job.json").write_text(self.job.line())
        timeout = max(self.deadline - time.monotonic(), 0.0) + _GENERATOR_SLACK_S
        try:
            gen = self.generators.get(self.python)
        except OSError as err:
            self.dm.errors.append(f"cannot start the load generator ({self.python}): {err.strerror or err}")
            return
        self.scraper = met.Scraper(f"http://127.0.0.1:{self.port}/metrics").start()
        self.sampler = clk.ClockSampler(self.nvml, self.gpu_indices).start() if self.nvml is not None else None
        gen.submit(self.job, timeout_s=timeout)
        self.current = gen

    def _stop_samplers(self) -> tuple[met.EngineMetrics | None, clk.Clocks | None]:
        m = self.scraper.stop() if self.scraper is not None else None
        c = self.sampler.stop() if self.sampler is not None else None
        self.scraper = self.sampler = None
        return m, c

    def _finish(self, end: JobEnd) -> None:
        gen, self.current = self.current, None
        job, self.job = self.job, None
        assert gen is not None and job is not None
        m, c = self._stop_samplers()
        if end.rc != 0 or not all(p.is_file() for p in job.results):
            self.dm.errors.append(f"the load generator {end.why or 'wrote no result'}: {gen.tail()} "
                                  f"(log: {gen.log_path})")
            return
        for path in job.results:
            try:
                w = read_result(path, concurrency=self.concurrency, slo=self.dm.spec.slo,
                                forced_output=None if self.dm.spec.trace is not None else self.dm.spec.output_tokens)
            except MeasureError as err:
                self.dm.errors.append(str(err))
                return
            self.dm.windows.append(w)
            if w.failure is not None and not w.completed:
                self.dm.errors.append(f"{w.failure} (the engine's log: {self.log_hint})")
            if self.on_window is not None:
                self.on_window(f"{self.dm.deployment.name}: concurrency {w.concurrency}: "
                               f"{w.output_tokens_per_s:.1f} output tokens/s, {w.requests_per_s:.2f} requests/s, "
                               f"{w.completed} done, {w.failed} failed")
        # the samplers ran through all the windows of this job: one reading for them
        if m is not None:
            self.dm.metrics.append(m)
            if m.preemptions:
                self.dm.preempted[self.concurrency] = self.dm.preempted.get(self.concurrency, 0.0) + m.preemptions
        self.dm.clocks.append(c)

    def close(self) -> None:
        """Every way out: a job still running is abandoned with its generator, and the samplers stop."""
        if self.current is not None:
            self.current.kill()
            self.current = None
        self._stop_samplers()


def _launch_args(dep: Deployment, port: int, host: Host) -> tuple[list[str], dict[str, str], Any, tuple[str, ...],
                                                                    list[int]]:
    """argv, env, log watcher, GPU lock keys and the NVML indices of ``dep``'s server on ``port``."""
    engine = ENGINES[dep.engine]
    version = dep.engine_version
    if version is None and not dep.launch.command:
        version = host.installed(dep.engine)
    rel = release(engine, version)
    argv = engine.launch_argv(dep, model_path_for(dep), port, rel)
    argv += [a for a in engine.metrics_args if a not in argv]  # its /metrics, read during the load
    engines, ranks = expected_reports(engine, dep, rel)
    watcher = engine.log_watcher(engines, ranks)
    if dep.gpus is None and engine.own_launch() is not None:
        # an engine with its own launch (llama.cpp) spreads layers over every visible GPU: it inherits them,
        # and each is locked, as its startup check locks them (``launch.argv.visible_lock_keys``)
        env = {**os.environ, **dep.launch.env}
        return argv, env, watcher, visible_lock_keys(None, os.environ.get("CUDA_VISIBLE_DEVICES")), []
    plan = gpu_plan(dep, None, os.environ.get("CUDA_VISIBLE_DEVICES"), engine=engine)
    return (argv, engine_env(dep, plan.visible), watcher, plan.lock_keys,
            [int(v) for v in plan.visible if v.isdigit()])


def _measure_once(dm: DeploymentMeasure, plan: list[tuple[int, int]], *, work: Path, deadline: float, nvml: Any | None,
                  host: Host, progress: Progress | None, on_window: Callable[[str], None] | None, seed0: int,
                  generators: Generators) -> None:
    dep = dm.deployment
    t0 = time.monotonic()
    port = free_port()
    try:
        argv, env, watcher, locks, indices = _launch_args(dep, port, host)
    except LaunchError as err:
        dm.errors.append(f"cannot launch: {err}")
        return
    driver = _Driver(dm, plan, port=port, work=work, deadline=deadline, nvml=nvml, gpu_indices=indices,
                     seed0=seed0, on_window=on_window, generators=generators)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_path = work / f"engine-{dep.name}-{stamp}-{len(dm.launches)}.log"
    driver.log_hint = str(log_path)
    try:
        result = launch(argv, env=env, watcher=watcher, timeout_s=dep.launch.timeout_s + max(deadline - t0, 0.0),
                        log_path=log_path, stop_when="ready", serve=driver, gpus=locks, stop_signal=STOP_SIGNAL,
                        progress=progress)
    except LaunchError as err:
        dm.errors.append(f"cannot launch: {err}")
        return
    finally:
        driver.close()
        dm.seconds += time.monotonic() - t0
    dm.launches.append(result)
    if result.stopped_by != "ready" or not result.log.ready:
        tail = " | ".join(result.tail[-3:])
        dm.errors.append(f"the server stopped before the load was done ({result.stopped_by}, exit code "
                         f"{result.returncode}): {tail} (log: {result.log_path})")
    if result.leftover_pids:
        dm.errors.append(f"processes of the engine survived its stop: {list(result.leftover_pids)}")


def _measure_all(dms: dict[str, DeploymentMeasure], *, t0: float, work_dir: Path, host: Host,
                 progress: Callable[[str], Progress] | None, on_window: Callable[[str], None] | None,
                 nvml: Any | None, generators: Generators) -> tuple[Verdict, dict[str, str]]:
    budget = max(dm.spec.budget_s for dm in dms.values())
    deadline = t0 + budget
    for i, dm in enumerate(dms.values()):
        share = t0 + budget * (i + 1) / len(dms)  # each deployment's first pass fits in its share
        plan = [(c, dm.spec.windows) for c in dm.spec.concurrency]
        _measure_once(dm, plan, work=work_dir, deadline=min(share, deadline), nvml=nvml, host=host,
                      progress=progress(dm.deployment.name) if progress else None, on_window=on_window, seed0=0,
                      generators=generators)
    figure = deciding_figure({n: dm.spec.slo.set for n, dm in dms.items()})

    def verdict() -> tuple[Verdict, dict[str, str]]:
        unmatched = clk.unmatched({n: dm.merged_clocks() for n, dm in dms.items()})
        return decide({n: dm.windows for n, dm in dms.items() if dm.status == "pass"}, figure, unmatched), unmatched

    v, unmatched = verdict()
    rounds = 0
    while (not v.decided and v.concurrency is not None and v.ratio is not None and rounds < _MAX_ROUNDS
           and all(dm.status == "pass" for dm in dms.values())):
        longest = max(dm.seconds / max(len(dm.launches), 1) for dm in dms.values())
        if time.monotonic() + 2 * longest > deadline:
            break
        rounds += 1
        for dm in dms.values():
            _measure_once(dm, [(v.concurrency, 2)], work=work_dir, deadline=deadline, nvml=nvml,
                          host=host, progress=progress(dm.deployment.name) if progress else None,
                          on_window=on_window, seed0=100 * rounds, generators=generators)
        v, unmatched = verdict()
    return v, unmatched


def measure(deployments: Sequence[Deployment], *, work_dir: Path, host: Host = BARE_HOST,
            progress: Callable[[str], Progress] | None = None, on_window: Callable[[str], None] | None = None,
            nvml: Any | None = None, use_nvml: bool = True,
            predicted: Mapping[str, tuple[int, ...]] | None = None) -> Measurement:
    """Measure ``deployments`` (each with its ``measure`` block, or the defaults) and decide.
    ``predicted``: the kv_pool prediction (KV tokens per replica) by deployment name, which
    preemptions are read against (``measure/preemption.py``)."""
    t0 = time.monotonic()
    work_dir.mkdir(parents=True, exist_ok=True)
    if nvml is None and use_nvml:
        nvml = clk.load_nvml()
    dms = {d.name: DeploymentMeasure(d, d.measure or MeasureSpec(), predicted_kv_tokens=(predicted or {}).get(d.name))
           for d in deployments}
    generators = Generators(work_dir)
    try:
        # the generators start now: their imports overlap the first engine's start-up
        generators.warm([generator_python(dm.spec, dm.deployment.launch.command) for dm in dms.values()])
        v, unmatched = _measure_all(dms, t0=t0, work_dir=work_dir, host=host, progress=progress, on_window=on_window,
                                    nvml=nvml, generators=generators)
    finally:
        generators.close()
    return Measurement(dms, v, unmatched, time.monotonic() - t0)
