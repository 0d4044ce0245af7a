"""KV cache bytes per token per rank: KV heads per rank, MLA latents, KV cache dtypes, PP stages."""

from __future__ import annotations

import math
from collections.abc import Sequence

from packaging.version import Version

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.memory.common import MemoryEngine
from pytest_gpulayout.memory.stages import stage_ranges
from pytest_gpulayout.model.spec import NO_KV, ModelSpec

#: Bytes per KV element for explicit ``kv_cache_dtype`` values (vLLM ``STR_DTYPE_TO_TORCH_DTYPE``
#: maps every fp8 flavour to uint8; ``mxfp8`` adds one scale byte per 32, ``nvfp4`` an fp8 scale per 16).
KV_DTYPE_BYTES: dict[str, float] = {
    "float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "bf16": 2, "float32": 4, "fp32": 4,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "int8": 1,
    "mxfp8": 1 + 1 / 32, "nvfp4": 0.5 + 1 / 16,
}
#: vLLM's DeepSeek-specific MLA cache formats: bytes per token per layer (``state_content_bytes``).
MLA_KV_FORMAT_BYTES = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}
#: fp8 flavours a sparse-MLA model (DeepSeek-V3.2) serves as ``fp8_ds_mla`` on Hopper: vLLM 0.33
#: ``layers/attention/mla_attention.py`` (FLASHMLA_SPARSE turns any quantized dtype into
#: ``fp8_ds_mla``; ``platforms/cuda.py`` on SM 9.x tries FLASH_ATTN_MLA_SPARSE, bf16 only, then
#: FLASHMLA_SPARSE)
SPARSE_MLA_FP8 = frozenset({"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"})
#: DeepSeek-V3.2's indexer quantizes its key in blocks of 128 with one 4-byte fp32 scale each
INDEXER_QUANT_BLOCK = 128


def indexer_bytes_per_token(model: ModelSpec) -> int:
    """The indexer key cache DeepSeek-V3.2 keeps per token per layer beside the MLA latent: uint8,
    ``index_head_dim + index_head_dim // 128 * 4`` bytes (vLLM 0.33 ``models/deepseek_v2.py``
    ``DeepseekV32IndexerCache(head_dim=..., dtype=torch.uint8)``: 132 B), whatever the KV dtype, on
    every rank (not split by TP). 0 for models without the indexer."""
    d = model.index_head_dim
    if not model.is_mla or d is None:
        return 0
    return d + d // INDEXER_QUANT_BLOCK * 4



# ---------------------------------------------------------------------------------------------
# KV bytes
# ---------------------------------------------------------------------------------------------

def kv_heads_per_rank(model: ModelSpec, tp: int) -> int:
    """KV heads one rank stores: ``max(1, kv_heads // tp)`` (vLLM ``ModelConfig.get_num_kv_heads``,
    SGLang ``ModelConfig.get_num_kv_heads``): below one head per rank the heads are replicated.
    MLA caches one latent per token: 1."""
    if model.is_mla:
        return 1
    return max(1, model.num_key_value_heads // tp)


def served_kv_cache_dtype(model: ModelSpec, kv_cache_dtype: str = "auto") -> str:
    """The KV cache dtype the engine serves ``model`` in for the line's ``kv_cache_dtype``: the one the engine picks
    itself (``ModelSpec.served_kv_cache_dtype``, set by its ``as_served``), else the line's, lower-cased."""
    return (model.served_kv_cache_dtype or kv_cache_dtype or "auto").lower()


def kv_element_bytes(model: ModelSpec, kv_cache_dtype: str = "auto") -> float:
    """Bytes per cached K/V element.

    ``auto`` is the model's activation dtype: 2 bytes for bf16/fp16 checkpoints, and also for fp32
    ones (both engines run those in bf16/fp16) and for fp8-*weight* checkpoints (activations stay
    16-bit); 4 where the engine serves the model in float32 (``ModelSpec.served_dtype``: vLLM's
    float32 fallback). Only a checkpoint that declares a KV cache scheme (compressed-tensors
    ``kv_cache_scheme``, ModelOpt ``kv_cache_quant_algo: FP8``) makes ``auto`` 1 byte. The dtype the engine
    serves the model's cache in (``ModelSpec.served_kv_cache_dtype``) replaces the line's.
    """
    d = served_kv_cache_dtype(model, kv_cache_dtype)
    if d == "auto":
        q = model.quantization
        if q is not None and q.kv_cache_dtype:
            return KV_DTYPE_BYTES.get(q.kv_cache_dtype, 1)
        return float(model.served_dtype_bytes)
    if d in KV_DTYPE_BYTES:
        return KV_DTYPE_BYTES[d]
    if d in MLA_KV_FORMAT_BYTES:
        if not model.is_mla:
            raise InputError(f"{d} is a cache format for MLA models (DeepSeek); {model.name} has no MLA",
                             key="kv_cache_dtype")
        return 1.0
    raise InputError(f"unknown kv_cache_dtype {kv_cache_dtype!r} (auto, bfloat16, float16, fp8, fp8_e4m3, "
                     f"fp8_e5m2, ...)", key="kv_cache_dtype")


def kv_layer_bytes_per_token(model: ModelSpec, *, tp: int, kv_cache_dtype: str = "auto") -> int:
    """Bytes one attention layer caches per token on one rank.

    * MHA/GQA (vLLM ``AttentionSpec.page_size_bytes`` / block; SGLang ``_compute_cell_size``):
      ``kv_heads_per_rank x (head_dim + v_head_dim) x bytes``.
    * MLA (vLLM ``MLAAttention.get_kv_cache_spec``; SGLang ``calculate_mla_kv_cache_dim``):
      ``(kv_lora_rank + qk_rope_head_dim) x bytes`` on every rank, not divided by TP and with no
      separate V. vLLM's ``fp8_ds_mla`` is 656 B and ``nvfp4_ds_mla`` 352 B per layer.
    * Sparse MLA (DeepSeek-V3.2): the latent plus the indexer's 132 B key (``indexer_bytes_per_token``);
      an fp8 ``kv_cache_dtype`` is served as ``fp8_ds_mla`` (656 B, Hopper's FLASHMLA_SPARSE; Blackwell's
      FlashInfer sparse backend keeps a flat 576 B fp8 latent: counted as 656, the safe side); ``auto``
      stays the model dtype (1152 B for bf16).
    """
    d = served_kv_cache_dtype(model, kv_cache_dtype)
    if model.is_mla:
        extra = indexer_bytes_per_token(model)
        if model.is_sparse_mla and d in SPARSE_MLA_FP8:
            d = "fp8_ds_mla"
        if d in MLA_KV_FORMAT_BYTES:
            return MLA_KV_FORMAT_BYTES[d] + extra
        return math.ceil(((model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0))
                         * kv_element_bytes(model, d)) + extra
    return math.ceil(kv_heads_per_rank(model, tp) * (model.head_dim + model.head_dim_v)
                     * kv_element_bytes(model, d))


def kv_bytes_per_token_by_stage(model: ModelSpec, *, engine: MemoryEngine, tp: int, pp: int = 1,
                                kv_cache_dtype: str = "auto",
                                pp_layer_partition: str | Sequence[int] | None = None,
                                version: Version | str | None = None) -> tuple[int, ...]:
    """Per PP stage: KV bytes per token on each rank of that stage (its KV layers x per-layer bytes).

    Layers without a per-token cache (``NO_KV``: linear attention, Mamba) count 0. Sliding-window
    layers count as full: that is SGLang's cell size (it disables its hybrid-SWA pool for Gemma),
    and the figure vLLM's hybrid allocator reports tokens by (``num_blocks // groups x block``);
    what a *request* needs in those layers is less, which ``PoolPrediction.max_concurrency`` models.
    """
    per_layer = kv_layer_bytes_per_token(model, tp=tp, kv_cache_dtype=kv_cache_dtype)
    kinds = model.layer_kinds
    return tuple(per_layer * sum(1 for i in r if kinds[i] != NO_KV)
                 for r in stage_ranges(model.num_hidden_layers, pp, engine, partition=pp_layer_partition,
                                       version=version))


def kv_bytes_per_token_per_rank(model: ModelSpec, *, engine: MemoryEngine, tp: int, pp: int = 1,
                                kv_cache_dtype: str = "auto",
                                pp_layer_partition: str | Sequence[int] | None = None) -> int:
    """KV bytes per token on the most loaded rank (the PP stage with the most KV layers).

    Qwen3-8B, TP=2, bf16: 36 layers x 4 heads x 256 x 2 B = 73,728. DeepSeek-V3 at any TP:
    61 x 576 x 2 B = 70,272.
    """
    return max(kv_bytes_per_token_by_stage(model, engine=engine, tp=tp, pp=pp, kv_cache_dtype=kv_cache_dtype,
                                           pp_layer_partition=pp_layer_partition))
