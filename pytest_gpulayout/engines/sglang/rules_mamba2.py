"""SGLang's Mamba radix-cache strategy refusals (the extra-buffer / no-buffer checks, the chunk and page sizes they
read, ReplaySSM against the extra buffer), by release.

What SGLang resolves before it checks, and so what the frame resolves:

* The strategy (``--mamba-scheduler-strategy`` to 0.5.13, ``--mamba-radix-cache-strategy`` from 0.5.14; default
  ``auto``). Up to 0.5.13 ``__post_init__`` makes ``auto`` ``no_buffer`` before any check (0.5.7 ``server_args.py``
  l.766-769, 0.5.13 l.1225-1228), so the extra buffer is the line's ``extra_buffer`` (0.5.13 also
  ``extra_buffer_lazy``: ``enable_mamba_extra_buffer`` l.7363-7364). From 0.5.14 the Mamba step resolves ``auto``
  for a model that uses the Mamba radix cache (0.5.14 ``_handle_mamba_radix_cache`` l.4380-4399; from 0.5.15
  ``arg_groups/overrides.py _mamba_radix_cache_resolution``, 0.5.23 l.464-490): with the radix cache on, ``auto`` is
  ``extra_buffer`` when the overlap schedule is on or the page size is above 1 and the model supports the extra
  buffer on the triton linear-attention backend (``supports_mamba_cache_extra_buffer``, 0.5.23 l.438-450), else
  ``no_buffer`` with the overlap schedule turned off. The extra buffer is then the strategy with the radix cache on
  (``mamba_extra_buffer_of``, 0.5.23 ``model_override_base.py`` l.260-265).
* Which models use it and which support the extra buffer: up to 0.5.14 the call sites of the model branches and
  their arguments (``MODELS_0509``; 0.5.14 ``_support_mamba_cache_extra_buffer`` l.4338-4353), from 0.5.15
  ``_MAMBA_RADIX_CACHE_ARCHS`` / ``_MAMBA_EXTRA_BUFFER_ARCHS`` (``MODELS_0515``). Judged for the hybrid families
  of those lists whose branches write nothing these checks read off Blackwell (``JUDGED``); Kimi (its linear
  backend default), Inkling, Qwen4-Exp, Glm5-Next, MiniCPM-V, Bailing V3 and Granite (a ``layer_types`` probe) are
  not judged, and said. A model outside every list, without a registered linear-attention spec (none in tree before
  0.5.23, GigaChat 3.5 there), reaches none of these checks.
* The page size, the overlap schedule, the radix cache, the linear-attention and attention backends: the line's.
  The Mamba step runs in the model-specific step (0.5.23 ``model_hook.py`` l.737, pipeline l.225), before the page
  size default (``_page_size_default``, l.258), the attention backend pick (l.242), the PP overlap rewrite (l.302)
  and the speculative step (l.305); what runs before it writes none of them on CUDA. The model branches do on
  Blackwell where no ``--attention-backend`` is given (Qwen3.5's page size 64 / 1 for trtllm_mha, 0.5.23
  ``model_overrides/qwen3_5.py`` l.24-49; Nemotron-H's strategy and page size, ``nemotron_h.py`` l.122-134): there
  (or on a GPU of unknown capability) the checks from 0.5.14 are judged only where the line names the attention
  backend. A PD decode worker turns the radix cache off first (0.5.23 ``pd_disaggregation_hook.py`` l.121-126): not
  judged.
* The chunk size (``mamba_cache_chunk_size``, 0.5.13+): the config's ``mamba_chunk_size``, else FLA's chunk of 64
  (``kernels/ops/attention/fla/chunk_delta_h.py CHUNK_SIZE``). The GDN families' configs have none; for another
  model whose ``config.json`` names none, the config class may give one (Nemotron-H's resolves ``chunk_size``):
  not judged. Up to 0.5.12 the check reads ``FLA_CHUNK_SIZE`` itself (0.5.9 l.1741-1745).
* Speculative decoding changes the draft-token count the checks after the spec assert read: with
  ``--speculative-algorithm`` or ``--speculative-num-draft-tokens`` on the line the page checks are not judged.

ReplaySSM (``--enable-linear-replayssm``, 0.5.15+; 0.5.16's ``--enable-gdn-replayssm-spec``) refuses the extra
buffer as resolved above; ``handle_linear_attn_backend`` runs after the deterministic-inference step, which may
turn the radix cache off (0.5.23 ``attention_hook.py`` l.655-662): there not judged.

The DSA split backends (0.5.20+, ``arg_groups/overrides.py _dsa_split_backend_resolution``, 0.5.23 l.600-741, run
for a DeepSeek sparse-attention model on CUDA, ``model_hook.py`` l.343-344): a config with ``learnable_sink`` takes
only flashmla_sparse for a DSA backend the line names (l.644-653); otherwise ``--dsa-prefill-backend`` /
``--dsa-decode-backend``, else the defaults by the KV cache dtype (``served.dsa_kv_cache_dtype``: the one
``_dsa_kv_cache_dtype_default`` sets just before) and the GPU (fp8_e4m3: trtllm from SM100, else flashmla_kv; else
flashmla_sparse prefill and trtllm / fa3 decode, l.713-725), go to ``_check_dsa_backend_constraints`` (l.550-583):
triton is ROCm-only; 0.5.20 - 0.5.21 refuse tilelang with an fp8_e4m3 KV cache, 0.5.22+ take it when both
backends are tilelang, without ``--dcp-size`` > 1 and from SM89. Judged for DeepSeek-V3 / V3.2 (``served.
DSA_ARCHITECTURES``) on a GPU of known capability without ``--enable-hisparse`` (whose arm picks its own defaults).

The CUDA-graph backends (0.5.14+, ``ServerArgs._validate_cuda_graph_config`` / 0.5.19+ ``arg_groups/cuda_graph_hook.py
validate_cuda_graph_config``, 0.5.23 l.410-420): each phase's backend, ``--cuda-graph-config``'s JSON over
``--cuda-graph-backend-<phase>`` over the off-switches (0.5.23 l.32-103; the compatibility cascade leaves a backend
the line sets alone, l.143 / l.560-575), must be one ``ALLOWED_BACKENDS_PER_PHASE`` lists (0.5.14: no full
prefill; tc_piecewise until 0.5.21, which 0.5.22's parser refuses itself). A JSON the release's parser
refuses (``parse_cuda_graph_config_arg``) is not judged. DeepSeek-V4.1 (``model_type`` deepseek_v41) with
``--dsv4-attn-backend trtllm`` needs the prefill graph disabled (0.5.22) or breakable too (0.5.23,
``deepseek_v4_hook.py validate_deepseek_v41_features`` l.282-290): judged where the line sets the prefill backend
(the release's default and its cascade otherwise decide it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask, combine
from pytest_gpulayout.engines.sglang.rules_cache import MAMBA_EXTRA_BUFFER_STRATEGIES
from pytest_gpulayout.engines.sglang.rules_model import Frame
from pytest_gpulayout.engines.sglang.rules_model2 import is_deepseek_dsa
from pytest_gpulayout.engines.sglang.served import DSA_ARCHITECTURES, dsa_kv_cache_dtype
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

EXTRA_MODEL = "sglang.mamba2.extra_buffer_model"
EXTRA_PAGE = "sglang.mamba2.extra_buffer_page"
EXTRA_RADIX_OFF = "sglang.mamba2.extra_buffer_radix_off"
EXTRA_LAZY = "sglang.mamba2.extra_buffer_lazy"
FLASHINFER_NO_BUFFER = "sglang.mamba2.flashinfer_no_buffer"
NO_BUFFER = "sglang.mamba2.no_buffer"
REPLAYSSM = "sglang.mamba2.replayssm_extra_buffer"
DSA_BACKENDS = "sglang.dsa.split_backends"
DSA_SINK = "sglang.dsa.learnable_sink_backend"
GRAPH_BACKENDS = "sglang.cuda_graph.backend_allowed"
V41_PREFILL_GRAPH = "sglang.deepseek_v41.trtllm_prefill_graph"

RULES: Mapping[str, str] = {
    EXTRA_MODEL: "the Mamba extra buffer (given, or auto resolved to it) for a model or linear-attention backend "
                 "that does not support it (0.5.9+)",
    EXTRA_PAGE: "the Mamba extra buffer with a page size that does not divide --mamba-track-interval, or that "
                "neither divides nor is divided by the Mamba chunk size (0.5.7+)",
    EXTRA_RADIX_OFF: "--mamba-scheduler-strategy extra_buffer with --disable-radix-cache (0.5.10 - 0.5.13)",
    EXTRA_LAZY: "--mamba-radix-cache-strategy extra_buffer_lazy with PD disaggregation, or (0.5.17) with DFLASH "
                "(0.5.17+)",
    FLASHINFER_NO_BUFFER: "--linear-attn-decode-backend flashinfer with the no_buffer Mamba strategy (0.5.10)",
    NO_BUFFER: "the no_buffer Mamba strategy (given, or auto resolved to it) with a page size above 1, the overlap "
               "schedule on or the trtllm_mha attention backend (0.5.14+)",
    REPLAYSSM: "--enable-linear-replayssm (0.5.16: --enable-gdn-replayssm-spec) with the Mamba extra buffer "
               "(0.5.15+)",
    DSA_BACKENDS: "a DSA backend that is ROCm-only (triton), or tilelang with an fp8_e4m3 KV cache (0.5.20 - 0.5.21: "
                  "at all; 0.5.22+: on one side only, with --dcp-size > 1 or below SM89) (0.5.20+)",
    DSA_SINK: "a DSA backend other than flashmla_sparse for a model with learnable attention sinks (0.5.20+)",
    GRAPH_BACKENDS: "a --cuda-graph-config / --cuda-graph-backend-<phase> backend the phase does not allow (0.5.14+)",
    V41_PREFILL_GRAPH: "DeepSeek-V4.1 with --dsv4-attn-backend trtllm and a prefill CUDA graph other than disabled "
                       "(0.5.23: or breakable) (0.5.22+)",
}


@dataclass(frozen=True)
class Models:
    """The models a release's Mamba step runs for (``uses``) and those that support the extra buffer (``extra``)."""

    since: Version
    uses: frozenset[str]
    extra: frozenset[str]


_QWEN_GDN = ("Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration")
_JET = ("FalconH1ForCausalLM", "JetNemotronForCausalLM", "JetVLMForConditionalGeneration")
#: 0.5.9 - 0.5.13: the model branches that call ``_handle_mamba_radix_cache`` with the radix cache supported, and
#: their ``support_mamba_cache_extra_buffer`` (0.5.9 ``server_args.py`` l.1548 / l.1600 / l.1634 / l.1655; 0.5.12
#: adds InternS2-Preview l.2316-2320 and moves Nemotron-H to ``arg_groups/nemotron_h_hook.py`` l.42-47; 0.5.13 takes
#: the default ``True`` for Nemotron-H / Puzzle, ``nemotron_h_hook.py`` l.58-62, Falcon-H1 / Jet l.2576-2579 and
#: Bailing V2.5, l.2465-2469, which 0.5.9 - 0.5.12 call with the radix cache unsupported, l.1524-1528: it is turned
#: off there, nothing checked)
MODELS_0509: tuple[Models, ...] = (
    Models(Version("0.5.9"), frozenset((*_QWEN_GDN, "NemotronHForCausalLM", *_JET, "Lfm2ForCausalLM")),
           frozenset(_QWEN_GDN)),
    Models(Version("0.5.12"), frozenset((*_QWEN_GDN, "InternS2PreviewForConditionalGeneration", "NemotronHForCausalLM",
                                         *_JET, "Lfm2ForCausalLM")),
           frozenset((*_QWEN_GDN, "InternS2PreviewForConditionalGeneration"))),
    Models(Version("0.5.13"), frozenset((*_QWEN_GDN, "InternS2PreviewForConditionalGeneration", "NemotronHForCausalLM",
                                         "NemotronHPuzzleForCausalLM", *_JET, "Lfm2ForCausalLM",
                                         "BailingMoeV2_5ForCausalLM")),
           frozenset((*_QWEN_GDN, "InternS2PreviewForConditionalGeneration", "NemotronHForCausalLM",
                      "NemotronHPuzzleForCausalLM", *_JET, "BailingMoeV2_5ForCausalLM"))),
)
_SUPPORTED_0514 = (*_QWEN_GDN, "InternS2PreviewForConditionalGeneration", "NemotronHForCausalLM",
                   "NemotronHPuzzleForCausalLM", "FalconH1ForCausalLM", "BailingMoeV2_5ForCausalLM")
_NO_EXTRA_0514 = ("JetNemotronForCausalLM", "JetVLMForConditionalGeneration", "Lfm2ForCausalLM", "ZayaForCausalLM")
_QWEN_TEXT = ("Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM")
#: 0.5.14+: the judged families in the release's lists (0.5.14 the call sites l.4143-4275 and
#: ``_support_mamba_cache_extra_buffer`` l.4338-4353; 0.5.15 ``overrides.py`` l.960-996; 0.5.17 adds Lfm2-MoE to the
#: first, l.1408-1430; 0.5.19 Qwen3.5's text-only entries to both, l.490-543; the same through 0.5.23 l.369-435)
MODELS_0514: tuple[Models, ...] = (
    Models(Version("0.5.14"), frozenset((*_SUPPORTED_0514, *_NO_EXTRA_0514)), frozenset(_SUPPORTED_0514)),
    Models(Version("0.5.17"), frozenset((*_SUPPORTED_0514, *_NO_EXTRA_0514, "Lfm2MoeForCausalLM")),
           frozenset(_SUPPORTED_0514)),
    Models(Version("0.5.19"), frozenset((*_SUPPORTED_0514, *_NO_EXTRA_0514, "Lfm2MoeForCausalLM", *_QWEN_TEXT)),
           frozenset((*_SUPPORTED_0514, *_QWEN_TEXT))),
)
#: the architectures this module judges (above); any other in a release's lists is said and not judged
JUDGED = frozenset().union(*(m.uses for m in (*MODELS_0509, *MODELS_0514)))
#: the architectures the releases' Mamba step names that are not judged here (see the module)
NOT_JUDGED = frozenset({
    "KimiLinearForCausalLM", "KimiK3ForConditionalGeneration", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "MiniCPMV4_6ForConditionalGeneration", "MiniCPMV4_7ForConditionalGeneration", "NemotronH_Omni_Reasoning_V3",
    "Qwen4ExpForConditionalGeneration", "Glm5NextForConditionalGeneration", "GraniteMoeHybridForCausalLM",
    "InklingForConditionalGeneration", "InklingForConditionalGenerationMTP", "GigaChat35ForCausalLM",
    "GigaChat35ForCausalLMNextN"})
#: the first release whose Mamba step resolves ``auto`` (0.5.14 ``server_args.py`` l.4385-4394)
RESOLVES_AUTO_SINCE = Version("0.5.14")
#: the first release with the Mamba step (0.5.9 ``_handle_mamba_radix_cache``); 0.5.7 - 0.5.8.post1 check in the
#: model branch itself (0.5.7 l.1411-1427, 0.5.8 l.1547-1560)
MAMBA_STEP_SINCE = Version("0.5.9")
#: ``FLA_CHUNK_SIZE`` (``layers/attention/fla/chunk_delta_h.py`` l.19 in 0.5.7; ``kernels/ops/attention/fla/
#: chunk_delta_h.py`` l.23 in 0.5.16; 64 in every release)
FLA_CHUNK_SIZE = 64
#: 0.5.13 first counts ``extra_buffer_lazy`` as the extra buffer (``enable_mamba_extra_buffer``, l.7363-7364; 0.5.12
#: l.7220-7221 compares with ``extra_buffer`` only)
LAZY_SINCE = Version("0.5.13")
#: the compute-capability major from which the model branches may set the page size and strategy (Blackwell)
BLACKWELL_MAJOR = 10
#: the first release whose page check reads ``mamba_cache_chunk_size`` (0.5.13 ``server_args.py`` l.2720 / l.7389)
CHUNK_PROPERTY_SINCE = Version("0.5.13")
#: the GDN families, whose config classes carry no ``mamba_chunk_size`` (the FLA chunk applies)
GDN_CHUNK_ARCHS = frozenset((*_QWEN_GDN, *_QWEN_TEXT, "InternS2PreviewForConditionalGeneration"))
_SPEC_FLAGS = ("speculative_algorithm", "speculative_num_draft_tokens")
#: the strategy's destination by release (0.5.7 - 0.5.13 ``mamba_scheduler_strategy``, then
#: ``mamba_radix_cache_strategy``; 0.5.15's messages still print the old spelling, l.4753)
STRATEGY_DESTS = ("mamba_radix_cache_strategy", "mamba_scheduler_strategy")
#: the checks' call forms as the ledger holds them (the evaluator looks a call up by its name)
HASATTR_CHUNK = "hasattr"


@dataclass(frozen=True)
class Radix:
    """The Mamba step's state for one line: whether it runs its checks (``uses``), the strategy as resolved, whether
    the extra buffer is on, whether the model supports it, and the values the checks read."""

    uses: bool
    strategy: object
    extra: bool
    supports: bool
    disable_overlap_schedule: bool
    page_size: object


def _arch(model: ModelSpec) -> str:
    return model.architectures[0] if model.architectures else ""


def _config(model: ModelSpec) -> dict[str, object]:
    try:
        config = json.loads(model.config_json) if model.config_json else {}
    except ValueError:
        return {}
    return config if isinstance(config, dict) else {}


def _models(table: tuple[Models, ...], listed: Version) -> Models | None:
    chosen = None
    for models in table:
        if listed >= models.since:
            chosen = models
    return chosen


def strategy_of(args: ResolvedArgs) -> object:
    """The line's strategy (either spelling), the parser's default ``auto`` when the release has the flag."""
    for dest in STRATEGY_DESTS:
        if dest in args.values:
            return args.get(dest)
    return None


def radix_state(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version) -> Radix | str:
    """The Mamba step's state at its checks (see the module), or why it is not resolved (in words)."""
    arch = _arch(model)
    if arch in NOT_JUDGED:
        return f"{arch}: the Mamba radix-cache step of SGLang {listed} for this model is not resolved"
    if args.get("disaggregation_mode") == "decode":
        return "a PD decode worker: SGLang turns the radix cache off before its Mamba step"
    table = MODELS_0514 if listed >= RESOLVES_AUTO_SINCE else MODELS_0509
    models = _models(table, listed)
    uses = models is not None and arch in models.uses
    supports = models is not None and arch in models.extra
    page = args.get("page_size")
    overlap_off = bool(args.get("disable_overlap_schedule", False))
    radix_off = bool(args.get("disable_radix_cache", False))
    strategy = strategy_of(args)
    if listed < RESOLVES_AUTO_SINCE:
        if strategy == "auto":
            strategy = "no_buffer"
        extra = strategy == "extra_buffer" or (listed >= LAZY_SINCE and strategy == "extra_buffer_lazy")
        return Radix(uses, strategy, extra, supports, overlap_off, page)
    cc = layout.compute_capability
    if uses and (cc is None or cc[0] >= BLACKWELL_MAJOR) and args.get("attention_backend") is None:
        return (f"{arch}: the page size, strategy and attention backend its branch of SGLang {listed} sets on a "
                "Blackwell (or unknown) GPU without --attention-backend are not resolved")
    supports = supports and args.get("linear_attn_backend") == "triton"
    if radix_off or not uses:
        return Radix(False, strategy, False, supports, overlap_off, page)
    if strategy == "auto":
        wants = not overlap_off or (isinstance(page, int) and page > 1)
        if wants and supports:
            strategy = "extra_buffer"
        else:
            strategy, overlap_off = "no_buffer", True
    return Radix(True, strategy, strategy in MAMBA_EXTRA_BUFFER_STRATEGIES, supports, overlap_off, page)


def _chunk_size(model: ModelSpec) -> int | None:
    """``mamba_cache_chunk_size``'s ``chunk_size``: the config's ``mamba_chunk_size``, else FLA's for the GDN
    families; None (not judged) for another model whose config class may resolve one."""
    value = _config(model).get("mamba_chunk_size")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return FLA_CHUNK_SIZE if _arch(model) in GDN_CHUNK_ARCHS else None


def frame(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version) -> Frame:
    """The values ``RULES``'s entries read at ``listed`` and the rules to judge (see the module docstring)."""
    notes: list[str] = []
    rules: list[str] = []
    values: dict[str, object] = {}
    spec = any(args.get(d) is not None for d in _SPEC_FLAGS)
    track = args.get("mamba_track_interval", 256)
    page = args.get("page_size")
    values.update({"mamba_track_interval": track, "page_size": page, "FLA_CHUNK_SIZE": FLA_CHUNK_SIZE,
                   "speculative_num_draft_tokens": args.get("speculative_num_draft_tokens"),
                   "disaggregation_mode": args.get("disaggregation_mode") or "null", "device": "cuda",
                   "hf_config.architectures[0]": _arch(model), HASATTR_CHUNK: False})
    strategy = strategy_of(args)
    if listed < MAMBA_STEP_SINCE:
        # 0.5.7 - 0.5.8.post1: the model branch's own extra-buffer asserts (their conditions name the architecture)
        values["enable_mamba_extra_buffer"] = strategy == "extra_buffer"
        if not spec:
            rules.append(EXTRA_PAGE)
        return Frame(values, tuple(rules), tuple(notes))
    state = radix_state(args, model, layout, listed)
    replayssm = any(bool(args.get(d)) for d in ("enable_linear_replayssm", "enable_gdn_replayssm_spec"))
    if isinstance(state, str):
        if state.startswith(_arch(model)) and (strategy != "auto" or replayssm or args.is_set("page_size")):
            notes.append(state)
        return Frame(values, (), tuple(notes))
    # ``mamba_extra_buffer_of`` / ``enable_mamba_extra_buffer()`` from 0.5.14: the strategy with the radix cache on
    # (a model the step does not run for keeps the line's strategy)
    extra_of = not bool(args.get("disable_radix_cache", False)) and state.strategy in MAMBA_EXTRA_BUFFER_STRATEGIES
    values.update({dest: bool(args.get(dest)) for dest in ("enable_linear_replayssm", "enable_gdn_replayssm_spec")})
    values.update({"mamba_radix_cache_strategy": state.strategy, "mamba_scheduler_strategy": state.strategy,
                   "disable_overlap_schedule": state.disable_overlap_schedule,
                   "disable_radix_cache": bool(args.get("disable_radix_cache", False)),
                   "attention_backend": args.get("attention_backend"),
                   "linear_attn_decode_backend": args.get("linear_attn_decode_backend"),
                   "support_mamba_cache_extra_buffer": state.supports,
                   "supports_mamba_cache_extra_buffer": state.supports,
                   "_support_mamba_cache_extra_buffer": state.supports,
                   "enable_mamba_extra_buffer": state.extra if listed < RESOLVES_AUTO_SINCE else extra_of,
                   "mamba_extra_buffer_of": extra_of,
                   "algo": str(args.get("speculative_algorithm") or "").upper(),
                   "speculative_algorithm": args.get("speculative_algorithm")})
    chunk = _chunk_size(model)
    if chunk is not None:
        values["chunk_size"] = chunk
    if state.uses:
        # up to 0.5.13 each check holds its own test of the strategy (0.5.9 l.1723-1745); from 0.5.14 the step calls
        # one validator or the other (0.5.23 ``model_hook.py`` l.1069-1076)
        rules.extend((EXTRA_RADIX_OFF, FLASHINFER_NO_BUFFER))
        if listed < RESOLVES_AUTO_SINCE or state.extra:
            rules.append(EXTRA_MODEL)
        if state.extra:
            rules.append(EXTRA_LAZY)
            if not isinstance(page, int):
                pass                              # every page check needs a page size (None: the release's later)
            elif spec:
                notes.append(f"the draft-token count SGLang {listed} resolves for speculative decoding is not "
                             f"resolved: {RULES[EXTRA_PAGE]} is not judged")
            elif chunk is None and listed >= CHUNK_PROPERTY_SINCE:
                notes.append(f"{_arch(model)}: the Mamba chunk size its config class gives is not resolved: "
                             f"{RULES[EXTRA_PAGE]} is not judged")
            else:
                rules.append(EXTRA_PAGE)
        else:
            rules.append(NO_BUFFER)
    if replayssm:
        if _radix_rewritten_later(args):
            notes.append(f"the radix cache SGLang {listed} turns off for deterministic inference or multi-item "
                         f"scoring is not resolved: {RULES[REPLAYSSM]} is not judged")
        else:
            rules.append(REPLAYSSM)
    return Frame(values, tuple(rules), tuple(notes))


def _radix_rewritten_later(args: ResolvedArgs) -> bool:
    """Whether a step between the Mamba step and the linear-attention one may turn the radix cache off."""
    return bool(args.get("enable_deterministic_inference", False)) or args.get("rl_on_policy_target") is not None \
        or bool(args.get("enable_mis", False))


#: the DSA backend a config with learnable attention sinks takes (0.5.23 ``overrides.py`` l.645)
SINK_BACKEND = "flashmla_sparse"
SINK_TEST = "getattr(hf_config, 'learnable_sink', False)"
SINK_FIELDS = "for field in ('dsa_prefill_backend', 'dsa_decode_backend')"
DSA_FIELDS = ("dsa_prefill_backend", "dsa_decode_backend")
#: the first release whose TileLang FP8 checks take both-tilelang (0.5.22 ``overrides.py`` l.548-559); the entries
#: hold no test of the early return before them (l.569-570): given as the values of their conditions
TILELANG_BOTH_SINCE = Version("0.5.22")
TILELANG_TESTS = ("prefill_backend != 'tilelang' or decode_backend != 'tilelang'", "dcp_size > 1",
                  "(major, minor) < (8, 9)")
FP8 = "fp8_e4m3"


def _dsa_kv(model: ModelSpec, args: ResolvedArgs, layout: Layout, listed: Version) -> str:
    """The KV cache dtype ``_dsa_kv_cache_dtype_default`` leaves (``served.dsa_kv_cache_dtype``; ``auto`` it keeps as
    the 16-bit checkpoint's dtype is bfloat16 there, 0.5.23 ``overrides.py`` l.530-541)."""
    asked = str(args.get("kv_cache_dtype") or "auto")
    picked = dsa_kv_cache_dtype(model, asked, layout, listed)
    if picked is not None:
        return picked[0]
    return "bfloat16" if asked == "auto" else asked


def dsa_frame(args: ResolvedArgs, model: ModelSpec, layout: Layout, listed: Version) -> Frame:
    """The DSA split-backend checks' values (see the module)."""
    arch = _arch(model)
    cc = layout.compute_capability
    named = [args.get(d) for d in DSA_FIELDS]
    if arch not in DSA_ARCHITECTURES or is_deepseek_dsa(model, listed) is not True or "dsa_prefill_backend" not in \
            args.values:
        return Frame({}, ())
    if cc is None or bool(args.get("enable_hisparse", False)):
        why = "the GPU's compute capability is unknown" if cc is None else "--enable-hisparse picks its own defaults"
        notes = (f"{arch}: the DSA backends SGLang {listed} resolves are not judged ({why})",) if any(
            n is not None for n in named) else ()
        return Frame({}, (), notes)
    values: dict[str, object] = {"hip": False, "model_arch": arch}
    if _config(model).get("learnable_sink"):
        wrong = next(((d, v) for d, v in zip(DSA_FIELDS, named, strict=True) if v is not None and v != SINK_BACKEND),
                     None)
        values.update({SINK_TEST: True, SINK_FIELDS: wrong is not None, "backend": SINK_BACKEND})
        if wrong is not None:
            values.update({"field": wrong[0], "value": wrong[1], "option": "--" + wrong[0].replace("_", "-")})
        return Frame(values, (DSA_SINK,))
    kv = _dsa_kv(model, args, layout, listed)
    major, minor = cc
    if kv == FP8:
        default_prefill = default_decode = "trtllm" if major >= 10 else "flashmla_kv"
    else:
        default_prefill, default_decode = "flashmla_sparse", "trtllm" if major >= 10 else "fa3"
    prefill = named[0] if named[0] is not None else default_prefill
    decode = named[1] if named[1] is not None else default_decode
    chosen = {prefill, decode}
    rocm_only, fp8_unsupported = {"triton"} & chosen, {"tilelang"} & chosen
    dcp = args.get("dcp_size") or 1
    values.update({"kv_cache_dtype": kv, "prefill_backend": prefill, "decode_backend": decode, "dcp_size": dcp,
                   "major": major, "minor": minor, "rocm_only": rocm_only, "cuda_fp8_unsupported": fp8_unsupported,
                   "'/'.join(sorted(rocm_only))": "/".join(sorted(rocm_only)),
                   "'/'.join(sorted(cuda_fp8_unsupported))": "/".join(sorted(fp8_unsupported))})
    if rocm_only or kv != FP8 or "tilelang" not in chosen:
        values.update(dict.fromkeys(TILELANG_TESTS, False))   # the early return before them (l.562-570)
    return Frame(values, (DSA_BACKENDS,))


#: ``ALLOWED_BACKENDS_PER_PHASE`` by the first release that holds it (0.5.14 ``model_executor/cuda_graph_config.py``
#: l.48-56; 0.5.15 l.48-62 adds full prefill; 0.5.22 l.51-66 drops tc_piecewise)
ALLOWED_BACKENDS: tuple[tuple[Version, Mapping[str, tuple[str, ...]]], ...] = (
    (Version("0.5.14"), {"decode": ("full", "breakable", "tc_piecewise", "disabled"),
                         "prefill": ("breakable", "tc_piecewise", "disabled")}),
    (Version("0.5.15"), {"decode": ("full", "breakable", "tc_piecewise", "disabled"),
                         "prefill": ("full", "breakable", "tc_piecewise", "disabled")}),
    (Version("0.5.22"), {"decode": ("full", "breakable", "disabled"), "prefill": ("full", "breakable", "disabled")}),
)
#: ``Phase.ALL`` (decode first) and the keys every release's JSON parser takes (0.5.14 l.66-69, 0.5.23 l.74-85)
PHASES = ("decode", "prefill")
SAFE_KEYS = frozenset({"backend", "max_bs", "bs"})
#: 0.5.22 first refuses tc_piecewise in its parser (``parse_cuda_graph_backend_arg``, 0.5.23 l.237-243)
TC_PIECEWISE_REFUSED_SINCE = Version("0.5.22")
GRAPH_LOOP = "for phase in Phase.ALL"
PREFILL_BACKEND = "cfg.cuda_graph_config.prefill.backend"
V41_MODEL_TYPE = "deepseek_v41"


def _graph_json(args: ResolvedArgs) -> dict[str, dict[str, object]] | None:
    """``--cuda-graph-config`` as the release's parser returns it ({} when not given); None where that parser
    refuses it (not JSON, not an object, an unknown phase or key) or a key may be one it refuses."""
    raw = args.get("cuda_graph_config")
    if raw is None:
        return {}
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    if not isinstance(parsed, dict) or any(p not in PHASES or not isinstance(v, dict) or set(v) - SAFE_KEYS
                                           for p, v in parsed.items()):
        return None
    return parsed


def phase_backends(args: ResolvedArgs) -> dict[str, object] | None:
    """Each phase's backend where the line sets it (``parse_cuda_graph_config``'s precedence, see the module); a
    phase the line leaves to the release's default is absent; None where the JSON is not judged."""
    parsed = _graph_json(args)
    if parsed is None:
        return None
    out: dict[str, object] = {}
    if bool(args.get("disable_cuda_graph", False)):
        out.update(dict.fromkeys(PHASES, "disabled"))
    for phase in PHASES:
        if bool(args.get(f"disable_{phase}_cuda_graph", False)):
            out[phase] = "disabled"
        given = args.get(f"cuda_graph_backend_{phase}")
        if given is not None:
            out[phase] = given
        if "backend" in parsed.get(phase, {}):
            out[phase] = parsed[phase]["backend"]
    return out


def graph_frame(args: ResolvedArgs, model: ModelSpec, listed: Version) -> Frame:
    """The CUDA-graph backend check's and DeepSeek-V4.1's values (see the module)."""
    if "cuda_graph_config" not in args.values:
        return Frame({}, ())
    backends = phase_backends(args)
    values: dict[str, object] = {"Backend.DISABLED": "disabled", "Backend.BREAKABLE": "breakable"}
    rules: list[str] = []
    notes: list[str] = []
    allowed = next((a for since, a in reversed(ALLOWED_BACKENDS) if listed >= since), None)
    if backends is None:
        notes.append(f"--cuda-graph-config as SGLang {listed}'s parser reads it is not resolved: "
                     f"{RULES[GRAPH_BACKENDS]} is not judged")
    elif allowed is not None and not (listed >= TC_PIECEWISE_REFUSED_SINCE and "tc_piecewise" in backends.values()):
        bad = next((p for p in PHASES if p in backends and backends[p] not in allowed[p]), None)
        values[GRAPH_LOOP] = bad is not None
        if bad is not None:
            values.update({"phase": bad, "backend": backends[bad], "ALLOWED_BACKENDS_PER_PHASE[phase]": allowed[bad]})
        rules.append(GRAPH_BACKENDS)
    if _arch(model) == "DeepseekV4ForCausalLM" and model.hf_model_type == V41_MODEL_TYPE:
        values["dsv4_attn_backend"] = args.get("dsv4_attn_backend")
        prefill = None if backends is None else backends.get("prefill")
        if prefill is not None:
            values[PREFILL_BACKEND] = prefill
            rules.append(V41_PREFILL_GRAPH)
        elif args.get("dsv4_attn_backend") == "trtllm":
            notes.append(f"DeepSeek-V4.1 with --dsv4-attn-backend trtllm against the prefill CUDA graph SGLang "
                         f"{listed} resolves (none set on the line) is not judged")
    return Frame(values, tuple(rules), tuple(notes))


def judge(ask: Ask) -> Judged:
    """The rules of each frame (the Mamba step's, the DSA backends', the CUDA graphs'), each in its own frame over the
    shared namespace (``backend`` means another thing in each), and what they could not resolve."""
    parts: list[Judged] = []
    notes: list[str] = []
    for framed in (frame(ask.args, ask.model, ask.layout, ask.listed),
                   dsa_frame(ask.args, ask.model, ask.layout, ask.listed),
                   graph_frame(ask.args, ask.model, ask.listed)):
        notes.extend(framed.notes)
        parts.append(ask.judge(framed.values, framed.rules))
    return combine(parts, notes)
