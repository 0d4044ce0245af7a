"""Kubernetes objects that run an engine: Pod, Deployment, StatefulSet, Job, LeaderWorkerSet (any number of
YAML documents); KubeRay's and KServe's objects are read by ``kuberay.py`` and ``kserve.py`` with the same
``Pod`` record. Each container whose command and args run an engine is an invocation named
``Kind/name/container``; the pod around it (GPU limits, ``/dev/shm``, the group it belongs to, host network,
RDMA devices, the GPU product its node selector asks for) is kept for the ``deploy`` check (``deploy.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pytest_gpulayout.artifacts.commands import Invocation, find_in_argv
from pytest_gpulayout.artifacts.reader import Artifact, Read
from pytest_gpulayout.origin import Pod

KINDS = ("Pod", "Deployment", "StatefulSet", "Job", "LeaderWorkerSet")
#: the node label GPU Feature Discovery sets to the GPU's product name (``NVIDIA-H100-80GB-HBM3``)
PRODUCT_LABEL = "nvidia.com/gpu.product"


def is_kubernetes(doc: object) -> bool:
    return isinstance(doc, Mapping) and "apiVersion" in doc and "kind" in doc


def gpus_of(resources: object) -> int | None:
    """``nvidia.com/gpu`` of a resources block (limits first, then requests)."""
    res = resources if isinstance(resources, Mapping) else {}
    for part in ("limits", "requests"):
        value = (res.get(part) or {}).get("nvidia.com/gpu")
        if value is not None:
            try:
                return int(str(value))
            except ValueError:
                return None
    return None


def _rdma(pod: Mapping[str, Any], container: Mapping[str, Any]) -> bool:
    res = container.get("resources") or {}
    for part in ("limits", "requests"):
        for key in (res.get(part) or {}):
            k = str(key).lower()
            if "rdma" in k or "infiniband" in k or "hostdev" in k or k.endswith("/ib") or "/hca" in k:
                return True
    privileged = bool((container.get("securityContext") or {}).get("privileged"))
    return privileged and bool(pod.get("hostNetwork"))


def _shm(pod: Mapping[str, Any], container: Mapping[str, Any]) -> bool:
    volumes = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, Mapping)}
    for m in container.get("volumeMounts") or []:
        if not isinstance(m, Mapping) or str(m.get("mountPath", "")).rstrip("/") != "/dev/shm":
            continue
        v = volumes.get(m.get("name")) or {}
        if (v.get("emptyDir") or {}).get("medium") == "Memory" or "hostPath" in v:
            return True
    return bool(pod.get("hostIPC"))


def _product(pod: Mapping[str, Any]) -> str:
    selector = pod.get("nodeSelector") or {}
    if isinstance(selector, Mapping) and selector.get(PRODUCT_LABEL):
        return str(selector[PRODUCT_LABEL])
    affinity = ((pod.get("affinity") or {}).get("nodeAffinity") or {})
    required = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or []:
        for expr in (term or {}).get("matchExpressions") or []:
            if isinstance(expr, Mapping) and expr.get("key") == PRODUCT_LABEL and expr.get("operator") == "In" \
                    and expr.get("values"):
                return str(expr["values"][0])
    return ""


def env_of(container: Mapping[str, Any]) -> dict[str, str]:
    """The container's literal environment (``valueFrom`` entries are not known here)."""
    return {str(e["name"]): str(e["value"]) for e in container.get("env") or []
            if isinstance(e, Mapping) and "name" in e and "value" in e}


def argv_of(container: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in (container.get("command") or [])] + [str(a) for a in (container.get("args") or [])]


def pod_info(obj: str, field_path: str, pod: Mapping[str, Any], container: Mapping[str, Any],
             **kw: Any) -> Pod:
    """The ``Pod`` record of one container of a pod spec (``kw``: the group it belongs to)."""
    name = str(container.get("name", "?"))
    return Pod(obj, name, field_path, kw.pop("gpus", gpus_of(container.get("resources"))), _shm(pod, container),
               host_network=bool(pod.get("hostNetwork")), dns_policy=str(pod.get("dnsPolicy") or ""),
               rdma=_rdma(pod, container), env=MappingProxyType(env_of(container)), product=_product(pod), **kw)


def containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in pod.get("containers") or [] if isinstance(c, Mapping)]


def _pod_specs(doc: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], dict[str, Any]]]:
    """``(field path, pod spec, group of the Pod record)`` of each pod template of ``doc``."""
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Pod":
        return [("spec", spec, {})]
    if kind in ("Deployment", "StatefulSet", "Job"):
        group: dict[str, Any] = {}
        if kind == "StatefulSet":  # its replicas become one engine when the command line spans nodes
            group = {"group_size": int(spec.get("replicas", 1) or 1), "group_field": "spec.replicas"}
        return [("spec.template.spec", (spec.get("template") or {}).get("spec") or {}, group)]
    if kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate") or {}
        size = int(lwt.get("size", 1) or 1)
        out = []
        for role, key in (("leader", "leaderTemplate"), ("worker", "workerTemplate")):
            t = lwt.get(key)
            if isinstance(t, Mapping):
                out.append((f"spec.leaderWorkerTemplate.{key}.spec", t.get("spec") or {},
                            {"group_size": size, "role": role, "group_field": "spec.leaderWorkerTemplate.size",
                             "group_is_world": True}))
        return out
    return []


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
        for field_path, pod, group in _pod_specs(doc):
            for c in containers(pod):
                role = group.get("role", "")
                source = f"{kind}/{name}/{c.get('name', '?')}" + (f"[{role}]" if role else "")
                info = pod_info(f"{kind}/{name}", field_path, pod, c, **group)
                for inv in find_in_argv(argv_of(c), source, env_of(c), str(c.get("image", ""))):
                    found.append((inv, info))
    return found, seen


@dataclass(frozen=True)
class KubernetesReader:
    kind: str = "Pod, Deployment, StatefulSet, Job, LeaderWorkerSet"

    def read(self, artifact: Artifact) -> Read:
        found, seen = find(artifact.docs or (), artifact.where)
        return Read(tuple(found), (f"Kubernetes objects {', '.join(seen)}",) if seen else ())


READER = KubernetesReader()
