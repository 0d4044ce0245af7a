"""The prefill / decode attention backends and the page size SGLang resolves for a line, a model and a GPU, by release.

What each release does, from 0.5.9 (earlier releases are not resolved here):

* Both split flags equal: the base backend is that one (0.5.9 ``server_args.py`` l.1774-1777; 0.5.23
  ``arg_groups/overrides.py _attention_backend_default`` l.1128-1131). The prefill / decode backends are then
  ``--prefill-attention-backend`` / ``--decode-attention-backend``, each else the base backend (0.5.23
  ``model_override_base.py attention_backends_of`` l.138-152).
* A model branch picks the base backend where the line names none: GPT-OSS (``GptOssForCausalLM``: trtllm_mha on
  SM100, fa3 on SM90, else triton; 0.5.14 ``server_args.py`` l.3813-3826, 0.5.23 ``model_overrides/gpt_oss.py``
  l.29-44), DeepSeek V3 / R1 without DSA (trtllm_mla on SM100 where none of the three backend flags is given;
  0.5.14 l.3640-3650, 0.5.23 ``model_overrides/deepseek_v2.py`` l.178-185). DeepSeek with DSA gets ``dsa`` and
  its own split resolution (``rules_mamba2``): not resolved here.
* Else the default (0.5.9 l.1779-1830; 0.5.14 ``_get_default_attn_backend`` l.4407-4465; 0.5.23
  ``model_override_base.py get_default_attn_backend`` l.277-351): MHA fa3 on Hopper (``is_hopper_with_cuda_12_3``),
  trtllm_mha on SM100 (``is_sm100_supported``: major 10), else flashinfer (a package every listed release's wheel
  requires, ``flashinfer_python``); MLA fa3 on Hopper, flashinfer on SM100, else triton. The models judged here
  have neither attention sinks nor asymmetric K/V rows (0.5.23's fa4 on SM100).
* The page size (0.5.9 l.1880-1910; 0.5.23 ``overrides.py _mla_backend_page_constraints`` l.1144-1190): trtllm_mla
  takes 32 or 64, else 64; trtllm_mha 16, 32 or 64 (and 128 from 0.5.17), else 64; flashmla 64; else the line's
  page size, 1 by default (0.5.9 l.2056-2057).

The CUDA-version gates (Hopper with CUDA 12.3+, SM100 with CUDA 12.8+) read the serving image's PyTorch build: every
listed release's wheel pins a torch built for CUDA 12.8 or later, so they are the GPU's major alone.

Not resolved (``Resolved.reason`` says which): speculative decoding (its hooks pick the draft backend and may change
the target's), the hooks that pick a backend themselves (deterministic inference, multi-item scoring, a diffusion
LLM, on-policy RL), a GPU of unknown capability, an architecture outside ``_PLAIN_ARCHS`` / GPT-OSS / DeepSeek V3
(their model branches are not modelled), a release before 0.5.9.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.engines.sglang.rules_model2 import is_deepseek_dsa
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Layout

SINCE = Version("0.5.9")
#: dense MHA architectures no release's model branch picks an attention backend or page size for
PLAIN_ARCHS = frozenset({"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"})
GPT_OSS = "GptOssForCausalLM"
DEEPSEEK_V3 = "DeepseekV3ForCausalLM"
#: flags whose hooks pick the backend themselves
PICKING_FLAGS = ("enable_deterministic_inference", "rl_on_policy_target", "enable_mis", "dllm_algorithm")
#: trtllm_mha's page sizes by first release (0.5.16 ``server_args.py`` l.5005; 0.5.17 adds 128)
_TRTLLM_MHA_PAGES = ((Version("0"), (16, 32, 64)), (Version("0.5.17"), (16, 32, 64, 128)))


@dataclass(frozen=True)
class Resolved:
    """The backends and page size a release ends with, or ``reason`` (why not resolved) with the others None."""

    prefill: str | None = None
    decode: str | None = None
    base: str | None = None
    page_size: int | None = None
    reason: str | None = None


def _named(args: ResolvedArgs, dest: str) -> str | None:
    value = args.get(dest) if args.is_set(dest) else None
    return value if isinstance(value, str) else None


def _default(arch: str, mla: bool, major: int, any_named: bool) -> str:
    """The base backend a release picks where the line names none (see the module docstring)."""
    if arch == GPT_OSS:
        return "trtllm_mha" if major == 10 else "fa3" if major == 9 else "triton"
    if arch == DEEPSEEK_V3 and major == 10 and not any_named:
        return "trtllm_mla"
    if major == 9:
        return "fa3"
    if major == 10:
        return "flashinfer" if mla else "trtllm_mha"
    return "triton" if mla else "flashinfer"


def page_size(base: str, prefill: str, decode: str, asked: int | None, listed: Version) -> int:
    """The page size after the backends' page constraints (see the module docstring): flashmla / trtllm_mla read
    the base and decode backends, trtllm_mha all three (0.5.9 ``server_args.py`` l.1874-1905)."""
    size = asked
    if "flashmla" in (base, decode):
        size = 64
    if "trtllm_mla" in (base, decode) and size not in (32, 64):
        size = 64
    mha = next(p for since, p in reversed(_TRTLLM_MHA_PAGES) if listed >= since)
    if "trtllm_mha" in (base, prefill, decode) and size not in mha:
        size = 64
    return 1 if size is None else size


def resolve_backends(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version) -> Resolved:
    """The prefill / decode / base attention backends and page size SGLang ``listed`` ends with, or why not."""
    arch = model.architectures[0] if model.architectures else ""
    cc = layout.compute_capability
    if listed < SINCE:
        return Resolved(reason=f"the attention backends SGLang {listed} picks are not resolved (from {SINCE})")
    if cc is None:
        return Resolved(reason="the GPU's compute capability is not known: the attention backends SGLang picks "
                               "by it are not resolved")
    if args.get("speculative_algorithm") is not None:
        return Resolved(reason="speculative decoding: the attention backends its hooks pick are not resolved")
    flag = next((d for d in PICKING_FLAGS if args.get(d)), None)
    if flag is not None:
        return Resolved(reason=f"--{flag.replace('_', '-')} picks the attention backend itself: not resolved")
    if arch == DEEPSEEK_V3:
        dsa = is_deepseek_dsa(model, listed)
        if dsa is not False:
            return Resolved(reason="DeepSeek with DSA (or a config that does not say): its dsa backend split is "
                                   "not resolved here")
    elif arch not in PLAIN_ARCHS and arch != GPT_OSS:
        return Resolved(reason=f"{arch or 'the model'}: its model branch's attention backend is not resolved")
    base, prefill, decode = (_named(args, d) for d in
                             ("attention_backend", "prefill_attention_backend", "decode_attention_backend"))
    if prefill is not None and prefill == decode:
        base = prefill
    if base is None and arch == GPT_OSS and (prefill is not None or decode is not None):
        return Resolved(reason="GPT-OSS with one split attention backend named: the default for the other (its "
                               "attention sinks) is not resolved")
    if base is None:
        base = _default(arch, model.is_mla, cc[0], prefill is not None or decode is not None)
    prefill, decode = prefill or base, decode or base
    asked = args.get("page_size")
    size = page_size(base, prefill, decode, asked if isinstance(asked, int) else None, listed)
    return Resolved(prefill=prefill, decode=decode, base=base, page_size=size)
