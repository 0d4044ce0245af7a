"""What the checks need to know about a model: the ``ModelSpec`` and its ``Quantization``.

Only the numbers that decide a layout: head counts (for divisibility and the KV cache), layers (for
PP), the attention pattern (full / sliding / chunked / none, for which layers hold KV), MoE experts
(for EP), MLA (a latent KV that TP does not split), dtype and quantization (for weight bytes).
Parsing a ``config.json`` into one is ``model/config.py``; finding and reading the file (or a
catalog entry, or a GGUF) is ``model/load.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_gpulayout.model.families import (
    LinearState,
)

#: Per-layer attention kinds in ``ModelSpec.layer_types``.
FULL = "full_attention"
SLIDING = "sliding_attention"
#: chunked local attention (Llama 4's RoPE layers): attends within its ``attention_chunk_size``-token
#: chunk; vLLM >= 0.21 gives it a ``ChunkedLocalAttentionSpec`` of its own
CHUNKED = "chunked_attention"
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
    #: extra bits per weight for scales / zero points stored beside the packed weights
    #: (AWQ/GPTQ g128: (16-bit scale + 4-bit zero) / 128; fp8 128x128 blocks: 32 / 16384)
    overhead_bits: float = 0.0
    #: which weights the method converts: "linear" (every linear layer: attention, MLP, experts) or
    #: "experts" (routed experts only: gpt-oss's mxfp4 keeps attention, router, embeddings in bf16)
    targets: str = "linear"
    skip_attention: bool = False     # the ignore list keeps attention projections in the model dtype
    lm_head: bool = False            # the lm_head is quantized too (GPTQ ``lm_head: true``)
    kv_cache_dtype: str | None = None  # "fp8" when the checkpoint carries a KV cache scheme
    #: block-FP8 ``[block_n, block_k]`` (``quantization_config.weight_block_size``, or a
    #: compressed-tensors ``strategy: block`` scheme's ``block_structure``)
    weight_block_size: tuple[int, ...] | None = None
    weight_type: str | None = None   # compressed-tensors ``weights.type``: "int" or "float"
    strategy: str | None = None      # compressed-tensors ``weights.strategy``: group, channel, block ...
    act_order: bool = False          # GPTQ ``desc_act`` / compressed-tensors ``actorder: group``
    activations_quantized: bool = False  # W8A8 / W4A8 schemes quantize activations too

    @property
    def is_int_grouped(self) -> bool:
        """Integer weights with per-group scales, run by vLLM's WNA16 kernels (Marlin, Machete ...):
        AWQ, GPTQ, and compressed-tensors ``pack-quantized`` int4/int8 weight-only schemes."""
        if not self.group_size or self.group_size <= 0:
            return False
        if self.method in ("awq", "gptq"):
            return True
        return (self.method == "compressed-tensors" and self.weight_type == "int"
                and self.strategy in ("group", None) and not self.activations_quantized)

    @property
    def effective_bits(self) -> float:
        """Storage bits per converted weight, scales included."""
        return self.bits + self.overhead_bits


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
    # -- added by the loader (helper B); all optional so hand-built specs stay short -------------
    mlp_only_layers: tuple[int, ...] = ()  # Qwen-MoE: layers that keep a dense MLP
    decoder_sparse_step: int = 1          # Qwen-MoE: every n-th layer is sparse
    moe_layer_freq: int = 1               # DeepSeek: every n-th layer after the dense ones is MoE
    shared_expert_intermediate_size: int = 0  # width of the always-on shared-expert MLP (0: none)
    attention_bias: bool = False          # q/k/v(/o) projections carry biases
    num_nextn_predict_layers: int = 0     # DeepSeek MTP layers: on disk, loaded only for speculation
    vision_params: int = 0                # vision tower + projector parameters (estimated from vision_config)
    vision_hidden_size: int | None = None
    vision_num_layers: int | None = None
    #: ``(num_hidden_layers, hidden_size)`` as the vision config *object* answers them where that differs from
    #: the tower's shape: the Qwen-VL configs (transformers 4.57.1-5.19.0 ``Qwen2VLVisionConfig``,
    #: ``Qwen2_5_VLVisionConfig``, ``Qwen3VLVisionConfig``) define no ``num_hidden_layers`` (their depth is
    #: ``depth``), and Qwen2-VL's ``hidden_size`` is the merger's output. None: the tower's own shape.
    vision_config_shape: tuple[int | None, int | None] | None = None
    notes: tuple[str, ...] = ()           # what the loader assumed (defaults filled, unknown keys ...)
    # -- model families (see ``model/families.py``) -------------------------------------------
    #: Llama 4: tokens per local-attention chunk of the CHUNKED layers (None: no chunked layer)
    attention_chunk_size: int | None = None
    #: gpt-oss: one learned attention-sink logit per head (vLLM needs a sink-capable backend)
    attention_sinks: bool = False
    #: hybrid models: shapes of the fixed per-request state every NO_KV layer keeps
    linear_state: LinearState | None = None
    #: keys the config left out that were filled from transformers' defaults for ``model_type``
    defaults_filled: tuple[str, ...] = ()
    #: DeepSeek-V3.2's sparse-attention indexer (``index_topk`` in the config): the width of the key it
    #: caches per token per layer beside the MLA latent (None: no indexer)
    index_head_dim: int | None = None
    #: the config's own top-level ``model_type`` where it differs from ``model_type`` (the text model's):
    #: ``gemma3`` for Gemma 3's multimodal checkpoints, whose text model is ``gemma3_text``. vLLM's dtype
    #: rules read the top-level one (``config/model.py`` ``_get_and_verify_dtype``: ``config.model_type``)
    config_model_type: str = ""
    #: the dtype the engine serves the weights and activations in when the engine's dtype resolution says so
    #: (vLLM's ``--dtype auto`` falls back to ``float32`` for a float16-refusing model on a GPU without
    #: bfloat16: ``engines/vllm/dtype.py``); None: the checkpoint's dtype, 16-bit at most (both engines run
    #: float32 checkpoints in bfloat16 / float16 by default)
    served_dtype: str | None = None
    #: the ``config.json`` this spec was read from, as JSON text (sorted keys; "" for a hand-built spec or a GGUF):
    #: what an engine's own config overrides (vLLM ``--hf-overrides``) are applied to before the spec is derived
    #: again (``model/overrides.py``)
    config_json: str = field(default="", repr=False, compare=False)
    #: the engine serves this latent-attention model with full multi-head attention (vLLM ``VLLM_MLA_DISABLE=1``:
    #: ``ModelConfig.use_mla`` False); the latent projections stay in the weights, the cache holds every head's K
    #: and V, V padded to the query/key width (vLLM ``models/deepseek_v2.py DeepseekV2Attention``)
    mla_disabled: bool = False
    #: the KV cache dtype the engine serves this model in whatever the line's ``--kv-cache-dtype`` resolves to, and
    #: why in words (SGLang's DeepSeek DSA hook: ``fp8_e4m3`` on SM 10.x+, ``engines/sglang/served.py``); "": the
    #: line's dtype (``auto``: the model's)
    served_kv_cache_dtype: str = ""
    served_kv_cache_why: str = ""

    @property
    def hf_model_type(self) -> str:
        """The top-level ``model_type`` of the config (``model_type`` when the config has no wrapper)."""
        return self.config_model_type or self.model_type

    @property
    def served_dtype_bytes(self) -> int:
        """Bytes per weight / activation element as the engine serves the model (``served_dtype``, else the
        checkpoint's dtype capped at 2 bytes)."""
        if self.served_dtype is not None:
            return DTYPE_BYTES.get(self.served_dtype.lower(), 2)
        return min(self.dtype_bytes, 2)

    @property
    def is_sparse_mla(self) -> bool:
        """DeepSeek-V3.2-style sparse MLA: an indexer picks the tokens each query attends to."""
        return self.is_mla and self.index_head_dim is not None

    @property
    def is_mla(self) -> bool:
        """The engine caches one latent per token (MLA), unless it serves the model without it (``mla_disabled``)."""
        return bool(self.kv_lora_rank) and not self.mla_disabled

    @property
    def has_mla_weights(self) -> bool:
        """The checkpoint's attention is latent (its projections), whether or not the engine caches the latent."""
        return bool(self.kv_lora_rank)

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)

    @property
    def is_multimodal(self) -> bool:
        return self.vision_params > 0

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """Per-layer attention kind; all full attention where the config has no pattern."""
        return self.layer_types or (FULL,) * self.num_hidden_layers

    @property
    def sliding_layers(self) -> int:
        """Layers with a sliding-window attention (``sliding_window`` tokens); chunked-local layers
        are counted by ``chunked_layers``."""
        return sum(1 for k in self.layer_kinds if k == SLIDING)

    @property
    def chunked_layers(self) -> int:
        """Layers with chunked local attention (``attention_chunk_size`` tokens, Llama 4)."""
        return sum(1 for k in self.layer_kinds if k == CHUNKED)

    @property
    def state_layers(self) -> int:
        """Layers that keep a fixed per-request state instead of a per-token KV cache."""
        return sum(1 for k in self.layer_kinds if k == NO_KV)

    def layer_state_bytes(self, tp: int = 1, dtype_bytes: int | None = None) -> tuple[int, ...]:
        """Per layer: bytes of fixed per-request state one rank keeps (0 for attention layers).

        vLLM allocates this once per running request (``MambaSpec``), SGLang once per slot of its
        Mamba/GDN pool; it does not grow with the context. ``dtype_bytes`` defaults to the model
        dtype (the engines' "auto" state dtype).
        """
        if self.linear_state is None:
            return (0,) * self.num_hidden_layers
        one = self.linear_state.bytes_per_rank(tp, dtype_bytes or self.served_dtype_bytes)
        return tuple(one if k == NO_KV else 0 for k in self.layer_kinds)

    @property
    def kv_layers(self) -> int:
        """Layers that keep a per-token KV cache (full or sliding attention)."""
        return sum(1 for k in self.layer_kinds if k != NO_KV)

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES.get(self.dtype.lower(), 2)

    @property
    def head_dim_v(self) -> int:
        if self.mla_disabled:  # vLLM DeepseekV2Attention pads V to qk_head_dim before it caches it
            return self.head_dim
        return self.v_head_dim if self.v_head_dim is not None else self.head_dim

    def is_moe_layer(self, layer: int) -> bool:
        """Does ``layer`` (0-based) route through experts? Mirrors the model code of each family:

        DeepSeek: ``layer >= first_k_dense_replace and layer % moe_layer_freq == 0``;
        Qwen-MoE: ``layer not in mlp_only_layers and (layer + 1) % decoder_sparse_step == 0``;
        Mixtral / gpt-oss: every layer.
        """
        if not self.is_moe:
            return False
        if layer < self.first_k_dense_layers or layer in self.mlp_only_layers:
            return False
        if self.moe_layer_freq > 1 and layer % self.moe_layer_freq:
            return False
        return not (self.decoder_sparse_step > 1 and (layer + 1) % self.decoder_sparse_step)


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------

#: Multimodal wrappers keep the language model's shape here (``config.get_text_config()``).
