"""One launch's windows: the launcher's ``serve`` poll, one generator job (one window) after another
while the server stays up, until its steps are done or its deadline passes (its first window always
runs: a slow start-up must not leave a launch unmeasured).

Each load's first window is preceded by ``warmup_requests`` (vLLM's ``--num-warmups``, not counted).
With ``duration_s`` and a closed loop, the deployment's first launch runs one short calibration window
at each load first (``2 x concurrency`` requests, at least 8; kept, not counted) and every window of
every launch is then sized to the rate it served: ``duration_s x requests/s`` requests. An open-loop
rate needs none: ``duration_s x request_rate``. Each window's ``vllm bench serve`` command line is
written beside its result (``.cmd``), and kept in its JSON.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpulayout.launch.argv import model_path_for
from pytest_gpulayout.measure import clocks as clk
from pytest_gpulayout.measure import metrics as met
from pytest_gpulayout.measure.generator import Generator, Generators, Job, JobEnd, command_line, generator_args
from pytest_gpulayout.measure.record import DeploymentMeasure
from pytest_gpulayout.measure.result import MeasureError, read_result
from pytest_gpulayout.workload import Load, MeasureSpec

#: how long one generator job may take beyond the launch's deadline (the generator's own start-up,
#: ~8 s on CPU, overlaps the first engine's)
GENERATOR_SLACK_S = 120.0
#: warm-up requests before an open-loop load's first window
RATE_WARMUPS = 4
CALIBRATION = -1


@dataclass(frozen=True)
class Step:
    """One generator job: a window (``window`` >= 0) or the calibration run (``CALIBRATION``)."""

    load: Load
    window: int
    warmups: int


def steps_for(dm: DeploymentMeasure, loads: Sequence[Load], windows: int) -> list[Step]:
    """The jobs of one launch: at each load, the calibration where one is needed, then the windows."""
    spec = dm.spec
    out: list[Step] = []
    for load in loads:
        warm = spec.warmup_requests if spec.warmup_requests is not None else (load.concurrency or RATE_WARMUPS)
        calibrate = (spec.duration_s is not None and load.request_rate is None and not spec.trace_requests
                     and load not in dm.rates)
        if calibrate:
            out.append(Step(load, CALIBRATION, warm))
        out += [Step(load, i, warm if i == 0 and not calibrate else 0) for i in range(windows)]
    return out


def window_requests(spec: MeasureSpec, step: Step, rate: float | None) -> int:
    """How many requests one job sends."""
    load = step.load
    if step.window == CALIBRATION:
        return max(2 * (load.concurrency or RATE_WARMUPS), 8)
    if spec.trace_requests:
        return min(spec.requests or len(spec.trace_requests), len(spec.trace_requests))
    if spec.duration_s is None:
        return spec.window_requests
    if load.request_rate is not None:
        return max(RATE_WARMUPS, round(load.request_rate * spec.duration_s))
    return max(load.concurrency or 1, round((rate or 0.0) * spec.duration_s))


def tokenizer_for(dm: DeploymentMeasure) -> str:
    return str(dm.spec.tokenizer) if dm.spec.tokenizer is not None else model_path_for(dm.deployment)


class Driver:
    """The launcher's ``serve`` poll for one launch of ``dm``."""

    def __init__(self, dm: DeploymentMeasure, steps: list[Step], *, launch: int, port: int, work: Path,
                 deadline: float, nvml: Any | None, gpu_indices: Sequence[int], on_window: Callable[[str], None] | None,
                 generators: Generators, python: str, trace_file: Path | None = None):
        self.dm = dm
        self.steps = list(steps)
        self.launch = launch
        self.port = port
        self.work = work
        self.deadline = deadline
        self.nvml = nvml
        self.gpu_indices = gpu_indices
        self.on_window = on_window
        self.generators = generators
        self.python = python
        self.trace_file = trace_file
        self.current: Generator | None = None
        self.job: Job | None = None
        self.step: Step | None = None
        self.started = 0
        self.measured = 0
        self.failed = False
        self.cut: list[str] = []
        self.log_hint = ""
        self.scraper: met.Scraper | None = None
        self.sampler: clk.ClockSampler | None = None

    def __call__(self) -> bool:
        if self.current is not None:
            end = self.current.poll()
            if end is None:
                return True
            self._finish(end)
        if not self.steps or self.failed:
            return False
        if self.started and time.monotonic() >= self.deadline:
            left = [s for s in self.steps if s.window != CALIBRATION]
            self.cut = [f"window {s.window + 1} at {s.load.words}" for s in left]
            self.steps.clear()
            return False
        self.started += 1
        self._start(self.steps.pop(0))
        return True

    def _seed(self, step: Step) -> int:
        """The same prompts for every layout in the same launch and window, new ones in each."""
        loads = self.dm.spec.loads
        index = loads.index(step.load) if step.load in loads else 0
        return 1000 * self.launch + 10 * index + max(step.window, 0) + (7 if step.window == CALIBRATION else 0)

    def _start(self, step: Step) -> None:
        dm, spec = self.dm, self.dm.spec
        kind = "cal" if step.window == CALIBRATION else f"w{step.window}"
        result = self.work / f"{dm.deployment.name}-L{self.launch}-{step.load.key}-{kind}.json"
        args = generator_args(spec, step.load, base_url=f"http://127.0.0.1:{self.port}",
                              model=model_path_for(dm.deployment), tokenizer=tokenizer_for(dm),
                              requests=window_requests(spec, step, dm.rates.get(step.load)), result=result,
                              seed=self._seed(step), warmups=step.warmups, trace_file=self.trace_file)
        self.job, self.step = Job(args, result), step
        result.with_suffix(".cmd").write_text(command_line(args) + "\n")
        timeout = max(self.deadline - time.monotonic(), 0.0) + GENERATOR_SLACK_S
        try:
            gen = self.generators.get(self.python)
        except OSError as err:
            dm.errors.append(f"cannot start the load generator ({self.python}): {err.strerror or err}")
            self.failed = True
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
        step, self.step = self.step, None
        assert gen is not None and job is not None and step is not None
        dm = self.dm
        m, c = self._stop_samplers()
        if end.rc != 0 or not job.result.is_file():
            dm.errors.append(f"the load generator {end.why or 'wrote no result'}: {gen.tail()} (log: {gen.log_path})")
            self.failed = True
            return
        forced = None if dm.spec.trace_requests else dm.spec.output_tokens
        try:
            w = read_result(job.result, load=step.load, slo=dm.spec.slo, forced_output=forced, launch=self.launch,
                            command=command_line(job.args))
        except MeasureError as err:
            dm.errors.append(str(err))
            self.failed = True
            return
        if w.failure is not None and not w.completed:
            dm.errors.append(f"{w.failure} (the engine's log: {self.log_hint})")
            self.failed = True
        if step.window == CALIBRATION:
            dm.calibrations.append(w)
            if w.requests_per_s > 0:
                dm.rates[step.load] = w.requests_per_s
            return
        dm.windows.append(w)
        self.measured += 1
        if m is not None:
            dm.metrics.append(m)
            if m.preemptions:
                dm.preempted[step.load] = dm.preempted.get(step.load, 0.0) + m.preemptions
        dm.clocks.append(c)
        if self.on_window is not None:
            self.on_window(f"{dm.deployment.name}: launch {self.launch + 1}, {step.load.words}, window "
                           f"{step.window + 1}: {w.output_tokens_per_s:.1f} output tokens/s, {w.requests_per_s:.2f} "
                           f"requests/s, {w.completed} done, {w.failed} failed")

    def close(self) -> None:
        """Every way out: a job still running is abandoned with its generator, and the samplers stop."""
        if self.current is not None:
            self.current.kill()
            self.current = None
        self._stop_samplers()
