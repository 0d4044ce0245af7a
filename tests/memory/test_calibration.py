"""Calibration against the pools real engines logged (``benchmarks/bench_calibration.py``).

Column A (exactness): the engine's own printed KV figure (vLLM "Available KV cache memory" / V0
``kv_cache_size=`` / the CPU backend's "Explicitly set (X/..) GiB for KV cache"; SGLang's K + V size
and its "Load weight end" avail mem / mem usage) turned into tokens by the engine's arithmetic must
give the logged token count for some figure that prints as the log's (half a unit of the second
decimal: 0.005 GiB per printed number). vllm/005 prints one rank's figure of four, so there the
pool can only be at most what it gives.

Column B (the band): the pool predicted from free memory and flags. Measured on the complete rows
(every input in the header): vllm/001 -0.7 %, vllm/023 +1.1 %, sglang/001 +2.1 %, sglang/013
-1.3 %: median |error| 1.2 %, worst 2.1 %. The bands are the issue's targets: median <= 3 %,
worst <= 8 %.

* vllm/023 (V0 0.7.x, 2 x RTX 4090, TP 2, 0.98) was +12.2 % until three rules read in the 0.7.2 wheel:
  vLLM multiplies the total CUDA reports (NVML's less the driver's reservation; the reporter quotes
  ``23.08GiB`` = 0.98 x 23.55), 0.6.5-0.7.x do not subtract other tenants, and V0 samples on rank 0
  alone, sorting 256 x 152,064 logits (1.38 GiB) while rank 1 quotes a 0.19 GiB peak.
* sglang/001 (Qwen3-235B-FP8, 4 x H100, 0.93) was +8.4 % while every multi-GPU run was given the
  0.07 GiB of communicators a PCIe box shows. Public "Init torch distributed ends. mem usage" lines
  put NCCL and custom all-reduce over NVLink at 1.13-2.01 GiB per GPU (median 1.25), against
  0.10-0.39 over PCIe (``memory/communicators.py``); SGLang measures ``pre`` after them.
* sglang/013 moved from -0.4 % to -1.3 % with the same change: its own run logged 0.13 GB of
  communicators, and the figure for more than two PCIe GPUs is the median of four such runs, 0.16.

vllm/001 was -6.6 % until the reserves read its own profiling line (a 2.07 GiB activation peak,
``non_torch_memory=0.35GiB``). vllm/011 (gpt-oss-120b on one H100) refused to start with -2.14 GiB
for KV; we predict -0.89 GiB (it was +5.26 until V1's sampler warm-up was read: 0.8-0.16 sort
``max_num_seqs x vocab`` logits unless FlashInfer samples). Rows whose header lacks an input are
shown, not held to the band.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from calibration_bench import bench

BAND_WORST_PCT = 8.0
BAND_MEDIAN_PCT = 3.0

CASES = {c.log: c for c in bench.CASES}

#: Complete-header logs the prediction misses today, with the measured reason (see module docstring).
KNOWN_MISSES: dict[str, str] = {
}


def _band_params() -> list[object]:
    out: list[object] = []
    for case in bench.CASES:
        if not case.complete or case.log == "vllm/011.txt":
            continue
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[case.log])] if case.log in KNOWN_MISSES else []
        out.append(pytest.param(case, id=case.log, marks=marks))
    return out


@pytest.mark.parametrize("case", _band_params())
def test_complete_logs_within_band(case: Any) -> None:
    """A user sizing a deployment from the prediction gets a pool within the measured band of what
    the engine logged, for every log whose header states GPU, model, layout, fraction and length."""
    row = bench.measure(case)
    assert row.logged_tokens is not None, f"{case.log}: no KV pool parsed from the log"
    err = bench.error_pct(row)
    assert err is not None and abs(err) <= BAND_WORST_PCT, (
        f"{case.log}: logged {row.logged_tokens:,} tokens vs predicted {row.prediction.kv_tokens:,} "
        f"({err:+.1f} %); band +-{BAND_WORST_PCT} %")


def test_median_error_of_complete_logs() -> None:
    """The median |error| over the complete rows meets the 3 % target (0.9 % measured)."""
    rows = [bench.measure(c) for c in bench.CASES if c.complete]
    summary = bench.summarize(rows)
    assert summary is not None and summary.n >= 4
    assert summary.median_pct <= BAND_MEDIAN_PCT, summary


@pytest.mark.parametrize("case", bench.FIGURE_CASES, ids=lambda c: f"{c.log}:{c.figure}")
def test_engine_figure_gives_the_logged_tokens(case: Any) -> None:
    """Column A: the engine's printed KV figure, through the engine's own arithmetic (block, cell
    size, KV groups), gives exactly the token count it logged, up to the figure's rounding."""
    row = bench.figure_row(case)
    assert row.exact, (f"{case.log}: {row.figure_gib} GiB -> {row.tokens:,} tokens "
                       f"[{row.tokens_lo:,}-{row.tokens_hi:,}], logged {row.logged}")
    if row.logged is not None and case.all_workers:
        # the rounding interval is narrow enough to mean something: under 1 % of the count
        assert row.bound_pct < 1.0


def test_engine_figure_catches_a_wrong_cell_size() -> None:
    """The exactness check can fail: the same figures read with another layout's cell size miss."""
    for log, figure in (("sglang/013.txt", "kv_size"), ("sglang/013.txt", "avail_mem"), ("vllm/001.txt", "available")):
        case = next(c for c in bench.FIGURE_CASES if c.log == log and c.figure == figure)
        assert bench.figure_row(case).exact
        assert not bench.figure_row(replace(case, tp=case.tp * 2)).exact, log  # half the KV heads per rank


def test_cpu_logs_carry_the_inputs_of_their_case() -> None:
    """The CPU logs have no header: the case's layout and length are their own 'non-default args'."""
    for case in bench.FIGURE_CASES:
        if not case.log.startswith("vllm-cpu/"):
            continue
        text = (bench.LOGS / case.log).read_text(encoding="utf-8")
        args = text[text.index("non-default args:"):].splitlines()[0]
        assert f"'max_model_len': {case.max_model_len}" in args
        assert "'model': 'models/tiny-llama'" in args
        assert (f"'tensor_parallel_size': {case.tp}" in args) == (case.tp > 1)
        assert (f"'pipeline_parallel_size': {case.pp}" in args) == (case.pp > 1)


def test_gpt_oss_120b_on_one_h100_predicted_not_to_start() -> None:
    """vllm/011: the engine refused to start (negative KV memory), and the prediction says so. Its
    7.5 GiB held besides the weights is the sampler warm-up sorting 1024 x 201,088 logits (0.10.1
    from pip has no FlashInfer: ``engines/vllm.warmup_sorts_logits``); it was a false pass (+5.26
    GiB predicted) while V1's warm-up was taken for FlashInfer's."""
    row = bench.measure(CASES["vllm/011.txt"])
    assert row.logged.available_kv_gib is not None and row.logged.available_kv_gib < 0
    assert row.prediction.kv_budget_bytes_per_rank <= 0
    assert "top-k/top-p sort" in row.prediction.activation_reserve_why


@pytest.mark.parametrize("case", [c for c in bench.CASES if c.complete], ids=lambda c: c.log)
def test_complete_cases_match_their_header(case: Any) -> None:
    """The inputs the band is asserted on are the header's, not transcription slips: TP and the
    memory fraction (where given) agree with the log's header lines."""
    header = bench.log_header(case.log)
    assert header["tp"].split()[0] == str(case.tp)
    fraction_line = header.get("gpu_memory_utilization") or header.get("mem_fraction_static") or ""
    if case.memory_fraction is not None:
        assert float(fraction_line.split()[0]) == pytest.approx(case.memory_fraction)
    else:
        assert fraction_line.startswith("default")
    short = case.gpu.replace("NVIDIA ", "").replace("GeForce ", "").replace("RTX ", "").split()[0]
    assert short in header["gpu"], (short, header["gpu"])
    if case.max_model_len is not None:
        assert header["max_model_len"].split()[0] == str(case.max_model_len)


def test_every_engine_log_is_classified() -> None:
    """A new log under tests/data/logs/{vllm,sglang,vllm-cpu} must get each column or a reason it
    has none, so calibration cannot silently ignore it."""
    logs = set(bench.all_logs())
    assert len(logs) >= 30
    column_a = {c.log for c in bench.FIGURE_CASES} | set(bench.FIGURE_SKIPPED)
    assert logs == column_a
    column_b = set(CASES) | {s.log for s in bench.SKIPPED} | {log for log in logs if log.startswith("vllm-cpu/")}
    assert logs == column_b
    assert all(s.why for s in bench.SKIPPED) and all(bench.FIGURE_SKIPPED.values())
