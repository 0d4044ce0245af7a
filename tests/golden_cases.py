"""The CLI outputs pinned byte for byte: every example manifest's ``check --json`` and every plan
example's ``plan --json``. Regenerate on purpose only: ``python tests/golden_cases.py``."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "data" / "golden"


def cases() -> dict[str, list[str]]:
    sys.path.insert(0, str(ROOT / "examples" / "plans"))
    from regenerate import EXAMPLES  # type: ignore[import-not-found]

    out: dict[str, list[str]] = {}
    for manifest in sorted((ROOT / "examples").glob("*/*gpulayout.yaml")):
        rel = manifest.relative_to(ROOT)
        out[f"check--{rel.parent.name}--{rel.stem}"] = ["check", str(rel), "--json"]
    for name, _question, argv in EXAMPLES:
        out[f"plan--{name}"] = ["plan", *argv, "--json"]
    return out


def run(argv: list[str]) -> tuple[int, str]:
    from pytest_gpulayout.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(argv)
    return code, f"exit {code}\n" + buf.getvalue().replace(f"{ROOT}/", "")


if __name__ == "__main__":
    import os

    os.chdir(ROOT)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, argv in cases().items():
        (GOLDEN / f"{name}.txt").write_text(run(argv)[1], encoding="utf-8")
