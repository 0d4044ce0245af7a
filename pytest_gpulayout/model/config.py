"""Parsing a Hugging Face ``config.json`` into a ``ModelSpec``, the way the engines read it.

vLLM and SGLang both take every shape number from the *text* config (``config.get_text_config()``:
a multimodal model's ``text_config``), fill what the file leaves out from the transformers config
class defaults (``model/families.py``), and read the KV head count from the first of several alias
keys. We mirror that, because a spec that differs from what the engine reads would predict a
different KV pool than the one the engine allocates.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.model.families import (
    TYPE_DEFAULTS,
    linear_state,
    llama4_global_layers,
    text_model_type,
)
from pytest_gpulayout.model.spec import CHUNKED, FULL, NO_KV, SLIDING, ModelSpec, Quantization

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
#: a layer count past this is refused at once (issue 19 item 9: every check walks the layers, and an
#: absurd count must answer in bounded time with one clear error, never hang)
MAX_LAYERS = 4096
#: attention (or KV) heads past this are refused (round 4, item 3: ``num_attention_heads: 1e18`` passed
#: ``heads`` and reported "0 B/token"); the largest published models have 128 (Llama 3.1 405B, DeepSeek-V3)
MAX_HEADS = 16384
#: any other integer of a config past this is refused: the engines size their tensors with 32-bit
#: dimensions, and a value past it is a typo or a hostile file, never a model
MAX_CONFIG_INT = 2**31 - 1
_HEAD_KEYS = frozenset({"num_attention_heads", "n_head", "num_heads", "n_heads", *KV_HEAD_KEYS})


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
        if k in _HEAD_KEYS and v > MAX_HEADS:
            raise InputError(f"{v:,} heads is past any model's (the largest published ones have 128; more than "
                             f"{MAX_HEADS:,} is refused): is the config's value a typo?", where=self.where,
                             key=self.key(k))
        if v > MAX_CONFIG_INT:
            raise InputError(f"{v:,} is past any model's dimensions (the engines size tensors with 32-bit "
                             f"dimensions: at most {MAX_CONFIG_INT:,}): is the config's value a typo?",
                             where=self.where, key=self.key(k))
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


#: Vision towers whose ``vision_config`` does not read like CLIP/SigLIP's, by the wrapper's
#: ``model_type`` (vLLM ``model_executor/models/<name>.py``):
#:
#: * ``qwen2_vl``: the ViT is ``embed_dim`` wide with ``embed_dim x mlp_ratio`` fc1/fc2 MLPs and
#:   ``depth`` blocks; ``vision_config.hidden_size`` is the *merger's output* (the text width), not the
#:   ViT's (``qwen2_vl.py``: ``Qwen2VisionTransformer(embed_dim=..., depth=...)``,
#:   ``Qwen2VisionPatchMerger(d_model=hidden_size, context_dim=embed_dim)``).
#: * ``qwen2_5_vl``: ``hidden_size`` is the ViT width, gated (SiLU) MLPs of ``intermediate_size``,
#:   merger into ``out_hidden_size`` (``qwen2_5_vl.py``).
#: * ``qwen3_vl`` / ``qwen3_vl_moe``: ``hidden_size`` wide, fc1/fc2 MLPs, learned position embedding of
#:   ``num_position_embeddings``, a merger into ``out_hidden_size`` plus one per
#:   ``deepstack_visual_indexes`` entry (``qwen3_vl.py``).
#:
#: Each: ``(width keys, gated MLP, merger)``; the Qwen towers embed patches with a Conv3d over
#: ``temporal_patch_size`` frames and merge ``spatial_merge_size^2`` patches before projecting.
_VISION_FAMILIES: dict[str, tuple[tuple[str, ...], bool, bool]] = {
    "qwen2_vl": (("embed_dim",), False, True),
    "qwen2_5_vl": (("hidden_size",), True, True),
    "qwen3_vl": (("hidden_size",), False, True),
    "qwen3_vl_moe": (("hidden_size",), False, True),
}


def vision_config_shape(top: Mapping[str, Any]) -> tuple[int | None, int | None] | None:
    """``vision_config``'s ``num_hidden_layers`` and ``hidden_size`` as written (None: absent) for the Qwen-VL
    towers (``_VISION_FAMILIES``), whose config classes give neither the tower's depth nor (Qwen2-VL) its width
    under those names; None for the others (their ``num_hidden_layers`` / ``hidden_size`` are the tower's)."""
    vc = top.get("vision_config")
    if not isinstance(vc, Mapping) or str(top.get("model_type") or "") not in _VISION_FAMILIES:
        return None

    def raw(name: str) -> int | None:
        v = vc.get(name)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None
    return raw("num_hidden_layers"), raw("hidden_size")


def _vision(top: Mapping[str, Any], text_hidden: int, where: str) -> tuple[int, int | None, int | None]:
    """Estimated vision tower + projector parameters from ``vision_config``.

    CLIP/SigLIP-shaped towers (LLaVA, Gemma 3, Llama 4, Pixtral ...): per layer ``4 h^2`` attention +
    ``2 h i`` MLP (+ biases and norms), the patch and position embeddings, and a projector into the
    text hidden size. Gemma 3's SigLIP comes to ~0.42B. The Qwen-VL towers read their own keys
    (``_VISION_FAMILIES``): Qwen2-VL-7B's ViT is 1,280 wide (0.68B with its merger), not 3,584.
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

    family = _VISION_FAMILIES.get(str(top.get("model_type") or ""))
    if family is not None:
        widths, gated, _ = family
        h = geti(*widths, default=1280)
        layers = geti("depth", "num_hidden_layers", default=32)
        inter = geti("intermediate_size", default=h * geti("mlp_ratio", default=4))
        patch = geti("patch_size", "spatial_patch_size", default=14)
        frames = geti("temporal_patch_size", default=2)
        chans = geti("in_chans", "in_channels", default=3)
        merge = geti("spatial_merge_size", default=2) ** 2 * h
        out = geti("out_hidden_size", default=text_hidden) if widths != ("embed_dim",) else \
            geti("hidden_size", default=text_hidden)
        mlp = (3 if gated else 2) * h * inter + (2 * inter if gated else inter) + h
        per_layer = 4 * h * h + 4 * h + mlp + 4 * h
        mergers = 1 + len(vc.get("deepstack_visual_indexes") or ())
        merger = 2 * h + merge * merge + merge + merge * out + out
        params = layers * per_layer + chans * frames * patch * patch * h + mergers * merger
        params += geti("num_position_embeddings", default=0) * h
        return params, h, layers

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
    if layers > MAX_LAYERS:
        raise InputError(f"num_hidden_layers {layers:,} is past what any engine builds (none has built a model "
                         f"of more than {MAX_LAYERS:,} layers; the largest published ones have under 200, and "
                         f"llama.cpp b11434 asserts n_layer <= LLAMA_MAX_LAYERS = 512, src/llama-model.cpp): "
                         f"is the config's layer count a typo?", where=r.where, key="num_hidden_layers")
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
    if head_dim == 0:  # more heads than hidden units: every head 0 wide, "0 B/token" of KV
        raise InputError(f"{heads:,} attention heads for a hidden_size of {hidden:,}: each head would be "
                         f"{hidden / heads:.3g} wide (hidden_size / num_attention_heads, no head_dim given): is one of "
                         f"them a typo?", where=r.where, key=r.key("num_attention_heads"))
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
        config_model_type=str(cfg.get("model_type") or "") if cfg.get("model_type") != model_type else "",
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
        vision_config_shape=vision_config_shape(cfg) if vision_params else None,
        notes=tuple(notes), attention_chunk_size=chunk, attention_sinks=model_type == "gpt_oss",
        linear_state=state, defaults_filled=filled,
        # vLLM deepseek_v2.py: ``is_v32 = hasattr(config, "index_topk")``
        index_head_dim=((r.int_("index_head_dim", minimum=1) or 128)
                        if kv_lora and r.raw("index_topk")[1] is not _MISSING else None),
        config_json=json.dumps(cfg, sort_keys=True, default=str),
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


