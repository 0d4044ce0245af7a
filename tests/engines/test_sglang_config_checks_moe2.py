"""More of SGLang's MoE refusals by release (``engines/sglang/rules_moe2.py``): elastic EP runtime scale-up, the
deprecated SGLANG_CUTLASS_MOE, the Ascend fused-EP mode and FlashInfer / DeepGEMM MegaMoE. Each line is parsed by the
release's own parser tables, judged by the release's conditions (with the launch's environment where a check reads
it), and refused in its words at its file:line; each refusal has an accepted neighbour.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from packaging.version import Version
from sglang_line_cases import assert_verdict

from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Judged, Layout

MOE = "Qwen/Qwen3-30B-A3B"
MIXTRAL = "mistralai/Mixtral-8x7B-Instruct-v0.1"
H100 = (9, 0)
B200 = (10, 0)
A100 = (8, 0)


def judge(version: str, words: str, model: str = MOE, cc: tuple[int, int] = H100, tp: int = 8,
          env: Mapping[str, str] | None = None) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    return config_check(line, load_model(model), Layout(tp, 1, 1, cc, "NVIDIA GPU", 81559), Version(version),
                        dict(env or {}))


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
    tp: int = 8
    env: Mapping[str, str] = field(default_factory=dict)


PH = "sglang/srt/arg_groups/parallel_hook.py"
SA = "sglang/srt/server_args.py"
MH = "sglang/srt/arg_groups/moe_hook.py"
MM = "sglang/srt/arg_groups/mega_moe_hook.py"
OV = "sglang/srt/arg_groups/overrides.py"
#: a scale-up primary that every assert SGLang makes without a CUDA graph accepts (0.5.22+ spelling, and before it)
SCALE = "--elastic-ep-backend mooncake --max-ep-size 16 --moe-a2a-backend nixl --enable-dp-lm-head --disable-cuda-graph"
OK_23 = f"{SCALE} --attn-dp-size 8"
OK_21 = f"{SCALE} --enable-dp-attention --dp 8"
JOIN = "--elastic-ep-join-mode scale --node-rank 1 --elastic-ep-join-rank-offset 8"
FLAGS, SIZES = "sglang.elastic_ep.scale_flags", "sglang.elastic_ep.scale_sizes"
TOPO = "sglang.elastic_ep.scale_topology"
FMM = "sglang.a2a.flashinfer_megamoe"
DISPATCH, W4A16 = "sglang.a2a.flashinfer_dispatch", "sglang.a2a.cutedsl_w4a16"
DEEPEP_V2, PACK = "sglang.a2a.deepep_v2_model", "sglang.expert_pack.flags"
EP = "sglang/srt/arg_groups/expert_pack_hook.py"
FI_A2A = "--moe-a2a-backend flashinfer --attn-dp-size 8 --moe-runner-backend flashinfer_cutlass"
CUTEDSL_A2A = "--moe-a2a-backend flashinfer --attn-dp-size 8 --moe-runner-backend flashinfer_cutedsl"
FMM_LINE = "--moe-a2a-backend flashinfer_megamoe --attn-dp-size 8 --quantization modelopt_fp4"

CASES = [
    # the flags
    Case(FLAGS, "0.5.23", f"{OK_23} --elastic-ep-scale-timeout 0", refused="--elastic-ep-scale-timeout must be greater "
         "than zero.", source=f"{PH}:621"),
    Case(FLAGS, "0.5.23", OK_23),
    Case(FLAGS, "0.5.16", f"{OK_21} --tokenizer-worker-num 2", refused="Elastic EP runtime scale-up currently requires "
         "--tokenizer-worker-num 1.", source=f"{SA}:5997"),
    Case(FLAGS, "0.5.16", OK_21),
    Case(FLAGS, "0.5.19", f"{OK_21} --load-balance-method total_tokens", refused="Elastic EP scale-up requires "
         "--load-balance-method round_robin; load-aware methods require global-rank load snapshots after scale (got "
         "total_tokens).", source=f"{PH}:461"),
    Case(FLAGS, "0.5.19", f"{OK_21} --load-balance-method auto"),        # auto is round_robin off a PD prefill worker
    Case(FLAGS, "0.5.23", OK_23.replace("mooncake", "nixl"), refused="Elastic EP runtime scale-up requires "
         "--elastic-ep-backend mooncake (got elastic_ep_backend=nixl).", source=f"{PH}:677"),
    Case(FLAGS, "0.5.18", f"{OK_21} --use-ray", refused="Elastic EP runtime scale-up does not support --use-ray.",
         source=f"{SA}:7131"),
    Case(FLAGS, "0.5.23", OK_23.replace("--max-ep-size 16", "--max-ep-size 8") + " --use-ray"),   # no scale-up
    # the sizes
    Case(SIZES, "0.5.23", f"{OK_23} --elastic-ep-initial-size 4", refused="The primary --elastic-ep-initial-size must "
         "equal its launch-time TP size (8).", source=f"{PH}:666"),
    Case(SIZES, "0.5.23", f"{OK_23} --elastic-ep-initial-size 8"),
    Case(SIZES, "0.5.23", f"{OK_23} {JOIN}", refused="Elastic EP scale joiners require --elastic-ep-initial-size set "
         "to the primary deployment's launch-time EP size.", source=f"{PH}:640"),
    Case(SIZES, "0.5.23", f"{OK_23} {JOIN} --elastic-ep-initial-size 8"),
    Case(SIZES, "0.5.17", f"{OK_21} {JOIN.replace('offset 8', 'offset 16')} --elastic-ep-initial-size 8",
         refused="Elastic EP joining group exceeds --max-ep-size (join_target=24, max_ep_size=16).",
         source=f"{SA}:6929"),
    Case(SIZES, "0.5.20", f"{SCALE} --enable-dp-attention --dp 1 {JOIN.replace('offset 8', 'offset 4')} "
         "--elastic-ep-initial-size 4",
         refused="A single-rank Elastic EP joining group requires --moe-dense-tp-size 1.",
         source=f"{PH}:470", tp=1),
    Case(SIZES, "0.5.20", f"{SCALE} --enable-dp-attention --dp 1 {JOIN.replace('offset 8', 'offset 4')} "
         "--elastic-ep-initial-size 4 --moe-dense-tp-size 1", tp=1),
    # the topology
    Case(TOPO, "0.5.23", SCALE, refused="Elastic EP scale-up requires attention DP (--attn-dp-size)",
         source=f"{PH}:722"),
    Case(TOPO, "0.5.23", f"{SCALE} --attn-dp-size 4", refused="Elastic EP scale-up with attention TP greater than "
         "one requires --moe-dense-tp-size 1 (got moe_dense_tp_size=None).", source=f"{PH}:615"),
    Case(TOPO, "0.5.23", f"{SCALE} --attn-dp-size 4 --moe-dense-tp-size 1"),   # attention TP 2 divides 16 and 8
    Case(TOPO, "0.5.23", SCALE.replace("--max-ep-size 16", "--max-ep-size 9") + " --attn-dp-size 4 "
         "--moe-dense-tp-size 1",
         refused="", source=f"{PH}:612"),         # 9 is no multiple of the attention replica (2): the bare re-raise
    Case(TOPO, "0.5.23", f"{SCALE} --attn-dp-size 3", refused="Invalid attention topology: tp_size=8, attn_dp_size=3, "
         "attn_cp_size=1.", source=f"{PH}:594", exception="ValueError"),
    Case(TOPO, "0.5.23", OK_23.replace("nixl", "deepep"), refused="Elastic EP scale-up requires --moe-a2a-backend nixl "
         "(got moe_a2a_backend=deepep).", source=f"{PH}:744"),
    Case(TOPO, "0.5.22", f"{SCALE} --attn-dp-size 4 --moe-dense-tp-size 1", refused="Elastic EP scale-up requires "
         "attn_dp_size == tp_size (got attn_dp_size=4, tp_size=8).", source=f"{PH}:679"),
    Case(TOPO, "0.5.22", OK_23),
    Case(TOPO, "0.5.21", OK_21.replace(" --enable-dp-lm-head", ""), refused="Elastic EP scale-up requires "
         "--enable-dp-lm-head so output projection", source=f"{PH}:590"),
    Case(TOPO, "0.5.21", OK_21),
    Case(TOPO, "0.5.16", f"{SCALE} --enable-dp-attention --dp 4", refused="Elastic EP scale-up requires dp_size == "
         "tp_size (got dp_size=4, tp_size=8).", source=f"{SA}:6084"),
    Case(TOPO, "0.5.16", OK_21.replace("--moe-a2a-backend nixl", "--ep-size 4"), refused="Elastic EP scale-up "
         "requires ep_size == tp_size (got ep_size=4, tp_size=8)", source=f"{SA}:6079"),
    Case(TOPO, "0.5.16", OK_21),
    # SGLANG_CUTLASS_MOE
    Case("sglang.moe_runner.cutlass_env", "0.5.8", "", refused="cutlass MoE is only supported with fp8 quantization",
         source=f"{SA}:1976", env={"SGLANG_CUTLASS_MOE": "1"}),
    Case("sglang.moe_runner.cutlass_env", "0.5.8", "--quantization fp8", env={"SGLANG_CUTLASS_MOE": "1"}),
    Case("sglang.moe_runner.cutlass_env", "0.5.8", "", env={"SGLANG_CUTLASS_MOE": "yes"}),  # get_bool_env_var: false
    Case("sglang.moe_runner.cutlass_env", "0.5.14", "--quantization awq", refused="cutlass MoE is only supported with "
         "fp8/mxfp8 quantization", source=f"{SA}:5173", env={"SGLANG_CUTLASS_MOE": "yes"}),
    Case("sglang.moe_runner.cutlass_env", "0.5.17", "", refused="cutlass MoE is only supported with fp8/mxfp8",
         source=f"{OV}:2432", env={"SGLANG_CUTLASS_MOE": "true"}),
    Case("sglang.moe_runner.cutlass_env", "0.5.17", "--quantization mxfp8", env={"SGLANG_CUTLASS_MOE": "true"}),
    # Ascend fused EP
    Case("sglang.a2a.ascend_fuseep", "0.5.10", "--moe-a2a-backend ascend_fuseep", refused="Wrong value of "
         "fuse_mode=None, the NPU only support 1 or 2.", source=f"{SA}:2767", exception="ValueError"),
    Case("sglang.a2a.ascend_fuseep", "0.5.10", "--moe-a2a-backend ascend_fuseep",
         env={"SGLANG_NPU_FUSED_MOE_MODE": "1"}),
    Case("sglang.a2a.ascend_fuseep", "0.5.14", "--moe-a2a-backend ascend_fuseep", refused="When fuse_mode is set to "
         "2, the NPU supports only ModelSlim quantization.", source=f"{SA}:5326",
         env={"SGLANG_NPU_FUSED_MOE_MODE": "2"}),
    Case("sglang.a2a.ascend_fuseep", "0.5.14", "--moe-a2a-backend ascend_fuseep --quantization modelslim",
         env={"SGLANG_NPU_FUSED_MOE_MODE": "2"}),
    Case("sglang.a2a.ascend_fuseep", "0.5.16", "", refused="Wrong value of SGLANG_NPU_FUSED_MOE_MODE=3, the NPU only "
         "supports 1 or 2.", source=f"{SA}:8176", exception="ValueError", env={"SGLANG_NPU_FUSED_MOE_MODE": "3"}),
    Case("sglang.a2a.ascend_fuseep", "0.5.16", "", env={"SGLANG_NPU_FUSED_MOE_MODE": "2"}),
    # FlashInfer MegaMOE
    Case(FMM, "0.5.23", FMM_LINE, model=MIXTRAL, cc=B200, refused="FlashInfer MegaMOE is not validated for model "
         "architectures ['MixtralForCausalLM'].", source=f"{MH}:258", exception="ValueError"),
    Case(FMM, "0.5.23", FMM_LINE, cc=B200),
    Case(FMM, "0.5.23", FMM_LINE.replace("modelopt_fp4", "fp8"), cc=B200, refused="FlashInfer MegaMOE currently "
         "supports only MXFP8, ModelOpt NVFP4, FP4-expert, hybrid NVFP4 MoE checkpoints, or nvfp4_online",
         source=f"{MH}:275", exception="ValueError"),
    Case(FMM, "0.5.21", FMM_LINE.replace("--attn-dp-size 8", "--enable-dp-attention --dp 8"), cc=H100,
         refused="FlashInfer MegaMOE currently requires an SM100-family CUDA device", source=f"{MH}:283",
         exception="ValueError"),
    Case(FMM, "0.5.20", FMM_LINE.replace("--attn-dp-size 8", "--enable-dp-attention --dp 8"), cc=B200,
         refused="SGLANG_FLASHINFER_MEGAMOE_COMBINE_DTYPE must be one of 'bf16', 'mxfp8', or 'nvfp4', got 'fp16'.",
         source=f"{MH}:180", exception="ValueError", env={"SGLANG_FLASHINFER_MEGAMOE_COMBINE_DTYPE": " FP16"}),
    Case(FMM, "0.5.22", FMM_LINE, cc=B200, refused="SGLANG_FLASHINFER_MEGAMOE_COMBINE_DTYPE='mxfp8' is incompatible "
         "with SGLANG_FLASHINFER_MEGAMOE_IN_KERNEL_FC2_REDUCE=1.", source=f"{MH}:197", exception="ValueError",
         env={"SGLANG_FLASHINFER_MEGAMOE_COMBINE_DTYPE": "mxfp8",
              "SGLANG_FLASHINFER_MEGAMOE_IN_KERNEL_FC2_REDUCE": "1"}),
    Case(FMM, "0.5.22", FMM_LINE, cc=B200, env={"SGLANG_FLASHINFER_MEGAMOE_COMBINE_DTYPE": "mxfp8"}),
    Case(FMM, "0.5.23", f"{FMM_LINE} --dtype float16", cc=B200, refused="FlashInfer MegaMOE NVFP4 W4A16 requires "
         "--dtype bfloat16.", source=f"{MH}:322", exception="ValueError",
         env={"SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16": "1"}),
    Case(FMM, "0.5.23", f"{FMM_LINE} --dtype float16", cc=B200),
    # FlashInfer all-to-all dispatch types
    Case(DISPATCH, "0.5.23", f"{FI_A2A} --flashinfer-a2a-dispatch-type mxfp8", refused="--flashinfer-a2a-dispatch-type "
         "mxfp8 requires --quantization mxfp8.", source=f"{MH}:193", exception="ValueError"),
    Case(DISPATCH, "0.5.23", f"{FI_A2A} --flashinfer-a2a-dispatch-type bf16"),
    Case(DISPATCH, "0.5.20", f"{FI_A2A.replace('--attn-dp-size 8', '--enable-dp-attention --dp 8')} "
         "--flashinfer-a2a-dispatch-type nvfp4", refused="--flashinfer-a2a-dispatch-type nvfp4 requires NVFP4/"
         "modelopt-FP4 quantization or hybrid NVFP4 MoE metadata.", source=f"{MH}:165", exception="ValueError"),
    Case(DISPATCH, "0.5.23", f"{FI_A2A} --flashinfer-a2a-dispatch-type bf16", refused="SGLANG_MOE_NVFP4_DISPATCH "
         "cannot be set together with --flashinfer-a2a-dispatch-type.", source=f"{MH}:172", exception="ValueError",
         env={"SGLANG_MOE_NVFP4_DISPATCH": "0"}),
    Case(DISPATCH, "0.5.23", FI_A2A, env={"SGLANG_MOE_NVFP4_DISPATCH": "0"}),    # no dispatch type: not called
    # CuTe DSL NVFP4 W4A16 over FlashInfer all-to-all
    Case(W4A16, "0.5.23", CUTEDSL_A2A, refused="CuTe DSL NVFP4 W4A16 requires BF16 FlashInfer MoE dispatch; unset "
         "SGLANG_MOE_NVFP4_DISPATCH.", source=f"{MH}:494", exception="ValueError",
         env={"SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16": "1", "SGLANG_MOE_NVFP4_DISPATCH": "1"}, cc=B200),
    Case(W4A16, "0.5.23", CUTEDSL_A2A, env={"SGLANG_MOE_NVFP4_DISPATCH": "1"}, cc=B200),
    Case(W4A16, "0.5.23", f"{CUTEDSL_A2A} --flashinfer-a2a-dispatch-type nvfp4", refused="CuTe DSL NVFP4 W4A16 "
         "requires --flashinfer-a2a-dispatch-type bf16.", source=f"{MH}:527", exception="ValueError",
         env={"SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16": "true"}, cc=B200),
    Case(W4A16, "0.5.23", f"{CUTEDSL_A2A} --flashinfer-a2a-dispatch-type bf16",
         env={"SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16": "true"}, cc=B200),
    Case(W4A16, "0.5.19", CUTEDSL_A2A.replace("--attn-dp-size 8", "--enable-dp-attention --dp 8"), refused="CuTe DSL "
         "NVFP4 W4A16 requires BF16 FlashInfer MoE dispatch", source=f"{MH}:268", exception="ValueError",
         env={"SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16": "yes", "SGLANG_MOE_NVFP4_DISPATCH": "y"}, cc=B200),
    # DeepEP v2's architectures
    Case(DEEPEP_V2, "0.5.19", "--moe-a2a-backend deepep_v2", model=MIXTRAL, refused="DeepEP v2 MoE is not validated "
         "for 'MixtralForCausalLM'; supported architectures are ['DeepseekV3ForCausalLM', 'DeepseekV4ForCausalLM', "
         "'Qwen3MoeForCausalLM'].", source=f"{MH}:452", exception="ValueError"),
    Case(DEEPEP_V2, "0.5.19", "--moe-a2a-backend deepep_v2"),
    Case(DEEPEP_V2, "0.5.23", "--moe-a2a-backend deepep_v2", model=MIXTRAL, refused="DeepEP v2 MoE is not validated "
         "for 'MixtralForCausalLM'. The model package must register", source=f"{MH}:726", exception="ValueError"),
    Case(DEEPEP_V2, "0.5.23", "--moe-a2a-backend deepep_v2 --model-path instance://10.0.0.1:30000",
         refused="DeepEP v2 MoE cannot validate a model loaded through an instance connector.", source=f"{MH}:716",
         exception="ValueError"),
    Case(DEEPEP_V2, "0.5.23", "--moe-a2a-backend deepep"),
    # expert packs
    Case(PACK, "0.5.23", "--load-format expert_pack", refused="Invalid expert_pack configuration:\n- tensor "
         "parallelism (--tp-size) must be 1, got 8", source=f"{EP}:192", exception="ValueError"),
    Case(PACK, "0.5.23", "--load-format expert_pack", tp=1),
    Case(PACK, "0.5.19", "--load-format expert_pack --enable-waterfill --cuda-graph-backend-decode full",
         refused="- --enable-waterfill is incompatible with expert_pack\n- expert_pack requires the decode CUDA graph "
         "backend to be disabled, got 'full'", source=f"{EP}:191", exception="ValueError", tp=1),
    Case(PACK, "0.5.22", "--load-format expert_pack --model-loader-extra-config [1]", refused="- "
         "--model-loader-extra-config must be a JSON object", source=f"{EP}:192", exception="ValueError", tp=1),
    # DeepGEMM MegaMoE
    Case("sglang.a2a.megamoe", "0.5.21", "--moe-a2a-backend megamoe --enable-two-batch-overlap", refused="--moe-a2a-"
         "backend megamoe has no two-batch / single-batch overlap decomposition", source=f"{MM}:33",
         exception="ValueError"),
    Case("sglang.a2a.megamoe", "0.5.23", "--moe-runner-backend megamoe", cc=A100, refused="--moe-a2a-backend megamoe "
         "needs a CUDA SM90 GPU", source=f"{MM}:43", exception="ValueError"),   # the runner is its alias
    Case("sglang.a2a.megamoe", "0.5.23", "--moe-runner-backend megamoe", cc=H100),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.rule}-{c.version}-{c.words}-{sorted(c.env.items())}")
def test_the_release_refuses_in_its_words_or_accepts(case: Case) -> None:
    assert_verdict(judge(case.version, case.words, case.model, case.cc, case.tp, case.env), case.rule, case.refused,
                   exception=case.exception, version=case.version, source=case.source)


def test_an_accepted_scale_up_leaves_only_the_cuda_graph_checks_unsaid() -> None:
    """The primary every asserting check accepts: nothing refused by these rules; without --disable-cuda-graph the
    graph asserts (not modelled) are in no rule, so nothing of this module is named either."""
    judged = judge("0.5.23", OK_23)
    assert not [r for r in judged.refusals if r.rule.startswith("sglang.elastic_ep")], judged.refusals
    assert not [n for n in judged.not_judged if "sglang.elastic_ep.scale" in n], judged.not_judged


def test_a_backend_sglang_rewrites_is_not_guessed() -> None:
    """--enable-waterfill makes the all-to-all backend deepep first: the nixl and EP-size asserts are named."""
    judged = judge("0.5.23", f"{OK_23} --enable-waterfill")
    assert not [r for r in judged.refusals if r.rule == TOPO and "nixl" in r.message]
    assert any("(sglang.elastic_ep.scale_topology): reads" in n for n in judged.not_judged)


def test_dwdp_leaves_the_sizes_and_topology_to_itself() -> None:
    judged = judge("0.5.23", f"{SCALE} --dwdp-size 8")
    assert not [r for r in judged.refusals if r.rule in (SIZES, TOPO)]
    assert any("--dwdp-size sets" in n for n in judged.not_judged)


def test_an_expert_pack_the_line_accepts_leaves_its_files_unsaid() -> None:
    judged = judge("0.5.23", "--load-format expert_pack", tp=1)
    assert not [r for r in judged.refusals if r.rule == PACK]
    assert any("expert-pack, manifest and model files on the serving host (" in n for n in judged.not_judged)


def test_an_unknown_checkpoint_quantization_is_not_guessed() -> None:
    """GPT-OSS carries a quantization_config (MXFP4): its FP4-expert layout is the release's to read."""
    judged = judge("0.5.23", "--moe-a2a-backend flashinfer_megamoe --attn-dp-size 8", "openai/gpt-oss-120b", B200)
    assert not [r for r in judged.refusals if r.rule == FMM and "supports only" in r.message]


@pytest.mark.parametrize("version", ["0.5.8", "0.5.14", "0.5.16", "0.5.20", "0.5.23"])
def test_the_release_defaults_refuse_nothing_here_and_leave_nothing_unsaid(version: str) -> None:
    judged = judge(version, "")
    mine = ("sglang.elastic_ep.scale", "sglang.moe_runner.cutlass_env", "sglang.a2a.ascend_fuseep", FMM,
            "sglang.a2a.megamoe", DISPATCH, W4A16, DEEPEP_V2, PACK)
    assert not [r for r in judged.refusals if r.rule.startswith(mine)]
    assert not [n for n in judged.not_judged if any(m in n for m in mine)]


def test_an_external_model_package_may_register_deepep_v2_architectures() -> None:
    """From 0.5.21 the architectures are a registry SGLANG_EXTERNAL_MODEL_PACKAGE may add to: not judged, said."""
    env = {"SGLANG_EXTERNAL_MODEL_PACKAGE": "my_models"}
    judged = judge("0.5.23", "--moe-a2a-backend deepep_v2", MIXTRAL, env=env)
    assert not [r for r in judged.refusals if r.rule == DEEPEP_V2]
    assert any("SGLANG_EXTERNAL_MODEL_PACKAGE names an external model package" in n for n in judged.not_judged)
    # 0.5.19's list is a tuple in the release's own code: the package cannot add to it
    assert [r for r in judge("0.5.19", "--moe-a2a-backend deepep_v2", MIXTRAL, env=env).refusals
            if r.rule == DEEPEP_V2]
