"""vLLM's config-time refusals of compilation options, executor backends, dual-batch overlap and the other
``VllmConfig`` / ``ParallelConfig`` / ``EngineArgs`` post-processing checks a command line reaches.

The values here are judged in frames of their own (``judge``): the names the releases' conditions read
(``self.distributed_executor_backend`` in ``ParallelConfig`` after it resolved the default, ``op`` of a loop over
``--compilation-config``'s ``custom_ops``) mean something else in the shared namespace, where ``self.
distributed_executor_backend`` is the flag as ``EngineArgs`` holds it.

- **custom ops** (``CompilationConfig.__post_init__``; ``model_post_init`` in 0.8.x): ``custom_ops`` with both
  ``all`` and ``none`` (config.py:3149 in 0.8.0 to config/compilation.py:910 in 0.26.0), an entry that is not
  ``all`` / ``none`` / ``+op`` / ``-op`` (config/compilation.py:485 in 0.11.0, :1015 in 0.33.0), two base modes and
  ``+op`` with ``-op`` (:1023 and :1031 in 0.33.0, from 0.27). vLLM reads ``--compilation-config`` through pydantic
  (``TypeAdapter(CompilationConfig).validate_json``, engine/arg_utils.py:328-333 in 0.20.0), which runs
  ``__post_init__`` while the parser reads the flag: the line stops there, the parser's error carrying these words
  (vLLM 0.32's CPU build: ``argument --compilation-config/-cc: 1 validation error for CompilationConfig`` /
  ``Value error, <the words> [type=value_error, ...]``).
- **deprecated CUDA-graph flags** (0.10.1-0.11.0): ``use_cudagraph: false`` or ``full_cuda_graph: true`` with a
  ``cudagraph_mode`` (config/compilation.py:447 and :456 in 0.10.1, :469 and :478 in 0.11.0).
- **the other compilation fields read while the flag is parsed**: a ``mode`` name that is no ``CompilationMode``
  (``validate_mode_before``, config/compilation.py:853-871 in 0.33.0), mode 3 (``VLLM_COMPILE``, given, or the
  deprecated level until 0.18) with a backend other than ``''`` / eager / inductor (:1040-1046 in 0.33.0; from 0.12
  ``-O3`` is ``--optimization-level``, which sets the mode after this check), ``use_inductor_graph_partition`` on
  0.11.0, which pins torch 2.8 (:481-488), encoder CUDA-graph limits and token budgets, decoder replay capture
  sizes (:1048-1079 in 0.33.0), and (every CUDA config, ``post_init_cudagraph_sizes``; ``init_with_cudagraph_sizes``
  before 0.11.1) a ``compile_sizes`` string other than ``cudagraph_capture_sizes`` (:1142-1153 in 0.33.0).
- **the executor backend** as ``ParallelConfig.__post_init__`` resolves a flag left unset (``resolved_backend``),
  read by: ``--ray-workers-use-nsight`` without Ray (``_verify_args``, config.py:1552 in 0.8.0, config/parallel.py:
  1174 in 0.33.0), ``--nnodes > 1`` with a backend other than mp (0.11.1), mp / uni (0.12), mp / uni /
  external_launcher (0.13+, config/parallel.py:1106-1114 in 0.33.0), and ``--async-scheduling`` with a backend
  whose executor does not support it (config/vllm.py:364-368 in 0.11.1: mp, uni, external_launcher; from 0.19
  ``Executor.get_class(self).supports_async_scheduling()``, config/vllm.py:1642-1644 in 0.33.0).
- **dual-batch overlap / microbatching** (``--enable-dbo``, from 0.14 also ``--ubatch-size > 1``): an all2all
  backend other than DeepEP (and NIXL EP from 0.24) (config/vllm.py:480-486 in 0.11.0, reading
  VLLM_ALL2ALL_BACKEND; :681-686 in 0.11.1; :2180-2198 in 0.33.0), and thresholds below the microbatch count
  (config/parallel.py:1180-1187 in 0.33.0, from 0.30).
- **ParallelConfig pairs**: ``--dcp-comm-backend a2a`` without decode context parallel (0.18-0.28),
  ``--numa-bind-nodes`` / ``--numa-bind-cpus`` without ``--numa-bind`` and negative NUMA nodes (0.20+),
  ``--elastic-ep-max-dp-size`` below the DP size (0.30+), elastic EP with external-LB (0.17-0.32) or hybrid-LB
  data parallel.
- **--device-ids** (``EngineArgs._resolve_device_ids``, 0.24+): repeated ids, integers mixed with UUIDs, an index
  past the devices the deployment's CUDA_VISIBLE_DEVICES shows.
- **EngineArgs.create_engine_config**: VLLM_ATTENTION_BACKEND=DUAL_CHUNK_FLASH_ATTN without ``--enforce-eager``
  (0.9.0-0.10.2), ``--data-parallel-hybrid-lb`` with ``--headless`` and a ``--data-parallel-backend`` other than
  mp / ray without ``--data-parallel-address`` (an assertion whose message, a tuple, the ledger does not read:
  vLLM prints ``('data_parallel_backend can only be ray or mp, got %s', 'torchrun')``).
- the hybrid KV cache manager asked for where the release turns it off (chunked local attention with
  VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE off, its default in 0.13; KV events in 0.13-0.19).
- a ``turboquant_*`` ``--kv-cache-dtype`` on a hybrid model (the class's ``IsHybrid``; 0.20.x).
- **HiSparse** (0.30+): with PP > 1, decode context parallel, ``--no-scheduler-reserve-full-isl`` (0.31+), a model
  without ``index_topk``, or VLLM_USE_V2_MODEL_RUNNER=0 (its FULL-cudagraph and hybrid-KV-manager checks read
  values the engine resolves later, and stay open).
- **the model's config**: ``--all2all-backend moonep`` with a quantized model (the checkpoint's method where vLLM
  keeps its name, or ``--quantization``), a dtype other than bfloat16, EPLB or a non-linear expert placement (0.31+);
  on a multimodal model (the release's ``SupportsMultiModal`` facts), ``--language-model-only`` with encoder CUDA
  graphs (0.29+) and ``--mm-tensor-ipc torch_shm`` where VLLM_WORKER_MULTIPROC_METHOD is set to other than spawn
  (0.19+; ``vllm serve`` sets spawn where it is unset); DeepSeek V4.1 Engram with microbatching (0.30+).
- **CUDA-graph capture sizes** (``VllmConfig._set_cudagraph_sizes``, 0.11.1+): an empty list, or a
  max_cudagraph_capture_size other than the largest size kept, where the line leaves CUDA graphs on.
- **compile ranges** (``VllmConfig._set_compile_ranges``, every config): a split point (0.13-0.17) or endpoint
  (0.18+) that is not positive.
- **the compilation level before 0.11.1**: a piecewise cudagraph_mode with a level other than 3 under V1
  (0.10.1-0.11.0), full_cuda_graph with splitting_ops under V1 without ``--enforce-eager`` (0.9.0-0.10.0); and on
  the V0 engine of 0.8.3-0.10.1, prefix caching with the sha256 hash.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.vllm.interfaces import model_class
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Dtype, Judged, Layout

#: rule id -> what it refuses (merged into ``config_checks.RULES``)
RULES: Mapping[str, str] = {
    "vllm.compilation.custom_ops": "--compilation-config custom_ops with both 'all' and 'none', an entry that is "
                                   "not 'all' / 'none' / '+op' / '-op', or '+op' with '-op' (CompilationConfig)",
    "vllm.compilation.deprecated_cudagraph_flags": "--compilation-config use_cudagraph false or full_cuda_graph "
                                                   "true with a cudagraph_mode (0.10.1-0.11.0)",
    "vllm.parallel.nsight_needs_ray": "--ray-workers-use-nsight where the executor backend is not Ray (ParallelConfig)",
    "vllm.parallel.nnodes_executor": "--nnodes > 1 with an executor backend other than mp (0.11.1), mp / uni (0.12) "
                                     "or mp / uni / external_launcher (0.13+) (ParallelConfig)",
    "vllm.scheduler.async_executor": "--async-scheduling with an executor backend that does not support it "
                                     "(VllmConfig, 0.11.1+)",
    "vllm.parallel.dbo_all2all": "--enable-dbo (or --ubatch-size > 1) with an all2all backend other than DeepEP / "
                                 "NIXL EP (VllmConfig, 0.11+)",
    "vllm.parallel.dbo_thresholds": "--dbo-decode-token-threshold / --dbo-prefill-token-threshold below the "
                                    "microbatch count (ParallelConfig, 0.30+)",
    "vllm.parallel.dcp_a2a_needs_dcp": "--dcp-comm-backend a2a at --decode-context-parallel-size 1 (0.18+)",
    "vllm.parallel.numa_bind_options": "--numa-bind-nodes / --numa-bind-cpus without --numa-bind, a negative NUMA "
                                       "node, or a CPU list not in numactl syntax or descending (ParallelConfig, "
                                       "0.20+)",
    "vllm.compilation.mode_name": "--compilation-config mode naming no CompilationMode (0.11.1+)",
    "vllm.compilation.piecewise_backend": "--compilation-config mode 3 (VLLM_COMPILE) with a backend other than "
                                          "eager / inductor (0.11.1+)",
    "vllm.compilation.compile_sizes": "--compilation-config compile_sizes naming a string other than "
                                      "'cudagraph_capture_sizes'",
    "vllm.compilation.inductor_partition_torch": "--compilation-config use_inductor_graph_partition on a release "
                                                 "pinned to torch below 2.9 (0.11.0)",
    "vllm.compilation.cudagraph_size_values": "negative encoder CUDA-graph batch limits, non-positive encoder token "
                                              "budgets or decoder replay capture sizes (0.19+)",
    "vllm.parallel.device_ids": "--device-ids with a repeated ID, integer IDs mixed with UUIDs, or an index past the "
                                "devices CUDA_VISIBLE_DEVICES shows (EngineArgs, 0.24+)",
    "vllm.parallel.elastic_ep_max_dp_size": "--elastic-ep-max-dp-size below --data-parallel-size with elastic EP "
                                            "(ParallelConfig, 0.30+)",
    "vllm.attention.dual_chunk_needs_eager": "VLLM_ATTENTION_BACKEND=DUAL_CHUNK_FLASH_ATTN without --enforce-eager "
                                             "(EngineArgs, 0.9.0-0.10.2)",
    "vllm.parallel.hybrid_lb_headless": "--data-parallel-hybrid-lb with --headless (EngineArgs, 0.10+)",
    "vllm.parallel.dp_backend_choices": "--data-parallel-backend other than mp / ray without --data-parallel-address "
                                        "(EngineArgs, 0.9.1+)",
    "vllm.attention.hisparse_limits": "HiSparse (--attention-config hisparse_config, or a HiSparseConnector) with "
                                      "PP > 1, decode context parallel, --no-scheduler-reserve-full-isl, a model "
                                      "without index_topk, or VLLM_USE_V2_MODEL_RUNNER=0 (VllmConfig, 0.30+)",
    "vllm.parallel.moonep_limits": "--all2all-backend moonep with a quantized or non-bfloat16 model, --enable-eplb, "
                                   "or an expert placement other than linear (VllmConfig, 0.31+)",
    "vllm.multimodal.language_model_only_encoder_graphs": "--language-model-only with --compilation-config "
                                                          "cudagraph_mm_encoder on a multimodal model (0.29+)",
    "vllm.multimodal.torch_shm_needs_spawn": "--mm-tensor-ipc torch_shm on a multimodal model with "
                                             "VLLM_WORKER_MULTIPROC_METHOD set to other than spawn (0.19+)",
    "vllm.parallel.engram_no_dbo": "DeepSeek V4.1 Engram with --enable-dbo / --ubatch-size > 1 (0.30+)",
    "vllm.compilation.capture_sizes_consistency": "CUDA-graph capture sizes given empty, or with a "
                                                  "max_cudagraph_capture_size other than the largest size the "
                                                  "batch keeps (VllmConfig._set_cudagraph_sizes, 0.11.1+)",
    "vllm.compilation.piecewise_needs_level": "a piecewise --compilation-config cudagraph_mode with a compilation "
                                              "level other than 3 (PIECEWISE) under V1 (VllmConfig, 0.10.1-0.11.0)",
    "vllm.compilation.full_cuda_graph_splitting_ops": "--compilation-config full_cuda_graph with splitting_ops "
                                                      "under V1 without --enforce-eager (0.9.0-0.10.0)",
    "vllm.compilation.compile_range_points": "--compilation-config compile_ranges_split_points (0.13-0.17) or "
                                             "compile_ranges_endpoints (0.18+) not all positive",
    "vllm.cache.turboquant_hybrid": "a turboquant_* --kv-cache-dtype on a hybrid (attention + Mamba) model "
                                    "(EngineArgs, 0.20.x)",
    "vllm.scheduler.hybrid_kv_manager_forced": "the hybrid KV cache manager asked for (--no-disable-hybrid-kv-cache-"
                                               "manager; --enable-hybrid-kv-cache-manager in 0.33) where the release "
                                               "turns it off: chunked local attention, KV events (0.13-0.19)",
    "vllm.parallel.elastic_ep_lb": "--enable-elastic-ep with external-LB (0.17-0.32) or hybrid-LB data parallel "
                                   "(ParallelConfig)",
    "vllm.cache.v0_prefix_hash_sha256": "--enable-prefix-caching with --prefix-caching-hash-algo sha256 on the V0 "
                                        "engine (0.8.3-0.10.1: below SM 8.0, or VLLM_USE_V1=0)",
}
FRAMED = frozenset(RULES)

# -- the executor backend ------------------------------------------------------------------------------------

#: ``nnodes`` and the branch that keeps mp across nodes (``elif current_platform.is_cuda() and self.nnodes > 1:
#: backend = "mp"``) arrive in 0.11.1; with them a world larger than the node's GPUs raises instead of falling
#: back to Ray (config/parallel.py:560-570 in 0.11.1; config.py:1497-1504 in 0.8.0 chose Ray)
NNODES_SINCE = Version("0.11.1")
#: the default is resolved when the world across DP is above 1 (config/parallel.py:1054 in 0.33.0, 794 in 0.20.0);
#: before, the world within DP (config/parallel.py:547 in 0.12.0, 0.16.0)
ACROSS_DP_SINCE = Version("0.17.0")
#: ``elif self.data_parallel_backend == "ray": backend = "ray"`` (config.py:2165 in 0.10.0)
DP_BACKEND_RAY_SINCE = Version("0.10.0")
#: ``executor_supports_async_sched = executor_class.supports_async_scheduling()`` (config/vllm.py:729 in 0.19.0);
#: before, ``executor_backend in ("mp", "uni", "external_launcher")``
EXECUTOR_CLASS_ASKED_SINCE = Version("0.19.0")
#: "ray": ``RayDistributedExecutor`` (no async scheduling) in 0.19; from 0.20 ``RayExecutorV2`` (a
#: ``MultiprocExecutor``, which supports it) where VLLM_USE_RAY_V2_EXECUTOR_BACKEND is set (v1/executor/
#: abstract.py:60-66 in 0.20.0), by default from 0.21 (envs.py: ``os.getenv(..., "1")``); 0.33 has only V2
RAY_V2_ENV_SINCE = Version("0.20.0")
RAY_V2_DEFAULT_SINCE = Version("0.21.0")
RAY_V2_ONLY_SINCE = Version("0.33.0")
_ASYNC_BACKENDS = ("mp", "uni", "external_launcher")


def _int(args: ResolvedArgs, dest: str, default: int) -> int:
    value = args.get(dest)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def resolved_backend(args: ResolvedArgs, layout: Layout, version: Version) -> tuple[str | None, bool]:
    """``ParallelConfig.distributed_executor_backend`` after ``__post_init__`` (config/parallel.py:1054-1099 in
    0.33.0), and whether the line gave it. None: not known from the deployment (before 0.11.1 a world larger than
    the node's GPUs, which only the devices an artifact shows say, takes Ray; from 0.11.1 it raises, another rule).

    A ``vllm serve`` process has no Ray placement group (``placement_group`` is set from Python, and Ray is not
    initialised in it before the config), so the default is mp, or Ray under ``--data-parallel-backend ray``."""
    given = args.get("distributed_executor_backend")
    if isinstance(given, str):
        return given, True
    tp, pp, dp = layout.tensor_parallel_size, layout.pipeline_parallel_size, layout.data_parallel_size
    world = tp * pp * _int(args, "prefill_context_parallel_size", 1)
    across = world * dp if version >= ACROSS_DP_SINCE else world
    if across <= 1:
        return "uni", False
    if version >= NNODES_SINCE and _int(args, "nnodes", 1) > 1:
        return "mp", False
    if layout.devices is None:
        if version < NNODES_SINCE:
            return None, False
    elif layout.devices < world:
        return ("ray" if version < NNODES_SINCE else None), False
    if version >= DP_BACKEND_RAY_SINCE and args.get("data_parallel_backend") == "ray":
        return "ray", False
    return "mp", False


def supports_async(backend: str, version: Version, env: Mapping[str, str]) -> bool | None:
    """Whether the release's executor for ``backend`` supports async scheduling (None: a custom executor class,
    or VLLM_USE_RAY_V2_EXECUTOR_BACKEND not an integer)."""
    if version < EXECUTOR_CLASS_ASKED_SINCE or backend in _ASYNC_BACKENDS:
        return backend in _ASYNC_BACKENDS
    if backend != "ray":
        return None
    if version >= RAY_V2_ONLY_SINCE:
        return True
    if version < RAY_V2_ENV_SINCE:
        return False
    raw = env.get("VLLM_USE_RAY_V2_EXECUTOR_BACKEND", "1" if version >= RAY_V2_DEFAULT_SINCE else "0")
    try:
        return bool(int(raw))
    except ValueError:
        return None


# -- dual-batch overlap ----------------------------------------------------------------------------------------

#: 0.11.0 reads VLLM_ALL2ALL_BACKEND (default allgather_reducescatter); 0.11.1-0.13 fill an unset --all2all-backend
#: from it (config/parallel.py:466-468 in 0.11.1); 0.14-0.15 let a set VLLM_ALL2ALL_BACKEND override the flag
#: (config/parallel.py:529-536 in 0.14.0); 0.16 ignores it; from 0.19 pplx / naive fall back to
#: allgather_reducescatter (config/parallel.py:449-455 in 0.24.0); from 0.14 ``use_ubatching`` is
#: ``enable_dbo or ubatch_size > 1`` and ``num_ubatches`` ``2 if enable_dbo else ubatch_size``
A2A_FLAG_SINCE = Version("0.11.1")
A2A_ENV_OVERRIDES = (Version("0.14.0"), Version("0.16.0"))
A2A_REMOVED_FALLBACK_SINCE = Version("0.19.0")
UBATCH_SIZE_SINCE = Version("0.14.0")
#: the backends microbatching supports on CUDA (config/vllm.py:2193-2197 in 0.33.0)
DBO_BACKENDS_CUDA = ("deepep_low_latency", "deepep_high_throughput", "nixl_ep")


def _a2a_backend(args: ResolvedArgs, version: Version, env: Mapping[str, str]) -> str:
    from_env = env.get("VLLM_ALL2ALL_BACKEND")
    if version < A2A_FLAG_SINCE:
        return from_env or "allgather_reducescatter"
    flag = args.get("all2all_backend")
    if from_env and A2A_ENV_OVERRIDES[0] <= version < A2A_ENV_OVERRIDES[1]:
        return from_env
    if not isinstance(flag, str):
        flag = from_env if from_env and version < A2A_ENV_OVERRIDES[0] else None
    backend = flag if isinstance(flag, str) else "allgather_reducescatter"
    if version >= A2A_REMOVED_FALLBACK_SINCE and backend in ("pplx", "naive"):
        backend = "allgather_reducescatter"
    return backend


def _dbo_values(args: ResolvedArgs, version: Version, env: Mapping[str, str]) -> dict[str, object]:
    dbo = bool(args.get("enable_dbo"))
    ubatch = _int(args, "ubatch_size", 0) if version >= UBATCH_SIZE_SINCE else 0
    out: dict[str, object] = {
        "enable_dbo": dbo, "use_ubatching": dbo or ubatch > 1, "num_ubatches": 2 if dbo else ubatch,
        "dbo_decode_token_threshold": _int(args, "dbo_decode_token_threshold", 32),
        "dbo_prefill_token_threshold": _int(args, "dbo_prefill_token_threshold", 512),
        "supported_backends": list(DBO_BACKENDS_CUDA),
        "', '.join(supported_backends)": ", ".join(DBO_BACKENDS_CUDA),
        "', '.join(('--all2all-backend=' + b for b in supported_backends))": ", ".join(
            "--all2all-backend=" + b for b in DBO_BACKENDS_CUDA),
    }
    out["a2a_backend"] = out["self.parallel_config.all2all_backend"] = _a2a_backend(args, version, env)
    return out


# -- EngineArgs.create_engine_config ---------------------------------------------------------------------------

def _json_flag(args: ResolvedArgs, dest: str) -> Mapping[str, object]:
    value = args.get(dest)
    return value if isinstance(value, Mapping) else {}


def _engine_args_values(args: ResolvedArgs) -> dict[str, object]:
    """``create_engine_config``'s reads of the dual-chunk attention backend (engine/arg_utils.py:1009-1020 in
    0.9.0), ``headless`` (``vllm serve --headless`` calls ``create_engine_config(headless=True)``; :1074 in 0.10.0,
    :2380 in 0.33.0) and the DP address (:2539-2550 in 0.33.0)."""
    return {
        "STR_DUAL_CHUNK_FLASH_ATTN_VAL": "DUAL_CHUNK_FLASH_ATTN",
        "self.enforce_eager": bool(args.get("enforce_eager")),
        "headless": bool(args.get("headless")),
        "self.data_parallel_hybrid_lb": bool(args.get("data_parallel_hybrid_lb")),
        "self.data_parallel_address": args.get("data_parallel_address"),
        "self.data_parallel_backend": args.get("data_parallel_backend") or "mp",
    }


# -- HiSparse ------------------------------------------------------------------------------------------------

def _has_connector(kv_transfer: Mapping[str, object], name: str) -> bool:
    """``KVTransferConfig.has_connector`` (config/kv_transfer.py:157-164 in 0.30.0): directly or in MultiConnector."""
    if kv_transfer.get("kv_connector") == name:
        return True
    extra = kv_transfer.get("kv_connector_extra_config")
    children = extra.get("connectors", []) if isinstance(extra, Mapping) else []
    return kv_transfer.get("kv_connector") == "MultiConnector" and isinstance(children, list) and any(
        isinstance(c, Mapping) and c.get("kv_connector") == name for c in children)


def hisparse_values(args: ResolvedArgs, model: ModelSpec, env: Mapping[str, str]) -> dict[str, object]:
    """``VllmConfig.__post_init__``'s HiSparse checks (config/vllm.py:1633-1652 in 0.30.0, 1874-1911 in 0.33.0): on
    with ``--attention-config``'s hisparse_config, or a HiSparseConnector; ``hasattr(hf_config, 'index_topk')`` read
    in the checkpoint's top-level config (``hf_config``, not a nested text config); VLLM_USE_V2_MODEL_RUNNER through
    ``maybe_convert_bool`` (None unset, ``bool(int(value))``)."""
    given = _json_flag(args, "attention_config").get("hisparse_config")
    hisparse = given if given is not None else (
        {} if _has_connector(_json_flag(args, "kv_transfer_config"), "HiSparseConnector") else None)
    top = _raw_config(model)
    out: dict[str, object] = {
        "self.attention_config.hisparse_config": hisparse,
        "self.scheduler_config.scheduler_reserve_full_isl": args.get("scheduler_reserve_full_isl") is not False,
        "self.model_config": True,
    }
    if top:
        out["hasattr(self.model_config.hf_config, 'index_topk')"] = "index_topk" in top
    mrv2 = env.get("VLLM_USE_V2_MODEL_RUNNER")
    try:
        out["envs.VLLM_USE_V2_MODEL_RUNNER"] = None if mrv2 is None else bool(int(mrv2))
    except ValueError:
        pass
    return out


# -- the CUDA-graph capture sizes ------------------------------------------------------------------------------

_GRAPHS_ON = ("self.model_config is not None and (not self.model_config.enforce_eager) and "
              "(self.compilation_config.cudagraph_mode != CUDAGraphMode.NONE)")


def _capture_size_values(args: ResolvedArgs, layout: Layout, compilation: Mapping[str, object],
                         base: Mapping[str, object]) -> dict[str, object]:
    """``VllmConfig._set_cudagraph_sizes`` (config/vllm.py:2447-2625 in 0.33.0, 849-925 in 0.11.1) on the sizes the
    line gives (``--compilation-config``'s, else ``--cudagraph-capture-sizes`` / ``--cuda-graph-sizes`` and
    ``--max-cudagraph-capture-size``, which ``create_engine_config`` copies in): CUDA graphs are on where the line
    leaves the default compilation (no ``--enforce-eager``, no ``-O`` level, mode 3 or unset, a cudagraph_mode other
    than NONE or unset); the sizes the batch keeps are those up to ``max_num_batched_tokens``. With TP > 1 the
    sequence-parallel pass (on by default for dense models at -O2 from 0.2x) rounds them: not resolved."""
    sizes = compilation.get("cudagraph_capture_sizes")
    for dest in ("cudagraph_capture_sizes", "cuda_graph_sizes"):
        if sizes is None and args.is_set(dest):
            sizes = args.get(dest)
    maximum = compilation.get("max_cudagraph_capture_size")
    if maximum is None and args.is_set("max_cudagraph_capture_size"):
        maximum = args.get("max_cudagraph_capture_size")
    out: dict[str, object] = {"self.compilation_config.cudagraph_capture_sizes": sizes,
                              "self.compilation_config.max_cudagraph_capture_size": maximum}
    if sizes is None:
        out[_GRAPHS_ON] = False            # neither check reads anything else: nothing to resolve
        return out
    mode = compilation.get("mode")
    graph_mode = compilation.get("cudagraph_mode")
    if bool(args.get("enforce_eager")):
        out[_GRAPHS_ON] = False
    elif isinstance(graph_mode, str) and graph_mode.upper() == "NONE":
        out[_GRAPHS_ON] = False
    elif not args.is_set("optimization_level") and mode in (None, 3, "VLLM_COMPILE", "vllm_compile") \
            and compilation.get("level") is None:
        out[_GRAPHS_ON] = True
    batched = base.get("max_num_batched_tokens")
    if isinstance(sizes, list) and all(isinstance(v, int) for v in sizes) and isinstance(batched, int) \
            and layout.tensor_parallel_size == 1:
        kept = [v for v in set(sizes) if v <= batched]
        out["valid_max_size"] = max(kept) if kept else 0
    return out


# -- the compilation level of 0.9-0.11.0 -----------------------------------------------------------------------

_PIECEWISE_MODES = ("PIECEWISE", "FULL_AND_PIECEWISE")


def _level_values(args: ResolvedArgs, layout: Layout, version: Version, env: Mapping[str, str],
                  compilation: Mapping[str, object]) -> dict[str, object]:
    """``VllmConfig.__post_init__`` before 0.11.1: under V1 (``defaults.runs_v0``, VLLM_USE_V1) an unset level is
    PIECEWISE, or NO_COMPILATION with ``--enforce-eager``; an unset cudagraph_mode follows the level (the deprecated
    flags set NONE / FULL first); ``--enforce-eager`` sets NONE; the CUDA platform sets NONE for DeepEP
    high-throughput at DP > 1 (config/__init__.py:3540-3570 in 0.10.1, 336-386 in 0.11.0; platforms/cuda.py:186-193
    in 0.10.1); the assertion follows (:3635-3643 in 0.10.1, 463-478 in 0.11.0). 0.9.0-0.10.0 call
    ``set_splitting_ops_for_v1`` under V1 without ``--enforce-eager`` (config.py:4585-4591 in 0.10.0)."""
    from pytest_gpulayout.engines.vllm import defaults

    cc = layout.compute_capability
    v1 = not defaults.runs_v0(version, compute_capability=cc[0] + cc[1] / 10 if cc else None) and env.get(
        "VLLM_USE_V1") != "0"
    eager = bool(args.get("enforce_eager"))
    level = compilation.get("level")
    if level is None:
        level = 3 if v1 and not eager else 0
    mode = compilation.get("cudagraph_mode")
    if mode is None and compilation.get("use_cudagraph") is False:
        mode = "NONE"
    if mode is None and compilation.get("full_cuda_graph"):
        mode = "FULL"
    graph = str(mode).upper() if mode is not None else ("PIECEWISE" if v1 and level == 3 else "NONE")
    if eager or (env.get("VLLM_ALL2ALL_BACKEND") == "deepep_high_throughput" and layout.data_parallel_size > 1):
        graph = "NONE"
    out: dict[str, object] = {
        "envs.VLLM_USE_V1 and current_platform.is_cuda_alike()": v1,
        "self.compilation_config.cudagraph_mode.requires_piecewise_compilation()": graph in _PIECEWISE_MODES,
        "self.compilation_config.cudagraph_mode": f"CUDAGraphMode.{graph}",
        "self.compilation_config.level": level, "CompilationLevel.PIECEWISE": 3,
        "self.splitting_ops": compilation.get("splitting_ops") or [],
    }
    if not v1 or eager:
        out["self.splitting_ops and self.full_cuda_graph"] = False      # set_splitting_ops_for_v1 is not called
    # ``_set_default_args_v0`` runs only for V0 (engine/arg_utils.py:1005-1006, 1441-1454 in 0.9.0); the flag
    # as given (``--enable-prefix-caching`` defaults to None there)
    out["self.enable_prefix_caching"] = bool(args.get("enable_prefix_caching")) and not v1
    out["self.prefix_caching_hash_algo"] = args.get("prefix_caching_hash_algo")
    return out


# -- the model's config: multimodal, moonep, Engram -----------------------------------------------------------

#: the checkpoint methods vLLM keeps as ``model_config.quantization`` when no --quantization is given (awq / gptq
#: become their Marlin kernels on a capable GPU, modelopt names its format: not resolved here)
_KEPT_QUANT_METHODS = frozenset({"fp8", "compressed-tensors", "mxfp4", "bitsandbytes"})
_TORCH_SHM_CONDITION = ("self.model_config is not None and self.model_config.multimodal_config is not None and "
                        "(self.model_config.multimodal_config.mm_tensor_ipc == 'torch_shm') and "
                        "(os.environ.get('VLLM_WORKER_MULTIPROC_METHOD') != 'spawn')")
_LANGUAGE_ONLY_CONDITION = ("self.model_config is not None and self.model_config.multimodal_config is not None and "
                            "self.model_config.multimodal_config.language_model_only and "
                            "self.compilation_config.cudagraph_mm_encoder")
_DTYPES = {"half": "float16", "float16": "float16", "bfloat16": "bfloat16", "float": "float32", "float32": "float32"}


def _raw_config(model: ModelSpec) -> Mapping[str, object]:
    try:
        raw = json.loads(model.config_json) if model.config_json else {}
    except ValueError:
        return {}
    return raw if isinstance(raw, Mapping) else {}


def _arch_flag(model: ModelSpec, version: Version, flag: str) -> bool | None:
    """The registry's interface ``flag`` (``supports_multimodal``, ``is_hybrid``) of the model's class, from the
    release's interface facts; None where no extracted release at or below knows the class."""
    cls = model_class(model, version)
    return None if cls is None else cls.flag(flag)


def _multimodal(model: ModelSpec, version: Version) -> bool | None:
    """Whether ``ModelConfig`` builds a ``multimodal_config``: a vision tower in the checkpoint, or the class's
    ``SupportsMultiModal``."""
    return True if model.is_multimodal else _arch_flag(model, version, "supports_multimodal")


def _model_values(args: ResolvedArgs, model: ModelSpec, version: Version, env: Mapping[str, str],
                  compilation: Mapping[str, object]) -> dict[str, object]:
    """The model config's values the moonep (config/vllm.py:2064-2098 in 0.31.0), multimodal (:1743-1752 and the
    language-model-only check in 0.33.0) and Engram (:1233-1240 in 0.30.0) checks read."""
    out: dict[str, object] = {"self.model_config": True, "model_config": True,
                              "model_config.architecture": model.architectures[0] if model.architectures else "",
                              "self.parallel_config.expert_placement_strategy": args.get(
                                  "expert_placement_strategy") or "linear",
                              "self.compilation_config.cudagraph_mm_encoder": bool(
                                  compilation.get("cudagraph_mm_encoder", False))}
    given = args.get("quantization")
    if isinstance(given, str):
        out["self.model_config.quantization"] = given
    elif model.quantization is None:
        out["self.model_config.quantization"] = None
    elif model.quantization.method in _KEPT_QUANT_METHODS:
        out["self.model_config.quantization"] = model.quantization.method
    asked = str(args.get("dtype") or "auto").lower()
    dtype = _DTYPES.get(asked) or ("bfloat16" if asked == "auto" and model.dtype == "bfloat16" else None)
    if dtype is not None:
        out["self.model_config.dtype"] = Dtype(dtype)
        out["self.model_config is not None and self.model_config.dtype != torch.bfloat16"] = dtype != "bfloat16"
    # ``vllm serve`` sets VLLM_WORKER_MULTIPROC_METHOD=spawn where the environment leaves it unset
    # (``cli_env_setup``, entrypoints/utils.py:153-171 in 0.19.0, entrypoints/common/startup.py:131-149 in 0.33.0)
    method = env.get("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    out["os.environ.get('VLLM_WORKER_MULTIPROC_METHOD')"] = method
    multimodal = _multimodal(model, version)
    if multimodal is not None:
        out["self.model_config.multimodal_config"] = {} if multimodal else None
        out["self.model_config.multimodal_config.language_model_only"] = bool(args.get("language_model_only"))
        out["self.model_config.multimodal_config.mm_tensor_ipc"] = args.get("mm_tensor_ipc")
    else:
        # an architecture the facts do not know: the checks hold only with their flags, said where they are given
        if not (args.get("mm_tensor_ipc") == "torch_shm" and method != "spawn"):
            out[_TORCH_SHM_CONDITION] = False
        if not (args.get("language_model_only") and compilation.get("cudagraph_mm_encoder")):
            out[_LANGUAGE_ONLY_CONDITION] = False
    # ``resolve_kv_cache_dtype_string`` keeps an explicit --kv-cache-dtype (engine/arg_utils.py:1642-1645 in 0.20.0)
    out["resolved_cache_dtype"] = str(args.get("kv_cache_dtype") or "auto")
    hybrid = _arch_flag(model, version, "is_hybrid")
    if hybrid is not None:
        out["model_config.is_hybrid"] = hybrid
    raw = _raw_config(model)
    nested = raw.get("text_config")
    text = nested if isinstance(nested, Mapping) else raw
    out["getattr(model_config.hf_text_config, 'engram_layer_ids', None)"] = bool(text.get("engram_layer_ids"))
    return out


# -- the hybrid KV cache manager -------------------------------------------------------------------------------

#: ``if self.kv_events_config is not None: need_disable_hybrid_kv_cache_manager = True`` (config/vllm.py in
#: 0.13.0-0.19.x; gone in 0.20.0)
KV_EVENTS_DISABLE_HMA_UNTIL = Version("0.20.0")
#: VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to "0" in 0.13 and "1" from 0.14 (envs.py)
CHUNKED_LOCAL_HMA_ALLOWED_SINCE = Version("0.14.0")


def _hybrid_manager_values(args: ResolvedArgs, model: ModelSpec, version: Version,
                           env: Mapping[str, str]) -> dict[str, object]:
    """``need_disable_hybrid_kv_cache_manager`` as ``VllmConfig.__post_init__`` computes it before it reads an
    explicit ``disable_hybrid_kv_cache_manager=False`` (config/vllm.py:1259-1310 in 0.20.0): CUDA supports the
    hybrid manager; KV events (0.13-0.19); chunked local attention (``attention_chunk_size``) with an EAGLE drafter,
    or with VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE off (its default in 0.13). The KV-transfer default
    applies only where the flag is unset. With a drafter and the variable on, whether the drafter is EAGLE is not
    resolved here."""
    out: dict[str, object] = {"self.scheduler_config.disable_hybrid_kv_cache_manager": args.get(
        "disable_hybrid_kv_cache_manager")}
    need = version < KV_EVENTS_DISABLE_HMA_UNTIL and args.get("kv_events_config") is not None
    if model.attention_chunk_size is not None:
        raw = env.get("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE",
                      "1" if version >= CHUNKED_LOCAL_HMA_ALLOWED_SINCE else "0")
        try:
            allowed = bool(int(raw))
        except ValueError:
            return out
        if not allowed:
            need = True
        elif args.get("speculative_config") is not None:
            return out
    out["need_disable_hybrid_kv_cache_manager"] = need
    return out


# -- the frames ----------------------------------------------------------------------------------------------

def _parallel_values(args: ResolvedArgs, layout: Layout, version: Version, env: Mapping[str, str]) -> dict[str, object]:
    backend, given = resolved_backend(args, layout, version)
    out: dict[str, object] = {
        "self.ray_workers_use_nsight": bool(args.get("ray_workers_use_nsight")),
        "self.nnodes": _int(args, "nnodes", 1),
        "allowed_backends": _ASYNC_BACKENDS,
        "self.dcp_comm_backend": args.get("dcp_comm_backend"),
        "self.numa_bind": bool(args.get("numa_bind")),
        "self.numa_bind_nodes": args.get("numa_bind_nodes"), "self.numa_bind_cpus": args.get("numa_bind_cpus"),
    }
    # ``self.elastic_ep_max_dp_size = max_dp_size if self.enable_elastic_ep and max_dp_size is not None else
    # self.data_parallel_size`` (config/parallel.py:948-953 in 0.30.0)
    max_dp = args.get("elastic_ep_max_dp_size")
    out["self.elastic_ep_max_dp_size"] = max_dp if bool(args.get("enable_elastic_ep")) and isinstance(
        max_dp, int) else layout.data_parallel_size
    out["for cpuset in value"] = out["for part in cpuset.split(',')"] = False
    # ``_validate_numa_bind_nodes`` returns an unset value before its checks (config/parallel.py:374-381 in 0.20.0)
    nodes = args.get("numa_bind_nodes")
    if nodes is None:
        out["any((node < 0 for node in value))"] = False
    elif isinstance(nodes, list) and all(isinstance(n, int) for n in nodes):
        out["any((node < 0 for node in value))"] = any(n < 0 for n in nodes)
    if backend is not None:
        out["self.distributed_executor_backend"] = out["executor_backend"] = backend
        # ``use_ray`` read by ``_verify_args``, a model validator: where ``__post_init__`` turned an unset flag
        # into Ray the order of the two decides, so only a given backend or a resolved non-Ray one is judged
        if given or backend != "ray":
            out["self.use_ray"] = backend == "ray"
        sync = supports_async(backend, version, env)
        if sync is not None:
            out["executor_supports_async_sched"] = sync
    return out


def _custom_ops_frames(compilation: Mapping[str, object]) -> list[dict[str, object]]:
    """The frames of ``CompilationConfig.__post_init__``'s custom-op checks: the whole list, then one per entry
    (the loop ``for op in self.custom_ops``)."""
    ops = compilation.get("custom_ops")
    if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
        return []
    enabled = {o[1:] for o in ops if o.startswith("+")}
    disabled = {o[1:] for o in ops if o.startswith("-")}
    conflicting = sorted(enabled & disabled)
    whole: dict[str, object] = {
        "count_none": ops.count("none"), "count_all": ops.count("all"),
        "base_modes": [o for o in ops if o in {"all", "none"}],
        "conflicting_ops": conflicting, "', '.join(conflicting_ops)": ", ".join(conflicting),
        "for op in self.custom_ops": False,
    }
    frames = [whole]
    for op in ops:
        frame: dict[str, object] = {**whole, "for op in self.custom_ops": True, "op": op}
        if op:
            frame["op[0]"] = op[0]
        frames.append(frame)
    return frames


def _ints(value: object) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def _compilation_values(compilation: Mapping[str, object], version: Version) -> dict[str, object]:
    """``CompilationConfig.__post_init__``'s fields as the line gives them, its defaults elsewhere: the mode (an
    integer, a ``CompilationMode`` name as ``validate_mode_before`` converts it, or the deprecated level), the
    backend, the deprecated CUDA-graph flags, the encoder / decoder-replay CUDA-graph sizes."""
    mode = compilation.get("mode")
    if mode is None and version < LEVEL_AS_MODE_UNTIL:
        mode = compilation.get("level")
    out: dict[str, object] = {
        "self.use_cudagraph": compilation.get("use_cudagraph", True),
        "self.full_cuda_graph": compilation.get("full_cuda_graph", False),
        "self.cudagraph_mode": compilation.get("cudagraph_mode"),
        "CompilationMode.VLLM_COMPILE": COMPILATION_MODES.index("VLLM_COMPILE"),
        "CompilationMode.__members__": COMPILATION_MODES,
        "', '.join(CompilationMode.__members__.keys())": ", ".join(COMPILATION_MODES),
        "self.backend": compilation.get("backend", ""),
        "self.use_inductor_graph_partition": bool(compilation.get("use_inductor_graph_partition", False)),
        "is_torch_equal_or_newer('2.9.0.dev')": version >= TORCH_2_9_SINCE,
        "self.cudagraph_mm_encoder": bool(compilation.get("cudagraph_mm_encoder", False)),
        "self.encoder_cudagraph_max_images_per_batch": compilation.get("encoder_cudagraph_max_images_per_batch", 0),
        "self.encoder_cudagraph_max_vision_items_per_batch": compilation.get(
            "encoder_cudagraph_max_vision_items_per_batch", 0),
        "self.encoder_cudagraph_max_frames_per_batch": compilation.get("encoder_cudagraph_max_frames_per_batch"),
    }
    if isinstance(mode, str):
        # validate_mode_before (config/compilation.py:853-871 in 0.33.0)
        out.update({"value": mode, "isinstance(value, str)": True, "mode_name": mode.upper()})
        if mode.upper() in COMPILATION_MODES:
            out["self.mode"] = COMPILATION_MODES.index(mode.upper())
    else:
        out["isinstance(value, str)"] = False
        if isinstance(mode, int) or mode is None:
            out["self.mode"] = mode
    budgets = _ints(compilation.get("encoder_cudagraph_token_budgets", []))
    if budgets is not None:
        out["self.encoder_cudagraph_token_budgets"] = budgets
        out["any((b <= 0 for b in self.encoder_cudagraph_token_budgets))"] = any(b <= 0 for b in budgets)
    replay = _ints(compilation.get("decoder_replay_cudagraph_capture_sizes", []))
    if replay is not None:
        out["any((s <= 0 for s in self.decoder_replay_cudagraph_capture_sizes))"] = any(s <= 0 for s in replay)
    return out


def _compile_sizes_frames(compilation: Mapping[str, object]) -> list[dict[str, object]]:
    """``post_init_cudagraph_sizes`` (``init_with_cudagraph_sizes`` before 0.11.1), which every CUDA config runs
    (config/vllm.py:2013, 2656 in 0.33.0; config.py:3494, 3598 in 0.8.0): one frame per entry of compile_sizes."""
    sizes = compilation.get("compile_sizes")
    base: dict[str, object] = {"self.compile_sizes": sizes, "for x in self.compile_sizes": False}
    if not isinstance(sizes, list):
        return [base]
    return [base] + [{**base, "for x in self.compile_sizes": True, "x": x, "isinstance(x, str)": isinstance(x, str)}
                     for x in sizes if isinstance(x, (str, int))]


_CUSTOM_OPS = "vllm.compilation.custom_ops"
_COMPILE_SIZES = "vllm.compilation.compile_sizes"
_DEVICE_IDS = "vllm.parallel.device_ids"
_RANGE_POINTS = "vllm.compilation.compile_range_points"
_ELASTIC_LB = "vllm.parallel.elastic_ep_lb"
_LOOPED = frozenset({_CUSTOM_OPS, _COMPILE_SIZES, _DEVICE_IDS, _RANGE_POINTS, _ELASTIC_LB})
#: ``CompilationMode`` (config/compilation.py:36-43 in 0.11.1, 41-48 in 0.33.0)
COMPILATION_MODES = ("NONE", "STOCK_TORCH_COMPILE", "DYNAMO_TRACE_ONCE", "VLLM_COMPILE")
#: the deprecated ``level`` stands for ``mode`` when ``mode`` is unset (``if self.mode is None: self.mode =
#: self.level``, config/compilation.py:787-788 in 0.12.0) until 0.18 drops it
LEVEL_AS_MODE_UNTIL = Version("0.18.0")
#: ``is_torch_equal_or_newer("2.9.0.dev")``: the torch the release pins (``Requires-Dist: torch==2.8.0`` in 0.11.0's
#: METADATA, ``torch==2.9.0`` in 0.11.1's; later releases pin newer ones)
TORCH_2_9_SINCE = Version("0.11.1")


def compilation_config(args: ResolvedArgs) -> Mapping[str, object]:
    """``--compilation-config`` / ``-O`` as a mapping: the parsed JSON, or (0.8.x, whose table keeps the text)
    what ``CompilationConfig.from_cli`` reads, ``ast.literal_eval`` of a value other than a level (config.py:
    3137-3143 in 0.8.0); {} for a level or a value it cannot read."""
    value = args.get("compilation_config")
    if isinstance(value, str) and value.strip() not in ("0", "1", "2", "3"):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return {}
    return value if isinstance(value, Mapping) else {}


def _device_ids_frames(args: ResolvedArgs, env: Mapping[str, str]) -> list[dict[str, object]]:
    """``EngineArgs._resolve_device_ids`` (engine/arg_utils.py:2141-2180 in 0.33.0): nothing without ids; a
    repeated id; all UUIDs return before the mix check; integer ids index CUDA_VISIBLE_DEVICES where it is set
    (one frame per id, the loop ``for i in int_ids``)."""
    ids = args.get("device_ids")
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    base: dict[str, object] = {
        "len(set(ids)) != len(ids)": False, "any((isinstance(i, str) for i in ids))": False,
        "for i in int_ids": False, "cvd": cvd, "cvd_ids": cvd.split(",") if cvd else [],
        "current_platform.device_control_env_var": "CUDA_VISIBLE_DEVICES", "ids": ids,
    }
    if not isinstance(ids, list) or not ids:
        return [base]
    strs = [isinstance(i, str) for i in ids]
    base["len(set(ids)) != len(ids)"] = len(set(ids)) != len(ids)
    base["any((isinstance(i, str) for i in ids))"] = any(strs) and not all(strs)
    if any(strs):
        return [base]
    return [base] + [{**base, "for i in int_ids": True, "i": i} for i in ids]


def _range_point_frames(compilation: Mapping[str, object]) -> list[dict[str, object]]:
    """``VllmConfig._set_compile_ranges``, which every config runs (config/vllm.py:751 in 0.13.0, 993 in 0.18.0,
    2104 in 0.33.0): one frame per split point (0.13-0.17) / endpoint (0.18+), both typed ``list[int]``."""
    base: dict[str, object] = {}
    lists: dict[str, list[int]] = {}
    for key in ("compile_ranges_split_points", "compile_ranges_endpoints"):
        points = compilation.get(key)
        name = f"compilation_config.{key}"
        base[name] = points if isinstance(points, list) else None
        base[f"for x in {name}"] = False
        if isinstance(points, list):
            lists[name] = [x for x in points if isinstance(x, int)]
    return [base] + [{**base, f"for x in {name}": True, "x": x} for name, xs in lists.items() for x in xs]


#: ``if self.data_parallel_start_rank is not None and not headless`` infers hybrid LB from 0.28 (engine/arg_utils.py:
#: 2156 in 0.28.0); before, a truthy start rank (``if self.data_parallel_start_rank and not headless``, :2117 in 0.27.0)
START_RANK_IS_NOT_NONE_SINCE = Version("0.28.0")


def _elastic_lb_frames(args: ResolvedArgs, layout: Layout, version: Version) -> list[dict[str, object]]:
    """``ParallelConfig``'s ``data_parallel_external_lb`` / ``data_parallel_hybrid_lb`` as ``create_engine_config``
    hands them (engine/arg_utils.py:1596-1632 in 0.17.0, 2480-2505 in 0.33.0): external LB clears hybrid; with a
    local size, a start rank infers hybrid (not headless), one local rank turns hybrid into external, all ranks local
    clear it. The data-parallel launch values are ``config_checks.data_parallel_launch``'s."""
    from pytest_gpulayout.engines.vllm.config_checks import data_parallel_launch

    launch = data_parallel_launch(args, layout, version)
    external, hybrid = launch.external_lb, bool(args.get("data_parallel_hybrid_lb"))
    if external:
        hybrid = False
    elif launch.size_local is not None:
        start = args.get("data_parallel_start_rank")
        inferred = start is not None if version >= START_RANK_IS_NOT_NONE_SINCE else bool(start)
        if inferred and not args.get("headless"):
            hybrid = True
        if hybrid and launch.size_local == 1:
            external, hybrid = True, False
        if launch.size_local == layout.data_parallel_size:
            hybrid = False
    return [{"self.enable_elastic_ep": bool(args.get("enable_elastic_ep")), "self.data_parallel_external_lb": external,
             "self.data_parallel_hybrid_lb": hybrid}]


#: ``_NUMACTL_CPUSET_PATTERN`` (config/parallel.py:35 in 0.33.0)
NUMACTL_CPUSET = re.compile(r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")
_NUMA = "vllm.parallel.numa_bind_options"


def _numa_cpus_frames(args: ResolvedArgs) -> list[dict[str, object]]:
    """``ParallelConfig._validate_numa_bind_cpus`` (config/parallel.py:497-519 in 0.33.0), a field validator that
    returns an unset value first: one frame per entry (``for cpuset in value``) and per range in it (``for part in
    cpuset.split(',')``, the parts without ``-`` skipped); the rest of the rule is judged in the main frame."""
    cpus = args.get("numa_bind_cpus")
    if not isinstance(cpus, list) or not all(isinstance(c, str) for c in cpus):
        return []
    frames: list[dict[str, object]] = []
    for cpuset in cpus:
        entry: dict[str, object] = {"for cpuset in value": True, "cpuset": cpuset, "value": cpus,
                                    "_NUMACTL_CPUSET_PATTERN.fullmatch(cpuset)": bool(NUMACTL_CPUSET.fullmatch(cpuset))}
        frames.append(entry)
        if not cpuset or not NUMACTL_CPUSET.fullmatch(cpuset):
            continue
        for part in cpuset.split(","):
            if "-" in part:
                start, end = part.split("-", 1)
                frames.append({**entry, "for part in cpuset.split(',')": True, "start_str": start, "end_str": end})
    return frames


def judge(ask: Ask) -> Judged:
    """The rules of this module in force, each in its frame over the shared namespace."""
    book, version, base, args, model, layout, env = (ask.book, ask.version, ask.values, ask.args, ask.model,
                                                      ask.layout, ask.env)
    rules = ask.among(FRAMED)
    compilation = compilation_config(args)
    frame = {**base, **_parallel_values(args, layout, version, env), **_dbo_values(args, version, env),
             **_compilation_values(compilation, version), **_engine_args_values(args),
             "envs.VLLM_ATTENTION_BACKEND": env.get("VLLM_ATTENTION_BACKEND"),
             **hisparse_values(args, model, env), **_model_values(args, model, version, env, compilation),
             **_capture_size_values(args, layout, compilation, base),
             **_level_values(args, layout, version, env, compilation),
             **_hybrid_manager_values(args, model, version, env)}
    plain = book.judge(version, frame, rules=[r for r in rules if r in FRAMED and r not in _LOOPED])
    refusals, not_judged = list(plain.refusals), list(plain.not_judged)
    seen: set[tuple[str, str]] = {(r.entry, r.message) for r in refusals}
    for rule, frames, over in ((_CUSTOM_OPS, _custom_ops_frames(compilation), base),
                               (_COMPILE_SIZES, _compile_sizes_frames(compilation), base),
                               (_DEVICE_IDS, _device_ids_frames(args, env), base),
                               (_RANGE_POINTS, _range_point_frames(compilation), base),
                               (_ELASTIC_LB, _elastic_lb_frames(args, layout, version), frame),
                               (_NUMA, _numa_cpus_frames(args), frame)):
        if rule not in rules:
            continue
        for looped in frames:
            judged = book.judge(version, {**over, **looped}, rules=[rule])
            for r in judged.refusals:
                if (r.entry, r.message) not in seen:
                    seen.add((r.entry, r.message))
                    refusals.append(r)
            not_judged += [n for n in judged.not_judged if n not in not_judged]
    return Judged(tuple(refusals), tuple(not_judged))
