"""``gpulayout check [MANIFEST] [--machine M] [--json] [--launch]``: the pytest suite's verdicts, outside pytest."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_gpulayout.engines.registry import ENGINES
from pytest_gpulayout.findings import Status
from pytest_gpulayout.host import Host
from pytest_gpulayout.inputs.files import log_folder, writable_path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("manifest", nargs="?", default=None, help="gpulayout.yaml (default: ./gpulayout.yaml)")
    p.add_argument("--machine", metavar="M", default=None,
                   help="auto | ray[:ADDRESS] | snapshot .yaml/.json | topo -m text | preset:<name> "
                        "(default: the manifest's)")
    p.add_argument("--json", action="store_true", help="print one JSON object (keys: README.md, The CLI)")
    p.add_argument("--launch", action="store_true", help="also run the startup check (launches the engines)")
    p.add_argument("--strict", action="store_true", help="warnings make the exit code 1")
    p.add_argument("--html", metavar="FILE", default=None, help="write a self-contained HTML report")
    p.add_argument("--log-dir", metavar="DIR", default=None,
                   help="where startup logs go (every launch: --launch's and launch.enabled's; default: a temporary "
                        "folder that keeps only the logs of launches that did not pass)")
    p.add_argument("--cmd", metavar="LINE", default=None,
                   help="check an engine command line ('vllm serve MODEL --tensor-parallel-size 2 ...'; "
                        "needs --machine); MANIFEST may also be a Kubernetes YAML or a shell script")


def run(args: argparse.Namespace) -> int:
    from pytest_gpulayout.machine.sources import load_machine, model_dirs_of
    from pytest_gpulayout.manifest.load import find_manifest, load_manifest
    from pytest_gpulayout.model.spec import ModelSpec
    from pytest_gpulayout.report.text import summary_table
    from pytest_gpulayout.runner import find_models, finish_run_log_dir, run_checks

    if args.html:
        writable_path(args.html, "--html")
    from pytest_gpulayout.artifacts import load as artifacts

    found = None  # deployments read from an artifact (issue 22), not from a gpulayout.yaml
    if args.cmd is not None:
        found = artifacts.load_command(args.cmd, args.machine)
        manifest = artifacts.as_manifest(found, args.machine, Path.cwd() / "cmd")
    elif args.manifest and Path(args.manifest).is_file() and not artifacts.is_manifest(Path(args.manifest)):
        found = artifacts.load_artifact(Path(args.manifest), args.machine)
        manifest = artifacts.as_manifest(found, args.machine, Path(args.manifest).resolve())
    else:
        path = find_manifest(args.manifest, None, Path.cwd(), flag="MANIFEST")
        manifest = load_manifest(path)
    models = find_models(manifest.deployments)  # a model that cannot be read fails its deployment's config
    model_dirs = model_dirs_of([m.source for m in models.values() if isinstance(m, ModelSpec)])  # on each node
    if args.machine:
        machine = load_machine(args.machine, Path.cwd(), model_dirs, ENGINES.values())
    else:
        machine = load_machine(manifest.machine, manifest.base_dir, model_dirs, ENGINES.values())
    # --log-dir is for every launch: --launch's and those launch.enabled starts; made only when one will run
    launches = args.launch or any(d.launch.enabled for d in manifest.deployments)
    log_dir = log_folder(args.log_dir, "--log-dir") if args.log_dir and launches else None
    from pytest_gpulayout.launch.progress import stderr_reporter

    # each launch's phase on stderr (a live line on a terminal): stdout stays the verdicts / the JSON
    try:
        report = run_checks(manifest.deployments, machine, models, launch=args.launch, log_dir=log_dir,
                            host=Host.read(ENGINES.values()), progress=stderr_reporter().for_launch)
    finally:
        kept = finish_run_log_dir()  # the temporary folder without --log-dir: gone unless a launch did not pass
        if kept is not None:
            print(f"gpulayout: logs of the launches that did not pass are in {kept} (--log-dir DIR keeps "
                  f"every launch's log)", file=sys.stderr)

    if args.html:
        from pytest_gpulayout.report.html import write_html

        write_html(report, Path(args.html))
    if args.json:
        for note in manifest.notes:  # stderr: the JSON on stdout stays what a pipeline parses
            print(f"gpulayout: note: {note}", file=sys.stderr)
        json.dump(report.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        out = sys.stdout
        out.write(f"machine: {machine.headline()}\n")
        if not machine.memory_known:
            out.write("memory: unknown from this source: balance and kv_pool cannot be checked (warn)\n")
        for note in (*manifest.notes, *machine.notes):
            out.write(f"note: {note}\n")
        for name, result in report.results.items():
            out.write(f"\n{name}  [{result.status.value.upper()}]  {result.deployment.engine} "
                      f"{result.deployment.layout}  {result.model_name}\n")
            for f in result.findings.values():
                out.write(f"  {f.status.value:<4}  {f.check:<9}  {f.message}\n")
        out.write("\n" + "\n".join(summary_table({n: r.findings for n, r in report.results.items()},
                                                report.checks)) + "\n")
    status = report.status
    if status is Status.FAIL or (args.strict and status is Status.WARN):
        return 1
    return 0
