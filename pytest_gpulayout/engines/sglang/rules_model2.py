"""The rest of SGLang's model-specific refusals a command line reaches, by release.

``server_args.py`` ``_handle_model_specific_adjustments`` (0.5.16 - 0.5.18) and, from 0.5.19, ``arg_groups/
model_hook.py handle_model_specific_adjustments`` with the override registry it applies (``arg_groups/
model_overrides/*.py``, each function registered for the architectures it is about) refuse:

- ``--enable-dsa-cache-layer-split`` for a model that is not DeepSeek Sparse Attention (0.5.16 ``server_args.py
  :4332``; 0.5.23 ``model_hook.py:188``): ``is_deepseek_dsa(hf_config)`` is the architecture in the release's
  list and an ``index_topk`` that is not None (0.5.16 ``configs/model_config.py:105-121``; Dots3Note from 0.5.19,
  0.5.19 L122-138; Glm5Next and HYV4 from 0.5.20, 0.5.23 L191-211);
- ``--enable-cp-decode-attn-tp`` for an architecture outside ``CP_DECODE_ATTN_TP_SUPPORTED_ARCHS`` (0.5.17
  ``server_args.py:5068``, the tuple at ``layers/cp/cp_decode_attn_tp.py:29``, the same five names through
  0.5.23; 0.5.23 ``model_hook.py:199``);
- Intern-S2-Mobius with pipeline or expert parallelism (0.5.18 ``server_args.py:5253-5262``; 0.5.23
  ``model_hook.py:175-184``);
- ERNIE 4.5 VL MoE with attention DP (0.5.22 ``model_overrides/ernie45_vl.py:12-18``);
- HYV4 with ``--enable-prefill-cp`` or ``--dcp-size > 1`` (0.5.20 ``model_overrides/deepseek_v2.py:49`` / :57;
  0.5.23 L63 / L71).

Every one of them runs after ``parse_connector_type(model_path) == ConnectorType.INSTANCE`` returns early (a
remote-instance model path: no config, no checks; 0.5.17 ``server_args.py:5049-5051``, 0.5.23 ``model_hook.py
:160-163``): such a path is judged by none of them. ``frame(args, model, layout, listed)`` gives the values, in
a frame of its own (``is_deepseek_dsa`` and ``unsupported`` mean nothing elsewhere).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang.rules_model import Frame
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

RULES: Mapping[str, str] = {
    "sglang.dsa_cache_layer_split.needs_dsa": "--enable-dsa-cache-layer-split with a model that is not DeepSeek "
                                              "Sparse Attention (0.5.16+)",
    "sglang.cp_decode_attn_tp.arch": "--enable-cp-decode-attn-tp with an architecture whose attention linears are "
                                     "not replicated across CP ranks (0.5.17+)",
    "sglang.intern_s2.parallel": "Intern-S2-Mobius with --pp-size or --ep-size other than 1 (0.5.18+)",
    "sglang.ernie45_vl.dp_attention": "ERNIE 4.5 VL MoE with attention DP (0.5.22+)",
    "sglang.hyv4.context_parallel": "HYV4 with --enable-prefill-cp or --dcp-size > 1 (0.5.20+)",
}

#: the rules whose entries do not read the architecture themselves: judged for these architectures only
BY_ARCH: Mapping[str, tuple[str, ...]] = {
    "sglang.intern_s2.parallel": ("InternS2MobiusForConditionalGeneration",),
    "sglang.ernie45_vl.dp_attention": ("Ernie4_5_VLMoeForConditionalGeneration",),
}

#: ``is_deepseek_dsa``'s architectures, by the first release of each list (0.5.16 ``configs/model_config.py
#: :107-118``, 0.5.19 L124-137, 0.5.20 L146-163; the same through 0.5.23, L193-210)
_DSA_0516 = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN",
             "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
             "GlmMoeDsaForCausalLMNextN", "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN")
_DSA_0519 = (*_DSA_0516, "Dots3NoteForCausalLM", "Dots3NoteForCausalLMNextN")
DSA_ARCHS: tuple[tuple[Version, tuple[str, ...]], ...] = (
    (Version("0.5.16"), _DSA_0516),
    (Version("0.5.19"), _DSA_0519),
    (Version("0.5.20"), (*_DSA_0519, "Glm5NextForConditionalGenerationNextN", "Glm5NextForConditionalGeneration",
                         "HYV4ForCausalLM", "HYV4ForCausalLMNextN")),
)

#: ``layers/cp/cp_decode_attn_tp.py:29-36``, the same in 0.5.17 - 0.5.23
CP_DECODE_ATTN_TP_SUPPORTED_ARCHS = ("DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN",
                                     "DeepseekV4ForCausalLMDSpark", "GlmMoeDsaForCausalLM",
                                     "GlmMoeDsaForCausalLMNextN")

#: ``parse_connector_type``: a ``instance://`` model path is ``ConnectorType.INSTANCE`` (0.5.23
#: ``connector/__init__.py``)
_INSTANCE_SCHEME = "instance://"


def _given(args: ResolvedArgs, dest: str, default: object) -> object:
    value = args.get(dest) if args.is_set(dest) else None
    return default if value is None else value


def _config(model: ModelSpec) -> dict[str, object] | None:
    try:
        config = json.loads(model.config_json) if model.config_json else None
    except ValueError:
        return None
    return config if isinstance(config, dict) else None


def is_deepseek_dsa(model: ModelSpec, listed: Version) -> bool | None:
    """``is_deepseek_dsa(hf_config)`` at ``listed``: False for an architecture outside the release's list; for one
    inside it, whether the checkpoint's ``config.json`` writes an ``index_topk`` (``getattr(config, "index_topk",
    None) is not None``). None (not claimed) where the config is not at hand or does not write it: the config class
    the release's transformers builds may default it."""
    arch = model.architectures[0] if model.architectures else ""
    archs = next((a for since, a in reversed(DSA_ARCHS) if listed >= since), DSA_ARCHS[0][1])
    if arch not in archs:
        return False
    config = _config(model)
    if config is None or "index_topk" not in config:
        return None
    return config["index_topk"] is not None


def _intern_s2_values(args: ResolvedArgs, layout: Layout) -> dict[str, object]:
    """``unsupported`` as the branch builds it: the pipeline size, and the expert-parallel size as it stands when
    the model branch runs, the line's ``--ep-size`` (the all-to-all backend's ``ep_size = tp_size`` comes later:
    0.5.18 ``_handle_a2a_moe`` runs after L3680, 0.5.23 ``pipeline.py:295`` after L225, and the post-process pass
    ``overrides.py _a2a_ep_size`` after both). DWDP sets ``ep_size`` first (0.5.23 ``parallel_hook.py:488``):
    with ``--dwdp-size`` above 1 the size is not claimed."""
    dwdp = _given(args, "dwdp_size", 1)
    if isinstance(dwdp, int) and dwdp > 1:
        return {}
    ep = _given(args, "ep_size", _given(args, "expert_parallel_size", 1))
    unsupported = []
    if layout.pipeline_parallel_size != 1:
        unsupported.append("pipeline parallelism (--pp-size must be 1)")
    if ep != 1:
        unsupported.append("expert parallelism (--ep-size must be 1)")
    return {"unsupported": unsupported, "'; '.join(unsupported)": "; ".join(unsupported)}


def frame(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version) -> Frame:
    """The values ``RULES``'s entries read at ``listed`` and the rules to judge (see the module docstring)."""
    path = args.get("model_path")
    if isinstance(path, str) and path.lower().startswith(_INSTANCE_SCHEME):
        return Frame({}, ())
    arch = model.architectures[0] if model.architectures else ""
    rules = [r for r in RULES if r not in BY_ARCH or arch in BY_ARCH[r]]
    values: dict[str, object] = {"model_arch": arch,
                                 "CP_DECODE_ATTN_TP_SUPPORTED_ARCHS": CP_DECODE_ATTN_TP_SUPPORTED_ARCHS}
    notes: list[str] = []
    for dest in ("enable_dsa_cache_layer_split", "enable_cp_decode_attn_tp"):
        if dest in args.values:
            values[dest] = bool(args.get(dest))
    dsa = is_deepseek_dsa(model, listed)
    if dsa is not None:
        values["is_deepseek_dsa"] = dsa
    else:
        # not left out only: the shared namespace's ``is_deepseek_dsa`` (rules_cache) would answer in its place
        rules.remove("sglang.dsa_cache_layer_split.needs_dsa")
    if dsa is None and values.get("enable_dsa_cache_layer_split"):
        notes.append(f"{arch}: whether its config makes it a DeepSeek Sparse Attention model (index_topk) is not "
                     "read: --enable-dsa-cache-layer-split is not judged")
    if arch in BY_ARCH["sglang.intern_s2.parallel"]:
        values.update(_intern_s2_values(args, layout))
    return Frame(values, tuple(rules), tuple(notes))


def judge(ask: Ask) -> Judged:
    """The rules ``frame`` names, in that frame over the shared namespace, and what it could not resolve."""
    framed = frame(ask.args, ask.model, ask.layout, ask.listed)
    in_frame = ask.book.judge(ask.version, {**ask.values, **framed.values}, rules=framed.rules)
    return Judged(in_frame.refusals, framed.notes + in_frame.not_judged)
