"""SGLang's PD-disaggregation, HiCache and KV cache layout / dtype / pool refusals (``engines/sglang/rules_pd.py``):
each line is parsed by the release's own parser tables, judged by the release's conditions and refused in its words
at its file:line, beside an accepted neighbour (the line without the conflict, or a release without the check)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from packaging.version import Version
from sglang_line_cases import assert_verdict

from pytest_gpulayout.engines.sglang import rules_pd
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

DENSE = "Qwen/Qwen3-8B"
MLA = "deepseek-ai/DeepSeek-V3"
DSA = "deepseek-ai/DeepSeek-V3.2"
HYBRID = str(Path(__file__).parents[1] / "data" / "models" / "qwen3-next-80b-a3b-instruct")
V41 = "deepseek_v41"      # Qwen3-8B's shapes under the config model type 0.5.22+ lets through


def model_of(name: str) -> ModelSpec:
    if name == V41:
        return replace(load_model(DENSE), model_type=V41, config_model_type=V41)
    return load_model(name)


def hopper() -> Layout:
    return Layout(8, 1, 1, (9, 0), "NVIDIA H100 80GB HBM3", 81559)


def blackwell() -> Layout:
    return Layout(8, 1, 1, (10, 0), "NVIDIA B200", 183359)


def judge(version: str, words: str, model: str = DENSE, layout: Layout | None = None) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    return config_check(line, model_of(model), layout or hopper(), Version(version))


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    refused: str | None = None          # the release's words (a part); None: the rule refuses nothing
    source: str = ""                    # file:line in that release
    model: str = DENSE
    exception: str = "ValueError"
    gpu: str = "hopper"


SA = "sglang/srt/server_args.py"
KV = "sglang/srt/arg_groups/kv_cache_hook.py"
SHARD = "sglang/srt/arg_groups/kv_shard_hook.py"
HICACHE = "sglang/srt/arg_groups/hicache_hook.py"
DECODE = "--disaggregation-mode decode"
PREFILL = "--disaggregation-mode prefill"
SHARDING = "--enable-kv-cache-sharding --disaggregation-mode prefill"

CASES = [
    # -- a decode server with DP replicas needs --prefill-round-robin-balance (0.5.2 - 0.5.7)
    Case("sglang.pd.decode_round_robin", "0.5.2", f"{DECODE} --dp-size 2 --enable-dp-attention",
         "Prefill round robin balance is required when dp size > 1.", f"{SA}:822", exception="AssertionError"),
    Case("sglang.pd.decode_round_robin", "0.5.7", f"{DECODE} --dp-size 2 --enable-dp-attention",
         "`--prefill-round-robin-balance` is set for decode server.", f"{SA}:2188", exception="AssertionError"),
    Case("sglang.pd.decode_round_robin", "0.5.7", f"{DECODE} --dp-size 2 --enable-dp-attention "
         "--prefill-round-robin-balance"),
    Case("sglang.pd.decode_round_robin", "0.5.7", f"{PREFILL} --dp-size 2 --enable-dp-attention"),
    Case("sglang.pd.decode_round_robin", "0.5.8", f"{DECODE} --dp-size 2 --enable-dp-attention"),
    # -- the decode host pool: host-pool retraction and decode KV offload
    Case("sglang.pd.decode_host_pool", "0.5.18", "--disaggregation-decode-retraction-backup host_pool",
         "--disaggregation-decode-retraction-backup=host_pool is only supported on a PD decode server.",
         f"{SA}:8127"),
    Case("sglang.pd.decode_host_pool", "0.5.18", f"{DECODE} --disaggregation-decode-retraction-backup host_pool"),
    Case("sglang.pd.decode_host_pool", "0.5.23", f"{DECODE} --disaggregation-decode-retraction-backup host_pool "
         "--dcp-size 2", "does not support --dcp-size > 1.", f"{KV}:362"),
    Case("sglang.pd.decode_host_pool", "0.5.23", f"{DECODE} --disaggregation-decode-retraction-backup host_pool "
         "--enable-priority-scheduling", "requires --disable-priority-preemption when priority scheduling",
         f"{KV}:371"),
    Case("sglang.pd.decode_host_pool", "0.5.23", f"{DECODE} --disaggregation-decode-retraction-backup host_pool "
         "--enable-priority-scheduling --disable-priority-preemption"),
    # decode host receive makes the PD step set host_pool first: above 0 in 0.5.21, below 1 from 0.5.22
    Case("sglang.pd.decode_host_pool", "0.5.21", "--disaggregation-decode-host-receive-threshold 0.5",
         "host_pool is only supported on a PD decode server.", f"{KV}:357"),
    Case("sglang.pd.decode_host_pool", "0.5.22", "--disaggregation-decode-host-receive-threshold 0.5",
         "host_pool is only supported on a PD decode server.", f"{KV}:357"),
    Case("sglang.pd.decode_host_pool", "0.5.22", "--disaggregation-decode-host-receive-threshold 1"),
    Case("sglang.pd.decode_host_pool", "0.5.21", "--disaggregation-decode-host-receive-threshold 0"),
    Case("sglang.pd.decode_host_pool", "0.5.3", "--disaggregation-decode-enable-offload-kvcache",
         "The argument disaggregation-decode-enable-offload-kvcache is only supported for decode side.",
         f"{SA}:1242"),
    Case("sglang.pd.decode_host_pool", "0.5.10", f"{DECODE} --disaggregation-decode-enable-offload-kvcache",
         "only supported when hicache-storage-backend is provided.", f"{SA}:3414"),
    Case("sglang.pd.decode_host_pool", "0.5.9", f"{DECODE} --disaggregation-decode-enable-offload-kvcache"),
    Case("sglang.pd.decode_host_pool", "0.5.23", f"{DECODE} --disaggregation-decode-enable-offload-kvcache "
         "--hicache-storage-backend file --disaggregation-decode-retraction-backup host_pool",
         "are mutually exclusive: both build a decode host pool.", f"{KV}:409"),
    Case("sglang.pd.decode_host_pool", "0.5.23", f"{DECODE} --disaggregation-decode-enable-offload-kvcache "
         "--hicache-storage-backend file"),
    # -- response storage and --language-model-only outside aggregated serving
    Case("sglang.pd.response_store", "0.5.20", f"--enable-response-store {PREFILL}",
         "--enable-response-store is not supported with --disaggregation-mode=prefill or decode",
         "sglang/srt/arg_groups/validation_hook.py:31"),
    Case("sglang.pd.response_store", "0.5.23", "--enable-response-store"),
    Case("sglang.language_model_only.pd", "0.5.18", f"--language-model-only {DECODE}",
         "--language-model-only is incompatible with --disaggregation-mode prefill/decode", f"{SA}:7677"),
    Case("sglang.language_model_only.pd", "0.5.21", f"--language-model-only {PREFILL}",
         "--language-model-only is incompatible", "sglang/srt/arg_groups/model_hook.py:984"),
    Case("sglang.language_model_only.pd", "0.5.23", f"--language-model-only {PREFILL}",
         "--language-model-only is incompatible", "sglang/srt/arg_groups/model_hook.py:1098"),
    Case("sglang.language_model_only.pd", "0.5.23", f"--language-model-only {PREFILL}", model=V41),
    Case("sglang.language_model_only.pd", "0.5.21", f"--language-model-only {PREFILL}", "is incompatible",
         "sglang/srt/arg_groups/model_hook.py:984", model=V41),
    Case("sglang.language_model_only.pd", "0.5.23", "--language-model-only"),
    Case("sglang.language_model_only.pd", "0.5.23", PREFILL),
    # -- hierarchical cache needs the radix cache: the line's --disable-radix-cache, or a decode server's
    Case("sglang.hicache.radix_cache", "0.5.1", "--enable-hierarchical-cache --disable-radix-cache",
         "The arguments enable-hierarchical-cache and disable-radix-cache are mutually exclusive", f"{SA}:727"),
    Case("sglang.hicache.radix_cache", "0.5.2", f"{DECODE} --enable-hierarchical-cache",
         "are mutually exclusive and cannot be used at the same time", f"{SA}:851"),
    Case("sglang.hicache.radix_cache", "0.5.18", "--enable-hierarchical-cache --disable-radix-cache",
         "are mutually exclusive", f"{SA}:8150"),
    Case("sglang.hicache.radix_cache", "0.5.23", f"{DECODE} --enable-hierarchical-cache",
         "are mutually exclusive", f"{KV}:394"),
    Case("sglang.hicache.radix_cache", "0.5.23", "--disable-radix-cache"),
    # -- HiCache's buffer_only host memory mode
    Case("sglang.hicache.host_memory_mode", "0.5.19", "--enable-hierarchical-cache --hicache-host-memory-mode "
         "buffer_only", "buffer_only requires a storage backend (--hicache-storage-backend)", f"{HICACHE}:193"),
    Case("sglang.hicache.host_memory_mode", "0.5.21", "--enable-hierarchical-cache --hicache-host-memory-mode "
         "buffer_only --hicache-storage-backend file --hicache-write-policy write_back",
         "buffer_only does not support --hicache-write-policy write_back", f"{HICACHE}:238"),
    Case("sglang.hicache.host_memory_mode", "0.5.22", "--enable-hierarchical-cache --hicache-host-memory-mode "
         "buffer_only --hicache-storage-backend file --hicache-write-policy write_back"),
    Case("sglang.hicache.host_memory_mode", "0.5.23", f"{DECODE} --hicache-host-memory-mode buffer_only "
         "--hicache-storage-backend file", "buffer_only is not supported on decode instances", f"{HICACHE}:290"),
    Case("sglang.hicache.host_memory_mode", "0.5.23", f"{PREFILL} --enable-hierarchical-cache "
         "--hicache-host-memory-mode buffer_only --hicache-storage-backend file"),
    # handle_hicache returns before it without HiCache, decode offload or a decode server
    Case("sglang.hicache.host_memory_mode", "0.5.23", "--hicache-host-memory-mode buffer_only"),
    Case("sglang.lmcache.buffer_only", "0.5.21", "--enable-lmcache --hicache-host-memory-mode buffer_only",
         "--hicache-host-memory-mode=buffer_only is a HiCache-only mode", f"{KV}:467"),
    Case("sglang.lmcache.buffer_only", "0.5.23", "--enable-lmcache"),
    # -- KV cache sharding's flag conflicts (an MLA model with TP 8 and no attention DP is its accepted base)
    Case("sglang.kv_cache_sharding.flags", "0.5.22", f"{SHARDING} --enable-two-batch-overlap",
         "--enable-kv-cache-sharding does not support --enable-two-batch-overlap", f"{SHARD}:149", model=MLA),
    Case("sglang.kv_cache_sharding.flags", "0.5.22", f"{SHARDING} --enable-hierarchical-cache",
         "does not support --enable-hierarchical-cache yet", f"{SHARD}:124", model=MLA),
    Case("sglang.kv_cache_sharding.flags", "0.5.23", f"{SHARDING} --enable-hierarchical-cache", model=MLA),
    Case("sglang.kv_cache_sharding.flags", "0.5.23", f"{SHARDING} --enable-hierarchical-cache "
         "--hicache-storage-backend file", "supports HiCache host offload but not --hicache-storage-backend yet",
         f"{SHARD}:177", model=MLA),
    Case("sglang.kv_cache_sharding.flags", "0.5.23", f"{SHARDING} --enable-lmcache",
         "--enable-kv-cache-sharding does not support --enable-lmcache.", f"{SHARD}:195", model=MLA),
    Case("sglang.kv_cache_sharding.flags", "0.5.23", f"{SHARDING} --disaggregation-transfer-backend mori",
         "only supports the mooncake and nixl transfer backends", f"{SHARD}:237", model=MLA),
    Case("sglang.kv_cache_sharding.flags", "0.5.23", f"{SHARDING} --disaggregation-transfer-backend nixl",
         model=MLA),
    Case("sglang.kv_cache_sharding.flags", "0.5.23", f"{SHARDING} --attn-dp-size 2",
         "for MLA models without prefill CP shards across attention-TP and requires plain TP attention",
         f"{SHARD}:254", model=MLA),
    Case("sglang.kv_cache_sharding.flags", "0.5.23", SHARDING,
         "for GQA models shards across attention-CP ranks and requires --enable-prefill-cp", f"{SHARD}:266"),
    Case("sglang.kv_cache_sharding.flags", "0.5.23", SHARDING, model=MLA),
    Case("sglang.kv_cache_sharding.flags", "0.5.23", "--enable-two-batch-overlap", model=MLA),
    # -- an IB device list the line leaves empty (the devices themselves are the serving host's)
    Case("sglang.pd.ib_devices", "0.5.9", f"{PREFILL} --disaggregation-ib-device mlx5_0,mlx5_0",
         "Duplicate IB devices specified: mlx5_0,mlx5_0", f"{SA}:2622"),
    Case("sglang.pd.ib_devices", "0.5.12", f"{DECODE} --disaggregation-ib-device ,",
         "No valid IB devices specified", f"{SA}:4169"),
    Case("sglang.pd.ib_devices", "0.5.23", f"{PREFILL} --disaggregation-ib-device=",
         "No valid IB devices specified", "sglang/srt/arg_groups/validation_hook.py:533"),
    Case("sglang.pd.ib_devices", "0.5.23", f"{PREFILL} --disaggregation-ib-device mlx5_0"),
    Case("sglang.pd.ib_devices", "0.5.12", "--disaggregation-ib-device ,"),
    Case("sglang.pd.ib_devices", "0.5.23", f"{PREFILL} --disaggregation-transfer-backend nixl "
         "--disaggregation-ib-device="),
    # -- an MXFP8 KV cache needs Blackwell
    Case("sglang.kv_mxfp8.platform", "0.5.16", "--kv-cache-dtype mxfp8",
         "--kv-cache-dtype mxfp8 requires an SM100+ (Blackwell) GPU", f"{SA}:5069"),
    Case("sglang.kv_mxfp8.platform", "0.5.23", "--kv-cache-dtype mxfp8", "requires an SM100+ (Blackwell) GPU",
         f"{KV}:106"),
    Case("sglang.kv_mxfp8.platform", "0.5.23", "--kv-cache-dtype mxfp8", gpu="blackwell"),
    Case("sglang.kv_mxfp8.platform", "0.5.16", "--kv-cache-dtype fp8_e4m3"),
    # -- unified memory under PD disaggregation
    Case("sglang.unified_memory.pd", "0.5.18", f"--enable-unified-memory {DECODE} "
         "--disaggregation-transfer-backend nixl", "supports only the mooncake transfer backend; got 'nixl'.",
         f"{SA}:8292", exception="AssertionError"),
    Case("sglang.unified_memory.pd", "0.5.21", f"--enable-unified-memory {DECODE} "
         "--disaggregation-transfer-backend nixl", "supports only these transfer backends: mooncake; got 'nixl'.",
         f"{KV}:486", exception="AssertionError"),
    Case("sglang.unified_memory.pd", "0.5.21", f"--enable-unified-memory {DECODE}"),
    Case("sglang.unified_memory.pd", "0.5.21", f"--enable-unified-memory {DECODE} "
         "--disaggregation-decode-enable-offload-kvcache --hicache-storage-backend mooncake",
         "decode KV offload currently supports --hicache-storage-backend=file only.", f"{KV}:514",
         exception="AssertionError"),
    Case("sglang.unified_memory.pd", "0.5.21", f"--enable-unified-memory {DECODE} "
         "--disaggregation-decode-enable-offload-kvcache --hicache-storage-backend file",
         "decode KV offload does not support MLA models yet.", f"{KV}:519", model=MLA, exception="AssertionError"),
    Case("sglang.unified_memory.pd", "0.5.21", f"--enable-unified-memory {DECODE} "
         "--disaggregation-decode-enable-offload-kvcache --hicache-storage-backend file"),
    Case("sglang.unified_memory.pd", "0.5.21", f"--enable-unified-memory {DECODE} "
         "--disaggregation-decode-retraction-backup host_pool --disaggregation-decode-enable-radix-cache",
         "host-pool decode retraction does not support decode radix-cache", f"{KV}:533",
         exception="AssertionError"),
    Case("sglang.unified_memory.pd", "0.5.22", f"--enable-unified-memory {DECODE} "
         "--disaggregation-decode-retraction-backup host_pool --disaggregation-decode-enable-radix-cache"),
    # -- the page-major layout (which unified memory turns on) needs the Triton Mamba kernels
    Case("sglang.page_major_kv_layout.mamba_backend", "0.5.18", "--enable-unified-memory --mamba-backend flashinfer",
         "requires the Triton Mamba kernels for the strided conv/SSM state; got 'flashinfer'.", f"{SA}:8436",
         exception="AssertionError"),
    Case("sglang.page_major_kv_layout.mamba_backend", "0.5.23", "--enable-page-major-kv-layout "
         "--enable-unified-memory --mamba-backend flashinfer", "requires the Triton Mamba kernels", f"{KV}:858",
         exception="AssertionError"),
    Case("sglang.page_major_kv_layout.mamba_backend", "0.5.23", "--mamba-backend flashinfer"),
    Case("sglang.page_major_kv_layout.mamba_backend", "0.5.23", "--enable-unified-memory"),
    # -- HiSparse in check_server_args (0.5.10 - 0.5.11)
    Case("sglang.hisparse.check_server_args", "0.5.10", "--enable-hisparse",
         "--enable-hisparse is only supported for DSA (DeepSeek Sparse Attention) models", f"{SA}:6184",
         exception="AssertionError"),
    Case("sglang.hisparse.check_server_args", "0.5.11", "--enable-hisparse --disable-radix-cache", model=DSA),
    Case("sglang.hisparse.check_server_args", "0.5.11", f"{DECODE} --enable-hisparse", model=DSA),
    Case("sglang.hisparse.check_server_args", "0.5.12", "--enable-hisparse"),
]


def _id(c: Case) -> str:
    return f"{c.rule}-{c.version}-{c.model.rsplit('/', 1)[-1]}-{c.words or 'defaults'}-" \
           f"{'refused' if c.refused else 'accepted'}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    layout = blackwell() if case.gpu == "blackwell" else hopper()
    judged = judge(case.version, case.words, case.model, layout)
    assert_verdict(judged, case.rule, case.refused, exception=case.exception, version=case.version,
                   source=case.source)
    if case.refused is None:
        assert not [n for n in judged.not_judged if f"({case.rule})" in n], judged.not_judged


def test_every_rule_has_a_refused_and_an_accepted_case() -> None:
    for rule in rules_pd.RULES:
        assert any(c.rule == rule and c.refused for c in CASES), rule
        assert any(c.rule == rule and not c.refused for c in CASES), rule


def test_hierarchical_cache_without_a_known_radix_cache_is_not_judged() -> None:
    """Model and feature branches may turn the radix cache off first: a line that leaves it on is not claimed."""
    judged = judge("0.5.23", "--enable-hierarchical-cache")
    assert not [r for r in judged.refusals if r.rule == "sglang.hicache.radix_cache"]
    assert any("(sglang.hicache.radix_cache)" in n for n in judged.not_judged), judged.not_judged


def test_a_decode_radix_cache_leaves_the_hierarchical_cache_check_unclaimed() -> None:
    judged = judge("0.5.12", f"{DECODE} --enable-hierarchical-cache --disaggregation-decode-enable-radix-cache")
    assert not [r for r in judged.refusals if r.rule == "sglang.hicache.radix_cache"]
    assert any("(sglang.hicache.radix_cache)" in n for n in judged.not_judged), judged.not_judged


def test_a_hybrid_mamba_model_under_decode_offload_is_not_claimed() -> None:
    judged = judge("0.5.21", f"--enable-unified-memory {DECODE} --disaggregation-decode-enable-offload-kvcache "
                   "--hicache-storage-backend file", HYBRID)
    assert not [r for r in judged.refusals if r.rule == "sglang.unified_memory.pd"]
    assert any("(sglang.unified_memory.pd): reads" in n and "mambaish_config" in n for n in judged.not_judged)


def test_mxfp8_on_gpus_of_unknown_capability_is_not_judged() -> None:
    line = resolve(["--model-path", "m", "--kv-cache-dtype", "mxfp8"], Version("0.5.23"))
    judged = config_check(line, model_of(DENSE), Layout(8), Version("0.5.23"))
    assert not [r for r in judged.refusals if r.rule == "sglang.kv_mxfp8.platform"]
    assert any("(sglang.kv_mxfp8.platform)" in n for n in judged.not_judged), judged.not_judged


def test_a_blank_ib_device_is_refused_before_the_host_is_read() -> None:
    line = resolve(["--model-path", "m", "--disaggregation-mode", "decode", "--disaggregation-ib-device", "  "],
                   Version("0.5.23"))
    judged = config_check(line, model_of(DENSE), hopper(), Version("0.5.23"))
    assert [r.message for r in judged.refusals if r.rule == "sglang.pd.ib_devices"] == ["No valid IB devices specified"]
