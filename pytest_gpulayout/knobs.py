"""What a deployment's ``launch.args`` and ``launch.env`` change in the engine's memory and checks.

The startup check launches the engine with these flags and variables, so the static checks must
judge the same engine: ``--enforce-eager`` removes the CUDA-graph reserve, ``--kv-cache-memory-bytes``
replaces the profiled budget, ``VLLM_PP_LAYER_PARTITION`` moves layers between stages, SGLang's
balance switch turns an error into a warning, and so on. Each engine lists the flags it models
(``KNOB_FLAGS``) and the ones that change nothing the checks judge (``NEUTRAL_FLAGS``); any other flag
is named in the findings as not modelled, never silently ignored. Engine-neutral: the memory
arithmetic reads these knobs without knowing which engine set them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.model.spec import ModelSpec


@dataclass(frozen=True)
class Serving:
    """The engine's own environment, as far as the deployment says it: the container image it runs in (an
    artifact's ``image``), or that it is this Python environment's engine (``engine_here``: the deployment
    launches the engine installed where the check runs, with no image and no ``launch.command`` of its own).
    Neither: the environment is unknown, and a rule that needs a fact of it says what it assumed."""

    image: str = ""
    engine_here: bool = False


@dataclass(frozen=True)
class SpecDraft:
    """Speculative decoding as the release receives it from the line (``EngineRules.speculative_draft``), and the
    draft model read the way the target is (``engine.resolve``): what the memory model counts of it
    (``MemoryEngine.draft_memory``).

    ``method``: the method as the release ends with it (vLLM ``eagle`` / ``eagle3`` / ``mtp`` / ``draft_model`` /
    ``ngram`` ...; SGLang ``EAGLE`` / ``EAGLE3`` / ``NEXTN`` / ``STANDALONE`` / ``NGRAM``), "" where the draft's
    own config tells it; ``ref``: the draft model as the line names it ("" none: n-gram, or MTP from the target's
    checkpoint); ``model``: the draft read, ``unread``: why it could not be; ``tensor_parallel_size``: the draft's
    TP where the line sets one; ``why``: what of the options could not be read; ``kv_cache_dtype``: the draft's own
    cache dtype (vLLM 0.28+ ``speculative_config.kv_cache_dtype``)."""

    method: str
    ref: str = ""
    model: ModelSpec | None = None
    unread: str = ""
    tensor_parallel_size: int | None = None
    why: str = ""
    #: the draft's own KV cache dtype where the line sets one the release reads ("": the target's)
    kv_cache_dtype: str = ""


@dataclass(frozen=True)
class LaunchKnobs:
    """The settings of a launch that the memory model and the rules take into account."""

    enforce_eager: bool = False                     # vLLM --enforce-eager / SGLang --disable-cuda-graph
    kv_cache_memory_bytes: int | None = None        # vLLM --kv-cache-memory-bytes (>= 0.10.2)
    max_num_batched_tokens: int | None = None       # vLLM --max-num-batched-tokens
    max_num_seqs: int | None = None                 # vLLM --max-num-seqs / SGLang --max-running-requests
    block_size: int | None = None                   # vLLM --block-size / SGLang --page-size
    chunked_prefill_size: int | None = None         # SGLang --chunked-prefill-size
    cuda_graph_max_bs: int | None = None            # SGLang --cuda-graph-max-bs
    pp_layer_partition: str | None = None           # VLLM_PP_LAYER_PARTITION / SGLANG_PP_LAYER_PARTITION
    moe_backend: str | None = None                  # vLLM --moe-backend (triton, deep_gemm, ...)
    #: attention-DP groups inside each TP group, as the release reads the line (SGLang ``--enable-dp-attention``
    #: / ``--attn-dp-size``; ``Deployment.attention_data_parallel_size``): attention splits over TP / this
    attention_dp: int = 1
    #: every flag given, in the engine's canonical spelling, with its value (None: a switch), for an engine rule
    #: that reads one itself (SGLang's ``--enable-multimodal``); whether it is modelled is ``not_modelled``'s say
    given: Mapping[str, str | None] = field(default_factory=lambda: MappingProxyType({}))
    #: the values the release's own parser made of the deployment's line, by destination (``ResolvedArgs.values``:
    #: ``compilation_config`` as a mapping), for an engine rule that reads a structured value
    typed: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    #: the engine variables in effect for the launch (this host's, then launch.env on top)
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: where the engine runs, as the deployment says it (``Serving``): the facts of its environment (which
    #: libraries it has) come from there, never from the machine the check runs on
    serving: Serving = field(default_factory=lambda: Serving())
    #: speculative decoding as the line asks for it, the draft read (``SpecDraft``; None: none asked for)
    draft: SpecDraft | None = None
    #: flags given that the checks do not model, as written
    not_modelled: tuple[str, ...] = ()
    #: variables set that choose a kernel or a budget the checks do not model (the engine's list)
    env_not_modelled: tuple[str, ...] = ()

    @property
    def read(self) -> tuple[str, ...]:
        """The modelled settings that differ from the defaults, as ``name=value`` (for messages)."""
        out = []
        for f in fields(self):
            if f.name in ("env", "not_modelled", "env_not_modelled", "given", "typed", "serving", "draft"):
                continue
            value = getattr(self, f.name)
            if value not in (None, False) and not (f.name == "attention_dp" and value == 1):
                out.append(f.name if value is True else f"{f.name}={value}")
        return tuple(out)

    def not_modelled_note(self) -> str:
        """The sentence findings carry when some flags were not modelled ("" when all were)."""
        parts = []
        if self.not_modelled:
            parts.append(f"{', '.join(self.not_modelled)} on the engine's command line")
        if self.env_not_modelled:
            parts.append(f"{', '.join(self.env_not_modelled)} in the environment (each chooses a kernel "
                         f"or a memory budget)")
        if not parts:
            return ""
        return (f"Not modelled: {'; '.join(parts)}; a launch (the startup check: gpulayout check --launch, "
                f"pytest --gpulayout-launch) measures their effect.")


@dataclass(frozen=True)
class KnobFlag:
    """One engine flag the checks model: the ``LaunchKnobs`` field it sets and how."""

    knob: str
    kind: type = int          # int: takes a number; str: takes a word; bool: a switch (no value)
    #: for bool knobs, the value the flag sets
    value: Any = True
    #: where the release's parser stores it, where that is not the flag's own name (SGLang 0.5.14's
    #: --cuda-graph-max-bs: cuda_graph_max_bs_decode)
    dest: str = ""


def _int(flag: str, text: str, where: str) -> int:
    try:
        return int(text.replace("_", ""))
    except ValueError:
        raise InputError(f"{flag} needs a whole number, not {text!r}", key=where) from None


def dest_of(flag: str) -> str:
    """argparse's destination for a long option (``--max-num-seqs`` -> ``max_num_seqs``)."""
    return flag.lstrip("-").replace("-", "_")


def read_knobs(args: Sequence[str], env: Mapping[str, str], *, flags: Mapping[str, KnobFlag],
               neutral: frozenset[str], value_flags: frozenset[str], env_knobs: Mapping[str, str],
               env_not_modelled: frozenset[str] = frozenset(), where: str = "launch.args",
               typed: Mapping[str, object] | None = None) -> LaunchKnobs:
    """Read ``args`` (``--flag value`` or ``--flag=value``, in the engine's canonical spellings) with the
    engine's tables.

    ``flags``: modelled flags; ``neutral``: flags that change nothing the checks judge;
    ``value_flags``: neutral or unknown flags known to take a value (so the value is not mistaken
    for a flag); ``env_knobs``: variable -> knob field read from ``env``. ``typed``: the values the release's
    own parser made of the deployment's command line, by destination (``ResolvedArgs.values``: ``32k`` is
    32000 where the release reads human-readable numbers); a knob takes its number from there first.
    """
    values: dict[str, Any] = {"env": MappingProxyType(dict(env))}
    given: dict[str, str | None] = {}
    unknown: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        name, eq, inline = token.partition("=")
        if not name.startswith("-"):
            i += 1
            continue
        spec = flags.get(name)
        takes_value = (spec is not None and spec.kind is not bool) or name in value_flags
        value: str | None = inline if eq else None
        if takes_value and value is None and i + 1 < len(args):
            value = args[i + 1]
            i += 1
        i += 1
        given[name] = value
        if spec is None:
            if name not in neutral:
                unknown.append(name)
            continue
        if spec.kind is bool:
            values[spec.knob] = spec.value
        elif value is None:
            raise InputError(f"{name} needs a value", key=where)
        elif spec.kind is str:
            values[spec.knob] = value.strip().lower()
        else:
            got = (typed or {}).get(spec.dest or dest_of(name))
            values[spec.knob] = got if isinstance(got, int) and not isinstance(got, bool) else _int(name, value, where)
    for var, knob in env_knobs.items():
        if env.get(var):
            values[knob] = env[var]
    unmodelled_env = tuple(sorted(v for v in env_not_modelled if v in env))
    return LaunchKnobs(**values, given=MappingProxyType(given), typed=MappingProxyType(dict(typed or {})),
                       not_modelled=tuple(dict.fromkeys(unknown)), env_not_modelled=unmodelled_env)
