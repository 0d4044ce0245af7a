"""Kubernetes objects that run an engine: Pod, Deployment, StatefulSet, Job, LeaderWorkerSet (any number of
YAML documents). Each container whose command and args run an engine is an invocation named
``Kind/name/container``; the pod around it (GPU limits, ``/dev/shm``, LWS group size) is kept for the
``deploy`` check (``deploy.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gpulayout.artifacts.commands import Invocation, find_in_argv

KINDS = ("Pod", "Deployment", "StatefulSet", "Job", "LeaderWorkerSet")


@dataclass(frozen=True)
class Pod:
    """What the ``deploy`` check reads of the pod that runs an engine."""

    obj: str                       # Kind/name
    container: str
    field: str                     # the dotted path of the pod template (``spec.template.spec``)
    gpus: int | None               # resources.limits nvidia.com/gpu (None: not requested)
    shm: bool                      # /dev/shm is a memory emptyDir or a host path
    group_size: int = 1            # LeaderWorkerSet size (pods per group)
    role: str = ""                 # leader | worker (LWS)


def is_kubernetes(doc: object) -> bool:
    return isinstance(doc, Mapping) and "apiVersion" in doc and "kind" in doc


def _pod_specs(doc: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], int, str]]:
    """``(field path, pod spec, group size, role)`` of each pod template of ``doc``."""
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Pod":
        return [("spec", spec, 1, "")]
    if kind in ("Deployment", "StatefulSet", "Job"):
        return [("spec.template.spec", (spec.get("template") or {}).get("spec") or {}, 1, "")]
    if kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate") or {}
        size = int(lwt.get("size", 1) or 1)
        out = []
        for role, key in (("leader", "leaderTemplate"), ("worker", "workerTemplate")):
            t = lwt.get(key)
            if isinstance(t, Mapping):
                out.append((f"spec.leaderWorkerTemplate.{key}.spec", t.get("spec") or {}, size, role))
        return out
    return []


def _gpus(container: Mapping[str, Any]) -> int | None:
    res = container.get("resources") or {}
    for part in ("limits", "requests"):
        value = (res.get(part) or {}).get("nvidia.com/gpu")
        if value is not None:
            try:
                return int(str(value))
            except ValueError:
                return None
    return None


def _shm(pod: Mapping[str, Any], container: Mapping[str, Any]) -> bool:
    volumes = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, Mapping)}
    for m in container.get("volumeMounts") or []:
        if not isinstance(m, Mapping) or str(m.get("mountPath", "")).rstrip("/") != "/dev/shm":
            continue
        v = volumes.get(m.get("name")) or {}
        if (v.get("emptyDir") or {}).get("medium") == "Memory" or "hostPath" in v:
            return True
    return bool(pod.get("hostIPC"))


def _argv(container: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in (container.get("command") or [])] + [str(a) for a in (container.get("args") or [])]


def find(docs: Sequence[object], where: str) -> tuple[list[tuple[Invocation, Pod]], list[str]]:
    """The engine invocations of every object in ``docs``, and what each document was (for messages)."""
    found: list[tuple[Invocation, Pod]] = []
    seen: list[str] = []
    for doc in docs:
        if not is_kubernetes(doc):
            continue
        assert isinstance(doc, Mapping)
        kind = str(doc.get("kind"))
        name = str((doc.get("metadata") or {}).get("name", "?"))
        seen.append(f"{kind}/{name}")
        for field, pod, size, role in _pod_specs(doc):
            for c in pod.get("containers") or []:
                if not isinstance(c, Mapping):
                    continue
                env = {str(e["name"]): str(e["value"]) for e in c.get("env") or []
                       if isinstance(e, Mapping) and "name" in e and "value" in e}
                source = f"{kind}/{name}/{c.get('name', '?')}" + (f"[{role}]" if role else "")
                info = Pod(f"{kind}/{name}", str(c.get("name", "?")), field, _gpus(c), _shm(pod, c), size, role)
                for inv in find_in_argv(_argv(c), source, env):
                    found.append((inv, info))
    return found, seen
