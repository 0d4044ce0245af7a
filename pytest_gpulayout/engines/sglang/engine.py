"""SGLang: names, flags, defaults by release, and what its startup log reports.

Every rule cites the file of the release's wheel it was read from (``pip download --no-deps
sglang==X``, unzipped). ``gpu_mem`` is what SGLang's ``get_nvgpu_memory_capacity()``
(``srt/utils.py``, ``srt/utils/common.py`` from 0.5.3) returns: the smallest ``memory.total`` in MiB
over every GPU ``nvidia-smi`` lists. ``nvidia-smi`` ignores ``CUDA_VISIBLE_DEVICES``, so it is the
smallest card on the host, not of the replica.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
from pytest_gpulayout.engines.sglang import (
    budget,
    cli,
    config_checks,
    divisibility,
    generation,
    launch,
    parallel,
    served,
    specmem,
)
from pytest_gpulayout.engines.sglang.log import SGLANG_LOG
from pytest_gpulayout.engines.sglang.multimodal import serves_multimodal, vision_tower_factor
from pytest_gpulayout.engines.sglang.pool_flags import POOL_FLAGS, given_int
from pytest_gpulayout.engines.sglang.prefill_graphs import (
    PP_KEEPS_BREAKABLE,
    PREFILL_GRAPHS_DEFAULT_FROM,
    facts_for_lists,
    prefill_graphs_off,
)
from pytest_gpulayout.host import Host
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.knobs import KnobFlag, LaunchKnobs, SpecDraft, read_knobs
from pytest_gpulayout.machine.facts import GIB_MIB
from pytest_gpulayout.memory.draft import DraftMemory
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


#: ``SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK`` ("1"/"true") turns the TP balance error into a warning from
#: 0.4.5.post2 to 0.5.6.post2 (``model_executor/model_runner.py``); from 0.5.7 the switch is
#: ``SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK`` (``environ.py``, default true; false downgrades), and
#: 0.5.7-0.5.16 copy the old variable into the new one *without inverting it* (``_print_deprecated_env``).
BALANCE_SWITCH_OLD = "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK"
BALANCE_SWITCH_NEW = "SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK"


def _tp_table(size: int) -> float:
    """0.4.x step table (``server_args.py __post_init__``) on TP (or TP x PP from 0.4.6.post5)."""
    return 0.79 if size >= 16 else 0.81 if size >= 8 else 0.85 if size >= 4 else 0.87 if size >= 2 else 0.88


@dataclass(frozen=True)
class MemoryDefaults:
    """SGLang's defaults for one host and layout: the static fraction, the chunked-prefill size, the
    decode CUDA-graph batch size (None: not set by the memory rule), and the derivation in words."""

    mem_fraction_static: float
    chunked_prefill_size: int
    cuda_graph_max_bs: int | None
    why: str


#: ``max_prefill_tokens: int = 16384`` (``server_args.py``, 0.4.6 - 0.5.23)
DEFAULT_MAX_PREFILL_TOKENS = 16384


def chunk_and_graph_defaults(version: Version, gpu_mem_mib: float, tp: int) -> tuple[int, int | None]:
    """``(chunked_prefill_size, cuda_graph_max_bs)`` defaults by GPU memory (MiB) and release.

    * <= 0.4.7 (``server_args.py``): below 25,000 MiB 2048 and 8 (TP < 4) / 80; else 8192 (16384 above
      180,000 MiB from 0.4.7) and 160 in 0.4.3, unset from 0.4.6.
    * 0.4.8 - 0.5.2: below 35 GiB 2048, 8/80; below 160 GiB 8192; else 16384.
    * 0.5.3+ (``_handle_gpu_memory_settings``; ``arg_groups/memory_hook.py`` from 0.5.19):
      < 20 GiB 2048, 8; < 35 GiB 2048, 16/80 (0.5.3-0.5.4), 24/80 (0.5.5-0.5.19), 4096, 48/160 (0.5.20+);
      < 60 GiB 4096, 32/160; < 160 GiB 8192, 256/512; else 16384, 512.
    """
    g, small = gpu_mem_mib, tp < 4
    if version < Version("0.4.8"):
        if g < 25_000:
            return 2048, 8 if small else 80
        chunk = 16384 if (version >= Version("0.4.7") and g > 180_000) else 8192
        return chunk, 160 if version < Version("0.4.6") else None
    if version < Version("0.5.3"):
        if g < 35 * GIB_MIB:
            return 2048, 8 if small else 80
        return (8192 if g < 160 * GIB_MIB else 16384), None
    if g < 20 * GIB_MIB:
        return 2048, 8
    if g < 35 * GIB_MIB:
        if version >= Version("0.5.20"):
            return 4096, 48 if small else 160
        return 2048, (16 if version < Version("0.5.5") else 24) if small else 80
    if g < 60 * GIB_MIB:
        return 4096, 32 if small else 160
    if g < 160 * GIB_MIB:
        return 8192, 256 if small else 512
    return 16384, 512


def prefill_graph_sizes(max_tokens: int) -> list[int]:
    """Token counts SGLang captures prefill (piecewise) CUDA graphs for (0.5.8-0.5.23
    ``_generate_piecewise_cuda_graph_tokens`` / ``generate_prefill_cuda_graph_batch_sizes``)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1024 + 1, 64)) + list(range(1280, 4096 + 1, 256))
             + list(range(4608, max_tokens + 1, 512)))
    return [s for s in sizes if s <= max_tokens]


def memory_defaults(version: Version, gpu_mem_mib: float, *, tp: int, pp: int, is_mla: bool = False,
                    enforce_eager: bool = False, chunked_prefill_size: int | None = None,
                    cuda_graph_max_bs: int | None = None, prefill_graphs: bool = True, attention_dp: int = 0,
                    max_prefill_tokens: int | None = None, speculative: str | None = None) -> MemoryDefaults:
    """SGLang's default ``mem_fraction_static`` for ``version``, read release by release:

    * 0.4.3.post4 - 0.4.5.post2: the TP table (>= 16: 0.79, >= 8: 0.81, >= 4: 0.85, >= 2: 0.87, 0.88).
    * 0.4.5.post3 - 0.4.6.post4: the TP table up to 81,920 MiB, else ``(gpu - 13 GiB) / gpu``.
    * 0.4.6.post5 - 0.4.7: the table on TP x PP up to 81,920 MiB, else 0.88; above 96 GiB
      ``min(f + 48 GiB x (1 - f) / gpu, (gpu - 18 GiB) / gpu)``; 0.4.7 above 180,000 MiB: 0.79.
    * 0.4.8 - 0.5.2: ``round((gpu - R) / gpu, 3)``, R = (2.8 + TP x PP / 10) GiB below 35 GiB,
      (9.5 + TP x PP / 2) below 90, (12 + TP x PP / 2) below 160, else 32 GiB.
    * 0.5.3+: R = 512 + 1.5 x max(chunk, 2048) + 2 x max_bs + TP x PP / 8 x 1024 (MiB), plus the
      prefill-graph reserve (8 MiB per captured size, 1.5 GiB for MLA) where those graphs are on
      (default from 0.5.10; off with PP > 1 except on 0.5.15-0.5.18, whose breakable rules have no PP check
      (``PP_KEEPS_BREAKABLE``), and with ``prefill_graphs`` False: SGLang turns them off for this model or
      deployment, ``prefill_graphs_off``), floored at 10 GiB above 60 GiB.
      ``--disable-cuda-graph`` (``enforce_eager``): 0.5.10-0.5.13 keep both graph terms (it does not touch
      ``disable_piecewise_cuda_graph``); 0.5.14 drops the prefill one (``_parse_cuda_graph_config`` locks the
      prefill backend to disabled, ``_handle_gpu_memory_settings`` counts it only when not disabled); from
      0.5.15 the decode term too (``decode_cuda_graph_config.backend != Backend.DISABLED``, 0.5.15
      ``server_args.py``; ``reserve_for_graph_mb`` from 0.5.16).

    The activation term reads ``max(max_prefill_tokens, 2048)`` (default 16384) where chunked prefill is off
    (``chunked_prefill_size <= 0``: ``--chunked-prefill-size -1``; 0.5.3 ``server_args.py`` l.641-644, 0.5.23
    ``arg_groups/memory_hook.py`` l.304-307). Attention DP (``attention_dp`` groups inside TP) adds
    ``max_bs x attn_dp x 3`` MiB and, above a decode batch of 300, ``max_bs x attn_dp x 1.5`` more, whether or not
    the graphs are captured (0.5.3 ``server_args.py`` l.650-658 and 0.5.10 l.1294-1302 on ``enable_dp_attention``
    x ``dp_size``; 0.5.23 ``memory_hook.py reserve_for_graph_mb`` l.370-378 on ``attn_dp_size``); it is added
    before the 10 GiB floor, on the chunk as given (``_handle_data_parallelism`` divides it by the DP size only
    afterwards). 0.4.6 - 0.5.2 have no DP term.

    ``speculative`` (``--speculative-algorithm``) adds the release's speculative term (``specmem.SPEC_RESERVE``: 2,
    4 or 6 GiB, from 0.4.8 to 0.5.13.post1); the vision-tower factor is applied by
    ``SglangEngine.default_memory_fraction``.
    """
    g = float(gpu_mem_mib)
    world = tp * pp
    v = version
    if v < Version("0.4.8"):
        chunk, max_bs = chunk_and_graph_defaults(v, g, tp)
        if v < Version("0.4.5.post3"):
            f = _tp_table(tp)
            why = f"0.4.3-0.4.5 table for TP={tp}"
        elif v < Version("0.4.6.post5"):
            if g <= 81920:
                f, why = _tp_table(tp), f"0.4.5.post3-0.4.6 table for TP={tp}"
            else:
                f, why = (g - 13 * GIB_MIB) / g, f"(gpu - 13 GiB) / gpu for a {g:.0f} MiB card"
        else:
            f = _tp_table(world) if g <= 81920 else 0.88
            why = f"0.4.6.post5-0.4.7 table for TP x PP = {world}"
            if v >= Version("0.4.7") and g > 180_000:
                f, why = 0.79, "0.79 above 180,000 MiB"
            elif g > 96 * GIB_MIB:
                f = min(f + 48 * GIB_MIB * (1 - f) / g, (g - 18 * GIB_MIB) / g)
                why += ", raised for a card above 96 GiB"
        return MemoryDefaults(f, chunked_prefill_size or chunk, cuda_graph_max_bs or max_bs,
                              f"SGLang {v} default mem_fraction_static: {why}")
    chunk, max_bs = chunk_and_graph_defaults(v, g, tp)
    chunk = chunked_prefill_size or chunk
    max_bs = cuda_graph_max_bs or max_bs
    spec = specmem.speculative_reserve_mib(v, speculative)
    spec_why = f", {spec:.0f} of them for {speculative} speculative decoding" if spec else ""
    if v < Version("0.5.3"):
        if g < 35 * GIB_MIB:
            reserved = (2.8 + world / 10) * GIB_MIB
        elif g < 90 * GIB_MIB:
            reserved = (9.5 + world / 2) * GIB_MIB
        elif g < 160 * GIB_MIB:
            reserved = (12 + world / 2) * GIB_MIB
        else:
            reserved = 32 * GIB_MIB
        reserved += spec
        f = round((g - reserved) / g, 3)
        return MemoryDefaults(f, chunk, max_bs, f"SGLang {v} default mem_fraction_static: ({g:.0f} - "
                              f"{reserved:.0f} MiB reserved for TP x PP = {world}{spec_why}) / {g:.0f} MiB")
    assert max_bs is not None
    graphs = not (enforce_eager and v >= Version("0.5.15"))
    activation = max(chunk, 2048) if chunk > 0 else max(max_prefill_tokens or DEFAULT_MAX_PREFILL_TOKENS, 2048)
    reserved = 512 + activation * 1.5 + world / 8 * 1024
    if graphs:
        reserved += max_bs * 2
    if attention_dp > 0:
        reserved += max_bs * attention_dp * 3 + (max_bs * attention_dp * 1.5 if max_bs > 300 else 0)
    pp_on = pp == 1 or PP_KEEPS_BREAKABLE[0] <= v < PP_KEEPS_BREAKABLE[1]
    eager_off = enforce_eager and v >= Version("0.5.14")
    captured = prefill_graphs and not eager_off and v >= PREFILL_GRAPHS_DEFAULT_FROM and pp_on
    if captured:
        reserved += 1.5 * 1024 if is_mla else len(prefill_graph_sizes(chunk)) * 8
    if g > 60 * GIB_MIB:
        reserved = max(reserved, 10 * GIB_MIB)
    reserved += spec  # after the floor (0.5.6 server_args.py L848-853)
    f = round((g - reserved) / g, 3)
    kept = "" if prefill_graphs or v < PREFILL_GRAPHS_DEFAULT_FROM else ", no prefill CUDA graphs for this model"
    if attention_dp > 0:
        kept += f", attention DP {attention_dp} x decode batch {max_bs}"
    if chunk <= 0:
        kept += f", chunked prefill off: {activation:,} prefill tokens"
    kept += spec_why
    return MemoryDefaults(f, chunk, max_bs, f"SGLang {v} default mem_fraction_static: ({g:.0f} - {reserved:.0f} "
                          f"MiB reserved for activations and CUDA graphs{kept}) / {g:.0f} MiB")


def balance_switch(version: Version, env: dict[str, str]) -> str | None:
    """The variable in ``env`` that turns SGLang's TP memory-balance error into a warning on
    ``version`` (None: the check stays an error). Read per release (see ``BALANCE_SWITCH_*``)."""
    def truthy(name: str) -> bool:
        return env.get(name, "").strip().lower() in ("1", "true", "yes")

    def falsy(name: str) -> bool:
        return env.get(name, "").strip().lower() in ("0", "false", "no")

    if version < Version("0.4.5.post2"):
        return None
    if version < Version("0.5.7"):
        return BALANCE_SWITCH_OLD if truthy(BALANCE_SWITCH_OLD) else None
    if falsy(BALANCE_SWITCH_NEW):
        return BALANCE_SWITCH_NEW
    if version < Version("0.5.18") and BALANCE_SWITCH_NEW not in env and falsy(BALANCE_SWITCH_OLD):
        return BALANCE_SWITCH_OLD  # copied across without inversion: "0" disables the check
    return None


#: Flags of ``sglang.launch_server`` the checks model (``srt/server_args.py``).
KNOB_FLAGS: Mapping[str, KnobFlag] = {
    "--chunked-prefill-size": KnobFlag("chunked_prefill_size"),
    "--cuda-graph-max-bs": KnobFlag("cuda_graph_max_bs"),
    "--disable-cuda-graph": KnobFlag("enforce_eager", bool),
    "--max-running-requests": KnobFlag("max_num_seqs"),
    "--page-size": KnobFlag("block_size"),
}
#: 0.5.14 split the decode graphs' batch from the prefill's: --cuda-graph-max-bs became a deprecated spelling of
#: --cuda-graph-max-bs-decode (dest cuda_graph_max_bs_decode) until 0.5.20 removed it (server_args.py, the
#: release tables in flags/releases.json)
CUDA_GRAPH_BS_SPLIT = Version("0.5.14")


def knob_flags(version: Version | None) -> Mapping[str, KnobFlag]:
    """The flags the checks model, as release ``version`` spells them."""
    if version is None or version < CUDA_GRAPH_BS_SPLIT:
        return KNOB_FLAGS
    decode = KnobFlag("cuda_graph_max_bs", dest="cuda_graph_max_bs_decode")
    return {**{k: v for k, v in KNOB_FLAGS.items() if k != "--cuda-graph-max-bs"},
            "--cuda-graph-max-bs-decode": decode, "--cuda-graph-max-bs": decode}
#: Flags the prefill-graph rule, ``serves_multimodal``, the pool flags and attention DP read from
#: ``LaunchKnobs.given``, their whole effect on the checks (the others they read, ``--dcp-size`` ..., stay not
#: modelled).
GIVEN_MODELLED = frozenset({
    "--enable-multimodal", "--disable-piecewise-cuda-graph", "--enforce-piecewise-cuda-graph",
    "--disable-prefill-cuda-graph", "--cuda-graph-backend-prefill",
    # attention DP (``parallel.py``: the world, the attention TP size, the fraction's DP terms), the pool's
    # cap and pages (``pool_flags.py``), the activation term with chunked prefill off (``memory_defaults``)
    "--enable-dp-attention", "--attn-dp-size", "--max-prefill-tokens",
}) | POOL_FLAGS
NEUTRAL_FLAGS = GIVEN_MODELLED | frozenset({
    "--trust-remote-code", "--served-model-name", "--log-level", "--api-key", "--skip-tokenizer-init",
    "--load-format", "--random-seed", "--enable-metrics", "--tokenizer-path", "--chat-template",
    "--disable-radix-cache", "--log-requests", "--show-time-cost", "--download-dir", "--revision",
    "--tool-call-parser", "--reasoning-parser", "--dist-init-addr", "--nnodes", "--node-rank",
})
VALUE_FLAGS = frozenset({
    "--served-model-name", "--log-level", "--api-key", "--load-format", "--random-seed", "--tokenizer-path",
    "--chat-template", "--download-dir", "--revision", "--tool-call-parser", "--reasoning-parser",
    "--dist-init-addr", "--nnodes", "--node-rank", "--dtype", "--quantization", "--max-total-tokens",
    "--max-prefill-tokens", "--speculative-algorithm", "--attention-backend", "--ep-size", "--schedule-policy",
    "--cpu-offload-gb", "--json-model-override-args", "--cuda-graph-backend-prefill", "--dcp-size", "--model-impl",
    "--lora-paths", "--attn-dp-size",
})
ENV_KNOBS: Mapping[str, str] = {"SGLANG_PP_LAYER_PARTITION": "pp_layer_partition"}
#: SGLang 0.5.23 ``environ.py`` variables that choose a kernel or a memory budget and that the checks do
#: not model. SGLANG_ENABLE_POST_CAPTURE_KV_SIZING (``arg_groups/overrides.py``): the KV pool is sized
#: after CUDA-graph capture (hybrid-SWA byte pool, CUDA, no MLA, no DCP ...), not by the reserve this
#: model computes.
ENV_NOT_MODELLED = frozenset({
    "SGLANG_ENABLE_POST_CAPTURE_KV_SIZING", "SGLANG_ENABLE_JIT_DEEPGEMM", "SGLANG_USE_AITER",
    "SGLANG_MOONCAKE_CUSTOM_MEM_POOL", "SGLANG_FORCE_FP8_MARLIN",
})


#: the flags the manifest's keys map to (``sglang/srt/server_args.py``)
FLAGS = Flags(model="--model-path", tensor_parallel_size="--tp-size", pipeline_parallel_size="--pp-size",
              data_parallel_size="--dp-size", max_model_len="--context-length",
              memory_fraction="--mem-fraction-static",
              aliases={"tensor_parallel_size": ("--tp", "--tensor-parallel-size"),
                       "pipeline_parallel_size": ("--pp", "--pipeline-parallel-size"),
                       "data_parallel_size": ("--dp", "--data-parallel-size")},
              nnodes="--nnodes", node_address="--dist-init-addr")


class SglangCommandLine:
    """How its command lines read: the flags the manifest's keys map to, its entry points and images, its
    release tables' parse (``cli.py``), and the knobs a launch's flags set."""

    flags = FLAGS
    entry_commands: tuple[tuple[str, ...], ...] = (("sglang", "serve"),)
    entry_modules: tuple[str, ...] = ("sglang.launch_server", "sglang.srt.server")
    entry_images: tuple[str, ...] = ()  # lmsysorg/sglang's entry point is a shell
    #: ``v0.4.6.post1-cu124``, ``v0.5.0rc2-cu126``; ``latest`` / ``dev`` name none
    release_tags: tuple[tuple[str, str], ...] = (
        ("lmsysorg/sglang", r"v?(\d+\.\d+\.\d+(?:\.\d+)?(?:rc\d+|\.post\d+)?)(?:-[\w.]+)?"),)
    command_line_keys = True
    #: ``--kv-cache-dtype`` choices (0.5.23 ``server_args.py``)
    kv_cache_dtypes: tuple[str, ...] = ("auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2", "mxfp8", "nvfp4")

    #: the release's own parser and spelling rules (``cli.py``)
    parse_args = staticmethod(cli.parse)
    resolve_args = staticmethod(cli.resolve)

    def knobs(self, args: Sequence[str], env: Mapping[str, str], *, version: Version | None = None,
              typed: Mapping[str, object] | None = None) -> LaunchKnobs:
        """What ``args`` and ``env`` change for the checks (``knob_flags(version)``, ``ENV_KNOBS``)."""
        args = self.parse_args(args, version).canonical_args()  # every spelling the release takes, by its name
        # speculative decoding: the default fraction's term and the draft's place in the slack (specmem.py)
        neutral = NEUTRAL_FLAGS | (specmem.SPEC_FLAGS if version is None or version >= specmem.SPEC_RESERVE_SINCE
                                   else frozenset())
        return read_knobs(args, env, flags=knob_flags(version), neutral=neutral, value_flags=VALUE_FLAGS,
                          env_knobs=ENV_KNOBS, env_not_modelled=ENV_NOT_MODELLED, typed=typed)

    def as_run(self, dep: Deployment, args: ResolvedArgs, version: Version, *,
               model: ModelSpec | None = None) -> Deployment:
        """Attention DP inside TP, release by release (``parallel.py``): ``--tp 8 --dp 8 --enable-dp-attention``
        is one replica of 8 GPUs whose attention layers are split over ``tp / dp`` ranks; the sizes, context
        length and fraction a ``--config FILE`` sets (``with_line_keys``) first, and what the release sets for
        a DeepSeek DSA model itself (``served.dsa_layout``)."""
        dep = parallel.as_run(with_line_keys(dep, args, FLAGS), args, version)
        return dep if model is None else served.dsa_layout(dep, model, version)


def dp_reserve_groups(version: Version, knobs: LaunchKnobs) -> int:
    """The DP size the default fraction's attention-DP terms multiply (0: none): the attention-DP groups; 0.5.3 -
    0.5.21 also count ``--enable-dp-attention`` with ``--dp-size 1`` as one, because ``_handle_gpu_memory_settings``
    reads the flag before ``_handle_data_parallelism`` turns it off (0.5.10 ``server_args.py`` l.784 / l.804)."""
    if knobs.attention_dp > 1:
        return knobs.attention_dp
    old_flag = "--enable-dp-attention" in knobs.given and version < parallel.ATTN_DP_SIZE_SINCE
    return 1 if old_flag else 0


class SglangMemory:
    """What the memory model asks of it (``memory.common.MemoryEngine``): stage split, expert layout, the
    default fraction, the per-rank budget."""

    name = "sglang"
    display = "SGLang"
    latest_known = "0.5.23"

    def parse_version(self, text: str) -> Version:
        return parse_version(text)

    pp_partition_env = "SGLANG_PP_LAYER_PARTITION"
    fraction_needs_total = ("GPU total memory is unknown, and SGLang derives mem_fraction_static from it; "
                            "set memory_fraction or use a machine source with memory")
    concurrency_counts_sliding = False

    def stage_split(self, num_layers: int, pp: int, version: Version | None) -> tuple[int, ...]:
        """``python/sglang/srt/distributed/utils.py get_pp_indices``: the last stages take the remainder."""
        return remainder_to_last_stages(num_layers, pp)

    def expert_layout(self, tp: int, dp: int, expert_parallel: bool) -> tuple[int, int]:
        return divisibility.expert_layout(tp, dp, expert_parallel)

    def expert_scale(self, model: ModelSpec) -> float:
        return 1.0

    def load_notes(self, model: ModelSpec) -> list[str]:
        return []

    def default_memory_fraction(self, version: Version, *, gpu_total_mib: int, host_min_total_mib: int,
                                tp: int, pp: int, model: ModelSpec | None,
                                knobs: LaunchKnobs | None = None) -> FractionDefault:
        k = knobs or LaunchKnobs()
        off = prefill_graphs_off(version, model, facts_for_lists(version), pp=pp, given=k.given)

        def sized(prefill_graphs: bool) -> MemoryDefaults:
            return memory_defaults(version, host_min_total_mib, tp=tp, pp=pp, is_mla=bool(model and model.is_mla),
                                   enforce_eager=k.enforce_eager, chunked_prefill_size=k.chunked_prefill_size,
                                   cuda_graph_max_bs=k.cuda_graph_max_bs, prefill_graphs=prefill_graphs,
                                   attention_dp=dp_reserve_groups(version, k),
                                   max_prefill_tokens=given_int(k.given, "--max-prefill-tokens"),
                                   speculative=k.draft.method if k.draft is not None else None)
        d = sized(off is None)
        f, why = d.mem_fraction_static, d.why
        # said only where the graphs would have been counted (not with PP > 1 or --disable-cuda-graph)
        notes = (off,) if off is not None and sized(True).mem_fraction_static != f else ()
        if host_min_total_mib < gpu_total_mib:
            why += " (SGLang sizes by the smallest GPU on the host)"
        text_only = serves_multimodal(version, model, k.given)
        if text_only is not None:
            notes = (*notes, text_only)
        elif (model is not None and model.vision_num_layers and model.vision_hidden_size
              and version >= Version("0.4.10")):
            factor = vision_tower_factor(model)
            f = f * factor
            why += f", x {factor:.3f} for the vision tower"
        return FractionDefault(f, why, notes)

    def rank_budgets(self, r: Replica, *, knobs: LaunchKnobs, host: Host, dp: int, enable_expert_parallel: bool,
                     enforce_eager: bool, max_num_batched_tokens: int | None, max_num_seqs: int | None,
                     gpu_total_mib: int, notes: list[str]) -> RankBudgets:
        out = budget.rank_budgets(r, knobs=knobs, host=host, dp=dp, enable_expert_parallel=enable_expert_parallel,
                                  enforce_eager=enforce_eager, max_num_batched_tokens=max_num_batched_tokens,
                                  max_num_seqs=max_num_seqs, gpu_total_mib=gpu_total_mib, notes=notes)
        # before 0.5.14 the draft worker is built after the pool, from the slack: whether it fits (specmem.py)
        out.cautions.extend(specmem.slack_cautions(self, r, out, knobs=knobs, dp=dp,
                                                   enable_expert_parallel=enable_expert_parallel))
        return out

    def draft_memory(self, model: ModelSpec, *, knobs: LaunchKnobs, version: Version, tp: int,
                     ranges: tuple[range, ...], kv_cache_dtype: str, dp: int,
                     enable_expert_parallel: bool) -> DraftMemory:
        """The draft worker in the slack (to 0.5.13) or in the pool (0.5.14+) (``specmem.py``)."""
        return specmem.draft_memory(self, model, knobs=knobs, version=version, tp=tp, ranges=ranges,
                                    kv_cache_dtype=kv_cache_dtype, dp=dp, enable_expert_parallel=enable_expert_parallel)


class SglangRules:
    """What the checks ask of it: the checks it answers differently, its refusals in its words, its shard,
    generation and config-time rules, the model as it serves it."""

    check_overrides: Mapping[str, Override] = MappingProxyType({})  # the suite's checks as they are
    too_long_text = "User-specified context_length ... is greater than the derived context_length"
    short_pool = (False, "KV pool holds ... fewer than --context-length")
    tenant_note = "SGLang sizes every rank by the least free GPU of the world, so it shrinks all of them."
    start_rules = frozenset({"tp_balance"})
    long_context_env = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"

    def no_room_advice(self, p: PoolPrediction, gpu_index: int) -> str | None:
        return None  # nothing besides the weights and the pool sits inside mem_fraction_static

    def shard_rules(self) -> ShardRules:
        return divisibility.RULES

    def shard_problems(self, model: ModelSpec, layout: ShardLayout) -> tuple[list[WidthProblem], list[str]]:
        """Quantized shares and whole experts per EP rank, by release (``divisibility.py``)."""
        return divisibility.shard_problems(model, layout)

    def mig_note(self) -> str:
        return ""

    def ray_cluster(self) -> RayCluster | None:
        """SGLang spans nodes with ``--nnodes`` / ``--dist-init-addr``, not Ray: nothing checked here."""
        return None

    # -- the GPU generation and the release (engines/sglang/generation.py) ----------------------------
    def generation_refusals(self, s: Subject) -> GenerationVerdict:
        return generation.generation_refusals(s)

    def config_check(self, s: Subject) -> Judged | None:
        return config_checks.config_check(s.args, s.model, layout_of(s.dep, s.machine), s.version, env=s.knobs.env,
            serving=s.knobs.serving, packages=node_packages({k: n.packages for k, n in s.machine.nodes.items()}))

    def as_served(self, model: ModelSpec, args: ResolvedArgs, layout: Layout, version: Version,
                  env: Mapping[str, str] | None = None) -> ModelSpec:
        """The KV cache dtype SGLang picks for the model on these GPUs (``served.served_model``: DeepSeek DSA); its
        weight dtype resolution is not extracted (the checkpoint's is assumed)."""
        return served.served_model(model, args, layout, version)

    def speculative_draft(self, args: ResolvedArgs, version: Version) -> SpecDraft | None:
        """``--speculative-algorithm`` and its draft (``specmem.py``)."""
        return specmem.speculative_draft(args, version)


class SglangPlanning:
    """What ``gpulayout plan`` asks of it."""

    data_parallel = True

    def plan_fraction_name(self) -> str:
        return "SGLang's default mem_fraction_static"

    def plan_fraction_keeps_back(self) -> str:
        return "less kept back for activations and CUDA graphs"

    def plan_balance_margin(self) -> str | None:
        return "headroom_gib"

    def plan_dp_shares_moe_experts(self) -> bool:
        return False

    def has_own_planner(self) -> bool:
        return False


class SglangLaunch:
    """How the startup check and ``gpulayout measure`` start and stop it (``launch.served.Served``)."""

    display = "SGLang"

    def parse_version(self, text: str) -> Version:
        return parse_version(text)

    server_module = "sglang.launch_server"
    metrics_args: tuple[str, ...] = ("--enable-metrics",)

    def default_command(self, version: Version | None, python: str) -> list[str]:
        return [python, "-m", self.server_module]

    def expected_reports(self, version: Version | None, *, tp: int, pp: int, dp: int) -> tuple[int, int]:
        """SGLang logs one pool line per rank and one summary per replica."""
        return dp, tp * pp

    # -- the launch (engines/sglang/launch.py) -----------------------------------------------------
    def launch_argv(self, dep: Deployment, model_path: str, port: int, version: Version | None) -> list[str]:
        given = frozenset(a.split("=", 1)[0] for a in cli.parse(dep.launch.args, version).canonical_args())
        return launch.launch_argv(FLAGS, self.default_command(version, sys.executable), dep, model_path, port,
                                  data_parallel_size=parallel.written_dp(dep, given))

    def node_args(self, *, nnodes: int, rank: int, dist_init_addr: str) -> list[str]:
        return launch.node_args(nnodes=nnodes, rank=rank, dist_init_addr=dist_init_addr)

    def across_hosts(self) -> AcrossHosts | None:
        return "process-per-node"

    def cuda_indices_only(self) -> bool:
        return False

    def log_watcher(self, expected_engines: int, ranks_per_engine: int) -> Watcher:
        return launch.log_watcher(expected_engines, ranks_per_engine)

    def own_launch(self) -> OwnLaunch | None:
        return None

    #: Ctrl-C, as in the terminal it was started from (not measured against SIGTERM here)
    stop_signal: int = signal.SIGINT


class SglangEngine:
    """SGLang (``sglang``)."""

    name = "sglang"
    display = "SGLang"
    distributions: tuple[str, ...] = ("sglang",)
    latest_known = "0.5.23"
    env_vars: tuple[str, ...] = (SglangRules.long_context_env, BALANCE_SWITCH_NEW, BALANCE_SWITCH_OLD,
                                 SglangMemory.pp_partition_env)

    def parse_version(self, text: str) -> Version:
        return parse_version(text)

    # -- its roles ------------------------------------------------------------------------------------
    cli = SglangCommandLine()
    memory = SglangMemory()
    rules = SglangRules()
    planner = SglangPlanning()
    launch = SglangLaunch()
    logs: LogGrammar | None = SGLANG_LOG


SGLANG = SglangEngine()
