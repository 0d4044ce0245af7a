"""SGLang's FP4 KV cache against the attention backends (``engines/sglang/rules_kv.py``), each refusal in the
release's words at its line, beside the same line accepted (another backend, GPU or flag, or a release without the
check). The line is parsed by the release's own parser (``engines/sglang/cli.py resolve``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_kv
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

QWEN = "Qwen/Qwen3-8B"                 # Qwen3ForCausalLM: dense MHA, no model branch picks its backend
DEEPSEEK = "deepseek-ai/DeepSeek-V3"   # MLA
DSA = "deepseek-ai/DeepSeek-V3.2"      # DeepSeek Sparse Attention
H100 = ((9, 0), "NVIDIA H100 80GB HBM3", 81559)
B200 = ((10, 0), "NVIDIA B200", 183359)
BACKENDS, SM100, HISPARSE = rules_kv.BACKENDS_RULE, rules_kv.SM100_RULE, rules_kv.HISPARSE_RULE
PAGE, UNIFIED_DCP = rules_kv.PAGE_MAJOR_RULE, rules_kv.UNIFIED_DCP_RULE
UM_DCP = "--enable-unified-memory --dcp-size 2"
PAGED_MHA = "['fa3', 'fa4', 'flashinfer', 'triton', 'trtllm_mha']"
HS = "--enable-hisparse --disable-radix-cache"
HS_LIST = ("HiSparse supports DSA {} backend(s) {} on this platform with --kv-cache-dtype={}, but got "
           "--dsa-{}-backend={}.")
MHA = "KV4 MHA expects attention_backend to be one of ['triton', 'torch_native', 'flex_attention', 'trtllm_mha']"
HOOK = "sglang/srt/arg_groups/kv_cache_hook.py"


def judge(version: str, words: str, model: str = QWEN, gpu: tuple[tuple[int, int], str, int] = H100) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    return config_check(line, load_model(model), Layout(8, 1, 1, *gpu), Version(version))


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    refused: str | None = None          # the release's words; None: accepted
    source: str = ""                    # file:line in that release
    model: str = QWEN
    gpu: tuple[tuple[int, int], str, int] = H100
    exception: str = "AssertionError"


CASES = [
    # -- the base backend against the MHA list; up to 0.5.15 the FP4 dtype is fp4_e2m1
    Case(BACKENDS, "0.5.7", "--kv-cache-dtype fp4_e2m1 --attention-backend fa3", MHA + ", but got fa3",
         "sglang/srt/server_args.py:1780"),
    Case(BACKENDS, "0.5.7", "--kv-cache-dtype fp4_e2m1 --attention-backend triton"),
    Case(BACKENDS, "0.5.7", "--attention-backend fa3"),
    Case(BACKENDS, "0.5.14", "--kv-cache-dtype fp4_e2m1 --attention-backend flashinfer", MHA + ", but got flashinfer",
         "sglang/srt/server_args.py:4797"),
    Case(BACKENDS, "0.5.18", "--kv-cache-dtype fp4_mx_block16 --attention-backend fa3", MHA + ", but got fa3",
         "sglang/srt/server_args.py:6132"),
    Case(BACKENDS, "0.5.18", "--kv-cache-dtype fp4_mx_block16 --attention-backend trtllm_mha"),
    # no backend named: SGLang picks fa3 for a dense MHA model on Hopper (refused), trtllm_mha on SM100 (accepted)
    Case(BACKENDS, "0.5.23", "--kv-cache-dtype fp4_mx_block16", MHA + ", but got fa3", f"{HOOK}:313"),
    Case(BACKENDS, "0.5.23", "--kv-cache-dtype nvfp4", gpu=B200),
    Case(BACKENDS, "0.5.19", "--kv-cache-dtype fp4_mx_block16", MHA + ", but got fa3", f"{HOOK}:104"),
    # -- MLA: flashmla leaves the list in 0.5.16, cutlass_mla in 0.5.20 (and the parser's choices)
    Case(BACKENDS, "0.5.15", "--kv-cache-dtype fp4_e2m1 --attention-backend flashmla", model=DEEPSEEK),
    Case(BACKENDS, "0.5.16", "--kv-cache-dtype fp4_mx_block16 --attention-backend flashmla",
         "KV4 MLA expects attention_backend to be one of ['cutlass_mla', 'flashinfer', 'trtllm_mla'], but got flashmla",
         "sglang/srt/server_args.py:5130", model=DEEPSEEK),
    Case(BACKENDS, "0.5.19", "--kv-cache-dtype fp4_mx_block16 --attention-backend cutlass_mla", model=DEEPSEEK),
    Case(BACKENDS, "0.5.20", "--kv-cache-dtype fp4_mx_block16 --attention-backend flashmla",
         "KV4 MLA expects attention_backend to be one of ['flashinfer', 'trtllm_mla'], but got flashmla",
         f"{HOOK}:92", model=DEEPSEEK),
    # -- an fa4 prefill: the decode backend against the FA4 lists
    Case(BACKENDS, "0.5.18", "--kv-cache-dtype fp4_mx_block16 --prefill-attention-backend fa4 "
         "--decode-attention-backend fa3",
         "KV4 FA4 MHA expects decode_attention_backend to be one of ['triton', 'torch_native', 'flex_attention'], "
         "but got fa3", "sglang/srt/server_args.py:6110"),
    Case(BACKENDS, "0.5.18", "--kv-cache-dtype fp4_mx_block16 --prefill-attention-backend fa4 "
         "--decode-attention-backend triton"),
    Case(BACKENDS, "0.5.19", "--kv-cache-dtype fp4_mx_block16 --prefill-attention-backend fa4 "
         "--decode-attention-backend cutlass_mla", model=DEEPSEEK),
    Case(BACKENDS, "0.5.23", "--kv-cache-dtype fp4_mx_block16 --prefill-attention-backend fa4 "
         "--decode-attention-backend flashmla",
         "KV4 FA4 MLA expects decode_attention_backend to be one of ['flashinfer', 'trtllm_mla'], but got flashmla",
         f"{HOOK}:282", model=DEEPSEEK),
    # two different split backends, neither fa4: only a warning
    Case(BACKENDS, "0.5.23", "--kv-cache-dtype fp4_mx_block16 --prefill-attention-backend flashinfer "
         "--decode-attention-backend fa3"),
    # -- SM100 nvfp4 with trtllm_mha (0.5.21+)
    Case(SM100, "0.5.23", "--kv-cache-dtype nvfp4 --disaggregation-mode prefill",
         "SM100 native NVFP4 with trtllm_mha does not yet support PD disaggregation", f"{HOOK}:252", gpu=B200,
         exception="ValueError"),
    Case(SM100, "0.5.20", "--kv-cache-dtype nvfp4 --disaggregation-mode prefill", gpu=B200),
    Case(SM100, "0.5.23", "--kv-cache-dtype nvfp4 --attention-backend triton --disaggregation-mode prefill",
         gpu=B200),
    Case(SM100, "0.5.21", "--kv-cache-dtype nvfp4 --attention-backend trtllm_mha --enable-hierarchical-cache",
         "SM100 native NVFP4 with trtllm_mha does not yet support hierarchical KV cache or LMCache",
         f"{HOOK}:260", gpu=B200, exception="ValueError"),
    Case(SM100, "0.5.23", "--kv-cache-dtype nvfp4 --attention-backend trtllm_mha --speculative-algorithm EAGLE "
         "--speculative-draft-attention-backend flashinfer",
         "SM100 native NVFP4 speculative decoding requires --speculative-draft-attention-backend=trtllm_mha so the "
         "draft worker consumes its physical NVFP4 KV layout; got 'flashinfer'.", f"{HOOK}:226", gpu=B200,
         exception="ValueError"),
    Case(SM100, "0.5.23", "--kv-cache-dtype nvfp4 --attention-backend trtllm_mha --speculative-algorithm EAGLE "
         "--speculative-draft-attention-backend trtllm_mha", gpu=B200),
    # -- HiSparse's DSA backends by KV cache dtype; flashinfer_sparse_mla joins fp8's list in 0.5.18
    Case(HISPARSE, "0.5.14", f"{HS} --kv-cache-dtype fp8_e4m3 --dsa-decode-backend flashmla_sparse",
         HS_LIST.format("decode", "['flashmla_kv']", "fp8_e4m3", "decode", "flashmla_sparse")
         + " Please use --dsa-decode-backend=flashmla_kv or omit it.",
         "sglang/srt/arg_groups/hisparse_hook.py:71", model=DSA, exception="ValueError"),
    Case(HISPARSE, "0.5.14", f"{HS} --kv-cache-dtype fp8_e4m3 --dsa-decode-backend flashmla_kv", model=DSA),
    Case(HISPARSE, "0.5.17", f"{HS} --kv-cache-dtype fp8_e4m3 --dsa-prefill-backend flashinfer_sparse_mla",
         HS_LIST.format("prefill", "['flashmla_kv']", "fp8_e4m3", "prefill", "flashinfer_sparse_mla"),
         "sglang/srt/arg_groups/hisparse_hook.py:55", model=DSA, exception="ValueError"),
    Case(HISPARSE, "0.5.18", f"{HS} --kv-cache-dtype fp8_e4m3 --dsa-prefill-backend flashinfer_sparse_mla", model=DSA),
    Case(HISPARSE, "0.5.23", f"{HS} --kv-cache-dtype fp8_e4m3 --dsa-decode-backend flashmla_sparse",
         HS_LIST.format("decode", "['flashinfer_sparse_mla', 'flashmla_kv']", "fp8_e4m3", "decode", "flashmla_sparse"),
         "sglang/srt/arg_groups/hisparse_hook.py:55", model=DSA, exception="ValueError"),
    Case(HISPARSE, "0.5.23", f"{HS} --kv-cache-dtype bfloat16 --dsa-decode-backend flashmla_sparse", model=DSA),
    Case(HISPARSE, "0.5.23", "--kv-cache-dtype fp8_e4m3 --dsa-decode-backend flashmla_sparse", model=DSA),
    # TileLang with an FP8 KV cache: refused by the split-backend pass from 0.5.22, by the list before
    Case(HISPARSE, "0.5.22", f"{HS} --kv-cache-dtype fp8_e4m3 --dsa-prefill-backend tilelang",
         "CUDA TileLang FP8 KV does not support HiSparse.", "sglang/srt/arg_groups/overrides.py:668", model=DSA,
         exception="ValueError"),
    Case(HISPARSE, "0.5.21", f"{HS} --kv-cache-dtype fp8_e4m3 --dsa-prefill-backend tilelang",
         HS_LIST.format("prefill", "['flashinfer_sparse_mla', 'flashmla_kv']", "fp8_e4m3", "prefill", "tilelang"),
         "sglang/srt/arg_groups/hisparse_hook.py:55", model=DSA, exception="ValueError"),
    Case(HISPARSE, "0.5.23", f"{HS} --kv-cache-dtype bfloat16 --dsa-prefill-backend tilelang",
         HS_LIST.format("prefill", "['flashmla_sparse']", "bfloat16", "prefill", "tilelang"),
         "sglang/srt/arg_groups/hisparse_hook.py:55", model=DSA, exception="ValueError"),
    # -- the page-major layout's full-attention backends (--enable-unified-memory sets the layout)
    Case(PAGE, "0.5.16", "--enable-unified-memory --attention-backend fa3",
         "--enable-page-major-kv-layout requires the Triton attention backend for the full-attention layers; got "
         "['fa3']. Pass --attention-backend triton.", "sglang/srt/server_args.py:6872"),
    Case(PAGE, "0.5.16", "--enable-page-major-kv-layout --attention-backend triton"),
    Case(PAGE, "0.5.18", "--enable-unified-memory --attention-backend fa3", "got ['fa3'], allowed ['triton']",
         "sglang/srt/server_args.py:8397"),
    Case(PAGE, "0.5.18", "--enable-unified-memory --attention-backend fa3", model=DEEPSEEK),
    # from 0.5.19 unified memory admits the paged MHA backends: SGLang's own pick on Hopper (fa3) passes
    Case(PAGE, "0.5.19", "--enable-unified-memory"),
    Case(PAGE, "0.5.19", "--enable-unified-memory --attention-backend torch_native",
         f"the resolved attention backends ['torch_native'] are not in the allowed set {PAGED_MHA}",
         f"{HOOK}:351"),
    Case(PAGE, "0.5.22", "--enable-unified-memory --attention-backend flashmla", model=DEEPSEEK),
    Case(PAGE, "0.5.23", "--enable-unified-memory --attention-backend flex_attention",
         f"the resolved attention backends ['flex_attention'] are not in the allowed set {PAGED_MHA} for this "
         "configuration. Pass a compatible --attention-backend.", f"{HOOK}:822"),
    Case(PAGE, "0.5.23", "--enable-unified-memory --attention-backend tokenspeed_mla",
         "['cutedsl_mla', 'fa3', 'flashinfer', 'flashmla', 'triton', 'trtllm_mla']", f"{HOOK}:822", model=DEEPSEEK),
    Case(PAGE, "0.5.23", "--attention-backend flex_attention"),
    # -- unified memory with DCP: the backends that translate the widened page ids; tokenspeed_mla leaves in 0.5.23
    Case(UNIFIED_DCP, "0.5.23", f"{UM_DCP} --attention-backend fa3",
         "--enable-unified-memory with decode context parallelism (--dcp-size > 1) requires ['cutedsl_mla', "
         "'flashinfer', 'trtllm_mla'] for the full-attention layers; got ['fa3'].", f"{HOOK}:754", model=DEEPSEEK),
    Case(UNIFIED_DCP, "0.5.23", f"{UM_DCP} --attention-backend flashinfer", model=DEEPSEEK),
    Case(UNIFIED_DCP, "0.5.23", "--dcp-size 2 --attention-backend fa3", model=DEEPSEEK),
    Case(UNIFIED_DCP, "0.5.20", f"{UM_DCP} --attention-backend tokenspeed_mla", model=DEEPSEEK),
    Case(UNIFIED_DCP, "0.5.23", f"{UM_DCP} --attention-backend tokenspeed_mla", "got ['tokenspeed_mla']",
         f"{HOOK}:754", model=DEEPSEEK),
    Case(UNIFIED_DCP, "0.5.21", f"{UM_DCP} --attention-backend triton", "got ['triton']", f"{HOOK}:648",
         model=DEEPSEEK),
]


def _id(c: Case) -> str:
    return f"{c.rule}-{c.version}-{c.words or 'defaults'}-{'refused' if c.refused else 'accepted'}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = judge(case.version, case.words, case.model, case.gpu)
    assert_verdict(judged, case.rule, case.refused, exception=case.exception, version=case.version,
                   source=case.source)
    if case.refused is None:
        assert not [n for n in judged.not_judged if case.rule in n], judged.not_judged


def test_every_rule_has_a_refused_and_an_accepted_case_on_two_releases() -> None:
    for rule in rules_kv.RULES:
        refused = {c.version for c in CASES if c.rule == rule and c.refused}
        accepted = [c for c in CASES if c.rule == rule and not c.refused]
        assert refused and accepted, rule
        assert len(refused | {c.version for c in accepted}) >= 2, rule


def test_a_backend_sglang_picks_for_an_mla_model_is_not_judged() -> None:
    """DeepSeek's branches pick its backend (fa3 / trtllm_mla / flashinfer by GPU and release): not claimed."""
    judged = judge("0.5.23", "--kv-cache-dtype fp4_mx_block16", DEEPSEEK)
    assert not [r for r in judged.refusals if r.rule == BACKENDS]
    assert any(BACKENDS in n for n in judged.not_judged), judged.not_judged


def test_deepseek_v4s_own_backend_is_not_judged() -> None:
    """DeepSeek V4's override sets ``dsv4`` over the line's backend: the line's fa3 is not the one asserted."""
    from dataclasses import replace

    line = resolve(["--model-path", "m", "--kv-cache-dtype", "fp4_mx_block16", "--attention-backend", "fa3"],
                   Version("0.5.23"))
    model = replace(load_model(QWEN), architectures=("DeepseekV4ForCausalLM",))
    judged = config_check(line, model, Layout(8, 1, 1, *H100), Version("0.5.23"))
    assert not [r for r in judged.refusals if r.rule == BACKENDS]
    assert any("DeepseekV4ForCausalLM" in n for n in judged.not_judged), judged.not_judged


def test_an_unknown_gpu_leaves_the_sm100_path_not_judged() -> None:
    line = resolve(["--model-path", "m", "--kv-cache-dtype", "nvfp4", "--attention-backend", "trtllm_mha",
                    "--disaggregation-mode", "prefill"], Version("0.5.23"))
    judged = config_check(line, load_model(QWEN), Layout(8), Version("0.5.23"))
    assert not [r for r in judged.refusals if r.rule == SM100]
    assert any(SM100 in n for n in judged.not_judged), judged.not_judged


def test_hisparse_with_a_dtype_sglang_resolves_is_not_judged() -> None:
    """``auto`` is the DSA default's pick (bfloat16 or fp8 by GPU): the named backend's list is not claimed."""
    judged = judge("0.5.23", f"{HS} --dsa-decode-backend flashmla_sparse", DSA)
    assert not [r for r in judged.refusals if r.rule == HISPARSE]
    assert any("--kv-cache-dtype auto" in n for n in judged.not_judged), judged.not_judged


def test_page_major_with_speculative_decoding_is_not_judged() -> None:
    """The speculative hook runs before the layout's check and may set the backends again: not claimed."""
    judged = judge("0.5.23", "--enable-unified-memory --attention-backend flex_attention --speculative-algorithm "
                   "NGRAM")
    assert not [r for r in judged.refusals if r.rule == PAGE]
    assert any("page-major" in n for n in judged.not_judged), judged.not_judged
