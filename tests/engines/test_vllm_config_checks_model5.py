"""vLLM's check of the final quantization method against the GPU's compute capability and the served dtype
(``engines/vllm/rules_model5.py``: ``VllmConfig._get_quantization_config``). Each refused case (the release's words,
its file:line, its exception) has an accepted neighbour, on each release range where the minimum capability or the
activation dtypes differ (FP8: SM 8.0 in 0.10.1-0.11.0, SM 7.5 from 0.20)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version
from vllm_line_cases import LineCase, case_id, judge, layout

from pytest_gpulayout.engines.vllm import rules_model5
from pytest_gpulayout.engines.vllm.cli import resolve
from pytest_gpulayout.engines.vllm.config_checks import config_check
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.model.spec import ModelSpec

_DIR = Path(__file__).resolve().parent.parent / "data" / "models"
CAP = rules_model5.QUANT_CAPABILITY
DTYPE = rules_model5.QUANT_DTYPE
T4 = (7, 5)
V100 = (7, 0)

_MODELS = {
    "dense": load_model("Qwen/Qwen3-8B"),
    "fp8": load_model(f"{_DIR}/qwen3-8b-fp8"),
    "awq": load_model(f"{_DIR}/llama-3.1-8b-awq"),
    # desc_act false: from 0.32 AutoGPTQConfig refuses group activation ordering first (quantization/utils/
    # gptq_utils.py:23-36 in 0.32.0, called by from_config inside get_quant_config)
    "gptq": load_model(f"{_DIR}/llama-3.1-8b-gptq-static"),
}



def _with_attention(spec: ModelSpec) -> ModelSpec:
    """The same Nemotron-NAS config with its second block's attention kept (n_heads_in_group 8)."""
    raw = json.loads(spec.config_json)
    raw["block_configs"][1]["attention"] = {"n_heads_in_group": 8, "no_op": False, "replace_with_linear": False}
    return replace(spec, config_json=json.dumps(raw, sort_keys=True))


_MODELS["nas-noop"] = load_model(f"{_DIR}/nemotron-nas-noop")
_MODELS["nas"] = _with_attention(_MODELS["nas-noop"])
NAS = rules_model5.NAS_KV_HEADS
_MODELS["qwen2.5-vl"] = load_model(f"{_DIR}/qwen2.5-vl-7b-instruct")
_MODELS["qwen3-vl"] = replace(_MODELS["qwen2.5-vl"], architectures=("Qwen3VLForConditionalGeneration",))
PRUNE = rules_model5.VIDEO_PRUNING
_VIDCOM2 = "--video-pruning-method vidcom2 --video-pruning-rate 0.5"
ALIGN = rules_model5.ALIGN_CHUNKED_MM
_ALIGN = "--mamba-cache-mode align --disable-chunked-mm-input"
_MODELS["hybrid"] = load_model(f"{_DIR}/nemotron-h-8b")


def model_of(name: str) -> ModelSpec:
    return _MODELS[name]


CASES = [
    # FP8 (Fp8Config.get_min_capability 80 in 0.10.1-0.11.0, 75 from 0.20)
    LineCase(CAP, "0.10.1", "", layout(cc=T4), model="fp8",
             refused="The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. "
                     "Current capability: 75.", source="vllm/config/__init__.py:3453"),
    LineCase(CAP, "0.10.1", "", layout(), model="fp8"),
    LineCase(CAP, "0.11.0", "", layout(cc=T4), model="fp8",
             refused="Minimum capability: 80. Current capability: 75.", source="vllm/config/__init__.py:262"),
    LineCase(CAP, "0.33.0", "", layout(cc=V100), model="fp8",
             refused="The quantization method fp8 is not supported for the current GPU. Minimum capability: 75. "
                     "Current capability: 70.", source="vllm/config/vllm.py:931"),
    LineCase(CAP, "0.33.0", "", layout(cc=T4), model="fp8"),
    LineCase(CAP, "0.20.0", "", layout(cc=T4), model="fp8"),
    # 0.8.0-0.10.0: the plain methods as every one of those releases defines them
    LineCase(CAP, "0.9.2", "", layout(cc=T4), model="fp8",
             refused="The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. "
                     "Current capability: 75.", source="vllm/config.py:4474"),
    LineCase(CAP, "0.9.2", "", layout(), model="fp8"),
    LineCase(DTYPE, "0.8.5", "--dtype float32", layout(), model="fp8",
             refused="torch.float32 is not supported for quantization method fp8", source="vllm/config.py:3812"),
    LineCase(DTYPE, "0.8.5", "--dtype float16", layout(), model="fp8"),
    # online FP8 of an unquantized checkpoint (--quantization fp8: no override loop)
    LineCase(CAP, "0.10.1", "--quantization fp8", layout(cc=T4), model="dense",
             refused="Minimum capability: 80. Current capability: 75.", source="vllm/config/__init__.py:3453"),
    LineCase(CAP, "0.10.1", "", layout(cc=T4), model="dense"),
    # the served dtype against Fp8Config.get_supported_act_dtypes (bfloat16, half)
    LineCase(DTYPE, "0.33.0", "--dtype float32", layout(), model="fp8",
             refused="torch.float32 is not supported for quantization method fp8. Supported dtypes: "
                     "[torch.bfloat16, torch.float16]", source="vllm/config/vllm.py:939"),
    LineCase(DTYPE, "0.33.0", "--dtype float16", layout(), model="fp8"),
    LineCase(DTYPE, "0.33.0", "", layout(), model="fp8"),
    LineCase(DTYPE, "0.10.1", "--dtype float32", layout(), model="fp8",
             refused="torch.float32 is not supported for quantization method fp8",
             source="vllm/config/__init__.py:3460"),
    LineCase(DTYPE, "0.10.1", "--dtype bfloat16", layout(), model="fp8"),
    LineCase(DTYPE, "0.22.0", "--quantization fp8 --dtype float32", layout(), model="dense",
             refused="torch.float32 is not supported for quantization method fp8", source="vllm/config/vllm.py:603"),
    LineCase(DTYPE, "0.22.0", "--dtype float32", layout(), model="dense"),
    # an AWQ / GPTQ checkpoint as AutoAWQConfig (0.24+) / AutoGPTQConfig (0.22+) claim it
    LineCase(CAP, "0.33.0", "", layout(cc=V100), model="awq",
             refused="The quantization method auto_awq is not supported for the current GPU. Minimum capability: "
                     "75. Current capability: 70.", source="vllm/config/vllm.py:931"),
    LineCase(CAP, "0.33.0", "", layout(cc=T4), model="awq"),
    LineCase(DTYPE, "0.28.0", "--dtype float32", layout(), model="awq",
             refused="torch.float32 is not supported for quantization method auto_awq. Supported dtypes: "
                     "[torch.float16, torch.bfloat16]", source="vllm/config/vllm.py:783"),
    LineCase(DTYPE, "0.28.0", "--dtype float16", layout(), model="awq"),
    LineCase(DTYPE, "0.32.0", "--quantization gptq --dtype float32", layout(), model="gptq",
             refused="torch.float32 is not supported for quantization method auto_gptq. Supported dtypes: "
                     "[torch.float16, torch.bfloat16]",
             source="vllm/config/vllm.py:909"),
    LineCase(DTYPE, "0.32.0", "--dtype bfloat16", layout(), model="gptq"),
    LineCase(CAP, "0.32.0", "", layout(cc=V100), model="gptq"),
    # a Nemotron-NAS config with no attention block (get_total_num_kv_heads)
    LineCase(NAS, "0.8.3", "", layout(), model="nas-noop", refused="Couldn't determine number of kv heads",
             source="vllm/config.py:901", exception="RuntimeError"),
    LineCase(NAS, "0.8.3", "", layout(), model="nas"),
    LineCase(NAS, "0.10.2", "", layout(), model="nas-noop", refused="Couldn't determine number of kv heads",
             source="vllm/config/__init__.py:1464", exception="RuntimeError"),
    LineCase(NAS, "0.12.0", "", layout(), model="nas-noop", refused="Couldn't determine number of kv heads",
             source="vllm/config/model.py:1303", exception="RuntimeError"),
    LineCase(NAS, "0.12.0", "", layout(), model="nas"),
    LineCase(NAS, "0.13.0", "my/nas-model", layout(), model="nas-noop",
             refused="Could not determine the number of key-value attention heads from model configuration. Model: "
                     "my/nas-model, Architecture: ['DeciLMForCausalLM'].", source="vllm/config/model.py:1206",
             exception="RuntimeError"),
    LineCase(NAS, "0.13.0", "my/nas-model", layout(), model="nas"),
    LineCase(NAS, "0.14.0", "my/nas-model", layout(), model="nas-noop"),
    # vidcom2 on a class that inherits SupportsMultiModalPruning's ("evs",)
    LineCase(PRUNE, "0.27.0", _VIDCOM2, layout(), model="qwen2.5-vl",
             refused="Video pruning method 'vidcom2' is not supported by Qwen2_5_VLForConditionalGeneration "
                     "(supported methods: ('evs',)).", source="vllm/config/model.py:777"),
    LineCase(PRUNE, "0.27.0", "--video-pruning-rate 0.5", layout(), model="qwen2.5-vl"),
    LineCase(PRUNE, "0.33.0", _VIDCOM2, layout(), model="qwen2.5-vl",
             refused="Video pruning method 'vidcom2' is not supported by Qwen2_5_VLForConditionalGeneration",
             source="vllm/config/model.py:890"),
    LineCase(PRUNE, "0.33.0", "--video-pruning-method vidcom2 --video-pruning-rate 0", layout(), model="qwen2.5-vl"),
    LineCase(PRUNE, "0.33.0", _VIDCOM2, layout(), model="qwen3-vl"),
    LineCase(PRUNE, "0.33.0", _VIDCOM2, layout(), model="dense"),
    # --mamba-cache-mode align on a model the Mamba hooks leave alone
    LineCase(ALIGN, "0.15.0", _ALIGN, layout(), model="dense", refused="Chunked MM input is required because we need "
             "the flexibility to schedule a multiple of block_size tokens", source="vllm/config/vllm.py:1014",
             exception="AssertionError"),
    LineCase(ALIGN, "0.15.0", "--mamba-cache-mode align", layout(), model="dense"),
    LineCase(ALIGN, "0.18.0", _ALIGN, layout(), model="dense", refused="Chunked MM input is required",
             source="vllm/config/vllm.py:1672", exception="AssertionError"),
    LineCase(ALIGN, "0.32.0", _ALIGN, layout(), model="dense", refused="Chunked MM input is required",
             source="vllm/config/vllm.py:3279", exception="AssertionError"),
    LineCase(ALIGN, "0.32.0", "--disable-chunked-mm-input", layout(), model="dense"),
    LineCase(ALIGN, "0.33.0", _ALIGN, layout(), model="dense"),
]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_line(case: LineCase) -> None:
    judge(case, model_of)


def _judged(line: str, model: str, version: str, cc: tuple[int, int] | None = None) -> tuple[list[str], str]:
    v = Version(version)
    args = resolve(line.split(), v)
    assert args.ok, args.errors
    got = config_check(args, model_of(model), layout(cc=cc) if cc else layout(), v)
    return [r.rule for r in got.refusals], " ".join(got.not_judged)


def test_capability_refused_first() -> None:
    """The release raises the capability error before it reads the dtype: one refusal, not two."""
    rules, _ = _judged("--dtype float32", "fp8", "0.10.1", T4)
    assert CAP in rules and DTYPE not in rules


def test_no_facts_below_is_not_judged() -> None:
    """0.8.0-0.10.0 have no extracted quantization facts: beyond the plain methods read by hand the entries are
    named, never guessed."""
    rules, notes = _judged("--dtype float32", "gptq", "0.9.2", V100)
    assert CAP not in rules and DTYPE not in rules
    assert CAP in notes and DTYPE in notes


def test_awq_names_differ_not_judged() -> None:
    """Before AutoAWQConfig (0.24) an AWQ checkpoint may end as awq / awq_marlin (the Marlin override reads the
    GPU and the checkpoint), which the message names: where they disagree the entry is named, not guessed."""
    rules, notes = _judged("", "awq", "0.10.1", V100)
    assert CAP not in rules
    assert CAP in notes


def test_nas_block_not_readable_is_not_judged() -> None:
    """A block the config does not spell as a mapping: whether the loop finds attention is not known."""
    raw = json.loads(_MODELS["nas-noop"].config_json)
    raw["block_configs"][0] = "opaque"
    assert rules_model5.all_attention_no_op(raw) is None
    raw["block_configs"][0] = {"attention": {"n_heads_in_group": 8}}
    assert rules_model5.all_attention_no_op(raw) is False


def test_align_on_a_mamba_model_is_not_judged() -> None:
    """On a hybrid model the release's hook sets the mode from prefix caching: named, not refused or passed."""
    rules, notes = _judged("--disable-chunked-mm-input", "hybrid", "0.33.0")
    assert ALIGN not in rules and ALIGN in notes
    rules, notes = _judged(_ALIGN + " --max-num-batched-tokens 8", "dense", "0.18.0")
    assert ALIGN not in rules and "earlier assertions" in notes


def test_evs_only_grows_by_release() -> None:
    """CohereCompass joins the evs-only classes in 0.30; the Nemotron VL architectures print their shared class."""
    assert "CohereCompassForConditionalGeneration" not in rules_model5.evs_only(Version("0.29.0"))
    assert "CohereCompassForConditionalGeneration" in rules_model5.evs_only(Version("0.30.0"))
    assert rules_model5.evs_only(Version("0.33.0"))["NemotronH_Super_Omni_Reasoning_V3"] == "NemotronH_Nano_VL_V2"


def test_method_facts_between_releases() -> None:
    """A release between two extracted ones keeps a value only where both agree (FP8's minimum capability moved
    from 80 in 0.11.0 to 75 by 0.20.0, so 0.15.0's is not known; its dtypes are)."""
    mid = rules_model5.method_facts(Version("0.15.0"), "fp8")
    assert mid is not None and mid.min_capability is None
    assert mid.act_dtypes == ("bfloat16", "float16")
    assert rules_model5.method_facts(Version("0.33.0"), "fp8") == rules_model5.MethodFacts(75, ("bfloat16", "float16"))
    assert rules_model5.method_facts(Version("0.9.2"), "gptq") is None
    assert rules_model5.method_facts(Version("0.9.2"), "fp8") == rules_model5.MethodFacts(80, ("bfloat16", "float16"))
