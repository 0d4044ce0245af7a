"""What the startup logs nobody tuned to caught (issue 20), each rule read in the released wheels
(``pip download --no-deps vllm==X``, read with zipfile):

1. Profiled tokens in V0: with chunked prefill off the profile run batches ``max(max_model_len, 2048)``
   tokens (0.5.2 ``config.py SchedulerConfig``; ``worker/model_runner.py profile_run`` spreads
   ``max_num_batched_tokens`` over ``max_num_seqs`` dummy sequences). 0.5.3 turns chunked prefill on
   by default above 32K (``engine/arg_utils.py create_engine_config``) without a sliding window,
   and then batches 512 tokens (0.5.3-0.6.4 ``config.py``), 2048 from 0.7.0.
2. The V0 fallback below compute capability 8.0 in 0.8.0-0.10.1 (``engine/arg_utils.py
   _is_v1_supported_oracle``: "Compute Capability < 8.0"); 0.10.2 has no such check.
3. The sampler warm-up follows the engine's image: ``launch.env``'s ``VLLM_USE_FLASHINFER_SAMPLER``
   states it; otherwise the host running the check is assumed, and the note says so.
4. Vision towers: Qwen2-VL's ViT is ``vision_config.embed_dim`` wide (``models/qwen2_vl.py``).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from packaging.version import Version

from pytest_gpulayout.engines.vllm.defaults import (
    flashinfer_in_engine_image,
    runs_v0,
    scheduler_defaults,
    v0_chunked_prefill,
)
from pytest_gpulayout.engines.vllm.engine import VLLM
from pytest_gpulayout.host import BARE_HOST, Host
from pytest_gpulayout.knobs import LaunchKnobs, Serving
from pytest_gpulayout.machine.facts import GIB, Gpu
from pytest_gpulayout.memory.capability import capability_from_name, compute_capability
from pytest_gpulayout.memory.communicators import TpLink
from pytest_gpulayout.memory.pool import PoolPrediction, predict_pool
from pytest_gpulayout.model import weights as W
from pytest_gpulayout.model.config import spec_from_config
from pytest_gpulayout.model.spec import ModelSpec

T4_MIB = 15360

#: deepseek-coder-6.7b-instruct's shape (a Llama: 32 x 4096, 32 heads, 32,256 tokens, fp16 on T4s)
CODER_67B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32, "num_hidden_layers": 32,
    "vocab_size": 32256, "max_position_embeddings": 65536, "torch_dtype": "float16", "tie_word_embeddings": False,
}


def _coder() -> ModelSpec:
    return spec_from_config(CODER_67B, name="deepseek-coder-6.7b", source="test")


def _on(name: str, n: int, total: int) -> list[Gpu]:
    return [Gpu(i, name=name, memory_total_mib=total, memory_free_mib=total - 500) for i in range(n)]


def _predict(model: ModelSpec, version: str, gpus: list[Gpu], max_model_len: int, *, host: Host = BARE_HOST,
             env: dict[str, str] | None = None) -> PoolPrediction:
    return predict_pool(model, engine=VLLM.memory, engine_version=version, tp=len(gpus), pp=1, gpus=gpus,
                        max_model_len=max_model_len, memory_fraction=0.9, link=TpLink.PCIE, host=host,
                        knobs=LaunchKnobs(env=env or {}))


# -- 1. V0's profiled tokens ----------------------------------------------------------------------

def test_before_0_5_3_the_profile_run_batches_the_whole_context() -> None:
    """0.5.2 ``config.py SchedulerConfig``: ``max_num_batched_tokens = max(max_model_len, 2048)``
    with chunked prefill off, its only default; 0.5.3 chunks above 32K (512 tokens)."""
    assert scheduler_defaults(Version("0.5.2"), gpu_total_mib=T4_MIB, max_model_len=65536) == (65536, 256)
    assert scheduler_defaults(Version("0.5.3"), gpu_total_mib=T4_MIB, max_model_len=65536) == (512, 256)
    assert scheduler_defaults(Version("0.7.0"), gpu_total_mib=T4_MIB, max_model_len=65536) == (2048, 256)
    assert scheduler_defaults(Version("0.5.2"), gpu_total_mib=T4_MIB, max_model_len=1024) == (2048, 256)


def test_6_7b_at_64k_on_two_t4s_on_0_5_2_keeps_the_profile_peak_out_of_the_pool() -> None:
    """The +208 % case: a 6.7B model at a 64K context on two T4s. On 0.5.2 the profile run's 65,536
    tokens take GiBs the pool does not get; 0.5.3 chunks them and the pool is more than twice as big."""
    old = _predict(_coder(), "0.5.2", _on("Tesla T4", 2, T4_MIB), 65536)
    new = _predict(_coder(), "0.5.3", _on("Tesla T4", 2, T4_MIB), 65536)
    assert "max_num_batched_tokens 65536" in old.activation_reserve_why
    assert old.activation_reserve_gib > 3.0
    assert new.kv_tokens > 2 * old.kv_tokens


@pytest.mark.parametrize(("version", "kwargs", "chunked"), [
    ("0.5.2", {}, False),                                  # no default before 0.5.3
    ("0.5.3", {}, True),
    ("0.6.4", {"sliding_window": True}, False),            # "not use_sliding_window"
    ("0.5.4", {"multimodal": True}, True),                 # multimodal kept only from 0.6.4
    ("0.6.4", {"multimodal": True}, False),
    ("0.7.3", {"mla": True}, True),
    ("0.8.5", {"mla": True}, False),                       # "not supported for Multimodal or MLA in V0"
])
def test_which_v0_releases_chunk_a_long_context(version: str, kwargs: dict[str, bool], chunked: bool) -> None:
    assert v0_chunked_prefill(Version(version), max_model_len=65536, **kwargs) is chunked
    assert v0_chunked_prefill(Version(version), max_model_len=32768, **kwargs) is False


def test_a_sliding_window_model_at_64k_on_0_6_4_batches_the_whole_context() -> None:
    """Mistral-7B-v0.1 (a 4,096-token window): 0.6.4 leaves chunked prefill off, so the profile run
    batches all 65,536 tokens (it assumed 2,048 before)."""
    cfg = dict(CODER_67B, architectures=["MistralForCausalLM"], model_type="mistral", num_key_value_heads=8,
               intermediate_size=14336, vocab_size=32000, sliding_window=4096, max_position_embeddings=65536)
    m = spec_from_config(cfg, name="mistral-7b-v0.1", source="test")
    p = _predict(m, "0.6.4", _on("NVIDIA GeForce RTX 3090", 2, 24576), 65536)
    assert "max_num_batched_tokens 65536" in p.activation_reserve_why


# -- 2. V0 below compute capability 8.0 -----------------------------------------------------------

@pytest.mark.parametrize(("version", "cc", "v0"), [
    ("0.7.3", 9.0, True), ("0.8.0", 7.5, True), ("0.9.2", 7.0, True), ("0.10.1", 7.5, True),
    ("0.10.1", 8.0, False), ("0.10.1", None, False), ("0.10.2", 7.5, False), ("0.11.0", 7.5, False),
])
def test_v1_falls_back_to_v0_below_sm80_until_0_10_2(version: str, cc: float | None, v0: bool) -> None:
    assert runs_v0(Version(version), compute_capability=cc) is v0


def test_gpu_names_give_their_compute_capability() -> None:
    assert capability_from_name("Tesla T4") == 7.5
    assert capability_from_name("NVIDIA GeForce RTX 2080 Ti") == 7.5
    assert capability_from_name("Tesla V100-SXM2-32GB") == 7.0
    assert capability_from_name("Tesla P100-PCIE-16GB") == 6.0
    assert capability_from_name("NVIDIA RTX A6000") == 8.6
    assert capability_from_name("NVIDIA H100 80GB HBM3") == 9.0
    assert capability_from_name("some accelerator") is None
    # the machine's own reading wins once ``Gpu.compute_capability`` exists
    assert compute_capability(cast(Gpu, SimpleNamespace(name="Tesla T4", compute_capability=(8, 0)))) == 8.0


def test_0_10_1_on_t4s_is_predicted_as_v0_and_says_so() -> None:
    """On T4s 0.10.1 runs V0: its budget is 0.7.x's (baseline snapshot, the sampler on rank 0, and at
    16K chunked prefill off, so the profile run batches all 16,384 tokens), not V1's 2,048; 0.10.2
    runs V1 there."""
    t4 = _on("Tesla T4", 2, T4_MIB)
    fallback, v0, v1 = (_predict(_coder(), v, t4, 16384) for v in ("0.10.1", "0.7.3", "0.10.2"))
    assert fallback.kv_tokens == v0.kv_tokens < v1.kv_tokens
    assert "max_num_batched_tokens 16384" in fallback.activation_reserve_why
    assert "max_num_batched_tokens 2048" in v1.activation_reserve_why
    assert any("falls back to its V0 engine on Tesla T4" in n and "7.5" in n for n in fallback.notes)
    assert not any("V0 engine" in n for n in v1.notes)
    a10 = _on("NVIDIA A10G", 2, 23028)                     # 8.6: V1 on 0.10.1 too
    assert not any("V0 engine" in n for n in _predict(_coder(), "0.10.1", a10, 16384).notes)


# -- 3. The sampler follows the engine's image ----------------------------------------------------

def test_launch_env_states_flashinfer_in_the_engine_image() -> None:
    v = Version("0.10.1")
    # nothing said: the machine the check runs on decides nothing, even with FlashInfer installed there;
    # PyTorch's sort (the larger reserve) is assumed and the note says how to state it
    installed, why = flashinfer_in_engine_image(v, env={}, host_env={}, host_flashinfer="0.2.11")
    assert not installed and "the deployment names no image" in why
    assert "launch.env VLLM_USE_FLASHINFER_SAMPLER" in why
    # the launch runs this environment's vLLM: its flashinfer-python is the engine's
    installed, why = flashinfer_in_engine_image(v, env={}, host_env={}, host_flashinfer="0.2.11",
                                                serving=Serving(engine_here=True))
    assert installed and "installed in this environment" in why
    # vLLM's official image ships FlashInfer; another image is not known to
    installed, why = flashinfer_in_engine_image(v, env={}, host_env={}, host_flashinfer=None,
                                                serving=Serving(image="vllm/vllm-openai:v0.10.1"))
    assert installed and "as in the vllm/vllm-openai:v0.10.1 image" in why
    installed, why = flashinfer_in_engine_image(v, env={}, host_env={}, host_flashinfer="0.2.11",
                                                serving=Serving(image="ghcr.io/acme/vllm:0.10.1"))
    assert not installed and "is not vLLM's official one" in why
    # launch.env says the image samples with FlashInfer, even where the check's host lacks it
    installed, why = flashinfer_in_engine_image(v, env={"VLLM_USE_FLASHINFER_SAMPLER": "1"}, host_env={},
                                                host_flashinfer=None)
    assert installed and "launch.env VLLM_USE_FLASHINFER_SAMPLER=1" in why
    # outside 0.8-0.11 installation decides nothing: no note
    assert flashinfer_in_engine_image(Version("0.16.0"), env={}, host_env={}, host_flashinfer=None)[1] == ""


def test_a_laptop_without_flashinfer_does_not_charge_the_engines_sort() -> None:
    """gpt-oss-120b on one H100 with 0.10.1: the preflight host has no FlashInfer, the deployment
    states the engine's image samples with it; the 7.3 GiB sort is not charged, and the note says
    which was assumed."""
    from pytest_gpulayout.model.load import load_model

    h100 = _on("NVIDIA H100 80GB HBM3", 1, 81559)
    oss = load_model("openai/gpt-oss-120b")
    laptop = _predict(oss, "0.10.1", h100, 131072)
    stated = _predict(oss, "0.10.1", h100, 131072, env={"VLLM_USE_FLASHINFER_SAMPLER": "1"})
    assert laptop.activation_reserve_gib - stated.activation_reserve_gib > 5.0
    assert any("the deployment names no image" in n for n in laptop.notes)
    assert any("taken as the engine image's statement" in n for n in stated.notes)


# -- 4. Vision towers -----------------------------------------------------------------------------

QWEN2_VL_7B: dict[str, Any] = {
    "architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl", "hidden_size": 3584,
    "intermediate_size": 18944, "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28,
    "vocab_size": 152064, "max_position_embeddings": 32768, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "sliding_window": 32768, "use_sliding_window": False, "max_window_layers": 28,
    "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3,
                      "hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
}


def test_qwen2_vl_vision_tower_is_embed_dim_wide() -> None:
    """Qwen/Qwen2-VL-7B-Instruct (8.29B on the Hub): ``vision_config.hidden_size`` 3,584 is the
    merger's output; the ViT is 1,280 wide (``models/qwen2_vl.py``). Read as 3,584 the weights came
    to 23.4 GiB and the check failed a model that loads in 15.5."""
    m = spec_from_config(QWEN2_VL_7B, name="Qwen2-VL-7B-Instruct", source="test")
    assert m.vision_hidden_size == 1280 and m.vision_num_layers == 32
    assert 0.66e9 < m.vision_params < 0.69e9
    assert 8.2e9 < W.total_params(m) < 8.35e9
    assert W.computed_weight_bytes(m, on_disk=True) / GIB < 16.0


def test_qwen2_5_vl_vision_tower_has_gated_mlps_and_an_out_hidden_size() -> None:
    """Qwen/Qwen2.5-VL-7B-Instruct (8.29B): ``hidden_size`` 1,280 is the ViT's, gated MLPs of 3,420
    (``models/qwen2_5_vl.py``), merged into ``out_hidden_size`` 3,584."""
    cfg = dict(QWEN2_VL_7B, architectures=["Qwen2_5_VLForConditionalGeneration"], model_type="qwen2_5_vl",
               vision_config={"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                              "in_chans": 3, "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2,
                              "temporal_patch_size": 2, "fullatt_block_indexes": [7, 15, 23, 31]})
    m = spec_from_config(cfg, name="Qwen2.5-VL-7B-Instruct", source="test")
    assert m.vision_hidden_size == 1280
    assert 8.2e9 < W.total_params(m) < 8.35e9


# -- 6. A filled-in default is said ---------------------------------------------------------------

def test_the_kv_pool_verdict_names_the_defaults_a_config_left_out() -> None:
    """LLaVA-1.5's text_config leaves out the LlamaConfig defaults (heads, layers, width); a truncated
    config.json leaves out its dtype and MLP width. The pool verdict names each key and the value used."""
    from builders import dep, subject

    from pytest_gpulayout.machine.facts import Machine
    from pytest_gpulayout.model.load import load_model
    from pytest_gpulayout.rules.kv_pool import check_kv_pool

    llava = load_model(str(Path(__file__).resolve().parents[1] / "data" / "models" / "llava-1.5-7b-hf"))
    machine = Machine(gpus=tuple(_on("NVIDIA L4", 2, 23034)))
    f = check_kv_pool(subject(dep(tp=2, max_model_len=4096), machine, llava))
    assert "num_attention_heads=32" in f.message and "hidden_size=4096" in f.message, f.message
    truncated = {k: v for k, v in CODER_67B.items() if k not in ("torch_dtype", "intermediate_size")}
    p = _predict(spec_from_config(truncated, name="truncated", source="test"), "0.10.2",
                 _on("NVIDIA L4", 1, 23034), 4096)
    assert any("No torch_dtype in the config: bfloat16 assumed" in n for n in p.notes)
    assert any("llama defaults" in n and "intermediate_size=11008" in n for n in p.notes)  # LlamaConfig's


# -- 5. SGLang's multimodal adjustments by era ----------------------------------------------------

@pytest.mark.parametrize(("version", "factor"), [("0.4.3.post4", 0.95), ("0.4.6", 0.90), ("0.4.9", 1.0),
                                                 ("0.5.2", 1.0)])
def test_sglang_0_4_runner_shrinks_the_fraction_of_a_multimodal_model(version: str, factor: float) -> None:
    """0.4.3.post4 ``model_executor/model_runner.py``: ``if self.is_multimodal:
    self.mem_fraction_static *= 0.95`` (0.90 in 0.4.6), a given fraction included; the pool shrinks by
    ``pre x (1 - factor) x fraction`` against the same model without a vision tower."""
    from pytest_gpulayout.engines.sglang.engine import SGLANG

    vl = spec_from_config(QWEN2_VL_7B, name="Qwen2-VL-7B-Instruct", source="test")
    text = spec_from_config({k: v for k, v in QWEN2_VL_7B.items() if k != "vision_config"}, name="t", source="t")
    gpus = _on("NVIDIA H100 80GB HBM3", 1, 81559)

    def pool(m: ModelSpec) -> PoolPrediction:
        return predict_pool(m, engine=SGLANG.memory, engine_version=version, tp=1, pp=1, gpus=gpus, max_model_len=32768,
                            memory_fraction=0.85)

    with_vision, without = pool(vl), pool(text)
    vision_kv = (W.computed_weight_bytes(vl, on_disk=True) - W.computed_weight_bytes(text, on_disk=True))
    shrink = without.kv_budget_bytes_per_rank - with_vision.kv_budget_bytes_per_rank - vision_kv
    pre_gib = (81559 - 500) / 1024 - 0.24
    assert shrink / GIB == pytest.approx(pre_gib * 0.85 * (1 - factor), abs=0.05)
    assert any("multimodal model" in n for n in with_vision.notes) is (factor != 1.0)


def _sglang_default(version: str, m: ModelSpec, *, pp: int = 1) -> PoolPrediction:
    from pytest_gpulayout.engines.sglang.engine import SGLANG

    gpus = _on("NVIDIA H100 80GB HBM3", pp, 81559)
    return predict_pool(m, engine=SGLANG.memory, engine_version=version, tp=1, pp=pp, gpus=gpus, max_model_len=32768,
                        memory_fraction=None)


def _vl(arch: str) -> ModelSpec:
    return spec_from_config(dict(QWEN2_VL_7B, architectures=[arch]), name=arch, source="test")


#: the prefill-graph reserve of an 8,192-token chunk on an H100: 58 captured sizes x 8 MiB
PREFILL_RESERVE_MIB = 58 * 8


def test_sglang_0_5_23_keeps_no_prefill_graph_reserve_for_a_multimodal_model() -> None:
    """0.5.23 ``arg_groups/cuda_graph_hook.py disable_breakable_cudagraph_if_incompatible``: "multimodal
    model" turns the prefill CUDA graph off unless the architecture is on
    ``multimodal_breakable_cuda_graph_supported_model_archs`` (``configs/model_config.py``), and
    ``arg_groups/pipeline.py`` runs it before ``handle_gpu_memory_settings``, whose ``reserve_for_graph_mb``
    counts prefill graphs only when they are on. Qwen2.5-VL on an H100: (81,559 - 13,440) / 81,559 = 0.835
    before the vision-tower factor, not (81,559 - 13,904) / 81,559 = 0.83; its text twin keeps the reserve."""
    from pytest_gpulayout.engines.sglang.engine import memory_defaults

    vl = _vl("Qwen2_5_VLForConditionalGeneration")
    text = spec_from_config({k: v for k, v in QWEN2_VL_7B.items() if k != "vision_config"}, name="t", source="t")
    with_graphs, without = round((81559 - 13904) / 81559, 3), round((81559 - 13440) / 81559, 3)
    p_vl, p_text = _sglang_default("0.5.23", vl), _sglang_default("0.5.23", text)
    assert p_text.memory_fraction == with_graphs
    tower = 0.95 * 0.8  # adjust_mem_fraction_for_vlm: no num_hidden_layers (24) x hidden_size 3,584, clamped
    assert p_vl.memory_fraction == pytest.approx(without * tower)
    said = [n for n in p_vl.notes if "prefill CUDA graphs" in n]
    assert said == [
        "SGLang 0.5.23 disables prefill CUDA graphs for Qwen2_5_VLForConditionalGeneration (not in its allow-list, "
        "configs/model_config.py multimodal_breakable_cuda_graph_supported_model_archs; arg_groups/cuda_graph_hook.py "
        "disable_breakable_cudagraph_if_incompatible): its default mem_fraction_static keeps no memory for them."]
    assert "no prefill CUDA graphs for this model" in p_vl.fraction_source
    assert not any("prefill CUDA graphs" in n for n in p_text.notes)
    v = Version("0.5.23")
    assert memory_defaults(v, 81559, tp=1, pp=1).mem_fraction_static == with_graphs
    assert memory_defaults(v, 81559, tp=1, pp=1, prefill_graphs=False).mem_fraction_static == without


@pytest.mark.parametrize(("version", "arch", "off"), [
    ("0.5.9", "Qwen2_5_VLForConditionalGeneration", False),   # prefill graphs opt-in: nothing to turn off
    ("0.5.10", "Qwen2_5_VLForConditionalGeneration", True),   # server_args.py: every multimodal model
    ("0.5.15", "Qwen3_5ForConditionalGeneration", True),      # breakable rule without an allow-list
    ("0.5.23", "Qwen3_5ForConditionalGeneration", False),     # on the 0.5.23 allow-list
    ("0.5.23", "Gemma3ForConditionalGeneration", False),      # mm_disabled_models: served as a text model
    ("0.5.23", "Llama4ForConditionalGeneration", False),
])
def test_sglang_prefill_graphs_off_for_multimodal_models_by_release(version: str, arch: str, off: bool) -> None:
    """The boundary: 0.5.10 made prefill (piecewise) CUDA graphs the default and ``_handle_piecewise_cuda_graph``
    turned them off for every multimodal model (0.5.10 ``server_args.py``, rule 9); 0.5.15's breakable default
    spared none; 0.5.16+ spare the allow-list; ``ModelConfig`` leaves multimodal input off for Gemma 3 and
    Llama 4 unless ``--enable-multimodal``, so they keep the graphs."""
    p = _sglang_default(version, _vl(arch))
    notes = [n for n in p.notes if "disables prefill CUDA graphs" in n]
    assert bool(notes) is off, p.notes
    if off:
        assert f"SGLang {version} disables prefill CUDA graphs for " in notes[0]
    if version == "0.5.10":
        assert "every multimodal model (server_args.py _handle_piecewise_cuda_graph)" in notes[0]


def test_sglang_prefill_graph_allow_list_comes_from_the_release_facts() -> None:
    """The allow-list is data: the extracted ``prefill_graphs`` of ``releases/0.5.23.json``. The same model
    is spared once the facts list it, and a PP deployment (no prefill graphs anyway) says nothing."""
    from pytest_gpulayout.engines.sglang.prefill_graphs import prefill_graphs_off
    from pytest_gpulayout.generation import ReleaseFacts, release_facts

    facts = release_facts("sglang", Version("0.5.23"))
    assert facts is not None
    vl = _vl("Qwen2_5_VLForConditionalGeneration")
    assert prefill_graphs_off(Version("0.5.23"), vl, facts) is not None
    graphs = dict(facts.data["prefill_graphs"])
    mm = dict(graphs["multimodal"])
    allow = dict(mm["allow_list"], archs=[*mm["allow_list"]["archs"], "Qwen2_5_VLForConditionalGeneration"])
    graphs["multimodal"] = dict(mm, allow_list=allow)
    listed = ReleaseFacts("sglang", facts.asked, facts.release, {**facts.data, "prefill_graphs": graphs})
    assert prefill_graphs_off(Version("0.5.23"), vl, listed) is None
    assert prefill_graphs_off(Version("0.5.24"), vl, facts) is not None  # a later release: its nearest facts
    assert not any("prefill CUDA graphs" in n for n in _sglang_default("0.5.23", vl, pp=2).notes)


def _sglang_with(version: str, m: ModelSpec, args: list[str], *, pp: int = 1) -> PoolPrediction:
    from pytest_gpulayout.engines.sglang.engine import SGLANG

    gpus = _on("NVIDIA H100 80GB HBM3", pp, 81559)
    return predict_pool(m, engine=SGLANG.memory, engine_version=version, tp=1, pp=pp, gpus=gpus, max_model_len=32768,
                        memory_fraction=None, knobs=SGLANG.cli.knobs(args, {}))


def test_sglang_vision_tower_factor_reads_the_config_objects_attributes() -> None:
    """``adjust_mem_fraction_for_vlm`` reads ``getattr(vision_config, "num_hidden_layers", 24)`` and
    ``getattr(vision_config, "hidden_size", 1024)``; transformers' Qwen2-VL / Qwen2.5-VL vision configs
    (4.57.1-5.19.0) define no ``num_hidden_layers``, and Qwen2-VL's ``hidden_size`` is the merger's 3,584.
    Qwen2-VL: 24 x 3,584^2 -> clamped to 0.8 (x 0.95 = 0.76), not 32 x 1,280^2 (0.847); Qwen2.5-VL: 24 x 1,280^2."""
    from pytest_gpulayout.engines.sglang.multimodal import vision_tower_factor

    qwen2 = spec_from_config(QWEN2_VL_7B, name="Qwen2-VL-7B-Instruct", source="test")
    assert vision_tower_factor(qwen2) == pytest.approx(0.76)
    cfg = dict(QWEN2_VL_7B, architectures=["Qwen2_5_VLForConditionalGeneration"], model_type="qwen2_5_vl",
               vision_config={"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                              "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2})
    qwen25 = spec_from_config(cfg, name="Qwen2.5-VL-7B-Instruct", source="test")
    assert vision_tower_factor(qwen25) == pytest.approx(0.95 * (1 - 0.1 * (1280 ** 2 / 1024 ** 2 - 1)))
    llava = dict(CODER_67B, architectures=["LlavaForConditionalGeneration"], model_type="llava",
                 vision_config={"hidden_size": 1024, "num_hidden_layers": 24, "intermediate_size": 4096,
                                "patch_size": 14, "image_size": 336})
    assert vision_tower_factor(spec_from_config(llava, name="llava", source="test")) == pytest.approx(0.95)


@pytest.mark.parametrize(("version", "arch", "args", "text_only"), [
    ("0.4.10", "Gemma3ForConditionalGeneration", [], True),
    ("0.5.6", "Llama4ForConditionalGeneration", [], True),
    ("0.5.6", "Gemma3ForConditionalGeneration", ["--enable-multimodal"], False),
    ("0.4.10", "Step3VLForConditionalGeneration", [], False),    # on the list from 0.5.1
    ("0.5.15", "InklingForConditionalGeneration", [], False),    # on the list from 0.5.16
    ("0.5.16", "InklingForConditionalGeneration", [], True),
    ("0.5.10", "Gemma3ForConditionalGeneration", ["--model-impl", "transformers"], False),
    ("0.5.9", "Gemma3ForConditionalGeneration", ["--model-impl", "transformers"], True),
])
def test_sglang_serves_mm_disabled_models_as_text_models(version: str, arch: str, args: list[str],
                                                         text_only: bool) -> None:
    """``ModelConfig.__init__`` (``configs/model_config.py``): ``mm_disabled_models`` leave multimodal input off
    unless ``--enable-multimodal`` (0.5.10+: not with ``--model-impl transformers``), so ``is_multimodal`` is False
    and ``adjust_mem_fraction_for_vlm`` does not run: no vision-tower factor on the default fraction."""
    p = _sglang_with(version, _vl(arch), args)
    assert ("for the vision tower" not in p.fraction_source) is text_only, p.fraction_source
    assert any("leaves multimodal input off" in n for n in p.notes) is text_only


def _mla(**extra: Any) -> ModelSpec:
    import dataclasses

    return dataclasses.replace(_coder(), kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
                               v_head_dim=128, **extra)


@pytest.mark.parametrize(("version", "sparse", "off"), [
    ("0.5.14", False, False), ("0.5.15", False, True), ("0.5.16", False, True), ("0.5.17", False, True),
    ("0.5.17", True, False), ("0.5.18", False, False)])
def test_sglang_breakable_prefill_graphs_are_off_for_mla(version: str, sparse: bool, off: bool) -> None:
    """0.5.15-0.5.16 ``server_args.py _disable_breakable_cudagraph_if_incompatible``: "MLA attention"; 0.5.17:
    "MLA attention (non-DSA)"; 0.5.18 drops it. With the graphs off there is no 1.5 GiB MLA prefill reserve."""
    from pytest_gpulayout.engines.sglang.prefill_graphs import prefill_graphs_off

    m = _mla(index_head_dim=128) if sparse else _mla()
    reason = prefill_graphs_off(Version(version), m, None)
    assert (reason is not None and "MLA attention" in reason) is off, reason


@pytest.mark.parametrize(("version", "captured"), [("0.5.14", False), ("0.5.15", True), ("0.5.18", True),
                                                   ("0.5.19", False)])
def test_sglang_prefill_graphs_stay_on_with_pp_on_0_5_15_to_0_5_18(version: str, captured: bool) -> None:
    """The breakable rules of 0.5.15-0.5.18 have no PP check; 0.5.14's tc_piecewise rules and 0.5.19's
    ``arg_groups/cuda_graph_hook.py`` (l.122) turn the prefill graphs off for PP > 1."""
    from pytest_gpulayout.engines.sglang.engine import memory_defaults

    v = Version(version)
    pp2 = memory_defaults(v, 81559, tp=1, pp=2).mem_fraction_static
    eager = memory_defaults(v, 81559, tp=1, pp=2, prefill_graphs=False).mem_fraction_static
    assert (pp2 != eager) is captured


@pytest.mark.parametrize(("version", "arch", "args", "said"), [
    ("0.5.12", "LlamaForCausalLM", ["--disable-piecewise-cuda-graph"], "--disable-piecewise-cuda-graph"),
    ("0.5.10", "LlamaForCausalLM", ["--speculative-algorithm", "EAGLE"], "speculative decoding"),
    ("0.5.11", "LlamaForCausalLM", ["--speculative-algorithm", "EAGLE"], None),
    ("0.5.13", "LlamaForCausalLM", ["--enable-dp-attention"], "DP attention"),
    ("0.5.14", "LlamaForCausalLM", ["--enable-lora"], "LoRA"),
    ("0.5.14", "Qwen3NextForCausalLM", [], "piecewise_cuda_graph_disabled_model_archs"),
    ("0.5.17", "LlamaForCausalLM", ["--enable-dp-attention"], None),
    ("0.5.23", "LlamaForCausalLM", ["--disable-prefill-cuda-graph"], "--disable-prefill-cuda-graph"),
    ("0.5.23", "LlamaForCausalLM", ["--dcp-size", "2"], "decode context parallel"),
    ("0.5.23", "LlamaForCausalLM", ["--enable-two-batch-overlap"], "two-batch overlap"),
])
def test_sglang_prefill_graphs_off_for_what_the_deployment_states(version: str, arch: str, args: list[str],
                                                                   said: str | None) -> None:
    """0.5.10-0.5.13 ``server_args.py _handle_piecewise_cuda_graph`` (speculative decoding only in 0.5.10), 0.5.14
    ``_disable_tc_piecewise_cudagraph_if_incompatible``, 0.5.15+ the breakable rules: conditions the launch
    states turn the prefill graphs off before sizing, and the default fraction keeps no memory for them."""
    import dataclasses

    m = dataclasses.replace(_coder(), architectures=(arch,))
    p, plain = _sglang_with(version, m, args), _sglang_with(version, m, [])
    notes = [n for n in p.notes if "prefill CUDA graphs" in n]
    # --enable-dp-attention also costs its own reserve (max_bs x dp x 3 MiB, read before --dp-size 1 turns it
    # off: engines/sglang/engine.py dp_reserve_groups), so the fraction is compared without it
    compared = "--enable-dp-attention" not in args
    if said is None:
        assert not notes, notes
        assert p.memory_fraction == plain.memory_fraction or not compared
    else:
        assert len(notes) == 1 and said in notes[0], notes
        if arch == "LlamaForCausalLM" and compared:
            assert p.memory_fraction > plain.memory_fraction


def test_sglang_an_enforced_prefill_backend_skips_the_rules() -> None:
    """``--enforce-piecewise-cuda-graph`` returns before every rule (0.5.10-0.5.13); from 0.5.14 it is an alias of
    ``--cuda-graph-backend-prefill=tc_piecewise``, which locks the backend (``_apply_cuda_graph_compatibility``)."""
    from pytest_gpulayout.engines.sglang.prefill_graphs import prefill_graphs_off

    vl = _vl("Qwen2_5_VLForConditionalGeneration")
    for v in ("0.5.12", "0.5.16"):
        assert prefill_graphs_off(Version(v), vl, None) is not None
        assert prefill_graphs_off(Version(v), vl, None, given={"--enforce-piecewise-cuda-graph": None}) is None


@pytest.mark.parametrize(("version", "decode", "prefill"), [("0.5.13", True, True), ("0.5.14", True, False),
                                                             ("0.5.15", False, False), ("0.5.18", False, False)])
def test_sglang_disable_cuda_graph_drops_the_graph_terms_by_release(version: str, decode: bool,
                                                                    prefill: bool) -> None:
    """``--disable-cuda-graph``: 0.5.10-0.5.13 keep both terms; 0.5.14 ``_parse_cuda_graph_config`` disables the
    prefill backend, counted only when on; 0.5.15 ``_handle_gpu_memory_settings`` counts the decode graphs only
    when ``decode_cuda_graph_config.backend != Backend.DISABLED``."""
    from pytest_gpulayout.engines.sglang.engine import memory_defaults, prefill_graph_sizes

    v = Version(version)
    eager = memory_defaults(v, 81559, tp=1, pp=1, chunked_prefill_size=32768, enforce_eager=True)
    expected = 512 + 32768 * 1.5 + 1024 / 8 + (256 * 2 if decode else 0) + \
        (len(prefill_graph_sizes(32768)) * 8 if prefill else 0)
    assert eager.mem_fraction_static == round((81559 - expected) / 81559, 3)
