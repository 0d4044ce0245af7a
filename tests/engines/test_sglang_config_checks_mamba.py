"""SGLang's linear-attention, int8 Mamba checkpoint, deterministic-inference and named-attention-backend refusals
(``engines/sglang/rules_mamba.py``), each in the release's words at its line, beside the same line accepted (the
flag off, another backend, GPU or model, or a release without the check). The line is parsed by the release's own
parser (``engines/sglang/cli.py resolve``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_mamba
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.machine.capability import Capability
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

#: the model configs of tests/data/models, wherever the tests are started from
MODELS_DIR = str(Path(__file__).resolve().parents[1] / "data" / "models")

NEXT = f"{MODELS_DIR}/qwen3-next-80b-a3b-instruct"   # Qwen3-Next: hybrid linear attention (GDN)
QWEN = "Qwen/Qwen3-8B"
DSV3 = "deepseek-ai/DeepSeek-V3"                          # DeepseekV3ForCausalLM: the deterministic DeepSeek list
DUAL = f"{MODELS_DIR}/qwen2.5-7b-instruct-1m"         # Qwen2.5-1M: dual_chunk_attention_config
H100, B200, RTX_PRO = (9, 0), (10, 0), (12, 0)

REPLAYSSM, VERIFY, INT8 = rules_mamba.REPLAYSSM, rules_mamba.VERIFY, rules_mamba.INT8
DETERMINISTIC, DUAL_CHUNK = rules_mamba.DETERMINISTIC, rules_mamba.DUAL_CHUNK
TRTLLM, CUTEDSL = rules_mamba.TRTLLM_PREFILL, rules_mamba.CUTEDSL
HOOK = "sglang/srt/arg_groups/attention_hook.py"
SERVER = "sglang/srt/server_args.py"
OVERRIDES = "sglang/srt/arg_groups/overrides.py"


def model(name: str) -> ModelSpec:
    return load_model(name)


def judge(version: str, words: str, name: str, cc: Capability | None = H100,
          env: dict[str, str] | None = None) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    layout = Layout(4, 1, 1, cc, "NVIDIA GPU", 81559)
    return config_check(line, model(name), layout, Version(version))


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    model: str
    refused: str | None = None          # the release's words; None: accepted
    source: str = ""                    # file:line in that release
    cc: Capability | None = H100
    exception: str = "ValueError"


CASES = [
    # -- ReplaySSM decode backend: triton (0.5.18+: or helion); the SM100 bf16 default makes it flashinfer
    Case(REPLAYSSM, "0.5.23", "--enable-linear-replayssm --linear-attn-decode-backend flashinfer "
         "--mamba-ssm-dtype bfloat16", NEXT,
         "--enable-linear-replayssm requires Triton, or Helion for KDA, as the linear-attn decode backend; got "
         "--linear-attn-decode-backend='flashinfer'.", f"{HOOK}:411", B200),
    Case(REPLAYSSM, "0.5.23", "--enable-linear-replayssm --mamba-ssm-dtype bfloat16", NEXT,
         "got --linear-attn-decode-backend='flashinfer'.", f"{HOOK}:411", B200),
    Case(REPLAYSSM, "0.5.23", "--enable-linear-replayssm --mamba-ssm-dtype bfloat16", NEXT, cc=H100),
    Case(REPLAYSSM, "0.5.23", "--enable-linear-replayssm --linear-attn-backend helion --mamba-ssm-dtype bfloat16",
         NEXT, cc=B200),
    Case(REPLAYSSM, "0.5.15", "--enable-linear-replayssm --mamba-ssm-dtype bfloat16", NEXT,
         "--enable-linear-replayssm requires the Triton linear-attn decode backend, got "
         "--linear-attn-decode-backend='flashinfer'.", f"{SERVER}:4742", B200),
    Case(REPLAYSSM, "0.5.15", "--enable-linear-replayssm", NEXT, cc=B200),
    # -- the cache length
    Case(REPLAYSSM, "0.5.23", "--enable-linear-replayssm --linear-replayssm-cache-len 0", NEXT,
         "--linear-replayssm-cache-len must be >= 1, got 0.", f"{HOOK}:435"),
    Case(REPLAYSSM, "0.5.18", "--enable-linear-replayssm --linear-replayssm-cache-len 0", NEXT,
         "--linear-replayssm-cache-len must be >= 1, got 0.", f"{SERVER}:6373"),
    Case(REPLAYSSM, "0.5.23", "--linear-replayssm-cache-len 0", NEXT),
    # -- ReplaySSM spec-verify: triton / flashinfer decode, and not both flags
    Case(REPLAYSSM, "0.5.23", "--enable-linear-replayssm-spec --linear-attn-backend helion", NEXT,
         "--enable-linear-replayssm-spec requires the triton or flashinfer linear-attn decode backend, got "
         "--linear-attn-decode-backend='helion'.", f"{HOOK}:460"),
    Case(REPLAYSSM, "0.5.17", "--enable-linear-replayssm-spec --enable-linear-replayssm", NEXT,
         "--enable-linear-replayssm-spec and --enable-linear-replayssm are mutually exclusive",
         f"{SERVER}:6222"),
    Case(REPLAYSSM, "0.5.23", "--enable-linear-replayssm-spec --enable-linear-replayssm", NEXT,
         "--enable-linear-replayssm-spec and --enable-linear-replayssm are mutually exclusive", f"{HOOK}:500"),
    Case(REPLAYSSM, "0.5.23", "--enable-linear-replayssm-spec", NEXT),
    # -- 0.5.16's GDN spec-verify ring: a power of two, float32 SSM state
    Case(REPLAYSSM, "0.5.16", "--enable-gdn-replayssm-spec --linear-replayssm-cache-len 6", NEXT,
         "--linear-replayssm-cache-len must be a power of two for the circular spec-verify ring, got 6.",
         f"{SERVER}:5417"),
    Case(REPLAYSSM, "0.5.16", "--enable-gdn-replayssm-spec --mamba-ssm-dtype bfloat16", NEXT,
         "--enable-gdn-replayssm-spec requires --mamba-ssm-dtype float32, got 'bfloat16'.", f"{SERVER}:5436"),
    Case(REPLAYSSM, "0.5.16", "--enable-gdn-replayssm-spec --linear-replayssm-cache-len 8", NEXT),
    # -- the verify backend on SM100+
    Case(VERIFY, "0.5.23", "--linear-attn-verify-backend flashinfer", NEXT,
         "--linear-attn-verify-backend flashinfer on SM100+ requires --mamba-ssm-dtype bfloat16, got None",
         f"{HOOK}:373", B200),
    Case(VERIFY, "0.5.23", "--linear-attn-verify-backend flashinfer --mamba-ssm-dtype bfloat16", NEXT, cc=B200),
    Case(VERIFY, "0.5.23", "--linear-attn-verify-backend flashinfer", NEXT, cc=H100),
    Case(VERIFY, "0.5.17", "--linear-attn-verify-backend flashinfer --mamba-ssm-dtype float32", NEXT,
         "--linear-attn-verify-backend flashinfer on SM100+ requires --mamba-ssm-dtype bfloat16, got 'float32'",
         f"{SERVER}:6092", B200),
    # -- the int8 Mamba checkpoint
    Case(INT8, "0.5.23", "--enable-int8-mamba-checkpoint --radix-cache-backend lmcache", NEXT,
         "--enable-int8-mamba-checkpoint only supports the built-in mamba radix cache; "
         "--radix-cache-backend='lmcache' is not int8-aware.", "sglang/srt/arg_groups/mamba_hook.py:90"),
    Case(INT8, "0.5.23", "--enable-int8-mamba-checkpoint --enable-lmcache", NEXT,
         "--enable-int8-mamba-checkpoint is not supported together with --enable-lmcache",
         "sglang/srt/arg_groups/mamba_hook.py:96"),
    Case(INT8, "0.5.18", "--enable-int8-mamba-checkpoint --enable-hierarchical-cache", NEXT,
         "--enable-int8-mamba-checkpoint is not supported together with --enable-hierarchical-cache",
         f"{SERVER}:6230"),
    Case(INT8, "0.5.14", "--enable-int8-mamba-checkpoint --enable-hierarchical-cache", NEXT,
         "--enable-int8-mamba-checkpoint is not supported together with --enable-hierarchical-cache",
         f"{SERVER}:4872"),
    Case(INT8, "0.5.23", "--enable-int8-mamba-checkpoint --enable-hierarchical-cache", NEXT, "is not int8-aware",
         "sglang/srt/arg_groups/mamba_hook.py:84"),
    Case(INT8, "0.5.23", "--enable-int8-mamba-checkpoint", NEXT),
    Case(INT8, "0.5.23", "--radix-cache-backend lmcache --enable-lmcache", NEXT),
    # -- deterministic inference against a named backend
    Case(DETERMINISTIC, "0.5.23", "--enable-deterministic-inference --attention-backend flashmla", QWEN,
         "Currently only ['ascend', 'fa3', 'fa4', 'flashinfer', 'intel_xpu', 'triton'] attention backends are "
         "supported for deterministic inference, but you explicitly specified 'flashmla'.", f"{OVERRIDES}:1119"),
    Case(DETERMINISTIC, "0.5.15", "--enable-deterministic-inference --attention-backend fa4", QWEN,
         "Currently only ['flashinfer', 'fa3', 'triton', 'ascend'] attention backends are supported for "
         "deterministic inference, but you explicitly specified 'fa4'.", f"{OVERRIDES}:1495"),
    Case(DETERMINISTIC, "0.5.16", "--enable-deterministic-inference --attention-backend fa4", QWEN),
    Case(DETERMINISTIC, "0.5.23", "--enable-deterministic-inference --attention-backend flashinfer", DSV3,
         "Currently only ['ascend', 'fa3', 'fa4', 'triton'] attention backends are supported for deterministic "
         "inference with absorbed-MLA models. But you're using flashinfer.", f"{HOOK}:645"),
    Case(DETERMINISTIC, "0.5.23", "--enable-deterministic-inference --attention-backend flashinfer", QWEN),
    Case(DETERMINISTIC, "0.5.23", "--enable-deterministic-inference --attention-backend fa4", DSV3,
         "Deterministic inference with absorbed-MLA models on the fa4 attention backend requires SM100/SM110",
         f"{HOOK}:649", H100),
    Case(DETERMINISTIC, "0.5.23", "--enable-deterministic-inference --attention-backend fa4", DSV3, cc=B200),
    Case(DETERMINISTIC, "0.5.16", "--enable-deterministic-inference --attention-backend fa4", DSV3,
         "Currently only ['fa3', 'triton'] attention backends are supported for deterministic inference with "
         "DeepSeek models. But you're using fa4.", f"{SERVER}:6796", B200),
    Case(DETERMINISTIC, "0.5.23", "--attention-backend flashmla", QWEN),
    # -- dual-chunk attention takes dual_chunk_flash_attn only
    Case(DUAL_CHUNK, "0.5.10", "--attention-backend fa3", DUAL,
         "Dual chunk attention is enabled, but attention backend is set to fa3. Please set it to "
         "'dual_chunk_flash_attn'.", f"{SERVER}:2456"),
    Case(DUAL_CHUNK, "0.5.10", "--attention-backend dual_chunk_flash_attn", DUAL),
    Case(DUAL_CHUNK, "0.5.10", "--attention-backend fa3", QWEN),
    Case(DUAL_CHUNK, "0.5.17", "--attention-backend flashinfer", DUAL,
         "attention backend is set to flashinfer.", f"{OVERRIDES}:2272"),
    Case(DUAL_CHUNK, "0.5.19", "--prefill-attention-backend triton --decode-attention-backend triton", DUAL,
         "attention backend is set to triton.", f"{OVERRIDES}:1369"),
    Case(DUAL_CHUNK, "0.5.20", "--attention-backend fa3", DUAL),
    # -- TRT-LLM MHA prefill: SM120's FMHAv2, and context parallelism off SM100
    Case(TRTLLM, "0.5.23", "--attention-backend trtllm_mha --kv-cache-dtype fp8_e4m3", QWEN,
         "TRTLLM FMHAv2 prefill on SM120 does not support fp8_e4m3 KV cache or skip-softmax.", f"{HOOK}:218",
         RTX_PRO),
    Case(TRTLLM, "0.5.23", "--attention-backend trtllm_mha", QWEN, cc=RTX_PRO),
    Case(TRTLLM, "0.5.23", "--prefill-attention-backend trtllm_mha --attn-cp-size 2", QWEN,
         "Prefill context parallelism with the TRTLLM MHA prefill backend requires SM100", f"{HOOK}:233", H100),
    Case(TRTLLM, "0.5.23", "--prefill-attention-backend trtllm_mha --attn-cp-size 2", QWEN, cc=B200),
    Case(TRTLLM, "0.5.19", "--attention-backend trtllm_mha --attn-cp-size 2", QWEN,
         "Prefill context parallelism with the TRTLLM MHA prefill backend requires SM100", f"{HOOK}:166", H100),
    Case(TRTLLM, "0.5.18", "--attention-backend trtllm_mha --attn-cp-size 2", QWEN),
    # -- the CuteDSL MLA pass
    Case(CUTEDSL, "0.5.23", "--attention-backend cutedsl_mla", DSV3,
         "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100).", f"{OVERRIDES}:1245", H100),
    Case(CUTEDSL, "0.5.23", "--attention-backend cutedsl_mla", DSV3, cc=B200),
    Case(CUTEDSL, "0.5.23", "--decode-attention-backend cutedsl_mla --kv-cache-dtype fp8_e5m2", DSV3,
         "CuteDSL MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto.", f"{OVERRIDES}:1254", B200),
    Case(CUTEDSL, "0.5.15", "--decode-attention-backend cutedsl_mla --prefill-attention-backend cutedsl_mla", DSV3,
         "CuteDSL MLA only supports decoding for now", f"{OVERRIDES}:1642", B200, "AssertionError"),
    Case(CUTEDSL, "0.5.15", "--decode-attention-backend cutedsl_mla", DSV3,
         "CuteDSL MLA backend is only supported on Blackwell GPUs (SM100).", f"{OVERRIDES}:1646", H100),
    Case(CUTEDSL, "0.5.15", "--decode-attention-backend cutedsl_mla --prefill-attention-backend fa3", DSV3, cc=B200),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.rule}-{c.version}-{c.words or 'plain'}-{c.cc}")
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = judge(case.version, case.words, case.model, case.cc)
    assert_verdict(judged, case.rule, case.refused, exception=case.exception, version=case.version,
                   source=case.source)
    if case.refused is None:
        assert not [n for n in judged.not_judged if case.rule in n], judged.not_judged


def test_every_rule_has_a_refused_and_an_accepted_case() -> None:
    for rule in rules_mamba.RULES:
        refused = [c for c in CASES if c.rule == rule and c.refused]
        accepted = [c for c in CASES if c.rule == rule and not c.refused]
        assert refused and accepted, rule


def test_the_sm100_decode_default_on_an_unknown_gpu_is_not_judged() -> None:
    judged = judge("0.5.23", "--enable-linear-replayssm --mamba-ssm-dtype bfloat16", NEXT, cc=None)
    assert not [r for r in judged.refusals if r.rule == REPLAYSSM]
    assert any(REPLAYSSM in n and "decode" in n for n in judged.not_judged), judged.not_judged


def test_deterministic_inference_without_a_named_backend_leaves_deepseek_not_judged() -> None:
    judged = judge("0.5.23", "--enable-deterministic-inference", DSV3)
    assert not [r for r in judged.refusals if r.rule == DETERMINISTIC]
    assert any("deterministic" in n for n in judged.not_judged), judged.not_judged


def test_a_dual_chunk_model_without_a_named_backend_is_not_judged() -> None:
    judged = judge("0.5.10", "", DUAL)
    assert not [r for r in judged.refusals if r.rule == DUAL_CHUNK]
    assert any("dual-chunk" in n for n in judged.not_judged), judged.not_judged


def test_the_skip_softmax_threshold_is_read_from_the_deployment() -> None:
    line = resolve(["--model-path", "m", "--attention-backend", "trtllm_mha"], Version("0.5.23"))
    layout = Layout(4, 1, 1, RTX_PRO, "NVIDIA GPU", 81559)
    from pytest_gpulayout.engines.areas import Ask
    from pytest_gpulayout.engines.sglang.config_checks import book, namespace

    values, _ = namespace(line, model(QWEN), layout, Version("0.5.23"))
    for threshold, refused in (("0.5", True), ("0", False)):
        ask = Ask(book(), Version("0.5.23"), Version("0.5.23"), values, tuple(rules_mamba.RULES), line, model(QWEN),
                  layout, {rules_mamba.SKIP_SOFTMAX_ENV: threshold})
        mine = [r for r in rules_mamba.judge(ask).refusals if r.rule == TRTLLM]
        assert bool(mine) is refused, (threshold, mine)
