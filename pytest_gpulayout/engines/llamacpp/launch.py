"""The ``startup`` check for ``engine: llamacpp``: launch ``llama-server`` briefly, read its KV lines, stop it.

Same promises as for vLLM (``launch/launcher.py`` starts and stops it: an argument vector, its own
process group, the whole tree stopped, nothing left). The server listens on 127.0.0.1 on a free port.
It is stopped as soon as its KV cache and compute buffers are logged (``LlamaCppLogWatcher``), before
the HTTP server is even up.

The verdict compares the KV bytes llama.cpp allocated, per buffer (``CUDA0``, ``CPU`` ...), with the
prediction of ``memory/llamacpp.py``: the KV arithmetic is exact (rows x cells x streams), so they
must agree to the MiB llama.cpp prints (two decimals); a difference fails with both numbers.
Before that, what the log says llama-server ran with (its build, context per slot and in all, slots,
offloaded layers, split mode and devices) is held to the deployment (``crossexam.contradictions``): a
contradiction fails, whatever the KV buffers say, since the launch did not run what the checks judged.

``llama-server`` prints its KV lines at log verbosity 4 in b11434 (``-lv``; ``common/log.h``): the
launch adds ``--verbosity 4`` unless ``launch.args`` chooses a verbosity.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.llamacpp.checks import layout_for
from pytest_gpulayout.engines.llamacpp.crossexam import contradictions
from pytest_gpulayout.engines.llamacpp.flags import NAME, LlamaCppFlags, parse_version_output, server_argv
from pytest_gpulayout.engines.llamacpp.log import LlamaCppLog, StartupLogWatcher
from pytest_gpulayout.errors import LaunchError
from pytest_gpulayout.findings import Finding, RawFacts, Status
from pytest_gpulayout.launch.argv import gpu_plan, visible_lock_keys
from pytest_gpulayout.launch.launcher import LaunchResult, free_port, launch
from pytest_gpulayout.launch.progress import Progress
from pytest_gpulayout.machine.facts import MIB, Machine
from pytest_gpulayout.model.gguf import GgufSpec
from pytest_gpulayout.model.spec import ModelSpec

CHECK = "startup"
_VERBOSITY_FLAGS = ("-v", "--verbose", "--log-verbose", "-lv", "--verbosity", "--log-verbosity")


def default_command() -> list[str]:
    """``llama-server`` from PATH (``launch.command`` names another)."""
    return [shutil.which("llama-server") or "llama-server"]


def server_version(command: Sequence[str], timeout_s: float = 20.0) -> str | None:
    """``b11434`` from ``llama-server --version``; None when it cannot say. Read at the edge, never in a rule."""
    try:
        out = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=timeout_s,
                             stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version_output(out.stdout + out.stderr)


def llamacpp_argv(dep: Deployment, port: int) -> list[str]:
    flags = dep.llamacpp or LlamaCppFlags()
    cmd = list(dep.launch.command) if dep.launch.command else default_command()
    extra = list(dep.launch.args)
    if not any(a.split("=", 1)[0] in _VERBOSITY_FLAGS for a in extra):
        extra = ["--verbosity", "4", *extra]
    model = Path(dep.model)
    if not model.is_absolute():
        model = dep.base_dir / model
    return server_argv(cmd, flags, str(model), host="127.0.0.1", port=port, extra=extra)


def predicted_kv_buffers(dep: Deployment, machine: Machine | None, model: ModelSpec) -> dict[str, int] | None:
    """KV bytes per llama.cpp buffer name (``CUDA<i>`` for the i-th GPU of the deployment, ``CPU``)."""
    if not isinstance(model, GgufSpec):
        return None
    m = machine if machine is not None else Machine(gpus=(), source="none")
    try:
        lay = layout_for(dep, m, model)
    except ValueError:
        return None
    out: dict[str, int] = {}
    for d in lay.devices:
        if d.kv:
            out[f"CUDA{d.device}"] = d.kv
    if lay.cpu.kv:
        out["CPU"] = lay.cpu.kv
    return out


def judge_llamacpp(dep: Deployment, log: LlamaCppLog, predicted: dict[str, int] | None, *, stopped_by: str,
                   returncode: int | None, leftover: Sequence[int], log_path: Path | None,
                   seconds_to_kv: float | None, argv: Sequence[str], tail: Sequence[str]) -> Finding:
    """Pure: the verdict on one llama.cpp launch, from its parsed log and the prediction."""
    sl = log.to_startup_log()
    where = f" Log: {log_path}." if log_path else ""
    logged = {k: v for k, v in log.kv_buffers_mib.items()}
    pred_mib = {k: round(v / MIB, 2) for k, v in (predicted or {}).items()}
    data: dict[str, Any] = {
        "kv_tokens": sl.kv_tokens, "max_concurrency": sl.max_concurrency, "seconds_to_kv": seconds_to_kv,
        "error_kind": sl.error_kind, "error_numbers": dict(sl.error_numbers), "kv_mib": log.kv_mib,
        "kv_buffers_mib": logged, "predicted_kv_buffers_mib": pred_mib or None,
        "predicted_kv_bytes": sum(predicted.values()) if predicted else None,
        "cells": log.kv[0].cells if log.kv else None, "stopped_by": stopped_by, "returncode": returncode,
        "leftover_pids": list(leftover), "log_path": str(log_path) if log_path else None, "command": list(argv),
        "llamacpp": log.to_json(), "engine_config": dict(sl.config),
    }
    disagree = contradictions(dep, log)
    data["contradictions"] = disagree
    differs = (f" {NAME}'s own config disagrees with the deployment: {'; '.join(disagree)}: the launch did not "
               f"run the layout the checks judged (launch.args or launch.command override it?)." if disagree else "")
    left = (f" Processes {', '.join(map(str, leftover))} survived SIGKILL: kill them." if leftover else "")
    exited = stopped_by == "exit"
    if log.kv_mib is None or stopped_by == "error" or exited:
        if sl.error_kind:
            why = f"failed ({sl.error_kind}): {sl.error_line}"
        elif exited and log.kv_mib is not None:  # it died after its KV lines, before it was stopped
            why = (f"exited with code {returncode} after it reported its KV cache ({log.kv_mib:,.2f} MiB), before "
                   f"the launch stopped it: it failed to start (a server that ends by itself serves nothing)")
        else:
            why = "did not report its KV cache" + (f" (exit code {returncode})" if exited else
                                                   f" within {dep.launch.timeout_s:.0f} s"
                                                   if stopped_by == "timeout" else "")
        shown = "\n".join("    " + ln[:300] for ln in [t for t in tail if t.strip()][-12:])
        return Finding(CHECK, Status.FAIL, f"{NAME} {why}.{differs}{where}{left}"
                       + (f"\n  last lines:\n{shown}" if shown else ""), RawFacts(data))
    cache = log.kv[0] if log.kv else None
    said = (f"{NAME} allocated {log.kv_mib:,.2f} MiB of KV cache ("
            + ", ".join(f"{k} {v:,.2f} MiB" for k, v in logged.items())
            + (f"; {cache.cells:,} cells x {cache.streams or 1} stream(s), {cache.layers} layers" if cache and
               cache.cells else "") + ")"
            + (f" after {seconds_to_kv:.1f} s" if seconds_to_kv is not None else ""))
    if leftover:
        return Finding(CHECK, Status.FAIL, said + "." + differs + left + where, RawFacts(data))
    if pred_mib:
        total_pred = round(sum((predicted or {}).values()) / MIB, 2)
        same = all(abs(logged.get(k, 0.0) - v) < 0.005 for k, v in pred_mib.items()) and \
            abs((log.kv_mib or 0) - total_pred) < 0.005
        data["kv_matches_prediction"] = same
        if not same:
            return Finding(CHECK, Status.FAIL, f"{said}, but the prediction was "
                           + ", ".join(f"{k} {v:,.2f} MiB" for k, v in pred_mib.items())
                           + f": the checks judged another layout than the one that ran.{differs}{where}",
                           RawFacts(data))
        said += "; equal to the prediction"
    if disagree:
        return Finding(CHECK, Status.FAIL, said + "." + differs + where, RawFacts(data))
    return Finding(CHECK, Status.PASS, said + "." + where, RawFacts(data))


def launch_llamacpp(dep: Deployment, model: ModelSpec | None, *, machine: Machine | None, log_path: Path,
                    timeout_s: float | None = None, grace_s: float = 5.0,
                    progress: Progress | None = None) -> tuple[Finding, LaunchResult | None]:
    """Launch, judge, and hand back ``(finding, LaunchResult | None)``. Never raises for engine trouble."""
    cmd = list(dep.launch.command) if dep.launch.command else default_command()
    try:
        parent = os.environ.get("CUDA_VISIBLE_DEVICES")
        plan = gpu_plan(dep, machine, parent) if dep.gpus is not None else None
        # without gpus it takes every GPU it sees: each is locked (the host, when none is known)
        keys = plan.lock_keys if plan is not None else visible_lock_keys(machine, parent)
        argv = llamacpp_argv(dep, free_port())
        env = dict(os.environ)
        if plan is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(plan.visible)
        env.update(dep.launch.env)
        watcher = StartupLogWatcher()
        result = launch(argv, env=env, timeout_s=timeout_s or dep.launch.timeout_s,
                        log_path=log_path, grace_s=grace_s, gpus=keys, watcher=watcher,
                        progress=progress)
    except LaunchError as err:
        msg = f"cannot launch {NAME}: {err}"
        if "was not found" in str(err) or "not executable" in str(err):  # the hint only where it is the fix
            msg += (". Install llama-server where the check runs (PATH), or set launch.command to its path, "
                    "e.g. [/opt/llama.cpp/build/bin/llama-server]")
        return Finding(CHECK, Status.FAIL, msg, RawFacts({"kv_tokens": None, "max_concurrency": None,
                                                          "seconds_to_kv": None, "error_kind": None,
                                                          "command": cmd})), None
    log = watcher.llamacpp_result()
    predicted = predicted_kv_buffers(dep, machine, model) if model is not None else None
    finding = judge_llamacpp(dep, log, predicted, stopped_by=result.stopped_by, returncode=result.returncode,
                             leftover=result.leftover_pids, log_path=result.log_path,
                             seconds_to_kv=result.seconds_to_kv, argv=result.argv, tail=result.tail)
    return finding, result
