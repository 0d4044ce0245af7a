"""``gpulayout parse-log FILE [--engine auto|vllm|sglang] [--json]``: what a startup log says.

``FILE`` is a vLLM or SGLang startup log (``-`` reads stdin); pasted logs with colour codes, process
prefixes and container timestamps are fine. ``--json`` prints design.md's object: ``engine``,
``kv_tokens`` (the smallest pool when several ranks or DP engines report), ``kv_tokens_all``,
``gpu_blocks``, ``max_concurrency``, ``max_concurrency_len``, ``available_kv_gib``, ``error_kind``,
``error_numbers`` (null where the log does not say).

Exit codes: 0 when the log shows a KV pool or a recognised error (an engine that failed to start
is a successful parse: the error is the answer); 2 when the file cannot be read, or when it shows
neither (most likely not an engine's startup log, or cut before the pool; the output is still
printed, and one line on stderr says why the exit code is 2).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import InputError
from ..logparse import StartupLog, parse_log


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the engine's startup log ('-' for stdin)")
    p.add_argument("--engine", choices=("auto", "vllm", "sglang"), default="auto",
                   help="which engine wrote it (default: recognised from the log)")
    p.add_argument("--json", action="store_true", help="print one JSON object (design.md shape)")


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.buffer.read().decode("utf-8", "replace")
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        raise InputError("no such file", where=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a log file", where=path) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", where=path) from None


def summary(log: StartupLog) -> str:
    """A few lines a person reads at a glance."""
    engine = {"vllm": "vLLM", "sglang": "SGLang"}.get(log.engine or "", "unknown engine")
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


def run(args: argparse.Namespace) -> int:
    log = parse_log(_read(args.file), engine=args.engine)
    if args.json:
        json.dump(log.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(summary(log) + "\n")
    if log.kv_tokens is None and log.gpu_blocks is None and log.error_kind is None:
        where = "stdin" if args.file == "-" else args.file
        print(f"gpulayout: {where}: no KV pool line and no recognised error: is this a vLLM or SGLang "
              f"startup log, and does it reach the KV cache allocation?", file=sys.stderr)
        return 2
    return 0
