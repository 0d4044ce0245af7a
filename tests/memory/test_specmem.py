"""Speculative decoding in the predicted KV pool (``engines/vllm/specmem.py``, ``engines/sglang/specmem.py``,
``memory/draft.py``): a vLLM draft's weights and attention layers come out of the pool by the release's arithmetic
(hand-computed here from the draft's config), MTP layers of the target likewise, n-gram changes nothing, a draft that
cannot be read is named and never passes a requirement silently; SGLang lowers its default ``mem_fraction_static``
by the release's speculative term and keeps the draft out of the pool."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import pytest
from packaging.version import Version

from pytest_gpulayout.deployment import Launch, Require
from pytest_gpulayout.engines.sglang.engine import memory_defaults
from pytest_gpulayout.engines.sglang.specmem import speculative_reserve_mib
from pytest_gpulayout.findings import Finding, Status
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.memory.pool import PoolPrediction
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.runner import evaluate
from tests.builders import dep

MODELS = Path(__file__).parents[1] / "data" / "models"
EAGLE = MODELS / "EAGLE-LLaMA3-Instruct-8B"
EAGLE3 = MODELS / "EAGLE3-LLaMA3.1-Instruct-8B"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
H100 = 81559
H200 = 143771

# -- the EAGLE head of EAGLE-LLaMA3-Instruct-8B, by hand from its config.json (fp16 = 2 bytes, TP 1) -------------
H, INTER, VOCAB = 4096, 14336, 128256
ATTN = H * H + 2 * H * 1024 + H * H          # q, k, v (8 KV heads x 128), o
MLP = 3 * H * INTER                          # gate, up, down
NORMS = 3 * H                                # the layer's two norms and the final norm
FC = 2 * H * H                               # EagleLlamaModel.fc: the target's hidden state folded in
EAGLE_LAYER_BYTES = 2 * (ATTN + MLP + NORMS + FC)
EMBED_BYTES = 2 * VOCAB * H                  # the embedding, and as much again for the lm_head
DRAFT_KV = 1 * 8 * (128 + 128) * 2           # one layer x 8 KV heads x (K + V) x 2 bytes, per token


def _machine(n: int = 1, total: int = H100, name: str = "NVIDIA H100 80GB HBM3") -> Machine:
    gpus = tuple(Gpu(i, name=name, memory_total_mib=total, memory_free_mib=total - 600, memory_reserved_mib=500)
                 for i in range(n))
    return Machine(gpus=gpus, links={(i, j): "NV18" for i in range(n) for j in range(i + 1, n)}, source="test")


def _check(model: str, args: list[str], *, version: str, tp: int = 1, engine: str = "vllm", total: int = H100,
           require: Require | None = None, max_model_len: int = 8192) -> Finding:
    d = dep("d", tp=tp, engine=engine, engine_version=version, max_model_len=max_model_len, require=require,
            launch=Launch(args=tuple(args), env=MappingProxyType({})))
    return evaluate(d, _machine(tp, total), load_model(model))["kv_pool"]


def _pool(f: Finding) -> PoolPrediction:
    preds = f.facts.predictions  # type: ignore[union-attr]
    assert isinstance(preds, tuple) and preds
    p = preds[0]
    assert isinstance(p, PoolPrediction)
    return p


def _spec(**config: object) -> list[str]:
    return ["--speculative-config", json.dumps(config)]


def _tokens(budget: int, per_token: int, block: int = 16) -> int:
    """vLLM: whole blocks of every layer's KV out of the budget (``kv_cache_utils``)."""
    return budget // (per_token * block) * block


def test_eagle_draft_weights_and_kv_come_out_of_the_pool_0_10_1() -> None:
    """0.10.1 builds the EAGLE head whole and swaps in the target's embedding (same shape, PP 1) and lm_head
    (``eagle`` always): the head's layer and ``fc`` stay, its one layer caches beside the target's 32."""
    base = _pool(_check(LLAMA, [], version="0.10.1"))
    f = _check(LLAMA, _spec(method="eagle", model=str(EAGLE), num_speculative_tokens=3), version="0.10.1")
    p = _pool(f)
    assert p.weights_bytes_per_rank - base.weights_bytes_per_rank == EAGLE_LAYER_BYTES
    assert p.kv_bytes_per_token_per_rank == base.kv_bytes_per_token_per_rank + DRAFT_KV == 131_072 + 4_096
    assert p.kv_budget_bytes_per_rank == base.kv_budget_bytes_per_rank - EAGLE_LAYER_BYTES
    assert p.kv_tokens == _tokens(p.kv_budget_bytes_per_rank, 131_072 + 4_096) < base.kv_tokens
    assert "the embedding and the lm_head shared with the target" in f.message
    assert "Not modelled" not in f.message and not p.uncounted


def test_eagle_from_0_11_1_shares_what_its_checkpoint_lacks(tmp_path: Path) -> None:
    """From 0.11.1 vLLM shares the embedding / lm_head a checkpoint lacks (``has_own_embed_tokens`` from the loaded
    names): a config alone is counted whole (the note says so); a checkpoint whose weight map has neither loads the
    layer and ``fc`` alone, as 0.10.1 does."""
    base = _pool(_check(LLAMA, [], version="0.33.0"))
    whole = _pool(_check(LLAMA, _spec(method="eagle", model=str(EAGLE), num_speculative_tokens=3), version="0.33.0"))
    assert whole.weights_bytes_per_rank - base.weights_bytes_per_rank == EAGLE_LAYER_BYTES + 2 * EMBED_BYTES
    assert any("tensors were not read" in n for n in whole.notes)
    draft = tmp_path / "EAGLE-LLaMA3-Instruct-8B"
    draft.mkdir()
    (draft / "config.json").write_text((EAGLE / "config.json").read_text())
    names = ["midlayer.self_attn.q_proj.weight", "midlayer.mlp.down_proj.weight", "fc.weight"]
    (draft / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": EAGLE_LAYER_BYTES}, "weight_map": {n: "model.safetensors" for n in names}}))
    lean = _pool(_check(LLAMA, _spec(method="eagle", model=str(draft), num_speculative_tokens=3), version="0.33.0"))
    assert lean.weights_bytes_per_rank - base.weights_bytes_per_rank == EAGLE_LAYER_BYTES
    assert lean.kv_bytes_per_token_per_rank == base.kv_bytes_per_token_per_rank + DRAFT_KV


def test_eagle3_keeps_its_own_draft_vocabulary_lm_head() -> None:
    """EAGLE-3's lm_head is ``draft_vocab_size`` (32,000) rows, not the target's 128,256: 0.10.1 never shares it,
    0.11.0 only where the shapes match, so both load it; its QKV reads 2 x hidden and its ``fc`` 3 x."""
    extra = 2 * (3 * H * H + H * (H + 2 * 1024)) - 2 * FC     # the EAGLE-3 fc and QKV input, less EAGLE's fc
    for version in ("0.10.1", "0.11.0"):
        base = _pool(_check(LLAMA, [], version=version))
        p = _pool(_check(LLAMA, _spec(method="eagle3", model=str(EAGLE3), num_speculative_tokens=3), version=version))
        assert p.weights_bytes_per_rank - base.weights_bytes_per_rank == EAGLE_LAYER_BYTES + extra + 2 * 32_000 * H
        assert p.kv_bytes_per_token_per_rank == base.kv_bytes_per_token_per_rank + DRAFT_KV


def test_mtp_loads_the_targets_own_layers() -> None:
    """DeepSeek-V3's one MTP layer (num_nextn_predict_layers) caches one more 576-wide latent per token; up to 0.15
    its ``shared_head`` is its own lm_head (129,280 / 8 rows x 7,168 x 2 bytes on each of 8 ranks), from 0.16 the
    target's."""
    line = _spec(method="deepseek_mtp", num_speculative_tokens=1)
    drafts = {}
    for version in ("0.15.1", "0.16.0"):
        base = _pool(_check("deepseek-ai/DeepSeek-V3", [], version=version, tp=8, total=H200))
        p = _pool(_check("deepseek-ai/DeepSeek-V3", line, version=version, tp=8, total=H200))
        assert p.kv_bytes_per_token_per_rank == base.kv_bytes_per_token_per_rank + (512 + 64) * 2 == 61 * 1152 + 1152
        assert p.kv_tokens < base.kv_tokens
        drafts[version] = p.weights_bytes_per_rank - base.weights_bytes_per_rank
    assert drafts["0.15.1"] - drafts["0.16.0"] == 129_280 // 8 * 7_168 * 2


@pytest.mark.parametrize("config", [{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
                                    {"method": "suffix", "num_speculative_tokens": 3}])
def test_ngram_and_suffix_take_nothing(config: dict[str, object]) -> None:
    base = _check(LLAMA, [], version="0.33.0")
    f = _check(LLAMA, _spec(**config), version="0.33.0")
    assert _pool(f).kv_tokens == _pool(base).kv_tokens
    assert "no draft model" in f.message and "Not modelled" not in f.message


def test_an_unreadable_draft_is_named_and_a_met_requirement_warns() -> None:
    """A draft that cannot be read leaves the pool an upper bound: the finding names it, and a requirement the
    uncounted pool meets is a warning, never a pass; the same line without speculative decoding passes."""
    need = Require(kv_tokens=100_000)
    plain = _check(LLAMA, [], version="0.33.0", require=need)
    assert plain.status is Status.PASS
    line = _spec(method="eagle3", model=str(MODELS / "no-such-eagle3-draft"), num_speculative_tokens=3)
    f = _check(LLAMA, line, version="0.33.0", require=need)
    assert f.status is Status.WARN, f.message
    assert "only as an upper bound" in f.message and "no-such-eagle3-draft" in f.message
    assert _pool(f).uncounted and _pool(f).kv_tokens == _pool(plain).kv_tokens


def test_the_draft_sits_on_the_last_pipeline_stage() -> None:
    """The V1 runner builds the drafter on the last PP rank only (gpu_model_runner.py ``is_last_rank``)."""
    d = dep("d", tp=1, pp=2, engine_version="0.10.1", max_model_len=8192,
            launch=Launch(args=tuple(_spec(method="eagle", model=str(EAGLE), num_speculative_tokens=3))))
    base = dep("d", tp=1, pp=2, engine_version="0.10.1", max_model_len=8192)
    p = _pool(evaluate(d, _machine(2), load_model(LLAMA))["kv_pool"])
    b = _pool(evaluate(base, _machine(2), load_model(LLAMA))["kv_pool"])
    assert p.weights_bytes_by_stage[0] == b.weights_bytes_by_stage[0]
    first, last = b.kv_bytes_per_token_by_stage
    assert p.kv_bytes_per_token_by_stage == (first, last + DRAFT_KV)
    # PP 2: the embedding is the draft's own (eagle.py shares it only where the PP world is 1)
    assert p.weights_bytes_by_stage[1] - b.weights_bytes_by_stage[1] == EAGLE_LAYER_BYTES + EMBED_BYTES


# -- SGLang -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("version", "algorithm", "mib"), [
    ("0.4.8", "EAGLE", 2048), ("0.4.8", "NGRAM", 2048), ("0.5.2", "STANDALONE", 6144), ("0.5.2", "EAGLE", 2048),
    ("0.5.6", "EAGLE", 2048), ("0.5.6", "NGRAM", 0), ("0.5.6", "STANDALONE", 6144), ("0.5.10", "EAGLE3", 4096),
    ("0.5.13.post1", "NEXTN", 4096), ("0.5.14", "EAGLE", 0), ("0.5.23", "STANDALONE", 0), ("0.4.7", "EAGLE", 0),
])
def test_sglang_speculative_reserve_by_release(version: str, algorithm: str, mib: int) -> None:
    assert speculative_reserve_mib(Version(version), algorithm) == mib


def test_sglang_default_fraction_takes_the_speculative_term_after_the_floor() -> None:
    """0.5.6 on an H100: ``reserved = max(512 + 1.5 x chunk + 2 x max_bs + 1024 / 8, 10 GiB) + 2 GiB`` for EAGLE
    (server_args.py L821-859)."""
    g = H100
    plain = memory_defaults(Version("0.5.6"), g, tp=1, pp=1)
    eagle = memory_defaults(Version("0.5.6"), g, tp=1, pp=1, speculative="EAGLE")
    assert plain.cuda_graph_max_bs is not None
    reserved = max(512 + max(plain.chunked_prefill_size, 2048) * 1.5 + plain.cuda_graph_max_bs * 2 + 1024 / 8,
                   10 * 1024)
    assert plain.mem_fraction_static == round((g - reserved) / g, 3)
    assert eagle.mem_fraction_static == round((g - reserved - 2048) / g, 3)
    assert "2048 of them for EAGLE speculative decoding" in eagle.why
    assert memory_defaults(Version("0.5.14"), g, tp=1, pp=1, speculative="EAGLE").mem_fraction_static == (
        memory_defaults(Version("0.5.14"), g, tp=1, pp=1).mem_fraction_static)


def test_sglang_eagle_lowers_the_default_pool_and_keeps_the_draft_out_of_it() -> None:
    line = ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", str(EAGLE),
            "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    base = _check(LLAMA, [], version="0.5.6", engine="sglang")
    f = _check(LLAMA, line, version="0.5.6", engine="sglang")
    p, b = _pool(f), _pool(base)
    assert p.memory_fraction < b.memory_fraction and p.kv_tokens < b.kv_tokens
    assert p.weights_bytes_per_rank == b.weights_bytes_per_rank and p.kv_bytes_per_token_per_rank == (
        b.kv_bytes_per_token_per_rank)
    assert "out of the (1 - mem_fraction_static) slack" in f.message and "Not modelled" not in f.message
    # a fraction given on the line is the line's: nothing is lowered
    given = _check(LLAMA, [*line, "--mem-fraction-static", "0.8"], version="0.5.6", engine="sglang")
    assert _pool(given).memory_fraction == 0.8


def test_the_drafts_own_kv_cache_dtype_from_0_28() -> None:
    """0.28+ reads ``speculative_config.kv_cache_dtype`` for the draft's layers (llm_base_proposer.py L1311-1316):
    an fp8 draft cache is half the bf16 one; 0.27 has no such key, and its draft caches in the target's dtype."""
    line = _spec(method="eagle", model=str(EAGLE), num_speculative_tokens=3, kv_cache_dtype="fp8")
    for version, draft_kv in (("0.28.0", DRAFT_KV // 2), ("0.27.0", DRAFT_KV)):
        base = _pool(_check(LLAMA, [], version=version))
        p = _pool(_check(LLAMA, line, version=version))
        assert p.kv_bytes_per_token_per_rank == base.kv_bytes_per_token_per_rank + draft_kv


def test_sglang_from_0_5_14_counts_the_draft_in_the_pool() -> None:
    """0.5.14 loads the draft before sizing the pool and scales the cell by (1 + draft layers / layers)
    (pool_configurator.py L129-145): EAGLE-LLaMA3's one layer over Llama-3.1-8B's 32 adds 1/32 of the cell, and its
    weights (the head built whole: layer, fc, embedding, lm_head) come out of the budget; 0.5.13 keeps it in the slack
    and lowers the default fraction by 4 GiB instead."""
    line = ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", str(EAGLE),
            "--mem-fraction-static", "0.85"]
    base = _pool(_check(LLAMA, ["--mem-fraction-static", "0.85"], version="0.5.23", engine="sglang"))
    f = _check(LLAMA, line, version="0.5.23", engine="sglang")
    p = _pool(f)
    assert p.kv_bytes_per_token_per_rank == int(131_072 * (1 + 1 / 32)) == 131_072 + 4_096
    assert p.weights_bytes_per_rank - base.weights_bytes_per_rank == EAGLE_LAYER_BYTES + 2 * EMBED_BYTES
    assert p.kv_tokens == (base.kv_budget_bytes_per_rank - EAGLE_LAYER_BYTES - 2 * EMBED_BYTES) // (131_072 + 4_096)
    assert "scales the cell size" in f.message
    old_base = _pool(_check(LLAMA, ["--mem-fraction-static", "0.85"], version="0.5.13", engine="sglang"))
    old = _pool(_check(LLAMA, line, version="0.5.13", engine="sglang"))
    assert old.kv_tokens == old_base.kv_tokens  # a fraction given: the draft sits in the slack


def test_sglang_nextn_without_a_draft_path_uses_the_targets_mtp_layer() -> None:
    """NEXTN on DeepSeek-V3 drafts with the target's checkpoint (speculative_hook.py L290-306): one more 576-wide
    latent per token over 61 layers, and the MTP layer with the embedding and head it builds (129,280 / 8 rows x
    7,168 x 2 bytes each) on every rank."""
    args = ["--mem-fraction-static", "0.88"]
    base = _pool(_check("deepseek-ai/DeepSeek-V3", args, version="0.5.23", engine="sglang", tp=8, total=H200))
    line = [*args, "--speculative-algorithm", "NEXTN"]
    p = _pool(_check("deepseek-ai/DeepSeek-V3", line, version="0.5.23", engine="sglang", tp=8, total=H200))
    assert p.kv_bytes_per_token_per_rank == int(61 * 1152 * (1 + 1 / 61)) == 62 * 1152
    draft = p.weights_bytes_per_rank - base.weights_bytes_per_rank
    assert draft > 2 * 129_280 // 8 * 7_168 * 2 and p.kv_tokens < base.kv_tokens


def test_v0_loads_an_eagle_draft_whole() -> None:
    """0.8.2 has no V1 EAGLE proposer (v1/spec_decode/ holds ngram_proposer.py alone): V0's proposer worker loads the
    head as a model of its own, ``fc``, embedding and lm_head included; its layer caches beside the target's
    (``split_num_cache_blocks_evenly``)."""
    base = _pool(_check(LLAMA, [], version="0.8.2"))
    line = _spec(method="eagle", model=str(EAGLE), num_speculative_tokens=3)
    p = _pool(_check(LLAMA, line, version="0.8.2"))
    assert p.weights_bytes_per_rank - base.weights_bytes_per_rank == EAGLE_LAYER_BYTES + 2 * EMBED_BYTES
    assert p.kv_bytes_per_token_per_rank == base.kv_bytes_per_token_per_rank + DRAFT_KV


def test_sglang_standalone_scales_the_cell_by_the_drafts_layer_count() -> None:
    """STANDALONE drafts with a model of its own; 0.5.14+ still scales the target's cell by its layer count, as if
    its layers were the target's (pool_configurator.py L129-145: "Assumes draft and target share the same per-layer
    KV size"): a 2-layer draft over 32 layers adds 2/32 of the cell, whatever its own heads."""
    draft = MODELS / "tiny-llama-2l"
    line = ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", str(draft),
            "--mem-fraction-static", "0.85"]
    base = _pool(_check(LLAMA, ["--mem-fraction-static", "0.85"], version="0.5.23", engine="sglang"))
    p = _pool(_check(LLAMA, line, version="0.5.23", engine="sglang"))
    assert p.kv_bytes_per_token_per_rank == int(131_072 * (1 + 2 / 32))
    assert p.weights_bytes_per_rank > base.weights_bytes_per_rank


def test_sglang_before_0_5_14_warns_when_the_draft_does_not_fit_the_slack() -> None:
    """0.5.6 builds the draft after the pool, from ``pre x (1 - mem_fraction_static)``: at 0.95 the EAGLE head's
    weights and its KV pool of the target's token count (plus the headroom of 3 steps x topk 1 + 4 draft tokens for
    ``min(max(tokens / 8,192 x 512, 2,048), 4,096)`` requests, model_runner.py L1676-1718) exceed the slack, so the
    pool's verdict warns; at 0.85 they fit and it passes."""
    spec = ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", str(EAGLE),
            "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    tight = _check(LLAMA, [*spec, "--mem-fraction-static", "0.95"], version="0.5.6", engine="sglang")
    assert tight.status is Status.WARN and "likely to run out of memory at launch" in tight.message
    p = _pool(tight)
    reqs = min(max(int(p.kv_tokens / 8192 * 512), 2048), 4096)
    pool = p.kv_tokens + reqs * (3 * 1 + 4) + 100
    assert f"a KV pool of {pool:,} tokens x 4,096 B" in tight.message
    roomy = _check(LLAMA, [*spec, "--mem-fraction-static", "0.85"], version="0.5.6", engine="sglang")
    assert roomy.status is Status.PASS and not _pool(roomy).cautions
