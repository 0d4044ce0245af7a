"""The KV-pool prediction against pools real engines logged (``benchmarks/bench_calibration.py``).

Band: ``logged / predicted`` within 0.8 - 1.25 (symmetric: 1 / 1.25 = 0.8).

Why that band: what the engines take before the pool and we cannot see before launch (vLLM's
activation peak and non-torch memory, SGLang's CUDA context and communicators, and CUDA's total
being a few hundred MiB below NVML's) measures 0.3 - 1 GiB in the logs whose lines allow the split.
Against the pools of these logs (2.8 - 17 GiB per rank) that is up to ~13 %, so 20 % leaves room for
a GPU we did not measure but still catches a missing GiB on a small card or a wrong default.
Measured on the complete rows: vllm/001 1.070, vllm/023 0.871, sglang/001 0.941, sglang/013 1.134.
vllm/001 (Llama-3.1-8B, RTX 3090, V0, max_model_len 20000) was 0.663 until the memory model learnt
that V0 without chunked prefill (max_model_len <= 32K) profiles ``max(max_model_len, 2048)`` tokens
(read in vLLM 0.6.6's ``SchedulerConfig``), which its log's 2.07 GiB activation peak shows.

Outliers whose header gives every input (NOT excluded; ``xfail(strict=True)``, so the test turns
red once the prediction is fixed and the mark must go):

* vllm/011 (gpt-oss-120b, H100, 0.10.1, default 0.9): the engine logged -2.14 GiB for KV and did not
  start; we predict +5.26 GiB (76,592 tokens). Weights are 1.2 GiB low (64.74 vs 65.97 GiB logged),
  the remaining ~6 GiB is 0.10.1's activation/workspace peak for mxfp4 MoE that the reserve
  (1.68 GiB) does not model.

Excluded because the header lacks an input (shown by the benchmark, not held to the band):
vllm/005 (exact version unknown: the < 0.10 and >= 0.10 budgets differ; also an LMCache connector
predict_pool cannot express; ratio 0.552), vllm/007 (GPU unknown; 0.729 if H100), sglang/015 (GPU and
version, hence the default fraction, unknown; 1.018 if RTX A6000). The logs with no prediction at all
are ``bench.SKIPPED``, each with what its header lacks.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
BAND = (0.8, 1.25)


def _load_bench() -> ModuleType:
    path = REPO / "benchmarks" / "bench_calibration.py"
    spec = importlib.util.spec_from_file_location("bench_calibration", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_calibration", module)
    spec.loader.exec_module(module)
    return module


bench = _load_bench()
CASES = {c.log: c for c in bench.CASES}

#: Complete-header logs the prediction misses today, with the measured reason (see module docstring).
KNOWN_MISSES: dict[str, str] = {}


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
    """A user sizing a deployment from the prediction gets a pool within 20 % of what the engine
    logged, for every log whose header states GPU, model, layout, fraction and max_model_len."""
    row = bench.measure(case)
    assert row.logged_tokens is not None, f"{case.log}: no KV pool parsed from the log"
    lo, hi = BAND
    assert row.ratio is not None and lo <= row.ratio <= hi, (
        f"{case.log}: logged {row.logged_tokens:,} tokens vs predicted {row.prediction.kv_tokens:,} "
        f"(ratio {row.ratio}); band {lo}-{hi}")


@pytest.mark.xfail(strict=True, reason="vLLM 0.10.1's gpt-oss-120b activation/workspace peak (~7.4 GiB "
                                       "besides weights) is modelled as 1.68 GiB: we predict +5.26 GiB for KV, "
                                       "the engine logged -2.14 GiB and failed to start")
def test_gpt_oss_120b_on_one_h100_predicted_not_to_start() -> None:
    """vllm/011: the engine refused to start (negative KV memory); the prediction should say so."""
    row = bench.measure(CASES["vllm/011.txt"])
    assert row.logged.available_kv_gib is not None and row.logged.available_kv_gib < 0
    assert row.prediction.kv_budget_bytes_per_rank <= 0


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
    """A new log under tests/data/logs/{vllm,sglang} must be predicted or skipped with a reason,
    so calibration cannot silently ignore it."""
    logs = {f"{p.parent.name}/{p.name}" for e in ("vllm", "sglang") for p in (bench.LOGS / e).glob("*.txt")}
    known = set(CASES) | {s.log for s in bench.SKIPPED}
    assert logs == known
    assert all(s.why for s in bench.SKIPPED)
