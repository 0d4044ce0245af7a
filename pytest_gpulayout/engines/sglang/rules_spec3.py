"""SGLang's refusals of speculative decoding beside other features, each read with the algorithm as the release
holds it at that point of its order.

The hooks before the speculative hook (0.5.23 ``arg_groups/pipeline.py``: model overrides l.225, linear
attention l.253, HiCache l.272, KV-cache sharding l.284, all before ``handle_speculative_decoding`` l.306; in
0.5.12 - 0.5.18 ``ServerArgs.__post_init__`` likewise calls ``_handle_model_specific_adjustments`` /
``_handle_hicache`` / ``_handle_dcp_validation`` before it, 0.5.18 ``server_args.py`` l.3650-3742) read
``--speculative-algorithm`` AS THE LINE TYPES IT: not upper-cased, ``NEXTN`` not yet ``EAGLE`` (``typed``), and
``--speculative-eagle-topk`` as given (None when not). The hooks after it (the unified memory pool l.338,
``check_server_args``) read it rewritten (``rules_spec.algorithm``: upper-cased from 0.5.12, ``NEXTN`` as
``EAGLE``); where the release may first promote EAGLE with a draft model to FROZEN_KV_MTP (0.5.12+, by the
draft's config, which is not read) those entries are not judged. In 0.5.23 ``--enable-return-aux-hidden-states``
resets the algorithm to None before any of them (``validation_hook.py:697-753``, ``pipeline.py`` l.94): no
entry here is judged then.

- Pipeline parallelism (``check_pipeline_parallel_compat``, 0.5.21+, 0.5.23 ``validation_hook.py:119-169``, run
  when ``pp_size > 1``): an algorithm other than DSPARK must be EAGLE without multi-layer EAGLE; with
  ``SGLANG_ENABLE_PP_SPEC`` it takes no disaggregation mode, no ``--speculative-adaptive`` and no attention DP
  (0.5.21: ``--enable-dp-attention``), without it only a PD prefill server; DSPARK refuses the variable. The
  DSPARK prefill requirement is ``sglang.spec.pipeline_parallel``.
- DeepSeek V4 (``apply_deepseek_v4_defaults``, 0.5.12+, for ``DeepseekV4ForCausalLM``; 0.5.23
  ``deepseek_v4_hook.py:147-157``): only EAGLE (from 0.5.16 also DSPARK), EAGLE with ``topk == 1`` (to
  0.5.15.post1 any algorithm): typed, so ``nextn`` or an unset top-k are refused.
- The unified memory pool (``--enable-unified-memory``, 0.5.15+; 0.5.23 ``kv_cache_hook.py:528-690``): no
  algorithm (0.5.15 - 0.5.17), DSPARK only (0.5.18 - 0.5.21), DSPARK / DFLASH / EAGLE / EAGLE3 (0.5.22+), not
  with PD over mooncake (0.5.21+), EAGLE / EAGLE3 not with a host-pool decode retraction or HiCache, and from
  0.5.22 a top-k of 1 after the speculative hook (``topk_after_hook``).
- HiCache with ``--dcp-size > 1`` (0.5.17+, ``resolve_hicache_dcp_compatibility``, 0.5.23 ``hicache_hook.py:
  129-146``): no algorithm (0.5.17), DSPARK only from 0.5.18 (typed: ``dspark`` is refused).
- HiSparse (0.5.22+, ``validate_hisparse`` from ``check_server_args``, 0.5.23 ``hisparse_hook.py:114-127``): a
  top-k of 1 after the speculative hook, no ``--speculative-adaptive``.
- KV-cache sharding (0.5.22+, ``handle_kv_cache_sharding``, first run before the speculative hook): no algorithm
  (0.5.22); 0.5.23 (``kv_shard_hook.py:105-118``) only typed ``EAGLE`` on GLM-5 DSA with one NextN layer, a
  given top-k of 1 and no multi-layer EAGLE.
- Linear-attention ReplaySSM spec (0.5.16 ``--enable-gdn-replayssm-spec``, 0.5.17+ ``--enable-linear-replayssm-
  spec``; 0.5.23 ``attention_hook.py:445-452``): the given top-k must be None or 1.
- IQuest Q1 (0.5.21+, ``model_overrides/iquest_q1.py:24-36``): typed EAGLE / NEXTN (any case), an FA3 or unset
  draft attention backend, a top-k of at most 1, no multi-layer EAGLE; its MTP draft handler (0.5.23
  ``speculative_hook.py:1014-1051``, in the EAGLE family's handler, before the top-k is chosen) needs a draft path
  other than the model's, no ``--speculative-token-map``, steps of at least 1, a top-k of None / 1 and draft
  tokens of None / steps + 1, the steps being the line's (without them the draft checkpoint's
  ``num_draft_slots``, not read: those entries are not judged). The checks of the draft's config between them
  (its class, widths, layer count) are not read either; each check the line fails is said.
- Decode context parallelism on CUDA (0.5.15 / 0.5.16 ``ServerArgs._handle_dcp_validation``, 0.5.16
  ``server_args.py:3140-3170``): ``--dcp-size > 1`` takes no algorithm.
- DSA DCP (0.5.22+, ``model_overrides/deepseek_v2.py _dsa_dcp_overrides``, 0.5.23 l.18-26, for the DeepSeek
  family's architectures whose config is DSA, ``rules_model2.is_deepseek_dsa``): with ``--dcp-size > 1`` the
  given top-k must be None or 1 (a model override: before the speculative hook).
- LayerNorm SP (0.5.19 - 0.5.22, ``layernorm_sp_hook.py validate_layernorm_sp``, 0.5.22 l.59-64, run after the
  speculative hook and only with ``--enable-layernorm-sp``): no algorithm.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang.rules_cache import IQUEST_ARCHS
from pytest_gpulayout.engines.sglang.rules_model2 import is_deepseek_dsa
from pytest_gpulayout.engines.sglang.rules_pd import retraction_backup, transfer_backend
from pytest_gpulayout.engines.sglang.rules_spec import EAGLE_FAMILY
from pytest_gpulayout.engines.sglang.rules_spec2 import env_bool, multi_layer_eagle, promotable
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged

RULES: Mapping[str, str] = {
    "sglang.spec3.pipeline_parallel": "PP with an algorithm other than single-layer EAGLE / DSPARK, or (0.5.21+) "
                                      "EAGLE outside a PD prefill server without SGLANG_ENABLE_PP_SPEC, or with it "
                                      "beside a disaggregation mode, --speculative-adaptive, attention DP or DSPARK",
    "sglang.spec3.deepseek_v4": "DeepSeek V4 with an algorithm other than EAGLE (0.5.16+: or DSPARK) as typed, or "
                                "EAGLE without --speculative-eagle-topk 1 (0.5.12+)",
    "sglang.spec3.unified_memory": "--enable-unified-memory with an algorithm it does not list, PD over mooncake, "
                                   "EAGLE / EAGLE3 beside a host-pool decode retraction or HiCache, or a top-k "
                                   "other than 1 (0.5.15+)",
    "sglang.spec3.hicache_dcp": "HiCache with --dcp-size > 1 and an algorithm other than DSPARK as typed (0.5.17+)",
    "sglang.spec3.hisparse": "--enable-hisparse with speculative decoding whose top-k is not 1, or with "
                             "--speculative-adaptive (0.5.22+)",
    "sglang.spec3.kv_cache_sharding": "--enable-kv-cache-sharding with speculative decoding (0.5.22; 0.5.23 other "
                                      "than EAGLE top-k 1 single-layer NextN on GLM-5 DSA)",
    "sglang.spec3.replayssm_topk": "--enable-linear-replayssm-spec (0.5.16 --enable-gdn-replayssm-spec) with "
                                   "--speculative-eagle-topk other than 1",
    "sglang.spec3.iquest_q1": "IQuest Q1 with an algorithm other than EAGLE / NEXTN as typed, a non-FA3 draft "
                              "attention backend, a top-k above 1 or multi-layer EAGLE (0.5.21+)",
    "sglang.spec3.iquest_q1_draft": "IQuest Q1's MTP draft without a --speculative-draft-model-path of its own, "
                                    "with --speculative-token-map, steps below 1, a top-k other than 1 or draft "
                                    "tokens other than steps + 1 (0.5.21+)",
    "sglang.spec3.dcp": "--dcp-size > 1 with speculative decoding on CUDA (0.5.15 / 0.5.16)",
    "sglang.spec3.dsa_dcp": "a DeepSeek DSA model (DeepSeek-V3.2, GLM-5) with --dcp-size > 1 and "
                            "--speculative-eagle-topk other than 1 (0.5.22+)",
    "sglang.spec3.layernorm_sp": "--enable-layernorm-sp with speculative decoding (0.5.19 - 0.5.22)",
}

PP_RULE = "sglang.spec3.pipeline_parallel"
DSV4_RULE = "sglang.spec3.deepseek_v4"
UNIFIED_RULE = "sglang.spec3.unified_memory"
HICACHE_DCP_RULE = "sglang.spec3.hicache_dcp"
HISPARSE_RULE = "sglang.spec3.hisparse"
SHARDING_RULE = "sglang.spec3.kv_cache_sharding"
REPLAYSSM_RULE = "sglang.spec3.replayssm_topk"
IQUEST_RULE = "sglang.spec3.iquest_q1"
IQUEST_DRAFT_RULE = "sglang.spec3.iquest_q1_draft"
DCP_RULE = "sglang.spec3.dcp"
DSA_DCP_RULE = "sglang.spec3.dsa_dcp"
LAYERNORM_SP_RULE = "sglang.spec3.layernorm_sp"

#: the architecture ``handle_model_specific_adjustments`` calls ``apply_deepseek_v4_defaults`` for (0.5.12
#: ``server_args.py`` l.1776-1784, 0.5.23 ``model_hook.py`` l.258-265)
DEEPSEEK_V4_ARCHS = frozenset({"DeepseekV4ForCausalLM"})
#: the architectures ``_deepseek_family_overrides`` is registered for, which calls ``_dsa_dcp_overrides`` for a
#: DSA config (0.5.22 / 0.5.23 ``model_overrides/deepseek_v2.py`` l.36-50, l.99-100)
DEEPSEEK_FAMILY_ARCHS = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "KimiK25ForConditionalGeneration", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration", "HYV4ForCausalLM",
    "HYV4ForCausalLMNextN", "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM"})
#: IQuest Q1's target, whose MTP draft the EAGLE family's handler checks (0.5.23 ``speculative_hook.py:1019``)
IQUEST_TARGET = "IQuestQ1ForCausalLM"
#: the release whose check_server_args first reads the aux-capture reset (0.5.23 ``validation_hook.py:697``)
AUX_CAPTURE_RESET_SINCE = Version("0.5.23")
#: DFLASH and DSPARK set the top-k to 1 in their handlers (0.5.22 ``speculative_hook.py`` l.338-348 / l.703-713,
#: 0.5.23 l.351-365 / l.774-788)
TOPK_ONE = ("DFLASH", "DSPARK")
#: NGRAM takes its top-k from ``--speculative-ngram-max-bfs-breadth`` (0.5.23 ``speculative_hook.py:1309-1313``),
#: whose default is 10 (0.5.22 ``arg_groups/fields/spec.py:259-262``)
NGRAM_BFS_BREADTH = 10
#: the first release whose speculative hook turns ``--speculative-adaptive`` off where it cannot run, before the
#: checks after the hook read it (0.5.21 ``speculative_hook.py`` ``_maybe_disable_adaptive``)
ADAPTIVE_FALLBACK_SINCE = Version("0.5.21")
#: from 0.5.22 attention DP is ``--attn-dp-size`` (``config_checks.ATTN_DP_SIZE_SINCE``)
ATTN_DP_SIZE_SINCE = Version("0.5.22")
#: the spellings under which the entries read the algorithm
_ALGORITHM_KEYS = ("speculative_algorithm", "cfg.speculative_algorithm", "self.speculative_algorithm",
                   "server_args.speculative_algorithm")
_PROMOTED = ("the release may promote EAGLE / NEXTN to FROZEN_KV_MTP for a Gemma 4 assistant draft, read from "
             "the draft's config, which is not read")


def typed(args: ResolvedArgs) -> str | None:
    """``--speculative-algorithm`` as the line types it (what the hooks before the speculative hook read)."""
    algo = args.get("speculative_algorithm")
    return algo if isinstance(algo, str) else None


def _given(args: ResolvedArgs, dest: str) -> object:
    return args.get(dest) if args.is_set(dest) else None


def _config(model: ModelSpec) -> dict[str, object] | None:
    try:
        config = json.loads(model.config_json) if model.config_json else None
    except ValueError:
        return None
    return config if isinstance(config, dict) else None


def _with_algorithm(frame: dict[str, object], algo: object) -> dict[str, object]:
    frame.update(dict.fromkeys(_ALGORITHM_KEYS, algo))
    return frame


def topk_after_hook(args: ResolvedArgs, values: Mapping[str, object], listed: Version) -> object:
    """``speculative_eagle_topk`` after the speculative hook (0.5.22+), or ``...`` where it is not resolved: 1 for
    DFLASH / DSPARK, the BFS breadth for NGRAM, the line's for the EAGLE family where the line gives the steps
    and the top-k (``auto_choose_speculative_params`` picks them by architecture otherwise, 0.5.23
    ``speculative_hook.py:1159-1174``) and no adaptive mode, promotion or IQuest draft changes them."""
    algo = values.get("speculative_algorithm")
    if algo in TOPK_ONE:
        return 1
    if algo == "NGRAM":
        breadth = args.get("speculative_ngram_max_bfs_breadth")
        return NGRAM_BFS_BREADTH if breadth is None else breadth
    given = values.get("speculative_eagle_topk")
    if algo in EAGLE_FAMILY and not promotable(values, listed) and not args.get("speculative_adaptive") \
            and values.get("speculative_num_steps") is not None and given is not None:
        return given
    return ...


def adaptive_after_hook(ask: Ask) -> bool | None:
    """``speculative_adaptive`` once ``_maybe_disable_adaptive`` has run (0.5.21+, 0.5.23 ``speculative_hook.py:
    260-264``; ``adaptive_unsupported_reason``, 0.5.23 ``speculative/adaptive_spec_params.py:56-100``): turned off
    for an algorithm other than EAGLE / EAGLE3, a given top-k other than 1, attention DP (0.5.21:
    ``--enable-dp-attention``), multi-layer EAGLE, two-batch overlap or PDMux (on CUDA no platform worker replaces
    the built-in one). None where it is not resolved (an earlier release, a promotion, a model override's
    multi-layer EAGLE)."""
    args, values = ask.args, ask.values
    if not args.get("speculative_adaptive"):
        return False
    if ask.listed < ADAPTIVE_FALLBACK_SINCE or promotable(values, ask.listed):
        return None
    if values.get("speculative_algorithm") not in ("EAGLE", "EAGLE3"):
        return False
    topk = values.get("speculative_eagle_topk")
    attn_dp = values.get("enable_dp_attention") if ask.listed < ATTN_DP_SIZE_SINCE else values.get("attn_dp_enabled_of")
    layered = multi_layer_eagle(args, ask.model)
    if (topk is not None and topk != 1) or attn_dp or layered or any(
            args.get(d) for d in ("enable_two_batch_overlap", "enable_pdmux")):
        return False
    return None if layered is None else True


def _set_adaptive(frame: dict[str, object], ask: Ask) -> None:
    adaptive = adaptive_after_hook(ask)
    frame.pop("speculative_adaptive", None)
    if adaptive is not None:
        frame["speculative_adaptive"] = adaptive


def _pp_frame(ask: Ask) -> dict[str, object]:
    """``check_pipeline_parallel_compat``'s reads: the rewritten algorithm (left out where it may be promoted),
    ``SGLANG_ENABLE_PP_SPEC`` (``EnvBool(False)``, 0.5.23 ``environ.py:1557``), the mode as given ('null' when
    none), ``speculative_adaptive`` as the speculative hook leaves it (``adaptive_after_hook``), multi-layer EAGLE
    (``rules_spec2.multi_layer_eagle``) and, from the shared values, attention DP."""
    values = ask.values
    frame = dict(values)
    _with_algorithm(frame, values.get("speculative_algorithm"))
    if promotable(values, ask.listed):
        for key in _ALGORITHM_KEYS:
            del frame[key]
    frame["envs.SGLANG_ENABLE_PP_SPEC.get()"] = env_bool(ask.env, "SGLANG_ENABLE_PP_SPEC")
    frame["disaggregation_mode"] = ask.args.get("disaggregation_mode") or "null"
    _set_adaptive(frame, ask)
    layered = multi_layer_eagle(ask.args, ask.model)
    if layered is not None:
        frame["enable_multi_layer_eagle"] = layered
    else:
        frame.pop("enable_multi_layer_eagle", None)
    return frame


def _unified_frame(ask: Ask) -> dict[str, object]:
    """``handle_unified_memory_pool``'s reads after the speculative hook (see the module)."""
    args, values = ask.args, ask.values
    frame = _with_algorithm(dict(values), values.get("speculative_algorithm"))
    if promotable(values, ask.listed):
        for key in _ALGORITHM_KEYS:
            del frame[key]
    frame["disaggregation_mode"] = args.get("disaggregation_mode") or "null"
    frame["disaggregation_transfer_backend"] = transfer_backend(args)
    frame["disaggregation_decode_retraction_backup"] = retraction_backup(args, ask.listed)
    frame["enable_hierarchical_cache"] = bool(args.get("enable_hierarchical_cache", False))
    topk = topk_after_hook(args, values, ask.listed)
    frame.pop("speculative_eagle_topk", None)
    if topk is not ...:
        frame["speculative_eagle_topk"] = topk
    return frame


def _hisparse_frame(ask: Ask) -> dict[str, object]:
    """``validate_hisparse``'s speculative reads in ``check_server_args`` (after the speculative hook)."""
    values = ask.values
    algo = values.get("speculative_algorithm")
    frame = _with_algorithm(dict(values), algo)
    frame["enable_spec"] = isinstance(algo, str) and algo.upper() != "NONE"   # 0.5.23 hisparse_hook.py:114-117
    _set_adaptive(frame, ask)
    topk = topk_after_hook(ask.args, values, ask.listed)
    frame.pop("speculative_eagle_topk", None)
    if topk is not ...:
        frame["speculative_eagle_topk"] = topk
    return frame


def _typed_frame(ask: Ask, algo: str | None) -> dict[str, object]:
    """The shared values with the algorithm as typed and the top-k as given (the hooks before the speculative
    hook), multi-layer EAGLE as ``rules_spec2.multi_layer_eagle`` resolves it."""
    frame = _with_algorithm(dict(ask.values), algo)
    frame["speculative_eagle_topk"] = _given(ask.args, "speculative_eagle_topk")
    layered = multi_layer_eagle(ask.args, ask.model)
    if layered is not None:
        frame["enable_multi_layer_eagle"] = layered
    else:
        frame.pop("enable_multi_layer_eagle", None)
    return frame


def _judge(ask: Ask, frame: Mapping[str, object], rules: list[str]) -> Judged:
    """``rules`` in force over ``frame`` alone (a key left out of it stays out)."""
    wanted = ask.among(rules)
    return ask.book.judge(ask.version, frame, rules=wanted) if wanted else Judged()


def judge(ask: Ask) -> Judged:
    """Each rule of this module whose hook the line reaches, in its frame; what was left out, in words."""
    args, values, listed = ask.args, ask.values, ask.listed
    if listed >= AUX_CAPTURE_RESET_SINCE and args.get("enable_return_aux_hidden_states"):
        return Judged()               # the algorithm names the capture convention only: reset to None
    arch = ask.model.architectures[0] if ask.model.architectures else ""
    algo = typed(args)
    parts: list[Judged] = []
    notes: list[str] = []
    may_promote = promotable(values, listed)
    if values.get("pp_size", 1) != 1 and values.get("speculative_algorithm") is not None:
        parts.append(_judge(ask, _pp_frame(ask), [PP_RULE]))
        if may_promote:
            notes.append(f"pipeline parallelism's speculative checks ({PP_RULE}): {_PROMOTED}")
    if algo is not None and arch in DEEPSEEK_V4_ARCHS:
        frame = _typed_frame(ask, algo)
        frame["model_arch"] = arch
        parts.append(_judge(ask, frame, [DSV4_RULE]))
    if args.get("enable_unified_memory") and values.get("speculative_algorithm") is not None:
        parts.append(_judge(ask, _unified_frame(ask), [UNIFIED_RULE]))
        if may_promote:
            notes.append(f"the unified memory pool's speculative checks ({UNIFIED_RULE}): {_PROMOTED}")
    dcp = values.get("dcp_size")
    dcp_over_one = isinstance(dcp, int) and dcp > 1
    if algo is not None and dcp_over_one and args.get("enable_hierarchical_cache"):
        parts.append(_judge(ask, _typed_frame(ask, algo), [HICACHE_DCP_RULE]))
    if algo is not None and dcp_over_one:
        parts.append(_judge(ask, _typed_frame(ask, algo), [DCP_RULE]))
    if dcp_over_one and arch in DEEPSEEK_FAMILY_ARCHS and _given(args, "speculative_eagle_topk") is not None:
        dsa = is_deepseek_dsa(ask.model, listed)
        if dsa:
            parts.append(_judge(ask, _typed_frame(ask, algo), [DSA_DCP_RULE]))
        elif dsa is None and ask.among([DSA_DCP_RULE]):
            notes.append(f"{arch}: whether its config is DeepSeek sparse attention (index_topk) is not read: "
                         f"{RULES[DSA_DCP_RULE]} is not judged")
    if args.get("enable_layernorm_sp") and values.get("speculative_algorithm") is not None:
        parts.append(_judge(ask, _with_algorithm(dict(values), values.get("speculative_algorithm")),
                            [LAYERNORM_SP_RULE]))
    if args.get("enable_hisparse") and values.get("speculative_algorithm") is not None:
        parts.append(_judge(ask, _hisparse_frame(ask), [HISPARSE_RULE]))
    if algo is not None and args.get("enable_kv_cache_sharding"):
        frame = _typed_frame(ask, algo)
        config = _config(ask.model)
        if config is not None and "num_nextn_predict_layers" in config:
            frame["model_config.num_nextn_predict_layers"] = config["num_nextn_predict_layers"]
        frame["model_config.hf_config.architectures[0]"] = arch
        parts.append(_judge(ask, frame, [SHARDING_RULE]))
    if any(args.get(d) for d in ("enable_linear_replayssm_spec", "enable_gdn_replayssm_spec")):
        frame = _typed_frame(ask, algo)
        for dest in ("enable_linear_replayssm_spec", "enable_gdn_replayssm_spec"):
            frame[dest] = bool(args.get(dest, False))
        parts.append(_judge(ask, frame, [REPLAYSSM_RULE]))
    if arch in IQUEST_ARCHS:
        frame = _typed_frame(ask, algo)
        frame["speculative_draft_attention_backend"] = _given(args, "speculative_draft_attention_backend")
        frame["enable_multi_layer_eagle"] = bool(args.get("enable_multi_layer_eagle", False))
        parts.append(_judge(ask, frame, [IQUEST_RULE]))
    if arch == IQUEST_TARGET and values.get("speculative_algorithm") in EAGLE_FAMILY:
        # the MTP draft handler returns for any other target and runs inside the EAGLE family's handler
        frame = {dest: _given(args, dest) for dest in ("speculative_draft_model_path", "speculative_eagle_topk",
                                                       "speculative_num_draft_tokens", "speculative_token_map")}
        frame["model_path"] = args.get("model_path")
        steps = _given(args, "speculative_num_steps")
        if steps is not None:
            frame["steps"] = steps    # else the draft checkpoint's num_draft_slots: not read
        parts.append(_judge(ask, frame, [IQUEST_DRAFT_RULE]))
    refusals = tuple(r for j in parts for r in j.refusals)
    return Judged(refusals, tuple(dict.fromkeys((*notes, *(n for j in parts for n in j.not_judged)))))
