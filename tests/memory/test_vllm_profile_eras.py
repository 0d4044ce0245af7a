"""vLLM's profile run by release: who it charges for other tenants' memory, where V0 samples, and
the total CUDA reports. Read in the wheels (``pip download --no-deps vllm==X``):

- 0.6.4.post1 ``worker/worker.py``: ``non_torch_allocations = (total - free) - torch allocated``;
- 0.6.5 / 0.7.2 ``worker/worker.py`` + ``utils.memory_profiling``: measured from a baseline taken at
  ``init_device``, so other tenants are not subtracted and nothing checks they leave room;
- 0.8.5 / 0.9.0 ``v1/worker/gpu_worker.py determine_available_memory``: ``total - free`` again;
- 0.9.1 and later: the free-memory start-up check;
- 0.7.2 ``layers/logits_processor.py`` (``tensor_model_parallel_gather``) and
  ``worker/model_runner.py`` (``if not self.is_driver_worker: return []``; ``_dummy_run`` samples
  with ``top_k = vocab - 1``): V0 sorts every logit on one rank;
- V1's warm-up (0.10.1 ``v1/worker/gpu_model_runner._dummy_sampler_run``: ``top_k = vocab - 1``,
  ``top_p = 0.9``) through ``v1/sample/ops/topk_topp_sampler.py`` of 0.8.5, 0.9.2, 0.10.1, 0.11.0,
  0.12-0.18, 0.19, 0.21, 0.22, 0.28, 0.33 and ``envs.py``'s ``VLLM_USE_FLASHINFER_SAMPLER`` default;
  ``flashinfer-python`` is in no wheel's requirements before 0.10.1, an extra in 0.10.1-0.11, a
  dependency from 0.12 (``*.dist-info/METADATA``).
"""

from __future__ import annotations

import pytest
from builders import dep, subject
from packaging.version import Version

from pytest_gpulayout.deployment import Launch
from pytest_gpulayout.engines.vllm.defaults import (
    counts_other_tenants,
    oversubscribes_silently,
    samples_on_driver_only,
    warmup_sorts_logits,
)
from pytest_gpulayout.engines.vllm.engine import VLLM
from pytest_gpulayout.findings import Status
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.machine.facts import DRIVER_RESERVE_ESTIMATE_MIB, GIB, MIB, Gpu, Machine
from pytest_gpulayout.memory.communicators import TpLink
from pytest_gpulayout.memory.pool import predict_pool
from pytest_gpulayout.model.config import spec_from_config
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.rules.balance import check_balance
from pytest_gpulayout.rules.kv_pool import check_kv_pool

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
    args = dict(engine=VLLM.memory, engine_version=version, tp=1, pp=1, max_model_len=8192, memory_fraction=0.9)
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
    p = predict_pool(m, engine=VLLM.memory, engine_version="0.7.2", tp=2, pp=1, gpus=gpus(2, free=24000),
                     max_model_len=131072, memory_fraction=0.98, link=TpLink.PCIE)
    why = p.activation_reserve_why
    assert "V0 sampler's top-k sort" in why and "on rank 0, which samples" in why
    assert p.limiting_gpu == 0
    assert p.activation_reserve_gib == pytest.approx(256 * 152064 * 38 / GIB + 0.40, abs=0.01)
    # the engine logged 81,536 tokens (the ValueError); within 2 %
    assert abs(p.kv_tokens / 81_536 - 1) < 0.02
    v1 = predict_pool(m, engine=VLLM.memory, engine_version="0.9.1", tp=2, pp=1, gpus=gpus(2, free=24000),
                      max_model_len=131072, memory_fraction=0.98)
    assert "top-k sort" not in v1.activation_reserve_why and "which samples" not in v1.activation_reserve_why


def test_v0_without_a_free_memory_check_fails_when_tenants_leave_less_than_it_will_take() -> None:
    """0.7.2 sizes the pool as if the GPU were empty: with 6 GiB held by another process, 0.9 of the
    GPU is not free, and the engine runs out of memory after profiling. The finding says so."""
    assert oversubscribes_silently(Version("0.7.2")) and not oversubscribes_silently(Version("0.6.4"))
    machine = Machine(gpus=tuple(gpus(2, free=RTX4090 - 450 - 6144)), links={(0, 1): "PHB"})
    f = check_balance(subject(dep(tp=2,
                              engine_version="0.7.2", memory_fraction=0.9), machine, load_model("Qwen/Qwen3-8B")))
    assert f.status is Status.FAIL
    assert "vLLM 0.7.2 does not check" in f.message and "torch.OutOfMemoryError" in f.message
    assert "memory_fraction: 0.72" in f.message  # (17.55 GiB free - 0.5) / 23.55 GiB CUDA total
    # 0.6.4 charges the tenant to the pool instead, and the pool shows it
    old = check_balance(subject(dep(tp=2,
                                engine_version="0.6.4", memory_fraction=0.9), machine, load_model("Qwen/Qwen3-8B")))
    assert old.status is Status.PASS and "comes out of the KV pool instead" in old.message


# -- V1's sampler warm-up by release (v1/sample/ops/topk_topp_sampler.py, envs.py, the wheels' METADATA) --

@pytest.mark.parametrize(("version", "env", "flashinfer", "sorts"), [
    ("0.7.2", {}, True, True),                    # V0: top-k sort on the sampling rank, whatever is installed
    ("0.10.1", {}, False, True),                  # flashinfer is no dependency (an extra from 0.10.1): PyTorch sort
    ("0.10.1", {}, True, False),                  # installed, flag unset: FlashInfer
    ("0.11.0", {"VLLM_USE_FLASHINFER_SAMPLER": "0"}, True, True),
    ("0.12.0", {}, True, True),                   # a dependency now, but opt-in (``if envs.VLLM_...``)
    ("0.16.0", {"VLLM_USE_FLASHINFER_SAMPLER": "1"}, True, False),
    ("0.17.0", {}, True, False),                  # ``apply_top_k_top_p_triton`` for >= 8 rows: no sort
    ("0.21.0", {}, True, False),                  # FlashInfer by default (``else True``)
    ("0.33.0", {"VLLM_USE_FLASHINFER_SAMPLER": "0"}, True, False),  # the Triton kernel
])
def test_which_v1_releases_sort_every_logit_in_the_sampler_warm_up(version, env, flashinfer, sorts) -> None:
    assert warmup_sorts_logits(Version(version), env=env, flashinfer_installed=flashinfer) is sorts


def _oss_on_one_h100(version: str, *, host: Host = BARE_HOST, env: dict[str, str] | None = None,
                     args: tuple[str, ...] = ()):
    m = Machine(gpus=(Gpu(index=0, name="NVIDIA H100 80GB HBM3", memory_total_mib=81559,
                          memory_free_mib=81559 - 500),))
    d = dep(engine_version=version, max_model_len=131072, launch=Launch(args=args, env=env or {}))
    return subject(d, m, load_model("openai/gpt-oss-120b"), host).replicas[0]


def test_gpt_oss_120b_on_one_h100_does_not_start_on_0_10_1_from_pip() -> None:
    """vllm/011 (0.10.1 installed with pip, one H100, the default 0.9 and 131,072 tokens): "Available KV
    cache memory: -2.14 GiB". Its warm-up sorts 1024 x 201,088 logits (7.3 GiB); with FlashInfer
    installed in the engine's environment that sampler takes ~1.5 GiB and the pool is there."""
    pip = _oss_on_one_h100("0.10.1")
    assert pip.kv_budget_bytes_per_rank < 0 and pip.kv_tokens == 0
    why = pip.activation_reserve_why
    assert "top-k/top-p sort" in why and "FlashInfer, when installed" in why
    # the launch runs this environment's vLLM 0.10.1, which has FlashInfer: its sampler takes the place of the sort
    here = Host(engine_versions={"vllm": "0.10.1"}, libraries={"flashinfer-python": "0.2.11"})
    with_flashinfer = _oss_on_one_h100("0.10.1", host=here)
    assert with_flashinfer.kv_tokens > 0
    assert pip.activation_reserve_gib - with_flashinfer.activation_reserve_gib == pytest.approx(
        1024 * 201088 * 30 / GIB, abs=0.01)


def test_launch_env_opts_0_16_into_flashinfer_sampling() -> None:
    sorted_ = _oss_on_one_h100("0.16.0")
    opted = _oss_on_one_h100("0.16.0", env={"VLLM_USE_FLASHINFER_SAMPLER": "1"})
    assert "VLLM_USE_FLASHINFER_SAMPLER=1 samples with FlashInfer" in sorted_.activation_reserve_why
    assert opted.kv_tokens > sorted_.kv_tokens


def test_kv_pool_fails_gpt_oss_120b_on_0_10_1_and_names_the_reserve() -> None:
    """The verdict a user sees for vllm/011's deployment: a fail (the engine refused), naming what
    took the room and the flags that give it back."""
    m = Machine(gpus=(Gpu(index=0, name="NVIDIA H100 80GB HBM3", memory_total_mib=81559,
                          memory_free_mib=81559 - 500),))
    f = check_kv_pool(subject(dep(engine_version="0.10.1", max_model_len=131072), m, load_model("openai/gpt-oss-120b")))
    assert f.status is Status.FAIL
    # 7.34 GiB warm-up: the sort (7.29) and the 8192-token forward output it holds (0.05; profile_run)
    assert "vLLM's profile-run reserve (7.49 GiB" in f.message and "lower --max-num-seqs" in f.message


def test_v1_warms_up_no_more_requests_than_batched_tokens() -> None:
    """0.10.1 ``_dummy_run``: ``num_reqs = min(num_tokens, max_num_reqs)``, so --max-num-batched-tokens
    512 with 1024 sequences sorts 512 rows of logits (vllm-project/vllm#27508's workaround), next to
    the hidden states profile_run still holds: (8192 + 2 x 1024) rows against (512 + 2 x 512), 2880 wide."""
    full = _oss_on_one_h100("0.10.1")
    small = _oss_on_one_h100("0.10.1", args=("--max-num-batched-tokens", "512"))
    held = ((8192 + 2 * 1024) - (512 + 2 * 512)) * 2880 * 2
    assert full.activation_reserve_gib - small.activation_reserve_gib == pytest.approx(
        (512 * 201088 * 38 + held) / GIB, abs=1e-3)
