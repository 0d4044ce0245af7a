"""A Slurm batch script (``sbatch FILE``): its ``#SBATCH`` directives say the nodes and the GPUs on each, the
script (its ``srun`` lines unwrapped by the shell reader) the engine it starts.

``sbatch(1)``: directives are ``#SBATCH`` lines before the first command of the script; ``--nodes`` / ``-N`` (a
range ``2-4`` starts with its minimum), ``--gres=gpu[:type]:N`` and ``--gpus-per-node=[type:]N`` the GPUs of each
node, ``--gpus`` / ``-G`` the job's total, ``--gpus-per-task`` times ``--ntasks-per-node`` otherwise. The batch
step runs on the first node with ``SLURM_NNODES`` / ``SLURM_JOB_NUM_NODES``, ``SLURM_GPUS_ON_NODE``,
``SLURM_NODEID=0`` and ``SLURM_PROCID=0`` set; the node list is not known here. A job's nodes have the host's
``/dev/shm``. The nodes are one engine where its world does not fit on one."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pytest_gpulayout.artifacts.commands import Invocation, find_in_text
from pytest_gpulayout.artifacts.reader import Artifact, Read, beside
from pytest_gpulayout.origin import Pod

_DIRECTIVE = re.compile(r"^#SBATCH\s+(.*)$")
_SHORT = {"-N": "--nodes", "-G": "--gpus", "-n": "--ntasks", "-J": "--job-name"}


def directives(text: str) -> dict[str, str]:
    """The ``#SBATCH`` options before the script's first command, by long name (the last one wins)."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or (line.startswith("#") and not line.startswith("#SBATCH")):
            continue
        m = _DIRECTIVE.match(line)
        if m is None:
            break  # sbatch stops at the first command
        try:
            words = shlex.split(m.group(1), comments=True)
        except ValueError:
            continue
        i = 0
        while i < len(words):
            w = words[i]
            name, eq, value = w.partition("=")
            name = _SHORT.get(name, name) if name.startswith("-") and not name.startswith("--") and len(name) == 2 \
                else name
            if not eq and len(w) > 2 and w[:2] in _SHORT and not w.startswith("--"):
                name, value, eq = _SHORT[w[:2]], w[2:], "="
            if not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
                value = words[i + 1]
                i += 1
            out[name] = value
            i += 1
    return out


def _number(text: str | None) -> int | None:
    """The count at the end of ``gpu:a100:8`` / ``a100:8`` / ``8`` (a range's minimum: ``2-4`` is 2)."""
    if not text:
        return None
    last = text.split(",")[0].split(":")[-1].split("-")[0]
    return int(last) if last.isdigit() else None


def _gres_gpus(gres: str | None) -> int | None:
    for item in (gres or "").split(","):
        if item.startswith("gpu"):
            return _number(item) if ":" in item else 1
    return None


def node_gpus(d: Mapping[str, str]) -> tuple[int | None, str]:
    """GPUs of each node and the directive that says it."""
    nodes = _number(d.get("--nodes")) or 1
    if _gres_gpus(d.get("--gres")) is not None:
        return _gres_gpus(d.get("--gres")), "#SBATCH --gres"
    if _number(d.get("--gpus-per-node")) is not None:
        return _number(d.get("--gpus-per-node")), "#SBATCH --gpus-per-node"
    total = _number(d.get("--gpus"))
    if total is not None:
        return -(-total // nodes), "#SBATCH --gpus"
    per_task, tasks = _number(d.get("--gpus-per-task")), _number(d.get("--ntasks-per-node"))
    if per_task is not None:
        return per_task * (tasks or 1), "#SBATCH --gpus-per-task"
    return None, "#SBATCH --gres"


def is_batch(text: str) -> bool:
    return bool(directives(text))


def find(artifact: Artifact) -> list[tuple[Invocation, Pod]]:
    d = directives(artifact.text)
    nodes = _number(d.get("--nodes")) or 1
    gpus, gpus_field = node_gpus(d)
    env = {"SLURM_NNODES": str(nodes), "SLURM_JOB_NUM_NODES": str(nodes), "SLURM_NODEID": "0", "SLURM_PROCID": "0",
           "SLURM_LOCALID": "0"}
    if gpus is not None:
        env["SLURM_GPUS_ON_NODE"] = str(gpus)
    if d.get("--ntasks-per-node"):
        env["SLURM_NTASKS_PER_NODE"] = d["--ntasks-per-node"]
    name = d.get("--job-name") or artifact.path.stem
    pod = Pod(f"sbatch/{name}", "batch", "#SBATCH", gpus, True, group_size=nodes,
              group_field="#SBATCH --nodes" if nodes > 1 else "", group_is_world=nodes > 1, gpus_field=gpus_field,
              unit="node", env=MappingProxyType({}))
    found = find_in_text(artifact.text, artifact.path.name, env, files=beside(artifact.path.parent))
    return [(inv, pod) for inv in found]


@dataclass(frozen=True)
class SlurmReader:
    kind: str = "Slurm batch script (#SBATCH --nodes, --gres, srun)"

    def read(self, artifact: Artifact) -> Read:
        if artifact.docs is not None or not is_batch(artifact.text):
            return Read()
        return Read(tuple(find(artifact)), ("Slurm batch script",))


READER = SlurmReader()
