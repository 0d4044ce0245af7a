"""vLLM's config-time refusals of ReplaySSM / RecoverSSM, adaptive verification against the CUDA-graph mode, the
replay features that need Model Runner V2, prefill context parallel on Model Runner V1, dual-chunk attention's
backend, and the V0 engine chosen by hand, each judged in a frame of its own (their entries read
``self.mamba_config.backend``, ``self.use_v2_model_runner``, ``self.sliding_window``, names other rules read with
another meaning or leave to the release).

- **ReplaySSM** (``--use-replayssm``, ``VllmConfig.validate_mamba_cached_kernel``, a model validator that runs after
  ``__post_init__``: config/vllm.py:3454-3550 in 0.33.0, 2338-2366 in 0.27.0, 2850-2903 in 0.29.0, 3211-3276 in
  0.30.0): an architecture whose class lacks ``SupportsReplaySSM`` (NemotronH / NemotronHPuzzle from 0.27, and the
  KDA ``KimiLinearForCausalLM`` of ``vllm/models/kimi_k3`` from 0.29: model_executor/models/nemotron_h.py:719-730,
  models/kimi_k3/nvidia/model.py:1598-1606 in 0.29.0); Mamba cache mode ``all`` (0.27-0.31); a ``--mamba-backend``
  other than triton (0.27-0.29), other than triton / flashinfer (0.30+), flashinfer in align mode (0.30+) or with a
  ``--replayssm-buffer-len`` above 16 (0.32+), Triton ReplaySSM on Model Runner V2 (0.30+); RecoverSSM (ReplaySSM
  with speculative tokens: any model in 0.29-0.31, a KDA model from 0.32) off Kimi-K3 KDA (0.29-0.31), with
  stochastic rounding, a cache mode other than none / align (0.29-0.31), align mode on Model Runner V1, PP > 1, or a
  backend other than triton (0.30+); and a KV connector instance (a role given), except under RecoverSSM from 0.33.
  The Mamba cache mode is the one ``MambaModelConfig.verify_and_update_config`` leaves (model_executor/models/
  config.py:609-656 in 0.30.0, 758-787 in 0.33.0; 0.33 ignores ``--mamba-cache-mode``, engine/arg_utils.py:2304):
  none where the line turns prefix caching off on a hybrid model; align where it turns it on, from 0.30, with no
  mode or align given (0.27-0.29 pick all or align by the class's Mamba prefix-caching support, not resolved);
  prefix caching left to the release is not resolved. The speculative-decoding raises of the function (ReplaySSM
  speculative decoding, 0.27's "does not support speculative decoding") are not this rule's.
- **adaptive verification** (``--speculative-config`` ``enable_adaptive_verification``, ``VllmConfig.
  _validate_adaptive_verification``, 0.29+: config/vllm.py:3153-3180 in 0.33.0, 2650-2675 in 0.29.0): with
  cudagraph_mode NONE (0.29) or without full CUDA graphs (0.30+), and with PP > 1. The mode is known where the line
  turns CUDA graphs off (``--enforce-eager``, config/vllm.py:1766-1768 in 0.33.0, 1370-1376 in 0.29.0, or a
  cudagraph_mode of NONE); elsewhere it is what the release resolves from the optimization level, dynamic
  speculative decoding and the KV connector (config/vllm.py:1070-1086, 1940-2016 in 0.33.0): not resolved.
- **replay on Model Runner V1** (0.28+, config/vllm.py:1304-1340 in 0.33.0): ``--return-sampling-mask`` or
  ``--enable-trace-replay`` where VLLM_USE_V2_MODEL_RUNNER=0 picks Model Runner V1 (the release's own choice, left
  unset, is not resolved); sampling replay on a diffusion model (``canvas_length`` in its config), with
  ``--logits-processors``, or with a ``--logprobs-mode`` other than processed_logprobs (the default is raw_logprobs).
- **prefill context parallel on Model Runner V1** (0.27-0.28, config/vllm.py:1488-1497 in 0.27.0):
  ``--prefill-context-parallel-size > 1`` with VLLM_USE_V2_MODEL_RUNNER=0 (unset, PCP > 1 picks V2:
  ``use_v2_model_runner``, :731-742).
- **dual-chunk attention** (0.10.2, ``ModelConfig.verify_dual_chunk_attention_config``, config/__init__.py:1289-1307):
  a model whose config has ``dual_chunk_attention_config`` without VLLM_ATTENTION_BACKEND=DUAL_CHUNK_FLASH_ATTN.
- **the V0 engine** (``envs.VLLM_USE_V1`` off: VLLM_USE_V1=0, or below SM 8.0 where 0.8-0.10.1 fall back,
  ``rules_small.use_v1``): ``--enable-prefix-caching`` on a model with a sliding window (CacheConfig.
  _verify_prefix_caching, config.py:1173-1176 in 0.8.0, config/cache.py:189-193 in 0.11.0), unless
  ``--disable-sliding-window``; ``--kv-sharing-fast-prefill`` (0.10.2, config/__init__.py:3417-3421).

Where a value is not resolved here it is left out of the frame: the entry is named as not judged, never guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.vllm import rules_post, rules_post2, rules_small
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Refusal

REPLAYSSM = "vllm.mamba.replayssm"
ADAPTIVE_GRAPHS = "vllm.compilation.adaptive_verification_graphs"
SAMPLING_REPLAY = "vllm.model_runner.sampling_replay"
TRACE_REPLAY = "vllm.model_runner.trace_replay_needs_v2"
PCP_RUNNER = "vllm.parallel.pcp_needs_v2_runner"
DUAL_CHUNK = "vllm.attention.dual_chunk_backend"
V0_SLIDING = "vllm.cache.v0_prefix_caching_sliding_window"
V0_FAST_PREFILL = "vllm.cache.v0_kv_sharing_fast_prefill"

RULES: Mapping[str, str] = {
    REPLAYSSM: "--use-replayssm on an architecture without ReplaySSM, with Mamba cache mode all, a --mamba-backend "
               "or --replayssm-buffer-len the kernel lacks, Triton ReplaySSM on Model Runner V2, RecoverSSM off its "
               "limits, or a KV connector (VllmConfig.validate_mamba_cached_kernel, 0.27+)",
    ADAPTIVE_GRAPHS: "--speculative-config enable_adaptive_verification with CUDA graphs off (0.29) or without full "
                     "CUDA graphs (0.30+), or with PP > 1 (VllmConfig, 0.29+)",
    SAMPLING_REPLAY: "--return-sampling-mask on Model Runner V1 (VLLM_USE_V2_MODEL_RUNNER=0), on a diffusion model, "
                     "with --logits-processors or a --logprobs-mode other than processed_logprobs (VllmConfig, 0.28+)",
    TRACE_REPLAY: "--enable-trace-replay on Model Runner V1 (VLLM_USE_V2_MODEL_RUNNER=0) (VllmConfig, 0.29+)",
    PCP_RUNNER: "--prefill-context-parallel-size > 1 with VLLM_USE_V2_MODEL_RUNNER=0 (VllmConfig, 0.27-0.28)",
    DUAL_CHUNK: "a model with dual_chunk_attention_config without VLLM_ATTENTION_BACKEND=DUAL_CHUNK_FLASH_ATTN "
                "(ModelConfig, 0.10.2)",
    V0_SLIDING: "--enable-prefix-caching on a sliding-window model on the V0 engine (CacheConfig, 0.8.0-0.11.0)",
    V0_FAST_PREFILL: "--kv-sharing-fast-prefill on the V0 engine (VllmConfig, 0.10.2)",
}
FRAMED = frozenset(RULES)

Frame = dict[str, object]

# -- ReplaySSM -------------------------------------------------------------------------------------------------

#: the registry's names of the classes with ``SupportsReplaySSM``: Nemotron-H from 0.27 (model_executor/models/
#: registry.py:186-187 in 0.33.0), the KDA ``KimiLinearForCausalLM`` from 0.29 (its class has no ReplaySSM in 0.28)
_NEMOTRON_H = frozenset({"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM"})
_KDA = ("KimiLinearForCausalLM", "KimiK3ForConditionalGeneration")
KDA_REPLAYSSM_SINCE = Version("0.29.0")
#: 0.29-0.31 make every ReplaySSM run with speculative tokens RecoverSSM; from 0.32 only a KDA model's
RECOVERSSM_KDA_ONLY_SINCE = Version("0.32.0")
#: from 0.30 ``MambaModelConfig`` turns mode none into align under prefix caching (before: all or align by the
#: class's ``supports_mamba_prefix_caching``); 0.33 no longer hands ``--mamba-cache-mode`` to CacheConfig
ALIGN_DEFAULT_SINCE = Version("0.30.0")
CACHE_MODE_FLAG_IGNORED_SINCE = Version("0.33.0")
#: ``KVRole`` (config/kv_transfer.py): ``is_kv_transfer_instance`` is a connector with one of these roles
_KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")


def _json(args: ResolvedArgs, dest: str) -> Mapping[str, object]:
    value = args.get(dest)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, Mapping) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def num_speculative_tokens(args: ResolvedArgs) -> int | None:
    """``VllmConfig.num_speculative_tokens`` (config/vllm.py:612-625 in 0.33.0): 0 without ``--speculative-config``
    (and without a diffusion config), the key where the line gives it; None where the release derives it (a draft's
    ``n_predict``)."""
    given = args.get("speculative_config")
    if given is None and args.get("diffusion_config") is None:
        return 0
    return _int(_json(args, "speculative_config").get("num_speculative_tokens"))


def architecture(args: ResolvedArgs, model: ModelSpec) -> str | None:
    """``ModelConfig.architecture``: the checkpoint's first architecture, where the line leaves ``--model-impl`` to
    the release (the Transformers backend resolves another class)."""
    impl = args.get("model_impl")
    if impl not in (None, "auto") or not model.architectures:
        return None
    return model.architectures[0]


def _mamba_arch(model: ModelSpec) -> bool:
    return model.linear_state is not None or "mamba" in model.model_type.lower()


def mamba_cache_mode(args: ResolvedArgs, model: ModelSpec, version: Version) -> str | None:
    """The Mamba cache mode ``validate_mamba_cached_kernel`` reads (see the module docstring); None where the
    release's own choice decides."""
    given = args.get("mamba_cache_mode") if version < CACHE_MODE_FLAG_IGNORED_SINCE else None
    mode = given if isinstance(given, str) else "none"
    hybrid = rules_post._arch_flag(model, version, "is_hybrid")
    if hybrid is None:
        return None
    if not hybrid:
        # no hook of MambaModelConfig for an attention-only class: the mode stays as CacheConfig takes it
        return None if _mamba_arch(model) else mode
    caching = args.get("enable_prefix_caching") if args.is_set("enable_prefix_caching") else None
    if caching is False:
        return "none"
    if caching is True and version >= ALIGN_DEFAULT_SINCE and mode in ("none", "align"):
        return "align"
    if caching is True and mode == "align":
        return "align"
    return None


def replayssm_frame(ask: Ask, hisparse: bool) -> Frame | None:
    """``validate_mamba_cached_kernel``'s values for a line with ``--use-replayssm``; None without it (the function
    returns first)."""
    args, model, version = ask.args, ask.model, ask.version
    if not bool(args.get("use_replayssm")):
        return None
    kv = _json(args, "kv_transfer_config")
    instance = kv.get("kv_connector") is not None and kv.get("kv_role") in _KV_ROLES
    backend = str(args.get("mamba_backend") or "triton").upper()
    buffer = _int(args.get("replayssm_buffer_len"))
    out: Frame = {
        "self.cache_config.use_replayssm": True, "self.model_config": True,
        "self.mamba_config.backend": backend, "MambaBackendEnum.TRITON": "TRITON",
        "MambaBackendEnum.FLASHINFER": "FLASHINFER",
        "self.cache_config.replayssm_buffer_len": buffer if buffer is not None else 16,
        "self.mamba_config.enable_stochastic_rounding": bool(args.get("enable_mamba_cache_stochastic_rounding")),
        "self.parallel_config.pipeline_parallel_size": ask.layout.pipeline_parallel_size,
        "self.kv_transfer_config": kv or None, "self.kv_transfer_config.is_kv_transfer_instance": instance,
    }
    arch = architecture(args, model)
    if arch is not None:
        supported = _NEMOTRON_H | ({_KDA[0]} if version >= KDA_REPLAYSSM_SINCE else set())
        out["self.model_config.architecture"] = arch
        out["self.model_config.supports_replayssm"] = arch in supported
    tokens = num_speculative_tokens(args)
    recover: bool | None = None
    if tokens is not None:
        out["self.num_speculative_tokens"] = tokens
        if version < RECOVERSSM_KDA_ONLY_SINCE:
            recover = tokens > 0
        elif arch is not None:
            recover = tokens > 0 and arch in _KDA
        if recover is not None:
            out["self.cache_config.use_kda_recoverssm"] = recover
            out["use_mamba_replayssm_spec"] = tokens > 0 and not recover
    elif version >= RECOVERSSM_KDA_ONLY_SINCE and arch is not None and arch not in _KDA:
        recover = False
        out["self.cache_config.use_kda_recoverssm"] = False
    mode = mamba_cache_mode(args, model, version)
    if mode is not None:
        out["self.cache_config.mamba_cache_mode"] = mode
    v2 = rules_post2.use_v2_model_runner(args, hisparse, ask.env)
    if v2 is not None:
        out["self.use_v2_model_runner"] = v2
    return out


# -- adaptive verification -------------------------------------------------------------------------------------

def adaptive_frame(args: ResolvedArgs) -> Frame | None:
    """``_validate_adaptive_verification``'s values: PP, and the CUDA-graph mode where the line turns CUDA graphs off
    (``--enforce-eager``, or cudagraph_mode NONE, which the release never turns back on); None without the key."""
    if not bool(_json(args, "speculative_config").get("enable_adaptive_verification")):
        return None
    compilation = rules_post.compilation_config(args)
    mode = compilation.get("cudagraph_mode")
    off = bool(args.get("enforce_eager")) or (isinstance(mode, str) and mode.upper() == "NONE")
    out: Frame = {"self.speculative_config": True, "spec_config": True,
                  "spec_config.enable_adaptive_verification": True, "CUDAGraphMode.NONE": "NONE"}
    if off:
        out["self.compilation_config.cudagraph_mode"] = "NONE"
        out["self.compilation_config.cudagraph_mode.has_full_cudagraphs()"] = False
    return out


# -- Model Runner V2 -------------------------------------------------------------------------------------------

def replay_frames(args: ResolvedArgs, model: ModelSpec, hisparse: bool,
                  env: Mapping[str, str]) -> tuple[Frame | None, Frame | None]:
    """The frames of ``_verify_sampling_replay_config`` and ``_verify_trace_replay_config``: each returns first without
    its flag (the ledger's conditions do not say so, hence a frame each, None without the flag); the model runner
    where the line or the environment decides it."""
    runner: Frame = {"model_config": True, "self.model_config": True}
    v2 = rules_post2.use_v2_model_runner(args, hisparse, env)
    if v2 is not None:
        runner["self.use_v2_model_runner"] = v2
    sampling: Frame | None = None
    if bool(args.get("return_sampling_mask")):
        raw = rules_post._raw_config(model)
        sampling = {**runner, "model_config.return_sampling_mask": True,
                    "model_config.is_diffusion": raw.get("canvas_length") is not None,
                    "model_config.logits_processors": args.get("logits_processors") or None,
                    "model_config.logprobs_mode": str(args.get("logprobs_mode") or "raw_logprobs")}
    trace = {**runner, "model_config.enable_trace_replay": True} if bool(args.get("enable_trace_replay")) else None
    return sampling, trace


def pcp_frame(args: ResolvedArgs, env: Mapping[str, str]) -> Frame | None:
    """0.27-0.28's ``use_v2_model_runner``: VLLM_USE_V2_MODEL_RUNNER where set, else V2 at PCP > 1; None at PCP 1."""
    pcp = _int(args.get("prefill_context_parallel_size")) or 1
    if pcp <= 1:
        return None
    v2 = rules_post2.use_v2_model_runner(args, False, env)
    return {"self.parallel_config.prefill_context_parallel_size": pcp,
            "self.use_v2_model_runner": True if v2 is None else v2}


# -- dual-chunk attention, the V0 engine ------------------------------------------------------------------------

def dual_chunk_frame(model: ModelSpec, env: Mapping[str, str]) -> Frame:
    """``verify_dual_chunk_attention_config``'s reads: the checkpoint's top-level key, the attention backend."""
    return {"hasattr(self.hf_config, 'dual_chunk_attention_config')":
            "dual_chunk_attention_config" in rules_post._raw_config(model),
            "envs.VLLM_ATTENTION_BACKEND": env.get("VLLM_ATTENTION_BACKEND"),
            "STR_DUAL_CHUNK_FLASH_ATTN_VAL": "DUAL_CHUNK_FLASH_ATTN"}


def _sliding_window(args: ResolvedArgs, model: ModelSpec) -> tuple[bool, bool]:
    """(known, set): ``CacheConfig.sliding_window`` as ``create_engine_config`` passes it (``model_config.
    get_sliding_window()``): None under ``--disable-sliding-window`` or where the checkpoint has none (or turns it off
    with ``use_sliding_window: false``); set where every layer slides. An interleaved pattern is not resolved (0.11.0
    passes None for it, ``is_interleaved``; older releases pass the window)."""
    if bool(args.get("disable_sliding_window")):
        return True, False
    raw = rules_post._raw_config(model)
    nested = raw.get("text_config")
    text = nested if isinstance(nested, Mapping) else raw
    window = text.get("sliding_window")
    if window is None or text.get("use_sliding_window") is False:
        return True, False
    types = text.get("layer_types")
    if isinstance(types, list) and any(t != "sliding_attention" for t in types):
        return False, False
    return True, True


#: ``_set_default_args_v0`` turns prefix caching off for multimodal models (engine/arg_utils.py:1455-1459 in 0.8.0,
#: 1489-1495 in 0.10.0); 0.11.0 has no V0 defaults
V0_DEFAULTS_UNTIL = Version("0.11.0")


def v0_frames(ask: Ask) -> tuple[Frame | None, Frame | None]:
    """The V0 checks' frames (prefix caching with a sliding window; KV-sharing fast prefill), where the line gives
    the flag (V0's prefix caching is off by default, and ``_verify_prefix_caching`` returns first without it; the
    ledger's conditions do not say so); ``envs.VLLM_USE_V1`` where the engine is known (``rules_small.use_v1``)."""
    args = ask.args
    v1 = rules_small.use_v1(ask.version, ask.env, ask.layout)
    engine: Frame = {} if v1 is None else {"envs.VLLM_USE_V1": v1}
    sliding: Frame | None = None
    multimodal_off = ask.model.is_multimodal and ask.version < V0_DEFAULTS_UNTIL and v1 is False
    if args.is_set("enable_prefix_caching") and args.get("enable_prefix_caching") is True and not multimodal_off:
        known, has = _sliding_window(args, ask.model)
        sliding = {"self.enable_prefix_caching": True, **engine}
        if known:
            sliding["self.sliding_window"] = ask.model.sliding_window or 1 if has else None
    fast: Frame | None = None
    if bool(args.get("kv_sharing_fast_prefill")):
        fast = {"self.cache_config.kv_sharing_fast_prefill": True, **engine}
    return sliding, fast


# -- the area --------------------------------------------------------------------------------------------------

def judge(ask: Ask) -> Judged:
    """The rules of this module in force, each judged over its frame alone (no shared name answers for a value the
    frame leaves out on purpose)."""
    rules = set(ask.among(FRAMED))
    if not rules:
        return Judged()
    args, env = ask.args, ask.env
    hisparse = rules_post.hisparse_values(args, ask.model, env)["self.attention_config.hisparse_config"] is not None
    sliding, fast = v0_frames(ask)
    sampling, trace = replay_frames(args, ask.model, hisparse, env)
    framed: list[tuple[str, Frame | None]] = [
        (REPLAYSSM, replayssm_frame(ask, hisparse)),
        (ADAPTIVE_GRAPHS, adaptive_frame(args)),
        (SAMPLING_REPLAY, sampling),
        (TRACE_REPLAY, trace),
        (PCP_RUNNER, pcp_frame(args, env)),
        (DUAL_CHUNK, dual_chunk_frame(ask.model, env)),
        (V0_SLIDING, sliding),
        (V0_FAST_PREFILL, fast),
    ]
    refusals: list[Refusal] = []
    notes: list[str] = []
    for rule, frame in framed:
        if rule not in rules or frame is None:
            continue
        if rule == ADAPTIVE_GRAPHS:
            frame = {**frame, "self.parallel_config.pipeline_parallel_size": ask.layout.pipeline_parallel_size}
        one = ask.book.judge(ask.version, frame, rules=[rule])
        refusals += one.refusals
        notes += [n for n in one.not_judged if n not in notes]
    return Judged(tuple(refusals), tuple(notes))
