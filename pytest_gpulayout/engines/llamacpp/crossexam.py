"""The startup check's cross-examination of ``llama-server``: what its log says it ran with, held to the
deployment (the shared keys, such as the release, go through ``launch.verdict.cross_examine``).

What llama.cpp b11434 prints, and what each line is held to (only settings the deployment makes; what it
leaves to llama.cpp, and what the log does not say, are not held against it):

- ``src/llama-context.cpp`` (``llama_context::llama_context``): ``n_seq_max``, ``n_ctx``, ``n_ctx_seq``
  (``n_ctx_per_seq`` in 2025), ``kv_unified``. ``ctx_size`` is the total ``--ctx-size``, split over the
  ``--parallel`` slots unless the cache is unified (``memory.split_context``): with ``ctx_size`` set,
  ``n_ctx`` and ``n_ctx_seq`` must be what that split gives (``--fit`` only picks a context when none is
  given, ``common/fit.cpp``), and with ``parallel`` set ``n_seq_max`` (and the server's ``n_slots``,
  ``tools/server/server-context.cpp``) must be it.
- ``src/llama-model.cpp`` (``load_tensors``): "offloaded N/M layers to GPU", M = ``n_layer + 1``. An
  ``n_gpu_layers`` the deployment sets (a number or ``all``) must be what was offloaded (``--fit`` leaves
  a number the user set alone, ``common/fit.cpp``); ``auto`` is ``--fit``'s choice, judged by the KV
  buffers instead.
- ``src/llama.cpp`` (``llama_prepare_model_devices``): a "using device" line per device the model uses,
  only ``main_gpu``'s with split mode ``none``, and a Meta device over the GPUs with split mode
  ``tensor``; a row split keeps its weights in a ``*_Split`` buffer (``src/llama-model.cpp``).
"""

from __future__ import annotations

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engines.llamacpp.flags import LlamaCppFlags
from pytest_gpulayout.engines.llamacpp.log import LlamaCppLog
from pytest_gpulayout.engines.llamacpp.memory import split_context
from pytest_gpulayout.launch.verdict import cross_examine


def _context(dep: Deployment, flags: LlamaCppFlags, log: LlamaCppLog) -> list[str]:
    if flags.ctx_size is None:
        return []
    unified = flags.kv_unified
    n_ctx, n_ctx_seq = split_context(flags.ctx_size, flags.slots, unified=unified)
    how = (f"ctx_size {flags.ctx_size} " + ("in one unified KV cache" if unified
                                            else f"over parallel {flags.slots} slots"))
    ran_unified = (f" (kv_unified {'true' if log.kv_unified else 'false'})"
                   if log.kv_unified is not None and log.kv_unified != unified else "")
    if log.n_ctx_seq is not None and log.n_ctx_seq != n_ctx_seq:
        return [f"it ran n_ctx {log.n_ctx_seq} per slot (n_ctx_seq){ran_unified} where the deployment's {how} "
                f"gives {n_ctx_seq}"]
    if log.n_ctx is not None and log.n_ctx != n_ctx:
        return [f"it ran n_ctx {log.n_ctx} in all{ran_unified} where the deployment's {how} gives {n_ctx}"]
    return []


def _slots(flags: LlamaCppFlags, log: LlamaCppLog) -> list[str]:
    if flags.parallel is None:
        return []
    for what, ran in (("n_seq_max", log.n_seq_max), ("n_slots", log.n_slots)):
        if ran is not None and ran != flags.parallel:
            return [f"it ran {ran} slots ({what}) where the deployment sets parallel {flags.parallel}"]
    return []


def _offload(flags: LlamaCppFlags, log: LlamaCppLog) -> list[str]:
    if log.offloaded is None or flags.n_gpu_layers is None or flags.n_gpu_layers == "auto":
        return []
    done, layers = log.offloaded
    if flags.n_gpu_layers == "all":
        want, asked = layers, "all (n_gpu_layers all)"
    else:
        want, asked = min(int(flags.n_gpu_layers), layers), f"{flags.n_gpu_layers} (n_gpu_layers)"
    if done == want:
        return []
    return [f"it offloaded {done}/{layers} layers to the GPU where the deployment asks for {asked}"]


def _devices(dep: Deployment, flags: LlamaCppFlags, log: LlamaCppLog) -> list[str]:
    ran = log.split_mode
    if ran is not None and ran != flags.mode:
        return [f"it ran split mode {ran} where the deployment sets split_mode {flags.mode}"]
    if flags.mode == "tensor":
        if log.devices and log.meta_devices is None:
            return [f"it used {', '.join(log.devices)} without a Meta device where the deployment sets "
                    f"split_mode tensor"]
        if log.meta_devices is not None and dep.gpus is not None and log.meta_devices != len(dep.gpus):
            return [f"it split the tensors over {log.meta_devices} devices where the deployment's gpus lists "
                    f"{len(dep.gpus)}"]
        return []
    if not log.devices:
        return []
    used = f"{len(log.devices)} device(s) ({', '.join(log.devices)})"
    if flags.mode == "none":
        if len(log.devices) != 1:
            return [f"it used {used} where split_mode none keeps main_gpu only"]
        return []
    if dep.gpus is not None:
        want = len(dep.gpus) + len(flags.rpc)
        if len(log.devices) != want:
            rpc = f" and {len(flags.rpc)} rpc server(s)" if flags.rpc else ""
            return [f"it used {used} where the deployment's gpus lists {len(dep.gpus)}{rpc} "
                    f"(split_mode {flags.mode})"]
    return []


def contradictions(dep: Deployment, log: LlamaCppLog) -> list[str]:
    """Where ``log`` (what llama-server said it ran with) contradicts ``dep``, one clause each: its build
    against ``engine_version``, its context per slot and in all against ``ctx_size`` / ``parallel``, its
    slots, its offloaded layers against ``n_gpu_layers``, its split mode and devices against ``split_mode``
    and ``gpus``."""
    flags = dep.llamacpp if isinstance(dep.llamacpp, LlamaCppFlags) else LlamaCppFlags()
    shared = cross_examine(dep, {k: v for k, v in log.config.items() if k == "version"})
    return [*shared, *_context(dep, flags, log), *_slots(flags, log), *_offload(flags, log),
            *_devices(dep, flags, log)]
