"""The ``startup`` verdict on one launch: the real pool against ``require`` and the prediction, the
engine's own error line and its fix, and how the launch stopped. Pure: every branch is testable
from a recorded result."""

from __future__ import annotations

import itertools
import signal
from collections.abc import Sequence

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.findings import Finding, failed, passed, warned
from pytest_gpulayout.launch.facts import StartupFacts
from pytest_gpulayout.launch.launcher import LaunchResult
from pytest_gpulayout.launch.logparse import (
    HEADS_NOT_DIVISIBLE,
    INSUFFICIENT_FREE_MEMORY,
    KV_CACHE_TOO_SMALL,
    NO_KV_MEMORY,
    OOM,
    TP_MEMORY_UNBALANCED,
)
from pytest_gpulayout.model.spec import ModelSpec

CHECK = "startup"
#: How an engine is asked to stop when the caller has no engine object to ask (``Engine.stop_signal``
#: is each engine's own): Ctrl-C, as in the terminal it was started from.
STOP_SIGNAL = signal.SIGINT
TAIL_IN_MESSAGE = 12
#: actual/predicted outside this band is called out in the message (the real pool decides the verdict)
PREDICTION_BAND = (0.5, 2.0)
_LOG_COUNTER = itertools.count(1)

_FIXES = {
    TP_MEMORY_UNBALANCED: "free memory differs between the TP ranks (SGLang demands the least free >= 0.9 x "
                          "each rank's free): stop the other tenants or choose GPUs with equal free memory",
    HEADS_NOT_DIVISIBLE: "choose a tensor_parallel_size that divides the model's attention heads "
                         "(and pipeline_parallel_size that suits its layers)",
    KV_CACHE_TOO_SMALL: "one max_model_len request does not fit in the KV pool: lower max_model_len, raise "
                        "memory_fraction, use kv_cache_dtype: fp8 or spread the model over more GPUs",
    INSUFFICIENT_FREE_MEMORY: "the GPU has less free memory than memory_fraction asks for: lower "
                              "memory_fraction or free the GPU",
    NO_KV_MEMORY: "the weights leave no memory for the KV cache: raise memory_fraction, use more GPUs "
                  "(TP/PP) or a quantized model",
    OOM: "out of GPU memory: use more GPUs (TP/PP), a quantized model, or a lower memory_fraction",
}




def _tail_text(lines: Sequence[str], n: int = TAIL_IN_MESSAGE) -> str:
    shown = [ln for ln in lines if ln.strip()][-n:]
    return "\n".join("    " + ln[:300] for ln in shown)


def judge(dep: Deployment, model: ModelSpec | None, result: LaunchResult, *, name: str,
          prediction_tokens: int | None = None) -> Finding:
    """The verdict on one launch: pure, so every branch is testable from a recorded result. ``name``:
    the engine's display name (``Engine.display``)."""
    log = result.log
    kv = log.kv_tokens
    length = (dep.max_model_len or log.max_concurrency_len
              or (model.max_position_embeddings if model is not None else None))
    concurrency: float | None = None
    if kv is not None and length:
        if log.max_concurrency is not None and log.max_concurrency_len == length:
            concurrency = log.max_concurrency
        else:
            concurrency = round(kv / length, 2)
    ratio = round(kv / prediction_tokens, 3) if kv is not None and prediction_tokens else None
    data = StartupFacts(
        kv_tokens=kv, kv_tokens_all=tuple(log.kv_tokens_all), max_concurrency=concurrency,
        max_model_len=length, seconds_to_kv=result.seconds_to_kv, seconds_total=result.seconds_total,
        error_kind=log.error_kind, error_numbers=dict(log.error_numbers), predicted_kv_tokens=prediction_tokens,
        ratio=ratio, log_path=str(result.log_path) if result.log_path else None,
        stopped_by=result.stopped_by, returncode=result.returncode,
        leftover_pids=tuple(result.leftover_pids), command=tuple(result.argv),
        stop=result.stop, escalated=result.escalated, stop_note=result.stop_note,
        cleaned=tuple(result.cleaned), containment=result.containment, lock_wait_s=result.lock_wait_s,
    )
    where = f" Log: {result.log_path}." if result.log_path else ""
    tail = _tail_text(result.tail)
    waited = (f" It waited {result.lock_wait_s:.0f} s for its GPUs (held by another launch) before it "
              f"started; that time was not its own." if result.lock_wait_s >= 1 else "")
    killed = ""
    if result.escalated:  # the stop it was asked for did not end it: say so, whatever the verdict
        killed = f" Its stop needed SIGKILL: {result.stop_note or 'it did not stop within its grace'}."
    leftover = ""
    if result.leftover_pids:
        leftover = (f" Engine processes {', '.join(map(str, result.leftover_pids))} survived SIGKILL and are "
                    f"still running: kill them before the next launch.")

    if kv is None or result.stopped_by == "error":
        if log.error_kind is not None:
            fix = _FIXES.get(log.error_kind, "see the engine's log")
            msg = (f"{dep.name}: {name} failed to start {dep.layout} ({log.error_kind}): {log.error_line}. "
                   f"Fix: {fix}.{where}{leftover}")
        elif result.stopped_by == "timeout":
            msg = (f"{dep.name}: {name} did not report its KV pool within {dep.launch.timeout_s:.0f} s "
                   f"(launch.timeout_s); raise the timeout if the model is large, else see the log."
                   f"{where}{leftover}")
        elif result.stopped_by == "watchdog":
            code = result.watchdog_returncode
            how = (f"by {signal.Signals(-code).name}" if code is not None and code < 0
                   and -code in signal.valid_signals() else f"with code {code}")
            msg = (f"{dep.name}: the launch's watchdog was killed from outside ({how}) before {name} reported "
                   f"its KV pool; the launcher stopped {name}'s process tree itself. Nothing is known of "
                   f"{name}'s own fate: run the check again.{where}{leftover}")
        elif result.stopped_by == "interrupt":
            msg = (f"{dep.name}: the launch was interrupted before {name} reported its KV pool.{where}{leftover}")
        else:
            msg = (f"{dep.name}: {name} exited with code {result.returncode} before reporting its KV pool, "
                   f"and its log names no known cause.{where}{leftover}")
        msg += killed + waited
        if tail:
            msg += f"\n  last lines:\n{tail}"
        return failed(CHECK, msg, data)

    pool = f"{kv:,} tokens"
    if len(log.kv_tokens_all) > 1 and len(set(log.kv_tokens_all)) > 1:
        pool += f" (smallest of {', '.join(f'{t:,}' for t in log.kv_tokens_all)})"
    conc_text = ""
    if concurrency is not None and length:
        conc_text = f"{concurrency:.2f} requests of {length:,} tokens"
    pred = ""
    if prediction_tokens:
        pred = f"; predicted {prediction_tokens:,} (actual/predicted {ratio:.2f})"
        if ratio is not None and not PREDICTION_BAND[0] <= ratio <= PREDICTION_BAND[1]:
            pred += (" -- far off: the machine the static checks read is not the one the engine ran on "
                     "(a snapshot or preset?), or the flags differ (memory_fraction, --enforce-eager, "
                     "launch.env such as VLLM_CPU_KVCACHE_SPACE); the real pool is the one to trust")
    said = f"{dep.name}: {name} started {dep.layout} with a KV pool of {pool}"
    said += f" = {conc_text}" if conc_text else ""
    said += f" after {result.seconds_to_kv:.0f} s" if result.seconds_to_kv is not None else ""
    said += pred
    if result.lock_wait_s >= 1:
        said += f" (it waited {result.lock_wait_s:.0f} s for its GPUs first)"

    problems: list[str] = []
    if length and kv < length:
        problems.append(f"not even one request of max_model_len {length:,} fits ({kv:,} tokens): lower "
                        f"max_model_len or raise memory_fraction")
    if dep.require.kv_tokens is not None and kv < dep.require.kv_tokens:
        short = dep.require.kv_tokens - kv
        problems.append(f"below require.kv_tokens {dep.require.kv_tokens:,} by {short:,} tokens: raise "
                        f"memory_fraction, use kv_cache_dtype: fp8 or more GPUs")
    if dep.require.concurrency is not None:
        if concurrency is None:
            problems.append("require.concurrency cannot be judged: neither max_model_len nor the log gives "
                            "the request length")
        elif concurrency < dep.require.concurrency:
            problems.append(f"{concurrency:.2f} full-length requests is below require.concurrency "
                            f"{dep.require.concurrency}")
    if result.leftover_pids:
        problems.append(leftover.strip())
    if problems:
        return failed(CHECK, f"{said}; " + "; ".join(problems) + f".{killed}{where}", data)
    if result.escalated:  # the pool is right, but the engine did not stop the way it was asked to
        cleaned = (f" Cleaned up after it: {', '.join(result.cleaned)}." if result.cleaned else "")
        return warned(CHECK, f"{said}, but {result.stop_note or 'its stop needed SIGKILL'}.{cleaned}{where}",
                      data)
    if log.error_kind is not None:
        fix = _FIXES.get(log.error_kind, "see the engine's log")
        return warned(CHECK, f"{said}, but it warned ({log.error_kind}): {log.error_line}. {fix}.{where}",
                      data)
    return passed(CHECK, f"{said}.{where}", data)
