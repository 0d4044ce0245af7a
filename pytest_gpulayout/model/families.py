"""Model-family facts the engines read from a config that the generic loader would get wrong.

- transformers' documented defaults for a named ``model_type``: a published config may leave out
  any key its config class defaults (LLaVA 1.5's ``text_config`` has no ``num_attention_heads``:
  ``LlamaConfig`` gives 32), and the engines build the model from the filled-in class;
- the text model type a multimodal wrapper implies when its ``text_config`` names none
  (``LlavaConfig``: ``text_config.get("model_type", "llama")``);
- Llama 4 (vllm 0.33.0 ``model_executor/models/llama4.py``): ``no_rope_layers[i] == 0`` marks a
  global (NoPE, full-attention) layer, every other layer uses chunked local attention of
  ``attention_chunk_size`` tokens; MoE layers are ``(i + 1) % interleave_moe_layer_step == 0``,
  each with an always-on shared expert as wide as the routed ones (``intermediate_size``), while
  dense layers use ``intermediate_size_mlp``;
- hybrid linear-attention / state-space layers keep a fixed per-request state instead of a
  per-token KV cache; its shapes are vLLM's ``MambaStateShapeCalculator``
  (vllm 0.33.0 ``model_executor/layers/mamba/mamba_utils.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


def _frozen(d: dict[str, dict[str, Any]]) -> Mapping[str, Mapping[str, Any]]:
    return MappingProxyType({k: MappingProxyType(v) for k, v in d.items()})


#: transformers' config-class defaults for the keys that decide a layout, by ``model_type``
#: (``LlamaConfig``, ``MistralConfig``, ``Qwen2Config``, ``Gemma*Config``, ``Llama4TextConfig`` ...
#: ``__init__`` signatures). A key a config leaves out is filled from here and the spec's notes
#: name it. ``num_key_value_heads`` is absent on purpose where the class defaults it to
#: ``num_attention_heads`` (the loader already does that).
TYPE_DEFAULTS: Mapping[str, Mapping[str, Any]] = _frozen({
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "max_position_embeddings": 2048, "tie_word_embeddings": False},
    "mistral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
                "sliding_window": 4096, "tie_word_embeddings": False},
    "qwen2": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32, "max_position_embeddings": 32768, "tie_word_embeddings": False},
    "gemma3_text": {"head_dim": 256, "vocab_size": 262208, "max_position_embeddings": 131072,
                    "sliding_window": 4096, "sliding_window_pattern": 6, "tie_word_embeddings": True,
                    "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                    "num_attention_heads": 8, "num_key_value_heads": 4},
    "gemma2": {"head_dim": 256, "vocab_size": 256000, "sliding_window": 4096, "tie_word_embeddings": True,
               "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28,
               "num_attention_heads": 16, "num_key_value_heads": 16, "max_position_embeddings": 8192},
    "gemma": {"head_dim": 256, "vocab_size": 256000, "tie_word_embeddings": True},
    "cohere2": {"sliding_window_pattern": 4, "tie_word_embeddings": True},
    "mixtral": {"num_local_experts": 8, "num_experts_per_tok": 2},
    "llama4_text": {"vocab_size": 202048, "hidden_size": 5120, "intermediate_size": 8192,
                    "intermediate_size_mlp": 16384, "num_hidden_layers": 48, "num_attention_heads": 40,
                    "num_key_value_heads": 8, "head_dim": 128, "num_local_experts": 16,
                    "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "attention_chunk_size": 8192,
                    "max_position_embeddings": 131072},
})

#: The text ``model_type`` a wrapper's config class gives a ``text_config`` that names none
#: (``LlavaConfig`` / ``LlavaNextConfig``: "llama"; ``LlavaOnevisionConfig``: "qwen2";
#: ``Mistral3Config``: "mistral"; ``Llama4Config``: always ``Llama4TextConfig``;
#: ``Gemma3Config``: always ``Gemma3TextConfig``).
WRAPPER_TEXT_TYPES: Mapping[str, str] = MappingProxyType({
    "llava": "llama", "llava_next": "llama", "llava_next_video": "llama", "vipllava": "llama",
    "llava_onevision": "qwen2", "mistral3": "mistral", "llama4": "llama4_text", "gemma3": "gemma3_text",
})

#: ``Llama4TextConfig``'s default: ``no_rope_layers[i] = int((i + 1) % 4 != 0)`` (every 4th global).
LLAMA4_NO_ROPE_INTERVAL = 4


def text_model_type(top: Mapping[str, Any], text: Mapping[str, Any]) -> str:
    """The ``model_type`` whose defaults fill ``text`` (a wrapper's ``text_config`` or the config)."""
    own = text.get("model_type")
    if isinstance(own, str) and own:
        return own
    wrapper = str(top.get("model_type") or "")
    if text is not top and wrapper in WRAPPER_TEXT_TYPES:
        return WRAPPER_TEXT_TYPES[wrapper]
    return wrapper or "unknown"


def llama4_global_layers(no_rope_layers: tuple[int, ...], n: int) -> tuple[bool, ...]:
    """Per layer: is it global (NoPE, full attention)? ``no_rope_layers[i] == 0`` is NoPE
    (vllm 0.33.0 ``llama4.py``: ``self.nope = config.no_rope_layers[layer_idx] == 0``); an empty list
    is ``Llama4TextConfig``'s default pattern."""
    if not no_rope_layers:
        no_rope_layers = tuple(int((i + 1) % LLAMA4_NO_ROPE_INTERVAL != 0) for i in range(n))
    padded = tuple(no_rope_layers[:n]) + (1,) * max(0, n - len(no_rope_layers))
    return tuple(v == 0 for v in padded)


# ---------------------------------------------------------------------------------------------
# Fixed per-request state of linear-attention / state-space layers
# ---------------------------------------------------------------------------------------------

#: ``LinearState.kind`` values.
GATED_DELTA_NET = "gated_delta_net"   # Qwen3-Next
MAMBA2 = "mamba2"                     # Nemotron-H, Falcon-H1, Bamba, Granite-4 hybrids
MAMBA1 = "mamba1"                     # Jamba
LINEAR_ATTENTION = "linear_attention"  # MiniMax-Text-01 lightning attention


@dataclass(frozen=True)
class LinearState:
    """Shapes of one linear-attention / SSM layer's per-request state, unsharded.

    ``conv_dim x (conv_kernel - 1)`` convolution state plus a ``heads x dim_a x dim_b`` recurrent
    state; ``conv_dim`` and ``heads`` are split over TP (``divide(conv_dim, tp)``,
    ``divide(heads, tp)``), the other dims are not. Elements are stored in the model dtype unless
    ``--mamba-ssm-cache-dtype`` says otherwise (``mamba_utils._mamba_state_dtype``: "auto" keeps
    the model dtype).
    """

    kind: str
    conv_dim: int
    conv_kernel: int
    heads: int
    dim_a: int
    dim_b: int
    #: Mamba2: the B/C groups in ``conv_dim`` (``2 x n_groups x d_state`` of it); 0: not Mamba2
    n_groups: int = 0

    def conv_elements_per_rank(self, tp: int = 1) -> int:
        """The convolution state. Mamba2 replicates its groups so each rank's heads keep theirs:
        ``n_groups + extra_groups_for_head_shards`` (``tp - n_groups`` when TP does not divide it;
        vLLM ``mamba_utils.MambaStateShapeCalculator.mamba2_state_shape``, 0.10.2 to 0.32)."""
        conv_dim = self.conv_dim
        if self.n_groups and self.n_groups % tp:
            conv_dim += 2 * (tp - self.n_groups) * self.dim_b
        return -(-conv_dim // tp) * max(0, self.conv_kernel - 1)

    def ssm_elements_per_rank(self, tp: int = 1) -> int:
        return -(-self.heads // tp) * self.dim_a * self.dim_b

    def elements_per_rank(self, tp: int = 1) -> int:
        return self.conv_elements_per_rank(tp) + self.ssm_elements_per_rank(tp)

    def bytes_per_rank(self, tp: int = 1, dtype_bytes: int = 2, ssm_dtype_bytes: int | None = None) -> int:
        """``ssm_dtype_bytes``: the recurrent state's own dtype (``--mamba-ssm-cache-dtype``), where
        it is not the conv state's."""
        return (self.conv_elements_per_rank(tp) * dtype_bytes
                + self.ssm_elements_per_rank(tp) * (ssm_dtype_bytes or dtype_bytes))

    def tp_widths(self) -> tuple[tuple[str, int], ...]:
        """The widths vLLM ``divide()``s by TP for this state (a non-divisor fails at load)."""
        return (("linear-attention conv_dim", self.conv_dim), ("linear-attention heads", self.heads))


def _geti(cfg: Mapping[str, Any], *names: str) -> int | None:
    for n in names:
        v = cfg.get(n)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def linear_state(cfg: Mapping[str, Any], model_type: str, *, hidden: int, heads: int,
                 head_dim: int) -> LinearState | None:
    """The per-request state of a hybrid model's non-attention layers, from its config, or ``None``.

    Gated DeltaNet (Qwen3-Next, ``gated_delta_net_state_shape``): conv over
    ``2 x k_heads x k_dim + v_heads x v_dim`` channels with ``linear_conv_kernel_dim`` taps and a
    ``v_heads x v_dim x k_dim`` recurrent state. Mamba2 (``mamba2_state_shape``): conv over
    ``intermediate + 2 x n_groups x d_state``, state ``heads x head_dim x d_state``. Mamba1 (Jamba,
    ``mamba1_state_shape``): conv over ``intermediate``, state ``intermediate x d_state``.
    Lightning attention (MiniMax, ``linear_attention_state_shape``): ``heads x head_dim x head_dim``.
    """
    if model_type == "qwen3_next" or "linear_num_value_heads" in cfg:
        kh = _geti(cfg, "linear_num_key_heads") or 16
        vh = _geti(cfg, "linear_num_value_heads") or 32
        kd = _geti(cfg, "linear_key_head_dim") or 128
        vd = _geti(cfg, "linear_value_head_dim") or 128
        k = _geti(cfg, "linear_conv_kernel_dim") or 4
        return LinearState(GATED_DELTA_NET, 2 * kh * kd + vh * vd, k, vh, vd, kd)
    mheads = _geti(cfg, "mamba_num_heads", "mamba_n_heads")
    if mheads:
        hd = _geti(cfg, "mamba_head_dim", "mamba_d_head") or 64
        state = _geti(cfg, "ssm_state_size", "mamba_d_state", "state_size") or 128
        groups = _geti(cfg, "n_groups", "mamba_n_groups") or 1
        k = _geti(cfg, "conv_kernel", "mamba_d_conv") or 4
        inter = mheads * hd
        return LinearState(MAMBA2, inter + 2 * groups * state, k, mheads, hd, state, groups)
    if model_type == "jamba" or "mamba_d_state" in cfg:
        expand = _geti(cfg, "mamba_expand") or 2
        state = _geti(cfg, "mamba_d_state") or 16
        k = _geti(cfg, "mamba_d_conv") or 4
        inter = expand * hidden
        # Mamba1: the recurrent state is (intermediate / tp) x d_state: one "head" per channel
        return LinearState(MAMBA1, inter, k, inter, state, 1)
    if model_type.startswith("minimax"):
        return LinearState(LINEAR_ATTENTION, 0, 0, heads, head_dim, head_dim)
    return None
