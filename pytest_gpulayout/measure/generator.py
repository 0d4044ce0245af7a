"""The load generator's command line and process: ``vllm bench serve`` (``vllm.benchmarks.serve``),
run with the Python of an environment that has vLLM (see ``measure/__init__.py`` for the choice).

One generator process serves the whole measurement (one per Python): it is started before the first
engine, so its own start-up (imports: ~8 s on CPU) overlaps the engine's, and it then runs one *job*
after another as they come on its stdin (one JSON line each: the ``vllm bench serve`` arguments and the
file it marks the job done in). A job is one window: one ``main`` call with its arguments exactly as
written (seed, result file, warm-up requests), so each window's ``vllm bench serve`` command line is
the one kept beside its result, and re-runs it by hand. The runner calls ``vllm.benchmarks.serve`` the
way ``vllm bench serve`` does, without the ``vllm`` CLI's start-up (which reads the installed
distribution's version and fails where vLLM is installed under another distribution name, as the
CPU build is). Argument vector, never a shell; its own process group; ``PR_SET_PDEATHSIG`` so it
dies with this process; killed with its group on every way out (:meth:`Generator.kill`), and past a
job's deadline (the next job starts a fresh one).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pytest_gpulayout.workload import Load, MeasureSpec

#: what ``vllm bench serve`` runs (``vllm/entrypoints/cli/benchmark/serve.py``), with the CLI's
#: fallback to the CPU platform where none is detected (the generator needs no accelerator), once
#: per job read from stdin; a job ends with its ``done`` file: ``ok`` or the error
RUNNER = (
    "import json, os, sys, traceback\n"
    "try:\n"
    "    from vllm import platforms\n"
    "    if platforms.current_platform.is_unspecified():\n"
    "        from vllm.platforms.cpu import CpuPlatform\n"
    "        platforms.current_platform = CpuPlatform()\n"
    "except Exception:\n"
    "    pass\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "add_cli_args(parser)\n"
    "print('gpulayout: load generator ready', flush=True)\n"
    "for line in sys.stdin:\n"
    "    job = json.loads(line)\n"
    "    status = 'ok'\n"
    "    try:\n"
    "        main(parser.parse_args(job['args']))\n"
    "    except (Exception, SystemExit):\n"
    "        status = traceback.format_exc(limit=3)\n"
    "        print(status, flush=True)\n"
    "    with open(job['done'] + '.part', 'w') as f:\n"
    "        f.write(status)\n"
    "    os.replace(job['done'] + '.part', job['done'])\n"
)

PR_SET_PDEATHSIG = 1


def generator_python(spec: MeasureSpec, command: tuple[str, ...] | None) -> str:
    """The Python that runs the generator: ``measure.python``; else the deployment's own vLLM
    (``launch.command`` naming a python, or the python beside its ``vllm``); else the one beside
    ``vllm`` on PATH; else this interpreter."""
    if spec.python:
        return spec.python
    if command:
        first = Path(command[0])
        if first.name.startswith("python"):
            return str(first)
        beside = first.parent / "python"
        if first.parent != Path() and beside.is_file():
            return str(beside)
    on_path = shutil.which("vllm")
    if on_path:
        beside = Path(on_path).parent / "python"
        if beside.is_file():
            return str(beside)
    return sys.executable


def runner_argv(python: str) -> list[str]:
    return [python, "-c", RUNNER]


def generator_args(spec: MeasureSpec, load: Load, *, base_url: str, model: str, tokenizer: str, requests: int,
                   result: Path, seed: int, warmups: int, trace_file: Path | None = None) -> list[str]:
    """``vllm bench serve``'s arguments for one window against ``base_url``: OpenAI completions,
    streamed, every request's times saved in ``result``, the SLO counted by its own ``--goodput``.

    A concurrency is a closed loop (``--max-concurrency N --request-rate inf``); a request rate an
    open one (``--request-rate R --burstiness B``, no cap). Fixed lengths use the ``random`` dataset
    with the output forced (``--ignore-eos``, ``--random-range-ratio 0``); a trace the ``timed_trace``
    dataset over ``trace_file`` (``measure/dataset.py``: the prompts of its lengths, its arrivals)."""
    argv = ["--backend", "openai", "--base-url", base_url, "--endpoint", "/v1/completions",
            "--model", model, "--tokenizer", tokenizer, "--num-prompts", str(requests)]
    if load.request_rate is not None:
        argv += ["--request-rate", f"{load.request_rate:g}", "--burstiness", f"{load.burstiness:g}"]
    else:
        argv += ["--max-concurrency", str(load.concurrency), "--request-rate", "inf"]
    argv += ["--num-warmups", str(warmups), "--seed", str(seed), "--save-result", "--save-detailed",
             "--result-dir", str(result.parent), "--result-filename", result.name, "--disable-tqdm",
             "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
             "--ready-check-timeout-sec", "0", "--temperature", "0"]
    goodput = spec.slo.goodput_arg()
    if goodput is not None:
        argv += ["--goodput", *goodput.split()]
    if trace_file is not None:
        argv += ["--dataset-name", "timed_trace", "--dataset-path", str(trace_file)]
    else:
        argv += ["--dataset-name", "random", "--random-input-len", str(spec.input_tokens),
                 "--random-output-len", str(spec.output_tokens), "--random-range-ratio", "0", "--ignore-eos"]
    return argv


def command_line(args: Sequence[str]) -> str:
    """The window as one ``vllm bench serve`` command a person can paste (quoted for a POSIX shell)."""
    return shlex.join(["vllm", "bench", "serve", *args])


@dataclass(frozen=True)
class Job:
    """One window: the generator writes ``result`` (``--result-dir`` / ``--result-filename`` in ``args``)."""

    args: list[str]
    result: Path

    @property
    def done(self) -> Path:
        return self.result.with_suffix(".done")

    def line(self) -> str:
        return json.dumps({"args": self.args, "done": str(self.done)}) + "\n"


def generator_env() -> dict[str, str]:
    """Our environment, offline (the tokenizer is a local directory), unbuffered."""
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
                "TOKENIZERS_PARALLELISM": "false"})
    return env


def _die_with_parent() -> None:  # pragma: no cover (runs in the child)
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@dataclass(frozen=True)
class JobEnd:
    """How a job ended: ``rc`` 0 (its results are written), 1 (the generator raised: ``why``),
    -9 (past its deadline: killed) or the generator's exit code (it died)."""

    rc: int
    why: str = ""


@dataclass
class Generator:
    """One running generator process; ``job`` and ``deadline`` (monotonic seconds) while a job runs."""

    python: str
    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path
    started: float
    job: Job | None = None
    deadline: float = 0.0

    @classmethod
    def start(cls, python: str, *, log_path: Path) -> Generator:
        log = open(log_path, "ab")  # noqa: SIM115 (closed in kill)
        try:
            proc = subprocess.Popen(runner_argv(python), stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                    env=generator_env(), start_new_session=True, preexec_fn=_die_with_parent)
        except OSError:
            log.close()
            raise
        return cls(python, proc, log, log_path, time.monotonic())

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def submit(self, job: Job, *, timeout_s: float) -> None:
        """Run ``job`` next; it must end within ``timeout_s`` (the generator's own start-up included)."""
        assert self.job is None, "one job at a time"
        with contextlib.suppress(FileNotFoundError):
            job.done.unlink()
        self.job, self.deadline = job, time.monotonic() + timeout_s
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(job.line().encode())
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it died: poll() says how

    def poll(self) -> JobEnd | None:
        """How the current job ended; None while it runs (past its deadline the generator is killed)."""
        job = self.job
        assert job is not None, "no job submitted"
        if job.done.is_file():
            self.job = None
            status = job.done.read_text(errors="replace").strip()
            return JobEnd(0) if status == "ok" else JobEnd(1, status.splitlines()[-1] if status else "failed")
        rc = self.proc.poll()
        if rc is not None:
            self.job = None
            self.log.close()
            return JobEnd(rc, f"exited with {rc}")
        if time.monotonic() >= self.deadline:
            self.job = None
            self.kill()
            return JobEnd(-signal.SIGKILL, "ran past its time")
        return None

    def kill(self) -> None:
        """Its whole process group, now, and wait for it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(10)
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        self.log.close()

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        keep = [t for t in text if t.strip() and not t.startswith((" - leaked", "nanobind:"))]
        return " | ".join(keep[-lines:])


class Generators:
    """The measurement's generator processes, one per Python, started ahead (:meth:`warm`) so their
    start-up overlaps the first engine's; a dead or killed one is started afresh when next asked for.
    :meth:`close` kills them all (every way out)."""

    def __init__(self, work: Path):
        self.work = work
        self.running: dict[str, Generator] = {}
        self.count = 0

    def get(self, python: str) -> Generator:
        g = self.running.get(python)
        if g is not None and g.alive:
            return g
        if g is not None:
            g.kill()
        self.count += 1
        g = Generator.start(python, log_path=self.work / f"load-generator-{self.count}.log")
        self.running[python] = g
        return g

    def warm(self, pythons: list[str]) -> None:
        """Start each now (a Python that cannot start is reported when its deployment asks for it)."""
        for python in dict.fromkeys(pythons):
            with contextlib.suppress(OSError):
                self.get(python)

    def close(self) -> None:
        for g in self.running.values():
            g.kill()
        self.running.clear()
