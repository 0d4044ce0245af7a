"""vLLM's config-time refusals of CUDA-graph sizes, the Proton profiler, HiSparse modes, the FlashInfer MoE-EP
kernels, the Mamba backend name, EPLB options, multi-node data parallel, fault tolerance, multi-step scheduling,
NIXL disaggregated serving and routed-experts outputs, each judged in a frame of its own (their entries read
``mode``, ``name``, ``self.backend``, ``self.communicator``, names other rules read with another meaning).

- **max CUDA-graph capture size** (``VllmConfig._set_cudagraph_sizes``, 0.11.1+, config/vllm.py:2554-2557 in
  0.33.0, 857 in 0.11.1): a ``max_cudagraph_capture_size`` below 1 (``--max-cudagraph-capture-size`` or the key of
  ``--compilation-config``) where CUDA graphs stay on; the local is ``min(max_num_batched_tokens, given)``. Without
  the value the release's default is ``min(max_num_seqs * decode_query_len * 2, 512)``, never below 1.
- **a custom compile backend in the default mode** (0.11.1: ``CompilationConfig.init_backend``, config/compilation.py:
  737-741): ``__post_init__`` checks the backend only for a mode given as VLLM_COMPILE (rules_post), and
  ``VllmConfig.__post_init__`` sets an unset mode to VLLM_COMPILE without ``--enforce-eager`` (config/vllm.py:440-444);
  the model's compile wrapper then calls ``init_backend``, which refuses a backend other than eager / inductor (from
  0.12 it logs "Using OOT custom backend" instead).
- **the Proton profiler** (``--profiler-config`` profiler ``proton``): with CUDA graphs on (0.28-0.29, config/vllm.py:
  1291-1302 in 0.28.0: the mode as the line gives it, NONE under ``--enforce-eager``, an unset mode is None, which is
  not NONE); from 0.30 ``_validate_profiler_config`` (config/vllm.py:3264-3300 in 0.33.0) refuses graph attribution
  without the V2 model runner, and with CUDA graphs on (resolved, or ``cudagraph_mm_encoder``) PC sampling or no
  graph attribution.
- **HiSparse modes** (``--attention-config`` hisparse_config, or a HiSparseConnector): ``cudagraph_mode`` FULL (0.32+,
  config/vllm.py:1892-1897 in 0.33.0) and the hybrid KV cache manager turned off (0.30+, :2296-2304).
- **FlashInfer MoE-EP** (``--moe-backend``, ``KernelConfig.set_platform_defaults``, config/kernel.py:451-459 in
  0.33.0): a FlashInfer MoE-EP backend on a model that is not DeepSeek-V4 (0.29-0.31 every such backend, from 0.32
  the DeepGEMM one), or with an ``--all2all-backend`` other than the default (0.32+, :193-227).
- **the Mamba backend name** (``EngineArgs.create_engine_config``, engine/arg_utils.py:2772-2773 in 0.33.0):
  ``MambaBackendEnum[name.upper()]`` on a ``--mamba-backend`` that names no member (0.20+, config/mamba.py:15-22).
- **--eplb-config** (``EPLBConfig._validate_eplb_config``, a validator pydantic runs while the line is parsed):
  ``log_balancedness`` with an interval below 1 (0.14-0.19: from 0.20 the field's ``gt=0`` refuses it first), a
  NCCL communicator with async EPLB (0.24+, whose ``use_async`` defaults to True from 0.23).
- **nnodes within a DP replica** (``ParallelConfig.nnodes_within_dp``, 0.31+, config/parallel.py:812-835 in 0.33.0),
  read by the mp executor (v1/executor/multiproc_executor.py:305): ``--nnodes`` not divisible by DP / DP-local
  under the internal load balancer.
- **fault tolerance with API servers** (0.27+, config/parallel.py:530-535 in 0.33.0): ``--api-server-count`` above
  1 with ``--enable-fault-tolerance`` (``vllm serve`` hands the count, entrypoints/cli/serve.py:309; left unset under
  the external load balancer it is 1, :113-115).
- **multi-step scheduling** (0.8.0-0.10.0, engine/arg_utils.py:1192-1197 in 0.10.0): ``--num-scheduler-steps > 1``
  with chunked prefill given on and PP > 1 (the V0 engine it falls back to keeps an explicit flag).
- **NIXL with context parallel** (0.29+, config/vllm.py:1572-1590 in 0.33.0, 1146-1168 in 0.29.0): a NixlConnector
  in ``--kv-transfer-config`` with prefill context parallel (0.29), a DCP size other than 1 or TP (0.29; from 0.30
  the transfer size ``max(TP, PCP)``), DCP > 1 on a model without MLA, or on a hybrid model (0.29).
- **routed experts** (``--enable-return-routed-experts``): with a KV connector (0.22-0.30, config/vllm.py:857-865 in
  0.22.0); from 0.31 ``_verify_aux_output_compatibility`` (config/vllm.py:1187-1243 in 0.33.0): the V2 model runner,
  a MoE model, prefix caching, PP = 1, no context parallel and no NIXL / MoRIIO / Mooncake connector.

Where a value is not resolved here (the resolved CUDA-graph mode past the line's own settings, the V2 model runner
left to the release, prefix caching left to the release) the entry is named, never guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.vllm import rules_post
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.refusals import Judged, Refusal

MAX_CAPTURE = "vllm.compilation.max_capture_size_positive"
CUSTOM_BACKEND = "vllm.compilation.custom_backend_default_mode"
PROTON_RUNNER = "vllm.profiler.proton_attribution_runner"
PROTON_GRAPHS = "vllm.profiler.proton_cuda_graphs"
HISPARSE_MODES = "vllm.attention.hisparse_modes"
MOE_EP = "vllm.kernel.flashinfer_moe_ep"
MAMBA_BACKEND = "vllm.mamba.backend_name"
EPLB_VALUES = "vllm.parallel.eplb_config_values"
NNODES_WITHIN_DP = "vllm.parallel.nnodes_within_dp"
FT_API_SERVERS = "vllm.parallel.fault_tolerance_api_servers"
MULTI_STEP_PP = "vllm.scheduler.multi_step_pp"
NIXL_CP = "vllm.kv_transfer.nixl_context_parallel"
ROUTED_CONNECTORS = "vllm.model.routed_experts_connectors"
ROUTED_AUX = "vllm.model.routed_experts_aux_output"

RULES: Mapping[str, str] = {
    MAX_CAPTURE: "a max_cudagraph_capture_size below 1 with CUDA graphs on (VllmConfig._set_cudagraph_sizes, 0.11.1+)",
    CUSTOM_BACKEND: "--compilation-config backend other than eager / inductor with the compilation mode left to "
                    "the release, which makes it VLLM_COMPILE (CompilationConfig.init_backend, 0.11.1)",
    PROTON_RUNNER: "--profiler-config proton with proton_graph_attribution without the V2 model runner (0.30+)",
    PROTON_GRAPHS: "--profiler-config proton with CUDA graphs on (0.28-0.29), or from 0.30 with proton_mode "
                   "pcsampling or without proton_graph_attribution",
    HISPARSE_MODES: "HiSparse with --compilation-config cudagraph_mode FULL (0.32+) or the hybrid KV cache manager "
                    "turned off (0.30+)",
    MOE_EP: "--moe-backend of the FlashInfer MoE-EP megakernels on a model other than DeepSeek-V4 (0.29+), or with "
            "an --all2all-backend other than allgather_reducescatter (0.32+)",
    MAMBA_BACKEND: "--mamba-backend naming no MambaBackendEnum member (EngineArgs, 0.20+)",
    EPLB_VALUES: "--eplb-config log_balancedness with an interval below 1 (0.14-0.19), or a NCCL communicator with "
                 "async EPLB (0.24+)",
    NNODES_WITHIN_DP: "--nnodes not divisible by data_parallel_size / data_parallel_size_local under the internal "
                      "load balancer (ParallelConfig.nnodes_within_dp, 0.31+)",
    FT_API_SERVERS: "--enable-fault-tolerance with --api-server-count above 1 (ParallelConfig, 0.27+)",
    MULTI_STEP_PP: "--num-scheduler-steps > 1 with --enable-chunked-prefill and PP > 1 (EngineArgs, 0.8.0-0.10.0)",
    NIXL_CP: "a NixlConnector with prefill context parallel (0.29), a DCP size other than 1 or the transfer size, "
             "DCP > 1 on a model without MLA, or on a hybrid model (0.29) (VllmConfig, 0.29+)",
    ROUTED_CONNECTORS: "--enable-return-routed-experts with a KV connector (VllmConfig, 0.22-0.30)",
    ROUTED_AUX: "--enable-return-routed-experts without the V2 model runner, on a dense model, without prefix "
                "caching, with PP > 1, context parallel, or a NIXL / MoRIIO / Mooncake connector (0.31+)",
}
FRAMED = frozenset(RULES)

Frame = dict[str, object]

# -- CUDA graphs -------------------------------------------------------------------------------------------------

_GRAPHS_ON = ("self.model_config is not None and (not self.model_config.enforce_eager) and "
              "(self.compilation_config.cudagraph_mode != CUDAGraphMode.NONE)")
#: ``CompilationMode.VLLM_COMPILE`` as the line may give it
_VLLM_COMPILE = (3, "VLLM_COMPILE")


def _graph_mode(compilation: Mapping[str, object]) -> str | None:
    mode = compilation.get("cudagraph_mode")
    return mode.upper() if isinstance(mode, str) else None


def _compile_mode_default(compilation: Mapping[str, object]) -> bool:
    """Whether the line leaves the compilation mode to the release's VLLM_COMPILE (or gives it)."""
    mode = compilation.get("mode")
    if isinstance(mode, str):
        mode = mode.upper()
    return mode in (None, *_VLLM_COMPILE) and compilation.get("level") in (None, 3)


def cuda_graphs_on(args: ResolvedArgs, compilation: Mapping[str, object], env: Mapping[str, str]) -> bool | None:
    """Whether the release keeps CUDA graphs on (``cudagraph_mode != NONE`` once resolved) for this line: off under
    ``--enforce-eager`` or a cudagraph_mode given as NONE (the release never turns NONE back on); on where the line
    leaves the optimization level, the compilation mode (or gives VLLM_COMPILE) and the CUDA-graph mode other than
    NONE to the release. None elsewhere: another level or mode reshapes the CUDA-graph mode (``without_piecewise``,
    the optimization level's defaults), MoonEP (config/vllm.py:2141-2153 in 0.33.0) and TORCH_COMPILE_DISABLE turn
    them off, a BitsAndBytes 8-bit checkpoint forces eager mode in older releases."""
    if bool(args.get("enforce_eager")):
        return False
    mode = _graph_mode(compilation)
    if mode == "NONE":
        return False
    if args.is_set("optimization_level") or not _compile_mode_default(compilation) or \
            args.get("all2all_backend") == "moonep" or "TORCH_COMPILE_DISABLE" in env or \
            args.get("quantization") == "bitsandbytes":
        return None
    return True


def _given_int(args: ResolvedArgs, compilation: Mapping[str, object], key: str) -> int | None:
    value = compilation.get(key)
    if value is None and args.is_set(key):
        value = args.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def max_capture_frame(args: ResolvedArgs, compilation: Mapping[str, object], env: Mapping[str, str],
                      base: Mapping[str, object]) -> Frame | None:
    """``_set_cudagraph_sizes``'s local ``max_cudagraph_capture_size = min(max_num_batched_tokens, given)``; None
    where no size below 1 is given (the check cannot fail: the release's default is at least 1)."""
    given = _given_int(args, compilation, "max_cudagraph_capture_size")
    if given is None or given >= 1:
        return None
    out: Frame = {"max_cudagraph_capture_size": given}
    batched = base.get("max_num_batched_tokens")
    if isinstance(batched, int):
        out["max_cudagraph_capture_size"] = min(batched, given)
    on = cuda_graphs_on(args, compilation, env)
    if on is not None:
        out[_GRAPHS_ON] = on
    return out


def custom_backend_frame(args: ResolvedArgs, compilation: Mapping[str, object],
                         env: Mapping[str, str]) -> Frame | None:
    """0.11.1's ``init_backend`` for a backend given with the mode and level unset (``__post_init__`` maps ``''`` to
    the platform's inductor, config/compilation.py:706-707), no ``--enforce-eager`` (the mode is then NONE and
    nothing is compiled), no ``-O`` and TORCH_COMPILE_DISABLE unset; None elsewhere."""
    backend = compilation.get("backend")
    if not isinstance(backend, str) or backend == "" or compilation.get("mode") is not None or \
            compilation.get("level") is not None or bool(args.get("enforce_eager")) or \
            args.is_set("optimization_level") or "TORCH_COMPILE_DISABLE" in env:
        return None
    return {"self.backend": backend}


# -- the Proton profiler ---------------------------------------------------------------------------------------

def _json(args: ResolvedArgs, dest: str) -> Mapping[str, object]:
    value = args.get(dest)
    return value if isinstance(value, Mapping) else {}


def use_v2_model_runner(args: ResolvedArgs, model_hisparse: bool, env: Mapping[str, str]) -> bool | None:
    """``VllmConfig.use_v2_model_runner`` where the line or the environment decides it (config/vllm.py:731-750 in
    0.33.0): HiSparse and a watermark config take V2 (0.32+), VLLM_USE_V2_MODEL_RUNNER as ``maybe_convert_bool``
    reads it; None where the release's own choice (its unsupported-feature list, which differs by release) decides."""
    if model_hisparse or args.get("watermark_config") is not None:
        return True
    raw = env.get("VLLM_USE_V2_MODEL_RUNNER")
    if raw is None:
        return None
    try:
        return bool(int(raw))
    except ValueError:
        return None


#: 0.28-0.29 check Proton against the CUDA-graph mode in ``__post_init__``; 0.30 moves it to
#: ``_validate_profiler_config`` with graph attribution
PROTON_VALIDATOR_SINCE = Version("0.30.0")


def proton_frames(args: ResolvedArgs, compilation: Mapping[str, object], env: Mapping[str, str], version: Version,
                  hisparse: bool) -> tuple[Frame | None, Frame | None, str]:
    """The frames of the Proton checks (graph attribution's runner; the CUDA-graph checks) and a note where the
    CUDA-graph state is not resolved; (None, None, '') without ``profiler: proton``."""
    profiler = _json(args, "profiler_config")
    if profiler.get("profiler") != "proton":
        return None, None, ""
    attribution = bool(profiler.get("proton_graph_attribution", False))
    mode = profiler.get("proton_mode")
    pcsampling = isinstance(mode, str) and mode.split(":", 1)[0].lower() == "pcsampling"
    base: Frame = {"self.profiler_config.profiler": "proton", "self.profiler_config.proton_graph_attribution":
                   attribution, "mode": mode if isinstance(mode, str) else None,
                   "mode and mode.split(':', 1)[0].lower() == 'pcsampling'": pcsampling}
    runner: Frame = dict(base)
    v2 = use_v2_model_runner(args, hisparse, env)
    if v2 is not None:
        runner["self.use_v2_model_runner"] = v2
    if version < PROTON_VALIDATOR_SINCE:
        # the mode the line gives, NONE under --enforce-eager; an unset mode is None here (config/vllm.py:1284-1297)
        graphs = not bool(args.get("enforce_eager")) and _graph_mode(compilation) != "NONE"
        return runner, {**base, "self.compilation_config.cudagraph_mode != CUDAGraphMode.NONE": graphs}, ""
    on = cuda_graphs_on(args, compilation, env)
    encoder = bool(compilation.get("cudagraph_mm_encoder")) and not bool(args.get("enforce_eager"))
    has_graphs = True if encoder else on
    if has_graphs is None:
        return runner, None, (f"vllm/config/vllm.py VllmConfig._validate_profiler_config ({PROTON_GRAPHS}): reads "
                              "the CUDA-graph mode the release resolves, not resolved for this line")
    return runner, (base if has_graphs else None), ""


# -- HiSparse --------------------------------------------------------------------------------------------------

def hisparse_frame(args: ResolvedArgs, compilation: Mapping[str, object], hisparse: object) -> Frame | None:
    """The HiSparse mode checks: cudagraph_mode FULL as the line gives it (``--enforce-eager`` sets NONE before,
    config/vllm.py:1766-1768 in 0.33.0; PIECEWISE / FULL_DECODE_ONLY / NONE never become FULL; an unset or
    FULL_AND_PIECEWISE mode is resolved by the release, not here) and the hybrid KV cache manager as the line turns
    it off (``--disable-hybrid-kv-cache-manager``; unset, the release decides). None without HiSparse."""
    if hisparse is None:
        return None
    out: Frame = {"self.attention_config.hisparse_config": hisparse}
    mode = _graph_mode(compilation)
    if bool(args.get("enforce_eager")):
        out["self.compilation_config.cudagraph_mode == CUDAGraphMode.FULL"] = False
    elif mode is not None and mode != "FULL_AND_PIECEWISE":
        out["self.compilation_config.cudagraph_mode == CUDAGraphMode.FULL"] = mode == "FULL"
    disabled = args.get("disable_hybrid_kv_cache_manager") if args.is_set("disable_hybrid_kv_cache_manager") \
        else None
    if disabled is True:
        out["self.scheduler_config.disable_hybrid_kv_cache_manager"] = True
    return out


# -- FlashInfer MoE-EP -----------------------------------------------------------------------------------------

#: ``FLASHINFER_MOE_EP_BACKENDS`` (config/kernel.py:148-153 in 0.29.0; :152-157 in 0.32.0) and the backends
#: ``validate_flashinfer_moe_ep_model`` checks (every one until 0.31, only the DeepGEMM one from 0.32:
#: ``if moe_backend != FLASHINFER_MOE_EP_DEEP_GEMM: return``, config/kernel.py:234-235 in 0.32.0)
_EP_BACKENDS_UNTIL_032 = frozenset({"flashinfer_moe_ep_mega_deep_gemm", "flashinfer_moe_ep_mega_cutedsl"})
_EP_BACKENDS_SINCE_032 = frozenset({"flashinfer_moe_ep_cutedsl", "flashinfer_moe_ep_mega_deep_gemm"})
EP_BACKENDS_RENAMED_SINCE = Version("0.32.0")
MODEL_CHECK_DEEP_GEMM_ONLY_SINCE = Version("0.32.0")
#: ``FLASHINFER_MOE_EP_ARCHITECTURES`` (config/kernel.py:163-168 in 0.29.0; V4.1 added in 0.30)
_EP_ARCHS_029 = frozenset({"DeepseekV4ForCausalLM", "DeepSeekV4MTPModel"})
_EP_ARCHS = frozenset({"DeepseekV4ForCausalLM", "DeepSeekV4MTPModel", "DeepseekV41ForCausalLM"})
EP_V41_SINCE = Version("0.30.0")


def moe_ep_frame(args: ResolvedArgs, architectures: Sequence[str], version: Version,
                 env: Mapping[str, str]) -> Frame | None:
    """``set_platform_defaults``'s two checks on ``--moe-backend`` (the flag as given; the all2all backend as
    ``ParallelConfig`` resolved it, ``rules_post``); None for a backend neither checks."""
    backend = args.get("moe_backend")
    backends = _EP_BACKENDS_SINCE_032 if version >= EP_BACKENDS_RENAMED_SINCE else _EP_BACKENDS_UNTIL_032
    if not isinstance(backend, str) or backend not in backends:
        return None
    archs = _EP_ARCHS if version >= EP_V41_SINCE else _EP_ARCHS_029
    checked = backend == "flashinfer_moe_ep_mega_deep_gemm" if version >= MODEL_CHECK_DEEP_GEMM_ONLY_SINCE else True
    return {
        "moe_backend": backend, "FLASHINFER_MOE_EP_BACKENDS": backends, "FLASHINFER_MOE_EP_ARCHITECTURES": archs,
        "sorted(FLASHINFER_MOE_EP_ARCHITECTURES)": sorted(archs), "list(architectures)": list(architectures),
        "not any((arch in FLASHINFER_MOE_EP_ARCHITECTURES for arch in architectures))":
            checked and not any(a in archs for a in architectures),
        "a2a": rules_post._a2a_backend(args, version, env),
    }


# -- the Mamba backend name ------------------------------------------------------------------------------------

#: ``MambaBackendEnum``'s members (config/mamba.py: TRITON, FLASHINFER from 0.20; CPU from 0.27)
MAMBA_CPU_SINCE = Version("0.27.0")


def mamba_backend_frame(args: ResolvedArgs, version: Version) -> Frame | None:
    """``MambaBackendEnum[self.mamba_backend.upper()]`` for a ``--mamba-backend`` given (the parser keeps the text;
    the default is the member itself); None without it."""
    given = args.get("mamba_backend") if args.is_set("mamba_backend") else None
    if not isinstance(given, str):
        return None
    members = ("TRITON", "FLASHINFER", "CPU") if version >= MAMBA_CPU_SINCE else ("TRITON", "FLASHINFER")
    name = given.upper()
    return {"name": name, "valid": ", ".join(members), "except KeyError": name not in members}


# -- --eplb-config ---------------------------------------------------------------------------------------------

#: ``log_balancedness_interval: int = Field(default=1, gt=0)`` from 0.20 (pydantic refuses a value below 1 first);
#: ``use_async`` defaults to True from 0.23 (config/parallel.py:81 in 0.23.0)
EPLB_INTERVAL_BOUND_SINCE = Version("0.20.0")
EPLB_ASYNC_DEFAULT_SINCE = Version("0.23.0")


def eplb_frame(args: ResolvedArgs, version: Version) -> tuple[Frame | None, str]:
    """``EPLBConfig``'s fields as ``--eplb-config`` gives them (the field defaults elsewhere); None without it."""
    given = _json(args, "eplb_config")
    if not given:
        return None, ""
    use_async = given.get("use_async", version >= EPLB_ASYNC_DEFAULT_SINCE)
    out: Frame = {"self.use_async": bool(use_async), "self.communicator": given.get("communicator"),
                  "self.policy": given.get("policy", "default"),
                  "self.log_balancedness": bool(given.get("log_balancedness", False))}
    interval = given.get("log_balancedness_interval", 1)
    note = ""
    if isinstance(interval, int) and not isinstance(interval, bool):
        if version < EPLB_INTERVAL_BOUND_SINCE or interval > 0:
            out["self.log_balancedness_interval"] = interval
        elif out["self.log_balancedness"]:
            note = (f"vllm/config/parallel.py EPLBConfig._validate_eplb_config ({EPLB_VALUES}): "
                    "log_balancedness_interval below 1 is refused by the field's bound (gt=0) first")
    return out, note


# -- multi-node data parallel, fault tolerance -----------------------------------------------------------------

def nnodes_frame(ask: Ask) -> Frame | None:
    """``nnodes_within_dp`` as the mp executor reads it (``nnodes == 1`` returns 1; the external load balancer
    returns first), over ``ParallelConfig``'s DP sizes as ``create_engine_config`` hands them; None elsewhere."""
    from pytest_gpulayout.engines.vllm.config_checks import data_parallel_launch  # config_checks imports this area

    args, layout, version = ask.args, ask.layout, ask.version
    launch = data_parallel_launch(args, layout, version)
    backend, _ = rules_post.resolved_backend(args, layout, version)
    if launch.nnodes <= 1 or launch.parallel_external_lb or backend != "mp" or launch.parallel_size_local <= 0:
        return None
    dp = layout.data_parallel_size
    return {"self.nnodes": launch.nnodes, "self.data_parallel_size": dp,
            "self.data_parallel_size_local": launch.parallel_size_local,
            "data_parallel_node_size": dp // launch.parallel_size_local}


def api_servers_frame(args: ResolvedArgs) -> Frame | None:
    """``_api_process_count`` as ``vllm serve`` sets it: ``--api-server-count``, else 1 under the external load
    balancer (entrypoints/cli/serve.py:113-115 in 0.33.0) or ``--headless``; None without fault tolerance."""
    if not bool(args.get("enable_fault_tolerance")):
        return None
    count = args.get("api_server_count") if args.is_set("api_server_count") else None
    if not isinstance(count, int) or isinstance(count, bool):
        external = bool(args.get("data_parallel_external_lb")) or args.get("data_parallel_rank") is not None
        count = 1 if external or bool(args.get("headless")) else None
    out: Frame = {"self.enable_fault_tolerance": True}
    if count is not None:
        out["self._api_process_count"] = count
    return out


def multi_step_frame(args: ResolvedArgs, pp: int, env: Mapping[str, str]) -> tuple[Frame | None, str]:
    """``create_engine_config``'s multi-step check: ``--num-scheduler-steps > 1`` makes V1's oracle fall back to V0
    (with VLLM_USE_V1=1 the oracle refuses it first), whose ``_set_default_args_v0`` keeps an explicit
    ``--enable-chunked-prefill``; left unset, V0's default (by max_model_len and usage) is not resolved here."""
    steps = args.get("num_scheduler_steps")
    if not isinstance(steps, int) or steps <= 1 or env.get("VLLM_USE_V1") == "1":
        return None, ""
    out: Frame = {"self.num_scheduler_steps": steps, "self.pipeline_parallel_size": pp}
    chunked = args.get("enable_chunked_prefill") if args.is_set("enable_chunked_prefill") else None
    if isinstance(chunked, bool):
        out["self.enable_chunked_prefill"] = chunked
    elif pp > 1:
        return None, (f"vllm/engine/arg_utils.py EngineArgs.create_engine_config ({MULTI_STEP_PP}): reads the V0 "
                      "engine's chunked-prefill default, not resolved here")
    else:
        out["self.enable_chunked_prefill and self.pipeline_parallel_size > 1"] = False
    return out, ""


# -- KV connectors ---------------------------------------------------------------------------------------------

#: ``KVRole`` (config/kv_transfer.py): ``is_kv_transfer_instance`` is a connector with one of these roles
_KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
_NIXL = ("self.kv_transfer_config is not None and self.kv_transfer_config.has_connector('NixlConnector')")
_AUX_CONNECTORS = ("NixlConnector", "NixlPullConnector", "NixlPushConnector", "MoRIIOConnector", "MooncakeConnector")


def nixl_frame(ask: Ask, kv_transfer: Mapping[str, object]) -> Frame | None:
    """The NIXL checks' values: DCP / PCP / TP sizes, MLA as the shared namespace resolves it (VLLM_MLA_DISABLE), the
    class's ``IsHybrid`` from the release's interface facts; None without a NixlConnector."""
    if not rules_post._has_connector(kv_transfer, "NixlConnector"):
        return None
    base, layout = ask.values, ask.layout
    dcp, pcp, tp = base.get("decode_context_parallel_size", 1), base.get("prefill_context_parallel_size", 1), \
        layout.tensor_parallel_size
    out: Frame = {_NIXL: True, "self.parallel_config.prefill_context_parallel_size": pcp, "dcp_size": dcp,
                  "tp_size": tp, "self.model_config": True, "self.model_config.use_mla": bool(base.get("use_mla"))}
    if isinstance(pcp, int):
        out["transfer_tp_size"] = max(tp, pcp)
    hybrid = rules_post._arch_flag(ask.model, ask.version, "is_hybrid")
    if hybrid is not None:
        out["self.model_config.is_hybrid"] = hybrid
    elif dcp == 1:
        out["self.model_config.is_hybrid and dcp_size > 1"] = False
    return out


def routed_frame(args: ResolvedArgs, kv_transfer: Mapping[str, object]) -> Frame | None:
    """0.22-0.30's routed-experts check against a KV connector (``is_kv_transfer_instance``: a connector with a
    role); None without ``--enable-return-routed-experts``."""
    if not bool(args.get("enable_return_routed_experts")):
        return None
    instance = kv_transfer.get("kv_connector") is not None and kv_transfer.get("kv_role") in _KV_ROLES
    return {"self.model_config is not None and self.model_config.enable_return_routed_experts": True,
            "self.kv_transfer_config is not None and self.kv_transfer_config.is_kv_transfer_instance": instance}


def aux_frames(ask: Ask, kv_transfer: Mapping[str, object], hisparse: bool) -> list[Frame]:
    """``_verify_aux_output_compatibility``'s frames (it returns first without an auxiliary output: the flag, or
    ``--aux-output-config``'s key): the model runner where the line decides it, MoE, prefix caching where the
    line turns it off (left on or to the release it is not resolved), the parallel sizes; then one frame per
    connector name of its loop."""
    args, base = ask.args, ask.values
    if not (bool(args.get("enable_return_routed_experts")) or bool(
            _json(args, "aux_output_config").get("enable_return_routed_experts"))):
        return []
    whole: Frame = {"self.model_config": True, "self.model_config.is_moe": bool(base.get("is_moe")),
                    "is_tpu": False, "is_out_of_tree": False,
                    "kv_transfer_config": kv_transfer or None,
                    "for connector_name in ('NixlConnector', 'NixlPullConnector', 'NixlPushConnector', "
                    "'MoRIIOConnector', 'MooncakeConnector')": False}
    v2 = use_v2_model_runner(args, hisparse, ask.env)
    if v2 is not None:
        whole["self.use_v2_model_runner"] = v2
    if args.is_set("enable_prefix_caching") and args.get("enable_prefix_caching") is False:
        whole["self.cache_config.enable_prefix_caching"] = False
    frames = [whole]
    loop = ("for connector_name in ('NixlConnector', 'NixlPullConnector', 'NixlPushConnector', 'MoRIIOConnector', "
            "'MooncakeConnector')")
    if kv_transfer:
        frames += [{**whole, loop: True, "connector_name": name,
                    "kv_transfer_config.has_connector(connector_name)": rules_post._has_connector(kv_transfer, name)}
                   for name in _AUX_CONNECTORS]
    return frames


# -- the area --------------------------------------------------------------------------------------------------

def judge(ask: Ask) -> Judged:
    """The rules of this module in force, each in its frame(s) over the shared namespace."""
    book, version, base, args, env = ask.book, ask.version, ask.values, ask.args, ask.env
    rules = set(ask.among(FRAMED))
    if not rules:
        return Judged()
    compilation = rules_post.compilation_config(args)
    kv_transfer = _json(args, "kv_transfer_config")
    hisparse = rules_post.hisparse_values(args, ask.model, env)["self.attention_config.hisparse_config"]
    notes: list[str] = []
    framed: list[tuple[str, Frame | None]] = [
        (MAX_CAPTURE, max_capture_frame(args, compilation, env, base)),
        (CUSTOM_BACKEND, custom_backend_frame(args, compilation, env)),
        (HISPARSE_MODES, hisparse_frame(args, compilation, hisparse)),
        (MOE_EP, moe_ep_frame(args, ask.model.architectures, version, env)),
        (MAMBA_BACKEND, mamba_backend_frame(args, version)),
        (NNODES_WITHIN_DP, nnodes_frame(ask)),
        (FT_API_SERVERS, api_servers_frame(args)),
        (NIXL_CP, nixl_frame(ask, kv_transfer)),
        (ROUTED_CONNECTORS, routed_frame(args, kv_transfer)),
    ]
    runner, graphs, note = proton_frames(args, compilation, env, version, hisparse is not None)
    framed += [(PROTON_RUNNER, runner), (PROTON_GRAPHS, graphs)]
    eplb, eplb_note = eplb_frame(args, version)
    steps, steps_note = multi_step_frame(args, ask.layout.pipeline_parallel_size, env)
    framed += [(EPLB_VALUES, eplb), (MULTI_STEP_PP, steps)]
    framed += [(ROUTED_AUX, f) for f in aux_frames(ask, kv_transfer, hisparse is not None)]
    for rule, said in ((PROTON_GRAPHS, note), (EPLB_VALUES, eplb_note), (MULTI_STEP_PP, steps_note)):
        if said and rule in rules and book.ledger.held(rule, ask.listed):
            notes.append(said)
    refusals: list[Refusal] = []
    seen: set[tuple[str, str]] = set()
    for rule, frame in framed:
        if rule not in rules or frame is None:
            continue
        one = book.judge(version, {**base, **frame}, rules=[rule])
        for r in one.refusals:
            if (r.entry, r.message) not in seen:
                seen.add((r.entry, r.message))
                refusals.append(r)
        notes += [n for n in one.not_judged if n not in notes]
    return Judged(tuple(refusals), tuple(notes))
