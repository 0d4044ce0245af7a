"""SGLang's DeepSeek-V4 / V4.1, DSA-override, MiMo-V2, Nemotron-H, MiniCPM, Kimi-K3 and CP-by-model refusals
(``engines/sglang/rules_model4.py``), each in the release's words at its line, beside the same line accepted
(another value, model, GPU or release); and the entries of other areas' rules from the releases that moved them
(DSA cache-layer split, Moss-VL, the two prefill-CP spellings, the DCP communication flags). The line is parsed
by the release's own parser (``engines/sglang/cli.py resolve``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.sglang import rules_model4
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

MODELS = Path(__file__).resolve().parent.parent / "data" / "models"
QWEN = "Qwen/Qwen3-8B"
V32 = "deepseek-ai/DeepSeek-V3.2"          # DeepseekV32ForCausalLM with index_topk: DSA, no index sharing
V4 = "deepseek-v4-flash"                   # DeepseekV4ForCausalLM, model_type deepseek_v4
V41 = "deepseek-v4.1"                      # the same architecture, model_type deepseek_v41
MIMO = "mimo-v2"                           # MiMoV2ForCausalLM, fused qkv_proj, 4 KV heads
NEMOTRON = "nemotron-h-8b"                 # NemotronHForCausalLM, relu2
MINICPM = "minicpm-2b"
KIMI = "kimi-k3"
#: variants of a fixture's config.json (``name+variant``)
VARIANTS: dict[str, dict[str, object]] = {
    "topk_freq": {"index_topk_freq": 2},                                      # shares top-k every other layer
    "topk_pattern": {"index_topk_pattern": "FSFS"},
    "silu_modelopt": {"mlp_hidden_act": "silu", "quantization_config": {"quant_method": "modelopt",
                                                                       "quant_algo": "FP8"}},
    "silu": {"mlp_hidden_act": "silu"},
    "split": {"attention_projection_layout": "split"},
}
H100 = (9, 0)
B200 = (10, 0)


def model(name: str) -> ModelSpec:
    """A catalog model or a fixture folder of ``tests/data/models``; ``+variant``: its config.json with the keys of
    ``VARIANTS``; ``arch:<Architecture>``: Qwen3-8B's shape under that architecture."""
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


def judge(version: str, words: str, name: str, tp: int = 8, pp: int = 1, cc: tuple[int, int] = H100,
          nodes: int = 1, path: str = "m") -> Judged:
    line = resolve(["--model-path", path, *words.split()], Version(version))
    assert line.ok, line.errors
    layout = Layout(tp, pp, 1, cc, "NVIDIA H100 80GB HBM3", 81559, nodes)
    return config_check(line, model(name), layout, Version(version))


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    words: str
    model: str
    refused: str | None = None          # the release's words; None: accepted
    source: str = ""                    # file:line in that release
    tp: int = 8
    pp: int = 1
    cc: tuple[int, int] = H100
    nodes: int = 1
    exception: str = "ValueError"


A = "AssertionError"
SA = "sglang/srt/server_args.py"
AG = "sglang/srt/arg_groups"
V4H = f"{AG}/deepseek_v4_hook.py"
ONE_DP = "For round-robin split mode, dp attention is not supported."
ONE_NODE = "Context parallel only supports single machine (tp_size <= 8). Cross-machine CP has precision issues."

CASES = [
    # -- DeepSeek-V4 prefill CP: the split / strategy, one DP group, one node
    Case("sglang.deepseek_v4.prefill_cp", "0.5.12", "--enable-nsa-prefill-context-parallel --nsa-prefill-cp-mode "
         "in-seq-split", V4, "DeepSeekV4 only supports round-robin-split CP mode, got in-seq-split", f"{V4H}:68"),
    Case("sglang.deepseek_v4.prefill_cp", "0.5.12", "--enable-nsa-prefill-context-parallel", V4),
    Case("sglang.deepseek_v4.prefill_cp", "0.5.12", "--nsa-prefill-cp-mode in-seq-split", V4),   # CP off: returns
    Case("sglang.deepseek_v4.prefill_cp", "0.5.13", "--enable-nsa-prefill-context-parallel --dp-size 2 "
         "--enable-dp-attention", V4, ONE_DP, f"{V4H}:69", exception=A),
    Case("sglang.deepseek_v4.prefill_cp", "0.5.14", "--enable-prefill-cp --cp-strategy zigzag", V4,
         "DeepSeekV4 only supports interleave CP strategy, got zigzag", f"{V4H}:80"),
    Case("sglang.deepseek_v4.prefill_cp", "0.5.18", "--enable-prefill-cp --cp-strategy interleave", V4),
    Case("sglang.deepseek_v4.prefill_cp", "0.5.18", "--enable-prefill-cp --cp-strategy interleave", V4,
         ONE_NODE, f"{V4H}:175", tp=16, nodes=2, exception=A),
    Case("sglang.deepseek_v4.prefill_cp", "0.5.19", "--enable-prefill-cp --cp-strategy interleave --dp-size 2 "
         "--enable-dp-attention", V4, ONE_DP, f"{V4H}:199", exception=A),
    Case("sglang.deepseek_v4.prefill_cp", "0.5.21", "--enable-prefill-cp --cp-strategy zigzag", V4,
         "DeepSeekV4 zigzag CP requires the NPU backend; the CUDA backend reindexes with interleave order.",
         f"{V4H}:121"),
    Case("sglang.deepseek_v4.prefill_cp", "0.5.21", "--enable-prefill-cp --cp-strategy interleave", V4),
    # from 0.5.22 the old spelling's width is attention DP (handle_deprecated_dp_attention), which the check reads
    Case("sglang.deepseek_v4.prefill_cp", "0.5.23", "--enable-prefill-cp --cp-strategy interleave --dp-size 2 "
         "--enable-dp-attention", V4, ONE_DP, f"{V4H}:223", exception=A),
    Case("sglang.deepseek_v4.prefill_cp", "0.5.23", "--enable-prefill-cp --cp-strategy interleave --attn-dp-size 2",
         V4, ONE_DP, f"{V4H}:223", exception=A),
    Case("sglang.deepseek_v4.prefill_cp", "0.5.23", "--enable-prefill-cp --cp-strategy zigzag", V4,
         "DeepSeekV4 zigzag CP requires the NPU backend; CUDA/HIP backends reindex with interleave order.",
         f"{V4H}:173"),
    Case("sglang.deepseek_v4.prefill_cp", "0.5.23", "--enable-prefill-cp --cp-strategy interleave", V4),
    Case("sglang.deepseek_v4.prefill_cp", "0.5.23", "--enable-prefill-cp --cp-strategy zigzag", QWEN),
    # -- --dsv4-attn-backend flashmla_mega: DeepSeek-V4.1 on SM100
    Case("sglang.deepseek_v4.flashmla_mega", "0.5.23", "--dsv4-attn-backend flashmla_mega", V41,
         "--dsv4-attn-backend flashmla_mega requires DeepSeek-V4.1 on SM100/SM103.", f"{V4H}:95", exception=A),
    Case("sglang.deepseek_v4.flashmla_mega", "0.5.23", "--dsv4-attn-backend flashmla_mega", V4,
         "--dsv4-attn-backend flashmla_mega requires DeepSeek-V4.1 on SM100/SM103.", f"{V4H}:95", cc=B200,
         exception=A),
    Case("sglang.deepseek_v4.flashmla_mega", "0.5.23", "--dsv4-attn-backend flashmla_mega", V41, cc=B200),
    Case("sglang.deepseek_v4.flashmla_mega", "0.5.23", "", V41),                  # auto picks it only where it runs
    # -- --enable-encoder-swa-bounded-replay needs DeepSeek-V4.1
    Case("sglang.deepseek_v41.encoder_replay", "0.5.21", "--enable-encoder-swa-bounded-replay", V4,
         "--enable-encoder-swa-bounded-replay requires DeepSeek-V4.1", f"{V4H}:177"),
    Case("sglang.deepseek_v41.encoder_replay", "0.5.21", "--enable-encoder-swa-bounded-replay", V41),
    Case("sglang.deepseek_v41.encoder_replay", "0.5.22", "--enable-encoder-swa-bounded-replay", QWEN),
    Case("sglang.deepseek_v41.encoder_replay", "0.5.23", "--enable-encoder-swa-bounded-replay", QWEN,
         "--enable-encoder-swa-bounded-replay requires DeepSeek-V4.1", f"{AG}/model_hook.py:1045"),
    Case("sglang.deepseek_v41.encoder_replay", "0.5.23", "", QWEN),
    # -- DSA prefill CP in the DeepSeek family's override
    Case("sglang.dsa.prefill_cp_overrides", "0.5.16", "--enable-prefill-cp --cp-strategy interleave --dp-size 2 "
         "--enable-dp-attention", V32, "interleave DSA CP does not support DP attention.", f"{AG}/overrides.py:362",
         exception=A),
    Case("sglang.dsa.prefill_cp_overrides", "0.5.16", "--enable-prefill-cp --cp-strategy interleave", V32),
    Case("sglang.dsa.prefill_cp_overrides", "0.5.20", "--enable-prefill-cp --cp-strategy interleave", V32, ONE_NODE,
         f"{AG}/model_overrides/deepseek_v2.py:108", tp=16, nodes=2, exception=A),
    Case("sglang.dsa.prefill_cp_overrides", "0.5.23", "--enable-prefill-cp --cp-strategy interleave", V32, ONE_NODE,
         f"{AG}/model_overrides/deepseek_v2.py:123", tp=16, nodes=2, exception=A),
    Case("sglang.dsa.prefill_cp_overrides", "0.5.23", "--enable-prefill-cp --cp-strategy interleave", V32),
    Case("sglang.dsa.prefill_cp_overrides", "0.5.23", "--enable-prefill-cp --cp-strategy interleave",
         "deepseek-ai/DeepSeek-V3", tp=16, nodes=2),                          # not DSA: the MLA branch
    # -- two-batch overlap with DSA index-topk sharing
    Case("sglang.dsa.tbo_index_sharing", "0.5.14", "--enable-two-batch-overlap", V32 + "+topk_freq",
         "--enable-two-batch-overlap is not supported with DSA index-topk sharing (index_topk_freq > 1",
         f"{SA}:3553"),
    Case("sglang.dsa.tbo_index_sharing", "0.5.18", "--enable-two-batch-overlap", V32 + "+topk_pattern",
         "--enable-two-batch-overlap is not supported with DSA index-topk sharing", f"{SA}:5357"),
    Case("sglang.dsa.tbo_index_sharing", "0.5.19", "--enable-two-batch-overlap", V32 + "+topk_freq",
         "--enable-two-batch-overlap is not supported with DSA index-topk sharing", f"{AG}/model_hook.py:178"),
    Case("sglang.dsa.tbo_index_sharing", "0.5.23", "--enable-two-batch-overlap", V32 + "+topk_freq",
         "Got index_topk_freq=2, index_topk_pattern=None, and indexer_types=None.", f"{AG}/model_hook.py:67"),
    Case("sglang.dsa.tbo_index_sharing", "0.5.23", "--enable-two-batch-overlap", V32),
    Case("sglang.dsa.tbo_index_sharing", "0.5.23", "", V32 + "+topk_freq"),
    Case("sglang.dsa.tbo_index_sharing", "0.5.16", "", V32 + "+topk_pattern"),
    # -- MiMo-V2's fused qkv_proj: the effective attention TP size against its KV heads
    Case("sglang.mimo_v2.attn_tp_size", "0.5.11", "", MIMO,
         "MiMoV2ForCausalLM requires effective attention TP size 4 because its fused qkv_proj weights are "
         "TP=4-interleaved; got 8 (tp_size=8, dp_size=1, enable_dp_attention=False, attn_cp_size=1).",
         f"{SA}:2000"),
    Case("sglang.mimo_v2.attn_tp_size", "0.5.11", "", MIMO, tp=4),
    # from 0.5.17 a divisor of the KV heads will do: TP 2 passes there, not before
    Case("sglang.mimo_v2.attn_tp_size", "0.5.16", "", MIMO, "requires effective attention TP size 4",
         f"{SA}:4643", tp=2),
    Case("sglang.mimo_v2.attn_tp_size", "0.5.17", "", MIMO, tp=2),
    Case("sglang.mimo_v2.attn_tp_size", "0.5.21", "--enable-dp-attention --dp-size 2", MIMO),
    Case("sglang.mimo_v2.attn_tp_size", "0.5.23", "", MIMO,
         "got 8 (tp_size=8, attn_dp_size=1, attn_cp_size=1).", f"{AG}/model_hook.py:586"),
    Case("sglang.mimo_v2.attn_tp_size", "0.5.23", "--attn-dp-size 2", MIMO),
    Case("sglang.mimo_v2.attn_tp_size", "0.5.23", "", MIMO + "+split"),        # split layout: unset from 0.5.22
    Case("sglang.mimo_v2.attn_tp_size", "0.5.23", "--encoder-only", MIMO),
    # -- Nemotron-H: ModelOpt needs relu2 (an assert without words)
    Case("sglang.nemotron_h.modelopt_relu2", "0.5.6", "", NEMOTRON + "+silu_modelopt", "", f"{SA}:1203",
         exception=A),
    Case("sglang.nemotron_h.modelopt_relu2", "0.5.11", "", NEMOTRON + "+silu_modelopt", "", f"{SA}:2151",
         exception=A),
    Case("sglang.nemotron_h.modelopt_relu2", "0.5.14", "--quantization modelopt_fp8", NEMOTRON + "+silu", "",
         f"{AG}/nemotron_h_hook.py:24", exception=A),
    Case("sglang.nemotron_h.modelopt_relu2", "0.5.18", "", NEMOTRON + "+silu_modelopt", "",
         f"{AG}/overrides.py:1248", exception=A),
    Case("sglang.nemotron_h.modelopt_relu2", "0.5.23", "", NEMOTRON + "+silu_modelopt", "",
         f"{AG}/model_overrides/nemotron_h.py:44", exception=A),
    Case("sglang.nemotron_h.modelopt_relu2", "0.5.23", "--quantization modelopt_fp8", NEMOTRON),
    Case("sglang.nemotron_h.modelopt_relu2", "0.5.23", "--quantization fp8", NEMOTRON + "+silu"),
    # -- MiniCPM: no attention DP
    Case("sglang.minicpm.dp_attention", "0.5.20", "--enable-dp-attention --dp-size 2", MINICPM,
         "MiniCPM does not support DP attention", f"{AG}/model_overrides/minicpm.py:21"),
    Case("sglang.minicpm.dp_attention", "0.5.23", "--attn-dp-size 2", MINICPM,
         "MiniCPM does not support DP attention", f"{AG}/model_overrides/minicpm.py:18"),
    Case("sglang.minicpm.dp_attention", "0.5.23", "", MINICPM),
    Case("sglang.minicpm.dp_attention", "0.5.18", "--enable-dp-attention --dp-size 2", MINICPM),
    # -- Kimi-K3 with DCP: the decode attention backends its branch takes
    Case("sglang.kimi_k3.dcp_decode_backend", "0.5.17", "--dcp-size 2 --attention-backend fa3", KIMI,
         "Decode attention backend for Kimi-K3 DCP must be 'cutedsl_mla' or 'tokenspeed_mla', got 'fa3'.",
         f"{AG}/overrides.py:425", exception=A),
    Case("sglang.kimi_k3.dcp_decode_backend", "0.5.20", "--dcp-size 2 --decode-attention-backend triton", KIMI,
         "must be 'cutedsl_mla', 'tokenspeed_mla' or 'aiter', got 'triton'.",
         f"{AG}/model_overrides/kimi_k3.py:128", exception=A),
    Case("sglang.kimi_k3.dcp_decode_backend", "0.5.20", "--dcp-size 2 --decode-attention-backend tokenspeed_mla",
         KIMI),
    Case("sglang.kimi_k3.dcp_decode_backend", "0.5.23", "--dcp-size 2 --decode-attention-backend tokenspeed_mla",
         KIMI, "must be 'cutedsl_mla' or 'aiter', got 'tokenspeed_mla'.", f"{AG}/model_overrides/kimi_k3.py:110",
         exception=A),
    Case("sglang.kimi_k3.dcp_decode_backend", "0.5.23", "--dcp-size 2", KIMI),
    Case("sglang.kimi_k3.dcp_decode_backend", "0.5.23", "--decode-attention-backend triton", KIMI),
    # -- context parallelism by model (0.5.20+)
    Case("sglang.cp.model_limits", "0.5.21", "--attn-cp-size 2", NEMOTRON,
         "Nemotron-H does not support --attn-cp-size > 1", f"{AG}/parallel_hook.py:37"),
    Case("sglang.cp.model_limits", "0.5.23", "--attn-cp-size 2", NEMOTRON,
         "Nemotron-H does not support --attn-cp-size > 1", f"{AG}/parallel_hook.py:77"),
    Case("sglang.cp.model_limits", "0.5.23", "--attn-cp-size 2", QWEN),
    Case("sglang.cp.model_limits", "0.5.20", "--enable-prefill-cp --cp-strategy zigzag", V32,
         "DeepSeek V3.2 prefill CP does not support --cp-strategy zigzag; use interleave.",
         f"{AG}/parallel_hook.py:50"),
    Case("sglang.cp.model_limits", "0.5.23", "--enable-prefill-cp --cp-strategy interleave", V32),
    Case("sglang.cp.model_limits", "0.5.23", "--enable-prefill-cp --cp-strategy interleave", MIMO,
         "MiMo V2 prefill CP only supports --cp-strategy zigzag.", f"{AG}/parallel_hook.py:137", tp=4),
    Case("sglang.cp.model_limits", "0.5.23", "--enable-prefill-cp --cp-strategy zigzag --language-only", MIMO, tp=4),
    # -- other areas' rules, in the releases that moved their checks
    Case("sglang.dsa.cache_layer_split", "0.5.19", "--enable-dsa-cache-layer-split --enable-prefill-cp "
         "--cp-strategy interleave", V32, "is not supported with pipeline parallelism (pp_size > 1) yet",
         f"{AG}/model_hook.py:264", pp=2),
    Case("sglang.dsa.cache_layer_split", "0.5.23", "--enable-dsa-cache-layer-split --disaggregation-mode prefill",
         V32, "--enable-dsa-cache-layer-split requires --enable-prefill-cp and --cp-strategy interleave.",
         f"{AG}/model_hook.py:384"),
    Case("sglang.dsa.cache_layer_split", "0.5.23", "--enable-dsa-cache-layer-split --disaggregation-mode prefill "
         "--enable-prefill-cp --cp-strategy interleave", V32),
    Case("sglang.moss_vl.prefill_backend", "0.5.15", "--attention-backend fa3", "arch:MossVLForConditionalGeneration",
         "requires flashinfer prefill attention backend", f"{AG}/overrides.py:643", exception=A),
    Case("sglang.moss_vl.prefill_backend", "0.5.23", "--attention-backend triton",
         "arch:MossVLForConditionalGeneration", "requires flashinfer prefill attention backend",
         f"{AG}/model_overrides/moss_vl.py:27", exception=A),
    Case("sglang.moss_vl.prefill_backend", "0.5.23", "", "arch:MossVLForConditionalGeneration"),
    Case("sglang.prefill_cp.two_spellings", "0.5.19", "--enable-prefill-context-parallel "
         "--enable-nsa-prefill-context-parallel", QWEN, "are mutually exclusive", f"{AG}/parallel_hook.py:72"),
    Case("sglang.prefill_cp.two_spellings", "0.5.19", "--enable-prefill-context-parallel", QWEN),
    Case("sglang.dcp.comm_backend", "0.5.17", "--dcp-replicate-q-proj --dcp-size 2", QWEN,
         "--dcp-replicate-q-proj only applies to the a2a/fi_a2a DCP communication backend (it removes the head-dim Q "
         "all-gather); got --dcp-comm-backend=ag_rs.", f"{SA}:3843"),
    Case("sglang.dcp.comm_backend", "0.5.19", "--dcp-comm-backend a2a", QWEN,
         "--dcp-comm-backend a2a only affects the decode context-parallel attention reduction",
         f"{AG}/parallel_hook.py:137"),
    Case("sglang.dcp.comm_backend", "0.5.19", "--dcp-comm-backend a2a --dcp-size 2 --dcp-replicate-q-proj", QWEN),
]


def _id(c: Case) -> str:
    return f"{c.rule}-{c.version}-{c.model}-{c.words or 'defaults'}-{'refused' if c.refused is not None else 'ok'}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = judge(case.version, case.words, case.model, case.tp, case.pp, case.cc, case.nodes)
    if case.refused is None:
        assert_verdict(judged, case.rule, None, exception=case.exception, version=case.version)
        assert not [n for n in judged.not_judged if case.rule in n], judged.not_judged
        return
    assert_verdict(judged, case.rule, case.refused, exception=case.exception, version=case.version,
                   source=case.source)


def test_every_rule_has_a_refused_and_an_accepted_case_on_two_releases() -> None:
    for rule in rules_model4.RULES:
        refused = {c.version for c in CASES if c.rule == rule and c.refused is not None}
        accepted = [c for c in CASES if c.rule == rule and c.refused is None]
        assert refused and accepted, rule
        assert len(refused | {c.version for c in accepted}) >= 2 or rule in ONE_RELEASE, rule


#: the rules whose entries one listed release holds
ONE_RELEASE = {"sglang.deepseek_v4.flashmla_mega"}


def test_an_unknown_gpu_leaves_flashmla_mega_not_judged() -> None:
    line = resolve(["--model-path", "m", "--dsv4-attn-backend", "flashmla_mega"], Version("0.5.23"))
    judged = config_check(line, model(V41), Layout(8, 1, 1, None, "", None), Version("0.5.23"))
    assert not [r for r in judged.refusals if r.rule == "sglang.deepseek_v4.flashmla_mega"]
    assert any("sglang.deepseek_v4.flashmla_mega" in n for n in judged.not_judged), judged.not_judged


def test_a_non_relu2_nemotron_without_a_quantization_at_hand_is_not_judged() -> None:
    judged = judge("0.5.23", "", NEMOTRON + "+silu")
    assert not [r for r in judged.refusals if r.rule == "sglang.nemotron_h.modelopt_relu2"]
    assert any("ModelOpt" in n for n in judged.not_judged), judged.not_judged


def test_a_dsa_architecture_without_index_topk_in_its_config_leaves_tbo_sharing_not_judged() -> None:
    spec = replace(load_model(QWEN), architectures=("GlmMoeDsaForCausalLM",),
                   config_json=json.dumps({"architectures": ["GlmMoeDsaForCausalLM"], "index_topk_freq": 2}))
    line = resolve(["--model-path", "m", "--enable-two-batch-overlap"], Version("0.5.23"))
    judged = config_check(line, spec, Layout(8, 1, 1, H100, "", None), Version("0.5.23"))
    assert not [r for r in judged.refusals if r.rule == "sglang.dsa.tbo_index_sharing"]
    assert any("two-batch-overlap" in n for n in judged.not_judged), judged.not_judged


def test_a_remote_instance_model_path_skips_the_model_branches() -> None:
    judged = judge("0.5.23", "--enable-encoder-swa-bounded-replay --attn-cp-size 2", NEMOTRON,
                   path="instance://10.0.0.1:30000")
    assert not [r for r in judged.refusals if r.rule in rules_model4.RULES]
