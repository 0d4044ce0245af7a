"""``gpulayout measure`` without an engine: the load generator's recorded JSON parsed and checked
against its own aggregates, the confidence-interval math, /metrics parsing, the generator's process,
and clocks and matched-clock flags against the fake NVML. (Goodput: ``test_measure_goodput.py``; the
verdict over launches: ``test_measure_verdict.py``; the manifest and the checks before a launch:
``test_measure_inputs.py``.)"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fakes.fake_pynvml import FakeNvml
from measure_builders import points

from pytest_gpulayout.deployment import Deployment, Launch
from pytest_gpulayout.host import BARE_HOST
from pytest_gpulayout.launch import argv as launch_argv
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.measure import clocks as clk
from pytest_gpulayout.measure import generator as gen_mod
from pytest_gpulayout.measure import run
from pytest_gpulayout.measure.generator import Generators, Job, JobEnd, command_line, generator_args, runner_argv
from pytest_gpulayout.measure.metrics import parse_prometheus, sample_of, summarize
from pytest_gpulayout.measure.result import MeasureError, parse_result, percentile, read_result
from pytest_gpulayout.measure.stats import mean_ci, ratio_ci, separated, t975
from pytest_gpulayout.measure.verdict import decide
from pytest_gpulayout.workload import Load, MeasureSpec, Slo

RECORDED = Path(__file__).parents[1] / "data" / "measure" / "vllm-bench-serve-c8.json"
C8 = Load(concurrency=8)


def test_recorded_result_agrees_with_the_generators_own_aggregates() -> None:
    """Recorded from a real ``vllm bench serve`` against the CPU vLLM (tiny Llama, 16 requests, 8 at once)."""
    w = read_result(RECORDED, load=C8)
    g = json.loads(RECORDED.read_text())
    assert (w.completed, w.failed) == (g["completed"], g["failed"]) == (16, 0)
    assert w.output_tokens_per_s == pytest.approx(g["output_throughput"], rel=1e-9)
    assert w.requests_per_s == pytest.approx(g["request_throughput"], rel=1e-9)
    for ours, key in ((w.ttft_ms, "ttft"), (w.tpot_ms, "tpot"), (w.itl_ms, "itl"), (w.e2e_ms, "e2el")):
        for q in ("p50", "p90", "p99"):
            assert getattr(ours, q) == pytest.approx(g[f"{q}_{key}_ms"], rel=1e-9), (key, q)
    assert w.goodput_rps is None and w.result_path == str(RECORDED)


def test_failed_requests_are_counted_not_timed() -> None:
    g = json.loads(RECORDED.read_text())
    g["errors"] = ["boom"] + g["errors"][1:]
    g["completed"], g["failed"] = 15, 1
    w = parse_result(g, load=C8, slo=Slo(ttft_ms=1e9))
    assert (w.completed, w.failed) == (15, 1)
    assert w.output_tokens == sum(g["output_lens"][1:])
    assert w.goodput_rps == pytest.approx(15 / g["duration"]) and w.attainment == pytest.approx(15 / 16)


def test_a_miscounted_output_counts_the_forced_length_and_says_so() -> None:
    """llama-server's usage rides in its last token's chunk, which the generator does not read: it
    re-tokenizes the text instead. With the length forced, the forced length is counted, and said."""
    g = json.loads(RECORDED.read_text())
    forced = g["output_lens"][0]
    assert parse_result(g, load=C8, forced_output=forced).note is None  # the server's own count: kept
    g["output_lens"] = [1] * len(g["output_lens"])
    w = parse_result(g, load=C8, forced_output=forced)
    assert w.output_tokens == forced * 16
    assert w.output_tokens_per_s == pytest.approx(forced * 16 / g["duration"])
    assert w.note is not None and f"counted 1.0 output tokens a request, not the {forced} forced" in w.note
    assert parse_result(g, load=C8).output_tokens == 16  # a trace forces nothing: the generator's count


def test_a_result_without_per_request_times_is_one_clear_error(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    g = json.loads(RECORDED.read_text())
    del g["itls"]
    p.write_text(json.dumps(g))
    with pytest.raises(MeasureError, match="no per-request 'itls'.*--save-detailed"):
        read_result(p, load=C8)
    p.write_text("[1]")
    with pytest.raises(MeasureError, match="not a JSON object"):
        read_result(p, load=C8)


def test_percentile_is_numpys_linear() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4], 99) == pytest.approx(3.97)
    assert percentile([], 50) is None


def test_intervals() -> None:
    assert t975(1) == pytest.approx(12.706, abs=1e-3) and t975(100) == pytest.approx(1.984, abs=1e-3)
    ci = mean_ci([10.0, 12.0, 11.0, 13.0])
    half = 3.182 * statistics.stdev([10, 12, 11, 13]) / 2
    assert (ci.low, ci.high) == pytest.approx((11.5 - half, 11.5 + half), rel=1e-4)
    r = ratio_ci([20.0, 21.0, 19.0, 20.5], [10.0, 10.5, 9.5, 10.2])
    assert r.mean == pytest.approx(80.5 / 40.2) and 1 < r.low < r.mean < r.high
    assert separated([20.0, 21.0, 19.0], [10.0, 10.5, 9.5])
    assert not separated([10.0, 14.0, 8.0], [11.0, 9.0, 12.0])
    one = ratio_ci([10.0], [5.0])  # a single window: no interval
    assert one.low == 0.0 and math.isinf(one.high)


PROM = """# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.75
vllm:num_preemptions_total{engine="0",model_name="m"} 3.0
vllm:num_preemptions_total{engine="1",model_name="m"} 1.0
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:num_requests_waiting{engine="1",model_name="m"} 0.0
process_cpu_seconds_total 12.5
"""


def test_metrics_across_dp_engines() -> None:
    assert parse_prometheus(PROM)["process_cpu_seconds_total"] == [12.5]
    s = sample_of(PROM)
    assert (s.kv_usage, s.preemptions, s.waiting) == (0.5, 4.0, 2.0)
    later = sample_of(PROM.replace("} 3.0", "} 9.0"))
    m = summarize([s, later])
    assert m.preemptions == 6.0 and m.kv_usage_max == 0.5 and m.samples == 2
    old = sample_of("vllm:gpu_cache_usage_perc 0.4\nllamacpp:requests_deferred 1\n")
    assert (old.kv_usage, old.waiting, old.preemptions) == (0.4, 1.0, None)


def test_generator_args_are_offline_and_force_lengths(tmp_path: Path) -> None:
    spec = MeasureSpec(input_tokens=32, output_tokens=64, slo=Slo(ttft_ms=500, tpot_ms=20.5))
    argv = generator_args(spec, C8, base_url="http://127.0.0.1:8000", model="/m", tokenizer="/m", requests=40,
                          result=tmp_path / "r.json", seed=10, warmups=8)
    flags = dict(zip(argv[0::1], argv[1::1], strict=False))
    assert flags["--tokenizer"] == "/m" and flags["--max-concurrency"] == "8" and flags["--num-prompts"] == "40"
    assert flags["--request-rate"] == "inf" and "--burstiness" not in argv
    assert flags["--random-output-len"] == "64" and "--ignore-eos" in argv and "--save-detailed" in argv
    assert flags["--num-warmups"] == "8" and flags["--seed"] == "10"
    assert (flags["--result-dir"], flags["--result-filename"]) == (str(tmp_path), "r.json")
    # the SLO goes to the generator's own --goodput, so its result carries vLLM's count of the same rule
    i = argv.index("--goodput")
    assert argv[i + 1:i + 3] == ["ttft:500.0", "tpot:20.5"]
    rate = generator_args(MeasureSpec(), Load(request_rate=2.5, burstiness=0.5), base_url="u", model="m",
                          tokenizer="m", requests=10, result=tmp_path / "x.json", seed=0, warmups=4)
    assert rate[rate.index("--request-rate") + 1] == "2.5" and rate[rate.index("--burstiness") + 1] == "0.5"
    assert "--max-concurrency" not in rate and "--goodput" not in rate   # open loop; no SLO, no goodput
    traced = generator_args(MeasureSpec(), Load(concurrency=1), base_url="u", model="m", tokenizer="m", requests=1,
                            result=tmp_path / "t.json", seed=0, warmups=0, trace_file=tmp_path / "t.jsonl")
    assert traced[traced.index("--dataset-name") + 1] == "timed_trace" and "--ignore-eos" not in traced
    assert traced[traced.index("--dataset-path") + 1] == str(tmp_path / "t.jsonl")
    assert runner_argv("/venv/bin/python")[:2] == ["/venv/bin/python", "-c"]
    assert command_line(["--model", "/a b"]) == "vllm bench serve --model '/a b'"


FAKE_RUNNER_PY = """
import json, os, sys
print('ready', flush=True)
for line in sys.stdin:
    job = json.loads(line)
    if 'hang' in job['args']:
        continue
    if 'die' in job['args']:
        sys.exit(3)
    open(job['done'][:-len('.done')] + '.json', 'w').write('{}')
    open(job['done'], 'w').write('boom' if 'fail' in job['args'] else 'ok')
"""


def _wait(gen: Any) -> Any:
    for _ in range(400):
        end = gen.poll()
        if end is not None:
            return end
        time.sleep(0.025)
    raise AssertionError("the job never ended")


def test_one_generator_runs_job_after_job_and_is_replaced_when_it_dies(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator process is reused across jobs (its start-up paid once); a job's end is its done
    file; a generator that dies or runs past a job's deadline is replaced on the next ask."""
    monkeypatch.setattr(gen_mod, "RUNNER", FAKE_RUNNER_PY)
    gens = Generators(tmp_path)
    try:
        gens.warm([sys.executable, sys.executable])
        first = gens.get(sys.executable)
        assert gens.count == 1
        for stem in ("a", "b"):
            job = Job(["x"], tmp_path / f"{stem}.json")
            first.submit(job, timeout_s=30)
            assert _wait(first) == JobEnd(0)
            assert job.result.is_file()
        assert gens.get(sys.executable) is first and gens.count == 1
        first.submit(Job(["fail"], tmp_path / "c.json"), timeout_s=30)
        assert _wait(first) == JobEnd(1, "boom")
        first.submit(Job(["hang"], tmp_path / "d.json"), timeout_s=0.5)
        assert _wait(first).rc == -9 and not first.alive
        second = gens.get(sys.executable)
        assert second is not first and gens.count == 2
        second.submit(Job(["die"], tmp_path / "e.json"), timeout_s=30)
        assert _wait(second) == JobEnd(3, "exited with 3")
        third = gens.get(sys.executable)
        assert third is not second and gens.count == 3
    finally:
        gens.close()
    assert not third.alive and not gens.running


# ------------------------------------------------------------------------------------------------
# Clocks against the fake NVML
# ------------------------------------------------------------------------------------------------
class ClockedNvml(FakeNvml):
    """The project's fake NVML with SM clocks, temperatures and power per GPU position."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, machine: Machine, sm: dict[int, list[int]], temp: int = 60, power_mw: int = 300_000):
        super().__init__(machine)
        self.sm = {i: list(v) for i, v in sm.items()}
        self.temp, self.power_mw = temp, power_mw

    def nvmlDeviceGetClockInfo(self, h: Any, kind: int) -> int:  # noqa: N802 (NVML's name)
        assert kind == self.NVML_CLOCK_SM
        rows = self.sm[h.pos]
        return rows.pop(0) if len(rows) > 1 else rows[0]

    def nvmlDeviceGetTemperature(self, h: Any, kind: int) -> int:  # noqa: N802
        return self.temp + h.pos

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:  # noqa: N802
        return self.power_mw


def _two_gpus() -> Machine:
    gpus = tuple(Gpu(i, name="NVIDIA H100 80GB HBM3", uuid=f"GPU-{i}", memory_total_mib=81559,
                     memory_free_mib=81000, pci_bus_id=f"00000000:{0x18 + i:02X}:00.0") for i in range(2))
    return Machine(gpus=gpus, links={(0, 1): "NV18"}, source="snapshot", driver="550.90.07")


def test_clock_sampler_reads_each_gpu() -> None:
    nv = ClockedNvml(_two_gpus(), {0: [1980, 1980, 1700], 1: [1950]})
    nv.nvmlInit()  # what load_nvml does
    s = clk.ClockSampler(nv, [0, 1])
    for _ in range(3):
        s.sample()
    c = s.stop()
    assert c is not None
    g0, g1 = c.gpus
    assert (g0.index, g0.samples, g0.sm_mhz_min) == (0, 3, 1700)
    assert g0.sm_mhz_mean == pytest.approx((1980 + 1980 + 1700) / 3)
    assert (g1.sm_mhz_mean, g0.temperature_c_max, g1.temperature_c_max, g0.power_w_mean) == (1950, 60, 61, 300)
    assert c.as_dict()["gpus"][0]["power_w_mean"] == 300.0


def test_matched_clocks_flag_a_layout_15_percent_slower() -> None:
    fast = clk.clocks_of({0: [(1980.0, 60.0, 300.0)], 1: [(1980.0, 61.0, 300.0)]})
    close = clk.clocks_of({0: [(1800.0, 70.0, 300.0)]})            # 9 % lower: matched
    slow = clk.clocks_of({0: [(1500.0, 85.0, 250.0)], 1: [(1600.0, 86.0, 250.0)]})  # 22 % lower
    flags = clk.unmatched({"tp2": fast, "pp2": close, "dp2": slow})
    assert list(flags) == ["dp2"]
    assert "1550 MHz" in flags["dp2"] and "22 % below tp2's 1980 MHz" in flags["dp2"]
    assert clk.unmatched({"cpu-a": None, "cpu-b": None}) == {}     # the CPU build: clocks null, nothing flagged
    v = decide(points({"tp2": [134, 135, 133], "dp2": [100, 101, 99]}), "output_tokens_per_s", flags)
    assert v.choose == "tp2" and "Clocks not matched" in v.text and "dp2:" in v.text


def test_no_nvml_means_no_clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    import pynvml

    def fail() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    assert clk.load_nvml() is None


# ------------------------------------------------------------------------------------------------
# Preemptions against the predicted pool
# ------------------------------------------------------------------------------------------------


def test_preemptions_where_the_prediction_said_the_load_fits_are_named_with_the_numbers() -> None:
    from pytest_gpulayout.measure.preemption import load_tokens_per_replica, preemption_note

    spec = MeasureSpec(input_tokens=128, output_tokens=128)
    assert load_tokens_per_replica(spec, 8, 2) == 4 * 256
    note = preemption_note(spec, C8, 3.0, (5000, 4096))
    assert note is not None and note.startswith("3 preemptions at concurrency 8, where the predicted pool")
    assert "4,096 tokens per replica (x2)" in note and "4 requests of 128 + 128 tokens = 1,024 tokens, 4.0x" in note
    short = preemption_note(spec, C8, 1.0, (1000,))
    assert short is not None and "as predicted" in short and "8 requests of 128 + 128 tokens = 2,048 tokens" in short
    assert preemption_note(spec, C8, 0.0, (5000,)) is None and preemption_note(spec, C8, 2.0, None) is None
    assert preemption_note(MeasureSpec(trace=Path("t.jsonl")), C8, 2.0, (5000,)) is None
    # an open-loop rate holds no known number of requests at once: no claim
    assert preemption_note(spec, Load(request_rate=4.0), 2.0, (100,)) is None


def test_a_window_where_every_request_failed_is_an_error_not_a_pass() -> None:
    """Found measuring PP=2 on the CPU build with --enforce-eager: the server starts (its KV pool is
    right) and answers every request with Internal Server Error; the figures were all zeros, and passed."""
    g = json.loads(RECORDED.read_text())
    g["errors"] = ["Internal Server Error"] * 16
    g["completed"], g["failed"] = 0, 16
    w = parse_result(g, load=C8)
    assert w.failure == "no request completed at concurrency 8 (16 failed: Internal Server Error)"
    g["errors"] = ["Traceback (most recent call last):\n  ...\naiohttp.ClientOSError: reset"] + [""] * 15
    g["completed"], g["failed"] = 15, 1
    assert parse_result(g, load=C8).failure == ("1 of 16 requests failed at concurrency 8: "
                                                "aiohttp.ClientOSError: reset")
    assert read_result(RECORDED, load=C8).failure is None


def test_a_llamacpp_measurement_without_gpus_locks_every_gpu_it_sees(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """As its startup check does (issue 24 item 5: lock every launch): llama.cpp without ``gpus`` takes
    every visible GPU, so the measurement locks each of them, never none."""
    monkeypatch.setattr(launch_argv, "live_machine", lambda: None)  # no NVML here: the visible entries decide
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    dep = Deployment(name="ll", model=str(tmp_path / "m.gguf"), engine="llamacpp", base_dir=tmp_path,
                     launch=Launch(command=("llama-server",)))
    _, env, _, locks, _ = run._launch_args(dep, 8080, BARE_HOST)
    assert locks == ("index-0", "index-1")
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"   # inherited: llama.cpp spreads over all of them
