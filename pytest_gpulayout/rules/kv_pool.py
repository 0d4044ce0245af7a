"""``kv_pool``: how many tokens of KV cache will each replica get, and is that what the deployment needs?

The prediction (``memory.predict_pool``) mirrors each engine's sizing: bytes per token per rank from
the config (KV heads per rank, MLA latent, layers on the busiest PP stage, KV dtype), weights per rank,
the memory fraction (engine default by version when absent) and an activation reserve. It is an
estimate: a requirement met with less than ``TIGHT_MARGIN`` to spare is a warning, and the
``startup`` check measures the real pool. ``require.kv_tokens`` and ``require.concurrency`` are per
replica: each DP engine has its own pool and round robin gives it its share of the users.
"""

from __future__ import annotations

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.findings import Finding, Status, failed, passed, skipped, warned
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.machine.facts import GIB, Machine
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.placement import PlacementError, place

CHECK = "kv_pool"
TIGHT_MARGIN = 0.10


def predict_replicas(dep: Deployment, machine: Machine, model: ModelSpec, host: Host = BARE_HOST) -> list:
    """One ``PoolPrediction`` per DP replica (raises ``MemoryUnknown`` / ``PlacementError``)."""
    from pytest_gpulayout.memory.pool import predict_pool

    placement = place(dep, machine)
    return [
        predict_pool(
            model, engine=dep.engine, engine_version=dep.engine_version, tp=dep.tp, pp=dep.pp,
            gpus=[machine.gpu(i) for i in placement.replica_gpus(d)], max_model_len=dep.max_model_len,
            memory_fraction=dep.memory_fraction, kv_cache_dtype=dep.kv_cache_dtype,
            enable_expert_parallel=dep.enable_expert_parallel, dp=dep.dp, host=host,
        )
        for d in range(dep.dp)
    ]


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
            unmet.append(f"{text}: holds {concurrency:.2f}")
        elif concurrency < req.concurrency * (1 + TIGHT_MARGIN):
            tight.append(text)
    return unmet, tight


#: The environment switch each engine reads to accept a max_model_len above the model's own.
LONG_CONTEXT_ENV = {"vllm": "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "sglang": "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"}


def _too_long(dep: Deployment, model: ModelSpec, host: Host) -> Finding | None:
    """max_model_len above the model's derived maximum: both engines refuse at config time unless
    their override variable is set (then it starts, with positions the model never trained on)."""
    limit = model.max_position_embeddings
    if not (dep.max_model_len and limit and dep.max_model_len > limit):
        return None
    env = LONG_CONTEXT_ENV[dep.engine]
    data = {"max_model_len": dep.max_model_len, "model_max_len": limit}
    # the engine inherits this process's environment, then launch.env on top (startup.engine_env)
    value = dep.launch.env.get(env, host.getenv(env) or "")
    where = "launch.env" if env in dep.launch.env else "the environment"
    if str(value).lower() in ("1", "true"):
        return warned(CHECK, f"{dep.name}: max_model_len {dep.max_model_len:,} is beyond {model.name}'s "
                      f"{limit:,} positions; {env}=1 in {where} lets the engine start, but quality past "
                      f"{limit:,} tokens is not what the model was trained for.", **data)
    text = ("\"User-specified max_model_len ... is greater than the derived max_model_len\"" if dep.engine == "vllm"
            else "\"User-specified context_length ... is greater than the derived context_length\"")
    return failed(CHECK, f"{dep.name}: max_model_len {dep.max_model_len:,} is beyond {model.name}'s {limit:,} "
                  f"positions, so {'vLLM' if dep.engine == 'vllm' else 'SGLang'} refuses to start ({text}). "
                  f"Use max_model_len: {limit:,} or less, or set {env}: \"1\" in launch.env to override.", **data)


def check_kv_pool(dep: Deployment, machine: Machine, model: ModelSpec, host: Host = BARE_HOST) -> Finding:
    finding = _check_pool(dep, machine, model, host)
    too_long = _too_long(dep, model, host)
    if too_long is None or finding.status is Status.FAIL:
        return finding
    if too_long.status is Status.FAIL:
        return Finding(CHECK, Status.FAIL, too_long.message, {**finding.data, **too_long.data})
    status = Status.WARN if finding.status in (Status.PASS, Status.WARN) else finding.status
    return Finding(CHECK, status, f"{too_long.message} {finding.message}", {**finding.data, **too_long.data})


def _check_pool(dep: Deployment, machine: Machine, model: ModelSpec, host: Host) -> Finding:
    from pytest_gpulayout.memory.pool import MemoryUnknown, kv_bytes_per_token_per_rank, weight_bytes_per_rank

    per_token = kv_bytes_per_token_per_rank(model, engine=dep.engine, tp=dep.tp, pp=dep.pp,
                                            kv_cache_dtype=dep.kv_cache_dtype)
    weights = weight_bytes_per_rank(model, tp=dep.tp, pp=dep.pp, engine=dep.engine,
                                    enable_expert_parallel=dep.enable_expert_parallel, dp=dep.dp)
    data: dict[str, object] = {
        "kv_bytes_per_token_per_rank": per_token,
        "weights_gib_per_rank": round(weights / GIB, 2),
        "predicted_kv_tokens": None,
        "predicted_kv_tokens_per_replica": None,
    }
    try:
        preds = predict_replicas(dep, machine, model, host)
    except PlacementError as err:
        return skipped(CHECK, f"{dep.name}: pool not predicted: {err}", **data)
    except MemoryUnknown as err:
        # Never a pass: the pool is what the deployment serves from, and nobody looked at the memory.
        return warned(CHECK, f"{dep.name}: KV pool NOT checked: {err}. Known without memory: {per_token:,} "
                      f"bytes of KV per token per rank, {weights / GIB:.2f} GiB of weights per rank. Probe the "
                      f"host (machine: auto) or use a snapshot with memory to get a verdict.", **data)
    tokens = [p.kv_tokens for p in preds]
    smallest = min(range(len(preds)), key=lambda i: tokens[i])
    p = preds[smallest]
    max_len = p.max_model_len
    data.update({
        "predicted_kv_tokens": tokens[smallest],
        "predicted_kv_tokens_per_replica": tokens,
        "max_model_len": max_len,
        "max_concurrency": round(p.max_concurrency, 2) if p.max_concurrency is not None else None,
        "memory_fraction": p.memory_fraction,
        "memory_fraction_source": p.fraction_source,
        "activation_reserve_gib": round(p.activation_reserve_gib, 2),
        "kv_budget_gib_per_rank": round(p.kv_budget_bytes_per_rank / GIB, 2),
    })
    rep = f" (smallest of {len(preds)} replicas)" if len(preds) > 1 else ""
    fraction = ("memory_fraction " + f"{p.memory_fraction:g}" if p.fraction_source == "memory_fraction"
                else p.fraction_source)
    basis = f"{per_token:,} B/token/rank, {p.weights_gib_per_rank:.2f} GiB weights/rank, {fraction}"
    notes = (" " + " ".join(p.notes)) if p.notes else ""
    head = f"{dep.name}: predicted KV pool {tokens[smallest]:,} tokens{rep} ({basis})"
    if tokens[smallest] <= 0:
        return failed(CHECK, f"{head}: the weights leave no room for a KV cache on GPU{p.limiting_gpu}. "
                      f"Raise memory_fraction, add tensor/pipeline parallel ranks, or quantize.{notes}", **data)
    if p.fits_one_request is False:
        fix = ("Lower max_model_len, raise memory_fraction, use kv_cache_dtype: fp8, or spread the model over "
               "more GPUs")
        if dep.engine == "vllm":
            return failed(CHECK, f"{head}: one {max_len:,}-token request does not fit, so vLLM refuses to start "
                          f"(\"To serve at least one request with the model's max seq len\"). {fix}.{notes}", **data)
        return warned(CHECK, f"{head}: fewer than one full {max_len:,}-token request; SGLang starts but warns "
                      f"\"KV pool holds ... fewer than --context-length\". {fix}.{notes}", **data)
    conc = f"; {p.max_concurrency:.2f} full {max_len:,}-token requests" if p.max_concurrency and max_len else ""
    unmet, tight = shortfalls(dep, tokens[smallest], p.max_concurrency, max_len)
    if unmet:
        return failed(CHECK, f"{head}{conc}; misses " + "; ".join(unmet) + ". Raise memory_fraction, shorten "
                      f"max_model_len, use kv_cache_dtype: fp8, or add GPUs.{notes}", **data)
    if tight:
        return warned(CHECK, f"{head}{conc}: meets " + " and ".join(tight) + f" with under {TIGHT_MARGIN:.0%} to "
                      f"spare; the prediction is an estimate: confirm with the startup check "
                      f"(--gpulayout-launch).{notes}", **data)
    if not (dep.require.kv_tokens or dep.require.concurrency):
        return passed(CHECK, f"{head}{conc}; no requirement set (require.kv_tokens / require.concurrency).{notes}",
                      **data)
    met = [t for t in (dep.require.kv_tokens and f"require.kv_tokens {dep.require.kv_tokens:,}",
                       dep.require.concurrency and f"require.concurrency {dep.require.concurrency}") if t]
    return passed(CHECK, f"{head}{conc}: meets {' and '.join(met)}.{notes}", **data)
