"""Startup across nodes without a cluster: the engines' argv, NCCL's transport lines (real ones, recorded in
public issues: tests/data/logs/nccl/README.md) and why the CPU build of vLLM cannot run on Ray."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpulayout.deployment import Deployment, Launch
from pytest_gpulayout.launch.logparse import parse_log
from pytest_gpulayout.launch.multinode import sglang_node_argvs, vllm_ray_argv, vllm_ray_env
from pytest_gpulayout.launch.nccl import parse_transports, transport_kind, transport_verdict

LOGS = Path(__file__).parent / "data" / "logs"


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
    argv = vllm_ray_argv(DEP, "/models/llama", 8000)
    assert argv[-2:] == ["--distributed-executor-backend", "ray"]
    assert argv[argv.index("--pipeline-parallel-size") + 1] == "2" and "--enforce-eager" in argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    env = vllm_ray_env(DEP, "10.0.0.1:6379")
    assert env == {"NCCL_DEBUG": "INFO", "X": "1", "RAY_ADDRESS": "10.0.0.1:6379"}


def test_sglang_gets_one_process_per_node_with_its_rank() -> None:
    dep = Deployment(name="s", model="/m", engine="sglang", tensor_parallel_size=2, pipeline_parallel_size=2)
    argvs = sglang_node_argvs(dep, "/m", 30000, head_ip="10.0.0.1", dist_port=5000, nnodes=2)
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
