"""vLLM's runner, pooling-head, prompt-embeddings, quantization-name, 16-bit KV cache and multimodal encoder backend
refusals (``engines/vllm/rules_model3.py``): ``--runner`` against the model's class (an embedding model such as
BAAI/bge-m3 served with ``--runner generate``, a generative one with ``--runner pooling --convert none``), an
unknown ``head_dtype`` in ``--hf-overrides`` on the pooling runner, ``--enable-prompt-embeds`` on Whisper, an unknown
``--quantization`` name, ``--kv-cache-dtype float16`` on a bfloat16 model (0.33.0), ``--mm-encoder-attn-backend
XFORMERS`` and the CUDA device for the multimodal processor on LLaVA, an encode-only EC producer on a text-only model
and a model pulled from an object store with a ``--load-format`` that does not stream it. Each refused case (the
release's words, its file:line, its exception) has an accepted neighbour.

``tests/data/models/bge-m3`` is BAAI/bge-m3's config.json; ``whisper-large-v3`` is openai/whisper-large-v3's with
``num_attention_heads`` / ``hidden_size`` added (transformers' aliases of ``encoder_attention_heads`` / ``d_model``,
the same values), which the project's loader reads."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version
from vllm_line_cases import LineCase, case_id, judge, layout

from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec

#: the model configs of tests/data/models, wherever the tests are started from
MODELS_DIR = str(Path(__file__).resolve().parents[1] / "data" / "models")

RUNNER = "vllm.model.runner_unsupported"
HEAD = "vllm.pooling.head_dtype"
EMBEDS = "vllm.model.prompt_embeds_encoder_decoder"
QUANT = "vllm.model.quantization_unknown"
FLOAT_KV = "vllm.cache.float_kv_dtype_mismatch"
XFORMERS = "vllm.multimodal.encoder_attn_xformers"
DEVICE = "vllm.multimodal.processor_device"
EC = "vllm.multimodal.ec_producer_text_model"
STORE = "vllm.model.object_store_load_format"
QCFG = "vllm.quantization.config_options"
_PRODUCER = '--ec-transfer-config {"ec_connector":"ECExampleConnector","ec_role":"ec_producer"}'
_DIR = MODELS_DIR

MODELS: Mapping[str, ModelSpec] = {
    "dense": load_model("Qwen/Qwen3-8B"),
    "bge-m3": load_model(f"{_DIR}/bge-m3"),
    "whisper": load_model(f"{_DIR}/whisper-large-v3"),
    "llava": load_model(f"{_DIR}/llava-1.5-7b-hf"),
}


def model_of(name: str) -> ModelSpec:
    return MODELS[name]


_POOLING = "This model does not support `--runner pooling`. You can pass `--convert <embed|classify>"

CASES = [
    # -- --runner against the class
    LineCase(RUNNER, "0.33.0", "--runner generate", layout(), model="bge-m3",
             refused="Embedding models do not support `--runner generate`. Use `--runner pooling` or `--runner auto`",
             source="vllm/config/model.py:720"),
    LineCase(RUNNER, "0.33.0", "--runner pooling", layout(), model="bge-m3"),
    LineCase(RUNNER, "0.33.0", "--runner pooling --convert none", layout(), model="dense",
             refused=_POOLING + " to adapt it into a pooling model.", source="vllm/config/model.py:733"),
    LineCase(RUNNER, "0.33.0", "--runner pooling", layout(), model="dense"),
    LineCase(RUNNER, "0.33.0", "--convert embed", layout(), model="dense"),
    LineCase(RUNNER, "0.22.0", "--runner draft", layout(), model="bge-m3",
             refused="Embedding models do not support `--runner draft`.", source="vllm/config/model.py:593"),
    LineCase(RUNNER, "0.20.0", "--runner generate", layout(), model="bge-m3",
             refused="This model does not support `--runner generate`.", source="vllm/config/model.py:539"),
    LineCase(RUNNER, "0.20.0", "--runner draft", layout(), model="bge-m3"),
    LineCase(RUNNER, "0.11.0", "--runner pooling --convert none", layout(), model="dense",
             refused="You can pass `--convert <embed|classify|reward> to adapt it", source="vllm/config/model.py:537"),
    LineCase(RUNNER, "0.11.0", "--runner pooling --convert classify", layout(), model="dense"),
    LineCase(RUNNER, "0.10.1", "--runner generate", layout(), model="bge-m3",
             refused="This model does not support `--runner generate`.", source="vllm/config/__init__.py:692"),
    LineCase(RUNNER, "0.10.1", "--runner generate", layout(), model="dense"),
    # -- the pooling head's dtype
    LineCase(HEAD, "0.33.0", '--hf-overrides {"head_dtype":"FP77"}', layout(), model="bge-m3",
             refused="Unknown dtype: 'fp77'", source="vllm/config/model.py:2531"),
    LineCase(HEAD, "0.33.0", '--hf-overrides {"head_dtype":"Float32"}', layout(), model="bge-m3"),
    LineCase(HEAD, "0.10.2", '--hf-overrides {"head_dtype":3}', layout(), model="bge-m3",
             refused="Unknown dtype: 3", source="vllm/config/__init__.py:2794"),
    LineCase(HEAD, "0.10.2", '--hf-overrides {"head_dtype":"model"}', layout(), model="bge-m3"),
    # -- prompt embeddings on an encoder-decoder model
    LineCase(EMBEDS, "0.33.0", "--enable-prompt-embeds", layout(), model="whisper",
             refused="--enable-prompt-embeds is not supported with encoder-decoder models.",
             source="vllm/config/model.py:1079"),
    LineCase(EMBEDS, "0.33.0", "--enable-prompt-embeds", layout(), model="dense"),
    LineCase(EMBEDS, "0.29.0", "--enable-prompt-embeds", layout(), model="whisper",
             refused="--enable-prompt-embeds is not supported with encoder-decoder models.",
             source="vllm/config/model.py:944"),
    LineCase(EMBEDS, "0.29.0", "", layout(), model="whisper"),
    # -- a --quantization name the release does not know
    LineCase(QUANT, "0.33.0", "--quantization fp9", layout(),
             refused="Unknown quantization method: fp9. Must be one of ['awq', 'auto_awq', 'fp8',",
             source="vllm/config/model.py:1466"),
    LineCase(QUANT, "0.33.0", "--quantization fp8", layout()),
    LineCase(QUANT, "0.11.0", "--quantization qqq", layout(),
             refused="Unknown quantization method: qqq. Must be one of", source="vllm/config/model.py:961"),
    LineCase(QUANT, "0.10.1", "--quantization qqq", layout()),
    LineCase(QUANT, "0.10.1", "--quantization fp9", layout(),
             refused="Unknown quantization method: fp9.", source="vllm/config/__init__.py:1165"),
    # -- a 16-bit KV cache dtype other than the model's
    LineCase(FLOAT_KV, "0.33.0", "--kv-cache-dtype float16", layout(),
             refused='kv_cache_dtype="float16" is incompatible with dtype="bfloat16". Please set `--kv-cache-dtype` '
                     "to `auto` or `bfloat16`.", source="vllm/config/vllm.py:1505"),
    LineCase(FLOAT_KV, "0.33.0", "--kv-cache-dtype bfloat16", layout()),
    LineCase(FLOAT_KV, "0.33.0", "--kv-cache-dtype float16 --dtype float16", layout()),
    LineCase(FLOAT_KV, "0.33.0", "--kv-cache-dtype bfloat16", layout(), model="llava",
             refused='is incompatible with dtype="float16". Please set `--kv-cache-dtype` to `auto` or `float16`.',
             source="vllm/config/vllm.py:1505"),
    LineCase(FLOAT_KV, "0.33.0", "--kv-cache-dtype bfloat16 --dtype float32", layout(),
             refused='is incompatible with dtype="float32". Please set `--kv-cache-dtype` to `auto`.',
             source="vllm/config/vllm.py:1505"),
    # -- the multimodal encoder's removed XFORMERS backend
    LineCase(XFORMERS, "0.33.0", "--mm-encoder-attn-backend xformers", layout(), model="llava",
             refused="Attention backend 'XFORMERS' has been removed", source="vllm/config/multimodal.py:502"),
    LineCase(XFORMERS, "0.33.0", "--mm-encoder-attn-backend FLASH_ATTN", layout(), model="llava"),
    LineCase(XFORMERS, "0.33.0", "--mm-encoder-attn-backend XFORMERS", layout()),
    LineCase(XFORMERS, "0.12.0", "--mm-encoder-attn-backend XFORMERS", layout(), model="llava",
             refused="Attention backend 'XFORMERS' has been removed", source="vllm/config/multimodal.py:170"),
    # -- the multimodal processor's device
    LineCase(DEVICE, "0.33.0", '--mm-processor-kwargs {"device":"cuda:0"}', layout(), model="llava",
             refused="Cannot run the multi-modal processor on 'cuda': this instance also runs the language model.",
             source="vllm/config/multimodal.py:651"),
    LineCase(DEVICE, "0.33.0", '--mm-processor-kwargs {"device":"cpu"}', layout(), model="llava"),
    LineCase(DEVICE, "0.33.0", '--mm-processor-kwargs {"device":"cuda:0"}', layout()),
    LineCase(DEVICE, "0.33.0", '--mm-processor-kwargs {"device":"cuda:0"} ' + _PRODUCER, layout(), model="llava"),
    LineCase(DEVICE, "0.33.0", '--mm-processor-kwargs {"device":"GPU"}', layout(), model="llava",
             refused="Invalid \"device\" in mm_processor_kwargs: 'GPU'. Expected a torch device such as",
             source="vllm/config/multimodal.py:618"),
    LineCase(DEVICE, "0.28.0", "--mm-processor-device cuda", layout(), model="llava",
             refused="Cannot run the multi-modal processor on 'cuda'", source="vllm/config/multimodal.py:441"),
    LineCase(DEVICE, "0.28.0", "--mm-processor-device cpu", layout(), model="llava"),
    # -- an encode-only EC producer on a text-only model
    LineCase(EC, "0.33.0", _PRODUCER, layout(),
             refused="An EC producer-only instance requires a multimodal model.", source="vllm/config/vllm.py:2898"),
    LineCase(EC, "0.33.0", _PRODUCER, layout(), model="llava"),
    LineCase(EC, "0.29.0", _PRODUCER, layout(),
             refused="An EC producer-only instance requires a multimodal model.", source="vllm/config/vllm.py:2467"),
    LineCase(EC, "0.29.0", '--ec-transfer-config {"ec_connector":"ECExampleConnector","ec_role":"ec_both"}', layout()),
    # -- --quantization-config's own checks
    LineCase(QCFG, "0.33.0", '--quantization-config {"linear":"int8_per_channel_weight_only"}', layout(),
             refused="online shorthand 'int8_per_channel_weight_only' does not define a linear spec",
             source="vllm/config/quantization.py:146"),
    LineCase(QCFG, "0.33.0", '--quantization-config {"moe":"int8_per_channel_weight_only"}', layout()),
    LineCase(QCFG, "0.33.0", '--quantization-config {"linear":"fp8_dynamic"}', layout(),
             refused="unknown quantization name 'fp8_dynamic'; expected one of ['fp8_per_block_dynamic', ",
             source="vllm/config/quantization.py:62"),
    LineCase(QCFG, "0.33.0", '--quantization-config {"linear":{"weight":"fp8_per_channel_static",'
             '"activation":"fp8_token"}}', layout(),
             refused="unknown quantization name 'fp8_token'", source="vllm/config/quantization.py:62"),
    LineCase(QCFG, "0.33.0", '--quantization-config {"linear":{"weight":"fp8_per_channel_static",'
             '"activation":"fp8_per_token"}}', layout()),
    LineCase(QCFG, "0.33.0", '--quantization-config {"targets":{"re:.*mlp.*":"fp8_per_token"}}', layout(),
             refused="targets[re:.*mlp.*] = fp8_per_token is not a valid online shorthand name; expected one of "
                     "['fp8_per_block', 'fp8_per_channel', 'fp8_per_tensor', 'int8_per_channel_weight_only', 'mxfp4', "
                     "'mxfp8', 'nvfp4_per_token']", source="vllm/config/quantization.py:165"),
    LineCase(QCFG, "0.33.0", '--quantization-config {"targets":{"re:.*mlp.*":"fp8_per_block"}}', layout()),
    LineCase(QCFG, "0.33.0", '--quantization-config {"linear":"fp8_per_tensor","targets":{"re:.*mlp.*":"mxfp8"}}',
             layout(), refused="quantization_config.targets is mutually exclusive with quantization_config.linear/moe, "
                               "got targets={'re:.*mlp.*': 'mxfp8'}, linear=fp8_per_tensor_static, moe=None.",
             source="vllm/config/quantization.py:184"),
    LineCase(QCFG, "0.30.0", '--quantization-config {"moe":"fp8_per_block","targets":{"lm_head":"fp8_per_block"}}',
             layout(), refused="quantization_config.targets is mutually exclusive",
             source="vllm/config/quantization.py:176"),
    LineCase(QCFG, "0.29.0", '--quantization-config {"moe":"fp8_per_block"}', layout()),
    LineCase(QCFG, "0.29.0", '--quantization fp8 --quantization-config {"moe":"fp8_per_block"}', layout(),
             refused="quantization_config is only supported when quantization is one of ['fp8_per_block', "
                     "'fp8_per_channel', 'fp8_per_tensor', 'int8_per_channel_weight_only', 'mxfp4', 'mxfp8', "
                     "'nvfp4_per_token', 'online'], got quantization='fp8'", source="vllm/config/quantization.py:172"),
    LineCase(QCFG, "0.29.0", '--quantization online --quantization-config {"moe":"fp8_per_block"}', layout()),
    LineCase(QCFG, "0.30.0", '--quantization fp8 --quantization-config {"moe":"fp8_per_block"}', layout()),
    LineCase(QCFG, "0.22.0", '--quantization-config {"moe":"fp8_per_channel"}', layout(),
             refused="unknown quantization name 'fp8_per_channel'", source="vllm/config/quantization.py:43"),
    LineCase(QCFG, "0.24.0", '--quantization-config {"moe":"fp8_per_channel"}', layout()),
]

#: a model from an object store: the positional is the URI (the real-release harness gives its own positional, a
#: config-only folder, and the CPU build cannot pull from a bucket, so these are not among ``CASES``)
_MIRROR = "~/.cache/vllm/assets/model_streamer/"
STORE_CASES = [
    LineCase(STORE, "0.33.0", "s3://models/Qwen3-8B --load-format safetensors", layout(),
             refused="To load a model from object storage (S3/GCS/Azure), 'load_format' must be 'modelexpress', "
                     "'runai_streamer' or 'runai_streamer_sharded', but got 'safetensors'. Model: " + _MIRROR,
             source="vllm/config/vllm.py:2789"),
    LineCase(STORE, "0.33.0", "s3://models/Qwen3-8B", layout()),
    LineCase(STORE, "0.33.0", "gs://models/Qwen3-8B --load-format runai_streamer_sharded", layout()),
    LineCase(STORE, "0.33.0", "Qwen/Qwen3-8B --load-format safetensors", layout()),
    LineCase(STORE, "0.18.0", "az://models/Qwen3-8B --load-format pt", layout(),
             refused="but got 'pt'.", source="vllm/config/vllm.py:1576"),
    LineCase(STORE, "0.17.0", "az://models/Qwen3-8B --load-format pt", layout()),
    LineCase(STORE, "0.17.0", "gs://models/Qwen3-8B --load-format pt", layout(),
             refused="To load a model from S3, 'load_format' must be 'runai_streamer' or 'runai_streamer_sharded'",
             source="vllm/config/vllm.py:1612"),
    LineCase(STORE, "0.11.0", "s3://models/Qwen3-8B --load-format runai_streamer_sharded", layout(),
             refused="'load_format' must be 'runai_streamer', but got 'runai_streamer_sharded'",
             source="vllm/config/__init__.py:657"),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_line(case: LineCase) -> None:
    judge(case, model_of)


@pytest.mark.parametrize("case", STORE_CASES, ids=case_id)
def test_object_store(case: LineCase) -> None:
    judge(case, model_of)


def test_the_object_store_mirror_is_the_one_the_release_pulls_into() -> None:
    """``Model:`` names ``ObjectStorageModel.dir``: ``$VLLM_ASSETS_CACHE/model_streamer/`` and the URI's SHA-256
    (transformers_utils/runai_utils.py:56-68 in 0.33.0)."""
    v = Version("0.33.0")
    args = resolve("s3://models/Qwen3-8B --load-format pt".split(), v)
    judged = config_check(args, MODELS["dense"], layout(), v, env={"VLLM_ASSETS_CACHE": "/data/vllm/"})
    mine = [r for r in judged.refusals if r.rule == STORE]
    assert mine and mine[0].message.endswith("Model: /data/vllm/model_streamer/" +
                                             hashlib.sha256(b"s3://models/Qwen3-8B").hexdigest()[:8])


def _not_judged(line: str, version: str, model: str, *, known_gpu: bool = True) -> tuple[str, ...]:
    v = Version(version)
    args = resolve(line.split(), v)
    assert args.ok, args.errors
    at = layout() if known_gpu else replace(layout(), compute_capability=None)
    return config_check(args, MODELS[model], at, v).not_judged


def test_runner_auto_with_convert_none_on_a_generative_class_is_named() -> None:
    """``--convert none`` with ``--runner auto``: a Sentence Transformers ``modules.json`` (not read) may make the
    runner pooling, which refuses; the entry is named, not guessed either way."""
    notes = _not_judged("--convert none", "0.33.0", "dense")
    assert any(RUNNER in n for n in notes), notes


def test_head_dtype_off_the_pooling_runner_is_named() -> None:
    notes = _not_judged('--hf-overrides {"head_dtype":"fp77"}', "0.33.0", "dense")
    assert any(HEAD in n for n in notes), notes


def test_task_rewrites_the_runner_first_and_is_named() -> None:
    notes = _not_judged("--task embed", "0.11.0", "bge-m3")
    assert any(RUNNER in n for n in notes), notes


def test_a_target_pattern_python_cannot_compile_is_named() -> None:
    """The release compiles a ``re:`` target with ``regex``, whose verdict on a pattern Python's ``re`` refuses is
    not modelled: named, not judged."""
    notes = _not_judged('--quantization-config {"targets":{"re:(?P<x>":"mxfp8"}}', "0.33.0", "dense")
    assert any(QCFG in n for n in notes), notes


def test_float_kv_on_a_gpu_of_unknown_capability_is_named() -> None:
    """--dtype auto's choice reads the GPU's capability (bfloat16 from SM 8.0): unknown, the entry is named."""
    notes = _not_judged("--kv-cache-dtype float16", "0.33.0", "dense", known_gpu=False)
    assert any(FLOAT_KV in n for n in notes), notes


def test_defaults_say_nothing() -> None:
    for model in MODELS:
        notes = _not_judged("", "0.33.0", model)
        assert not [n for n in notes if any(r in n for r in (RUNNER, HEAD, EMBEDS, QUANT, FLOAT_KV, XFORMERS, DEVICE,
                                                                 EC, STORE, QCFG))], notes


def test_a_pooling_class_that_also_generates_takes_the_generate_runner() -> None:
    """``is_generative_model`` is the class's ``compute_logits`` (model_executor/models/interfaces_base.py:140-147 in
    0.33.0), which pooling classes built on a causal LM inherit (InternLM2ForRewardModel, internlm2.py:389): the
    release takes ``--runner generate`` there, as it refuses it on bge-m3's XLMRobertaModel, which has none. The
    interface facts say which (``text_generation``, tools/engine_facts.py)."""
    reward = replace(load_model("Qwen/Qwen3-8B"), architectures=("InternLM2ForRewardModel",))
    for model, refused in ((reward, False), (MODELS["bge-m3"], True)):
        line = resolve(["Qwen/Qwen3-8B", "--runner", "generate"], Version("0.33.0"))
        judged = config_check(line, model, layout(), Version("0.33.0"))
        assert any(r.rule == RUNNER for r in judged.refusals) is refused, (model.architectures, judged.refusals)
