"""Weight bytes: measured from a checkpoint's safetensors metadata, or computed from the config.

Measuring never reads tensor data: ``model.safetensors.index.json`` carries ``metadata.total_size``,
and each ``*.safetensors`` file starts with an 8-byte little-endian header length and a JSON header
listing every tensor's dtype and shape. So a 700 GB checkpoint is sized in milliseconds.

Computing walks the architecture the way the engines instantiate it: embeddings (+ an untied
lm_head), per layer attention (q/k/v/o with GQA, or MLA's low-rank projections), the MLP (dense,
or routed experts + shared experts + router), norms, and a vision tower for multimodal models.
Quantization applies to the linear layers it converts; embeddings, lm_head, norms and the router
stay in the model dtype unless the method says otherwise. The same walk, with a ``Sharding``,
gives the bytes one rank holds (``memory.weight_bytes_per_rank``).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.files import not_regular, open_regular
from pytest_gpulayout.model.spec import ModelSpec

#: safetensors dtype names -> bytes per element (``safetensors`` spec; F8_E8M0 is the MX scale type).
SAFETENSORS_DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
    "U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "E8M0": 1,
}

#: A header larger than this is not a safetensors header (the format caps it at 100 MB).
MAX_HEADER_BYTES = 100 * 1000 * 1000

#: vLLM's ``DEFAULT_VOCAB_PADDING_SIZE``: embeddings and lm_head are padded to a multiple of 64
#: rows before the vocabulary is split over TP (``VocabParallelEmbedding``). SGLang does the same.
VOCAB_PADDING = 64

#: Families whose MLP is not gated (two matrices, not three).
UNGATED_MLP = frozenset({"gpt2", "gpt_bigcode", "falcon", "opt", "phi", "starcoder2", "gpt_neox", "bloom",
                         "mpt", "gptj", "codegen"})
#: Families with per-head q/k RMSNorm (``q_norm``/``k_norm``).
QK_NORM = frozenset({"qwen3", "qwen3_moe", "gemma3", "gemma3_text", "olmo2", "qwen3_next"})
#: Families with four norms per layer (pre/post attention, pre/post feed-forward).
SANDWICH_NORM = frozenset({"gemma2", "gemma3", "gemma3_text"})


# ---------------------------------------------------------------------------------------------
# Measured
# ---------------------------------------------------------------------------------------------

def safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of one ``.safetensors`` file (reads 8 + header-length bytes, no tensor data)."""
    try:
        with open_regular(path, what="safetensors file") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise InputError("not a safetensors file (shorter than its 8-byte header length)", where=path)
            (n,) = struct.unpack("<Q", head)
            size = path.stat().st_size
            if n <= 0 or n > MAX_HEADER_BYTES or n + 8 > size:
                raise InputError(f"not a safetensors file (header length {n} for a {size}-byte file)",
                                 where=path)
            raw = fh.read(n)
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", where=path) from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InputError("not a safetensors file (its header is not JSON)", where=path) from None
    if not isinstance(header, dict):
        raise InputError("not a safetensors file (its header is not a JSON object)", where=path)
    return header


def safetensors_tensor_bytes(header: dict[str, Any], where: Path | str) -> int:
    """Bytes of every tensor listed in a header: element size x product of the shape.

    Unknown dtypes (packed FP4 ...) fall back to the header's own ``data_offsets`` span.
    """
    total = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict):
            raise InputError(f"tensor {name!r} has no dtype/shape entry", where=where)
        dtype, shape = info.get("dtype"), info.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise InputError(f"tensor {name!r} has a bad shape {shape!r}", where=where)
        if dtype in SAFETENSORS_DTYPE_BYTES:
            total += SAFETENSORS_DTYPE_BYTES[dtype] * math.prod(shape)
            continue
        offsets = info.get("data_offsets")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            raise InputError(f"tensor {name!r} has unknown dtype {dtype!r} and no data_offsets", where=where)
        total += offsets[1] - offsets[0]
    return total


def _index_total(path: Path) -> int | None:
    try:
        with open_regular(path, what="checkpoint index") as fh:
            data = json.loads(fh.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    total = data.get("metadata", {}).get("total_size") if isinstance(data, dict) else None
    if isinstance(total, (int, float)) and not isinstance(total, bool) and total > 0:
        return int(total)
    return None


def measured_weight_bytes(model_dir: Path) -> int | None:
    """On-disk weight bytes of a checkpoint directory, or ``None`` where it holds no weights.

    ``model.safetensors.index.json``'s ``metadata.total_size`` first; else the sum over the
    ``*.safetensors`` headers (Mistral repos ship a ``consolidated.safetensors`` copy beside the
    ``model-*.safetensors`` shards: it is skipped when both exist); else the PyTorch index's total.
    """
    if not model_dir.is_dir():
        return None
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        kind = not_regular(model_dir / index)
        if kind is not None:  # one that cannot be read is not one to skip: the weights would be guessed
            raise InputError(f"the checkpoint index is not a regular file: {kind}", where=model_dir / index)
    for index in ("model.safetensors.index.json",):
        p = model_dir / index
        if p.is_file():
            total = _index_total(p)
            if total:
                return total
    files = sorted(model_dir.glob("*.safetensors"))
    shards = [f for f in files if not f.name.startswith("consolidated")]
    files = shards or files
    if files:
        return sum(safetensors_tensor_bytes(safetensors_header(f), f) for f in files)
    p = model_dir / "pytorch_model.bin.index.json"
    return _index_total(p) if p.is_file() else None


# ---------------------------------------------------------------------------------------------
# Computed
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sharding:
    """How one rank's share of a layer is cut.

    ``tp`` splits attention heads, dense MLP width and (padded) vocabulary; ``expert_tp`` splits each
    routed expert's intermediate width; ``ep`` spreads whole experts (a rank holds ``ceil(E / ep)``,
    the most loaded one, as vLLM's ``determine_expert_map`` gives ranks ``< E % ep`` one extra).
    ``tp=1, expert_tp=1, ep=1`` is the whole model.
    """

    tp: int = 1
    expert_tp: int = 1
    ep: int = 1
    #: ranks the attention projections (and, with ``embed_on_attention``, the input embedding) are split over
    #: where it is not ``tp``: SGLang's attention DP inside TP (``attn_tp_size = tp // attn_dp_size``,
    #: ``layers/dp_attention.py``); 0: ``tp``
    attn_tp: int = 0
    #: the input embedding is split over the attention TP group (SGLang models that build it with
    #: ``use_attn_tp_group=is_dp_attention_enabled()``: deepseek_v2, qwen2, qwen2_moe, glm4, gpt_oss, ...)
    embed_on_attention: bool = False
    #: the lm_head is split over the attention TP group (SGLang's ``--enable-dp-lm-head``:
    #: ``ParallelLMHead(use_attn_tp_group=enable_dp_lm_head)``), not over ``tp``
    lm_head_on_attention: bool = False

    @property
    def attention(self) -> int:
        """Ranks the attention heads are split over."""
        return self.attn_tp or self.tp

    @property
    def whole(self) -> bool:
        return self.tp == 1 and self.expert_tp == 1 and self.ep == 1


class Precision:
    """Bytes per parameter by kind of weight.

    ``count_params=True`` gives 1 for everything (a parameter count). ``dtype_bytes`` is the dtype the
    unconverted weights are held in: the checkpoint's for on-disk size, 2 for what an engine loads
    (vLLM and SGLang run float32 checkpoints in bfloat16 by default). ``expert_scale`` multiplies
    quantized expert bytes where an engine re-lays them out (vLLM's mxfp4 kernels).
    """

    def __init__(self, model: ModelSpec, *, count_params: bool = False, dtype_bytes: int | None = None,
                 expert_scale: float = 1.0):
        self.count = count_params
        self.expert_scale = expert_scale   # engine-specific re-layout of converted experts
        self.dense = float(dtype_bytes if dtype_bytes is not None else model.dtype_bytes)
        q = model.quantization
        self.quant = q.effective_bits / 8 if q is not None else None
        self.targets = q.targets if q is not None else ""
        self.skip_attention = bool(q and q.skip_attention)
        self.quant_lm_head = bool(q and q.lm_head)

    def __call__(self, kind: str) -> float:
        if self.count:
            return 1.0
        if self.quant is None:
            return self.dense
        if kind == "experts" and self.targets in ("linear", "experts"):
            return self.quant * self.expert_scale
        if self.targets == "linear":
            if kind in ("mlp", "shared") or (kind == "attn" and not self.skip_attention):
                return self.quant
            if kind == "lm_head" and self.quant_lm_head:
                return self.quant
        return self.dense


def padded_vocab(vocab: int) -> int:
    return -(-vocab // VOCAB_PADDING) * VOCAB_PADDING


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def embedding_bytes(model: ModelSpec, *, sharding: Sharding, precision: Precision) -> float:
    """One rank's input embedding: whole at TP=1, else ``ceil(pad64(vocab) / tp)`` rows."""
    ranks = sharding.attention if sharding.embed_on_attention else sharding.tp
    rows = model.vocab_size if sharding.whole else _ceil_div(padded_vocab(model.vocab_size), ranks)
    return rows * model.hidden_size * precision("embed")


def lm_head_bytes(model: ModelSpec, *, sharding: Sharding, precision: Precision) -> float:
    """One rank's output projection, split like the embedding (``ParallelLMHead``): over ``tp``, or over the
    attention TP group with ``lm_head_on_attention``."""
    ranks = sharding.attention if sharding.lm_head_on_attention else sharding.tp
    rows = model.vocab_size if sharding.whole else _ceil_div(padded_vocab(model.vocab_size), ranks)
    return rows * model.hidden_size * precision("lm_head")


def attention_bytes(model: ModelSpec, *, sharding: Sharding, precision: Precision) -> float:
    """One rank's attention projections for one layer (norms excluded).

    GQA: q and o hold ``heads / tp`` heads; k and v hold ``max(1, kv_heads // tp)`` heads, so KV
    projections are replicated once ``tp > kv_heads`` (vLLM/SGLang ``QKVParallelLinear``).
    MLA (DeepSeek): ``q_a_proj`` (or ``q_proj``) and ``kv_a_proj_with_mqa`` are replicated
    (``ReplicatedLinear``); ``q_b_proj``, ``kv_b_proj`` and ``o_proj`` are split by heads.
    """
    h, tp = model.hidden_size, sharding.attention
    heads = _ceil_div(model.num_attention_heads, tp)
    p_attn = p_rep = precision("attn")
    if model.has_mla_weights:
        rope = model.qk_rope_head_dim or 0
        nope = model.qk_nope_head_dim or 0
        v = model.v_head_dim or nope
        lora = model.kv_lora_rank or 0
        q_dim = nope + rope
        if model.q_lora_rank:
            q = h * model.q_lora_rank * p_rep + model.q_lora_rank * heads * q_dim * p_attn
        else:
            q = h * heads * q_dim * p_attn
        kv = h * (lora + rope) * p_rep + lora * heads * (nope + v) * p_attn
        o = heads * v * h * p_attn
        return q + kv + o
    hd, hd_v = model.head_dim, model.head_dim_v
    kv_heads = model.num_key_value_heads if sharding.whole or tp == 1 else max(1, model.num_key_value_heads // tp)
    weights = (h * heads * hd + h * kv_heads * (hd + hd_v) + heads * hd_v * h) * p_attn
    bias = 0.0
    if model.attention_bias:
        bias = (heads * hd + kv_heads * (hd + hd_v)) * precision("bias")
        if model.model_type not in ("qwen2", "qwen2_moe"):   # Qwen2: q/k/v bias only
            bias += h * precision("bias")
    if model.model_type == "gpt_oss":   # attention sinks, one per head
        bias += heads * precision("bias")
    return weights + bias


def mlp_bytes(model: ModelSpec, layer: int, *, sharding: Sharding, precision: Precision) -> float:
    """One rank's MLP for one layer: dense, or routed experts + shared experts + router.

    Routed experts: ``ceil(E / ep)`` experts, each ``3 x hidden x moe_intermediate / expert_tp``
    (gate, up, down); gpt-oss adds expert biases. Shared experts are an ordinary TP-split MLP
    (Qwen-MoE adds a ``hidden -> 1`` gate). The router (``hidden x E``) is replicated and kept in the
    model dtype (``ReplicatedLinear`` without a quant config in vLLM).
    """
    h = model.hidden_size
    mats = 2 if model.model_type in UNGATED_MLP else 3
    if not model.is_moe_layer(layer):
        return mats * h * _ceil_div(model.intermediate_size, sharding.tp) * precision("mlp")
    experts = model.num_experts or 0
    inter = model.moe_intermediate_size or model.intermediate_size
    local = experts if sharding.whole else _ceil_div(experts, sharding.ep)
    per_expert = mats * h * _ceil_div(inter, sharding.expert_tp)
    total = local * per_expert * precision("experts")
    if model.model_type == "gpt_oss":   # gate_up and down biases
        total += local * (2 * _ceil_div(inter, sharding.expert_tp) + h) * precision("bias")
    total += h * experts * precision("router")
    if model.model_type in ("gpt_oss", "deepseek_v3", "deepseek_v32", "kimi_k2"):  # router / correction bias
        total += experts * precision("bias")
    if model.shared_expert_intermediate_size:
        shared = _ceil_div(model.shared_expert_intermediate_size, sharding.tp)
        total += mats * h * shared * precision("shared")
        if model.model_type in ("qwen2_moe", "qwen3_next"):
            total += h * precision("router")
    return total


def norm_bytes(model: ModelSpec, *, precision: Precision) -> float:
    """Per-layer norms (replicated on every rank)."""
    n = (4 if model.model_type in SANDWICH_NORM else 2) * model.hidden_size
    if model.model_type in QK_NORM:
        n += 2 * model.head_dim
    if model.has_mla_weights:
        n += (model.q_lora_rank or 0) + (model.kv_lora_rank or 0)
    return n * precision("norm")


def layer_bytes(model: ModelSpec, layer: int, *, sharding: Sharding, precision: Precision) -> float:
    """One rank's share of decoder layer ``layer``.

    Linear-attention / Mamba layers (NO_KV) are counted with the same projections as attention:
    an approximation (their in/out projections are of the same order), noted by the memory model.
    """
    return (attention_bytes(model, sharding=sharding, precision=precision)
            + mlp_bytes(model, layer, sharding=sharding, precision=precision)
            + norm_bytes(model, precision=precision))


def vision_bytes(model: ModelSpec, *, sharding: Sharding, precision: Precision) -> float:
    """The vision tower + projector, split by TP like the engines' ViT implementations."""
    return model.vision_params / sharding.tp * precision("vision")


def mtp_bytes(model: ModelSpec, *, precision: Precision) -> float:
    """DeepSeek's multi-token-prediction layers: on disk, not loaded unless speculative decoding."""
    if not model.num_nextn_predict_layers:
        return 0.0
    last = model.num_hidden_layers - 1
    one = layer_bytes(model, last, sharding=Sharding(), precision=precision)
    one += 2 * model.hidden_size * model.hidden_size * precision("mlp")   # eh_proj
    one += 3 * model.hidden_size * precision("norm")
    return model.num_nextn_predict_layers * one


def stage_bytes(model: ModelSpec, layers: range, *, first: bool, last: bool, sharding: Sharding,
                precision: Precision) -> float:
    """What one rank of a pipeline stage holding ``layers`` stores.

    The first stage holds the input embedding and (vLLM instantiates it on every rank) the vision
    tower; the last holds the final norm and lm_head. With tied embeddings and PP > 1 the last
    stage still needs the matrix for its lm_head, so both ends hold a copy (vLLM builds
    ``embed_tokens`` on the last rank when tied; SGLang sends the weights to the last rank).
    """
    total = sum(layer_bytes(model, i, sharding=sharding, precision=precision) for i in layers)
    total += vision_bytes(model, sharding=sharding, precision=precision)
    if first:
        total += embedding_bytes(model, sharding=sharding, precision=precision)
    if last:
        total += model.hidden_size * precision("norm")
        if not model.tie_word_embeddings:
            total += lm_head_bytes(model, sharding=sharding, precision=precision)
        elif not first:
            total += embedding_bytes(model, sharding=sharding, precision=precision)
    return total


def total_params(model: ModelSpec) -> int:
    """Parameters the engine loads (vision tower included, MTP layers excluded)."""
    p = Precision(model, count_params=True)
    return round(stage_bytes(model, range(model.num_hidden_layers), first=True, last=True,
                             sharding=Sharding(), precision=p))


def computed_weight_bytes(model: ModelSpec, *, on_disk: bool = False) -> int:
    """Weight bytes computed from the config.

    ``on_disk=False``: what an engine loads (unconverted weights in 16-bit, MTP layers left out).
    ``on_disk=True``: the checkpoint (its own dtype, MTP layers included): comparable with
    ``measured_weight_bytes``.
    """
    p = Precision(model, dtype_bytes=None if on_disk else model.served_dtype_bytes)
    total = stage_bytes(model, range(model.num_hidden_layers), first=True, last=True, sharding=Sharding(),
                        precision=p)
    if on_disk:
        total += mtp_bytes(model, precision=p)
    return round(total)


def measured_ratio(model: ModelSpec) -> float:
    """Measured / computed on-disk bytes (1.0 when nothing was measured).

    The memory model scales its per-rank split by this, so a real checkpoint's size (extra
    tensors, a different vision tower, scales we do not model) wins over our arithmetic while the
    split over ranks still follows the architecture.
    """
    if not model.weight_bytes_measured:
        return 1.0
    computed = computed_weight_bytes(model, on_disk=True)
    return model.weight_bytes_measured / computed if computed else 1.0


def model_weight_bytes(model: ModelSpec) -> int:
    """Bytes of weights the engine loads for the whole model: measured (scaled to the load dtype)
    where the checkpoint was read, else computed."""
    return round(computed_weight_bytes(model) * measured_ratio(model))
