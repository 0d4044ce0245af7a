"""A ``measure.trace`` file read and checked at load, before any engine starts: one JSON object a line
with ``input_length`` and ``output_length`` (tokens, whole numbers >= 1) and ``timestamp`` (seconds,
>= 0, not decreasing), the fields ``vllm bench serve``'s ``timed_trace`` dataset reads by default
(``--timed-trace-label-input-length`` / ``-output-length`` / ``-timestamp``, vllm/benchmarks/datasets/
datasets.py 0.32 lines 1717-1735). Blank lines are skipped; other keys (``hash_ids``, ids) are allowed
and ignored. A bad line is one error naming the file, the line and the field.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import read_text
from pytest_gpulayout.inputs.values import describe
from pytest_gpulayout.workload import TraceRequest

FIELDS = ("input_length", "output_length", "timestamp")


def _length(value: object, where: str, key: str, by: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"must be a whole number of tokens >= 1, not {describe(value)}{by}", where=where, key=key)
    return value


def read_trace(path: Path, *, named_by: str = "") -> tuple[TraceRequest, ...]:
    """The requests of the trace at ``path``; ``named_by`` (``gpulayout.yaml: deployments.a.measure.trace``)
    is added to each error, so the user knows which setting pointed at the file."""
    by = f" (the trace named by {named_by})" if named_by else ""
    text = read_text(path)
    out: list[TraceRequest] = []
    last = -math.inf
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(line)
        except ValueError as err:
            raise InputError(f"not a JSON object{by}: {err}", where=where) from None
        if not isinstance(row, dict):
            raise InputError(f"must be a JSON object with {', '.join(FIELDS)}, not {describe(row)}{by}", where=where)
        missing = [k for k in FIELDS if k not in row]
        if missing:
            raise InputError(f"missing {', '.join(missing)}{by}: each line needs {', '.join(FIELDS)}", where=where)
        ts = row["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts < 0:
            raise InputError(f"must be a number of seconds >= 0, not {describe(ts)}{by}", where=where, key="timestamp")
        if ts < last:
            raise InputError(f"{ts:g} comes before the line above's {last:g}: a trace is in arrival order{by}",
                             where=where, key="timestamp")
        last = float(ts)
        out.append(TraceRequest(_length(row["input_length"], where, "input_length", by),
                                _length(row["output_length"], where, "output_length", by), float(ts)))
    if not out:
        raise InputError(f"holds no request{by}: one JSON object a line with {', '.join(FIELDS)}", where=path)
    return tuple(out)
