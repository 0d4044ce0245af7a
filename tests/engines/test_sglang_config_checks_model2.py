"""The rest of SGLang's model-specific refusals (``engines/sglang/rules_model2.py``), each in the release's words
at its line, beside the same line accepted (another model, the flag off, or a release without the check). The
line is parsed by the release's own parser (``engines/sglang/cli.py resolve``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout

QWEN = "Qwen/Qwen3-8B"                        # Qwen3ForCausalLM: not DSA, not in the CP decode list
GLM_DSA = "GlmMoeDsaForCausalLM+index_topk"   # GLM-5: DSA with the config's index_topk
GLM_NO_TOPK = "GlmMoeDsaForCausalLM+config"   # in the list, its config.json does not write index_topk
INTERN = "InternS2MobiusForConditionalGeneration"
ERNIE = "Ernie4_5_VLMoeForConditionalGeneration"
HYV4 = "HYV4ForCausalLM"


def model(name: str) -> ModelSpec:
    """Qwen3-8B's shape under the architecture the branches read (``hf_config.architectures[0]``); ``+index_topk``:
    a ``config.json`` that writes ``index_topk``; ``+config``: one that does not."""
    arch, _, extra = name.partition("+")
    spec = load_model(QWEN)
    if arch == QWEN:
        return spec
    spec = replace(spec, architectures=(arch,))
    if extra == "index_topk":
        return replace(spec, config_json=json.dumps({"architectures": [arch], "index_topk": 2048}))
    if extra == "config":
        return replace(spec, config_json=json.dumps({"architectures": [arch]}))
    return spec


def judge(version: str, words: str, name: str, pp: int = 1, path: str = "m") -> Judged:
    line = resolve(["--model-path", path, *words.split()], Version(version))
    assert line.ok, line.errors
    layout = Layout(8, pp, 1, (9, 0), "NVIDIA H100 80GB HBM3", 81559)
    return config_check(line, model(name), layout, Version(version))


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    model: str
    refused: str | None = None          # the release's words; None: accepted
    source: str | None = None           # file:line in that release
    pp: int = 1
    exception: str = "ValueError"


CASES = [
    # -- --enable-dsa-cache-layer-split needs a DSA model
    Case("sglang.dsa_cache_layer_split.needs_dsa", "0.5.16", "--enable-dsa-cache-layer-split", QWEN,
         "--enable-dsa-cache-layer-split is only supported for DSA (DeepSeek Sparse Attention) models.",
         "sglang/srt/server_args.py:4332"),
    Case("sglang.dsa_cache_layer_split.needs_dsa", "0.5.16", "", QWEN),
    Case("sglang.dsa_cache_layer_split.needs_dsa", "0.5.23", "--enable-dsa-cache-layer-split", QWEN,
         "--enable-dsa-cache-layer-split is only supported for DSA (DeepSeek Sparse Attention) models.",
         "sglang/srt/arg_groups/model_hook.py:188"),
    Case("sglang.dsa_cache_layer_split.needs_dsa", "0.5.23", "--enable-dsa-cache-layer-split", GLM_DSA),
    # HYV4 is a DSA architecture from 0.5.20 only (0.5.19 model_config.py:124-137 does not list it)
    Case("sglang.dsa_cache_layer_split.needs_dsa", "0.5.19", "--enable-dsa-cache-layer-split", HYV4 + "+index_topk",
         "--enable-dsa-cache-layer-split is only supported for DSA", "sglang/srt/arg_groups/model_hook.py:88"),
    # -- --enable-cp-decode-attn-tp and the architectures it lists
    Case("sglang.cp_decode_attn_tp.arch", "0.5.17", "--enable-cp-decode-attn-tp", QWEN,
         "--enable-cp-decode-attn-tp is only supported for models whose attention linears are replicated across CP "
         "ranks (attn_tp_size=1). Got Qwen3ForCausalLM; supported: ['DeepseekV4ForCausalLM', "
         "'DeepseekV4ForCausalLMDSpark', 'DeepseekV4ForCausalLMNextN', 'GlmMoeDsaForCausalLM', "
         "'GlmMoeDsaForCausalLMNextN'].", "sglang/srt/server_args.py:5068"),
    Case("sglang.cp_decode_attn_tp.arch", "0.5.17", "--enable-cp-decode-attn-tp", GLM_DSA),
    Case("sglang.cp_decode_attn_tp.arch", "0.5.23", "--enable-cp-decode-attn-tp", QWEN,
         "Got Qwen3ForCausalLM; supported:", "sglang/srt/arg_groups/model_hook.py:199"),
    Case("sglang.cp_decode_attn_tp.arch", "0.5.23", "", QWEN),
    # -- Intern-S2-Mobius: no PP, no EP
    Case("sglang.intern_s2.parallel", "0.5.18", "--ep-size 8", INTERN,
         "Intern-S2-Mobius does not support: expert parallelism (--ep-size must be 1).",
         "sglang/srt/server_args.py:5260"),
    Case("sglang.intern_s2.parallel", "0.5.18", "", INTERN),
    Case("sglang.intern_s2.parallel", "0.5.23", "--ep-size 4", INTERN,
         "Intern-S2-Mobius does not support: pipeline parallelism (--pp-size must be 1); expert parallelism "
         "(--ep-size must be 1).", "sglang/srt/arg_groups/model_hook.py:183", pp=2),
    Case("sglang.intern_s2.parallel", "0.5.23", "--ep-size 4", QWEN, pp=2),
    Case("sglang.intern_s2.parallel", "0.5.17", "--ep-size 8", INTERN),
    # -- ERNIE 4.5 VL MoE: no attention DP
    Case("sglang.ernie45_vl.dp_attention", "0.5.22", "--attn-dp-size 4", ERNIE,
         "ERNIE 4.5 VL MoE does not support DP attention: its attention heads are split over the full TP group.",
         "sglang/srt/arg_groups/model_overrides/ernie45_vl.py:15"),
    Case("sglang.ernie45_vl.dp_attention", "0.5.23", "--enable-dp-attention --dp-size 2", ERNIE,
         "ERNIE 4.5 VL MoE does not support DP attention", "sglang/srt/arg_groups/model_overrides/ernie45_vl.py:15"),
    Case("sglang.ernie45_vl.dp_attention", "0.5.23", "", ERNIE),
    Case("sglang.ernie45_vl.dp_attention", "0.5.21", "--enable-dp-attention --dp-size 2", ERNIE),
    # -- HYV4: no prefill CP, no DCP
    Case("sglang.hyv4.context_parallel", "0.5.20", "--enable-prefill-cp", HYV4,
         "--enable-prefill-cp is not supported for HYV4 because its attention path does not implement DSA "
         "context-parallel metadata and sharding. Got architecture='HYV4ForCausalLM' and enable_prefill_cp=True.",
         "sglang/srt/arg_groups/model_overrides/deepseek_v2.py:49"),
    Case("sglang.hyv4.context_parallel", "0.5.23", "--dcp-size 2", HYV4,
         "--dcp-size > 1 is not supported for HYV4 because decode context parallelism gathers query heads across "
         "DCP ranks", "sglang/srt/arg_groups/model_overrides/deepseek_v2.py:71"),
    Case("sglang.hyv4.context_parallel", "0.5.23", "", HYV4),
    Case("sglang.hyv4.context_parallel", "0.5.23", "--dcp-size 2", QWEN),
]


def _id(c: Case) -> str:
    return f"{c.rule}-{c.version}-{c.model}-{c.words or 'defaults'}-{'refused' if c.refused else 'accepted'}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = judge(case.version, case.words, case.model, case.pp)
    mine = [r for r in judged.refusals if r.rule == case.rule]
    if case.refused is None:
        assert not mine, [r.text("SGLang") for r in mine]
        assert not [n for n in judged.not_judged if case.rule in n], judged.not_judged
        return
    assert mine, (judged.refusals, judged.not_judged)
    r = mine[0]
    assert case.refused in r.message, r.message
    assert (r.exception, r.release, r.source) == (case.exception, case.version, case.source)


def test_every_rule_has_a_refused_and_an_accepted_case_on_two_releases() -> None:
    from pytest_gpulayout.engines.sglang import rules_model2

    for rule in rules_model2.RULES:
        refused = {c.version for c in CASES if c.rule == rule and c.refused}
        accepted = [c for c in CASES if c.rule == rule and not c.refused]
        assert refused and accepted, rule
        assert len(refused | {c.version for c in accepted}) >= 2, rule


def test_a_dsa_architecture_whose_config_does_not_write_index_topk_is_not_judged() -> None:
    judged = judge("0.5.23", "--enable-dsa-cache-layer-split", GLM_NO_TOPK)
    assert not [r for r in judged.refusals if r.rule == "sglang.dsa_cache_layer_split.needs_dsa"]
    assert any("index_topk" in n for n in judged.not_judged), judged.not_judged


def test_intern_s2_ep_under_dwdp_is_not_claimed() -> None:
    judged = judge("0.5.23", "--ep-size 8 --dwdp-size 2", INTERN)
    assert not [r for r in judged.refusals if r.rule == "sglang.intern_s2.parallel"]
    assert any("sglang.intern_s2.parallel" in n for n in judged.not_judged), judged.not_judged


def test_a_remote_instance_model_path_skips_the_model_branch() -> None:
    judged = judge("0.5.23", "--enable-cp-decode-attn-tp", QWEN, path="instance://10.0.0.1:30000")
    assert not [r for r in judged.refusals if r.rule == "sglang.cp_decode_attn_tp.arch"]
