"""A trace made into prompts of the stated lengths, for ``vllm bench serve --dataset-name timed_trace``.

vLLM 0.32's ``timed_trace`` builds each prompt from the row's ``hash_ids`` (``TimedTrace._expand_prompt``,
vllm/benchmarks/datasets/datasets.py lines 1470-1500): every id stands for ``--timed-trace-chunk-hash-size``
tokens (default 16, line 1690) sampled from the tokenizer's vocabulary, the last chunk cut to what the
``input_length`` leaves, and nothing past the ids. A row of ``input_length, output_length, timestamp``
alone has no ids: its prompt is empty, and the server answers every request with a 400. So each request
is written with ``ceil(input_length / 16)`` ids of its own (no two requests share a chunk, so none is a
cached prefix of another: the length is all new prompt), and its timestamp counted from the trace's first
request (``get_request`` sleeps until each absolute timestamp, serve.py lines 500-515). The output is forced
to ``output_length`` (the dataset sets ``ignore_eos``, serve.py lines 2146-2153).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

from pytest_gpulayout.workload import TraceRequest

#: vLLM's ``--timed-trace-chunk-hash-size`` default: tokens per hash id
CHUNK = 16


def hash_ids(input_length: int, *, start: int) -> list[int]:
    """The ids of one request's prompt from ``start`` on: enough for ``input_length`` tokens."""
    return list(range(start, start + math.ceil(input_length / CHUNK)))


def timed_trace_lines(requests: Sequence[TraceRequest]) -> list[str]:
    """One JSON line per request, as ``timed_trace`` reads it."""
    first = requests[0].timestamp if requests else 0.0
    lines, start = [], 0
    for r in requests:
        ids = hash_ids(r.input_length, start=start)
        start += len(ids)
        lines.append(json.dumps({"timestamp": round(r.timestamp - first, 6), "input_length": r.input_length,
                                 "output_length": r.output_length, "hash_ids": ids}))
    return lines


def write_timed_trace(requests: Sequence[TraceRequest], path: Path) -> Path:
    path.write_text("\n".join(timed_trace_lines(requests)) + "\n")
    return path
