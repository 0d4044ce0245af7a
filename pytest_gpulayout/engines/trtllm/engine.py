"""TensorRT-LLM: names, flags, defaults by release, and what its startup log reports.

Every rule cites the file of NVIDIA/TensorRT-LLM it was read from (``defaults.py`` names the commits:
1.2.0rc2 for ``mapping.py``, ``_torch/pyexecutor/_util.py`` and ``resource_manager.py``). The wheel is not
on the public index and there is no CPU build, so nothing here was run against a real TensorRT-LLM: the
startup check is tested with the fake engine replaying public TensorRT-LLM logs.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engine import (
    Flags,
    FractionDefault,
    GenerationVerdict,
    RayCluster,
    ShardLayout,
    parse_version,
)
from pytest_gpulayout.engines.trtllm import budget, cli, divisibility, flags, launch
from pytest_gpulayout.engines.trtllm.checks import OVERRIDES
from pytest_gpulayout.engines.trtllm.defaults import LATEST_KNOWN, SEQ_LEN_LOWERED_TEXT, default_fraction
from pytest_gpulayout.host import Host
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.knobs import LaunchKnobs, SpecDraft
from pytest_gpulayout.memory.draft import NO_DRAFT, DraftMemory
from pytest_gpulayout.memory.replica import RankBudgets, Replica
from pytest_gpulayout.refusals import Judged, Layout
from pytest_gpulayout.shards import ShardRules, WidthProblem

if TYPE_CHECKING:
    from pytest_gpulayout.engine import Subject
    from pytest_gpulayout.inputs.engine_args import ParsedArgs
    from pytest_gpulayout.launch.launcher import Watcher
    from pytest_gpulayout.launch.logparse import LogGrammar
    from pytest_gpulayout.launch.served import AcrossHosts, OwnLaunch
    from pytest_gpulayout.memory.pool import PoolPrediction
    from pytest_gpulayout.model.spec import ModelSpec


def first_stages_take_remainder(num_layers: int, pp: int) -> tuple[int, ...]:
    """``torch.tensor_split(torch.arange(num_layers), pp)``: the **first** ``num_layers % pp`` stages get
    one more layer (``tensorrt_llm/mapping.py MappingBase.pp_layers``)."""
    base, rem = divmod(num_layers, pp)
    return tuple(base + (1 if i < rem else 0) for i in range(pp))


class TrtLlmCommandLine:
    """How its command lines read: the flags the manifest's keys map to, its entry points and images, its
    release tables' parse (``cli.py``), and the knobs a launch's flags set."""

    flags = Flags(model="", tensor_parallel_size="--tp_size", pipeline_parallel_size="--pp_size",
                  data_parallel_size="", max_model_len="--max_seq_len",
                  memory_fraction="--kv_cache_free_gpu_memory_fraction", kv_cache_dtype="",
                  aliases={"tensor_parallel_size": ("--tensor_parallel_size",),
                           "pipeline_parallel_size": ("--pipeline_parallel_size",),
                           "memory_fraction": ("--free_gpu_memory_fraction",)})
    #: ``trtllm-serve serve MODEL`` (``serve.py``'s click group), and ``trtllm-serve MODEL``: its ``DefaultGroup``
    #: resolves a first word that is none of its subcommands as ``serve``; ``python -m tensorrt_llm.commands.serve``
    entry_commands: tuple[tuple[str, ...], ...] = (("trtllm-serve", "serve"), ("trtllm-serve",))
    entry_modules: tuple[str, ...] = ("tensorrt_llm.commands.serve",)
    #: none: NVIDIA's TensorRT-LLM release images start a shell, so a container's bare arguments are not
    #: trtllm-serve's
    entry_images: tuple[str, ...] = ()
    #: NGC's release images: ``nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc2``
    release_tags: tuple[tuple[str, str], ...] = (("nvcr.io/nvidia/tensorrt-llm/release",
                                                  r"(\d+\.\d+\.\d+(?:rc\d+)?(?:\.post\d+)?)(?:-[\w.]+)?"),)
    #: its command lines are read back into deployments (artifacts/build.py)
    command_line_keys = True
    #: ``llm_args.py`` ``KvCacheConfig.dtype`` ("auto": the checkpoint's, e.g. its FP8 KV scheme)
    kv_cache_dtypes: tuple[str, ...] = ("auto", "fp8")

    def parse_args(self, args: Sequence[str], version: Version | None = None) -> ParsedArgs:
        """click's spelling rules: exact spellings only (``cli.py``)."""
        return cli.parse(args, version)

    def resolve_args(self, args: Sequence[str], version: Version | None, *,
                     read: Callable[[str], str] | None = None) -> ResolvedArgs:
        """``read`` is unused: the YAML of ``--config`` / ``--extra_llm_api_options`` is read by ``knobs``."""
        return cli.resolve(args, version)

    def knobs(self, args: Sequence[str], env: Mapping[str, str], *, version: Version | None = None,
              typed: Mapping[str, object] | None = None) -> LaunchKnobs:
        """``--max_num_tokens``, ``--max_batch_size`` and the ``--extra_llm_api_options`` YAML on top."""
        return flags.knobs(args, env)

    def as_run(self, dep: Deployment, args: ResolvedArgs, version: Version, *,
               model: ModelSpec | None = None) -> Deployment:
        return dep  # its line runs the layout it says


class TrtLlmMemory:
    """What the memory model asks of it (``memory.common.MemoryEngine``): stage split, expert layout, the
    default fraction, the per-rank budget."""

    name = "trtllm"
    display = "TensorRT-LLM"
    latest_known = LATEST_KNOWN

    def parse_version(self, text: str) -> Version:
        return parse_version(text)

    #: TensorRT-LLM splits layers with ``torch.tensor_split`` (``mapping.py pp_layers``); no variable
    #: overriding it was found in the files read ("": none)
    pp_partition_env = ""
    fraction_needs_total = ""
    concurrency_counts_sliding = False

    def stage_split(self, num_layers: int, pp: int, version: Version | None) -> tuple[int, ...]:
        return first_stages_take_remainder(num_layers, pp)

    def expert_layout(self, tp: int, dp: int, expert_parallel: bool) -> tuple[int, int]:
        return divisibility.expert_layout(tp, dp, expert_parallel)

    def expert_scale(self, model: ModelSpec) -> float:
        return 1.0

    def load_notes(self, model: ModelSpec) -> list[str]:
        return []

    def default_memory_fraction(self, version: Version, *, gpu_total_mib: int, host_min_total_mib: int,
                                tp: int, pp: int, model: ModelSpec | None,
                                knobs: LaunchKnobs | None = None) -> FractionDefault:
        return FractionDefault(default_fraction(version),
                               f"TensorRT-LLM {version} default kv_cache_free_gpu_memory_fraction 0.9 "
                               f"(of the memory left after its profiling peak)")

    def rank_budgets(self, r: Replica, *, knobs: LaunchKnobs, host: Host, dp: int, enable_expert_parallel: bool,
                     enforce_eager: bool, max_num_batched_tokens: int | None, max_num_seqs: int | None,
                     gpu_total_mib: int, notes: list[str]) -> RankBudgets:
        return budget.rank_budgets(r, knobs=knobs, host=host, dp=dp, enable_expert_parallel=enable_expert_parallel,
                                   enforce_eager=enforce_eager, max_num_batched_tokens=max_num_batched_tokens,
                                   max_num_seqs=max_num_seqs, gpu_total_mib=gpu_total_mib, notes=notes)

    def draft_memory(self, model: ModelSpec, *, knobs: LaunchKnobs, version: Version, tp: int,
                     ranges: tuple[range, ...], kv_cache_dtype: str, dp: int,
                     enable_expert_parallel: bool) -> DraftMemory:
        """No speculative draft is modelled for TensorRT-LLM."""
        return NO_DRAFT


class TrtLlmRules:
    """What the checks ask of it: the checks it answers differently, its refusals in its words, its shard,
    generation and config-time rules, the model as it serves it."""

    check_overrides = OVERRIDES
    #: not read: what TensorRT-LLM does with a max_seq_len beyond the model's positions
    too_long_text = "(not modelled)"
    #: ``resource_manager.py _validate_and_adjust_attention_windows``: it lowers max_seq_len and starts
    short_pool = (False, SEQ_LEN_LOWERED_TEXT.format(n="N"))
    tenant_note = ("TensorRT-LLM's profiling peak counts every process on the GPU (torch.cuda.mem_get_info), "
                   "and the smallest rank sets every rank's pool.")
    start_rules: frozenset[str] = frozenset()
    #: no variable that lets max_seq_len pass the model's maximum was found in the files read ("": none;
    #: ``checks.check_trtllm_kv_pool`` says the case is not modelled instead of naming one)
    long_context_env = ""

    def no_room_advice(self, p: PoolPrediction, gpu_index: int) -> str | None:
        if p.activation_reserve_gib < 1.0:
            return None
        return (f"the weights ({p.weights_gib_per_rank:.2f} GiB per GPU) and TensorRT-LLM's profiling peak "
                f"({p.activation_reserve_gib:.2f} GiB: {p.activation_reserve_why}) leave no room for a KV cache on "
                f"GPU{gpu_index}. Lower --max_num_tokens, add tensor/pipeline parallel ranks, or quantize.")

    def shard_rules(self) -> ShardRules:
        return divisibility.RULES

    def shard_problems(self, model: ModelSpec, layout: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
        return divisibility.shard_problems(model, layout)

    def mig_note(self) -> str:
        return ""

    def ray_cluster(self) -> RayCluster | None:
        """trtllm-serve spans nodes with MPI (``mpirun`` / ``trtllm-llmapi-launch``), not Ray."""
        return None

    # -- the GPU generation and the release ----------------------------------------------------------
    def generation_refusals(self, s: Subject) -> GenerationVerdict:
        """Not modelled: no wheel of TensorRT-LLM was read for its compute-capability limits."""
        return GenerationVerdict(notes=("TensorRT-LLM's compute-capability limits are not modelled",))

    def config_check(self, s: Subject) -> Judged | None:
        return None  # its Mapping refusals are amended into heads (checks.py)

    def as_served(self, model: ModelSpec, args: ResolvedArgs, layout: Layout, version: Version,
                  env: Mapping[str, str] | None = None) -> ModelSpec:
        return model

    def speculative_draft(self, args: ResolvedArgs, version: Version) -> SpecDraft | None:
        """Its speculative decoding is not modelled."""
        return None


class TrtLlmPlanning:
    """What ``gpulayout plan`` asks of it."""

    #: ``trtllm-serve`` runs one executor for its TP x PP (x CP) world: no data-parallel replicas
    #: (``launch.py`` refuses data_parallel_size; the planner lists DP layouts as independent engines)
    data_parallel = False

    def plan_fraction_name(self) -> str:
        return "TensorRT-LLM's default kv_cache_free_gpu_memory_fraction"

    def plan_fraction_keeps_back(self) -> str:
        return "less headroom for CUDA graphs, which are captured after the pool"

    def plan_balance_margin(self) -> str | None:
        return None

    def plan_dp_shares_moe_experts(self) -> bool:
        return False

    def has_own_planner(self) -> bool:
        return False


class TrtLlmLaunch:
    """How the startup check and ``gpulayout measure`` start and stop it (``launch.served.Served``)."""

    display = "TensorRT-LLM"

    def parse_version(self, text: str) -> Version:
        return parse_version(text)

    server_module = "tensorrt_llm.commands.serve"
    #: none: ``/metrics`` of trtllm-serve is its JSON iteration log, not Prometheus text (not modelled by
    #: ``gpulayout measure``)
    metrics_args: tuple[str, ...] = ()

    def default_command(self, version: Version | None, python: str) -> list[str]:
        """``trtllm-serve serve`` beside ``python`` (the same environment), else on PATH."""
        beside = Path(python).parent / "trtllm-serve"
        return [str(beside) if beside.is_file() else "trtllm-serve", "serve"]

    def expected_reports(self, version: Version | None, *, tp: int, pp: int, dp: int) -> tuple[int, int]:
        """One executor for the TP x PP world; its ranks agree on one pool (MIN over ranks)."""
        return 1, tp * pp

    # -- the launch (engines/trtllm/launch.py) -----------------------------------------------------
    def launch_argv(self, dep: Deployment, model_path: str, port: int, version: Version | None) -> list[str]:
        return launch.launch_argv(self.default_command(version, sys.executable), dep, model_path, port)

    def node_args(self, *, nnodes: int, rank: int, dist_init_addr: str) -> list[str]:
        return []

    def across_hosts(self) -> AcrossHosts | None:
        return None

    def cuda_indices_only(self) -> bool:
        return False

    def log_watcher(self, expected_engines: int, ranks_per_engine: int) -> Watcher:
        return launch.log_watcher(expected_engines, ranks_per_engine)

    def own_launch(self) -> OwnLaunch | None:
        return launch.make_own_launch(self)

    #: ``trtllm-serve`` runs uvicorn, which shuts down on SIGTERM as on SIGINT (``commands/serve.py``);
    #: not measured here (no CPU build)
    stop_signal: int = signal.SIGTERM


class TrtLlmEngine:
    """TensorRT-LLM (``tensorrt_llm``), served by ``trtllm-serve serve`` on its PyTorch backend."""

    name = "trtllm"
    display = "TensorRT-LLM"
    distributions: tuple[str, ...] = ("tensorrt_llm", "tensorrt-llm")
    latest_known = LATEST_KNOWN
    #: none of its variables read here changes a verdict
    env_vars: tuple[str, ...] = ()

    def parse_version(self, text: str) -> Version:
        return parse_version(text)

    # -- its roles ------------------------------------------------------------------------------------
    cli = TrtLlmCommandLine()
    memory = TrtLlmMemory()
    rules = TrtLlmRules()
    planner = TrtLlmPlanning()
    launch = TrtLlmLaunch()
    logs: LogGrammar | None = None  # its own watcher (log.py): its pool lines are its own


TRTLLM = TrtLlmEngine()
