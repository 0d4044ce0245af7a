"""More of SGLang's MoE refusals: elastic EP runtime scale-up, the deprecated ``SGLANG_CUTLASS_MOE``, the Ascend
fused-EP mode, FlashInfer / DeepGEMM MegaMoE, the FlashInfer all-to-all dispatch types, DeepEP v2's architectures
and expert packs, by release.

* Elastic EP runtime scale-up (``scaling_active``: an ``--elastic-ep-backend`` with ``--max-ep-size`` above TP;
  ``ServerArgs._handle_elastic_ep`` 0.5.16 - 0.5.18, ``arg_groups/parallel_hook.py handle_elastic_ep`` from 0.5.19,
  0.5.23 l.572-747). The function runs late (0.5.16 ``server_args.py`` l.3022, after the load-balance method, the
  context-parallel sizes and the all-to-all backend are resolved; 0.5.23 ``pipeline.py`` l.299), and its asserts read
  those resolved values (``resolved_view``):

  - the flags (``sglang.elastic_ep.scale_flags``): a positive ``--elastic-ep-scale-timeout``, one tokenizer worker, no
    ``--use-ray``, no ``--enable-elastic-expert-backup``, ``--load-balance-method round_robin`` (``auto`` is it off a
    PD prefill worker, 0.5.23 ``serving_hook.py`` l.222-236), ``--elastic-ep-backend mooncake`` and PP 1;
  - the sizes (``sglang.elastic_ep.scale_sizes``): a scale joiner (``--elastic-ep-join-mode scale``) needs
    ``--elastic-ep-initial-size`` at most its ``--elastic-ep-join-rank-offset``, the offset plus TP within
    ``--max-ep-size`` and, alone (TP 1), ``--moe-dense-tp-size 1``; the primary's initial size (TP when unset: the
    function sets it first, 0.5.23 l.660-665) must be TP;
  - the topology (``sglang.elastic_ep.scale_topology``): attention DP (0.5.16 - 0.5.21 ``--enable-dp-attention`` with
    ``dp_size == tp_size``; 0.5.22 ``--attn-dp-size`` equal to TP; 0.5.22+ ``attn_dp_enabled_of``: an attention-DP
    size above 1 or a scale joiner, 0.5.23 ``runtime_context.py`` l.191-198), ``--enable-dp-lm-head``, attention CP 1,
    MoE DP 1, EP equal to TP (the all-to-all backends of ``_A2A_EP_SPANNING_BACKENDS`` set it, 0.5.23 ``overrides.py``
    l.1576-1620) and ``--moe-a2a-backend nixl``; 0.5.23 first validates the attention topology (l.581-612: TP divisible
    by attention DP x CP, and ``--max-ep-size``, the initial size and a joiner's offset each a multiple of the
    attention replica, ``elastic_ep/topology.py`` l.34-40; a failure there is re-raised as an AssertionError with the
    same words, which the ledger lists as the ValueError it catches and a bare re-raise), then needs
    ``--moe-dense-tp-size 1`` with attention TP above 1 (l.614-619) and ``--dcp-size`` dividing the attention TP width
    (l.685-689).

  The CUDA-graph asserts between them (decode and prefill graphs disabled, 0.5.16 - 0.5.20; from 0.5.21 a decode
  backend of full or disabled, prefill disabled and the recapture limits under full) read the graph backends as the
  hooks leave them (the attention backend, DeepEP's normal mode, model capabilities and debug flags disable them
  after ``--cuda-graph-backend-*``): not judged here. The asserts run in order and stop at the first; each one that
  holds refuses the line, so every failing one is said. Values SGLang sets itself first are left out (the entry is
  not judged): with ``--dwdp-size`` > 1 (it sets attention DP, the dense TP, the LM head, MoE DP, EP and the
  backend, 0.5.23 ``parallel_hook.py`` l.433-517) the sizes and topology are not judged; an MLA model with prefill
  CP and DeepSeek V4 set the attention CP size and the dense TP size (``model_overrides/deepseek_v2.py`` l.117-140,
  ``deepseek_v4_hook.py`` l.212-221).
* ``SGLANG_CUTLASS_MOE`` (deprecated) with a quantization other than fp8 (0.5.4.post3 - 0.5.8; fp8 / mxfp8 0.5.9 -
  0.5.17): ``get_bool_env_var`` (``true`` / ``1``, 0.5.8 ``utils/common.py`` l.321-334) up to 0.5.10,
  ``envs.SGLANG_CUTLASS_MOE`` (``EnvBool``) from 0.5.11; the quantization as ``rules_moe.quantization`` resolves it.
* ``--moe-a2a-backend ascend_fuseep``: the fused mode ``SGLANG_NPU_FUSED_MOE_MODE`` must be 1 or 2 (0.5.10 reads the
  string, unset is refused; 0.5.11+ ``EnvInt(1)``, a word that is no integer is the default) and mode 2 needs
  ``--quantization modelslim`` (0.5.11 ``server_args.py`` l.3076-3090); 0.5.16 - 0.5.17 ``prepare_server_args``
  refuses the variable set to another integer when ``--fuseep-mode`` is not given (``_apply_fuseep_mode_env_compat``,
  0.5.16 l.8166-8185), whatever the backend.
* ``--moe-a2a-backend megamoe`` (DeepGEMM MegaMoE, 0.5.21+, ``mega_moe_hook.py check_mega_moe_compat``, 0.5.23
  l.27-48, run second in the pipeline; ``--moe-runner-backend megamoe`` is its alias, l.259-276): no two- or
  single-batch overlap, and an SM90 or SM100 GPU.
* ``--moe-a2a-backend flashinfer_megamoe`` (0.5.20+, ``moe_hook.py handle_a2a_moe`` 0.5.23 l.315-340): a validated
  architecture and an MXFP8 / NVFP4 checkpoint (``validate_flashinfer_megamoe_model``, l.236-282), the combine-dtype
  variables (``validate_flashinfer_megamoe_envs``, l.213-233), ``--dtype bfloat16`` under
  ``SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16`` (0.5.23 l.318-324) and an SM100 GPU (l.333-337). The model and variable
  checks are judged only where the backend is it (their entries sit in functions called under it); the checkpoint's
  FP4-expert layout and hybrid NVFP4 metadata are read from its ``quantization_config``, so they are known (absent)
  only for a checkpoint without one (and not DeepSeek V4, whose layout the release detects from the files).
* ``--moe-a2a-backend flashinfer``'s dispatch (``handle_a2a_moe`` 0.5.19+, 0.5.23 l.487-529, and
  ``handle_flashinfer_a2a_dispatch_type`` 0.5.20+, l.166-210, called only for a given
  ``--flashinfer-a2a-dispatch-type``):
  the CuTe DSL NVFP4 W4A16 runner (``flashinfer_cutedsl`` with ``SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16``) refuses
  ``SGLANG_MOE_NVFP4_DISPATCH`` and an ``auto`` / ``nvfp4`` dispatch type (``sglang.a2a.cutedsl_w4a16``); a given
  dispatch type refuses ``SGLANG_MOE_NVFP4_DISPATCH`` set at all, ``mxfp8`` without ``--quantization mxfp8`` and the
  ``flashinfer_trtllm_routed`` runner (``flashinfer_trtllm`` is made it first, l.511-521), and ``nvfp4`` without an
  NVFP4 checkpoint (``sglang.a2a.flashinfer_dispatch``). The runner is ``rules_moe.a2a_runner``'s (auto after the model
  overrides is not resolved where they may pick one).
* ``--moe-a2a-backend deepep_v2``'s architectures (``validate_deepep_v2_model_architecture``, 0.5.23 l.710-731): an
  ``instance://`` model path is refused, and the checkpoint's first architecture must be in the release's list (see
  ``_DEEPEP_V2_ARCHS``).
* ``--load-format expert_pack`` (0.5.19+, ``expert_pack_hook.py handle_expert_pack``, 0.5.23 l.32-192): one error
  list, raised at once, whose first part the line decides (TP, DP, from 0.5.22 attention DP and EP all 1, no
  ``--enforce-shared-experts-fusion`` / ``--enable-waterfill``, no explicit CUDA graph backend other than disabled, a
  ``--model-loader-extra-config`` that is a JSON object); the rest reads files on the serving host (the pack, its
  manifest, the model directory), which are not read: the refusal's list holds the line's part, and a line without
  one is named as not judged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang import rules_moe, rules_parallel2
from pytest_gpulayout.engines.sglang.rules_spec2 import env_bool
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged

RULES: Mapping[str, str] = {
    "sglang.elastic_ep.scale_flags": "elastic EP scale-up (--max-ep-size above TP) with a --elastic-ep-scale-timeout "
                                     "below 1, several tokenizer workers, --use-ray, --enable-elastic-expert-backup, "
                                     "a load-aware --load-balance-method, a backend other than mooncake or PP",
    "sglang.elastic_ep.scale_sizes": "elastic EP scale-up whose --elastic-ep-initial-size, "
                                     "--elastic-ep-join-rank-offset or --moe-dense-tp-size do not fit a scale "
                                     "joiner or the primary",
    "sglang.elastic_ep.scale_topology": "elastic EP scale-up without attention DP over TP, --enable-dp-lm-head, "
                                        "--moe-a2a-backend nixl or EP = TP, with attention CP / MoE DP, or (0.5.23) an "
                                        "attention replica that does not divide the EP sizes",
    "sglang.moe_runner.cutlass_env": "SGLANG_CUTLASS_MOE with a quantization other than fp8 (0.5.9+: fp8 / mxfp8; up "
                                     "to 0.5.17)",
    "sglang.a2a.ascend_fuseep": "--moe-a2a-backend ascend_fuseep with SGLANG_NPU_FUSED_MOE_MODE other than 1 or 2, or "
                                "mode 2 without --quantization modelslim; the variable at another integer (0.5.16 - "
                                "0.5.17)",
    "sglang.a2a.flashinfer_megamoe": "--moe-a2a-backend flashinfer_megamoe with an architecture or checkpoint "
                                     "quantization it does not run, off SM100, with a bad MegaMOE combine dtype, or "
                                     "NVFP4 W4A16 without bfloat16 (0.5.20+)",
    "sglang.a2a.flashinfer_dispatch": "--moe-a2a-backend flashinfer with a --flashinfer-a2a-dispatch-type the "
                                      "quantization / runner does not take, or SGLANG_MOE_NVFP4_DISPATCH beside it "
                                      "(0.5.20+)",
    "sglang.a2a.cutedsl_w4a16": "--moe-a2a-backend flashinfer with the CuTe DSL NVFP4 W4A16 runner "
                                "(SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16) and NVFP4 dispatch (0.5.19+)",
    "sglang.a2a.deepep_v2_model": "--moe-a2a-backend deepep_v2 with an architecture it is not validated for, or an "
                                  "instance:// model path (0.5.19+)",
    "sglang.expert_pack.flags": "--load-format expert_pack with TP / DP / attention DP / EP above 1, "
                                "--enforce-shared-experts-fusion, --enable-waterfill, a CUDA graph backend other than "
                                "disabled, or a --model-loader-extra-config that is no JSON object (0.5.19+)",
    "sglang.a2a.megamoe": "--moe-a2a-backend megamoe (or --moe-runner-backend megamoe) with two- / single-batch "
                          "overlap, or on a GPU other than SM90 / SM100 (0.5.21+)",
}

SCALE_RULES = ("sglang.elastic_ep.scale_flags", "sglang.elastic_ep.scale_sizes", "sglang.elastic_ep.scale_topology")
#: the rules DWDP's own writes decide (see the module docstring)
_DWDP_DECIDED = ("sglang.elastic_ep.scale_sizes", "sglang.elastic_ep.scale_topology")
CUTLASS_ENV_RULE = "sglang.moe_runner.cutlass_env"
FUSEEP_RULE = "sglang.a2a.ascend_fuseep"
MEGAMOE_RULE = "sglang.a2a.flashinfer_megamoe"
DEEPGEMM_MEGAMOE_RULE = "sglang.a2a.megamoe"
DISPATCH_RULE = "sglang.a2a.flashinfer_dispatch"
W4A16_RULE = "sglang.a2a.cutedsl_w4a16"
DEEPEP_V2_MODEL_RULE = "sglang.a2a.deepep_v2_model"
#: from 0.5.21 the architectures are a registry an external model package (``SGLANG_EXTERNAL_MODEL_PACKAGE``,
#: ``models/registry.py`` l.154 in 0.5.23) may add to
DEEPEP_V2_REGISTRY_SINCE = Version("0.5.21")
EXTERNAL_MODEL_PACKAGE = "SGLANG_EXTERNAL_MODEL_PACKAGE"
EXPERT_PACK_RULE = "sglang.expert_pack.flags"
#: ``validate_deepep_v2_model_architecture``'s architectures: a tuple 0.5.19 - 0.5.20 (0.5.20 ``moe_hook.py``
#: l.610-614), from 0.5.21 the registry ``configs/moe_model_registry.py _DEEPEP_V2_MODELS`` (0.5.23 l.20-28; only an
#: external model package adds to it, with ``register_deepep_v2_model``: no in-tree call)
_DEEPEP_V2_ARCHS: tuple[tuple[Version, tuple[str, ...]], ...] = (
    (Version("0.5.19"), ("DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Qwen3MoeForCausalLM")),
    (Version("0.5.21"), ("DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Qwen3MoeForCausalLM",
                         "Glm5NextForConditionalGeneration")),
    (Version("0.5.22"), ("DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Qwen3MoeForCausalLM",
                         "Glm5NextForConditionalGeneration", "GlmMoeDsaForCausalLM", "MiMoV2ForCausalLM",
                         "MiMoV2FlashForCausalLM")),
)
#: ``handle_expert_pack`` lists the attention-DP size from 0.5.22 (0.5.23 ``expert_pack_hook.py`` l.43)
EXPERT_PACK_ATTN_DP_SINCE = Version("0.5.22")

#: ``_A2A_EP_SPANNING_BACKENDS`` (0.5.16 ``overrides.py`` l.2072; pplx from 0.5.18, deepep_v2 from 0.5.19,
#: flashinfer_megamoe from 0.5.21; 0.5.23 l.1576-1590): the all-to-all backends that set ``ep_size = tp_size``
_SPANNING: tuple[tuple[Version, frozenset[str]], ...] = (
    (Version("0.5.16"), frozenset({"megamoe", "deepep", "mooncake", "nixl", "ascend_fuseep", "flashinfer", "mori"})),
    (Version("0.5.18"), frozenset({"megamoe", "deepep", "mooncake", "nixl", "ascend_fuseep", "flashinfer", "mori",
                                   "pplx"})),
    (Version("0.5.19"), frozenset({"megamoe", "deepep", "deepep_v2", "mooncake", "nixl", "ascend_fuseep",
                                   "flashinfer", "mori", "pplx"})),
    (Version("0.5.21"), frozenset({"megamoe", "deepep", "deepep_v2", "mooncake", "nixl", "ascend_fuseep",
                                   "flashinfer", "flashinfer_megamoe", "mori", "pplx"})),
)
#: ``get_bool_env_var`` reads ``SGLANG_CUTLASS_MOE`` up to 0.5.10 (``true`` / ``1``); ``EnvBool`` from 0.5.11
ENV_BOOL_SINCE = Version("0.5.11")
#: 0.5.10 reads ``SGLANG_NPU_FUSED_MOE_MODE`` as a string (unset: None); 0.5.11+ ``EnvInt(1)``
FUSEEP_INT_SINCE = Version("0.5.11")
#: ``EnvStr("bf16")`` (0.5.23 ``environ.py`` l.1240)
_COMBINE_DEFAULT = "bf16"
_W4A16 = "SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16"
#: the line's ``--dtype`` words that name a dtype (``auto`` reads the checkpoint's)
_DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "half": "float16", "fp16": "float16",
           "float32": "float32", "float": "float32"}




def _value(args: ResolvedArgs, dest: str, default: object) -> object:
    value = args.get(dest)
    return default if value is None else value


def _arch(model: ModelSpec) -> str:
    return model.architectures[0] if model.architectures else ""


def spanning(listed: Version) -> frozenset[str]:
    """The all-to-all backends that set EP to TP in ``listed``."""
    return next((s for since, s in reversed(_SPANNING) if listed >= since), _SPANNING[0][1])


def _model_sets_cp(ask: Ask) -> bool:
    """Whether the model's overrides set the attention CP and dense TP sizes (MLA prefill CP, DeepSeek V4)."""
    prefill_cp = any(ask.args.flag(d) for d in rules_parallel2.PREFILL_CP_FLAGS)
    return (ask.model.is_mla and prefill_cp) or _arch(ask.model) == rules_parallel2.DEEPSEEK_V4


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def scale_frame(ask: Ask) -> tuple[dict[str, object], tuple[str, ...]]:
    """The values ``handle_elastic_ep``'s scale-up asserts read (over the shared namespace), and the names to leave out
    of it (see the module docstring)."""
    args, values = ask.args, ask.values
    tp = _int(values.get("tp_size")) or 1
    join_mode = values.get("ep_join_mode")
    offset = values.get("ep_join_rank_offset")
    initial = values.get("elastic_ep_initial_size")
    if join_mode != "scale" and initial is None:
        initial = tp  # the primary's initial size is TP when unset (0.5.23 l.660-665, 0.5.16 l.6030-6031)
    method = _value(args, "load_balance_method", "auto")
    if method == "auto":
        method = "follow_bootstrap_room" if values.get("disaggregation_mode") == "prefill" else "round_robin"
    frame: dict[str, object] = {
        "elastic_ep_scale_timeout": _value(args, "elastic_ep_scale_timeout", 600),
        "tokenizer_worker_num": _value(args, "tokenizer_worker_num", 1),
        "use_ray": args.flag("use_ray"),
        "enable_elastic_expert_backup": args.flag("enable_elastic_expert_backup"),
        "elastic_ep_initial_size": initial,
        "load_balance_method": method,
        "enable_dp_attention": args.flag("enable_dp_attention"),
        "enable_dp_lm_head": args.flag("enable_dp_lm_head"),
        "attn_dp_enabled_of": (_int(values.get("attn_dp_size")) or 1) > 1 or join_mode == "scale",
    }
    missing: list[str] = []
    if isinstance(offset, int):
        frame["join_target"] = offset + tp
    a2a = rules_moe.a2a_backend(args, ask.model)
    if a2a is None:
        missing += ["moe_a2a_backend", "ep_size"]
    else:
        frame["moe_a2a_backend"] = a2a
        if a2a in spanning(ask.listed):
            frame["ep_size"] = tp
        elif a2a == "none":
            ep = rules_moe.ep_size(args, ask.model, ask.layout)
            if ep is None:
                missing.append("ep_size")
            else:
                frame["ep_size"] = ep
        else:
            missing.append("ep_size")
    if _model_sets_cp(ask):
        missing += ["attn_cp_size", "moe_dense_tp_size", "divisor", "attn_tp_size", "except ValueError"]
    else:
        frame.update(_topology(values, tp, initial, join_mode, offset))
    return frame, tuple(missing)


def _topology(values: Mapping[str, object], tp: int, initial: object, join_mode: object,
              offset: object) -> dict[str, object]:
    """0.5.23's attention-topology pre-validation (``parallel_hook.py`` l.581-612): the divisor, the attention TP width,
    and whether ``physical_ep_size_to_dp_size`` refuses one of the EP sizes (``except ValueError``: only where the
    topology itself is valid, whose own raise is the entry before)."""
    attn_dp = _int(values.get("attn_dp_size")) or 1
    cp = _int(values.get("attn_cp_size")) or 1
    out: dict[str, object] = {"divisor": attn_dp * cp}
    if tp <= 0 or attn_dp <= 0 or cp <= 0 or tp % (attn_dp * cp):
        out["except ValueError"] = False
        return out
    attn_tp = tp // attn_dp // cp
    replica = attn_tp * cp
    sizes = [values.get("max_ep_size"), initial or tp]
    if join_mode == "scale":
        sizes.append(offset)
    out["attn_tp_size"] = attn_tp
    out["except ValueError"] = any(not isinstance(s, int) or s <= 0 or s % replica for s in sizes)
    return out


def _cutlass_env(ask: Ask) -> bool:
    value = ask.env.get("SGLANG_CUTLASS_MOE")
    if ask.listed >= ENV_BOOL_SINCE:
        return env_bool(ask.env, "SGLANG_CUTLASS_MOE")
    return value is not None and value.lower() in ("true", "1")


def _fuse_mode(ask: Ask) -> object:
    """``SGLANG_NPU_FUSED_MOE_MODE`` as the release reads it (see the module docstring)."""
    value = ask.env.get("SGLANG_NPU_FUSED_MOE_MODE")
    if ask.listed < FUSEEP_INT_SINCE:
        return value
    if value is None:
        return 1
    try:
        return int(value)
    except ValueError:
        return 1


def _megamoe_frame(ask: Ask) -> tuple[dict[str, object], tuple[str, ...]]:
    """What FlashInfer MegaMOE's checks read (see the module docstring)."""
    args, model, env = ask.args, ask.model, ask.env
    w4a16 = env_bool(env, _W4A16)
    combine = env.get("SGLANG_FLASHINFER_MEGAMOE_COMBINE_DTYPE", _COMBINE_DEFAULT).strip().lower()
    frame: dict[str, object] = {
        "architectures": list(model.architectures),
        "combine_dtype": combine,
        f"envs.{_W4A16}.get()": w4a16,
        "envs.SGLANG_FLASHINFER_MEGAMOE_IN_KERNEL_FC2_REDUCE.get()": env_bool(
            env, "SGLANG_FLASHINFER_MEGAMOE_IN_KERNEL_FC2_REDUCE"),
        "torch.bfloat16": "bfloat16",
    }
    missing: list[str] = []
    arch_ok = any(a in _MEGAMOE_ARCHS.get(_megamoe_key(ask.listed), ()) for a in model.architectures)
    frame["not any((architecture in validated_architectures for architecture in architectures))"] = not arch_ok
    frame["sorted(validated_architectures)"] = sorted(_MEGAMOE_ARCHS.get(_megamoe_key(ask.listed), ()))
    resolved, quant = rules_moe.quantization(args, model)
    plain = model.quantization is None and _arch(model) != rules_parallel2.DEEPSEEK_V4
    if resolved and plain:
        frame["quantization"] = quant
        frame["supports_megamoe_quantization"] = quant in ("mxfp8", "modelopt_fp4") or (
            quant == "nvfp4_online" and w4a16 and ask.listed >= Version("0.5.23"))
    else:
        missing += ["quantization", "supports_megamoe_quantization"]
    dtype = str(_value(args, "dtype", "auto"))
    named = _DTYPES.get(dtype) if dtype != "auto" else (model.dtype if model.dtype in ("bfloat16", "float16") else None)
    if named is None:
        missing.append("model_config_of(server_args).dtype")
    else:
        frame["model_config_of(server_args).dtype"] = named
    return frame, tuple(missing)


#: ``validate_flashinfer_megamoe_model``'s architectures, by the first release of each list (0.5.20
#: ``moe_hook.py`` l.197-211; 0.5.23 l.239-253 adds Beam, Kimi-K3 and its linear model)
_MEGAMOE_0520 = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM",
                 "Glm4MoeForCausalLM", "GlmMoeDsaForCausalLM", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
                 "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM")
_MEGAMOE_ARCHS: Mapping[str, tuple[str, ...]] = {
    "0.5.20": _MEGAMOE_0520,
    "0.5.23": ("BeamForCausalLM", *_MEGAMOE_0520, "KimiK3ForConditionalGeneration", "KimiK3LinearForCausalLM"),
}


def _megamoe_key(listed: Version) -> str:
    return "0.5.23" if listed >= Version("0.5.23") else "0.5.20"


def _dispatch_frame(ask: Ask) -> tuple[dict[str, object], tuple[str, ...]]:
    """What ``handle_a2a_moe``'s FlashInfer branch and ``handle_flashinfer_a2a_dispatch_type`` read (0.5.23
    ``moe_hook.py`` l.166-210, l.487-529): the runner after the model overrides (``rules_moe.a2a_runner``), turned from
    ``flashinfer_trtllm`` into ``flashinfer_trtllm_routed`` where a dispatch type is given (l.511-521), the
    quantization, and the launch's variables; a checkpoint's hybrid NVFP4 metadata is read from its
    ``quantization_config`` (known absent only without one)."""
    args, model, env = ask.args, ask.model, ask.env
    a2a = rules_moe.a2a_backend(args, model)
    kernel = rules_moe.runner(args, model, ask.layout, a2a)
    runner = rules_moe.a2a_runner(args, model, ask.layout, kernel)
    given = args.get("flashinfer_a2a_dispatch_type")
    if runner == "flashinfer_trtllm" and given is not None:
        runner = "flashinfer_trtllm_routed"
    w4a16 = env_bool(env, _W4A16)
    frame: dict[str, object] = {
        "envs.SGLANG_MOE_NVFP4_DISPATCH.get()": env_bool(env, "SGLANG_MOE_NVFP4_DISPATCH"),
        "nvfp4_dispatch_env_is_set": "SGLANG_MOE_NVFP4_DISPATCH" in env,
    }
    missing: list[str] = []
    if a2a is None:
        missing.append("moe_a2a_backend")
    else:
        frame["moe_a2a_backend"] = a2a
    if runner is None:
        missing.append("moe_runner_backend")
    else:
        frame["moe_runner_backend"] = runner
    if not w4a16 or runner is not None:
        frame["use_cutedsl_w4a16"] = w4a16 and runner == "flashinfer_cutedsl"
    else:
        missing.append("use_cutedsl_w4a16")
    resolved, quant = rules_moe.quantization(args, model)
    supports: bool | None = True if quant == "modelopt_fp4" else (
        False if resolved and model.quantization is None and _arch(model) != rules_parallel2.DEEPSEEK_V4 else None)
    if resolved:
        frame["quantization"] = quant
    else:
        missing.append("quantization")
    if supports is None:
        missing.append("supports_nvfp4_dispatch")
    else:
        frame["supports_nvfp4_dispatch"] = supports
    dispatch = given or "auto"
    if dispatch != "auto":
        frame["dispatch_type"] = dispatch
    elif resolved and supports is not None:
        frame["dispatch_type"] = "mxfp8" if quant == "mxfp8" else "nvfp4" if supports else "bf16"
    else:
        missing.append("dispatch_type")
    return frame, tuple(missing)


def _deepep_v2_frame(ask: Ask) -> dict[str, object]:
    """What ``validate_deepep_v2_model_architecture`` reads (0.5.23 ``moe_hook.py`` l.710-731)."""
    archs = next((a for since, a in reversed(_DEEPEP_V2_ARCHS) if ask.listed >= since), _DEEPEP_V2_ARCHS[0][1])
    architecture = ask.model.architectures[0] if ask.model.architectures else None
    return {"parse_connector_type": _INSTANCE if _instance_path(ask.args) else "path",
            "ConnectorType.INSTANCE": _INSTANCE, "architecture": architecture, "validated_architectures": archs,
            "model_supports_deepep_v2": architecture in archs}


_INSTANCE = "instance"


def _instance_path(args: ResolvedArgs) -> bool:
    return str(args.get("model_path", "")).lower().startswith("instance://")


def _expert_pack_errors(ask: Ask) -> tuple[list[str], bool]:
    """The errors ``handle_expert_pack`` collects from the line before it reads any file (0.5.23
    ``expert_pack_hook.py`` l.39-89: the sizes, the fusion and waterfill flags, an explicit CUDA graph backend, the
    loader config's JSON), and whether they are all resolved (a ``--cuda-graph-config`` is not read here)."""
    args, values = ask.args, ask.values
    sizes = [("tensor", "--tp-size", values.get("tp_size")), ("data", "--dp-size", values.get("dp_size"))]
    if ask.listed >= EXPERT_PACK_ATTN_DP_SINCE:
        sizes.append(("attention data", "--attn-dp-size", values.get("attn_dp_size")))
    sizes.append(("expert", "--ep-size", _value(args, "ep_size", 1)))
    errors = [f"{label} parallelism ({option}) must be 1, got {size}" for label, option, size in sizes if size != 1]
    if args.flag("enforce_shared_experts_fusion"):
        errors.append("--enforce-shared-experts-fusion is incompatible with expert_pack")
    if args.flag("enable_waterfill"):
        errors.append("--enable-waterfill is incompatible with expert_pack")
    complete = args.get("cuda_graph_config") is None
    for phase in ("decode", "prefill"):
        backend = args.get(f"cuda_graph_backend_{phase}")
        if backend not in (None, "disabled"):
            errors.append(f"expert_pack requires the {phase} CUDA graph backend to be disabled, got {backend!r}")
    extra = args.get("model_loader_extra_config")
    loader: object = extra or {}
    if isinstance(loader, str):
        try:
            loader = json.loads(loader)
        except (TypeError, json.JSONDecodeError) as exc:
            errors.append(f"--model-loader-extra-config must be valid JSON: {exc}")
            loader = {}
    if not isinstance(loader, dict):
        errors.append("--model-loader-extra-config must be a JSON object")
    return errors, complete


def _judge(ask: Ask, rules: list[str], frame: Mapping[str, object], missing: tuple[str, ...]) -> Judged:
    merged = {**ask.values, **frame}
    for name in missing:
        merged.pop(name, None)
    return ask.book.judge(ask.version, merged, rules=rules)


def _scale(ask: Ask, notes: list[str]) -> Judged:
    """The elastic EP scale-up rules, judged only while scale-up is on (every entry sits under ``scaling_active``)."""
    scale = ask.among(SCALE_RULES)
    if not scale or ask.values.get("scaling_active") is not True:
        return Judged()
    dwdp = _int(ask.args.get("dwdp_size"))
    if dwdp is not None and dwdp > 1:
        scale = [r for r in scale if r not in _DWDP_DECIDED]
        notes.append("--dwdp-size sets the attention-DP, dense-TP, MoE-DP and EP sizes and the all-to-all backend "
                     "itself (arg_groups/parallel_hook.py handle_dwdp): the elastic EP scale-up sizes and topology "
                     "are not judged")
    frame, missing = scale_frame(ask)
    return _judge(ask, scale, frame, missing)


def _fuseep(ask: Ask, a2a: str | None) -> Judged:
    """``_apply_fuseep_mode_env_compat`` returns for an unset variable or a given ``--fuseep-mode``; a backend SGLang
    rewrites first becomes deepep / none / megamoe (``rules_moe.a2a_backend`` None), never ascend_fuseep."""
    compat = "SGLANG_NPU_FUSED_MOE_MODE" in ask.env and not ask.args.is_set("fuseep_mode")
    backend = a2a if a2a is not None else "rewritten"
    resolved, quant = rules_moe.quantization(ask.args, ask.model)
    frame = {"fuse_mode": _fuse_mode(ask), "fuseep_mode": _fuse_mode(ask) if compat else 1,
             "quantization": quant, "a2a_backend": backend, "moe_a2a_backend": backend}
    return _judge(ask, [FUSEEP_RULE], frame, () if resolved else ("quantization",))


def _expert_pack(ask: Ask, notes: list[str]) -> Judged:
    """The line's part of ``handle_expert_pack``'s errors: the release lists them with the file checks' errors after
    them (the pack, manifest and model paths on the serving host), which are not read: a refusal is certain where
    the line has one, and its list holds the line's part."""
    errors, complete = _expert_pack_errors(ask)
    if errors:
        return _judge(ask, [EXPERT_PACK_RULE], {"errors": True, "details": "\n".join(f"- {e}" for e in errors)}, ())
    notes.append("--load-format expert_pack: the checks of the expert-pack, manifest and model files on the serving "
                 + ("host" if complete else "host and of the --cuda-graph-config phases")
                 + " (arg_groups/expert_pack_hook.py handle_expert_pack) are not judged")
    return Judged()


def judge(ask: Ask) -> Judged:
    """The rules of this module in force, each in its frame over the shared namespace (see the module docstring)."""
    notes: list[str] = []
    parts = [_scale(ask, notes)]
    if ask.among([CUTLASS_ENV_RULE]) and _cutlass_env(ask):
        resolved, quant = rules_moe.quantization(ask.args, ask.model)
        frame = {"get_bool_env_var": True, "envs.SGLANG_CUTLASS_MOE.get()": True, "quantization": quant}
        parts.append(_judge(ask, [CUTLASS_ENV_RULE], frame, () if resolved else ("quantization",)))
    a2a = rules_moe.a2a_backend(ask.args, ask.model)
    if ask.among([FUSEEP_RULE]):
        parts.append(_fuseep(ask, a2a))
    if ask.among([MEGAMOE_RULE]) and a2a == "flashinfer_megamoe":
        frame, missing = _megamoe_frame(ask)
        parts.append(_judge(ask, [MEGAMOE_RULE], {**frame, **rules_moe.gpu(ask.layout)}, missing))
    if ask.among([DISPATCH_RULE, W4A16_RULE]) and a2a == "flashinfer":
        # ``handle_flashinfer_a2a_dispatch_type`` is called only for a given dispatch type (0.5.23 l.510-529)
        given = ask.args.get("flashinfer_a2a_dispatch_type") is not None
        frame, missing = _dispatch_frame(ask)
        parts.append(_judge(ask, ask.among([W4A16_RULE, *([DISPATCH_RULE] if given else [])]), frame, missing))
    if ask.among([DEEPEP_V2_MODEL_RULE]) and a2a == "deepep_v2":
        if ask.listed >= DEEPEP_V2_REGISTRY_SINCE and ask.env.get(EXTERNAL_MODEL_PACKAGE):
            # an external model package may register more DeepEP v2 architectures (register_deepep_v2_model)
            notes.append(f"{EXTERNAL_MODEL_PACKAGE} names an external model package, which may register DeepEP v2 "
                         "architectures of its own (configs/moe_model_registry.py): the architecture check is not "
                         "judged")
        else:
            parts.append(_judge(ask, [DEEPEP_V2_MODEL_RULE], _deepep_v2_frame(ask), ()))
    if ask.among([EXPERT_PACK_RULE]) and ask.args.get("load_format") == "expert_pack":
        parts.append(_expert_pack(ask, notes))
    megamoe = "megamoe" in (_value(ask.args, "moe_a2a_backend", "none"), ask.args.get("moe_runner_backend"))
    if ask.among([DEEPGEMM_MEGAMOE_RULE]) and megamoe:
        # ``check_mega_moe_compat`` returns unless the backend is megamoe, after the runner alias made it so (0.5.23
        # ``mega_moe_hook.py`` l.22-30, l.259-276), the second hook of the pipeline: the line's flags
        gpu = rules_moe.gpu(ask.layout)
        frame = {"enable_two_batch_overlap": ask.args.flag("enable_two_batch_overlap"),
                 "enable_single_batch_overlap": ask.args.flag("enable_single_batch_overlap"), **gpu}
        parts.append(_judge(ask, [DEEPGEMM_MEGAMOE_RULE], frame, () if gpu else ("is_sm90", "is_sm100")))
    return Judged(tuple(r for p in parts for r in p.refusals),
                  tuple(dict.fromkeys((*notes, *(n for p in parts for n in p.not_judged)))))
