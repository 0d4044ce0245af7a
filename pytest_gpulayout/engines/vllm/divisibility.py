"""Per-rank widths vLLM refuses for quantized and expert-parallel layouts, by release.

Head and vocabulary divisibility (``rules/heads.py tp_problems``) is not enough: a checkpoint's
quantization adds rules on every rank's *share* of a layer, and vLLM raises at load time when a share
does not line up. Each rule here is read from the released wheels (paths inside the wheel):

Expert layout
    vLLM flattens DP into the MoE layers: every expert is sharded over TP x DP ranks without expert
    parallel, and the experts spread over EP = TP x DP ranks with it (``fused_moe/config.py
    FusedMoEParallelConfig.make``).

Block-FP8 (``quantization_config.weight_block_size = [block_n, block_k]``)
    Dense linears, vllm 0.33.0 ``model_executor/layers/quantization/utils/fp8_utils.py``
    ``validate_fp8_block_shape`` (0.9.0: ``quantization/fp8.py create_weights``): a row-parallel
    input share ``% block_k`` and a column-parallel output share ``% block_n``. From 0.19
    (``layers/linear.py _maybe_allow_fp8_block_shape_mismatch``; absent in 0.11, 0.12-0.18 not
    read) a merged layer (QKV, gate_up) whose shares do not divide skips the check.
    MoE, vllm ``quantization/fp8.py Fp8MoEMethod.create_weights`` (0.33: ``fp8_utils.
    validate_fp8_block_shape_moe``): ``intermediate_size_per_partition % block_n`` and, with TP > 1,
    ``% block_k``; the share is ``moe_intermediate_size / (TP x DP)`` without expert parallel and the
    whole width with it (``fused_moe/config.py FusedMoEParallelConfig``). From 0.29
    (``fused_moe/oracle/fp8.py refine_fp8_moe_block_shape``) the scales are refined to
    ``gcd(block_n, block_k, share, hidden)`` when that is >= 32 (``Fp8MoEMethod`` only, not
    compressed-tensors).

Integer group quantization (AWQ, GPTQ, compressed-tensors ``pack-quantized``: vLLM's WNA16 kernels)
    vllm ``model_executor/kernels/linear/__init__.py choose_mp_linear_kernel`` raises "Failed to
    find a kernel that can implement the WNA16 linear layer" when no kernel takes the shard. Marlin
    (``kernels/linear/mixed_precision/marlin.py``): from 0.25 only a group straddling ranks fails
    (``in_features per partition N is not divisible by group_size = G``); before (0.22 and older,
    ``quantization/utils/marlin_utils.py verify_marlin_supports_shape``) also the tile rules
    ``out % 64`` and ``in % 128``. compressed-tensors MoE (0.25+
    ``compressed_tensors_moe/compressed_tensors_moe_wna16*.py``): the expert share must hold whole
    groups.

Expert parallel
    vLLM spreads a remainder of experts over the first ranks (``determine_expert_map``): no refusal
    (``rules/heads.py`` warns of the uneven split). Expert parallel on a model without experts is
    refused (``ERROR_EP_WITHOUT_EXPERTS``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engine import ShardLayout
from pytest_gpulayout.engines.vllm.defaults import DEEP_GEMM_ENV
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.shards import (
    BLOCK_FP8,
    INT_GROUPS,
    Linear,
    ShardRules,
    WidthProblem,
    dense_fp8_problems,
    dense_linears,
)

V = Version

#: ``layers/linear.py _maybe_allow_fp8_block_shape_mismatch``: merged layers are not checked
MERGED_FP8_SKIP_SINCE = V("0.19")
#: before 0.11 every output part of a merged layer is checked, the last one too
FP8_LAST_PART_SKIPPED_SINCE = V("0.11")
#: ``fused_moe/oracle/fp8.py refine_fp8_moe_block_shape``
FP8_MOE_REFINE_SINCE = V("0.29")
#: Marlin's tile rules go and only straddled groups fail (``kernels/linear/mixed_precision/marlin.py``)
MARLIN_GROUPS_ONLY_SINCE = V("0.25")
ERROR_EP_WITHOUT_EXPERTS = ("Number of experts in the model must be greater than 0 when expert parallelism "
                            "is enabled")

RULES = ShardRules(
    ep_spans="TP x DP",
    dp_splits_experts=True,
    ep_without_experts_error=ERROR_EP_WITHOUT_EXPERTS,
    fp8_moe_refine=(FP8_MOE_REFINE_SINCE, "vLLM >= 0.29, which refines the MoE block scales to fit "
                                          "(refine_fp8_moe_block_shape)"),
)


def expert_layout(tp: int, dp: int, expert_parallel: bool) -> tuple[int, int]:
    """``(EP size, ranks per expert)``: TP x DP either way (``FusedMoEParallelConfig.make``)."""
    flat = tp * dp
    return (flat, 1) if expert_parallel else (1, flat)


# ---------------------------------------------------------------------------------------------
# Block FP8
# ---------------------------------------------------------------------------------------------

def block_fp8_problems(model: ModelSpec, lay: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
    """Shares a block-FP8 checkpoint cannot be split into on ``lay``, and notes (refined scales)."""
    q = model.quantization
    if q is None or not q.weight_block_size or len(q.weight_block_size) != 2:
        return [], []
    bn, bk = q.weight_block_size
    notes: list[str] = []
    dense_src = "vllm model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape"
    problems = dense_fp8_problems(model, lay.tp, bn, bk, last_part_checked=lay.version < FP8_LAST_PART_SKIPPED_SINCE,
                                  merged_mismatch_allowed=lay.version >= MERGED_FP8_SKIP_SINCE, source=dense_src)
    inter = model.moe_intermediate_size
    if model.is_moe and inter:
        shards = lay.moe_shards
        if inter % shards == 0:
            share = inter // shards
            bad_n = share % bn != 0
            bad_k = lay.tp > 1 and share % bk != 0
            if bad_n or bad_k:
                refine = math.gcd(bn, bk, share, model.hidden_size)
                forced = _forced_moe_kernel(lay)
                if lay.version >= FP8_MOE_REFINE_SINCE and q.method == "fp8" and refine >= 32 and forced:
                    p, n = _forced_kernel_share(model, lay, forced, share, bn, bk, refine)
                    problems.extend(p)
                    notes.extend(n)
                elif lay.version >= FP8_MOE_REFINE_SINCE and q.method == "fp8" and refine >= 32:
                    notes.append(f"vLLM {lay.version} refines the MoE block scales from [{bn}, {bk}] to "
                                 f"[{refine}, {refine}] to fit the per-rank expert width {share} "
                                 f"(fused_moe/oracle/fp8.py refine_fp8_moe_block_shape; Triton MoE kernels)")
                else:
                    if bad_n:
                        err = (f"The output_size of gate's and up's weight = {share} is not divisible by "
                               f"weight quantization block_n = {bn}.")
                    else:
                        err = (f"The input_size of down's weight = {share} is not divisible by weight "
                               f"quantization block_k = {bk}.")
                    src = "vllm model_executor/layers/quantization/fp8.py Fp8MoEMethod.create_weights"
                    problems.append(WidthProblem(BLOCK_FP8, "experts.gate_up_proj", share,
                                                 bn if bad_n else bk, err, src))
    return problems, notes


ORACLE = "vllm model_executor/layers/fused_moe/oracle/fp8.py"


def _env_on(env: Mapping[str, str], var: str) -> bool | None:
    """An ``envs.py`` int switch: None when unset (``envs.is_set``), else ``bool(int(value))``."""
    if var not in env:
        return None
    try:
        return bool(int(env[var]))
    except ValueError:
        return None


def _forced_moe_kernel(lay: ShardLayout) -> str | None:
    """The FP8 MoE kernel the launch forces (``select_fp8_moe_backend``): ``--moe-backend`` wins, then
    VLLM_USE_DEEP_GEMM / VLLM_MOE_USE_DEEP_GEMM set (either) with both on (default "1") forces DeepGEMM."""
    k = lay.knobs
    if k is None:
        return None
    if k.moe_backend and k.moe_backend != "auto":
        return k.moe_backend
    use, moe = (_env_on(k.env, v) for v in DEEP_GEMM_ENV)
    if (use is not None or moe is not None) and use is not False and moe is not False:
        return "env:deep_gemm"
    return None


def _forced_kernel_share(model: ModelSpec, lay: ShardLayout, forced: str, share: int, bn: int, bk: int,
                         refine: int) -> tuple[list[WidthProblem], list[str]]:
    """vLLM >= 0.29 with a forced FP8 MoE kernel and an expert share the checkpoint blocks do not divide.

    ``oracle/fp8.py resolve_fp8_moe_weight_block_shape``: with ``moe_backend`` "auto" (DeepGEMM forced by
    the variables) the scales are refined to ``[refine, refine]`` and only Triton takes that shape:
    DeepGEMM's ``_supports_quant_scheme`` takes 128x128 blocks only, and ``_return_or_raise`` raises.
    With ``--moe-backend`` X that cannot take the refined shape, ``pad_tp_shard_to_weight_blocks``
    pads each rank's share to whole blocks (square blocks, global widths block-aligned, pure TP, EP 1)
    or raises "Block-aligned FP8 TP sharding requires ...". Triton takes the refined shape."""
    if forced == "triton":
        return [], [f"vLLM {lay.version} refines the MoE block scales from [{bn}, {bk}] to [{refine}, {refine}] "
                    f"for --moe-backend triton ({ORACLE} refine_fp8_moe_block_shape)"]
    if forced == "env:deep_gemm":
        text = (f"FP8 MoE backend DEEPGEMM does not support the deployment configuration since kernel does "
                f"not support quantization scheme ... (the weight blocks refined to [{refine}, {refine}] to fit "
                f"the per-rank expert width {share}; DeepGEMM takes 128x128 blocks only)")
        return [WidthProblem(BLOCK_FP8, "experts.gate_up_proj", share, bn, text,
                             f"{ORACLE} select_fp8_moe_backend (VLLM_USE_DEEP_GEMM / VLLM_MOE_USE_DEEP_GEMM "
                             f"force DeepGEMM; resolve_fp8_moe_weight_block_shape refined the scales)")], []
    inter = model.moe_intermediate_size or 0
    if bn == bk and lay.ep_size == 1 and inter % bn == 0 and model.hidden_size % bn == 0:
        return [], [f"--moe-backend {forced} cannot take the refined [{refine}, {refine}] blocks: vLLM "
                    f"{lay.version} pads each rank's expert share {share} to {-(-share // bn) * bn} "
                    f"(whole checkpoint blocks; {ORACLE} pad_tp_shard_to_weight_blocks)"]
    text = (f"Block-aligned FP8 TP sharding requires {bn}-aligned global expert dimensions, pure TP, and no "
            "LoRA or expert bias.")
    return [WidthProblem(BLOCK_FP8, "experts.gate_up_proj", share, bn, text,
                         f"{ORACLE} pad_tp_shard_to_weight_blocks (--moe-backend {forced})")], []


# ---------------------------------------------------------------------------------------------
# Integer group quantization (WNA16)
# ---------------------------------------------------------------------------------------------

#: ``distributed/utils.py verify_group_size_divides_partition`` (compressed-tensors ``wNa16``), humming-kernels
#: a hard dependency (a WNA16 kernel without a group rule is always found), the release read
WNA16_PARTITION_CHECK_SINCE = V("0.33")

AWQ_TEXT = ("The input size is not aligned with the quantized weight shape. This can be caused by too large "
            "tensor parallel size.")


def _vllm_layer_name(model: ModelSpec, lin: Linear) -> str:
    """The prefix vLLM names the first such layer by (``model.layers.<i>.<module>``)."""
    first = next((i for i in range(model.num_hidden_layers) if not model.is_moe_layer(i)), 0) \
        if lin.name.startswith("mlp.") else (model.first_k_dense_layers if lin.name.startswith("shared") else 0)
    module = {"o_proj": "self_attn.o_proj", "mlp.down_proj": "mlp.down_proj",
              "shared_expert.down_proj": "mlp.shared_expert.down_proj"}.get(lin.name, lin.name)
    return f"model.layers.{first}.{module}"


def int_group_problems(model: ModelSpec, lay: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
    """Shares an int4/int8 group-quantized checkpoint cannot be split into on ``lay``.

    vLLM 0.33.0 (read in the wheel), a quantization group straddling two ranks:

    - AWQ: ``quantization/auto_awq.py get_quant_method`` sends a layer Marlin cannot take
      (``check_marlin_supports_layer(..., allow_tile_padding=True)``: only a straddled group) to
      ``AutoAWQLinearMethod``, whose ``BaseAWQLinearMethod.create_weights`` raises "The input size is
      not aligned ...". No AWQ kernel without the group rule exists, whatever the activation dtype
      (tile misalignment alone falls back and starts).
    - compressed-tensors W4A16: a kernel is always found (humming-kernels is a hard dependency,
      ``HummingLinearKernel.can_implement`` has no group rule), then ``compressed_tensors_wNa16.py
      create_weights`` calls ``distributed/utils.py verify_group_size_divides_partition``.
    - GPTQ: ``choose_mp_linear_kernel`` skips Marlin (its ``can_implement`` refuses the group) and takes
      Machete on SM 9.0 (``machete.py can_implement``: no group rule), Humming elsewhere;
      ``AutoGPTQLinearMethod.create_weights`` sizes the rank's scales ``input_size_per_partition //
      group_size`` without a check. Read: no refusal at create_weights, and scales that cannot line up
      with the rank's inputs. Not verified: whether the load or the kernel raises later or it serves
      wrong outputs. A fail either way.

    Before 0.33 (0.25 - 0.29 read for Marlin; the kernel list without Humming) the Marlin refusal is
    what ``choose_mp_linear_kernel`` raises; with fp16 activations the Exllama kernel (no group rule)
    may be picked for GPTQ / compressed-tensors before 0.25: not verified.
    """
    q = model.quantization
    if q is None or not q.is_int_grouped or not q.group_size:
        return [], []
    g = q.group_size
    problems: list[WidthProblem] = []
    notes: list[str] = []
    old_marlin = lay.version < MARLIN_GROUPS_ONLY_SINCE
    new_kernels = lay.version >= WNA16_PARTITION_CHECK_SINCE
    awq = q.method == "awq"
    fp16 = model.dtype.lower() in ("float16", "fp16", "half")
    kernel_src = ("vllm model_executor/kernels/linear/mixed_precision/marlin.py can_implement"
                  if not old_marlin else "vllm model_executor/layers/quantization/utils/marlin_utils.py "
                  "verify_marlin_supports_shape")
    for lin in dense_linears(model, lay.tp):
        out_pp, in_pp = sum(lin.output_parts), lin.input_pp
        reason = None
        straddle = g < lin.input_size and in_pp % g != 0
        if straddle:
            if not old_marlin:
                reason = f"in_features per partition {in_pp} is not divisible by group_size = {g}."
            else:
                reason = (f"Weight input_size_per_partition = {in_pp} is not divisible by group_size = {g}. "
                          f"Consider reducing tensor_parallel_size or running with --quantization gptq.")
            divisor = g
        elif awq:
            continue   # Marlin's tiles: AWQ falls back to its Triton kernel, which has no tile rule
        elif old_marlin and out_pp % 64:
            reason = (f"Weight output_size_per_partition = {out_pp} is not divisible by  min_thread_n = 64. "
                      f"Consider reducing tensor_parallel_size or running with --quantization gptq.")
            divisor = 64
        elif old_marlin and in_pp % 128:
            reason = (f"Weight input_size_per_partition = {in_pp} is not divisible by min_thread_k = 128. "
                      f"Consider reducing tensor_parallel_size or running with --quantization gptq.")
            divisor = 128
        if reason is None:
            continue
        width = in_pp if divisor != 64 else out_pp
        if awq:
            problems.append(WidthProblem(
                INT_GROUPS, lin.name, width, g, AWQ_TEXT,
                "vllm model_executor/layers/quantization/auto_awq.py BaseAWQLinearMethod.create_weights "
                "(the layer Marlin refuses falls back to AutoAWQLinearMethod; before 0.33: awq.py)"))
            break
        if new_kernels and q.method == "compressed-tensors":
            text = (f"Weight input_size_per_partition={in_pp} for layer '{_vllm_layer_name(model, lin)}' is not "
                    f"divisible by group_size={g}. This happens when tensor_parallel_size splits the layer input "
                    "into shards that are not a whole number of quant groups. Consider reducing "
                    "tensor_parallel_size.")
            problems.append(WidthProblem(
                INT_GROUPS, lin.name, width, g, text,
                "vllm distributed/utils.py verify_group_size_divides_partition (called by quantization/"
                "compressed_tensors/schemes/compressed_tensors_wNa16.py create_weights)"))
            break
        text = ("Failed to find a kernel that can implement the WNA16 linear layer. Reasons: ... "
                f"MarlinLinearKernel: {reason}")
        if new_kernels:   # GPTQ
            problems.append(WidthProblem(
                INT_GROUPS, lin.name, width, g, f"MarlinLinearKernel: {reason}", kernel_src,
                unverified=(f"vLLM {lay.version} has no check for it: Marlin refuses the share "
                            f"(\"{reason}\", {kernel_src}) but choose_mp_linear_kernel then takes Machete on "
                            "SM 9.0 (kernels/linear/mixed_precision/machete.py can_implement) or Humming "
                            "elsewhere (humming.py), neither with a group rule, and quantization/auto_gptq.py "
                            f"AutoGPTQLinearMethod.create_weights sizes the rank's scales {in_pp} // {g} = "
                            f"{in_pp // g} groups for {in_pp} inputs, which cannot line up with the "
                            "checkpoint's groups. Not verified: whether loading or the kernel then raises, "
                            "or it serves wrong outputs. Either way the layout does not serve this checkpoint "
                            "correctly.")))
            break
        # fp16 activations may fall back to the Exllama kernel, which does not test groups (< 0.33):
        # not verified
        maybe = fp16 and not (q.method == "compressed-tensors" and lay.version >= MARLIN_GROUPS_ONLY_SINCE)
        problems.append(WidthProblem(INT_GROUPS, lin.name, width, divisor, text, kernel_src, fatal=not maybe))
        break   # the first layer built raises; the rest would say the same
    inter = model.moe_intermediate_size
    if model.is_moe and inter and inter % lay.moe_shards == 0:
        share = inter // lay.moe_shards
        if share % g:
            if q.method == "compressed-tensors":
                text = ("CompressedTensors WNA16 MoE with static group scales requires the MoE intermediate "
                        f"size per tensor-parallel partition ({share}) to be divisible by group_size ({g}). "
                        "Scale groups would otherwise cross TP shard boundaries; use a compatible TP size or "
                        "enable expert parallelism.")
                src = ("vllm model_executor/layers/quantization/compressed_tensors/compressed_tensors_moe/"
                       "compressed_tensors_moe_wna16.py create_weights")
                # before 0.25 vLLM sized the scale groups without this check
                unchecked = lay.version < MARLIN_GROUPS_ONLY_SINCE
                problems.append(WidthProblem(INT_GROUPS, "experts.down_proj", share, g, text, src,
                                             checked_from="vLLM 0.25" if unchecked else None))
            else:
                notes.append(f"the expert share {share} is not a whole number of {g}-wide groups: "
                             f"{q.method} MoE kernels may shrink the group or refuse (not verified)")
    return problems, notes


def shard_problems(model: ModelSpec, lay: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
    """Every share ``lay`` gets that vLLM refuses, and notes about shares it adapts."""
    p1, n1 = block_fp8_problems(model, lay)
    p2, n2 = int_group_problems(model, lay)
    return p1 + p2, n1 + n2
