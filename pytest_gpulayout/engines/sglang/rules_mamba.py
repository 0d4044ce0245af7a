"""SGLang's linear-attention (ReplaySSM, verify backend), int8 Mamba checkpoint, deterministic-inference and
attention-backend refusals that read a backend the line names, by release.

* ReplaySSM (0.5.15+, ``ServerArgs._handle_linear_attn_backend``; from 0.5.19 ``arg_groups/attention_hook.py
  handle_linear_attn_backend``, 0.5.23 l.281-520, run for every model: 0.5.23 ``pipeline.py`` l.253):
  ``--enable-linear-replayssm`` needs the triton decode backend (0.5.18+ triton or helion, 0.5.23 l.403-409) and
  a ``--linear-replayssm-cache-len`` of at least 1 (l.427-431); ``--enable-linear-replayssm-spec`` (0.5.17+)
  needs the triton or flashinfer decode backend (l.452-457) and refuses ``--enable-linear-replayssm`` beside it
  (l.495-501); 0.5.16's ``--enable-gdn-replayssm-spec`` needs triton decode, a cache length of at least 1 that
  is a power of two, no ``--enable-linear-replayssm`` and, when given, ``--mamba-ssm-dtype float32`` (0.5.16
  ``server_args.py`` l.5375-5443). ``decode`` is ``--linear-attn-decode-backend`` or ``--linear-attn-backend``
  (0.5.23 l.310) after two rewrites above it: an unset decode backend becomes flashinfer on SM100 when
  ``--mamba-ssm-dtype bfloat16`` is given (and, 0.5.18+, the base backend is not helion; 0.5.23 l.289-303,
  0.5.16 l.5252-5261), and a flashkda decode inherited from the base backend becomes triton (l.318-332).
  Kimi's hybrid models preempt the SM100 default with triton (0.5.23 ``kimi_k3_hook.py`` l.58-75): there
  ``decode`` is not claimed. The checks that read the extra-buffer strategy SGLang resolves
  (``mamba_extra_buffer_of``) are not here.
* The linear-attention verify backend (0.5.17+, 0.5.23 l.345-376): ``--linear-attn-verify-backend``, else
  flashinfer when the decode backend is flashinfer, on SM100+ needs ``--mamba-ssm-dtype bfloat16``. From 0.5.22
  a KDA model with ``SGLANG_ENABLE_PP_SPEC`` falls back to triton first (0.5.23 l.348-363): for a KDA model
  (a ``linear_attn_config`` in its config) the verify backend is not claimed there.
* ``--enable-int8-mamba-checkpoint`` (0.5.14+, ``ServerArgs._handle_int8_mamba_checkpoint``; from 0.5.19
  ``arg_groups/mamba_hook.py handle_int8_mamba_checkpoint``, 0.5.23 l.75-99; it returns without the flag)
  refuses ``--enable-hierarchical-cache``, a ``--radix-cache-backend`` and (0.5.21+) ``--enable-lmcache``: the
  line's, which no hook before it rewrites (0.5.23 ``pipeline.py`` l.252; LMCache is turned off for a diffusion
  LLM only after it, l.342).
* Deterministic inference against a named ``--attention-backend`` (0.5.15+, ``ServerArgs.
  _handle_deterministic_inference`` / ``arg_groups/overrides.py _deterministic_attention_backend``; from 0.5.19
  ``attention_hook.py handle_deterministic_inference``, 0.5.23 l.580-655): a backend outside
  ``DETERMINISTIC_ATTENTION_BACKEND_CHOICES`` is refused (``overrides.py`` l.1117-1122), and for the DeepSeek
  family it lists (``is_deepseek_model``, l.621-636) one outside ``RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_
  BACKEND`` (0.5.16: fa3 / triton), or fa4 off SM100 / SM110 (0.5.17+). It runs before
  ``handle_attention_backend_compatibility`` picks a backend (0.5.23 ``pipeline.py`` l.240 / l.242), after the
  model-specific step, which keeps a backend the line names: the line's. Unnamed, it fills one itself (l.1098-
  1116), which for the DeepSeek list is not resolved here (said).
* Dual-chunk attention (0.5.4.post1 - 0.5.19): a model whose config has ``dual_chunk_attention_config`` takes only
  ``dual_chunk_flash_attn`` (0.5.10 ``server_args.py`` l.2447-2459; 0.5.15 ``overrides.py _attention_backend_dual_
  chunk``, 0.5.19 ``attention_hook.py`` l.214). The check runs after the release has picked a default backend
  (0.5.10 l.2204-2216), whose pick is not resolved here: judged where the line names ``--attention-backend`` (or
  the same prefill and decode backend, which becomes it, 0.5.10 l.2200-2203).
* TRT-LLM MHA prefill (0.5.19+, ``attention_hook.py handle_attention_backend_compatibility``, 0.5.23 l.198-240):
  on SM120 its FMHAv2 prefill takes no fp8_e4m3 KV cache and no skip-softmax threshold
  (``SGLANG_SKIP_SOFTMAX_PREFILL_THRESHOLD_SCALE_FACTOR``, ``EnvFloat(None)``: the deployment's, else unset), and
  prefill context parallelism (``--attn-cp-size`` > 1; 0.5.19 also ``--enable-prefill-cp``) needs SM100. The
  prefill backend is ``attention_backends_of`` after the default pick: judged where the line names it
  (``--prefill-attention-backend``, else ``--attention-backend``).
* The CuteDSL MLA pass (0.5.15+, ``overrides.py _cutedsl_prefill_backend_fill``, 0.5.23 l.1233-1259): with
  cutedsl_mla named for any side, a cutedsl_mla prefill backend is refused, the GPU must be SM100 and the KV
  cache dtype fp8_e4m3 / bf16 / bfloat16 / auto (the line's, else auto; not claimed for a DeepSeek
  sparse-attention model, whose default pass rewrites it first).

A model whose own branch sets backends in place of the line's (Kimi-K3 with DCP, DeepSeek-V4:
``rules_model._OWN_BACKENDS``) is judged by none of the backend rules. ``frame`` gives the values, in a frame of its
own (``decode`` and ``attention_backend`` mean other things to other areas).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang.rules_cache import PREFILL_CP_SPELLINGS
from pytest_gpulayout.engines.sglang.rules_model import CAPABILITY_MAJOR, Frame
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

REPLAYSSM = "sglang.linear_attn.replayssm"
VERIFY = "sglang.linear_attn.verify_backend"
INT8 = "sglang.mamba.int8_checkpoint"
DETERMINISTIC = "sglang.deterministic.named_backend"
DUAL_CHUNK = "sglang.attention.dual_chunk"
TRTLLM_PREFILL = "sglang.attention.trtllm_mha_prefill"
CUTEDSL = "sglang.attention.cutedsl_mla_pass"

RULES: Mapping[str, str] = {
    REPLAYSSM: "--enable-linear-replayssm(-spec) / --enable-gdn-replayssm-spec with a linear-attention decode "
               "backend it does not run on, a --linear-replayssm-cache-len below 1 (0.5.16: not a power of two), "
               "both at once, or (0.5.16) an SSM dtype other than float32 (0.5.15+)",
    VERIFY: "a flashinfer linear-attention verify backend on SM100+ without --mamba-ssm-dtype bfloat16 (0.5.17+)",
    INT8: "--enable-int8-mamba-checkpoint with --enable-hierarchical-cache, a --radix-cache-backend or (0.5.21+) "
          "--enable-lmcache (0.5.14+)",
    DETERMINISTIC: "--enable-deterministic-inference with a named --attention-backend it does not support (for "
                   "the DeepSeek family: outside its radix list, or fa4 off SM100 / SM110) (0.5.15+)",
    DUAL_CHUNK: "a dual-chunk-attention model with an --attention-backend other than dual_chunk_flash_attn "
                "(0.5.4.post1 - 0.5.19)",
    TRTLLM_PREFILL: "TRT-LLM MHA prefill on SM120 with an fp8_e4m3 KV cache or skip-softmax, or with prefill "
                    "context parallelism off SM100 (0.5.19+)",
    CUTEDSL: "CuteDSL MLA for prefill, off SM100, or with a KV cache dtype it does not take (0.5.15+)",
}

#: ``rules_model._OWN_BACKENDS``: models whose branch sets attention backends in place of the line's
OWN_BACKENDS = frozenset({"KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM"})
#: 0.5.18 first skips the SM100 flashinfer decode default for the helion base backend (0.5.18 ``server_args.py``
#: l.6252; 0.5.17 l.6037-6040 has no such test)
HELION_SKIP_SINCE = Version("0.5.18")
#: 0.5.22 first falls the verify backend back to triton for a KDA model under ``SGLANG_ENABLE_PP_SPEC`` (0.5.22
#: ``attention_hook.py`` l.346-361)
KDA_VERIFY_FALLBACK_SINCE = Version("0.5.22")
#: Kimi's hybrid models default the decode backend to triton ahead of the SM100 flashinfer default (0.5.23
#: ``kimi_k3_hook.py apply_kimi_k3_linear_attn_defaults`` l.58-75): with bf16 SSM state on SM100 not claimed
KIMI_PREFIX = "Kimi"
#: the flags of the ReplaySSM checks, as the releases spell them
REPLAYSSM_FLAGS = ("enable_linear_replayssm", "enable_linear_replayssm_spec", "enable_gdn_replayssm_spec")
#: 0.5.16's ring-length test as the ledger holds it (a bitwise ``&``: given as its value)
RING_TEST = "ring_len & ring_len - 1 != 0"

#: ``DETERMINISTIC_ATTENTION_BACKEND_CHOICES`` / ``RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND`` by the first
#: release that holds them (0.5.15 ``server_args.py`` l.198-200; 0.5.16 l.223-231; 0.5.19 l.234-246; from 0.5.20
#: ``arg_groups/choices.py``, 0.5.23 l.113-120 / l.249)
DETERMINISTIC_LISTS: tuple[tuple[Version, list[str], list[str]], ...] = (
    (Version("0.5.15"), ["flashinfer", "fa3", "triton", "ascend"], ["fa3", "triton", "ascend"]),
    (Version("0.5.16"), ["ascend", "fa3", "fa4", "flashinfer", "triton"], ["ascend", "fa3", "fa4", "triton"]),
    (Version("0.5.19"), ["ascend", "fa3", "fa4", "flashinfer", "intel_xpu", "triton"],
     ["ascend", "fa3", "fa4", "triton"]),
)
#: 0.5.16's own DeepSeek list (``server_args.py`` l.6794)
DEEPSEEK_DETERMINISTIC_0516 = ["fa3", "triton"]
_DEEPSEEK_0515 = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                  "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM")
#: ``is_deepseek_model``'s architectures by release (0.5.15 ``server_args.py`` l.5839-5846; 0.5.18 adds
#: Glm4MoeLite, l.8221-8229; 0.5.20 Glm5Next, ``attention_hook.py`` l.540-549; the same through 0.5.23 l.626-635)
DEEPSEEK_MODELS: tuple[tuple[Version, frozenset[str]], ...] = (
    (Version("0.5.15"), frozenset(_DEEPSEEK_0515)),
    (Version("0.5.18"), frozenset((*_DEEPSEEK_0515, "Glm4MoeLiteForCausalLM"))),
    (Version("0.5.20"), frozenset((*_DEEPSEEK_0515, "Glm4MoeLiteForCausalLM", "Glm5NextForConditionalGeneration"))),
)
#: ``parse_connector_type``: an ``instance://`` model path has no config (``is_deepseek_model`` stays False)
_INSTANCE_SCHEME = "instance://"

#: the dual-chunk test of each release range, as the ledger holds it (0.5.4.post1 - 0.5.14, 0.5.15 - 0.5.18, 0.5.19)
DUAL_CHUNK_TESTS = ("getattr(model_config.hf_config, 'dual_chunk_attention_config', None)",
                    "getattr(view.get_model_config().hf_config, 'dual_chunk_attention_config', None)",
                    "getattr(model_config_of(view).hf_config, 'dual_chunk_attention_config', None)")
DUAL_CHUNK_BACKEND = "dual_chunk_flash_attn"

#: the skip-softmax threshold as the check reads it (``EnvFloat(None)``, 0.5.19 / 0.5.23 ``environ.py``)
SKIP_SOFTMAX_ENV = "SGLANG_SKIP_SOFTMAX_PREFILL_THRESHOLD_SCALE_FACTOR"
SKIP_SOFTMAX_GET = f"envs.{SKIP_SOFTMAX_ENV}.get"
#: the first condition of the TRT-LLM MHA entries, as the ledger holds it
TRTLLM_EITHER = "'trtllm_mha' in (prefill_backend, decode_backend)"
CUTEDSL_MLA = "cutedsl_mla"


def _config(model: ModelSpec) -> dict[str, object] | None:
    try:
        config = json.loads(model.config_json) if model.config_json else None
    except ValueError:
        return None
    return config if isinstance(config, dict) else None


def _by_release(table: tuple[tuple[Version, frozenset[str]], ...], listed: Version) -> frozenset[str]:
    chosen: frozenset[str] = frozenset()
    for since, value in table:
        if listed >= since:
            chosen = value
    return chosen


def _major(layout: Layout) -> int | None:
    cc = layout.compute_capability
    return None if cc is None else cc[0]


def _linear_values(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version) -> dict[str, object]:
    """``decode`` / ``verify`` as ``handle_linear_attn_backend`` holds them at its checks, and the flags they read
    (see the module). ``decode`` is left out where it rests on the SM100 default and the GPU is unknown."""
    major = _major(layout)
    ssm = args.get("mamba_ssm_dtype")
    base = args.get("linear_attn_backend")
    given = args.get("linear_attn_decode_backend")
    out: dict[str, object] = {"mamba_ssm_dtype": ssm, "is_cuda": True, "is_available": True,
                              "linear_replayssm_cache_len": args.get("linear_replayssm_cache_len")}
    for dest in REPLAYSSM_FLAGS:
        if dest in args.values:
            out[dest] = bool(args.get(dest))
    if major is not None:
        out[CAPABILITY_MAJOR] = major
    ring = args.get("linear_replayssm_cache_len")
    out["ring_len"] = ring
    if isinstance(ring, int):
        out[RING_TEST] = ring & (ring - 1) != 0
    decode_given = given
    if given is None and ssm == "bfloat16" and (listed < HELION_SKIP_SINCE or base != "helion"):
        arch = model.architectures[0] if model.architectures else ""
        if major is None or (major == 10 and arch.startswith(KIMI_PREFIX)):
            return out                # the SM100 default (or Kimi's own) may apply: ``decode`` is not claimed
        if major == 10:
            decode_given = "flashinfer"
    decode = decode_given or base
    if decode == "flashkda" and decode_given != "flashkda":
        decode = "triton"             # inherited from the base backend: decode falls back to triton
    out["decode"] = decode
    config = _config(model)
    kda = config is None or "linear_attn_config" in config
    if listed < KDA_VERIFY_FALLBACK_SINCE or not kda:
        verify = args.get("linear_attn_verify_backend")
        out["verify"] = "flashinfer" if verify is None and decode == "flashinfer" else verify
    return out


def _deterministic_values(args: ResolvedArgs, model: ModelSpec, layout: Layout,
                          listed: Version) -> dict[str, object]:
    """The deterministic check's backend (the line's), its lists at ``listed``, ``is_deepseek_model`` and the
    SM100 / SM110 probe of the fa4 check (left out where the GPU is unknown)."""
    backend = args.get("attention_backend")
    out: dict[str, object] = {"attention_backend": backend}
    for since, choices, radix in DETERMINISTIC_LISTS:
        if listed >= since:
            out["DETERMINISTIC_ATTENTION_BACKEND_CHOICES"] = choices
            out["RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND"] = radix
    out["deepseek_deterministic_attention_backends"] = DEEPSEEK_DETERMINISTIC_0516
    out["is_deepseek_model"] = _is_deepseek_model(args, model, listed)
    major = _major(layout)
    if major is not None:
        out["is_sm100_or_sm110"] = out["is_sm100_or_sm110_supported"] = major in (10, 11)
    return out


def _is_deepseek_model(args: ResolvedArgs, model: ModelSpec, listed: Version) -> bool:
    path = args.get("model_path")
    if isinstance(path, str) and path.lower().startswith(_INSTANCE_SCHEME):
        return False
    arch = model.architectures[0] if model.architectures else ""
    return arch in _by_release(DEEPSEEK_MODELS, listed)


def _named_backend(args: ResolvedArgs) -> object:
    """``attention_backend`` as the release holds it before it picks a default: the line's, else the prefill
    backend where the line gives the same one for decode (0.5.10 ``server_args.py`` l.2200-2203)."""
    backend = args.get("attention_backend")
    prefill = args.get("prefill_attention_backend")
    if backend is None and prefill is not None and prefill == args.get("decode_attention_backend"):
        return prefill
    return backend


def _kv_cache_dtype(args: ResolvedArgs, model: ModelSpec) -> object:
    """``--kv-cache-dtype`` as the backend checks read it: the line's, else auto; None (not claimed) for a
    DeepSeek sparse-attention model, whose default pass rewrites it first (0.5.23 ``overrides.py`` l.530-541)."""
    if model.index_head_dim is not None:
        return None
    value = args.get("kv_cache_dtype")
    return "auto" if value is None else value


def frame(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version,
          env: Mapping[str, str]) -> Frame:
    """The values ``RULES``'s entries read at ``listed`` and the rules to judge (see the module docstring)."""
    arch = model.architectures[0] if model.architectures else ""
    rules: list[str] = [REPLAYSSM, VERIFY]
    values: dict[str, object] = _linear_values(args, model, layout, listed)
    notes: list[str] = []
    major = _major(layout)
    if major is not None:
        values.update({"is_sm100": major == 10, "is_sm100_supported": major == 10, "is_sm120": major == 12})

    if args.get("enable_int8_mamba_checkpoint"):
        rules.append(INT8)
        values.update({dest: bool(args.get(dest)) for dest in ("enable_hierarchical_cache", "enable_lmcache")})
        values["radix_cache_backend"] = args.get("radix_cache_backend")

    own = arch in OWN_BACKENDS
    deterministic = bool(args.get("enable_deterministic_inference")) or args.get("rl_on_policy_target") is not None
    values["enable_deterministic_inference"] = deterministic
    if deterministic and not own:
        if args.get("attention_backend") is not None:
            rules.append(DETERMINISTIC)
            values.update(_deterministic_values(args, model, layout, listed))
        elif _is_deepseek_model(args, model, listed):
            notes.append(f"{arch}: the attention backend SGLang {listed} fills for deterministic inference (none "
                         "given) is not resolved: its DeepSeek backend check is not judged")

    config = _config(model)
    if config is not None and not own:
        dual = config.get("dual_chunk_attention_config")
        backend = _named_backend(args)
        if dual is None or backend is not None:
            rules.append(DUAL_CHUNK)
            values.update(dict.fromkeys(DUAL_CHUNK_TESTS, dual))
            values["attention_backend"] = backend
        else:
            notes.append(f"{arch}: dual-chunk attention against the attention backend SGLang {listed} picks (none "
                         "given) is not judged")

    kv = _kv_cache_dtype(args, model)
    if not own:
        prefill = args.get("prefill_attention_backend") or args.get("attention_backend")
        decode = args.get("decode_attention_backend") or args.get("attention_backend")
        if prefill is not None:
            rules.append(TRTLLM_PREFILL)
            values["prefill_backend"] = prefill
            if decode is not None:
                values["decode_backend"] = decode
            elif prefill == "trtllm_mha":
                values[TRTLLM_EITHER] = True     # whichever decode backend SGLang picks
            else:
                rules.remove(TRTLLM_PREFILL)     # its second condition is the prefill backend: nothing to refuse
            threshold = env.get(SKIP_SOFTMAX_ENV)
            try:
                values[SKIP_SOFTMAX_GET] = float(threshold) if threshold is not None else None
            except ValueError:
                pass                             # a value the release would not parse: not judged
            values["enable_prefill_context_parallel"] = any(bool(args.get(d)) for d in PREFILL_CP_SPELLINGS)
        named = [args.get(d) for d in ("attention_backend", "decode_attention_backend", "prefill_attention_backend")]
        if CUTEDSL_MLA in named:
            rules.append(CUTEDSL)
            values["prefill_attention_backend"] = args.get("prefill_attention_backend")
    if kv is not None:
        values["kv_cache_dtype"] = kv
    else:
        # the shared namespace's dtype (the line's) is not what these checks read for this model: not judged
        for rule in [r for r in (TRTLLM_PREFILL, CUTEDSL) if r in rules]:
            rules.remove(rule)
            notes.append(f"{arch}: the KV cache dtype SGLang {listed} resolves for a sparse-attention model is not "
                         f"resolved: {RULES[rule]} is not judged")
    return Frame(values, tuple(rules), tuple(notes))


def judge(ask: Ask) -> Judged:
    """The rules ``frame`` names, in that frame over the shared namespace, and what it could not resolve."""
    framed = frame(ask.args, ask.model, ask.layout, ask.listed, ask.env)
    in_frame = ask.judge(framed.values, framed.rules)
    return Judged(in_frame.refusals, framed.notes + in_frame.not_judged)
