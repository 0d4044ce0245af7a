"""What an engine is: the ``Engine`` protocol every ``engines/<name>/`` folder implements, and the
engine-neutral pieces each of them uses (the flags the manifest's keys map to, a launch's knobs, the
release a deployment is judged for).

Each engine's knowledge lives in its own folder (``engines/vllm/``, ``engines/sglang/``,
``engines/llamacpp/``): its names and flags, its defaults by release, the variables it reads, its memory
budget per rank, its divisibility rules, its log grammar, its plan options and its launch specifics.
The rules, the memory arithmetic, the launcher and the planner never test an engine's name: they ask
the engine object a deployment resolved to (``subject.py``). Adding an engine is one folder and one
line in ``engines/registry.py``, which only the edges (CLI, pytest plugin) and the resolver import
(the way pytest-xdist keeps one scheduling strategy per module behind ``scheduler/protocol.py`` and
chooses it once).

What a deployment's ``launch.args`` and ``launch.env`` change in the engine's memory and checks
(``LaunchKnobs``): the startup check launches the engine with these flags and variables, so the static
checks must judge the same engine: ``--enforce-eager`` removes the CUDA-graph reserve,
``--kv-cache-memory-bytes`` replaces the profiled budget, ``VLLM_PP_LAYER_PARTITION`` moves layers
between stages, SGLang's balance switch turns an error into a warning, and so on. Each engine lists the
flags it models (``KNOB_FLAGS``) and the ones that change nothing the checks judge
(``NEUTRAL_FLAGS``); any other flag is named in the findings as not modelled, never silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from packaging.version import InvalidVersion, Version

from pytest_gpulayout.errors import InputError

if TYPE_CHECKING:
    from pytest_gpulayout.host import Host
    from pytest_gpulayout.model.spec import ModelSpec

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
    #: the engine variables in effect for the launch (this host's, then launch.env on top)
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: flags given that the checks do not model, as written
    not_modelled: tuple[str, ...] = ()

    @property
    def read(self) -> tuple[str, ...]:
        """The modelled settings that differ from the defaults, as ``name=value`` (for messages)."""
        out = []
        for f in fields(self):
            if f.name in ("env", "not_modelled"):
                continue
            value = getattr(self, f.name)
            if value not in (None, False):
                out.append(f.name if value is True else f"{f.name}={value}")
        return tuple(out)

    def not_modelled_note(self) -> str:
        """The sentence findings carry when some flags were not modelled ("" when all were)."""
        if not self.not_modelled:
            return ""
        return (f"Not modelled: {', '.join(self.not_modelled)} in launch.args; the startup check "
                f"(--gpulayout-launch) measures their effect.")


@dataclass(frozen=True)
class KnobFlag:
    """One engine flag the checks model: the ``LaunchKnobs`` field it sets and how."""

    knob: str
    kind: type = int          # int: takes a number; bool: a switch (no value)
    #: for bool knobs, the value the flag sets
    value: Any = True


def _int(flag: str, text: str, where: str) -> int:
    try:
        return int(text.replace("_", ""))
    except ValueError:
        raise InputError(f"{flag} needs a whole number, not {text!r}", key=where) from None


def read_knobs(args: Sequence[str], env: Mapping[str, str], *, flags: Mapping[str, KnobFlag],
               neutral: frozenset[str], value_flags: frozenset[str], env_knobs: Mapping[str, str],
               where: str = "launch.args") -> LaunchKnobs:
    """Parse ``args`` (``--flag value`` or ``--flag=value``) with the engine's tables.

    ``flags``: modelled flags; ``neutral``: flags that change nothing the checks judge;
    ``value_flags``: neutral or unknown flags known to take a value (so the value is not mistaken
    for a flag); ``env_knobs``: variable -> knob field read from ``env``.
    """
    values: dict[str, Any] = {"env": MappingProxyType(dict(env))}
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
        if spec is None:
            if name not in neutral:
                unknown.append(name)
            continue
        if spec.kind is bool:
            values[spec.knob] = spec.value
        elif value is None:
            raise InputError(f"{name} needs a value", key=where)
        else:
            values[spec.knob] = _int(name, value, where)
    for var, knob in env_knobs.items():
        if env.get(var):
            values[knob] = env[var]
    return LaunchKnobs(**values, not_modelled=tuple(dict.fromkeys(unknown)))


@dataclass(frozen=True)
class Flags:
    """The engine's command-line flags for what the manifest's keys say (None: no such flag)."""

    model: str                      # the model path when the entry point does not take it positionally
    tensor_parallel_size: str
    pipeline_parallel_size: str
    data_parallel_size: str
    max_model_len: str
    memory_fraction: str
    kv_cache_dtype: str = "--kv-cache-dtype"
    #: aliases the engine also accepts for the same settings (refused in ``launch.args``)
    aliases: Mapping[str, tuple[str, ...]] | None = None


@dataclass(frozen=True)
class FractionDefault:
    """An engine's default memory fraction for one host and layout, and the derivation in words."""

    fraction: float
    why: str


class Engine(Protocol):
    """One serving engine. Everything that differs between releases is a method of ``version``."""

    #: the manifest's ``engine`` value and the name in messages
    name: str
    display: str
    #: package names that provide it (metadata only: never imported)
    distributions: tuple[str, ...]
    #: newest release whose source the rules were read from
    latest_known: str
    #: ``--kv-cache-dtype`` choices it accepts
    kv_cache_dtypes: tuple[str, ...]
    #: variable that lets ``max_model_len`` exceed the model's own maximum
    long_context_env: str
    #: variable that overrides the pipeline layer split
    pp_partition_env: str
    #: the module run as ``python -m`` to serve
    server_module: str
    flags: Flags

    def default_command(self, version: Version | None, python: str) -> list[str]:
        """The entry point of ``version`` in the environment of ``python``."""
        ...

    def default_memory_fraction(self, version: Version, *, gpu_total_mib: int, host_min_total_mib: int,
                                tp: int, pp: int, model: ModelSpec | None,
                                knobs: LaunchKnobs | None = None) -> FractionDefault:
        """The memory fraction the engine uses when none is given."""
        ...

    def knobs(self, args: Sequence[str], env: Mapping[str, str]) -> LaunchKnobs:
        """What a launch's flags and variables change for the checks."""
        ...

    def expected_reports(self, version: Version | None, *, tp: int, pp: int, dp: int) -> tuple[int, int]:
        """``(engines, ranks per engine)`` whose KV pool lines the startup check waits for."""
        ...


def parse_version(text: str, *, key: str = "engine_version") -> Version:
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        raise InputError(f"not a version: {text!r} (e.g. 0.11.0)", key=key) from None


def resolve_version(engine: Engine, pinned: str | None, host: Host) -> tuple[Version, str]:
    """The engine version defaults are taken for, and where it came from.

    ``pinned`` (the deployment's ``engine_version``) wins: it lets a CI machine without the engine
    check what the GPU host will run. Then the package installed on ``host``. Else the newest release we know,
    which the source string says, so a report never hides that it assumed.
    """
    if pinned is not None and str(pinned).strip():
        return parse_version(pinned), "pinned"
    found = host.installed(engine.name)
    if found is not None:
        try:
            return Version(found), "installed"
        except InvalidVersion:
            pass
    return Version(engine.latest_known), "assumed latest known"
