"""vLLM's config-time refusals of data-parallel and multi-node launch options (``engines/vllm/config_checks.py``):
``--nnodes`` / ``--node-rank`` / ``--data-parallel-backend``, the external and hybrid load balancers'
``--data-parallel-rank`` / ``--data-parallel-size-local``, the DP rank's range, ``--enable-hc-sp`` with PP and
prefill context parallel's limits. Each line is read by the release's own parser (``engines/vllm/cli.resolve``),
then judged over the values ``EngineArgs.create_engine_config`` and ``ParallelConfig`` hold (read in the unpacked
wheels: ``vllm/engine/arg_utils.py``, ``vllm/config/parallel.py``, ``vllm/config/model.py``). Each refusal has
its accepted neighbour: the same line without the conflict, or a release that does not hold the check.
"""

from __future__ import annotations

import json
from functools import partial

import pytest
from vllm_line_cases import LineCase, case_id, judge, layout

from pytest_gpulayout.cli import main

NNODES = "vllm.parallel.nnodes_options"
EXTERNAL = "vllm.parallel.external_lb_options"
RANK = "vllm.parallel.dp_rank_range"
NEEDS_DP = "vllm.parallel.external_lb_needs_dp"
HC_SP = "vllm.parallel.hc_sp_needs_pp1"
PCP = "vllm.parallel.pcp_limits"

#: a launch case: a MoE model unless it says otherwise (DP and EP lines are about experts)
Case = partial(LineCase, model="moe")


CASES = [
    # engine/arg_utils.py:2389-2422 (0.33.0); 1730-1749 (0.20.0, assertions)
    Case(NNODES, "0.33.0", "--nnodes 2 --node-rank 0 --data-parallel-backend ray", layout(tp=8, dp=2),
         refused="`--nnodes 2` requires `--data-parallel-backend mp`; got `--data-parallel-backend ray`",
         source="vllm/engine/arg_utils.py:2391"),
    Case(NNODES, "0.33.0", "--nnodes 2 --node-rank 1", layout(tp=8, dp=2)),
    Case(NNODES, "0.33.0", "--nnodes 3 --node-rank 0", layout(tp=8, dp=2),
         refused="`--nnodes 3` must evenly divide the total world size (16).", source="vllm/engine/arg_utils.py:2407"),
    # from 0.30 the world counts PCP: 2 x 1 x 2 x PCP 2 = 8 over 4 nodes; 0.29 counts 4, which 8 nodes do not divide
    Case(NNODES, "0.30.0", "--nnodes 4 --node-rank 0 -pcp 2", layout(tp=2, dp=2)),
    Case(NNODES, "0.29.0", "--nnodes 8 --node-rank 0 -pcp 2", layout(tp=2, dp=2),
         refused="`--nnodes 8` must evenly divide the total world size (4).", source="vllm/engine/arg_utils.py:2180"),
    Case(NNODES, "0.33.0", "--nnodes 2 --node-rank 2", layout(tp=8, dp=2),
         refused="`--node-rank` must be between 0 and 1; got `--node-rank 2`.", source="vllm/engine/arg_utils.py:2415"),
    Case(NNODES, "0.20.0", "--nnodes 2 --node-rank 2", layout(tp=8, dp=2), exception="AssertionError",
         refused="node_rank=2 must be less than nnodes=2.", source="vllm/engine/arg_utils.py:1747"),
    Case(NNODES, "0.20.0", "--nnodes 2 --node-rank 0 --data-parallel-backend ray", layout(tp=8, dp=2),
         exception="AssertionError", refused="nnodes > 1 is only supported with data_parallel_backend=mp"),
    # two nodes, four DP ranks: a node holds two, so its --node-rank names no single external rank
    Case(NNODES, "0.33.0", "--nnodes 2 --node-rank 1 --data-parallel-external-lb", layout(tp=2, dp=4),
         refused="`--node-rank` cannot unambiguously identify external data-parallel ranks",
         source="vllm/engine/arg_utils.py:2428"),
    Case(NNODES, "0.33.0", "--nnodes 2 --node-rank 1 --data-parallel-external-lb", layout(tp=4, dp=2)),
    # engine/arg_utils.py:2462-2524 (0.33.0); 1232-1236 (0.11.0)
    Case(EXTERNAL, "0.33.0", "--data-parallel-external-lb", layout(dp=2),
         refused="`--data-parallel-external-lb` requires a data-parallel rank.",
         source="vllm/engine/arg_utils.py:2469"),
    Case(EXTERNAL, "0.33.0", "--data-parallel-external-lb --data-parallel-rank 1", layout(dp=2)),
    Case(EXTERNAL, "0.20.0", "--data-parallel-external-lb", layout(dp=2), exception="AssertionError",
         refused="data_parallel_rank or node_rank must be specified if data_parallel_external_lb is enable.",
         source="vllm/engine/arg_utils.py:1770"),
    Case(EXTERNAL, "0.33.0", "--data-parallel-rank 0 --data-parallel-size-local 2", layout(dp=4),
         refused="an external data-parallel rank requires `--data-parallel-size-local 1`; got 2.",
         source="vllm/engine/arg_utils.py:2477"),
    Case(EXTERNAL, "0.11.0", "--data-parallel-rank 0 --data-parallel-size-local 2", layout(dp=4),
         exception="AssertionError", refused="data_parallel_size_local must be 1 when data_parallel_rank is set",
         source="vllm/engine/arg_utils.py:1235"),
    Case(EXTERNAL, "0.33.0", "--data-parallel-rank 0 --data-parallel-size-local 1", layout(dp=4)),
    Case(EXTERNAL, "0.33.0", "--data-parallel-hybrid-lb", layout(dp=4),
         refused="`--data-parallel-hybrid-lb` requires `--data-parallel-size-local`.",
         source="vllm/engine/arg_utils.py:2520"),
    Case(EXTERNAL, "0.33.0", "--data-parallel-hybrid-lb --data-parallel-size-local 2", layout(dp=4)),
    # --nnodes infers the local size for the internal LB (engine/arg_utils.py:2440-2444 in 0.33.0)
    Case(EXTERNAL, "0.33.0", "--data-parallel-hybrid-lb --nnodes 2 --node-rank 0", layout(tp=4, dp=4)),
    # config/parallel.py:1018 (0.33.0): the rank ParallelConfig is given; the size-local start rank too
    Case(RANK, "0.33.0", "--data-parallel-rank 2", layout(dp=2),
         refused="data_parallel_rank (2) must be in the range [0, 2)", source="vllm/config/parallel.py:1018"),
    Case(RANK, "0.33.0", "--data-parallel-rank 1", layout(dp=2)),
    Case(RANK, "0.10.0", "--data-parallel-rank 4", layout(dp=4),
         refused="data_parallel_rank (4) must be in the range [0, 4)", source="vllm/config.py:2101"),
    Case(RANK, "0.33.0", "--data-parallel-size-local 2 --data-parallel-start-rank 4", layout(dp=4),
         refused="data_parallel_rank (4) must be in the range [0, 4)"),
    Case(RANK, "0.33.0", "--data-parallel-size-local 2 --data-parallel-start-rank 2", layout(dp=4)),
    # config/parallel.py:552 (0.33.0): a rank given to a single engine
    Case(NEEDS_DP, "0.33.0", "--data-parallel-rank 0", layout(tp=2), model="dense",
         refused="data_parallel_external_lb can only be set when data_parallel_size > 1",
         source="vllm/config/parallel.py:552"),
    Case(NEEDS_DP, "0.10.1", "--data-parallel-rank 0", layout(tp=2), model="dense",
         refused="data_parallel_external_lb can only be set when data_parallel_size > 1",
         source="vllm/config/parallel.py:269"),
    Case(NEEDS_DP, "0.33.0", "--data-parallel-rank 0", layout(tp=2, dp=2)),
    Case(NEEDS_DP, "0.33.0", "", layout(tp=2), model="dense"),
    # config/model.py:1549-1556 (0.33.0)
    Case(HC_SP, "0.33.0", "--enable-hc-sp", layout(tp=2, pp=2), model="dense",
         refused="--enable-hc-sp requires PP=1", source="vllm/config/model.py:1555"),
    Case(HC_SP, "0.33.0", "--enable-hc-sp", layout(tp=2), model="dense"),
    # config/parallel.py:316 (0.12.0), :549 (0.26.0-0.29.0); 0.30 serves PCP with DP
    Case(PCP, "0.12.0", "-pcp 2", layout(tp=2), model="dense",
         refused="Prefill context parallelism is not fully supported.", source="vllm/config/parallel.py:316"),
    Case(PCP, "0.29.0", "-pcp 2", layout(tp=2, dp=2), model="dense",
         refused="PCP does not support data parallelism yet.", source="vllm/config/parallel.py:549"),
    Case(PCP, "0.29.0", "-pcp 2", layout(tp=2), model="dense"),
    Case(PCP, "0.30.0", "-pcp 2", layout(tp=2, dp=2), model="dense"),
]


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_the_release_refuses_the_launch_options_in_its_own_words(case: LineCase) -> None:
    judge(case)


def test_every_launch_rule_has_a_refusing_and_an_accepted_case() -> None:
    refusing = {c.rule for c in CASES if c.refused is not None}
    accepted = {c.rule for c in CASES if c.refused is None}
    assert refusing == accepted == {NNODES, EXTERNAL, RANK, NEEDS_DP, HC_SP, PCP}


@pytest.mark.parametrize(("line", "refused"), [
    ("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2 --data-parallel-rank 0",
     "data_parallel_external_lb can only be set when data_parallel_size > 1"),
    ("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2", None),
    ("vllm serve Qwen/Qwen3-30B-A3B --data-parallel-size 4 --data-parallel-rank 0 --data-parallel-size-local 2",
     "Invalid data-parallel launch options: an external data-parallel rank requires `--data-parallel-size-local 1`"),
    ("vllm serve Qwen/Qwen3-30B-A3B --data-parallel-size 4 --data-parallel-rank 0", None),
    ("vllm serve Qwen/Qwen3-30B-A3B --data-parallel-size 2 --data-parallel-rank 2",
     "data_parallel_rank (2) must be in the range [0, 2)"),
    ("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2 --pipeline-parallel-size 2 --enable-hc-sp",
     "--enable-hc-sp requires PP=1"),
    # Qwen3ForCausalLM lacks SupportsHCSP: at TP > 1 the release refuses the model (config/model.py:1552-1553 in
    # 0.33.0); at TP 1 the branch is not taken
    ("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2 --enable-hc-sp",
     "--enable-hc-sp is not supported for this model"),
    ("vllm serve Qwen/Qwen3-8B --enable-hc-sp", None),
])
def test_gpulayout_check_fails_the_launch_options_in_the_releases_words(
        capsys: pytest.CaptureFixture[str], line: str, refused: str | None) -> None:
    """``gpulayout check --cmd``: the refusal is the config check's failure (exit 1), the neighbour passes it."""
    code = main(["check", "--cmd", line, "--machine", "preset:8xH100-sxm", "--json"])
    config = json.loads(capsys.readouterr().out)["deployments"]["--cmd:1"]["checks"]["config"]
    if refused is None:
        assert config["status"] == "pass", config["message"]
        return
    assert code == 1 and config["status"] == "fail"
    assert f'vLLM 0.33.0 raises ValueError: "{refused}' in config["message"]
