"""vLLM's CUDA-graph estimate, taken out of the KV budget from 0.20 (``engines/vllm/cudagraphs.py``), read
in the wheels (``pip download --no-deps``, never installed): 0.20.0 ``envs.py`` L1724-1726 defaults
``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` to 1 (0.19.1 L1654: 0); ``gpu_worker.py
determine_available_memory`` subtracts ``model_runner.profile_cudagraph_memory()``; the capture sizes are
``config/vllm.py _set_cudagraph_sizes`` (0.21.0 L1540-1589, 0.28.0 L1925-2000, 0.32.0 L2340-2500).

The graph counts are checked against the engine's own "Profiling CUDA graph memory" lines
(``tests/data/calibration/cudagraph_estimates.json``); what each graph takes is a rough figure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.vllm import cudagraphs
from pytest_gpulayout.engines.vllm.cudagraphs import capture_sizes, cuda_graphs, graphs_off
from pytest_gpulayout.engines.vllm.engine import VLLM
from pytest_gpulayout.knobs import LaunchKnobs
from pytest_gpulayout.machine.facts import GIB, Gpu
from pytest_gpulayout.memory.pool import predict_pool
from pytest_gpulayout.model.load import load_model

DATA = Path(__file__).parents[1] / "data" / "calibration" / "cudagraph_estimates.json"


def _a100_40gb() -> list[Gpu]:
    return [Gpu(0, name="NVIDIA A100-SXM4-40GB", memory_total_mib=40960, memory_free_mib=40289,
                memory_reserved_mib=621)]


def _qwen3_8b(version: str, knobs: LaunchKnobs | None = None):  # type: ignore[no-untyped-def]
    return predict_pool(load_model("Qwen/Qwen3-8B"), engine=VLLM.memory, engine_version=version, tp=1, pp=1,
                        gpus=_a100_40gb(), max_model_len=40960, memory_fraction=None, knobs=knobs)


@pytest.mark.parametrize(
    ("version", "seqs", "tokens", "gpu", "piecewise", "largest"),
    [
        ("0.22.0", 256, 2048, "NVIDIA L40S", 51, 512),   # the default serve batch: 1, 2, 4, 8..248, 256..512
        ("0.22.0", 128, 2048, "NVIDIA L40S", 35, 256),   # cudagraph_estimates.json row C
        ("0.21.0", 256, 300, "NVIDIA L40S", 38, 300),    # max_num_batched_tokens below the ceiling is captured
        ("0.20.0", 256, 300, "NVIDIA L40S", 37, 288),    # ... not yet in 0.20
        ("0.32.0", 1024, 8192, "NVIDIA B200", 83, 1024),  # SM 10.x: ceiling 1024
        ("0.21.0", 1024, 8192, "NVIDIA B200", 51, 512),
        ("0.32.0", 100, 8192, "NVIDIA H100", 29, 200),   # 0.32 also captures max_num_seqs (100)
    ],
)
def test_capture_sizes(version: str, seqs: int, tokens: int, gpu: str, piecewise: int, largest: int) -> None:
    sizes = capture_sizes(Version(version), max_num_seqs=seqs, max_num_batched_tokens=tokens, gpu_name=gpu)
    assert len(sizes) == piecewise
    assert max(sizes) == largest


def test_graph_counts_match_every_logged_profile_line() -> None:
    """Each log with its batch known: the counts ``Profiling CUDA graph memory`` printed."""
    batches = {"A": (256, 2048), "B": (256, 8192), "C": (128, 2048), "D": (256, 8192), "E": (256, 2048),
               "F": (256, 2048), "G": (256, 2048), "H": (256, 2048)}
    rows = {r["key"]: r for r in json.loads(DATA.read_text())["rows"]}
    for key, (seqs, tokens) in batches.items():
        r = rows[key]
        cg = cuda_graphs(Version("0.21.0"), layers=r["layers"], max_num_seqs=seqs, max_num_batched_tokens=tokens)
        assert [cg.piecewise, cg.largest_piecewise] == r["piecewise"], key
        assert [cg.full, cg.largest_full] == r["full"], key


def test_qwen3_8b_on_an_a100_reserves_its_graphs_from_0_20_not_a_flat_half_gib() -> None:
    """vllm/109's setup on 0.20+: 51 PIECEWISE + 35 FULL graphs, 36 layers. The logged estimate (0.19.1, printed
    but not subtracted) is 2.35 GiB; the figure here is the envelope of the 0.20+ logs (0.3 MiB per graph per
    layer: 0.89 GiB), above the flat 0.5 GiB it replaces and still under that log (driver 535)."""
    p20, p19 = _qwen3_8b("0.20.0"), _qwen3_8b("0.19.1")
    assert "PIECEWISE=51 (largest=512), FULL=35 (largest=256)" in p20.activation_reserve_why
    graphs = 84 * 36 * cudagraphs.PER_GRAPH_LAYER_MIB / 1024
    assert graphs == pytest.approx(0.886, abs=0.001)
    assert p20.activation_reserve_gib - p19.activation_reserve_gib == pytest.approx(graphs, abs=0.02)
    assert graphs > 0.5
    assert any("subtracts its measured CUDA-graph estimate" in n and "86 graphs" in n for n in p20.notes)
    assert not any("CUDA-graph estimate" in n for n in p19.notes)


@pytest.mark.parametrize(
    "knobs",
    [
        LaunchKnobs(enforce_eager=True),
        LaunchKnobs(given={"--optimization-level": "0"}),
        LaunchKnobs(given={"--compilation-config": '{"cudagraph_mode": "NONE"}'}),
    ],
)
def test_no_graphs_no_estimate(knobs: LaunchKnobs) -> None:
    assert graphs_off(knobs.given, enforce_eager=knobs.enforce_eager)
    p = _qwen3_8b("0.22.0", knobs=knobs)
    assert "CUDA graphs" not in p.activation_reserve_why
    assert not any("CUDA-graph estimate" in n for n in p.notes)


def test_a_smaller_capture_ceiling_takes_less() -> None:
    small = _qwen3_8b("0.22.0", knobs=LaunchKnobs(given={"--max-cudagraph-capture-size": "16"}))
    default = _qwen3_8b("0.22.0")
    assert "PIECEWISE=5 (largest=16), FULL=5 (largest=16)" in small.activation_reserve_why
    assert small.kv_tokens > default.kv_tokens


def test_one_graph_per_mode_still_takes_the_first_capture() -> None:
    cg = cuda_graphs(Version("0.22.0"), layers=40, max_num_seqs=1, max_num_batched_tokens=8192)
    assert (cg.piecewise, cg.full) == (2, 1)  # 1 and 2 (2 x max_num_seqs); FULL up to max_num_seqs
    assert cg.estimate_bytes == pytest.approx(cudagraphs.FIRST_CAPTURE_GIB * GIB, rel=1e-6)


def test_the_per_graph_figure_is_the_envelope_of_the_rows_marked_fit() -> None:
    """``PER_GRAPH_LAYER_MIB`` is read off the 0.20+ logs (rows with ``fit``); the held-out 0.18/0.19 logs
    are what it is judged on, and it is known to under-estimate some of them (A100 -63 %)."""
    rows = json.loads(DATA.read_text())["rows"]
    ratios = {r["key"]: r["estimate_gib"] * 1024 / (r["layers"] * (r["piecewise"][0] - 1 + r["full"][0] - 1))
              for r in rows if r["layers"] and r["piecewise"] and r["full"] and r["piecewise"][0] > 1}
    fit = [ratios[r["key"]] for r in rows if r["fit"]]
    assert len(fit) == 4
    assert cudagraphs.PER_GRAPH_LAYER_MIB == pytest.approx(max(fit), abs=0.01)
    single = [r["estimate_gib"] for r in rows if r["piecewise"] == [1, 1]]
    assert cudagraphs.FIRST_CAPTURE_GIB == min(single)
