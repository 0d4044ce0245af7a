"""vLLM's config-time refusals of compilation options, executor backends and dual-batch overlap
(``engines/vllm/rules_post.py``): each command line read by the release's own parser, judged in the release's
words at its line (read in the unpacked wheels: ``vllm/config.py`` before 0.10.1, ``vllm/config/compilation.py``,
``vllm/config/parallel.py``, ``vllm/config/vllm.py``). Each refusal has its accepted neighbour: the same line
without the conflict, or a release that does not hold the check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from packaging.version import Version
from vllm_line_cases import LineCase, case_id, judge, layout, model_of

from pytest_gpulayout.cli import main
from pytest_gpulayout.engines.vllm import rules_post
from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check
from pytest_gpulayout.model.load import load_model

Case = LineCase
M8 = "Qwen/Qwen3-8B"   # 0.8.x require the model positional


@dataclass(frozen=True)
class EnvCase(LineCase):
    """A line judged with the deployment's environment (``config_check(..., env=...)``)."""

    env: tuple[tuple[str, str], ...] = ()
    model_dir: str = ""              # a local model of tests/data/models, read instead of ``model``
    #: the model's architecture and config.json replaced (a checkpoint no fixture holds)
    as_checkpoint: tuple[str, str] = ()


def judge_with_env(case: EnvCase) -> None:
    version = Version(case.version)
    args = resolve(case.line.split(), version)
    assert args.ok, args.errors
    model = load_model(str(MODELS / case.model_dir)) if case.model_dir else model_of(case.model)
    if case.as_checkpoint:
        model = replace(model, architectures=(case.as_checkpoint[0],), config_json=case.as_checkpoint[1])
    judged = config_check(args, model, case.layout, version, env=dict(case.env))
    mine = [r for r in judged.refusals if r.rule == case.rule]
    if case.refused is None:
        assert not mine, [r.text("vLLM") for r in mine]
        return
    assert mine, (judged.refusals, judged.not_judged)
    assert case.refused in mine[0].message and mine[0].exception == case.exception
    assert case.source is None or mine[0].source == case.source


DUAL_CHUNK = (("VLLM_ATTENTION_BACKEND", "DUAL_CHUNK_FLASH_ATTN"),)
MODELS = Path(__file__).parent.parent / "data" / "models"
DSA = "deepseek-v3.2"                # index_topk in its config: a DSA model
HISPARSE = '-ac {"hisparse_config":{}}'
LLAVA = "llava-1.5-7b-hf"
ELASTIC = "--enable-elastic-ep --enable-eplb --enable-expert-parallel"
LLAMA4 = "llama-4-scout-17b-16e-instruct"   # attention_chunk_size 8192: chunked local attention
FORK = (("VLLM_WORKER_MULTIPROC_METHOD", "fork"),)
ENGRAM = ("DeepseekV41ForCausalLM", json.dumps({"engram_layer_ids": [3, 7]}))

CASES = [
    # config.py:3145-3149 (0.8.0, model_post_init); config/compilation.py:971 (0.20.0), :1015-1035 (0.33.0)
    Case("vllm.compilation.custom_ops", "0.8.0", f"{M8} --compilation-config {{'custom_ops':['none','all']}}",
         layout(), refused="Can only specify 'none' or 'all'", source="vllm/config.py:3149",
         exception="AssertionError"),
    Case("vllm.compilation.custom_ops", "0.8.0", f"{M8} --compilation-config {{'custom_ops':['none','+rms_norm']}}",
         layout()),
    Case("vllm.compilation.custom_ops", "0.20.0", '-cc {"custom_ops":["none","rms_norm"]}', layout(),
         refused="Invalid syntax 'rms_norm' for custom op, must be 'all', 'none', '+op' or '-op'",
         source="vllm/config/compilation.py:971"),
    Case("vllm.compilation.custom_ops", "0.20.0", '-cc {"custom_ops":["none","+rms_norm"]}', layout()),
    Case("vllm.compilation.custom_ops", "0.33.0", '-cc {"custom_ops":["+rms_norm","-rms_norm"]}', layout(),
         refused="custom_ops cannot both enable and disable the same operation(s): rms_norm. Remove either",
         source="vllm/config/compilation.py:1031"),
    Case("vllm.compilation.custom_ops", "0.33.0", '-cc {"custom_ops":["all","none"]}', layout(),
         refused="custom_ops can contain only one base mode: 'all' or 'none'",
         source="vllm/config/compilation.py:1023"),
    Case("vllm.compilation.custom_ops", "0.33.0", '-cc {"custom_ops":["none","-rms_norm","+silu_and_mul"]}',
         layout()),
    Case("vllm.compilation.custom_ops", "0.26.0", '-cc {"custom_ops":["+rms_norm","-rms_norm"]}', layout()),
    # config/compilation.py:441-456 (0.10.1), :469-478 (0.11.0); 0.11.1 drops the deprecated flags
    Case("vllm.compilation.deprecated_cudagraph_flags", "0.10.1",
         '-O {"use_cudagraph":false,"cudagraph_mode":"PIECEWISE"}', layout(),
         refused="use_cudagraph and cudagraph_mode are mutually exclusive", source="vllm/config/compilation.py:447"),
    Case("vllm.compilation.deprecated_cudagraph_flags", "0.10.1", '-O {"cudagraph_mode":"PIECEWISE"}', layout()),
    Case("vllm.compilation.deprecated_cudagraph_flags", "0.11.0",
         '-O {"full_cuda_graph":true,"cudagraph_mode":"FULL"}', layout(),
         refused="full_cuda_graph and cudagraph_mode are mutually exclusive", source="vllm/config/compilation.py:478"),
    Case("vllm.compilation.deprecated_cudagraph_flags", "0.11.0", '-O {"full_cuda_graph":true}', layout()),
    # config.py:1518-1552 (0.8.0): one GPU resolves to uni; config/parallel.py:1054-1099, 1170-1174 (0.33.0)
    Case("vllm.parallel.nsight_needs_ray", "0.8.0", f"{M8} --ray-workers-use-nsight", layout(),
         refused="Unable to use nsight profiling unless workers run with Ray.", source="vllm/config.py:1552"),
    Case("vllm.parallel.nsight_needs_ray", "0.8.0", f"{M8} --ray-workers-use-nsight --distributed-executor-backend ray",
         layout(tp=2)),
    Case("vllm.parallel.nsight_needs_ray", "0.33.0", "--ray-workers-use-nsight", layout(tp=2),
         refused="Unable to use nsight profiling unless workers run with Ray.",
         source="vllm/config/parallel.py:1174"),
    Case("vllm.parallel.nsight_needs_ray", "0.33.0", "--ray-workers-use-nsight --distributed-executor-backend ray",
         layout(tp=2)),
    # config/parallel.py:599-602 (0.11.1: mp only), 597 (0.12.0: mp or uni), 1106-1114 (0.33.0)
    Case("vllm.parallel.nnodes_executor", "0.11.1", "--nnodes 2 --distributed-executor-backend uni", layout(tp=4),
         refused="nnodes > 1 can only be set when distributed exectuor backend is mp.",
         source="vllm/config/parallel.py:600"),
    Case("vllm.parallel.nnodes_executor", "0.12.0", "--nnodes 2 --distributed-executor-backend uni", layout(tp=4)),
    Case("vllm.parallel.nnodes_executor", "0.33.0", "--nnodes 2 --distributed-executor-backend ray", layout(tp=4),
         refused="nnodes > 1 can only be set when distributed executor backend is mp, uni or external_launcher.",
         source="vllm/config/parallel.py:1111"),
    Case("vllm.parallel.nnodes_executor", "0.33.0", "--nnodes 2", layout(tp=4)),   # the default across nodes: mp
    # config/vllm.py:364-395 (0.11.1); Executor.get_class (0.19.0: RayDistributedExecutor; 0.33.0: RayExecutorV2)
    Case("vllm.scheduler.async_executor", "0.11.1", "--async-scheduling --distributed-executor-backend ray",
         layout(tp=2), refused="Currently, async scheduling only supports `mp`, `uni`, or `external_launcher` "
                               "distributed executor backend, but you chose `ray`.",
         source="vllm/config/vllm.py:395"),
    Case("vllm.scheduler.async_executor", "0.11.1",
         "--async-scheduling --distributed-executor-backend external_launcher", layout(tp=2)),
    Case("vllm.scheduler.async_executor", "0.19.0", "--async-scheduling --distributed-executor-backend ray",
         layout(tp=2), refused="`ray` does not support async scheduling yet.", source="vllm/config/vllm.py:752"),
    Case("vllm.scheduler.async_executor", "0.19.0", "--async-scheduling --data-parallel-backend ray",
         layout(dp=2), model="moe", refused="`ray` does not support async scheduling yet."),
    Case("vllm.scheduler.async_executor", "0.19.0", "--async-scheduling", layout(dp=2), model="moe"),
    Case("vllm.scheduler.async_executor", "0.33.0", "--async-scheduling --distributed-executor-backend ray",
         layout(tp=2)),
    # config/__init__.py:480-486 (0.11.0, VLLM_ALL2ALL_BACKEND), config/vllm.py:681-686 (0.11.1), :921-926
    # (0.14.0, --ubatch-size), :1427-1432 (0.24.0, nixl_ep; pplx falls back), :2180-2198 (0.33.0)
    Case("vllm.parallel.dbo_all2all", "0.11.0", "--enable-dbo", layout(dp=2), model="moe",
         exception="AssertionError", source="vllm/config/__init__.py:482",
         refused="allgather_reducescatter is not supported. To fix set the VLLM_ALL2ALL_BACKEND environment"),
    Case("vllm.parallel.dbo_all2all", "0.11.1", "--enable-dbo", layout(dp=2), model="moe",
         exception="AssertionError", source="vllm/config/vllm.py:683",
         refused="allgather_reducescatter is not supported. To fix use --all2all-backend=deepep_low_latency"),
    Case("vllm.parallel.dbo_all2all", "0.11.1", "--enable-dbo --all2all-backend deepep_high_throughput",
         layout(dp=2), model="moe"),
    Case("vllm.parallel.dbo_all2all", "0.14.0", "--ubatch-size 2", layout(dp=2), model="moe",
         exception="AssertionError", source="vllm/config/vllm.py:923",
         refused="Microbatching currently only supports the deepep_low_latency and deepep_high_throughput"),
    Case("vllm.parallel.dbo_all2all", "0.14.0", "--ubatch-size 1", layout(dp=2), model="moe"),
    Case("vllm.parallel.dbo_all2all", "0.24.0", "--enable-dbo --all2all-backend pplx", layout(dp=2), model="moe",
         exception="AssertionError", source="vllm/config/vllm.py:1429",
         refused="and nixl_ep all2all backends. allgather_reducescatter is not supported."),
    Case("vllm.parallel.dbo_all2all", "0.24.0", "--enable-dbo --all2all-backend nixl_ep", layout(dp=2),
         model="moe"),
    Case("vllm.parallel.dbo_all2all", "0.33.0", "--enable-dbo", layout(dp=2), model="moe",
         exception="AssertionError", source="vllm/config/vllm.py:2198",
         refused="supports the deepep_low_latency, deepep_high_throughput, nixl_ep all2all backends on this "
                 "platform. allgather_reducescatter is not supported. To fix use one of "
                 "--all2all-backend=deepep_low_latency, --all2all-backend=deepep_high_throughput, "
                 "--all2all-backend=nixl_ep and install"),
    Case("vllm.parallel.dbo_all2all", "0.33.0", "--enable-dbo --all2all-backend deepep_low_latency", layout(dp=2),
         model="moe"),
    # config/parallel.py:1093-1099 (0.30.0), 1180-1187 (0.33.0)
    Case("vllm.parallel.dbo_thresholds", "0.30.0",
         "--enable-dbo --all2all-backend deepep_low_latency --dbo-decode-token-threshold 1", layout(dp=2),
         model="moe", source="vllm/config/parallel.py:1097",
         refused="dbo_decode_token_threshold and dbo_prefill_token_threshold must be at least the number of "
                 "microbatches (2)."),
    Case("vllm.parallel.dbo_thresholds", "0.29.0",
         "--enable-dbo --all2all-backend deepep_low_latency --dbo-decode-token-threshold 1", layout(dp=2),
         model="moe"),
    Case("vllm.parallel.dbo_thresholds", "0.33.0", "--ubatch-size 4 --all2all-backend deepep_low_latency "
         "--dbo-prefill-token-threshold 3", layout(dp=2), model="moe",
         refused="must be at least the number of microbatches (4).", source="vllm/config/parallel.py:1184"),
    Case("vllm.parallel.dbo_thresholds", "0.33.0", "--dbo-decode-token-threshold 1", layout(dp=2), model="moe"),
    # config/parallel.py:421-424 (0.18.0); gone from 0.29
    Case("vllm.parallel.dcp_a2a_needs_dcp", "0.18.0", "--dcp-comm-backend a2a", layout(tp=2),
         refused="dcp_comm_backend='a2a' requires decode_context_parallel_size > 1.",
         source="vllm/config/parallel.py:423"),
    Case("vllm.parallel.dcp_a2a_needs_dcp", "0.18.0", "--dcp-comm-backend a2a -dcp 2", layout(tp=2)),
    Case("vllm.parallel.dcp_a2a_needs_dcp", "0.33.0", "--dcp-comm-backend a2a", layout(tp=2)),
    # config/parallel.py:372-381, 438-441 (0.20.0)
    Case("vllm.parallel.numa_bind_options", "0.20.0", "--numa-bind-nodes 0 1", layout(tp=2),
         refused="numa_bind_nodes and numa_bind_cpus require numa_bind=True.", source="vllm/config/parallel.py:440"),
    Case("vllm.parallel.numa_bind_options", "0.20.0", "--numa-bind --numa-bind-nodes 0 -1", layout(tp=2),
         refused="numa_bind_nodes must contain non-negative integers.", source="vllm/config/parallel.py:380"),
    Case("vllm.parallel.numa_bind_options", "0.20.0", "--numa-bind --numa-bind-nodes 0 1", layout(tp=2)),
    Case("vllm.parallel.numa_bind_options", "0.33.0", "--numa-bind-cpus 0-3", layout(tp=2),
         refused="numa_bind_nodes and numa_bind_cpus require numa_bind=True."),
    # config/parallel.py:497-519 (0.33.0), 385-406 (0.20.0): numactl CPU lists
    Case("vllm.parallel.numa_bind_options", "0.33.0", "--numa-bind --numa-bind-cpus 0-3 4-2", layout(tp=2),
         refused="numa_bind_cpus ranges must be ascending, but got '4-2'.", source="vllm/config/parallel.py:516"),
    Case("vllm.parallel.numa_bind_options", "0.20.0", "--numa-bind --numa-bind-cpus 0-3 0,2,x", layout(tp=2),
         refused="numa_bind_cpus entries must use numactl CPU list syntax, for example '0-3' or '0,2,4-7'.",
         source="vllm/config/parallel.py:395"),
    Case("vllm.parallel.numa_bind_options", "0.20.0", "--numa-bind --numa-bind-cpus 0-3,8-15 16", layout(tp=2)),
    # config/compilation.py:853-871 (0.33.0): a mode name, upper-cased, must be a CompilationMode
    Case("vllm.compilation.mode_name", "0.33.0", '-cc {"mode":"fast"}', layout(),
         refused="Invalid compilation mode: fast. Valid modes are: NONE, STOCK_TORCH_COMPILE, DYNAMO_TRACE_ONCE, "
                 "VLLM_COMPILE", source="vllm/config/compilation.py:865"),
    Case("vllm.compilation.mode_name", "0.33.0", '-cc {"mode":"vllm_compile"}', layout()),
    Case("vllm.compilation.mode_name", "0.11.1", '-O {"mode":"Fast"}', layout(),
         refused="Invalid compilation mode: Fast.", source="vllm/config/compilation.py:574"),
    # config/compilation.py:690-697 (0.11.1: -O3 is mode 3), 862-867 (0.12.0: the deprecated level stands for
    # mode; -O3 is --optimization-level, resolved after this check), 1040-1046 (0.33.0)
    Case("vllm.compilation.piecewise_backend", "0.11.1", "-O3 -O.backend=my.backend", layout(),
         refused="Invalid backend for piecewise compilation: my.backend", source="vllm/config/compilation.py:694"),
    Case("vllm.compilation.piecewise_backend", "0.12.0", "-cc.level=3 -cc.backend=my.backend", layout(),
         refused="Invalid backend for piecewise compilation: my.backend", source="vllm/config/compilation.py:866"),
    Case("vllm.compilation.piecewise_backend", "0.12.0", "-O3 -cc.backend=my.backend", layout()),
    Case("vllm.compilation.piecewise_backend", "0.33.0", '-cc {"mode":"VLLM_COMPILE","backend":"eager"}', layout()),
    Case("vllm.compilation.piecewise_backend", "0.33.0", '-cc {"mode":2,"backend":"my.backend"}', layout()),
    # config.py:3225-3235 (0.8.0), config/compilation.py:1142-1153 (0.33.0)
    Case("vllm.compilation.compile_sizes", "0.8.0", f"{M8} --compilation-config {{'compile_sizes':['all']}}",
         layout(), exception="AssertionError", source="vllm/config.py:3232",
         refused="Unrecognized size type in compile_sizes, expect 'cudagraph_capture_sizes', got all"),
    Case("vllm.compilation.compile_sizes", "0.33.0", '-cc {"compile_sizes":[1,"cudagraph_capture_sizes","max"]}',
         layout(), exception="AssertionError", source="vllm/config/compilation.py:1147",
         refused="expect 'cudagraph_capture_sizes', got max"),
    Case("vllm.compilation.compile_sizes", "0.33.0", '-cc {"compile_sizes":[1,"cudagraph_capture_sizes"]}',
         layout()),
    # config/compilation.py:481-488 (0.11.0, which pins torch==2.8.0); 0.11.1 pins torch==2.9.0
    Case("vllm.compilation.inductor_partition_torch", "0.11.0", '-O {"use_inductor_graph_partition":true}',
         layout(), refused="use_inductor_graph_partition is only supported with torch>=2.9.0.dev.",
         source="vllm/config/compilation.py:485"),
    Case("vllm.compilation.inductor_partition_torch", "0.11.1", '-O {"use_inductor_graph_partition":true}',
         layout()),
    # config/compilation.py:953-959 (0.19.0), 1048-1079 (0.33.0)
    Case("vllm.compilation.cudagraph_size_values", "0.19.0",
         '-cc {"cudagraph_mm_encoder":true,"encoder_cudagraph_max_images_per_batch":-1}', layout(),
         refused="encoder_cudagraph_max_images_per_batch must be non-negative (0 = auto-infer)",
         source="vllm/config/compilation.py:956"),
    Case("vllm.compilation.cudagraph_size_values", "0.19.0", '-cc {"encoder_cudagraph_max_images_per_batch":-1}',
         layout()),
    Case("vllm.compilation.cudagraph_size_values", "0.33.0", '-cc {"encoder_cudagraph_token_budgets":[0,512]}',
         layout(), refused="All encoder_cudagraph_token_budgets must be positive, got [0, 512]",
         source="vllm/config/compilation.py:1075"),
    Case("vllm.compilation.cudagraph_size_values", "0.33.0", '-cc {"decoder_replay_cudagraph_capture_sizes":[0,8]}',
         layout(), refused="All decoder_replay_cudagraph_capture_sizes must be positive",
         source="vllm/config/compilation.py:1049"),
    Case("vllm.compilation.cudagraph_size_values", "0.33.0",
         '-cc {"cudagraph_mm_encoder":true,"encoder_cudagraph_max_frames_per_batch":-2}', layout(),
         refused="encoder_cudagraph_max_frames_per_batch must be non-negative (None = auto-infer)"),
    Case("vllm.compilation.cudagraph_size_values", "0.33.0",
         '-cc {"cudagraph_mm_encoder":true,"encoder_cudagraph_token_budgets":[256,512]}', layout()),
    # engine/arg_utils.py:1741-1770 (0.24.0), 2141-2180 (0.33.0): called by create_engine_config
    Case("vllm.parallel.device_ids", "0.33.0", "--device-ids 0,1,1", layout(tp=2),
         refused="--device-ids must not contain duplicates: [0, 1, 1]", source="vllm/engine/arg_utils.py:2151"),
    Case("vllm.parallel.device_ids", "0.24.0", "--device-ids 0,GPU-1", layout(tp=2),
         refused="--device-ids must not mix integer IDs and UUIDs", source="vllm/engine/arg_utils.py:1752"),
    Case("vllm.parallel.device_ids", "0.24.0", "--device-ids GPU-0,GPU-1", layout(tp=2)),
    Case("vllm.parallel.device_ids", "0.33.0", "--device-ids 2,3", layout(tp=2)),
    Case("vllm.parallel.device_ids", "0.23.0", "--tensor-parallel-size 2", layout(tp=2)),
    # config/parallel.py:948-957 (0.30.0): without elastic EP the limit is the DP size itself
    Case("vllm.parallel.elastic_ep_max_dp_size", "0.30.0",
         "--enable-elastic-ep --enable-eplb --enable-expert-parallel --elastic-ep-max-dp-size 2", layout(dp=4),
         model="moe", source="vllm/config/parallel.py:955",
         refused="--elastic-ep-max-dp-size must be greater than or equal to the initial data_parallel_size (4)."),
    Case("vllm.parallel.elastic_ep_max_dp_size", "0.30.0", "--elastic-ep-max-dp-size 2", layout(dp=4),
         model="moe"),
    Case("vllm.parallel.elastic_ep_max_dp_size", "0.33.0",
         "--enable-elastic-ep --enable-eplb --enable-expert-parallel --elastic-ep-max-dp-size 8", layout(dp=4),
         model="moe"),
    # engine/arg_utils.py:2378-2381 (0.33.0), 1073-1075 (0.10.0): `vllm serve --headless`
    Case("vllm.parallel.hybrid_lb_headless", "0.33.0", "--headless --data-parallel-hybrid-lb "
         "--data-parallel-size-local 2", layout(dp=4), model="moe", exception="AssertionError",
         refused="data_parallel_hybrid_lb is not applicable in headless mode", source="vllm/engine/arg_utils.py:2380"),
    Case("vllm.parallel.hybrid_lb_headless", "0.33.0", "--headless --data-parallel-size-local 2", layout(dp=4),
         model="moe"),
    Case("vllm.parallel.hybrid_lb_headless", "0.10.0", f"{M8} --headless --data-parallel-hybrid-lb", layout(dp=4),
         model="moe", exception="AssertionError", refused="data_parallel_hybrid_lb is not applicable in headless mode",
         source="vllm/engine/arg_utils.py:1074"),
    # engine/arg_utils.py:2539-2550 (0.33.0): the assertion's message is a tuple, which the ledger does not read
    Case("vllm.parallel.dp_backend_choices", "0.33.0", "--data-parallel-backend torchrun", layout(),
         exception="AssertionError", refused="", source="vllm/engine/arg_utils.py:2547"),
    Case("vllm.parallel.dp_backend_choices", "0.33.0", "--data-parallel-backend ray", layout()),
    # engine/arg_utils.py:1009-1014 (0.9.0): VLLM_ATTENTION_BACKEND=DUAL_CHUNK_FLASH_ATTN; gone from 0.11
    EnvCase("vllm.attention.dual_chunk_needs_eager", "0.9.0", M8, layout(), env=DUAL_CHUNK,
            exception="AssertionError", source="vllm/engine/arg_utils.py:1011",
            refused="Cuda graph is not supported with DualChunkFlashAttention."),
    EnvCase("vllm.attention.dual_chunk_needs_eager", "0.9.0", f"{M8} --enforce-eager", layout(), env=DUAL_CHUNK),
    EnvCase("vllm.attention.dual_chunk_needs_eager", "0.11.0", M8, layout(), env=DUAL_CHUNK),
    # config/vllm.py:1633-1652 (0.30.0), 1874-1911 (0.33.0); use_v2_model_runner: :676-679 (0.30.0)
    EnvCase("vllm.attention.hisparse_limits", "0.33.0", HISPARSE, layout(pp=2), model_dir=DSA,
            refused="HiSparse does not support pipeline parallelism.", source="vllm/config/vllm.py:1887"),
    EnvCase("vllm.attention.hisparse_limits", "0.33.0", HISPARSE, layout(tp=2), model_dir=DSA),
    EnvCase("vllm.attention.hisparse_limits", "0.33.0", HISPARSE, layout(),
            refused="HiSparse is only supported for DSA models with index_topk.", source="vllm/config/vllm.py:1909"),
    EnvCase("vllm.attention.hisparse_limits", "0.30.0", f"{HISPARSE} -dcp 2", layout(tp=2), model_dir=DSA,
            refused="HiSparse does not support decode context parallelism.", source="vllm/config/vllm.py:1646"),
    EnvCase("vllm.attention.hisparse_limits", "0.31.0", f"{HISPARSE} --no-scheduler-reserve-full-isl", layout(),
            model_dir=DSA, refused="HiSparse requires --scheduler-reserve-full-isl; remove "
                                   "--no-scheduler-reserve-full-isl.", source="vllm/config/vllm.py:1833"),
    EnvCase("vllm.attention.hisparse_limits", "0.30.0", f"{HISPARSE} --no-scheduler-reserve-full-isl", layout(),
            model_dir=DSA),
    EnvCase("vllm.attention.hisparse_limits", "0.30.0", HISPARSE, layout(), model_dir=DSA,
            env=(("VLLM_USE_V2_MODEL_RUNNER", "0"),),
            refused="HiSparse requires Model Runner V2; remove VLLM_USE_V2_MODEL_RUNNER=0.",
            source="vllm/config/vllm.py:678"),
    EnvCase("vllm.attention.hisparse_limits", "0.33.0",
            '--kv-transfer-config {"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":'
            '{"connectors":[{"kv_connector":"HiSparseConnector","kv_role":"kv_both"}]}}', layout(pp=2),
            model_dir=DSA, refused="HiSparse does not support pipeline parallelism."),
    # config/vllm.py:2064-2098 (0.31.0)
    EnvCase("vllm.parallel.moonep_limits", "0.31.0", "--all2all-backend moonep --enable-expert-parallel",
            layout(dp=2), model_dir="qwen3-30b-a3b-fp8", source="vllm/config/vllm.py:2069",
            refused="The moonep all2all backend currently supports unquantized BF16 models only; got "
                    "quantization='fp8'."),
    Case("vllm.parallel.moonep_limits", "0.31.0", "--all2all-backend moonep --enable-expert-parallel --dtype half",
         layout(dp=2), model="moe", source="vllm/config/vllm.py:2079",
         refused="The moonep all2all backend currently supports BF16 models only; got dtype=torch.float16."),
    Case("vllm.parallel.moonep_limits", "0.31.0", "--all2all-backend moonep --enable-expert-parallel --enable-eplb",
         layout(dp=2), model="moe", refused="The moonep all2all backend does not support EPLB yet"),
    Case("vllm.parallel.moonep_limits", "0.31.0", "--all2all-backend moonep --enable-expert-parallel "
         "--expert-placement-strategy round_robin", layout(dp=2), model="moe",
         refused="Got --expert-placement-strategy 'round_robin'."),
    Case("vllm.parallel.moonep_limits", "0.31.0", "--all2all-backend moonep --enable-expert-parallel", layout(dp=2),
         model="moe"),
    Case("vllm.parallel.moonep_limits", "0.33.0", "--all2all-backend deepep_low_latency --enable-expert-parallel "
         "--dtype half", layout(dp=2), model="moe"),
    # config/vllm.py (0.29.0:1136, 0.33.0): a multimodal model's language-only mode runs no encoder to capture
    EnvCase("vllm.multimodal.language_model_only_encoder_graphs", "0.29.0",
            '--language-model-only -cc {"cudagraph_mm_encoder":true}', layout(), model_dir=LLAVA,
            refused="--language-model-only is incompatible with cudagraph_mm_encoder=True",
            source="vllm/config/vllm.py:1136"),
    EnvCase("vllm.multimodal.language_model_only_encoder_graphs", "0.29.0", "--language-model-only", layout(),
            model_dir=LLAVA),
    Case("vllm.multimodal.language_model_only_encoder_graphs", "0.29.0",
         '--language-model-only -cc {"cudagraph_mm_encoder":true}', layout()),        # a text model: no mm config
    # config/vllm.py:1743-1752 (0.33.0); `vllm serve` sets spawn where the environment does not say
    EnvCase("vllm.multimodal.torch_shm_needs_spawn", "0.33.0", "--mm-tensor-ipc torch_shm", layout(),
            model_dir=LLAVA, env=FORK, source="vllm/config/vllm.py:1749",
            refused="torch_shm is known to fail without VLLM_WORKER_MULTIPROC_METHOD set to spawn"),
    EnvCase("vllm.multimodal.torch_shm_needs_spawn", "0.19.0", "--mm-tensor-ipc torch_shm", layout(),
            model_dir=LLAVA, env=FORK, source="vllm/config/vllm.py:828",
            refused="torch_shm is known to fail without VLLM_WORKER_MULTIPROC_METHOD set to spawn"),
    EnvCase("vllm.multimodal.torch_shm_needs_spawn", "0.33.0", "--mm-tensor-ipc torch_shm", layout(),
            model_dir=LLAVA),
    EnvCase("vllm.multimodal.torch_shm_needs_spawn", "0.33.0", "--mm-tensor-ipc torch_shm", layout(), env=FORK),
    # config/vllm.py:1233-1240 (0.30.0)
    EnvCase("vllm.parallel.engram_no_dbo", "0.30.0", "--enable-dbo --all2all-backend deepep_low_latency",
            layout(dp=2), model="moe", as_checkpoint=ENGRAM, source="vllm/config/vllm.py:1239",
            refused="DeepSeek V4.1 Engram does not support DBO or microbatching."),
    EnvCase("vllm.parallel.engram_no_dbo", "0.30.0", "--all2all-backend deepep_low_latency", layout(dp=2),
            model="moe", as_checkpoint=ENGRAM),
    Case("vllm.parallel.engram_no_dbo", "0.30.0", "--enable-dbo --all2all-backend deepep_low_latency",
         layout(dp=2), model="moe"),
    # config/vllm.py:849-925 (0.11.1), 2447-2625 (0.33.0): the sizes kept are those up to max_num_batched_tokens
    # (8192 on an H100 by default)
    Case("vllm.compilation.capture_sizes_consistency", "0.33.0",
         '-cc {"cudagraph_capture_sizes":[1,2,4],"max_cudagraph_capture_size":8}', layout(),
         refused="customized max_cudagraph_capture_size(=8) should be consistent with the max value of "
                 "cudagraph_capture_sizes(=4)", source="vllm/config/vllm.py:2619"),
    Case("vllm.compilation.capture_sizes_consistency", "0.33.0",
         "--cudagraph-capture-sizes 1 2 4 16384 --max-cudagraph-capture-size 16384", layout(),
         refused="customized max_cudagraph_capture_size(=16384) should be consistent with the max value of "
                 "cudagraph_capture_sizes(=4)"),
    Case("vllm.compilation.capture_sizes_consistency", "0.33.0",
         '-cc {"cudagraph_capture_sizes":[1,2,4],"max_cudagraph_capture_size":4}', layout()),
    Case("vllm.compilation.capture_sizes_consistency", "0.11.1", '-O {"cudagraph_capture_sizes":[]}', layout(),
         exception="AssertionError", source="vllm/config/vllm.py:864",
         refused="cudagraph_capture_sizes should contain at least one element when using cuda graph."),
    Case("vllm.compilation.capture_sizes_consistency", "0.33.0", '--enforce-eager -cc {"cudagraph_capture_sizes":[]}',
         layout()),
    Case("vllm.compilation.capture_sizes_consistency", "0.11.0", '-O {"cudagraph_capture_sizes":[]}', layout()),
    # config/__init__.py:336-386, 463-478 (0.11.0), 3540-3570, 3635-3643 (0.10.1): an explicit piecewise mode
    # with level 0-2; the default level (3 under V1) and --enforce-eager (mode NONE) pass
    Case("vllm.compilation.piecewise_needs_level", "0.11.0", "-O0 -O.cudagraph_mode=PIECEWISE", layout(),
         exception="AssertionError", source="vllm/config/__init__.py:474",
         refused="Compilation level should be CompilationLevel.PIECEWISE when cudagraph_mode piecewise cudagraphs "
                 "is used, cudagraph_mode=CUDAGraphMode.PIECEWISE"),
    Case("vllm.compilation.piecewise_needs_level", "0.10.1", '-O {"level":2,"cudagraph_mode":"FULL_AND_PIECEWISE"}',
         layout(), exception="AssertionError", source="vllm/config/__init__.py:3639",
         refused="cudagraph_mode=CUDAGraphMode.FULL_AND_PIECEWISE"),
    Case("vllm.compilation.piecewise_needs_level", "0.11.0", "-O.cudagraph_mode=PIECEWISE", layout()),
    Case("vllm.compilation.piecewise_needs_level", "0.11.0", "--enforce-eager -O0 -O.cudagraph_mode=PIECEWISE",
         layout()),
    Case("vllm.compilation.piecewise_needs_level", "0.11.0", "-O0 -O.cudagraph_mode=FULL", layout()),
    # config.py:4025-4030, 4585-4591 (0.10.0)
    Case("vllm.compilation.full_cuda_graph_splitting_ops", "0.10.0",
         f'{M8} -O {{"full_cuda_graph":true,"splitting_ops":["vllm.unified_attention"]}}', layout(),
         source="vllm/config.py:4319",
         refused="full_cuda_graph cannot be used together with splitting_ops, as Full CUDA graph will override the "
                 "splitting_ops: ['vllm.unified_attention']"),
    Case("vllm.compilation.full_cuda_graph_splitting_ops", "0.10.0",
         f'{M8} --enforce-eager -O {{"full_cuda_graph":true,"splitting_ops":["vllm.unified_attention"]}}', layout()),
    Case("vllm.compilation.full_cuda_graph_splitting_ops", "0.10.0", f'{M8} -O {{"full_cuda_graph":true}}', layout()),
    Case("vllm.compilation.full_cuda_graph_splitting_ops", "0.9.0",
         f'{M8} -O {{"full_cuda_graph":true,"splitting_ops":["vllm.unified_attention"]}}', layout(cc=(7, 5))),
    # config/vllm.py:1200-1206 (0.13.0), 1519-1525 (0.18.0): _set_compile_ranges runs for every config
    Case("vllm.compilation.compile_range_points", "0.18.0", '-cc {"compile_ranges_endpoints":[128,0]}', layout(),
         exception="AssertionError", refused="Invalid compile range endpoint: 0", source="vllm/config/vllm.py:1525"),
    Case("vllm.compilation.compile_range_points", "0.13.0", '-cc {"compile_ranges_split_points":[-4]}', layout(),
         exception="AssertionError", refused="Invalid compile range split point: -4",
         source="vllm/config/vllm.py:1206"),
    Case("vllm.compilation.compile_range_points", "0.33.0", '-cc {"compile_ranges_endpoints":[128,256]}', layout()),
    # engine/arg_utils.py:1672-1680 (0.20.0): Qwen3-Next is IsHybrid in the release's registry
    EnvCase("vllm.cache.turboquant_hybrid", "0.20.0", "--kv-cache-dtype turboquant_k8v4", layout(),
            model_dir="qwen3-next-80b-a3b-instruct", exception="NotImplementedError",
            refused="TurboQuant KV cache is not supported for hybrid (attention + Mamba) models.",
            source="vllm/engine/arg_utils.py:1677"),
    Case("vllm.cache.turboquant_hybrid", "0.20.0", "--kv-cache-dtype turboquant_k8v4", layout()),
    EnvCase("vllm.cache.turboquant_hybrid", "0.20.0", "--kv-cache-dtype fp8", layout(),
            model_dir="qwen3-next-80b-a3b-instruct"),
    # config/vllm.py:1259-1310 (0.20.0): Llama 4's chunked local attention turns the hybrid manager off where
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE is off (the default in 0.13, on from 0.14); KV events
    # turn it off in 0.13-0.19
    EnvCase("vllm.scheduler.hybrid_kv_manager_forced", "0.13.0", "--no-disable-hybrid-kv-cache-manager",
            layout(tp=8), model_dir=LLAMA4, source="vllm/config/vllm.py:949",
            refused="Hybrid KV cache manager was explicitly enabled but is not supported in this configuration. "
                    "Consider omitting the --no-disable-hybrid-kv-cache-manager flag"),
    EnvCase("vllm.scheduler.hybrid_kv_manager_forced", "0.20.0", "--no-disable-hybrid-kv-cache-manager",
            layout(tp=8), model_dir=LLAMA4),
    EnvCase("vllm.scheduler.hybrid_kv_manager_forced", "0.33.0", "--enable-hybrid-kv-cache-manager", layout(tp=8),
            model_dir=LLAMA4, env=(("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE", "0"),),
            source="vllm/config/vllm.py:2285",
            refused="Consider omitting the --enable-hybrid-kv-cache-manager flag to let vLLM decide automatically."),
    Case("vllm.scheduler.hybrid_kv_manager_forced", "0.17.0", '--no-disable-hybrid-kv-cache-manager '
         '--kv-events-config {"enable_kv_cache_events":true}', layout(),
         refused="Hybrid KV cache manager was explicitly enabled but is not supported in this configuration."),
    Case("vllm.scheduler.hybrid_kv_manager_forced", "0.20.0", '--no-disable-hybrid-kv-cache-manager '
         '--kv-events-config {"enable_kv_cache_events":true}', layout()),
    EnvCase("vllm.scheduler.hybrid_kv_manager_forced", "0.13.0", "", layout(tp=8), model_dir=LLAMA4),
    # config/parallel.py:664-668 (0.17.0), 983-988 (0.33.0, external LB allowed); the LB modes as
    # create_engine_config hands them (engine/arg_utils.py:1596-1632 in 0.17.0)
    Case("vllm.parallel.elastic_ep_lb", "0.20.0", f"{ELASTIC} --data-parallel-external-lb --data-parallel-rank 1",
         layout(dp=4), model="moe", exception="NotImplementedError", source="vllm/config/parallel.py:744",
         refused="Elastic EP is not compatible with data_parallel_external_lb or data_parallel_hybrid_lb."),
    Case("vllm.parallel.elastic_ep_lb", "0.33.0", f"{ELASTIC} --data-parallel-external-lb --data-parallel-rank 1",
         layout(dp=4), model="moe"),
    Case("vllm.parallel.elastic_ep_lb", "0.33.0", f"{ELASTIC} --data-parallel-hybrid-lb --data-parallel-size-local 2",
         layout(dp=4), model="moe", exception="NotImplementedError", source="vllm/config/parallel.py:983",
         refused="Elastic EP is not compatible with data_parallel_hybrid_lb."),
    Case("vllm.parallel.elastic_ep_lb", "0.20.0", f"{ELASTIC} --data-parallel-hybrid-lb --data-parallel-size-local 4",
         layout(dp=4), model="moe"),                     # every rank local: no hybrid LB
    # engine/arg_utils.py:1441-1454 (0.9.0): V0 below SM 8.0 (a T4) only
    Case("vllm.cache.v0_prefix_hash_sha256", "0.9.0", f"{M8} --enable-prefix-caching --prefix-caching-hash-algo "
         "sha256", layout(cc=(7, 5)), source="vllm/engine/arg_utils.py:1452",
         refused="sha256 is not supported for prefix caching in V0 engine. Please use 'builtin'."),
    Case("vllm.cache.v0_prefix_hash_sha256", "0.9.0", f"{M8} --enable-prefix-caching --prefix-caching-hash-algo "
         "sha256", layout()),
    Case("vllm.cache.v0_prefix_hash_sha256", "0.8.4", f"{M8} --enable-prefix-caching --prefix-caching-hash-algo "
         "sha256", layout(cc=(7, 0)), refused="sha256 is not supported for prefix caching in V0 engine."),
    Case("vllm.cache.v0_prefix_hash_sha256", "0.9.0", f"{M8} --prefix-caching-hash-algo sha256", layout(cc=(7, 5))),
]


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_the_release_refuses_the_line_in_its_own_words(case: LineCase) -> None:
    if isinstance(case, EnvCase):
        judge_with_env(case)
    else:
        judge(case)


def test_every_rule_of_the_area_has_a_refusing_and_an_accepted_case() -> None:
    refusing = {c.rule for c in CASES if c.refused is not None}
    accepted = {c.rule for c in CASES if c.refused is None}
    assert refusing == accepted == set(rules_post.RULES)


def _mine(line: str, version: str, rule: str, *, env: dict[str, str] | None = None, model: str = "dense",
          **sizes: int) -> tuple[list[str], tuple[str, ...]]:
    v = Version(version)
    args = resolve(line.split(), v)
    assert args.ok, args.errors
    judged = config_check(args, model_of(model), layout(**sizes), v, env=env)
    return [r.text("vLLM") for r in judged.refusals if r.rule == rule], judged.not_judged


@pytest.mark.parametrize(("env", "refused"), [
    ({}, True),                                              # 0.20.0: os.getenv(..., "0"): RayDistributedExecutor
    ({"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "1"}, False),      # RayExecutorV2, a MultiprocExecutor
])
def test_ray_async_scheduling_follows_the_v2_executor_switch_of_0_20(env: dict[str, str], refused: bool) -> None:
    mine, _ = _mine("--async-scheduling --distributed-executor-backend ray", "0.20.0",
                    "vllm.scheduler.async_executor", env=env, tp=2)
    assert bool(mine) is refused
    if refused:
        assert mine[0].endswith('"`ray` does not support async scheduling yet." (vllm/config/vllm.py:795)')


def test_ray_v2_is_the_default_from_0_21_and_can_be_turned_off() -> None:
    line = "--async-scheduling --distributed-executor-backend ray"
    assert not _mine(line, "0.21.0", "vllm.scheduler.async_executor", tp=2)[0]
    assert _mine(line, "0.21.0", "vllm.scheduler.async_executor", env={"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "0"},
                 tp=2)[0]


def test_0_11_0_reads_the_all2all_backend_from_the_environment() -> None:
    env = {"VLLM_ALL2ALL_BACKEND": "deepep_low_latency"}
    assert not _mine("--enable-dbo", "0.11.0", "vllm.parallel.dbo_all2all", env=env, model="moe",
                     dp=2)[0]


@pytest.mark.parametrize(("version", "flag", "variable", "refused"), [
    ("0.13.0", "", "deepep_low_latency", False),                          # fills an unset flag
    ("0.13.0", "--all2all-backend naive", "deepep_low_latency", True),    # a given flag wins
    ("0.14.0", "--all2all-backend deepep_low_latency", "naive", True),    # the variable overrides the flag
    ("0.16.0", "--all2all-backend deepep_low_latency", "naive", False),   # ignored
])
def test_the_deprecated_all2all_variable_by_release(version: str, flag: str, variable: str, refused: bool) -> None:
    mine, _ = _mine(f"--enable-dbo {flag}", version, "vllm.parallel.dbo_all2all",
                    env={"VLLM_ALL2ALL_BACKEND": variable}, model="moe", dp=2)
    assert bool(mine) is refused


@pytest.mark.parametrize(("cvd", "refused"), [
    ("4,5,6", "--device-ids index 3 is out of range for CUDA_VISIBLE_DEVICES=4,5,6 (3 devices visible)"),
    ("4,5,6,7", None),
    (None, None),                          # without CUDA_VISIBLE_DEVICES the ids are physical
])
def test_device_ids_index_the_devices_cuda_visible_devices_shows(cvd: str | None, refused: str | None) -> None:
    env = {"CUDA_VISIBLE_DEVICES": cvd} if cvd is not None else {}
    for version, line in (("0.24.0", 1768), ("0.33.0", 2174)):
        mine, _ = _mine("--device-ids 0,3", version, "vllm.parallel.device_ids", env=env, tp=2)
        if refused is None:
            assert not mine
        else:
            assert mine and mine[0].endswith(f'"{refused}" (vllm/engine/arg_utils.py:{line})')


def test_the_executor_backend_a_deployment_leaves_unset() -> None:
    """``ParallelConfig.__post_init__``: one GPU is uni; more on one node mp; before 0.11.1 a world larger than
    the node's GPUs is Ray (unknown devices: not known); from 0.17 DP counts; --data-parallel-backend ray is Ray."""
    def backend(line: str, version: str, **sizes: int) -> str | None:
        v = Version(version)
        lay = layout(**{k: s for k, s in sizes.items() if k != "devices"})
        if "devices" in sizes:
            lay = replace(lay, devices=sizes["devices"])
        return rules_post.resolved_backend(resolve(line.split(), v), lay, v)[0]

    assert backend(f"{M8}", "0.8.0") == "uni"
    assert backend(f"{M8}", "0.8.0", tp=2) is None
    assert backend(f"{M8}", "0.8.0", tp=2, devices=1) == "ray"
    assert backend(f"{M8}", "0.8.0", tp=2, devices=2) == "mp"
    assert backend("", "0.16.0", dp=2) == "uni"
    assert backend("", "0.17.0", dp=2) == "mp"
    assert backend("--data-parallel-backend ray", "0.33.0", dp=2) == "ray"
    assert backend("--nnodes 2", "0.33.0", tp=8, devices=4) == "mp"
    assert backend("--distributed-executor-backend external_launcher", "0.33.0", tp=2) == "external_launcher"


def test_nsight_where_the_default_turns_into_ray_is_not_judged() -> None:
    """Before 0.11.1 two ranks on one GPU's node resolve to Ray; ``_verify_args`` is a model validator, so
    whether it reads the resolved backend or the unset flag is left open: said, not guessed."""
    v = Version("0.10.0")
    args = resolve("--ray-workers-use-nsight".split(), v)
    judged = config_check(args, model_of("dense"), replace(layout(tp=2), devices=1), v)
    assert not [r for r in judged.refusals if r.rule == "vllm.parallel.nsight_needs_ray"]
    assert any("nsight_needs_ray" in n for n in judged.not_judged)
    refused = config_check(args, model_of("dense"), replace(layout(tp=2), devices=2), v)
    assert [r for r in refused.refusals if r.rule == "vllm.parallel.nsight_needs_ray"]


@pytest.mark.parametrize(("line", "refused"), [
    ("vllm serve Qwen/Qwen3-30B-A3B --data-parallel-size 2 --enable-expert-parallel --enable-dbo",
     "Microbatching currently only supports the deepep_low_latency"),
    ("vllm serve Qwen/Qwen3-30B-A3B --data-parallel-size 2 --enable-expert-parallel --enable-dbo "
     "--all2all-backend deepep_low_latency", None),
])
def test_gpulayout_check_fails_a_dbo_line_in_the_releases_words(
        capsys: pytest.CaptureFixture[str], line: str, refused: str | None) -> None:
    code = main(["check", "--cmd", line, "--machine", "preset:8xH100-sxm", "--json"])
    config = json.loads(capsys.readouterr().out)["deployments"]["--cmd:1"]["checks"]["config"]
    if refused is None:
        assert config["status"] == "pass", config["message"]
        return
    assert code == 1 and config["status"] == "fail"
    assert f'vLLM 0.33.0 raises AssertionError: "{refused}' in config["message"]
