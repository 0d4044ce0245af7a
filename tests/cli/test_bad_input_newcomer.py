"""Bad input a newcomer handed the CLI, each refused or flagged in one line: a snapshot whose links
leave out pairs of its GPUs, a symlink loop, an engine_version newer than the rules know."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from pytest_gpulayout.cli import main
from pytest_gpulayout.engines.registry import LATEST_KNOWN

DATA = Path(__file__).parents[1] / "data"
ROOT = Path(__file__).resolve().parents[2]


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_snapshot_with_links_missing_pairs_is_refused_naming_them(tmp_path, capsys):
    # the DGX-1 snapshot (8 x V100, hybrid cube mesh) with the rows for GPU6 and GPU7 trimmed by hand
    snap = yaml.safe_load((DATA / "snapshots" / "dgx1-v100.yaml").read_text())
    snap["links"] = {k: v for k, v in snap["links"].items() if not ({"6", "7"} & set(k.split("-")))}
    path = tmp_path / "dgx1-trimmed.yaml"
    path.write_text(yaml.safe_dump(snap))
    for argv in (["topo", "--machine", str(path)],
                 ["plan", "Qwen/Qwen3-8B", "--machine", str(path), "--engine-version", "0.33.0"]):
        assert main(argv) == 2
        err = _one_line(capsys.readouterr().err)
        assert f"{path}: links: no link kind for the GPU pairs 0-6, 0-7, 1-6" in err
        assert "6-7" in err and "2-3" not in err  # the missing ones, only those


def test_whole_snapshot_still_loads(capsys):
    assert main(["topo", "--machine", str(DATA / "snapshots" / "dgx1-v100.yaml")]) == 0


@pytest.fixture
def loop(tmp_path: Path) -> Path:
    """``a -> b -> a``: what a stale ``ln -s`` in a deploy folder leaves behind."""
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    return tmp_path / "a"


def _manifest(tmp_path: Path, machine: str, model: str) -> Path:
    path = tmp_path / "gpulayout.yaml"
    path.write_text(f'version: 1\nmachine: {machine}\ndeployments:\n  d:\n    model: {model}\n'
                    f'    engine_version: "0.33.0"\n')
    return path


@pytest.mark.parametrize("where", ["manifest", "machine", "model dir", "model link", "config.json",
                                   "parse-log"])
def test_symlink_loop_says_symlink_loop_not_not_found(where, loop, tmp_path, capsys):
    if where == "manifest":
        argv = ["check", str(loop)]
    elif where == "machine":
        os.symlink(loop, tmp_path / "machine.yaml")
        argv = ["check", str(_manifest(tmp_path, "machine.yaml", "Qwen/Qwen3-8B"))]
    elif where == "model dir":
        os.symlink(loop, tmp_path / "models")
        argv = ["check", str(_manifest(tmp_path, "preset:2xL4-pcie", "./models"))]
    elif where == "model link":  # written without ./, as a catalog id would be: still the path it is
        os.symlink(loop, tmp_path / "qwen")
        argv = ["check", str(_manifest(tmp_path, "preset:2xL4-pcie", "qwen"))]
    elif where == "config.json":
        (tmp_path / "m").mkdir()
        os.symlink(loop, tmp_path / "m" / "config.json")
        argv = ["plan", str(tmp_path / "m"), "--machine", "preset:2xL4-pcie"]
    else:
        argv = ["parse-log", str(loop)]
    if where.startswith("model"):  # the deployment's config fails, saying why (issue 30); the run goes on
        assert main([*argv, "--json"]) == 1
        err = json.loads(capsys.readouterr().out)["deployments"]["d"]["checks"]["config"]["message"]
    else:
        assert main(argv) == 2
        err = _one_line(capsys.readouterr().err)
    assert "symlink loop" in err and "not found" not in err and "no such file" not in err


def test_engine_version_newer_than_known_warns_that_rules_may_be_stale(tmp_path, capsys):
    latest = LATEST_KNOWN["vllm"]
    major, minor, _patch = latest.split(".")
    newer = f"{major}.{int(minor) + 7}.0"
    text = (ROOT / "examples" / "01-two-l4-pcie" / "gpulayout.yaml").read_text()
    assert f'"{latest}"' in text  # the example pins the newest known release: no note
    (tmp_path / "machine.yaml").write_text((ROOT / "examples" / "01-two-l4-pcie" / "machine.yaml").read_text())
    known = tmp_path / "known.yaml"
    known.write_text(text)
    fresh = tmp_path / "fresh.yaml"
    fresh.write_text(text.replace(f'"{latest}"', f'"{newer}"'))

    main(["check", str(known)])
    assert "newer than" not in capsys.readouterr().out

    main(["check", str(fresh)])
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note: engine_version")]
    assert len(notes) == 1  # one line for the version, naming the deployments that pin it
    assert f"engine_version {newer} (qwen3-8b-tp2, qwen3-8b-pp2, qwen3-8b-dp2) is newer than vllm {latest}" in notes[0]
    assert "may be stale" in notes[0]

    main(["check", str(fresh), "--json"])
    captured = capsys.readouterr()
    json.loads(captured.out)  # stdout stays the JSON a pipeline parses
    assert f"gpulayout: note: engine_version {newer}" in captured.err


def test_engine_version_note_in_the_pytest_header(pytester: pytest.Pytester):
    newer = "9.0.0"
    text = (ROOT / "examples" / "01-two-l4-pcie" / "gpulayout.yaml").read_text()
    pytester.makefile(".yaml", gpulayout=text.replace(f'"{LATEST_KNOWN["vllm"]}"', f'"{newer}"'))
    (pytester.path / "machine.yaml").write_text((ROOT / "examples" / "01-two-l4-pcie" / "machine.yaml").read_text())
    result = pytester.runpytest("--gpulayout", "-p", "no:cacheprovider", "-k", "heads")
    assert f"gpulayout: note: engine_version {newer}" in result.stdout.str()


@pytest.mark.parametrize(("key", "written", "path"), [
    ("max_position_embeddings", "Infinity", "max_position_embeddings"),
    ("num_key_value_heads", "NaN", "num_key_value_heads"),
    ("rope_scaling", '{"rope_type": "yarn", "factor": -Infinity}', "rope_scaling.factor"),
])
def test_infinity_or_nan_in_a_model_config_is_one_line_naming_the_key(tmp_path, capsys, key, written, path):
    config = json.loads((DATA / "models" / "tiny-llama" / "config.json").read_text())
    config[key] = "@@"
    (tmp_path / "config.json").write_text(json.dumps(config).replace('"@@"', written))
    manifest = _manifest(tmp_path, "preset:2xL4-pcie", ".")
    for argv in (["check", str(manifest), "--json"], ["plan", str(tmp_path), "--machine", "preset:2xL4-pcie"]):
        if argv[0] == "check":  # the deployment's config fails, naming the key (issue 30); the run goes on
            assert main(argv) == 1, argv
            err = json.loads(capsys.readouterr().out)["deployments"]["d"]["checks"]["config"]["message"]
        else:
            assert main(argv) == 2, argv
            err = _one_line(capsys.readouterr().err)
        shown = written if written[0] != "{" else "-Infinity"
        assert f"config.json: {path}: is {shown}, which is not a number" in err
