"""Startup across nodes without a cluster: the engines' argv, NCCL's transport lines (real ones, recorded in
public issues: tests/data/logs/nccl/README.md) and why the CPU build of vLLM cannot run on Ray."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpulayout.deployment import Deployment, Launch
from pytest_gpulayout.engines.registry import log_grammars
from pytest_gpulayout.engines.sglang.engine import SGLANG
from pytest_gpulayout.engines.vllm.engine import VLLM
from pytest_gpulayout.launch import logparse
from pytest_gpulayout.launch.logparse import StartupLog
from pytest_gpulayout.launch.multinode import head_argv, node_argvs, ray_head_env
from pytest_gpulayout.launch.nccl import parse_transports, transport_kind, transport_verdict


def parse_log(text: str, engine: str = "auto") -> StartupLog:
    """The whole-log parser with the registered engines' grammars (``engine``: one of them, or auto)."""
    return logparse.parse_log(text, log_grammars(engine))

LOGS = Path(__file__).parents[1] / "data" / "logs"


def lines(name: str) -> list[str]:
    return (LOGS / "nccl" / name).read_text().splitlines()


@pytest.mark.parametrize("log, counts, cross, gdr", [
    ("socket-two-nodes.log", {"socket": 8, "shm": 2}, "socket", False),
    ("ib-gdrdma.log", {"ib": 6}, "ib", True),
    ("ibext-v8.log", {"ib": 4}, "ib", False),
    ("p2p-one-host.log", {"p2p": 4}, None, False),
])
def test_transport_lines_from_real_runs(log: str, counts: dict[str, int], cross: str | None, gdr: bool) -> None:
    t = parse_transports(lines(log))
    assert t.counts == counts and t.cross_host == cross and t.gdrdma is gdr
    assert all("NCCL INFO Channel" in e for e in t.examples)


def test_socket_across_hosts_warns_with_the_fix_and_ib_passes() -> None:
    status, text = transport_verdict(parse_transports(lines("socket-two-nodes.log")), crosses_hosts=True)
    assert status == "warn" and "8 channels via NET/Socket" in text
    assert "NCCL_IB_HCA" in text and "NCCL_SOCKET_IFNAME" in text
    status, text = transport_verdict(parse_transports(lines("ib-gdrdma.log")), crosses_hosts=True)
    assert status == "pass" and "GPUDirect RDMA on" in text
    assert transport_verdict(parse_transports(lines("socket-two-nodes.log")), crosses_hosts=False)[0] == "pass"


def test_using_network_socket_alone_is_enough_to_warn() -> None:
    t = parse_transports(lines("vllm-ray-using-network-socket.log"))
    assert t.networks == ("Socket",) and not t.counts
    assert transport_verdict(t, crosses_hosts=True)[0] == "warn"
    assert transport_verdict(parse_transports([]), crosses_hosts=True)[1].startswith("no NCCL transport lines")


@pytest.mark.parametrize("via, kind", [("NET/IB/0/GDRDMA", "ib"), ("NET/IBext_v8/3", "ib"),
                                       ("NET/Socket/0", "socket"), ("NET/AWS Libfabric/0", "net"),
                                       ("P2P/IPC/read", "p2p"), ("SHM/direct/direct", "shm")])
def test_transport_kinds(via: str, kind: str) -> None:
    assert transport_kind(via) == kind


DEP = Deployment(name="d", model="/models/llama", engine="vllm", tensor_parallel_size=2, pipeline_parallel_size=2,
                 max_model_len=4096, launch=Launch(args=("--enforce-eager",), env={"X": "1"}))


def test_vllm_runs_on_the_head_with_the_ray_executor() -> None:
    argv = head_argv(VLLM.launch, DEP, "/models/llama", 8000)
    assert argv[-2:] == ["--distributed-executor-backend", "ray"]
    assert argv[argv.index("--pipeline-parallel-size") + 1] == "2" and "--enforce-eager" in argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    env = ray_head_env(DEP, "10.0.0.1:6379")
    assert env == {"NCCL_DEBUG": "INFO", "X": "1", "RAY_ADDRESS": "10.0.0.1:6379"}


def test_sglang_gets_one_process_per_node_with_its_rank() -> None:
    dep = Deployment(name="s", model="/m", engine="sglang", tensor_parallel_size=2, pipeline_parallel_size=2)
    argvs = node_argvs(SGLANG.launch, dep, "/m", 30000, head_ip="10.0.0.1", dist_port=5000, nnodes=2)
    assert len(argvs) == 2
    for rank, argv in enumerate(argvs):
        assert argv[-6:] == ["--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", "10.0.0.1:5000"]
        assert argv[argv.index("--tp-size") + 1] == "2" and argv[argv.index("--pp-size") + 1] == "2"


def test_the_cpu_build_of_vllm_refuses_the_ray_backend() -> None:
    """Recorded here: vLLM 0.32 CPU, PP=2, --distributed-executor-backend ray, two local Ray 2.60 nodes."""
    text = (LOGS / "vllm-cpu-ray" / "pp2-ray-backend.log").read_text()
    assert "ValueError: current platform cpu does not support ray." in text
    log = parse_log(text)
    assert log.error_kind == "other_error" and log.kv_tokens is None


# the verdict across hosts (launch/across.py), from recorded lines and made-up sweep answers
def _across_verdict(log: str, sweep: dict[str, dict[str, object]], base_status: str = "pass"):
    import json as _json

    from pytest_gpulayout.findings import Finding, Status
    from pytest_gpulayout.launch.across import NodeSpan, marker_env, with_nodes
    from pytest_gpulayout.launch.facts import StartupFacts
    from pytest_gpulayout.machine.facts import Machine
    from pytest_gpulayout.machine.nodes import NodeFacts

    machine = Machine(gpus=(), source="ray:10.0.0.1:6379", nodes={
        "gpu-a": NodeFacts("gpu-a", node_id="aaaa", ip="10.0.0.1", head=True),
        "gpu-b": NodeFacts("gpu-b", node_id="bbbb", ip="10.0.0.2")})
    spans = [NodeSpan("gpu-a", "aaaa", "10.0.0.1", True, (0, 1)), NodeSpan("gpu-b", "bbbb", "10.0.0.2", False, (0, 1))]
    base = Finding("startup", Status(base_status), "d: vLLM started with a KV pool of 1,000 tokens.",
                   StartupFacts(kv_tokens=1000))
    env = marker_env("id1", {"RAY_JOB_CONFIG_JSON_ENV_VAR": _json.dumps({"runtime_env": {"pip": ["x"]}})})
    assert _json.loads(env["RAY_JOB_CONFIG_JSON_ENV_VAR"])["runtime_env"] == {
        "pip": ["x"], "env_vars": {"GPULAYOUT_LAUNCH_ID": "id1"}}   # a job config already there is kept
    return with_nodes(base, spans, lines(log), sweep, machine, "id1", {"gpu-a": ["vllm", "serve"]})


CLEAN = {"aaaa": {"killed": [], "alive": []}, "bbbb": {"killed": [], "alive": []}}


def test_across_hosts_ib_passes_and_socket_warns_with_the_fix() -> None:
    f = _across_verdict("ib-gdrdma.log", CLEAN)
    assert f.status.value == "pass" and "across 2 hosts (gpu-a, gpu-b): NCCL uses InfiniBand" in f.message
    assert f.data["nodes"] == ["gpu-a", "gpu-b"] and f.data["transport"]["status"] == "pass"
    assert f.data["launch_marker"] == "GPULAYOUT_LAUNCH_ID=id1" and f.data["node_leftovers"] == {}
    f = _across_verdict("socket-two-nodes.log", CLEAN)
    assert f.status.value == "warn" and "NCCL_IB_HCA" in f.message and "NCCL_SOCKET_IFNAME" in f.message
    assert f.data["transport"]["cross_host"] == "socket"


def test_across_hosts_leftovers_warn_when_killed_and_fail_when_they_survive() -> None:
    killed = {**CLEAN, "bbbb": {"killed": [[41, "ray::RayWorkerWrapper"]], "alive": []}}
    f = _across_verdict("ib-gdrdma.log", killed)
    assert f.status.value == "warn" and "still running on gpu-b after the stop and were killed" in f.message
    assert f.data["node_leftovers"] == {"gpu-b": [41]}
    f = _across_verdict("ib-gdrdma.log", {**CLEAN, "bbbb": {"killed": [[41, "x"]], "alive": [41]}})
    assert f.status.value == "fail" and "survived SIGKILL (41)" in f.message
    f = _across_verdict("ib-gdrdma.log", {**CLEAN, "bbbb": {"error": "node died"}})
    assert f.status.value == "warn" and "could not check gpu-b" in f.message


def test_a_failed_launch_stays_failed_and_says_nothing_of_a_transport_it_did_not_see() -> None:
    f = _across_verdict("p2p-one-host.log", CLEAN, base_status="fail")
    assert f.status.value == "fail" and "NCCL" not in f.message
