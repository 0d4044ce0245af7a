"""``heads``: do attention heads, KV heads, layers (PP), experts and quantized sizes divide as the engine needs?

The rules are the engines' own (vLLM ``ModelConfig.verify_with_parallel_config`` and
``QKVParallelLinear``; SGLang's model asserts and ``QKVParallelLinear``), which agree:

- attention heads % TP == 0;
- KV heads: if KV heads >= TP, KV heads % TP == 0; else TP % KV heads == 0 (each rank keeps one
  replicated KV head);
- every column/row-parallel width (MLP intermediate, MoE expert intermediate) % TP == 0;
- the vocabulary, padded to a multiple of 64, % TP == 0;
- int4 group-quantized (AWQ/GPTQ) row-parallel inputs must split into whole groups per rank.

PP has no divisibility rule: the engines split layers unevenly, and the finding says how.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.findings import ABSENT, Absent, Facts, Finding, failed, passed, register_facts, warned
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.spec import ModelSpec

CHECK = "heads"
VOCAB_PADDING = 64


@register_facts("heads")
@dataclass(frozen=True)
class HeadsFacts(Facts):
    """The head arithmetic of the layout; the PP split with PP > 1, the experts for MoE models."""

    num_attention_heads: int
    num_key_value_heads: int
    kv_heads_per_rank: int
    attention_heads_per_rank: int | None          # None: TP does not divide the attention heads
    kv_head_replicas: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    pp_layer_split: tuple[int, ...] | Absent = ABSENT
    num_experts: int | Absent = ABSENT
    expert_parallel_size: int | Absent = ABSENT


def valid_tp_sizes(model: ModelSpec, limit: int = 64) -> list[int]:
    """TP sizes (up to ``limit``) for which every divisibility rule holds."""
    return [t for t in range(1, limit + 1) if not tp_problems(model, t)]


def tp_problems(model: ModelSpec, tp: int) -> list[str]:
    """Every rule ``tp`` breaks, each as the sentence the user needs (empty when it divides)."""
    problems: list[str] = []
    h, kv = model.num_attention_heads, model.num_key_value_heads
    if h % tp:
        problems.append(
            f"{h} attention heads do not divide by TP={tp} (vLLM: \"Total number of attention heads ({h}) "
            f"must be divisible by tensor parallel size ({tp})\"; SGLang asserts the same)"
        )
    if not model.is_mla:
        if kv >= tp and kv % tp:
            problems.append(f"{kv} KV heads do not divide by TP={tp} (\"{kv} is not divisible by {tp}\")")
        elif kv < tp and tp % kv:
            problems.append(
                f"TP={tp} is not a multiple of the {kv} KV heads, so they cannot be replicated evenly "
                f"(\"{tp} is not divisible by {kv}\")"
            )
    if model.intermediate_size and not model.is_moe and model.intermediate_size % tp:
        problems.append(f"MLP width {model.intermediate_size} does not divide by TP={tp}")
    if model.is_moe and model.moe_intermediate_size and model.moe_intermediate_size % tp:
        problems.append(f"expert MLP width {model.moe_intermediate_size} does not divide by TP={tp}")
    padded_vocab = -(-model.vocab_size // VOCAB_PADDING) * VOCAB_PADDING
    if padded_vocab % tp:
        problems.append(f"vocabulary {model.vocab_size} (padded to {padded_vocab}) does not divide by TP={tp}")
    q = model.quantization
    # int4 group quantization (AWQ/GPTQ and their Marlin kernels) needs whole groups per rank; mxfp4
    # and fp8 kernels pad the per-rank width instead, so they have no such rule.
    if q is not None and q.group_size and q.group_size > 0 and ("awq" in q.method or "gptq" in q.method):
        widths = {"MLP": model.moe_intermediate_size if model.is_moe else model.intermediate_size,
                  "attention output": model.num_attention_heads * model.head_dim}
        for what, width in widths.items():
            if width and width % tp == 0 and (width // tp) % q.group_size:
                problems.append(
                    f"{q.method} group size {q.group_size} does not divide the per-rank {what} input "
                    f"({width}/{tp} = {width // tp})"
                )
    return problems


def expert_layout(dep: Deployment) -> tuple[int, int]:
    """(expert parallel size, ranks each expert is sharded over) as the engine sets them up.

    vLLM flattens DP into the MoE layers: with ``--enable-expert-parallel`` the experts spread over
    EP = TP x DP ranks, without it every expert is sharded over TP x DP ranks
    (``FusedMoEParallelConfig.make``). SGLang keeps EP inside the TP group (``--ep-size`` <= TP) and
    DP replicas hold full copies.
    """
    if dep.engine == "vllm":
        flat = dep.tp * dep.dp
        return (flat, 1) if dep.enable_expert_parallel else (1, flat)
    return (dep.tp, 1) if dep.enable_expert_parallel else (1, dep.tp)


def kv_heads_per_rank(model: ModelSpec, tp: int) -> int:
    """What each rank stores: ``max(1, kv_heads // tp)`` (both engines); MLA keeps one latent per rank."""
    if model.is_mla:
        return 1
    return max(1, model.num_key_value_heads // tp)


def pp_split(model: ModelSpec, dep: Deployment) -> tuple[int, ...]:
    from pytest_gpulayout.memory.pool import pp_partition

    return tuple(pp_partition(model.num_hidden_layers, dep.pp, dep.engine))


def check_heads(dep: Deployment, machine: Machine | None, model: ModelSpec, host: Host = BARE_HOST) -> Finding:
    tp, pp = dep.tp, dep.pp
    h, kv = model.num_attention_heads, model.num_key_value_heads
    per_rank = kv_heads_per_rank(model, tp)
    data = HeadsFacts(
        num_attention_heads=h,
        num_key_value_heads=kv,
        kv_heads_per_rank=per_rank,
        attention_heads_per_rank=h // tp if h % tp == 0 else None,
        kv_head_replicas=(tp // kv) if (not model.is_mla and kv < tp and tp % kv == 0) else 1,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
    )
    problems = tp_problems(model, tp)
    if dep.enable_expert_parallel and not model.is_moe and dep.engine == "vllm":
        return failed(CHECK, f"{dep.name}: enable_expert_parallel is set but {model.name} has no experts "
                      f"(vLLM: \"Number of experts in the model must be greater than 0 when expert parallelism "
                      f"is enabled\"). Remove enable_expert_parallel.", data)
    ep, expert_shards = expert_layout(dep)
    width = model.moe_intermediate_size
    if not problems and model.is_moe and width and expert_shards > tp and width % expert_shards:
        ok_dp = [d for d in range(1, max(8, len(machine.gpus) if machine else 8) + 1) if width % (tp * d) == 0]
        return failed(
            CHECK,
            f"{dep.name}: vLLM shards every expert of {model.name} over TP x DP = {expert_shards} ranks when "
            f"expert parallel is off, and the expert MLP width {width} does not divide by {expert_shards}. "
            f"Set enable_expert_parallel: true, or a data_parallel_size that divides it with TP={tp}: "
            f"{', '.join(map(str, ok_dp))}.", data)
    if problems:
        limit = max(8, len(machine.gpus) if machine else 8)
        ok = valid_tp_sizes(model, limit)
        return failed(
            CHECK,
            f"{dep.name}: {model.name} cannot run with TP={tp}: " + "; ".join(problems)
            + f". TP sizes that divide: {', '.join(map(str, ok))}"
            + (f"; or keep TP={max(t for t in ok if t < tp)} and add pipeline_parallel_size for the rest."
               if any(t < tp for t in ok) else "."),
            data,
        )
    notes: list[str] = []
    status_warn = False
    if dep.enable_expert_parallel and not model.is_moe:  # SGLang: --ep-size splits nothing in a dense model
        status_warn = True
        notes.append(f"enable_expert_parallel has no effect: {model.name} has no experts (remove it)")
    if model.is_mla:
        notes.append(f"MLA: every rank stores the full {model.kv_lora_rank}+{model.qk_rope_head_dim} latent "
                     f"per layer (TP={tp} does not shrink KV per rank)")
    elif kv < tp:
        notes.append(f"{kv} KV head{'s' if kv != 1 else ''} < TP={tp}: each KV head is replicated on {tp // kv} ranks "
                     f"(each rank stores 1, so KV per rank stops shrinking beyond TP={kv})")
    else:
        notes.append(f"each rank stores {per_rank} of {kv} KV head{'s' if kv != 1 else ''}")
    if pp > 1:
        split = pp_split(model, dep)
        data = replace(data, pp_layer_split=tuple(split))
        if min(split) == 0:
            return failed(
                CHECK,
                f"{dep.name}: PP={pp} is more stages than {model.name}'s {model.num_hidden_layers} layers "
                f"(split {list(split)}): use at most pipeline_parallel_size: {model.num_hidden_layers}.",
                data,
            )
        env = "VLLM_PP_LAYER_PARTITION" if dep.engine == "vllm" else "SGLANG_PP_LAYER_PARTITION"
        if len(set(split)) > 1:
            notes.append(f"{model.num_hidden_layers} layers split unevenly over PP={pp} as {list(split)} "
                         f"({env} overrides it)")
        else:
            notes.append(f"{model.num_hidden_layers} layers split evenly over PP={pp} as {list(split)}")
    if model.is_moe and model.num_experts:
        data = replace(data, num_experts=model.num_experts, expert_parallel_size=ep)
        if dep.enable_expert_parallel:
            what = "TP x DP" if dep.engine == "vllm" else "TP"
            if ep > model.num_experts:
                return failed(CHECK, f"{dep.name}: expert parallel size {ep} ({what}) exceeds the "
                              f"{model.num_experts} experts of {model.name}: some ranks would hold none.", data)
            if model.num_experts % ep:
                status_warn = True
                base = model.num_experts // ep
                notes.append(f"{model.num_experts} experts over EP={ep} do not split evenly "
                             f"({model.num_experts % ep} ranks hold {base + 1}, the rest {base}): "
                             f"the busiest rank sets the pace")
            else:
                notes.append(f"{model.num_experts} experts, {model.num_experts // ep} per rank (EP={ep})")
        elif expert_shards > tp:
            notes.append(f"{model.num_experts} experts, each sharded over TP x DP = {expert_shards} ranks "
                         f"(vLLM flattens DP into the MoE layers)")
        else:
            notes.append(f"{model.num_experts} experts, each sharded over TP={tp}")
    msg = f"{dep.name}: {h} attention heads / {kv} KV heads divide for TP={tp}; " + "; ".join(notes) + "."
    return (warned if status_warn else passed)(CHECK, msg, data)
