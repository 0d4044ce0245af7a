"""vLLM's config-time refusals of ``engines/vllm/rules_post2.py``: the max CUDA-graph capture size, a custom compile
backend in the default mode (0.11.1), the Proton profiler, HiSparse modes, the FlashInfer MoE-EP kernels, the Mamba
backend name, ``--eplb-config``, nnodes within a DP replica, fault tolerance with API servers, multi-step scheduling,
NIXL with context parallel and routed-experts outputs. Each command line is read by the release's own parser and
judged in the release's words at its line; each refusal has its accepted neighbour."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version
from vllm_line_cases import EnvCase, LineCase, case_id, judge, layout
from vllm_line_cases import model_of as line_model_of

from pytest_gpulayout.engines.vllm import rules_post2
from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec

MODELS = Path(__file__).parent.parent / "data" / "models"
DSA = "deepseek-v3.2"                  # MLA, index_topk: a DSA model
HYBRID = "qwen3-next-80b-a3b-instruct"  # attention + linear attention: IsHybrid
M8 = "Qwen/Qwen3-8B"                   # 0.8.x require the model positional
NIXL = '--kv-transfer-config {"kv_connector":"NixlConnector","kv_role":"kv_both"}'
HISPARSE = '-ac {"hisparse_config":{}}'
PROTON = '--profiler-config {"profiler":"proton"}'


def model_of(name: str) -> ModelSpec:
    """The cases' models: the shared ones, or a local config of tests/data/models."""
    if name in (DSA, HYBRID):
        return load_model(str(MODELS / name))
    return line_model_of(name)


Case = LineCase
MAX = rules_post2.MAX_CAPTURE
BACKEND = rules_post2.CUSTOM_BACKEND
GRAPHS = rules_post2.PROTON_GRAPHS
RUNNER = rules_post2.PROTON_RUNNER
HI = rules_post2.HISPARSE_MODES
EP = rules_post2.MOE_EP
MAMBA = rules_post2.MAMBA_BACKEND
EPLB = rules_post2.EPLB_VALUES
NNODES = rules_post2.NNODES_WITHIN_DP
FT = rules_post2.FT_API_SERVERS
STEPS = rules_post2.MULTI_STEP_PP
NX = rules_post2.NIXL_CP
ROUTED = rules_post2.ROUTED_CONNECTORS
AUX = rules_post2.ROUTED_AUX
FT_LB = "--enable-fault-tolerance --data-parallel-external-lb --data-parallel-rank 0"

CASES = [
    # config/vllm.py:2554-2557 (0.33.0), 857 (0.11.1)
    Case(MAX, "0.33.0", "--max-cudagraph-capture-size 0", layout(), exception="AssertionError",
         refused="Maximum cudagraph size should be greater than or equal to 1", source="vllm/config/vllm.py:2554"),
    Case(MAX, "0.33.0", "--max-cudagraph-capture-size 0 --enforce-eager", layout()),
    Case(MAX, "0.11.1", '--compilation-config {"max_cudagraph_capture_size":0}', layout(),
         exception="AssertionError", refused="Maximum cudagraph size should be greater than or equal to 1",
         source="vllm/config/vllm.py:857"),
    Case(MAX, "0.11.1", '--compilation-config {"max_cudagraph_capture_size":4}', layout()),
    # config/compilation.py:737-741 (0.11.1); 0.12 logs instead
    Case(BACKEND, "0.11.1", '--compilation-config {"backend":"foo"}', layout(),
         refused="Invalid backend for piecewise compilation: foo", source="vllm/config/compilation.py:739"),
    Case(BACKEND, "0.11.1", '--compilation-config {"backend":"foo"} --enforce-eager', layout()),
    Case(BACKEND, "0.12.0", '--compilation-config {"backend":"foo"}', layout()),
    # config/vllm.py:1292-1302 (0.28.0); 3264-3300 (0.33.0)
    Case(GRAPHS, "0.28.0", PROTON, layout(), refused="The Proton profiler requires CUDA graphs to be disabled",
         source="vllm/config/vllm.py:1298"),
    Case(GRAPHS, "0.28.0", f"{PROTON} --enforce-eager", layout()),
    Case(GRAPHS, "0.29.0", f'{PROTON} -cc {{"cudagraph_mode":"NONE"}}', layout()),
    Case(GRAPHS, "0.33.0", PROTON, layout(), refused="Proton profiling with CUDA graphs requires "
         "proton_graph_attribution=True", source="vllm/config/vllm.py:3296"),
    Case(GRAPHS, "0.33.0", '--profiler-config {"profiler":"proton","proton_mode":"pcsampling"}', layout(),
         refused="Proton PC sampling requires CUDA graphs to be disabled", source="vllm/config/vllm.py:3291"),
    Case(GRAPHS, "0.33.0", '--profiler-config {"profiler":"proton","proton_mode":"pcsampling"} '
         '-cc {"cudagraph_mode":"NONE"}', layout()),
    Case(GRAPHS, "0.30.0", f"{PROTON} --enforce-eager", layout()),
    Case(GRAPHS, "0.27.0", PROTON, layout()),
    # config/vllm.py:1892-1897 and 2296-2304 (0.33.0), 2056 (0.30.0)
    Case(HI, "0.33.0", f'{HISPARSE} -cc {{"cudagraph_mode":"FULL"}}', layout(), model=DSA,
         refused="HiSparse does not support cudagraph_mode=FULL", source="vllm/config/vllm.py:1893"),
    Case(HI, "0.33.0", f'{HISPARSE} -cc {{"cudagraph_mode":"FULL_DECODE_ONLY"}}', layout(), model=DSA),
    Case(HI, "0.31.0", f'{HISPARSE} -cc {{"cudagraph_mode":"FULL"}}', layout(), model=DSA),
    Case(HI, "0.30.0", f"{HISPARSE} --disable-hybrid-kv-cache-manager", layout(), model=DSA,
         refused="HiSparse requires the hybrid KV cache manager", source="vllm/config/vllm.py:2056"),
    Case(HI, "0.33.0", f"{HISPARSE} --disable-hybrid-kv-cache-manager", layout(), model=DSA,
         refused="HiSparse requires the hybrid KV cache manager", source="vllm/config/vllm.py:2300"),
    Case(HI, "0.33.0", "--disable-hybrid-kv-cache-manager", layout(), model=DSA),
    # config/kernel.py:177-183 (0.29.0), 193-227 and 230-242 (0.33.0)
    Case(EP, "0.29.0", "--moe-backend flashinfer_moe_ep_mega_cutedsl", layout(), model="moe",
         refused="moe_backend='flashinfer_moe_ep_mega_cutedsl' is only supported for DeepSeek-V4 models "
         "(['DeepSeekV4MTPModel', 'DeepseekV4ForCausalLM']), but the model is ['Qwen3MoeForCausalLM'].",
         source="vllm/config/kernel.py:178"),
    Case(EP, "0.29.0", "--moe-backend triton", layout(), model="moe"),
    Case(EP, "0.33.0", "--moe-backend flashinfer_moe_ep_mega_deep_gemm", layout(), model="moe",
         refused="is only supported for DeepSeek-V4 models", source="vllm/config/kernel.py:238"),
    Case(EP, "0.33.0", "--moe-backend flashinfer_moe_ep_cutedsl --all2all-backend deepep_low_latency", layout(),
         model="moe", refused="moe_backend='flashinfer_moe_ep_cutedsl' dispatches and combines itself and cannot be "
         "paired with all2all_backend='deepep_low_latency'", source="vllm/config/kernel.py:211"),
    Case(EP, "0.33.0", "--moe-backend flashinfer_moe_ep_cutedsl", layout(), model="moe"),
    # config/mamba.py:15-22, engine/arg_utils.py:2772-2773 (0.33.0)
    Case(MAMBA, "0.33.0", "--mamba-backend foo", layout(),
         refused="Unknown Mamba SSU backend: 'FOO'. Valid options are: TRITON, FLASHINFER, CPU",
         source="vllm/config/mamba.py:20"),
    Case(MAMBA, "0.20.0", "--mamba-backend cpu", layout(),
         refused="Unknown Mamba SSU backend: 'CPU'. Valid options are: TRITON, FLASHINFER",
         source="vllm/config/mamba.py:20"),
    Case(MAMBA, "0.33.0", "--mamba-backend flashinfer", layout()),
    # config/parallel.py:88-91 (0.14.0), 123-132 (0.33.0)
    Case(EPLB, "0.14.0", '--eplb-config {"log_balancedness":true,"log_balancedness_interval":0}', layout(),
         model="moe", refused="log_balancedness_interval must be greater than 0.", source="vllm/config/parallel.py:90"),
    Case(EPLB, "0.14.0", '--eplb-config {"log_balancedness":true,"log_balancedness_interval":5}', layout(),
         model="moe"),
    Case(EPLB, "0.33.0", '--eplb-config {"communicator":"pynccl"}', layout(), model="moe",
         refused="pynccl communicator is incompatible with async EPLB", source="vllm/config/parallel.py:125"),
    Case(EPLB, "0.33.0", '--eplb-config {"communicator":"pynccl","use_async":false}', layout(), model="moe"),
    Case(EPLB, "0.22.0", '--eplb-config {"communicator":"pynccl"}', layout(), model="moe"),
    # config/parallel.py:812-835 (0.33.0)
    Case(NNODES, "0.33.0", "--nnodes 3 --data-parallel-size-local 1", layout(tp=3, dp=2), model="moe",
         refused="nnodes (3) must be divisible by the number of data parallel node groups (2 = data_parallel_size 2 "
         "/ data_parallel_size_local 1)", source="vllm/config/parallel.py:828"),
    Case(NNODES, "0.33.0", "--nnodes 2 --data-parallel-size-local 1", layout(tp=2, dp=2), model="moe"),
    Case(NNODES, "0.30.0", "--nnodes 3 --data-parallel-size-local 1", layout(tp=3, dp=2), model="moe"),
    # config/parallel.py:530-535 (0.33.0), 461 (0.27.0)
    Case(FT, "0.33.0", f"{FT_LB} --api-server-count 2", layout(dp=2), model="moe",
         refused="Fault tolerance requires a single API server process (--api-server-count=1), but got 2",
         source="vllm/config/parallel.py:531"),
    Case(FT, "0.27.0", f"{FT_LB} --api-server-count 4", layout(dp=2), model="moe",
         refused="but got 4", source="vllm/config/parallel.py:461"),
    Case(FT, "0.33.0", FT_LB, layout(dp=2), model="moe"),
    # engine/arg_utils.py:1289-1295 (0.8.0), 1192-1197 (0.10.0)
    Case(STEPS, "0.8.0", f"{M8} --num-scheduler-steps 4 --enable-chunked-prefill", layout(pp=2),
         refused="Multi-Step Chunked-Prefill is not supported for pipeline-parallel-size > 1",
         source="vllm/engine/arg_utils.py:1294"),
    Case(STEPS, "0.8.0", f"{M8} --num-scheduler-steps 4 --enable-chunked-prefill", layout()),
    Case(STEPS, "0.10.0", "--num-scheduler-steps 4 --enable-chunked-prefill", layout(pp=2),
         refused="Multi-Step Chunked-Prefill", source="vllm/engine/arg_utils.py:1197"),
    Case(STEPS, "0.10.0", "--num-scheduler-steps 4 --no-enable-chunked-prefill", layout(pp=2)),
    # config/vllm.py:1146-1168 (0.29.0), 1572-1590 (0.33.0)
    Case(NX, "0.29.0", f"{NIXL} -pcp 2", layout(tp=2), exception="AssertionError",
         refused="NIXL does not support prefill context parallelism.", source="vllm/config/vllm.py:1151"),
    Case(NX, "0.29.0", f"{NIXL} -dcp 2", layout(tp=4), model=DSA, exception="AssertionError",
         refused="decode_context_parallel_size=2 must be 1 or equal to tensor_parallel_size=4 when using "
         "NixlConnector.", source="vllm/config/vllm.py:1156"),
    Case(NX, "0.29.0", f"{NIXL} -dcp 2", layout(tp=2), model=HYBRID, exception="AssertionError",
         refused="is only supported for MLA models", source="vllm/config/vllm.py:1161"),
    Case(NX, "0.33.0", f"{NIXL} -dcp 2", layout(tp=2), exception="AssertionError",
         refused="PD with decode_context_parallel_size > 1 is only supported for MLA models.",
         source="vllm/config/vllm.py:1587"),
    Case(NX, "0.33.0", f"{NIXL} -dcp 2", layout(tp=4), model=DSA, exception="AssertionError",
         refused="decode_context_parallel_size=2 must be 1 or equal to the NIXL transfer parallel size=4.",
         source="vllm/config/vllm.py:1582"),
    Case(NX, "0.33.0", f"{NIXL} -dcp 2", layout(tp=2), model=DSA),
    Case(NX, "0.33.0", NIXL, layout(tp=2)),
    # config/vllm.py:857-865 (0.22.0)
    Case(ROUTED, "0.22.0", f"--enable-return-routed-experts {NIXL}", layout(), model="moe",
         refused="--enable-return-routed-experts is incompatible with KV connectors", source="vllm/config/vllm.py:861"),
    Case(ROUTED, "0.22.0", "--enable-return-routed-experts", layout(), model="moe"),
    Case(ROUTED, "0.31.0", f"--enable-return-routed-experts {NIXL}", layout(), model="moe"),
    # config/vllm.py:1187-1243 (0.33.0), 1172-1214 (0.31.0)
    Case(AUX, "0.33.0", f"--enable-return-routed-experts {NIXL}", layout(), model="moe",
         refused="--enable-return-routed-experts is incompatible with NixlConnector; PD auxiliary output is not "
         "supported.", source="vllm/config/vllm.py:1241"),
    Case(AUX, "0.31.0", "--enable-return-routed-experts", layout(pp=2), model="moe",
         refused="incompatible with pipeline parallelism (PP > 1)", source="vllm/config/vllm.py:1191"),
    Case(AUX, "0.33.0", "--enable-return-routed-experts -dcp 2", layout(tp=2), model="moe",
         refused="incompatible with context parallelism (DCP/PCP > 1)", source="vllm/config/vllm.py:1226"),
    Case(AUX, "0.33.0", "--enable-return-routed-experts", layout(), model="dense",
         refused="AuxOutput Connector only supports MoE models.", source="vllm/config/vllm.py:1206"),
    Case(AUX, "0.33.0", "--enable-return-routed-experts --no-enable-prefix-caching", layout(), model="moe",
         refused="AuxOutput Connector requires prefix caching.", source="vllm/config/vllm.py:1208"),
    Case(AUX, "0.33.0", "--enable-return-routed-experts", layout(), model="moe"),
    Case(AUX, "0.33.0", "--no-enable-prefix-caching", layout(), model="dense"),
]




V1_RUNNER = (("VLLM_USE_V2_MODEL_RUNNER", "0"),)
V2_RUNNER = (("VLLM_USE_V2_MODEL_RUNNER", "1"),)
ATTRIBUTION = '--profiler-config {"profiler":"proton","proton_graph_attribution":true,"proton_data":"tree"}'

ENV_CASES = [
    # config/vllm.py:3272-3278 (0.33.0)
    EnvCase(Case(RUNNER, "0.33.0", ATTRIBUTION, layout(), refused="Proton CUDA graph attribution requires the V2 "
                 "model runner.", source="vllm/config/vllm.py:3276"), V1_RUNNER),
    EnvCase(Case(RUNNER, "0.33.0", ATTRIBUTION, layout()), V2_RUNNER),
    EnvCase(Case(GRAPHS, "0.33.0", ATTRIBUTION, layout()), V2_RUNNER),
    EnvCase(Case(GRAPHS, "0.33.0", PROTON, layout()), (("TORCH_COMPILE_DISABLE", "1"),)),
    # config/vllm.py:1196-1202 (0.33.0)
    EnvCase(Case(AUX, "0.33.0", "--enable-return-routed-experts", layout(), model="moe",
                 refused="AuxOutput Connector requires Model Runner V2", source="vllm/config/vllm.py:1199"), V1_RUNNER),
    EnvCase(Case(AUX, "0.33.0", "--enable-return-routed-experts", layout(), model="moe"), V2_RUNNER),
    # VLLM_USE_V1=1: V1's oracle refuses multi-step first (its own words), this check is not reached
    EnvCase(Case(STEPS, "0.8.0", f"{M8} --num-scheduler-steps 4 --enable-chunked-prefill", layout(pp=2)),
            (("VLLM_USE_V1", "1"),)),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_line(case: LineCase) -> None:
    judge(case, model_of)


@pytest.mark.parametrize("env_case", ENV_CASES, ids=lambda c: case_id(c.case))
def test_line_with_env(env_case: EnvCase) -> None:
    judge(env_case.case, model_of, env_case.env)


def test_unresolved_values_are_named_not_guessed() -> None:
    """Where the release's own choice decides (the V2 model runner, V0's chunked-prefill default, the CUDA-graph mode
    under TORCH_COMPILE_DISABLE), the entry is named as not judged and nothing is refused."""
    for version, line, lay, env, rule in (
            ("0.33.0", "--enable-return-routed-experts", layout(), {}, AUX),
            ("0.10.0", "--num-scheduler-steps 4", layout(pp=2), {}, STEPS),
            ("0.33.0", PROTON, layout(), {"TORCH_COMPILE_DISABLE": "1"}, GRAPHS)):
        args = resolve(line.split(), Version(version))
        judged = config_check(args, model_of("moe"), lay, Version(version), env=env)
        assert not [r for r in judged.refusals if r.rule == rule]
        assert any(f"({rule})" in n for n in judged.not_judged), judged.not_judged


def test_nixl_dcp_on_a_hybrid_model_is_refused_twice() -> None:
    """0.29.0 asserts MLA, then that the model is not hybrid (config/vllm.py:1160-1168): a hybrid model without MLA
    at DCP 2 fails both, each said at its line; at DCP 1 neither."""
    version = Version("0.29.0")
    for line, sources in ((f"{NIXL} -dcp 2", {"vllm/config/vllm.py:1161", "vllm/config/vllm.py:1165"}),
                          (NIXL, set())):
        judged = config_check(resolve(line.split(), version), model_of(HYBRID), layout(tp=2), version)
        assert {r.source for r in judged.refusals if r.rule == NX} == sources
