"""SGLang's config-time refusals by release (``engines/sglang/config_checks.py``): ``server_args.py`` and, from
0.5.19, ``arg_groups/``, as each release's source decides them, in its words and at its line. Attention DP
is the case the issue names: ``--tp 8 --dp 8 --enable-dp-attention`` is SGLang's documented DeepSeek layout
(8 GPUs, attention DP inside TP) and is accepted by every release; ``arg_groups/parallel_hook.py`` (0.5.22+)
turns it into ``--attn-dp-size 8``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import pytest
from packaging.version import Version

from pytest_gpulayout.cli import main
from pytest_gpulayout.engines.sglang import rules_cache, rules_model, rules_model2, rules_parallel2, rules_spec
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import RULES, config_check
from pytest_gpulayout.engines.sglang.rules_mamba import RULES as MAMBA_RULES
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Layout

H100 = (9, 0)


def args(**values: object) -> ResolvedArgs:
    return ResolvedArgs("sglang", "", MappingProxyType(dict(values)), frozenset(values))


def on(tp: int = 1, pp: int = 1, dp: int = 1, nodes: int = 1) -> Layout:
    return Layout(tp, pp, dp, H100, "NVIDIA H100 80GB HBM3", 81559, nodes=nodes)


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    line: ResolvedArgs
    layout: Layout
    refused: str | None = None
    exception: str = "AssertionError"
    source: str | None = None


CASES = [
    Case("sglang.dp_attention.dp_size", "0.4.9", args(enable_dp_attention=True), on(tp=8),
         refused="Please set a dp-size > 1. You can use 1 < dp-size <= tp-size "),
    Case("sglang.dp_attention.dp_size", "0.5.2", args(enable_dp_attention=True), on(tp=8)),
    Case("sglang.dp_attention.tp_divisible", "0.5.4", args(enable_dp_attention=True), on(tp=8, dp=3), refused=""),
    Case("sglang.dp_attention.tp_divisible", "0.5.23", args(enable_dp_attention=True), on(tp=8, dp=3), refused=""),
    Case("sglang.dp_attention.tp_divisible", "0.4.6", args(enable_dp_attention=True), on(tp=8, dp=8)),
    Case("sglang.dp_attention.tp_divisible", "0.5.21", args(enable_dp_attention=True), on(tp=8, dp=8)),
    Case("sglang.dp_attention.tp_divisible", "0.5.23", args(enable_dp_attention=True), on(tp=8, dp=8)),
    Case("sglang.attn_dp.size", "0.5.23", args(attn_dp_size=2), on(tp=8, dp=2), exception="ValueError",
         refused="--dp-size 2 with --attn-dp-size 2: data-parallel replicas combined with attention data "
                 "parallelism are not supported.", source="sglang/srt/arg_groups/parallel_hook.py:288"),
    Case("sglang.attn_dp.size", "0.5.23", args(enable_dp_attention=True), on(tp=8, dp=2)),   # moved to attn DP
    Case("sglang.attn_dp.size", "0.5.23", args(attn_dp_size=0), on(tp=8), exception="ValueError",
         refused="--attn-dp-size must be positive (got 0)."),
    Case("sglang.nodes.tp_divisible", "0.5.23", args(), on(tp=8, nodes=3),
         refused="tp_size must be divisible by number of nodes"),
    Case("sglang.nodes.tp_divisible", "0.4.6", args(), on(tp=8, nodes=3),
         refused="tp_size must be divisible by number of nodes"),
    Case("sglang.nodes.tp_divisible", "0.5.23", args(), on(tp=8, nodes=2)),
    Case("sglang.nodes.dp_replicas", "0.5.21", args(), on(tp=8, dp=2, nodes=2),
         refused="multi-node data parallel is not supported unless dp attention!"),
    Case("sglang.nodes.dp_replicas", "0.5.21", args(enable_dp_attention=True), on(tp=16, dp=2, nodes=2)),
    Case("sglang.nodes.dp_replicas", "0.5.23", args(), on(tp=8, dp=2, nodes=2),
         refused="multi-node data-parallel replicas are not supported; use attention DP (--attn-dp-size) across "
                 "nodes"),
    Case("sglang.nodes.dp_replicas", "0.5.23", args(enable_dp_attention=True), on(tp=16, dp=2, nodes=2)),
    Case("sglang.dp_lm_head.needs_dp_attention", "0.5.10", args(enable_dp_lm_head=True), on(tp=8),
         refused="Please enable dp attention when setting enable_dp_lm_head. "),
    Case("sglang.dp_lm_head.needs_dp_attention", "0.5.10", args(enable_dp_lm_head=True, enable_dp_attention=True),
         on(tp=8, dp=8)),
    Case("sglang.dp_lm_head.needs_dp_attention", "0.5.23", args(enable_dp_lm_head=True), on(tp=8),
         refused="--enable-dp-lm-head requires attention DP (--attn-dp-size)."),
    Case("sglang.moe_dense_tp_size", "0.5.23", args(moe_dense_tp_size=2), on(tp=8),
         refused="moe_dense_tp_size only supports None, 1, or tp_size currently"),
    Case("sglang.moe_dense_tp_size", "0.5.23", args(moe_dense_tp_size=8), on(tp=8)),
    Case("sglang.moe_dense_tp_size", "0.4.9", args(moe_dense_tp_size=8), on(tp=8),     # 1 or None only then
         refused="moe_dense_tp_size only support 1 and None currently"),
    Case("sglang.gpu_ids", "0.5.23", args(base_gpu_id=-1), on(tp=2), refused="base_gpu_id must be non-negative"),
    Case("sglang.gpu_ids", "0.4.6", args(gpu_id_step=0), on(tp=2), refused="gpu_id_step must be positive"),
    Case("sglang.attn_cp.tp_divisible", "0.5.23", args(attn_cp_size=3), on(tp=8),
         refused="tp_size must be divisible by attn_dp_size * attn_cp_size"),
    Case("sglang.attn_cp.tp_divisible", "0.5.12", args(attn_cp_size=3), on(tp=8),
         refused="tp_size must be divisible by dp_size * attn_cp_size"),
    Case("sglang.attn_cp.tp_divisible", "0.5.23", args(attn_cp_size=2), on(tp=8)),
    Case("sglang.dcp.size", "0.5.23", args(dcp_size=2, enable_prefill_cp=True), on(tp=8), exception="ValueError",
         refused="--dcp-size > 1 does not support --enable-prefill-cp."),
    Case("sglang.dcp.size", "0.5.16", args(dcp_size=0), on(tp=8), exception="ValueError",
         refused="Decode context parallel size (--dcp-size / --decode-context-parallel-size) must be >= 1, but got "
                 "dcp_size=0."),
    Case("sglang.eplb.needs_ep", "0.5.23", args(enable_eplb=True), on(tp=8), refused=""),
    Case("sglang.eplb.needs_ep", "0.5.23", args(enable_eplb=True, ep_size=8), on(tp=8)),
    Case("sglang.eplb.needs_ep", "0.5.2", args(enable_eplb=True), on(tp=8), refused=""),
    Case("sglang.eplb.needs_ep", "0.4.10", args(enable_eplb=True, enable_ep_moe=True), on(tp=8)),
]


def _id(c: Case) -> str:
    return f"{c.rule.removeprefix('sglang.')}-{c.version}-{'refused' if c.refused is not None else 'passes'}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_each_release_refuses_in_its_own_words(case: Case) -> None:
    judged = config_check(case.line, load_model("deepseek-ai/DeepSeek-V3"), case.layout, Version(case.version))
    mine = [r for r in judged.refusals if r.rule == case.rule]
    if case.refused is None:
        assert not mine, [r.text("SGLang") for r in mine]
        return
    assert mine, (judged.refusals, judged.not_judged)
    r = mine[0]
    assert case.refused in r.message if case.refused else r.message == ""
    assert (r.exception, r.release) == (case.exception, case.version)
    if case.source:
        assert r.source == case.source


def test_every_rule_has_a_refusing_case() -> None:
    by_words = {"sglang.llama4.attention_backend", "sglang.olmo2.flashinfer", "sglang.priority_scheduling",
                "sglang.worker_counts", "sglang.npu_only_flags", "sglang.pdmux"}   # LINE_CASES, the Olmo test
    # tests/engines/test_sglang_config_checks_parallel2.py, _model.py, _spec.py, _cache.py, _model2.py
    elsewhere = set(rules_parallel2.RULES) | set(rules_model.RULES) | set(rules_spec.RULES) | set(rules_cache.RULES)
    elsewhere |= set(rules_model2.RULES)
    elsewhere |= set(MAMBA_RULES)   # tests/engines/test_sglang_config_checks_mamba.py
    assert {c.rule for c in CASES if c.refused is not None} | by_words == set(RULES) - elsewhere


def test_an_assert_without_words_shows_its_condition() -> None:
    """SGLang asserts ``tp_size % dp_size == 0`` without a message: the refusal says what it asserts."""
    judged = config_check(args(enable_dp_attention=True), load_model("deepseek-ai/DeepSeek-V3"), on(tp=8, dp=3),
                          Version("0.5.4"))
    (r,) = judged.refusals
    assert r.text("SGLang") == ("SGLang 0.5.4 raises AssertionError with no message (sglang/srt/server_args.py:"
                                f"{r.source.rsplit(':', 1)[1]}: self.tp_size % self.dp_size == 0)")


def test_the_documented_deepseek_layout_passes_every_listed_release() -> None:
    """``--tp 8 --dp 8 --enable-dp-attention``: refused by no release's config checks."""
    model = load_model("deepseek-ai/DeepSeek-V3")
    for version in ("0.4.6", "0.4.10", "0.5.4", "0.5.18", "0.5.21", "0.5.22", "0.5.23"):
        judged = config_check(args(enable_dp_attention=True), model, on(tp=8, dp=8), Version(version))
        assert not judged.refusals, (version, judged.refusals)


@pytest.mark.parametrize("version", ["0.4.6", "0.4.10", "0.5.4", "0.5.18", "0.5.23"])
def test_the_release_defaults_refuse_nothing_and_leave_nothing_unsaid(version: str) -> None:
    line = resolve(["--model-path", "m"], Version(version))
    judged = config_check(line, load_model("deepseek-ai/DeepSeek-V3"), on(tp=8), Version(version))
    assert (judged.refusals, judged.not_judged) == ((), ())


# -- rules over the release's parsed line (its defaults included) and the model's architecture ----------------

MODELS = Path(__file__).resolve().parent.parent / "data" / "models"
LLAMA4 = MODELS / "llama-4-scout-17b-16e-instruct"       # Llama4ForConditionalGeneration


def _olmo2(tmp: Path) -> Path:
    folder = tmp / "olmo-2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["Olmo2ForCausalLM"], "model_type": "olmo2", "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 32, "num_hidden_layers": 32, "intermediate_size": 11008, "vocab_size": 100352,
        "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}))
    return folder


def _judge(version: str, words: str, model: Path | str = "deepseek-ai/DeepSeek-V3", layout: Layout | None = None
           ) -> list[str]:
    line = resolve(["--model-path", "m", *words.split()], Version(version))
    assert line.ok, line.errors
    judged = config_check(line, load_model(str(model)), layout or on(tp=8), Version(version))
    return [r.text("SGLang") for r in judged.refusals]


LINE_CASES = [
    # (release, the line, the model, the layout, the refusal's words or None where the release accepts it)
    ("0.5.4", "--attention-backend flashinfer", LLAMA4, on(tp=8),
     'raises AssertionError: "fa3, aiter, or triton is required for Llama4 model" (sglang/srt/server_args.py:965)'),
    ("0.5.4", "", LLAMA4, on(tp=8), '"fa3, aiter, or triton is required for Llama4 model"'),   # nothing picks one
    ("0.5.4", "--attention-backend fa3", LLAMA4, on(tp=8), None),
    ("0.5.5", "", LLAMA4, on(tp=8), None),                              # the branch picks one it lists
    ("0.4.10", "--attention-backend flashinfer", LLAMA4, on(tp=8), '"fa3 is required for Llama4 model"'),
    ("0.5.23", "--attention-backend flashinfer", LLAMA4, on(tp=8),
     '"fa3, aiter, triton, ascend, trtllm_mha or intel_xpu is required for Llama4 model but got flashinfer" '
     "(sglang/srt/arg_groups/model_hook.py:622)"),
    ("0.5.23", "--attention-backend trtllm_mha", LLAMA4, on(tp=8), None),
    ("0.5.23", "--attention-backend flashinfer", "Qwen/Qwen3-8B", on(tp=8), None),
    ("0.5.23", "--enable-priority-scheduling --schedule-policy lpm", "Qwen/Qwen3-8B", on(tp=1),
     "\"To use priority scheduling, schedule_policy must be 'fcfs' or 'lof'. 'lpm' is not supported.\""),
    ("0.5.23", "--enable-priority-scheduling --schedule-policy lof", "Qwen/Qwen3-8B", on(tp=1), None),
    ("0.5.23", "--retraction-policy priority", "Qwen/Qwen3-8B", on(tp=1),
     'raises ValueError: "--retraction-policy priority requires --enable-priority-scheduling"'),
    ("0.5.23", "--retraction-policy priority --enable-priority-scheduling", "Qwen/Qwen3-8B", on(tp=1), None),
    ("0.5.23", "--tokenizer-worker-num 0", "Qwen/Qwen3-8B", on(tp=1), '"Tokenizer worker num must >= 1"'),
    ("0.5.10", "--tokenizer-worker-num 0", "Qwen/Qwen3-8B", on(tp=1), '"Tokenizer worker num must >= 1"'),
    ("0.5.23", "--tokenizer-worker-num 4", "Qwen/Qwen3-8B", on(tp=1), None),
    ("0.5.23", "--model-impl mindspore", "Qwen/Qwen3-8B", on(tp=1),
     '"MindSpore model impl is only supported on Ascend npu."'),
    ("0.5.23", "--enable-quant-communications", "Qwen/Qwen3-8B", on(tp=2),
     'raises ValueError: "Communications quantization is only supported for NPU device"'),
    ("0.5.23", "--enable-pdmux", "Qwen/Qwen3-8B", on(tp=2, pp=2),
     '"PD-Multiplexing is only supported with pipeline parallelism disabled (pp_size=1)."'),
    ("0.5.23", "--enable-pdmux --disaggregation-mode prefill", "Qwen/Qwen3-8B", on(tp=2),
     '"PD-Multiplexing is not compatible with disaggregation mode."'),
]


@pytest.mark.parametrize("case", LINE_CASES, ids=[f"{c[0]}-{c[1] or 'defaults'}-{Path(str(c[2])).name}"
                                                  for c in LINE_CASES])
def test_the_release_refuses_the_line_in_its_words(case: tuple[str, str, Path | str, Layout, str | None]) -> None:
    version, words, model, layout, refused = case
    said = _judge(version, words, model, layout)
    if refused is None:
        assert said == []
    else:
        assert len(said) == 1 and refused in said[0], said
        assert said[0].startswith(f"SGLang {version} raises "), said


def test_olmo2_refuses_flashinfer(tmp_path: Path) -> None:
    """Olmo2ForCausalLM serves OLMo 3 too; SGLang asserts its backend is not FlashInfer (0.5.4+)."""
    olmo = _olmo2(tmp_path)
    (said,) = _judge("0.5.23", "--attention-backend flashinfer", olmo, on(tp=1))
    assert '"FlashInfer backend can significantly degrade the performance of Olmo3 models."' in said
    assert _judge("0.5.23", "--attention-backend triton", olmo, on(tp=1)) == []
    assert _judge("0.5.23", "", olmo, on(tp=1)) == []


def test_gpulayout_check_fails_llama4_on_flashinfer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Through the front door, in the release's words; the accepted neighbour (fa3) passes the config check."""
    def check(backend: str) -> dict[str, object]:
        cmd = (f"python -m sglang.launch_server --model-path {LLAMA4} --tp 8 --attention-backend {backend}")
        main(["check", "--cmd", cmd, "--machine", "preset:8xH100-sxm", "--json"])
        data = json.loads(capsys.readouterr().out)
        (dep,) = data["deployments"].values()
        return dict(dep["checks"]["config"])
    refused = check("flashinfer")
    assert refused["status"] == "fail"
    assert "required for Llama4 model but got flashinfer" in str(refused["message"])
    assert check("fa3")["status"] == "pass"


@pytest.mark.parametrize("version", ["0.4.6", "0.5.4", "0.5.10", "0.5.23"])
def test_the_release_parse_of_a_bare_line_refuses_nothing_and_leaves_nothing_unsaid(version: str) -> None:
    line = resolve(["--model-path", "m"], Version(version))
    for model in ("deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-8B", str(LLAMA4)):
        judged = config_check(line, load_model(model), on(tp=8), Version(version))
        if version == "0.5.4" and model == str(LLAMA4):
            assert [r.rule for r in judged.refusals] == ["sglang.llama4.attention_backend"]
            continue
        assert (judged.refusals, judged.not_judged) == ((), ()), (model, judged)
