"""What the release refuses on a GPU generation or cannot build at all (issue 19 items 1-2), each a ``heads``
fail in the engine's own words, from the facts extracted from its wheel (``engines/*/releases/*.json``):

- vLLM ``config/vllm.py`` ``_get_quantization_config``: a quantization method below its minimum capability;
- vLLM ``platforms/cuda.py`` ``check_if_supports_dtype``: ``--dtype bfloat16`` below 8.0 (``--dtype auto`` falls
  back to float16 from 0.9.0, a warn; float32 for the model types that refuse float16: ``tests/engines/
  test_vllm_dtype.py``);
- vLLM ``platforms/cuda.py`` ``get_attn_backend_cls``: DeepSeek-V3.2's sparse MLA backends
  (``v1/attention/backends/mla/*sparse*.py``) none below SM 9.0;
- vLLM ``model_executor/models/registry.py`` ``_raise_for_unsupported`` and ``_PREVIOUSLY_SUPPORTED_MODELS``;
  ``_TRANSFORMERS_SUPPORTED_MODELS`` only through the Transformers backend (a warn);
- SGLang ``model_loader/loader.py`` (the same gate), ``models/registry.py`` (Transformers fallback),
  ``layers/attention/attention_registry.py`` (FA3 asserts SM 8.x / 9.0).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from builders import dep, llama, subject
from packaging.version import Version

from pytest_gpulayout.deployment import Launch
from pytest_gpulayout.findings import Status
from pytest_gpulayout.generation import release_facts
from pytest_gpulayout.machine.capability import capability_from_name
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.machine.presets import load_preset
from pytest_gpulayout.machine.snapshot import load_snapshot
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.rules.heads import check_heads

MODELS = Path(__file__).parents[1] / "data" / "models"


def fp8_qwen():
    return load_model(str(MODELS / "qwen3-8b-fp8"))


def box(name: str, n: int = 8, total: int = 81559, cc: tuple[int, int] | None = None) -> Machine:
    """``n`` GPUs named ``name`` on NVLink; the capability from the name unless ``cc`` is given."""
    gpus = tuple(Gpu(index=i, uuid=f"GPU-{i:08x}", name=name, memory_total_mib=total, memory_free_mib=total - 600,
                     compute_capability=cc or capability_from_name(name)) for i in range(n))
    return Machine(gpus=gpus, links={(i, j): "NV12" for i in range(n) for j in range(i + 1, n)}, source="test")


def t4_snapshot(tmp_path: Path, n: int = 8) -> Machine:
    lines = ["version: 1", "gpus:"]
    for i in range(n):
        lines += [f"  - {{index: {i}, name: Tesla T4, compute_capability: \"7.5\", memory_total_mib: 15360, "
                  f"memory_free_mib: 14900}}"]
    lines += ["links:"] + [f"  \"{i}-{j}\": PHB" for i in range(n) for j in range(i + 1, n)]
    p = tmp_path / "t4.yaml"
    p.write_text("\n".join(lines))
    return load_snapshot(p)


def heads(d, m, model):
    return check_heads(subject(d, m, model))


# -- the quantization method's minimum capability -------------------------------------------------------

def test_gpt_oss_on_a_t4_is_refused_with_vllms_gate_text(tmp_path):
    f = heads(dep("oss", tp=8, engine_version="0.33.0"), t4_snapshot(tmp_path), load_model("openai/gpt-oss-120b"))
    assert f.status is Status.FAIL
    assert ("The quantization method mxfp4 is not supported for the current GPU. Minimum capability: 80. "
            "Current capability: 75.") in f.message
    assert "vllm/config/vllm.py" in f.message


def test_gpt_oss_on_a_t4_is_refused_by_sglang_too(tmp_path):
    f = heads(dep("oss", tp=8, engine="sglang", engine_version="0.5.23"), t4_snapshot(tmp_path),
              load_model("openai/gpt-oss-120b"))
    assert f.status is Status.FAIL
    assert "Minimum capability: 80. Current capability: 75." in f.message
    assert "sglang/srt/model_loader/loader.py" in f.message


def test_fp8_weight_only_on_ampere_starts():
    # vLLM 0.33 Fp8Config.get_min_capability is 75: Ampere runs FP8 weights through Marlin / Humming
    f = heads(dep("q", tp=1, engine_version="0.33.0"), load_preset("4xA100-80gb-sxm"),
              load_model(str(MODELS / "qwen3-8b-fp8")))
    assert f.status is Status.PASS, f.message


def test_fp8_on_a_t4_was_refused_by_older_releases(tmp_path):
    # vLLM 0.10.1's Fp8Config.get_min_capability was 80 (vllm/config/__init__.py gate)
    f = heads(dep("q", tp=1, engine_version="0.10.1"), t4_snapshot(tmp_path, 1), fp8_qwen())
    assert f.status is Status.FAIL
    assert "The quantization method fp8 is not supported for the current GPU. Minimum capability: 80." in f.message


def test_a_release_between_two_extracted_ones_says_which_facts_answer(tmp_path):
    f = heads(dep("q", tp=1, engine_version="0.10.2"), t4_snapshot(tmp_path, 1), fp8_qwen())
    assert f.status is Status.FAIL
    assert "facts of 0.10.1, the nearest extracted release below it" in f.message


def test_a_release_older_than_every_extraction_is_not_guessed(tmp_path):
    f = heads(dep("q", tp=1, engine_version="0.9.0"), t4_snapshot(tmp_path, 1), fp8_qwen())
    # the dtype facts reach further back (0.8.0): 0.9.0 falls back to float16 on a T4 and says so
    assert f.status is Status.WARN and "falls back to float16" in f.message
    assert "not checked: no facts were extracted for it (the oldest extracted is 0.10.1)" in f.message
    assert release_facts("vllm", Version("0.9.0")) is None


def test_an_unknown_capability_is_said_not_assumed():
    m = box("NVIDIA Mystery 9000", 8)
    f = heads(dep("oss", tp=8, engine_version="0.33.0"), m, load_model("openai/gpt-oss-120b"))
    assert f.status is Status.PASS
    assert "capability is unknown, so not checked" in f.message


# -- sparse MLA (DeepSeek-V3.2) ---------------------------------------------------------------------------

def test_deepseek_v32_on_a100_is_refused_no_valid_attention_backend():
    model = load_model(str(MODELS / "deepseek-v3.2"))
    f = heads(dep("ds", tp=8, engine_version="0.33.0"), box("NVIDIA A100-SXM4-80GB"), model)
    assert f.status is Status.FAIL
    assert "No valid attention backend found for cuda with" in f.message
    assert "FLASHMLA_SPARSE" in f.message and "vllm/platforms/cuda.py" in f.message


def test_deepseek_v32_on_h100_starts():
    model = load_model(str(MODELS / "deepseek-v3.2"))
    f = heads(dep("ds", tp=8, engine_version="0.33.0"), load_preset("8xH100-sxm"), model)
    assert f.status is Status.PASS, f.message


# -- bf16 -------------------------------------------------------------------------------------------------

def test_bf16_forced_on_a_v100_is_refused():
    dgx1 = load_snapshot(Path(__file__).parents[1] / "data" / "snapshots" / "dgx1-v100.yaml")
    d = dep("l", tp=1, engine_version="0.33.0", launch=Launch(args=("--dtype", "bfloat16")))
    f = heads(d, dgx1, llama())
    assert f.status is Status.FAIL
    assert "Bfloat16 is only supported on GPUs with compute capability of at least 8.0." in f.message
    assert "vllm/platforms/cuda.py" in f.message


def test_bf16_model_on_a_v100_falls_back_to_float16_and_warns_unless_half_is_given():
    dgx1 = load_snapshot(Path(__file__).parents[1] / "data" / "snapshots" / "dgx1-v100.yaml")
    f = heads(dep("l", tp=1, engine_version="0.33.0"), dgx1, llama())
    assert f.status is Status.WARN
    assert "Falling back to torch.float16" in f.message and "_resolve_auto_dtype" in f.message
    half = dep("l", tp=1, engine_version="0.33.0", launch=Launch(args=("--dtype=half",)))
    assert heads(half, dgx1, llama()).status is Status.PASS


# -- architectures by release -----------------------------------------------------------------------------

def test_an_unknown_architecture_is_refused_with_vllms_text():
    f = heads(dep("x", tp=1, engine_version="0.33.0"), box("NVIDIA H100 80GB HBM3", 1),
              llama(architectures=("FooBarForCausalLM",)))
    assert f.status is Status.FAIL
    assert ("Model architectures ['FooBarForCausalLM'] are not supported for now. "
            "Supported architectures: [") in f.message
    assert "more]" in f.message and "vllm/model_executor/models/registry.py" in f.message


def test_a_previously_supported_architecture_is_refused_with_its_text():
    f = heads(dep("x", tp=1, engine_version="0.33.0"), box("NVIDIA H100 80GB HBM3", 1),
              llama(architectures=("ArcticForCausalLM",)))
    assert f.status is Status.FAIL
    assert ("Model architecture ArcticForCausalLM was supported in vLLM until v0.28.0, and is not supported "
            "anymore.") in f.message
    # the release that still had it builds it
    ok = heads(dep("x", tp=1, engine_version="0.20.0"), box("NVIDIA H100 80GB HBM3", 1),
               llama(architectures=("ArcticForCausalLM",)))
    assert ok.status is Status.PASS, ok.message


def test_an_architecture_only_the_transformers_backend_builds_warns():
    f = heads(dep("x", tp=1, engine_version="0.33.0"), box("NVIDIA H100 80GB HBM3", 1),
              llama(architectures=("Olmo2ForCausalLM",)))
    assert f.status is Status.WARN
    assert "_TRANSFORMERS_SUPPORTED_MODELS" in f.message and "Transformers backend" in f.message


def test_sglang_falls_back_to_transformers_for_an_architecture_it_lacks():
    f = heads(dep("x", tp=1, engine="sglang", engine_version="0.5.23"), box("NVIDIA H100 80GB HBM3", 1),
              llama(architectures=("FooBarForCausalLM",)))
    assert f.status is Status.WARN
    assert "TransformersForCausalLM" in f.message and "sglang/srt/models/registry.py" in f.message


# -- forced attention backends ------------------------------------------------------------------------------

def test_sglang_fa3_forced_on_blackwell_is_refused():
    d = dep("x", tp=1, engine="sglang", engine_version="0.5.23", launch=Launch(args=("--attention-backend", "fa3")))
    f = heads(d, box("NVIDIA B200", 1, total=183359), llama(architectures=("LlamaForCausalLM",)))
    assert f.status is Status.FAIL
    assert "FlashAttention v3 Backend requires SM>=80 and SM<=90." in f.message
    ok = heads(d, box("NVIDIA H100 80GB HBM3", 1), llama(architectures=("LlamaForCausalLM",)))
    assert ok.status is Status.PASS, ok.message


def test_vllm_flashmla_forced_on_ampere_is_refused():
    d = dep("x", tp=8, engine_version="0.33.0", launch=Launch(args=("--attention-backend", "FLASHMLA")))
    ds = load_model("deepseek-ai/DeepSeek-V3")
    f = heads(d, box("NVIDIA A100-SXM4-80GB"), replace(ds, quantization=None))
    assert f.status is Status.FAIL
    assert "Selected backend AttentionBackendEnum.FLASHMLA is not valid" in f.message


@pytest.mark.parametrize("preset", ["8xH100-sxm", "8xH200", "4xA100-80gb-sxm", "8xL40S-2socket", "2xL4-pcie"])
def test_catalog_models_the_engines_start_still_pass(preset):
    m = load_preset(preset)
    for ref in ("Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "openai/gpt-oss-20b"):
        f = heads(dep("x", tp=1, engine_version="0.33.0"), m, load_model(ref))
        assert f.status is Status.PASS, f.message
