"""SGLang's ``--language-model-only``, ``--load-publish-endpoint`` and DSA ``index_kpool`` / DCP refusals
(``engines/sglang/rules_model5.py``), each in the release's words at its line, beside the same line accepted
(another flag, model or release). The line is parsed by the release's own parser (``engines/sglang/cli.py
resolve``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_model5
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

MODELS = Path(__file__).resolve().parent.parent / "data" / "models"
QWEN = "Qwen/Qwen3-8B"
V32 = "deepseek-ai/DeepSeek-V3.2"          # DeepseekV32ForCausalLM with index_topk, no index_kpool: 1
V4 = "deepseek-v4-flash"                   # DeepseekV4ForCausalLM
GLIMMER = "arch:MuseGlimmerForConditionalGeneration"
MUSE_SPARK = "arch:MuseSparkForConditionalGeneration"
#: variants of a model's config.json (``name+variant``)
VARIANTS: dict[str, dict[str, object]] = {
    "kpool4": {"index_kpool": 4},          # a pooled index key of four positions
}
#: MiniMax-M3.1 built over a MoE fixture's shape: its architecture and the quantization_config of each kind
MINIMAX = "minimax:"
MINIMAX_QUANT: dict[str, dict[str, object]] = {
    "nvfp4": {"quant_method": "mxfp8", "moe_quant_algo": "NVFP4", "moe_quant_format": "nvfp4-pack-quantized"},
    "mxfp8": {"quant_method": "mxfp8"},
}
H100 = (9, 0)
B200 = (10, 0)


def model(name: str) -> ModelSpec:
    """A catalog model or a fixture folder of ``tests/data/models``; ``+variant``: its config.json with the keys of
    ``VARIANTS``; ``arch:<Architecture>``: Qwen3-8B's shape under that architecture."""
    if name.startswith(MINIMAX):
        spec = load_model(str(MODELS / "qwen3-30b-a3b-fp8"))
        config = json.loads(spec.config_json)
        config.update(architectures=["MiniMaxM3SparseForCausalLM"],
                      quantization_config=MINIMAX_QUANT[name.removeprefix(MINIMAX)])
        return replace(spec, architectures=("MiniMaxM3SparseForCausalLM",), config_json=json.dumps(config))
    if name.startswith("arch:"):
        arch = name.removeprefix("arch:")
        return replace(load_model(QWEN), architectures=(arch,))
    base, _, variant = name.partition("+")
    spec = load_model(base if "/" in base else str(MODELS / base))
    if not variant:
        return spec
    config = json.loads(spec.config_json)
    config.update(VARIANTS[variant])
    return replace(spec, config_json=json.dumps(config))


def judge(version: str, words: list[str], name: str, tp: int = 8, path: str = "m",
          cc: tuple[int, int] | None = H100, env: dict[str, str] | None = None) -> Judged:
    line = resolve(["--model-path", path, *words], Version(version))
    assert line.ok, line.errors
    return config_check(line, model(name), Layout(tp, 1, 1, cc, "NVIDIA H100 80GB HBM3", 81559, 1),
                        Version(version), env or {})


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: tuple[str, ...]
    model: str
    refused: str | None = None          # the release's words; None: accepted
    source: str = ""                    # file:line in that release
    exception: str = "ValueError"
    cc: tuple[int, int] = H100
    env: tuple[tuple[str, str], ...] = ()


SA = "sglang/srt/server_args.py"
MH = "sglang/srt/arg_groups/model_hook.py"
VH = "sglang/srt/arg_groups/validation_hook.py"
DS = "sglang/srt/arg_groups/model_overrides/deepseek_v2.py"
LMO = "sglang.language_model_only"
LP = "sglang.load_publish.kv_events"
KP = "sglang.dsa.index_kpool_dcp"
V4A = "sglang.deepseek_v4.prefill_cp_a2a"
V4H = "sglang/srt/arg_groups/deepseek_v4_hook.py"
CPD = "sglang.cp.attn_dp_replicas"
MOB = "sglang/srt/arg_groups/model_override_base.py"
REPLICAS = ("--dp-size 2 with --attn-dp-size 2: data-parallel replicas combined with attention data parallelism "
            "are not supported.")
RB = "sglang.pd.rust_server_bootstrap_port"
PDH = "sglang/srt/arg_groups/pd_disaggregation_hook.py"
RUST = (("SGLANG_RUST_SERVER", "1"),)
MI = "sglang.multi_item_scoring.chunked_prefill"
MULTI = ("Multi-item scoring requires chunked prefill to be disabled. Please set --chunked-prefill-size -1 when "
         "using --multi-item-scoring-delimiter.")
SM = "sglang.env.sampling_mask_max_tokens"
SAMPLING_MASK = "SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS is no longer supported. Unset it."
Q4 = "sglang.qwen4_exp.overrides"
QWEN4 = "arch:Qwen4ExpForConditionalGeneration"
Q4F = "sglang/srt/arg_groups/model_overrides/qwen4_exp.py"
CV2 = "sglang.mimo_v2.cp_v2_strategy"
MIMO = "mimo-v2"
ZIGZAG = "MiMo V2 CP-v2 only supports --cp-strategy zigzag."
MP = "sglang.minimax_m3.nvfp4_page_size"
MB = "sglang.minimax_m3.nvfp4_blackwell"
MM = "sglang/srt/arg_groups/model_overrides/minimax_m3.py"
NO_KV_EVENTS = ("--load-publish-endpoint requires --kv-events-config: routers discover the load range through "
                "/server_info's kv_events block, absent without a publisher.")
NULL_PUBLISHER = ("--load-publish-endpoint needs an active --kv-events-config publisher; got publisher='null' or an "
                  "empty endpoint.")
KPOOL = ("--dcp-size > 1 is not supported for DSA with index_kpool=4: a pooled index key spans positions owned by "
         "different DCP ranks.")

CASES = [
    # -- --language-model-only: the flags it cannot be combined with, the release's architecture list
    Case(LMO, "0.5.18", ("--language-model-only", "--encoder-only"), GLIMMER,
         "--language-model-only cannot be combined with --encoder-only", f"{SA}:7673"),
    Case(LMO, "0.5.18", ("--language-model-only",), QWEN,
         "--language-model-only does not support ['Qwen3ForCausalLM']. Supported: "
         "['MuseGlimmerForConditionalGeneration'].", f"{SA}:7683"),
    Case(LMO, "0.5.18", ("--language-model-only",), GLIMMER),
    Case(LMO, "0.5.18", ("--encoder-only",), QWEN),                      # without the flag: returns at once
    Case(LMO, "0.5.19", ("--language-model-only", "--enable-broadcast-mm-inputs-process"), GLIMMER,
         "--language-model-only cannot be combined with --enable-broadcast-mm-inputs-process", f"{MH}:848"),
    Case(LMO, "0.5.19", ("--language-model-only", "--language-only", "--encoder-only"), GLIMMER,
         "--language-model-only cannot be combined with --encoder-only", f"{MH}:848"),   # the first in its order
    Case(LMO, "0.5.21", ("--language-model-only",), V4,
         "--language-model-only does not support ['DeepseekV4ForCausalLM']. Supported: "
         "['MuseGlimmerForConditionalGeneration', 'Cosmos3ForConditionalGeneration', "
         "'Cosmos3EdgeForConditionalGeneration'].", f"{MH}:992"),
    Case(LMO, "0.5.21", ("--language-model-only",), "arch:Cosmos3ForConditionalGeneration"),
    Case(LMO, "0.5.22", ("--language-model-only",), V4),                # DeepSeek-V4 is listed from 0.5.22
    Case(LMO, "0.5.23", ("--language-model-only", "--mm-enable-dp-encoder"), V4,
         "--language-model-only cannot be combined with --mm-enable-dp-encoder", f"{MH}:1094"),
    Case(LMO, "0.5.23", ("--language-model-only",), QWEN,
         "--language-model-only does not support ['Qwen3ForCausalLM']. Supported: ['DeepseekV4ForCausalLM', "
         "'MuseGlimmerForConditionalGeneration', 'Cosmos3ForConditionalGeneration', "
         "'Cosmos3EdgeForConditionalGeneration'].", f"{MH}:1106"),
    Case(LMO, "0.5.23", ("--language-model-only",), V4),
    # -- --load-publish-endpoint against --kv-events-config
    Case(LP, "0.5.19", ("--load-publish-endpoint", "auto"), QWEN, NO_KV_EVENTS, f"{VH}:299"),
    Case(LP, "0.5.19", ("--load-publish-endpoint", "auto", "--kv-events-config", '{"publisher":"zmq"}'), QWEN),
    Case(LP, "0.5.19", ("--load-publish-endpoint", "auto", "--kv-events-config", '{"endpoint":"tcp://*:6000"}'),
         QWEN, NULL_PUBLISHER, f"{VH}:309"),                            # the publisher defaults to null
    Case(LP, "0.5.23", ("--load-publish-endpoint", "tcp://*:7000"), QWEN, NO_KV_EVENTS, f"{VH}:453"),
    Case(LP, "0.5.23", ("--load-publish-endpoint", "auto", "--kv-events-config",
                        '{"publisher":"zmq","endpoint":""}'), QWEN, NULL_PUBLISHER, f"{VH}:463"),
    Case(LP, "0.5.23", ("--load-publish-endpoint", "off"), QWEN),       # off: nothing to validate
    Case(LP, "0.5.23", ("--load-publish-endpoint", "auto", "--kv-events-config",
                        '{"publisher":"zmq","endpoint":"tcp://*:5557","format":"dynamo"}'), QWEN),
    # -- DSA with a pooled index key under DCP
    Case(KP, "0.5.22", ("--dcp-size", "2"), V32 + "+kpool4", KPOOL, f"{DS}:165"),
    Case(KP, "0.5.22", ("--dcp-size", "2"), V32),                       # index_kpool 1
    Case(KP, "0.5.23", ("--dcp-size", "2"), V32 + "+kpool4", KPOOL, f"{DS}:164"),
    Case(KP, "0.5.23", (), V32 + "+kpool4"),                            # no DCP
    Case(KP, "0.5.23", ("--dcp-size", "2"), "arch:DeepseekV32ForCausalLM"),   # no index_topk: not DSA
    # -- DeepSeek-V4 prefill CP's all-to-all backend
    Case(V4A, "0.5.17", ("--enable-prefill-cp", "--cp-strategy", "interleave", "--moe-a2a-backend", "mooncake"), V4,
         "DeepSeekV4 CP supports moe_a2a_backend in ('none', 'deepep', 'megamoe'), got 'mooncake'.",
         f"{V4H}:181"),
    Case(V4A, "0.5.17", ("--enable-prefill-cp", "--cp-strategy", "interleave", "--moe-a2a-backend", "deepep"), V4),
    Case(V4A, "0.5.17", ("--moe-a2a-backend", "mooncake"), V4),                  # CP off: returns at once
    Case(V4A, "0.5.19", ("--enable-prefill-cp", "--cp-strategy", "interleave", "--moe-a2a-backend", "mori"), V4),
    Case(V4A, "0.5.23", ("--enable-prefill-cp", "--cp-strategy", "interleave", "--moe-a2a-backend", "flashinfer"),
         V4, "DeepSeekV4 CP supports moe_a2a_backend in ('none', 'deepep', 'megamoe', 'mori'), got 'flashinfer'.",
         f"{V4H}:231"),
    Case(V4A, "0.5.23", ("--enable-prefill-cp", "--cp-strategy", "interleave", "--moe-a2a-backend", "flashinfer",
                         "--moe-runner-backend", "megamoe"), V4),                # the alias sets megamoe first
    Case(V4A, "0.5.23", ("--enable-prefill-cp", "--cp-strategy", "interleave", "--moe-a2a-backend", "flashinfer"),
         QWEN),
    # -- the attention-DP width of a DeepSeek CP layout
    Case(CPD, "0.5.22", ("--enable-prefill-cp", "--cp-strategy", "interleave", "--attn-dp-size", "2", "--dp-size",
                         "2"), V4, REPLICAS, f"{MOB}:235", exception="AssertionError"),
    Case(CPD, "0.5.22", ("--enable-prefill-cp", "--cp-strategy", "interleave", "--attn-dp-size", "2"), V4),
    Case(CPD, "0.5.23", ("--enable-prefill-cp", "--cp-strategy", "interleave", "--attn-dp-size", "2", "--dp-size",
                         "2"), V32, REPLICAS, f"{MOB}:235", exception="AssertionError"),
    Case(CPD, "0.5.23", ("--attn-dp-size", "2", "--dp-size", "2"), V32),      # no CP layout: not called
    # -- SGLANG_RUST_SERVER's bootstrap registry on a prefill server's api port
    Case(RB, "0.5.17", ("--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "9000"), QWEN,
         "SGLANG_RUST_SERVER serves the PD KV bootstrap registry on the api port itself; "
         "--disaggregation-bootstrap-port 9000 conflicts with --port 30000.", f"{PDH}:136", env=RUST),
    Case(RB, "0.5.17", ("--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "9000"), QWEN),
    Case(RB, "0.5.17", ("--disaggregation-mode", "decode", "--disaggregation-bootstrap-port", "9000"), QWEN,
         env=RUST),                                                              # decode keeps the prefill's port
    Case(RB, "0.5.21", ("--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "9000", "--port",
                        "9100"), QWEN, "--disaggregation-bootstrap-port 9000 conflicts with --port 9100.",
         f"{PDH}:209", env=RUST),
    Case(RB, "0.5.23", ("--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "9000"), QWEN,
         "--disaggregation-bootstrap-port 9000 conflicts with --port 30000.", f"{PDH}:277", env=RUST),
    Case(RB, "0.5.23", ("--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "9000", "--port",
                        "9000"), QWEN, env=RUST),
    Case(RB, "0.5.23", ("--disaggregation-mode", "prefill"), QWEN, env=RUST),  # the default: aliased to --port
    # -- multi-item scoring needs chunked prefill off
    Case(MI, "0.5.3.post1", ("--multi-item-scoring-delimiter", "151643"), QWEN, MULTI, f"{SA}:3022",
         exception="AssertionError"),
    Case(MI, "0.5.3.post1", ("--multi-item-scoring-delimiter", "151643", "--chunked-prefill-size", "-1",
                             "--disable-radix-cache"), QWEN),
    Case(MI, "0.5.10", ("--multi-item-scoring-delimiter", "151643", "--chunked-prefill-size", "4096"), QWEN, MULTI,
         f"{SA}:6174", exception="AssertionError"),
    Case(MI, "0.5.10", ("--chunked-prefill-size", "4096"), QWEN),
    # -- the removed SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS
    Case(SM, "0.5.20", (), QWEN, SAMPLING_MASK, f"{VH}:467",
         env=(("SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS", "0"),)),
    Case(SM, "0.5.20", (), QWEN, env=(("SGLANG_ENABLE_DISAGG_SAMPLING_MASK", "1"),)),
    Case(SM, "0.5.23", (), QWEN, SAMPLING_MASK, f"{VH}:680",
         env=(("SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS", "4096"),)),
    Case(SM, "0.5.19", (), QWEN, env=(("SGLANG_DISAGGREGATION_SAMPLING_MASK_MAX_TOKENS", "4096"),)),
    # -- Qwen4-Exp's override
    Case(Q4, "0.5.20", ("--enable-unified-memory",), QWEN4, "Qwen4-Exp does not support --enable-unified-memory yet",
         f"{Q4F}:42"),
    Case(Q4, "0.5.20", ("--enable-unified-memory",), QWEN),
    Case(Q4, "0.5.23", ("--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "mori"), QWEN4),
    Case(Q4, "0.5.23", ("--qsa-indexer-dtype", "fp8_e4m3"), QWEN4,
         "--qsa-indexer-dtype fp8_e4m3 requires a CUDA SM90/SM100 GPU", f"{Q4F}:82", cc=(12, 0)),
    Case(Q4, "0.5.23", ("--qsa-indexer-dtype", "fp8_e4m3"), QWEN4, cc=B200),
    # -- MiMo-V2 prefill CP-v2 (on by default) wants zigzag
    Case(CV2, "0.5.16", ("--enable-prefill-cp", "--cp-strategy", "interleave"), MIMO, ZIGZAG, f"{SA}:5526"),
    Case(CV2, "0.5.16", ("--enable-prefill-cp", "--cp-strategy", "interleave"), MIMO,
         env=(("SGLANG_ENABLE_CP_V2", "0"),)),
    Case(CV2, "0.5.19", ("--enable-prefill-cp", "--cp-strategy", "interleave"), MIMO, ZIGZAG,
         "sglang/srt/arg_groups/parallel_hook.py:55", env=(("SGLANG_ENABLE_CP_V2", "yes"),)),
    Case(CV2, "0.5.19", ("--enable-prefill-cp", "--cp-strategy", "zigzag"), MIMO),
    Case(CV2, "0.5.19", ("--cp-strategy", "interleave"), MIMO),                 # no prefill CP
    # -- MiniMax-M3.1 NVFP4: the page size on any GPU, the all-to-all backend and KV cache dtype on Blackwell
    Case(MP, "0.5.23", ("--page-size", "64"), MINIMAX + "nvfp4", "M3.1 NVFP4 requires --page-size 128", f"{MM}:93"),
    Case(MP, "0.5.23", ("--page-size", "64", "--quantization", "mxfp8"), MINIMAX + "nvfp4"),  # the line's wins
    Case(MP, "0.5.23", ("--page-size", "128"), MINIMAX + "nvfp4"),
    Case(MP, "0.5.23", ("--page-size", "64"), MINIMAX + "mxfp8"),              # plain MXFP8: not the NVFP4 branch
    Case(MP, "0.5.23", ("--page-size", "64", "--quantization", "unquant"), MINIMAX + "nvfp4"),
    Case(MP, "0.5.22", ("--page-size", "64"), MINIMAX + "nvfp4"),              # no NVFP4 branch before 0.5.23
    Case(MB, "0.5.23", ("--moe-a2a-backend", "deepep"), MINIMAX + "nvfp4",
         "M3.1 NVFP4 requires --moe-a2a-backend megamoe", f"{MM}:111", cc=B200),
    Case(MB, "0.5.23", ("--moe-runner-backend", "flashinfer_trtllm_routed", "--moe-a2a-backend", "deepep"),
         MINIMAX + "nvfp4", "M3.1 NVFP4 flashinfer_trtllm_routed requires --moe-a2a-backend none or megamoe",
         f"{MM}:105", cc=B200),
    Case(MB, "0.5.23", ("--moe-a2a-backend", "deepep"), MINIMAX + "nvfp4"),    # off Blackwell: returns first
    Case(MB, "0.5.23", ("--moe-runner-backend", "megamoe", "--moe-a2a-backend", "deepep"), MINIMAX + "nvfp4",
         cc=B200),                                                              # the alias sets megamoe first
    Case(MB, "0.5.23", ("--kv-cache-dtype", "bf16"), MINIMAX + "nvfp4",
         "M3.1 NVFP4 requires --kv-cache-dtype fp8_e4m3", f"{MM}:119", cc=B200),
    Case(MB, "0.5.23", ("--kv-cache-dtype", "fp8_e4m3"), MINIMAX + "nvfp4", cc=B200),
    Case(MB, "0.5.23", (), MINIMAX + "nvfp4", cc=B200),
]


def _id(case: Case) -> str:
    return f"{case.rule}-{case.version}-{' '.join(case.words)}-{case.model}-{'refused' if case.refused else 'ok'}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = judge(case.version, list(case.words), case.model, cc=case.cc, env=dict(case.env))
    if case.refused is None:
        assert_verdict(judged, case.rule, None, exception=case.exception, version=case.version)
        assert not [n for n in judged.not_judged if case.rule in n], judged.not_judged
        return
    assert_verdict(judged, case.rule, case.refused, exception=case.exception, version=case.version,
                   source=case.source)


def test_every_rule_has_a_refused_and_an_accepted_case_on_two_releases() -> None:
    for rule in rules_model5.RULES:
        refused = {c.version for c in CASES if c.rule == rule and c.refused is not None}
        accepted = [c for c in CASES if c.rule == rule and c.refused is None]
        assert refused and accepted, rule
        assert len(refused | {c.version for c in accepted}) >= 2 or rule == MB, rule


def test_muse_spark_leaves_the_dp_encoder_its_override_may_set_not_judged() -> None:
    judged = judge("0.5.23", ["--language-model-only"], MUSE_SPARK)
    assert not [r for r in judged.refusals if r.rule == LMO]
    assert any("--mm-enable-dp-encoder" in n for n in judged.not_judged), judged.not_judged
    refused = judge("0.5.23", ["--language-model-only", "--encoder-only"], MUSE_SPARK)
    assert_verdict(refused, LMO, "--language-model-only cannot be combined with --encoder-only",
                   exception="ValueError", version="0.5.23", source=f"{MH}:1094")


@pytest.mark.parametrize("config", ["not json", '{"publisher":5}', '{"format":"other"}', "[1,2]"])
def test_a_kv_events_config_pydantic_would_refuse_in_its_own_words_is_not_judged(config: str) -> None:
    judged = judge("0.5.23", ["--load-publish-endpoint", "auto", "--kv-events-config", config], QWEN)
    assert not [r for r in judged.refusals if r.rule == LP]
    assert any("--kv-events-config" in n for n in judged.not_judged), judged.not_judged


def test_a_remote_instance_model_path_skips_the_dsa_override() -> None:
    judged = judge("0.5.23", ["--dcp-size", "2"], V32 + "+kpool4", path="instance://10.0.0.1:30000")
    assert not [r for r in judged.refusals if r.rule == KP]


def test_an_unknown_gpu_leaves_the_minimax_blackwell_checks_not_judged() -> None:
    judged = judge("0.5.23", ["--moe-a2a-backend", "deepep"], MINIMAX + "nvfp4", cc=None)
    assert not [r for r in judged.refusals if r.rule == MB]
    assert any("Blackwell" in n for n in judged.not_judged), judged.not_judged


def test_mla_prefill_cp_of_the_deepseek_family_leaves_the_width_check_not_judged() -> None:
    judged = judge("0.5.23", ["--enable-prefill-cp", "--cp-strategy", "interleave", "--attn-dp-size", "2",
                              "--dp-size", "2"], "arch:DeepseekV3ForCausalLM")
    assert not [r for r in judged.refusals if r.rule == CPD]
    assert any("use_mla_backend" in n for n in judged.not_judged), judged.not_judged


def test_qwen4_exp_pd_over_mori_with_pp_is_refused() -> None:
    line = resolve(["--model-path", "m", "--disaggregation-mode", "prefill", "--disaggregation-transfer-backend",
                    "mori", "--pp-size", "2"], Version("0.5.23"))
    assert line.ok, line.errors
    judged = config_check(line, model(QWEN4), Layout(4, 2, 1, H100, "NVIDIA H100 80GB HBM3", 81559, 1),
                          Version("0.5.23"), {})
    assert_verdict(judged, Q4, "Qwen4-Exp PD with MORI requires --pp-size 1", exception="ValueError",
                   version="0.5.23", source=f"{Q4F}:33")
