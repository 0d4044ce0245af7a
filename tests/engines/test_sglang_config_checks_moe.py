"""SGLang's MoE runner and all-to-all refusals by release (``engines/sglang/rules_moe.py``): each line is parsed by
the release's own parser tables, judged by the release's conditions, and refused in its words at its file:line;
each refusal has an accepted neighbour (the line without the conflict, or a release without the check), and a value
SGLang resolves itself first is named as not judged rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from packaging.version import Version
from sglang_line_cases import assert_verdict

from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Judged, Layout

MOE = "Qwen/Qwen3-30B-A3B"
DEEPSEEK = "deepseek-ai/DeepSeek-V3"
H100 = (9, 0)
B200 = (10, 0)


def on(cc: tuple[int, int] = H100, tp: int = 8) -> Layout:
    return Layout(tp, 1, 1, cc, "NVIDIA GPU", 81559)


def judge(version: str, words: str, model: str = MOE, cc: tuple[int, int] = H100) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    return config_check(line, load_model(model), on(cc), Version(version))


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    refused: str | None = None            # the release's words; None: the release accepts the line
    source: str = ""
    exception: str = "AssertionError"
    cc: tuple[int, int] = H100
    model: str = MOE


MH = "sglang/srt/arg_groups/moe_hook.py"
SA = "sglang/srt/server_args.py"
OV = "sglang/srt/arg_groups/overrides.py"
VH = "sglang/srt/arg_groups/validation_hook.py"
PH = "sglang/srt/arg_groups/parallel_hook.py"
FI = "--moe-runner-backend flashinfer_cutlass"

CASES = [
    # the runner against the quantization: each release's list
    Case("sglang.moe_runner.quantization", "0.5.23", f"{FI} --quantization fp8",
         refused="Invalid quantization 'fp8'. \nFlashInfer Cutlass MOE supports only", source=f"{MH}:81"),
    Case("sglang.moe_runner.quantization", "0.5.23", f"{FI} --quantization modelopt_fp4"),
    Case("sglang.moe_runner.quantization", "0.5.23", FI),                      # an unquantized checkpoint: None
    Case("sglang.moe_runner.quantization", "0.5.5", FI, refused="modelopt_fp4 quantization is required for Flashinfer "
         "MOE", source=f"{SA}:1394"),                                          # 0.5.5 lists modelopt_fp4 only
    Case("sglang.moe_runner.quantization", "0.5.5", f"{FI} --quantization modelopt_fp4"),
    Case("sglang.moe_runner.quantization", "0.5.23", "--moe-runner-backend flashinfer_trtllm --quantization awq",
         refused="Invalid quantization 'awq'. \nFlashInfer TRTLLM MOE supports only", source=f"{MH}:124"),
    Case("sglang.moe_runner.quantization", "0.5.9", "--moe-runner-backend flashinfer_trtllm --quantization awq",
         refused="FlashInfer TRTLLM MOE supports only: 'modelopt_fp4', 'fp8', 'modelopt_fp8', 'compressed-tensors'",
         source=f"{SA}:2148"),
    Case("sglang.moe_runner.quantization", "0.5.9", "--moe-runner-backend flashinfer_trtllm --quantization fp8"),
    # the EP size at the kernel checks is the line's (the all-to-all backend sets it later)
    Case("sglang.moe_runner.ep_size", "0.5.23", f"{FI} --ep-size 2", refused="The expert parallel size must be 1 or "
         "the same as the tensor parallel size", source=f"{MH}:89"),
    Case("sglang.moe_runner.ep_size", "0.5.23", f"{FI} --ep-size 8"),
    Case("sglang.moe_runner.ep_size", "0.5.9", f"{FI} --expert-parallel-size 2",
         refused="The expert parallel size must be 1", source=f"{SA}:2142"),
    Case("sglang.moe_runner.ep_size", "0.5.23", "--moe-runner-backend cutlass --quantization fp8 --ep-size 8",
         refused="FP8/MXFP8 Cutlass MoE is only supported with ep_size == 1", source=f"{MH}:161"),
    Case("sglang.moe_runner.ep_size", "0.5.23", "--moe-runner-backend cutlass --quantization fp8"),
    # CuteDSL: its all-to-all backends, and DeepEP's normal mode
    Case("sglang.moe_runner.cutedsl_a2a", "0.5.23", "--moe-runner-backend flashinfer_cutedsl --quantization "
         "modelopt_fp4 --moe-a2a-backend mooncake", refused="flashinfer_cutedsl supports moe_a2a_backend='none', "
         "'deepep', or 'flashinfer', got 'mooncake'.", source=f"{MH}:106", cc=B200),
    Case("sglang.moe_runner.cutedsl_a2a", "0.5.23", "--moe-runner-backend flashinfer_cutedsl --quantization "
         "modelopt_fp4 --moe-a2a-backend deepep --deepep-mode normal", refused="flashinfer_cutedsl FP4 MoE only "
         "supports DeepEP low_latency dispatch", source=f"{MH}:377", exception="ValueError", cc=B200),
    Case("sglang.moe_runner.cutedsl_a2a", "0.5.23", "--moe-runner-backend flashinfer_cutedsl --quantization "
         "modelopt_fp4 --moe-a2a-backend deepep --deepep-mode low_latency", cc=B200),
    # --quantization nvfp4_online: SM100 only, and the TRT-LLM / CuteDSL runners
    Case("sglang.moe_runner.nvfp4_online", "0.5.23", "--quantization nvfp4_online", refused="--quantization "
         "nvfp4_online is supported only on NVIDIA Blackwell SM100/SM103 GPUs.", source=f"{OV}:1458",
         exception="ValueError"),
    Case("sglang.moe_runner.nvfp4_online", "0.5.23", "--quantization nvfp4_online", cc=B200),
    Case("sglang.moe_runner.nvfp4_online", "0.5.23", "--quantization nvfp4_online --moe-runner-backend triton",
         refused="supports only --moe-runner-backend flashinfer_trtllm or flashinfer_trtllm_routed, or "
         "flashinfer_cutedsl; flashinfer_megamoe", source=f"{OV}:1471", exception="ValueError", cc=B200),
    Case("sglang.moe_runner.nvfp4_online", "0.5.14", "--quantization nvfp4_online --moe-runner-backend triton",
         refused="supports only --moe-runner-backend flashinfer_trtllm or flashinfer_trtllm_routed.",
         source=f"{SA}:5076", exception="ValueError", cc=B200),
    Case("sglang.moe_runner.nvfp4_online", "0.5.14", "--quantization nvfp4_online --moe-runner-backend "
         "flashinfer_trtllm_routed", cc=B200),
    # the all-to-all backends' runner lists
    Case("sglang.a2a.moe_runner", "0.5.9", "--moe-a2a-backend flashinfer", refused="Flashinfer MoE A2A is only "
         "supported with flashinfer_cutlass moe runner backend", source=f"{SA}:2214"),
    Case("sglang.a2a.moe_runner", "0.5.9", f"--moe-a2a-backend flashinfer {FI}"),
    Case("sglang.a2a.moe_runner", "0.5.23", "--moe-a2a-backend flashinfer --attn-dp-size 8",
         refused="FlashInfer MoE A2A is supported with flashinfer_cutlass, flashinfer_cutedsl", source=f"{MH}:531"),
    Case("sglang.a2a.moe_runner", "0.5.23", f"--moe-a2a-backend flashinfer --attn-dp-size 8 {FI}"),
    Case("sglang.a2a.moe_runner", "0.5.23", "--moe-a2a-backend pplx --attn-dp-size 8 --moe-runner-backend triton",
         refused="moe_a2a_backend='pplx' is only supported with --moe-runner-backend deep_gemm (or auto).",
         source=f"{MH}:599"),
    Case("sglang.a2a.moe_runner", "0.5.23", "--moe-a2a-backend pplx --attn-dp-size 8"),
    Case("sglang.a2a.moe_runner", "0.5.23", "--moe-a2a-backend deepep_v2 --moe-runner-backend triton",
         refused="DeepEP v2 MoE currently supports only --moe-runner-backend deep_gemm. Got 'triton'.",
         source=f"{MH}:414", exception="ValueError"),
    Case("sglang.a2a.moe_runner", "0.5.23", "--moe-a2a-backend deepep_v2"),     # auto becomes deep_gemm
    Case("sglang.a2a.moe_runner", "0.5.21", "--moe-a2a-backend flashinfer_megamoe --enable-dp-attention --dp 8 "
         "--moe-runner-backend triton", refused="FlashInfer MegaMOE a2a backend requires --moe-runner-backend "
         "flashinfer_megamoe", source=f"{MH}:279", cc=B200),
    # FlashInfer all-to-all needs attention DP over the whole TP group
    Case("sglang.a2a.flashinfer_dp_attention", "0.5.16", f"--moe-a2a-backend flashinfer {FI}",
         refused="Flashinfer MoE A2A is only supported with dp_size == tp_size and --enable-dp-attention",
         source=f"{SA}:5866"),
    Case("sglang.a2a.flashinfer_dp_attention", "0.5.16", f"--moe-a2a-backend flashinfer {FI} --enable-dp-attention "
         "--dp 8"),
    Case("sglang.a2a.flashinfer_dp_attention", "0.5.23", f"--moe-a2a-backend flashinfer {FI}",
         refused="Flashinfer MoE A2A requires --attn-dp-size equal to --tp-size", source=f"{MH}:475"),
    Case("sglang.a2a.flashinfer_dp_attention", "0.5.23", f"--moe-a2a-backend flashinfer {FI} --attn-dp-size 8"),
    # DeepEP v2's flags
    Case("sglang.a2a.deepep_v2", "0.5.23", "--moe-a2a-backend deepep_v2 --enable-two-batch-overlap",
         refused="DeepEP v2 MoE has not implemented the TBO/SBO overlap hooks yet.", source=f"{MH}:421",
         exception="ValueError"),
    Case("sglang.a2a.deepep_v2", "0.5.19", "--moe-a2a-backend deepep_v2 --enable-deterministic-inference",
         refused="DeepEP v2 does not forward deterministic=True", source=f"{MH}:185", exception="ValueError"),
    Case("sglang.a2a.deepep_v2", "0.5.21", "--moe-a2a-backend deepep_v2 --enable-deterministic-inference"),
    Case("sglang.a2a.deepep_v2", "0.5.23", "--moe-a2a-backend deepep_v2 --deepep-v2-mode direct --nnodes 2",
         refused="--deepep-v2-mode direct is NVLink-only and cannot run across nodes (nnodes=2)",
         source=f"{MH}:433", exception="ValueError"),
    Case("sglang.a2a.deepep_v2", "0.5.23", "--moe-a2a-backend deepep_v2 --deepep-v2-mode hybrid --nnodes 2"),
    # two-batch overlap without an all-to-all backend
    Case("sglang.two_batch_overlap.a2a", "0.5.10", "--enable-two-batch-overlap", refused="When enabling two batch "
         "overlap, moe_a2a_backend cannot be 'none'.", source=f"{SA}:6228", exception="ValueError"),
    Case("sglang.two_batch_overlap.a2a", "0.5.10", "--enable-two-batch-overlap --moe-a2a-backend deepep"),
    Case("sglang.two_batch_overlap.a2a", "0.5.23", "--enable-two-batch-overlap", refused="attention DP "
         "(--attn-dp-size) is required", source=f"{VH}:768", exception="ValueError"),
    Case("sglang.two_batch_overlap.a2a", "0.5.23", "--enable-two-batch-overlap --attn-dp-size 8"),
    Case("sglang.two_batch_overlap.a2a", "0.5.16", "--enable-two-batch-overlap", refused="--enable-dp-attention is "
         "required", source=f"{SA}:7568", exception="ValueError"),
    Case("sglang.two_batch_overlap.a2a", "0.5.16", "--enable-two-batch-overlap --enable-dp-attention --dp 8"),
    # Kimi-K3's shared-experts TP
    Case("sglang.shared_experts_tp", "0.5.23", "--shared-experts-tp-size 3", refused="--shared-experts-tp-size (3) "
         "must be a positive divisor of attention TP size (8).", source=f"{PH}:216", exception="ValueError"),
    Case("sglang.shared_experts_tp", "0.5.23", "--shared-experts-tp-size 2", refused="--shared-experts-tp-size is "
         "only supported for Kimi-K3.", source=f"{PH}:226", exception="ValueError"),
    Case("sglang.shared_experts_tp", "0.5.20", "--attn-cp-size 1"),            # before the flag
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.rule}-{c.version}-{c.words}")
def test_the_release_refuses_in_its_words_or_accepts(case: Case) -> None:
    assert_verdict(judge(case.version, case.words, case.model, case.cc), case.rule, case.refused,
                   exception=case.exception, version=case.version, source=case.source)


def test_a_quantized_checkpoint_without_the_flag_is_not_judged() -> None:
    """DeepSeek-V3's FP8 checkpoint: on SM100 SGLang sets the quantization from it (overrides.py
    _deepseek_moe_quant_resolution), so the TRT-LLM runner's list is named, not judged."""
    judged = judge("0.5.23", "--moe-runner-backend flashinfer_trtllm", DEEPSEEK, B200)
    assert not [r for r in judged.refusals if r.rule.startswith("sglang.moe_runner")]
    assert any("(sglang.moe_runner.quantization): reads" in n for n in judged.not_judged)


def test_an_auto_runner_a_model_override_may_pick_is_not_guessed() -> None:
    """On SM100 the model overrides pick FlashInfer runners for auto: the MegaMOE runner check is named."""
    judged = judge("0.5.21", "--moe-a2a-backend flashinfer_megamoe --enable-dp-attention --dp 8", cc=B200)
    assert not [r for r in judged.refusals if r.rule == "sglang.a2a.moe_runner"]
    assert any("(sglang.a2a.moe_runner): reads" in n for n in judged.not_judged)


@pytest.mark.parametrize("version", ["0.5.5", "0.5.9", "0.5.16", "0.5.19", "0.5.23"])
@pytest.mark.parametrize("cc", [H100, B200])
def test_the_release_defaults_refuse_nothing_and_leave_nothing_unsaid(version: str, cc: tuple[int, int]) -> None:
    for model in (MOE, DEEPSEEK):
        judged = judge(version, "", model, cc)
        assert (judged.refusals, judged.not_judged) == ((), ()), (model, judged)
