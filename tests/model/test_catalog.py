"""The bundled catalog: the ids a manifest can name, and that their shapes add up to the published models."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from pytest_gpulayout.engines.vllm.engine import VLLM
from pytest_gpulayout.machine.facts import GIB
from pytest_gpulayout.memory.weights import weight_bytes_per_rank
from pytest_gpulayout.model import catalog
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.weights import computed_weight_bytes, total_params

REQUIRED = [
    "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct",
    "meta-llama/Llama-3.1-405B-Instruct", "meta-llama/Llama-3.3-70B-Instruct", "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct", "Qwen/Qwen3-8B",
    "Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B", "mistralai/Mistral-7B-Instruct-v0.3",
    "mistralai/Mixtral-8x7B-Instruct-v0.1", "google/gemma-3-12b-it", "google/gemma-3-27b-it",
    "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-20b", "openai/gpt-oss-120b", "microsoft/phi-4",
]


def test_catalog_has_the_promised_models():
    ids = catalog.catalog_ids()
    assert set(REQUIRED) <= set(ids)
    assert ids == sorted(ids)


@pytest.mark.parametrize("model_id", REQUIRED)
def test_every_entry_loads_and_is_package_data(model_id: str):
    m = load_model(model_id)
    assert m.source == f"catalog:{model_id}"
    assert m.num_hidden_layers > 0
    assert m.is_mla or m.num_attention_heads % m.num_key_value_heads == 0
    name = model_id.replace("/", "--") + ".json"
    data = json.loads(resources.files("pytest_gpulayout.model.catalog").joinpath(name).read_text())
    assert isinstance(data, dict) and data.get("architectures")


#: Published parameter counts (model cards). DeepSeek-V3's 671B excludes its 14B MTP module.
PUBLISHED_PARAMS = {
    "meta-llama/Llama-3.1-8B-Instruct": 8.03e9,
    "meta-llama/Llama-3.1-70B-Instruct": 70.6e9,
    "meta-llama/Llama-3.1-405B-Instruct": 405.9e9,
    "Qwen/Qwen2.5-7B-Instruct": 7.61e9,
    "Qwen/Qwen2.5-72B-Instruct": 72.7e9,
    "Qwen/Qwen3-8B": 8.19e9,
    "Qwen/Qwen3-32B": 32.8e9,
    "Qwen/Qwen3-30B-A3B": 30.5e9,
    "Qwen/Qwen3-235B-A22B": 235e9,
    "mistralai/Mistral-7B-Instruct-v0.3": 7.25e9,
    "mistralai/Mixtral-8x7B-Instruct-v0.1": 46.7e9,
    "google/gemma-3-12b-it": 12.2e9,
    "google/gemma-3-27b-it": 27.4e9,
    "deepseek-ai/DeepSeek-V3": 671e9,
    "openai/gpt-oss-20b": 20.9e9,
    "openai/gpt-oss-120b": 116.8e9,
    "microsoft/phi-4": 14.7e9,
}


@pytest.mark.parametrize(("model_id", "published"), PUBLISHED_PARAMS.items())
def test_computed_parameters_match_published_counts(model_id: str, published: float):
    assert total_params(load_model(model_id)) == pytest.approx(published, rel=0.03)


def test_gpt_oss_mxfp4_checkpoint_size():
    # model card: 60.8 GiB (120b) and 12.8 GiB (20b): experts at 4.25 bits, the rest bf16
    for model_id, gib in (("openai/gpt-oss-120b", 60.8), ("openai/gpt-oss-20b", 12.8)):
        assert computed_weight_bytes(load_model(model_id), on_disk=True) / GIB == pytest.approx(gib, rel=0.03)


def test_gpt_oss_120b_as_vllm_loads_it():
    # vLLM on an H100: "Model loading took 65.9651 GiB" (0.10.1), "64.38 GiB" (0.14.1)
    loaded = weight_bytes_per_rank(load_model("openai/gpt-oss-120b"), tp=1, pp=1, engine=VLLM.memory) / GIB
    assert loaded == pytest.approx(65.97, rel=0.03) and loaded == pytest.approx(64.38, rel=0.03)


def test_llama_33_70b_has_the_31_shape():
    a, b = load_model("meta-llama/Llama-3.3-70B-Instruct"), load_model("meta-llama/Llama-3.1-70B-Instruct")
    assert total_params(a) == total_params(b)
    assert (a.num_key_value_heads, a.num_hidden_layers) == (b.num_key_value_heads, b.num_hidden_layers)


def test_lookup_rules():
    assert catalog.find("DEEPSEEK-AI/deepseek-v3") == "deepseek-ai/DeepSeek-V3"
    assert catalog.find("phi-4") == "microsoft/phi-4"
    assert catalog.find("someone/phi-4") is None           # another org's phi-4 is not ours
    assert catalog.find("nothing-like-it") is None
    assert "openai/gpt-oss-120b" in catalog.suggest("gpt-oss-12b")
