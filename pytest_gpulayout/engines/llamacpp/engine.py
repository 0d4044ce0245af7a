"""llama.cpp as an ``Engine``: its names, flags, defaults and checks, from the modules beside this one."""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from packaging.version import Version

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engine import Flags, FractionDefault, GenerationVerdict, RayCluster, ShardLayout
from pytest_gpulayout.engines.llamacpp import cli, launch
from pytest_gpulayout.engines.llamacpp.checks import OVERRIDES
from pytest_gpulayout.engines.llamacpp.flags import (
    ENGINE,
    NAME,
    ROW_SPLIT_GONE_BUILD,
    build_number,
)
from pytest_gpulayout.engines.llamacpp.log import StartupLogWatcher
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.host import Host
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.knobs import LaunchKnobs, SpecDraft
from pytest_gpulayout.memory.common import MemoryUnknown
from pytest_gpulayout.memory.draft import NO_DRAFT, DraftMemory
from pytest_gpulayout.memory.replica import RankBudgets, Replica
from pytest_gpulayout.memory.stages import remainder_to_last_stages
from pytest_gpulayout.refusals import Judged, Layout
from pytest_gpulayout.shards import ShardRules, WidthProblem

if TYPE_CHECKING:
    from pytest_gpulayout.engine import Subject
    from pytest_gpulayout.launch.launcher import Watcher
    from pytest_gpulayout.launch.logparse import LogGrammar
    from pytest_gpulayout.launch.served import AcrossHosts, OwnLaunch
    from pytest_gpulayout.memory.pool import PoolPrediction
    from pytest_gpulayout.model.spec import ModelSpec


class LlamaCppCommandLine:
    """How its command lines read: the flags the manifest's keys map to, its entry points and images, its
    release tables' parse (``cli.py``), and the knobs a launch's flags set."""

    flags = Flags(model="-m", tensor_parallel_size="", pipeline_parallel_size="", data_parallel_size="",
                  max_model_len="", memory_fraction="", kv_cache_dtype="")  # own keys: manifest/llamacpp.py
    entry_commands: tuple[tuple[str, ...], ...] = (("llama-server",), ("llama.cpp-server",))
    entry_modules: tuple[str, ...] = ()
    entry_images: tuple[str, ...] = ("ghcr.io/ggml-org/llama.cpp:server", "ghcr.io/ggerganov/llama.cpp:server")
    #: ``server-b4719``, ``server-cuda-b5000``, ``full-cuda-b5000`` (``server`` / ``server-cuda`` name none)
    release_tags: tuple[tuple[str, str], ...] = (("ghcr.io/ggml-org/llama.cpp", r"(?:[a-z0-9]+-)*(b\d+)"),
                                                 ("ghcr.io/ggerganov/llama.cpp", r"(?:[a-z0-9]+-)*(b\d+)"))
    #: its flags are not yet read back into the manifest's llamacpp: keys from a command line
    command_line_keys = False
    kv_cache_dtypes: tuple[str, ...] = ()  # its cache types are cache_type_k / cache_type_v

    #: the release's own parser and spelling rules (``cli.py``)
    parse_args = staticmethod(cli.parse)
    resolve_args = staticmethod(cli.resolve)

    def knobs(self, args: Sequence[str], env: Mapping[str, str], *, version: Version | None = None,
              typed: Mapping[str, object] | None = None) -> LaunchKnobs:
        return LaunchKnobs(env=MappingProxyType(dict(env)))

    def as_run(self, dep: Deployment, args: ResolvedArgs, version: Version, *,
               model: ModelSpec | None = None) -> Deployment:
        return dep  # its line runs the layout it says


class LlamaCppMemory:
    """What the memory model asks of it (``memory.common.MemoryEngine``): stage split, expert layout, the
    default fraction, the per-rank budget."""

    name = ENGINE
    display = NAME
    latest_known = f"b{ROW_SPLIT_GONE_BUILD}"     # the build whose source the rules were read from

    def parse_version(self, text: str) -> Version:
        """llama.cpp's releases are build numbers (``b11434``), compared as ``Version("11434")``."""
        build = build_number(text)
        if build is None:
            raise InputError(f"not a llama.cpp build: {text!r} (e.g. b11434)", key="engine_version")
        return Version(str(build))

    pp_partition_env = ""
    fraction_needs_total = ""
    concurrency_counts_sliding = False

    def stage_split(self, num_layers: int, pp: int, version: Version | None) -> tuple[int, ...]:
        """llama.cpp has no pipeline stages of fixed size: its layers go to GPUs by memory
        (``engines/llamacpp/memory.py``); an even split is what a TP/PP question about it can mean."""
        return remainder_to_last_stages(num_layers, pp)

    def expert_layout(self, tp: int, dp: int, expert_parallel: bool) -> tuple[int, int]:
        """One process holds every expert whole (its layer split is by memory, not TP ranks)."""
        return 1, 1

    def expert_scale(self, model: ModelSpec) -> float:
        return 1.0

    def load_notes(self, model: ModelSpec) -> list[str]:
        return []

    def default_memory_fraction(self, version: Version, *, gpu_total_mib: int, host_min_total_mib: int,
                                tp: int, pp: int, model: ModelSpec | None,
                                knobs: LaunchKnobs | None = None) -> FractionDefault:
        return FractionDefault(1.0, f"{NAME} has no memory fraction: it allocates what the layers need")

    def rank_budgets(self, r: Replica, *, knobs: LaunchKnobs, host: Host, dp: int, enable_expert_parallel: bool,
                     enforce_eager: bool, max_num_batched_tokens: int | None, max_num_seqs: int | None,
                     gpu_total_mib: int, notes: list[str]) -> RankBudgets:
        raise MemoryUnknown("llama.cpp's pool is sized by its own checks from the GGUF (engines/llamacpp/memory.py)")

    def draft_memory(self, model: ModelSpec, *, knobs: LaunchKnobs, version: Version, tp: int,
                     ranges: tuple[range, ...], kv_cache_dtype: str, dp: int,
                     enable_expert_parallel: bool) -> DraftMemory:
        """No speculative draft is modelled for llama.cpp."""
        return NO_DRAFT


class LlamaCppRules:
    """What the checks ask of it: the checks it answers differently, its refusals in its words, its shard,
    generation and config-time rules, the model as it serves it."""

    #: layers split by memory, no TP groups: answers of its own under the same check names
    check_overrides = OVERRIDES
    too_long_text = ""  # its own checks (engines/llamacpp/checks.py) judge n_ctx
    short_pool = (False, "")  # its own checks (engines/llamacpp/checks.py) judge n_ctx
    tenant_note = ""
    start_rules: frozenset[str] = frozenset()
    long_context_env = ""

    def no_room_advice(self, p: PoolPrediction, gpu_index: int) -> str | None:
        return None

    def shard_rules(self) -> ShardRules:
        return ShardRules(ep_spans="", dp_splits_experts=False)

    def shard_problems(self, model: ModelSpec, layout: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
        """No TP shares: its own checks (``checks.py``) judge the layer split."""
        return [], []

    def mig_note(self) -> str:
        return ""

    def ray_cluster(self) -> RayCluster | None:
        return None

    # -- the GPU generation and the release -------------------------------------------------------------
    def generation_refusals(self, s: Subject) -> GenerationVerdict:
        """Not modelled: ggml's CUDA kernels build for every generation from Maxwell on; its own checks
        (``checks``) do not run ``heads``."""
        return GenerationVerdict(notes=("llama.cpp's compute-capability limits are not modelled",))

    def config_check(self, s: Subject) -> Judged | None:
        return None  # its checks of the line's values are its own (checks.py)

    def as_served(self, model: ModelSpec, args: ResolvedArgs, layout: Layout, version: Version,
                  env: Mapping[str, str] | None = None) -> ModelSpec:
        return model  # the GGUF's own tensor types

    def speculative_draft(self, args: ResolvedArgs, version: Version) -> SpecDraft | None:
        """Its speculative decoding is not modelled."""
        return None


class LlamaCppPlanning:
    """What ``gpulayout plan`` asks of it."""

    data_parallel = False  # one replica per server (manifest.py refuses data_parallel_size)

    def plan_fraction_name(self) -> str:
        return "vLLM's default gpu_memory_utilization"

    def plan_fraction_keeps_back(self) -> str:
        return "less headroom for CUDA graphs and other processes"

    def plan_balance_margin(self) -> str | None:
        return None

    def plan_dp_shares_moe_experts(self) -> bool:
        return False

    def has_own_planner(self) -> bool:
        return True


class LlamaCppLaunch:
    """How the startup check and ``gpulayout measure`` start and stop it (``launch.served.Served``)."""

    display = NAME

    def parse_version(self, text: str) -> Version:
        """llama.cpp's releases are build numbers (``b11434``), compared as ``Version("11434")``."""
        build = build_number(text)
        if build is None:
            raise InputError(f"not a llama.cpp build: {text!r} (e.g. b11434)", key="engine_version")
        return Version(str(build))

    server_module = ""
    metrics_args: tuple[str, ...] = ("--metrics",)

    def default_command(self, version: Version | None, python: str) -> list[str]:
        return ["llama-server"]

    def expected_reports(self, version: Version | None, *, tp: int, pp: int, dp: int) -> tuple[int, int]:
        return 1, 1

    # -- the launch: its own (engines/llamacpp/launch.py) --------------------------------------------
    def launch_argv(self, dep: Deployment, model_path: str, port: int, version: Version | None) -> list[str]:
        return launch.llamacpp_argv(dep, port)

    def node_args(self, *, nnodes: int, rank: int, dist_init_addr: str) -> list[str]:
        return []

    def across_hosts(self) -> AcrossHosts | None:
        return None  # one process: its RPC backend is not launched by the check

    def cuda_indices_only(self) -> bool:
        return False

    def log_watcher(self, expected_engines: int, ranks_per_engine: int) -> Watcher:
        return StartupLogWatcher()

    def own_launch(self) -> OwnLaunch | None:
        """One process, its own log lines, a verdict by KV buffer against the layer split."""
        return launch.launch_llamacpp

    #: ``tools/server/server.cpp`` handles SIGINT and SIGTERM alike; SIGTERM is what its launch sends
    stop_signal: int = signal.SIGTERM


class LlamaCppEngine:
    """llama.cpp's ``llama-server`` behind the common ``Engine`` protocol.

    Its layouts are split modes over one process, not TP x PP x DP ranks: the manifest's llama.cpp
    keys (``manifest/llamacpp.py``) carry them, its rules answer under the shared check names
    (``rules/llamacpp.py``) and its launch has its own argv and log lines (``launch/llamacpp.py``).
    What the protocol asks about memory fractions and ranks has the fixed answers below.
    """

    name = ENGINE
    display = NAME
    distributions: tuple[str, ...] = ()          # a binary, not a Python package
    latest_known = f"b{ROW_SPLIT_GONE_BUILD}"     # the build whose source the rules were read from
    env_vars: tuple[str, ...] = ()  # none of its variables changes a verdict

    def parse_version(self, text: str) -> Version:
        """llama.cpp's releases are build numbers (``b11434``), compared as ``Version("11434")``."""
        build = build_number(text)
        if build is None:
            raise InputError(f"not a llama.cpp build: {text!r} (e.g. b11434)", key="engine_version")
        return Version(str(build))

    # -- its roles ------------------------------------------------------------------------------------
    cli = LlamaCppCommandLine()
    memory = LlamaCppMemory()
    rules = LlamaCppRules()
    planner = LlamaCppPlanning()
    launch = LlamaCppLaunch()
    logs: LogGrammar | None = None  # its own watcher (engines/llamacpp/log.py)


LLAMACPP = LlamaCppEngine()
