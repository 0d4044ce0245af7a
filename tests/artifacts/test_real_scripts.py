"""Public deployment scripts nobody here wrote (tests/data/deploy/scripts/, each with its source URL), read as
the shell runs them: every engine invocation with its engine, model, TP / PP / DP and line (issue 30)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pytest_gpulayout.artifacts import commands
from pytest_gpulayout.artifacts.load import load_artifact
from pytest_gpulayout.engines.registry import get_engine
from pytest_gpulayout.inputs.shell import read_script

SCRIPTS = Path(__file__).parents[1] / "data" / "deploy" / "scripts"
MACHINE = "preset:8xH100-sxm"

#: file -> [(source, engine, model, tp, pp, dp)], one per invocation the script runs
REAL = {
    "itrap-start_vlm_server.sh": [("itrap-start_vlm_server.sh:3", "vllm",
                                   "/home/troth/bt/iTRAP/iTRAP/models/Qwen2-VL/pretrained/qwen2_vl_lora_sft_calvin",
                                   1, 1, 1)],
    "korgym-qwen25-72b.sh": [("korgym-qwen25-72b.sh:5", "vllm", "/map-vepfs/models/jiajun/Qwen/Qwen2.5-72B-Instruct",
                              4, 2, 1)],
    "pyvision-srun-serve.sh": [("pyvision-srun-serve.sh:3", "vllm",
                                "/mnt/petrelfs/zhaoshitian/gveval_zhaoshitian/Qwen2.5-72B-Instruct", 8, 1, 1)],
    "opentutorgym-start_server.sh": [("opentutorgym-start_server.sh:4", "vllm", "$1", 2, 1, 1)],
    "devops-sglang-run.sh": [("devops-sglang-run.sh:9", "sglang", "/data/DeepSeek-V3.1-Terminus", 8, 1, 1)],
    "rx-labs-run-model.sh": [("rx-labs-run-model.sh:5", "vllm", "meta-llama/Meta-Llama-3-8B-Instruct", 1, 1, 1)],
    "sglang-ms-start_server.sh": [("sglang-ms-start_server.sh:3", "sglang", "/home/ckpt/Qwen3-8B", 1, 1, 1)],
    "longbench-launchserver.sh": [("longbench-launchserver.sh:8", "sglang", "Qwen/Qwen2.5-1.5B-Instruct", 1, 1, 4)],
    "gustobot-vllm-skywork.sh": [("gustobot-vllm-skywork.sh:7", "vllm", "/data/models/Skywork-R1V3-38B", 4, 1, 1)],
}


def _layout(inv: commands.Invocation) -> tuple[str, str, str, int, int, int]:
    """What the engine's own parser reads from an invocation (the release's refusals are the front door's)."""
    engine = get_engine(inv.engine)
    parsed = engine.cli.parse_args(list(inv.args))
    flags, table = engine.cli.flags, parsed.table

    def value(spelling: str, default: str | None = None) -> str | None:
        got = parsed.value(table.canonical(spelling) or spelling) if spelling else None
        return got if got is not None else default

    model = value(flags.model) or parsed.positionals[0]
    sizes = [int(value(getattr(flags, k), "1") or 1) for k in ("tensor_parallel_size", "pipeline_parallel_size",
                                                                "data_parallel_size")]
    return inv.source, inv.engine, model, sizes[0], sizes[1], sizes[2]


@pytest.mark.parametrize("name", sorted(REAL))
def test_each_invocation_of_a_real_script(name: str) -> None:
    found = commands.find_in_text((SCRIPTS / name).read_text(), name)
    assert [_layout(inv) for inv in found] == REAL[name]


def test_a_real_script_becomes_deployments() -> None:
    [f] = load_artifact(SCRIPTS / "korgym-qwen25-72b.sh", MACHINE)
    d = f.deployment
    assert (f.source, d.engine, d.model, d.tp, d.pp) == ("korgym-qwen25-72b.sh:5", "vllm",
                                                         "/map-vepfs/models/jiajun/Qwen/Qwen2.5-72B-Instruct", 4, 2)


def test_what_the_scripts_say_around_the_engine() -> None:
    [itrap] = load_artifact(SCRIPTS / "itrap-start_vlm_server.sh", MACHINE)
    assert itrap.deployment.gpus == (0,)                       # CUDA_VISIBLE_DEVICES=0 prefix
    [korgym] = load_artifact(SCRIPTS / "korgym-qwen25-72b.sh", MACHINE)
    assert korgym.deployment.gpus == tuple(range(8)) and korgym.deployment.max_model_len == 15000
    [devops] = commands.find_in_text((SCRIPTS / "devops-sglang-run.sh").read_text(), "run.sh")
    assert devops.env["NCCL_SOCKET_IFNAME"] == "bond0"         # exported before the launch
    [srun] = read_script((SCRIPTS / "pyvision-srun-serve.sh").read_text()).commands
    assert srun.via == ("srun",) and srun.argv[:2] == ("vllm", "serve")
    [docker] = commands.find_in_text((SCRIPTS / "rx-labs-run-model.sh").read_text(), "run-model.sh")
    assert (docker.image, docker.entry) == ("vllm/vllm-openai:latest", "vllm serve")
    [tutor] = commands.find_in_text((SCRIPTS / "opentutorgym-start_server.sh").read_text(), "start_server.sh")
    assert tutor.unknown == ("$1", "$2")                       # the script's own arguments: not silently dropped


def test_an_image_that_is_no_engines_own_runs_no_known_entry_point() -> None:
    # vastai/vllm: its entry point is not known here, so its flags are not taken for vLLM's; the image is read
    text = (SCRIPTS / "miniprod-vllm-docker.sh").read_text()
    assert commands.find_in_text(text, "vllm.sh") == []
    [run] = read_script(text).commands
    assert run.image == "vastai/vllm:v0.7.0-cuda-12.1-pytorch-2.5.1-py312" and run.argv[:2] == ("--model",
                                                                                               "/workspace/tuning/"
                                                                                               "pretrained_models/"
                                                                                               "exported_full_model")
    assert "$(pwd)" not in run.unknown  # a -v mount of docker's own, not the container's command line


def test_a_multi_node_script_with_its_arguments_given() -> None:
    text = (SCRIPTS / "s-grpo-serving.sh").read_text()
    bare = read_script(text).commands
    launches = [c for c in bare if "sglang.launch_server" in c.argv]
    assert [c.line for c in launches] == [29, 39] and "$1" in launches[0].unknown
    given = read_script(text, {"RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "5000"},
                        positional=["deepseek-ai/DeepSeek-V3", "2"]).commands
    head = [c for c in given if "sglang.launch_server" in c.argv][0]
    argv = list(head.argv)
    assert argv[argv.index("--model-path") + 1] == "deepseek-ai/DeepSeek-V3"
    assert argv[argv.index("--tp") + 1] == "16" and argv[argv.index("--nnodes") + 1] == "2"
    assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.1:5000" and head.unknown == ()


def test_a_skypilot_run_block_with_the_task_envs_and_skypilots_variables() -> None:
    task = yaml.safe_load((SCRIPTS / "skypilot-kimi-k2.yaml").read_text())
    env = {**task["envs"], "SKYPILOT_NUM_GPUS_PER_NODE": "8", "SKYPILOT_NUM_NODES": "2", "SKYPILOT_NODE_RANK": "0"}
    [serve] = commands.find_in_text(task["run"], "kimi-k2.yaml/run", env)
    assert serve.source == "kimi-k2.yaml/run:33" and serve.args[0] == "moonshotai/Kimi-K2-Instruct"
    assert serve.args[serve.args.index("--tensor-parallel-size") + 1] == "8"
    assert serve.args[serve.args.index("--pipeline-parallel-size") + 1] == "2"
    [unset] = commands.find_in_text(task["run"], "run", task["envs"])
    assert set(unset.unknown) == {"$SKYPILOT_NUM_GPUS_PER_NODE", "$SKYPILOT_NUM_NODES"}


def test_a_positional_model_after_an_engine_image_is_its_entry_points_argument() -> None:
    """``docker run vllm/vllm-openai:v0.10.1 MODEL --flags``: Docker appends the arguments to the image's ENTRYPOINT
    (``vllm serve``), so the model is served; a shell or an engine command after the image is run instead."""
    line = "docker run --gpus all vllm/vllm-openai:v0.10.1 Qwen/Qwen2.5-7B-Instruct --max-model-len 1024"
    [inv] = commands.find_in_text(line, "serve.sh")
    assert (inv.engine, inv.entry, inv.args[:1], inv.image) == ("vllm", "vllm serve", ("Qwen/Qwen2.5-7B-Instruct",),
                                                                 "vllm/vllm-openai:v0.10.1")
    line = "docker run vllm/vllm-openai:v0.10.1 sh -c 'vllm serve Qwen/Qwen3-8B -tp 2'"
    [inv] = commands.find_in_text(line, "serve.sh")
    assert inv.args == ("Qwen/Qwen3-8B", "-tp", "2")
