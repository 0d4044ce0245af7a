"""Write ``qwen2.5-32b-q4_k_m.header.gguf``: the GGUF header of a Qwen2.5-32B-Instruct Q4_K_M file
(its key/values and tensor table: names, shapes, ggml types) without the 19 GB of tensor data or the
vocabulary, so the example runs at once. gpulayout reads only the header of a .gguf, so it sees the
same model as from the full file. Shapes follow the published config (64 layers, hidden 5120, 40
heads, 8 KV heads, FFN 27648, vocab 152064, 32768 context); types approximate llama.cpp's Q4_K_M recipe
(Q4_K, with Q6_K for attn_v, ffn_down and the output).

    python examples/06-llamacpp-mismatched/make_model.py
"""

from pathlib import Path

import gguf
import numpy as np

OUT = Path(__file__).with_name("qwen2.5-32b-q4_k_m.header.gguf")
L, E, H, KV, FF, V, CTX = 64, 5120, 40, 8, 27648, 152064, 32768
D = E // H
Q4K, Q6K, F32 = gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q6_K, gguf.GGMLQuantizationType.F32


def info(w: gguf.GGUFWriter, name: str, shape: tuple[int, ...], qtype: gguf.GGMLQuantizationType) -> None:
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    byte_shape = (*shape[:-1], shape[-1] // block * size)  # uint8 rows: what the writer expects
    w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)), raw_dtype=qtype)


w = gguf.GGUFWriter(str(OUT), "qwen2")
w.add_name("Qwen2.5 32B Instruct (header only)")
w.add_context_length(CTX)
w.add_embedding_length(E)
w.add_block_count(L)
w.add_feed_forward_length(FF)
w.add_head_count(H)
w.add_head_count_kv(KV)
w.add_layer_norm_rms_eps(1e-6)
w.add_rope_freq_base(1e6)
w.add_vocab_size(V)
w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
info(w, "token_embd.weight", (V, E), Q4K)
for i in range(L):
    info(w, f"blk.{i}.attn_norm.weight", (E,), F32)
    info(w, f"blk.{i}.attn_q.weight", (E, E), Q4K)
    info(w, f"blk.{i}.attn_q.bias", (E,), F32)
    info(w, f"blk.{i}.attn_k.weight", (KV * D, E), Q4K)
    info(w, f"blk.{i}.attn_k.bias", (KV * D,), F32)
    info(w, f"blk.{i}.attn_v.weight", (KV * D, E), Q6K)
    info(w, f"blk.{i}.attn_v.bias", (KV * D,), F32)
    info(w, f"blk.{i}.attn_output.weight", (E, E), Q4K)
    info(w, f"blk.{i}.ffn_norm.weight", (E,), F32)
    info(w, f"blk.{i}.ffn_gate.weight", (FF, E), Q4K)
    info(w, f"blk.{i}.ffn_up.weight", (FF, E), Q4K)
    info(w, f"blk.{i}.ffn_down.weight", (E, FF), Q6K)
info(w, "output_norm.weight", (E,), F32)
info(w, "output.weight", (V, E), Q6K)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_ti_data_to_file()
w.close()
print(OUT, OUT.stat().st_size, "bytes")
