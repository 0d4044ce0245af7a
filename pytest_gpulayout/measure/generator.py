"""The load generator's command line and process: ``vllm bench serve`` (``vllm.benchmarks.serve``),
run with the Python of an environment that has vLLM (see ``measure/__init__.py`` for the choice).

Several windows run in one process (``RUNNER`` calls ``main`` once per window, each with its own
seed and result file): the generator's own start-up (imports, tokenizer: ~8 s on CPU) is paid once
per concurrency, not per window. It is started through a short runner (``python -c``) that calls
``vllm.benchmarks.serve`` the way ``vllm bench serve`` does, without the ``vllm`` CLI's start-up (which reads
the installed
distribution's version and fails where vLLM is installed under another distribution name, as the
CPU build is). Argument vector, never a shell; its own process group; ``PR_SET_PDEATHSIG`` so it
dies with this process; killed with its group on every way out (:meth:`Generator.kill`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pytest_gpulayout.workload import MeasureSpec

#: what ``vllm bench serve`` runs (``vllm/entrypoints/cli/benchmark/serve.py``), with the CLI's
#: fallback to the CPU platform where none is detected (the generator needs no accelerator)
RUNNER = (
    "import sys\n"
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
    "windows = int(sys.argv[1])\n"
    "for i in range(windows):\n"
    "    args = parser.parse_args(sys.argv[2:])  # afresh: main() changes what it is given\n"
    "    args.seed, args.result_filename = args.seed + i, f'{args.result_filename[:-5]}-w{i}.json'\n"
    "    main(args)\n"
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


def generator_argv(python: str, spec: MeasureSpec, *, base_url: str, model: str, tokenizer: str,
                   concurrency: int, requests: int, result_dir: Path, result_name: str, seed: int,
                   windows: int = 1) -> list[str]:
    """``vllm bench serve`` against ``base_url`` for ``windows`` windows: OpenAI completions, streamed.
    Window ``i`` writes ``<result_name without .json>-w<i>.json`` in ``result_dir``."""
    warmups = concurrency if spec.warmup_requests is None else spec.warmup_requests
    argv = [python, "-c", RUNNER, str(windows), "--backend", "openai", "--base-url", base_url,
            "--endpoint", "/v1/completions",
            "--model", model, "--tokenizer", tokenizer, "--num-prompts", str(requests),
            "--max-concurrency", str(concurrency), "--request-rate", "inf", "--num-warmups",
            str(warmups), "--seed", str(seed), "--save-result", "--save-detailed",
            "--result-dir", str(result_dir), "--result-filename", result_name, "--disable-tqdm",
            "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
            "--ready-check-timeout-sec", "0", "--temperature", "0"]
    if spec.trace is not None:
        argv += ["--dataset-name", "timed_trace", "--dataset-path", str(spec.trace)]
    else:
        argv += ["--dataset-name", "random", "--random-input-len", str(spec.input_tokens),
                 "--random-output-len", str(spec.output_tokens), "--random-range-ratio", "0", "--ignore-eos"]
    return argv


def generator_env() -> dict[str, str]:
    """Our environment, offline (the tokenizer is a local directory), unbuffered."""
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
                "TOKENIZERS_PARALLELISM": "false"})
    return env


def _die_with_parent() -> None:  # pragma: no cover (runs in the child)
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@dataclass
class Generator:
    """One running ``vllm bench serve``, bounded by ``deadline`` (monotonic seconds)."""

    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    log_path: Path
    deadline: float
    started: float

    @classmethod
    def start(cls, argv: list[str], *, log_path: Path, timeout_s: float) -> Generator:
        log = open(log_path, "wb")  # noqa: SIM115 (closed in kill/finish)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=generator_env(), start_new_session=True, preexec_fn=_die_with_parent)
        except OSError:
            log.close()
            raise
        now = time.monotonic()
        return cls(proc, log, log_path, now + timeout_s, now)

    def poll(self) -> int | None:
        """Its exit code once it ended; None while it runs (killed past its deadline: -9)."""
        rc = self.proc.poll()
        if rc is None and time.monotonic() >= self.deadline:
            self.kill()
            return -signal.SIGKILL
        if rc is not None:
            self.log.close()
        return rc

    def kill(self) -> None:
        """Its whole process group, now, and wait for it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(10)
        self.log.close()

    def tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        keep = [t for t in text if t.strip() and not t.startswith((" - leaked", "nanobind:"))]
        return " | ".join(keep[-lines:])
