"""``gpulayout parse-log --engine llamacpp``: the same contract (JSON keys, exit codes) for llama.cpp logs.

The JSON object carries design.md's keys (``kv_tokens`` = cells x streams of the full-attention cache,
``max_concurrency`` = streams, ``max_concurrency_len`` = cells per stream, ``available_kv_gib`` = all
KV buffers summed) plus ``llamacpp``: the KV MiB per buffer, the model and compute buffers, and each
KV cache's size line (a sliding-window model reports two caches; the buffers are summed).
"""

from __future__ import annotations

import argparse
import json
import sys

from pytest_gpulayout.engines.llamacpp.log import looks_like_llamacpp, parse_llamacpp_log
from pytest_gpulayout.errors import InputError


def is_llamacpp(text: str, engine: str, where: str) -> bool:
    """True when the llama.cpp parser should read ``text``: asked for, or recognised under ``auto``."""
    if engine == "llamacpp":
        if not text.strip():
            raise InputError("empty: no log lines to read", where=where)
        if not looks_like_llamacpp(text):
            raise InputError("no llama.cpp line in this log (llama_kv_cache, llama_model_loader, load_tensors "
                             "...): run without --engine to detect the engine", where=where, key="--engine")
        return True
    return engine == "auto" and looks_like_llamacpp(text)


def run_llamacpp(text: str, args: argparse.Namespace, where: str) -> int:
    log = parse_llamacpp_log(text)
    sl = log.to_startup_log()
    if log.kv_mib is None and sl.error_kind is None:
        raise InputError("no KV cache line and no recognised error: does this llama.cpp log reach the KV cache "
                         "allocation (llama_kv_cache: ... KV buffer size)?", where=where)
    if args.json:
        json.dump({**sl.to_json(), "llamacpp": log.to_json()}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        lines = ["engine: llama.cpp"]
        if log.kv_mib is not None:
            per = ", ".join(f"{k} {v:,.2f} MiB" for k, v in log.kv_buffers_mib.items())
            lines.append(f"KV cache: {log.kv_mib:,.2f} MiB" + (f" ({per})" if per else ""))
        for r in log.kv:
            if r.cells is not None:
                lines.append(f"  cache: {r.cells:,} cells x {r.streams or 1} stream(s), {r.layers} layers, "
                             f"K {r.type_k}, V {r.type_v}, {r.mib:,.2f} MiB")
        if sl.kv_tokens is not None:
            lines.append(f"KV pool: {sl.kv_tokens:,} tokens")
        if log.model_buffers_mib:
            lines.append("model buffers: " + ", ".join(f"{k} {v:,.2f} MiB" for k, v in log.model_buffers_mib.items()))
        if log.compute_buffers_mib:
            lines.append("compute buffers: " + ", ".join(f"{k} {v:,.2f} MiB"
                                                         for k, v in log.compute_buffers_mib.items()))
        lines.append(f"ready: {'yes' if log.ready else 'no'}")
        lines.append(f"error: {sl.error_kind}" + (f"\n  {sl.error_line}" if sl.error_line else "")
                     if sl.error_kind else "error: none")
        sys.stdout.write("\n".join(lines) + "\n")
    return 1 if sl.error_kind is not None else 0
