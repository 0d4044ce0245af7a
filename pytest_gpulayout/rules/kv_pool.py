"""``kv_pool``: how many tokens of KV cache will each replica get, and is that what the deployment needs?

The prediction (``memory.predict_pool``) mirrors each engine's sizing: bytes per token per rank from
the config (KV heads per rank, MLA latent, layers on the busiest PP stage, KV dtype), weights per rank,
the memory fraction (engine default by version when absent) and an activation reserve. It is an
estimate: a requirement met with less than ``TIGHT_MARGIN`` to spare is a warning, and the
``startup`` check measures the real pool. ``require.kv_tokens`` and ``require.concurrency`` are per
replica: each DP engine has its own pool and round robin gives it its share of the users.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace

from pytest_gpulayout.check import Gate, Rule, Then, fails
from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engine import Subject
from pytest_gpulayout.findings import (
    ABSENT,
    CODE_ONLY,
    Absent,
    Facts,
    Finding,
    Status,
    failed,
    passed,
    register_facts,
    skipped,
    warned,
)
from pytest_gpulayout.machine.facts import GIB
from pytest_gpulayout.memory.common import MemoryUnknown
from pytest_gpulayout.memory.kv import kv_bytes_per_token_per_rank
from pytest_gpulayout.memory.pool import PoolPrediction
from pytest_gpulayout.memory.weights import weight_bytes_per_rank
from pytest_gpulayout.placement import PlacementError

CHECK = "kv_pool"
TIGHT_MARGIN = 0.10


class FractionOrigin(enum.Enum):
    """Where the memory fraction of a prediction came from."""

    GIVEN = "memory_fraction"          # the deployment's memory_fraction
    ENGINE_DEFAULT = "engine default"  # the engine's default for its release


@register_facts("kv_pool")
@dataclass(frozen=True)
class KvPoolFacts(Facts):
    """The pool prediction. Without a prediction (layout not placed, memory unknown) only the
    per-token and weight figures are known; ``model_max_len`` is there when ``max_model_len`` exceeds
    the model's own maximum."""

    kv_bytes_per_token_per_rank: int
    weights_gib_per_rank: float
    predicted_kv_tokens: int | None = None
    predicted_kv_tokens_per_replica: tuple[int, ...] | None = None
    max_model_len: int | None | Absent = ABSENT
    max_concurrency: float | None | Absent = ABSENT
    memory_fraction: float | Absent = ABSENT
    memory_fraction_source: str | Absent = ABSENT
    activation_reserve_gib: float | Absent = ABSENT
    kv_budget_gib_per_rank: float | Absent = ABSENT
    model_max_len: int | Absent = ABSENT
    #: settings read from launch.args / launch.env that the prediction took into account
    launch_settings: tuple[str, ...] | Absent = ABSENT
    #: flags in launch.args the prediction does not model (the startup check measures them)
    not_modelled: tuple[str, ...] | Absent = ABSENT
    #: where ``memory_fraction`` came from (None: no prediction)
    fraction_origin: FractionOrigin | None = field(default=None, metadata=CODE_ONLY)
    #: the engine refuses ``max_model_len`` at config time, before it allocates anything
    refused_at_config: bool = field(default=False, metadata=CODE_ONLY)
    #: one prediction per DP replica, for the report (empty: none made)
    predictions: tuple[PoolPrediction, ...] = field(default=(), metadata=CODE_ONLY)

    @property
    def smallest(self) -> PoolPrediction | None:
        """The replica whose pool is the deployment's (the smallest), if predicted."""
        return min(self.predictions, key=lambda p: p.kv_tokens) if self.predictions else None


def shortfalls(dep: Deployment, tokens: int, concurrency: float | None, max_model_len: int | None
               ) -> tuple[list[str], list[str]]:
    """(unmet, tight) requirement sentences. Concurrency is judged on the engine's own measure, full
    ``max_model_len`` requests at once, which counts sliding-window layers at their window."""
    req = dep.require
    unmet: list[str] = []
    tight: list[str] = []
    if req.kv_tokens:
        text = f"require.kv_tokens {req.kv_tokens:,}" + (" per replica" if dep.dp > 1 else "")
        if tokens < req.kv_tokens:
            unmet.append(f"{text}: short by {req.kv_tokens - tokens:,} tokens")
        elif tokens < req.kv_tokens * (1 + TIGHT_MARGIN):
            tight.append(text)
    if req.concurrency and concurrency is not None and max_model_len:
        per = " per replica" if dep.dp > 1 else ""
        text = f"require.concurrency {req.concurrency} full {max_model_len:,}-token requests{per}"
        if concurrency < req.concurrency:
            # the value that decided, rounded down: 3.998 is "3.99", never "4.00" against a need of 4
            unmet.append(f"{text}: holds {math.floor(concurrency * 100) / 100:.2f}")
        elif concurrency < req.concurrency * (1 + TIGHT_MARGIN):
            tight.append(text)
    return unmet, tight


def _too_long(s: Subject) -> tuple[Status, str, int, int] | None:
    """max_model_len above the model's derived maximum: both engines refuse at config time unless
    their override variable is set (then it starts, with positions the model never trained on).
    ``(status, message, max_model_len, the model's maximum)`` or None when it is within."""
    dep, model, host, engine = s.dep, s.model, s.host, s.engine
    limit = model.max_position_embeddings
    if not (dep.max_model_len and limit and dep.max_model_len > limit):
        return None
    env = engine.rules.long_context_env
    # the engine inherits this process's environment, then launch.env on top (startup.engine_env)
    value = dep.launch.env.get(env, host.getenv(env) or "")
    where = "launch.env" if env in dep.launch.env else "the environment"
    if str(value).lower() in ("1", "true"):
        return (Status.WARN, f"max_model_len {dep.max_model_len:,} is beyond {model.name}'s "
                f"{limit:,} positions; {env}=1 in {where} lets the engine start, but quality past "
                f"{limit:,} tokens is not what the model was trained for.", dep.max_model_len, limit)
    return (Status.FAIL, f"max_model_len {dep.max_model_len:,} is beyond {model.name}'s {limit:,} "
            f"positions, so {engine.display} refuses to start (\"{engine.rules.too_long_text}\"). "
            f"Use max_model_len: {limit:,} or less, or set {env}: \"1\" in launch.env to override.",
            dep.max_model_len, limit)


def _no_room(s: Subject, p: PoolPrediction) -> str:
    """Why there is no KV cache, and the fix that can work: when the weights alone exceed the GPU no
    memory fraction helps; when another tenant holds the limiting GPU, that tenant is the cause."""
    gpu = s.machine.gpu(p.limiting_gpu)
    total = (gpu.memory_total_mib or 0) / 1024
    if p.weights_gib_per_rank >= 0.95 * total:
        return (f"the weights alone, {p.weights_gib_per_rank:.2f} GiB per GPU, exceed GPU{gpu.index}'s "
                f"{total:.2f} GiB, so no memory_fraction can hold them: use FP8 or quantized weights, more "
                f"tensor/pipeline parallel ranks, or more nodes.")
    if gpu.processes:
        who = ", ".join(f"{t.name or 'pid'} {t.pid}" for t in gpu.processes[:3])
        spread = f" {s.engine.rules.tenant_note}" if s.engine.rules.tenant_note else ""
        return (f"the weights leave no room for a KV cache on GPU{gpu.index}, where another tenant ({who}) "
                f"holds {(total - (gpu.memory_free_mib or 0) / 1024):.2f} GiB.{spread} Stop it, or move the "
                f"deployment to GPUs without tenants.")
    advice = s.engine.rules.no_room_advice(p, gpu.index)
    if advice:  # the engine's own reserve is what tips it: it names it, and the flags that shrink it
        return advice
    return (f"the weights leave no room for a KV cache on GPU{gpu.index}. Raise memory_fraction, add "
            f"tensor/pipeline parallel ranks, or quantize.")


def check_kv_pool(s: Subject) -> Finding:
    finding = _check_pool(s)
    too_long = _too_long(s)
    if too_long is None or finding.status is Status.FAIL:
        return finding
    verdict, message, max_len, limit = too_long
    assert isinstance(finding.facts, KvPoolFacts)
    facts = replace(finding.facts, max_model_len=max_len, model_max_len=limit,
                    refused_at_config=verdict is Status.FAIL)
    if verdict is Status.FAIL:
        return Finding(CHECK, Status.FAIL, message, facts)
    status = Status.WARN if finding.status in (Status.PASS, Status.WARN) else finding.status
    return Finding(CHECK, status, f"{message} {finding.message}", facts)


def _without_memory(s: Subject) -> tuple[int, int]:
    """KV bytes per token and weight bytes on the most loaded rank, where the pool cannot be predicted
    (the prediction carries both otherwise)."""
    dep, model, knobs = s.dep, s.model, s.knobs
    per_token = kv_bytes_per_token_per_rank(model, engine=s.engine.memory, tp=dep.tp, pp=dep.pp,
                                            kv_cache_dtype=dep.kv_cache_dtype,
                                            pp_layer_partition=knobs.pp_layer_partition)
    weights = weight_bytes_per_rank(model, tp=dep.tp, pp=dep.pp, engine=s.engine.memory,
                                    enable_expert_parallel=dep.enable_expert_parallel, dp=dep.dp,
                                    pp_layer_partition=knobs.pp_layer_partition)
    return per_token, weights


def _check_pool(s: Subject) -> Finding:
    dep, knobs = s.dep, s.knobs
    try:
        preds = s.replicas  # the same prediction balance reads
    except (PlacementError, MemoryUnknown) as err:
        per_token, weights = _without_memory(s)
        data = KvPoolFacts(kv_bytes_per_token_per_rank=per_token, weights_gib_per_rank=round(weights / GIB, 2))
        if isinstance(err, PlacementError):
            return skipped(CHECK, f"pool not predicted: {err}", data)
        # Never a pass: the pool is what the deployment serves from, and nobody looked at the memory.
        return warned(CHECK, f"KV pool NOT checked: {err}. Known without memory: {per_token:,} "
                      f"bytes of KV per token per rank, {weights / GIB:.2f} GiB of weights per rank. Probe the "
                      f"host (machine: auto) or use a snapshot with memory to get a verdict.", data)
    tokens = [p.kv_tokens for p in preds]
    smallest = min(range(len(preds)), key=lambda i: tokens[i])
    p = preds[smallest]
    max_len = p.max_model_len
    data = KvPoolFacts(
        kv_bytes_per_token_per_rank=p.kv_bytes_per_token_per_rank,
        weights_gib_per_rank=round(p.weights_bytes_per_rank / GIB, 2),
        predicted_kv_tokens=tokens[smallest],
        predicted_kv_tokens_per_replica=tuple(tokens),
        max_model_len=max_len,
        max_concurrency=round(p.max_concurrency, 2) if p.max_concurrency is not None else None,
        memory_fraction=p.memory_fraction,
        memory_fraction_source=p.fraction_source,
        activation_reserve_gib=round(p.activation_reserve_gib, 2),
        kv_budget_gib_per_rank=round(p.kv_budget_bytes_per_rank / GIB, 2),
        fraction_origin=(FractionOrigin.GIVEN if p.fraction_source == "memory_fraction"
                         else FractionOrigin.ENGINE_DEFAULT),
        predictions=tuple(preds),
    )
    rep = f" (smallest of {len(preds)} replicas)" if len(preds) > 1 else ""
    fraction = ("memory_fraction " + f"{p.memory_fraction:g}" if p.fraction_source == "memory_fraction"
                else p.fraction_source)
    basis = f"{p.kv_bytes_per_token_per_rank:,} B/token/rank, {p.weights_gib_per_rank:.2f} GiB weights/rank, {fraction}"
    extra = list(p.notes)
    if knobs.read:
        data = replace(data, launch_settings=knobs.read)
        extra.insert(0, f"From the launch: {', '.join(knobs.read)}.")
    if knobs.not_modelled or knobs.env_not_modelled:
        data = replace(data, not_modelled=knobs.not_modelled + knobs.env_not_modelled)
        extra.append(knobs.not_modelled_note())
    uncounted = tuple(dict.fromkeys(u for q in preds for u in q.uncounted))
    if uncounted:  # the engine takes more out of the pool than is counted: the figure is an upper bound
        extra.append(f"Upper bound: not counted, {'; '.join(uncounted)}.")
    cautions = tuple(dict.fromkeys(c for q in preds for c in q.cautions))  # it may not start: never a silent pass
    notes = (" " + " ".join(extra)) if extra else ""
    head = f"predicted KV pool {tokens[smallest]:,} tokens{rep} ({basis})"
    if tokens[smallest] <= 0:
        return failed(CHECK, f"{head}: {_no_room(s, p)}{notes}", data)
    if p.fits_one_request is False:
        fix = ("Lower max_model_len, raise memory_fraction, use kv_cache_dtype: fp8, or spread the model over "
               "more GPUs")
        refuses, said = s.engine.rules.short_pool
        if refuses:
            return failed(CHECK, f"{head}: one {max_len:,}-token request does not fit, so {s.engine.display} refuses "
                          f"to start (\"{said}\"). {fix}.{notes}", data)
        return warned(CHECK, f"{head}: fewer than one full {max_len:,}-token request; {s.engine.display} starts but "
                      f"warns \"{said}\". {fix}.{notes}", data)
    conc = f"; {p.max_concurrency:.2f} full {max_len:,}-token requests" if p.max_concurrency and max_len else ""
    unmet, tight = shortfalls(dep, tokens[smallest], p.max_concurrency, max_len)
    if unmet:
        return failed(CHECK, f"{head}{conc}; misses " + "; ".join(unmet) + ". Raise memory_fraction, shorten "
                      f"max_model_len, use kv_cache_dtype: fp8, or add GPUs.{notes}", data)
    if tight:
        return warned(CHECK, f"{head}{conc}: meets " + " and ".join(tight) + f" with under {TIGHT_MARGIN:.0%} to "
                      f"spare; the prediction is an estimate: confirm with the startup check "
                      f"(--gpulayout-launch).{notes}", data)
    if cautions:
        return warned(CHECK, f"{head}{conc}; but {' '.join(cautions)}{notes}", data)
    if not (dep.require.kv_tokens or dep.require.concurrency):
        return passed(CHECK, f"{head}{conc}; no requirement set (require.kv_tokens / require.concurrency).{notes}",
                      data)
    met = [t for t in (dep.require.kv_tokens and f"require.kv_tokens {dep.require.kv_tokens:,}",
                       dep.require.concurrency and f"require.concurrency {dep.require.concurrency}") if t]
    if uncounted:  # met only by a pool that leaves memory out: never a silent pass
        return warned(CHECK, f"{head}{conc}: meets {' and '.join(met)} only as an upper bound, without "
                      f"{'; '.join(uncounted)}; confirm with the startup check (--gpulayout-launch).{notes}", data)
    return passed(CHECK, f"{head}{conc}: meets {' and '.join(met)}.{notes}", data)


def tokens_text(n: object) -> str:
    """``161k tok``: a token count as the summary table shows it."""
    if not isinstance(n, (int, float)):
        return ""
    n = int(n)
    if abs(n) >= 10_000_000:
        return f"{n / 1e6:.0f}M tok"
    if abs(n) >= 10_000:
        return f"{n / 1e3:.0f}k tok"
    return f"{n} tok"


def _number(f: Finding) -> str:
    facts = f.facts
    assert isinstance(facts, KvPoolFacts)
    return tokens_text(facts.predicted_kv_tokens)


#: a pool for a layout the engine refuses to build is not a verdict: the numbers stay, the pass does not
KV_POOL = Rule(CHECK, "The KV pool predicted the way the engine release computes it, against require.kv_tokens / "
               "require.concurrency.", KvPoolFacts, check_kv_pool, _number,
               gates=(Gate("config", fails, Then.NOT_JUDGED, "the engine refuses this command line"),
                      Gate("heads", fails, Then.NOT_JUDGED, "the engine refuses this layout")))
