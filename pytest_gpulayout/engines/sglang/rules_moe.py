"""SGLang's MoE runner and all-to-all refusals: the runner backend against the quantization, the EP size and the
all-to-all backend, FP4-online quantization, the all-to-all backends' runner and attention-DP requirements, DeepEP
v2's flags, two-batch overlap without an all-to-all backend and Kimi-K3's shared-experts TP, by release.

* Runner vs quantization and EP size (``ServerArgs._handle_moe_kernel_config`` 0.5.3 - 0.5.18, from 0.5.19
  ``arg_groups/moe_hook.py handle_moe_kernel_config``, 0.5.23 l.68-165): ``flashinfer_cutlass`` /
  ``flashinfer_cutedsl`` / ``flashinfer_trtllm`` / ``flashinfer_trtllm_routed`` each list the quantizations they
  run (each release its own list, in the ledger's conditions), the first two need ``ep_size`` 1 or TP, and
  ``cutlass`` with fp8 / mxfp8 needs ``ep_size`` 1; ``flashinfer_cutedsl`` lists the all-to-all backends it runs
  with (0.5.23 l.106-118).
* ``--quantization nvfp4_online`` (0.5.14 ``server_args.py`` l.5065-5080; from 0.5.15 ``overrides.py
  _moe_runner_backend_quant_constraints``, 0.5.23 l.1450-1478): only on SM100 / SM103, with the TRT-LLM runners (and
  from 0.5.18 CuteDSL).
* The all-to-all backends (``ServerArgs._handle_a2a_moe`` 0.5.9 - 0.5.18, ``moe_hook.py handle_a2a_moe`` from 0.5.19):
  ``flashinfer`` needs attention DP over the whole TP group (0.5.13 - 0.5.21 ``dp_size == tp_size`` with
  ``--enable-dp-attention``; 0.5.23 l.475 the same through ``_flashinfer_a2a_topology_is_supported``, l.43-67) and
  a FlashInfer runner of the release's list (0.5.9 only ``flashinfer_cutlass`` ... 0.5.23 l.531 five); ``pplx``
  ``deep_gemm`` or auto (0.5.17+, l.599); ``deepep_v2`` ``deep_gemm`` (auto becomes it, l.406-419), no
  deterministic inference (0.5.19 - 0.5.20), no TBO / SBO, no ``--enforce-shared-experts-fusion`` and no
  ``--deepep-v2-mode direct`` across nodes (l.421-437); ``flashinfer_megamoe`` the ``flashinfer_megamoe`` runner
  (auto becomes it, l.328-335) and attention DP over TP (0.5.20 - 0.5.21); DeepEP with CuteDSL not ``normal``.
* Two-batch overlap with ``--moe-a2a-backend none`` (0.5.7 - 0.5.14 ``check_server_args``: refused; from 0.5.15
  ``_check_two_batch_overlap``, 0.5.23 ``validation_hook.py`` l.763-772: refused without attention DP).
* ``--shared-experts-tp-size`` (0.5.21+, ``parallel_hook.py handle_shared_experts_tp``, 0.5.23 l.203-237): a
  divisor of the attention TP width, a Kimi-K3 model, an expert-parallel all-to-all backend.

The values are the ones the release holds at its check, or left out (the entry is then not judged):

- the runner backend: the line's, except where SGLang rewrites it first: ``--quantization mxfp8`` (0.5.9 forces
  ``cutlass``, 0.5.14+ ``flashinfer_trtllm`` over a runner its list lacks, 0.5.14 l.5081-5096), ``nvfp4_online`` with
  auto (``flashinfer_trtllm``, or MegaMOE's with the FlashInfer MegaMOE backend), ``modelopt_fp4`` with auto on SM110
  / SM120 (``flashinfer_cutlass``, 0.5.14 l.5098-5101) and a runner named for a Nemotron-H model (0.5.9
  ``server_args.py`` l.1537-1546 sets the quantization and ``flashinfer_cutlass``): not resolved. ``auto`` is
  otherwise kept at the kernel checks: the runners the model overrides pick for auto are picked for the quantizations
  the asserts list (0.5.23 ``overrides.py`` l.810-823: ``flashinfer_trtllm`` for fp8 / modelopt / unquantized DeepSeek
  on SM100), so none of their kernel asserts refuses the engine's own pick. The all-to-all runner lists read the
  runner after those overrides, which pick FlashInfer / DeepGEMM runners on SM100 GPUs (0.5.23
  ``model_overrides/*.py``, each under ``is_sm100``) and for GPT-OSS / MiniMax M3 / MiMo / Kimi-K3 / Nemotron-H on
  others: there auto is not resolved;
- the quantization: the line's ``--quantization``; without it None for an unquantized checkpoint, except the
  families whose overrides set it from the checkpoint (DeepSeek's reads the safetensors for FP8 experts on SM100,
  0.5.23 ``overrides.py`` l.787-809; GLM-4 MoE, Gemma 4, MiniMax M3, Nemotron-H): a quantized checkpoint
  without the flag, or such a family, is not resolved;
- the EP size at the kernel checks: the line's ``--ep-size`` (``_handle_moe_kernel_config`` runs before
  ``_handle_a2a_moe`` sets ``ep_size = tp_size`` in every release: 0.5.5 l.608-609, 0.5.18 l.3729-3730, 0.5.23
  ``pipeline.py`` l.294-295), TP with the older ``--enable-ep-moe`` / ``--enable-deepep-moe``; ``--dwdp-size`` > 1
  and MLA prefill context parallelism set it first: not resolved;
- the all-to-all backend: the line's, except where SGLang rewrites it (``rules_parallel2._a2a_backend``'s cases:
  ``--enable-waterfill``, ``--dwdp-size``, ``--moe-runner-backend megamoe``, MLA prefill CP, MiniMax M3): not
  resolved; ``--enable-deepep-moe`` (before 0.5) is deepep;
- the GPU: ``is_sm100_supported`` is a capability major of 10, ``is_sm90_supported`` of 9, ``is_sm120_supported``
  of 12 (``utils/common.py``: the major with CUDA 12.8 / 12.3, which a Blackwell / Hopper serving image has); an
  unknown capability leaves them out.
"""

from __future__ import annotations

from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang import rules_parallel2
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

RULES: Mapping[str, str] = {
    "sglang.moe_runner.quantization": "a --moe-runner-backend (flashinfer_cutlass / cutedsl / trtllm / trtllm_routed) "
                                      "with a quantization it does not run",
    "sglang.moe_runner.ep_size": "--moe-runner-backend flashinfer_cutlass / flashinfer_cutedsl with an EP size other "
                                 "than 1 or TP, or cutlass with fp8 / mxfp8 and EP",
    "sglang.moe_runner.cutedsl_a2a": "--moe-runner-backend flashinfer_cutedsl with an all-to-all backend it does not "
                                     "run, per-token NVFP4 over DeepEP, or --deepep-mode normal",
    "sglang.moe_runner.nvfp4_online": "--quantization nvfp4_online off SM100 / SM103, or with a runner other than the "
                                      "TRT-LLM (or CuteDSL) ones (0.5.14+)",
    "sglang.a2a.moe_runner": "--moe-a2a-backend flashinfer / pplx / deepep_v2 / flashinfer_megamoe with a MoE runner "
                             "backend it does not run (auto included where the release keeps it)",
    "sglang.a2a.flashinfer_dp_attention": "--moe-a2a-backend flashinfer (or flashinfer_megamoe) without attention DP "
                                          "over the whole TP group (0.5.13 - 0.5.21, 0.5.23)",
    "sglang.a2a.deepep_v2": "--moe-a2a-backend deepep_v2 with deterministic inference, two- / single-batch overlap, "
                            "--enforce-shared-experts-fusion or --deepep-v2-mode direct across nodes",
    "sglang.two_batch_overlap.a2a": "--enable-two-batch-overlap with --moe-a2a-backend none (from 0.5.15: without "
                                    "attention DP)",
    "sglang.shared_experts_tp": "--shared-experts-tp-size that does not divide the attention TP width, or beside a "
                                "model other than Kimi-K3 or without an expert-parallel all-to-all backend (0.5.21+)",
}

#: the rules whose entries read the runner at ``handle_a2a_moe``'s runner lists (after the model overrides)
A2A_RUNNER_RULE = "sglang.a2a.moe_runner"
#: ``--quantization mxfp8`` rewrites the runner before the kernel checks (0.5.9: cutlass; 0.5.14+: flashinfer_trtllm
#: over one its list lacks, and from 0.5.15 the list is ``MXFP8_MOE_RUNNER_BACKEND_CHOICES``)
_REWRITING_QUANTS = ("mxfp8",)
#: architectures whose model overrides set the quantization from the checkpoint, by prefix (0.5.23
#: ``overrides.py _deepseek_moe_quant_resolution``, ``model_overrides/glm4_moe.py`` l.32, ``gemma4.py`` l.47,
#: ``minimax_m3.py`` l.53; 0.5.9 ``server_args.py`` l.1537-1545 Nemotron-H)
_QUANT_SETTING_ARCHS = ("Deepseek", "KimiK2", "MistralLarge3", "Pixtral", "GlmMoeDsa", "Longcat", "Glm4Moe", "Gemma4",
                        "MiniMaxM3", "NemotronH")
#: architectures whose overrides pick a runner off SM100 too (GPT-OSS deep_gemm / triton, MiniMax M3 deep_gemm /
#: marlin, MiMo marlin, Kimi-K3, Nemotron-H flashinfer_cutlass, HYV4 deep_gemm for MXFP8, 0.5.23
#: ``model_overrides/deepseek_v2.py`` l.88-91): an auto runner at the all-to-all checks is theirs
_RUNNER_PICKING_ARCHS = ("GptOss", "MiniMaxM3", "MiMo", "KimiK3", "NemotronH", "HYV4")
#: Nemotron-H: 0.5.9 sets ``moe_runner_backend = "flashinfer_cutlass"`` for it whatever the line says: a runner the
#: line names is not the one checked (auto is the engine's own pick, with the quantization it sets beside it)
_RUNNER_OVERRIDING_ARCHS = ("NemotronH",)
#: rules that judge only with their flag given: ``handle_shared_experts_tp`` returns for ``size is None`` (0.5.23
#: ``parallel_hook.py`` l.205-207)
SHARED_EXPERTS_TP_RULE = "sglang.shared_experts_tp"
NVFP4_ONLINE_RULE = "sglang.moe_runner.nvfp4_online"
#: 0.5.23 ``moe_hook.py`` l.475: the topology test, as the ledger writes the call (its keywords are not evaluated)
TOPOLOGY_CALL = ("_flashinfer_a2a_topology_is_supported(architecture=architecture, tp_size=cfg.tp_size, "
                 "ep_size=view.ep_size, attn_dp_size=cfg.attn_dp_size, attn_dp_enabled=attn_dp_enabled_of(cfg), "
                 "enable_layernorm_sp=view.enable_layernorm_sp)")
#: ``ConnectorType.INSTANCE`` as ``parse_connector_type`` reads an ``instance://`` model path
_INSTANCE = "instance"
#: 0.5.22 ``handle_deprecated_dp_attention``: the attention-DP width is ``--attn-dp-size`` from here
ATTN_DP_SIZE_SINCE = Version("0.5.22")


def _given(args: ResolvedArgs, dest: str, default: object) -> object:
    value = args.get(dest) if args.is_set(dest) else None
    return default if value is None else value


def _arch(model: ModelSpec) -> str:
    return model.architectures[0] if model.architectures else ""


def gpu(layout: Layout) -> dict[str, object]:
    """The release's platform probes the entries read, from the capability (none when it is unknown)."""
    cc = layout.compute_capability
    if cc is None:
        return {}
    major = cc[0]
    return {"is_sm100_supported": major == 10, "is_sm100": major == 10, "is_sm90_supported": major == 9,
            "is_sm90": major == 9, "is_sm120_supported": major == 12, "is_sm120": major == 12}


def a2a_backend(args: ResolvedArgs, model: ModelSpec) -> str | None:
    """The all-to-all backend the release's checks read, or None where SGLang rewrites the line's first (see the
    module docstring)."""
    if bool(args.get("enable_deepep_moe", False)):
        return "deepep"
    dwdp = args.get("dwdp_size")
    prefill_cp = any(bool(args.get(d, False)) for d in rules_parallel2.PREFILL_CP_FLAGS)
    if (bool(args.get("enable_waterfill", False)) or (isinstance(dwdp, int) and dwdp > 1)
            or args.get("moe_runner_backend") == "megamoe" or (model.is_mla and prefill_cp)
            or _arch(model).startswith("MiniMaxM3")):
        return None
    return str(_given(args, "moe_a2a_backend", "none"))


def quantization(args: ResolvedArgs, model: ModelSpec) -> tuple[bool, object]:
    """(resolved, value): the quantization the checks read (see the module docstring)."""
    if args.get("quantization") is not None:
        return True, args.get("quantization")
    if model.quantization is None and not _arch(model).startswith(_QUANT_SETTING_ARCHS):
        return True, None
    return False, None


def runner(args: ResolvedArgs, model: ModelSpec, layout: Layout, a2a: str | None) -> str | None:
    """The runner backend at the kernel checks, or None where SGLang rewrites the line's first."""
    given = str(_given(args, "moe_runner_backend", "auto"))
    quant = args.get("quantization")
    arch = _arch(model)
    if quant in _REWRITING_QUANTS or (given != "auto" and arch.startswith(_RUNNER_OVERRIDING_ARCHS)):
        return None
    if given == "auto" and quant == "nvfp4_online":
        return None if a2a in (None, "flashinfer_megamoe") else "flashinfer_trtllm"
    cc = layout.compute_capability
    if given == "auto" and quant == "modelopt_fp4" and (cc is None or cc[0] in (11, 12)):
        return None
    return given


def a2a_runner(args: ResolvedArgs, model: ModelSpec, layout: Layout, at_kernel: str | None) -> str | None:
    """The runner ``handle_a2a_moe``'s lists read: the kernel checks' one, with auto left unresolved where a model
    override may have picked one (an SM100 or unknown GPU, or a family that picks off SM100)."""
    if at_kernel != "auto":
        return at_kernel
    cc = layout.compute_capability
    if cc is None or cc[0] == 10 or _arch(model).startswith(_RUNNER_PICKING_ARCHS):
        return None
    return at_kernel


def ep_size(args: ResolvedArgs, model: ModelSpec, layout: Layout) -> int | None:
    """The EP size at the kernel checks (see the module docstring), or None where SGLang sets it first."""
    dwdp = args.get("dwdp_size")
    prefill_cp = any(bool(args.get(d, False)) for d in rules_parallel2.PREFILL_CP_FLAGS)
    if (isinstance(dwdp, int) and dwdp > 1) or (model.is_mla and prefill_cp):
        return None
    if bool(args.get("enable_ep_moe", False)) or bool(args.get("enable_deepep_moe", False)):
        return layout.tensor_parallel_size
    ep = _given(args, "ep_size", _given(args, "expert_parallel_size", 1))
    return ep if isinstance(ep, int) and not isinstance(ep, bool) else None


def attn_tp_size(ask: Ask) -> int | None:
    """The attention TP width ``handle_shared_experts_tp`` derives: TP over the attention-DP width (0.5.21: DP with
    ``--enable-dp-attention``; 0.5.22+ ``--attn-dp-size``) and the attention CP size; None where SGLang sets the CP
    size itself (MLA prefill CP, DeepSeek V4)."""
    prefill_cp = any(bool(ask.args.get(d, False)) for d in rules_parallel2.PREFILL_CP_FLAGS)
    if (ask.model.is_mla and prefill_cp) or _arch(ask.model) == rules_parallel2.DEEPSEEK_V4:
        return None
    values = ask.values
    tp, cp = values.get("tp_size"), values.get("attn_cp_size")
    width = values.get("attn_dp_size") if ask.listed >= ATTN_DP_SIZE_SINCE else (
        values.get("dp_size") if values.get("enable_dp_attention") else 1)
    if not all(isinstance(v, int) and v > 0 for v in (tp, cp, width)):
        return None
    assert isinstance(tp, int) and isinstance(cp, int) and isinstance(width, int)
    return tp // width // cp


def frame(ask: Ask) -> tuple[dict[str, object], tuple[str, ...]]:
    """The values this module's entries read (over the shared namespace) and the names to leave out of it (a value
    SGLang sets itself first: the entry that reads it is not judged)."""
    args, model, layout = ask.args, ask.model, ask.layout
    values: dict[str, object] = dict(gpu(layout))
    missing: list[str] = [] if values else ["is_sm100_supported", "is_sm100", "is_sm90_supported", "is_sm90",
                                            "is_sm120_supported", "is_sm120"]
    a2a = a2a_backend(args, model)
    for name in ("moe_a2a_backend", "a2a_backend", "a2a_now"):
        if a2a is None:
            missing.append(name)
        else:
            values[name] = a2a
    resolved, quant = quantization(args, model)
    if resolved:
        values["quantization"] = quant
    else:
        missing.append("quantization")
    at_kernel = runner(args, model, layout, a2a)
    if at_kernel is None:
        missing.append("moe_runner_backend")
    else:
        values["moe_runner_backend"] = at_kernel
    ep = ep_size(args, model, layout)
    if ep is None:
        missing.append("ep_size")
    else:
        values["ep_size"] = ep
    values.update({
        "deepep_mode": _given(args, "deepep_mode", "auto"),
        "enable_two_batch_overlap": bool(args.get("enable_two_batch_overlap", False)),
        "enable_single_batch_overlap": bool(args.get("enable_single_batch_overlap", False)),
        "enforce_shared_experts_fusion": bool(args.get("enforce_shared_experts_fusion", False)),
        "enable_deterministic_inference": bool(args.get("enable_deterministic_inference", False)),
        "deepep_v2_mode": _given(args, "deepep_v2_mode", "direct"),
        # ``cp_tbo`` starts with ``get_platform().is_hip`` (0.5.19 ``validation_hook.py`` l.425-429): False on CUDA
        "cp_tbo": False,
        "size": args.get("shared_experts_tp_size"),
        "parse_connector_type": _INSTANCE if str(args.get("model_path", "")).lower().startswith("instance://")
        else "path",
        "ConnectorType.INSTANCE": _INSTANCE,
    })
    attn_tp = attn_tp_size(ask)
    if attn_tp is None:
        missing.append("attn_tp_size")
    else:
        values["attn_tp_size"] = attn_tp
    if a2a == "flashinfer" and _arch(model) != "MuseSparkForConditionalGeneration":
        # ``_flashinfer_a2a_topology_is_supported`` (0.5.23 moe_hook.py l.43-67): attention DP over the whole TP
        # group; the Muse Spark exception reads its layernorm SP, not modelled
        values[TOPOLOGY_CALL] = bool(ask.values.get("attn_dp_enabled_of")) and (
            ask.values.get("attn_dp_size") == ask.values.get("tp_size"))
    return values, tuple(missing)


def judge(ask: Ask) -> Judged:
    """The rules of this module in force, in ``frame`` over the shared namespace; the all-to-all runner lists read
    the runner as ``a2a_runner`` leaves it (``flashinfer_megamoe`` turns auto into its own runner first, 0.5.23
    ``moe_hook.py`` l.328-331; DeepEP v2 names it ``resolved_runner``, l.406)."""
    rules = [r for r in ask.among(RULES) if r != SHARED_EXPERTS_TP_RULE or ask.args.get("shared_experts_tp_size")
             is not None]
    if not rules:
        return Judged()
    values, missing = frame(ask)
    merged = {**ask.values, **values}
    for name in missing:
        merged.pop(name, None)
    parts: list[Judged] = []
    if NVFP4_ONLINE_RULE in rules:
        # ``nvfp4_online`` is an online method only the flag names (no checkpoint's quant_method is it): the model
        # overrides that set the quantization from the checkpoint never make it, so the line's flag decides
        parts.append(ask.book.judge(ask.version, {**merged, "quantization": ask.args.get("quantization")},
                                    rules=[NVFP4_ONLINE_RULE]))
    others = [r for r in rules if r not in (A2A_RUNNER_RULE, NVFP4_ONLINE_RULE)]
    if others:
        parts.append(ask.book.judge(ask.version, merged, rules=others))
    if A2A_RUNNER_RULE in rules:
        kernel = values.get("moe_runner_backend")
        at_a2a = a2a_runner(ask.args, ask.model, ask.layout, kernel if isinstance(kernel, str) else None)
        if at_a2a == "auto" and values.get("a2a_backend") == "flashinfer_megamoe":
            at_a2a = "flashinfer_megamoe"
        in_a2a = {k: v for k, v in merged.items() if k not in ("moe_runner_backend", "resolved_runner")}
        if at_a2a is not None:
            in_a2a["moe_runner_backend"] = in_a2a["resolved_runner"] = at_a2a
        parts.append(ask.book.judge(ask.version, in_a2a, rules=[A2A_RUNNER_RULE]))
    return Judged(tuple(r for p in parts for r in p.refusals), tuple(n for p in parts for n in p.not_judged))
