"""Whether SGLang gives a model its hybrid SWA pool (full-attention and sliding-window layers in two pools, the
sliding ones sized at ``swa_full_tokens_ratio`` tokens per full-attention token), release by release.

Read in the wheels:

- 0.4.9.post3 - 0.5.6.post2: ``ModelRunner.__init__`` (``model_executor/model_runner.py:347-355`` in 0.5.3)
  makes every model with a sliding window hybrid but Llama 4, unless ``--disable-hybrid-swa-memory``;
- 0.5.0rc0 - 0.5.7: ``ServerArgs._handle_model_specific_adjustments``' GPT-OSS branch sets
  ``disable_hybrid_swa_memory = True`` unconditionally (``server_args.py:781`` in 0.5.3);
- 0.5.7 has no such rule in the runner, and from 0.5.8 ``configs/model_config.py is_hybrid_swa_model`` lists the
  hybrid architectures (``GptOssForCausalLM``, ``Llama4ForConditionalGeneration``, ...; 0.5.8 :1220-1228);
- 0.5.8 - 0.5.9: the GPT-OSS branch turns it off with a ``trtllm_mha`` prefill or decode backend, the one it
  picks itself on SM100 (``server_args.py:1278-1290`` in 0.5.8), and 0.5.8 also with speculative decoding
  (:1292-1297); 0.5.10 drops both;
- Llama 4 before 0.5.8: hybrid only with ``--hybrid-kvcache-ratio`` (``is_hybrid_model``: a mix of uniform and
  hybrid buffers, another arithmetic, not modelled here).

Where a release's choice depends on what cannot be read (the GPU's compute capability for the default backend),
the pool without it is taken: the smaller one, so the pool predicted is never one the engine does not have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.model.spec import ModelSpec

GPT_OSS = "GptOssForCausalLM"
LLAMA4 = "Llama4ForConditionalGeneration"
#: the architectures whose hybrid pool this project sizes (budget._ranks); others SGLang makes hybrid are sized
#: as one pool (a smaller prediction than the engine's)
MODELLED = frozenset({GPT_OSS, LLAMA4})
GENERIC_SLIDING_SINCE = Version("0.4.9.post3")
GPT_OSS_OFF_SINCE = Version("0.5.0rc0")
HYBRID_SET_SINCE = Version("0.5.8")
GPT_OSS_TRTLLM_OFF_UNTIL = Version("0.5.10")
GPT_OSS_SPECULATIVE_OFF_UNTIL = Version("0.5.9")
_TRTLLM = "trtllm_mha"


@dataclass(frozen=True)
class HybridSwa:
    """The release's choice (``on``) and why, in words ("" where the model has no sliding layers it sizes)."""

    on: bool
    why: str = ""


def _backends(given: Mapping[str, str | None], cc: tuple[int, int] | None) -> tuple[str | None, str | None]:
    """GPT-OSS's prefill and decode attention backends (0.5.8-0.5.9): the line's, else the one the branch picks
    (``trtllm_mha`` on SM100, ``fa3`` on SM90, ``triton`` otherwise); None where the GPU is not known."""
    both = given.get("--attention-backend")
    if both is None:
        default = None if cc is None else _TRTLLM if cc[0] == 10 else "fa3" if cc[0] == 9 else "triton"
        both = default
    return given.get("--prefill-attention-backend") or both, given.get("--decode-attention-backend") or both


def hybrid_swa(version: Version, model: ModelSpec, given: Mapping[str, str | None],
               cc: tuple[int, int] | None) -> HybridSwa:
    """Whether ``version`` sizes ``model``'s pool as hybrid SWA for this line (``given``: LaunchKnobs.given) on
    GPUs of compute capability ``cc`` (see the module docstring)."""
    archs = set(model.architectures)
    if not (archs & MODELLED) or model.sliding_layers <= 0:
        return HybridSwa(False)
    if "--disable-hybrid-swa-memory" in given:
        return HybridSwa(False, "--disable-hybrid-swa-memory: one pool for every layer")
    if LLAMA4 in archs:
        if version >= HYBRID_SET_SINCE:
            return HybridSwa(True)
        if given.get("--hybrid-kvcache-ratio") is not None:
            return HybridSwa(False, f"--hybrid-kvcache-ratio: SGLang {version}'s mixed hybrid buffers are not "
                                    f"modelled; one pool for every layer is assumed (the smaller pool)")
        return HybridSwa(False, f"SGLang {version} gives Llama 4 a hybrid pool only with --hybrid-kvcache-ratio "
                                f"(configs/model_config.py is_hybrid_model): one pool for every layer")
    if version < GENERIC_SLIDING_SINCE:
        return HybridSwa(False, f"SGLang {version} has no hybrid SWA pool for {GPT_OSS}: one pool for every layer")
    if version < GPT_OSS_OFF_SINCE:
        return HybridSwa(True)
    if version < HYBRID_SET_SINCE:
        return HybridSwa(False, f"SGLang {version} turns hybrid SWA memory off for {GPT_OSS} "
                                f"(server_args.py _handle_model_specific_adjustments): one pool for every layer")
    if version < GPT_OSS_SPECULATIVE_OFF_UNTIL and given.get("--speculative-algorithm") is not None:
        return HybridSwa(False, f"SGLang {version} turns hybrid SWA memory off for {GPT_OSS} with speculative "
                                f"decoding (server_args.py): one pool for every layer")
    if version < GPT_OSS_TRTLLM_OFF_UNTIL:
        prefill, decode = _backends(given, cc)
        if prefill is None or decode is None:
            return HybridSwa(False, f"SGLang {version} turns hybrid SWA memory off for {GPT_OSS} with the "
                                    f"trtllm_mha backend it picks on SM100, and the GPU's compute capability is "
                                    f"not known: one pool for every layer is assumed (the smaller pool)")
        if _TRTLLM in (prefill, decode):
            return HybridSwa(False, f"SGLang {version} turns hybrid SWA memory off for {GPT_OSS} with the "
                                    f"trtllm_mha attention backend (server_args.py; the default on SM100): one "
                                    f"pool for every layer")
    return HybridSwa(True)
