"""Quantized and expert shares the engines refuse at load time, on real public checkpoints' configs.

The configs under ``tests/data/models/`` are the published Hugging Face ``config.json`` files, written
from the public repositories as far as we know them:

- ``qwen3-30b-a3b-fp8`` / ``qwen3-235b-a22b-fp8``: Qwen/Qwen3-30B-A3B-FP8 and Qwen/Qwen3-235B-A22B-FP8,
  the bf16 configs (bundled in the catalog) plus their ``quantization_config`` (fp8, e4m3, dynamic
  activations, ``weight_block_size`` [128, 128]);
- ``qwen3-30b-a3b-w4a16``: RedHatAI/Qwen3-30B-A3B-quantized.w4a16 (llm-compressor, compressed-tensors
  ``pack-quantized`` int4, group 128, router gates and lm_head ignored; ``global_compression_ratio``
  left null: its value is not known to us);
- ``llama-3.1-8b-instruct-w4a16``: RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16 in the same form;
- ``qwen1.5-moe-a2.7b``: Qwen/Qwen1.5-MoE-A2.7B (60 routed experts).

Engine sources cited are paths inside the released wheels (``pip download --no-deps vllm==X``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import dep, machine, subject
from packaging.version import Version

from pytest_gpulayout.engine import ShardLayout
from pytest_gpulayout.engines.vllm.divisibility import block_fp8_problems, int_group_problems
from pytest_gpulayout.engines.vllm.engine import VLLM
from pytest_gpulayout.findings import Status
from pytest_gpulayout.host import Host
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.rules.heads import check_heads

MODELS = Path(__file__).parents[1] / "data" / "models"
BLOCK_N_TEXT = "The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128."


def model(name: str):  # type: ignore[no-untyped-def]
    return load_model(str(MODELS / name))


# -- the audit's false passes -------------------------------------------------------------------

@pytest.mark.parametrize("version", ["0.9.2", "0.11.0", "0.21.0", "0.28.0"])
def test_qwen3_235b_fp8_at_tp8_fails_on_vllm_up_to_0_28(version: str):
    # vllm <= 0.28 quantization/fp8.py Fp8MoEMethod.create_weights: 1536 / 8 = 192, 192 % 128 != 0
    f = check_heads(subject(dep("q235", tp=8, engine_version=version), machine(8), model("qwen3-235b-a22b-fp8")))
    assert f.status is Status.FAIL
    assert BLOCK_N_TEXT in f.message
    assert f"vLLM {version}" in f.message
    assert "TP sizes that start: 1, 2, 4" in f.message
    assert "enable_expert_parallel: true" in f.message
    assert "vLLM >= 0.29" in f.message
    assert f.data["shard_problems"][0]["width"] == 192


def test_qwen3_30b_fp8_at_tp4_fails_on_vllm_0_28_and_starts_on_0_29():
    m = model("qwen3-30b-a3b-fp8")
    old = check_heads(subject(dep("q30", tp=4, engine_version="0.28.0"), machine(4), m))
    assert old.status is Status.FAIL and BLOCK_N_TEXT in old.message
    assert "768 / TP=4 = 192" in old.message and "TP sizes that start: 1, 2" in old.message
    # 0.29 fused_moe/oracle/fp8.py refine_fp8_moe_block_shape: gcd(128, 128, 192, 2048) = 64 >= 32
    new = check_heads(subject(dep("q30", tp=4, engine_version="0.29.0"), machine(4), m))
    assert new.status is Status.PASS
    assert "refines the MoE block scales from [128, 128] to [64, 64]" in new.message


def test_the_installed_release_decides_when_nothing_is_pinned():
    m = model("qwen3-30b-a3b-fp8")
    assert check_heads(subject(dep(tp=4), machine(4), m, Host({"vllm": "0.28.0"}))).status is Status.FAIL
    assert check_heads(subject(dep(tp=4), machine(4), m, Host({"vllm": "0.33.0"}))).status is Status.PASS
    bare = check_heads(subject(dep(tp=4), machine(4), m))   # nothing installed: the newest known release
    assert bare.status is Status.PASS and bare.data["engine_version"] == "0.33.0"


def test_expert_parallel_keeps_whole_expert_widths_so_block_fp8_starts():
    m = model("qwen3-235b-a22b-fp8")
    f = check_heads(subject(dep(tp=8, engine_version="0.28.0", enable_expert_parallel=True), machine(8), m))
    assert f.status is Status.PASS


def test_vllm_dp_flattens_into_the_expert_width_for_block_fp8():
    # TP=2 x DP=2: every expert split over 4 ranks -> 768 / 4 = 192; DP=3 gives 128 and starts
    m = model("qwen3-30b-a3b-fp8")
    f = check_heads(subject(dep(tp=2, dp=2, engine_version="0.28.0"), machine(8), m))
    assert f.status is Status.FAIL
    assert "(TP x DP = 2 x 2) = 192" in f.message
    assert "data_parallel_size that works with TP=2: 1, 3" in f.message
    assert check_heads(subject(dep(tp=2, dp=3, engine_version="0.28.0"), machine(8), m)).status is Status.PASS


def test_sglang_has_the_block_fp8_moe_rule_without_refinement():
    # sglang 0.5.23 srt/layers/quantization/fp8.py: same ValueError, moe_tp = TP / EP
    m = model("qwen3-30b-a3b-fp8")
    for version in ("0.4.3.post4", "0.5.23"):
        f = check_heads(subject(dep(tp=4, engine="sglang", engine_version=version), machine(4), m))
        assert f.status is Status.FAIL and BLOCK_N_TEXT in f.message and "SGLang raises" in f.message
        assert "vLLM >= 0.29" not in f.message
    ep = check_heads(subject(dep(tp=4, engine="sglang", engine_version="0.5.23", enable_expert_parallel=True),
                     machine(4), m))
    assert ep.status is Status.PASS


def test_compressed_tensors_w4a16_moe_groups_split_at_tp4():
    # 768 / 4 = 192 inputs per rank for each expert's down_proj: 1.5 groups of 128
    m = model("qwen3-30b-a3b-w4a16")
    assert m.quantization is not None and m.quantization.fmt == "pack-quantized"
    f = check_heads(subject(dep(tp=4, engine_version="0.33.0"), machine(4), m))
    assert f.status is Status.FAIL
    assert ("CompressedTensors WNA16 MoE with static group scales requires the MoE intermediate size per "
            "tensor-parallel partition (192) to be divisible by group_size (128)") in f.message
    assert "TP sizes that start: 1, 2" in f.message and "enable_expert_parallel: true" in f.message
    assert check_heads(subject(dep(tp=2, engine_version="0.33.0"), machine(4), m)).status is Status.PASS
    # before 0.25 the release has no check: the shard loads with mismatched scales -> still a fail
    old = check_heads(subject(dep(tp=4, engine_version="0.21.0"), machine(4), m))
    assert old.status is Status.FAIL and "has no check for it" in old.message and "vLLM 0.25" in old.message


def test_compressed_tensors_w4a16_dense_llama_8b_starts_at_every_head_tp():
    m = model("llama-3.1-8b-instruct-w4a16")
    assert m.quantization is not None and m.quantization.is_int_grouped
    for tp in (1, 2, 4, 8):
        for version in ("0.11.0", "0.33.0"):
            assert check_heads(subject(dep(tp=tp, engine_version=version), machine(8), m)).status is Status.PASS


def test_marlin_tile_rules_apply_before_0_25_only():
    # a 3456-wide MLP at TP=4 with 32-wide groups: 864 inputs per rank hold whole groups (27), but
    # 864 % 128 != 0 breaks Marlin's min_thread_k tile, which only releases before 0.25 refuse
    m = model("llama-3.1-8b-instruct-w4a16")
    from dataclasses import replace
    q = m.quantization
    assert q is not None
    odd = replace(m, intermediate_size=3456, quantization=replace(q, group_size=32))
    old, _ = int_group_problems(odd, ShardLayout(VLLM, Version("0.22.0"), 4))
    assert old and "min_thread_k = 128" in old[0].engine_error and old[0].width == 864
    assert not int_group_problems(odd, ShardLayout(VLLM, Version("0.25.0"), 4))[0]


def test_dense_block_fp8_checks_and_the_merged_layer_skip():
    # a dense block-FP8 model whose MLP share is 96 at TP=4: the down_proj input (row-parallel) is
    # checked in every release; the merged gate_up is skipped from vLLM 0.19 (linear.py)
    m = model("qwen3-30b-a3b-fp8")
    from dataclasses import replace
    dense = replace(m, num_experts=None, moe_intermediate_size=None, intermediate_size=384)
    probs, _ = block_fp8_problems(dense, ShardLayout(VLLM, Version("0.33.0"), 4))
    assert [p.layer for p in probs] == ["mlp.down_proj"]
    assert "Weight input_size_per_partition = 96 is not divisible by weight quantization block_k = 128." \
        == probs[0].engine_error
    old, _ = block_fp8_problems(dense, ShardLayout(VLLM, Version("0.11.0"), 4))
    assert old[0].layer == "mlp.gate_up_proj" and "output_partition_size = 96" in old[0].engine_error


# -- SGLang expert parallel ---------------------------------------------------------------------

def test_sglang_ep_asserts_whole_experts_where_vllm_spreads_them():
    # sglang srt/layers/moe/fused_moe_triton/layer.py: assert num_experts % ep_size == 0 (60 % 8 = 4)
    m = model("qwen1.5-moe-a2.7b")
    s = check_heads(subject(dep(tp=8, engine="sglang", engine_version="0.5.23", enable_expert_parallel=True),
                    machine(8), m))
    assert s.status is Status.FAIL
    assert "AssertionError" in s.message and "60 routed experts divide by 8" in s.message
    assert "whose EP divides the 60 experts: 1, 2, 4" in s.message
    assert "enable_expert_parallel: false" in s.message
    assert check_heads(subject(dep(tp=4, engine="sglang", enable_expert_parallel=True), machine(8), m)).status \
        is Status.PASS
    # vLLM's determine_expert_map gives the first ranks one more: it starts, unevenly (warn)
    v = check_heads(subject(dep(tp=8, enable_expert_parallel=True), machine(8), m))
    assert v.status is Status.WARN and "do not split evenly" in v.message


def test_deepseek_v3_sglang_ep8_passes():
    m = load_model("deepseek-ai/DeepSeek-V3")   # 256 routed experts, block-FP8 [128, 128]
    f = check_heads(subject(dep(tp=8, engine="sglang", engine_version="0.5.23", enable_expert_parallel=True),
                    machine(8), m))
    assert f.status is Status.PASS


# -- other widths divide() splits ---------------------------------------------------------------

def test_linear_attention_widths_must_divide_by_tp():
    m = model("qwen3-next-80b-a3b-instruct")   # 32 value heads in each Gated DeltaNet layer
    from pytest_gpulayout.rules.heads import tp_problems
    assert not tp_problems(m, 16)
    from dataclasses import replace
    assert m.linear_state is not None
    odd = replace(m, linear_state=replace(m.linear_state, heads=24))
    assert any("linear-attention heads 24 does not divide by TP=16" in p for p in tp_problems(odd, 16))


# -- issue 19 item 3: int groups straddling ranks ------------------------------------------------------

def _awq_fp16_odd():  # type: ignore[no-untyped-def]
    """The published Llama-3.1-8B AWQ config (fp16 activations) with a 13824-wide MLP: at TP=8 each rank's
    down_proj input is 1728 = 13.5 groups of 128."""
    from dataclasses import replace
    m = model("llama-3.1-8b-awq")
    assert m.dtype == "float16" and m.quantization is not None and m.quantization.method == "awq"
    return replace(m, intermediate_size=13824)


@pytest.mark.parametrize("engine,version", [("vllm", "0.33.0"), ("vllm", "0.28.0"), ("sglang", "0.5.23")])
def test_awq_groups_straddling_ranks_fail_on_both_engines_even_in_fp16(engine: str, version: str):
    # vllm 0.33.0 model_executor/layers/quantization/auto_awq.py: a layer Marlin refuses
    # (check_marlin_supports_layer) falls back to AutoAWQLinearMethod, whose create_weights raises;
    # sglang 0.5.23 srt/layers/quantization/awq/schemes/awq_linear.py raises the same words. No AWQ kernel
    # without the group rule exists, so fp16 activations are no way out.
    m = _awq_fp16_odd()
    f = check_heads(subject(dep(tp=8, engine=engine, engine_version=version), machine(8), m))
    assert f.status is Status.FAIL, f.message
    assert ("The input size is not aligned with the quantized weight shape. This can be caused by too large "
            "tensor parallel size.") in f.message
    assert ("auto_awq.py" if engine == "vllm" else "awq/schemes/awq_linear.py") in f.message
    assert "TP sizes that start: 1, 2, 4" in f.message
    ok = check_heads(subject(dep(tp=4, engine=engine, engine_version=version), machine(8), m))
    assert ok.status is Status.PASS


def test_awq_marlin_tiles_alone_fall_back_and_start_on_old_vllm():
    # before 0.25 Marlin also refused tiles (in % 128); AWQ then falls back to its own kernel, which
    # has no tile rule (vllm quantization/awq_marlin.py -> awq.py): no refusal
    from dataclasses import replace
    m = model("llama-3.1-8b-awq")
    q = m.quantization
    assert q is not None
    odd = replace(m, intermediate_size=3456, quantization=replace(q, group_size=32))
    assert not int_group_problems(odd, ShardLayout(VLLM, Version("0.22.0"), 4))[0]


def test_compressed_tensors_w4a16_quotes_what_0_33_raises():
    # vllm 0.33.0 compressed_tensors/schemes/compressed_tensors_wNa16.py create_weights: a kernel is always
    # found (humming-kernels is a dependency), then distributed/utils.py verify_group_size_divides_partition
    from dataclasses import replace
    m = model("llama-3.1-8b-instruct-w4a16")
    odd = replace(m, intermediate_size=13824)
    f = check_heads(subject(dep(tp=8, engine_version="0.33.0"), machine(8), odd))
    assert f.status is Status.FAIL
    assert ("Weight input_size_per_partition=1728 for layer 'model.layers.0.mlp.down_proj' is not divisible by "
            "group_size=128. This happens when tensor_parallel_size splits the layer input into shards that "
            "are not a whole number of quant groups. Consider reducing tensor_parallel_size.") in f.message
    assert "verify_group_size_divides_partition" in f.message
    assert "Failed to find a kernel" not in f.message


@pytest.mark.parametrize("engine,version", [("vllm", "0.33.0"), ("sglang", "0.5.23")])
def test_gptq_straddled_groups_say_what_is_and_is_not_verified(engine: str, version: str):
    # vllm 0.33.0: Marlin refuses, choose_mp_linear_kernel takes Machete (SM 9.0) or Humming, and
    # quantization/auto_gptq.py create_weights sizes the scales without a check; sglang 0.5.23
    # hardware_backend/gpu/quantization/gptq_kernels.py drops check_marlin_supports_shape's answer
    from dataclasses import replace
    m = _awq_fp16_odd()
    q = m.quantization
    assert q is not None
    gptq = replace(m, quantization=replace(q, method="gptq"))
    f = check_heads(subject(dep(tp=8, engine=engine, engine_version=version), machine(8), gptq))
    assert f.status is Status.FAIL
    assert "check for it" in f.message and "1728 // 128 = 13 groups" in f.message
    assert "Not verified: whether loading or the kernel then raises, or it serves wrong outputs" in f.message
    if engine == "vllm":
        assert "Machete" in f.message and "Humming" in f.message
    assert f.data["shard_problems"][0]["unverified"]


# -- issue 19 item 4: switches that choose a kernel -----------------------------------------------------

def test_vllm_deep_gemm_forced_by_the_environment_refuses_refined_fp8_moe_blocks():
    # vllm 0.33.0 model_executor/layers/fused_moe/oracle/fp8.py: with moe_backend "auto" the scales of
    # Qwen3-30B-A3B-FP8 at TP=4 are refined to [64, 64] (768 / 4 = 192); VLLM_USE_DEEP_GEMM=1 makes
    # select_fp8_moe_backend force DEEPGEMM, whose kernel takes 128x128 blocks only: _return_or_raise raises
    from pytest_gpulayout.deployment import Launch

    m = model("qwen3-30b-a3b-fp8")
    for env in ({"VLLM_USE_DEEP_GEMM": "1"}, {"VLLM_MOE_USE_DEEP_GEMM": "1"}):
        f = check_heads(subject(dep(tp=4, engine_version="0.33.0", launch=Launch(env=env)), machine(4), m))
        assert f.status is Status.FAIL, f.message
        assert "FP8 MoE backend DEEPGEMM does not support the deployment configuration" in f.message
        assert "oracle/fp8.py" in f.message
    off = Launch(env={"VLLM_USE_DEEP_GEMM": "1", "VLLM_MOE_USE_DEEP_GEMM": "0"})   # DeepGEMM removed
    assert check_heads(subject(dep(tp=4, engine_version="0.33.0", launch=off), machine(4), m)).status is Status.PASS
    # --moe-backend deep_gemm: pad_tp_shard_to_weight_blocks pads the share to whole 128 blocks instead
    pad = Launch(args=("--moe-backend", "deep_gemm"))
    f = check_heads(subject(dep(tp=4, engine_version="0.33.0", launch=pad), machine(4), m))
    assert f.status is Status.PASS and "pads each rank's expert share 192 to 256" in f.message


def test_kernel_and_budget_variables_not_modelled_are_named():
    # sglang 0.5.23 arg_groups/overrides.py: SGLANG_ENABLE_POST_CAPTURE_KV_SIZING sizes the pool after graph
    # capture, a budget the checks do not model: named, never ignored
    from pytest_gpulayout.engines.sglang.engine import SGLANG
    from pytest_gpulayout.engines.vllm.engine import VLLM as V

    k = SGLANG.cli.knobs([], {"SGLANG_ENABLE_POST_CAPTURE_KV_SIZING": "1"})
    assert k.env_not_modelled == ("SGLANG_ENABLE_POST_CAPTURE_KV_SIZING",)
    assert "SGLANG_ENABLE_POST_CAPTURE_KV_SIZING in the environment" in k.not_modelled_note()
    kv = V.cli.knobs(["--moe-backend", "triton"], {"VLLM_DISABLED_KERNELS": "MarlinLinearKernel"})
    assert kv.moe_backend == "triton" and "--moe-backend" not in kv.not_modelled
    assert "VLLM_DISABLED_KERNELS" in kv.not_modelled_note()


def test_the_kv_pool_finding_names_a_budget_variable_it_does_not_model():
    from pytest_gpulayout.deployment import Launch
    from pytest_gpulayout.model.load import load_model as load
    from pytest_gpulayout.rules.kv_pool import check_kv_pool

    d = dep(engine="sglang", engine_version="0.5.23",
            launch=Launch(env={"SGLANG_ENABLE_POST_CAPTURE_KV_SIZING": "1"}))
    f = check_kv_pool(subject(d, machine(1), load("Qwen/Qwen3-8B")))
    assert "Not modelled: SGLANG_ENABLE_POST_CAPTURE_KV_SIZING in the environment" in f.message
    assert "SGLANG_ENABLE_POST_CAPTURE_KV_SIZING" in f.data["not_modelled"]
