"""The accuracy ledger (``tests/data/calibration/ledger.json``): the calibration table kept as data.

Every engine startup log under ``tests/data/logs/{vllm,sglang,vllm-cpu}`` and the real llama-server launch
is a row (its source, the inputs predicted from, column A and column B); the README's accuracy block is
generated from the ledger; and CI fails when a group's median or worst |error| gets worse than the
figures recorded in it. To record a change (a new log, a better rule)::

    python benchmarks/bench_calibration.py --write-ledger --write-readme
"""

from __future__ import annotations

import json

import pytest
from calibration_bench import bench

#: rounding slack when comparing recomputed figures with the recorded ones (they are stored to 0.01 %)
SLACK_PCT = 0.01



@pytest.fixture(scope="module")
def recorded() -> dict[str, object]:
    return json.loads(bench.LEDGER.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def now() -> list[dict[str, object]]:
    return bench.ledger_rows()  # type: ignore[no-any-return]


def test_every_log_has_a_row(recorded: dict[str, object]) -> None:
    """The ledger grows with the logs: a log added without its row (or a row without its log) fails."""
    logs = {str(r["log"]) for r in recorded["rows"]}  # type: ignore[attr-defined]
    assert logs == set(bench.all_logs()) | set(bench.LLAMACPP_LOGS)
    for r in recorded["rows"]:  # type: ignore[attr-defined]
        assert r["source"] and r["source"] != "unknown", r["log"]


@pytest.mark.parametrize("group", bench.GROUPS)
def test_no_group_gets_worse_than_recorded(recorded: dict[str, object], now: list[dict[str, object]],
                                           group: str) -> None:
    """Median and worst |error| of column B per group, recomputed, against the ledger's figures."""
    was = recorded["recorded"].get(group)  # type: ignore[attr-defined]
    summary = bench.ledger_summary(now).get(group)
    if was is None:
        assert summary is None, f"{group}: new scored rows; record them with --write-ledger"
        return
    assert summary is not None and summary["n"] >= was["n"], f"{group}: scored rows were lost"
    assert summary["median_pct"] <= was["median_pct"] + SLACK_PCT, (group, summary, was)
    assert summary["worst_pct"] <= was["worst_pct"] + SLACK_PCT, (group, summary, was)


def test_column_a_stays_exact(recorded: dict[str, object], now: list[dict[str, object]]) -> None:
    summary = bench.ledger_summary(now)["column_a"]
    assert summary["exact"] == summary["n"] >= recorded["recorded"]["column_a"]["n"]  # type: ignore[index]


def test_rows_are_what_the_prediction_gives_now(recorded: dict[str, object], now: list[dict[str, object]]) -> None:
    """The ledger is current: a rule change that moves a row is recorded (--write-ledger), not hidden."""
    assert now == recorded["rows"]


def test_readme_block_is_generated_from_the_ledger(recorded: dict[str, object]) -> None:
    readme = bench.README.read_text(encoding="utf-8")
    start = readme.index(bench.README_BEGIN)
    end = readme.index(bench.README_END) + len(bench.README_END)
    assert readme[start:end] == bench.readme_block(recorded), "run bench_calibration.py --write-readme"


def test_a_held_out_logs_first_score_is_kept(recorded: dict[str, object], now: list[dict[str, object]]) -> None:
    """A held-out log that led to a rule read after it becomes ``fitted``, but its error as first scored stays in
    the ledger (``Case.first_scored_pct``), so the held-out record says what the rules gave on it unseen."""
    was = {str(r["log"]): r["column_b"]["first_scored_pct"]  # type: ignore[index]
           for r in recorded["rows"] if isinstance(r.get("column_b"), dict)  # type: ignore[attr-defined]
           and r["column_b"].get("first_scored_pct") is not None}  # type: ignore[index]
    kept = {str(r["log"]): r["column_b"]["first_scored_pct"]  # type: ignore[index]
            for r in now if isinstance(r.get("column_b"), dict) and r["column_b"].get("first_scored_pct") is not None}  # type: ignore[index]
    assert "vllm/201.txt" in was and was["vllm/201.txt"] > 300  # the hybrid layout, before it was read
    lost = {log: pct for log, pct in was.items() if kept.get(log) != pct}
    assert not lost, f"held-out first scores lost or rewritten: {lost}"
