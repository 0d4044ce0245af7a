"""The ``startup`` verdict on one launch: the real pool against ``require`` and the prediction, the
engine's own error line and its fix, and how the launch stopped. Pure: every branch is testable
from a recorded result."""

from __future__ import annotations

import itertools
import signal
from collections.abc import Mapping, Sequence

from packaging.version import InvalidVersion, Version

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
    StartupLog,
)
from pytest_gpulayout.launch.stops import StopReason
from pytest_gpulayout.machine.facts import GIB
from pytest_gpulayout.memory.pool import PoolPrediction
from pytest_gpulayout.model.spec import ModelSpec

CHECK = "startup"
#: How an engine is asked to stop when the caller has no engine object to ask (``Engine.stop_signal``
#: is each engine's own): Ctrl-C, as in the terminal it was started from.
STOP_SIGNAL = signal.SIGINT
TAIL_IN_MESSAGE = 12
#: a real pool further than this from the prediction warns, naming both figures and the term most
#: likely off (the real pool still decides pass or fail against ``require``)
PREDICTION_TOLERANCE = 0.10
#: an engine's available-KV figure that gives tokens this far from its own count: the bytes per token differ
BYTES_PER_TOKEN_TOLERANCE = 0.05
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




def log_cut(result: LaunchResult) -> str | None:
    """Why the saved log stops short, in words: a write that failed (a full disk), or its size cap; None when
    it holds everything the engine printed. The launch read every line as it streamed either way."""
    if not result.log_truncated or result.log_path is None:
        return None
    held = f"{result.log_lines:,} of the {result.lines:,} lines the engine printed"
    if result.log_error:
        return (f"its log is cut short: writing it failed after {result.log_bytes:,} bytes ({result.log_error}), so "
                f"it holds only the first {held}; what the verdict read after that is not in it")
    return f"its log stops at its size cap ({result.log_bytes:,} bytes, the first {held}): the rest was read, not kept"


def _ended(returncode: int | None) -> str:
    """How the engine's main process ended by itself: ``exited with code 3``, ``was killed by SIGSEGV``."""
    if returncode is not None and returncode < 0:
        return f"was killed by {_signame(-returncode)}"
    return f"exited with code {returncode}"


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _tail_text(lines: Sequence[str], n: int = TAIL_IN_MESSAGE) -> str:
    shown = [ln for ln in lines if ln.strip()][-n:]
    return "\n".join("    " + ln[:300] for ln in shown)


def _release(text: str) -> tuple[int, ...] | None:
    try:
        return Version(text.strip().lstrip("vb")).release
    except InvalidVersion:
        return None


def cross_examine(dep: Deployment, said: Mapping[str, str], *, engine_version: str | None = None) -> list[str]:
    """Where the engine's own account of its configuration (``StartupLog.config``) contradicts the
    deployment: another TP / PP size, another context length, memory fraction or KV dtype than the
    deployment sets, another release than ``engine_version`` pins. Settings the deployment leaves to
    the engine are not held against it; nor is what the log does not say. ``engine_version``: the pinned
    release (default: the deployment's)."""
    out: list[str] = []

    def number(key: str) -> float | None:
        try:
            return float(said[key]) if key in said else None
        except ValueError:
            return None

    for key, ours, label in (("tensor_parallel_size", dep.tp, "tensor_parallel_size"),
                             ("pipeline_parallel_size", dep.pp, "pipeline_parallel_size"),
                             ("max_model_len", dep.max_model_len, "max_model_len")):
        theirs = number(key)
        if ours is not None and theirs is not None and int(theirs) != int(ours):
            out.append(f"it ran {key}={int(theirs)} where the deployment sets {label} {ours}")
    theirs = number("memory_fraction")
    if dep.memory_fraction is not None and theirs is not None and abs(theirs - dep.memory_fraction) > 1e-6:
        out.append(f"it ran with a memory fraction of {theirs:g} where the deployment sets memory_fraction "
                   f"{dep.memory_fraction:g}")
    dtype = said.get("kv_cache_dtype")
    if dtype is not None and (dep.kv_cache_dtype or "auto") != "auto" and dtype != dep.kv_cache_dtype:
        out.append(f"it ran kv_cache_dtype={dtype} where the deployment sets kv_cache_dtype {dep.kv_cache_dtype}")
    version = said.get("version")
    engine_version = engine_version or dep.engine_version
    if engine_version and version:
        pinned, ran = _release(engine_version), _release(version)
        if pinned is not None and ran is not None and ran[:len(pinned)] != pinned:
            out.append(f"it is release {version} where the deployment pins engine_version {engine_version} "
                       f"(the checks judged {engine_version}'s defaults and rules)")
    return out


def term_off(log: StartupLog, prediction: PoolPrediction, kv: int) -> str:
    """The term of ``prediction`` most likely wrong when the real pool is ``kv`` tokens, from what the
    engine's log says: the memory fraction it ran with, its KV figure over its token count (the bytes per
    token), the weights it loaded; what is left over is the reserve besides the weights."""
    p = prediction
    fraction = log.config.get("memory_fraction")
    try:
        ran_fraction = float(fraction) if fraction is not None else None
    except ValueError:
        ran_fraction = None
    if ran_fraction is not None and abs(ran_fraction - p.memory_fraction) > 1e-6:
        return (f"the memory fraction: the engine ran with {ran_fraction:g}, the prediction used "
                f"{p.memory_fraction:g} ({p.fraction_source})")
    bpt = p.kv_bytes_per_token_per_rank
    if log.available_kv_gib is not None and log.available_kv_gib > 0 and bpt and kv:
        implied = log.available_kv_gib * GIB / bpt
        if abs(implied / kv - 1) > BYTES_PER_TOKEN_TOLERANCE:
            return (f"the KV bytes per token: the engine's {log.available_kv_gib:.2f} GiB of KV holds {kv:,} "
                    f"tokens ({log.available_kv_gib * GIB / kv:,.0f} B per token per rank), the prediction "
                    f"counts {bpt:,} B (kv_cache_dtype {p.kv_cache_dtype}, block {p.block_size})")
    if log.available_kv_gib is not None:
        gap = log.available_kv_gib * GIB - p.kv_budget_bytes_per_rank
    else:
        gap = (kv - p.kv_tokens) * bpt
    if log.weights_gib is not None:
        weights_gap = (p.weights_gib_per_rank - log.weights_gib) * GIB  # > 0: the prediction charged more
        if weights_gap * gap > 0 and abs(weights_gap) >= abs(gap) / 2:
            return (f"the weights: the engine loaded {log.weights_gib:.2f} GiB per rank, the prediction "
                    f"charged {p.weights_gib_per_rank:.2f} GiB")
    return (f"the reserve besides the weights: {p.activation_reserve_gib:.2f} GiB per rank predicted "
            f"({p.activation_reserve_why or 'activation peak'}; communicators and CUDA graphs are in it), and "
            f"the KV budget came out {gap / GIB:+.2f} GiB per rank against the prediction's "
            f"{p.kv_budget_bytes_per_rank / GIB:.2f} GiB")


def judge(dep: Deployment, model: ModelSpec | None, result: LaunchResult, *, name: str,
          prediction_tokens: int | None = None, prediction: PoolPrediction | None = None,
          engine_version: str | None = None) -> Finding:
    """The verdict on one launch: pure, so every branch is testable from a recorded result. ``name``:
    the engine's display name (``Engine.display``). ``prediction``: the prediction's components (its
    ``kv_tokens`` stands in for ``prediction_tokens``), to name the term off when the pool is not
    within ``PREDICTION_TOLERANCE``. ``engine_version``: the release the deployment pins, held against
    the one the log says ran (``cross_examine``)."""
    log = result.log
    if prediction is not None and prediction_tokens is None:
        prediction_tokens = prediction.kv_tokens
    contradictions = cross_examine(dep, log.config, engine_version=engine_version or dep.engine_version)
    disagree = ""
    if contradictions:
        disagree = (f" The engine's own config disagrees with the deployment: {'; '.join(contradictions)}: the "
                    f"launch did not run the layout the checks judged (launch.args or launch.command override it?).")
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
        ratio=ratio, engine_config=dict(log.config), contradictions=tuple(contradictions),
        log_path=str(result.log_path) if result.log_path else None,
        stopped_by=str(result.stopped_by), returncode=result.returncode,
        leftover_pids=tuple(result.leftover_pids), command=tuple(result.argv),
        stop=result.stop, escalated=result.escalated, stop_note=result.stop_note,
        cleaned=tuple(result.cleaned), containment=result.containment, lock_wait_s=result.lock_wait_s,
        log_cut=log_cut(result),
    )
    plain = where = f" Log: {result.log_path}." if result.log_path else ""
    cut = log_cut(result)
    if cut is not None:  # a failure's evidence is its log: say where it stops
        where = f" Log: {result.log_path} ({cut})."
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

    provisional = ""
    if kv is not None and log.kv_provisional and result.stopped_by is not StopReason.READY:
        provisional = (f" It had printed only the pool it profiles with ({kv:,} tokens), not the one it serves "
                       f"from.")
        kv = None
    exited = result.stopped_by is StopReason.EXIT
    if kv is None or result.stopped_by is StopReason.ERROR or exited:
        if log.error_kind is not None:
            fix = _FIXES.get(log.error_kind, "see the engine's log")
            msg = (f"{name} failed to start {dep.layout} ({log.error_kind}): {log.error_line}. "
                   f"Fix: {fix}.{where}{leftover}")
        elif exited and kv is not None:
            msg = (f"{name} {_ended(result.returncode)} after it reported its KV pool ({kv:,} tokens), "
                   f"before the launch stopped it: it failed to start {dep.layout} (a server that ends by itself "
                   f"serves nothing; its log names no known cause).{where}{leftover}")
        elif result.stopped_by is StopReason.TIMEOUT:
            msg = (f"{name} did not report its KV pool within {dep.launch.timeout_s:.0f} s "
                   f"(launch.timeout_s).{provisional} Raise the timeout if the model is large, else see the log."
                   f"{where}{leftover}")
        elif result.stopped_by is StopReason.WATCHDOG:
            code = result.watchdog_returncode
            how = f"by {_signame(-code)}" if code is not None and code < 0 else f"with code {code}"
            msg = (f"the launch's watchdog was killed from outside ({how}) before {name} reported "
                   f"its KV pool; the launcher stopped {name}'s process tree itself. Nothing is known of "
                   f"{name}'s own fate: run the check again.{where}{leftover}")
        elif result.stopped_by is StopReason.INTERRUPT:
            msg = (f"the launch was interrupted before {name} reported its KV pool.{provisional}"
                   f"{where}{leftover}")
        else:
            msg = (f"{name} {_ended(result.returncode)} before reporting its KV pool, "
                   f"and its log names no known cause.{where}{leftover}")
        msg += disagree + killed + waited
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
    off = ""
    if prediction_tokens:
        pred = f"; predicted {prediction_tokens:,} (actual/predicted {ratio:.2f})"
        if ratio is not None and abs(ratio - 1) > PREDICTION_TOLERANCE and log.config.get("device") == "cpu":
            pred += (" -- the engine ran on the CPU (device cpu in its own config): its pool is not sized from "
                     "GPU memory (vLLM's is VLLM_CPU_KVCACHE_SPACE), so the GPU prediction is not held to it")
        elif ratio is not None and abs(ratio - 1) > PREDICTION_TOLERANCE:
            off = (f"the real pool of {kv:,} tokens is {100 * (kv / prediction_tokens - 1):+.1f} % off the "
                   f"predicted {prediction_tokens:,} (more than {PREDICTION_TOLERANCE:.0%})")
            if prediction is not None:
                off += f"; the term most likely off is {term_off(log, prediction, kv)}"
            else:
                off += ("; the prediction's terms were not given, so none is named: the machine the static "
                        "checks read may not be the one the engine ran on (a snapshot or preset?), or the "
                        "flags differ (memory_fraction, --enforce-eager, launch.env such as "
                        "VLLM_CPU_KVCACHE_SPACE)")
            off += ". The real pool is the one to trust"
    said = f"{name} started {dep.layout} with a KV pool of {pool}"
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
        return failed(CHECK, f"{said}; " + "; ".join(problems) + f".{disagree}{killed}{where}", data)
    if contradictions:
        return failed(CHECK, f"{said}.{disagree}{killed}{where}", data)
    warnings: list[str] = []
    if result.log_error:  # the verdict stands on lines its log does not show: the disk is full, say so
        warnings.append(f"{cut}: free space where the logs go, or name another folder (--log-dir).")
    if result.escalated:  # the pool is right, but the engine did not stop the way it was asked to
        cleaned = (f" Cleaned up after it: {', '.join(result.cleaned)}." if result.cleaned else "")
        warnings.append(f"{result.stop_note or 'its stop needed SIGKILL'}.{cleaned}")
    if log.error_kind is not None:
        fix = _FIXES.get(log.error_kind, "see the engine's log")
        warnings.append(f"it warned ({log.error_kind}): {log.error_line}. {fix}.")
    if off:
        warnings.append(f"{off}.")
    if warnings:
        return warned(CHECK, f"{said}, but " + " Also, ".join(w for w in warnings) + plain, data)
    return passed(CHECK, f"{said}.{plain}", data)
