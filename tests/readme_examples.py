"""The README's console examples are real outputs: each ```console block runs its ``$ gpulayout ...``
command and shows what it printed (and, after ``$ echo $?``, its exit code). ``tests/cli/test_readme.py``
holds them to it; ``python tests/readme_examples.py`` rewrites them after an intended change."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
_BLOCK_RE = re.compile(r"```console\n\$ (gpulayout [^\n]*)\n(.*?)```", re.S)


def run(command: str) -> tuple[int, str]:
    from pytest_gpulayout.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(shlex.split(command)[1:])
    return code, buf.getvalue().replace(f"{ROOT}/", "")


def render(command: str) -> str:
    code, out = run(command)
    tail = f"$ echo $?\n{code}\n"
    return f"```console\n$ {command}\n{out}{tail}```"


def blocks(text: str) -> list[tuple[str, str]]:
    """(command, the block as written) for every console block."""
    return [(m.group(1), m.group(0)) for m in _BLOCK_RE.finditer(text)]


def regenerate() -> None:
    text = README.read_text(encoding="utf-8")
    for command, block in blocks(text):
        text = text.replace(block, render(command))
    README.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    import os

    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    regenerate()
