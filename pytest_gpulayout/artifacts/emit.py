"""``gpulayout plan ... --emit cmd|k8s|lws|compose``: the top layout as a ready artifact that ``gpulayout
check`` reads back unchanged. The command line is the engine's own (its entry command and flag spellings);
the Kubernetes objects ask for the layout's GPUs and mount a memory ``/dev/shm``."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from typing import Any

import yaml

from pytest_gpulayout.engines.registry import get_engine
from pytest_gpulayout.errors import InputError

KINDS = ("cmd", "k8s", "lws", "compose")


def argv(engine_name: str, model: str, tp: int, pp: int, dp: int, max_model_len: int | None) -> list[str]:
    """The engine's command line for the layout."""
    engine = get_engine(engine_name)
    flags = engine.cli.flags
    out = [*engine.cli.entry_commands[0], flags.model, model]
    for flag, value in ((flags.tensor_parallel_size, tp), (flags.pipeline_parallel_size, pp),
                        (flags.data_parallel_size, dp)):
        if value > 1 and flag:
            out += [flag, str(value)]
    if max_model_len and flags.max_model_len:
        out += [flags.max_model_len, str(max_model_len)]
    return out


def _image(engine_name: str, version: str | None) -> str:
    images = get_engine(engine_name).cli.entry_images
    if not images:
        return "IMAGE"  # the engine names no image of its own: the user's
    return f"{images[0]}:v{version}" if version else f"{images[0]}:latest"


def _name(model: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", model.rsplit("/", 1)[-1].lower()).strip("-")[:50] or "engine"


def _pod(name: str, image: str, command: Sequence[str], gpus: int) -> dict[str, Any]:
    return {"containers": [{"name": "engine", "image": image, "command": list(command),
                            "resources": {"limits": {"nvidia.com/gpu": gpus}},
                            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}


def emit(kind: str, *, engine: str, model: str, tp: int, pp: int, dp: int, gpus: Sequence[int],
         max_model_len: int | None, version: str | None) -> str:
    """The artifact text of ``kind`` for one layout."""
    command = argv(engine, model, tp, pp, dp, max_model_len)
    name, image, n = _name(model), _image(engine, version), len(gpus)
    visible = ",".join(str(g) for g in gpus)
    if kind == "cmd":
        return f"CUDA_VISIBLE_DEVICES={visible} {shlex.join(command)}\n"
    if kind == "k8s":
        doc: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                                        "template": {"metadata": {"labels": {"app": name}},
                                                     "spec": _pod(name, image, command, n)}}}
    elif kind == "lws":
        doc = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": name},
               "spec": {"replicas": 1, "leaderWorkerTemplate": {
                   "size": 1, "leaderTemplate": {"spec": _pod(name, image, command, n)}}}}
    elif kind == "compose":
        doc = {"services": {name: {"image": image, "entrypoint": list(command), "ipc": "host",
                                   "deploy": {"resources": {"reservations": {"devices": [
                                       {"driver": "nvidia", "device_ids": [str(g) for g in gpus],
                                        "capabilities": ["gpu"]}]}}}}}}
    else:
        raise InputError(f"--emit {kind}: choose one of {', '.join(KINDS)}", key="--emit")
    return yaml.safe_dump(doc, sort_keys=False)
