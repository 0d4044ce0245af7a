"""How vLLM resolves ``--dtype`` for a model on a GPU, by release, from the facts ``tools/engine_facts.py``
extracted from each wheel (``releases/<version>.json``, group ``dtype``).

``_get_and_verify_dtype`` (``config/model.py``; ``config/__init__.py`` in 0.10.x, ``config.py`` before) reads
the checkpoint's dtype (``torch_dtype`` of the config, its text config, ...; float32 when none says) and
resolves ``--dtype auto`` in one of three ways (``dtype.auto`` in the facts):

- ``config`` (0.8.x): the checkpoint's dtype, a float32 one as float16. A bfloat16 model on a GPU below 8.0
  then reaches the worker's ``_check_if_gpu_supports_dtype`` (``v1/worker/gpu_worker.py``), which raises
  "Bfloat16 is only supported on GPUs with compute capability of at least 8.0 ...": the engine does not start.
- ``platform`` (0.9.0): a dtype the platform lacks (``CudaPlatformBase.supported_dtypes``: bfloat16 from 8.0)
  falls back to the platform's first supported one, float16 below 8.0, with a warning.
- ``model_type`` (0.9.1+, ``_resolve_auto_dtype``): the platform's dtypes less float16 for the model types of
  ``_FLOAT16_NOT_SUPPORTED_MODELS`` (Gemma 2/3, GLM-4, ...). On a GPU without bfloat16 such a model is left
  with float32 alone: ``auto`` serves it in float32 (twice the weight and KV bytes of bfloat16), and an explicit
  ``--dtype half`` is refused by ``_check_valid_dtype`` ("The model type 'gemma3' does not support float16.
  ..."; that refusal is a config-time one: ``config_checks.py``, rule ``vllm.dtype.float16_refused``).

The model type vLLM reads is the config's top-level one (``config.model_type``: ``gemma3`` for Gemma 3's
multimodal checkpoints, ``gemma3_text`` for its text-only ones).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from pytest_gpulayout.generation import ReleaseFacts, fill, release_facts
from pytest_gpulayout.machine.capability import Capability, format_capability
from pytest_gpulayout.model.spec import ModelSpec

#: ``_STR_DTYPE_TO_TORCH_DTYPE`` (``config/model.py``): the spellings of ``--dtype`` and the dtype each names
DTYPE_NAMES: Mapping[str, str] = {
    "half": "float16", "float16": "float16", "float": "float32", "float32": "float32", "bfloat16": "bfloat16",
    "bf16": "bfloat16", "fp16": "float16", "fp32": "float32",
}
#: bfloat16 needs compute capability 8.0 on CUDA (``platforms/cuda.py supported_dtypes``,
#: ``check_if_supports_dtype``): the fallback when a release's facts do not list the platform's dtypes
BF16_SINCE: Capability = (8, 0)


@dataclass(frozen=True)
class DtypeResolution:
    """What a release makes of ``--dtype`` for a model on a GPU.

    ``served``: the dtype the weights and activations are served in (None: not resolved, e.g. the GPU's
    capability is unknown; the checkpoint's dtype is then assumed). ``refusal``: the start-up refusal in the
    release's words (the worker's bfloat16 gate), ``warning``: the fallback the release logs, each with the
    file it is read from; ``release``: the release whose facts answered (``facts.cite`` in words)."""

    requested: str
    checkpoint: str
    served: str | None
    refusal: str | None = None
    warning: str | None = None
    cite: str = ""
    note: str | None = None

    @property
    def doubles_weights(self) -> bool:
        """float32 where the checkpoint is 16-bit: twice the weight bytes (and the KV bytes of ``auto``)."""
        return self.served == "float32" and self.checkpoint in ("bfloat16", "float16")


def checkpoint_dtype(model: ModelSpec) -> str:
    """The checkpoint's dtype as vLLM names it (``bfloat16``, ``float16``, ``float32``)."""
    return DTYPE_NAMES.get(model.dtype.lower(), model.dtype.lower())


def platform_dtypes(facts: ReleaseFacts | None, cc: Capability) -> tuple[str, ...]:
    """``CudaPlatformBase.supported_dtypes`` on a GPU of compute capability ``cc``, in the release's order (the
    first is the fallback), from the facts; from ``BF16_SINCE`` where the facts do not list it."""
    table: Mapping[str, Sequence[str]] = {}
    if facts is not None:
        table = facts.data.get("dtype", {}).get("cuda_supported_dtypes", {}).get("by_capability", {})
    listed = table.get(format_capability(cc))
    if listed:
        return tuple(listed)
    if cc >= BF16_SINCE:
        return ("bfloat16", "float16", "float32")
    return ("float16", "float32") if cc >= (6, 0) else ("float32",)


def float16_refusing_types(facts: ReleaseFacts | None) -> Mapping[str, str]:
    """``_FLOAT16_NOT_SUPPORTED_MODELS`` of the release: model type -> the reason it gives ({} before 0.9.1)."""
    if facts is None:
        return {}
    table = facts.data.get("dtype", {}).get("float16_not_supported") or {}
    return {str(k): str(v) for k, v in table.items()}


def _bf16_gate(facts: ReleaseFacts, gpu_name: str, cc: Capability) -> tuple[str, str]:
    gates: Sequence[Mapping[str, Any]] = facts.data.get("dtype", {}).get("bf16_gate", ())
    gate = next((g for g in gates if "v1/" in str(g["file"]) or "platforms/" in str(g["file"])),
                gates[0] if gates else None)
    template = str(gate["template"]) if gate else (
        "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your {gpu_name} GPU "
        "{compute_str}. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: "
        "--dtype=half.")
    where = f"{gate['file']} {gate['function']}" if gate else "vllm/platforms/cuda.py check_if_supports_dtype"
    text = fill(template, {"gpu_name": gpu_name, "compute_str": f"has compute capability {format_capability(cc)}"})
    return text, where


def _fallback_warning(facts: ReleaseFacts, gpu_name: str, cc: Capability, wanted: str, served: str) -> str:
    """The release's fallback warning with its ``%s`` filled (0.9.0: "Your %s device%s doesn't support %s.
    ..."; 0.9.1+: "Your device %s doesn't support %s. ...")."""
    template = str(facts.data.get("dtype", {}).get("fallback_warning") or
                   "Your device %s doesn't support %s. Falling back to %s for compatibility.")
    version = format_capability(cc)
    args: tuple[str, ...]
    if template.startswith("Your %s device%s"):
        args = (gpu_name, f" (with compute capability {version})", f"torch.{wanted}", f"torch.{served}")
    else:
        args = (f"{gpu_name!r} (with compute capability {version})", f"torch.{wanted}", f"torch.{served}")
    try:
        return template % args
    except TypeError:
        return template


def resolve_dtype(model: ModelSpec, *, requested: str | None, version: Version, cc: Capability | None,
                  gpu_name: str = "", pooling: bool = False) -> DtypeResolution:
    """``--dtype`` (``requested``; None or ``auto``: the default) as ``version`` resolves it for ``model`` on
    GPUs whose lowest compute capability is ``cc`` (see the module docstring). ``pooling``: the model runs as
    a pooling model (0.9.1+ then prefer float16 where the platform has it)."""
    asked = (requested or "auto").lower()
    checkpoint = checkpoint_dtype(model)
    facts = release_facts("vllm", version, group="dtype")
    if facts is None:
        return DtypeResolution(asked, checkpoint, None, note=f"vLLM {version}'s dtype resolution was not "
                               f"extracted (no facts at or below it): --dtype not checked")
    cite = facts.cite("vLLM")
    file = str(facts.data["dtype"].get("file") or "vllm/config/model.py")
    if asked != "auto":
        served = DTYPE_NAMES.get(asked)
        if served is None:
            return DtypeResolution(asked, checkpoint, None, cite=cite, note=f"--dtype {requested} is not one vLLM "
                                   "names (its parser refuses it)")
        if served == "bfloat16" and cc is not None and cc < BF16_SINCE:
            text, where = _bf16_gate(facts, gpu_name or "GPU", cc)
            return DtypeResolution(asked, checkpoint, served, refusal=f"{cite} raises: \"{text}\" ({where})",
                                   cite=cite)
        return DtypeResolution(asked, checkpoint, served, cite=cite)
    era = str(facts.data["dtype"].get("auto", "config"))
    if cc is None:
        return DtypeResolution(asked, checkpoint, None, cite=cite, note="the GPUs' compute capability is unknown: "
                               "--dtype auto's choice on them not checked")
    supported = platform_dtypes(facts, cc)
    name = gpu_name or "GPU"
    if era == "model_type":
        refusing = float16_refusing_types(facts)
        valid = [d for d in supported if not (model.hf_model_type in refusing and d == "float16")]
        if not valid:
            return DtypeResolution(asked, checkpoint, None, cite=cite, note="no dtype left for the model type")
        preferred = "float16" if pooling and "float16" in valid else valid[0]
        wanted = preferred if checkpoint == "float32" else checkpoint
        if wanted in valid:
            return DtypeResolution(asked, checkpoint, wanted, cite=cite)
        warning = (f"{cite} logs: \"{_fallback_warning(facts, name, cc, wanted, preferred)}\" ({file} "
                   f"_resolve_auto_dtype)")
        return DtypeResolution(asked, checkpoint, preferred, warning=warning, cite=cite)
    wanted = "float16" if checkpoint == "float32" else checkpoint
    if era == "platform":
        if wanted in supported:
            return DtypeResolution(asked, checkpoint, wanted, cite=cite)
        warning = (f"{cite} logs: \"{_fallback_warning(facts, name, cc, wanted, supported[0])}\" ({file} "
                   f"_get_and_verify_dtype)")
        return DtypeResolution(asked, checkpoint, supported[0], warning=warning, cite=cite)
    if wanted == "bfloat16" and cc < BF16_SINCE:
        text, where = _bf16_gate(facts, name, cc)
        return DtypeResolution(asked, checkpoint, wanted, cite=cite, refusal=(
            f"{cite} takes the checkpoint's bfloat16 for --dtype auto (no fallback in {file} "
            f"_get_and_verify_dtype) and raises: \"{text}\" ({where})"))
    return DtypeResolution(asked, checkpoint, wanted, cite=cite)
