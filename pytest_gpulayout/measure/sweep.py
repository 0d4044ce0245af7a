"""The windows also written the way ``vllm bench sweep serve`` writes its runs, so a point can be read,
plotted and re-run with vLLM's own tools.

``vllm bench sweep serve`` (vllm/benchmarks/sweep/serve.py 0.32) keeps, under its output folder, one
folder per server and benchmark combination, ``SERVE-<serve name>-BENCH-<bench name>`` (``_get_comb_base_path``,
lines 131-145, names as ``ParameterSweepItem.name``: ``_benchmark_name``, else ``key=value`` joined by
``-``), holding ``run=<n>.json`` per run and ``summary.json`` (the list of runs), and one
``summary.csv`` of every run (``run_combs``, ``pandas.DataFrame.from_records(all_data).to_csv``: an index
column, then the keys in the order first seen). A run's record is the ``vllm bench serve`` result
without the per-request lists (its sweep runs without ``--save-detailed``: ``input_lens``,
``output_lens``, ``start_times``, ``ttfts``, ``itls``, ``generated_texts``, ``errors`` are dropped,
serve.py lines 2373-2387) plus ``run_number``, the server's and the benchmark's parameters
(``_update_run_data``, lines 55-65). Here the server parameters are the deployment's (``_benchmark_name``
and its TP/PP/DP sizes), the benchmark's its load (``max_concurrency``, or ``request_rate`` and
``burstiness``), and ``_launch`` says which launch the run was measured in. ``vllm bench sweep plot
<folder>`` reads it (``summary.json`` under it, sweep/plot.py line 440).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.measure.result import Window
from pytest_gpulayout.workload import Load

#: what ``vllm bench serve`` leaves out of its result without ``--save-detailed``
DETAILED = ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors")


def serve_params(dep: Deployment) -> dict[str, object]:
    return {"_benchmark_name": dep.name, "tensor_parallel_size": dep.tp, "pipeline_parallel_size": dep.pp,
            "data_parallel_size": dep.dp}


def bench_params(load: Load) -> dict[str, object]:
    if load.request_rate is not None:
        return {"request_rate": load.request_rate, "burstiness": load.burstiness}
    return {"max_concurrency": load.concurrency}


def item_name(params: Mapping[str, object]) -> str:
    """``ParameterSweepItem.name``: its ``_benchmark_name``, else ``key=value`` joined by ``-``."""
    if "_benchmark_name" in params:
        return str(params["_benchmark_name"])
    return "-".join(f"{k}={v}" for k, v in params.items() if k != "_benchmark_name")


def sanitize(name: str) -> str:
    """vllm/benchmarks/sweep/utils.py ``sanitize_filename``."""
    return name.replace("/", "_").replace("..", "__").strip("'").strip('"')


def run_record(result: Mapping[str, Any], *, run_number: int, launch: int, serve: Mapping[str, object],
               bench: Mapping[str, object]) -> dict[str, Any]:
    record = {k: v for k, v in result.items() if k not in DETAILED}
    record["run_number"] = run_number
    record.update(serve)
    record.update(bench)
    record["_launch"] = launch
    return record


def _cell(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_csv(records: Sequence[Mapping[str, Any]], path: Path) -> None:
    """``DataFrame.from_records(records).to_csv(path)``'s layout: an unnamed index column, the keys as
    first seen, an empty cell where a record lacks the key."""
    columns: dict[str, None] = {}
    for r in records:
        columns.update(dict.fromkeys(r))
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["", *columns])
        for i, r in enumerate(records):
            out.writerow([i, *(_cell(r.get(c)) for c in columns)])


def write_sweep(root: Path, runs: Mapping[str, tuple[Deployment, Sequence[Window]]]) -> Path:
    """The sweep folder for every deployment's windows (their result files re-read); returns ``summary.csv``."""
    root.mkdir(parents=True, exist_ok=True)
    every: list[dict[str, Any]] = []
    for dep, windows in runs.values():
        serve = serve_params(dep)
        by_load: dict[Load, list[Window]] = {}
        for w in windows:
            by_load.setdefault(w.load, []).append(w)
        for load, ws in by_load.items():
            bench = bench_params(load)
            folder = root / sanitize("-".join(("SERVE-", item_name(serve), "BENCH-", item_name(bench))))
            folder.mkdir(parents=True, exist_ok=True)
            comb = []
            for n, w in enumerate(ws):
                if w.result_path is None:
                    continue
                try:
                    result = json.loads(Path(w.result_path).read_text())
                except (OSError, ValueError):
                    continue
                record = run_record(result, run_number=n, launch=w.launch, serve=serve, bench=bench)
                (folder / f"run={n}.json").write_text(json.dumps(record, indent=4))
                comb.append(record)
            (folder / "summary.json").write_text(json.dumps(comb, indent=4))
            every.extend(comb)
    write_csv(every, root / "summary.csv")
    return root / "summary.csv"
