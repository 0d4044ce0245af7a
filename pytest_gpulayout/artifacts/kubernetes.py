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


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' own substitution in a container's ``command``, ``args`` and ``env`` values, before any shell
    sees them (``third_party/forked/golang/expansion/expand.go``): ``$(NAME)`` is the value of a variable the
    container defines, ``$$`` is ``$``, and a reference to a variable it does not define stays as written."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "$" and i + 1 < n:
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    name = text[i + 2:end]
                    out.append(env[name] if name in env else text[i:end + 1])
                    i = end + 1
                    continue
        out.append(ch)
        i += 1
    return "".join(out)


def env_of(container: Mapping[str, Any], injected: Mapping[str, str] | None = None) -> dict[str, str]:
    """The container's literal environment (``valueFrom`` entries are not known here), each value with the
    variables before it (and ``injected``: what the controller adds, LWS's ``LWS_*``) substituted."""
    env: dict[str, str] = dict(injected or {})
    for e in container.get("env") or []:
        if isinstance(e, Mapping) and "name" in e and "value" in e:
            env[str(e["name"])] = expand(str(e["value"]), env)
    return env


def argv_of(container: Mapping[str, Any], injected: Mapping[str, str] | None = None) -> list[str]:
    """``command`` + ``args`` with Kubernetes' ``$(VAR)`` substitution from the container's env applied."""
    env = env_of(container, injected)
    return [expand(str(a), env) for a in (*(container.get("command") or []), *(container.get("args") or []))]


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
        templates = [("leader", "leaderTemplate"), ("worker", "workerTemplate")]
        if not isinstance(lwt.get("leaderTemplate"), Mapping):
            # "If not specified, the leader pod is created from the workerTemplate" (LWS api/leaderworkerset/v1)
            templates = [("leader", "workerTemplate"), ("worker", "workerTemplate")]
        for role, key in templates:
            t = lwt.get(key)
            if isinstance(t, Mapping):
                out.append((f"spec.leaderWorkerTemplate.{key}.spec", t.get("spec") or {},
                            {"group_size": size, "role": role, "group_field": "spec.leaderWorkerTemplate.size",
                             "group_is_world": True}))
        return out
    return []


def injected(doc: Mapping[str, Any], role: str) -> dict[str, str]:
    """The variables a controller adds to every container of the pods it makes: LeaderWorkerSet's
    (``LWS_LEADER_ADDRESS``, ``LWS_GROUP_SIZE``, ``LWS_WORKER_INDEX``: ``pkg/utils/pod``), for the leader of
    the first group (worker 0), its address the leader pod's DNS name under the LWS's headless service."""
    if doc.get("kind") != "LeaderWorkerSet":
        return {}
    meta = doc.get("metadata") or {}
    name = str(meta.get("name", "lws"))
    lwt = (doc.get("spec") or {}).get("leaderWorkerTemplate") or {}
    namespace = str(meta.get("namespace") or "default")
    return {"LWS_LEADER_ADDRESS": f"{name}-0.{name}.{namespace}", "LWS_GROUP_SIZE": str(lwt.get("size", 1) or 1),
            "LWS_WORKER_INDEX": "0" if role == "leader" else "1"}


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
                extra = injected(doc, role)
                for inv in find_in_argv(argv_of(c, extra), source, env_of(c, extra), str(c.get("image", ""))):
                    found.append((inv, info))
    return found, seen


@dataclass(frozen=True)
class KubernetesReader:
    kind: str = "Pod, Deployment, StatefulSet, Job, LeaderWorkerSet"

    def read(self, artifact: Artifact) -> Read:
        found, seen = find(artifact.docs or (), artifact.where)
        return Read(tuple(found), (f"Kubernetes objects {', '.join(seen)}",) if seen else ())


READER = KubernetesReader()
