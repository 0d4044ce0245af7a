"""What SGLang refuses on a GPU generation, or cannot build, by release (``SglangEngine.generation_refusals``).

Read from the facts ``tools/engine_facts.py`` extracted from the wheel (``releases/<version>.json``):

- architectures: ``sglang/srt/models/registry.py`` ``_normalize_archs`` appends ``TransformersForCausalLM`` when
  the registry lacks an architecture, so an unknown one starts only if the Transformers library implements it;
- the quantization method's minimum capability: ``sglang/srt/model_loader/loader.py``
  ``_get_quantization_config`` (each method's ``get_min_capability``; AWQ / GPTQ refused only below the lowest
  variant SGLang picks between; ``mxfp4`` from its CUDA entry in ``BASE_QUANTIZATION_METHODS``);
- a backend forced with ``--attention-backend`` / ``--prefill-attention-backend`` / ``--decode-attention-backend``
  whose factory in ``sglang/srt/layers/attention/attention_registry.py`` asserts the GPU generation (FA3:
  "FlashAttention v3 Backend requires SM>=80 and SM<=90"), evaluated from the extracted conditions.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from pytest_gpulayout.engine import GenerationVerdict
from pytest_gpulayout.generation import (
    Collect,
    ReleaseFacts,
    check_quantization_gate,
    gpu_capability,
    launch_value,
    min_capability,
    not_known,
    release_facts,
)
from pytest_gpulayout.machine.capability import Capability, format_capability

if TYPE_CHECKING:
    from pytest_gpulayout.engine import Subject
    from pytest_gpulayout.model.spec import ModelSpec

DISPLAY = "SGLang"
BACKEND_FLAGS = ("--attention-backend", "--prefill-attention-backend", "--decode-attention-backend")


def sglang_method(model: ModelSpec, facts: ReleaseFacts) -> tuple[str | None, Mapping[str, Any] | None]:
    """The method as SGLang names it and its facts entry (the lowest-capability variant it may pick)."""
    q = model.quantization
    if q is None:
        return None, None
    quant = facts.data.get("quantization", {})
    methods: Mapping[str, Any] = quant.get("by_method", {})
    name = q.method
    if q.method == "modelopt":
        name = "modelopt_fp4" if q.fmt == "nvfp4" else "modelopt_fp8"
    candidates = [m for m in ((name, f"{name}_marlin") if name in ("awq", "gptq") else (name,)) if m in methods]
    if candidates:
        best = min(candidates, key=lambda m: min_capability(methods[m]) or 0)
        return best, methods[best]
    cuda = [e for e in quant.get("conditional_methods", ())
            if e.get("method") == name and "is_cuda()" in str(e.get("condition", ""))]
    return name, (cuda[0] if cuda else None)


def _architectures(c: Collect, s: Subject, facts: ReleaseFacts) -> None:
    archs = list(s.model.architectures)
    if not archs:
        c.notes.append(f"the config names no architectures: {facts.cite(DISPLAY)}'s registry not checked")
        return
    by_arch = facts.data["architectures"]["by_arch"]
    if any(a in by_arch for a in archs):
        return
    c.warnings.append(
        f"{facts.cite(DISPLAY)} has no implementation of {', '.join(archs)}: it falls back to "
        f"TransformersForCausalLM (sglang/srt/models/registry.py _normalize_archs), which starts only if the "
        f"Transformers library installed beside it implements the architecture (not verified here), usually slower")


def _condition_holds(expr: str, cc: Capability, mla: bool) -> bool | None:
    """One extracted condition on the GPU (``major``, ``minor``, ``runner.use_mla_backend``); None when it
    names anything else (not evaluated: no claim)."""
    names = {"major": cc[0], "minor": cc[1], "_is_musa": False,
             "runner": SimpleNamespace(use_mla_backend=mla)}
    try:
        return bool(eval(expr, {"__builtins__": {}}, names))  # noqa: S307 - extracted conditions, no builtins
    except Exception:
        return None


def _forced_backends(c: Collect, s: Subject, facts: ReleaseFacts, cc: Capability | None, who: str) -> None:
    if cc is None or not facts.has("attention_backends"):
        return
    registered = facts.data["attention_backends"].get("registered_backends", {})
    for flag in BACKEND_FLAGS:
        name = launch_value(s.dep.launch.args, flag)
        backend = registered.get(name or "")
        if backend is None:
            continue
        for r in backend.get("refusals", ()):
            held = [_condition_holds(str(e), cc, s.model.is_mla) for e in r.get("conditions", ())]
            if held and all(h is True for h in held):
                c.refusals.append(
                    f"{flag} {name} on {who} (compute capability {format_capability(cc)}): {facts.cite(DISPLAY)} "
                    f"asserts: \"{r['template']}\" ({backend['file']}, {backend.get('factory', name)})")
                return


def generation_refusals(s: Subject) -> GenerationVerdict:
    c = Collect()
    facts = release_facts("sglang", s.version)
    if facts is None:
        c.notes.append(not_known(DISPLAY, "sglang", s.version, "the architectures and compute-capability gates"))
        return c.verdict()
    cc, who, unknown = gpu_capability(s)
    if unknown and cc is not None:
        cc = None
    _architectures(c, s, facts)
    method, entry = sglang_method(s.model, facts)
    if method is not None and entry is not None:
        facts_with = dict(facts.data)
        quant = dict(facts_with.get("quantization", {}))
        quant["by_method"] = {**quant.get("by_method", {}), method: entry}
        facts_with["quantization"] = quant
        check_quantization_gate(c, s, ReleaseFacts(facts.engine, facts.asked, facts.release, facts_with), DISPLAY,
                                method, "sglang/srt/model_loader/loader.py", cc, who)
    elif method is not None:
        c.notes.append(f"quantization method {method!r} is not among {facts.cite(DISPLAY)}'s CUDA methods "
                       f"(its minimum capability not checked)")
    _forced_backends(c, s, facts, cc, who)
    return c.verdict()
