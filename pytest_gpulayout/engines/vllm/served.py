"""The model as a vLLM release serves it after its command line and its environment rewrite the config:
``--hf-overrides``, ``--rope-scaling`` / ``--rope-theta`` (up to 0.11.0) and ``VLLM_MLA_DISABLE``.

Read in the wheels (``/work``'s unpacked ``vllm-<v>/``; ``pip download --no-deps vllm==X``):

* ``--hf-overrides`` goes onto the Hugging Face config before anything is derived from it. Up to 0.11.0 as
  ``hf_config.update(hf_overrides_kw)`` (0.8.5 ``config.py`` L457, 0.9.2 L539; 0.10.1
  ``transformers_utils/config.py`` L509, 0.11.0 L633): every key set on the top-level config, a mapping for
  ``text_config`` replacing it. From 0.11.1 mappings are split off and applied by
  ``ModelConfig._apply_dict_overrides`` (0.11.1 ``config/model.py`` L396, 0.33.0 L555): a sub-config is
  updated key by key (``_update_nested``), a dict-valued field (``rope_scaling``) set. Layers, KV heads,
  ``max_position_embeddings`` and the RoPE scaling then decide the pool and the derived ``max_model_len``
  (``_get_and_verify_max_len``: a YaRN ``factor`` over ``original_max_position_embeddings``).
* ``--rope-scaling`` / ``--rope-theta`` are merged into those overrides (0.8.5 ``config.py`` L404-413, 0.9.2
  L491-501, 0.11.0 ``config/model.py`` L399-409); 0.11.1 removed both flags (its parser refuses them: the
  ``config`` check says so in its words).
* The maximum length is the one the release derives (``rules_model.derived_length``: from 0.30 a YaRN factor no
  longer scales ``max_position_embeddings``, ``--disable-sliding-window`` caps it at the window, from 0.8.3 a
  ``model_max_length`` replaces it): the longest ``--max-model-len`` it takes, and the length a line without one
  runs at.
* ``VLLM_MLA_DISABLE=1`` (``envs.py``: 0.8.5 L621, 0.33.0 L1480) makes ``ModelConfig.use_mla`` False (0.8.5
  ``config.py`` L1265, 0.33.0 ``config/model.py`` L2069): DeepSeek-V2/V3 run ``DeepseekV2Attention``, which
  caches every local head's K and V at ``qk_nope_head_dim + qk_rope_head_dim`` (V padded to it; 0.8.5
  ``models/deepseek_v2.py`` L281-284, 0.33.0 L582-584; head size 0.33.0
  ``transformers_utils/model_arch_config_convertor.py`` L97), split by TP, instead of one latent per token.
* The KV cache dtype: GLM-5 (``GlmMoeDsaForCausalLM``) with ``--kv-cache-dtype auto`` on SM 10.x is served with an
  ``fp8_e4m3`` cache (0.32+, ``model_executor/models/config.py:44-55`` in 0.32.0, :89-101 in 0.33.0); its pool is
  counted in that dtype (``kv_cache_dtype_picked``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from packaging.version import Version

from pytest_gpulayout.engines.vllm import rules_model
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.overrides import flatten, with_overrides
from pytest_gpulayout.model.spec import ModelSpec

#: ``_apply_dict_overrides`` (nested sub-configs) from 0.11.1 (``config/model.py`` L396)
NESTED_OVERRIDES_SINCE = Version("0.11.1")
#: ``--rope-scaling`` / ``--rope-theta`` merged into the overrides up to 0.11.0; gone from 0.11.1's parser
ROPE_FLAGS_UNTIL = Version("0.11.1")
MLA_DISABLE_ENV = "VLLM_MLA_DISABLE"
#: where each release applies the overrides, for the note
_WHERE = ((Version("0.11.1"), "config/model.py _apply_dict_overrides"),
          (Version("0.10"), "transformers_utils/config.py get_config: config.update(hf_overrides_kw)"),
          (Version("0"), "config.py ModelConfig: hf_config.update(hf_overrides_kw)"))


def env_flag(env: Mapping[str, str], name: str) -> bool:
    """``bool(int(os.getenv(name, "0")))`` as ``envs.py`` reads it (a value that is not an integer: unset)."""
    raw = (env.get(name) or "0").strip()
    return raw.lstrip("-").isdigit() and bool(int(raw))


def overrides_of(args: ResolvedArgs, version: Version) -> dict[str, Any]:
    """The overrides the release applies for ``args``: ``--hf-overrides`` (a mapping; a callable is Python-only),
    then ``--rope-scaling`` / ``--rope-theta`` where the release has them."""
    if not args.ok:
        return {}
    got = args.get("hf_overrides")
    out: dict[str, Any] = dict(got) if isinstance(got, Mapping) else {}
    if version < ROPE_FLAGS_UNTIL:
        rope = args.get("rope_scaling")
        if isinstance(rope, Mapping) and rope:
            out["rope_scaling"] = dict(rope)
        theta = args.get("rope_theta")
        if isinstance(theta, (int, float)) and not isinstance(theta, bool):
            out["rope_theta"] = theta
    return out


#: GLM-5's fp8 cache on SM 10.x (``GlmMoeDsaForCausalLM.verify_and_update_config``, first in 0.32.0)
GLM_DSA_FP8_SINCE = Version("0.32.0")
GLM_DSA = "GlmMoeDsaForCausalLM"


def kv_cache_dtype_picked(model: ModelSpec, asked: str, cc: tuple[int, int] | None,
                          version: Version) -> tuple[str, str] | None:
    """The KV cache dtype the release picks for this model where the line leaves it ``auto``, and why; None where
    it keeps the line's (or the GPU's compute capability is unknown)."""
    if (model.architectures[:1] != (GLM_DSA,) or version < GLM_DSA_FP8_SINCE or cc is None or cc[0] != 10
            or (asked or "auto").lower() != "auto"):
        return None
    return "fp8_e4m3", (f"vLLM {version} picks it for {GLM_DSA} on SM 10.x where --kv-cache-dtype is auto "
                        f"(model_executor/models/config.py {GLM_DSA}.verify_and_update_config)")


def served_model(model: ModelSpec, args: ResolvedArgs, version: Version, env: Mapping[str, str]) -> ModelSpec:
    """``model`` with the release's config overrides and ``VLLM_MLA_DISABLE`` applied (see the module
    docstring). An override the loader cannot read is kept out, and a note says why."""
    overrides = overrides_of(args, version)
    if overrides:
        nested = version >= NESTED_OVERRIDES_SINCE
        where = next(w for since, w in _WHERE if version >= since)
        note = (f"As served: vLLM {version} serves the config with {', '.join(flatten(overrides))} applied "
                f"(--hf-overrides{', --rope-scaling' if 'rope_scaling' in overrides else ''}: {where}).")
        try:
            model = with_overrides(model, overrides, nested=nested, note=note)
        except InputError as err:
            model = dataclasses.replace(model, notes=(*model.notes, f"As served: --hf-overrides not applied: "
                                                                     f"{err}; not modelled."))
    derived = rules_model.derived_length(args, model, version, env)
    if derived is not None and derived != model.max_position_embeddings:
        # the length the release derives (its RoPE scaling, the window under --disable-sliding-window, a
        # model_max_length) is the longest line it takes and the length a line without --max-model-len runs at
        note = (f"As served: vLLM {version} derives a maximum length of {derived:,} tokens from the config "
                f"(_get_and_verify_max_len), where the config's positions read {model.max_position_embeddings or 0:,}.")
        model = dataclasses.replace(model, max_position_embeddings=derived, notes=(*model.notes, note))
    if model.has_mla_weights and env_flag(env, MLA_DISABLE_ENV):
        note = (f"As served: {MLA_DISABLE_ENV}=1: vLLM {version} serves it without MLA (ModelConfig.use_mla "
                f"False), every head's K and V cached at {model.head_dim} wide.")
        model = dataclasses.replace(model, mla_disabled=True, num_key_value_heads=model.num_attention_heads,
                                    notes=(*model.notes, note))
    return model
