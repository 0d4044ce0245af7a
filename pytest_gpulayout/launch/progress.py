"""Progress on long work: the phase of a launch read from its log as it streams, and where it is shown.

A CPU launch takes 35-60 s here and 1-20 minutes on GPUs; the planner and ``snapshot --ray`` can take
seconds to minutes. Without a word in between, a user cannot tell a slow engine from a hung one.

**Phases** (``PHASES``, in order; a launch only moves forward): ``starting`` (the engine was spawned),
``loading weights``, ``profiling`` (the engine measures what memory the pool may take), ``KV pool
reported`` (every expected engine logged its pool: the launcher's watcher says so), ``stopping``
(the answer is known: the tree is being stopped), ``cleaned`` (the tree is gone and cleaned up).
The lines that move a launch on were read from real logs (``tests/data/logs/``) and the engines'
source:

- vLLM: ``vllm/v1/worker/gpu_model_runner.py`` / ``cpu_model_runner.py`` ("Starting to load model"),
  ``vllm/model_executor/model_loader/default_loader.py`` ("Loading weights took", "Loading
  safetensors checkpoint shards"), ``gpu_model_runner.py`` ("Model loading took"; V0: "Loading model
  weights took"), ``vllm/v1/worker/gpu_worker.py`` ("Memory profiling takes", "Available KV cache
  memory"), ``vllm/compilation/backends.py`` and ``monitor.py`` (torch.compile runs in the profile
  run), ``vllm/v1/worker/cpu_worker.py`` ("Explicitly set ... GiB for KV cache": the CPU build's
  sizing step), ``vllm/v1/core/kv_cache_utils.py`` ("GPU KV cache size" / "CPU KV cache size").
- SGLang: ``python/sglang/srt/model_executor/model_runner.py`` ("Load weight begin", "Load weight
  end" before the pool is sized, "KV Cache is allocated"), ``managers/scheduler.py``
  ("max_total_num_tokens=").
- llama.cpp: ``tools/server/server.cpp`` ("load_model: loading model"), ``src/llama-model.cpp``
  ("load_tensors: loading model tensors"), ``src/llama-context.cpp`` ("constructing
  llama_context": the context and its KV cache are sized), ``src/llama-kv-cache.cpp`` (the pool).

**Where it is shown** (``StatusLine``): on a terminal one live line per launch, rewritten in place
(``\\r`` and an erase to the end of the line) and kept with its final phase; elsewhere (CI logs) one
line per phase change. The CLI writes to stderr, so ``--json`` on stdout stays what a pipeline
parses; under pytest it goes through the terminal reporter (``pytest_progress``).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

STARTING = "starting"
LOADING = "loading weights"
PROFILING = "profiling"
KV_REPORTED = "KV pool reported"
STOPPING = "stopping"
CLEANED = "cleaned"
#: The phases of a launch, in the order it goes through them (it may skip some).
PHASES: tuple[str, ...] = (STARTING, LOADING, PROFILING, KV_REPORTED, STOPPING, CLEANED)

#: ``progress(phase, elapsed_s, timeout_s, log_path)``: what ``launch()`` calls on each phase change
#: (and about once a second in between with the same phase, so a live line can keep its clock).
Progress = Callable[[str, float, float, "Path | None"], None]

#: Work that is usually quick (a plan, a cluster probe) says what it is doing once it has taken this long.
SLOW_AFTER_S = 2.0

#: Only the start of a line is searched: the markers sit near the front, and a flood of long lines
#: must not cost more than the log parser itself.
_SEARCH_CHARS = 400

_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (LOADING, re.compile(
        r"Starting to load model"                            # vLLM gpu/cpu_model_runner.py
        r"|Loading safetensors checkpoint shards|Loading pt checkpoint shards"  # vLLM weight_utils.py
        r"|Load weight begin"                                # SGLang model_runner.py
        r"|load_model: loading model|load_tensors: loading model tensors"  # llama.cpp
    )),
    (PROFILING, re.compile(
        r"Model loading took|Loading model weights took"     # vLLM V1 / V0: weights are in place
        r"|Memory profiling|Available KV cache memory"       # vLLM gpu_worker.py
        r"|Dynamo bytecode transform|torch\.compile takes"   # vLLM compiles in the profile run
        r"|Explicitly set \S+ GiB for KV cache"              # vLLM cpu_worker.py
        r"|Load weight end"                                  # SGLang: the pool is sized next
        r"|constructing llama_context"                       # llama.cpp
    )),
    (KV_REPORTED, re.compile(
        r"(?:GPU|CPU) KV cache size:|# (?:GPU|CPU) blocks:|\bGPU blocks: \d"  # vLLM V1 / V0
        r"|KV Cache is allocated|max_total_num_tokens="      # SGLang
        r"|KV self size|llama_kv_cache\w*: +size ="          # llama.cpp
    )),
)


def phase_of(line: str) -> str | None:
    """The phase a log line says the engine has reached, or None for a line that says nothing new."""
    head = line[:_SEARCH_CHARS]
    for phase, pattern in reversed(_MARKERS):  # the furthest phase a line names wins
        if pattern.search(head):
            return phase
    return None


class PhaseTracker:
    """The phase of one launch: moves forward only (rank 1 loading after rank 0 profiles is no step back).

    ``kv_from_log=False`` leaves ``KV pool reported`` to the caller: the launcher sets it when its
    watcher has seen every expected engine's pool (a DP=2 launch is not done at the first one).
    """

    def __init__(self, *, kv_from_log: bool = True) -> None:
        self.phase = STARTING
        self.kv_from_log = kv_from_log

    def feed(self, line: str) -> bool:
        """Read one log line; True when it moved the phase on."""
        if PHASES.index(self.phase) >= PHASES.index(KV_REPORTED):
            return False  # what it prints after the pool is not startup progress
        phase = phase_of(line)
        if phase is None or (phase == KV_REPORTED and not self.kv_from_log):
            return False
        return self.advance(phase)

    def feed_lines(self, lines: Sequence[str], on_move: Callable[[], None] | None = None) -> bool:
        """``feed`` for each of ``lines`` (True when one moved the phase on), with one search per marker over
        the lot first: a block where no marker appears anywhere moves nothing. ``on_move`` is called at each
        step, so that a chunk holding "loading weights" and "profiling" shows both, in order."""
        if PHASES.index(self.phase) >= PHASES.index(KV_REPORTED) or not lines:
            return False
        joined = "\n".join(lines)
        if not any(pattern.search(joined) for _, pattern in _MARKERS):
            return False
        moved = False
        for line in lines:
            if self.feed(line):
                moved = True
                if on_move is not None:
                    on_move()
        return moved

    def advance(self, phase: str) -> bool:
        """Move on to ``phase`` if it is further; True when it moved."""
        if PHASES.index(phase) > PHASES.index(self.phase):
            self.phase = phase
            return True
        return False


# ------------------------------------------------------------------------------------------------
# Showing it
# ------------------------------------------------------------------------------------------------
_ERASE = "\x1b[K"  # erase to the end of the line (ECMA-48 EL)


class _Stream(Protocol):
    def write(self, text: str, /) -> Any: ...
    def flush(self) -> Any: ...


class StatusLine:
    """One status line on ``stream``.

    On a terminal (``tty``) every ``show`` rewrites the line in place (``\\r``, the text cut to the
    width, an erase to the end of the line); ``finish`` writes the final text in full and ends the line.
    Elsewhere each ``show`` whose ``key`` differs from the last one writes a line of its own.
    ``start`` is called before each write while the line is not live (pytest ends its current line
    of dots), ``end`` after ``finish`` (pytest starts the file's line again).
    A stream that cannot be written (closed, a broken pipe) is given up silently: progress must
    never fail the work it reports on.
    """

    def __init__(self, stream: _Stream, *, tty: bool, width: Callable[[], int] | None = None,
                 start: Callable[[], None] | None = None, end: Callable[[], None] | None = None) -> None:
        self.stream = stream
        self.tty = tty
        self._width = width or (lambda: shutil.get_terminal_size((100, 24)).columns)
        self._start = start
        self._end = end
        self._live = False
        self._last_key: str | None = None
        self.broken = False

    def _emit(self, text: str) -> None:
        if self.broken:
            return
        try:
            if not self._live and self._start is not None:
                self._start()
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # closed stream, broken pipe
            self.broken = True

    def _fit(self, text: str) -> str:
        """``text`` cut to the width: a line that wraps cannot be rewritten in place."""
        room = max(self._width() - 1, 20)
        return text if len(text) <= room else text[:room - 1] + "\u2026"

    def show(self, text: str, key: str | None = None) -> None:
        """Update the line (off a terminal: a new line, when ``key``, default ``text``, changed)."""
        if not self.tty:
            k = text if key is None else key
            if k != self._last_key:
                self._last_key = k
                self._emit(text + "\n")
            return
        self._emit("\r" + self._fit(text) + _ERASE)
        self._live = True

    def finish(self, text: str | None = None) -> None:
        """End the line with ``text`` as its final state (on a terminal it stays on the screen)."""
        if not self.tty:
            if text is not None:
                self.show(text)
        elif text is not None:  # in full: a line never rewritten again may wrap (the log path stays whole)
            self._emit("\r" + text + _ERASE + "\n")
        elif self._live:
            self._emit("\n")
        self._live = False
        self._last_key = None
        if self._end is not None and not self.broken:
            try:
                self._end()
            except (OSError, ValueError):
                self.broken = True


def status_text(name: str, phase: str, elapsed_s: float, timeout_s: float, log_path: Path | None) -> str:
    """``gpulayout: startup NAME: PHASE, 12 s of 600 s, log PATH`` (the same on a terminal and in CI)."""
    log = f", log {log_path}" if log_path is not None else ""
    return f"gpulayout: startup {name}: {phase}, {elapsed_s:.0f} s of {timeout_s:g} s{log}"


#: How a launch's wait for its GPUs shows as its phase (``waiting for GPU 0 held by pid N``): it
#: comes before ``starting`` and is not one of ``PHASES``.
WAITING = "waiting for "


class Reporter:
    """Where progress goes: one ``StatusLine`` per launch (``for_launch``) or slow task (``task``).

    ``waits_only``: a launch shows only its waits for GPUs (an xdist worker: the controller's line of
    dots stays whole, but a launch that cannot start because another holds its GPU says so)."""

    def __init__(self, new_line: Callable[[], StatusLine], *, waits_only: bool = False) -> None:
        self._new_line = new_line
        self._waits_only = waits_only

    def for_launch(self, name: str) -> Progress:
        """The ``progress`` callback for the launch of deployment ``name``."""
        line = self._new_line()
        ended = [False]
        waits_only = self._waits_only

        def report(phase: str, elapsed_s: float, timeout_s: float, log_path: Path | None) -> None:
            if ended[0] or (waits_only and not phase.startswith(WAITING)):
                return  # the line was closed at ``cleaned``
            text = status_text(name, phase, elapsed_s, timeout_s, log_path)
            if phase == CLEANED:
                ended[0] = True
                line.finish(text)
            else:
                line.show(text, key=phase)

        return report

    def task(self, what: str, *, delay_s: float | None = None,
             clock: Callable[[], float] = time.monotonic) -> SlowTask:
        """A status for work that may take long (the planner, a cluster probe): shown after ``delay_s``
        (default ``SLOW_AFTER_S``)."""
        return SlowTask(self._new_line(), what, delay_s=SLOW_AFTER_S if delay_s is None else delay_s, clock=clock)


class SlowTask:
    """Progress of work that is usually quick: nothing until it has taken ``delay_s``, then what it is
    doing now (a live line on a terminal; one line per ``stage`` elsewhere), and a closing line."""

    def __init__(self, line: StatusLine, what: str, *, delay_s: float, clock: Callable[[], float]) -> None:
        self.line = line
        self.what = what
        self.delay_s = delay_s
        self.clock = clock
        self.t0 = clock()
        self.shown = False

    def __call__(self, text: str, stage: str | None = None) -> None:
        elapsed = self.clock() - self.t0
        if elapsed < self.delay_s:
            return
        self.shown = True
        self.line.show(f"gpulayout: {self.what}: {text} ({elapsed:.0f} s)", key=stage or text)

    def done(self, text: str) -> None:
        """Close the status (only when something was shown: quick work stays silent)."""
        if self.shown:
            self.line.finish(f"gpulayout: {self.what}: {text} in {self.clock() - self.t0:.1f} s")
            self.shown = False


def stderr_reporter(stream: TextIO | None = None) -> Reporter:
    """The CLI's reporter: stderr (stdout is for the verdicts and ``--json``)."""
    out = stream if stream is not None else sys.stderr

    def new_line() -> StatusLine:
        try:
            tty = out.isatty()
        except (AttributeError, ValueError):
            tty = False
        return StatusLine(out, tty=tty)

    return Reporter(new_line)


class _TerminalReporterStream:
    """pytest's terminal reporter as a stream: text goes through it, so its own bookkeeping holds.

    A launch runs inside a test, where pytest captures stdout at the file descriptor: every write
    happens with that capture suspended (``global_and_fixture_disabled``, as live logging does),
    or it would land in the test's captured output instead of the terminal. ``start`` ends the line
    pytest is on (``ensure_newline``, as live logging does); ``end`` writes the test file's name
    again when pytest was in the middle of its line of dots, so the dot of the test that launched
    lands after it (``-v`` writes its test id again by itself).
    """

    def __init__(self, tr: Any, capman: Any) -> None:
        self.tr = tr
        self.capman = capman
        self.interrupted: Any = None

    def _uncaptured(self) -> contextlib.AbstractContextManager[Any]:
        if self.capman is None:
            return contextlib.nullcontext()
        return self.capman.global_and_fixture_disabled()  # type: ignore[no-any-return]

    def start(self) -> None:
        if self.tr.currentfspath is not None:
            self.interrupted = self.tr.currentfspath
        with self._uncaptured():
            self.tr.ensure_newline()

    def end(self) -> None:
        where, self.interrupted = self.interrupted, None
        if isinstance(where, Path) and self.tr.currentfspath is None:  # what write_fspath_result does
            import os

            with self._uncaptured():
                self.tr.write(os.path.relpath(where, self.tr.startpath) + " ")
                self.tr.flush()
            self.tr.currentfspath = where

    def write(self, text: str, /) -> None:
        with self._uncaptured():
            self.tr.write(text)
            self.tr.flush()

    def flush(self) -> None:
        pass  # each write flushed while the capture was suspended


class _WorkerStream:
    """An xdist worker's way to the terminal: the stderr it inherited, written with capture suspended."""

    def __init__(self, capman: Any, worker: str) -> None:
        self.capman = capman
        self.worker = worker

    def write(self, text: str, /) -> None:
        ctx = self.capman.global_and_fixture_disabled() if self.capman is not None else contextlib.nullcontext()
        with ctx:
            sys.stderr.write("".join(f"[{self.worker}] {ln}" for ln in text.splitlines(keepends=True)))
            sys.stderr.flush()

    def flush(self) -> None:
        pass


def pytest_reporter(config: Any) -> Reporter | None:
    """The reporter for a pytest run, or None where progress must not be written.

    - Through the terminal reporter, where there is one (``-p no:terminal``: none at all). An xdist
      worker has none that reaches the terminal (its stdout is the channel to the controller): it
      says only its waits for GPUs, one line each, on the stderr it inherited from the controller
      (the terminal), with pytest's capture suspended, naming the worker (``[gw0]``).
    - On a terminal: a live line per launch. pytest's current line (the file's dots, or ``-v``'s test
      id) is ended first, as live logging does; the line is kept with its final phase.
    - Not on a terminal (CI): one line per phase.
    - ``-q``: quiet. ``-q`` asks for the outcome only, and pytest keeps the width of the current line
      for its ``[ NN%]`` column: a line rewritten among the dots would shift it. Who wants to watch a
      launch drops ``-q`` (or runs ``gpulayout check --launch``); the startup finding names the log.
    """
    if config.get_verbosity() < 0:
        return None
    if hasattr(config, "workerinput"):
        worker = str(config.workerinput.get("workerid", "worker"))
        capman = config.pluginmanager.get_plugin("capturemanager")

        def worker_line() -> StatusLine:
            return StatusLine(_WorkerStream(capman, worker), tty=False)

        return Reporter(worker_line, waits_only=True)
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None:
        return None
    tty = bool(getattr(tr, "isatty", False))
    tw = getattr(tr, "_tw", None)

    def width() -> int:
        return int(getattr(tw, "fullwidth", 80))

    def new_line() -> StatusLine:
        stream = _TerminalReporterStream(tr, config.pluginmanager.get_plugin("capturemanager"))
        return StatusLine(stream, tty=tty, width=width, start=stream.start, end=stream.end)

    return Reporter(new_line)
