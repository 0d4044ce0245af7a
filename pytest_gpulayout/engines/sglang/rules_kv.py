"""SGLang's KV cache layouts against the attention backends, by release: the FP4 KV cache (below), the page-major /
unified-memory layout and unified memory with DCP (``judge_page_major``), HiSparse's DSA backends against the KV
cache dtype (``judge_hisparse``).

``ServerArgs._handle_kv4_compatibility`` (0.5.7 - 0.5.18 ``server_args.py``; from 0.5.19 ``arg_groups/
kv_cache_hook.py handle_kv4_compatibility``, 0.5.23 l.112-318) returns unless ``--kv-cache-dtype`` is ``fp4_e2m1``
(0.5.7 - 0.5.15, 0.5.15 l.4497) or, from 0.5.16, ``nvfp4`` or ``fp4_mx_block16`` (0.5.16 l.5078) and, on CUDA,
asserts the attention backends it reads after the backends are picked (0.5.23 ``pipeline.py`` l.254 after
``handle_attention_backend_compatibility`` l.242; 0.5.18 ``server_args.py`` l.3694 after l.3687):

- ``prefill_backend`` / ``decode_backend``: ``--prefill-attention-backend`` / ``--decode-attention-backend``, each
  else ``--attention-backend`` (0.5.7 ``get_attention_backends`` l.4505-4516; 0.5.23 ``model_override_base.py
  attention_backends_of`` l.138-152); ``attention_backend`` is the base backend, which the release sets to the
  prefill one when both split flags are given equal (0.5.7 l.1505-1507; 0.5.23 ``overrides.py
  _attention_backend_default`` l.1127-1131) and picks itself when none is given;
- with both the same (or prefill ``fa4``): FA4 prefill asserts the decode backend in the FA4 MLA / MHA list, any
  other the base backend in the MLA / MHA list (``use_mla_backend``: the model caches one latent per token). The
  lists by release: MLA ``cutlass_mla, flashinfer, trtllm_mla, flashmla`` to 0.5.15, without ``flashmla`` in
  0.5.16 - 0.5.19, ``flashinfer, trtllm_mla`` from 0.5.20; FA4 MLA ``cutlass_mla, flashinfer, trtllm_mla`` to
  0.5.19, then ``flashinfer, trtllm_mla``; MHA ``triton, torch_native, flex_attention, trtllm_mha`` and FA4 MHA
  ``triton, torch_native, flex_attention`` in every release;
- from 0.5.21, ``nvfp4`` on an SM100 GPU with ``trtllm_mha`` as the prefill or decode backend
  (``uses_sm100_trtllm_nvfp4``, 0.5.23 l.143-147) refuses PD disaggregation (l.252), HiCache / LMCache (l.260) and a
  draft model's ``--speculative-draft-attention-backend`` other than ``trtllm_mha`` (l.226; the hooks before it
  only fill an unset one: ``kimi_k3_hook.py`` l.41-51).

A backend the line does not name is the one SGLang picks for the model, the GPU and the other flags: resolved for
the plain dense models on Hopper and SM100 (``default_backend``), else its entries are not judged (said). DeepSeek
V4 has its backend set to ``dsv4`` by its model override (0.5.23 ``model_overrides/deepseek_v4.py`` l.24), whatever
the line says: not judged either.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang.rules_cache import (
    DEEPSEEK_V4_ARCHS,
    FP4_KV_DTYPES,
    MINIMAX_SPARSE_ARCHS,
    SM100_MAJORS,
)
from pytest_gpulayout.engines.sglang.served import learnable_sink
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout, Refusal

T = TypeVar("T")

BACKENDS_RULE = "sglang.kv4.attention_backend"
SM100_RULE = "sglang.kv4.sm100_trtllm_nvfp4"
HISPARSE_RULE = "sglang.hisparse.dsa_backend"
PAGE_MAJOR_RULE = "sglang.page_major.attention_backends"
UNIFIED_DCP_RULE = "sglang.unified_memory.dcp_backends"

RULES: Mapping[str, str] = {
    BACKENDS_RULE: "an FP4 --kv-cache-dtype with an attention backend outside the release's KV4 list for the "
                   "model's MLA / MHA attention (or, with an fa4 prefill, a decode backend outside the FA4 list)",
    SM100_RULE: "nvfp4 KV with trtllm_mha on SM100 beside PD disaggregation, HiCache / LMCache or a draft attention "
                "backend other than trtllm_mha (0.5.21+)",
    HISPARSE_RULE: "--enable-hisparse on a DSA model with a --dsa-prefill-backend / --dsa-decode-backend outside "
                   "HiSparse's list for the KV cache dtype (0.5.14+)",
    PAGE_MAJOR_RULE: "--enable-page-major-kv-layout / --enable-unified-memory with a full-attention backend outside "
                     "the release's list for the model's MLA / MHA attention (0.5.15+)",
    UNIFIED_DCP_RULE: "--enable-unified-memory with --dcp-size > 1 and a full-attention backend other than "
                      "flashinfer / trtllm_mla / cutedsl_mla (/ tokenspeed_mla before 0.5.23) (0.5.20+)",
}

_MHA = ["triton", "torch_native", "flex_attention", "trtllm_mha"]
_FA4_MHA = ["triton", "torch_native", "flex_attention"]
#: (first release, the list), read in each release's ``_handle_kv4_compatibility`` (0.5.15 ``server_args.py``
#: l.4537-4542 with flashmla; 0.5.16 l.5125-5129 without; 0.5.20 ``kv_cache_hook.py`` l.68-71 / l.88-91)
_MLA: tuple[tuple[Version, list[str]], ...] = (
    (Version("0"), ["cutlass_mla", "flashinfer", "trtllm_mla", "flashmla"]),
    (Version("0.5.16"), ["cutlass_mla", "flashinfer", "trtllm_mla"]),
    (Version("0.5.20"), ["flashinfer", "trtllm_mla"]),
)
_FA4_MLA: tuple[tuple[Version, list[str]], ...] = (
    (Version("0"), ["cutlass_mla", "flashinfer", "trtllm_mla"]),
    (Version("0.5.20"), ["flashinfer", "trtllm_mla"]),
)
#: the FP4 dtypes the function checks, by first release
_FP4: tuple[tuple[Version, frozenset[str]], ...] = ((Version("0"), frozenset({"fp4_e2m1"})),
                                                    (Version("0.5.16"), FP4_KV_DTYPES))
#: architectures whose model override sets the attention backend over the line's
_BACKEND_FORCED = ("DeepseekV4",)
#: dense MHA architectures no release's model branch or override picks an attention backend for
_PLAIN_ARCHS = frozenset({"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"})
#: flags whose hooks pick the backend themselves (deterministic inference, multi-item scoring, a diffusion LLM)
_PICKING_FLAGS = ("enable_deterministic_inference", "rl_on_policy_target", "enable_mis", "dllm_algorithm")
#: HiSparse's CUDA DSA backends by KV cache dtype (``HISPARSE_CUDA_DSA_BACKENDS_BY_DTYPE``: 0.5.14
#: ``arg_groups/hisparse_hook.py`` l.11-14; flashinfer_sparse_mla joins fp8 in 0.5.18, 0.5.18 l.11-14, 0.5.23 l.18-21)
_HISPARSE_BACKENDS: tuple[tuple[Version, Mapping[str, frozenset[str]]], ...] = (
    (Version("0"), {"bfloat16": frozenset({"flashmla_sparse"}), "fp8_e4m3": frozenset({"flashmla_kv"})}),
    (Version("0.5.18"), {"bfloat16": frozenset({"flashmla_sparse"}),
                         "fp8_e4m3": frozenset({"flashmla_kv", "flashinfer_sparse_mla"})}),
)
#: the KV cache dtypes HiSparse's backend check is judged for: the two no pass rewrites (``auto`` and ``bf16`` are
#: rewritten by the DSA dtype default, 0.5.23 ``overrides.py _dsa_kv_cache_dtype_default`` l.532-540: not claimed)
_HISPARSE_DTYPES = ("bfloat16", "fp8_e4m3")
#: ``handle_page_major_kv_layout``'s ``allowed_full`` by first release: (MLA with unified memory, MHA with unified
#: memory, otherwise); 0.5.15 - 0.5.16 assert ``backends <= {'triton'}`` (0.5.16 ``server_args.py`` l.6872). 0.5.17
#: l.7945-7954 (MLA with unified memory, else triton), 0.5.19 ``kv_cache_hook.py`` l.330-348 (flashmla, and MHA with
#: unified memory), 0.5.22 l.815-831 (by the model alone), 0.5.23 l.802-819 (tokenspeed_mla gone; asymmetric K/V
#: rows: ``ASYMMETRIC_KV_BACKENDS`` l.767)
_MLA_PAGED = frozenset({"triton", "fa3", "trtllm_mla", "flashinfer", "cutedsl_mla", "tokenspeed_mla"})
_MHA_PAGED = frozenset({"triton", "fa3", "fa4", "flashinfer", "trtllm_mha"})
_TRITON = frozenset({"triton"})
_PAGE_MAJOR: tuple[tuple[Version, tuple[frozenset[str], frozenset[str], frozenset[str]]], ...] = (
    (Version("0"), (_TRITON, _TRITON, _TRITON)),
    (Version("0.5.17"), (_MLA_PAGED, _TRITON, _TRITON)),
    (Version("0.5.19"), (_MLA_PAGED | {"flashmla"}, _MHA_PAGED, _TRITON)),
    (Version("0.5.22"), (_MLA_PAGED | {"flashmla"}, _MHA_PAGED, _MHA_PAGED)),
    (Version("0.5.23"), ((_MLA_PAGED - {"tokenspeed_mla"}) | {"flashmla"}, _MHA_PAGED, _MHA_PAGED)),
)
_ASYMMETRIC_SINCE, _ASYMMETRIC_KV_BACKENDS = Version("0.5.23"), frozenset({"triton", "fa3", "fa4"})
#: from 0.5.19 the hook first asserts unified memory (``sglang.page_major_kv_layout``)
_PAGE_MAJOR_NEEDS_UNIFIED = Version("0.5.19")
#: ``_validate_unified_memory_dcp``'s ``dcp_allowed`` (0.5.20 ``kv_cache_hook.py`` l.327; 0.5.23 l.751, without
#: tokenspeed_mla)
_DCP_ALLOWED: tuple[tuple[Version, frozenset[str]], ...] = (
    (Version("0"), frozenset({"flashinfer", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla"})),
    (Version("0.5.23"), frozenset({"flashinfer", "trtllm_mla", "cutedsl_mla"})),
)
#: the names each release gives the values (0.5.7 - 0.5.14 ``self.*_str`` attributes, then locals)
_PREFILL_NAMES = ("prefill_backend", "prefill_attention_backend_str")
_DECODE_NAMES = ("decode_backend", "decode_attention_backend_str")


def _of(table: tuple[tuple[Version, T], ...], listed: Version) -> T:
    return next(v for since, v in reversed(table) if listed >= since)


def _named(args: ResolvedArgs, dest: str) -> str | None:
    value = args.get(dest) if args.is_set(dest) else None
    return value if isinstance(value, str) else None


def default_backend(args: ResolvedArgs, model: ModelSpec, layout: Layout) -> str | None:
    """The backend SGLang picks where the line names none, for the plain dense MHA models no release's model
    branch or override picks one for (``_PLAIN_ARCHS``), without speculative decoding or a flag whose hook picks
    another: ``fa3`` on Hopper (``is_hopper_with_cuda_12_3``: SM90, with the CUDA 12.4+ builds every release
    listed here ships), ``trtllm_mha`` on SM100 (their K/V rows are of one width). The same in every release:
    0.5.7 ``server_args.py`` l.1526-1542 (these architectures are in its ``is_fa3_default_architecture`` list),
    0.5.14 l.4433-4446, 0.5.23 ``model_override_base.py`` l.302-325. Else None (not resolved)."""
    arch = model.architectures[0] if model.architectures else ""
    cc = layout.compute_capability
    if arch not in _PLAIN_ARCHS or model.is_mla or cc is None or args.get("speculative_algorithm") is not None:
        return None
    if any(args.get(dest) for dest in _PICKING_FLAGS):
        return None
    return "fa3" if cc[0] == 9 else "trtllm_mha" if cc[0] in SM100_MAJORS else None


def backends(args: ResolvedArgs, model: ModelSpec, layout: Layout) -> tuple[str | None, str | None, str | None]:
    """(prefill, decode, base) attention backends as the check reads them, each None where SGLang picks it and
    ``default_backend`` does not resolve the pick."""
    base, prefill, decode = (_named(args, d) for d in
                             ("attention_backend", "prefill_attention_backend", "decode_attention_backend"))
    if prefill is not None and prefill == decode:
        base = prefill  # the release's own rewrite of the base backend
    if base is None and prefill is None and decode is None:
        base = default_backend(args, model, layout)
    return prefill or base, decode or base, base


def frame(ask: Ask) -> tuple[dict[str, object], list[str]]:
    """The values the KV4 entries read over the shared namespace, the ones not resolved left out."""
    args, listed = ask.args, ask.listed
    values = dict(ask.values)
    notes: list[str] = []
    prefill, decode, base = backends(args, ask.model, ask.layout)
    arch = ask.model.architectures[0] if ask.model.architectures else ""
    if arch.startswith(_BACKEND_FORCED):
        prefill = decode = base = None
        notes.append(f"{arch}: the attention backend its model override sets is not resolved: the FP4 KV cache's "
                     "backend checks are not judged")
    for names, value in ((_PREFILL_NAMES, prefill), (_DECODE_NAMES, decode), (("attention_backend",), base)):
        for name in names:
            values.pop(name, None)
            if value is not None:
                values[name] = value
    if (prefill is None or decode is None or base is None) and not notes:
        notes.append("the attention backends SGLang picks where the line names none are not resolved: the FP4 KV "
                     "cache's backend checks that read them are not judged")
    values.update({"use_mla_backend": ask.model.is_mla, "uses_mla": ask.model.is_mla,
                   "KV4_FA4_MLA_BACKEND_CHOICES": _of(_FA4_MLA, listed), "KV4_FA4_MHA_BACKEND_CHOICES": _FA4_MHA,
                   "KV4_ATTENTION_MLA_BACKEND_CHOICES": _of(_MLA, listed),
                   "KV4_ATTENTION_MHA_BACKEND_CHOICES": _MHA})
    values.pop("uses_sm100_trtllm_nvfp4", None)
    cc = ask.layout.compute_capability
    kv = args.get("kv_cache_dtype")
    known = [b for b in (prefill, decode) if b is not None]
    if kv != "nvfp4" or (cc is not None and cc[0] not in SM100_MAJORS):
        values["uses_sm100_trtllm_nvfp4"] = False
    elif cc is not None and ("trtllm_mha" in known or len(known) == 2):
        values["uses_sm100_trtllm_nvfp4"] = "trtllm_mha" in known
    algorithm = args.get("speculative_algorithm")
    values["uses_draft_model"] = algorithm is not None and str(algorithm).upper() != "NGRAM"
    values["draft_backend"] = args.get("speculative_draft_attention_backend")
    values["disaggregation_mode"] = args.get("disaggregation_mode") or "null"
    for dest in ("enable_hierarchical_cache", "enable_lmcache"):
        values[dest] = bool(args.get(dest, False))
    return values, notes


def judge_hisparse(ask: Ask) -> Judged:
    """``validate_hisparse_dsa_backend`` (0.5.14+; 0.5.23 ``hisparse_hook.py`` l.44-62, called for the prefill then the
    decode backend, l.161-165) for a DeepSeek Sparse Attention model (not MiniMax M3, which returns first, l.151-152,
    nor DeepSeek V4, whose KV dtype and backends its own hook resolves: not claimed): a backend the line names outside
    the list for the KV cache dtype refuses. An unnamed one is HiSparse's default for the dtype
    (``_hisparse_default_backend``: flashmla_kv for fp8, else flashmla_sparse; 0.5.23 ``overrides.py
    _dsa_split_backend_resolution`` l.677-685), in the list, except GLM-5 with an FP8 KV cache on SM120, which gets
    flashinfer_sparse_mla first (l.665-675), and a learnable-sink model (flashmla_sparse, l.644-663): not claimed there.
    Before it, from 0.5.22 the HiSparse arm of ``_dsa_split_backend_resolution`` refuses TileLang with an FP8 KV cache
    on CUDA (0.5.22 l.668, 0.5.23 l.692). The first refusal is SGLang's."""
    args = ask.args
    rules = ask.among((HISPARSE_RULE,))
    if not rules or not args.get("enable_hisparse") or ask.values.get("is_deepseek_dsa") is not True:
        return Judged()
    arch = ask.model.architectures[0] if ask.model.architectures else ""
    if arch in DEEPSEEK_V4_ARCHS or arch in MINIMAX_SPARSE_ARCHS:
        return Judged()
    kv = args.get("kv_cache_dtype")
    if kv not in _HISPARSE_DTYPES:
        if not (_named(args, "dsa_prefill_backend") or _named(args, "dsa_decode_backend")):
            return Judged()
        return Judged((), (f"HiSparse's DSA backend check reads the KV cache dtype SGLang resolves for "
                           f"--kv-cache-dtype {kv}: not judged",))
    cc = ask.layout.compute_capability
    default = "flashmla_kv" if kv == "fp8_e4m3" else "flashmla_sparse"
    # GLM-5 with an FP8 KV cache on SM120 and a learnable-sink model take their own arm before HiSparse's
    own_arm = learnable_sink(ask.model) or (arch.startswith("GlmMoeDsa") and kv == "fp8_e4m3"
                                             and (cc is None or cc[0] == 12))
    named = {label: _named(args, f"dsa_{label}_backend") or _named(args, f"nsa_{label}_backend")
             for label in ("prefill", "decode")}
    refusals: list[Refusal] = []
    notes: list[str] = []
    base = {k: v for k, v in ask.values.items() if k not in ("backend", "prefill", "decode")}
    if not own_arm:
        # the HiSparse arm of ``_dsa_split_backend_resolution`` (0.5.22+, 0.5.23 ``overrides.py`` l.677-692): the
        # named backends, else HiSparse's default; TileLang with an FP8 KV cache refuses on CUDA
        resolved = {"enable_hisparse": True, "kv_cache_dtype": kv,
                    "prefill": named["prefill"] or default, "decode": named["decode"] or default,
                    "backend": None}  # the backend list's entries are judged below, per label
        judged = ask.book.judge(ask.version, {**base, **resolved}, rules=rules)
        refusals.extend(r for r in judged.refusals if "TileLang" in r.message)
        notes.extend(judged.not_judged)
    allowed = sorted(_of(_HISPARSE_BACKENDS, ask.listed)[str(kv)])
    for label in ("prefill", "decode"):
        values = {**base, "label": label, "kv_cache_dtype": kv, "allowed_backends": set(allowed),
                  "sorted(allowed_backends)": allowed, "_hisparse_default_backend": default,
                  "enable_hisparse": False}  # the TileLang entry is judged above
        if named[label] is not None or not own_arm:
            values["backend"] = named[label]
        judged = ask.book.judge(ask.version, values, rules=rules)
        refusals.extend(judged.refusals)
        notes.extend(judged.not_judged)
    return Judged(tuple(refusals[:1]), tuple(dict.fromkeys(notes)))


def judge_page_major(ask: Ask) -> Judged:
    """``handle_page_major_kv_layout``'s full-attention backends (0.5.15+; 0.5.23 ``kv_cache_hook.py`` l.770-826;
    0.5.16 ``server_args.py`` l.6860-6876): it runs with ``--enable-page-major-kv-layout``, which
    ``--enable-unified-memory`` sets (l.775-780), and asserts the resolved prefill / decode backends
    (``attention_backends_of``, as for the FP4 check) in the release's list for the model (``_PAGE_MAJOR``). It runs
    after the speculative hook (0.5.23 ``pipeline.py`` l.336 after l.306): a line with speculative decoding, whose
    hooks may set the backends again, is not judged; nor is a backend SGLang picks that ``default_backend`` does not
    resolve, nor (0.5.23) a model whose config writes SWA head widths (``has_asymmetric_kv`` reads them).

    With ``--dcp-size`` > 1, ``handle_unified_memory_pool`` (run next, l.338) asserts the same backends in
    ``_validate_unified_memory_dcp``'s ``dcp_allowed`` (0.5.20+; 0.5.23 l.719-764, called at l.687-688)."""
    args, listed = ask.args, ask.listed
    rules = ask.among((PAGE_MAJOR_RULE, UNIFIED_DCP_RULE))
    unified = bool(args.get("enable_unified_memory"))
    if not rules or not (unified or args.get("enable_page_major_kv_layout")):
        return Judged()
    if listed >= _PAGE_MAJOR_NEEDS_UNIFIED and not unified:
        return Judged()  # the hook's first assert refuses
    values = {k: v for k, v in ask.values.items() if k not in ("backends", "allowed_full")}
    prefill, decode, _ = backends(args, ask.model, ask.layout)
    arch = ask.model.architectures[0] if ask.model.architectures else ""
    notes: list[str] = []
    config = ask.model.config_json or ""
    swa_dims = "swa_head_dim" in config or "swa_v_head_dim" in config
    if args.get("speculative_algorithm") is not None or arch.startswith(_BACKEND_FORCED) or (
            listed >= _ASYMMETRIC_SINCE and swa_dims and not ask.model.is_mla):
        prefill = decode = None
    if prefill is not None and decode is not None:
        values["backends"] = {prefill, decode}
    else:
        notes.append("the attention backends SGLang resolves for the page-major / unified KV layout are not "
                     "resolved: its backend checks are not judged")
    values["dcp_allowed"] = set(_of(_DCP_ALLOWED, listed))
    dcp = args.get("dcp_size")
    if not (unified and isinstance(dcp, int) and dcp > 1):
        rules = [r for r in rules if r != UNIFIED_DCP_RULE]
    mla, mha, other = _of(_PAGE_MAJOR, listed)
    asymmetric = ask.model.v_head_dim is not None and ask.model.v_head_dim != ask.model.head_dim
    if ask.model.is_mla:
        allowed = mla if unified or listed >= Version("0.5.22") else other
    elif listed >= _ASYMMETRIC_SINCE and asymmetric:
        allowed = _ASYMMETRIC_KV_BACKENDS
    else:
        allowed = mha if unified else other
    values["allowed_full"] = set(allowed)
    judged = ask.book.judge(ask.version, values, rules=rules)
    return Judged(judged.refusals, (*notes, *judged.not_judged) if judged.not_judged else ())


def judge(ask: Ask) -> Judged:
    """The KV4 rules for an FP4 ``--kv-cache-dtype`` (the function returns at once for any other), HiSparse's DSA
    backends, the page-major layout's backends."""
    parts = (judge_kv4(ask), judge_hisparse(ask), judge_page_major(ask))
    return Judged(tuple(r for p in parts for r in p.refusals), tuple(n for p in parts for n in p.not_judged))


def judge_kv4(ask: Ask) -> Judged:
    """The KV4 rules for an FP4 ``--kv-cache-dtype`` (the function returns at once for any other)."""
    if ask.args.get("kv_cache_dtype") not in _of(_FP4, ask.listed):
        return Judged()
    rules = ask.among(RULES)
    if not rules:
        return Judged()
    values, notes = frame(ask)
    judged = ask.book.judge(ask.version, values, rules=rules)
    return Judged(judged.refusals, (*notes, *judged.not_judged) if judged.not_judged else judged.not_judged)
