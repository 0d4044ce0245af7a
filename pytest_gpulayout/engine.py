"""What an engine is: the ``Engine`` protocol every ``engines/<name>/`` folder implements, and the
engine-neutral pieces each of them uses (the flags the manifest's keys map to, a launch's knobs, the
release a deployment is judged for).

Each engine's knowledge lives in its own folder (``engines/vllm/``, ``engines/sglang/``,
``engines/llamacpp/``): its names and flags, its defaults by release, the variables it reads, its memory
budget per rank, its divisibility rules, its log grammar, its plan options and its launch specifics.
The rules, the memory arithmetic, the launcher and the planner never test an engine's name: they ask
the engine object a deployment resolved to (``Subject``, below). Adding an engine is one folder and one
line in ``engines/registry.py``, which only the edges (CLI, pytest plugin) and the resolver import
(the way pytest-xdist keeps one scheduling strategy per module behind ``scheduler/protocol.py`` and
chooses it once).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from packaging.version import InvalidVersion, Version

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.errors import InputError, LaunchError
from pytest_gpulayout.findings import Finding
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.inputs.config_file import in_container, reader
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.knobs import LaunchKnobs, Serving, SpecDraft
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.machine.stand_in import per_node
from pytest_gpulayout.memory.common import MemoryEngine, resolve_version
from pytest_gpulayout.memory.pool import PoolPrediction, predict_replicas
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.placement import Placement, PlacementError, place
from pytest_gpulayout.refusals import Judged, Layout
from pytest_gpulayout.shards import ShardRules, WidthProblem

if TYPE_CHECKING:
    from pytest_gpulayout.inputs.engine_args import ParsedArgs
    from pytest_gpulayout.launch.logparse import LogGrammar
    from pytest_gpulayout.launch.served import Served
    from pytest_gpulayout.memory.pool import PoolPrediction


# -- what an engine changes of a check of the suite (``EngineRules.check_overrides``; ``check.py`` applies it) --

@dataclass(frozen=True)
class Replace:
    """The engine's own answer under the check's name (llama.cpp's layers split by memory, no TP
    groups): ``rule`` runs instead of the shared one. Its facts are its own (``RawFacts``: the shared
    check's table cell shows no number for them)."""

    rule: Callable[[Subject], Finding]


@dataclass(frozen=True)
class Amend:
    """The shared finding in, the engine's verdict out, where it decides differently (TensorRT-LLM's
    ``Mapping`` refusals, its pool that starts with a shorter ``max_seq_len``)."""

    amend: Callable[[Subject, Finding], Finding]


@dataclass(frozen=True)
class Omit:
    """The check does not exist for this engine, and ``why`` (llama.cpp spans no Ray cluster)."""

    why: str


Override = Replace | Amend | Omit


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
    #: how a command line spans nodes (artifacts/build.py reads them): the node count, the data-parallel
    #: ranks on this node, and the address the nodes meet at ("": the engine has no such flag)
    nnodes: str = ""
    data_parallel_size_local: str = ""
    node_address: str = ""


@dataclass(frozen=True)
class FractionDefault:
    """An engine's default memory fraction for one host and layout, the derivation in words, and what the
    pool's verdict should say besides (``notes``)."""

    fraction: float
    why: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class GenerationVerdict:
    """``refusals``: the engine's own words for what stops it starting (the check fails on the first);
    ``warnings``: it starts, but not as the user may think (the check warns); ``notes``: said, nothing more."""

    refusals: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ShardLayout:
    """What decides each rank's share of a layer: the engine and release, TP, DP, expert parallel on/off
    (``Engine.shard_problems`` judges it; ``rules/heads.py`` tries other TP / DP / EP for the fixes)."""

    engine: Engine
    version: Version
    tp: int
    dp: int = 1
    expert_parallel: bool = False
    #: the launch's flags and variables (kernel switches such as vLLM's DeepGEMM or ``--moe-backend``)
    knobs: LaunchKnobs | None = None

    @property
    def moe_shards(self) -> int:
        """Ranks each routed expert's width is split over (``Engine.expert_layout``)."""
        return self.engine.memory.expert_layout(self.tp, self.dp, self.expert_parallel)[1]

    @property
    def ep_size(self) -> int:
        """Ranks the routed experts are spread over (1: expert parallel off)."""
        return self.engine.memory.expert_layout(self.tp, self.dp, self.expert_parallel)[0]


@dataclass(frozen=True)
class RayCluster:
    """How an engine that spans nodes over Ray checks them (``rules/cluster.py`` reports it)."""

    #: the variable a node's own address is taken from before the address Ray reports
    host_ip_env: str
    #: the engine's refusal of two nodes with one address
    unique_ip_error: str


class CommandLine(Protocol):
    """How an engine's command lines read (``engines/<name>/cli.py``): the flags the manifest's keys map to, how
    artifacts start it, each release's parser, and what a launch's flags change for the checks."""

    flags: Flags

    #: the commands and ``python -m`` modules that start it, as deployment artifacts write them
    entry_commands: tuple[tuple[str, ...], ...]

    entry_modules: tuple[str, ...]

    #: container images whose entry point serves it, so that a container's or compose service's bare
    #: arguments are its arguments (``vllm/vllm-openai``)
    entry_images: tuple[str, ...]

    #: ``(repository, tag pattern)`` of the images whose tag names the release they run, the pattern's one
    #: group giving it as ``engine_version`` takes it (``vllm/vllm-openai:v0.10.1`` runs vLLM 0.10.1): an
    #: artifact's image pins the release its checks judge
    release_tags: tuple[tuple[str, str], ...]

    #: whether a command line's flags are read back into manifest keys (artifacts/build.py)
    command_line_keys: bool

    #: ``--kv-cache-dtype`` choices it accepts
    kv_cache_dtypes: tuple[str, ...]

    def parse_args(self, args: Sequence[str], version: Version | None = None) -> ParsedArgs:
        """``args`` read as the engine's own parser reads them (``inputs/engine_args.py``): each flag under its
        canonical name whatever the spelling (``--tensor_parallel_size``, ``--tensor-para``, ``-tp``)."""

    def resolve_args(self, args: Sequence[str], version: Version | None, *,
                     read: Callable[[str], str] | None = None) -> ResolvedArgs:
        """The words after the entry point as release ``version``'s own front end resolves them: typed values
        by destination, its defaults, its refusal in its words (``engines/<name>/cli.py resolve``); ``read``:
        how a file the line names (``--config FILE``) is read (``inputs/config_file.py``; default: from the
        working directory)."""
        ...

    def knobs(self, args: Sequence[str], env: Mapping[str, str], *, version: Version | None = None,
              typed: Mapping[str, object] | None = None) -> LaunchKnobs:
        """What a launch's flags (``launch.args``) and variables change for the checks, the flags read with
        release ``version``'s spellings; ``typed``: what that release's parser made of the whole command line
        (``ResolvedArgs.values``), where a knob's number comes from."""
        ...

    def as_run(self, dep: Deployment, args: ResolvedArgs, version: Version, *,
               model: ModelSpec | None = None) -> Deployment:
        """``dep`` with the layout release ``version`` runs its line ``args`` in: how many replicas, and how each
        TP group is cut (SGLang's attention DP inside TP: ``--tp 8 --dp 8 --enable-dp-attention`` is one replica
        of 8 GPUs, ``attention_data_parallel_size`` 8; the layout a release sets for a model itself, ``model``:
        the model as read, None where it could not be); ``dep`` itself where the line runs what it says."""
        ...


class EngineRules(Protocol):
    """What the checks ask of an engine: the checks it answers differently, its refusals in its words, its
    shard, generation and config-time rules, and the model as it serves it."""

    #: the checks it answers differently, by name (``check.Replace`` / ``Amend`` / ``Omit``: llama.cpp's layers
    #: split by memory, TensorRT-LLM's ``Mapping`` refusals); every other check of the suite runs as it is
    check_overrides: Mapping[str, Override]

    #: what it raises when ``max_model_len`` exceeds the model's own maximum (its config check)
    too_long_text: str

    #: a pool that cannot hold one ``max_model_len`` request: (whether it refuses to start, what it says)
    short_pool: tuple[bool, str]

    #: why another tenant on one GPU shrinks the whole pool ("" where it does not)
    tenant_note: str

    #: the start-up memory rules it enforces: "tp_balance" (SGLang's min free >= 0.9 x every rank's
    #: free), "free_memory" (vLLM's free memory >= fraction x total, by release)
    start_rules: frozenset[str]

    #: variable that lets ``max_model_len`` exceed the model's own maximum
    long_context_env: str

    def no_room_advice(self, p: PoolPrediction, gpu_index: int) -> str | None:
        """Why there is no room for a KV cache when its own reserve tips it, and the flags that shrink it."""
        ...

    def shard_rules(self) -> ShardRules:
        """The engine's words and fixes for expert and quantized shares (``shards.ShardRules``)."""
        ...

    def shard_problems(self, model: ModelSpec, layout: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
        """Every per-rank share of a quantized or expert-parallel layer that ``layout`` gets and the
        release refuses at load time, and notes about shares it adapts (empty: none)."""
        ...

    def mig_note(self) -> str:
        """What the engine does with a single-GPU replica on a MIG slice, as the start of a sentence
        ('' when nothing beyond the slice's memory)."""
        ...

    def ray_cluster(self) -> RayCluster | None:
        """How it checks the nodes when it spans hosts over Ray (None: it checks nothing of them)."""
        ...

    def generation_refusals(self, s: Subject) -> GenerationVerdict:
        """What the release refuses to build for ``s`` on its GPUs' compute capability (quantization method,
        bf16, attention backends) or at all (architectures), in its own words, from the facts extracted from
        its wheels; ``rules/heads.py`` fails on a refusal and warns on a warning."""
        ...

    def config_check(self, s: Subject) -> Judged | None:
        """The release's config-time refusals of ``s`` (``engines/<name>/config_checks.py``: the ledger's rules
        over ``s.args``), and what it could not judge; None where none are modelled for this engine."""
        ...

    def as_served(self, model: ModelSpec, args: ResolvedArgs, layout: Layout, version: Version,
                  env: Mapping[str, str] | None = None) -> ModelSpec:
        """``model`` as the release serves it with ``args`` and the launch's variables ``env`` on those GPUs (vLLM:
        its config overrides, the dtype it resolves, a float32 fallback's weight bytes); the model unchanged where
        nothing differs."""
        ...

    def speculative_draft(self, args: ResolvedArgs, version: Version) -> SpecDraft | None:
        """The speculative decoding ``args`` ask of the release, and the draft model it names (unread: ``resolve``
        reads it the way the target is read); None where the line asks for none or the engine has none modelled."""
        ...


class Planning(Protocol):
    """What ``gpulayout plan`` asks of an engine."""

    #: whether it serves ``data_parallel_size`` replicas as one deployment; where not (TensorRT-LLM,
    #: llama.cpp), the planner lists DP layouts only as independent engines, one deployment per replica
    data_parallel: bool

    def plan_fraction_name(self) -> str:
        """The planner's words for the default memory fraction it may suggest raising."""
        ...

    def plan_fraction_keeps_back(self) -> str:
        """What a higher memory fraction takes away (the planner's suggestion says it)."""
        ...

    def plan_balance_margin(self) -> str | None:
        """The ``BalanceFacts`` field whose negative value is this engine's start-up refusal
        (``headroom_gib``: SGLang's 0.9 rule; ``vllm_min_margin_gib``: vLLM's free-memory check)."""
        ...

    def plan_dp_shares_moe_experts(self) -> bool:
        """DP replicas of a MoE model share one expert group (vLLM's DP attention), so the planner also
        lists independent engines, one per replica."""
        ...

    def has_own_planner(self) -> bool:
        """The engine plans its own layouts (llama.cpp: split modes and ratios, not TP/PP/DP)."""
        ...


class Engine(Protocol):
    """One serving engine: who it is, and its roles, each a small protocol of its own, so that a new engine
    implements the roles it has (the way pytest-xdist keeps one small scheduling protocol). Everything that
    differs between releases is a method of ``version``."""

    #: the manifest's ``engine`` value and the name in messages
    name: str
    display: str
    #: package names that provide it (metadata only: never imported)
    distributions: tuple[str, ...]
    #: the environment variables it reads that change a verdict (its own switches): the only ones
    #: ``Host.read`` keeps of the environment
    env_vars: tuple[str, ...]
    #: newest release whose source the rules were read from
    latest_known: str

    def parse_version(self, text: str) -> Version:
        """A release as this engine spells it (``0.11.0``; llama.cpp's ``b11434``); ``InputError`` naming
        ``engine_version`` otherwise."""
        ...

    @property
    def cli(self) -> CommandLine:
        """How its command lines read (flags, entry points, each release's parser, the knobs)."""
        ...

    @property
    def memory(self) -> MemoryEngine:
        """What the memory model asks of it (``memory.common.MemoryEngine``)."""
        ...

    @property
    def rules(self) -> EngineRules:
        """What the checks ask of it."""
        ...

    @property
    def planner(self) -> Planning:
        """What the planner asks of it."""
        ...

    @property
    def launch(self) -> Served:
        """How the startup check and ``gpulayout measure`` start and stop it (``launch.served.Served``)."""
        ...

    @property
    def logs(self) -> LogGrammar | None:
        """What marks its startup log for ``launch/logparse.py`` (None: its launch watches its log its own way)."""
        ...


def parse_version(text: str, *, key: str = "engine_version") -> Version:
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        raise InputError(f"not a version: {text!r} (e.g. 0.11.0)", key=key) from None


# ------------------------------------------------------------------------------------------------
# One deployment resolved once
# ------------------------------------------------------------------------------------------------
# A deployment's facts used to be worked out by each check on its own (the engine's release and the
# knobs of ``launch.args`` three times, the placement five times, the memory prediction twice, with a
# module-level cache papering over it), so two checks could disagree about the same deployment. Now
# ``evaluate`` resolves each deployment into one ``Subject`` (the engine object, its release, the
# launch's knobs, the placement and the replicas' pool predictions) and every rule is a pure function
# ``(subject) -> Finding`` that asks ``subject.engine`` instead of testing an engine's name.

class ModelMissing(Exception):
    """The deployment's model could not be found or read (``model/resolve.ModelNotFound``, a config.json that
    does not parse): the checks that read the model are not run (``Runner``), ``config`` fails saying how to
    supply it, and the deployment's other checks still run. ``error``: the one line naming the file and key."""

    def __init__(self, error: InputError) -> None:
        self.error = error
        super().__init__(str(error))


@dataclass(frozen=True, eq=False)
class Subject:
    """A deployment with everything the checks derive from it, each derived once.

    ``placement`` and the pool predictions are worked out on first use (a deployment whose GPUs cannot
    be placed still gets its ``heads`` verdict), and kept: ``balance`` and ``kv_pool`` read the same
    numbers.
    """

    dep: Deployment
    machine: Machine
    #: the model as the release serves it, or why it could not be read (``model`` raises it)
    found: ModelSpec | ModelMissing
    host: Host
    engine: Engine
    version: Version
    version_source: str            # pinned | installed | assumed latest known
    knobs: LaunchKnobs
    #: the command line as the release's front end resolves it: the one parse of this deployment
    #: (``Engine.resolve_args`` of ``command_words``); ``model`` is the model as the release serves it with it
    args: ResolvedArgs

    @cached_property
    def _placement(self) -> Placement | PlacementError:
        try:
            return place(self.dep, self.machine)
        except PlacementError as err:
            return err

    @property
    def placement(self) -> Placement:
        """The deployment's GPUs in rank order (raises ``PlacementError`` when they cannot be placed)."""
        p = self._placement
        if isinstance(p, PlacementError):
            raise p
        return p

    @property
    def model(self) -> ModelSpec:
        """The model as the release serves it (raises ``ModelMissing`` when it could not be read)."""
        if isinstance(self.found, ModelMissing):
            raise self.found
        return self.found

    @property
    def model_missing(self) -> ModelMissing | None:
        """Why the model could not be read (None: it was)."""
        return self.found if isinstance(self.found, ModelMissing) else None

    @property
    def max_model_len(self) -> int | None:
        """The context length the engine runs with: the deployment's ``max_model_len``, else the model's own
        derived maximum (``ModelSpec.max_position_embeddings``, as the engines derive it from the config)."""
        return self.dep.max_model_len or self.model.max_position_embeddings or None

    @cached_property
    def _replicas(self) -> tuple[PoolPrediction, ...] | Exception:
        try:
            return tuple(predict_replicas(self.dep, self.machine, self.model, self.host, self.knobs,
                                          engine=self.engine.memory, version=self.version,
                                          version_source=self.version_source, placement=self.placement,
                                          max_model_len=self.max_model_len))
        except Exception as err:  # MemoryUnknown, PlacementError, InputError: re-raised to each reader
            return err

    @property
    def replicas(self) -> tuple[PoolPrediction, ...]:
        """One ``PoolPrediction`` per DP replica (raises what the prediction raised)."""
        r = self._replicas
        if isinstance(r, Exception):
            raise r
        return r


#: what the launcher adds to every launch (the address it listens on), never a deployment's to judge
_LAUNCHER_FLAGS = frozenset({"--host", "--port"})


def command_words(engine: Engine, dep: Deployment, version: Version) -> list[str]:
    """The words after the entry point that ``dep`` runs its engine with, as the front end sees them: an
    artifact's own line as written (``dep.origin.args``), else what a launch of it passes (its keys as the
    engine's flags, then ``launch.args``; ``Engine.launch_argv`` without its entry point)."""
    if dep.origin is not None and dep.origin.args:
        return list(dep.origin.args)
    command = list(dep.launch.command) if dep.launch.command else engine.launch.default_command(version, sys.executable)
    try:
        argv = engine.launch.launch_argv(dep, dep.model, 0, version)[len(command):]
    except LaunchError:  # a layout the launcher refuses to start (its own finding says so): the flags given
        return list(dep.launch.args)
    out: list[str] = []  # without the launcher's own --host / --port (a manifest cannot set them)
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in _LAUNCHER_FLAGS:
            skip = True
        else:
            out.append(word)
    return out


def config_reader(dep: Deployment) -> Callable[[str], str]:
    """How the files ``dep``'s line has its engine read (``--config FILE``) are read: a manifest's against its
    folder, a bare command line's (``--cmd``, a script) against its file's, an artifact container's not at all
    (its file system is not this machine's: ``NotHere``)."""
    origin = dep.origin
    if origin is None:
        return reader(dep.base_dir)
    if origin.pod is not None or origin.image:
        return in_container(origin.source)
    return reader(origin.file.parent)


def with_line_keys(dep: Deployment, args: ResolvedArgs, flags: Flags) -> Deployment:
    """``dep`` with the layout keys its resolved line sets (``CommandLine.as_run``): a manifest writes only the
    keys it sets (TP 1 not at all), so a ``--config FILE`` in ``launch.args`` that sets the TP size, the context
    length or the memory fraction is what the engine runs (the line's own flags already won in ``args``). A
    value the key could not hold (vLLM's ``--max-model-len -1`` / ``auto``: the model's own) is left to the
    engine's defaults as before."""
    if dep.origin is not None or not args.ok:  # an artifact's keys are read from the same values (artifacts/build)
        return dep
    changes: dict[str, Any] = {}  # Deployment's own field types, checked below
    for key, flag, kind in (("tensor_parallel_size", flags.tensor_parallel_size, int),
                            ("pipeline_parallel_size", flags.pipeline_parallel_size, int),
                            ("data_parallel_size", flags.data_parallel_size, int),
                            ("max_model_len", flags.max_model_len, int),
                            ("memory_fraction", flags.memory_fraction, float),
                            ("kv_cache_dtype", flags.kv_cache_dtype, str)):
        if not flag:
            continue
        dest = args.dest(flag)
        value = args.get(dest)
        if not args.is_set(dest) or value is None or isinstance(value, bool) or value == getattr(dep, key):
            continue
        if kind is int and isinstance(value, int) and value >= 1:
            changes[key] = value
        elif kind is float and isinstance(value, (int, float)) and 0 < value <= 1:
            changes[key] = float(value)
        elif kind is str and isinstance(value, str):
            changes[key] = value
    return replace(dep, **changes) if changes else dep


def _knob_words(engine: Engine, dep: Deployment, args: ResolvedArgs) -> list[str]:
    """The words the knobs read: a ``--config FILE``'s keys as the release merged them (``from_file``; the
    manifest's own keys among them are the deployment's layout, not knobs), then ``launch.args`` without the
    ``--config FILE`` pair, whose flags win as they do in the engine."""
    words = list(dep.launch.args)
    if not args.from_file:
        return words
    if "--config" in words:
        i = words.index("--config")
        del words[i:i + 2]
    f = engine.cli.flags
    owned = {s for s in (f.model, f.tensor_parallel_size, f.pipeline_parallel_size, f.data_parallel_size,
                         f.max_model_len, f.memory_fraction, f.kv_cache_dtype) if s}
    owned |= {s for names in (f.aliases or {}).values() for s in names}
    kept: list[str] = []
    skip = False
    for w in args.from_file:
        if skip:
            skip = False
            continue
        if w.split("=", 1)[0] in owned:
            skip = "=" not in w
            continue
        kept.append(w)
    return [*kept, *words]


def _installed_is(engine: Engine, host: Host, version: Version) -> bool:
    """Whether this Python environment holds ``engine`` at ``version``: the one a launch without a command of
    its own starts, so the facts of its environment can be read here."""
    installed = host.installed(engine.name)
    if installed is None:
        return False
    try:
        return engine.parse_version(installed) == version
    except InputError:
        return False


def resolve(dep: Deployment, machine: Machine, model: ModelSpec | InputError, host: Host = BARE_HOST, *,
            engine: Engine) -> Subject:
    """``dep`` with its engine object (chosen once, by the caller that holds the registry), the release
    its defaults are taken for, its command line through that release's front end (once), the model as the
    release serves it with that line on these GPUs, and the knobs of its ``launch.args`` / ``launch.env`` over
    the host's variables (the engine inherits the host's environment with ``launch.env`` on top). ``model``
    may be the error that reading it raised: the subject then carries it (``ModelMissing``)."""
    version, source = resolve_version(engine.memory, dep.engine_version, host)
    given = dep.origin.resolved if dep.origin is not None else None  # fields, not words (Ray Serve LLM)
    args = given if given is not None else engine.cli.resolve_args(command_words(engine, dep, version), version,
                                                                          read=config_reader(dep))
    env = {**host.env, **dep.launch.env}
    knobs = engine.cli.knobs(_knob_words(engine, dep, args), env, version=version,
                             typed=args.values if args.ok else None)
    image = dep.origin.image if dep.origin is not None else ""
    here = not image and not dep.launch.command and _installed_is(engine, host, version)
    knobs = replace(knobs, serving=Serving(image=image, engine_here=here))
    if args.ok:  # the GPUs and replicas the release makes of the line (placement, pools and launches read them)
        dep = engine.cli.as_run(dep, args, version, model=None if isinstance(model, InputError) else model)
        if dep.attention_data_parallel_size != knobs.attention_dp:
            knobs = replace(knobs, attention_dp=dep.attention_data_parallel_size)
    if args.ok:  # a speculative draft, read the way the target is (``memory/draft.py`` counts it)
        knobs = replace(knobs, draft=read_draft(engine.rules.speculative_draft(args, version), dep.base_dir))
    machine = per_node(dep, machine)  # a multi-node artifact: one copy of the machine per node
    served: ModelSpec | ModelMissing = (ModelMissing(model) if isinstance(model, InputError) else
                                        engine.rules.as_served(model, args, layout_of(dep, machine), version,
                                                                env=env))
    return Subject(dep, machine, served, host, engine, version, source, knobs, args)


def read_draft(draft: SpecDraft | None, base_dir: Path | None) -> SpecDraft | None:
    """``draft`` with its model read the way a manifest's ``model:`` is (``model/load.py``: a path against the
    manifest's folder, the model map, the Hugging Face cache, the catalog, the Hub), or why it could not be."""
    if draft is None or not draft.ref:
        return draft
    from pytest_gpulayout.model.load import load_model  # the loader reads files: imported where it is used

    try:
        return replace(draft, model=load_model(draft.ref, base_dir))
    except InputError as err:
        return replace(draft, unread=str(err))


def ib_hosts(gpus: Sequence[Gpu], machine: Machine) -> tuple[tuple[str, bool | None, frozenset[str]], ...] | None:
    """Each host of ``gpus`` with its InfiniBand facts from the machine's node facts (``Layout.ib_hosts``): a GPU
    without a host is on the machine's host, or on its only node; None where a host has no node facts (not
    probed: an NVML-only snapshot), so no rule claims anything about the hosts' devices."""
    only = next(iter(machine.nodes)) if len(machine.nodes) == 1 else None
    hosts = sorted({g.host or machine.host or only or "" for g in gpus})
    if not hosts or not all(h in machine.nodes for h in hosts):
        return None
    return tuple((h, machine.nodes[h].infiniband_sysfs, frozenset(p.device for p in machine.nodes[h].infiniband))
                 for h in hosts)


def layout_of(dep: Deployment, machine: Machine) -> Layout:
    """The deployment's sizes on the GPUs it is placed on (``refusals.Layout``; the machine's GPUs where it
    cannot be placed, so a rule that reads the GPU still has one)."""
    try:
        gpus = [machine.gpu(i) for i in place(dep, machine).gpus]
    except PlacementError:
        gpus = list(machine.gpus)
    layout = Layout.of(dep, gpus)
    layout = replace(layout, ib_hosts=ib_hosts(gpus, machine))
    visible = dep.origin.visible if dep.origin is not None else None  # an artifact's CUDA_VISIBLE_DEVICES
    return replace(layout, devices=len(visible)) if visible else layout
