"""Small constructors for machines, models and deployments used across the rule tests."""

from __future__ import annotations

from pytest_gpulayout.deployment import Deployment, Require
from pytest_gpulayout.engine import Subject
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.machine.facts import Gpu, GpuProcess, Machine
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.runner import subject_of


def machine(n: int = 2, *, link: str = "PHB", name: str = "NVIDIA L4", total: int | None = 23034,
            free: list[int] | int | None = 22221, links: dict[tuple[int, int], str] | None = None,
            names: list[str] | None = None, processes: dict[int, list[GpuProcess]] | None = None,
            mig: tuple[int, ...] = (), source: str = "test") -> Machine:
    frees = free if isinstance(free, list) else [free] * n
    gpus = tuple(
        Gpu(index=i, uuid=f"GPU-{i:08x}-0000-0000-0000-000000000000", name=(names[i] if names else name),
            pci_bus_id=f"00000000:{i + 1:02X}:00.0", memory_total_mib=total, memory_free_mib=frees[i],
            numa_node=0, mig=i in mig, processes=tuple((processes or {}).get(i, ())))
        for i in range(n)
    )
    all_links = {(i, j): link for i in range(n) for j in range(i + 1, n)}
    all_links.update(links or {})
    return Machine(gpus=gpus, links=all_links, source=source)


def llama(heads: int = 32, kv: int = 8, layers: int = 32, **kw: object) -> ModelSpec:
    base = dict(name="test-llama", source="test", model_type="llama", num_attention_heads=heads,
                num_key_value_heads=kv, head_dim=128, num_hidden_layers=layers, hidden_size=heads * 128,
                intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072)
    base.update(kw)
    return ModelSpec(**base)  # type: ignore[arg-type]


def dep(name: str = "d", *, tp: int = 1, pp: int = 1, dp: int = 1, engine: str = "vllm",
        require: Require | None = None, **kw: object) -> Deployment:
    return Deployment(name=name, model="test", engine=engine, tensor_parallel_size=tp,
                      pipeline_parallel_size=pp, data_parallel_size=dp, require=require or Require(),
                      **kw)  # type: ignore[arg-type]


def cluster(hosts: int, preset: str = "8xH100-sxm") -> Machine:
    """``hosts`` copies of a bundled preset, one host each (``presets.preset_cluster``)."""
    from pytest_gpulayout.machine.presets import preset_cluster

    return preset_cluster(preset, hosts, source=f"test:{hosts}x{preset}")


def subject(d: Deployment, m: Machine | None, model: ModelSpec, host: Host = BARE_HOST) -> Subject:
    """``d`` resolved as ``evaluate`` resolves it, for calling one check directly; ``m`` None: a machine
    with the deployment's GPUs (the checks that read no machine)."""
    return subject_of(d, m if m is not None else machine(max(d.gpu_count, 1)), model, host)
