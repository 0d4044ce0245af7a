"""A team's own check, as README.md shows it ("Your own checks"): the README's modules run as they are written,
once per deployment, beside the suite, with the same fixtures and the same findings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _readme_module(marker: str) -> str:
    section = ROOT.joinpath("README.md").read_text().split("### Your own checks", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    return next(b for b in blocks if marker in b)


def test_the_readme_house_rules_run_once_per_deployment(pytester: pytest.Pytester) -> None:
    (pytester.path / "two-l4.yaml").write_text((DATA / "snapshots" / "two-l4.yaml").read_text())
    pytester.makefile(".yaml", gpulayout="version: 1\nmachine: two-l4.yaml\ndefaults:\n  model: Qwen/Qwen3-8B\n"
                                         "  engine_version: '0.33.0'\n  max_model_len: 8192\ndeployments:\n"
                                         "  tp2: {tensor_parallel_size: 2}\n  pp2: {pipeline_parallel_size: 2}\n")
    pytester.makepyfile(test_house_rules=_readme_module("test_no_tensor_parallel_over_pcie_in_production"))
    result = pytester.runpytest("--gpulayout", "-p", "no:cacheprovider", "-v", "test_house_rules.py", "-k", "house")
    out = result.stdout.str()
    # TP=2 over PHB breaks the house rule; PP=2 keeps it; the pool floor holds for both
    assert "test_house_rules.py::test_no_tensor_parallel_over_pcie_in_production[tp2] FAILED" in out, out
    assert "test_house_rules.py::test_no_tensor_parallel_over_pcie_in_production[pp2] PASSED" in out
    assert "test_house_rules.py::test_a_pool_floor_per_model[tp2] PASSED" in out
    assert "tp2: TP over PHB" in out
    result.assert_outcomes(passed=3, failed=1, deselected=16)


def test_the_readme_copy_of_a_suite_module_is_the_suite_module() -> None:
    shown = _readme_module('@pytest.mark.gpulayout("links")').strip()
    suite = (ROOT / "checks" / "test_links.py").read_text()
    assert shown.split("\n", 1)[1].strip() in suite  # the README shows the suite's own code
