"""SGLang's refusals of speculative decoding's MoE backends, adaptive steps and DSPARK with attention DP, and of
the LoRA triton_v2 modes and MoE runners, each read as the release holds the values at that point of its order.

- DeepEP v2 as the draft's all-to-all backend (``validate_deepep_v2_speculative_draft``, 0.5.19+, 0.5.23
  ``moe_hook.py:624-638``, run at the end of resolution, ``pipeline.py:374``): ``--speculative-moe-a2a-backend``
  as given, else (an algorithm other than NGRAM) the target's ``--moe-a2a-backend`` as the hooks leave it
  (``rules_moe.a2a_backend``: not resolved where SGLang rewrites it first).
- The adaptive candidate steps (``_init_adaptive_speculative_params``, 0.5.14+, 0.5.23 ``speculative_hook.py:
  1392-1428``, run when ``--speculative-adaptive`` survives ``_maybe_disable_adaptive``): a given
  ``--speculative-num-steps`` must be one of the default adaptive config's steps (the union over its batch-size
  slots: 0, 1, 3, 7 to 0.5.19, 0.5.20+ also 5, ``speculative/adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG``);
  unset, the middle one is taken. With ``--speculative-adaptive-config`` the steps are a file's on the serving
  host: not judged. Whether adaptive survives is ``rules_spec3.adaptive_after_hook`` from 0.5.21; before it the
  same reasons (0.5.18 ``adaptive_spec_params.py:50-87``) are read only for EAGLE / EAGLE3 as typed (NEXTN is not
  judged there) and without a promotion.
- DSPARK with attention DP (``_handle_dspark``, 0.5.16+; 0.5.16 - 0.5.17 under ``enable_dp_attention``, 0.5.18 -
  0.5.21 also ``dp_size > 1``, 0.5.22+ ``attn_dp_size > 1``; 0.5.23 ``speculative_hook.py:674-711``): the MoE
  all-to-all backends it takes (``none``; 0.5.18+ ``megamoe``; 0.5.21+ ``mori``), ``SGLANG_RAGGED_VERIFY_MODE``
  ``static`` (its default, ``EnvStr("static")``) with any other backend (0.5.22+ also with
  ``SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION``) and ``--speculative-moe-a2a-backend`` equal to the target's when
  given. The backend is ``rules_moe.a2a_backend``'s (the hooks before the speculative hook, ``pipeline.py`` l.295 /
  306); an invalid ragged mode raises elsewhere first: not judged.
- The LoRA triton_v2 modes (``_check_v2_lora_modes``, 0.5.23 ``lora_hook.py:20-30``), run for ``--lora-backend
  triton_v2`` with LoRA on and a non-LoRA MoE runner (l.50-54), or for a LoRA MoE runner with triton_v2 (l.208):
  no attention DP, PDMux, two-batch overlap or ``SGLANG_EXPERIMENTAL_LORA_OPTI``; then the LoRA MoE runner's
  quantization (none, fp8 or modelopt_fp4; modelopt_fp4 only with ``lora_marlin``) and standard dispatch (l.209-
  223). The quantization is ``rules_moe.quantization``'s, the runner ``rules_moe.runner``'s.
- LoRA with speculative decoding (``check_lora_speculative_compatibility``'s list, 0.5.19+, 0.5.23 ``lora_hook.py:
  265-302``, run with LoRA on, l.73): for EAGLE / EAGLE3 / DFLASH / DSPARK (rewritten: NEXTN is EAGLE; a possible
  FROZEN_KV_MTP promotion is not judged), DSPARK with a ``SGLANG_RAGGED_VERIFY_MODE`` other than static,
  ``--speculative-adaptive`` as the speculative hook leaves it, the ``experimental_sgl_trtllm`` MoE runner (the
  target's as resolved, or the draft's as given) and ``SGLANG_ENABLE_OVERLAP_PLAN_STREAM``; the first that holds
  is said.
"""

from __future__ import annotations

from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang import rules_moe
from pytest_gpulayout.engines.sglang.rules_spec2 import env_bool, multi_layer_eagle, promotable
from pytest_gpulayout.engines.sglang.rules_spec3 import (
    ADAPTIVE_FALLBACK_SINCE,
    AUX_CAPTURE_RESET_SINCE,
    adaptive_after_hook,
    typed,
)
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.refusals import Judged

RULES: Mapping[str, str] = {
    "sglang.spec4.deepep_v2_draft": "a speculative draft on DeepEP v2 MoE: --speculative-moe-a2a-backend deepep_v2, "
                                    "or --moe-a2a-backend deepep_v2 inherited by a draft (0.5.19+)",
    "sglang.spec4.adaptive_steps": "--speculative-adaptive with --speculative-num-steps outside the default adaptive "
                                   "config's candidate steps (0.5.14+)",
    "sglang.spec4.dspark_dp_a2a": "DSPARK with attention DP beside a MoE all-to-all backend it does not take, a "
                                  "SGLANG_RAGGED_VERIFY_MODE other than static, or a --speculative-moe-a2a-backend "
                                  "other than the target's (0.5.16+)",
    "sglang.spec4.lora_v2_modes": "the LoRA triton_v2 backend (or a LoRA MoE runner) with attention DP, PDMux, "
                                  "two-batch overlap or SGLANG_EXPERIMENTAL_LORA_OPTI (0.5.23)",
    "sglang.spec4.lora_moe_runner": "a LoRA MoE runner with a quantization other than BF16 / fp8 / modelopt_fp4, "
                                    "modelopt_fp4 off lora_marlin, or an all-to-all backend (0.5.23)",
    "sglang.spec4.lora_speculative": "LoRA with EAGLE / EAGLE3 / DFLASH / DSPARK beside a non-static ragged verify "
                                     "mode (DSPARK), --speculative-adaptive, the experimental_sgl_trtllm MoE runner "
                                     "or SGLANG_ENABLE_OVERLAP_PLAN_STREAM (0.5.19+)",
}

DEEPEP_DRAFT_RULE = "sglang.spec4.deepep_v2_draft"
ADAPTIVE_RULE = "sglang.spec4.adaptive_steps"
DSPARK_RULE = "sglang.spec4.dspark_dp_a2a"
LORA_MODES_RULE = "sglang.spec4.lora_v2_modes"
LORA_MOE_RULE = "sglang.spec4.lora_moe_runner"
LORA_SPEC_RULE = "sglang.spec4.lora_speculative"
#: the algorithms ``check_lora_speculative_compatibility`` reaches its list for (0.5.23 ``lora_hook.py:253``)
_LORA_SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "DFLASH", "DSPARK")

#: the union of ``DEFAULT_ADAPTIVE_CONFIG``'s candidate steps, sorted as ``resolve_candidate_steps_from_config``
#: returns them (0.5.14 - 0.5.19 ``speculative/adaptive_spec_params.py`` l.22-46; 0.5.20 l.26-50 adds 5)
_CANDIDATE_STEPS: tuple[tuple[Version, list[int]], ...] = (
    (Version("0.5.14"), [0, 1, 3, 7]), (Version("0.5.20"), [0, 1, 3, 5, 7]))
#: ``RaggedVerifyMode`` (0.5.23 ``speculative/ragged_verify.py:13-16``): the values ``read_ragged_verify_mode``
#: accepts; it raises on any other
_STATIC = "static"
_RAGGED_MODES = (_STATIC, "cap-accept", "compact")
#: ``_check_v2_lora_modes``'s loop, as the ledger writes it (0.5.23 ``lora_hook.py:21-28``)
_V2_LOOP = ("for (unsupported, mode) in ((cfg.attn_dp_size > 1, 'DP-attention with --attn-dp-size > 1'), "
            "(cfg.enable_pdmux, 'PD-multiplexing'), (cfg.enable_two_batch_overlap, 'two-batch overlap'), "
            "(envs.SGLANG_EXPERIMENTAL_LORA_OPTI.get(), 'SGLANG_EXPERIMENTAL_LORA_OPTI'), "
            "(get_platform().is_hip, 'ROCm'))")


def _given(args: ResolvedArgs, dest: str) -> object:
    return args.get(dest) if args.is_set(dest) else None


def _judge(ask: Ask, frame: Mapping[str, object], rules: list[str]) -> Judged:
    """``rules`` in force over ``frame`` alone (a key left out of it stays out)."""
    wanted = ask.among(rules)
    return ask.book.judge(ask.version, frame, rules=wanted) if wanted else Judged()


def _draft_frame(ask: Ask) -> dict[str, object] | None:
    """``validate_deepep_v2_speculative_draft``'s ``draft_backend``, or None where it is not resolved."""
    algo = ask.values.get("speculative_algorithm")
    given = _given(ask.args, "speculative_moe_a2a_backend")
    if given is not None or algo == "NGRAM":
        return {"draft_backend": given}
    a2a = rules_moe.a2a_backend(ask.args, ask.model)
    return None if a2a is None else {"draft_backend": a2a}


def _adaptive_before_fallback(ask: Ask) -> bool | None:
    """Whether ``--speculative-adaptive`` survives ``_maybe_disable_adaptive`` before 0.5.21 (0.5.18
    ``adaptive_spec_params.py:50-87``): read only for EAGLE / EAGLE3 as typed, without a promotion."""
    args, values = ask.args, ask.values
    algo = typed(args)
    if algo is None or algo.upper() not in ("EAGLE", "EAGLE3") or promotable(values, ask.listed):
        return None
    topk = _given(args, "speculative_eagle_topk")
    layered = multi_layer_eagle(args, ask.model)
    if (topk is not None and topk != 1) or args.get("enable_dp_attention") or layered or any(
            args.get(d) for d in ("enable_two_batch_overlap", "enable_pdmux")):
        return False
    return None if layered is None else True


def _adaptive(ask: Ask, notes: list[str]) -> Judged:
    args = ask.args
    if not args.get("speculative_adaptive") or not ask.among([ADAPTIVE_RULE]):
        return Judged()
    survives = adaptive_after_hook(ask) if ask.listed >= ADAPTIVE_FALLBACK_SINCE else _adaptive_before_fallback(ask)
    if survives is False:
        return Judged()
    if survives is None:
        notes.append(f"whether --speculative-adaptive survives the speculative hook's fallback is not resolved for "
                     f"this line: {RULES[ADAPTIVE_RULE]} is not judged")
        return Judged()
    if args.get("speculative_adaptive_config") is not None:
        notes.append(f"--speculative-adaptive-config is a file on the serving host, not read: {RULES[ADAPTIVE_RULE]} "
                     "is not judged")
        return Judged()
    steps = _given(args, "speculative_num_steps")
    if steps is None:
        return Judged()               # the middle candidate is taken: always one of them
    candidates = next(c for since, c in reversed(_CANDIDATE_STEPS) if ask.listed >= since)
    return _judge(ask, {"speculative_num_steps": steps, "candidate_steps": candidates}, [ADAPTIVE_RULE])


def _dspark_frame(ask: Ask) -> dict[str, object]:
    """``_handle_dspark``'s attention-DP reads over the shared values (see the module)."""
    frame = dict(ask.values)
    frame["_is_npu"] = False
    a2a = rules_moe.a2a_backend(ask.args, ask.model)
    for key in ("moe_a2a_backend", "cfg.moe_a2a_backend", "server_args.moe_a2a_backend"):
        frame.pop(key, None)
    if a2a is not None:
        frame["moe_a2a_backend"] = a2a
    frame["speculative_moe_a2a_backend"] = _given(ask.args, "speculative_moe_a2a_backend")
    mode = ask.env.get("SGLANG_RAGGED_VERIFY_MODE", _STATIC)
    if mode in _RAGGED_MODES:
        frame["read_ragged_verify_mode()"] = _STATIC if mode == _STATIC else mode
        frame["RaggedVerifyMode.STATIC"] = _STATIC
    frame["envs.SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION.get()"] = env_bool(
        ask.env, "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION")
    return frame


def _enable_lora(args: ResolvedArgs) -> bool:
    """``enable_lora`` as ``check_lora_server_args`` leaves it: ``--lora-paths`` turns an unset one on (0.5.23
    ``lora_hook.py:38-41``)."""
    enable = args.get("enable_lora")
    if enable is None:
        return bool(args.get("lora_paths"))
    return bool(enable)


def _lora(ask: Ask, notes: list[str]) -> Judged:
    """``_check_v2_lora_modes`` and the LoRA MoE runner's quantization / dispatch checks (see the module)."""
    args, values = ask.args, ask.values
    if not ask.among([LORA_MODES_RULE, LORA_MOE_RULE]):
        return Judged()
    a2a = rules_moe.a2a_backend(args, ask.model)
    runner = rules_moe.runner(args, ask.model, ask.layout, a2a)
    lora_backend = args.get("lora_backend")
    enabled = _enable_lora(args)
    if runner is None:
        if enabled and lora_backend == "triton_v2" or str(args.get("moe_runner_backend")).startswith("lora"):
            notes.append(f"the MoE runner SGLang resolves for this model is not: {RULES[LORA_MODES_RULE]} / "
                         f"{RULES[LORA_MOE_RULE]} are not judged")
        return Judged()
    on_lora_runner = runner.startswith("lora")
    if on_lora_runner and (not enabled or lora_backend != "triton_v2"):
        return Judged()               # an earlier check refuses (sglang.lora.moe_runner)
    if not (on_lora_runner or (enabled and lora_backend == "triton_v2")):
        return Judged()
    option = f"--moe-runner-backend {runner}" if on_lora_runner else "--lora-backend triton_v2"
    attn_dp = values.get("attn_dp_size")
    modes = ((isinstance(attn_dp, int) and attn_dp > 1, "DP-attention with --attn-dp-size > 1"),
             (bool(args.get("enable_pdmux")), "PD-multiplexing"),
             (bool(args.get("enable_two_batch_overlap")), "two-batch overlap"),
             (env_bool(ask.env, "SGLANG_EXPERIMENTAL_LORA_OPTI"), "SGLANG_EXPERIMENTAL_LORA_OPTI"))
    hit = next((mode for unsupported, mode in modes if unsupported), None)
    judged = _judge(ask, {_V2_LOOP: True, "unsupported": hit is not None, "mode": hit, "option": option},
                    [LORA_MODES_RULE])
    if hit is not None or not on_lora_runner:
        return judged
    frame: dict[str, object] = {"backend": runner}
    resolved, quant = rules_moe.quantization(args, ask.model)
    if resolved:
        frame["quantization"] = quant
    if a2a is not None:
        frame["moe_a2a_backend"] = a2a
    return _judge(ask, frame, [LORA_MOE_RULE])


def _lora_speculative(ask: Ask, notes: list[str]) -> Judged:
    """``check_lora_speculative_compatibility``'s list (see the module), its reasons in the release's words."""
    args, values = ask.args, ask.values
    algo = values.get("speculative_algorithm")
    if not _enable_lora(args) or algo not in _LORA_SPEC_ALGORITHMS or not ask.among([LORA_SPEC_RULE]):
        return Judged()
    if promotable(values, ask.listed):
        notes.append(f"the algorithm may be promoted to FROZEN_KV_MTP by the draft's config, not read: "
                     f"{RULES[LORA_SPEC_RULE]} is not judged")
        return Judged()
    adaptive = adaptive_after_hook(ask) if ask.listed >= ADAPTIVE_FALLBACK_SINCE else (
        _adaptive_before_fallback(ask) if args.get("speculative_adaptive") else False)
    runner = rules_moe.runner(args, ask.model, ask.layout, rules_moe.a2a_backend(args, ask.model))
    ragged = ask.env.get("SGLANG_RAGGED_VERIFY_MODE", _STATIC)
    trtllm = "experimental_sgl_trtllm"
    checks: tuple[tuple[bool | None, str], ...] = (
        (algo == "DSPARK" and ragged != _STATIC,
         f"does not support SGLANG_RAGGED_VERIFY_MODE={ragged!r}: the per-request verify lengths it schedules break "
         "the uniform-width LoRA segment layout"),
        (adaptive, "does not support --speculative-adaptive: the draft is built from a static ServerArgs snapshot, "
                   "and the runtime-state swap does not rebuild LoRA cuda-graph metadata"),
        (None if runner is None and _given(args, "speculative_moe_runner_backend") != trtllm
         else trtllm in (runner, _given(args, "speculative_moe_runner_backend")),
         "does not support the experimental_sgl_trtllm MoE runner: its TopK reads the LoRA config per forward, "
         "which the draft resolves against the target's after its own publish ended"),
        (env_bool(ask.env, "SGLANG_ENABLE_OVERLAP_PLAN_STREAM"),
         "does not support SGLANG_ENABLE_OVERLAP_PLAN_STREAM=1: LoRA batch preparation would run on the plan "
         "stream, unordered against in-flight forwards"),
    )
    for holds, reason in checks:
        if holds is None:
            notes.append(f"a value the list reads is not resolved for this line: {RULES[LORA_SPEC_RULE]} is not "
                         "judged")
            return Judged()
        if holds:
            return _judge(ask, {"for (is_unsupported, reason) in unsupported": True, "is_unsupported": True,
                                "reason": reason}, [LORA_SPEC_RULE])
    return Judged()


def judge(ask: Ask) -> Judged:
    """Each rule of this module whose check the line reaches, in its frame; what was left out, in words."""
    args, values, listed = ask.args, ask.values, ask.listed
    parts: list[Judged] = []
    notes: list[str] = []
    reset = listed >= AUX_CAPTURE_RESET_SINCE and bool(args.get("enable_return_aux_hidden_states"))
    algo = None if reset else values.get("speculative_algorithm")
    if algo is not None and ask.among([DEEPEP_DRAFT_RULE]):
        frame = _draft_frame(ask)
        if frame is None:
            notes.append(f"the target's --moe-a2a-backend as SGLang resolves it is not: {RULES[DEEPEP_DRAFT_RULE]} "
                         "is not judged")
        else:
            parts.append(_judge(ask, frame, [DEEPEP_DRAFT_RULE]))
    if algo is not None:
        parts.append(_adaptive(ask, notes))
    if algo == "DSPARK":
        parts.append(_judge(ask, _dspark_frame(ask), [DSPARK_RULE]))
    parts.append(_lora(ask, notes))
    if algo is not None:
        parts.append(_lora_speculative(ask, notes))
    refusals = tuple(r for j in parts for r in j.refusals)
    return Judged(refusals, tuple(dict.fromkeys((*notes, *(n for j in parts for n in j.not_judged)))))
