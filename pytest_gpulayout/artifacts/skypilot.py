"""SkyPilot task YAML (``sky launch`` / ``sky serve up``): the ``run:`` script, with the task's ``envs`` and the
variables SkyPilot gives it, on ``num_nodes`` nodes of ``resources.accelerators`` GPUs each.

What SkyPilot sets for ``run`` (``sky/skylet/constants.py``, the task YAML reference): ``SKYPILOT_NUM_GPUS_PER_NODE``
(the accelerator count), ``SKYPILOT_NUM_NODES``, ``SKYPILOT_NODE_RANK`` (the head, 0, is the node whose engine
line is read; ``SKYPILOT_NODE_IPS`` is not known here and stays unknown). ``accelerators`` is ``H100:8``, ``{H100:
8}``, a list or set of alternatives (``{H200:8, H100:8}``) or ``any_of`` / ``ordered`` candidates: the first
candidate's count is the node's. ``image_id: docker:IMAGE`` is the image the engine runs in (its tag names the
release). The nodes are one engine where its world does not fit on one (vLLM over Ray, SGLang's ``--nnodes``);
SkyPilot's Kubernetes pods mount a memory ``/dev/shm``, its VMs have the host's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from pytest_gpulayout.artifacts.commands import Invocation, find_in_text
from pytest_gpulayout.artifacts.reader import Artifact, Read, beside
from pytest_gpulayout.origin import Pod

_KEYS = ("resources", "num_nodes", "setup", "envs", "file_mounts", "workdir", "service", "secrets")


def is_task(doc: object) -> bool:
    """A SkyPilot task: a ``run`` script with one of the task's other keys, and no Kubernetes ``kind``."""
    return (isinstance(doc, Mapping) and isinstance(doc.get("run"), str) and "kind" not in doc
            and "services" not in doc and any(k in doc for k in _KEYS))


def _count(spec: object) -> int | None:
    """GPUs of one accelerator spec (``H100:8``, ``{H100: 8}``, ``["H100:8", ...]``); None: none asked."""
    if isinstance(spec, str):
        name, _, count = spec.partition(":")
        try:
            return int(float(count)) if count else 1
        except ValueError:
            return None
    if isinstance(spec, Mapping):
        for key, value in spec.items():
            if value is None:  # {H200:8, H100:8}: YAML reads each as a key without a value
                return _count(str(key))
            try:
                return int(float(value))
            except (TypeError, ValueError):
                return None
        return None
    if isinstance(spec, (list, tuple, set)):
        for item in spec:
            return _count(item)
    return None


def _gpus(resources: object) -> int | None:
    if not isinstance(resources, Mapping):
        return None
    if resources.get("accelerators") is not None:
        return _count(resources["accelerators"])
    for key in ("any_of", "ordered"):
        for candidate in resources.get(key) or []:
            if isinstance(candidate, Mapping) and candidate.get("accelerators") is not None:
                return _count(candidate["accelerators"])
    return None


def _rdma(resources: object) -> bool:
    """``network_tier: best``: SkyPilot sets up the cloud's InfiniBand / RDMA network between the nodes."""
    return isinstance(resources, Mapping) and str(resources.get("network_tier", "")).lower() == "best"


def _image(resources: object) -> str:
    image = str(resources.get("image_id") or "") if isinstance(resources, Mapping) else ""
    return image.removeprefix("docker:") if image.startswith("docker:") else ""


def find(doc: Mapping[str, Any], artifact: Artifact, n: int) -> list[tuple[Invocation, Pod]]:
    name = str(doc.get("name") or artifact.path.stem)
    resources = doc.get("resources") or {}
    gpus = _gpus(resources)
    nodes = int(doc.get("num_nodes") or 1)
    envs = {str(k): str(v) for k, v in (doc.get("envs") or {}).items() if v is not None}
    env = {**envs, "SKYPILOT_NUM_NODES": str(nodes), "SKYPILOT_NODE_RANK": "0"}
    if gpus is not None:
        env["SKYPILOT_NUM_GPUS_PER_NODE"] = str(gpus)
    where = f"{artifact.path.name}/run" if n == 1 else f"{artifact.path.name}[{name}]/run"
    pod = Pod(f"task/{name}", "run", "resources", gpus, True, group_size=nodes, group_field="num_nodes" if nodes > 1
              else "", group_is_world=nodes > 1, gpus_field="resources.accelerators", shm_by="SkyPilot", unit="node",
              env=MappingProxyType(envs), rdma=_rdma(resources))
    image = _image(resources)
    out: list[tuple[Invocation, Pod]] = []
    for inv in find_in_text(str(doc["run"]), where, env, files=beside(artifact.path.parent)):
        out.append((replace(inv, image=inv.image or image), pod))
    return out


@dataclass(frozen=True)
class SkyPilotReader:
    kind: str = "SkyPilot task (run, resources.accelerators, num_nodes)"

    def read(self, artifact: Artifact) -> Read:
        tasks = [d for d in artifact.mappings() if is_task(d)]
        found = [f for d in tasks for f in find(d, artifact, len(tasks))]
        return Read(tuple(found), ("SkyPilot task",) if tasks else ())


READER = SkyPilotReader()
