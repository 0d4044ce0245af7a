"""SGLang's refusals of speculative decoding beside other features (``engines/sglang/rules_spec3.py``), each in the
release's words at its line, beside the same line accepted (the feature off, another algorithm or model, or a
release without the check). The line is parsed by the release's own parser (``engines/sglang/cli.py resolve``); the
environment is the launch's. The hooks before the speculative hook read the algorithm as typed (``nextn`` is not
EAGLE there), the ones after it read it rewritten."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_spec3
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

QWEN = "Qwen/Qwen3-8B"
DSV4 = "DeepseekV4ForCausalLM"
IQUEST = "IQuestQ1ForCausalLM"
IQUEST_MTP = "IQuestQ1MTP"
MIMO = "MiMoV2FlashForCausalLM"            # its model override turns multi-layer EAGLE on for EAGLE
GLM_DSA = "GlmMoeDsaForCausalLM+dsa"      # GLM-5: a DSA config (index_topk) with one NextN layer
GLM_NO_NEXTN = "GlmMoeDsaForCausalLM+bare"  # its config.json writes neither
ALGO = "--speculative-algorithm"
DRAFT = "--speculative-draft-model-path d"
WIDTHS = "--speculative-num-steps 3 --speculative-eagle-topk {k} --speculative-num-draft-tokens 4"
PP_SPEC = {"SGLANG_ENABLE_PP_SPEC": "1"}
PREFILL = "--disaggregation-mode prefill"
UNIFIED = "--enable-unified-memory"
HICACHE_DCP = "--enable-hierarchical-cache --dcp-size 2"
HISPARSE = "--enable-hisparse --disable-radix-cache"
SHARDING = "--enable-kv-cache-sharding --disaggregation-mode prefill"


def model(name: str) -> ModelSpec:
    """Qwen3-8B's shape under ``name``'s architecture; ``+dsa``: a ``config.json`` with ``index_topk`` and
    ``num_nextn_predict_layers: 1`` (as GLM-5's); ``+bare``: one with neither."""
    arch, _, extra = name.partition("+")
    spec = load_model(QWEN)
    if arch == QWEN:
        return spec
    spec = replace(spec, architectures=(arch,))
    if extra == "dsa":
        return replace(spec, config_json=json.dumps({"architectures": [arch], "index_topk": 2048,
                                                     "num_nextn_predict_layers": 1}))
    if extra == "bare":
        return replace(spec, config_json=json.dumps({"architectures": [arch]}))
    return spec


def judge(version: str, words: str, name: str = QWEN, pp: int = 1, env: Mapping[str, str] | None = None) -> Judged:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    layout = Layout(8, pp, 1, (9, 0), "NVIDIA H100 80GB HBM3", 81559)
    return config_check(line, model(name), layout, Version(version), env=env)


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    refused: str | None = None          # the release's words; None: accepted
    source: str | None = None           # file:line in that release
    model: str = QWEN
    pp: int = 1
    env: Mapping[str, str] = field(default_factory=dict)
    exception: str = "ValueError"


VALIDATION = "sglang/srt/arg_groups/validation_hook.py"
DSV4_HOOK = "sglang/srt/arg_groups/deepseek_v4_hook.py"
KV_HOOK = "sglang/srt/arg_groups/kv_cache_hook.py"
SERVER = "sglang/srt/server_args.py"
PP = "sglang.spec3.pipeline_parallel"
V4 = "sglang.spec3.deepseek_v4"
UM = "sglang.spec3.unified_memory"
HD = "sglang.spec3.hicache_dcp"
HS = "sglang.spec3.hisparse"
KS = "sglang.spec3.kv_cache_sharding"
RS = "sglang.spec3.replayssm_topk"
IQ = "sglang.spec3.iquest_q1"
IQD = "sglang.spec3.iquest_q1_draft"
DCP = "sglang.spec3.dcp"
DSA = "sglang.spec3.dsa_dcp"
LN = "sglang.spec3.layernorm_sp"
A = "AssertionError"
N = "NotImplementedError"
CASES = [
    # -- pipeline parallelism with speculative decoding (check_server_args, 0.5.21+): the algorithm rewritten
    Case(PP, "0.5.23", f"{ALGO} nextn", "PP + speculative decoding (MTP) is only supported on prefill nodes",
         f"{VALIDATION}:161", pp=2, exception=A),
    Case(PP, "0.5.23", f"{ALGO} nextn {PREFILL}", pp=2),
    Case(PP, "0.5.23", f"{ALGO} nextn"),                         # no PP: the check is not run
    Case(PP, "0.5.21", f"{ALGO} EAGLE", "PP + speculative decoding (MTP) is only supported on prefill nodes",
         f"{VALIDATION}:79", pp=2, exception=A),
    Case(PP, "0.5.23", f"{ALGO} EAGLE3 {DRAFT} {PREFILL}",
         "Pipeline parallelism currently only supports EAGLE (non-multi-layer) speculative decoding",
         f"{VALIDATION}:132", pp=2, exception=A),
    Case(PP, "0.5.22", f"{ALGO} NGRAM {PREFILL}",
         "Pipeline parallelism currently only supports EAGLE (non-multi-layer)", f"{VALIDATION}:131", pp=2,
         exception=A),
    Case(PP, "0.5.23", f"{ALGO} EAGLE --enable-multi-layer-eagle {PREFILL}",
         "Pipeline parallelism currently only supports EAGLE (non-multi-layer)", f"{VALIDATION}:132", pp=2,
         exception=A),
    Case(PP, "0.5.23", f"{ALGO} EAGLE {PREFILL}", pp=2),
    Case(PP, "0.5.23", f"{ALGO} NEXTN {PREFILL}", "SGLANG_ENABLE_PP_SPEC is not compatible with --disaggregation-mode",
         f"{VALIDATION}:145", pp=2, env=PP_SPEC, exception=A),
    Case(PP, "0.5.23", f"{ALGO} NEXTN", pp=2, env=PP_SPEC),      # with the variable: no PD server needed
    Case(PP, "0.5.23", f"{ALGO} NEXTN --speculative-adaptive",
         "SGLANG_ENABLE_PP_SPEC is not compatible with --speculative-adaptive", f"{VALIDATION}:150", pp=2,
         env=PP_SPEC, exception=A),
    # a top-k of 2 makes the speculative hook turn --speculative-adaptive off before the check
    Case(PP, "0.5.23", f"{ALGO} NEXTN --speculative-adaptive {WIDTHS.format(k=2)}", pp=2, env=PP_SPEC),
    Case(PP, "0.5.21", f"{ALGO} EAGLE --enable-dp-attention --dp-size 2",
         "SGLANG_ENABLE_PP_SPEC is not compatible with --enable-dp-attention", f"{VALIDATION}:75", pp=2,
         env=PP_SPEC, exception=A),
    Case(PP, "0.5.22", f"{ALGO} EAGLE --attn-dp-size 2",
         "SGLANG_ENABLE_PP_SPEC is not compatible with attention DP (--attn-dp-size)", f"{VALIDATION}:155", pp=2,
         env=PP_SPEC, exception=A),
    Case(PP, "0.5.22", f"{ALGO} EAGLE --attn-dp-size 2", pp=2, env={"SGLANG_ENABLE_PP_SPEC": "0"},
         refused="PP + speculative decoding (MTP) is only supported on prefill nodes", source=f"{VALIDATION}:160",
         exception=A),
    Case(PP, "0.5.23", f"{ALGO} DSPARK {PREFILL}", "SGLANG_ENABLE_PP_SPEC does not support DSPARK PD prefill",
         f"{VALIDATION}:128", pp=2, env=PP_SPEC, exception=A),
    Case(PP, "0.5.21", f"{ALGO} DSPARK {PREFILL}", pp=2),
    Case(PP, "0.5.20", f"{ALGO} EAGLE", pp=2, env=PP_SPEC),      # not this check before 0.5.21
    # -- DeepSeek V4 (a model override: the algorithm and top-k as typed)
    Case(V4, "0.5.23", f"{ALGO} nextn", "Only EAGLE and DSPARK speculative algorithms are supported for "
         "DeepseekV4ForCausalLM", f"{DSV4_HOOK}:149", DSV4, exception=A),
    Case(V4, "0.5.23", f"{ALGO} EAGLE", "Only EAGLE speculative algorithm with topk == 1 is supported for "
         "DeepseekV4ForCausalLM", f"{DSV4_HOOK}:156", DSV4, exception=A),
    Case(V4, "0.5.23", f"{ALGO} EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1", model=DSV4),
    Case(V4, "0.5.23", f"{ALGO} DSPARK", model=DSV4),
    Case(V4, "0.5.23", f"{ALGO} nextn"),                          # another model
    Case(V4, "0.5.19", f"{ALGO} NGRAM", "Only EAGLE and DSPARK speculative algorithms", f"{DSV4_HOOK}:148", DSV4,
         exception=A),
    Case(V4, "0.5.16", f"{ALGO} EAGLE3", "Only EAGLE and DSPARK speculative algorithms", f"{DSV4_HOOK}:56", DSV4,
         exception=A),
    Case(V4, "0.5.16", f"{ALGO} EAGLE --speculative-eagle-topk 2 --speculative-num-steps 2",
         "Only EAGLE speculative algorithm with topk == 1", f"{DSV4_HOOK}:61", DSV4, exception=A),
    Case(V4, "0.5.16", f"{ALGO} DSPARK", model=DSV4),
    Case(V4, "0.5.14", f"{ALGO} DSPARK", "Only EAGLE speculative algorithm is supported for DeepseekV4ForCausalLM",
         f"{DSV4_HOOK}:49", DSV4, exception=A),
    # to 0.5.15.post1 the top-k assert is under any algorithm
    Case(V4, "0.5.12", f"{ALGO} EAGLE", "Only EAGLE speculative algorithm with topk == 1", f"{DSV4_HOOK}:40", DSV4,
         exception=A),
    Case(V4, "0.5.12", f"{ALGO} EAGLE --speculative-eagle-topk 1 --speculative-num-steps 2", model=DSV4),
    # -- the unified memory pool (after the speculative hook: the algorithm rewritten)
    Case(UM, "0.5.15", f"{ALGO} NGRAM {UNIFIED}", "--enable-unified-memory is not yet compatible with speculative "
         "decoding.", f"{SERVER}:5889", exception=A),
    Case(UM, "0.5.15", UNIFIED),
    Case(UM, "0.5.15", f"{ALGO} NGRAM"),
    Case(UM, "0.5.18", f"{ALGO} nextn {UNIFIED}", "Got --speculative-algorithm='EAGLE'.", f"{SERVER}:8312",
         exception=A),
    Case(UM, "0.5.18", f"{ALGO} dspark {UNIFIED}"),
    Case(UM, "0.5.21", f"{ALGO} EAGLE {UNIFIED}", "only supports --speculative-algorithm DSPARK (chain draft)",
         f"{KV_HOOK}:545", exception=A),
    Case(UM, "0.5.23", f"{ALGO} NGRAM {UNIFIED}", "only supports --speculative-algorithm DSPARK, DFLASH, EAGLE and "
         "EAGLE3; other speculative algorithms are not yet audited for the unified pool's virtual-to-physical loc "
         "translation. Got --speculative-algorithm='NGRAM'.", f"{KV_HOOK}:588", exception=A),
    Case(UM, "0.5.23", f"{ALGO} DFLASH {DRAFT} {UNIFIED}"),
    Case(UM, "0.5.23", f"{ALGO} EAGLE3 {DRAFT} {UNIFIED} {WIDTHS.format(k=4)}",
         "--enable-unified-memory supports a linear draft chain only", f"{KV_HOOK}:601", exception=A),
    Case(UM, "0.5.23", f"{ALGO} EAGLE3 {DRAFT} {UNIFIED} {WIDTHS.format(k=1)}"),
    Case(UM, "0.5.23", f"{ALGO} EAGLE {UNIFIED} {PREFILL}", "--enable-unified-memory with PD disaggregation does "
         "not support speculative decoding with the Mooncake transfer backend.", f"{KV_HOOK}:547", exception=A),
    Case(UM, "0.5.21", f"{ALGO} DSPARK {UNIFIED} {PREFILL} --disaggregation-transfer-backend mooncake_tcp",
         "does not support speculative decoding with the Mooncake transfer backend", f"{KV_HOOK}:496", exception=A),
    Case(UM, "0.5.23", f"{ALGO} DSPARK {UNIFIED} {PREFILL} --disaggregation-transfer-backend nixl"),
    Case(UM, "0.5.23", f"{ALGO} EAGLE3 {DRAFT} {UNIFIED} --enable-hierarchical-cache {WIDTHS.format(k=1)}",
         "--enable-unified-memory + EAGLE/EAGLE3 does not support --enable-hierarchical-cache", f"{KV_HOOK}:678",
         exception=A),
    Case(UM, "0.5.23", f"{ALGO} DSPARK {UNIFIED} --enable-hierarchical-cache"),
    Case(UM, "0.5.23", f"{ALGO} EAGLE {UNIFIED} --disaggregation-mode decode --disaggregation-transfer-backend nixl "
         f"--disaggregation-decode-retraction-backup host_pool {WIDTHS.format(k=1)}",
         "does not support --disaggregation-decode-retraction-backup=host_pool", f"{KV_HOOK}:669", exception=A),
    # -- HiCache with --dcp-size > 1 (handle_hicache: before the speculative hook, the algorithm as typed)
    Case(HD, "0.5.17", f"{ALGO} DSPARK {HICACHE_DCP}", "HiCache with --dcp-size > 1 does not support speculative "
         "decoding yet", f"{SERVER}:7173", exception=N),
    Case(HD, "0.5.17", HICACHE_DCP),
    Case(HD, "0.5.18", f"{ALGO} NEXTN {HICACHE_DCP}", "HiCache with --dcp-size > 1 only supports DSPARK",
         f"{SERVER}:7409", exception=N),
    Case(HD, "0.5.18", f"{ALGO} DSPARK {HICACHE_DCP}"),
    Case(HD, "0.5.23", f"{ALGO} dspark {HICACHE_DCP}", "HiCache with --dcp-size > 1 only supports DSPARK "
         "speculative decoding; other draft-model host pools have no DCP index translation.",
         "sglang/srt/arg_groups/hicache_hook.py:142", exception=N),
    Case(HD, "0.5.23", f"{ALGO} NEXTN --dcp-size 2"),             # no HiCache
    # -- decode context parallelism with speculative decoding (0.5.15 / 0.5.16)
    Case(DCP, "0.5.16", f"{ALGO} NEXTN --dcp-size 2", "on CUDA platform does not support any speculative "
         "algorithm, but got dcp_size=2", f"{SERVER}:3165"),
    Case(DCP, "0.5.15", f"{ALGO} NGRAM --dcp-size 2", "does not support any speculative algorithm", f"{SERVER}:2851"),
    Case(DCP, "0.5.16", "--dcp-size 2"),
    Case(DCP, "0.5.17", f"{ALGO} NEXTN --dcp-size 2"),
    # -- HiSparse with speculative decoding (check_server_args: after the speculative hook)
    Case(HS, "0.5.23", f"{ALGO} NGRAM {HISPARSE}", "The minimal HiSparse spec integration supports linear "
         "speculation only; use --speculative-eagle-topk 1.", "sglang/srt/arg_groups/hisparse_hook.py:119"),
    Case(HS, "0.5.23", f"{ALGO} NGRAM --speculative-ngram-max-bfs-breadth 1 {HISPARSE}"),
    Case(HS, "0.5.22", f"{ALGO} EAGLE {HISPARSE} {WIDTHS.format(k=2)}", "supports linear speculation only",
         "sglang/srt/arg_groups/hisparse_hook.py:119"),
    Case(HS, "0.5.22", f"{ALGO} EAGLE {HISPARSE} {WIDTHS.format(k=1)}"),
    Case(HS, "0.5.23", f"{ALGO} EAGLE3 {DRAFT} {HISPARSE} --speculative-adaptive",
         "HiSparse speculative decoding uses statically sized swap state; --speculative-adaptive is not supported.",
         "sglang/srt/arg_groups/hisparse_hook.py:124"),
    Case(HS, "0.5.23", f"{ALGO} DSPARK {HISPARSE} --speculative-adaptive"),  # adaptive is turned off for DSPARK
    # -- KV-cache sharding (its first run is before the speculative hook: the algorithm and top-k as typed)
    Case(KS, "0.5.22", f"{ALGO} EAGLE {SHARDING}", "--enable-kv-cache-sharding does not support speculative "
         "decoding.", "sglang/srt/arg_groups/kv_shard_hook.py:67"),
    Case(KS, "0.5.22", SHARDING),
    Case(KS, "0.5.23", f"{ALGO} NEXTN {SHARDING} --speculative-eagle-topk 1 --speculative-num-steps 2",
         "KV sharding supports speculative decoding only for GLM DSA single-layer NextN MTP with EAGLE and topk=1.",
         "sglang/srt/arg_groups/kv_shard_hook.py:115", GLM_DSA),
    Case(KS, "0.5.23", f"{ALGO} EAGLE {SHARDING}", "KV sharding supports speculative decoding only for GLM DSA",
         "sglang/srt/arg_groups/kv_shard_hook.py:115", GLM_DSA),
    Case(KS, "0.5.23", f"{ALGO} EAGLE {SHARDING} --speculative-eagle-topk 1 --speculative-num-steps 2",
         model=GLM_DSA),
    # -- ReplaySSM spec against the top-k as given (the linear-attention hook: before the speculative hook)
    Case(RS, "0.5.23", f"{ALGO} EAGLE --enable-linear-replayssm-spec {WIDTHS.format(k=2)}",
         "--enable-linear-replayssm-spec requires a linear draft chain (--speculative-eagle-topk in {None, 1}); "
         "the chunked verify kernel uses a strictly-lower causal mask and is invalid for EAGLE tree verify. Got "
         "--speculative-eagle-topk=2.", "sglang/srt/arg_groups/attention_hook.py:452"),
    Case(RS, "0.5.23", f"{ALGO} EAGLE --enable-linear-replayssm-spec"),  # the top-k the release picks comes later
    Case(RS, "0.5.17", f"{ALGO} EAGLE --enable-linear-replayssm-spec {WIDTHS.format(k=3)}",
         "requires a linear draft chain", f"{SERVER}:6174"),
    Case(RS, "0.5.16", f"{ALGO} EAGLE --enable-gdn-replayssm-spec {WIDTHS.format(k=2)}",
         "--enable-gdn-replayssm-spec requires a linear draft chain", f"{SERVER}:5374"),
    Case(RS, "0.5.16", f"{ALGO} EAGLE --enable-gdn-replayssm-spec {WIDTHS.format(k=1)}"),
    # -- IQuest Q1 (a model override: the algorithm as typed, any case)
    Case(IQ, "0.5.23", f"{ALGO} eagle3 {DRAFT}", "IQuest Q1 MTP requires serial EAGLE or NEXTN drafting.",
         "sglang/srt/arg_groups/model_overrides/iquest_q1.py:26", IQUEST),
    Case(IQ, "0.5.21", f"{ALGO} NGRAM", "IQuest Q1 MTP requires serial EAGLE or NEXTN drafting.",
         "sglang/srt/arg_groups/model_overrides/iquest_q1.py:25", IQUEST_MTP),
    Case(IQ, "0.5.23", f"{ALGO} nextn {DRAFT}", model=IQUEST),
    Case(IQ, "0.5.23", f"{ALGO} nextn {DRAFT} --speculative-draft-attention-backend triton",
         "IQuestQ1 requires FA3 attention for the MTP draft.", "sglang/srt/arg_groups/model_overrides/iquest_q1.py:28",
         IQUEST),
    Case(IQ, "0.5.23", f"{ALGO} nextn {DRAFT} --speculative-draft-attention-backend fa3", model=IQUEST),
    Case(IQ, "0.5.23", f"{ALGO} nextn {DRAFT} {WIDTHS.format(k=2)}",
         "IQuestQ1 speculative decoding requires --speculative-eagle-topk 1.",
         "sglang/srt/arg_groups/model_overrides/iquest_q1.py:32", IQUEST),
    Case(IQ, "0.5.23", f"{ALGO} nextn {DRAFT} --enable-multi-layer-eagle",
         "IQuest Q1 MTP drafting does not support multi-layer EAGLE.",
         "sglang/srt/arg_groups/model_overrides/iquest_q1.py:36", IQUEST),
    Case(IQ, "0.5.23", f"{ALGO} eagle3"),                          # another model
    Case(IQD, "0.5.23", f"{ALGO} nextn", "IQuest Q1 requires an independent draft model path.",
         "sglang/srt/arg_groups/speculative_hook.py:1023", IQUEST),
    Case(IQD, "0.5.21", f"{ALGO} EAGLE --speculative-draft-model-path m",
         "IQuest Q1 requires an independent draft model path.", "sglang/srt/arg_groups/speculative_hook.py:922",
         IQUEST),
    Case(IQD, "0.5.23", f"{ALGO} nextn {DRAFT}", model=IQUEST),
    Case(IQD, "0.5.23", f"{ALGO} nextn {DRAFT} --speculative-token-map t",
         "MTP uses its own full-vocabulary embedding and head.", "sglang/srt/arg_groups/speculative_hook.py:1036",
         IQUEST),
    Case(IQD, "0.5.23", f"{ALGO} nextn {DRAFT} --speculative-num-steps 0", "MTP requires positive "
         "speculative_num_steps.", "sglang/srt/arg_groups/speculative_hook.py:1041", IQUEST),
    Case(IQD, "0.5.22", f"{ALGO} nextn {DRAFT} --speculative-num-steps 2 --speculative-eagle-topk 0",
         "MTP requires --speculative-eagle-topk 1.", "sglang/srt/arg_groups/speculative_hook.py:971", IQUEST),
    Case(IQD, "0.5.23", f"{ALGO} nextn {DRAFT} --speculative-num-steps 2 --speculative-num-draft-tokens 4",
         "MTP verification width must equal draft steps + 1.", "sglang/srt/arg_groups/speculative_hook.py:1051",
         IQUEST),
    Case(IQD, "0.5.23", f"{ALGO} nextn {DRAFT} --speculative-num-steps 2 --speculative-num-draft-tokens 3",
         model=IQUEST),
    Case(IQD, "0.5.23", f"{ALGO} nextn", model=IQUEST_MTP),        # the draft's own architecture: returns first
    # -- DSA decode context parallelism against the top-k as given (a model override)
    Case(DSA, "0.5.23", f"--dcp-size 2 {ALGO} EAGLE {WIDTHS.format(k=2)}",
         "DSA DCP requires --speculative-eagle-topk 1.", "sglang/srt/arg_groups/model_overrides/deepseek_v2.py:26",
         GLM_DSA),
    Case(DSA, "0.5.22", f"--dcp-size 2 {ALGO} EAGLE {WIDTHS.format(k=2)}",
         "DSA DCP requires --speculative-eagle-topk 1.", "sglang/srt/arg_groups/model_overrides/deepseek_v2.py:26",
         GLM_DSA),
    Case(DSA, "0.5.23", f"--dcp-size 2 {ALGO} EAGLE {WIDTHS.format(k=1)}", model=GLM_DSA),
    Case(DSA, "0.5.23", f"--dcp-size 2 {ALGO} EAGLE {WIDTHS.format(k=2)}"),   # not a DSA model
    # -- LayerNorm SP (0.5.19 - 0.5.22)
    Case(LN, "0.5.22", f"{ALGO} NEXTN --enable-layernorm-sp", "--enable-layernorm-sp is not compatible with "
         "speculative decoding (EAGLE/EAGLE3)", "sglang/srt/arg_groups/layernorm_sp_hook.py:62"),
    Case(LN, "0.5.19", f"{ALGO} NGRAM --enable-layernorm-sp", "--enable-layernorm-sp is not compatible with "
         "speculative decoding", "sglang/srt/arg_groups/layernorm_sp_hook.py:59"),
    Case(LN, "0.5.22", "--enable-layernorm-sp"),
    Case(LN, "0.5.23", f"{ALGO} NEXTN --enable-layernorm-sp"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.rule}-{c.version}-{'refused' if c.refused else 'ok'}")
def test_case(case: Case) -> None:
    judged = judge(case.version, case.words, case.model, case.pp, case.env)
    assert_verdict(judged, case.rule, case.refused, exception=case.exception, version=case.version,
                   source=case.source or "")


def test_pipeline_parallel_is_not_judged_where_the_model_turns_multi_layer_eagle_on() -> None:
    """MiMo-V2's override turns multi-layer EAGLE on for EAGLE, which the PP check refuses: not judged for it, where
    the same line with Qwen3 passes."""
    words = f"{ALGO} EAGLE {PREFILL}"
    judged = judge("0.5.23", words, MIMO, pp=2)
    assert not [r for r in judged.refusals if r.rule == PP]
    assert any(PP in n for n in judged.not_judged)
    assert not [n for n in judge("0.5.23", words, pp=2).not_judged if PP in n]


def test_a_promotable_eagle_is_not_judged_by_the_checks_after_the_speculative_hook() -> None:
    """EAGLE with a draft model may become FROZEN_KV_MTP (read from the draft's config): the unified pool's list and
    PP's EAGLE-only check are not judged, and the report says why."""
    judged = judge("0.5.23", f"{ALGO} EAGLE {DRAFT} {UNIFIED} {PREFILL}", pp=2)
    assert not [r for r in judged.refusals if r.rule in (PP, UM)]
    assert any(PP in n and "FROZEN_KV_MTP" in n for n in judged.not_judged)
    assert any(UM in n and "FROZEN_KV_MTP" in n for n in judged.not_judged)


def test_the_top_k_the_release_picks_is_not_judged() -> None:
    """EAGLE without --speculative-num-steps takes its top-k from auto_choose_speculative_params (by architecture):
    the unified pool's and HiSparse's top-k checks are not judged."""
    judged = judge("0.5.23", f"{ALGO} EAGLE3 {DRAFT} {UNIFIED} {HISPARSE}")
    assert not [r for r in judged.refusals if r.rule in (UM, HS)]
    assert any(UM in n and "speculative_eagle_topk" in n for n in judged.not_judged)
    assert any(HS in n and "speculative_eagle_topk" in n for n in judged.not_judged)


def test_kv_sharding_without_the_nextn_layer_count_is_not_judged() -> None:
    judged = judge("0.5.23", f"{ALGO} EAGLE {SHARDING} --speculative-eagle-topk 1 --speculative-num-steps 2",
                   GLM_NO_NEXTN)
    assert not [r for r in judged.refusals if r.rule == KS]
    assert any(KS in n and "num_nextn_predict_layers" in n for n in judged.not_judged)


def test_iquest_draft_width_without_steps_is_not_judged() -> None:
    """Without --speculative-num-steps IQuest Q1's MTP draft takes them from the draft checkpoint's
    num_draft_slots, which is not read: the width check is not judged, and said."""
    judged = judge("0.5.23", f"{ALGO} nextn {DRAFT} --speculative-num-draft-tokens 4", IQUEST)
    assert not [r for r in judged.refusals if r.rule == IQD]
    assert any(IQD in n and "steps + 1" in n for n in judged.not_judged)


def test_a_dsa_model_whose_config_is_not_read_is_not_judged() -> None:
    judged = judge("0.5.23", f"--dcp-size 2 {ALGO} EAGLE {WIDTHS.format(k=2)}", "GlmMoeDsaForCausalLM")
    assert not [r for r in judged.refusals if r.rule == DSA]
    assert any("--dcp-size > 1 and --speculative-eagle-topk" in n for n in judged.not_judged)


def test_aux_hidden_state_capture_resets_the_algorithm() -> None:
    """0.5.23's --enable-return-aux-hidden-states resets the algorithm to None before any hook reads it."""
    words = f"{ALGO} EAGLE3 {UNIFIED} --enable-return-aux-hidden-states"
    assert not [r for r in judge("0.5.23", words).refusals if r.rule == UM]
    assert [r for r in judge("0.5.23", f"{ALGO} NGRAM {UNIFIED}").refusals if r.rule == UM]


def test_every_rule_of_the_area_has_a_refusing_and_an_accepted_case() -> None:
    assert {c.rule for c in CASES if c.refused is not None} == set(rules_spec3.RULES)
    assert {c.rule for c in CASES if c.refused is None} == set(rules_spec3.RULES)
