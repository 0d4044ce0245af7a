"""``heads``: do attention heads, KV heads, layers (PP), experts and quantized sizes divide as the engine needs?

The rules are the engines' own (vLLM ``ModelConfig.verify_with_parallel_config`` and
``QKVParallelLinear``; SGLang's model asserts and ``QKVParallelLinear``), which agree:

- attention heads % TP == 0;
- KV heads: if KV heads >= TP, KV heads % TP == 0; else TP % KV heads == 0 (each rank keeps one
  replicated KV head);
- every column/row-parallel width (MLP intermediate, MoE expert intermediate) % TP == 0;
- the vocabulary, padded to a multiple of 64, % TP == 0;
- the shared expert's width and a hybrid model's linear-attention conv width and heads % TP == 0
  (vllm ``distributed/utils.py divide``, ``mamba_utils.py``);
- quantized shares, by engine release (``Engine.shard_problems``, each engine's
  ``engines/<name>/divisibility.py``): block-FP8 ``weight_block_size`` blocks, int4/int8 groups of
  AWQ / GPTQ / compressed-tensors ``pack-quantized``, and SGLang's whole experts per EP rank. Each is
  a fail that quotes the engine's error and names the TP / DP sizes (or expert parallel, or the
  release) that work.

What differs per engine (how DP and EP split the experts, its words, the fixes it offers) comes from
the engine object (``Engine.expert_layout``, ``Engine.shard_rules``); the release and the launch's
knobs from the ``Subject``.

PP has no divisibility rule: the engines split layers unevenly, and the finding says how.

Before any of these, what the release refuses outright (``Engine.generation_refusals``, ``generation.py``):
an architecture its registry cannot build (vLLM ``model_executor/models/registry.py``), a quantization method
below its minimum compute capability (vLLM ``config/vllm.py``, SGLang ``model_loader/loader.py``), bf16 forced on
a GPU without it (vLLM ``platforms/cuda.py``), sparse MLA (DeepSeek-V3.2) below SM 9.0 and a forced attention
backend the GPU cannot run (vLLM ``platforms/cuda.py``, SGLang ``layers/attention/attention_registry.py``), each
quoted from the facts extracted from the release's wheel; a Transformers-backend fallback warns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pytest_gpulayout.check import Rule
from pytest_gpulayout.engine import ShardLayout, Subject
from pytest_gpulayout.findings import ABSENT, Absent, Facts, Finding, Status, failed, passed, register_facts, warned
from pytest_gpulayout.memory.kv import kv_heads_per_rank
from pytest_gpulayout.memory.stages import pp_partition
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.model.weights import VOCAB_PADDING
from pytest_gpulayout.rules.shard_widths import extra_tp_widths, shard_problems
from pytest_gpulayout.shards import BLOCK_FP8, EXPERT_SPLIT, WidthProblem

CHECK = "heads"


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
    #: set where a quantized / expert share was checked and refused or adapted
    engine_version: str | Absent = ABSENT
    shard_problems: tuple[Mapping[str, Any], ...] | Absent = ABSENT


def valid_tp_sizes(model: ModelSpec, limit: int = 64, layout: ShardLayout | None = None) -> list[int]:
    """TP sizes (up to ``limit``) for which every divisibility rule holds; with ``layout`` also the
    quantized-share rules of that engine release, DP and expert-parallel setting."""
    out = []
    for t in range(1, limit + 1):
        if tp_problems(model, t):
            continue
        if layout is not None and _fatal(model, replace(layout, tp=t)):
            continue
        out.append(t)
    return out


def _fatal(model: ModelSpec, layout: ShardLayout) -> list[WidthProblem]:
    if model.is_moe and model.moe_intermediate_size and model.moe_intermediate_size % layout.moe_shards:
        return [WidthProblem("moe_tp", "experts", model.moe_intermediate_size, layout.moe_shards,
                             "assert intermediate_size % moe_tp == 0", "fused_moe")]
    return [p for p in shard_problems(model, layout)[0] if p.fatal]


def tp_problems(model: ModelSpec, tp: int, attention_tp: int | None = None) -> list[str]:
    """Every rule ``tp`` breaks, each as the sentence the user needs (empty when it divides). ``attention_tp``:
    the ranks the attention heads are split over where that is not ``tp`` (SGLang's attention DP inside TP,
    ``attn_tp_size``: ``assert num_heads % attn_tp_size == 0`` in ``models/qwen3_moe.py``, ``deepseek_v2.py``);
    MLP, experts and vocabulary stay split over ``tp``."""
    problems: list[str] = []
    h, kv = model.num_attention_heads, model.num_key_value_heads
    mlp_tp, tp = tp, attention_tp or tp
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
    tp = mlp_tp
    if model.intermediate_size and not model.is_moe and model.intermediate_size % tp:
        problems.append(f"MLP width {model.intermediate_size} does not divide by TP={tp}")
    if model.is_moe and model.moe_intermediate_size and model.moe_intermediate_size % tp:
        problems.append(f"expert MLP width {model.moe_intermediate_size} does not divide by TP={tp}")
    padded_vocab = -(-model.vocab_size // VOCAB_PADDING) * VOCAB_PADDING
    if padded_vocab % tp:
        problems.append(f"vocabulary {model.vocab_size} (padded to {padded_vocab}) does not divide by TP={tp}")
    for what, width in extra_tp_widths(model):
        if width % tp:
            problems.append(f"{what} {width} does not divide by TP={tp} (\"{width} is not divisible by {tp}\")")
    # quantized shares (block-FP8 blocks, int4 groups) depend on the engine release: shard_widths
    return problems


def expert_layout(s: Subject) -> tuple[int, int]:
    """(expert parallel size, ranks each expert is sharded over) as the engine sets them up
    (``Engine.expert_layout``: vLLM flattens DP into the MoE layers, SGLang keeps EP inside the TP
    group and DP replicas hold full copies)."""
    return s.engine.memory.expert_layout(s.dep.tp, s.dep.dp, s.dep.enable_expert_parallel)


def pp_split(s: Subject) -> tuple[int, ...]:
    """Layers per PP stage as the engine splits them, with the partition variable the launch sets
    (the engine's ``pp_partition_env`` in launch.env or on the host: ``Subject.knobs``)."""
    return tuple(pp_partition(s.model.num_hidden_layers, s.dep.pp, s.engine.memory,
                              partition=s.knobs.pp_layer_partition))


def check_heads(s: Subject) -> Finding:
    dep, machine, model = s.dep, s.machine, s.model
    rules = s.engine.rules.shard_rules()
    tp, pp = dep.tp, dep.pp
    h, kv = model.num_attention_heads, model.num_key_value_heads
    atp = dep.attention_tp  # TP, or TP / attention DP (SGLang's attn_tp_size)
    per_rank = kv_heads_per_rank(model, atp)
    data = HeadsFacts(
        num_attention_heads=h,
        num_key_value_heads=kv,
        kv_heads_per_rank=per_rank,
        attention_heads_per_rank=h // atp if h % atp == 0 else None,
        kv_head_replicas=(atp // kv) if (not model.is_mla and kv < atp and atp % kv == 0) else 1,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
    )
    generation = s.engine.rules.generation_refusals(s)
    if generation.refusals:  # the release refuses the model on these GPUs before any layout question
        more = f" (and {len(generation.refusals) - 1} more refusal(s): " + "; ".join(generation.refusals[1:]) + ")" \
            if len(generation.refusals) > 1 else ""
        return failed(CHECK, f"{model.name} cannot start: {generation.refusals[0]}{more}.", data)
    problems = tp_problems(model, tp, dep.attention_tp)
    if dep.enable_expert_parallel and not model.is_moe and rules.ep_without_experts_error is not None:
        return failed(CHECK, f"enable_expert_parallel is set but {model.name} has no experts "
                      f"({s.engine.display}: \"{rules.ep_without_experts_error}\"). Remove enable_expert_parallel.",
                      data)
    ep, expert_shards = expert_layout(s)
    width = model.moe_intermediate_size
    if not problems and model.is_moe and width and expert_shards > tp and width % expert_shards:
        ok_dp = [d for d in range(1, max(8, len(machine.gpus) if machine else 8) + 1) if width % (tp * d) == 0]
        return failed(
            CHECK,
            f"vLLM shards every expert of {model.name} over TP x DP = {expert_shards} ranks when "
            f"expert parallel is off, and the expert MLP width {width} does not divide by {expert_shards}. "
            f"Set enable_expert_parallel: true, or a data_parallel_size that divides it with TP={tp}: "
            f"{', '.join(map(str, ok_dp))}.", data)
    if problems:
        limit = max(8, len(machine.gpus) if machine else 8)
        ok = valid_tp_sizes(model, limit)
        return failed(
            CHECK,
            f"{model.name} cannot run with TP={tp}: " + "; ".join(problems)
            + f". TP sizes that divide: {', '.join(map(str, ok))}"
            + (f"; or keep TP={max(t for t in ok if t < tp)} and add pipeline_parallel_size for the rest."
               if any(t < tp for t in ok) else "."),
            data,
        )
    notes: list[str] = []
    status_warn = False
    version = s.version
    layout = ShardLayout(s.engine, version, tp, dep.dp, dep.enable_expert_parallel, knobs=s.knobs)
    found, adapted = shard_problems(model, layout)
    if found or adapted:
        data = replace(data, engine_version=str(version),
                       shard_problems=tuple(p.to_json() for p in found))
    fatal = [p for p in found if p.fatal]
    if fatal:
        limit = max(8, len(machine.gpus) if machine else 8)
        return failed(CHECK, _shard_message(s, layout, fatal[0], limit), data)
    for p in found:   # an engine path we could not verify: warn, with the engine's text
        status_warn = True
        notes.append(f"{_problem_sentence(model, layout, p)}; {s.engine.display} may refuse it "
                     f"(\"{p.engine_error}\", {p.source}) unless a kernel without that rule is picked "
                     f"(not verified)")
    notes.extend(adapted)
    if dep.enable_expert_parallel and not model.is_moe:  # SGLang: --ep-size splits nothing in a dense model
        status_warn = True
        notes.append(f"enable_expert_parallel has no effect: {model.name} has no experts (remove it)")
    if model.is_mla:
        notes.append(f"MLA: every rank stores the full {model.kv_lora_rank}+{model.qk_rope_head_dim} latent "
                     f"per layer (TP={tp} does not shrink KV per rank)")
    elif kv < atp:
        notes.append(f"{kv} KV head{'s' if kv != 1 else ''} < TP={atp}: each KV head is replicated on "
                     f"{atp // kv} ranks (each rank stores 1, so KV per rank stops shrinking beyond TP={kv})")
    else:
        notes.append(f"each rank stores {per_rank} of {kv} KV head{'s' if kv != 1 else ''}")
    if pp > 1:
        split = pp_split(s)
        data = replace(data, pp_layer_split=tuple(split))
        if min(split) == 0:
            return failed(
                CHECK,
                f"PP={pp} is more stages than {model.name}'s {model.num_hidden_layers} layers "
                f"(split {list(split)}): use at most pipeline_parallel_size: {model.num_hidden_layers}.",
                data,
            )
        env = s.engine.memory.pp_partition_env
        if len(set(split)) > 1:
            notes.append(f"{model.num_hidden_layers} layers split unevenly over PP={pp} as {list(split)}"
                         + (f" ({env} overrides it)" if env else ""))
        else:
            notes.append(f"{model.num_hidden_layers} layers split evenly over PP={pp} as {list(split)}")
    if model.is_moe and model.num_experts:
        data = replace(data, num_experts=model.num_experts, expert_parallel_size=ep)
        if dep.enable_expert_parallel:
            what = rules.ep_spans
            if ep > model.num_experts:
                return failed(CHECK, f"expert parallel size {ep} ({what}) exceeds the "
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
    if generation.warnings:
        status_warn = True
    notes.extend(generation.warnings)
    notes.extend(generation.notes)
    said = f"TP={tp}" if atp == tp else f"TP={tp} (attention over {atp} rank{'s' if atp != 1 else ''}: attention DP)"
    msg = f"{h} attention heads / {kv} KV heads divide for {said}; " + "; ".join(notes) + "."
    return (warned if status_warn else passed)(CHECK, msg, data)


def _shards_text(layout: ShardLayout) -> str:
    """The ranks an expert's width is split over: TP, or TP x DP where the engine folds DP in."""
    if not layout.expert_parallel and layout.moe_shards != layout.tp:
        return f"(TP x DP = {layout.tp} x {layout.dp})"
    return f"TP={layout.tp}"


def _problem_sentence(model: ModelSpec, layout: ShardLayout, p: WidthProblem) -> str:
    q = model.quantization
    if p.rule == EXPERT_SPLIT:
        return (f"SGLang places whole experts on each of the EP={layout.ep_size} ranks and asserts that the "
                f"{p.width} routed experts divide by {p.divisor}")
    if p.rule == BLOCK_FP8 and q is not None and q.weight_block_size:
        bn, bk = q.weight_block_size
        block = f"block-FP8 weight_block_size [{bn}, {bk}]"
        if p.layer.startswith("experts"):
            return (f"each rank's share of every expert's gate/up projection is moe_intermediate_size "
                    f"{model.moe_intermediate_size} / {_shards_text(layout)} = {p.width}, not a multiple of the "
                    f"{block}")
        return f"each rank's share of {p.layer} is {p.width} wide, not a multiple of the {block}"
    method = q.method if q is not None else "int4"
    if p.divisor in (64, 128) and "min_thread" in p.engine_error:
        return (f"each rank's share of {p.layer} is {p.width} wide, not a multiple of the Marlin kernel's "
                f"{p.divisor}-wide tile ({method} int{int(q.bits) if q else 4} weights)")
    return (f"each rank's share of the {p.layer} input is {p.width} wide, not a whole number of "
            f"{p.divisor}-wide quantization groups ({method} group_size {p.divisor})")


def _shard_message(s: Subject, layout: ShardLayout, p: WidthProblem, limit: int) -> str:
    """The fail for a refused share: what, the engine's words, and the layouts that start."""
    model, vsource = s.model, s.version_source
    rules = s.engine.rules.shard_rules()
    engine = s.engine.display
    assumed = " (assumed: the newest release known; pin engine_version)" if vsource == "assumed latest known" else ""
    head = (f"{model.name} cannot start on {engine} {layout.version}{assumed} with TP={layout.tp}"
            + (f" DP={layout.dp}" if layout.dp > 1 else "")
            + (" and expert parallel" if layout.expert_parallel else "") + ": "
            + _problem_sentence(model, layout, p) + ". "
            + (f"{p.unverified}" if p.unverified else
               f"{engine} raises: \"{p.engine_error}\" ({p.source})." if p.checked_from is None else
               f"{engine} {layout.version} has no check for it and would load each rank's {p.width}-wide "
               f"share with scales that do not match its inputs (wrong outputs); {p.checked_from} refuses "
               f"it: \"{p.engine_error}\" ({p.source})."))
    fixes: list[str] = []
    tps = [t for t in valid_tp_sizes(model, limit, layout) if t != layout.tp]
    if tps:
        fixes.append(f"TP sizes that start{f' with DP={layout.dp}' if layout.dp > 1 else ''}: "
                     f"{', '.join(map(str, tps))}")
    moe_rule = p.layer.startswith("experts") or p.rule == EXPERT_SPLIT
    if moe_rule and rules.dp_splits_experts and not layout.expert_parallel:
        dps = [d for d in range(1, limit + 1)
               if d != layout.dp and not _fatal(model, replace(layout, dp=d))]
        if layout.dp > 1 or dps:
            fixes.append(f"data_parallel_size that works with TP={layout.tp}: "
                         + (", ".join(map(str, dps)) if dps else "none"))
    if moe_rule and not layout.expert_parallel and model.is_moe:
        if not _fatal(model, replace(layout, expert_parallel=True)):
            fixes.append("enable_expert_parallel: true (each rank then holds whole experts, so the expert "
                         "width is not split)")
    if p.rule == EXPERT_SPLIT and model.num_experts:
        eps = [t for t in valid_tp_sizes(model, limit, layout) if model.num_experts % t == 0]
        fixes = [f"TP (= EP) sizes whose EP divides the {model.num_experts} experts: {', '.join(map(str, eps))}"] \
            if eps else []
        fixes.append("enable_expert_parallel: false (every rank holds a slice of every expert)")
    refine = rules.fp8_moe_refine
    if (p.rule == BLOCK_FP8 and refine is not None and layout.version < refine[0]
            and not _fatal(model, replace(layout, version=refine[0]))):
        fixes.append(refine[1])
    if not fixes:
        fixes.append("no TP size up to "
                     f"{limit} divides: use a checkpoint without this quantization")
    return head + " Works instead: " + "; or ".join(fixes) + "."


def _number(f: Finding) -> str:
    facts = f.facts
    assert isinstance(facts, HeadsFacts)
    if f.status is Status.FAIL:  # the number that decided: heads that TP does not divide (else see the message)
        if facts.attention_heads_per_rank is None:
            return f"{facts.num_attention_heads} heads, TP={facts.tensor_parallel_size}"
        return ""
    return f"kv/rank {facts.kv_heads_per_rank}"


HEADS = Rule(CHECK, "Do attention heads, KV heads (and their replication), PP layers, experts and quantized widths "
             "divide the way the engine requires, and does the release build the model on these GPUs?",
             HeadsFacts, check_heads, _number)
