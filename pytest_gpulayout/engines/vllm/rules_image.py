"""vLLM's refusals that read whether a package is importable in the engine's environment, by release.

Whether the package is there is ``engines/packages.py``'s answer (the nodes' probed packages where the engine runs
in the probed environment, else the release's wheel requirements); INSTALLED: not refused, ABSENT: refused in the
release's words, UNKNOWN: left not judged, with a note naming the package and how the deployment says it.

- ``--otlp-traces-endpoint`` without OpenTelemetry (``ObservabilityConfig``: ``is_otel_available()``,
  config.py:2832 in 0.8.0 ... config/observability.py:90 in 0.11.0; the field validator
  ``_validate_otlp_traces_endpoint`` from 0.11.1, ``is_tracing_available()`` from 0.16, :160 in 0.33.0). The
  wheel requires ``opentelemetry-sdk`` in 0.8.5-0.10.x and from 0.17 (METADATA), so those releases never refuse;
  the others read the environment.
- ``VLLM_ATTENTION_BACKEND=FLASHINFER`` without the ``flashinfer`` module (``ModelConfig``: ``find_spec(
  'flashinfer') is None``, config.py:309 in 0.8.0 ... config/model.py:476 in 0.12.0). No release of that span
  requires ``flashinfer-python`` outside an extra.
- a world larger than the GPUs the node shows the process, with no ``--distributed-executor-backend``, where Ray
  cannot be imported (``ParallelConfig.__post_init__``, config.py:1500 in 0.8.0 ... config/parallel.py:459 in
  0.11.0: ``cuda_device_count_stateless() < self.world_size`` and ``not ray_found``). The wheel requires
  ``ray[cgraph]`` in all those releases, so it never refuses but where the probed environment lacks Ray. The
  devices the process sees are the deployment's ``CUDA_VISIBLE_DEVICES`` (``Layout.devices``); where it does not
  say them the entry is not judged. ``self.world_size`` there is PP x TP (config.py:1470 in 0.8.0).
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_gpulayout.engines.areas import Ask, combine
from pytest_gpulayout.engines.packages import Found, Presence, in_environment
from pytest_gpulayout.refusals import Judged

OTEL = "vllm.image.otel"
FLASHINFER_BACKEND = "vllm.image.flashinfer_backend"
RAY = "vllm.image.ray"

RULES: Mapping[str, str] = {
    OTEL: "--otlp-traces-endpoint where OpenTelemetry is not installed in the engine's environment "
          "(ObservabilityConfig, 0.8+)",
    FLASHINFER_BACKEND: "VLLM_ATTENTION_BACKEND=FLASHINFER where FlashInfer is not installed in the engine's "
                        "environment (ModelConfig, 0.8-0.12)",
    RAY: "a world larger than the node's visible GPUs with no --distributed-executor-backend where Ray is not "
         "installed in the engine's environment (ParallelConfig, 0.8-0.11.0)",
}

#: the distribution each rule reads (``is_otel_available`` imports opentelemetry's sdk and exporter)
_PACKAGE = {OTEL: "opentelemetry-sdk", FLASHINFER_BACKEND: "flashinfer-python", RAY: "ray"}


def found(ask: Ask, rule: str) -> Found:
    """Whether the package ``rule`` reads is in the engine's environment."""
    return in_environment("vllm", ask.listed, _PACKAGE[rule], ask.serving, ask.packages)


def _in_force(ask: Ask, rule: str) -> bool:
    """Whether ``rule`` is in force for the line and the release holds its entries."""
    return bool(ask.among([rule])) and ask.book.in_force(rule, ask.version)


def _unknown(rule: str, what: Found) -> str:
    return f"{RULES[rule]}: not judged, {what.where}"


def _otel(ask: Ask) -> Judged:
    endpoint = ask.args.get("otlp_traces_endpoint")
    if endpoint is None or not _in_force(ask, OTEL):
        return Judged()
    what = found(ask, OTEL)
    if what.presence is Presence.UNKNOWN:
        return Judged((), (_unknown(OTEL, what),))
    there = what.presence is Presence.INSTALLED
    return ask.judge({"is_otel_available": there, "is_tracing_available": there, "value": endpoint,
                      "self.otlp_traces_endpoint": endpoint,
                      "otel_import_error_traceback": f"({what.where})"}, [OTEL])  # fmt: skip


def _flashinfer(ask: Ask) -> Judged:
    backend = ask.env.get("VLLM_ATTENTION_BACKEND")
    if backend != "FLASHINFER" or not _in_force(ask, FLASHINFER_BACKEND):
        return Judged()
    what = found(ask, FLASHINFER_BACKEND)
    if what.presence is Presence.UNKNOWN:
        return Judged((), (_unknown(FLASHINFER_BACKEND, what),))
    spec = "flashinfer" if what.presence is Presence.INSTALLED else None
    walrus = "backend := envs.VLLM_ATTENTION_BACKEND"
    return ask.judge({f"({walrus})": backend, walrus: backend, "backend": backend,
                      "envs.VLLM_ATTENTION_BACKEND": backend, "find_spec": spec}, [FLASHINFER_BACKEND])


def _ray(ask: Ask) -> Judged:
    world = ask.layout.tensor_parallel_size * ask.layout.pipeline_parallel_size
    backend = ask.args.get("distributed_executor_backend")
    if backend is not None or world <= 1 or not _in_force(ask, RAY):
        return Judged()
    devices = ask.layout.devices
    if devices is not None and devices >= world:
        return Judged()
    what = found(ask, RAY)
    if what.presence is Presence.INSTALLED:
        return Judged()
    if devices is None:
        return Judged((), (f"{RULES[RAY]}: not judged, the GPUs the engine's process sees (CUDA_VISIBLE_DEVICES) "
                           f"are not said by the deployment",))
    if what.presence is Presence.UNKNOWN:
        return Judged((), (_unknown(RAY, what),))
    return ask.judge({"self.distributed_executor_backend": None, "self.world_size": world, "is_neuron": False,
                      "is_tpu": False, "envs.VLLM_XLA_USE_SPMD": False, "is_cuda": True,
                      "cuda_device_count_stateless": devices, "ray_found": False,
                      "ray_utils.ray_import_err": f"No module named 'ray' ({what.where})"}, [RAY])  # fmt: skip


def judge(ask: Ask) -> Judged:
    """The package refusals in force for the line, each in its own frame."""
    return combine((_otel(ask), _flashinfer(ask), _ray(ask)))
