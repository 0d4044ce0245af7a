"""Per-rank widths SGLang refuses for quantized and expert-parallel layouts, by release.

Head and vocabulary divisibility (``rules/heads.py tp_problems``) is not enough: a checkpoint's
quantization adds rules on every rank's *share* of a layer, and SGLang raises at load time when a
share does not line up. Each rule here is read from the released wheels (paths inside the wheel):

Expert layout
    SGLang keeps EP inside the TP group (``moe_tp_size = tp // ep_size``, EP = TP when on) and DP
    replicas hold full copies.

Block-FP8 (``quantization_config.weight_block_size = [block_n, block_k]``)
    SGLang (0.4.3.post4 - 0.5.23 ``srt/layers/quantization/fp8.py``) has vLLM's MoE test on
    ``intermediate / moe_tp_size`` (``moe_tp = TP / EP``) and no refinement, and the dense test in
    ``create_weights`` (0.5.2) / ``fp8_utils.validate_fp8_block_shape`` (0.5.23): a row-parallel
    input share ``% block_k`` and a column-parallel output share ``% block_n``; before 0.5.23 every
    output part of a merged layer is checked, the last one too.

Integer group quantization (AWQ, GPTQ, compressed-tensors ``pack-quantized``), a group straddling ranks
    AWQ: ``awq/awq.py`` sends a layer Marlin cannot take to the plain AWQ scheme, and
    ``awq/schemes/awq_linear.py`` raises "The input size is not aligned ..." whatever the activation
    dtype (Marlin's tiles alone fall back and start). compressed-tensors:
    ``compressed_tensors/schemes/compressed_tensors_wNa16.py`` asserts it without a message. GPTQ
    (gptq_marlin): ``hardware_backend/gpu/quantization/gptq_kernels.py`` calls
    ``check_marlin_supports_shape`` and drops its answer, so nothing refuses; the scales cannot line up
    (what follows at load or run is not verified): a fail either way.
    SGLang 0.5.23 ``compressed_tensors_wNa16_moe.py`` sizes ``intermediate // group_size``
    scale groups without a check, as vLLM did before 0.25.

Expert parallel
    ``srt/layers/moe/fused_moe_triton/layer.py`` (0.4.8 - 0.5.23; 0.4.3 ``ep_moe/layer.py``):
    ``assert num_experts % ep_size == 0``, a bare assert (an ``AssertionError`` with no text).
"""

from __future__ import annotations

from packaging.version import Version

from pytest_gpulayout.engine import ShardLayout
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.shards import (
    BLOCK_FP8,
    EXPERT_SPLIT,
    INT_GROUPS,
    ShardRules,
    WidthProblem,
    dense_fp8_problems,
    dense_linears,
)

V = Version

#: ``fp8_utils.validate_fp8_block_shape`` (0.5.23) leaves a merged layer's last part unchecked
FP8_LAST_PART_SKIPPED_SINCE = V("0.5.23")
#: the fused Triton MoE layer holds the expert-count assert (before: ``ep_moe/layer.py``)
FUSED_MOE_LAYER_SINCE = V("0.4.8")

RULES = ShardRules(ep_spans="TP", dp_splits_experts=False)

AWQ_TEXT = ("The input size is not aligned with the quantized weight shape. This can be caused by too large "
            "tensor parallel size.")


def expert_layout(tp: int, dp: int, expert_parallel: bool) -> tuple[int, int]:
    """``(EP size, ranks per expert)``: EP = TP when on, else every expert over TP; DP holds copies."""
    return (tp, 1) if expert_parallel else (1, tp)


# ---------------------------------------------------------------------------------------------
# Block FP8
# ---------------------------------------------------------------------------------------------

def block_fp8_problems(model: ModelSpec, lay: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
    """Shares a block-FP8 checkpoint cannot be split into on ``lay`` (SGLang refines no scales)."""
    q = model.quantization
    if q is None or not q.weight_block_size or len(q.weight_block_size) != 2:
        return [], []
    bn, bk = q.weight_block_size
    dense_src = ("sglang srt/layers/quantization/fp8_utils.py "
                 "validate_fp8_block_shape (0.5.2: fp8.py create_weights)")
    problems = dense_fp8_problems(model, lay.tp, bn, bk, last_part_checked=lay.version < FP8_LAST_PART_SKIPPED_SINCE,
                                  source=dense_src)
    inter = model.moe_intermediate_size
    if model.is_moe and inter:
        shards = lay.moe_shards
        if inter % shards == 0:
            share = inter // shards
            bad_n = share % bn != 0
            bad_k = lay.tp > 1 and share % bk != 0
            if bad_n or bad_k:
                if bad_n:
                    err = (f"The output_size of gate's and up's weight = {share} is not divisible by "
                           f"weight quantization block_n = {bn}.")
                else:
                    err = (f"The input_size of down's weight = {share} is not divisible by weight "
                           f"quantization block_k = {bk}.")
                src = "sglang srt/layers/quantization/fp8.py Fp8MoEMethod.create_weights"
                problems.append(WidthProblem(BLOCK_FP8, "experts.gate_up_proj", share,
                                             bn if bad_n else bk, err, src))
    return problems, []


# ---------------------------------------------------------------------------------------------
# Integer group quantization
# ---------------------------------------------------------------------------------------------

def int_group_problems(model: ModelSpec, lay: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
    """Shares an int4/int8 group-quantized checkpoint cannot be split into on ``lay``."""
    q = model.quantization
    if q is None or not q.is_int_grouped or not q.group_size:
        return [], []
    g = q.group_size
    problems: list[WidthProblem] = []
    notes: list[str] = []
    for lin in dense_linears(model, lay.tp):
        out_pp, in_pp = sum(lin.output_parts), lin.input_pp
        if not (g < lin.input_size and in_pp % g):
            continue
        width = in_pp if g != 64 else out_pp   # the output share when the group is 64 wide, as before
        if q.method == "awq":
            # awq/awq.py: a layer Marlin cannot take (check_marlin_supports_layer) falls back to the
            # plain AWQ scheme, which refuses a straddled group whatever the activation dtype
            problems.append(WidthProblem(
                INT_GROUPS, lin.name, width, g, AWQ_TEXT,
                "sglang srt/layers/quantization/awq/schemes/awq_linear.py create_weights (awq/awq.py "
                "falls back to it from Marlin: check_marlin_supports_layer)"))
        elif q.method == "compressed-tensors":
            problems.append(WidthProblem(
                INT_GROUPS, lin.name, width, g,
                "AssertionError (a bare `assert input_size_per_partition % group_size == 0`, no message)",
                "sglang srt/layers/quantization/compressed_tensors/schemes/compressed_tensors_wNa16.py"))
        else:   # GPTQ
            src = "sglang srt/hardware_backend/gpu/quantization/gptq_kernels.py process_weights_after_loading"
            reason = (f"Weight input_size_per_partition = {in_pp} is not divisible by group_size = {g}. "
                      f"Consider reducing tensor_parallel_size or running with --quantization gptq.")
            problems.append(WidthProblem(
                INT_GROUPS, lin.name, width, g, reason, src,
                unverified=(f"SGLang {lay.version} has no working check for it: GPTQMarlinLinearKernel calls "
                            f"check_marlin_supports_shape ({src}), which returns (False, \"{reason}\") "
                            "instead of raising, and the result is dropped; gptq/schemes/gptq_marlin.py sizes "
                            f"the rank's scales {in_pp} // {g} = {in_pp // g} groups for {in_pp} inputs, which "
                            "cannot line up with the checkpoint's groups (with --quantization gptq, "
                            "gptq/schemes/gptq_linear.py raises \"" + AWQ_TEXT + "\"). Not verified: whether "
                            "loading or the kernel then raises, or it serves wrong outputs. Either way the "
                            "layout does not serve this checkpoint correctly.")))
        break   # the first layer built raises; the rest would say the same
    inter = model.moe_intermediate_size
    if model.is_moe and inter and inter % lay.moe_shards == 0:
        share = inter // lay.moe_shards
        if share % g:
            if q.method == "compressed-tensors":
                # SGLang 0.5.23 compressed_tensors_wNa16_moe.py sizes intermediate // group_size
                # scale groups without a check, as vLLM did before 0.25: vLLM's refusal names the fault
                text = ("CompressedTensors WNA16 MoE with static group scales requires the MoE intermediate "
                        f"size per tensor-parallel partition ({share}) to be divisible by group_size ({g}). "
                        "Scale groups would otherwise cross TP shard boundaries; use a compatible TP size or "
                        "enable expert parallelism.")
                src = ("vllm model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/"
                       "compressed_tensors_moe_wna16.py create_weights")
                problems.append(WidthProblem(INT_GROUPS, "experts.down_proj", share, g, text, src,
                                             checked_from="vLLM 0.25"))
            else:
                notes.append(f"the expert share {share} is not a whole number of {g}-wide groups: "
                             f"{q.method} MoE kernels may shrink the group or refuse (not verified)")
    return problems, notes


# ---------------------------------------------------------------------------------------------
# Expert parallel
# ---------------------------------------------------------------------------------------------

def expert_split_problems(model: ModelSpec, lay: ShardLayout) -> list[WidthProblem]:
    """SGLang asserts whole experts per EP rank (vLLM spreads a remainder: a warning elsewhere)."""
    if not lay.expert_parallel or not model.num_experts:
        return []
    ep = lay.ep_size
    if model.num_experts % ep == 0:
        return []
    src = ("sglang srt/layers/moe/ep_moe/layer.py (0.4.3: num_experts % tp_size)"
           if lay.version < FUSED_MOE_LAYER_SINCE else "sglang srt/layers/moe/fused_moe_triton/layer.py")
    return [WidthProblem(EXPERT_SPLIT, "routed experts", model.num_experts, ep,
                         "AssertionError (a bare `assert num_experts % ep_size == 0`, no message)", src)]


def shard_problems(model: ModelSpec, lay: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
    """Every share ``lay`` gets that SGLang refuses, and notes about shares it adapts."""
    p1, n1 = block_fp8_problems(model, lay)
    p2, n2 = int_group_problems(model, lay)
    return p1 + p2 + expert_split_problems(model, lay), n1 + n2
