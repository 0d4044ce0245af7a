"""Where a deployment read from an artifact stands: the file and the object around its command line.

``gpulayout check`` and ``pytest --gpulayout`` read what a team ships (a Kubernetes manifest, a LeaderWorkerSet,
KubeRay, KServe, compose, Helm values, a shell script: ``artifacts/``) into deployments, each carrying its
``Origin``: the object and container it came from and what the artifact says around the command line (the
GPUs its pod asks for, ``/dev/shm``, the pods of its group, the nodes its command line spans, the image). The
``deploy`` check reads it (``rules/deploy.py``); a deployment of a ``gpulayout.yaml`` has none. Plain frozen
data, so the check stays a pure function of the subject.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from types import MappingProxyType


@dataclass(frozen=True)
class Pod:
    """What the ``deploy`` check reads of the pod (or compose service) that runs an engine."""

    obj: str                       # Kind/name (compose: services/name)
    container: str
    field: str                     # the dotted path of the pod spec (``spec.template.spec``)
    gpus: int | None               # GPUs one pod gets (None: not requested)
    shm: bool                      # /dev/shm is a memory emptyDir, a host path, or the host's IPC
    #: pods that make one engine: LWS size, a Ray cluster's pods, KServe's head + workers (1: the pod alone)
    group_size: int = 1
    role: str = ""                 # leader | worker (LWS, KServe workers)
    #: the field that says the group size (``spec.leaderWorkerTemplate.size``); "" for one pod
    group_field: str = ""
    #: GPUs over the whole group where its pods differ (a Ray cluster: head plus worker groups)
    group_gpus: int | None = None
    gpus_field: str = ""           # the field the GPU count is read from (default: resources.limits)
    shm_field: str = ""            # where /dev/shm would be declared (default: the pod's volumes)
    shm_by: str = ""               # the operator that mounts /dev/shm itself (KubeRay)
    #: whether the pods of the group are always one engine (LWS, Ray, KServe) or replicas that become one
    #: only when the command line says so (--nnodes over a StatefulSet's replicas)
    group_is_world: bool = False
    host_network: bool = False
    dns_policy: str = ""
    rdma: bool = False             # an RDMA device is requested (or the host's, privileged on its network)
    env: Mapping[str, str] = dc_field(default_factory=lambda: MappingProxyType({}))
    product: str = ""              # the nvidia.com/gpu.product the node selector asks for


@dataclass(frozen=True)
class Origin:
    """The artifact a deployment came from, and what it says around the engine's command line."""

    #: the artifact file (``--cmd``: a ``cmd`` path in the working directory)
    file: Path
    #: where in it: ``Deployment/qwen/engine``, ``services/vllm``, ``run.sh:12`` (also the deployment's name)
    source: str
    #: the engine's entry as written (``vllm serve``, ``python -m sglang.launch_server``)
    entry: str
    #: the words after the entry, as the artifact runs them: what the release's front end judges
    args: tuple[str, ...] = ()
    #: the pod (or compose service) that runs it: what the ``deploy`` check reads; None for a bare command line
    pod: Pod | None = None
    #: how the command line spans nodes: ``--nnodes`` (None: not given), the data-parallel ranks on this node
    #: (``--data-parallel-size-local``), the address the nodes meet at
    nodes: int | None = None
    local_dp: int | None = None
    master: str | None = None
    #: the engine's release image it runs (``vllm/vllm-openai:v0.10.1``), and the release its tag names (None:
    #: the tag names none, so the checks judged another release than the one that will run)
    image: str = ""
    image_release: str | None = None
