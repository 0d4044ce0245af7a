"""SGLang's IB device check against the serving hosts' InfiniBand devices (``engines/sglang/rules_ib.py``): each
refusal in the release's words at its line, beside the same line accepted on a host that has the devices, and
NOT JUDGED where the machine snapshot holds no node facts."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from packaging.version import Version

from pytest_gpulayout.engine import ib_hosts
from pytest_gpulayout.engines.sglang.cli import resolve
from pytest_gpulayout.engines.sglang.config_checks import config_check
from pytest_gpulayout.engines.sglang.rules_ib import RULE, groups, host_frame
from pytest_gpulayout.machine.facts import Gpu, Machine
from pytest_gpulayout.machine.nodes import IbPort, NodeFacts, node_from_dict
from pytest_gpulayout.model.load import load_model
from pytest_gpulayout.refusals import Judged, Layout
from tests.engines.sglang_line_cases import assert_verdict

SA = "sglang/srt/server_args.py"
VH = "sglang/srt/arg_groups/validation_hook.py"
PREFILL = "--disaggregation-mode prefill"
HOSTS = (("gpu-a", True, frozenset({"mlx5_0", "mlx5_1"})),)
NO_SYSFS = (("gpu-a", False, frozenset()),)
EMPTY = (("gpu-a", True, frozenset()),)
#: a second host that lacks mlx5_1: it validates on its own and refuses
TWO = (*HOSTS, ("gpu-b", True, frozenset({"mlx5_0"})))


def judge(version: str, words: str, hosts: tuple[tuple[str, bool | None, frozenset[str]], ...] | None) -> Judged:
    line = resolve(["--model-path", "Qwen/Qwen3-8B", *words.split()], Version(version))
    layout = replace(Layout(8, 1, 1, (9, 0), "NVIDIA H100 80GB HBM3", 81559), ib_hosts=hosts)
    return config_check(line, load_model("Qwen/Qwen3-8B"), layout, Version(version))


@dataclass(frozen=True)
class Case:
    version: str
    words: str
    hosts: tuple[tuple[str, bool | None, frozenset[str]], ...] | None
    refused: str | None = None
    source: str = ""
    exception: str = "ValueError"


CASES = [
    # 0.5.9 - 0.5.12: the comma-separated names against the directory
    Case("0.5.9", f"{PREFILL} --disaggregation-ib-device mlx5_0", NO_SYSFS,
         "InfiniBand sysfs path not found: /sys/class/infiniband. Please ensure InfiniBand drivers are installed.",
         f"{SA}:2627", "RuntimeError"),
    Case("0.5.9", f"{PREFILL} --disaggregation-ib-device mlx5_0", EMPTY,
         "No IB devices found in /sys/class/infiniband", f"{SA}:2634", "RuntimeError"),
    Case("0.5.9", f"{PREFILL} --disaggregation-ib-device mlx5_0,mlx5_3", HOSTS,
         "Invalid IB devices specified: ['mlx5_3']. Available devices: ['mlx5_0', 'mlx5_1']", f"{SA}:2639"),
    Case("0.5.9", f"{PREFILL} --disaggregation-ib-device mlx5_0,mlx5_1", HOSTS),
    Case("0.5.12", f"{PREFILL} --disaggregation-ib-device mlx5_1", TWO,
         "Invalid IB devices specified: ['mlx5_1']. Available devices: ['mlx5_0']", f"{SA}:4196"),
    # 0.5.13 - 0.5.18: one group for all GPUs, or an inline per-GPU mapping
    Case("0.5.13", f"{PREFILL} --disaggregation-ib-device mlx5_2", HOSTS,
         "Invalid IB devices specified for all GPUs: ['mlx5_2']", f"{SA}:4059"),
    Case("0.5.13", f"{PREFILL} --disaggregation-ib-device ,", HOSTS,
         "No valid IB devices specified for all GPUs", f"{SA}:4048"),
    Case("0.5.18", f"{PREFILL} --disaggregation-ib-device mlx5_0", NO_SYSFS,
         "InfiniBand sysfs path not found", f"{SA}:7801", "RuntimeError"),
    Case("0.5.18", f"{PREFILL} --disaggregation-ib-device mlx5_0", EMPTY,
         "No IB devices found in /sys/class/infiniband", f"{SA}:7808", "RuntimeError"),
    Case("0.5.18", f'{PREFILL} --disaggregation-ib-device {{"0":"mlx5_0","1":"mlx5_9"}}', HOSTS,
         "Invalid IB devices specified for GPU 1: ['mlx5_9']", f"{SA}:7788"),
    Case("0.5.18", f'{PREFILL} --disaggregation-ib-device {{"0":"mlx5_0","1":","}}', HOSTS,
         "No valid IB devices specified for GPU 1", f"{SA}:7777"),
    Case("0.5.18", f'{PREFILL} --disaggregation-ib-device {{"0":"mlx5_0","1":"mlx5_1"}}', HOSTS),
    # 0.5.19+: the validation hook
    Case("0.5.19", f"{PREFILL} --disaggregation-ib-device mlx5_0,mlx5_7", HOSTS,
         "Invalid IB devices specified for all GPUs: ['mlx5_7']", f"{VH}:359"),
    Case("0.5.23", f"{PREFILL} --disaggregation-ib-device mlx5_0", NO_SYSFS,
         "InfiniBand sysfs path not found", f"{VH}:538", "RuntimeError"),
    Case("0.5.23", f"{PREFILL} --disaggregation-ib-device mlx5_0", EMPTY,
         "No IB devices found in /sys/class/infiniband", f"{VH}:545", "RuntimeError"),
    Case("0.5.23", f"{PREFILL} --disaggregation-ib-device mlx5_0,mlx5_1,mlx5_0", TWO,
         "Invalid IB devices specified for all GPUs: ['mlx5_1']. Available devices: ['mlx5_0']", f"{VH}:525"),
    Case("0.5.23", f"{PREFILL} --disaggregation-ib-device ,", HOSTS,
         "No valid IB devices specified for all GPUs", f"{VH}:514"),
    Case("0.5.23", f"{PREFILL} --disaggregation-ib-device mlx5_1,mlx5_0", HOSTS),
    Case("0.5.23", "--elastic-ep-backend mooncake --mooncake-ib-device mlx5_5", HOSTS,
         "Invalid IB devices specified for all GPUs: ['mlx5_5']", f"{VH}:525"),
    # not validated: no PD mode (the flag is not read), or the mooncake_tcp backend clears it (0.5.20+)
    Case("0.5.23", "--disaggregation-ib-device mlx5_5", HOSTS),
    Case("0.5.23", f"{PREFILL} --disaggregation-transfer-backend nixl --disaggregation-ib-device mlx5_5", HOSTS),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.version}:{c.words}:{c.refused is not None}")
def test_ib_host_devices(case: Case) -> None:
    judged = judge(case.version, case.words, case.hosts)
    assert_verdict(judged, RULE, case.refused, exception=case.exception, version=case.version, source=case.source)


def test_not_probed_is_not_judged() -> None:
    """An NVML-only snapshot (no node facts): the host's devices are unknown, so the entry is said not judged."""
    judged = judge("0.5.23", f"{PREFILL} --disaggregation-ib-device mlx5_5", None)
    assert not [r for r in judged.refusals if r.rule == RULE]
    assert any(RULE in n and "no node facts" in n for n in judged.not_judged), judged.not_judged


def test_unrecorded_directory_with_no_ports_is_not_judged() -> None:
    """A snapshot from before ``infiniband_sysfs`` with no ports: missing and empty read alike, neither claimed."""
    judged = judge("0.5.23", f"{PREFILL} --disaggregation-ib-device mlx5_0", (("gpu-a", None, frozenset()),))
    assert not [r for r in judged.refusals if r.rule == RULE]
    assert any("does not say whether /sys/class/infiniband exists" in n for n in judged.not_judged)


def test_a_mapping_file_is_not_judged_after_the_directory_checks() -> None:
    """A ``.json`` path is read on the serving host: its groups are unknown, but the directory checks before it
    still refuse."""
    words = f"{PREFILL} --disaggregation-ib-device /etc/ib.json"
    judged = judge("0.5.23", words, HOSTS)
    assert not [r for r in judged.refusals if r.rule == RULE]
    assert any("/etc/ib.json on the serving host" in n for n in judged.not_judged)
    assert_verdict(judge("0.5.23", words, EMPTY), RULE, "No IB devices found", exception="RuntimeError",
                   version="0.5.23")


def test_groups_per_release() -> None:
    """Before 0.5.13 a JSON-looking string is one group of names; from 0.5.13 inline JSON is a per-GPU mapping,
    and one the parser rejects is not judged by this rule."""
    assert groups('{"0":"mlx5_0"}', Version("0.5.12")) == [("all GPUs", '{"0":"mlx5_0"}')]
    assert groups('{"0":" mlx5_0 "}', Version("0.5.13")) == [("GPU 0", "mlx5_0")]
    assert isinstance(groups('{"x":"mlx5_0"}', Version("0.5.23")), str)
    assert isinstance(groups("{bad", Version("0.5.23")), str)
    frame = host_frame("mlx5_0", Version("0.5.23"), True, frozenset({"mlx5_0"}))
    assert isinstance(frame, dict) and not any(frame[k] for k in frame if k.startswith(("not ", "len(")))


def test_snapshot_node_says_whether_the_directory_exists() -> None:
    """``infiniband_sysfs`` is read from and written back to a snapshot's node facts; absent reads None."""
    node = node_from_dict("gpu-a", {"infiniband_sysfs": False}, "snap.yaml")
    assert node.infiniband_sysfs is False
    assert node.to_json()["infiniband_sysfs"] is False
    assert node_from_dict("gpu-a", {}, "snap.yaml").infiniband_sysfs is None


def test_the_layout_carries_each_hosts_devices_only_where_every_host_was_probed() -> None:
    """``engine.ib_hosts``: the node facts of every host the deployment's GPUs are on; None for an NVML-only
    machine (no node facts) or where one host has none, so "probed, none found" differs from "not probed"."""
    a = NodeFacts("gpu-a", infiniband=(IbPort("mlx5_0", 1, "ACTIVE"),), infiniband_sysfs=True)
    b = NodeFacts("gpu-b", infiniband=(), infiniband_sysfs=True)
    gpus = [Gpu(0, host="gpu-a"), Gpu(1, host="gpu-b")]
    both = Machine(tuple(gpus), nodes={"gpu-a": a, "gpu-b": b})
    assert ib_hosts(gpus, both) == (("gpu-a", True, frozenset({"mlx5_0"})), ("gpu-b", True, frozenset()))
    assert ib_hosts(gpus, Machine(tuple(gpus), nodes={"gpu-a": a})) is None
    assert ib_hosts([Gpu(0)], Machine((Gpu(0),))) is None
    assert ib_hosts([Gpu(0)], Machine((Gpu(0),), nodes={"gpu-a": a})) == (("gpu-a", True, frozenset({"mlx5_0"})),)
