"""vLLM's model, cache and multimodal config-time refusals (``engines/vllm/rules_model.py``): a ``--max-model-len``
above the length the release derives from the model's config (its length keys, ``model_max_length``, the RoPE
scaling by release, the sliding window with ``--disable-sliding-window``, ``--hf-overrides``), refused unless
``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``, and up to 0.11.2 ``--disable-sliding-window`` on a scaled RoPE;
``--quantization`` against the checkpoint's method and the deprecated methods; the multimodal flags on a text-only
model and ``MultiModalConfig``'s own checks; the external launcher's seed; 0.33.0's ``--kv-cache-dtype`` list. Each
refused case (the release's words, its file:line, its exception) has an accepted neighbour."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from packaging.version import Version
from vllm_line_cases import layout

from pytest_gpulayout.deployment import Launch
from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check
from pytest_gpulayout.engines.vllm.served import served_model
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.model.config import spec_from_config
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec
from pytest_gpulayout.runner import evaluate
from tests.builders import dep

#: the model configs of tests/data/models, wherever the tests are started from
MODELS_DIR = str(Path(__file__).resolve().parents[1] / "data" / "models")

LEN = "vllm.model.max_len_above_derived"
SWA = "vllm.model.disable_sliding_window_unsupported"
QUANT = "vllm.model.quantization_mismatch"
MM = "vllm.model.mm_flags_text_only"
PROC = "vllm.multimodal.processor_flags"
DEPRECATED = "vllm.model.quantization_deprecated"
SEED = "vllm.model.external_launcher_needs_seed"
KV_DTYPE = "vllm.cache.kv_cache_dtype_unknown"
RENDERER = "vllm.multimodal.renderer_workers_with_cache"
IPC = "vllm.multimodal.torch_shm_ipc_parallel"
_MODELS_DIR = MODELS_DIR

_LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 128256,
    "max_position_embeddings": 8192, "rope_theta": 500000.0, "torch_dtype": "bfloat16",
}
#: Qwen3-8B with the YaRN scaling its model card gives for 131,072 tokens
_YARN = {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
#: Mistral-7B-v0.1's shape: a 4,096-token window on every layer, 32,768 positions
_MISTRAL: dict[str, Any] = {**_LLAMA, "architectures": ["MistralForCausalLM"], "model_type": "mistral",
                            "max_position_embeddings": 32768, "sliding_window": 4096, "rope_theta": 10000.0}


def _spec(cfg: Mapping[str, Any], name: str) -> ModelSpec:
    return spec_from_config(cfg, name=name, source=f"test:{name}")


MODELS: Mapping[str, ModelSpec] = {
    "qwen3": load_model("Qwen/Qwen3-8B"),
    "llama-linear": _spec({**_LLAMA, "rope_scaling": {"type": "linear", "factor": 2.0}}, "llama-linear"),
    "llama-mml": _spec({**_LLAMA, "model_max_length": 16384}, "llama-mml"),
    "mistral": _spec(_MISTRAL, "mistral"),
    "mistral-0": _spec({**_MISTRAL, "sliding_window": 0}, "mistral-0"),
    "mistral-rope": _spec({**_MISTRAL, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, "mistral-rope"),
    "fp8": load_model(f"{_MODELS_DIR}/qwen3-8b-fp8"),
    "awq": load_model(f"{_MODELS_DIR}/llama-3.1-8b-awq"),
    "gptq": load_model(f"{_MODELS_DIR}/llama-3.1-8b-gptq"),
    "w8a8": load_model(f"{_MODELS_DIR}/llama-3.1-70b-w8a8"),
    "llava": load_model(f"{_MODELS_DIR}/llava-1.5-7b-hf"),
    "fbgemm": _spec({**_LLAMA, "quantization_config": {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                                                       "modules_to_not_convert": []}}, "llama-fbgemm"),
}


@dataclass(frozen=True)
class Case:
    rule: str
    version: str
    line: str
    model: str = "qwen3"
    refused: str | None = None       # the release's words (a part); None: the rule refuses nothing
    source: str | None = None
    exception: str = "ValueError"
    env: Mapping[str, str] = field(default_factory=dict)


def _id(c: Case) -> str:
    return f"{c.rule.removeprefix('vllm.model.')}-{c.version}-{c.model}-{'refused' if c.refused else 'passes'}"


def _judge(c: Case) -> None:
    version = Version(c.version)
    args = resolve(c.line.split(), version)
    assert args.ok, args.errors
    model = served_model(MODELS[c.model], args, version, c.env)
    tp = args.get("tensor_parallel_size")
    judged = config_check(args, model, layout(tp=tp if isinstance(tp, int) else 1), version, env=c.env)
    mine = [r for r in judged.refusals if r.rule == c.rule]
    assert not [n for n in judged.not_judged if c.rule in n], judged.not_judged
    if c.refused is None:
        assert not mine, [r.text("vLLM") for r in mine]
        return
    assert mine, judged
    r = mine[0]
    assert c.refused in r.message, r.message
    assert r.exception == c.exception
    if c.source:
        assert r.source == c.source
    assert r.text("vLLM").startswith(f"vLLM {c.version} raises {c.exception}")


_YARN_FLAG = "--hf-overrides " + json.dumps(_YARN, separators=(",", ":"))
_TOO_LONG_033 = ("User-specified max_model_len (50000) is greater than the derived max_model_len "
                 "(max_position_embeddings=40960.0 or model_max_length=None in model's config.json). To allow "
                 "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. "
                 "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution.")

CASES = [
    # the plain length: 40,960 positions (an int up to 0.11.2, a float once rope_parameters scales it by 1.0)
    Case(LEN, "0.33.0", "Qwen/Qwen3-8B --max-model-len 50000", refused=_TOO_LONG_033,
         source="vllm/config/model.py:2680"),
    Case(LEN, "0.33.0", "Qwen/Qwen3-8B --max-model-len 40960"),
    Case(LEN, "0.33.0", "Qwen/Qwen3-8B --max-model-len 50000", env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}),
    Case(LEN, "0.33.0", "Qwen/Qwen3-8B --max-model-len 50000", env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "True"}),
    Case(LEN, "0.8.0", "Qwen/Qwen3-8B --max-model-len 50000", source="vllm/config.py:2729",
         refused="User-specified max_model_len (50000) is greater than the derived max_model_len "
                 "(max_position_embeddings=40960 or model_max_length=None in model's config.json). This may lead to "
                 "incorrect model outputs or CUDA errors. To allow overriding this maximum, set the env var "
                 "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"),
    Case(LEN, "0.8.0", "Qwen/Qwen3-8B --max-model-len 40960"),
    Case(LEN, "0.10.2", "Qwen/Qwen3-8B --max-model-len 41000", source="vllm/config/__init__.py:2943",
         refused="(max_position_embeddings=40960 or model_max_length=None in model's config.json). To allow"),
    # YaRN through --hf-overrides: up to 0.29 original_max_position_embeddings x factor (131,072); from 0.30 the
    # factor is not applied again, so 40,960 stays the limit
    Case(LEN, "0.29.0", f"Qwen/Qwen3-8B {_YARN_FLAG} --max-model-len 131072"),
    Case(LEN, "0.29.0", f"Qwen/Qwen3-8B {_YARN_FLAG} --max-model-len 131073", source="vllm/config/model.py:2517",
         refused="User-specified max_model_len (131073) is greater than the derived max_model_len "
                 "(max_position_embeddings=131072.0 or model_max_length=None"),
    Case(LEN, "0.30.0", f"Qwen/Qwen3-8B {_YARN_FLAG} --max-model-len 131072", source="vllm/config/model.py:2540",
         refused="User-specified max_model_len (131072) is greater than the derived max_model_len "
                 "(max_position_embeddings=40960.0 or model_max_length=None"),
    Case(LEN, "0.30.0", f"Qwen/Qwen3-8B {_YARN_FLAG} --max-model-len 40960"),
    Case(LEN, "0.9.2", f"Qwen/Qwen3-8B {_YARN_FLAG} --max-model-len 131072"),
    # linear scaling doubles the length in every release
    Case(LEN, "0.33.0", "llama --max-model-len 16384", model="llama-linear"),
    Case(LEN, "0.33.0", "llama --max-model-len 16385", model="llama-linear",
         refused="(max_position_embeddings=16384.0 or model_max_length=None"),
    Case(LEN, "0.9.0", "llama --max-model-len 16385", model="llama-linear",
         refused="(max_position_embeddings=16384.0 or model_max_length=None"),
    # model_max_length replaces the smallest key from 0.8.3 (before, it only lets a longer line pass)
    Case(LEN, "0.8.3", "llama --max-model-len 16384", model="llama-mml"),
    Case(LEN, "0.8.3", "llama --max-model-len 16385", model="llama-mml",
         refused="(model_max_length=16384 or model_max_length=16384 in model's config.json)"),
    Case(LEN, "0.8.0", "llama --max-model-len 16384", model="llama-mml"),
    Case(LEN, "0.8.0", "llama --max-model-len 16385", model="llama-mml",
         refused="(max_position_embeddings=8192 or model_max_length=16384 in model's config.json)"),
    # --disable-sliding-window caps the length at the window
    Case(LEN, "0.33.0", "mistral --max-model-len 8192 --disable-sliding-window", model="mistral",
         refused="(sliding_window=4096.0 or model_max_length=None", source="vllm/config/model.py:2680"),
    Case(LEN, "0.33.0", "mistral --max-model-len 8192", model="mistral"),
    Case(LEN, "0.33.0", "mistral --max-model-len 4096 --disable-sliding-window", model="mistral"),
    Case(LEN, "0.9.2", "mistral --max-model-len 8192 --disable-sliding-window", model="mistral",
         refused="(sliding_window=4096 or model_max_length=None"),
    # a window of 0 (none): before 0.19 --disable-sliding-window caps the length at that 0, from 0.19 it reads as None
    Case(LEN, "0.18.0", "mistral --max-model-len 4096 --disable-sliding-window", model="mistral-0",
         refused="(sliding_window=0.0 or model_max_length=None"),
    Case(LEN, "0.19.0", "mistral --max-model-len 4096 --disable-sliding-window", model="mistral-0"),
    # up to 0.11.2: --disable-sliding-window on a scaled RoPE is not implemented (gone in 0.12.0)
    Case(SWA, "0.11.0", "mistral --disable-sliding-window", model="mistral-rope", exception="NotImplementedError",
         refused="Disabling sliding window is not supported for models with rope_scaling.",
         source="vllm/config/model.py:1851"),
    Case(SWA, "0.8.0", "mistral --disable-sliding-window", model="mistral-rope", exception="NotImplementedError",
         refused="Disabling sliding window is not supported for models with rope_scaling.",
         source="vllm/config.py:2683"),
    Case(SWA, "0.11.0", "mistral", model="mistral-rope"),
    Case(SWA, "0.11.0", "mistral --disable-sliding-window", model="mistral"),
    Case(SWA, "0.12.0", "mistral --disable-sliding-window", model="mistral-rope"),
    # within model_max_length but above the window's cap: not implemented either
    Case(SWA, "0.8.0", "mistral --max-model-len 8192 --disable-sliding-window --hf-overrides "
         '{"model_max_length":16384}', model="mistral", exception="NotImplementedError",
         refused="Disabling sliding window is not supported for models model_max_length in the config."),
    # --quantization against the checkpoint's quantization_config: no override claims an fp8 / compressed-tensors
    # checkpoint, nor an AWQ / GPTQ one for a method outside its family
    Case(QUANT, "0.33.0", "m --quantization awq", model="fp8", source="vllm/config/model.py:1457",
         refused="Quantization method specified in the model config (fp8) does not match the quantization method "
                 "specified in the `quantization` argument (awq)."),
    Case(QUANT, "0.33.0", "m --quantization fp8", model="fp8"),
    Case(QUANT, "0.33.0", "m", model="fp8"),
    Case(QUANT, "0.8.0", "m --quantization fp8", model="awq", source="vllm/config.py:648",
         refused="Quantization method specified in the model config (awq) does not match the quantization method "
                 "specified in the `quantization` argument (fp8)."),
    Case(QUANT, "0.8.0", "m --quantization awq", model="awq"),
    Case(QUANT, "0.20.0", "m --quantization awq", model="gptq", source="vllm/config/model.py:1003",
         refused="model config (gptq) does not match the quantization method specified in the `quantization` "
                 "argument (awq)."),
    Case(QUANT, "0.10.1", "m --quantization fp8", model="w8a8", source="vllm/config/__init__.py:1157",
         refused="model config (compressed-tensors) does not match"),
    Case(QUANT, "0.10.1", "m --quantization compressed-tensors", model="w8a8"),
    Case(QUANT, "0.33.0", "m --quantization fp8", model="qwen3"),
    # the multimodal flags on a class the release's registry knows as text-only (0.8.0-0.10.0)
    Case(MM, "0.9.2", "m --limit-mm-per-prompt image=2", source="vllm/config.py:708",
         refused="`limit_mm_per_prompt` is only supported for multimodal models."),
    Case(MM, "0.9.2", "m --limit-mm-per-prompt image=2", model="llava"),
    Case(MM, "0.9.2", "m"),
    Case(MM, "0.10.0", "m --interleave-mm-strings", source="vllm/config.py:784",
         refused="`interleave_mm_strings` is only supported for multimodal models."),
    Case(MM, "0.10.0", "m --interleave-mm-strings", model="llava"),
    Case(MM, "0.10.1", 'm --limit-mm-per-prompt {"image":2}'),
    Case(MM, "0.8.0", "m --limit-mm-per-prompt image=2", model="llama-linear",
         refused="`limit_mm_per_prompt` is only supported for multimodal models."),
    # MultiModalConfig's own checks, on a multimodal model only (a text-only one never builds it)
    Case(PROC, "0.11.1", "m --mm-shm-cache-max-object-size-mb 256", model="llava",
         source="vllm/config/multimodal.py:190",
         refused="'mm_shm_cache_max_object_size_mb' should only be set when 'mm_processor_cache_type' is 'shm'."),
    Case(PROC, "0.11.1", "m --mm-shm-cache-max-object-size-mb 256 --mm-processor-cache-type shm", model="llava"),
    Case(PROC, "0.33.0", "m --mm-shm-cache-max-object-size-mb 256"),
    Case(PROC, "0.33.0", "m --mm-encoder-fp8-scale-path /scales.json", model="llava",
         source="vllm/config/multimodal.py:530",
         refused="'mm_encoder_fp8_scale_path' and 'mm_encoder_fp8_scale_save_path' require 'mm_encoder_attn_dtype' "
                 "to be 'fp8'."),
    Case(PROC, "0.21.0", "m --mm-encoder-attn-dtype fp8 --mm-encoder-fp8-scale-path /s.json "
         "--mm-encoder-fp8-scale-save-path /t.json", model="llava", source="vllm/config/multimodal.py:269",
         refused="'mm_encoder_fp8_scale_save_path' cannot be used with 'mm_encoder_fp8_scale_path'"),
    Case(PROC, "0.21.0", "m --mm-encoder-attn-dtype fp8 --mm-encoder-fp8-scale-save-path /t.json", model="llava"),
    # a deprecated method, the flag's or the checkpoint's, unless --allow-deprecated-quantization (0.14+)
    Case(DEPRECATED, "0.33.0", "m", model="fbgemm", source="vllm/config/model.py:1480",
         refused="The quantization method %s is deprecated and will be removed in future versions of vLLM. To "
                 "bypass, set `--allow-deprecated-quantization`."),
    Case(DEPRECATED, "0.33.0", "m --allow-deprecated-quantization", model="fbgemm"),
    Case(DEPRECATED, "0.13.0", "m", model="fbgemm"),
    Case(DEPRECATED, "0.16.0", "m --quantization experts_int8", source="vllm/config/model.py:950",
         refused="The quantization method %s is deprecated"),
    Case(DEPRECATED, "0.20.0", "m --quantization experts_int8"),
    Case(DEPRECATED, "0.33.0", "m --quantization fp8", model="fp8"),
    # the external launcher asserts a seed: 0.8.3-0.8.5 keep --seed's None, 0.9.0-0.11.0 set 0 under V1 only
    Case(SEED, "0.8.5", "m --distributed-executor-backend external_launcher", source="vllm/config.py:926",
         exception="AssertionError", refused="Seed must be set when using external launcher backend to make sure "
                                             "sampling results are the same across workers."),
    Case(SEED, "0.8.5", "m --distributed-executor-backend external_launcher --seed 1"),
    Case(SEED, "0.10.0", "m --distributed-executor-backend external_launcher", exception="AssertionError",
         env={"VLLM_USE_V1": "0"}, refused="Seed must be set when using external launcher backend"),
    Case(SEED, "0.10.0", "m --distributed-executor-backend external_launcher"),
    Case(SEED, "0.11.1", "m --distributed-executor-backend external_launcher", env={"VLLM_USE_V1": "0"}),
    # 0.33.0's parser takes any --kv-cache-dtype; CacheConfig's validator refuses one outside KV_CACHE_DTYPES
    Case(KV_DTYPE, "0.33.0", "m --kv-cache-dtype fp8_e4m3fn", source="vllm/config/cache.py:472",
         refused="Invalid kv_cache_dtype: 'fp8_e4m3fn'. Valid values are: ['auto', 'float16', 'bfloat16', 'fp8', "),
    Case(KV_DTYPE, "0.33.0", "m --kv-cache-dtype fp8_e4m3"),
    Case(KV_DTYPE, "0.33.0", "m --kv-cache-dtype nvfp4"),
    # several renderer workers share the multimodal processor cache: refused up to 0.26, for pooling only from 0.27
    Case(RENDERER, "0.19.0", "m --renderer-num-workers 2", model="llava", source="vllm/config/model.py:654",
         refused="Cannot use --renderer-num-workers > 1 with the multimodal processor cache enabled."),
    Case(RENDERER, "0.19.0", "m --renderer-num-workers 2 --mm-processor-cache-gb 0", model="llava"),
    Case(RENDERER, "0.19.0", "m --renderer-num-workers 2"),
    Case(RENDERER, "0.27.0", "m --renderer-num-workers 2", model="llava"),
    # torch_shm tensor IPC is one process's: refused beyond one rank
    Case(IPC, "0.33.0", "m --mm-tensor-ipc torch_shm --tensor-parallel-size 2", model="llava",
         refused="mm_tensor_ipc='torch_shm' is not supported with data_parallel_size > 1 or tensor_parallel_size > 1 "
                 "or pipeline_parallel_size > 1."),
    Case(IPC, "0.19.0", "m --mm-tensor-ipc torch_shm --tensor-parallel-size 2", model="llava",
         refused="mm_tensor_ipc='torch_shm' is not supported"),
    Case(IPC, "0.33.0", "m --mm-tensor-ipc torch_shm", model="llava"),
    Case(IPC, "0.33.0", "m --mm-tensor-ipc torch_shm --tensor-parallel-size 2"),
]


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_the_release_refuses_the_model_line_in_its_own_words(case: Case) -> None:
    _judge(case)


def test_every_model_rule_has_a_refusing_and_an_accepted_case() -> None:
    refusing = {c.rule for c in CASES if c.refused is not None}
    accepted = {c.rule for c in CASES if c.refused is None}
    assert refusing == accepted == {LEN, SWA, QUANT, MM, PROC, DEPRECATED, SEED, KV_DTYPE, RENDERER, IPC}


def test_a_length_the_release_cannot_derive_here_is_named_not_guessed() -> None:
    """A YaRN config without original_max_position_embeddings (before 0.30 the release raises KeyError): the
    entry is not judged, and says what it read."""
    cfg = {**_LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    version = Version("0.20.0")
    args = resolve("llama --max-model-len 100000".split(), version)
    judged = config_check(args, _spec(cfg, "llama-yarn"), layout(), version)
    assert not [r for r in judged.refusals if r.rule == LEN]
    assert any(LEN in n and "derived_max_model_len" in n for n in judged.not_judged), judged.not_judged


@pytest.mark.parametrize(("version", "refused"), [("0.29.0", True), ("0.30.0", False)])
def test_the_scheduler_sees_the_length_the_release_derives(version: str, refused: bool) -> None:
    """A line without --max-model-len runs at the derived length: with YaRN over Qwen3-8B 131,072 up to 0.29,
    40,960 from 0.30, so chunked prefill off with a 65,536-token batch is refused by 0.29 only."""
    v = Version(version)
    args = resolve(f"Qwen/Qwen3-8B {_YARN_FLAG} --no-enable-chunked-prefill --max-num-batched-tokens 65536".split(), v)
    assert args.ok, args.errors
    judged = config_check(args, served_model(MODELS["qwen3"], args, v, {}), layout(), v)
    assert bool([r for r in judged.refusals if r.rule == "vllm.scheduler.batched_below_max_len"]) is refused


@pytest.mark.parametrize("flag", ["awq_marlin", "marlin", "moe_wna16"])
def test_a_flag_an_override_may_claim_the_checkpoint_for_is_named_not_guessed(flag: str) -> None:
    """An AWQ checkpoint with --quantization awq_marlin / marlin / moe_wna16: the release's override renames both
    where the checkpoint suits its kernels, so the comparison is not judged (and nothing is refused)."""
    version = Version("0.33.0")
    args = resolve(f"m --quantization {flag}".split(), version)
    judged = config_check(args, MODELS["awq"], layout(), version)
    assert not [r for r in judged.refusals if r.rule == QUANT]
    assert any(QUANT in n and "quant_method" in n for n in judged.not_judged), judged.not_judged


def test_a_class_no_extracted_release_knows_leaves_the_multimodal_flags_not_judged() -> None:
    """Qwen3 is not in 0.8.0's registry (it came in 0.8.5): whether it is multimodal is not known there."""
    version = Version("0.8.0")
    args = resolve("m --limit-mm-per-prompt image=2".split(), version)
    judged = config_check(args, MODELS["qwen3"], layout(), version)
    assert not [r for r in judged.refusals if r.rule == MM]
    assert any(MM in n and "limit_mm_per_prompt" in n for n in judged.not_judged), judged.not_judged


def test_a_checkpoint_an_override_may_rename_to_a_deprecated_method_is_named_not_judged() -> None:
    """0.14-0.15 deprecate gptq_bitblas / gptq_marlin_24, names an override can give a GPTQ checkpoint: which one
    it settles on is not modelled, so the entry says what it read. An AWQ checkpoint's overrides give none, nor
    does --quantization gptq on a GPTQ checkpoint (only AutoGPTQConfig takes that flag, from 0.22)."""
    version = Version("0.15.0")
    judged = config_check(resolve(["m"], version), MODELS["gptq"], layout(), version)
    assert not [r for r in judged.refusals if r.rule == DEPRECATED]
    assert any(DEPRECATED in n and "self.quantization" in n for n in judged.not_judged), judged.not_judged
    for model, line in (("awq", ["m"]), ("gptq", ["m", "--quantization", "gptq"])):
        judged = config_check(resolve(line, version), MODELS[model], layout(), version)
        assert not [r for r in judged.refusals if r.rule == DEPRECATED]
        assert not [n for n in judged.not_judged if DEPRECATED in n], judged.not_judged


@pytest.mark.parametrize("version", ["0.8.0", "0.8.4", "0.8.5", "0.10.0", "0.11.0"])
@pytest.mark.parametrize(("flag", "value"), [("--dtype", "fp16"), ("--tokenizer-mode", "fast"),
                                             ("--kv-cache-dtype", "fp8_e4m3fn"), ("--prefix-caching-hash-algo", "md5")])
def test_a_value_the_checks_call_unreachable_is_refused_by_the_parse_first(version: str, flag: str, value: str) -> None:
    """The entries ``config_classes.yaml`` answers as unreachable for these flags: the release's parser limits each
    to the values its check accepts, so an unknown value stops at the parse, in the parser's words."""
    v = Version(version)
    if flag == "--prefix-caching-hash-algo" and v < Version("0.8.3"):
        pytest.skip("no such flag before 0.8.3")
    args = resolve(["m", flag, value], v)
    assert not args.ok and "invalid choice" in args.errors[0], args.errors


@pytest.mark.parametrize(("version", "length"), [("0.29.0", 131072), ("0.33.0", 40960)])
def test_the_pool_is_judged_at_the_length_the_release_derives(version: str, length: int) -> None:
    """A line without --max-model-len runs at the derived length: Qwen3-8B with a YaRN override, 131,072 tokens up
    to 0.29 and 40,960 from 0.30, and the served model says so."""
    gpus = (Gpu(0, name="NVIDIA H100 80GB HBM3", memory_total_mib=81559, memory_free_mib=80959,
                memory_reserved_mib=500),)
    d = dep("d", tp=1, engine_version=version, max_model_len=None,
            launch=Launch(args=("--hf-overrides", json.dumps(_YARN)), env=MappingProxyType({})))
    f = evaluate(d, Machine(gpus=gpus, links={}, source="test:h100"), load_model("Qwen/Qwen3-8B"))
    assert f["kv_pool"].data["max_model_len"] == length, f["kv_pool"].message
