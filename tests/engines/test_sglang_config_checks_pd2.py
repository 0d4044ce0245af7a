"""SGLang's refusals of PD beside DeepSeek sparse attention, the unified memory pool's PD / DCP / hybrid-SWA limits,
the SWA and radix-eviction flag values, the NVFP4 prefill dequantization flags, multi-item scoring's backend and
KV-cache sharding's environment (``engines/sglang/rules_pd2.py``): each line is parsed by the release's own parser
tables, judged by the release's conditions and refused in its words at its file:line, beside an accepted neighbour
(the line without the conflict, another model, or a release without the check)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pytest
from packaging.version import Version
from sglang_line_cases import assert_verdict

from pytest_gpulayout.engines.sglang import rules_pd2
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Judged, Layout

DENSE = "Qwen/Qwen3-8B"
MLA = "deepseek-ai/DeepSeek-V3"
DSA = "deepseek-ai/DeepSeek-V3.2"
SWA = "openai/gpt-oss-20b"

SA = "sglang/srt/server_args.py"
KV = "sglang/srt/arg_groups/kv_cache_hook.py"
MH = "sglang/srt/arg_groups/model_hook.py"
DSV2 = "sglang/srt/arg_groups/model_overrides/deepseek_v2.py"
AH = "sglang/srt/arg_groups/attention_hook.py"
DECODE = "--disaggregation-mode decode"
PREFILL = "--disaggregation-mode prefill"
OFFLOAD = f"{DECODE} --disaggregation-decode-enable-offload-kvcache --hicache-storage-backend file"
LAZY_OFF = {"SGLANG_DISABLE_LAZY_COMPACTION": "1"}
SPEC_V2 = {"SGLANG_ENABLE_SPEC_V2": "true"}


def layout_of(gpu: str) -> Layout:
    if gpu == "blackwell":
        return Layout(8, 1, 1, (10, 0), "NVIDIA B200", 183359)
    if gpu == "rtx":
        return Layout(8, 1, 1, (12, 0), "NVIDIA RTX PRO 6000 Blackwell", 97887)
    return Layout(8, 1, 1, (9, 0), "NVIDIA H100 80GB HBM3", 81559)


def judge(version: str, words: list[str], model: str = DENSE, gpu: str = "hopper",
          env: Mapping[str, str] | None = None) -> Judged:
    line = resolve(["--model-path", "m", *words], Version(version))
    assert line.ok, line.errors
    return config_check(line, load_model(model), layout_of(gpu), Version(version), env or {})


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
    env: Mapping[str, str] = field(default_factory=dict)
    json: tuple[str, ...] = ()          # words appended as they are (a JSON value)


CASES = [
    # -- DSA prefill CP on a decode server, in each release's spelling of the flag
    Case("sglang.dsa.prefill_cp.pd_decode", "0.5.8", f"{DECODE} --enable-nsa-prefill-context-parallel",
         "CP is only supported for prefill when PD disaggregation, please remove "
         "--enable-nsa-prefill-context-parallel.", f"{SA}:1192", DSA, "AssertionError"),
    Case("sglang.dsa.prefill_cp.pd_decode", "0.5.13", f"{DECODE} --enable-dsa-prefill-context-parallel",
         "please remove --enable-dsa-prefill-context-parallel.", f"{SA}:1954", DSA, "AssertionError"),
    Case("sglang.dsa.prefill_cp.pd_decode", "0.5.16", f"{DECODE} --enable-prefill-cp",
         "please remove --enable-prefill-cp.", f"{SA}:4434", DSA, "AssertionError"),
    Case("sglang.dsa.prefill_cp.pd_decode", "0.5.23", f"{DECODE} --enable-prefill-cp",
         "please remove --enable-prefill-cp.", f"{MH}:362", DSA, "AssertionError"),
    Case("sglang.dsa.prefill_cp.pd_decode", "0.5.23", f"{PREFILL} --enable-prefill-cp", model=DSA),
    Case("sglang.dsa.prefill_cp.pd_decode", "0.5.23", f"{DECODE} --enable-prefill-cp", model=MLA),
    Case("sglang.dsa.prefill_cp.pd_decode", "0.5.7", f"{DECODE} --enable-nsa-prefill-context-parallel", model=DSA),
    # -- DSA cache layer split: decode workers, the transfer backend, and without PD
    Case("sglang.dsa.cache_layer_split.pd", "0.5.16", f"{DECODE} --enable-dsa-cache-layer-split",
         "--enable-dsa-cache-layer-split is not supported on decode workers.", f"{SA}:4442", DSA),
    Case("sglang.dsa.cache_layer_split.pd", "0.5.19", f"{DECODE} --enable-dsa-cache-layer-split",
         "is not supported on decode workers.", f"{MH}:229", DSA),
    Case("sglang.dsa.cache_layer_split.pd", "0.5.23", f"{DECODE} --enable-dsa-cache-layer-split",
         "is not supported on decode workers.", f"{MH}:370", DSA),
    Case("sglang.dsa.cache_layer_split.pd", "0.5.23", f"{PREFILL} --enable-dsa-cache-layer-split "
         "--disaggregation-transfer-backend nixl", "currently only supports the mooncake transfer backend "
         "(mooncake / mooncake_tcp). Got --disaggregation-transfer-backend 'nixl'.", f"{MH}:395", DSA),
    Case("sglang.dsa.cache_layer_split.pd", "0.5.16", f"{PREFILL} --enable-dsa-cache-layer-split "
         "--disaggregation-transfer-backend nixl", "Got --disaggregation-transfer-backend 'nixl'.", f"{SA}:4469",
         DSA),
    Case("sglang.dsa.cache_layer_split.pd", "0.5.23", f"{PREFILL} --enable-dsa-cache-layer-split", model=DSA),
    Case("sglang.dsa.cache_layer_split.pd", "0.5.23", f"{DECODE} --enable-dsa-cache-layer-split", model=MLA),
    Case("sglang.dsa.cache_layer_split.non_pd", "0.5.16", "--enable-dsa-cache-layer-split",
         "--enable-dsa-cache-layer-split is only supported on PD prefill workers.", f"{SA}:4448", DSA),
    Case("sglang.dsa.cache_layer_split.non_pd", "0.5.23", "--enable-dsa-cache-layer-split",
         "is only supported on PD prefill workers.", f"{MH}:376", DSA),
    Case("sglang.dsa.cache_layer_split.non_pd", "0.5.23", f"{DECODE} --enable-dsa-cache-layer-split", model=DSA),
    Case("sglang.dsa.cache_layer_split.non_pd", "0.5.23", f"{PREFILL} --enable-dsa-cache-layer-split", model=DSA),
    # -- the DSA KV cache dtype after the branch's default
    Case("sglang.dsa.kv_cache_dtype_default", "0.5.9", "--kv-cache-dtype fp8_e5m2",
         "DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype", f"{SA}:1149", DSA, "AssertionError"),
    Case("sglang.dsa.kv_cache_dtype_default", "0.5.14", "--kv-cache-dtype fp8_e5m2",
         "DeepSeek DSA only supports", f"{SA}:3426", DSA, "AssertionError"),
    Case("sglang.dsa.kv_cache_dtype_default", "0.5.23", "--kv-cache-dtype fp8_e5m2",
         "DeepSeek DSA only supports", "sglang/srt/arg_groups/overrides.py:541", DSA, "AssertionError"),
    Case("sglang.dsa.kv_cache_dtype_default", "0.5.23", "--kv-cache-dtype fp8_e4m3", model=DSA),
    Case("sglang.dsa.kv_cache_dtype_default", "0.5.23", "--kv-cache-dtype bf16", model=DSA),
    Case("sglang.dsa.kv_cache_dtype_default", "0.5.23", "", model=DSA),
    Case("sglang.dsa.kv_cache_dtype_default", "0.5.23", "--kv-cache-dtype fp8_e5m2", model=MLA),
    # -- DSA decode context parallelism
    Case("sglang.dsa.dcp", "0.5.22", "--dcp-size 2 --enable-hierarchical-cache",
         "DSA DCP does not support HiSparse or HiCache.", f"{DSV2}:22", DSA),
    Case("sglang.dsa.dcp", "0.5.23", f"--dcp-size 2 {PREFILL}", "DSA DCP does not support PD disaggregation.",
         f"{DSV2}:24", DSA),
    Case("sglang.dsa.dcp", "0.5.23", "--dcp-size 2", model=DSA),
    Case("sglang.dsa.dcp", "0.5.23", f"--dcp-size 1 {PREFILL} --enable-hierarchical-cache", model=DSA),
    Case("sglang.dsa.dcp", "0.5.23", f"--dcp-size 2 {PREFILL}", model=MLA),
    # -- the unified memory pool: lazy compaction under PD, hybrid-SWA transfers, DCP
    Case("sglang.unified_memory.lazy_compaction", "0.5.18", f"--enable-unified-memory {PREFILL}",
         "--enable-unified-memory with PD disaggregation requires lazy compaction; unset "
         "SGLANG_DISABLE_LAZY_COMPACTION.", f"{SA}:8302", exception="AssertionError", env=LAZY_OFF),
    Case("sglang.unified_memory.lazy_compaction", "0.5.23", f"--enable-unified-memory {DECODE}",
         "requires lazy compaction", f"{KV}:554", exception="AssertionError", env=LAZY_OFF),
    Case("sglang.unified_memory.lazy_compaction", "0.5.23", f"--enable-unified-memory {DECODE}",
         env={"SGLANG_DISABLE_LAZY_COMPACTION": "0"}),
    Case("sglang.unified_memory.lazy_compaction", "0.5.23", "--enable-unified-memory", env=LAZY_OFF),
    Case("sglang.unified_memory.lazy_compaction", "0.5.17", f"--enable-page-major-kv-layout {PREFILL}",
         env=LAZY_OFF),
    Case("sglang.unified_memory.hybrid_swa_transfer", "0.5.21", f"--enable-unified-memory {OFFLOAD}",
         "--enable-unified-memory decode KV offload does not support hybrid-SWA H2D/D2H transfers yet.",
         f"{KV}:527", SWA, "AssertionError"),
    Case("sglang.unified_memory.hybrid_swa_transfer", "0.5.23", f"--enable-unified-memory {OFFLOAD}",
         "decode KV offload does not support hybrid-SWA", f"{KV}:578", SWA, "AssertionError"),
    Case("sglang.unified_memory.hybrid_swa_transfer", "0.5.21", f"--enable-unified-memory {DECODE} "
         "--disaggregation-decode-retraction-backup host_pool",
         "--enable-unified-memory host-pool decode retraction does not support hybrid-SWA", f"{KV}:541", SWA,
         "AssertionError"),
    Case("sglang.unified_memory.hybrid_swa_transfer", "0.5.22", f"--enable-unified-memory {DECODE} "
         "--disaggregation-decode-retraction-backup host_pool", model=SWA),
    Case("sglang.unified_memory.hybrid_swa_transfer", "0.5.23", f"--enable-unified-memory {OFFLOAD}"),
    Case("sglang.unified_memory.hybrid_swa_transfer", "0.5.23", f"--enable-unified-memory {OFFLOAD} "
         "--disable-hybrid-swa-memory", model=SWA),
    Case("sglang.unified_memory.dcp", "0.5.20", "--enable-unified-memory --dcp-size 2",
         "--enable-unified-memory with decode context parallelism (--dcp-size > 1) supports MLA models only",
         f"{KV}:303", exception="AssertionError"),
    Case("sglang.unified_memory.dcp", "0.5.23", "--enable-unified-memory --dcp-size 2",
         "does not support hybrid sliding-window models", f"{KV}:733", SWA, "AssertionError"),
    Case("sglang.unified_memory.dcp", "0.5.23", f"--enable-unified-memory --dcp-size 2 {PREFILL}",
         "(--dcp-size > 1) does not support PD disaggregation", f"{KV}:740", MLA, "AssertionError"),
    Case("sglang.unified_memory.dcp", "0.5.23", "--enable-unified-memory --dcp-size 2", model=MLA),
    Case("sglang.unified_memory.dcp", "0.5.23", "--enable-unified-memory"),
    Case("sglang.unified_memory.dcp", "0.5.19", "--enable-unified-memory --dcp-size 2"),
    # -- spec v2 with decode KV offload (SGLANG_ENABLE_SPEC_V2)
    Case("sglang.pd.spec_v2_decode_offload", "0.5.9", f"{DECODE} --disaggregation-decode-enable-offload-kvcache",
         "Spec v2 and decode offload kv cache are incompatible and cannot be enabled together.", f"{SA}:2700",
         env=SPEC_V2),
    Case("sglang.pd.spec_v2_decode_offload", "0.5.5.post3", f"{DECODE} "
         "--disaggregation-decode-enable-offload-kvcache", "Spec v2 and decode offload", f"{SA}:1783", env=SPEC_V2),
    Case("sglang.pd.spec_v2_decode_offload", "0.5.9", f"{DECODE} --disaggregation-decode-enable-offload-kvcache"),
    Case("sglang.pd.spec_v2_decode_offload", "0.5.10", f"{DECODE} --disaggregation-decode-enable-offload-kvcache "
         "--hicache-storage-backend file", env=SPEC_V2),
    # -- the SWA ratio and prefix tails
    Case("sglang.cache.swa_flags", "0.5.10", "--swa-full-tokens-ratio 1.5",
         "--swa-full-tokens-ratio should be in range (0, 1.0].", f"{SA}:3419"),
    Case("sglang.cache.swa_flags", "0.5.16", "--swa-full-tokens-ratio 0", "should be in range (0, 1.0].",
         f"{SA}:6731"),
    Case("sglang.cache.swa_flags", "0.5.19", "--swa-full-tokens-ratio -0.5", "should be in range", f"{KV}:193"),
    Case("sglang.cache.swa_flags", "0.5.23", "--swa-full-tokens-ratio 2", "should be in range", f"{KV}:428"),
    Case("sglang.cache.swa_flags", "0.5.23", "--swa-prefix-tails -1",
         "--swa-prefix-tails should be a non-negative integer.", f"{KV}:431"),
    Case("sglang.cache.swa_flags", "0.5.23", "--swa-full-tokens-ratio 1 --swa-prefix-tails 0"),
    Case("sglang.cache.swa_flags", "0.5.10", ""),
    Case("sglang.cache.swa_flags", "0.5.6", "--swa-full-tokens-ratio 1.5"),
    # -- radix eviction: session radix cache needs priority, tlru's config
    Case("sglang.cache.radix_eviction", "0.5.15", "--enable-session-radix-cache",
         "--enable-session-radix-cache requires --radix-eviction-policy priority", f"{SA}:5768"),
    Case("sglang.cache.radix_eviction", "0.5.16", "--enable-session-radix-cache --radix-eviction-policy priority"),
    Case("sglang.cache.radix_eviction", "0.5.17", "--enable-session-radix-cache"),
    Case("sglang.cache.radix_eviction", "0.5.23", "--radix-eviction-policy tlru --radix-eviction-policy-config",
         "requires non-negative 'threshold' and 'next_prompt_estimate' in --radix-eviction-policy-config, got -1 "
         "and 0.", f"{KV}:380", json=('{"threshold": -1}',)),
    Case("sglang.cache.radix_eviction", "0.5.21", "--radix-eviction-policy tlru --radix-eviction-policy-config",
         "needs 'threshold' greater than 'next_prompt_estimate' in --radix-eviction-policy-config, got 256 <= 512",
         f"{KV}:386", json=('{"threshold": 256, "next_prompt_estimate": 512}',)),
    Case("sglang.cache.radix_eviction", "0.5.23", "--radix-eviction-policy tlru", "got 0 <= 0", f"{KV}:386"),
    Case("sglang.cache.radix_eviction", "0.5.23", "--radix-eviction-policy tlru --radix-eviction-policy-config",
         json=('{"threshold": 4096, "next_prompt_estimate": 512}',)),
    # -- NVFP4 prefill dequantization
    Case("sglang.kv4.nvfp4_dequant_flag", "0.5.21", "--prefill-kv-cache-dequant-dtype fp8_e4m3",
         "--prefill-kv-cache-dequant-dtype applies only with --kv-cache-dtype=nvfp4.", f"{KV}:41"),
    Case("sglang.kv4.nvfp4_dequant_flag", "0.5.23", "--kv-cache-dtype nvfp4 --attention-backend triton",
         "NVFP4 prefill supports an FP8 E4M3 workspace or native NVFP4, but backend 'triton' provides neither.",
         f"{KV}:53", gpu="blackwell"),
    Case("sglang.kv4.nvfp4_dequant_flag", "0.5.23", "--kv-cache-dtype nvfp4 --attention-backend flashinfer",
         gpu="blackwell"),
    Case("sglang.kv4.nvfp4_dequant_flag", "0.5.23", "--attention-backend triton"),
    Case("sglang.kv4.nvfp4_prefill", "0.5.23", "--kv-cache-dtype nvfp4 --prefill-kv-cache-dequant-dtype nvfp4",
         "Native NVFP4 prefill currently requires SM100; use --prefill-kv-cache-dequant-dtype=fp8_e4m3",
         f"{KV}:60", gpu="rtx"),
    Case("sglang.kv4.nvfp4_prefill", "0.5.23", "--kv-cache-dtype nvfp4 --attention-backend trtllm_mha",
         "Native NVFP4 prefill currently requires SM100", f"{KV}:60", gpu="rtx"),
    Case("sglang.kv4.nvfp4_prefill", "0.5.22", "--kv-cache-dtype nvfp4 --prefill-kv-cache-dequant-dtype fp8_e4m3 "
         "--prefill-attention-backend trtllm_mha", "--prefill-kv-cache-dequant-dtype=fp8_e4m3 requires prefill "
         "backend 'flashinfer', but --prefill-attention-backend='trtllm_mha' was set.", f"{KV}:71", gpu="blackwell"),
    Case("sglang.kv4.nvfp4_prefill", "0.5.21", "--kv-cache-dtype nvfp4 --decode-attention-backend flashinfer",
         "NVFP4 decode requires --decode-attention-backend=trtllm_mha; got 'flashinfer'.", f"{KV}:80",
         gpu="blackwell"),
    Case("sglang.kv4.nvfp4_prefill", "0.5.23", "--kv-cache-dtype nvfp4", gpu="blackwell"),
    Case("sglang.kv4.nvfp4_prefill", "0.5.23", "--kv-cache-dtype nvfp4", gpu="rtx"),
    # -- multi-item scoring needs flashinfer for prefill and decode
    Case("sglang.multi_item_scoring.backend", "0.5.11", "--enable-mis --attention-backend triton",
         "Multi-item scoring requires flashinfer attention backend for custom attention mask support. Please set "
         "--attention-backend flashinfer when using --enable-mis. Current backends: prefill=triton, decode=triton",
         f"{SA}:1288", exception="AssertionError"),
    Case("sglang.multi_item_scoring.backend", "0.5.23", "--enable-mis --attention-backend flashinfer "
         "--decode-attention-backend fa3", "Current backends: prefill=flashinfer, decode=fa3", f"{AH}:573",
         exception="AssertionError"),
    Case("sglang.multi_item_scoring.backend", "0.5.23", "--enable-mis --attention-backend flashinfer"),
    Case("sglang.multi_item_scoring.backend", "0.5.18", "--enable-mis --prefill-attention-backend flashinfer "
         "--decode-attention-backend flashinfer"),
    # -- KV-cache sharding with the staging buffer
    Case("sglang.kv_cache_sharding.staging_buffer", "0.5.23", f"--enable-kv-cache-sharding {PREFILL}",
         "--enable-kv-cache-sharding is incompatible with SGLANG_DISAGG_STAGING_BUFFER",
         "sglang/srt/arg_groups/kv_shard_hook.py:245", env={"SGLANG_DISAGG_STAGING_BUFFER": "1"}),
    Case("sglang.kv_cache_sharding.staging_buffer", "0.5.23", f"--enable-kv-cache-sharding {PREFILL}"),
    Case("sglang.kv_cache_sharding.staging_buffer", "0.5.23", PREFILL, env={"SGLANG_DISAGG_STAGING_BUFFER": "1"}),
]


def _id(c: Case) -> str:
    env = ",".join(f"{k}={v}" for k, v in c.env.items())
    return f"{c.rule}-{c.version}-{c.model.rsplit('/', 1)[-1]}-{c.gpu}-{c.words or 'defaults'}{' '.join(c.json)}" \
           f"{'-' + env if env else ''}-{'refused' if c.refused else 'accepted'}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = judge(case.version, [*case.words.split(), *case.json], case.model, case.gpu, case.env)
    assert_verdict(judged, case.rule, case.refused, exception=case.exception, version=case.version,
                   source=case.source)
    if case.refused is None:
        assert not [n for n in judged.not_judged if f"({case.rule})" in n], judged.not_judged


def test_every_rule_has_a_refused_and_an_accepted_case() -> None:
    for rule in rules_pd2.RULES:
        assert any(c.rule == rule and c.refused for c in CASES), rule
        assert any(c.rule == rule and not c.refused for c in CASES), rule


def _not_judged(judged: Judged, rule: str) -> bool:
    return not [r for r in judged.refusals if r.rule == rule] and any(f"({rule})" in n for n in judged.not_judged)


def test_multi_item_scoring_without_named_backends_is_not_judged() -> None:
    """Unnamed, SGLang picks the backends by model and GPU before the check: not claimed either way."""
    assert _not_judged(judge("0.5.23", ["--enable-mis"]), rules_pd2.MIS_RULE)


def test_a_model_branch_that_rewrites_the_swa_ratio_is_not_judged() -> None:
    """MiMo-V2-Flash / Step-3.5 reset the ratio to 1.0 under hierarchical cache before the range check."""
    line = resolve(["--model-path", "m", "--swa-full-tokens-ratio", "0", "--enable-hierarchical-cache"],
                   Version("0.5.23"))
    model = replace(load_model(DENSE), architectures=("Step3p5ForCausalLM",))
    judged = config_check(line, model, layout_of("hopper"), Version("0.5.23"), {})
    assert _not_judged(judged, rules_pd2.SWA_RULE)


def test_nvfp4_without_a_named_backend_on_a_model_with_overrides_is_not_judged() -> None:
    """A model whose overrides may pick an attention backend first leaves NVFP4's explicit backend unclaimed."""
    judged = judge("0.5.23", ["--kv-cache-dtype", "nvfp4"], MLA, "blackwell")
    assert _not_judged(judged, rules_pd2.DEQUANT_FLAG_RULE)


def test_a_hybrid_swa_model_outside_the_known_lists_is_not_judged() -> None:
    """A sliding-window model outside GPT-OSS / Llama 4: whether its release lists it is not read here."""
    model = replace(load_model(SWA), architectures=("Gemma3ForCausalLM",))
    line = resolve(["--model-path", "m", "--enable-unified-memory", *OFFLOAD.split()], Version("0.5.23"))
    judged = config_check(line, model, layout_of("hopper"), Version("0.5.23"), {})
    assert _not_judged(judged, rules_pd2.SWA_TRANSFER_RULE)


def test_learnable_attention_sinks_refuse_an_fp8_dsa_cache_from_0_5_20() -> None:
    model = load_model(DSA)
    sinks = replace(model, config_json=json.dumps({**json.loads(model.config_json), "learnable_sink": True}))
    for version, refused in (("0.5.20", True), ("0.5.19", False)):
        line = resolve(["--model-path", "m", "--kv-cache-dtype", "fp8_e4m3"], Version(version))
        judged = config_check(line, sinks, layout_of("blackwell"), Version(version), {})
        assert_verdict(judged, rules_pd2.DSA_KV_RULE, "Learnable DSA attention sinks require a bfloat16 KV cache; got "
                       "kv_cache_dtype=fp8_e4m3." if refused else None, exception="ValueError", version=version,
                       source="sglang/srt/arg_groups/overrides.py:599")
