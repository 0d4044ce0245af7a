"""SGLang's hybrid SWA pool by release (``engines/sglang/hybrid_swa.py``): GPT-OSS's sliding layers get their own,
smaller pool only where the release gives it (its model runner from 0.4.9.post3, off for GPT-OSS in 0.5.0rc0-0.5.7,
off with trtllm_mha (the SM100 default) in 0.5.8-0.5.9 and with speculative decoding in 0.5.8, on from 0.5.10),
and Llama 4 only from 0.5.8 (before, only with --hybrid-kvcache-ratio). Where SGLang uses one pool, the project
predicts one pool: the two-pool prediction was a pool the engine does not have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from pytest_gpulayout.cli import main
from pytest_gpulayout.engines.sglang.hybrid_swa import hybrid_swa
from pytest_gpulayout.model.load import load_model

GPT_OSS = load_model("openai/gpt-oss-20b")
H100, B200 = (9, 0), (10, 0)


@pytest.mark.parametrize(("version", "given", "cc", "on"), [
    ("0.4.10.post2", {}, H100, True),        # model_runner.py: every sliding-window model but Llama 4
    ("0.5.3", {}, H100, False),              # server_args.py:781: GPT-OSS's branch turns it off
    ("0.5.7", {}, B200, False),
    ("0.5.8", {}, H100, True),               # fa3 on SM90
    ("0.5.8", {}, B200, False),              # trtllm_mha, the SM100 default
    ("0.5.8", {"--attention-backend": "triton"}, B200, True),
    ("0.5.8", {"--decode-attention-backend": "trtllm_mha"}, H100, False),
    ("0.5.8", {"--speculative-algorithm": "EAGLE3"}, H100, False),
    ("0.5.9", {"--speculative-algorithm": "EAGLE3"}, H100, True),
    ("0.5.9", {}, None, False),              # the default backend is the GPU's: unknown, the smaller pool
    ("0.5.10", {}, B200, True),
    ("0.5.23", {"--disable-hybrid-swa-memory": None}, B200, False),
])
def test_gpt_oss_by_release(version: str, given: dict[str, str | None], cc: tuple[int, int] | None,
                            on: bool) -> None:
    decided = hybrid_swa(Version(version), GPT_OSS, given, cc)
    assert decided.on is on, decided
    assert on or decided.why


B200_SNAPSHOT = """version: 1
host: b200-node
driver: "580.95.05"
gpus:
  - {index: 0, uuid: GPU-0b200000-0000-0000-0000-000000000000, name: NVIDIA B200, pci_bus_id: "00000000:01:00.0",
     memory_total_mib: 183359, memory_free_mib: 182500, numa_node: 0, mig: false, processes: []}
links: {}
"""


def _pool(tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str) -> int:
    (tmp_path / "b200.yaml").write_text(B200_SNAPSHOT)
    (tmp_path / "gpulayout.yaml").write_text(
        "version: 1\nmachine: b200.yaml\ndeployments:\n  d:\n    model: openai/gpt-oss-20b\n"
        f"    engine: sglang\n    engine_version: '{version}'\n    max_model_len: 8192\n")
    main(["check", str(tmp_path / "gpulayout.yaml"), "--json"])
    kv = json.loads(capsys.readouterr().out)["deployments"]["d"]["checks"]["kv_pool"]
    assert "predicted KV pool " in kv["message"], kv
    return int(kv["message"].split("predicted KV pool ")[1].split(" tokens")[0].replace(",", ""))


def test_gpt_oss_on_b200_gets_one_pool_in_0_5_8_and_two_in_0_5_10(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """On SM100 0.5.8 picks trtllm_mha and turns the hybrid pool off: half of GPT-OSS's layers are sliding, so its
    one pool holds (12 + 12) cells a token against (12 + 0.8 x 12) in the hybrid pool of 0.5.10."""
    one = _pool(tmp_path, capsys, "0.5.8")
    two = _pool(tmp_path, capsys, "0.5.10")
    assert one < two
    assert two / one == pytest.approx(24 / 21.6, rel=0.02)
