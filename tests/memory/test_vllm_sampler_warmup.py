"""vLLM V1's profile run: what its sampler warm-up holds at its peak, read in the wheels
(``pip download --no-deps vllm==X``, never installed):

- 0.9.2 and 0.19.1 ``v1/worker/gpu_model_runner.py profile_run``: ``hidden_states, last_hidden_states =
  self._dummy_run(self.max_num_tokens, is_profile=True)`` then ``self._dummy_sampler_run(last_hidden_states)``;
  ``del hidden_states`` only after it, so the forward's ``max_num_batched_tokens x hidden`` output is live
  while the sampler warms up (``_dummy_sampler_run`` adds ``torch.rand_like`` of the gathered rows);
- 0.17.0 and 0.19.1 ``v1/sample/ops/topk_topp_sampler.py``: FlashInfer only with
  ``VLLM_USE_FLASHINFER_SAMPLER=1``, else ``forward_native``: ``apply_top_k_top_p`` -> the Triton kernel for
  >= 8 rows (in place, no sort), then ``probs = softmax(float32)`` and ``random_sample``'s ``q =
  torch.empty_like(probs)``, next to ``Sampler.forward``'s fp32 copy and the model-dtype logits the warm-up
  still holds: 14 B per logit;
- 0.17.0 and 0.19.1 ``v1/sample/ops/topk_topp_triton.py apply_top_k_top_p_triton``: a cached
  ``(min(next_power_of_2(min(num_sm, rows)), num_sm), vocab)`` fp32 buffer.

vllm/109 and vllm/110 (0.19.1, Qwen3-8B on one A100-SXM4-40GB, serve 2048 / bench 8192 tokens) and vllm/107
and vllm/108 (0.9.2, the same) are the logs; the rule was read after them.
"""

from __future__ import annotations

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.vllm.budget import (
    SAMPLER_BYTES_PER_LOGIT,
    SORTING_SAMPLER_BYTES_PER_LOGIT,
    VLLM_NON_TORCH_GIB,
    triton_buffer_rows,
)
from pytest_gpulayout.engines.vllm.defaults import warmup_uses_triton_top_k_top_p
from pytest_gpulayout.engines.vllm.engine import VLLM
from pytest_gpulayout.machine.facts import GIB, Gpu
from pytest_gpulayout.memory.pool import predict_pool
from pytest_gpulayout.model.load import load_model

VOCAB, HIDDEN = 151936, 4096  # Qwen/Qwen3-8B


def _a100_40gb() -> list[Gpu]:
    # CUDA's total 40,339 MiB (deviceQuery: 42,298,834,944 bytes), idle
    return [Gpu(0, name="NVIDIA A100-SXM4-40GB", memory_total_mib=40960, memory_free_mib=40289,
                memory_reserved_mib=621)]


def _qwen3_8b(version: str, **kw: int):
    return predict_pool(load_model("Qwen/Qwen3-8B"), engine=VLLM.memory, engine_version=version, tp=1, pp=1,
                        gpus=_a100_40gb(), max_model_len=40960, memory_fraction=None, **kw)


def test_0_19_1_serve_reserves_the_triton_sampler_warm_up_and_the_held_hidden_states() -> None:
    """vllm/109: ``vllm serve`` on an A100 40GB (2048 tokens, 256 requests). The warm-up holds 256 x 151,936
    logits at 14 B, the Triton kernel's 108-row buffer (108 SMs) and the 2048-token forward output; the
    8 B-per-logit estimate left 0.44 GiB reserved where the engine took ~0.82 (logged 19.36 GiB)."""
    p = _qwen3_8b("0.19.1")
    sampler = 256 * VOCAB * 14 + 108 * VOCAB * 4 + (2048 + 2 * 256) * HIDDEN * 2
    assert "Triton top-k/top-p" in p.activation_reserve_why
    assert p.activation_reserve_gib == pytest.approx(sampler / GIB + VLLM_NON_TORCH_GIB, abs=1e-3)
    assert p.activation_reserve_gib > 0.7
    # logged: 140,960 tokens (vllm/109)
    assert abs(p.kv_tokens / 140_960 - 1) < 0.01


def test_0_19_1_bench_latency_is_set_by_the_forward_at_8192_tokens() -> None:
    """vllm/110 (``vllm bench latency``, 8192 tokens): the 8192-token forward (0.75 GiB) is above the warm-up."""
    p = _qwen3_8b("0.19.1", max_num_batched_tokens=8192)
    assert "forward" in p.activation_reserve_why
    assert abs(p.kv_tokens / 139_792 - 1) < 0.01


def test_0_9_2_warm_up_sorts_next_to_the_forward_output_so_the_batch_size_shows() -> None:
    """vllm/107 vs vllm/108 (0.9.2, PyTorch sort): the engine gave 0.05 GiB (336 tokens) less at 8192
    tokens than at 2048, with the sort (1.38 GiB) above both forwards: the 6144 more tokens' hidden states
    (48 MiB) held during the warm-up."""
    serve = _qwen3_8b("0.9.2")
    bench = _qwen3_8b("0.9.2", max_num_batched_tokens=8192)
    assert "sort" in serve.activation_reserve_why and "sort" in bench.activation_reserve_why
    held = (8192 - 2048) * HIDDEN * 2
    assert (bench.activation_reserve_gib - serve.activation_reserve_gib) == pytest.approx(held / GIB, abs=1e-6)
    assert serve.kv_tokens - bench.kv_tokens == 336  # the logs: 136,080 and 135,744
    assert serve.activation_reserve_gib == pytest.approx(
        (256 * VOCAB * SORTING_SAMPLER_BYTES_PER_LOGIT + (2048 + 512) * HIDDEN * 2) / GIB + VLLM_NON_TORCH_GIB,
        abs=1e-3)


def test_flashinfer_warm_up_keeps_its_per_logit_estimate() -> None:
    """0.19.1 with ``VLLM_USE_FLASHINFER_SAMPLER=1``: ``forward_cuda`` (FlashInfer), not the Triton path."""
    from pytest_gpulayout.knobs import LaunchKnobs

    p = predict_pool(load_model("Qwen/Qwen3-8B"), engine=VLLM.memory, engine_version="0.19.1", tp=1, pp=1,
                     gpus=_a100_40gb(), max_model_len=40960, memory_fraction=None,
                     knobs=LaunchKnobs(env={"VLLM_USE_FLASHINFER_SAMPLER": "1"}))
    sampler = 256 * VOCAB * SAMPLER_BYTES_PER_LOGIT + (2048 + 512) * HIDDEN * 2
    assert p.activation_reserve_gib == pytest.approx(sampler / GIB + VLLM_NON_TORCH_GIB, abs=1e-3)


@pytest.mark.parametrize(("version", "env", "triton"), [
    ("0.16.0", {}, False),                                   # PyTorch sort (no Triton kernel yet)
    ("0.17.0", {}, True),
    ("0.19.1", {}, True),
    ("0.19.1", {"VLLM_USE_FLASHINFER_SAMPLER": "1"}, False),  # opt-in FlashInfer
    ("0.21.0", {}, False),                                   # FlashInfer by default
    ("0.21.0", {"VLLM_USE_FLASHINFER_SAMPLER": "0"}, True),
])
def test_which_releases_warm_up_with_the_triton_kernel(version: str, env: dict[str, str], triton: bool) -> None:
    assert warmup_uses_triton_top_k_top_p(Version(version), env=env) is triton


@pytest.mark.parametrize(("rows", "gpu", "buffer"), [
    (256, "NVIDIA A100-SXM4-40GB", 108), (100, "NVIDIA A100-SXM4-40GB", 108), (16, "NVIDIA A100-SXM4-40GB", 16),
    (1024, "NVIDIA H100 80GB HBM3", 132), (1024, "NVIDIA H100 PCIe", 114), (9, "NVIDIA L40S", 16),
])
def test_triton_buffer_rows(rows: int, gpu: str, buffer: int) -> None:
    assert triton_buffer_rows(rows, gpu) == buffer
