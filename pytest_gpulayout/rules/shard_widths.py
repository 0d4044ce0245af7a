"""Per-rank widths the engines refuse for quantized and expert-parallel layouts, by release.

Head and vocabulary divisibility (``heads.tp_problems``) is not enough: a checkpoint's quantization
adds rules on every rank's *share* of a layer, and the engines raise at load time when a share does
not line up. Each rule here is read from the released wheels (paths inside the wheel):

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
    compressed-tensors). SGLang (0.4.3.post4 - 0.5.23 ``srt/layers/quantization/fp8.py``) has the
    same MoE test on ``intermediate / moe_tp_size`` (``moe_tp = TP / EP``) and no refinement, and
    the dense test in ``create_weights`` (0.5.2) / ``fp8_utils.validate_fp8_block_shape`` (0.5.23).

Integer group quantization (AWQ, GPTQ, compressed-tensors ``pack-quantized``: vLLM's WNA16 kernels)
    vllm ``model_executor/kernels/linear/__init__.py choose_mp_linear_kernel`` raises "Failed to
    find a kernel that can implement the WNA16 linear layer" when no kernel takes the shard. Marlin
    (``kernels/linear/mixed_precision/marlin.py``): from 0.25 only a group straddling ranks fails
    (``in_features per partition N is not divisible by group_size = G``); before (0.22 and older,
    ``quantization/utils/marlin_utils.py verify_marlin_supports_shape``) also the tile rules
    ``out % 64`` and ``in % 128``. compressed-tensors MoE (0.25+
    ``compressed_tensors_moe/compressed_tensors_moe_wna16*.py``): the expert share must hold whole
    groups.

SGLang expert parallel
    ``srt/layers/moe/fused_moe_triton/layer.py`` (0.4.8 - 0.5.23; 0.4.3 ``ep_moe/layer.py``):
    ``assert num_experts % ep_size == 0``, a bare assert (an ``AssertionError`` with no text).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.model.spec import ModelSpec

BLOCK_FP8 = "block_fp8"
INT_GROUPS = "int_groups"
EXPERT_SPLIT = "expert_split"

V = Version


@dataclass(frozen=True)
class ShardLayout:
    """What decides each rank's share: engine and release, TP, DP, expert parallel on/off."""

    engine: str
    version: Version
    tp: int
    dp: int = 1
    expert_parallel: bool = False

    @property
    def moe_shards(self) -> int:
        """Ranks each routed expert's width is split over.

        vLLM flattens DP into the MoE layers: TP x DP without expert parallel, 1 with it
        (``FusedMoEParallelConfig.make``). SGLang: ``moe_tp_size = tp // ep_size``, EP = TP when on.
        """
        if self.engine == "vllm":
            flat = self.tp * self.dp
            return 1 if (self.expert_parallel and flat > 1) else flat
        return 1 if self.expert_parallel else self.tp

    @property
    def ep_size(self) -> int:
        if not self.expert_parallel:
            return 1
        return self.tp * self.dp if self.engine == "vllm" else self.tp


@dataclass(frozen=True)
class WidthProblem:
    """One share the engine refuses. ``engine_error`` is the engine's own text for it."""

    rule: str
    layer: str
    width: int
    divisor: int
    engine_error: str
    source: str
    fatal: bool = True     # False: the engine may cope (a path we have not verified): warn
    #: the release that first raises ``engine_error``; set where the deployment's release has no
    #: check and loads the share with scales that do not match its inputs (wrong results)
    checked_from: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"rule": self.rule, "layer": self.layer, "width": self.width, "divisor": self.divisor,
                "engine_error": self.engine_error, "source": self.source, "fatal": self.fatal,
                "checked_from": self.checked_from}


@dataclass(frozen=True)
class _Linear:
    """One rank's share of a TP-split linear layer, in the terms the engines' checks use."""

    name: str
    input_size: int
    output_size: int
    input_pp: int
    output_parts: tuple[int, ...]
    row: bool


def _div(a: int, b: int) -> int:
    return a // b if b else a


def _dense_linears(model: ModelSpec, tp: int) -> list[_Linear]:
    """The TP-split linears of one decoder layer (and the shared expert), as the engines build them."""
    h = model.hidden_size
    out: list[_Linear] = []
    q = model.quantization
    if not (q is not None and q.skip_attention):
        heads = _div(model.num_attention_heads, tp)
        if model.is_mla:
            nope, rope = model.qk_nope_head_dim or 0, model.qk_rope_head_dim or 0
            v = model.v_head_dim or nope
            qin = model.q_lora_rank or h
            n = model.num_attention_heads
            out.append(_Linear("q_b_proj" if model.q_lora_rank else "q_proj", qin, n * (nope + rope), qin,
                               (heads * (nope + rope),), False))
            lora = model.kv_lora_rank or 0
            out.append(_Linear("kv_b_proj", lora, n * (nope + v), lora, (heads * (nope + v),), False))
            out.append(_Linear("o_proj", n * v, h, heads * v, (h,), True))
        else:
            hd, hv = model.head_dim, model.head_dim_v
            kv = model.num_key_value_heads
            kv_rank = max(1, kv // tp)
            out.append(_Linear("qkv_proj", h, model.num_attention_heads * hd + kv * (hd + hv), h,
                               (heads * hd, kv_rank * hd, kv_rank * hv), False))
            out.append(_Linear("o_proj", model.num_attention_heads * hv, h, heads * hv, (h,), True))
    widths: list[tuple[str, int]] = []
    if any(not model.is_moe_layer(i) for i in range(model.num_hidden_layers)):
        widths.append(("mlp", model.intermediate_size))
    if model.is_moe and model.shared_expert_intermediate_size:
        widths.append(("shared_expert", model.shared_expert_intermediate_size))
    for what, inter in widths:
        share = _div(inter, tp)
        out.append(_Linear(f"{what}.gate_up_proj", h, 2 * inter, h, (share, share), False))
        out.append(_Linear(f"{what}.down_proj", inter, h, share, (h,), True))
    return out


# ---------------------------------------------------------------------------------------------
# Block FP8
# ---------------------------------------------------------------------------------------------

def _fp8_linear_error(lin: _Linear, lay: ShardLayout, bn: int, bk: int) -> str | None:
    tp = lay.tp
    parts = lin.output_parts
    if lay.engine == "vllm" and lay.version >= V("0.19") and len(parts) > 1 and any(p % bn for p in parts):
        return None   # allow_fp8_block_shape_mismatch: merged layers are not checked
    if tp > 1 and lin.input_size // lin.input_pp == tp and lin.input_pp % bk:
        return (f"Weight input_size_per_partition = {lin.input_pp} is not divisible by weight "
                f"quantization block_k = {bk}.")
    is_split = tp > 1 and lin.output_size // sum(parts) == tp
    if is_split or len(parts) > 1:
        old = (lay.engine == "vllm" and lay.version < V("0.11")) or (
            lay.engine == "sglang" and lay.version < V("0.5.23"))
        sizes = parts if (is_split or old) else parts[:-1]
        for s in sizes:
            if s % bn:
                return (f"Weight output_partition_size = {s} is not divisible by weight quantization "
                        f"block_n = {bn}.")
    return None


def block_fp8_problems(model: ModelSpec, lay: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
    """Shares a block-FP8 checkpoint cannot be split into on ``lay``, and notes (refined scales)."""
    q = model.quantization
    if q is None or not q.weight_block_size or len(q.weight_block_size) != 2:
        return [], []
    bn, bk = q.weight_block_size
    problems: list[WidthProblem] = []
    notes: list[str] = []
    dense_src = ("vllm model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape"
                 if lay.engine == "vllm" else "sglang srt/layers/quantization/fp8_utils.py "
                 "validate_fp8_block_shape (0.5.2: fp8.py create_weights)")
    seen: set[str] = set()
    for lin in _dense_linears(model, lay.tp):
        err = _fp8_linear_error(lin, lay, bn, bk)
        if err and err not in seen:
            seen.add(err)
            width = lin.input_pp if "input_size" in err else next(p for p in lin.output_parts if p % bn)
            problems.append(WidthProblem(BLOCK_FP8, lin.name, width, bk if "block_k" in err else bn, err,
                                         dense_src))
    inter = model.moe_intermediate_size
    if model.is_moe and inter:
        shards = lay.moe_shards
        if inter % shards == 0:
            share = inter // shards
            bad_n = share % bn != 0
            bad_k = lay.tp > 1 and share % bk != 0
            if bad_n or bad_k:
                refine = math.gcd(bn, bk, share, model.hidden_size)
                if (lay.engine == "vllm" and lay.version >= V("0.29") and q.method == "fp8"
                        and refine >= 32):
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
                    src = ("vllm model_executor/layers/quantization/fp8.py Fp8MoEMethod.create_weights"
                           if lay.engine == "vllm" else "sglang srt/layers/quantization/fp8.py "
                           "Fp8MoEMethod.create_weights")
                    problems.append(WidthProblem(BLOCK_FP8, "experts.gate_up_proj", share,
                                                 bn if bad_n else bk, err, src))
    return problems, notes


# ---------------------------------------------------------------------------------------------
# Integer group quantization (WNA16)
# ---------------------------------------------------------------------------------------------

def int_group_problems(model: ModelSpec, lay: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
    """Shares an int4/int8 group-quantized checkpoint cannot be split into on ``lay``."""
    q = model.quantization
    if q is None or not q.is_int_grouped or not q.group_size:
        return [], []
    g = q.group_size
    problems: list[WidthProblem] = []
    notes: list[str] = []
    old_marlin = lay.engine == "vllm" and lay.version < V("0.25")
    fp16 = model.dtype.lower() in ("float16", "fp16", "half")
    kernel_src = ("vllm model_executor/kernels/linear/mixed_precision/marlin.py can_implement"
                  if not old_marlin else "vllm model_executor/layers/quantization/utils/marlin_utils.py "
                  "verify_marlin_supports_shape")
    if lay.engine == "sglang":
        kernel_src = "sglang srt/layers/quantization/marlin_utils.py verify_marlin_supports_shape"
    for lin in _dense_linears(model, lay.tp):
        out_pp, in_pp = sum(lin.output_parts), lin.input_pp
        reason = None
        if g < lin.input_size and in_pp % g:
            if lay.engine == "vllm" and not old_marlin:
                reason = f"in_features per partition {in_pp} is not divisible by group_size = {g}."
            else:
                reason = (f"Weight input_size_per_partition = {in_pp} is not divisible by group_size = {g}. "
                          f"Consider reducing tensor_parallel_size or running with --quantization gptq.")
            divisor = g
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
        text = ("Failed to find a kernel that can implement the WNA16 linear layer. Reasons: ... "
                f"MarlinLinearKernel: {reason}") if lay.engine == "vllm" else reason
        src = kernel_src
        if lay.engine == "sglang" and q.method == "compressed-tensors":
            text = "AssertionError (a bare `assert input_size_per_partition % group_size == 0`, no message)"
            src = "sglang srt/layers/quantization/compressed_tensors/schemes/compressed_tensors_wNa16.py"
        # fp16 activations may fall back to the Exllama kernel, which does not test groups (< 0.33;
        # 0.33 compressed-tensors also calls verify_group_size_divides_partition): not verified
        maybe = fp16 and not (q.method == "compressed-tensors" and lay.version >= V("0.25"))
        problems.append(WidthProblem(INT_GROUPS, lin.name, in_pp if divisor != 64 else out_pp, divisor, text,
                                     src, fatal=not maybe))
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
                # SGLang 0.5.23 compressed_tensors_wNa16_moe.py sizes intermediate // group_size
                # scale groups without a check, as vLLM did before 0.25
                unchecked = lay.engine != "vllm" or lay.version < V("0.25")
                problems.append(WidthProblem(INT_GROUPS, "experts.down_proj", share, g, text, src,
                                             checked_from="vLLM 0.25" if unchecked else None))
            else:
                notes.append(f"the expert share {share} is not a whole number of {g}-wide groups: "
                             f"{q.method} MoE kernels may shrink the group or refuse (not verified)")
    return problems, notes


# ---------------------------------------------------------------------------------------------
# Expert parallel and the other widths ``divide()`` splits
# ---------------------------------------------------------------------------------------------

def expert_split_problems(model: ModelSpec, lay: ShardLayout) -> list[WidthProblem]:
    """SGLang asserts whole experts per EP rank; vLLM spreads a remainder (a warning elsewhere)."""
    if lay.engine != "sglang" or not lay.expert_parallel or not model.num_experts:
        return []
    ep = lay.ep_size
    if model.num_experts % ep == 0:
        return []
    src = ("sglang srt/layers/moe/ep_moe/layer.py (0.4.3: num_experts % tp_size)"
           if lay.version < V("0.4.8") else "sglang srt/layers/moe/fused_moe_triton/layer.py")
    return [WidthProblem(EXPERT_SPLIT, "routed experts", model.num_experts, ep,
                         "AssertionError (a bare `assert num_experts % ep_size == 0`, no message)", src)]


def extra_tp_widths(model: ModelSpec) -> list[tuple[str, int]]:
    """Widths besides heads / MLP / vocab that the parallel layers ``divide()`` by TP
    (vllm ``distributed/utils.py divide``): the shared expert, the linear-attention state."""
    out: list[tuple[str, int]] = []
    if model.is_moe and model.shared_expert_intermediate_size:
        out.append(("shared expert MLP width", model.shared_expert_intermediate_size))
    if model.linear_state is not None and model.state_layers:
        out.extend((w, v) for w, v in model.linear_state.tp_widths() if v)
    return out


def shard_problems(model: ModelSpec, lay: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
    """Every share ``lay`` gets that the engine refuses, and notes about shares it adapts."""
    p1, n1 = block_fp8_problems(model, lay)
    p2, n2 = int_group_problems(model, lay)
    return p1 + p2 + expert_split_problems(model, lay), n1 + n2
