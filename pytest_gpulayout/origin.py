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

from pytest_gpulayout.inputs.engine_args import ResolvedArgs


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
    #: GPUs of each pod of a Ray cluster, head first (KubeRay's groups x replicas, production-stack's Ray
    #: head and workers): the nodes the engine's placement group is spread over; () elsewhere
    pod_gpus: tuple[int, ...] = ()
    #: what one member of the group is called where the deploy check counts them (a SkyPilot or Slurm "node")
    unit: str = "pod"

    @property
    def pods(self) -> int:
        """Pods of one engine's group (1: the pod alone)."""
        return self.group_size if self.group_is_world else 1


@dataclass(frozen=True)
class Worker:
    """A worker pod's own engine line (an LWS worker's ``--node-rank 1``): part of its leader's engine, so its
    line is judged with the leader's (``config``), not as a deployment of its own."""

    source: str
    args: tuple[str, ...]
    unknown: tuple[str, ...] = ()


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
    #: ``$VAR`` / ``$(...)`` in the line that nothing in the artifact sets (their text was kept): the ``config``
    #: check names them
    unknown: tuple[str, ...] = ()
    #: ``CUDA_VISIBLE_DEVICES`` as the artifact sets it for the engine, entry by entry (None: not set)
    visible: tuple[str, ...] | None = None
    #: where the command line is not a command line but the engine's arguments as fields (Ray Serve LLM's
    #: ``engine_kwargs``, passed to vLLM's ``AsyncEngineArgs``): the release's reading of them, made by the
    #: reader (``artifacts/rayserve.py``); the subject takes it instead of parsing ``args``
    resolved: ResolvedArgs | None = None
    #: what reads the line for the engine: "" for the engine's own command line, else the framework that turns
    #: its fields into the engine's arguments (``Ray Serve LLM engine_kwargs``)
    via: str = ""
    #: the engine lines of its group's worker pods
    workers: tuple[Worker, ...] = ()

    def node_gpus(self, tp: int, pp: int, dp: int) -> tuple[int, ...] | None:
        """The GPUs each node of the artifact gives the engine when it spans several pods or nodes (None: one).

        The nodes are the pods of an LWS / KServe / Ray group, or the replicas a StatefulSet's ``--nnodes`` spans;
        each gives its pod's GPUs, at least the layout's share of the world (the ``deploy`` check judges a pod
        that asks for fewer); a Ray cluster's pods each give their own (``Pod.pod_gpus``, those with GPUs)."""
        pod = self.pod
        need = tp * pp * dp
        if pod is not None and pod.pod_gpus:
            with_gpus = tuple(g for g in pod.pod_gpus if g > 0)
            return with_gpus if len(with_gpus) > 1 else None
        pods = pod.pods if pod is not None else 1
        if pods <= 1 and self.nodes and self.nodes > 1:
            pods = self.nodes
        if pods <= 1:
            return None
        share = tp * pp * self.local_dp if self.local_dp else -(-need // pods)
        per_pod = max(pod.gpus or 0, share) if pod is not None else share
        return (per_pod,) * pods
