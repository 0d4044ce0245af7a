"""``gpulayout plan --emit``: the top layout as an artifact ``gpulayout check`` accepts unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpulayout.artifacts.build import Found
from pytest_gpulayout.artifacts.load import load_artifact
from pytest_gpulayout.cli import main
from pytest_gpulayout.findings import Finding, Status
from pytest_gpulayout.rules.deploy import DEPLOY, deploy_finding

MACHINE = "preset:8xH100-sxm"


def check(f: Found) -> Finding | None:
    """The ``deploy`` finding of a deployment read from an artifact, named as the runner names it (None: no pod)."""
    dep = f.deployment
    return deploy_finding(dep).about(dep.name) if DEPLOY.applies(dep) else None


@pytest.mark.parametrize(("kind", "suffix"), [("cmd", ".sh"), ("k8s", ".yaml"), ("lws", ".yaml"),
                                              ("compose", ".yaml")])
def test_emitted_artifact_round_trips(kind: str, suffix: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "meta-llama/Llama-3.3-70B-Instruct", "--machine", MACHINE, "--max-model-len", "8192",
                 "--engine-version", "0.33.0", "--emit", kind])
    text = capsys.readouterr().out
    assert code == 0, text
    p = tmp_path / f"emitted{suffix}"
    p.write_text(text)
    [f] = load_artifact(p, MACHINE)
    d = f.deployment
    assert (d.engine, d.model, d.max_model_len) == ("vllm", "meta-llama/Llama-3.3-70B-Instruct", 8192)
    assert d.tp * d.pp * d.dp > 1
    finding = check(f)
    assert finding is None if kind == "cmd" else finding is not None and finding.status is Status.PASS
    assert main(["check", str(p), "--machine", MACHINE]) in (0, 1)  # the check verb reads it back
