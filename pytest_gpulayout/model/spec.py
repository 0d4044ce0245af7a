"""What the checks need to know about a model, read from its ``config.json``.

Only the numbers that decide a layout: head counts (for divisibility and the KV cache), layers (for
PP), the attention pattern (full / sliding / none, for which layers hold KV), MoE experts (for EP),
MLA (a latent KV that TP does not split), dtype and quantization (for weight bytes).

``load_model`` reads a model the way the engines do: vLLM and SGLang both take every shape number
from the *text* config (``config.get_text_config()``: a multimodal model's ``text_config``), fill
what the file leaves out from the transformers config class defaults, and read the KV head count
from the first of several alias keys. We mirror that, because a spec that differs from what the
engine reads would predict a different KV pool than the one the engine allocates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.suggest import close_matches
from pytest_gpulayout.model.families import (
    TYPE_DEFAULTS,
    LinearState,
    linear_state,
    llama4_global_layers,
    text_model_type,
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

    @property
    def is_mla(self) -> bool:
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
        one = self.linear_state.bytes_per_rank(tp, dtype_bytes or min(self.dtype_bytes, 2))
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
TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config", "thinker_config")

#: vLLM's ``_get_and_verify_max_len`` keys (``vllm/config/model.py``): the smallest present wins.
MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")

#: vLLM's ``CONFIG_FIELD_ALIASES`` for the KV head count, in the order it tries them.
KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num",
                "num_attention_groups")

_LAYER_KIND_WORDS = {
    "full_attention": FULL, "attention": FULL, "global": FULL, "global_attention": FULL, "full": FULL,
    "sliding_attention": SLIDING, "sliding": SLIDING, "local": SLIDING, "local_attention": SLIDING,
    "chunked_attention": CHUNKED, "sliding_window": SLIDING,
    "linear_attention": NO_KV, "mamba": NO_KV, "mamba2": NO_KV, "linear": NO_KV, "gated_deltanet": NO_KV,
    "deltanet": NO_KV, "ssm": NO_KV, "rwkv": NO_KV, "short_conv": NO_KV, "conv": NO_KV,
}

_MISSING = object()


class _Reader:
    """Typed look-ups in one config mapping, with errors that name the file and the key."""

    def __init__(self, cfg: Mapping[str, Any], *, where: str, prefix: str = "",
                 defaults: Mapping[str, Any] | None = None, fallback: Mapping[str, Any] | None = None):
        self.cfg = cfg
        self.where = where
        self.prefix = prefix
        self.defaults = defaults or {}
        self.fallback = fallback or {}
        self.defaulted: list[str] = []

    def key(self, name: str) -> str:
        return self.prefix + name

    def raw(self, *names: str, use_defaults: bool = True, use_fallback: bool = False) -> tuple[str, Any]:
        """(key, value) of the first name present and not null; (names[0], _MISSING) if none is."""
        for n in names:
            v = self.cfg.get(n)
            if v is not None:
                return n, v
        if use_fallback:
            for n in names:
                v = self.fallback.get(n)
                if v is not None:
                    return n, v
        if use_defaults:
            for n in names:   # a key written as null means "none", not "use the default"
                if n in self.defaults and n not in self.cfg:
                    self.defaulted.append(n)
                    return n, self.defaults[n]
        return names[0], _MISSING

    def has(self, name: str) -> bool:
        return name in self.cfg

    def int_(self, *names: str, required: bool = False, minimum: int = 1, use_fallback: bool = False,
             what: str = "") -> int | None:
        k, v = self.raw(*names, use_fallback=use_fallback)
        if v is _MISSING:
            if required:
                need = f" ({what})" if what else ""
                raise InputError(f"missing: the model config must give {names[0]}{need}",
                                 where=self.where, key=self.key(names[0]))
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise InputError(f"must be an integer, got {v!r}", where=self.where, key=self.key(k))
        if v < minimum:
            raise InputError(f"must be >= {minimum}, got {v}", where=self.where, key=self.key(k))
        return v

    def bool_(self, *names: str, default: bool | None = None, use_fallback: bool = False) -> bool | None:
        k, v = self.raw(*names, use_fallback=use_fallback)
        if v is _MISSING:
            return default
        if not isinstance(v, bool):
            raise InputError(f"must be true or false, got {v!r}", where=self.where, key=self.key(k))
        return v

    def str_(self, *names: str, use_fallback: bool = False) -> str | None:
        k, v = self.raw(*names, use_fallback=use_fallback)
        if v is _MISSING:
            return None
        if not isinstance(v, str):
            raise InputError(f"must be a string, got {v!r}", where=self.where, key=self.key(k))
        return v

    def int_list(self, name: str) -> tuple[int, ...]:
        k, v = self.raw(name)
        if v is _MISSING:
            return ()
        if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise InputError(f"must be a list of integers, got {v!r}", where=self.where, key=self.key(k))
        return tuple(v)

    def mapping(self, name: str, *, use_fallback: bool = False) -> Mapping[str, Any] | None:
        k, v = self.raw(name, use_defaults=False, use_fallback=use_fallback)
        if v is _MISSING:
            return None
        if not isinstance(v, Mapping):
            raise InputError(f"must be a mapping, got {type(v).__name__}", where=self.where, key=self.key(k))
        return v


def _read_json(path: Path, *, what: str = "model config") -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot read the {what}: {err.strerror or err}", where=path) from None
    except UnicodeDecodeError:
        raise InputError(f"the {what} is not UTF-8 text (is this a config.json?)", where=path) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})",
                         where=path) from None
    if not isinstance(data, dict):
        raise InputError(f"a model config must be a JSON object, got {type(data).__name__}", where=path)
    return data


def load_model(ref: str, base_dir: Path | None = None) -> ModelSpec:
    """A model spec from a directory holding ``config.json``, a config file, or a catalog id.

    ``ref`` is what a manifest's ``model:`` says. An existing path wins (relative paths resolve
    against ``base_dir``, the manifest's directory, else the working directory), so a local copy of
    a catalog model with edits is read from disk. Otherwise ``ref`` must be a bundled catalog id,
    e.g. ``Qwen/Qwen3-8B`` (case-insensitive; ``Qwen3-8B`` without the organisation also works).
    Anything else is an ``InputError`` with a "did you mean" and a hint to point at a config.json.

    Weights: where the model directory has ``model.safetensors.index.json`` or ``*.safetensors``
    files, their size is read from the index / the headers (never the tensor data) into
    ``weight_bytes_measured``; otherwise the memory model computes them from the config.
    """
    from pytest_gpulayout.model import catalog
    from pytest_gpulayout.model.weights import measured_weight_bytes

    if not isinstance(ref, str) or not ref.strip():
        raise InputError("the model reference is empty: give a directory with config.json, a config.json "
                         "path or a catalog id such as Qwen/Qwen3-8B")
    ref = ref.strip()
    path = Path(ref).expanduser()
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            from pytest_gpulayout.inputs.files import LOOP_MESSAGE, symlink_loop

            if symlink_loop(config):
                raise InputError(LOOP_MESSAGE + ", so the model's config.json cannot be read", where=config)
            raise InputError("no config.json in this directory (a model directory must hold the "
                             "Hugging Face config.json)", where=path)
        return spec_from_config(_read_json(config), name=path.resolve().name, source=str(config),
                                weight_bytes_measured=measured_weight_bytes(path))
    if path.is_file() and path.suffix.lower() == ".gguf":  # llama.cpp: metadata and tensor table
        from pytest_gpulayout.model.gguf import load_gguf

        return load_gguf(path)
    if path.is_file():
        name = path.resolve().parent.name if path.name == "config.json" else path.stem
        return spec_from_config(_read_json(path), name=name or path.stem, source=str(path),
                                weight_bytes_measured=measured_weight_bytes(path.parent))
    entry = catalog.find(ref)
    if entry is not None:
        return spec_from_config(catalog.load_config(entry), name=entry, source=f"catalog:{entry}")
    looks_like_path = (ref.startswith((".", "/", "~")) or ref.endswith(".json")
                       or ref.count("/") > 1 or "\\" in ref or path.is_symlink())
    close = catalog.suggest(ref)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    from pytest_gpulayout.inputs.files import LOOP_MESSAGE, symlink_loop

    if looks_like_path and symlink_loop(path):
        raise InputError(LOOP_MESSAGE + ", so the model's config.json cannot be read", where=str(path))
    if looks_like_path:
        # ``where`` names the path; the text does not repeat it (evaluate.load_models prefixes ``where``
        # to this message when it re-wraps the error under the manifest's key)
        raise InputError(f"no such file or directory.{hint} Point model: at a directory holding "
                         f"config.json or at the config.json itself", where=str(path))
    ids = catalog.catalog_ids()
    raise InputError(f"{ref!r} is neither a path nor a bundled catalog model.{hint} Point model: at a "
                     f"directory holding config.json (or the file itself), or use one of the {len(ids)} "
                     f"catalog ids ({', '.join(ids[:3])}, ...)")


def _text_config(cfg: Mapping[str, Any], where: str) -> tuple[Mapping[str, Any], str]:
    for k in TEXT_CONFIG_KEYS:
        sub = cfg.get(k)
        if sub is None:
            continue
        if not isinstance(sub, Mapping):
            raise InputError(f"must be a mapping, got {type(sub).__name__}", where=where, key=k)
        if k == "thinker_config":   # Qwen-Omni: thinker_config.text_config
            inner = sub.get("text_config")
            if isinstance(inner, Mapping):
                return inner, f"{k}.text_config."
        return sub, f"{k}."
    return cfg, ""


def _derived_max_len(r: _Reader, model_type: str) -> int | None:
    """vLLM's default ``max_model_len`` from the config (``_get_and_verify_max_len``).

    The smallest of the max-length keys present, then RoPE scaling: a ``yarn`` config starts from
    ``original_max_position_embeddings``; every type but ``su``/``longrope``/``llama3`` multiplies by
    ``factor``. Gemma 3 is skipped (its 128K is already scaled), as vLLM does.
    """
    lens = []
    for k in MAX_LEN_KEYS:
        v = r.cfg.get(k, r.defaults.get(k))
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            lens.append(v)
    if not lens:
        return None
    derived = float(min(lens))
    rope = r.cfg.get("rope_scaling") or r.cfg.get("rope_parameters")
    if isinstance(rope, Mapping) and "gemma3" not in model_type:
        rope_type = rope.get("rope_type", rope.get("type"))
        if rope_type not in (None, "su", "longrope", "llama3", "default", "mrope"):
            factor = rope.get("factor", 1.0)
            if rope_type == "yarn" and isinstance(rope.get("original_max_position_embeddings"), int):
                derived = float(rope["original_max_position_embeddings"])
            if isinstance(factor, (int, float)) and not isinstance(factor, bool):
                derived *= factor
    return int(derived)


def _layer_pattern(r: _Reader, model_type: str, n: int,
                   notes: list[str]) -> tuple[tuple[str, ...], int | None, int | None]:
    """Per-layer attention kinds and the sliding window, as the engines read them.

    Order of evidence: an explicit per-layer list (``layer_types`` from gemma3/gpt-oss/qwen3-next,
    ``layers_block_type`` from Jamba, ``attn_type_list`` from MiniMax); Qwen3-Next's
    ``full_attention_interval``; Gemma 3's ``sliding_window_pattern`` (every 6th layer global,
    ``(i + 1) % 6 == 0``) and Gemma 2's alternation; finally a global ``sliding_window``, which
    Qwen2-family configs switch off with ``use_sliding_window: false`` (and switch on only for
    layers ``>= max_window_layers``) and Mistral-family configs apply to every layer.

    Llama 4: ``no_rope_layers[i] == 0`` marks the global (full-attention) layers; the others use
    chunked local attention of ``attention_chunk_size`` tokens (vllm 0.33.0 ``llama4.py``:
    ``use_chunked_local_attn = not self.nope and config.attention_chunk_size``). Returns
    ``(kinds, sliding_window, attention_chunk_size)``; the sizes are ``None`` where no layer uses them.
    """
    window = r.int_("sliding_window", minimum=0) or None   # 0: no window
    chunk = r.int_("attention_chunk_size", minimum=0) or None
    kinds: list[str] | None = None
    k, lt = r.raw("layer_types", use_defaults=False)
    if lt is not _MISSING:
        if not isinstance(lt, list) or not all(isinstance(x, str) for x in lt):
            raise InputError(f"must be a list of strings, got {lt!r}", where=r.where, key=r.key(k))
        if len(lt) < n:
            raise InputError(f"has {len(lt)} entries but num_hidden_layers is {n}", where=r.where,
                             key=r.key(k))
        kinds = []
        unknown = set()
        for word in lt[:n]:
            kind = _LAYER_KIND_WORDS.get(word.lower())
            if kind is None:
                unknown.add(word)
                kind = FULL
            kinds.append(kind)
        if unknown:
            notes.append(f"Unknown layer kinds {sorted(unknown)} in layer_types counted as full attention.")
    elif model_type.startswith("llama4") and chunk:
        nope = r.int_list("no_rope_layers")
        kinds = [FULL if g else CHUNKED for g in llama4_global_layers(nope, n)]
    elif isinstance(r.cfg.get("layers_block_type"), list):
        kinds = [FULL if str(x).lower() == "attention" else NO_KV for x in r.cfg["layers_block_type"][:n]]
    elif isinstance(r.cfg.get("attn_type_list"), list):
        kinds = [FULL if x == 1 else NO_KV for x in r.cfg["attn_type_list"][:n]]
    elif r.int_("full_attention_interval"):
        every = r.int_("full_attention_interval") or 1
        kinds = [FULL if (i + 1) % every == 0 else NO_KV for i in range(n)]
    elif model_type in ("gemma3", "gemma3_text", "cohere2") and window:
        every = r.int_("sliding_window_pattern", "_sliding_window_pattern") or 6
        kinds = [FULL if (i + 1) % every == 0 else SLIDING for i in range(n)]
    elif model_type == "gemma2" and window:
        kinds = [SLIDING if i % 2 == 0 else FULL for i in range(n)]
    elif window:
        use = r.bool_("use_sliding_window")
        if use is False:
            notes.append(f"sliding_window {window} is off (use_sliding_window: false): full attention in "
                         f"every layer, as the engines read it.")
            window = None
        elif use is True:
            first = r.int_("max_window_layers", minimum=0)
            first = n if first is None else first
            kinds = [SLIDING if i >= first else FULL for i in range(n)]
        else:
            kinds = [SLIDING] * n
    if len(kinds or ()) < n and kinds is not None:
        kinds += [FULL] * (n - len(kinds))
    if kinds is None or all(k == FULL for k in kinds):
        return (), None, None
    if SLIDING in kinds and not window:
        notes.append("Sliding layers without a sliding_window size: counted as full attention.")
        kinds = [FULL if k == SLIDING else k for k in kinds]
    if CHUNKED in kinds and not chunk:
        notes.append("Chunked-attention layers without an attention_chunk_size: counted as full attention.")
        kinds = [FULL if k == CHUNKED else k for k in kinds]
    if all(k == FULL for k in kinds):
        return (), None, None
    return (tuple(kinds), (window if SLIDING in kinds else None),
            (chunk if CHUNKED in kinds else None))


_QUANT_ALIASES = {"awq_marlin": "awq", "gptq_marlin": "gptq", "gptq_marlin_24": "gptq", "fbgemm_fp8": "fp8",
                  "compressed_tensors": "compressed-tensors", "modelopt_fp4": "modelopt", "ptpc_fp8": "fp8"}


def _quantization(qc: Mapping[str, Any], where: str, key: str, notes: list[str]) -> Quantization | None:
    """Bits per weight, scale overhead and what a ``quantization_config`` converts.

    Conventions the engines load by: fp8 checkpoints (DeepSeek-V3 style) store 1-byte weights and,
    with ``weight_block_size`` [128, 128], one fp32 scale per block; AWQ/GPTQ pack ``bits`` and keep
    an fp16 scale plus a ``bits``-wide zero point per ``group_size`` inputs; gpt-oss's ``mxfp4`` packs
    4-bit values with one 8-bit scale per 32 (4.25 bits) and only for the routed experts
    (``modules_to_not_convert`` lists attention, router, embeddings, lm_head); compressed-tensors
    reads ``config_groups.*.weights`` and a ``kv_cache_scheme``. Embeddings and lm_head stay in the
    model dtype unless the method says otherwise.
    """
    raw_method = qc.get("quant_method", qc.get("quantization_method"))
    if raw_method is None and ("load_in_4bit" in qc or "load_in_8bit" in qc):
        raw_method = "bitsandbytes"
    if not isinstance(raw_method, str):
        raise InputError(f"missing or not a string: {raw_method!r} (fp8, awq, gptq, mxfp4, "
                         f"compressed-tensors, ...)", where=where, key=f"{key}.quant_method")
    method = _QUANT_ALIASES.get(raw_method.lower(), raw_method.lower())
    ignore = qc.get("ignore") or qc.get("modules_to_not_convert") or qc.get("ignored_layers") or []
    ignore = [str(x) for x in ignore] if isinstance(ignore, list) else []
    skip_attn = any("self_attn" in x or x.endswith(("attn", "attention")) for x in ignore)

    def num(name: str, default: float | None = None) -> float | None:
        v = qc.get(name, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InputError(f"must be a number, got {v!r}", where=where, key=f"{key}.{name}")
        return v

    kv_scheme = qc.get("kv_cache_scheme")
    kv_dtype = None
    if isinstance(kv_scheme, Mapping) and kv_scheme.get("num_bits") == 8:
        kv_dtype = "fp8"
    if str(qc.get("kv_cache_quant_algo", "")).upper().startswith("FP8"):
        kv_dtype = "fp8"

    if method == "fp8":
        block = qc.get("weight_block_size")
        block_t = tuple(int(b) for b in block) if isinstance(block, list) and len(block) == 2 else None
        overhead = 32 / (block_t[0] * block_t[1]) if block_t else 0.0
        return Quantization("fp8", 8, fmt=str(qc.get("fmt", "e4m3")), overhead_bits=overhead,
                            skip_attention=skip_attn, kv_cache_dtype=kv_dtype, weight_block_size=block_t)
    if method in ("awq", "gptq"):
        bits = num("bits", None) or num("w_bit", 4) or 4
        group = num("group_size", None) or num("q_group_size", 128)
        g = int(group) if group is not None else -1
        overhead = (16 + bits) / g if g > 0 else 0.0
        return Quantization(method, float(bits), group_size=g, overhead_bits=overhead,
                            skip_attention=skip_attn, lm_head=bool(qc.get("lm_head", False)),
                            kv_cache_dtype=kv_dtype, weight_type="int",
                            act_order=qc.get("desc_act") is True)
    if method == "mxfp4":
        return Quantization("mxfp4", 4.25, group_size=32, targets="experts", kv_cache_dtype=kv_dtype)
    if method == "compressed-tensors":
        groups = qc.get("config_groups")
        weights = None
        acts: Any = None
        if isinstance(groups, Mapping):
            for g in groups.values():
                if isinstance(g, Mapping) and isinstance(g.get("weights"), Mapping):
                    weights = g["weights"]
                    acts = g.get("input_activations")
                    break
        if weights is None:
            notes.append(f"{key}: compressed-tensors without config_groups weights: weights counted at "
                         f"the model dtype.")
            return Quantization("compressed-tensors", 16, kv_cache_dtype=kv_dtype)
        bits = weights.get("num_bits", 8)
        if isinstance(bits, bool) or not isinstance(bits, int):
            raise InputError(f"must be an integer, got {bits!r}", where=where,
                             key=f"{key}.config_groups.*.weights.num_bits")
        gs = weights.get("group_size")
        strategy = str(weights.get("strategy", ""))
        gsize = int(gs) if isinstance(gs, int) and not isinstance(gs, bool) and gs > 0 else None
        scale_bits = 8 if (bits == 4 and weights.get("type") == "float") else 16   # nvfp4: fp8 scales
        overhead = 0.0
        if gsize and strategy in ("group", "tensor_group", ""):
            overhead = scale_bits / gsize + (0 if weights.get("symmetric", True) else bits / gsize)
        block_s = weights.get("block_structure")
        ct_block = None
        if strategy == "block" and isinstance(block_s, list) and len(block_s) == 2 \
                and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block_s):
            ct_block = (int(block_s[0]), int(block_s[1]))
            overhead = 32 / (ct_block[0] * ct_block[1])
        return Quantization("compressed-tensors", float(bits), group_size=gsize,
                            fmt=str(qc.get("format") or "") or None, overhead_bits=overhead,
                            skip_attention=skip_attn, kv_cache_dtype=kv_dtype, weight_block_size=ct_block,
                            weight_type=str(weights.get("type") or "int"), strategy=strategy or None,
                            act_order=str(weights.get("actorder") or "") == "group",
                            activations_quantized=isinstance(acts, Mapping) and bool(acts))
    if method == "modelopt":
        algo = str(qc.get("quant_algo") or (qc.get("quantization") or {}).get("quant_algo", "")).upper()
        if "FP4" in algo:
            return Quantization("modelopt", 4, group_size=16, fmt="nvfp4", overhead_bits=0.5,
                                kv_cache_dtype=kv_dtype)
        return Quantization("modelopt", 8, fmt="fp8", kv_cache_dtype=kv_dtype)
    if method == "bitsandbytes":
        if qc.get("load_in_8bit"):
            return Quantization("bitsandbytes", 8, kv_cache_dtype=kv_dtype)
        return Quantization("bitsandbytes", 4, group_size=64, overhead_bits=0.5, kv_cache_dtype=kv_dtype)
    bits = qc.get("bits", qc.get("weight_bits"))
    if isinstance(bits, (int, float)) and not isinstance(bits, bool) and bits > 0:
        notes.append(f"{key}.quant_method {raw_method!r} is not modelled: weights counted at {bits} bits.")
        return Quantization(method, float(bits), kv_cache_dtype=kv_dtype)
    notes.append(f"{key}.quant_method {raw_method!r} is not modelled: weights counted at the model dtype "
                 f"(an upper bound).")
    return Quantization(method, 16, kv_cache_dtype=kv_dtype)


def _vision(top: Mapping[str, Any], text_hidden: int, where: str) -> tuple[int, int | None, int | None]:
    """Estimated vision tower + projector parameters from ``vision_config`` (ViT/SigLIP-shaped).

    Per layer ``4 h^2`` attention + ``2 h i`` MLP (+ biases and norms), the patch and position
    embeddings, and a projector into the text hidden size. Gemma 3's SigLIP comes to ~0.42B.
    """
    vc = top.get("vision_config")
    if not isinstance(vc, Mapping) or not vc:
        return 0, None, None

    def geti(*names: str, default: int) -> int:
        for n in names:
            v = vc.get(n)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
        return default

    h = geti("hidden_size", "embed_dim", "width", "hidden_dim", default=1024)
    layers = geti("num_hidden_layers", "depth", "num_layers", default=24)
    inter = geti("intermediate_size", "mlp_dim", default=4 * h)
    patch = geti("patch_size", default=14)
    image = geti("image_size", default=224)
    chans = geti("num_channels", "in_channels", "in_chans", default=3)
    per_layer = 4 * h * h + 4 * h + 2 * h * inter + inter + h + 4 * h
    params = layers * per_layer + chans * patch * patch * h + h + (image // patch) ** 2 * h + 2 * h
    params += h * text_hidden
    return params, h, layers


def spec_from_config(cfg: Mapping[str, Any], *, name: str, source: str,
                     weight_bytes_measured: int | None = None) -> ModelSpec:
    """Build a spec from a parsed ``config.json`` (see ``load_model``). ``source`` names it in errors."""
    where = source
    text, prefix = _text_config(cfg, where)
    model_type = text_model_type(cfg, text)
    defaults = dict(TYPE_DEFAULTS.get(model_type, {}))
    r = _Reader(text, where=where, prefix=prefix, defaults=defaults, fallback=cfg)
    notes: list[str] = []

    heads = r.int_("num_attention_heads", "n_head", "num_heads", "n_heads", required=True,
                   what="attention heads decide TP divisibility and the KV cache")
    assert heads is not None
    layers = r.int_("num_hidden_layers", "n_layer", "num_layers", "n_layers", required=True,
                    what="layers decide the PP split and the KV cache")
    hidden = r.int_("hidden_size", "d_model", "n_embd", "model_dim", required=True,
                    what="the hidden size decides weight bytes")
    assert layers is not None and hidden is not None
    vocab = r.int_("vocab_size", "padded_vocab_size", required=True, use_fallback=True,
                   what="the vocabulary decides embedding bytes")
    assert vocab is not None

    kv_key, kv_raw = r.raw(*KV_HEAD_KEYS)
    kv_heads = r.int_(kv_key) if kv_raw is not _MISSING else None
    if model_type == "falcon" and r.bool_("multi_query") and not r.bool_("new_decoder_architecture"):
        kv_heads = 1
    if kv_heads is None and isinstance(text.get("attn_config"), Mapping):   # DBRX
        v = text["attn_config"].get("kv_n_heads")
        kv_heads = v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None
        kv_key = "attn_config.kv_n_heads"
    if kv_heads is None:
        kv_heads = heads   # no alias key: multi-head attention, one KV head per attention head

    head_dim = r.int_("head_dim", "hidden_size_per_head", minimum=0) or hidden // heads
    v_head_dim = r.int_("v_head_dim")
    kv_lora = r.int_("kv_lora_rank", minimum=0) or None
    q_lora = r.int_("q_lora_rank", minimum=0) or None
    rope_dim = nope_dim = None
    if kv_lora:
        rope_dim = r.int_("qk_rope_head_dim", required=True,
                          what="MLA caches kv_lora_rank + qk_rope_head_dim")
        nope_dim = r.int_("qk_nope_head_dim", minimum=0) or 0
        head_dim = nope_dim + (rope_dim or 0) if nope_dim else head_dim

    if not kv_lora:  # MLA caches one latent per token: engines never read its KV head count
        _check_kv_groups(r, kv_key, heads, kv_heads)

    intermediate = r.int_("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim")
    if intermediate is None:
        intermediate = 4 * hidden
        notes.append(f"intermediate_size missing: assumed 4 x hidden_size = {intermediate}.")

    dtype = (r.str_("torch_dtype", "dtype", use_fallback=True) or "").removeprefix("torch.")
    if not dtype:
        dtype = "bfloat16"
        notes.append("No torch_dtype in the config: bfloat16 assumed.")
    elif dtype.lower() not in MODEL_DTYPES:
        _reject_dtype(r, dtype)
    tie = r.bool_("tie_word_embeddings", use_fallback=True)
    if tie is None:
        tie = bool(defaults.get("tie_word_embeddings", False))

    llama4 = model_type.startswith("llama4")
    if llama4:   # Llama4TextConfig: intermediate_size is the expert width, dense layers use _mlp
        intermediate = r.int_("intermediate_size_mlp") or intermediate
    experts = r.int_("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts",
                     minimum=0) or None
    topk = moe_inter = None
    n_shared = shared_inter = 0
    first_k = 0
    mlp_only: tuple[int, ...] = ()
    sparse_step = moe_freq = 1
    if experts:
        topk = r.int_("num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token")
        moe_inter = r.int_("moe_intermediate_size", "expert_intermediate_size") or intermediate
        n_shared = r.int_("n_shared_experts", "num_shared_experts", minimum=0) or 0
        shared_inter = r.int_("shared_expert_intermediate_size", minimum=0) or n_shared * moe_inter
        if shared_inter and not n_shared:
            n_shared = 1
        first_k = r.int_("first_k_dense_replace", minimum=0) or 0
        mlp_only = r.int_list("mlp_only_layers")
        sparse_step = r.int_("decoder_sparse_step") or 1
        moe_freq = r.int_("moe_layer_freq") or 1
        if llama4:
            # vllm 0.33.0 llama4.py: every MoE layer adds an always-on shared expert
            # (LlamaMLP(intermediate_size)) beside FusedMoE(intermediate_size); MoE layers are
            # (i + 1) % interleave_moe_layer_step == 0 (step 0: none), the rest dense (_mlp width)
            moe_inter = r.int_("intermediate_size") or moe_inter
            n_shared, shared_inter = 1, moe_inter or 0
            step = r.int_("interleave_moe_layer_step", minimum=0)
            sparse_step = 1 if step is None else step
            if sparse_step == 0:
                mlp_only, sparse_step = tuple(range(layers)), 1

    layer_types, window, chunk = _layer_pattern(r, model_type, layers, notes)
    state = None
    if NO_KV in layer_types:
        state = linear_state(text, model_type, hidden=hidden, heads=heads, head_dim=head_dim)
        if state is None:
            notes.append("The linear-attention/SSM layers' per-request state shape is not known for "
                         f"{model_type}: counted as 0.")

    quant = None
    for holder, pre in ((cfg, ""), (text, prefix)):
        for k in ("quantization_config", "compression_config"):
            qc = holder.get(k)
            if qc is None:
                continue
            if not isinstance(qc, Mapping):
                raise InputError(f"must be a mapping, got {type(qc).__name__}", where=where, key=pre + k)
            quant = _quantization(qc, where, pre + k, notes)
            break
        if quant is not None:
            break

    vision_params, vision_h, vision_layers = _vision(cfg, hidden, where)
    bias = text.get("attention_bias") is True or model_type in ("qwen2", "qwen2_moe")

    archs = cfg.get("architectures") or ()
    filled = tuple(dict.fromkeys(r.defaulted))
    if filled:
        part = prefix.rstrip(".") or "config"
        values = ", ".join(f"{k}={defaults[k]}" for k in filled)
        notes.append(f"Filled from transformers' {model_type} defaults ({part} leaves them out): "
                     f"{values}.")

    return ModelSpec(
        name=name, source=source, model_type=model_type,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
        num_hidden_layers=layers, hidden_size=hidden, intermediate_size=intermediate, vocab_size=vocab,
        dtype=dtype, tie_word_embeddings=tie, max_position_embeddings=_derived_max_len(r, model_type),
        v_head_dim=v_head_dim, layer_types=layer_types, sliding_window=window,
        kv_lora_rank=kv_lora, qk_rope_head_dim=rope_dim, qk_nope_head_dim=nope_dim, q_lora_rank=q_lora,
        num_experts=experts, num_experts_per_tok=topk, num_shared_experts=n_shared,
        moe_intermediate_size=moe_inter, first_k_dense_layers=first_k, quantization=quant,
        weight_bytes_measured=weight_bytes_measured,
        architectures=tuple(str(a) for a in archs) if isinstance(archs, list) else (),
        mlp_only_layers=mlp_only, decoder_sparse_step=sparse_step, moe_layer_freq=moe_freq,
        shared_expert_intermediate_size=shared_inter, attention_bias=bool(bias),
        num_nextn_predict_layers=r.int_("num_nextn_predict_layers", minimum=0) or 0,
        vision_params=vision_params, vision_hidden_size=vision_h, vision_num_layers=vision_layers,
        notes=tuple(notes), attention_chunk_size=chunk, attention_sinks=model_type == "gpt_oss",
        linear_state=state, defaults_filled=filled,
    )


def _check_kv_groups(r: _Reader, kv_key: str, heads: int, kv_heads: int) -> None:
    """Refuse KV head counts no engine builds: GQA shares each KV head among a whole group of heads.

    vLLM's ``Attention`` asserts ``num_heads % num_kv_heads == 0`` and SGLang's ``RadixAttention``
    derives the group size by integer division, so 16 KV heads for 8 heads, or 3 for 8, fail at
    load time. Letting such a config through would size a KV cache for a model that cannot start.
    """
    if heads % kv_heads == 0:
        return
    key = r.key(kv_key) if r.has(kv_key.split(".")[0]) else kv_key
    divisors = ", ".join(str(d) for d in range(1, heads + 1) if heads % d == 0)
    if kv_heads > heads:
        why = (f"{kv_heads} KV heads for only {heads} attention heads (num_attention_heads): each KV head "
               f"serves a group of attention heads, so there can be at most {heads}")
    else:
        why = (f"{kv_heads} does not divide num_attention_heads {heads}: grouped-query attention needs "
               f"whole groups ({heads} / {kv_heads} is not an integer)")
    raise InputError(f"{why}; no engine loads this model. Use a divisor of {heads}: {divisors}",
                     where=r.where, key=key)


#: Model (weight/activation) dtypes the engines accept in ``torch_dtype`` (vLLM's ``--dtype``
#: names; SGLang the same). fp8 / int8 / int4 weights are declared by ``quantization_config``,
#: never by ``torch_dtype``.
MODEL_DTYPES = ("bfloat16", "float16", "float32", "half", "float")


def _reject_dtype(r: _Reader, dtype: str) -> None:
    k, _ = r.raw("torch_dtype", "dtype", use_fallback=True)
    key = r.key(k) if r.has(k) else k
    hint = ""
    if "8" in dtype or "4" in dtype:
        hint = (" (quantized weights are declared by quantization_config, e.g. quant_method: fp8, with "
                "torch_dtype: bfloat16)")
    raise InputError(f"{dtype!r} is not a model dtype the engines load; use one of "
                     f"{', '.join(MODEL_DTYPES)}{hint}", where=r.where, key=key)


def did_you_mean(word: str, choices: Sequence[str], n: int = 2) -> list[str]:
    """Close matches, case-insensitive, in their original spelling."""
    return close_matches(word, choices, n=n)
