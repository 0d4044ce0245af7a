"""Each rank's share of a tensor-parallel layer, and the shares an engine refuses: the engine-neutral
pieces of the quantized / expert-parallel width rules.

The rules themselves differ per engine and release and live in each engine's folder
(``engines/vllm/divisibility.py``, ``engines/sglang/divisibility.py``), which answer
``Engine.shard_problems``; the ``heads`` check (``rules/heads.py``) reports what they find. Both sides
need the same vocabulary (how a decoder layer's linears split over TP, what a refused share is), and
the engines may not import ``rules/``, so it lives here, below both.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.model.spec import ModelSpec

BLOCK_FP8 = "block_fp8"
INT_GROUPS = "int_groups"
EXPERT_SPLIT = "expert_split"


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
    #: where the release neither raises ``engine_error`` nor was read to cope: what was read in the
    #: engine and what was not verified, said instead of "raises" (None: it raises ``engine_error``)
    unverified: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"rule": self.rule, "layer": self.layer, "width": self.width, "divisor": self.divisor,
                "engine_error": self.engine_error, "source": self.source, "fatal": self.fatal,
                "checked_from": self.checked_from, "unverified": self.unverified}


@dataclass(frozen=True)
class ShardRules:
    """What the ``heads`` check says differently per engine about expert and quantized shares: the
    engine's words and the fixes it offers, beside the arithmetic of ``Engine.expert_layout``."""

    #: the ranks an expert-parallel group spans, in words ("TP x DP" where DP folds into EP)
    ep_spans: str
    #: whether DP ranks split each expert's width (DP sizes are then a fix for a refused expert share)
    dp_splits_experts: bool
    #: the engine's refusal of expert parallel for a model without experts (None: it starts, and
    #: expert parallel splits nothing)
    ep_without_experts_error: str | None = None
    #: the release from which block-FP8 MoE scales are refined to fit a rank's expert share, and that
    #: fix in words (None: no release refines them)
    fp8_moe_refine: tuple[Version, str] | None = None


@dataclass(frozen=True)
class Linear:
    """One rank's share of a TP-split linear layer, in the terms the engines' checks use."""

    name: str
    input_size: int
    output_size: int
    input_pp: int
    output_parts: tuple[int, ...]
    row: bool


def _div(a: int, b: int) -> int:
    return a // b if b else a


def dense_linears(model: ModelSpec, tp: int) -> list[Linear]:
    """The TP-split linears of one decoder layer (and the shared expert), as the engines build them."""
    h = model.hidden_size
    out: list[Linear] = []
    q = model.quantization
    if not (q is not None and q.skip_attention):
        heads = _div(model.num_attention_heads, tp)
        if model.is_mla:
            nope, rope = model.qk_nope_head_dim or 0, model.qk_rope_head_dim or 0
            v = model.v_head_dim or nope
            qin = model.q_lora_rank or h
            n = model.num_attention_heads
            out.append(Linear("q_b_proj" if model.q_lora_rank else "q_proj", qin, n * (nope + rope), qin,
                              (heads * (nope + rope),), False))
            lora = model.kv_lora_rank or 0
            out.append(Linear("kv_b_proj", lora, n * (nope + v), lora, (heads * (nope + v),), False))
            out.append(Linear("o_proj", n * v, h, heads * v, (h,), True))
        else:
            hd, hv = model.head_dim, model.head_dim_v
            kv = model.num_key_value_heads
            kv_rank = max(1, kv // tp)
            out.append(Linear("qkv_proj", h, model.num_attention_heads * hd + kv * (hd + hv), h,
                              (heads * hd, kv_rank * hd, kv_rank * hv), False))
            out.append(Linear("o_proj", model.num_attention_heads * hv, h, heads * hv, (h,), True))
    widths: list[tuple[str, int]] = []
    if any(not model.is_moe_layer(i) for i in range(model.num_hidden_layers)):
        widths.append(("mlp", model.intermediate_size))
    if model.is_moe and model.shared_expert_intermediate_size:
        widths.append(("shared_expert", model.shared_expert_intermediate_size))
    for what, inter in widths:
        share = _div(inter, tp)
        out.append(Linear(f"{what}.gate_up_proj", h, 2 * inter, h, (share, share), False))
        out.append(Linear(f"{what}.down_proj", inter, h, share, (h,), True))
    return out


def fp8_linear_error(lin: Linear, tp: int, bn: int, bk: int, *, last_part_checked: bool,
                     merged_mismatch_allowed: bool = False) -> str | None:
    """The block-FP8 shape check both engines run on a linear layer's shares (vLLM
    ``model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape``; SGLang's copy in
    ``srt/layers/quantization/fp8_utils.py``), in their words. What differs by engine and release comes
    in: ``last_part_checked`` (older releases also check a merged layer's last part),
    ``merged_mismatch_allowed`` (vLLM's ``allow_fp8_block_shape_mismatch`` for merged layers)."""
    parts = lin.output_parts
    if merged_mismatch_allowed and len(parts) > 1 and any(p % bn for p in parts):
        return None
    if tp > 1 and lin.input_size // lin.input_pp == tp and lin.input_pp % bk:
        return (f"Weight input_size_per_partition = {lin.input_pp} is not divisible by weight "
                f"quantization block_k = {bk}.")
    is_split = tp > 1 and lin.output_size // sum(parts) == tp
    if is_split or len(parts) > 1:
        sizes = parts if (is_split or last_part_checked) else parts[:-1]
        for size in sizes:
            if size % bn:
                return (f"Weight output_partition_size = {size} is not divisible by weight quantization "
                        f"block_n = {bn}.")
    return None


def dense_fp8_problems(model: ModelSpec, tp: int, bn: int, bk: int, *, last_part_checked: bool,
                       merged_mismatch_allowed: bool = False, source: str) -> list[WidthProblem]:
    """Each dense linear layer whose TP shares break the block-FP8 shape (``fp8_linear_error``), once
    per distinct error, with the width and block that break and the engine file it was read in."""
    problems: list[WidthProblem] = []
    seen: set[str] = set()
    for lin in dense_linears(model, tp):
        err = fp8_linear_error(lin, tp, bn, bk, last_part_checked=last_part_checked,
                               merged_mismatch_allowed=merged_mismatch_allowed)
        if err and err not in seen:
            seen.add(err)
            width = lin.input_pp if "input_size" in err else next(p for p in lin.output_parts if p % bn)
            problems.append(WidthProblem(BLOCK_FP8, lin.name, width, bk if "block_k" in err else bn, err, source))
    return problems
