"""What SGLang changes about the model it serves before it sizes the pool, by release.

The KV cache dtype of a DeepSeek DSA model (DeepSeek-V3.2: sparse MLA with an indexer, ``is_deepseek_nsa`` /
``is_deepseek_dsa`` in ``configs/model_config.py``: an architecture of the DeepSeek family with ``index_topk``)
is SGLang's to pick, on CUDA:

- 0.5.3 - 0.5.4.post1: on SM 10.x and newer ``fp8_e4m3`` whatever ``--kv-cache-dtype`` says ("for Blackwell, we
  support fp8 only currently", 0.5.3 ``server_args.py:826-832``); below, the line's dtype;
- 0.5.4.post2 - 0.5.14: ``auto`` becomes ``fp8_e4m3`` on SM 10.x+ and ``bfloat16`` below (0.5.4.post2
  ``server_args.py:1055-1062``; 0.5.10 ``_set_default_nsa_kv_cache_dtype`` :1428-1437; 0.5.14
  ``_set_default_dsa_kv_cache_dtype`` :3416-3423); a given dtype is kept;
- 0.5.15+: the same in ``arg_groups/overrides.py`` (``_dsa_kv_cache_dtype_default``, :532-537 in 0.5.23), and from
  0.5.20 a model with learnable attention sinks (``learnable_sink`` in its config) stays ``bfloat16``
  (:597-606 in 0.5.20).

The same hook sets the layout in 0.5.3 - 0.5.5.post3: ``self.enable_dp_attention = True`` and ``self.dp_size =
self.tp_size`` whatever the line says (0.5.3 ``server_args.py:815-818``, 0.5.5 :1070-1073; 0.5.6 keeps the line's
``--dp-size``, :949-951), so every rank of the TP group is its own attention-DP group: the attention weights are
replicated on each (``dsa_layout``), and 0.5.3 alone also sets ``mem_fraction_static = 0.8`` (:823-824).

The project read ``auto`` as the checkpoint's 16-bit dtype: on a B200 the pool of DeepSeek-V3.2 was predicted at
1,152 + 132 bytes a token per layer where SGLang caches 656 + 132 (``memory/kv.py``), 1.63x fewer tokens than it
has. The fp8 layout is counted as the scaled one (656 B: ``calculate_mla_kv_cache_dim``, kv_cache_configurator.py:
3458-3473 in 0.5.23); the trtllm DSA backends SM 10.x picks by default from 0.5.15 keep the raw 576 B rows
(:3425-3440), so there the prediction stays on the safe side by 80 B a layer.
"""

from __future__ import annotations

import dataclasses
import json

from packaging.version import Version

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Layout

#: the DeepSeek DSA hook first (0.5.3 ``server_args.py:806``); before it the release serves no DSA model
DSA_SINCE = Version("0.5.3")
#: from 0.5.4.post2 only ``auto`` is changed (``if self.kv_cache_dtype == "auto"``); before, SM 10.x+ is always fp8
AUTO_ONLY_SINCE = Version("0.5.4.post2")
#: learnable attention sinks keep bfloat16 (0.5.20 ``arg_groups/overrides.py:597-606``)
SINKS_KEEP_BF16_SINCE = Version("0.5.20")
#: the architectures every release from 0.5.3 treats as DeepSeek DSA (with ``index_topk`` in the config); the
#: later additions (GLM-5, Mistral Large 3, Kimi K2.5) are read per release and not resolved here
DSA_ARCHITECTURES = frozenset({"DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM"})
FP8 = "fp8_e4m3"
#: 0.5.3 - 0.5.5.post3 turn attention DP on with one group per TP rank for a DSA model (0.5.6 keeps --dp-size)
DSA_DP_ATTENTION_UNTIL = Version("0.5.6")
#: 0.5.3 alone also sets its memory fraction
DSA_FRACTION_RELEASE, DSA_FRACTION = Version("0.5.3"), 0.8


def learnable_sink(model: ModelSpec) -> bool:
    """``getattr(hf_config, "learnable_sink", False)``: the checkpoint's ``config.json`` key."""
    try:
        config = json.loads(model.config_json) if model.config_json else {}
    except ValueError:
        return False
    return isinstance(config, dict) and bool(config.get("learnable_sink", False))


def dsa_kv_cache_dtype(model: ModelSpec, asked: str, layout: Layout, version: Version) -> tuple[str, str] | None:
    """The KV cache dtype SGLang ``version`` serves this DeepSeek DSA model in where it differs from ``asked`` (the
    line's ``--kv-cache-dtype``, ``auto`` when not given), and why in words; None where it keeps the line's, for
    any other model, or where the GPU's compute capability is unknown."""
    arch = model.architectures[0] if model.architectures else ""
    cc = layout.compute_capability
    if not model.is_sparse_mla or arch not in DSA_ARCHITECTURES or version < DSA_SINCE or cc is None:
        return None
    asked = (asked or "auto").lower()
    sm = cc[0]
    where = f"SGLang {version} picks it for DeepSeek DSA ({arch}) on SM {sm}.x"
    if version < AUTO_ONLY_SINCE:
        if sm >= 10 and asked != FP8:
            return FP8, f"{where} whatever --kv-cache-dtype says (server_args.py:826-832 in 0.5.3)"
        return None
    if asked != "auto":
        return None
    if version >= SINKS_KEEP_BF16_SINCE and learnable_sink(model):
        served = "bfloat16"
    else:
        served = FP8 if sm >= 10 else "bfloat16"
    if served == "bfloat16" and model.dtype_bytes == 2:
        return None  # what ``auto`` reads as already (the checkpoint's 16-bit dtype)
    return served, f"{where} where --kv-cache-dtype is auto"


def served_model(model: ModelSpec, args: ResolvedArgs, layout: Layout, version: Version) -> ModelSpec:
    """``model`` with the KV cache dtype SGLang picks for it (``ModelSpec.served_kv_cache_dtype``), else unchanged."""
    asked = args.get("kv_cache_dtype") if args.ok else None
    picked = dsa_kv_cache_dtype(model, str(asked or "auto"), layout, version)
    if picked is None:
        return model
    return dataclasses.replace(model, served_kv_cache_dtype=picked[0], served_kv_cache_why=picked[1])


def is_dsa(model: ModelSpec, version: Version) -> bool:
    """A DeepSeek DSA model as release ``version`` recognises one (``is_deepseek_nsa``: a DeepSeek-V3 / V3.2
    architecture with ``index_topk``)."""
    arch = model.architectures[0] if model.architectures else ""
    return model.is_sparse_mla and arch in DSA_ARCHITECTURES and version >= DSA_SINCE


def dsa_layout(dep: Deployment, model: ModelSpec, version: Version) -> Deployment:
    """``dep`` as 0.5.3 - 0.5.5.post3 run it for a DeepSeek DSA model: one replica whose TP ranks are each an
    attention-DP group (``dp_size = tp_size``), and in 0.5.3 a ``mem_fraction_static`` of 0.8; ``dep`` itself for
    any other model or release."""
    if not is_dsa(model, version) or version >= DSA_DP_ATTENTION_UNTIL:
        return dep
    fraction = DSA_FRACTION if version == DSA_FRACTION_RELEASE else dep.memory_fraction
    return dataclasses.replace(dep, data_parallel_size=1, attention_data_parallel_size=dep.tensor_parallel_size,
                               memory_fraction=fraction)


def dsa_layout_note(model: ModelSpec, version: Version) -> str:
    """What ``dsa_layout`` did, in words ("" where it did nothing)."""
    if not is_dsa(model, version) or version >= DSA_DP_ATTENTION_UNTIL:
        return ""
    also = ", and sets mem_fraction_static to 0.8" if version == DSA_FRACTION_RELEASE else ""
    return (f"SGLang {version} turns attention DP on for DeepSeek DSA with --dp-size = --tp-size whatever the line "
            f"says (server_args.py _handle_model_specific_adjustments){also}: the attention weights are replicated "
            f"on every rank.")
