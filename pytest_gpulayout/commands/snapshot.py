"""``gpulayout snapshot [-o FILE] [--json]``: the live GPUs through NVML, written as a machine snapshot.

The snapshot is what lets every later check run anywhere (CI, a laptop) against this exact host;
it is taken here, on the GPU host, with the environment's ``CUDA_VISIBLE_DEVICES`` applied.
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


def run(args: argparse.Namespace) -> int:
    from pytest_gpulayout.machine.probe import probe
    from pytest_gpulayout.machine.snapshot import dump_snapshot

    out = Path(args.output) if args.output else None
    fmt = "json" if args.json or (out is not None and out.suffix.lower() == ".json") else "yaml"
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
