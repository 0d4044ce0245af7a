"""The ``deploy`` check: what only the artifact can get wrong, each failure one line naming the object and
the field.

Every failure is listed, numbered, in one finding (a rollout that fixes the first does not meet the next).

* GPUs a pod asks for against what the layout needs on it: TP x PP x DP on one pod; over a group (LWS
  ``size``, KServe's head + workers, a StatefulSet's replicas under ``--nnodes``) the world over its pods, or
  TP x PP x the data-parallel ranks on the node (``--data-parallel-size-local``); over a Ray cluster the
  world against the cluster's GPUs.
* A group smaller than the world (its pods x GPUs per pod), or fewer replicas than ``--nnodes``.
* ``/dev/shm`` as a memory ``emptyDir`` (or a host mount, host IPC, compose ``shm_size`` / ``ipc: host``) at
  TP > 1, unless the operator mounts one itself (KubeRay).
* ``hostNetwork`` with a DNS policy that cannot resolve the master: a host-network pod resolves through the
  node's ``resolv.conf`` unless ``dnsPolicy: ClusterFirstWithHostNet``, so a Service name as the address the
  nodes meet at does not resolve.
* A group that crosses nodes with no RDMA device (``rdma/*``, host devices, or privileged on the host
  network): a warning naming the NCCL variables set, since NCCL then falls back to TCP sockets.
* An engine's release image whose tag names no release (``vllm/vllm-openai:latest``): a warning, since the
  refusals and defaults the checks judged are one release's; a tag that names one pins ``engine_version``
  (``artifacts/build.py``) and the pass line says so."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from pytest_gpulayout.check import Rule
from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engine import Subject
from pytest_gpulayout.findings import Finding, NoFacts, Status
from pytest_gpulayout.origin import Origin, Pod

CHECK = "deploy"
_NCCL_NET = ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_IB_GID_INDEX", "NCCL_NET", "NCCL_IB_DISABLE")


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


def _fail(message: str) -> Finding:
    return Finding(CHECK, Status.FAIL, message)


def _group_failure(pod: Pod, pods: int, need: int, shape: str) -> Finding | None:
    """The group (its pods x GPUs, or a Ray cluster's GPUs) smaller than the world."""
    if pod.group_gpus is not None:  # a Ray cluster: the world over all its GPUs
        if pod.group_gpus < need:
            return _fail(f"{pod.group_field} give the Ray cluster {pod.group_gpus} GPU(s), but {shape}: "
                         "the engine's placement group never fits")
    elif (pods > 1 or pod.group_is_world) and pod.gpus is not None and pod.gpus * pods < need:
        return _fail(f"{pod.group_field} {pods} x {pod.gpus} GPUs per {pod.unit} = {pod.gpus * pods}, but "
                     f"{shape}: the group is too small for the world size")
    return None


def _pod_failure(dep: Deployment, origin: Origin, pod: Pod, per_pod: int, pods: int, shape: str,
                 gpus_field: str) -> Finding | None:
    """The GPUs one pod asks for below what the layout puts on it."""
    if pod.group_gpus is not None:
        return None  # Ray places the workers over the cluster
    if pod.gpus is None:
        if pod.obj.startswith("services/"):
            return None  # compose's count: all: every GPU of the machine
        return _fail(f"{gpus_field} is not set, but the layout needs {per_pod} GPU(s) on this {pod.unit}")
    if pod.gpus < per_pod:
        return _fail(f"{gpus_field} is {pod.gpus}, but " +
                     (f"TP x PP x local DP = {per_pod} ({dep.tp} x {dep.pp} x {origin.local_dp})" if origin.local_dp
                      else shape if pods == 1 else f"{shape} over {pods} {pod.unit}s = {per_pod}")
                     + f" on this {pod.unit}: ask for {per_pod}")
    return None


def check_deploy(s: Subject) -> Finding:
    """The ``deploy`` finding of a deployment an artifact's pod runs (``DEPLOY.applies``)."""
    return deploy_finding(s.dep)


def deploy_finding(dep: Deployment) -> Finding:
    """``check_deploy`` from the deployment alone: all it reads is where the artifact puts it (``dep.origin``)."""
    origin = dep.origin
    if origin is None or origin.pod is None:
        raise ValueError(f"{dep.name}: the deploy check judges a deployment an artifact's pod runs")
    found, pod = origin, origin.pod
    need = dep.tp * dep.pp * dep.dp
    gpus_field = pod.gpus_field or f"{pod.field}.containers[{pod.container}].resources.limits.nvidia.com/gpu"
    shape = f"TP x PP x DP = {need} ({dep.tp} x {dep.pp} x {dep.dp})"
    nodes = found.nodes if found.nodes and found.nodes > 1 else None
    failures: list[Finding | None] = []
    if pod.group_is_world:
        pods = pod.group_size
    elif nodes:
        pods = nodes
        if pod.group_field and pod.group_size < nodes:
            failures.append(_fail(f"{pod.group_field} is {pod.group_size}, but --nnodes {nodes}: the engine waits "
                                  f"for {nodes - pod.group_size} node(s) that never start"))
    else:
        pods = 1
    per_pod = dep.tp * dep.pp * found.local_dp if found.local_dp else -(-need // pods)
    group = _group_failure(pod, pods, need, shape)
    one = _pod_failure(dep, origin, pod, per_pod, pods, shape, gpus_field)
    # the group against the world and the pod against its share are one shortfall, fixed either way: the first
    failures.append(next((f for f in ((one, group) if found.local_dp else (group, one)) if f is not None), None))
    if dep.tp > 1 and not pod.shm and not pod.shm_by:
        shm_field = pod.shm_field or f"{pod.field}.volumes"
        failures.append(_fail(f"{shm_field} has no /dev/shm (an emptyDir with medium: Memory mounted at /dev/shm) "
                              f"but TP={dep.tp}: NCCL's shared memory transport runs out of the container's 64 MiB "
                              "default"))
    crosses = pods > 1 and (pod.gpus is None or pod.gpus < need)  # the world does not fit on one pod
    if crosses and pod.host_network and pod.dns_policy != "ClusterFirstWithHostNet" and found.master \
            and not _is_ip(found.master) and not found.master.startswith("$"):
        failures.append(_fail(f"{pod.field}.hostNetwork is true with dnsPolicy {pod.dns_policy or 'ClusterFirst'} "
                              f"(the node's resolv.conf), so the master address {found.master!r} does not resolve: "
                              f"set {pod.field}.dnsPolicy: ClusterFirstWithHostNet"))
    failed_ = [f.text for f in failures if f is not None]
    if failed_:  # every one: fixing the first should not uncover the next in the following rollout
        return _fail("; ".join(failed_) if len(failed_) == 1 else
                     "; ".join(f"({i}) {t}" for i, t in enumerate(failed_, 1)))
    notes = []
    untagged = ""
    if found.image and found.image_release:
        notes.append(f"the image {found.image} runs release {found.image_release}, the one the checks judged")
    elif found.image:
        untagged = (f"the image {found.image} names no release (its tag moves), so the checks judged another release "
                    "than the one that will run: pin a release tag")
    if pod.shm_by and dep.tp > 1:
        notes.append(f"{pod.shm_by} mounts /dev/shm itself")
    elif dep.tp > 1:
        notes.append("/dev/shm is memory-backed")
    if crosses and not pod.rdma:
        nccl = sorted(k for k in pod.env if k in _NCCL_NET)
        return Finding(CHECK, Status.WARN,
                       f"the engine spans {pods} {pod.unit}s but {pod.field} requests no RDMA device (rdma/* or "
                       "a host device, or privileged on the host network) and sets "
                       + (", ".join(nccl) if nccl else "no NCCL_IB_HCA / NCCL_SOCKET_IFNAME")
                       + ": NCCL falls back to TCP sockets between the nodes"
                       + (f"; and {untagged}" if untagged else ""))
    have = pod.group_gpus if pod.group_gpus is not None else pod.gpus
    if untagged:
        return Finding(CHECK, Status.WARN, untagged)
    return Finding(CHECK, Status.PASS,
                   f"{'all' if have is None else have} GPU(s) "
                   f"{'in the cluster' if pod.group_gpus is not None else 'per pod'} for {shape}"
                   + (f" over {pods} {pod.unit}s" if pods > 1 else "") + (f"; {'; '.join(notes)}" if notes else ""))


@dataclass(frozen=True)
class DeployRule(Rule):
    """``deploy`` exists only for what an artifact's pod (or compose service) runs."""

    def applies(self, dep: Deployment) -> bool:
        return dep.origin is not None and dep.origin.pod is not None


DEPLOY = DeployRule(CHECK, "What only the artifact can get wrong: GPUs per pod against the layout, the group "
                    "against the world, /dev/shm at TP > 1, the master's address under hostNetwork, RDMA across "
                    "pods, an image tag that names no release.", NoFacts, check_deploy)
