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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import Version

from pytest_gpulayout.engines.areas import Ask
from pytest_gpulayout.engines.sglang.rules_cache import MAMBA_EXTRA_BUFFER_STRATEGIES
from pytest_gpulayout.engines.sglang.rules_model import Frame
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
    "InklingForConditionalGeneration", "InklingForConditionalGenerationMTP", "GigaChat35ForCausalLM"})
#: the first release whose Mamba step resolves ``auto`` (0.5.14 ``server_args.py`` l.4385-4394)
RESOLVES_AUTO_SINCE = Version("0.5.14")
#: the first release with the Mamba step (0.5.9 ``_handle_mamba_radix_cache``); 0.5.7 - 0.5.8.post1 check in the
#: model branch itself (0.5.7 l.1411-1427, 0.5.8 l.1547-1560)
MAMBA_STEP_SINCE = Version("0.5.9")
#: ``FLA_CHUNK_SIZE`` (``layers/attention/fla/chunk_delta_h.py`` l.19 in 0.5.7; ``kernels/ops/attention/fla/
#: chunk_delta_h.py`` l.23 in 0.5.16; 64 in every release)
FLA_CHUNK_SIZE = 64
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
        return Radix(uses, strategy, strategy in ("extra_buffer", "extra_buffer_lazy"), supports, overlap_off, page)
    if uses and layout.compute_capability is not None and layout.compute_capability[0] < 10:
        pass
    elif uses and args.get("attention_backend") is None:
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


def judge(ask: Ask) -> Judged:
    """The rules ``frame`` names, in that frame over the shared namespace, and what it could not resolve."""
    framed = frame(ask.args, ask.model, ask.layout, ask.listed)
    in_frame = ask.judge(framed.values, framed.rules)
    return Judged(in_frame.refusals, framed.notes + in_frame.not_judged)
