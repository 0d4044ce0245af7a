"""``check --json`` and ``plan --json`` print the bytes pinned in ``tests/data/golden`` (see
``tests/golden_cases.py``): a refactor must not move a number a pipeline reads."""

from __future__ import annotations

import pytest
from golden_cases import GOLDEN, ROOT, cases, run

CASES = cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_cli_json_is_pinned(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert run(CASES[name])[1] == (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")
