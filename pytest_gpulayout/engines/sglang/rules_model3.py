"""SGLang's refusals of DeepSeek sparse attention (DSA / NSA) settings, of the serving-frontend flags and of the
flag checks of ``check_server_args`` and its validation hooks, by release.

- DeepSeek-V3.2's sparse attention (``_handle_model_specific_adjustments``): the KV cache dtype after the branch's
  own default (0.5.4.post2 - 0.5.8.post1), prefill context parallelism on more than one node or with attention DP
  in the round-robin / interleave split (0.5.6 - 0.5.14), and ``--enable-dsa-cache-layer-split`` without prefill
  CP in the interleave strategy or with PP (0.5.16 - 0.5.18). ``is_deepseek_nsa`` / ``is_deepseek_dsa``: the
  architecture SGLang reads and an ``index_topk`` the checkpoint's ``config.json`` writes. Up to 0.5.11 SGLang
  loads a ``model_type: deepseek_v32`` config, which the transformers it pins (4.57.1 to 0.5.9, 5.3.0 / 5.6.0 in
  0.5.10 / 0.5.11: ``Requires-Dist`` of each wheel) does not know, as ``DeepseekV3ForCausalLM`` (0.5.8
  ``utils/hf_transformers_utils.py:166-195`` ``_load_deepseek_v32_model`` rewrites ``architectures``, called on the
  ValueError naming ``deepseek_v32``, L277-283; 0.5.11 ``utils/hf_transformers/common.py:317-345``); from 0.5.12 a
  config alias keeps the checkpoint's ``DeepseekV32ForCausalLM`` (0.5.12 ``utils/hf_transformers/common.py
  :120-126``). The 0.5.6 - 0.5.10 branches list ``DeepseekV3ForCausalLM`` only, so this decides whether V3.2 is
  checked there;
- the serving frontend: ASR buffer limits, the multimodal cache / process config / modality limits, the chat
  template kwargs, watermarking in the preferred sampling parameters, the two tokenizer batching modes, the
  metric-label and metric-file flags of 0.5.3 - 0.5.6.post2, the multimodal feature transport and DeepSeek-V4's FP4
  indexer against the GPU;
- ``check_server_args`` (``arg_groups/validation_hook.py`` from 0.5.19) and the validation hooks: a gRPC port equal
  to ``--port``, two-batch overlap with enforced shared-experts fusion (0.5.12 - 0.5.13), ``--min-free-slots-delay``
  with PP, PD-Multiplexing with chunked prefill, ``--sampling-backend intel_xpu`` off XPU, the prefill / decode
  interval and sampling-mask bounds, PLE offload against layer offload, and the two prefill-CP spellings together.

``frame(args, model, layout, listed)`` gives the values those entries read, in a frame of its own (``model_arch``
is the architecture SGLang reads, ``kv_cache_dtype`` the DSA branch's, ``requested_transport`` the transport's).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang.rules_model import Frame, gpu_values
from pytest_gpulayout.engines.sglang.rules_model2 import is_deepseek_dsa
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

RULES: Mapping[str, str] = {
    "sglang.dsa.kv_cache_dtype": "DeepSeek-V3.2 (NSA) with a --kv-cache-dtype other than bf16 / bfloat16 / fp8_e4m3 "
                                 "(0.5.4.post2 - 0.5.8.post1)",
    "sglang.dsa.prefill_cp": "DeepSeek-V3.2 prefill context parallelism with --tp-size other than 8 (0.5.6 - 0.5.11) "
                             "or above 8 (0.5.12 - 0.5.14), or with --dp-size > 1 in the round-robin / interleave "
                             "split",
    "sglang.dsa.cache_layer_split": "--enable-dsa-cache-layer-split without --enable-prefill-cp in the interleave "
                                    "strategy, or with PP (0.5.16+)",
    "sglang.serving.flag_values": "non-positive ASR limits, a negative multimodal cache size, a --mm-process-config "
                                  "or --default-chat-template-kwargs that is not a JSON object, an unknown modality "
                                  "in --limit-mm-data-per-request, watermark in --preferred-sampling-params, both "
                                  "tokenizer batching modes, metric labels / file export without their companion "
                                  "flag",
    "sglang.mm_feature_transport": "--mm-feature-transport cuda_ipc (or --keep-mm-feature-on-device) on more than one "
                                   "node, cuda_vmm with PP, --keep-mm-feature-on-device against another transport",
    "sglang.deepseek_v4.fp4_indexer_gpu": "--enable-deepseek-v4-fp4-indexer off SM100 (and, from 0.5.17, SM120)",
    "sglang.check.grpc_port": "a --grpc-port equal to --port without the legacy gRPC mode (0.5.16+)",
    "sglang.check.tbo_shared_experts_fusion": "--enable-two-batch-overlap with enforced shared-experts fusion "
                                              "(0.5.12 - 0.5.13)",
    "sglang.check.min_free_slots_delay_pp": "--min-free-slots-delay with pipeline parallelism (0.5.18+)",
    "sglang.pdmux.chunked_prefill": "--enable-pdmux with chunked prefill on (a --chunked-prefill-size other than -1)",
    "sglang.sampling_backend.intel_xpu": "--sampling-backend intel_xpu on a device other than XPU (0.5.21+)",
    "sglang.check.interval_values": "a negative --prefill-decode-interval / --prefill-decode-interval-min-bs, a "
                                    "non-positive --sampling-mask-max-tokens, --ple-offload-embedding with layer "
                                    "offload or the file backend without it",
    "sglang.prefill_cp.two_spellings": "--enable-prefill-context-parallel with --enable-nsa-prefill-context-parallel "
                                       "(0.5.13 - 0.5.19)",
}

#: ``is_deepseek_nsa``'s architectures (``is_deepseek_dsa`` from 0.5.13), by the first release of each list: 0.5.4
#: - 0.5.6 ``configs/model_config.py`` (0.5.6 L53-63), Mistral Large 3 / Pixtral from 0.5.6.post1, GLM-5 from 0.5.9
#: (the same through 0.5.15); from 0.5.16 ``rules_model2.DSA_ARCHS``
_NSA_0504 = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN")
_NSA_0561 = (*_NSA_0504, "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration")
NSA_ARCHS: tuple[tuple[Version, tuple[str, ...]], ...] = (
    (Version("0.5.4"), _NSA_0504),
    (Version("0.5.6.post1"), _NSA_0561),
    (Version("0.5.9"), (*_NSA_0561, "GlmMoeDsaForCausalLM")),
)
DSA_LIST_SINCE = Version("0.5.16")
#: the first release that reads a ``deepseek_v32`` config under its own architecture (see the module docstring)
V32_ARCH_KEPT_SINCE = Version("0.5.12")
#: the first release whose DSA branch runs the legacy prefill-CP aliases first (0.5.14 ``server_args.py:2482``
#: ``_handle_legacy_cp_arguments`` before ``_handle_model_specific_adjustments`` L2533; L4933-4960)
CP_ALIASES_SINCE = Version("0.5.14")
#: the legacy split modes as strategies (0.5.14 ``server_args.py:4933-4936``)
LEGACY_MODE_TO_STRATEGY: Mapping[str, str] = {"in-seq-split": "zigzag", "round-robin-split": "interleave"}
#: the releases whose DSA branch forces ``kv_cache_dtype = "bf16"`` under prefill CP: always in 0.5.6 - 0.5.7
#: (0.5.6 ``server_args.py:957``), in the in-seq split only from 0.5.8 (0.5.8 L1120-1126)
CP_BF16_ALWAYS = (Version("0.5.6"), Version("0.5.8"))
#: the modalities ``--limit-mm-data-per-request`` takes (0.5.7 ``server_args.py:2426``, 0.5.23
#: ``arg_groups/serving_hook.py:600``)
ALLOWED_MODALITIES = {"image", "video", "audio"}
#: the keys of ``--mm-process-config`` that must hold objects (0.5.11 ``server_args.py:1010``; 0.5.23
#: ``serving_hook.py:153``)
MM_PROCESS_KEYS = ("image", "video", "audio")

#: the flags these entries read as the line gives them or as the parser defaults them (nothing before their checks
#: writes them)
AS_GIVEN = ("asr_max_buffer_seconds", "asr_max_concurrent_sessions", "mm_preprocess_cache_size_mb",
            "enable_tokenizer_batch_encode", "enable_dynamic_batch_tokenizer", "tokenizer_metrics_custom_labels_header",
            "tokenizer_metrics_allowed_custom_labels", "export_metrics_to_file", "export_metrics_to_file_dir",
            "enable_deepseek_v4_fp4_indexer", "prefill_decode_interval",
            "prefill_decode_interval_min_bs", "sampling_mask_max_tokens", "cpu_offload_gb", "offload_group_size",
            "enable_dsa_cache_layer_split", "enable_prefill_context_parallel", "min_free_slots_delay")

_INSTANCE_SCHEME = "instance://"


def _given(args: ResolvedArgs, dest: str) -> object:
    return args.get(dest) if args.is_set(dest) else None


def _config(model: ModelSpec) -> dict[str, object] | None:
    try:
        config = json.loads(model.config_json) if model.config_json else None
    except ValueError:
        return None
    return config if isinstance(config, dict) else None


def model_arch(model: ModelSpec, listed: Version) -> str:
    """``hf_config.architectures[0]`` as ``listed`` loads the checkpoint (see the module docstring)."""
    arch = model.architectures[0] if model.architectures else ""
    config = _config(model)
    v32 = config is not None and config.get("model_type") == "deepseek_v32"
    return "DeepseekV3ForCausalLM" if v32 and listed < V32_ARCH_KEPT_SINCE else arch


def is_deepseek_nsa(model: ModelSpec, arch: str, listed: Version) -> bool | None:
    """``is_deepseek_nsa(hf_config)`` at ``listed``: an architecture of its list and an ``index_topk`` that is not
    None; None (not claimed) for one of the list whose ``config.json`` is not at hand or does not write it."""
    config = _config(model)
    if arch in _NSA_0504 and config is not None and "index_topk" not in config:
        return False    # transformers' DeepseekV3Config (which the V3.2 alias extends) defines no index_topk
    if listed >= DSA_LIST_SINCE:
        return is_deepseek_dsa(model, listed)
    archs = next((a for since, a in reversed(NSA_ARCHS) if listed >= since), NSA_ARCHS[0][1])
    if arch not in archs:
        return False
    if config is None or "index_topk" not in config:
        return None
    return config["index_topk"] is not None


def _dsa_values(args: ResolvedArgs, model: ModelSpec, listed: Version, rules: list[str],
                notes: list[str]) -> dict[str, object]:
    """The DSA branch's values: the architecture SGLang reads, ``is_deepseek_nsa`` / ``is_deepseek_dsa``, the prefill
    CP flags (legacy spellings as given before 0.5.14; from 0.5.14 after ``_handle_legacy_cp_arguments``) and the KV
    cache dtype after the branch's default and rewrites (``auto`` to fp8_e4m3 / bfloat16 by the GPU, both taken,
    ``bf16`` to ``bfloat16``: 0.5.6 ``server_args.py:978-990``)."""
    arch = model_arch(model, listed)
    out: dict[str, object] = {"model_arch": arch}
    nsa = is_deepseek_nsa(model, arch, listed)
    dsa_rules = ("sglang.dsa.kv_cache_dtype", "sglang.dsa.prefill_cp", "sglang.dsa.cache_layer_split")
    if nsa is None:
        for rule in dsa_rules:
            rules.remove(rule)
        flags = ("enable_nsa_prefill_context_parallel", "enable_dsa_prefill_context_parallel", "enable_prefill_cp",
                 "enable_dsa_cache_layer_split", "kv_cache_dtype")
        if any(args.is_set(f) and args.get(f) not in (False, None, "auto") for f in flags):
            notes.append(f"{arch}: whether its config makes it a DeepSeek sparse-attention model (index_topk) is not "
                         "read: its DSA checks are not judged")
        return out
    out["is_deepseek_nsa"] = out["is_deepseek_dsa"] = nsa
    for dest in ("enable_nsa_prefill_context_parallel", "nsa_prefill_cp_mode", "enable_dsa_prefill_context_parallel",
                 "dsa_prefill_cp_mode", "enable_prefill_cp", "cp_strategy", "prefill_cp_mode"):
        if dest in args.values:
            out[dest] = args.get(dest)
    if listed >= CP_ALIASES_SINCE:
        legacy, dsa_legacy = bool(args.get("enable_prefill_context_parallel")), bool(
            args.get("enable_dsa_prefill_context_parallel"))
        strategy = args.get("cp_strategy")
        if legacy and strategy is None:
            strategy = LEGACY_MODE_TO_STRATEGY.get(str(args.get("prefill_cp_mode")))
        if dsa_legacy and strategy is None:
            strategy = LEGACY_MODE_TO_STRATEGY.get(str(args.get("dsa_prefill_cp_mode")))
        out["enable_prefill_cp"] = bool(args.get("enable_prefill_cp")) or legacy or dsa_legacy
        out["cp_strategy"] = strategy
    kv = args.get("kv_cache_dtype") if args.is_set("kv_cache_dtype") else "auto"
    cp = bool(args.get("enable_nsa_prefill_context_parallel"))
    if cp and (CP_BF16_ALWAYS[0] <= listed < CP_BF16_ALWAYS[1] or args.get("nsa_prefill_cp_mode") == "in-seq-split"):
        kv = "bf16"
    kv = "fp8_e4m3" if kv == "auto" else kv      # or bfloat16 below SM100: both taken
    out["kv_cache_dtype"] = "bfloat16" if kv == "bf16" else kv
    return out


def _serving_values(args: ResolvedArgs) -> dict[str, object]:
    """The frontend flags' values and the type tests the release writes (which the evaluator does not apply)."""
    out: dict[str, object] = {}
    for dest in ("mm_process_config", "default_chat_template_kwargs"):
        if dest not in args.values:
            continue
        value = args.get(dest)
        out[dest] = value
        for owner in ("self", "cfg"):
            out[f"isinstance({owner}.{dest}, dict)"] = isinstance(value, dict)
            out[f"type({owner}.{dest})"] = type(value)
    mm = args.get("mm_process_config")
    if "mm_process_config" in args.values and not isinstance(mm, dict):
        out["for key in ('image', 'video', 'audio')"] = False     # None, or refused by the type test first
    if isinstance(mm, dict):
        bad = next((k for k in MM_PROCESS_KEYS if k in mm and not isinstance(mm[k], dict)), None)
        out["for key in ('image', 'video', 'audio')"] = bad is not None
        out["key"] = bad
        if bad is not None:
            for owner in ("self", "cfg"):
                test = f"key in {owner}.mm_process_config and (not isinstance({owner}.mm_process_config[key], dict))"
                out[test] = True
                out[f"type({owner}.mm_process_config[key])"] = type(mm[bad])
    limits = args.get("limit_mm_data_per_request")
    if "limit_mm_data_per_request" in args.values:
        out["limit_mm_data_per_request"] = limits
        out["allowed_modalities"] = ALLOWED_MODALITIES
        out["list(allowed_modalities)"] = list(ALLOWED_MODALITIES)
        if isinstance(limits, dict):
            bad_modality = next((m for m in limits if m not in ALLOWED_MODALITIES), None)
            for owner in ("self", "cfg"):
                out[f"isinstance({owner}.limit_mm_data_per_request, dict)"] = True
                out[f"for modality in {owner}.limit_mm_data_per_request.keys()"] = bad_modality is not None
            out["modality"] = bad_modality
    if "preferred_sampling_params" in args.values:
        preferred = args.get("preferred_sampling_params")
        if isinstance(preferred, str):
            try:
                preferred = json.loads(preferred)
            except ValueError:
                preferred = None      # the release's json.loads raises first: not this check
        if preferred is None or isinstance(preferred, dict):
            out["preferred_sampling_params"] = preferred
    return out


def _transport_values(args: ResolvedArgs) -> dict[str, object] | None:
    """``requested_transport`` where the line names it (``--mm-feature-transport``, or ``--keep-mm-feature-on-device``,
    which makes it cuda_ipc after its own conflict check: 0.5.16 ``server_args.py:6580-6590``); None (not judged)
    where it names none: the release then reads SGLANG_USE_CUDA_IPC_TRANSPORT and, from 0.5.19, picks by the model and
    the GPU fabric (0.5.23 ``serving_hook.py:814-866``). With ``--encoder-only`` the release turns a CUDA transport
    into cpu (0.5.23 L882-890): not claimed either."""
    given = _given(args, "mm_feature_transport")
    keep = bool(args.get("keep_mm_feature_on_device", False))
    if (given is None and not keep) or bool(args.get("encoder_only", False)):
        return None
    out: dict[str, object] = {"keep_mm_feature_on_device": keep, "requested_transport": given}
    if keep and given in (None, "cuda_ipc"):
        out["requested_transport"] = "cuda_ipc"
    return out


def _check_values(args: ResolvedArgs, layout: Layout, notes: list[str], rules: list[str]) -> dict[str, object]:
    """What ``check_server_args`` and the validation hooks read: ``--port``; shared-experts fusion, which DeepEP
    Waterfill enforces first (0.5.12 ``server_args.py:3215-3229``); the chunked prefill size only as the line gives
    it (the release's default depends on the GPU tier and on rewrites of other branches); the device (CUDA); PLE
    offload as given, which from 0.5.20 model overrides may fill before the second run of the check (0.5.23
    ``memory_hook.py:29``, ``pipeline.py:80`` / :228): with it unset and layer offload or the file backend on, not
    judged."""
    out: dict[str, object] = {"port": args.get("port", 30000), "device": "cuda", "is_gfx95_supported": False}
    enforced = bool(args.get("enforce_shared_experts_fusion", False))
    if args.get("moe_a2a_backend") == "deepep" and bool(args.get("enable_deepep_waterfill", False)):
        enforced = True
    out["enforce_shared_experts_fusion"] = enforced
    out["enable_two_batch_overlap"] = bool(args.get("enable_two_batch_overlap", False))
    out["enable_pdmux"] = bool(args.get("enable_pdmux", False))
    if args.is_set("chunked_prefill_size"):
        out["chunked_prefill_size"] = args.get("chunked_prefill_size")
    elif out["enable_pdmux"]:
        rules.remove("sglang.pdmux.chunked_prefill")
        notes.append("--enable-pdmux against the chunked prefill size SGLang picks (none given) is not judged")
    out["sampling_backend"] = args.get("sampling_backend")
    if "ple_offload_embedding" in args.values:
        embedding = args.get("ple_offload_embedding")
        backend = args.get("ple_offload_backend")
        out["ple_offload_backend"] = backend
        offload = any(isinstance(args.get(d), int) and int(args.get(d)) > 0  # type: ignore[call-overload]
                      for d in ("cpu_offload_gb", "offload_group_size"))
        if embedding is not None or not (offload or backend == "file"):
            out["ple_offload_embedding"] = embedding
    return out


def frame(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version) -> Frame:
    """The values of ``RULES``'s entries at ``listed`` and the rules to judge (see the module docstring)."""
    rules = list(RULES)
    notes: list[str] = []
    values: dict[str, object] = {dest: args.get(dest) for dest in AS_GIVEN if dest in args.values}
    values.update(gpu_values(layout, listed))
    path = args.get("model_path")
    if isinstance(path, str) and path.lower().startswith(_INSTANCE_SCHEME):
        # a remote-instance model path returns before the model branch (0.5.6 ``server_args.py:934-935``)
        rules = [r for r in rules if not r.startswith("sglang.dsa.")]
    else:
        values.update(_dsa_values(args, model, listed, rules, notes))
    values.update(_serving_values(args))
    transport = _transport_values(args)
    if transport is None:
        rules.remove("sglang.mm_feature_transport")
    else:
        values.update(transport)
    values.update(_check_values(args, layout, notes, rules))
    return Frame(values, tuple(rules), tuple(notes))


def judge(ask: Ask) -> Judged:
    """The rules ``frame`` names, in that frame over the shared namespace, and what it could not resolve."""
    framed = frame(ask.args, ask.model, ask.layout, ask.listed)
    wanted = ask.among(framed.rules)
    in_frame = ask.book.judge(ask.version, {**ask.values, **framed.values}, rules=wanted) if wanted else Judged()
    return Judged(in_frame.refusals, framed.notes + in_frame.not_judged)
