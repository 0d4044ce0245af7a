"""vLLM production-stack Helm values (``servingEngineSpec.modelSpec[]``): each model spec is the chart's
``vllm serve MODEL`` with the flags its ``vllmConfig`` sets (``tensorParallelSize``, ``pipelineParallelSize``,
``maxModelLen``, ``dtype``, ``gpuMemoryUtilization``, ``maxNumSeqs``, ``enablePrefixCaching``,
``enableChunkedPrefill``, ``extraArgs``: ``helm/templates/deployment-vllm-multi.yaml``), on pods with
``requestGPU`` GPUs each; ``raySpec.enabled`` makes it a Ray cluster of a head (``raySpec.headNode.requestGPU``)
and ``replicaCount`` workers. ``/dev/shm`` is the memory volume the chart mounts when ``shmSize`` is given."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pytest_gpulayout.artifacts.commands import Invocation, find_in_argv
from pytest_gpulayout.artifacts.reader import Artifact, Read
from pytest_gpulayout.origin import Pod

#: the chart's entry point (its engine image's): vLLM's server
_ENTRY = ("python3", "-m", "vllm.entrypoints.openai.api_server")
_FLAGS = (("tensorParallelSize", "--tensor-parallel-size"), ("pipelineParallelSize", "--pipeline-parallel-size"),
          ("maxModelLen", "--max-model-len"), ("dtype", "--dtype"),
          ("gpuMemoryUtilization", "--gpu-memory-utilization"),
          ("maxNumSeqs", "--max-num-seqs"), ("maxLoras", "--max-loras"))
_SWITCHES = (("enablePrefixCaching", "--enable-prefix-caching", "--no-enable-prefix-caching"),
             ("enableChunkedPrefill", "--enable-chunked-prefill", "--no-enable-chunked-prefill"))


def is_values(doc: object) -> bool:
    return isinstance(doc, Mapping) and isinstance((doc.get("servingEngineSpec") or {}).get("modelSpec"), list)


def find(doc: Mapping[str, Any]) -> list[tuple[Invocation, Pod]]:
    out: list[tuple[Invocation, Pod]] = []
    for i, spec in enumerate(doc["servingEngineSpec"]["modelSpec"]):
        if not isinstance(spec, Mapping) or spec.get("enabled") is False:
            continue
        name = str(spec.get("name", i))
        where = f"servingEngineSpec.modelSpec[{name}]"
        cfg = spec.get("vllmConfig") or {}
        argv = [*_ENTRY, "--model", str(spec.get("modelURL", ""))]
        for key, flag in _FLAGS:
            if cfg.get(key) is not None:
                argv += [flag, str(cfg[key])]
        for key, on, off in _SWITCHES:
            if cfg.get(key) is not None:
                argv.append(on if cfg[key] else off)
        argv += [str(a) for a in cfg.get("extraArgs") or []]
        env = {str(e["name"]): str(e["value"]) for e in spec.get("env") or []
               if isinstance(e, Mapping) and "name" in e and "value" in e}
        gpus = int(spec.get("requestGPU", 0) or 0)
        ray = spec.get("raySpec") or {}
        group: dict[str, Any] = {}
        if ray.get("enabled"):
            head = int((ray.get("headNode") or {}).get("requestGPU", 0) or 0)
            workers = int(spec.get("replicaCount", 1) or 1)
            group = {"group_size": workers + 1, "group_gpus": head + workers * gpus, "group_is_world": True,
                     "group_field": f"{where}.replicaCount (Ray workers) + raySpec.headNode.requestGPU",
                     "pod_gpus": (head, *[gpus] * workers)}
        info = Pod(f"modelSpec/{name}", name, where, gpus, bool(spec.get("shmSize")), gpus_field=f"{where}.requestGPU",
                   shm_field=f"{where}.shmSize",
                   env=MappingProxyType(env), **group)
        image = f"{spec['repository']}:{spec.get('tag') or 'latest'}" if spec.get("repository") else ""
        out += [(inv, info) for inv in find_in_argv(argv, where, env, image)]
    return out


@dataclass(frozen=True)
class HelmReader:
    kind: str = "production-stack values (servingEngineSpec.modelSpec)"

    def read(self, artifact: Artifact) -> Read:
        docs = [d for d in artifact.mappings() if is_values(d)]
        return Read(tuple(f for d in docs for f in find(d)), ("production-stack values",) if docs else ())


READER = HelmReader()
