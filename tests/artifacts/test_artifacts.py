"""Deployment artifacts read as deployments (issue 22): command lines, shell scripts, Kubernetes objects,
and the ``deploy`` check's planted defects, each one line naming the object and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpulayout.artifacts import commands
from pytest_gpulayout.artifacts.deploy import check
from pytest_gpulayout.artifacts.load import load_artifact, load_command
from pytest_gpulayout.cli import main
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.findings import Status

DATA = Path(__file__).parents[1] / "data" / "deploy"
MACHINE = "preset:8xH100-sxm"


def test_cmd_reads_flags_as_vllm_does() -> None:
    [f] = load_command("VLLM_USE_V1=1 vllm serve Qwen/Qwen3-8B --tensor_parallel_size 2 -pp 1 --max-model-len 8192 "
                       "--host 0.0.0.0 --enforce-eager", MACHINE)
    d = f.deployment
    assert (d.name, d.engine, d.model, d.tp, d.pp, d.max_model_len) == ("--cmd:1", "vllm", "Qwen/Qwen3-8B", 2, 1, 8192)
    assert d.launch.args == ("--enforce-eager",) and d.launch.env["VLLM_USE_V1"] == "1"


def test_cmd_typo_fails_with_the_engines_words() -> None:
    with pytest.raises(InputError) as err:
        load_command("vllm serve Qwen/Qwen3-8B --tensor-paralel-size 2", MACHINE)
    assert str(err.value) == ("--cmd:1: vllm serve: error: unrecognized arguments: --tensor-paralel-size; "
                              "did you mean --tensor-parallel-size?")


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


def test_vllm_docs_kubernetes_example_passes() -> None:
    [f] = load_artifact(DATA / "vllm-docs-deployment.yaml", MACHINE)
    assert f.source == "Deployment/mistral-7b/mistral-7b"
    assert f.deployment.model == "mistralai/Mistral-7B-Instruct-v0.3" and f.deployment.tp == 1
    finding = check(f)
    assert finding is not None and finding.status is Status.PASS


def _planted(tmp_path: Path, name: str, old: str, new: str, count: int = 1) -> Path:
    text = (DATA / name).read_text()
    assert old in text
    p = tmp_path / name
    p.write_text(text.replace(old, new, count))
    return p


def test_lws_example(tmp_path: Path) -> None:
    found = load_artifact(_planted(tmp_path, "lws-vllm.yaml", "size: 2", "size: 2"), MACHINE)
    [f] = found  # the worker runs Ray only: one engine invocation, the leader's
    assert f.source == "LeaderWorkerSet/vllm/vllm-leader[leader]"
    assert (f.deployment.tp, f.deployment.pp) == (8, 2)
    finding = check(f)
    assert finding is not None and finding.status is Status.PASS


@pytest.mark.parametrize(("name", "old", "new", "words"), [
    ("vllm-docs-deployment.yaml", "--max_num_batched_tokens 1024", "--max_num_batched_tokens 1024 -tp 2",
     "Deployment/mistral-7b container mistral-7b: spec.template.spec.containers[mistral-7b].resources.limits."
     "nvidia.com/gpu is 1, but TP x PP x DP = 2"),
    ("lws-vllm.yaml", "size: 2", "size: 1",
     "LeaderWorkerSet/vllm container vllm-leader: spec.leaderWorkerTemplate.size 1 x 8 GPUs per pod = 8, but "
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
    assert finding.message.startswith("Deployment/mistral-7b container mistral-7b: spec.template.spec.volumes has "
                                      "no /dev/shm")


def test_flag_typo_in_a_container(tmp_path: Path) -> None:
    p = _planted(tmp_path, "vllm-docs-deployment.yaml", "--max_num_batched_tokens", "--max_num_batchd_tokens")
    with pytest.raises(InputError) as err:
        load_artifact(p, MACHINE)
    assert str(err.value).startswith("Deployment/mistral-7b/mistral-7b: vllm serve: error: unrecognized arguments: "
                                     "--max_num_batchd_tokens; did you mean --max-num-batched-tokens?")


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
    import json

    code = main(["check", str(DATA / "vllm-docs-deployment.yaml"), "--machine", MACHINE, "--json"])
    data = json.loads(capsys.readouterr().out)
    dep = data["deployments"]["Deployment/mistral-7b/mistral-7b"]
    assert code == 0 and dep["source"] == "Deployment/mistral-7b/mistral-7b"
    assert dep["checks"]["deploy"]["status"] == "pass"
