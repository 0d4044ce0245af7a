"""Which multimodal models SGLang serves as text models, release by release (``configs/model_config.py``
``ModelConfig.__init__`` ``mm_disabled_models``): read by the budget (no vision-tower factor) and by the
memory defaults (no multimodal prefill-graph rule)."""

from __future__ import annotations

from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.model.spec import ModelSpec

#: ``ModelConfig.__init__`` (``configs/model_config.py``): without ``--enable-multimodal`` these architectures get
#: ``enable_multimodal = False``, so ``is_multimodal`` is False and SGLang neither shrinks ``mem_fraction_static``
#: for them (0.4.x model runner, ``adjust_mem_fraction_for_vlm`` from 0.4.10) nor applies its multimodal
#: prefill-graph rule. Read: 0.4.6, 0.4.9, 0.4.10 (Gemma 3, Llama 4; 0.4.6 l.76); 0.5.1, 0.5.2, 0.5.4, 0.5.6,
#: 0.5.8-0.5.15 (+ Step3VL; 0.5.6 l.137); 0.5.16-0.5.23 (+ Inkling; 0.5.23 l.692). Releases before 0.4.6 not read.
MM_DISABLED_MODELS: tuple[tuple[Version, frozenset[str]], ...] = (
    (Version("0.4.6"), frozenset({"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration"})),
    (Version("0.5.1"), frozenset({"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
                                  "Step3VLForConditionalGeneration"})),
    (Version("0.5.16"), frozenset({"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
                                   "Step3VLForConditionalGeneration", "InklingForConditionalGeneration"})),
)
#: From 0.5.10 the list is skipped under ``--model-impl transformers`` (``self.model_impl != ModelImpl.TRANSFORMERS``).
MM_DISABLED_SPARES_TRANSFORMERS_FROM = Version("0.5.10")


def mm_disabled_models(version: Version) -> frozenset[str]:
    """``mm_disabled_models`` of ``version`` (empty before 0.4.6: not read)."""
    out: frozenset[str] = frozenset()
    for since, archs in MM_DISABLED_MODELS:
        if since <= version:
            out = archs
    return out


def serves_multimodal(version: Version, model: ModelSpec | None, given: Mapping[str, str | None]) -> str | None:
    """Why SGLang ``version`` serves multimodal ``model`` as a text model (``ModelConfig.is_multimodal`` False),
    in words; None when it serves it as multimodal (or the model has no vision tower). ``given``: the
    deployment's flags (``LaunchKnobs.given``)."""
    if model is None or not model.is_multimodal or not model.architectures:
        return None
    arch = model.architectures[0]
    if arch not in mm_disabled_models(version) or "--enable-multimodal" in given:
        return None
    if version >= MM_DISABLED_SPARES_TRANSFORMERS_FROM and (given.get("--model-impl") or "") == "transformers":
        return None
    return (f"SGLang {version} leaves multimodal input off for {arch} unless --enable-multimodal "
            f"(configs/model_config.py ModelConfig.__init__ mm_disabled_models): it does not reduce "
            f"mem_fraction_static for the vision tower.")
