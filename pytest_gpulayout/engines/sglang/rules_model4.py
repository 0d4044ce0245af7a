"""SGLang's refusals of DeepSeek-V4 / V4.1, of DeepSeek's sparse-attention (DSA) overrides and of the other model
branches a command line reaches (MiMo-V2, Nemotron-H, MiniCPM, Kimi-K3, context parallelism by model), by release.

- DeepSeek-V4 prefill context parallelism (``arg_groups/deepseek_v4_hook.py validate_deepseek_v4_cp``, called for
  ``DeepseekV4ForCausalLM`` only: 0.5.12 ``server_args.py:2005``, 0.5.19 ``arg_groups/model_hook.py:332``, 0.5.23
  L495-505). It returns unless prefill CP is on (0.5.12 ``--enable-nsa-prefill-context-parallel``, 0.5.13 the DSA
  spelling, from 0.5.14 ``enable_prefill_cp`` after the legacy aliases); then it wants the round-robin split
  (0.5.12 - 0.5.13), the interleave strategy (0.5.14 - 0.5.20) or interleave / zigzag with zigzag refused off NPU
  (0.5.21+), one DP group (``dp_size == 1`` up to 0.5.21; from 0.5.22 the attention-DP width
  ``context_parallel_attn_dp_size`` returns, ``attn_dp_size * dp_size``: 0.5.23 ``model_override_base.py:229-247``)
  and TP of at most 8;
- ``--dsv4-attn-backend flashmla_mega`` off DeepSeek-V4.1 (``model_type: deepseek_v41``) or off SM100 (0.5.23
  ``deepseek_v4_hook.py:95``: ``auto`` picks it only where the assert holds, L45-59);
- ``--enable-encoder-swa-bounded-replay`` with a model that is not DeepSeek-V4.1: the V4 branch's
  ``validate_deepseek_v41_features`` (0.5.21 L177, 0.5.23 L278) and, in 0.5.23, ``handle_model_capability_adjustments``
  for every model (``model_hook.py:1038-1045``);
- DSA prefill CP in the DeepSeek family's override (0.5.15 - 0.5.18 ``arg_groups/overrides.py
  _deepseek_family_overrides``, from 0.5.19 ``model_overrides/deepseek_v2.py``): the interleave split with DP (up
  to 0.5.21) and TP above 8;
- two-batch overlap with DSA index-topk sharing (0.5.13 ``server_args.py:1867-1879``, 0.5.20 ``model_hook.py:55-75``):
  ``index_topk_freq`` / ``index_topk_pattern`` / ``indexer_types`` as the checkpoint's ``config.json`` writes them
  (``getattr`` with the defaults 1 / None / None: a config that writes none of them shares nothing);
- MiMo-V2's fused qkv_proj: the effective attention TP size against the checkpoint's ``num_key_value_heads`` when
  its ``attention_projection_layout`` is ``fused_qkv`` (``configs/model_config.py get_mimo_v2_fused_qkv_expected_tp_
  size``; 0.5.11 ``server_args.py:1988-2012``, 0.5.23 ``model_hook.py:558-584``);
- Nemotron-H with a ModelOpt quantization whose ``mlp_hidden_act`` is not relu2 (0.5.6 ``server_args.py:1203`` ...
  0.5.23 ``model_overrides/nemotron_h.py:44``);
- MiniCPM with attention DP (0.5.19+ ``model_overrides/minicpm.py``); Kimi-K3 with DCP and a decode attention
  backend its branch does not take (0.5.17 ``overrides.py:425`` ... 0.5.23 ``model_overrides/kimi_k3.py:110``);
- context parallelism by model (0.5.20+ ``parallel_hook.py handle_context_parallelism`` /
  ``_boundary_parallelism_overrides``): Nemotron-H with ``--attn-cp-size > 1``, DeepSeek-V3.2 with the zigzag
  strategy, MiMo-V2 prefill CP in a strategy other than zigzag.

A remote-instance model path (``instance://``) returns before every model branch (0.5.23 ``model_hook.py:160-163``,
``parallel_hook.py:105``): none of these is judged for it. ``frame(args, model, layout, listed, values)`` gives the
values, in a frame of its own over the shared namespace (``attn_dp_size``, ``model_type`` and ``decode_backend``
mean here what these entries read).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang import rules_model3
from pytest_gpulayout.engines.sglang.rules_model import ARCH_CONSTANTS, Frame, gpu_values
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

RULES: Mapping[str, str] = {
    "sglang.deepseek_v4.prefill_cp": "DeepSeek-V4 prefill context parallelism in a split / strategy it does not take "
                                     "(zigzag off NPU from 0.5.21), with DP or attention DP, or with --tp-size above 8",
    "sglang.deepseek_v4.flashmla_mega": "--dsv4-attn-backend flashmla_mega with a model other than DeepSeek-V4.1 or "
                                        "off SM100 (0.5.23)",
    "sglang.deepseek_v41.encoder_replay": "--enable-encoder-swa-bounded-replay with a model other than DeepSeek-V4.1 "
                                          "(0.5.21+)",
    "sglang.dsa.prefill_cp_overrides": "DeepSeek sparse-attention prefill CP in the interleave split with --dp-size "
                                       "> 1 (0.5.15 - 0.5.21), or with --tp-size above 8 (0.5.15+)",
    "sglang.dsa.tbo_index_sharing": "--enable-two-batch-overlap with a DSA checkpoint that shares index top-k across "
                                    "layers (0.5.13+)",
    "sglang.mimo_v2.attn_tp_size": "MiMo-V2 with a fused qkv_proj whose TP interleave the effective attention TP "
                                   "size does not match (0.5.11+)",
    "sglang.nemotron_h.modelopt_relu2": "Nemotron-H with a ModelOpt quantization and an mlp_hidden_act other than "
                                        "relu2",
    "sglang.minicpm.dp_attention": "MiniCPM with attention DP (0.5.19+)",
    "sglang.kimi_k3.dcp_decode_backend": "Kimi-K3 with --dcp-size > 1 and a decode attention backend other than "
                                         "cutedsl_mla / tokenspeed_mla / aiter as the release lists them (0.5.17+)",
    "sglang.cp.model_limits": "Nemotron-H with --attn-cp-size > 1, DeepSeek-V3.2 prefill CP in the zigzag strategy, "
                              "MiMo-V2 prefill CP in a strategy other than zigzag (0.5.20+)",
}

V4 = "DeepseekV4ForCausalLM"
V41_MODEL_TYPE = "deepseek_v41"
#: the spelling of prefill CP ``validate_deepseek_v4_cp`` returns without, by the first release of each (0.5.12
#: ``deepseek_v4_hook.py:66``, 0.5.13 L59, 0.5.14 L77 ``enable_prefill_cp`` after ``_handle_legacy_cp_arguments``)
V4_CP_FLAG: tuple[tuple[Version, str], ...] = (
    (Version("0.5.12"), "enable_nsa_prefill_context_parallel"),
    (Version("0.5.13"), "enable_dsa_prefill_context_parallel"),
    (Version("0.5.14"), "enable_prefill_cp"),
)
#: the first release whose V4 CP check reads the attention-DP width (``context_parallel_attn_dp_size``, 0.5.22
#: ``deepseek_v4_hook.py:170-180``) in place of ``dp_size``; the same release moves ``--enable-dp-attention``'s
#: width into ``attn_dp_size`` first (``parallel_hook.py handle_deprecated_dp_attention``)
V4_ATTN_DP_SINCE = Version("0.5.22")
#: ``validate_deepseek_v41_features`` (first in 0.5.21) runs for the V4 architecture only (0.5.23 ``model_hook.py
#: :495-505``); ``handle_model_capability_adjustments``'s check (0.5.23 L1038-1045) for every model
V41_FEATURES_ENTRY_FILE = "sglang/srt/arg_groups/deepseek_v4_hook.py"

#: the architectures ``_deepseek_family_overrides`` is registered for (0.5.23 ``model_overrides/deepseek_v2.py:
#: 36-49``; 0.5.15 ``overrides.py`` the same less the ones the release does not know yet)
DEEPSEEK_FAMILY = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration",
                   "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
                   "Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
                   "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM")
#: from 0.5.20 the TBO check is a function of its own (``model_hook.py _validate_dsa_tbo_index_sharing``) whose
#: entry holds no architecture test: it is called for the DSA branch's list with ``is_deepseek_dsa`` (0.5.20
#: ``model_hook.py:264-286``, 0.5.23 L267-301) and returns without two-batch overlap (L57-58)
TBO_FUNCTION_SINCE = Version("0.5.20")
DSA_BRANCH = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration",
              "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
              "Glm5NextForConditionalGeneration", "HYV4ForCausalLM", "HYV4ForCausalLMNextN",
              "LongcatFlashForCausalLM", "Dots3NoteForCausalLM")
TBO_FUNCTION = "_validate_dsa_tbo_index_sharing"

MIMO_V2 = ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM")
#: the effective attention TP size is ``derive_attn_tp_size`` over ``--attn-dp-size`` from 0.5.22 (0.5.23
#: ``model_hook.py:561-565``); before, TP over DP where attention DP is on (0.5.21 L538-540)
MIMO_ATTN_DP_SINCE = Version("0.5.22")
#: ``attention_projection_layout: split`` reads as unset from 0.5.22 (0.5.23 ``configs/model_config.py:126``);
#: before, any value other than ``fused_qkv`` raises the helper's own ValueError (0.5.21 L124-133): not judged
MIMO_SPLIT_SINCE = Version("0.5.22")

NEMOTRON_H = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM")
#: the ModelOpt quantizations the branch's ``is_modelopt`` lists, by release (0.5.6 ``server_args.py:1203``;
#: ``modelopt_mixed`` from 0.5.10, L1927)
MODELOPT: tuple[tuple[Version, tuple[str, ...]], ...] = (
    (Version("0.4.6"), ("modelopt", "modelopt_fp8", "modelopt_fp4")),
    (Version("0.5.10"), ("modelopt", "modelopt_fp8", "modelopt_fp4", "modelopt_mixed")),
)
MINICPM = ("MiniCPMForCausalLM", "MiniCPMSALAForCausalLM")
KIMI_K3 = "KimiK3ForConditionalGeneration"
#: ``_boundary_parallelism_overrides``' model types (0.5.23 ``parallel_hook.py:60-61``)
NEMOTRON_MODEL_TYPES = ("nemotron_h", "nemotron_h_puzzle")
V32 = "DeepseekV32ForCausalLM"
INSTANCE_CONDITION = "parse_connector_type(cfg.model_path) != ConnectorType.INSTANCE"

_INSTANCE_SCHEME = "instance://"


def _given(args: ResolvedArgs, dest: str) -> object:
    return args.get(dest) if args.is_set(dest) else None


def _config(model: ModelSpec) -> dict[str, object] | None:
    try:
        config = json.loads(model.config_json) if model.config_json else None
    except ValueError:
        return None
    return config if isinstance(config, dict) else None


def _text_config(config: dict[str, object]) -> dict[str, object]:
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _by_release(table: tuple[tuple[Version, str], ...], listed: Version) -> str | None:
    chosen = None
    for since, value in table:
        if listed >= since:
            chosen = value
    return chosen


def _deepseek_v4(args: ResolvedArgs, listed: Version, ask_values: Mapping[str, object], dsa: Mapping[str, object],
                 config: dict[str, object] | None, rules: list[str]) -> dict[str, object]:
    """The V4 branch's values: prefill CP as the check reads it (its flag, split mode / strategy, DP or the
    attention-DP width, TP), ``--dsv4-attn-backend`` as given and the checkpoint's ``model_type``."""
    out: dict[str, object] = {"dsv4_attn_backend": args.get("dsv4_attn_backend")}
    flag = _by_release(V4_CP_FLAG, listed)
    enabled = dsa.get("enable_prefill_cp") if flag == "enable_prefill_cp" else (
        args.get(flag) if flag is not None else None)
    if not enabled:
        rules.remove("sglang.deepseek_v4.prefill_cp")     # the check returns at once (0.5.23 L164-165)
    for dest in ("nsa_prefill_cp_mode", "dsa_prefill_cp_mode"):
        if dest in args.values:
            out[dest] = args.get(dest)
    if "cp_strategy" in dsa:
        out["cp_strategy"] = dsa["cp_strategy"]
    if listed >= V4_ATTN_DP_SINCE:
        attn_dp, dp = ask_values.get("attn_dp_size"), ask_values.get("dp_size")
        if isinstance(attn_dp, int) and isinstance(dp, int):
            out["attn_dp_size"] = attn_dp * dp
    if config is not None and isinstance(config.get("model_type"), str):
        out["model_type"] = config["model_type"]
    return out


def _nemotron_h(args: ResolvedArgs, model: ModelSpec, config: dict[str, object] | None, listed: Version,
                rules: list[str], notes: list[str]) -> dict[str, object]:
    """``is_modelopt`` and ``mlp_hidden_act``: the line's ``--quantization``, else the checkpoint's
    ``quantization_config.quant_method``; the act as ``config.json`` writes it (SGLang's ``NemotronHConfig`` defaults
    it to relu2: 0.5.23 ``configs/nemotron_h.py:258``). A relu2 model is never refused; another one without a
    quantization on the line or in ``config.json`` is not judged (a ModelOpt checkpoint may say so in
    ``hf_quant_config.json`` only)."""
    rule = "sglang.nemotron_h.modelopt_relu2"
    act = config.get("mlp_hidden_act", "relu2") if config is not None else None
    if act == "relu2":
        rules.remove(rule)
        return {}
    quant = args.get("quantization")
    if quant is None and config is not None:
        qc = config.get("quantization_config")
        quant = qc.get("quant_method") if isinstance(qc, dict) else None
    if act is None or quant is None:
        rules.remove(rule)
        notes.append(f"{model.architectures[0]}: whether the checkpoint is ModelOpt-quantized (hf_quant_config.json) "
                     "or its mlp_hidden_act is not read: its relu2 check is not judged")
        return {}
    listed_quants = next(q for since, q in reversed(MODELOPT) if listed >= since)
    return {"self.model_config.quantization": quant, "model_config.quantization": quant,
            "is_modelopt": quant in listed_quants, "mlp_hidden_act": act}


def _mimo_v2(ask_values: Mapping[str, object], config: dict[str, object] | None, listed: Version,
             rules: list[str]) -> dict[str, object]:
    """The expected and effective attention TP sizes (see the module docstring)."""
    rule = "sglang.mimo_v2.attn_tp_size"
    out: dict[str, object] = {}
    layout = config.get("attention_projection_layout") if config is not None else None
    if config is None or (layout not in (None, "fused_qkv") and not (layout == "split" and listed >= MIMO_SPLIT_SINCE)):
        rules.remove(rule)   # no config, or a layout the helper refuses in words of its own
        return out
    heads = _text_config(config).get("num_key_value_heads") if layout == "fused_qkv" else None
    if layout == "fused_qkv" and _int(heads) is None:
        rules.remove(rule)
        return out
    out["expected_attn_tp_size"] = heads
    tp, cp = ask_values.get("tp_size"), ask_values.get("attn_cp_size")
    if listed >= MIMO_ATTN_DP_SINCE:
        width = ask_values.get("attn_dp_size")
    else:
        width = ask_values.get("dp_size") if ask_values.get("enable_dp_attention") else 1
    if all(isinstance(v, int) and v > 0 for v in (tp, cp, width)):
        assert isinstance(tp, int) and isinstance(cp, int) and isinstance(width, int)
        out["effective_attn_tp_size"] = tp // width // cp
    return out


def _kimi_k3(args: ResolvedArgs, rules: list[str], notes: list[str]) -> dict[str, object]:
    """``decode_backend``: ``attention_backends_of`` over the line's backends (the split flag, else
    ``--attention-backend``, else None: 0.5.23 ``model_override_base.py:138-152``). Deterministic inference picks an
    attention backend first (0.5.23 ``attention_hook.py``): then not judged."""
    if bool(args.get("enable_deterministic_inference", False)):
        rules.remove("sglang.kimi_k3.dcp_decode_backend")
        notes.append("Kimi-K3: the attention backend --enable-deterministic-inference picks is not resolved: its DCP "
                     "decode-backend check is not judged")
        return {}
    decode = _given(args, "decode_attention_backend") or _given(args, "attention_backend")
    return {"decode_backend": decode}


def frame(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version,
          ask_values: Mapping[str, object]) -> Frame:
    """The values ``RULES``'s entries read at ``listed`` and the rules to judge (see the module docstring)."""
    path = args.get("model_path")
    if isinstance(path, str) and path.lower().startswith(_INSTANCE_SCHEME):
        return Frame({}, ())
    arch = model.architectures[0] if model.architectures else ""
    config = _config(model)
    rules = list(RULES)
    notes: list[str] = []
    dsa = rules_model3.frame(args, model, layout, listed).values
    values: dict[str, object] = {"model_arch": arch, INSTANCE_CONDITION: True, **ARCH_CONSTANTS,
                                 **gpu_values(layout, listed)}
    for dest in ("enable_prefill_cp", "cp_strategy"):
        if dest in dsa:
            values[dest] = dsa[dest]
    values["enable_encoder_swa_bounded_replay"] = bool(args.get("enable_encoder_swa_bounded_replay", False))
    if config is not None and isinstance(config.get("model_type"), str):
        values["getattr(hf_config, 'model_type', None)"] = config["model_type"]
        values["model_config_of(server_args).hf_config.model_type"] = config["model_type"]
    if arch == V4:
        values.update(_deepseek_v4(args, listed, ask_values, dsa, config, rules))
    else:
        rules = [r for r in rules if not r.startswith("sglang.deepseek_v4.")]
    # DSA: ``is_deepseek_dsa`` where ``config.json`` tells it (rules_model3); the family override's registry
    nsa = dsa.get("is_deepseek_dsa")
    dsa_rules = ("sglang.dsa.prefill_cp_overrides", "sglang.dsa.tbo_index_sharing")
    if nsa is None or arch not in DEEPSEEK_FAMILY:
        rules = [r for r in rules if r not in dsa_rules]
        if arch in DEEPSEEK_FAMILY and bool(args.get("enable_two_batch_overlap", False)):
            notes.append(f"{arch}: whether its config makes it a DeepSeek sparse-attention model (index_topk) is not "
                         "read: its two-batch-overlap index-sharing check is not judged")
    else:
        values["is_deepseek_dsa"] = nsa
        values["enable_two_batch_overlap"] = bool(args.get("enable_two_batch_overlap", False))
        assert config is not None     # is_deepseek_dsa is claimed only from a config
        values["index_topk_freq"] = config.get("index_topk_freq", 1)
        if listed >= TBO_FUNCTION_SINCE:
            values["index_topk_freq"] = values["index_topk_freq"] or 1
            if not (nsa and arch in DSA_BRANCH and values["enable_two_batch_overlap"]):
                rules.remove("sglang.dsa.tbo_index_sharing")   # not called, or it returns at once
        values["index_topk_pattern"] = config.get("index_topk_pattern")
        values["indexer_types"] = config.get("indexer_types")
    if arch in MIMO_V2:
        values.update(_mimo_v2(ask_values, config, listed, rules))
    else:
        rules.remove("sglang.mimo_v2.attn_tp_size")
    values["encoder_only"] = bool(args.get("encoder_only", False))
    if arch in NEMOTRON_H:
        values.update(_nemotron_h(args, model, config, listed, rules, notes))
    else:
        rules.remove("sglang.nemotron_h.modelopt_relu2")
    if arch not in MINICPM:
        rules.remove("sglang.minicpm.dp_attention")
    if arch == KIMI_K3:
        values.update(_kimi_k3(args, rules, notes))
    else:
        rules.remove("sglang.kimi_k3.dcp_decode_backend")
    model_type = _text_config(config).get("model_type") if config is not None else None
    if model_type is None and "sglang.cp.model_limits" in rules:
        rules.remove("sglang.cp.model_limits")
        cp = ask_values.get("attn_cp_size")
        if (isinstance(cp, int) and cp > 1) or values.get("enable_prefill_cp"):
            notes.append(f"{arch}: the model type its config gives is not read: its context-parallel model checks "
                         "are not judged")
    values["nemotron"] = model_type in NEMOTRON_MODEL_TYPES
    values["longcat"] = model_type == "longcat_flash"
    return Frame(values, tuple(rules), tuple(notes))


def judge(ask: Ask) -> Judged:
    """The rules ``frame`` names, in that frame over the shared namespace, and what it could not resolve. The
    encoder-replay entry of ``validate_deepseek_v41_features`` is judged for the V4 architecture only (see
    ``V41_FEATURES_ENTRY_FILE``): the rule's other entry for every model."""
    framed = frame(ask.args, ask.model, ask.layout, ask.listed, ask.values)
    wanted = ask.among(framed.rules)
    if not wanted:
        return Judged((), framed.notes)
    judged = ask.book.judge(ask.version, {**ask.values, **framed.values}, rules=wanted)
    arch = ask.model.architectures[0] if ask.model.architectures else ""
    refusals = tuple(r for r in judged.refusals if not (
        r.rule == "sglang.deepseek_v41.encoder_replay" and r.source.startswith(V41_FEATURES_ENTRY_FILE)
        and arch != V4))
    return Judged(refusals, framed.notes + judged.not_judged)
