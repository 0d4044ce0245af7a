"""vLLM's profile run by release: who it charges for other tenants' memory, where V0 samples, and
the total CUDA reports. Read in the wheels (``pip download --no-deps vllm==X``):

- 0.6.4.post1 ``worker/worker.py``: ``non_torch_allocations = (total - free) - torch allocated``;
- 0.6.5 / 0.7.2 ``worker/worker.py`` + ``utils.memory_profiling``: measured from a baseline taken at
  ``init_device``, so other tenants are not subtracted and nothing checks they leave room;
- 0.8.5 / 0.9.0 ``v1/worker/gpu_worker.py determine_available_memory``: ``total - free`` again;
- 0.9.1 and later: the free-memory start-up check;
- 0.7.2 ``layers/logits_processor.py`` (``tensor_model_parallel_gather``) and
  ``worker/model_runner.py`` (``if not self.is_driver_worker: return []``; ``_dummy_run`` samples
  with ``top_k = vocab - 1``): V0 sorts every logit on one rank.
"""

from __future__ import annotations

import pytest
from builders import dep
from packaging.version import Version

from pytest_gpulayout.engines.vllm import counts_other_tenants, oversubscribes_silently, samples_on_driver_only
from pytest_gpulayout.findings import Status
from pytest_gpulayout.machine.facts import DRIVER_RESERVE_ESTIMATE_MIB, GIB, MIB, Gpu, Machine
from pytest_gpulayout.memory.communicators import TpLink
from pytest_gpulayout.memory.pool import predict_pool
from pytest_gpulayout.model.config import spec_from_config
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.rules.balance import check_balance

RTX4090 = 24564


def gpus(n: int, *, free: int, total: int = RTX4090) -> list[Gpu]:
    return [Gpu(index=i, name="NVIDIA GeForce RTX 4090", memory_total_mib=total, memory_free_mib=free)
            for i in range(n)]


@pytest.mark.parametrize(("version", "counted"), [
    ("0.6.4", True), ("0.6.5", False), ("0.7.2", False), ("0.8.5", True), ("0.9.0", True),
    ("0.9.1", False), ("0.33.0", False)])
def test_other_tenants_come_out_of_the_pool_only_where_the_release_subtracts_them(version: str,
                                                                                  counted: bool) -> None:
    assert counts_other_tenants(Version(version)) is counted
    m = load_model("Qwen/Qwen3-8B")
    idle_free = RTX4090 - DRIVER_RESERVE_ESTIMATE_MIB  # nothing else on the GPU
    args = dict(engine="vllm", engine_version=version, tp=1, pp=1, max_model_len=8192, memory_fraction=0.9)
    idle = predict_pool(m, gpus=gpus(1, free=idle_free), **args)  # type: ignore[arg-type]
    busy = predict_pool(m, gpus=gpus(1, free=idle_free - 2048), **args)  # type: ignore[arg-type]
    shrunk = idle.kv_budget_bytes_per_rank - busy.kv_budget_bytes_per_rank
    assert shrunk == (2048 * MIB if counted else 0)


def test_v0_samples_on_one_rank_and_that_rank_sets_the_pool() -> None:
    """DeepSeek-R1-Distill-Qwen-14B at TP 2 on RTX 4090s (vllm/023): rank 0 sorts 256 x 152,064 logits
    (38 B each, 1.38 GiB); rank 1 only runs the forward. V1 samples on every rank."""
    assert samples_on_driver_only(Version("0.7.2")) and not samples_on_driver_only(Version("0.8.0"))
    cfg = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 5120,
           "intermediate_size": 13824, "num_attention_heads": 40, "num_key_value_heads": 8,
           "num_hidden_layers": 48, "vocab_size": 152064, "max_position_embeddings": 131072,
           "torch_dtype": "bfloat16"}
    m = spec_from_config(cfg, name="R1-Distill-Qwen-14B", source="test")
    p = predict_pool(m, engine="vllm", engine_version="0.7.2", tp=2, pp=1, gpus=gpus(2, free=24000),
                     max_model_len=131072, memory_fraction=0.98, link=TpLink.PCIE)
    why = p.activation_reserve_why
    assert "V0 sampler's top-k sort" in why and "on rank 0, which samples" in why
    assert p.limiting_gpu == 0
    assert p.activation_reserve_gib == pytest.approx(256 * 152064 * 38 / GIB + 0.40, abs=0.01)
    # the engine logged 81,536 tokens (the ValueError); within 2 %
    assert abs(p.kv_tokens / 81_536 - 1) < 0.02
    v1 = predict_pool(m, engine="vllm", engine_version="0.9.1", tp=2, pp=1, gpus=gpus(2, free=24000),
                      max_model_len=131072, memory_fraction=0.98)
    assert "top-k sort" not in v1.activation_reserve_why and "which samples" not in v1.activation_reserve_why


def test_v0_without_a_free_memory_check_fails_when_tenants_leave_less_than_it_will_take() -> None:
    """0.7.2 sizes the pool as if the GPU were empty: with 6 GiB held by another process, 0.9 of the
    GPU is not free, and the engine runs out of memory after profiling. The finding says so."""
    assert oversubscribes_silently(Version("0.7.2")) and not oversubscribes_silently(Version("0.6.4"))
    machine = Machine(gpus=tuple(gpus(2, free=RTX4090 - 450 - 6144)), links={(0, 1): "PHB"})
    f = check_balance(dep(tp=2, engine_version="0.7.2", memory_fraction=0.9), machine, load_model("Qwen/Qwen3-8B"))
    assert f.status is Status.FAIL
    assert "vLLM 0.7.2 does not check" in f.message and "torch.OutOfMemoryError" in f.message
    assert "memory_fraction: 0.72" in f.message  # (17.55 GiB free - 0.5) / 23.55 GiB CUDA total
    # 0.6.4 charges the tenant to the pool instead, and the pool shows it
    old = check_balance(dep(tp=2, engine_version="0.6.4", memory_fraction=0.9), machine, load_model("Qwen/Qwen3-8B"))
    assert old.status is Status.PASS and "comes out of the KV pool instead" in old.message
