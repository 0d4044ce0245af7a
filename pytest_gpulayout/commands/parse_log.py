"""``gpulayout parse-log FILE [--engine auto|vllm|sglang] [--json]``: what a startup log says.

``FILE`` is a vLLM or SGLang startup log (``-`` reads stdin); pasted logs with colour codes, process
prefixes and container timestamps are fine. ``--json`` prints one object: ``engine``,
``kv_tokens`` (the smallest pool when several ranks or DP engines report), ``kv_tokens_all``,
``gpu_blocks``, ``max_concurrency``, ``max_concurrency_len``, ``available_kv_gib``, ``error_kind``,
``error_numbers`` (null where the log does not say).

Exit codes follow the project's (0 pass, 1 a check failed, 2 bad input), because the command is used as
a CI gate on a recorded startup: ``parse-log engine.log || exit 1`` must stop the pipeline when the
engine failed to start, so a recognised error cannot exit 0 just because it parsed well.

* 0: the log shows a KV pool and no recognised error.
* 1: the log shows a recognised error (``error_kind`` is set, ``other_error`` included), with or
  without a pool; the report is printed as usual, the error is its answer.
* 2: bad input: the file cannot be read, is empty or binary, shows neither a pool nor an error (most
  likely not an engine's startup log, or cut before the pool), or ``--engine`` names the other engine
  than the one that wrote the log. One line on stderr says which; the text summary prints nothing, so
  no half-empty report can be mistaken for an answer. ``--json`` still prints its object (what the
  log says, null elsewhere), so that a pipeline reading stdout always gets valid JSON; the exit code
  says it is not an answer.
"""

from __future__ import annotations

import argparse
import json
import sys

from pytest_gpulayout.engines.registry import ENGINE_NAMES, ENGINES, LOG_GRAMMARS, log_grammars
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import read_text
from pytest_gpulayout.launch.logparse import LogWatcher, StartupLog, parse_log

_NAMES = {name: engine.display for name, engine in ENGINES.items()}

EXIT_CODES = """\
exit codes:
  0  the log shows a KV pool and no recognised error
  1  the log shows a recognised error (the engine failed or warned: error_kind is set)
  2  bad input: unreadable, empty or binary file, a log with neither a KV pool nor a
     recognised error, or --engine naming the other engine than the one that wrote it
     (one line on stderr; --json still prints its object, null where the log says nothing)"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the engine's startup log ('-' for stdin)")
    p.add_argument("--engine", choices=("auto", *ENGINE_NAMES), default="auto",
                   help="which engine wrote it (default: recognised from the log)")
    p.add_argument("--json", action="store_true", help="print one JSON object (keys: README.md, The CLI)")
    p.epilog = EXIT_CODES
    p.formatter_class = argparse.RawDescriptionHelpFormatter  # keep the table's line breaks


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8", "replace")
    return read_text(path, lenient=True)


def summary(log: StartupLog) -> str:
    """A few lines a person reads at a glance."""
    engine = _NAMES.get(log.engine or "", "unknown engine")
    lines = [f"engine: {engine}"]
    if log.kv_tokens is not None:
        pool = f"KV pool: {log.kv_tokens:,} tokens"
        n = len(log.kv_tokens_all)
        if n > 1 and len(set(log.kv_tokens_all)) == 1:
            pool += f" ({n} reports, all equal)"
        elif n > 1:
            pool += f" (smallest of {n} reports: {', '.join(f'{t:,}' for t in log.kv_tokens_all)})"
        lines.append(pool)
    elif log.gpu_blocks is not None:
        lines.append(f"KV pool: {log.gpu_blocks:,} blocks (block size not in the log)")
    else:
        lines.append("KV pool: not reported")
    if log.gpu_blocks is not None and log.kv_tokens is not None:
        lines.append(f"GPU blocks: {log.gpu_blocks:,}")
    if log.max_concurrency is not None and log.max_concurrency_len is not None:
        lines.append(f"max concurrency: {log.max_concurrency:.2f}x at {log.max_concurrency_len:,} tokens "
                     f"per request")
    if log.available_kv_gib is not None:
        lines.append(f"KV cache memory: {log.available_kv_gib:g} GiB")
    if log.weights_gib is not None:
        lines.append(f"weights: {log.weights_gib:g} GiB per rank")
    lines.append(f"ready: {'yes' if log.ready else 'no'}")
    if log.error_kind is not None:
        nums = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in log.error_numbers.items())
        lines.append(f"error: {log.error_kind}" + (f" ({nums})" if nums else ""))
        if log.error_line:
            lines.append(f"  {log.error_line}")
    else:
        lines.append("error: none")
    return "\n".join(lines)


def engines_seen(text: str) -> set[str]:
    """Every engine some line of ``text`` is recognisably from (the parser's own per-line detection).

    The parser reads every engine's pool lines whatever ``--engine`` says, so a forced engine alone
    would relabel a vLLM log as SGLang without a word. Auto-detection stops at the first marked line;
    this looks at every line, so a log that really mixes both (SGLang 0.4 logs carry vLLM module
    paths) keeps the user's choice, and only a log with none of the forced engine's lines is refused.
    """
    seen: set[str] = set()
    watcher = LogWatcher(LOG_GRAMMARS)  # every registered engine's grammar is asked about each line
    for line in text.splitlines():
        watcher.grammar = None  # re-arm detection: the one line decides alone
        watcher.feed(line)
        if watcher.engine is not None:
            seen.add(watcher.engine)
            if len(seen) == len(LOG_GRAMMARS):
                break
    return seen


def _check_input(text: str, engine: str, where: str) -> None:
    """Refuse, in one line, what is not an answer: nothing to read, or the wrong engine forced."""
    if not text.strip():
        raise InputError("empty: no log lines to read", where=where)
    if "\x00" in text or text.count("\ufffd") > len(text) // 10:  # NULs, or mostly undecodable bytes
        raise InputError("binary data, not a text startup log", where=where)
    if engine == "auto":
        return
    seen = engines_seen(text)
    if engine not in seen and seen:
        other = sorted(seen)[0]
        raise InputError(f"no {_NAMES[engine]} line in this log, but {_NAMES[other]} lines: it was written "
                         f"by {_NAMES[other]}; run with --engine {other} or without --engine",
                         where=where, key="--engine")


def own_watcher_log(text: str, engine: str, where: str) -> StartupLog | None:
    """The log as read by the watcher of an engine without a ``LogGrammar`` (``Engine.logs`` None: it
    reads its log itself, ``Engine.log_watcher``): the one ``--engine`` names, or under ``auto`` the first
    whose watcher recognised its own lines (its ``StartupLog.engine``); None when no such engine wrote it."""
    names = [n for n, e in ENGINES.items() if e.logs is None and engine in ("auto", n)]
    for name in names:
        watcher = ENGINES[name].launch.log_watcher(1, 1)
        for line in text.splitlines():
            watcher.feed(line)
        log = watcher.result()
        if log.engine == name:
            return log
        if engine == name:
            raise InputError(f"no {_NAMES[name]} line in this log: run without --engine to detect the engine",
                             where=where, key="--engine")
    return None


def _print_json(log: StartupLog) -> None:
    json.dump(log.to_json(), sys.stdout, indent=2)
    sys.stdout.write("\n")


def run(args: argparse.Namespace) -> int:
    where = "stdin" if args.file == "-" else args.file
    try:
        text = _read(args.file)
        from pytest_gpulayout.engines.llamacpp.parse_log import is_llamacpp, run_llamacpp

        if is_llamacpp(text, args.engine, where):  # llama.cpp's own lines (commands/parse_log_llamacpp.py)
            return run_llamacpp(text, args, where)
        _check_input(text, args.engine, where)
        own = own_watcher_log(text, args.engine, where)  # an engine that reads its log itself
    except InputError:
        if args.json:  # a pipeline (`parse-log --json f | jq .kv_tokens`) always gets an object
            _print_json(StartupLog())
        raise
    log = own if own is not None else parse_log(text, log_grammars(args.engine))
    if not log.has_pool and log.error_kind is None:
        if args.json:  # what the log does say (a per-rank KV size, the engine), nulls for the rest
            _print_json(log)
        raise InputError("no KV pool line and no recognised error: is this a vLLM or SGLang startup log, "
                         "and does it reach the KV cache allocation?", where=where)
    if args.json:
        json.dump(log.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(summary(log) + "\n")
    return 1 if log.error_kind is not None else 0
