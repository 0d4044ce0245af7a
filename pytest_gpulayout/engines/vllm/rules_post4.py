"""vLLM's config-time refusals of speculative decoding combined with another feature: watermarking, sampling
distribution replay, returned routed experts with adaptive verification, the DCP KV-cache interleave and ReplaySSM,
each judged in a frame of its own (their entries read ``speculative_config`` / ``self.speculative_config``, names the
speculative rules read with the draft's meaning).

- **watermarking** (``--watermark-config`` with ``--speculative-config``, 0.30+: ``VllmConfig.
  _check_watermarking_unsupported``, config/vllm.py:1143-1185 in 0.30.0, 1294-1336 in 0.31.0; from 0.32
  ``_check_supports_watermarking``, config/vllm.py:1342-1405 in 0.33.0, called from ``__post_init__``): a
  ``draft_sample_method`` other than probabilistic (the default is greedy: config/speculative.py:634 in 0.33.0, 588
  in 0.30.0), a ``rejection_sample_method`` other than standard, parallel drafting off DSpark (0.30-0.32) / off
  DFlash and DSpark (0.33; ``SpeculativeConfig.__post_init__`` turns parallel drafting on for both: config/
  speculative.py:1581-1582 in 0.33.0), a method outside dspark / eagle / eagle3 / mtp (0.30-0.32) or dflash /
  dspark / eagle / eagle3 / mtp (0.33), and an algorithm other than dual_key_gumbel (``supports_speculative_
  decoding``, config/watermarking.py:55-56 in 0.33.0) without ``allow_target_only_watermarking``. The checks run in
  that order and the first one refuses: the refusal here is the first that holds. The method is the one the
  release ends with (``rules_speculative.final_method``); where the draft's config decides it, the method checks are
  not judged. 0.33's DFlash2 / LiLiCorr candidate-head check reads a DFlash draft's architectures (not read): not
  judged for a DFlash draft.
- **sampling distribution replay with speculative decoding** (``--return-sampling-mask``, ``VllmConfig.
  _verify_sampling_replay_config``): any speculative config (0.28-0.31, config/vllm.py:1033-1036 in 0.28.0,
  1268-1271 in 0.31.0), adaptive verification (0.32+, config/vllm.py:1243-1252 in 0.32.0, 1310-1319 in 0.33.0).
  The function first refuses Model Runner V1 (``rules_post3``'s rule): where VLLM_USE_V2_MODEL_RUNNER=0 picks V1
  this rule leaves the line to that one.
- **returned routed experts with adaptive verification** (``--enable-return-routed-experts``, 0.31+: ``VllmConfig.
  _verify_aux_output_compatibility``, config/vllm.py:1182-1189 in 0.31.0, 1209-1216 in 0.33.0). The earlier checks
  of the function (Model Runner V2, a MoE model, prefix caching) are ``rules_post2``'s: where one of them refuses,
  this rule leaves the line to it.
- **speculative decoding with a DCP KV-cache interleave above 1** (the assertion in ``VllmConfig.__post_init__``,
  0.11.1-0.12.0: config/vllm.py:623-626 in 0.11.1 on ``--dcp-kv-cache-interleave-size``, 803-806 in 0.12.0 on
  ``--cp-kv-cache-interleave-size``, which 0.12.0 overwrites with a ``--dcp-kv-cache-interleave-size`` above 1 at
  DCP > 1, config/vllm.py:781-788).
- **ReplaySSM with speculative decoding** (``--use-replayssm``, ``validate_mamba_cached_kernel``): speculative
  tokens above 0 (0.27-0.28, config/vllm.py:2354-2355 in 0.27.0, 2574-2575 in 0.28.0); from 0.32 Mamba2 ReplaySSM
  speculative decoding (speculative tokens off RecoverSSM's KDA models) with a Mamba cache mode other than none
  (prefix caching), a ``--replayssm-buffer-len`` below 1 + the speculative tokens, or a backend other than
  flashinfer, in that order (config/vllm.py:3507-3526 in 0.33.0, 3371-3390 in 0.32.0). The values are
  ``rules_post3.replayssm_frame``'s; the function's earlier checks are that module's rule.
- **asynchronous scheduling with Mamba prefix caching** (0.16.0, ``VllmConfig.__post_init__``, config/vllm.py:
  640-644): ``--async-scheduling`` given (left unset the release turns it on only where compatible) with a Mamba
  cache mode other than none. ``MambaModelConfig.verify_and_update_config`` (model_executor/models/config.py:
  332-377 in 0.16.0, from ``try_verify_and_update_config`` at config/vllm.py:593, before the check) makes it none
  without prefix caching and all or align with it on a Mamba / hybrid class: with ``--enable-prefix-caching`` given
  the mode is not none either way; a hybrid model's default prefix caching is not resolved. An attention-only
  class keeps ``--mamba-cache-mode`` as given.
- **Mamba align mode on Model Runner V2** (0.21-0.24, ``VllmConfig.validate_block_size``, config/vllm.py:1989-1992
  in 0.21.0): the Mamba cache mode align (``rules_post3.mamba_cache_mode``) with VLLM_USE_V2_MODEL_RUNNER true (the
  assertion reads the environment: unset it is off, envs.py:1711-1713 in 0.21.0, ``maybe_convert_bool`` of None in
  0.24.0). The function's earlier align-mode assertions read the page-aligned block size (not resolved here): where
  one of them fails first the release refuses in its words, refused either way.
- **--enable-hc-sp on a model without HC SP** (0.32+, ``ModelConfig.verify_with_parallel_config``, config/model.py:
  1549-1553 in 0.33.0, 1537-1541 in 0.32.0): at TP > 1 on an architecture whose class lacks ``SupportsHCSP``
  (``is_hc_sp_supported_model``; in both releases only the Qwen4Exp classes have it: vllm/models/qwen4_exp/nvidia/
  model.py:693-702 and 944-949, mtp.py:400 in 0.33.0). The architecture is the checkpoint's first, where the line
  leaves ``--model-impl`` to the release.
- **batch-sharded sampling** (``--enable-batch-sharded-sampling`` given true, 0.29+: ``VllmConfig.
  _validate_batch_sharded_sampling``, config/vllm.py:3182-3222 in 0.33.0, 2685-2732 in 0.29.0): the blockers the
  release lists, in its order and words: TP 1, else ``max_num_seqs`` below TP; ``--max-logprobs -1``;
  ``--return-sampling-mask`` (0.30+); adaptive verification (0.29-0.32). Where ``max_num_seqs`` is left to the
  release's default and not resolved here at TP > 1, the blocker list is not known: not judged.

Where a value is not resolved here it is left out of the frame: the entry is named as not judged, never guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.vllm import rules_post, rules_post2, rules_post3, rules_speculative
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.refusals import Judged, Refusal

WATERMARK_SPEC = "vllm.watermark.speculative_decoding"
REPLAY_SPEC = "vllm.model_runner.sampling_replay_speculative"
ROUTED_ADAPTIVE = "vllm.model.routed_experts_adaptive_verification"
INTERLEAVE_SPEC = "vllm.parallel.spec_with_cp_kv_interleave"
REPLAYSSM_SPEC = "vllm.mamba.replayssm_speculative"
ASYNC_MAMBA = "vllm.scheduler.async_mamba_prefix_caching"
ALIGN_V2 = "vllm.mamba.align_needs_v1_runner"
HC_SP_MODEL = "vllm.parallel.hc_sp_model"
BATCH_SHARDED = "vllm.sampling.batch_sharded_blockers"

RULES: Mapping[str, str] = {
    WATERMARK_SPEC: "--watermark-config with --speculative-config: draft_sample_method other than probabilistic, "
                    "rejection_sample_method other than standard, parallel drafting or a method watermarking lacks, "
                    "or an algorithm without speculative support (VllmConfig, 0.30+)",
    REPLAY_SPEC: "--return-sampling-mask with --speculative-config (0.28-0.31) or with adaptive verification (0.32+) "
                 "(VllmConfig._verify_sampling_replay_config)",
    ROUTED_ADAPTIVE: "--enable-return-routed-experts with --speculative-config enable_adaptive_verification "
                     "(VllmConfig._verify_aux_output_compatibility, 0.31+)",
    INTERLEAVE_SPEC: "--speculative-config with a DCP / CP KV-cache interleave size above 1 (VllmConfig, "
                     "0.11.1-0.12.0)",
    REPLAYSSM_SPEC: "--use-replayssm with speculative tokens (0.27-0.28), or Mamba2 ReplaySSM speculative decoding "
                    "with prefix caching, a short --replayssm-buffer-len or a backend other than flashinfer (0.32+) "
                    "(VllmConfig.validate_mamba_cached_kernel)",
    ASYNC_MAMBA: "--async-scheduling with prefix caching on a Mamba / hybrid model, or a Mamba cache mode other "
                 "than none (VllmConfig, 0.16.0)",
    ALIGN_V2: "Mamba cache mode align with VLLM_USE_V2_MODEL_RUNNER=1 (VllmConfig.validate_block_size, 0.21-0.24)",
    HC_SP_MODEL: "--enable-hc-sp at TP > 1 on an architecture without HC SP support (ModelConfig, 0.32+)",
    BATCH_SHARDED: "--enable-batch-sharded-sampling at TP 1, with max_num_seqs below TP, --max-logprobs -1, "
                   "--return-sampling-mask (0.30+) or adaptive verification (0.29-0.32) (VllmConfig, 0.29+)",
}
FRAMED = frozenset(RULES)

Frame = dict[str, object]

#: ``SpeculativeConfig``'s defaults the watermark checks read (config/speculative.py:511-634 in 0.33.0)
DRAFT_SAMPLE_DEFAULT = "greedy"
REJECTION_SAMPLE_DEFAULT = "standard"
#: methods ``SpeculativeConfig.__post_init__`` turns parallel drafting on for
_PARALLEL_METHODS = ("dflash", "dspark")
#: the registry's classes with ``SupportsHCSP`` (0.32.0, 0.33.0)
HC_SP_ARCHITECTURES = frozenset({"Qwen4ExpForCausalLM", "Qwen4ExpForConditionalGeneration", "Qwen4ExpMTP"})
#: the batch-sharded sampling blockers by release: the sampling mask from 0.30, adaptive verification until 0.32
SAMPLING_MASK_BLOCKER_SINCE = Version("0.30.0")
ADAPTIVE_BLOCKER_UNTIL = Version("0.32.0")
#: 0.12.0 copies ``--dcp-kv-cache-interleave-size`` (above 1, at DCP > 1) into cp_kv_cache_interleave_size
CP_INTERLEAVE_SINCE = Version("0.12.0")
_LINE = re.compile(r":(\d+)$")
#: rules of one function whose checks raise in turn: the first that holds is the release's refusal
FIRST_ONLY = frozenset({WATERMARK_SPEC, REPLAYSSM_SPEC})


def _json(args: ResolvedArgs, dest: str) -> Mapping[str, object]:
    value = args.get(dest)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, Mapping) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _given(args: ResolvedArgs, version: Version) -> Mapping[str, object] | None:
    """The speculative options the line gives (``--speculative-config``, the ``--spec-*`` flags), None without any:
    ``VllmConfig.speculative_config`` is None exactly then."""
    return rules_speculative.speculative(args, version).given


def _method(given: Mapping[str, object], version: Version) -> str | None:
    """The method the release ends with; None where the draft's config decides it (or the name is not known)."""
    try:
        at_checks = rules_speculative.method_at_checks(given, version)
    except LookupError:
        return None
    return rules_speculative.final_method(given, version, at_checks)


# -- watermarking ----------------------------------------------------------------------------------------------

def watermark_frame(args: ResolvedArgs, version: Version) -> Frame | None:
    """The watermark checks' values; None without ``--watermark-config`` or without speculative decoding (the
    function returns first, and the speculative branch is skipped)."""
    if args.get("watermark_config") is None:
        return None
    given = _given(args, version)
    if given is None:
        return None
    watermark = _json(args, "watermark_config")
    algorithm = str(watermark.get("algorithm", "gumbel"))
    out: Frame = {
        "self.speculative_config": True, "speculative_config": True,
        "speculative_config.draft_sample_method": given.get("draft_sample_method", DRAFT_SAMPLE_DEFAULT),
        "speculative_config.rejection_sample_method": given.get("rejection_sample_method", REJECTION_SAMPLE_DEFAULT),
        "watermark_config": True, "watermark_config.algorithm": algorithm,
        "watermark_config.allow_target_only_watermarking": bool(watermark.get("allow_target_only_watermarking")),
        "watermark_config.supports_speculative_decoding": algorithm == "dual_key_gumbel",
    }
    method = _method(given, version)
    if method is not None:
        out["speculative_config.method"] = method
        out["speculative_config.parallel_drafting"] = bool(given.get("parallel_drafting")) or (
            method in _PARALLEL_METHODS)
        if method != "dflash":
            out["self._is_dflash_candidate_draft()"] = False
            out["_is_dflash_candidate_draft"] = False
    elif given.get("parallel_drafting") is False:
        out["speculative_config.parallel_drafting"] = False
    return out


def _line(refusal: Refusal) -> int:
    found = _LINE.search(refusal.source)
    return int(found.group(1)) if found else 0


# -- sampling replay, routed experts ---------------------------------------------------------------------------

def replay_frame(ask: Ask, hisparse: bool) -> Frame | None:
    """``_verify_sampling_replay_config``'s speculative checks; None without ``--return-sampling-mask`` or where
    Model Runner V1 is picked (the function refuses that first)."""
    args = ask.args
    if not bool(args.get("return_sampling_mask")):
        return None
    if rules_post2.use_v2_model_runner(args, hisparse, ask.env) is False:
        return None
    given = _given(args, ask.version)
    adaptive = given is not None and bool(given.get("enable_adaptive_verification"))
    spec = True if given is not None else None
    return {"self.speculative_config": spec, "speculative_config": spec,
            "speculative_config.enable_adaptive_verification": adaptive}


def routed_frame(ask: Ask, hisparse: bool) -> Frame | None:
    """The adaptive-verification check of ``_verify_aux_output_compatibility``; None without an auxiliary output,
    or where an earlier check of the function refuses (Model Runner V1 picked, a dense model, prefix caching off)."""
    args = ask.args
    if not (bool(args.get("enable_return_routed_experts")) or bool(
            _json(args, "aux_output_config").get("enable_return_routed_experts"))):
        return None
    if rules_post2.use_v2_model_runner(args, hisparse, ask.env) is False or not bool(ask.values.get("is_moe")):
        return None
    if args.is_set("enable_prefix_caching") and args.get("enable_prefix_caching") is False:
        return None
    given = _given(args, ask.version)
    spec = True if given is not None else None
    return {"self.speculative_config": spec,
            "self.speculative_config.enable_adaptive_verification":
                given is not None and bool(given.get("enable_adaptive_verification"))}


# -- the DCP interleave, ReplaySSM -----------------------------------------------------------------------------

def interleave_frame(ask: Ask) -> Frame:
    """The interleave sizes as the assertion reads them: 0.11.1's ``dcp_kv_cache_interleave_size``; 0.12.0's
    ``cp_kv_cache_interleave_size``, overwritten by a dcp size above 1 at DCP > 1."""
    args = ask.args
    dcp_size = _int(args.get("dcp_kv_cache_interleave_size")) or 1
    cp_size = _int(args.get("cp_kv_cache_interleave_size")) or 1
    dcp = _int(args.get("decode_context_parallel_size")) or 1
    if dcp > 1 and dcp_size > 1:
        cp_size = dcp_size
    spec = True if _given(args, ask.version) is not None else None
    return {"self.parallel_config.dcp_kv_cache_interleave_size": dcp_size,
            "self.parallel_config.cp_kv_cache_interleave_size": cp_size,
            "self.speculative_config": spec}


def replayssm_spec_frame(ask: Ask, hisparse: bool) -> Frame | None:
    """``validate_mamba_cached_kernel``'s values (``rules_post3``), where the line has ``--use-replayssm``; with the
    local ``query_len`` (1 + the speculative tokens) where they are known."""
    frame = rules_post3.replayssm_frame(ask, hisparse)
    if frame is None:
        return None
    tokens = frame.get("self.num_speculative_tokens")
    if isinstance(tokens, int):
        frame = {**frame, "query_len": 1 + tokens}
    return frame


# -- the Mamba cache mode -------------------------------------------------------------------------------------

def async_mamba_frame(ask: Ask) -> Frame | None:
    """0.16's check; None without ``--async-scheduling`` given true (the branch is not taken)."""
    args, model, version = ask.args, ask.model, ask.version
    if args.get("async_scheduling") is not True:
        return None
    out: Frame = {"self.scheduler_config.async_scheduling": True}
    mode = rules_post3.mamba_cache_mode(args, model, version)
    caching = args.get("enable_prefix_caching") if args.is_set("enable_prefix_caching") else None
    mamba_class = rules_post._arch_flag(model, version, "is_hybrid") or rules_post3._mamba_arch(model)
    if mode is None and caching is True and mamba_class:
        mode = "align"      # all or align by the class's support: only its difference from none is read
    if mode is not None:
        out["self.cache_config.mamba_cache_mode"] = mode
    return out


def align_v2_frame(ask: Ask) -> Frame | None:
    """0.21-0.24's assertion: the Mamba cache mode where resolved, VLLM_USE_V2_MODEL_RUNNER as envs.py reads it."""
    raw = ask.env.get("VLLM_USE_V2_MODEL_RUNNER")
    if raw is None:
        v2: bool | None = False
    else:
        try:
            v2 = bool(int(raw))
        except ValueError:
            v2 = None
    out: Frame = {}
    if v2 is not None:
        out["envs.VLLM_USE_V2_MODEL_RUNNER"] = v2
    mode = rules_post3.mamba_cache_mode(ask.args, ask.model, ask.version)
    if mode is not None:
        out["self.cache_config.mamba_cache_mode"] = mode
    return out


def hc_sp_frame(ask: Ask) -> Frame | None:
    """The HC SP model check; None without ``--enable-hc-sp`` (the branch is not taken)."""
    if not bool(ask.args.get("enable_hc_sp")):
        return None
    out: Frame = {"parallel_config.enable_hc_sp": True,
                  "parallel_config.tensor_parallel_size": ask.layout.tensor_parallel_size}
    arch = rules_post3.architecture(ask.args, ask.model)
    if arch is not None:
        out["is_hc_sp_supported_model"] = arch in HC_SP_ARCHITECTURES
    return out


def batch_sharded_frame(ask: Ask) -> Frame | None:
    """``_validate_batch_sharded_sampling``'s ``blockers`` as the release builds them; None without the flag given
    true (the function returns first); an empty frame where ``max_num_seqs`` decides and is not resolved."""
    args, version = ask.args, ask.version
    if args.get("enable_batch_sharded_sampling") is not True:
        return None
    tp = ask.layout.tensor_parallel_size
    blockers: list[str] = []
    if tp <= 1:
        blockers.append("tensor_parallel_size is 1, so there is nothing to shard")
    else:
        seqs = _int(ask.values.get("max_num_seqs"))
        if seqs is None:
            return {}
        if seqs < tp:
            blockers.append(f"max_num_seqs ({seqs}) is below tensor_parallel_size ({tp})")
    logprobs = _int(args.get("max_logprobs"))
    if logprobs is not None and logprobs < 0:
        blockers.append("max_logprobs is -1, allowing vocab-size logprob requests")
    if version >= SAMPLING_MASK_BLOCKER_SINCE and bool(args.get("return_sampling_mask")):
        blockers.append("return_sampling_mask is set and the batch-sharded gather does not forward sampling masks")
    given = _given(args, version)
    if version <= ADAPTIVE_BLOCKER_UNTIL and given is not None and bool(given.get("enable_adaptive_verification")):
        blockers.append("it does not yet work with adaptive verification, which decides the per-request logits "
                        "counts on the GPU, where the CPU-side shard plan cannot see them")
    return {"blockers": blockers, "'; '.join(blockers)": "; ".join(blockers)}


# -- the area --------------------------------------------------------------------------------------------------

def judge(ask: Ask) -> Judged:
    """The rules of this module in force, each judged over its frame alone; of the watermark and ReplaySSM checks,
    the first that refuses (the release raises there)."""
    rules = set(ask.among(FRAMED))
    if not rules:
        return Judged()
    hisparse = rules_post.hisparse_values(ask.args, ask.model, ask.env)["self.attention_config.hisparse_config"] \
        is not None
    framed: list[tuple[str, Frame | None]] = [
        (WATERMARK_SPEC, watermark_frame(ask.args, ask.version)),
        (REPLAY_SPEC, replay_frame(ask, hisparse)),
        (ROUTED_ADAPTIVE, routed_frame(ask, hisparse)),
        (INTERLEAVE_SPEC, interleave_frame(ask)),
        (REPLAYSSM_SPEC, replayssm_spec_frame(ask, hisparse)),
        (ASYNC_MAMBA, async_mamba_frame(ask)),
        (ALIGN_V2, align_v2_frame(ask)),
        (HC_SP_MODEL, hc_sp_frame(ask)),
        (BATCH_SHARDED, batch_sharded_frame(ask)),
    ]
    refusals: list[Refusal] = []
    notes: list[str] = []
    for rule, frame in framed:
        if rule not in rules or frame is None:
            continue
        one = ask.book.judge(ask.version, frame, rules=[rule])
        found = list(one.refusals)
        if rule in FIRST_ONLY and found:
            found = [min(found, key=_line)]
        refusals += found
        notes += [n for n in one.not_judged if n not in notes]
    return Judged(tuple(refusals), tuple(notes))
