"""What the checks need to know about a model, read from its ``config.json``.

Only the numbers that decide a layout: head counts (for divisibility and the KV cache), layers (for
PP), the attention pattern (full / sliding / none, for which layers hold KV), MoE experts (for EP),
MLA (a latent KV that TP does not split), dtype and quantization (for weight bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Per-layer attention kinds in ``ModelSpec.layer_types``.
FULL = "full_attention"
SLIDING = "sliding_attention"
NO_KV = "no_kv"  # linear attention / Mamba / other state-space layers: no per-token KV cache

DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "float8": 1, "int8": 1, "uint8": 1,
}


@dataclass(frozen=True)
class Quantization:
    """Weight quantization from ``quantization_config`` (``None`` on the spec for unquantized models)."""

    method: str                      # fp8 | awq | gptq | mxfp4 | compressed-tensors | bitsandbytes ...
    bits: float                      # bits per quantized weight (8, 4, 4.25 for mxfp4 with scales ...)
    group_size: int | None = None    # int4 group size: per-rank input dims must divide by it
    fmt: str | None = None           # e.g. e4m3


@dataclass(frozen=True)
class ModelSpec:
    """A model's shape. Sizes are per whole model; the memory model splits them per rank."""

    name: str
    source: str                           # path of the config.json read, or "catalog:<id>"
    model_type: str
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    num_hidden_layers: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    dtype: str = "bfloat16"
    tie_word_embeddings: bool = False
    max_position_embeddings: int | None = None
    v_head_dim: int | None = None         # None: same as head_dim
    # attention pattern, one entry per layer (FULL / SLIDING / NO_KV)
    layer_types: tuple[str, ...] = ()
    sliding_window: int | None = None
    # multi-head latent attention (DeepSeek-V2/V3, Kimi K2 ...): one latent per token, not split by TP
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    q_lora_rank: int | None = None
    # mixture of experts
    num_experts: int | None = None
    num_experts_per_tok: int | None = None
    num_shared_experts: int = 0
    moe_intermediate_size: int | None = None
    first_k_dense_layers: int = 0         # DeepSeek first_k_dense_replace: leading dense MLP layers
    quantization: Quantization | None = None
    #: bytes of the weights on disk (safetensors headers / index) when known; else computed
    weight_bytes_measured: int | None = None
    architectures: tuple[str, ...] = field(default_factory=tuple)

    @property
    def is_mla(self) -> bool:
        return bool(self.kv_lora_rank)

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """Per-layer attention kind; all full attention where the config has no pattern."""
        return self.layer_types or (FULL,) * self.num_hidden_layers

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES.get(self.dtype.lower(), 2)

    @property
    def head_dim_v(self) -> int:
        return self.v_head_dim if self.v_head_dim is not None else self.head_dim
