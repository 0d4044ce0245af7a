"""Hostile inputs: each is one line and a non-zero exit within seconds, never a hang, a traceback or a
pass (reliability round 4, item 3). A hostile manifest, snapshot or artifact is the run's one line on
stderr and exit 2; a hostile model file is its deployment's: ``config`` fails in one line naming the file
(the other deployments are still judged, issue 30) and the run exits 1.

Before: a billion-laughs manifest hung at 100 % CPU in the NUL check (it walks every alias expansion,
about 3.4e9 leaves); 100,000 nested lists, 20,000 nested maps, ``&d {x: *d}`` and ``args: &r [*r]`` were
RecursionError tracebacks; a FIFO or ``/dev/zero`` as the machine snapshot or a safetensors file
blocked forever on open (or grew memory), as a config.json or a GGUF it was "not found", a FIFO
manifest "not found"; ``num_attention_heads: 1e18`` passed ``heads`` and reported "0 B/token".

Each case runs ``gpulayout check`` in this process under an alarm: a case that hangs fails after
``LIMIT_S`` instead of hanging the run (an ``open`` blocked on a FIFO is interrupted too).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest

from pytest_gpulayout.cli import main

DATA = Path(__file__).parents[1] / "data"
TINY = DATA / "models" / "tiny-llama"
LIMIT_S = 10.0


class Hung(Exception):
    pass


@pytest.fixture
def alarm() -> Iterator[None]:
    def ring(signum: int, frame: FrameType | None) -> None:
        raise Hung(f"no answer within {LIMIT_S:g} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, LIMIT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _manifest(root: Path, *, model: str = "./m", machine: str = "machine.yaml", extra: str = "",
              body: str | None = None, release: str = "0.33.0") -> Path:
    (root / "machine.yaml").write_text((DATA / "snapshots" / "two-l4.yaml").read_text())
    path = root / "gpulayout.yaml"
    path.write_text(body if body is not None else
                    f"version: 1\nmachine: {machine}\ndeployments:\n  a:\n    model: {model}\n"
                    f"    engine_version: \"{release}\"\n{extra}")
    return path


def _tiny(root: Path) -> Path:
    shutil.copytree(TINY, root / "m")
    return root / "m"


def _laughs() -> str:
    rows = ['x0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    rows += [f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    return "version: 1\nmachine: machine.yaml\n" + "\n".join(rows) + "\ndeployments: {}\n"


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _zero(path: Path) -> Path:
    os.symlink("/dev/zero", path)
    return path


def _heads(root: Path, value: float) -> None:
    cfg = json.loads((TINY / "config.json").read_text())
    cfg["num_attention_heads"] = value
    (root / "m").mkdir()
    (root / "m" / "config.json").write_text(json.dumps(cfg))


Case = Callable[[Path], Path]

#: the cases in the model's files: the deployment's config check fails, the run goes on
MODEL_CASES = ("a FIFO as config.json", "/dev/zero as config.json", "a FIFO named as the config", "a FIFO as the GGUF",
               "/dev/zero as the GGUF", "a FIFO as a safetensors file", "/dev/zero as a safetensors file",
               "a FIFO as the safetensors index", "num_attention_heads: 1e18", "more heads than hidden units")

CASES: dict[str, tuple[Case, str]] = {
    "billion laughs": (lambda r: _manifest(r, body=_laughs()),
                       "its aliases expand it to more than 200,000 values"),
    "100,000 nested lists": (lambda r: _manifest(r, body="version: 1\nx: " + "[" * 100_000 + "]" * 100_000 + "\n"),
                             "nested more than 100 levels deep"),
    "20,000 nested maps": (lambda r: _manifest(r, body="version: 1\nx: " + "{a: " * 20_000 + "1" + "}" * 20_000
                                               + "\n"), "nested more than 100 levels deep"),
    "&d {x: *d}": (lambda r: _manifest(r, body="version: 1\nmachine: machine.yaml\nx: &d {x: *d}\ndeployments: {}\n"),
                   "the alias *d at line 3 is inside the node &d it names"),
    "args: &r [*r]": (lambda r: (_tiny(r), _manifest(r, extra="    launch:\n      args: &r [*r]\n"))[1],
                      "the alias *r at line 8 is inside the node &r it names"),
    "a FIFO as the manifest": (lambda r: _fifo(r / "gpulayout.yaml"),
                               "the manifest is not a regular file: it is a FIFO"),
    "/dev/zero as the manifest": (lambda r: _zero(r / "gpulayout.yaml"),
                                  "the manifest is not a regular file: it is a character device"),
    "a FIFO as the snapshot": (lambda r: (_tiny(r), _fifo(r / "snap.yaml"), _manifest(r, machine="snap.yaml"))[2],
                               "not a regular file: it is a FIFO"),
    "/dev/zero as the snapshot": (lambda r: (_tiny(r), _manifest(r, machine="/dev/zero"))[1],
                                  "not a regular file: it is a character device"),
    "/dev/zero as a .json snapshot": (lambda r: (_tiny(r), _zero(r / "s.json"), _manifest(r, machine="s.json"))[2],
                                      "not a regular file: it is a character device"),
    "a FIFO as config.json": (lambda r: ((r / "m").mkdir(), _fifo(r / "m" / "config.json"), _manifest(r))[2],
                              "the model's config.json is not a regular file: it is a FIFO"),
    "/dev/zero as config.json": (lambda r: ((r / "m").mkdir(), _zero(r / "m" / "config.json"), _manifest(r))[2],
                                 "the model's config.json is not a regular file: it is a character device"),
    "a FIFO named as the config": (lambda r: (_fifo(r / "c.json"), _manifest(r, model="./c.json"))[1],
                                   "the model is not a regular file: it is a FIFO"),
    "a FIFO as the GGUF": (lambda r: (_fifo(r / "m.gguf"), _manifest(r, model="./m.gguf", release="b11434",
                                                                      extra="    engine: llamacpp\n"))[1],
                           "the model is not a regular file: it is a FIFO"),
    "/dev/zero as the GGUF": (lambda r: (_zero(r / "m.gguf"), _manifest(r, model="./m.gguf", release="b11434",
                                                                         extra="    engine: llamacpp\n"))[1],
                              "the model is not a regular file: it is a character device"),
    "a FIFO as a safetensors file": (lambda r: (_fifo(_tiny(r) / "model.safetensors"), _manifest(r))[1],
                                     "the safetensors file is not a regular file: it is a FIFO"),
    "/dev/zero as a safetensors file": (lambda r: (_zero(_tiny(r) / "model.safetensors"), _manifest(r))[1],
                                        "the safetensors file is not a regular file: it is a character device"),
    "a FIFO as the safetensors index": (lambda r: (_fifo(_tiny(r) / "model.safetensors.index.json"),
                                                   _manifest(r))[1],
                                        "the checkpoint index is not a regular file: it is a FIFO"),
    "num_attention_heads: 1e18": (lambda r: (_heads(r, 1e18), _manifest(r))[1],
                                  "num_attention_heads: 1,000,000,000,000,000,000 heads is past any model's"),
    "more heads than hidden units": (lambda r: (_heads(r, 10_000), _manifest(r))[1],
                                     "num_attention_heads: 10,000 attention heads for a hidden_size of"),
}


@pytest.mark.parametrize("case", [c for c in CASES if c not in MODEL_CASES])
def test_a_hostile_input_is_one_line_and_exit_2_within_seconds(case: str, tmp_path: Path, alarm: None,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    make, said = CASES[case]
    path = make(tmp_path)
    t0 = time.monotonic()
    code = main(["check", str(path)])
    took = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert code == 2, out[-500:] + err[-2000:]
    assert err.count("\n") == 1 and "Traceback" not in err, err[-2000:]
    assert said in err, err
    assert took < LIMIT_S


def _config_failure(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    t0 = time.monotonic()
    code = main(["check", str(path), "--json"])
    took = time.monotonic() - t0
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err[-2000:]
    report = json.loads(out)
    config = report["deployments"]["a"]["checks"]["config"]
    assert config["status"] == "fail" and "\n" not in config["message"], config
    return code, config["message"], took


@pytest.mark.parametrize("case", MODEL_CASES)
def test_a_hostile_model_file_fails_its_deployment_in_one_line_within_seconds(
        case: str, tmp_path: Path, alarm: None, capsys: pytest.CaptureFixture[str]) -> None:
    make, said = CASES[case]
    code, message, took = _config_failure(make(tmp_path), capsys)
    assert code == 1 and said in message, message
    assert took < LIMIT_S


def test_a_json_snapshot_nested_100000_deep_is_one_line(tmp_path: Path, alarm: None,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.json").write_text("[" * 100_000 + "]" * 100_000)
    _tiny(tmp_path)
    assert main(["check", str(_manifest(tmp_path, machine="s.json"))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested deeper than Python's JSON reader goes" in err, err[-2000:]


def test_a_config_json_nested_100000_deep_is_one_line(tmp_path: Path, alarm: None,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text('{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, message, _ = _config_failure(_manifest(tmp_path), capsys)
    assert code == 1 and "nested deeper than Python's JSON reader goes" in message, message


def test_a_deep_kubernetes_artifact_is_one_line(tmp_path: Path, alarm: None,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deploy.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nspec: " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert main(["check", str(path), "--machine", "preset:2xL4-pcie"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested more than 100 levels deep" in err, err[-2000:]


def test_anchors_and_merge_keys_of_a_real_manifest_still_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    """The shape check refuses only what no real file does: anchors, aliases and ``<<:`` merges pass."""
    _tiny(tmp_path)
    body = ('version: 1\nmachine: machine.yaml\ndeployments:\n  a: &common\n    model: ./m\n'
            '    engine_version: "0.33.0"\n    launch: {args: &args [--enforce-eager]}\n  b:\n    <<: *common\n'
            '    tensor_parallel_size: 2\n    launch: {args: *args}\n')
    code = main(["check", str(_manifest(tmp_path, body=body))])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert "a  [" in out and "b  [" in out, out
