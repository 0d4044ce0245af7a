"""vLLM's HiSparseConnector host_pool_gib (0.30+, config/kv_transfer.py:16-47) and its AuxOutput connector
(returned routed experts) on a runner other than generate (``engines/vllm/rules_post5.py``, config/vllm.py:1203-1204
in 0.33.0, 1176-1177 in 0.31.0): each refused case (the release's words, its file:line, its exception) has an
accepted neighbour; --runner auto on a text-generation class leaves the repository's Sentence Transformers config
to decide (not judged), and a host_pool_gib that float() cannot convert leaves the size check not judged."""

from __future__ import annotations

import pytest
from packaging.version import Version
from vllm_line_cases import EnvCase, LineCase, case_id, judge, layout, model_of

from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check

AUX = "vllm.model.aux_output_generate_runner"
ROUTED = "--enable-return-routed-experts"
V2_RUNNER = (("VLLM_USE_V2_MODEL_RUNNER", "1"),)
V1_RUNNER = (("VLLM_USE_V2_MODEL_RUNNER", "0"),)
HISPARSE = "vllm.kv_transfer.hisparse_connector_host_pool"
POOL = "vllm.kv_transfer.hisparse_host_pool_positive"


def hisparse(extra: str) -> str:
    return f'--kv-transfer-config {{"kv_connector":"HiSparseConnector","kv_role":"kv_both",' \
           f'"kv_connector_extra_config":{{{extra}}}}}'


def multi(*extras: str) -> str:
    inner = ",".join(f'{{"kv_connector":"HiSparseConnector","kv_connector_extra_config":{{{e}}}}}' for e in extras)
    return f'--kv-transfer-config {{"kv_connector":"MultiConnector","kv_role":"kv_both",' \
           f'"kv_connector_extra_config":{{"connectors":[{inner}]}}}}'


# config/kv_transfer.py:37-46 (0.30.0-0.33.0)
CASES = [
    LineCase(HISPARSE, "0.33.0", hisparse(""), layout(),
             refused="HiSparseConnector requires host_pool_gib", source="vllm/config/kv_transfer.py:43"),
    LineCase(HISPARSE, "0.33.0", hisparse('"host_pool_gib":8'), layout()),
    LineCase(HISPARSE, "0.30.0", multi('"host_pool_gib":8', '"host_pool_gib":4'), layout(),
             refused="Only one HiSparseConnector may be configured", source="vllm/config/kv_transfer.py:38"),
    LineCase(HISPARSE, "0.30.0", multi('"host_pool_gib":8'), layout()),
    LineCase(POOL, "0.33.0", hisparse('"host_pool_gib":0'), layout(),
             refused="HiSparseConnector host_pool_gib must be positive", source="vllm/config/kv_transfer.py:46"),
    LineCase(POOL, "0.30.0", hisparse('"host_pool_gib":"-1"'), layout(),
             refused="HiSparseConnector host_pool_gib must be positive", source="vllm/config/kv_transfer.py:46"),
    LineCase(POOL, "0.33.0", hisparse('"host_pool_gib":0.5'), layout()),
    # not in force before 0.30 (no HiSparse)
    LineCase(HISPARSE, "0.29.0", hisparse(""), layout()),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_line(case: LineCase) -> None:
    judge(case)


def test_unconvertible_host_pool_is_not_judged() -> None:
    """A host_pool_gib float() refuses in its own words: the size check is named, not passed."""
    version = Version("0.33.0")
    args = resolve(hisparse('"host_pool_gib":"lots"').split(), version)
    judged = config_check(args, model_of("dense"), layout(), version)
    assert not [r for r in judged.refusals if r.rule in (HISPARSE, POOL)]
    assert any(POOL in n for n in judged.not_judged), judged.not_judged

#: every case names the V2 model runner: the check follows the V1-runner refusal, and with --runner pooling the
#: runner choice is the release's own (not resolved), so without the variable the entry is not reached here
ENV_CASES = [
    EnvCase(LineCase(AUX, "0.33.0", f"{ROUTED} --runner pooling", layout(), model="moe",
                     refused="AuxOutput Connector only supports generate runners.",
                     source="vllm/config/vllm.py:1204"), V2_RUNNER),
    EnvCase(LineCase(AUX, "0.33.0", f"{ROUTED} --runner generate", layout(), model="moe"), V2_RUNNER),
    EnvCase(LineCase(AUX, "0.33.0", "--runner pooling", layout(), model="moe"), V2_RUNNER),
    EnvCase(LineCase(AUX, "0.32.0", f"{ROUTED} --runner pooling", layout(), model="moe",
                     refused="AuxOutput Connector only supports generate runners.",
                     source="vllm/config/vllm.py:1152"), V2_RUNNER),
    EnvCase(LineCase(AUX, "0.31.0", f"{ROUTED} --runner pooling", layout(), model="moe",
                     refused="AuxOutput Connector only supports generate runners.",
                     source="vllm/config/vllm.py:1177"), V2_RUNNER),
    EnvCase(LineCase(AUX, "0.31.0", f"{ROUTED} --runner generate", layout(), model="moe"), V2_RUNNER),
    # not in force before 0.31 (0.30's routed-experts check reads only the KV connector)
    EnvCase(LineCase(AUX, "0.30.0", f"{ROUTED} --runner pooling", layout(), model="moe"), V2_RUNNER),
    # the V1 model runner is refused first (rules_post2), this check is not reached
    EnvCase(LineCase(AUX, "0.33.0", f"{ROUTED} --runner pooling", layout(), model="moe"), V1_RUNNER),
]


@pytest.mark.parametrize("item", ENV_CASES, ids=lambda i: case_id(i.case))
def test_env_line(item: EnvCase) -> None:
    judge(item.case, env=item.env)


def test_auto_runner_on_a_generation_class_is_not_judged() -> None:
    """--runner auto on a text-generation MoE class: a Sentence Transformers config in the repository (not read)
    would make it pooling, so the entry is named, not passed."""
    version = Version("0.33.0")
    args = resolve(ROUTED.split(), version)
    judged = config_check(args, model_of("moe"), layout(), version, env=dict(V2_RUNNER))
    assert not [r for r in judged.refusals if r.rule == AUX]
    assert any("generate runners" in n or AUX in n for n in judged.not_judged), judged.not_judged
