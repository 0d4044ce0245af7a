"""What vLLM refuses on a GPU generation, or cannot build at all, by release (``VllmEngine.generation_refusals``).

Read from the facts ``tools/engine_facts.py`` extracted from each wheel (``releases/<version>.json``):

- architectures: ``vllm/model_executor/models/registry.py`` (``_ModelRegistry._raise_for_unsupported``,
  ``_PREVIOUSLY_SUPPORTED_MODELS``, ``_OOT_SUPPORTED_MODELS``; ``_TRANSFORMERS_SUPPORTED_MODELS`` are built by
  the Transformers backend that ``--model-impl auto``, the default, falls back to);
- the quantization method's minimum capability: ``vllm/config/vllm.py`` (``vllm/config/__init__.py`` before
  0.11) ``VllmConfig._get_quantization_config``, with each method's ``get_min_capability``. AWQ and GPTQ
  checkpoints are refused only below the lowest of the kernel variants vLLM picks between (``awq`` /
  ``awq_marlin``, ``gptq`` / ``gptq_marlin``: each ``override_quantization_method`` takes the Marlin variant
  only on GPUs it runs on);
- ``--dtype``: ``engines/vllm/dtype.py`` by release: ``vllm/platforms/cuda.py`` ``check_if_supports_dtype``
  (``v1/worker/gpu_worker.py`` before 0.11) refuses bfloat16 below 8.0, explicit or (0.8.x, no fallback) the
  checkpoint's under ``--dtype auto``; from 0.9.0 ``auto`` falls back to the platform's dtype, float16, and from
  0.9.1 (``config/model.py`` ``_resolve_auto_dtype``) to float32 for the model types that refuse float16;
- sparse MLA (DeepSeek-V3.2 and GLM-5's DSA, ``vllm/models/deepseek_v32``): the sparse MLA backends CUDA
  chooses between (``platforms/cuda.py`` ``_get_backend_priorities``) and the capabilities each allows
  (``v1/attention/backends/mla/*sparse*.py``); none below SM 9.0: "No valid attention backend found";
- a backend forced with ``--attention-backend`` / ``VLLM_ATTENTION_BACKEND`` (FlashMLA, FA3's
  ``FLASH_ATTN_MLA`` ...) that does not allow the GPU: "Selected backend ... is not valid".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_gpulayout.engine import GenerationVerdict
from pytest_gpulayout.engines.vllm.dtype import float16_refusing_types, resolve_dtype
from pytest_gpulayout.generation import (
    Collect,
    ReleaseFacts,
    check_quantization_gate,
    gpu_capability,
    launch_value,
    min_capability,
    not_known,
    release_facts,
    short_list,
)
from pytest_gpulayout.machine.capability import Capability, format_capability

if TYPE_CHECKING:
    from pytest_gpulayout.engine import Subject
    from pytest_gpulayout.model.spec import ModelSpec

DISPLAY = "vLLM"
#: architectures whose attention is sparse MLA (``vllm/models/deepseek_v32``: ``DeepseekV32ForCausalLM``,
#: ``GlmMoeDsaForCausalLM``)
SPARSE_MLA_ARCHS = frozenset({"DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"})
_TRANSFORMERS_ONLY = "_TRANSFORMERS_SUPPORTED_MODELS"


def vllm_method(model: ModelSpec, facts: ReleaseFacts) -> str | None:
    """The quantization method as ``model_config.quantization`` names it, for the gate: the lowest-capability
    variant vLLM may pick for the checkpoint's ``quant_method``."""
    q = model.quantization
    if q is None:
        return None
    methods = facts.data.get("quantization", {}).get("by_method", {})
    if q.method == "modelopt":
        return "modelopt_fp4" if q.fmt == "nvfp4" else "modelopt"
    if q.method in ("awq", "gptq"):
        variants = [m for m in (q.method, f"{q.method}_marlin") if m in methods]
        return min(variants, key=lambda m: min_capability(methods[m]) or 0) if variants else q.method
    return q.method


def _architectures(c: Collect, s: Subject, facts: ReleaseFacts) -> None:
    archs = list(s.model.architectures)
    if not archs:
        c.notes.append(f"the config names no architectures: {facts.cite(DISPLAY)}'s registry not checked")
        return
    by_arch: dict[str, Any] = facts.data["architectures"]["by_arch"]
    native = [a for a in archs if a in by_arch and set(by_arch[a].get("registries", ())) - {_TRANSFORMERS_ONLY}]
    if native:
        return
    file = facts.data["architectures"].get("file", "vllm/model_executor/models/registry.py")
    via_transformers = [a for a in archs if a in by_arch]
    if via_transformers:
        c.warnings.append(
            f"{facts.cite(DISPLAY)} has no implementation of its own for {via_transformers[0]}: it lists it in "
            f"{_TRANSFORMERS_ONLY} ({file}), so --model-impl auto (the default) falls back to the Transformers "
            f"backend (TransformersForCausalLM): it starts, usually slower, and what the Transformers backend "
            f"does not support (some quantization, parallel layouts) fails at load")
        return
    prev = facts.data.get("previously_supported", {}) if facts.has("previously_supported") else {}
    for arch in archs:
        until = prev.get("models", {}).get(arch)
        if until is not None:
            c.refusals.append(
                f"{facts.cite(DISPLAY)} removed {arch}; vLLM raises: \"Model architecture {arch} was supported in "
                f"vLLM until v{until}, and is not supported anymore. Please use an older version of vLLM if you "
                f"want to use this model architecture.\" ({file}, _PREVIOUSLY_SUPPORTED_MODELS). Pin "
                f"engine_version: {until} (or older), or serve it with another engine")
            return
        plugin = prev.get("out_of_tree_models", {}).get(arch)
        if plugin is not None:
            c.refusals.append(
                f"{facts.cite(DISPLAY)} moved {arch} out of tree; vLLM raises: \"Model architecture {arch} is not "
                f"supported in-tree anymore. Please install the plugin at {plugin} if you want to use this model "
                f"architecture.\" ({file}, _OOT_SUPPORTED_MODELS)")
            return
    supported = sorted(a for a, e in by_arch.items() if set(e.get("registries", ())) - {"_TRANSFORMERS_BACKEND_MODELS"})
    c.refusals.append(
        f"{facts.cite(DISPLAY)} has no implementation of {', '.join(archs)}; vLLM raises: \"Model architectures "
        f"{archs} are not supported for now. Supported architectures: {short_list(supported)}\" ({file}, "
        f"_ModelRegistry._raise_for_unsupported), unless the Transformers library installed beside it implements "
        f"the architecture (then --model-impl auto takes its Transformers backend; not verified here)")


def _sparse_mla(c: Collect, s: Subject, facts: ReleaseFacts, cc: Capability | None, who: str) -> None:
    sparse = [a for a in s.model.architectures if a in SPARSE_MLA_ARCHS]
    if not sparse:
        return
    if not facts.has("attention_backends"):
        c.notes.append(f"{sparse[0]} needs a sparse MLA attention backend; {facts.cite(DISPLAY)}'s backends were "
                       f"not extracted, so the GPU generation is not checked")
        return
    ab = facts.data["attention_backends"]
    named = {str(n).rsplit(".", 1)[-1] for n in ab.get("cuda_priority_function", {}).get("backends_named", ())}
    candidates = {n: b for n, b in ab["backends"].items()
                  if n in named and b.get("is_mla") and b.get("is_sparse")}
    if cc is None:
        c.notes.append(f"{sparse[0]} runs only on the sparse MLA backends {sorted(candidates)}; the GPUs' compute "
                       f"capability is unknown, so not checked")
        return
    mine = format_capability(cc)
    allowed = {n: b["compute_capability"].get("allowed_cuda_capabilities", []) for n, b in candidates.items()}
    if any(mine in caps for caps in allowed.values()):
        return
    reasons = ", ".join(f"{n}: [compute capability not supported]" for n in sorted(allowed))
    where = "; ".join(f"{n} {'/'.join(caps) or 'none'}" for n, caps in sorted(allowed.items()))
    c.refusals.append(
        f"{s.model.name} ({sparse[0]}) uses sparse MLA attention, and none of the sparse MLA backends "
        f"{facts.cite(DISPLAY)} chooses between on CUDA runs on compute capability {mine} ({who}): {where} "
        f"(v1/attention/backends/mla/*sparse*.py supports_compute_capability). vLLM raises: \"No valid attention "
        f"backend found for cuda with AttentionSelectorConfig(use_mla=True, use_sparse=True, ...). Reasons: "
        f"{{{reasons}}}.\" (vllm/platforms/cuda.py get_attn_backend_cls). It needs Hopper (SM 9.0) or Blackwell")


def _forced_backend(c: Collect, s: Subject, facts: ReleaseFacts, cc: Capability | None, who: str) -> None:
    forced = launch_value(s.dep.launch.args, "--attention-backend") or s.knobs.env.get("VLLM_ATTENTION_BACKEND")
    if not forced or not facts.has("attention_backends") or cc is None:
        return
    backend = facts.data["attention_backends"]["backends"].get(forced.upper())
    if backend is None:
        return
    caps = backend["compute_capability"].get("allowed_cuda_capabilities", [])
    mine = format_capability(cc)
    if mine in caps:
        return
    c.refusals.append(
        f"the launch forces the {forced.upper()} attention backend, which {facts.cite(DISPLAY)} allows only on "
        f"compute capability {'/'.join(caps) or 'none'} ({backend['file']}); {who} has {mine}. vLLM raises: "
        f"\"Selected backend AttentionBackendEnum.{forced.upper()} is not valid for this configuration. Reason: "
        f"['compute capability not supported']\" (vllm/platforms/cuda.py). Drop the forced backend")


def _dtype(c: Collect, s: Subject, cc: Capability | None, who: str) -> None:
    """``--dtype`` as the release resolves it on these GPUs (``engines/vllm/dtype.py``): the bfloat16 gate,
    and ``auto``'s fallback, to float16 or (a model type that refuses float16) to float32."""
    asked = launch_value(s.dep.launch.args, "--dtype")
    res = resolve_dtype(s.model, requested=asked, version=s.version, cc=cc, gpu_name=who)
    if res.refusal is not None:
        c.refusals.append(f"--dtype {res.requested} on {who} (compute capability "
                          f"{format_capability(cc) if cc else 'unknown'}): {res.refusal}")
        return
    if res.warning is None or cc is None:
        return
    mine = format_capability(cc)
    if res.served == "float32":
        reason = float16_refusing_types(release_facts("vllm", s.version, group="dtype")).get(s.model.hf_model_type)
        why = f" ({reason})" if reason else ""
        c.warnings.append(
            f"{s.model.name} is {res.checkpoint} and {who} (compute capability {mine}) has no bfloat16, and vLLM "
            f"refuses float16 for its model type {s.model.hf_model_type!r}{why}: with --dtype auto {res.cite} "
            f"serves it in float32, twice the weight bytes (and an auto KV cache's) of {res.checkpoint}. "
            f"{res.warning}. --dtype half is refused for this model type; a GPU with bfloat16 (compute capability "
            f"8.0 or newer) serves it in bfloat16")
        return
    c.warnings.append(
        f"{s.model.name} is {res.checkpoint} and {who} (compute capability {mine}) has no bfloat16: with --dtype "
        f"auto {res.cite} falls back to {res.served}. {res.warning}. A bf16-trained model can overflow in "
        f"float16; set --dtype half to make it explicit")


def generation_refusals(s: Subject) -> GenerationVerdict:
    c = Collect()
    cc, who, unknown = gpu_capability(s)
    if unknown and cc is not None:
        cc = None  # one GPU of unknown generation: nothing is claimed for the group
    _dtype(c, s, cc, who)  # its own facts (group dtype), extracted for more releases than the others
    facts = release_facts("vllm", s.version)
    if facts is None:
        c.notes.append(not_known(DISPLAY, "vllm", s.version, "the architectures and compute-capability gates"))
        return c.verdict()
    _architectures(c, s, facts)
    check_quantization_gate(c, s, facts, DISPLAY, vllm_method(s.model, facts), "vllm/config/vllm.py", cc, who)
    _sparse_mla(c, s, facts, cc, who)
    _forced_backend(c, s, facts, cc, who)
    return c.verdict()
