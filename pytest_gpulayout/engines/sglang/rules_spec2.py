"""More of SGLang's config-time refusals about speculative decoding: the environment variables its checks read,
the features it does not combine with a draft, and the draft-token counts DFLASH and DSPARK derive.

Each rule is judged in a frame of its own over the shared namespace (``config_checks.namespace``, which holds
``rules_spec.values``: the algorithm as the release reads it, upper-cased from 0.5.12 and ``NEXTN`` as ``EAGLE``,
and the speculative widths as the line gives them):

- the environment (``Ask.env``: the launch's variables) is read as ``environ.py`` parses a boolean (``EnvBool``:
  ``true`` / ``1`` / ``yes`` / ``y`` and ``false`` / ``0`` / ``no`` / ``n``, any case; another word warns and
  leaves the default, 0.5.23 ``environ.py:143-150`` and ``EnvField.get`` L67-86); every variable read here
  defaults to false in each release that reads it (0.5.7 ``environ.py:362``, 0.5.10 L288, 0.5.21 L1373);
- where the release may first promote ``EAGLE`` / ``NEXTN`` to ``FROZEN_KV_MTP`` (from 0.5.12, by the
  architecture in the draft model's config: ``--speculative-draft-model-path`` given), a check that reads the
  algorithm after that promotion is not judged (said), as in ``rules_spec``;
- ``--enable-multi-layer-eagle`` is the line's, except for the architectures whose model overrides turn it on
  for EAGLE (MiMo-V2 and Step 3.5 / 3.7 from 0.5.13, 0.5.14 ``server_args.py:3969`` / L4001, 0.5.16
  ``arg_groups/overrides.py:453`` / L1088; GigaChat 3.5 from 0.5.21, 0.5.23 ``model_overrides/gigachat35.py:20-22``):
  there it is not resolved (the entries that read it are not judged).
"""

from __future__ import annotations

from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang.rules_spec import (
    ALGORITHM_UPPER_SINCE,
    EAGLE_FAMILY,
    _pd_frame,
    _rejection_frame,
)
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged

RULES: Mapping[str, str] = {
    "sglang.spec2.decode_radix_cache": "--disaggregation-decode-enable-radix-cache on a decode server with a "
                                       "speculative algorithm other than EAGLE / EAGLE3 / DSPARK (0.5.23)",
    "sglang.spec2.spec_v2_topk": "SGLANG_ENABLE_SPEC_V2 with EAGLE / EAGLE3 (/ STANDALONE) and "
                                 "--speculative-eagle-topk > 1 (0.5.7 - 0.5.10)",
    "sglang.spec2.dp_spec_coordination": "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION without single-layer EAGLE / "
                                         "EAGLE3 (/ DSPARK from 0.5.22), with or without an algorithm (0.5.21+)",
    "sglang.spec2.dflash_coordination": "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION with DFLASH and attention DP "
                                        "(0.5.23)",
    "sglang.spec2.staging_buffer": "SGLANG_DISAGG_STAGING_BUFFER on a PD server whose transfer backend is not "
                                   "mooncake (or, from 0.5.12, nixl) (0.5.10+)",
    "sglang.spec2.features": "speculative decoding with --attention-backend flex_attention (0.5.3+), DWDP "
                             "(0.5.17+), --weight-cache-mode (0.5.17+) or LMCache (0.5.21+)",
    "sglang.spec2.watermark": "--enable-watermark with an algorithm other than NGRAM / EAGLE / EAGLE3, with "
                              "pipeline-parallel speculative decoding, or with rejection sampling (0.5.22+)",
    "sglang.spec2.multi_layer_rejection": "--speculative-use-rejection-sampling with multi-layer EAGLE (0.5.14 / "
                                          "0.5.15), or with it and a top-k other than 1 (0.5.16+)",
    "sglang.spec2.dflash_window": "DFLASH with a draft window smaller than its draft-token count (0.5.11+)",
    "sglang.spec2.uno_fa3": "UNO with a prefill or decode attention backend other than fa3 (0.5.20+)",
    "sglang.spec2.dspark_draft_tokens": "DSPARK with --speculative-num-draft-tokens other than "
                                        "--speculative-dspark-block-size + 1 (0.5.16+)",
}

#: the architectures (by prefix) whose model overrides turn on multi-layer EAGLE (see the module docstring)
MULTI_LAYER_ARCHS = ("MiMoV2", "Step3p5", "Step3p7", "GigaChat35")
#: ``EnvBool.parse`` (0.5.23 ``environ.py:143-150``)
_TRUE = ("true", "1", "yes", "y")
_FALSE = ("false", "0", "no", "n")
_ENV_RULES = ("sglang.spec2.spec_v2_topk", "sglang.spec2.dp_spec_coordination", "sglang.spec2.staging_buffer")
#: judged only for DFLASH (its entry sits in ``_handle_dflash`` and does not read the algorithm)
_DFLASH_ENV_RULE = "sglang.spec2.dflash_coordination"
_PROMOTED = ("the release may promote EAGLE / NEXTN to FROZEN_KV_MTP for a Gemma 4 assistant draft, read from "
             "the draft's config, which is not read")


def env_bool(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    """``envs.<name>.get()`` of a boolean variable as the release parses it (see ``_TRUE``)."""
    value = env.get(name)
    if value is None:
        return default
    word = value.lower()
    return True if word in _TRUE else False if word in _FALSE else default


def promotable(values: Mapping[str, object], listed: Version) -> bool:
    """Whether the release may turn this line's EAGLE into FROZEN_KV_MTP (EAGLE with a draft model, 0.5.12+)."""
    return (values.get("speculative_algorithm") == "EAGLE" and listed >= ALGORITHM_UPPER_SINCE
            and bool(values.get("speculative_draft_model_path")))


def multi_layer_eagle(args: ResolvedArgs, model: ModelSpec) -> bool | None:
    """``enable_multi_layer_eagle`` where the checks read it: the line's, None (not resolved) where a model
    override may turn it on."""
    if args.get("enable_multi_layer_eagle", False):
        return True
    arch = model.architectures[0] if model.architectures else ""
    return None if arch.startswith(MULTI_LAYER_ARCHS) else False


#: the spellings of the algorithm the shared namespace may hold (``rules_cache`` gives ``cfg.`` the line's word)
_ALGORITHM_KEYS = ("speculative_algorithm", "cfg.speculative_algorithm")


def _algorithm_frame(values: Mapping[str, object], listed: Version, *, promoted: bool = True,
                     over: Mapping[str, object] | None = None) -> dict[str, object]:
    """``over`` (default: the shared values) with the algorithm as the release reads it after its rewrite,
    under every spelling; left out where the release may promote it (``promoted``: the check reads which
    algorithm it is)."""
    frame = dict(values if over is None else over)
    algo = values.get("speculative_algorithm")
    for key in _ALGORITHM_KEYS:
        frame[key] = algo
    if promoted and promotable(values, listed):
        for key in _ALGORITHM_KEYS:
            del frame[key]
    return frame


def _env_frame(ask: Ask) -> dict[str, object]:
    """What the environment checks read: the variables, the algorithm after promotion, multi-layer EAGLE, and
    the PD transfer backend as the PD hook has it (``rules_spec._pd_frame``: ``mooncake_tcp`` is ``mooncake``).

    - SGLANG_ENABLE_SPEC_V2 (0.5.7 ``server_args.py:2000-2015``, 0.5.10 L2999-3013): read before the top-k is
      chosen, so the line's ``--speculative-eagle-topk`` (None: not given);
    - SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION in ``handle_speculative_decoding`` (0.5.21 ``arg_groups/
      speculative_hook.py:222-229``, 0.5.23 L251-259), which the pipeline runs for every line (0.5.23
      ``arg_groups/pipeline.py:306``): without an algorithm too; in ``_handle_dflash`` with attention DP
      (0.5.23 L311-316);
    - SGLANG_DISAGG_STAGING_BUFFER on a PD server (0.5.10 ``server_args.py:3259-3265``, 0.5.23
      ``arg_groups/pd_disaggregation_hook.py:155-161``)."""
    env = ask.env
    # ``_pd_frame`` puts the algorithm as the line gives it (for the PD hook): the checks here read it rewritten
    frame = _algorithm_frame(ask.values, ask.listed, over=_pd_frame(ask.args, ask.values))
    for name in ("SGLANG_ENABLE_SPEC_V2", "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION",
                 "SGLANG_DISAGG_STAGING_BUFFER"):
        frame[f"envs.{name}.get()"] = env_bool(env, name)
    layered = multi_layer_eagle(ask.args, ask.model)
    if layered is not None:
        frame["enable_multi_layer_eagle"] = layered
    return frame


def _features_frame(ask: Ask) -> tuple[dict[str, object], list[str]]:
    """What the checks of features that take no draft read, and the rules to judge there (each reads only
    whether an algorithm is given, which a promotion does not change; the watermark's list does, so its rule
    has the algorithm left out where the release may promote it).

    - ``--attention-backend flex_attention`` (0.5.3 ``server_args.py:861-866``, 0.5.23 ``arg_groups/
      attention_hook.py:143-163``): the backend the line gives; one not given is the one the release picks,
      which on CUDA is never flex_attention (the name appears nowhere else in 0.5.3 / 0.5.14 ``server_args.py``
      nor 0.5.23 ``arg_groups/``), so it stands as None here;
    - DWDP: only with ``--dwdp-size`` above 1 (0.5.17 ``server_args.py:6379-6381``, 0.5.23 ``arg_groups/
      parallel_hook.py:435-436``);
    - ``--weight-cache-mode`` other than ``off`` (0.5.18 ``server_args.py:7588``, 0.5.23 ``arg_groups/
      model_path_hook.py:281``);
    - LMCache (0.5.21 ``arg_groups/kv_cache_hook.py``, 0.5.23 L447-452): ``SpeculativeAlgorithm.from_string(x)
      .is_speculative()`` is any algorithm given;
    - ``--enable-watermark`` (0.5.22, 0.5.23 ``arg_groups/validation_hook.py:39-40`` returns without it; L89-103),
      read after the algorithm's rewrite; rejection sampling is the flag, or block verification with EAGLE /
      EAGLE3 (0.5.23 ``speculative_hook.py:160-175``)."""
    args, values = ask.args, ask.values
    frame = _algorithm_frame(values, ask.listed, promoted=False)
    backend = args.get("attention_backend") if args.is_set("attention_backend") else None
    frame["attention_backend"] = backend
    dwdp = args.get("dwdp_size", 1)
    frame["weight_cache_mode"] = args.get("weight_cache_mode", "off")
    lmcache = bool(args.get("enable_lmcache", False))
    frame["enable_lmcache"] = lmcache
    algo = values.get("speculative_algorithm")
    frame["SpeculativeAlgorithm.from_string(cfg.speculative_algorithm).is_speculative()"] = algo is not None
    block = bool(args.get("speculative_use_block_verification", False))
    frame["speculative_use_rejection_sampling"] = bool(args.get("speculative_use_rejection_sampling", False)) or (
        block and algo in ("EAGLE", "EAGLE3"))
    rules = []
    if algo is not None and (backend == "flex_attention" or (isinstance(dwdp, int) and dwdp > 1)
                             or frame["weight_cache_mode"] not in (None, "off") or lmcache):
        rules.append("sglang.spec2.features")
    if args.get("enable_watermark", False):
        rules.append("sglang.spec2.watermark")
        if promotable(values, ask.listed):
            for key in _ALGORITHM_KEYS:
                del frame[key]
    return frame, rules


def _dflash_frame(ask: Ask) -> dict[str, object] | None:
    """DFLASH's draft window against its draft-token count (0.5.11 ``server_args.py:3358-3428``, 0.5.12
    L3628-3697, 0.5.23 ``arg_groups/speculative_hook.py:365-435``): the window is ``int`` of the line's
    (``--speculative-dflash-draft-window-size`` in 0.5.11); the count is ``--speculative-dflash-block-size``
    where given, else ``--speculative-num-draft-tokens``, else inferred from the draft model's config (not read:
    None, the entry not judged). A window not positive, a block size not positive or one that differs from the
    draft tokens is refused first (``sglang.spec.flags`` / ``sglang.spec.dflash``): not judged here."""
    args = ask.args
    window = args.get("speculative_draft_window_size") if args.is_set("speculative_draft_window_size") else (
        args.get("speculative_dflash_draft_window_size") if args.is_set("speculative_dflash_draft_window_size")
        else None)
    if not isinstance(window, (int, float, str)) or int(window) <= 0:
        return None
    block, tokens = ask.values.get("speculative_dflash_block_size"), ask.values.get("speculative_num_draft_tokens")
    if isinstance(block, (int, float, str)):
        if int(block) <= 0 or (isinstance(tokens, (int, float, str)) and int(tokens) != int(block)):
            return None
        tokens = int(block)
    frame = dict(ask.values)
    frame.update(window_size=int(window), speculative_draft_window_size=int(window),
                 speculative_dflash_draft_window_size=int(window))
    if isinstance(tokens, (int, float, str)):
        frame["draft_tokens"] = int(tokens)
    return frame


def _uno_frame(ask: Ask) -> dict[str, object]:
    """UNO's attention backends (0.5.20, 0.5.23 ``arg_groups/speculative_hook.py:606-611``):
    ``attention_backends_of`` is the prefill / decode backend, else ``--attention-backend`` (0.5.23
    ``arg_groups/model_override_base.py:138-152``), read as the line gives them; one the release picks (not
    given) is not resolved (the entry not judged)."""
    args = ask.args
    base = args.get("attention_backend") if args.is_set("attention_backend") else None
    frame = dict(ask.values)
    picked = [args.get(d) if args.is_set(d) and args.get(d) else base
              for d in ("prefill_attention_backend", "decode_attention_backend")]
    if picked[0] is not None and picked[1] is not None:
        frame.update(prefill_backend=picked[0], decode_backend=picked[1])
    return frame


def _dspark_frame(ask: Ask) -> dict[str, object] | None:
    """DSPARK's draft-token count against its gamma (0.5.16 ``arg_groups/speculative_hook.py``, 0.5.23
    L788-836): with ``--speculative-dspark-block-size`` (positive: ``sglang.spec.dspark`` refuses one that is not)
    gamma is it; without, gamma comes from the draft checkpoint's config (not read: not judged). Only a
    ``--speculative-num-draft-tokens`` the line gives can differ from gamma + 1."""
    block, tokens = ask.values.get("speculative_dspark_block_size"), ask.values.get("speculative_num_draft_tokens")
    if not isinstance(block, (int, float, str)) or int(block) <= 0 or tokens is None:
        return None
    return {**ask.values, "gamma": int(block), "verify_window": int(block) + 1}


def _judge(ask: Ask, frame: Mapping[str, object], rules: list[str]) -> Judged:
    """The rules of ``rules`` in force for the line, over ``frame`` alone (``Ask.judge`` would lay the shared
    values under it, giving back what a frame leaves out)."""
    wanted = ask.among(rules)
    return ask.book.judge(ask.version, frame, rules=wanted) if wanted else Judged()


def judge(ask: Ask) -> Judged:
    """Each rule of this module in force for the line, in its frame; what was left out, in words."""
    values, listed = ask.values, ask.listed
    algo = values.get("speculative_algorithm")
    parts: list[Judged] = []
    notes: list[str] = []
    if algo is not None and values.get("disaggregation_mode") == "decode":
        frame = _algorithm_frame(values, listed)
        frame["disaggregation_decode_enable_radix_cache"] = bool(
            ask.args.get("disaggregation_decode_enable_radix_cache", False))
        parts.append(_judge(ask, frame, ["sglang.spec2.decode_radix_cache"]))
        if promotable(values, listed) and frame["disaggregation_decode_enable_radix_cache"]:
            notes.append(f"the decode radix-cache check (sglang.spec2.decode_radix_cache): {_PROMOTED}")
    env_rules = [*_ENV_RULES, _DFLASH_ENV_RULE] if algo == "DFLASH" else list(_ENV_RULES)
    parts.append(_judge(ask, _env_frame(ask), env_rules))
    features, rules = _features_frame(ask)
    parts.append(_judge(ask, features, rules))
    if algo in EAGLE_FAMILY and not promotable(values, listed):
        # the EAGLE family's handler (``_handle_eagle_family``): its rejection-sampling frame (``rules_spec``)
        frame = _rejection_frame(ask.args, values)
        layered = multi_layer_eagle(ask.args, ask.model)
        if layered is not None:
            frame["enable_multi_layer_eagle"] = layered
        parts.append(_judge(ask, frame, ["sglang.spec2.multi_layer_rejection"]))
    if algo == "DFLASH":
        dflash = _dflash_frame(ask)
        if dflash is not None:
            parts.append(_judge(ask, dflash, ["sglang.spec2.dflash_window"]))
    if algo == "UNO":
        parts.append(_judge(ask, _uno_frame(ask), ["sglang.spec2.uno_fa3"]))
    if algo == "DSPARK":
        dspark = _dspark_frame(ask)
        if dspark is not None:
            parts.append(_judge(ask, dspark, ["sglang.spec2.dspark_draft_tokens"]))
    refusals = tuple(r for j in parts for r in j.refusals)
    return Judged(refusals, tuple(dict.fromkeys((*notes, *(n for j in parts for n in j.not_judged)))))
