"""vLLM's defaults and behaviours by release, each read in the wheels (cited below): the numbers
the engine object, its budget and its launch ask for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from packaging.version import Version

from pytest_gpulayout.knobs import KnobFlag, Serving
from pytest_gpulayout.machine.facts import GIB_MIB

if TYPE_CHECKING:
    pass




#: The free-memory startup check (``Free memory on device ... on startup is less than desired GPU
#: memory utilization``) exists from 0.9.1 (``v1/worker/gpu_worker.py``); 0.9.0 still used the older
#: budget that subtracts other processes' memory instead.
FREE_MEMORY_CHECK_SINCE = Version("0.9.1")
#: V0's ``memory_profiling`` measures against a snapshot taken when the worker starts (0.6.5
#: ``worker/worker.py``: ``baseline_memory_in_bytes=total_gpu_memory - self.init_gpu_memory``; 0.7.2:
#: ``self.baseline_snapshot = MemorySnapshot()`` in ``init_device``), so neither other processes'
#: memory nor the worker's own CUDA context comes out of the budget. 0.6.4.post1 still subtracts
#: ``(total - free) - torch allocated`` after the profile run.
BASELINE_PROFILE_SINCE = Version("0.6.5")
#: V1 becomes the default engine; its worker goes back to ``total - free`` (0.8.5 / 0.9.0
#: ``v1/worker/gpu_worker.py determine_available_memory``: ``non_torch_allocations =
#: total_allocated_bytes - torch_allocated_bytes``) until 0.9.1 adds the free-memory check.
V1_DEFAULT_SINCE = Version("0.8")
#: From 0.11 the worker takes its memory snapshot after ``init_worker_distributed_environment``
#: (0.11.0 ``v1/worker/gpu_worker.py init_device``: "Now take memory snapshot after NCCL is
#: initialized"); 0.6.x-0.10.2 take it (or ``init_gpu_memory``) before.
SNAPSHOT_AFTER_NCCL_SINCE = Version("0.11")


#: vLLM 0.8.0-0.10.1 run V1 only on compute capability 8.0 or newer: below it the engine falls back to
#: V0 (0.8.5 and 0.10.1 ``engine/arg_utils.py _is_v1_supported_oracle``: ``_raise_or_fallback(
#: feature_name="Compute Capability < 8.0")``, logged "Compute Capability < 8.0 is not supported by
#: the V1 Engine. Falling back to V0"; with ``VLLM_USE_V1=1`` it raises instead). 0.10.2 dropped the
#: check (read in its ``engine/arg_utils.py``) and 0.11 removed V0.
V0_FALLBACK_BELOW_SM80_UNTIL = Version("0.10.2")


def runs_v0(version: Version, *, compute_capability: float | None = None) -> bool:
    """Whether the release serves with its V0 engine on a GPU of ``compute_capability``: every
    release before 0.8, and 0.8.0-0.10.1 below 8.0 (``V0_FALLBACK_BELOW_SM80_UNTIL``). An unknown
    capability keeps the release's default engine."""
    if version < V1_DEFAULT_SINCE:
        return True
    return version < V0_FALLBACK_BELOW_SM80_UNTIL and compute_capability is not None and compute_capability < 8.0


def counts_other_tenants(version: Version, *, v0: bool | None = None) -> bool:
    """Whether the release's profile run subtracts what other processes hold on the GPU from the
    KV budget (``BASELINE_PROFILE_SINCE``, ``V1_DEFAULT_SINCE``, ``FREE_MEMORY_CHECK_SINCE``):
    before 0.6.5 and in 0.8-0.9.0 it does (``total - free`` includes them, and the worker's own CUDA
    context); 0.6.5-0.7.x and 0.9.1+ measure from a baseline and do not. ``v0``: the engine runs V0
    (``runs_v0``; default: the release's default engine). V0 in 0.8-0.10.1 (the fallback below
    SM 8.0) measures from the worker's baseline snapshot (0.10.1 ``worker/worker.py``:
    ``memory_profiling(self.baseline_snapshot, ...)``), so it does not count them."""
    if v0 is None:
        v0 = version < V1_DEFAULT_SINCE
    if v0:
        return version < BASELINE_PROFILE_SINCE
    return version < FREE_MEMORY_CHECK_SINCE


def counts_communicators_in_budget(version: Version) -> bool:
    """Whether the NCCL and custom all-reduce buffers set up at start-up come out of the KV budget
    (``SNAPSHOT_AFTER_NCCL_SINCE``): before 0.11 they are part of what the profile sees as used
    since the snapshot. From 0.11 they are not, but the free memory the start-up check compares
    with ``gpu_memory_utilization x total`` is measured after them."""
    return version < SNAPSHOT_AFTER_NCCL_SINCE


#: V1's profile run warms the sampler up with ``max_num_seqs`` dummy requests at ``top_k = vocab - 1``
#: and ``top_p = 0.9`` (0.10.1 ``v1/worker/gpu_model_runner._dummy_sampler_run``), so its peak depends on
#: which top-k/top-p sampler the release picks on CUDA (``v1/sample/ops/topk_topp_sampler.py``):
#: 0.8.5-0.11 FlashInfer when it is installed (``is_flashinfer_available``) unless
#: ``VLLM_USE_FLASHINFER_SAMPLER=0``, and it is no dependency of the wheel (an extra from 0.10.1);
#: 0.12-0.20 FlashInfer only with ``VLLM_USE_FLASHINFER_SAMPLER=1`` (a dependency from 0.12);
#: from 0.21 FlashInfer by default (``envs.py``: ``else True``). The PyTorch path sorts every logit
#: (``apply_top_k_top_p``: ``logits.sort(dim=-1)``) until 0.17, which sends 8 rows or more to a
#: Triton kernel (``apply_top_k_top_p_triton``) that needs no sort.
FLASHINFER_SAMPLER_OPT_IN_SINCE = Version("0.12")
TRITON_TOP_K_TOP_P_SINCE = Version("0.17")
FLASHINFER_SAMPLER_DEFAULT_SINCE = Version("0.21")
FLASHINFER_SAMPLER_ENV = "VLLM_USE_FLASHINFER_SAMPLER"
#: The Triton top-k/top-p kernel takes batches of at least this many rows (0.17.0 / 0.19.1
#: ``v1/sample/ops/topk_topp_sampler.apply_top_k_top_p``: ``if HAS_TRITON and logits.shape[0] >= 8``);
#: smaller ones still sort (``apply_top_k_top_p_pytorch``).
TRITON_TOP_K_TOP_P_MIN_ROWS = 8


def _env_flag(env: Mapping[str, str], name: str) -> bool | None:
    """``bool(int(value))`` as ``vllm/envs.py`` reads it; ``None`` when unset or not an integer."""
    raw = env.get(name)
    if raw is None or not raw.strip().lstrip("-").isdigit():
        return None
    return bool(int(raw))


def warmup_sorts_logits(version: Version, *, env: Mapping[str, str], flashinfer_installed: bool,
                        v0: bool | None = None) -> bool:
    """Whether the release's sampler warm-up sorts ``max_num_seqs x vocab`` logits (the PyTorch
    top-k/top-p path), by the rules above; V0 (< 0.8, or ``v0``: ``runs_v0``) always does, on its
    sampling rank. Where FlashInfer or the Triton kernel samples, only the fp32 logits and
    probabilities are held."""
    if version < V1_DEFAULT_SINCE or v0:
        return True
    flag = _env_flag(env, FLASHINFER_SAMPLER_ENV)
    if version < FLASHINFER_SAMPLER_OPT_IN_SINCE:
        return not (flashinfer_installed and flag is not False)
    if version < TRITON_TOP_K_TOP_P_SINCE:
        return flag is not True
    return False


def warmup_uses_triton_top_k_top_p(version: Version, *, env: Mapping[str, str], v0: bool | None = None) -> bool:
    """Whether the release's sampler warm-up takes the Triton top-k/top-p kernel (``TRITON_TOP_K_TOP_P_SINCE``)
    rather than FlashInfer: V1 from 0.17 on CUDA where FlashInfer does not sample, i.e. unless
    ``VLLM_USE_FLASHINFER_SAMPLER=1`` before 0.21, and only with ``=0`` from 0.21 (FlashInfer by default:
    ``FLASHINFER_SAMPLER_DEFAULT_SINCE``). 0.19.1 ``TopKTopPSampler.__init__``: ``forward_cuda`` (FlashInfer)
    only ``if envs.VLLM_USE_FLASHINFER_SAMPLER``, else ``forward_native``, whose ``apply_top_k_top_p``
    sends ``TRITON_TOP_K_TOP_P_MIN_ROWS`` rows or more to ``apply_top_k_top_p_triton``."""
    if version < V1_DEFAULT_SINCE or v0 or version < TRITON_TOP_K_TOP_P_SINCE:
        return False
    flag = _env_flag(env, FLASHINFER_SAMPLER_ENV)
    if version < FLASHINFER_SAMPLER_DEFAULT_SINCE:
        return flag is not True
    return flag is False


#: the official images (``docker/Dockerfile``, stage ``vllm-base``: FlashInfer is installed where
#: ``TARGETPLATFORM`` is not ``linux/arm64``; read at the 0.9-era commit 0000977e, and the images of the other
#: releases of this span assumed alike); the wheel itself only offers it as an extra (0.10.2 METADATA:
#: ``Requires-Dist: flashinfer-python==0.3.0; extra == "flashinfer"``), so a pip-installed engine has it only
#: where someone installed it
OFFICIAL_IMAGES = ("vllm/vllm-openai", "docker.io/vllm/vllm-openai")
#: a deployment that says nothing of where the engine runs
UNKNOWN = Serving()


def _official(image: str) -> bool:
    name = image.split("@", 1)[0].rsplit(":", 1)[0] if "/" in image else image
    return name in OFFICIAL_IMAGES


def flashinfer_in_engine_image(version: Version, *, env: Mapping[str, str], host_env: Mapping[str, str],
                               host_flashinfer: str | None, serving: Serving = UNKNOWN) -> tuple[bool, str]:
    """Whether FlashInfer is in the *engine's* environment (what ``warmup_sorts_logits`` needs in 0.8-0.11,
    where its presence picks the sampler), and where that was read, in words ("" outside those releases).

    In order: ``launch.env``'s ``VLLM_USE_FLASHINFER_SAMPLER`` (``env``: the launch's variables over the
    host's; a value the host's own ``host_env`` does not explain came from ``launch.env``): ``1`` says
    FlashInfer is there and samples, ``0`` that PyTorch sorts; the deployment's image (an official
    ``vllm/vllm-openai`` image ships FlashInfer: ``OFFICIAL_IMAGES``); this Python environment's
    ``flashinfer-python`` only where the engine launched is this environment's (``serving.engine_here``).
    Otherwise the engine's environment is unknown, and PyTorch's sort is assumed: the larger reserve, so the
    pool predicted is never one the engine does not have. The machine the check runs on decides nothing.
    """
    installed = host_flashinfer is not None
    if not V1_DEFAULT_SINCE <= version < FLASHINFER_SAMPLER_OPT_IN_SINCE:
        return installed if serving.engine_here else False, ""
    raw = env.get(FLASHINFER_SAMPLER_ENV)
    flag = _env_flag(env, FLASHINFER_SAMPLER_ENV)
    if flag is not None and raw != host_env.get(FLASHINFER_SAMPLER_ENV):
        said = "FlashInfer installed there and sampling" if flag else "PyTorch sorting the logits"
        return flag, (f"Sampler warm-up: launch.env {FLASHINFER_SAMPLER_ENV}={raw} taken as the engine "
                      f"image's statement ({said}).")
    if serving.image and _official(serving.image):
        return True, (f"Sampler warm-up: FlashInfer samples, as in the {serving.image} image (vLLM's official "
                      f"images install it on x86_64; an arm64 one does not: state it with launch.env "
                      f"{FLASHINFER_SAMPLER_ENV}=0).")
    if serving.engine_here:
        seen = f"flashinfer-python {host_flashinfer} is" if installed else "flashinfer-python is not"
        return installed, (f"Sampler warm-up: {seen} installed in this environment, whose vLLM {version} the "
                           f"launch runs.")
    where = f"the image {serving.image} is not vLLM's official one" if serving.image else \
        "the deployment names no image"
    return False, (f"Sampler warm-up: {where}, so whether FlashInfer samples there is not known: PyTorch's sort "
                   f"of the logits is assumed (the larger reserve; vLLM {version} samples with FlashInfer when "
                   f"it is installed). State it with launch.env {FLASHINFER_SAMPLER_ENV}: 1 FlashInfer samples, "
                   f"0 PyTorch sorts.")


def oversubscribes_silently(version: Version) -> bool:
    """0.6.5-0.7.x: the budget ignores other tenants and nothing checks free memory, so with other
    processes on the GPU the engine sizes a pool that is not there and runs out of memory while
    allocating it (``CacheEngine._allocate_kv_cache``) or capturing CUDA graphs after it."""
    return BASELINE_PROFILE_SINCE <= version < V1_DEFAULT_SINCE


def samples_on_driver_only(version: Version, *, v0: bool | None = None) -> bool:
    """V0 (the default before 0.8; ``v0``: ``runs_v0``) gathers the logits to TP rank 0 (0.7.2
    ``layers/logits_processor.py``: ``tensor_model_parallel_gather`` unless TPU, V1 or an external
    launcher) and only the driver worker of the last pipeline stage samples (0.7.2
    ``worker/model_runner.py execute_model``: ``if not self.is_driver_worker: return []``)."""
    return version < V1_DEFAULT_SINCE if v0 is None else v0


def gpu_memory_utilization(version: Version) -> float:
    """``--gpu-memory-utilization`` default: 0.92 from 0.20 (``vllm/config/cache.py``), 0.9 before."""
    return 0.92 if version >= Version("0.20") else 0.9


#: V0's chunked prefill. Before 0.5.3 it is off unless asked for (0.5.2 ``engine/arg_utils.py``:
#: ``enable_chunked_prefill: bool = False``). 0.5.3 turns it on by default when ``max_model_len >
#: 32768`` on CUDA without a sliding window, speculative decoding, LoRA, prompt adapters (and, in
#: 0.5.3-0.5.4, prefix caching): "Chunked prefill is enabled by default for models with max_model_len
#: > 32K" (0.5.3 ``engine/arg_utils.py create_engine_config``). Multimodal models keep it off (0.6.4;
#: absent in 0.6.0), MLA models too (0.8.5 ``_set_default_args_v0``: "Chunked prefill not supported
#: for Multimodal or MLA in V0").
CHUNKED_PREFILL_LONG_CONTEXT_SINCE = Version("0.5.3")
V0_LONG_CONTEXT = 32768
V0_MULTIMODAL_NO_CHUNKING_SINCE = Version("0.6.4")
V0_MLA_NO_CHUNKING_SINCE = Version("0.8")
#: V0's batch with chunked prefill on: 512 tokens (0.5.2-0.6.4 ``config.py SchedulerConfig``: "the
#: values that have the best balance between ITL and TTFT on A100"), 2048 from 0.7.0 (read in 0.7.0,
#: 0.7.3, 0.8.5 ``_DEFAULT_MAX_NUM_BATCHED_TOKENS``). Off, the batch holds a whole prompt:
#: ``max(max_model_len, 2048)``. Multimodal models get at least 5120 (0.6.4+
#: ``_MULTIMODAL_MODEL_MAX_NUM_BATCHED_TOKENS``; 4096 in 0.6.0).
V0_CHUNKED_BATCH_2048_SINCE = Version("0.7.0")
V0_MULTIMODAL_BATCH_SINCE = Version("0.6.0")


def v0_chunked_prefill(version: Version, *, max_model_len: int | None, sliding_window: bool = False,
                       multimodal: bool = False, mla: bool = False) -> bool:
    """Whether V0 prefills in chunks by default (``CHUNKED_PREFILL_LONG_CONTEXT_SINCE`` and the
    conditions beside it); the profile run then batches ``max_num_batched_tokens``, not a whole
    ``max_model_len`` prompt."""
    if version < CHUNKED_PREFILL_LONG_CONTEXT_SINCE or not max_model_len or max_model_len <= V0_LONG_CONTEXT:
        return False
    if multimodal and version >= V0_MULTIMODAL_NO_CHUNKING_SINCE:
        return False
    if mla and version >= V0_MLA_NO_CHUNKING_SINCE:
        return False
    return not sliding_window


def v0_batched_tokens(version: Version, *, max_model_len: int | None, chunked: bool, multimodal: bool = False) -> int:
    """V0's default ``max_num_batched_tokens``, what its profile run allocates (``profile_run``
    spreads it over ``max_num_seqs`` dummy sequences): ``V0_CHUNKED_BATCH_2048_SINCE``."""
    if chunked:
        tokens = 2048 if version >= V0_CHUNKED_BATCH_2048_SINCE else 512
    else:
        tokens = max(max_model_len or 0, 2048)
    if multimodal and version >= V0_MULTIMODAL_BATCH_SINCE:
        tokens = max(tokens, 5120 if version >= V0_MULTIMODAL_NO_CHUNKING_SINCE else 4096)
    return tokens


def scheduler_defaults(version: Version, *, gpu_total_mib: int | None,
                       gpu_name: str = "", max_model_len: int | None = None, v0: bool | None = None,
                       chunked_prefill: bool | None = None, multimodal: bool = False) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` of ``vllm serve`` (``EngineArgs._set_default_args``).

    From 0.9 (PR #17885): GPUs with >= 70 GiB that are not A100s get 8192 tokens and 1024 sequences
    for the API server; others 2048 and 256. From 0.28 GPUs with >= 160 GiB get 16384 tokens
    (read in vllm 0.28.0 and 0.33.0 ``engine/arg_utils.py``; the tier is absent in 0.27).
    V0 (before 0.8, or ``v0``: the fallback below SM 8.0, ``runs_v0``) batches a whole prompt,
    ``max(max_model_len, 2048)`` tokens, unless chunked prefill is on (``chunked_prefill``; default:
    ``v0_chunked_prefill`` for a model without sliding window, MLA or vision); 256 sequences.
    """
    if version < V1_DEFAULT_SINCE if v0 is None else v0:
        if chunked_prefill is None:
            chunked_prefill = v0_chunked_prefill(version, max_model_len=max_model_len, multimodal=multimodal)
        return v0_batched_tokens(version, max_model_len=max_model_len, chunked=chunked_prefill,
                                 multimodal=multimodal), 256
    if version >= Version("0.28") and gpu_total_mib is not None and gpu_total_mib >= 160 * GIB_MIB:
        return 16384, 1024  # 0.28+: a >= 160 GiB tier (B200-class) for the API server too
    big = (gpu_total_mib is not None and gpu_total_mib >= 70 * GIB_MIB and "a100" not in gpu_name.lower())
    if version >= Version("0.9") and big:
        return 8192, 1024
    return 2048, 256


#: GPU names of the architectures whose default MLA backend sets the block (0.33
#: ``platforms/cuda.py _get_backend_priorities``): Hopper picks FLASH_ATTN_MLA (block 16; with an fp8 KV
#: cache FlashMLA, 64), Blackwell SM10x FLASHINFER_MLA (32).
_HOPPER = ("h100", "h200", "h800", "h20", "gh200")
_BLACKWELL = ("b200", "b300", "gb200", "gb300")
MLA_BACKEND_BLOCKS_SINCE = Version("0.33")


def block_size(model_is_mla: bool, *, version: Version | None = None, gpu_name: str = "",
               kv_cache_dtype: str = "auto") -> int:
    """KV block size. ``CacheConfig.DEFAULT_BLOCK_SIZE = 16`` unless the attention backend needs
    another (``platforms/interface.py update_block_size_for_backend``). MLA: before 0.33 FlashMLA's 64;
    from 0.33 by architecture (``_HOPPER`` 16, or 64 with an fp8 KV cache; ``_BLACKWELL`` 32; other
    GPUs FlashMLA's 64, not verified)."""
    if not model_is_mla:
        return 16
    name = gpu_name.lower()
    if version is not None and version >= MLA_BACKEND_BLOCKS_SINCE:
        if any(k in name for k in _BLACKWELL):
            return 32
        if any(k in name for k in _HOPPER):
            return 64 if kv_cache_dtype.lower().startswith("fp8") else 16
    return 64


#: ``--kv-cache-memory-bytes`` (``engine/arg_utils.py``) first appears in 0.10.2: it sizes the pool from
#: the given bytes per rank and skips the profiled budget; the free-memory check still runs.
KV_CACHE_MEMORY_BYTES_SINCE = Version("0.10.2")

#: Flags of ``vllm serve`` the checks model (``engine/arg_utils.py``).
KNOB_FLAGS: Mapping[str, KnobFlag] = {
    "--enforce-eager": KnobFlag("enforce_eager", bool),
    "--kv-cache-memory-bytes": KnobFlag("kv_cache_memory_bytes"),
    "--kv-cache-memory": KnobFlag("kv_cache_memory_bytes"),
    "--max-num-batched-tokens": KnobFlag("max_num_batched_tokens"),
    "--max-num-seqs": KnobFlag("max_num_seqs"),
    "--block-size": KnobFlag("block_size"),
    "--moe-backend": KnobFlag("moe_backend", str),
}
#: Flags that change nothing the checks judge (names, logging, tokenizer, API surface, weights source).
NEUTRAL_FLAGS = frozenset({
    "--served-model-name", "--trust-remote-code", "--skip-tokenizer-init", "--disable-log-requests",
    "--disable-log-stats", "--api-key", "--tokenizer", "--seed", "--uvicorn-log-level", "--chat-template",
    "--enable-prefix-caching", "--no-enable-prefix-caching", "--generation-config", "--tool-call-parser",
    "--enable-auto-tool-choice", "--reasoning-parser", "--load-format", "--download-dir", "--revision",
    "--tokenizer-revision", "--max-log-len", "--disable-frontend-multiprocessing", "--distributed-executor-backend",
    "--enable-log-requests", "--no-enable-log-requests", "--disable-uvicorn-access-log", "--allowed-origins",
    "--root-path", "--response-role", "--code-revision", "--tokenizer-mode",
    # where the ranks meet across nodes, not what they hold (0.33.0 arg_utils.py L1175-1178, the DP address flags)
    "--master-addr", "--master-port", "--node-rank", "--data-parallel-address", "--data-parallel-rpc-port",
    "--data-parallel-start-rank", "--headless",
})
#: Flags the checks read from the release's parse themselves (``ResolvedArgs`` / ``LaunchKnobs.typed``), so they
#: are modelled though no ``KNOB_FLAGS`` entry sets a knob: the config overrides (``engines/vllm/served.py``), the
#: dtype (``dtype.py``), the CUDA-graph sizes and mode (``cudagraphs.py``), the blocks override and the hybrid
#: manager switch (``budget.py``).
READ_FROM_ARGS = frozenset({
    "--hf-overrides", "--rope-scaling", "--rope-theta", "--dtype", "--compilation-config",
    "--max-cudagraph-capture-size", "--optimization-level", "-O", "--num-gpu-blocks-override",
    "--disable-hybrid-kv-cache-manager", "--no-disable-hybrid-kv-cache-manager",
})
#: Neutral or unmodelled flags that take a value.
VALUE_FLAGS = frozenset({
    "--served-model-name", "--api-key", "--tokenizer", "--seed", "--uvicorn-log-level", "--chat-template",
    "--generation-config", "--tool-call-parser", "--reasoning-parser", "--load-format", "--download-dir",
    "--revision", "--tokenizer-revision", "--max-log-len", "--distributed-executor-backend", "--allowed-origins",
    "--root-path", "--response-role", "--hf-overrides", "--code-revision", "--tokenizer-mode", "--dtype",
    "--master-addr", "--master-port", "--node-rank", "--data-parallel-address", "--data-parallel-rpc-port",
    "--data-parallel-start-rank",
    "--quantization", "-q", "--max-cudagraph-capture-size", "--compilation-config", "-O", "--swap-space",
    "--cpu-offload-gb", "--speculative-config", "--kv-transfer-config", "--limit-mm-per-prompt",
    "--num-gpu-blocks-override", "--max-lora-rank", "--max-loras", "--lora-modules", "--rope-scaling",
    "--rope-theta", "--optimization-level",
})
ENV_KNOBS: Mapping[str, str] = {"VLLM_PP_LAYER_PARTITION": "pp_layer_partition"}
#: Variables the checks read from ``LaunchKnobs.env`` themselves: VLLM_USE_DEEP_GEMM /
#: VLLM_MOE_USE_DEEP_GEMM (block-FP8 MoE, ``engines/vllm/divisibility.py``).
DEEP_GEMM_ENV = ("VLLM_USE_DEEP_GEMM", "VLLM_MOE_USE_DEEP_GEMM")
#: Variables the checks read themselves (``served.py`` VLLM_MLA_DISABLE, ``cudagraphs.py``
#: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, ``kv_groups.py`` VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE,
#: the sampler's VLLM_USE_FLASHINFER_SAMPLER): never in ``ENV_NOT_MODELLED``.
ENV_READ = ("VLLM_MLA_DISABLE", "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS",
            "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "VLLM_USE_FLASHINFER_SAMPLER")
#: vLLM 0.33.0 ``envs.py`` variables that choose a kernel, a communication backend or a memory budget and
#: that the checks do not model: a launch that sets one is told so, never judged as if it were absent.
#: VLLM_ATTENTION_BACKEND, VLLM_USE_FLASHINFER_MOE_FP8/FP4, VLLM_FLASHINFER_MOE_BACKEND, VLLM_ALL2ALL_BACKEND
#: and VLLM_FUSED_MOE_CHUNK_SIZE are gone from 0.33's envs.py (flags now) but older releases read them.
ENV_NOT_MODELLED = frozenset({
    "VLLM_ATTENTION_BACKEND", "VLLM_DISABLED_KERNELS", "VLLM_MARLIN_USE_ATOMIC_ADD", "VLLM_MARLIN_INPUT_DTYPE",
    "VLLM_USE_TRITON_AWQ", "VLLM_USE_DEEP_GEMM_E8M0", "VLLM_USE_DEEP_GEMM_TMA_ALIGNED_SCALES",
    "VLLM_USE_FLASHINFER_MOE_INT4", "VLLM_USE_FLASHINFER_MOE_FP8", "VLLM_USE_FLASHINFER_MOE_FP4",
    "VLLM_FLASHINFER_MOE_BACKEND", "VLLM_BLOCKSCALE_FP8_GEMM_FLASHINFER", "VLLM_HUMMING_MOE_GEMM_TYPE",
    "VLLM_HUMMING_USE_F16_ACCUM", "VLLM_MOE_SKIP_PADDING", "VLLM_MAX_TOKENS_PER_EXPERT_FP4_MOE",
    "VLLM_MXFP4_EMULATION_DEQUANT_AT_LOAD", "VLLM_MXFP8_EMULATION_DEQUANT_AT_LOAD", "VLLM_GDN_DECODE_KERNEL",
    "VLLM_ALL2ALL_BACKEND", "VLLM_ALLREDUCE_USE_SYMM_MEM", "VLLM_ALLREDUCE_USE_FLASHINFER",
    "VLLM_USE_NCCL_SYMM_MEM", "VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE",
    "VLLM_USE_BREAKABLE_CUDAGRAPH", "VLLM_USE_V2_MODEL_RUNNER", "VLLM_ROCM_USE_AITER", "VLLM_ROCM_USE_AITER_MOE",
    "VLLM_BATCH_INVARIANT", "VLLM_FUSED_MOE_CHUNK_SIZE",
})
