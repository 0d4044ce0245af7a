"""End to end with the real engine: `pytest --gpulayout --gpulayout-launch` on a manifest whose
`launch` block starts the CPU build of vLLM with a config-only tiny model.

Everything a user's deploy pipeline touches is in the path: manifest validation, the plugin, the
static checks, the launcher, the log reader, the report file and the terminal summary.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from leaks import Snapshot
from real_engines import vllm_python

HERE = Path(__file__).resolve().parents[1]
TINY_DIR = HERE / "data" / "models" / "tiny-llama"




@pytest.mark.engine
def test_pytest_gpulayout_launch_reads_the_real_pool(pytester: pytest.Pytester, tmp_path: Path):
    python = vllm_python()
    model = pytester.path / "tiny-llama"
    shutil.copytree(TINY_DIR, model)
    cfg = json.loads((model / "config.json").read_text())
    per_token_tp2 = cfg["num_hidden_layers"] * (cfg["num_key_value_heads"] // 2) * \
        (cfg["hidden_size"] // cfg["num_attention_heads"]) * 2 * 2
    expected = (1 << 30) // per_token_tp2          # VLLM_CPU_KVCACHE_SPACE=1 -> 1 GiB per rank
    (pytester.path / "machine.yaml").write_text((HERE / "data" / "snapshots" / "two-l4.yaml").read_text())
    pytester.makefile(".yaml", gpulayout=f"""\
version: 1
machine: machine.yaml
deployments:
  tiny-tp2:
    model: ./tiny-llama
    engine: vllm
    tensor_parallel_size: 2
    max_model_len: 512
    require:
      kv_tokens: {expected}
      tp_links: [PHB]
    launch:
      enabled: true
      command: ["{python}", -m, vllm.entrypoints.openai.api_server]
      args: [--skip-tokenizer-init, --enforce-eager]
      env:
        VLLM_CPU_KVCACHE_SPACE: "1"
        VLLM_CPU_OMP_THREADS_BIND: "0|1"
      timeout_s: 400
""")
    report = tmp_path / "report.json"
    # this launch's processes: the model's path is in the API server's command line, and the rest are its
    # descendants or share its session (vLLM retitles them VLLM::EngineCore, VLLM::Worker); another
    # engine on the machine, titled the same, is not this launch's (round 4, item 6)
    before = Snapshot.take(markers=(str(model),))
    result = pytester.runpytest_subprocess("--gpulayout", "-v", "-p", "no:cacheprovider",
                                           f"--gpulayout-report={report}", timeout=600)
    out = result.stdout.str()
    assert "pytest_gpulayout/checks/test_startup.py::test_startup[tiny-tp2] PASSED" in out, out[-3000:]
    startup = json.loads(report.read_text())["deployments"]["tiny-tp2"]["checks"]["startup"]
    assert startup["status"] == "pass"
    assert startup["data"]["kv_tokens"] == expected
    assert startup["data"]["error_kind"] is None
    assert startup["data"]["seconds_to_kv"] > 0
    assert f"{expected:,}" in startup["message"]
    summary = out[out.index("= gpulayout ="):]
    assert "tiny-tp2" in summary and f"pass {expected / 1000:.0f}k tok" in summary
    # nothing of the engine is left
    try:
        assert before.wait_clean(10) == []
    finally:
        before.kill_strays()
