"""A bad manifest through ``gpulayout check``: exit 2, one stderr line naming file and key, empty stdout.

The manifest is read before the machine or the models, so these need no GPU, snapshot or model files:
a deploy pipeline on any runner gets the input error, not a probe failure (exit 3) that hides it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpulayout.cli import main


def run_check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("body", "key", "hint"), [
    ("  d: {model: m, gpu_memory_utilization: 0.9}\n", "deployments.d.gpu_memory_utilization",
     "did you mean 'memory_fraction'?"),
    ("  d: {model: m, tensor_parallel_size: true}\n", "deployments.d.tensor_parallel_size",
     "not the boolean true"),
    ("  d: {model: m, engine: vlm}\n", "deployments.d.engine", "did you mean 'vllm'?"),
    ("  d: {model: m, gpus: [0, 1, 2], tensor_parallel_size: 2}\n", "deployments.d.gpus",
     "gpus lists 3 GPUs but"),
    ("  d: {model: m}\n  d: {model: n}\n", "deployments.d", "duplicate key 'd' at line 5 (first at line 4)"),
])
def test_bad_manifest_exits_2_with_one_line(tmp_path, capsys, body, key, hint):
    path = tmp_path / "gpulayout.yaml"
    path.write_text(f"version: 1\nmachine: auto\ndeployments:\n{body}")
    code, out, err = run_check(capsys, str(path))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"gpulayout: {path}: {key}: ")
    assert hint in err


@pytest.mark.parametrize(("value", "key"), [
    ('launch: {args: ["--enforce-eager", "--max-num-seqs=1\\0"]}', "deployments.d.launch.args[1]"),
    ('launch: {env: {HF_HOME: "/data\\x00/hf"}}', "deployments.d.launch.env.HF_HOME"),
    ('launch: {command: ["vllm\\0", serve]}', "deployments.d.launch.command[0]"),
    ('launch: {env: {"A\\0B": x}}', "deployments.d.launch.env.A\\0B"),
])
def test_a_nul_byte_is_bad_input_not_a_traceback_at_the_launch(tmp_path, capsys, value, key):
    path = tmp_path / "gpulayout.yaml"
    path.write_text(f"version: 1\nmachine: auto\ndeployments:\n  d:\n    model: m\n    {value}\n")
    code, out, err = run_check(capsys, str(path))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"gpulayout: {path}: {key}: ")
    assert "NUL byte" in err

def test_yaml_syntax_error_exits_2_with_line(tmp_path, capsys):
    path = tmp_path / "gpulayout.yaml"
    path.write_text("version: 1\ndeployments:\n  d: {model: m\n")
    code, out, err = run_check(capsys, str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"gpulayout: {path}: invalid YAML at line 4")
    assert err.count("\n") == 1


def test_missing_manifest_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_check(capsys, "nope.yaml")
    assert (code, out, err) == (2, "", "gpulayout: nope.yaml: manifest not found\n")

    code, out, err = run_check(capsys)                      # no argument, no gpulayout.yaml here
    assert (code, out) == (2, "")
    assert err.startswith(f"gpulayout: no gpulayout.yaml in {Path.cwd()}; pass ")
    assert err.count("\n") == 1
