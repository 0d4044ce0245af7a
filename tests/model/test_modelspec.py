"""Reading model configs the way vLLM and SGLang read them: files, catalog ids, errors, weights on disk."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from pytest_gpulayout.errors import InputError
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import FULL, NO_KV, SLIDING
from pytest_gpulayout.model.weights import measured_weight_bytes

MODELS = Path(__file__).parents[1] / "data" / "models"


# -- where the model comes from ---------------------------------------------------------------

def test_directory_file_and_relative_path_read_the_same_config():
    by_dir = load_model(str(MODELS / "tiny-llama"))
    by_file = load_model(str(MODELS / "tiny-llama" / "config.json"))
    relative = load_model("tiny-llama", base_dir=MODELS)
    assert by_dir.num_attention_heads == by_file.num_attention_heads == relative.num_attention_heads == 8
    assert by_dir.name == by_file.name == "tiny-llama"
    assert relative.source.endswith("config.json")


def test_catalog_id_is_case_insensitive_and_takes_the_bare_name():
    a = load_model("Qwen/Qwen3-8B")
    assert load_model("qwen/qwen3-8b").num_hidden_layers == a.num_hidden_layers == 36
    assert load_model("Qwen3-8B").source == "catalog:Qwen/Qwen3-8B"


def test_an_existing_path_wins_over_the_catalog(tmp_path: Path):
    d = tmp_path / "Qwen" / "Qwen3-8B"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"num_attention_heads": 4, "num_hidden_layers": 2,
                                               "hidden_size": 64, "vocab_size": 100}))
    assert load_model("Qwen/Qwen3-8B", base_dir=tmp_path).num_hidden_layers == 2


def test_unknown_id_suggests_close_catalog_ids_and_a_config_json():
    with pytest.raises(InputError) as err:
        load_model("Qwen/Qwen3-8", base_dir=MODELS)
    assert "Did you mean Qwen/Qwen3-8B" in str(err.value)
    assert "config.json" in str(err.value)


def test_a_missing_path_is_not_silently_replaced_by_a_catalog_model():
    # "models/Qwen3-8B" is a local path that does not exist, not the catalog's Qwen/Qwen3-8B
    with pytest.raises(InputError) as err:
        load_model("./models/Qwen3-8B", base_dir=MODELS)
    assert "no such file or directory" in str(err.value)
    with pytest.raises(InputError):
        load_model("models/Qwen3-8B", base_dir=MODELS)


def test_a_missing_path_is_named_once_also_under_the_manifest_key(tmp_path: Path, capsys):
    from pytest_gpulayout import cli

    missing = tmp_path / "no-such-model"
    with pytest.raises(InputError) as err:
        load_model("./no-such-model", base_dir=tmp_path)
    assert str(err.value).count(str(missing)) == 1
    # gpulayout check re-wraps the error under deployments.<name>.model: the path still reads once
    manifest = tmp_path / "gpulayout.yaml"
    manifest.write_text("version: 1\nmachine: preset:2xL4-pcie\ndeployments:\n  x:\n"
                        "    model: ./no-such-model\n    engine: vllm\n    tensor_parallel_size: 2\n")
    assert cli.main(["check", str(manifest), "--json"]) == 1  # its deployment's config fails (issue 30)
    line = json.loads(capsys.readouterr().out)["deployments"]["x"]["checks"]["config"]["message"]
    assert "\n" not in line and "deployments.x.model" in line and "no such file or directory" in line
    assert line.count(str(missing)) == 1


def test_directory_without_config_json(tmp_path: Path):
    with pytest.raises(InputError) as err:
        load_model(str(tmp_path))
    assert "no config.json" in str(err.value) and str(tmp_path) in str(err.value)


# -- bad configs: one line naming the file and the key -----------------------------------------

@pytest.mark.parametrize(("name", "key", "words"), [
    ("missing-heads.json", "num_attention_heads", "missing"),
    ("string-heads.json", "num_attention_heads", "must be an integer"),
    ("vlm-bad-kv.json", "text_config.num_key_value_heads", "must be >= 1"),
    ("short-layer-types.json", "layer_types", "has 2 entries but num_hidden_layers is 4"),
])
def test_bad_config_names_file_and_key(name: str, key: str, words: str):
    path = MODELS / "broken" / name
    with pytest.raises(InputError) as err:
        load_model(str(path))
    msg = str(err.value)
    assert str(path) in msg and f"{key}:" in msg and words in msg
    assert "\n" not in msg


_SMALL = {"num_attention_heads": 8, "num_hidden_layers": 2, "hidden_size": 256, "vocab_size": 100}


@pytest.mark.parametrize(("extra", "key", "words"), [
    ({"num_key_value_heads": 16}, "num_key_value_heads", "16 KV heads for only 8 attention heads"),
    ({"num_key_value_heads": 3}, "num_key_value_heads", "3 does not divide num_attention_heads 8"),
    ({"num_kv_heads": 3}, "num_kv_heads", "whole groups"),                      # an alias key is named as written
    ({"text_config": {**_SMALL, "num_key_value_heads": 3}}, "text_config.num_key_value_heads", "whole groups"),
    ({"torch_dtype": "float8"}, "torch_dtype", "quantization_config"),
    ({"torch_dtype": "torch.float8_e4m3fn"}, "torch_dtype", "bfloat16, float16, float32"),
    ({"dtype": "int4"}, "dtype", "not a model dtype"),
    ({"text_config": _SMALL, "torch_dtype": "float8"}, "torch_dtype", "not a model dtype"),  # top-level key
])
def test_configs_no_engine_loads_are_refused(tmp_path: Path, extra: dict, key: str, words: str):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_SMALL, **extra}))
    with pytest.raises(InputError) as err:
        load_model(str(path))
    msg = str(err.value)
    assert msg.startswith(f"{path}: {key}: ") and words in msg and "\n" not in msg


@pytest.mark.parametrize("extra", [
    {"num_key_value_heads": 8}, {"num_key_value_heads": 1}, {"num_key_value_heads": 4},
    {"torch_dtype": "float16"}, {"torch_dtype": "torch.bfloat16"}, {"torch_dtype": "float32"},
    # MLA: the engines never read num_key_value_heads, so an odd value there does not stop loading
    {"kv_lora_rank": 64, "qk_rope_head_dim": 16, "num_key_value_heads": 3},
])
def test_configs_engines_load_are_kept(tmp_path: Path, extra: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_SMALL, **extra}))
    spec = load_model(str(path))
    assert spec.num_attention_heads == 8 and spec.dtype in ("bfloat16", "float16", "float32")


@pytest.mark.parametrize("name", ["not-json.json", "list.json"])
def test_not_a_json_object(name: str):
    with pytest.raises(InputError) as err:
        load_model(str(MODELS / "broken" / name))
    assert name in str(err.value)


# -- head counts -------------------------------------------------------------------------------

def test_kv_heads_alias_order_and_mha_default():
    assert load_model(str(MODELS / "falcon-like")).num_key_value_heads == 1   # n_head_kv before num_kv_heads
    assert load_model(str(MODELS / "chatglm")).num_key_value_heads == 2       # multi_query_group_num
    mha = load_model(str(MODELS / "mha-gpt"))
    assert mha.num_key_value_heads == mha.num_attention_heads == 16           # no key: one per attention head


def test_head_dim_explicit_or_hidden_over_heads():
    assert load_model("Qwen/Qwen3-8B").head_dim == 128                           # explicit
    assert load_model(str(MODELS / "tiny-llama")).head_dim == 32                 # 256 / 8
    assert load_model("google/gemma-3-27b-it").head_dim == 128                   # explicit in text_config


# -- multimodal wrapper ------------------------------------------------------------------------

def test_gemma3_reads_text_config_fills_defaults_and_takes_dtype_from_the_top():
    g = load_model("google/gemma-3-12b-it")
    assert (g.num_attention_heads, g.num_key_value_heads, g.num_hidden_layers) == (16, 8, 48)
    assert g.head_dim == 256 and g.vocab_size == 262208     # Gemma3TextConfig defaults, not 3840 / 16
    assert g.dtype == "bfloat16" and g.tie_word_embeddings
    assert g.max_position_embeddings == 131072       # linear rope factor 8 not applied (vLLM skips gemma3)
    assert g.is_multimodal and 0.3e9 < g.vision_params < 0.5e9
    assert any("defaults" in n for n in g.notes)


def test_gemma3_every_sixth_layer_is_global():
    g = load_model("google/gemma-3-12b-it")
    kinds = g.layer_kinds
    assert [i for i, k in enumerate(kinds) if k == FULL] == [5, 11, 17, 23, 29, 35, 41, 47]
    assert g.sliding_layers == 40 and g.sliding_window == 1024


# -- attention patterns ------------------------------------------------------------------------

def test_gpt_oss_alternates_sliding_and_full():
    m = load_model("openai/gpt-oss-120b")
    assert m.layer_kinds[:4] == (SLIDING, FULL, SLIDING, FULL)
    assert m.sliding_layers == 18 and m.kv_layers == 36 and m.sliding_window == 128


def test_qwen2_sliding_window_off_unless_use_sliding_window():
    off = load_model("Qwen/Qwen2.5-7B-Instruct")
    assert off.sliding_layers == 0 and off.sliding_window is None
    on = load_model(str(MODELS / "qwen2-swa"))
    assert [k == SLIDING for k in on.layer_kinds] == [i >= 21 for i in range(24)]


def test_mistral_window_applies_to_every_layer_and_null_means_none():
    sw = load_model(str(MODELS / "mistral-sw"))
    assert sw.sliding_layers == 32 and sw.sliding_window == 4096
    v03 = load_model("mistralai/Mistral-7B-Instruct-v0.3")          # "sliding_window": null
    assert v03.sliding_layers == 0 and v03.sliding_window is None


@pytest.mark.parametrize("name", ["hybrid-linear", "hybrid-interval"])
def test_linear_attention_layers_hold_no_kv(name: str):
    m = load_model(str(MODELS / name))
    assert m.kv_layers == 12 and m.layer_kinds.count(NO_KV) == 36
    assert m.layer_kinds[3] == FULL and m.layer_kinds[0] == NO_KV


# -- MoE and MLA --------------------------------------------------------------------------------

def test_deepseek_v3_mla_and_dense_first_layers():
    d = load_model("deepseek-ai/DeepSeek-V3")
    assert d.is_mla
    assert (d.kv_lora_rank, d.qk_rope_head_dim, d.qk_nope_head_dim, d.q_lora_rank) == (512, 64, 128, 1536)
    assert d.num_experts == 256 and d.num_experts_per_tok == 8 and d.moe_intermediate_size == 2048
    assert d.shared_expert_intermediate_size == 2048 and d.num_shared_experts == 1
    assert [d.is_moe_layer(i) for i in range(5)] == [False, False, False, True, True]
    assert d.max_position_embeddings == 163840             # yarn: original 4096 x factor 40
    assert d.quantization is not None and d.quantization.method == "fp8"
    assert d.quantization.weight_block_size == (128, 128)


def test_mixtral_experts_use_intermediate_size():
    m = load_model("mistralai/Mixtral-8x7B-Instruct-v0.1")
    assert m.num_experts == 8 and m.moe_intermediate_size == 14336 and m.num_experts_per_tok == 2


def test_qwen_moe_sparse_step_and_mlp_only_layers():
    m = load_model("Qwen/Qwen3-30B-A3B")
    assert all(m.is_moe_layer(i) for i in range(48))
    from dataclasses import replace
    mixed = replace(m, mlp_only_layers=(0, 1), decoder_sparse_step=2)
    assert [mixed.is_moe_layer(i) for i in range(6)] == [False, False, False, True, False, True]


# -- quantization ------------------------------------------------------------------------------

def test_quantization_configs():
    awq = load_model(str(MODELS / "llama-3.1-8b-awq")).quantization
    assert awq is not None and (awq.method, awq.bits, awq.group_size) == ("awq", 4, 128)
    assert awq.effective_bits == pytest.approx(4 + 20 / 128)
    gptq = load_model(str(MODELS / "llama-3.1-8b-gptq")).quantization
    assert gptq is not None and gptq.method == "gptq" and gptq.group_size == 128
    mx = load_model("openai/gpt-oss-20b").quantization
    assert mx is not None and mx.method == "mxfp4" and mx.bits == 4.25 and mx.targets == "experts"
    ct = load_model(str(MODELS / "llama-3.1-8b-fp8-kv")).quantization
    assert ct is not None and ct.bits == 8 and ct.kv_cache_dtype == "fp8"
    w8 = load_model(str(MODELS / "llama-3.1-70b-w8a8")).quantization
    assert w8 is not None and w8.bits == 8 and w8.kv_cache_dtype is None


def test_unknown_quant_method_is_noted_not_silent(tmp_path: Path):
    cfg = json.loads((MODELS / "tiny-llama" / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "exotic"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = load_model(str(tmp_path))
    assert m.quantization is not None and m.quantization.effective_bits == 16
    assert any("exotic" in n and "not modelled" in n for n in m.notes)


def test_quant_method_must_be_a_string(tmp_path: Path):
    cfg = json.loads((MODELS / "tiny-llama" / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": 4}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError) as err:
        load_model(str(tmp_path))
    assert "quantization_config.quant_method" in str(err.value)


def test_max_len_keys_and_rope_scaling():
    assert load_model("meta-llama/Llama-3.1-8B-Instruct").max_position_embeddings == 131072  # llama3 rope
    assert load_model("openai/gpt-oss-120b").max_position_embeddings == 131072   # yarn 4096 x 32
    assert load_model(str(MODELS / "chatglm")).max_position_embeddings == 131072  # seq_length


# -- weights on disk ---------------------------------------------------------------------------

def _safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]], *, data: bytes = b"") -> None:
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = {"BF16": 2, "F32": 4, "U8": 1}[dtype]
        for d in shape:
            size *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def test_safetensors_headers_are_summed_without_reading_tensor_data(tmp_path: Path):
    (tmp_path / "config.json").write_text((MODELS / "tiny-llama" / "config.json").read_text())
    # the headers promise 8 GB of tensors, the files hold none: only the headers can have been read
    _safetensors(tmp_path / "model-00001-of-00002.safetensors",
                 {"a": ("BF16", [32768, 65536]), "b": ("F32", [1024])})
    _safetensors(tmp_path / "model-00002-of-00002.safetensors", {"c": ("U8", [4 * 1024 ** 3])})
    want = 2 * 32768 * 65536 + 4 * 1024 + 4 * 1024 ** 3
    assert measured_weight_bytes(tmp_path) == want
    assert load_model(str(tmp_path)).weight_bytes_measured == want


def test_index_total_size_wins_and_consolidated_copy_is_skipped(tmp_path: Path):
    _safetensors(tmp_path / "model-00001-of-00001.safetensors", {"a": ("BF16", [10, 10])})
    _safetensors(tmp_path / "consolidated.safetensors", {"a": ("BF16", [10, 10])})
    assert measured_weight_bytes(tmp_path) == 200
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 12345},
                                                                       "weight_map": {}}))
    assert measured_weight_bytes(tmp_path) == 12345


def test_no_weights_means_computed(tmp_path: Path):
    assert measured_weight_bytes(tmp_path) is None
    assert load_model(str(MODELS / "tiny-llama")).weight_bytes_measured is None


def test_corrupt_safetensors_names_the_file(tmp_path: Path):
    (tmp_path / "config.json").write_text((MODELS / "tiny-llama" / "config.json").read_text())
    bad = tmp_path / "model.safetensors"
    bad.write_bytes(struct.pack("<Q", 10 ** 12) + b"{}")
    with pytest.raises(InputError) as err:
        load_model(str(tmp_path))
    assert "model.safetensors" in str(err.value) and "not a safetensors file" in str(err.value)
