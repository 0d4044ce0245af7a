"""The KV cache dtype an engine picks for a sparse-MLA (DSA) model: SGLang on SM 10.x+ serves DeepSeek-V3.2 in fp8
(``engines/sglang/served.py``), so a B200 holds 1.63x the tokens bfloat16 would give; vLLM does so for GLM-5 (0.32+)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from builders import dep, machine, subject
from packaging.version import Version

from pytest_gpulayout.deployment import Launch
from pytest_gpulayout.engines.sglang.served import dsa_kv_cache_dtype
from pytest_gpulayout.machine.facts import Machine
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Layout
from pytest_gpulayout.rules.kv_pool import check_kv_pool

V32 = "deepseek-ai/DeepSeek-V3.2"


def _gpus(name: str, total: int, cc: tuple[int, int]) -> Machine:
    m = machine(8, name=name, total=total, free=total - 1500, link="NV18")
    return dataclasses.replace(m, gpus=tuple(dataclasses.replace(g, compute_capability=cc) for g in m.gpus))


def _b200() -> Machine:
    return _gpus("NVIDIA B200", 183359, (10, 0))


def _h200() -> Machine:
    return _gpus("NVIDIA H200", 143771, (9, 0))


def _subject(version: str, m: Machine, *, kv: str = "auto", args: tuple[str, ...] = ()) -> object:
    d = dep(engine="sglang", tp=8, engine_version=version, max_model_len=32768, kv_cache_dtype=kv,
            launch=Launch(args=args))
    return subject(d, m, load_model(V32))  # type: ignore[arg-type]


def _tokens(s: object) -> int:
    facts = check_kv_pool(s).facts  # type: ignore[arg-type]
    assert facts.predicted_kv_tokens is not None  # type: ignore[union-attr]
    return int(facts.predicted_kv_tokens)  # type: ignore[union-attr]


def test_a_b200_serves_deepseek_v32_with_an_fp8_cache_where_the_line_says_auto() -> None:
    auto = _subject("0.5.23", _b200())
    assert auto.model.served_kv_cache_dtype == "fp8_e4m3"  # type: ignore[attr-defined]
    given = _subject("0.5.23", _b200(), kv="fp8_e4m3")
    assert given.model.served_kv_cache_dtype == ""  # type: ignore[attr-defined]
    # the pool is the one an explicit fp8_e4m3 gets, not the bfloat16 one
    assert _tokens(auto) == _tokens(given)
    bf16 = _subject("0.5.23", _b200(), kv="bfloat16")
    assert _tokens(auto) / _tokens(bf16) == pytest.approx((1152 + 132) / (656 + 132), rel=0.01)
    finding = check_kv_pool(auto)  # type: ignore[arg-type]
    assert "KV cache in fp8_e4m3: SGLang 0.5.23 picks it for DeepSeek DSA" in finding.message


def test_hopper_keeps_bfloat16_and_a_given_dtype_is_kept_from_0_5_4_post2() -> None:
    assert _subject("0.5.23", _h200()).model.served_kv_cache_dtype == ""  # type: ignore[attr-defined]
    kept = _subject("0.5.4.post2", _b200(), kv="bfloat16")
    assert kept.model.served_kv_cache_dtype == ""  # type: ignore[attr-defined]


def test_0_5_3_turns_any_dtype_into_fp8_on_sm100() -> None:
    # 0.5.3 server_args.py:826-832: ``if major >= 10: self.kv_cache_dtype = "fp8_e4m3"``, whatever the line says
    # (its parser's choices are auto, fp8_e5m2 and fp8_e4m3)
    forced = _subject("0.5.3", _b200(), kv="fp8_e5m2")
    assert forced.args.ok  # type: ignore[attr-defined]
    assert forced.model.served_kv_cache_dtype == "fp8_e4m3"  # type: ignore[attr-defined]
    assert _tokens(forced) == _tokens(_subject("0.5.3", _b200(), kv="fp8_e4m3"))
    assert _subject("0.5.3", _b200()).model.served_kv_cache_dtype == "fp8_e4m3"  # type: ignore[attr-defined]
    assert _subject("0.5.3", _h200(), kv="fp8_e5m2").model.served_kv_cache_dtype == ""  # type: ignore[attr-defined]


def test_learnable_sinks_keep_bfloat16_from_0_5_20_and_other_models_are_untouched() -> None:
    b200 = Layout(8, 1, 1, (10, 0), "NVIDIA B200", 183359)
    v32 = load_model(V32)
    sinks = dataclasses.replace(v32, config_json=json.dumps({**json.loads(v32.config_json), "learnable_sink": True}))
    assert dsa_kv_cache_dtype(sinks, "auto", b200, Version("0.5.20")) is None
    picked = dsa_kv_cache_dtype(sinks, "auto", b200, Version("0.5.19"))
    assert picked is not None and picked[0] == "fp8_e4m3"
    v3 = load_model("deepseek-ai/DeepSeek-V3")  # no indexer: not DSA
    assert dsa_kv_cache_dtype(v3, "auto", b200, Version("0.5.23")) is None
    # before the DSA hook (0.5.3) the release serves the line's dtype
    assert dsa_kv_cache_dtype(v32, "auto", b200, Version("0.5.2")) is None


def test_vllm_serves_glm5_with_an_fp8_cache_on_sm100_where_the_line_says_auto() -> None:
    # vllm 0.32.0 model_executor/models/config.py:44-55 GlmMoeDsaForCausalLM.verify_and_update_config: auto and
    # is_device_capability_family(100) -> fp8_e4m3; a DSA-shaped config under GLM-5's architecture
    glm5 = dataclasses.replace(load_model(V32), architectures=("GlmMoeDsaForCausalLM",))

    def served(version: str, m: Machine, kv: str = "auto") -> str:
        d = dep(engine="vllm", tp=8, engine_version=version, max_model_len=32768, kv_cache_dtype=kv)
        return subject(d, m, glm5).model.served_kv_cache_dtype

    assert served("0.32.0", _b200()) == "fp8_e4m3"
    assert served("0.33.0", _b200(), kv="bfloat16") == ""
    assert served("0.33.0", _h200()) == ""
    assert served("0.31.0", _b200()) == ""
    # DeepSeek-V3.2 itself keeps the line's dtype in vLLM (its hook only maps bfloat16 to auto)
    d = dep(engine="vllm", tp=8, engine_version="0.33.0", max_model_len=32768)
    assert subject(d, _b200(), load_model(V32)).model.served_kv_cache_dtype == ""


def test_sglang_0_5_3_to_0_5_5_serve_deepseek_v32_with_attention_dp_on_every_rank() -> None:
    # 0.5.5 server_args.py:1070-1073: enable_dp_attention = True, dp_size = tp_size for DeepSeek NSA (0.5.6 keeps the
    # line's --dp-size): one replica of 8 GPUs, each rank its own attention-DP group, the attention weights replicated
    forced = _subject("0.5.5", _h200())
    assert (forced.dep.data_parallel_size, forced.dep.attention_data_parallel_size) == (1, 8)  # type: ignore[attr-defined]
    kept = _subject("0.5.6", _h200())
    assert (kept.dep.data_parallel_size, kept.dep.attention_data_parallel_size) == (1, 1)  # type: ignore[attr-defined]
    more = check_kv_pool(forced).facts.weights_gib_per_rank  # type: ignore[arg-type, union-attr]
    less = check_kv_pool(kept).facts.weights_gib_per_rank  # type: ignore[arg-type, union-attr]
    assert more > less + 5  # V3.2's attention (about 11B parameters in fp8) on every rank, not an eighth of it
    assert "turns attention DP on for DeepSeek DSA" in check_kv_pool(forced).message  # type: ignore[arg-type]
    # the line's own --dp-size is overwritten: still one replica of the TP group's 8 GPUs
    two = _subject("0.5.4", _h200(), args=("--dp-size", "2"))
    assert (two.dep.data_parallel_size, two.dep.attention_data_parallel_size) == (1, 8)  # type: ignore[attr-defined]
    # 0.5.3 also sets mem_fraction_static 0.8
    assert _subject("0.5.3", _h200()).dep.memory_fraction == 0.8  # type: ignore[attr-defined]
    assert _subject("0.5.3.post1", _h200()).dep.memory_fraction is None  # type: ignore[attr-defined]
