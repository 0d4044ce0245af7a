"""``pytest --gpulayout`` and ``gpulayout check`` give the same verdicts, by construction (one runner, one suite):
pinned on every example manifest and on Kubernetes artifacts, one of them with a ``deploy`` failure (issue 28:
pytest said "5 passed, 2 skipped" where ``gpulayout check`` said "fail deploy ... no /dev/shm")."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from pytest_gpulayout.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "tests" / "data" / "deploy"
MANIFESTS = sorted(p for p in (ROOT / "examples").glob("*/*gpulayout.yaml"))
#: one real artifact of each kind the readers know (README, "What you deploy"), each with the machine its header runs
ARTIFACTS = sorted(p for p in (ROOT / "examples" / "artifacts").rglob("*") if p.is_file()
                   and re.search(r"^# Run: gpulayout check \S+ --machine \S+$", p.read_text(), re.M))


def _cli(*args: str) -> dict[str, object]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["check", *args, "--json"])
    data: dict[str, object] = json.loads(out.getvalue())
    return data


def _pytest(pytester: pytest.Pytester, tmp_path: Path, *args: str) -> dict[str, object]:
    report = tmp_path / "report.json"
    result = pytester.runpytest("--gpulayout", "-p", "no:cacheprovider", f"--gpulayout-report={report}", *args)
    assert result.ret in (0, 1), result.stdout.str()
    data: dict[str, object] = json.loads(report.read_text())
    return data


def _verdicts(data: dict[str, object]) -> dict[str, object]:
    deployments = data["deployments"]
    assert isinstance(deployments, dict)
    return {"status": data["status"],
            **{name: {"status": d["status"],
                      "checks": {c: (f["status"], f["message"], f["data"]) for c, f in d["checks"].items()}}
               for name, d in deployments.items()}}


@pytest.mark.parametrize("manifest", MANIFESTS, ids=[str(p.relative_to(ROOT / "examples")) for p in MANIFESTS])
def test_every_example_gets_the_same_verdicts(manifest: Path, pytester: pytest.Pytester, tmp_path: Path) -> None:
    assert _verdicts(_pytest(pytester, tmp_path, f"--gpulayout-manifest={manifest}")) == _verdicts(_cli(str(manifest)))


def _planted_no_shm(tmp_path: Path) -> Path:
    text = (DEPLOY / "vllm-docs-deployment.yaml").read_text()
    planted = (text.replace("--max_num_batched_tokens 1024", "--max_num_batched_tokens 1024 -tp 2")
               .replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu: "2"')
               .replace("mountPath: /dev/shm", "mountPath: /scratch"))
    assert planted != text
    p = tmp_path / "no-shm.yaml"
    p.write_text(planted)
    return p


@pytest.mark.parametrize("artifact", ["no-shm", "vllm-docs-deployment.yaml", "lws-vllm.yaml", "sglang-compose.yaml",
                                      "kuberay-rayservice-vllm.yaml"])
def test_an_artifact_gets_the_same_verdicts(artifact: str, pytester: pytest.Pytester, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = _planted_no_shm(tmp_path) if artifact == "no-shm" else DEPLOY / artifact
    # the Llama 3 8B these two serve, as the catalog's 3.1 8B (same shapes): no Hub in tests
    model_map = tmp_path / "models.yaml"
    model_map.write_text("meta-llama/Meta-Llama-3-8B-Instruct: meta-llama/Llama-3.1-8B-Instruct\n"
                         "meta-llama/Meta-Llama-3.1-8B-Instruct: meta-llama/Llama-3.1-8B-Instruct\n")
    monkeypatch.setenv("GPULAYOUT_MODEL_MAP", str(model_map))
    machine = "preset:8xH100-sxm" if artifact == "lws-vllm.yaml" else "preset:2xL4-pcie"
    cli = _cli(str(path), "--machine", machine)
    ran = _pytest(pytester, tmp_path, f"--gpulayout-manifest={path}", f"--gpulayout-machine={machine}")
    assert _verdicts(ran) == _verdicts(cli)
    if artifact == "no-shm":  # the false pass of issue 28: deploy is a check of both
        [dep] = cli["deployments"].values()  # type: ignore[attr-defined]
        assert dep["checks"]["deploy"]["status"] == "fail" and cli["status"] == "fail"
        assert "has no /dev/shm" in dep["checks"]["deploy"]["message"]


@pytest.mark.parametrize("artifact", ARTIFACTS, ids=[str(p.relative_to(ROOT / "examples" / "artifacts").parent)
                                                     for p in ARTIFACTS])
def test_every_kind_of_artifact_gets_the_same_verdicts(artifact: Path, pytester: pytest.Pytester,
                                                       tmp_path: Path) -> None:
    """``pytest --gpulayout --gpulayout-manifest ARTIFACT`` and ``gpulayout check ARTIFACT --json``: the same status
    per deployment and the same finding per check, for a file of every kind (the machine its header names)."""
    [machine] = re.findall(r"^# Run: gpulayout check \S+ --machine (\S+)$", artifact.read_text(), re.M)
    cli = _cli(str(artifact), "--machine", machine)
    ran = _pytest(pytester, tmp_path, f"--gpulayout-manifest={artifact}", f"--gpulayout-machine={machine}")
    assert _verdicts(ran) == _verdicts(cli) and cli["deployments"]


def test_every_kind_the_readers_know_has_an_example() -> None:
    kinds = {p.relative_to(ROOT / "examples" / "artifacts").parts[0] for p in ARTIFACTS}
    assert kinds == {"aibrix", "compose", "helm", "kserve", "kuberay", "kubernetes", "lws", "rayserve", "shell",
                     "skypilot", "slurm", "triton"}
