"""``gpulayout measure [MANIFEST] [--deployments a,b] [--json] [--html FILE]``: launch each deployment,
drive a real load against it (``vllm bench serve``), stop it, and say which layout to choose.

The work is ``pytest_gpulayout/measure/``; this verb reads the manifest, prints the table (or the
JSON of README.md's "gpulayout measure"), and returns 0 (pass), 1 (a deployment could not be
measured) or 2 (bad input: one line naming the file and key).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from pytest_gpulayout.errors import GpuLayoutError, InputError
from pytest_gpulayout.host import Host
from pytest_gpulayout.inputs.files import writable_path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("manifest", nargs="?", default=None, help="gpulayout.yaml (default: ./gpulayout.yaml)")
    p.add_argument("--deployments", metavar="A,B", default=None, help="measure only these (comma-separated)")
    p.add_argument("--json", action="store_true", help="print one JSON object (keys: README.md, gpulayout measure)")
    p.add_argument("--html", metavar="FILE", default=None, help="write a self-contained HTML page")
    p.add_argument("--log-dir", metavar="DIR", default=None,
                   help="where engine logs and the load generator's results go (default: a temporary directory)")


def run(args: argparse.Namespace) -> int:
    from pytest_gpulayout.engines.registry import ENGINES
    from pytest_gpulayout.fixtures import predicted_pools
    from pytest_gpulayout.launch.progress import stderr_reporter
    from pytest_gpulayout.machine.sources import load_machine
    from pytest_gpulayout.manifest.load import find_manifest, load_manifest
    from pytest_gpulayout.measure.run import measure
    from pytest_gpulayout.measure.text import lines_under, table
    from pytest_gpulayout.workload import MeasureSpec

    if args.html:
        writable_path(args.html, "--html")
    path = find_manifest(args.manifest, None, Path.cwd(), flag="MANIFEST")
    manifest = load_manifest(path)
    deps = list(manifest.deployments)
    if args.deployments:
        names = [n.strip() for n in args.deployments.split(",") if n.strip()]
        if not names:
            raise InputError("--deployments: give deployment names, comma-separated")
        deps = [manifest.deployment(n) for n in names]
    deps = [d if d.measure is not None else replace(d, measure=MeasureSpec()) for d in deps]
    log_dir = Path(args.log_dir) if args.log_dir else Path(tempfile.mkdtemp(prefix="gpulayout-measure-"))
    reporter = stderr_reporter()
    host = Host.read(ENGINES.values())
    try:  # the machine the manifest names, for kv_pool's prediction that preemptions are read against
        machine = load_machine(manifest.machine, manifest.base_dir, (), ENGINES.values())
    except GpuLayoutError:
        machine = None
    result = measure(deps, work_dir=log_dir, host=host, progress=reporter.for_launch,
                     on_window=lambda line: print(f"gpulayout: {line}", file=sys.stderr),
                     predicted=predicted_pools(deps, machine, host))
    data = result.to_json()
    data["log_dir"] = str(log_dir)
    if args.html:
        from pytest_gpulayout.measure.html import write_html

        write_html(data, Path(args.html))
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        out = sys.stdout
        out.write("\n".join(table(data)) + "\n\n")
        out.write("\n".join(lines_under(data)) + "\n")
        out.write(f"logs and load-generator results: {log_dir}\n")
    return 1 if result.status == "fail" else 0
