"""SGLang's cache, Mamba, serving-frontend and remaining argument refusals by release
(``engines/sglang/rules_cache.py``: SSL / HTTP2, gRPC, watermarks, PP, the prefill-only KV cache, unified memory,
page-major layout, FP4 KV, hierarchical cache, HiSparse, LayerNorm SP, Mamba, deterministic inference, IQuest Q1, aux
hidden states): each line is parsed by the release's own parser tables, judged by the release's conditions, and
refused in its words at its file:line; each refusal has an accepted neighbour (the line without the conflict, or a
release without the check).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from packaging.version import Version
from sglang_line_cases import assert_verdict

from pytest_gpulayout.engines.sglang import rules_cache
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout, load_ledger

DENSE = "Qwen/Qwen3-8B"


LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
MLA = "deepseek-ai/DeepSeek-V3"
DSA = "deepseek-ai/DeepSeek-V3.2"
HYBRID = str(Path(__file__).parents[1] / "data" / "models" / "qwen3-next-80b-a3b-instruct")
IQUEST = "IQuestQ1ForCausalLM"        # no checkpoint of it in the fixtures: Qwen3-8B's shapes under its architecture


def model_of(name: str) -> ModelSpec:
    if name == IQUEST:
        return replace(load_model(DENSE), architectures=(IQUEST,))
    return load_model(name)


def on(tp: int = 8, pp: int = 1) -> Layout:
    return Layout(tp, pp, 1, (9, 0), "NVIDIA H100 80GB HBM3", 81559)


def blackwell(tp: int = 8) -> Layout:
    return Layout(tp, 1, 1, (10, 0), "NVIDIA B200", 183359)


def judge(version: str, words: str, layout: Layout | None = None, model: str = DENSE) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    return config_check(line, model_of(model), layout or on(), Version(version))


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    layout: Layout | None = None
    refused: str | None = None            # the release's words; None: the release accepts the line
    source: str = ""                      # file:line where it refuses
    exception: str = "ValueError"
    model: str = DENSE


SA = "sglang/srt/server_args.py"
SH = "sglang/srt/arg_groups/serving_hook.py"
VH = "sglang/srt/arg_groups/validation_hook.py"
KH = "sglang/srt/arg_groups/kv_cache_hook.py"
LH = "sglang/srt/arg_groups/layernorm_sp_hook.py"
HH = "sglang/srt/arg_groups/hicache_hook.py"
HS = "sglang/srt/arg_groups/hisparse_hook.py"
MB = "sglang/srt/arg_groups/mamba_hook.py"
IQ = "sglang/srt/arg_groups/model_overrides/iquest_q1.py"
PREFILL_ONLY = "--prefill-only-disable-kv-cache --is-embedding --chunked-prefill-size -1 --disable-radix-cache"

CASES = [
    # SSL: the key and the certificate go together; the CA bundle, the key password and the refresh need both
    Case("sglang.ssl.files", "0.5.23", "--ssl-keyfile k.pem",
         refused="--ssl-keyfile requires --ssl-certfile to be specified as well.", source=f"{SH}:51"),
    Case("sglang.ssl.files", "0.5.14", "--ssl-ca-certs ca.pem",
         refused="--ssl-ca-certs has no effect without --ssl-certfile and --ssl-keyfile.", source=f"{SA}:2660"),
    Case("sglang.ssl.files", "0.5.23", "--enable-ssl-refresh",
         refused="--enable-ssl-refresh requires --ssl-certfile and --ssl-keyfile to be specified.",
         source=f"{SH}:84"),
    Case("sglang.ssl.files", "0.5.23", "--ssl-keyfile k.pem --ssl-certfile c.pem --enable-ssl-refresh"),
    Case("sglang.ssl.files", "0.5.14", "--ssl-keyfile k.pem --ssl-certfile c.pem --ssl-ca-certs ca.pem"),
    Case("sglang.ssl.files", "0.5.12", "--ssl-keyfile k.pem --ssl-certfile c.pem"),
    # HTTP/2: the stream and window ranges, no SSL refresh, (to 0.5.13) one tokenizer worker
    Case("sglang.http2", "0.5.20", "--enable-http2 --http2-max-concurrent-streams 0",
         refused="--http2-max-concurrent-streams must be between 1 and 4294967295.", source=f"{SH}:77"),
    Case("sglang.http2", "0.5.20", "--enable-http2 --http2-initial-connection-window-size 512",
         refused="--http2-initial-connection-window-size must be between 1024 and 2147483647."),
    Case("sglang.http2", "0.5.20", "--enable-http2 --http2-max-concurrent-streams 100"),
    Case("sglang.http2", "0.5.20", "--http2-max-concurrent-streams 0"),      # without --enable-http2
    Case("sglang.http2", "0.5.12", "--enable-http2 --tokenizer-worker-num 2",
         refused="--enable-http2 does not yet support --tokenizer-worker-num > 1.", source=f"{SA}:1089"),
    Case("sglang.http2", "0.5.14", "--enable-http2 --tokenizer-worker-num 2"),
    Case("sglang.http2", "0.5.23", "--enable-http2 --enable-ssl-refresh --ssl-keyfile k.pem --ssl-certfile c.pem",
         refused="--enable-ssl-refresh is not supported with --enable-http2.", source=f"{SH}:116"),
    Case("sglang.http2", "0.5.23", "--enable-http-worker-reuseport",
         refused="--enable-http-worker-reuseport requires --tokenizer-worker-num > 1", source=f"{SH}:91"),
    Case("sglang.http2", "0.5.23", "--enable-http-worker-reuseport --tokenizer-worker-num 4"),
    # watermarks (0.5.22+): the config needs the flag; the flag refuses a custom logit processor, PD, a diffusion LLM
    Case("sglang.watermark.needs_enable", "0.5.23", "--watermark-config {}",
         refused="--watermark-config requires --enable-watermark", source=f"{VH}:37"),
    Case("sglang.watermark.needs_enable", "0.5.22", "--watermark-config {}",
         refused="--watermark-config requires --enable-watermark", source=f"{VH}:36"),
    Case("sglang.watermark.needs_enable", "0.5.23", "--watermark-config {} --enable-watermark"),
    Case("sglang.watermark.conflicts", "0.5.23", "--enable-watermark --enable-custom-logit-processor",
         refused="--enable-watermark is incompatible with --enable-custom-logit-processor", source=f"{VH}:75"),
    Case("sglang.watermark.conflicts", "0.5.22", "--enable-watermark --disaggregation-mode prefill",
         refused="--enable-watermark is not supported with PD disaggregation", source=f"{VH}:88"),
    Case("sglang.watermark.conflicts", "0.5.23", "--enable-watermark"),
    Case("sglang.watermark.conflicts", "0.5.23", "--enable-custom-logit-processor"),
    # --min-free-slots-delay with pipeline parallelism (0.5.21+)
    Case("sglang.pp.min_free_slots_delay", "0.5.23", "--min-free-slots-delay 4", on(tp=4, pp=2),
         refused="--min-free-slots-delay is not supported with pipeline parallelism", source=f"{VH}:165",
         exception="AssertionError"),
    Case("sglang.pp.min_free_slots_delay", "0.5.21", "--min-free-slots-delay 4", on(tp=4, pp=2),
         refused="--min-free-slots-delay is not supported with pipeline parallelism", source=f"{VH}:83",
         exception="AssertionError"),
    Case("sglang.pp.min_free_slots_delay", "0.5.23", "--min-free-slots-delay 4"),
    Case("sglang.pp.min_free_slots_delay", "0.5.23", "", on(tp=4, pp=2)),
    # --prefill-only-disable-kv-cache: an embedding server, one chunk, no radix cache, no FP4 / MXFP8 KV, no CP
    Case("sglang.prefill_only_disable_kv_cache", "0.5.23", "--prefill-only-disable-kv-cache",
         refused="--prefill-only-disable-kv-cache currently requires --is-embedding.", source=f"{KH}:880"),
    Case("sglang.prefill_only_disable_kv_cache", "0.5.23", "--prefill-only-disable-kv-cache --is-embedding",
         refused="--prefill-only-disable-kv-cache requires --chunked-prefill-size=-1", source=f"{KH}:905"),
    Case("sglang.prefill_only_disable_kv_cache", "0.5.23", PREFILL_ONLY),
    Case("sglang.prefill_only_disable_kv_cache", "0.5.23", f"{PREFILL_ONLY} --kv-cache-dtype mxfp8",
         refused="does not currently support --kv-cache-dtype=mxfp8"),
    Case("sglang.prefill_only_disable_kv_cache", "0.5.23", f"{PREFILL_ONLY} --attn-cp-size 2",
         refused="is incompatible with --attn-cp-size > 1"),
    Case("sglang.prefill_only_disable_kv_cache", "0.5.12", f"{PREFILL_ONLY} --kv-cache-dtype fp4_e2m1",
         refused="does not currently support --kv-cache-dtype=fp4_e2m1", source=f"{SA}:3373"),
    Case("sglang.prefill_only_disable_kv_cache", "0.5.12", PREFILL_ONLY),
    Case("sglang.prefill_only_disable_kv_cache", "0.5.23", "--is-embedding"),
    Case("sglang.prefill_only_disable_kv_cache", "0.5.23", f"{PREFILL_ONLY} --attention-backend flashinfer",
         refused="--prefill-only-disable-kv-cache currently requires the FA prefill backend (fa3/fa4), but got "
                 "prefill backend 'flashinfer'.", source=f"{KH}:344"),
    Case("sglang.prefill_only_disable_kv_cache", "0.5.14", f"{PREFILL_ONLY} --prefill-attention-backend triton",
         refused="but got prefill backend 'triton'.", source=f"{SA}:5514"),
    Case("sglang.prefill_only_disable_kv_cache", "0.5.23", f"{PREFILL_ONLY} --attention-backend fa3"),
    # --enable-unified-memory (0.5.15+): DCP to 0.5.19, two-batch overlap from 0.5.20, LMCache, PD
    Case("sglang.unified_memory.flags", "0.5.16", "--enable-unified-memory --dcp-size 2",
         refused="--enable-unified-memory is not yet compatible with decode context parallelism",
         source=f"{SA}:6840", exception="AssertionError"),
    Case("sglang.unified_memory.flags", "0.5.20", "--enable-unified-memory --dcp-size 2"),
    Case("sglang.unified_memory.flags", "0.5.23", "--enable-unified-memory --enable-two-batch-overlap",
         refused="--enable-unified-memory does not support --enable-two-batch-overlap", source=f"{KH}:653",
         exception="AssertionError"),
    Case("sglang.unified_memory.flags", "0.5.19", "--enable-unified-memory --enable-two-batch-overlap"),
    Case("sglang.unified_memory.flags", "0.5.23", "--enable-unified-memory --enable-lmcache",
         refused="--enable-unified-memory is not yet compatible with --enable-lmcache", source=f"{KH}:658",
         exception="AssertionError"),
    Case("sglang.unified_memory.flags", "0.5.16", "--enable-unified-memory --disaggregation-mode prefill",
         refused="--enable-unified-memory is not yet compatible with PD disaggregation.", exception="AssertionError"),
    Case("sglang.unified_memory.flags", "0.5.23", "--enable-unified-memory"),
    Case("sglang.unified_memory.flags", "0.5.23", "--enable-two-batch-overlap --enable-lmcache"),
    # gRPC ports: 0.5.11 - 0.5.15 derive one from --port whether gRPC is used or not
    Case("sglang.grpc.port", "0.5.14", "--port 56000",
         refused="SGLANG_GRPC_PORT (66000) must be between 1 and 65535", source=f"{SA}:2767"),
    Case("sglang.grpc.port", "0.5.14", "--port 30000"),
    Case("sglang.grpc.port", "0.5.16", "--port 56000"),                         # only with the legacy SMG mode
    Case("sglang.grpc.port", "0.5.16", "--port 56000 --smg-grpc-mode",
         refused="--grpc-port / SGLANG_GRPC_PORT (66000) must be between 1 and 65535", source=f"{SA}:3331"),
    Case("sglang.grpc.port", "0.5.23", "--grpc-response-timeout-secs 0",
         refused="--grpc-response-timeout-secs must be positive", source=f"{SH}:379"),
    Case("sglang.grpc.port", "0.5.23", "--grpc-response-timeout-secs 30"),
    # the native gRPC server (0.5.16+) and the sidecar it runs
    Case("sglang.grpc.native", "0.5.23", "--grpc-port 50051 --tokenizer-worker-num 2",
         refused="Native gRPC does not yet support --tokenizer-worker-num > 1.", source=f"{SH}:424"),
    Case("sglang.grpc.native", "0.5.23", "--grpc-port 50051 --api-key secret",
         refused="--grpc-port is incompatible with --api-key/--admin-api-key", source=f"{SH}:429"),
    Case("sglang.grpc.native", "0.5.23", "--grpc-port 50051 --tokenizer-worker-num 2 --smg-grpc-mode"),
    Case("sglang.grpc.native", "0.5.23", "--sidecar router", refused="--sidecar requires --grpc-port or "
         "SGLANG_GRPC_PORT.", source=f"{SH}:411"),
    Case("sglang.grpc.native", "0.5.23", "--sidecar router --grpc-port 50051"),
    # LayerNorm SP (0.5.19+): Qwen3 (and from 0.5.23 Muse Spark) only, TP > 1, no attention DP, (0.5.22+) no PP
    Case("sglang.layernorm_sp", "0.5.23", "--enable-layernorm-sp", model=LLAMA,
         refused="--enable-layernorm-sp is only supported for ['MuseSparkForConditionalGeneration', "
                 "'Qwen3ForCausalLM']; got LlamaForCausalLM.", source=f"{LH}:131"),
    Case("sglang.layernorm_sp", "0.5.19", "--enable-layernorm-sp", model=LLAMA,
         refused="--enable-layernorm-sp is only supported for ['Qwen3ForCausalLM']; got LlamaForCausalLM.",
         source=f"{LH}:43"),
    Case("sglang.layernorm_sp", "0.5.23", "--enable-layernorm-sp"),
    Case("sglang.layernorm_sp", "0.5.23", "", model=LLAMA),
    Case("sglang.layernorm_sp", "0.5.23", "--enable-layernorm-sp", on(tp=1),
         refused="--enable-layernorm-sp requires tp_size > 1", source=f"{LH}:136"),
    Case("sglang.layernorm_sp", "0.5.19", "--enable-layernorm-sp --enable-dp-attention --dp-size 2",
         refused="--enable-layernorm-sp is not compatible with --enable-dp-attention", source=f"{LH}:53"),
    Case("sglang.layernorm_sp", "0.5.23", "--enable-layernorm-sp --attn-dp-size 2",
         refused="--enable-layernorm-sp is not compatible with attention DP", source=f"{LH}:173"),
    Case("sglang.layernorm_sp", "0.5.22", "--enable-layernorm-sp", on(tp=4, pp=2),
         refused="--enable-layernorm-sp is not compatible with pipeline parallelism", source=f"{LH}:68"),
    Case("sglang.layernorm_sp", "0.5.21", "--enable-layernorm-sp", on(tp=4, pp=2)),   # before the PP check
    Case("sglang.layernorm_sp.megamoe", "0.5.23", "--enable-megamoe-for-layernorm-sp",
         refused="--enable-megamoe-for-layernorm-sp requires --enable-layernorm-sp.", source=f"{LH}:25"),
    Case("sglang.layernorm_sp.megamoe", "0.5.23", "--enable-layernorm-sp"),
    # the page-major KV layout needs the unified memory pool (0.5.19+)
    Case("sglang.page_major_kv_layout", "0.5.23", "--enable-page-major-kv-layout",
         refused="--enable-page-major-kv-layout without --enable-unified-memory is temporarily unsupported",
         source=f"{KH}:783", exception="AssertionError"),
    Case("sglang.page_major_kv_layout", "0.5.19", "--enable-page-major-kv-layout",
         refused="--enable-page-major-kv-layout without --enable-unified-memory is temporarily unsupported",
         source=f"{KH}:297", exception="AssertionError"),
    Case("sglang.page_major_kv_layout", "0.5.23", "--enable-page-major-kv-layout --enable-unified-memory"),
    Case("sglang.page_major_kv_layout", "0.5.17", "--enable-page-major-kv-layout"),   # before the assert
    # FP4 KV cache: nvfp4 on Blackwell only (0.5.16+), no unified memory (0.5.21+)
    Case("sglang.kv4.platform", "0.5.23", "--kv-cache-dtype nvfp4",
         refused="--kv-cache-dtype=nvfp4 requires Blackwell SM100 or SM120.", source=f"{KH}:128",
         exception="RuntimeError"),
    Case("sglang.kv4.platform", "0.5.16", "--kv-cache-dtype nvfp4",
         refused="--kv-cache-dtype=nvfp4 requires Blackwell SM100 or SM120.", source=f"{SA}:5089",
         exception="RuntimeError"),
    Case("sglang.kv4.platform", "0.5.23", "--kv-cache-dtype nvfp4", blackwell()),
    Case("sglang.kv4.platform", "0.5.23", "--kv-cache-dtype fp4_mx_block16"),
    Case("sglang.kv4.platform", "0.5.23", "--kv-cache-dtype fp4_mx_block16 --enable-unified-memory",
         refused="FP4 KV cache does not yet support --enable-unified-memory", source=f"{KH}:133"),
    Case("sglang.kv4.platform", "0.5.23", "--kv-cache-dtype fp8_e4m3 --enable-unified-memory"),
    # the unified-cache external linker (0.5.20+) and the Mooncake linker's MLA dedup (0.5.21+)
    Case("sglang.hicache.external_linker", "0.5.23",
         "--enable-unified-cache-external-linker --enable-hierarchical-cache",
         refused="--enable-unified-cache-external-linker and --enable-hierarchical-cache are mutually exclusive.",
         source=f"{HH}:51"),
    Case("sglang.hicache.external_linker", "0.5.20",
         "--enable-unified-cache-external-linker --enable-hierarchical-cache",
         refused="--enable-unified-cache-external-linker and --enable-hierarchical-cache are mutually exclusive.",
         source=f"{HH}:28"),
    Case("sglang.hicache.external_linker", "0.5.23", "--enable-unified-cache-external-linker --disable-radix-cache",
         refused="--enable-unified-cache-external-linker requires the default UnifiedRadixCache", source=f"{HH}:46"),
    Case("sglang.hicache.external_linker", "0.5.23", "--enable-unified-cache-external-linker"),
    Case("sglang.hicache.external_linker", "0.5.23", "--enable-linker-mla-dedup",
         refused="--enable-linker-mla-dedup requires the Mooncake linker.", source=f"{HH}:43"),
    Case("sglang.hicache.external_linker", "0.5.23",
         "--enable-linker-mla-dedup --enable-unified-cache-external-linker"),
    Case("sglang.hicache.host_memory_fraction", "0.5.23", "--hicache-host-memory-fraction 1.5",
         refused="--hicache-host-memory-fraction must be in (0, 1].", source=f"{HH}:117"),
    Case("sglang.hicache.host_memory_fraction", "0.5.21", "--hicache-host-memory-fraction 0",
         refused="--hicache-host-memory-fraction must be in (0, 1].", source=f"{HH}:98"),
    Case("sglang.hicache.host_memory_fraction", "0.5.23", "--hicache-host-memory-fraction 1"),
    # hierarchical cache with decode context parallelism (0.5.17+)
    Case("sglang.hicache.dcp", "0.5.17", "--enable-hierarchical-cache --dcp-size 2 --enable-lmcache", model=MLA,
         refused="--enable-lmcache with --dcp-size > 1 is not supported", source=f"{SA}:7179",
         exception="NotImplementedError"),
    Case("sglang.hicache.dcp", "0.5.23", "--enable-hierarchical-cache --dcp-size 2",
         refused="HiCache with --dcp-size > 1 is only supported for MLA models", source=f"{HH}:158",
         exception="NotImplementedError"),
    Case("sglang.hicache.dcp", "0.5.22", "--enable-hierarchical-cache --dcp-size 2 --hicache-storage-backend file",
         model=MLA, refused="--hicache-storage-backend (L3) with --dcp-size > 1 is not supported yet",
         exception="NotImplementedError"),
    Case("sglang.hicache.dcp", "0.5.23", "--enable-hierarchical-cache --dcp-size 2", model=MLA),
    Case("sglang.hicache.dcp", "0.5.23", "--enable-hierarchical-cache"),
    # HiSparse: DeepSeek DSA / V4 / MiniMax M3 only, without the radix cache, (0.5.22+) without mixed chunks
    Case("sglang.hisparse", "0.5.23", "--enable-hisparse --disable-radix-cache",
         refused="--enable-hisparse is only supported for DSA (DeepSeek Sparse Attention) models",
         source=f"{HS}:104", exception="AssertionError"),
    Case("sglang.hisparse", "0.5.12", "--enable-hisparse --disable-radix-cache",
         refused="--enable-hisparse is only supported for DSA (DeepSeek Sparse Attention) models",
         source=f"{HS}:61", exception="AssertionError"),
    Case("sglang.hisparse", "0.5.23", "--enable-hisparse", model=DSA,
         refused="Hierarchical sparse attention currently requires --disable-radix-cache.", source=f"{HS}:109",
         exception="AssertionError"),
    Case("sglang.hisparse", "0.5.23", "--enable-hisparse --disable-radix-cache", model=DSA),
    Case("sglang.hisparse", "0.5.23", "--enable-hisparse --disable-radix-cache --enable-mixed-chunk", model=DSA,
         refused="--enable-hisparse does not support --enable-mixed-chunk yet.", source=f"{HS}:84"),
    Case("sglang.hisparse", "0.5.21", "--enable-hisparse --disable-radix-cache --enable-mixed-chunk", model=DSA),
    # the Mamba backend's flags, read for every model (0.5.15+)
    Case("sglang.mamba.backend_flags", "0.5.23", "--enable-mamba-cache-stochastic-rounding",
         refused="Stochastic rounding for the Mamba SSM cache requires --mamba-ssm-dtype float16, got None.",
         source=f"{MB}:32"),
    Case("sglang.mamba.backend_flags", "0.5.23", "--enable-mamba-cache-stochastic-rounding --mamba-ssm-dtype float16",
         refused="Stochastic rounding for the Mamba SSM cache with --mamba-backend triton requires SM100",
         source=f"{MB}:45"),
    Case("sglang.mamba.backend_flags", "0.5.23", "--enable-mamba-cache-stochastic-rounding --mamba-ssm-dtype float16",
         blackwell()),
    Case("sglang.mamba.backend_flags", "0.5.15", "--mamba-cache-philox-rounds -1",
         refused="--mamba-cache-philox-rounds must be non-negative.", source=f"{SA}:4590"),
    Case("sglang.mamba.backend_flags", "0.5.15", "--mamba-cache-philox-rounds 2"),
    Case("sglang.mamba.backend_flags", "0.5.17", "--mamba-max-states-per-path 0",
         refused="--mamba-max-states-per-path must be -1 (unlimited) or a positive integer, got 0.",
         source=f"{SA}:5956"),
    Case("sglang.mamba.backend_flags", "0.5.23", "--mamba-max-states-per-path 4"),
    # an explicit extra-buffer Mamba strategy on a model without Mamba state (0.5.21+)
    Case("sglang.mamba.strategy_needs_state", "0.5.23", "--mamba-radix-cache-strategy extra_buffer",
         refused="--mamba-radix-cache-strategy extra_buffer needs mamba state, got Qwen3ForCausalLM.",
         source="sglang/srt/arg_groups/model_hook.py:1063"),
    Case("sglang.mamba.strategy_needs_state", "0.5.21", "--mamba-radix-cache-strategy extra_buffer_lazy",
         refused="--mamba-radix-cache-strategy extra_buffer_lazy needs mamba state, got Qwen3ForCausalLM.",
         source="sglang/srt/arg_groups/model_hook.py:951"),
    Case("sglang.mamba.strategy_needs_state", "0.5.23", "--mamba-radix-cache-strategy extra_buffer "
         "--disable-radix-cache"),
    Case("sglang.mamba.strategy_needs_state", "0.5.20", "--mamba-radix-cache-strategy extra_buffer"),
    # deterministic inference's attention backend, where the line names it (0.5.3 - 0.5.14)
    Case("sglang.deterministic.attention_backend", "0.5.3", "--enable-deterministic-inference "
         "--attention-backend torch_native", refused="Currently only ['flashinfer', 'fa3', 'triton'] attention "
         "backends are supported for deterministic inference.", source=f"{SA}:1265"),
    Case("sglang.deterministic.attention_backend", "0.5.10", "--enable-deterministic-inference "
         "--attention-backend flashmla", model=MLA, refused="but you explicitly specified 'flashmla'.",
         source=f"{SA}:3481"),
    Case("sglang.deterministic.attention_backend", "0.5.14", "--enable-deterministic-inference "
         "--attention-backend flashinfer", model=MLA, refused="Currently only ['fa3', 'triton', 'ascend'] attention "
         "backends are supported for deterministic inference with DeepSeek models. But you're using flashinfer.",
         source=f"{SA}:6030"),
    Case("sglang.deterministic.attention_backend", "0.5.14", "--enable-deterministic-inference "
         "--attention-backend flashinfer"),
    Case("sglang.deterministic.attention_backend", "0.5.14", "--enable-deterministic-inference", model=MLA),
    Case("sglang.deterministic.attention_backend", "0.5.14", "--attention-backend torch_native"),
    # IQuest Q1's model override (0.5.21+): FA3 only, no context parallelism, attention DP or PP
    Case("sglang.iquest_q1", "0.5.23", "--attention-backend flashinfer", model=IQUEST,
         refused="IQuestQ1 applies its attention sink from the softmax LSE and requires FA3 attention",
         source=f"{IQ}:20"),
    Case("sglang.iquest_q1", "0.5.23", "--attention-backend fa3", model=IQUEST),
    Case("sglang.iquest_q1", "0.5.23", "--attention-backend flashinfer"),              # another model
    Case("sglang.iquest_q1", "0.5.20", "--attention-backend flashinfer", model=IQUEST),  # before the override
    Case("sglang.iquest_q1", "0.5.21", "--enable-dp-attention --dp-size 2", model=IQUEST,
         refused="IQuest Q1 does not support DP attention.", source=f"{IQ}:37"),
    Case("sglang.iquest_q1", "0.5.23", "--attn-dp-size 2", model=IQUEST,
         refused="IQuest Q1 does not support DP attention.", source=f"{IQ}:38"),
    Case("sglang.iquest_q1", "0.5.23", "", on(tp=4, pp=2), model=IQUEST,
         refused="IQuest Q1 does not support pipeline parallelism.", source=f"{IQ}:40"),
    Case("sglang.iquest_q1", "0.5.23", "--attn-cp-size 2", model=IQUEST,
         refused="IQuestQ1 does not support context parallelism.", source=f"{IQ}:30"),
    # aux hidden-state capture without a draft (0.5.23)
    Case("sglang.aux_hidden_states.needs_enable", "0.5.23", "--return-aux-hidden-state-layer-ids 1 2",
         refused="--return-aux-hidden-state-layer-ids requires --enable-return-aux-hidden-states.",
         source=f"{VH}:707"),
    Case("sglang.aux_hidden_states.needs_enable", "0.5.23", "--return-aux-hidden-state-layer-ids 1 2 "
         "--enable-return-aux-hidden-states --speculative-algorithm DFLASH"),
    Case("sglang.aux_hidden_states", "0.5.23", "--enable-return-aux-hidden-states",
         refused="--enable-return-aux-hidden-states needs --speculative-algorithm EAGLE3, DFLASH or DSPARK to name "
                 "the capture convention, got None.", source=f"{VH}:714"),
    Case("sglang.aux_hidden_states", "0.5.23", "--enable-return-aux-hidden-states --speculative-algorithm EAGLE3"),
    Case("sglang.aux_hidden_states", "0.5.23", "--enable-return-aux-hidden-states --speculative-algorithm DFLASH",
         refused="--enable-return-aux-hidden-states with DFLASH requires --return-aux-hidden-state-layer-ids.",
         source=f"{VH}:731"),
    Case("sglang.aux_hidden_states", "0.5.23", "--enable-return-aux-hidden-states --speculative-algorithm DFLASH "
         "--return-aux-hidden-state-layer-ids 3 3",
         refused="--return-aux-hidden-state-layer-ids must not repeat a layer, got [3, 3].", source=f"{VH}:744"),
    Case("sglang.aux_hidden_states", "0.5.23", "--enable-return-aux-hidden-states --speculative-algorithm DFLASH "
         "--return-aux-hidden-state-layer-ids -1 3",
         refused="--return-aux-hidden-state-layer-ids must be non-negative, got [-1, 3].", source=f"{VH}:739"),
    Case("sglang.aux_hidden_states", "0.5.23", "--enable-return-aux-hidden-states --speculative-algorithm EAGLE3",
         on(tp=4, pp=2), refused="--enable-return-aux-hidden-states only supports pp_size == 1",
         source=f"{VH}:725"),
    # --disable-fast-image-processor against --image-processor-backend (0.5.18+)
    Case("sglang.image_processor", "0.5.18", "--disable-fast-image-processor --image-processor-backend torchvision",
         refused="--disable-fast-image-processor conflicts with --image-processor-backend=torchvision.",
         source=f"{SA}:4128"),
    Case("sglang.image_processor", "0.5.23", "--disable-fast-image-processor --image-processor-backend torchvision",
         refused="--disable-fast-image-processor conflicts with --image-processor-backend=torchvision."),
    Case("sglang.image_processor", "0.5.23", "--disable-fast-image-processor --image-processor-backend pil"),
    Case("sglang.image_processor", "0.5.23", "--disable-fast-image-processor"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.rule}-{c.version}-{c.words or 'defaults'}")
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    assert_verdict(judge(case.version, case.words, case.layout, case.model), case.rule, case.refused,
                   exception=case.exception, version=case.version, source=case.source)


def test_every_rule_of_the_module_has_a_refusing_and_an_accepted_case() -> None:
    refused = {c.rule for c in CASES if c.refused is not None}
    accepted = {c.rule for c in CASES if c.refused is None}
    assert refused == accepted == set(rules_cache.RULES)


def test_a_file_on_the_serving_host_is_named_not_guessed() -> None:
    """Whether --ssl-keyfile's file exists is the serving host's to say (os.path.isfile): a complete pair is not
    refused, and the file checks are named as not judged."""
    judged = judge("0.5.23", "--ssl-keyfile k.pem --ssl-certfile c.pem")
    assert not [r for r in judged.refusals if r.rule == "sglang.ssl.files"]
    assert any("os.path.isfile(cfg.ssl_keyfile)" in n for n in judged.not_judged)


def test_the_watermark_settings_of_a_config_are_not_guessed() -> None:
    """With --watermark-config the settings are the file's (handle_watermark_config): not judged; without it they are
    the fields' defaults, which pass and leave nothing unsaid."""
    plain = judge("0.5.23", "--enable-watermark")
    assert not [n for n in plain.not_judged if "watermark" in n]
    configured = judge("0.5.23", "--enable-watermark --watermark-config {}")
    assert any("watermark_context_window" in n for n in configured.not_judged)


def test_the_environment_gives_the_grpc_port() -> None:
    """SGLANG_GRPC_PORT is read where --grpc-port is not given (0.5.16 server_args.py l.3318-3320)."""
    line = resolve(["--model-path", "m", "--sidecar", "router"], Version("0.5.23"))
    ns = rules_cache.values(line, model_of(DENSE), on(), Version("0.5.23"), {"SGLANG_GRPC_PORT": "50051"})
    assert (ns["grpc_port"], ns["native_grpc"]) == (50051, True)
    ns = rules_cache.values(line, model_of(DENSE), on(), Version("0.5.14"), {})
    assert ns["grpc_port"] == 40000   # --port 30000 + 10000


def test_the_pipeline_overlap_assert_is_answered_unreachable() -> None:
    ledger = load_ledger("sglang")
    overlap = [e for e in ledger.entries if e.function == "check_pipeline_parallel_compat"
               and e.template.startswith("Pipeline parallelism is not compatible with overlap schedule")]
    assert overlap
    assert all((c := ledger.classify(e)) is not None and c.verdict.value == "unreachable" for e in overlap)


def test_a_radix_cache_sglang_turns_off_itself_is_not_guessed() -> None:
    """A PD decode worker has its radix cache turned off by SGLang first (pd_disaggregation_hook.py): HiSparse's
    radix-cache assert is not judged for it."""
    judged = judge("0.5.23", "--enable-hisparse --disaggregation-mode decode", model=DSA)
    assert not [r for r in judged.refusals if "radix" in r.message]
    assert any("disable_radix_cache" in n for n in judged.not_judged)


def test_a_hybrid_models_mamba_strategy_is_not_guessed() -> None:
    """Whether a hybrid model uses the Mamba radix cache is SGLang's to resolve (overrides.py
    _mamba_radix_cache_resolution): not judged, and named; its default strategy leaves nothing unsaid."""
    judged = judge("0.5.23", "--mamba-radix-cache-strategy extra_buffer", model=HYBRID)
    assert not [r for r in judged.refusals if r.rule == "sglang.mamba.strategy_needs_state"]
    assert any("uses_mamba_radix_cache" in n for n in judged.not_judged)
    assert not [n for n in judge("0.5.23", "", model=HYBRID).not_judged
                if any(f"({rule})" in n for rule in rules_cache.RULES)]


def test_whether_flashinfer_mamba_imports_is_not_guessed() -> None:
    judged = judge("0.5.23", "--mamba-backend flashinfer")
    assert not [r for r in judged.refusals if r.rule == "sglang.mamba.backend_flags"]
    assert any("has_flashinfer" in n for n in judged.not_judged)


@pytest.mark.parametrize("version", ["0.5.10", "0.5.14", "0.5.16", "0.5.19", "0.5.22", "0.5.23"])
@pytest.mark.parametrize("model", [DENSE, LLAMA, MLA, IQUEST])
@pytest.mark.parametrize("layout", [on(), blackwell()], ids=["h100", "b200"])
def test_the_release_defaults_refuse_nothing_of_this_module(version: str, model: str, layout: Layout) -> None:
    judged = judge(version, "", layout, model)
    assert not [r for r in judged.refusals if r.rule in rules_cache.RULES]
    assert not [n for n in judged.not_judged if any(f"({rule})" in n for rule in rules_cache.RULES)]
