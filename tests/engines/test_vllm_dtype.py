"""vLLM's ``--dtype`` resolution by release (``engines/vllm/dtype.py``), from the facts extracted from each wheel
(``releases/*.json``, group ``dtype``), each case as the release's source decides it:

- 0.8.x ``config.py _get_and_verify_dtype``: ``auto`` is the checkpoint's dtype, no fallback; a bfloat16 model on
  a T4 then reaches ``v1/worker/gpu_worker.py _check_if_gpu_supports_dtype``, which raises;
- 0.9.0: ``auto`` falls back to ``CudaPlatformBase.supported_dtypes[0]``, float16 below SM 8.0;
- 0.9.1+ ``_resolve_auto_dtype``: the model types of ``_FLOAT16_NOT_SUPPORTED_MODELS`` are left with float32
  (0.9.1 lists ``gemma3``; ``gemma3_text`` joins later, so Gemma-3-1B falls back to float16 on 0.9.1 and to
  float32 on 0.30);
- the float32 a release serves in doubles the weights the memory model counts (``ModelSpec.served_dtype``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from builders import dep, llama, subject
from packaging.version import Version

from pytest_gpulayout.deployment import Launch
from pytest_gpulayout.engines.vllm.dtype import platform_dtypes, resolve_dtype
from pytest_gpulayout.engines.vllm.engine import VLLM
from pytest_gpulayout.findings import Status
from pytest_gpulayout.generation import release_facts
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.memory.kv import kv_element_bytes
from pytest_gpulayout.memory.weights import weight_bytes_per_rank
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.rules.heads import check_heads

MODELS = Path(__file__).parents[1] / "data" / "models"
T4 = (7, 5)


def gemma3_12b():
    return load_model("google/gemma-3-12b-it")     # Gemma3ForConditionalGeneration: model_type gemma3


def gemma3_1b():
    return load_model(str(MODELS / "gemma-3-1b-it"))  # Gemma3ForCausalLM: model_type gemma3_text


def t4s(n: int) -> Machine:
    gpus = tuple(Gpu(index=i, uuid=f"GPU-{i:08x}", name="Tesla T4", memory_total_mib=15360, memory_free_mib=14900,
                     compute_capability=T4) for i in range(n))
    return Machine(gpus=gpus, links={(i, j): "PHB" for i in range(n) for j in range(i + 1, n)}, source="test")


def test_the_platform_dtypes_are_the_releases() -> None:
    facts = release_facts("vllm", Version("0.33.0"), group="dtype")
    assert platform_dtypes(facts, T4) == ("float16", "float32")
    assert platform_dtypes(facts, (9, 0)) == ("bfloat16", "float16", "float32")


def test_gemma3_on_a_t4_is_served_in_float32_from_091() -> None:
    res = resolve_dtype(gemma3_12b(), requested=None, version=Version("0.33.0"), cc=T4, gpu_name="Tesla T4")
    assert (res.served, res.refusal, res.doubles_weights) == ("float32", None, True)
    assert res.warning is not None and "Falling back to torch.float32 for compatibility." in res.warning
    assert "Your device 'Tesla T4' (with compute capability 7.5) doesn't support torch.bfloat16." in res.warning


def test_gemma3_on_a_t4_falls_back_to_float16_on_090() -> None:
    """0.9.0 has no model-type table: the platform's first dtype."""
    res = resolve_dtype(gemma3_12b(), requested="auto", version=Version("0.9.0"), cc=T4, gpu_name="Tesla T4")
    assert res.served == "float16" and not res.doubles_weights
    assert res.warning is not None and "Your Tesla T4 device (with compute capability 7.5) doesn't support " \
        "torch.bfloat16. Falling back to torch.float16 for compatibility." in res.warning


def test_a_bf16_model_on_a_t4_is_refused_on_08x() -> None:
    """0.8.5: no fallback; the worker refuses the checkpoint's bfloat16."""
    res = resolve_dtype(llama(), requested=None, version=Version("0.8.5"), cc=T4, gpu_name="Tesla T4")
    assert res.refusal is not None and res.served == "bfloat16"
    assert "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has " \
        "compute capability 7.5." in res.refusal
    assert "v1/worker/gpu_worker.py" in res.refusal
    on_090 = resolve_dtype(llama(), requested=None, version=Version("0.9.0"), cc=T4, gpu_name="Tesla T4")
    assert on_090.refusal is None and on_090.served == "float16"


def test_gemma3_text_joins_the_table_after_091() -> None:
    on_091 = resolve_dtype(gemma3_1b(), requested=None, version=Version("0.9.1"), cc=T4)
    on_030 = resolve_dtype(gemma3_1b(), requested=None, version=Version("0.30.0"), cc=T4)
    assert (on_091.served, on_030.served) == ("float16", "float32")


def test_a_gpu_with_bf16_keeps_bf16() -> None:
    res = resolve_dtype(gemma3_12b(), requested=None, version=Version("0.33.0"), cc=(8, 9))
    assert (res.served, res.warning, res.refusal) == ("bfloat16", None, None)


def test_an_unknown_capability_resolves_nothing() -> None:
    res = resolve_dtype(gemma3_12b(), requested=None, version=Version("0.33.0"), cc=None)
    assert res.served is None and res.note


@pytest.mark.parametrize(("version", "expect"), [("0.33.0", Status.WARN), ("0.8.5", Status.FAIL)])
def test_the_heads_check_says_float32_and_never_advises_half(version: str, expect: Status) -> None:
    d = dep("g", tp=4, engine_version=version)
    f = check_heads(subject(d, t4s(4), gemma3_12b()))
    assert f.status is expect
    if expect is Status.WARN:
        assert "float32" in f.message and "twice the weight bytes" in f.message
        assert "set --dtype half" not in f.message.lower() and "Falling back to torch.float16" not in f.message
    else:
        assert "Bfloat16 is only supported" in f.message


def test_an_explicit_bf16_is_still_refused() -> None:
    d = dep("g", tp=1, engine_version="0.33.0", launch=Launch(args=("--dtype", "bfloat16")))
    f = check_heads(subject(d, t4s(1), gemma3_12b()))
    assert f.status is Status.FAIL and "Bfloat16 is only supported" in f.message


def test_float32_doubles_the_weights_and_the_auto_kv_bytes() -> None:
    model = gemma3_12b()
    served = replace(model, served_dtype="float32")
    half = weight_bytes_per_rank(model, tp=4, pp=1, engine=VLLM.memory)
    full = weight_bytes_per_rank(served, tp=4, pp=1, engine=VLLM.memory)
    assert full == pytest.approx(2 * half, rel=0.01)
    assert (kv_element_bytes(model), kv_element_bytes(served)) == (2.0, 4.0)
