"""The manifest's ``measure:`` block (in ``defaults`` or a deployment): keys, parsing, merging.

``manifest/load.py`` adds ``measure`` to the deployment keys, parses the block where it is written
with :func:`parse_block` (so an error names ``defaults.measure.slo`` when the bad value is in
``defaults``), merges ``defaults`` under each deployment key by key (:func:`merge`, ``slo`` too) and
builds the :class:`MeasureSpec` with :func:`build`, reading and checking a ``trace`` there (so a bad
line is found before any launch, ``inputs/trace.py``). Every error is one line naming file and key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_gpulayout.inputs.files import not_regular
from pytest_gpulayout.inputs.trace import read_trace
from pytest_gpulayout.inputs.values import Ctx, describe, int_value, number_value, string_list_value, string_value
from pytest_gpulayout.manifest.keys import check_keys
from pytest_gpulayout.workload import MeasureSpec, Slo

KEYS = ("concurrency", "request_rate", "burstiness", "requests", "duration_s", "input_tokens", "output_tokens",
        "trace", "slo", "warmup_requests", "budget_s", "windows", "launches", "tokenizer", "python", "max_regression")
SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms", "max_itl_ms", "attainment")
#: what the SLO's former p99 keys meant, and what to write now
_PER_REQUEST = "(each request within it, as vllm bench serve --goodput counts)"

ALIASES: Mapping[str, tuple[str, str]] = {
    **dict.fromkeys(("max_concurrency", "users", "concurrent_requests", "parallel"), ("concurrency", "")),
    **dict.fromkeys(("num_prompts", "num_requests", "prompts", "n_requests"), ("requests", "")),
    **dict.fromkeys(("rate", "rates", "request_rates", "qps", "rps", "arrival_rate", "requests_per_s"),
                    ("request_rate", "(requests/s, open loop: one value or a sweep)")),
    **dict.fromkeys(("burst", "burstiness_factor", "gamma_shape"), ("burstiness", "(1: Poisson)")),
    **dict.fromkeys(("num_launches", "relaunches", "restarts", "server_launches", "launch_count"),
                    ("launches", "(independent launches of each deployment)")),
    **dict.fromkeys(("duration", "seconds", "time_s", "duration_sec"), ("duration_s", "")),
    **dict.fromkeys(("input_len", "input_length", "prompt_tokens", "isl", "random_input_len"),
                    ("input_tokens", "")),
    **dict.fromkeys(("output_len", "output_length", "max_tokens", "osl", "random_output_len"),
                    ("output_tokens", "")),
    **dict.fromkeys(("trace_file", "dataset", "dataset_path", "workload"), ("trace", "(a JSONL file)")),
    **dict.fromkeys(("slos", "sla", "target", "targets", "goodput"), ("slo", "")),
    **dict.fromkeys(("warmup", "warmups", "num_warmups", "warm_up"), ("warmup_requests", "")),
    **dict.fromkeys(("budget", "timeout_s", "max_seconds", "time_budget_s"), ("budget_s", "")),
    **dict.fromkeys(("repeats", "repetitions", "runs", "num_runs", "rounds"), ("windows", "(per launch)")),
    **dict.fromkeys(("regression", "max_regression_pct", "tolerance", "max_drop"),
                    ("max_regression", "(a fraction: 0.1)")),
    **{k: (f"slo.{k}", "") for k in SLO_KEYS},
}
SLO_ALIASES: Mapping[str, tuple[str, str]] = {
    **dict.fromkeys(("ttft", "ttft_p99_ms", "ttft_p99", "p99_ttft_ms", "ttft_max_ms"), ("ttft_ms", _PER_REQUEST)),
    **dict.fromkeys(("tpot", "tpot_p99_ms", "tpot_p99", "p99_tpot_ms", "itl_p99_ms", "itl_p99", "p99_itl_ms"),
                    ("tpot_ms", f"{_PER_REQUEST}; a bound on every inter-token gap is max_itl_ms")),
    **dict.fromkeys(("e2e", "e2el", "e2el_ms", "e2e_p99_ms", "latency_ms", "e2el_p99_ms"), ("e2e_ms", _PER_REQUEST)),
    **dict.fromkeys(("itl", "itl_ms", "max_itl", "max_gap_ms"), ("max_itl_ms", "(every inter-token gap within it)")),
    **dict.fromkeys(("slo_attainment", "fraction", "share", "percentile", "goal"),
                    ("attainment", "(the share of requests, 0.9 is 90 %)")),
}


def _concurrency(ctx: Ctx, v: object, key: str) -> tuple[int, ...]:
    if isinstance(v, (list, tuple)):
        if not v:
            ctx.fail(key, "is an empty list: give one concurrency (8) or a sweep ([1, 4, 16])")
        out = tuple(int_value(ctx, x, f"{key}[{i}]", minimum=1) for i, x in enumerate(v))
        if len(set(out)) != len(out):
            ctx.fail(key, f"lists a concurrency twice: {list(v)}")
        return tuple(sorted(out))
    return (int_value(ctx, v, key, minimum=1),)


def _positive(what: str) -> Callable[[Ctx, object, str], float]:
    def parse(ctx: Ctx, v: object, key: str) -> float:
        x = number_value(ctx, v, key, what=what)
        if x <= 0:
            ctx.fail(key, f"must be {what}, not {x:g}")
        return x
    return parse


def _path(ctx: Ctx, v: object, key: str) -> str:
    return string_value(ctx, v, key, what="a path")


def _slo(ctx: Ctx, v: object, key: str) -> dict[str, float]:
    if not isinstance(v, Mapping):
        ctx.fail(key, f"must be a mapping with keys {', '.join(SLO_KEYS)}, not {describe(v)}")
    check_keys(ctx, v, SLO_KEYS, SLO_ALIASES, key, section="slo")
    out = {k: (_attainment(ctx, x, f"{key}.{k}") if k == "attainment" else
               _positive("a number of milliseconds > 0")(ctx, x, f"{key}.{k}")) for k, x in v.items()}
    if out and set(out) == {"attainment"}:
        ctx.fail(key, "sets only attainment: give the bounds too (ttft_ms, tpot_ms, e2e_ms or max_itl_ms)")
    return out


def _attainment(ctx: Ctx, v: object, key: str) -> float:
    x = number_value(ctx, v, key, what="a fraction")
    if not 0 < x <= 1:
        ctx.fail(key, f"must be a fraction above 0 and at most 1 (0.9 is 90 % of requests), not {x:g}")
    return x


def _rates(ctx: Ctx, v: object, key: str) -> tuple[float, ...]:
    values = v if isinstance(v, (list, tuple)) else [v]
    if not values:
        ctx.fail(key, "is an empty list: give one request rate (2) or a sweep ([1, 2, 4])")
    out = []
    for i, x in enumerate(values):
        where = f"{key}[{i}]" if isinstance(v, (list, tuple)) else key
        rate = number_value(ctx, x, where, what="a number of requests/s")
        if not 0 < rate < float("inf"):
            ctx.fail(where, f"must be a number of requests/s > 0 (a closed loop is concurrency), not {rate:g}")
        out.append(rate)
    if len(set(out)) != len(out):
        ctx.fail(key, f"lists a request rate twice: {list(values)}")
    return tuple(sorted(out))


def _fraction(ctx: Ctx, v: object, key: str) -> float:
    x = number_value(ctx, v, key, what="a fraction")
    if not 0 <= x < 1:
        ctx.fail(key, f"must be a fraction from 0 to 1 (0.1 is 10 %), not {x:g}")
    return x


def _python(ctx: Ctx, v: object, key: str) -> str:
    if isinstance(v, (list, tuple)):
        return string_list_value(ctx, v, key, example="/venv/bin/python", allow_empty=False)[0]
    return string_value(ctx, v, key, what="the path of a Python with vLLM installed")


_FIELDS: dict[str, Callable[[Ctx, object, str], Any]] = {
    "concurrency": _concurrency,
    "request_rate": _rates,
    "burstiness": _positive("a number > 0 (1: Poisson arrivals; below 1 burstier, above 1 more even)"),
    "requests": lambda ctx, v, k: int_value(ctx, v, k, minimum=1),
    "duration_s": _positive("a number of seconds > 0"),
    "input_tokens": lambda ctx, v, k: int_value(ctx, v, k, minimum=1),
    "output_tokens": lambda ctx, v, k: int_value(ctx, v, k, minimum=1),
    "trace": _path,
    "slo": _slo,
    "warmup_requests": lambda ctx, v, k: int_value(ctx, v, k, minimum=0),
    "budget_s": _positive("a number of seconds > 0"),
    "windows": lambda ctx, v, k: int_value(ctx, v, k, minimum=1),
    "launches": lambda ctx, v, k: int_value(ctx, v, k, minimum=1),
    "tokenizer": _path,
    "python": _python,
    "max_regression": _fraction,
}


def parse_block(ctx: Ctx, raw: object, key: str) -> dict[str, Any]:
    """The ``measure:`` mapping at ``key``, each value checked where it is written."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        ctx.fail(key, f"must be a mapping with keys {', '.join(KEYS)}, not {describe(raw)}")
    check_keys(ctx, raw, KEYS, ALIASES, key, section="measure")
    out = {k: _FIELDS[k](ctx, v, f"{key}.{k}") for k, v in raw.items() if v is not None}
    if "requests" in out and "duration_s" in out:
        ctx.fail(f"{key}.duration_s", "set requests or duration_s, not both")
    return out


def merge(defaults: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """``defaults``' block under the deployment's, key by key (``slo`` too). A deployment's
    ``requests`` replaces an inherited ``duration_s`` and the other way round."""
    base = dict(defaults)
    if "requests" in own:
        base.pop("duration_s", None)
    if "duration_s" in own:
        base.pop("requests", None)
    merged = {**base, **own}
    if "slo" in defaults or "slo" in own:
        merged["slo"] = {**defaults.get("slo", {}), **own.get("slo", {})}
    return merged


def build(ctx: Ctx, fields: Mapping[str, Any], prefix: str, base_dir: Path) -> MeasureSpec | None:
    """The :class:`MeasureSpec` of a merged block (None when no ``measure`` was written)."""
    if not fields:
        return None
    values = dict(fields)
    for k in ("trace", "tokenizer"):
        if k in values:
            p = Path(values[k]).expanduser()
            values[k] = p if p.is_absolute() else (base_dir / p)
    trace = values.get("trace")
    if trace is not None:
        if not trace.is_file():
            kind = not_regular(trace)
            ctx.fail(f"{prefix}.measure.trace",
                     f"not a regular file: {trace} ({kind})" if kind else f"no such file: {trace}")
        if "request_rate" in values:
            ctx.fail(f"{prefix}.measure.request_rate", "a trace sets its own arrivals (its timestamps): drop "
                                                       "request_rate, or drop trace for a Poisson sweep")
        values["trace_requests"] = read_trace(trace, named_by=f"{ctx.where}: {prefix}.measure.trace")
    if "request_rate" in values and "concurrency" not in values:
        values["concurrency"] = ()   # a rate sweep alone: no closed-loop point by default
    if "slo" in values:
        values["slo"] = Slo(**values["slo"])
    if "python" in values and "/" in values["python"]:
        p = Path(values["python"]).expanduser()
        values["python"] = str(p if p.is_absolute() else base_dir / p)
    return MeasureSpec(**values)
