"""kv_pool's refusal names the cause and a fix that can work on this machine."""

from __future__ import annotations

from builders import dep, machine, subject

from pytest_gpulayout.findings import Status
from pytest_gpulayout.machine.facts import GpuProcess
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.rules.kv_pool import check_kv_pool


def test_weights_that_exceed_the_gpu_say_so_instead_of_a_memory_fraction():
    # Llama 3.1 70B in bf16 on one L4 (22.5 GiB): ~131 GiB of weights; no fraction can hold them
    f = check_kv_pool(subject(dep(tp=1, max_model_len=8192, engine_version="0.33.0"), machine(1),
                      load_model("meta-llama/Llama-3.1-70B-Instruct")))
    assert f.status is Status.FAIL
    assert "the weights alone" in f.message and "exceed GPU0's 22.49 GiB" in f.message
    assert "FP8 or quantized weights" in f.message and "Raise memory_fraction" not in f.message


def test_sglang_names_the_gpu_whose_tenant_shrinks_the_pool():
    # SGLang sizes every rank by the least free GPU: GPU1's tenant, not GPU0's weights, is the cause
    m = machine(2, free=[22221, 9000], processes={1: [GpuProcess(pid=777, name="jupyter", used_mib=13500)]})
    f = check_kv_pool(subject(dep(tp=2, engine="sglang", memory_fraction=0.88, max_model_len=4096,
                          engine_version="0.5.23"), m, load_model("Qwen/Qwen3-8B")))
    assert f.status is Status.FAIL
    assert "GPU1, where another tenant (jupyter 777)" in f.message
    assert "least free GPU" in f.message


def test_a_shortfall_prints_the_value_that_decided_rounded_down():
    from dataclasses import replace

    from pytest_gpulayout.deployment import Require
    from pytest_gpulayout.rules.kv_pool import shortfalls

    d = replace(dep(tp=1), require=Require(concurrency=4))
    unmet, _ = shortfalls(d, 32752, 3.998, 8192)
    assert unmet == ["require.concurrency 4 full 8,192-token requests: holds 3.99"]
