"""``gpulayout topo [--machine M] [--json]``: the link matrix of any machine, like ``nvidia-smi topo -m``.

Useful to see what gpulayout understood from a snapshot, preset or pasted topo text before trusting
its verdicts: the matrix, the source, the GPU models and whether memory is known.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--machine",
        metavar="M",
        default="auto",
        help="auto (live NVML, default) | snapshot .yaml/.json | topo -m text file | preset:<name>",
    )
    p.add_argument(
        "--json", action="store_true", help="print the machine as snapshot-shaped JSON (gpus, links)"
    )


def run(args: argparse.Namespace) -> int:
    from pytest_gpulayout.engines.registry import ENGINES
    from pytest_gpulayout.machine.snapshot import machine_to_dict
    from pytest_gpulayout.machine.sources import load_machine
    from pytest_gpulayout.machine.topo_text import render_topo

    machine = load_machine(args.machine, Path.cwd(), engines=ENGINES.values())
    out = sys.stdout
    if args.json:
        json.dump(machine_to_dict(machine), out, indent=2)
        out.write("\n")
        return 0
    out.write(render_topo(machine))
    out.write("\n")
    head = f"machine: {machine.headline()}"
    out.write(head + "\n")
    if not machine.memory_known:
        if machine.source.startswith("topo:"):
            out.write("memory: unknown (topo text has none)\n")
        else:
            unknown = [
                g.label for g in machine.gpus if g.memory_total_mib is None or g.memory_free_mib is None
            ]
            out.write(f"memory: unknown for {', '.join(unknown)}\n")
    else:
        for g in machine.gpus:
            line = (
                f"{g.label}: {g.name or 'unknown GPU'}, {g.memory_free_mib} of {g.memory_total_mib} MiB free"
            )
            if g.mig:
                line += ", MIG"
            if g.processes:
                line += f", {len(g.processes)} other process(es)"
            out.write(line + "\n")
    for note in machine.notes:
        out.write(f"note: {note}\n")
    return 0
