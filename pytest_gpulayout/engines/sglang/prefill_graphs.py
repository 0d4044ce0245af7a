"""When SGLang turns its prefill (piecewise / breakable) CUDA graphs off before it sizes memory, release by
release, so its default ``mem_fraction_static`` keeps nothing for them: the multimodal allow-lists (extracted
from each wheel into ``releases/*.json``), the architectures and the conditions a deployment states (PP, MLA,
speculative decoding, DP attention, LoRA, DCP, two-batch overlap, the flags that name the backend).
``engine.memory_defaults`` asks ``prefill_graphs_off``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from pytest_gpulayout.engines.sglang.multimodal import serves_multimodal
from pytest_gpulayout.generation import ReleaseFacts, extracted_releases, release_facts

if TYPE_CHECKING:
    from pytest_gpulayout.model.spec import ModelSpec


#: Piecewise (prefill) CUDA graphs: opt-in from 0.5.6, on by default from 0.5.10
#: (``server_args.py``: ``disable_piecewise_cuda_graph: bool = False``).
PREFILL_GRAPHS_DEFAULT_FROM = Version("0.5.10")


@dataclass(frozen=True)
class MultimodalPrefillRule:
    """From ``since``, SGLang turns prefill CUDA graphs off for a multimodal model before it sizes memory
    (``where``), unless its architecture is on one of ``allow_lists`` (``configs/model_config.py``)."""

    since: Version
    where: str
    allow_lists: tuple[str, ...]


_PIECEWISE_LIST = "multimodal_piecewise_cuda_graph_supported_model_archs"
_BREAKABLE_LIST = "multimodal_breakable_cuda_graph_supported_model_archs"
_HOOK = "arg_groups/cuda_graph_hook.py disable_breakable_cudagraph_if_incompatible"
#: The rule release by release (each wheel read; the CUDA-graph config is resolved before the memory
#: settings in every one of them, so the default ``mem_fraction_static`` keeps nothing for graphs that are off):
#:
#: * 0.5.10-0.5.13 ``server_args.py _handle_piecewise_cuda_graph`` ("9. Multimodal / VLM models"): every one.
#: * 0.5.14: the default backend is ``tc_piecewise``; ``_disable_tc_piecewise_cudagraph_if_incompatible``
#:   spares ``multimodal_piecewise_cuda_graph_supported_model_archs``.
#: * 0.5.15: breakable on CUDA; ``_disable_breakable_cudagraph_if_incompatible`` spares none.
#: * 0.5.16-0.5.21: the breakable rule spares ``multimodal_breakable_cuda_graph_supported_model_archs``, and
#:   ``_apply_cuda_graph_compatibility`` moves the piecewise list's architectures to ``tc_piecewise``.
#: * 0.5.19+: the rules move to ``arg_groups/cuda_graph_hook.py``; 0.5.22 drops the piecewise switch.
#:
#: The lists themselves are read from the release's extracted facts (``releases/<ver>.json``,
#: ``prefill_graphs``), as is ``mm_disabled_models``: architectures whose multimodal input is off unless
#: ``--enable-multimodal`` (``ModelConfig.__init__``), which SGLang therefore treats as text models.
MULTIMODAL_PREFILL_RULES = (
    MultimodalPrefillRule(Version("0.5.10"), "server_args.py _handle_piecewise_cuda_graph", ()),
    MultimodalPrefillRule(Version("0.5.14"), "server_args.py _disable_tc_piecewise_cudagraph_if_incompatible",
                          (_PIECEWISE_LIST,)),
    MultimodalPrefillRule(Version("0.5.15"), "server_args.py _disable_breakable_cudagraph_if_incompatible", ()),
    MultimodalPrefillRule(Version("0.5.16"), "server_args.py _disable_breakable_cudagraph_if_incompatible",
                          (_BREAKABLE_LIST, _PIECEWISE_LIST)),
    MultimodalPrefillRule(Version("0.5.19"), _HOOK, (_BREAKABLE_LIST, _PIECEWISE_LIST)),
    MultimodalPrefillRule(Version("0.5.22"), _HOOK, (_BREAKABLE_LIST,)),
)


def multimodal_prefill_rule(version: Version) -> MultimodalPrefillRule | None:
    """The rule in force on ``version`` (None before 0.5.10: no prefill graphs by default)."""
    rules = [r for r in MULTIMODAL_PREFILL_RULES if r.since <= version]
    return rules[-1] if rules else None


def facts_for_lists(version: Version) -> ReleaseFacts | None:
    """The facts that answer for ``version``: the nearest extracted release at or below it, else the oldest
    extracted one (the allow-lists and ``mm_disabled_models`` only grew from 0.5.16 to 0.5.23)."""
    facts = release_facts("sglang", version)
    if facts is None:
        known = extracted_releases("sglang")
        facts = release_facts("sglang", known[0]) if known else None
    return facts


#: ``_handle_piecewise_cuda_graph`` rule 1 (0.5.10-0.5.13 ``server_args.py``) and the tc_piecewise "model-arch
#: blacklist" (0.5.14): ``configs/model_config.py piecewise_cuda_graph_disabled_model_archs`` by release.
PIECEWISE_DISABLED_ARCHS: tuple[tuple[Version, frozenset[str]], ...] = (
    (Version("0.5.10"), frozenset({"DeepseekV32ForCausalLM", "Qwen3NextForCausalLM", "GlmMoeDsaForCausalLM",
                                   "BailingMoeV2_5ForCausalLM", "LLaDAModelLM"})),
    (Version("0.5.12"), frozenset({"DeepseekV32ForCausalLM", "DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN",
                                   "Qwen3NextForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeV2_5ForCausalLM",
                                   "LLaDAModelLM"})),
    (Version("0.5.13"), frozenset({"DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "Qwen3NextForCausalLM",
                                   "BailingMoeV2_5ForCausalLM", "LLaDAModelLM"})),
)
#: 0.5.14: the default prefill backend is ``tc_piecewise`` (``model_executor/cuda_graph_config.py``
#: ``CudaGraphConfig.prefill``); 0.5.15+: ``breakable`` on CUDA (``default_prefill_backend``).
BREAKABLE_DEFAULT_FROM = Version("0.5.15")
#: PP: every piecewise / tc_piecewise rule list has "pipeline parallelism (pp_size > 1)" (0.5.10-0.5.14); the
#: breakable rules of 0.5.15-0.5.18 (``server_args.py _disable_breakable_cudagraph_if_incompatible``) have none,
#: so the graphs stay on with PP; 0.5.19 ``arg_groups/cuda_graph_hook.py`` l.122 turns breakable off for PP > 1.
PP_KEEPS_BREAKABLE = (Version("0.5.15"), Version("0.5.19"))


def _tc_conditions(version: Version, model: ModelSpec | None, pp: int,
                   given: Mapping[str, str | None]) -> list[str]:
    """The conditions of the piecewise (0.5.10-0.5.13 ``_handle_piecewise_cuda_graph``) / tc_piecewise (0.5.14
    ``_disable_tc_piecewise_cudagraph_if_incompatible``) rules that a deployment states (its flags, PP, the
    architecture); the multimodal rule is ``prefill_graphs_off``'s."""
    out = []
    arch = model.architectures[0] if model is not None and model.architectures else None
    blocked: frozenset[str] = frozenset()
    for since, archs in PIECEWISE_DISABLED_ARCHS:
        if since <= version:
            blocked = archs
    if arch in blocked and version < Version("0.5.15"):
        out.append(f"{arch} (configs/model_config.py piecewise_cuda_graph_disabled_model_archs)")
    if version < Version("0.5.11") and given.get("--speculative-algorithm"):
        out.append("speculative decoding")
    if "--enable-dp-attention" in given:
        out.append("DP attention")
    if "--enable-torch-compile" in given:
        out.append("--enable-torch-compile")
    if "--enable-lora" in given or given.get("--lora-paths"):
        out.append("LoRA")
    if pp > 1:
        out.append("PP > 1")
    return out


def _breakable_conditions(version: Version, model: ModelSpec | None,
                          given: Mapping[str, str | None]) -> list[str]:
    """The breakable rules a deployment states, by release (0.5.15-0.5.18 ``server_args.py``, 0.5.19+
    ``arg_groups/cuda_graph_hook.py disable_breakable_cudagraph_if_incompatible``): "MLA attention" 0.5.15-0.5.16,
    "MLA attention (non-DSA)" 0.5.17, none from 0.5.18; LoRA and DP attention 0.5.15-0.5.16; "decode context
    parallel (dcp_size > 1)" from 0.5.16; "two-batch overlap" from 0.5.17."""
    out = []
    v = version
    if model is not None and model.is_mla and v < Version("0.5.18"):
        if v < Version("0.5.17"):
            out.append("MLA attention")
        elif not model.is_sparse_mla:
            out.append("MLA attention (non-DSA)")
    if v < Version("0.5.17"):
        if "--enable-lora" in given or given.get("--lora-paths"):
            out.append("LoRA")
        if "--enable-dp-attention" in given:
            out.append("DP attention")
    if v >= Version("0.5.16") and int(given.get("--dcp-size") or 1) > 1:
        out.append("decode context parallel (dcp_size > 1)")
    if v >= Version("0.5.17") and "--enable-two-batch-overlap" in given:
        out.append("two-batch overlap")
    return out


def _given_off(version: Version, given: Mapping[str, str | None]) -> str | None | bool:
    """A prefill backend the deployment names: its reason when off, True when it locks the graphs on (no rule
    applies), None when it names none. 0.5.10-0.5.13: ``--enforce-piecewise-cuda-graph`` skips every rule,
    ``--disable-piecewise-cuda-graph`` turns them off; 0.5.14+ (``_parse_cuda_graph_config``):
    ``--disable-prefill-cuda-graph`` / ``--cuda-graph-backend-prefill`` (the old flags are aliases of it) lock the
    backend and ``_apply_cuda_graph_compatibility`` skips the rules."""
    if version < Version("0.5.14"):
        if "--enforce-piecewise-cuda-graph" in given:
            return True
        if "--disable-piecewise-cuda-graph" in given:
            return "--disable-piecewise-cuda-graph"
        return None
    backend = given.get("--cuda-graph-backend-prefill")
    if "--enforce-piecewise-cuda-graph" in given:
        backend = "tc_piecewise"
    if "--disable-piecewise-cuda-graph" in given:
        backend = "disabled"
    if backend is not None:
        return f"--cuda-graph-backend-prefill={backend}" if backend.lower() == "disabled" else True
    if "--disable-prefill-cuda-graph" in given:
        return "--disable-prefill-cuda-graph"
    return None


def prefill_graphs_off(version: Version, model: ModelSpec | None, facts: ReleaseFacts | None, *, pp: int = 1,
                       given: Mapping[str, str | None] | None = None) -> str | None:
    """Why SGLang ``version`` captures no prefill CUDA graphs for ``model`` in this deployment, in words for the
    verdict's notes (None: it captures them, or the rule does not say). ``given``: the deployment's flags
    (``LaunchKnobs.given``); a flag naming the prefill backend wins (``_given_off``), then the rules of the
    release's default backend (``_tc_conditions``, ``_breakable_conditions``; PP > 1 is ``memory_defaults``'s,
    silent), then the multimodal rule (``MULTIMODAL_PREFILL_RULES``): ``facts`` give the allow-lists
    (``prefill_graphs`` of ``releases/<ver>.json``, else the model-config lists of ``architectures.kinds``)."""
    rule = multimodal_prefill_rule(version)
    if rule is None:
        return None
    g: Mapping[str, str | None] = given or {}
    named = _given_off(version, g)
    if named is True:
        return None
    if isinstance(named, str):
        return (f"SGLang {version} captures no prefill CUDA graphs with {named}: its default mem_fraction_static "
                f"keeps no memory for them.")
    tc = version < BREAKABLE_DEFAULT_FROM
    reasons = (_tc_conditions(version, model, 1, g) if tc else _breakable_conditions(version, model, g))
    if reasons:
        where = ("server_args.py _handle_piecewise_cuda_graph" if version < Version("0.5.14") else
                 "server_args.py _disable_tc_piecewise_cudagraph_if_incompatible" if tc else
                 "server_args.py _disable_breakable_cudagraph_if_incompatible" if version < Version("0.5.19")
                 else _HOOK)
        return (f"SGLang {version} disables prefill CUDA graphs for {', '.join(reasons)} ({where}): its default "
                f"mem_fraction_static keeps no memory for them.")
    if model is None or not model.is_multimodal or serves_multimodal(version, model, g) is not None:
        return None
    arch = model.architectures[0] if model.architectures else None
    data: Mapping[str, Any] = facts.data if facts is not None else {}
    graphs: Mapping[str, Any] = data.get("prefill_graphs", {})
    where = rule.where
    if not rule.allow_lists:
        return (f"SGLang {version} disables prefill CUDA graphs for every multimodal model ({where}), "
                f"{arch or 'this one'} included: its default mem_fraction_static keeps no memory for them.")
    same_release = facts is not None and facts.release <= version
    mm = graphs.get("multimodal", {})
    allow = mm.get("allow_list") or {}
    if same_release and allow.get("list") in rule.allow_lists:
        allowed: set[str] = set(allow.get("archs", ()))
        where = f"{mm.get('file', where).removeprefix('sglang/srt/')} {mm.get('function', '')}".strip()
    else:
        kinds = data.get("architectures", {}).get("kinds", {})
        allowed = {a for name in rule.allow_lists for a in kinds.get(name, ())}
    if arch is not None and arch in allowed:
        return None
    lists = " / ".join(rule.allow_lists)
    read = ""
    if facts is not None and facts.release != version:
        read = (f"; as extracted from {facts.release}, the nearest release below it" if facts.release < version
                else f"; as extracted from {facts.release}: none was for {version}")
    return (f"SGLang {version} disables prefill CUDA graphs for {arch or 'this multimodal model'} (not in its "
            f"allow-list, configs/model_config.py {lists}{read}; {where}): its default mem_fraction_static "
            f"keeps no memory for them.")
