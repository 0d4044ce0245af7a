"""A tiny llama-architecture GGUF written with the ``gguf`` package, so no model is downloaded.

llama-server needs a vocabulary it can tokenize with (its warm-up and slot set-up tokenize), so the
file carries a minimal SentencePiece ("llama") vocabulary: <unk>, <s>, </s>, the 256 byte tokens
(llama.cpp's SPM tokenizer falls back to them) and a few pieces. Weights are random; their values do
not matter, only their shapes and types (which decide every byte llama.cpp allocates).
"""

from __future__ import annotations

from pathlib import Path


def write_tiny_llama(path: Path, *, n_layer: int = 4, n_embd: int = 64, n_head: int = 4, n_head_kv: int = 2,
                     n_ff: int = 128, n_ctx_train: int = 4096, tied: bool = False, seed: int = 0) -> Path:
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama-test")
    w.add_context_length(n_ctx_train)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(n_embd // n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["\u2581", "\u2581a", "a", "b"]
    types = ([gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
             + [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * 4)
    w.add_tokenizer_model("llama")
    w.add_token_list(pieces)
    w.add_token_scores([0.0] * 259 + [-1.0, -2.0, -3.0, -4.0])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    n_vocab = len(pieces)

    def mat(rows: int, cols: int) -> np.ndarray:  # numpy shape (rows, cols) = ggml ne {cols, rows}
        return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float16)

    def norm(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    head_dim = n_embd // n_head
    w.add_tensor("token_embd.weight", mat(n_vocab, n_embd))
    for il in range(n_layer):
        w.add_tensor(f"blk.{il}.attn_norm.weight", norm(n_embd))
        w.add_tensor(f"blk.{il}.attn_q.weight", mat(n_embd, n_embd))
        w.add_tensor(f"blk.{il}.attn_k.weight", mat(n_head_kv * head_dim, n_embd))
        w.add_tensor(f"blk.{il}.attn_v.weight", mat(n_head_kv * head_dim, n_embd))
        w.add_tensor(f"blk.{il}.attn_output.weight", mat(n_embd, n_embd))
        w.add_tensor(f"blk.{il}.ffn_norm.weight", norm(n_embd))
        w.add_tensor(f"blk.{il}.ffn_gate.weight", mat(n_ff, n_embd))
        w.add_tensor(f"blk.{il}.ffn_up.weight", mat(n_ff, n_embd))
        w.add_tensor(f"blk.{il}.ffn_down.weight", mat(n_embd, n_ff))
    w.add_tensor("output_norm.weight", norm(n_embd))
    if not tied:
        w.add_tensor("output.weight", mat(n_vocab, n_embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_tiny_deepseek2(path: Path, *, n_layer: int = 4, n_embd: int = 64, n_head: int = 4, kv_lora_rank: int = 64,
                         qk_rope: int = 32, qk_nope: int = 32, v_head: int = 32, n_ff: int = 128,
                         n_ctx_train: int = 163840, mla: bool = True, seed: int = 0) -> Path:
    """A tiny ``deepseek2`` GGUF laid out as ``convert_hf_to_gguf.py`` writes DeepSeek-V2/V3 since llama.cpp's
    MLA conversion: one KV head whose ``key_length`` is the cached latent (``kv_lora_rank + qk_rope``) and
    ``value_length`` the ``kv_lora_rank``, with the per-head sizes in ``key_length_mla`` (``qk_nope +
    qk_rope``) / ``value_length_mla`` (``v_head``). ``mla=False``: the older layout (no ``*_mla`` keys,
    every head cached whole, ``key_length = qk_nope + qk_rope``, ``value_length = v_head``). Metadata and
    tensor shapes only (no vocabulary: the memory arithmetic reads no tokens)."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "deepseek2")
    w.add_name("tiny-deepseek2-test")
    w.add_context_length(n_ctx_train)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    if mla:
        w.add_head_count_kv(1)
        w.add_key_length(kv_lora_rank + qk_rope)
        w.add_value_length(kv_lora_rank)
        w.add_key_length_mla(qk_nope + qk_rope)
        w.add_value_length_mla(v_head)
    else:
        w.add_head_count_kv(n_head)
        w.add_key_length(qk_nope + qk_rope)
        w.add_value_length(v_head)
    w.add_kv_lora_rank(kv_lora_rank)
    w.add_rope_dimension_count(qk_rope)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(32)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float16)

    def norm(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    w.add_tensor("token_embd.weight", mat(32, n_embd))
    for il in range(n_layer):
        w.add_tensor(f"blk.{il}.attn_norm.weight", norm(n_embd))
        w.add_tensor(f"blk.{il}.attn_q.weight", mat(n_head * (qk_nope + qk_rope), n_embd))
        w.add_tensor(f"blk.{il}.attn_kv_a_mqa.weight", mat(kv_lora_rank + qk_rope, n_embd))
        w.add_tensor(f"blk.{il}.attn_kv_a_norm.weight", norm(kv_lora_rank))
        w.add_tensor(f"blk.{il}.attn_kv_b.weight", mat(n_head * (qk_nope + v_head), kv_lora_rank))
        w.add_tensor(f"blk.{il}.attn_output.weight", mat(n_embd, n_head * v_head))
        w.add_tensor(f"blk.{il}.ffn_norm.weight", norm(n_embd))
        w.add_tensor(f"blk.{il}.ffn_gate.weight", mat(n_ff, n_embd))
        w.add_tensor(f"blk.{il}.ffn_up.weight", mat(n_ff, n_embd))
        w.add_tensor(f"blk.{il}.ffn_down.weight", mat(n_embd, n_ff))
    w.add_tensor("output_norm.weight", norm(n_embd))
    w.add_tensor("output.weight", mat(32, n_embd))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
