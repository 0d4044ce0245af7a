"""llama.cpp and MLA GGUFs (deepseek2 and kin), issue 19 item 5, read in llama.cpp b11434:

- ``src/llama-hparams.cpp`` ``is_mla()``: ``key_length_mla`` and ``value_length_mla`` both non-zero
  (``src/models/deepseek2.cpp`` reads them); the GGUF's ``key_length`` is then the cached latent,
  ``kv_lora_rank + n_rot``, with one KV head.
- ``src/llama-kv-cache.cpp``: ``has_v = !is_mla``: only the K tensor is allocated; ``src/llama-graph.cpp``
  reads V as a view of it and decompresses it (``v_mla``). Counting a V row of ``kv_lora_rank`` beside it
  made the KV (576 + 512) / 576 = 1.89x too large for DeepSeek-V3: a false fail at long contexts.
- ``src/llama-context.cpp`` ``llama_init_from_model``: "model does not support different K (%s) and V
  (%s) cache types" for an MLA model (or deepseek4).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import subject
from gguf_tiny import write_tiny_deepseek2

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.llamacpp.checks import check_heads, check_kv_pool
from pytest_gpulayout.engines.llamacpp.flags import LlamaCppFlags
from pytest_gpulayout.engines.llamacpp.memory import context_size, kv_bytes_per_token, kv_total_bytes
from pytest_gpulayout.findings import Status
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.model.gguf import load_gguf


@pytest.fixture(scope="module")
def mla(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_deepseek2(tmp_path_factory.mktemp("gguf") / "ds2-mla.gguf")


@pytest.fixture(scope="module")
def mha(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_deepseek2(tmp_path_factory.mktemp("gguf") / "ds2-mha.gguf", mla=False)


def _dep(model: Path, **flags: object) -> Deployment:
    return Deployment(name="d", model=str(model), engine="llamacpp", llamacpp=LlamaCppFlags(**flags),  # type: ignore[arg-type]
                      gpus=(0,))


def _gpu(free_mib: int = 80000) -> Machine:
    return Machine(gpus=(Gpu(0, "GPU-a", "NVIDIA H100", memory_total_mib=81559, memory_free_mib=free_mib),),
                   source="test")


def test_mla_gguf_is_read_as_mla(mla: Path, mha: Path):
    spec = load_gguf(mla)
    assert spec.is_mla and (spec.head_dim_k_mla, spec.head_dim_v_mla) == (64, 32)
    assert spec.n_head_kv_per_layer == (1, 1, 1, 1) and (spec.head_dim_k, spec.head_dim_v) == (96, 64)
    assert not load_gguf(mha).is_mla


def test_mla_cache_keeps_the_latent_only_no_v_tensor(mla: Path):
    spec = load_gguf(mla)
    flags = LlamaCppFlags(ctx_size=8192)
    # one K row of kv_lora_rank + rope = 96 f16 values per layer per token; no V (has_v = !is_mla)
    assert kv_bytes_per_token(spec, flags) == 4 * 96 * 2
    ctx = context_size(spec, flags)
    assert kv_total_bytes(spec, flags, ctx) == 4 * 96 * 2 * ctx.tokens


def test_pre_mla_gguf_caches_k_and_v_of_every_head(mha: Path):
    spec = load_gguf(mha)
    assert kv_bytes_per_token(spec, LlamaCppFlags(ctx_size=8192)) == 4 * 4 * (64 + 32) * 2


def test_deepseek_v3_shape_long_context_is_no_false_fail(tmp_path: Path):
    """DeepSeek-V3's cache shape (kv_lora_rank 512 + 64 rope dims, 61 layers) at its full 163,840 tokens:
    576 x 2 B x 61 = 70,272 B/token, 10.7 GiB; with a V row beside it 20.3 GiB, which does not fit the
    16 GiB this GPU has left."""
    gguf = write_tiny_deepseek2(tmp_path / "v3.gguf", n_layer=61, n_embd=64, n_head=2, kv_lora_rank=512, qk_rope=64,
                                qk_nope=128, v_head=128, n_ff=64)
    spec = load_gguf(gguf)
    assert kv_bytes_per_token(spec, LlamaCppFlags()) == 576 * 2 * 61
    f = check_kv_pool(subject(_dep(gguf, ctx_size=163840, parallel=1, fit=False), _gpu(16 * 1024), spec))
    assert f.status is not Status.FAIL, f.message


def test_mla_refuses_different_k_and_v_cache_types_in_llamacpps_words(mla: Path):
    spec = load_gguf(mla)
    f = check_heads(subject(_dep(mla, cache_type_k="q8_0"), _gpu(), spec))
    assert f.status is Status.FAIL
    assert "model does not support different K (q8_0) and V (f16) cache types" in f.message
    same = check_heads(subject(_dep(mla, cache_type_k="q8_0", cache_type_v="q8_0"), _gpu(), spec))
    assert same.status is Status.PASS


def test_pre_mla_gguf_takes_different_cache_types(mha: Path):
    spec = load_gguf(mha)
    assert check_heads(subject(_dep(mha, cache_type_k="q8_0"), _gpu(), spec)).status is Status.PASS
