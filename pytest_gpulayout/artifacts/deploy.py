"""The ``deploy`` check: what only the artifact can get wrong. GPUs a pod asks for against what the layout
needs on it (TP x PP x DP on one pod; over a LeaderWorkerSet group, the world over its ``size`` pods),
a multi-node group smaller than the world, ``/dev/shm`` as a memory ``emptyDir`` (or a host mount) at TP > 1."""

from __future__ import annotations

from pytest_gpulayout.artifacts.build import Found
from pytest_gpulayout.artifacts.kubernetes import Pod
from pytest_gpulayout.findings import Finding, Status

CHECK = "deploy"


def check(found: Found) -> Finding | None:
    """The ``deploy`` finding of one deployment found in an artifact (None: a bare command line)."""
    pod = found.pod
    if not isinstance(pod, Pod):
        return None
    dep = found.deployment
    need = dep.tp * dep.pp * dep.dp
    where = f"{pod.obj} container {pod.container}"
    gpus_field = f"{pod.field}.containers[{pod.container}].resources.limits.nvidia.com/gpu"
    if pod.role:  # a LeaderWorkerSet group: the world over size pods
        per_pod = -(-need // pod.group_size)
        if pod.gpus is not None and pod.gpus * pod.group_size < need:
            return Finding(CHECK, Status.FAIL,
                           f"{where}: spec.leaderWorkerTemplate.size {pod.group_size} x {pod.gpus} GPUs per pod = "
                           f"{pod.gpus * pod.group_size}, but TP x PP x DP = {need} ({dep.tp} x {dep.pp} x {dep.dp}): "
                           f"the group is too small for the world size")
    else:
        per_pod = need
        if pod.gpus is not None and pod.gpus < need:
            return Finding(CHECK, Status.FAIL,
                           f"{where}: {gpus_field} is {pod.gpus}, but TP x PP x DP = {need} "
                           f"({dep.tp} x {dep.pp} x {dep.dp}) on this pod: ask for {need}")
    if pod.gpus is None:
        return Finding(CHECK, Status.FAIL, f"{where}: {gpus_field} is not set, but the layout needs {per_pod} "
                                           "GPU(s) on this pod")
    if dep.tp > 1 and not pod.shm:
        return Finding(CHECK, Status.FAIL,
                       f"{where}: {pod.field}.volumes has no /dev/shm (an emptyDir with medium: Memory mounted at "
                       f"/dev/shm) but TP={dep.tp}: NCCL's shared memory transport runs out of the container's "
                       "64 MiB default")
    return Finding(CHECK, Status.PASS, f"{where}: {pod.gpus} GPU(s) per pod for TP x PP x DP = {need}"
                   + (f" over {pod.group_size} pods" if pod.group_size > 1 else "")
                   + ("; /dev/shm is memory-backed" if dep.tp > 1 else ""))
