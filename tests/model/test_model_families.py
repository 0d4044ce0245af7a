"""Model families whose configs the engines read in their own way, on the published configs.

Configs in ``tests/data/models/`` (written from the public Hugging Face repositories, as far as we
know them): ``llama-4-scout-17b-16e-instruct`` (meta-llama/Llama-4-Scout-17B-16E-Instruct),
``llava-1.5-7b-hf`` (llava-hf/llava-1.5-7b-hf: its ``text_config`` names only max_position_embeddings,
model_type, rms_norm_eps, torch_dtype and vocab_size), ``qwen3-next-80b-a3b-instruct``
(Qwen/Qwen3-Next-80B-A3B-Instruct), ``gemma-2-9b-it`` (google/gemma-2-9b-it); gpt-oss and Gemma 3
come from the bundled catalog.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import dep, machine, subject

from pytest_gpulayout.findings import Status
from pytest_gpulayout.model import weights as W
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import CHUNKED, FULL, NO_KV, SLIDING
from pytest_gpulayout.rules.heads import check_heads

MODELS = Path(__file__).parents[1] / "data" / "models"
GIB = 1024 ** 3


# -- Llama 4 ------------------------------------------------------------------------------------

def test_llama4_scout_global_layers_are_the_nope_ones_and_the_rest_chunked():
    # vllm 0.33.0 model_executor/models/llama4.py: nope = no_rope_layers[i] == 0 -> plain Attention;
    # otherwise ChunkedLocalAttention(attention_chunk_size)
    m = load_model(str(MODELS / "llama-4-scout-17b-16e-instruct"))
    assert [i for i, k in enumerate(m.layer_kinds) if k == FULL] == list(range(3, 48, 4))
    assert m.chunked_layers == 36 and m.sliding_layers == 0 and m.kv_layers == 48
    assert m.attention_chunk_size == 8192 and m.sliding_window is None


def test_llama4_without_no_rope_layers_uses_the_config_class_default(tmp_path: Path):
    cfg = json.loads((MODELS / "llama-4-scout-17b-16e-instruct" / "config.json").read_text())
    del cfg["text_config"]["no_rope_layers"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = load_model(str(tmp_path))
    assert [i for i, k in enumerate(m.layer_kinds) if k == FULL] == list(range(3, 48, 4))


def test_llama4_chunk_size_null_means_full_attention_everywhere(tmp_path: Path):
    cfg = json.loads((MODELS / "llama-4-scout-17b-16e-instruct" / "config.json").read_text())
    cfg["text_config"]["attention_chunk_size"] = None
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = load_model(str(tmp_path))
    assert m.chunked_layers == 0 and m.attention_chunk_size is None


def test_llama4_scout_counts_the_always_on_shared_expert():
    # Llama4MoE: shared_expert = LlamaMLP(hidden, intermediate_size) in every MoE layer
    m = load_model(str(MODELS / "llama-4-scout-17b-16e-instruct"))
    assert m.num_experts == 16 and m.moe_intermediate_size == 8192
    assert m.shared_expert_intermediate_size == 8192 and m.intermediate_size == 16384
    assert all(m.is_moe_layer(i) for i in range(48))           # interleave_moe_layer_step 1
    without = __import__("dataclasses").replace(m, shared_expert_intermediate_size=0, num_shared_experts=0)
    shared = W.computed_weight_bytes(m) - W.computed_weight_bytes(without)
    assert shared == 3 * 5120 * 8192 * 48 * 2                   # 11.25 GiB in bf16
    assert 11 * GIB < shared < 11.5 * GIB
    assert 107e9 < W.total_params(m) < 110e9                     # Scout: 109B parameters


def test_llama4_interleaved_moe_layers_follow_the_step(tmp_path: Path):
    cfg = json.loads((MODELS / "llama-4-scout-17b-16e-instruct" / "config.json").read_text())
    cfg["text_config"]["interleave_moe_layer_step"] = 2          # Maverick's pattern
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = load_model(str(tmp_path))
    assert [m.is_moe_layer(i) for i in range(4)] == [False, True, False, True]


# -- VLM text_config defaults -------------------------------------------------------------------

def test_llava_1_5_fills_llamaconfig_defaults_and_says_so():
    m = load_model(str(MODELS / "llava-1.5-7b-hf"))
    assert (m.num_attention_heads, m.num_key_value_heads, m.num_hidden_layers) == (32, 32, 32)
    assert (m.hidden_size, m.intermediate_size, m.head_dim) == (4096, 11008, 128)
    assert m.vocab_size == 32064 and m.max_position_embeddings == 4096 and m.dtype == "float16"
    assert set(m.defaults_filled) == {"num_attention_heads", "num_hidden_layers", "hidden_size",
                                      "intermediate_size"}
    note = next(n for n in m.notes if "defaults" in n)
    assert "llama" in note and "num_attention_heads=32" in note and "text_config" in note
    assert m.is_multimodal
    assert 6.9e9 < W.total_params(m) < 7.2e9                     # LLaVA 1.5 7B: 7.06B
    assert check_heads(subject(dep(tp=2), machine(2), m)).status is Status.PASS


def test_a_text_config_without_model_type_takes_the_wrappers_default(tmp_path: Path):
    cfg = json.loads((MODELS / "llava-1.5-7b-hf" / "config.json").read_text())
    del cfg["text_config"]["model_type"]                        # LlavaConfig: defaults to "llama"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = load_model(str(tmp_path))
    assert m.model_type == "llama" and m.num_attention_heads == 32


def test_cli_checks_the_llava_config_instead_of_refusing_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from pytest_gpulayout import cli

    manifest = tmp_path / "gpulayout.yaml"
    manifest.write_text(f"version: 1\nmachine: preset:2xL4-pcie\ndeployments:\n  llava:\n"
                        f"    model: {MODELS / 'llava-1.5-7b-hf'}\n    engine: vllm\n"
                        f"    tensor_parallel_size: 2\n    max_model_len: 4096\n")
    rc = cli.main(["check", str(manifest)])
    out = capsys.readouterr()
    assert "num_attention_heads" not in out.err
    assert rc in (0, 1) and "heads" in out.out


# -- Gemma 2 / 3, gpt-oss -----------------------------------------------------------------------

def test_gemma2_alternates_sliding_and_global_from_layer_0():
    # vllm 0.33.0 gemma2.py: is_sliding = layer_types[i] == "sliding_attention"; Gemma2Config's
    # layer_types: sliding where (i + 1) % 2
    m = load_model(str(MODELS / "gemma-2-9b-it"))
    assert m.layer_kinds[:4] == (SLIDING, FULL, SLIDING, FULL)
    assert m.sliding_layers == 21 and m.sliding_window == 4096 and m.tie_word_embeddings
    assert "tie_word_embeddings" in m.defaults_filled


def test_gpt_oss_has_sinks_and_alternating_windows():
    m = load_model("openai/gpt-oss-20b")
    assert m.attention_sinks and m.sliding_window == 128 and m.sliding_layers == 12
    assert not load_model("google/gemma-3-12b-it").attention_sinks


# -- hybrid linear attention --------------------------------------------------------------------

def test_qwen3_next_gated_deltanet_state_per_layer():
    # vllm 0.33.0 mamba_utils.py gated_delta_net_state_shape: conv (2*16*128 + 32*128) x (4 - 1),
    # recurrent 32 x 128 x 128, model dtype (bf16)
    m = load_model(str(MODELS / "qwen3-next-80b-a3b-instruct"))
    assert m.state_layers == 36 and m.kv_layers == 12 and m.layer_kinds[3] == FULL
    per_layer = (8192 * 3 + 32 * 128 * 128) * 2
    states = m.layer_state_bytes()
    assert states[0] == per_layer and states[3] == 0
    assert sum(states) == 36 * per_layer                          # 37.7 MiB per request
    assert m.layer_state_bytes(tp=4)[0] == per_layer // 4
    assert m.layer_state_bytes()[0] == m.linear_state.bytes_per_rank(1, 2)  # type: ignore[union-attr]


def test_attention_only_models_keep_no_state():
    m = load_model("Qwen/Qwen3-8B")
    assert m.linear_state is None and set(m.layer_state_bytes()) == {0} and m.state_layers == 0
    assert NO_KV not in m.layer_kinds and CHUNKED not in m.layer_kinds
