"""``gpulayout plan MODEL [--machine M] ...``: candidate TP/PP/DP layouts side by side, best first.

Prints an aligned table (layout, GPUs, weights per GPU, KV bytes per token per rank, predicted pool
per replica, full-length requests, verdicts), one "why" line per layout, the refused layouts grouped
by reason, and, where the rules cannot decide, the manifest that measures the contenders. ``--json``
prints ``Plan.to_json()``; ``--html FILE`` writes the picture; ``--all`` lists every layout. Exit 0
when some layout is known to serve the model as asked, 1 when none does or when none is known to
(GPU memory unknown: no pool was predicted), 2 on bad input, 3 when ``--machine auto`` cannot probe
the GPUs. Arguments are checked before any work, so a bad one never costs a plan (or a probe).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_gpulayout.engines import registry
from pytest_gpulayout.engines.registry import ENGINE_NAMES as ENGINES
from pytest_gpulayout.engines.registry import KV_CACHE_DTYPES, get_engine
from pytest_gpulayout.findings import Status, facts_of, present
from pytest_gpulayout.inputs.files import writable_path
from pytest_gpulayout.planner.rows import LayoutRow, Plan
from pytest_gpulayout.report.text import per_replica_text, requests_text
from pytest_gpulayout.rules.kv_pool import KvPoolFacts

#: How many candidate layouts the text table shows (``--json`` lists all).
TEXT_LIMIT = 10
#: Refused layouts shown in the table (those closest to the demand), to say how far off they are.
REFUSED_IN_TABLE = 3
#: Lines of grouped refusal reasons before "... more".
REFUSED_LINES = 12


def _positive_int(what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", "").replace(",", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number, not {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{what} must be at least 1, not {value}")
        return value

    return parse


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--memory-fraction must be a number in (0, 1], not {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(
            f"--memory-fraction must be in (0, 1], not {value:g} (it is the share "
            f"of each GPU the engine may take, e.g. 0.9)"
        )
    return value


def _version(text: str) -> str:
    """``--engine-version``: a version the engine defaults can be looked up by (checked up front); a
    llama.cpp build tag (``b11434``) as the manifest's ``engine_version`` takes it."""
    from packaging.version import InvalidVersion, Version

    if re.fullmatch(r"[bB]\d+", text.strip()):
        return "b" + text.strip()[1:]
    try:
        Version(text.strip())
    except InvalidVersion:
        raise argparse.ArgumentTypeError(f"not a version: {text!r} (e.g. 0.11.0, or a llama.cpp build "
                                         f"tag such as b11434)") from None
    return text.strip()


def _catalog_epilog() -> str:
    try:
        from pytest_gpulayout.model.catalog import catalog_ids

        ids = catalog_ids()
    except Exception:  # the catalog is optional for --help; never let it break the CLI
        return ""
    return "bundled catalog models (MODEL may also be a directory holding config.json, or the file):\n  " + "\n  ".join(
        ids
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = _catalog_epilog()
    p.add_argument("model", metavar="MODEL", help="directory holding config.json | a config.json | catalog id")
    p.add_argument(
        "--machine",
        metavar="M",
        default="auto",
        help="auto (live NVML, default) | snapshot .yaml/.json | topo -m text | preset:<name>",
    )
    p.add_argument("--engine", choices=ENGINES, default="vllm", help="serving engine (default: vllm)")
    p.add_argument(
        "--engine-version",
        metavar="V",
        type=_version,
        default=None,
        help="engine version whose defaults to assume (default: the installed one)",
    )
    p.add_argument(
        "--max-model-len",
        metavar="N",
        type=_positive_int("--max-model-len"),
        default=None,
        help="longest request in tokens (default: the model's own maximum)",
    )
    need = p.add_mutually_exclusive_group()
    need.add_argument(
        "--concurrency",
        metavar="C",
        type=_positive_int("--concurrency"),
        default=None,
        help="full-length requests the deployment must hold at once, all DP replicas together",
    )
    need.add_argument(
        "--kv-tokens",
        metavar="T",
        type=_positive_int("--kv-tokens"),
        default=None,
        help="tokens of KV cache the deployment must hold, all DP replicas together",
    )
    p.add_argument(
        "--gpus",
        metavar="N",
        type=_positive_int("--gpus"),
        default=None,
        help="plan on at most N of the visible GPUs (default: all)",
    )
    p.add_argument(
        "--memory-fraction",
        metavar="F",
        type=_fraction,
        default=None,
        help="vLLM --gpu-memory-utilization / SGLang --mem-fraction-static (default: engine's)",
    )
    p.add_argument(
        "--kv-cache-dtype",
        choices=KV_CACHE_DTYPES,
        default="auto",
        metavar="DTYPE",
        help="KV cache dtype (auto | fp8 | ...; default auto)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object: model, machine, layouts")
    p.add_argument("--emit", choices=("cmd", "k8s", "lws", "compose"), default=None,
                   help="print the top layout as a ready artifact (a command line, a Deployment, a LeaderWorkerSet, "
                        "a compose file) that gpulayout check reads back")
    p.add_argument("--html", metavar="FILE", default=None, help="write a self-contained HTML report to FILE")
    p.add_argument(
        "--all",
        action="store_true",
        help=f"list every layout (default: the first {TEXT_LIMIT}, without the same shapes on fewer GPUs)",
    )
    p.add_argument(
        "--measure",
        action="store_true",
        help="launch the top layouts of distinct shapes (a tensor split, a pipeline split, copies: --measure-top) "
        "under one real load (gpulayout measure), and put the measured verdict beside the rules' ranking",
    )
    p.add_argument(
        "--measure-top",
        metavar="N",
        type=int,
        default=None,
        help="with --measure: how many distinct layouts to measure (default 3)",
    )
    p.add_argument(
        "--launch",
        metavar="FILE",
        default=None,
        help="with --measure: a YAML file with the launch: block (command, args, env, timeout_s) every measured "
        "layout is launched with, and optionally a measure: block (the load)",
    )
    p.add_argument(
        "--log-dir",
        metavar="DIR",
        default=None,
        help="with --measure: where engine logs and the load generator's results go (default: a temporary directory)",
    )


def run(args: argparse.Namespace) -> int:
    from pytest_gpulayout.host import Host
    from pytest_gpulayout.machine.sources import load_machine
    from pytest_gpulayout.model.load import load_model
    from pytest_gpulayout.planner.plan import plan

    html = writable_path(args.html, "--html") if args.html else None  # before the plan is computed
    if args.measure and get_engine(args.engine).planner.has_own_planner():
        from pytest_gpulayout.errors import InputError

        raise InputError(f"{args.engine}'s plan ranks its own splits and names no layouts to measure: write a manifest "
                         f"and run gpulayout measure", key="--measure")
    blocks = _measure_inputs(args)  # checked before the plan is computed, and long before any launch
    model = load_model(args.model, Path.cwd())
    machine = load_machine(args.machine, Path.cwd(), engines=registry.ENGINES.values())
    if get_engine(args.engine).planner.has_own_planner():  # llama.cpp: split modes and ratios instead of TP/PP/DP
        from pytest_gpulayout.engines.llamacpp.plan_command import run_llamacpp_plan
        from pytest_gpulayout.runner import evaluate

        return run_llamacpp_plan(args, model, machine, lambda dep: evaluate(dep, machine, model))
    if args.engine_version and args.engine_version.startswith("b"):
        from pytest_gpulayout.errors import InputError

        raise InputError(f"{args.engine_version} is a llama.cpp build tag; {args.engine} versions read like "
                         f"0.11.0", key="--engine-version")
    from pytest_gpulayout.launch.progress import stderr_reporter

    task = stderr_reporter().task("plan")  # on stderr, and only when it takes longer than 2 s
    outcome = "stopped"
    try:
        result = plan(
            model,
            machine,
            engine=args.engine,
            engine_version=args.engine_version,
            max_model_len=args.max_model_len,
            concurrency=args.concurrency,
            kv_tokens=args.kv_tokens,
            max_gpus=args.gpus,
            memory_fraction=args.memory_fraction,
            kv_cache_dtype=args.kv_cache_dtype,
            model_ref=args.model,
            host=Host.read(registry.ENGINES.values()),
            progress=task,
        )
        outcome = f"{len(result.layouts)} layouts evaluated"
    finally:
        task.done(outcome)
    if html is not None:
        from pytest_gpulayout.report.html import render_plan_html

        html.write_text(render_plan_html(result), encoding="utf-8")
    if args.emit:
        from pytest_gpulayout.artifacts.emit import emit

        top = next((r for r in result.layouts if r.refused is None), None)
        if top is None:
            sys.stderr.write("gpulayout: no layout serves: nothing to emit\n")
            return 1
        sys.stdout.write(emit(args.emit, engine=args.engine, model=args.model, tp=top.tensor_parallel_size,
                              pp=top.pipeline_parallel_size, dp=top.data_parallel_size, gpus=top.gpus,
                              max_model_len=top.max_model_len, version=args.engine_version))
        return 0 if result.serving else 1
    measured = _measure_candidates(result, args, *blocks) if args.measure else None
    if args.json:
        data = result.to_json()
        if args.measure:
            data["measured"] = measured
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_plan(result, limit=None if args.all else TEXT_LIMIT))
        if args.measure:
            sys.stdout.write(format_measured(measured))
    if measured is not None and measured.get("status") == "fail":
        return 1
    # a layout whose pool nobody could predict is not known to serve: never exit 0 on it
    return 0 if result.serving else 1


def _measure_inputs(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--launch FILE``'s launch and measure blocks (checked now), and ``--measure-top``."""
    from pytest_gpulayout.errors import InputError

    if not args.measure:
        for flag, value in (("--launch", args.launch), ("--measure-top", args.measure_top)):
            if value is not None:
                raise InputError(f"{flag} goes with --measure (the layouts it launches)", key=flag)
        return {}, {}
    if args.measure_top is not None and args.measure_top < 2:
        raise InputError(f"must be 2 or more: a measurement compares layouts, not {args.measure_top}",
                         key="--measure-top")
    if args.launch is None:
        return {}, {}
    from pytest_gpulayout.manifest.launch_file import read_launch_file

    return read_launch_file(Path(args.launch))


def _measure_candidates(result: Plan, args: argparse.Namespace, launch_block: dict[str, Any],
                        load_block: dict[str, Any]) -> dict[str, object] | None:
    """``--measure``: the top layouts of distinct shapes (``planner.measure.measured_layouts``: a split
    against copies wherever both fit), written as a measuring manifest in the log folder with the
    ``--launch`` block applied to every one, launched interleaved under one load, and the verdict beside
    the rules' ranking; None when fewer than two layouts serve."""
    from pytest_gpulayout.planner.measure import MEASURE_TOP, measured_layouts, measuring_manifest

    rows = measured_layouts(result.candidates, args.measure_top or MEASURE_TOP)
    if len(rows) < 2:
        return None
    import tempfile

    import yaml

    from pytest_gpulayout.fixtures import predicted_pools
    from pytest_gpulayout.host import Host
    from pytest_gpulayout.launch.progress import stderr_reporter
    from pytest_gpulayout.manifest.load import load_manifest
    from pytest_gpulayout.measure.against_rules import against_rules
    from pytest_gpulayout.measure.run import measure

    log_dir = Path(args.log_dir) if args.log_dir else Path(tempfile.mkdtemp(prefix="gpulayout-plan-measure-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / "gpulayout.yaml"
    path.write_text(yaml.safe_dump(measuring_manifest(rows, result.machine, launch=launch_block, load=load_block),
                                   sort_keys=False))
    manifest = load_manifest(path)
    reporter = stderr_reporter()
    host = Host.read(registry.ENGINES.values())
    deps = list(manifest.deployments)
    done = measure(deps, work_dir=log_dir, host=host, progress=reporter.for_launch,
                   on_window=lambda line: print(f"gpulayout: {line}", file=sys.stderr),
                   predicted=predicted_pools(deps, result.machine, host))
    data = done.to_json()
    data["candidates"] = {d.name: d.layout for d in manifest.deployments}
    data["rules_rank"] = {r.name: result.rank(r) for r in rows}
    data["against_rules"] = against_rules([r.name for r in rows], done)
    data["manifest"] = str(path)
    data["log_dir"] = str(log_dir)
    return data


def format_measured(measured: dict[str, object] | None) -> str:
    """The measured verdict under the plan (``--measure``), beside the rules' ranking."""
    from pytest_gpulayout.measure.text import lines_under, table

    if measured is None:
        return ("\nmeasured: nothing to measure: fewer than two layouts serve on the GPUs the plan's first uses "
                "(the plan above is the answer)\n")
    names = measured["candidates"]
    assert isinstance(names, dict)
    lines = ["", "measured (" + ", ".join(f"{n}: {layout}" for n, layout in names.items()) + "):"]
    lines += ["  " + ln for ln in (*table(measured), "", *lines_under(measured))]
    against = measured.get("against_rules")
    if isinstance(against, list):
        lines += ["", *(f"  {ln}" for ln in against)]
    lines.append(f"  the measuring manifest: {measured['manifest']} (gpulayout measure re-runs it)")
    lines.append(f"  logs and load-generator results: {measured['log_dir']}")
    return "\n".join(lines) + "\n"


# -- text ---------------------------------------------------------------------------------------


def _table(rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)]
        out.append("  ".join(cells).rstrip())
    return out


def _checks_cell(row: LayoutRow) -> str:
    """The verdicts worth reading; never "all pass" for a layout whose pool was not predicted."""
    unknown = not row.pool_predicted and row.refused is None
    skip = {"balance", "kv_pool"} if unknown else set()
    bad = [
        f"TP over {row.slow_link}" if (c == "links" and row.slow_link) else f"{c} {s.value}"
        for c, s in row.verdicts.items()
        if s in (Status.WARN, Status.FAIL) and c not in skip
    ]
    if unknown:
        bad.append("KV pool NOT predicted (memory unknown)")
    return ", ".join(bad) if bad else "all pass"


def _status_cell(row: LayoutRow) -> str:
    if row.refused:
        return "refused"
    if row.slow_link:
        return "starts, slow"
    return row.status.value if row.pool_predicted else "unknown"


def gpu_ranges(gpus: Sequence[int]) -> str:
    """GPU indices as ranges: ``0-127``, ``0-7,16-23``, ``0,2,4`` (128 GPUs are not 128 numbers)."""
    out: list[str] = []
    i = 0
    while i < len(gpus):
        j = i
        while j + 1 < len(gpus) and gpus[j + 1] == gpus[j] + 1:
            j += 1
        out.append(str(gpus[i]) if j == i else f"{gpus[i]},{gpus[j]}" if j == i + 1 else f"{gpus[i]}-{gpus[j]}")
        i = j + 1
    return ",".join(out)


def _refused_label(tp: int, pp: int, kind: tuple[str, int], sizes: Sequence[int]) -> str:
    """How refused layouts of one shape read: vLLM's own DP (``DP=1,2``), or independent engines / a
    deployment per host, which are not the same thing and must not look like it."""
    listed = ",".join(map(str, sorted(sizes)))
    if kind[0] == "engines":
        return f"TP={tp} PP={pp} as {listed} independent engines"
    if kind[0] == "hosts":
        return f"TP={tp} PP={pp} DP={listed} x{kind[1]} hosts"
    return f"TP={tp} PP={pp} DP={listed}" + (" EP" if kind[0] == "ep" else "")


def _group_refused(refused: Sequence[LayoutRow]) -> list[tuple[str, str]]:
    """(layouts, reason) with DP sizes of one TP x PP shape merged: ``TP=3 PP=1 DP=1,2``; independent
    engines (``as 2,4 independent engines``) and per-host deployments apart from vLLM's DP."""
    by_reason: dict[str, dict[tuple[int, int, tuple[str, int]], list[int]]] = {}
    # layouts the engine refuses outright first (heads, links, placement), then memory shortfalls
    order = sorted(
        refused,
        key=lambda r: (
            not str(r.refused).startswith(("heads", "links", "placement")),
            r.group_size,
            r.tp,
            r.pp,
            r.dp,
        ),
    )
    for r in order:
        kind = (("engines", 1) if r.engines else ("hosts", r.hosts) if r.hosts > 1
                else ("ep", 1) if r.expert_parallel else ("dp", 1))
        size = r.dp // r.hosts if kind[0] == "hosts" else r.dp
        by_reason.setdefault(r.refused or "", {}).setdefault((r.tp, r.pp, kind), []).append(size)
    out = []
    for reason, shapes in by_reason.items():
        text = "; ".join(_refused_label(tp, pp, kind, sizes) for (tp, pp, kind), sizes in shapes.items())
        out.append((text, reason))
    return out


def format_plan(plan: Plan, *, limit: int | None = TEXT_LIMIT) -> str:
    """The plan as text for a terminal (what ``gpulayout plan`` prints and examples/ keep).

    The rows shown are numbered 1, 2, 3 ... without gaps; with ``limit=None`` (``--all``) every
    candidate is shown and the numbers are the ranks of ``--json``. When some are left out, the line
    under the table says how many and how to see them. GPU lists read as ranges (``0-7,16-23``).
    """
    m, mc = plan.model, plan.machine
    lines = [
        f"model: {m.name} ({m.source}): {m.num_attention_heads} attention heads, "
        f"{m.num_key_value_heads} KV heads, "
        f"{m.num_hidden_layers} layers"
        + (", MLA" if m.is_mla else "")
        + (f", {m.num_experts} experts" if m.is_moe else ""),
        f"machine: {mc.headline()}"
        + (
            f" (planning on {plan.gpus_considered} of {len(mc.gpus)} GPUs)"
            if plan.gpus_considered < len(mc.gpus)
            else ""
        ),
    ]
    kv = next((r.findings.get("kv_pool") for r in plan.layouts if r.findings.get("kv_pool")), None)
    eng = f"engine: {plan.engine}" + (f" {plan.engine_version}" if plan.engine_version else "")
    facts = facts_of(kv, KvPoolFacts)
    fraction = present(facts.memory_fraction) if facts else None
    if facts is not None and fraction is not None:
        eng += f"; memory fraction {fraction:g} ({present(facts.memory_fraction_source)})"
    if plan.max_model_len:
        eng += f"; max_model_len {plan.max_model_len:,}"
    lines.append(eng)
    lines.append(f"needs: {plan.required or plan.assumed}")
    for note in plan.notes:
        lines.append(f"note: {note}")
    lines.append("")

    shown, hidden = plan.headline(limit)
    # refused for memory (pool too small, start-up check): their numbers say how far off they are
    sized = plan.closest_refused(REFUSED_IN_TABLE)
    if shown or sized:
        header = [
            "#",
            "layout",
            "GPUs",
            "weights GiB/GPU",
            "KV B/token/rank",
            "KV tokens/replica",
            "full-length reqs",
            "status",
            "checks",
        ]
        number = {id(r): i for i, r in enumerate(shown, 1)}  # the rows shown, numbered without gaps
        body = []
        for r in [*shown, *sized]:
            body.append(
                [
                    str(number[id(r)]) if r.refused is None else "-",
                    r.layout,
                    gpu_ranges(r.gpus),
                    f"{r.weights_gib_per_gpu:.2f}" if r.weights_gib_per_gpu is not None else "?",
                    f"{r.kv_bytes_per_token_per_rank:,}" if r.kv_bytes_per_token_per_rank else "?",
                    per_replica_text(r.predicted_kv_tokens_per_replica),
                    requests_text(r.full_length_requests),
                    _status_cell(r),
                    _checks_cell(r),
                ]
            )
        lines.extend(_table([header, *body], right={0, 3, 4, 5, 6}))
        lines.append("  (KV tokens per replica: xN = N replicas alike; full-length reqs: held at once, all replicas)")
        if hidden:
            past = limit is not None and len(shown) >= limit
            lines.append(
                f"  ({hidden} more layout{'s' if hidden != 1 else ''} not shown: the same shapes with fewer replicas"
                + (f" or past the first {limit}" if past else "")
                + "; --all lists every layout, --json too)"
            )
    if shown:
        lines.append("")
        lines.append("why:")
        for i, r in enumerate(shown, 1):
            lines.append(f"  {i:>2}  {r.layout}: {r.why}")
    else:
        lines.append("")
        lines.append("no layout serves this model on these GPUs with what was asked.")
    refused = _group_refused(plan.refused)
    if refused:
        lines.append("")
        lines.append(f"refused ({len(plan.refused)} layout{'s' if len(plan.refused) != 1 else ''}):")
        cap = len(refused) if limit is None else REFUSED_LINES
        for layouts_txt, reason in refused[:cap]:
            lines.append(f"  {layouts_txt}: {reason}")
        if len(refused) > cap:
            lines.append(f"  ... {len(refused) - cap} more reasons (--all or --json lists every layout)")
    if plan.measurement:
        lines.append("")
        lines.append("measure: " + plan.measurement.text)
        lines.append("  gpulayout.yaml for `gpulayout check --launch` (or pytest --gpulayout --gpulayout-launch):")
        lines.extend("    " + ln for ln in plan.measurement.manifest.rstrip("\n").splitlines())
    return "\n".join(lines) + "\n"
