"""Bundled machines (``preset:<name>``): common GPU boxes as snapshots, for planning before the host exists.

Each preset is a snapshot file in ``presets/`` (same format, same strict reader), so a preset can
be copied, edited and replayed as a file. Numbers are NVML's for real cards; each file says where
its memory figures come from.
"""

from __future__ import annotations

import sys
from importlib import resources
from typing import TYPE_CHECKING

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.suggest import close_matches
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.machine.snapshot import machine_from_dict, parse_snapshot_text

if TYPE_CHECKING:  # importlib.resources.abc is 3.11+; only the annotation needs it
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

_PACKAGE = __name__


def _files() -> dict[str, Traversable]:
    root = resources.files(_PACKAGE)
    return {
        entry.name[: -len(".yaml")]: entry
        for entry in root.iterdir()
        if entry.is_file() and entry.name.endswith(".yaml")
    }


def list_presets() -> list[str]:
    """Names accepted by ``preset:<name>``, sorted."""
    return sorted(_files())


def preset_text(name: str) -> str:
    """The snapshot text of a preset (for ``gpulayout snapshot``-like copies and docs)."""
    files = _files()
    if name not in files:
        raise _unknown(name, sorted(files))
    return str(files[name].read_text(encoding="utf-8"))


def _unknown(name: str, names: list[str]) -> InputError:
    close = [n for n in names if n.lower().startswith(name.lower())]  # "8xH100" -> "8xH100-sxm"
    if len(close) != 1:
        close = close_matches(name, names, cutoff=0.5)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return InputError(f"unknown preset {name!r}{hint}; presets: {', '.join(names)}", where=f"preset:{name}")


def load_preset(name: str) -> Machine:
    """The bundled machine ``name`` with source ``preset:<name>``; unknown names list the presets."""
    text = preset_text(name)
    where = f"preset:{name}"
    return machine_from_dict(parse_snapshot_text(text, where, "yaml"), where=where, source=where)


def preset_cluster(name: str, hosts: int, *, source: str | None = None) -> Machine:
    """``hosts`` copies of the bundled machine ``name``, one host each (``node0``, ``node1``, ...):
    GPU indices run on, links inside a host as the preset has them, the network between hosts. For
    planning and testing clusters larger than any preset."""
    from dataclasses import replace

    one = load_preset(name)
    size = len(one.gpus)
    gpus = tuple(replace(g, index=h * size + g.index, uuid=f"{(g.uuid or '')[:-4]}{h:04x}", host=f"node{h}")
                 for h in range(hosts) for g in one.gpus)
    links = {(h * size + i, h * size + j): k for h in range(hosts) for (i, j), k in one.links.items()}
    return Machine(gpus=gpus, links=links, source=source or f"preset:{name} x{hosts} hosts")
