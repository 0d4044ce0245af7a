"""Public artifacts nobody here wrote (tests/data/deploy/public/, each with its source URL), of every kind the
readers know: each engine invocation found with its engine, model and TP / PP / DP, and every planted defect failing
its check with one JSON object under ``--json`` (issue 30, "What it must show")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_gpulayout.artifacts.load import load_artifact
from pytest_gpulayout.cli import main

PUBLIC = Path(__file__).parents[1] / "data" / "deploy" / "public"
MACHINE = "preset:8xH100-sxm"

#: file -> [(source, engine, model, TP, PP, DP)], one per deployment the file runs
REAL: dict[str, list[tuple[str, str, str, int, int, int]]] = {
    "skypilot-deepseek-r1-671B.yaml": [("skypilot-deepseek-r1-671B.yaml/run:6", "sglang", "deepseek-ai/DeepSeek-R1",
                                        16, 1, 1)],  # TP=$(($SKYPILOT_NUM_GPUS_PER_NODE * $SKYPILOT_NUM_NODES))
    "skypilot-gpt-oss-vllm.sky.yaml": [("skypilot-gpt-oss-vllm.sky.yaml/run:2", "vllm", "openai/gpt-oss-120b",
                                        1, 1, 1)],
    "skypilot-llama-3_1.yaml": [("skypilot-llama-3_1.yaml/run:3", "vllm", "meta-llama/Meta-Llama-3.1-8B-Instruct",
                                 8, 1, 1)],  # --tensor-parallel-size $SKYPILOT_NUM_GPUS_PER_NODE of {L4:8, ...}
    "slurm-medical-llm-run_qwen3_8b.sh": [("slurm-medical-llm-run_qwen3_8b.sh:22", "vllm",
                                           "/mnt/inaisfs/data/home/zhaozc_criait/zhangtx/Medical_LLM/Models/Qwen3-8B",
                                           4, 1, 1)],
    "slurm-codellama13b_vllm_server.sh": [("slurm-codellama13b_vllm_server.sh:11", "vllm", "codellama/CodeLlama-13b-hf",
                                           1, 1, 1)],
    "olcf-start_head_bb.sh": [("olcf-start_head_bb.sh:18", "vllm", "/mnt/bb/$USER/$2", 8, 1, 1)],  # PP is $1
    "sonsal-run_server_inside_container.sh": [("sonsal-run_server_inside_container.sh:19", "vllm",
                                               "Qwen/Qwen2.5-0.5B-Instruct", 1, 2, 1)],
    "docker-openreinforcedagent-start_vllm.sh": [("docker-openreinforcedagent-start_vllm.sh:3", "vllm",
                                                  "/workspace/vllm-models/vllm-0", 1, 1, 1)],
    "docker-nlp-serve_7b_model.sh": [("docker-nlp-serve_7b_model.sh:3", "vllm", "Qwen/Qwen2.5-7B-Instruct", 1, 1, 1)],
    "trtllm-deepseek-test-serve.sh": [("trtllm-deepseek-test-serve.sh:3", "trtllm", "/local/deepseek-ai/DeepSeek-R1",
                                       8, 1, 1)],  # trtllm-serve MODEL: no "serve"
    "trtllm-benchmark-start_config1.sh": [("trtllm-benchmark-start_config1.sh:6", "trtllm", "nvidia/DeepSeek-R1-FP4",
                                           8, 1, 1)],
    "ray-serve-qwen-llm_config_example.yaml": [
        ("ray-serve-qwen-llm_config_example.yaml/applications[llm_app].llm_configs[0]", "vllm",
         "Qwen/Qwen2.5-0.5B-Instruct", 1, 1, 1),
        ("ray-serve-qwen-llm_config_example.yaml/applications[llm_app].llm_configs[1]", "vllm",
         "Qwen/Qwen2.5-1.5B-Instruct", 1, 1, 1)],
    "ray-serve-my-llama-3_1-8B.yaml": [("ray-serve-my-llama-3_1-8B.yaml/applications[my-small-llm-app]", "vllm",
                                        "meta-llama/Llama-3.1-8B-Instruct", 1, 1, 1)],
    "kuberay-ray-service.llm-serve.yaml": [("RayService/ray-serve-llm/serveConfigV2/applications[llms]", "vllm",
                                            "Qwen/Qwen2.5-7B-Instruct", 1, 1, 1)],
    "lws-basic-vllm.yaml": [("LeaderWorkerSet/vllm/vllm-leader[leader]", "vllm", "meta-llama/Llama-3.1-405B-Instruct",
                             8, 2, 1)],
    "lws-basic-sglang.yaml": [("LeaderWorkerSet/sglang/sglang-leader[leader]", "sglang",
                               "meta-llama/Meta-Llama-3.1-8B-Instruct", 2, 1, 1)],
    "aibrix-fleet-two-node.yaml": [("RayClusterFleet/qwen-coder-7b-instruct/ray-head", "vllm",
                                    "Qwen/Qwen2.5-Coder-7B-Instruct", 2, 1, 1)],
    "aibrix-vllm-1p1d.yaml": [("StormService/vllm-1p1d/prefill/prefill", "vllm", "/models/Qwen3-8B", 1, 1, 1),
                              ("StormService/vllm-1p1d/decode/decode", "vllm", "/models/Qwen3-8B", 1, 1, 1)],
    "aibrix-sglang-tp-1p1d.yaml": [("StormService/tp-1p1d/prefill/prefill", "sglang", "/models/Qwen3-8B", 2, 1, 1),
                                   ("StormService/tp-1p1d/decode/decode", "sglang", "/models/Qwen3-8B", 2, 1, 1)],
    "aibrix-kvcache-deployment-tp.yaml": [("Deployment/deepseek-coder-33b-instruct/vllm-openai", "vllm",
                                           "deepseek-ai/deepseek-coder-33b-instruct", 4, 1, 1)],
    "triton/tensorrt_llm/config.pbtxt": [("tensorrt_llm/config.pbtxt", "trtllm", "${engine_dir}", 1, 1, 1)],
    # ten more, read the same way (issue 30, the README's artifact section)
    "skypilot-deepseek-r1-671B-A100.yaml": [("skypilot-deepseek-r1-671B-A100.yaml/run:8", "sglang", "DeepSeek-R1-BF16",
                                             16, 1, 1)],  # TP over both nodes; --enable-dp-attention passed on
    "skypilot-llama4.yaml": [("skypilot-llama4.yaml/run:2", "vllm", "meta-llama/Llama-4-Maverick-17B-128E-Instruct-FP8",
                              8, 1, 1)],  # $MODEL_NAME from envs:, TP from the first of {H100:8, H100:12, ...}
    "slurm-nlp-kg-run.sh": [("slurm-nlp-kg-run.sh:11", "vllm", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", 1, 1, 1)],
    "docker-marie-sglang-qwq-x8.sh": [("docker-marie-sglang-qwq-x8.sh:4", "sglang", "Qwen/QwQ-32B", 2, 1, 4)],
    "docker-hidden-capacity-sglang.sh": [("docker-hidden-capacity-sglang.sh:5", "sglang",
                                          "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 1, 1, 1)],  # model=... above
    "docker-deploy-qwen-32k.sh": [("docker-deploy-qwen-32k.sh:5", "vllm", "/qwen/qwen3-30b-a3b", 4, 1, 1)],
    "lws-tas-vllm.yaml": [("LeaderWorkerSet/vllm/vllm-leader[leader]", "vllm", "meta-llama/Llama-3.1-405B-Instruct",
                           8, 2, 1)],
    "lws-autoscaling-sglang.yaml": [("LeaderWorkerSet/sglang/sglang-leader[leader]", "sglang",
                                     "meta-llama/Meta-Llama-3.1-8B-Instruct", 2, 1, 1)],
    "kserve-llmisvc-dp-ep-multi-qwen.yaml": [("LLMInferenceService/qwen3-coder-30b-a3b-instruct/main", "vllm",
                                              "Qwen/Qwen3-Coder-30B-A3B-Instruct", 1, 1, 16)],
    "kserve-llmisvc-a100-draft-target.yaml": [("LLMInferenceService/llama8b-draft-target-a100/main", "vllm",
                                               "meta-llama/Llama-3.1-8B-Instruct", 1, 1, 1)],
}


def test_each_release_the_images_pin_is_the_one_judged() -> None:
    """The image tag picks the parser: a docker run of vllm/vllm-openai:v0.8.5, LWS pins of v0.28.0 and SGLang
    v0.5.18, lmsysorg/sglang:v0.4.5-cu125."""
    pinned = {name: [f.deployment.engine_version for f in load_artifact(PUBLIC / name, MACHINE)]
              for name in ("docker-deploy-qwen-32k.sh", "lws-tas-vllm.yaml", "lws-autoscaling-sglang.yaml",
                           "docker-hidden-capacity-sglang.sh")}
    assert pinned == {"docker-deploy-qwen-32k.sh": ["0.8.5"], "lws-tas-vllm.yaml": ["0.28.0"],
                      "lws-autoscaling-sglang.yaml": ["0.5.18"], "docker-hidden-capacity-sglang.sh": ["0.4.5"]}


@pytest.mark.parametrize("name", sorted(REAL))
def test_every_invocation_is_found_with_its_layout(name: str) -> None:
    found = [(f.source, f.deployment.engine, f.deployment.model, f.deployment.tp, f.deployment.pp, f.deployment.dp)
             for f in load_artifact(PUBLIC / name, MACHINE)]
    assert found == REAL[name]


def test_the_public_set_is_large() -> None:
    assert len(REAL) >= 31 and all((PUBLIC / n).read_text().startswith("# Source: https://github.com/") for n in REAL)


# -- the verdicts: the models they serve read from the catalog (a model map, as a pipeline would give one) ---------

MODELS = {"Qwen/Qwen2.5-7B-Instruct": "Qwen/Qwen2.5-7B-Instruct",
          "meta-llama/Meta-Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct",
          "/mnt/inaisfs/data/home/zhaozc_criait/zhangtx/Medical_LLM/Models/Qwen3-8B": "Qwen/Qwen3-8B",
          "/models/Qwen3-8B": "Qwen/Qwen3-8B", "Qwen/Qwen2.5-Coder-7B-Instruct": "Qwen/Qwen2.5-7B-Instruct",
          "deepseek-ai/deepseek-coder-33b-instruct": "Qwen/Qwen3-32B",
          "deepseek-ai/DeepSeek-R1": "deepseek-ai/DeepSeek-V3",
          "Qwen/Qwen2.5-0.5B-Instruct": "Qwen/Qwen2.5-7B-Instruct",
          "Qwen/Qwen3-Coder-30B-A3B-Instruct": "Qwen/Qwen3-30B-A3B", "/qwen/qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B"}


@pytest.fixture
def model_map(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "models.yaml"
    path.write_text("".join(f"{json.dumps(k)}: {json.dumps(v)}\n" for k, v in MODELS.items()))
    monkeypatch.setenv("GPULAYOUT_MODEL_MAP", str(path))


def check(capsys: pytest.CaptureFixture[str], path: Path, machine: str = MACHINE) -> tuple[int, dict[str, Any]]:
    """``gpulayout check PATH --json``: its exit code and its one JSON object (json.loads refuses a second)."""
    code = main(["check", str(path), "--machine", machine, "--json"])
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, data


def planted(tmp_path: Path, name: str, *edits: tuple[str, str]) -> Path:
    text = (PUBLIC / name).read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / Path(name).name
    path.write_text(text)
    return path


def finding(data: dict[str, Any], deployment: str, check_name: str) -> dict[str, Any]:
    out: dict[str, Any] = data["deployments"][deployment]["checks"][check_name]
    return out


@pytest.mark.usefixtures("model_map")
def test_a_two_node_lws_is_placed_per_node(capsys: pytest.CaptureFixture[str]) -> None:
    """LWS size 2 x 8 GPUs for TP=8 x PP=2 against one 8-GPU node: each pod is one copy of it (not "needs 16 GPUs;
    the machine shows 8"), TP inside each node, the stage boundary across them, and the finding says so."""
    code, data = check(capsys, PUBLIC / "lws-basic-vllm.yaml")
    dep = "LeaderWorkerSet/vllm/vllm-leader[leader]"
    placement = finding(data, dep, "placement")
    assert placement["status"] == "pass" and placement["data"]["gpus"] == list(range(16))
    assert ("on 2 nodes, GPU0-GPU7 on hgx-h100-0, GPU8-GPU15 on hgx-h100-1: one node's machine (preset:8xH100-sxm) "
            "stands for each of the 2 nodes of LeaderWorkerSet/vllm (spec.leaderWorkerTemplate.size)") \
        in placement["message"]
    assert finding(data, dep, "links")["status"] == "pass"  # NVLink inside each TP group
    assert finding(data, dep, "cluster")["status"] == "skip"  # no node facts to compare on a stand-in
    assert finding(data, dep, "config")["status"] == "pass"  # --nnodes $(LWS_GROUP_SIZE) substituted: 2
    assert code == 0 and data["status"] == "warn"  # the deploy warning: no RDMA between the pods


@pytest.mark.usefixtures("model_map")
def test_a_node_smaller_than_the_pod_fails_placement_per_node(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = check(capsys, PUBLIC / "lws-basic-vllm.yaml", "preset:4xA100-80gb-sxm")
    placement = finding(data, "LeaderWorkerSet/vllm/vllm-leader[leader]", "placement")
    assert code == 1 and placement["status"] == "fail"
    assert ("TP=8 PP=2 DP=1 puts 8 GPUs on each of the 2 nodes of LeaderWorkerSet/vllm (spec.leaderWorkerTemplate."
            "size), but the machine that stands for each node (preset:4xA100-80gb-sxm) shows 4") in placement["message"]


@pytest.mark.usefixtures("model_map")
def test_tp_across_the_nodes_of_a_skypilot_task_warns_on_the_network(capsys: pytest.CaptureFixture[str]) -> None:
    """SGLang --tp 16 --nnodes 2 over two 8-GPU nodes: every TP group crosses the network."""
    code, data = check(capsys, PUBLIC / "skypilot-deepseek-r1-671B.yaml")
    dep = "skypilot-deepseek-r1-671B.yaml/run:6"
    assert finding(data, dep, "placement")["status"] == "pass"
    links = finding(data, dep, "links")
    assert links["status"] == "warn" and links["data"]["worst_link"] == "NET"


@pytest.mark.usefixtures("model_map")
def test_real_defects_the_public_files_ship(capsys: pytest.CaptureFixture[str]) -> None:
    # AIBrix's TP=4 Deployment asks for 1 GPU and mounts no /dev/shm: both listed, in one finding
    code, data = check(capsys, PUBLIC / "aibrix-kvcache-deployment-tp.yaml")
    deploy = finding(data, "Deployment/deepseek-coder-33b-instruct/vllm-openai", "deploy")
    assert code == 1 and deploy["status"] == "fail"
    assert deploy["message"].endswith(
        "(1) spec.template.spec.containers[vllm-openai].resources.limits.nvidia.com/gpu is 1, but TP x PP x DP = 4 "
        "(4 x 1 x 1) on this pod: ask for 4; (2) spec.template.spec.volumes has no /dev/shm (an emptyDir with medium: "
        "Memory mounted at /dev/shm) but TP=4: NCCL's shared memory transport runs out of the container's 64 MiB "
        "default")
    # KubeRay's Ray Serve LLM sample passes device: auto, a field vLLM's engine arguments dropped after 0.9
    code, data = check(capsys, PUBLIC / "kuberay-ray-service.llm-serve.yaml")
    config = finding(data, "RayService/ray-serve-llm/serveConfigV2/applications[llms]", "config")
    assert code == 1 and config["status"] == "fail"
    assert "refuses the Ray Serve LLM engine_kwargs before it starts: ValueError: Unknown engine argument: device." \
        in config["message"]


def test_what_nothing_in_the_artifact_sets_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    # olcf's head script takes the node count and the model from its arguments: $1 is the PP size, $2 the model
    code, data = check(capsys, PUBLIC / "olcf-start_head_bb.sh")
    config = finding(data, "olcf-start_head_bb.sh:18", "config")
    assert code == 1 and config["status"] == "fail"
    assert config["message"].startswith("olcf-start_head_bb.sh:18: $1, $USER, $2 are set by nothing in the artifact: "
                                        "give them in the container's env")
    # the Triton template as its repository ships it: fill_template.py has not been run
    code, data = check(capsys, PUBLIC / "triton" / "tensorrt_llm" / "config.pbtxt")
    config = finding(data, "tensorrt_llm/config.pbtxt", "config")
    assert "${engine_dir} is not filled in" in config["message"] and code == 1


#: a planted defect: (file, edits, deployment, the check that fails, the words it fails with)
PLANTED = {
    "gpus-per-pod": ("lws-basic-vllm.yaml", (('nvidia.com/gpu: "8"', 'nvidia.com/gpu: "4"'),),
                     "LeaderWorkerSet/vllm/vllm-leader[leader]", "deploy",
                     "spec.leaderWorkerTemplate.size 2 x 4 GPUs per pod = 8, but TP x PP x DP = 16 (8 x 2 x 1): the "
                     "group is too small for the world size"),
    "group-too-small": ("aibrix-sglang-tp-1p1d.yaml", (("podGroupSize: 2", "podGroupSize: 1"),),
                        "StormService/tp-1p1d/prefill/prefill", "deploy",
                        "spec.template.spec.roles[prefill].podGroupSize is 1, but --nnodes 2: the engine waits for 1 "
                        "node(s) that never start"),
    "no-dev-shm": ("lws-basic-sglang.yaml", (("            volumeMounts:\n              - mountPath: /dev/shm\n",
                                              "            volumeMounts:\n              - mountPath: /scratch\n"),),
                   "LeaderWorkerSet/sglang/sglang-leader[leader]", "deploy",
                   "spec.leaderWorkerTemplate.leaderTemplate.spec.volumes has no /dev/shm (an emptyDir with medium: "
                   "Memory mounted at /dev/shm) but TP=2"),
    "flag-typo": ("skypilot-llama-3_1.yaml", (("--max-model-len 4096", "--max-modl-len 4096"),),
                  "skypilot-llama-3_1.yaml/run:3", "config",
                  "unrecognized arguments: --max-modl-len 4096; --max-modl-len: did you mean --max-model-len?"),
    "tp-not-dividing-heads": ("slurm-medical-llm-run_qwen3_8b.sh", (("--tensor-parallel-size 4",
                                                                      "--tensor-parallel-size 3"),),
                              "slurm-medical-llm-run_qwen3_8b.sh:22", "heads",
                              "Qwen/Qwen3-8B cannot run with TP=3: 32 attention heads do not divide by TP=3"),
    "short-visible-devices": ("slurm-medical-llm-run_qwen3_8b.sh", (("\nvllm serve $MODEL_PATH",
                                                                      "\nexport CUDA_VISIBLE_DEVICES=0,1\nvllm serve "
                                                                      "$MODEL_PATH"),),
                              "slurm-medical-llm-run_qwen3_8b.sh:23", "config",
                              'raises ValueError: "World size (4) is larger than the number of available GPUs (2) in '
                              "this node. If this is intentional and you are using: - ray, set "
                              "'--distributed-executor-backend ray'. - multiprocessing, set '--nnodes' "
                              "appropriately.\" "
                              "(vllm/config/parallel.py:1071)"),
}


@pytest.mark.usefixtures("model_map")
@pytest.mark.parametrize("defect", sorted(PLANTED))
def test_each_planted_defect_fails_with_one_json_object(defect: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    name, edits, deployment, failing, words = PLANTED[defect]
    code, data = check(capsys, planted(tmp_path, name, *edits))
    f = finding(data, deployment, failing)
    assert code == 1 and data["status"] == "fail" and f["status"] == "fail"
    assert words in f["message"] and "\n" not in f["message"]
    # the same file unplanted does not fail that check
    _, clean = check(capsys, PUBLIC / name)
    assert finding(clean, next(iter(clean["deployments"])), failing)["status"] != "fail"


@pytest.mark.usefixtures("model_map")
def test_a_short_visible_device_list_fails_placement_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name, edits, deployment, _, _ = PLANTED["short-visible-devices"]
    code, data = check(capsys, planted(tmp_path, name, *edits))
    placement = finding(data, deployment, "placement")
    assert placement["status"] == "fail" and placement["message"].endswith(
        "CUDA_VISIBLE_DEVICES=0,1 (slurm-medical-llm-run_qwen3_8b.sh:23) shows the engine 2 GPUs, but TP x PP x DP = 4 "
        "(4 x 1 x 1): list 4 devices there, or lower the layout to fit 2.")


@pytest.mark.usefixtures("model_map")
def test_an_llm_inference_service_passes_its_additional_args_and_its_draft_model(
        capsys: pytest.CaptureFixture[str]) -> None:
    """KServe's controller ends ``vllm serve`` with ``${VLLM_ADDITIONAL_ARGS}``: the 8,192-token context and the 0.9
    fraction there are what the pool is predicted with (not vLLM's defaults), and the draft model of
    ``spec.speculativeDecoding``, which cannot be read here, is named as not counted: the pool is an upper bound."""
    code, data = check(capsys, PUBLIC / "kserve-llmisvc-a100-draft-target.yaml")
    kv = finding(data, "LLMInferenceService/llama8b-draft-target-a100/main", "kv_pool")
    assert "full 8,192-token requests" in kv["message"] and "memory_fraction 0.9" in kv["message"]
    assert "max_num_seqs=32" in kv["message"] and "Not modelled: --speculative-config" not in kv["message"]
    assert "Upper bound: not counted, the draft model meta-llama/Llama-3.2-1B-Instruct's weights" in kv["message"]
    # sixteen DP ranks over a leader and a worker pod of 8 GPUs: placed per node, RDMA requested
    code, data = check(capsys, PUBLIC / "kserve-llmisvc-dp-ep-multi-qwen.yaml")
    dep = "LLMInferenceService/qwen3-coder-30b-a3b-instruct/main"
    assert finding(data, dep, "placement")["status"] == "pass" and finding(data, dep, "deploy")["status"] == "pass"
    assert "full 8,192-token requests" in finding(data, dep, "kv_pool")["message"]


def test_a_triton_engine_is_judged_at_the_length_it_was_built_for(capsys: pytest.CaptureFixture[str]) -> None:
    """A built TensorRT-LLM engine serves no request longer than its ``build_config.max_seq_len`` (8,192 in the
    example's engine): its pool is counted in requests of that length, not the model's 131,072; and the balance
    skip names TensorRT-LLM, not SGLang's rule."""
    example = Path(__file__).parents[2] / "examples" / "artifacts" / "triton" / "model_repo" / "tensorrt_llm"
    code, data = check(capsys, example / "config.pbtxt")
    kv = finding(data, "tensorrt_llm/config.pbtxt", "kv_pool")
    assert code == 0 and "full 8,192-token requests" in kv["message"], kv["message"]
    balance = finding(data, "tensorrt_llm/config.pbtxt", "balance")
    assert balance["message"].startswith("tensorrt_llm/config.pbtxt: TensorRT-LLM makes no start-up check"), balance
