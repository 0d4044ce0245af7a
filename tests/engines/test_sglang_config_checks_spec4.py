"""SGLang's refusals of speculative decoding's MoE backends, adaptive steps and DSPARK with attention DP, and of the
LoRA triton_v2 modes and MoE runners (``engines/sglang/rules_spec4.py``), each in the release's words at its line,
beside the same line accepted (the value it takes, another algorithm, or a release without the check). The line is
parsed by the release's own parser (``engines/sglang/cli.py resolve``); the environment is the launch's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_spec4
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

QWEN = "Qwen/Qwen3-8B"
ALGO = "--speculative-algorithm"
ADAPTIVE = "--speculative-adaptive"
DSPARK_DP = f"{ALGO} DSPARK --attn-dp-size 2 --enable-dp-lm-head"          # 0.5.22+
DSPARK_DP_OLD = f"{ALGO} DSPARK --enable-dp-attention --dp-size 2 --enable-dp-lm-head"
V2 = "--enable-lora --lora-backend triton_v2"
LORA_MOE = f"{V2} --moe-runner-backend lora_triton"
COMPACT = {"SGLANG_RAGGED_VERIFY_MODE": "compact"}


def judge(version: str, words: str, env: Mapping[str, str] | None = None) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    layout = Layout(8, 1, 1, (9, 0), "NVIDIA H100 80GB HBM3", 81559)
    return config_check(line, load_model(QWEN), layout, Version(version), env=env)


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    refused: str | None = None          # the release's words; None: accepted
    source: str | None = None           # file:line in that release
    env: Mapping[str, str] = field(default_factory=dict)
    exception: str = "ValueError"


MOE_HOOK = "sglang/srt/arg_groups/moe_hook.py"
SPEC_HOOK = "sglang/srt/arg_groups/speculative_hook.py"
LORA_HOOK = "sglang/srt/arg_groups/lora_hook.py"
DD = "sglang.spec4.deepep_v2_draft"
AS = "sglang.spec4.adaptive_steps"
DS = "sglang.spec4.dspark_dp_a2a"
LM = "sglang.spec4.lora_v2_modes"
LR = "sglang.spec4.lora_moe_runner"
LS = "sglang.spec4.lora_speculative"
LORA = "--enable-lora --lora-paths a=/adapters/a"
CASES = [
    # -- DeepEP v2 as the draft's backend: given, or inherited from the target by an algorithm other than NGRAM
    Case(DD, "0.5.23", f"{ALGO} EAGLE --speculative-moe-a2a-backend deepep_v2",
         "DeepEP v2 MoE is not validated as a speculative draft backend", f"{MOE_HOOK}:635"),
    Case(DD, "0.5.19", f"{ALGO} EAGLE --moe-a2a-backend deepep_v2",
         "DeepEP v2 MoE is not validated as a speculative draft backend", f"{MOE_HOOK}:373"),
    Case(DD, "0.5.23", f"{ALGO} EAGLE --moe-a2a-backend deepep_v2 --speculative-moe-a2a-backend none"),
    Case(DD, "0.5.23", f"{ALGO} NGRAM --moe-a2a-backend deepep_v2"),          # NGRAM has no MoE draft
    Case(DD, "0.5.18", f"{ALGO} EAGLE --speculative-moe-a2a-backend deepep"),  # not this check before 0.5.19
    # -- adaptive steps: the default config's candidates (0.5.20 adds 5)
    Case(AS, "0.5.23", f"{ALGO} EAGLE {ADAPTIVE} --speculative-num-steps 4",
         "--speculative-num-steps=4 is not in the adaptive config candidate_steps [0, 1, 3, 5, 7]",
         f"{SPEC_HOOK}:1417"),
    Case(AS, "0.5.23", f"{ALGO} EAGLE {ADAPTIVE} --speculative-num-steps 5"),
    Case(AS, "0.5.23", f"{ALGO} EAGLE {ADAPTIVE}"),                            # unset: the middle candidate
    # a top-k of 2 turns adaptive off first: the steps are not checked
    Case(AS, "0.5.23", f"{ALGO} EAGLE {ADAPTIVE} --speculative-num-steps 4 --speculative-eagle-topk 2 "
         "--speculative-num-draft-tokens 8"),
    Case(AS, "0.5.23", f"{ALGO} NGRAM {ADAPTIVE} --speculative-num-steps 4"),  # only EAGLE / EAGLE3 keep it
    Case(AS, "0.5.18", f"{ALGO} EAGLE {ADAPTIVE} --speculative-num-steps 5",
         "--speculative-num-steps=5 is not in the adaptive config candidate_steps [0, 1, 3, 7]", f"{SPEC_HOOK}:804"),
    Case(AS, "0.5.18", f"{ALGO} EAGLE3 {ADAPTIVE} --speculative-num-steps 7"),
    Case(AS, "0.5.20", f"{ALGO} EAGLE {ADAPTIVE} --speculative-num-steps 5"),
    # -- DSPARK with attention DP
    Case(DS, "0.5.23", f"{DSPARK_DP} --moe-a2a-backend deepep",
         "DSpark with dp attention supports moe_a2a_backend 'none' (built-in TP MoE), 'megamoe', or 'mori', got "
         "'deepep'.", f"{SPEC_HOOK}:678"),
    Case(DS, "0.5.23", f"{DSPARK_DP} --moe-a2a-backend mori"),
    Case(DS, "0.5.23", f"{DSPARK_DP} --moe-a2a-backend mori", "DSpark DP MoE or prefill coordination requires "
         "SGLANG_RAGGED_VERIFY_MODE=static.", f"{SPEC_HOOK}:693", env=COMPACT),
    Case(DS, "0.5.23", DSPARK_DP, env=COMPACT),                                # the built-in TP MoE
    Case(DS, "0.5.22", DSPARK_DP, "DSpark DP MoE or prefill coordination requires SGLANG_RAGGED_VERIFY_MODE=static.",
         f"{SPEC_HOOK}:632", env={**COMPACT, "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION": "1"}),
    Case(DS, "0.5.23", f"{DSPARK_DP} --speculative-moe-a2a-backend deepep",
         "DSpark ignores --speculative-moe-a2a-backend; with dp attention it must match the target "
         "moe_a2a_backend='none' (got 'deepep').", f"{SPEC_HOOK}:707"),
    Case(DS, "0.5.23", f"{DSPARK_DP} --speculative-moe-a2a-backend none"),
    Case(DS, "0.5.23", f"{ALGO} DSPARK --moe-a2a-backend deepep"),              # no attention DP
    Case(DS, "0.5.21", f"{DSPARK_DP_OLD} --moe-a2a-backend mori"),
    Case(DS, "0.5.20", f"{DSPARK_DP_OLD} --moe-a2a-backend mori", "supports moe_a2a_backend 'none' (built-in TP "
         "MoE) or 'megamoe', got 'mori'", f"{SPEC_HOOK}:532"),
    Case(DS, "0.5.18", f"{DSPARK_DP_OLD} --moe-a2a-backend megamoe", "DSpark with dp attention + "
         "moe_a2a_backend='megamoe' requires SGLANG_RAGGED_VERIFY_MODE=static", f"{SPEC_HOOK}:302",
         env={"SGLANG_RAGGED_VERIFY_MODE": "cap-accept"}),
    Case(DS, "0.5.18", f"{DSPARK_DP_OLD} --moe-a2a-backend megamoe"),
    Case(DS, "0.5.16", f"{DSPARK_DP_OLD} --moe-a2a-backend megamoe", "DSpark with dp attention only supports the "
         "built-in TP MoE (moe_a2a_backend='none'), got 'megamoe'", f"{SPEC_HOOK}:284"),
    Case(DS, "0.5.16", f"{DSPARK_DP_OLD} --speculative-moe-a2a-backend deepep", "DSpark ignores "
         "--speculative-moe-a2a-backend", f"{SPEC_HOOK}:297"),
    Case(DS, "0.5.16", DSPARK_DP_OLD),
    # -- the LoRA triton_v2 modes
    Case(LM, "0.5.23", f"{V2} --attn-dp-size 2",
         "--lora-backend triton_v2 does not yet support DP-attention with --attn-dp-size > 1", f"{LORA_HOOK}:30"),
    Case(LM, "0.5.23", V2, "--lora-backend triton_v2 does not yet support SGLANG_EXPERIMENTAL_LORA_OPTI",
         f"{LORA_HOOK}:30", env={"SGLANG_EXPERIMENTAL_LORA_OPTI": "1"}),
    Case(LM, "0.5.23", f"{LORA_MOE} --enable-two-batch-overlap",
         "--moe-runner-backend lora_triton does not yet support two-batch overlap", f"{LORA_HOOK}:30"),
    Case(LM, "0.5.23", V2),
    Case(LM, "0.5.23", "--enable-lora --attn-dp-size 2"),                      # another LoRA backend
    # -- a LoRA MoE runner's quantization and dispatch
    Case(LR, "0.5.23", f"{LORA_MOE} --quantization awq", "--moe-runner-backend lora_triton supports unquantized "
         "BF16, 128-block FP8 and ModelOpt NVFP4 MoE, got --quantization awq", f"{LORA_HOOK}:211"),
    Case(LR, "0.5.23", f"{LORA_MOE} --quantization fp8"),
    Case(LR, "0.5.23", f"{LORA_MOE} --quantization modelopt_fp4", "--moe-runner-backend lora_triton cannot run "
         "ModelOpt NVFP4 MoE; use --moe-runner-backend lora_marlin", f"{LORA_HOOK}:216"),
    Case(LR, "0.5.23", f"{V2} --moe-runner-backend lora_marlin --quantization modelopt_fp4"),
    Case(LR, "0.5.23", f"{LORA_MOE} --moe-a2a-backend deepep", "--moe-runner-backend lora_triton requires Standard "
         "dispatch, got --moe-a2a-backend deepep", f"{LORA_HOOK}:221"),
    Case(LR, "0.5.23", LORA_MOE),
    # -- LoRA with speculative decoding: the release's list, the first reason that holds
    Case(LS, "0.5.23", f"{LORA} {ALGO} nextn {ADAPTIVE}", "LoRA with EAGLE/NEXTN/EAGLE3 speculative decoding does "
         "not support --speculative-adaptive", f"{LORA_HOOK}:299"),
    # a top-k of 2 turns adaptive off in the speculative hook first
    Case(LS, "0.5.23", f"{LORA} {ALGO} EAGLE {ADAPTIVE} --speculative-num-steps 3 --speculative-eagle-topk 2 "
         "--speculative-num-draft-tokens 8"),
    Case(LS, "0.5.23", f"{LORA} {ALGO} EAGLE", "does not support SGLANG_ENABLE_OVERLAP_PLAN_STREAM=1",
         f"{LORA_HOOK}:299", env={"SGLANG_ENABLE_OVERLAP_PLAN_STREAM": "1"}),
    Case(LS, "0.5.23", f"{LORA} {ALGO} EAGLE"),
    Case(LS, "0.5.23", f"{ALGO} EAGLE {ADAPTIVE}"),                            # no LoRA
    Case(LS, "0.5.19", f"{LORA} {ALGO} DSPARK", "does not support SGLANG_RAGGED_VERIFY_MODE='compact'",
         f"{LORA_HOOK}:225", env=COMPACT),
    Case(LS, "0.5.20", f"{LORA} {ALGO} EAGLE --speculative-moe-runner-backend experimental_sgl_trtllm",
         "does not support the experimental_sgl_trtllm MoE runner", f"{LORA_HOOK}:221"),
    Case(LS, "0.5.19", f"{LORA} {ALGO} DSPARK"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.rule}-{c.version}-{'refused' if c.refused else 'ok'}")
def test_case(case: Case) -> None:
    judged = judge(case.version, case.words, case.env)
    assert_verdict(judged, case.rule, case.refused, exception=case.exception, version=case.version,
                   source=case.source or "")
    if case.refused is None:           # accepted because judged, not because left unjudged
        assert not [n for n in judged.not_judged if case.rule in n], judged.not_judged


def test_an_adaptive_config_file_is_not_judged() -> None:
    """The candidate steps of --speculative-adaptive-config are a file's on the serving host: not judged, and said."""
    judged = judge("0.5.23", f"{ALGO} EAGLE {ADAPTIVE} --speculative-num-steps 4 --speculative-adaptive-config c.json")
    assert not [r for r in judged.refusals if r.rule == AS]
    assert any("--speculative-adaptive-config" in n for n in judged.not_judged)


def test_an_invalid_ragged_mode_is_not_judged() -> None:
    """read_ragged_verify_mode raises on a value it does not know, before the DSPARK check: not judged."""
    judged = judge("0.5.23", f"{DSPARK_DP} --moe-a2a-backend mori", {"SGLANG_RAGGED_VERIFY_MODE": "bogus"})
    assert not [r for r in judged.refusals if r.rule == DS]
    assert any(DS in n and "read_ragged_verify_mode" in n for n in judged.not_judged)


def test_an_inherited_backend_sglang_rewrites_is_not_judged() -> None:
    """With --dwdp-size > 1 SGLang sets the target's all-to-all backend itself: the draft's is not judged."""
    judged = judge("0.5.23", f"{ALGO} EAGLE --moe-a2a-backend deepep_v2 --dwdp-size 2")
    assert not [r for r in judged.refusals if r.rule == DD]
    assert any(rules_spec4.RULES[DD] in n for n in judged.not_judged)


def test_every_rule_of_the_area_has_a_refusing_and_an_accepted_case() -> None:
    assert {c.rule for c in CASES if c.refused is not None} == set(rules_spec4.RULES)
    assert {c.rule for c in CASES if c.refused is None} == set(rules_spec4.RULES)
