"""KubeRay's RayCluster, RayService and RayJob, and AIBrix's RayClusterFleet (replicas of one RayCluster template,
``spec.template.spec``): one Ray cluster (head group + worker groups) that runs the engine. The engine's command
is in a container, a RayJob's ``entrypoint``, or a RayService's ``serveConfigV2``: an application whose
``runtime_env`` sets KubeRay's vLLM sample's variables (``MODEL_ID``, ``TENSOR_PARALLELISM``,
``PIPELINE_PARALLELISM``: ``ray-operator/config/samples/vllm/serve.py`` turns them into vLLM's flags), or Ray
Serve LLM's ``llm_configs`` (``rayserve.py``: ``engine_kwargs`` are vLLM's dataclass fields, not flags). The
world then spans the cluster's GPUs: the ``Pod`` record carries the cluster's GPU total (``group_gpus``), and
KubeRay mounts ``/dev/shm`` on every Ray pod itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from pytest_gpulayout.artifacts import rayserve
from pytest_gpulayout.artifacts.commands import Invocation, find_in_argv, find_in_text
from pytest_gpulayout.artifacts.kubernetes import argv_of, containers, env_of, gpus_of, is_kubernetes, pod_info
from pytest_gpulayout.artifacts.reader import Artifact, Read
from pytest_gpulayout.inputs.yaml import check_shape
from pytest_gpulayout.origin import Pod

KINDS = ("RayCluster", "RayService", "RayJob", "RayClusterFleet")
#: the operator that adds a memory-backed /dev/shm to every Ray pod (``ray-operator`` pod builder)
SHM_BY = "KubeRay"
#: the engine module Ray Serve's vLLM applications build (Ray Serve LLM and KubeRay's sample both hand their
#: settings to vLLM's own argument parser / AsyncEngineArgs)
_SERVE_MODULE = "vllm.entrypoints.openai.api_server"
_SAMPLE_VARS = (("MODEL_ID", "--model"), ("TENSOR_PARALLELISM", "--tensor-parallel-size"),
                ("PIPELINE_PARALLELISM", "--pipeline-parallel-size"))


def _cluster_spec(doc: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    spec = doc.get("spec") or {}
    if doc.get("kind") == "RayCluster":
        return "spec", spec
    if doc.get("kind") == "RayClusterFleet":  # AIBrix: a fleet of RayClusters of one template
        return "spec.template.spec", (spec.get("template") or {}).get("spec") or {}
    return "spec.rayClusterConfig", spec.get("rayClusterConfig") or {}


def _groups(prefix: str, cluster: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], int]]:
    """``(field path of the pod spec, pod spec, pods)`` of the head group and each worker group."""
    head = cluster.get("headGroupSpec") or {}
    out = [(f"{prefix}.headGroupSpec.template.spec", (head.get("template") or {}).get("spec") or {}, 1)]
    for i, g in enumerate(cluster.get("workerGroupSpecs") or []):
        if not isinstance(g, Mapping):
            continue
        n = int(g.get("replicas", g.get("minReplicas", 1)) or 0) * int(g.get("numOfHosts", 1) or 1)
        name = g.get("groupName", i)
        out.append((f"{prefix}.workerGroupSpecs[{name}].template.spec",
                    (g.get("template") or {}).get("spec") or {}, n))
    return out


def _gpus(pod: Mapping[str, Any]) -> int:
    return sum(gpus_of(c.get("resources")) or 0 for c in containers(pod))


def _serve_invocations(text: str, source: str) -> list[Invocation]:
    check_shape(text, source)  # an embedded document too deep, recursive or expanding past reason
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    out: list[Invocation] = []
    for app in (config or {}).get("applications") or [] if isinstance(config, Mapping) else []:
        if not isinstance(app, Mapping):
            continue
        name = app.get("name", "app")
        env = {str(k): str(v) for k, v in (((app.get("runtime_env") or {}).get("env_vars")) or {}).items()}
        argv: list[str] = []
        if "MODEL_ID" in env:  # KubeRay's vLLM sample (serve.py's build_app)
            for var, flag in _SAMPLE_VARS:
                if var in env:
                    argv += [flag, env.pop(var)]
        if argv:
            out.extend(find_in_argv(["python3", "-m", _SERVE_MODULE, *argv],
                                    f"{source}/serveConfigV2/applications[{name}]", env))
    if isinstance(config, Mapping):  # Ray Serve LLM: its engine_kwargs are vLLM's fields (rayserve.py)
        out.extend(rayserve.find(config, f"{source}/serveConfigV2", None))
    return out


def find(doc: Mapping[str, Any]) -> list[tuple[Invocation, Pod]]:
    """The engine invocations of one KubeRay object, each with the cluster it runs on."""
    kind = str(doc.get("kind"))
    name = str((doc.get("metadata") or {}).get("name", "?"))
    obj = f"{kind}/{name}"
    prefix, cluster = _cluster_spec(doc)
    groups = _groups(prefix, cluster)
    total = sum(_gpus(pod) * n for _, pod, n in groups)
    pods = sum(n for _, _, n in groups)
    each = tuple(g for _, pod, n in groups for g in [_gpus(pod)] * n)  # every pod's GPUs, the head's first
    workers = [g for g in groups[1:] if g[2] and _gpus(g[1])] or groups[:1]
    field_path, gpu_pod, _ = max(workers, key=lambda g: _gpus(g[1]))
    gpu_container = next((c for c in containers(gpu_pod) if c.get("resources")), {"name": "?"})
    group_field = f"{prefix}.workerGroupSpecs[*].replicas" if len(groups) > 1 else f"{prefix}.headGroupSpec"

    def record(pod_field: str, pod: Mapping[str, Any], c: Mapping[str, Any]) -> Pod:
        return pod_info(obj, pod_field, pod, c, group_size=max(pods, 1), group_field=group_field,
                        group_gpus=total, shm_by=SHM_BY, group_is_world=True, pod_gpus=each)

    out: list[tuple[Invocation, Pod]] = []
    for pod_field, pod, _ in groups:
        for c in containers(pod):
            source = f"{obj}/{c.get('name', '?')}"
            for inv in find_in_argv(argv_of(c), source, env_of(c), str(c.get("image", ""))):
                out.append((inv, record(pod_field, pod, c)))
    spec = doc.get("spec") or {}
    cluster_record = record(field_path, gpu_pod, gpu_container)
    if kind == "RayJob" and spec.get("entrypoint"):
        for inv in find_in_text(str(spec["entrypoint"]), f"{obj}/entrypoint"):
            out.append((inv, cluster_record))
    if kind == "RayService" and spec.get("serveConfigV2"):
        for inv in _serve_invocations(str(spec["serveConfigV2"]), obj):
            out.append((inv, cluster_record))
    return out


@dataclass(frozen=True)
class KubeRayReader:
    kind: str = "RayCluster, RayService, RayJob, AIBrix RayClusterFleet"

    def read(self, artifact: Artifact) -> Read:
        found = [f for d in artifact.mappings() if is_kubernetes(d) and d.get("kind") in KINDS for f in find(d)]
        return Read(tuple(found))


READER = KubeRayReader()
