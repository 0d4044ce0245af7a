"""AIBrix's StormService (``orchestration.aibrix.ai/v1alpha1``): roles (prefill, decode, routing, ...), each
``replicas`` independent groups of ``podGroupSize`` pods of one template; the pods of a group are one engine
(SGLang's ``--nnodes``, vLLM's multi-node), the roles and replicas separate engines. Each container that runs an
engine is an invocation named ``StormService/name/role/container``; the pod around it is the role's template.
AIBrix's RayClusterFleet is a RayCluster template (``kuberay.py``).

The controller gives every container ``STORM_SERVICE_NAME``, ``ROLE_NAME``, ``ROLE_INDEX`` and ``POD_GROUP_INDEX``
(``pkg/controller/stormservice``); the leader of the first group (index 0) is the pod whose line is read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_gpulayout.artifacts.commands import Invocation, find_in_argv
from pytest_gpulayout.artifacts.kubernetes import argv_of, containers, env_of, is_kubernetes, pod_info
from pytest_gpulayout.artifacts.reader import Artifact, Read
from pytest_gpulayout.origin import Pod

KINDS = ("StormService",)


def find(doc: Mapping[str, Any]) -> list[tuple[Invocation, Pod]]:
    name = str((doc.get("metadata") or {}).get("name", "?"))
    obj = f"StormService/{name}"
    roles = (((doc.get("spec") or {}).get("template") or {}).get("spec") or {}).get("roles") or []
    out: list[tuple[Invocation, Pod]] = []
    for i, role in enumerate(roles):
        if not isinstance(role, Mapping):
            continue
        rname = str(role.get("name", i))
        size = int(role.get("podGroupSize") or 1)
        pod = (role.get("template") or {}).get("spec") or {}
        field_path = f"spec.template.spec.roles[{rname}].template.spec"
        injected = {"STORM_SERVICE_NAME": name, "ROLE_NAME": rname, "ROLE_INDEX": "0", "POD_GROUP_INDEX": "0"}
        for c in containers(pod):
            info = pod_info(obj, field_path, pod, c, group_size=size, group_is_world=size > 1,
                            group_field=f"spec.template.spec.roles[{rname}].podGroupSize")
            source = f"{obj}/{rname}/{c.get('name', '?')}"
            for inv in find_in_argv(argv_of(c, injected), source, env_of(c, injected), str(c.get("image", ""))):
                out.append((inv, info))
    return out


@dataclass(frozen=True)
class AIBrixReader:
    kind: str = "AIBrix StormService"

    def read(self, artifact: Artifact) -> Read:
        docs = [d for d in artifact.mappings() if is_kubernetes(d) and d.get("kind") in KINDS]
        return Read(tuple(f for d in docs for f in find(d)))


READER = AIBrixReader()
