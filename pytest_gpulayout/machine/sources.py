"""One entry point for every way to name a machine: ``auto``, ``preset:<name>``, a snapshot, topo text.

``--machine`` / ``--gpulayout-machine`` / the manifest's ``machine:`` all go through
``load_machine``, so the same spelling means the same machine everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.host import HostEngine
from pytest_gpulayout.inputs.files import LOOP_MESSAGE, read_text, symlink_loop
from pytest_gpulayout.machine import probe as nvml_probe
from pytest_gpulayout.machine import ray as ray_source
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.machine.nodes import model_dir_key
from pytest_gpulayout.machine.presets import load_preset
from pytest_gpulayout.machine.snapshot import SNAPSHOT_SUFFIXES, machine_from_dict, parse_snapshot_text
from pytest_gpulayout.machine.topo_text import has_topo_matrix, parse_topo

AUTO = "auto"
PRESET_PREFIX = "preset:"


def load_machine(spec: str, base_dir: Path | None = None, model_dirs: Sequence[str] = (),
                 engines: Iterable[HostEngine] = ()) -> Machine:
    """The machine ``spec`` names.

    * ``auto``: the live GPUs through NVML (``ProbeError`` if they cannot be seen);
    * ``ray``, ``ray:ADDRESS``, ``ray://HOST:PORT``: every node of a running Ray cluster
      (``machine/ray.py``); ``model_dirs`` are the manifest's model directories, looked up on each node,
      and each node reports the installed versions of ``engines`` (the edge passes the registry's);
    * ``preset:<name>``: a bundled machine (unknown names list the presets, with a did-you-mean);
    * a path, relative to ``base_dir`` (default: the working directory): ``.yaml``/``.yml``/``.json``
      is a snapshot, anything else ``nvidia-smi topo -m`` text. A YAML file without ``gpus`` whose
      text holds a topo matrix (a pasted report saved as .yaml) is read as topo text.
    """
    spec = spec.strip()
    if not spec:
        raise InputError("empty machine: give auto, ray[:ADDRESS], preset:<name>, a snapshot file or topo text file")
    if spec == AUTO:
        return nvml_probe.probe()  # looked up when called: the tests route it to a fake NVML
    if ray_source.is_ray_spec(spec):
        return ray_source.probe_cluster(ray_source.address_of(spec), model_dirs, engines=engines,
                                        timeout_s=ray_source.timeout_from_env())
    if spec.startswith(PRESET_PREFIX):
        return load_preset(spec[len(PRESET_PREFIX) :].strip())
    path = Path(spec).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    if not path.exists():
        if symlink_loop(path):
            raise InputError(LOOP_MESSAGE + ", so the machine file cannot be read", where=path)
        hint = ""
        if (
            ":" in spec
            and not spec.startswith(PRESET_PREFIX)
            and spec.split(":", 1)[0].lower().startswith("pre")
        ):
            hint = " (presets are written preset:<name>)"
        raise InputError(
            f"machine file not found{hint}; give auto, preset:<name>, a snapshot or topo text file",
            where=path,
        )
    text = read_text(path)
    suffix = path.suffix.lower()
    if suffix in SNAPSHOT_SUFFIXES:
        fmt = "json" if suffix == ".json" else "yaml"
        try:
            data = parse_snapshot_text(text, str(path), fmt)
        except InputError:
            if fmt == "yaml" and has_topo_matrix(text):
                return parse_topo(text, where=str(path))
            raise
        if isinstance(data, dict) and "gpus" not in data and has_topo_matrix(text):
            return parse_topo(text, where=str(path))
        if isinstance(data, str) and has_topo_matrix(text):
            return parse_topo(text, where=str(path))
        return machine_from_dict(data, where=str(path), source=f"snapshot:{path}")
    return parse_topo(text, where=str(path))


def model_dirs_of(sources: Sequence[str]) -> tuple[str, ...]:
    """The model directories to look up on each node, from the loaded specs' ``source``: a local
    ``config.json`` names its directory; catalog models (``catalog:...``) have none."""
    return tuple(dict.fromkeys(k for k in map(model_dir_key, sources) if k))
