"""SGLang's DeepSeek sparse-attention, serving-frontend and flag-check refusals (``engines/sglang/rules_model3.py``),
each in the release's words at its line, beside the same line accepted (another value, model or release). The line
is parsed by the release's own parser (``engines/sglang/cli.py resolve``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_model3
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

QWEN = "Qwen/Qwen3-8B"
V32 = "deepseek-ai/DeepSeek-V3.2"     # DeepseekV32ForCausalLM, model_type deepseek_v32, index_topk 2048
V3 = "deepseek-ai/DeepSeek-V3"        # DeepseekV3ForCausalLM without an indexer


def judge(version: str, words: str, model: str, tp: int = 8, pp: int = 1, nodes: int = 1) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    layout = Layout(tp, pp, 1, (9, 0), "NVIDIA H100 80GB HBM3", 81559, nodes)
    return config_check(line, load_model(model), layout, Version(version))


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    model: str = QWEN
    refused: str | None = None          # the release's words; None: accepted
    source: str = ""                    # file:line in that release
    tp: int = 8
    pp: int = 1
    nodes: int = 1
    exception: str = "ValueError"


A = "AssertionError"
SA = "sglang/srt/server_args.py"
AG = "sglang/srt/arg_groups"

CASES = [
    # -- DeepSeek-V3.2's KV cache dtype (its checkpoint is read as DeepseekV3ForCausalLM up to 0.5.11)
    Case("sglang.dsa.kv_cache_dtype", "0.5.4.post2", "--kv-cache-dtype fp8_e5m2", V32,
         "DeepSeek NSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype", f"{SA}:1065", exception=A),
    Case("sglang.dsa.kv_cache_dtype", "0.5.6", "--kv-cache-dtype fp8_e5m2", V32,
         "DeepSeek NSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype", f"{SA}:987", exception=A),
    Case("sglang.dsa.kv_cache_dtype", "0.5.8", "--kv-cache-dtype fp8_e5m2", V32,
         "DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype", f"{SA}:1172", exception=A),
    Case("sglang.dsa.kv_cache_dtype", "0.5.8", "--kv-cache-dtype bf16", V32),
    Case("sglang.dsa.kv_cache_dtype", "0.5.6", "", V32),
    # prefill CP makes it bf16 first in 0.5.6 - 0.5.7 (server_args.py:957)
    Case("sglang.dsa.kv_cache_dtype", "0.5.6", "--kv-cache-dtype fp8_e5m2 --enable-nsa-prefill-context-parallel", V32),
    Case("sglang.dsa.kv_cache_dtype", "0.5.8", "--kv-cache-dtype fp8_e5m2", V3),
    Case("sglang.dsa.kv_cache_dtype", "0.5.8", "--kv-cache-dtype fp8_e5m2", QWEN),
    # -- DeepSeek-V3.2 prefill context parallelism
    Case("sglang.dsa.prefill_cp", "0.5.6", "--enable-nsa-prefill-context-parallel", V32,
         "So context parallel only support Single machine(tp_size == 8)", f"{SA}:958", tp=16, exception=A),
    Case("sglang.dsa.prefill_cp", "0.5.6", "--enable-nsa-prefill-context-parallel", V32),
    Case("sglang.dsa.prefill_cp", "0.5.9", "--enable-nsa-prefill-context-parallel --dp-size 2", V32,
         "For round-robin split mode, dp attention is not supported.", f"{SA}:1233", exception=A),
    Case("sglang.dsa.prefill_cp", "0.5.9",
         "--enable-nsa-prefill-context-parallel --nsa-prefill-cp-mode in-seq-split --dp-size 2", V32),
    Case("sglang.dsa.prefill_cp", "0.5.12", "--enable-nsa-prefill-context-parallel", V32,
         "Context parallel only supports single machine (tp_size <= 8).", f"{SA}:1840", tp=16, exception=A),
    Case("sglang.dsa.prefill_cp", "0.5.12", "--enable-nsa-prefill-context-parallel", V32, tp=4),
    # 0.5.14: the legacy spelling is the interleave strategy (_handle_legacy_cp_arguments runs first)
    Case("sglang.dsa.prefill_cp", "0.5.14", "--enable-nsa-prefill-context-parallel --dp-size 2", V32,
         "interleave DSA CP does not support DP attention.", f"{SA}:3576", exception=A),
    Case("sglang.dsa.prefill_cp", "0.5.14", "--enable-prefill-cp --cp-strategy zigzag --dp-size 2", V32),
    Case("sglang.dsa.prefill_cp", "0.5.14", "--enable-prefill-cp --cp-strategy interleave --dp-size 2", V3),
    # -- --enable-dsa-cache-layer-split needs interleaved prefill CP and no PP
    Case("sglang.dsa.cache_layer_split", "0.5.16", "--enable-dsa-cache-layer-split", V32,
         "--enable-dsa-cache-layer-split requires --enable-prefill-cp and --cp-strategy interleave", f"{SA}:4456"),
    Case("sglang.dsa.cache_layer_split", "0.5.18",
         "--enable-dsa-cache-layer-split --enable-prefill-cp --cp-strategy interleave", V32,
         "--enable-dsa-cache-layer-split is not supported with pipeline parallelism", f"{SA}:5434", pp=2),
    Case("sglang.dsa.cache_layer_split", "0.5.16",
         "--enable-dsa-cache-layer-split --enable-prefill-cp --cp-strategy interleave", V32),
    # -- serving-frontend values
    Case("sglang.serving.flag_values", "0.5.23", "--asr-max-buffer-seconds 0", QWEN,
         "--asr-max-buffer-seconds must be positive (got 0).", f"{AG}/serving_hook.py:127"),
    Case("sglang.serving.flag_values", "0.5.13", "--asr-max-concurrent-sessions 0", QWEN,
         "--asr-max-concurrent-sessions must be positive (got 0).", f"{SA}:4388"),
    Case("sglang.serving.flag_values", "0.5.23", "--asr-max-buffer-seconds 5", QWEN),
    Case("sglang.serving.flag_values", "0.5.13", "--mm-process-config [1]", QWEN,
         "mm_process_config must be a dict, but got <class 'list'>", f"{SA}:1147", exception="TypeError"),
    Case("sglang.serving.flag_values", "0.5.23", '--mm-process-config {"image":1}', QWEN,
         "mm_process_config['image'] must be a dict, but got <class 'int'>", f"{AG}/serving_hook.py:156",
         exception="TypeError"),
    Case("sglang.serving.flag_values", "0.5.23", '--mm-process-config {"image":{"max_pixels":1}}', QWEN),
    Case("sglang.serving.flag_values", "0.5.23", '--limit-mm-data-per-request {"pdf":1}', QWEN,
         "Invalid modality 'pdf' in --limit-mm-data-per-request.", f"{AG}/serving_hook.py:603"),
    Case("sglang.serving.flag_values", "0.5.7", '--limit-mm-data-per-request {"image":2}', QWEN),
    Case("sglang.serving.flag_values", "0.5.23", '--preferred-sampling-params {"watermark":1}', QWEN,
         "watermark is not supported in --preferred-sampling-params", f"{AG}/serving_hook.py:619"),
    Case("sglang.serving.flag_values", "0.5.21", '--preferred-sampling-params {"watermark":1}', QWEN),
    Case("sglang.serving.flag_values", "0.5.16", "--default-chat-template-kwargs [1]", QWEN,
         "--default-chat-template-kwargs must decode to a JSON object", f"{SA}:2924"),
    Case("sglang.serving.flag_values", "0.5.4", "--enable-tokenizer-batch-encode --enable-dynamic-batch-tokenizer",
         QWEN, "Cannot enable both --enable-tokenizer-batch-encode and --enable-dynamic-batch-tokenizer.",
         f"{SA}:1456"),
    Case("sglang.serving.flag_values", "0.5.4", "--enable-tokenizer-batch-encode", QWEN),
    Case("sglang.serving.flag_values", "0.5.6", "--export-metrics-to-file", QWEN,
         "--export-metrics-to-file-dir is required when --export-metrics-to-file is enabled", f"{SA}:2009"),
    Case("sglang.serving.flag_values", "0.5.6", "--export-metrics-to-file --export-metrics-to-file-dir /tmp/m", QWEN),
    # -- multimodal feature transport
    Case("sglang.mm_feature_transport", "0.5.18", "--mm-feature-transport cuda_vmm", QWEN,
         "--mm-feature-transport=cuda_vmm does not support pipeline parallelism.", f"{SA}:7969", pp=2),
    Case("sglang.mm_feature_transport", "0.5.23", "--mm-feature-transport cuda_ipc", QWEN,
         "--mm-feature-transport=cuda_ipc only supports a single node.", f"{AG}/serving_hook.py:915", nodes=2),
    Case("sglang.mm_feature_transport", "0.5.16", "--keep-mm-feature-on-device", QWEN,
         "--mm-feature-transport=cuda_ipc only supports a single node.", f"{SA}:6620", nodes=2),
    Case("sglang.mm_feature_transport", "0.5.18", "--keep-mm-feature-on-device --mm-feature-transport cpu", QWEN,
         "--keep-mm-feature-on-device conflicts with --mm-feature-transport=cpu.", f"{SA}:7875"),
    Case("sglang.mm_feature_transport", "0.5.23", "--mm-feature-transport cuda_ipc", QWEN),
    Case("sglang.mm_feature_transport", "0.5.23", "", QWEN, nodes=2),
    # -- DeepSeek-V4's FP4 indexer against the GPU (an H100: SM90)
    Case("sglang.deepseek_v4.fp4_indexer_gpu", "0.5.16", "--enable-deepseek-v4-fp4-indexer", QWEN,
         "--enable-deepseek-v4-fp4-indexer requires SM100 GPUs", f"{SA}:6677"),
    Case("sglang.deepseek_v4.fp4_indexer_gpu", "0.5.23", "--enable-deepseek-v4-fp4-indexer", QWEN,
         "--enable-deepseek-v4-fp4-indexer requires SM100, SM120, or gfx95 GPUs", f"{AG}/serving_hook.py:467"),
    Case("sglang.deepseek_v4.fp4_indexer_gpu", "0.5.23", "", QWEN),
    # -- check_server_args
    Case("sglang.check.grpc_port", "0.5.16", "--grpc-port 30000", QWEN,
         "--grpc-port (30000) must differ from --port (30000)", f"{SA}:7748"),
    Case("sglang.check.grpc_port", "0.5.23", "--grpc-port 30001", QWEN),
    Case("sglang.check.tbo_shared_experts_fusion", "0.5.12",
         "--enable-two-batch-overlap --enforce-shared-experts-fusion", QWEN,
         "--enable-two-batch-overlap and --enforce-shared-experts-fusion cannot be used together.", f"{SA}:7382"),
    Case("sglang.check.tbo_shared_experts_fusion", "0.5.13", "--enable-two-batch-overlap", QWEN),
    Case("sglang.check.min_free_slots_delay_pp", "0.5.18", "--min-free-slots-delay 2", QWEN,
         "--min-free-slots-delay is not supported with pipeline parallelism", f"{SA}:9162", pp=2, exception=A),
    Case("sglang.check.min_free_slots_delay_pp", "0.5.19", "--min-free-slots-delay 2", QWEN,
         "--min-free-slots-delay is not supported with pipeline parallelism", f"{AG}/validation_hook.py:55", pp=2,
         exception=A),
    Case("sglang.check.min_free_slots_delay_pp", "0.5.19", "--min-free-slots-delay 2", QWEN),
    Case("sglang.pdmux.chunked_prefill", "0.5.23", "--enable-pdmux --chunked-prefill-size 4096", QWEN,
         "PD-Multiplexing is not compatible with chunked prefill.", f"{AG}/validation_hook.py:253", exception=A),
    Case("sglang.pdmux.chunked_prefill", "0.5.4", "--enable-pdmux --chunked-prefill-size -1", QWEN),
    Case("sglang.sampling_backend.intel_xpu", "0.5.21", "--sampling-backend intel_xpu", QWEN,
         "--sampling-backend intel_xpu requires --device xpu, got --device cuda", f"{AG}/validation_hook.py:392"),
    Case("sglang.sampling_backend.intel_xpu", "0.5.23", "--sampling-backend flashinfer", QWEN),
    Case("sglang.check.interval_values", "0.5.23", "--prefill-decode-interval -1", QWEN,
         "--prefill-decode-interval must be non-negative.", f"{AG}/validation_hook.py:660"),
    Case("sglang.check.interval_values", "0.5.19", "--prefill-decode-interval -1", QWEN,
         "--prefill-decode-interval must be non-negative.", f"{AG}/validation_hook.py:415"),
    Case("sglang.check.interval_values", "0.5.23", "--sampling-mask-max-tokens 0", QWEN,
         "--sampling-mask-max-tokens must be positive (got 0).", f"{AG}/validation_hook.py:688"),
    Case("sglang.check.interval_values", "0.5.23", "--ple-offload-embedding --cpu-offload-gb 4", QWEN,
         "--ple-offload-embedding cannot be combined with --cpu-offload-gb", f"{AG}/memory_hook.py:34"),
    Case("sglang.check.interval_values", "0.5.23", "--prefill-decode-interval 4 --ple-offload-embedding", QWEN),
    Case("sglang.prefill_cp.two_spellings", "0.5.13",
         "--enable-prefill-context-parallel --enable-nsa-prefill-context-parallel", QWEN,
         "--enable-prefill-context-parallel and --enable-nsa-prefill-context-parallel are mutually exclusive.",
         f"{SA}:3271"),
    Case("sglang.prefill_cp.two_spellings", "0.5.13", "--enable-prefill-context-parallel", QWEN),
]


def _id(c: Case) -> str:
    return f"{c.rule}-{c.version}-{c.words or 'defaults'}-{'refused' if c.refused else 'accepted'}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = judge(case.version, case.words, case.model, case.tp, case.pp, case.nodes)
    assert_verdict(judged, case.rule, case.refused, exception=case.exception, version=case.version,
                   source=case.source)
    if case.refused is None:
        assert not [n for n in judged.not_judged if case.rule in n], judged.not_judged


def test_every_rule_has_a_refused_and_an_accepted_case() -> None:
    for rule in rules_model3.RULES:
        assert [c for c in CASES if c.rule == rule and c.refused], rule
        assert [c for c in CASES if c.rule == rule and not c.refused], rule


def test_deepseek_v32_is_read_under_its_own_architecture_from_0_5_12() -> None:
    """0.5.12's branch lists DeepseekV32ForCausalLM, whose config SGLang now keeps: the same dtype is judged there
    by that release's entries, which no longer hold the dtype assert; 0.5.11 reads the checkpoint as V3."""
    v32 = load_model(V32)
    assert rules_model3.model_arch(v32, Version("0.5.11")) == "DeepseekV3ForCausalLM"
    assert rules_model3.model_arch(v32, Version("0.5.12")) == "DeepseekV32ForCausalLM"


def test_pdmux_without_a_chunked_prefill_size_is_not_claimed() -> None:
    judged = judge("0.5.23", "--enable-pdmux", QWEN)
    assert not [r for r in judged.refusals if r.rule == "sglang.pdmux.chunked_prefill"]
    assert any("--enable-pdmux" in n for n in judged.not_judged), judged.not_judged


def test_layer_offload_without_the_ple_flag_is_not_claimed() -> None:
    judged = judge("0.5.23", "--cpu-offload-gb 4", QWEN)
    assert not [r for r in judged.refusals if r.rule == "sglang.check.interval_values"]
    assert any("ple_offload_embedding" in n for n in judged.not_judged), judged.not_judged
