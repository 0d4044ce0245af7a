"""Deployment artifacts read as deployments (issue 22): command lines, shell scripts, Kubernetes objects,
and the ``deploy`` check's planted defects, each one line naming the object and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_gpulayout.artifacts import commands
from pytest_gpulayout.artifacts.build import Found, build
from pytest_gpulayout.artifacts.load import load_artifact, load_command
from pytest_gpulayout.cli import main
from pytest_gpulayout.findings import Finding, Status
from pytest_gpulayout.rules.deploy import DEPLOY, deploy_finding

DATA = Path(__file__).parents[1] / "data" / "deploy"
MACHINE = "preset:8xH100-sxm"


def check(f: Found) -> Finding | None:
    """The ``deploy`` finding of a deployment read from an artifact, named as the runner names it (None: no pod)."""
    dep = f.deployment
    return deploy_finding(dep).about(dep.name) if DEPLOY.applies(dep) else None


def test_cmd_reads_flags_as_vllm_does() -> None:
    [f] = load_command("VLLM_USE_V1=1 vllm serve Qwen/Qwen3-8B --tensor_parallel_size 2 -pp 1 --max-model-len 8192 "
                       "--host 0.0.0.0 --enforce-eager", MACHINE)
    d = f.deployment
    assert (d.name, d.engine, d.model, d.tp, d.pp, d.max_model_len) == ("--cmd:1", "vllm", "Qwen/Qwen3-8B", 2, 1, 8192)
    assert d.launch.args == ("--enforce-eager",) and d.launch.env["VLLM_USE_V1"] == "1"


def check_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    """``gpulayout check ... --json``: its exit code and the one JSON object it prints (nothing else on stdout)."""
    code = main(["check", *args, "--json"])
    out = capsys.readouterr().out
    data: dict[str, Any] = json.loads(out)  # one object: json.loads refuses a second one after it
    return code, data


def test_cmd_typo_fails_config_in_the_engines_words(capsys: pytest.CaptureFixture[str]) -> None:
    """A refused flag is the config check's failure of that deployment, not an abort: one JSON object, exit 1."""
    code, data = check_json(capsys, "--cmd", "vllm serve Qwen/Qwen3-8B --tensor-paralel-size 2", "--machine", MACHINE)
    checks = data["deployments"]["--cmd:1"]["checks"]
    assert code == 1 and data["status"] == "fail" and checks["config"]["status"] == "fail"
    assert ("vllm: error: unrecognized arguments: --tensor-paralel-size 2; --tensor-paralel-size: did you mean "
            "--tensor-parallel-size?") in checks["config"]["message"]
    assert checks["placement"]["status"] == "pass" and checks["heads"]["status"] == "pass"  # the rest is judged


def test_cmd_without_machine_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--cmd", "vllm serve Qwen/Qwen3-8B -tp 2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give --machine" in err


def test_script_lines_continuations_sh_c_and_env(tmp_path: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/sh\nexport VLLM_PP_LAYER_PARTITION=20,16\nset -e\n"
                      "CUDA_VISIBLE_DEVICES=0,1 vllm serve Qwen/Qwen3-8B \\\n  --tensor-parallel-size 2 \\\n"
                      "  --max_num_seqs 64 &\n"
                      "sh -c 'python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 4 --port 30000'\n"
                      "echo vllm serve is not run here\n")
    found = commands.find_in_text(script.read_text(), "serve.sh")
    assert [(i.source, i.engine) for i in found] == [("serve.sh:4", "vllm"), ("serve.sh:7", "sglang")]
    deps = [f.deployment for f in load_artifact(script, MACHINE)]
    assert [(d.name, d.tp) for d in deps] == [("serve.sh:4", 2), ("serve.sh:7", 4)]
    assert deps[0].launch.env == {"VLLM_PP_LAYER_PARTITION": "20,16"} and deps[0].gpus == (0, 1)
    assert deps[0].launch.args == ("--max-num-seqs=64",)


def test_vllm_docs_kubernetes_example_warns_on_its_moving_tag(tmp_path: Path) -> None:
    [f] = load_artifact(DATA / "vllm-docs-deployment.yaml", MACHINE)
    assert f.source == "Deployment/mistral-7b/mistral-7b"
    assert f.deployment.model == "mistralai/Mistral-7B-Instruct-v0.3" and f.deployment.tp == 1
    assert f.deployment.engine_version is None  # vllm/vllm-openai:latest names no release
    finding = check(f)
    assert finding is not None and finding.status is Status.WARN
    assert finding.message == ("Deployment/mistral-7b/mistral-7b: the image vllm/vllm-openai:latest names "
                               "no release (its tag moves), so the checks judged another release than the one that "
                               "will run: pin a release tag")
    # the same Deployment on a release tag: that release is the one judged, and the pass line says so
    [f] = load_artifact(_planted(tmp_path, "vllm-docs-deployment.yaml", "vllm/vllm-openai:latest",
                                 "vllm/vllm-openai:v0.10.1.1"), MACHINE)
    assert f.deployment.engine_version == "0.10.1.1"
    finding = check(f)
    assert finding is not None and finding.status is Status.PASS
    assert "the image vllm/vllm-openai:v0.10.1.1 runs release 0.10.1.1, the one the checks judged" in finding.message


@pytest.mark.parametrize(("image", "expected"), [
    ("vllm/vllm-openai:v0.8.5", ("vllm", "0.8.5")),
    ("docker.io/vllm/vllm-openai:v0.10.1.1", ("vllm", "0.10.1.1")),
    ("vllm/vllm-openai:v0.11.0rc2", ("vllm", "0.11.0rc2")),
    ("vllm/vllm-openai:latest", ("vllm", None)),
    ("vllm/vllm-openai", ("vllm", None)),
    ("vllm/vllm-openai@sha256:" + "0" * 64, ("vllm", None)),
    ("lmsysorg/sglang:v0.4.6.post1-cu124", ("sglang", "0.4.6.post1")),
    ("lmsysorg/sglang:v0.5.0rc2-cu126", ("sglang", "0.5.0rc2")),
    ("lmsysorg/sglang:dev", ("sglang", None)),
    ("ghcr.io/ggml-org/llama.cpp:server-cuda-b4719", ("llamacpp", "b4719")),
    ("ghcr.io/ggml-org/llama.cpp:server", ("llamacpp", None)),
    ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc2", ("trtllm", "1.2.0rc2")),
    ("lmcache/vllm-openai:v0.3.1", None),  # LMCache's own release, not vLLM's
    ("registry.example.com:5000/vllm/vllm-openai:v0.8.5", ("vllm", "0.8.5")),  # a mirror keeps the path and tag
    ("rayproject/ray-ml:2.33.0.914af0-py311", None),
])
def test_an_engine_image_tag_names_its_release(image: str, expected: tuple[str, str | None] | None) -> None:
    assert commands.image_release(image) == expected


def test_a_release_tag_pins_what_the_checks_judge(tmp_path: Path) -> None:
    """vLLM 0.8.5 from the image tag, not the newest release the tool knows: the pool line says 0.8.5."""
    [f] = load_artifact(DATA / "lws-vllm.yaml", MACHINE)
    assert f.deployment.engine_version == "0.8.5" and f.image_release == "0.8.5"
    # an --engine-version given by the caller still wins over the tag (artifacts.build's ``version``)
    [g], _ = build([(f.invocation, f.pod)], machine=MACHINE, path=tmp_path / "x.yaml", version="0.10.1")
    assert g.deployment.engine_version == "0.10.1"


def _planted(tmp_path: Path, name: str, old: str, new: str, count: int = 1) -> Path:
    text = (DATA / name).read_text()
    assert old in text
    p = tmp_path / name
    p.write_text(text.replace(old, new, count))
    return p


def test_lws_example() -> None:
    [f] = load_artifact(DATA / "lws-vllm.yaml", MACHINE)  # the worker runs Ray only: the leader's invocation
    assert f.source == "LeaderWorkerSet/vllm/vllm-leader[leader]"
    assert (f.deployment.model, f.deployment.tp, f.deployment.pp) == ("meta-llama/Llama-3.1-405B-Instruct", 8, 2)
    finding = check(f)  # the official example spans two nodes on the pod network: a warning, no failure
    assert finding is not None and finding.status is Status.WARN
    assert finding.message == ("LeaderWorkerSet/vllm/vllm-leader[leader]: the engine spans 2 pods but "
                               "spec.leaderWorkerTemplate.leaderTemplate.spec requests no RDMA device (rdma/* or a "
                               "host device, or privileged on the host network) and sets no NCCL_IB_HCA / "
                               "NCCL_SOCKET_IFNAME: NCCL falls back to TCP sockets between the nodes")


#: each real artifact: (source, engine, model, TP, PP, DP, the deploy verdict)
REAL = {
    "vllm-docs-deployment.yaml": ("Deployment/mistral-7b/mistral-7b", "vllm", "mistralai/Mistral-7B-Instruct-v0.3",
                                  1, 1, 1, "warn"),  # vllm/vllm-openai:latest
    "lws-vllm.yaml": ("LeaderWorkerSet/vllm/vllm-leader[leader]", "vllm", "meta-llama/Llama-3.1-405B-Instruct",
                      8, 2, 1, "warn"),
    "lws-sglang.yaml": ("LeaderWorkerSet/sglang/sglang-leader[leader]", "sglang",
                        "meta-llama/Meta-Llama-3.1-8B-Instruct", 2, 1, 1, "warn"),
    "kuberay-rayservice-vllm.yaml": ("RayService/llama-3-8b/serveConfigV2/applications[llm]", "vllm",
                                     "meta-llama/Meta-Llama-3-8B-Instruct", 2, 1, 1, "pass"),
    "kserve-llmisvc-dp-ep-qwen3.yaml": ("LLMInferenceService/qwen3-coder-30b-a3b-instruct/main", "vllm",
                                        "Qwen/Qwen3-Coder-30B-A3B-Instruct", 1, 1, 8, "pass"),
    "kserve-isvc-huggingface-multinode.yaml": ("InferenceService/huggingface-llama3/predictor", "vllm",
                                               "pvc://llama-3-8b-pvc/hf/8b_instruction_tuned", 1, 2, 1, "warn"),
    "production-stack-values-15-a-raycluster.yaml": ("servingEngineSpec.modelSpec[distilgpt2-raycluster]", "vllm",
                                                     "distilbert/distilgpt2", 1, 2, 1, "warn"),
    "sglang-compose.yaml": ("services/sglang", "sglang", "meta-llama/Meta-Llama-3.1-8B-Instruct", 1, 1, 1,
                            "warn"),  # lmsysorg/sglang:latest
    "sglang-distributed-sts.yaml": ("StatefulSet/distributed-sglang/sglang-container", "sglang", "/llm-folder",
                                    16, 1, 1, "fail"),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_artifacts(name: str) -> None:
    [f] = load_artifact(DATA / name, MACHINE)
    d = f.deployment
    assert (f.source, d.engine, d.model, d.tp, d.pp, d.dp, getattr(check(f), "status", None)) == \
        (*REAL[name][:6], Status(REAL[name][6]))


def test_sglang_statefulset_on_the_host_network_cannot_resolve_its_master() -> None:
    [f] = load_artifact(DATA / "sglang-distributed-sts.yaml", MACHINE)
    assert (f.nodes, f.master) == (2, "sglang-master-pod")
    finding = check(f)
    assert finding is not None and finding.message == (
        "StatefulSet/distributed-sglang/sglang-container: spec.template.spec.hostNetwork is true with "
        "dnsPolicy ClusterFirst (the node's resolv.conf), so the master address 'sglang-master-pod' does not "
        "resolve: set spec.template.spec.dnsPolicy: ClusterFirstWithHostNet")


def test_production_stack_values_with_a_flag_the_release_dropped(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """values-02 passes --disable-log-requests, which vLLM 0.17 - 0.32 refuse and 0.33.0 (the newest table) takes
    again as the inverse of --enable-log-requests (EnableDisableAction); --swap-space, dropped in 0.18, is refused."""
    code, data = check_json(capsys, str(DATA / "production-stack-values-02-basic.yaml"), "--machine", MACHINE)
    assert data["deployments"]["servingEngineSpec.modelSpec[llama3]"]["checks"]["config"]["status"] == "pass"
    p = _planted(tmp_path, "production-stack-values-02-basic.yaml", '"--disable-log-requests"', '"--swap-space", "4"')
    code, data = check_json(capsys, str(p), "--machine", MACHINE)
    config = data["deployments"]["servingEngineSpec.modelSpec[llama3]"]["checks"]["config"]
    assert code == 1 and config["status"] == "fail"
    assert "unrecognized arguments: --swap-space 4; --swap-space was removed in vLLM 0.18.0" in config["message"]


def test_lws_sglang_worker_is_read_but_is_the_leaders_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    """A typo in the worker's line fails the leader's config (the group never starts); no deployment of its own."""
    p = _planted(tmp_path, "lws-sglang.yaml", "- --trust-remote-code\n            resources",
                 "- --trust-remot-code\n            resources")
    code, data = check_json(capsys, str(p), "--machine", MACHINE)
    assert list(data["deployments"]) == ["LeaderWorkerSet/sglang/sglang-leader[leader]"]
    config = data["deployments"]["LeaderWorkerSet/sglang/sglang-leader[leader]"]["checks"]["config"]
    assert code == 1 and config["status"] == "fail"
    assert "the worker's line in LeaderWorkerSet/sglang/sglang-worker[worker]: " in config["message"]
    assert "unrecognized arguments: --trust-remot-code" in config["message"]


@pytest.mark.parametrize(("name", "old", "new", "words"), [
    ("lws-sglang.yaml", "size: 2", "size: 1",
     "LeaderWorkerSet/sglang/sglang-leader[leader]: spec.leaderWorkerTemplate.size 1 x 1 GPUs per pod = 1, but "
     "TP x PP x DP = 2"),
    ("kserve-llmisvc-dp-ep-qwen3.yaml", "tensor: 1", "tensor: 4",   # and no /dev/shm at TP=4: both listed
     "LLMInferenceService/qwen3-coder-30b-a3b-instruct/main: (1) spec.template.containers[main].resources."
     "limits.nvidia.com/gpu is 8, but TP x PP x local DP = 32 (4 x 1 x 8) on this pod: ask for 32; (2) "
     "spec.template.volumes has no /dev/shm"),
    ("kuberay-rayservice-vllm.yaml", 'TENSOR_PARALLELISM: "2"', 'TENSOR_PARALLELISM: "4"',
     "RayService/llama-3-8b/serveConfigV2/applications[llm]: spec.rayClusterConfig.workerGroupSpecs[*].replicas "
     "give the Ray cluster 2 GPU(s), but TP x PP x DP = 4"),
    ("sglang-compose.yaml", "--host 0.0.0.0", "--tp 2 --host 0.0.0.0",
     "services/sglang: services.sglang.deploy.resources.reservations.devices is 1, but "
     "TP x PP x DP = 2"),
    ("sglang-distributed-sts.yaml", "replicas: 2   #", "replicas: 1   #",  # and its host network's DNS policy
     "StatefulSet/distributed-sglang/sglang-container: (1) spec.replicas is 1, but --nnodes 2: the engine waits for "
     "1 node(s) that never start; (2) spec.template.spec.hostNetwork is true with dnsPolicy ClusterFirst"),
    ("production-stack-values-15-a-raycluster.yaml", "pipelineParallelSize: 2", "pipelineParallelSize: 4",
     "servingEngineSpec.modelSpec[distilgpt2-raycluster]: servingEngineSpec.modelSpec[distilgpt2-"
     "raycluster].replicaCount (Ray workers) + raySpec.headNode.requestGPU give the Ray cluster 2 GPU(s), but "
     "TP x PP x DP = 4"),
    ("vllm-docs-deployment.yaml", "--max_num_batched_tokens 1024", "--max_num_batched_tokens 1024 -tp 2",
     "Deployment/mistral-7b/mistral-7b: spec.template.spec.containers[mistral-7b].resources.limits."
     "nvidia.com/gpu is 1, but TP x PP x DP = 2"),
    ("lws-vllm.yaml", "size: 2", "size: 1",
     "LeaderWorkerSet/vllm/vllm-leader[leader]: spec.leaderWorkerTemplate.size 1 x 8 GPUs per pod = 8, but "
     "TP x PP x DP = 16"),
])
def test_planted_defects_fail_in_one_line(tmp_path: Path, name: str, old: str, new: str, words: str) -> None:
    [f] = load_artifact(_planted(tmp_path, name, old, new), MACHINE)
    finding = check(f)
    assert finding is not None and finding.status is Status.FAIL
    assert finding.message.startswith(words) and "\n" not in finding.message


def test_no_dev_shm_at_tp_above_one(tmp_path: Path) -> None:
    p = _planted(tmp_path, "vllm-docs-deployment.yaml", "--max_num_batched_tokens 1024",
                 "--max_num_batched_tokens 1024 -tp 2")
    p.write_text(p.read_text().replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu: "2"')
                 .replace("mountPath: /dev/shm", "mountPath: /scratch"))
    [f] = load_artifact(p, MACHINE)
    finding = check(f)
    assert finding is not None and finding.status is Status.FAIL
    assert finding.message.startswith("Deployment/mistral-7b/mistral-7b: spec.template.spec.volumes has "
                                      "no /dev/shm")


def test_flag_typo_in_a_container(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _planted(tmp_path, "vllm-docs-deployment.yaml", "--max_num_batched_tokens", "--max_num_batchd_tokens")
    code, data = check_json(capsys, str(p), "--machine", MACHINE)
    dep = data["deployments"]["Deployment/mistral-7b/mistral-7b"]
    assert code == 1 and dep["checks"]["config"]["status"] == "fail"
    assert ("vllm: error: unrecognized arguments: --max-num-batchd-tokens 1024; --max-num-batchd-tokens: did you "
            "mean --max-num-batched-tokens?") in dep["checks"]["config"]["message"]
    assert dep["checks"]["deploy"]["status"] == "warn"  # the pod around it is still judged (its moving tag)


def test_unknown_yaml_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "values.yaml"
    p.write_text("replicaCount: 1\nimage: {repository: nginx}\n")
    assert main(["check", str(p), "--machine", MACHINE]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "neither a gpulayout manifest" in err
    svc = tmp_path / "svc.yaml"
    svc.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: x}\n")
    assert main(["check", str(svc), "--machine", MACHINE]) == 2
    assert "found no engine command line in Kubernetes objects Service/x" in capsys.readouterr().err


def test_cli_json_names_the_source(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", str(DATA / "vllm-docs-deployment.yaml"), "--machine", MACHINE, "--json"])
    data = json.loads(capsys.readouterr().out)
    dep = data["deployments"]["Deployment/mistral-7b/mistral-7b"]
    assert code == 0 and dep["source"] == "Deployment/mistral-7b/mistral-7b"
    assert dep["checks"]["deploy"]["status"] == "warn"  # vllm/vllm-openai:latest names no release


def test_cluster_first_with_host_net_resolves_the_master(tmp_path: Path) -> None:
    p = _planted(tmp_path, "sglang-distributed-sts.yaml", "      hostNetwork: true\n",
                 "      hostNetwork: true\n      dnsPolicy: ClusterFirstWithHostNet\n")
    p.write_text(p.read_text().replace("docker.io/lmsysorg/sglang:latest", "docker.io/lmsysorg/sglang:v0.4.9"))
    [f] = load_artifact(p, MACHINE)
    finding = check(f)  # privileged on the host network: the host's RDMA devices, so no warning either
    assert finding is not None and finding.status is Status.PASS


def test_kuberay_mounts_dev_shm_itself(tmp_path: Path) -> None:
    [f] = load_artifact(DATA / "kuberay-rayservice-vllm.yaml", MACHINE)
    finding = check(f)
    assert finding is not None and "KubeRay mounts /dev/shm itself" in finding.message


def test_gpu_product_label_names_the_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    label = "      nodeSelector:\n        nvidia.com/gpu.product: {}\n      containers:\n"
    p = _planted(tmp_path, "vllm-docs-deployment.yaml", "      containers:\n", label.format("NVIDIA-H100-80GB-HBM3"))
    [f] = load_artifact(p, None)
    assert f.machine == "preset:8xH100-sxm"
    p.write_text(p.read_text().replace("NVIDIA-H100-80GB-HBM3", "NVIDIA-B200"))
    assert main(["check", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nvidia.com/gpu.product=NVIDIA-B200 matches no bundled preset" in err \
        and "give --machine" in err
