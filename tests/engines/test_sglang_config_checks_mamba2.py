"""SGLang's Mamba radix-cache strategy refusals (``engines/sglang/rules_mamba2.py``), each in the release's words at
its line, beside the same line accepted (another strategy, page size, model or release). The line is parsed by the
release's own parser (``engines/sglang/cli.py resolve``); the models are Qwen3-Next's config under the architecture
the release's Mamba step reads (``hf_config.architectures[0]``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_mamba2
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.machine.capability import Capability
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

#: the model configs of tests/data/models, wherever the tests are started from
MODELS_DIR = str(Path(__file__).resolve().parents[1] / "data" / "models")

NEXT = "Qwen3NextForCausalLM"                # GDN: uses the Mamba radix cache, supports the extra buffer
LFM2 = "Lfm2ForCausalLM"                     # uses it, never supports the extra buffer
NEMOTRON = "NemotronHForCausalLM"            # supports it from 0.5.13 (0.5.9 - 0.5.12: not)
GLM4 = "Glm4MoeForCausalLM"                  # 0.5.8's branch that holds the extra-buffer page asserts
QWEN3 = "Qwen3ForCausalLM"                   # no Mamba step at all
DSV32 = "DeepseekV32ForCausalLM"             # DeepSeek-V3.2: DSA (index_topk in its config)
SINK = "DeepseekV32ForCausalLM+learnable_sink"
V41 = "DeepseekV4ForCausalLM+deepseek_v41"
H100, B200 = (9, 0), (10, 0)

EXTRA_MODEL, EXTRA_PAGE = rules_mamba2.EXTRA_MODEL, rules_mamba2.EXTRA_PAGE
RADIX_OFF, LAZY = rules_mamba2.EXTRA_RADIX_OFF, rules_mamba2.EXTRA_LAZY
FLASHINFER, NO_BUFFER, REPLAYSSM = rules_mamba2.FLASHINFER_NO_BUFFER, rules_mamba2.NO_BUFFER, rules_mamba2.REPLAYSSM
DSA, DSA_SINK = rules_mamba2.DSA_BACKENDS, rules_mamba2.DSA_SINK
GRAPHS, V41_GRAPH = rules_mamba2.GRAPH_BACKENDS, rules_mamba2.V41_PREFILL_GRAPH
GRAPH_HOOK = "sglang/srt/arg_groups/cuda_graph_hook.py"
V4_HOOK = "sglang/srt/arg_groups/deepseek_v4_hook.py"
ROCM_ONLY = "The triton DSA backend is only supported on ROCm/HIP. Pick an alternative DSA backend for CUDA"
SERVER = "sglang/srt/server_args.py"
HOOK = "sglang/srt/arg_groups/mamba_hook.py"
OVERRIDES = "sglang/srt/arg_groups/overrides.py"
ATTENTION = "sglang/srt/arg_groups/attention_hook.py"
TRACK = "mamba_track_interval 256 must be divisible by page_size 48"
CHUNK = "For SSM models, either chunk_size or page_size must be divisible by the other, got chunk_size=64, page_size=96"
OVERLAP = "no_buffer do not support overlap schedule. Try to set disable_overlap_schedule=True."


def model(arch: str, **config: object) -> ModelSpec:
    """Qwen3-Next's shape under ``arch``, its ``config.json`` with ``config`` written in; DeepSeek-V3.2's
    (``DSV32``), with ``learnable_sink`` (``SINK``) or as DeepSeek-V4.1 (``V41``: ``model_type`` deepseek_v41)."""
    if arch in (DSV32, SINK, V41):
        v32 = load_model(f"{MODELS_DIR}/deepseek-v3.2")
        if arch == SINK:
            return replace(v32, config_json=json.dumps({**json.loads(v32.config_json), "learnable_sink": True}))
        if arch == V41:
            return replace(v32, architectures=("DeepseekV4ForCausalLM",), model_type="deepseek_v41",
                           config_model_type="deepseek_v41")
        return v32
    spec = load_model(f"{MODELS_DIR}/qwen3-next-80b-a3b-instruct")
    if arch == NEXT and not config:
        return spec
    written = {**json.loads(spec.config_json), "architectures": [arch], **config}
    return replace(spec, architectures=(arch,), config_json=json.dumps(written))


def judge(version: str, words: str, arch: str = NEXT, cc: Capability | None = H100,
          **config: object) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    layout = Layout(4, 1, 1, cc, "NVIDIA GPU", 81559)
    return config_check(line, model(arch, **config), layout, Version(version))


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    arch: str = NEXT
    refused: str | None = None          # the release's words; None: accepted
    source: str = ""                    # file:line in that release
    cc: Capability | None = H100
    exception: str = "AssertionError"


CASES = [
    # -- a model (or linear-attention backend) without the extra buffer
    Case(EXTRA_MODEL, "0.5.12", "--mamba-scheduler-strategy extra_buffer", NEMOTRON,
         "mamba extra_buffer is not supported for NemotronHForCausalLM model", f"{SERVER}:2506"),
    Case(EXTRA_MODEL, "0.5.13", "--mamba-scheduler-strategy extra_buffer", NEMOTRON),       # 0.5.13 supports it
    Case(EXTRA_MODEL, "0.5.9", "--mamba-scheduler-strategy extra_buffer", LFM2,
         "mamba extra_buffer is not supported for Lfm2ForCausalLM model", f"{SERVER}:1724"),
    Case(EXTRA_MODEL, "0.5.9", "", LFM2),                                  # auto is no_buffer up to 0.5.13
    Case(EXTRA_MODEL, "0.5.14", "--mamba-radix-cache-strategy extra_buffer", LFM2,
         "extra_buffer is not supported for Lfm2ForCausalLM; use no_buffer.", f"{SERVER}:4365"),
    Case(EXTRA_MODEL, "0.5.16", "--mamba-radix-cache-strategy extra_buffer --linear-attn-backend flashinfer",
         NEXT, "extra_buffer is not supported for Qwen3NextForCausalLM; use no_buffer.", f"{SERVER}:4834"),
    # auto: without the triton backend Qwen3-Next resolves to no_buffer (the overlap schedule turned off), accepted
    Case(EXTRA_MODEL, "0.5.16", "--linear-attn-backend flashinfer", NEXT),
    Case(EXTRA_MODEL, "0.5.19", "--mamba-radix-cache-strategy extra_buffer", LFM2,
         "extra_buffer is not supported for Lfm2ForCausalLM; use no_buffer.", f"{HOOK}:100"),
    Case(EXTRA_MODEL, "0.5.23", "--mamba-radix-cache-strategy extra_buffer", LFM2,
         "extra_buffer is not supported for Lfm2ForCausalLM; use no_buffer.", f"{HOOK}:117"),
    Case(EXTRA_MODEL, "0.5.23", "", LFM2),                                  # auto resolves to no_buffer
    Case(EXTRA_MODEL, "0.5.23", "--mamba-radix-cache-strategy extra_buffer", NEXT),
    # -- the page size against the track interval and the chunk size
    Case(EXTRA_PAGE, "0.5.7", "--mamba-scheduler-strategy extra_buffer --page-size 48", NEXT, TRACK,
         f"{SERVER}:1422"),
    Case(EXTRA_PAGE, "0.5.7", "--mamba-scheduler-strategy extra_buffer --page-size 128", NEXT,
         "Page size for hybrid GDN model must be divisible by 64, got 128", f"{SERVER}:1425"),
    Case(EXTRA_PAGE, "0.5.7", "--mamba-scheduler-strategy extra_buffer --page-size 32", NEXT),
    # 0.5.8 holds the asserts under the GLM-4 MoE branch, not Qwen3-Next's (0.5.8 server_args.py l.1523-1560)
    Case(EXTRA_PAGE, "0.5.8", "--mamba-scheduler-strategy extra_buffer --page-size 48", GLM4, TRACK,
         f"{SERVER}:1552"),
    Case(EXTRA_PAGE, "0.5.8", "--mamba-scheduler-strategy extra_buffer --page-size 48", NEXT),
    Case(EXTRA_PAGE, "0.5.9", "--mamba-scheduler-strategy extra_buffer --page-size 48", NEXT, TRACK,
         f"{SERVER}:1738"),
    Case(EXTRA_PAGE, "0.5.12", "--mamba-scheduler-strategy extra_buffer --page-size 96 --mamba-track-interval 384",
         NEXT, "either FLA_CHUNK_SIZE or page_size must be divisible by the other, got FLA_CHUNK_SIZE=64, "
         "self.page_size=96", f"{SERVER}:2530"),
    Case(EXTRA_PAGE, "0.5.12", "--page-size 48", NEXT),                     # auto: no_buffer, nothing checked
    Case(EXTRA_PAGE, "0.5.13", "--mamba-scheduler-strategy extra_buffer --page-size 96 --mamba-track-interval 384",
         NEXT, "got chunk_size=64, self.page_size=96", f"{SERVER}:7396"),
    Case(EXTRA_PAGE, "0.5.14", "--page-size 48", NEXT, "", f"{SERVER}:4377"),       # auto: extra_buffer
    Case(EXTRA_PAGE, "0.5.16", "--page-size 96 --mamba-track-interval 384", NEXT, CHUNK, f"{SERVER}:7552"),
    Case(EXTRA_PAGE, "0.5.23", "--page-size 48", NEXT, "", f"{HOOK}:135"),
    Case(EXTRA_PAGE, "0.5.23", "--page-size 96 --mamba-track-interval 384", NEXT, CHUNK, f"{OVERRIDES}:1919"),
    Case(EXTRA_PAGE, "0.5.23", "--page-size 64", NEXT),
    # the config's own chunk size
    Case(EXTRA_PAGE, "0.5.23", "--page-size 96 --mamba-track-interval 384 --mamba-chunk-size-config 32", NEXT),
    # -- extra_buffer with the radix cache off (0.5.10 - 0.5.13)
    Case(RADIX_OFF, "0.5.10", "--mamba-scheduler-strategy extra_buffer --disable-radix-cache", NEXT,
         "mamba extra_buffer is not compatible with --disable-radix-cache Overlap", f"{SERVER}:2167",
         exception="ValueError"),
    Case(RADIX_OFF, "0.5.13", "--mamba-scheduler-strategy extra_buffer --disable-radix-cache", NEXT,
         "mamba extra_buffer is not compatible with --disable-radix-cache. Overlap", f"{SERVER}:2698",
         exception="ValueError"),
    Case(RADIX_OFF, "0.5.13", "--disable-radix-cache", NEXT),
    Case(RADIX_OFF, "0.5.9", "--mamba-scheduler-strategy extra_buffer --disable-radix-cache", NEXT),
    # -- extra_buffer_lazy
    Case(LAZY, "0.5.17", "--mamba-radix-cache-strategy extra_buffer_lazy --disaggregation-mode prefill", NEXT,
         "extra_buffer_lazy unsupported under PD disaggregation", f"{SERVER}:5595"),
    Case(LAZY, "0.5.17", "--mamba-radix-cache-strategy extra_buffer_lazy --speculative-algorithm DFLASH", NEXT,
         "extra_buffer_lazy unsupported with DFLASH; use --mamba-radix-cache-strategy extra_buffer.",
         f"{SERVER}:5602"),
    Case(LAZY, "0.5.23", "--mamba-radix-cache-strategy extra_buffer_lazy --disaggregation-mode prefill", NEXT,
         "extra_buffer_lazy unsupported under PD disaggregation", f"{HOOK}:125"),
    Case(LAZY, "0.5.23", "--mamba-radix-cache-strategy extra_buffer_lazy", NEXT),
    Case(LAZY, "0.5.23", "--mamba-radix-cache-strategy extra_buffer --disaggregation-mode prefill", NEXT),
    # -- FlashInfer GDN decode with no_buffer (0.5.10)
    Case(FLASHINFER, "0.5.10", "--linear-attn-decode-backend flashinfer", NEXT,
         "FlashInfer GDN decode (--linear-attn-decode-backend flashinfer) is not compatible with "
         "--mamba-scheduler-strategy no_buffer.", f"{SERVER}:2158", exception="ValueError"),
    Case(FLASHINFER, "0.5.10", "--linear-attn-decode-backend flashinfer --mamba-scheduler-strategy extra_buffer", NEXT),
    Case(FLASHINFER, "0.5.10", "--linear-attn-decode-backend flashinfer", QWEN3),
    # -- no_buffer (0.5.14+)
    Case(NO_BUFFER, "0.5.14", "--mamba-radix-cache-strategy no_buffer", NEXT, OVERLAP, f"{SERVER}:4357"),
    Case(NO_BUFFER, "0.5.16", "--page-size 16", LFM2, "no_buffer only supports page_size=1.", f"{SERVER}:4823"),
    Case(NO_BUFFER, "0.5.16", "--page-size 16", NEXT),                      # auto: extra_buffer there
    Case(NO_BUFFER, "0.5.23", "--mamba-radix-cache-strategy no_buffer", NEXT, OVERLAP, f"{HOOK}:158"),
    Case(NO_BUFFER, "0.5.23", "--mamba-radix-cache-strategy no_buffer --disable-overlap-schedule --attention-backend "
         "trtllm_mha", NEXT, "no_buffer do not support trtllm_mha attention backend.", f"{HOOK}:161", cc=B200),
    Case(NO_BUFFER, "0.5.23", "--mamba-radix-cache-strategy no_buffer --disable-overlap-schedule", NEXT),
    Case(NO_BUFFER, "0.5.23", "--mamba-radix-cache-strategy no_buffer --disable-radix-cache", NEXT),
    Case(NO_BUFFER, "0.5.23", "--page-size 16", LFM2, "no_buffer only supports page_size=1.", f"{HOOK}:157"),
    Case(NO_BUFFER, "0.5.23", "", LFM2),
    Case(NO_BUFFER, "0.5.13", "--mamba-scheduler-strategy no_buffer --page-size 16", NEXT),   # no such check yet
    # -- ReplaySSM against the extra buffer auto resolves to
    Case(REPLAYSSM, "0.5.15", "--enable-linear-replayssm", NEXT,
         "--enable-linear-replayssm requires --mamba-scheduler-strategy no_buffer (the default); the extra_buffer "
         "ping-pong donation path is not yet supported (follow-up). Got --mamba-scheduler-strategy='extra_buffer'.",
         f"{SERVER}:4753", exception="ValueError"),
    Case(REPLAYSSM, "0.5.16", "--enable-gdn-replayssm-spec", NEXT,
         "--enable-gdn-replayssm-spec is not yet compatible with mamba extra_buffer", f"{SERVER}:5392",
         exception="ValueError"),
    Case(REPLAYSSM, "0.5.18", "--enable-linear-replayssm --mamba-radix-cache-strategy extra_buffer", NEXT,
         "Got --mamba-radix-cache-strategy='extra_buffer'.", f"{SERVER}:6356", exception="ValueError"),
    Case(REPLAYSSM, "0.5.23", "--enable-linear-replayssm", NEXT,
         "Got --mamba-radix-cache-strategy='extra_buffer'.", f"{ATTENTION}:418", exception="ValueError"),
    Case(REPLAYSSM, "0.5.23", "--enable-linear-replayssm --disable-overlap-schedule", NEXT),   # auto: no_buffer
    Case(REPLAYSSM, "0.5.23", "--enable-linear-replayssm", LFM2),
    # -- the DSA split backends
    Case(DSA, "0.5.20", "--dsa-prefill-backend triton", DSV32, ROCM_ONLY, f"{OVERRIDES}:633", exception="ValueError"),
    Case(DSA, "0.5.23", "--dsa-decode-backend triton", DSV32, ROCM_ONLY, f"{OVERRIDES}:563", exception="ValueError"),
    Case(DSA, "0.5.23", "--dsa-prefill-backend flashmla_sparse", DSV32),
    Case(DSA, "0.5.19", "--dsa-prefill-backend tilelang --kv-cache-dtype fp8_e4m3", DSV32),   # no such check yet
    Case(DSA, "0.5.23", "--dsa-prefill-backend triton", QWEN3),                 # not a DSA model
    # auto is fp8_e4m3 on SM100 (bfloat16 below): 0.5.20 - 0.5.21 refuse tilelang with it
    Case(DSA, "0.5.21", "--dsa-prefill-backend tilelang", DSV32,
         "The tilelang DSA prefill/decode kernels only support an fp8_e4m3 KV cache on ROCm/HIP", f"{OVERRIDES}:544",
         cc=B200, exception="ValueError"),
    Case(DSA, "0.5.21", "--dsa-prefill-backend tilelang", DSV32),
    Case(DSA, "0.5.22", "--dsa-prefill-backend tilelang --kv-cache-dtype fp8_e4m3", DSV32,
         "CUDA TileLang FP8 KV requires both DSA backends to be tilelang", f"{OVERRIDES}:548", exception="ValueError"),
    Case(DSA, "0.5.23", "--dsa-prefill-backend tilelang --dsa-decode-backend tilelang --kv-cache-dtype fp8_e4m3 "
         "--dcp-size 2", DSV32, "CUDA TileLang FP8 KV does not support --dcp-size > 1.", f"{OVERRIDES}:577",
         exception="ValueError"),
    Case(DSA, "0.5.23", "--dsa-prefill-backend tilelang --dsa-decode-backend tilelang --kv-cache-dtype fp8_e4m3",
         DSV32, "CUDA TileLang FP8 KV requires SM89 or newer.", f"{OVERRIDES}:583", cc=(8, 0), exception="ValueError"),
    Case(DSA, "0.5.23", "--dsa-prefill-backend tilelang --dsa-decode-backend tilelang --kv-cache-dtype fp8_e4m3",
         DSV32),
    Case(DSA, "0.5.23", "--dsa-prefill-backend tilelang --kv-cache-dtype bfloat16", DSV32),
    Case(DSA_SINK, "0.5.20", "--dsa-decode-backend fa3", SINK,
         "DeepseekV32ForCausalLM uses learnable attention sinks and requires --dsa-decode-backend 'flashmla_sparse'; "
         "got 'fa3'", f"{OVERRIDES}:717", exception="ValueError"),
    Case(DSA_SINK, "0.5.23", "--dsa-prefill-backend trtllm", SINK,
         "requires --dsa-prefill-backend 'flashmla_sparse'; got 'trtllm'", f"{OVERRIDES}:650", exception="ValueError"),
    Case(DSA_SINK, "0.5.23", "--dsa-decode-backend flashmla_sparse", SINK),
    Case(DSA_SINK, "0.5.23", "--dsa-decode-backend fa3", DSV32),
    # -- the CUDA-graph backends
    Case(GRAPHS, "0.5.14", "--cuda-graph-backend-prefill full", QWEN3,
         "--cuda-graph-config[prefill].backend='full' not allowed; allowed: ('breakable', 'tc_piecewise', 'disabled')",
         f"{SERVER}:3086", exception="ValueError"),
    Case(GRAPHS, "0.5.15", "--cuda-graph-backend-prefill full", QWEN3),
    Case(GRAPHS, "0.5.18", '--cuda-graph-config {"prefill":{"backend":"piecewise"}}', QWEN3,
         "--cuda-graph-config[prefill].backend='piecewise' not allowed; allowed: ('full', 'breakable', "
         "'tc_piecewise', 'disabled')", f"{SERVER}:4766", exception="ValueError"),
    Case(GRAPHS, "0.5.21", '--cuda-graph-config {"prefill":{"backend":"tc_piecewise"}}', QWEN3),
    Case(GRAPHS, "0.5.23", '--cuda-graph-config {"decode":{"backend":"foo"}}', QWEN3,
         "--cuda-graph-config[decode].backend='foo' not allowed; allowed: ('full', 'breakable', 'disabled')",
         f"{GRAPH_HOOK}:417", exception="ValueError"),
    Case(GRAPHS, "0.5.23", '--cuda-graph-config {"decode":{"backend":"full"}} --cuda-graph-backend-prefill breakable',
         QWEN3),
    # -- DeepSeek-V4.1 with TRT-LLM attention and a prefill CUDA graph
    Case(V41_GRAPH, "0.5.22", "--dsv4-attn-backend trtllm --cuda-graph-backend-prefill breakable", V41,
         "DeepSeek-V4.1 TRT-LLM requires --cuda-graph-backend-prefill disabled", f"{V4_HOOK}:220", cc=B200,
         exception="ValueError"),
    Case(V41_GRAPH, "0.5.22", "--dsv4-attn-backend trtllm --disable-prefill-cuda-graph", V41, cc=B200),
    Case(V41_GRAPH, "0.5.23", "--dsv4-attn-backend trtllm --cuda-graph-backend-prefill full", V41,
         "DeepSeek-V4.1 TRT-LLM requires --cuda-graph-backend-prefill disabled or breakable", f"{V4_HOOK}:287",
         cc=B200, exception="ValueError"),
    Case(V41_GRAPH, "0.5.23", "--dsv4-attn-backend trtllm --cuda-graph-backend-prefill breakable", V41, cc=B200),
    Case(V41_GRAPH, "0.5.23", "--cuda-graph-backend-prefill full", V41, cc=B200),
]


def _id(case: Case) -> str:
    return f"{case.rule}-{case.version}-{case.arch}-{case.words or 'default'}-{'refused' if case.refused else 'ok'}"


def _words(case: Case) -> tuple[str, dict[str, object]]:
    """The line, less the test's own ``--mamba-chunk-size-config N`` (written into the model's config instead)."""
    words = case.words.split()
    config: dict[str, object] = {}
    if "--mamba-chunk-size-config" in words:
        at = words.index("--mamba-chunk-size-config")
        config["mamba_chunk_size"] = int(words[at + 1])
        del words[at:at + 2]
    return " ".join(words), config


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    words, config = _words(case)
    judged = judge(case.version, words, case.arch, case.cc, **config)
    assert_verdict(judged, case.rule, case.refused, exception=case.exception, version=case.version,
                   source=case.source)
    if case.refused is None:
        assert not [n for n in judged.not_judged if case.rule in n], judged.not_judged


def test_every_rule_has_a_refused_and_an_accepted_case() -> None:
    for rule in rules_mamba2.RULES:
        assert any(c.rule == rule and c.refused is not None for c in CASES), rule
        assert any(c.rule == rule and c.refused is None for c in CASES), rule


def test_a_blackwell_gpu_without_an_attention_backend_is_not_judged() -> None:
    """Qwen3.5 / Nemotron-H's branches set the page size and strategy on Blackwell when no backend is given."""
    judged = judge("0.5.23", "--page-size 48", NEXT, B200)
    assert not [r for r in judged.refusals if r.rule == EXTRA_PAGE]
    assert any("Blackwell" in n for n in judged.not_judged), judged.not_judged
    named = judge("0.5.23", "--page-size 48 --attention-backend triton", NEXT, B200)
    assert [r for r in named.refusals if r.rule == EXTRA_PAGE]


def test_a_chunk_size_the_config_class_may_give_is_not_guessed() -> None:
    judged = judge("0.5.23", "--page-size 96 --mamba-track-interval 384", NEMOTRON)
    assert not [r for r in judged.refusals if r.rule == EXTRA_PAGE]
    assert any("chunk size" in n for n in judged.not_judged), judged.not_judged


def test_speculative_decoding_leaves_the_page_checks_not_judged() -> None:
    judged = judge("0.5.23", "--page-size 48 --speculative-algorithm EAGLE", NEXT)
    assert not [r for r in judged.refusals if r.rule == EXTRA_PAGE]
    assert any("draft-token count" in n for n in judged.not_judged), judged.not_judged


def test_a_prefill_graph_the_line_leaves_to_the_release_is_not_judged_for_deepseek_v41() -> None:
    judged = judge("0.5.23", "--dsv4-attn-backend trtllm", V41, B200)
    assert not [r for r in judged.refusals if r.rule == V41_GRAPH]
    assert any("DeepSeek-V4.1" in n for n in judged.not_judged), judged.not_judged


def test_a_cuda_graph_config_the_release_parser_may_refuse_is_not_judged() -> None:
    judged = judge("0.5.23", '--cuda-graph-config {"prefill":{"backend":"foo","max_context_size":8}}', QWEN3)
    assert not [r for r in judged.refusals if r.rule == GRAPHS]
    assert any("--cuda-graph-config" in n for n in judged.not_judged), judged.not_judged


def test_hisparse_leaves_the_dsa_backends_not_judged() -> None:
    judged = judge("0.5.23", "--dsa-prefill-backend triton --enable-hisparse --disable-radix-cache", DSV32)
    assert not [r for r in judged.refusals if r.rule == DSA]
    assert any("HiSparse" in n or "hisparse" in n for n in judged.not_judged), judged.not_judged


def test_a_pd_decode_worker_and_a_model_without_the_step_reach_no_check() -> None:
    decode = judge("0.5.23", "--mamba-radix-cache-strategy no_buffer --disaggregation-mode decode", NEXT)
    assert not [r for r in decode.refusals if r.rule.startswith("sglang.mamba2.")]
    dense = judge("0.5.23", "--page-size 48", QWEN3)
    assert not [r for r in dense.refusals if r.rule.startswith("sglang.mamba2.")]


def test_a_model_of_the_releases_lists_is_judged_or_said_not_judged_never_both() -> None:
    assert not rules_mamba2.JUDGED & rules_mamba2.NOT_JUDGED
    judged = judge("0.5.23", "--mamba-radix-cache-strategy no_buffer", "KimiLinearForCausalLM")
    assert not [r for r in judged.refusals if r.rule == NO_BUFFER]
    assert any("KimiLinearForCausalLM" in n for n in judged.not_judged), judged.not_judged
