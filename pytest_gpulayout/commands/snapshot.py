"""``gpulayout snapshot [-o FILE] [--json] [--ray [ADDRESS] [--manifest FILE]]``: the live GPUs (or every
node of a Ray cluster) written as a machine snapshot.

The snapshot is what lets every later check run anywhere (CI, a laptop) against this exact host;
it is taken here, on the GPU host, with the environment's ``CUDA_VISIBLE_DEVICES`` applied. With
``--ray`` it is the cluster's (``machine/ray.py``), with a ``nodes:`` section; ``--manifest`` names
the manifest whose model directories each node is asked about.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_gpulayout.errors import InputError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=None,
        help="write the snapshot here (.yaml/.yml or .json) instead of stdout",
    )
    p.add_argument("--json", action="store_true", help="JSON instead of YAML (implied by -o FILE.json)")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="probe every node of a running Ray cluster (default address: $RAY_ADDRESS, else auto)")
    p.add_argument("--manifest", metavar="FILE", default=None,
                   help="with --ray: look up this manifest's model directories on every node")


def run(args: argparse.Namespace) -> int:
    from pytest_gpulayout.machine.probe import probe
    from pytest_gpulayout.machine.snapshot import dump_snapshot

    out = Path(args.output) if args.output else None
    fmt = "json" if args.json or (out is not None and out.suffix.lower() == ".json") else "yaml"
    if args.manifest and args.ray is None:
        raise InputError("--manifest only goes with --ray (it names the models to look up on each node)")
    if args.ray is not None:
        from pytest_gpulayout.engines.registry import ENGINES
        from pytest_gpulayout.machine import ray as ray_source

        model_dirs: tuple[str, ...] = ()
        if args.manifest:
            from pytest_gpulayout.machine.sources import model_dirs_of
            from pytest_gpulayout.manifest.load import load_manifest
            from pytest_gpulayout.runner import load_models

            models = load_models(load_manifest(Path(args.manifest)).deployments)
            model_dirs = model_dirs_of([m.source for m in models.values()])
        spec = f"ray:{args.ray}" if args.ray else "ray"
        from pytest_gpulayout.launch.progress import stderr_reporter

        task = stderr_reporter().task("snapshot --ray")  # stderr; only once it takes longer than 2 s
        outcome = "stopped"
        try:
            machine = ray_source.probe_cluster(ray_source.address_of(spec), model_dirs, engines=ENGINES.values(),
                                               timeout_s=ray_source.timeout_from_env(), progress=task)
            outcome = f"probed {machine.describe()}"
        finally:
            task.done(outcome)
    else:
        machine = probe()  # ProbeError -> exit 3, one line
    text = dump_snapshot(machine, fmt)
    if out is None:
        sys.stdout.write(text)
        return 0
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot write the snapshot: {err.strerror or err}", where=out) from None
    print(f"wrote {out}: {machine.describe()} ({machine.source})", file=sys.stderr)
    for note in machine.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0
