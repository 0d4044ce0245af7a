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


def vision_tower_factor(model: ModelSpec) -> float:
    """``adjust_mem_fraction_for_vlm`` (0.4.10+; 0.5.6 ``server_args.py`` l.4278, 0.5.23
    ``arg_groups/memory_hook.py`` l.417): ``0.95 x clamp(1 - 0.1 x (L x H^2 / (24 x 1024^2) - 1), 0.8, 1.05)`` with
    ``L = getattr(vision_config, "num_hidden_layers", 24)``, ``H = getattr(vision_config, "hidden_size", 1024)``
    on the transformers config object. The Qwen-VL vision configs have no ``num_hidden_layers`` (24 then), and
    Qwen2-VL's ``hidden_size`` is the merger's 3,584, not the ViT's 1,280 (``ModelSpec.vision_config_shape``);
    the other towers' ``num_hidden_layers`` / ``hidden_size`` are the tower's own."""
    layers, hidden = model.vision_num_layers or 24, model.vision_hidden_size or 1024
    if model.vision_config_shape is not None:
        raw_layers, raw_hidden = model.vision_config_shape
        layers, hidden = raw_layers or 24, raw_hidden or hidden
    ratio = layers * hidden ** 2 / (24 * 1024 ** 2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
