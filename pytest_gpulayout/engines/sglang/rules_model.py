"""SGLang's refusals of an attention backend for the GPU, the KV cache dtype or the model, by release.

``server_args.py`` ``_handle_attention_backend_compatibility`` (0.5.3 - 0.5.18; ``__post_init__`` in 0.4.10.post1 -
0.5.2), from 0.5.15 the passes of ``arg_groups/overrides.py`` it runs (``_mla_kv_cache_dtype_checks``) and from
0.5.19 ``arg_groups/attention_hook.py handle_attention_backend_compatibility`` refuse a backend the GPU does not
run (TRT-LLM MLA / MHA, tokenspeed MLA, CuteDSL MLA), a ``--kv-cache-dtype`` the MLA backend does not take and a
backend for the phase it does not serve; ``_handle_model_specific_adjustments`` (``arg_groups/model_hook.py
handle_model_specific_adjustments`` from 0.5.19, with ``arg_groups/deepseek_v4_hook.py`` and the override
registry's DeepSeek-V4 KV pass) refuses what the model's branch does not take: an attention backend it does not
list (GPT-OSS, Gemma 4, EXAONE 4, Moss-VL, the hybrid Lfm2 / Nemotron-H whose first layer may not be attention),
triton_kernel MoE with EP (GPT-OSS), DeepSeek-V4's KV dtypes and trtllm backend, Mamba's extra buffer;
``_handle_linear_attn_backend`` a linear-attention decode backend; ``handle_cache_compatibility`` (0.5.21+)
LMCache beside what it does not support; ``__post_init__`` (0.4.6 - 0.5.2) FlashInfer MoE
runners and DeepEP's auto mode; ``check_server_args`` (``arg_groups/validation_hook.py`` from 0.5.19) a served
model name with a colon and a few flag values. ``frame(args, model, layout, listed)`` gives the values those
entries read, as the release holds them there; ``RULES`` the rules (judged by ``config_checks.config_check`` in
this frame: ``attention_backend`` means something else to the Llama 4 rule, which reads it only where the line
sets it, and ``ep_size`` to the EPLB rule, which reads it after the all-to-all backend set it).

What the frame resolves, and why that is what the release reads:

- the GPU: ``is_sm90_supported()`` / ``is_sm100_supported()`` / ``is_sm120_supported()`` /
  ``is_blackwell_supported()`` (``get_platform().is_sm100`` ... from 0.5.19, the same functions:
  0.5.23 ``runtime_context.py:1831-1836``) from the layout's compute capability: the major is 9 / 10 / 12, or
  one of Blackwell's (10, 12 before 0.5.9: 0.5.8 ``utils/common.py:235-241``; 10, 11, 12 from 0.5.9: 0.5.9
  ``utils/common.py``, 0.5.23 ``utils/common.py:297-303``). The functions also ask torch's CUDA for 12.3 (SM90)
  / 12.8 (Blackwell): every SGLang wheel these rules judge runs a torch built for CUDA 12.4 or later, and a
  Blackwell GPU runs no CUDA older than 12.8, so the GPU decides. Unknown capability: nothing is claimed (the
  entries that read it are not judged);
- the backends: ``--attention-backend`` / ``--prefill-attention-backend`` / ``--decode-attention-backend`` as the
  line gives them. Where the line gives none, the release picks one before these checks read it (0.5.8
  ``server_args.py:1643-1695``, 0.5.23 ``arg_groups/overrides.py _attention_backend_default``; the model
  branches first: DeepSeek's trtllm_mla under ``is_sm100_supported()`` 0.5.8 L1201-1210, GPT-OSS's
  trtllm_mha / fa3 / triton L1259-1265) and picks only backends its GPU checks accept (trtllm_* under
  ``is_sm100_supported()``): unset is judged as None, which those checks refuse no more than the pick. The MLA
  KV dtype checks are an exception: on a Blackwell GPU an MLA model's pick may be trtllm_mla, whose dtype lists
  differ by release, so with a ``--kv-cache-dtype`` other than ``auto`` / ``fp8_e4m3`` and no backend on the
  line the entry is not judged. Kimi-K3 with DCP rewrites backends the line gives (0.5.19
  ``model_overrides/kimi_k3.py:78-105``) and DeepSeek-V4 keeps its own (``model_overrides/deepseek_v4.py``): for
  those models no backend is claimed;
- ``prefill_backend`` / ``decode_backend`` (``get_attention_backends()`` 0.5.8 L4768-4779, 0.5.23
  ``model_override_base.py:138-151 attention_backends_of``): the split flag, else ``attention_backend``;
- ``--kv-cache-dtype``: the line's, else ``auto``. DeepSeek's sparse-attention (DSA / NSA) models rewrite it
  before the MLA checks read it (``auto`` to fp8_e4m3 / bfloat16, ``bf16`` to ``bfloat16``: 0.5.6
  ``server_args.py:980-986``, 0.5.23 ``overrides.py:530-541``): for them it is not claimed; DeepSeek-V4's own
  default is resolved for its rules (``_deepseek_v4_values``);
- the model rules read the backend the model's branch holds: judged where the line gives ``--attention-backend``
  (each branch keeps a given backend); where it gives none the branch picks one it lists (GPT-OSS 0.5.1
  ``server_args.py:2228-2234``, 0.5.23 ``model_overrides/gpt_oss.py:29-44``; Gemma 4 0.5.13
  ``server_args.py:2377-2393``; Lfm2 / Nemotron-H pick flashinfer on SM100 or leave it unset, 0.5.9
  ``server_args.py:1699-1714``, 0.5.23 ``model_overrides/lfm2.py:13-17``), so nothing is refused. A split flag
  alone leaves the other side to a pick that differs by release (GPT-OSS keeps ``attention_backend`` None from
  0.5.3.post1, ``is_attention_backend_not_set``): not judged, said. EXAONE 4's and Moss-VL's branches differ:
  see ``EXAONE_PICKS_SINCE`` and ``frame``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

RULES: Mapping[str, str] = {
    "sglang.attention.gpu_arch": "an attention backend (TRT-LLM MLA / MHA, tokenspeed MLA, CuteDSL MLA) the GPU "
                                 "does not run",
    "sglang.attention.mla_kv_cache_dtype": "a --kv-cache-dtype the TRT-LLM / tokenspeed / CuteDSL MLA backend does "
                                           "not take",
    "sglang.attention.phase_only": "FA4 for decode (prefill only, 0.5.4 - 0.5.7), CuteDSL MLA for prefill "
                                   "(decode only, 0.5.13 - 0.5.14) or intel_xpu for an MLA model's prefill "
                                   "(0.5.11 - 0.5.19)",
    "sglang.gpt_oss.attention_backend": "GPT-OSS with an attention backend the release does not list for it",
    "sglang.gemma4.attention_backend": "Gemma 4 with an attention backend the release does not list for it",
    "sglang.nemotron_h.no_triton": "--attention-backend triton with Nemotron-H (its first layer may not be "
                                   "attention)",
    "sglang.lfm2.no_triton": "--attention-backend triton with Lfm2 (its first layer may not be attention)",
    "sglang.gpt_oss.triton_kernel_ep": "GPT-OSS with --moe-runner-backend triton_kernel and expert parallelism",
    "sglang.deepseek_v4.kv_cache_dtype": "DeepSeek-V4 with a --kv-cache-dtype the release does not serve it in",
    "sglang.deepseek_v4.trtllm": "DeepSeek-V4 with --dsv4-attn-backend trtllm off SM100, or with what it does "
                                 "not support (KV dtype, HiSparse, context parallelism, PD disaggregation, no "
                                 "chunked prefill)",
    "sglang.mamba.extra_buffer": "--mamba-scheduler-strategy extra_buffer with a hybrid model whose branch does "
                                 "not take it (Nemotron-H, Falcon-H1, Jet-Nemotron; 0.5.7 - 0.5.8.post1)",
    "sglang.linear_attn.decode_backend": "--linear-attn-decode-backend flashkda (prefill only), or FlashInfer "
                                         "linear-attention decode on SM100+ without --mamba-ssm-dtype bfloat16",
    "sglang.exaone4.attention_backend": "EXAONE 4 with sliding-window layers and an attention backend other than "
                                        "fa3 / triton / trtllm_mha (none given: refused before 0.5.22)",
    "sglang.moe_runner.flashinfer": "a FlashInfer MoE runner without the quantization (modelopt_fp4 / fp8) or the "
                                    "expert-parallel size it needs (0.4.8 - 0.5.2)",
    "sglang.moss_vl.prefill_backend": "Moss-VL with a prefill attention backend other than flashinfer "
                                      "(0.5.11+)",
    "sglang.deepep.auto_with_dp_attention": "--enable-deepep-moe in --deepep-mode auto with attention DP "
                                            "(0.4.6 - 0.4.8.post1)",
    "sglang.lmcache.incompatible": "--enable-lmcache with HiCache, the unified cache linker, radix cache off, "
                                   "attention DP, DCP, streaming sessions or PD disaggregation (0.5.21+)",
    "sglang.served_model_name.colon": "a served model name (--served-model-name, else --model-path) with a colon",
    "sglang.check.flag_values": "--gc-threshold of other than 1 - 3 numbers, --pp-max-micro-batch-size below 1, "
                                "--disable-cuda-graph-padding with --enable-torch-compile, --kv-canary-sweep-interval "
                                "without --kv-canary, --export-metrics-to-file without its folder, allowed custom "
                                "metric labels without their header",
}

#: the rules about one model family: judged for those architectures only (the release's ``elif`` chain over the
#: architecture; an earlier branch reads the config of other families, e.g. DeepSeek's ``is_deepseek_nsa``)
BY_ARCH: Mapping[str, tuple[str, ...]] = {
    "sglang.gpt_oss.attention_backend": ("GptOssForCausalLM",),
    "sglang.gemma4.attention_backend": ("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM",
                                        "Gemma4UnifiedForConditionalGeneration"),
    # 0.5.12 - 0.5.14 assert in ``arg_groups/nemotron_h_hook.py apply_nemotron_h_defaults``, whose entry has no
    # architecture condition: its callers' (0.5.12.post1 ``server_args.py:2280`` NemotronH; 0.5.13
    # L2470 and Puzzle, ``NEMOTRON_PUZZLE_SINCE``)
    "sglang.nemotron_h.no_triton": ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM"),
    "sglang.lfm2.no_triton": ("Lfm2ForCausalLM", "Lfm2MoeForCausalLM"),
    "sglang.gpt_oss.triton_kernel_ep": ("GptOssForCausalLM",),
    # ``arg_groups/deepseek_v4_hook.py apply_deepseek_v4_defaults`` and ``arg_groups/overrides.py
    # _deepseek_v4_kv_cache_dtype`` hold no architecture condition: the first is called for DeepseekV4ForCausalLM
    # only (0.5.12 ``server_args.py:1777-1784``, 0.5.23 ``arg_groups/model_hook.py:259-265``), the second returns
    # for any other (0.5.20 ``overrides.py:957``, 0.5.23 L898)
    "sglang.deepseek_v4.kv_cache_dtype": ("DeepseekV4ForCausalLM",),
    "sglang.deepseek_v4.trtllm": ("DeepseekV4ForCausalLM",),
    "sglang.exaone4.attention_backend": ("Exaone4ForCausalLM", "ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM"),
    "sglang.moss_vl.prefill_backend": ("MossVLForConditionalGeneration",),
    "sglang.mamba.extra_buffer": ("NemotronHForCausalLM", "FalconH1ForCausalLM", "JetNemotronForCausalLM",
                                  "JetVLMForConditionalGeneration"),
}
#: the first release whose Nemotron-H branch takes ``NemotronHPuzzleForCausalLM`` (0.5.13 ``server_args.py:2470``;
#: 0.5.12.post1 L2280 names NemotronH only, and its source names no Puzzle at all)
NEMOTRON_PUZZLE_SINCE = Version("0.5.13")
#: the model rules that read the pair of backends (``prefill_backend`` / ``decode_backend``)
_SPLIT_READERS = frozenset({"sglang.gpt_oss.attention_backend", "sglang.gemma4.attention_backend"})

#: ``supported_backends`` of the GPT-OSS branch, from the release it first reads so (read in every listed release
#: from 0.5.1: 0.5.1 ``server_args.py:2235``, 0.5.3.post1 L782, 0.5.8 L1267, 0.5.10 L1709, 0.5.11 L1901, 0.5.13
#: L2151, 0.5.19 ``arg_groups/model_hook.py:367``, 0.5.23 ``arg_groups/model_hook.py:523``)
GPT_OSS_BACKENDS: tuple[tuple[Version, list[str]], ...] = (
    (Version("0.5.1"), ["triton", "trtllm_mha", "fa3"]),
    (Version("0.5.3.post1"), ["triton", "trtllm_mha", "fa3", "fa4"]),
    (Version("0.5.8"), ["triton", "trtllm_mha", "fa3", "fa4", "ascend"]),
    (Version("0.5.10"), ["triton", "trtllm_mha", "fa3", "fa4", "ascend", "aiter"]),
    (Version("0.5.11"), ["triton", "trtllm_mha", "fa3", "fa4", "ascend", "intel_xpu", "aiter"]),
    (Version("0.5.13"), ["triton", "trtllm_mha", "fa3", "fa4", "ascend", "intel_amx", "intel_xpu", "aiter"]),
)
#: ``accepted_backends`` of the Gemma 4 branch (0.5.13 ``server_args.py:2395``, 0.5.14 L4078, 0.5.18 L5672, 0.5.20
#: ``arg_groups/model_hook.py:546``, 0.5.22 L640, 0.5.23 L646; read in every listed release from 0.5.13)
GEMMA4_BACKENDS: tuple[tuple[Version, tuple[str, ...]], ...] = (
    (Version("0.5.13"), ("trtllm_mha", "triton", "intel_xpu")),
    (Version("0.5.14"), ("trtllm_mha", "triton", "ascend", "intel_xpu")),
    (Version("0.5.18"), ("trtllm_mha", "triton", "ascend", "intel_xpu", "intel_amx")),
    (Version("0.5.20"), ("trtllm_mha", "triton", "ascend", "intel_xpu", "intel_amx", "aiter")),
    (Version("0.5.22"), ("trtllm_mha", "triton", "fa4", "ascend", "intel_xpu", "intel_amx", "aiter")),
)

#: Blackwell's majors for ``is_blackwell_supported``: 10 and 12 (0.5.6 ``utils/common.py:226-230``, 0.5.8
#: L235-241), and 11 (Thor) from 0.5.9 (``utils/common.py`` ``device_capability_majors=[10, 11, 12]``, read in
#: 0.5.9 - 0.5.23); 0.5.8.post1 is not read: a major-11 GPU there is not claimed
BLACKWELL_11_SINCE = Version("0.5.9")
_BLACKWELL_11_UNREAD = (Version("0.5.8"), Version("0.5.9"))   # strictly between: not read

#: models whose own branch rewrites backends the line gives (Kimi-K3 with DCP) or keeps its own (DeepSeek-V4)
_OWN_BACKENDS = ("KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM")
#: models whose branch rewrites ``--kv-cache-dtype`` before the MLA checks: DeepSeek's sparse attention (an
#: ``index_topk`` indexer) and DeepSeek-V4
_OWN_KV_DTYPE = ("DeepseekV4ForCausalLM",)
#: ``--kv-cache-dtype`` values every MLA backend list of every release takes (TRT-LLM MLA ``['fp8_e4m3', 'auto']``
#: 0.5.3 ``server_args.py:910``; CuteDSL ``['fp8_e4m3', 'bf16', 'bfloat16', 'auto']``; tokenspeed MLA's
#: ``['fp8_e4m3']``, which only Kimi-K3 picks, with ``kv_cache_dtype="fp8_e4m3"``: 0.5.19
#: ``model_overrides/kimi_k3.py:96-102``)
_KV_ANY_MLA = frozenset({"auto", "fp8_e4m3"})

#: the module constants the 0.5.11 - 0.5.14 model ``elif`` chain names its branches by (the same in each:
#: 0.5.11 ``server_args.py:80-87``, 0.5.14 L107-114)
ARCH_CONSTANTS: Mapping[str, tuple[str, ...]] = {
    "MIMO_V2_MODEL_ARCHS": ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM"),
    "LLAMA4_MODEL_ARCHS": ("Llama4ForConditionalGeneration", "Llama4ForCausalLM"),
}

#: the flags ``check_server_args`` reads in the entries of ``sglang.check.flag_values``, as the line gives them
#: or as the parser defaults them: no post-processing before it writes them (it runs last: 0.5.18
#: ``server_args.py`` ``__post_init__`` ... ``check_server_args``; 0.5.23 ``arg_groups/validation_hook.py:172``)
CHECKED_AS_GIVEN = ("gc_threshold", "pp_max_micro_batch_size", "disable_cuda_graph_padding", "enable_torch_compile",
                    "kv_canary", "kv_canary_sweep_interval", "export_metrics_to_file", "export_metrics_to_file_dir",
                    "tokenizer_metrics_custom_labels_header", "tokenizer_metrics_allowed_custom_labels")
#: ``is_runai_obj_uri``: a name starting with one of these (0.5.10 - 0.5.23 ``utils/runai_utils.py``
#: ``SUPPORTED_SCHEMES``, lowered)
RUNAI_SCHEMES = ("s3://", "gs://", "az://")

#: ``accepted_backends`` of the EXAONE 4 branch, the same in every release that has it (0.5.9 ``server_args.py:1495``,
#: 0.5.15 L4155, 0.5.23 ``arg_groups/model_hook.py:677``)
EXAONE_BACKENDS = ["fa3", "triton", "trtllm_mha"]
#: the first release whose EXAONE override picks a backend where none is given (0.5.22
#: ``model_overrides/exaone.py:16-29``: trtllm_mha on SM100, fa3 from SM80, else triton); before, the branch
#: reads the unset backend, None, and refuses it (0.5.9 ``server_args.py:1488-1498``; 0.5.19 - 0.5.21 read
#: ``resolved_view(...).attention_backend``, which answers the line's value until a resolver claims it)
EXAONE_PICKS_SINCE = Version("0.5.22")

#: the deprecated runner flags ``__post_init__`` turns into ``--moe-runner-backend`` before any check reads it, in
#: the order it does (0.5.1 ``server_args.py:320-334``, 0.5.2 L417-434)
_DEPRECATED_RUNNER_FLAGS = (("enable_triton_kernel_moe", "triton_kernel"),
                            ("enable_flashinfer_cutlass_moe", "flashinfer_cutlass"),
                            ("enable_flashinfer_trtllm_moe", "flashinfer_trtllm"),
                            ("enable_flashinfer_mxfp4_moe", "flashinfer_mxfp4"))
#: the MoE flags the 0.4.8 - 0.4.10.post2 checks read as given (0.4.9.post3 ``server_args.py:274-277``, 0.4.10.post2
#: L473-482); ``--enable-ep-moe`` also sets ``ep_size`` to TP first (L286-287)
_FLASHINFER_MOE_FLAGS = ("enable_flashinfer_moe", "enable_flashinfer_cutlass_moe", "enable_flashinfer_trtllm_moe",
                         "enable_ep_moe")

#: the GPU's major as ``torch.cuda.get_device_capability()[0]`` reads it (the linear-attention checks)
CAPABILITY_MAJOR = "torch.cuda.get_device_capability()[0]"

#: from 0.5.15 the GPT-OSS branch reads ``ep_size`` through the resolved view (``self._resolved().ep_size``,
#: ``resolved_view(server_args).ep_size`` from 0.5.19), which may already hold what the all-to-all backend sets:
#: with one on the line the size is not claimed. Before, the branch runs ahead of ``_handle_a2a_moe`` (0.5.8
#: ``server_args.py:713`` / :731; 0.5.1 L432 / L570), which sets ``ep_size = tp_size`` for DeepEP: the line's size
EP_RESOLVED_SINCE = Version("0.5.15")

T = TypeVar("T")

BACKEND_FLAGS = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")


@dataclass(frozen=True)
class Frame:
    """What the rules of this module read (``values``), which of them to judge (``rules``) and what the frame
    could not resolve for them, in words (``notes``)."""

    values: dict[str, object]
    rules: tuple[str, ...]
    notes: tuple[str, ...] = ()


def _by_release(table: tuple[tuple[Version, T], ...], listed: Version) -> T | None:
    chosen: T | None = None
    for since, value in table:
        if listed >= since:
            chosen = value
    return chosen


def gpu_values(layout: Layout, listed: Version) -> dict[str, object]:
    """``is_sm90_supported`` ... as the release answers them on the layout's GPU (none when it is unknown)."""
    cc = layout.compute_capability
    if cc is None:
        return {}
    major = cc[0]
    out: dict[str, object] = {
        "is_sm90_supported": major == 9, "is_sm100_supported": major == 10, "is_sm120_supported": major == 12,
    }
    if major != 11:
        out["is_blackwell_supported"] = major in (10, 12)
    elif not _BLACKWELL_11_UNREAD[0] < listed < _BLACKWELL_11_UNREAD[1]:
        out["is_blackwell_supported"] = listed >= BLACKWELL_11_SINCE
    # ``get_platform().is_sm100`` (0.5.19+) answers by the attribute's name
    out.update({short: out[name] for short, name in (("is_sm90", "is_sm90_supported"),
                                                     ("is_sm100", "is_sm100_supported"),
                                                     ("is_sm120", "is_sm120_supported"),
                                                     ("is_blackwell", "is_blackwell_supported")) if name in out})
    return out


def _given(args: ResolvedArgs, dest: str) -> object:
    return args.get(dest) if args.is_set(dest) else None


def frame(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version) -> Frame:
    """The values of ``RULES``'s entries at ``listed`` (the module docstring says how each is resolved)."""
    arch = model.architectures[0] if model.architectures else ""
    values: dict[str, object] = {"model_arch": arch, **ARCH_CONSTANTS, **gpu_values(layout, listed)}
    notes: list[str] = []
    rules = [r for r in RULES if r not in BY_ARCH or arch in BY_ARCH[r]]
    if arch == "NemotronHPuzzleForCausalLM" and listed < NEMOTRON_PUZZLE_SINCE:
        rules.remove("sglang.nemotron_h.no_triton")
    given = {dest: _given(args, dest) for dest in BACKEND_FLAGS}
    any_given = any(v is not None for v in given.values())
    blackwell_class = layout.compute_capability is None or layout.compute_capability[0] in (10, 11, 12)

    kv = args.get("kv_cache_dtype") if args.is_set("kv_cache_dtype") else "auto"
    if arch not in _OWN_KV_DTYPE and model.index_head_dim is None:
        values["kv_cache_dtype"] = kv

    if arch not in _OWN_BACKENDS:
        values.update(given)
        attn = given["attention_backend"]
        values["prefill_backend"] = values["prefill_attn_backend"] = given["prefill_attention_backend"] or attn
        values["decode_backend"] = values["decode_attn_backend"] = given["decode_attention_backend"] or attn
        if not any_given and blackwell_class and model.is_mla and kv not in _KV_ANY_MLA:
            # the release's own pick for an MLA model on a Blackwell GPU may be an MLA backend (DeepSeek's
            # trtllm_mla) whose dtype list this dtype is not in; an MHA model is given none
            rules.remove("sglang.attention.mla_kv_cache_dtype")
            notes.append(f"{arch}: --kv-cache-dtype {kv} against the attention backend SGLang picks on this GPU "
                         "(none given) is not judged")
    else:
        own = ("sglang.attention.gpu_arch", "sglang.attention.mla_kv_cache_dtype", "sglang.attention.phase_only")
        rules = [r for r in rules if r not in own]
        if any_given:
            notes.append(f"{arch}: the attention backends its own branch of SGLang {listed} sets in place of the "
                         "line's are not resolved")

    for rule in [r for r in rules if r in _SPLIT_READERS]:
        if given["attention_backend"] is None:
            rules.remove(rule)        # none given: the branch picks one it lists; a split flag alone: below
            if any_given:
                notes.append(f"{arch}: the attention backend SGLang {listed} gives the side the line's "
                             "--prefill/--decode-attention-backend leaves unset is not resolved")
    listed_gpt = _by_release(GPT_OSS_BACKENDS, listed)
    if listed_gpt is not None:
        values["supported_backends"] = listed_gpt
    listed_gemma = _by_release(GEMMA4_BACKENDS, listed)
    if listed_gemma is not None and arch in BY_ARCH["sglang.gemma4.attention_backend"]:
        values["accepted_backends"] = listed_gemma
    if arch == "MossVLForConditionalGeneration" and not any_given:
        # the branch makes flashinfer the prefill backend when none is set (0.5.12 ``server_args.py:2228-2234``);
        # a split flag alone leaves the prefill side as the line has it, which the assert reads (L2234-2235)
        values["prefill_backend"] = "flashinfer"
    if "sglang.exaone4.attention_backend" in rules:
        values.update(_exaone_values(model, layout, listed, given["attention_backend"]))
    values["is_mps"] = False
    values["use_mlx"] = False
    # ``use_mla_backend()``: the model caches one latent per token (0.5.14 ``server_args.py:4688``)
    values["use_mla_backend"] = model.is_mla
    values.update(_checked_values(args))
    values.update(_pipeline_values(args, model, layout))
    values.update(_lmcache_values(args))
    if "deepep_mode" in args.values:
        # as given: ``__post_init__`` reads them first (0.4.6 ``server_args.py:303-307``); ``enable_dp_attention`` and
        # ``enable_deepep_moe`` are the shared namespace's
        values["deepep_mode"] = args.get("deepep_mode")
    values.update(_gpt_oss_moe_values(args, model, layout, listed))
    if arch == "DeepseekV4ForCausalLM":
        values.update(_deepseek_v4_values(args, kv, layout, listed))
    if "linear_attn_backend" in args.values:
        values.update(_linear_attn_values(args, layout))
    if "mamba_scheduler_strategy" in args.values:
        # ``enable_mamba_extra_buffer()``: ``mamba_scheduler_strategy == "extra_buffer"`` (0.5.8 L4794-4795), its
        # ``auto`` made ``no_buffer`` first (0.5.7 ``server_args.py:765-769``)
        values["enable_mamba_extra_buffer"] = args.get("mamba_scheduler_strategy") == "extra_buffer"
    return Frame(values, tuple(rules), tuple(notes))


def _deepseek_v4_values(args: ResolvedArgs, kv: object, layout: Layout, listed: Version) -> dict[str, object]:
    """What DeepSeek-V4's defaults read: the KV cache dtype after its default (``auto`` is ``fp8_e4m3`` on CUDA:
    0.5.12 ``deepseek_v4_hook.py:27-28``, 0.5.23 ``overrides.py:902-904``, before the trtllm checks read it:
    0.5.23 ``deepseek_v4_hook.py:83`` / :101), ``--dsv4-attn-backend`` (whose ``auto`` the release resolves to
    flashmla or flashmla_mega, never trtllm: 0.5.23 ``deepseek_v4_hook.py:45-60``), ``--enable-hisparse`` and
    ``--chunked-prefill-size``: the line's, else the GPU-memory default, which the memory hook sets before the
    model's (0.5.20 ``arg_groups/pipeline.py:205`` / :212, 0.5.23 L218 / L225; ``engine.chunk_and_graph_defaults``:
    positive in every tier) and which is not claimed where the GPU's memory is unknown. A dtype the default pass
    refuses (``sglang.deepseek_v4.kv_cache_dtype``) is refused there first."""
    from pytest_gpulayout.engines.sglang.engine import chunk_and_graph_defaults  # engine imports the checks

    resolved = "fp8_e4m3" if kv == "auto" else kv
    out: dict[str, object] = {"kv_cache_dtype": resolved}
    for dest in ("dsv4_attn_backend", "enable_hisparse"):
        if dest in args.values:
            out[dest] = args.get(dest)
    if args.is_set("chunked_prefill_size"):
        out["chunked_prefill_size"] = args.get("chunked_prefill_size")
    elif layout.gpu_total_mib is not None:
        out["chunked_prefill_size"] = chunk_and_graph_defaults(listed, layout.gpu_total_mib,
                                                               layout.tensor_parallel_size)[0]
    return out


def _gpt_oss_moe_values(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version) -> dict[str, object]:
    """What the GPT-OSS branch's triton_kernel assert reads: the MoE runner (``--moe-runner-backend``, or
    ``triton_kernel`` for the deprecated ``--enable-triton-kernel-moe``, which ``__post_init__`` turns into it
    first: 0.5.1 ``server_args.py:320-321``), the expert-parallel size as the branch sees it (the deprecated
    ``--enable-ep-moe`` sets it to TP first, 0.5.1 L310-311; ``EP_RESOLVED_SINCE``) and whether the checkpoint is
    MXFP4 (``quantization_config.quant_method == "mxfp4"``, 0.5.3 L756-759). Without the runner on the line it is
    ``auto``, which the branch turns into triton_kernel only at ``ep_size == 1`` (0.5.3 L772-777, 0.5.8 L1311):
    nothing to refuse."""
    runner = args.get("moe_runner_backend", "auto") if args.is_set("moe_runner_backend") else "auto"
    if "moe_runner_backend" in args.values:
        for flag, backend in _DEPRECATED_RUNNER_FLAGS:
            if args.is_set(flag) and args.get(flag):
                runner = backend
    out: dict[str, object] = {"moe_runner_backend": runner,
                              "is_mxfp4_quant_format": model.quantization is not None
                              and model.quantization.method == "mxfp4",
                              # ``--quantization`` as given: ``__post_init__`` sets it only for GGUF (0.5.2
                              # ``server_args.py:801``) after these checks
                              "quantization": args.get("quantization") if args.is_set("quantization") else None}
    for flag in _FLASHINFER_MOE_FLAGS:
        if flag in args.values:
            out[flag] = bool(args.get(flag))
    a2a = args.get("moe_a2a_backend")
    if args.is_set("enable_ep_moe") and args.get("enable_ep_moe"):
        out["ep_size"] = layout.tensor_parallel_size
    elif listed < EP_RESOLVED_SINCE or a2a in (None, "none"):
        # ``--ep-size`` is ``expert_parallel_size`` to the parser where it is also spelled ``--expert-parallel-size``
        # (0.5.8 ``server_args.py:3756-3760``), copied to ``ep_size`` in ``from_cli_args`` (L4748)
        given = [args.get(d) for d in ("ep_size", "expert_parallel_size") if args.is_set(d)]
        out["ep_size"] = given[0] if given and given[0] is not None else 1
    return out


def _checked_values(args: ResolvedArgs) -> dict[str, object]:
    """The flags of ``check_server_args``'s value checks, and the served name: ``--served-model-name``, else the
    model path (``__post_init__``: ``if self.served_model_name is None: self.served_model_name =
    self.model_path``, 0.5.9 ``server_args.py:849-850``; 0.5.23 ``arg_groups/serving_hook.py:642-646``)."""
    out: dict[str, object] = {dest: args.get(dest) for dest in CHECKED_AS_GIVEN if dest in args.values}
    served = args.get("served_model_name") or args.get("model_path")
    if isinstance(served, str):
        out["served_model_name"] = served
        out["is_runai_obj_uri"] = served.lower().startswith(RUNAI_SCHEMES)
    return out


def _linear_attn_values(args: ResolvedArgs, layout: Layout) -> dict[str, object]:
    """What ``_handle_linear_attn_backend`` reads (every model: 0.5.10 ``server_args.py:2583-2598``, 0.5.15 L2725,
    0.5.23 ``arg_groups/pipeline.py:253`` / ``attention_hook.py:281-345``): ``decode`` is
    ``--linear-attn-decode-backend`` or ``--linear-attn-backend`` (L2587; 0.5.23 L310). From 0.5.14 an unset
    decode backend becomes flashinfer on SM100 only when ``--mamba-ssm-dtype bfloat16`` is given (0.5.23
    L289-303), which the check then takes: judged as the base backend, the same verdict. ``--mamba-ssm-dtype`` is
    the line's, None when not given (nothing sets it before the check: it is read from the model's config later,
    0.5.14 ``server_args.py:1720-1726``), and None is not bfloat16 to the check."""
    decode_given = args.get("linear_attn_decode_backend") if args.is_set("linear_attn_decode_backend") else None
    out: dict[str, object] = {
        "linear_attn_decode_backend": decode_given,
        "decode": decode_given or args.get("linear_attn_backend"),
        "mamba_ssm_dtype": args.get("mamba_ssm_dtype") if args.is_set("mamba_ssm_dtype") else None,
        "is_available": True,            # torch.cuda.is_available(): a CUDA GPU
    }
    if layout.compute_capability is not None:
        out[CAPABILITY_MAJOR] = layout.compute_capability[0]
    return out


def _exaone_values(model: ModelSpec, layout: Layout, listed: Version, given: object) -> dict[str, object]:
    """What the EXAONE 4 branch reads: ``hf_config.sliding_window_pattern`` as the checkpoint's ``config.json``
    writes it (absent: not claimed, the config class may default it), its backend list, and the backend: the
    line's, else None before ``EXAONE_PICKS_SINCE`` and the override's pick from it (None where the GPU is
    unknown)."""
    out: dict[str, object] = {"accepted_backends": EXAONE_BACKENDS}
    try:
        config = json.loads(model.config_json) if model.config_json else {}
    except ValueError:
        config = {}
    if isinstance(config, dict) and "sliding_window_pattern" in config:
        out["hf_config.sliding_window_pattern"] = config["sliding_window_pattern"]
    backend = given
    if backend is None and listed >= EXAONE_PICKS_SINCE:
        cc = layout.compute_capability
        backend = None if cc is None else "trtllm_mha" if cc[0] == 10 else "fa3" if cc >= (8, 0) else "triton"
        if backend is None:
            return {k: v for k, v in out.items() if k != "accepted_backends"}
    out["attention_backend"] = backend
    return out


def _pipeline_values(args: ResolvedArgs, model: ModelSpec, layout: Layout) -> dict[str, object]:
    """What ``check_server_args``'s pipeline assert reads: the overlap schedule, off whenever PP > 1 (0.4.6.post2
    - 0.5.14 ``if self.pp_size > 1: self.disable_overlap_schedule = True``, 0.5.10.post1 ``server_args.py:2854-2855``;
    from 0.5.16 ``arg_groups/overrides.py _pipeline_parallel_overlap_disable``), ``--speculative-algorithm`` as
    given (not claimed where only a draft model is given: the release may infer an algorithm from it) and
    ``--enable-mixed-chunk`` as given, which speculative decoding (then refused anyway) and a dual-chunk attention
    model turn off first (0.5.3 ``server_args.py:930-934``: ``dual_chunk_attention_config`` in the config, not
    claimed where the checkpoint's config is not at hand)."""
    out: dict[str, object] = {}
    pp = layout.pipeline_parallel_size
    given_overlap = bool(args.get("disable_overlap_schedule", False))
    out["disable_overlap_schedule"] = True if pp > 1 else given_overlap
    algo = args.get("speculative_algorithm") if args.is_set("speculative_algorithm") else None
    draft_only = args.is_set("speculative_draft_model_path") and bool(args.get("speculative_draft_model_path"))
    if algo is not None or not draft_only:
        out["speculative_algorithm"] = algo
    if "enable_mixed_chunk" in args.values:
        mixed = bool(args.get("enable_mixed_chunk"))
        try:
            config = json.loads(model.config_json) if model.config_json else None
        except ValueError:
            config = None
        if mixed and not isinstance(config, dict):
            return out                     # a dual-chunk model would turn it off: not claimed
        if mixed and config is not None and config.get("dual_chunk_attention_config") is not None:
            mixed = False
        out["enable_mixed_chunk"] = mixed
    return out


#: the flags ``handle_cache_compatibility``'s LMCache checks read as the line gives them (0.5.23
#: ``arg_groups/kv_cache_hook.py:433-474``); attention DP, DCP and the disaggregation mode are the shared namespace's
LMCACHE_AS_GIVEN = ("enable_lmcache", "enable_hierarchical_cache", "enable_unified_cache_external_linker",
                    "enable_streaming_session")


def _lmcache_values(args: ResolvedArgs) -> dict[str, object]:
    """The LMCache checks' flags; ``--disable-radix-cache`` only where the line gives it: several branches turn the
    radix cache off on their own before the check (a hybrid model's Mamba cache, deterministic inference, an
    encoder-decoder model: 0.5.23 ``model_hook.py:219``, ``attention_hook.py:177`` / :661), which is not resolved."""
    out: dict[str, object] = {dest: bool(args.get(dest)) for dest in LMCACHE_AS_GIVEN if dest in args.values}
    if "enable_lmcache" in out and args.is_set("disable_radix_cache") and args.get("disable_radix_cache"):
        out["disable_radix_cache"] = True
    return out


def judge(ask: Ask) -> Judged:
    """The rules ``frame`` names, in that frame over the shared namespace, and what it could not resolve."""
    framed = frame(ask.args, ask.model, ask.layout, ask.listed)
    in_frame = ask.book.judge(ask.version, {**ask.values, **framed.values}, rules=framed.rules)
    return Judged(in_frame.refusals, framed.notes + in_frame.not_judged)
