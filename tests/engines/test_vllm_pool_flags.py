"""The vLLM flags and variables that change the model or the pool, applied as each release applies them
(``engines/vllm/served.py``, ``budget.py``, ``cudagraphs.py``, ``kv_groups.py``; read in the wheels, cited there):
each test states what a user sees in ``gpulayout check`` (the verdict, the pool) for a line that sets one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import pytest

from pytest_gpulayout.deployment import Launch
from pytest_gpulayout.findings import Finding, Status
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.runner import evaluate
from tests.builders import dep

YARN = '{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}'
LLAMA4 = Path(__file__).parents[1] / "data" / "models" / "llama-4-scout-17b-16e-instruct"


def _h100s(n: int, name: str = "NVIDIA H100 80GB HBM3", total: int = 81559) -> Machine:
    gpus = tuple(Gpu(i, name=name, memory_total_mib=total, memory_free_mib=total - 600,
                     memory_reserved_mib=500) for i in range(n))
    links = {(i, j): "NV18" for i in range(n) for j in range(i + 1, n)}
    return Machine(gpus=gpus, links=links, source="test:h100")


def _check(model: str, args: list[str], *, version: str = "0.33.0", env: Mapping[str, str] | None = None,
           tp: int = 1, max_model_len: int | None = 8192, machine: Machine | None = None) -> dict[str, Finding]:
    d = dep("d", tp=tp, engine_version=version, max_model_len=max_model_len,
            launch=Launch(args=tuple(args), env=MappingProxyType(dict(env or {}))))
    return evaluate(d, machine or _h100s(tp), load_model(model))


def _tokens(f: dict[str, Finding]) -> int:
    got = f["kv_pool"].data["predicted_kv_tokens"]
    assert isinstance(got, int)
    return got


#: from 0.30 the YaRN factor is not applied to max_position_embeddings again (``_get_and_verify_max_len``, 0.30.0
#: ``config/model.py``): the override names the scaled length itself
YARN_SCALED = ('{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, '
               '"max_position_embeddings": 131072}')


@pytest.mark.parametrize(("version", "args"), [
    ("0.33.0", ["--hf-overrides", YARN_SCALED]),
    ("0.29.0", ["--hf-overrides", YARN]),
    ("0.11.1", ["--hf-overrides", YARN]),
    ("0.10.1", ["--hf-overrides", YARN]),
    ("0.8.5", ["--rope-scaling", YARN.split(": ", 1)[1][:-1]]),
    ("0.11.0", ["--rope-scaling", YARN.split(": ", 1)[1][:-1], "--rope-theta", "1000000"]),
])
def test_a_131k_yarn_line_is_not_refused_for_its_length(version: str, args: list[str]) -> None:
    """Qwen3-8B has 40,960 positions; YaRN x4 over 32,768 makes vLLM derive 131,072 (``_get_and_verify_max_len``):
    the line the model card gives starts, and the pool is judged at that length."""
    plain = _check("Qwen/Qwen3-8B", [], version=version, max_model_len=131072)
    assert plain["kv_pool"].status is Status.FAIL and "40,960 positions" in plain["kv_pool"].message
    f = _check("Qwen/Qwen3-8B", args, version=version, max_model_len=131072)
    assert f["config"].status is Status.PASS
    assert f["kv_pool"].status is Status.PASS, f["kv_pool"].message
    assert "rope_scaling" in f["kv_pool"].message
    assert "Not modelled" not in f["kv_pool"].message


def test_from_0_30_a_yarn_factor_alone_does_not_lengthen_the_model() -> None:
    """0.30+ derives 40,960 from Qwen3-8B's max_position_embeddings with a YaRN override that does not scale it, so
    --max-model-len 131072 is refused at config time, in the release's words."""
    f = _check("Qwen/Qwen3-8B", ["--hf-overrides", YARN], version="0.33.0", max_model_len=131072)
    assert f["config"].status is Status.FAIL
    assert "User-specified max_model_len (131072) is greater than the derived max_model_len " \
           "(max_position_embeddings=40960.0" in f["config"].message


def test_rope_scaling_is_refused_where_the_release_removed_it() -> None:
    f = _check("Qwen/Qwen3-8B", ["--rope-scaling", '{"rope_type": "yarn", "factor": 4.0}'], version="0.11.1")
    assert f["config"].status is Status.FAIL and "--rope-scaling" in f["config"].message


@pytest.mark.parametrize("spelling", [["--hf-overrides", '{"num_hidden_layers": 18}'],
                                      ["--hf-overrides.num_hidden_layers", "18"]])
def test_fewer_layers_by_override_double_the_pool(spelling: list[str]) -> None:
    """Half the layers: half the KV bytes per token, about twice the tokens (and fewer weights)."""
    base, half = _check("Qwen/Qwen3-8B", []), _check("Qwen/Qwen3-8B", spelling)
    assert half["kv_pool"].data["kv_bytes_per_token_per_rank"] * 2 == base["kv_pool"].data[
        "kv_bytes_per_token_per_rank"]
    assert _tokens(half) > 2 * _tokens(base)
    assert half["kv_pool"].data["weights_gib_per_rank"] < base["kv_pool"].data["weights_gib_per_rank"]


def test_kv_heads_override_moves_bytes_per_token() -> None:
    f = _check("Qwen/Qwen3-8B", ["--hf-overrides", '{"num_key_value_heads": 4}'])
    assert f["kv_pool"].data["kv_bytes_per_token_per_rank"] == 36 * 4 * 256 * 2


def test_mla_disable_caches_every_head_on_deepseek_v3() -> None:
    """``VLLM_MLA_DISABLE=1``: 128 heads / TP 8 = 16 heads of K and V, 192 wide, per layer: 12,288 B against the
    latent's 1,152 B, so the pool is about a tenth."""
    h200 = _h100s(8, "NVIDIA H200", 143771)
    mla = _check("deepseek-ai/DeepSeek-V3", [], tp=8, machine=h200)
    mha = _check("deepseek-ai/DeepSeek-V3", [], tp=8, env={"VLLM_MLA_DISABLE": "1"}, machine=h200)
    assert mla["kv_pool"].data["kv_bytes_per_token_per_rank"] == 61 * 576 * 2
    assert mha["kv_pool"].data["kv_bytes_per_token_per_rank"] == 61 * 16 * 2 * 192 * 2
    assert _tokens(mha) * 9 < _tokens(mla)
    assert "VLLM_MLA_DISABLE" not in (mha["kv_pool"].message.split("Not modelled", 1) + [""])[1]


def test_num_gpu_blocks_override_is_the_pool() -> None:
    f = _check("Qwen/Qwen3-8B", ["--num-gpu-blocks-override", "1000"])
    assert _tokens(f) == 1000 * 16
    assert "num-gpu-blocks-override" in f["kv_pool"].message and "Not modelled" not in f["kv_pool"].message


def test_kv_cache_memory_bytes_reads_human_readable_sizes() -> None:
    f = _check("Qwen/Qwen3-8B", ["--kv-cache-memory-bytes", "20G"])
    assert _tokens(f) == 20 * 2**30 // (147456 * 16) * 16


@pytest.mark.parametrize("spelling", [["-cc", '{"cudagraph_capture_sizes": [1, 2, 4, 8]}'],
                                      ["--compilation-config.cudagraph_capture_sizes", "[1, 2, 4, 8]"]])
def test_given_capture_sizes_move_the_cudagraph_estimate(spelling: list[str]) -> None:
    base, few = _check("Qwen/Qwen3-8B", []), _check("Qwen/Qwen3-8B", spelling)
    assert "PIECEWISE=4 (largest=8)" in few["kv_pool"].message
    assert _tokens(few) > _tokens(base)
    assert "Not modelled" not in few["kv_pool"].message


def test_estimate_variable_zero_subtracts_nothing_and_one_adds_it_on_0_19() -> None:
    base, off = _check("Qwen/Qwen3-8B", []), _check(
        "Qwen/Qwen3-8B", [], env={"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"})
    assert _tokens(off) > _tokens(base)
    assert "does not subtract it" in off["kv_pool"].message and "Not modelled" not in off["kv_pool"].message
    old, on = _check("Qwen/Qwen3-8B", [], version="0.19.1"), _check(
        "Qwen/Qwen3-8B", [], version="0.19.1", env={"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1"})
    assert _tokens(on) < _tokens(old)


@pytest.mark.parametrize(("version", "env", "grouped"), [
    ("0.33.0", {}, True), ("0.33.0", {"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "0"}, False),
    ("0.14.0", {}, True), ("0.13.0", {}, False),
    ("0.13.0", {"VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE": "1"}, True),
])
def test_llama4_chunked_groups_follow_the_variable_by_release(version: str, env: dict[str, str],
                                                              grouped: bool) -> None:
    f = _check(str(LLAMA4), [], version=version, env=env, tp=4, max_model_len=131072)
    assert ("chunked local-attention group" in f["kv_pool"].message) is grouped, f["kv_pool"].message


def test_disabling_the_hybrid_manager_unifies_llama4_groups() -> None:
    f = _check(str(LLAMA4), ["--disable-hybrid-kv-cache-manager"], tp=4, max_model_len=131072)
    assert "chunked local-attention group" not in f["kv_pool"].message
    assert "Not modelled" not in f["kv_pool"].message
