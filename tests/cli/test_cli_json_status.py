"""``check --json`` in a pipeline: one overall ``status`` (the worst over the deployments) that agrees
with the exit code, so ``gpulayout check --json | jq -r .status`` and ``$?`` say the same thing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_gpulayout.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*/*gpulayout.yaml"))
ORDER = ["skip", "pass", "warn", "fail"]


@pytest.mark.parametrize("manifest", EXAMPLES)
def test_status_is_the_worst_deployment_and_matches_the_exit_code(manifest, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    code = main(["check", manifest, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert next(iter(out)) == "status"  # first key: what a reader sees first
    statuses = [d["status"] for d in out["deployments"].values()]
    assert out["status"] == max(statuses, key=ORDER.index)
    assert code == (1 if out["status"] == "fail" else 0)
    strict = main(["check", manifest, "--json", "--strict"])
    capsys.readouterr()
    assert strict == (1 if out["status"] in ("fail", "warn") else 0)


def test_the_examples_cover_each_outcome(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    seen = set()
    for manifest in EXAMPLES:
        main(["check", manifest, "--json"])
        seen.add(json.loads(capsys.readouterr().out)["status"])
    assert {"pass", "warn", "fail"} <= seen
