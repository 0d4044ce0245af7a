"""vLLM's config-time refusals of launch-mode combinations (``engines/vllm/config_checks.py``): each command line
read by the release's own parser (``engines/vllm/cli.resolve``: the flags' destinations, ``--compilation-config``
JSON and dotted keys), then judged by the rules over the ledger's entries, in the release's words and at its line
(read in the unpacked wheels: ``vllm/engine/arg_utils.py``, ``vllm/config/vllm.py``, ``vllm/config/parallel.py``,
``vllm/config/mamba.py``). Each refusal has its accepted neighbour: the same line without the conflict, or a
release that does not hold the check.
"""

from __future__ import annotations

import json

import pytest
from packaging.version import Version
from vllm_line_cases import B200, LineCase, case_id, judge, layout, model_of

from pytest_gpulayout.cli import main
from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check
from pytest_gpulayout.refusals import Layout

Case = LineCase

CASES = [
    # engine/arg_utils.py:2834-2849 (0.33.0): a top-level CUDA-graph flag and the same key of --compilation-config
    Case("vllm.compilation.capture_sizes_twice", "0.33.0",
         '--cudagraph-capture-sizes 1 2 4 -cc {"cudagraph_capture_sizes":[1,2]}', layout(),
         refused="cudagraph_capture_sizes and compilation_config.cudagraph_capture_sizes are mutually exclusive",
         source="vllm/engine/arg_utils.py:2836"),
    Case("vllm.compilation.capture_sizes_twice", "0.33.0",
         "--max-cudagraph-capture-size 256 -cc.max_cudagraph_capture_size=128", layout(),
         refused="max_cudagraph_capture_size and compilation_config.max_cudagraph_capture_size are mutually exclusive",
         source="vllm/engine/arg_utils.py:2843"),
    Case("vllm.compilation.capture_sizes_twice", "0.33.0",
         '--max-cudagraph-capture-size 256 -cc {"cudagraph_capture_sizes":[1,2]}', layout()),
    Case("vllm.compilation.capture_sizes_twice", "0.12.0",
         '--cuda-graph-sizes 8 --compilation-config {"cudagraph_capture_sizes":[1,2]}', layout(),
         refused="cuda_graph_sizes and compilation_config.cudagraph_capture_sizes are mutually exclusive",
         source="vllm/engine/arg_utils.py:1711"),
    # engine/arg_utils.py:1289-1297 (0.11.0); config/vllm.py:562-566 (0.14.1); 0.15 turns it off instead
    Case("vllm.scheduler.async_with_pp", "0.11.0", "--async-scheduling", layout(pp=2),
         refused="Async scheduling is not supported with pipeline-parallel-size > 1.",
         source="vllm/engine/arg_utils.py:1296"),
    Case("vllm.scheduler.async_with_pp", "0.14.1", "--async-scheduling", layout(pp=2),
         refused="Async scheduling is not yet compatible with pipeline_parallel_size > 1.",
         source="vllm/config/vllm.py:565"),
    Case("vllm.scheduler.async_with_pp", "0.14.1", "", layout(pp=2)),      # the default (None) is resolved
    Case("vllm.scheduler.async_with_pp", "0.14.1", "--async-scheduling", layout(tp=2)),
    Case("vllm.scheduler.async_with_pp", "0.33.0", "--async-scheduling", layout(pp=2)),
    Case("vllm.scheduler.async_with_uni", "0.10.2", "--async-scheduling --distributed-executor-backend uni",
         layout(), refused="Async scheduling is not supported with uni-process backend."),
    Case("vllm.scheduler.async_with_uni", "0.10.2", "--async-scheduling --distributed-executor-backend mp",
         layout()),
    # config/vllm.py:842-850 (0.22.0)
    Case("vllm.model.routed_experts_parallel", "0.22.0", "--enable-return-routed-experts", layout(pp=2),
         model="moe", refused="--enable-return-routed-experts is incompatible with pipeline parallelism (PP > 1).",
         source="vllm/config/vllm.py:847"),
    Case("vllm.model.routed_experts_parallel", "0.30.0", "--enable-return-routed-experts -dcp 2", layout(tp=4),
         model="moe",
         refused="--enable-return-routed-experts is incompatible with context parallelism (DCP > 1 or PCP > 1)."),
    Case("vllm.model.routed_experts_parallel", "0.30.0", "--enable-return-routed-experts", layout(tp=4),
         model="moe"),
    # engine/arg_utils.py:2444-2459 (0.33.0): --data-parallel-rank alone makes the launch external-LB
    Case("vllm.parallel.external_dp_needs_moe", "0.33.0", "--data-parallel-rank 0", layout(dp=2),
         refused="Non-MoE models do not support external data parallel mode.",
         source="vllm/engine/arg_utils.py:2461"),
    Case("vllm.parallel.external_dp_needs_moe", "0.21.0", "--data-parallel-external-lb --data-parallel-rank 1",
         layout(dp=2), refused="Non-MoE models do not support external data parallel mode."),
    Case("vllm.parallel.external_dp_needs_moe", "0.33.0", "--data-parallel-rank 0", layout(dp=2), model="moe"),
    Case("vllm.parallel.external_dp_needs_moe", "0.33.0", "", layout(dp=2)),
    Case("vllm.parallel.external_dp_needs_moe", "0.20.0", "--data-parallel-rank 0", layout(dp=2)),
    Case("vllm.parallel.hybrid_and_external_lb", "0.33.0", "--data-parallel-hybrid-lb --data-parallel-external-lb",
         layout(dp=2), model="moe",
         refused="`--data-parallel-hybrid-lb` and `--data-parallel-external-lb` cannot be enabled together.",
         source="vllm/engine/arg_utils.py:2384"),
    Case("vllm.parallel.hybrid_and_external_lb", "0.20.0", "--data-parallel-hybrid-lb --data-parallel-external-lb",
         layout(dp=2), model="moe", exception="AssertionError",
         refused="data_parallel_hybrid_lb and data_parallel_external_lb cannot both be True."),
    Case("vllm.parallel.hybrid_and_external_lb", "0.33.0", "--data-parallel-hybrid-lb", layout(dp=2), model="moe"),
    Case("vllm.parallel.fault_tolerance_needs_external_lb", "0.33.0", "--enable-fault-tolerance", layout(dp=2),
         model="moe", refused="Fault tolerance requires external load balancer mode",
         source="vllm/engine/arg_utils.py:2451"),
    Case("vllm.parallel.fault_tolerance_needs_external_lb", "0.33.0", "--enable-fault-tolerance --data-parallel-rank 1",
         layout(dp=2), model="moe"),
    # config.py:2127-2143 (0.10.0), config/parallel.py:355-373 (0.10.2: the count via --num-redundant-experts or
    # --eplb-config); EPLB itself needs EP, which is another rule
    Case("vllm.parallel.redundant_experts_need_eplb", "0.10.0", "--enable-expert-parallel --num-redundant-experts 2",
         layout(tp=2), model="moe", refused="num_redundant_experts should be used with EPLB.2.",
         source="vllm/config.py:2141"),
    Case("vllm.parallel.redundant_experts_need_eplb", "0.10.2",
         '--enable-expert-parallel --eplb-config {"num_redundant_experts":4}', layout(tp=2), model="moe",
         refused="num_redundant_experts is set to 4 but EPLB is not enabled.", source="vllm/config/parallel.py:370"),
    Case("vllm.parallel.redundant_experts_need_eplb", "0.10.2",
         "--enable-expert-parallel --enable-eplb --num-redundant-experts -1", layout(tp=2), model="moe",
         refused="num_redundant_experts must be non-negative, but got -1.", source="vllm/config/parallel.py:356"),
    Case("vllm.parallel.redundant_experts_need_eplb", "0.10.2",
         "--enable-expert-parallel --enable-eplb --num-redundant-experts 2", layout(tp=2), model="moe"),
    # config/mamba.py:57-72 (0.20.0) before config/vllm.py (the SSM cache's dtype)
    Case("vllm.mamba.stochastic_rounding", "0.33.0", "--enable-mamba-cache-stochastic-rounding", layout(),
         refused="Stochastic rounding for Mamba cache with triton backend requires compute capability 10.0",
         source="vllm/config/mamba.py:98"),
    Case("vllm.mamba.stochastic_rounding", "0.33.0", "--enable-mamba-cache-stochastic-rounding", layout(cc=B200),
         refused="Stochastic rounding for Mamba cache requires the SSM cache to be float16.",
         source="vllm/config/vllm.py:1599"),
    Case("vllm.mamba.stochastic_rounding", "0.33.0",
         "--enable-mamba-cache-stochastic-rounding --mamba-ssm-cache-dtype float16", layout(cc=B200)),
    Case("vllm.mamba.stochastic_rounding", "0.33.0", "--mamba-ssm-cache-dtype float32", layout()),
    # engine/arg_utils.py:2867-2878 (0.33.0): fused is ROCm's; flashkda is CUDA's
    Case("vllm.kernel.kda_fused_needs_rocm", "0.33.0", "--kda-prefill-backend fused", layout(),
         refused="--kda-prefill-backend=fused is only available on ROCm.", source="vllm/engine/arg_utils.py:2876"),
    Case("vllm.kernel.kda_fused_needs_rocm", "0.33.0", "--kda-prefill-backend flashkda", layout()),
]


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_the_release_refuses_the_line_in_its_own_words(case: LineCase) -> None:
    judge(case)


def test_every_new_rule_has_a_refusing_and_an_accepted_case() -> None:
    refusing = {c.rule for c in CASES if c.refused is not None}
    accepted = {c.rule for c in CASES if c.refused is None}
    assert refusing == accepted


def test_a_stochastic_rounding_line_on_an_unknown_gpu_is_said_not_judged() -> None:
    """The triton backend's capability check reads the GPU's compute capability: unknown, it is not guessed."""
    version = Version("0.33.0")
    args = resolve(["--enable-mamba-cache-stochastic-rounding", "--mamba-ssm-cache-dtype", "float16"], version)
    judged = config_check(args, model_of("dense"), Layout(), version)
    assert not [r for r in judged.refusals if r.rule == "vllm.mamba.stochastic_rounding"]
    assert any("mamba.py" in n and "is_device_capability_family" in n for n in judged.not_judged)


@pytest.mark.parametrize(("line", "refused"), [
    ("vllm serve Qwen/Qwen3-8B --data-parallel-size 2 --data-parallel-rank 0",
     "Non-MoE models do not support external data parallel mode."),
    ("vllm serve Qwen/Qwen3-30B-A3B --data-parallel-size 2 --data-parallel-rank 0", None),
    ("vllm serve Qwen/Qwen3-8B --max-cudagraph-capture-size 256 -cc.max_cudagraph_capture_size=128",
     "max_cudagraph_capture_size and compilation_config.max_cudagraph_capture_size are mutually exclusive"),
    ("vllm serve Qwen/Qwen3-8B --max-cudagraph-capture-size 256", None),
])
def test_gpulayout_check_fails_the_config_check_in_the_releases_words(
        capsys: pytest.CaptureFixture[str], line: str, refused: str | None) -> None:
    """``gpulayout check --cmd``: the refusal is the config check's failure (exit 1), the neighbour passes it."""
    code = main(["check", "--cmd", line, "--machine", "preset:8xH100-sxm", "--json"])
    config = json.loads(capsys.readouterr().out)["deployments"]["--cmd:1"]["checks"]["config"]
    if refused is None:
        assert config["status"] == "pass", config["message"]
        return
    assert code == 1 and config["status"] == "fail"
    assert f'vLLM 0.33.0 raises ValueError: "{refused}' in config["message"]
