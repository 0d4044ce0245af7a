"""``gpulayout check FILE`` / ``--cmd LINE`` for what is not a ``gpulayout.yaml``: read the artifact, build
its deployments, and say in one line what was recognised when nothing runs an engine."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pytest_gpulayout.artifacts import commands, kubernetes
from pytest_gpulayout.artifacts.build import Found, build
from pytest_gpulayout.artifacts.reader import Artifact, read_all
from pytest_gpulayout.artifacts.registry import READERS
from pytest_gpulayout.artifacts.registry import kinds as kinds_read
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import read_bytes, read_text
from pytest_gpulayout.inputs.yaml import check_shape
from pytest_gpulayout.machine.presets import list_presets, load_preset
from pytest_gpulayout.manifest.load import Manifest, stale_version_notes

#: the manifest's own top-level keys: a YAML mapping with any of them is a manifest
_MANIFEST_KEYS = ("deployments", "version", "defaults")


def is_manifest(path: Path) -> bool:
    """Whether ``path`` is a ``gpulayout.yaml`` (else it is read as an artifact)."""
    if path.suffix not in (".yaml", ".yml"):
        return False
    try:
        text = read_text(path)
        check_shape(text, str(path))  # too deep, recursive, a billion laughs: before it is composed
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except (yaml.YAMLError, InputError):
        return True  # the manifest reader says what is wrong with it
    if len(docs) != 1 or not isinstance(docs[0], dict):
        return False
    return any(k in docs[0] for k in _MANIFEST_KEYS) and not kubernetes.is_kubernetes(docs[0])


def _label_name(gpu_name: str) -> str:
    return gpu_name.replace(" ", "-").lower()


def preset_for_product(product: str, gpus: int) -> str | None:
    """The smallest bundled preset of the GPU a ``nvidia.com/gpu.product`` label names (GPU Feature
    Discovery writes the NVML name with ``-`` for spaces, ``-SHARED`` / ``-MIG-...`` appended) with at
    least ``gpus`` GPUs, or None."""
    label = product.lower().removesuffix("-shared").split("-mig-")[0]
    best: tuple[int, str] | None = None
    for name in list_presets():
        m = load_preset(name)
        if m.gpus and _label_name(m.gpus[0].name) == label and len(m.gpus) >= gpus:
            if best is None or len(m.gpus) < best[0]:
                best = (len(m.gpus), name)
    return f"preset:{best[1]}" if best else None


def _need_machine(machine: str | None, where: str, found: list[tuple[commands.Invocation, Any]] | None = None) -> str:
    """``--machine``, else the preset the node selector's GPU product names (one line when neither)."""
    if machine:
        return machine
    for _inv, pod in found or []:
        product = getattr(pod, "product", "")
        if product:
            preset = preset_for_product(product, getattr(pod, "gpus", None) or 1)
            if preset is None:
                raise InputError(f"{pod.obj}: {pod.field}.nodeSelector {kubernetes.PRODUCT_LABEL}={product} matches "
                                 f"no bundled preset ({', '.join(list_presets())}): give --machine", where=where)
            return preset
    raise InputError("an artifact names no machine (no --machine, no nvidia.com/gpu.product node selector): give "
                     "--machine (a snapshot, topo -m text, preset:<name> or auto)", where=where)


@dataclass(frozen=True)
class Loaded:
    """What an artifact runs: its deployments, and what was found but is not judged (one note each)."""

    found: tuple[Found, ...]
    notes: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[Found]:
        return iter(self.found)

    def __len__(self) -> int:
        return len(self.found)


def _built(invs: list[tuple[commands.Invocation, Any]], machine: str, path: Path, where: str) -> Loaded:
    found, notes = build(invs, machine=machine, path=path)
    if not found:  # every engine it runs is one whose lines are not read yet: no verdict would be a silent pass
        raise InputError(notes[0].split(": ", 1)[1] if notes else "runs no engine this tool reads", where=where)
    return Loaded(tuple(found), notes)


def load_command(line: str, machine: str | None) -> Loaded:
    invs = commands.find_in_text(line, "--cmd")
    if not invs:
        raise InputError("runs no engine this tool reads (vllm serve, python -m vllm.entrypoints.openai.api_server, "
                         "python -m sglang.launch_server, trtllm-serve, llama-server)", where="--cmd")
    return _built([(i, None) for i in invs], _need_machine(machine, "--cmd"), Path.cwd() / "cmd", "--cmd")


def load_artifact(path: Path, machine: str | None) -> Loaded:
    """The deployments ``path`` runs, read by every reader of the registry (``artifacts/registry.py``)."""
    where = str(path)
    try:
        text = read_bytes(path).decode("utf-8")  # a FIFO or a device: refused before it is opened
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text: neither a manifest nor an artifact", where=where) from None
    docs: tuple[object, ...] | None = None
    if path.suffix in (".yaml", ".yml", ".json"):
        check_shape(text, where)
        try:
            docs = tuple(yaml.safe_load_all(text))
        except yaml.YAMLError as err:
            raise InputError(f"not valid YAML: {str(err).splitlines()[0]}", where=where) from None
    read = read_all(READERS, Artifact(path, where, text, docs))
    if not read.found:
        if docs is None:
            what = "text"
        elif read.seen:
            what = "; ".join(read.seen)
        else:
            kinds = sorted({str(d.get("kind")) for d in docs if isinstance(d, dict) and "kind" in d})
            what = (f"kinds {', '.join(kinds)}" if kinds else "a YAML file that is neither a gpulayout manifest "
                    "(no 'deployments'), a Kubernetes object (no apiVersion/kind), docker-compose services nor "
                    "production-stack values")
        raise InputError(f"found no engine command line in {what} (read: {kinds_read()})", where=where)
    found = list(read.found)
    return _built(found, _need_machine(machine, where, found), path.resolve(), where)


def as_manifest(loaded: Loaded, machine: str | None, path: Path) -> Any:
    """The ``Manifest`` the check verb runs, from what was found (its machine: ``machine``, else the one the
    artifact's node selector named); its notes: what was found but is not judged, and a release newer than
    the rules know."""
    found = loaded.found
    machine = machine or (found[0].machine if found else "")
    deployments = tuple(f.deployment for f in found)
    return Manifest(path=path, machine=machine, base_dir=path.parent, deployments=deployments,
                    notes=(*loaded.notes, *stale_version_notes(deployments)))
