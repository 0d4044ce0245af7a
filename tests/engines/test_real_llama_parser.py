"""The project's table and parser for llama-server agree with the built llama-server (b11434, ``.ci/setup``).

``--completion-bash`` makes llama-server parse its whole command line (variables first, as it always does)
and, when it accepts it, print a completion script and exit 0 before loading anything; a line it refuses
prints the error and exits 1. Each line is a fraction of a second. ``--help`` lists every spelling and
``LLAMA_ARG_*`` variable of the build: the table extracted from ``common/arg.cpp`` must hold the same.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from packaging.version import Version
from real_engines import llama_server

from pytest_gpulayout.engines.llamacpp import cli

pytestmark = pytest.mark.engine

BUILD = Version("11434")
#: (words after llama-server, LLAMA_ARG_* variables)
LINES: list[tuple[list[str], dict[str, str]]] = [
    (["-m", "x.gguf", "-c", "4096"], {}),
    (["-m", "x.gguf", "--ctx_size", "4096"], {}),
    (["-m", "x.gguf", "--ctx-siz", "4096"], {}),
    (["-m", "x.gguf", "-c", "x"], {}),
    (["-m", "x.gguf", "-c", "4k"], {}),
    (["-m", "x.gguf", "-c"], {}),
    (["-m", "x.gguf", "--foo"], {}),
    (["x.gguf"], {}),
    (["-m", "x.gguf", "-ngl", "99", "-sm", "layer", "-ts", "1,1"], {}),
    (["-m", "x.gguf", "-kvu", "-no-kvu", "--no-kv-unified"], {}),
    (["-m", "x.gguf", "--parallel", "4", "-fa", "on"], {}),
    (["-m", "x.gguf", "--n_gpu_layers", "20"], {}),
    (["-m", "x.gguf"], {"LLAMA_ARG_CTX_SIZE": "8192"}),
    (["-m", "x.gguf"], {"LLAMA_ARG_CTX_SIZE": "x"}),
    (["-m", "x.gguf", "--mmproj-offload", "--no-mmproj-offload"], {}),
]


def _real(words: list[str], env: dict[str, str]) -> tuple[bool, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    proc = subprocess.run([llama_server(), "--completion-bash", *words], capture_output=True, text=True,
                          timeout=60, env={**clean, **env})
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    return proc.returncode == 0, lines[0] if lines else proc.stderr.strip()[-300:]


def test_the_built_llama_server_agrees_on_every_line() -> None:
    disagree = []
    for words, env in LINES:
        accepted, error = _real(words, env)
        ours = cli.resolve(words, BUILD, env=env)
        if ours.ok != accepted or (not accepted and ours.errors[0] != error):
            disagree.append((words, env, "accepted" if ours.ok else ours.errors[0], "accepted" if accepted else error))
    assert not disagree, "\n".join(map(str, disagree))


def test_the_table_holds_every_spelling_and_variable_of_the_build() -> None:
    text = subprocess.run([llama_server(), "--help"], capture_output=True, text=True, timeout=60).stdout
    listed: set[str] = set()
    for line in text.splitlines():
        if line.startswith("-"):
            first = re.split(r"\s{2,}", re.sub(r",\s+", ", ", line.strip()))[0]
            listed.update(re.findall(r"(?<![\w-])-{1,2}[A-Za-z][\w\-.]*", first))
    table = cli.TABLES.table("11434")
    spellings = {s for o in table.options for s in o.spellings}
    assert listed == spellings and len(listed) > 300
    variables = set(re.findall(r"env: (LLAMA_ARG_\w+)", text))
    assert variables <= {o.env for o in table.options} and len(variables) > 100
