"""The engine's environment packages (``engines/packages.py``) and the wheel requirements they read
(``tools/engine_requires.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from packaging.version import Version

from pytest_gpulayout.engines.packages import Presence, in_environment, node_packages
from pytest_gpulayout.knobs import Serving

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import engine_requires  # noqa: E402

METADATA = ("""Metadata-Version: 2.4
Name: vllm
Version: 9.9.0
License: Apache
        multi-line licence text
""" "        \n" """        with a blank folded line
Requires-Dist: torch==2.9.1
Requires-Dist: Ray[cgraph]>=2.48.0
Requires-Dist: xgrammar==0.1.29; platform_machine == "x86_64"
Requires-Dist: opentelemetry-sdk>=1.26; extra == "otel"
Requires-Dist: Flashinfer_Python==0.6.1

the description
Requires-Dist: not-a-header
""")


def test_requirements_keep_the_unconditional_ones_normalized() -> None:
    assert engine_requires.requirements(METADATA) == [
        ["torch", "==2.9.1", "", "x86_64,aarch64"], ["ray", ">=2.48.0", "", "x86_64,aarch64"],
        ["xgrammar", "==0.1.29", 'platform_machine == "x86_64"', "x86_64"],
        ["flashinfer-python", "==0.6.1", "", "x86_64,aarch64"]]  # fmt: skip


def test_update_writes_the_release_from_an_unpacked_wheel(tmp_path: Path) -> None:
    wheel = tmp_path / "vllm-9.9.0"
    (wheel / "vllm-9.9.0.dist-info").mkdir(parents=True)
    (wheel / "vllm-9.9.0.dist-info" / "METADATA").write_text(METADATA)
    out = engine_requires.update("vllm", [wheel], tmp_path / "requires.json")
    data = json.loads(out.read_text())
    assert data["releases"]["9.9.0"][0] == ["torch", "==2.9.1", "", "x86_64,aarch64"]


def test_the_shipped_requirements_say_what_each_release_requires() -> None:
    otel_0_16 = in_environment("vllm", Version("0.16.0"), "opentelemetry-sdk", Serving(), {})
    otel_0_17 = in_environment("vllm", Version("0.17.0"), "opentelemetry-sdk", Serving(), {})
    assert otel_0_16.presence is Presence.UNKNOWN and "does not require" in otel_0_16.where
    assert otel_0_17.presence is Presence.INSTALLED and "METADATA" in otel_0_17.where
    assert in_environment("vllm", Version("0.22.0"), "ray", Serving(), {}).presence is Presence.UNKNOWN
    assert in_environment("sglang", Version("0.5.23"), "flashinfer_python", Serving(), {}).presence \
        is Presence.INSTALLED


def test_probed_packages_count_only_where_the_engine_runs_there() -> None:
    probed = {"ray": None}
    assert in_environment("vllm", Version("0.11.0"), "ray", Serving(engine_here=True), probed).presence \
        is Presence.ABSENT
    # an image of its own: the check machine's probe says nothing of it; the wheel requires ray
    assert in_environment("vllm", Version("0.11.0"), "ray", Serving(image="x/y:1"), probed).presence \
        is Presence.INSTALLED


def test_a_marker_on_one_machine_only_is_unknown() -> None:
    found = in_environment("vllm", Version("0.15.0"), "xgrammar", Serving(), {})
    assert found.presence is Presence.INSTALLED  # x86_64, aarch64, ... all listed
    torchcodec = in_environment("sglang", Version("0.5.23"), "torchcodec", Serving(), {})
    assert torchcodec.presence is Presence.UNKNOWN and "x86_64 only" in torchcodec.where


def test_node_packages_need_every_node() -> None:
    nodes = {"a": {"ray": "2.49.0", "torch": "2.8.0"}, "b": {"ray": None, "torch": "2.8.0"}, "c": {"ray": "2.49.0",
             "torch": "2.8.0", "triton": "3.4.0"}}  # fmt: skip
    assert node_packages(nodes) == {"ray": None, "torch": "2.8.0"}
