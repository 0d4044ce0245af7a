"""What SGLang refuses at config time, by release: ``config_refusals(args, model, layout, version)``.

The refusals are the release's own raises and asserts of ``sglang/srt/server_args.py`` (``__post_init__``,
``check_server_args``, the ``_handle_*`` methods) and, from 0.5.19, the hooks they moved to in
``sglang/srt/arg_groups/``, listed from each wheel into ``config_ledger.json`` by ``tools/config_ledger.py``
and answered in ``config_classes.yaml``; the entries classified ``rule: <id>`` (``RULES``) are judged here by
evaluating their conditions, as the release wrote them, over the values the release holds there
(``namespace``). See ``engines/vllm/config_checks.py`` for the frame; the values SGLang resolves first:

- attention DP: up to 0.5.21 ``--enable-dp-attention`` makes ``--dp-size`` the number of attention-DP groups
  inside the TP group (``--tp 8 --dp 8 --enable-dp-attention`` is 8 GPUs) and asserts ``tp_size % dp_size == 0``
  (up to 0.5.1.post3 also ``dp_size > 1``). From 0.5.22 ``--attn-dp-size`` names them and
  ``arg_groups/parallel_hook.py handle_deprecated_dp_attention`` turns the old spelling into it
  (``attn_dp_size = dp_size``, ``dp_size = 1``) before any check reads the layout;
- ``nnodes``: the line's ``--nnodes``, else the hosts the layout spans.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from packaging.version import Version

from pytest_gpulayout.engines.areas import Area, Ask, combine, judge_areas, rules_of
from pytest_gpulayout.engines.sglang import (
    rules_attn,
    rules_cache,
    rules_ib,
    rules_kv,
    rules_linear,
    rules_mamba,
    rules_mamba2,
    rules_model,
    rules_model2,
    rules_model3,
    rules_model4,
    rules_model5,
    rules_moe,
    rules_moe2,
    rules_moe3,
    rules_parallel2,
    rules_pd,
    rules_pd2,
    rules_spec,
    rules_spec2,
    rules_spec3,
    rules_spec4,
)
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.knobs import Serving
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout, Refusal, RuleBook, load_ledger

DISPLAY = "SGLang"

#: rule id -> what it refuses, for the rules judged over the shared namespace (``namespace``)
_SHARED: Mapping[str, str] = {
    "sglang.dp_attention.dp_size": "--enable-dp-attention with --dp-size 1 (before 0.5.2)",
    "sglang.dp_attention.tp_divisible": "attention DP whose size does not divide --tp-size",
    "sglang.attn_dp.size": "--attn-dp-size below 1, or with DP replicas (--dp-size > 1) beside it (0.5.22+)",
    "sglang.nodes.tp_divisible": "TP x PP not divisible by --nnodes",
    "sglang.nodes.dp_replicas": "DP replicas across nodes (without attention DP before 0.5.22; at all from 0.5.22)",
    "sglang.dp_lm_head.needs_dp_attention": "--enable-dp-lm-head / --enable-tp-lm-head-all-to-all without attention DP",
    "sglang.moe_dense_tp_size": "--moe-dense-tp-size other than 1 (or, from 0.5.13, TP)",
    "sglang.gpu_ids": "a negative --base-gpu-id or a --gpu-id-step below 1",
    "sglang.attn_cp.tp_divisible": "--attn-cp-size > 1 whose product with the attention-DP size does not divide TP",
    "sglang.dcp.size": "--dcp-size below 1, or above 1 with --enable-prefill-cp (0.5.22+)",
    "sglang.eplb.needs_ep": "--enable-eplb without expert parallelism",
    "sglang.llama4.attention_backend": "Llama 4 with an attention backend the release does not list for it",
    "sglang.olmo2.flashinfer": "--attention-backend flashinfer with an Olmo2ForCausalLM (OLMo 2 / 3) model",
    "sglang.priority_scheduling": "--enable-priority-scheduling with a policy other than fcfs / lof, or "
                                  "--retraction-policy priority without it",
    "sglang.worker_counts": "a tokenizer / detokenizer / multimodal worker count or --schedule-conservativeness "
                            "out of range",
    "sglang.npu_only_flags": "--model-impl mindspore or --enable-quant-communications on CUDA (Ascend NPU only)",
    "sglang.pdmux": "--enable-pdmux with pipeline parallelism or a disaggregation mode",
}

#: the rule areas (``engines/areas.py``), in the order their refusals are said
AREAS: tuple[Area, ...] = (
    rules_parallel2,  # context parallelism, all-to-all, elastic EP, DWDP, KV-cache sharding
    rules_spec,       # speculative decoding, LoRA, PD disaggregation, metric buckets
    rules_spec2,      # speculative decoding with other features, its environment variables
    rules_cache,      # SSL, HiCache, unified memory, Mamba and the other cache options
    rules_model,      # attention backends against the GPU, the KV cache dtype and the model
    rules_model2,     # the rest of the model-specific adjustments
    rules_moe,        # MoE runner and all-to-all backends against quantization, EP and attention DP
    rules_model3,     # DeepSeek DSA, serving-frontend flags, check_server_args
    rules_pd,         # PD disaggregation, HiCache host memory, KV-cache sharding flags
    rules_mamba,      # linear attention, int8 Mamba checkpoints, deterministic inference, named backends
    rules_pd2,        # PD beside DSA, unified memory's PD / DCP limits, SWA / eviction / NVFP4 dequant flags
    rules_moe2,       # elastic EP scale-up, SGLANG_CUTLASS_MOE, Ascend fused EP, FlashInfer / DeepGEMM MegaMoE
    rules_model4,     # DeepSeek-V4 / V4.1, DSA overrides, MiMo-V2, Nemotron-H, MiniCPM, Kimi-K3, CP by model
    rules_spec3,      # speculative decoding beside PP, DeepSeek V4, unified memory, HiCache DCP, KV sharding ...
    rules_mamba2,     # the Mamba radix-cache strategy, DSA backends, CUDA-graph backends
    rules_linear,     # ReplaySSM with SGLANG_RAGGED_VERIFY_MODE and under PD disaggregation
    rules_spec4,      # DeepEP v2 drafts, adaptive steps, DSPARK with attention DP, LoRA triton_v2 / MoE runners
    rules_kv,         # FP4 KV, page-major / unified-memory DCP backends, HiSparse DSA backends
    rules_model5,     # --language-model-only, --load-publish-endpoint, DSA index_kpool with DCP
    rules_ib,         # --disaggregation-ib-device / --mooncake-ib-device against the hosts' InfiniBand devices
    rules_attn,       # what reads the attention backends SGLang resolves (engines/sglang/attention.py)
    rules_moe3,       # EP dispatch without an all-to-all backend, the EPLB balancedness variable, the gRPC port
)
#: every rule: the ones judged over the shared namespace (above), then each area's
RULES: Mapping[str, str] = {**_SHARED, **rules_of(AREAS)}

#: The flags the rules above read as the line gives them, else as the release's parser defaults them: none is
#: rewritten by SGLang's post-processing before its check reads it (``check_server_args`` runs last; the
#: model-specific branch reads ``attention_backend`` before ``_handle_attention_backend_compatibility`` picks
#: one, see ``LLAMA4_PICKS_SINCE``). A flag the release does not have is absent: its entry reads nothing then.
_AS_GIVEN = ("schedule_policy", "enable_priority_scheduling", "retraction_policy", "schedule_conservativeness",
             "tokenizer_worker_num", "detokenizer_worker_num", "mm_processor_worker_num", "mm_io_worker_num",
             "model_impl", "enable_quant_communications", "enable_pdmux", "disaggregation_mode")

#: Llama 4's backend assert reads ``self.attention_backend`` as it stands when the model-specific branch runs.
#: 0.5.1 - 0.5.4 call that branch before any backend is chosen (0.5.4 ``server_args.py`` L551, the backend is
#: picked at L555 ``_handle_attention_backend_compatibility``) and the Llama 4 branch (L964) picks none: without
#: ``--attention-backend`` the assert sees None and refuses. From 0.5.4.post1 the branch picks one the assert
#: lists when none is given (L951-957: trtllm_mha on SM100, fa3 from SM80, else triton; from 0.5.15
#: ``arg_groups/overrides.py`` ``_llama4_overrides``, from 0.5.19 ``model_overrides/llama4.py``): only a
#: backend the line gives is judged. Before 0.5.1 the assert is in ``check_server_args`` after
#: ``__post_init__`` picked a default this module does not resolve: only the line's backend is judged.
LLAMA4_UNSET_SINCE = Version("0.5.1")
LLAMA4_PICKS_SINCE = Version("0.5.4.post1")
#: the rules about one model family, by the architecture prefix they are about: judged for those models only
#: (their entries sit at the end of the release's model ``elif`` chain, whose earlier branches read the config
#: of other families: DeepSeek's ``is_deepseek_nsa(hf_config)``)
_BY_ARCH: Mapping[str, str] = {"sglang.llama4.attention_backend": "Llama4", "sglang.olmo2.flashinfer": "Olmo2"}

#: ``arg_groups/parallel_hook.py handle_deprecated_dp_attention`` (first in 0.5.22): ``--attn-dp-size``
ATTN_DP_SIZE_SINCE = Version("0.5.22")
#: MoE all-to-all backends that make SGLang set ``ep_size = tp_size`` (``_handle_a2a_moe``): not resolved here
_A2A_NONE = (None, "none")


@cache
def book() -> RuleBook:
    return RuleBook(load_ledger("sglang"), DISPLAY, RULES)


def _given(args: ResolvedArgs, dest: str, default: object) -> object:
    return args.get(dest) if args.is_set(dest) else default


def _value(args: ResolvedArgs, dest: str, default: object) -> object:
    """The line's value, else the release's default (also where the parser's default is None)."""
    value = args.get(dest)
    return default if value is None else value


def namespace(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version) -> tuple[dict[str, object],
                                                                                                list[str]]:
    """The values the rules' conditions and messages read, and what could not be resolved (in words)."""
    notes: list[str] = []
    tp, pp, dp = layout.tensor_parallel_size, layout.pipeline_parallel_size, layout.data_parallel_size
    written = args.get("dp_size", args.get("data_parallel_size"))
    if isinstance(written, int) and not isinstance(written, bool):
        dp = written  # the line's own --dp-size: the layout counts replicas (attention DP is inside TP)
    dp_attention = bool(args.get("enable_dp_attention", False))
    attn_dp = _given(args, "attn_dp_size", 1)
    listed = book().ledger.listed(version) or version
    if listed >= ATTN_DP_SIZE_SINCE and dp_attention:
        if attn_dp == 1:
            attn_dp, dp = dp, 1
        dp_attention = False  # the hook turns the old spelling off once it has moved the width
    nnodes = _given(args, "nnodes", layout.nodes)
    ns: dict[str, object] = {
        "tp_size": tp, "pp_size": pp, "dp_size": dp, "nnodes": nnodes,
        "enable_dp_attention": dp_attention,
        "attn_dp_size": attn_dp,
        "attn_dp_enabled_of": isinstance(attn_dp, int) and attn_dp > 1,
        "attn_dp_enabled": isinstance(attn_dp, int) and attn_dp > 1,
        "enable_dp_lm_head": bool(args.get("enable_dp_lm_head", False)),
        "enable_tp_lm_head_all_to_all": bool(args.get("enable_tp_lm_head_all_to_all", False)),
        "moe_dense_tp_size": args.get("moe_dense_tp_size"),
        "base_gpu_id": args.get("base_gpu_id", 0),
        "gpu_id_step": args.get("gpu_id_step", 1),
        # up to 0.5.13 the parser's destinations are attention_context_parallel_size / expert_parallel_size, copied
        # by ServerArgs.from_cli_args (0.5.10 server_args.py l.5969 / l.5972)
        "attn_cp_size": _value(args, "attn_cp_size", _value(args, "attention_context_parallel_size", 1)),
        "dcp_size": _value(args, "dcp_size", 1),
        "enable_prefill_cp": bool(args.get("enable_prefill_cp", False)),
        "ep_join_mode": args.get("ep_join_mode"),
        "enable_eplb": bool(args.get("enable_eplb", False)),
        "is_npu": False, "is_hip": False, "is_cuda": True, "is_xpu": False, "is_musa": False,
        "is_mps": False, "use_mlx": False, "device": "cuda",
        "model_arch": model.architectures[0] if model.architectures else "",
    }
    ns.update({dest: args.get(dest) for dest in _AS_GIVEN if dest in args.values})
    backend = args.get("attention_backend") if args.is_set("attention_backend") else None
    if backend is not None or LLAMA4_UNSET_SINCE <= listed < LLAMA4_PICKS_SINCE:
        ns["attention_backend"] = backend
    # the expert-parallel size: --ep-size, or TP where the release sets it (``--enable-ep-moe`` /
    # ``--enable-deepep-moe`` before 0.5, ``--moe-a2a-backend deepep`` from 0.4.10.post2: ``ep_size = tp_size``)
    a2a = args.get("moe_a2a_backend")
    ns["moe_a2a_backend"] = a2a
    ns["enable_ep_moe"] = bool(args.get("enable_ep_moe", False))
    ns["enable_deepep_moe"] = bool(args.get("enable_deepep_moe", False))
    if ns["enable_ep_moe"] or ns["enable_deepep_moe"] or a2a == "deepep":
        ns["ep_size"] = tp
    elif a2a in _A2A_NONE:
        # ``--ep-size`` is ``expert_parallel_size`` to the parser where it is also spelled ``--expert-parallel-size``
        # (0.5.8 ``server_args.py:3756-3760``; ``from_cli_args`` copies it to ``ep_size``, L4748)
        ns["ep_size"] = _value(args, "ep_size", _value(args, "expert_parallel_size", 1))
    elif bool(ns["enable_eplb"]):
        notes.append(f"the expert-parallel size --moe-a2a-backend {a2a} sets is not resolved")
    ns.update(rules_parallel2.values(args, model, layout, version, {}))
    ns.update(rules_spec.values(args, model, layout, version, listed))
    ns.update(rules_cache.values(args, model, layout, version, {}))
    return ns, notes


def config_check(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version,
                 env: Mapping[str, str] | None = None, *, serving: Serving | None = None,
                 packages: Mapping[str, str | None] | None = None) -> Judged:
    """Every config-time refusal of ``RULES`` that ``version`` (the nearest listed release at or below it)
    makes, and the entries it could not judge. SGLang stops at the first; the others follow once it is fixed.
    ``env``: the launch's environment variables (the checks that read one take an unset one as its default);
    ``serving`` / ``packages``: the engine's environment and the nodes' probed packages (``engines/packages.py``)."""
    values, notes = namespace(args, model, layout, version)
    arch = str(values["model_arch"])
    rules = [r for r in RULES if r not in _BY_ARCH or (arch.startswith(_BY_ARCH[r]) and "attention_backend" in values)]
    rules, parallel_notes = rules_parallel2.in_force(rules, args, model, lambda r: book().in_force(r, version))
    rules = rules_cache.in_force(rules, args, model, layout)
    ask = Ask(book(), version, book().ledger.listed(version) or version, values, tuple(rules), args, model, layout,
              env or {}, serving or Serving(), packages or {})
    shared = ask.judge({}, _SHARED)
    return combine((shared, *judge_areas(AREAS, ask)), (*notes, *parallel_notes))


def config_refusals(args: ResolvedArgs, model: ModelSpec, layout: Layout, version: Version,
                    env: Mapping[str, str] | None = None) -> tuple[Refusal, ...]:
    """The refusals of ``config_check`` (see there)."""
    return config_check(args, model, layout, version, env).refusals
