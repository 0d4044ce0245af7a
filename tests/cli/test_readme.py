"""Every README console example prints what the README shows (regenerate with
``python tests/readme_examples.py`` after an intended change)."""

from __future__ import annotations

import pytest
from readme_examples import README, ROOT, blocks, render

BLOCKS = blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize(("command", "block"), BLOCKS, ids=[c for c, _ in BLOCKS])
def test_readme_example_is_the_real_output(command: str, block: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert render(command) == block
