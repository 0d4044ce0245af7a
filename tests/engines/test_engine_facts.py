"""The per-release engine facts shipped under ``pytest_gpulayout/engines/*/releases/*.json``, written by
``tools/engine_facts.py`` from the released wheels.

Offline tests check the shipped files' shape, their stable (reviewable) serialization and a few facts read from
the wheels by hand. Network tests re-extract the facts from a freshly downloaded wheel and compare:

* the SGLang 0.5.23 wheel (~40 MB) runs whenever PyPI answers, and is skipped when it does not;
* the vLLM 0.33.0 wheel (~340 MB) is opt-in: set ``GPULAYOUT_NETWORK_TESTS=1``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import zipfile
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
RELEASES = {engine: REPO / "pytest_gpulayout" / "engines" / engine / "releases" for engine in ("vllm", "sglang")}
TOOL = REPO / "tools" / "engine_facts.py"
SHIPPED = sorted(path for folder in RELEASES.values() for path in folder.glob("*.json"))
FULL_GROUPS = {
    "vllm": {
        "architectures",
        "previously_supported",
        "transformers_fallback",
        "quantization",
        "kernel_min_capabilities",
        "attention_backends",
        "capability_refusals",
        "dtype",
        "interfaces",
    },
    "sglang": {
        "architectures",
        "quantization",
        "kernel_min_capabilities",
        "attention_backends",
        "platform_probes",
        "capability_refusals",
        "prefill_graphs",
    },
}
BASIC_GROUPS = {"vllm": {"architectures", "previously_supported", "transformers_fallback", "quantization", "dtype",
                         "interfaces"}}
#: releases between full extractions carry the model-type and interface facts only (``--only model``)
MODEL_GROUPS = {"vllm": {"dtype", "interfaces"}}


@cache
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engine_facts", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def facts(engine: str, version: str) -> dict[str, Any]:
    return json.loads((RELEASES[engine] / f"{version}.json").read_text(encoding="utf-8"))


def test_releases_are_shipped() -> None:
    names = {(p.parent.parent.name, p.stem) for p in SHIPPED}
    assert {("vllm", "0.33.0"), ("vllm", "0.32.0"), ("sglang", "0.5.23")} <= names
    for folder in RELEASES.values():
        assert not (folder / "__init__.py").exists()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.parent.name}-{p.stem}")
def test_shipped_file_shape(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    engine = path.parent.parent.name
    assert data["engine"] == engine
    assert data["version"] == path.stem
    assert data["extracted_by"] == "tools/engine_facts.py"
    assert data["wheel"]["filename"].startswith(f"{engine}-{path.stem}-") and data["wheel"]["filename"].endswith(".whl")
    # a wheel file's digest, or (read from the folder it was unpacked into) a digest of its Python sources
    assert re.fullmatch(r"[0-9a-f]{64}", data["wheel"].get("sha256") or data["wheel"]["sources_sha256"])
    groups = set(data["groups"])
    assert groups in (FULL_GROUPS[engine], BASIC_GROUPS.get(engine), MODEL_GROUPS.get(engine)), groups
    assert groups <= set(data)
    assert len(text) < 300 * 1024
    # the file is exactly what the tool writes: sorted keys, so a re-run is a reviewable diff
    assert tool().dump(data) == text
    if groups == MODEL_GROUPS.get(engine):
        assert data["interfaces"]["resolved"] > 100 and data["dtype"]["file"].startswith("vllm/config")
        return
    archs = data["architectures"]["by_arch"]
    assert data["architectures"]["count"] == len(archs) > 100
    for method, entry in data["quantization"]["by_method"].items():
        assert entry.get("class") or entry.get("alternatives"), method


def test_every_fact_names_its_wheel_file() -> None:
    data = facts("vllm", "0.33.0")
    assert data["architectures"]["file"] == "vllm/model_executor/models/registry.py"
    assert data["quantization"]["file"] == "vllm/model_executor/layers/quantization/__init__.py"
    for entry in data["quantization"]["by_method"].values():
        assert entry.get("file") or all(a["file"] for a in entry["alternatives"])
    for entry in data["attention_backends"]["backends"].values():
        if "compute_capability" in entry and entry["compute_capability"]:
            assert entry["compute_capability"]["file"].endswith(".py")
    for entry in data["capability_refusals"]:
        assert entry["file"].startswith("vllm/") and entry["template"]


# -- vLLM 0.33.0 facts, checked against the wheel's sources by hand ------------------------------------------


def test_vllm_033_architectures() -> None:
    arch = facts("vllm", "0.33.0")["architectures"]
    by_arch = arch["by_arch"]
    for name in ("LlamaForCausalLM", "Qwen3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM"):
        assert "_TEXT_GENERATION_MODELS" in by_arch[name]["registries"], name
    assert by_arch["DeepseekV32ForCausalLM"]["impl"] == "vllm.models.deepseek_v32:DeepseekV32ForCausalLM"
    # a pooling-only arch and a Transformers-backend one keep their registry so checks tell them apart
    assert by_arch["BertModel"]["registries"] == ["_EMBEDDING_MODELS"]
    assert by_arch["TransformersForCausalLM"]["registries"] == ["_TRANSFORMERS_BACKEND_MODELS"]
    # the dict comprehension in _EMBEDDING_MODELS (every LlamaForCausalLM alias) was evaluated
    assert "_EMBEDDING_MODELS" in by_arch["TeleChat3ForCausalLM"]["registries"]
    assert len(arch["registries"]["_TEXT_GENERATION_MODELS"]) == 124


def test_vllm_033_previously_supported_and_fallback() -> None:
    data = facts("vllm", "0.33.0")
    prev = data["previously_supported"]
    assert prev["models"]["MPTForCausalLM"] == "0.28.0"
    templates = {e["template"] for e in prev["errors"]}
    assert (
        "Model architecture {arch} was supported in vLLM until v{previous_version}, and is not supported anymore. "
        "Please use an older version of vLLM if you want to use this model architecture."
    ) in templates
    fallback = data["transformers_fallback"]
    assert fallback["model_impl_default"] == "auto"
    assert "TransformersForCausalLM" in fallback["backend_archs"]
    assert (
        "Model architectures {architectures} are not supported for now. Supported architectures: {all_supported_archs}"
    ) in {e["template"] for e in fallback["errors"]}
    assert any("model_impl == 'auto'" in step for step in fallback["resolve_model_cls_steps"])


def test_vllm_033_quantization_min_capabilities() -> None:
    quant = facts("vllm", "0.33.0")["quantization"]
    by_method = quant["by_method"]
    expected = {"mxfp4": 80, "awq": 75, "awq_marlin": 75, "gptq": 60, "fp8": 75, "fp_quant": 100, "modelopt": 80}
    for method, value in expected.items():
        assert by_method[method]["min_capability"] == value, method
        assert by_method[method]["min_capability_literal"] is True
    assert by_method["awq"]["class"] == "AutoAWQConfig"
    assert by_method["fp8_per_tensor"]["class"] == "OnlineQuantizationConfig"
    assert set(quant["methods"]) == set(by_method)
    gate = [g for g in quant["gate_texts"] if g["file"] == "vllm/config/vllm.py"]
    assert gate and gate[0]["template"] == (
        "The quantization method {model_config.quantization} is not supported for the current GPU. "
        "Minimum capability: {quant_config.get_min_capability()}. Current capability: {capability}."
    )


def test_vllm_033_attention_capability_rules() -> None:
    attn = facts("vllm", "0.33.0")["attention_backends"]
    allowed = {name: (e.get("compute_capability") or {}).get("allowed_cuda_capabilities") for name, e in
               attn["backends"].items()}  # fmt: skip
    assert allowed["FLASHMLA_SPARSE"] == ["9.0", "10.0", "10.3"]
    assert allowed["FLASHMLA"] == ["9.0", "10.0", "10.3"]
    assert allowed["CUTLASS_MLA"] == ["10.0", "10.3"]
    assert allowed["FLASHINFER_MLA"] == ["10.0", "10.3"]
    assert allowed["FLASH_ATTN_MLA"] == ["9.0"]
    assert allowed["FLASHINFER_MLA_SPARSE_SM120"] == ["12.0", "12.1"]
    assert allowed["FLASH_ATTN"][0] == "8.0" and "7.5" not in allowed["FLASH_ATTN"]
    assert "7.5" in allowed["TRITON_MLA"] and "7.5" in allowed["TRITON_ATTN"]
    assert attn["backends"]["FLASHMLA_SPARSE"]["is_sparse"] is True
    versions = attn["flash_attn"]["versions"]
    assert versions["FA3"]["allowed_cuda_capabilities"] == ["9.0"]
    assert "FA3 is only supported on devices with compute capability 9.x" in versions["FA3"]["refusals"]
    no_valid = [e for e in attn["no_valid_backend_errors"] if e["file"] == "vllm/platforms/cuda.py"]
    assert {"No valid attention backend found for {cls.device_name} with {config_str}. Reasons: {reasons_str}."} <= {
        e["template"] for e in no_valid
    }
    assert "compute capability not supported" in attn["invalid_reasons"]


# -- vLLM's model-type and interface facts, by release -------------------------------------------------------


def test_vllm_dtype_eras_by_release() -> None:
    """``_get_and_verify_dtype`` read by hand: 0.8.0 takes the checkpoint's dtype (no fallback), 0.9.0 falls
    back to the platform's first dtype, 0.9.1 adds ``_resolve_auto_dtype`` and ``_FLOAT16_NOT_SUPPORTED_MODELS``
    (gemma2, gemma3, plamo2, glm4; 0.33.0 has gemma3_text and no plamo2)."""
    eras = {v: facts("vllm", v)["dtype"]["auto"] for v in ("0.8.0", "0.9.0", "0.9.1", "0.33.0")}
    assert eras == {"0.8.0": "config", "0.9.0": "platform", "0.9.1": "model_type", "0.33.0": "model_type"}
    assert facts("vllm", "0.8.0")["dtype"]["float16_not_supported"] is None
    assert sorted(facts("vllm", "0.9.1")["dtype"]["float16_not_supported"]) == ["gemma2", "gemma3", "glm4", "plamo2"]
    table = facts("vllm", "0.33.0")["dtype"]
    assert {"gemma2", "gemma3", "gemma3_text", "glm4"} <= set(table["float16_not_supported"])
    assert table["float16_refusal"]["template"] == (
        "The model type {model_type!r} does not support float16. Reason: {reason}")
    assert table["cuda_supported_dtypes"]["by_capability"]["7.5"] == ["float16", "float32"]
    assert table["cuda_supported_dtypes"]["by_capability"]["8.0"] == ["bfloat16", "float16", "float32"]
    assert table["bf16_gate"][0]["file"] == "vllm/platforms/cuda.py"
    assert facts("vllm", "0.8.0")["dtype"]["bf16_gate"][0]["file"] in (
        "vllm/v1/worker/gpu_worker.py", "vllm/worker/worker.py")


def test_vllm_interfaces_by_architecture() -> None:
    """``model_executor/models/phi4mm.py``: ``class Phi4MMForCausalLM(nn.Module, SupportsLoRA,
    SupportsMultiModal)``, no ``SupportsPP``; ``llama.py``'s ``LlamaForCausalLM`` has it; ``bert.py``'s
    ``BertModel`` is a pooling model."""
    for version in ("0.9.1", "0.20.0", "0.33.0"):
        by_flag = {k: set(v) for k, v in facts("vllm", version)["interfaces"]["by_flag"].items()}
        assert "Phi4MMForCausalLM" not in by_flag["supports_pp"], version
        assert "Phi4MMForCausalLM" in by_flag["supports_multimodal"] & by_flag["supports_lora"], version
        assert "LlamaForCausalLM" in by_flag["supports_pp"], version
    pooling = set(facts("vllm", "0.33.0")["interfaces"]["by_flag"]["is_pooling_model"])
    assert "BertModel" in pooling and "LlamaForCausalLM" not in pooling
    refusal = facts("vllm", "0.33.0")["interfaces"]["pp_refusal"]
    assert refusal["function"] == "ModelConfig.verify_with_parallel_config"
    assert refusal["template"] == ("Pipeline parallelism is not supported for this model. Supported models "
                                   "implement the `SupportsPP` interface.")


def test_an_unpacked_wheel_folder_reads_as_its_wheel(tmp_path: Path) -> None:
    """The extractor reads a folder the way it reads the wheel it came from (what the releases between full
    extractions were read from)."""
    members = {"vllm/platforms/cuda.py": "class CudaPlatformBase:\n    @property\n    def supported_dtypes(self):\n"
               "        if self.has_device_capability(80):\n            return [torch.bfloat16, torch.float16]\n"
               "        return [torch.float16]\n"}
    wheel_path = tmp_path / "vllm-9.9.9-py3-none-any.whl"
    folder = tmp_path / "vllm-9.9.9"
    with zipfile.ZipFile(wheel_path, "w") as zf:
        for member, text in members.items():
            zf.writestr(member, text)
            (folder / member).parent.mkdir(parents=True, exist_ok=True)
            (folder / member).write_text(text)
    config = "vllm/config.py"
    body = "def _get_and_verify_dtype(config, dtype):\n    return current_platform.supported_dtypes[0]\n"
    with zipfile.ZipFile(wheel_path, "a") as zf:
        zf.writestr(config, body)
    (folder / config).write_text(body)
    from_zip = tool().vllm_dtype(tool().Wheel(wheel_path), [])
    from_folder = tool().vllm_dtype(tool().Wheel(folder), [])
    assert from_zip == from_folder
    assert from_zip["auto"] == "platform"
    assert from_zip["cuda_supported_dtypes"]["by_capability"]["7.5"] == ["float16"]
    assert tool().Wheel(folder).info()["sources_sha256"]


# -- SGLang 0.5.23 --------------------------------------------------------------------------------------------


def test_sglang_0523_facts() -> None:
    data = facts("sglang", "0.5.23")
    archs = data["architectures"]
    for name in ("LlamaForCausalLM", "Qwen3ForCausalLM", "DeepseekV32ForCausalLM", "TransformersForCausalLM"):
        assert name in archs["by_arch"], name
    assert archs["transformers_fallback"]["appended_arch"] == "TransformersForCausalLM"
    assert "BertModel" in archs["kinds"]["is_generation_model"]["archs_named"]
    quant = data["quantization"]["by_method"]
    assert quant["w8a8_fp8"]["min_capability"] == 89
    assert quant["awq_marlin"]["min_capability"] == 80
    assert quant["awq"]["min_capability_on_cuda"] == 75
    fp8_cases = {
        json.dumps(c["assume"], sort_keys=True): c["value"] for c in quant["fp8"]["min_capability_on_cuda_cases"]
    }
    assert fp8_cases['{"self.use_mxfp8": false}'] == 80
    fa3 = data["attention_backends"]["registered_backends"]["fa3"]["refusals"]
    assert any(
        r["template"]
        == "FlashAttention v3 Backend requires SM>=80 and SM<=90. Please use `--attention-backend flashinfer`."
        for r in fa3
    )
    probes = data["platform_probes"]["probes"]["value"]
    assert probes["is_sm100_supported"]["cuda_capability_majors"] == [10]


def test_sglang_0523_prefill_graph_rules() -> None:
    """0.5.23 read by hand: ``model_executor/cuda_graph_config.py default_prefill_backend`` is breakable on
    CUDA; ``arg_groups/cuda_graph_hook.py disable_breakable_cudagraph_if_incompatible`` turns it off for a
    multimodal model unless ``is_multimodal_breakable_cuda_graph_supported`` (``configs/model_config.py``:
    ``multimodal_breakable_cuda_graph_supported_model_archs``); ``arg_groups/pipeline.py`` runs
    ``handle_cuda_graph_config`` before ``handle_gpu_memory_settings``."""
    graphs = facts("sglang", "0.5.23")["prefill_graphs"]
    assert graphs["default_backend"]["backend"] == "breakable"
    mm = graphs["multimodal"]
    assert (mm["file"], mm["function"], mm["rule"]) == (
        "sglang/srt/arg_groups/cuda_graph_hook.py", "disable_breakable_cudagraph_if_incompatible", "multimodal model")
    allow = mm["allow_list"]
    assert (allow["file"], allow["list"]) == (
        "sglang/srt/configs/model_config.py", "multimodal_breakable_cuda_graph_supported_model_archs")
    assert len(allow["archs"]) == 13 and "Qwen3_5ForConditionalGeneration" in allow["archs"]
    assert "Qwen2_5_VLForConditionalGeneration" not in allow["archs"]
    assert graphs["multimodal_off_by_default"]["archs"] == [
        "Gemma3ForConditionalGeneration", "InklingForConditionalGeneration", "Llama4ForConditionalGeneration",
        "Step3VLForConditionalGeneration"]
    assert graphs["pp_disables"]["value"] is True
    assert graphs["order"] == {"file": "sglang/srt/arg_groups/pipeline.py", "resolved_before_memory_sizing": True}
    assert "two-batch overlap" in graphs["rules"]["names"]


#: the shape of SGLang 0.5.16's rules (``server_args.py`` methods), cut to what the extractor reads
_SGLANG_0516_LIKE = {
    "sglang/srt/model_executor/cuda_graph_config.py": (
        "def default_prefill_backend():\n    return Backend.BREAKABLE if is_cuda() else Backend.TC_PIECEWISE\n"),
    "sglang/srt/server_args.py": (
        "class ServerArgs:\n"
        "    def __post_init__(self):\n"
        "        self._handle_cuda_graph_config()\n"
        "        self._handle_gpu_memory_settings(gpu_mem)\n"
        "    def _apply_cuda_graph_compatibility(self):\n"
        "        self._disable_breakable_cudagraph_if_incompatible()\n"
        "    def _disable_breakable_cudagraph_if_incompatible(self):\n"
        "        rules = [\n"
        "            ('MLA attention', lambda: self.use_mla_backend()),\n"
        "            ('multimodal model', lambda: self.get_model_config().is_multimodal\n"
        "             and not self.get_model_config().is_multimodal_breakable_cuda_graph_supported),\n"
        "        ]\n"),
    "sglang/srt/configs/model_config.py": (
        "class ModelConfig:\n"
        "    def __init__(self, enable_multimodal=None):\n"
        "        if enable_multimodal is None:\n"
        "            mm_disabled_models = ['Gemma3ForConditionalGeneration', 'Llama4ForConditionalGeneration']\n"
        "        self.is_multimodal_breakable_cuda_graph_supported = enable_multimodal and (\n"
        "            is_multimodal_breakable_cuda_graph_supported(self.hf_config.architectures))\n"
        "multimodal_breakable_cuda_graph_supported_model_archs = [\n"
        "    'Qwen3_5ForConditionalGeneration', 'Qwen3_5MoeForConditionalGeneration']\n"
        "def is_multimodal_breakable_cuda_graph_supported(model_architectures):\n"
        "    return any(a in multimodal_breakable_cuda_graph_supported_model_archs for a in model_architectures)\n"),
}


def test_the_prefill_graph_allow_list_is_read_through_the_rule(tmp_path: Path) -> None:
    """The extractor follows the multimodal rule of the default backend to the attribute it tests, the
    ``ModelConfig`` function that sets it and the list that function reads; the pre-0.5.19 layout
    (``ServerArgs`` methods) included."""
    wheel_path = tmp_path / "sglang-0.5.16-py3-none-any.whl"
    with zipfile.ZipFile(wheel_path, "w") as zf:
        for member, text in _SGLANG_0516_LIKE.items():
            zf.writestr(member, text)
    graphs = tool().sglang_prefill_graphs(tool().Wheel(wheel_path))
    assert graphs["default_backend"]["backend"] == "breakable"
    assert graphs["rules"]["names"] == ["MLA attention", "multimodal model"]
    allow = graphs["multimodal"]["allow_list"]
    assert allow["list"] == "multimodal_breakable_cuda_graph_supported_model_archs"
    assert allow["archs"] == ["Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"]
    assert graphs["multimodal_off_by_default"]["archs"] == ["Gemma3ForConditionalGeneration",
                                                             "Llama4ForConditionalGeneration"]
    assert graphs["pp_disables"]["value"] is False
    assert graphs["order"]["resolved_before_memory_sizing"] is True


# -- re-extraction from a downloaded wheel ------------------------------------------------------------------


def _pypi_reachable() -> bool:
    try:
        with socket.create_connection(("pypi.org", 443), timeout=5):
            return True
    except OSError:
        return False


def _download(engine: str, version: str, dest: Path, timeout: float) -> Path:
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
        "-q", f"{engine}=={version}", "-d", str(dest),
    ]  # fmt: skip
    try:
        subprocess.run(cmd, check=True, timeout=timeout, capture_output=True)
    except (subprocess.SubprocessError, OSError) as exc:
        pytest.skip(f"pip download {engine}=={version} failed: {exc}")
    wheels = sorted(dest.glob(f"{engine}-{version}-*.whl"))
    if not wheels:
        pytest.skip(f"pip download left no {engine} {version} wheel")
    return wheels[0]


def _recheck(engine: str, version: str, tmp_path: Path, timeout: float, groups: list[str]) -> None:
    if not _pypi_reachable():
        pytest.skip("PyPI is unreachable")
    shipped = facts(engine, version)
    wheel = _download(engine, version, tmp_path, timeout)
    fresh = tool().extract(engine, version, wheel, {"full"})
    assert fresh["wheel"] == shipped["wheel"], "PyPI serves a different wheel than the one the facts came from"
    for group in groups:
        assert fresh[group] == shipped[group], group


def test_sglang_facts_match_a_downloaded_wheel(tmp_path: Path) -> None:
    """Downloads ~40 MB when PyPI answers (skipped otherwise) and re-extracts the facts."""
    _recheck("sglang", "0.5.23", tmp_path, timeout=60, groups=["architectures", "quantization", "prefill_graphs"])


@pytest.mark.skipif(
    os.environ.get("GPULAYOUT_NETWORK_TESTS") != "1", reason="downloads a ~340 MB wheel; set GPULAYOUT_NETWORK_TESTS=1"
)
def test_vllm_facts_match_a_downloaded_wheel(tmp_path: Path) -> None:
    _recheck("vllm", "0.33.0", tmp_path, timeout=600, groups=sorted(FULL_GROUPS["vllm"]))


def test_sglang_mm_disabled_models_table_matches_the_extracted_release() -> None:
    """``engines/sglang/engine.py MM_DISABLED_MODELS`` (read per release) agrees with what
    ``tools/engine_facts.py`` extracted from the 0.5.23 wheel (``prefill_graphs.multimodal_off_by_default``)."""
    from packaging.version import Version

    from pytest_gpulayout.engines.sglang.multimodal import mm_disabled_models
    from pytest_gpulayout.generation import release_facts

    facts = release_facts("sglang", Version("0.5.23"))
    assert facts is not None
    extracted = set(facts.data["prefill_graphs"]["multimodal_off_by_default"]["archs"])
    assert extracted == set(mm_disabled_models(Version("0.5.23")))
